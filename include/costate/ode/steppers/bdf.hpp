#pragma once
/// \file
/// bdf: variable-order (1–5), variable-step backward differentiation
/// formulas in variable-coefficient (Lagrange) form, with local error
/// estimates, order selection and modified Newton — the strategy of
/// CVODE's BDF (Hindmarsh et al., ACM TOMS 31 (2005)), in another form.
///
/// A step of order k from t_n to t_{n+1} = t_n + h: the polynomial p of
/// degree k through (t_{n+1}, y_{n+1}), (t_n, y_n), …, (t_{n+1−k}, y_{n+1−k})
/// satisfies p'(t_{n+1}) = f(t_{n+1}, y_{n+1}). With τ_0 = t_{n+1},
/// τ_j = t_{n+1−j} and a_j = ℓ_j'(τ_0) (ℓ_j the Lagrange basis),
///     a_0 = Σ_{m=1..k} 1/(τ_0 − τ_m),
///     a_j = Π_{m≠0,j} (τ_0 − τ_m) / Π_{m≠j} (τ_j − τ_m)        (j ≥ 1),
/// the step is
///     y_{n+1} = Σ_{j=1..k} α_j y_{n+1−j} + hβ f(t_{n+1}, y_{n+1}),
///     α_j = −a_j / a_0,   hβ = 1 / a_0,
/// solved by modified Newton on I − hβ J (implicit_common.hpp) from the
/// predictor P_k(t_{n+1}), the degree-k polynomial through y_n … y_{n−k}.
/// The coefficients depend only on the step times and the order.
///
/// Local error of order q (the leading term, from the interpolation error of
/// p): E_q = (y_{n+1} − P_q(t_{n+1})) / (a_0^{(q)} (t_{n+1} − t_{n−q})); for
/// q = k this is the Newton correction, scaled. The step is accepted when the
/// weighted RMS norm (weights 1/(atol_i + rtol |y_n,i|)) of E_k is ≤ 1.
/// After k + 1 steps at order k, E_{k−1} and E_{k+1} (from the history, which
/// is kept to 7 points) are compared as CVODE does: η_q = 1/((b_q E_q)^{1/(q+1)}
/// + 10⁻⁶) with biases 6, 6, 10 for q = k−1, k, k+1; the largest η wins, and
/// when it is below 1.5 the step size is kept (η = 1, so the LU stays valid).
/// Growth is limited to 10 (10⁴ after the first step), no growth after a
/// rejected step; an error-test failure shortens h by η ∈ [0.1, 0.9]
/// (≤ 0.2 from the second), the third drops the order by one and h by 10;
/// a Newton failure (with a fresh Jacobian) shortens h by 4.
///
/// DAEs (semi-explicit index 1, M = diag(1 differential, 0 algebraic);
/// implicit_common.hpp): the step solves M (y_{n+1} − Σ α_j y_{n+1−j}) =
/// hβ f(t_{n+1}, y_{n+1}), i.e. the constraints at t_{n+1}, and the
/// algebraic states are left out of E_q (IDA's suppressalg; they follow the
/// differential ones through the constraints) — unless every model state is
/// algebraic: then E_q measures them (ModelJacobian::error_unmeasured).
///
/// Jacobian reuse: J is re-evaluated every 50 steps, after Newton converged
/// slowly (rate > 0.5), or when Newton fails with an older J; M = I − hβ J is
/// refactored when hβ moves by more than 30 % from the factored value.
///
/// Discrete adjoint (ode::gradient; step times and orders are constants of
/// the adjoint): the step maps the window x_n = (y_n, …, y_{n−4}) to
/// x_{n+1} = (y_{n+1}, y_n, …, y_{n−3}); with λ the adjoint of x_{n+1},
///     (I − hβ J(y_{n+1}))ᵀ μ = λ[0],
///     λ_n[s] = λ[s + 1] (s = 0..3),  λ_n[4] = 0,
///     λ_n[j − 1] += α_j μ (j = 1..k),   p̄ += hβ f_p(y_{n+1})ᵀ μ.

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "costate/ode/options.hpp"
#include "costate/ode/steppers/implicit_common.hpp"
#include "costate/ode/steppers/sdirk3.hpp"

namespace costate::ode {

inline constexpr int kBdfMaxOrder = 5;

/// The order-k BDF coefficients for τ_0 = t_{n+1} and τ_1..τ_k the previous
/// times (descending): alpha[j−1] = α_j, returns hβ = 1/a_0.
inline double bdf_coefficients(std::span<const double> tau, int k, double* alpha) {
  double a0 = 0.0;
  for (int m = 1; m <= k; ++m) a0 += 1.0 / (tau[0] - tau[m]);
  for (int j = 1; j <= k; ++j) {
    double num = 1.0, den = 1.0;
    for (int m = 0; m <= k; ++m) {
      if (m == j) continue;
      if (m != 0) num *= tau[0] - tau[m];
      den *= tau[j] - tau[m];
    }
    alpha[j - 1] = -(num / den) / a0;
  }
  return 1.0 / a0;
}

/// Lagrange weights L_m(t) of the polynomial through τ_0..τ_{count−1}.
inline void lagrange_weights(std::span<const double> tau, int count, double t, double* w) {
  for (int m = 0; m < count; ++m) {
    double v = 1.0;
    for (int q = 0; q < count; ++q)
      if (q != m) v *= (t - tau[q]) / (tau[m] - tau[q]);
    w[m] = v;
  }
}

template <class M>
class BdfStepper {
 public:
  static constexpr int kHistory = kBdfMaxOrder + 2;

  BdfStepper(const M& model, std::span<const double> p, std::size_t n, double newton_tol,
             int newton_max_iterations)
      : jac_(model, p, n), newton_(jac_, newton_tol, newton_max_iterations), n_(n),
        store_(kHistory * n), r_(n), pred_(n), z_(n), e_(n), w_(n), f0_(n),
        unmeasured_(jac_.error_unmeasured().begin(), jac_.error_unmeasured().end()) {
    for (int i = 0; i < kHistory; ++i) slot_[i] = i;
  }

  detail::ModelJacobian<M>& model_jacobian() { return jac_; }
  detail::ModifiedNewton<M>& newton() { return newton_; }

  /// Replay-identical attempts (ode::gradient's forward run, and
  /// ode::integrate's and the continuous adjoint's, so that a run and a
  /// gradient take the same steps to the same bits): every attempt
  /// computes y_{n+1} exactly as the adjoint's replayed step does
  /// (the compiled bdf scheme's step, src/ode/scheme_bdf.cpp) — [J | f_p] evaluated afresh at (t_n, y_n),
  /// M refactored, Newton from the window's predictor (at most kBdfMaxOrder
  /// points) converged to newton_tol and to `kappa` of the error tolerance,
  /// landing exactly on the step time run_bdf passes — so the accepted
  /// states are the replayed ones, bit for bit, and a StoreAll sweep can
  /// take them (and step_jacobian()) instead of replaying. The error
  /// estimate and the step/order control are unchanged (E_k still against
  /// the full-order predictor).
  void set_replay(double kappa) {
    replay_ = true;
    kappa_ = kappa;
  }
  bool replay() const { return replay_; }
  /// Newton's weighted stopping fraction of the error tolerance outside
  /// replay mode (default 0.01; the library's runs are all in replay mode).
  void set_newton_kappa(double kappa) { kappa_ = kappa; }
  /// Replay mode: [J | f_p] at the last attempt's start (t_n, y_n).
  const Eigen::MatrixXd& step_jacobian() const { return jp_; }

  /// Starts the history at (t0, y0).
  void start(double t0, std::span<const double> y0) {
    npts_ = 1;
    T_[0] = t0;
    std::copy(y0.begin(), y0.end(), point(0).begin());
    jac_.rhs(t0, y0, f0_);
  }
  std::span<const double> f0() const { return f0_; }
  int points() const { return npts_; }
  double time(int m) const { return T_[m]; }
  /// History point m (0 = newest).
  std::span<double> point(int m) {
    return std::span<double>(store_.data() + static_cast<std::size_t>(slot_[m]) * n_, n_);
  }

  /// Attempts order k with step h from the newest point into z (kept
  /// internally); returns false when Newton failed. err() is the weighted
  /// error norm of E_k.
  /// `land` is the step's end time as the driver records it (replay mode
  /// steps to it exactly; otherwise the step ends at t_n + h).
  bool attempt(double h, int k, double rtol, std::span<const double> atol, double land) {
    if (replay_) return attempt_replayed(h, k, rtol, atol, land);
    const double t = T_[0], tn = t + h;
    std::array<double, kBdfMaxOrder + 1> tau{};
    tau[0] = tn;
    for (int m = 1; m <= k; ++m) tau[m] = T_[m - 1];
    std::array<double, kBdfMaxOrder> alpha{};
    const double g = bdf_coefficients(tau, k, alpha.data());
    std::fill(r_.begin(), r_.end(), 0.0);
    for (int j = 1; j <= k; ++j) {
      const auto yj = point(j - 1);
      for (std::size_t q = 0; q < n_; ++q) r_[q] += alpha[j - 1] * yj[q];
    }
    predict(tn, k, h);
    std::copy(pred_.begin(), pred_.end(), z_.begin());
    if (!newton_.has_jacobian() || since_jacobian_ >= 50 || stale_) {
      newton_.evaluate_jacobian(t, point(0));
      since_jacobian_ = 0;
      stale_ = false;
      fresh_ = true;
    }
    {
      const auto yn = point(0);
      for (std::size_t q = 0; q < n_; ++q) w_[q] = 1.0 / (atol[q] + rtol * std::abs(yn[q]));
    }
    bool ok = newton_.solve(tn, r_, g, z_, w_, kappa_);
    if (!ok && !fresh_) {
      newton_.evaluate_jacobian(t, point(0));
      since_jacobian_ = 0;
      fresh_ = true;
      std::copy(pred_.begin(), pred_.end(), z_.begin());
      ok = newton_.solve(tn, r_, g, z_, w_, kappa_);
    }
    if (!ok) return false;
    if (newton_.rate > 0.5) stale_ = true;
    // E_k and its norm (weights from y_n).
    const auto yn = point(0);
    const double scale = npts_ == 1 ? 0.5 : 1.0 / (lead(tau, k) * (tn - T_[k]));
    for (std::size_t q = 0; q < n_; ++q) e_[q] = scale * (z_[q] - pred_[q]);
    detail::apply_mass(unmeasured_, e_.data());
    err_ = detail::wrms(e_, w_);
    h_ = h;
    return true;
  }
  double err() const { return err_; }
  std::span<const double> solution() const { return z_; }

  /// Accepts the last attempt: the new point becomes the newest.
  void accept() {
    const int last = slot_[kHistory - 1];
    for (int m = kHistory - 1; m > 0; --m) {
      slot_[m] = slot_[m - 1];
      T_[m] = T_[m - 1];
    }
    slot_[0] = last;
    if (replay_)
      T_[0] = tn_;
    else
      T_[0] += h_;
    std::copy(z_.begin(), z_.end(), point(0).begin());
    npts_ = std::min(npts_ + 1, kHistory);
    ++since_jacobian_;
    fresh_ = false;
    jp_current_ = false;
  }
  void reject() { fresh_ = false; }

  /// After accept(): the weighted norm of E_q, the error order q would have
  /// made on the last step (needs q + 2 points).
  double error_of_order(int q) {
    std::array<double, kBdfMaxOrder + 2> tau{};
    for (int m = 0; m <= q + 1; ++m) tau[m] = T_[m];
    // Predictor of order q through points 1..q+1 at t_{n+1}.
    std::array<double, kBdfMaxOrder + 2> wts{};
    lagrange_weights(std::span<const double>(tau).subspan(1), q + 1, tau[0], wts.data());
    const double scale = 1.0 / (lead(tau, q) * (tau[0] - tau[q + 1]));
    const auto y1 = point(0);
    for (std::size_t i = 0; i < n_; ++i) {
      double pv = 0.0;
      for (int m = 0; m <= q; ++m) pv += wts[m] * point(m + 1)[i];
      e_[i] = scale * (y1[i] - pv);
    }
    detail::apply_mass(unmeasured_, e_.data());
    return detail::wrms(e_, w_);
  }

  /// y(t) for t in [t_n, t_{n+1}] by the interpolating polynomial of order k.
  void interpolate(double t, int k, std::span<double> out) {
    const int count = std::min(k + 1, npts_);
    std::array<double, kHistory> wts{};
    lagrange_weights(std::span<const double>(T_), count, t, wts.data());
    std::fill(out.begin(), out.end(), 0.0);
    for (int m = 0; m < count; ++m) {
      const auto ym = point(m);
      for (std::size_t i = 0; i < n_; ++i) out[i] += wts[m] * ym[i];
    }
  }

 private:
  /// The replay-mode attempt (see set_replay); mirrors the compiled bdf scheme's step (src/ode/scheme_bdf.cpp).
  bool attempt_replayed(double h, int k, double rtol, std::span<const double> atol, double tn) {
    const double t = T_[0];
    std::array<double, kBdfMaxOrder + 1> tau{};
    tau[0] = tn;
    for (int m = 1; m <= k; ++m) tau[m] = T_[m - 1];
    std::array<double, kBdfMaxOrder> alpha{};
    const double g = bdf_coefficients(tau, k, alpha.data());
    std::fill(r_.begin(), r_.end(), 0.0);
    for (int j = 1; j <= k; ++j) {
      const auto yj = point(j - 1);
      for (std::size_t q = 0; q < n_; ++q) r_[q] += alpha[j - 1] * yj[q];
    }
    // Newton's start: the scheme's predictor (the window holds kBdfMaxOrder
    // points; the first step is explicit Euler over tn − t).
    const auto yn = point(0);
    const int count = std::min({k + 1, npts_, kBdfMaxOrder});
    if (npts_ == 1) {
      for (std::size_t q = 0; q < n_; ++q) z_[q] = yn[q] + (tn - t) * f0_[q];
    } else {
      std::array<double, kHistory> wts{};
      lagrange_weights(std::span<const double>(T_), count, tn, wts.data());
      std::fill(z_.begin(), z_.end(), 0.0);
      for (int m = 0; m < count; ++m) {
        const auto ym = point(m);
        for (std::size_t q = 0; q < n_; ++q) z_[q] += wts[m] * ym[q];
      }
    }
    if (!jp_current_) {  // a retry from the same point keeps it (the same bits)
      jp_ = jac_.state_parameters(t, yn);
      jp_current_ = true;
    }
    newton_.set_jacobian(jp_);
    for (std::size_t q = 0; q < n_; ++q) w_[q] = 1.0 / (atol[q] + rtol * std::abs(yn[q]));
    if (!newton_.solve(tn, r_, g, z_, w_, kappa_)) return false;
    // E_k against the full-order predictor, as in attempt().
    predict(tn, k, tn - t);
    const double scale = npts_ == 1 ? 0.5 : 1.0 / (lead(tau, k) * (tn - T_[k]));
    for (std::size_t q = 0; q < n_; ++q) e_[q] = scale * (z_[q] - pred_[q]);
    detail::apply_mass(unmeasured_, e_.data());
    err_ = detail::wrms(e_, w_);
    h_ = h;
    tn_ = tn;
    return true;
  }

  static double lead(std::span<const double> tau, int k) {
    double a0 = 0.0;
    for (int m = 1; m <= k; ++m) a0 += 1.0 / (tau[0] - tau[m]);
    return a0;
  }
  void predict(double tn, int k, double h) {
    if (npts_ == 1) {
      const auto y0 = point(0);
      for (std::size_t q = 0; q < n_; ++q) pred_[q] = y0[q] + h * f0_[q];
      return;
    }
    const int count = std::min(k + 1, npts_);
    std::array<double, kHistory> wts{};
    lagrange_weights(std::span<const double>(T_), count, tn, wts.data());
    std::fill(pred_.begin(), pred_.end(), 0.0);
    for (int m = 0; m < count; ++m) {
      const auto ym = point(m);
      for (std::size_t q = 0; q < n_; ++q) pred_[q] += wts[m] * ym[q];
    }
  }

  detail::ModelJacobian<M> jac_;
  detail::ModifiedNewton<M> newton_;
  std::size_t n_;
  std::vector<double> store_, r_, pred_, z_, e_, w_, f0_;
  std::vector<std::uint8_t> unmeasured_;  // out of E_q: a DAE's algebraic states (empty: none)
  std::array<int, kHistory> slot_{};
  std::array<double, kHistory> T_{};
  int npts_ = 0;
  double err_ = 0.0, h_ = 0.0;
  int since_jacobian_ = 0;
  bool stale_ = false, fresh_ = false;
  bool replay_ = false, jp_current_ = false;
  double kappa_ = 0.01, tn_ = 0.0;
  Eigen::MatrixXd jp_;
};

namespace detail {

/// Adaptive variable-order BDF from t0 to t1 in place on y; `out(j, t, y)`
/// per output time (interpolated, or landed on with opt.stop_at_outputs);
/// `accepted(t_new, k)` after every accepted step with its order.
template <class M, class Out, class Accepted>
void run_bdf(BdfStepper<M>& st, double t0, double t1, std::span<double> y,
             const IntegratorOptions& opt, std::span<const double> outputs, Out&& out,
             Summary& s, Accepted&& accepted) {
  const std::size_t n = y.size();
  const double hmax = opt.dt_max > 0.0 ? opt.dt_max : t1 - t0;
  const std::vector<double> atol = atol_vector(opt, n);
  std::vector<double> tmp(n), w(n);
  std::size_t j = 0;
  double t = t0;
  while (j < outputs.size() && outputs[j] == t) out(j++, t, std::span<const double>(y));
  st.start(t, y);
  double h = opt.dt;
  if (h <= 0.0) {
    for (std::size_t i = 0; i < n; ++i) w[i] = 1.0 / (atol[i] + opt.rtol * std::abs(y[i]));
    h = implicit_initial_step(st.model_jacobian(), t, y, st.f0(), w, 1, hmax);
  }
  int k = 1, at_order = 0, failures = 0;
  double eta_max = 1e4;
  double forced = std::numeric_limits<double>::infinity();  // a retaken step's end
  bool stop = false;
  while (t < t1 && !stop) {
    const double target =
        std::min({opt.stop_at_outputs && j < outputs.size() ? outputs[j] : t1,
                  opt.next_landing(t, t1), forced});
    bool last = false;
    if (!guard_step(t, h, hmax, target, opt, s, last)) break;
    const double t_new = last ? target : t + h;
    if (!st.attempt(h, k, opt.rtol, atol, t_new)) {
      st.reject();
      ++s.rejected_steps;
      h *= 0.25;
      eta_max = 1.0;
      continue;
    }
    const double err = st.err();
    if (!(err <= 1.0)) {
      st.reject();
      ++s.rejected_steps;
      ++failures;
      eta_max = 1.0;
      if (failures >= 3 || !std::isfinite(err)) {
        if (k > 1) --k;
        at_order = 0;
        h *= 0.1;
      } else {
        double eta = 1.0 / (std::pow(6.0 * err, 1.0 / (k + 1.0)) + 1e-6);
        eta = std::clamp(eta, 0.1, 0.9);
        if (failures >= 2) eta = std::min(eta, 0.2);
        h *= eta;
      }
      continue;
    }
    if (opt.step_watch) {
      const StepVerdict v =
          opt.step_watch(t, std::span<const double>(y), t_new, st.solution());
      if (v.kind == StepVerdict::Kind::Retry) {
        st.reject();
        forced = v.t;
        ++s.rejected_steps;
        h = v.t - t;
        continue;
      }
      stop = v.kind == StepVerdict::Kind::Stop;
    }
    // Accepted.
    st.accept();
    ++s.steps;
    s.last_step = h;
    ++at_order;
    const int k_used = k;
    while (j < outputs.size() && outputs[j] <= t_new) {
      const double to = outputs[j];
      if (to == t_new) {
        out(j, t_new, st.solution());
      } else {
        st.interpolate(to, k_used, tmp);
        out(j, to, std::span<const double>(tmp));
      }
      ++j;
    }
    std::copy(st.solution().begin(), st.solution().end(), y.begin());
    t = t_new;
    s.final_time = t;
    accepted(t, k_used);
    if (opt.on_step) opt.on_step(t);
    // Next step size and order.
    double eta = 1.0 / (std::pow(6.0 * err, 1.0 / (k + 1.0)) + 1e-6);
    int k_new = k;
    if (at_order >= k + 1) {
      if (k > 1) {
        const double e = st.error_of_order(k - 1);
        const double eta_m = 1.0 / (std::pow(6.0 * e, 1.0 / k) + 1e-6);
        if (eta_m > eta) {
          eta = eta_m;
          k_new = k - 1;
        }
      }
      if (k < kBdfMaxOrder && st.points() >= k + 3) {
        const double e = st.error_of_order(k + 1);
        const double eta_p = 1.0 / (std::pow(10.0 * e, 1.0 / (k + 2.0)) + 1e-6);
        if (eta_p > eta) {
          eta = eta_p;
          k_new = k + 1;
        }
      }
    }
    if (eta < 1.5) {
      eta = 1.0;
      k_new = k;
    } else {
      eta = std::min(eta, eta_max);
    }
    if (k_new != k) at_order = 0;
    k = k_new;
    h *= eta;
    eta_max = 10.0;
    failures = 0;
  }
  s.final_time = t;
}

}  // namespace detail
}  // namespace costate::ode
