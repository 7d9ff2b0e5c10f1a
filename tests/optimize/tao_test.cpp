// optimize::minimize on PETSc TAO: the Rosenbrock function (minimum 0 at
// (1, 1)) by every method, an active bound, a point where the function
// cannot be evaluated, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "costate/core/error.hpp"
#include "costate/optimize/tao.hpp"

namespace {

namespace opt = costate::optimize;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// f = (1 - x)² + 100 (y - x²)², with its exact gradient and Hessian.
opt::Objective rosenbrock() {
  opt::Objective f;
  f.n = 2;
  f.objective_and_gradient = [](std::span<const double> x, std::span<double> g) {
    const double a = 1 - x[0], b = x[1] - x[0] * x[0];
    g[0] = -2 * a - 400 * x[0] * b;
    g[1] = 200 * b;
    return a * a + 100 * b * b;
  };
  f.hessian = [](std::span<const double> x, std::span<double> H) {
    H[0] = 2 - 400 * (x[1] - x[0] * x[0]) + 800 * x[0] * x[0];
    H[1] = H[2] = -400 * x[0];
    H[3] = 200;
  };
  return f;
}

TEST(Tao, EveryMethodFindsTheRosenbrockMinimum) {
  const std::vector<double> x0{-1.2, 1.0}, lo{-kInf, -kInf}, hi{kInf, kInf};
  for (opt::TaoMethod m : opt::all_tao_methods()) {
    SCOPED_TRACE(opt::to_string(m));
    const auto r = opt::minimize(rosenbrock(), x0, lo, hi,
                                 {.method = m, .gatol = 1e-10, .grtol = 0, .max_iterations = 500});
    EXPECT_TRUE(r.converged) << r.termination;
    EXPECT_EQ(r.method, opt::to_string(m));
    // |g| ≤ 1e-10 near a minimum with Hessian eigenvalues ~0.4..1000: the
    // point is within ~1e-9 of (1, 1); 1e-7 is the check.
    EXPECT_NEAR(r.x[0], 1.0, 1e-7);
    EXPECT_NEAR(r.x[1], 1.0, 1e-7);
    EXPECT_LT(r.objective, 1e-14);
    EXPECT_EQ(r.history.size(), static_cast<std::size_t>(r.iterations) + 1);
    // Iteration 0 is f(-1.2, 1) = 24.2 (bntr reports its iterate after
    // choosing the initial trust radius, which may already have moved).
    if (m != opt::TaoMethod::Bntr) {
      EXPECT_NEAR(r.history.front().objective, 24.2, 1e-12);
    }
    EXPECT_GE(r.function_evaluations, r.iterations);
    if (opt::uses_hessian(m)) EXPECT_GT(r.hessian_evaluations, 0);
    else EXPECT_EQ(r.hessian_evaluations, 0);
  }
}

/// With y ≤ 0.5 the minimum moves onto the bound: minimise (1-x)² +
/// 100(0.5 - x²)² over x, i.e. x ≈ 0.7071 (where 0.5 = x² nearly), y = 0.5.
TEST(Tao, ActiveBoundHoldsTheSolution) {
  const auto r = opt::minimize(rosenbrock(), std::vector<double>{0.0, 0.0}, std::vector<double>{-2, -2},
                               std::vector<double>{2, 0.5}, {.gatol = 1e-10, .grtol = 0});
  EXPECT_TRUE(r.converged) << r.termination;
  EXPECT_EQ(r.x[1], 0.5);
  // d/dx [(1-x)² + 100(0.5-x²)²] = 0 at the solution.
  const double x = r.x[0];
  EXPECT_NEAR(-2 * (1 - x) - 400 * x * (0.5 - x * x), 0.0, 1e-8);
}

/// The history's objective_gradient_norm is ‖∇f‖₂ at each iterate, not
/// TAO's residual: from (-1.2, 1) it starts at ‖(-215.6, -88)‖, and on an
/// active bound it stays at the bound's multiplier |∂f/∂y| while TAO's
/// residual (the projected gradient) goes to zero.
TEST(Tao, TheHistoryRecordsTheGradientNormAtEachIterate) {
  const opt::Objective f = rosenbrock();
  auto norm_at = [&](std::span<const double> x) {
    std::vector<double> g(2);
    f.objective_and_gradient(x, g);
    return std::hypot(g[0], g[1]);
  };
  const std::vector<double> x0{-1.2, 1.0}, lo{-kInf, -kInf}, hi{kInf, kInf};
  for (opt::TaoMethod m : opt::all_tao_methods()) {
    SCOPED_TRACE(opt::to_string(m));
    const auto r = opt::minimize(f, x0, lo, hi, {.method = m, .gatol = 1e-10, .grtol = 0, .max_iterations = 500});
    for (const auto& it : r.history) EXPECT_TRUE(std::isfinite(it.objective_gradient_norm)) << it.iteration;
    if (m != opt::TaoMethod::Bntr) {  // bntr's iteration 0 may already have moved (above)
      EXPECT_EQ(r.history.front().objective_gradient_norm, std::hypot(215.6, 88.0));
    }
    EXPECT_EQ(r.history.back().objective_gradient_norm, norm_at(r.x));
  }
  // y ≤ 0.5 active at the solution: ∂f/∂y = 200 (0.5 − x²) ≈ 0 there too
  // (the minimum over x nearly sits at x² = 0.5), so bound y ≤ 0.2 instead:
  // ∂f/∂y = 200 (0.2 − x²) is far from zero at the constrained minimum.
  const auto r = opt::minimize(f, std::vector<double>{0.0, 0.0}, std::vector<double>{-2, -2},
                               std::vector<double>{2, 0.2}, {.gatol = 1e-10, .grtol = 0});
  ASSERT_TRUE(r.converged) << r.termination;
  EXPECT_EQ(r.x[1], 0.2);
  const double multiplier = std::abs(200 * (0.2 - r.x[0] * r.x[0]));
  EXPECT_GT(multiplier, 1.0);
  EXPECT_LT(r.history.back().gradient_norm, 1e-8);
  EXPECT_EQ(r.history.back().objective_gradient_norm, norm_at(r.x));
  EXPECT_GT(r.history.back().objective_gradient_norm, multiplier * (1 - 1e-6));
}

/// f = cosh(2(x - 1)) + (y - 1)² "cannot be evaluated" beyond x = 1.2 (it
/// throws, like an ODE that blows up). From (0, 0) the quasi-Newton methods'
/// trial steps overshoot into that region (the curvature grows away from the
/// minimum); their More–Thuente search fails on the infinite value, and the
/// Armijo rescue stage must step back and reach the minimum (measured: 2
/// stages, 9 and 8 iterations). The trust region (bntr) shrinks on it.
TEST(Tao, UnevaluablePointsMakeTheLineSearchStepBack) {
  opt::Objective f;
  f.n = 2;
  f.objective_and_gradient = [](std::span<const double> x, std::span<double> g) {
    if (x[0] > 1.2) throw costate::Error("blows up");
    g[0] = 2 * std::sinh(2 * (x[0] - 1));
    g[1] = 2 * (x[1] - 1);
    return std::cosh(2 * (x[0] - 1)) + (x[1] - 1) * (x[1] - 1);
  };
  f.hessian = [](std::span<const double> x, std::span<double> H) {
    H[0] = 4 * std::cosh(2 * (x[0] - 1));
    H[1] = H[2] = 0;
    H[3] = 2;
  };
  for (opt::TaoMethod m : opt::all_tao_methods()) {
    SCOPED_TRACE(opt::to_string(m));
    const auto r = opt::minimize(f, std::vector<double>{0.0, 0.0}, std::vector<double>{-kInf, -kInf},
                                 std::vector<double>{kInf, kInf},
                                 {.method = m, .gatol = 1e-9, .grtol = 0, .max_iterations = 200});
    EXPECT_TRUE(r.converged) << r.termination << " after " << r.stages << " stages";
    // |g| ≤ 1e-9 with curvatures 4 and 2: within ~3e-10 of (1, 1).
    EXPECT_NEAR(r.x[0], 1.0, 1e-8);
    EXPECT_NEAR(r.x[1], 1.0, 1e-8);
    if (m == opt::TaoMethod::Bqnls || m == opt::TaoMethod::Blmvm) {
      EXPECT_GE(r.non_finite_evaluations, 1) << "never met the wall: the test lost its point";
      EXPECT_GE(r.stages, 2);
    }
  }
}

TEST(Tao, BadArgumentsAreErrors) {
  const std::vector<double> lo{0, 0}, hi{1, 1};
  EXPECT_THROW(opt::minimize(rosenbrock(), std::vector<double>{2, 0}, lo, hi), costate::Error);
  EXPECT_THROW(opt::minimize(rosenbrock(), std::vector<double>{0.5}, lo, hi), costate::Error);
  auto nohess = rosenbrock();
  nohess.hessian = nullptr;
  EXPECT_THROW(opt::minimize(nohess, std::vector<double>{0.5, 0.5}, lo, hi, {.method = opt::TaoMethod::Bntr}),
               costate::Error);
  EXPECT_THROW(opt::minimize(rosenbrock(), std::vector<double>{0.5, 0.5}, lo, hi, {.gatol = -1}), costate::Error);
  try {
    (void)opt::tao_method_from_string("lbfgs");
    ADD_FAILURE();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bqnls, blmvm, bnls, bntr"), std::string::npos);
  }
}

}  // namespace
