// The step plan (step_plan.hpp) and its one chooser (plan_steps), one entry
// to the schemes (make_scheme), and forward tangents with observation
// outputs (observed_tangents) — compiled once.
#include <algorithm>
#include <cmath>
#include <string>

#include "costate/core/error.hpp"
#include "costate/ode/detail/gradient_support.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/steppers/bdf.hpp"
#include "ode/dae.hpp"
#include "ode/events_internal.hpp"

namespace costate::ode {

static_assert(StepPlan::kMaxOrder == kBdfMaxOrder, "StepPlan::kMaxOrder is bdf's highest order");

StepPlan::StepPlan(std::vector<double> times, std::vector<int> orders,
                   std::vector<EventInstant> events)
    : times_(std::move(times)), orders_(std::move(orders)), events_(std::move(events)) {
  using costate::detail::format_value;
  COSTATE_CHECK(times_.size() >= 2, "step plan: needs at least one step (two times t_0 < t_1), got "
                                        << times_.size() << " time" << (times_.size() == 1 ? "" : "s"));
  for (std::size_t i = 0; i < times_.size(); ++i) {
    COSTATE_CHECK(std::isfinite(times_[i]),
                  "step plan: times[" << i << "] = " << format_value(times_[i]) << " is not finite");
    if (i > 0)
      COSTATE_CHECK(times_[i] > times_[i - 1],
                    "step plan: the times must be strictly increasing: times["
                        << i - 1 << "] = " << format_value(times_[i - 1]) << ", times[" << i
                        << "] = " << format_value(times_[i]));
  }
  COSTATE_CHECK(orders_.empty() || orders_.size() == steps(),
                "step plan: bdf's orders need one per step: got " << orders_.size() << " orders for "
                                                                  << steps() << " steps");
  for (std::size_t i = 0; i < orders_.size(); ++i)
    COSTATE_CHECK(orders_[i] >= 1 && orders_[i] <= kMaxOrder,
                  "step plan: orders[" << i << "] = " << orders_[i] << " is out of range 1 … "
                                       << kMaxOrder);
  for (std::size_t e = 0; e < events_.size(); ++e) {
    COSTATE_CHECK(events_[e].at <= steps(), "step plan: events[" << e << "] is at time index "
                                                                 << events_[e].at << " of a plan of "
                                                                 << steps() << " steps");
    if (e > 0)
      COSTATE_CHECK(events_[e].at > events_[e - 1].at,
                    "step plan: the event instants must be strictly ascending: events["
                        << e << "] at index " << events_[e].at);
    COSTATE_CHECK(!events_[e].fired.empty() || !events_[e].scheduled.empty(),
                  "step plan: events[" << e << "] fires and schedules nothing");
    COSTATE_CHECK(events_[e].source.size() == events_[e].fired.size(),
                  "step plan: events[" << e << "] needs one source per fired event");
    COSTATE_CHECK(events_[e].origin.empty() || events_[e].origin.size() == events_[e].fired.size(),
                  "step plan: events[" << e << "] needs no origins or one per fired event");
    for (std::size_t c = 0; c < events_[e].origin.size(); ++c)
      COSTATE_CHECK(events_[e].origin[c] < static_cast<int>(e),
                    "step plan: events[" << e << "].origin[" << c << "] = " << events_[e].origin[c]
                                         << " is not an earlier instant");
    COSTATE_CHECK(events_[e].scheduled_source.size() == events_[e].scheduled.size(),
                  "step plan: events[" << e << "] needs one source per scheduled event");
    for (std::size_t c = 0; c < events_[e].source.size(); ++c)
      COSTATE_CHECK(events_[e].source[c] <= c,
                    "step plan: events[" << e << "].source[" << c << "] = " << events_[e].source[c]
                                         << " is a later state than the execution's");
  }
}

void StepPlan::check_replay(Method method, double t0, double t1, std::string_view who) const {
  using costate::detail::format_value;
  COSTATE_CHECK(!empty(), who << ": the step plan is empty");
  COSTATE_CHECK(times_.front() == t0 && times_.back() == t1,
                who << ": the step plan runs from " << format_value(times_.front()) << " to "
                    << format_value(times_.back()) << "; the problem from " << format_value(t0)
                    << " to " << format_value(t1));
  if (method == Method::Bdf)
    COSTATE_CHECK(!orders_.empty(),
                  who << ": replaying bdf steps needs their orders (one per step, as "
                         "GradientResult::steps has them): the plan of "
                      << steps() << " steps has none");
  else
    COSTATE_CHECK(orders_.empty(), who << ": the step plan has bdf's orders; integrator.method = "
                                       << to_string(method) << " takes none");
}

std::vector<std::size_t> StepPlan::landing_steps(std::span<const double> at,
                                                 std::string_view who) const {
  std::vector<std::size_t> out(at.size());
  for (std::size_t k = 0, i = 0; k < at.size(); ++k) {
    while (i < times_.size() && times_[i] < at[k]) ++i;
    COSTATE_CHECK(i < times_.size() && times_[i] == at[k],
                  who << ": no step of the step plan lands on observation time "
                      << costate::detail::format_value(at[k])
                      << " (a replayed plan must include every observation time)");
    out[k] = i;
  }
  return out;
}

namespace detail {
void plan_sdirk3(const System& system, std::span<const double> p, std::span<double> x,
                 double t0, double t1, const IntegratorOptions& options,
                 std::span<const double> stops, Summary& s);
void plan_bdf(const System& system, std::span<const double> p, std::span<double> x, double t0,
              double t1, const IntegratorOptions& options, std::span<const double> stops,
              Summary& s, std::vector<int>& orders, BdfForwardRecord* record);
}  // namespace detail

namespace {
std::unique_ptr<Scheme> make_stepper_scheme(const System& system, const IntegratorOptions& options,
                                            std::span<const double> p, const StepPlan& steps,
                                            bool keep_step_data, const BdfForwardRecord* record) {
  switch (options.method) {
    case Method::ExplicitEuler:
    case Method::RK4:
    case Method::Dopri5: return make_explicit_rk_scheme(system, options.method, p, steps);
    case Method::BackwardEuler:
    case Method::CrankNicolson:
      return make_theta_scheme(system, theta_of(options.method), p, steps, options);
    case Method::Sdirk3: return make_sdirk3_scheme(system, p, steps, options, keep_step_data);
    case Method::Bdf: return make_bdf_scheme(system, p, steps, options, keep_step_data, record);
    case Method::CvodesBdf:
    case Method::CvodesAdams:
    case Method::Idas: break;
  }
  throw Error("make_scheme: integrator.method = " + to_string(options.method) +
              " is not a replayable scheme (the CVODES backends differentiate themselves)");
}
}  // namespace

std::unique_ptr<Scheme> make_scheme(const System& system, const IntegratorOptions& options,
                                    std::span<const double> p, const StepPlan& steps,
                                    bool keep_step_data, const BdfForwardRecord* record) {
  // The stepper's scheme, crossing the plan's event instants (events.cpp).
  return detail::with_events(
      system, make_stepper_scheme(system, options, p, steps, keep_step_data, record), p, steps);
}

namespace {

/// sdirk3's or bdf's adaptive run that chooses the steps (and bdf's orders).
StepPlan implicit_run(const System& system, std::span<const double> p, std::span<const double> x0,
                      double t0, double t1, const IntegratorOptions& options,
                      std::span<const double> stops, BdfForwardRecord* record, Summary& s) {
  std::vector<double> times{t0};
  std::vector<int> orders;
  IntegratorOptions opt = options;
  opt.on_step = [&](double t) {
    times.push_back(t);
    if (options.on_step) options.on_step(t);
  };
  std::vector<double> x(x0.begin(), x0.end());
  s.method = options.method;
  s.final_time = t0;
  if (options.method == Method::Sdirk3)
    detail::plan_sdirk3(system, p, x, t0, t1, opt, stops, s);
  else
    detail::plan_bdf(system, p, x, t0, t1, opt, stops, s, orders, record);
  if (!s.success()) return {};
  return StepPlan(std::move(times), std::move(orders));
}

}  // namespace

ReplaySetup plan_steps(const System& system, std::span<const double> y0, std::span<const double> p,
                       double t0, double t1, IntegratorOptions options, const StepPlan& replay,
                       std::string_view who, BdfForwardRecord* record) {
  const std::size_t n = system.n_model_states(), nx = system.n_states();
  COSTATE_CHECK_EQ(y0.size(), n, who << ": initial state and System disagree");
  COSTATE_CHECK_EQ(p.size(), system.n_parameters(),
                   who << ": parameters and System disagree");
  // The stops: every observation time and landing time (the run's, so
  // that these steps are the run's: IntegratorOptions::landing_times), then t1.
  std::vector<double> stops;
  if (system.has_observations()) stops = system.observation_times();
  detail::validate_output_times(stops, t0, t1);
  for (double t : options.landing_times)
    if (t > t0 && t < t1) stops.push_back(t);
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);
  // The model's own tolerances (before z's is added below): the explicit
  // run controls its steps on the model's states alone, as `costate run`.
  const std::vector<double> model_atol = options.atol_per_state;
  // The options as the schemes replay them: the steps land on the stops; the
  // running cost's z is a quadrature, not error-controlled (the implicit
  // replays' Newton test reads these atol).
  options.stop_at_outputs = true;
  if (system.has_running() && !options.atol_per_state.empty())
    options.atol_per_state.push_back(1e300);
  if (system.has_running() && options.atol_per_state.empty() && !options.fixed_step()) {
    options.atol_per_state.assign(nx, options.atol);
    options.atol_per_state.back() = 1e300;
  }
  ReplaySetup out;
  out.x0.assign(nx, 0.0);
  std::copy(y0.begin(), y0.end(), out.x0.begin());
  // A DAE: x_0's algebraic states made consistent (the sweeps differentiate
  // this solve implicitly: ode/dae.hpp).
  detail::make_consistent(system, p, t0, out.x0, who);
  Summary& s = out.summary;
  s.method = options.method;
  if (replay.empty() && system.has_events()) {
    // A model with events: the event driver (events.cpp) integrates it in
    // segments between the instants, every method adaptive or fixed, and
    // records the steps and what fired.
    options.validate(nx);
    detail::EventRun run = detail::run_with_events(system, out.x0, p, t0, t1, options, stops,
                                                   [](double, std::span<const double>) {});
    s = run.summary;
    if (s.success())
      out.steps = StepPlan(std::move(run.plan_times), std::move(run.orders),
                           std::move(run.instants));
  } else if (!replay.empty()) {
    replay.check_replay(options.method, t0, t1, who);
    (void)replay.landing_steps(stops, who);  // every observation time (and t1) among its times
    out.steps = replay;
    s.steps = static_cast<std::int64_t>(replay.steps());
    s.final_time = t1;
    s.message = "replayed steps";
  } else if (options.fixed_step()) {
    // Fixed steps: known without integrating (run_fixed's landing rule); the
    // sweeps' first pass is the forward run.
    options.validate(nx);
    std::vector<double> times = detail::fixed_step_times(t0, t1, options.dt, stops);
    COSTATE_CHECK(static_cast<std::int64_t>(times.size()) - 1 <= options.max_steps,
                  who << ": " << times.size() - 1 << " steps exceed integrator.max_steps = "
                      << options.max_steps);
    out.steps = StepPlan(std::move(times));
    s.steps = static_cast<std::int64_t>(out.steps.steps());
    s.final_time = t1;
    s.message = "fixed steps";
  } else if (options.method == Method::Sdirk3 || options.method == Method::Bdf) {
    // The adaptive run chooses the steps and bdf's orders; bdf makes them
    // replay-identical, so `record` (a StoreAll adjoint's) keeps its states.
    // With a running cost, the run of the model alone (as `costate run`'s:
    // z in the Newton matrix and the error norms would change the steps);
    // bdf's scheme then adds z by quadrature along these states (its y
    // are this run's bits), so its record serves as well.
    options.validate(nx);
    if (nx == n) {
      out.steps = implicit_run(system, p, out.x0, t0, t1, options, stops, record, s);
    } else {
      IntegratorOptions opt = options;
      opt.atol_per_state = model_atol;
      out.steps = implicit_run(system.without_running_cost(), p,
                               std::span<const double>(out.x0).first(n), t0, t1, opt, stops,
                               record, s);
    }
  } else {
    // dopri5's adaptive run, its accepted steps recorded: the run of the
    // model's states alone, exactly as `costate run` integrates them. A
    // running cost's z is a quadrature along these steps (z' = q(t, y, p)
    // feeds nothing back); in the error norm it would change the steps.
    std::vector<double> times{t0};
    IntegratorOptions opt = options;
    opt.atol_per_state = model_atol;
    opt.on_step = [&](double t) {
      times.push_back(t);
      if (options.on_step) options.on_step(t);
    };
    const System model = system.without_running_cost();
    s = detail::integrate_system(nx == n ? system : model, std::span<const double>(out.x0).first(n),
                                 p, t0, t1, stops, opt)
            .summary;
    if (s.success()) out.steps = StepPlan(std::move(times));
  }
  COSTATE_CHECK(s.success(), who << ": the forward integration failed: " << s.message);
  out.options = std::move(options);
  return out;
}

struct ReplayedScheme::Kept {
  BdfForwardRecord::ThisThread guard;
};

ReplayedScheme::ReplayedScheme(const System& system, std::span<const double> y0,
                               std::span<const double> p, double t0, double t1,
                               const IntegratorOptions& options, const StepPlan& replay,
                               std::string_view who, bool store_all) {
  // bdf's forward run, for a StoreAll sweep (trimmed when this ends).
  const bool keep_record = store_all && options.method == Method::Bdf;
  if (keep_record) kept_ = std::make_unique<Kept>();
  BdfForwardRecord* record = keep_record ? &kept_->guard.record : nullptr;
  // 1. The step plan, landing on the observation times.
  setup_ = plan_steps(system, y0, p, t0, t1, options, replay, who, record);
  // 2. The stepper's compiled scheme on it.
  scheme_ = make_scheme(system, setup_.options, p, setup_.steps, store_all, record);
  x0_.assign(scheme_->state_size(), 0.0);
  std::copy(setup_.x0.begin(), setup_.x0.end(), x0_.begin());
}

ReplayedScheme::~ReplayedScheme() = default;

std::int64_t ReplayedScheme::rhs_evaluations() const {
  return setup_.summary.rhs_evaluations + (scheme_ ? scheme_->rhs_evaluations() : 0);
}

StepPlan ReplayedScheme::release_steps() {
  scheme_.reset();
  return std::move(setup_.steps);
}

ObservedTangents observed_tangents(const System& system, Scheme& scheme, const StepPlan& steps,
                                   std::span<const double> x0, std::span<const double> p) {
  const std::size_t nx = scheme.state_size();
  const std::size_t n = system.n_model_states(), np = p.size(), m = np + n;
  COSTATE_CHECK_EQ(steps.steps(), scheme.steps(),
                   "observed_tangents: the step plan is not the one the scheme replays");
  COSTATE_CHECK_EQ(x0.size(), nx, "observed_tangents: x0 has the wrong size");
  const std::vector<std::size_t> obs_step =
      system.has_observations()
          ? steps.landing_steps(system.observation_times(), "observed_tangents")
          : std::vector<std::size_t>{};
  const std::size_t K = obs_step.size();
  ObservedTangents out;
  out.states.assign(K * n, 0.0);
  out.tangents.assign(K * n * m, 0.0);
  std::vector<double> x(nx), xn(nx), S, Sn, P;
  detail::ConstraintProjection project(system, p);
  for (std::size_t first = 0; first < m; first += kTangentBlock) {
    const std::size_t b = std::min(kTangentBlock, m - first);
    S.assign(nx * b, 0.0);
    Sn.assign(nx * b, 0.0);
    P.assign(np * b, 0.0);
    for (std::size_t d = 0; d < b; ++d) {
      const std::size_t dir = first + d;
      if (dir < np)
        P[dir * b + d] = 1.0;
      else
        S[(dir - np) * b + d] = 1.0;
    }
    project.tangent(steps.times().front(), x0, b, S, P);  // a DAE's z0 = z(x0, p)
    std::copy(x0.begin(), x0.end(), x.begin());
    std::size_t k = 0;
    auto record = [&](std::size_t i) {
      for (; k < K && obs_step[k] == i; ++k)
        for (std::size_t q = 0; q < n; ++q) {
          out.states[k * n + q] = x[q];
          for (std::size_t d = 0; d < b; ++d) out.tangents[(k * n + q) * m + first + d] = S[q * b + d];
        }
    };
    record(0);
    // Steps past the last output are not needed.
    const std::size_t last = K > 0 ? obs_step[K - 1] : 0;
    for (std::size_t i = 0; i < last; ++i) {
      scheme.tangent(i, x, xn, b, S, Sn, P);
      x.swap(xn);
      S.swap(Sn);
      record(i + 1);
    }
  }
  return out;
}

}  // namespace costate::ode
