// Verification API: ad::taylor_test observes order 2 for correct gradients
// (costate's own, or given) and order 1 for wrong ones, stops at the
// round-off floor; ad::check_gradient agrees with central differences for
// correct gradients and flags the wrong component of a wrong one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/ad/verification.hpp"
#include "costate/core/error.hpp"

namespace {

namespace ad = costate::ad;

template <class T>
using Scalar = std::decay_t<T>;

/// An observed order of a correct gradient is 2 + O(h): with h₀ = 1e-2
/// relative, within 0.1 of 2 for these smooth functions.
constexpr double kOrderSlack = 0.1;

/// Extended Rosenbrock (workload W3's function), n even.
struct Rosenbrock {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    T f = 0.0;
    for (std::size_t i = 0; i + 1 < x.size(); i += 2) {
      T a = x[i + 1] - x[i] * x[i];
      T b = 1.0 - x[i];
      f += 100.0 * a * a + b * b;
    }
    return f;
  }
};

/// exp, log, sqrt, pow, atan2, tanh mixed.
struct Mixed {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::atan2;
    using std::exp;
    using std::log;
    using std::pow;
    using std::sqrt;
    using std::tanh;
    T f = exp(x[0] * x[1]) / (1.0 + x[2] * x[2]) + log(1.0 + x[0] * x[0]) * sqrt(x[1]);
    f += pow(x[2], 3) - atan2(x[1], x[0]) * tanh(x[2] - x[0]);
    return f;
  }
};

/// W2 residual (shared/BENCHMARKS.md) and the least-squares functional
/// J = ½‖F(x)‖², whose gradient is Jᵀ F = vjp(F, x, F(x)).
struct W2 {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::exp;
    using std::sin;
    std::vector<T> f(16);
    for (int i = 0; i < 16; ++i) {
      const double c = i + 1;
      T s = 0.0;
      for (int j = 0; j < 16; ++j) s += sin(x[j] * c) * exp(-x[i] * x[j] / 16.0);
      f[static_cast<std::size_t>(i)] = s + x[i] * x[i] * x[i];
    }
    return f;
  }
};
struct HalfSquaredW2 {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    const auto F = W2{}(x);
    T J = 0.0;
    for (const auto& Fi : F) J += 0.5 * Fi * Fi;
    return J;
  }
};

std::vector<double> w2_point() {
  std::vector<double> x(16);
  for (int j = 0; j < 16; ++j) x[static_cast<std::size_t>(j)] = 0.5 + 0.03 * j;
  return x;
}

void expect_order_two(const ad::TaylorTestResult& r, const std::string& what) {
  EXPECT_TRUE(r.passed) << what << "\n" << r.report();
  ASSERT_EQ(r.orders.size(), 6u) << what << ": 7 steps above the floor\n" << r.report();
  for (double o : r.orders) EXPECT_NEAR(o, 2.0, kOrderSlack) << what << "\n" << r.report();
  EXPECT_GE(r.min_order, 1.9);
  EXPECT_GE(r.fitted_order, r.min_order - 1e-12);  // the fit averages the observed orders
  for (std::size_t k = 1; k < r.steps.size(); ++k) EXPECT_EQ(r.steps[k], 0.5 * r.steps[k - 1]);
}

// -------------------------------------------------------------- Taylor test

TEST(TaylorTest, CorrectGradientsConvergeAtOrderTwo) {
  expect_order_two(ad::taylor_test(Rosenbrock{}, {-1.2, 1.0, 0.8, 0.6}, {0.3, -0.7, 0.5, 0.1}),
                   "Rosenbrock");
  expect_order_two(ad::taylor_test(Mixed{}, {0.4, 1.7, -0.8}, {1.0, 0.5, -0.25}), "Mixed");
  expect_order_two(ad::taylor_test(HalfSquaredW2{}, w2_point(), std::vector<double>(16, 1.0)),
                   "1/2 |W2|^2");
}

TEST(TaylorTest, GivenGradientFromAVectorJacobianProduct) {
  // ∇(½‖F‖²) = Jᵀ F: a gradient assembled by the caller, checked as data.
  const auto x = w2_point();
  const auto F = W2{}(x);
  const auto g = ad::vjp(W2{}, x, F).cotangent;
  std::vector<double> dir(16);
  for (std::size_t j = 0; j < 16; ++j) dir[j] = std::cos(3.0 * static_cast<double>(j));
  // The functional in plain double only: a given gradient never needs AD.
  const auto J = [](const std::vector<double>& p) {
    double s = 0.0;
    for (double Fi : W2{}(p)) s += 0.5 * Fi * Fi;
    return s;
  };
  expect_order_two(ad::taylor_test(J, x, dir, g), "given J^T F");
}

TEST(TaylorTest, WrongGradientFailsWithOrderOne) {
  const std::vector<double> x = {0.4, 1.7, -0.8}, dir = {1.0, 0.5, -0.25};
  const auto correct = ad::gradient(Mixed{}, x);
  // A wrapper that perturbs the gradient: 10% on one component.
  const auto wrong = [&](const std::vector<double>& p) {
    auto g = ad::gradient(Mixed{}, p);
    g[1] *= 1.1;
    return g;
  };
  const ad::TaylorTestResult r = ad::taylor_test(Mixed{}, x, dir, wrong);
  EXPECT_FALSE(r.passed) << r.report();
  ASSERT_FALSE(r.orders.empty());
  // r(h) ≈ |0.1·g₁·δ₁|·h once h is small: the last orders are 1 to within 0.1.
  EXPECT_NEAR(r.orders.back(), 1.0, 0.1) << r.report();
  EXPECT_LT(r.min_order, 1.2);
  EXPECT_NE(r.message.find("wrong"), std::string::npos) << r.message;
  EXPECT_NE(r.report().find("FAILED"), std::string::npos);
  // The same gradient as a vector: same verdict. The correct one passes.
  auto gw = correct;
  gw[1] *= 1.1;
  EXPECT_FALSE(ad::taylor_test(Mixed{}, x, dir, gw).passed);
  EXPECT_TRUE(ad::taylor_test(Mixed{}, x, dir, correct).passed);
}

TEST(TaylorTest, StopsAtTheRoundoffFloor) {
  // Affine J: the remainder is round-off from the first step; the gradient's
  // first-order term matches, which is all an affine J can show.
  const auto affine = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    T y = 3.0 * x[0] - 2.0 * x[1] + 1.0;
    return y;
  };
  const auto a = ad::taylor_test(affine, {0.3, 0.9}, {1.0, 1.0});
  EXPECT_TRUE(a.passed) << a.report();
  EXPECT_TRUE(a.reached_roundoff_floor);
  EXPECT_TRUE(a.orders.empty());
  EXPECT_EQ(a.steps.size(), 1u);

  // J = x + 1e-6 x²: r(h) = 1e-6 h² falls below 1e3·ε·|J| ≈ 2.2e-13 after
  // r(h₀/2⁴) = 1e-10/256 ≈ 3.9e-13: five steps above the floor, four orders.
  const auto weak = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    T y = x[0] + 1e-6 * x[0] * x[0];
    return y;
  };
  const auto w = ad::taylor_test(weak, {1.0}, {1.0});
  EXPECT_TRUE(w.passed) << w.report();
  EXPECT_TRUE(w.reached_roundoff_floor);
  EXPECT_EQ(w.steps.size(), 6u) << w.report();
  EXPECT_EQ(w.orders.size(), 4u) << w.report();
  for (double o : w.orders) EXPECT_NEAR(o, 2.0, 0.05) << w.report();
}

TEST(TaylorTest, NonFiniteValuesAreAFailureNotAnException) {
  // sqrt at p + h·δ < 0 for the first step: NaN.
  const auto f = [](const auto& x) {
    using std::sqrt;
    using T = Scalar<decltype(x[0])>;
    T y = sqrt(x[0]);
    return y;
  };
  const auto r = ad::taylor_test(f, {1e-3}, {-1.0}, {.initial_step = 0.5});
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.message.find("not finite"), std::string::npos) << r.message;
}

TEST(TaylorTest, CallerMistakesThrow) {
  const std::vector<double> x = {0.4, 1.7, -0.8};
  EXPECT_THROW(ad::taylor_test(Mixed{}, x, {1.0, 0.0}), costate::Error);
  EXPECT_THROW(ad::taylor_test(Mixed{}, x, {0.0, 0.0, 0.0}), costate::Error);
  EXPECT_THROW(ad::taylor_test(Mixed{}, x, {1.0, 0.0, 0.0}, std::vector<double>{1.0}),
               costate::Error);
  EXPECT_THROW(ad::taylor_test(Mixed{}, x, {1.0, 0.0, 0.0}, {.initial_step = 0.0}), costate::Error);
  EXPECT_THROW(ad::taylor_test(Mixed{}, x, {1.0, 0.0, 0.0}, {.halvings = 0}), costate::Error);
  EXPECT_THROW(ad::taylor_test(Mixed{}, x, {1.0, 0.0, 0.0}, {.floor_factor = 0.5}), costate::Error);
  try {
    ad::TaylorTestOptions{.initial_step = -1.0}.validate();
    FAIL();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("initial_step = -1"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------ gradient check

TEST(CheckGradient, CostateGradientsPass) {
  const auto r = ad::check_gradient(Mixed{}, {0.4, 1.7, -0.8});
  EXPECT_TRUE(r.passed) << r.report();
  // Central differences at h = 1e-6: agreement to ~1e-9 relative here.
  EXPECT_LT(r.max_rel_error, 1e-8) << r.report();
  const auto w = ad::check_gradient(HalfSquaredW2{}, w2_point());
  EXPECT_TRUE(w.passed) << w.report();
  EXPECT_LT(w.max_rel_error, 1e-7) << w.report();
  EXPECT_EQ(w.ad, ad::gradient(HalfSquaredW2{}, w2_point()));
}

TEST(CheckGradient, CatchesAWrongComponent) {
  const std::vector<double> x = {-1.2, 1.0, 0.8, 0.6};
  auto g = ad::gradient(Rosenbrock{}, x);
  g[2] *= 1.0 + 1e-4;  // an error far below a Taylor test's notice at h₀ = 1e-2
  const auto r = ad::check_gradient(Rosenbrock{}, x, g);
  EXPECT_FALSE(r.passed) << r.report();
  EXPECT_EQ(r.failures, 1);
  EXPECT_EQ(r.worst, 2);
  EXPECT_NEAR(r.rel_error[2], 1e-4, 1e-6) << r.report();
  EXPECT_NE(r.report().find("FAIL"), std::string::npos);
  EXPECT_THROW(ad::check_gradient(Rosenbrock{}, x, std::vector<double>{1.0}), costate::Error);
}

TEST(CheckGradient, ZeroComponentsAreNotFailedByDifferenceNoise) {
  // J = x1·(sin²x0 + cos²x0): ∂J/∂x0 = x1(2 sin cos − 2 cos sin) = 0 exactly
  // in AD, while the difference quotient sees the last-bit noise of
  // sin² + cos² ≈ 1: ±ε/(2h) ≈ 5.6e-11 at x0 = 0.5 (glibc). That is within
  // the round-off allowance 100·ε|J|/h, not within rtol·max(|ad|, |fd|).
  const auto f = [](const auto& x) {
    using std::cos;
    using std::sin;
    using T = Scalar<decltype(x[0])>;
    T y = x[1] * (sin(x[0]) * sin(x[0]) + cos(x[0]) * cos(x[0]));
    return y;
  };
  const std::vector<double> x = {0.5, 1.0};
  const auto r = ad::check_gradient(f, x);
  EXPECT_TRUE(r.passed) << r.report();
  EXPECT_EQ(r.ad[0], 0.0);
  EXPECT_LT(std::abs(r.fd[0]), 1e-10) << r.report();
  if (r.fd[0] != 0.0) {  // noise present (it is with glibc's sin/cos at 0.5)
    const auto strict = ad::check_gradient(f, x, {.roundoff_factor = 0.0});
    EXPECT_FALSE(strict.passed) << strict.report();
    EXPECT_EQ(strict.worst, 0);
  }
  EXPECT_THROW(ad::check_gradient(f, x, {.step = -1.0}), costate::Error);
  EXPECT_THROW(ad::check_gradient(f, x, {.rtol = -1.0}), costate::Error);
}

// --------------------------------- differences that measure their noise

TEST(RichardsonDifference, ExactForSmoothFunctionsAndSpreadMeasuresNoise) {
  // φ(h) = e^{2h}: φ'(0) = 2. Richardson removes the h² term; the spread at
  // the chosen step is the error left (round-off ~ε/h, truncation ~h⁴).
  const ad::Difference d = ad::richardson_difference([](double h) { return std::exp(2.0 * h); }, 1e-2, 10);
  EXPECT_NEAR(d.value, 2.0, 1e-9);
  EXPECT_LT(d.spread, 1e-8);
  // The same with noise of amplitude 1e-7 in φ (a deterministic hash of h):
  // the spread rises with it, and the answer stays within a few spreads.
  auto noisy = [](double h) {
    const double u = std::sin(1e6 * h + 0.3) * 43758.5453;
    return std::exp(2.0 * h) + 1e-7 * (u - std::floor(u) - 0.5);
  };
  const ad::Difference n = ad::richardson_difference(noisy, 1e-2, 10);
  EXPECT_GT(n.spread, 1e-7);
  // 3 spreads: check_against_differences' default spread_factor.
  EXPECT_LT(std::abs(n.value - 2.0), 3.0 * n.spread + 1e-9) << n.value << " " << n.spread;
  EXPECT_THROW(ad::richardson_difference(noisy, 1e-2, 2), costate::Error);
}

TEST(CheckAgainstDifferences, TinyComponentsAtAnOptimumAreAtTheNoiseFloorAndWrongOnesFail) {
  // J = (x0 − 1)² + 3 x1 + 1e-3·sin(x2) at x0 = 1 + 1e-9 (an optimum in x0):
  // ∂J/∂x0 = 2e-9, differences of J ~ 3 carry round-off ~ε·3/h ≈ 1e-11
  // relative to the small component — its relative error is meaningless.
  const auto J = [](const std::vector<double>& x) {
    return (x[0] - 1.0) * (x[0] - 1.0) + 3.0 * x[1] + 1e-3 * std::sin(x[2]);
  };
  const std::vector<double> x = {1.0 + 1e-9, 2.0, 0.5};
  const std::vector<double> g = {2e-9, 3.0, 1e-3 * std::cos(0.5)};
  // 1e-6 relative to the component and to the norm (3): tight for these
  // exact differences.
  const ad::DifferenceCheckOptions tight{.rtol = 1e-6, .norm_rtol = 1e-6};
  const ad::GradientCheckResult r = ad::check_gradient_with_noise(J, x, g, 1e-3, 8, tight);
  EXPECT_TRUE(r.passed) << r.report();
  EXPECT_EQ(r.at_noise_floor, (std::vector<int>{1, 0, 0})) << r.report();
  EXPECT_EQ(r.noise_floor_names({"x0", "x1", "x2"}), "x0");
  // A wrong small-but-resolved component (1 % off in ∂J/∂x2 = 8.8e-4, well
  // above the norm floor 3e-6) fails, and is the worst.
  std::vector<double> wrong = g;
  wrong[2] *= 1.01;
  const ad::GradientCheckResult w = ad::check_gradient_with_noise(J, x, wrong, 1e-3, 8, tight);
  EXPECT_FALSE(w.passed) << w.report();
  EXPECT_EQ(w.failures, 1);
  EXPECT_EQ(w.worst, 2);
  // A wrong component cannot widen its own tolerance: the floor uses the
  // smaller of the two norms.
  std::vector<double> huge = g;
  huge[0] = 1e3;
  const ad::GradientCheckResult h = ad::check_gradient_with_noise(J, x, huge, 1e-3, 8, tight);
  EXPECT_FALSE(h.passed) << h.report();
  EXPECT_EQ(h.worst, 0);
}

}  // namespace
