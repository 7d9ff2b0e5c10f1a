// ode::gradient with the CVODES backend (CvodesForward, CvodesAdjoint) and
// the CVODES forward sensitivities at observation times (the calibration's
// residual Jacobian), on a compiled ode::System: the objective's terms and
// their gradients at the stops of CVODES' forward pass, every derivative of
// the augmented right-hand side [f; q] from the System (cvodes::Binding).
// See cvodes.hpp for the maths.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "ode/events_internal.hpp"
#include "ode/sundials_terms.hpp"

namespace costate::ode::detail {

/// The adjoint across the instants (sundials_terms.hpp). The event run
/// keeps x⁻ at each instant; the stretches between instants are then taken
/// last first, each by `stretch` from x⁺ at its start (InstantJump::apply
/// on x⁻, which also linearizes the jump) to its end, where λ starts from
/// the later stretch's λ(start) carried through the transposed jump
/// (InstantJump::adjoint, the same jump as the discrete and continuous
/// adjoints'). The terms of a stop at an instant read x⁺ (as the run's
/// outputs do) and enter λ before the jump. Each stretch's forward pass
/// repeats the event run's integration of that stretch, landing exactly on
/// the instant (SUNDIALS' checkpoints are per run), so the event model's
/// forward work is about twice the run's.
void adjoint_across_instants(const System& system, const IntegratorOptions& options,
                             std::span<const double> p, double t0, double t1,
                             const std::vector<double>& y0a, const std::vector<double>& stops,
                             StopTerms& terms, std::vector<double>& mu_terms,
                             std::vector<double>& lambda, std::vector<double>& mu,
                             cvodes::Stats& fwd, cvodes::Stats& bwd, std::int64_t& events,
                             const StretchAdjoint& stretch) {
  const std::size_t n = system.n_model_states(), na = system.n_states();
  const std::size_t np = system.n_parameters(), K = stops.size();
  const bool running = system.has_running();
  const EventRun run =
      run_with_events(system, y0a, p, t0, t1, options, {}, [](double, std::span<const double>) {});
  fwd = stats_of(run.summary);
  events = run.summary.events;
  COSTATE_CHECK(fwd.success, "gradient (" << to_string(options.method)
                                          << " adjoint): the forward integration with events "
                                             "failed: " << fwd.message);
  // Instants (T ascending, several at one time possible) and stops are
  // each taken once, backward, by the pointers e_end and k_end.
  const std::vector<double>& T = run.instant_times;
  std::size_t e_end = T.size(), k_end = K;
  // The first instant of the group at t (e_end when none is there).
  auto group_at = [&](double t) {
    std::size_t e = e_end;
    while (e > 0 && T[e - 1] == t) --e;
    return e;
  };
  InstantJump jump(system);
  // The instants in order first (values only): a delayed execution's values
  // from the trigger time are kept by the instant that scheduled it, and
  // the stretches below are taken last first. Every apply below names its
  // instant's index (the delayed executions' links, InstantJump).
  for (std::size_t e = 0; e < T.size(); ++e) {
    std::vector<double> x = run.before_instants[e];
    jump.apply(run.instants[e], T[e], x, p, false, e);
  }
  // x⁺ at t: after the last instant of the group at t (ending at e_end).
  auto after_group = [&](double t) {
    std::vector<double> x = run.before_instants[e_end - 1];
    jump.apply(run.instants[e_end - 1], t, x, p, false, e_end - 1);
    return x;
  };
  lambda.assign(na, 0.0);  // λ at the end of the stretch being taken
  mu.assign(np, 0.0);
  std::vector<double> x_minus, lam, mu_leg;
  auto add_terms = [&](std::size_t k, const double* y, double* dl) {
    terms.at(k, y);
    for (std::size_t i = 0; i < n; ++i) dl[i] += terms.gy[i];
    if (running && k + 1 == K) dl[n] += 1.0;
    for (std::size_t j = 0; j < np; ++j) mu_terms[j] += terms.gp[j];
  };
  double hi = t1;
  std::size_t first = group_at(hi);
  std::vector<double> x_hi = first < e_end ? after_group(hi) : std::vector<double>{};
  for (;;) {
    if (first < e_end) {
      // The group at hi, backward: the stops there read x⁺ and enter λ
      // first, then each instant's transposed jump, last first.
      for (; k_end > 0 && stops[k_end - 1] == hi; --k_end) add_terms(k_end - 1, x_hi.data(), lambda.data());
      for (std::size_t e = e_end; e-- > first;) {
        x_minus = run.before_instants[e];
        jump.apply(run.instants[e], hi, x_minus, p, true, e);
        jump.adjoint(lambda, mu);
      }
      e_end = first;
    }
    if (!(hi > t0)) break;
    // The stretch [lo, hi] from x⁺ at lo (y0 when no instant is at lo).
    const double lo = e_end > 0 ? std::max(t0, T[e_end - 1]) : t0;
    first = group_at(lo);
    std::vector<double> x_lo = first < e_end ? after_group(lo) : y0a;
    // Its stops: the rest above lo, and at lo when no instant is there
    // (t0 only); the carried λ enters at hi.
    std::size_t k_first = k_end;
    while (k_first > 0 && (stops[k_first - 1] > lo || (stops[k_first - 1] == lo && first == e_end)))
      --k_first;
    std::vector<double> leg_stops(stops.begin() + static_cast<std::ptrdiff_t>(k_first),
                                  stops.begin() + static_cast<std::ptrdiff_t>(k_end));
    const bool own_end = leg_stops.empty() || leg_stops.back() < hi;
    if (own_end) leg_stops.push_back(hi);
    const std::vector<double> carried = lambda;
    cvodes::Stats f, bk;
    stretch(
        lo, x_lo, leg_stops,
        [&](std::size_t k, const double* yy, double* dl) {
          if (k_first + k < k_end) add_terms(k_first + k, yy, dl);
          if (k + 1 == leg_stops.size())
            for (std::size_t i = 0; i < na; ++i) dl[i] += carried[i];
        },
        lam, mu_leg, f, bk);
    fwd.add_counts(f);
    fwd.checkpoints += f.checkpoints;
    bwd.add_counts(bk);
    lambda = lam;
    for (std::size_t j = 0; j < np; ++j) mu[j] += mu_leg[j];
    k_end = k_first;
    hi = lo;
    x_hi = std::move(x_lo);
  }
}

namespace {
/// The counters of a CVODES gradient's passes into its result.
void fill_summary(GradientResult& result, const cvodes::Stats& fwd, const cvodes::Stats& bwd,
                  Method method, bool adjoint) {
  result.summary.method = method;
  result.summary.steps = fwd.steps;
  result.summary.rejected_steps = fwd.error_test_failures;
  result.summary.rhs_evaluations = fwd.rhs_evaluations;
  result.summary.final_time = fwd.final_time;
  result.summary.message = adjoint ? "reached t1; backward pass " + std::to_string(bwd.steps) +
                                         " steps, " + std::to_string(bwd.rhs_evaluations) +
                                         " rhs evaluations"
                                   : std::string("reached t1");
  result.checkpoints.steps = fwd.steps;
  result.checkpoints.forward_steps = fwd.steps;
  result.rhs_evaluations = fwd.rhs_evaluations + bwd.rhs_evaluations;
  result.backward_steps = adjoint ? bwd.steps : 0;
}

/// The adjoint's forward pass at forward_tolerance_factor × the tolerances
/// (into `options`), its backward problem at the integrator's: the
/// returned settings name those (rtol, atol) when they were 0 (cvodes.hpp).
CvodesAdjoint forward_pass_tolerances(const CvodesAdjoint& adjoint, IntegratorOptions& options) {
  adjoint.validate();
  CvodesAdjoint adj = adjoint;
  if (const double f = adj.forward_tolerance_factor; f != 1.0) {
    if (adj.rtol <= 0.0) adj.rtol = options.rtol;
    if (adj.atol <= 0.0)
      adj.atol = options.atol_per_state.empty()
                     ? options.atol
                     : *std::min_element(options.atol_per_state.begin(), options.atol_per_state.end());
    options.rtol *= f;
    options.atol *= f;
    for (double& a : options.atol_per_state) a *= f;
  }
  return adj;
}

/// An adjoint's gradient from its backward pass: dJ/dp = μ + the stops'
/// own ∂J/∂p terms, dJ/dy0 = λ(t0) (the model's states; not the running
/// cost's z), with the counts of the passes.
void fill_adjoint_result(GradientResult& result, const std::vector<double>& lambda,
                         const std::vector<double>& mu, const std::vector<double>& mu_terms,
                         std::size_t n, std::int64_t vjp_evaluations, const cvodes::Stats& fwd) {
  result.wrt_parameters.resize(mu_terms.size());
  for (std::size_t j = 0; j < mu_terms.size(); ++j) result.wrt_parameters[j] = mu[j] + mu_terms[j];
  result.wrt_initial_state.assign(lambda.begin(), lambda.begin() + static_cast<std::ptrdiff_t>(n));
  result.vjp_evaluations = vjp_evaluations;
  result.checkpoints.peak_snapshots = fwd.checkpoints;
}

/// "cvodes_adjoint(steps …, interpolation[, forward at f x tolerances])".
std::string adjoint_method_name(const CvodesAdjoint& adjoint, std::size_t na) {
  const double f = adjoint.forward_tolerance_factor;
  return "cvodes_adjoint(steps " + adjoint.steps_label(na) + ", " +
         to_string(adjoint.interpolation) +
         (f != 1.0 ? ", forward at " + costate::detail::format_value(f) + " x tolerances"
                   : std::string()) +
         ")";
}
}  // namespace

/// A CvodesAdjoint gradient without events in two halves (cvodes.hpp,
/// PendingGradient): the forward pass when made, the backward pass in
/// finish(). Everything the passes read lives here, at fixed addresses
/// (the System is the caller's).
struct PendingCvodesGradient {
  std::chrono::steady_clock::time_point start;
  std::vector<double> p, y0a, y_end;
  IntegratorOptions options;  ///< with the adjoint's forward tolerances
  std::string method;
  std::size_t n = 0, na = 0, np = 0, K = 0;
  bool running = false;
  std::unique_ptr<cvodes::Binding> binding;
  std::unique_ptr<StopTerms> terms;
  std::vector<double> mu_terms;
  std::unique_ptr<cvodes::AdjointPass> pass;
  bool finished = false;

  GradientResult finish(std::span<const double> lambda_end);
};

std::unique_ptr<PendingCvodesGradient> begin_cvodes_gradient(const System& system,
                                                             std::span<const double> y0,
                                                             std::span<const double> p, double t0,
                                                             double t1, const CvodesAdjoint& adjoint,
                                                             IntegratorOptions options) {
  auto g = std::make_unique<PendingCvodesGradient>();
  g->start = std::chrono::steady_clock::now();
  const std::size_t n = system.n_model_states(), na = system.n_states();
  const std::size_t np = system.n_parameters();
  COSTATE_CHECK(n > 0, "gradient: the problem has no states");
  COSTATE_CHECK_EQ(y0.size(), n, "gradient (CVODES): initial state");
  COSTATE_CHECK_EQ(p.size(), np, "gradient (CVODES): parameters");
  require(supports(SensitivityKind::CvodesAdjoint, options.method, 1), "ode::gradient");
  COSTATE_CHECK(!system.has_events(),
                "begin_gradient: the model has events; its adjoint takes ode::gradient (one call)");
  COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
  const std::vector<double> obs =
      system.has_observations() ? system.observation_times() : std::vector<double>{};
  validate_output_times(obs, t0, t1);
  const std::vector<double> stops = stops_of(obs, t1);
  const CvodesAdjoint adj = forward_pass_tolerances(adjoint, options);
  g->running = system.has_running();
  if (g->running) add_running_tolerance(options, n);
  options.validate(na);
  g->n = n;
  g->na = na;
  g->np = np;
  g->K = stops.size();
  g->p.assign(p.begin(), p.end());
  g->y0a.assign(na, 0.0);
  std::copy(y0.begin(), y0.end(), g->y0a.begin());
  g->method = adjoint_method_name(adjoint, na);
  g->binding = std::make_unique<cvodes::Binding>(system, g->p, options.method,
                                                 options.cvodes_linear_solver, t0, g->y0a);
  g->terms = std::make_unique<StopTerms>(system, g->p, obs.size(), g->K);
  g->mu_terms.assign(np, 0.0);
  g->options = options;
  PendingCvodesGradient& r = *g;
  g->pass = std::make_unique<cvodes::AdjointPass>(
      g->binding->system(), cvodes::settings_from(options, na), adj, t0, g->y0a, stops,
      [&r](std::size_t k, double, const double* yy, double* dl) {
        r.terms->at(k, yy);
        for (std::size_t i = 0; i < r.n; ++i) dl[i] = r.terms->gy[i];
        if (r.running && k + 1 == r.K) dl[r.n] = 1.0;
        for (std::size_t j = 0; j < r.np; ++j) r.mu_terms[j] += r.terms->gp[j];
      });
  const std::vector<double>& y1 = g->pass->final_state();
  g->y_end.assign(y1.begin(), y1.begin() + static_cast<std::ptrdiff_t>(n));
  return g;
}

GradientResult PendingCvodesGradient::finish(std::span<const double> lambda_end) {
  COSTATE_CHECK(!finished, "PendingGradient::finish runs once");
  COSTATE_CHECK(lambda_end.empty() || lambda_end.size() == n,
                "PendingGradient::finish: λ at the end has " << lambda_end.size() << " entries for "
                                                             << n << " states");
  finished = true;
  std::vector<double> extra;
  if (!lambda_end.empty()) {
    extra.assign(na, 0.0);  // the running cost's z takes none
    std::copy(lambda_end.begin(), lambda_end.end(), extra.begin());
  }
  std::vector<double> lambda, mu;
  cvodes::Stats bwd;
  pass->backward(extra, lambda, mu, bwd);
  const cvodes::Stats& fwd = pass->forward();
  GradientResult result;
  result.method = method;
  fill_adjoint_result(result, lambda, mu, mu_terms, n, binding->vjp_evaluations(), fwd);
  result.objective = terms->J;
  fill_summary(result, fwd, bwd, options.method, true);
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

GradientResult cvodes_gradient(const System& system, std::span<const double> y0,
                               std::span<const double> p, double t0, double t1,
                               const CvodesAdjoint* adjoint, IntegratorOptions options) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = system.n_model_states(), na = system.n_states();
  const std::size_t np = system.n_parameters();
  const bool running = system.has_running();
  COSTATE_CHECK(n > 0, "gradient: the problem has no states");
  COSTATE_CHECK_EQ(y0.size(), n, "gradient (CVODES): initial state");
  COSTATE_CHECK_EQ(p.size(), np, "gradient (CVODES): parameters");
  require(supports(adjoint ? SensitivityKind::CvodesAdjoint : SensitivityKind::CvodesForward,
                   options.method, 1),
          "ode::gradient");
  if (system.has_events())
    require(supports_events(adjoint ? SensitivityKind::CvodesAdjoint : SensitivityKind::CvodesForward,
                            options.method, 1),
            "ode::gradient");
  COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
  // The adjoint without events: the forward and backward halves of
  // begin_cvodes_gradient, one after the other.
  if (adjoint && !system.has_events())
    return begin_cvodes_gradient(system, y0, p, t0, t1, *adjoint, options)->finish({});

  // 1. Stops: the observation times, then t1.
  const std::vector<double> obs =
      system.has_observations() ? system.observation_times() : std::vector<double>{};
  validate_output_times(obs, t0, t1);
  const std::vector<double> stops = stops_of(obs, t1);
  const std::size_t K = stops.size();

  // The adjoint's forward pass at forward_tolerance_factor × the
  // tolerances, its backward problem at the integrator's (cvodes.hpp).
  const CvodesAdjoint adj = adjoint ? forward_pass_tolerances(*adjoint, options) : CvodesAdjoint{};

  // 2. The augmented state [y; z], z' = q.
  if (running) add_running_tolerance(options, n);
  options.validate(na);
  std::vector<double> y0a(na, 0.0);
  std::copy(y0.begin(), y0.end(), y0a.begin());
  cvodes::Binding binding(system, p, options.method, options.cvodes_linear_solver, t0, y0a);
  const cvodes::System& sys = binding.system();
  const cvodes::Settings settings = cvodes::settings_from(options, na);

  // Value and gradient of the terms at stop k (state y): into J, gy, gp.
  StopTerms terms(system, p, obs.size(), K);

  GradientResult result;
  result.method = adjoint ? adjoint_method_name(*adjoint, na) : std::string("cvodes_forward");
  std::vector<double> y = y0a;
  cvodes::Stats fwd, bwd;
  if (!adjoint) {
    // 3a. Forward sensitivities: directions (p_j; y0_i).
    const std::size_t ns = np + n;
    std::vector<double> S(na * ns, 0.0), dJ(ns, 0.0);
    for (std::size_t i = 0; i < n; ++i) S[(np + i) * na + i] = 1.0;
    if (system.has_events()) {
      // CVODES' root finding, S jumped at each instant (events.cpp).
      std::size_t k = 0;
      const EventRun run = cvodes_sensitivities_with_events(
          system, y0a, p, t0, t1, options, stops, ns, S,
          [&](double t, std::span<const double> xx, const double* SS) {
            if (k < K && t == stops[k]) terms.add_forward(k++, xx.data(), SS, ns, dJ);
          });
      fwd = stats_of(run.summary);
      result.summary.events = run.summary.events;
      COSTATE_CHECK(!fwd.success || k == K,
                    "gradient (cvodes_forward): internal error, " << K - k << " stops not landed on");
    } else {
      fwd = cvodes::forward_sensitivities(
          sys, settings, t0, y, ns, S, stops,
          [&](std::size_t k, double, const double* yy, const double* SS) {
            terms.add_forward(k, yy, SS, ns, dJ);
          });
    }
    COSTATE_CHECK(fwd.success, "gradient (cvodes_forward): the integration failed: " << fwd.message);
    result.wrt_parameters.assign(dJ.begin(), dJ.begin() + static_cast<std::ptrdiff_t>(np));
    result.wrt_initial_state.assign(dJ.begin() + static_cast<std::ptrdiff_t>(np), dJ.end());
  } else {
    // 3b. Adjoint with events (without: begin_cvodes_gradient, above): λ
    // jumps at the stops, f_yᵀλ and f_pᵀλ from the System.
    std::vector<double> mu_terms(np, 0.0), lambda, mu;
    adjoint_across_instants(
        system, options, p, t0, t1, y0a, stops, terms, mu_terms, lambda, mu, fwd, bwd,
        result.summary.events,
        [&](double lo, std::vector<double>& x_lo, const std::vector<double>& leg_stops,
            const auto& contribute, std::vector<double>& lam, std::vector<double>& mu_leg,
            cvodes::Stats& f, cvodes::Stats& bk) {
          cvodes::adjoint(
              sys, settings, adj, lo, x_lo, leg_stops,
              [&](std::size_t k, double, const double* yy, double* dl) { contribute(k, yy, dl); },
              lam, mu_leg, f, bk);
        });
    fill_adjoint_result(result, lambda, mu, mu_terms, n, binding.vjp_evaluations(), fwd);
  }
  result.objective = terms.J;
  fill_summary(result, fwd, bwd, options.method, adjoint != nullptr);
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

CvodesObserved cvodes_observed_sensitivities(const System& system, std::span<const double> y0,
                                             std::span<const double> p, double t0,
                                             std::span<const double> times,
                                             IntegratorOptions options,
                                             const CvodesSeed* seed) {
  const std::size_t n = system.n_model_states(), na = system.n_states();
  const std::size_t np = system.n_parameters(), ns = seed ? seed->ns : np + n;
  COSTATE_CHECK(!system.has_running(),
                "CVODES observed sensitivities: the System has a running cost (observations only)");
  COSTATE_CHECK_EQ(y0.size(), n, "CVODES observed sensitivities: initial state");
  COSTATE_CHECK(!times.empty(), "CVODES observed sensitivities: no observation times");
  require(supports(SensitivityKind::CvodesForward, options.method, 1),
          "the calibration's residual Jacobian");
  if (system.has_events())
    require(supports_events(SensitivityKind::CvodesForward, options.method, 1),
            "the calibration's residual Jacobian");
  validate_output_times(times, t0, times.back());
  COSTATE_CHECK(times.front() > t0, "CVODES observed sensitivities: observation time "
                                        << times.front() << " is not after time.start = " << t0
                                        << " (CVODES stops after t0)");
  options.validate(na);
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> y(y0.begin(), y0.end());
  cvodes::Binding binding(system, p, options.method, options.cvodes_linear_solver, t0, y);
  std::vector<double> S(na * ns, 0.0);
  if (seed) {
    COSTATE_CHECK(ns >= np, "CVODES observed sensitivities: " << ns << " seeded directions for "
                                                              << np << " parameters (need >= np)");
    COSTATE_CHECK_EQ(seed->S0.size(), n * ns, "CVODES observed sensitivities: seed S0 (n × ns)");
    for (std::size_t d = 0; d < ns; ++d)
      std::copy(&seed->S0[d * n], &seed->S0[d * n] + n, &S[d * na]);
  } else {
    for (std::size_t i = 0; i < n; ++i) S[(np + i) * na + i] = 1.0;
  }
  CvodesObserved out;
  out.ns = ns;
  out.states.assign(times.size() * n, 0.0);
  out.tangents.assign(times.size() * n * ns, 0.0);
  auto record = [&](std::size_t k, const double* yy, const double* SS) {
    for (std::size_t i = 0; i < n; ++i) {
      out.states[k * n + i] = yy[i];
      for (std::size_t d = 0; d < ns; ++d) out.tangents[(k * n + i) * ns + d] = SS[d * na + i];
    }
  };
  cvodes::Stats st;
  if (system.has_events()) {
    // CVODES' root finding, S jumped at each instant (events.cpp); the seed's
    // scales do not enter the error test here.
    std::size_t k = 0;
    const EventRun run = cvodes_sensitivities_with_events(
        system, y, p, t0, times.back(), options, times, ns, S,
        [&](double t, std::span<const double> xx, const double* SS) {
          if (k < times.size() && t == times[k]) record(k++, xx.data(), SS);
        });
    st = stats_of(run.summary);
    out.summary.events = run.summary.events;
    COSTATE_CHECK(!st.success || k == times.size(),
                  "the calibration's residual Jacobian: internal error, "
                      << times.size() - k << " observation times not landed on");
  } else {
    st = cvodes::forward_sensitivities(
        binding.system(), cvodes::settings_from(options, na), t0, y, ns, S, times,
        [&](std::size_t k, double, const double* yy, const double* SS) { record(k, yy, SS); },
        seed ? std::span<const double>(seed->scales) : std::span<const double>());
  }
  COSTATE_CHECK(st.success, "the calibration's residual Jacobian (CVODES forward sensitivities): "
                            "the integration failed: "
                                << st.message);
  out.summary.method = options.method;
  out.summary.steps = st.steps;
  out.summary.rejected_steps = st.error_test_failures;
  out.summary.rhs_evaluations = st.rhs_evaluations;
  out.summary.final_time = st.final_time;
  out.summary.message = "reached the last observation time";
  out.summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace costate::ode::detail

namespace costate::ode {

PendingGradient::PendingGradient(std::shared_ptr<const void> keep, System system,
                                 std::span<const double> y0, std::span<const double> p, double t0,
                                 double t1, const CvodesAdjoint& adjoint,
                                 const IntegratorOptions& options)
    : keep_(std::move(keep)),
      system_(std::make_unique<System>(std::move(system))),
      run_(detail::begin_cvodes_gradient(*system_, y0, p, t0, t1, adjoint, options)) {}

PendingGradient::~PendingGradient() = default;
PendingGradient::PendingGradient(PendingGradient&&) noexcept = default;
PendingGradient& PendingGradient::operator=(PendingGradient&&) noexcept = default;

const std::vector<double>& PendingGradient::end_state() const { return run_->y_end; }

std::int64_t PendingGradient::forward_steps() const { return run_->pass->forward().steps; }

GradientResult PendingGradient::finish(std::span<const double> lambda_end) {
  return run_->finish(lambda_end);
}

}  // namespace costate::ode
