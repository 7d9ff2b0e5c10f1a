// State-dependent piecewise as switching functions (sbml::Model: a mode
// state and two events per relation). The model
//     dx/dt = piecewise(−a, x > θ, −b),   x(0) = x0 > θ,
// leaves x = θ at τ = (x0 − θ)/a and then falls at rate b:
//     x(T) = θ − b (T − τ)  (T > τ),
// so for J = ½ x(T)² the gradient is, in closed form,
//     dJ/dθ = x(T) (1 − b/a)        (θ enters only through τ: all jump term)
//     dJ/da = −x(T) b (x0 − θ)/a²,  dJ/db = −x(T) (T − τ),  dJ/dx0 = x(T) b/a.
// The discrete adjoint and forward sensitivities (dopri5, bdf) against it,
// and against central differences of CVODES runs (root finding).
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/sbml/model.hpp"

namespace {

namespace ode = costate::ode;
using costate::sbml::Model;

// dopri5 is exact on the linear pieces and the switch is located to a few
// ulps: the closed form to round-off of the tolerances' scale.
constexpr double kClosedFormTol = 1e-9;
// bdf's local error on linear pieces is round-off too, but its Newton
// iterations stop at newton_tol: 1e-8.
constexpr double kBdfClosedFormTol = 1e-8;
// Central differences with h = 1e-5 of CVODES runs at 1e-12: the pieces are
// linear, so the truncation is 0; round-off 1e-12/h ≈ 1e-7.
constexpr double kDifferenceTol = 1e-6;

std::string relation_model(double x0) {
  const std::string mathml = "<math xmlns=\"http://www.w3.org/1998/Math/MathML\">";
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
         "<model id=\"switch\"><listOfParameters>"
         "<parameter id=\"a\" value=\"1\" constant=\"true\"/>"
         "<parameter id=\"b\" value=\"0.25\" constant=\"true\"/>"
         "<parameter id=\"theta\" value=\"0.5\" constant=\"true\"/>"
         "<parameter id=\"x\" value=\"" + std::to_string(x0) + "\" constant=\"false\"/>"
         "</listOfParameters><listOfRules><rateRule variable=\"x\">" + mathml +
         "<piecewise><piece><apply><minus/><ci>a</ci></apply>"
         "<apply><gt/><ci>x</ci><ci>theta</ci></apply></piece>"
         "<otherwise><apply><minus/><ci>b</ci></apply></otherwise></piecewise>"
         "</math></rateRule></listOfRules></model></sbml>";
}

struct HalfSquare {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(0.5 * y[0] * y[0]);
  }
};

constexpr double kT = 3.0;

/// J = ½ x(T)² (x the first state) and its gradient with respect to the
/// parameters and x0 by the discrete adjoint and forward sensitivities on
/// dopri5 and bdf, against the closed forms given.
void expect_closed_form_gradient(const Model& m, double T, double J,
                                 const std::vector<double>& dJ_dp, double dJ_dx0) {
  const std::vector<double> p = m.parameters;
  ode::Problem<ode::EquationModel> problem{m.equations, m.initial_values(p), p, {0.0, T}, {}};
  for (ode::Method method : {ode::Method::Dopri5, ode::Method::Bdf}) {
    const ode::IntegratorOptions opt{.method = method, .rtol = 1e-12, .atol = 1e-14};
    const double tol = method == ode::Method::Bdf ? kBdfClosedFormTol : kClosedFormTol;
    const ode::GradientResult adj = ode::gradient(problem, HalfSquare{}, ode::DiscreteAdjoint{}, opt);
    const ode::GradientResult fwd = ode::gradient(problem, HalfSquare{}, ode::Forward{}, opt, adj.steps);
    EXPECT_NEAR(adj.objective, J, tol) << ode::to_string(method);
    for (std::size_t j = 0; j < dJ_dp.size(); ++j) {
      EXPECT_NEAR(adj.wrt_parameters[j], dJ_dp[j], tol) << ode::to_string(method) << " " << m.parameter_names[j];
      EXPECT_NEAR(fwd.wrt_parameters[j], dJ_dp[j], tol) << ode::to_string(method) << " " << m.parameter_names[j];
    }
    EXPECT_NEAR(adj.wrt_initial_state[0], dJ_dx0, tol) << ode::to_string(method);
  }
}

TEST(SbmlSwitching, RelationOnTheStateBecomesAModeAndTwoEvents) {
  const Model m = costate::sbml::read_string(relation_model(2.0), "switch.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"x", "switch_1"}));
  EXPECT_EQ(m.state_kinds[1], costate::sbml::StateKind::Mode);
  EXPECT_EQ(m.equations.n_events(), 2u);
  // The mode starts at the relation's value: x0 = 2 > θ → 1; x0 = 0.3 → 0.
  EXPECT_EQ(m.initial_values(m.parameters)[1], 1.0);
  const Model below = costate::sbml::read_string(relation_model(0.3), "below.xml");
  EXPECT_EQ(below.initial_values(below.parameters)[1], 0.0);
}

TEST(SbmlSwitching, SimulationCrossesTheSwitch) {
  for (double x0 : {2.0, 0.3}) {
    const Model m = costate::sbml::read_string(relation_model(x0), "switch.xml");
    const std::vector<double> y0 = m.initial_values(m.parameters);
    ode::Problem<ode::EquationModel> problem{m.equations, y0, m.parameters, {0.0, kT}, {kT}};
    for (ode::Method method : {ode::Method::Dopri5, ode::Method::CvodesBdf}) {
      const ode::Solution sol = ode::integrate(problem, {.method = method, .rtol = 1e-12, .atol = 1e-14});
      ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
      const double tau = (x0 - 0.5) / 1.0;
      const double expected = x0 > 0.5 ? 0.5 - 0.25 * (kT - tau) : x0 - 0.25 * kT;
      EXPECT_NEAR(sol.state(sol.n_outputs() - 1)[0], expected, kBdfClosedFormTol)
          << ode::to_string(method) << ", x0 = " << x0;
    }
  }
}

TEST(SbmlSwitching, ThresholdGradientIsTheJumpTermInClosedForm) {
  const Model m = costate::sbml::read_string(relation_model(2.0), "switch.xml");
  const std::vector<double> p = m.parameters;  // a, b, theta (document order)
  ASSERT_EQ(m.parameter_names, (std::vector<std::string>{"a", "b", "theta"}));
  const double a = p[0], b = p[1], theta = p[2], x0 = 2.0;
  const double tau = (x0 - theta) / a, xT = theta - b * (kT - tau);
  const std::vector<double> exact = {-xT * b * (x0 - theta) / (a * a), -xT * (kT - tau),
                                     xT * (1.0 - b / a)};
  expect_closed_form_gradient(m, kT, 0.5 * xT * xT, exact, xT * b / a);
  // Central differences of CVODES runs, each locating its own switch.
  auto J = [&](const std::vector<double>& q) {
    ode::Problem<ode::EquationModel> pq{m.equations, m.initial_values(q), q, {0.0, kT}, {kT}};
    const ode::Solution sol = ode::integrate(pq, {.method = ode::Method::CvodesBdf, .rtol = 1e-12, .atol = 1e-14});
    const double x = sol.state(sol.n_outputs() - 1)[0];
    return 0.5 * x * x;
  };
  for (std::size_t j = 0; j < 3; ++j) {
    const double h = 1e-5;
    std::vector<double> up = p, down = p;
    up[j] += h;
    down[j] -= h;
    EXPECT_NEAR((J(up) - J(down)) / (2.0 * h), exact[j], kDifferenceTol) << m.parameter_names[j];
  }
}

// A trigger that holds on a window of one quantity, x > 0.18 && x < 0.19
// with dx/dt = 0.4 (open for 0.025 of time), is crossed within one step by
// every adaptive integrator on this linear model; its relations are
// switching functions, so the event still fires, once, at τ = 0.45.
TEST(SbmlSwitching, WindowTriggerCrossedWithinOneStepFires) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
      "<model id=\"window\"><listOfParameters>"
      "<parameter id=\"x\" value=\"0\" constant=\"false\"/>"
      "<parameter id=\"hits\" value=\"0\" constant=\"false\"/>"
      "<parameter id=\"when\" value=\"-1\" constant=\"false\"/>"
      "</listOfParameters><listOfRules><rateRule variable=\"x\">"
      "<math xmlns=\"http://www.w3.org/1998/Math/MathML\"><cn>0.4</cn></math></rateRule>"
      "</listOfRules><listOfEvents><event id=\"E\" useValuesFromTriggerTime=\"true\">"
      "<trigger initialValue=\"false\" persistent=\"true\">"
      "<math xmlns=\"http://www.w3.org/1998/Math/MathML\"><apply><and/>"
      "<apply><gt/><ci>x</ci><cn>0.18</cn></apply><apply><lt/><ci>x</ci><cn>0.19</cn></apply>"
      "</apply></math></trigger><listOfEventAssignments>"
      "<eventAssignment variable=\"hits\"><math xmlns=\"http://www.w3.org/1998/Math/MathML\">"
      "<apply><plus/><ci>hits</ci><cn>1</cn></apply></math></eventAssignment>"
      "<eventAssignment variable=\"when\"><math xmlns=\"http://www.w3.org/1998/Math/MathML\">"
      "<csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/sbml/symbols/time\">time"
      "</csymbol></math></eventAssignment>"
      "</listOfEventAssignments></event></listOfEvents></model></sbml>";
  const Model m = costate::sbml::read_string(xml, "window.xml");
  const long hits = m.state_index("hits"), when = m.state_index("when");
  ASSERT_GE(hits, 0);
  ASSERT_GE(when, 0);
  const std::vector<double> y0 = m.initial_values(m.parameters);
  ode::Problem<ode::EquationModel> problem{m.equations, y0, m.parameters, {0.0, 2.0}, {2.0}};
  for (ode::Method method : {ode::Method::Bdf, ode::Method::Dopri5, ode::Method::CvodesBdf}) {
    const ode::Solution sol = ode::integrate(problem, {.method = method, .rtol = 1e-8, .atol = 1e-10});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
    const auto y = sol.state(sol.n_outputs() - 1);
    EXPECT_EQ(y[static_cast<std::size_t>(hits)], 1.0) << ode::to_string(method);
    // The window opens at x = 0.18: t = 0.45 (located to round-off).
    EXPECT_NEAR(y[static_cast<std::size_t>(when)], 0.45, 1e-12) << ode::to_string(method);
  }
}

TEST(SbmlSwitching, EqualityOnTheStateIsRefusedByName) {
  std::string xml = relation_model(2.0);
  const std::string gt = "<apply><gt/><ci>x</ci><ci>theta</ci></apply>";
  xml.replace(xml.find(gt), gt.size(), "<apply><eq/><ci>x</ci><ci>theta</ci></apply>");
  try {
    (void)costate::sbml::read_string(xml, "eq.xml");
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("eq.xml:2: rate rule for parameter 'x'"), std::string::npos) << what;
    EXPECT_NE(what.find("eq whose operands depend on the state"), std::string::npos) << what;
  }
}

}  // namespace

// floor of the state as a switching function (a mode "floor_N" holding
// ⌊x⌋ and two events): dx/dt = −a ⌊x⌋ from x0 = 2.5 falls at rate 2a until
// x = 2 at τ = (x0 − 2)/(2a), then at rate a, so for T in (τ, τ + 1/a)
//     x(T) = 2 − a (T − τ) = 2 − aT + (x0 − 2)/2,
//     dJ/da = −x(T) T,  dJ/dx0 = x(T)/2   for J = ½ x(T)²
// (x0 enters only through τ: the jump term). ceil(x) = −⌊−x⌋ the same way.
TEST(SbmlSwitching, FloorOfTheStateIsAModeWithTheJumpTermInClosedForm) {
  const std::string mathml = "<math xmlns=\"http://www.w3.org/1998/Math/MathML\">";
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
      "<model id=\"floor\"><listOfParameters>"
      "<parameter id=\"a\" value=\"1\" constant=\"true\"/>"
      "<parameter id=\"x\" value=\"2.5\" constant=\"false\"/>"
      "</listOfParameters><listOfRules><rateRule variable=\"x\">" + mathml +
      "<apply><times/><apply><minus/><ci>a</ci></apply><apply><floor/><ci>x</ci></apply>"
      "</apply></math></rateRule></listOfRules></model></sbml>";
  const Model m = costate::sbml::read_string(xml, "floor.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"x", "floor_1"}));
  EXPECT_EQ(m.equations.n_events(), 2u);
  const std::vector<double> p = m.parameters;
  const std::vector<double> y0 = m.initial_values(p);
  EXPECT_EQ(y0[1], 2.0);  // ⌊2.5⌋
  constexpr double T = 1.0;
  const double xT = 2.0 - 1.0 * T + (2.5 - 2.0) / 2.0;
  expect_closed_form_gradient(m, T, 0.5 * xT * xT, {-xT * T}, xT / 2.0);
}
