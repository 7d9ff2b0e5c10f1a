#pragma once
/// \file
/// Gradients through the adaptive implicit steppers (sdirk3, bdf) on a
/// replayed step sequence — the sweep ode::gradient runs for them.
///
/// A stepper plugs in as a *scheme*: a map x_i → x_{i+1} on a state x of
/// fixed size (SDIRK: y; BDF: the history window (y_i, …, y_{i−4})) with
///   initial(y0, x0)                x_0 from y(t0)
///   step(i, x_i, x_{i+1})          replayed step i (constants: times, orders)
///   adjoint(i, x_i, x_{i+1}, λ, μ)  λ ← (∂x_{i+1}/∂x_i)ᵀ λ,  μ += (∂x_{i+1}/∂p)ᵀ λ
///   tangent(i, x_i, x_{i+1}, S, S', P)   S' = ∂x_{i+1}/∂x_i S + ∂x_{i+1}/∂p P
/// and y = the first n_a entries of x. The sweep seeds λ with the objective
/// (terminal, running cost through z, observations at their steps) and runs
/// the checkpoint schedule over x, so snapshots hold whole windows.
///
/// Replayed steps are deterministic functions of (x_i, p): Newton starts
/// from a predictor of x_i, with a Jacobian evaluated afresh at the step's
/// start, and is converged to newton_tol and to 10⁻⁶ of the error tolerance
/// (weighted; replay_kappa) — the adjoint assumes the implicit equations
/// hold exactly.
/// So every checkpoint schedule reproduces the same bits. bdf's adaptive
/// run in ode::gradient makes its accepted steps the same way
/// (BdfStepper::set_replay), and a StoreAll sweep takes them
/// (BdfScheme::use_forward_run) instead of replaying.

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

/// Per-step data a StoreAll sweep keeps from its replayed forward steps for
/// the reverse steps (schemes' keep_step_data): slot i holds `width`
/// doubles. Kept only while the whole cache fits kStepCacheBytes; above
/// that the reverse steps recompute the data (the same bits, more work).
class StepCache {
 public:
  static constexpr std::size_t kStepCacheBytes = std::size_t{256} << 20;

  void enable(std::size_t slots, std::size_t width) {
    if (width == 0 || slots * width * sizeof(double) > kStepCacheBytes) return;
    width_ = width;
    data_.assign(slots * width, 0.0);
    have_.assign(slots, 0);
  }
  /// Read-only slots 0 … filled − 1 from `data` (filled × width doubles,
  /// not copied: it must outlive the cache); the others stay empty.
  void borrow(std::size_t width, std::span<const double> data, std::size_t filled) {
    if (width == 0 || data.size() != filled * width) return;
    width_ = width;
    borrowed_ = data.data();
    borrowed_slots_ = filled;
  }
  bool enabled() const { return width_ > 0; }
  /// Slot i, marked filled (the caller fills it).
  std::span<double> fill(std::size_t i) {
    have_[i] = 1;
    return std::span<double>(data_).subspan(i * width_, width_);
  }
  /// Slot i if filled, else nullptr.
  const double* get(std::size_t i) const {
    if (borrowed_) return i < borrowed_slots_ ? borrowed_ + i * width_ : nullptr;
    return enabled() && i < have_.size() && have_[i] ? data_.data() + i * width_ : nullptr;
  }

 private:
  const double* borrowed_ = nullptr;
  std::size_t borrowed_slots_ = 0;
  std::size_t width_ = 0;
  std::vector<double> data_;
  std::vector<char> have_;
};

/// bdf's forward run as a StoreAll sweep takes it (BdfScheme::use_forward_run):
/// per-thread buffers that keep their capacity from call to call (fresh
/// large vectors cost a page fault per 4 kB on every gradient), released
/// after a call that made them larger than kKeepBytes.
struct ForwardRecord {
  static constexpr std::size_t kKeepBytes = std::size_t{32} << 20;
  std::vector<double> states, jacobians;
  void clear() {
    states.clear();
    jacobians.clear();
  }
  void trim() {
    if (states.capacity() * sizeof(double) > kKeepBytes) std::vector<double>().swap(states);
    if (jacobians.capacity() * sizeof(double) > kKeepBytes) std::vector<double>().swap(jacobians);
  }
  static ForwardRecord& of_this_thread() {
    thread_local ForwardRecord r;
    return r;
  }
};

/// sdirk3 as a scheme: x = y.
template <class A>
class SdirkScheme {
 public:
  SdirkScheme(const A& model, std::span<const double> p, std::size_t na,
              const IntegratorOptions& opt, const std::vector<double>& times)
      : st_(model, p, na, opt.newton_tol, opt.newton_max_iterations, opt.rtol,
            atol_vector(opt, na), replay_kappa(opt)),
        jac_(model, p, na), times_(times), na_(na), np_(p.size()), tmp_(na), solve_(na),
        kbar_(static_cast<Eigen::Index>(na), 3), ybar_(static_cast<Eigen::Index>(na)),
        pbar_(static_cast<Eigen::Index>(p.size())) {}

  /// StoreAll: keep each replayed step's stages and its [J | f_p] at the
  /// step's start (which the Newton iteration evaluates anyway), so the
  /// reverse step neither re-solves the stages nor evaluates the last
  /// stage's Jacobian (Y_3 = y_{i+1} at t_{i+1}: the next step's start).
  void keep_step_data(std::size_t steps) {
    cache_.enable(steps + 1, 3 * na_ + na_ * (na_ + np_));
  }

  std::size_t n() const { return na_; }
  std::size_t state_size() const { return na_; }
  void initial(std::span<const double> y0, std::span<double> x0) const {
    std::copy(y0.begin(), y0.end(), x0.begin());
  }
  void step(std::size_t i, std::span<const double> x, std::span<double> xn) {
    const double h = times_[i + 1] - times_[i];
    bool ok = false;
    if (cache_.enabled()) {
      const Eigen::MatrixXd& jp = jac_.state_parameters(times_[i], x);
      ok = st_.attempt(times_[i], h, x, xn, true, &jp);
      if (ok) {
        const std::span<double> slot = cache_.fill(i);
        for (int s = 0; s < 3; ++s)
          std::copy(st_.stage(s).begin(), st_.stage(s).end(),
                    slot.begin() + static_cast<std::ptrdiff_t>(s * na_));
        std::copy(jp.data(), jp.data() + jp.size(),
                  slot.begin() + static_cast<std::ptrdiff_t>(3 * na_));
      }
    } else {
      ok = st_.attempt(times_[i], h, x, xn, true);
    }
    COSTATE_CHECK(ok, "gradient: the replayed sdirk3 step at t = " << times_[i]
                                                                   << " failed to converge");
  }
  void adjoint(std::size_t i, std::span<const double> x, std::span<const double>,
               std::span<double> lambda, std::span<double> mu) {
    using namespace sdirk3_tableau;
    const double t = times_[i], h = times_[i + 1] - t;
    const double* kept = cache_.get(i);
    if (!kept) step(i, x, tmp_);  // the stages
    const double* kept_next = cache_.get(i + 1);
    const auto nn = static_cast<Eigen::Index>(na_), npp = static_cast<Eigen::Index>(np_);
    Eigen::Map<Eigen::VectorXd> lam(lambda.data(), nn);
    for (int s = 0; s < 3; ++s) kbar_.col(s) = h * b[s] * lam;
    pbar_.setZero();
    for (int s = 2; s >= 0; --s) {
      const double ts = t + c[s] * h;
      const std::span<const double> Y =
          kept ? std::span<const double>(kept + s * na_, na_) : st_.stage(s);
      // The last stage is y_{i+1} at t_{i+1}: the next step's start.
      const double* jp_data = s == 2 && kept_next && ts == times_[i + 1]
                                  ? kept_next + 3 * na_
                                  : jac_.state_parameters(ts, Y).data();
      const Eigen::Map<const Eigen::MatrixXd> JP(jp_data, nn, nn + npp);
      solve_.factor(h * gamma, JP);
      const Eigen::VectorXd& w = solve_.solve(kbar_.col(s));
      ybar_.setZero();
      add_transposed_product(JP, 0, nn, w.data(), 1.0, ybar_.data());
      add_transposed_product(JP, nn, npp, w.data(), 1.0, pbar_.data());
      lam += ybar_;
      for (int j = 0; j < s; ++j) kbar_.col(j) += h * a[s][j] * ybar_;
    }
    for (std::size_t j = 0; j < np_; ++j) mu[j] += pbar_[static_cast<Eigen::Index>(j)];
  }
  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn,
               const Eigen::MatrixXd& S, Eigen::MatrixXd& Sn, const Eigen::MatrixXd& P) {
    using namespace sdirk3_tableau;
    const double t = times_[i], h = times_[i + 1] - t;
    step(i, x, xn);
    const auto nn = static_cast<Eigen::Index>(na_), npp = static_cast<Eigen::Index>(np_);
    std::array<Eigen::MatrixXd, 3> K;
    Sn = S;
    for (int s = 0; s < 3; ++s) {
      const Eigen::MatrixXd JP = jac_.state_parameters(t + c[s] * h, st_.stage(s));
      Eigen::MatrixXd arg = S;
      for (int j = 0; j < s; ++j) arg += h * a[s][j] * K[j];
      const Eigen::MatrixXd rhs = JP.leftCols(nn) * arg + JP.rightCols(npp) * P;
      const Eigen::MatrixXd M = Eigen::MatrixXd::Identity(nn, nn) - h * gamma * JP.leftCols(nn);
      K[s] = M.partialPivLu().solve(rhs);
      Sn += h * b[s] * K[s];
    }
  }
  std::int64_t rhs_evaluations() {
    return st_.model_jacobian().rhs_evaluations + jac_.rhs_evaluations;
  }

 private:
  Sdirk3Stepper<A> st_;
  ModelJacobian<A> jac_;
  const std::vector<double>& times_;
  std::size_t na_, np_;
  std::vector<double> tmp_;
  StepCache cache_;
  TransposedSolve solve_;
  Eigen::MatrixXd kbar_;
  Eigen::VectorXd ybar_, pbar_;
};

/// Variable-order BDF as a scheme: x = (y_i, y_{i−1}, …, y_{i−4}).
template <class A>
class BdfScheme {
 public:
  static constexpr int kWindow = kBdfMaxOrder;

  BdfScheme(const A& model, std::span<const double> p, std::size_t na,
            const IntegratorOptions& opt, const std::vector<double>& times,
            const std::vector<int>& orders)
      : jac_(model, p, na), newton_(jac_, opt.newton_tol, opt.newton_max_iterations),
        times_(times), orders_(orders), na_(na), np_(p.size()), atol_(atol_vector(opt, na)),
        rtol_(opt.rtol), kappa_(replay_kappa(opt)), r_(na), pred_(na), w_(na), f_(na),
        solve_(na) {}

  /// StoreAll: keep [J | f_p] at each replayed step's start y_i — the
  /// Jacobian its Newton iteration evaluates anyway, and the one the
  /// adjoint of step i − 1 needs — so the reverse step evaluates none.
  /// With a forward run handed over (use_forward_run), the steps are not
  /// replayed at all: step() takes the run's states, the cache its Jacobians.
  void keep_step_data(std::size_t steps) {
    const std::size_t width = na_ * (na_ + np_);
    use_forward_ = forward_states_.size() == steps * na_ && steps > 0;
    if (use_forward_ && forward_jacobians_.size() == steps * width)
      cache_.borrow(width, forward_jacobians_, steps);
    else
      cache_.enable(steps + 1, width);
  }
  /// The adaptive forward run's accepted states y_1 … y_l (l × n) and
  /// [J | f_p] at y_0 … y_{l−1} (l × n(n + n_p), or empty), made with
  /// BdfStepper::set_replay(replay_kappa) on these step times and orders:
  /// bit for bit what step() computes. Used (not copied: they must outlive
  /// the scheme) by a StoreAll sweep only (keep_step_data); the other
  /// schedules replay, as they must to save memory — and give the same bits.
  void use_forward_run(std::span<const double> states, std::span<const double> jacobians) {
    forward_states_ = states;
    forward_jacobians_ = jacobians;
  }

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
    if (use_forward_) {  // the forward run's y_{i+1}: shift the window
      for (int s = kWindow - 1; s >= 1; --s)
        std::copy(x.begin() + (s - 1) * static_cast<std::ptrdiff_t>(na_),
                  x.begin() + s * static_cast<std::ptrdiff_t>(na_),
                  xn.begin() + s * static_cast<std::ptrdiff_t>(na_));
      const auto from = forward_states_.begin() + static_cast<std::ptrdiff_t>(i * na_);
      std::copy(from, from + static_cast<std::ptrdiff_t>(na_), xn.begin());
      return;
    }
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
    if (cache_.enabled()) {
      const Eigen::MatrixXd& jp = jac_.state_parameters(t, x.first(na_));
      std::copy(jp.data(), jp.data() + jp.size(), cache_.fill(i).begin());
      newton_.set_jacobian(jp);
    } else {
      newton_.evaluate_jacobian(t, x.first(na_));
    }
    if (!newton_.solve(tn, r_, g, z, w_, kappa_)) {
      std::copy(pred_.begin(), pred_.end(), z.begin());
      newton_.evaluate_jacobian(tn, pred_);
      COSTATE_CHECK(newton_.solve(tn, r_, g, z, w_, kappa_),
                    "gradient: the replayed bdf step at t = " << t << " failed to converge");
    }
  }

  void adjoint(std::size_t i, std::span<const double>, std::span<const double> xn,
               std::span<double> lambda, std::span<double> mu) {
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const auto nn = static_cast<Eigen::Index>(na_), npp = static_cast<Eigen::Index>(np_);
    const double* kept = cache_.get(i + 1);
    const Eigen::Map<const Eigen::MatrixXd> JP(
        kept ? kept : jac_.state_parameters(times_[i + 1], xn.first(na_)).data(), nn, nn + npp);
    solve_.factor(g, JP);
    const Eigen::VectorXd& m = solve_.solve(Eigen::Map<const Eigen::VectorXd>(lambda.data(), nn));
    // Shift: λ_n[s] = λ[s + 1], λ_n[last] = 0, then distribute α_j μ.
    for (int s = 0; s + 1 < kWindow; ++s)
      std::copy(lambda.begin() + (s + 1) * static_cast<std::ptrdiff_t>(na_),
                lambda.begin() + (s + 2) * static_cast<std::ptrdiff_t>(na_),
                lambda.begin() + s * static_cast<std::ptrdiff_t>(na_));
    std::fill(lambda.begin() + (kWindow - 1) * static_cast<std::ptrdiff_t>(na_), lambda.end(), 0.0);
    for (int j = 1; j <= k; ++j)
      for (std::size_t q = 0; q < na_; ++q)
        lambda[(j - 1) * na_ + q] += alpha[j - 1] * m[static_cast<Eigen::Index>(q)];
    add_transposed_product(JP, nn, npp, m.data(), g, mu.data());
  }

  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn,
               const Eigen::MatrixXd& S, Eigen::MatrixXd& Sn, const Eigen::MatrixXd& P) {
    step(i, x, xn);
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const auto nn = static_cast<Eigen::Index>(na_), npp = static_cast<Eigen::Index>(np_);
    const Eigen::MatrixXd JP = jac_.state_parameters(times_[i + 1], xn.first(na_));
    Eigen::MatrixXd rhs = g * (JP.rightCols(npp) * P);
    for (int j = 1; j <= k; ++j) rhs += alpha[j - 1] * S.middleRows((j - 1) * nn, nn);
    const Eigen::MatrixXd M = Eigen::MatrixXd::Identity(nn, nn) - g * JP.leftCols(nn);
    Sn.resize(S.rows(), S.cols());
    for (int s = kWindow - 1; s >= 1; --s) Sn.middleRows(s * nn, nn) = S.middleRows((s - 1) * nn, nn);
    Sn.topRows(nn) = M.partialPivLu().solve(rhs);
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
  StepCache cache_;
  TransposedSolve solve_;
  std::span<const double> forward_states_, forward_jacobians_;
  bool use_forward_ = false;
};

/// What scheme_gradient computed.
struct SchemeOutcome {
  double objective = 0.0;
  std::vector<double> wrt_parameters, wrt_initial_state;
  CheckpointStats checkpoints;
  std::int64_t vjp_evaluations = 0;
};

/// The objective J and its gradient over the replayed steps `times` by the
/// scheme: forward tangents when `checkpointing` is null, else the discrete
/// adjoint with that schedule. `obs_at[i]` is the observation index at step
/// index i (or −1); y0a the augmented initial state; n the model's states.
template <class Scheme, class O>
SchemeOutcome scheme_gradient(Scheme& sc, const O& objective, const Checkpointing* checkpointing,
                              const std::vector<double>& times,
                              const std::vector<std::int64_t>& obs_at,
                              std::span<const double> y0a, std::span<const double> p,
                              std::size_t n) {
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t W = sc.state_size(), np = p.size();
  const std::int64_t l = static_cast<std::int64_t>(times.size()) - 1;
  SchemeOutcome out;
  ad::Tape tape;
  std::vector<double> gy(n), gp(np);
  double J = 0.0;

  // Value and (y, p)-gradient of one objective term at state y.
  auto term = [&](auto&& f, std::span<const double> y) {
    std::fill(gy.begin(), gy.end(), 0.0);
    std::fill(gp.begin(), gp.end(), 0.0);
    J += value_and_gradient(f, y.first(n), p, gy, gp, tape);
  };
  auto observation = [&](std::size_t i, std::span<const double> y) {
    if constexpr (HasObservations<O>) {
      const std::int64_t k = obs_at[i];
      if (k < 0) return false;
      term(
          [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
            return ad::Real(objective.template observation<ad::Real>(static_cast<std::size_t>(k), yy, pp));
          },
          y);
      return true;
    } else {
      (void)i;
      (void)y;
      return false;
    }
  };
  auto terminal = [&](std::span<const double> y) {
    if constexpr (HasTerminal<O>) {
      term(
          [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
            return ad::Real(objective.template terminal<ad::Real>(yy, pp));
          },
          y);
      return true;
    } else {
      (void)y;
      return false;
    }
  };

  std::vector<double> cur(W), next(W);
  sc.initial(y0a, cur);
  if (!checkpointing) {
    // Forward tangents S = ∂x/∂(p, y0), all directions at once.
    const std::size_t m = np + n;
    Eigen::MatrixXd S = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(W), static_cast<Eigen::Index>(m));
    Eigen::MatrixXd Sn, P = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(np), static_cast<Eigen::Index>(m));
    for (std::size_t j = 0; j < np; ++j) P(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(j)) = 1.0;
    for (std::size_t i = 0; i < n; ++i) S(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(np + i)) = 1.0;
    Eigen::RowVectorXd dJ = Eigen::RowVectorXd::Zero(static_cast<Eigen::Index>(m));
    auto add = [&] {
      for (std::size_t i = 0; i < n; ++i) dJ += gy[i] * S.row(static_cast<Eigen::Index>(i));
      for (std::size_t j = 0; j < np; ++j) dJ += gp[j] * P.row(static_cast<Eigen::Index>(j));
    };
    if (observation(0, cur)) add();
    for (std::int64_t i = 0; i < l; ++i) {
      const auto u = static_cast<std::size_t>(i);
      sc.tangent(u, cur, next, S, Sn, P);
      std::swap(cur, next);
      std::swap(S, Sn);
      if (observation(u + 1, cur)) add();
    }
    if (terminal(cur)) add();
    if constexpr (kRunning) {
      J += cur[n];
      dJ += S.row(static_cast<Eigen::Index>(n));
    }
    out.objective = J;
    out.wrt_parameters.assign(dJ.data(), dJ.data() + np);
    out.wrt_initial_state.assign(dJ.data() + np, dJ.data() + m);
    out.checkpoints.steps = l;
    out.checkpoints.forward_steps = l;
    return out;
  }

  // Discrete adjoint over the checkpoint schedule.
  if (std::holds_alternative<StoreAll>(*checkpointing)) sc.keep_step_data(static_cast<std::size_t>(l));
  std::vector<double> after(W), lambda(W, 0.0), mu(np, 0.0);
  struct Ops {
    std::vector<double>* current = nullptr;
    std::int64_t i = 0;
    SnapshotStore* store = nullptr;
    std::function<void()> advance_fn, reverse_fn;
    std::vector<std::int64_t> slot_step;
    void advance() { advance_fn(); }
    void save(std::size_t s) {
      store->save(s, *current);
      slot_step.resize(std::max(slot_step.size(), s + 1));
      slot_step[s] = i;
    }
    void restore(std::size_t s) {
      store->load(s, *current);
      i = slot_step[s];
    }
    void reverse_step() { reverse_fn(); }
    std::int64_t index() const { return i; }
  } ops;
  ops.current = &cur;
  std::size_t disk_slots = 0;
  std::string disk_path;
  if (const auto* ml = std::get_if<Multilevel>(checkpointing)) {
    disk_slots = static_cast<std::size_t>(ml->disk);
    disk_path = ml->path;
  }
  SnapshotStore store(W, disk_slots, disk_path);
  ops.store = &store;
  auto add_to_lambda = [&] {
    for (std::size_t q = 0; q < n; ++q) lambda[q] += gy[q];
    for (std::size_t j = 0; j < np; ++j) mu[j] += gp[j];
  };
  ops.advance_fn = [&] {
    sc.step(static_cast<std::size_t>(ops.i), cur, next);
    std::swap(cur, next);
    ++ops.i;
  };
  ops.reverse_fn = [&] {
    const auto i = static_cast<std::size_t>(ops.i);
    // x_{i+1} was the previous reverse step's state; only the last step is
    // computed here.
    if (ops.i == l - 1)
      sc.step(i, cur, next);
    else
      next = after;
    after = cur;
    if (ops.i == l - 1) {
      if (terminal(next)) add_to_lambda();
      if constexpr (kRunning) {
        J += next[n];
        lambda[n] = 1.0;
      }
      if (observation(static_cast<std::size_t>(l), next)) add_to_lambda();
    }
    sc.adjoint(i, cur, next, lambda, mu);
    if (observation(i, cur)) add_to_lambda();
  };
  out.checkpoints = reverse_sweep(*checkpointing, ops, l);
  out.checkpoints.disk_snapshots = store.disk_writes();
  out.objective = J;
  out.wrt_parameters = mu;
  out.wrt_initial_state.assign(lambda.begin(), lambda.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

}  // namespace costate::ode::detail
