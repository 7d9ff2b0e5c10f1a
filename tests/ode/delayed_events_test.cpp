// Delayed events (events.hpp) against closed forms. A decay x' = −k x whose
// event triggers at τ — a parameter time (g = t − τ) or where x falls to a
// threshold θ (g = θ − x) — and executes after a delay d = d0 + e·x(τ) that
// depends on the state at the trigger and on parameters, assigning
// x ← a·x_src + c with x_src from the trigger time (SBML's
// useValuesFromTriggerTime) or from the execution. The run and every replay
// of its plan take the values from where SBML says; the gradients — forward
// sensitivities, the discrete adjoint (every schedule, a block of seeds),
// cvodes_forward — equal the closed form's exact derivatives (by ad::Dual on
// the closed form itself), central differences, and each other; so do the
// continuous adjoint and cvodes_adjoint (the links carried backward by
// instant index); the paths that do not carry delays refuse them by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/continuous_adjoint.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/event_condition.hpp"
#include "costate/expr/program.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/idas.hpp"
#include "costate/ode/integrate.hpp"
#include "support/event_settings.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/support.hpp"

namespace {

using namespace costate;
using D8 = ad::Dual<double, 8>;

// Forward and adjoint are transposes of one discrete map: round-off apart
// (relative to the largest gradient entry).
constexpr double kTransposeTol = 1e-11;
// Central differences, each evaluation locating its own instants (dopri5 at
// rtol 1e-12): step 1e-5 relative, truncation ~1e-10, the adaptive steps'
// noise ~1e-12/1e-5 = 1e-7 — agreement to 1e-6 of the largest entry.
constexpr double kDifferenceTol = 1e-6;
constexpr double kDifferenceStep = 1e-5;

/// x' = −k x; event "delayed dose": trigger at τ (time) or where x falls to
/// θ (state), delay d0 + e·x, assignment x ← a·x_src + c.
/// p = (k, τ or θ, d0, e, a, c).
struct DelayedDose {
  bool state_trigger = false;  // g = θ − x (else g = t − τ)
  bool trigger_values = true;  // SBML's useValuesFromTriggerTime
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[0];
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T t, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    g[0] = state_trigger ? p[1] - y[0] : t - p[1];
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const {
    return {.name = "delayed dose",
            .use_values_from_trigger_time = trigger_values,
            .has_delay = true};
  }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = p[4] * y[0] + p[5];
  }
  template <class T>
  T event_delay(std::size_t, T, std::span<const T> y, std::span<const T> p) const {
    return p[2] + p[3] * y[0];
  }
  double event_priority(std::size_t, double, std::span<const double>,
                        std::span<const double>) const {
    return 0.0;
  }
  static constexpr std::size_t kTargets[1] = {0};
};

/// The same with its delay on doubles only (runs; derivatives refused).
struct DoubleOnlyDelay : DelayedDose {
  double event_delay(std::size_t, double, std::span<const double> y,
                     std::span<const double> p) const {
    return p[2] + p[3] * y[0];
  }
};

/// x(t1) after the one execution; u = (x0, k, τ or θ, d0, e, a, c).
template <class T>
T closed(const T* u, double t1, bool state_trigger, bool trigger_values) {
  const T &x0 = u[0], &k = u[1], &s = u[2], &d0 = u[3], &e = u[4], &a = u[5], &c = u[6];
  const T tau = state_trigger ? log(x0 / s) / k : s;
  const T x_trig = state_trigger ? s : x0 * exp(-k * tau);
  const T d = d0 + e * x_trig;
  const T x_exec = x_trig * exp(-k * d);  // x just before the execution
  const T src = trigger_values ? x_trig : x_exec;
  return (a * src + c) * exp(-k * (t1 - (tau + d)));
}

/// The four variants: trigger by time or state, values from the trigger or
/// the execution. x0 = 2, k = 0.8, d = 0.3 + 0.4 x(τ), x ← 0.5 x_src + 1 on
/// [0, 2]: time τ = 0.6 executes at 1.395; θ = 1.2 triggers at 0.639 and
/// executes at 1.419, and x falls to θ again at 1.78 (trigger values) or
/// 1.54 (execution values), scheduling an execution after t1 (2.56, 2.32).
struct Variant {
  const char* name;
  bool state_trigger, trigger_values;
};
constexpr Variant kVariants[] = {{"time trigger, trigger-time values", false, true},
                                 {"time trigger, execution-time values", false, false},
                                 {"state trigger, trigger-time values", true, true},
                                 {"state trigger, execution-time values", true, false}};

ode::Problem<DelayedDose> problem_of(const Variant& v) {
  DelayedDose m;
  m.state_trigger = v.state_trigger;
  m.trigger_values = v.trigger_values;
  return {m, {2.0}, {0.8, v.state_trigger ? 1.2 : 0.6, 0.3, 0.4, 0.5, 1.0}, {0.0, 2.0}};
}

/// J = x(t1).
struct FinalState {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};
/// The adjoint block's objectives: J = w₁ x(t1) + w₂ (x(t1)² + k x(t1)).
struct Mixed {
  double w1 = 1.0, w2 = 0.0;
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return w1 * y[0] + w2 * (y[0] * y[0] + p[0] * y[0]);
  }
};

/// u = (x0, p…) and the closed form's value and exact gradient at u.
std::vector<double> closed_gradient(const ode::Problem<DelayedDose>& problem, const Variant& v,
                                    double& value) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  std::vector<D8> ud(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) ud[i] = D8::seed(u[i], static_cast<int>(i));
  const D8 j = closed(ud.data(), problem.t1(), v.state_trigger, v.trigger_values);
  value = j.value();
  std::vector<double> g(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) g[i] = j.tangent(static_cast<int>(i));
  return g;
}

double entry(const ode::GradientResult& r, std::size_t i) {
  return i == 0 ? r.wrt_initial_state[0] : r.wrt_parameters[i - 1];
}

double largest(const std::vector<double>& g) {
  double s = 0.0;
  for (double v : g) s = std::max(s, std::abs(v));
  return s;
}

using Setting = costate::test::EventSetting;
using costate::test::adaptive_options;
using costate::test::fixed_options;
std::vector<Setting> settings() { return costate::test::event_settings(); }

TEST(DelayedEvents, TheRunAndItsReplaysTakeTheValuesFromWhereSbmlSays) {
  // The run (the event driver) and a replay of its plan (the discrete
  // adjoint's forward sweep, InstantJump::apply) both assign 0.5 x(τ) + 1
  // with values from the trigger time and 0.5 x(τ + d) + 1 without; the two
  // closed forms differ by 0.5 x(τ)(1 − e^{−k d}) e^{−k(t1 − τ − d)} ≈ 0.14.
  for (const Variant& v : kVariants) {
    const ode::Problem<DelayedDose> problem = problem_of(v);
    double j_closed = 0.0;
    (void)closed_gradient(problem, v, j_closed);
    for (const Setting& s : settings()) {
      SCOPED_TRACE(std::string(v.name) + " with " + s.name);
      ode::Problem<DelayedDose> q = problem;
      q.output_times = {q.t1()};
      const ode::Solution run = ode::integrate(q, s.options);
      ASSERT_TRUE(run.summary.success()) << run.summary.message;
      EXPECT_EQ(run.summary.events, 1) << "one execution in [t0, t1]";
      EXPECT_NEAR(run.state(0)[0], j_closed, s.closed_tol * j_closed) << "the run";
      const ode::GradientResult replay =
          ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{}, s.options);
      EXPECT_NEAR(replay.objective, j_closed, s.closed_tol * j_closed) << "the replay";
      // The plan: the trigger instant schedules, the execution's origin is
      // it; the state trigger's second crossing schedules past t1.
      const auto& ev = replay.steps.events();
      ASSERT_EQ(ev.size(), v.state_trigger ? 3u : 2u);
      EXPECT_TRUE(ev[0].fired.empty());
      EXPECT_EQ(ev[0].scheduled, std::vector<std::size_t>{0});
      EXPECT_TRUE(ev[1].delayed);
      EXPECT_EQ(ev[1].origin, std::vector<int>{0});
      EXPECT_EQ(ev[1].root, -1) << "the execution is at a scheduled time, not a root";
    }
  }
}

TEST(DelayedEvents, GradientsEqualTheClosedFormForEveryStepper) {
  for (const Variant& v : kVariants) {
    const ode::Problem<DelayedDose> problem = problem_of(v);
    double j_closed = 0.0;
    const std::vector<double> g_closed = closed_gradient(problem, v, j_closed);
    const double scale = largest(g_closed);
    for (const Setting& s : settings()) {
      SCOPED_TRACE(std::string(v.name) + " with " + s.name);
      const ode::GradientResult fw =
          ode::gradient(problem, FinalState{}, ode::Forward{}, s.options);
      const ode::GradientResult ad =
          ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{}, s.options);
      EXPECT_EQ(fw.steps, ad.steps) << "the same plan";
      EXPECT_NEAR(fw.objective, ad.objective, kTransposeTol * j_closed);
      double worst_transpose = 0.0, worst_closed = 0.0;
      for (std::size_t i = 0; i < g_closed.size(); ++i) {
        EXPECT_NEAR(entry(fw, i), entry(ad, i), kTransposeTol * scale) << "entry " << i;
        EXPECT_NEAR(entry(ad, i), g_closed[i], s.closed_tol * scale)
            << "entry " << i << " vs closed form";
        worst_transpose = std::max(worst_transpose, std::abs(entry(fw, i) - entry(ad, i)) / scale);
        worst_closed = std::max(worst_closed, std::abs(entry(ad, i) - g_closed[i]) / scale);
      }
      std::printf("%-38s %-15s |fw - adj| %.1e  |adj - closed| %.1e (of the largest entry)\n",
                  v.name, s.name, worst_transpose, worst_closed);
    }
  }
}

TEST(DelayedEvents, GradientsEqualCentralDifferences) {
  const ode::IntegratorOptions tight = adaptive_options(ode::Method::Dopri5, 1e-12);
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    const ode::Problem<DelayedDose> problem = problem_of(v);
    const ode::GradientResult ad =
        ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{}, tight);
    const ode::GradientResult ca =
        ode::gradient(problem, FinalState{}, ode::ContinuousAdjoint{}, tight);
    std::vector<double> g(1 + problem.p.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = entry(ad, i);
    const double scale = largest(g);
    double worst = 0.0, worst_ca = 0.0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      ode::Problem<DelayedDose> q = problem;
      double& u = i == 0 ? q.y0[0] : q.p[i - 1];
      const double u0 = u, h = kDifferenceStep * std::max(1.0, std::abs(u0));
      auto at = [&](double delta) {
        u = u0 + delta;
        return ode::gradient(q, FinalState{}, ode::Forward{}, tight).objective;
      };
      const double fd = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(g[i], fd, kDifferenceTol * scale) << "entry " << i << " vs central differences";
      EXPECT_NEAR(entry(ca, i), fd, kDifferenceTol * scale)
          << "entry " << i << ": continuous adjoint vs central differences";
      worst = std::max(worst, std::abs(g[i] - fd) / scale);
      worst_ca = std::max(worst_ca, std::abs(entry(ca, i) - fd) / scale);
    }
    std::printf("%-38s |adj - central differences| %.1e, |cont - central differences| %.1e "
                "(of the largest entry)\n", v.name, worst, worst_ca);
  }
}

TEST(DelayedEvents, EveryScheduleGivesTheSameBits) {
  // The reverse sweep reaches the execution before the trigger: the values
  // and the adjoint's links are carried by instant index, whatever the
  // schedule recomputes.
  for (const Variant& v : kVariants) {
    const ode::Problem<DelayedDose> problem = problem_of(v);
    for (ode::Method m : {ode::Method::Dopri5, ode::Method::Bdf, ode::Method::Sdirk3}) {
      SCOPED_TRACE(std::string(v.name) + " with " + ode::to_string(m));
      const ode::IntegratorOptions o = adaptive_options(m, 1e-8);
      const ode::GradientResult ref =
          ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{ode::StoreAll{}}, o);
      const std::string disk = ::testing::TempDir() + "delayed_events_multilevel.h5";
      for (const ode::Checkpointing& c :
           {ode::Checkpointing{ode::Uniform{4}}, ode::Checkpointing{ode::Binomial{3}},
            ode::Checkpointing{ode::Online{3}},
            ode::Checkpointing{ode::Multilevel{.ram = 2, .disk = 2, .path = disk}}}) {
        const ode::GradientResult r =
            ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{c}, o);
        EXPECT_EQ(r.objective, ref.objective);
        EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters);
        EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state);
      }
      // A replay of the returned plan gives the same bits.
      const ode::GradientResult again = ode::gradient(
          problem, FinalState{}, ode::DiscreteAdjoint{ode::StoreAll{}}, o, ref.steps);
      EXPECT_EQ(again.wrt_parameters, ref.wrt_parameters);
      EXPECT_EQ(again.wrt_initial_state, ref.wrt_initial_state);
    }
  }
}

/// Thrown by the hook to interrupt a sweep (as `costate sensitivity`'s
/// signal check does).
struct Stop {};

/// The gradient interrupted at the `stops[j]`-th hook call of its j-th
/// run (0: never) and resumed from each place in a fresh call, as
/// `costate sensitivity --resume` does; `places` gets each place (step −1:
/// stopped before the reverse sweep, run again from the start).
template <class O>
ode::GradientResult resumed_gradient(const ode::Problem<DelayedDose>& problem, const O& objective,
                                     ode::IntegratorOptions o, const ode::Checkpointing& c,
                                     const std::vector<std::int64_t>& stops,
                                     std::vector<ode::AdjointResume>& places) {
  std::shared_ptr<const ode::AdjointResume> from;
  for (const std::int64_t at : stops) {
    std::int64_t calls = 0;
    o.on_step = [at, &calls](double) {
      if (++calls == at) throw Stop{};
    };
    ode::DiscreteAdjoint m{c};
    m.resume_from = from;
    m.interrupted_at = std::make_shared<ode::AdjointResume>();
    try {
      return ode::gradient(problem, objective, m, o);
    } catch (const Stop&) {
    }
    places.push_back(*m.interrupted_at);
    if (m.interrupted_at->step >= 0) from = m.interrupted_at;
  }
  o.on_step = {};
  ode::DiscreteAdjoint m{c};
  m.resume_from = from;
  return ode::gradient(problem, objective, m, o);
}

TEST(DelayedEvents, AnAdjointResumedBetweenATriggerAndItsExecutionHasTheSameBits) {
  // `sensitivity --resume` (issue 18) across delayed events: a reverse
  // sweep stopped after the execution's instant and before its trigger's
  // holds τ̄_e and v̄ for the trigger (AdjointResume::pending_events);
  // resumed from there — and from every other place, once or twice, under
  // every schedule — the objective and gradient are the uninterrupted
  // run's bits (EXPECT_EQ on doubles).
  const std::vector<ode::IntegratorOptions> steppers = {
      fixed_options(ode::Method::RK4, 2e-3), adaptive_options(ode::Method::Dopri5, 1e-12),
      adaptive_options(ode::Method::Bdf, 1e-9)};
  const std::string disk = ::testing::TempDir() + "delayed_events_resume.h5";
  const std::vector<ode::Checkpointing> schedules = {
      ode::StoreAll{}, ode::Binomial{3}, ode::Multilevel{.ram = 2, .disk = 2, .path = disk}};
  int resumed = 0, between = 0, restarted = 0;
  for (const Variant& v : kVariants) {
    const ode::Problem<DelayedDose> problem = problem_of(v);
    for (const ode::IntegratorOptions& base : steppers) {
      for (const ode::Checkpointing& c : schedules) {
        SCOPED_TRACE(std::string(v.name) + " with " + ode::to_string(base.method) + ", " +
                     ode::to_string(c));
        ode::IntegratorOptions o = base;
        std::int64_t calls = 0;
        o.on_step = [&calls](double) { ++calls; };
        const ode::GradientResult ref =
            ode::gradient(problem, Mixed{0.5, 2.0}, ode::DiscreteAdjoint{c}, o);
        o.on_step = {};
        ASSERT_GT(calls, 12) << "too few hook calls to interrupt";
        // Every call once (a stride of 1 up to 40 calls), and pairs.
        const std::int64_t stride = std::max<std::int64_t>(1, calls / 40);
        for (std::int64_t at = 1; at <= calls; at += stride) {
          for (const std::vector<std::int64_t>& stops :
               {std::vector<std::int64_t>{at}, std::vector<std::int64_t>{at, std::max<std::int64_t>(1, at / 3)}}) {
            std::vector<ode::AdjointResume> places;
            const ode::GradientResult r =
                resumed_gradient(problem, Mixed{0.5, 2.0}, o, c, stops, places);
            EXPECT_EQ(r.objective, ref.objective) << "stop at call " << at;
            EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters) << "stop at call " << at;
            EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state) << "stop at call " << at;
            for (const ode::AdjointResume& place : places) {
              (place.step >= 0 ? resumed : restarted) += 1;
              if (place.pending_events.empty()) continue;
              ++between;
              // Pending: the trigger instant (index 0) waits for the
              // execution's τ̄_e, v̄ (1 + one target with values from the
              // trigger time, else τ̄_e alone is used; the slot has both).
              ASSERT_EQ(place.pending_events.size(), 1u);
              EXPECT_EQ(place.pending_events[0].instant, 0u);
              EXPECT_EQ(place.pending_events[0].event, 0u);
              EXPECT_EQ(place.pending_events[0].adjoint.size(), 2u);
              const auto& ev = place.steps.events();
              ASSERT_GE(ev.size(), 2u);
              EXPECT_GE(place.step, static_cast<std::int64_t>(ev[0].at));
              EXPECT_LT(place.step, static_cast<std::int64_t>(ev[1].at));
            }
          }
        }
      }
    }
  }
  std::printf("[ resume ] %d resumed places (%d between a trigger and its execution), %d "
              "restarts; every gradient bitwise equal to the uninterrupted one\n",
              resumed, between, restarted);
  EXPECT_GT(between, 100) << "few stops landed between a trigger and its execution";
}

TEST(DelayedEvents, APendingAdjointForAnotherPlanIsRefused) {
  // A place whose pending adjoint names an instant that schedules nothing
  // (another run's) is refused, naming the instant.
  const ode::Problem<DelayedDose> problem = problem_of(kVariants[0]);
  const ode::IntegratorOptions o = fixed_options(ode::Method::RK4, 2e-3);
  ode::IntegratorOptions counted = o;
  std::int64_t total = 0, calls = 0;
  counted.on_step = [&total](double) { ++total; };
  (void)ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{ode::StoreAll{}}, counted);
  // 24 calls (of 16 steps) before the end: the reverse sweep near t = 0.77.
  counted.on_step = [&calls, stop = total - 24](double) {
    if (++calls == stop) throw Stop{};
  };
  ode::DiscreteAdjoint m{ode::StoreAll{}};
  m.interrupted_at = std::make_shared<ode::AdjointResume>();
  EXPECT_THROW((void)ode::gradient(problem, FinalState{}, m, counted), Stop);
  ASSERT_GE(m.interrupted_at->step, 0);
  ASSERT_FALSE(m.interrupted_at->pending_events.empty()) << "a place between τ and τ_e";
  auto bad = std::make_shared<ode::AdjointResume>(*m.interrupted_at);
  bad->pending_events = {{.instant = 1, .event = 0, .adjoint = {1.0, 0.0}}};
  ode::DiscreteAdjoint again{ode::StoreAll{}};
  again.resume_from = bad;
  try {
    (void)ode::gradient(problem, FinalState{}, again, o);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("events[1]"), std::string::npos) << e.what();
  }
}

TEST(DelayedEvents, AdjointBlockCarriesEachSeedsLinks) {
  // Two objectives in one reverse sweep: each seed carries its own τ̄_e and
  // v̄ back to the trigger; each equals its own forward gradient.
  const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-10);
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    const ode::Problem<DelayedDose> problem = problem_of(v);
    const std::vector<Mixed> objectives{{1.0, 0.0}, {0.5, 2.0}};
    const std::vector<ode::GradientResult> block = ode::gradients(
        problem, std::span<const Mixed>(objectives), ode::DiscreteAdjoint{ode::Binomial{3}}, o);
    ASSERT_EQ(block.size(), 2u);
    for (std::size_t b = 0; b < 2; ++b) {
      const ode::GradientResult fw =
          ode::gradient(problem, objectives[b], ode::Forward{}, o, block[b].steps);
      std::vector<double> g(1 + problem.p.size());
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = entry(fw, i);
      for (std::size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(entry(block[b], i), g[i], kTransposeTol * largest(g))
            << "objective " << b << ", entry " << i;
    }
  }
}

TEST(DelayedEvents, AnEquationModelsDelayExpressionIsDifferentiated) {
  // The state-trigger variant typed as equations (an input file's or SBML's
  // events): its delay expression on Dual numbers gives the same gradient
  // as the C++ model's, both exact derivatives of the same steps (the
  // kernels' arithmetic may differ from the C++ model's in the last bits).
  constexpr double kSameModelTol = 1e-10;
  const Variant v = kVariants[2];
  const ode::Problem<DelayedDose> ref = problem_of(v);
  ode::EquationModel m({"x"}, {"k", "theta", "d0", "e", "a", "c"}, {"-k*x"});
  const std::vector<std::string>& vars = m.variables();
  std::vector<ode::EquationModel::Event> events(1);
  events[0].attributes.name = "delayed dose";
  events[0].trigger = ode::Condition::parse("x <= theta", vars);
  events[0].targets = {0};
  events[0].values = {expr::Program::compile("a*x + c", vars)};
  events[0].delay = expr::Program::compile("d0 + e*x", vars);
  m.set_events(std::move(events));
  const ode::Problem<ode::EquationModel> problem{m, ref.y0, ref.p, {0.0, ref.t1()}};
  double j_closed = 0.0;
  const std::vector<double> g_closed = closed_gradient(ref, v, j_closed);
  const double scale = largest(g_closed);
  const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-12);
  const ode::GradientResult ad = ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{}, o);
  const ode::GradientResult fw = ode::gradient(problem, FinalState{}, ode::Forward{}, o);
  const ode::GradientResult cpp = ode::gradient(ref, FinalState{}, ode::DiscreteAdjoint{}, o);
  for (std::size_t i = 0; i < g_closed.size(); ++i) {
    EXPECT_NEAR(entry(ad, i), entry(fw, i), kTransposeTol * scale) << "entry " << i;
    EXPECT_NEAR(entry(ad, i), entry(cpp, i), kSameModelTol * scale) << "entry " << i;
    // dopri5 at rtol 1e-12 (as the settings' closed_tol).
    EXPECT_NEAR(entry(ad, i), g_closed[i], 1e-8 * scale) << "entry " << i << " vs closed form";
  }
}

/// A chain: x' = −k x, y' = 0. At t = τ "mark" sets y ← 1, which (a
/// cascade, from the state after it) triggers "dose": after d0 + e x it
/// sets x ← a x + c, y ← 2 with values from the trigger time; that
/// execution triggers "halve", which after d2 x executes x ← x/2 with
/// values from its execution. p = (k, τ, d0, e, a, c, d2).
struct Chain {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[0];
    d[1] = T(0.0);
  }
  std::size_t n_roots() const { return 3; }
  template <class T>
  void roots(T t, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    g[0] = t - p[1];
    g[1] = y[1] - 0.5;
    g[2] = y[1] - 1.5;
  }
  std::size_t n_events() const { return 3; }
  ode::EventAttributes event_attributes(std::size_t k) const {
    static const char* names[3] = {"mark", "dose", "halve"};
    return {.name = names[k], .use_values_from_trigger_time = k != 2, .has_delay = k != 0};
  }
  bool event_trigger(std::size_t k, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[k] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t k) const {
    return k == 0 ? std::span<const std::size_t>(kY) : k == 1 ? std::span<const std::size_t>(kXY)
                                                              : std::span<const std::size_t>(kX);
  }
  template <class T>
  void event_assign(std::size_t k, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    if (k == 0) {
      v[0] = T(1.0);
    } else if (k == 1) {
      v[0] = p[4] * y[0] + p[5];
      v[1] = T(2.0);
    } else {
      v[0] = 0.5 * y[0];
    }
  }
  template <class T>
  T event_delay(std::size_t k, T, std::span<const T> y, std::span<const T> p) const {
    return k == 1 ? p[2] + p[3] * y[0] : p[6] * y[0];
  }
  double event_priority(std::size_t, double, std::span<const double>,
                        std::span<const double>) const {
    return 0.0;
  }
  static constexpr std::size_t kX[1] = {0}, kY[1] = {1}, kXY[2] = {0, 1};
};

/// x(t1) after the chain; u = (x0, y0, k, τ, d0, e, a, c, d2).
template <class T>
T chain_closed(const T* u, double t1) {
  const T &x0 = u[0], &k = u[2], &tau = u[3], &d0 = u[4], &e = u[5], &a = u[6], &c = u[7],
          &d2 = u[8];
  const T x_tau = x0 * exp(-k * tau);
  const T t_dose = tau + d0 + e * x_tau;
  const T x_dose = a * x_tau + c;
  const T delay = d2 * x_dose;
  const T x_halve = 0.5 * x_dose * exp(-k * delay);
  return x_halve * exp(-k * (t1 - (t_dose + delay)));
}

TEST(DelayedEvents, AChainOfDelayedEventsFromACascade) {
  // "dose" is scheduled from the state after "mark" (source 1), "halve" at
  // the delayed execution of "dose" (whose time moves: the chain's dτ).
  // τ = 0.4: dose at 1.281, halve at 2.144, t1 = 2.5.
  const ode::Problem<Chain> problem{Chain{}, {2.0, 0.0}, {0.8, 0.4, 0.3, 0.4, 0.5, 1.0, 0.5},
                                    {0.0, 2.5}};
  using D12 = ad::Dual<double, 12>;
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  std::vector<D12> ud(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) ud[i] = D12::seed(u[i], static_cast<int>(i));
  const D12 j = chain_closed(ud.data(), problem.t1());
  std::vector<double> g_closed(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) g_closed[i] = j.tangent(static_cast<int>(i));
  const double scale = largest(g_closed);
  auto at = [](const ode::GradientResult& r, std::size_t i) {
    return i < 2 ? r.wrt_initial_state[i] : r.wrt_parameters[i - 2];
  };
  for (const Setting& s : settings()) {
    SCOPED_TRACE(s.name);
    const ode::GradientResult fw =
        ode::gradient(problem, FinalState{}, ode::Forward{}, s.options);
    const ode::GradientResult ad =
        ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{ode::Binomial{4}}, s.options);
    const auto& ev = ad.steps.events();
    ASSERT_EQ(ev.size(), 3u);
    EXPECT_EQ(ev[0].scheduled_source, std::vector<std::size_t>{1}) << "after mark";
    EXPECT_EQ(ev[1].scheduled, std::vector<std::size_t>{2}) << "halve, at dose's execution";
    EXPECT_NEAR(ad.objective, j.value(), s.closed_tol * j.value());
    for (std::size_t i = 0; i < u.size(); ++i) {
      EXPECT_NEAR(at(fw, i), at(ad, i), kTransposeTol * scale) << "entry " << i;
      EXPECT_NEAR(at(ad, i), g_closed[i], s.closed_tol * scale) << "entry " << i << " vs closed form";
    }
  }
}

/// The worst |a − b| over the entries (x0, p…), relative to `scale`.
double worst_of(const ode::GradientResult& r, const std::vector<double>& g, double scale) {
  double worst = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(entry(r, i) - g[i]) / scale);
  return worst;
}

TEST(DelayedEvents, ContinuousAdjointCrossesDelayedEvents) {
  // The backward legs between the instants, the transposed jump at each,
  // the execution's τ̄_e and v̄ carried back to the trigger's instant (by
  // index, as the discrete adjoint). The continuous adjoint converges with
  // its tolerances: its global error ~1e2 × rtol (dopri5 at 1e-12, the
  // implicit steppers at 1e-10) against the closed form's exact derivatives
  // and the discrete adjoint of the same run.
  struct Case {
    ode::Method method;
    double rtol, tol;
  };
  for (const Case& c : {Case{ode::Method::Dopri5, 1e-12, 1e-8}, Case{ode::Method::Sdirk3, 1e-10, 1e-6},
                        Case{ode::Method::Bdf, 1e-10, 1e-6}}) {
    for (const Variant& v : kVariants) {
      SCOPED_TRACE(std::string(v.name) + " with " + ode::to_string(c.method));
      const ode::Problem<DelayedDose> problem = problem_of(v);
      double j_closed = 0.0;
      const std::vector<double> g_closed = closed_gradient(problem, v, j_closed);
      const double scale = largest(g_closed);
      const ode::IntegratorOptions o = adaptive_options(c.method, c.rtol);
      const ode::GradientResult ca = ode::gradient(problem, FinalState{}, ode::ContinuousAdjoint{}, o);
      const ode::GradientResult da = ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{}, o);
      EXPECT_EQ(ca.summary.events, 1);
      EXPECT_NEAR(ca.objective, j_closed, c.tol * j_closed);
      std::vector<double> g_da(g_closed.size());
      for (std::size_t i = 0; i < g_closed.size(); ++i) {
        g_da[i] = entry(da, i);
        EXPECT_NEAR(entry(ca, i), g_closed[i], c.tol * scale) << "entry " << i << " vs closed form";
        EXPECT_NEAR(entry(ca, i), g_da[i], c.tol * scale) << "entry " << i << " vs discrete adjoint";
      }
      std::printf("%-38s %-7s |cont - closed| %.1e  |cont - disc| %.1e\n", v.name,
                  ode::to_string(c.method).c_str(), worst_of(ca, g_closed, scale),
                  worst_of(ca, g_da, scale));
    }
  }
}

TEST(DelayedEvents, CvodesSensitivitiesCrossDelayedEvents) {
  // CVODES' forward sensitivities (its root finding, the same jump and
  // links) and its adjoint by stretches between the instants (the same
  // transposed jump and links), each against the closed form and against
  // each other: CVODES' global error at rtol 1e-10, ~1e2–1e4 × rtol.
  constexpr double kCvodesTol = 1e-6;
  for (const Variant& v : kVariants) {
    const ode::Problem<DelayedDose> problem = problem_of(v);
    double j_closed = 0.0;
    const std::vector<double> g_closed = closed_gradient(problem, v, j_closed);
    const double scale = largest(g_closed);
    for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
      SCOPED_TRACE(std::string(v.name) + " with " + ode::to_string(m));
      const ode::IntegratorOptions o = adaptive_options(m, 1e-10);
      const ode::GradientResult r = ode::gradient(problem, FinalState{}, ode::CvodesAdjoint{}, o);
      const ode::GradientResult f = ode::gradient(problem, FinalState{}, ode::CvodesForward{}, o);
      EXPECT_EQ(r.summary.events, 1);
      EXPECT_EQ(f.summary.events, 1);
      EXPECT_NEAR(r.objective, j_closed, kCvodesTol * j_closed);
      EXPECT_NEAR(f.objective, j_closed, kCvodesTol * j_closed);
      std::vector<double> g_f(g_closed.size());
      for (std::size_t i = 0; i < g_closed.size(); ++i) {
        g_f[i] = entry(f, i);
        EXPECT_NEAR(g_f[i], g_closed[i], kCvodesTol * scale) << "entry " << i << " cvodes_forward";
        EXPECT_NEAR(entry(r, i), g_closed[i], kCvodesTol * scale) << "entry " << i;
        EXPECT_NEAR(entry(r, i), g_f[i], kCvodesTol * scale) << "entry " << i << " vs cvodes_forward";
      }
      std::printf("%-38s %-12s |cvodes_forward - closed| %.1e  |cvodes_adjoint - closed| %.1e  "
                  "|- cvodes_forward| %.1e\n",
                  v.name, ode::to_string(m).c_str(), worst_of(f, g_closed, scale),
                  worst_of(r, g_closed, scale), worst_of(r, g_f, scale));
    }
  }
}

TEST(DelayedEvents, AdjointsCarryAChainOfDelayedEvents) {
  // The chain (a delayed execution scheduling the next, from a cascade's
  // state) by the continuous adjoint and cvodes_adjoint: each against the
  // discrete adjoint at tight tolerances (1e2 × rtol, as above).
  const ode::Problem<Chain> problem{Chain{}, {2.0, 0.0}, {0.8, 0.4, 0.3, 0.4, 0.5, 1.0, 0.5},
                                    {0.0, 2.5}};
  const ode::GradientResult ref = ode::gradient(problem, FinalState{}, ode::DiscreteAdjoint{},
                                                adaptive_options(ode::Method::Dopri5, 1e-12));
  std::vector<double> g(ref.wrt_initial_state);
  g.insert(g.end(), ref.wrt_parameters.begin(), ref.wrt_parameters.end());
  const double scale = largest(g);
  struct Case {
    const char* name;
    ode::GradientResult r;
    double tol;
  };
  const Case cases[] = {
      {"continuous_adjoint dopri5",
       ode::gradient(problem, FinalState{}, ode::ContinuousAdjoint{},
                     adaptive_options(ode::Method::Dopri5, 1e-12)),
       1e-8},
      {"continuous_adjoint bdf",
       ode::gradient(problem, FinalState{}, ode::ContinuousAdjoint{},
                     adaptive_options(ode::Method::Bdf, 1e-10)),
       1e-6},
      {"cvodes_adjoint", ode::gradient(problem, FinalState{}, ode::CvodesAdjoint{},
                                       adaptive_options(ode::Method::CvodesBdf, 1e-10)),
       1e-6}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.r.summary.events, 3);
    double worst = 0.0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double got = i < 2 ? c.r.wrt_initial_state[i] : c.r.wrt_parameters[i - 2];
      EXPECT_NEAR(got, g[i], c.tol * scale) << "entry " << i;
      worst = std::max(worst, std::abs(got - g[i]) / scale);
    }
    std::printf("chain %-26s |- discrete adjoint| %.1e\n", c.name, worst);
  }
}

/// Two delayed executions at one instant: x' = −k x, y' = 0; at t = τ both
/// "dose" (priority 2; x ← a x + c, values from the trigger time) and
/// "record" (priority 1; y ← y + x, values from the execution: the x that
/// "dose" left) are scheduled with the same delay d0 + e x(τ), so both
/// execute at τ_e = τ + d0 + e x(τ), "dose" first. `skew` adds k − 0.8 to
/// "record"'s delay: equal values at k = 0.8, different derivatives.
/// p = (k, τ, d0, e, a, c).
struct Twin {
  bool skew = false;
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[0];
    d[1] = T(0.0);
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T t, std::span<const T>, std::span<const T> p, std::span<T> g) const {
    g[0] = t - p[1];
  }
  std::size_t n_events() const { return 2; }
  ode::EventAttributes event_attributes(std::size_t k) const {
    return {.name = k == 0 ? "dose" : "record",
            .use_values_from_trigger_time = k == 0,
            .has_delay = true,
            .has_priority = true};
  }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t k) const {
    return k == 0 ? std::span<const std::size_t>(kX) : std::span<const std::size_t>(kY);
  }
  template <class T>
  void event_assign(std::size_t k, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = k == 0 ? p[4] * y[0] + p[5] : y[1] + y[0];
  }
  template <class T>
  T event_delay(std::size_t k, T, std::span<const T> y, std::span<const T> p) const {
    const T d = p[2] + p[3] * y[0];
    return skew && k == 1 ? d + (p[0] - 0.8) : d;
  }
  double event_priority(std::size_t k, double, std::span<const double>,
                        std::span<const double>) const {
    return k == 0 ? 2.0 : 1.0;
  }
  static constexpr std::size_t kX[1] = {0}, kY[1] = {1};
};

/// J = x(t1) + y(t1); u = (x0, y0, k, τ, d0, e, a, c).
template <class T>
T twin_closed(const T* u, double t1) {
  const T &x0 = u[0], &y0 = u[1], &k = u[2], &tau = u[3], &d0 = u[4], &e = u[5], &a = u[6],
          &c = u[7];
  const T x_tau = x0 * exp(-k * tau);
  const T t_e = tau + d0 + e * x_tau;
  const T x_dose = a * x_tau + c;
  return x_dose * exp(-k * (t1 - t_e)) + (y0 + x_dose);
}

struct SumOfStates {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0] + y[1];
  }
};

TEST(DelayedEvents, TwoDelayedExecutionsAtOneInstant) {
  // τ = 0.6: both execute at 1.395 (t1 = 2). The instant's time is the
  // one both delays give; "record" reads the x "dose" left. Every method
  // against the closed form's exact derivatives (tolerances as above: the
  // settings' closed_tol, 1e2 × rtol for the continuous methods);
  // summary.events counts the instants where events executed: 1 (the
  // scheduling instant at τ executes nothing; two executions at one
  // instant count once).
  const ode::Problem<Twin> problem{Twin{}, {2.0, 0.5}, {0.8, 0.6, 0.3, 0.4, 0.5, 1.0}, {0.0, 2.0}};
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  std::vector<D8> ud(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) ud[i] = D8::seed(u[i], static_cast<int>(i));
  const D8 j = twin_closed(ud.data(), problem.t1());
  std::vector<double> g_closed(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) g_closed[i] = j.tangent(static_cast<int>(i));
  const double scale = largest(g_closed);
  auto at = [](const ode::GradientResult& r, std::size_t i) {
    return i < 2 ? r.wrt_initial_state[i] : r.wrt_parameters[i - 2];
  };
  auto check = [&](const ode::GradientResult& r, double tol, const std::string& name) {
    SCOPED_TRACE(name);
    EXPECT_EQ(r.summary.events, 1);
    EXPECT_NEAR(r.objective, j.value(), tol * j.value());
    double worst = 0.0;
    for (std::size_t i = 0; i < u.size(); ++i) {
      EXPECT_NEAR(at(r, i), g_closed[i], tol * scale) << "entry " << i;
      worst = std::max(worst, std::abs(at(r, i) - g_closed[i]) / scale);
    }
    std::printf("two at one instant: %-28s |- closed| %.1e\n", name.c_str(), worst);
  };
  for (const Setting& s : settings()) {
    const ode::GradientResult ad = ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, s.options);
    const auto& ev = ad.steps.events();
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].scheduled, (std::vector<std::size_t>{0, 1}));
    EXPECT_EQ(ev[1].fired, (std::vector<std::size_t>{0, 1})) << "dose first (priority)";
    EXPECT_EQ(ev[1].origin, (std::vector<int>{0, 0}));
    check(ad, s.closed_tol, std::string("discrete_adjoint ") + s.name);
    check(ode::gradient(problem, SumOfStates{}, ode::Forward{}, s.options), s.closed_tol,
          std::string("forward ") + s.name);
  }
  check(ode::gradient(problem, SumOfStates{}, ode::ContinuousAdjoint{},
                      adaptive_options(ode::Method::Dopri5, 1e-12)),
        1e-8, "continuous_adjoint dopri5");
  for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    check(ode::gradient(problem, SumOfStates{}, ode::CvodesForward{}, adaptive_options(m, 1e-10)),
          1e-6, "cvodes_forward " + ode::to_string(m));
    check(ode::gradient(problem, SumOfStates{}, ode::CvodesAdjoint{}, adaptive_options(m, 1e-10)),
          1e-6, "cvodes_adjoint " + ode::to_string(m));
  }
}

TEST(DelayedEvents, EqualDelaysThatMoveDifferentlyAreRefusedByName) {
  // "record"'s delay equals "dose"'s at k = 0.8 but moves with k: the
  // shared instant's time has two derivatives there. The run is fine; every
  // derivative names both events.
  Twin m;
  m.skew = true;
  const ode::Problem<Twin> problem{m, {2.0, 0.5}, {0.8, 0.6, 0.3, 0.4, 0.5, 1.0}, {0.0, 2.0}};
  const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-8);
  ode::Problem<Twin> q = problem;
  q.output_times = {2.0};
  EXPECT_TRUE(ode::integrate(q, o).summary.success());
  for (int method = 0; method < 3; ++method) {
    try {
      if (method == 0) (void)ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, o);
      if (method == 1) (void)ode::gradient(problem, SumOfStates{}, ode::Forward{}, o);
      if (method == 2) (void)ode::gradient(problem, SumOfStates{}, ode::ContinuousAdjoint{}, o);
      ADD_FAILURE() << "method " << method << ": expected a refusal";
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const char* w : {"'dose'", "'record'", "equal delays", "no single derivative"})
        EXPECT_NE(what.find(w), std::string::npos) << what;
    }
  }
}

/// Different delays falling at one instant: x' = −k x, y' = −k y; "dose"
/// triggers at τ1 and executes after d1 (x ← a x + c, values from the
/// trigger time, priority 2), "mix" triggers at τ2 and executes after d2
/// (priority 1): y ← y + x with the x "dose" left (values from the
/// execution: the two do not commute), or y ← 2y + 1 (`commute`: they
/// commute). τ1 + d1 = τ2 + d2 = 1.5 exactly (0.5 + 1.0, 1.0 + 0.5).
/// `mix_first`: "mix" has no delay and priority 3, triggered at τ2 = 1.5 —
/// a root crossing where the delayed "dose" executes, "mix" first.
/// p = (k, τ1, τ2, d1, d2, a, c).
struct Converge {
  bool commute = false, mix_first = false, mix_last = false;
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[0];
    d[1] = -p[0] * y[1];
  }
  std::size_t n_roots() const { return 2; }
  template <class T>
  void roots(T t, std::span<const T>, std::span<const T> p, std::span<T> g) const {
    g[0] = t - p[1];
    g[1] = t - p[2];
  }
  std::size_t n_events() const { return 2; }
  ode::EventAttributes event_attributes(std::size_t k) const {
    return {.name = k == 0 ? "dose" : "mix",
            .use_values_from_trigger_time = k == 0,
            .has_delay = k == 0 || !mix_first,
            .has_priority = true};
  }
  bool event_trigger(std::size_t k, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[k] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t k) const {
    return k == 0 ? std::span<const std::size_t>(kX) : std::span<const std::size_t>(kY);
  }
  template <class T>
  void event_assign(std::size_t k, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    if (k == 0)
      v[0] = p[5] * y[0] + p[6];
    else
      v[0] = commute ? 2.0 * y[1] + 1.0 : y[1] + y[0];
  }
  template <class T>
  T event_delay(std::size_t k, T, std::span<const T>, std::span<const T> p) const {
    return k == 0 ? p[3] : p[4];
  }
  double event_priority(std::size_t k, double, std::span<const double>,
                        std::span<const double>) const {
    return k == 0 ? 2.0 : (mix_first && !mix_last ? 3.0 : 1.0);
  }
  static constexpr std::size_t kX[1] = {0}, kY[1] = {1};
};

/// J = x(t1) + y(t1) on the branch where the executions keep their order
/// at the coincidence ("dose" first, or "mix" with mix_first);
/// u = (x0, y0, k, τ1, τ2, d1, d2, a, c).
template <class T>
T converge_closed(const T* u, double t1, bool commute, bool mix_first) {
  const T &x0 = u[0], &y0 = u[1], &k = u[2], &t_1 = u[3], &t_2 = u[4], &d1 = u[5], &d2 = u[6],
          &a = u[7], &c = u[8];
  const T tA = t_1 + d1, tB = mix_first ? t_2 : t_2 + d2;
  const T xA = a * (x0 * exp(-k * t_1)) + c;  // x after "dose"
  // x when "mix" executes (before "dose" with mix_first)
  const T xB = mix_first ? x0 * exp(-k * tB) : xA * exp(-k * (tB - tA));
  const T yB = commute ? 2.0 * (y0 * exp(-k * tB)) + 1.0 : y0 * exp(-k * tB) + xB;
  return xA * exp(-k * (t1 - tA)) + yB * exp(-k * (t1 - tB));
}

TEST(DelayedEvents, DifferentDelaysFallingAtOneInstantExecuteInPriorityOrder) {
  // "dose" (priority 2) then "mix" at t = 1.5, scheduled at 0.5 and 1.0:
  // each execution moves with its own time (events.cpp, set_times). Every
  // method against the closed form's exact derivatives — for the
  // non-commuting pair those of the branch that keeps the priority order
  // (J jumps where the order flips: the derivative there is one-sided) —
  // at the settings' closed_tol (their global error), 1e-8 for the
  // continuous adjoint at rtol 1e-12 and 1e-6 for CVODES at rtol 1e-10.
  for (const auto& [commute, mix_first] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
    Converge model;
    model.commute = commute;
    model.mix_first = mix_first;
    const ode::Problem<Converge> problem{
        model, {2.0, 0.5}, {0.8, 0.5, mix_first ? 1.5 : 1.0, 1.0, 0.5, 0.5, 1.0}, {0.0, 2.0}};
    std::vector<double> u(problem.y0.begin(), problem.y0.end());
    u.insert(u.end(), problem.p.begin(), problem.p.end());
    std::vector<D8> ud(u.size());
    std::vector<double> g_closed(u.size());
    double value = 0.0;
    for (std::size_t first = 0; first < u.size(); first += 8) {
      for (std::size_t i = 0; i < u.size(); ++i)
        ud[i] = i >= first && i < first + 8 ? D8::seed(u[i], static_cast<int>(i - first)) : D8(u[i]);
      const D8 j = converge_closed(ud.data(), problem.t1(), commute, mix_first);
      value = j.value();
      for (std::size_t i = first; i < std::min(u.size(), first + 8); ++i)
        g_closed[i] = j.tangent(static_cast<int>(i - first));
    }
    const double scale = largest(g_closed);
    auto at = [](const ode::GradientResult& r, std::size_t i) {
      return i < 2 ? r.wrt_initial_state[i] : r.wrt_parameters[i - 2];
    };
    auto check = [&](const ode::GradientResult& r, double tol, const std::string& name) {
      SCOPED_TRACE(name + (commute ? ", commuting" : ", not commuting") +
                   (mix_first ? ", mix first at a root crossing" : ""));
      EXPECT_NEAR(r.objective, value, tol * value);
      double worst = 0.0;
      for (std::size_t i = 0; i < u.size(); ++i) {
        EXPECT_NEAR(at(r, i), g_closed[i], tol * scale) << "entry " << i;
        worst = std::max(worst, std::abs(at(r, i) - g_closed[i]) / scale);
      }
      std::printf("delays at one instant (%s%s): %-28s |- closed| %.1e\n",
                  commute ? "commuting" : "not commuting", mix_first ? ", root" : "", name.c_str(),
                  worst);
    };
    for (const Setting& s : settings()) {
      const ode::GradientResult ad =
          ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, s.options);
      const auto& ev = ad.steps.events();
      if (mix_first) {
        ASSERT_EQ(ev.size(), 2u) << s.name;
        EXPECT_EQ(ev[1].fired, (std::vector<std::size_t>{1, 0})) << "mix first (priority)";
        EXPECT_EQ(ev[1].origin, (std::vector<int>{-1, 0}));
        EXPECT_EQ(ev[1].root, 1) << "at mix's root crossing";
      } else {
        ASSERT_EQ(ev.size(), 3u) << s.name;
        EXPECT_EQ(ev[2].fired, (std::vector<std::size_t>{0, 1})) << "dose first (priority)";
        EXPECT_EQ(ev[2].origin, (std::vector<int>{0, 1})) << "scheduled at two instants";
      }
      check(ad, s.closed_tol, std::string("discrete_adjoint ") + s.name);
      const ode::GradientResult fw = ode::gradient(problem, SumOfStates{}, ode::Forward{}, s.options);
      check(fw, s.closed_tol, std::string("forward ") + s.name);
      // Forward and adjoint: transposes of one map.
      for (std::size_t i = 0; i < u.size(); ++i)
        EXPECT_NEAR(at(ad, i), at(fw, i), kTransposeTol * scale) << s.name << ", entry " << i;
    }
    check(ode::gradient(problem, SumOfStates{}, ode::ContinuousAdjoint{},
                        adaptive_options(ode::Method::Dopri5, 1e-12)),
          1e-8, "continuous_adjoint dopri5");
    for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
      check(ode::gradient(problem, SumOfStates{}, ode::CvodesForward{}, adaptive_options(m, 1e-10)),
            1e-6, "cvodes_forward " + ode::to_string(m));
      check(ode::gradient(problem, SumOfStates{}, ode::CvodesAdjoint{}, adaptive_options(m, 1e-10)),
            1e-6, "cvodes_adjoint " + ode::to_string(m));
    }
    if (commute) {
      // Commuting: J is smooth through the coincidence, so two-sided
      // central differences (each run locating its own instants, dopri5
      // at rtol 1e-12; kDifferenceTol says why) agree too.
      const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-12);
      const ode::GradientResult ad = ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, o);
      auto J = [&](const std::vector<double>& v) {
        ode::Problem<Converge> q = problem;
        q.y0 = {v[0], v[1]};
        q.p.assign(v.begin() + 2, v.end());
        q.output_times = {q.t1()};
        const ode::Solution r = ode::integrate(q, o);
        return r.state(0)[0] + r.state(0)[1];
      };
      double worst = 0.0;
      for (std::size_t i = 0; i < u.size(); ++i) {
        const double h = kDifferenceStep * std::max(1.0, std::abs(u[i]));
        std::vector<double> up = u, dn = u;
        up[i] += h;
        dn[i] -= h;
        const double fd = (J(up) - J(dn)) / (2 * h);
        EXPECT_NEAR(at(ad, i), fd, kDifferenceTol * scale) << "entry " << i;
        worst = std::max(worst, std::abs(at(ad, i) - fd) / scale);
      }
      std::printf("delays at one instant (commuting%s): |adjoint - central differences| %.1e\n",
                  mix_first ? ", root" : "", worst);
    } else if (!mix_first) {
      // Not commuting: J jumps where "mix" would go first (d2 a little
      // smaller): the one-sided difference on the priority order's side
      // (d2 larger) matches, the other side does not.
      const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-12);
      const ode::GradientResult ad = ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, o);
      auto J = [&](double d2) {
        ode::Problem<Converge> q = problem;
        q.p[4] = d2;
        q.output_times = {q.t1()};
        const ode::Solution r = ode::integrate(q, o);
        return r.state(0)[0] + r.state(0)[1];
      };
      const double h = 1e-6;
      const double right = (J(0.5 + h) - J(0.5)) / h;
      EXPECT_NEAR(at(ad, 6), right, 1e-4 * scale) << "the one-sided difference (O(h) truncation)";
      EXPECT_GT(std::abs(J(0.5 - h) - J(0.5)), 1e-3) << "J jumps where the order flips";
    }
  }
}

TEST(DelayedEvents, AnOrderNoTimesGiveIsRefusedByName) {
  // "mix" at its root crossing (τ2 = 1.5) with priority 1 runs after the
  // delayed "dose" there, with values from its execution: had its root
  // crossed first it would have gone first, had "dose" gone first the
  // root's crossing would come after — the order has no branch.
  Converge model;
  model.mix_first = true;
  model.mix_last = true;
  const ode::Problem<Converge> problem{model, {2.0, 0.5}, {0.8, 0.5, 1.5, 1.0, 0.5, 0.5, 1.0}, {0.0, 2.0}};
  const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-8);
  ode::Problem<Converge> q = problem;
  q.output_times = {2.0};
  EXPECT_TRUE(ode::integrate(q, o).summary.success()) << "the run is fine";
  for (int method = 0; method < 2; ++method) {
    try {
      if (method == 0) (void)ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, o);
      if (method == 1) (void)ode::gradient(problem, SumOfStates{}, ode::Forward{}, o);
      ADD_FAILURE() << "method " << method << ": expected a refusal";
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const char* w : {"'dose'", "'mix'", "t = 1.5"})
        EXPECT_NE(what.find(w), std::string::npos) << what;
    }
  }
}

TEST(DelayedEvents, DifferentDelaysAtOneInstantRefuseHessianVectorByName) {
  Converge model;
  const ode::Problem<Converge> problem{model, {2.0, 0.5}, {0.8, 0.5, 1.0, 1.0, 0.5, 0.5, 1.0}, {0.0, 2.0}};
  const ode::HessianDirection v{.parameters = std::vector<double>(problem.p.size(), 1.0),
                                .initial_state = std::vector<double>(2, 0.0)};
  try {
    (void)ode::hessian_vector(problem, SumOfStates{}, v, ode::DiscreteAdjoint{},
                              adaptive_options(ode::Method::Dopri5, 1e-8));
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* w : {"'dose'", "'mix'", "Hessian"})
      EXPECT_NE(what.find(w), std::string::npos) << what;
  }
}

/// DelayedDose as a DAE: y = (x, z), x' = −k z, 0 = z − q x (z algebraic,
/// re-solved after each instant), so x' = −kq x; the delayed dose reads
/// and assigns x. p = (k, τ or θ, d0, e, a, c, q).
struct DelayedDoseDae : DelayedDose {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[1];
    d[1] = y[1] - p[6] * y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// J = x(t1) + z(t1) = (1 + q) x(t1): DelayedDose's closed form at rate kq.
/// u = (x0, k, τ or θ, d0, e, a, c, q).
template <class T>
T dae_closed(const T* u, double t1, bool state_trigger, bool trigger_values) {
  T v[7] = {u[0], u[1] * u[7], u[2], u[3], u[4], u[5], u[6]};
  return (1.0 + u[7]) * closed(v, t1, state_trigger, trigger_values);
}

TEST(DelayedEvents, DelayedEventsOnADaeReSolveAndAreDifferentiated) {
  // After the delayed execution z is re-solved from the constraint, as
  // after an undelayed one (dae.cpp); the four variants by forward and
  // discrete adjoint on every native DAE integrator against the closed
  // form's exact derivatives (the settings' closed_tol: their global error),
  // adjoint = forward to round-off, the same bits under every schedule.
  for (const Variant& v : kVariants) {
    DelayedDoseDae m;
    m.state_trigger = v.state_trigger;
    m.trigger_values = v.trigger_values;
    const ode::Problem<DelayedDoseDae> problem{
        m, {2.0, 0.0}, {0.8, v.state_trigger ? 1.2 : 0.6, 0.3, 0.4, 0.5, 1.0, 1.25}, {0.0, 2.0}};
    std::vector<double> u{problem.y0[0]};
    u.insert(u.end(), problem.p.begin(), problem.p.end());
    std::vector<D8> ud(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) ud[i] = D8::seed(u[i], static_cast<int>(i));
    const D8 j = dae_closed(ud.data(), problem.t1(), v.state_trigger, v.trigger_values);
    std::vector<double> g(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) g[i] = j.tangent(static_cast<int>(i));
    const double scale = largest(g);
    auto at = [](const ode::GradientResult& r, std::size_t i) {
      return i == 0 ? r.wrt_initial_state[0] : r.wrt_parameters[i - 1];
    };
    for (const Setting& s : settings()) {
      if (!ode::supports_dae(s.options.method, 1)) continue;
      SCOPED_TRACE(std::string(v.name) + " with " + s.name);
      const ode::GradientResult ad =
          ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{}, s.options);
      const ode::GradientResult fw =
          ode::gradient(problem, SumOfStates{}, ode::Forward{}, s.options, ad.steps);
      EXPECT_NEAR(ad.objective, j.value(), s.closed_tol * j.value());
      EXPECT_EQ(ad.wrt_initial_state[1], 0.0) << "z0 is a guess";
      double worst = 0.0;
      for (std::size_t i = 0; i < u.size(); ++i) {
        EXPECT_NEAR(at(ad, i), g[i], s.closed_tol * scale) << "entry " << i;
        EXPECT_NEAR(at(fw, i), at(ad, i), kTransposeTol * scale) << "entry " << i;
        worst = std::max(worst, std::abs(at(ad, i) - g[i]) / scale);
      }
      std::printf("DAE, %-38s %-15s |- closed| %.1e\n", v.name, s.name, worst);
      const ode::GradientResult b =
          ode::gradient(problem, SumOfStates{}, ode::DiscreteAdjoint{ode::Binomial{3}}, s.options);
      EXPECT_EQ(b.wrt_parameters, ad.wrt_parameters);
      EXPECT_EQ(b.wrt_initial_state, ad.wrt_initial_state);
    }
    // IDAS refuses delayed events by name (support.cpp says why: its
    // forward sensitivities missed this closed form by 1.8e-6 at rtol 1e-10
    // in the state-triggered, trigger-time-values variant).
    for (const ode::SensitivityMethod& sm :
         {ode::SensitivityMethod{ode::IdasForward{}}, ode::SensitivityMethod{ode::IdasAdjoint{}}}) {
      try {
        (void)ode::gradient(problem, SumOfStates{}, sm, adaptive_options(ode::Method::Idas, 1e-10));
        ADD_FAILURE() << ode::to_string(sm) << " crossed a delayed event";
      } catch (const costate::Error& e) {
        EXPECT_NE(std::string(e.what()).find("delayed"), std::string::npos) << e.what();
      }
    }
    // The run: z = q x right after the execution.
    ode::Problem<DelayedDoseDae> q = problem;
    q.output_times = {2.0};
    const ode::Solution r = ode::integrate(q, adaptive_options(ode::Method::Bdf, 1e-10));
    ASSERT_TRUE(r.summary.success()) << r.summary.message;
    EXPECT_NEAR(r.state(0)[1], 1.25 * r.state(0)[0], 1e-12 * r.state(0)[0]);
  }
}

TEST(DelayedEvents, ResidualJacobianThroughADelayedEvent) {
  // The calibration's residual Jacobian (forward tangents through the
  // links): Sᵀ r equals the discrete adjoint gradient of ½ Σ w r².
  const ode::Problem<DelayedDose> problem = problem_of(kVariants[2]);
  ode::WeightedObservations obs;
  obs.times = {0.5, 1.0, 1.5, 2.0};
  obs.data = {1.4, 1.1, 1.3, 0.9};
  obs.weights.assign(4, 1.0);
  obs.n_states = 1;
  const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-10);
  const ode::GradientResult g = ode::gradient(problem, obs, ode::DiscreteAdjoint{}, o);
  const ode::ResidualSensitivities S = ode::sensitivity_matrix(problem, obs, o, g.steps);
  // Both are exact derivatives of one discrete map: round-off apart.
  constexpr double kTol = 1e-10;
  for (std::size_t c = 0; c < S.n_columns; ++c) {
    double str = 0.0;
    for (std::size_t r = 0; r < S.residuals.size(); ++r) str += S.at(r, c) * S.residuals[r];
    const double ref = c < problem.p.size() ? g.wrt_parameters[c] : g.wrt_initial_state[0];
    EXPECT_NEAR(str, ref, kTol * (1.0 + std::abs(ref))) << "column " << c;
  }
}

// ---------------------------------------------- H·v through delayed events

using DD8 = ad::Dual<ad::Dual<double, 8>, 8>;

/// The closed form's exact Hessian in u (m × m, m ≤ 8): `f(u, t1)` on DD8.
template <class F>
std::vector<double> closed_hessian(F f, const std::vector<double>& u, double t1) {
  const std::size_t m = u.size();
  std::vector<DD8> ud(m);
  for (std::size_t i = 0; i < m; ++i) {
    ad::Dual<double, 8> inner = ad::Dual<double, 8>::seed(u[i], static_cast<int>(i));
    ud[i] = DD8(inner);
    ud[i].set_tangent(static_cast<int>(i), ad::Dual<double, 8>(1.0));
  }
  const DD8 j = f(ud.data(), t1);
  std::vector<double> h(m * m);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < m; ++k)
      h[i * m + k] = j.tangent(static_cast<int>(i)).tangent(static_cast<int>(k));
  return h;
}

/// H e_k by the discrete adjoint's forward over adjoint, u = (y0, p), H e_k
/// in u's order; `gradient` (optional) gets its gradient part.
template <class M, class O>
std::vector<double> hv_column(const ode::Problem<M>& problem, const O& objective, std::size_t k,
                              const ode::IntegratorOptions& o,
                              const ode::Checkpointing& c = ode::StoreAll{},
                              std::vector<double>* gradient = nullptr) {
  const std::size_t n = problem.y0.size(), np = problem.p.size();
  ode::HessianDirection v{.parameters = std::vector<double>(np, 0.0),
                          .initial_state = std::vector<double>(n, 0.0)};
  (k < n ? v.initial_state[k] : v.parameters[k - n]) = 1.0;
  const ode::HessianVectorResult r =
      ode::hessian_vector(problem, objective, v, ode::DiscreteAdjoint{c}, o);
  std::vector<double> col(r.hv_wrt_initial_state);
  col.insert(col.end(), r.hv_wrt_parameters.begin(), r.hv_wrt_parameters.end());
  if (gradient) {
    *gradient = r.gradient_wrt_initial_state;
    gradient->insert(gradient->end(), r.gradient_wrt_parameters.begin(),
                     r.gradient_wrt_parameters.end());
  }
  return col;
}

template <class M, class O>
void check_delayed_differences(const ode::Problem<M>& problem, const O& objective, double scale,
                               const std::string& what);

/// The Hessian by columns against the closed form (each native stepper at
/// the settings' closed_tol: the second derivatives of the method's global
/// error scale as the gradient's), symmetric (1e-10: one function's
/// Hessian, its sums in other orders), its gradient part the discrete
/// adjoint's (1e-10); then (rk4, dt 1e-3) against central differences of
/// discrete adjoint gradients, each run locating its own instants (step
/// 1e-4 relative: truncation ~1e-8, round-off ~1e-11; 1e-6 of the largest
/// entry, as events_test). Returns the worst closed-form disagreement.
template <class M, class O, class F>
void check_delayed_hessian(const ode::Problem<M>& problem, const O& objective, F f,
                           const std::string& what) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  const std::size_t m = u.size(), n = problem.y0.size();
  const std::vector<double> h_closed = closed_hessian(f, u, problem.t1());
  double scale = 0.0;
  for (double v : h_closed) scale = std::max(scale, std::abs(v));
  for (const Setting& s : settings()) {
    SCOPED_TRACE(what + " with " + s.name);
    const ode::GradientResult ad = ode::gradient(problem, objective, ode::DiscreteAdjoint{}, s.options);
    std::vector<double> h(m * m), grad;
    for (std::size_t k = 0; k < m; ++k) {
      const std::vector<double> col = hv_column(problem, objective, k, s.options, ode::StoreAll{}, &grad);
      for (std::size_t i = 0; i < m; ++i) {
        h[i * m + k] = col[i];
        const double ga = i < n ? ad.wrt_initial_state[i] : ad.wrt_parameters[i - n];
        EXPECT_NEAR(grad[i], ga, 1e-10 * std::max(1.0, std::abs(ga))) << "gradient entry " << i;
      }
    }
    double worst = 0.0, asym = 0.0;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t k = 0; k < m; ++k) {
        EXPECT_NEAR(h[i * m + k], h_closed[i * m + k], s.closed_tol * scale)
            << "H(" << i << ", " << k << ") vs closed form";
        EXPECT_NEAR(h[i * m + k], h[k * m + i], 1e-10 * scale) << "symmetry " << i << ", " << k;
        worst = std::max(worst, std::abs(h[i * m + k] - h_closed[i * m + k]) / scale);
        asym = std::max(asym, std::abs(h[i * m + k] - h[k * m + i]) / scale);
      }
    std::printf("H.v %-36s %-15s |H - closed| %.1e  asymmetry %.1e (of the largest entry)\n",
                what.c_str(), s.name, worst, asym);
  }
  check_delayed_differences(problem, objective, scale, what);
}

/// H·v (rk4, dt 1e-3) against central differences of discrete adjoint
/// gradients (see check_delayed_hessian); `scale` the largest entry of H.
template <class M, class O>
void check_delayed_differences(const ode::Problem<M>& problem, const O& objective, double scale,
                               const std::string& what) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  const std::size_t m = u.size(), n = problem.y0.size();
  const ode::IntegratorOptions o = fixed_options(ode::Method::RK4, 1e-3);
  double worst = 0.0;
  for (std::size_t k = 0; k < m; ++k) {
    const double hstep = 1e-4 * std::max(1.0, std::abs(u[k]));
    auto grad_at = [&](double delta) {
      ode::Problem<M> q = problem;
      (k < n ? q.y0[k] : q.p[k - n]) += delta;
      const ode::GradientResult r = ode::gradient(q, objective, ode::DiscreteAdjoint{}, o);
      std::vector<double> g(r.wrt_initial_state);
      g.insert(g.end(), r.wrt_parameters.begin(), r.wrt_parameters.end());
      return g;
    };
    const std::vector<double> gp = grad_at(hstep), gm = grad_at(-hstep);
    const std::vector<double> col = hv_column(problem, objective, k, o);
    for (std::size_t i = 0; i < m; ++i) {
      const double fd = (gp[i] - gm[i]) / (2 * hstep);
      EXPECT_NEAR(col[i], fd, 1e-6 * scale)
          << what << ": H(" << i << ", " << k << ") vs central differences of gradients";
      worst = std::max(worst, std::abs(col[i] - fd) / scale);
    }
  }
  std::printf("H.v %-36s |H - central differences of gradients| %.1e\n", what.c_str(), worst);
}

TEST(DelayedEvents, HessianVectorThroughADelayedEvent) {
  // The execution time τ + d(τ, x(τ), p) and the values from the trigger
  // time differentiated twice: the delay's dependence on x(τ) and e, the
  // values' on a, c, and τ's own (root) on x0, k, θ.
  for (const Variant& v : kVariants) {
    const bool st = v.state_trigger, tv = v.trigger_values;
    check_delayed_hessian(problem_of(v), FinalState{},
                          [st, tv](const auto* u, double t1) { return closed(u, t1, st, tv); },
                          v.name);
  }
}

/// The Hessian by cvodes_adjoint (CVODES' second-order adjoint stretch by
/// stretch, cvodes_hessian.cpp) against the closed form: CVODES solves the
/// continuous problem to its tolerances (rtol 1e-10), so 1e-6 of the
/// largest entry, as the first-order CVODES rows; its gradient part against
/// the closed form's gradient likewise.
template <class M, class O, class F>
void check_cvodes_hessian(const ode::Problem<M>& problem, const O& objective, F f,
                          const std::string& what) {
  constexpr double kCvodesHessianTol = 1e-6;
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  const std::size_t m = u.size(), n = problem.y0.size();
  const std::vector<double> h_closed = closed_hessian(f, u, problem.t1());
  double scale = 0.0;
  for (double v : h_closed) scale = std::max(scale, std::abs(v));
  for (ode::Method method : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    SCOPED_TRACE(what + " with " + ode::to_string(method));
    const ode::IntegratorOptions o = adaptive_options(method, 1e-10);
    double worst = 0.0;
    for (std::size_t k = 0; k < m; ++k) {
      ode::HessianDirection v{.parameters = std::vector<double>(problem.p.size(), 0.0),
                              .initial_state = std::vector<double>(n, 0.0)};
      (k < n ? v.initial_state[k] : v.parameters[k - n]) = 1.0;
      const ode::HessianVectorResult r =
          ode::hessian_vector(problem, objective, v, ode::CvodesAdjoint{}, o);
      for (std::size_t i = 0; i < m; ++i) {
        const double got = i < n ? r.hv_wrt_initial_state[i] : r.hv_wrt_parameters[i - n];
        EXPECT_NEAR(got, h_closed[i * m + k], kCvodesHessianTol * scale)
            << "H(" << i << ", " << k << ") vs closed form";
        worst = std::max(worst, std::abs(got - h_closed[i * m + k]) / scale);
      }
    }
    std::printf("H.v %-36s %-15s |H - closed| %.1e (of the largest entry)\n", what.c_str(),
                ode::to_string(method).c_str(), worst);
  }
}

TEST(DelayedEvents, HessianVectorByCvodesAdjointCrossesDelayedEvents) {
  // H·v through events by cvodes_adjoint: the four variants (a root's
  // instant, a delayed execution's, values from either time) and two
  // executions sharing one delayed instant.
  for (const Variant& v : kVariants) {
    const bool st = v.state_trigger, tv = v.trigger_values;
    check_cvodes_hessian(problem_of(v), FinalState{},
                         [st, tv](const auto* u, double t1) { return closed(u, t1, st, tv); },
                         v.name);
  }
  check_cvodes_hessian(
      ode::Problem<Twin>{Twin{}, {2.0, 0.5}, {0.8, 0.6, 0.3, 0.4, 0.5, 1.0}, {0.0, 2.0}},
      SumOfStates{}, [](const auto* u, double t1) { return twin_closed(u, t1); },
      "two executions at one instant");
}

TEST(DelayedEvents, HessianVectorThroughAChainAndTwoExecutionsAtOneInstant) {
  // The chain (a delayed execution scheduling the next, whose time moves
  // with the first's) and two executions sharing one delayed instant.
  check_delayed_hessian(
      ode::Problem<Twin>{Twin{}, {2.0, 0.5}, {0.8, 0.6, 0.3, 0.4, 0.5, 1.0}, {0.0, 2.0}},
      SumOfStates{}, [](const auto* u, double t1) { return twin_closed(u, t1); },
      "two executions at one instant");
  // The chain (9 inputs): against differences of gradients and for
  // symmetry; the largest entry of H from the run itself sets the scale.
  const ode::Problem<Chain> chain{Chain{}, {2.0, 0.0}, {0.8, 0.4, 0.3, 0.4, 0.5, 1.0, 0.5},
                                  {0.0, 2.5}};
  const ode::IntegratorOptions o = fixed_options(ode::Method::RK4, 1e-3);
  const std::size_t m = 9;
  std::vector<double> h(m * m);
  double scale = 0.0;
  for (std::size_t k = 0; k < m; ++k) {
    const std::vector<double> col = hv_column(chain, FinalState{}, k, o);
    for (std::size_t i = 0; i < m; ++i) {
      h[i * m + k] = col[i];
      scale = std::max(scale, std::abs(col[i]));
    }
  }
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < i; ++k)
      EXPECT_NEAR(h[i * m + k], h[k * m + i], 1e-10 * scale) << "chain: symmetry " << i << ", " << k;
  check_delayed_differences(chain, FinalState{}, scale, "chain");
}

TEST(DelayedEvents, HessianVectorIsTheSameUnderEverySchedule) {
  // The second-order links (the λ̇ seed's τ̄̇_e, v̄̇) are carried by instant
  // index whatever the schedule recomputes: the same bits.
  const ode::Problem<DelayedDose> problem = problem_of(kVariants[2]);
  for (ode::Method m : {ode::Method::Dopri5, ode::Method::Bdf, ode::Method::Sdirk3}) {
    const ode::IntegratorOptions o = adaptive_options(m, 1e-8);
    for (std::size_t k : {0u, 4u}) {
      const std::vector<double> ref = hv_column(problem, FinalState{}, k, o);
      const std::string disk = ::testing::TempDir() + "delayed_events_hv_multilevel.h5";
      for (const ode::Checkpointing& c :
           {ode::Checkpointing{ode::Uniform{4}}, ode::Checkpointing{ode::Binomial{3}},
            ode::Checkpointing{ode::Online{3}},
            ode::Checkpointing{ode::Multilevel{.ram = 2, .disk = 2, .path = disk}}})
        EXPECT_EQ(hv_column(problem, FinalState{}, k, o, c), ref) << ode::to_string(m) << ", column " << k;
    }
  }
}

TEST(DelayedEvents, TheSupportTableSaysWhatCarriesDelays) {
  using K = ode::SensitivityKind;
  for (K k : {K::DiscreteAdjoint, K::Forward})
    for (ode::Method m : {ode::Method::Dopri5, ode::Method::Bdf, ode::Method::RK4})
      EXPECT_TRUE(ode::supports_events(k, m, 1, true)) << ode::to_string(k);
  for (K k : {K::CvodesForward, K::CvodesAdjoint})
    EXPECT_TRUE(ode::supports_events(k, ode::Method::CvodesBdf, 1, true)) << ode::to_string(k);
  for (ode::Method m : {ode::Method::Dopri5, ode::Method::Sdirk3, ode::Method::Bdf})
    EXPECT_TRUE(ode::supports_events(K::ContinuousAdjoint, m, 1, true)) << ode::to_string(m);
  EXPECT_TRUE(ode::supports_events(K::DiscreteAdjoint, ode::Method::Dopri5, 2, true));
  // H·v by cvodes_adjoint crosses events, delayed ones too; cvodes_forward
  // has no H·v at all.
  EXPECT_TRUE(ode::supports_events(K::CvodesAdjoint, ode::Method::CvodesBdf, 2, true));
  EXPECT_TRUE(ode::supports_events(K::CvodesAdjoint, ode::Method::CvodesAdams, 2, false));
  EXPECT_FALSE(ode::supports_events(K::ContinuousAdjoint, ode::Method::Dopri5, 2, true));
}

/// `call` throws costate::Error whose message holds every one of `words`.
template <class F>
void expect_refused(F call, std::initializer_list<const char*> words) {
  try {
    call();
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    for (const char* w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

TEST(DelayedEvents, PathsThatDoNotCarryDelaysRefuseThemByName) {
  const ode::Problem<DelayedDose> problem = problem_of(kVariants[0]);
  // A delay on doubles only: the run is fine, its derivative needs T.
  DoubleOnlyDelay m;
  const ode::Problem<DoubleOnlyDelay> q{m, problem.y0, problem.p, {0.0, 2.0}};
  expect_refused(
      [&] {
        (void)ode::gradient(q, FinalState{}, ode::Forward{}, adaptive_options(ode::Method::Dopri5, 1e-8));
      },
      {"delayed dose", "event_delay", "generic scalar"});
}

}  // namespace
