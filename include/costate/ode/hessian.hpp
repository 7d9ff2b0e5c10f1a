#pragma once
/// \file
/// Second-order sensitivities of an ODE objective J(p, y0) (objective.hpp):
/// Hessian–vector products and, for few parameters, the Hessian.
///
///     auto r = ode::hessian_vector(problem, objective, {.parameters = v},
///                                  ode::DiscreteAdjoint{.checkpointing = ode::Binomial{.snapshots = 8}},
///                                  {.method = ode::Method::RK4, .dt = 1e-2});
///     r.gradient_wrt_parameters;  // ∂J/∂p            (= ode::gradient's, bit for bit)
///     r.hv_wrt_parameters;        // ∂²J/∂p² v_p + ∂²J/∂p∂y0 v_y0
///     r.hv_wrt_initial_state;     // ∂²J/∂y0∂p v_p + ∂²J/∂y0² v_y0
///     auto H = ode::hessian(problem, objective, method, options);   // P × P
///
/// Forward over adjoint: the discrete adjoint sweep of ode::gradient
/// differentiated along v — p + ε v_p, y0 + ε v_y0 — so the ε-parts of the
/// adjoints it returns are the derivative of the discrete gradient along v:
/// the exact Hessian of the discrete objective applied to v (not an
/// approximation of the continuous one). The native steppers run on the
/// compiled ode::System (make_second_order_system is the only per-model
/// template: make_system's adapter plus the model on ad::SecondOrderDual<K>
/// and Reverse<Dual<double, 1>>): the compiled schemes' tangent steps
/// carry x_i + εẋ_i forward, and each reverse step is the scheme's
/// adjoint_tangent — adjoint() with its ε-parts from the System's
/// SecondOrderLinearization (f_xᵀẇ + ḟ_xᵀw; dense Dual passes for small
/// n + n_p, coloured ones for a sparse f, a tape otherwise) — under
/// second_order_sweep (scheme.hpp), the same checkpoint schedules as the
/// gradient. The time loop is never taped.
///
/// The step sizes are constants, as for the gradient: fixed-step methods use
/// dt (landing on observation times); dopri5, sdirk3 and bdf first choose
/// their steps (and bdf's orders) by ode::gradient's adaptive run
/// (plan_steps), or take a `replay` plan (GradientResult::steps), and the
/// sweep replays them, so H is the derivative of the
/// replayed discrete gradient. Snapshots hold value and tangent (twice a
/// gradient's memory per slot); every schedule gives the same bits.
///
/// Events (events.hpp): each instant of the plan is a jump between the
/// replayed steps, reversed to second order by the jump's own second
/// derivative (the instant's movement with v included); native steppers only.
/// Steppers: euler, rk4, dopri5 (explicit RK: the gradient part is
/// ode::gradient's bit for bit with the dense strategy), backward_euler,
/// crank_nicolson (θ), sdirk3 and bdf. Implicit solves are never
/// differentiated through Newton: each solve's tangent and the derivative of
/// its transposed solve are linear solves with I − g J (g = hθ, hγ per
/// sdirk3 stage, hβ for bdf, whose checkpointed state is the history
/// window). Their gradient part agrees with ode::gradient's to rounding.
/// CVODES (sensitivity.method cvodes_adjoint, integrator.method cvodes_bdf |
/// cvodes_adams): the continuous second-order adjoint instead
/// (src/ode/cvodes_hessian.cpp) — CVODES' forward sensitivity along v stored
/// with the checkpoints, and a backward problem [λ; Λ] reading it next to
/// the gradient's λ problem. H v is then the exact Hessian applied to v up
/// to O(rtol) (not a discrete one: check it against finite differences of
/// CVODES gradients to the tolerances' order); the gradient is
/// ode::gradient's with CvodesAdjoint (same forward and λ steps). Cost ≈
/// 2–3× a CVODES adjoint gradient (Lotka–Volterra, bench_cvodes_hvp).
/// Limitations: the other sensitivity methods (forward,
/// continuous_adjoint, cvodes_forward) are rejected with a costate::Error
/// (ode::supports(method, integrator, 2), support.hpp).
/// With CVODES: no replay plan (CVODES chooses its steps), dense linear
/// algebra in the second backward problem, and its Newton matrix is block
/// diagonal (the λ→Λ coupling block is left out: more Newton iterations,
/// same accuracy). Serial (host) vectors. The model and the objective must
/// accept ad::Reverse<ad::Dual<double, 1>> (and the model
/// ad::Dual<ad::Dual<double, 1>, 8>) as their scalar type (any model written
/// on a generic T with the usual arithmetic does).

#include <Eigen/Core>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {

/// The direction v = (v_p, v_y0) of a Hessian–vector product. `parameters`
/// has one entry per parameter; `initial_state` one per state, or is empty
/// (zero). The caller owns the vectors.
struct HessianDirection {
  std::vector<double> parameters;
  std::vector<double> initial_state{};
};

struct HessianVectorResult {
  double objective = 0.0;
  std::vector<double> gradient_wrt_parameters, gradient_wrt_initial_state;
  /// H v, split like the gradient: the rows of p, then of y0.
  std::vector<double> hv_wrt_parameters, hv_wrt_initial_state;
  /// ∇J · v (the ε-part of J; a check: it equals the gradient dotted with v).
  double directional_derivative = 0.0;
  std::string method;
  CheckpointStats checkpoints;
  /// The steps (and bdf's orders) replayed: GradientResult::steps' meaning.
  StepPlan steps;
  /// rhs_evaluations: every right-hand-side evaluation of the call, counted
  /// as GradientResult::rhs_evaluations (the run that chose the steps and
  /// the sweeps; CVODES: its forward and backward runs).
  std::int64_t rhs_evaluations = 0, vjp_evaluations = 0;
  double wall_seconds = 0.0;
};

struct HessianResult {
  double objective = 0.0;
  /// ∂J/∂p over the chosen parameters.
  std::vector<double> gradient;
  /// The parameter indices (rows and columns of `hessian`).
  std::vector<std::size_t> parameters;
  /// ∂²J/∂p², column j = H e_j from its own Hessian–vector product; not
  /// symmetrised (symmetric to rounding: see asymmetry).
  Eigen::MatrixXd hessian;
  /// max |H_ij − H_ji| / max |H_ij| (0 for a zero Hessian).
  double asymmetry = 0.0;
  StepPlan steps;               ///< the steps of every product
  CheckpointStats checkpoints;  ///< of one product
  std::int64_t products = 0;
  double wall_seconds = 0.0;
};

namespace detail {

/// hessian_vector with CvodesAdjoint: the continuous second-order adjoint
/// through CVODES (src/ode/cvodes_hessian.cpp, on the second-order System).
HessianVectorResult cvodes_hessian_vector(const System& system, std::span<const double> y0,
                                          std::span<const double> p, double t0, double t1,
                                          const HessianDirection& v, const CvodesAdjoint& adjoint,
                                          IntegratorOptions options);

/// hessian_vector for the native steppers, compiled once (src/ode/hessian.cpp):
/// the steps as ode::gradient chooses them (plan_steps: fixed, the adaptive
/// run, or `replay`), then second_order_sweep over make_scheme's scheme on
/// `system`. `method_name` is to_string of the sensitivity method.
HessianVectorResult native_hessian_vector(const System& system, std::span<const double> y0,
                                          std::span<const double> p, double t0, double t1,
                                          const HessianDirection& v,
                                          const Checkpointing& checkpointing,
                                          const std::string& method_name,
                                          const IntegratorOptions& options,
                                          const StepPlan& replay);

}  // namespace detail

/// Objective, gradient and Hessian–vector product H v of the discrete
/// objective (see the file comment). A `replay` plan (the `steps` of an
/// earlier result) fixes the steps instead of choosing them. Throws
/// costate::Error for unsupported methods, a direction of the wrong size, a
/// plan that does not fit and a failed forward integration.
template <Model M, class O>
HessianVectorResult hessian_vector(const Problem<M>& problem, const O& objective,
                                   const HessianDirection& v,
                                   const SensitivityMethod& method = DiscreteAdjoint{},
                                   IntegratorOptions options = {},
                                   const StepPlan& replay = {});

/// hessian_vector along each of `v` (one result per direction, each as
/// hessian_vector gives it: the same bits), the model's second-order System
/// built once for all of them. Each product chooses its steps as
/// hessian_vector does: pass a `replay` plan to share one plan.
template <Model M, class O>
std::vector<HessianVectorResult> hessian_vectors(const Problem<M>& problem, const O& objective,
                                                 std::span<const HessianDirection> v,
                                                 const SensitivityMethod& method = DiscreteAdjoint{},
                                                 IntegratorOptions options = {},
                                                 const StepPlan& replay = {}) {
  const std::size_t n = problem.n_states(), np = problem.p.size();
  COSTATE_CHECK(n > 0, "hessian_vector: the problem has no states");
  for (const HessianDirection& d : v) {
    COSTATE_CHECK(d.parameters.size() == np,
                  "hessian_vector: the direction has " << d.parameters.size()
                                                       << " parameter entries; the problem has " << np);
    COSTATE_CHECK(d.initial_state.empty() || d.initial_state.size() == n,
                  "hessian_vector: the direction's initial_state has "
                      << d.initial_state.size() << " entries; expected 0 or " << n);
  }
  require(supports(kind_of(method), options, 2), "ode::hessian_vector");  // support.hpp's table
  std::vector<HessianVectorResult> out;
  out.reserve(v.size());
  if (const auto* cv = std::get_if<CvodesAdjoint>(&method)) {
    COSTATE_CHECK(replay.empty(),
                  "hessian_vector: a replay step plan is for the native steppers; "
                  "sensitivity.method = cvodes_adjoint chooses its own steps");
    // The System with its second-order evaluations; dense [f_y | f_p] up to
    // cvodes::kBindingDenseMax states + parameters, as cvodes_gradient's.
    const System system = make_second_order_system(problem.model, objective, n, np,
                                                   {.dense_max = cvodes::kBindingDenseMax});
    for (const HessianDirection& d : v)
      out.push_back(detail::cvodes_hessian_vector(system, problem.y0, problem.p, problem.t0(),
                                                  problem.t1(), d, *cv, options));
    return out;
  }
  // The native steppers: the compiled scheme and sweep on the System.
  const System system = make_second_order_system(problem.model, objective, n, np);
  for (const HessianDirection& d : v)
    out.push_back(detail::native_hessian_vector(system, problem.y0, problem.p, problem.t0(),
                                                problem.t1(), d,
                                                std::get<DiscreteAdjoint>(method).checkpointing,
                                                to_string(method), options, replay));
  return out;
}

template <Model M, class O>
HessianVectorResult hessian_vector(const Problem<M>& problem, const O& objective,
                                   const HessianDirection& v, const SensitivityMethod& method,
                                   IntegratorOptions options, const StepPlan& replay) {
  return std::move(
      hessian_vectors(problem, objective, std::span<const HessianDirection>(&v, 1), method,
                      std::move(options), replay)
          .front());
}

/// ∂²J/∂p² over the parameters `wrt` (indices; empty: all), one
/// Hessian–vector product per column with the unit vectors, all on the same
/// steps (chosen once by the first product, or the `replay` plan).
/// For small parameter counts.
template <Model M, class O>
HessianResult hessian(const Problem<M>& problem, const O& objective,
                      const SensitivityMethod& method = DiscreteAdjoint{},
                      IntegratorOptions options = {}, std::span<const std::size_t> wrt = {},
                      const StepPlan& replay = {}) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t np = problem.p.size();
  HessianResult out;
  if (wrt.empty())
    for (std::size_t j = 0; j < np; ++j) out.parameters.push_back(j);
  else
    out.parameters.assign(wrt.begin(), wrt.end());
  for (std::size_t j : out.parameters)
    COSTATE_CHECK(j < np, "ode::hessian: parameter index " << j << " out of range (the problem has "
                                                           << np << " parameters)");
  const auto m = static_cast<Eigen::Index>(out.parameters.size());
  out.hessian = Eigen::MatrixXd::Zero(m, m);
  StepPlan steps = replay;
  HessianDirection v{std::vector<double>(np, 0.0), {}};
  for (Eigen::Index c = 0; c < m; ++c) {
    const std::size_t j = out.parameters[static_cast<std::size_t>(c)];
    v.parameters[j] = 1.0;
    const HessianVectorResult r = hessian_vector(problem, objective, v, method, options, steps);
    v.parameters[j] = 0.0;
    if (steps.empty()) steps = r.steps;
    for (Eigen::Index i = 0; i < m; ++i)
      out.hessian(i, c) = r.hv_wrt_parameters[out.parameters[static_cast<std::size_t>(i)]];
    if (c == 0) {
      out.objective = r.objective;
      for (std::size_t i : out.parameters) out.gradient.push_back(r.gradient_wrt_parameters[i]);
      out.checkpoints = r.checkpoints;
    }
    ++out.products;
  }
  const double scale = m > 0 ? out.hessian.cwiseAbs().maxCoeff() : 0.0;
  out.asymmetry =
      scale > 0.0 ? (out.hessian - out.hessian.transpose()).cwiseAbs().maxCoeff() / scale : 0.0;
  out.steps = std::move(steps);
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace costate::ode

