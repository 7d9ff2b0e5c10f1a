// The continuous adjoint (interpolating; backward with the forward's adaptive
// stepper: dopri5, or sdirk3 / bdf for stiff problems): converges to the
// discrete adjoint as the tolerances tighten, agrees with CVODES' forward
// sensitivities and adjoint and with central differences (Robertson with bdf
// and sdirk3), uses the tape for large systems, and refuses what it cannot do
// with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "support/relative_error.hpp"
#include "test_models.hpp"

namespace {

using namespace costate::ode;

using costate::test::max_rel_err;

/// Terminal, running and observation terms at once.
struct AllTerms {
  LeastSquares obs;
  std::vector<double> observation_times() const { return obs.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return obs.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * (y[0] * y[0] + y[1] * y[1]) + 0.1 * p[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.01 * t) + 0.01 * p[3] * y[0]);
  }
};

AllTerms lv_objective() {
  AllTerms o;
  o.obs.n_states = 2;
  for (int k = 1; k <= 10; ++k) {
    o.obs.times.push_back(static_cast<double>(k));
    o.obs.data.push_back(1.0 + 0.1 * k);
    o.obs.data.push_back(1.0 - 0.05 * k);
  }
  return o;
}

Problem<LotkaVolterra> lv() {
  return Problem<LotkaVolterra>{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
}

TEST(ContinuousAdjoint, ConvergesToTheDiscreteAdjointAsTolerancesTighten) {
  const auto pr = lv();
  const AllTerms obj = lv_objective();
  std::vector<double> errors;
  for (double rtol : {1e-5, 1e-7, 1e-9, 1e-11}) {
    const IntegratorOptions o{.method = Method::Dopri5, .rtol = rtol, .atol = 1e-3 * rtol};
    const GradientResult d = gradient(pr, obj, DiscreteAdjoint{}, o);
    const GradientResult c = gradient(pr, obj, ContinuousAdjoint{}, o);
    std::vector<double> gd = d.wrt_parameters, gc = c.wrt_parameters;
    gd.insert(gd.end(), d.wrt_initial_state.begin(), d.wrt_initial_state.end());
    gc.insert(gc.end(), c.wrt_initial_state.begin(), c.wrt_initial_state.end());
    // Both forward passes take the run's steps (issue 35); J's running cost
    // is dopri5's own quadrature in the discrete adjoint and Gauss–Legendre
    // on dopri5's interpolant in the continuous one: J agrees to the
    // interpolant's error at this rtol (measured 5e-6 relative at rtol 1e-5
    // … 5e-13 at 1e-11; 3e-4 … 5e-11 when z was in the step control).
    const double kSameIntegrationRelTol = 100.0 * rtol;
    EXPECT_NEAR(c.objective, d.objective, kSameIntegrationRelTol * std::abs(d.objective));
    errors.push_back(max_rel_err(gc, gd));
    std::printf("rtol %.0e: |continuous - discrete| / |discrete| = %.3e, J %.1e (%s)\n", rtol,
                errors.back(), std::abs(c.objective - d.objective) / std::abs(d.objective),
                c.summary.message.c_str());
  }
  // Each factor 100 in rtol shrinks the difference (dopri5's global error
  // ~ rtol^(5/6)): demand at least a factor 10 per step, and 1e-8 at the end.
  for (std::size_t i = 1; i < errors.size(); ++i) EXPECT_LT(errors[i], 0.1 * errors[i - 1]) << i;
  constexpr double kTightRelTol = 1e-8;
  EXPECT_LT(errors.back(), kTightRelTol);
}

TEST(ContinuousAdjoint, AdjointToleranceIsItsOwn) {
  const auto pr = lv();
  const AllTerms obj = lv_objective();
  const IntegratorOptions o{.method = Method::Dopri5, .rtol = 1e-11, .atol = 1e-14};
  const GradientResult ref = gradient(pr, obj, DiscreteAdjoint{}, o);
  const GradientResult loose = gradient(pr, obj, ContinuousAdjoint{.rtol = 1e-4, .atol = 1e-7}, o);
  const GradientResult tight = gradient(pr, obj, ContinuousAdjoint{.rtol = 1e-11, .atol = 1e-14}, o);
  const double e_loose = max_rel_err(loose.wrt_parameters, ref.wrt_parameters);
  const double e_tight = max_rel_err(tight.wrt_parameters, ref.wrt_parameters);
  // A loose backward tolerance costs accuracy that the forward one does not.
  EXPECT_GT(e_loose, 10.0 * e_tight);
  EXPECT_LT(loose.vjp_evaluations, tight.vjp_evaluations);
}

TEST(ContinuousAdjoint, FitzHughNagumoAgreesWithCvodesForwardAndDifferences) {
  Problem<FitzHughNagumo> pr{FitzHughNagumo{}, {-1.0, 1.0}, {0.7, 0.8, 12.5, 0.5}, {0.0, 20.0}};
  AllTerms obj = lv_objective();
  const IntegratorOptions o{.method = Method::Dopri5, .rtol = 1e-11, .atol = 1e-13};
  const GradientResult c = gradient(pr, obj, ContinuousAdjoint{}, o);
  const GradientResult f = gradient(pr, obj, CvodesForward{},
                                    {.method = Method::CvodesBdf, .rtol = 1e-11, .atol = 1e-13});
  // Two continuous methods, two solvers, both at rtol 1e-11.
  constexpr double kCrossRelTol = 1e-7;
  EXPECT_LT(max_rel_err(c.wrt_parameters, f.wrt_parameters), kCrossRelTol);
  EXPECT_LT(max_rel_err(c.wrt_initial_state, f.wrt_initial_state), kCrossRelTol);
  // Central differences of the dopri5 objective (relative step 1e-5:
  // truncation ~1e-10, the adaptive solver's noise 1e-11/1e-5 ~ 1e-6).
  constexpr double kFdRelTol = 1e-5;
  for (std::size_t j = 0; j < pr.p.size(); ++j) {
    auto pp = pr, pm = pr;
    const double h = 1e-5 * std::abs(pr.p[j]);
    pp.p[j] += h;
    pm.p[j] -= h;
    const double fd = (gradient(pp, obj, ContinuousAdjoint{}, o).objective -
                       gradient(pm, obj, ContinuousAdjoint{}, o).objective) /
                      (2 * h);
    EXPECT_LT(std::abs(c.wrt_parameters[j] - fd), kFdRelTol * std::max(1.0, std::abs(fd))) << j;
  }
}

using test::Chain;
using test::SumOfSquares;

TEST(ContinuousAdjoint, LargeSystemThroughTheTape) {
  constexpr std::size_t n = 40;
  Problem<Chain> pr{Chain{}, std::vector<double>(n), std::vector<double>(n), {0.0, 2.0}};
  for (std::size_t i = 0; i < n; ++i) {
    pr.y0[i] = 1.0 + 0.01 * static_cast<double>(i);
    pr.p[i] = 0.5 + 0.02 * static_cast<double>(i);
  }
  const IntegratorOptions o{.method = Method::Dopri5, .rtol = 1e-10, .atol = 1e-12};
  const GradientResult c = gradient(pr, SumOfSquares{}, ContinuousAdjoint{}, o);
  const GradientResult d = gradient(pr, SumOfSquares{}, DiscreteAdjoint{}, o);
  constexpr double kRelTol = 1e-7;  // both at rtol 1e-10
  EXPECT_LT(max_rel_err(c.wrt_parameters, d.wrt_parameters), kRelTol);
  EXPECT_LT(max_rel_err(c.wrt_initial_state, d.wrt_initial_state), kRelTol);
}

/// Robertson to t = 40 (stiff: eigenvalues to −1e4), J = 1e4 y1(t1) + 1e-3 ∫ y3 dt
/// plus an observation of y2 at t = 4 (a λ jump).
struct RobertsonTerms {
  std::vector<double> observation_times() const { return {4.0}; }
  template <class T>
  T observation(std::size_t, std::span<const T> y, std::span<const T>) const {
    return T(1e6 * y[1]);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(1e4 * y[0]);
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(1e-3 * y[2]);
  }
};

Problem<Robertson> robertson() {
  return Problem<Robertson>{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 40.0}};
}

/// The gradient (parameters, then initial state) of a result.
std::vector<double> all_of(const GradientResult& g) {
  std::vector<double> v = g.wrt_parameters;
  v.insert(v.end(), g.wrt_initial_state.begin(), g.wrt_initial_state.end());
  return v;
}

TEST(ContinuousAdjoint, StiffRobertsonWithBdfAndSdirk3MatchesDiscreteAndCvodes) {
  const auto pr = robertson();
  const RobertsonTerms obj;
  // Reference: CVODES' adjoint at tight tolerances.
  const IntegratorOptions cv{.method = Method::CvodesBdf, .rtol = 1e-11,
                             .atol_per_state = {1e-14, 1e-18, 1e-12}};
  const std::vector<double> ref = all_of(gradient(pr, obj, CvodesAdjoint{}, cv));
  auto options = [](Method m, double rtol) {
    return IntegratorOptions{.method = m, .rtol = rtol,
                             .atol_per_state = {1e-2 * rtol, 1e-8 * rtol, 1e-2 * rtol}};
  };
  for (Method m : {Method::Bdf, Method::Sdirk3}) {
    std::vector<double> errors;
    for (double rtol : {1e-6, 1e-8, 1e-10}) {
      const IntegratorOptions o = options(m, rtol);
      const GradientResult c = gradient(pr, obj, ContinuousAdjoint{}, o);
      const GradientResult d = gradient(pr, obj, DiscreteAdjoint{}, o);
      const double e_ref = max_rel_err(all_of(c), ref);
      const double e_disc = max_rel_err(all_of(c), all_of(d));
      errors.push_back(e_ref);
      std::printf("%s rtol %.0e: continuous vs cvodes_adjoint %.2e, vs discrete %.2e; "
                  "discrete vs cvodes %.2e (%s)\n",
                  to_string(m).c_str(), rtol, e_ref, e_disc, max_rel_err(all_of(d), ref),
                  c.summary.message.c_str());
      // To the tolerances' order: the backward run's global error dominates
      // (λ through Robertson's stiff transients, each step within rtol;
      // measured 2e3–1e4 × rtol for bdf, ~1e2 × for sdirk3); the forward
      // run and the interpolant are far more accurate (next test).
      const double kBackwardGlobalError = 3e4 * rtol;
      EXPECT_LT(e_ref, kBackwardGlobalError) << to_string(m) << " rtol " << rtol;
      EXPECT_LT(e_disc, kBackwardGlobalError) << to_string(m) << " rtol " << rtol;
      EXPECT_EQ(c.summary.method, m);
    }
    // Converging as the tolerances tighten (factor 100 each): at least 10×
    // over the two refinements together.
    EXPECT_LT(errors.back(), 0.1 * errors.front()) << to_string(m);
  }
}

TEST(ContinuousAdjoint, StiffInterpolantIsAsAccurateAsTheForwardRun) {
  // With the backward run at 1e-12, what is left is the forward run and its
  // interpolant (bdf's step polynomial, sdirk3's Hermite cubic): within a
  // few forward tolerances of CVODES (measured 0.01–0.8 × rtol; the
  // discrete adjoint of the same forward run is ~0.6 × rtol off).
  const auto pr = robertson();
  const RobertsonTerms obj;
  const IntegratorOptions cv{.method = Method::CvodesBdf, .rtol = 1e-11,
                             .atol_per_state = {1e-14, 1e-18, 1e-12}};
  const std::vector<double> ref = all_of(gradient(pr, obj, CvodesAdjoint{}, cv));
  constexpr double kTightBackwardRtol = 1e-12;
  for (Method m : {Method::Bdf, Method::Sdirk3})
    for (double rtol : {1e-6, 1e-8}) {
      const IntegratorOptions o{.method = m, .rtol = rtol,
                                .atol_per_state = {1e-2 * rtol, 1e-8 * rtol, 1e-2 * rtol}};
      const GradientResult c =
          gradient(pr, obj, ContinuousAdjoint{.rtol = kTightBackwardRtol}, o);
      const double e = max_rel_err(all_of(c), ref);
      std::printf("%s forward rtol %.0e, backward %.0e: vs cvodes_adjoint %.2e\n",
                  to_string(m).c_str(), rtol, kTightBackwardRtol, e);
      const double kForwardTolerances = 10.0 * rtol;
      EXPECT_LT(e, kForwardTolerances) << to_string(m) << " rtol " << rtol;
    }
}

TEST(ContinuousAdjoint, StiffBackwardStepsAreTheForwardsSize) {
  // The implicit backward run needs steps of the forward's size on a stiff
  // problem (an explicit one would be held at its stability limit, ~1e-4
  // here, ~4e5 steps over [0, 40]).
  const auto pr = robertson();
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-6,
                            .atol_per_state = {1e-8, 1e-14, 1e-8}};
  const GradientResult c = gradient(pr, RobertsonTerms{}, ContinuousAdjoint{}, o);
  const auto pos = c.summary.message.find("backward pass ");
  ASSERT_NE(pos, std::string::npos) << c.summary.message;
  const long back_steps = static_cast<long>(c.backward_steps);
  EXPECT_EQ(std::stol(c.summary.message.substr(pos + 14)), back_steps);  // the report's count
  std::printf("bdf forward %lld steps, backward %ld\n",
              static_cast<long long>(c.summary.steps), back_steps);
  constexpr long kStepRatio = 10;  // the backward run within 10× the forward's steps
  EXPECT_LT(back_steps, kStepRatio * c.summary.steps);
}

TEST(ContinuousAdjoint, RefusesNonAdaptiveAndImplicitMethods) {
  const auto pr = lv();
  const AllTerms obj = lv_objective();
  for (const IntegratorOptions& o :
       {IntegratorOptions{.method = Method::CrankNicolson, .dt = 0.01},
        IntegratorOptions{.method = Method::RK4, .dt = 0.01},
        IntegratorOptions{.method = Method::CvodesBdf}}) {
    try {
      (void)gradient(pr, obj, ContinuousAdjoint{}, o);
      FAIL() << "expected an error for " << to_string(o.method);
    } catch (const costate::Error& e) {
      EXPECT_NE(std::string(e.what()).find("dopri5"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cvodes_adjoint"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)gradient(pr, obj, ContinuousAdjoint{.rtol = -1.0}, {}), costate::Error);
}

}  // namespace

namespace {

/// J = x(t1), the first state.
struct FirstState {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};
/// J = ∫ x y dt.
struct Integral {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[0] * y[1];
  }
};

/// The accepted step times of `costate run`'s integration (ode::integrate).
std::vector<double> run_steps(const Problem<LotkaVolterra>& pr, IntegratorOptions o,
                              double& x_end) {
  std::vector<double> times{pr.t0()};
  o.on_step = [&](double t) { times.push_back(t); };
  Problem<LotkaVolterra> q = pr;
  q.output_times = {pr.t1()};
  const Solution s = integrate(q, o);
  EXPECT_TRUE(s.summary.success()) << s.summary.message;
  x_end = s.state(0)[0];
  return times;
}

TEST(ContinuousAdjoint, TheForwardPassTakesTheRunsSteps) {
  // Issue 35: the gradient's forward pass is the run's integration. The
  // continuous adjoint's forward pass takes the steps `costate run` takes
  // (ode::integrate on the model's states alone, landing on the objective's
  // observation times: IntegratorOptions::landing_times), to the bit; with a
  // running cost its quadrature z rides along without entering the step
  // control, and with observations the steps land on them as the run's do.
  const auto pr = lv();
  for (Method m : {Method::Dopri5, Method::Sdirk3, Method::Bdf}) {
    SCOPED_TRACE(to_string(m));
    IntegratorOptions o{.method = m, .rtol = 1e-8, .atol = 1e-10};
    double x_end = 0.0;
    const std::vector<double> steps = run_steps(pr, o, x_end);
    const GradientResult c = gradient(pr, FirstState{}, ContinuousAdjoint{}, o);
    EXPECT_EQ(c.steps.times(), steps) << "terminal objective";
    EXPECT_EQ(c.objective, x_end) << "J = x(t1), the run's bits";
    const GradientResult ci = gradient(pr, Integral{}, ContinuousAdjoint{}, o);
    EXPECT_EQ(ci.steps.times(), steps) << "running cost";
    // Observations: the run lands on their times (landing_times, as
    // io::integrator_options sets them for a file), and so does the pass.
    AllTerms obj = lv_objective();
    o.landing_times = obj.obs.times;
    double x_obs = 0.0;
    const std::vector<double> landed = run_steps(pr, o, x_obs);
    const GradientResult co = gradient(pr, obj, ContinuousAdjoint{}, o);
    EXPECT_EQ(co.steps.times(), landed) << "observations";
  }
}

}  // namespace
