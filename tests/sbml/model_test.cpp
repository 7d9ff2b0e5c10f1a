// SBML import: small documents written here, one per feature, whose
// right-hand sides and initial values are checked against the same model
// derived by hand; and one test per refused feature, each checking that the
// error names the element, its id and the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/sbml/model.hpp"

namespace {

using costate::sbml::Model;
using costate::sbml::StateKind;

// The importer evaluates the same arithmetic as the hand-derived formulas,
// at most reordered: agreement to a few ulps of the magnitudes involved.
constexpr double kSameArithmeticTol = 1e-13;

std::string math(const std::string& body) {
  return "<math xmlns=\"http://www.w3.org/1998/Math/MathML\">" + body + "</math>";
}
std::string ci(const std::string& id) { return "<ci>" + id + "</ci>"; }
std::string cn(double v) { return "<cn>" + std::to_string(v) + "</cn>"; }
std::string mathml_apply(const std::string& op, const std::string& args) {
  return "<apply><" + op + "/>" + args + "</apply>";
}
const std::string kTime =
    "<csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/sbml/symbols/time\">time</csymbol>";

/// An SBML Level 3 Version 1 document around `body` (the model's lists).
std::string document(const std::string& body) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">\n"
         "<model id=\"m\">\n" + body + "</model>\n</sbml>\n";
}

std::string species(const std::string& id, const std::string& compartment,
                    const std::string& attributes) {
  return "<species id=\"" + id + "\" compartment=\"" + compartment + "\" " + attributes + "/>";
}
/// A species in concentration, changed by reactions, starting at c0.
std::string floating_species(const std::string& id, const std::string& compartment, double c0) {
  return species(id, compartment,
                 "initialConcentration=\"" + std::to_string(c0) +
                     "\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"");
}
std::string parameter(const std::string& id, double value, bool constant = true) {
  return "<parameter id=\"" + id + "\" value=\"" + std::to_string(value) + "\" constant=\"" +
         (constant ? "true" : "false") + "\"/>";
}
std::string reaction(const std::string& id, const std::string& reactants,
                     const std::string& products, const std::string& law,
                     const std::string& locals = "") {
  auto refs = [](const std::string& list) {
    // "A:1 B:2" → speciesReferences
    std::string out;
    std::size_t at = 0;
    while (at < list.size()) {
      std::size_t end = list.find(' ', at);
      if (end == std::string::npos) end = list.size();
      const std::string item = list.substr(at, end - at);
      const std::size_t colon = item.find(':');
      out += "<speciesReference species=\"" + item.substr(0, colon) + "\" stoichiometry=\"" +
             item.substr(colon + 1) + "\" constant=\"true\"/>";
      at = end + 1;
    }
    return out;
  };
  std::string r = "<reaction id=\"" + id + "\" reversible=\"false\" fast=\"false\">";
  if (!reactants.empty()) r += "<listOfReactants>" + refs(reactants) + "</listOfReactants>";
  if (!products.empty()) r += "<listOfProducts>" + refs(products) + "</listOfProducts>";
  r += "<kineticLaw>" + math(law);
  if (!locals.empty()) r += "<listOfLocalParameters>" + locals + "</listOfLocalParameters>";
  return r + "</kineticLaw></reaction>";
}

std::vector<double> rhs(const Model& m, double t, const std::vector<double>& y,
                        const std::vector<double>& p) {
  std::vector<double> f(y.size());
  m.equations.rhs<double>(t, y, p, f);
  return f;
}

std::size_t param(const Model& m, const std::string& id) {
  const long i = m.parameter_index(id);
  EXPECT_GE(i, 0) << "no parameter '" << id << "'";
  return static_cast<std::size_t>(i);
}

std::string error_of(const std::string& xml, const std::string& name = "case.xml") {
  try {
    (void)costate::sbml::read_string(xml, name);
  } catch (const costate::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// Concentrations (÷ V), amounts (hasOnlySubstanceUnits: no ÷ V) and a
// species given an initial amount but used in concentration, in a
// compartment of size 2.5.
TEST(SbmlModel, AmountsAndConcentrationsInANonUnitCompartment) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"2.5\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("A", "V", "initialConcentration=\"3\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      species("B", "V", "initialAmount=\"4\" hasOnlySubstanceUnits=\"true\" boundaryCondition=\"false\" constant=\"false\"") +
      species("C", "V", "initialAmount=\"5\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k1", 0.7) + parameter("k2", 0.3) +
      "</listOfParameters><listOfReactions>" +
      reaction("r1", "A:1", "B:2", mathml_apply("times", ci("k1") + ci("A") + ci("V"))) +
      reaction("r2", "B:1", "C:1", mathml_apply("times", ci("k2") + ci("B"))) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "amounts.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(m.state_kinds[0], StateKind::SpeciesConcentration);
  EXPECT_EQ(m.state_kinds[1], StateKind::SpeciesAmount);
  EXPECT_EQ(m.state_compartments[2], "V");
  // Initial values in the species' math units: C = 5 / 2.5.
  const std::vector<double> y0 = m.initial_values(m.parameters);
  EXPECT_EQ(y0, (std::vector<double>{3.0, 4.0, 2.0}));
  // An initial value depending on V follows an override of V.
  std::vector<double> p = m.parameters;
  p[param(m, "V")] = 5.0;
  EXPECT_DOUBLE_EQ(m.initial_values(p)[2], 1.0);

  const std::vector<double> y{1.3, 0.4, 2.2};
  const double k1 = p[param(m, "k1")], k2 = p[param(m, "k2")], V = p[param(m, "V")];
  const std::vector<double> f = rhs(m, 0.0, y, p);
  const double v1 = k1 * y[0] * V, v2 = k2 * y[1];
  EXPECT_NEAR(f[0], -v1 / V, kSameArithmeticTol);
  EXPECT_NEAR(f[1], 2.0 * v1 - v2, kSameArithmeticTol);
  EXPECT_NEAR(f[2], v2 / V, kSameArithmeticTol);
}

// Boundary species are not changed by reactions; constant species become
// parameters (when stated in their math units) or fixed expressions.
TEST(SbmlModel, BoundaryAndConstantSpecies) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"2\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("S", "V", "initialConcentration=\"1.5\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"true\" constant=\"false\"") +
      species("X", "V", "initialConcentration=\"0\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      species("E", "V", "initialConcentration=\"0.5\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"true\" constant=\"true\"") +
      species("F", "V", "initialAmount=\"3\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"true\" constant=\"true\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 0.9) +
      "</listOfParameters><listOfReactions>" +
      reaction("r", "S:1", "X:1", mathml_apply("times", ci("k") + ci("S") + ci("E") + ci("F"))) +
      "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "boundary.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"S", "X"}));
  ASSERT_GE(m.parameter_index("E"), 0) << "a constant species in concentration is a parameter";
  EXPECT_EQ(m.parameter_index("F"), -1) << "F's amount / V is an expression, not a parameter";
  EXPECT_EQ(m.parameters[param(m, "E")], 0.5);
  const std::vector<double> y{1.5, 0.25};
  const std::vector<double> f = rhs(m, 0.0, y, m.parameters);
  EXPECT_EQ(f[0], 0.0) << "a boundary species without rules keeps its value";
  const double rate = 0.9 * 1.5 * 0.5 * (3.0 / 2.0);
  EXPECT_NEAR(f[1], rate / 2.0, kSameArithmeticTol);
}

// A local parameter shadows the global of the same id inside its kinetic
// law and becomes the parameter "<reaction>_<id>".
TEST(SbmlModel, LocalParametersShadowGlobals) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("A", "V", "initialConcentration=\"2\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 7.0) +
      "</listOfParameters><listOfReactions>" +
      reaction("decay", "A:1", "", mathml_apply("times", ci("k") + ci("A")),
               "<localParameter id=\"k\" value=\"0.3\"/>") +
      reaction("growth", "", "A:1", ci("k")) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "local.xml");
  ASSERT_GE(m.parameter_index("decay_k"), 0);
  EXPECT_EQ(m.parameters[param(m, "decay_k")], 0.3);
  EXPECT_EQ(m.parameters[param(m, "k")], 7.0);
  std::vector<double> p = m.parameters;
  p[param(m, "decay_k")] = 0.25;
  const std::vector<double> f = rhs(m, 0.0, {2.0}, p);
  EXPECT_NEAR(f[0], -0.25 * 2.0 + 7.0, kSameArithmeticTol);
}

// Assignment rules (intermediates, in dependency order whatever the
// document order), rate rules on a species, a parameter and a compartment
// (d[y]/dt = v/V − [y] V'/V for a species in a growing compartment).
TEST(SbmlModel, AssignmentAndRateRules) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"2\" constant=\"true\"/>"
      "<compartment id=\"W\" size=\"3\" constant=\"false\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      species("y", "W", "initialConcentration=\"0.5\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("a", 1.5) + parameter("g", 0.2) +
      parameter("kp", 0.8) + parameter("u", 0.0, false) + parameter("w", 0.0, false) +
      parameter("z", 4.0, false) +
      "</listOfParameters><listOfRules>"
      // w = u^2 is listed before u = 2 x + t: the importer orders them.
      "<assignmentRule variable=\"w\">" + math(mathml_apply("power", ci("u") + cn(2))) + "</assignmentRule>"
      "<assignmentRule variable=\"u\">" + math(mathml_apply("plus", mathml_apply("times", cn(2) + ci("x")) + kTime)) + "</assignmentRule>"
      "<rateRule variable=\"x\">" + math(mathml_apply("minus", ci("a") + ci("x"))) + "</rateRule>"
      "<rateRule variable=\"z\">" + math(mathml_apply("times", mathml_apply("minus", ci("w")) + ci("z"))) + "</rateRule>"
      "<rateRule variable=\"W\">" + math(ci("g")) + "</rateRule>"
      "</listOfRules><listOfReactions>" +
      reaction("prod", "", "y:1", mathml_apply("times", ci("kp") + ci("W"))) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "rules.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"x", "y", "W", "z"}));
  EXPECT_EQ(m.state_kinds[2], StateKind::Compartment);
  EXPECT_EQ(m.state_kinds[3], StateKind::Parameter);
  EXPECT_EQ(m.initial_values(m.parameters), (std::vector<double>{1.0, 0.5, 3.0, 4.0}));
  const double t = 0.7;
  const std::vector<double> y{1.2, 0.6, 3.5, 2.0};
  const std::vector<double> f = rhs(m, t, y, m.parameters);
  const double u = 2.0 * y[0] + t, w = u * u;
  EXPECT_NEAR(f[0], 1.5 - y[0], kSameArithmeticTol);
  EXPECT_NEAR(f[1], 0.8 * y[2] / y[2] - y[1] * 0.2 / y[2], kSameArithmeticTol);
  EXPECT_NEAR(f[2], 0.2, kSameArithmeticTol);
  EXPECT_NEAR(f[3], -w * y[3], kSameArithmeticTol * 10);
}

// Initial assignments: of a species (an expression of the parameters, so
// overriding p0 moves it), of a parameter (then an expression, not a free
// parameter) and one that uses another species' initial value.
TEST(SbmlModel, InitialAssignments) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"0\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      species("y", "V", "hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("p0", 3.0) + parameter("q", 0.0) +
      "</listOfParameters><listOfInitialAssignments>"
      "<initialAssignment symbol=\"x\">" + math(mathml_apply("times", cn(2) + ci("p0"))) + "</initialAssignment>"
      "<initialAssignment symbol=\"q\">" + math(mathml_apply("plus", ci("p0") + cn(1))) + "</initialAssignment>"
      "<initialAssignment symbol=\"y\">" + math(mathml_apply("plus", ci("x") + ci("q"))) + "</initialAssignment>"
      "</listOfInitialAssignments><listOfReactions>" +
      reaction("r", "x:1", "y:1", mathml_apply("times", ci("q") + ci("x"))) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "initial.xml");
  EXPECT_EQ(m.parameter_index("q"), -1) << "a parameter with an initial assignment is an expression";
  EXPECT_EQ(m.initial_values(m.parameters), (std::vector<double>{6.0, 10.0}));
  std::vector<double> p = m.parameters;
  p[param(m, "p0")] = 0.5;
  EXPECT_EQ(m.initial_values(p), (std::vector<double>{1.0, 2.5})) << "x = 2 p0, y = x + p0 + 1";
  // The text form (what an input file's initial_state expressions hold)
  // is an expression of the parameters.
  EXPECT_NE(m.initial_state_text[0].find("p0"), std::string::npos) << m.initial_state_text[0];
  const std::vector<double> f = rhs(m, 0.0, {1.0, 2.0}, p);
  EXPECT_NEAR(f[0], -(0.5 + 1.0) * 1.0, kSameArithmeticTol);
  EXPECT_NEAR(f[1], (0.5 + 1.0) * 1.0, kSameArithmeticTol);
}

// Function definitions, one calling another, expanded at the call.
TEST(SbmlModel, FunctionDefinitions) {
  const std::string lambda_f =
      "<lambda><bvar><ci>a</ci></bvar><bvar><ci>b</ci></bvar>" +
      mathml_apply("divide", mathml_apply("times", ci("a") + ci("b")) + mathml_apply("plus", cn(1) + ci("b"))) + "</lambda>";
  const std::string lambda_g =
      "<lambda><bvar><ci>s</ci></bvar>" +
      mathml_apply("plus", "<apply><ci>f</ci>" + ci("s") + ci("s") + "</apply>" + cn(1)) + "</lambda>";
  const std::string xml = document(
      "<listOfFunctionDefinitions>"
      "<functionDefinition id=\"f\">" + math(lambda_f) + "</functionDefinition>"
      "<functionDefinition id=\"g\">" + math(lambda_g) + "</functionDefinition>"
      "</listOfFunctionDefinitions>"
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 0.4) +
      "</listOfParameters><listOfReactions>" +
      reaction("r", "", "x:1", mathml_apply("times", ci("k") + "<apply><ci>g</ci>" + ci("x") + "</apply>")) +
      "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "functions.xml");
  const double x = 1.7;
  const std::vector<double> f = rhs(m, 0.0, {x}, m.parameters);
  EXPECT_NEAR(f[0], 0.4 * (x * x / (1 + x) + 1), kSameArithmeticTol);
}

// piecewise on time and parameters: a stimulus switched on at t_on; its
// derivative with respect to the parameters passes through the AD types.
TEST(SbmlModel, PiecewiseOnTime) {
  const std::string stim = mathml_apply("times", ci("amp") + "<piecewise><piece>" + cn(1) +
                                              mathml_apply("geq", kTime + ci("t_on")) +
                                              "</piece><otherwise>" + cn(0) +
                                              "</otherwise></piecewise>");
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"0\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("amp", 2.0) + parameter("t_on", 1.0) +
      parameter("k", 0.5) + parameter("u", 0.0, false) +
      "</listOfParameters><listOfRules><assignmentRule variable=\"u\">" + math(stim) +
      "</assignmentRule></listOfRules><listOfReactions>" +
      reaction("in", "", "x:1", ci("u")) +
      reaction("out", "x:1", "", mathml_apply("times", ci("k") + ci("x"))) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "piecewise.xml");
  EXPECT_NEAR(rhs(m, 0.5, {1.0}, m.parameters)[0], -0.5, kSameArithmeticTol);
  EXPECT_NEAR(rhs(m, 1.5, {1.0}, m.parameters)[0], 2.0 - 0.5, kSameArithmeticTol);
  using D = costate::ad::Dual<double, 1>;
  std::vector<D> p;
  for (std::size_t j = 0; j < m.parameters.size(); ++j)
    p.push_back(D(m.parameters[j], {j == param(m, "amp") ? 1.0 : 0.0}));
  std::vector<D> y{D(1.0)}, f(1);
  m.equations.rhs<D>(1.5, y, p, f);
  EXPECT_EQ(f[0].tangent(0), 1.0) << "d f / d amp after the switch";
  m.equations.rhs<D>(0.5, y, p, f);
  EXPECT_EQ(f[0].tangent(0), 0.0) << "d f / d amp before the switch";
}

// SBML Level 2 (the PEtab suite's level): kinetic-law parameters are local.
TEST(SbmlModel, Level2LocalParameters) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level2/version4\" level=\"2\" version=\"4\">"
      "<model id=\"l2\"><listOfCompartments><compartment id=\"c\" size=\"4\"/></listOfCompartments>"
      "<listOfSpecies><species id=\"A\" compartment=\"c\" initialAmount=\"8\"/></listOfSpecies>"
      "<listOfReactions><reaction id=\"d\" reversible=\"false\"><listOfReactants>"
      "<speciesReference species=\"A\"/></listOfReactants><kineticLaw>" +
      math(mathml_apply("times", ci("kd") + ci("A") + ci("c"))) +
      "<listOfParameters><parameter id=\"kd\" value=\"0.125\"/></listOfParameters>"
      "</kineticLaw></reaction></listOfReactions></model></sbml>";
  const Model m = costate::sbml::read_string(xml, "level2.xml");
  EXPECT_EQ(m.initial_values(m.parameters), (std::vector<double>{2.0})) << "8 / 4";
  EXPECT_NEAR(rhs(m, 0.0, {2.0}, m.parameters)[0], -0.125 * 2.0, kSameArithmeticTol);
}

// ---- refused features: each error names the element, its id and the file.

std::string one_species(const std::string& extra, const std::string& law = "<ci>k</ci>") {
  return document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 1.0) + parameter("u", 0.0, false) +
      "</listOfParameters>" + extra + "<listOfReactions>" + reaction("r", "", "x:1", law) +
      "</listOfReactions>");
}

void expect_refused(const std::string& xml, const std::vector<std::string>& words) {
  const std::string e = error_of(xml, "refused.xml");
  // "refused.xml:<line>: …": the file and the line of the element refused.
  EXPECT_EQ(e.rfind("refused.xml:", 0), 0u) << e;
  EXPECT_TRUE(e.size() > 12 && std::isdigit(static_cast<unsigned char>(e[12]))) << e;
  for (const auto& w : words) EXPECT_NE(e.find(w), std::string::npos) << "'" << w << "' not in: " << e;
}

// An initial assignment is evaluated once, at the start time: q = time + 1
// started at t0 = 2 is 3 ever after (a state with zero derivative), and a
// rate rule reading it integrates 3.
TEST(SbmlModel, InitialAssignmentsAreHeldAtTheStartTime) {
  const std::string xml = document(
      "<listOfParameters>" + parameter("q", 0.0) + parameter("x", 0.0, false) +
      "</listOfParameters><listOfInitialAssignments><initialAssignment symbol=\"q\">" +
      math(mathml_apply("plus", kTime + cn(1))) +
      "</initialAssignment></listOfInitialAssignments><listOfRules><rateRule variable=\"x\">" +
      math(ci("q")) + "</rateRule></listOfRules>");
  const Model m = costate::sbml::read_string(xml, "held.xml");
  ASSERT_GE(m.state_index("q"), 0) << "a time-dependent initial assignment is held as a state";
  const std::vector<double> y0 = m.initial_values(m.parameters, 2.0);
  EXPECT_EQ(y0[static_cast<std::size_t>(m.state_index("q"))], 3.0);
  const std::vector<double> f = rhs(m, 7.0, y0, m.parameters);
  EXPECT_EQ(f[static_cast<std::size_t>(m.state_index("q"))], 0.0);
  EXPECT_EQ(f[static_cast<std::size_t>(m.state_index("x"))], 3.0);
}

// A boundary species and a constant species in concentration keep their
// amounts in a compartment that grows (dV/dt = 0.5): their concentrations
// dilute, dC/dt = −C·(dV/dt)/V.
TEST(SbmlModel, BoundaryAndConstantSpeciesDiluteInAGrowingCompartment) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"2\" constant=\"false\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("B", "V", "initialConcentration=\"4\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"true\" constant=\"false\"") +
      species("C", "V", "initialConcentration=\"3\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"true\"") +
      "</listOfSpecies><listOfRules><rateRule variable=\"V\">" + math(cn(0.5)) +
      "</rateRule></listOfRules>");
  const Model m = costate::sbml::read_string(xml, "dilution.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"B", "C", "V"}));
  const std::vector<double> y{4.0, 3.0, 2.5};
  const std::vector<double> f = rhs(m, 0.0, y, m.parameters);
  EXPECT_NEAR(f[0], -4.0 * 0.5 / 2.5, kSameArithmeticTol);
  EXPECT_NEAR(f[1], -3.0 * 0.5 / 2.5, kSameArithmeticTol);
  EXPECT_EQ(f[2], 0.5);
}

// A species in concentration in a compartment set by an assignment rule
// (V = 1 + t): its amount is the state "S_amount" (dA/dt = k), and S = A/V.
TEST(SbmlModel, SpeciesInACompartmentSetByAnAssignmentRule) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"false\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("S", "V", "initialConcentration=\"2\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 0.75) +
      "</listOfParameters><listOfRules><assignmentRule variable=\"V\">" +
      math(mathml_apply("plus", cn(1) + kTime)) + "</assignmentRule></listOfRules><listOfReactions>" +
      reaction("r", "", "S:1", ci("k")) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "assigned_volume.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"S_amount"}));
  EXPECT_EQ(m.initial_values(m.parameters, 0.0), (std::vector<double>{2.0}));  // C0 · V(0)
  const std::vector<double> y{3.0};
  EXPECT_EQ(rhs(m, 1.0, y, m.parameters)[0], 0.75);
  const std::vector<std::string> names = m.symbol_names();
  const std::vector<double> values = m.symbol_values(1.0, y, m.parameters);
  const auto at = [&](const std::string& id) {
    return values[static_cast<std::size_t>(std::find(names.begin(), names.end(), id) - names.begin())];
  };
  EXPECT_EQ(at("V"), 2.0);
  EXPECT_EQ(at("S"), 1.5);
}

// Species references as values (their id, stoichiometry 2, read by an
// assignment rule) and a species' conversion factor: dP/dt = f·ν·v / V.
TEST(SbmlModel, SpeciesReferencesAndConversionFactors) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"4\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("S", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      species("P", "V", "initialConcentration=\"0\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\" conversionFactor=\"cf\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 0.3) + parameter("cf", 0.5) +
      parameter("j", 0.0, false) +
      "</listOfParameters><listOfRules><assignmentRule variable=\"j\">" +
      math(mathml_apply("times", ci("nu") + cn(3))) +
      "</assignmentRule></listOfRules><listOfReactions>"
      "<reaction id=\"r\" reversible=\"false\" fast=\"false\"><listOfReactants><speciesReference species=\"S\" "
      "stoichiometry=\"1\" constant=\"true\"/></listOfReactants><listOfProducts><speciesReference "
      "id=\"nu\" species=\"P\" stoichiometry=\"2\" constant=\"true\"/></listOfProducts><kineticLaw>" +
      math(mathml_apply("times", ci("k") + ci("S"))) + "</kineticLaw></reaction></listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "references.xml");
  EXPECT_EQ(m.parameters[param(m, "nu")], 2.0);
  const std::vector<double> y{0.8, 0.1};
  const std::vector<double> f = rhs(m, 0.0, y, m.parameters);
  const double v = 0.3 * 0.8;
  EXPECT_NEAR(f[0], -v / 4.0, kSameArithmeticTol);
  EXPECT_NEAR(f[1], 0.5 * 2.0 * v / 4.0, kSameArithmeticTol);
  const std::vector<std::string> names = m.symbol_names();
  const std::vector<double> values = m.symbol_values(0.0, y, m.parameters);
  const auto j = std::find(names.begin(), names.end(), "j") - names.begin();
  EXPECT_EQ(values[static_cast<std::size_t>(j)], 6.0);
  const auto r = std::find(names.begin(), names.end(), "r") - names.begin();
  EXPECT_NEAR(values[static_cast<std::size_t>(r)], v, kSameArithmeticTol) << "the flux by reaction id";
}

// A model with no state (assignments only) and the MathML SBML allows
// beyond the expression engine's functions, lowered to them: quotient and
// rem round toward zero (rem has the dividend's sign), implies, factorial
// of a number, arcsec x = arccos(1/x), arccot x = arctan(1/x).
TEST(SbmlModel, AssignmentsOnlyAndTheLoweredMathML) {
  auto rule = [](const std::string& id, const std::string& body) {
    return "<assignmentRule variable=\"" + id + "\">" + math(body) + "</assignmentRule>";
  };
  std::string params, rules;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"quo", mathml_apply("quotient", cn(-7) + cn(2))},
      {"rem", mathml_apply("rem", cn(-7) + cn(2))},
      {"imp", mathml_apply("implies", "<false/><false/>")},
      {"fac", mathml_apply("factorial", cn(4))},
      {"sec", mathml_apply("arcsec", cn(2))},
      {"cot", mathml_apply("arccot", ci("k"))},
  };
  for (const auto& [id, body] : cases) {
    params += parameter(id, 0.0, false);
    rules += rule(id, body);
  }
  std::string xml = document("<listOfParameters>" + parameter("k", 0.5) + params +
                             "</listOfParameters><listOfRules>" + rules + "</listOfRules>");
  // quotient, rem and implies are Level 3 Version 2 MathML.
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"version1/core", "version2/core"},
                                 {"version=\"1\"", "version=\"2\""}})
    xml.replace(xml.find(from), from.size(), to);
  const Model m = costate::sbml::read_string(xml, "lowered.xml");
  EXPECT_TRUE(m.state_names.empty());
  const std::vector<std::string> names = m.symbol_names();
  const std::vector<double> values = m.symbol_values(0.0, {}, m.parameters);
  const auto at = [&](const std::string& id) {
    return values[static_cast<std::size_t>(std::find(names.begin(), names.end(), id) - names.begin())];
  };
  EXPECT_EQ(at("quo"), -3.0);
  EXPECT_EQ(at("rem"), -1.0);
  EXPECT_EQ(at("imp"), 1.0);
  EXPECT_EQ(at("fac"), 24.0);
  EXPECT_NEAR(at("sec"), std::acos(0.5), kSameArithmeticTol);
  EXPECT_NEAR(at("cot"), std::atan(2.0), kSameArithmeticTol);
}

// The comp package is flattened (libsbml's CompFlatteningConverter): a
// submodel's symbols take the prefix "<submodel>__"; a required package
// costate does not implement is refused by name.
TEST(SbmlModel, CompIsFlattenedAndOtherRequiredPackagesRefused) {
  const std::string comp =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" "
      "xmlns:comp=\"http://www.sbml.org/sbml/level3/version1/comp/version1\" level=\"3\" "
      "version=\"1\" comp:required=\"true\">"
      "<model id=\"top\"><comp:listOfSubmodels><comp:submodel comp:id=\"sub\" "
      "comp:modelRef=\"inner\"/></comp:listOfSubmodels></model>"
      "<comp:listOfModelDefinitions><comp:modelDefinition id=\"inner\"><listOfParameters>" +
      parameter("x", 1.0, false) + parameter("k", 0.7) +
      "</listOfParameters><listOfRules><rateRule variable=\"x\">" + math(ci("k")) +
      "</rateRule></listOfRules></comp:modelDefinition></comp:listOfModelDefinitions></sbml>";
  const Model m = costate::sbml::read_string(comp, "comp.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"sub__x"}));
  EXPECT_EQ(m.parameters[param(m, "sub__k")], 0.7);
  EXPECT_EQ(rhs(m, 0.0, {1.0}, m.parameters)[0], 0.7);

  const std::string qual =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" "
      "xmlns:qual=\"http://www.sbml.org/sbml/level3/version1/qual/version1\" level=\"3\" "
      "version=\"1\" qual:required=\"true\"><model id=\"m\"><listOfParameters>" +
      parameter("x", 1.0, false) + "</listOfParameters></model></sbml>";
  expect_refused(qual, {"package 'qual'", "required"});
}

// Events: the trigger's relations become roots (gt(t, 1): 1 − t, true on side
// −1; geq(x, k): x − k, true on side +1), a parameter and a compartment that
// an event assigns become states, and resizing the compartment keeps the
// amount of the species in concentration in it: x⁺ = x V⁻ / V⁺.
TEST(SbmlModel, EventsBecomeTheModelsEvents) {
  const std::string event =
      "<listOfEvents><event id=\"boom\" useValuesFromTriggerTime=\"false\">"
      "<trigger initialValue=\"false\" persistent=\"false\">" +
      math(mathml_apply("and", mathml_apply("gt", kTime + cn(1)) + mathml_apply("geq", ci("x") + ci("k")))) +
      "</trigger><delay>" + math(cn(0.5)) + "</delay><priority>" + math(ci("u")) +
      "</priority><listOfEventAssignments><eventAssignment variable=\"k\">" +
      math(mathml_apply("times", cn(2) + ci("k"))) + "</eventAssignment><eventAssignment variable=\"V\">" +
      math(cn(4)) + "</eventAssignment></listOfEventAssignments></event></listOfEvents>";
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"2\" constant=\"false\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 1.5, false) + parameter("u", 3.0) +
      "</listOfParameters>" + event + "<listOfReactions>" + reaction("r", "", "x:1", ci("u")) +
      "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "events.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"x", "V", "k"}));
  EXPECT_EQ(m.parameter_names, (std::vector<std::string>{"u"}));
  EXPECT_EQ(m.initial_values(m.parameters), (std::vector<double>{1.0, 2.0, 1.5}));
  // Changed by the event only: zero derivatives; x' = u / V.
  const std::vector<double> y{0.7, 2.0, 1.5}, p{3.0};
  EXPECT_EQ(rhs(m, 0.0, y, p)[1], 0.0);
  EXPECT_EQ(rhs(m, 0.0, y, p)[2], 0.0);
  EXPECT_NEAR(rhs(m, 0.0, y, p)[0], 3.0 / 2.0, kSameArithmeticTol);
  const costate::ode::EquationModel& eq = m.equations;
  ASSERT_EQ(eq.n_events(), 1u);
  ASSERT_EQ(eq.n_roots(), 2u);
  std::vector<double> g(2);
  eq.roots<double>(1.25, y, p, g);
  EXPECT_EQ(g[0], 1.0 - 1.25);
  EXPECT_EQ(g[1], 0.7 - 1.5);
  using S = std::vector<std::int8_t>;
  EXPECT_TRUE(eq.event_trigger(0, 1.25, y, p, S{-1, +1}));
  EXPECT_FALSE(eq.event_trigger(0, 1.25, y, p, S{-1, -1}));
  const costate::ode::EventAttributes a = eq.event_attributes(0);
  EXPECT_EQ(a.name, "boom");
  EXPECT_FALSE(a.initial_value);
  EXPECT_FALSE(a.persistent);
  EXPECT_FALSE(a.use_values_from_trigger_time);
  EXPECT_TRUE(a.has_delay);
  EXPECT_TRUE(a.has_priority);
  EXPECT_EQ(eq.event_delay(0, 1.25, y, p), 0.5);
  EXPECT_EQ(eq.event_priority(0, 1.25, y, p), 3.0);
  // Targets k, V and (the amount kept) x.
  const std::span<const std::size_t> targets = eq.event_targets(0);
  ASSERT_EQ(std::vector<std::size_t>(targets.begin(), targets.end()),
            (std::vector<std::size_t>{2, 1, 0}));
  std::vector<double> values(3);
  eq.event_assign<double>(0, 1.25, y, p, values);
  EXPECT_EQ(values[0], 2.0 * 1.5);
  EXPECT_EQ(values[1], 4.0);
  EXPECT_NEAR(values[2], 0.7 * 2.0 / 4.0, kSameArithmeticTol);
}

TEST(SbmlModel, RefusesEventsItCannotImport) {
  const auto event = [](const std::string& trigger, const std::string& variable) {
    return "<listOfEvents><event id=\"boom\" useValuesFromTriggerTime=\"true\">"
           "<trigger initialValue=\"true\" persistent=\"true\">" + math(trigger) +
           "</trigger><listOfEventAssignments><eventAssignment variable=\"" + variable + "\">" +
           math(cn(2)) + "</eventAssignment></listOfEventAssignments></event></listOfEvents>";
  };
  expect_refused(one_species(event(mathml_apply("eq", kTime + cn(1)), "u")),
                 {"event 'boom'", "equality"});
  expect_refused(one_species(event(ci("u"), "u")), {"event 'boom'", "condition"});
  expect_refused(one_species("<listOfRules><assignmentRule variable=\"u\">" + math(cn(1)) +
                             "</assignmentRule></listOfRules>" +
                             event(mathml_apply("gt", kTime + cn(1)), "u")),
                 {"event 'boom'", "assignment rule"});
}

// An algebraic rule 0 = y + x − T determines y, the one variable it reads
// that nothing else determines (x is changed by a reaction, T constant):
// y is an algebraic state with the rule as its residual, made consistent
// at t0, and with x' = −k x the solution is y = T − x0 e^{−kt}.
TEST(SbmlModel, AlgebraicRuleDeterminesTheFreeVariable) {
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialAmount=\"2\" hasOnlySubstanceUnits=\"true\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 0.5) + parameter("T", 5.0) +
      parameter("y", 0.0, false) +
      "</listOfParameters><listOfRules><algebraicRule>" +
      math(mathml_apply("minus", mathml_apply("plus", ci("y") + ci("x")) + ci("T"))) +
      "</algebraicRule></listOfRules><listOfReactions>" +
      reaction("r", "x:1", "", mathml_apply("times", ci("k") + ci("x"))) + "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "algebraic.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(m.equations.algebraic_states(), (std::vector<std::size_t>{1}));
  // The residual row is the rule: y + x − T at any (x, y).
  const std::vector<double> f = rhs(m, 0.0, {1.5, 0.25}, m.parameters);
  EXPECT_NEAR(f[0], -0.5 * 1.5, kSameArithmeticTol);
  EXPECT_NEAR(f[1], 0.25 + 1.5 - 5.0, kSameArithmeticTol);
  // Integrated by a DAE integrator from the inconsistent guess y = 0.
  const std::vector<double> times{0.0, 1.0, 4.0};
  // rtol 1e-10: the integrators' global error stays near 1e-9 here.
  constexpr double kIntegrationTol = 1e-8;
  for (const auto method : {costate::ode::Method::Bdf, costate::ode::Method::Idas}) {
    costate::ode::Problem<costate::ode::EquationModel> problem{
        m.equations, m.initial_values(m.parameters), m.parameters, {0.0, 4.0}, times};
    const costate::ode::Solution sol = costate::ode::integrate(
        problem, {.method = method, .rtol = 1e-10, .atol = 1e-12});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
    for (std::size_t k = 0; k < times.size(); ++k) {
      const double x = 2.0 * std::exp(-0.5 * times[k]);
      EXPECT_NEAR(sol.y[2 * k], x, kIntegrationTol) << to_string(method);
      EXPECT_NEAR(sol.y[2 * k + 1], 5.0 - x, kIntegrationTol) << to_string(method);
    }
  }
}

// A fast reaction A <-> B (kf A − kr B) with a slow B -> ∅ (k B): the fast
// equilibrium B = (kf/kr) A holds from t = 0 on, with A + B = T conserved
// by the fast reaction, so T' = −k B = −k q T with q = kf/(kf + kr):
// T = T0 e^{−k q t}, A = (1 − q) T, B = q T. B is the algebraic state (the
// pivot), A the conserved amount "A_total" plus B's share.
TEST(SbmlModel, FastReactionIsAnEquilibriumConstraint) {
  const std::string fast =
      reaction("fast", "A:1", "B:1",
               mathml_apply("minus", mathml_apply("times", ci("kf") + ci("A")) +
                                         mathml_apply("times", ci("kr") + ci("B"))));
  const std::string xml = document(
      "<listOfCompartments><compartment id=\"V\" size=\"2\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" + floating_species("A", "V", 3.0) + floating_species("B", "V", 1.0) +
      "</listOfSpecies><listOfParameters>" + parameter("kf", 2.0) + parameter("kr", 3.0) +
      parameter("k", 0.4) + "</listOfParameters><listOfReactions>" +
      std::string(fast).replace(fast.find("fast=\"false\""), 12, "fast=\"true\"") +
      reaction("slow", "B:1", "", mathml_apply("times", ci("k") + ci("B") + ci("V"))) +
      "</listOfReactions>");
  const Model m = costate::sbml::read_string(xml, "fast.xml");
  ASSERT_EQ(m.equations.algebraic_states().size(), 1u);
  const std::string pivot = m.state_names[m.equations.algebraic_states()[0]];
  const std::vector<double> times{0.0, 0.5, 3.0};
  costate::ode::Problem<costate::ode::EquationModel> problem{
      m.equations, m.initial_values(m.parameters), m.parameters, {0.0, 3.0}, times};
  const costate::ode::Solution sol =
      costate::ode::integrate(problem, {.method = costate::ode::Method::Idas, .rtol = 1e-10,
                                        .atol = 1e-12});
  ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
  const std::vector<std::string> names = m.symbol_names();
  const auto at = [&](const std::string& id) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), id) - names.begin());
  };
  const double q = 2.0 / 5.0, T0 = 3.0 + 1.0;  // concentrations (V constant)
  constexpr double kIntegrationTol = 1e-8;      // rtol 1e-10, as above
  const std::size_t n = m.state_names.size();
  for (std::size_t k = 0; k < times.size(); ++k) {
    const std::vector<double> y(sol.y.begin() + static_cast<long>(k * n),
                                sol.y.begin() + static_cast<long>((k + 1) * n));
    const std::vector<double> v = m.symbol_values(times[k], y, m.parameters);
    const double T = T0 * std::exp(-0.4 * q * times[k]);
    EXPECT_NEAR(v[at("A")], (1.0 - q) * T, kIntegrationTol) << "t = " << times[k] << ", pivot " << pivot;
    EXPECT_NEAR(v[at("B")], q * T, kIntegrationTol) << "t = " << times[k];
  }
}

TEST(SbmlModel, RefusesAlgebraicRulesThatDetermineNothing) {
  const std::string rule = "<algebraicRule>" + math(mathml_apply("minus", ci("u") + ci("k"))) +
                           "</algebraicRule>";
  // Two rules for the one free variable u: overdetermined.
  expect_refused(one_species("<listOfRules>" + rule + rule + "</listOfRules>"),
                 {"algebraic rule 2", "not structurally determined", "'u'"});
  // A rule that reads only a constant and a species a reaction changes.
  expect_refused(one_species("<listOfRules><algebraicRule>" +
                             math(mathml_apply("minus", ci("x") + ci("k"))) +
                             "</algebraicRule></listOfRules>"),
                 {"algebraic rule 1", "x - k", "not structurally determined"});
}

// A model whose every state is algebraic (a rule, a fast reaction's
// equilibrium) has no differential state: each output time is the
// constraints' consistent solve (the DAE layer's all-algebraic models).
TEST(SbmlModel, ModelsWithoutADifferentialStateSolveTheirRulesAtEachTime) {
  const Model m = costate::sbml::read_string(
      document("<listOfParameters>" + parameter("k", 1.5) + parameter("u", 0.0, false) +
               "</listOfParameters><listOfRules><algebraicRule>" +
               math(mathml_apply("minus", ci("u") + ci("k"))) + "</algebraicRule></listOfRules>"),
      "all_algebraic.xml");
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"u"}));
  EXPECT_EQ(m.equations.algebraic_states(), (std::vector<std::size_t>{0}));
  // u = k from the guess 0 (a linear rule: exact up to round-off).
  for (const auto method : {costate::ode::Method::Bdf, costate::ode::Method::Idas}) {
    costate::ode::Problem<costate::ode::EquationModel> problem{
        m.equations, m.initial_values(m.parameters), m.parameters, {0.0, 2.0}, {0.0, 1.0, 2.0}};
    const costate::ode::Solution sol = costate::ode::integrate(
        problem, {.method = method, .rtol = 1e-10, .atol = 1e-12});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
    for (std::size_t k = 0; k < 3; ++k) EXPECT_NEAR(sol.y[k], 1.5, kSameArithmeticTol) << to_string(method);
  }
}

// Every refusal names the line of the element refused (libsbml's line).
TEST(SbmlModel, RefusalsNameTheLine) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                                      // 1
      "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">\n"
      "<model id=\"m\">\n"                                                                // 3
      "<listOfParameters>\n"                                                              // 4
      "  <parameter id=\"k\" value=\"1\" constant=\"true\"/>\n"                           // 5
      "  <parameter id=\"u\" value=\"1\" constant=\"false\"/>\n"                          // 6
      "</listOfParameters>\n"                                                             // 7
      "<listOfRules>\n"                                                                   // 8
      "  <rateRule variable=\"u\">\n"                                                     // 9
      "    " + math("<piecewise><piece><cn>1</cn><apply><eq/><ci>u</ci><cn>2</cn></apply>"
                    "</piece><otherwise><cn>0</cn></otherwise></piecewise>") + "\n"
      "  </rateRule>\n"
      "</listOfRules>\n</model>\n</sbml>\n";
  const std::string e = error_of(xml, "lines.xml");
  EXPECT_EQ(e.rfind("lines.xml:9: rate rule for parameter 'u'", 0), 0u) << e;
  const std::string no_value =
      xml.substr(0, xml.find("  <parameter id=\"u\"")) +
      "  <parameter id=\"u\" constant=\"true\"/>\n</listOfParameters>\n</model>\n</sbml>\n";
  const std::string e2 = error_of(no_value, "lines.xml");
  EXPECT_EQ(e2.rfind("lines.xml:6: parameter 'u': has no value", 0), 0u) << e2;
}

// delay() is simulated by the method of steps (delay_test.cpp), but not
// in a model with events (the event driver has no history hook).
TEST(SbmlModel, RefusesDelayWithEvents) {
  const std::string delay =
      "<apply><csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/sbml/symbols/delay\">"
      "delay</csymbol><ci>x</ci><cn>1</cn></apply>";
  std::string xml = one_species("", delay);
  xml.replace(xml.find("</model>"), 8,
              "<listOfEvents><event id=\"E\" useValuesFromTriggerTime=\"true\"><trigger "
              "initialValue=\"false\" persistent=\"true\">" +
                  math("<apply><gt/><csymbol encoding=\"text\" "
                       "definitionURL=\"http://www.sbml.org/sbml/symbols/time\">time</csymbol>"
                       "<cn>1</cn></apply>") +
                  "</trigger><listOfEventAssignments><eventAssignment variable=\"x\">" +
                  math("<cn>2</cn>") +
                  "</eventAssignment></listOfEventAssignments></event></listOfEvents></model>");
  expect_refused(xml, {"kinetic law of reaction 'r'", "delay() in a model with events",
                       "delay(x, 1)"});
}

// lt/leq/gt/geq on the state are switching functions (switching_test.cpp);
// eq and neq on the state are refused.
TEST(SbmlModel, RefusesStateDependentEquality) {
  const std::string law = "<piecewise><piece>" + cn(1) + mathml_apply("eq", ci("x") + cn(2)) +
                          "</piece><otherwise>" + cn(0) + "</otherwise></piecewise>";
  expect_refused(one_species("", law), {"kinetic law of reaction 'r'", "depend on the state"});
  // Through an assignment rule that depends on the state.
  expect_refused(one_species("<listOfRules><assignmentRule variable=\"u\">" +
                                 math("<piecewise><piece>" + cn(1) + mathml_apply("neq", ci("x") + cn(2)) +
                                      "</piece><otherwise>" + cn(0) + "</otherwise></piecewise>") +
                                 "</assignmentRule></listOfRules>",
                             "<ci>u</ci>"),
                 {"assignment rule for parameter 'u'", "depend on the state"});
}

TEST(SbmlModel, RefusesUnsupportedMathML) {
  // factorial of a value that is not an integer by floor or ceiling.
  expect_refused(one_species("", mathml_apply("factorial", ci("k"))),
                 {"reaction 'r'", "factorial", "floor or ceiling"});
}

// factorial of an integer that varies (floor/ceiling of time here; of the
// state it is a switching function's mode): n! exactly for 0 ≤ n ≤ 170,
// NaN for a negative n (undefined in SBML), ∞ beyond 170.
TEST(SbmlModel, FactorialOfAVaryingInteger) {
  const std::string xml = document(
      "<listOfParameters>" + parameter("y", 0.0, false) + parameter("s", 0.0) +
      "</listOfParameters><listOfRules><rateRule variable=\"y\">" +
      math(mathml_apply("factorial",
                        mathml_apply("floor", mathml_apply("minus", kTime + ci("s"))))) +
      "</rateRule></listOfRules>");
  const Model m = costate::sbml::read_string(xml, "factorial.xml");
  const std::vector<double> p = m.parameters;
  // Up to 169 products, reassociated against tgamma's own rounding: well
  // inside 1e-13 relative.
  constexpr double kProductTol = 1e-13;
  for (double t : {0.2, 1.5, 4.5, 5.99, 12.0, 170.5}) {
    const double n = std::floor(t);
    EXPECT_NEAR(rhs(m, t, {0.0}, p)[0], std::tgamma(n + 1.0), kProductTol * std::tgamma(n + 1.0))
        << "t = " << t;
  }
  EXPECT_TRUE(std::isinf(rhs(m, 171.5, {0.0}, p)[0]));
  std::vector<double> shifted = p;
  shifted[param(m, "s")] = 3.0;
  EXPECT_TRUE(std::isnan(rhs(m, 1.0, {0.0}, shifted)[0]));  // (−2)!
}

TEST(SbmlModel, RefusesOtherUnsupportedElements) {
  expect_refused(one_species("<listOfConstraints><constraint>" + math(mathml_apply("gt", ci("x") + cn(0))) +
                             "</constraint></listOfConstraints>"),
                 {"constraint", "not supported"});
  // A reaction without a kinetic law.
  const std::string no_law = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfReactions><reaction id=\"bare\" reversible=\"false\" fast=\"false\">"
      "<listOfProducts><speciesReference species=\"x\" stoichiometry=\"1\" constant=\"true\"/>"
      "</listOfProducts></reaction></listOfReactions>");
  expect_refused(no_law, {"reaction 'bare'", "kinetic law"});
  // A species with no initial value.
  const std::string no_value = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies>");
  expect_refused(no_value, {"species 'x'", "initial value"});
  // An unknown symbol and a recursive function.
  expect_refused(one_species("", ci("nowhere")), {"reaction 'r'", "unknown symbol 'nowhere'"});
  expect_refused(one_species("<listOfFunctionDefinitions><functionDefinition id=\"h\">" +
                                 math("<lambda><bvar><ci>a</ci></bvar><apply><ci>h</ci><ci>a</ci></apply></lambda>") +
                                 "</functionDefinition></listOfFunctionDefinitions>",
                             "<apply><ci>h</ci><ci>k</ci></apply>"),
                 {"function definition 'h'", "recursion"});
  // The id t (costate's time).
  const std::string t_id = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("t", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies>");
  expect_refused(t_id, {"species 't'", "time"});
}

// References to the wrong kind of element (invalid SBML that libsbml reads
// without complaint): each names the element, the id and what was expected,
// instead of being dropped silently or ending in a bare std::out_of_range.
TEST(SbmlModel, RefusesReferencesToTheWrongKindOfElement) {
  // A species whose compartment attribute names another species.
  const std::string in_species = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "V", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      species("y", "x", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies>");
  expect_refused(in_species, {"species 'y'", "compartment attribute 'x'", "names a species, not a compartment"});
  // A species in a compartment that is a parameter (declared after the species).
  const std::string in_parameter = document(
      "<listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/></listOfCompartments>"
      "<listOfSpecies>" +
      species("x", "k", "initialConcentration=\"1\" hasOnlySubstanceUnits=\"false\" boundaryCondition=\"false\" constant=\"false\"") +
      "</listOfSpecies><listOfParameters>" + parameter("k", 1.0) + "</listOfParameters>");
  expect_refused(in_parameter, {"species 'x'", "compartment 'k' does not exist"});
  auto rule = [](const std::string& kind, const std::string& variable, const std::string& body) {
    return "<" + kind + " variable=\"" + variable + "\">" + math(body) + "</" + kind + ">";
  };
  // Rules whose variable is a reaction, or nothing at all.
  expect_refused(one_species("<listOfRules>" + rule("assignmentRule", "r", cn(2)) + "</listOfRules>"),
                 {"assignment rule (variable 'r')", "'r' is a reaction", "compartments, species, parameters and species references"});
  expect_refused(one_species("<listOfRules>" + rule("rateRule", "ghost", cn(2)) + "</listOfRules>"),
                 {"rate rule (variable 'ghost')", "no compartment, species, parameter or speciesReference has this id"});
  expect_refused(one_species("<listOfInitialAssignments><initialAssignment symbol=\"ghost\">" + math(cn(2)) +
                             "</initialAssignment></listOfInitialAssignments>"),
                 {"initial assignment (variable 'ghost')", "no compartment"});
  // Two rules for one variable (the first used to be dropped silently).
  expect_refused(one_species("<listOfRules>" + rule("assignmentRule", "u", cn(2)) +
                             rule("rateRule", "u", cn(3)) + "</listOfRules>"),
                 {"rate rule 2 (variable 'u')", "already has an assignment rule", "one rule only"});
  // An initial assignment and an assignment rule for one symbol; two initial assignments.
  expect_refused(one_species("<listOfInitialAssignments><initialAssignment symbol=\"u\">" + math(cn(2)) +
                             "</initialAssignment></listOfInitialAssignments><listOfRules>" +
                             rule("assignmentRule", "u", cn(2)) + "</listOfRules>"),
                 {"initial assignment 1 (symbol 'u')", "also has an assignment rule"});
  expect_refused(one_species("<listOfInitialAssignments><initialAssignment symbol=\"k\">" + math(cn(2)) +
                             "</initialAssignment><initialAssignment symbol=\"k\">" + math(cn(3)) +
                             "</initialAssignment></listOfInitialAssignments>"),
                 {"initial assignment 2 (symbol 'k')", "already has an initial assignment"});
}

TEST(SbmlModel, MalformedDocumentsNameTheFileAndLine) {
  const std::string e = error_of("<?xml version=\"1.0\"?>\n<sbml level=\"3\" version=\"1\">\n<model>\n</sbml>", "broken.xml");
  EXPECT_NE(e.find("broken.xml"), std::string::npos) << e;
  EXPECT_NE(e.find("line "), std::string::npos) << e;
  EXPECT_NE(e.find(", column "), std::string::npos) << e;
  try {
    (void)costate::sbml::read_file("/nonexistent/model.xml");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const costate::Error& err) {
    EXPECT_NE(std::string(err.what()).find("/nonexistent/model.xml"), std::string::npos);
  }
}

}  // namespace
