#pragma once
/// \file
/// ode::gradient — the objective of an ODE solution and its gradient with
/// respect to the parameters p and the initial state y0, by a method the
/// caller passes as a value:
///
///     auto g = ode::gradient(problem, objective,
///                            ode::DiscreteAdjoint{.checkpointing = ode::Binomial{.snapshots = 10}},
///                            {.method = ode::Method::RK4, .dt = 1e-2});
///     g.objective; g.wrt_parameters; g.wrt_initial_state; g.checkpoints;
///
/// DiscreteAdjoint: the exact gradient of the discrete solution. The state is
/// y augmented with z (z' = q, the running cost). The reverse sweep runs the
/// explicit Runge–Kutta adjoint of every step (explicit_rk.hpp), from
///     λ_l = ∂g/∂y(y_l),  λ_z = 1,  μ = ∂g/∂p,
/// adding ∂ℓ_k/∂y to λ (and ∂ℓ_k/∂p to μ) when it passes an observation
/// time; dJ/dy0 = λ_0, dJ/dp = μ. Explicit methods run on the compiled
/// ode::System (system.hpp) and ExplicitRkScheme (scheme.hpp): each reverse
/// step linearizes f once per stage — a dense Dual Jacobian for small
/// systems, the coloured sparse one for large sparse right-hand sides, a
/// short tape of one right-hand side otherwise (a private tape: a recording
/// of the caller is not disturbed) — the time loop is never taped. States
/// are kept or recomputed by the checkpoint schedule (checkpointing.hpp).
///
/// Step sizes are constants of the adjoint: fixed-step methods use dt
/// (landing on observation times); an adaptive run (dopri5, sdirk3, bdf) is
/// made first to choose the steps — and bdf's orders, hence its
/// coefficients — landing exactly on observation times, and its accepted
/// steps (GradientResult::steps, a StepPlan: step_plan.hpp, chosen by
/// plan_steps) are then replayed by the adjoint's sweeps. The gradient is
/// that of the replayed discrete solution:
/// it ignores how the error control would move the steps if p changed.
/// Steppers: explicit Runge–Kutta; the implicit θ-methods (backward Euler,
/// Crank–Nicolson; the adjoint of a step is its transposed linear solve);
/// sdirk3 (a transposed solve with (I − hγ J(Y_i))ᵀ per stage) and bdf,
/// whose checkpointed state is the history window (y_n … y_{n−4}): its
/// step's adjoint solves (I − hβ J)ᵀ μ = λ and hands α_j μ to the older
/// states. Every stepper is a compiled Scheme on the same ode::System
/// (scheme.hpp has each one's maths; src/ode/scheme*.cpp), run by the one
/// adjoint_sweep / tangent_sweep; the adaptive first run of sdirk3/bdf is
/// compiled too (plan_steps). Replayed implicit steps are converged to
/// newton_tol (and, for sdirk3/bdf, to 10⁻⁶ of the error tolerance), since
/// the adjoint assumes the implicit equations hold exactly. bdf's first run
/// already makes its steps that way (BdfStepper::set_replay: the accepted
/// states are the replayed ones, bit for bit), so a StoreAll adjoint keeps
/// them and their step Jacobians and replays nothing; the other schedules
/// replay from their snapshots and give the same bits.
/// Forward sensitivities for every stepper (kTangentBlock directions per
/// replay; the implicit methods' tangents solve one linear system per step or
/// stage for the block).
/// Multilevel keeps its `disk` longest-lived snapshots in an HDF5 file
/// (snapshot_store.hpp).

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/detail/gradient_support.hpp"
#include "costate/ode/continuous_adjoint.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/idas.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/objective.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {

/// The exact gradient of the discrete solution by a reverse sweep.
struct DiscreteAdjoint {
  Checkpointing checkpointing = StoreAll{};
  /// Explicit steppers: force the compressed coloured Jacobian
  /// (JacobianStrategy::Sparse) for each stage's f_yᵀw, f_pᵀw. Without it
  /// the System picks (the model's own reverse rule when it has one, see
  /// costate/ode/burgers.hpp; else a dense Dual Jacobian for n + n_p ≤ 16,
  /// else the coloured one when the pattern has ≤ 16 colours, else a short
  /// tape).
  /// Only for right-hand sides whose sparsity pattern does not depend on the
  /// state (no value-dependent branches changing which inputs an output
  /// reads): the pattern is re-checked every kPatternCheckInterval
  /// linearizations and a change throws. See system.hpp.
  bool coloured_jacobian = false;
  /// Continue the interrupted sweep recorded here (AdjointResume,
  /// scheme.hpp): its steps are replayed (no first run chooses them; the
  /// call's replay plan must be empty) and only the reverse steps below
  /// resume_from->step are run — the same bits as the uninterrupted gradient
  /// of the same problem, objective and settings.
  std::shared_ptr<const AdjointResume> resume_from{};
  /// When set and IntegratorOptions::on_step throws (an interrupt) once the
  /// reverse sweep has begun, the sweep's place is stored here (with the
  /// step plan) before the exception propagates; its step stays
  /// −1 when the throw came earlier (nothing to continue from).
  std::shared_ptr<AdjointResume> interrupted_at{};
};

/// Tangent sensitivities of the same discrete solution: explicit methods
/// replay the steps once per block of kTangentBlock = 8 directions
/// (parameters, then initial states), each stage's f linearized once and
/// applied to the block (scheme.hpp); cost grows with the number of
/// parameters + states.
struct Forward {};

using SensitivityMethod =
    std::variant<DiscreteAdjoint, Forward, ContinuousAdjoint, CvodesForward, CvodesAdjoint,
                 IdasForward, IdasAdjoint>;

std::string to_string(const SensitivityMethod& m);

struct GradientResult {
  double objective = 0.0;
  std::vector<double> wrt_parameters;
  std::vector<double> wrt_initial_state;
  std::string method;
  CheckpointStats checkpoints;
  Summary summary;  ///< the forward integration (steps, evaluations)
  /// Every right-hand-side evaluation of the call: the run that chose the
  /// steps (summary.rhs_evaluations; 0 for fixed or replayed steps) and the
  /// sweeps, forward and reverse (ReplayedScheme::rhs_evaluations); the
  /// continuous adjoint and CVODES: their forward and backward runs.
  std::int64_t rhs_evaluations = 0;
  std::int64_t vjp_evaluations = 0;
  /// Accepted steps of the backward integration: the continuous adjoint's
  /// and the CVODES and IDAS adjoints' (over all their legs). 0 for the
  /// discrete adjoints (their reverse sweep retraces the forward steps:
  /// checkpoints) and forward sensitivities.
  std::int64_t backward_steps = 0;
  double wall_seconds = 0.0;
  /// The steps t_0 … t_l (and bdf's orders) the gradient belongs to: pass
  /// them back as `replay` to evaluate the same discrete objective elsewhere
  /// (a Taylor test, hessian_vector, sensitivity_matrix). The continuous
  /// adjoint's forward run's accepted steps; empty for the CVODES methods.
  StepPlan steps;
  std::string brief_report() const;
};


namespace detail {
/// ode::gradient with DiscreteAdjoint or Forward on the compiled System
/// (src/ode/gradient.cpp): the step plan (plan_steps: fixed, the adaptive
/// first run, or `replay`), the stepper's Scheme and the one adjoint or
/// tangent sweep.
GradientResult native_gradient(const System& system, std::span<const double> y0,
                               std::span<const double> p, double t0, double t1,
                               const SensitivityMethod& method, const IntegratorOptions& options,
                               const StepPlan& replay);
}  // namespace detail

namespace detail {
/// ode::gradients on the compiled Systems (src/ode/gradient.cpp): the step
/// plan of the first (ReplayedScheme), then adjoint_block_sweep.
std::vector<GradientResult> native_gradients(std::span<const System* const> systems,
                                             std::span<const double> y0,
                                             std::span<const double> p, double t0, double t1,
                                             const DiscreteAdjoint& method,
                                             const IntegratorOptions& options,
                                             const StepPlan& replay);
}  // namespace detail

/// The gradients of several objectives of one problem by the discrete
/// adjoint in ONE reverse sweep (a block of adjoint seeds, e.g. the rows
/// w_kᵀ y(t1) of an output Jacobian): the steps are chosen once (by the
/// first objective's System, or `replay`), the forward steps, snapshots
/// and recomputation are shared, and each reverse step applies the
/// scheme's adjoint once per objective. Each result has the bits of
/// ode::gradient(problem, objectives[k], method, options) on the same
/// steps; the counts (checkpoints, rhs_evaluations, vjp_evaluations,
/// wall_seconds) are the block's, shared by all.
///
/// Limitations: DiscreteAdjoint only, without resume_from/interrupted_at;
/// no objective with a running cost (its quadrature z would be a state of
/// its own: give it its own gradient); every objective's observation times
/// must be among the chosen steps (the first objective's observation times,
/// or those of `replay`). Throws costate::Error naming the limitation.
template <Model M, class O>
std::vector<GradientResult> gradients(const Problem<M>& problem, std::span<const O> objectives,
                                      const DiscreteAdjoint& method = {},
                                      IntegratorOptions options = {}, const StepPlan& replay = {}) {
  require(supports(SensitivityKind::DiscreteAdjoint, options, 1), "ode::gradients");
  COSTATE_CHECK(problem.n_states() > 0, "gradients: the problem has no states");
  COSTATE_CHECK(!objectives.empty(), "gradients: no objectives (give at least one)");
  COSTATE_CHECK(!method.resume_from && !method.interrupted_at,
                "gradients: a block of objectives does not resume (DiscreteAdjoint::resume_from "
                "and interrupted_at are for ode::gradient)");
  SystemOptions system_options;
  if (method.coloured_jacobian) system_options.jacobian = JacobianStrategy::Sparse;
  std::vector<System> systems;
  systems.reserve(objectives.size());
  for (const O& objective : objectives)
    systems.push_back(
        make_system(problem.model, objective, problem.n_states(), problem.p.size(), system_options));
  std::vector<const System*> views;
  for (const System& s : systems) views.push_back(&s);
  return detail::native_gradients(views, problem.y0, problem.p, problem.t0(), problem.t1(), method,
                                  options, replay);
}

/// Objective value and gradient; see the file comment. Throws costate::Error
/// on invalid settings and when the forward integration fails (the message
/// says why: step-size underflow, non-finite state, …).
/// With a `replay` plan (GradientResult::steps of an earlier call) no
/// forward integration chooses the steps: these are replayed, so that the
/// objective is the same smooth function of p and y0 at every call
/// (DiscreteAdjoint and Forward; the other methods choose their own steps).
template <Model M, class O>
GradientResult gradient(const Problem<M>& problem, const O& objective,
                        const SensitivityMethod& method, IntegratorOptions options = {},
                        const StepPlan& replay = {}) {
  require(supports(kind_of(method), options, 1), "ode::gradient");  // support.hpp's table
  // Continuous adjoint and the CVODES backend (their own headers).
  if (const auto* ca = std::get_if<ContinuousAdjoint>(&method))
    return detail::continuous_adjoint_gradient(
        make_system(problem.model, objective, problem.n_states(), problem.p.size()), problem.y0,
        problem.p, problem.t0(), problem.t1(), *ca, options);
  if (std::holds_alternative<CvodesForward>(method))
    return detail::cvodes_gradient(problem, objective, nullptr, options);
  if (const auto* ca = std::get_if<CvodesAdjoint>(&method))
    return detail::cvodes_gradient(problem, objective, ca, options);
  if (std::holds_alternative<IdasForward>(method) || std::holds_alternative<IdasAdjoint>(method))
    return detail::idas_gradient(  // idas.hpp (DAEs)
        make_system(problem.model, objective, problem.n_states(), problem.p.size(),
                    {.dense_max = cvodes::kBindingDenseMax}),
        problem.y0, problem.p, problem.t0(), problem.t1(), std::get_if<IdasAdjoint>(&method),
        options);
  COSTATE_CHECK(problem.n_states() > 0, "gradient: the problem has no states");
  // The compiled view of the model and objective every scheme runs on.
  SystemOptions system_options;
  if (const auto* dam = std::get_if<DiscreteAdjoint>(&method); dam && dam->coloured_jacobian)
    system_options.jacobian = JacobianStrategy::Sparse;
  const System system =
      make_system(problem.model, objective, problem.n_states(), problem.p.size(), system_options);
  return detail::native_gradient(system, problem.y0, problem.p, problem.t0(), problem.t1(), method,
                                 options, replay);
}

}  // namespace costate::ode

#include "costate/ode/detail/cvodes_gradient.hpp"
