#pragma once
/// \file
/// Objectives of an ODE solution:
///     J = g(y(t1), p) + ∫_{t0}^{t1} q(t, y, p) dt + Σ_k ℓ_k(y(t_k), p)
/// Each term is optional; an objective is any type with the members of the
/// terms it has, templated on the scalar type like the model:
///
///     struct MyObjective {
///       template <class T> T terminal(std::span<const T> y, std::span<const T> p) const;
///       template <class T> T running(double t, std::span<const T> y, std::span<const T> p) const;
///       std::vector<double> observation_times() const;            // ascending, in [t0, t1]
///       template <class T> T observation(std::size_t k, std::span<const T> y,
///                                        std::span<const T> p) const;
///     };
///
/// The running cost is integrated as an extra state z' = q by the same
/// method (so its gradient is exact for the discrete solution too); steppers
/// land exactly on the observation times.

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::ode {

template <class O>
concept HasTerminal = requires(const O& o, std::span<const double> y, std::span<const double> p) {
  { o.template terminal<double>(y, p) };
};
template <class O>
concept HasRunning =
    requires(const O& o, double t, std::span<const double> y, std::span<const double> p) {
      { o.template running<double>(t, y, p) };
    };
template <class O>
concept HasObservations =
    requires(const O& o, std::size_t k, std::span<const double> y, std::span<const double> p) {
      { o.observation_times() };
      { o.template observation<double>(k, y, p) };
    };

/// Weighted least squares against observed data:
///     ℓ_k = ½ Σ_i w_i (y_i(t_k) − d_{k,i})²,
/// with `data` row-major (times × states) and NaN marking a missing value.
/// Empty `weights` means 1 for every state.
struct LeastSquares {
  std::vector<double> times;
  std::vector<double> data;
  std::size_t n_states = 0;
  std::vector<double> weights{};

  std::vector<double> observation_times() const { return times; }

  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T>) const {
    T sum = 0.0;
    for (std::size_t i = 0; i < n_states; ++i) {
      const double d = data[k * n_states + i];
      if (std::isnan(d)) continue;
      const double w = weights.empty() ? 1.0 : weights[i];
      T r = y[i] - d;
      sum = T(sum + 0.5 * w * r * r);
    }
    return sum;
  }

  void validate() const {
    COSTATE_CHECK_EQ(data.size(), times.size() * n_states,
                     "LeastSquares: data must hold one value per (time, state)");
    COSTATE_CHECK(weights.empty() || weights.size() == n_states,
                  "LeastSquares: weights must be empty or one per state");
  }
};

}  // namespace costate::ode
