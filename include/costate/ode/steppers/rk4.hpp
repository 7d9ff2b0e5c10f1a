#pragma once
/// \file
/// Classical fourth-order Runge–Kutta, fixed step:
///   k1 = f(t, y),              k2 = f(t + h/2, y + h/2 k1),
///   k3 = f(t + h/2, y + h/2 k2), k4 = f(t + h, y + h k3),
///   y_{n+1} = y_n + h/6 (k1 + 2 k2 + 2 k3 + k4).
/// Order 4, four right-hand-side evaluations per step.
///
/// `Rhs` is a callable `void(double t, const V& y, const V& dydt)`.

#include <array>

#include "costate/tensor/vector.hpp"

namespace costate::ode {

template <class V>
class RK4 {
 public:
  static constexpr int kOrder = 4;
  static constexpr int kStages = 4;

  explicit RK4(const V& like)
      : k1_(like.clone()), k2_(like.clone()), k3_(like.clone()), k4_(like.clone()),
        stage_(like.clone()) {}

  /// y_new = one RK4 step from (t, y). `y_new` must not alias `y`.
  template <class Rhs>
  void step(Rhs& f, double t, double h, const V& y, const V& y_new) {
    f(t, y, k1_);
    linear_sum(stage_, 1.0, y, 0.5 * h, k1_);
    f(t + 0.5 * h, stage_, k2_);
    linear_sum(stage_, 1.0, y, 0.5 * h, k2_);
    f(t + 0.5 * h, stage_, k3_);
    linear_sum(stage_, 1.0, y, h, k3_);
    f(t + h, stage_, k4_);
    // h · b_j as the scheme's replay forms them (h · (1/6), not h / 6), so
    // that a gradient's forward pass recomputes these steps bit for bit.
    const std::array<double, 5> c{1.0, h * (1.0 / 6), h * (1.0 / 3), h * (1.0 / 3), h * (1.0 / 6)};
    const std::array<const V*, 5> x{&y, &k1_, &k2_, &k3_, &k4_};
    linear_combination(y_new, std::span<const double>(c), std::span<const V* const>(x));
  }

 private:
  V k1_, k2_, k3_, k4_, stage_;
};

}  // namespace costate::ode
