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
#include <optional>
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
#include "costate/ode/residual_dae.hpp"
#include "support/dae_models.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::rel_err;

using namespace costate::test::dae;
const double (&kK)[3] = kRobertsonK;
/// MixedTerms on ClosedFormDae (its defaults).
MixedTerms closed_form_terms() { return {}; }

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
      // The continuous adjoint DAE where the table has the continuous
      // adjoint at all (sdirk3, bdf; DaeContinuousAdjoint below).
      const bool expect = native_dae ? (k == SensitivityKind::DiscreteAdjoint ||
                                        k == SensitivityKind::Forward ||
                                        k == SensitivityKind::ContinuousAdjoint)
                                     : m == Method::Idas;
      EXPECT_EQ(bool(supports_dae(k, m, 1, 1)), expect) << to_string(k) << " " << to_string(m);
      EXPECT_EQ(bool(supports_dae(k, m, 1, 0)), true);
    }
    // H·v on a DAE: forward over the discrete adjoint on the native
    // integrators (DaeHessian below); every other method by name.
    if (native_dae) {
      EXPECT_TRUE(supports_dae(SensitivityKind::DiscreteAdjoint, m, 2, 1)) << to_string(m);
      const Support s = supports_dae(SensitivityKind::ContinuousAdjoint, m, 2, 1);
      if (supports(SensitivityKind::ContinuousAdjoint, m, 2)) {
        EXPECT_FALSE(s);
        EXPECT_NE(s.message.find("Hessian-vector products"), std::string::npos) << s.message;
      }
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
  const auto [J, dJ_dp0, dJ_dp1, dJ_dx0] = closed_form_gradient(x0, p0, p1, T);
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

/// The discrete adjoint gradient of coupled_terms() on `pr` against central
/// differences of the objective on the same steps, in every parameter and
/// initial value, for every DAE integrator (Newton to `newton_tol`). The
/// discrete objective on a fixed plan is smooth in (p, x0): step 1e-6
/// (truncation ~1e-12 relative, Newton noise ~1e-14/1e-6 = 1e-8 of the
/// objective's size): 1e-6 relative.
template <class M>
void expect_central_differences(const Problem<M>& pr, double newton_tol) {
  constexpr double kCentralDifferenceRelTol = 1e-6;
  const std::size_t np = pr.p.size(), n = pr.y0.size();
  for (IntegratorOptions o : dae_integrators(1e-8)) {
    o.newton_tol = newton_tol;
    const GradientResult g = gradient(pr, coupled_terms(), DiscreteAdjoint{}, o);
    auto J = [&](std::size_t which, double delta) {
      Problem<M> q = pr;
      if (which < np)
        q.p[which] += delta;
      else
        q.y0[which - np] += delta;
      return gradient(q, coupled_terms(), DiscreteAdjoint{}, o, g.steps).objective;
    };
    const double h = 1e-6;
    for (std::size_t j = 0; j < np + n; ++j) {
      const double fd = (J(j, h) - J(j, -h)) / (2.0 * h);
      const double ad = j < np ? g.wrt_parameters[j] : g.wrt_initial_state[j - np];
      EXPECT_LT(std::abs(ad - fd), kCentralDifferenceRelTol * (1.0 + std::abs(fd)))
          << to_string(o.method) << " direction " << j << ": " << ad << " vs " << fd;
    }
  }
}

TEST(Dae, DiscreteAdjointMatchesCentralDifferencesOfTheReplayedSteps) {
  const Problem<CoupledDae> pr{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  expect_central_differences(pr, 1e-14);
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
  // The continuous second-order adjoint is not defined here (nor for ODEs
  // on the native integrators).
  try {
    hessian_vector(pr, AlgebraicCost{}, {.parameters = {1.0, 0.0}}, ContinuousAdjoint{},
                   {.method = Method::Bdf});
    ADD_FAILURE() << "continuous H·v on a DAE";
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



TEST(Dae, LargeSparseDaeReverseStepsBySparseLuAgreeWithForwardTangents) {
  // 40 cells: 80 states with a coloured Jacobian (no quadrature row), so
  // bdf's reverse steps solve (M − hβJ)ᵀ by the sparse LU while its forward
  // tangents use the dense one: two elimination orders of the same
  // matrices, whose condition (hβ D/Δx² up to ~1e2 here) keeps their
  // round-off apart by < 1e-11: 1e-9 relative.
  constexpr double kSparseVsDenseRelTol = 1e-9;
  const std::size_t cells = 40;
  std::vector<double> y0(2 * cells, 0.0);
  for (std::size_t i = 0; i < cells; ++i)
    y0[i] = 1.0 + 0.5 * std::cos(3.14159 * (static_cast<double>(i) + 0.5) / static_cast<double>(cells));
  const Problem<QuasiSteadyDiffusion> pr{QuasiSteadyDiffusion{.n = cells}, y0, {0.05, 2.0, 1.0},
                                         {0.0, 1.0}};
  const MolTerminalCost G{.n = cells};
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-6, .atol = 1e-8};
  const GradientResult a = gradient(pr, G, DiscreteAdjoint{}, o);
  const GradientResult f = gradient(pr, G, Forward{}, o, a.steps);
  EXPECT_LT(costate::test::max_rel_err(a.wrt_parameters, f.wrt_parameters), kSparseVsDenseRelTol);
  EXPECT_LT(costate::test::max_rel_err(a.wrt_initial_state, f.wrt_initial_state), kSparseVsDenseRelTol);
  // And a central difference of D on the same steps (as the coupled DAE's: 1e-6).
  auto J = [&](double d) {
    auto q = pr;
    q.p[0] += d;
    return gradient(q, G, DiscreteAdjoint{}, o, a.steps).objective;
  };
  const double fd = (J(1e-6) - J(-1e-6)) / 2e-6;
  EXPECT_LT(std::abs(a.wrt_parameters[0] - fd), 1e-6 * (1.0 + std::abs(fd)))
      << a.wrt_parameters[0] << " vs " << fd;
}


TEST(Dae, AkzoNobelNativeBdfMatchesIdasAkzoNobAsaiDns) {
  // idasAkzoNob_ASAi_dns: G = ∫₀^180 y1 dt = 31.2642162580310945, dG/dy0 =
  // (22.207, −62.695, −2.5114, 91.837, 3.5176). Native bdf at the example's
  // rtol 1e-8, atol 1e-10: G is a quadrature state in the error test
  // (1e-6 relative, as idas_test); dG/dy0 to the 5 printed digits and the
  // example's backward tolerance 1e-6: 5e-4. The discrete adjoint and the
  // forward tangents of the same steps agree as transposes (1e-8: the
  // stiff step matrices, as Robertson's).
  constexpr double kAkzoObjectiveRelTol = 1e-6;
  constexpr double kPublishedGradientRelTol = 5e-4;
  constexpr double kStiffAdjointVsForwardRelTol = 1e-8;
  const Problem<AkzoNobel> pr = akzo_nobel();
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-8, .atol = 1e-10};
  const auto& published = kAkzoNobelGradient;
  const GradientResult a = gradient(pr, IntegralOfY1{}, DiscreteAdjoint{}, o);
  const GradientResult f = gradient(pr, IntegralOfY1{}, Forward{}, o, a.steps);
  EXPECT_LT(rel_err(a.objective, kAkzoNobelObjective), kAkzoObjectiveRelTol) << a.objective;
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_LT(rel_err(a.wrt_initial_state[i], published[i]), kPublishedGradientRelTol)
        << "y0[" << i << "] = " << a.wrt_initial_state[i];
    EXPECT_LT(rel_err(a.wrt_initial_state[i], f.wrt_initial_state[i]), kStiffAdjointVsForwardRelTol)
        << i;
  }
  EXPECT_EQ(a.wrt_initial_state[5], 0.0);  // y6(0) follows y1, y4: not data
}

// ---------------------------------------------------------------- fully implicit
// F(t, y, y', p) = 0 through ode::ResidualForm (residual_dae.hpp): the state
// is (y, y'), the scheme's algebraic states are y' and its rows F.

/// The ImplicitClosedForm problem: y = (x, z), y' guessed as 0 (made
/// consistent: x' = −p0 x0, z = p1 x0²).
Problem<ResidualForm<ImplicitClosedForm>> implicit_closed_form(double x0, double p0, double p1,
                                                                double T) {
  return {{ImplicitClosedForm{}, 2}, {x0, 7.0, 0.0, 0.0}, {p0, p1}, {0.0, T}};
}
Problem<ResidualForm<ImplicitCoupled>> implicit_coupled() {
  return {{ImplicitCoupled{}, 3}, {0.8, 1.2, 0.0, 0.0, 0.0, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
}

TEST(ImplicitDae, ClosedFormSolutionAndDerivativeAreReproducedByEveryDaeIntegrator) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  auto pr = implicit_closed_form(x0, p0, p1, T);
  pr.output_times = {0.0, 1.0, 2.0, T};
  // As the semi-explicit form (ClosedFormSolutionIsReproducedByEveryDaeIntegrator):
  // bdf and sdirk3 at rtol 1e-10 below 1e-7, backward Euler first order
  // (2e-2), Crank–Nicolson second order (2e-5). x' is the scheme's
  // derivative at the step's end: as accurate as x for bdf and sdirk3
  // (stiffly accurate), for the θ-methods the difference quotient's error.
  const double tol[4] = {1e-7, 1e-7, 2e-2, 2e-5};
  std::vector<IntegratorOptions> ints = dae_integrators(1e-10);
  for (std::size_t a = 0; a < ints.size(); ++a) {
    ints[a].stop_at_outputs = true;
    const Solution s = integrate(pr, ints[a]);
    const std::string what = to_string(ints[a].method);
    ASSERT_TRUE(s.summary.success()) << what << ": " << s.summary.message;
    ASSERT_EQ(s.n_outputs(), 4u);
    EXPECT_EQ(s.state(0)[0], x0) << what;  // the differential value is kept
    // The consistent initial values: z0 = p1 x0², x'(0) = −p0 x0 (to Newton's round-off).
    EXPECT_LT(rel_err(s.state(0)[1], p1 * x0 * x0), 1e-14) << what;
    EXPECT_LT(rel_err(s.state(0)[2], -p0 * x0), 1e-14) << what;
    for (std::size_t j = 1; j < s.n_outputs(); ++j) {
      const double x = x0 * std::exp(-p0 * s.t[j]);
      EXPECT_LT(rel_err(s.state(j)[0], x), tol[a]) << what << " t = " << s.t[j];
      EXPECT_LT(rel_err(s.state(j)[1], p1 * x * x), tol[a]) << what << " t = " << s.t[j];
      EXPECT_LT(rel_err(s.state(j)[2], -p0 * x), 2.0 * tol[a] + 1e-7) << what << " t = " << s.t[j];
      EXPECT_NEAR(s.state(j)[1], p1 * s.state(j)[0] * s.state(j)[0], 1e-9) << what;
    }
  }
}

TEST(ImplicitDae, ClosedFormGradientIsExactByBothNativeMethods) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  const auto pr = implicit_closed_form(x0, p0, p1, T);
  const auto [J, dJ_dp0, dJ_dp1, dJ_dx0] = closed_form_gradient(x0, p0, p1, T);
  // The semi-explicit form's bounds (ClosedFormGradientIsExactByBothNativeMethods).
  const double tol[4] = {1e-7, 1e-7, 3e-2, 1e-4};
  const std::vector<IntegratorOptions> ints = dae_integrators(1e-10);
  for (std::size_t a = 0; a < ints.size(); ++a)
    for (const SensitivityMethod& m :
         {SensitivityMethod{DiscreteAdjoint{}}, SensitivityMethod{Forward{}}}) {
      const GradientResult g = gradient(pr, AlgebraicCost{}, m, ints[a]);
      const std::string what = to_string(ints[a].method) + " " + g.method;
      ASSERT_EQ(g.wrt_initial_state.size(), 4u) << what;
      EXPECT_LT(rel_err(g.objective, J), tol[a]) << what;
      EXPECT_LT(rel_err(g.wrt_parameters[0], dJ_dp0), tol[a]) << what;
      EXPECT_LT(rel_err(g.wrt_parameters[1], dJ_dp1), tol[a]) << what;
      EXPECT_LT(rel_err(g.wrt_initial_state[0], dJ_dx0), tol[a]) << what;
      // z0, x'(0) and z'(0) are guesses: not data.
      for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(g.wrt_initial_state[i], 0.0) << what << " " << i;
    }
}

TEST(ImplicitDae, OnOneStepPlanTheImplicitAndSemiExplicitFormsGiveTheSameGradient) {
  // F = T(y) r: on the same steps every scheme's equations are the
  // semi-explicit ones multiplied by T (ImplicitCoupled's comment), so the
  // two discrete solutions differ only by Newton's residual (newton_tol
  // 1e-13 here: the derivatives w = (y − ψ)/(hβ) carry round-off ε|y|/h,
  // ~1e-14 relative at dt 0.01, so 1e-14 stalls) and their exact discrete gradients by its effect: 1e-8
  // relative. Forward and adjoint on the implicit form are transposes of
  // one map: kAdjointVsForwardRelTol.
  constexpr double kSameDiscreteMapRelTol = 1e-8;
  const Problem<CoupledDae> semi{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  const auto impl = implicit_coupled();
  for (IntegratorOptions o : dae_integrators(1e-8)) {
    o.newton_tol = 1e-13;
    const std::string what = to_string(o.method);
    const GradientResult s = gradient(semi, coupled_terms(), DiscreteAdjoint{}, o);
    const GradientResult a = gradient(impl, coupled_terms(), DiscreteAdjoint{}, o, s.steps);
    const GradientResult f = gradient(impl, coupled_terms(), Forward{}, o, s.steps);
    EXPECT_LT(rel_err(a.objective, s.objective), kSameDiscreteMapRelTol) << what;
    EXPECT_LT(costate::test::max_rel_err(a.wrt_parameters, s.wrt_parameters), kSameDiscreteMapRelTol)
        << what;
    EXPECT_LT(rel_err(a.wrt_initial_state[0], s.wrt_initial_state[0]), kSameDiscreteMapRelTol) << what;
    EXPECT_LT(rel_err(a.wrt_initial_state[1], s.wrt_initial_state[1]), kSameDiscreteMapRelTol) << what;
    for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(a.wrt_initial_state[i], 0.0) << what << " " << i;
    EXPECT_LT(costate::test::max_rel_err(a.wrt_parameters, f.wrt_parameters), kAdjointVsForwardRelTol)
        << what;
    EXPECT_LT(costate::test::max_rel_err(a.wrt_initial_state, f.wrt_initial_state),
              kAdjointVsForwardRelTol)
        << what;
    // Its own adaptive steps (y's algebraic component is in its error test,
    // so the plan differs): the same exact gradient within the discrete
    // solutions' errors at rtol 1e-8 (~1e-7): 1e-5 for the adaptive
    // schemes; the θ-methods' fixed steps are the same plan.
    const GradientResult own = gradient(impl, coupled_terms(), DiscreteAdjoint{}, o);
    EXPECT_LT(costate::test::max_rel_err(own.wrt_parameters, s.wrt_parameters), 1e-5) << what;
  }
}

TEST(ImplicitDae, DiscreteAdjointMatchesCentralDifferencesOfTheReplayedSteps) {
  // Parameters and the 6 entries of (y0, y'0): the last four (z0 and the
  // derivatives) are guesses, whose differences must vanish too. Newton to
  // 1e-13 (OnOneStepPlan…'s reason).
  expect_central_differences(implicit_coupled(), 1e-13);
}

TEST(ImplicitDae, ForwardSensitivitiesSatisfyTheDifferentiatedResidualAtEveryStep) {
  // F_y s + F_{y'} s' + F_p e_j = 0 — the rows n … 2n of the System's jvp
  // on (s, s'), after every step and for every direction: round-off of the
  // step's solve, as the semi-explicit kConstraintTol.
  constexpr double kConstraintTol = 1e-11;
  const auto pr = implicit_coupled();
  static constexpr costate::ode::detail::NoObjectiveTerms kNone{};
  for (const IntegratorOptions& o : dae_integrators(1e-8)) {
    const StepPlan plan = gradient(pr, AlgebraicCost{}, DiscreteAdjoint{}, o).steps;
    const std::vector<double> times(plan.times().begin(), plan.times().end());
    const LeastSquares every{.times = times, .data = std::vector<double>(times.size() * 6, 0.0),
                             .n_states = 6};
    const System sys = make_system(pr.model, every, 6, 3);
    const ReplayedScheme run(sys, pr.y0, pr.p, 0.0, 3.0, o, plan, "test");
    const ObservedTangents t = observed_tangents(sys, run.scheme(), run.steps(), run.x0(), pr.p);
    const System bare = make_system(pr.model, kNone, 6, 3);
    Linearization lin(bare);
    const std::size_t m = 9;  // 3 parameters, 6 initial values
    for (std::size_t k = 0; k < times.size(); ++k) {
      const std::span<const double> y(t.states.data() + k * 6, 6);
      lin.at(times[k], y, pr.p);
      // The state itself is on F = 0 (Newton's tolerance).
      for (std::size_t r = 3; r < 6; ++r) EXPECT_LT(std::abs(lin.value()[r]), 1e-8);
      for (std::size_t d = 0; d < m; ++d) {
        std::vector<double> s(6), q(3, 0.0), out(6);
        double size = 1.0;
        for (std::size_t i = 0; i < 6; ++i) {
          s[i] = t.tangents[(k * 6 + i) * m + d];
          size += std::abs(s[i]);
        }
        if (d < 3) q[d] = 1.0;
        lin.jvp(s, q, out);
        for (std::size_t r = 3; r < 6; ++r)
          EXPECT_LT(std::abs(out[r]) / size, kConstraintTol)
              << to_string(o.method) << " t = " << times[k] << ", direction " << d << ", F" << r - 3;
      }
    }
  }
}

TEST(ImplicitDae, EveryCheckpointScheduleGivesTheSameBits) {
  const auto pr = implicit_coupled();
  for (const IntegratorOptions& o : dae_integrators(1e-8)) {
    const GradientResult ref = gradient(pr, coupled_terms(), DiscreteAdjoint{}, o);
    for (const Checkpointing& c :
         {Checkpointing{Uniform{4}}, Checkpointing{Binomial{3}}, Checkpointing{Online{3}}}) {
      const GradientResult g = gradient(pr, coupled_terms(), DiscreteAdjoint{.checkpointing = c}, o);
      EXPECT_EQ(g.objective, ref.objective) << to_string(o.method) << " " << to_string(c);
      EXPECT_EQ(g.wrt_parameters, ref.wrt_parameters) << to_string(o.method) << " " << to_string(c);
      EXPECT_EQ(g.wrt_initial_state, ref.wrt_initial_state)
          << to_string(o.method) << " " << to_string(c);
    }
  }
}

TEST(ImplicitDae, NativeBdfOnTheResidualAgreesWithIdasOnTheSemiExplicitForm) {
  // IDAS integrates the semi-explicit CoupledDae; native bdf the mixed
  // residual T(y) r = 0 of the same DAE. Two solvers of one exact solution
  // and gradient at rtol 1e-10 (global errors ~10–100 rtol): 1e-6.
  constexpr double kSameSolutionRelTol = 1e-6;
  auto impl = implicit_coupled();
  Problem<CoupledDae> semi{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  impl.output_times = semi.output_times = {0.5, 1.0, 2.0, 3.0};
  const Solution nb = integrate(impl, {.method = Method::Bdf, .rtol = 1e-10, .atol = 1e-12});
  const Solution id = integrate(semi, {.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12});
  ASSERT_TRUE(nb.summary.success()) << nb.summary.message;
  ASSERT_TRUE(id.summary.success()) << id.summary.message;
  ASSERT_EQ(nb.n_outputs(), id.n_outputs());
  for (std::size_t j = 0; j < nb.n_outputs(); ++j)
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_LT(rel_err(nb.state(j)[i], id.state(j)[i]), kSameSolutionRelTol)
          << "t = " << nb.t[j] << ", y" << i;
  const IntegratorOptions tight{.method = Method::Bdf, .rtol = 1e-10, .atol = 1e-12};
  const GradientResult g = gradient(impl, coupled_terms(), DiscreteAdjoint{}, tight);
  const GradientResult gi = gradient(semi, coupled_terms(), IdasAdjoint{},
                                     {.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12});
  EXPECT_LT(costate::test::max_rel_err(g.wrt_parameters, gi.wrt_parameters), kSameSolutionRelTol);
  EXPECT_LT(rel_err(g.wrt_initial_state[0], gi.wrt_initial_state[0]), kSameSolutionRelTol);
  EXPECT_LT(rel_err(g.wrt_initial_state[1], gi.wrt_initial_state[1]), kSameSolutionRelTol);
}

TEST(ImplicitDae, BadModelsAreRefusedByName) {
  auto expect_error = [](auto&& run, const std::vector<std::string>& parts) {
    try {
      run();
      ADD_FAILURE() << "no error; expected " << parts.front();
    } catch (const costate::Error& e) {
      for (const std::string& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  // Index 2: [F_{x'} | F_z] singular; residual equation 1 has no pivot.
  expect_error(
      [] {
        integrate(Problem<ResidualForm<ImplicitIndexTwo>>{
                      {ImplicitIndexTwo{}, 2}, {1.0, 0.0, 0.0, 0.0}, {1.0}, {0.0, 1.0}},
                  {.method = Method::Bdf});
      },
      {"not of index 1", "residual equation(s) 1"});
  // z listed as algebraic but F reads z'.
  expect_error(
      [] {
        integrate(Problem<ResidualForm<ImplicitReadsAlgebraicDerivative>>{
                      {ImplicitReadsAlgebraicDerivative{}, 2}, {1.0, 0.0, 0.0, 0.0}, {1.0}, {0.0, 1.0}},
                  {.method = Method::Bdf});
      },
      {"residual equation 1 depends on y'_1", "algebraic_states()"});
  // The state is (y, y'): 2n values.
  expect_error(
      [] {
        integrate(Problem<ResidualForm<ImplicitClosedForm>>{
                      {ImplicitClosedForm{}, 2}, {1.5, 4.5, 0.0}, {0.7, 2.0}, {0.0, 1.0}},
                  {.method = Method::Bdf});
      },
      {"is not a state"});
  expect_error(
      [] {
        integrate(Problem<ResidualForm<ImplicitClosedForm>>{
                      {ImplicitClosedForm{}, 2}, {1.5, 4.5, 0.0, 0.0, 0.0}, {0.7, 2.0}, {0.0, 1.0}},
                  {.method = Method::Bdf});
      },
      {"must hold 2n = 4 values", "got 5"});
  expect_error(
      [] {
        integrate(Problem<ResidualForm<ImplicitClosedForm>>{
                      {ImplicitClosedForm{}, 0}, {1.5, 4.5}, {0.7, 2.0}, {0.0, 1.0}},
                  {.method = Method::Bdf});
      },
      {"ResidualForm: n (the number of unknowns y) is 0"});
  // The continuous adjoint takes the semi-explicit form only (IDAS takes
  // both: tests/ode/idas_implicit_test.cpp).
  const auto pr = implicit_closed_form(1.5, 0.7, 2.0, 1.0);
  expect_error(
      [&] { gradient(pr, AlgebraicCost{}, ContinuousAdjoint{}, {.method = Method::Bdf}); },
      {"continuous_adjoint does not differentiate a fully implicit DAE"});
}


// ---------------------------------------------------------------- H·v
// Forward over the discrete adjoint on DAEs: the schemes' adjoint_tangent
// with the mass matrix, ẋ0's algebraic part −g_z⁻¹ (g_x ẋ0 + g_p ṗ), and
// the initial point's second-order projection (dae.hpp).

/// H v against central differences of the discrete adjoint gradient on the
/// same steps, and u·Hv = v·Hu. The gradient is smooth in (p, x0) on a
/// fixed plan: step 1e-5 gives truncation ~1e-10 and Newton noise ~1e-14 /
/// 1e-5 relative: 1e-6 relative to the Hessian's size.
constexpr double kHessianCentralDifferenceRelTol = 1e-6;
/// uᵀ(Hv) and vᵀ(Hu) are two sums of one exact symmetric bilinear form over
/// the same discrete map: round-off of the sweeps, 1e-9 relative.
constexpr double kHessianSymmetryRelTol = 1e-9;

template <class M>
void check_hessian(const Problem<M>& pr, const MixedTerms& terms, std::size_t n_data,
                   const IntegratorOptions& o, const std::string& what) {
  const std::size_t np = pr.p.size(), n = pr.y0.size();
  const StepPlan plan = gradient(pr, terms, DiscreteAdjoint{}, o).steps;
  // Directions: a parameter mix and one moving a differential initial value.
  HessianDirection v{.parameters = std::vector<double>(np, 0.0),
                     .initial_state = std::vector<double>(n, 0.0)};
  HessianDirection u = v;
  for (std::size_t j = 0; j < np; ++j) v.parameters[j] = 0.3 + 0.2 * static_cast<double>(j);
  v.initial_state[0] = 0.5;
  u.parameters[np - 1] = 1.0;
  u.initial_state[n_data - 1 == 0 ? 0 : 1] = -0.7;
  const HessianVectorResult hv = hessian_vector(pr, terms, v, DiscreteAdjoint{}, o, plan);
  const HessianVectorResult hu = hessian_vector(pr, terms, u, DiscreteAdjoint{}, o, plan);
  const GradientResult g0 = gradient(pr, terms, DiscreteAdjoint{}, o, plan);
  // The first-order parts are the gradient's.
  EXPECT_LT(costate::test::max_rel_err(hv.gradient_wrt_parameters, g0.wrt_parameters), 1e-12) << what;
  auto shifted = [&](double e) {
    Problem<M> q = pr;
    for (std::size_t j = 0; j < np; ++j) q.p[j] += e * v.parameters[j];
    for (std::size_t i = 0; i < n; ++i) q.y0[i] += e * v.initial_state[i];
    return gradient(q, terms, DiscreteAdjoint{}, o, plan);
  };
  const double h = 1e-5;
  const GradientResult gp = shifted(h), gm = shifted(-h);
  double scale = 0.0;
  for (double x : hv.hv_wrt_parameters) scale = std::max(scale, std::abs(x));
  for (double x : hv.hv_wrt_initial_state) scale = std::max(scale, std::abs(x));
  for (std::size_t j = 0; j < np; ++j) {
    const double fd = (gp.wrt_parameters[j] - gm.wrt_parameters[j]) / (2.0 * h);
    EXPECT_LT(std::abs(hv.hv_wrt_parameters[j] - fd), kHessianCentralDifferenceRelTol * scale)
        << what << " p" << j << ": " << hv.hv_wrt_parameters[j] << " vs " << fd;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const double fd = (gp.wrt_initial_state[i] - gm.wrt_initial_state[i]) / (2.0 * h);
    EXPECT_LT(std::abs(hv.hv_wrt_initial_state[i] - fd), kHessianCentralDifferenceRelTol * scale)
        << what << " y0_" << i << ": " << hv.hv_wrt_initial_state[i] << " vs " << fd;
  }
  // Symmetry: uᵀ H v = vᵀ H u.
  double uhv = 0.0, vhu = 0.0;
  for (std::size_t j = 0; j < np; ++j) {
    uhv += u.parameters[j] * hv.hv_wrt_parameters[j];
    vhu += v.parameters[j] * hu.hv_wrt_parameters[j];
  }
  for (std::size_t i = 0; i < n; ++i) {
    uhv += u.initial_state[i] * hv.hv_wrt_initial_state[i];
    vhu += v.initial_state[i] * hu.hv_wrt_initial_state[i];
  }
  EXPECT_LT(std::abs(uhv - vhu), kHessianSymmetryRelTol * (std::abs(uhv) + scale)) << what << ": "
                                                                                  << uhv << " vs " << vhu;
  // Checkpointing changes no bit.
  const HessianVectorResult hb =
      hessian_vector(pr, terms, v, DiscreteAdjoint{.checkpointing = Binomial{3}}, o, plan);
  EXPECT_EQ(hb.hv_wrt_parameters, hv.hv_wrt_parameters) << what;
  EXPECT_EQ(hb.hv_wrt_initial_state, hv.hv_wrt_initial_state) << what;
}

TEST(DaeHessian, HessianVectorMatchesCentralDifferencesAndIsSymmetricOnEveryDaeIntegrator) {
  const Problem<CoupledDae> semi{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  for (IntegratorOptions o : dae_integrators(1e-8)) {
    o.newton_tol = 1e-13;
    check_hessian(semi, coupled_terms(), 3, o, "semi-explicit " + to_string(o.method));
    check_hessian(implicit_coupled(), coupled_terms(), 3, o, "fully implicit " + to_string(o.method));
  }
}


// ---------------------------------------------------------------- continuous adjoint
// The adjoint DAE of a semi-explicit index-1 DAE (continuous_adjoint.hpp):
//   λ_x' = −f_xᵀ λ_x − g_xᵀ λ_z,  0 = f_zᵀ λ_x + g_zᵀ λ_z,  μ' = −f_pᵀ λ_x − g_pᵀ λ_z,
// the terms' jumps projected on z = z(x, p), integrated backward by the
// forward's stepper (sdirk3, bdf) as a DAE with algebraic λ_z.

TEST(DaeContinuousAdjoint, ClosedFormGradientIsReproducedAndMatchesTheDiscreteAdjoint) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  const Problem<ClosedFormDae> pr{ClosedFormDae{}, {x0, 0.0}, {p0, p1}, {0.0, T}};
  const auto [J, dJ_dp0, dJ_dp1, dJ_dx0] = closed_form_gradient(x0, p0, p1, T);
  // rtol 1e-10 forward and backward: each gradient within ~100 rtol of the
  // exact one: 1e-7. The discrete one on bdf is within 3.1e-7 of it (its
  // steps are chosen on the model's states alone, not on the running cost's
  // z: see ClosedFormGradientIsExactByBothNativeMethods), so the continuous
  // and discrete ones agree within 1e-7 + 3.1e-7 < 5e-7.
  constexpr double kContinuousClosedFormRelTol = 1e-7;
  constexpr double kContinuousVsDiscreteRelTol = 5e-7;
  for (Method m : {Method::Bdf, Method::Sdirk3}) {
    const IntegratorOptions o{.method = m, .rtol = 1e-10, .atol = 1e-12};
    const GradientResult c = gradient(pr, AlgebraicCost{}, ContinuousAdjoint{}, o);
    const GradientResult d = gradient(pr, AlgebraicCost{}, DiscreteAdjoint{}, o);
    const std::string what = to_string(m) + " " + c.method;
    EXPECT_LT(rel_err(c.wrt_parameters[0], dJ_dp0), kContinuousClosedFormRelTol) << what;
    EXPECT_LT(rel_err(c.wrt_parameters[1], dJ_dp1), kContinuousClosedFormRelTol) << what;
    EXPECT_LT(rel_err(c.wrt_initial_state[0], dJ_dx0), kContinuousClosedFormRelTol) << what;
    EXPECT_EQ(c.wrt_initial_state[1], 0.0) << what;
    EXPECT_LT(costate::test::max_rel_err(c.wrt_parameters, d.wrt_parameters),
              kContinuousVsDiscreteRelTol)
        << what;
  }
}

TEST(DaeContinuousAdjoint, CoupledDaeWithEveryTermMatchesTheDiscreteAdjointAsTolerancesTighten) {
  // Observations at t0 (z0 = z(x0, p) projected), inside and a terminal and
  // running cost. The two gradients differ by the discretization errors of
  // the forward and backward runs: at rtol 1e-6 ~1e-5, at rtol 1e-10 below
  // 1e-7 (measured ~1e-9): the agreement must improve and end below 1e-7.
  const Problem<CoupledDae> pr{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  constexpr double kTightAgreementRelTol = 1e-7;
  for (Method m : {Method::Bdf, Method::Sdirk3}) {
    double previous = 1.0;
    for (double rtol : {1e-6, 1e-8, 1e-10}) {
      const IntegratorOptions o{.method = m, .rtol = rtol, .atol = rtol * 1e-2};
      const GradientResult c = gradient(pr, coupled_terms(), ContinuousAdjoint{}, o);
      const GradientResult d = gradient(pr, coupled_terms(), DiscreteAdjoint{}, o);
      const double err = std::max(costate::test::max_rel_err(c.wrt_parameters, d.wrt_parameters),
                                  costate::test::max_rel_err(c.wrt_initial_state, d.wrt_initial_state));
      EXPECT_LT(err, std::max(previous, 1e-12)) << to_string(m) << " rtol " << rtol;
      previous = err;
      EXPECT_EQ(c.wrt_initial_state[2], 0.0);
    }
    EXPECT_LT(previous, kTightAgreementRelTol) << to_string(m);
  }
}

TEST(DaeContinuousAdjoint, StiffRobertsonDaeMatchesTheDiscreteAdjointAndTheOdeForm) {
  // Robertson to t = 40 (as continuous_adjoint_test's ODE form; to 4e10 the
  // backward run's first step at t1 falls below the time's round-off
  // floor: the adjoint's layer there, a limitation shared with the ODE
  // form). G = ∫ y3 dt. At rtol 1e-10 the DAE's continuous and discrete
  // gradients and the ODE form's discrete one are the same exact gradient
  // within their discretization errors (~100 rtol): 1e-6.
  constexpr double kSameGradientRelTol = 1e-6;
  const Problem<RobertsonDae> dae{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 40.0}};
  const Problem<Robertson> ode{Robertson{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 40.0}};
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-10,
                            .atol_per_state = {1e-12, 1e-18, 1e-10}};
  for (Method m : {Method::Bdf, Method::Sdirk3}) {
    IntegratorOptions om = o;
    om.method = m;
    const GradientResult c = gradient(dae, IntegralOfY3{}, ContinuousAdjoint{}, om);
    const GradientResult d = gradient(dae, IntegralOfY3{}, DiscreteAdjoint{}, om);
    const GradientResult od = gradient(ode, IntegralOfY3{}, DiscreteAdjoint{}, o);
    EXPECT_LT(costate::test::max_rel_err(c.wrt_parameters, d.wrt_parameters), kSameGradientRelTol)
        << to_string(m);
    EXPECT_LT(costate::test::max_rel_err(c.wrt_parameters, od.wrt_parameters), kSameGradientRelTol)
        << to_string(m);
    EXPECT_LT(rel_err(c.wrt_initial_state[0], d.wrt_initial_state[0]), kSameGradientRelTol);
  }
}


// ---------------------------------------------------------------- cross-method
// Every (sensitivity method, integrator) the support table says
// differentiates a DAE (supports_dae), on the semi-explicit CoupledDae with
// every kind of term and, where the table's combination takes it, on its
// fully implicit form: each gradient against one reference.

/// The settings of each integrator here: the adaptive ones at rtol 1e-9
/// (global errors ~1e-8), the θ-methods on fixed steps.
IntegratorOptions cross_method_options(Method m) {
  if (m == Method::BackwardEuler) return {.method = m, .dt = 1e-3};
  if (m == Method::CrankNicolson) return {.method = m, .dt = 2e-3};
  return {.method = m, .rtol = 1e-9, .atol = 1e-11};
}
/// Each combination's distance from the exact gradient: the adaptive
/// integrators' ~100 rtol (1e-6, the continuous adjoint's backward run
/// included); Crank–Nicolson second order at dt 2e-3 (~1e-5); backward
/// Euler first order at dt 1e-3 (~1e-3 measured 6e-4): 2e-3.
double cross_method_tolerance(Method m) {
  if (m == Method::BackwardEuler) return 2e-3;
  if (m == Method::CrankNicolson) return 2e-5;
  return 2e-6;
}
std::optional<SensitivityMethod> method_of(SensitivityKind k) {
  switch (k) {
    case SensitivityKind::DiscreteAdjoint: return DiscreteAdjoint{};
    case SensitivityKind::Forward: return Forward{};
    case SensitivityKind::ContinuousAdjoint: return ContinuousAdjoint{};
    case SensitivityKind::IdasForward: return IdasForward{};
    case SensitivityKind::IdasAdjoint: return IdasAdjoint{};
    default: return std::nullopt;  // CVODES: ODEs only (the table refuses DAEs)
  }
}

TEST(DaeCrossMethod, EveryCombinationTheTableAllowsAgreesWithTheReference) {
  const Problem<CoupledDae> semi{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  const auto impl = implicit_coupled();
  // Reference: bdf's discrete adjoint at rtol 1e-12 (~1e-10 of the exact gradient).
  const GradientResult ref = gradient(semi, coupled_terms(), DiscreteAdjoint{},
                                      {.method = Method::Bdf, .rtol = 1e-12, .atol = 1e-14});
  std::size_t ran = 0;
  for (Method m : all_methods())
    for (SensitivityKind k : all_sensitivity_kinds()) {
      const IntegratorOptions o = cross_method_options(m);
      if (!supports_dae(k, m, 1, 1) || !supports(k, o, 1)) continue;
      const std::optional<SensitivityMethod> sm = method_of(k);
      ASSERT_TRUE(sm.has_value()) << "the table allows " << to_string(k) << " on a DAE";
      const std::string what = to_string(k) + " " + to_string(m);
      const GradientResult g = gradient(semi, coupled_terms(), *sm, o);
      EXPECT_LT(costate::test::max_rel_err(g.wrt_parameters, ref.wrt_parameters),
                cross_method_tolerance(m))
          << what;
      EXPECT_LT(costate::test::max_rel_err(g.wrt_initial_state, ref.wrt_initial_state),
                cross_method_tolerance(m))
          << what;
      ++ran;
      // The fully implicit form: the native discrete adjoint and forward,
      // IDAS' forward and adjoint (the continuous adjoint refuses it by
      // name: ImplicitDae tests).
      if (k == SensitivityKind::ContinuousAdjoint) continue;
      const GradientResult gi = gradient(impl, coupled_terms(), *sm, o);
      EXPECT_LT(costate::test::max_rel_err(gi.wrt_parameters, ref.wrt_parameters),
                cross_method_tolerance(m))
          << "fully implicit " << what;
      ++ran;
    }
  // bdf, sdirk3, backward_euler, crank_nicolson × (discrete_adjoint,
  // forward) on both forms, continuous_adjoint on bdf and sdirk3, idas × 2
  // on both forms.
  EXPECT_EQ(ran, 22u);
}

// ------------------------------------------------ the run and the gradient
// `costate run` integrates with ode::integrate; `costate sensitivity`'s
// forward pass replays the steps its plan chose (issue 35: "ok" means the
// gradient's J is the run's). bdf's run reuses its Jacobian over many steps,
// the replay evaluates it afresh at each step's start; both now stop Newton
// at the same test (replay_kappa of the error tolerance), so they compute
// the same roots of the same step equations up to the roots' round-off
// spread, and the step control sees the same errors.

/// J = y1(t1): Robertson's slowest component.
struct TerminalY1 {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

// The run is the plan's integration (BdfStepper::set_replay; issue 35):
// y1(t1) of the run is the gradient's J bit for bit. (With the run's
// modified Newton — Jacobians and LUs reused — they were 2.5e-9 apart on
// the ODE form to 4e7, 1.8e-9 on the DAE form: round-off roots of one badly
// conditioned step equation, compounded over ~500 steps.)

TEST(BdfRunAndGradient, TakeTheSameStepsToTheSameBits) {
  const IntegratorOptions o{.method = Method::Bdf, .rtol = 1e-6,
                            .atol_per_state = {1e-8, 1e-14, 1e-6}};
  auto check = [&](auto problem, const char* what) {
    for (double t1 : {40.0, 4e5, 4e7}) {
      SCOPED_TRACE(std::string(what) + " to t = " + std::to_string(t1));
      problem.tspan = {0.0, t1};
      problem.output_times = {t1};
      const Solution run = integrate(problem, o);
      ASSERT_TRUE(run.summary.success()) << run.summary.message;
      const GradientResult g = gradient(problem, TerminalY1{}, DiscreteAdjoint{}, o);
      // With a running cost the plan is chosen on the model alone, as the run.
      const GradientResult gi = gradient(problem, IntegralOfY3{}, DiscreteAdjoint{}, o);
      const double y1 = run.state(run.n_outputs() - 1)[0];
      std::printf("%s to %g: run %lld steps, gradient %zu; y1 %.17g vs J %.17g (%.2g relative)\n",
                  what, t1, (long long)run.summary.steps, g.steps.steps(), y1, g.objective,
                  rel_err(y1, g.objective));
      EXPECT_EQ(static_cast<std::size_t>(run.summary.steps), g.steps.steps());
      EXPECT_EQ(static_cast<std::size_t>(run.summary.steps), gi.steps.steps());
      EXPECT_EQ(y1, g.objective);
    }
  };
  check(Problem<Robertson>{Robertson{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 1.0}},
        "robertson");
  check(Problem<RobertsonDae>{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 1.0}},
        "robertson dae");
}

TEST(ImplicitDae, RobertsonResidualFromZeroDerivativesByNativeBdfMatchesIdasAndTheSemiExplicitForm) {
  // Robertson as a user writes it for IDA, y'(t0) guessed 0: the consistent
  // (y1', y2', y3) come from the initial solve; bdf's step collapsed to
  // 3e-173 at t = 1e-158 because Newton's stopping test measured the
  // derivatives w = (y − ψ)/(hβ), whose round-off grows as h shrinks (every
  // failure shrank h further). Now the run reaches 4e10 at the IDAS
  // example's tolerances, and at rtol 1e-10 gives the semi-explicit form's
  // and IDAS' solution (three solvers of one exact solution, global errors
  // ~10–100 rtol over 11 decades: 1e-6, as RobertsonNativeBdfAgreesWithIdas).
  constexpr double kSameSolutionRelTol = 1e-6;
  Problem<ResidualForm<RobertsonResidual>> res{
      {RobertsonResidual{}, 3}, {1.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  Problem<RobertsonDae> semi{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  for (int k = 0; k <= 11; k += 2) semi.output_times.push_back(0.4 * std::pow(10.0, k));
  res.output_times = semi.output_times;
  const IntegratorOptions example{.method = Method::Bdf, .rtol = 1e-6,
                                  .atol_per_state = {1e-8, 1e-14, 1e-6, 1e-8, 1e-8, 1e-8}};
  const Solution coarse = integrate(res, example);
  ASSERT_TRUE(coarse.summary.success()) << coarse.summary.message;
  const std::vector<double> atol{1e-14, 1e-20, 1e-12};
  IntegratorOptions tight{.method = Method::Bdf, .rtol = 1e-10, .atol_per_state = atol};
  const Solution se = integrate(semi, tight);
  tight.method = Method::Idas;
  const Solution id = integrate(semi, tight);
  tight.method = Method::Bdf;
  tight.atol_per_state.insert(tight.atol_per_state.end(), {1e-12, 1e-12, 1e-12});
  const Solution nb = integrate(res, tight);
  ASSERT_TRUE(nb.summary.success()) << nb.summary.message;
  ASSERT_TRUE(se.summary.success() && id.summary.success());
  std::printf("residual form from y' = 0: %lld steps at rtol 1e-6, %lld at 1e-10 (semi-explicit %lld)\n",
              (long long)coarse.summary.steps, (long long)nb.summary.steps, (long long)se.summary.steps);
  ASSERT_EQ(nb.n_outputs(), se.n_outputs());
  for (std::size_t j = 0; j < nb.n_outputs(); ++j)
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_LT(rel_err(nb.state(j)[i], se.state(j)[i]), kSameSolutionRelTol)
          << "semi-explicit, t = " << nb.t[j] << ", y" << i + 1;
      EXPECT_LT(rel_err(nb.state(j)[i], id.state(j)[i]), kSameSolutionRelTol)
          << "IDAS, t = " << nb.t[j] << ", y" << i + 1;
    }
  // The gradient of G = ∫ y3 dt: idasRoberts_ASAi_dns' published dG/dp
  // (5 digits and that example's own error: 5e-4, as
  // RobertsonGradientMatchesIdasRobertsAsaiDnsAndTheOdeForm) by the native
  // discrete adjoint on the residual form at rtol 1e-8.
  constexpr double kPublishedGradientRelTol = 5e-4;
  const double published[3] = {1.4878e+06, -5.9467, 9.9112e-04};
  const GradientResult g = gradient(res, IntegralOfY3{}, DiscreteAdjoint{},
                                    {.method = Method::Bdf, .rtol = 1e-8,
                                     .atol_per_state = {1e-10, 1e-16, 1e-8, 1e-10, 1e-10, 1e-10}});
  for (std::size_t j = 0; j < 3; ++j)
    EXPECT_LT(rel_err(g.wrt_parameters[j], published[j]), kPublishedGradientRelTol)
        << "dG/dp" << j << " = " << g.wrt_parameters[j];
}

// ------------------------------------------------------ all-algebraic models
// No differential state (12 SBML Test Suite cases: algebraic rules that
// determine every variable): each step of an implicit scheme is then the
// consistent solve at its end time (M = 0: −hγ g(t_{n+1}, z) = 0), the
// error test has nothing to measure, and the discrete adjoint is the
// implicit function theorem at each step, ż = −g_z⁻¹ g_p.

/// z³ + z = p0 t + p1 (one real root, g_z = 3z² + 1 > 0) and u = p1 z.
struct AllAlgebraic {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = y[0] * y[0] * y[0] + y[0] - p[0] * t - p[1];
    f[1] = y[1] - p[1] * y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {0, 1}; }
};
/// J = z(t1) + u(t1).
struct SumAtEnd {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0] + y[1];
  }
};

TEST(AllAlgebraicDae, EveryDaeIntegratorSolvesAndDifferentiatesTheConstraintsAtEachTime) {
  const double p0 = 0.7, p1 = 0.3, t1 = 2.0;
  Problem<AllAlgebraic> pr{AllAlgebraic{}, {0.0, 0.0}, {p0, p1}, {0.0, t1}};
  pr.output_times = {0.5, 1.0, t1};
  // The closed form: z the real root of z³ + z = c (Newton to round-off),
  // dz/dc = 1/(3z² + 1); J = (1 + p1) z, dJ/dp0 = (1 + p1) t1 dz/dc,
  // dJ/dp1 = z + (1 + p1) dz/dc.
  auto root = [](double c) {
    double z = c;
    for (int i = 0; i < 60; ++i) z -= (z * z * z + z - c) / (3.0 * z * z + 1.0);
    return z;
  };
  // Every time's values are the Newton roots of the same equations (to
  // newton_tol 1e-12 relative, the initial solve's to round-off): 1e-10.
  constexpr double kConstraintRelTol = 1e-10;
  const double z1 = root(p0 * t1 + p1), dz = 1.0 / (3.0 * z1 * z1 + 1.0);
  const double dj[2] = {(1.0 + p1) * t1 * dz, z1 + (1.0 + p1) * dz};
  for (Method m : {Method::Bdf, Method::Sdirk3, Method::BackwardEuler, Method::CrankNicolson,
                   Method::Idas}) {
    SCOPED_TRACE(to_string(m));
    IntegratorOptions o{.method = m, .rtol = 1e-8, .atol = 1e-10};
    if (m == Method::BackwardEuler || m == Method::CrankNicolson) o = {.method = m, .dt = 0.1};
    const Solution s = integrate(pr, o);
    ASSERT_TRUE(s.summary.success()) << s.summary.message;
    ASSERT_EQ(s.n_outputs(), 3u);
    // IDAS: its algebraic unknowns are out of the error test here
    // (idas::Dae::algebraic_unmeasured), so a step is as long as the stop
    // allows and its values are IDAS' Newton iterate, converged to a third
    // of the weighted norm: ~rtol = 1e-8 relative.
    constexpr double kIdasNewtonRelTol = 1e-8;
    const double tol = m == Method::Idas ? kIdasNewtonRelTol : kConstraintRelTol;
    for (std::size_t j = 0; j < 3; ++j) {
      const double z = root(p0 * s.t[j] + p1);
      EXPECT_LT(rel_err(s.state(j)[0], z), tol) << "t = " << s.t[j];
      EXPECT_LT(rel_err(s.state(j)[1], p1 * z), tol) << "t = " << s.t[j];
    }
    std::vector<SensitivityMethod> methods{DiscreteAdjoint{}, Forward{}};
    if (m == Method::Bdf || m == Method::Sdirk3) methods.push_back(ContinuousAdjoint{});
    if (m == Method::Idas) methods = {IdasForward{}, IdasAdjoint{}};
    for (const SensitivityMethod& sm : methods) {
      const GradientResult g = gradient(pr, SumAtEnd{}, sm, o);
      EXPECT_LT(rel_err(g.objective, (1.0 + p1) * z1), kConstraintRelTol) << g.method;
      for (std::size_t j = 0; j < 2; ++j)
        EXPECT_LT(rel_err(g.wrt_parameters[j], dj[j]), kConstraintRelTol) << g.method << " p" << j;
      // z0, u0 are guesses the initial solve replaces: no derivative.
      EXPECT_EQ(g.wrt_initial_state[0], 0.0) << g.method;
      EXPECT_EQ(g.wrt_initial_state[1], 0.0) << g.method;
    }
  }
}

}  // namespace
