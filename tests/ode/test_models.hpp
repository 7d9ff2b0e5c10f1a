#pragma once
// Models and objectives shared by several ODE test files.
#include <cstddef>
#include <span>

namespace costate::ode::test {

/// n coupled nonlinear states, one decay rate each: with n = 40 the system
/// has n + np > 64, so adjoints take their vJps from the short tape instead
/// of the dense forward-mode Jacobian.
struct Chain {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t n = y.size();
    for (std::size_t i = 0; i < n; ++i)
      dydt[i] = -p[i] * y[i] + 0.5 * y[(i + 1) % n] * y[(i + 1) % n] / (1.0 + y[i] * y[i]);
  }
};

/// J = Σ y_i(T)².
struct SumOfSquares {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + v * v);
    return s;
  }
};

}  // namespace costate::ode::test
