// delay(x, d) in SBML math: delay differential equations by the method of
// steps (ode::integrate_with_delays, include/costate/ode/history.hpp).
//
// The model dx/dt = −x(t − 1), x = 1 for t ≤ 0, has by the method of steps
//     x(t) = 1 − t                                  on [0, 1]
//     x(t) = 1 − t + (t − 1)²/2                     on [1, 2]
//     x(t) = 1 − t + (t − 1)²/2 − (t − 2)³/6        on [2, 3]
// (each piece is the integral of −(the previous piece at t − 1)). The pieces
// are polynomials of degree ≤ 3, which the history's cubic Hermite
// interpolation reproduces exactly, so the only error is the integrator's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/history.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/sbml/model.hpp"

namespace {

namespace ode = costate::ode;
using costate::sbml::Model;

// The integrators at rtol 1e-10 / atol 1e-12 on [0, 3]: the global error
// stays below 1e-8 (a hundred times the tolerance).
constexpr double kClosedFormTol = 1e-8;
// The Hermite interpolant of a cubic is the cubic, up to round-off.
constexpr double kRoundOff = 1e-13;

double closed_form(double t) {
  double x = 1.0 - t;
  if (t > 1.0) x += (t - 1.0) * (t - 1.0) / 2.0;
  if (t > 2.0) x -= (t - 2.0) * (t - 2.0) * (t - 2.0) / 6.0;
  return x;
}

const std::string kMath = "<math xmlns=\"http://www.w3.org/1998/Math/MathML\">";
const std::string kDelay =
    "<csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/sbml/symbols/delay\">"
    "delay</csymbol>";
const std::string kTime =
    "<csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/sbml/symbols/time\">"
    "time</csymbol>";

/// dx/dt = −delay(x, lag) (x(0) = `x0`, a formula), y = delay(x, 0.5) (an
/// output only), and `extra` inside <model> after the rules.
std::string delay_model(const std::string& lag, const std::string& x0 = "<cn>1</cn>",
                        const std::string& extra = "") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
         "<model id=\"dde\"><listOfParameters>"
         "<parameter id=\"tau\" value=\"1\" constant=\"true\"/>"
         "<parameter id=\"x\" value=\"1\" constant=\"false\"/>"
         "<parameter id=\"y\" constant=\"false\"/>"
         "</listOfParameters><listOfInitialAssignments><initialAssignment symbol=\"x\">" +
         kMath + x0 +
         "</math></initialAssignment></listOfInitialAssignments>"
         "<listOfRules><rateRule variable=\"x\">" + kMath + "<apply><minus/><apply>" + kDelay +
         "<ci>x</ci>" + lag + "</apply></apply></math></rateRule>"
         "<assignmentRule variable=\"y\">" + kMath + "<apply>" + kDelay +
         "<ci>x</ci><cn>0.5</cn></apply></math></assignmentRule></listOfRules>" + extra +
         "</model></sbml>";
}

struct Trajectory {
  std::vector<double> t, x, y;
};

Trajectory simulate(const Model& m, ode::Method method, const std::vector<double>& times) {
  const ode::IntegratorOptions opt{.method = method, .rtol = 1e-10, .atol = 1e-12};
  const std::vector<double>& p = m.parameters;
  const ode::Solution s =
      ode::integrate_with_delays(m.equations, m.initial_values(p), p, 0.0, times.back(), times,
                                 m.delays, opt, m.initial_history(p));
  EXPECT_TRUE(s.summary.success()) << s.summary.message;
  Trajectory r;
  const std::vector<std::string> names = m.symbol_names();
  const auto at = [&](const std::string& id) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), id) - names.begin());
  };
  for (std::size_t k = 0; k < s.n_outputs(); ++k) {
    const std::vector<double> v = m.symbol_values(s.t[k], s.state(k), p, *s.history);
    r.t.push_back(s.t[k]);
    r.x.push_back(v[at("x")]);
    r.y.push_back(v[at("y")]);
  }
  return r;
}

TEST(History, HermiteIsExactOnCubicsAndHoldsTheInitialHistory) {
  ode::History h(1);
  auto y = [](double t) { return t * t * t - 2.0 * t + 0.5; };
  auto f = [](double t) { return 3.0 * t * t - 2.0; };
  for (double t : {0.0, 0.3, 0.7, 1.6, 2.0}) {
    const double yt = y(t), ft = f(t);
    h.append(t, std::span<const double>(&yt, 1), std::span<const double>(&ft, 1));
  }
  double v = 0.0;
  for (double t : {0.1, 0.3, 0.5, 1.1, 1.99, 2.0}) {
    h.value(t, std::span<double>(&v, 1));
    EXPECT_NEAR(v, y(t), kRoundOff) << "t = " << t;
  }
  h.value(-1.0, std::span<double>(&v, 1));  // before t0: y(t0)
  EXPECT_EQ(v, y(0.0));
  h.set_initial([](double t, std::span<double> out) { out[0] = 10.0 * t; });
  h.value(-1.0, std::span<double>(&v, 1));  // … or the initial history given
  EXPECT_EQ(v, -10.0);
  EXPECT_THROW(h.value(2.5, std::span<double>(&v, 1)), costate::Error);  // not integrated yet
}

TEST(SbmlDelay, MethodOfStepsMatchesTheClosedForm) {
  const Model m = costate::sbml::read_string(delay_model("<ci>tau</ci>"), "dde.xml");
  ASSERT_EQ(m.delays.size(), 2u);  // delay(x, tau), delay(x, 0.5)
  const std::vector<double> times{0.0, 0.25, 0.5, 1.0, 1.3, 1.5, 2.0, 2.2, 2.5, 3.0};
  for (ode::Method method : {ode::Method::CvodesBdf, ode::Method::Dopri5, ode::Method::Bdf}) {
    const Trajectory r = simulate(m, method, times);
    ASSERT_EQ(r.t.size(), times.size());
    for (std::size_t k = 0; k < times.size(); ++k) {
      EXPECT_NEAR(r.x[k], closed_form(times[k]), kClosedFormTol)
          << ode::to_string(method) << " x at t = " << times[k];
      // y = x(t − 0.5), x = 1 before the start.
      EXPECT_NEAR(r.y[k], times[k] < 0.5 ? 1.0 : closed_form(times[k] - 0.5), kClosedFormTol)
          << ode::to_string(method) << " y at t = " << times[k];
    }
  }
}

TEST(SbmlDelay, InitialAssignmentInTimeIsTheHistoryBeforeTheStart) {
  // x = 1 + t before the start (its initial assignment, read at τ < 0):
  // on [0, 1] dx/dt = −(1 + (t − 1)) = −t, so x = 1 − t²/2; x(1) = 0.5.
  const std::string x0 = "<apply><plus/><cn>1</cn>" + kTime + "</apply>";
  const Model m = costate::sbml::read_string(delay_model("<ci>tau</ci>", x0), "dde.xml");
  const Trajectory r = simulate(m, ode::Method::CvodesBdf, {0.0, 0.5, 1.0});
  ASSERT_EQ(r.t.size(), 3u);
  EXPECT_NEAR(r.x[1], 1.0 - 0.125, kClosedFormTol);
  EXPECT_NEAR(r.x[2], 0.5, kClosedFormTol);
  EXPECT_NEAR(r.y[0], 0.5, kClosedFormTol);  // y(0) = x(−0.5) = 1 − 0.5
}

TEST(SbmlDelay, ModelWithoutStatesReadsTimeBeforeTheStart) {
  // z = delay(time², 0.5): (t − 0.5)², also before the start (suite 00937).
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
      "<model><listOfParameters><parameter id=\"z\" constant=\"false\"/></listOfParameters>"
      "<listOfRules><assignmentRule variable=\"z\">" + kMath + "<apply>" + kDelay +
      "<apply><power/>" + kTime + "<cn>2</cn></apply><cn>0.5</cn></apply></math>"
      "</assignmentRule></listOfRules></model></sbml>";
  const Model m = costate::sbml::read_string(xml, "nostate.xml");
  ASSERT_TRUE(m.state_names.empty());
  ode::History h(0);
  h.append(0.0, {}, {});
  const std::vector<double> p(m.parameters);
  for (double t : {0.0, 0.2, 2.0}) {
    const std::vector<double> v = m.symbol_values(t, {}, p, h);
    EXPECT_NEAR(v.back(), (t - 0.5) * (t - 0.5), kRoundOff) << "t = " << t;
  }
  // Without the history the symbols are refused, not NaN.
  EXPECT_THROW(m.symbol_values(0.0, {}, p), costate::Error);
}

// Forward sensitivities through delay(): dx/dt = −a·x − k·x(t − τ), x = 1
// for t ≤ 0. By the method of steps, with c = k/a and u = t − τ,
//     x(t) = (1 + c) e^{−a t} − c                                 on [0, τ]
//     x(t) = (x(τ) − c²) e^{−a u} − k (1 + c) u e^{−a u} + c²      on [τ, 2τ]
// (the second: x' + a x = −k x(t − τ), whose right side is the first piece
// shifted by τ). Its derivatives in a, k and τ are the closed form's own,
// formed on ad::Dual — τ enters through the shift and x(τ), the
// −ẋ(t − τ)·dτ term of the tangent equations.
template <class T>
T two_step_closed_form(T a, T k, T tau, double t) {
  const T c = k / a;
  if (t <= tau.value()) return (1.0 + c) * exp(-a * t) - c;
  const T x_tau = (1.0 + c) * exp(-a * tau) - c;
  const T u = t - tau;
  return (x_tau - c * c) * exp(-a * u) - k * (1.0 + c) * u * exp(-a * u) + c * c;
}

// The sensitivities' error: the integrator's at rtol 1e-10 / atol 1e-12 on
// (x, s) plus the Hermite history's O(h⁴) (h = τ/64); 8e-10 at worst here.
// Without the break at t0 + τ (s' jumps there: ẏ(t − τ) does at t0) it is
// 4e-5 on the last piece before 2τ — the outputs at 1.59 and 1.599 see it.
constexpr double kSensitivityTol = 1e-8;

TEST(SbmlDelay, ForwardSensitivitiesMatchTheClosedFormInRateAndLag) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
      "<model id=\"dde2\"><listOfParameters>"
      "<parameter id=\"a\" value=\"0.7\" constant=\"true\"/>"
      "<parameter id=\"k\" value=\"1.3\" constant=\"true\"/>"
      "<parameter id=\"tau\" value=\"0.8\" constant=\"true\"/>"
      "<parameter id=\"x\" value=\"1\" constant=\"false\"/>"
      "</listOfParameters><listOfRules><rateRule variable=\"x\">" + kMath +
      "<apply><minus/><apply><times/><apply><minus/><ci>a</ci></apply><ci>x</ci></apply>"
      "<apply><times/><ci>k</ci><apply>" + kDelay + "<ci>x</ci><ci>tau</ci></apply></apply>"
      "</apply></math></rateRule></listOfRules></model></sbml>";
  const Model m = costate::sbml::read_string(xml, "dde2.xml");
  const std::vector<double>& p = m.parameters;
  const std::vector<std::string> wrt{"a", "k", "tau"};
  std::vector<ode::SensitivityDirection> directions;
  for (const std::string& id : wrt) {
    directions.push_back({std::vector<double>(p.size(), 0.0), {}});
    directions.back().parameters[static_cast<std::size_t>(m.parameter_index(id))] = 1.0;
  }
  const double a = p[static_cast<std::size_t>(m.parameter_index("a"))],
               k = p[static_cast<std::size_t>(m.parameter_index("k"))],
               tau = p[static_cast<std::size_t>(m.parameter_index("tau"))];
  const std::vector<double> times{0.0, 0.3, tau, 1.0, 1.3, 1.5, 1.55, 1.59, 1.599, 2.0 * tau};
  for (ode::Method method : {ode::Method::CvodesBdf, ode::Method::Dopri5, ode::Method::Bdf}) {
    const ode::IntegratorOptions opt{.method = method, .rtol = 1e-10, .atol = 1e-12};
    const ode::DelayedSensitivities r = ode::forward_sensitivities_with_delays(
        m.equations, m.initial_values(p), p, 0.0, times.back(), times, m.delays, opt, directions,
        m.initial_history(p));
    ASSERT_TRUE(r.solution.summary.success()) << r.solution.summary.message;
    ASSERT_EQ(r.solution.n_outputs(), times.size());
    ASSERT_EQ(r.n_directions, 3u);
    using D = costate::ad::Dual<double, 3>;
    for (std::size_t j = 0; j < times.size(); ++j) {
      const D x = two_step_closed_form(D(a, {1.0, 0.0, 0.0}), D(k, {0.0, 1.0, 0.0}),
                                       D(tau, {0.0, 0.0, 1.0}), times[j]);
      EXPECT_NEAR(r.solution.state(j)[0], x.value(), kClosedFormTol)
          << ode::to_string(method) << " x at t = " << times[j];
      for (std::size_t d = 0; d < 3; ++d)
        EXPECT_NEAR(r.sensitivity(j, 0, d), x.tangent(static_cast<int>(d)), kSensitivityTol)
            << ode::to_string(method) << " dx/d" << wrt[d] << " at t = " << times[j];
    }
  }
}

void expect_refusal(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no refusal; expected one naming '" << part << "'";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(SbmlDelay, RefusedByName) {
  // A lag that changes in time in the right-hand side.
  const std::string half_time = "<apply><divide/>" + kTime + "<cn>2</cn></apply>";
  const Model m = costate::sbml::read_string(delay_model(half_time), "dde.xml");
  expect_refusal([&] { simulate(m, ode::Method::CvodesBdf, {0.0, 1.0}); },
                 "a delay whose lag changes in time");
  // A lag of 0 in the right-hand side.
  const Model zero = costate::sbml::read_string(delay_model("<cn>0</cn>"), "dde.xml");
  expect_refusal([&] { simulate(zero, ode::Method::CvodesBdf, {0.0, 1.0}); },
                 "positive constant lag");
  // delay() with events.
  const std::string event =
      "<listOfEvents><event id=\"E\" useValuesFromTriggerTime=\"true\"><trigger "
      "initialValue=\"false\" persistent=\"true\">" + kMath + "<apply><gt/>" + kTime +
      "<cn>1</cn></apply></math></trigger><listOfEventAssignments><eventAssignment "
      "variable=\"x\">" + kMath + "<cn>2</cn></math></eventAssignment>"
      "</listOfEventAssignments></event></listOfEvents>";
  expect_refusal(
      [&] { costate::sbml::read_string(delay_model("<ci>tau</ci>", "<cn>1</cn>", event), "e.xml"); },
      "delay() in a model with events is not supported");
}

}  // namespace
