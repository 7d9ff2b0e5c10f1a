#pragma once
/// \file
/// Internals shared by ode::gradient and the adjoints of its steppers: the
/// model augmented with the running cost, the fixed-step landing rule,
/// vector–Jacobian products of one right-hand side from a short tape, and
/// the value and gradient of a scalar objective term.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "costate/ad/reverse.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/objective.hpp"

namespace costate::ode {

namespace detail {

/// y' = f(t, y, p) augmented with z' = q(t, y, p) when the objective has a
/// running cost.
template <class M, class O>
struct Augmented {
  const M& model;
  const O& objective;
  std::size_t n;
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    model.template rhs<T>(t, y.first(n), p, dydt.first(n));
    if constexpr (HasRunning<O>) dydt[n] = objective.template running<T>(t, y.first(n), p);
  }
};

/// t_0 … t_l of fixed steps dt from t0 to t1 that land on every stop time
/// (ascending, the last = t1) — run_fixed's rule.
inline std::vector<double> fixed_step_times(double t0, double t1, double dt,
                                            const std::vector<double>& stops) {
  const double eps = std::numeric_limits<double>::epsilon();
  std::vector<double> times{t0};
  double t = t0, anchor = t0;
  std::int64_t k = 0;
  std::size_t j = 0;
  while (t < t1) {
    while (j < stops.size() && stops[j] <= t) ++j;
    const double target = j < stops.size() ? stops[j] : t1;
    const double t_full = anchor + static_cast<double>(k + 1) * dt;
    const double slack = 1e-10 * dt + 16.0 * eps * std::max(std::abs(target), std::abs(anchor));
    const bool lands = t_full >= target - slack;
    const double t_new = lands ? target : t_full;
    COSTATE_CHECK(t_new > t, "integrator.dt = " << dt << " is too small to advance from t = " << t);
    if (lands) {
      anchor = t_new;
      k = 0;
    } else {
      ++k;
    }
    t = t_new;
    times.push_back(t);
  }
  return times;
}

/// Vector–Jacobian products of a model's right-hand side from a short tape.
template <class M>
class RhsVjp {
 public:
  RhsVjp(const M& model, std::span<const double> p, std::size_t n)
      : model_(model), p_(p.begin(), p.end()), y_(n), pr_(p.size()), dydt_(n) {}

  /// ybar = f_yᵀ w;  pbar += f_pᵀ w.
  void operator()(double t, std::span<const double> y, std::span<const double> w,
                  std::span<double> ybar, std::span<double> pbar) {
    ad::Tape::Scope scope(tape_);
    tape_.reset();
    tape_.start_recording();
    for (std::size_t i = 0; i < y_.size(); ++i) {
      y_[i] = y[i];
      tape_.register_input(y_[i]);
    }
    for (std::size_t j = 0; j < pr_.size(); ++j) {
      pr_[j] = p_[j];
      tape_.register_input(pr_[j]);
    }
    model_.template rhs<ad::Real>(t, std::span<const ad::Real>(y_), std::span<const ad::Real>(pr_),
                                  std::span<ad::Real>(dydt_));
    for (auto& d : dydt_) tape_.register_output(d);
    tape_.stop_recording();
    for (std::size_t i = 0; i < dydt_.size(); ++i) dydt_[i].set_gradient(w[i]);
    tape_.evaluate();
    for (std::size_t i = 0; i < y_.size(); ++i) ybar[i] = y_[i].gradient();
    for (std::size_t j = 0; j < pr_.size(); ++j) pbar[j] += pr_[j].gradient();
    ++count;
  }
  std::int64_t count = 0;

 private:
  const M& model_;
  std::vector<double> p_;
  std::vector<ad::Real> y_, pr_, dydt_;
  ad::Tape tape_;
};

/// Value and gradient (w.r.t. y and p) of a scalar function of (y, p) from a
/// short tape. `f(y, p)` is called with spans of ad::Real.
template <class F>
double value_and_gradient(F&& f, std::span<const double> y, std::span<const double> p,
                          std::span<double> ybar, std::span<double> pbar, ad::Tape& tape) {
  ad::Tape::Scope scope(tape);
  tape.reset();
  tape.start_recording();
  std::vector<ad::Real> yr(y.begin(), y.end()), pr(p.begin(), p.end());
  for (auto& v : yr) tape.register_input(v);
  for (auto& v : pr) tape.register_input(v);
  ad::Real J = f(std::span<const ad::Real>(yr), std::span<const ad::Real>(pr));
  tape.register_output(J);
  tape.stop_recording();
  J.set_gradient(1.0);
  tape.evaluate();
  for (std::size_t i = 0; i < yr.size(); ++i) ybar[i] += yr[i].gradient();
  for (std::size_t j = 0; j < pr.size(); ++j) pbar[j] += pr[j].gradient();
  return J.value();
}

}  // namespace detail

}  // namespace costate::ode
