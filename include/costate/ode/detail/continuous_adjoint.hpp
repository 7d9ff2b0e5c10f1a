#pragma once
/// \file
/// ode::gradient with ContinuousAdjoint (see continuous_adjoint.hpp for the
/// maths). Included at the end of gradient.hpp.

#include <algorithm>
#include <chrono>
#include <optional>

#include "costate/ode/continuous_adjoint.hpp"
#include "costate/ode/cvodes_system.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/support.hpp"

namespace costate::ode::detail {

template <Model M, class O>
GradientResult continuous_adjoint_gradient(const Problem<M>& problem, const O& objective,
                                           const ContinuousAdjoint& method,
                                           IntegratorOptions options) {
  const auto start = std::chrono::steady_clock::now();
  method.validate();
  const std::size_t n = problem.n_states();
  const std::size_t np = problem.p.size();
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = n + (kRunning ? 1 : 0);
  COSTATE_CHECK(n > 0, "gradient: the problem has no states");
  require(supports(SensitivityKind::ContinuousAdjoint, options, 1), "ode::gradient");
  const double t0 = problem.t0(), t1 = problem.t1();

  // 1. Stops: observation times, then t1; the forward run lands on them.
  std::vector<double> obs;
  if constexpr (HasObservations<O>) {
    const auto times = objective.observation_times();
    obs.assign(times.begin(), times.end());
  }
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);

  // 2. Forward: adaptive dopri5 on [y; z], keeping the state of every step.
  Augmented<M, O> aug{problem.model, objective, n};
  const std::span<const double> p(problem.p);
  std::vector<double> y0a(na, 0.0);
  std::copy(problem.y0.begin(), problem.y0.end(), y0a.begin());
  if (kRunning) {
    if (options.atol_per_state.empty()) options.atol_per_state.assign(n, options.atol);
    options.atol_per_state.push_back(1e300);  // z is a quadrature: not error-controlled
  }
  options.stop_at_outputs = true;
  std::int64_t rhs_count = 0;
  auto rhs = [&](double t, const HostVector& yy, const HostVector& dydt) {
    ++rhs_count;
    aug.template rhs<double>(t, std::span<const double>(yy.data(), na), p,
                             std::span<double>(dydt.data(), na));
  };
  HostVector y = HostVector::from(std::span<const double>(y0a));
  std::vector<double> times{t0};
  std::vector<double> states(y0a);  // row i: the state at times[i]
  auto user_on_step = options.on_step;
  // integrate_vector swaps the new state into `y` before on_step.
  options.on_step = [&](double t) {
    times.push_back(t);
    states.insert(states.end(), y.data(), y.data() + na);
    if (user_on_step) user_on_step(t);
  };
  GradientResult result;
  result.summary = integrate_vector(rhs, t0, t1, y, options, std::span<const double>(stops),
                                    [](std::size_t, double, const HostVector&) {});
  COSTATE_CHECK(result.summary.success(),
                "gradient (continuous_adjoint): the forward integration failed: "
                    << result.summary.message);
  const std::size_t l = times.size() - 1;

  // 3. Terms at the stops: J, the λ jumps and ∂/∂p.
  ad::Tape tape;
  double J = 0.0;
  std::vector<double> mu_terms(np, 0.0), jumps(stops.size() * na, 0.0);
  for (std::size_t k = 0, i = 0; k < stops.size(); ++k) {
    while (i < times.size() && times[i] < stops[k]) ++i;
    COSTATE_CHECK(i < times.size() && times[i] == stops[k],
                  "gradient: internal error, no step lands on stop time " << stops[k]);
    const std::span<const double> ys(&states[i * na], n);
    std::span<double> dl(&jumps[k * na], n);
    if constexpr (HasObservations<O>) {
      if (k < obs.size())
        J += value_and_gradient(
            [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
              return ad::Real(objective.template observation<ad::Real>(k, yy, pp));
            },
            ys, p, dl, mu_terms, tape);
    }
    if (k + 1 == stops.size()) {
      if constexpr (HasTerminal<O>)
        J += value_and_gradient(
            [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
              return ad::Real(objective.template terminal<ad::Real>(yy, pp));
            },
            ys, p, dl, mu_terms, tape);
      if constexpr (kRunning) {
        J += states[i * na + n];
        jumps[k * na + n] = 1.0;
      }
    }
  }

  // 4. The forward state at any t: dense output of the step containing t,
  //    recomputed from that step's checkpoint when the step changes.
  Dopri5<HostVector> dense(y);
  HostVector ya = y.clone(), yb = y.clone(), yt = y.clone();
  std::size_t interval = l;  // none yet
  std::int64_t recomputed = 0;
  auto state_at = [&](double t) -> const HostVector& {
    std::size_t i = static_cast<std::size_t>(
        std::upper_bound(times.begin(), times.end(), t) - times.begin());
    i = i == 0 ? 0 : std::min(i - 1, l - 1);
    const double h = times[i + 1] - times[i];
    if (i != interval) {
      std::copy(&states[i * na], &states[i * na] + na, ya.data());
      dense.start(rhs, times[i], ya);
      dense.attempt(rhs, times[i], h, ya, yb);
      dense.accept(h, ya, yb, true);
      interval = i;
      ++recomputed;
    }
    dense.interpolate(std::clamp((t - times[i]) / h, 0.0, 1.0), yt);
    return yt;
  };

  // 5. Backward in s = −t: X = [λ; μ], dX/ds = [f_yᵀλ; f_pᵀλ] (of the
  //    augmented system), one leg per pair of stops, λ jumps between legs.
  constexpr std::size_t kDenseLimit = 64;  // dense [f_y | f_p] up to this many columns
  std::optional<CvodesDerivatives<Augmented<M, O>>> jac;
  std::optional<RhsVjp<Augmented<M, O>>> tape_vjp;
  if (na + np <= kDenseLimit)
    jac.emplace(aug, p, na);
  else
    tape_vjp.emplace(aug, p, na);
  std::int64_t vjps = 0;
  const std::size_t nx = na + np;
  auto adjoint_rhs = [&](double s, const HostVector& X, const HostVector& dX) {
    const double t = -s;
    const HostVector& yy = state_at(t);
    ++vjps;
    if (jac) {
      jac->vjp_dense(t, yy.data(), X.data(), dX.data(), dX.data() + na);
    } else {
      std::fill(dX.data() + na, dX.data() + nx, 0.0);
      (*tape_vjp)(t, std::span<const double>(yy.data(), na), std::span<const double>(X.data(), na),
                  std::span<double>(dX.data(), na), std::span<double>(dX.data() + na, np));
    }
  };
  IntegratorOptions back;
  back.method = Method::Dopri5;
  back.rtol = method.rtol > 0.0 ? method.rtol : options.rtol;
  double atol = method.atol;
  if (atol <= 0.0) {
    atol = options.atol;
    for (std::size_t i = 0; i < n && i < options.atol_per_state.size(); ++i)
      atol = i == 0 ? options.atol_per_state[0] : std::min(atol, options.atol_per_state[i]);
  }
  back.atol_per_state.assign(nx, atol);
  for (std::size_t j = na; j < nx; ++j) back.atol_per_state[j] = 1e300;  // μ: a quadrature
  back.max_steps = options.max_steps;
  std::vector<double> x0(nx, 0.0);
  HostVector X = HostVector::from(std::span<const double>(x0));
  std::int64_t back_steps = 0, back_rejected = 0;
  for (std::size_t k = stops.size(); k-- > 0;) {
    for (std::size_t i = 0; i < na; ++i) X[i] += jumps[k * na + i];
    const double t_to = k > 0 ? stops[k - 1] : t0;
    if (!(t_to < stops[k])) continue;
    const Summary bs = integrate_vector(adjoint_rhs, -stops[k], -t_to, X, back, {},
                                        [](std::size_t, double, const HostVector&) {});
    COSTATE_CHECK(bs.success(), "gradient (continuous_adjoint): the backward integration "
                                "failed: "
                                    << bs.message
                                    << " (a stiff problem? use sensitivity.method = "
                                       "cvodes_adjoint with integrator.method = cvodes_bdf)");
    back_steps += bs.steps;
    back_rejected += bs.rejected_steps;
  }

  result.objective = J;
  result.wrt_initial_state.assign(X.data(), X.data() + n);
  result.wrt_parameters.resize(np);
  for (std::size_t j = 0; j < np; ++j) result.wrt_parameters[j] = X[na + j] + mu_terms[j];
  std::ostringstream os;
  os.precision(3);
  os << "continuous_adjoint(rtol " << back.rtol << ", atol " << atol << ")";
  result.method = os.str();
  result.checkpoints.steps = static_cast<std::int64_t>(l);
  result.checkpoints.forward_steps = static_cast<std::int64_t>(l) + recomputed;
  result.checkpoints.recomputed_steps = recomputed;
  result.checkpoints.peak_snapshots = static_cast<std::int64_t>(l) + 1;
  result.summary.message += "; backward pass " + std::to_string(back_steps) + " steps (" +
                            std::to_string(back_rejected) + " rejected)";
  result.rhs_evaluations = rhs_count;
  result.vjp_evaluations = vjps;
  result.step_times = times;
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace costate::ode::detail
