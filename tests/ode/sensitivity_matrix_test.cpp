// ode::sensitivity_matrix — the calibration's residual Jacobian — for every
// stepper it takes: against central differences of the residuals on the same
// replayed steps, and Sᵀr and ½|r|² against the discrete adjoint of the same
// steps (adjoint_sweep on the same scheme), which would catch a replay that
// is not the stepper's own (issue 14: sdirk3 and bdf were replayed as
// explicit Euler).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../support/relative_error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {
namespace {

using test::max_rel_err;
using test::rel_err;

// Central differences with h = 1e-6 relative: O(h²) ≈ 1e-12 truncation and
// O(ε/h) ≈ 1e-10 round-off, plus the replayed Newton solves' residual
// (newton_tol 1e-13; bdf/sdirk3 also 1e-6 of the error tolerance) over h:
// ~1e-7 of the entries' size.
constexpr double kFdRelTol = 1e-6;
// Sᵀr and the adjoint's gradient are the same derivative by two sweeps of
// the same scheme: round-off only.
constexpr double kAdjointRelTol = 1e-10;
constexpr double kFdStep = 1e-6;

Problem<LotkaVolterra> problem() {
  return {LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 4.0}};
}

// Eight observation times, weights not all 1, one missing value.
WeightedObservations observations() {
  WeightedObservations o;
  o.n_states = 2;
  for (int k = 1; k <= 8; ++k) {
    const double t = 0.5 * k;
    o.times.push_back(t);
    o.data.push_back(1.0 + 0.5 * std::sin(1.3 * t));
    o.data.push_back(k == 3 ? NAN : 0.8 + 0.4 * std::cos(0.9 * t));
    o.weights.push_back(1.0 + 0.1 * k);
    o.weights.push_back(2.0);
  }
  return o;
}

struct Steps {
  std::vector<double> times;
  std::vector<int> orders;
};

std::vector<double> stops_of(const WeightedObservations& obs, double t1) {
  std::vector<double> s = obs.times;
  if (s.back() < t1) s.push_back(t1);
  return s;
}

// The steps the gradient would take: fixed dt for the fixed-step methods, the
// adaptive run for sdirk3/bdf; dopri5 replays sdirk3's steps (any step
// sequence landing on the observations is a discrete solution to
// differentiate; the scheme is dopri5's 5th-order step on it).
Steps steps_for(const IntegratorOptions& opt, const Problem<LotkaVolterra>& prob,
                const WeightedObservations& obs) {
  const System sys = make_system(prob.model, obs, 2, 4);
  const std::vector<double> stops = stops_of(obs, prob.t1());
  if (opt.method == Method::Sdirk3 || opt.method == Method::Bdf || opt.method == Method::Dopri5) {
    IntegratorOptions o = opt;
    if (o.method == Method::Dopri5) o.method = Method::Sdirk3;
    o.stop_at_outputs = true;
    ImplicitStepPlan plan = plan_implicit_steps(sys, prob.p, prob.y0, prob.t0(), prob.t1(), o, stops);
    EXPECT_TRUE(plan.summary.success()) << plan.summary.message;
    if (opt.method == Method::Dopri5) plan.orders.clear();
    return {plan.times, plan.orders};
  }
  Steps s;
  const double dt = opt.dt;
  for (int i = 0; i <= static_cast<int>(std::lround(prob.t1() / dt)); ++i) s.times.push_back(i * dt);
  s.times.back() = prob.t1();
  return s;
}

IntegratorOptions options_for(Method m) {
  IntegratorOptions o{.method = m, .rtol = 1e-7, .atol = 1e-9, .newton_tol = 1e-13};
  if (m == Method::ExplicitEuler || m == Method::RK4 || m == Method::BackwardEuler ||
      m == Method::CrankNicolson)
    o.dt = 0.01;
  return o;
}

class SensitivityMatrix : public ::testing::TestWithParam<Method> {};

TEST_P(SensitivityMatrix, MatchesCentralDifferencesAndTheAdjoint) {
  const Method method = GetParam();
  const IntegratorOptions opt = options_for(method);
  const auto prob = problem();
  const auto obs = observations();
  const Steps steps = steps_for(opt, prob, obs);
  ASSERT_GE(steps.times.size(), 2u);
  const ResidualSensitivities rs = sensitivity_matrix(prob, obs, opt, steps.times, steps.orders);
  const std::size_t np = 4, n = 2, m = np + n, rows = rs.residuals.size();
  ASSERT_EQ(rows, obs.n_residuals());
  ASSERT_EQ(rs.n_columns, m);

  // Central differences of the residuals, column by column, on the same steps.
  double fd_err = 0.0;
  for (std::size_t d = 0; d < m; ++d) {
    auto plus = prob, minus = prob;
    double& xp = d < np ? plus.p[d] : plus.y0[d - np];
    double& xm = d < np ? minus.p[d] : minus.y0[d - np];
    const double h = kFdStep * std::max(1.0, std::abs(xp));
    xp += h;
    xm -= h;
    const auto rp = sensitivity_matrix(plus, obs, opt, steps.times, steps.orders).residuals;
    const auto rm = sensitivity_matrix(minus, obs, opt, steps.times, steps.orders).residuals;
    std::vector<double> col(rows), fd(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      col[r] = rs.at(r, d);
      fd[r] = (rp[r] - rm[r]) / (2.0 * h);
    }
    fd_err = std::max(fd_err, max_rel_err(col, fd));
  }
  EXPECT_LE(fd_err, kFdRelTol) << to_string(method);

  // Sᵀr = ∇(½|r|²) and ½|r|² = Σ ℓ_k, by the discrete adjoint of the same
  // scheme on the same steps.
  const System sys = make_system(prob.model, obs, n, np);
  IntegratorOptions replay = opt;
  replay.stop_at_outputs = true;
  const auto scheme = make_scheme(sys, replay, prob.p, steps.times, steps.orders);
  std::vector<std::int64_t> obs_at(steps.times.size(), -1);
  for (std::size_t k = 0, i = 0; k < obs.times.size(); ++k) {
    while (steps.times[i] < obs.times[k]) ++i;
    obs_at[i] = static_cast<std::int64_t>(k);
  }
  std::vector<double> x0(scheme->state_size(), 0.0);
  std::copy(prob.y0.begin(), prob.y0.end(), x0.begin());
  const SweepOutcome adj = adjoint_sweep(sys, *scheme, StoreAll{}, obs_at, x0, prob.p);
  double half_rr = 0.0;
  std::vector<double> str(m, 0.0), grad = adj.wrt_parameters;
  grad.insert(grad.end(), adj.wrt_initial_state.begin(), adj.wrt_initial_state.end());
  for (std::size_t r = 0; r < rows; ++r) {
    half_rr += 0.5 * rs.residuals[r] * rs.residuals[r];
    for (std::size_t d = 0; d < m; ++d) str[d] += rs.at(r, d) * rs.residuals[r];
  }
  EXPECT_LE(rel_err(half_rr, adj.objective), kAdjointRelTol) << to_string(method);
  EXPECT_LE(max_rel_err(str, grad), kAdjointRelTol) << to_string(method);
}

INSTANTIATE_TEST_SUITE_P(EveryStepper, SensitivityMatrix,
                         ::testing::Values(Method::ExplicitEuler, Method::RK4, Method::Dopri5,
                                           Method::BackwardEuler, Method::CrankNicolson,
                                           Method::Sdirk3, Method::Bdf),
                         [](const auto& info) { return to_string(info.param); });

// bdf without its orders: the run that chose the steps is made again to
// recover them, with the same answer.
TEST(SensitivityMatrixBdf, RecoversTheOrdersFromTheRun) {
  const IntegratorOptions opt = options_for(Method::Bdf);
  const auto prob = problem();
  const auto obs = observations();
  const Steps steps = steps_for(opt, prob, obs);
  const auto with = sensitivity_matrix(prob, obs, opt, steps.times, steps.orders);
  const auto without = sensitivity_matrix(prob, obs, opt, steps.times);
  EXPECT_EQ(with.jacobian, without.jacobian);  // the same replay: the same bits
  std::vector<double> other = steps.times;
  other.insert(other.begin() + 1, 0.5 * other[1]);
  EXPECT_THROW((void)sensitivity_matrix(prob, obs, opt, other), Error);
}

// CVODES (cvodes_bdf): S from CVODES' forward sensitivities at the
// observation times. Sᵀr and ½|r|² are the CvodesForward gradient of the
// same objective (the same CVODES integration, stopping at the same times:
// round-off apart), and S is the continuous residual Jacobian: it agrees
// with rk4's at dt = 1e-3 (global error ~1e-12) to CVODES' accuracy at
// rtol 1e-10.
// CVODES' S vs rk4's: measured 2.9e-9 (BDF's global error at rtol 1e-10); 30× margin.
constexpr double kCvodesRelTol = 1e-7;
TEST(SensitivityMatrixCvodes, IsTheCvodesForwardGradientAndTheContinuousJacobian) {
  const auto prob = problem();
  const auto obs = observations();
  const IntegratorOptions cv{.method = Method::CvodesBdf, .rtol = 1e-10, .atol = 1e-12};
  const ResidualSensitivities rs = sensitivity_matrix(prob, obs, cv, {});
  ASSERT_EQ(rs.n_columns, 6u);
  ASSERT_EQ(rs.residuals.size(), obs.n_residuals());
  const GradientResult g = gradient(prob, obs, CvodesForward{}, cv);
  std::vector<double> str(6, 0.0), grad = g.wrt_parameters;
  grad.insert(grad.end(), g.wrt_initial_state.begin(), g.wrt_initial_state.end());
  double half_rr = 0.0;
  for (std::size_t r = 0; r < rs.residuals.size(); ++r) {
    half_rr += 0.5 * rs.residuals[r] * rs.residuals[r];
    for (std::size_t d = 0; d < 6; ++d) str[d] += rs.at(r, d) * rs.residuals[r];
  }
  EXPECT_LE(rel_err(half_rr, g.objective), kAdjointRelTol);
  EXPECT_LE(max_rel_err(str, grad), kAdjointRelTol);
  const IntegratorOptions rk4{.method = Method::RK4, .dt = 1e-3};
  const ResidualSensitivities native =
      sensitivity_matrix(prob, obs, rk4, steps_for(rk4, prob, obs).times);
  EXPECT_LE(max_rel_err(rs.jacobian, native.jacobian), kCvodesRelTol);
  EXPECT_LE(max_rel_err(rs.residuals, native.residuals), kCvodesRelTol);
  std::printf("# CVODES S vs rk4's: %.2e relative\n", max_rel_err(rs.jacobian, native.jacobian));
}

// Seeded CVODES directions (detail::CvodesSeed, what petab::evaluate's
// forward sensitivities use): direction d < np moves p_d and starts at
// S0(:, d), a later one only starts at S0(:, d). By linearity of the
// sensitivity equations they are the unseeded tangents [∂y/∂p | ∂y/∂y0]
// times the seed matrix M (M(:, d) = [e_d; S0(:, d)], or [0; S0(:, d)]):
// the same derivative under another error test (CVODES' norm is the max
// over the directions), so to the tolerances' order — kCvodesRelTol
// (measured 1.1e-9). With p̄ scales (atol_S = atol / p̄) likewise (2.9e-9).
TEST(SensitivityMatrixCvodes, SeededDirectionsAreTheUnseededTimesTheSeed) {
  const auto prob = problem();
  const auto obs = observations();
  const IntegratorOptions cv{.method = Method::CvodesBdf, .rtol = 1e-10, .atol = 1e-12};
  const std::size_t n = 2, np = 4, m = np + n, ns = np + 1, K = obs.times.size();
  const System system = make_system(prob.model, obs, n, np, {.dense_max = cvodes::kBindingDenseMax});
  const detail::CvodesObserved full =
      detail::cvodes_observed_sensitivities(system, prob.y0, prob.p, prob.t0(), obs.times, cv);
  ASSERT_EQ(full.ns, m);
  // S0 (n × ns, column-major): p_0 also moves y0, p_1..p_3 do not; one extra direction.
  detail::CvodesSeed seed{ns, {0.3, -0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5}, {}};
  std::vector<double> expected(K * n * ns, 0.0);
  for (std::size_t c = 0; c < K * n; ++c)
    for (std::size_t d = 0; d < ns; ++d) {
      double v = d < np ? full.tangents[c * m + d] : 0.0;
      for (std::size_t i = 0; i < n; ++i) v += full.tangents[c * m + np + i] * seed.S0[d * n + i];
      expected[c * ns + d] = v;
    }
  const detail::CvodesObserved seeded =
      detail::cvodes_observed_sensitivities(system, prob.y0, prob.p, prob.t0(), obs.times, cv, &seed);
  ASSERT_EQ(seeded.ns, ns);
  EXPECT_LE(max_rel_err(seeded.tangents, expected), kCvodesRelTol);
  EXPECT_LE(max_rel_err(seeded.states, full.states), kCvodesRelTol);
  seed.scales = {10.0, 0.1, 1.0, 2.0, 0.5};
  const detail::CvodesObserved scaled =
      detail::cvodes_observed_sensitivities(system, prob.y0, prob.p, prob.t0(), obs.times, cv, &seed);
  EXPECT_LE(max_rel_err(scaled.tangents, expected), kCvodesRelTol);
  std::printf("# seeded vs unseeded x seed: %.2e, with scales %.2e\n",
              max_rel_err(seeded.tangents, expected), max_rel_err(scaled.tangents, expected));
  seed.scales[1] = 0.0;
  EXPECT_THROW((void)detail::cvodes_observed_sensitivities(system, prob.y0, prob.p, prob.t0(),
                                                           obs.times, cv, &seed),
               Error);
  seed.scales = {};
  seed.ns = np - 1;  // fewer directions than parameters
  seed.S0.resize(n * seed.ns);
  EXPECT_THROW((void)detail::cvodes_observed_sensitivities(system, prob.y0, prob.p, prob.t0(),
                                                           obs.times, cv, &seed),
               Error);
}

}  // namespace
}  // namespace costate::ode
