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
/// The tangents of one explicit Runge–Kutta step are the step itself in
/// ad::Dual arithmetic (8 directions per pass, as ode::Forward), so S is the
/// exact Jacobian of the discrete residuals: Sᵀ r equals the discrete
/// adjoint's gradient to round-off.
///
/// Contract: `step_times` are t0 … t1 with every observation time among them
/// (ode::GradientResult::step_times of the same problem and objective).
/// Limitation: the implicit θ-methods (backward Euler, Crank–Nicolson) get S
/// by central differences of the replayed discrete solution (relative step
/// 1e-6, about 8 correct digits) — enough for covariances, not for tests of
/// derivatives. Serial (no MPI communication).

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/steppers/theta.hpp"
#include "costate/tensor/vector.hpp"

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

/// Replays the implicit θ-method along `times` and returns the state at every
/// observation time (observation k → row k).
template <Model M>
std::vector<double> replay_theta(const Problem<M>& problem, const IntegratorOptions& options,
                                 std::span<const double> times, std::span<const double> obs) {
  const std::size_t n = problem.n_states();
  ThetaStepper<M> theta(problem.model, problem.p, n, theta_of(options.method), options.newton_tol,
                        options.newton_max_iterations);
  std::vector<double> y(problem.y0), next(n), out(obs.size() * n);
  std::size_t k = 0;
  auto record = [&](double t) {
    while (k < obs.size() && obs[k] == t) {
      std::copy(y.begin(), y.end(), out.begin() + static_cast<std::ptrdiff_t>(k * n));
      ++k;
    }
  };
  record(times[0]);
  for (std::size_t s = 0; s + 1 < times.size(); ++s) {
    std::string why;
    COSTATE_CHECK(theta.step(times[s], times[s + 1] - times[s], std::span<const double>(y),
                             std::span<double>(next), &why),
                  "sensitivity_matrix: implicit step at t = " << times[s] << " failed: " << why);
    y = next;
    record(times[s + 1]);
  }
  return out;
}

}  // namespace detail

/// See the file comment. Throws costate::Error when an observation time is
/// not among `step_times` or an implicit step fails.
template <Model M>
ResidualSensitivities sensitivity_matrix(const Problem<M>& problem,
                                         const WeightedObservations& obs,
                                         const IntegratorOptions& options,
                                         std::span<const double> step_times) {
  obs.validate();
  const std::size_t n = problem.n_states(), np = problem.p.size(), m = np + n;
  COSTATE_CHECK_EQ(obs.n_states, n, "sensitivity_matrix: observations and problem disagree on the number of states");
  COSTATE_CHECK(step_times.size() >= 2, "sensitivity_matrix: need the step times t0 … t1");
  // Observation k is reached after step obs_at[k].
  std::vector<std::size_t> obs_step(obs.times.size());
  for (std::size_t k = 0, s = 0; k < obs.times.size(); ++k) {
    while (s < step_times.size() && step_times[s] < obs.times[k]) ++s;
    COSTATE_CHECK(s < step_times.size() && step_times[s] == obs.times[k],
                  "sensitivity_matrix: no step lands on observation time " << obs.times[k]);
    obs_step[k] = s;
  }
  // states(k, i) and dstates(k, i, d) at the observation times.
  std::vector<double> states(obs.times.size() * n), dstates(obs.times.size() * n * m, 0.0);
  if (is_implicit(options.method)) {
    states = detail::replay_theta(problem, options, step_times, obs.times);
    // Central differences, relative step 1e-6 (balances O(h²) truncation and
    // O(ε/h) round-off for these smooth maps).
    for (std::size_t d = 0; d < m; ++d) {
      Problem<M> plus = problem, minus = problem;
      double& xp = d < np ? plus.p[d] : plus.y0[d - np];
      double& xm = d < np ? minus.p[d] : minus.y0[d - np];
      const double h = 1e-6 * std::max(1.0, std::abs(xp));
      xp += h;
      xm -= h;
      const auto yp = detail::replay_theta(plus, options, step_times, obs.times);
      const auto ym = detail::replay_theta(minus, options, step_times, obs.times);
      for (std::size_t c = 0; c < states.size(); ++c) dstates[c * m + d] = (yp[c] - ym[c]) / (2 * h);
    }
  } else {
    constexpr int kChunk = 8;
    using D = ad::Dual<double, kChunk>;
    using DV = Vector<D, Kokkos::DefaultHostExecutionSpace>;
    const ButcherTableau tab = explicit_tableau(options.method);
    for (std::size_t first = 0; first < m; first += kChunk) {
      std::vector<D> pd(np), yd(n);
      for (std::size_t j = 0; j < np; ++j) {
        pd[j] = D(problem.p[j]);
        if (j >= first && j < first + kChunk) pd[j].tangent(static_cast<int>(j - first)) = 1.0;
      }
      for (std::size_t i = 0; i < n; ++i) {
        yd[i] = D(problem.y0[i]);
        const std::size_t dir = np + i;
        if (dir >= first && dir < first + kChunk) yd[i].tangent(static_cast<int>(dir - first)) = 1.0;
      }
      DV yv = DV::from(std::span<const D>(yd));
      DV next = yv.clone();
      ExplicitRKStep<DV> rk(tab, yv);
      const std::span<const D> pds(pd);
      auto rhs = [&](double t, const DV& yy, const DV& dydt) {
        problem.model.template rhs<D>(t, std::span<const D>(yy.data(), n), pds,
                                      std::span<D>(dydt.data(), n));
      };
      std::size_t k = 0;
      auto record = [&](std::size_t s) {
        for (; k < obs_step.size() && obs_step[k] == s; ++k)
          for (std::size_t i = 0; i < n; ++i) {
            states[k * n + i] = ad::primal(yv[i]);
            for (std::size_t d = first; d < std::min(m, first + kChunk); ++d)
              dstates[(k * n + i) * m + d] = yv[i].tangent(static_cast<int>(d - first));
          }
      };
      record(0);
      for (std::size_t s = 0; s + 1 < step_times.size(); ++s) {
        rk.step(rhs, step_times[s], step_times[s + 1] - step_times[s], yv, next);
        deep_copy(yv, next);
        record(s + 1);
      }
    }
  }
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

}  // namespace costate::ode
