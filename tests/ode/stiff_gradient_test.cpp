// Gradients through the adaptive implicit steppers (sdirk3, bdf): discrete
// adjoint vs forward sensitivities on the same replayed steps, vs central
// differences and the Taylor test of the replayed discrete objective,
// bitwise checkpoint invariance, and a stiff Robertson gradient against a
// tightly converged reference by the other method.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
#include "support/dae_models.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;

/// Same discrete solution, two directions of differentiation (the issue's
/// bar for forward vs adjoint).
constexpr double kForwardVsAdjointTol = 1e-10;
/// Central differences (h = 1e-6 relative) of the replayed discrete
/// objective: truncation ~h², round-off ~ε/h plus the Newton residual
/// (newton_tol 1e-13 and 1e-6 of the error tolerance) divided by h: ~1e-7.
constexpr double kFdRelTol = 1e-6;

struct TerminalAndRunning {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * ((1.0 - y[0]) * (1.0 - y[0]) + (1.0 - y[1]) * (1.0 - y[1])) + 0.1 * p[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.1 * t) + 0.01 * p[2] * y[0]);
  }
};

struct VdpFinal {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(y[0] + 1000.0 * y[1]);
  }
};

void expect_rel(const std::vector<double>& got, const std::vector<double>& want, double rel,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * scale) << what << " [" << i << "]";
}

std::vector<double> joined(const GradientResult& r) {
  std::vector<double> g = r.wrt_parameters;
  g.insert(g.end(), r.wrt_initial_state.begin(), r.wrt_initial_state.end());
  return g;
}

const Method kMethods[] = {Method::Sdirk3, Method::Bdf};

TEST(StiffGradient, AdjointMatchesForwardOnTheSameSteps) {
  // Stiff Van der Pol (mu = 1000) through a fast transition region.
  const Problem<VanDerPol> vdp{VanDerPol{}, {2.0, -0.6666}, {1000.0}, {0.0, 0.5}};
  const Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 2.0}};
  LeastSquares ls{.times = {0.5, 1.0, 1.5}, .data = {2, 1, 1, NAN, 1, 1}, .n_states = 2};
  for (Method m : kMethods) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8};
    const auto a = gradient(vdp, VdpFinal{}, DiscreteAdjoint{Binomial{.snapshots = 6}}, opt);
    const auto f = gradient(vdp, VdpFinal{}, Forward{}, opt);
    EXPECT_EQ(a.steps.times(), f.steps.times());
    EXPECT_EQ(a.objective, f.objective);  // the same replayed steps, the same bits
    expect_rel(joined(f), joined(a), kForwardVsAdjointTol, "vdp");
    EXPECT_GT(a.checkpoints.steps, 10);
    std::printf("%s vdp: %lld steps, J = %.12g, dJ/dmu = %.10g\n", to_string(m).c_str(),
                (long long)a.checkpoints.steps, a.objective, a.wrt_parameters[0]);
    // Running cost (the quadrature state z) and observations (steps land on them).
    const auto ar = gradient(lv, TerminalAndRunning{}, DiscreteAdjoint{}, opt);
    const auto fr = gradient(lv, TerminalAndRunning{}, Forward{}, opt);
    expect_rel(joined(fr), joined(ar), kForwardVsAdjointTol, "running cost");
    const auto ao = gradient(lv, ls, DiscreteAdjoint{Online{.snapshots = 4}}, opt);
    const auto fo = gradient(lv, ls, Forward{}, opt);
    expect_rel(joined(fo), joined(ao), kForwardVsAdjointTol, "observations");
    for (double t : ls.times)
      EXPECT_NE(std::find(ao.steps.times().begin(), ao.steps.times().end(), t), ao.steps.times().end());
  }
}

TEST(StiffGradient, CheckpointInvarianceIsBitwise) {
  const Problem<VanDerPol> vdp{VanDerPol{}, {2.0, -0.6666}, {1000.0}, {0.0, 0.5}};
  for (Method m : kMethods) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8};
    const auto ref = gradient(vdp, VdpFinal{}, DiscreteAdjoint{StoreAll{}}, opt);
    const std::int64_t l = ref.checkpoints.steps;
    const std::vector<Checkpointing> schedules = {
        Uniform{.every = 7}, Binomial{.snapshots = 2}, Binomial{.snapshots = 5},
        Online{.snapshots = 4},
        Multilevel{.ram = 3, .disk = 2, .path = "costate_stiff_gradient_checkpoints.h5"}};
    for (const auto& c : schedules) {
      SCOPED_TRACE(to_string(c));
      const auto r = gradient(vdp, VdpFinal{}, DiscreteAdjoint{c}, opt);
      EXPECT_EQ(r.objective, ref.objective);
      EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters);
      EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state);
      if (const auto* b = std::get_if<Binomial>(&c)) {
        EXPECT_EQ(r.checkpoints.forward_steps, binomial_forward_steps(l, b->snapshots));
      }
    }
  }
}

/// A stiff, non-autonomous forced relaxation, y1' = −k (y1 − cos(ω t)) +
/// y2 y1,  y2' = −y2 + p2 y1: the right-hand side depends on t, so the
/// stage times of a reverse step must match the step times exactly when
/// StoreAll reuses Jacobians from the replayed steps.
struct ForcedRelaxation {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = -p[0] * (y[0] - std::cos(3.0 * t)) + y[1] * y[0];
    dydt[1] = -y[1] + p[1] * y[0];
  }
};

struct ForcedObjective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[0] + 0.1 * p[1] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.1 * t) + 0.01 * p[0] * y[0]);
  }
};

TEST(StiffGradient, StoreAllKeepsJacobiansWithTheSameBits) {
  // StoreAll keeps each replayed step's Jacobian (and sdirk3's stages) for
  // its reverse step; the other schedules recompute them. The gradients
  // must still agree bitwise — with time-dependent right-hand sides, a
  // running cost and observations.
  const Problem<ForcedRelaxation> pr{ForcedRelaxation{}, {0.3, 0.1}, {500.0, 0.2}, {0.0, 3.0}};
  LeastSquares ls{.times = {0.7, 1.9}, .data = {0.5, 0.1, 0.2, 0.1}, .n_states = 2};
  for (Method m : kMethods) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8};
    const auto ref = gradient(pr, ForcedObjective{}, DiscreteAdjoint{StoreAll{}}, opt);
    const auto fwd = gradient(pr, ForcedObjective{}, Forward{}, opt);
    expect_rel(joined(fwd), joined(ref), kForwardVsAdjointTol, "store all vs forward");
    EXPECT_GT(ref.checkpoints.steps, 20);
    for (const Checkpointing& c : std::vector<Checkpointing>{Binomial{.snapshots = 3}, Uniform{.every = 5}}) {
      SCOPED_TRACE(to_string(c));
      const auto r = gradient(pr, ForcedObjective{}, DiscreteAdjoint{c}, opt);
      EXPECT_EQ(r.objective, ref.objective);
      EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters);
      EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state);
    }
    const auto obs_all = gradient(pr, ls, DiscreteAdjoint{StoreAll{}}, opt);
    const auto obs_bin = gradient(pr, ls, DiscreteAdjoint{Binomial{.snapshots = 4}}, opt);
    EXPECT_EQ(obs_bin.wrt_parameters, obs_all.wrt_parameters);
    EXPECT_EQ(obs_bin.wrt_initial_state, obs_all.wrt_initial_state);
    const auto obs_fwd = gradient(pr, ls, Forward{}, opt);
    expect_rel(joined(obs_fwd), joined(obs_all), kForwardVsAdjointTol, "observations");
  }
  // The θ-method (Crank–Nicolson) on the same problem: its reverse steps
  // reuse one transposed-LU workspace; store all vs binomial, bitwise.
  const IntegratorOptions cn{.method = Method::CrankNicolson, .dt = 1e-2};
  const auto cn_all = gradient(pr, ForcedObjective{}, DiscreteAdjoint{StoreAll{}}, cn);
  const auto cn_bin = gradient(pr, ForcedObjective{}, DiscreteAdjoint{Binomial{.snapshots = 4}}, cn);
  EXPECT_EQ(cn_bin.wrt_parameters, cn_all.wrt_parameters);
  EXPECT_EQ(cn_bin.wrt_initial_state, cn_all.wrt_initial_state);
  const auto cn_fwd = gradient(pr, ForcedObjective{}, Forward{}, cn);
  expect_rel(joined(cn_fwd), joined(cn_all), kForwardVsAdjointTol, "crank-nicolson");
}

TEST(StiffGradient, CentralDifferencesAndTaylorOfTheReplayedObjective) {
  const Problem<VanDerPol> vdp{VanDerPol{}, {2.0, -0.6666}, {1000.0}, {0.0, 0.5}};
  for (Method m : kMethods) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13};
    const auto r = gradient(vdp, VdpFinal{}, DiscreteAdjoint{Binomial{.snapshots = 5}}, opt);
    // J(x), x = (mu, x0, v0), on the frozen steps (and bdf orders).
    auto J = [&](const std::vector<double>& x) {
      Problem<VanDerPol> q = vdp;
      q.p = {x[0]};
      q.y0 = {x[1], x[2]};
      return gradient(q, VdpFinal{}, DiscreteAdjoint{}, opt, r.steps).objective;
    };
    const std::vector<double> x{1000.0, 2.0, -0.6666};
    const std::vector<double> g = joined(r);
    EXPECT_EQ(J(x), r.objective);
    for (std::size_t i = 0; i < x.size(); ++i) {
      auto a = x, b = x;
      const double h = 1e-6 * std::max(1.0, std::abs(x[i]));
      a[i] += h;
      b[i] -= h;
      const double fd = (J(a) - J(b)) / (2 * h);
      EXPECT_NEAR(g[i], fd, kFdRelTol * std::max(1.0, std::abs(fd))) << i;
    }
    const auto taylor = costate::ad::taylor_test(J, x, {1.0, 1e-3, -2e-3}, g);
    EXPECT_TRUE(taylor.passed) << taylor.message;
    EXPECT_GE(taylor.min_order, 1.9);
  }
}

struct RobertsonObjective {
  // y1 at t1, scaled to O(1), plus the W4 quantity ∫ y3 dt (scaled).
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(1e4 * y[0]);
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(1e-3 * y[2]);
  }
};

TEST(StiffGradient, RobertsonAgainstATightlyConvergedReference) {
  // dJ/dk and dJ/dy0 of Robertson on [0, 4e5] at rtol 1e-6 (bdf, adjoint)
  // against sdirk3 forward sensitivities at rtol 1e-10 (converged to ~1e-8):
  // two methods, two differentiation modes, one exact gradient. At rtol 1e-6
  // the discrete gradient's error is of the order of the solution's global
  // error (observed: <= 5e-6 relative for every component); 1e-4 leaves a
  // margin of 20 and still catches a wrong adjoint term (O(1) errors).
  constexpr double kDiscretisationTol = 1e-4;
  const Problem<Robertson> pr{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 4e5}};
  const auto test = gradient(pr, RobertsonObjective{}, DiscreteAdjoint{Binomial{.snapshots = 20}},
                             {.method = Method::Bdf, .rtol = 1e-6, .atol_per_state = {1e-8, 1e-14, 1e-6}});
  const auto ref = gradient(pr, RobertsonObjective{}, Forward{},
                            {.method = Method::Sdirk3, .rtol = 1e-10, .atol_per_state = {1e-12, 1e-18, 1e-10}});
  std::printf("robertson: bdf %lld steps, sdirk3 reference %lld steps; J = %.12g vs %.12g\n",
              (long long)test.checkpoints.steps, (long long)ref.checkpoints.steps, test.objective,
              ref.objective);
  for (std::size_t i = 0; i < 3; ++i)
    std::printf("  dJ/dk%zu = %.10g vs %.10g; dJ/dy0_%zu = %.10g vs %.10g\n", i + 1,
                test.wrt_parameters[i], ref.wrt_parameters[i], i, test.wrt_initial_state[i],
                ref.wrt_initial_state[i]);
  EXPECT_NEAR(test.objective, ref.objective, kDiscretisationTol * std::abs(ref.objective));
  for (std::size_t i = 0; i < 3; ++i) {
    // Each derivative relative to its own size (they span 1e-6 .. 1e6).
    EXPECT_NEAR(test.wrt_parameters[i], ref.wrt_parameters[i],
                kDiscretisationTol * std::abs(ref.wrt_parameters[i]))
        << "k" << i + 1;
  }
  expect_rel(test.wrt_initial_state, ref.wrt_initial_state, kDiscretisationTol, "y0");
}

TEST(StiffGradient, BdfStoreAllTakesTheForwardRunBitwise) {
  // bdf's forward run makes replay-identical steps, and a StoreAll adjoint
  // takes its states and step Jacobians instead of replaying: the result
  // must be bit for bit the replayed one (the same steps and orders handed
  // back as the replay plan), and the Binomial schedule's, which replays.
  const Problem<Robertson> rob{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 4e5}};
  const IntegratorOptions ro{.method = Method::Bdf, .rtol = 1e-6,
                             .atol_per_state = {1e-8, 1e-14, 1e-6}};
  const Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 2.0}};
  LeastSquares ls{.times = {0.5, 1.0, 1.5}, .data = {2, 1, 1, NAN, 1, 1}, .n_states = 2};
  const IntegratorOptions lo{.method = Method::Bdf, .rtol = 1e-8, .atol = 1e-10};
  // With a running cost the steps are chosen on the model alone, as
  // `costate run` chooses them (issue 35: the gradient's forward pass is
  // the run's), and z is added by quadrature along that run's states: its
  // record is taken too (one integration).
  auto check = [](auto&& grad, const char* what) {
    SCOPED_TRACE(what);
    const GradientResult all = grad(Checkpointing{StoreAll{}}, StepPlan{});
    const GradientResult replayed = grad(Checkpointing{StoreAll{}}, all.steps);
    const GradientResult bin = grad(Checkpointing{Binomial{.snapshots = 4}}, StepPlan{});
    EXPECT_GT(all.checkpoints.steps, 20);
    EXPECT_EQ(bin.steps.times(), all.steps.times());
    EXPECT_EQ(bin.steps.orders(), all.steps.orders());
    for (const GradientResult* r : {&replayed, &bin}) {
      EXPECT_EQ(r->objective, all.objective);
      EXPECT_EQ(r->wrt_parameters, all.wrt_parameters);
      EXPECT_EQ(r->wrt_initial_state, all.wrt_initial_state);
    }
    // The sweep's own right-hand-side count (the call's less the run that
    // chose the steps): the replay re-solves every step (Newton, ≥ 2
    // evaluations each), the forward run's states need none — a running
    // cost's quadrature one per step.
    EXPECT_EQ(replayed.summary.rhs_evaluations, 0);
    const auto steps = static_cast<std::int64_t>(all.steps.steps());
    EXPECT_LE(all.rhs_evaluations - all.summary.rhs_evaluations, steps);
    EXPECT_GE(replayed.rhs_evaluations, 2 * steps);
  };
  check(
      [&](const Checkpointing& c, const StepPlan& steps) {
        return gradient(rob, RobertsonObjective{}, DiscreteAdjoint{c}, ro, steps);
      },
      "robertson, running cost");
  check(
      [&](const Checkpointing& c, const StepPlan& steps) {
        return gradient(lv, ls, DiscreteAdjoint{c}, lo, steps);
      },
      "lotka-volterra, observations");
}

TEST(StiffGradient, LargeColouredDaeWithARunningCostKeepsItsSparsePaths) {
  // A method-of-lines DAE (60 cells: 120 states, a coloured Jacobian) with
  // G = ∫ mean(u v) dt: Newton factors M − hβJ by the sparse LU, the
  // reverse steps solve the model's (M − hβJ)ᵀ by it with z's row as a
  // rank-one term, z is a quadrature along the run's states. The run takes
  // the gradient's steps; store all (the run's record) and binomial
  // (replays) give the same bits; forward tangents (dense solves on the
  // augmented System) agree to round-off; a central difference of D on the
  // same steps to its truncation and Newton noise.
  constexpr double kSparseVsDenseRelTol = 1e-9;  // two elimination orders, as dae_test's
  constexpr double kFdRelTol = 1e-6;             // Newton to replay_kappa, h = 1e-6 D
  using costate::test::dae::MolCost;
  using costate::test::dae::QuasiSteadyDiffusion;
  const std::size_t cells = 60;
  std::vector<double> y0(2 * cells, 0.0);
  for (std::size_t i = 0; i < cells; ++i)
    y0[i] = 1.0 + 0.5 * std::cos(3.14159 * (static_cast<double>(i) + 0.5) / static_cast<double>(cells));
  Problem<QuasiSteadyDiffusion> pr{QuasiSteadyDiffusion{.n = cells}, y0, {0.05, 2.0, 1.0}, {0.0, 1.0}};
  const MolCost G{.n = cells};
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-6, .atol = 1e-8};
  const GradientResult a = gradient(pr, G, DiscreteAdjoint{}, o);
  const GradientResult b = gradient(pr, G, DiscreteAdjoint{Binomial{.snapshots = 4}}, o);
  const GradientResult f = gradient(pr, G, Forward{}, o, a.steps);
  const Solution run = integrate(pr, o);
  ASSERT_TRUE(run.summary.success()) << run.summary.message;
  EXPECT_EQ(static_cast<std::size_t>(run.summary.steps), a.steps.steps());
  EXPECT_EQ(b.steps, a.steps);
  EXPECT_EQ(b.objective, a.objective);
  EXPECT_EQ(b.wrt_parameters, a.wrt_parameters);
  EXPECT_EQ(b.wrt_initial_state, a.wrt_initial_state);
  EXPECT_LT(costate::test::max_rel_err(f.wrt_parameters, a.wrt_parameters), kSparseVsDenseRelTol);
  EXPECT_LT(costate::test::max_rel_err(f.wrt_initial_state, a.wrt_initial_state),
            kSparseVsDenseRelTol);
  const double h = 1e-6 * pr.p[0];
  auto J = [&](double d) {
    Problem<QuasiSteadyDiffusion> q = pr;
    q.p[0] += d;
    return gradient(q, G, DiscreteAdjoint{}, o, a.steps).objective;
  };
  const double fd = (J(h) - J(-h)) / (2.0 * h);
  EXPECT_NEAR(a.wrt_parameters[0], fd, kFdRelTol * std::abs(fd));
}

/// The interrupt a hook throws (as `costate sensitivity`'s SIGTERM check does).
struct Stop {};

/// An on_step that throws Stop at its `at`-th call (counting from 1; 0 never),
/// counting the calls in `calls`.
std::function<void(double)> stop_at(std::int64_t at, std::int64_t& calls) {
  return [at, &calls](double) {
    if (++calls == at) throw Stop{};
  };
}

/// Interrupts the gradient at the at-th hook call and resumes it (under
/// `resume_with`, which may differ from the interrupted schedule), as
/// often as `stops` says; returns the final result and the steps resumed
/// from (−1: an interruption before the reverse sweep began, rerun from the
/// start as `costate sensitivity` does).
template <class M, class O>
GradientResult interrupted_and_resumed(const Problem<M>& pb, const O& obj, IntegratorOptions opt,
                                       const Checkpointing& first, const Checkpointing& resume_with,
                                       const std::vector<double>& fractions,
                                       std::int64_t first_run_calls, std::int64_t sweep_calls,
                                       std::vector<std::int64_t>& resumed_at) {
  std::shared_ptr<const AdjointResume> from;
  for (double f : fractions) {
    std::int64_t calls = 0;
    // A fresh run makes its adaptive first run (hook calls every accepted
    // step) before the sweep; a resumed one replays the recorded steps.
    const std::int64_t offset = from ? 0 : first_run_calls;
    opt.on_step = stop_at(std::max<std::int64_t>(1, offset + static_cast<std::int64_t>(f * sweep_calls)), calls);
    DiscreteAdjoint m{from ? resume_with : first};
    m.resume_from = from;
    m.interrupted_at = std::make_shared<AdjointResume>();
    try {
      return gradient(pb, obj, m, opt);  // finished before this stop
    } catch (const Stop&) {
    }
    resumed_at.push_back(m.interrupted_at->step);
    if (m.interrupted_at->step >= 0) from = m.interrupted_at;  // else: start again
  }
  opt.on_step = {};
  DiscreteAdjoint m{from ? resume_with : first};
  m.resume_from = from;
  return gradient(pb, obj, m, opt);
}

// `costate sensitivity --resume` (issue 18): a discrete adjoint interrupted
// in its reverse sweep and continued from its place (AdjointResume) in a
// fresh call gives the uninterrupted gradient's bits — under every schedule,
// resumed under another schedule, interrupted twice, for explicit, θ and
// the adaptive implicit steppers, with observations and a running cost.
TEST(StiffGradient, InterruptedAdjointsResumeToTheSameBits) {
  const Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 2.0}};
  LeastSquares ls{.times = {0.5, 1.0, 1.5}, .data = {2, 1, 1, NAN, 1, 1}, .n_states = 2};
  const std::vector<IntegratorOptions> steppers = {
      {.method = Method::RK4, .dt = 1e-2},
      // Tolerances tight enough for ≥ 150 steps: the sweeps' hook runs every
      // kSweepHookInterval = 16 steps, and the stops need several calls.
      {.method = Method::Dopri5, .rtol = 1e-12, .atol = 1e-14},
      {.method = Method::BackwardEuler, .dt = 1e-2},
      {.method = Method::Sdirk3, .rtol = 1e-9, .atol = 1e-11},
      {.method = Method::Bdf, .rtol = 1e-9, .atol = 1e-11}};
  const std::vector<Checkpointing> schedules = {
      StoreAll{}, Uniform{.every = 7}, Binomial{.snapshots = 3}, Online{.snapshots = 4},
      Multilevel{.ram = 2, .disk = 2, .path = "costate_resume_checkpoints.h5"}};
  int resumes = 0, restarts = 0;
  for (const IntegratorOptions& base : steppers) {
    SCOPED_TRACE(to_string(base.method));
    for (std::size_t k = 0; k < schedules.size(); ++k) {
      const Checkpointing& c = schedules[k];
      const Checkpointing& other = schedules[(k + 2) % schedules.size()];
      SCOPED_TRACE(to_string(c) + " resumed under " + to_string(other));
      auto check = [&](const auto& obj, const char* what) {
        SCOPED_TRACE(what);
        IntegratorOptions opt = base;
        std::int64_t calls = 0;
        opt.on_step = stop_at(0, calls);
        const GradientResult ref = gradient(lv, obj, DiscreteAdjoint{c}, opt);
        // The sweep's own calls (every kSweepHookInterval steps, forward and
        // reverse): the same gradient on the recorded steps, no first run.
        std::int64_t sweep_calls = 0;
        opt.on_step = stop_at(0, sweep_calls);
        gradient(lv, obj, DiscreteAdjoint{c}, opt, ref.steps);
        ASSERT_GT(sweep_calls, 8) << "too few hook calls to interrupt";
        // Late in the reverse sweep, then in the resumed one; one stop early
        // (the sweep's forward pass: nothing to continue from, a restart).
        for (const std::vector<double>& at :
             {std::vector<double>{0.8}, std::vector<double>{0.7, 0.5}, std::vector<double>{0.05, 0.9}}) {
          std::vector<std::int64_t> resumed_at;
          const GradientResult r =
              interrupted_and_resumed(lv, obj, base, c, other, at, calls - sweep_calls, sweep_calls, resumed_at);
          EXPECT_EQ(r.objective, ref.objective);
          EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters);
          EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state);
          ASSERT_FALSE(resumed_at.empty()) << "the run was not interrupted";
          for (std::int64_t s : resumed_at) (s >= 0 ? resumes : restarts) += 1;
          EXPECT_GE(resumed_at.back(), 0) << "the last stop should land in a reverse sweep";
        }
      };
      check(ls, "observations");
      check(TerminalAndRunning{}, "terminal and running cost");
    }
  }
  std::printf("[ resume ] %d resumed sweeps, %d stops before the reverse sweep (restarted); "
              "every gradient bitwise equal to the uninterrupted one\n", resumes, restarts);
  // Each of the 150 interrupted runs ends in a resumed sweep (asserted
  // above); some stops land in a finished run or before a reverse sweep.
  EXPECT_GE(resumes, 75);
  EXPECT_GT(restarts, 0);
}

TEST(StiffGradient, ResumeRefusesAnotherRunsPlace) {
  const Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 2.0}};
  const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-2};
  auto bad = std::make_shared<AdjointResume>();
  bad->step = 5;  // beyond its 2 steps
  bad->steps = StepPlan({0.0, 1.0, 2.0});
  bad->lambda.assign(3, 0.0);
  bad->mu.assign(4, 0.0);
  DiscreteAdjoint m{StoreAll{}};
  m.resume_from = bad;
  EXPECT_THROW(gradient(lv, TerminalAndRunning{}, m, opt), costate::Error);
  // A replay plan and a place to resume from are exclusive.
  const StepPlan times({0.0, 1.0, 2.0});
  bad->step = 1;
  EXPECT_THROW(gradient(lv, TerminalAndRunning{}, m, opt, times), costate::Error);
}

}  // namespace
