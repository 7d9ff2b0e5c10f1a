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

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/detail/fixed_steps.hpp"
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
/// (ascending, the last = t1) — the rule run_fixed steps by (FixedStepClock).
inline std::vector<double> fixed_step_times(double t0, double t1, double dt,
                                            const std::vector<double>& stops) {
  std::vector<double> times{t0};
  // Room for the steps (one more per stop at most): no regrowth copies.
  const double expected = (t1 - t0) / dt;
  if (expected > 0.0 && expected < 1e9)
    times.reserve(static_cast<std::size_t>(expected) + stops.size() + 2);
  FixedStepClock clock{dt, t0};
  double t = t0;
  std::size_t j = 0;
  while (t < t1) {
    while (j < stops.size() && stops[j] <= t) ++j;
    const FixedStepClock::Next next = clock.next(j < stops.size() ? stops[j] : t1);
    COSTATE_CHECK(next.t > t, "integrator.dt = " << dt << " is too small to advance from t = " << t);
    clock.take(next);
    t = next.t;
    times.push_back(t);
  }
  return times;
}

/// Vector–Jacobian products of a model's right-hand side: from a short tape
/// of one evaluation (the default), or — when `coloured` is asked for —
/// from the compressed forward-mode Jacobian [f_y | f_p]:
///     pattern P and colouring c of its columns detected once (first call,
///     ad::detect_sparsity on the path taken there), then per call one
///     evaluation on Dual<double, K> seeded ẋ_j = e_{c(j)} gives
///     (J S)(i, c(j)) = J(i, j) for (i, j) ∈ P, and
///     ybar_j = Σ_{i : (i,j) ∈ P} w_i J(i, j)   (p̄ likewise).
/// It is used only when the colours are few (≤ kMaxColours, one or two
/// Dual passes); otherwise the tape. Valid only when the right-hand side's
/// pattern is the same at every state (value-dependent branches that change
/// which inputs an output reads would make it silently wrong; min/max are
/// fine — both operands stay in the pattern).
template <class M>
class RhsVjp {
 public:
  static constexpr int kMaxColours = 16;

  RhsVjp(const M& model, std::span<const double> p, std::size_t n, bool coloured = false)
      : model_(model), p_(p.begin(), p.end()), y_(n), pr_(p.size()), dydt_(n),
        want_coloured_(coloured) {}

  /// ybar = f_yᵀ w;  pbar += f_pᵀ w.
  void operator()(double t, std::span<const double> y, std::span<const double> w,
                  std::span<double> ybar, std::span<double> pbar) {
    ++count;
    if (want_coloured_) {
      if (!pattern_ready_) detect(t, y);
      if (colours_ > 0) {
        if (colours_ <= 4)
          coloured<4>(t, y, w, ybar, pbar);
        else
          coloured<8>(t, y, w, ybar, pbar);
        return;
      }
    }
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
  }
  std::int64_t count = 0;
  /// Colours of [f_y | f_p] when the coloured path is in use (0: the tape).
  int colours() const { return colours_; }

 private:
  void detect(double t, std::span<const double> y) {
    pattern_ready_ = true;
    const std::size_t n = y_.size(), np = p_.size();
    std::vector<double> x(y.begin(), y.end());
    x.insert(x.end(), p_.begin(), p_.end());
    auto f = [&](const auto& xs) {
      using T = std::decay_t<decltype(xs[0])>;
      std::vector<T> out(n);
      model_.template rhs<T>(t, std::span<const T>(xs.data(), n),
                             std::span<const T>(xs.data() + n, np), std::span<T>(out));
      return out;
    };
    const ad::SparsityPattern pattern = ad::detect_sparsity(f, x);
    const ad::ColumnColoring colouring = ad::color_columns(pattern);
    if (colouring.colors > kMaxColours) return;  // dense rows: the tape is cheaper
    colours_ = std::max(1, colouring.colors);
    colour_ = colouring.color;
    columns_ = pattern.transpose();  // rows of each input column
  }

  template <int K>
  void coloured(double t, std::span<const double> y, std::span<const double> w,
                std::span<double> ybar, std::span<double> pbar) {
    using D = ad::Dual<double, K>;
    const std::size_t n = y_.size(), np = p_.size();
    std::vector<D>& xd = dual_inputs<K>();
    std::vector<D>& out = dual_outputs<K>();
    xd.resize(n + np);
    out.resize(n);
    std::fill(ybar.begin(), ybar.end(), 0.0);
    for (int first = 0; first < colours_; first += K) {
      for (std::size_t j = 0; j < n + np; ++j) {
        xd[j] = D(j < n ? y[j] : p_[j - n]);
        const int c = colour_[j] - first;
        if (c >= 0 && c < K) xd[j].set_tangent(c, 1.0);
      }
      model_.template rhs<D>(t, std::span<const D>(xd.data(), n),
                             std::span<const D>(xd.data() + n, np), std::span<D>(out));
      for (std::size_t j = 0; j < n + np; ++j) {
        const int c = colour_[j] - first;
        if (c < 0 || c >= K) continue;
        double acc = 0.0;
        const auto b = static_cast<std::size_t>(columns_.row_ptr[j]);
        const auto e = static_cast<std::size_t>(columns_.row_ptr[j + 1]);
        for (std::size_t k = b; k < e; ++k) {
          const auto i = static_cast<std::size_t>(columns_.col_idx[k]);
          acc += w[i] * out[i].tangent(c);
        }
        if (j < n)
          ybar[j] = acc;
        else
          pbar[j - n] += acc;
      }
    }
  }
  template <int K>
  std::vector<ad::Dual<double, K>>& dual_inputs() {
    if constexpr (K == 4) return x4_; else return x8_;
  }
  template <int K>
  std::vector<ad::Dual<double, K>>& dual_outputs() {
    if constexpr (K == 4) return o4_; else return o8_;
  }

  const M& model_;
  std::vector<double> p_;
  std::vector<ad::Real> y_, pr_, dydt_;
  ad::Tape tape_;
  bool want_coloured_ = false, pattern_ready_ = false;
  int colours_ = 0;
  std::vector<int> colour_;
  ad::SparsityPattern columns_;
  std::vector<ad::Dual<double, 4>> x4_, o4_;
  std::vector<ad::Dual<double, 8>> x8_, o8_;
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
