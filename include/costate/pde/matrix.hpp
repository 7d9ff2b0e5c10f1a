#pragma once
/// \file
/// pde::Matrix and pde::KrylovSolver — the PETSc matrix of a pde::Grid
/// (preallocated by the DMDA for the grid's stencil: star or box, width,
/// dof) and a Krylov solver on it, for the implicit steps and their
/// adjoints:
///     forward:  A x = b       (KSPSolve)
///     adjoint:  Aᵀ μ = λ      (KSPSolveTranspose, same preconditioner)
///
/// Entries are set in the grid's LOCAL (ghosted) numbering (Grid::
/// local_index); PETSc maps them to global rows/columns, periodic wrap-around
/// included. Only entries inside the stencil may be set (the preallocation).
///
/// Collective over the grid's communicator: construction, assemble(),
/// products, shifted_copy_of(), and every KrylovSolver member. Owns its
/// PETSc objects; move-only. The Grid must outlive its matrices and solvers.
/// No PETSc header is included here: the handles are opaque.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "costate/linear/ksp_options.hpp"
#include "costate/linear/summary.hpp"
#include "costate/pde/grid.hpp"

namespace costate::pde {

class Matrix {
 public:
  /// A zero matrix with the stencil's non-zero pattern. Collective.
  explicit Matrix(const Grid& grid);
  ~Matrix();
  Matrix(Matrix&&) noexcept;
  Matrix& operator=(Matrix&&) noexcept;

  /// Sets all stored entries to zero (pattern kept). Not collective.
  void zero();
  /// Inserts one row: entries (row, cols[e]) = values[e], in local
  /// indexing. Not collective; call assemble() after the last row.
  void set_row(std::int64_t row, std::span<const std::int64_t> cols,
               std::span<const double> values);
  /// Finishes insertion. Collective.
  void assemble();
  /// this = a I + b B (B assembled, same grid). Collective.
  void shifted_copy_of(const Matrix& b_matrix, double a, double b);
  /// y = A x  /  y = Aᵀ x. Collective.
  void mult(const GlobalVector& x, const GlobalVector& y) const;
  void mult_transpose(const GlobalVector& x, const GlobalVector& y) const;
  /// Row r of this rank (global numbering) as (global column, value) pairs,
  /// columns ascending. For tests. Not collective.
  std::vector<std::pair<std::int64_t, double>> global_row(std::int64_t row) const;
  /// First global row this rank owns (PETSc numbering: rank-contiguous).
  std::int64_t first_row() const;
  /// PETSc's global row of local index l (−1 for an outer boundary ghost).
  std::int64_t global_of_local(std::int64_t l) const;

  const Grid& grid() const { return *grid_; }
  void* petsc_mat() const;  ///< opaque `Mat`, for solvers/ only

 private:
  struct Impl;
  const Grid* grid_;
  std::unique_ptr<Impl> impl_;
};

/// PETSc KSP on a pde::Matrix. The preconditioner is built by
/// set_operator() and reused by every solve with A and Aᵀ until the next
/// set_operator(). Settings from linear::KspOptions, then the options
/// database (prefix included) overrides them.
class KrylovSolver {
 public:
  KrylovSolver(const Grid& grid, const linear::KspOptions& options = {});
  ~KrylovSolver();
  KrylovSolver(KrylovSolver&&) noexcept;
  KrylovSolver& operator=(KrylovSolver&&) noexcept;

  /// Uses `a` (which must outlive the solver's use of it) and builds the
  /// preconditioner from its current values. Collective.
  void set_operator(const Matrix& a);
  /// x = A⁻¹ b; x is the initial guess when `guess` is set (else zero).
  linear::Summary solve(const GlobalVector& b, const GlobalVector& x, bool guess = false) const;
  /// x = A⁻ᵀ b (a plain solve when set_operator found A exactly symmetric).
  linear::Summary solve_transpose(const GlobalVector& b, const GlobalVector& x,
                                  bool guess = false) const;
  /// "petsc ksp gmres/bjacobi on 2 ranks"
  const std::string& description() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace costate::pde
