#pragma once
/// \file
/// ad::SecondOrderDual<K> — the numbers of ad::Dual<ad::Dual<double, 1>, K>
/// stored by component: a value v + ε v̇ and K lanes t_l + ε ṫ_l,
///     x = (v + ε v̇) + Σ_l (t_l + ε ṫ_l) e_l,   ε² = 0,  e_l e_m = 0,
/// i.e. f, its directional derivative along ε, K columns of its Jacobian
/// and their ε-parts — what the second-order dense linearization
/// (ode::SecondOrderLinearization) evaluates a model on.
///
/// Why a second type: Dual<Dual<double, 1>, K> keeps each lane's (ṫ_l, t_l)
/// together, so its products, vectorised across lanes, spend most of their
/// instructions gathering the lanes' halves (Lotka–Volterra's right-hand
/// side on 6 lanes: 696 instructions, baseline x86-64). Here the t_l and
/// the ṫ_l are each contiguous: the same product is 448.
///
/// Bits: every result is bit for bit that of Dual<Dual<double, 1>, K> on the
/// same numbers. + − × (two SecondOrderDuals, or one and an arithmetic
/// number), unary −, ÷ by a number and the compound assignments are
/// written out here with the nested type's operations in its order (each
/// product and sum as Dual<double, 1>'s and Dual<T, K>'s rules form it);
/// every other operation (÷ of two SecondOrderDuals, a number ÷ one, and the
/// elementary functions of dual.hpp) converts to Dual<Dual<double, 1>, K>,
/// applies that type's function and converts back — exact, at the cost of
/// the copies. tests/ad/second_order_dual_test.cpp checks each against the
/// nested type bit for bit.
///
/// Comparisons compare the values v (as the nested type's do). Host code
/// only (no Kokkos device annotations).

#include <type_traits>

#include "costate/ad/dual.hpp"

namespace costate::ad {

template <int K>
class SecondOrderDual {
  static_assert(K >= 1, "SecondOrderDual<K> needs at least one lane");

 public:
  using Nested = Dual<Dual<double, 1>, K>;
  static constexpr int lanes = K;

  /// Zero.
  constexpr SecondOrderDual() : t_(), t_dot_(), v_(0.0), v_dot_(0.0) {}
  /// A constant (any arithmetic type): value c, every other part 0.
  template <detail::fwd::Arithmetic A>
  constexpr SecondOrderDual(A c) : t_(), t_dot_(), v_(static_cast<double>(c)), v_dot_(0.0) {}
  /// The same number as a Dual<Dual<double, 1>, K> (exact both ways).
  explicit constexpr SecondOrderDual(const Nested& x)
      : v_(x.value().value()), v_dot_(x.value().tangent(0)) {
    for (int l = 0; l < K; ++l) {
      t_[l] = x.tangent(l).value();
      t_dot_[l] = x.tangent(l).tangent(0);
    }
  }
  constexpr Nested nested() const {
    Nested x(Dual<double, 1>(v_, {v_dot_}));
    for (int l = 0; l < K; ++l) x.tangent(l) = Dual<double, 1>(t_[l], {t_dot_[l]});
    return x;
  }

  /// v, v̇, t_l, ṫ_l (the nested type's value().value(), value().tangent(0),
  /// tangent(l).value(), tangent(l).tangent(0)).
  constexpr double value() const { return v_; }
  constexpr double& value() { return v_; }
  constexpr double value_dot() const { return v_dot_; }
  constexpr double& value_dot() { return v_dot_; }
  constexpr const double* lanes_value() const { return t_; }
  constexpr double* lanes_value() { return t_; }
  constexpr const double* lanes_dot() const { return t_dot_; }
  constexpr double* lanes_dot() { return t_dot_; }

  constexpr SecondOrderDual& operator+=(const SecondOrderDual& b) {
    for (int l = 0; l < K; ++l) {
      t_[l] += b.t_[l];
      t_dot_[l] += b.t_dot_[l];
    }
    v_ += b.v_;
    v_dot_ += b.v_dot_;
    return *this;
  }
  constexpr SecondOrderDual& operator-=(const SecondOrderDual& b) {
    for (int l = 0; l < K; ++l) {
      t_[l] -= b.t_[l];
      t_dot_[l] -= b.t_dot_[l];
    }
    v_ -= b.v_;
    v_dot_ -= b.v_dot_;
    return *this;
  }
  constexpr SecondOrderDual& operator*=(const SecondOrderDual& b) { return *this = *this * b; }
  SecondOrderDual& operator/=(const SecondOrderDual& b) { return *this = *this / b; }
  template <detail::fwd::Arithmetic A>
  constexpr SecondOrderDual& operator+=(A s) {
    v_ += static_cast<double>(s);
    return *this;
  }
  template <detail::fwd::Arithmetic A>
  constexpr SecondOrderDual& operator-=(A s) {
    v_ -= static_cast<double>(s);
    return *this;
  }
  template <detail::fwd::Arithmetic A>
  constexpr SecondOrderDual& operator*=(A s) {
    return *this = *this * s;
  }
  template <detail::fwd::Arithmetic A>
  constexpr SecondOrderDual& operator/=(A s) {
    return *this = *this / s;
  }

  // Products and sums, in the nested type's order. With T = Dual<double, 1>,
  // Dual<T, K>'s product is value a.v·b.v, lane l b.v·a.t_l + a.v·b.t_l, and
  // Dual<double, 1>'s (x, ẋ)·(y, ẏ) = (x y, y ẋ + x ẏ).
  friend constexpr SecondOrderDual operator*(const SecondOrderDual& a, const SecondOrderDual& b) {
    SecondOrderDual r(uninitialized);
    r.v_ = a.v_ * b.v_;
    r.v_dot_ = b.v_ * a.v_dot_ + a.v_ * b.v_dot_;
    for (int l = 0; l < K; ++l) {
      // b.v · a.t_l = (b.v a.t, a.t b.v̇ + b.v a.ṫ); a.v · b.t_l likewise.
      r.t_[l] = b.v_ * a.t_[l] + a.v_ * b.t_[l];
      r.t_dot_[l] = (a.t_[l] * b.v_dot_ + b.v_ * a.t_dot_[l]) +
                    (b.t_[l] * a.v_dot_ + a.v_ * b.t_dot_[l]);
    }
    return r;
  }
  friend constexpr SecondOrderDual operator+(const SecondOrderDual& a, const SecondOrderDual& b) {
    SecondOrderDual r(uninitialized);
    r.v_ = a.v_ + b.v_;
    r.v_dot_ = a.v_dot_ + b.v_dot_;
    for (int l = 0; l < K; ++l) {
      r.t_[l] = a.t_[l] + b.t_[l];
      r.t_dot_[l] = a.t_dot_[l] + b.t_dot_[l];
    }
    return r;
  }
  friend constexpr SecondOrderDual operator-(const SecondOrderDual& a, const SecondOrderDual& b) {
    SecondOrderDual r(uninitialized);
    r.v_ = a.v_ - b.v_;
    r.v_dot_ = a.v_dot_ - b.v_dot_;
    for (int l = 0; l < K; ++l) {
      r.t_[l] = a.t_[l] - b.t_[l];
      r.t_dot_[l] = a.t_dot_[l] - b.t_dot_[l];
    }
    return r;
  }
  friend constexpr SecondOrderDual operator-(const SecondOrderDual& a) {
    SecondOrderDual r(uninitialized);
    r.v_ = -a.v_;
    r.v_dot_ = -a.v_dot_;
    for (int l = 0; l < K; ++l) {
      r.t_[l] = -a.t_[l];
      r.t_dot_[l] = -a.t_dot_[l];
    }
    return r;
  }
  friend constexpr SecondOrderDual operator+(const SecondOrderDual& a) { return a; }
  // With a number c (int → double first): x ± c shifts v; c − x is c − v
  // and every other part negated; x · c and c · x scale every part (the
  // nested type multiplies each Dual<double, 1> by c); x / c divides v by c
  // and scales the rest by 1/c (Dual<double, 1> / c: (x / c, ẋ · (1/c))).
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator+(const SecondOrderDual& a, A s) {
    SecondOrderDual r = a;
    r.v_ = a.v_ + static_cast<double>(s);
    return r;
  }
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator+(A s, const SecondOrderDual& a) {
    SecondOrderDual r = a;
    r.v_ = static_cast<double>(s) + a.v_;
    return r;
  }
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator-(const SecondOrderDual& a, A s) {
    SecondOrderDual r = a;
    r.v_ = a.v_ - static_cast<double>(s);
    return r;
  }
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator-(A s, const SecondOrderDual& a) {
    SecondOrderDual r = -a;
    r.v_ = static_cast<double>(s) - a.v_;
    return r;
  }
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator*(const SecondOrderDual& a, A s) {
    const double c = static_cast<double>(s);
    SecondOrderDual r(uninitialized);
    r.v_ = a.v_ * c;
    r.v_dot_ = a.v_dot_ * c;
    for (int l = 0; l < K; ++l) {
      r.t_[l] = a.t_[l] * c;
      r.t_dot_[l] = a.t_dot_[l] * c;
    }
    return r;
  }
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator*(A s, const SecondOrderDual& a) {
    const double c = static_cast<double>(s);
    SecondOrderDual r(uninitialized);
    r.v_ = c * a.v_;
    r.v_dot_ = c * a.v_dot_;
    for (int l = 0; l < K; ++l) {
      r.t_[l] = c * a.t_[l];
      r.t_dot_[l] = c * a.t_dot_[l];
    }
    return r;
  }
  template <detail::fwd::Arithmetic A>
  friend constexpr SecondOrderDual operator/(const SecondOrderDual& a, A s) {
    const double c = static_cast<double>(s);
    const double inv = 1.0 / c;
    SecondOrderDual r(uninitialized);
    r.v_ = a.v_ / c;
    r.v_dot_ = a.v_dot_ * inv;
    for (int l = 0; l < K; ++l) {
      r.t_[l] = a.t_[l] * inv;
      r.t_dot_[l] = a.t_dot_[l] * inv;
    }
    return r;
  }
  // The rest through the nested type (exact).
  friend SecondOrderDual operator/(const SecondOrderDual& a, const SecondOrderDual& b) {
    return SecondOrderDual(a.nested() / b.nested());
  }
  template <detail::fwd::Arithmetic A>
  friend SecondOrderDual operator/(A s, const SecondOrderDual& a) {
    return SecondOrderDual(static_cast<double>(s) / a.nested());
  }

 private:
  struct Uninitialized {};
  static constexpr Uninitialized uninitialized{};
  explicit constexpr SecondOrderDual(Uninitialized) {}
  double t_[K], t_dot_[K];
  double v_, v_dot_;
};

template <class X>
struct is_second_order_dual : std::false_type {};
template <int K>
struct is_second_order_dual<SecondOrderDual<K>> : std::true_type {};
template <class X>
inline constexpr bool is_second_order_dual_v = is_second_order_dual<std::remove_cv_t<X>>::value;

// Comparisons: on the values.
#define COSTATE_AD_SOD_COMPARE(op)                                                        \
  template <int K>                                                                        \
  constexpr bool operator op(const SecondOrderDual<K>& a, const SecondOrderDual<K>& b) {  \
    return a.value() op b.value();                                                        \
  }                                                                                       \
  template <int K, detail::fwd::Arithmetic A>                                             \
  constexpr bool operator op(const SecondOrderDual<K>& a, A s) {                          \
    return a.value() op s;                                                                \
  }                                                                                       \
  template <int K, detail::fwd::Arithmetic A>                                             \
  constexpr bool operator op(A s, const SecondOrderDual<K>& a) {                          \
    return s op a.value();                                                                \
  }
COSTATE_AD_SOD_COMPARE(==)
COSTATE_AD_SOD_COMPARE(!=)
COSTATE_AD_SOD_COMPARE(<)
COSTATE_AD_SOD_COMPARE(<=)
COSTATE_AD_SOD_COMPARE(>)
COSTATE_AD_SOD_COMPARE(>=)
#undef COSTATE_AD_SOD_COMPARE

// Elementary functions: the nested type's (dual.hpp), converted both ways.
#define COSTATE_AD_SOD_UNARY(f)                                          \
  template <int K>                                                       \
  SecondOrderDual<K> f(const SecondOrderDual<K>& x) {                    \
    return SecondOrderDual<K>(f(x.nested()));                            \
  }
COSTATE_AD_SOD_UNARY(sqrt)
COSTATE_AD_SOD_UNARY(cbrt)
COSTATE_AD_SOD_UNARY(exp)
COSTATE_AD_SOD_UNARY(expm1)
COSTATE_AD_SOD_UNARY(log)
COSTATE_AD_SOD_UNARY(log1p)
COSTATE_AD_SOD_UNARY(log2)
COSTATE_AD_SOD_UNARY(log10)
COSTATE_AD_SOD_UNARY(sin)
COSTATE_AD_SOD_UNARY(cos)
COSTATE_AD_SOD_UNARY(tan)
COSTATE_AD_SOD_UNARY(asin)
COSTATE_AD_SOD_UNARY(acos)
COSTATE_AD_SOD_UNARY(atan)
COSTATE_AD_SOD_UNARY(sinh)
COSTATE_AD_SOD_UNARY(cosh)
COSTATE_AD_SOD_UNARY(tanh)
COSTATE_AD_SOD_UNARY(asinh)
COSTATE_AD_SOD_UNARY(acosh)
COSTATE_AD_SOD_UNARY(atanh)
COSTATE_AD_SOD_UNARY(erf)
COSTATE_AD_SOD_UNARY(erfc)
COSTATE_AD_SOD_UNARY(abs)
COSTATE_AD_SOD_UNARY(fabs)
COSTATE_AD_SOD_UNARY(floor)
COSTATE_AD_SOD_UNARY(ceil)
COSTATE_AD_SOD_UNARY(round)
COSTATE_AD_SOD_UNARY(trunc)
#undef COSTATE_AD_SOD_UNARY

#define COSTATE_AD_SOD_BINARY(f)                                                          \
  template <int K>                                                                        \
  SecondOrderDual<K> f(const SecondOrderDual<K>& a, const SecondOrderDual<K>& b) {        \
    return SecondOrderDual<K>(f(a.nested(), b.nested()));                                 \
  }                                                                                       \
  template <int K, detail::fwd::Arithmetic A>                                             \
  SecondOrderDual<K> f(const SecondOrderDual<K>& a, A s) {                                \
    return SecondOrderDual<K>(f(a.nested(), s));                                          \
  }                                                                                       \
  template <int K, detail::fwd::Arithmetic A>                                             \
  SecondOrderDual<K> f(A s, const SecondOrderDual<K>& b) {                                \
    return SecondOrderDual<K>(f(s, b.nested()));                                          \
  }
COSTATE_AD_SOD_BINARY(pow)
COSTATE_AD_SOD_BINARY(atan2)
COSTATE_AD_SOD_BINARY(hypot)
COSTATE_AD_SOD_BINARY(fmin)
COSTATE_AD_SOD_BINARY(fmax)
COSTATE_AD_SOD_BINARY(min)
COSTATE_AD_SOD_BINARY(max)
#undef COSTATE_AD_SOD_BINARY

template <int K>
bool isnan(const SecondOrderDual<K>& x) {
  return isnan(x.nested());
}
template <int K>
bool isinf(const SecondOrderDual<K>& x) {
  return isinf(x.nested());
}
template <int K>
bool isfinite(const SecondOrderDual<K>& x) {
  return isfinite(x.nested());
}

}  // namespace costate::ad
