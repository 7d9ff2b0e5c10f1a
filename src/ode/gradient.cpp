// ode::gradient's native methods (DiscreteAdjoint, Forward) on the compiled
// ode::System: the body of gradient.hpp's template, compiled once
// (issue 14: make_system is the only per-model template).
#include "costate/ode/gradient.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "costate/ode/integrate.hpp"
#include "costate/ode/scheme.hpp"
#include "ode/events_internal.hpp"

namespace costate::ode {

std::string to_string(const SensitivityMethod& m) {
  // The kind's name (support.hpp's to_string), with the settings that matter.
  const std::string name = to_string(kind_of(m));
  if (const auto* a = std::get_if<CvodesAdjoint>(&m))
    return name + "(steps " + a->steps_label(0) + ", " +
           to_string(a->interpolation) + ")";
  if (const auto* d = std::get_if<DiscreteAdjoint>(&m))
    return name + "(" + to_string(d->checkpointing) + ")";
  return name;
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
                               const SensitivityMethod& method, const IntegratorOptions& options,
                               const StepPlan& replay) {
  const auto start = std::chrono::steady_clock::now();
  COSTATE_CHECK(system.n_model_states() > 0, "gradient: the problem has no states");
  require(supports_dae(kind_of(method), options.method, 1, system.n_algebraic()), "ode::gradient");
  const auto* dam = std::get_if<DiscreteAdjoint>(&method);
  const AdjointResume* resume_from = dam ? dam->resume_from.get() : nullptr;
  if (resume_from)
    COSTATE_CHECK(replay.empty(), "gradient: DiscreteAdjoint::resume_from replays its own steps; "
                                  "the replay step plan must be empty");
  const bool store_all = dam && std::holds_alternative<StoreAll>(dam->checkpointing);

  // 1. The step plan (plan_steps: fixed, the adaptive first run, or
  // replayed), landing on the observation times, and 2. the compiled scheme
  // of the stepper (scheme.hpp: explicit RK, θ, sdirk3, bdf) on it
  // (ReplayedScheme: the one set-up).
  ReplayedScheme run(system, y0, p, t0, t1, options, resume_from ? resume_from->steps : replay,
                     "gradient", store_all);
  GradientResult result;
  result.summary = run.summary();

  // 3. The adjoint sweep under the checkpoint schedule, or the forward
  // tangents. The caller's on_step (e.g. an interrupt check) also sees the
  // sweeps' steps.
  AdjointResume* interrupted_at = dam ? dam->interrupted_at.get() : nullptr;
  if (interrupted_at) {
    interrupted_at->step = -1;
    interrupted_at->steps = run.steps();
  }
  // Delayed events: the adjoints a resumed place left pending between an
  // execution and the instant that scheduled it go back into the scheme,
  // and an interrupted sweep's are kept with its place.
  if (resume_from) restore_pending_event_adjoints(run.scheme(), resume_from->pending_events);
  SweepOutcome o;
  try {
    o = dam ? adjoint_sweep(system, run.scheme(), run.steps(), dam->checkpointing, run.x0(), p,
                            options.on_step, resume_from, interrupted_at)
            : tangent_sweep(system, run.scheme(), run.steps(), run.x0(), p, options.on_step);
  } catch (...) {
    if (interrupted_at && interrupted_at->step >= 0)
      interrupted_at->pending_events = pending_event_adjoints(run.scheme());
    throw;
  }
  result.objective = o.objective;
  result.wrt_parameters = std::move(o.wrt_parameters);
  result.wrt_initial_state = std::move(o.wrt_initial_state);
  result.checkpoints = o.checkpoints;
  result.rhs_evaluations = run.rhs_evaluations();  // the plan's run and the sweeps
  result.steps = run.release_steps();
  result.method = to_string(method);
  result.vjp_evaluations = o.linearizations;
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<GradientResult> native_gradients(std::span<const System* const> systems,
                                             std::span<const double> y0,
                                             std::span<const double> p, double t0, double t1,
                                             const DiscreteAdjoint& method,
                                             const IntegratorOptions& options,
                                             const StepPlan& replay) {
  const auto start = std::chrono::steady_clock::now();
  COSTATE_CHECK(!systems.empty(), "gradients: no objectives (give at least one)");
  COSTATE_CHECK(systems[0]->n_model_states() > 0, "gradients: the problem has no states");
  require(supports_dae(SensitivityKind::DiscreteAdjoint, options.method, 1, systems[0]->n_algebraic()),
          "ode::gradients");
  // 1. The step plan (the first objective's, or replayed) and 2. the scheme
  // on it, as ode::gradient sets them up.
  ReplayedScheme run(*systems[0], y0, p, t0, t1, options, replay, "gradients",
                     std::holds_alternative<StoreAll>(method.checkpointing));
  // 3. One reverse sweep for the block of seeds.
  std::vector<SweepOutcome> o = adjoint_block_sweep(systems, run.scheme(), run.steps(),
                                                    method.checkpointing, run.x0(), p,
                                                    options.on_step);
  std::vector<GradientResult> out(o.size());
  const std::int64_t rhs = run.rhs_evaluations();
  const StepPlan steps = run.release_steps();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::size_t k = 0; k < o.size(); ++k) {
    GradientResult& r = out[k];
    r.summary = run.summary();
    r.objective = o[k].objective;
    r.wrt_parameters = std::move(o[k].wrt_parameters);
    r.wrt_initial_state = std::move(o[k].wrt_initial_state);
    r.checkpoints = o[k].checkpoints;
    r.rhs_evaluations = rhs;
    r.steps = steps;
    r.method = to_string(SensitivityMethod{method});
    r.vjp_evaluations = o[k].linearizations;
    r.wall_seconds = seconds;
  }
  return out;
}

}  // namespace detail

}  // namespace costate::ode
