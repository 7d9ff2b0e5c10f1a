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
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/delay_adjoint.hpp"
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

/// dx/dt = −a·x − k·x(t − τ) (two_step_closed_form's model).
std::string two_step_xml() {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
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
}

// The sensitivities' error: the integrator's at rtol 1e-10 / atol 1e-12 on
// (x, s) plus the Hermite history's O(h⁴) (h = τ/64); 8e-10 at worst here.
// Without the break at t0 + τ (s' jumps there: ẏ(t − τ) does at t0) it is
// 4e-5 on the last piece before 2τ — the outputs at 1.59 and 1.599 see it.
constexpr double kSensitivityTol = 1e-8;

TEST(SbmlDelay, ForwardSensitivitiesMatchTheClosedFormInRateAndLag) {
  const Model m = costate::sbml::read_string(two_step_xml(), "dde2.xml");
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

// ---- The discrete adjoint through delay() (ode::adjoint_with_delays) ----

/// J = Σ_k c_k · y_0(t_k) + ½ Σ_i y_i(t_last)²: a data-like sum and a
/// terminal term, as a DelayedObjective and as a plain function of a
/// trajectory at the outputs.
struct SumObjective {
  std::vector<double> c;
  double value(const ode::Solution& s) const {
    double J = 0.0;
    for (std::size_t k = 0; k < s.n_outputs(); ++k) J += c[k] * s.state(k)[0];
    for (double v : s.state(s.n_outputs() - 1)) J += 0.5 * v * v;
    return J;
  }
  ode::DelayedObjective seeds() const {
    return [this](const ode::Solution& s, std::span<double> y_bar, std::span<double>) {
      const std::size_t ny = s.n_states, last = s.n_outputs() - 1;
      for (std::size_t k = 0; k < s.n_outputs(); ++k) y_bar[k * ny] += c[k];
      for (std::size_t i = 0; i < ny; ++i) y_bar[last * ny + i] += s.state(last)[i];
      return value(s);
    };
  }
};

/// The discrete adjoint of J on m at p; before t0 the history is the
/// initial state (no history function: it moves with y0).
ode::DelayedGradient adjoint_of(const Model& m, const std::vector<double>& p,
                                const std::vector<double>& times, const SumObjective& J,
                                const ode::IntegratorOptions& opt,
                                const ode::Checkpointing& checkpointing = ode::StoreAll{}) {
  return ode::adjoint_with_delays(m.equations, m.initial_values(p), p, times.front(), times.back(),
                                  times, m.delays, opt, checkpointing, J.seeds(), {});
}

// The discrete adjoint against the closed form: the same error budget as
// the forward sensitivities (the integrator's at rtol 1e-10 plus the
// history's O(h⁴)), on J whose terms are O(1). Measured: 5.6e-10 at worst
// (bdf's dJ/da; dopri5 and sdirk3 ≤ 1e-10).
constexpr double kAdjointClosedFormTol = 1e-8;

TEST(SbmlDelayAdjoint, MatchesTheClosedFormInRateLagAndInitialValue) {
  const Model m = costate::sbml::read_string(two_step_xml(), "dde2.xml");
  const std::vector<double>& p = m.parameters;
  const auto at = [&](const char* id) { return static_cast<std::size_t>(m.parameter_index(id)); };
  const double a = p[at("a")], k = p[at("k")], tau = p[at("tau")];
  const std::vector<double> times{0.0, 0.3, tau, 1.0, 1.3, 1.5, 1.59, 2.0 * tau};
  const SumObjective J{{0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 1.0, 0.5}};
  // The closed form's J and its derivatives in a, k, τ; the model is
  // linear and its history is x0, so dJ/dx0 = Σ c_k x_k + Σ x_last² at x0 = 1.
  using D = costate::ad::Dual<double, 3>;
  D Jc = 0.0;
  double dJdx0 = 0.0;
  for (std::size_t j = 0; j < times.size(); ++j) {
    const D x = two_step_closed_form(D(a, {1.0, 0.0, 0.0}), D(k, {0.0, 1.0, 0.0}),
                                     D(tau, {0.0, 0.0, 1.0}), times[j]);
    Jc = Jc + J.c[j] * x;
    dJdx0 += J.c[j] * x.value();
    if (j + 1 == times.size()) {
      Jc = Jc + 0.5 * x * x;
      dJdx0 += x.value() * x.value();
    }
  }
  for (ode::Method method : {ode::Method::Dopri5, ode::Method::Bdf, ode::Method::Sdirk3}) {
    const ode::IntegratorOptions opt{.method = method, .rtol = 1e-10, .atol = 1e-12};
    const ode::DelayedGradient g = adjoint_of(m, p, times, J, opt);
    EXPECT_EQ(g.segments, 2u);
    EXPECT_NEAR(g.objective, Jc.value(), kAdjointClosedFormTol) << ode::to_string(method);
    EXPECT_NEAR(g.wrt_parameters[at("a")], Jc.tangent(0), kAdjointClosedFormTol)
        << ode::to_string(method) << " dJ/da";
    EXPECT_NEAR(g.wrt_parameters[at("k")], Jc.tangent(1), kAdjointClosedFormTol)
        << ode::to_string(method) << " dJ/dk";
    EXPECT_NEAR(g.wrt_parameters[at("tau")], Jc.tangent(2), kAdjointClosedFormTol)
        << ode::to_string(method) << " dJ/dtau";
    ASSERT_EQ(g.wrt_initial_state.size(), 1u);
    EXPECT_NEAR(g.wrt_initial_state[0], dJdx0, kAdjointClosedFormTol) << ode::to_string(method);
    std::printf("[ adjoint ] %s: |dJ/d(a, k, tau, x0) - closed form| = %.2e %.2e %.2e %.2e\n",
                ode::to_string(method).c_str(),
                std::abs(g.wrt_parameters[at("a")] - Jc.tangent(0)),
                std::abs(g.wrt_parameters[at("k")] - Jc.tangent(1)),
                std::abs(g.wrt_parameters[at("tau")] - Jc.tangent(2)),
                std::abs(g.wrt_initial_state[0] - dJdx0));
  }
}

// Two states, a quantity that reads both (delay(x·y, τ)) and a lag that is
// a parameter: x' = −k·delay(x·y, τ), y' = x − b·y on [0, 2.5τ] (three
// segments). The adjoint's discretization lands on the history's sample
// times and forward_sensitivities_with_delays interpolates its dense
// output with (y, s) under error control: two discretizations of the same
// method of steps at rtol 1e-10, which differ by the integrators' errors
// (measured: 9e-12 by dopri5, 9.4e-10 by bdf, relative to max(1, |g|)).
constexpr double kAdjointVsForwardTol = 1e-7;
// rk4 at a fixed step: the steps do not move with k, b or x0, so central
// differences (step 1e-5) of the adjoint's own forward computation differ
// from its derivative by O(h²) truncation and 1e-16/1e-5 round-off. In τ
// the segments and samples move with it (the adjoint holds the nodes'
// times, as the forward sensitivities do): the difference is then the
// discretization's, O(dt⁴) at dt = τ/128. Measured: 1.9e-9 (k, b, x0, y0)
// and 2.9e-9 (τ).
constexpr double kFixedStepDifferenceTol = 1e-8;
constexpr double kLagDifferenceTol = 1e-6;

std::string product_xml() {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">"
         "<model id=\"prod\"><listOfParameters>"
         "<parameter id=\"k\" value=\"0.9\" constant=\"true\"/>"
         "<parameter id=\"b\" value=\"0.4\" constant=\"true\"/>"
         "<parameter id=\"tau\" value=\"0.6\" constant=\"true\"/>"
         "<parameter id=\"x\" value=\"1.2\" constant=\"false\"/>"
         "<parameter id=\"y\" value=\"0.5\" constant=\"false\"/>"
         "</listOfParameters><listOfRules><rateRule variable=\"x\">" + kMath +
         "<apply><times/><apply><minus/><ci>k</ci></apply><apply>" + kDelay +
         "<apply><times/><ci>x</ci><ci>y</ci></apply><ci>tau</ci></apply></apply></math>"
         "</rateRule><rateRule variable=\"y\">" + kMath +
         "<apply><minus/><ci>x</ci><apply><times/><ci>b</ci><ci>y</ci></apply></apply></math>"
         "</rateRule></listOfRules></model></sbml>";
}

TEST(SbmlDelayAdjoint, StateDependentQuantityAgreesWithForwardSensitivitiesAndDifferences) {
  const Model m = costate::sbml::read_string(product_xml(), "prod.xml");
  const std::vector<double>& p = m.parameters;
  const std::vector<std::string> ids{"k", "b", "tau"};
  const std::vector<double> times{0.0, 0.35, 0.9, 1.2, 1.5};
  const SumObjective J{{0.0, 1.0, -0.5, 0.75, 1.0}};
  const std::size_t np = p.size(), ny = 2;
  // Forward sensitivities along k, b, τ and the two initial values.
  std::vector<ode::SensitivityDirection> directions;
  for (const std::string& id : ids) {
    directions.push_back({std::vector<double>(np, 0.0), std::vector<double>(ny, 0.0)});
    directions.back().parameters[static_cast<std::size_t>(m.parameter_index(id))] = 1.0;
  }
  for (std::size_t i = 0; i < ny; ++i) {
    directions.push_back({std::vector<double>(np, 0.0), std::vector<double>(ny, 0.0)});
    directions.back().initial_state[i] = 1.0;
  }
  for (ode::Method method : {ode::Method::Dopri5, ode::Method::Bdf}) {
    const ode::IntegratorOptions opt{.method = method, .rtol = 1e-10, .atol = 1e-12};
    const ode::DelayedGradient g = adjoint_of(m, p, times, J, opt);
    EXPECT_EQ(g.segments, 3u);
    const ode::DelayedSensitivities fs = ode::forward_sensitivities_with_delays(
        m.equations, m.initial_values(p), p, 0.0, times.back(), times, m.delays, opt, directions,
        m.initial_history(p));
    ASSERT_TRUE(fs.solution.summary.success()) << fs.solution.summary.message;
    double worst = 0.0;
    for (std::size_t d = 0; d < directions.size(); ++d) {
      // dJ/dθ_d from the sensitivities: ∂J/∂y(t_k) · s(t_k).
      double dJ = 0.0;
      const std::size_t last = times.size() - 1;
      for (std::size_t kk = 0; kk < times.size(); ++kk) dJ += J.c[kk] * fs.sensitivity(kk, 0, d);
      for (std::size_t i = 0; i < ny; ++i)
        dJ += fs.solution.state(last)[i] * fs.sensitivity(last, i, d);
      const double adj = d < ids.size()
                             ? g.wrt_parameters[static_cast<std::size_t>(m.parameter_index(ids[d]))]
                             : g.wrt_initial_state[d - ids.size()];
      EXPECT_NEAR(adj, dJ, kAdjointVsForwardTol * std::max(1.0, std::abs(dJ)))
          << ode::to_string(method) << " direction " << d;
      worst = std::max(worst, std::abs(adj - dJ) / std::max(1.0, std::abs(dJ)));
    }
    std::printf("[ adjoint ] %s: adjoint vs forward sensitivities through the history: %.2e\n",
                ode::to_string(method).c_str(), worst);
  }
  // The derivative of what the computation computes: rk4 at a fixed step.
  const ode::IntegratorOptions rk4{.method = ode::Method::RK4, .dt = 0.6 / 128};
  const ode::DelayedGradient g = adjoint_of(m, p, times, J, rk4, ode::Binomial{.snapshots = 5});
  const ode::DelayedGradient all = adjoint_of(m, p, times, J, rk4);
  auto J_at = [&](const std::vector<double>& q, const std::vector<double>& y0) {
    return ode::adjoint_with_delays(m.equations, y0, q, 0.0, times.back(), times, m.delays, rk4,
                                    ode::StoreAll{}, J.seeds(), {})
        .objective;
  };
  const std::vector<double> y0 = m.initial_values(p);
  double worst = 0.0;
  for (std::size_t d = 0; d < ids.size() + ny; ++d) {
    const double h = 1e-5;
    std::vector<double> up = p, down = p, yu = y0, yd = y0;
    double adj = 0.0, adj_all = 0.0;
    if (d < ids.size()) {
      const auto j = static_cast<std::size_t>(m.parameter_index(ids[d]));
      up[j] += h;
      down[j] -= h;
      adj = g.wrt_parameters[j];
      adj_all = all.wrt_parameters[j];
    } else {
      yu[d - ids.size()] += h;
      yd[d - ids.size()] -= h;
      adj = g.wrt_initial_state[d - ids.size()];
      adj_all = all.wrt_initial_state[d - ids.size()];
    }
    // Every checkpoint schedule replays the same steps: the same bits.
    EXPECT_EQ(adj, adj_all) << "direction " << d;
    const double central = (J_at(up, yu) - J_at(down, yd)) / (2.0 * h);
    const double tol = d == 2 ? kLagDifferenceTol : kFixedStepDifferenceTol;
    EXPECT_NEAR(adj, central, tol * std::max(1.0, std::abs(central))) << "direction " << d;
    if (d != 2) worst = std::max(worst, std::abs(adj - central) / std::max(1.0, std::abs(central)));
    else std::printf("[ adjoint ] rk4: dJ/dtau vs central differences: %.2e\n", std::abs(adj - central));
  }
  std::printf("[ adjoint ] rk4: adjoint vs central differences (k, b, x0, y0): %.2e\n", worst);
}

// The run is the gradient's forward pass (issue 35): integrate_with_delays
// takes adjoint_with_delays' steps — each segment's steps planned to land
// on the history's sample times and replayed by the adjoint's scheme — so
// the run's outputs and the adjoint's J are the same bits (EXPECT_EQ on
// doubles), adaptive or fixed, explicit or implicit. (Before, the run
// interpolated its dense output at the samples: 2.6e-8 relative apart on
// suite case 01414 by bdf, 2.2e-7 on 01419.)
TEST(SbmlDelayAdjoint, ForwardPassIsTheRunToTheBit) {
  for (const auto& [xml, times, J] :
       {std::tuple{two_step_xml(), std::vector<double>{0.0, 0.3, 0.8, 1.0, 1.3, 1.5, 1.59, 1.6},
                   SumObjective{{0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 1.0, 0.5}}},
        std::tuple{product_xml(), std::vector<double>{0.0, 0.35, 0.9, 1.2, 1.5},
                   SumObjective{{0.0, 1.0, -0.5, 0.75, 1.0}}}}) {
    const Model m = costate::sbml::read_string(xml, "dde.xml");
    const std::vector<double>& p = m.parameters;
    for (const ode::IntegratorOptions& opt :
         {ode::IntegratorOptions{.method = ode::Method::Dopri5, .rtol = 1e-8, .atol = 1e-10},
          ode::IntegratorOptions{.method = ode::Method::Bdf, .rtol = 1e-8, .atol = 1e-10},
          ode::IntegratorOptions{.method = ode::Method::Sdirk3, .rtol = 1e-8, .atol = 1e-10},
          ode::IntegratorOptions{.method = ode::Method::RK4, .dt = 0.01}}) {
      SCOPED_TRACE(m.id + " by " + ode::to_string(opt.method));
      const ode::Solution run =
          ode::integrate_with_delays(m.equations, m.initial_values(p), p, 0.0, times.back(), times,
                                     m.delays, opt, m.initial_history(p));
      ASSERT_TRUE(run.summary.success()) << run.summary.message;
      const ode::DelayedGradient g =
          ode::adjoint_with_delays(m.equations, m.initial_values(p), p, 0.0, times.back(), times,
                                   m.delays, opt, ode::StoreAll{}, J.seeds(), m.initial_history(p));
      double dy = 0.0;
      for (std::size_t i = 0; i < std::min(run.y.size(), g.solution.y.size()); ++i)
        dy = std::max(dy, std::abs(run.y[i] - g.solution.y[i]));
      std::printf("[ run = adjoint ] %s by %s: max |y_run - y_adjoint| = %.2e, |J_run - J| = "
                  "%.2e; steps %lld, %lld\n",
                  m.id.c_str(), ode::to_string(opt.method).c_str(), dy,
                  std::abs(J.value(run) - g.objective), static_cast<long long>(run.summary.steps),
                  static_cast<long long>(g.steps));
      EXPECT_EQ(run.t, g.solution.t);
      EXPECT_EQ(run.y, g.solution.y);  // every output, bit for bit
      EXPECT_EQ(J.value(run), g.objective);
      EXPECT_EQ(run.summary.steps, g.steps);
    }
  }
}

TEST(SbmlDelayAdjoint, RefusesByName) {
  const Model m = costate::sbml::read_string(two_step_xml(), "dde2.xml");
  const std::vector<double> times{0.0, 1.0};
  const SumObjective J{{0.0, 1.0}};
  // CVODES integrators have no discrete adjoint.
  expect_refusal([&] { adjoint_of(m, m.parameters, times, J, {.method = ode::Method::CvodesBdf}); },
                 "delay(x, tau): the discrete adjoint through delay()");
  // Nested delays in the right-hand side.
  const std::string nested = "<apply>" + kDelay + "<apply><plus/><ci>x</ci><apply>" + kDelay +
                             "<ci>x</ci><cn>0.3</cn></apply></apply><ci>tau</ci></apply>";
  std::string xml = two_step_xml();
  const std::string inner = "<apply>" + kDelay + "<ci>x</ci><ci>tau</ci></apply>";
  xml.replace(xml.find(inner), inner.size(), nested);
  const Model n = costate::sbml::read_string(xml, "nested.xml");
  expect_refusal([&] { adjoint_of(n, n.parameters, times, J, {.method = ode::Method::Dopri5}); },
                 "nested delays");
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
