// DAEs (issue 32) through the SUNDIALS IDAS backend: Robertson's kinetics
// as a DAE (y1 + y2 + y3 = 1, SUNDIALS' idasRoberts examples) against its
// ODE form and IDAS' published gradient; a closed-form index-1 DAE whose
// gradient is known exactly; the differentiated constraint on the
// sensitivities; consistent initialisation; and the refusals (higher index,
// every other integrator and method).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/idas.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "support/dae_models.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::rel_err;

using namespace costate::test::dae;

const double (&kK)[3] = kRobertsonK;

/// IDAS at tight tolerances against the exact solution and gradient of the
/// closed-form DAE: rtol 1e-12 keeps the global error near 1e-11; 1e-8 is
/// that with room for the quadrature and the sensitivities' own error.
constexpr double kClosedFormRelTol = 1e-8;
/// Robertson's DAE (IDAS) and ODE form (CVODES) at rtol 1e-10 solve the same
/// exact solution (the ODE conserves y1 + y2 + y3 exactly, the DAE imposes
/// it); each has a global error of ~10–100 rtol over the 11 decades of
/// time, so 1e-6 relative is their agreement with a margin of 100.
constexpr double kDaeVsOdeRelTol = 1e-6;
/// The published idasRoberts_ASAi_dns gradient is printed to 5 digits (5e-5
/// relative rounding) and comes from IDAS' adjoint at rtol 1e-6; forward
/// sensitivities at the same tolerances differ from it by ~1e-4 (measured:
/// 1.4e-4, 1.2e-4, 8e-5): 5e-4 relative.
constexpr double kPublishedGradientRelTol = 5e-4;
/// The differentiated constraint holds to IDAS' Newton tolerance on the
/// sensitivities (scaled by their size): 1e-8 at rtol 1e-10.
constexpr double kConstraintTol = 1e-8;

TEST(Idas, RobertsonDaeAgreesWithTheOdeFormAtThePublishedTimes) {
  // idasRoberts_dns prints y at t = 0.4 · 10^k, k = 0 … 11 (to 4e10).
  Problem<RobertsonDae> dae{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  Problem<Robertson> ode{Robertson{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]}, {0.0, 4e10}};
  for (int k = 0; k <= 11; ++k) dae.output_times.push_back(0.4 * std::pow(10.0, k));
  ode.output_times = dae.output_times;
  const Solution a = integrate(
      dae, {.method = Method::Idas, .rtol = 1e-10, .atol_per_state = {1e-14, 1e-20, 1e-12}});
  const Solution b = integrate(
      ode, {.method = Method::CvodesBdf, .rtol = 1e-10, .atol_per_state = {1e-14, 1e-20, 1e-12}});
  ASSERT_TRUE(a.summary.success()) << a.summary.brief_report();
  ASSERT_TRUE(b.summary.success()) << b.summary.brief_report();
  ASSERT_EQ(a.n_outputs(), 12u);
  for (std::size_t j = 0; j < a.n_outputs(); ++j)
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_LT(rel_err(a.state(j)[i], b.state(j)[i]), kDaeVsOdeRelTol)
          << "t = " << a.t[j] << ", y" << i + 1;
  // The published 4 digits at t = 40 (idasRoberts_dns, cvsRoberts_dns):
  // (0.7158, 9.185e-6, 0.2842); 4 digits are 5e-4 relative at worst.
  constexpr double kPublishedRelTol = 5e-4;
  EXPECT_LT(rel_err(a.state(2)[0], 0.7158), kPublishedRelTol);
  EXPECT_LT(rel_err(a.state(2)[1], 9.185e-6), kPublishedRelTol);
  EXPECT_LT(rel_err(a.state(2)[2], 0.2842), kPublishedRelTol);
  // The constraint holds at every output to the Newton tolerance, a
  // fraction of rtol |y| + atol (IDAS' weighted norm): 1e-10.
  constexpr double kConstraintValueTol = 1e-10;
  for (std::size_t j = 0; j < a.n_outputs(); ++j)
    EXPECT_NEAR(a.state(j)[0] + a.state(j)[1] + a.state(j)[2], 1.0, kConstraintValueTol) << a.t[j];
}

TEST(Idas, RobertsonGradientMatchesIdasRobertsAsaiDns) {
  // G = ∫₀^{4e10} y3 dt at IDAS' example tolerances (rtol 1e-6, atol
  // (1e-8, 1e-14, 1e-6), the quadrature's atol 1e-8 … here integrator.atol
  // for z), dG/dp = (1.4878e+06, −5.9467, 9.9112e-04) as printed.
  const Problem<RobertsonDae> pr{RobertsonDae{}, {1.0, 0.0, 0.0}, {kK[0], kK[1], kK[2]},
                                 {0.0, 4e10}};
  const GradientResult g =
      gradient(pr, IntegralOfY3{}, IdasForward{},
               {.method = Method::Idas, .rtol = 1e-6, .atol = 1e-8,
                .atol_per_state = {1e-8, 1e-14, 1e-6}});
  ASSERT_EQ(g.wrt_parameters.size(), 3u);
  EXPECT_LT(rel_err(g.wrt_parameters[0], 1.4878e+06), kPublishedGradientRelTol);
  EXPECT_LT(rel_err(g.wrt_parameters[1], -5.9467), kPublishedGradientRelTol);
  EXPECT_LT(rel_err(g.wrt_parameters[2], 9.9112e-04), kPublishedGradientRelTol);
  // y3(0) is a guess made consistent, not data: its sensitivity is zero.
  EXPECT_EQ(g.wrt_initial_state[2], 0.0);
  // The published numbers are IDAS' adjoint's (backward atol 1e-8 as in the
  // example): ours reproduce them, and agree with the forward ones.
  const GradientResult a =
      gradient(pr, IntegralOfY3{}, IdasAdjoint{.atol = 1e-8},
               {.method = Method::Idas, .rtol = 1e-6, .atol = 1e-8,
                .atol_per_state = {1e-8, 1e-14, 1e-6}});
  EXPECT_LT(rel_err(a.wrt_parameters[0], 1.4878e+06), kPublishedGradientRelTol);
  EXPECT_LT(rel_err(a.wrt_parameters[1], -5.9467), kPublishedGradientRelTol);
  EXPECT_LT(rel_err(a.wrt_parameters[2], 9.9112e-04), kPublishedGradientRelTol);
  EXPECT_EQ(a.wrt_initial_state[2], 0.0);
}

TEST(Idas, AkzoNobelMatchesIdasAkzoNobAsaiDns) {
  // G = ∫₀^180 y1 dt = 31.2642162580310945 and dG/dy0 = (22.207, −62.695,
  // −2.5114, 91.837, 3.5176) at the example's tolerances (rtol 1e-8, atol
  // 1e-10; backward rtol 1e-6, atol 1e-8). G: our quadrature is a state at
  // rtol 1e-8 (the example's at 1e-10), 1e-6 relative; dG/dy0: 5 printed
  // digits and the backward tolerance 1e-6, 5e-4 relative.
  constexpr double kAkzoObjectiveRelTol = 1e-6;
  const Problem<AkzoNobel> pr = akzo_nobel();
  const IntegratorOptions o{.method = Method::Idas, .rtol = 1e-8, .atol = 1e-10};
  const auto& published = kAkzoNobelGradient;
  for (const SensitivityMethod& m : {SensitivityMethod{IdasAdjoint{.rtol = 1e-6, .atol = 1e-8}},
                                     SensitivityMethod{IdasForward{}}}) {
    const GradientResult g = gradient(pr, IntegralOfY1{}, m, o);
    EXPECT_LT(rel_err(g.objective, kAkzoNobelObjective), kAkzoObjectiveRelTol) << g.method;
    for (std::size_t i = 0; i < 5; ++i)
      EXPECT_LT(rel_err(g.wrt_initial_state[i], published[i]), kPublishedGradientRelTol)
          << g.method << ", y0[" << i << "] = " << g.wrt_initial_state[i];
    EXPECT_NEAR(g.wrt_initial_state[5], 0.0, 1e-12) << g.method;  // y6(0) is not data
  }
}

TEST(Idas, AdjointAgreesWithForwardOnEveryKindOfTerm) {
  // Observations of x and z (at t0 too: z0 = p1 x0² is differentiated
  // through the constraint), z(t1) and ∫ x z dt, at tight tolerances: the
  // two continuous derivatives agree to their solvers' errors.
  constexpr double kAdjointVsForwardRelTol = 1e-7;
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {1.5, 4.5}, {0.7, 2.0}, {0.0, 3.0}};
  const IntegratorOptions o{.method = Method::Idas, .rtol = 1e-11, .atol = 1e-13};
  const MixedTerms terms;
  const GradientResult f = gradient(pr, terms, IdasForward{}, o);
  const GradientResult a = gradient(pr, terms, IdasAdjoint{.steps = 20}, o);
  EXPECT_LT(rel_err(a.objective, f.objective), kAdjointVsForwardRelTol);
  for (std::size_t j = 0; j < 2; ++j)
    EXPECT_LT(rel_err(a.wrt_parameters[j], f.wrt_parameters[j]), kAdjointVsForwardRelTol) << j;
  EXPECT_LT(rel_err(a.wrt_initial_state[0], f.wrt_initial_state[0]), kAdjointVsForwardRelTol);
  EXPECT_EQ(a.wrt_initial_state[1], 0.0);
  // The forward direction of z0 is zeroed by IDACalcIC's correction of the
  // sensitivities, in floating point: round-off of the other entries' size.
  EXPECT_LT(std::abs(f.wrt_initial_state[1]), 1e-12 * std::abs(f.wrt_initial_state[0]));
  // And central differences of the objective in p1 (the constraint's
  // parameter; step 1e-5, truncation ~1e-10, the solves' noise ~1e-11/1e-5).
  constexpr double kFiniteDifferenceRelTol = 1e-5;
  auto J = [&](double p1) {
    Problem<ClosedFormDae> q = pr;
    q.p[1] = p1;
    return gradient(q, terms, IdasForward{}, o).objective;
  };
  const double h = 1e-5;
  EXPECT_LT(rel_err(a.wrt_parameters[1], (J(2.0 + h) - J(2.0 - h)) / (2.0 * h)),
            kFiniteDifferenceRelTol);
}

TEST(Idas, ClosedFormDaeSolutionAndGradientAreExact) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {x0, p1 * x0 * x0}, {p0, p1}, {0.0, T}};
  pr.output_times = {0.0, 1.0, 2.0, T};
  const IntegratorOptions o{.method = Method::Idas, .rtol = 1e-12, .atol = 1e-14};
  const Solution s = integrate(pr, o);
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  for (std::size_t j = 0; j < s.n_outputs(); ++j) {
    const double x = x0 * std::exp(-p0 * s.t[j]);
    EXPECT_LT(rel_err(s.state(j)[0], x), kClosedFormRelTol) << s.t[j];
    EXPECT_LT(rel_err(s.state(j)[1], p1 * x * x), kClosedFormRelTol) << s.t[j];
  }
  const auto [J, dJ_dp0, dJ_dp1, dJ_dx0] = closed_form_gradient(x0, p0, p1, T);
  for (const SensitivityMethod& m : {SensitivityMethod{IdasForward{}},
                                     SensitivityMethod{IdasAdjoint{}}}) {
    const GradientResult g = gradient(pr, AlgebraicCost{}, m, o);
    EXPECT_LT(rel_err(g.objective, J), kClosedFormRelTol) << g.method;
    EXPECT_LT(rel_err(g.wrt_parameters[0], dJ_dp0), kClosedFormRelTol) << g.method;
    EXPECT_LT(rel_err(g.wrt_parameters[1], dJ_dp1), kClosedFormRelTol) << g.method;
    EXPECT_LT(rel_err(g.wrt_initial_state[0], dJ_dx0), kClosedFormRelTol) << g.method;
    EXPECT_EQ(g.wrt_initial_state[1], 0.0) << g.method;  // z0 follows x0: not data
  }
}

TEST(Idas, SensitivitiesSatisfyTheDifferentiatedConstraintAtEveryStop) {
  // g_x s_x + g_z s_z + g_p e_j = 0: the algebraic rows of F_y s_j + F_p e_j,
  // by the System's own jvp, at every stop and for every direction.
  const std::vector<double> p{kK[0], kK[1], kK[2]};
  static constexpr costate::ode::detail::NoObjectiveTerms kNone{};
  const RobertsonDae model;
  const System sys = make_system(model, kNone, 3, 3);
  std::vector<double> y{1.0, 0.0, 0.0};
  cvodes::Binding binding(sys, p, Method::Idas, CvodesLinearSolver::Dense, 0.0, y);
  const std::size_t ns = 6;
  std::vector<double> S(3 * ns, 0.0);
  for (std::size_t i = 0; i < 3; ++i) S[(3 + i) * 3 + i] = 1.0;
  std::vector<double> stops;
  for (int k = 0; k <= 8; ++k) stops.push_back(0.4 * std::pow(10.0, k));
  Linearization lin(sys);
  std::size_t checked = 0;
  const cvodes::Stats st = idas::forward_sensitivities(
      {.system = &binding.system(), .algebraic = sys.algebraic()},
      cvodes::settings_from({.rtol = 1e-10, .atol_per_state = {1e-14, 1e-20, 1e-12}}, 3), 0.0,
      y, ns, S, stops, [&](std::size_t, double t, const double* yy, const double* SS) {
        lin.at(t, std::span<const double>(yy, 3), p);
        for (std::size_t d = 0; d < ns; ++d) {
          std::vector<double> q(3, 0.0), out(3);
          if (d < 3) q[d] = 1.0;
          lin.jvp(std::span<const double>(SS + d * 3, 3), q, out);
          const double size = std::abs(SS[d * 3]) + std::abs(SS[d * 3 + 1]) +
                              std::abs(SS[d * 3 + 2]) + 1.0;
          EXPECT_LT(std::abs(out[2]) / size, kConstraintTol) << "t = " << t << ", direction " << d;
          ++checked;
        }
      });
  ASSERT_TRUE(st.success) << st.message;
  EXPECT_EQ(checked, stops.size() * ns);
}

TEST(Idas, InconsistentAlgebraicInitialValuesAreMadeConsistentAndReported) {
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {1.5, 7.0}, {0.7, 2.0}, {0.0, 1.0}};
  const Solution s = integrate(pr, {.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12});
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  // z0 = p1 x0² = 4.5 replaces the guess 7; x0 is kept.
  EXPECT_EQ(s.state(0)[0], 1.5);
  EXPECT_LT(rel_err(s.state(0)[1], 4.5), 1e-12);
  EXPECT_NE(s.summary.message.find("IDACalcIC made the initial values consistent"),
            std::string::npos)
      << s.summary.message;
  EXPECT_NE(s.summary.message.find("state 1 by 2.5"), std::string::npos) << s.summary.message;
  // A consistent start reports nothing.
  pr.y0 = {1.5, 4.5};
  EXPECT_EQ(integrate(pr, {.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12}).summary.message,
            "reached t1");
}

TEST(Idas, AConstraintWithoutASolutionIsNamedWithItsResidual) {
  const Problem<UnsolvableDae> pr{UnsolvableDae{}, {1.0, 0.0}, {}, {0.0, 1.0}};
  try {
    integrate(pr, {.method = Method::Idas});
    FAIL() << "an unsolvable constraint was integrated";
  } catch (const costate::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("could not be made consistent"), std::string::npos) << m;
    // At the given values the residual of equation 1 is e^0 + 1 = 2.
    EXPECT_NE(m.find("algebraic equation 1 (state 1): 2"), std::string::npos) << m;
  }
}

TEST(Idas, AHigherIndexDaeIsRefusedNamingItsAlgebraicEquations) {
  const Problem<IndexTwoDae> pr{IndexTwoDae{}, {1.0, 0.0}, {1.0}, {0.0, 1.0}};
  try {
    integrate(pr, {.method = Method::Idas});
    FAIL() << "an index-2 DAE was integrated";
  } catch (const costate::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("not of index 1"), std::string::npos) << m;
    EXPECT_NE(m.find("algebraic equation(s) 1 "), std::string::npos) << m;
    EXPECT_NE(m.find("g_z"), std::string::npos) << m;
  }
}

TEST(Idas, EveryOtherIntegratorRefusesADaeByName) {
  Problem<ClosedFormDae> pr{ClosedFormDae{}, {1.5, 4.5}, {0.7, 2.0}, {0.0, 1.0}};
  for (Method m : all_methods()) {
    // IDAS and the native implicit schemes integrate DAEs (dae_test).
    if (supports_dae(m, 1)) continue;
    IntegratorOptions o{.method = m, .dt = 0.1};
    try {
      integrate(pr, o);
      ADD_FAILURE() << to_string(m) << " integrated a DAE";
    } catch (const costate::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("has algebraic states (a DAE"), std::string::npos) << msg;
      EXPECT_NE(msg.find("integrator.method = " + to_string(m)), std::string::npos) << msg;
      EXPECT_NE(msg.find("use integrator.method = "), std::string::npos) << msg;
      EXPECT_NE(msg.find("idas"), std::string::npos) << msg;
    }
    // Every sensitivity method the table allows with m refuses it too.
    for (SensitivityKind k : all_sensitivity_kinds()) {
      if (!supports(k, m, 1)) continue;
      SensitivityMethod method;
      switch (k) {
        case SensitivityKind::DiscreteAdjoint: method = DiscreteAdjoint{}; break;
        case SensitivityKind::Forward: method = Forward{}; break;
        case SensitivityKind::ContinuousAdjoint: method = ContinuousAdjoint{}; break;
        case SensitivityKind::CvodesForward: method = CvodesForward{}; break;
        case SensitivityKind::CvodesAdjoint: method = CvodesAdjoint{}; break;
        case SensitivityKind::IdasForward: method = IdasForward{}; break;
        case SensitivityKind::IdasAdjoint: method = IdasAdjoint{}; break;
      }
      EXPECT_THROW(
          {
            try {
              gradient(pr, AlgebraicCost{}, method, o);
            } catch (const costate::Error& e) {
              EXPECT_NE(std::string(e.what()).find("has algebraic states (a DAE"),
                        std::string::npos)
                  << e.what();
              throw;
            }
          },
          costate::Error)
          << to_string(k) << " with " << to_string(m);
    }
  }
  // The table's DAE column: idas and the native implicit schemes.
  for (Method m : all_methods())
    EXPECT_EQ(bool(supports_dae(m, 1)), m == Method::Idas || m == Method::Bdf ||
                                            m == Method::Sdirk3 || m == Method::BackwardEuler ||
                                            m == Method::CrankNicolson);
  for (Method m : all_methods()) EXPECT_TRUE(supports_dae(m, 0));
}

TEST(Idas, IntegratesAnOdeAsCvodesDoes) {
  // M = I: IDAS on an ODE model (no algebraic states) against dopri5 at
  // rtol 1e-13; both global errors are far below 1e-7 over [0, 10].
  Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  pr.output_times = {0.0, 2.5, 5.0, 7.5, 10.0};
  const Solution ref = integrate(pr, {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  const Solution s = integrate(pr, {.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12});
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  constexpr double kNonStiffRelTol = 1e-7;
  for (std::size_t j = 0; j < s.n_outputs(); ++j)
    for (std::size_t i = 0; i < 2; ++i)
      EXPECT_LT(rel_err(s.state(j)[i], ref.state(j)[i]), kNonStiffRelTol) << s.t[j];
}

TEST(Idas, BandAndSparseNewtonMatricesGiveTheDenseAnswer) {
  // bench_dae's method-of-lines DAE with 12 cells (24 states, above
  // automatic's dense limit of 20): u_i couples to u_{i±1} and v_i, v_i to
  // u_i — the structure IDAS' Newton matrix c M − F_y takes in band
  // (bandwidth 12) or KLU form, from the same AD structure CVODES uses
  // (integrator.cvodes_linear_solver).
  constexpr std::size_t cells = 12;
  std::vector<double> y0(2 * cells, 0.0);
  for (std::size_t i = 0; i < cells; ++i)
    y0[i] = 1.0 + 0.5 * std::cos(3.141592653589793 * (static_cast<double>(i) + 0.5) /
                                 static_cast<double>(cells));
  Problem<QuasiSteadyDiffusion> pr{QuasiSteadyDiffusion{.n = cells}, y0, {0.05, 2.0, 1.0}, {0.0, 1.0}};
  pr.output_times = {0.5, 1.0};
  const MolTerminalCost cost{.n = cells};
  IntegratorOptions opt{.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12};
  const Solution ref = integrate(pr, opt);
  ASSERT_TRUE(ref.summary.success()) << ref.summary.brief_report();
  const GradientResult gf = gradient(pr, cost, IdasForward{}, opt);
  const GradientResult ga = gradient(pr, cost, IdasAdjoint{}, opt);
  // The LUs differ in round-off only, but that moves IDAS' error estimates
  // and so its step sequence: the runs are two solutions, each within
  // ~100 rtol of the exact one (measured: states 1.0e-9, dJ/dp 1.5e-8
  // relative): 1e-7.
  constexpr double kLinearSolverRelTol = 1e-7;
  for (CvodesLinearSolver ls :
       {CvodesLinearSolver::Band, CvodesLinearSolver::Sparse, CvodesLinearSolver::Automatic}) {
    SCOPED_TRACE(to_string(ls));
    opt.cvodes_linear_solver = ls;
    const Solution s = integrate(pr, opt);
    ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
    for (std::size_t j = 0; j < s.n_outputs(); ++j)
      for (std::size_t i = 0; i < 2 * cells; ++i)
        EXPECT_LT(rel_err(s.state(j)[i], ref.state(j)[i]), kLinearSolverRelTol) << s.t[j] << " " << i;
    for (const auto& [method, r] : {std::pair<SensitivityMethod, const GradientResult*>{IdasForward{}, &gf},
                                    {IdasAdjoint{}, &ga}}) {
      const GradientResult g = gradient(pr, cost, method, opt);
      EXPECT_LT(rel_err(g.objective, r->objective), kLinearSolverRelTol) << g.method;
      for (std::size_t j = 0; j < 3; ++j)
        EXPECT_LT(rel_err(g.wrt_parameters[j], r->wrt_parameters[j]), kLinearSolverRelTol)
            << g.method << " p" << j;
      for (std::size_t i = 0; i < cells; ++i)
        EXPECT_LT(std::abs(g.wrt_initial_state[i] - r->wrt_initial_state[i]),
                  kLinearSolverRelTol * (1e-3 + std::abs(r->wrt_initial_state[i])))
            << g.method << " u" << i;
    }
  }
}

TEST(Idas, MethodNamesRoundTrip) {
  EXPECT_EQ(to_string(Method::Idas), "idas");
  EXPECT_EQ(method_from_string("idas"), Method::Idas);
  EXPECT_EQ(sensitivity_kind_from_string("idas_forward"), SensitivityKind::IdasForward);
  EXPECT_EQ(sensitivity_kind_from_string("idas_adjoint"), SensitivityKind::IdasAdjoint);
  EXPECT_FALSE(supports(SensitivityKind::DiscreteAdjoint, Method::Idas, 1));
  EXPECT_TRUE(supports(SensitivityKind::IdasForward, Method::Idas, 1));
  EXPECT_FALSE(supports(SensitivityKind::IdasForward, Method::Idas, 2));
}

}  // namespace
