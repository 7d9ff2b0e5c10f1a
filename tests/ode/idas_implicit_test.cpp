// Fully implicit index-1 DAEs F(t, y, y', p) = 0 (ode::ResidualForm,
// residual_dae.hpp) through the SUNDIALS IDAS backend (issue 32): IDAS
// integrates the residual F itself (Newton matrix F_y + c F_{y'} from the
// System's AD), makes (y0, y'0) consistent by IDACalcIC, and differentiates
// by forward sensitivities (IDASensInit) and by its adjoint on (λ, ν =
// F_{y'}ᵀλ). Checked against the closed form, the native bdf on the same
// residual, IDAS on the semi-explicit form of the same DAE, and central
// differences; the consistent initial point against F(t0, y0, y'0) = 0.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/idas.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/residual_dae.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "support/dae_models.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::max_rel_err;
using costate::test::rel_err;
using namespace costate::test::dae;

/// IDAS at rtol 1e-10 (atol 1e-12) against the exact solution and gradient
/// of ImplicitClosedForm: the global error of a BDF run is ~10–100 rtol, and
/// the running cost's quadrature and the sensitivities (or the adjoint's
/// backward problem at the same tolerances) add their own: 1e-7.
constexpr double kClosedFormRelTol = 1e-7;
/// The consistent initial point: IDACalcIC's Newton stops when its update
/// is below 0.0033 of the weighted norm's unit (IDAS' epsiccon), i.e.
/// ~1e-3 · (rtol |y| + atol) — at rtol 1e-10 below 1e-12 relative; the
/// residual F there is of the same order times F's scale (O(1)).
constexpr double kConsistentRelTol = 1e-11;
/// Two solvers (IDAS, native bdf) or two forms (residual, semi-explicit) of
/// one exact solution and gradient at rtol 1e-10: each ~10–100 rtol off the
/// exact values, 1e-6 is their agreement with a margin.
constexpr double kSameSolutionRelTol = 1e-6;
/// IDAS' forward sensitivities against central differences of its own
/// objective: the objective changes by O(rtol) with the steps, so at rtol
/// 1e-11 and h = 1e-4 the difference quotient carries ~rtol/h = 1e-7 of
/// noise plus O(h²) = 1e-8 truncation; 1e-5 leaves a margin over both.
constexpr double kCentralDifferenceRelTol = 1e-5;

Problem<ResidualForm<ImplicitClosedForm>> implicit_closed_form(double x0, double p0, double p1,
                                                                double T) {
  // y' guessed far from consistent (x' = −p0 x0) and z far from p1 x0².
  return {{ImplicitClosedForm{}, 2}, {x0, 7.0, 0.0, 0.0}, {p0, p1}, {0.0, T}};
}
Problem<ResidualForm<ImplicitCoupled>> implicit_coupled() {
  return {{ImplicitCoupled{}, 3}, {0.8, 1.2, 0.0, 0.0, 0.0, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
}
const IntegratorOptions kIdas{.method = Method::Idas, .rtol = 1e-10, .atol = 1e-12};

/// F(t, y, y', p) at a state (y, y') of the ResidualForm.
template <class M>
std::vector<double> residual_at(const M& model, std::size_t n, double t,
                                std::span<const double> state, std::span<const double> p) {
  std::vector<double> F(n);
  model.template residual<double>(t, state.first(n), state.subspan(n, n), p, F);
  return F;
}

TEST(IdasImplicit, ConsistentInitialValuesSolveTheResidualWithTheDifferentialPartFixed) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  auto pr = implicit_closed_form(x0, p0, p1, T);
  pr.output_times = {0.0, T};
  const Solution s = integrate(pr, kIdas);
  ASSERT_TRUE(s.summary.success()) << s.summary.message;
  EXPECT_EQ(s.state(0)[0], x0);  // y_d is data: kept bit for bit
  EXPECT_LT(rel_err(s.state(0)[1], p1 * x0 * x0), kConsistentRelTol);  // z0 (algebraic)
  EXPECT_LT(rel_err(s.state(0)[2], -p0 * x0), kConsistentRelTol);      // x'(0)
  // F(t0, y0, y'0) = 0 after IDACalcIC (it was 6.6 and 10.6 at the guess).
  const std::vector<double> before = residual_at(pr.model.model, 2, 0.0, pr.y0, pr.p);
  EXPECT_GT(std::abs(before[0]) + std::abs(before[1]), 1.0);
  for (double F : residual_at(pr.model.model, 2, 0.0, s.state(0), pr.p))
    EXPECT_LT(std::abs(F), kConsistentRelTol * 10.0);
  EXPECT_NE(s.summary.message.find("made the initial values consistent"),
            std::string::npos)
      << s.summary.message;
}

TEST(IdasImplicit, ClosedFormSolutionIsReproduced) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  auto pr = implicit_closed_form(x0, p0, p1, T);
  pr.output_times = {1.0, 2.0, T};
  for (bool land : {false, true}) {
    IntegratorOptions o = kIdas;
    o.stop_at_outputs = land;
    const Solution s = integrate(pr, o);
    ASSERT_TRUE(s.summary.success()) << s.summary.message;
    ASSERT_EQ(s.n_outputs(), 3u);
    ASSERT_EQ(s.n_states, 4u);  // (y, y')
    for (std::size_t j = 0; j < s.n_outputs(); ++j) {
      const double x = x0 * std::exp(-p0 * s.t[j]);
      EXPECT_LT(rel_err(s.state(j)[0], x), kClosedFormRelTol) << "t = " << s.t[j];
      EXPECT_LT(rel_err(s.state(j)[1], p1 * x * x), kClosedFormRelTol) << "t = " << s.t[j];
      // x' from IDAS' interpolant (landing: its corrector's value).
      EXPECT_LT(rel_err(s.state(j)[2], -p0 * x), 10.0 * kClosedFormRelTol) << "t = " << s.t[j];
    }
  }
}

TEST(IdasImplicit, ClosedFormGradientIsReproducedByIdasForwardAndAdjoint) {
  const double x0 = 1.5, p0 = 0.7, p1 = 2.0, T = 3.0;
  const auto pr = implicit_closed_form(x0, p0, p1, T);
  const auto [J, dJ_dp0, dJ_dp1, dJ_dx0] = closed_form_gradient(x0, p0, p1, T);
  for (const SensitivityMethod& m : {SensitivityMethod{IdasForward{}}, SensitivityMethod{IdasAdjoint{}}}) {
    const GradientResult g = gradient(pr, AlgebraicCost{}, m, kIdas);
    const std::string what = g.method;
    ASSERT_EQ(g.wrt_initial_state.size(), 4u) << what;
    EXPECT_LT(rel_err(g.objective, J), kClosedFormRelTol) << what;
    EXPECT_LT(rel_err(g.wrt_parameters[0], dJ_dp0), kClosedFormRelTol) << what;
    EXPECT_LT(rel_err(g.wrt_parameters[1], dJ_dp1), kClosedFormRelTol) << what;
    EXPECT_LT(rel_err(g.wrt_initial_state[0], dJ_dx0), kClosedFormRelTol) << what;
    // z0, x'(0) and z'(0) are guesses: not data.
    for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(g.wrt_initial_state[i], 0.0) << what << " " << i;
  }
}

TEST(IdasImplicit, EveryTermAgreesWithNativeBdfAndWithTheSemiExplicitFormThroughIdas) {
  // Observations (one at t0), z(t1) and ∫ x0 z dt on the coupled DAE: IDAS
  // forward and adjoint on the residual F = T(y) r, native bdf's discrete
  // adjoint on the same residual, and IDAS' adjoint on the semi-explicit
  // CoupledDae (r = 0): one exact gradient.
  const auto pr = implicit_coupled();
  const Problem<CoupledDae> semi{CoupledDae{}, {0.8, 1.2, 0.0}, {0.9, 0.6, 0.5}, {0.0, 3.0}};
  const GradientResult f = gradient(pr, coupled_terms(), IdasForward{}, kIdas);
  const GradientResult a = gradient(pr, coupled_terms(), IdasAdjoint{}, kIdas);
  const GradientResult nb = gradient(pr, coupled_terms(), DiscreteAdjoint{},
                                     {.method = Method::Bdf, .rtol = 1e-10, .atol = 1e-12});
  const GradientResult s = gradient(semi, coupled_terms(), IdasAdjoint{}, kIdas);
  for (const GradientResult* g : {&f, &a, &nb}) {
    const std::string what = g->method;
    ASSERT_EQ(g->wrt_initial_state.size(), 6u) << what;
    EXPECT_LT(rel_err(g->objective, s.objective), kSameSolutionRelTol) << what;
    EXPECT_LT(max_rel_err(g->wrt_parameters, s.wrt_parameters), kSameSolutionRelTol) << what;
    for (std::size_t i = 0; i < 2; ++i)
      EXPECT_LT(rel_err(g->wrt_initial_state[i], s.wrt_initial_state[i]), kSameSolutionRelTol)
          << what << " y0_" << i;
    for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(g->wrt_initial_state[i], 0.0) << what << " " << i;
  }
  EXPECT_LT(max_rel_err(a.wrt_parameters, f.wrt_parameters), kSameSolutionRelTol);
  EXPECT_NE(a.summary.message.find("backward pass"), std::string::npos) << a.summary.message;
}

TEST(IdasImplicit, GradientMatchesCentralDifferencesOfIdasItself) {
  auto pr = implicit_coupled();
  const IntegratorOptions o{.method = Method::Idas, .rtol = 1e-11, .atol = 1e-13};
  const GradientResult g = gradient(pr, coupled_terms(), IdasForward{}, o);
  const GradientResult a = gradient(pr, coupled_terms(), IdasAdjoint{}, o);
  const std::size_t np = pr.p.size();
  auto J = [&](std::size_t which, double delta) {
    auto q = pr;
    if (which < np)
      q.p[which] += delta;
    else
      q.y0[which - np] += delta;
    return gradient(q, coupled_terms(), IdasForward{}, o).objective;
  };
  const double h = 1e-4;
  // Parameters and the differential y0 (x0, x1); z0 and y'0 are guesses
  // (their differences vanish to IDACalcIC's tolerance).
  for (std::size_t j = 0; j < np + 6; ++j) {
    const double fd = (J(j, h) - J(j, -h)) / (2.0 * h);
    for (const GradientResult* r : {&g, &a}) {
      const double ad = j < np ? r->wrt_parameters[j] : r->wrt_initial_state[j - np];
      EXPECT_LT(std::abs(ad - fd), kCentralDifferenceRelTol * (1.0 + std::abs(fd)))
          << r->method << " direction " << j << ": " << ad << " vs " << fd;
    }
  }
}

/// An implicit ODE with a state-dependent F_{y'} and no algebraic
/// component: F = (1 + y²)(y' + p y), y = y0 e^{−pt}; J = y(T).
struct ImplicitDecay {
  template <class T>
  void residual(double, std::span<const T> y, std::span<const T> yp, std::span<const T> p,
                std::span<T> F) const {
    F[0] = (1.0 + y[0] * y[0]) * (yp[0] + p[0] * y[0]);
  }
};
struct TerminalY {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

TEST(IdasImplicit, AnImplicitOdeWithoutAlgebraicComponentsHasItsDerivativeSolvedAtT0) {
  // y'(t0) is an unknown of every fully implicit model's start, even
  // without algebraic components (guessed 5 here, consistent −p y0).
  const double y0 = 2.0, p = 0.4, T = 2.5;
  const Problem<ResidualForm<ImplicitDecay>> pr{{ImplicitDecay{}, 1}, {y0, 5.0}, {p}, {0.0, T}};
  const double e = std::exp(-p * T);
  for (const SensitivityMethod& m : {SensitivityMethod{IdasForward{}}, SensitivityMethod{IdasAdjoint{}}}) {
    const GradientResult g = gradient(pr, TerminalY{}, m, kIdas);
    EXPECT_LT(rel_err(g.objective, y0 * e), kClosedFormRelTol) << g.method;
    EXPECT_LT(rel_err(g.wrt_parameters[0], -T * y0 * e), kClosedFormRelTol) << g.method;
    EXPECT_LT(rel_err(g.wrt_initial_state[0], e), kClosedFormRelTol) << g.method;
    EXPECT_EQ(g.wrt_initial_state[1], 0.0) << g.method;  // y'(t0): a guess
  }
}

TEST(IdasImplicit, RobertsonInResidualFormReproducesIdasRobertsAsaiDns) {
  // idasRoberts_ASAi_dns' problem written as a user writes it for IDA
  // (F(t, y, y') = 0, y'(t0) guessed 0): G = ∫₀^{4e10} y3 dt at its
  // tolerances, dG/dp = (1.4878e+06, −5.9467, 9.9112e-04) as printed — 5
  // digits (and the forward/adjoint spread at rtol 1e-6, ~1e-4): 5e-4, as
  // idas_test's kPublishedGradientRelTol.
  constexpr double kPublishedGradientRelTol = 5e-4;
  const double published[3] = {1.4878e+06, -5.9467, 9.9112e-04};
  const Problem<ResidualForm<RobertsonResidual>> pr{
      {RobertsonResidual{}, 3}, {1.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 4e10}};
  const IntegratorOptions o{.method = Method::Idas, .rtol = 1e-6, .atol = 1e-8,
                            .atol_per_state = {1e-8, 1e-14, 1e-6, 1e-8, 1e-8, 1e-8}};
  for (const SensitivityMethod& m :
       {SensitivityMethod{IdasForward{}}, SensitivityMethod{IdasAdjoint{.atol = 1e-8}}}) {
    const GradientResult g = gradient(pr, IntegralOfY3{}, m, o);
    ASSERT_EQ(g.wrt_parameters.size(), 3u);
    for (std::size_t j = 0; j < 3; ++j)
      EXPECT_LT(rel_err(g.wrt_parameters[j], published[j]), kPublishedGradientRelTol)
          << g.method << " dG/dp" << j << " = " << g.wrt_parameters[j];
    for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(g.wrt_initial_state[i], 0.0) << g.method << " " << i;
  }
}

TEST(IdasImplicit, TheTableAndTheRefusalsNameWhatIsNotSupported) {
  // IDAS differentiates a ResidualForm to first order; second order is
  // refused by the table, as for every IDAS run.
  EXPECT_TRUE(supports(SensitivityKind::IdasForward, Method::Idas, 1));
  EXPECT_TRUE(supports(SensitivityKind::IdasAdjoint, Method::Idas, 1));
  EXPECT_FALSE(supports(SensitivityKind::IdasAdjoint, Method::Idas, 2));
  // An index-2 residual is refused before IDAS starts, by equation.
  try {
    integrate(Problem<ResidualForm<ImplicitIndexTwo>>{
                  {ImplicitIndexTwo{}, 2}, {1.0, 0.0, 0.0, 0.0}, {1.0}, {0.0, 1.0}},
              kIdas);
    ADD_FAILURE() << "no error for an index-2 residual";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("residual equation(s) 1"), std::string::npos) << e.what();
  }
}

}  // namespace
