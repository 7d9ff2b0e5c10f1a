#pragma once
// The Lotka–Volterra fixture of the ODE derivative tests: the problem and an
// objective with every kind of term (observations with a missing value, a
// running cost and a terminal), each depending on the parameters so that the
// objective's own second derivatives in p and the mixed ones enter.
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "costate/ode/models.hpp"
#include "costate/ode/objective.hpp"
#include "costate/ode/problem.hpp"

namespace costate::test {

/// y' = (α x − β x y, δ x y − γ y), p = (α, β, γ, δ) = (1.5, 1, 3, 1), y0 = (1, 1), [0, 5].
inline ode::Problem<ode::LotkaVolterra> lv_problem() {
  return {ode::LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 5.0}};
}

/// J = Σ_k [½ |y(t_k) − d_k|² + 0.01 β x y] + ∫ 0.1 x² (1 + 0.1 t) + 0.05 α² y dt
///     + ½ (x(5) − 1)² + 0.3 γ y(5)²,  t_k = 0.5 k (k = 1 … 10), d_3's y missing.
struct LvObjective {
  ode::LeastSquares ls;
  std::vector<double> observation_times() const { return ls.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return T(ls.observation<T>(k, y, p) + 0.01 * p[1] * y[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(0.1 * y[0] * y[0] * (1.0 + 0.1 * t) + 0.05 * p[0] * p[0] * y[1]);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * (y[0] - 1.0) * (y[0] - 1.0) + 0.3 * p[2] * y[1] * y[1]);
  }
};

inline LvObjective lv_objective() {
  LvObjective o;
  o.ls.n_states = 2;
  for (int k = 1; k <= 10; ++k) {
    const double t = 0.5 * k;
    o.ls.times.push_back(t);
    o.ls.data.push_back(1.0 + 0.5 * std::sin(1.3 * t));
    o.ls.data.push_back(k == 3 ? NAN : 0.8 + 0.4 * std::cos(0.9 * t));
  }
  return o;
}

}  // namespace costate::test
