#pragma once
/// \file
/// The θ-method, implicit: backward Euler (θ = 1), Crank–Nicolson (θ = ½):
///     y_{n+1} = y_n + h [(1 − θ) f(t_n, y_n) + θ f(t_{n+1}, y_{n+1})],
/// solved for y_{n+1} by Newton's method on
///     G(z) = z − y_n − h (1 − θ) f_n − h θ f(t_{n+1}, z),   G'(z) = I − h θ J(z),
/// with the Jacobian J = ∂f/∂y from forward-mode AD (dense, ad::Dual) and a
/// dense LU (Eigen). Newton stops when the update is below newton_tol in the
/// max norm relative to 1 + |z|, or fails after newton_max_iterations.
///
/// Discrete adjoint of a step (the step's own transpose, used by
/// ode::gradient): with λ = ȳ_{n+1},
///     (I − h θ J_{n+1})ᵀ μ = λ,
///     λ_n = μ + h (1 − θ) J_nᵀ μ,
///     p̄ += h θ f_p(n+1)ᵀ μ + h (1 − θ) f_p(n)ᵀ μ.
/// Limitations: dense linear algebra (small and medium systems); fixed step
/// sizes (adaptive implicit steppers — SDIRK, BDF — are to come).

#include <Eigen/Core>
#include <Eigen/LU>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/core/error.hpp"

namespace costate::ode {

template <class M>
class ThetaStepper {
 public:
  ThetaStepper(const M& model, std::span<const double> p, std::size_t n, double theta,
               double newton_tol, int newton_max_iterations)
      : model_(model), p_(p.begin(), p.end()), n_(n), theta_(theta), tol_(newton_tol),
        max_iter_(newton_max_iterations), fn_(n), f_(n), z_(n), g_(n) {}

  /// f(t, y) into out.
  void rhs(double t, std::span<const double> y, std::span<double> out) {
    model_.template rhs<double>(t, y, std::span<const double>(p_), out);
    ++rhs_evaluations;
  }

  /// J = ∂f/∂y at (t, y), dense.
  Eigen::MatrixXd jacobian(double t, std::span<const double> y) {
    ++jacobian_evaluations;
    const std::vector<double> x(y.begin(), y.end());
    auto F = [&](const auto& yy) {
      using T = std::decay_t<decltype(yy[0])>;
      std::vector<T> pT(p_.begin(), p_.end());
      std::vector<T> d(n_);
      model_.template rhs<T>(t, std::span<const T>(yy.data(), n_), std::span<const T>(pT),
                             std::span<T>(d));
      return d;
    };
    return x.size() <= 4 ? ad::jacobian_forward<4>(F, x) : ad::jacobian_forward<8>(F, x);
  }

  /// [∂f/∂y | ∂f/∂p] at (t, y): n × (n + p), one forward-mode pass per 8
  /// columns (the discrete adjoint's products are then dense mat-vecs).
  Eigen::MatrixXd jacobian_state_parameters(double t, std::span<const double> y) {
    ++jacobian_evaluations;
    std::vector<double> x(y.begin(), y.end());
    x.insert(x.end(), p_.begin(), p_.end());
    auto F = [&](const auto& yp) {
      using T = std::decay_t<decltype(yp[0])>;
      std::vector<T> d(n_);
      model_.template rhs<T>(t, std::span<const T>(yp.data(), n_),
                             std::span<const T>(yp.data() + n_, p_.size()), std::span<T>(d));
      return d;
    };
    return x.size() <= 4 ? ad::jacobian_forward<4>(F, x) : ad::jacobian_forward<8>(F, x);
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
    Eigen::VectorXd delta(n_);
    for (int it = 0; it < max_iter_; ++it) {
      rhs(t + h, z_, f_);
      for (std::size_t i = 0; i < n_; ++i)
        g_[i] = z_[i] - y[i] - h * (1.0 - theta_) * fn_[i] - h * theta_ * f_[i];
      const Eigen::MatrixXd J = jacobian(t + h, z_);
      const Eigen::MatrixXd A = Eigen::MatrixXd::Identity(n_, n_) - h * theta_ * J;
      Eigen::PartialPivLU<Eigen::MatrixXd> lu(A);
      delta = lu.solve(Eigen::Map<const Eigen::VectorXd>(g_.data(), n_));
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
};

}  // namespace costate::ode
