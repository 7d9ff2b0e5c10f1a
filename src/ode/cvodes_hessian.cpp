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
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode::detail {

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
  r.method = "cvodes_second_order_adjoint(steps " + std::to_string(adjoint.steps) + ", " +
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
