#pragma once
/// \file
/// costate::ad::detail::kmath — the elementary functions of plain
/// floating-point numbers that ad::Dual calls on its values: Kokkos'
/// portable math (callable in device kernels), under the names of <cmath>.
///
/// Kokkos 4 has them as Kokkos::sin etc.; Kokkos 3.x as
/// Kokkos::Experimental::sin etc. Kokkos 3.4 lacks round and abs: abs is
/// fabs, round is built from trunc (exactly).
///
/// Every function is constrained to floating-point arguments, so that in
///     using detail::kmath::sin;  sin(v);
/// a `v` of an AD type is not captured here: argument-dependent lookup finds
/// the AD overload (ad::sin for a Dual) instead. Callers convert integer
/// arguments to floating point first.

#include <Kokkos_Macros.hpp>
#include <Kokkos_MathematicalFunctions.hpp>
#include <type_traits>

namespace costate::ad::detail::kmath {

#if KOKKOS_VERSION >= 40000
namespace km = ::Kokkos;
#else
namespace km = ::Kokkos::Experimental;
#endif

template <class X>
concept Real = std::is_floating_point_v<X>;

#define COSTATE_AD_KMATH_UNARY(name)   \
  template <Real X>                    \
  KOKKOS_INLINE_FUNCTION X name(X x) { \
    return km::name(x);                \
  }
COSTATE_AD_KMATH_UNARY(sqrt)
COSTATE_AD_KMATH_UNARY(cbrt)
COSTATE_AD_KMATH_UNARY(exp)
COSTATE_AD_KMATH_UNARY(expm1)
COSTATE_AD_KMATH_UNARY(log)
COSTATE_AD_KMATH_UNARY(log1p)
COSTATE_AD_KMATH_UNARY(log2)
COSTATE_AD_KMATH_UNARY(log10)
COSTATE_AD_KMATH_UNARY(sin)
COSTATE_AD_KMATH_UNARY(cos)
COSTATE_AD_KMATH_UNARY(tan)
COSTATE_AD_KMATH_UNARY(asin)
COSTATE_AD_KMATH_UNARY(acos)
COSTATE_AD_KMATH_UNARY(atan)
COSTATE_AD_KMATH_UNARY(sinh)
COSTATE_AD_KMATH_UNARY(cosh)
COSTATE_AD_KMATH_UNARY(tanh)
COSTATE_AD_KMATH_UNARY(asinh)
COSTATE_AD_KMATH_UNARY(acosh)
COSTATE_AD_KMATH_UNARY(atanh)
COSTATE_AD_KMATH_UNARY(erf)
COSTATE_AD_KMATH_UNARY(erfc)
COSTATE_AD_KMATH_UNARY(fabs)
COSTATE_AD_KMATH_UNARY(floor)
COSTATE_AD_KMATH_UNARY(ceil)
COSTATE_AD_KMATH_UNARY(trunc)
#undef COSTATE_AD_KMATH_UNARY

#define COSTATE_AD_KMATH_BINARY(name)       \
  template <Real X>                         \
  KOKKOS_INLINE_FUNCTION X name(X x, X y) { \
    return km::name(x, y);                  \
  }
COSTATE_AD_KMATH_BINARY(pow)
COSTATE_AD_KMATH_BINARY(atan2)
COSTATE_AD_KMATH_BINARY(hypot)
#undef COSTATE_AD_KMATH_BINARY

/// |x| (Kokkos 3.4 has fabs only).
template <Real X>
KOKKOS_INLINE_FUNCTION X abs(X x) {
  return km::fabs(x);
}

/// Round half away from zero (std::round), from trunc on every Kokkos
/// version (Kokkos 3.4 has no round): x − trunc(x) is exact, so the halves
/// are decided exactly; NaN and ±inf fall through as trunc gives them.
template <Real X>
KOKKOS_INLINE_FUNCTION X round(X x) {
  const X t = km::trunc(x);
  if (x - t >= X(0.5)) return t + X(1);
  if (t - x >= X(0.5)) return t - X(1);
  return t;
}

}  // namespace costate::ad::detail::kmath
