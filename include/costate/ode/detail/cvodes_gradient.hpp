#pragma once
/// \file
/// ode::gradient with the CVODES backend (CvodesForward, CvodesAdjoint): the
/// objective's terms and their gradients at the stops of CVODES' forward
/// pass, the derivatives of the augmented right-hand side [f; q] from AD.
/// Included at the end of gradient.hpp; see cvodes.hpp for the maths.

#include <chrono>

#include "costate/ode/cvodes.hpp"
#include "costate/ode/cvodes_system.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/support.hpp"

namespace costate::ode::detail {

/// sys.vjp (f_yᵀλ, f_pᵀλ) of the augmented system: from `deriv`'s cached
/// dense [f_y | f_p] for up to 64 states + parameters, from a short tape
/// (`tape_vjp`, created here) above; counts into `vjps`. `deriv`,
/// `tape_vjp`, `aug`, `p` and `vjps` must outlive `sys`.
template <class A>
void attach_cvodes_vjp(cvodes::System& sys, CvodesDerivatives<A>& deriv,
                       std::optional<RhsVjp<A>>& tape_vjp, const A& aug,
                       std::span<const double> p, std::int64_t& vjps) {
  constexpr std::size_t kDenseLimit = 64;  // dense [f_y | f_p] up to this many columns
  const std::size_t na = deriv.n(), np = p.size();
  if (na + np > kDenseLimit) tape_vjp.emplace(aug, p, na);
  sys.vjp = [&deriv, &tape_vjp, &vjps, na, np](double t, const double* yy, const double* lam,
                                               double* fy, double* fp) {
    ++vjps;
    if (tape_vjp) {
      std::fill(fp, fp + np, 0.0);
      (*tape_vjp)(t, std::span<const double>(yy, na), std::span<const double>(lam, na),
                  std::span<double>(fy, na), std::span<double>(fp, np));
    } else {
      deriv.vjp_dense(t, yy, lam, fy, fp);
    }
  };
}

template <Model M, class O>
GradientResult cvodes_gradient(const Problem<M>& problem, const O& objective,
                               const CvodesAdjoint* adjoint, IntegratorOptions options) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = problem.n_states();
  const std::size_t np = problem.p.size();
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = n + (kRunning ? 1 : 0);
  COSTATE_CHECK(n > 0, "gradient: the problem has no states");
  require(supports(adjoint ? SensitivityKind::CvodesAdjoint : SensitivityKind::CvodesForward,
                   options.method, 1),
          "ode::gradient");
  const double t0 = problem.t0(), t1 = problem.t1();
  COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");

  // 1. Stops: the observation times, then t1.
  std::vector<double> obs;
  if constexpr (HasObservations<O>) {
    const auto times = objective.observation_times();
    obs.assign(times.begin(), times.end());
  }
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);
  const std::size_t K = stops.size();

  // 2. The augmented system [y; z], z' = q (z outside the error test).
  Augmented<M, O> aug{problem.model, objective, n};
  if (kRunning) {
    // z = ∫ q dt is part of J: in CVODES' error test like any state, with
    // the scalar integrator.atol as its absolute tolerance.
    if (options.atol_per_state.empty()) options.atol_per_state.assign(n, options.atol);
    options.atol_per_state.push_back(options.atol);
  }
  options.validate(na);
  std::vector<double> y0a(na, 0.0);
  std::copy(problem.y0.begin(), problem.y0.end(), y0a.begin());
  const std::span<const double> p(problem.p);
  CvodesDerivatives<Augmented<M, O>> deriv(aug, p, na);
  cvodes::System sys = make_cvodes_system(deriv, options.method);
  add_jacobian_structure(sys, deriv, options.cvodes_linear_solver, t0, y0a.data());
  const cvodes::Settings settings = cvodes::settings_from(options, na);

  // Value and gradient of the terms at stop k (state y): into J, gy, gp.
  ad::Tape tape;
  std::vector<double> gy(n), gp(np);
  double J = 0.0;
  auto terms_at = [&](std::size_t k, const double* y) {
    std::fill(gy.begin(), gy.end(), 0.0);
    std::fill(gp.begin(), gp.end(), 0.0);
    const std::span<const double> ys(y, n);
    if constexpr (HasObservations<O>) {
      if (k < obs.size())
        J += value_and_gradient(
            [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
              return ad::Real(objective.template observation<ad::Real>(k, yy, pp));
            },
            ys, p, gy, gp, tape);
    }
    if (k + 1 == K) {
      if constexpr (HasTerminal<O>)
        J += value_and_gradient(
            [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
              return ad::Real(objective.template terminal<ad::Real>(yy, pp));
            },
            ys, p, gy, gp, tape);
      if constexpr (kRunning) J += y[n];
    }
  };

  GradientResult result;
  result.method = adjoint ? "cvodes_adjoint(steps " + std::to_string(adjoint->steps) + ", " +
                                to_string(adjoint->interpolation) + ")"
                          : std::string("cvodes_forward");
  std::vector<double> y = y0a;
  cvodes::Stats fwd, bwd;
  if (!adjoint) {
    // 3a. Forward sensitivities: directions (p_j; y0_i).
    const std::size_t ns = np + n;
    std::vector<double> S(na * ns, 0.0), dJ(ns, 0.0);
    for (std::size_t i = 0; i < n; ++i) S[(np + i) * na + i] = 1.0;
    fwd = cvodes::forward_sensitivities(
        sys, settings, t0, y, ns, S, stops,
        [&](std::size_t k, double, const double* yy, const double* SS) {
          terms_at(k, yy);
          for (std::size_t d = 0; d < ns; ++d) {
            double s = d < np ? gp[d] : 0.0;
            for (std::size_t i = 0; i < n; ++i) s += gy[i] * SS[d * na + i];
            if (kRunning && k + 1 == K) s += SS[d * na + n];
            dJ[d] += s;
          }
        });
    COSTATE_CHECK(fwd.success, "gradient (cvodes_forward): the integration failed: " << fwd.message);
    result.wrt_parameters.assign(dJ.begin(), dJ.begin() + static_cast<std::ptrdiff_t>(np));
    result.wrt_initial_state.assign(dJ.begin() + static_cast<std::ptrdiff_t>(np), dJ.end());
  } else {
    // 3b. Adjoint: λ jumps at the stops, f_yᵀλ and f_pᵀλ from AD.
    std::int64_t vjps = 0;
    std::optional<RhsVjp<Augmented<M, O>>> tape_vjp;
    attach_cvodes_vjp(sys, deriv, tape_vjp, aug, p, vjps);
    std::vector<double> mu_terms(np, 0.0), lambda, mu;
    cvodes::adjoint(
        sys, settings, *adjoint, t0, y0a, stops,
        [&](std::size_t k, double, const double* yy, double* dl) {
          terms_at(k, yy);
          for (std::size_t i = 0; i < n; ++i) dl[i] = gy[i];
          if (kRunning && k + 1 == K) dl[n] = 1.0;
          for (std::size_t j = 0; j < np; ++j) mu_terms[j] += gp[j];
        },
        lambda, mu, fwd, bwd);
    result.wrt_parameters.resize(np);
    for (std::size_t j = 0; j < np; ++j) result.wrt_parameters[j] = mu[j] + mu_terms[j];
    result.wrt_initial_state.assign(lambda.begin(), lambda.begin() + static_cast<std::ptrdiff_t>(n));
    result.vjp_evaluations = vjps;
    result.checkpoints.peak_snapshots = fwd.checkpoints;
  }
  result.objective = J;
  result.summary.method = options.method;
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
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace costate::ode::detail
