// ode::hessian_vector for the native steppers on the compiled System:
// the step sequence as ode::gradient chooses it, then the forward-over-
// adjoint sweep (scheme.hpp's second_order_sweep) — no per-model template.
#include <algorithm>
#include <chrono>

#include "costate/ode/hessian.hpp"
#include "costate/ode/scheme.hpp"

namespace costate::ode::detail {

HessianVectorResult native_hessian_vector(const System& system, std::span<const double> y0,
                                          std::span<const double> p, double t0, double t1,
                                          const HessianDirection& v,
                                          const Checkpointing& checkpointing,
                                          const std::string& method_name,
                                          IntegratorOptions options,
                                          std::span<const double> replay_times,
                                          std::span<const int> replay_orders) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t na = system.n_states();
  const bool running = system.has_running();

  // 1. Observation times and the stops (as ode::gradient).
  const std::vector<double> obs = system.observation_times();
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);

  // 2. The step sequence t_0 < … < t_l, with ode::gradient's options (the
  // steps land on the stops; the running cost's z is a quadrature, not
  // error-controlled — the implicit replays' Newton test reads these atol).
  options.stop_at_outputs = true;
  if (running && !options.atol_per_state.empty()) options.atol_per_state.push_back(1e300);
  if (running && options.atol_per_state.empty() && !options.fixed_step()) {
    options.atol_per_state.assign(na, options.atol);
    options.atol_per_state.back() = 1e300;
  }
  std::vector<double> y0a(na, 0.0);
  std::copy(y0.begin(), y0.end(), y0a.begin());
  Summary summary;
  std::vector<double> times;
  std::vector<int> orders;
  if (!replay_times.empty()) {
    COSTATE_CHECK(replay_times.size() >= 2 && replay_times.front() == t0 &&
                      replay_times.back() == t1,
                  "hessian_vector: replay_times must run from t0 to t1");
    times.assign(replay_times.begin(), replay_times.end());
    if (options.method == Method::Bdf) {
      COSTATE_CHECK(replay_orders.size() + 1 == replay_times.size(),
                    "hessian_vector: replaying bdf steps needs replay_orders (one order per "
                    "step, GradientResult::step_orders): got "
                        << replay_orders.size() << " for " << replay_times.size() - 1
                        << " steps");
      orders.assign(replay_orders.begin(), replay_orders.end());
    }
  } else if (options.fixed_step()) {
    options.validate(na);
    times = fixed_step_times(t0, t1, options.dt, stops);
    COSTATE_CHECK(static_cast<std::int64_t>(times.size()) - 1 <= options.max_steps,
                  "hessian_vector: " << times.size() - 1
                                     << " steps exceed integrator.max_steps = " << options.max_steps);
  } else if (options.method == Method::Sdirk3 || options.method == Method::Bdf) {
    ImplicitStepPlan plan = plan_implicit_steps(system, p, y0a, t0, t1, options,
                                                std::span<const double>(stops));
    summary = plan.summary;
    COSTATE_CHECK(summary.success(),
                  "hessian_vector: the forward integration failed: " << summary.message);
    times = std::move(plan.times);
    orders = std::move(plan.orders);
  } else {
    // dopri5's adaptive run chooses the steps (on the System's f: the same
    // arithmetic as ode::gradient's run on the model).
    times.push_back(t0);
    auto user_on_step = options.on_step;
    options.on_step = [&](double t) {
      times.push_back(t);
      if (user_on_step) user_on_step(t);
    };
    HostVector y = HostVector::from(std::span<const double>(y0a));
    auto rhs = [&](double t, const HostVector& yy, const HostVector& dydt) {
      system.rhs(t, std::span<const double>(yy.data(), na), p, std::span<double>(dydt.data(), na));
    };
    summary = integrate_vector(rhs, t0, t1, y, options, std::span<const double>(stops),
                               [](std::size_t, double, const HostVector&) {});
    COSTATE_CHECK(summary.success(),
                  "hessian_vector: the forward integration failed: " << summary.message);
    options.on_step = user_on_step;
  }
  std::vector<std::int64_t> obs_at(times.size(), -1);
  for (std::size_t k = 0, i = 0; k < obs.size(); ++k) {
    while (i < times.size() && times[i] < obs[k]) ++i;
    COSTATE_CHECK(i < times.size() && times[i] == obs[k],
                  "hessian_vector: no step lands on observation time "
                      << obs[k] << " (replay_times must include every observation time)");
    obs_at[i] = static_cast<std::int64_t>(k);
  }

  // 3. Forward over adjoint on the compiled scheme: x_0 + ε v_y0, p + ε v_p.
  const std::unique_ptr<Scheme> scheme = make_scheme(system, options, p, times, orders);
  std::vector<double> x0(scheme->state_size(), 0.0), x0dot(scheme->state_size(), 0.0);
  std::copy(y0a.begin(), y0a.end(), x0.begin());
  if (!v.initial_state.empty()) std::copy(v.initial_state.begin(), v.initial_state.end(), x0dot.begin());
  const SecondOrderOutcome o = second_order_sweep(system, *scheme, checkpointing, obs_at, x0, x0dot,
                                                  p, v.parameters, options.on_step, times);

  HessianVectorResult r;
  r.objective = o.objective;
  r.directional_derivative = o.objective_dot;
  r.gradient_wrt_parameters = o.wrt_parameters;
  r.gradient_wrt_initial_state = o.wrt_initial_state;
  r.hv_wrt_parameters = o.hv_wrt_parameters;
  r.hv_wrt_initial_state = o.hv_wrt_initial_state;
  r.method = "forward_over_" + method_name;
  r.checkpoints = o.checkpoints;
  r.step_times = std::move(times);
  r.step_orders = std::move(orders);
  r.rhs_evaluations = o.rhs_evaluations + summary.rhs_evaluations;
  r.vjp_evaluations = o.linearizations;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace costate::ode::detail
