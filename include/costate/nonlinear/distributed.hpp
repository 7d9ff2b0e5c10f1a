#pragma once
/// \file
/// nonlinear::solve on a distributed layout — the root x(p) of F(x, p) = 0
/// with the unknowns split over the ranks of an MPI communicator, solved by
/// PETSc SNES and differentiated implicitly, exactly as the serial
/// nonlinear::solve (solve.hpp):
///
///     tangent:  (∂F/∂x) ẋ = −(∂F/∂p) ṗ              (KSPSolve with ∂F/∂x at x*)
///     adjoint:  (∂F/∂x)ᵀ λ = x̄;   p̄_r −= (∂F_r/∂p)ᵀ λ_r   (KSPSolveTranspose; ONE tape node per rank)
///
/// Layout (DistributedLayout). Rank r owns the contiguous block of global
/// unknowns [first, first + owned) (ranks in order) and the residual rows
/// with the same indices. The residual of its rows may read its owned
/// entries and a declared list of ghost unknowns (global indices owned by
/// other ranks; any unstructured set — PETSc VecCreateGhost / VecScatter
/// does the exchange, no grid is assumed). The local residual is written
/// once, templated on the scalar type, over the EXTENDED vector: the owned
/// entries x_e[0 .. owned) followed by the ghosts x_e[owned + g] =
/// x[ghosts[g]]:
///
///     struct LocalBratu {   // rows first .. first + owned − 1 of −u'' = λ eᵘ
///       template <class T>
///       void operator()(std::span<const T> x_e, std::span<const T> p, std::span<T> r) const;
///     };
///     nonlinear::DistributedLayout layout{.comm = MPI_COMM_WORLD, .global_size = n,
///                                         .first = first, .owned = owned, .ghosts = ghosts};
///     auto sol = nonlinear::solve(LocalBratu{...}, layout, x0_owned, p,
///                                 {.backend = nonlinear::Backend::PetscSnes});
///     sol.x;   // the owned entries of x*, of p's scalar type
///
/// The Jacobian rows of a rank come from costate's AD on that local
/// function: the sparsity of the owned × extended block is detected once at
/// x₀ (ad::IndexSet) and its columns coloured; each Jacobian is ⌈colours/8⌉
/// evaluations on ad::Dual<double, 8>, mapped to global column indices and
/// assembled into a parallel PETSc AIJ matrix. SNES: newtonls with the bt
/// line search, the test of options.hpp, and a direct solve by default
/// (preonly + lu; on more than one rank with MUMPS when PETSc has it, else
/// gmres + bjacobi/ilu to rtol 1e-12); everything overridable from PETSc's
/// options database (-snes_*, -ksp_*, -pc_*, with Options::options_prefix).
/// The derivatives use the SNES's KSP with ∂F/∂x assembled again at x*
/// (the last Newton Jacobian is at the previous iterate).
///
/// On the tape (T = ad::Real). Parameters are REPLICATED: every rank holds
/// the same p (checked: a mismatch throws on every rank). The solution is
/// distributed: each rank gets its owned entries as ad::Real. Each rank
/// records one node (inputs p, outputs its owned x), and the reverse sweep
/// adds to its p̄ only ITS part (∂F_r/∂p)ᵀ λ_r (rows r of F). The gradient
/// of a global objective J = Σ_r J_r (each rank seeding its own J_r) is then
/// Σ_r p̄_r: sum p's adjoints over the ranks with
/// nonlinear::sum_parameter_gradient (deterministic, rank order). This is
/// the convention that composes: every other use of p on a rank (a direct
/// term of J_r, another solve) also leaves a per-rank part on the same
/// tape, and one final sum adds them all — an in-node sum would count the
/// solve's part once per rank. With T = ad::Dual<double, N> the tangents
/// ẋ (owned entries) need no reduction.
///
/// Collective: the call, and for ad::Real the reverse and forward sweeps
/// (every rank calls Tape::evaluate() / evaluate_forward() together) and
/// Tape::reset() (it destroys PETSc objects). Whether a node is recorded is
/// decided collectively. Outcomes and errors as in solve.hpp: a solve that
/// did not converge is data; differentiating it throws unless
/// Options::differentiate_unconverged; bad input throws costate::Error on
/// every rank (a malformed layout on one rank included).
///
/// Limitations: Options::backend must be Backend::PetscSnes (the other
/// backends are serial); every rank must own at least one unknown; the
/// ghost list must contain every off-rank unknown the local residual reads
/// — costate cannot check that (the residual maps global indices to slots
/// of the extended span itself; a ghost it forgot is its own indexing
/// error); ghosts are validated (in range, not owned by the rank, unique);
/// 32-bit PETSc indices (global size < 2³¹). Options::jacobian and
/// dense_limit are ignored (always sparse; the local pattern is detected at
/// x₀ as in solve.hpp, so the code path at x₀ must touch every entry).
/// Summary: global counts of one rank's view (iterations and norms are
/// global; evaluations are this rank's), jacobian_nonzeros of the global
/// matrix, jacobian_colors the largest over the ranks.

#include <Eigen/SparseCore>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/core/error.hpp"
#include "costate/linear/detail/ad_scalar.hpp"
#include "costate/nonlinear/detail/distributed_snes.hpp"
#include "costate/nonlinear/detail/jacobian.hpp"
#include "costate/nonlinear/options.hpp"
#include "costate/nonlinear/solve.hpp"
#include "costate/nonlinear/summary.hpp"
#include "costate/tensor/reduce.hpp"

namespace costate::nonlinear {

/// Which unknowns a rank owns and which others its residual reads. Plain
/// data, owned by the caller; a solve copies what it needs.
struct DistributedLayout {
  MPI_Comm comm = MPI_COMM_WORLD;
  std::int64_t global_size = 0;       ///< n, the number of unknowns (= equations)
  std::int64_t first = 0;             ///< global index of this rank's first owned unknown
  std::int64_t owned = 0;             ///< unknowns (and residual rows) this rank owns (> 0)
  std::vector<std::int64_t> ghosts;   ///< global indices read but owned elsewhere (unique)

  /// The block of a contiguous, near-even split of n unknowns: rank r owns
  /// [n r / size, n (r + 1) / size). Collective (MPI_Comm_rank/size only).
  static DistributedLayout split(MPI_Comm comm, std::int64_t n) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    DistributedLayout l;
    l.comm = comm;
    l.global_size = n;
    l.first = n * rank / size;
    l.owned = n * (rank + 1) / size - l.first;
    return l;
  }
  /// Extended size: owned + ghosts.
  std::int64_t extended() const { return owned + static_cast<std::int64_t>(ghosts.size()); }
};

/// Σ over the ranks of p's adjoints (p replicated, each rank's p̄ holding its
/// part; see the file comment), added in rank order: the same bits on every
/// rank and every run. Collective over comm.
inline std::vector<double> sum_parameter_gradient(MPI_Comm comm, std::span<const ad::Real> p) {
  std::vector<double> g(p.size());
  for (std::size_t k = 0; k < p.size(); ++k) g[k] = p[k].gradient();
  global_sum(comm, g.data(), g.size());
  return g;
}

namespace detail {

/// ∂F/∂x at x*, its factorisation (kept by the SNES's KSP) and ∂F/∂p
/// products, for the tangent and adjoint rules of a distributed solve.
template <class Fref>
class DistributedDerivative {
 public:
  DistributedDerivative(std::shared_ptr<DistributedSnes> snes, Residual<Fref> residual,
                        std::vector<double> x_extended, bool dense_fp, bool allow_failed)
      : snes_(std::move(snes)),
        residual_(std::move(residual)),
        x_(std::move(x_extended)),
        allow_failed_(allow_failed) {
    std::vector<double> values(static_cast<std::size_t>(residual_.pattern()->nnz()));
    jacobian_values(residual_, x_, values);
    snes_->set_linearisation(values);
    if (dense_fp) fp_ = residual_.parameter_jacobian(x_);
    has_fp_ = dense_fp;
  }

  /// The local rows of (∂F/∂p) ṗ.
  Eigen::VectorXd jvp(std::span<const double> pdot) const {
    if (has_fp_)
      return fp_ * Eigen::Map<const Eigen::VectorXd>(pdot.data(), static_cast<Eigen::Index>(pdot.size()));
    return residual_.parameter_jvp(x_, pdot);
  }
  /// p̄ −= (∂F_r/∂p)ᵀ λ_r (this rank's rows).
  void subtract_vjp(std::span<const double> lambda, std::span<double> pbar) const {
    if (has_fp_) {
      const Eigen::VectorXd g =
          fp_.transpose() * Eigen::Map<const Eigen::VectorXd>(lambda.data(), static_cast<Eigen::Index>(lambda.size()));
      for (std::size_t k = 0; k < pbar.size(); ++k) pbar[k] -= g[static_cast<Eigen::Index>(k)];
    } else {
      const std::vector<double> g = residual_.parameter_vjp(x_, lambda);
      for (std::size_t k = 0; k < pbar.size(); ++k) pbar[k] -= g[k];
    }
  }
  /// (∂F/∂x) out = rhs or its transpose; throws if the KSP fails (unless allowed).
  void solve(std::span<const double> rhs, std::span<double> out, bool transpose) const {
    const LinearSolveReport rep = snes_->solve_linear(rhs, out, transpose);
    if (!rep.converged && !allow_failed_)
      throw Error(std::string("nonlinear::solve (distributed): the ") +
                  (transpose ? "adjoint (transposed)" : "tangent") +
                  " linear solve with dF/dx at the solution did not converge (" + rep.message +
                  " after " + std::to_string(rep.iterations) +
                  " iterations); choose a direct solver (-pc_type lu -pc_factor_mat_solver_type "
                  "mumps) or a stronger preconditioner, or set Options::differentiate_unconverged");
  }

  /// The local Jacobian's values in the local pattern's CSR order.
  template <class R>
  static void jacobian_values(const R& residual, std::span<const double> x, std::span<double> values) {
    Eigen::SparseMatrix<double> j;
    residual.sparse_jacobian(x, j);
    const Eigen::SparseMatrix<double, Eigen::RowMajor> rows = j;  // structure = pattern, CSR order
    COSTATE_CHECK_EQ(static_cast<std::size_t>(rows.nonZeros()), values.size(),
                     "nonlinear::solve (distributed): Jacobian structure differs from its pattern");
    std::copy(rows.valuePtr(), rows.valuePtr() + rows.nonZeros(), values.begin());
  }

 private:
  std::shared_ptr<DistributedSnes> snes_;
  Residual<Fref> residual_;
  std::vector<double> x_;
  Eigen::MatrixXd fp_;
  bool has_fp_ = false;
  bool allow_failed_ = false;
};

/// Throws on every rank when any rank's check failed: a collective check.
inline void check_all_ranks(MPI_Comm comm, bool ok, const std::string& message) {
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, comm);
  if (!ok) throw Error(message);
  if (any)
    throw Error("nonlinear::solve (distributed): another rank reported bad input (see its error); "
                "this rank's input is fine");
}

}  // namespace detail

/// Solves the distributed F(x, p) = 0 from this rank's owned x₀ and
/// differentiates the solution implicitly (see the file comment). F is the
/// LOCAL residual over the extended vector; T = double, ad::Dual<double, N>
/// or ad::Real, replicated on every rank. Returns this rank's owned entries
/// of x and the summary (global counts; colours: the largest over the
/// ranks). Collective over layout.comm. Throws costate::Error (on every
/// rank) on bad input, when differentiating a solve that did not converge
/// (unless allowed), and on a failed derivative solve.
template <class F, class T>
Solution<T> solve(const F& f, const DistributedLayout& layout, const std::vector<double>& x0,
                  const std::vector<T>& p, const Options& options = {}) {
  static_assert(linear::detail::is_supported_scalar_v<T>,
                "nonlinear::solve: parameters must be double, ad::Dual<double, N> or ad::Real");
  const MPI_Comm comm = layout.comm;
  {
    std::string problem;
    try {
      options.validate();
    } catch (const Error& e) {
      problem = e.what();
    }
    if (problem.empty() && options.backend != Backend::PetscSnes)
      problem = "nonlinear::solve (distributed): Options::backend = " + to_string(options.backend) +
                " is serial; a distributed solve runs on PETSc SNES: set backend = petsc_snes";
    if (problem.empty() && layout.owned <= 0)
      problem = "nonlinear::solve (distributed): DistributedLayout::owned = " +
                std::to_string(layout.owned) + " on this rank; every rank must own at least one unknown";
    if (problem.empty() && static_cast<std::int64_t>(x0.size()) != layout.owned)
      problem = "nonlinear::solve (distributed): x0 has " + std::to_string(x0.size()) +
                " entries but this rank owns " + std::to_string(layout.owned) +
                " unknowns (DistributedLayout::owned); pass the owned part of the initial guess";
    for (std::size_t i = 0; i < x0.size() && problem.empty(); ++i)
      if (!std::isfinite(x0[i]))
        problem = "nonlinear::solve (distributed): x0[" + std::to_string(i) + "] (global " +
                  std::to_string(layout.first + static_cast<std::int64_t>(i)) + ") = " +
                  costate::detail::format_value(x0[i]) + " is not finite";
    for (std::size_t k = 0; k < p.size() && problem.empty(); ++k)
      if (!std::isfinite(linear::detail::value_of(p[k])))
        problem = "nonlinear::solve (distributed): parameter p[" + std::to_string(k) + "] = " +
                  costate::detail::format_value(linear::detail::value_of(p[k])) + " is not finite";
    detail::check_all_ranks(comm, problem.empty(), problem);
  }
  // Parameters are replicated: every rank must hold rank 0's values.
  std::vector<double> pv(p.size());
  for (std::size_t k = 0; k < p.size(); ++k) pv[k] = linear::detail::value_of(p[k]);
  {
    unsigned long long count = pv.size();
    MPI_Bcast(&count, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
    std::string problem;
    if (count != pv.size()) {
      problem = "nonlinear::solve (distributed): this rank has " + std::to_string(pv.size()) +
                " parameters, rank 0 has " + std::to_string(count) +
                "; parameters are replicated: pass the same p on every rank";
    }
    detail::check_all_ranks(comm, problem.empty(), problem);
    std::vector<double> p0 = pv;
    if (!p0.empty()) MPI_Bcast(p0.data(), static_cast<int>(p0.size()), MPI_DOUBLE, 0, comm);
    for (std::size_t k = 0; k < pv.size() && problem.empty(); ++k)
      if (p0[k] != pv[k])
        problem = "nonlinear::solve (distributed): parameter p[" + std::to_string(k) + "] = " +
                  costate::detail::format_value(pv[k]) + " differs from rank 0's " +
                  costate::detail::format_value(p0[k]) +
                  "; parameters are replicated: pass the same p on every rank";
    detail::check_all_ranks(comm, problem.empty(), problem);
  }

  const auto t_start = detail::Clock::now();
  const int nl = static_cast<int>(layout.owned);
  detail::Residual<const F&> residual(f, pv, nl);
  // The layout (validated collectively) and the ghost exchange first: the
  // pattern is detected on the extended x₀.
  auto snes = std::make_shared<detail::DistributedSnes>(layout, options);
  const std::vector<double> x_ext0 = snes->extend(x0);
  double seconds_jacobian = 0.0;
  {
    const auto t0 = detail::Clock::now();
    std::string problem;
    try {
      residual.detect_sparsity(x_ext0, false);
    } catch (const Error& e) {
      problem = e.what();
    }
    detail::check_all_ranks(comm, problem.empty(), problem);
    seconds_jacobian += detail::seconds_since(t0);
  }
  snes->set_pattern(*residual.pattern());

  int residual_evaluations = 0, jacobian_evaluations = 0;
  detail::DistributedCallbacks callbacks;
  callbacks.residual = [&](std::span<const double> xe, std::span<double> r) {
    ++residual_evaluations;
    residual.residual(xe, r);
  };
  callbacks.jacobian = [&](std::span<const double> xe, std::span<double> values) {
    const auto t0 = detail::Clock::now();
    ++jacobian_evaluations;
    detail::DistributedDerivative<const F&>::jacobian_values(residual, xe, values);
    seconds_jacobian += detail::seconds_since(t0);
  };
  std::vector<double> x = x0;
  Summary s = snes->solve(callbacks, x);
  s.unknowns = static_cast<int>(layout.global_size);
  s.residual_evaluations = residual_evaluations;
  s.jacobian_evaluations = jacobian_evaluations;
  s.seconds_jacobian = seconds_jacobian;
  s.sparse_jacobian = true;
  {
    int colors = residual.colors(), max_colors = 0;
    MPI_Allreduce(&colors, &max_colors, 1, MPI_INT, MPI_MAX, comm);
    s.jacobian_colors = max_colors;
  }
  s.jacobian_nonzeros = snes->global_nonzeros();
  s.seconds_total = detail::seconds_since(t_start);

  Solution<T> out;
  if constexpr (linear::detail::is_plain_v<T>) {
    out.x = std::move(x);
  } else if constexpr (linear::detail::is_dual_double_v<T>) {
    constexpr int N = linear::detail::tangent_count<T>();
    if (!s.converged() && !options.differentiate_unconverged)
      detail::throw_unconverged(s, "differentiating (ad::Dual)");
    const auto t0 = detail::Clock::now();
    const std::vector<double> xe = snes->extend(x);
    const detail::DistributedDerivative<const F&> d(snes, residual, xe, false,
                                                    options.differentiate_unconverged);
    // (∂F/∂p) ṗ for the N directions at once: F on the caller's Dual type.
    const std::vector<T> r = residual.template evaluate_on<T>(xe, p);
    out.x.resize(static_cast<std::size_t>(nl));
    for (int i = 0; i < nl; ++i) out.x[static_cast<std::size_t>(i)] = T(x[static_cast<std::size_t>(i)]);
    std::vector<double> rhs(static_cast<std::size_t>(nl)), xd(static_cast<std::size_t>(nl));
    for (int k = 0; k < N; ++k) {
      for (int i = 0; i < nl; ++i) rhs[static_cast<std::size_t>(i)] = -r[static_cast<std::size_t>(i)].tangent(k);
      d.solve(rhs, xd, false);
      for (int i = 0; i < nl; ++i) out.x[static_cast<std::size_t>(i)].tangent(k) = xd[static_cast<std::size_t>(i)];
    }
    s.seconds_derivative = detail::seconds_since(t0);
  } else {
    static_assert(linear::detail::is_real_v<T>);
    out.x.assign(x.begin(), x.end());
    ad::Tape& tape = ad::Tape::active();
    bool active = false;
    for (const auto& v : p) active = active || v.is_active();
    int local = (tape.is_recording() && active) ? 1 : 0, any = 0;
    MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_LOR, comm);
    if (any) {
      COSTATE_CHECK(tape.is_recording(),
                    "nonlinear::solve (distributed): another rank records this solve on its tape "
                    "but this rank's tape is not recording; record on every rank");
      if (!s.converged() && !options.differentiate_unconverged)
        detail::throw_unconverged(s, "recording a tape node for");
      const auto t0 = detail::Clock::now();
      std::vector<double> xe = snes->extend(x);
      detail::Residual<F> owned_residual(f, pv, nl);
      owned_residual.share_sparsity(residual);
      const bool dense_fp = static_cast<int>(p.size()) <= detail::kDenseParameterLimit;
      auto d = std::make_shared<const detail::DistributedDerivative<F>>(
          snes, std::move(owned_residual), std::move(xe), dense_fp, options.differentiate_unconverged);
      // (∂F/∂x)ᵀ λ = x̄;  p̄_r −= (∂F_r/∂p)ᵀ λ_r.
      auto reverse = [d, nl](std::span<const double> xbar, std::span<double> pbar) {
        std::vector<double> lambda(static_cast<std::size_t>(nl));
        d->solve(xbar, lambda, true);
        d->subtract_vjp(lambda, pbar);
      };
      // (∂F/∂x) ẋ = −(∂F/∂p) ṗ.
      auto tangent = [d, nl](std::span<const double> pdot, std::span<double> xdot) {
        const Eigen::VectorXd rhs = -d->jvp(pdot);
        d->solve(std::span<const double>(rhs.data(), static_cast<std::size_t>(nl)), xdot, false);
      };
      tape.push_external(std::span<const ad::Real>(p), std::span<ad::Real>(out.x), std::move(reverse),
                         std::move(tangent));
      s.seconds_derivative = detail::seconds_since(t0);
    }
  }
  out.summary = std::move(s);
  return out;
}

}  // namespace costate::nonlinear
