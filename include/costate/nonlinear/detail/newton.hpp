#pragma once
// Internals of nonlinear::solve: the double-valued problem every backend
// sees (residual and AD Jacobian callbacks), the native Newton iteration,
// and the entry points of the PETSc SNES and KINSOL backends (defined in
// solvers/petsc/snes_solve.cpp and solvers/sundials/kinsol_solve.cpp, the
// only places that include those libraries). Not a public header.

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "costate/ad/sparsity.hpp"
#include "costate/linear/solve.hpp"
#include "costate/nonlinear/options.hpp"
#include "costate/nonlinear/summary.hpp"

namespace costate::nonlinear::detail {

/// Reciprocal condition estimate below which a dense Newton Jacobian (or the
/// Jacobian at the solution, for derivatives) counts as singular: at 1e-14
/// a step keeps about two correct digits.
inline constexpr double kSingularRcond = 1e-14;

/// F: ℝⁿ → ℝⁿ on double, with its Jacobian from AD (dense or sparse, as
/// `sparse` says). Callbacks may throw (the user's F); backends pass the
/// exception on after cleaning up.
struct Problem {
  int n = 0;
  bool sparse = false;
  /// Sparse: the structure every sparse_jacobian result has (CSR).
  std::shared_ptr<const ad::SparsityPattern> pattern;
  std::function<void(std::span<const double> x, std::span<double> r)> residual;
  std::function<void(std::span<const double> x, Eigen::MatrixXd& j)> dense_jacobian;
  std::function<void(std::span<const double> x, Eigen::SparseMatrix<double>& j)> sparse_jacobian;
};

inline double norm2(std::span<const double> v) {
  double s = 0.0;
  for (double a : v) s += a * a;
  return std::sqrt(s);
}

/// Backends: x holds x₀ on entry and the last iterate on return. They fill
/// termination, iterations, backtracks, residual history and norms,
/// tolerance and message; the caller fills counts and timings.
Summary newton_snes(const Problem& problem, std::vector<double>& x, const Options& options);
Summary newton_kinsol(const Problem& problem, std::vector<double>& x, const Options& options);

/// Native Newton with a backtracking (Armijo) line search on φ = ½‖F‖².
inline Summary newton_native(const Problem& problem, std::vector<double>& x, const Options& options) {
  const int n = problem.n;
  Summary s;
  s.backend = Backend::Native;
  std::vector<double> r(static_cast<std::size_t>(n)), xt(r.size()), rt(r.size());
  problem.residual(x, r);
  double fnorm = norm2(r);
  s.initial_residual_norm = fnorm;
  s.residual_history.push_back(fnorm);
  s.final_residual_norm = fnorm;
  if (!std::isfinite(fnorm)) {
    s.termination = Termination::NonFiniteResidual;
    s.message = "F(x0) is not finite";
    return s;
  }
  s.tolerance = std::max(options.atol, options.rtol * fnorm);
  Eigen::MatrixXd jd;
  Eigen::SparseMatrix<double> js;
  Eigen::VectorXd delta(n);
  for (;;) {
    if (fnorm <= s.tolerance) {
      s.termination = Termination::Converged;
      break;
    }
    if (s.iterations >= options.max_iterations) {
      s.termination = Termination::MaxIterations;
      break;
    }
    // Newton direction: J δ = −F.
    const Eigen::Map<const Eigen::VectorXd> rv(r.data(), n);
    bool singular = false;
    if (problem.sparse) {
      problem.sparse_jacobian(x, js);
      js.makeCompressed();
      const linear::detail::SparseFactor lu(js);
      if (!lu.ok()) {
        singular = true;
        s.message = "sparse LU of the Jacobian failed at iteration " + std::to_string(s.iterations) +
                    ": " + lu.message();
      } else {
        delta = -lu.solve(rv);
      }
    } else {
      problem.dense_jacobian(x, jd);
      const linear::detail::DenseFactor lu(jd);
      const double rcond = lu.rcond();
      if (!(rcond >= kSingularRcond)) {
        singular = true;
        std::ostringstream os;
        os.precision(3);
        os << "Jacobian rcond " << rcond << " at iteration " << s.iterations;
        s.message = os.str();
      } else {
        delta = -lu.solve(rv);
      }
    }
    if (!singular && !delta.allFinite()) {
      singular = true;
      s.message = "non-finite Newton step at iteration " + std::to_string(s.iterations);
    }
    if (singular) {
      s.termination = Termination::SingularJacobian;
      break;
    }
    // Line search along δ: φ(α) ≤ (1 − 2cα) φ(0), with φ'(0) = −2φ(0).
    const double phi0 = 0.5 * fnorm * fnorm;
    double alpha = 1.0, ftrial = 0.0;
    int reductions = 0;
    bool accepted = false;
    for (;;) {
      for (int i = 0; i < n; ++i) xt[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(i)] + alpha * delta[i];
      problem.residual(xt, rt);
      ftrial = norm2(rt);
      const double phi = 0.5 * ftrial * ftrial;
      const bool finite = std::isfinite(ftrial);
      if (finite && (!options.line_search ||
                     phi <= (1.0 - 2.0 * options.sufficient_decrease * alpha) * phi0)) {
        accepted = true;
        break;
      }
      if (!options.line_search || reductions >= options.max_backtracks) break;
      ++reductions;
      ++s.backtracks;
      if (!finite) {
        alpha *= 0.5;
      } else {
        // Minimiser of the quadratic through φ(0), φ'(0), φ(α), kept in [0.1α, 0.5α].
        const double denom = phi - phi0 + 2.0 * phi0 * alpha;
        const double aq = denom > 0.0 ? phi0 * alpha * alpha / denom : 0.5 * alpha;
        alpha = std::clamp(aq, 0.1 * alpha, 0.5 * alpha);
      }
    }
    if (!accepted) {
      const bool finite = std::isfinite(ftrial);
      s.termination = finite ? Termination::LineSearchFailed : Termination::NonFiniteResidual;
      std::ostringstream os;
      os.precision(3);
      os << (finite ? "no sufficient decrease" : "F is not finite") << " along the Newton step at iteration "
         << s.iterations << " after " << reductions << " reductions (alpha = " << alpha << ")";
      s.message = os.str();
      break;
    }
    x.swap(xt);
    r.swap(rt);
    fnorm = ftrial;
    ++s.iterations;
    s.residual_history.push_back(fnorm);
  }
  s.final_residual_norm = fnorm;
  return s;
}

}  // namespace costate::nonlinear::detail
