#pragma once
/// \file
/// ode::hessian_vector with CvodesAdjoint: the continuous second-order
/// adjoint through CVODES (cvodes::second_order_adjoint). Included at the
/// end of hessian.hpp. The first-order callbacks come from the compiled
/// ode::System (cvodes::Binding); the second-order products below are still
/// a per-model template (the System has no second-order products yet).
///
/// Differentiating the continuous gradient of J = g(y(t1), p) + Σ_k ℓ_k(y(t_k), p)
/// + z(t1) (z' = q, the running cost as an extra state of the augmented f)
/// along v = (v_p, v_y0), with s = dy/dε the forward sensitivity
/// (s' = f_y s + f_p v_p, s(t0) = v_y0, s_z(t0) = 0) and Λ = dλ/dε:
///     Λ' = −f_yᵀΛ − (f_yy[s] + f_yp[v_p])ᵀλ,
///     Λ(t1) = g_yy s + g_yp v_p   (Λ_z = 0: J is linear in z, nothing reads z),
///     Λ(t_k⁻) = Λ(t_k⁺) + ℓ_k,yy s + ℓ_k,yp v_p,
///     (H v)_p = ∫ f_pᵀΛ + (f_py[s] + f_pp[v_p])ᵀλ dt + g_py s + g_pp v_p
///               + Σ_k (ℓ_k,py s + ℓ_k,pp v_p),
///     (H v)_y0 = Λ(t0),
/// all with the augmented f = [f; q] (λ_z = 1 brings in q's second
/// derivatives). The ε-expanded products come from one recording of the
/// augmented right-hand side on ad::Reverse<ad::Dual<double, 1>>
/// (DualRhsVjp, at (y + εs, p + εv_p) seeded with λ + εΛ); the objective
/// terms' from dual_value_and_gradient — the ε-parts of the gradients of
/// ℓ_k and g at (y + εs, p + εv_p).

#include <chrono>
#include <optional>

#include "costate/ode/cvodes.hpp"
#include "costate/ode/detail/cvodes_gradient.hpp"
#include "costate/ode/detail/hessian_sweep.hpp"

namespace costate::ode::detail {

template <Model M, class O>
HessianVectorResult cvodes_hessian_vector(const Problem<M>& problem, const O& objective,
                                          const HessianDirection& v, const CvodesAdjoint& adjoint,
                                          IntegratorOptions options) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = problem.n_states(), np = problem.p.size();
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = n + (kRunning ? 1 : 0);
  require(supports(SensitivityKind::CvodesAdjoint, options.method, 2), "ode::hessian_vector");
  const double t0 = problem.t0(), t1 = problem.t1();
  COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");

  // 1. Stops and the augmented system, exactly as cvodes_gradient.
  std::vector<double> obs;
  if constexpr (HasObservations<O>) {
    const auto times = objective.observation_times();
    obs.assign(times.begin(), times.end());
  }
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);
  const std::size_t K = stops.size();
  Augmented<M, O> aug{problem.model, objective, n};
  if (kRunning) {
    if (options.atol_per_state.empty()) options.atol_per_state.assign(n, options.atol);
    options.atol_per_state.push_back(options.atol);
  }
  options.validate(na);
  std::vector<double> y0a(na, 0.0), s0(na, 0.0);
  std::copy(problem.y0.begin(), problem.y0.end(), y0a.begin());
  if (!v.initial_state.empty())
    std::copy(v.initial_state.begin(), v.initial_state.end(), s0.begin());
  const std::span<const double> p(problem.p);
  // First order (rhs, Jacobian, f_yᵀλ / f_pᵀλ) from the compiled System, as
  // cvodes_gradient; the dense linear solver (the 2n-state second backward
  // problem assembles its own block Jacobian from sys.jacobian).
  const System system = cvodes_system_of(problem, objective);
  cvodes::Binding binding(system, p, options.method, CvodesLinearSolver::Dense, t0, y0a);
  cvodes::System& sys = binding.system();
  const cvodes::Settings settings = cvodes::settings_from(options, na);

  // 2. Second-order callbacks on p + εv_p.
  std::vector<HvpDual> pd(np);
  for (std::size_t j = 0; j < np; ++j) pd[j] = HvpDual(problem.p[j], {v.parameters[j]});
  const std::span<const HvpDual> pds(pd);
  std::vector<HvpDual> yd(na), fd(na);
  sys.tangent_rhs = [&](double t, const double* y, const double* s, double* sdot) {
    for (std::size_t i = 0; i < na; ++i) yd[i] = HvpDual(y[i], {s[i]});
    aug.template rhs<HvpDual>(t, std::span<const HvpDual>(yd), pds, std::span<HvpDual>(fd));
    for (std::size_t i = 0; i < na; ++i) sdot[i] = fd[i].tangent(0);
  };
  DualRhsVjp<Augmented<M, O>> vjp2(aug, pds, na);
  HvpVector Y = HvpVector::from(std::span<const HvpDual>(yd)), W = Y.clone(), Ybar = Y.clone();
  std::vector<HvpDual> pbar(np);
  // CVODES evaluates the backward right-hand side and the quadrature at the
  // same (t, y, s, λ, Λ) in turn: one recording serves both.
  std::vector<double> key(4 * na + 1, 0.0), cached_y(2 * na), cached_p(2 * np);
  bool cached = false;
  sys.second_order_vjp = [&](double t, const double* y, const double* s, const double* lam,
                             const double* Lam, double* fy_w, double* fp_w) {
    const double* parts[] = {y, s, lam, Lam};
    bool same = cached && key[0] == t;
    for (std::size_t b = 0; b < 4 && same; ++b)
      same = std::equal(parts[b], parts[b] + na,
                        key.begin() + 1 + static_cast<std::ptrdiff_t>(b * na));
    if (!same) {
      key[0] = t;
      for (std::size_t b = 0; b < 4; ++b)
        std::copy(parts[b], parts[b] + na, key.begin() + 1 + static_cast<std::ptrdiff_t>(b * na));
      for (std::size_t i = 0; i < na; ++i) {
        Y[i] = HvpDual(y[i], {s[i]});
        W[i] = HvpDual(lam[i], {Lam[i]});
      }
      std::fill(pbar.begin(), pbar.end(), HvpDual(0.0));
      vjp2(t, Y, W, Ybar, pbar);
      for (std::size_t i = 0; i < na; ++i) {
        cached_y[i] = Ybar[i].value();
        cached_y[na + i] = Ybar[i].tangent(0);
      }
      for (std::size_t j = 0; j < np; ++j) {
        cached_p[j] = pbar[j].value();
        cached_p[np + j] = pbar[j].tangent(0);
      }
      cached = true;
    }
    std::copy(cached_y.begin(), cached_y.end(), fy_w);
    std::copy(cached_p.begin(), cached_p.end(), fp_w);
  };

  // 3. The objective's terms at stop k on (y + εs, p + εv_p): the values and
  //    ε-parts of J, of ∂/∂y (λ and Λ jumps) and of ∂/∂p (into g_p, h_p).
  ad::BasicTape<HvpDual>& tape = hvp_tape();
  std::vector<HvpDual> ydk(n), ybar(n), pbar_terms(np, HvpDual(0.0));
  HvpDual J(0.0);
  auto jump = [&](std::size_t k, double, const double* y, const double* s, double* dl,
                  double* dL) {
    for (std::size_t i = 0; i < n; ++i) ydk[i] = HvpDual(y[i], {s[i]});
    std::fill(ybar.begin(), ybar.end(), HvpDual(0.0));
    const std::span<const HvpDual> ys(ydk);
    if constexpr (HasObservations<O>) {
      if (k < obs.size())
        J += dual_value_and_gradient(
            [&](std::span<const HvpReverse> yy, std::span<const HvpReverse> pp) {
              return HvpReverse(objective.template observation<HvpReverse>(k, yy, pp));
            },
            ys, pds, std::span<HvpDual>(ybar), std::span<HvpDual>(pbar_terms), tape);
    }
    if (k + 1 == K) {
      if constexpr (HasTerminal<O>)
        J += dual_value_and_gradient(
            [&](std::span<const HvpReverse> yy, std::span<const HvpReverse> pp) {
              return HvpReverse(objective.template terminal<HvpReverse>(yy, pp));
            },
            ys, pds, std::span<HvpDual>(ybar), std::span<HvpDual>(pbar_terms), tape);
      if constexpr (kRunning) {
        J += HvpDual(y[n], {s[n]});
        dl[n] = 1.0;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      dl[i] = ybar[i].value();
      dL[i] = ybar[i].tangent(0);
    }
  };

  std::vector<double> lambda, mu, Lambda, nu;
  cvodes::Stats fwd, bwd;
  cvodes::second_order_adjoint(sys, settings, adjoint, t0, y0a, s0, stops, jump, lambda, mu,
                               Lambda, nu, fwd, bwd);

  HessianVectorResult r;
  r.objective = J.value();
  r.directional_derivative = J.tangent(0);
  r.gradient_wrt_parameters.resize(np);
  r.hv_wrt_parameters.resize(np);
  for (std::size_t j = 0; j < np; ++j) {
    r.gradient_wrt_parameters[j] = mu[j] + pbar_terms[j].value();
    r.hv_wrt_parameters[j] = nu[j] + pbar_terms[j].tangent(0);
  }
  const auto nn = static_cast<std::ptrdiff_t>(n);
  r.gradient_wrt_initial_state.assign(lambda.begin(), lambda.begin() + nn);
  r.hv_wrt_initial_state.assign(Lambda.begin(), Lambda.begin() + nn);
  r.method = "cvodes_second_order_adjoint(steps " + std::to_string(adjoint.steps) + ", " +
             to_string(adjoint.interpolation) + ")";
  r.checkpoints.steps = fwd.steps;
  r.checkpoints.forward_steps = fwd.steps;
  r.checkpoints.peak_snapshots = fwd.checkpoints;
  r.rhs_evaluations = fwd.rhs_evaluations + bwd.rhs_evaluations;
  r.vjp_evaluations = binding.vjp_evaluations() + vjp2.count;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace costate::ode::detail
