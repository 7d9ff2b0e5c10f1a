#pragma once
/// \file
/// Explicit (forward) Euler:  y_{n+1} = y_n + h f(t_n, y_n).  Order 1, one
/// right-hand-side evaluation per step, fixed step.
///
/// Written on costate::Vector (any execution space, serial or distributed):
/// `Rhs` is a callable `void(double t, const V& y, const V& dydt)`.

#include "costate/tensor/vector.hpp"

namespace costate::ode {

template <class V>
class ExplicitEuler {
 public:
  static constexpr int kOrder = 1;
  static constexpr int kStages = 1;

  /// Allocates workspace shaped like `like`.
  explicit ExplicitEuler(const V& like) : k1_(like.clone()) {}

  /// y_new = y + h f(t, y). `y_new` must not alias `y`.
  template <class Rhs>
  void step(Rhs& f, double t, double h, const V& y, const V& y_new) {
    f(t, y, k1_);
    linear_sum(y_new, 1.0, y, h, k1_);
  }

 private:
  V k1_;
};

}  // namespace costate::ode
