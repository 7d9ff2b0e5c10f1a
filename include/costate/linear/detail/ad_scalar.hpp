#pragma once
// Internals shared by linear/ and nonlinear/: which AD scalar a solve works
// on (double, ad::Dual<double, N>, ad::Real), its values and tangents. Not a
// public header of its own.

#include <cstddef>
#include <type_traits>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"

namespace costate::linear::detail {

template <class T>
inline constexpr bool is_plain_v = std::is_same_v<T, double>;

template <class T>
struct is_dual_double : std::false_type {};
template <int N>
struct is_dual_double<ad::Dual<double, N>> : std::true_type {
  static constexpr int size = N;
};
/// Dual<double, N> (one level of forward mode over double).
template <class T>
inline constexpr bool is_dual_double_v = is_dual_double<T>::value;

/// ad::Real = Reverse<double>.
template <class T>
inline constexpr bool is_real_v = std::is_same_v<T, ad::Real>;

/// The scalar types the solves differentiate.
template <class T>
inline constexpr bool is_supported_scalar_v = is_plain_v<T> || is_dual_double_v<T> || is_real_v<T>;

/// The scalar of a solve whose operands are TA and TB: double with X is X,
/// X with X is X; anything else is a compile-time error.
template <class TA, class TB>
struct common_scalar {
  static_assert(is_supported_scalar_v<TA> && is_supported_scalar_v<TB>,
                "costate solves work on double, ad::Dual<double, N> and ad::Real only");
  static_assert(is_plain_v<TA> || is_plain_v<TB> || std::is_same_v<TA, TB>,
                "costate solves cannot mix two different AD types (e.g. Dual and Real) in one "
                "solve: convert the constant operand to double or to the other type");
  using type = std::conditional_t<is_plain_v<TA>, TB, TA>;
};
template <class TA, class TB>
using common_scalar_t = typename common_scalar<TA, TB>::type;

/// Number of tangents carried by T (0 for double and Real).
template <class T>
constexpr int tangent_count() {
  if constexpr (is_dual_double_v<T>)
    return is_dual_double<T>::size;
  else
    return 0;
}

/// The double value of a supported scalar.
template <class T>
inline double value_of(const T& v) {
  if constexpr (is_plain_v<T>)
    return v;
  else
    return v.value();
}

/// Tangent k of a Dual; 0 for any other scalar.
template <class T>
inline double tangent_of(const T& v, int k) {
  if constexpr (is_dual_double_v<T>)
    return v.tangent(k);
  else {
    (void)v;
    (void)k;
    return 0.0;
  }
}

/// True when v is a Real recorded on the tape (an active value).
template <class T>
inline bool is_active(const T& v) {
  if constexpr (is_real_v<T>)
    return v.is_active();
  else {
    (void)v;
    return false;
  }
}

}  // namespace costate::linear::detail
