// ode::gradient's native methods (DiscreteAdjoint, Forward) on the compiled
// ode::System: the body of gradient.hpp's template, compiled once
// (issue 14: make_system is the only per-model template).
#include "costate/ode/gradient.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/integrate.hpp"
#include "costate/ode/scheme.hpp"

namespace costate::ode {

std::string to_string(const SensitivityMethod& m) {
  if (std::holds_alternative<Forward>(m)) return "forward";
  if (std::holds_alternative<ContinuousAdjoint>(m)) return "continuous_adjoint";
  if (std::holds_alternative<CvodesForward>(m)) return "cvodes_forward";
  if (const auto* a = std::get_if<CvodesAdjoint>(&m))
    return "cvodes_adjoint(steps " + std::to_string(a->steps) + ", " +
           to_string(a->interpolation) + ")";
  return "discrete_adjoint(" + to_string(std::get<DiscreteAdjoint>(m).checkpointing) + ")";
}

std::string GradientResult::brief_report() const {
  std::ostringstream os;
  os.precision(16);
  os << method << ": J = " << objective << "; " << checkpoints.steps << " steps, "
     << checkpoints.forward_steps << " forward step evaluations (" << checkpoints.recomputed_steps
     << " recomputed), peak " << checkpoints.peak_snapshots << " snapshots, " << vjp_evaluations
     << " vector-Jacobian products";
  return os.str();
}

namespace detail {

GradientResult native_gradient(const System& system, std::span<const double> y0,
                               std::span<const double> p, double t0, double t1,
                               const SensitivityMethod& method, IntegratorOptions options,
                               std::span<const double> replay_times,
                               std::span<const int> replay_orders) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = system.n_model_states();
  const std::size_t np = system.n_parameters();
  const bool running = system.has_running();
  const std::size_t na = system.n_states();
  COSTATE_CHECK(n > 0, "gradient: the problem has no states");
  COSTATE_CHECK_EQ(y0.size(), n, "gradient: initial state and System disagree");
  COSTATE_CHECK_EQ(p.size(), np, "gradient: parameters and System disagree");

  // 1. Observation times (the steps land on them) and where they fall.
  std::vector<double> obs;
  if (system.has_observations()) obs = system.observation_times();
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);

  // 2. The step sequence t_0 < t_1 < … < t_l.
  std::vector<double> y0a(na, 0.0);
  std::copy(y0.begin(), y0.end(), y0a.begin());
  std::vector<double> times{t0};
  options.stop_at_outputs = true;
  if (running && !options.atol_per_state.empty()) options.atol_per_state.push_back(1e300);
  if (running && options.atol_per_state.empty() && !options.fixed_step()) {
    options.atol_per_state.assign(na, options.atol);
    options.atol_per_state.back() = 1e300;  // z is a quadrature: not error-controlled
  }
  auto user_on_step = options.on_step;
  options.on_step = [&](double t) {
    times.push_back(t);
    if (user_on_step) user_on_step(t);
  };
  GradientResult result;
  const auto* dam = std::get_if<DiscreteAdjoint>(&method);
  const AdjointResume* resume_from = dam ? dam->resume_from.get() : nullptr;
  if (resume_from) {
    COSTATE_CHECK(replay_times.empty(),
                  "gradient: DiscreteAdjoint::resume_from replays its own steps; replay_times must be empty");
    replay_times = resume_from->times;
    replay_orders = resume_from->orders;
  }
  std::vector<int> orders;
  // bdf's forward run, for a StoreAll adjoint (trimmed on every exit).
  BdfForwardRecord& record = BdfForwardRecord::of_this_thread();
  record.clear();
  struct Trim {
    BdfForwardRecord& r;
    ~Trim() { r.trim(); }
  } trim_record{record};
  const bool store_all = dam && std::holds_alternative<StoreAll>(dam->checkpointing);
  const bool keep_record = store_all && options.method == Method::Bdf;
  if (replay_times.empty() && options.fixed_step()) {
    // Fixed steps: the step sequence is known without integrating (the same
    // landing rule as run_fixed); the adjoint's first sweep is the forward run.
    options.validate(na);
    times = fixed_step_times(t0, t1, options.dt, stops);
    COSTATE_CHECK(static_cast<std::int64_t>(times.size()) - 1 <= options.max_steps,
                  "gradient: " << times.size() - 1 << " steps exceed integrator.max_steps = "
                               << options.max_steps);
    result.summary.method = options.method;
    result.summary.steps = static_cast<std::int64_t>(times.size()) - 1;
    result.summary.final_time = t1;
    result.summary.message = "fixed steps";
  } else if (replay_times.empty() &&
             (options.method == Method::Sdirk3 || options.method == Method::Bdf)) {
    // The first run chooses the steps and bdf's orders, landing on the
    // observation times; they are replayed by the sweeps. bdf makes its
    // steps replay-identical, so a StoreAll adjoint keeps its states.
    ImplicitStepPlan plan = plan_implicit_steps(system, p, y0a, t0, t1, options,
                                                std::span<const double>(stops),
                                                keep_record ? &record : nullptr);
    result.summary = plan.summary;
    COSTATE_CHECK(result.summary.success(),
                  "gradient: the forward integration failed: " << result.summary.message);
    times = std::move(plan.times);
    orders = std::move(plan.orders);
  } else if (replay_times.empty()) {
    // The adaptive explicit first run (dopri5) on the System's rhs.
    result.summary =
        integrate_system(system, y0a, p, t0, t1, stops, options).summary;
    COSTATE_CHECK(result.summary.success(),
                  "gradient: the forward integration failed: " << result.summary.message);
  } else {
    COSTATE_CHECK(replay_times.size() >= 2 && replay_times.front() == t0 && replay_times.back() == t1,
                  "gradient: replay_times must run from t0 to t1");
    times.assign(replay_times.begin(), replay_times.end());
    if (options.method == Method::Bdf) {
      COSTATE_CHECK(replay_orders.size() + 1 == replay_times.size(),
                    "gradient: replaying bdf steps needs replay_orders (one order per step, "
                    "GradientResult::step_orders): got "
                        << replay_orders.size() << " for " << replay_times.size() - 1 << " steps");
      orders.assign(replay_orders.begin(), replay_orders.end());
    }
    result.summary.method = options.method;
    result.summary.steps = static_cast<std::int64_t>(times.size()) - 1;
    result.summary.final_time = t1;
    result.summary.message = "replayed steps";
  }
  // Observation k sits at step index obs_step[k].
  std::vector<std::int64_t> obs_at(times.size(), -1);
  for (std::size_t k = 0, i = 0; k < obs.size(); ++k) {
    while (i < times.size() && times[i] < obs[k]) ++i;
    COSTATE_CHECK(i < times.size() && times[i] == obs[k],
                  "gradient: internal error, no step lands on observation time " << obs[k]);
    obs_at[i] = static_cast<std::int64_t>(k);
  }

  // 3. The compiled scheme of the stepper (scheme.hpp: explicit RK, θ,
  // sdirk3, bdf) — the adjoint sweep under the checkpoint schedule, or the
  // forward tangents.
  const std::unique_ptr<Scheme> scheme =
      make_scheme(system, options, p, times, orders, store_all, keep_record ? &record : nullptr);
  std::vector<double> x0(scheme->state_size(), 0.0);
  std::copy(y0a.begin(), y0a.end(), x0.begin());
  // The caller's on_step (e.g. an interrupt check) also sees the sweeps' steps.
  AdjointResume* interrupted_at = dam ? dam->interrupted_at.get() : nullptr;
  if (interrupted_at) {
    interrupted_at->step = -1;
    interrupted_at->times = times;
    interrupted_at->orders = orders;
  }
  SweepOutcome o = dam ? adjoint_sweep(system, *scheme, dam->checkpointing, obs_at, x0, p,
                                       user_on_step, times, resume_from, interrupted_at)
                       : tangent_sweep(system, *scheme, obs_at, x0, p, user_on_step, times);
  result.objective = o.objective;
  result.wrt_parameters = std::move(o.wrt_parameters);
  result.wrt_initial_state = std::move(o.wrt_initial_state);
  result.checkpoints = o.checkpoints;
  result.step_times = times;
  result.step_orders = orders;
  result.method = to_string(method);
  result.rhs_evaluations = o.rhs_evaluations;
  result.vjp_evaluations = o.linearizations;
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}


}  // namespace detail

}  // namespace costate::ode
