#pragma once
/// \file
/// The θ-method, implicit: backward Euler (θ = 1), Crank–Nicolson (θ = ½):
///     y_{n+1} = y_n + h [(1 − θ) f(t_n, y_n) + θ f(t_{n+1}, y_{n+1})],
/// solved for y_{n+1} by Newton's method on
///     G(z) = z − y_n − h (1 − θ) f_n − h θ f(t_{n+1}, z),   G'(z) = I − h θ J(z),
/// with the Jacobian J = ∂f/∂y from forward-mode AD (dense, ad::Dual, into a
/// reused buffer — detail::ModelJacobian) and a dense LU (Eigen, reused
/// storage). Newton stops when the update is below newton_tol in the
/// max norm relative to 1 + |z|, or fails after newton_max_iterations.
///
/// Discrete adjoint of a step (the step's own transpose, used by
/// ode::gradient): with λ = ȳ_{n+1},
///     (I − h θ J_{n+1})ᵀ μ = λ,
///     λ_n = μ + h (1 − θ) J_nᵀ μ,
///     p̄ += h θ f_p(n+1)ᵀ μ + h (1 − θ) f_p(n)ᵀ μ.
/// DAEs (M = diag(1 differential, 0 algebraic), implicit_common.hpp):
///     M (z − y_n − h (1 − θ) f_n) − h θ f(t_{n+1}, z) = 0,
/// the constraints at t_{n+1} and, on the differential states, the θ-method
/// of the state-space form (y_n consistent: f_n is f(t_n, x_n, z(x_n))).
/// Limitations: dense linear algebra (small and medium systems); fixed step
/// sizes (the adaptive implicit steppers are steppers/sdirk3.hpp and bdf.hpp).

#include <Eigen/Core>
#include <Eigen/LU>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/ode/steppers/implicit_common.hpp"
#include "costate/core/error.hpp"

namespace costate::ode {

template <class M>
class ThetaStepper {
 public:
  ThetaStepper(const M& model, std::span<const double> p, std::size_t n, double theta,
               double newton_tol, int newton_max_iterations)
      : model_(model), p_(p.begin(), p.end()), n_(n), theta_(theta), tol_(newton_tol),
        max_iter_(newton_max_iterations), fn_(n), f_(n), z_(n), g_(n), jac_(model, p, n),
        A_(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n)),
        lu_(static_cast<Eigen::Index>(n)), delta_(static_cast<Eigen::Index>(n)) {}

  /// f(t, y) into out.
  void rhs(double t, std::span<const double> y, std::span<double> out) {
    model_.template rhs<double>(t, y, std::span<const double>(p_), out);
    ++rhs_evaluations;
  }

  /// J = ∂f/∂y at (t, y), dense: the left n columns of the returned
  /// buffer (forward mode, no allocation per call; valid until the next call).
  const Eigen::MatrixXd& jacobian(double t, std::span<const double> y) {
    ++jacobian_evaluations;
    return jac_.state(t, y);
  }

  /// [∂f/∂y | ∂f/∂p] at (t, y): n × (n + p), one forward-mode pass per 8
  /// columns (the discrete adjoint's products are then dense mat-vecs).
  /// The buffer is reused: valid until the next call.
  const Eigen::MatrixXd& jacobian_state_parameters(double t, std::span<const double> y) {
    ++jacobian_evaluations;
    return jac_.state_parameters(t, y);
  }

  /// One step; returns false (with a reason) when Newton fails.
  bool step(double t, double h, std::span<const double> y, std::span<double> y_out,
            std::string* why = nullptr) {
    rhs(t, y, fn_);
    for (std::size_t i = 0; i < n_; ++i) z_[i] = y[i] + h * fn_[i];  // explicit predictor
    if (theta_ == 0.0) {
      std::copy(z_.begin(), z_.end(), y_out.begin());
      return true;
    }
    Eigen::VectorXd& delta = delta_;
    const auto nn = static_cast<Eigen::Index>(n_);
    for (int it = 0; it < max_iter_; ++it) {
      rhs(t + h, z_, f_);
      for (std::size_t i = 0; i < n_; ++i)
        g_[i] = z_[i] - y[i] - h * (1.0 - theta_) * fn_[i] - h * theta_ * f_[i];
      const std::span<const std::uint8_t> alg = jac_.algebraic();
      for (std::size_t i = 0; i < alg.size(); ++i)
        if (alg[i]) g_[i] = -(h * theta_) * f_[i];
      detail::stage_matrix(A_, h * theta_, jacobian(t + h, z_).leftCols(nn), alg);
      lu_.compute(A_);
      delta = lu_.solve(Eigen::Map<const Eigen::VectorXd>(g_.data(), nn));
      double change = 0.0, finite = 0.0;
      for (std::size_t i = 0; i < n_; ++i) {
        z_[i] -= delta[i];
        change = std::max(change, std::abs(delta[i]) / (1.0 + std::abs(z_[i])));
        finite += z_[i] * 0.0;
      }
      ++newton_iterations;
      if (!(finite == 0.0)) {
        if (why) *why = "Newton produced a non-finite state";
        return false;
      }
      if (change <= tol_) {
        std::copy(z_.begin(), z_.end(), y_out.begin());
        return true;
      }
    }
    if (why) *why = "Newton did not converge in " + std::to_string(max_iter_) + " iterations";
    return false;
  }

  double theta() const { return theta_; }
  std::int64_t rhs_evaluations = 0, jacobian_evaluations = 0, newton_iterations = 0;

 private:
  const M& model_;
  std::vector<double> p_;
  std::size_t n_;
  double theta_, tol_;
  int max_iter_;
  std::vector<double> fn_, f_, z_, g_;
  detail::ModelJacobian<M> jac_;  // allocation-free forward-mode Jacobians
  Eigen::MatrixXd A_;
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
  Eigen::VectorXd delta_;
};

}  // namespace costate::ode
