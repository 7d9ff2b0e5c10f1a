// The CVODES backend: integration against the native steppers (dopri5 at
// tight tolerances, Crank–Nicolson with small steps for stiff Van der Pol),
// Robertson's stiff kinetics to t = 4e7 with the BENCHMARKS.md tolerances,
// and gradients by cvodes_forward and cvodes_adjoint against the discrete
// adjoint and central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "support/relative_error.hpp"
#include "test_models.hpp"

namespace {

using namespace costate::ode;

/// CVODES at rtol 1e-10 against dopri5 at rtol 1e-13 on non-stiff problems:
/// both global errors are well below 1e-7 (CVODES' global error is ~10-100×
/// its local tolerance on these intervals).
constexpr double kNonStiffRelTol = 1e-7;
/// Gradients of CVODES (a continuous solution to rtol 1e-10) against the
/// discrete adjoint of dopri5 at rtol 1e-13: the same exact derivative up to
/// both solvers' errors.
constexpr double kGradientRelTol = 1e-6;

using costate::test::max_rel_err;
using costate::test::rel_err;

IntegratorOptions cvodes(Method m, double rtol, double atol) {
  return {.method = m, .rtol = rtol, .atol = atol};
}

TEST(Cvodes, LotkaVolterraAgreesWithDopri5) {
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  pr.output_times = {0.0, 2.5, 5.0, 7.5, 10.0};
  const Solution ref = integrate(pr, {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  for (Method m : {Method::CvodesBdf, Method::CvodesAdams}) {
    const Solution s = integrate(pr, cvodes(m, 1e-10, 1e-12));
    ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
    ASSERT_EQ(s.n_outputs(), ref.n_outputs());
    EXPECT_EQ(s.t, ref.t);
    EXPECT_LT(max_rel_err(s.y, ref.y), kNonStiffRelTol) << to_string(m);
    EXPECT_GT(s.summary.steps, 0);
  }
}

TEST(Cvodes, FitzHughNagumoAgreesWithDopri5) {
  Problem<FitzHughNagumo> pr{FitzHughNagumo{}, {-1.0, 1.0}, {0.7, 0.8, 12.5, 0.5}, {0.0, 50.0}};
  const Solution ref = integrate(pr, {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  for (Method m : {Method::CvodesBdf, Method::CvodesAdams}) {
    const Solution s = integrate(pr, cvodes(m, 1e-10, 1e-12));
    ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
    EXPECT_LT(max_rel_err(s.y, ref.y), kNonStiffRelTol) << to_string(m);
  }
}

Problem<Robertson> robertson(double t1) {
  return Problem<Robertson>{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, t1}};
}
IntegratorOptions robertson_options() {
  // BENCHMARKS.md W4: BDF, rtol 1e-6, atol (1e-8, 1e-14, 1e-6).
  return {.method = Method::CvodesBdf, .rtol = 1e-6, .atol_per_state = {1e-8, 1e-14, 1e-6}};
}

TEST(Cvodes, RobertsonToFourTimesTenToTheSeven) {
  const Solution s = integrate(robertson(4e7), robertson_options());
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  // CVODES' own cvsRoberts_dns takes ~766 steps to 4e10 on these
  // tolerances (per BENCHMARKS.md's count for 4e7 as well); a factor ~2
  // either way means the AD Jacobian or the settings went wrong.
  EXPECT_GT(s.summary.steps, 300);
  EXPECT_LT(s.summary.steps, 1500);
  // Reference: the same backend at rtol 1e-11 (its error is ~1e-4 of the
  // one tested). Relative 1e-3 on y1, y3 and on y2 (≈ 1e-10 here, carried
  // at atol 1e-14) is the accuracy rtol 1e-6 gives over 4e7.
  const Solution ref = integrate(
      robertson(4e7),
      {.method = Method::CvodesBdf, .rtol = 1e-11, .atol_per_state = {1e-14, 1e-20, 1e-12}});
  ASSERT_TRUE(ref.summary.success()) << ref.summary.brief_report();
  const auto yf = s.state(s.n_outputs() - 1), yr = ref.state(ref.n_outputs() - 1);
  constexpr double kRobertsonRelTol = 1e-3;
  for (int i = 0; i < 3; ++i) EXPECT_LT(rel_err(yf[i], yr[i]), kRobertsonRelTol) << i;
  // Mass is conserved exactly by the ODE (Σ y' = 0); BDF keeps linear
  // invariants up to the Newton tolerance.
  constexpr double kMassTol = 1e-6;
  EXPECT_NEAR(yf[0] + yf[1] + yf[2], 1.0, kMassTol);
}

TEST(Cvodes, RobertsonAtFortyMatchesThePublishedSolution) {
  auto pr = robertson(40.0);
  const Solution s = integrate(
      pr, {.method = Method::CvodesBdf, .rtol = 1e-8, .atol_per_state = {1e-12, 1e-18, 1e-10}});
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  // y(40) = (0.7158, 9.185e-6, 0.2842) to the 4 digits printed by CVODES'
  // cvsRoberts_dns example and Hairer & Wanner's tables; 4 digits are
  // 5e-4 relative at worst.
  constexpr double kPublishedRelTol = 5e-4;
  const auto y = s.state(s.n_outputs() - 1);
  EXPECT_LT(rel_err(y[0], 0.7158), kPublishedRelTol);
  EXPECT_LT(rel_err(y[1], 9.185e-6), kPublishedRelTol);
  EXPECT_LT(rel_err(y[2], 0.2842), kPublishedRelTol);
}

TEST(Cvodes, StiffVanDerPolAgreesWithCrankNicolson) {
  Problem<VanDerPol> pr{VanDerPol{}, {2.0, -2.0 / 3.0}, {1e3}, {0.0, 0.5}};
  const Solution s =
      integrate(pr, {.method = Method::CvodesBdf, .rtol = 1e-10, .atol = 1e-12});
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  const Solution cn = integrate(pr, {.method = Method::CrankNicolson, .dt = 1e-4});
  ASSERT_TRUE(cn.summary.success()) << cn.summary.brief_report();
  // CN with dt = 1e-4 on the slow manifold: O(dt²) error ~1e-8 relative.
  constexpr double kCnRelTol = 1e-6;
  EXPECT_LT(max_rel_err(s.y, cn.y), kCnRelTol);
}

/// ℓ_k = ½ |y(t_k) − 1|², t_k = 1..10 (BENCHMARKS.md W4, Lotka–Volterra).
LeastSquares lv_observations() {
  LeastSquares ls;
  ls.n_states = 2;
  for (int k = 1; k <= 10; ++k) {
    ls.times.push_back(static_cast<double>(k));
    ls.data.push_back(1.0);
    ls.data.push_back(1.0);
  }
  ls.weights = {2.0, 2.0};  // (y1 − 1)² + (y2 − 1)²
  return ls;
}

TEST(CvodesGradient, LotkaVolterraObservationsAgreeWithDiscreteAdjoint) {
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  const LeastSquares obs = lv_observations();
  const GradientResult ref =
      gradient(pr, obs, DiscreteAdjoint{}, {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  for (Method m : {Method::CvodesBdf, Method::CvodesAdams}) {
    const IntegratorOptions o = cvodes(m, 1e-10, 1e-12);
    const GradientResult fw = gradient(pr, obs, CvodesForward{}, o);
    const GradientResult adj = gradient(pr, obs, CvodesAdjoint{}, o);
    EXPECT_LT(rel_err(fw.objective, ref.objective), kGradientRelTol);
    EXPECT_LT(rel_err(adj.objective, ref.objective), kGradientRelTol);
    EXPECT_LT(max_rel_err(fw.wrt_parameters, ref.wrt_parameters), kGradientRelTol) << to_string(m);
    EXPECT_LT(max_rel_err(adj.wrt_parameters, ref.wrt_parameters), kGradientRelTol) << to_string(m);
    EXPECT_LT(max_rel_err(fw.wrt_initial_state, ref.wrt_initial_state), kGradientRelTol);
    EXPECT_LT(max_rel_err(adj.wrt_initial_state, ref.wrt_initial_state), kGradientRelTol);
  }
}

TEST(CvodesGradient, CheckpointSettingsAndInterpolationGiveTheSameGradient) {
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  const LeastSquares obs = lv_observations();
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const GradientResult base = gradient(pr, obs, CvodesAdjoint{}, o);
  // CVODES' forward steps shift slightly with the checkpoint spacing and the
  // backward pass's interpolation of y differs: both at the level of the
  // tolerance (rtol 1e-10), far below 1e-6.
  constexpr double kInterpolationRelTol = 1e-6;
  for (int steps : {1, 6, 10, 1000})
    for (CvodesInterpolation ip : {CvodesInterpolation::Hermite, CvodesInterpolation::Polynomial}) {
      if (ip == CvodesInterpolation::Polynomial && steps < 6) continue;
      const GradientResult g =
          gradient(pr, obs, CvodesAdjoint{.steps = steps, .interpolation = ip}, o);
      EXPECT_LT(rel_err(g.objective, base.objective), kInterpolationRelTol);
      EXPECT_LT(max_rel_err(g.wrt_parameters, base.wrt_parameters), kInterpolationRelTol)
          << steps << " " << to_string(ip);
    }
  // Too few steps per interval for the polynomial: an error, not a crash.
  EXPECT_THROW((void)gradient(pr, obs,
                              CvodesAdjoint{.steps = 3,
                                            .interpolation = CvodesInterpolation::Polynomial},
                              o),
               costate::Error);
}

TEST(CvodesGradient, AutoCheckpointStepsFollowTheSystemSize) {
  // 20 steps per state, within kAutoCheckpointBytes (64 MiB) of points of 2
  // vectors (Hermite: y, y'), each n doubles plus 2 KiB; in [100, 10 000].
  EXPECT_EQ(auto_checkpoint_steps(2, 2), kAutoCheckpointMinSteps);     // 40 → 100
  EXPECT_EQ(auto_checkpoint_steps(25, 2), 500);                        // 20 per state
  EXPECT_EQ(auto_checkpoint_steps(500, 2), 67108864 / (2 * (500 * 8 + 2048)));  // 5 548 (memory)
  EXPECT_EQ(auto_checkpoint_steps(100000, 2), kAutoCheckpointMinSteps);  // memory → the floor
  EXPECT_EQ((CvodesAdjoint{.steps = 7}.resolved_steps(500)), 7);
  EXPECT_EQ((CvodesAdjoint{}.resolved_steps(500)), 5548);
  EXPECT_EQ((CvodesAdjoint{.interpolation = CvodesInterpolation::Polynomial}.resolved_steps(1000)),
            67108864 / (1000 * 8 + 2048));  // points of y alone: 6 678
  EXPECT_EQ((CvodesAdjoint{}.resolved_steps(500, 2)), 67108864 / (4 * (500 * 8 + 2048)));
  EXPECT_EQ((IdasAdjoint{}.resolved_steps(500)), 5548);
  EXPECT_EQ((IdasAdjoint{}.resolved_steps(200)), 4000);

  // `auto` is that spacing and nothing else: the same bits as asking for it,
  // and the method says which it used.
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  const LeastSquares obs = lv_observations();
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const GradientResult a = gradient(pr, obs, CvodesAdjoint{}, o);
  const GradientResult b = gradient(pr, obs, CvodesAdjoint{.steps = kAutoCheckpointMinSteps}, o);
  EXPECT_EQ(a.objective, b.objective);
  EXPECT_EQ(a.wrt_parameters, b.wrt_parameters);
  EXPECT_EQ(a.wrt_initial_state, b.wrt_initial_state);
  EXPECT_NE(a.method.find("steps 100 auto"), std::string::npos) << a.method;
  EXPECT_NE(b.method.find("steps 100,"), std::string::npos) << b.method;
}

struct TerminalAndRunning {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * (y[0] * y[0] + y[1] * y[1]) + 0.1 * p[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.01 * t) + 0.01 * p[3] * y[0]);
  }
};

TEST(CvodesGradient, FitzHughNagumoTerminalAndRunning) {
  Problem<FitzHughNagumo> pr{FitzHughNagumo{}, {-1.0, 1.0}, {0.7, 0.8, 12.5, 0.5}, {0.0, 20.0}};
  const GradientResult ref = gradient(pr, TerminalAndRunning{}, DiscreteAdjoint{},
                                      {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const GradientResult fw = gradient(pr, TerminalAndRunning{}, CvodesForward{}, o);
  const GradientResult adj = gradient(pr, TerminalAndRunning{}, CvodesAdjoint{}, o);
  EXPECT_LT(rel_err(fw.objective, ref.objective), kGradientRelTol);
  EXPECT_LT(rel_err(adj.objective, ref.objective), kGradientRelTol);
  EXPECT_LT(max_rel_err(fw.wrt_parameters, ref.wrt_parameters), kGradientRelTol);
  EXPECT_LT(max_rel_err(adj.wrt_parameters, ref.wrt_parameters), kGradientRelTol);
  EXPECT_LT(max_rel_err(fw.wrt_initial_state, ref.wrt_initial_state), kGradientRelTol);
  EXPECT_LT(max_rel_err(adj.wrt_initial_state, ref.wrt_initial_state), kGradientRelTol);
}

/// G = ∫ y3 dt (BENCHMARKS.md W4, Robertson).
struct IntegralOfY3 {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[2];
  }
};

TEST(CvodesGradient, RobertsonIntegralAdjointAgreesWithForwardAndDifferences) {
  const auto pr = robertson(4e7);
  IntegratorOptions o = robertson_options();
  o.rtol = 1e-9;
  o.atol_per_state = {1e-12, 1e-18, 1e-10};
  const GradientResult fw = gradient(pr, IntegralOfY3{}, CvodesForward{}, o);
  const GradientResult adj = gradient(pr, IntegralOfY3{}, CvodesAdjoint{}, o);
  // Both solve for the same exact derivative to rtol 1e-9 over a stiff
  // transient; ~1e-5 relative between them.
  constexpr double kStiffGradientRelTol = 1e-5;
  EXPECT_LT(max_rel_err(adj.wrt_parameters, fw.wrt_parameters), kStiffGradientRelTol);
  EXPECT_LT(max_rel_err(adj.wrt_initial_state, fw.wrt_initial_state), kStiffGradientRelTol);
  // The backward integration's steps: the adjoint's, as its report says;
  // none for forward sensitivities.
  EXPECT_EQ(fw.backward_steps, 0);
  EXPECT_GT(adj.backward_steps, 0);
  EXPECT_NE(adj.summary.message.find("backward pass " + std::to_string(adj.backward_steps) + " steps"),
            std::string::npos)
      << adj.summary.message;
  // Central differences in k1 (relative step 1e-4: truncation ~1e-8, the
  // solver's noise 1e-9·G/1e-4 ~ 1e-5).
  constexpr double kStiffFdRelTol = 1e-4;
  for (std::size_t j = 0; j < 3; ++j) {
    auto pp = pr, pm = pr;
    const double h = 1e-4 * pr.p[j];
    pp.p[j] += h;
    pm.p[j] -= h;
    const double fd = (gradient(pp, IntegralOfY3{}, CvodesForward{}, o).objective -
                       gradient(pm, IntegralOfY3{}, CvodesForward{}, o).objective) /
                      (2 * h);
    EXPECT_LT(rel_err(adj.wrt_parameters[j], fd), kStiffFdRelTol) << j;
  }
}

/// A terminal and a running cost for models with one parameter.
struct TerminalAndRunningP0 {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * (y[0] * y[0] + y[1] * y[1]) + 1e-3 * p[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.01 * t) + 1e-4 * p[0] * y[0]);
  }
};

TEST(CvodesGradient, StiffVanDerPolAdjointAgreesWithForwardAndCrankNicolson) {
  Problem<VanDerPol> pr{VanDerPol{}, {2.0, -2.0 / 3.0}, {1e3}, {0.0, 0.5}};
  const TerminalAndRunningP0 obj;
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const GradientResult fw = gradient(pr, obj, CvodesForward{}, o);
  const GradientResult adj = gradient(pr, obj, CvodesAdjoint{}, o);
  const GradientResult cn = gradient(pr, obj, DiscreteAdjoint{}, {.method = Method::CrankNicolson, .dt = 1e-4});
  constexpr double kStiffGradientRelTol = 1e-6;
  EXPECT_LT(max_rel_err(adj.wrt_parameters, fw.wrt_parameters), kStiffGradientRelTol);
  EXPECT_LT(max_rel_err(adj.wrt_initial_state, fw.wrt_initial_state), kStiffGradientRelTol);
  // Crank–Nicolson's O(dt²) discretisation error in the gradient.
  constexpr double kCnGradientRelTol = 1e-5;
  EXPECT_LT(max_rel_err(adj.wrt_parameters, cn.wrt_parameters), kCnGradientRelTol);
  EXPECT_LT(max_rel_err(adj.wrt_initial_state, cn.wrt_initial_state), kCnGradientRelTol);
}

using test::Chain;
using test::SumOfSquares;

TEST(CvodesGradient, LargeSystemUsesTheTapeAndAgrees) {
  constexpr std::size_t n = 40;
  Problem<Chain> pr{Chain{}, std::vector<double>(n), std::vector<double>(n), {0.0, 2.0}};
  for (std::size_t i = 0; i < n; ++i) {
    pr.y0[i] = 1.0 + 0.01 * static_cast<double>(i);
    pr.p[i] = 0.5 + 0.02 * static_cast<double>(i);
  }
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const GradientResult fw = gradient(pr, SumOfSquares{}, CvodesForward{}, o);
  const GradientResult adj = gradient(pr, SumOfSquares{}, CvodesAdjoint{}, o);
  EXPECT_GT(adj.vjp_evaluations, 0);
  EXPECT_LT(max_rel_err(adj.wrt_parameters, fw.wrt_parameters), kGradientRelTol);
  EXPECT_LT(max_rel_err(adj.wrt_initial_state, fw.wrt_initial_state), kGradientRelTol);
}

TEST(CvodesGradient, MismatchedMethodsAreClearErrors) {
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 1.0}};
  const TerminalAndRunning obj;
  try {
    (void)gradient(pr, obj, CvodesAdjoint{}, {.method = Method::Dopri5});
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cvodes_bdf"), std::string::npos) << e.what();
  }
  try {
    (void)gradient(pr, obj, DiscreteAdjoint{}, {.method = Method::CvodesBdf});
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cvodes_adjoint"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)gradient(pr, obj, CvodesAdjoint{.steps = -1}, {.method = Method::CvodesBdf}),
               costate::Error);
}

/// LV observations at the times of `obs` inside one segment, plus λᵀy at
/// the segment's end when `lambda` is non-empty (the later segments'
/// dJ/dy there): the objective a chain of segments hands ode::gradient.
struct SegmentObservations {
  LeastSquares obs;
  const std::vector<double>* lambda = nullptr;
  std::vector<double> observation_times() const { return obs.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return obs.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T sum = T(0.0);
    for (std::size_t i = 0; i < lambda->size(); ++i) sum = T(sum + (*lambda)[i] * y[i]);
    return sum;
  }
};

/// Observations k with from ≤ t_k < to (to inclusive for the last segment).
LeastSquares observations_between(const LeastSquares& all, double from, double to, bool last) {
  LeastSquares part;
  part.n_states = all.n_states;
  part.weights = all.weights;
  for (std::size_t k = 0; k < all.times.size(); ++k)
    if (all.times[k] > from && (all.times[k] < to || (last && all.times[k] == to))) {
      part.times.push_back(all.times[k]);
      for (std::size_t i = 0; i < all.n_states; ++i) part.data.push_back(all.data[k * all.n_states + i]);
    }
  return part;
}

TEST(CvodesGradient, PendingGradientsOfAChainEqualTheOneCallGradients) {
  // LV on [0, 10] cut at 3.5 and 7.25: each piece's forward pass once
  // (begin_gradient), its end the next piece's start, then the backward
  // passes last first, each finished with the later pieces' λ.
  const std::vector<double> p{1.5, 1.0, 3.0, 1.0};
  const std::vector<double> cuts{0.0, 3.5, 7.25, 10.0};
  const LeastSquares all = lv_observations();
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const CvodesAdjoint adj{.forward_tolerance_factor = 1e-2};
  const std::size_t n_seg = cuts.size() - 1;
  const std::vector<double> none;
  std::vector<SegmentObservations> objectives;
  for (std::size_t s = 0; s < n_seg; ++s)
    objectives.push_back({observations_between(all, cuts[s], cuts[s + 1], s + 1 == n_seg), &none});
  std::vector<std::vector<double>> starts{{1.0, 1.0}};
  std::vector<PendingGradient> pending;
  for (std::size_t s = 0; s < n_seg; ++s) {
    const Problem<LotkaVolterra> piece{LotkaVolterra{}, starts[s], p, {cuts[s], cuts[s + 1]}};
    pending.push_back(begin_gradient(piece, objectives[s], adj, o));
    starts.push_back(pending.back().end_state());
  }
  // The same pieces by ode::gradient, from the same starts, each with the
  // terminal term λᵀy(end): the same forward steps (the same CVODES run),
  // λ entering at the end through the objective instead of finish() — equal
  // but for the order in which the jump at the end is summed.
  constexpr double kSameRunRelTol = 1e-13;
  std::vector<double> lambda, lambda_ref, dp(p.size(), 0.0);
  double objective = 0.0;
  for (std::size_t s = n_seg; s-- > 0;) {
    const GradientResult g = pending.back().finish(lambda);
    pending.pop_back();
    const Problem<LotkaVolterra> piece{LotkaVolterra{}, starts[s], p, {cuts[s], cuts[s + 1]}};
    const SegmentObservations with_carried{objectives[s].obs, &lambda};
    const GradientResult ref = gradient(piece, with_carried, adj, o);
    double carried = 0.0;
    for (std::size_t i = 0; i < lambda.size(); ++i) carried += lambda[i] * starts[s + 1][i];
    EXPECT_LT(rel_err(g.objective, ref.objective - carried), kSameRunRelTol) << s;
    EXPECT_LT(max_rel_err(g.wrt_parameters, ref.wrt_parameters), kSameRunRelTol) << s;
    EXPECT_LT(max_rel_err(g.wrt_initial_state, ref.wrt_initial_state), kSameRunRelTol) << s;
    EXPECT_EQ(g.method, ref.method);
    objective += g.objective;
    for (std::size_t j = 0; j < p.size(); ++j) dp[j] += g.wrt_parameters[j];
    lambda = g.wrt_initial_state;
  }
  // The whole chain against one gradient over [0, 10]: the pieces restart
  // CVODES at the cuts, so the two differ by the forward pass's tolerance
  // (1e-12 here), well below kGradientRelTol.
  const Problem<LotkaVolterra> whole{LotkaVolterra{}, {1.0, 1.0}, p, {0.0, 10.0}};
  const GradientResult one = gradient(whole, all, adj, o);
  EXPECT_LT(rel_err(objective, one.objective), kGradientRelTol);
  EXPECT_LT(max_rel_err(dp, one.wrt_parameters), kGradientRelTol);
  EXPECT_LT(max_rel_err(lambda, one.wrt_initial_state), kGradientRelTol);
}

TEST(CvodesGradient, PendingGradientRefusesMisuseByName) {
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 2.0}};
  const TerminalAndRunning obj;
  PendingGradient g = begin_gradient(pr, obj, CvodesAdjoint{}, cvodes(Method::CvodesBdf, 1e-8, 1e-10));
  EXPECT_EQ(g.end_state().size(), 2u);
  try {
    (void)g.finish(std::vector<double>{1.0, 2.0, 3.0});
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 entries for 2 states"), std::string::npos) << e.what();
  }
  (void)g.finish({});
  try {
    (void)g.finish({});
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("once"), std::string::npos) << e.what();
  }
}

}  // namespace
