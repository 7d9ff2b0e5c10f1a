// Observed order of accuracy of the steppers, and the accuracy of adaptive
// Dormand–Prince's dense output, on a problem with a closed-form solution.
//
// Problem (manufactured solution): y' = A y + g(t) on [0, 2], with
//   A = [[a, b], [-b, a]],  a = p0 = -0.5,  b = p1 = 2,
//   u(t) = ( sin t + e^{-t/2} cos 2t ,  e^{-t/4} cos 3t ),
//   g(t) = u'(t) - A u(t),  so  y(t) = u(t)  for  y(0) = u(0) = (1, 1).
// It is non-autonomous (g depends on t, so wrong stage times show) and
// coupled (A is not diagonal).
//
// Order: with N = N0·2^k fixed steps, the error at t = 2 behaves like C h^p;
// a least-squares fit of log(error) against log(h) over the halvings must
// give at least p − 0.1 (house style: MFEM's ODE tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/integrate.hpp"

namespace {

namespace ode = costate::ode;

struct Manufactured {
  static std::array<double, 2> exact(double t) {
    return {std::sin(t) + std::exp(-0.5 * t) * std::cos(2.0 * t),
            std::exp(-0.25 * t) * std::cos(3.0 * t)};
  }
  static std::array<double, 2> exact_derivative(double t) {
    return {std::cos(t) + std::exp(-0.5 * t) * (-0.5 * std::cos(2.0 * t) - 2.0 * std::sin(2.0 * t)),
            std::exp(-0.25 * t) * (-0.25 * std::cos(3.0 * t) - 3.0 * std::sin(3.0 * t))};
  }

  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const auto u = exact(t);
    const auto du = exact_derivative(t);
    // g = u' - A u
    const T g0 = du[0] - (p[0] * u[0] + p[1] * u[1]);
    const T g1 = du[1] - (-p[1] * u[0] + p[0] * u[1]);
    dydt[0] = p[0] * y[0] + p[1] * y[1] + g0;
    dydt[1] = -p[1] * y[0] + p[0] * y[1] + g1;
  }
};
static_assert(ode::Model<Manufactured>);

constexpr double kT1 = 2.0;

ode::Problem<Manufactured> make_problem() {
  const auto u0 = Manufactured::exact(0.0);
  return {.model = {}, .y0 = {u0[0], u0[1]}, .p = {-0.5, 2.0}, .tspan = {0.0, kT1}};
}

/// Max-norm error at t1 of a fixed-step run with N steps.
double error_at_end(ode::Method method, int n_steps) {
  ode::IntegratorOptions opt{.method = method, .dt = kT1 / n_steps, .adaptive = false};
  const auto sol = ode::integrate(make_problem(), opt);
  EXPECT_TRUE(sol.summary.success()) << sol.summary.brief_report();
  EXPECT_EQ(sol.summary.steps, n_steps);
  const auto y = sol.state(sol.n_outputs() - 1);
  const auto u = Manufactured::exact(kT1);
  return std::max(std::abs(y[0] - u[0]), std::abs(y[1] - u[1]));
}

/// Least-squares slope of log(err) against log(h).
double fitted_order(const std::vector<double>& h, const std::vector<double>& err) {
  double mx = 0, my = 0;
  const double n = double(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    mx += std::log(h[i]) / n;
    my += std::log(err[i]) / n;
  }
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    sxy += (std::log(h[i]) - mx) * (std::log(err[i]) - my);
    sxx += (std::log(h[i]) - mx) * (std::log(h[i]) - mx);
  }
  return sxy / sxx;
}

// Errors below this are dominated by round-off (≈ 1e-16 per step times up to
// ~1e3 steps, amplified by the problem's modest growth), where the fitted
// slope would flatten; every error in the fits must stay above it.
constexpr double kRoundOffFloor = 1e-12;
// House style: observed order ≥ p − 0.1.
constexpr double kOrderSlack = 0.1;
// And not clearly above p: a steeper slope would mean the problem is
// degenerate for the method (an error constant that vanishes), so the test
// would not be measuring the method's order.
constexpr double kOrderExcess = 0.3;

void check_order(ode::Method method, int n0, int halvings) {
  SCOPED_TRACE(ode::to_string(method));
  std::vector<double> h, err;
  for (int k = 0; k <= halvings; ++k) {
    const int n = n0 << k;
    h.push_back(kT1 / n);
    err.push_back(error_at_end(method, n));
    EXPECT_GT(err.back(), kRoundOffFloor) << "N = " << n << " is in the round-off range";
  }
  const double p = fitted_order(h, err);
  const int expected = ode::order(method);
  std::string table;
  for (std::size_t i = 0; i < h.size(); ++i) {
    char line[96];
    std::snprintf(line, sizeof line, "h = %.6e  error = %.6e\n", h[i], err[i]);
    table += line;
  }
  EXPECT_GE(p, expected - kOrderSlack) << table;
  EXPECT_LE(p, expected + kOrderExcess) << table;
  // Each halving must reduce the error (monotone, asymptotic range).
  for (std::size_t i = 1; i < err.size(); ++i) EXPECT_LT(err[i], err[i - 1]) << table;
  ::testing::Test::RecordProperty("observed_order", std::to_string(p));
}

TEST(Convergence, ExplicitEulerIsFirstOrder) { check_order(ode::Method::ExplicitEuler, 40, 6); }

TEST(Convergence, RK4IsFourthOrder) { check_order(ode::Method::RK4, 10, 5); }

TEST(Convergence, FixedStepDopri5IsFifthOrder) { check_order(ode::Method::Dopri5, 10, 4); }

TEST(Convergence, BackwardEulerIsFirstOrder) { check_order(ode::Method::BackwardEuler, 40, 6); }

TEST(Convergence, CrankNicolsonIsSecondOrder) { check_order(ode::Method::CrankNicolson, 20, 6); }

// Dense output: the 4th-order continuous extension is as accurate as the
// steps themselves. With rtol = atol the local error per step is held near
// rtol and the global error at this problem's scale |y| ≤ 1.2 stays a small
// multiple of rtol (observed ≈ 2 rtol over ~40 steps); a factor 10 leaves
// room for the tolerance-proportionality constant without accepting an
// interpolant that is only first or second order (whose error at these step
// sizes, h ≈ 0.05, would be ≥ 1e-4).
constexpr double kDenseErrorPerRtol = 10.0;

void check_dense_output(double rtol) {
  SCOPED_TRACE("rtol = " + std::to_string(rtol));
  auto problem = make_problem();
  constexpr int kOutputs = 400;
  for (int j = 0; j <= kOutputs; ++j) problem.output_times.push_back(kT1 * j / kOutputs);
  std::vector<double> step_ends;
  ode::IntegratorOptions opt{.rtol = rtol, .atol = rtol};
  opt.on_step = [&](double t) { step_ends.push_back(t); };
  const auto sol = ode::integrate(problem, opt);
  ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
  ASSERT_EQ(sol.n_outputs(), problem.output_times.size());
  ASSERT_EQ(std::int64_t(step_ends.size()), sol.summary.steps);
  // Nearly all outputs fall strictly inside steps, i.e. come from the
  // interpolant (only t0 and t1 are guaranteed step ends).
  std::size_t interior = 0;
  for (double t : problem.output_times)
    interior += std::find(step_ends.begin(), step_ends.end(), t) == step_ends.end() && t != 0.0;
  EXPECT_GE(interior, problem.output_times.size() - 10);
  double max_err = 0.0;
  for (std::size_t j = 0; j < sol.n_outputs(); ++j) {
    EXPECT_EQ(sol.t[j], problem.output_times[j]);
    const auto u = Manufactured::exact(sol.t[j]);
    const auto y = sol.state(j);
    max_err = std::max({max_err, std::abs(y[0] - u[0]), std::abs(y[1] - u[1])});
  }
  EXPECT_LE(max_err, kDenseErrorPerRtol * rtol) << "steps " << sol.summary.steps;

  // Output times never constrain the adaptive steps: the same run with only
  // t0 and t1 takes the same steps and ends on the same bits.
  opt.on_step = nullptr;
  const auto plain = ode::integrate(make_problem(), opt);
  EXPECT_EQ(plain.summary.steps, sol.summary.steps);
  EXPECT_EQ(plain.summary.rejected_steps, sol.summary.rejected_steps);
  EXPECT_EQ(plain.summary.rhs_evaluations, sol.summary.rhs_evaluations);
  const auto a = plain.state(plain.n_outputs() - 1);
  const auto b = sol.state(sol.n_outputs() - 1);
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
}

TEST(DenseOutput, AdaptiveDopri5InteriorOutputsMatchExactSolution) {
  check_dense_output(1e-6);
  check_dense_output(1e-8);
  check_dense_output(1e-10);
}

}  // namespace
