// ode::ContinuousAdjoint, compiled once on ode::System (see
// include/costate/ode/continuous_adjoint.hpp for the maths): the adaptive
// forward run (dopri5, sdirk3 or bdf) that keeps its accepted states, the
// interpolant of its stepper, the backward equation as a System (AdjointModel
// below) and its backward integration by the same stepper.
#include "costate/ode/continuous_adjoint.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/steppers/bdf.hpp"
#include "costate/ode/steppers/dopri5.hpp"
#include "costate/ode/steppers/sdirk3.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "events_internal.hpp"
#include "implicit_system.hpp"
#include "ode/dae.hpp"

namespace costate::ode {

void ContinuousAdjoint::validate() const {
  COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0,
                "sensitivity.adjoint_rtol = " << costate::detail::format_value(rtol)
                                              << " must be >= 0 (0: integrator.rtol)");
  COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                "sensitivity.adjoint_atol = " << costate::detail::format_value(atol)
                                              << " must be >= 0 (0: integrator.atol)");
}

namespace detail {
namespace {

/// A quadrature's absolute tolerance: outside the error test.
constexpr double kQuadratureAtol = 1e300;

/// The forward run's accepted states x_0 … x_l at t_0 … t_l and the
/// stepper's interpolant between them (see the header's list).
class ForwardTrajectory {
 public:
  ForwardTrajectory(const System& system, std::span<const double> p, Method method)
      : sys_(system), p_(p), method_(method), nx_(system.n_states()) {}

  std::vector<double> times;
  std::vector<double> states;  ///< row i: x at times[i]
  std::vector<int> orders;     ///< bdf: the order of step i (t_i → t_{i+1})
  std::int64_t rhs_evaluations = 0;
  std::int64_t recomputed = 0;  ///< forward steps whose interpolant was rebuilt

  void add(double t, std::span<const double> x) {
    times.push_back(t);
    states.insert(states.end(), x.begin(), x.end());
  }
  std::span<const double> state(std::size_t i) const {
    return std::span<const double>(states).subspan(i * nx_, nx_);
  }
  std::size_t steps() const { return times.size() - 1; }

  /// x(t) into `out` (size n_x), t in [t_0, t_l].
  void at(double t, std::span<double> out) {
    const std::size_t l = steps();
    std::size_t i = static_cast<std::size_t>(
        std::upper_bound(times.begin(), times.end(), t) - times.begin());
    i = i == 0 ? 0 : std::min(i - 1, l - 1);
    const double h = times[i + 1] - times[i];
    const double theta = std::clamp((t - times[i]) / h, 0.0, 1.0);
    switch (method_) {
      case Method::Dopri5: dopri5_at(i, h, theta, out); return;
      case Method::Sdirk3: cubic_at(i, t, out); return;
      default: bdf_at(i, t, out); return;
    }
  }

 private:
  void dopri5_at(std::size_t i, double h, double theta, std::span<double> out) {
    if (!dense_) {
      HostVector like = HostVector::from(state(0));
      dense_ = std::make_unique<Dopri5<HostVector>>(like);
      ya_ = like.clone();
      yb_ = like.clone();
      yt_ = like.clone();
    }
    if (i != interval_) {
      auto rhs = [&](double t, const HostVector& x, const HostVector& dxdt) {
        ++rhs_evaluations;
        sys_.rhs(t, std::span<const double>(x.data(), nx_), p_,
                 std::span<double>(dxdt.data(), nx_));
      };
      const auto xi = state(i);
      std::copy(xi.begin(), xi.end(), ya_.data());
      dense_->start(rhs, times[i], ya_);
      dense_->attempt(rhs, times[i], h, ya_, yb_);
      dense_->accept(h, ya_, yb_, true);
      interval_ = i;
      ++recomputed;
    }
    dense_->interpolate(theta, yt_);
    std::copy(yt_.data(), yt_.data() + nx_, out.begin());
  }

  /// sdirk3: the cubic through the accepted states x_{i−1}, x_i, x_{i+1},
  /// x_{i+2} (the four nearest at the ends of the run): order 3, sdirk3's.
  /// Values only, no slopes: a Hermite cubic's h f(x_i) would amplify the
  /// off-manifold residual of a stiff component by h |f_y| (Robertson's y2
  /// at h ~ 1e6: 1e10 × 1e-14) and make y(t) between steps garbage.
  void cubic_at(std::size_t i, double t, std::span<double> out) {
    const std::size_t l = steps();
    const std::size_t count = std::min<std::size_t>(4, l + 1);
    std::size_t first = i > 0 ? i - 1 : 0;
    if (first + count > l + 1) first = l + 1 - count;
    std::array<double, 4> tau{}, w{};
    for (std::size_t m = 0; m < count; ++m) tau[m] = times[first + m];
    lagrange_weights(std::span<const double>(tau.data(), tau.size()), static_cast<int>(count), t,
                     w.data());
    std::fill(out.begin(), out.end(), 0.0);
    for (std::size_t m = 0; m < count; ++m) {
      const auto xm = state(first + m);
      for (std::size_t q = 0; q < nx_; ++q) out[q] += w[m] * xm[q];
    }
  }

  /// The BDF polynomial of step i: degree k = orders[i] through
  /// x_{i+1}, x_i, …, x_{i+1−k}.
  void bdf_at(std::size_t i, double t, std::span<double> out) {
    const int k = std::min(orders[i], static_cast<int>(i) + 1);
    std::array<double, kBdfMaxOrder + 1> tau{}, w{};
    for (int m = 0; m <= k; ++m) tau[static_cast<std::size_t>(m)] = times[i + 1 - static_cast<std::size_t>(m)];
    lagrange_weights(std::span<const double>(tau.data(), tau.size()), k + 1, t, w.data());
    std::fill(out.begin(), out.end(), 0.0);
    for (int m = 0; m <= k; ++m) {
      const auto xm = state(i + 1 - static_cast<std::size_t>(m));
      for (std::size_t q = 0; q < nx_; ++q) out[q] += w[static_cast<std::size_t>(m)] * xm[q];
    }
  }

  const System& sys_;
  std::span<const double> p_;
  Method method_;
  std::size_t nx_;
  std::size_t interval_ = std::numeric_limits<std::size_t>::max();
  std::unique_ptr<Dopri5<HostVector>> dense_;
  HostVector ya_, yb_, yt_;
};

/// The backward equation as a System: in τ = t_b − t on a leg ending at t_b
/// of a stretch of the forward run (set_leg), X = (λ, μ) (n_x + n_p, no parameters of its own),
///     dλ/dτ = f_xᵀ λ,   dμ/dτ = f_pᵀ λ   at (t, x(t)), x(t) interpolated.
/// τ starts at 0 on each leg, so the steps there are resolved in absolute
/// terms: λ(t_b) = ∂g/∂y is off λ's slow manifold and λ has a layer there
/// (Robertson to 4e7: width ~1e-4, below what t ≈ 4e7 itself resolves for
/// the stepper's minimum step 16 ε |time|).
/// Linear in X: in double the product is the forward Linearization's vJp;
/// on the other scalar types (the Dual passes that form this System's
/// Jacobian for Newton) it is the dense [f_x | f_p] of the same
/// linearization applied to X. Both are cached per t.
class AdjointModel final : public SystemModel {
 public:
  AdjointModel(const System& forward, std::span<const double> p)
      : fwd_(forward), p_(p), nx_(forward.n_states()), n_(forward.n_model_states()),
        np_(p.size()), lin_(forward), x_(nx_), jac_(nx_ * (n_ + np_)) {}

  /// The leg's end t_b, on the forward run's stretch `trajectory` (between
  /// two event instants: x(t) from its interpolant): τ = t_b − t from now on.
  void set_leg(double t_b, ForwardTrajectory& trajectory) {
    t_b_ = t_b;
    if (traj_ != &trajectory) {
      traj_ = &trajectory;
      lin_t_ = jac_t_ = std::numeric_limits<double>::quiet_NaN();
    }
  }
  double time_of(double tau) const { return t_b_ - tau; }
  /// Forward linearizations made (one per distinct time asked for).
  std::int64_t linearizations() const { return linearizations_; }

  void rhs(double tau, std::span<const double> X, std::span<const double>,
           std::span<double> dX) const override {
    linearize(time_of(tau));
    std::fill(dX.begin() + static_cast<std::ptrdiff_t>(nx_), dX.end(), 0.0);
    lin_.vjp(X.first(nx_), dX.first(nx_), dX.subspan(nx_, np_));
  }
  void rhs(double tau, std::span<const Dual8> X, std::span<const Dual8>,
           std::span<Dual8> dX) const override {
    apply(tau, X, dX);
  }
  void rhs(double tau, std::span<const ad::IndexSet> X, std::span<const ad::IndexSet>,
           std::span<ad::IndexSet> dX) const override {
    apply(tau, X, dX);
  }
  void rhs(double tau, std::span<const ad::Real> X, std::span<const ad::Real>,
           std::span<ad::Real> dX) const override {
    apply(tau, X, dX);
  }
  ad::Real terminal(std::span<const ad::Real>, std::span<const ad::Real>) const override {
    return ad::Real(0.0);
  }
  ad::Real observation(std::size_t, std::span<const ad::Real>,
                       std::span<const ad::Real>) const override {
    return ad::Real(0.0);
  }
  std::vector<double> observation_times() const override { return {}; }
  /// A DAE (issue 32): the rows of f_xᵀ λ at the forward's algebraic states
  /// are the adjoint's constraints f_zᵀ λ_x + g_zᵀ λ_z = 0, λ_z its
  /// algebraic states (index 1: g_zᵀ nonsingular).
  std::vector<std::size_t> algebraic_states() const override {
    std::vector<std::size_t> z;
    for (std::size_t i = 0; i < n_; ++i)
      if (fwd_.n_algebraic() > 0 && fwd_.algebraic()[i]) z.push_back(i);
    return z;
  }

 private:
  void linearize(double t) const {
    if (t == lin_t_) return;
    traj_->at(t, x_);
    lin_.at(t, x_, p_);
    lin_t_ = t;
    jac_t_ = std::numeric_limits<double>::quiet_NaN();
    ++linearizations_;
  }
  template <class T>
  void apply(double tau, std::span<const T> X, std::span<T> dX) const {
    const double t = time_of(tau);
    linearize(t);
    if (!(jac_t_ == t)) {
      lin_.jacobian(jac_);
      jac_t_ = t;
    }
    // Column c of [f_y | f_p] (n_x entries) dotted with λ; the z column is 0.
    auto column = [&](std::size_t c) {
      T acc = T(0.0);
      const double* col = jac_.data() + c * nx_;
      for (std::size_t i = 0; i < nx_; ++i)
        if (col[i] != 0.0) acc += X[i] * col[i];
      return acc;
    };
    for (std::size_t j = 0; j < n_; ++j) dX[j] = column(j);
    for (std::size_t j = n_; j < nx_; ++j) dX[j] = T(0.0);
    for (std::size_t k = 0; k < np_; ++k) dX[nx_ + k] = column(n_ + k);
  }

  const System& fwd_;
  std::span<const double> p_;
  ForwardTrajectory* traj_ = nullptr;
  std::size_t nx_, n_, np_;
  mutable Linearization lin_;
  mutable std::vector<double> x_, jac_;
  mutable double lin_t_ = std::numeric_limits<double>::quiet_NaN();
  mutable double jac_t_ = std::numeric_limits<double>::quiet_NaN();
  mutable std::int64_t linearizations_ = 0;
  double t_b_ = 0.0;
};

void add_counts(Summary& to, const Summary& s) {
  to.steps += s.steps;
  to.rejected_steps += s.rejected_steps;
  to.rhs_evaluations += s.rhs_evaluations;
  to.jacobian_evaluations += s.jacobian_evaluations;
  to.factorizations += s.factorizations;
  to.newton_iterations += s.newton_iterations;
}

template <class Stepper>
void implicit_counts(Summary& s, Stepper& st) {
  s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
  s.jacobian_evaluations = st.model_jacobian().jacobian_evaluations;
  s.factorizations = st.newton().factorizations;
  s.newton_iterations = st.newton().iterations;
}

/// Integrates `system` from t_a to t_b in place on x with options.method
/// (adaptive dopri5, sdirk3, bdf), landing on `stops`; `accepted(t, x, k)`
/// after each accepted step (k: bdf's order, else 0).
template <class Accepted>
Summary run_adaptive(const System& system, std::span<const double> p, std::span<double> x,
                     double ta, double tb, const IntegratorOptions& options,
                     std::span<const double> stops, Accepted&& accepted) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t nx = system.n_states();
  const SystemRhs rhs{system};
  Summary s;
  s.method = options.method;
  s.final_time = ta;
  auto ignore = [](std::size_t, double, std::span<const double>) {};
  if (options.method == Method::Sdirk3) {
    Sdirk3Stepper<SystemRhs> st(rhs, p, nx, options.newton_tol, options.newton_max_iterations,
                                options.rtol, atol_vector(options, nx));
    run_sdirk3(st, ta, tb, x, options, stops, ignore, s,
               [&](double t) { accepted(t, std::span<const double>(x), 0); });
    implicit_counts(s, st);
  } else if (options.method == Method::Bdf) {
    BdfStepper<SystemRhs> st(rhs, p, nx, options.newton_tol, options.newton_max_iterations);
    st.set_replay(replay_kappa(options));  // the run's steps (integrate.cpp)
    run_bdf(st, ta, tb, x, options, stops, ignore, s,
            [&](double t, int k) { accepted(t, st.solution(), k); });
    implicit_counts(s, st);
  } else {
    COSTATE_CHECK(options.method == Method::Dopri5,
                  "continuous_adjoint: internal error, integrator " << to_string(options.method));
    HostVector y = HostVector::from(std::span<const double>(x));
    auto f = [&](double t, const HostVector& yy, const HostVector& dydt) {
      system.rhs(t, std::span<const double>(yy.data(), nx), p, std::span<double>(dydt.data(), nx));
    };
    IntegratorOptions opt = options;
    // integrate_vector swaps the new state into `y` before on_step.
    opt.on_step = [&](double t) {
      accepted(t, std::span<const double>(y.data(), nx), 0);
      if (options.on_step) options.on_step(t);
    };
    s = integrate_vector(f, ta, tb, y, opt, stops, [](std::size_t, double, const HostVector&) {});
    std::copy(y.data(), y.data() + nx, x.begin());
  }
  if (s.success() && s.message.empty()) s.message = "reached t1";
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace

GradientResult continuous_adjoint_gradient(const System& system, std::span<const double> y0,
                                           std::span<const double> p, double t0, double t1,
                                           const ContinuousAdjoint& method,
                                           IntegratorOptions options) {
  const auto start = std::chrono::steady_clock::now();
  method.validate();
  require(supports(SensitivityKind::ContinuousAdjoint, options, 1), "ode::gradient");
  if (system.has_events())
    require(supports_events(SensitivityKind::ContinuousAdjoint, options.method, 1),
            "ode::gradient");
  require(supports_dae(SensitivityKind::ContinuousAdjoint, options.method, 1, system.n_algebraic()),
          "ode::gradient");
  const std::size_t n = system.n_model_states(), na = system.n_states();
  const std::size_t np = system.n_parameters();
  COSTATE_CHECK_EQ(y0.size(), n, "gradient (continuous_adjoint): y0 and the System disagree");
  COSTATE_CHECK_EQ(p.size(), np, "gradient (continuous_adjoint): p and the System disagree");
  const bool running = system.has_running();
  // A DAE: semi-explicit index 1 without events (the adjoint DAE of the
  // header); a fully implicit ResidualForm's adjoint is not of index 1.
  const bool dae = system.n_algebraic() > 0;
  COSTATE_CHECK(!dae || !system.residual_form(),
                "gradient: sensitivity.method = continuous_adjoint does not differentiate a fully "
                "implicit DAE (ode::ResidualForm: its adjoint in (y, y') is not of index 1): use "
                "discrete_adjoint or forward");
  COSTATE_CHECK(!dae || !system.has_events(),
                "gradient: sensitivity.method = continuous_adjoint does not differentiate a DAE "
                "with events yet: use discrete_adjoint or forward");

  // 1. Stops: observation times, then t1; the forward run lands on them.
  const std::vector<double> obs = system.observation_times();
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);

  // 2. Forward: `costate run`'s integration (issue 35: the same steps, the
  //    same bits) — the adaptive stepper on the model's states alone,
  //    landing on the stops (and IntegratorOptions::landing_times, as the
  //    run), keeping every accepted state; with events, the event driver's
  //    run, kept in stretches between the instants where events fired (a
  //    stretch ends on the state x⁻ before its instant's events, the next
  //    starts on x⁺ after them). A running cost's z (which feeds nothing
  //    back) is not integrated here: in the step control it would change the
  //    steps. It is the quadrature of q along the stretches' interpolants
  //    (2b); the records' rows hold x = (y, z).
  std::vector<double> x(na, 0.0);
  std::copy(y0.begin(), y0.end(), x.begin());
  // A DAE: z0 = z(x0, p) (ode/dae.hpp; its derivative is carried by λ_x(t0)).
  make_consistent(system, p, t0, x, "gradient (continuous_adjoint)");
  const System model = running ? system.without_running_cost() : system;
  options.stop_at_outputs = true;
  IntegratorOptions model_options = options;  // the model's own tolerances
  if (running) {
    if (options.atol_per_state.empty()) options.atol_per_state.assign(n, options.atol);
    options.atol_per_state.push_back(kQuadratureAtol);  // z: a quadrature
  }
  options.validate(na);
  model_options.validate(n);
  // Rows of n (the model's states) widened to n_x = n + 1 with z = 0 (set in 2b).
  auto widen = [&](std::span<const double> xt, std::vector<double>& to) {
    to.insert(to.end(), xt.begin(), xt.begin() + static_cast<std::ptrdiff_t>(n));
    if (running) to.push_back(0.0);
  };
  std::vector<double> times{t0}, states;  // states row i: x at times[i] (x⁺ at an instant)
  widen(x, states);
  std::vector<int> orders;
  std::vector<EventInstant> instants;
  std::vector<std::vector<double>> before;  // x⁻ at each instant
  GradientResult result;
  const std::span<const double> xm = std::span<const double>(x).first(n);
  if (system.has_events()) {
    states.clear();
    EventRun run = run_with_events(model, xm, p, t0, t1, model_options, stops,
                                   [&](double, std::span<const double> xt) { widen(xt, states); });
    result.summary = run.summary;
    times = std::move(run.plan_times);
    orders = std::move(run.orders);
    instants = std::move(run.instants);
    for (const std::vector<double>& b : run.before_instants) widen(b, before.emplace_back());
  } else {
    std::vector<double> xs(xm.begin(), xm.end());
    result.summary = run_adaptive(model, p, xs, t0, t1, model_options, stops,
                                  [&](double t, std::span<const double> xt, int k) {
                                    times.push_back(t);
                                    widen(xt, states);
                                    if (options.method == Method::Bdf) orders.push_back(k);
                                  });
  }
  COSTATE_CHECK(result.summary.success(),
                "gradient (continuous_adjoint): the forward integration failed: "
                    << result.summary.message);
  const std::size_t l = times.size() - 1;
  COSTATE_CHECK(l > 0, "gradient (continuous_adjoint): the forward run took no step");
  COSTATE_CHECK(states.size() == times.size() * na && before.size() == instants.size() &&
                    (orders.empty() || orders.size() == l),
                "gradient (continuous_adjoint): internal error, the forward run's record is "
                "inconsistent");

  // The stretches [a_j, a_{j+1}] of time indices, a_j the instants' (an
  // instant at t1 leaves a last stretch of one point, its x⁺); stretch_of[i]
  // the stretch whose rows hold x at times[i] (x⁺ at an instant).
  std::deque<ForwardTrajectory> stretches;
  std::vector<std::size_t> first_index;  // the time index of each stretch's first row
  if (instants.empty()) {
    // One stretch: the record itself (its states moved, not copied).
    ForwardTrajectory& tr = stretches.emplace_back(system, p, options.method);
    tr.times = times;
    tr.states = std::move(states);
    tr.orders = orders;
    first_index.push_back(0);
  } else {
    std::vector<std::size_t> bounds{0};
    for (const EventInstant& inst : instants)
      if (inst.at > 0) bounds.push_back(inst.at);
    bounds.push_back(l);
    for (std::size_t j = 0, e = 0; j + 1 < bounds.size(); ++j) {
      ForwardTrajectory& tr = stretches.emplace_back(system, p, options.method);
      first_index.push_back(bounds[j]);
      while (e < instants.size() && instants[e].at <= bounds[j]) ++e;
      const bool ends_on_instant = e < instants.size() && instants[e].at == bounds[j + 1];
      for (std::size_t i = bounds[j]; i <= bounds[j + 1]; ++i)
        tr.add(times[i], i == bounds[j + 1] && ends_on_instant
                             ? std::span<const double>(before[e])
                             : std::span<const double>(states).subspan(i * na, na));
      if (!orders.empty())
        tr.orders.assign(orders.begin() + static_cast<std::ptrdiff_t>(bounds[j]),
                         orders.begin() + static_cast<std::ptrdiff_t>(bounds[j + 1]));
    }
    if (instants.back().at == l) {
      ForwardTrajectory& tr = stretches.emplace_back(system, p, options.method);
      first_index.push_back(l);
      tr.add(times[l], std::span<const double>(states).subspan(l * na, na));
    }
    states.clear();
    states.shrink_to_fit();
  }
  // x at times[i] (x⁺ at an instant): the first row of the stretch starting
  // there, else the row of the stretch containing it.
  const auto state_at = [&](std::size_t i) {
    std::size_t j = static_cast<std::size_t>(
        std::upper_bound(first_index.begin(), first_index.end(), i) - first_index.begin() - 1);
    return stretches[j].state(i - first_index[j]);
  };

  // 2b. A running cost: z(t) = ∫ q along the stretches (z does not jump at
  //     an instant), each step by 3-point Gauss–Legendre on the stepper's
  //     interpolant (order 6: the interpolant's error dominates, as for y).
  std::int64_t quadrature_rhs = 0;
  if (running) {
    constexpr double kGaussOffset = 0.3872983346207417;  // √(3/5) / 2
    constexpr std::array<double, 3> kNodes{0.5 - kGaussOffset, 0.5, 0.5 + kGaussOffset};
    constexpr std::array<double, 3> kWeights{5.0 / 18.0, 8.0 / 18.0, 5.0 / 18.0};
    std::vector<double> xq(na), fq(na);
    double z = 0.0;
    for (ForwardTrajectory& tr : stretches) {
      tr.states[n] = z;
      for (std::size_t i = 0; i + 1 < tr.times.size(); ++i) {
        const double h = tr.times[i + 1] - tr.times[i];
        double sum = 0.0;
        for (std::size_t g = 0; g < kNodes.size(); ++g) {
          const double t = tr.times[i] + kNodes[g] * h;
          tr.at(t, xq);
          system.rhs(t, xq, p, fq);
          sum += kWeights[g] * fq[n];
        }
        quadrature_rhs += static_cast<std::int64_t>(kNodes.size());
        z += h * sum;
        tr.states[(i + 1) * na + n] = z;
      }
    }
    for (std::size_t e = 0; e < instants.size(); ++e) before[e][n] = state_at(instants[e].at)[n];
  }

  // 3. Terms at the stops (observations see x⁺ at an instant): J, the λ
  //    jumps and ∂/∂p.
  double J = 0.0;
  std::vector<double> mu_terms(np, 0.0), jumps(stops.size() * na, 0.0);
  for (std::size_t k = 0, i = 0; k < stops.size(); ++k) {
    while (i < times.size() && times[i] < stops[k]) ++i;
    COSTATE_CHECK(i < times.size() && times[i] == stops[k],
                  "gradient: internal error, no step lands on stop time " << stops[k]);
    const std::span<const double> xs = state_at(i);
    std::span<double> dl(&jumps[k * na], n);
    if (k < obs.size()) J += system.observation_gradient(k, xs, p, dl, mu_terms);
    if (k + 1 == stops.size()) {
      J += system.terminal_gradient(xs, p, dl, mu_terms);
      if (running) {
        J += xs[n];
        jumps[k * na + n] = 1.0;
      }
    }
    // A DAE: the jump of a term ℓ(x, z, p) on z = z(x, p) (ode/dae.hpp):
    // g_zᵀ ν = ℓ_z, λ_x += ℓ_x − g_xᵀ ν, p̄ −= g_pᵀ ν; λ_z follows at the
    // backward leg's start (consistent initial values of the adjoint DAE).
    if (dae)
      ConstraintProjection(system, p).adjoint(stops[k], xs, std::span<const double>(&jumps[k * na], na),
                                              std::span<double>(&jumps[k * na], na), mu_terms);
  }

  // 4. Backward in τ = t_b − t on the adjoint System, one leg per pair of
  //    neighbouring stops or instants, with the forward's stepper; at a stop
  //    the λ jump, at an instant the transposed jump of its events (the
  //    sensitivities' jump, events.hpp — the continuous adjoint's jump
  //    condition) at its x⁻.
  auto adjoint_model = std::make_shared<AdjointModel>(system, p);
  const std::size_t nb = na + np;
  const System adjoint(adjoint_model, nb, 0, false, false, false,
                       SystemOptions{.jacobian = JacobianStrategy::Dense});
  IntegratorOptions back;
  back.method = options.method;
  back.rtol = method.rtol > 0.0 ? method.rtol : options.rtol;
  double atol = method.atol;
  if (atol <= 0.0) {
    // The smallest forward atol, but at least rtol × the largest λ seed
    // (|∂g/∂y|, |∂ℓ_k/∂y|): λ's own scale, as atol is y's. A forward atol
    // far below λ's scale (Robertson's y2: 1e-14 against λ ~ 1e4) would
    // make the backward run resolve λ's stiff transients to that absolute
    // level (steps below the time's round-off).
    atol = options.atol;
    for (std::size_t i = 0; i < n && i < options.atol_per_state.size(); ++i)
      atol = i == 0 ? options.atol_per_state[0] : std::min(atol, options.atol_per_state[i]);
    double seed = 0.0;
    for (std::size_t k = 0; k < stops.size(); ++k)
      for (std::size_t i = 0; i < n; ++i) seed = std::max(seed, std::abs(jumps[k * na + i]));
    atol = std::max(atol, back.rtol * seed);
  }
  back.atol_per_state.assign(nb, atol);
  // μ stays in the error test (as CVODES' errconQB): the backward steps then
  // also resolve f_pᵀλ where the forward state has transients that λ does
  // not (Robertson to 4e7, bdf, rtol 1e-8: dJ/dk 2.4e-3 → 2.9e-5 off).
  if (running) back.atol_per_state[n] = kQuadratureAtol;  // λ_z ≡ 1
  back.max_steps = options.max_steps;
  back.newton_tol = options.newton_tol;
  back.newton_max_iterations = options.newton_max_iterations;
  if (options.on_step)
    back.on_step = [&](double tau) { options.on_step(adjoint_model->time_of(tau)); };
  std::vector<double> X(nb, 0.0), x_before;
  const std::span<double> lambda = std::span<double>(X).first(na), mu = std::span<double>(X).subspan(na, np);
  std::unique_ptr<InstantJump> jump;
  if (!instants.empty()) {
    // The instants in order first (values only): a delayed execution's
    // values from the trigger time are kept by the instant that scheduled
    // it, and the backward pass below reaches the execution first.
    jump = std::make_unique<InstantJump>(system);
    for (std::size_t i = 0; i < instants.size(); ++i) {
      x_before = before[i];
      jump->apply(instants[i], times[instants[i].at], x_before, p, false, i);
    }
  }
  Summary back_summary;
  std::size_t k = stops.size(), e = instants.size(), j = stretches.size() - 1;
  for (double t_hi = stops.back();;) {
    for (; k > 0 && stops[k - 1] == t_hi; --k)
      for (std::size_t i = 0; i < na; ++i) X[i] += jumps[(k - 1) * na + i];
    for (; e > 0 && times[instants[e - 1].at] == t_hi; --e) {
      x_before = before[e - 1];
      // By index: a delayed execution leaves its τ̄_e and v̄ for the
      // instant that scheduled it (InstantJump::adjoint), reached later.
      jump->apply(instants[e - 1], t_hi, x_before, p, true, e - 1);
      jump->adjoint(lambda, mu);
    }
    if (!(t_hi > t0)) break;
    double t_lo = t0;
    if (k > 0) t_lo = std::max(t_lo, stops[k - 1]);
    if (e > 0) t_lo = std::max(t_lo, times[instants[e - 1].at]);
    while (j > 0 && stretches[j].times.front() > t_lo) --j;
    adjoint_model->set_leg(t_hi, stretches[j]);
    if (dae) make_consistent(adjoint, {}, 0.0, X, "gradient (continuous_adjoint, backward)");
    const Summary bs = run_adaptive(adjoint, {}, X, 0.0, t_hi - t_lo, back, {},
                                    [](double, std::span<const double>, int) {});
    COSTATE_CHECK(bs.success(), "gradient (continuous_adjoint): the backward integration "
                                "failed on [" << t_lo << ", " << t_hi << "]: "
                                              << bs.message);
    add_counts(back_summary, bs);
    t_hi = t_lo;
  }

  result.objective = J;
  result.wrt_initial_state.assign(X.begin(), X.begin() + static_cast<std::ptrdiff_t>(n));
  for (std::size_t i = 0; i < n && dae; ++i)  // z0 is a guess: not data
    if (system.algebraic()[i]) result.wrt_initial_state[i] = 0.0;
  result.wrt_parameters.resize(np);
  for (std::size_t j = 0; j < np; ++j) result.wrt_parameters[j] = X[na + j] + mu_terms[j];
  std::ostringstream os;
  os.precision(3);
  os << "continuous_adjoint(" << to_string(options.method) << ", rtol " << back.rtol << ", atol "
     << atol << ")";
  result.method = os.str();
  result.checkpoints.steps = static_cast<std::int64_t>(l);
  std::int64_t recomputed = 0, interpolant_rhs = 0;
  for (const ForwardTrajectory& tr : stretches) {
    recomputed += tr.recomputed;
    interpolant_rhs += tr.rhs_evaluations;
  }
  if (jump) interpolant_rhs += jump->rhs_evaluations();
  interpolant_rhs += quadrature_rhs;
  result.checkpoints.forward_steps = static_cast<std::int64_t>(l) + recomputed;
  result.checkpoints.recomputed_steps = recomputed;
  result.checkpoints.peak_snapshots = static_cast<std::int64_t>(l) + 1;
  result.summary.message += "; backward pass " + std::to_string(back_summary.steps) +
                            " steps (" + std::to_string(back_summary.rejected_steps) +
                            " rejected)";
  result.rhs_evaluations =
      result.summary.rhs_evaluations + interpolant_rhs + back_summary.rhs_evaluations;
  result.backward_steps = back_summary.steps;
  result.vjp_evaluations = adjoint_model->linearizations();
  result.steps = StepPlan(std::move(times), std::move(orders), std::move(instants));
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace detail
}  // namespace costate::ode
