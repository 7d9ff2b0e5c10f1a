// `model: {sbml: file}` from input files with the costate commands: run
// against the closed-form solution (also after --set overrides of an SBML
// parameter and an initial state), sensitivity checked by gradcheck (Taylor
// test and central differences), calibrate recovering the rates that made
// the data, and bad input naming the file and the element.
//
// The model: A ⇌ B in a compartment of size V = 2, concentrations,
// kinetic laws k1·A·V and k2·B·V (amount per time), A(0) = a0 by an initial
// assignment, B(0) = 0.5:
//     A' = −k1 A + k2 B,  B' = k1 A − k2 B,
//     A(t) = S k2/(k1+k2) + (A0 − S k2/(k1+k2)) e^{−(k1+k2) t},  S = A0 + B0.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// CVODES at rtol 1e-10, atol 1e-12 against the closed form: its global
// error is far below this.
constexpr double kClosedFormTol = 1e-7;


const char* kModel = R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
<model id="conversion">
<listOfCompartments><compartment id="V" size="2" constant="true"/></listOfCompartments>
<listOfSpecies>
  <species id="A" compartment="V" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>
  <species id="B" compartment="V" initialConcentration="0.5" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>
</listOfSpecies>
<listOfParameters>
  <parameter id="a0" value="1.5" constant="true"/>
  <parameter id="k1" value="0.8" constant="true"/>
  <parameter id="k2" value="0.3" constant="true"/>
</listOfParameters>
<listOfInitialAssignments>
  <initialAssignment symbol="A"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci>a0</ci></math></initialAssignment>
</listOfInitialAssignments>
<listOfReactions>
  <reaction id="fwd" reversible="false" fast="false">
    <listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>
    <listOfProducts><speciesReference species="B" stoichiometry="1" constant="true"/></listOfProducts>
    <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
      <apply><times/><ci>k1</ci><ci>A</ci><ci>V</ci></apply></math></kineticLaw>
  </reaction>
  <reaction id="rev" reversible="false" fast="false">
    <listOfReactants><speciesReference species="B" stoichiometry="1" constant="true"/></listOfReactants>
    <listOfProducts><speciesReference species="A" stoichiometry="1" constant="true"/></listOfProducts>
    <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
      <apply><times/><ci>k2</ci><ci>B</ci><ci>V</ci></apply></math></kineticLaw>
  </reaction>
</listOfReactions>
</model>
</sbml>
)";

double closed_form_A(double a0, double b0, double k1, double k2, double t) {
  const double s = a0 + b0, eq = s * k2 / (k1 + k2);
  return eq + (a0 - eq) * std::exp(-(k1 + k2) * t);
}

using Result = costate::test::CommandResult;

class SbmlCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_sbml_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models");
    write("models/conversion.xml", kModel);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  Result run(const std::string& args) { return costate::test::run_command(dir_, COSTATE_EXE, args); }
  fs::path dir_;
};

TEST_F(SbmlCli, RunMatchesTheClosedFormAndHonoursOverrides) {
  const std::string in = write("run.yaml",
                               "model: {sbml: models/conversion.xml}\n"
                               "time: {end: 3}\n"
                               "integrator: {method: cvodes_bdf, rtol: 1.0e-10, atol: 1.0e-12}\n");
  const Result r = run("run '" + in + "' --json -q");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["state_names"], (std::vector<std::string>{"A", "B"}));
  EXPECT_NEAR(j["final_state"][0].get<double>(), closed_form_A(1.5, 0.5, 0.8, 0.3, 3.0), kClosedFormTol);
  // --set of an SBML parameter (k1), of the parameter an initial assignment
  // uses (a0), and of an initial state (B).
  const Result o = run("run '" + in + "' --json -q --set parameters.k1=0.4 --set parameters.a0=2.5 "
                       "--set initial_state.B=1.25");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NEAR(Json::parse(o.out)["final_state"][0].get<double>(),
              closed_form_A(2.5, 1.25, 0.4, 0.3, 3.0), kClosedFormTol);
  // The parameters: section overrides the SBML values too.
  const std::string in2 = write("run2.yaml",
                                "model: {sbml: models/conversion.xml}\n"
                                "parameters: {k2: 0.05}\n"
                                "initial_state: {A: 1.0}\n"
                                "time: {end: 3}\n"
                                "integrator: {method: cvodes_bdf, rtol: 1.0e-10, atol: 1.0e-12}\n");
  const Result p = run("run '" + in2 + "' --json -q");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NEAR(Json::parse(p.out)["final_state"][0].get<double>(),
              closed_form_A(1.0, 0.5, 0.8, 0.05, 3.0), kClosedFormTol);
}

// Every SBML symbol at the final time in --json (and at every output time
// in the HDF5 output's /symbols): the states, the parameters, the
// compartment size and each reaction's flux, by id.
TEST_F(SbmlCli, RunJsonHoldsEverySymbol) {
  const std::string in = write("symbols.yaml",
                               "model: {sbml: models/conversion.xml}\n"
                               "time: {end: 3}\n"
                               "integrator: {method: cvodes_bdf, rtol: 1.0e-10, atol: 1.0e-12}\n");
  const Result r = run("run '" + in + "' --json -q");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  const auto names = j["symbol_names"].get<std::vector<std::string>>();
  const auto values = j["final_symbols"].get<std::vector<double>>();
  ASSERT_EQ(names.size(), values.size());
  auto at = [&](const std::string& id) {
    const auto it = std::find(names.begin(), names.end(), id);
    EXPECT_NE(it, names.end()) << "no symbol " << id;
    return it == names.end() ? std::nan("") : values[static_cast<std::size_t>(it - names.begin())];
  };
  const double a = closed_form_A(1.5, 0.5, 0.8, 0.3, 3.0), b = 2.0 - a;
  EXPECT_NEAR(at("A"), a, kClosedFormTol);
  EXPECT_EQ(at("V"), 2.0);
  EXPECT_EQ(at("k1"), 0.8);
  EXPECT_NEAR(at("fwd"), 0.8 * a * 2.0, kClosedFormTol);  // k1·A·V
  EXPECT_NEAR(at("rev"), 0.3 * b * 2.0, kClosedFormTol);  // k2·B·V
}

// The gradient of an objective through the SBML model (including the
// initial assignment A(0) = a0), checked by gradcheck's Taylor test and
// central differences, and forward sensitivities agreeing with the adjoint.
TEST_F(SbmlCli, SensitivityPassesGradcheck) {
  const std::string in = write("grad.yaml",
                               "model: {sbml: models/conversion.xml}\n"
                               "time: {end: 4}\n"
                               "integrator: {method: rk4, dt: 0.01}\n"
                               "objective: {terminal: \"(A - 0.3)^2 + B*k2\", integral: \"A*B\"}\n");
  const Result s = run("sensitivity '" + in + "' --json -q");
  ASSERT_EQ(s.code, 0) << s.err;
  const Json js = Json::parse(s.out);
  for (const char* p : {"a0", "k1", "k2", "V"}) EXPECT_TRUE(js["gradient"].contains(p)) << p;
  EXPECT_NE(js["gradient"]["a0"].get<double>(), 0.0) << "the initial assignment carries a0";
  const Result f = run("sensitivity '" + in + "' --json -q --set sensitivity.method=forward");
  ASSERT_EQ(f.code, 0) << f.err;
  const Json jf = Json::parse(f.out);
  // The same discrete solution differentiated two ways: 1e-10 relative.
  constexpr double kForwardVsAdjointTol = 1e-10;
  for (const char* p : {"a0", "k1", "k2", "V"})
    EXPECT_NEAR(jf["gradient"][p].get<double>(), js["gradient"][p].get<double>(),
                kForwardVsAdjointTol * std::max(1.0, std::abs(js["gradient"][p].get<double>())))
        << p;
  const Result g = run("gradcheck '" + in + "' --json -q");
  EXPECT_EQ(g.code, 0) << g.out << g.err;
  const Json jg = Json::parse(g.out);
  EXPECT_EQ(jg["status"], "ok");
  EXPECT_GE(jg["taylor"]["min_order"].get<double>(), 1.9);
  EXPECT_TRUE(jg["finite_differences"]["passed"].get<bool>());
}

// Data made from k1 = 0.8, k2 = 0.3 (the closed form, no noise); the fit
// starts from k1 = 0.4, k2 = 0.6 and must recover them.
TEST_F(SbmlCli, CalibrateRecoversTheRates) {
  std::string csv = "t,A\n";
  for (int k = 1; k <= 16; ++k) {
    char row[96];
    const double t = 0.25 * k;
    std::snprintf(row, sizeof row, "%.3f,%.17g\n", t, closed_form_A(1.5, 0.5, 0.8, 0.3, t));
    csv += row;
  }
  write("data.csv", csv);
  const std::string in = write(
      "fit.yaml",
      "model: {sbml: models/conversion.xml}\n"
      "parameters: {k1: 0.4, k2: 0.6}\n"
      "time: {end: 4, output_every: 0.25}\n"
      "integrator: {method: rk4, dt: 0.005}\n"
      "calibration:\n"
      "  parameters: {k1: {lower: 0.01, upper: 10, log: true}, k2: {lower: 0.01, upper: 10, log: true}}\n"
      "  data: {file: data.csv, noise: {A: 0.01}}\n"
      "  optimizer: {method: bntr, gatol: 1.0e-10, grtol: 0, max_iterations: 100}\n");
  const Result c = run("calibrate '" + in + "' --json -q");
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  const Json j = Json::parse(c.out);
  // RK4 at dt = 0.005 vs the exact data: the fitted rates carry the
  // discretisation error, ~1e-9 relative.
  constexpr double kFitTol = 1e-6;
  EXPECT_NEAR(j["parameters"]["k1"].get<double>(), 0.8, kFitTol) << c.out;
  EXPECT_NEAR(j["parameters"]["k2"].get<double>(), 0.3, kFitTol) << c.out;
}

// A stimulus switched on at t = 1 (piecewise on time in an assignment
// rule), a Michaelis–Menten function definition and a local parameter: the
// gradient passes gradcheck, and forward sensitivities agree with it.
TEST_F(SbmlCli, GradientThroughPiecewiseFunctionsAndLocalParameters) {
  write("models/stimulus.xml", R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
<model id="stimulus">
<listOfFunctionDefinitions>
  <functionDefinition id="mm"><math xmlns="http://www.w3.org/1998/Math/MathML">
    <lambda><bvar><ci>v</ci></bvar><bvar><ci>km</ci></bvar><bvar><ci>s</ci></bvar>
      <apply><divide/><apply><times/><ci>v</ci><ci>s</ci></apply><apply><plus/><ci>km</ci><ci>s</ci></apply></apply>
    </lambda></math></functionDefinition>
</listOfFunctionDefinitions>
<listOfCompartments><compartment id="cell" size="1.5" constant="true"/></listOfCompartments>
<listOfSpecies>
  <species id="R" compartment="cell" initialConcentration="1" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>
  <species id="Rp" compartment="cell" initialConcentration="0" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>
</listOfSpecies>
<listOfParameters>
  <parameter id="amp" value="2" constant="true"/>
  <parameter id="vmax" value="0.7" constant="true"/>
  <parameter id="u" value="0" constant="false"/>
</listOfParameters>
<listOfRules>
  <assignmentRule variable="u"><math xmlns="http://www.w3.org/1998/Math/MathML">
    <piecewise><piece><ci>amp</ci><apply><geq/>
      <csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">time</csymbol><cn>1</cn>
    </apply></piece><otherwise><cn>0</cn></otherwise></piecewise></math></assignmentRule>
</listOfRules>
<listOfReactions>
  <reaction id="act" reversible="false" fast="false">
    <listOfReactants><speciesReference species="R" stoichiometry="1" constant="true"/></listOfReactants>
    <listOfProducts><speciesReference species="Rp" stoichiometry="1" constant="true"/></listOfProducts>
    <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
      <apply><times/><ci>cell</ci><ci>u</ci><ci>R</ci></apply></math></kineticLaw>
  </reaction>
  <reaction id="deact" reversible="false" fast="false">
    <listOfReactants><speciesReference species="Rp" stoichiometry="1" constant="true"/></listOfReactants>
    <listOfProducts><speciesReference species="R" stoichiometry="1" constant="true"/></listOfProducts>
    <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
      <apply><times/><ci>cell</ci><apply><ci>mm</ci><ci>vmax</ci><ci>km</ci><ci>Rp</ci></apply></apply></math>
      <listOfLocalParameters><localParameter id="km" value="0.4"/></listOfLocalParameters>
    </kineticLaw>
  </reaction>
</listOfReactions>
</model>
</sbml>
)");
  const std::string in = write("stim.yaml",
                               "model: {sbml: models/stimulus.xml}\n"
                               "time: {end: 3}\n"
                               "integrator: {method: rk4, dt: 0.01}\n"
                               "objective: {terminal: \"(Rp - 0.5)^2\", integral: \"0.1*R*Rp\"}\n");
  const Result s = run("sensitivity '" + in + "' --json -q");
  ASSERT_EQ(s.code, 0) << s.err;
  const Json js = Json::parse(s.out);
  EXPECT_TRUE(js["gradient"].contains("deact_km")) << s.out;
  EXPECT_NE(js["gradient"]["amp"].get<double>(), 0.0) << "amp acts after the switch";
  const Result f = run("sensitivity '" + in + "' --json -q --set sensitivity.method=forward");
  ASSERT_EQ(f.code, 0) << f.err;
  const Json jf = Json::parse(f.out);
  constexpr double kForwardVsAdjointTol = 1e-10;  // the same discrete solution
  for (const char* p : {"amp", "vmax", "deact_km", "cell"})
    EXPECT_NEAR(jf["gradient"][p].get<double>(), js["gradient"][p].get<double>(),
                kForwardVsAdjointTol * std::max(1.0, std::abs(js["gradient"][p].get<double>())))
        << p;
  const Result g = run("gradcheck '" + in + "' --json -q");
  EXPECT_EQ(g.code, 0) << g.out << g.err;
  const Json jg = Json::parse(g.out);
  EXPECT_EQ(jg["status"], "ok");
  EXPECT_GE(jg["taylor"]["min_order"].get<double>(), 1.9);
}

// --event-seed: the seed of the draws among events of equal priority is in
// the --json output (the default 5489, or the one given), so that a run is
// reproduced by it; sbml_random_events_test checks the draws themselves.
TEST_F(SbmlCli, EventSeedIsReported) {
  const std::string in = write("c.yaml", "model: {sbml: models/conversion.xml}\ntime: {end: 1}\n");
  const Result plain = run("run '" + in + "' --json -q");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["event_order_seed"], 5489u) << plain.out;
  const Result seeded = run("run '" + in + "' --json -q --event-seed 77");
  ASSERT_EQ(seeded.code, 0) << seeded.err;
  EXPECT_EQ(nlohmann::json::parse(seeded.out)["event_order_seed"], 77u) << seeded.out;
  const Result negative = run("run '" + in + "' -q --event-seed -3");
  EXPECT_NE(negative.code, 0);
  EXPECT_NE(negative.err.find("--event-seed"), std::string::npos) << negative.err;
}

// delay(): `costate run` integrates by the method of steps
// (ode::integrate_with_delays) and writes what any run writes. Suite case
// 01414: dS1/dt = −0.1·P1(t − k) with dP1/dt = 1 (P1 = 3 before the
// start), k a local parameter; its expected values and criterion
// (|c − e| ≤ absolute + relative·|e|, both 1e-4, from its settings file).
TEST_F(SbmlCli, RunSimulatesDelayAsTheSuiteExpects) {
  const fs::path suite = fs::path(COSTATE_SBML_SUITE_DIR) / "cases" / "01414";
  if (!fs::exists(suite / "01414-sbml-l3v2.xml"))
    GTEST_SKIP() << "the SBML Test Suite's case 01414 is not in " << suite << " (COSTATE_SBML_SUITE_DIR)";
  constexpr double kAbsolute = 1e-4, kRelative = 1e-4;  // 01414-settings.txt
  const std::string in = write("delay.yaml",
                               "model: {sbml: '" + (suite / "01414-sbml-l3v2.xml").string() + "'}\n"
                               "time: {end: 10, output_every: 1}\n"
                               "integrator: {method: cvodes_bdf, rtol: 1.0e-10, atol: 1.0e-14}\n");
  const std::string out = (dir_ / "delay.h5").string();
  const Result r = run("run '" + in + "' --json --trajectory -q -o '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out) && fs::file_size(out) > 0) << out;
  const Json j = Json::parse(r.out);
  const auto states = j["state_names"].get<std::vector<std::string>>();
  const auto rows = j["states"].get<std::vector<std::vector<double>>>();
  // The expected values: time, S1, C, P1 at t = 0, 1, …, 10.
  std::ifstream csv(suite / "01414-results.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "time,S1,C,P1");
  std::size_t row = 0;
  for (; std::getline(csv, line) && row < rows.size(); ++row) {
    std::vector<double> e;
    std::stringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) e.push_back(std::stod(f));
    ASSERT_EQ(e.size(), 4u) << line;
    EXPECT_DOUBLE_EQ(j["t"][row].get<double>(), e[0]);
    for (const auto& [id, col] : {std::pair<std::string, std::size_t>{"S1", 1}, {"P1", 3}}) {
      const auto it = std::find(states.begin(), states.end(), id);
      ASSERT_NE(it, states.end()) << id;
      const double c = rows[row][static_cast<std::size_t>(it - states.begin())];
      EXPECT_LE(std::abs(c - e[col]), kAbsolute + kRelative * std::abs(e[col]))
          << id << " at t = " << e[0] << ": " << c << ", expected " << e[col];
    }
  }
  EXPECT_EQ(row, 11u);
  // Every symbol at the final time, the delay's slot read from the history:
  // delay(P1, k) at t = 10 is P1(9) = 12.
  const auto names = j["symbol_names"].get<std::vector<std::string>>();
  const auto values = j["final_symbols"].get<std::vector<double>>();
  const auto slot = std::find(names.begin(), names.end(), "delay(P1, k)");
  ASSERT_NE(slot, names.end()) << j["symbol_names"].dump();
  EXPECT_NEAR(values[static_cast<std::size_t>(slot - names.begin())], 12.0, kClosedFormTol);
}

// `costate sensitivity` through delay(): forward sensitivities through the
// history, against central differences of `costate run` in the lag k (a
// local parameter, J0_k) and the compartment C; the discrete adjoint
// through the history against them; the continuous adjoint refused by
// name. Suite case 01414 (see above), J = S1(10)²/2.
TEST_F(SbmlCli, SensitivityThroughDelayMatchesCentralDifferences) {
  const fs::path xml = fs::path(COSTATE_SBML_SUITE_DIR) / "cases" / "01414" / "01414-sbml-l3v2.xml";
  if (!fs::exists(xml))
    GTEST_SKIP() << "the SBML Test Suite's case 01414 is not in " << xml.parent_path()
                 << " (COSTATE_SBML_SUITE_DIR)";
  // bdf at rtol 1e-10: O(tol/h) = 1e-6 round-off of the differences at
  // step h = 1e-4, their O(h²) truncation below it.
  constexpr double kStep = 1e-4, kDifferenceTol = 1e-5;
  const std::string body = "model: {sbml: '" + xml.string() + "'}\n"
                           "time: {end: 10}\n"
                           "integrator: {method: bdf, rtol: 1.0e-10, atol: 1.0e-12}\n"
                           "objective: {terminal: 'S1*S1/2'}\n";
  const std::string in = write("sens.yaml", body + "sensitivity: {method: forward}\n");
  const Result r = run("sensitivity '" + in + "' --json -q");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_NEAR(j["objective"].get<double>(), 2.05 * 2.05 / 2.0, 1e-7);  // S1(10) = −2.05
  for (const auto& [id, value] : {std::pair<std::string, double>{"J0_k", 1.0}, {"C", 1.0}}) {
    double J[2];
    for (int side = 0; side < 2; ++side) {
      std::ostringstream set;
      set.precision(17);
      set << " --set parameters." << id << "=" << value + (side ? kStep : -kStep);
      const Result o = run("run '" + in + "' --json -q" + set.str());
      ASSERT_EQ(o.code, 0) << o.err;
      const double s1 = Json::parse(o.out)["final_state"][0].get<double>();
      J[side] = s1 * s1 / 2.0;
    }
    const double central = (J[1] - J[0]) / (2.0 * kStep), g = j["gradient"][id].get<double>();
    EXPECT_NEAR(g, central, kDifferenceTol * std::max(1.0, std::abs(central))) << id;
  }
  // The discrete adjoint through the history (the default method): its
  // bdf steps land on the history's samples where the forward
  // sensitivities interpolate theirs — two discretizations at rtol 1e-10,
  // within kAdjointVsForwardTol of each other (relative to max(1, |g|)).
  constexpr double kAdjointVsForwardTol = 1e-6;
  const std::string adjoint = write("adj.yaml", body + "sensitivity: {method: discrete_adjoint}\n");
  const Result a = run("sensitivity '" + adjoint + "' --json -q");
  ASSERT_EQ(a.code, 0) << a.err;
  const Json ja = Json::parse(a.out);
  EXPECT_NEAR(ja["objective"].get<double>(), j["objective"].get<double>(), 1e-8);
  // `costate run` of the same file is the adjoint's forward pass (issue 35):
  // S1(10)²/2 from its final state is the adjoint's J, bit for bit (the
  // JSON's shortest round-trip digits). Before, 2.6e-8 relative apart.
  {
    const Result o = run("run '" + adjoint + "' --json -q");
    ASSERT_EQ(o.code, 0) << o.err;
    const double s1 = Json::parse(o.out)["final_state"][0].get<double>();
    EXPECT_EQ(s1 * s1 / 2.0, ja["objective"].get<double>());
  }
  ASSERT_FALSE(j["gradient"].empty());
  for (const auto& entry : j["gradient"].items()) {
    const double f = entry.value().get<double>();
    EXPECT_NEAR(ja["gradient"][entry.key()].get<double>(), f,
                kAdjointVsForwardTol * std::max(1.0, std::abs(f)))
        << entry.key();
  }
  // The continuous adjoint is refused by name.
  const std::string continuous =
      write("cont.yaml", body + "sensitivity: {method: continuous_adjoint}\n");
  const Result c = run("sensitivity '" + continuous + "' -q");
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.err.find("delay(P1, k): sensitivity.method = continuous_adjoint through delay() is "
                       "not implemented"), std::string::npos) << c.err;
}

TEST_F(SbmlCli, BadInputNamesTheFileAndTheElement) {
  const Result missing = run("run '" + write("m.yaml", "model: {sbml: nowhere.xml}\ntime: {end: 1}\n") +
                             "' -q");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("model.sbml"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("nowhere.xml"), std::string::npos) << missing.err;

  std::string with_event = kModel;
  with_event.replace(with_event.find("</model>"), 8,
                     "<listOfEvents><event id=\"dose\" useValuesFromTriggerTime=\"true\">"
                     "<trigger initialValue=\"false\" persistent=\"true\"><math "
                     "xmlns=\"http://www.w3.org/1998/Math/MathML\"><apply><eq/><csymbol "
                     "encoding=\"text\" definitionURL=\"http://www.sbml.org/sbml/symbols/time\">t"
                     "</csymbol><cn>1</cn></apply></math></trigger><listOfEventAssignments>"
                     "<eventAssignment variable=\"B\"><math "
                     "xmlns=\"http://www.w3.org/1998/Math/MathML\"><cn>1</cn></math>"
                     "</eventAssignment></listOfEventAssignments></event></listOfEvents></model>");
  write("models/event.xml", with_event);
  const Result ev = run("run '" + write("e.yaml", "model: {sbml: models/event.xml}\ntime: {end: 1}\n") +
                        "' -q");
  EXPECT_NE(ev.code, 0);
  EXPECT_NE(ev.err.find("event 'dose'"), std::string::npos) << ev.err;
  EXPECT_NE(ev.err.find("event.xml"), std::string::npos) << ev.err;

  const Result typo = run("run '" + write("t.yaml", "model: {sbml: models/conversion.xml}\n"
                                                    "parameters: {kk1: 1}\ntime: {end: 1}\n") +
                          "' -q");
  EXPECT_NE(typo.code, 0);
  EXPECT_NE(typo.err.find("kk1"), std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("k1"), std::string::npos) << typo.err;

  const Result both = run("run '" + write("b.yaml", "model: {sbml: models/conversion.xml, states: [x]}\n"
                                                    "time: {end: 1}\n") + "' -q");
  EXPECT_NE(both.code, 0);
  EXPECT_NE(both.err.find("states"), std::string::npos) << both.err;
}

}  // namespace
