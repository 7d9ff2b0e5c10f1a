#pragma once
/// \file
/// What the Hessian's implicit schemes (hessian_implicit.hpp) still take
/// from a per-model template: bdf's replayed value step (BdfScheme, on the
/// augmented model) and replay_kappa. The gradient and forward tangents of
/// θ, sdirk3 and bdf run on the compiled ode::System schemes
/// (scheme.hpp; src/ode/scheme_theta.cpp, scheme_sdirk3.cpp, scheme_bdf.cpp).
///
/// Replayed steps are deterministic functions of (x_i, p): Newton starts
/// from a predictor of x_i, with a Jacobian evaluated afresh at the step's
/// start, and is converged to newton_tol and to 10⁻⁶ of the error tolerance
/// (weighted; replay_kappa) — the adjoint assumes the implicit equations
/// hold exactly — so every checkpoint schedule reproduces the same bits.

#include <Eigen/Core>
#include <Eigen/LU>
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/checkpointing.hpp"
#include "costate/ode/detail/gradient_support.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "costate/ode/steppers/bdf.hpp"
#include "costate/ode/steppers/sdirk3.hpp"

namespace costate::ode::detail {

/// Newton's weighted stopping fraction in replays: 10⁻⁶ of the error
/// tolerance, but not below newton_tol relative (round-off would stall it).
inline double replay_kappa(const IntegratorOptions& opt) {
  return std::max(1e-6, opt.newton_tol / opt.rtol);
}

/// Variable-order BDF's replayed value step on x = (y_i, y_{i−1}, …, y_{i−4})
/// (the Hessian's DualBdfScheme; the compiled bdf scheme is src/ode/scheme_bdf.cpp).
template <class A>
class BdfScheme {
 public:
  static constexpr int kWindow = kBdfMaxOrder;

  BdfScheme(const A& model, std::span<const double> p, std::size_t na,
            const IntegratorOptions& opt, const std::vector<double>& times,
            const std::vector<int>& orders)
      : jac_(model, p, na), newton_(jac_, opt.newton_tol, opt.newton_max_iterations),
        times_(times), orders_(orders), na_(na), np_(p.size()), atol_(atol_vector(opt, na)),
        rtol_(opt.rtol), kappa_(replay_kappa(opt)), r_(na), pred_(na), w_(na), f_(na) {}

  std::size_t n() const { return na_; }
  std::size_t state_size() const { return kWindow * na_; }
  void initial(std::span<const double> y0, std::span<double> x0) const {
    std::fill(x0.begin(), x0.end(), 0.0);
    std::copy(y0.begin(), y0.end(), x0.begin());
  }

  /// Order, α_j and hβ of step i.
  int coefficients(std::size_t i, double* alpha, double* g) const {
    const int k = orders_[i];
    std::array<double, kBdfMaxOrder + 1> tau{};
    for (int m = 0; m <= k; ++m) tau[m] = times_[i + 1 - static_cast<std::size_t>(m)];
    *g = bdf_coefficients(tau, k, alpha);
    return k;
  }

  void step(std::size_t i, std::span<const double> x, std::span<double> xn) {
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const double t = times_[i], tn = times_[i + 1];
    std::fill(r_.begin(), r_.end(), 0.0);
    for (int j = 1; j <= k; ++j)
      for (std::size_t q = 0; q < na_; ++q) r_[q] += alpha[j - 1] * x[(j - 1) * na_ + q];
    // Predictor from the window: the polynomial through the available points.
    const int valid = static_cast<int>(std::min<std::size_t>(i + 1, kWindow));
    const int count = std::min(k + 1, valid);
    if (count == 1) {
      jac_.rhs(t, x.first(na_), f_);
      for (std::size_t q = 0; q < na_; ++q) pred_[q] = x[q] + (tn - t) * f_[q];
    } else {
      std::array<double, kWindow> tau{}, wts{};
      for (int m = 0; m < count; ++m) tau[m] = times_[i - static_cast<std::size_t>(m)];
      lagrange_weights(tau, count, tn, wts.data());
      std::fill(pred_.begin(), pred_.end(), 0.0);
      for (int m = 0; m < count; ++m)
        for (std::size_t q = 0; q < na_; ++q) pred_[q] += wts[m] * x[m * na_ + q];
    }
    for (std::size_t q = 0; q < na_; ++q) w_[q] = 1.0 / (atol_[q] + rtol_ * std::abs(x[q]));
    std::span<double> z = xn.first(na_);
    // Shift first (xn may not alias x), then solve into slot 0.
    for (int s = kWindow - 1; s >= 1; --s)
      std::copy(x.begin() + (s - 1) * static_cast<std::ptrdiff_t>(na_),
                x.begin() + s * static_cast<std::ptrdiff_t>(na_),
                xn.begin() + s * static_cast<std::ptrdiff_t>(na_));
    std::copy(pred_.begin(), pred_.end(), z.begin());
    newton_.evaluate_jacobian(t, x.first(na_));
    if (!newton_.solve(tn, r_, g, z, w_, kappa_)) {
      std::copy(pred_.begin(), pred_.end(), z.begin());
      newton_.evaluate_jacobian(tn, pred_);
      COSTATE_CHECK(newton_.solve(tn, r_, g, z, w_, kappa_),
                    "gradient: the replayed bdf step at t = " << t << " failed to converge");
    }
  }

  std::int64_t rhs_evaluations() const { return jac_.rhs_evaluations; }

 private:
  ModelJacobian<A> jac_;
  ModifiedNewton<A> newton_;
  const std::vector<double>& times_;
  const std::vector<int>& orders_;
  std::size_t na_, np_;
  std::vector<double> atol_;
  double rtol_, kappa_;
  std::vector<double> r_, pred_, w_, f_;
};

}  // namespace costate::ode::detail
