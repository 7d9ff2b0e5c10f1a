// Tests of ad::Dual<T, N>: construction and accessors, arithmetic with every
// operand kind, comparisons, every elementary function against its analytic
// derivative AND a central finite difference, second derivatives through
// nesting, and the documented choices at non-smooth points.
#include "costate/ad/dual.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

namespace {

using costate::ad::Dual;
using D1 = Dual<double, 1>;
using D2 = Dual<double, 2>;
using D3 = Dual<double, 3>;
using DD1 = Dual<D1, 1>;  // second derivatives of functions of one variable
using DD2 = Dual<D2, 2>;  // Hessians of functions of two variables

// ---- tolerances (relative to max(1, |reference|))

/// The tangent against a hand-written derivative: both are a few roundings
/// of the same quantity, possibly by different formulas (1 + tan² vs 1/cos²).
constexpr double kAnalyticTol = 1e-13;
/// Central difference (f(x+h) − f(x−h)) / 2h with h = kFdStep: truncation
/// error h²|f'''|/6 ≈ 2e-11·|f'''| plus round-off ≈ eps·|f|/h ≈ 2e-11·|f|;
/// the test points keep |f|, |f'''| below ~10³.
constexpr double kFdStep = 1e-5;
constexpr double kFdTol = 1e-7;

double scale(double ref) { return std::max(1.0, std::fabs(ref)); }

#define EXPECT_CLOSE(actual, expected, tol)                          \
  do {                                                               \
    const double e_ = (expected);                                    \
    EXPECT_NEAR((actual), e_, (tol)*scale(e_)) << "expected " << e_; \
  } while (0)

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// x as the variable of a Dual<Dual<double, N>, N>: direction i at both
/// levels, so tangent(i).tangent(j) of a result is ∂²f/∂x_i∂x_j.
template <int N>
Dual<Dual<double, N>, N> seed2(double v, int i) {
  using I = Dual<double, N>;
  Dual<I, N> x(I::seed(v, i));
  x.set_tangent(i, I(1.0));
  return x;
}

// ---------------------------------------------------------------- API basics

TEST(Dual, ConstructsAndExposesValueAndTangents) {
  const D2 zero;
  EXPECT_EQ(zero.value(), 0.0);
  EXPECT_EQ(zero.tangent(0), 0.0);
  EXPECT_EQ(zero.tangent(1), 0.0);

  const D2 three = 3;  // from int
  EXPECT_EQ(three.value(), 3.0);
  EXPECT_EQ(three.tangent(1), 0.0);
  const D2 half = 0.5f;  // from float
  EXPECT_EQ(half.value(), 0.5);

  const DD1 nested = 2.0;  // from double through one nesting level
  EXPECT_EQ(nested.value().value(), 2.0);
  EXPECT_EQ(nested.value().tangent(0), 0.0);
  EXPECT_EQ(nested.tangent(0).value(), 0.0);

  const D2 x{1.5, {1.0, -2.0}};
  EXPECT_EQ(x.value(), 1.5);
  EXPECT_EQ(x.tangent(0), 1.0);
  EXPECT_EQ(x.tangent(1), -2.0);
  EXPECT_EQ(x.tangents()[1], -2.0);

  const D3 s = D3::seed(4.0, 2);
  EXPECT_EQ(s.value(), 4.0);
  EXPECT_EQ(s.tangent(0), 0.0);
  EXPECT_EQ(s.tangent(1), 0.0);
  EXPECT_EQ(s.tangent(2), 1.0);

  D2 y;
  y.set_value(7.0);
  y.set_tangent(1, 5.0);
  y.tangent(0) = -1.0;
  y.tangents()[1] += 1.0;
  y.value() += 1.0;
  EXPECT_EQ(y.value(), 8.0);
  EXPECT_EQ(y.tangent(0), -1.0);
  EXPECT_EQ(y.tangent(1), 6.0);

  constexpr D2 c = 2.5;  // usable in constant expressions
  static_assert(c.value() == 2.5 && c.tangent(1) == 0.0);
}

TEST(Dual, TraitsAndHelpers) {
  using costate::ad::dual_traits;
  using costate::ad::is_dual_v;
  using costate::ad::primal;
  using costate::ad::primal_type_t;
  using costate::ad::value;
  static_assert(is_dual_v<D1> && is_dual_v<const DD2> && !is_dual_v<double>);
  static_assert(std::is_same_v<dual_traits<DD2>::value_type, D2>);
  static_assert(dual_traits<DD2>::size == 2 && dual_traits<DD2>::depth == 2);
  static_assert(dual_traits<D3>::depth == 1 && dual_traits<D3>::size == 3);
  static_assert(std::is_same_v<dual_traits<DD1>::primal_type, double>);
  static_assert(std::is_same_v<primal_type_t<DD2>, double> &&
                std::is_same_v<primal_type_t<float>, float>);
  // Plain data: a Kokkos View value type, copied by memcpy.
  static_assert(std::is_trivially_copyable_v<D3> && std::is_standard_layout_v<D3>);
  static_assert(sizeof(D3) == 4 * sizeof(double) && sizeof(DD2) == 9 * sizeof(double));

  const DD1 x = seed2<1>(1.25, 0);
  EXPECT_EQ(value(2.5), 2.5);
  EXPECT_EQ(value(3), 3);
  EXPECT_EQ(value(x).value(), 1.25);
  EXPECT_EQ(primal(x), 1.25);
  EXPECT_EQ(primal(D2{-3.0, {1.0, 1.0}}), -3.0);
  EXPECT_EQ(primal(4.0), 4.0);
}

// ---------------------------------------------------------------- arithmetic

TEST(Dual, ArithmeticBetweenDuals) {
  const D2 a{1.5, {1.0, 2.0}};
  const D2 b{-0.5, {3.0, -1.0}};
  const D2 sum = a + b, diff = a - b, prod = a * b, quot = a / b, neg = -a, pos = +a;
  for (int k = 0; k < 2; ++k) {
    EXPECT_CLOSE(sum.tangent(k), a.tangent(k) + b.tangent(k), kAnalyticTol);
    EXPECT_CLOSE(diff.tangent(k), a.tangent(k) - b.tangent(k), kAnalyticTol);
    EXPECT_CLOSE(prod.tangent(k), a.tangent(k) * b.value() + a.value() * b.tangent(k),
                 kAnalyticTol);
    EXPECT_CLOSE(quot.tangent(k),
                 (a.tangent(k) * b.value() - a.value() * b.tangent(k)) / (b.value() * b.value()),
                 kAnalyticTol);
    EXPECT_EQ(neg.tangent(k), -a.tangent(k));
    EXPECT_EQ(pos.tangent(k), a.tangent(k));
  }
  EXPECT_EQ(sum.value(), 1.0);
  EXPECT_EQ(diff.value(), 2.0);
  EXPECT_EQ(prod.value(), -0.75);
  EXPECT_EQ(quot.value(), -3.0);
  EXPECT_EQ(neg.value(), -1.5);
}

TEST(Dual, ArithmeticWithDoubleAndIntOperandsInBothOrders) {
  const D2 a{2.0, {1.0, -3.0}};
  auto expect = [](const D2& r, double v, double d0, double d1) {
    EXPECT_CLOSE(r.value(), v, kAnalyticTol);
    EXPECT_CLOSE(r.tangent(0), d0, kAnalyticTol);
    EXPECT_CLOSE(r.tangent(1), d1, kAnalyticTol);
  };
  expect(a + 0.5, 2.5, 1.0, -3.0);
  expect(0.5 + a, 2.5, 1.0, -3.0);
  expect(a + 2, 4.0, 1.0, -3.0);
  expect(2 + a, 4.0, 1.0, -3.0);
  expect(a - 0.5, 1.5, 1.0, -3.0);
  expect(0.5 - a, -1.5, -1.0, 3.0);
  expect(a - 3, -1.0, 1.0, -3.0);
  expect(3 - a, 1.0, -1.0, 3.0);
  expect(a * 1.5, 3.0, 1.5, -4.5);
  expect(1.5 * a, 3.0, 1.5, -4.5);
  expect(a * 3, 6.0, 3.0, -9.0);
  expect(3 * a, 6.0, 3.0, -9.0);
  expect(a / 4.0, 0.5, 0.25, -0.75);
  expect(a / 4, 0.5, 0.25, -0.75);
  expect(3.0 / a, 1.5, -0.75, 2.25);  // d(3/a) = −3/a² ȧ
  expect(3 / a, 1.5, -0.75, 2.25);
  expect(a * 2u, 4.0, 2.0, -6.0);    // unsigned
  expect(2.0f * a, 4.0, 2.0, -6.0);  // float
  expect(a + 1L, 3.0, 1.0, -3.0);    // long

  // The value type of a nested Dual is also a valid operand.
  const DD1 x = seed2<1>(2.0, 0);
  const DD1 y = x * D1{3.0, {1.0}};
  EXPECT_EQ(y.value().value(), 6.0);
  EXPECT_EQ(y.value().tangent(0), 3.0 + 2.0);  // inner: d/dx (x·(3 + x))
  EXPECT_EQ(y.tangent(0).value(), 3.0);
}

TEST(Dual, CompoundAssignments) {
  const D2 b{-0.5, {3.0, -1.0}};
  auto fresh = [] { return D2{1.5, {1.0, 2.0}}; };
  D2 a = fresh();
  a += b;
  EXPECT_EQ(a.value(), 1.0);
  EXPECT_EQ(a.tangent(1), 1.0);
  a = fresh();
  a -= b;
  EXPECT_EQ(a.value(), 2.0);
  EXPECT_EQ(a.tangent(0), -2.0);
  a = fresh();
  a *= b;
  EXPECT_EQ(a.value(), -0.75);
  EXPECT_CLOSE(a.tangent(0), 1.0 * -0.5 + 1.5 * 3.0, kAnalyticTol);
  a = fresh();
  a /= b;
  EXPECT_EQ(a.value(), -3.0);
  EXPECT_CLOSE(a.tangent(1), (2.0 * -0.5 - 1.5 * -1.0) / 0.25, kAnalyticTol);

  a = fresh();
  a += 2;
  a -= 0.5;
  EXPECT_EQ(a.value(), 3.0);
  EXPECT_EQ(a.tangent(0), 1.0);
  a *= 2;
  EXPECT_EQ(a.value(), 6.0);
  EXPECT_EQ(a.tangent(1), 4.0);
  a /= 4.0;
  EXPECT_EQ(a.value(), 1.5);
  EXPECT_EQ(a.tangent(1), 1.0);

  // Aliasing: x op= x (through a reference, as generic code would meet it).
  D2 x = fresh();
  const D2& same = x;
  x *= same;  // d(x²) = 2x ẋ
  EXPECT_EQ(x.value(), 2.25);
  EXPECT_CLOSE(x.tangent(1), 2 * 1.5 * 2.0, kAnalyticTol);
  x = fresh();
  x /= same;  // x/x = 1, derivative 0
  EXPECT_EQ(x.value(), 1.0);
  EXPECT_EQ(x.tangent(0), 0.0);
  EXPECT_EQ(x.tangent(1), 0.0);
  x = fresh();
  x += same;
  EXPECT_EQ(x.value(), 3.0);
  EXPECT_EQ(x.tangent(1), 4.0);
  x -= same;
  EXPECT_EQ(x.value(), 0.0);
  EXPECT_EQ(x.tangent(1), 0.0);

  DD1 n = seed2<1>(3.0, 0);
  n *= D1(2.0);  // by the value type
  n += 1;
  EXPECT_EQ(n.value().value(), 7.0);
  EXPECT_EQ(n.tangent(0).value(), 2.0);
}

TEST(Dual, ComparisonsUseValuesOnly) {
  const D2 a{1.0, {1.0, 0.0}};
  const D2 a2{1.0, {-5.0, 3.0}};  // same value, other tangents
  const D2 b{2.0, {0.0, 0.0}};
  EXPECT_TRUE(a == a2);
  EXPECT_FALSE(a != a2);
  EXPECT_TRUE(a < b && a <= b && b > a && b >= a && a <= a2 && a >= a2 && a != b);
  EXPECT_FALSE(a < a2 || a > a2 || b < a || b <= a);
  // with double and int, both orders
  EXPECT_TRUE(a == 1.0 && 1.0 == a && a == 1 && 1 == a);
  EXPECT_TRUE(a != 2.0 && 2.0 != a && a != 2 && 2 != a);
  EXPECT_TRUE(a < 1.5 && 0.5 < a && a < 2 && 0 < a);
  EXPECT_TRUE(a <= 1.0 && 1.0 <= a && a <= 1 && 1 <= a);
  EXPECT_TRUE(a > 0.5 && 1.5 > a && a > 0 && 2 > a);
  EXPECT_TRUE(a >= 1.0 && 1.0 >= a && a >= 1 && 1 >= a);
  EXPECT_FALSE(a > 1.0 || 1.0 > a || a < 1 || 1 < a);
  // NaN compares unequal, as for double
  const D1 nan = kNaN;
  EXPECT_TRUE(nan != nan);
  EXPECT_FALSE(nan == nan || nan < 0.0 || nan >= 0.0);
  // nested: the innermost value decides
  const DD1 x = seed2<1>(2.0, 0);
  EXPECT_TRUE(x > 1.0 && x == 2 && D1(3.0) > x && x < D1(3.0));
}

// ------------------------------------------------------ elementary functions

/// For f and its derivative df at each point x0, checks
///  - the value is bit-identical to f on doubles;
///  - the tangents of a 3-direction Dual are f'(x0)·ẋ (analytic);
///  - f'(x0) against a central difference of f;
///  - nesting: Dual<Dual<double,1>,1> gives f'(x0) at both levels and a
///    second derivative matching a central difference of the AD derivative.
template <class F, class DF>
void check_unary(const char* name, F f, DF df, std::initializer_list<double> points) {
  const double dir[3] = {1.0, -2.0, 0.5};
  for (const double x0 : points) {
    SCOPED_TRACE(::testing::Message() << name << " at x = " << x0);
    const double v = f(x0);
    const double d = df(x0);

    const D3 y = f(D3{x0, {dir[0], dir[1], dir[2]}});
    EXPECT_EQ(y.value(), v);
    for (int k = 0; k < 3; ++k) EXPECT_CLOSE(y.tangent(k), d * dir[k], kAnalyticTol);

    const double fd = (f(x0 + kFdStep) - f(x0 - kFdStep)) / (2 * kFdStep);
    EXPECT_CLOSE(y.tangent(0), fd, kFdTol);

    const DD1 yy = f(seed2<1>(x0, 0));
    EXPECT_EQ(yy.value().value(), v);
    EXPECT_CLOSE(yy.value().tangent(0), d, kAnalyticTol);
    EXPECT_CLOSE(yy.tangent(0).value(), d, kAnalyticTol);
    auto ad_derivative = [&](double x) { return f(D1::seed(x, 0)).tangent(0); };
    const double fd2 = (ad_derivative(x0 + kFdStep) - ad_derivative(x0 - kFdStep)) / (2 * kFdStep);
    EXPECT_CLOSE(yy.tangent(0).tangent(0), fd2, kFdTol);
  }
}

// Generic wrappers written the documented way: `using std::f; f(x)`.
#define COSTATE_TEST_UNARY(fn) \
  [](const auto& x) {          \
    using std::fn;             \
    return fn(x);              \
  }

TEST(DualFunctions, PowersAndRoots) {
  check_unary("sqrt", COSTATE_TEST_UNARY(sqrt), [](double x) { return 0.5 / std::sqrt(x); },
              {0.3, 1.0, 2.5, 100.0});
  check_unary("cbrt", COSTATE_TEST_UNARY(cbrt),
              [](double x) { return 1.0 / (3.0 * std::pow(std::cbrt(x), 2)); },
              {-8.0, -0.3, 0.7, 27.0});
}

TEST(DualFunctions, ExponentialsAndLogarithms) {
  check_unary("exp", COSTATE_TEST_UNARY(exp), [](double x) { return std::exp(x); },
              {-3.0, 0.0, 0.5, 4.0});
  check_unary("expm1", COSTATE_TEST_UNARY(expm1), [](double x) { return std::exp(x); },
              {-1.0, 1e-3, 0.2, 3.0});
  check_unary("log", COSTATE_TEST_UNARY(log), [](double x) { return 1.0 / x; },
              {0.1, 1.0, 3.7, 50.0});
  check_unary("log1p", COSTATE_TEST_UNARY(log1p), [](double x) { return 1.0 / (1.0 + x); },
              {-0.5, 1e-4, 2.0});
  check_unary("log2", COSTATE_TEST_UNARY(log2), [](double x) { return 1.0 / (x * std::log(2.0)); },
              {0.2, 1.0, 10.0});
  check_unary("log10", COSTATE_TEST_UNARY(log10),
              [](double x) { return 1.0 / (x * std::log(10.0)); }, {0.2, 1.0, 10.0});
}

TEST(DualFunctions, Trigonometric) {
  check_unary("sin", COSTATE_TEST_UNARY(sin), [](double x) { return std::cos(x); },
              {-2.0, 0.0, 0.7, 3.0, 15.0});
  check_unary("cos", COSTATE_TEST_UNARY(cos), [](double x) { return -std::sin(x); },
              {-2.0, 0.0, 0.7, 3.0, 15.0});
  check_unary("tan", COSTATE_TEST_UNARY(tan),
              [](double x) { return 1.0 / (std::cos(x) * std::cos(x)); }, {-1.2, 0.0, 0.4, 1.3});
  check_unary("asin", COSTATE_TEST_UNARY(asin), [](double x) { return 1.0 / std::sqrt(1 - x * x); },
              {-0.9, 0.0, 0.5, 0.95});
  check_unary("acos", COSTATE_TEST_UNARY(acos),
              [](double x) { return -1.0 / std::sqrt(1 - x * x); }, {-0.9, 0.0, 0.5, 0.95});
  check_unary("atan", COSTATE_TEST_UNARY(atan), [](double x) { return 1.0 / (1 + x * x); },
              {-3.0, 0.0, 0.5, 10.0});
}

TEST(DualFunctions, Hyperbolic) {
  check_unary("sinh", COSTATE_TEST_UNARY(sinh), [](double x) { return std::cosh(x); },
              {-2.0, 0.0, 0.5, 3.0});
  check_unary("cosh", COSTATE_TEST_UNARY(cosh), [](double x) { return std::sinh(x); },
              {-2.0, 0.0, 0.5, 3.0});
  check_unary("tanh", COSTATE_TEST_UNARY(tanh),
              [](double x) { return 1.0 / (std::cosh(x) * std::cosh(x)); }, {-2.0, 0.0, 0.5, 3.0});
  check_unary("asinh", COSTATE_TEST_UNARY(asinh),
              [](double x) { return 1.0 / std::sqrt(x * x + 1); }, {-2.0, 0.0, 0.5, 30.0});
  check_unary("acosh", COSTATE_TEST_UNARY(acosh),
              [](double x) { return 1.0 / std::sqrt(x * x - 1); }, {1.1, 2.0, 10.0});
  check_unary("atanh", COSTATE_TEST_UNARY(atanh), [](double x) { return 1.0 / (1 - x * x); },
              {-0.9, 0.0, 0.5});
}

TEST(DualFunctions, ErrorFunctions) {
  const double k = 2.0 / std::sqrt(std::acos(-1.0));
  check_unary("erf", COSTATE_TEST_UNARY(erf), [k](double x) { return k * std::exp(-x * x); },
              {-2.0, 0.0, 0.3, 1.5});
  check_unary("erfc", COSTATE_TEST_UNARY(erfc), [k](double x) { return -k * std::exp(-x * x); },
              {-2.0, 0.0, 0.3, 1.5});
}

TEST(DualFunctions, AbsoluteValueAwayFromZero) {
  check_unary("abs", COSTATE_TEST_UNARY(abs), [](double x) { return x > 0 ? 1.0 : -1.0; },
              {-2.0, -1e-3, 0.4, 3.0});
  check_unary("fabs", COSTATE_TEST_UNARY(fabs), [](double x) { return x > 0 ? 1.0 : -1.0; },
              {-2.0, 0.4});
}

TEST(DualFunctions, RoundingHasZeroDerivative) {
  const auto zero = [](double) { return 0.0; };
  // Points off the jumps, where the finite difference is 0 too.
  check_unary("floor", COSTATE_TEST_UNARY(floor), zero, {-2.5, -0.3, 0.4, 7.9});
  check_unary("ceil", COSTATE_TEST_UNARY(ceil), zero, {-2.5, -0.3, 0.4, 7.9});
  check_unary("round", COSTATE_TEST_UNARY(round), zero, {-2.7, -0.3, 0.4, 7.9});
  check_unary("trunc", COSTATE_TEST_UNARY(trunc), zero, {-2.5, -0.3, 0.4, 7.9});
  // Values exactly as <cmath>, including halves (away from zero), −0 and
  // large numbers.
  for (const double x :
       {2.5, -2.5, 0.5, -0.5, 1.5, -0.3, 0.49999999999999994, 4503599627370497.0, -1e300, 3.0}) {
    SCOPED_TRACE(x);
    const D2 d{x, {1.0, 1.0}};
    EXPECT_EQ(round(d).value(), std::round(x));
    EXPECT_EQ(std::signbit(round(d).value()), std::signbit(std::round(x)));
    EXPECT_EQ(floor(d).value(), std::floor(x));
    EXPECT_EQ(ceil(d).value(), std::ceil(x));
    EXPECT_EQ(trunc(d).value(), std::trunc(x));
    EXPECT_EQ(round(d).tangent(0), 0.0);
    EXPECT_EQ(floor(d).tangent(1), 0.0);
    EXPECT_EQ(ceil(d).tangent(0), 0.0);
    EXPECT_EQ(trunc(d).tangent(1), 0.0);
  }
  // At a jump the derivative is 0 as well (documented choice).
  EXPECT_EQ(floor(D1{2.0, {1.0}}).tangent(0), 0.0);
  EXPECT_TRUE(std::isnan(round(D1{kNaN, {1.0}}).value()));
}

TEST(DualFunctions, Classification) {
  EXPECT_TRUE(isnan(D1(kNaN)));
  EXPECT_FALSE(isnan(D1(1.0)));
  EXPECT_TRUE(isinf(D1(-kInf)));
  EXPECT_FALSE(isinf(D1(kNaN)));
  EXPECT_TRUE(isfinite(D2{1.0, {kInf, kNaN}}));  // the value decides
  EXPECT_FALSE(isfinite(D1(kInf)));
  EXPECT_TRUE(isnan(DD1(kNaN)));
}

// ------------------------------------------------------ binary functions

/// For f(x, y) with partials fx, fy at (a, b): every operand combination —
/// (Dual, Dual), (Dual, double), (double, Dual), and with `with_int` also
/// (Dual, int) where b is an integer and (int, Dual) where a is — against the analytic
/// partials and central differences; and the Hessian from
/// Dual<Dual<double,2>,2> against central differences of the AD gradient.
template <class F, class FX, class FY>
void check_binary(const char* name, F f, FX fx, FY fy,
                  std::initializer_list<std::pair<double, double>> points, bool with_int = false,
                  bool hessian = true) {
  for (const auto& [a, b] : points) {
    SCOPED_TRACE(::testing::Message() << name << " at (" << a << ", " << b << ")");
    const double v = f(a, b);
    const double dx = fx(a, b);
    const double dy = fy(a, b);

    const D2 r = f(D2::seed(a, 0), D2::seed(b, 1));
    EXPECT_EQ(r.value(), v);
    EXPECT_CLOSE(r.tangent(0), dx, kAnalyticTol);
    EXPECT_CLOSE(r.tangent(1), dy, kAnalyticTol);

    const D1 rx = f(D1::seed(a, 0), b);
    EXPECT_EQ(rx.value(), v);
    EXPECT_CLOSE(rx.tangent(0), dx, kAnalyticTol);
    const D1 ry = f(a, D1::seed(b, 0));
    EXPECT_EQ(ry.value(), v);
    EXPECT_CLOSE(ry.tangent(0), dy, kAnalyticTol);
    if (with_int && static_cast<int>(b) == b) {
      const D1 rxi = f(D1::seed(a, 0), static_cast<int>(b));
      EXPECT_EQ(rxi.value(), v);
      EXPECT_CLOSE(rxi.tangent(0), dx, kAnalyticTol);
    }
    if (with_int && static_cast<int>(a) == a) {
      const D1 ryi = f(static_cast<int>(a), D1::seed(b, 0));
      EXPECT_EQ(ryi.value(), v);
      EXPECT_CLOSE(ryi.tangent(0), dy, kAnalyticTol);
    }

    const double fdx = (f(a + kFdStep, b) - f(a - kFdStep, b)) / (2 * kFdStep);
    const double fdy = (f(a, b + kFdStep) - f(a, b - kFdStep)) / (2 * kFdStep);
    EXPECT_CLOSE(r.tangent(0), fdx, kFdTol);
    EXPECT_CLOSE(r.tangent(1), fdy, kFdTol);

    if (!hessian) continue;
    const DD2 h = f(seed2<2>(a, 0), seed2<2>(b, 1));
    EXPECT_EQ(h.value().value(), v);
    EXPECT_CLOSE(h.tangent(0).value(), dx, kAnalyticTol);
    EXPECT_CLOSE(h.value().tangent(1), dy, kAnalyticTol);
    auto grad = [&](double x, double y) { return f(D2::seed(x, 0), D2::seed(y, 1)); };
    for (int i = 0; i < 2; ++i) {
      const double e0 = i == 0 ? kFdStep : 0.0, e1 = i == 1 ? kFdStep : 0.0;
      const D2 gp = grad(a + e0, b + e1), gm = grad(a - e0, b - e1);
      for (int j = 0; j < 2; ++j) {
        SCOPED_TRACE(::testing::Message() << "d2f/dx" << i << "dx" << j);
        EXPECT_CLOSE(h.tangent(i).tangent(j), (gp.tangent(j) - gm.tangent(j)) / (2 * kFdStep),
                     kFdTol);
      }
    }
    EXPECT_CLOSE(h.tangent(0).tangent(1), h.tangent(1).tangent(0), kAnalyticTol);  // symmetric
  }
}

#define COSTATE_TEST_BINARY(fn)      \
  [](const auto& x, const auto& y) { \
    using std::fn;                   \
    return fn(x, y);                 \
  }

TEST(DualFunctions, ArithmeticOperatorsAllOperandKinds) {
  check_binary(
      "+", [](const auto& x, const auto& y) { return x + y; }, [](double, double) { return 1.0; },
      [](double, double) { return 1.0; }, {{1.5, -0.7}, {2.0, 3.0}}, true);
  check_binary(
      "-", [](const auto& x, const auto& y) { return x - y; }, [](double, double) { return 1.0; },
      [](double, double) { return -1.0; }, {{1.5, -0.7}, {2.0, 3.0}}, true);
  check_binary(
      "*", [](const auto& x, const auto& y) { return x * y; }, [](double, double y) { return y; },
      [](double x, double) { return x; }, {{1.5, -0.7}, {2.0, 3.0}}, true);
  check_binary(
      "/", [](const auto& x, const auto& y) { return x / y; },
      [](double, double y) { return 1.0 / y; }, [](double x, double y) { return -x / (y * y); },
      {{1.5, -0.7}, {2.0, 3.0}}, true);
}

TEST(DualFunctions, Pow) {
  const auto dx = [](double x, double y) { return y * std::pow(x, y - 1); };
  const auto dy = [](double x, double y) { return std::pow(x, y) * std::log(x); };
  check_binary("pow", COSTATE_TEST_BINARY(pow), dx, dy,
               {{1.7, 2.3}, {0.5, -1.5}, {3.5, 0.5}, {2.0, 3.0}, {1.25, -2.0}}, true);
}

TEST(DualFunctions, Atan2AndHypot) {
  check_binary(
      "atan2", COSTATE_TEST_BINARY(atan2), [](double y, double x) { return x / (x * x + y * y); },
      [](double y, double x) { return -y / (x * x + y * y); },
      {{1.0, 2.0}, {-1.0, 0.5}, {0.3, -2.0}, {-2.0, -1.0}, {2.0, 3.0}}, true);
  check_binary(
      "hypot", COSTATE_TEST_BINARY(hypot), [](double x, double y) { return x / std::hypot(x, y); },
      [](double x, double y) { return y / std::hypot(x, y); },
      {{3.0, 4.0}, {-1.0, 0.5}, {1e-3, 2.0}, {-2.0, 5.0}}, true);
}

TEST(DualFunctions, MinMaxAwayFromTies) {
  const auto first_if = [](bool first) { return first ? 1.0 : 0.0; };
  // Piecewise linear: the Hessian is 0, which the central differences see
  // away from the kink.
  check_binary(
      "max", COSTATE_TEST_BINARY(max), [&](double x, double y) { return first_if(!(y > x)); },
      [&](double x, double y) { return first_if(y > x); }, {{1.0, 2.0}, {3.0, -1.0}, {-2.0, -3.0}},
      true);
  check_binary(
      "min", COSTATE_TEST_BINARY(min), [&](double x, double y) { return first_if(!(y < x)); },
      [&](double x, double y) { return first_if(y < x); }, {{1.0, 2.0}, {3.0, -1.0}, {-2.0, -3.0}},
      true);
  check_binary(
      "fmax", COSTATE_TEST_BINARY(fmax), [&](double x, double y) { return first_if(!(y > x)); },
      [&](double x, double y) { return first_if(y > x); }, {{1.0, 2.0}, {3.0, -1.0}, {-2.0, -3.0}},
      true);
  check_binary(
      "fmin", COSTATE_TEST_BINARY(fmin), [&](double x, double y) { return first_if(!(y < x)); },
      [&](double x, double y) { return first_if(y < x); }, {{1.0, 2.0}, {3.0, -1.0}, {-2.0, -3.0}},
      true);
}

// ------------------------------------------------------- second derivatives

TEST(DualNesting, SecondDerivativeOfSinTimesExp) {
  // d²/dx² [sin(x) eˣ] = 2 cos(x) eˣ
  for (const double x0 : {-1.0, 0.0, 0.7, 2.5}) {
    const DD1 x = seed2<1>(x0, 0);
    const DD1 f = sin(x) * exp(x);
    EXPECT_EQ(f.value().value(), std::sin(x0) * std::exp(x0));
    EXPECT_CLOSE(f.tangent(0).value(), (std::cos(x0) + std::sin(x0)) * std::exp(x0), kAnalyticTol);
    EXPECT_CLOSE(f.tangent(0).tangent(0), 2 * std::cos(x0) * std::exp(x0), kAnalyticTol);
  }
}

TEST(DualNesting, HessianOfPow) {
  // x^y: f_xx = y(y−1)x^(y−2), f_xy = x^(y−1)(1 + y ln x), f_yy = x^y ln²x
  for (const auto& [a, b] : {std::pair{1.7, 2.3}, std::pair{0.6, -0.5}, std::pair{3.0, 2.0}}) {
    const DD2 f = pow(seed2<2>(a, 0), seed2<2>(b, 1));
    const double l = std::log(a);
    EXPECT_CLOSE(f.tangent(0).tangent(0), b * (b - 1) * std::pow(a, b - 2), kAnalyticTol);
    EXPECT_CLOSE(f.tangent(0).tangent(1), std::pow(a, b - 1) * (1 + b * l), kAnalyticTol);
    EXPECT_CLOSE(f.tangent(1).tangent(0), std::pow(a, b - 1) * (1 + b * l), kAnalyticTol);
    EXPECT_CLOSE(f.tangent(1).tangent(1), std::pow(a, b) * l * l, kAnalyticTol);
  }
}

TEST(DualNesting, ThirdLevel) {
  // d³/dx³ x⁴ = 24x through Dual<Dual<Dual<double,1>,1>,1>.
  using DDD = Dual<DD1, 1>;
  DDD x(seed2<1>(1.5, 0));
  x.set_tangent(0, DD1(D1(1.0)));
  const DDD f = x * x * x * x;
  EXPECT_EQ(costate::ad::primal(f), std::pow(1.5, 4));
  EXPECT_CLOSE(f.tangent(0).tangent(0).tangent(0), 24 * 1.5, kAnalyticTol);
}

// -------------------------------------------------- non-smooth points (doc)

TEST(DualNonSmooth, AbsAtZeroHasZeroDerivative) {
  for (const double z : {0.0, -0.0}) {
    const D2 r = abs(D2{z, {1.0, -1.0}});
    EXPECT_EQ(r.value(), 0.0);
    EXPECT_FALSE(std::signbit(r.value()));
    EXPECT_EQ(r.tangent(0), 0.0);
    EXPECT_EQ(r.tangent(1), 0.0);
    EXPECT_EQ(fabs(D1{z, {2.0}}).tangent(0), 0.0);
  }
  const D1 n = abs(D1{kNaN, {1.0}});
  EXPECT_TRUE(std::isnan(n.value()));
}

TEST(DualNonSmooth, SqrtAndCbrtAtZero) {
  // Zero incoming tangent → 0; non-zero → ±inf; never NaN.
  const D3 s = sqrt(D3{0.0, {0.0, 1.0, -2.0}});
  EXPECT_EQ(s.value(), 0.0);
  EXPECT_EQ(s.tangent(0), 0.0);
  EXPECT_EQ(s.tangent(1), kInf);
  EXPECT_EQ(s.tangent(2), -kInf);
  const D3 c = cbrt(D3{0.0, {0.0, 3.0, -1.0}});
  EXPECT_EQ(c.value(), 0.0);
  EXPECT_EQ(c.tangent(0), 0.0);
  EXPECT_EQ(c.tangent(1), kInf);
  EXPECT_EQ(c.tangent(2), -kInf);
  // A constant at 0 stays a constant.
  const D2 k = sqrt(D2(0.0));
  EXPECT_EQ(k.tangent(0), 0.0);
  EXPECT_EQ(k.tangent(1), 0.0);
  // Below 0: NaN, as the function.
  EXPECT_TRUE(std::isnan(sqrt(D1{-1.0, {1.0}}).value()));
  // sqrt(−0) is −0, its tangent as at +0.
  EXPECT_EQ(sqrt(D1{-0.0, {2.0}}).tangent(0), kInf);
}

TEST(DualNonSmooth, InfiniteDerivativesAtDomainEdges) {
  // pow at a zero base is guarded like sqrt: zero tangents stay 0.
  const D2 p = pow(D2{0.0, {0.0, 1.0}}, 0.5);
  EXPECT_EQ(p.tangent(0), 0.0);
  EXPECT_EQ(p.tangent(1), kInf);
  // Other singular edges are multiplied out (documented): ±inf where the
  // argument moves, 0·inf = NaN where it does not.
  const D2 a = asin(D2{1.0, {0.0, 1.0}});
  EXPECT_EQ(a.tangent(1), kInf);
  EXPECT_TRUE(std::isnan(a.tangent(0)));
  const D2 l = log(D2{0.0, {0.0, -1.0}});
  EXPECT_EQ(l.value(), -kInf);
  EXPECT_EQ(l.tangent(1), -kInf);
  EXPECT_TRUE(std::isnan(l.tangent(0)));
}

TEST(DualNonSmooth, MinMaxTiesTakeTheFirstArgument) {
  const D2 a{1.0, {1.0, 0.0}};
  const D2 b{1.0, {0.0, 1.0}};
  for (const D2& r : {max(a, b), min(a, b), fmax(a, b), fmin(a, b)}) {
    EXPECT_EQ(r.value(), 1.0);
    EXPECT_EQ(r.tangent(0), 1.0);
    EXPECT_EQ(r.tangent(1), 0.0);
  }
  for (const D2& r : {max(b, a), min(b, a), fmax(b, a), fmin(b, a)}) {
    EXPECT_EQ(r.tangent(0), 0.0);
    EXPECT_EQ(r.tangent(1), 1.0);
  }
  // Ties with a constant: the first argument decides too.
  EXPECT_EQ(max(a, 1.0).tangent(0), 1.0);
  EXPECT_EQ(max(1.0, a).tangent(0), 0.0);
  EXPECT_EQ(min(a, 1).tangent(0), 1.0);
  EXPECT_EQ(min(1, a).tangent(0), 0.0);
  EXPECT_EQ(fmax(a, 1.0).tangent(0), 1.0);
  EXPECT_EQ(fmin(1.0, a).tangent(0), 0.0);
  // Like std::max / std::min on the values.
  EXPECT_EQ(max(D1(-0.0), D1(0.0)).value(), std::max(-0.0, 0.0));
}

TEST(DualNonSmooth, FminFmaxWithNaNReturnTheOtherOperand) {
  const D2 x{2.0, {1.0, 2.0}};
  const D2 nan{kNaN, {5.0, 5.0}};
  for (const D2& r : {fmax(x, nan), fmax(nan, x), fmin(x, nan), fmin(nan, x)}) {
    EXPECT_EQ(r.value(), 2.0);
    EXPECT_EQ(r.tangent(0), 1.0);
    EXPECT_EQ(r.tangent(1), 2.0);
  }
  EXPECT_EQ(fmax(D1{kNaN, {1.0}}, 3.0).value(), 3.0);
  EXPECT_EQ(fmax(D1{kNaN, {1.0}}, 3.0).tangent(0), 0.0);
  EXPECT_EQ(fmin(3, D1{kNaN, {1.0}}).value(), 3.0);
  EXPECT_TRUE(std::isnan(fmax(nan, nan).value()));
  // min/max follow std::min/std::max: a NaN second argument returns the first.
  EXPECT_EQ(max(x, nan).value(), 2.0);
  EXPECT_TRUE(std::isnan(max(nan, x).value()));
}

TEST(DualNonSmooth, PowAtZeroBase) {
  // pow(0, y), y > 0: value 0, ∂/∂y = 0 (no 0·log 0 NaN), ∂/∂x = y·0^(y−1).
  {
    const D2 r = pow(D2::seed(0.0, 0), D2::seed(2.0, 1));
    EXPECT_EQ(r.value(), 0.0);
    EXPECT_EQ(r.tangent(0), 0.0);
    EXPECT_EQ(r.tangent(1), 0.0);
  }
  {
    const D2 r = pow(D2::seed(0.0, 0), D2::seed(1.0, 1));
    EXPECT_EQ(r.tangent(0), 1.0);
    EXPECT_EQ(r.tangent(1), 0.0);
  }
  {
    const D2 r = pow(D2::seed(0.0, 0), D2::seed(0.5, 1));  // vertical tangent in x
    EXPECT_EQ(r.tangent(0), kInf);
    EXPECT_EQ(r.tangent(1), 0.0);
  }
  {
    const D2 r = pow(D2::seed(0.0, 0), D2::seed(0.0, 1));  // 0^0 = 1, constant in x
    EXPECT_EQ(r.value(), 1.0);
    EXPECT_EQ(r.tangent(0), 0.0);
    EXPECT_EQ(r.tangent(1), 0.0);
  }
  EXPECT_EQ(pow(0.0, D1::seed(3.0, 0)).tangent(0), 0.0);
  EXPECT_EQ(pow(0, D1::seed(3.0, 0)).tangent(0), 0.0);
  EXPECT_EQ(pow(D1::seed(0.0, 0), 3).tangent(0), 0.0);
  EXPECT_EQ(pow(D1::seed(0.0, 0), 0).tangent(0), 0.0);
  EXPECT_EQ(pow(D1::seed(5.0, 0), 0).tangent(0), 0.0);
}

TEST(DualNonSmooth, PowOfNegativeBaseWithIntegerExponent) {
  // pow(−2, 3) = −8: ∂/∂x = 3·(−2)² = 12, no log term (∂/∂y = 0, not NaN).
  const D2 r = pow(D2::seed(-2.0, 0), D2::seed(3.0, 1));
  EXPECT_EQ(r.value(), -8.0);
  EXPECT_CLOSE(r.tangent(0), 12.0, kAnalyticTol);
  EXPECT_EQ(r.tangent(1), 0.0);
  EXPECT_CLOSE(pow(D1::seed(-2.0, 0), 3).tangent(0), 12.0, kAnalyticTol);
  EXPECT_CLOSE(pow(D1::seed(-2.0, 0), 3.0).tangent(0), 12.0, kAnalyticTol);
  EXPECT_CLOSE(pow(D1::seed(-1.5, 0), -2).tangent(0), -2 * std::pow(-1.5, -3), kAnalyticTol);
  EXPECT_EQ(pow(-2.0, D1::seed(3.0, 0)).tangent(0), 0.0);
  EXPECT_EQ(pow(-2, D1::seed(3.0, 0)).value(), -8.0);
  // Against a finite difference in x (smooth in x).
  auto f = [](double x) { return std::pow(x, 3.0); };
  EXPECT_CLOSE(r.tangent(0), (f(-2.0 + kFdStep) - f(-2.0 - kFdStep)) / (2 * kFdStep), kFdTol);
  // Second derivative in x through nesting: 6x = −12.
  const DD1 h = pow(seed2<1>(-2.0, 0), 3);
  EXPECT_CLOSE(h.tangent(0).tangent(0), -12.0, kAnalyticTol);
  // A non-integer exponent of a negative base is NaN, as the function.
  EXPECT_TRUE(std::isnan(pow(D1::seed(-2.0, 0), 0.5).value()));
}

TEST(DualNonSmooth, Atan2AndHypotAtTheOrigin) {
  const D2 o = atan2(D2::seed(0.0, 0), D2::seed(0.0, 1));
  EXPECT_EQ(o.value(), std::atan2(0.0, 0.0));
  EXPECT_EQ(o.tangent(0), 0.0);
  EXPECT_EQ(o.tangent(1), 0.0);
  const D2 h = hypot(D2::seed(0.0, 0), D2::seed(0.0, 1));
  EXPECT_EQ(h.value(), 0.0);
  EXPECT_EQ(h.tangent(0), 0.0);
  EXPECT_EQ(h.tangent(1), 0.0);
  EXPECT_EQ(hypot(D1::seed(0.0, 0), 0).tangent(0), 0.0);
  EXPECT_EQ(atan2(0.0, D1::seed(0.0, 0)).tangent(0), 0.0);
}

// ------------------------------------------- every width of the tangent loop

/// f(x) = sin(x)·x/(1 + x²) + x³ − 2/x on Dual<double, N> with tangents
/// ẋ_k = k + 1: each tangent must be f'(x)·(k + 1). Widths cover every
/// branch of detail::fwd::for_each (plain, unroll 2, 4, 8, and above 16).
template <int N>
void check_width() {
  SCOPED_TRACE(::testing::Message() << "N = " << N);
  using D = Dual<double, N>;
  const double x0 = 0.7;
  D x(x0);
  for (int k = 0; k < N; ++k) x.set_tangent(k, k + 1.0);
  D y = sin(x) * x / (1 + x * x) + pow(x, 3) - 2 / x;
  y += x;
  y -= x;
  y *= 2;
  y /= 2.0;
  const double q = 1 + x0 * x0;
  const double d = ((std::cos(x0) * x0 + std::sin(x0)) * q - std::sin(x0) * x0 * 2 * x0) / (q * q) +
                   3 * x0 * x0 + 2 / (x0 * x0);
  for (int k = 0; k < N; ++k) EXPECT_CLOSE(y.tangent(k), d * (k + 1), kAnalyticTol);
  const D z;
  for (int k = 0; k < N; ++k) EXPECT_EQ(z.tangent(k), 0.0);
}

TEST(Dual, EveryTangentLoopWidth) {
  check_width<1>();
  check_width<2>();
  check_width<3>();
  check_width<4>();
  check_width<5>();
  check_width<7>();
  check_width<8>();
  check_width<9>();
  check_width<12>();
  check_width<16>();
  check_width<17>();
  check_width<33>();
}

// ------------------------------------------------------------- generic code

template <class T>
T model(const T& x, const T& y) {
  using std::exp;
  using std::max;
  using std::pow;
  using std::sqrt;
  const T r = sqrt(x * x + y * y);
  return pow(r, 3) * exp(-x) + max(x, 0.5) - 2 * y / (1 + r);
}

TEST(Dual, GenericModelCodeWorksForDoubleAndDual) {
  const double a = 0.8, b = -1.3;
  const D2 g = model(D2::seed(a, 0), D2::seed(b, 1));
  EXPECT_EQ(g.value(), model(a, b));
  const double fdx = (model(a + kFdStep, b) - model(a - kFdStep, b)) / (2 * kFdStep);
  const double fdy = (model(a, b + kFdStep) - model(a, b - kFdStep)) / (2 * kFdStep);
  EXPECT_CLOSE(g.tangent(0), fdx, kFdTol);
  EXPECT_CLOSE(g.tangent(1), fdy, kFdTol);
}

}  // namespace
