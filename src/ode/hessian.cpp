// ode::hessian_vector for the native steppers on the compiled System:
// the step plan as ode::gradient chooses it (plan_steps), then the
// forward-over-adjoint sweep (scheme.hpp's second_order_sweep) — no per-model template.
#include <algorithm>
#include <chrono>

#include "costate/ode/hessian.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/support.hpp"
#include "ode/dae.hpp"

namespace costate::ode::detail {

HessianVectorResult native_hessian_vector(const System& system, std::span<const double> y0,
                                          std::span<const double> p, double t0, double t1,
                                          const HessianDirection& v,
                                          const Checkpointing& checkpointing,
                                          const std::string& method_name,
                                          const IntegratorOptions& options,
                                          const StepPlan& replay) {
  require(supports_dae(SensitivityKind::DiscreteAdjoint, options.method, 2, system.n_algebraic()),
          "ode::hessian_vector");
  if (system.has_events())
    require(supports_events(SensitivityKind::DiscreteAdjoint, options.method, 2),
            "ode::hessian_vector");
  const auto start = std::chrono::steady_clock::now();
  // 1. The step plan, as ode::gradient chooses it, and 2. the compiled
  // scheme on it (ReplayedScheme: the one set-up). StoreAll: as under
  // ode::gradient's StoreAll, sdirk3 keeps each forward step's stages and
  // start Jacobian for its reverse step, and bdf replays its forward run's
  // states (its forward tangents read the recorded Jacobians at y_{i+1}).
  ReplayedScheme run(system, y0, p, t0, t1, options, replay, "hessian_vector",
                     std::holds_alternative<StoreAll>(checkpointing));

  // 3. Forward over adjoint on the scheme: x_0 + ε v_y0, p + ε v_p.
  std::vector<double> x0dot(run.scheme().state_size(), 0.0);
  if (!v.initial_state.empty()) std::copy(v.initial_state.begin(), v.initial_state.end(), x0dot.begin());
  if (system.n_algebraic() > 0) {  // a DAE: ż0 = −g_z⁻¹ (g_x ẋ0 + g_p ṗ) (ode/dae.hpp)
    const std::vector<double> pd =
        v.parameters.empty() ? std::vector<double>(p.size(), 0.0) : v.parameters;
    ConstraintProjection(system, p)
        .tangent(t0, std::span<const double>(run.x0()).first(system.n_states()), 1,
                 std::span<double>(x0dot).first(system.n_states()), pd);
  }
  const SecondOrderOutcome o = second_order_sweep(system, run.scheme(), run.steps(), checkpointing,
                                                  run.x0(), x0dot, p, v.parameters, options.on_step);

  HessianVectorResult r;
  r.objective = o.objective;
  r.directional_derivative = o.objective_dot;
  r.gradient_wrt_parameters = o.wrt_parameters;
  r.gradient_wrt_initial_state = o.wrt_initial_state;
  r.hv_wrt_parameters = o.hv_wrt_parameters;
  r.hv_wrt_initial_state = o.hv_wrt_initial_state;
  r.method = "forward_over_" + method_name;
  r.checkpoints = o.checkpoints;
  r.rhs_evaluations = run.rhs_evaluations();  // the plan's run and the sweeps
  r.steps = run.release_steps();
  r.vjp_evaluations = o.linearizations;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace costate::ode::detail
