// Native DAE integration (issue 32): semi-explicit index-1 DAEs in the
// implicit schemes (bdf, sdirk3, backward_euler, crank_nicolson) with the
// mass matrix M = diag(I, 0) in their one Newton matrix, consistent initial
// values by a differentiated nonlinear solve, and forward tangents and the
// discrete adjoint through the same steps. Checked against a closed form,
// IDAS and the ODE form of Robertson's kinetics, central differences, each
// other (the two are transposes of one discrete map), the differentiated
// constraint at every step, and every checkpoint schedule (bitwise).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::rel_err;

/// x' = −p0 x,  0 = z − p1 x²: x = x0 e^{−p0 t}, z = p1 x0² e^{−2 p0 t}.
struct ClosedFormDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0];
    f[1] = y[1] - p[1] * y[0] * y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// A nonlinear, coupled index-1 DAE (z enters f and g_z depends on z):
///   x0' = −p0 x0 + z,  x1' = x0 − p1 x1 z,  0 = z³ + z − p2 x0 x1 − 1.
struct CoupledDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0] + 0.3 * y[2];
    f[1] = y[0] - p[1] * y[1] * y[2];
    f[2] = y[2] * y[2] * y[2] + y[2] - p[2] * y[0] * y[1] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {2}; }
};

/// Robertson as a semi-explicit DAE (SUNDIALS' idasRoberts): y3 algebraic.
struct RobertsonDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0] + p[1] * y[1] * y[2];
    f[1] = p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1];
    f[2] = y[0] + y[1] + y[2] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {2}; }
};

/// Index 2: x' = p0 z, 0 = x − 1 (g_z = 0).
struct IndexTwoDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = p[0] * y[1];
    f[1] = y[0] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// x' = −x, 0 = e^z + x: no real z for x > 0.
struct UnsolvableDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T>, std::span<T> f) const {
    using std::exp;
    f[0] = -y[0];
    f[1] = exp(y[1]) + y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// J = z(t1) + ∫ z dt.
struct AlgebraicCost {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[1];
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[1];
  }
};

/// Every kind of term: observations of every state (one at t0, where z0 =
/// z(x0, p) is differentiated through the constraint), the last state at
/// t1, and ∫ x0 z dt.
struct MixedTerms {
  LeastSquares ls;
  std::size_t z = 1;
  std::vector<double> observation_times() const { return ls.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return ls.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[z];
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[0] * y[z];
  }
};

MixedTerms closed_form_terms() {
  return {.ls = {.times = {0.0, 1.0, 2.5}, .data = {1.0, 4.0, 0.6, 0.9, 0.3, 0.2}, .n_states = 2},
          .z = 1};
}
MixedTerms coupled_terms() {
  return {.ls = {.times = {0.0, 0.5, 2.0},
                 .data = {1.0, 0.5, 1.0, 0.9, 0.7, 0.8, 0.4, 1.1, 0.9},
                 .n_states = 3},
          .z = 2};
}

/// G = ∫ y3 dt (idasRoberts_ASAi_dns).
struct IntegralOfY3 {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[2];
  }
};

constexpr double kK[3] = {0.04, 1e4, 3e7};

/// The DAE integrators of the table and settings for each: bdf and sdirk3
/// adaptive, the θ-methods on fixed steps.
std::vector<IntegratorOptions> dae_integrators(double rtol) {
  return {{.method = Method::Bdf, .rtol = rtol, .atol = rtol * 1e-2},
          {.method = Method::Sdirk3, .rtol = rtol, .atol = rtol * 1e-2},
          {.method = Method::BackwardEuler, .dt = 0.01},
          {.method = Method::CrankNicolson, .dt = 0.01}};
}

/// Forward tangents and the discrete adjoint are exact transposes of one
/// discrete map (each step a solve with M − hγJ and its transpose, the
/// initial point z0 = z(x0, p) and its transpose): they agree to round-off
/// of the linear solves and sums, 1e-10 relative.
constexpr double kAdjointVsForwardRelTol = 1e-10;

TEST(Dae, TheTableIntegratesAndDifferentiatesDaesNatively) {
  for (Method m : all_methods()) {
    const bool native_dae = m == Method::Bdf || m == Method::Sdirk3 ||
                            m == Method::BackwardEuler || m == Method::CrankNicolson;
    EXPECT_EQ(bool(supports_dae(m, 1)), native_dae || m == Method::Idas) << to_string(m);
    EXPECT_TRUE(supports_dae(m, 0)) << to_string(m);
    for (SensitivityKind k : all_sensitivity_kinds()) {
      if (!supports(k, m, 1)) continue;
      const bool expect = native_dae ? (k == SensitivityKind::DiscreteAdjoint ||
                                        k == SensitivityKind::Forward)
                                     : m == Method::Idas;
      EXPECT_EQ(bool(supports_dae(k, m, 1, 1)), expect) << to_string(k) << " " << to_string(m);
      EXPECT_EQ(bool(supports_dae(k, m, 1, 0)), true);
    }
    // H·v on a DAE: not yet, by name.
    if (native_dae) {
      const Support s = supports_dae(SensitivityKind::DiscreteAdjoint, m, 2, 1);
      EXPECT_FALSE(s);
      EXPECT_NE(s.message.find("Hessian-vector products"), std::string::npos) << s.message;
    }
  }
}

TEST(Dae, ClosedFormSolutionIsReproducedByEveryDaeIntegrator) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  // z0 = 7 is a guess: the consistent value is p1 x0² = 4.5.
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {x0, 7.0}, {p0, p1}, {0.0, T}};
  pr.output_times = {0.0, 1.0, 2.0, T};
  // Global errors: bdf and sdirk3 at rtol 1e-10 stay below 1e-7; backward
  // Euler at dt 0.01 is first order (error ~ T p0² h / 2 ~ 1e-2 relative),
  // Crank–Nicolson second order (~ p0³ T h² / 12 ~ 1e-5).
  const double tol[4] = {1e-7, 1e-7, 2e-2, 2e-5};
  std::vector<IntegratorOptions> ints = dae_integrators(1e-10);
  for (std::size_t a = 0; a < ints.size(); ++a) {
    // Steps land on the outputs: there the constraint is solved (between
    // steps an interpolant is not on the constraint manifold).
    ints[a].stop_at_outputs = true;
    const Solution s = integrate(pr, ints[a]);
    ASSERT_TRUE(s.summary.success()) << to_string(ints[a].method) << ": " << s.summary.message;
    ASSERT_EQ(s.n_outputs(), 4u);
    EXPECT_EQ(s.state(0)[0], x0);  // the differential value is kept
    for (std::size_t j = 0; j < s.n_outputs(); ++j) {
      const double x = x0 * std::exp(-p0 * s.t[j]);
      EXPECT_LT(rel_err(s.state(j)[0], x), tol[a]) << to_string(ints[a].method) << " t = " << s.t[j];
      EXPECT_LT(rel_err(s.state(j)[1], p1 * x * x), tol[a])
          << to_string(ints[a].method) << " t = " << s.t[j];
      // The constraint itself holds at every output to Newton's tolerance.
      EXPECT_NEAR(s.state(j)[1], p1 * s.state(j)[0] * s.state(j)[0], 1e-9)
          << to_string(ints[a].method) << " t = " << s.t[j];
    }
  }
}

TEST(Dae, ClosedFormGradientIsExactByBothNativeMethods) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {x0, 0.0}, {p0, p1}, {0.0, T}};
  // J = p1 x0² e^{−2p0T} + p1 x0² (1 − e^{−2p0T}) / (2p0).
  const double e = std::exp(-2.0 * p0 * T);
  const double J = p1 * x0 * x0 * (e + (1.0 - e) / (2.0 * p0));
  const double dJ_dp0 =
      p1 * x0 * x0 * (-2.0 * T * e + (2.0 * T * e) / (2.0 * p0) - (1.0 - e) / (2.0 * p0 * p0));
  const double dJ_dp1 = x0 * x0 * (e + (1.0 - e) / (2.0 * p0));
  const double dJ_dx0 = 2.0 * p1 * x0 * (e + (1.0 - e) / (2.0 * p0));
  // The discrete solutions' errors (as above) bound the gradients' too:
  // bdf and sdirk3 at rtol 1e-10: 1e-7; backward Euler (dt 0.01, first
  // order): 3e-2; Crank–Nicolson (second order): 1e-4.
  // (bdf: 3.1e-7 measured since the plan chooses its steps on the model's
  // states alone, without the running cost's z in the error norm: 5e-7.)
  const double tol[4] = {5e-7, 1e-7, 3e-2, 1e-4};
  const std::vector<IntegratorOptions> ints = dae_integrators(1e-10);
  for (std::size_t a = 0; a < ints.size(); ++a)
    for (const SensitivityMethod& m :
         {SensitivityMethod{DiscreteAdjoint{}}, SensitivityMethod{Forward{}}}) {
      const GradientResult g = gradient(pr, AlgebraicCost{}, m, ints[a]);
      const std::string what = to_string(ints[a].method) + " " + g.method;
      EXPECT_LT(rel_err(g.objective, J), tol[a]) << what;
      EXPECT_LT(rel_err(g.wrt_parameters[0], dJ_dp0), tol[a]) << what;
      EXPECT_LT(rel_err(g.wrt_parameters[1], dJ_dp1), tol[a]) << what;
      EXPECT_LT(rel_err(g.wrt_initial_state[0], dJ_dx0), tol[a]) << what;
      EXPECT_EQ(g.wrt_initial_state[1], 0.0) << what;  // z0 follows x0: not data
    }
}

TEST(Dae, ForwardAndDiscreteAdjointAgreeOnEveryDaeIntegratorAndTerm) {
  Problem<ClosedFormDae> a{ClosedFormDae{}, {1.5, 4.5}, {0.7, 2.0}, {0.0, 3.0}};
  Problem<CoupledDae> b{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  for (const IntegratorOptions& o : dae_integrators(1e-8)) {
    {
      const GradientResult adj = gradient(a, closed_form_terms(), DiscreteAdjoint{}, o);
      const GradientResult fwd = gradient(a, closed_form_terms(), Forward{}, o, adj.steps);
      EXPECT_LT(rel_err(adj.objective, fwd.objective), kAdjointVsForwardRelTol)
          << to_string(o.method);
      EXPECT_LT(costate::test::max_rel_err(adj.wrt_parameters, fwd.wrt_parameters),
                kAdjointVsForwardRelTol)
          << to_string(o.method);
      EXPECT_LT(costate::test::max_rel_err(adj.wrt_initial_state, fwd.wrt_initial_state),
                kAdjointVsForwardRelTol)
          << to_string(o.method);
    }
    {
      const GradientResult adj = gradient(b, coupled_terms(), DiscreteAdjoint{}, o);
      const GradientResult fwd = gradient(b, coupled_terms(), Forward{}, o, adj.steps);
      EXPECT_LT(costate::test::max_rel_err(adj.wrt_parameters, fwd.wrt_parameters),
                kAdjointVsForwardRelTol)
          << to_string(o.method);
      EXPECT_LT(costate::test::max_rel_err(adj.wrt_initial_state, fwd.wrt_initial_state),
                kAdjointVsForwardRelTol)
          << to_string(o.method);
      EXPECT_EQ(adj.wrt_initial_state[2], 0.0);
    }
  }
}

TEST(Dae, DiscreteAdjointMatchesCentralDifferencesOfTheReplayedSteps) {
  // The discrete objective on a fixed step plan is smooth in (p, x0):
  // central differences with step 1e-6 (truncation ~1e-12 relative, Newton
  // noise ~1e-14/1e-6 = 1e-8 of the objective's size): 1e-6 relative.
  constexpr double kCentralDifferenceRelTol = 1e-6;
  Problem<CoupledDae> pr{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  for (IntegratorOptions o : dae_integrators(1e-8)) {
    o.newton_tol = 1e-14;
    const GradientResult g = gradient(pr, coupled_terms(), DiscreteAdjoint{}, o);
    auto J = [&](std::size_t which, double delta) {
      Problem<CoupledDae> q = pr;
      if (which < 3)
        q.p[which] += delta;
      else
        q.y0[which - 3] += delta;
      return gradient(q, coupled_terms(), DiscreteAdjoint{}, o, g.steps).objective;
    };
    const double h = 1e-6;
    for (std::size_t j = 0; j < 6; ++j) {
      const double fd = (J(j, h) - J(j, -h)) / (2.0 * h);
      const double ad = j < 3 ? g.wrt_parameters[j] : g.wrt_initial_state[j - 3];
      EXPECT_LT(std::abs(ad - fd), kCentralDifferenceRelTol * (1.0 + std::abs(fd)))
          << to_string(o.method) << " direction " << j << ": " << ad << " vs " << fd;
    }
  }
}

TEST(Dae, ForwardSensitivitiesSatisfyTheDifferentiatedConstraintAtEveryStep) {
  // g_x s_x + g_z s_z + g_p e_j = 0: the algebraic row of F_y s + F_p e_j by
  // the System's own jvp, after every step and for every direction. The
  // steps' tangents solve (M − hγJ) S' = … whose algebraic rows are exactly
  // this equation at the step's end (sdirk3: its last stage, = x_{i+1}):
  // round-off of the solve, 1e-11 of the sensitivities' size.
  constexpr double kConstraintTol = 1e-11;
  const Problem<CoupledDae> pr{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  static constexpr costate::ode::detail::NoObjectiveTerms kNone{};
  for (const IntegratorOptions& o : dae_integrators(1e-8)) {
    // The plan, then an observation at every step time.
    const StepPlan plan = gradient(pr, AlgebraicCost{}, DiscreteAdjoint{}, o).steps;
    const std::vector<double> times(plan.times().begin(), plan.times().end());
    const LeastSquares every{.times = times, .data = std::vector<double>(times.size() * 3, 0.0),
                             .n_states = 3};
    const System sys = make_system(pr.model, every, 3, 3);
    const ReplayedScheme run(sys, pr.y0, pr.p, 0.0, 3.0, o, plan, "test");
    const ObservedTangents t = observed_tangents(sys, run.scheme(), run.steps(), run.x0(), pr.p);
    const System bare = make_system(pr.model, kNone, 3, 3);
    Linearization lin(bare);
    const std::size_t m = 6;
    for (std::size_t k = 0; k < times.size(); ++k) {
      const std::span<const double> y(t.states.data() + k * 3, 3);
      lin.at(times[k], y, pr.p);
      for (std::size_t d = 0; d < m; ++d) {
        std::vector<double> s(3), q(3, 0.0), out(3);
        for (std::size_t i = 0; i < 3; ++i) s[i] = t.tangents[(k * 3 + i) * m + d];
        if (d < 3) q[d] = 1.0;
        lin.jvp(s, q, out);
        const double size = std::abs(s[0]) + std::abs(s[1]) + std::abs(s[2]) + 1.0;
        EXPECT_LT(std::abs(out[2]) / size, kConstraintTol)
            << to_string(o.method) << " t = " << times[k] << ", direction " << d;
      }
    }
  }
}

TEST(Dae, EveryCheckpointScheduleGivesTheSameBits) {
  const Problem<CoupledDae> pr{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  const std::string disk = ::testing::TempDir() + "dae_checkpoints.h5";
  for (const IntegratorOptions& o : dae_integrators(1e-8)) {
    const GradientResult ref = gradient(pr, coupled_terms(), DiscreteAdjoint{}, o);
    for (const Checkpointing& c :
         {Checkpointing{Uniform{4}}, Checkpointing{Binomial{3}}, Checkpointing{Online{3}},
          Checkpointing{Multilevel{.ram = 2, .disk = 2, .path = disk}}}) {
      const GradientResult g =
          gradient(pr, coupled_terms(), DiscreteAdjoint{.checkpointing = c}, o);
      EXPECT_EQ(g.objective, ref.objective) << to_string(o.method) << " " << to_string(c);
      EXPECT_EQ(g.wrt_parameters, ref.wrt_parameters) << to_string(o.method) << " " << to_string(c);
      EXPECT_EQ(g.wrt_initial_state, ref.wrt_initial_state)
          << to_string(o.method) << " " << to_string(c);
    }
  }
  std::remove(disk.c_str());
}

TEST(Dae, RobertsonNativeBdfAgreesWithIdasAndWithTheOdeForm) {
  // idasRoberts_dns's output times 0.4 · 10^k, k = 0 … 11 (to 4e10).
  Problem<RobertsonDae> dae{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  Problem<Robertson> ode{Robertson{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  for (int k = 0; k <= 11; ++k) dae.output_times.push_back(0.4 * std::pow(10.0, k));
  ode.output_times = dae.output_times;
  const std::vector<double> atol{1e-14, 1e-20, 1e-12};
  const Solution nb = integrate(dae, {.method = Method::Bdf, .rtol = 1e-10, .atol_per_state = atol});
  const Solution id = integrate(dae, {.method = Method::Idas, .rtol = 1e-10, .atol_per_state = atol});
  const Solution od = integrate(ode, {.method = Method::Bdf, .rtol = 1e-10, .atol_per_state = atol});
  ASSERT_TRUE(nb.summary.success()) << nb.summary.message;
  ASSERT_TRUE(id.summary.success()) << id.summary.message;
  ASSERT_TRUE(od.summary.success()) << od.summary.message;
  // Three solvers of the same exact solution at rtol 1e-10 over 11 decades
  // (global errors ~10–100 rtol): 1e-6 relative, as idas_test.
  constexpr double kSameSolutionRelTol = 1e-6;
  for (std::size_t j = 0; j < nb.n_outputs(); ++j)
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_LT(rel_err(nb.state(j)[i], id.state(j)[i]), kSameSolutionRelTol)
          << "IDAS, t = " << nb.t[j] << ", y" << i + 1;
      EXPECT_LT(rel_err(nb.state(j)[i], od.state(j)[i]), kSameSolutionRelTol)
          << "ODE form, t = " << nb.t[j] << ", y" << i + 1;
    }
  // The published 4 digits at t = 40: (0.7158, 9.185e-6, 0.2842).
  constexpr double kPublishedRelTol = 5e-4;
  EXPECT_LT(rel_err(nb.state(2)[0], 0.7158), kPublishedRelTol);
  EXPECT_LT(rel_err(nb.state(2)[1], 9.185e-6), kPublishedRelTol);
  EXPECT_LT(rel_err(nb.state(2)[2], 0.2842), kPublishedRelTol);
}

TEST(Dae, RobertsonGradientMatchesIdasRobertsAsaiDnsAndTheOdeForm) {
  // G = ∫₀^{4e10} y3 dt, dG/dp = (1.4878e+06, −5.9467, 9.9112e-04) as
  // idasRoberts_ASAi_dns prints it (IDAS' adjoint at rtol 1e-6). Native bdf
  // at rtol 1e-8 (the discrete gradient of a solution 100× more accurate
  // than the example's): 5 printed digits and the example's own error,
  // 5e-4 relative.
  constexpr double kPublishedGradientRelTol = 5e-4;
  const Problem<RobertsonDae> pr{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]},
                                 {0.0, 4e10}};
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-8,
                            .atol_per_state = {1e-10, 1e-16, 1e-8}};
  const GradientResult g = gradient(pr, IntegralOfY3{}, DiscreteAdjoint{}, o);
  EXPECT_LT(rel_err(g.wrt_parameters[0], 1.4878e+06), kPublishedGradientRelTol);
  EXPECT_LT(rel_err(g.wrt_parameters[1], -5.9467), kPublishedGradientRelTol);
  EXPECT_LT(rel_err(g.wrt_parameters[2], 9.9112e-04), kPublishedGradientRelTol);
  EXPECT_EQ(g.wrt_initial_state[2], 0.0);
  // Forward tangents of the same steps: Robertson's step matrices M − hβJ
  // reach condition numbers ~1e6 at the late steps (h ~ 1e9, J ~ 3e7), so
  // the two transposed orders of the same solves round apart by ~1e-9
  // (measured 1.2e-9): 1e-8.
  constexpr double kStiffAdjointVsForwardRelTol = 1e-8;
  const GradientResult f = gradient(pr, IntegralOfY3{}, Forward{}, o, g.steps);
  EXPECT_LT(costate::test::max_rel_err(g.wrt_parameters, f.wrt_parameters),
            kStiffAdjointVsForwardRelTol);
  // The ODE form at the same tolerances: the same exact gradient, each
  // discrete one within ~10 rtol of it: 1e-6.
  constexpr double kDaeVsOdeRelTol = 1e-6;
  const Problem<Robertson> ode{Robertson{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  const IntegratorOptions tight{.method = Method::Bdf, .rtol = 1e-10,
                                .atol_per_state = {1e-12, 1e-18, 1e-10}};
  const GradientResult gd = gradient(pr, IntegralOfY3{}, DiscreteAdjoint{}, tight);
  const GradientResult go = gradient(ode, IntegralOfY3{}, DiscreteAdjoint{}, tight);
  for (std::size_t j = 0; j < 3; ++j)
    EXPECT_LT(rel_err(gd.wrt_parameters[j], go.wrt_parameters[j]), kDaeVsOdeRelTol) << j;
}

TEST(Dae, RefusalsNameWhatIsNotSupported) {
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {1.5, 4.5}, {0.7, 2.0}, {0.0, 1.0}};
  // Explicit methods have no mass matrix.
  for (Method m : {Method::ExplicitEuler, Method::RK4, Method::Dopri5, Method::CvodesBdf}) {
    try {
      integrate(pr, {.method = m, .dt = 0.1});
      ADD_FAILURE() << to_string(m) << " integrated a DAE";
    } catch (const costate::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("has algebraic states (a DAE"), std::string::npos) << msg;
      EXPECT_NE(msg.find("use integrator.method = backward_euler"), std::string::npos) << msg;
    }
  }
  // The continuous adjoint and H·v are not defined here yet.
  try {
    gradient(pr, AlgebraicCost{}, ContinuousAdjoint{}, {.method = Method::Bdf});
    ADD_FAILURE() << "continuous_adjoint differentiated a DAE";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("continuous_adjoint does not differentiate a DAE"),
              std::string::npos)
        << e.what();
  }
  try {
    hessian_vector(pr, AlgebraicCost{}, {.parameters = {1.0, 0.0}}, DiscreteAdjoint{},
                   {.method = Method::Bdf});
    ADD_FAILURE() << "H·v on a DAE";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Hessian-vector products"), std::string::npos)
        << e.what();
  }
}

TEST(Dae, InitialValuesAreMadeConsistentOrRefusedByName) {
  // A higher-index system: g_z singular, named.
  try {
    integrate(Problem<IndexTwoDae>{IndexTwoDae{}, {1.0, 0.0}, {1.0}, {0.0, 1.0}},
              {.method = Method::Bdf});
    ADD_FAILURE() << "an index-2 DAE was integrated";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not of index 1"), std::string::npos) << e.what();
  }
  // No consistent z0 exists: the constraint and its residual are named
  // (e^0 + 1 = 2 at the given values).
  try {
    integrate(Problem<UnsolvableDae>{UnsolvableDae{}, {1.0, 0.0}, {}, {0.0, 1.0}},
              {.method = Method::Bdf});
    ADD_FAILURE() << "an unsolvable constraint was integrated";
  } catch (const costate::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("could not be made consistent"), std::string::npos) << m;
    EXPECT_NE(m.find("algebraic equation 1 (state 1): 2"), std::string::npos) << m;
  }
  // The gradient does not depend on the guess for z0 (its derivative is 0,
  // and the consistent z0 it converges to is the same to round-off).
  Problem<CoupledDae> a{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  Problem<CoupledDae> b = a;
  b.y0[2] = 2.0;
  const IntegratorOptions o{.method = Method::BackwardEuler, .dt = 0.05};
  const GradientResult ga = gradient(a, coupled_terms(), DiscreteAdjoint{}, o);
  const GradientResult gb = gradient(b, coupled_terms(), DiscreteAdjoint{}, o);
  EXPECT_LT(costate::test::max_rel_err(ga.wrt_parameters, gb.wrt_parameters), 1e-12);
  EXPECT_EQ(gb.wrt_initial_state[2], 0.0);
}

/// The closed-form DAE with a dose: when x falls through θ (p2), x ← x + c
/// (p3); z = p1 x² is re-solved from the constraint after the event.
struct DosedDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0];
    f[1] = y[1] - p[1] * y[0] * y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    g[0] = y[0] - p[2];
  }
  std::size_t n_events() const { return 1; }
  EventAttributes event_attributes(std::size_t) const { return {.name = "dose"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] < 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = y[0] + p[3];
  }
  double event_delay(std::size_t, double, std::span<const double>, std::span<const double>) const {
    return 0.0;
  }
  double event_priority(std::size_t, double, std::span<const double>,
                        std::span<const double>) const {
    return 0.0;
  }
  static constexpr std::size_t kTargets[1] = {0};
};

/// J = z(T) + ∫ z dt of DosedDae in closed form: τ = ln(x0/θ)/p0, before τ
/// z = p1 x0² e^{−2p0 t}, after it p1 (θ + c)² e^{−2p0 (t − τ)}.
double dosed_closed_form(double x0, double p0, double p1, double th, double c, double T) {
  const double tau = std::log(x0 / th) / p0, e = std::exp(-2.0 * p0 * (T - tau));
  const double a = p1 * x0 * x0, b = p1 * (th + c) * (th + c);
  return b * e + a * (1.0 - std::exp(-2.0 * p0 * tau)) / (2.0 * p0) + b * (1.0 - e) / (2.0 * p0);
}

TEST(Dae, EventsReSolveTheAlgebraicStatesAndAreDifferentiated) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, th = 0.6, c = 2.0, T = 3.0;
  Problem<DosedDae> pr{DosedDae{}, {x0, 0.0}, {p0, p1, th, c}, {0.0, T}};
  // The closed form's gradient by central differences of the formula
  // itself (step 1e-6: truncation ~1e-12, round-off ~1e-10 relative).
  const double u[5] = {p0, p1, th, c, x0};
  auto Jc = [&](int k, double d) {
    double v[5] = {u[0], u[1], u[2], u[3], u[4]};
    v[k] += d;
    return dosed_closed_form(v[4], v[0], v[1], v[2], v[3], T);
  };
  std::vector<double> exact(5);
  for (int k = 0; k < 5; ++k) exact[static_cast<std::size_t>(k)] = (Jc(k, 1e-6) - Jc(k, -1e-6)) / 2e-6;
  // bdf at rtol 1e-10: the discrete gradient (the instant located to ulps,
  // its time derivative by the implicit function theorem) within 1e-6 of
  // the exact one, as events_test's bdf rows.
  constexpr double kEventClosedFormRelTol = 1e-6;
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-10, .atol = 1e-12};
  const GradientResult a = gradient(pr, AlgebraicCost{}, DiscreteAdjoint{}, o);
  ASSERT_EQ(a.steps.events().size(), 1u);
  EXPECT_LT(rel_err(a.objective, Jc(0, 0.0)), kEventClosedFormRelTol);
  for (std::size_t k = 0; k < 4; ++k)
    EXPECT_LT(rel_err(a.wrt_parameters[k], exact[k]), kEventClosedFormRelTol) << "p" << k;
  EXPECT_LT(rel_err(a.wrt_initial_state[0], exact[4]), kEventClosedFormRelTol);
  EXPECT_EQ(a.wrt_initial_state[1], 0.0);
  // Forward tangents of the same steps and instant: the transpose.
  for (const IntegratorOptions& oi : {o, IntegratorOptions{.method = Method::BackwardEuler, .dt = 0.01}}) {
    const GradientResult ad = gradient(pr, AlgebraicCost{}, DiscreteAdjoint{}, oi);
    const GradientResult fw = gradient(pr, AlgebraicCost{}, Forward{}, oi, ad.steps);
    EXPECT_LT(costate::test::max_rel_err(ad.wrt_parameters, fw.wrt_parameters),
              kAdjointVsForwardRelTol)
        << to_string(oi.method);
    EXPECT_LT(rel_err(ad.wrt_initial_state[0], fw.wrt_initial_state[0]), kAdjointVsForwardRelTol)
        << to_string(oi.method);
    // Every checkpoint schedule: the same bits.
    const GradientResult b =
        gradient(pr, AlgebraicCost{}, DiscreteAdjoint{.checkpointing = Binomial{3}}, oi);
    EXPECT_EQ(b.wrt_parameters, ad.wrt_parameters) << to_string(oi.method);
  }
  // The run: z jumps with x, on the constraint, right after the instant.
  pr.output_times = {1.0, T};
  const Solution s = integrate(pr, {.method = Method::Bdf, .rtol = 1e-10, .atol = 1e-12,
                                    .stop_at_outputs = true});
  ASSERT_TRUE(s.summary.success()) << s.summary.message;
  const double tau = std::log(x0 / th) / p0;
  const double xT = (th + c) * std::exp(-p0 * (T - tau));
  EXPECT_LT(rel_err(s.state(1)[0], xT), 1e-7);
  EXPECT_LT(rel_err(s.state(1)[1], p1 * xT * xT), 1e-7);
}

}  // namespace
