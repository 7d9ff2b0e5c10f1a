#pragma once
// Private to src/ode/: the objective's pieces that the SUNDIALS backends'
// gradients share (cvodes_gradient.cpp, idas_system.cpp): the stops of a
// pass (observation times, then t1), the running cost's tolerance, and the
// terms with their gradients at each stop, with the forward-sensitivity
// chain rule dJ/d(direction) = Σ_stops (∂ℓ/∂y · S + ∂ℓ/∂p).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "costate/ode/cvodes.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode::detail {

/// The stops of a pass: the observation times, then t1.
inline std::vector<double> stops_of(const std::vector<double>& obs, double t1) {
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);
  return stops;
}

/// The running cost's z is part of J: in the error test like any state,
/// with the scalar integrator.atol as its absolute tolerance.
inline void add_running_tolerance(IntegratorOptions& options, std::size_t n) {
  if (options.atol_per_state.empty()) options.atol_per_state.assign(n, options.atol);
  options.atol_per_state.push_back(options.atol);
}

/// J's terms at the stops of one pass: at(k, y) adds the terms of stop k
/// (observation k, and at the last stop the terminal term and z(t1)) to J
/// and leaves their gradients in gy (n) and gp (np).
struct StopTerms {
  const System& system;
  std::span<const double> p;
  std::size_t n_observations = 0, n_stops = 0;
  std::vector<double> gy, gp;
  double J = 0.0;

  StopTerms(const System& s, std::span<const double> pp, std::size_t observations,
            std::size_t stops)
      : system(s), p(pp), n_observations(observations), n_stops(stops),
        gy(s.n_model_states()), gp(s.n_parameters()) {}

  void at(std::size_t k, const double* y) {
    const std::size_t n = system.n_model_states();
    std::fill(gy.begin(), gy.end(), 0.0);
    std::fill(gp.begin(), gp.end(), 0.0);
    const std::span<const double> ys(y, n);
    if (k < n_observations) J += system.observation_gradient(k, ys, p, gy, gp);
    if (k + 1 == n_stops) {
      J += system.terminal_gradient(ys, p, gy, gp);
      if (system.has_running()) J += y[n];
    }
  }

  /// at(k, y), then dJ[d] += ∂ℓ/∂y · S(:, d) (+ S_z at t1 with a running
  /// cost) + ∂ℓ/∂p_d (d < np): S column-major n_x × ns, direction d < np
  /// parameter d.
  void add_forward(std::size_t k, const double* y, const double* S, std::size_t ns,
                   std::vector<double>& dJ) {
    at(k, y);
    const std::size_t n = system.n_model_states(), na = system.n_states(),
                      np = system.n_parameters();
    for (std::size_t d = 0; d < ns; ++d) {
      double s = d < np ? gp[d] : 0.0;
      for (std::size_t i = 0; i < n; ++i) s += gy[i] * S[d * na + i];
      if (system.has_running() && k + 1 == n_stops) s += S[d * na + n];
      dJ[d] += s;
    }
  }
};

/// The counters of an event run (the backend's runs between the
/// instants), as one SUNDIALS run's.
inline cvodes::Stats stats_of(const Summary& s) {
  cvodes::Stats st;
  st.steps = s.steps;
  st.error_test_failures = s.rejected_steps;
  st.rhs_evaluations = s.rhs_evaluations;
  st.jacobian_evaluations = s.jacobian_evaluations;
  st.nonlinear_iterations = s.newton_iterations;
  st.final_time = s.final_time;
  st.success = s.success();
  st.message = s.message;
  return st;
}

/// One stretch [lo, hi] of a SUNDIALS adjoint across event instants: the
/// backend's adjoint from x⁺ at lo (x_lo, n_x) over `leg_stops` (ascending,
/// the last = hi), where `contribute(k, y, dl)` adds leg stop k's λ
/// increment (n_x entries: its terms' ∂/∂x, which may read algebraic states,
/// and at the last stop the λ carried from the later stretch); returns
/// dJ/dx(lo) on the differential states (algebraic entries 0) in `lambda`,
/// the stretch's μ = ∫ F_pᵀλ dt in `mu` and the counters.
using StretchAdjoint = std::function<void(
    double lo, std::vector<double>& x_lo, const std::vector<double>& leg_stops,
    const std::function<void(std::size_t k, const double* y, double* dl)>& contribute,
    std::vector<double>& lambda, std::vector<double>& mu, cvodes::Stats& forward,
    cvodes::Stats& backward)>;

/// The SUNDIALS adjoints (CVODES', IDAS') across the instants of an event
/// model (cvodes_gradient.cpp): the event run (run_with_events, the
/// backend's root finding) locates the instants, then the stretches between
/// them are taken last first by `stretch`, λ carried through each instant's
/// transposed jump (InstantJump::adjoint, the native adjoints' jump; for a
/// DAE it includes the consistent re-solve's implicit derivative).
/// `mu_terms` receives the terms' parameter parts; `fwd` the event run's
/// counters plus the stretches'.
void adjoint_across_instants(const System& system, const IntegratorOptions& options,
                             std::span<const double> p, double t0, double t1,
                             const std::vector<double>& y0a, const std::vector<double>& stops,
                             StopTerms& terms, std::vector<double>& mu_terms,
                             std::vector<double>& lambda, std::vector<double>& mu,
                             cvodes::Stats& fwd, cvodes::Stats& bwd, std::int64_t& events,
                             const StretchAdjoint& stretch);

}  // namespace costate::ode::detail
