// Adaptive Dormand–Prince and the integration driver (ode/integrate.hpp):
// accuracy against an independent reference, the meaning of rtol/atol,
// Summary bookkeeping, termination reasons, option validation and output
// times.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"

namespace {

namespace ode = costate::ode;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ============================================================ Lotka–Volterra

const std::vector<double> kLvParams{1.5, 1.0, 3.0, 1.0};
const std::vector<double> kLvY0{1.0, 1.0};
constexpr double kLvT1 = 10.0;
constexpr int kLvOutputs = 10;  // t = 1, 2, ..., 10

ode::Problem<ode::LotkaVolterra> lv_problem() {
  ode::Problem<ode::LotkaVolterra> p{.model = {}, .y0 = kLvY0, .p = kLvParams,
                                     .tspan = {0.0, kLvT1}};
  for (int j = 1; j <= kLvOutputs; ++j) p.output_times.push_back(double(j));
  return p;
}

/// Independent reference: classical RK4 on std::array with `steps_per_unit`
/// fixed steps per unit time, written here (not the library's stepper), with
/// the Lotka–Volterra right-hand side written out by hand. Returns the state
/// at t = 1, ..., 10.
std::vector<std::array<double, 2>> lv_reference(int steps_per_unit) {
  const double a = kLvParams[0], b = kLvParams[1], g = kLvParams[2], d = kLvParams[3];
  auto f = [&](const std::array<double, 2>& y) -> std::array<double, 2> {
    return {a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]};
  };
  auto add = [](const std::array<double, 2>& y, double c, const std::array<double, 2>& k) {
    return std::array<double, 2>{y[0] + c * k[0], y[1] + c * k[1]};
  };
  const double h = 1.0 / steps_per_unit;
  std::array<double, 2> y{kLvY0[0], kLvY0[1]};
  std::vector<std::array<double, 2>> out;
  for (int unit = 0; unit < kLvOutputs; ++unit) {
    for (int s = 0; s < steps_per_unit; ++s) {
      const auto k1 = f(y);
      const auto k2 = f(add(y, 0.5 * h, k1));
      const auto k3 = f(add(y, 0.5 * h, k2));
      const auto k4 = f(add(y, h, k3));
      for (int i = 0; i < 2; ++i) y[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    }
    out.push_back(y);
  }
  return out;
}

// RK4 with h = 1e-4: global error ~ C h^4, observed below 1e-12 (checked by
// the Richardson comparison with h = 2e-4 in ReferenceIsConverged), i.e.
// four orders below the tightest tolerance tested here.
constexpr int kReferenceStepsPerUnit = 10000;
// Difference between the h and 2h reference runs: 15× the h run's error for
// a 4th-order method; below this, the reference is good to < 1e-11 / 15.
constexpr double kReferenceSelfConsistency = 1e-11;

const std::vector<std::array<double, 2>>& reference() {
  static const auto ref = lv_reference(kReferenceStepsPerUnit);
  return ref;
}

TEST(Dopri5Reference, ReferenceIsConverged) {
  const auto coarse = lv_reference(kReferenceStepsPerUnit / 2);
  for (int j = 0; j < kLvOutputs; ++j)
    for (int i = 0; i < 2; ++i)
      EXPECT_NEAR(reference()[j][i], coarse[j][i], kReferenceSelfConsistency)
          << "t = " << j + 1 << ", state " << i;
}

/// Largest error over the outputs t = 1..10, each measured in units of the
/// requested tolerance atol + rtol |y_ref|, and the largest absolute error.
struct LvError {
  double in_tolerances = 0.0;
  double absolute = 0.0;
};
LvError lv_error(const ode::Solution& sol, double rtol, double atol) {
  LvError e;
  EXPECT_EQ(sol.n_outputs(), std::size_t(kLvOutputs));
  for (std::size_t j = 0; j < sol.n_outputs() && j < std::size_t(kLvOutputs); ++j) {
    for (std::size_t i = 0; i < 2; ++i) {
      const double ref = reference()[j][i];
      const double err = std::abs(sol.state(j)[i] - ref);
      e.absolute = std::max(e.absolute, err);
      e.in_tolerances = std::max(e.in_tolerances, err / (atol + rtol * std::abs(ref)));
    }
  }
  return e;
}

// dopri5 controls the local error of each step to ≤ 1 in units of
// atol + rtol |y|; the global error over t ∈ [0, 10] (a few predator–prey
// cycles) accumulates to a modest multiple of that (observed ≈ 5–20 for
// Lotka–Volterra at these tolerances). 100 still catches a controller that
// ignores the tolerance by orders of magnitude.
constexpr double kGlobalErrorPerTolerance = 100.0;

TEST(Dopri5Accuracy, LotkaVolterraMeetsTolerance) {
  for (double tol : {1e-6, 1e-8}) {
    SCOPED_TRACE("rtol = atol = " + std::to_string(tol));
    const auto sol = ode::integrate(lv_problem(), {.rtol = tol, .atol = tol});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
    const LvError e = lv_error(sol, tol, tol);
    EXPECT_LE(e.in_tolerances, kGlobalErrorPerTolerance)
        << "absolute error " << e.absolute << " after " << sol.summary.steps << " steps";
  }
}

// Tolerance proportionality: controlling the error per step makes dopri5's
// global error roughly proportional to tol, so 100× tighter tolerances
// should give ~100× less error (observed 160–350×); require at least 20× (a
// factor of 5 slack for the controller's non-asymptotic behaviour).
constexpr double kMinErrorReductionPer100xTol = 20.0;

TEST(Dopri5Accuracy, ErrorShrinksAsToleranceShrinks) {
  std::vector<double> errors;
  std::vector<std::int64_t> steps;
  for (double tol : {1e-4, 1e-6, 1e-8, 1e-10}) {
    const auto sol = ode::integrate(lv_problem(), {.rtol = tol, .atol = tol});
    ASSERT_TRUE(sol.summary.success());
    errors.push_back(lv_error(sol, tol, tol).absolute);
    steps.push_back(sol.summary.steps);
  }
  for (std::size_t k = 1; k < errors.size(); ++k) {
    EXPECT_GE(errors[k - 1] / errors[k], kMinErrorReductionPer100xTol)
        << "errors " << errors[k - 1] << " -> " << errors[k];
    // Tighter tolerance: more steps (dopri5: ~100^(1/5) ≈ 2.5× per factor 100).
    EXPECT_GT(steps[k], steps[k - 1]);
  }
}

// ============================================================ per-state atol

/// y0' = cos(t) y0 (exact: y0(0) e^{sin t}), y1' = 0: the step size is set by
/// component 0 alone; component 1 never contributes an error.
struct OneActive {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T>, std::span<T> dydt) const {
    dydt[0] = std::cos(t) * y[0];
    dydt[1] = T(0);
  }
};

TEST(Dopri5Tolerances, PerStateAtolAppliesToItsOwnState) {
  // Small states (|y| ≈ 1e-6) and rtol = 1e-10, so rtol |y| ≈ 1e-16 is
  // negligible and each state's atol alone sets its error weight.
  const ode::Problem<OneActive> problem{
      .model = {}, .y0 = {1e-6, 1e-6}, .p = {}, .tspan = {0.0, 10.0}};
  const double exact0 = 1e-6 * std::exp(std::sin(10.0));
  const double rtol = 1e-10;
  const double tight = 1e-12, loose = 1.0;

  // Tight on the active state: many steps, accurate.
  const auto tight_active =
      ode::integrate(problem, {.rtol = rtol, .atol_per_state = {tight, loose}});
  // Tight on the inactive state (whose error is always 0): few steps, crude.
  const auto tight_inactive =
      ode::integrate(problem, {.rtol = rtol, .atol_per_state = {loose, tight}});
  ASSERT_TRUE(tight_active.summary.success());
  ASSERT_TRUE(tight_inactive.summary.success());

  const double err_active = std::abs(tight_active.state(1)[0] - exact0);
  const double err_inactive = std::abs(tight_inactive.state(1)[0] - exact0);
  // Same meaning as kGlobalErrorPerTolerance: global error within a modest
  // multiple of the per-step tolerance.
  EXPECT_LE(err_active, kGlobalErrorPerTolerance * tight);
  // The crude run is limited only by the step-growth cap, not by accuracy.
  EXPECT_GT(tight_active.summary.steps, 3 * tight_inactive.summary.steps);
  EXPECT_GT(err_inactive, 1e3 * err_active);
  // The inactive state is exact in both runs.
  EXPECT_EQ(tight_active.state(1)[1], 1e-6);
  EXPECT_EQ(tight_inactive.state(1)[1], 1e-6);
}

TEST(Dopri5Tolerances, EqualPerStateAtolIsTheScalarAtol) {
  const auto scalar = ode::integrate(lv_problem(), {.rtol = 1e-7, .atol = 1e-9});
  const auto per_state =
      ode::integrate(lv_problem(), {.rtol = 1e-7, .atol = 123.0, .atol_per_state = {1e-9, 1e-9}});
  EXPECT_EQ(scalar.summary.steps, per_state.summary.steps);
  EXPECT_EQ(scalar.summary.rejected_steps, per_state.summary.rejected_steps);
  EXPECT_EQ(scalar.y, per_state.y);  // bit for bit
}

// ============================================================ Summary

TEST(Dopri5Summary, CountsAreConsistent) {
  // Automatic first step: k1 at t0 (1 evaluation), Hairer's initial-step
  // heuristic (1 evaluation), then 6 per attempted step (FSAL).
  {
    const auto sol = ode::integrate(lv_problem(), {.rtol = 1e-8, .atol = 1e-8});
    const auto& s = sol.summary;
    ASSERT_TRUE(s.success());
    EXPECT_EQ(s.method, ode::Method::Dopri5);
    EXPECT_EQ(s.rhs_evaluations, 6 * (s.steps + s.rejected_steps) + 1 + 1);
    EXPECT_EQ(s.final_time, kLvT1);
    EXPECT_GT(s.last_step, 0.0);
    EXPECT_GE(s.wall_seconds, 0.0);
    EXPECT_EQ(s.message, "reached t1");
    EXPECT_TRUE(contains(s.brief_report(), "dopri5: success at t = 10 after " +
                                               std::to_string(s.steps) + " steps"))
        << s.brief_report();
  }
  // A given (too large) first step: no heuristic evaluation, and the first
  // attempts are rejected.
  {
    const auto sol = ode::integrate(lv_problem(), {.rtol = 1e-8, .atol = 1e-8, .dt = 2.0});
    const auto& s = sol.summary;
    ASSERT_TRUE(s.success());
    EXPECT_GT(s.rejected_steps, 0);
    EXPECT_EQ(s.rhs_evaluations, 6 * (s.steps + s.rejected_steps) + 1);
  }
  // on_step sees every accepted step, in increasing time, ending at t1.
  {
    std::vector<double> times;
    ode::IntegratorOptions opt{.rtol = 1e-6, .atol = 1e-6};
    opt.on_step = [&](double t) { times.push_back(t); };
    const auto sol = ode::integrate(lv_problem(), opt);
    ASSERT_EQ(std::int64_t(times.size()), sol.summary.steps);
    EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
    EXPECT_EQ(std::adjacent_find(times.begin(), times.end()), times.end());
    EXPECT_EQ(times.back(), kLvT1);
    EXPECT_EQ(sol.summary.last_step, times.back() - times[times.size() - 2]);
  }
}

TEST(Dopri5Summary, DtMaxLimitsTheStep) {
  std::vector<double> times{0.0};
  ode::IntegratorOptions opt{.rtol = 1e-3, .atol = 1e-3, .dt_max = 0.05};
  opt.on_step = [&](double t) { times.push_back(t); };
  const auto sol = ode::integrate(lv_problem(), opt);
  ASSERT_TRUE(sol.summary.success());
  for (std::size_t k = 1; k < times.size(); ++k)
    EXPECT_LE(times[k] - times[k - 1], 0.05 * (1.0 + 1e-12)) << "step " << k;
  EXPECT_GE(sol.summary.steps, 200);  // 10 / 0.05
}

/// y' = -y.
struct Decay {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T>, std::span<T> dydt) const {
    dydt[0] = -y[0];
  }
};

/// y' = λ y, λ = p[0].
struct Linear {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = p[0] * y[0];
  }
};

// Fixed-step methods: evaluations per step are the stage counts
// (dopri5 with adaptive = false re-evaluates k1 each step: 7).
TEST(FixedStep, CountsAndStepNumbers) {
  struct Case {
    ode::Method method;
    bool adaptive;
    std::int64_t evals_per_step;
  };
  for (const Case c : {Case{ode::Method::ExplicitEuler, true, 1}, Case{ode::Method::RK4, true, 4},
                       Case{ode::Method::Dopri5, false, 7}}) {
    SCOPED_TRACE(ode::to_string(c.method));
    auto problem = lv_problem();
    problem.output_times.clear();
    const auto sol = ode::integrate(
        problem, {.method = c.method, .dt = 0.01, .adaptive = c.adaptive});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
    EXPECT_EQ(sol.summary.steps, 1000);
    EXPECT_EQ(sol.summary.rejected_steps, 0);
    EXPECT_EQ(sol.summary.rhs_evaluations, c.evals_per_step * 1000);
    EXPECT_EQ(sol.summary.final_time, kLvT1);
    EXPECT_EQ(sol.t.back(), kLvT1);
  }
}

// dt = T/N takes exactly N steps, however many, and wherever the interval
// lies: the step times must not drift with round-off.
TEST(FixedStep, DtEqualToIntervalOverNTakesNSteps) {
  for (const double t0 : {0.0, 1000.0, -3.7}) {
    for (const double length : {2.0, 0.3, 10.0}) {
      for (const std::int64_t n : {std::int64_t{7}, std::int64_t{2560}, std::int64_t{100003}}) {
        const ode::Problem<Decay> problem{
            .model = {}, .y0 = {1.0}, .p = {}, .tspan = {t0, t0 + length}};
        const auto sol = ode::integrate(
            problem, {.method = ode::Method::ExplicitEuler, .dt = length / double(n)});
        EXPECT_EQ(sol.summary.steps, n)
            << "t0 = " << t0 << ", length = " << length << ", last step "
            << sol.summary.last_step;
        EXPECT_EQ(sol.t.back(), t0 + length);
      }
    }
  }
}

TEST(FixedStep, StepsAreShortenedToLandOnOutputTimes) {
  // Euler on y' = λ y: each step multiplies by (1 + λ h). With dt = 0.1 and
  // outputs at 0.25 and 0.5, the steps are 0.1, 0.1, 0.05 | 0.1, 0.1, 0.05.
  const double lambda = -1.5;
  const ode::Problem<Linear> problem{.model = {}, .y0 = {1.0}, .p = {lambda},
                                     .tspan = {0.0, 0.5}, .output_times = {0.25, 0.5}};
  const auto sol = ode::integrate(problem, {.method = ode::Method::ExplicitEuler, .dt = 0.1});
  ASSERT_TRUE(sol.summary.success());
  EXPECT_EQ(sol.summary.steps, 6);
  ASSERT_EQ(sol.n_outputs(), 2u);
  EXPECT_EQ(sol.t[0], 0.25);
  EXPECT_EQ(sol.t[1], 0.5);
  const double g1 = 1.0 + lambda * 0.1, g2 = 1.0 + lambda * 0.05;
  // The shortened step is 0.25 − 0.2 in floating point, not exactly 0.05:
  // a few ulps of difference in the factor.
  constexpr double kShortStepRoundoff = 1e-15;
  EXPECT_NEAR(sol.state(0)[0], g1 * g1 * g2, kShortStepRoundoff);
  EXPECT_NEAR(sol.state(1)[0], g1 * g1 * g2 * g1 * g1 * g2, kShortStepRoundoff);
  EXPECT_NEAR(sol.summary.last_step, 0.05, kShortStepRoundoff);
}

// ============================================================ terminations

/// y' = y²: y = 1/(1 − t) from y(0) = 1 blows up at t = 1.
struct Blowup {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T>, std::span<T> dydt) const {
    dydt[0] = y[0] * y[0];
  }
};

// See StepSizeUnderflowAtFiniteTimeBlowup.
constexpr double kBlowupTimePerRtol = 10.0;

TEST(Termination, StepSizeUnderflowAtFiniteTimeBlowup) {
  const ode::Problem<Blowup> problem{.model = {}, .y0 = {1.0}, .p = {}, .tspan = {0.0, 2.0}};
  const double rtol = 1e-6;
  const auto sol = ode::integrate(problem, {.rtol = rtol, .atol = 1e-9});
  const auto& s = sol.summary;
  EXPECT_EQ(s.termination, ode::Termination::StepSizeUnderflow) << s.brief_report();
  EXPECT_FALSE(s.success());
  // It stopped at the singularity t = 1, up to the error in the numerical
  // solution's own blow-up time (observed 0.24 rtol; 10 rtol allows for the
  // tolerance-proportionality constant).
  EXPECT_NEAR(s.final_time, 1.0, kBlowupTimePerRtol * rtol);
  // The message names the time where it stopped, with 16 digits.
  EXPECT_TRUE(contains(s.message, "t = " + costate::detail::format_value(s.final_time)))
      << s.message;
  EXPECT_TRUE(contains(s.message, "blow up")) << s.message;
  EXPECT_TRUE(contains(s.brief_report(), "step_size_underflow")) << s.brief_report();
  // Only the output reached (t0) is present.
  ASSERT_EQ(sol.n_outputs(), 1u);
  EXPECT_EQ(sol.t[0], 0.0);
  EXPECT_EQ(sol.state(0)[0], 1.0);
}

/// y' = cos t.
struct Cosine {
  template <class T>
  void rhs(double t, std::span<const T>, std::span<const T>, std::span<T> dydt) const {
    dydt[0] = T(std::cos(t));
  }
};

// Hairer's initial-step guess 0.01·‖y0‖/‖f0‖ is ~1e-20 here (y0 = 1e-18
// weighed by atol 1e-14, f0 = cos 1): below the round-off of t0 = 1
// (16 eps = 3.6e-15), where it ended the run at once as a step-size
// underflow. The run must start and meet the tolerance against the closed
// form y = y0 + sin t − sin 1.
TEST(Dopri5InitialStep, AGuessBelowTheRoundOffOfT0StillRuns) {
  constexpr double t0 = 1.0, t1 = 2.0, y0 = 1e-18;
  const ode::Problem<Cosine> problem{.model = {}, .y0 = {y0}, .p = {}, .tspan = {t0, t1}};
  const auto sol = ode::integrate(problem, {.rtol = 1e-10, .atol = 1e-14});
  ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
  // 1e-8: rtol 1e-10 per step accumulated over the run, with room for
  // dopri5's tolerance-proportionality constant (observed error ~1e-11).
  EXPECT_NEAR(sol.state(sol.n_outputs() - 1)[0], y0 + std::sin(t1) - std::sin(t0), 1e-8);
}

TEST(Termination, DtMinEndsTheRunEarlier) {
  const ode::Problem<Blowup> problem{.model = {}, .y0 = {1.0}, .p = {}, .tspan = {0.0, 2.0}};
  const auto sol = ode::integrate(problem, {.rtol = 1e-6, .atol = 1e-9, .dt_min = 1e-4});
  EXPECT_EQ(sol.summary.termination, ode::Termination::StepSizeUnderflow);
  // y = 1/(1 - t) needs steps ~ (1 − t) rtol^(1/5) near the singularity, so a
  // floor of 1e-4 stops it well before the round-off limit.
  EXPECT_LT(sol.summary.final_time, 1.0 - 1e-5);
  EXPECT_GT(sol.summary.final_time, 0.9);
}

TEST(Termination, MaxStepsReached) {
  const auto sol = ode::integrate(lv_problem(), {.rtol = 1e-8, .atol = 1e-8, .max_steps = 10});
  const auto& s = sol.summary;
  EXPECT_EQ(s.termination, ode::Termination::MaxStepsReached);
  EXPECT_EQ(s.steps + s.rejected_steps, 10);
  EXPECT_LT(s.final_time, kLvT1);
  EXPECT_TRUE(contains(s.message, "max_steps = 10")) << s.message;
  EXPECT_TRUE(contains(s.message, "t = " + costate::detail::format_value(s.final_time)))
      << s.message;
  // Outputs before the stop are present, later ones are not.
  for (double t : sol.t) EXPECT_LE(t, s.final_time);

  const auto fixed =
      ode::integrate(lv_problem(), {.method = ode::Method::RK4, .dt = 0.01, .max_steps = 10});
  EXPECT_EQ(fixed.summary.termination, ode::Termination::MaxStepsReached);
  EXPECT_EQ(fixed.summary.steps, 10);
  EXPECT_NEAR(fixed.summary.final_time, 0.1, 1e-15);
}

TEST(Termination, BlowUpForEulerWithHugeSteps) {
  // Euler on y' = y², y(0) = 1 with dt = 100: y ← y + 100 y² would overflow
  // at step 8 (1 → 101 → ~1e6 → ~1e14 → … → ~1e254 → inf). The growth is
  // faster than exponential from the first step (factors 101, ~1e4, ~1e8,
  // …): the blow-up watch (BlowUpWatch, kRun = 5 accelerating doublings)
  // ends the run at step 5, at the last state before it, still finite.
  const double dt = 100.0;
  double y = 1.0;
  int overflow_step = 0;
  while (std::isfinite(y)) {
    y = y + dt * (y * y);
    ++overflow_step;
  }
  ASSERT_EQ(overflow_step, 8);

  const ode::Problem<Blowup> problem{.model = {}, .y0 = {1.0}, .p = {}, .tspan = {0.0, 2000.0}};
  const auto sol = ode::integrate(problem, {.method = ode::Method::ExplicitEuler, .dt = dt});
  const auto& s = sol.summary;
  EXPECT_EQ(s.termination, ode::Termination::BlowUp) << s.brief_report();
  EXPECT_EQ(s.steps, ode::detail::BlowUpWatch::kRun);
  EXPECT_EQ(s.final_time, dt * (ode::detail::BlowUpWatch::kRun - 1));
  EXPECT_TRUE(contains(s.message, "blows up")) << s.message;
  EXPECT_TRUE(contains(s.message, "t = 500")) << s.message;
}

TEST(Termination, NonFiniteInitialState) {
  const ode::Problem<Blowup> problem{
      .model = {}, .y0 = {std::numeric_limits<double>::quiet_NaN()}, .p = {},
      .tspan = {0.0, 1.0}};
  const auto sol = ode::integrate(problem);
  EXPECT_EQ(sol.summary.termination, ode::Termination::NonFiniteState);
  EXPECT_TRUE(contains(sol.summary.message, "initial state")) << sol.summary.message;
  EXPECT_EQ(sol.n_outputs(), 0u);
  EXPECT_EQ(sol.summary.rhs_evaluations, 0);
}

// ============================================================ invalid input

/// The message of the costate::Error thrown by `f`, or "<no throw>".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const costate::Error& e) {
    return e.what();
  }
  return "<no throw>";
}

TEST(InvalidOptions, MessagesNameTheField) {
  const auto p = lv_problem();
  auto run = [&](const ode::IntegratorOptions& o) { return [&p, o] { (void)ode::integrate(p, o); }; };
  const double nan = std::numeric_limits<double>::quiet_NaN();

  for (double bad : {0.0, -1e-6, nan}) {
    const std::string rtol = error_of(run({.rtol = bad}));
    EXPECT_TRUE(contains(rtol, "integrator.rtol")) << rtol;
    const std::string atol = error_of(run({.atol = bad}));
    EXPECT_TRUE(contains(atol, "integrator.atol")) << atol;
  }
  EXPECT_TRUE(contains(error_of(run({.rtol = -0.5})), "integrator.rtol = -0.5"));

  const std::string neg_dt = error_of(run({.method = ode::Method::RK4, .dt = -0.1}));
  EXPECT_TRUE(contains(neg_dt, "integrator.dt = -0.1")) << neg_dt;
  const std::string neg_dt_adaptive = error_of(run({.dt = -0.1}));
  EXPECT_TRUE(contains(neg_dt_adaptive, "integrator.dt")) << neg_dt_adaptive;

  const std::string euler = error_of(run({.method = ode::Method::ExplicitEuler}));
  EXPECT_TRUE(contains(euler, "integrator.dt")) << euler;
  EXPECT_TRUE(contains(euler, "euler")) << euler;
  const std::string fixed_dopri = error_of(run({.adaptive = false}));
  EXPECT_TRUE(contains(fixed_dopri, "integrator.dt")) << fixed_dopri;
  EXPECT_TRUE(contains(fixed_dopri, "adaptive")) << fixed_dopri;

  const std::string per_state = error_of(run({.atol_per_state = {1e-8, 1e-8, 1e-8}}));
  EXPECT_TRUE(contains(per_state, "integrator.atol has 3 entries")) << per_state;
  EXPECT_TRUE(contains(per_state, "2 states")) << per_state;
  const std::string per_state_value = error_of(run({.atol_per_state = {1e-8, -1.0}}));
  EXPECT_TRUE(contains(per_state_value, "integrator.atol")) << per_state_value;

  EXPECT_TRUE(contains(error_of(run({.dt_max = -1.0})), "integrator.dt_max"));
  EXPECT_TRUE(contains(error_of(run({.dt_min = -1.0})), "integrator.dt_min"));
  EXPECT_TRUE(contains(error_of(run({.max_steps = 0})), "integrator.max_steps"));

  // A valid set does not throw.
  EXPECT_EQ(error_of(run({.rtol = 1e-6, .atol_per_state = {1e-8, 1e-9}})), "<no throw>");
}

TEST(InvalidOptions, MethodNames) {
  for (ode::Method m : ode::all_methods())
    EXPECT_EQ(ode::method_from_string(ode::to_string(m)), m);
  EXPECT_EQ(ode::order(ode::Method::ExplicitEuler), 1);
  EXPECT_EQ(ode::order(ode::Method::RK4), 4);
  EXPECT_EQ(ode::order(ode::Method::Dopri5), 5);
  EXPECT_TRUE(ode::is_adaptive(ode::Method::Dopri5));
  EXPECT_FALSE(ode::is_adaptive(ode::Method::RK4));
  const std::string msg = error_of([] { (void)ode::method_from_string("rk45"); });
  EXPECT_TRUE(contains(msg, "'rk45'")) << msg;
  EXPECT_TRUE(contains(msg, "euler, rk4, dopri5")) << msg;
}

TEST(InvalidInterval, EndNotAfterStartThrows) {
  for (const std::array<double, 2> span :
       {std::array<double, 2>{1.0, 1.0}, std::array<double, 2>{1.0, 0.5},
        std::array<double, 2>{0.0, std::numeric_limits<double>::infinity()}}) {
    auto p = lv_problem();
    p.output_times.clear();
    p.tspan = span;
    const std::string msg = error_of([&] { (void)ode::integrate(p); });
    EXPECT_TRUE(contains(msg, "time.end must be greater than time.start")) << msg;
  }
}

TEST(InvalidOutputTimes, OutsideOrNotAscendingThrows) {
  auto with_outputs = [](std::vector<double> outputs) {
    auto p = lv_problem();
    p.output_times = std::move(outputs);
    return error_of([&] { (void)ode::integrate(p); });
  };
  const std::string before = with_outputs({-0.5, 1.0});
  EXPECT_TRUE(contains(before, "output time -0.5 (index 0) lies outside the interval [0, 10]"))
      << before;
  const std::string after = with_outputs({1.0, 10.5});
  EXPECT_TRUE(contains(after, "output time 10.5 (index 1)")) << after;
  const std::string descending = with_outputs({1.0, 3.0, 2.0});
  EXPECT_TRUE(contains(descending, "strictly ascending")) << descending;
  EXPECT_TRUE(contains(descending, "times[1] = 3, times[2] = 2")) << descending;
  const std::string repeated = with_outputs({1.0, 1.0});
  EXPECT_TRUE(contains(repeated, "strictly ascending")) << repeated;
  const std::string nan = with_outputs({std::numeric_limits<double>::quiet_NaN()});
  EXPECT_TRUE(contains(nan, "lies outside")) << nan;
}

TEST(InvalidProblem, EmptyStateThrows) {
  const ode::Problem<ode::LotkaVolterra> p{.model = {}, .y0 = {}, .p = kLvParams};
  EXPECT_TRUE(contains(error_of([&] { (void)ode::integrate(p); }), "no states"));
}

// ============================================================ output times

TEST(OutputTimes, LandExactlyOnRequestedTimes) {
  const std::vector<double> requested{0.0, 0.1, 0.25, 1.0 / 3.0, 2.0 / 3.0, 5.55, 9.999999, 10.0};
  struct Case {
    ode::IntegratorOptions opt;
    const char* name;
  };
  const std::vector<Case> cases{
      {{.rtol = 1e-6, .atol = 1e-6}, "adaptive dopri5"},
      {{.dt = 0.07, .adaptive = false}, "fixed dopri5"},
      {{.method = ode::Method::RK4, .dt = 0.07}, "rk4"},
      {{.method = ode::Method::ExplicitEuler, .dt = 0.001}, "euler"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = lv_problem();
    p.output_times = requested;
    const auto sol = ode::integrate(p, c.opt);
    ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
    ASSERT_EQ(sol.t, requested);  // bit for bit, t0 included
    ASSERT_EQ(sol.y.size(), requested.size() * 2);
    EXPECT_EQ(sol.state(0)[0], kLvY0[0]);
    EXPECT_EQ(sol.state(0)[1], kLvY0[1]);
  }
}

TEST(OutputTimes, DefaultIsStartAndEndAndT0OnlyWhenRequested) {
  auto p = lv_problem();
  p.output_times.clear();
  const auto sol = ode::integrate(p);
  ASSERT_EQ(sol.t, (std::vector<double>{0.0, kLvT1}));
  EXPECT_EQ(sol.state(0)[0], 1.0);
  EXPECT_EQ(sol.n_states, 2u);

  p.output_times = {2.5, kLvT1};
  const auto no_t0 = ode::integrate(p);
  ASSERT_EQ(no_t0.t, (std::vector<double>{2.5, kLvT1}));
  // The final outputs agree: the default end state and this one.
  EXPECT_EQ(no_t0.state(1)[0], sol.state(1)[0]);

  p.output_times = {3.0};  // t1 not requested: not reported
  const auto only_mid = ode::integrate(p);
  ASSERT_EQ(only_mid.t, (std::vector<double>{3.0}));
  EXPECT_EQ(only_mid.summary.final_time, kLvT1);
}

}  // namespace
