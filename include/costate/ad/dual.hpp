#pragma once
/// \file
/// ad::Dual<T, N> — forward-mode automatic differentiation: a value and N
/// tangents (directional derivatives), propagated by the chain rule,
///     f(x + Σ_k ẋ_k ε_k) = f(x) + Σ_k f'(x) ẋ_k ε_k,   ε_j ε_k = 0,
/// so one evaluation of f on Dual<double, N> gives f and N columns of its
/// Jacobian (N = number of inputs for a dense Jacobian, the number of colors
/// for a compressed sparse one).
///
///     ad::Dual<double, 2> x{1.5, {1.0, 0.0}};   // value, tangents
///     ad::Dual<double, 2> y = ad::Dual<double, 2>::seed(0.5, 1);  // ẏ = e_1
///     auto f = sin(x) * y;                       // a Dual: no expression objects
///     f.value();  f.tangent(0);  f.tangent(1);  // sin(1.5)·0.5, cos(1.5)·0.5, sin(1.5)
///
/// Storage is `T tangent_[N]; T value_;` — no heap, trivially copyable, so a
/// Dual is a valid value type of a Kokkos::View and of parallel_for /
/// parallel_reduce (Kokkos::reduction_identity is specialised below; a Dual
/// sum reduces value and tangents). Every function is KOKKOS_INLINE_FUNCTION;
/// the scalar maths inside calls Kokkos' portable math functions, so Duals
/// work in device kernels. Tangent loops are branch-free loops over the
/// fixed-size array (detail::fwd::for_each), which compilers vectorise.
///
/// Nesting: T may itself be a Dual — Dual<Dual<double, 1>, 1> carries second
/// derivatives (seed the inner and the outer tangent of the same input; the
/// outer tangent's inner tangent is f''). Every rule below applies at each
/// level to that level's value.
///
/// Generic code. Write model code on a scalar type T and call the elementary
/// functions unqualified after a using-declaration:
///     using std::sin;  using std::pow;   // (or Kokkos::sin in device code)
///     T y = sin(x) * pow(x, 2);
/// For T = double, std::sin is found; for a Dual, argument-dependent lookup
/// finds costate::ad::sin (a qualified std::sin(x) does NOT work for a Dual).
/// Likewise min/max: write `using std::max; max(a, b)` — std::max(a, b) on
/// mixed Dual/double operands does not deduce.
///
/// Operands: + − × ÷ and the comparisons take Dual ⊕ Dual, Dual ⊕ T and
/// Dual ⊕ any arithmetic type (int, float, ...), in both orders; the
/// compound assignments take the same right-hand sides. Comparisons compare
/// values only (tangents are ignored), so branches follow the primal code.
///
/// Non-smooth and singular points (chosen; ad::Reverse documents the same
/// rules for abs, min/max, sqrt, pow and rounding):
///   - abs/fabs at 0: derivative 0 (the subgradient of least norm).
///   - min/max/fmin/fmax at ties: the first argument is returned, value and
///     tangents (max(a, b) = b > a ? b : a; min(a, b) = b < a ? b : a, as
///     std::max/std::min). fmin/fmax with a NaN operand follow C: the other
///     operand is returned, with its tangents.
///   - sqrt and cbrt at 0: each tangent is 0 where the incoming tangent is 0,
///     and ±inf (the sign of the incoming tangent) otherwise — never NaN
///     from 0·inf.
///   - pow(x, y) = x^y: ∂/∂x = y·x^(y−1) (0 when y = 0, including 0^0);
///     ∂/∂y = x^y·log(x) for x > 0 and 0 for x ≤ 0. So pow(0, y) has no NaN
///     from the log term, and a negative base (real only for an integer y)
///     differentiates without the log term: pow(−2, 3) has ∂/∂x = 12. At
///     x = 0 an infinite ∂/∂x (y < 1) meets zero tangents as sqrt at 0 does.
///   - atan2(y, x) and hypot(x, y) at the origin: derivative 0.
///   - floor, ceil, round, trunc: derivative 0 (the tangent of the
///     piecewise-constant function, also at its jumps).
///   - Elsewhere outside the domain (log of a negative number, acosh(x < 1),
///     ...) the value is NaN and so are the tangents. Derivatives that
///     diverge at the domain's edge (log at 0, asin/acos at ±1, acosh at 1,
///     atanh at ±1) are multiplied out: ±inf for a non-zero incoming tangent,
///     NaN (0·inf) for a zero one — guarding every function against that
///     would cost the common case (measured: +13% on W2) for points where
///     the function itself is singular.
///
/// Rounding: the value of every result is computed exactly as the plain
/// double operation would (same bits as the primal code). Tangents of a
/// division use one reciprocal and multiplications (≤ 1 ulp from dividing).
///
/// Limitations: N ≥ 1 is fixed at compile time. Tangents are always
/// propagated (no sparsity tracking). No I/O operators (printing is the
/// caller's: value() and tangent(i)).

#include <Kokkos_Macros.hpp>
#if __has_include(<Kokkos_ReductionIdentity.hpp>)
#include <Kokkos_ReductionIdentity.hpp>  // Kokkos ≥ 3.7/4: reduction_identity
#else
#include <Kokkos_NumericTraits.hpp>  // Kokkos 3.4: reduction_identity
#endif

#include <cmath>
#include <type_traits>

#include "costate/ad/detail/kokkos_math.hpp"

namespace costate::ad {

template <class T, int N>
class Dual;

// --------------------------------------------------------------------- traits

template <class X>
struct is_dual : std::false_type {};
template <class T, int N>
struct is_dual<Dual<T, N>> : std::true_type {};
/// True for any (cv-qualified) Dual, nested or not.
template <class X>
inline constexpr bool is_dual_v = is_dual<std::remove_cv_t<X>>::value;

/// The innermost arithmetic type: primal_type_t<Dual<Dual<double,1>,2>> = double.
template <class X>
struct primal_type {
  using type = X;
};
template <class T, int N>
struct primal_type<Dual<T, N>> {
  using type = typename primal_type<T>::type;
};
template <class X>
using primal_type_t = typename primal_type<std::remove_cv_t<X>>::type;

/// For X = Dual<T, N>: value_type = T, size = N, primal_type (innermost
/// arithmetic type), depth (1 for Dual<double, N>, 2 for Dual<Dual<..>, ..>).
template <class X>
struct dual_traits;
template <class T, int N>
struct dual_traits<Dual<T, N>> {
  using value_type = T;
  using primal_type = primal_type_t<T>;
  static constexpr int size = N;
  static constexpr int depth = 1 + [] {
    if constexpr (is_dual_v<T>)
      return dual_traits<T>::depth;
    else
      return 0;
  }();
};

namespace detail::fwd {
/// Tag of the constructor that leaves the tangents for the caller to write.
struct Uninitialized {};
inline constexpr Uninitialized uninitialized{};

/// for i in [0, N): f(i) — every loop over the tangents of a Dual (the hot
/// loops of forward mode) is this one, so that it vectorises.
///
/// GCC completely unrolls loops of up to 16 iterations *before* its loop
/// vectoriser runs, and then fails to re-vectorise the resulting scalars
/// across the values a kernel keeps live (measured on workload W2: 3.5× the
/// primal instead of 2.0×). An unroll count below N (but at least N / vector
/// width) keeps the loop for the vectoriser, whose 1-4 vector iterations
/// are then unrolled completely. `#pragma GCC unroll` takes no template
/// argument, hence the few fixed counts.
template <int N, class F>
KOKKOS_FORCEINLINE_FUNCTION constexpr void for_each(F&& f) {
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__HIPCC__) && \
    !defined(__INTEL_LLVM_COMPILER) && !defined(__SYCL_DEVICE_ONLY__)
  if constexpr (N >= 9 && N <= 16) {
    _Pragma("GCC unroll 8") for (int i = 0; i < N; ++i) f(i);
  } else if constexpr (N >= 5 && N <= 8) {
    _Pragma("GCC unroll 4") for (int i = 0; i < N; ++i) f(i);
  } else if constexpr (N >= 3 && N <= 4) {
    _Pragma("GCC unroll 2") for (int i = 0; i < N; ++i) f(i);
  } else
#endif
  {
    for (int i = 0; i < N; ++i) f(i);
  }
}

/// A right-hand side that is not a Dual: the Dual's value type T, or any
/// arithmetic type.
template <class S, class T>
concept Scalar = std::is_arithmetic_v<S> || std::is_same_v<S, T>;
template <class A>
concept Arithmetic = std::is_arithmetic_v<A>;
/// An arithmetic type other than T (T itself has its own constructor).
template <class A, class T>
concept OtherArithmetic = std::is_arithmetic_v<A> && !std::is_same_v<A, T>;

/// Arithmetic operands as the primal floating type (int → double, once);
/// a T passes through.
template <class T, class S>
KOKKOS_INLINE_FUNCTION constexpr auto real(const S& s) {
  if constexpr (std::is_arithmetic_v<S>)
    return static_cast<primal_type_t<T>>(s);
  else
    return s;
}
}  // namespace detail::fwd

// ----------------------------------------------------------------------- Dual

template <class T, int N>
class Dual {
  static_assert(N >= 1, "Dual<T, N> needs at least one tangent");
  static_assert(std::is_arithmetic_v<T> || is_dual_v<T>,
                "Dual<T, N>: T must be an arithmetic type or a Dual");

 public:
  using value_type = T;
  static constexpr int size = N;

  /// Zero value, zero tangents.
  KOKKOS_INLINE_FUNCTION constexpr Dual() : tangent_(), value_() {}
  /// A constant: the value v, zero tangents.
  KOKKOS_INLINE_FUNCTION constexpr Dual(const T& v) : tangent_(), value_(v) {}
  /// A constant from any arithmetic type (`Dual<double, 2> x = 3;`,
  /// `Dual<Dual<double, 1>, 1> y = 2.0;`).
  template <detail::fwd::OtherArithmetic<T> A>
  KOKKOS_INLINE_FUNCTION constexpr Dual(A v) : tangent_(), value_(static_cast<T>(v)) {}
  /// Value and all N tangents: `Dual<double, 2> x{1.5, {1.0, 0.0}};`
  KOKKOS_INLINE_FUNCTION constexpr Dual(const T& v, const T (&tangents)[N]) : value_(v) {
    detail::fwd::for_each<N>([&](int i) { tangent_[i] = tangents[i]; });
  }
  /// Internal: value v, tangents left for the caller to write.
  KOKKOS_INLINE_FUNCTION constexpr Dual(detail::fwd::Uninitialized, const T& v) : value_(v) {}

  /// The independent variable of direction i: value v, tangent i = 1, the
  /// others 0.
  KOKKOS_INLINE_FUNCTION static constexpr Dual seed(const T& v, int i) {
    Dual x(v);
    x.tangent_[i] = T(1);
    return x;
  }

  KOKKOS_INLINE_FUNCTION constexpr const T& value() const { return value_; }
  KOKKOS_INLINE_FUNCTION constexpr T& value() { return value_; }
  /// Tangent i, 0 ≤ i < N (not checked).
  KOKKOS_INLINE_FUNCTION constexpr const T& tangent(int i) const { return tangent_[i]; }
  KOKKOS_INLINE_FUNCTION constexpr T& tangent(int i) { return tangent_[i]; }
  /// The N tangents, contiguous.
  KOKKOS_INLINE_FUNCTION constexpr const T* tangents() const { return tangent_; }
  KOKKOS_INLINE_FUNCTION constexpr T* tangents() { return tangent_; }
  KOKKOS_INLINE_FUNCTION constexpr void set_value(const T& v) { value_ = v; }
  KOKKOS_INLINE_FUNCTION constexpr void set_tangent(int i, const T& v) { tangent_[i] = v; }

  // Compound assignments. Aliasing (x *= x) is safe: each tangent is read
  // before it is written, and the value is updated last.
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator+=(const Dual& b) {
    detail::fwd::for_each<N>([&](int i) { tangent_[i] += b.tangent_[i]; });
    value_ += b.value_;
    return *this;
  }
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator-=(const Dual& b) {
    detail::fwd::for_each<N>([&](int i) { tangent_[i] -= b.tangent_[i]; });
    value_ -= b.value_;
    return *this;
  }
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator*=(const Dual& b) {
    detail::fwd::for_each<N>(
        [&](int i) { tangent_[i] = b.value_ * tangent_[i] + value_ * b.tangent_[i]; });
    value_ *= b.value_;
    return *this;
  }
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator/=(const Dual& b) {
    const T v = value_ / b.value_;
    const T inv = T(1) / b.value_;
    detail::fwd::for_each<N>([&](int i) { tangent_[i] = (tangent_[i] - v * b.tangent_[i]) * inv; });
    value_ = v;
    return *this;
  }
  template <detail::fwd::Scalar<T> S>
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator+=(const S& s) {
    value_ += detail::fwd::real<T>(s);
    return *this;
  }
  template <detail::fwd::Scalar<T> S>
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator-=(const S& s) {
    value_ -= detail::fwd::real<T>(s);
    return *this;
  }
  template <detail::fwd::Scalar<T> S>
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator*=(const S& s) {
    const auto c = detail::fwd::real<T>(s);
    detail::fwd::for_each<N>([&](int i) { tangent_[i] *= c; });
    value_ *= c;
    return *this;
  }
  template <detail::fwd::Scalar<T> S>
  KOKKOS_INLINE_FUNCTION constexpr Dual& operator/=(const S& s) {
    const auto c = detail::fwd::real<T>(s);
    const auto inv = decltype(c)(1) / c;
    detail::fwd::for_each<N>([&](int i) { tangent_[i] *= inv; });
    value_ /= c;
    return *this;
  }

 private:
  // Tangents first: a Dual built in registers is stored as tangent pairs
  // from offset 0 and its value last, so the 16-byte copies of a whole Dual
  // (a result assigned to an output) read exactly what was stored — with the
  // value first every such read straddled two stores and missed store-to-
  // load forwarding (measured: ~60 % of a Lotka–Volterra Dual<double, 8>
  // right-hand side, bench/README.md "odeperf").
  T tangent_[N];
  T value_;
};

// -------------------------------------------------------------------- helpers

/// The value of a Dual (one level), or the number itself.
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr const T& value(const Dual<T, N>& x) {
  return x.value();
}
template <detail::fwd::Arithmetic A>
KOKKOS_INLINE_FUNCTION constexpr A value(A x) {
  return x;
}

/// The innermost value as a plain number: primal(Dual<Dual<double,1>,1>) is
/// a double.
template <class X>
KOKKOS_INLINE_FUNCTION constexpr primal_type_t<X> primal(const X& x) {
  if constexpr (is_dual_v<X>)
    return primal(x.value());
  else
    return x;
}

namespace detail::fwd {
template <class X>
KOKKOS_INLINE_FUNCTION constexpr bool is_nan(const X& x) {
  const auto p = primal(x);
  return p != p;
}
/// r = (v, d·ẋ): the chain rule of a function of one Dual.
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> unary(const Dual<T, N>& x, const T& v, const T& d) {
  Dual<T, N> r(uninitialized, v);
  const T* xt = x.tangents();
  T* rt = r.tangents();
  detail::fwd::for_each<N>([&](int i) { rt[i] = d * xt[i]; });
  return r;
}
/// r = (v, dx·ẋ + dy·ẏ): the chain rule of a function of two Duals.
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> binary(const Dual<T, N>& x, const T& dx,
                                                   const Dual<T, N>& y, const T& dy, const T& v) {
  Dual<T, N> r(uninitialized, v);
  const T* xt = x.tangents();
  const T* yt = y.tangents();
  T* rt = r.tangents();
  detail::fwd::for_each<N>([&](int i) { rt[i] = dx * xt[i] + dy * yt[i]; });
  return r;
}
/// As binary, for a partial that may be infinite (sqrt and cbrt at 0, pow
/// at a zero base): a term whose tangent is 0 contributes 0, not 0·∞ = NaN.
/// Only on those rare paths: the selects cost the common path too much.
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> binary_guarded(const Dual<T, N>& x, const T& dx,
                                                 const Dual<T, N>& y, const T& dy, const T& v) {
  Dual<T, N> r(uninitialized, v);
  for (int i = 0; i < N; ++i) {
    const T& xi = x.tangent(i);
    const T& yi = y.tangent(i);
    r.tangent(i) = (xi == 0 ? T(0) : T(dx * xi)) + (yi == 0 ? T(0) : T(dy * yi));
  }
  return r;
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> unary_guarded(const Dual<T, N>& x, const T& v, const T& d) {
  return binary_guarded(x, d, x, T(0), v);
}
/// r = (v, ẋ): same tangents, new value.
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> shift(const Dual<T, N>& x, const T& v) {
  Dual<T, N> r(x);
  r.set_value(v);
  return r;
}
}  // namespace detail::fwd

// ----------------------------------------------------------------- arithmetic

template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator+(const Dual<T, N>& a) {
  return a;
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator-(const Dual<T, N>& a) {
  Dual<T, N> r(detail::fwd::uninitialized, -a.value());
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = -a.tangent(i); });
  return r;
}

template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator+(const Dual<T, N>& a, const Dual<T, N>& b) {
  Dual<T, N> r(detail::fwd::uninitialized, a.value() + b.value());
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = a.tangent(i) + b.tangent(i); });
  return r;
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator-(const Dual<T, N>& a, const Dual<T, N>& b) {
  Dual<T, N> r(detail::fwd::uninitialized, a.value() - b.value());
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = a.tangent(i) - b.tangent(i); });
  return r;
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator*(const Dual<T, N>& a, const Dual<T, N>& b) {
  Dual<T, N> r(detail::fwd::uninitialized, a.value() * b.value());
  detail::fwd::for_each<N>(
      [&](int i) { r.tangent(i) = b.value() * a.tangent(i) + a.value() * b.tangent(i); });
  return r;
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator/(const Dual<T, N>& a, const Dual<T, N>& b) {
  // (a/b)˙ = (ȧ − (a/b) ḃ) / b
  Dual<T, N> r(detail::fwd::uninitialized, a.value() / b.value());
  const T inv = T(1) / b.value();
  detail::fwd::for_each<N>(
      [&](int i) { r.tangent(i) = (a.tangent(i) - r.value() * b.tangent(i)) * inv; });
  return r;
}

template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator+(const Dual<T, N>& a, const S& s) {
  return detail::fwd::shift(a, T(a.value() + detail::fwd::real<T>(s)));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator+(const S& s, const Dual<T, N>& a) {
  return detail::fwd::shift(a, T(detail::fwd::real<T>(s) + a.value()));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator-(const Dual<T, N>& a, const S& s) {
  return detail::fwd::shift(a, T(a.value() - detail::fwd::real<T>(s)));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator-(const S& s, const Dual<T, N>& a) {
  Dual<T, N> r(detail::fwd::uninitialized, detail::fwd::real<T>(s) - a.value());
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = -a.tangent(i); });
  return r;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator*(const Dual<T, N>& a, const S& s) {
  const auto c = detail::fwd::real<T>(s);
  Dual<T, N> r(detail::fwd::uninitialized, a.value() * c);
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = a.tangent(i) * c; });
  return r;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator*(const S& s, const Dual<T, N>& a) {
  const auto c = detail::fwd::real<T>(s);
  Dual<T, N> r(detail::fwd::uninitialized, c * a.value());
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = c * a.tangent(i); });
  return r;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator/(const Dual<T, N>& a, const S& s) {
  const auto c = detail::fwd::real<T>(s);
  const auto inv = decltype(c)(1) / c;
  Dual<T, N> r(detail::fwd::uninitialized, a.value() / c);
  detail::fwd::for_each<N>([&](int i) { r.tangent(i) = a.tangent(i) * inv; });
  return r;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> operator/(const S& s, const Dual<T, N>& a) {
  // (s/a)˙ = −(s/a) ȧ / a
  const T v = detail::fwd::real<T>(s) / a.value();
  return detail::fwd::unary(a, v, T(-v / a.value()));
}

// ---------------------------------------------------------------- comparisons
// On values only.

#define COSTATE_AD_DUAL_COMPARE(op)                                                             \
  template <class T, int N>                                                                     \
  KOKKOS_INLINE_FUNCTION constexpr bool operator op(const Dual<T, N>& a, const Dual<T, N>& b) { \
    return a.value() op b.value();                                                              \
  }                                                                                             \
  template <class T, int N, detail::fwd::Scalar<T> S>                                           \
  KOKKOS_INLINE_FUNCTION constexpr bool operator op(const Dual<T, N>& a, const S& s) {          \
    return a.value() op s;                                                                      \
  }                                                                                             \
  template <class T, int N, detail::fwd::Scalar<T> S>                                           \
  KOKKOS_INLINE_FUNCTION constexpr bool operator op(const S& s, const Dual<T, N>& a) {          \
    return s op a.value();                                                                      \
  }
COSTATE_AD_DUAL_COMPARE(==)
COSTATE_AD_DUAL_COMPARE(!=)
COSTATE_AD_DUAL_COMPARE(<)
COSTATE_AD_DUAL_COMPARE(<=)
COSTATE_AD_DUAL_COMPARE(>)
COSTATE_AD_DUAL_COMPARE(>=)
#undef COSTATE_AD_DUAL_COMPARE

// ---------------------------------------------------------- elementary functions
// Each calls the scalar function on the value: detail::kmath (Kokkos) for a
// plain number, the overload below (found by argument-dependent lookup) for
// a nested Dual.

/// √x; at x = 0 see the header comment (vertical tangent).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> sqrt(const Dual<T, N>& x) {
  using detail::kmath::sqrt;
  const T v = sqrt(x.value());
  if (v == 0) return detail::fwd::unary_guarded(x, v, T(HUGE_VAL));
  return detail::fwd::unary(x, v, T(T(0.5) / v));
}
/// ∛x: (∛x)' = 1 / (3 ∛x²); at x = 0 a vertical tangent, as sqrt.
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> cbrt(const Dual<T, N>& x) {
  using detail::kmath::cbrt;
  const T v = cbrt(x.value());
  if (v == 0) return detail::fwd::unary_guarded(x, v, T(HUGE_VAL));
  return detail::fwd::unary(x, v, T(T(1) / (3 * v * v)));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> exp(const Dual<T, N>& x) {
  using detail::kmath::exp;
  const T v = exp(x.value());
  return detail::fwd::unary(x, v, v);
}
/// eˣ − 1: derivative eˣ = (eˣ − 1) + 1.
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> expm1(const Dual<T, N>& x) {
  using detail::kmath::expm1;
  const T v = expm1(x.value());
  return detail::fwd::unary(x, v, T(v + 1));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> log(const Dual<T, N>& x) {
  using detail::kmath::log;
  return detail::fwd::unary(x, log(x.value()), T(T(1) / x.value()));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> log1p(const Dual<T, N>& x) {
  using detail::kmath::log1p;
  return detail::fwd::unary(x, log1p(x.value()), T(T(1) / (1 + x.value())));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> log2(const Dual<T, N>& x) {
  using detail::kmath::log2;
  constexpr double kLn2 = 0.69314718055994530941723212145818;
  return detail::fwd::unary(x, log2(x.value()), T(T(1) / (x.value() * kLn2)));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> log10(const Dual<T, N>& x) {
  using detail::kmath::log10;
  constexpr double kLn10 = 2.30258509299404568401799145468437;
  return detail::fwd::unary(x, log10(x.value()), T(T(1) / (x.value() * kLn10)));
}

template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> sin(const Dual<T, N>& x) {
  using detail::kmath::cos;
  using detail::kmath::sin;
  return detail::fwd::unary(x, sin(x.value()), cos(x.value()));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> cos(const Dual<T, N>& x) {
  using detail::kmath::cos;
  using detail::kmath::sin;
  return detail::fwd::unary(x, cos(x.value()), T(-sin(x.value())));
}
/// tan' = 1 + tan².
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> tan(const Dual<T, N>& x) {
  using detail::kmath::tan;
  const T v = tan(x.value());
  return detail::fwd::unary(x, v, T(1 + v * v));
}
/// asin' = 1/√(1 − x²) (±inf at ±1).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> asin(const Dual<T, N>& x) {
  using detail::kmath::asin;
  using detail::kmath::sqrt;
  const T& a = x.value();
  return detail::fwd::unary(x, asin(a), T(T(1) / sqrt(T((1 - a) * (1 + a)))));
}
/// acos' = −1/√(1 − x²).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> acos(const Dual<T, N>& x) {
  using detail::kmath::acos;
  using detail::kmath::sqrt;
  const T& a = x.value();
  return detail::fwd::unary(x, acos(a), T(T(-1) / sqrt(T((1 - a) * (1 + a)))));
}
/// atan' = 1/(1 + x²).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> atan(const Dual<T, N>& x) {
  using detail::kmath::atan;
  const T& a = x.value();
  return detail::fwd::unary(x, atan(a), T(T(1) / (1 + a * a)));
}

template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> sinh(const Dual<T, N>& x) {
  using detail::kmath::cosh;
  using detail::kmath::sinh;
  return detail::fwd::unary(x, sinh(x.value()), cosh(x.value()));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> cosh(const Dual<T, N>& x) {
  using detail::kmath::cosh;
  using detail::kmath::sinh;
  return detail::fwd::unary(x, cosh(x.value()), sinh(x.value()));
}
/// tanh' = 1 − tanh².
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> tanh(const Dual<T, N>& x) {
  using detail::kmath::tanh;
  const T v = tanh(x.value());
  return detail::fwd::unary(x, v, T(1 - v * v));
}
/// asinh' = 1/√(x² + 1).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> asinh(const Dual<T, N>& x) {
  using detail::kmath::asinh;
  using detail::kmath::sqrt;
  const T& a = x.value();
  return detail::fwd::unary(x, asinh(a), T(T(1) / sqrt(T(a * a + 1))));
}
/// acosh' = 1/√((x − 1)(x + 1)) (+inf at 1).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> acosh(const Dual<T, N>& x) {
  using detail::kmath::acosh;
  using detail::kmath::sqrt;
  const T& a = x.value();
  return detail::fwd::unary(x, acosh(a), T(T(1) / sqrt(T((a - 1) * (a + 1)))));
}
/// atanh' = 1/((1 − x)(1 + x)).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> atanh(const Dual<T, N>& x) {
  using detail::kmath::atanh;
  const T& a = x.value();
  return detail::fwd::unary(x, atanh(a), T(T(1) / ((1 - a) * (1 + a))));
}

/// erf' = (2/√π) e^(−x²).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> erf(const Dual<T, N>& x) {
  using detail::kmath::erf;
  using detail::kmath::exp;
  constexpr double k2OverSqrtPi = 1.12837916709551257389615890312154;
  const T& a = x.value();
  return detail::fwd::unary(x, erf(a), T(k2OverSqrtPi * exp(T(-(a * a)))));
}
/// erfc' = −(2/√π) e^(−x²).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> erfc(const Dual<T, N>& x) {
  using detail::kmath::erfc;
  using detail::kmath::exp;
  constexpr double k2OverSqrtPi = 1.12837916709551257389615890312154;
  const T& a = x.value();
  return detail::fwd::unary(x, erfc(a), T(-k2OverSqrtPi * exp(T(-(a * a)))));
}

/// |x|; derivative sign(x), 0 at x = 0 (and |NaN| = NaN with tangent 0).
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> abs(const Dual<T, N>& x) {
  if (x.value() > 0) return x;
  if (x.value() < 0) return -x;
  using detail::kmath::fabs;
  return Dual<T, N>(fabs(x.value()));  // ±0 → +0, NaN stays NaN
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> fabs(const Dual<T, N>& x) {
  return abs(x);
}

/// floor, ceil, round (half away from zero), trunc: derivative 0.
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> floor(const Dual<T, N>& x) {
  using detail::kmath::floor;
  return Dual<T, N>(floor(x.value()));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> ceil(const Dual<T, N>& x) {
  using detail::kmath::ceil;
  return Dual<T, N>(ceil(x.value()));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> round(const Dual<T, N>& x) {
  using detail::kmath::round;
  return Dual<T, N>(round(x.value()));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> trunc(const Dual<T, N>& x) {
  using detail::kmath::trunc;
  return Dual<T, N>(trunc(x.value()));
}

/// isnan, isinf, isfinite of the value (for generic code's checks).
template <class T, int N>
KOKKOS_INLINE_FUNCTION bool isnan(const Dual<T, N>& x) {
  return detail::fwd::is_nan(x);
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION bool isfinite(const Dual<T, N>& x) {
  const auto p = primal(x);
  return p - p == 0;  // inf − inf and NaN − NaN are NaN
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION bool isinf(const Dual<T, N>& x) {
  return !isfinite(x) && !isnan(x);
}

// ------------------------------------------------------------------------ pow

namespace detail::fwd {
/// ∂(x^y)/∂x = y·x^(y−1), from v = x^y: y·v/x when x ≠ 0 (no second pow);
/// 0 when y = 0.
template <class T>
KOKKOS_INLINE_FUNCTION T pow_dx(const T& x, const T& y, const T& v) {
  if (y == 0) return T(0);
  if (x != 0) return T(y * v / x);
  using detail::kmath::pow;
  return T(y * pow(x, T(y - 1)));
}
/// ∂(x^y)/∂y = x^y·log(x) for x > 0, else 0.
template <class T>
KOKKOS_INLINE_FUNCTION T pow_dy(const T& x, const T& v) {
  using detail::kmath::log;
  return x > 0 ? T(v * log(x)) : T(0);
}
}  // namespace detail::fwd

template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> pow(const Dual<T, N>& x, const Dual<T, N>& y) {
  using detail::kmath::pow;
  const T& a = x.value();
  const T& b = y.value();
  const T v = pow(a, b);
  if (a == 0)  // ∂/∂x may be infinite (y < 1), ∂/∂y is 0
    return detail::fwd::binary_guarded(x, detail::fwd::pow_dx(a, b, v), y, T(0), v);
  return detail::fwd::binary(x, detail::fwd::pow_dx(a, b, v), y, detail::fwd::pow_dy(a, v), v);
}
/// x^s for a constant exponent (int, double, T, ...).
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION Dual<T, N> pow(const Dual<T, N>& x, const S& s) {
  using detail::kmath::pow;
  const T& a = x.value();
  const T b = detail::fwd::real<T>(s);
  const T v = pow(a, b);
  if (a == 0) return detail::fwd::unary_guarded(x, v, detail::fwd::pow_dx(a, b, v));
  return detail::fwd::unary(x, v, detail::fwd::pow_dx(a, b, v));
}
/// s^y for a constant base.
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION Dual<T, N> pow(const S& s, const Dual<T, N>& y) {
  using detail::kmath::pow;
  const T a = detail::fwd::real<T>(s);
  const T v = pow(a, y.value());
  return detail::fwd::unary(y, v, detail::fwd::pow_dy(a, v));
}

// ---------------------------------------------------------------- atan2, hypot

/// atan2(y, x): ∂/∂y = x/(x² + y²), ∂/∂x = −y/(x² + y²); 0 at the origin.
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> atan2(const Dual<T, N>& y, const Dual<T, N>& x) {
  using detail::kmath::atan2;
  const T& b = y.value();
  const T& a = x.value();
  const T r2 = a * a + b * b;
  const T inv = r2 == 0 ? T(0) : T(T(1) / r2);
  return detail::fwd::binary(y, T(a * inv), x, T(-b * inv), atan2(b, a));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION Dual<T, N> atan2(const Dual<T, N>& y, const S& s) {
  using detail::kmath::atan2;
  const T& b = y.value();
  const T a = detail::fwd::real<T>(s);
  const T r2 = a * a + b * b;
  return detail::fwd::unary(y, atan2(b, a), r2 == 0 ? T(0) : T(a / r2));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION Dual<T, N> atan2(const S& s, const Dual<T, N>& x) {
  using detail::kmath::atan2;
  const T b = detail::fwd::real<T>(s);
  const T& a = x.value();
  const T r2 = a * a + b * b;
  return detail::fwd::unary(x, atan2(b, a), r2 == 0 ? T(0) : T(-b / r2));
}

/// hypot(x, y) = √(x² + y²) without overflow: ∂/∂x = x/h, ∂/∂y = y/h; 0 at
/// the origin.
template <class T, int N>
KOKKOS_INLINE_FUNCTION Dual<T, N> hypot(const Dual<T, N>& x, const Dual<T, N>& y) {
  using detail::kmath::hypot;
  const T h = hypot(x.value(), y.value());
  const T inv = h == 0 ? T(0) : T(T(1) / h);
  return detail::fwd::binary(x, T(x.value() * inv), y, T(y.value() * inv), h);
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION Dual<T, N> hypot(const Dual<T, N>& x, const S& s) {
  using detail::kmath::hypot;
  const T h = hypot(x.value(), T(detail::fwd::real<T>(s)));
  return detail::fwd::unary(x, h, h == 0 ? T(0) : T(x.value() / h));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION Dual<T, N> hypot(const S& s, const Dual<T, N>& y) {
  using detail::kmath::hypot;
  const T h = hypot(T(detail::fwd::real<T>(s)), y.value());
  return detail::fwd::unary(y, h, h == 0 ? T(0) : T(y.value() / h));
}

// ------------------------------------------------------ min, max, fmin, fmax
// Ties (and, for min/max, a NaN second operand) return the first argument.

template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> max(const Dual<T, N>& a, const Dual<T, N>& b) {
  return b > a ? b : a;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> max(const Dual<T, N>& a, const S& s) {
  return s > a ? Dual<T, N>(detail::fwd::real<T>(s)) : a;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> max(const S& s, const Dual<T, N>& b) {
  return b > s ? b : Dual<T, N>(detail::fwd::real<T>(s));
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> min(const Dual<T, N>& a, const Dual<T, N>& b) {
  return b < a ? b : a;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> min(const Dual<T, N>& a, const S& s) {
  return s < a ? Dual<T, N>(detail::fwd::real<T>(s)) : a;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> min(const S& s, const Dual<T, N>& b) {
  return b < s ? b : Dual<T, N>(detail::fwd::real<T>(s));
}

/// fmax/fmin: as max/min, but a NaN operand yields the other operand (C).
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> fmax(const Dual<T, N>& a, const Dual<T, N>& b) {
  if (detail::fwd::is_nan(b)) return a;
  if (detail::fwd::is_nan(a)) return b;
  return b > a ? b : a;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> fmax(const Dual<T, N>& a, const S& s) {
  return fmax(a, Dual<T, N>(detail::fwd::real<T>(s)));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> fmax(const S& s, const Dual<T, N>& b) {
  return fmax(Dual<T, N>(detail::fwd::real<T>(s)), b);
}
template <class T, int N>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> fmin(const Dual<T, N>& a, const Dual<T, N>& b) {
  if (detail::fwd::is_nan(b)) return a;
  if (detail::fwd::is_nan(a)) return b;
  return b < a ? b : a;
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> fmin(const Dual<T, N>& a, const S& s) {
  return fmin(a, Dual<T, N>(detail::fwd::real<T>(s)));
}
template <class T, int N, detail::fwd::Scalar<T> S>
KOKKOS_INLINE_FUNCTION constexpr Dual<T, N> fmin(const S& s, const Dual<T, N>& b) {
  return fmin(Dual<T, N>(detail::fwd::real<T>(s)), b);
}

}  // namespace costate::ad

// ------------------------------------------------------------------- Kokkos

namespace Kokkos {
/// Identities of Kokkos' built-in reducers for a Dual: the value's identity
/// with zero tangents (Sum: 0; Prod: 1; Max: lowest; Min: largest).
template <class T, int N>
struct reduction_identity<costate::ad::Dual<T, N>> {
  using D = costate::ad::Dual<T, N>;
  KOKKOS_FORCEINLINE_FUNCTION constexpr static D sum() { return D(reduction_identity<T>::sum()); }
  KOKKOS_FORCEINLINE_FUNCTION constexpr static D prod() { return D(reduction_identity<T>::prod()); }
  KOKKOS_FORCEINLINE_FUNCTION constexpr static D max() { return D(reduction_identity<T>::max()); }
  KOKKOS_FORCEINLINE_FUNCTION constexpr static D min() { return D(reduction_identity<T>::min()); }
};
}  // namespace Kokkos
