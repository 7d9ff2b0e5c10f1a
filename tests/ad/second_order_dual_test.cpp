// ad::SecondOrderDual<K> against ad::Dual<ad::Dual<double, 1>, K>: every
// operation on the same numbers gives the same bits (NaNs compare as NaNs:
// their payloads are not specified), random operands with signed zeros,
// infinities and NaNs among them.
#include "costate/ad/second_order_dual.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace {

using costate::ad::Dual;
using costate::ad::SecondOrderDual;
using Dual1 = Dual<double, 1>;

/// Equal bits, or both NaN.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  std::uint64_t x = 0, y = 0;
  std::memcpy(&x, &a, sizeof a);
  std::memcpy(&y, &b, sizeof b);
  return x == y;
}

template <int K>
::testing::AssertionResult same_number(const SecondOrderDual<K>& s,
                                       const Dual<Dual1, K>& d) {
  auto fail = [&](const std::string& part, double a, double b) {
    return ::testing::AssertionFailure() << part << ": " << a << " vs nested " << b;
  };
  if (!same(s.value(), d.value().value())) return fail("v", s.value(), d.value().value());
  if (!same(s.value_dot(), d.value().tangent(0)))
    return fail("v dot", s.value_dot(), d.value().tangent(0));
  for (int l = 0; l < K; ++l) {
    if (!same(s.lanes_value()[l], d.tangent(l).value()))
      return fail("lane " + std::to_string(l), s.lanes_value()[l], d.tangent(l).value());
    if (!same(s.lanes_dot()[l], d.tangent(l).tangent(0)))
      return fail("lane dot " + std::to_string(l), s.lanes_dot()[l], d.tangent(l).tangent(0));
  }
  return ::testing::AssertionSuccess();
}

template <int K>
class Operands {
 public:
  explicit Operands(unsigned seed) : gen_(seed) {}
  double number() {
    // Mostly ordinary numbers; now and then a special value.
    const int pick = static_cast<int>(gen_() % 40);
    switch (pick) {
      case 0: return 0.0;
      case 1: return -0.0;
      case 2: return std::numeric_limits<double>::infinity();
      case 3: return std::numeric_limits<double>::quiet_NaN();
      case 4: return 1e-310;
      case 5: return -1e300;
      default: return std::uniform_real_distribution<double>(-3.0, 3.0)(gen_);
    }
  }
  Dual<Dual1, K> nested() {
    Dual<Dual1, K> d(Dual1(number(), {number()}));
    for (int l = 0; l < K; ++l) d.tangent(l) = Dual1(number(), {number()});
    return d;
  }

 private:
  std::mt19937_64 gen_;
};

template <int K>
void every_operation(unsigned seed) {
  using S = SecondOrderDual<K>;
  using N = Dual<Dual1, K>;
  Operands<K> op(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const N a = op.nested(), b = op.nested();
    const S sa(a), sb(b);
    const double c = op.number();
    ASSERT_TRUE(same_number(sa, a));
    EXPECT_TRUE(same_number(S(sa.nested()), a));
    EXPECT_TRUE(same_number(sa + sb, N(a + b)));
    EXPECT_TRUE(same_number(sa - sb, N(a - b)));
    EXPECT_TRUE(same_number(sa * sb, N(a * b)));
    EXPECT_TRUE(same_number(sa / sb, N(a / b)));
    EXPECT_TRUE(same_number(-sa, N(-a)));
    EXPECT_TRUE(same_number(sa + c, N(a + c)));
    EXPECT_TRUE(same_number(c + sa, N(c + a)));
    EXPECT_TRUE(same_number(sa - c, N(a - c)));
    EXPECT_TRUE(same_number(c - sa, N(c - a)));
    EXPECT_TRUE(same_number(sa * c, N(a * c)));
    EXPECT_TRUE(same_number(c * sa, N(c * a)));
    EXPECT_TRUE(same_number(sa / c, N(a / c)));
    EXPECT_TRUE(same_number(c / sa, N(c / a)));
    EXPECT_TRUE(same_number(sa * 3, N(a * 3)));
    EXPECT_TRUE(same_number(2 - sa, N(2 - a)));
    EXPECT_TRUE(same_number(sa / 7, N(a / 7)));
    {
      S s = sa;
      N d = a;
      s += sb, d += b;
      EXPECT_TRUE(same_number(s, d));
      s -= sa, d -= a;
      EXPECT_TRUE(same_number(s, d));
      s *= sb, d *= b;
      EXPECT_TRUE(same_number(s, d));
      s /= sa, d /= a;
      EXPECT_TRUE(same_number(s, d));
      s += c, d += c;
      EXPECT_TRUE(same_number(s, d));
      s -= 2, d -= 2;
      EXPECT_TRUE(same_number(s, d));
      s *= c, d *= c;
      EXPECT_TRUE(same_number(s, d));
      s /= c, d /= c;
      EXPECT_TRUE(same_number(s, d));
    }
    EXPECT_EQ(sa < sb, a < b);
    EXPECT_EQ(sa == sb, a == b);
    EXPECT_EQ(sa >= c, a >= c);
    EXPECT_EQ(c != sb, c != b);
    using std::exp, std::log, std::sin, std::sqrt, std::pow, std::tanh, std::abs, std::atan2;
    using std::max, std::min, std::hypot;
    EXPECT_TRUE(same_number(exp(sa), N(exp(a))));
    EXPECT_TRUE(same_number(log(sa), N(log(a))));
    EXPECT_TRUE(same_number(sin(sa), N(sin(a))));
    EXPECT_TRUE(same_number(sqrt(sa), N(sqrt(a))));
    EXPECT_TRUE(same_number(tanh(sa), N(tanh(a))));
    EXPECT_TRUE(same_number(abs(sa), N(abs(a))));
    EXPECT_TRUE(same_number(pow(sa, sb), N(pow(a, b))));
    EXPECT_TRUE(same_number(pow(sa, 2.5), N(pow(a, 2.5))));
    EXPECT_TRUE(same_number(pow(sa, 2), N(pow(a, 2))));
    EXPECT_TRUE(same_number(pow(1.5, sb), N(pow(1.5, b))));
    EXPECT_TRUE(same_number(atan2(sa, sb), N(atan2(a, b))));
    EXPECT_TRUE(same_number(hypot(sa, c), N(hypot(a, c))));
    EXPECT_TRUE(same_number(max(sa, sb), N(max(a, b))));
    EXPECT_TRUE(same_number(min(c, sb), N(min(c, b))));
    EXPECT_EQ(isnan(sa), isnan(a));
    EXPECT_EQ(isfinite(sb), isfinite(b));
  }
}

TEST(SecondOrderDualTest, EveryOperationHasTheNestedDualsBits4) { every_operation<4>(1); }
TEST(SecondOrderDualTest, EveryOperationHasTheNestedDualsBits6) { every_operation<6>(2); }
TEST(SecondOrderDualTest, EveryOperationHasTheNestedDualsBits8) { every_operation<8>(3); }

TEST(SecondOrderDualTest, ConstantsAndAccessors) {
  const SecondOrderDual<4> zero;
  EXPECT_EQ(zero.value(), 0.0);
  const SecondOrderDual<4> three = 3;
  EXPECT_EQ(three.value(), 3.0);
  EXPECT_EQ(three.value_dot(), 0.0);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(three.lanes_value()[l], 0.0);
  static_assert(costate::ad::is_second_order_dual_v<const SecondOrderDual<6>>);
  static_assert(!costate::ad::is_second_order_dual_v<Dual<Dual1, 6>>);
  static_assert(sizeof(SecondOrderDual<6>) == 14 * sizeof(double));
}

}  // namespace
