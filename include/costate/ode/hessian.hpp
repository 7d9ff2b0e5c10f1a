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
/// Forward over adjoint: the discrete adjoint sweep of ode::gradient runs in
/// ad::Dual<double, 1> arithmetic with p + ε v_p and y0 + ε v_y0, so the
/// ε-parts of the adjoints it returns are the derivative of the discrete
/// gradient along v — the exact Hessian of the discrete objective applied to
/// v (not an approximation of the continuous one). Each stage's
/// vector–Jacobian product is one recording of the right-hand side on
/// ad::Reverse<ad::Dual<double, 1>> (detail/hessian_sweep.hpp); the time
/// loop is never taped. Cost ≈ 2–4× a gradient with the same schedule.
///
/// The step sizes are constants, as for the gradient: fixed-step methods use
/// dt (landing on observation times); dopri5 first chooses its steps by an
/// adaptive run (or takes `replay_times`, e.g. GradientResult::step_times)
/// and the sweep replays them, so H is the derivative of the replayed
/// discrete gradient. The checkpoint schedule is DiscreteAdjoint's
/// (snapshots hold value and tangent: twice a gradient's memory per slot);
/// every schedule gives the same bits.
///
/// Steppers: the explicit Runge–Kutta methods (euler, rk4, dopri5; the
/// adjoint of ExplicitRKStep on Dual vectors) and the θ-methods
/// (backward_euler, crank_nicolson; the step's tangent and the derivative of
/// its transposed solve are linear solves with I − hθJ —
/// detail::DualThetaScheme), and the adaptive implicit sdirk3 and bdf: their
/// steps (and bdf's orders) are chosen by the same adaptive run as
/// ode::gradient's (or replayed from `replay_times`, `replay_orders` =
/// GradientResult::step_times, step_orders), Newton is replayed for the
/// values and never differentiated — each implicit solve's tangent and the
/// derivative of its transposed solve are linear solves with I − hγJ
/// (sdirk3, per stage) or I − hβJ (bdf, whose checkpointed state is the
/// history window) — detail/hessian_implicit.hpp. Their gradient part
/// agrees with ode::gradient's to rounding (not bit for bit).
/// CVODES (sensitivity.method cvodes_adjoint, integrator.method cvodes_bdf |
/// cvodes_adams): the continuous second-order adjoint instead
/// (detail/cvodes_hessian.hpp) — CVODES' forward sensitivity along v stored
/// with the checkpoints, and a backward problem [λ; Λ] reading it next to
/// the gradient's λ problem. H v is then the exact Hessian applied to v up
/// to O(rtol) (not a discrete one: check it against finite differences of
/// CVODES gradients to the tolerances' order); the gradient is
/// ode::gradient's with CvodesAdjoint (same forward and λ steps). Cost ≈
/// 2–3× a CVODES adjoint gradient (Lotka–Volterra, bench_cvodes_hvp).
/// Limitations: the other sensitivity methods (forward,
/// continuous_adjoint, cvodes_forward) are rejected with a costate::Error
/// (ode::supports(method, integrator, 2), support.hpp).
/// With CVODES: no replay_times (CVODES chooses its steps), dense linear
/// algebra in the second backward problem, and its Newton matrix is block
/// diagonal (the λ→Λ coupling block is left out: more Newton iterations,
/// same accuracy). Serial (host) vectors. The model and the objective must
/// accept ad::Reverse<ad::Dual<double, 1>> as their scalar type (any model
/// written on a generic T with the usual arithmetic does).

#include <Eigen/Core>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/detail/hessian_implicit.hpp"
#include "costate/ode/detail/hessian_sweep.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/support.hpp"

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
  std::vector<double> step_times;
  /// bdf: the order of each step (replay with step_times); else empty.
  std::vector<int> step_orders;
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
  std::vector<double> step_times;
  std::vector<int> step_orders;  ///< bdf's orders (else empty)
  CheckpointStats checkpoints;  ///< of one product
  std::int64_t products = 0;
  double wall_seconds = 0.0;
};

namespace detail {

/// hessian_vector with CvodesAdjoint: the continuous second-order adjoint
/// through CVODES (detail/cvodes_hessian.hpp, included at the end).
template <Model M, class O>
HessianVectorResult cvodes_hessian_vector(const Problem<M>& problem, const O& objective,
                                          const HessianDirection& v, const CvodesAdjoint& adjoint,
                                          IntegratorOptions options);

/// The step times ode::gradient would use (fixed steps, or an adaptive
/// dopri5 run landing on the stop times).
template <Model M, class O>
std::vector<double> explicit_step_times(const Problem<M>& problem, const O& objective,
                                        IntegratorOptions options,
                                        const std::vector<double>& stops, Summary& summary) {
  const std::size_t n = problem.n_states();
  const std::size_t na = n + (HasRunning<O> ? 1 : 0);
  const double t0 = problem.t0(), t1 = problem.t1();
  options.validate(na);
  if (options.fixed_step()) {
    std::vector<double> times = fixed_step_times(t0, t1, options.dt, stops);
    COSTATE_CHECK(static_cast<std::int64_t>(times.size()) - 1 <= options.max_steps,
                  "hessian_vector: " << times.size() - 1
                                     << " steps exceed integrator.max_steps = " << options.max_steps);
    summary.method = options.method;
    summary.steps = static_cast<std::int64_t>(times.size()) - 1;
    summary.final_time = t1;
    return times;
  }
  // As ode::gradient: land on the stop times; the running cost's state z is
  // a quadrature, not error-controlled.
  options.stop_at_outputs = true;
  if (HasRunning<O> && !options.atol_per_state.empty()) options.atol_per_state.push_back(1e300);
  if (HasRunning<O> && options.atol_per_state.empty()) {
    options.atol_per_state.assign(na, options.atol);
    options.atol_per_state.back() = 1e300;
  }
  std::vector<double> times{t0};
  auto user_on_step = options.on_step;
  options.on_step = [&](double t) {
    times.push_back(t);
    if (user_on_step) user_on_step(t);
  };
  Augmented<M, O> aug{problem.model, objective, n};
  std::vector<double> y0a(na, 0.0);
  std::copy(problem.y0.begin(), problem.y0.end(), y0a.begin());
  HostVector y = HostVector::from(std::span<const double>(y0a));
  const std::span<const double> p(problem.p);
  auto rhs = [&](double t, const HostVector& yy, const HostVector& dydt) {
    aug.template rhs<double>(t, std::span<const double>(yy.data(), na), p,
                             std::span<double>(dydt.data(), na));
  };
  summary = integrate_vector(rhs, t0, t1, y, options, std::span<const double>(stops),
                             [](std::size_t, double, const HostVector&) {});
  COSTATE_CHECK(summary.success(),
                "hessian_vector: the forward integration failed: " << summary.message);
  return times;
}

}  // namespace detail

/// Objective, gradient and Hessian–vector product H v of the discrete
/// objective (see the file comment). `replay_times` (t_0 … t_l from an
/// earlier result) fixes the steps instead of choosing them (bdf also needs
/// `replay_orders`, one per step: step_orders of a result). Throws
/// costate::Error for unsupported methods, a direction of the wrong size and
/// a failed forward integration.
template <Model M, class O>
HessianVectorResult hessian_vector(const Problem<M>& problem, const O& objective,
                                   const HessianDirection& v,
                                   const SensitivityMethod& method = DiscreteAdjoint{},
                                   IntegratorOptions options = {},
                                   std::span<const double> replay_times = {},
                                   std::span<const int> replay_orders = {}) {
  using detail::HvpDual;
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = problem.n_states(), np = problem.p.size();
  COSTATE_CHECK(n > 0, "hessian_vector: the problem has no states");
  COSTATE_CHECK(v.parameters.size() == np,
                "hessian_vector: the direction has " << v.parameters.size()
                                                     << " parameter entries; the problem has " << np);
  COSTATE_CHECK(v.initial_state.empty() || v.initial_state.size() == n,
                "hessian_vector: the direction's initial_state has "
                    << v.initial_state.size() << " entries; expected 0 or " << n);
  require(supports(kind_of(method), options, 2), "ode::hessian_vector");  // support.hpp's table
  if (const auto* cv = std::get_if<CvodesAdjoint>(&method)) {
    COSTATE_CHECK(replay_times.empty(),
                  "hessian_vector: replay_times are for the native steppers; "
                  "sensitivity.method = cvodes_adjoint chooses its own steps");
    return detail::cvodes_hessian_vector(problem, objective, v, *cv, std::move(options));
  }
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = n + (kRunning ? 1 : 0);
  const double t0 = problem.t0(), t1 = problem.t1();

  // 1. Observation times and the step sequence (as ode::gradient).
  std::vector<double> obs;
  if constexpr (HasObservations<O>) {
    const auto ts = objective.observation_times();
    obs.assign(ts.begin(), ts.end());
  }
  detail::validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);
  Summary summary;
  std::vector<double> times;
  // sdirk3/bdf: ode::gradient's replay options, adaptive run and bdf orders.
  const bool adaptive_implicit = detail::is_adaptive_implicit(options.method);
  if (adaptive_implicit) options = detail::implicit_replay_options<O>(std::move(options), na);
  std::vector<int> orders;
  if (replay_times.empty() && adaptive_implicit && !options.fixed_step()) {
    times = detail::implicit_step_times(problem, objective, options, stops, summary, orders);
  } else if (replay_times.empty()) {
    times = detail::explicit_step_times(problem, objective, options, stops, summary);
  } else {
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
  }
  std::vector<std::int64_t> obs_at(times.size(), -1);
  for (std::size_t k = 0, i = 0; k < obs.size(); ++k) {
    while (i < times.size() && times[i] < obs[k]) ++i;
    COSTATE_CHECK(i < times.size() && times[i] == obs[k],
                  "hessian_vector: no step lands on observation time "
                      << obs[k] << " (replay_times must include every observation time)");
    obs_at[i] = static_cast<std::int64_t>(k);
  }

  // 2. The sweep on Duals: p + ε v_p, y0 + ε v_y0 (z(t0) = 0).
  std::vector<HvpDual> pd(np), y0d(na, HvpDual(0.0));
  for (std::size_t j = 0; j < np; ++j) pd[j] = HvpDual(problem.p[j], {v.parameters[j]});
  for (std::size_t i = 0; i < n; ++i)
    y0d[i] = HvpDual(problem.y0[i], {v.initial_state.empty() ? 0.0 : v.initial_state[i]});
  const detail::Augmented<M, O> aug{problem.model, objective, n};
  const auto& dam = std::get<DiscreteAdjoint>(method);
  detail::HvpOutcome o;
  const std::span<const HvpDual> pds(pd), y0ds(y0d);
  if (adaptive_implicit) {
    o = detail::implicit_dual_sweep(aug, objective, pds, y0ds, std::span<const double>(problem.p),
                                    options, times, orders, obs_at, dam.checkpointing, n);
  } else if (is_implicit(options.method)) {
    detail::DualThetaScheme<detail::Augmented<M, O>> sc(aug, pds, problem.p, na,
                                                        theta_of(options.method),
                                                        options.newton_tol,
                                                        options.newton_max_iterations);
    o = detail::dual_sweep(sc, objective, pds, y0ds, times, obs_at, dam.checkpointing, n);
  } else {
    const detail::HvpVector like = detail::HvpVector::from(y0ds);
    detail::DualRkScheme<detail::Augmented<M, O>> sc(aug, explicit_tableau(options.method), pds,
                                                     like);
    o = detail::dual_sweep(sc, objective, pds, y0ds, times, obs_at, dam.checkpointing, n);
  }

  HessianVectorResult r;
  r.objective = o.objective.value();
  r.directional_derivative = o.objective.tangent(0);
  for (const auto& d : o.wrt_parameters) {
    r.gradient_wrt_parameters.push_back(d.value());
    r.hv_wrt_parameters.push_back(d.tangent(0));
  }
  for (const auto& d : o.wrt_initial_state) {
    r.gradient_wrt_initial_state.push_back(d.value());
    r.hv_wrt_initial_state.push_back(d.tangent(0));
  }
  r.method = "forward_over_" + to_string(method);
  r.checkpoints = o.checkpoints;
  r.step_times = std::move(times);
  r.step_orders = std::move(orders);
  r.rhs_evaluations = o.rhs_evaluations + summary.rhs_evaluations;
  r.vjp_evaluations = o.vjp_evaluations;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

/// ∂²J/∂p² over the parameters `wrt` (indices; empty: all), one
/// Hessian–vector product per column with the unit vectors, all on the same
/// steps (chosen once, or `replay_times` and, for bdf, `replay_orders`).
/// For small parameter counts.
template <Model M, class O>
HessianResult hessian(const Problem<M>& problem, const O& objective,
                      const SensitivityMethod& method = DiscreteAdjoint{},
                      IntegratorOptions options = {}, std::span<const std::size_t> wrt = {},
                      std::span<const double> replay_times = {},
                      std::span<const int> replay_orders = {}) {
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
  std::vector<double> times(replay_times.begin(), replay_times.end());
  std::vector<int> orders(replay_orders.begin(), replay_orders.end());
  HessianDirection v{std::vector<double>(np, 0.0), {}};
  for (Eigen::Index c = 0; c < m; ++c) {
    const std::size_t j = out.parameters[static_cast<std::size_t>(c)];
    v.parameters[j] = 1.0;
    const HessianVectorResult r =
        hessian_vector(problem, objective, v, method, options, times, orders);
    v.parameters[j] = 0.0;
    if (times.empty()) {
      times = r.step_times;
      orders = r.step_orders;
    }
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
  out.step_times = std::move(times);
  out.step_orders = std::move(orders);
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace costate::ode

#include "costate/ode/detail/cvodes_hessian.hpp"
