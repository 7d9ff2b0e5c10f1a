// ode::hessian_vector with CvodesAdjoint: the continuous second-order
// adjoint through CVODES (cvodes::second_order_adjoint) on a compiled
// second-order ode::System (make_second_order_system), compiled once here
// instead of once per model and objective (issue 14).
//
// Differentiating the continuous gradient of J = g(y(t1), p) + Σ_k ℓ_k(y(t_k), p)
// + z(t1) (z' = q, the running cost as an extra state of the augmented f)
// along v = (v_p, v_y0), with s = dy/dε the forward sensitivity
// (s' = f_y s + f_p v_p, s(t0) = v_y0, s_z(t0) = 0) and Λ = dλ/dε:
//     Λ' = −f_yᵀΛ − (f_yy[s] + f_yp[v_p])ᵀλ,
//     Λ(t1) = g_yy s + g_yp v_p   (Λ_z = 0: J is linear in z, nothing reads z),
//     Λ(t_k⁻) = Λ(t_k⁺) + ℓ_k,yy s + ℓ_k,yp v_p,
//     (H v)_p = ∫ f_pᵀΛ + (f_py[s] + f_pp[v_p])ᵀλ dt + g_py s + g_pp v_p
//               + Σ_k (ℓ_k,py s + ℓ_k,pp v_p),
//     (H v)_y0 = Λ(t0),
// all with the augmented f = [f; q] (λ_z = 1 brings in q's second
// derivatives). The first-order callbacks (rhs, Jacobian, f_yᵀλ / f_pᵀλ)
// come from the System through cvodes::Binding, as cvodes_gradient's; the
// tangent right-hand side f_x s + f_p v_p from one evaluation of f on
// Dual<double, 1>; the ε-expanded products from a SecondOrderLinearization
// at (y + εs, p + εv_p) seeded with λ + εΛ; the objective terms' from
// System::terminal_hessian_vector / observation_hessian_vector.
#include <algorithm>
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "ode/events_internal.hpp"

namespace costate::ode::detail {

namespace {

using StopJump = std::function<void(std::size_t, double, const double*, const double*, double*,
                                    double*)>;

/// H·v by CVODES' second-order adjoint across the instants of an event
/// model, as cvodes_gradient's adjoint_across_instants takes the gradient:
/// the event run with CVODES' forward sensitivities (directions p_j and
/// the initial-state part of v) gives x⁻ and ẋ⁻ = Σ_j v_pj S_j + S_v at
/// each instant; the instants are then applied and their tangents taken
/// in order (the delayed links' values and tangents, one direction); the
/// stretches between instants are taken last first by
/// cvodes::second_order_adjoint from (x⁺, ẋ⁺) at their start, (λ, Λ)
/// entering at their end carried through each instant's transposed jump to
/// second order — λ ← Jᵀλ, Λ ← JᵀΛ + (D²Ĵ[ẋ⁻, v_p])ᵀλ⁺
/// (InstantJump::adjoint and second_order, the discrete adjoint's H·v
/// jump). The stops at an instant read (x⁺, ẋ⁺) and enter before the jump.
void across_instants(const System& system, const cvodes::System& sys,
                     const cvodes::Settings& settings, const CvodesAdjoint& adjoint,
                     const IntegratorOptions& options, std::span<const double> p,
                     std::span<const double> vp, double t0, double t1,
                     const std::vector<double>& y0a, const std::vector<double>& s0,
                     const std::vector<double>& stops, const StopJump& terms,
                     std::vector<double>& lambda, std::vector<double>& mu,
                     std::vector<double>& Lambda, std::vector<double>& nu, cvodes::Stats& fwd,
                     cvodes::Stats& bwd, std::int64_t& events) {
  const std::size_t na = system.n_states(), np = system.n_parameters(), K = stops.size();
  // 1. The event run with sensitivities along p_j (j < np) and s0.
  const std::size_t ns = np + 1;
  std::vector<double> S(na * ns, 0.0);
  std::copy(s0.begin(), s0.end(), S.begin() + static_cast<std::ptrdiff_t>(np * na));
  const EventRun run = cvodes_sensitivities_with_events(
      system, y0a, p, t0, t1, options, {}, ns, S, [](double, std::span<const double>, const double*) {});
  COSTATE_CHECK(run.summary.success(), "hessian_vector (cvodes_adjoint): the forward integration "
                                       "with events failed: " << run.summary.message);
  fwd.steps += run.summary.steps;
  fwd.rhs_evaluations += run.summary.rhs_evaluations;
  events = run.summary.events;
  const std::vector<double>& T = run.instant_times;
  const std::size_t E = T.size();
  // 2. Each instant in order: x⁺ and ẋ⁺ after it (its tangent along v).
  InstantJump ij(system);
  std::vector<std::vector<double>> xdot_minus(E), x_plus(E), xdot_plus(E);
  for (std::size_t e = 0; e < E; ++e) {
    const std::vector<double>& Sm = run.before_tangents[e];
    xdot_minus[e].assign(na, 0.0);
    for (std::size_t q = 0; q < na; ++q) {
      double v = Sm[np * na + q];
      for (std::size_t j = 0; j < np; ++j) v += vp[j] * Sm[j * na + q];
      xdot_minus[e][q] = v;
    }
    x_plus[e] = run.before_instants[e];
    ij.apply(run.instants[e], T[e], x_plus[e], p, true, e);
    xdot_plus[e] = xdot_minus[e];
    ij.tangent(1, xdot_plus[e], vp);
  }
  // 3. Backward: the group of instants at hi (stops there first), then the
  // stretch below it.
  std::size_t e_end = E, k_end = K;
  auto group_at = [&](double t) {
    std::size_t e = e_end;
    while (e > 0 && T[e - 1] == t) --e;
    return e;
  };
  lambda.assign(na, 0.0);
  Lambda.assign(na, 0.0);
  mu.assign(np, 0.0);
  nu.assign(np, 0.0);
  std::vector<double> dl(na), dL(na), x_minus, lambda_plus;
  auto add_terms = [&](std::size_t k, const double* y, const double* s, double* l, double* L) {
    std::fill(dl.begin(), dl.end(), 0.0);
    std::fill(dL.begin(), dL.end(), 0.0);
    terms(k, stops[k], y, s, dl.data(), dL.data());
    for (std::size_t i = 0; i < na; ++i) {
      l[i] += dl[i];
      L[i] += dL[i];
    }
  };
  double hi = t1;
  std::size_t first = group_at(hi);
  for (;;) {
    if (first < e_end) {
      const std::size_t last = e_end - 1;
      for (; k_end > 0 && stops[k_end - 1] == hi; --k_end)
        add_terms(k_end - 1, x_plus[last].data(), xdot_plus[last].data(), lambda.data(),
                  Lambda.data());
      for (std::size_t e = e_end; e-- > first;) {
        x_minus = run.before_instants[e];
        ij.apply(run.instants[e], hi, x_minus, p, true, e);
        lambda_plus = lambda;
        ij.adjoint(lambda, mu);
        ij.adjoint(Lambda, nu, 1);
        ij.second_order(lambda_plus, xdot_minus[e], vp, Lambda, nu);
      }
      e_end = first;
    }
    if (!(hi > t0)) break;
    const double lo = e_end > 0 ? std::max(t0, T[e_end - 1]) : t0;
    first = group_at(lo);
    const bool at_instant = first < e_end;
    const std::vector<double>& x_lo = at_instant ? x_plus[e_end - 1] : y0a;
    const std::vector<double>& s_lo = at_instant ? xdot_plus[e_end - 1] : s0;
    std::size_t k_first = k_end;
    while (k_first > 0 && (stops[k_first - 1] > lo || (stops[k_first - 1] == lo && !at_instant)))
      --k_first;
    std::vector<double> leg_stops(stops.begin() + static_cast<std::ptrdiff_t>(k_first),
                                  stops.begin() + static_cast<std::ptrdiff_t>(k_end));
    if (leg_stops.empty() || leg_stops.back() < hi) leg_stops.push_back(hi);
    const std::vector<double> carried = lambda, carried_dot = Lambda;
    std::vector<double> lam, mu_leg, Lam, nu_leg;
    cvodes::Stats f, bk;
    cvodes::second_order_adjoint(
        sys, settings, adjoint, lo, x_lo, s_lo, leg_stops,
        [&](std::size_t k, double, const double* y, const double* s, double* l, double* L) {
          if (k_first + k < k_end) add_terms(k_first + k, y, s, l, L);
          if (k + 1 == leg_stops.size())
            for (std::size_t i = 0; i < na; ++i) {
              l[i] += carried[i];
              L[i] += carried_dot[i];
            }
        },
        lam, mu_leg, Lam, nu_leg, f, bk);
    fwd.add_counts(f);
    fwd.checkpoints += f.checkpoints;
    bwd.add_counts(bk);
    lambda = lam;
    Lambda = Lam;
    for (std::size_t j = 0; j < np; ++j) {
      mu[j] += mu_leg[j];
      nu[j] += nu_leg[j];
    }
    k_end = k_first;
    hi = lo;
  }
}

}  // namespace

HessianVectorResult cvodes_hessian_vector(const System& system, std::span<const double> y0,
                                          std::span<const double> p, double t0, double t1,
                                          const HessianDirection& v, const CvodesAdjoint& adjoint,
                                          IntegratorOptions options) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = system.n_model_states(), na = system.n_states();
  const std::size_t np = system.n_parameters();
  const bool running = system.has_running();
  COSTATE_CHECK_EQ(y0.size(), n, "hessian_vector (CVODES): initial state and System disagree");
  COSTATE_CHECK_EQ(p.size(), np, "hessian_vector (CVODES): parameters and System disagree");
  require(supports(SensitivityKind::CvodesAdjoint, options.method, 2), "ode::hessian_vector");
  if (system.has_events())
    require(supports_events(SensitivityKind::CvodesAdjoint, options.method, 2),
            "ode::hessian_vector");
  COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
  COSTATE_CHECK(system.model().second_order(),
                "hessian_vector (CVODES): the System needs make_second_order_system");

  // 1. Stops and the augmented state, exactly as cvodes_gradient.
  const std::vector<double> obs =
      system.has_observations() ? system.observation_times() : std::vector<double>{};
  validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);
  const std::size_t K = stops.size();
  if (running) {
    if (options.atol_per_state.empty()) options.atol_per_state.assign(n, options.atol);
    options.atol_per_state.push_back(options.atol);
  }
  options.validate(na);
  std::vector<double> y0a(na, 0.0), s0(na, 0.0);
  std::copy(y0.begin(), y0.end(), y0a.begin());
  if (!v.initial_state.empty())
    std::copy(v.initial_state.begin(), v.initial_state.end(), s0.begin());
  const std::span<const double> vp(v.parameters);
  // First order (rhs, Jacobian, f_yᵀλ / f_pᵀλ) from the compiled System, as
  // cvodes_gradient; the dense linear solver (the 2n-state second backward
  // problem assembles its own block Jacobian from sys.jacobian).
  cvodes::Binding binding(system, p, options.method, CvodesLinearSolver::Dense, t0, y0a);
  cvodes::System& sys = binding.system();
  const cvodes::Settings settings = cvodes::settings_from(options, na);

  // 2. Second-order callbacks on p + εv_p.
  using Dual1 = detail::SystemModel::Dual1;
  std::vector<Dual1> pd(np), yd(na), fd(na);
  for (std::size_t j = 0; j < np; ++j) pd[j] = Dual1(p[j], {vp[j]});
  sys.tangent_rhs = [&](double t, const double* y, const double* s, double* sdot) {
    for (std::size_t i = 0; i < na; ++i) yd[i] = Dual1(y[i], {s[i]});
    system.model().rhs(t, std::span<const Dual1>(yd), std::span<const Dual1>(pd),
                       std::span<Dual1>(fd));
    for (std::size_t i = 0; i < na; ++i) sdot[i] = fd[i].tangent(0);
  };
  SecondOrderLinearization lin(system);
  std::int64_t second_order_vjps = 0;
  std::vector<double> xbar(na), xbar_dot(na), pbar(np), pbar_dot(np);
  // CVODES evaluates the backward right-hand side and the quadrature at the
  // same (t, y, s, λ, Λ) in turn: one linearization serves both.
  std::vector<double> key(4 * na + 1, 0.0);
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
      lin.at(t, std::span<const double>(y, na), std::span<const double>(s, na), p, vp);
      std::fill(pbar.begin(), pbar.end(), 0.0);
      std::fill(pbar_dot.begin(), pbar_dot.end(), 0.0);
      lin.vjp(std::span<const double>(lam, na), std::span<const double>(Lam, na), xbar, xbar_dot,
              pbar, pbar_dot);
      ++second_order_vjps;
      cached = true;
    }
    std::copy(xbar.begin(), xbar.end(), fy_w);
    std::copy(xbar_dot.begin(), xbar_dot.end(), fy_w + na);
    std::copy(pbar.begin(), pbar.end(), fp_w);
    std::copy(pbar_dot.begin(), pbar_dot.end(), fp_w + np);
  };

  // 3. The objective's terms at stop k on (y + εs, p + εv_p): the values and
  //    ε-parts of J, of ∂/∂y (λ and Λ jumps) and of ∂/∂p (into g_p, h_p).
  std::vector<double> gy(n), gy_dot(n), gp(np, 0.0), gp_dot(np, 0.0);
  double J = 0.0, J_dot = 0.0;
  auto jump = [&](std::size_t k, double, const double* y, const double* s, double* dl,
                  double* dL) {
    std::fill(gy.begin(), gy.end(), 0.0);
    std::fill(gy_dot.begin(), gy_dot.end(), 0.0);
    const std::span<const double> ys(y, n), ss(s, n);
    double value_dot = 0.0;
    if (k < obs.size()) {
      J += system.observation_hessian_vector(k, ys, ss, p, vp, gy, gy_dot, gp, gp_dot, value_dot);
      J_dot += value_dot;
    }
    if (k + 1 == K) {
      if (system.has_terminal()) {
        J += system.terminal_hessian_vector(ys, ss, p, vp, gy, gy_dot, gp, gp_dot, value_dot);
        J_dot += value_dot;
      }
      if (running) {
        J += y[n];
        J_dot += s[n];
        dl[n] = 1.0;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      dl[i] = gy[i];
      dL[i] = gy_dot[i];
    }
  };

  std::vector<double> lambda, mu, Lambda, nu;
  cvodes::Stats fwd, bwd;
  std::int64_t events = 0;
  if (system.has_events())
    across_instants(system, sys, settings, adjoint, options, p, vp, t0, t1, y0a, s0, stops, jump,
                    lambda, mu, Lambda, nu, fwd, bwd, events);
  else
    cvodes::second_order_adjoint(sys, settings, adjoint, t0, y0a, s0, stops, jump, lambda, mu,
                                 Lambda, nu, fwd, bwd);

  HessianVectorResult r;
  r.objective = J;
  r.directional_derivative = J_dot;
  r.gradient_wrt_parameters.resize(np);
  r.hv_wrt_parameters.resize(np);
  for (std::size_t j = 0; j < np; ++j) {
    r.gradient_wrt_parameters[j] = mu[j] + gp[j];
    r.hv_wrt_parameters[j] = nu[j] + gp_dot[j];
  }
  const auto nn = static_cast<std::ptrdiff_t>(n);
  r.gradient_wrt_initial_state.assign(lambda.begin(), lambda.begin() + nn);
  r.hv_wrt_initial_state.assign(Lambda.begin(), Lambda.begin() + nn);
  r.method = "cvodes_second_order_adjoint(steps " + adjoint.steps_label(na, 2) + ", " +
             to_string(adjoint.interpolation) + ")";
  r.checkpoints.steps = fwd.steps;
  r.checkpoints.forward_steps = fwd.steps;
  r.checkpoints.peak_snapshots = fwd.checkpoints;
  r.rhs_evaluations = fwd.rhs_evaluations + bwd.rhs_evaluations;
  r.vjp_evaluations = binding.vjp_evaluations() + second_order_vjps;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace costate::ode::detail
