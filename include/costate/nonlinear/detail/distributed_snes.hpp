#pragma once
// Internals of the distributed nonlinear::solve (distributed.hpp): an
// opaque handle on the PETSc objects of one distributed Newton solve —
// the ghosted vectors (VecCreateGhost), the parallel AIJ Jacobian on the
// rows this rank owns, SNES, and the KSP that solves with ∂F/∂x at the
// solution (and its transpose) for the derivatives. Defined in
// solvers/petsc/snes_distributed.cpp, the only place that includes PETSc.
// Not a public header.

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/sparsity.hpp"
#include "costate/nonlinear/options.hpp"
#include "costate/nonlinear/summary.hpp"

namespace costate::nonlinear {
struct DistributedLayout;
}

namespace costate::nonlinear::detail {

/// The double-valued distributed problem: callbacks see this rank's
/// extended vector (owned entries, then ghosts in DistributedLayout::ghosts
/// order) and fill this rank's rows.
struct DistributedCallbacks {
  /// r_local = F_local(x_extended).
  std::function<void(std::span<const double> x_extended, std::span<double> r_local)> residual;
  /// The local Jacobian rows' values, in the order of the local pattern
  /// (CSR over extended columns) given to DistributedSnes.
  std::function<void(std::span<const double> x_extended, std::span<double> values)> jacobian;
};

/// Result of a linear solve with ∂F/∂x (or its transpose) at the solution.
struct LinearSolveReport {
  bool converged = true;
  int iterations = 0;
  std::string message;  ///< KSP converged reason
};

class DistributedSnes {
 public:
  /// Collective over layout.comm. Validates the layout collectively (every
  /// rank throws if one rank's part is malformed) and creates the ghosted
  /// vectors.
  DistributedSnes(const DistributedLayout& layout, const Options& options);
  ~DistributedSnes();
  DistributedSnes(const DistributedSnes&) = delete;
  DistributedSnes& operator=(const DistributedSnes&) = delete;

  /// Creates the parallel Jacobian, preallocated from `local_pattern`
  /// (owned rows × extended columns, mapped to global columns), and SNES.
  /// Collective; once, before solve().
  void set_pattern(const ad::SparsityPattern& local_pattern);

  /// Owned entries followed by the ghost values (one ghost exchange).
  /// Collective.
  std::vector<double> extend(std::span<const double> x_local) const;

  /// SNES from x_local (in: x₀, out: the last iterate). Fills termination,
  /// iterations, residual history and norms, tolerance and message.
  /// Collective; a callback's exception on any rank is rethrown on every
  /// rank after SNESSolve.
  Summary solve(const DistributedCallbacks& callbacks, std::vector<double>& x_local);

  /// Assembles ∂F/∂x from `values` (local pattern order) and sets it as the
  /// operator of the derivative KSP (the SNES's KSP: same type, PC and
  /// options). Collective.
  void set_linearisation(std::span<const double> values);
  /// (∂F/∂x) out = rhs, or (∂F/∂x)ᵀ out = rhs, with the linearisation.
  /// Collective.
  LinearSolveReport solve_linear(std::span<const double> rhs, std::span<double> out,
                                 bool transpose) const;

  /// Structural non-zeros of the global Jacobian and the largest number of
  /// colours of a rank's local Jacobian.
  std::int64_t global_nonzeros() const;
  int ranks() const;
  /// "petsc snes newtonls, ksp preonly/lu (mumps) on 2 ranks".
  const std::string& description() const;

  /// The PETSc side (opaque here; public so the PETSc callbacks can reach it).
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace costate::nonlinear::detail
