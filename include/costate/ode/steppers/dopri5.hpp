#pragma once
/// \file
/// Dormand–Prince 5(4): explicit Runge–Kutta with 7 stages (6 new right-hand
/// sides per step thanks to FSAL, "first same as last"), a 5th-order solution,
/// an embedded 4th-order error estimate and a 4th-order continuous extension
/// (dense output) — the method of Hairer, Nørsett & Wanner, Solving ODEs I,
/// §II.5 and §II.6, whose coefficients are used here.
///
/// The error of a step is the weighted RMS norm
///   err = sqrt( (1/N) Σ_i ( e_i / (atol_i + rtol max(|y_i|, |ŷ_i|)) )² ),
/// e = h Σ_j (b_j − b̂_j) k_j; a step is accepted when err ≤ 1.
///
/// `Rhs` is a callable `void(double t, const V& y, const V& dydt)`.

#include <algorithm>
#include <array>
#include <cmath>

#include "costate/tensor/vector.hpp"

namespace costate::ode {

namespace dopri5_tableau {
inline constexpr double c2 = 1.0 / 5, c3 = 3.0 / 10, c4 = 4.0 / 5, c5 = 8.0 / 9;
inline constexpr double a21 = 1.0 / 5;
inline constexpr double a31 = 3.0 / 40, a32 = 9.0 / 40;
inline constexpr double a41 = 44.0 / 45, a42 = -56.0 / 15, a43 = 32.0 / 9;
inline constexpr double a51 = 19372.0 / 6561, a52 = -25360.0 / 2187, a53 = 64448.0 / 6561,
                        a54 = -212.0 / 729;
inline constexpr double a61 = 9017.0 / 3168, a62 = -355.0 / 33, a63 = 46732.0 / 5247,
                        a64 = 49.0 / 176, a65 = -5103.0 / 18656;
// 5th-order weights (= the last stage's row, hence FSAL).
inline constexpr double b1 = 35.0 / 384, b3 = 500.0 / 1113, b4 = 125.0 / 192,
                        b5 = -2187.0 / 6784, b6 = 11.0 / 84;
// b − b̂: the error estimate's weights.
inline constexpr double e1 = 71.0 / 57600, e3 = -71.0 / 16695, e4 = 71.0 / 1920,
                        e5 = -17253.0 / 339200, e6 = 22.0 / 525, e7 = -1.0 / 40;
// Dense output (Hairer's d_i).
inline constexpr double d1 = -12715105075.0 / 11282082432, d3 = 87487479700.0 / 32700410799,
                        d4 = -10690763975.0 / 1880347072, d5 = 701980252875.0 / 199316789632,
                        d6 = -1453857185.0 / 822651844, d7 = 69997945.0 / 29380423;
}  // namespace dopri5_tableau

template <class V>
class Dopri5 {
 public:
  static constexpr int kOrder = 5;
  static constexpr int kStages = 7;

  explicit Dopri5(const V& like) {
    for (auto& k : k_) k = like.clone();
    stage_ = like.clone();
    for (auto& r : dense_) r = like.clone();
  }

  /// Evaluates k1 = f(t, y); call before the first attempt and whenever the
  /// state was changed from outside.
  template <class Rhs>
  void start(Rhs& f, double t, const V& y) {
    f(t, y, k_[0]);
  }
  /// k1 = f(t0, y0), valid after start() (used by the initial-step heuristic).
  const V& k1() const { return k_[0]; }

  /// One trial step of size h from (t, y) into y_new (must not alias y) and
  /// the error estimate into the internal error vector. Six evaluations.
  template <class Rhs>
  void attempt(Rhs& f, double t, double h, const V& y, const V& y_new) {
    using namespace dopri5_tableau;
    combine(stage_, y, h, {a21}, 1);
    f(t + c2 * h, stage_, k_[1]);
    combine(stage_, y, h, {a31, a32}, 2);
    f(t + c3 * h, stage_, k_[2]);
    combine(stage_, y, h, {a41, a42, a43}, 3);
    f(t + c4 * h, stage_, k_[3]);
    combine(stage_, y, h, {a51, a52, a53, a54}, 4);
    f(t + c5 * h, stage_, k_[4]);
    combine(stage_, y, h, {a61, a62, a63, a64, a65}, 5);
    f(t + h, stage_, k_[5]);
    combine(y_new, y, h, {b1, 0.0, b3, b4, b5, b6}, 6);
    f(t + h, y_new, k_[6]);
    h_ = h;
  }

  /// Weighted RMS norm of the last attempt's error (see the file comment),
  /// computed in one fused reduction from the stages. Collective when the
  /// vectors are distributed.
  double error_norm(const V& y, const V& y_new, double rtol, const V& atol) const {
    using namespace dopri5_tableau;
    auto k1 = costate::detail::raw(k_[0]);
    auto k3 = costate::detail::raw(k_[2]);
    auto k4 = costate::detail::raw(k_[3]);
    auto k5 = costate::detail::raw(k_[4]);
    auto k6 = costate::detail::raw(k_[5]);
    auto k7 = costate::detail::raw(k_[6]);
    auto y0 = costate::detail::raw(y);
    auto y1 = costate::detail::raw(y_new);
    auto a = costate::detail::raw(atol);
    const double h = h_;
    double local[2] = {0.0, static_cast<double>(y.size())};
    local[0] = costate::detail::sum_each(
        "costate::dopri5::error_norm", y, KOKKOS_LAMBDA(std::size_t i, double& s) {
          const double e = h * (e1 * k1(i) + e3 * k3(i) + e4 * k4(i) + e5 * k5(i) + e6 * k6(i) +
                                e7 * k7(i));
          const double a0 = double(y0(i)) < 0 ? -double(y0(i)) : double(y0(i));
          const double a1 = double(y1(i)) < 0 ? -double(y1(i)) : double(y1(i));
          const double m = a0 > a1 ? a0 : a1;
          const double r = e / (double(a(i)) + rtol * m);
          s += r * r;
        });
    global_sum(y.comm(), local, 2);
    return std::sqrt(local[0] / local[1]);
  }

  /// Hairer's stiffness estimate of the last attempt (Hairer & Wanner,
  /// Solving ODEs II, §IV.2, as in their DOPRI5): with y6 the last stage's
  /// state and y7 = y_new, both at t + h,
  ///     hλ ≈ h ‖k7 − k6‖ / ‖y7 − y6‖,
  /// an estimate of |hλ| for the dominant eigenvalue λ of ∂f/∂y; dopri5's
  /// stability region meets the negative real axis near −3.3. 0 when y7 = y6.
  /// Call after attempt() and before accept(). Collective when distributed.
  double stiffness_estimate(const V& y_new) const {
    auto k6 = costate::detail::raw(k_[5]);
    auto k7 = costate::detail::raw(k_[6]);
    auto y6 = costate::detail::raw(stage_);
    auto y7 = costate::detail::raw(y_new);
    double local[2];
    local[0] = costate::detail::sum_each(
        "costate::dopri5::stiffness_num", y_new, KOKKOS_LAMBDA(std::size_t i, double& s) {
          const double d = double(k7(i)) - double(k6(i));
          s += d * d;
        });
    local[1] = costate::detail::sum_each(
        "costate::dopri5::stiffness_den", y_new, KOKKOS_LAMBDA(std::size_t i, double& s) {
          const double d = double(y7(i)) - double(y6(i));
          s += d * d;
        });
    global_sum(y_new.comm(), local, 2);
    return local[1] > 0.0 ? std::abs(h_) * std::sqrt(local[0] / local[1]) : 0.0;
  }

  /// After an accepted step (t, y) → (t + h, y_new): builds the dense-output
  /// polynomial on [t, t + h] when `dense` (an output time lies inside the
  /// step) and makes k7 the next step's k1 (FSAL).
  void accept(double h, const V& y, const V& y_new, bool dense = true) {
    using namespace dopri5_tableau;
    if (!dense) {
      std::swap(k_[0], k_[6]);
      return;
    }
    // r0 = y, r1 = y_new − y, r2 = h k1 − r1, r3 = r1 − h k7 − r2,
    // r4 = h (d1 k1 + d3 k3 + d4 k4 + d5 k5 + d6 k6 + d7 k7).
    deep_copy(dense_[0], y);
    linear_sum(dense_[1], 1.0, y_new, -1.0, y);
    linear_sum(dense_[2], h, k_[0], -1.0, dense_[1]);
    {
      const std::array<double, 3> c{1.0, -h, -1.0};
      const std::array<const V*, 3> x{&dense_[1], &k_[6], &dense_[2]};
      linear_combination(dense_[3], std::span<const double>(c), std::span<const V* const>(x));
    }
    {
      const std::array<double, 6> c{h * d1, h * d3, h * d4, h * d5, h * d6, h * d7};
      const std::array<const V*, 6> x{&k_[0], &k_[2], &k_[3], &k_[4], &k_[5], &k_[6]};
      linear_combination(dense_[4], std::span<const double>(c), std::span<const V* const>(x));
    }
    std::swap(k_[0], k_[6]);
  }

  /// Dense output at θ = (t_out − t)/h ∈ [0, 1] of the last accepted step:
  ///   y(θ) = r0 + θ (r1 + (1−θ) (r2 + θ (r3 + (1−θ) r4))).
  void interpolate(double theta, const V& out) const {
    const double t1 = 1.0 - theta;
    const std::array<double, 5> c{1.0, theta, theta * t1, theta * t1 * theta,
                                  theta * t1 * theta * t1};
    const std::array<const V*, 5> x{&dense_[0], &dense_[1], &dense_[2], &dense_[3], &dense_[4]};
    linear_combination(out, std::span<const double>(c), std::span<const V* const>(x));
  }

 private:
  // out = y + h Σ_{j<n} a_j k_j
  void combine(const V& out, const V& y, double h, std::initializer_list<double> a, int n) {
    std::array<double, 8> c{};
    std::array<const V*, 8> x{};
    c[0] = 1.0;
    x[0] = &y;
    int j = 0;
    for (double aj : a) {
      c[1 + j] = h * aj;
      x[1 + j] = &k_[j];
      ++j;
    }
    linear_combination(out, std::span<const double>(c.data(), 1 + n),
                       std::span<const V* const>(x.data(), 1 + n));
  }

  std::array<V, 7> k_;
  V stage_;
  double h_ = 0.0;
  std::array<V, 5> dense_;
};

}  // namespace costate::ode
