// Events (events.hpp) against closed forms: a dose at a parameter time, a
// bouncing ball and a reset x := x − c at a threshold θ (where the whole of
// dJ/dθ is the jump term). For every native stepper: the located instants,
// the objective, and its gradient by forward sensitivities and by the
// discrete adjoint (their agreement, and with the closed form's exact
// derivatives, taken by ad::Dual on the closed form itself); every
// checkpoint schedule gives the same bits; cascades, t0 events and bad
// models are defined or refused.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/integrate.hpp"
#include "support/event_settings.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/sensitivity_matrix.hpp"

namespace {

using namespace costate;
using D4 = ad::Dual<double, 4>;

/// J = y_0(t1).
struct FirstStateAtEnd {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

// ------------------------------------------------------------- the models

/// y' = −k y; at t = τ a dose y ← y + D.  p = (k, τ, D).
struct Dose : ode::EventDefaults {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[0];
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T t, std::span<const T>, std::span<const T> p, std::span<T> g) const {
    g[0] = t - p[1];
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const {
    return {.name = "dose", .initial_value = !fires_at_t0};
  }
  bool fires_at_t0 = false;  // SBML's initialValue = false: a trigger true at t0 fires there
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = y[0] + p[2];
  }
  static constexpr std::size_t kTargets[1] = {0};
};

/// y(T) = y0 e^{−kT} + D e^{−k(T−τ)}; u = (y0, k, τ, D).
template <class T>
T dose_closed(const T* u, double t1) {
  return u[0] * exp(-u[1] * t1) + u[3] * exp(-u[1] * (t1 - u[2]));
}

/// (height, velocity)' = (v, −g); when the height falls through 0,
/// v ← −e v.  p = (g, e).
struct Ball : ode::EventDefaults {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = y[1];
    d[1] = -p[0];
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T, std::span<const T> y, std::span<const T>, std::span<T> g) const {
    g[0] = -y[0];
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const { return {.name = "bounce"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = -p[1] * y[1];
  }
  static constexpr std::size_t kTargets[1] = {1};
};

/// The height at t1 after exactly one bounce; u = (h0, v0, g, e).
template <class T>
T ball_closed(const T* u, double t1) {
  const T s = sqrt(u[1] * u[1] + 2.0 * u[2] * u[0]);  // impact speed
  const T t_hit = (u[1] + s) / u[2];
  const T dt = t1 - t_hit;
  return u[3] * s * dt - 0.5 * u[2] * dt * dt;
}

/// x' = a x; when x reaches θ, x ← x − c.  p = (a, θ, c).
struct Reset : ode::EventDefaults {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = p[0] * y[0];
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    g[0] = y[0] - p[1];
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const { return {.name = "reset"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = y[0] - p[2];
  }
  static constexpr std::size_t kTargets[1] = {0};
};

/// x(t1) after one reset: (θ − c) e^{a t1} x0/θ; u = (x0, a, θ, c).
template <class T>
T reset_closed(const T* u, double t1) {
  return (u[2] - u[3]) * exp(u[1] * t1) * u[0] / u[2];
}

/// The closed form's value and its exact gradient (by Dual numbers) at u.
template <class F>
std::vector<double> closed_gradient(F f, const std::vector<double>& u, double t1, double& value) {
  std::vector<D4> ud(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) ud[i] = D4::seed(u[i], static_cast<int>(i));
  const D4 j = f(ud.data(), t1);
  value = j.value();
  std::vector<double> g(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) g[i] = j.tangent(static_cast<int>(i));
  return g;
}

using Setting = costate::test::EventSetting;
using costate::test::adaptive_options;
using costate::test::fixed_options;
std::vector<Setting> settings() { return costate::test::event_settings(); }

/// Forward and discrete adjoint on `problem` against the closed form `f`
/// at u = (y0…, p…).
template <class M, class F>
void check_model(const ode::Problem<M>& problem, F f, const char* what) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  double j_closed = 0.0;
  const std::vector<double> g_closed = closed_gradient(f, u, problem.t1(), j_closed);
  double scale = 0.0;
  for (double v : g_closed) scale = std::max(scale, std::abs(v));
  const FirstStateAtEnd objective;
  for (const Setting& s : settings()) {
    SCOPED_TRACE(std::string(what) + " with " + s.name);
    const ode::GradientResult fw = ode::gradient(problem, objective, ode::Forward{}, s.options);
    const ode::GradientResult ad =
        ode::gradient(problem, objective, ode::DiscreteAdjoint{}, s.options);
    ASSERT_EQ(fw.steps.events().size(), 1u) << "one instant";
    EXPECT_EQ(fw.steps, ad.steps) << "the same plan";
    // Forward and adjoint are transposes of one discrete map: round-off.
    constexpr double kTransposeTol = 1e-11;
    EXPECT_NEAR(fw.objective, ad.objective, kTransposeTol * std::abs(j_closed));
    const std::size_t n = problem.y0.size();
    for (std::size_t i = 0; i < u.size(); ++i) {
      const double gf = i < n ? fw.wrt_initial_state[i] : fw.wrt_parameters[i - n];
      const double ga = i < n ? ad.wrt_initial_state[i] : ad.wrt_parameters[i - n];
      EXPECT_NEAR(gf, ga, kTransposeTol * scale) << "entry " << i;
      EXPECT_NEAR(ga, g_closed[i], s.closed_tol * scale) << "entry " << i << " vs closed form";
    }
    EXPECT_NEAR(ad.objective, j_closed, s.closed_tol * std::abs(j_closed));
  }
  // Central differences of the objective, each evaluation locating its own
  // instant (dopri5 at rtol 1e-12): step 1e-5 relative, truncation ~1e-10,
  // the adaptive steps' noise ~1e-12/1e-5 = 1e-7 — agreement to 1e-6.
  const ode::IntegratorOptions tight = adaptive_options(ode::Method::Dopri5, 1e-12);
  const ode::GradientResult ad = ode::gradient(problem, objective, ode::DiscreteAdjoint{}, tight);
  const std::size_t n = problem.y0.size();
  for (std::size_t i = 0; i < u.size(); ++i) {
    const double h = 1e-5 * std::max(1.0, std::abs(u[i]));
    auto at = [&](double delta) {
      ode::Problem<M> q = problem;
      (i < n ? q.y0[i] : q.p[i - n]) += delta;
      return ode::gradient(q, objective, ode::Forward{}, tight).objective;
    };
    const double fd = (at(h) - at(-h)) / (2 * h);
    const double ga = i < n ? ad.wrt_initial_state[i] : ad.wrt_parameters[i - n];
    EXPECT_NEAR(ga, fd, 1e-6 * scale) << what << ": entry " << i << " vs central differences";
  }
}

TEST(Events, DoseAtAParameterTime) {
  ode::Problem<Dose> problem{Dose{}, {2.0}, {0.7, 1.3, 0.5}, {0.0, 3.0}};
  check_model(problem, [](const auto* u, double t1) { return dose_closed(u, t1); }, "dose");
}

TEST(Events, PendingGradientRefusesAModelWithEventsByName) {
  // Its adjoint restarts at every instant: one ode::gradient call, not a
  // pending forward pass (cvodes.hpp, PendingGradient).
  ode::Problem<Dose> problem{Dose{}, {2.0}, {0.7, 1.3, 0.5}, {0.0, 3.0}};
  try {
    (void)ode::begin_gradient(problem, FirstStateAtEnd{}, ode::CvodesAdjoint{},
                              {.method = ode::Method::CvodesBdf});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model has events"), std::string::npos) << e.what();
  }
}

TEST(Events, BouncingBall) {
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  check_model(problem, [](const auto* u, double t1) { return ball_closed(u, t1); }, "ball");
}

TEST(Events, ResetAtAThreshold) {
  // τ = ln 2/0.9 = 0.77; the next reset would be at 1.09.
  ode::Problem<Reset> problem{Reset{}, {1.0}, {0.9, 2.0, 0.5}, {0.0, 1.0}};
  check_model(problem, [](const auto* u, double t1) { return reset_closed(u, t1); }, "reset");
}

TEST(Events, InstantIsLocatedToUlps) {
  // The bounce happens at t = (v0 + s)/g; the plan's instant lands there.
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  const double s = std::sqrt(0.3 * 0.3 + 2 * 9.81 * 1.0), t_hit = (0.3 + s) / 9.81;
  for (const Setting& set : settings()) {
    const ode::GradientResult r =
        ode::gradient(problem, FirstStateAtEnd{}, ode::Forward{}, set.options);
    ASSERT_EQ(r.steps.events().size(), 1u) << set.name;
    const double tau = r.steps.times()[r.steps.events()[0].at];
    // The located root of the discrete solution: within the method's error
    // of the exact impact time.
    EXPECT_NEAR(tau, t_hit, set.closed_tol) << set.name;
  }
}

TEST(Events, EveryScheduleGivesTheSameBits) {
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  for (ode::Method m : {ode::Method::Dopri5, ode::Method::Bdf, ode::Method::Sdirk3}) {
    const ode::IntegratorOptions o = adaptive_options(m, 1e-8);
    const ode::GradientResult ref = ode::gradient(problem, FirstStateAtEnd{},
                                                  ode::DiscreteAdjoint{ode::StoreAll{}}, o);
    const std::string disk = ::testing::TempDir() + "events_multilevel.h5";
    for (const ode::Checkpointing& c :
         {ode::Checkpointing{ode::Uniform{4}}, ode::Checkpointing{ode::Binomial{3}},
          ode::Checkpointing{ode::Online{3}},
          ode::Checkpointing{ode::Multilevel{.ram = 2, .disk = 2, .path = disk}}}) {
      const ode::GradientResult r =
          ode::gradient(problem, FirstStateAtEnd{}, ode::DiscreteAdjoint{c}, o);
      EXPECT_EQ(r.objective, ref.objective) << ode::to_string(m);
      EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters) << ode::to_string(m);
      EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state) << ode::to_string(m);
    }
    // A replay of the returned plan (events included) gives the same bits.
    const ode::GradientResult again = ode::gradient(
        problem, FirstStateAtEnd{}, ode::DiscreteAdjoint{ode::StoreAll{}}, o, ref.steps);
    EXPECT_EQ(again.wrt_parameters, ref.wrt_parameters) << ode::to_string(m);
  }
}

TEST(Events, RunReportsStatesAfterTheEvents) {
  // The dose at τ = 1.5, an output there: the state after the dose.
  ode::Problem<Dose> problem{Dose{}, {2.0}, {0.7, 1.5, 0.5}, {0.0, 3.0}};
  problem.output_times = {0.0, 1.5, 3.0};
  const ode::Solution sol = ode::integrate(problem, adaptive_options(ode::Method::Dopri5, 1e-12));
  ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
  ASSERT_EQ(sol.n_outputs(), 3u);
  EXPECT_EQ(sol.summary.events, 1);
  // Tolerance: dopri5 at rtol 1e-12 (global error ~1e-11).
  EXPECT_NEAR(sol.state(1)[0], 2.0 * std::exp(-0.7 * 1.5) + 0.5, 1e-10);
  EXPECT_NEAR(sol.state(2)[0], 2.0 * std::exp(-0.7 * 3.0) + 0.5 * std::exp(-0.7 * 1.5), 1e-10);
}

// ------------------------------------------------- H·v through the instants

using DD4 = ad::Dual<D4, 4>;

/// The closed form's exact Hessian (m × m, m = u.size() ≤ 4) at u, by
/// nested Dual numbers on the closed form itself.
template <class F>
std::vector<double> closed_hessian(F f, const std::vector<double>& u, double t1) {
  const std::size_t m = u.size();
  std::vector<DD4> ud(m);
  for (std::size_t i = 0; i < m; ++i) {
    ud[i] = DD4(D4::seed(u[i], static_cast<int>(i)));
    ud[i].set_tangent(static_cast<int>(i), D4(1.0));
  }
  const DD4 j = f(ud.data(), t1);
  std::vector<double> h(m * m);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < m; ++k)
      h[i * m + k] = j.tangent(static_cast<int>(i)).tangent(static_cast<int>(k));
  return h;
}

/// H·v by the discrete adjoint's forward over adjoint, v = e_k in u = (y0, p);
/// H v in u's order. `gradient` (optional) gets the gradient part.
template <class M>
std::vector<double> hv_column(const ode::Problem<M>& problem, std::size_t k,
                              const ode::IntegratorOptions& o,
                              const ode::Checkpointing& c = ode::StoreAll{},
                              std::vector<double>* gradient = nullptr) {
  const std::size_t n = problem.y0.size(), np = problem.p.size();
  ode::HessianDirection v{.parameters = std::vector<double>(np, 0.0),
                          .initial_state = std::vector<double>(n, 0.0)};
  (k < n ? v.initial_state[k] : v.parameters[k - n]) = 1.0;
  const ode::HessianVectorResult r =
      ode::hessian_vector(problem, FirstStateAtEnd{}, v, ode::DiscreteAdjoint{c}, o);
  std::vector<double> col(r.hv_wrt_initial_state);
  col.insert(col.end(), r.hv_wrt_parameters.begin(), r.hv_wrt_parameters.end());
  if (gradient) {
    *gradient = r.gradient_wrt_initial_state;
    gradient->insert(gradient->end(), r.gradient_wrt_parameters.begin(),
                     r.gradient_wrt_parameters.end());
  }
  return col;
}

/// H·v (rk4, dt 1e-3) against central differences of discrete adjoint
/// gradients, each run relocating its own instant inside the same grid (the
/// discrete gradient is smooth in u), and symmetric; `scale` the largest
/// Hessian entry.
template <class M>
void check_hessian_differences(const ode::Problem<M>& problem, double scale, const char* what) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  const std::size_t m = u.size();
  // Step 1e-4 relative: truncation ~1e-8 of the third derivatives,
  // round-off ~1e-15/1e-4 ~1e-11; the discrete Hessian and the differences
  // of the discrete gradient differ by the method's O(dt⁴) ~1e-12 —
  // agreement to 1e-6 of the largest entry.
  const ode::IntegratorOptions o = fixed_options(ode::Method::RK4, 1e-3);
  const std::size_t n = problem.y0.size();
  std::vector<double> h(m * m);
  for (std::size_t k = 0; k < m; ++k) {
    const double hstep = 1e-4 * std::max(1.0, std::abs(u[k]));
    auto grad_at = [&](double delta) {
      ode::Problem<M> q = problem;
      (k < n ? q.y0[k] : q.p[k - n]) += delta;
      const ode::GradientResult r = ode::gradient(q, FirstStateAtEnd{}, ode::DiscreteAdjoint{}, o);
      std::vector<double> g(r.wrt_initial_state);
      g.insert(g.end(), r.wrt_parameters.begin(), r.wrt_parameters.end());
      return g;
    };
    const std::vector<double> gp = grad_at(hstep), gm = grad_at(-hstep);
    const std::vector<double> col = hv_column(problem, k, o);
    for (std::size_t i = 0; i < m; ++i) {
      h[i * m + k] = col[i];
      EXPECT_NEAR(col[i], (gp[i] - gm[i]) / (2 * hstep), 1e-6 * scale)
          << what << ": H(" << i << ", " << k << ") vs central differences of gradients";
    }
  }
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < i; ++k)
      EXPECT_NEAR(h[i * m + k], h[k * m + i], 1e-10 * scale) << what << ": symmetry " << i << ", " << k;
}

/// H·v through the instant for every native stepper: against the closed
/// form's exact Hessian, symmetric (vᵀHw = wᵀHv), its gradient part the
/// discrete adjoint's; then against central differences of gradients.
template <class M, class F>
void check_hessian(const ode::Problem<M>& problem, F f, const char* what) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  const std::size_t m = u.size();
  const std::vector<double> h_closed = closed_hessian(f, u, problem.t1());
  double scale = 0.0;
  for (double v : h_closed) scale = std::max(scale, std::abs(v));
  for (const Setting& s : settings()) {
    SCOPED_TRACE(std::string(what) + " with " + s.name);
    std::vector<double> h(m * m), grad;
    const ode::GradientResult ad =
        ode::gradient(problem, FirstStateAtEnd{}, ode::DiscreteAdjoint{}, s.options);
    for (std::size_t k = 0; k < m; ++k) {
      const std::vector<double> col = hv_column(problem, k, s.options, ode::StoreAll{}, &grad);
      for (std::size_t i = 0; i < m; ++i) h[i * m + k] = col[i];
      // The gradient part is the discrete adjoint's (the same sweep's
      // value parts; the implicit schemes' second-order solves to rounding).
      for (std::size_t i = 0; i < m; ++i) {
        const double ga = i < problem.y0.size() ? ad.wrt_initial_state[i]
                                                 : ad.wrt_parameters[i - problem.y0.size()];
        EXPECT_NEAR(grad[i], ga, 1e-10 * std::max(1.0, std::abs(ga))) << "gradient entry " << i;
      }
    }
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t k = 0; k < m; ++k) {
        // The exact Hessian of the discrete objective, whose first derivative
        // is the gradient's: the closed form to the method's error (as the
        // gradient: closed_tol, the second derivatives of its global error
        // scale alike).
        EXPECT_NEAR(h[i * m + k], h_closed[i * m + k], s.closed_tol * scale)
            << "H(" << i << ", " << k << ") vs closed form";
        // One function's Hessian: symmetric to round-off (relative 1e-10:
        // the sums of the sweep and of the jump's lanes in other orders).
        EXPECT_NEAR(h[i * m + k], h[k * m + i], 1e-10 * scale) << "symmetry " << i << ", " << k;
      }
  }
  check_hessian_differences(problem, scale, what);
}

TEST(Events, HessianVectorThroughADoseAtAParameterTime) {
  ode::Problem<Dose> problem{Dose{}, {2.0}, {0.7, 1.3, 0.5}, {0.0, 3.0}};
  check_hessian(problem, [](const auto* u, double t1) { return dose_closed(u, t1); }, "dose");
}

TEST(Events, HessianVectorThroughABounce) {
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  check_hessian(problem, [](const auto* u, double t1) { return ball_closed(u, t1); }, "ball");
}

TEST(Events, HessianVectorThroughAResetAtAThreshold) {
  ode::Problem<Reset> problem{Reset{}, {1.0}, {0.9, 2.0, 0.5}, {0.0, 1.0}};
  check_hessian(problem, [](const auto* u, double t1) { return reset_closed(u, t1); }, "reset");
}

/// x' = a x + b t (a right-hand side that depends on t: the jump's second
/// order has f_t); when x reaches θ, x ← x − c.  p = (a, θ, c, b).
struct DriftReset : Reset {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = p[0] * y[0] + p[3] * t;
  }
};

TEST(Events, HessianVectorThroughAResetWithATimeDependentRightHandSide) {
  // No closed form here: central differences of gradients and symmetry
  // (the largest entry of H, from the run itself, sets the scale).
  ode::Problem<DriftReset> problem{DriftReset{}, {1.0}, {0.9, 2.0, 0.5, 0.8}, {0.0, 1.0}};
  const ode::IntegratorOptions o = fixed_options(ode::Method::RK4, 1e-3);
  // The drift brings x back to θ: two resets, two instants in one sweep.
  ASSERT_EQ(ode::gradient(problem, FirstStateAtEnd{}, ode::DiscreteAdjoint{}, o).steps.events().size(),
            2u);
  double scale = 0.0;
  for (std::size_t k = 0; k < 5; ++k)
    for (double v : hv_column(problem, k, o)) scale = std::max(scale, std::abs(v));
  check_hessian_differences(problem, scale, "reset with drift");
}

TEST(Events, HessianVectorIsTheSameUnderEverySchedule) {
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  for (ode::Method m : {ode::Method::Dopri5, ode::Method::Bdf, ode::Method::Sdirk3,
                        ode::Method::CrankNicolson}) {
    const ode::IntegratorOptions o =
        m == ode::Method::CrankNicolson ? fixed_options(m, 1e-2) : adaptive_options(m, 1e-8);
    const std::vector<double> ref = hv_column(problem, 2, o);
    const std::string disk = ::testing::TempDir() + "events_hv_multilevel.h5";
    for (const ode::Checkpointing& c :
         {ode::Checkpointing{ode::Uniform{4}}, ode::Checkpointing{ode::Binomial{3}},
          ode::Checkpointing{ode::Online{3}},
          ode::Checkpointing{ode::Multilevel{.ram = 2, .disk = 2, .path = disk}}})
      EXPECT_EQ(hv_column(problem, 2, o, c), ref) << ode::to_string(m);
  }
}

/// The continuous methods against the closed forms' exact gradients:
/// `method` on each of `steppers` at rtol 1e-10 (atol 1e-12), agreeing to
/// `tol` relative to the largest gradient entry.
template <class M, class F>
void check_continuous(const ode::Problem<M>& problem, F f, const char* what,
                      const ode::SensitivityMethod& method,
                      std::initializer_list<ode::Method> steppers, double tol, double rtol) {
  std::vector<double> u(problem.y0.begin(), problem.y0.end());
  u.insert(u.end(), problem.p.begin(), problem.p.end());
  double j_closed = 0.0;
  const std::vector<double> g_closed = closed_gradient(f, u, problem.t1(), j_closed);
  double scale = 0.0;
  for (double v : g_closed) scale = std::max(scale, std::abs(v));
  const std::size_t n = problem.y0.size();
  for (ode::Method m : steppers) {
    SCOPED_TRACE(std::string(what) + " with " + ode::to_string(m));
    const ode::GradientResult r =
        ode::gradient(problem, FirstStateAtEnd{}, method, adaptive_options(m, rtol));
    EXPECT_EQ(r.summary.events, 1) << "one instant";
    EXPECT_NEAR(r.objective, j_closed, tol * std::abs(j_closed));
    for (std::size_t i = 0; i < u.size(); ++i) {
      const double g = i < n ? r.wrt_initial_state[i] : r.wrt_parameters[i - n];
      EXPECT_NEAR(g, g_closed[i], tol * scale) << "entry " << i << " vs closed form";
    }
  }
}

/// All three closed-form models under one continuous method (at rtol).
void check_continuous_models(const ode::SensitivityMethod& method,
                             std::initializer_list<ode::Method> steppers, double tol,
                             double rtol = 1e-10) {
  check_continuous(ode::Problem<Dose>{Dose{}, {2.0}, {0.7, 1.3, 0.5}, {0.0, 3.0}},
                   [](const auto* u, double t1) { return dose_closed(u, t1); }, "dose", method,
                   steppers, tol, rtol);
  check_continuous(ode::Problem<Ball>{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}},
                   [](const auto* u, double t1) { return ball_closed(u, t1); }, "ball", method,
                   steppers, tol, rtol);
  check_continuous(ode::Problem<Reset>{Reset{}, {1.0}, {0.9, 2.0, 0.5}, {0.0, 1.0}},
                   [](const auto* u, double t1) { return reset_closed(u, t1); }, "reset", method,
                   steppers, tol, rtol);
}

TEST(Events, ContinuousAdjointCrossesEventsExactly) {
  // The continuous adjoint: legs between the instants, the transposed jump
  // at each. Its error is the forward and backward runs' global errors and
  // the interpolants': ~1e3 × rtol relative (as cross_method_test's
  // kContinuousRelTol).
  check_continuous_models(ode::ContinuousAdjoint{},
                          {ode::Method::Dopri5, ode::Method::Sdirk3, ode::Method::Bdf}, 1e-7);
  // At tight tolerances (rtol 1e-13) the 1e-8 of the largest entry.
  check_continuous_models(ode::ContinuousAdjoint{},
                          {ode::Method::Dopri5, ode::Method::Sdirk3, ode::Method::Bdf}, 1e-8, 1e-13);
}

TEST(Events, CvodesForwardSensitivitiesCrossEvents) {
  // CVODES' forward sensitivities, jumped at the instants its root finding
  // locates: CVODES' global error at rtol 1e-10 (states and sensitivities
  // in the error test), ~1e2–1e4 × rtol over these spans.
  check_continuous_models(ode::CvodesForward{},
                          {ode::Method::CvodesBdf, ode::Method::CvodesAdams}, 1e-6);
}

TEST(Events, CvodesAdjointCrossesEvents) {
  // CVODES' adjoint stretch by stretch, the transposed jump between: the
  // forward passes' and the backward problem's errors at rtol 1e-10, and
  // Hermite interpolation of the forward state, ~1e2–1e4 × rtol (as
  // cvodes_forward's above).
  check_continuous_models(ode::CvodesAdjoint{},
                          {ode::Method::CvodesBdf, ode::Method::CvodesAdams}, 1e-6);
  ode::CvodesAdjoint polynomial;
  polynomial.interpolation = ode::CvodesInterpolation::Polynomial;
  polynomial.steps = 20;
  check_continuous_models(polynomial, {ode::Method::CvodesBdf}, 1e-6);
  // At tight tolerances (rtol 1e-13) the 1e-8 of the largest entry.
  check_continuous_models(ode::CvodesAdjoint{}, {ode::Method::CvodesBdf, ode::Method::CvodesAdams},
                          1e-8, 1e-13);
  check_continuous_models(ode::CvodesForward{}, {ode::Method::CvodesBdf, ode::Method::CvodesAdams},
                          1e-8, 1e-13);
}

/// Both states observed before and after the ball's bounce (at 0.483) and at t1.
ode::WeightedObservations bounce_observations() {
  ode::WeightedObservations obs;
  obs.times = {0.2, 0.5, 0.6};
  obs.n_states = 2;
  obs.data = {0.9, 0.1, 0.2, 2.0, 0.3, 1.0};
  obs.weights.assign(6, 1.0);
  return obs;
}

TEST(Events, CvodesResidualJacobianAcrossABounce) {
  // The calibration's residual Jacobian by CVODES' forward sensitivities
  // through the bounce, against the discrete tangents of dopri5 at rtol
  // 1e-12 (the exact derivative to ~1e-10): CVODES' error at rtol 1e-10.
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  const ode::WeightedObservations obs = bounce_observations();
  const ode::IntegratorOptions tight = adaptive_options(ode::Method::Dopri5, 1e-12);
  const ode::GradientResult plan = ode::gradient(problem, obs, ode::DiscreteAdjoint{}, tight);
  const ode::ResidualSensitivities ref = ode::sensitivity_matrix(problem, obs, tight, plan.steps);
  double scale = 0.0;
  for (std::size_t r = 0; r < ref.residuals.size(); ++r)
    for (std::size_t c = 0; c < ref.n_columns; ++c) scale = std::max(scale, std::abs(ref.at(r, c)));
  constexpr double kTol = 1e-6;
  for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    const ode::ResidualSensitivities S =
        ode::sensitivity_matrix(problem, obs, adaptive_options(m, 1e-10), ode::StepPlan{});
    ASSERT_EQ(S.residuals.size(), ref.residuals.size());
    ASSERT_EQ(S.n_columns, ref.n_columns);
    for (std::size_t r = 0; r < S.residuals.size(); ++r)
      for (std::size_t c = 0; c < S.n_columns; ++c)
        EXPECT_NEAR(S.at(r, c), ref.at(r, c), kTol * scale)
            << ode::to_string(m) << " row " << r << " column " << c;
  }
}

/// J = ∫ y² dt + Σ_k (y(t_k) − 1)² on the dose model, one observation at the
/// dose's instant τ (it sees the state after the dose) and one after: the
/// continuous adjoint's λ jump of the observation and the event's transposed
/// jump at one time, and the running cost's jump (ℓ⁻ − ℓ⁺) dτ — against the
/// discrete adjoint at rtol 1e-12 (the exact objective's gradient to
/// ~1e-10). dJ/dτ is one-sided there (moving τ past the fixed observation
/// time changes what it sees) and is not compared; y0, k and D are.
struct DoseCost {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[0] * y[0];
  }
  template <class T>
  T observation(std::size_t, std::span<const T> y, std::span<const T>) const {
    return (y[0] - 1.0) * (y[0] - 1.0);
  }
  std::vector<double> observation_times() const { return {1.3, 2.0}; }
};

TEST(Events, CvodesAdjointWithRunningCostAndAnObservationAtTheInstant) {
  // As the continuous adjoint's test below: the observation at τ reads x⁺
  // and enters λ before the transposed jump; the running cost's jump enters
  // through λ_z. Against the discrete adjoint at rtol 1e-12; tolerance
  // CVODES' at rtol 1e-10 (~1e4 × rtol, see CvodesAdjointCrossesEvents).
  ode::Problem<Dose> problem{Dose{}, {2.0}, {0.7, 1.3, 0.5}, {0.0, 3.0}};
  const DoseCost cost;
  const ode::GradientResult ref =
      ode::gradient(problem, cost, ode::DiscreteAdjoint{}, adaptive_options(ode::Method::Dopri5, 1e-12));
  const double scale = std::max({std::abs(ref.wrt_initial_state[0]), std::abs(ref.wrt_parameters[0]),
                                 std::abs(ref.wrt_parameters[2])});
  constexpr double kTol = 1e-6;
  for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    SCOPED_TRACE(ode::to_string(m));
    const ode::GradientResult r =
        ode::gradient(problem, cost, ode::CvodesAdjoint{}, adaptive_options(m, 1e-10));
    EXPECT_EQ(r.summary.events, 1);
    EXPECT_NEAR(r.objective, ref.objective, kTol * std::abs(ref.objective));
    EXPECT_NEAR(r.wrt_initial_state[0], ref.wrt_initial_state[0], kTol * scale) << "y0";
    EXPECT_NEAR(r.wrt_parameters[0], ref.wrt_parameters[0], kTol * scale) << "k";
    EXPECT_NEAR(r.wrt_parameters[2], ref.wrt_parameters[2], kTol * scale) << "D";
    // CVODES' forward sensitivities on the same objective (the same
    // jumps, the other direction).
    const ode::GradientResult f =
        ode::gradient(problem, cost, ode::CvodesForward{}, adaptive_options(m, 1e-10));
    EXPECT_NEAR(r.wrt_parameters[0], f.wrt_parameters[0], kTol * scale) << "k, vs forward";
    EXPECT_NEAR(r.wrt_parameters[2], f.wrt_parameters[2], kTol * scale) << "D, vs forward";
  }
}

TEST(Events, ContinuousAdjointWithRunningCostAndAnObservationAtTheInstant) {
  ode::Problem<Dose> problem{Dose{}, {2.0}, {0.7, 1.3, 0.5}, {0.0, 3.0}};
  const DoseCost cost;
  const ode::GradientResult ref =
      ode::gradient(problem, cost, ode::DiscreteAdjoint{}, adaptive_options(ode::Method::Dopri5, 1e-12));
  ASSERT_EQ(ref.steps.events().size(), 1u);
  const double scale = std::max({std::abs(ref.wrt_initial_state[0]), std::abs(ref.wrt_parameters[0]),
                                 std::abs(ref.wrt_parameters[2])});
  // Tolerance: the continuous adjoint at rtol 1e-10 (~1e3 × rtol).
  constexpr double kTol = 1e-7;
  for (ode::Method m : {ode::Method::Dopri5, ode::Method::Sdirk3, ode::Method::Bdf}) {
    SCOPED_TRACE(ode::to_string(m));
    const ode::GradientResult r =
        ode::gradient(problem, cost, ode::ContinuousAdjoint{}, adaptive_options(m, 1e-10));
    EXPECT_NEAR(r.objective, ref.objective, kTol * std::abs(ref.objective));
    EXPECT_NEAR(r.wrt_initial_state[0], ref.wrt_initial_state[0], kTol * scale) << "y0";
    EXPECT_NEAR(r.wrt_parameters[0], ref.wrt_parameters[0], kTol * scale) << "k";
    EXPECT_NEAR(r.wrt_parameters[2], ref.wrt_parameters[2], kTol * scale) << "D";
  }
}

/// x' = 1; two events on one root x ≥ 1: e0 sets y ← x (values at the
/// trigger), e1 (higher priority) sets x ← 0 — SBML's order and sources.
struct Pair {
  template <class T>
  void rhs(double, std::span<const T>, std::span<const T>, std::span<T> d) const {
    d[0] = T(1.0);
    d[1] = T(0.0);
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T, std::span<const T> y, std::span<const T>, std::span<T> g) const {
    g[0] = y[0] - 1.0;
  }
  std::size_t n_events() const { return 2; }
  ode::EventAttributes event_attributes(std::size_t k) const {
    return {.name = k == 0 ? "copy" : "zero", .has_priority = true};
  }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t k) const {
    return std::span<const std::size_t>(kTargets + (k == 0 ? 1 : 0), 1);
  }
  template <class T>
  void event_assign(std::size_t k, T, std::span<const T> y, std::span<const T>,
                    std::span<T> v) const {
    v[0] = k == 0 ? y[0] : T(0.0);
  }
  double event_delay(std::size_t, double, std::span<const double>, std::span<const double>) const {
    return 0.0;
  }
  double event_priority(std::size_t k, double, std::span<const double>,
                        std::span<const double>) const {
    return k == 0 ? 0.0 : 1.0;
  }
  static constexpr std::size_t kTargets[2] = {0, 1};
};

TEST(Events, SimultaneousEventsRunInPriorityOrderWithTriggerTimeValues) {
  ode::Problem<Pair> problem{Pair{}, {0.0, -1.0}, {}, {0.0, 1.5}};
  problem.output_times = {1.5};
  const ode::Solution sol = ode::integrate(problem, adaptive_options(ode::Method::Dopri5, 1e-10));
  ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
  // "zero" first (priority 1), then "copy" with x from the trigger time (1).
  EXPECT_NEAR(sol.state(0)[0], 0.5, 1e-9);
  EXPECT_NEAR(sol.state(0)[1], 1.0, 1e-9);
}

TEST(Events, ResidualJacobianAcrossABounce) {
  // The calibration's residual Jacobian (forward tangents through the
  // jump): Sᵀ r equals the discrete adjoint gradient of ½ Σ w r².
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
  const ode::WeightedObservations obs = bounce_observations();
  const ode::IntegratorOptions o = adaptive_options(ode::Method::Dopri5, 1e-10);
  const ode::GradientResult g = ode::gradient(problem, obs, ode::DiscreteAdjoint{}, o);
  ASSERT_EQ(g.steps.events().size(), 1u);
  const ode::ResidualSensitivities S = ode::sensitivity_matrix(problem, obs, o, g.steps);
  ASSERT_EQ(S.residuals.size(), 6u);
  // Both are exact derivatives of one discrete map: round-off apart.
  constexpr double kTol = 1e-10;
  for (std::size_t c = 0; c < S.n_columns; ++c) {
    double str = 0.0;
    for (std::size_t r = 0; r < S.residuals.size(); ++r) str += S.at(r, c) * S.residuals[r];
    const double ref = c < 2 ? g.wrt_parameters[c] : g.wrt_initial_state[c - 2];
    EXPECT_NEAR(str, ref, kTol * (1.0 + std::abs(ref))) << "column " << c;
  }
}

TEST(Events, ZenoIsRefusedWithAClearError) {
  // e = 0.8 from h0 = 1: the bounces accumulate at t ≈ 4.1 (< t1 = 10).
  ode::Problem<Ball> problem{Ball{}, {1.0, 0.0}, {9.81, 0.8}, {0.0, 10.0}};
  try {
    const ode::Solution sol = ode::integrate(problem, adaptive_options(ode::Method::Dopri5, 1e-8));
    FAIL() << "accumulating events must be refused: " << sol.summary.message << " at t = "
           << sol.summary.final_time << " after " << sol.summary.events << " events";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Zeno"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bounce"), std::string::npos) << e.what();
  }
}

/// A root that touches zero at t = 1 without crossing: g = −(t − 1)².
struct Touch : ode::EventDefaults {
  template <class T>
  void rhs(double, std::span<const T>, std::span<const T>, std::span<T> d) const {
    d[0] = T(1.0);
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T t, std::span<const T>, std::span<const T>, std::span<T> g) const {
    g[0] = -(t - 1.0) * (t - 1.0);
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const { return {.name = "touch"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T>, std::span<const T>,
                    std::span<T> v) const {
    v[0] = T(100.0);
  }
  static constexpr std::size_t kTargets[1] = {0};
};

TEST(Events, ATouchFiresOnlyWhereAStepEndsOnIt) {
  // Defined behaviour: a root is on side +1 where g ≥ 0, so a touch fires
  // exactly when a step ends on it (the fixed steps' grid holds t = 1: the
  // trigger g ≥ 0 is true there, as SBML's ≥ says); a touch between step
  // ends (the adaptive steps) changes no side and does not fire.
  ode::Problem<Touch> problem{Touch{}, {0.0}, {}, {0.0, 2.0}};
  problem.output_times = {2.0};
  for (const Setting& s : settings()) {
    const ode::Solution sol = ode::integrate(problem, s.options);
    ASSERT_TRUE(sol.summary.success()) << s.name << ": " << sol.summary.message;
    if (s.options.fixed_step()) {
      EXPECT_EQ(sol.summary.events, 1) << s.name;
      EXPECT_NEAR(sol.state(0)[0], 101.0, 1e-9) << s.name;
      // The touch's time is not differentiable (ġ = 0): refused by name.
      try {
        (void)ode::gradient(problem, FirstStateAtEnd{}, ode::Forward{}, s.options);
        ADD_FAILURE() << s.name << ": a tangential root must refuse derivatives";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("transversally"), std::string::npos) << e.what();
      }
    } else {
      EXPECT_EQ(sol.summary.events, 0) << s.name;
      EXPECT_NEAR(sol.state(0)[0], 2.0, 1e-9) << s.name;
    }
  }
}

TEST(Events, EventsAtT0AndAtT1) {
  // initialValue = false and τ = t0: the dose is given at t0 (its trigger
  // holds there); τ = t1: at the last step's end, which the terminal sees.
  const double k = 0.7, y0 = 2.0, D = 0.5, T = 3.0;
  Dose fires_at_t0;
  fires_at_t0.fires_at_t0 = true;
  ode::Problem<Dose> at_t0{fires_at_t0, {y0}, {k, 0.0, D}, {0.0, T}};
  ode::Problem<Dose> at_t1{Dose{}, {y0}, {k, T, D}, {0.0, T}};
  for (const Setting& s : settings()) {
    const ode::GradientResult a =
        ode::gradient(at_t0, FirstStateAtEnd{}, ode::DiscreteAdjoint{}, s.options);
    ASSERT_EQ(a.steps.events().size(), 1u) << s.name;
    EXPECT_EQ(a.steps.events()[0].at, 0u) << s.name;
    EXPECT_NEAR(a.objective, (y0 + D) * std::exp(-k * T), s.closed_tol) << s.name;
    // dJ/dD = e^{−kT}: the jump at t0 transposed.
    EXPECT_NEAR(a.wrt_parameters[2], std::exp(-k * T), s.closed_tol) << s.name;
    const ode::GradientResult b =
        ode::gradient(at_t1, FirstStateAtEnd{}, ode::Forward{}, s.options);
    ASSERT_EQ(b.steps.events().size(), 1u) << s.name;
    EXPECT_EQ(b.steps.events()[0].at, b.steps.steps()) << s.name;
    EXPECT_NEAR(b.objective, y0 * std::exp(-k * T) + D, s.closed_tol) << s.name;
    EXPECT_NEAR(b.wrt_parameters[2], 1.0, s.closed_tol) << s.name;
  }
  // CVODES' adjoint: the instant at t0 before its first stretch, the one at
  // t1 before its last (rtol 1e-10; 1e-6 as CvodesAdjointCrossesEvents).
  for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    const ode::IntegratorOptions o = adaptive_options(m, 1e-10);
    const ode::GradientResult a = ode::gradient(at_t0, FirstStateAtEnd{}, ode::CvodesAdjoint{}, o);
    EXPECT_EQ(a.summary.events, 1) << ode::to_string(m);
    EXPECT_NEAR(a.objective, (y0 + D) * std::exp(-k * T), 1e-6) << ode::to_string(m);
    EXPECT_NEAR(a.wrt_parameters[2], std::exp(-k * T), 1e-6) << ode::to_string(m);
    EXPECT_NEAR(a.wrt_initial_state[0], std::exp(-k * T), 1e-6) << ode::to_string(m);
    const ode::GradientResult b = ode::gradient(at_t1, FirstStateAtEnd{}, ode::CvodesAdjoint{}, o);
    EXPECT_EQ(b.summary.events, 1) << ode::to_string(m);
    EXPECT_NEAR(b.objective, y0 * std::exp(-k * T) + D, 1e-6) << ode::to_string(m);
    EXPECT_NEAR(b.wrt_parameters[2], 1.0, 1e-6) << ode::to_string(m);
    EXPECT_NEAR(b.wrt_initial_state[0], std::exp(-k * T), 1e-6) << ode::to_string(m);
  }
}

TEST(Events, HessianVectorAtT0AndAtT1) {
  // The doses of EventsAtT0AndAtT1. At t0 (the initial-value rule: the
  // instant does not move with τ) J = (y0 + D) e^{−kT}; at t1 (τ = T, the
  // last step's end) J = y0 e^{−kT} + D e^{−k(T−τ)}, τ moving: the whole
  // closed form. u = (y0, k, τ, D); H against each, for every stepper.
  const double k = 0.7, y0 = 2.0, D = 0.5, T = 3.0;
  Dose fires_at_t0;
  fires_at_t0.fires_at_t0 = true;
  ode::Problem<Dose> at_t0{fires_at_t0, {y0}, {k, 0.0, D}, {0.0, T}};
  ode::Problem<Dose> at_t1{Dose{}, {y0}, {k, T, D}, {0.0, T}};
  const double e = std::exp(-k * T);
  // ∂²/∂u² of (y0 + D) e^{−kT} (no τ entries).
  const std::vector<double> h0 = {0.0,    -T * e,               0.0, 0.0,     //
                                  -T * e, T * T * (y0 + D) * e, 0.0, -T * e,  //
                                  0.0,    0.0,                  0.0, 0.0,     //
                                  0.0,    -T * e,               0.0, 0.0};
  const std::vector<double> h1 = closed_hessian(
      [](const auto* u, double t1) { return dose_closed(u, t1); }, {y0, k, T, D}, T);
  for (const Setting& s : settings()) {
    for (std::size_t col = 0; col < 4; ++col) {
      const std::vector<double> c0 = hv_column(at_t0, col, s.options);
      const std::vector<double> c1 = hv_column(at_t1, col, s.options);
      for (std::size_t i = 0; i < 4; ++i) {
        // The steppers' error, relative to the largest entry (as the gradient).
        EXPECT_NEAR(c0[i], h0[i * 4 + col], s.closed_tol * T * T * (y0 + D) * e)
            << s.name << " at t0: H(" << i << ", " << col << ")";
        EXPECT_NEAR(c1[i], h1[i * 4 + col], s.closed_tol * T * T * y0 * e)
            << s.name << " at t1: H(" << i << ", " << col << ")";
      }
    }
  }
}

TEST(Events, CvodesRunsLocateByTheirOwnRootFinding) {
  // cvodes_bdf and cvodes_adams: CVODES' root finding, the instants
  // executed by the same rules; states against the closed forms (rtol
  // 1e-10: CVODES' global error ~1e-8 over these spans).
  for (ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    ode::IntegratorOptions o = adaptive_options(m, 1e-10);
    ode::Problem<Ball> ball{Ball{}, {1.0, 0.3}, {9.81, 0.8}, {0.0, 0.6}};
    const double u[4] = {1.0, 0.3, 9.81, 0.8};
    const ode::Solution a = ode::integrate(ball, o);
    ASSERT_TRUE(a.summary.success()) << a.summary.message;
    EXPECT_EQ(a.summary.events, 1) << ode::to_string(m);
    EXPECT_NEAR(a.state(a.n_outputs() - 1)[0], ball_closed(u, 0.6), 1e-7) << ode::to_string(m);
    ode::Problem<Reset> reset{Reset{}, {1.0}, {0.9, 2.0, 0.5}, {0.0, 1.0}};
    const double v[4] = {1.0, 0.9, 2.0, 0.5};
    const ode::Solution b = ode::integrate(reset, o);
    ASSERT_TRUE(b.summary.success()) << b.summary.message;
    EXPECT_EQ(b.summary.events, 1) << ode::to_string(m);
    EXPECT_NEAR(b.state(b.n_outputs() - 1)[0], reset_closed(v, 1.0), 1e-7) << ode::to_string(m);
  }
}

}  // namespace
