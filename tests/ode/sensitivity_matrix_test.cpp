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
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {
namespace {

using test::max_rel_err;
using test::rel_err;

/// The message of the costate::Error `f` throws ("no error" when none).
template <class F>
std::string message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

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

// The steps the gradient would take: fixed dt for the fixed-step methods, the
// adaptive run for sdirk3/bdf (plan_steps); dopri5 replays sdirk3's steps
// (any step sequence landing on the observations is a discrete solution to
// differentiate; the scheme is dopri5's 5th-order step on it).
StepPlan steps_for(const IntegratorOptions& opt, const Problem<LotkaVolterra>& prob,
                   const WeightedObservations& obs) {
  const System sys = make_system(prob.model, obs, 2, 4);
  if (opt.method == Method::Sdirk3 || opt.method == Method::Bdf || opt.method == Method::Dopri5) {
    IntegratorOptions o = opt;
    if (o.method == Method::Dopri5) o.method = Method::Sdirk3;
    return plan_steps(sys, prob.y0, prob.p, prob.t0(), prob.t1(), o, {}, "steps_for").steps;
  }
  std::vector<double> times;
  const double dt = opt.dt;
  for (int i = 0; i <= static_cast<int>(std::lround(prob.t1() / dt)); ++i) times.push_back(i * dt);
  times.back() = prob.t1();
  return StepPlan(std::move(times));
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
  const StepPlan steps = steps_for(opt, prob, obs);
  ASSERT_GE(steps.times().size(), 2u);
  const ResidualSensitivities rs = sensitivity_matrix(prob, obs, opt, steps);
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
    const auto rp = sensitivity_matrix(plus, obs, opt, steps).residuals;
    const auto rm = sensitivity_matrix(minus, obs, opt, steps).residuals;
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
  const auto scheme = make_scheme(sys, replay, prob.p, steps);
  std::vector<double> x0(scheme->state_size(), 0.0);
  std::copy(prob.y0.begin(), prob.y0.end(), x0.begin());
  const SweepOutcome adj = adjoint_sweep(sys, *scheme, steps, StoreAll{}, x0, prob.p);
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

// bdf's steps replayed without their orders are refused (the plan carries
// them: GradientResult::steps), as is a plan that misses an observation time;
// an empty plan chooses the steps as the gradient does: the same bits.
TEST(SensitivityMatrixBdf, NeedsThePlansOrders) {
  const IntegratorOptions opt = options_for(Method::Bdf);
  const auto prob = problem();
  const auto obs = observations();
  const StepPlan steps = steps_for(opt, prob, obs);
  const auto with = sensitivity_matrix(prob, obs, opt, steps);
  const auto chosen = sensitivity_matrix(prob, obs, opt, {});
  EXPECT_EQ(with.jacobian, chosen.jacobian);  // the same plan: the same bits
  const std::string no_orders = message([&] {
    (void)sensitivity_matrix(prob, obs, opt, StepPlan(steps.times()));
  });
  EXPECT_NE(no_orders.find("sensitivity_matrix: replaying bdf steps needs their orders"),
            std::string::npos)
      << no_orders;
  const std::string missed = message([&] {
    (void)sensitivity_matrix(prob, obs, {.method = Method::RK4}, StepPlan({0.0, 1.75, 4.0}));
  });
  EXPECT_NE(missed.find("no step of the step plan lands on observation time 0.5"),
            std::string::npos)
      << missed;
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
      sensitivity_matrix(prob, obs, rk4, steps_for(rk4, prob, obs));
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

// ode::StepPlan refuses what is not a plan, and a plan that does not fit its
// use, with a message naming what is wrong.
TEST(StepPlan, ValidationNamesWhatIsWrong) {
  auto expect_message = [](auto&& f, const std::string& want) {
    const std::string got = message(f);
    EXPECT_NE(got.find(want), std::string::npos) << "want: " << want << "\ngot:  " << got;
  };
  expect_message([] { StepPlan({0.0}); }, "step plan: needs at least one step");
  expect_message([] { StepPlan(std::vector<double>{}); }, "step plan: needs at least one step");
  expect_message([] { StepPlan({0.0, 1.0, 1.0}); },
                 "step plan: the times must be strictly increasing: times[1] = 1, times[2] = 1");
  expect_message([] { StepPlan({0.0, 2.0, 1.0}); }, "strictly increasing");
  expect_message([] { StepPlan({0.0, NAN, 1.0}); }, "step plan: times[1] = nan is not finite");
  expect_message([] { StepPlan({0.0, 1.0, 2.0}, {1}); },
                 "step plan: bdf's orders need one per step: got 1 orders for 2 steps");
  expect_message([] { StepPlan({0.0, 1.0, 2.0}, {1, 6}); },
                 "step plan: orders[1] = 6 is out of range 1 … 5");
  expect_message([] { StepPlan({0.0, 1.0, 2.0}, {0, 1}); }, "orders[0] = 0 is out of range");
  // A valid plan.
  const StepPlan plan({0.0, 0.5, 1.0}, {1, 2});
  EXPECT_EQ(plan.steps(), 2u);
  EXPECT_EQ(plan.orders(), (std::vector<int>{1, 2}));
  // Checked against its use.
  expect_message([&] { plan.check_replay(Method::Bdf, 0.0, 2.0, "who"); },
                 "who: the step plan runs from 0 to 1; the problem from 0 to 2");
  expect_message([&] { plan.check_replay(Method::RK4, 0.0, 1.0, "who"); },
                 "who: the step plan has bdf's orders; integrator.method = rk4 takes none");
  expect_message([&] { StepPlan({0.0, 1.0}).check_replay(Method::Bdf, 0.0, 1.0, "who"); },
                 "who: replaying bdf steps needs their orders");
  expect_message([&] { StepPlan().check_replay(Method::RK4, 0.0, 1.0, "who"); },
                 "who: the step plan is empty");
  EXPECT_NO_THROW(plan.check_replay(Method::Bdf, 0.0, 1.0, "who"));
  const std::vector<double> on{0.5, 1.0}, off{0.25};
  EXPECT_EQ(plan.landing_steps(on, "who"), (std::vector<std::size_t>{1, 2}));
  expect_message([&] { (void)plan.landing_steps(off, "who"); },
                 "who: no step of the step plan lands on observation time 0.25");
  // Through the public entry points: the name of the entry in the message.
  const auto prob = problem();
  const auto obs = observations();
  const IntegratorOptions rk4{.method = Method::RK4, .dt = 0.01};
  expect_message([&] { (void)gradient(prob, obs, DiscreteAdjoint{}, rk4, StepPlan({0.0, 4.0})); },
                 "gradient: no step of the step plan lands on observation time 0.5");
  expect_message([&] { (void)gradient(prob, obs, Forward{}, rk4, StepPlan({0.0, 3.0})); },
                 "gradient: the step plan runs from 0 to 3; the problem from 0 to 4");
  const HessianDirection v{{1.0, 0.0, 0.0, 0.0}};
  expect_message(
      [&] {
        (void)hessian_vector(prob, obs, v, DiscreteAdjoint{}, {.method = Method::Bdf},
                             StepPlan({0.0, 4.0}));
      },
      "hessian_vector: replaying bdf steps needs their orders");
}

// A plan recorded by one path replays identically (bitwise) in the others:
// the gradient's adaptive first run (bdf: its StoreAll adjoint takes the
// run's own states; dopri5: the explicit scheme) records GradientResult::
// steps; Forward, hessian_vector and sensitivity_matrix without a plan choose
// the same steps by the same chooser (plan_steps); replayed by the tangent
// sweep (Forward), the results are Forward's own, and by the Binomial adjoint
// (which replays every step) and H·v, the recording run's bits (dopri5's H·v:
// explicit RK with the dense strategy, whose gradient part is the
// gradient's operations), and the residual Jacobian on the recorded plan is
// the one on the plan chosen afresh, bit for bit.
TEST(StepPlan, RecordedPlanReplaysBitwiseInTheOtherPaths) {
  const auto prob = problem();
  const auto obs = observations();
  const HessianDirection v{{0.3, -0.2, 0.1, 0.4}, {0.5, -0.5}};
  for (Method m : {Method::Dopri5, Method::Bdf}) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-7, .atol = 1e-9, .newton_tol = 1e-13};
    const GradientResult g = gradient(prob, obs, DiscreteAdjoint{}, opt);
    ASSERT_GT(g.steps.steps(), 20u);
    EXPECT_EQ(g.steps.orders().empty(), m != Method::Bdf);
    // Chosen again (no plan) by the H·v and the residual Jacobian: the same plan.
    const HessianVectorResult h = hessian_vector(prob, obs, v, DiscreteAdjoint{}, opt);
    const GradientResult f0 = gradient(prob, obs, Forward{}, opt);
    EXPECT_EQ(h.steps, g.steps);
    EXPECT_EQ(f0.steps, g.steps);
    // Replayed.
    const GradientResult f = gradient(prob, obs, Forward{}, opt, g.steps);
    const GradientResult b =
        gradient(prob, obs, DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 3}}, opt, g.steps);
    const HessianVectorResult hr = hessian_vector(prob, obs, v, DiscreteAdjoint{}, opt, g.steps);
    EXPECT_EQ(f.steps, g.steps);
    EXPECT_EQ(f.objective, f0.objective);
    EXPECT_EQ(f.wrt_parameters, f0.wrt_parameters);
    EXPECT_EQ(f.wrt_initial_state, f0.wrt_initial_state);
    // The same 8 observation terms summed forward (tangents) and backward
    // (adjoint): equal up to the sum's reordering, a few ulps.
    EXPECT_LE(rel_err(f.objective, g.objective), 1e-14);
    EXPECT_EQ(b.objective, g.objective);
    EXPECT_EQ(b.wrt_parameters, g.wrt_parameters);
    EXPECT_EQ(b.wrt_initial_state, g.wrt_initial_state);
    EXPECT_EQ(hr.steps, g.steps);
    EXPECT_EQ(hr.objective, h.objective);
    EXPECT_EQ(hr.hv_wrt_parameters, h.hv_wrt_parameters);
    EXPECT_EQ(hr.hv_wrt_initial_state, h.hv_wrt_initial_state);
    if (m == Method::Dopri5) {
      EXPECT_EQ(hr.objective, g.objective);
      EXPECT_EQ(hr.gradient_wrt_parameters, g.wrt_parameters);
    }
    const ResidualSensitivities on_recorded = sensitivity_matrix(prob, obs, opt, g.steps);
    const ResidualSensitivities chosen = sensitivity_matrix(prob, obs, opt, {});
    EXPECT_EQ(on_recorded.jacobian, chosen.jacobian);
    EXPECT_EQ(on_recorded.residuals, chosen.residuals);
  }
}

}  // namespace
}  // namespace costate::ode
