#pragma once
/// \file
/// nonlinear::solve — the root x(p) of F(x, p) = 0 (n equations, n unknowns,
/// parameters p) by Newton's method, differentiated implicitly: the Newton
/// iterations are never differentiated; at the solution x*,
///
///     tangent:  (∂F/∂x) ẋ = −(∂F/∂p) ṗ                    (ad::Dual, and the tape's forward sweep)
///     adjoint:  (∂F/∂x)ᵀ λ = x̄;   p̄ −= (∂F/∂p)ᵀ λ          (ad::Real: ONE node on the tape)
///
/// so a taped solve costs one node whatever the number of Newton iterations
/// (its inputs p, its outputs x), and the tape's size does not depend on
/// the iteration count.
///
/// The residual is written once, templated on its scalar type:
///
///     struct Bratu {
///       double h;
///       template <class T>
///       void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
///         using std::exp;   // unqualified calls: ADL finds the AD overloads
///         ... r[i] = (2 u[i] − u[i−1] − u[i+1]) / (h h) − p[0] exp(u[i]);
///       }
///     };
///     std::vector<ad::Real> p = {2.0};  tape.register_input(p[0]);
///     auto sol = nonlinear::solve(Bratu{h}, u0, p, {.backend = nonlinear::Backend::Kinsol});
///     sol.summary.brief_report();   sol.x   // std::vector<ad::Real>
///
/// Forward over reverse: with T = ad::Reverse<ad::Dual<double, 1>> (what
/// ad::hvp records) the node's reverse rule is itself differentiated along
/// the parameters' tangent ṗ — λ̇ = (∂F/∂x)⁻ᵀ(x̄̇ − J̇ᵀλ), p̄̇ −= Ḟ_pᵀλ +
/// (∂F/∂p)ᵀλ̇, with J̇, Ḟ_p the derivatives of ∂F/∂x, ∂F/∂p along (ẋ, ṗ),
/// ẋ = −(∂F/∂x)⁻¹(∂F/∂p)ṗ — so Hessian–vector products of functionals of
/// the solution go through the solve. That path forms ∂F/∂x and its
/// derivative DENSE (F on ad::Dual<ad::Dual<double, 1>, 8>, ⌈(n + np)/8⌉
/// evaluations twice: for moderate n), the node keeps those dense matrices
/// and the LU, and it has no forward-sweep (evaluate_forward) rule.
///
/// F is called with T = double (the iteration), ad::Dual<double, 8>
/// (Jacobians; ∂F/∂x in chunks of 8 columns, or compressed by colouring),
/// ad::IndexSet (sparsity detection, once at x₀, when the Jacobian is
/// sparse), the caller's Dual type (tangents), ad::Dual<double, 1> and
/// ad::Real (products with ∂F/∂p for more than 8 parameters). It must write
/// every r[i] (r arrives zeroed), must not keep the spans, and must be a
/// function of x and p only.
///
/// Jacobian: JacobianMode::Dense (⌈n/8⌉ evaluations, dense LU) or Sparse
/// (pattern detected once at x₀ — the code path taken at x₀ must contain
/// every entry the Jacobian has along the iteration — ⌈colours/8⌉
/// evaluations, sparse LU); Automatic picks Dense up to
/// Options::dense_limit unknowns. The backends (Options::backend) are the
/// native Newton (Eigen), PETSc SNES and SUNDIALS KINSOL; all use this
/// Jacobian and the same convergence test (options.hpp), so they agree on x
/// to the tolerance.
///
/// Derivatives need ∂F/∂x at x*: formed and factorised once when the solve
/// is differentiated (a Dual solve, or a Real solve that records a node) and
/// kept by the node for every sweep. ∂F/∂p: for up to 8 parameters one Dual
/// evaluation, kept as a dense n × np matrix; for more, the node forms
/// (∂F/∂p)ᵀ λ by recording F once on a private tape per reverse sweep, and
/// (∂F/∂p) ṗ by one Dual<double, 1> evaluation per forward sweep. The Real
/// node keeps a COPY of F: whatever F references must outlive the sweeps.
///
/// Outcomes: a solve that does not converge (Summary::termination) is data.
/// Differentiating it throws costate::Error unless
/// Options::differentiate_unconverged is set. A singular ∂F/∂x at x* (a
/// turning point: x is not a differentiable function of p there) throws
/// when differentiating. Bad input — an empty or non-finite x₀, non-finite
/// parameters, a non-square F (sparse detection sees it) — throws.
/// Not collective: the SNES backend runs on PETSC_COMM_SELF (each rank
/// solves its own system); KINSOL uses serial vectors. For unknowns
/// distributed over MPI ranks see distributed.hpp (the overload taking a
/// DistributedLayout).
///
/// Building: this header uses Eigen, which libcostate links privately; link
/// Eigen3::Eigen to the target that includes it.

#include <Eigen/Core>

#include <chrono>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/core/error.hpp"
#include "costate/linear/detail/ad_scalar.hpp"
#include "costate/linear/solve.hpp"
#include "costate/nonlinear/detail/jacobian.hpp"
#include "costate/nonlinear/detail/newton.hpp"
#include "costate/nonlinear/detail/second_order.hpp"
#include "costate/nonlinear/options.hpp"
#include "costate/nonlinear/summary.hpp"

namespace costate::nonlinear {

/// The solution (by value, the scalar type of p) and how the solve went.
template <class T>
struct Solution {
  std::vector<T> x;
  Summary summary;
};

namespace detail {

/// Forward over reverse (Hessian–vector products): Reverse<Dual<double, 1>>.
template <class T>
inline constexpr bool is_reverse_dual1_v = std::is_same_v<T, ad::Reverse<ad::Dual<double, 1>>>;

/// The double value of a parameter of any supported scalar type.
template <class T>
inline double parameter_value(const T& v) {
  if constexpr (is_reverse_dual1_v<T>)
    return v.value().value();
  else
    return linear::detail::value_of(v);
}

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] inline void throw_unconverged(const Summary& s, const char* what) {
  throw Error(std::string("nonlinear::solve: ") + what + " a solve that did not converge (" +
              s.brief_report() +
              "); the implicit derivative holds only at a root. Improve the initial guess, raise "
              "Options::max_iterations, or set Options::differentiate_unconverged = true to "
              "differentiate at the last iterate anyway");
}

/// ∂F/∂x factorised at x* (and ∂F/∂p when small): what the tangent and the
/// adjoint rules need, formed once.
template <class Fref>
class ImplicitDerivative {
 public:
  ImplicitDerivative(Residual<Fref> residual, std::vector<double> x, bool sparse, bool dense_fp)
      : residual_(std::move(residual)), x_(std::move(x)) {
    if (sparse) {
      Eigen::SparseMatrix<double> j;
      residual_.sparse_jacobian(x_, j);
      j.makeCompressed();
      sparse_ = std::make_shared<const linear::detail::SparseFactor>(j);
      if (!sparse_->ok()) throw_singular("sparse LU failed: " + sparse_->message());
    } else {
      Eigen::MatrixXd j;
      residual_.dense_jacobian(x_, j);
      dense_ = std::make_shared<const linear::detail::DenseFactor>(j);
      const double rcond = dense_->rcond();
      if (dense_->has_zero_pivot() || !(rcond >= kSingularRcond))
        throw_singular("reciprocal condition estimate " + costate::detail::format_value(rcond));
    }
    if (dense_fp) fp_ = residual_.parameter_jacobian(x_);
    has_fp_ = dense_fp;
  }

  /// (∂F/∂x)⁻¹ R, column by column.
  Eigen::MatrixXd solve(const Eigen::MatrixXd& rhs) const {
    return sparse_ ? sparse_->solve(rhs) : dense_->solve(rhs);
  }
  /// (∂F/∂x)⁻ᵀ v.
  Eigen::VectorXd solve_transpose(const Eigen::VectorXd& v) const {
    return sparse_ ? sparse_->solve_transpose(v) : dense_->solve_transpose(v);
  }
  /// (∂F/∂p) ṗ.
  Eigen::VectorXd jvp(std::span<const double> pdot) const {
    if (has_fp_) return fp_ * Eigen::Map<const Eigen::VectorXd>(pdot.data(), static_cast<Eigen::Index>(pdot.size()));
    return residual_.parameter_jvp(x_, pdot);
  }
  /// p̄ −= (∂F/∂p)ᵀ λ.
  void subtract_vjp(const Eigen::VectorXd& lambda, std::span<double> pbar) const {
    if (has_fp_) {
      const Eigen::VectorXd g = fp_.transpose() * lambda;
      for (std::size_t k = 0; k < pbar.size(); ++k) pbar[k] -= g[static_cast<Eigen::Index>(k)];
    } else {
      const std::vector<double> g = residual_.parameter_vjp(
          x_, std::span<const double>(lambda.data(), static_cast<std::size_t>(lambda.size())));
      for (std::size_t k = 0; k < pbar.size(); ++k) pbar[k] -= g[k];
    }
  }

 private:
  [[noreturn]] static void throw_singular(const std::string& detail) {
    throw Error("nonlinear::solve: dF/dx is singular at the solution (" + detail +
                "), so the solution is not a differentiable function of the parameters there "
                "(a turning point or bifurcation?); move the parameters away from it");
  }

  Residual<Fref> residual_;
  std::vector<double> x_;
  std::shared_ptr<const linear::detail::DenseFactor> dense_;
  std::shared_ptr<const linear::detail::SparseFactor> sparse_;
  Eigen::MatrixXd fp_;
  bool has_fp_ = false;
};

}  // namespace detail

/// Solves F(x, p) = 0 from x₀ and differentiates the solution implicitly
/// with respect to p (see the file comment). T = double, ad::Dual<double, N>
/// or ad::Real; x₀ is an initial guess (no derivative flows into it).
/// Returns x (of type T) and the summary; throws costate::Error on bad input
/// and when differentiating a solve that did not converge (unless allowed)
/// or whose ∂F/∂x is singular at the solution.
template <class F, class T>
Solution<T> solve(const F& f, const std::vector<double>& x0, const std::vector<T>& p,
                  const Options& options = {}) {
  static_assert(linear::detail::is_supported_scalar_v<T> || detail::is_reverse_dual1_v<T>,
                "nonlinear::solve: parameters must be double, ad::Dual<double, N>, ad::Real or "
                "ad::Reverse<ad::Dual<double, 1>>");
  options.validate();
  COSTATE_CHECK(!x0.empty(), "nonlinear::solve: x0 is empty; give an initial guess with one entry "
                             "per unknown");
  const int n = static_cast<int>(x0.size());
  for (std::size_t i = 0; i < x0.size(); ++i)
    COSTATE_CHECK(std::isfinite(x0[i]), "nonlinear::solve: x0[" << i << "] = "
                                            << costate::detail::format_value(x0[i])
                                            << " is not finite");
  std::vector<double> pv(p.size());
  for (std::size_t k = 0; k < p.size(); ++k) {
    pv[k] = detail::parameter_value(p[k]);
    COSTATE_CHECK(std::isfinite(pv[k]), "nonlinear::solve: parameter p[" << k << "] = "
                                            << costate::detail::format_value(pv[k])
                                            << " is not finite");
  }
  const auto t_start = detail::Clock::now();
  const bool sparse = options.jacobian == JacobianMode::Sparse ||
                      (options.jacobian == JacobianMode::Automatic && n > options.dense_limit);
  detail::Residual<const F&> residual(f, pv, n);
  double seconds_jacobian = 0.0;
  if (sparse) {
    const auto t0 = detail::Clock::now();
    residual.detect_sparsity(x0);
    seconds_jacobian += detail::seconds_since(t0);
  }
  int residual_evaluations = 0, jacobian_evaluations = 0;
  detail::Problem problem;
  problem.n = n;
  problem.sparse = sparse;
  problem.pattern = residual.pattern();
  problem.residual = [&](std::span<const double> x, std::span<double> r) {
    ++residual_evaluations;
    residual.residual(x, r);
  };
  problem.dense_jacobian = [&](std::span<const double> x, Eigen::MatrixXd& j) {
    const auto t0 = detail::Clock::now();
    ++jacobian_evaluations;
    residual.dense_jacobian(x, j);
    seconds_jacobian += detail::seconds_since(t0);
  };
  problem.sparse_jacobian = [&](std::span<const double> x, Eigen::SparseMatrix<double>& j) {
    const auto t0 = detail::Clock::now();
    ++jacobian_evaluations;
    residual.sparse_jacobian(x, j);
    seconds_jacobian += detail::seconds_since(t0);
  };

  std::vector<double> x = x0;
  Summary s;
  switch (options.backend) {
    case Backend::Native: s = detail::newton_native(problem, x, options); break;
    case Backend::PetscSnes: s = detail::newton_snes(problem, x, options); break;
    case Backend::Kinsol: s = detail::newton_kinsol(problem, x, options); break;
  }
  s.unknowns = n;
  s.residual_evaluations = residual_evaluations;
  s.jacobian_evaluations = jacobian_evaluations;
  s.seconds_jacobian = seconds_jacobian;
  s.sparse_jacobian = sparse;
  s.jacobian_colors = residual.colors();
  s.jacobian_nonzeros = residual.nonzeros();
  s.seconds_total = detail::seconds_since(t_start);

  Solution<T> out;
  if constexpr (linear::detail::is_plain_v<T>) {
    out.x = std::move(x);
  } else if constexpr (linear::detail::is_dual_double_v<T>) {
    constexpr int N = linear::detail::tangent_count<T>();
    if (!s.converged() && !options.differentiate_unconverged)
      detail::throw_unconverged(s, "differentiating (ad::Dual)");
    const auto t0 = detail::Clock::now();
    const detail::ImplicitDerivative<const F&> d(residual, x, sparse, false);
    // (∂F/∂p) ṗ for the N directions at once: F on the caller's Dual type.
    const std::vector<T> r = residual.template evaluate_on<T>(x, p);
    Eigen::MatrixXd rhs(n, N);
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < N; ++k) rhs(i, k) = r[static_cast<std::size_t>(i)].tangent(k);
    const Eigen::MatrixXd xd = -d.solve(rhs);
    out.x.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      T v(x[static_cast<std::size_t>(i)]);
      for (int k = 0; k < N; ++k) v.tangent(k) = xd(i, k);
      out.x[static_cast<std::size_t>(i)] = v;
    }
    s.seconds_derivative = detail::seconds_since(t0);
  } else if constexpr (detail::is_reverse_dual1_v<T>) {
    // Forward over reverse: x carries ẋ = −J⁻¹ F_p ṗ; the node's reverse
    // rule is differentiated along (ẋ, ṗ) (detail/second_order.hpp).
    using D1 = ad::Dual<double, 1>;
    if (!s.converged() && !options.differentiate_unconverged)
      detail::throw_unconverged(s, "differentiating (forward over reverse)");
    const auto t0 = detail::Clock::now();
    std::vector<double> pdot(p.size());
    for (std::size_t k = 0; k < p.size(); ++k) pdot[k] = p[k].value().tangent(0);
    auto d = std::make_shared<const detail::SecondOrderDerivative>(f, x, pv, pdot);
    out.x.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      out.x[static_cast<std::size_t>(i)] = T(D1(x[static_cast<std::size_t>(i)], {d->xdot()[static_cast<std::size_t>(i)]}));
    ad::BasicTape<D1>& tape = ad::BasicTape<D1>::active();
    bool active = false;
    for (const auto& v : p) active = active || v.is_active();
    if (tape.is_recording() && active) {
      // λ = J⁻ᵀ x̄, p̄ −= F_pᵀ λ, in Dual<double, 1> arithmetic.
      auto reverse = [d, n](std::span<const D1> xbar, std::span<D1> pbar) {
        Eigen::VectorXd a(n), adot(n), g, gdot;
        for (int i = 0; i < n; ++i) {
          a[i] = xbar[static_cast<std::size_t>(i)].value();
          adot[i] = xbar[static_cast<std::size_t>(i)].tangent(0);
        }
        d->reverse(a, adot, g, gdot);
        for (std::size_t k = 0; k < pbar.size(); ++k)
          pbar[k] -= D1(g[static_cast<Eigen::Index>(k)], {gdot[static_cast<Eigen::Index>(k)]});
      };
      tape.push_external(std::span<const T>(p), std::span<T>(out.x), std::move(reverse));
    }
    s.seconds_derivative = detail::seconds_since(t0);
  } else {
    static_assert(linear::detail::is_real_v<T>);
    out.x.assign(x.begin(), x.end());
    ad::Tape& tape = ad::Tape::active();
    bool active = false;
    for (const auto& v : p) active = active || v.is_active();
    if (tape.is_recording() && active) {
      if (!s.converged() && !options.differentiate_unconverged)
        detail::throw_unconverged(s, "recording a tape node for");
      const auto t0 = detail::Clock::now();
      detail::Residual<F> owned(f, pv, n);
      if (sparse) owned.share_sparsity(residual);
      const bool dense_fp = static_cast<int>(p.size()) <= detail::kDenseParameterLimit;
      auto d = std::make_shared<const detail::ImplicitDerivative<F>>(std::move(owned), x, sparse, dense_fp);
      // (∂F/∂x)ᵀ λ = x̄;  p̄ −= (∂F/∂p)ᵀ λ.
      auto reverse = [d, n](std::span<const double> xbar, std::span<double> pbar) {
        const Eigen::VectorXd lambda = d->solve_transpose(Eigen::Map<const Eigen::VectorXd>(xbar.data(), n));
        d->subtract_vjp(lambda, pbar);
      };
      // (∂F/∂x) ẋ = −(∂F/∂p) ṗ.
      auto tangent = [d, n](std::span<const double> pdot, std::span<double> xdot) {
        const Eigen::MatrixXd xd = -d->solve(d->jvp(pdot));
        for (int i = 0; i < n; ++i) xdot[static_cast<std::size_t>(i)] = xd(i, 0);
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
