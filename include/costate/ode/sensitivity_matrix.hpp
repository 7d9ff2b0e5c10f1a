#pragma once
/// \file
/// Weighted observations of an ODE solution and the sensitivity matrix of
/// their residuals — what Gauss–Newton steps, covariances and
/// identifiability checks of a calibration need.
///
/// Residuals, one per observed value (state i at observation time t_k, not
/// missing, weight w_ki > 0):
///     r_ki = √w_ki (y_i(t_k) − d_ki),     ½ Σ r² = Σ_k ℓ_k   (the objective),
/// and their sensitivity matrix, by forward (tangent) sensitivities of the
/// discrete solution along the same step sequence the gradient used:
///     S = ∂r/∂(p, y0) = √w_ki · [∂y_i(t_k)/∂p, ∂y_i(t_k)/∂y0].
/// S is the forward tangent sweep of the stepper's compiled scheme
/// (scheme.hpp: explicit RK, θ, sdirk3, bdf — the same schemes ode::Forward
/// and the discrete adjoint run) with the state and its tangents taken at
/// the observation steps (observed_tangents), so S is the exact Jacobian of
/// the discrete residuals: Sᵀ r equals the discrete adjoint's gradient to
/// round-off, for every stepper.
///
/// Contract: `steps` is the step plan of the gradient (ode::GradientResult::
/// steps of the same problem and objective, same `options`: t0 … t1 with
/// every observation time among them, bdf's orders); an empty plan chooses
/// the steps as ode::gradient would (plan_steps). The CVODES integrators
/// (cvodes_bdf, cvodes_adams) take their own forward sensitivities instead
/// (CVodeSensInit, np + n directions, landing on each observation time;
/// `steps` unused): S is
/// then the Jacobian of the continuous residuals to CVODES' tolerances, as
/// the CVODES gradient is that of the continuous objective. Serial (no MPI
/// communication).

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include <algorithm>
#include <memory>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {

/// Observations with one weight per value:
///     ℓ_k = ½ Σ_i w_ki (y_i(t_k) − d_ki)²,
/// `data` and `weights` row-major (times × states); NaN data = missing.
/// An objective for ode::gradient (it has observation_times/observation).
struct WeightedObservations {
  std::vector<double> times;
  std::vector<double> data;
  std::vector<double> weights;
  std::size_t n_states = 0;

  std::vector<double> observation_times() const { return times; }

  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T>) const {
    T sum = 0.0;
    for (std::size_t i = 0; i < n_states; ++i) {
      const double d = data[k * n_states + i];
      const double w = weights[k * n_states + i];
      if (std::isnan(d) || w == 0.0) continue;
      T r = y[i] - d;
      sum = T(sum + 0.5 * w * r * r);
    }
    return sum;
  }

  /// The number of residuals (observed values with positive weight).
  std::size_t n_residuals() const {
    std::size_t m = 0;
    for (std::size_t c = 0; c < data.size(); ++c) m += (!std::isnan(data[c]) && weights[c] > 0.0);
    return m;
  }

  void validate() const {
    COSTATE_CHECK(n_states > 0 && data.size() == times.size() * n_states &&
                      weights.size() == data.size(),
                  "WeightedObservations: data and weights must hold one value per (time, state)");
    for (double w : weights) COSTATE_CHECK(w >= 0.0 && std::isfinite(w), "WeightedObservations: weight " << w << " is not a finite number >= 0");
  }
};

/// Residuals r (m), their sensitivity matrix S = ∂r/∂(p, y0) (m × (np + n),
/// row-major; parameters first), and where each residual comes from.
struct ResidualSensitivities {
  std::vector<double> residuals;
  std::vector<double> jacobian;  ///< m × (np + n), row-major
  std::size_t n_columns = 0;
  std::vector<std::size_t> time_index;   ///< k of each residual
  std::vector<std::size_t> state_index;  ///< i of each residual
  std::vector<double> predicted;         ///< y_i(t_k) of each residual
  double at(std::size_t row, std::size_t col) const { return jacobian[row * n_columns + col]; }
};

namespace detail {
inline ResidualSensitivities residuals_of(const WeightedObservations& obs, std::size_t n,
                                          std::size_t m, const std::vector<double>& states,
                                          const std::vector<double>& dstates);
}  // namespace detail

/// See the file comment. Throws costate::Error when the plan does not fit
/// (native steppers: StepPlan::check_replay, an observation time not among
/// its times), an implicit step fails or CVODES' integration fails.
template <Model M>
ResidualSensitivities sensitivity_matrix(const Problem<M>& problem,
                                         const WeightedObservations& obs,
                                         const IntegratorOptions& options,
                                         const StepPlan& steps) {
  obs.validate();
  const std::size_t n = problem.n_states(), np = problem.p.size(), m = np + n;
  COSTATE_CHECK_EQ(obs.n_states, n, "sensitivity_matrix: observations and problem disagree on the number of states");
  if (is_cvodes(options.method)) {
    // CVODES: its forward sensitivities at the observation times (compiled,
    // src/ode/cvodes_gradient.cpp); the step plan is not used.
    const System system = make_system(problem.model, obs, n, np,
                                      {.dense_max = cvodes::kBindingDenseMax});
    const detail::CvodesObserved o = detail::cvodes_observed_sensitivities(
        system, problem.y0, problem.p, problem.t0(), obs.times, options);
    return detail::residuals_of(obs, n, m, o.states, o.tangents);
  }
  // states(k, i) and dstates(k, i, d) at the observation times: the
  // stepper's compiled scheme on the System of the model (x = y: the
  // observations have no running cost) on the plan, its tangents read at
  // the steps landing on the observation times.
  const System system = make_system(problem.model, obs, n, np);
  require(supports_dae(SensitivityKind::Forward, options.method, 1, system.n_algebraic()),
          "sensitivity_matrix");
  const std::span<const double> p(problem.p);
  const ReplayedScheme run(system, problem.y0, p, problem.t0(), problem.t1(), options, steps,
                           "sensitivity_matrix");
  const ObservedTangents tangents = observed_tangents(system, run.scheme(), run.steps(), run.x0(), p);
  return detail::residuals_of(obs, n, m, tangents.states, tangents.tangents);
}

namespace detail {
/// The residuals and their rows of S from the states (K × n) and their
/// tangents (K × n × m) at the observation times.
inline ResidualSensitivities residuals_of(const WeightedObservations& obs, std::size_t n,
                                          std::size_t m, const std::vector<double>& states,
                                          const std::vector<double>& dstates) {
  ResidualSensitivities out;
  out.n_columns = m;
  for (std::size_t k = 0; k < obs.times.size(); ++k)
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = k * n + i;
      if (std::isnan(obs.data[c]) || obs.weights[c] == 0.0) continue;
      const double sw = std::sqrt(obs.weights[c]);
      out.residuals.push_back(sw * (states[c] - obs.data[c]));
      out.predicted.push_back(states[c]);
      out.time_index.push_back(k);
      out.state_index.push_back(i);
      for (std::size_t d = 0; d < m; ++d) out.jacobian.push_back(sw * dstates[c * m + d]);
    }
  return out;
}
}  // namespace detail

}  // namespace costate::ode
