// PEtab measurements at time inf (petab::evaluate): the steady state of the
// simulation condition, f(x, p) = 0, found by Newton (falling back to
// integrating towards it when Newton fails) and differentiated implicitly,
// (∂H/∂x)ᵀν = x̄ — by the adjoint gradient, the seeded forward
// sensitivities and the Fisher information. Against closed forms:
//   x' = k1 − k2 x            x_ss = k1/k2 (with a finite time too),
//   A ⇌ B (kf, kr), A(0) = A0  B_ss = A0 kf/(kf + kr) (a conserved moiety),
//   x' = k1 − k2 x², x(0) = 0  x_ss = √(k1/k2) (Newton's Jacobian is singular
//                              at the start: the integration fallback);
// a right-hand side that switches after the last finite time is refused;
// the output files label the rows at time inf;
// and Blasi_CellSystems2016 (benchmark collection, every measurement at
// time inf) against the collection's simulatedData and central differences.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/output.hpp"
#include "costate/petab/problem.hpp"
#include "../support/run_costate.hpp"  // scratch_dir
#include "petab_data.hpp"
#include "text_problem.hpp"

namespace {

namespace petab = costate::petab;
namespace fs = std::filesystem;

// The closed forms are exact; what remains is the steady-state solve's
// ‖H‖ tolerance (1e-12 relative) and, with a finite time, the integration
// at rtol 1e-10 / atol 1e-12: 1e-8 of the largest entry covers both.
constexpr double kClosedTol = 1e-8;

/// An SBML model with one rate rule per listed (variable, formula) and
/// parameters (id, value); `constant` ids are constant.
std::string rate_rule_model(const std::vector<std::pair<std::string, double>>& parameters,
                            const std::vector<std::string>& constant,
                            const std::vector<std::pair<std::string, std::string>>& rules) {
  std::ostringstream s;
  s << R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
  <model id="m">
    <listOfCompartments>
      <compartment id="cell" size="1" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <listOfParameters>
)";
  for (const auto& [id, v] : parameters) {
    bool c = false;
    for (const auto& k : constant) c = c || k == id;
    s << "      <parameter id=\"" << id << "\" value=\"" << v << "\" constant=\"" << (c ? "true" : "false")
      << "\"/>\n";
  }
  s << "    </listOfParameters>\n    <listOfRules>\n";
  for (const auto& [var, mathml] : rules)
    s << "      <rateRule variable=\"" << var << "\">\n        <math xmlns=\"http://www.w3.org/1998/Math/MathML\">"
      << mathml << "</math>\n      </rateRule>\n";
  s << "    </listOfRules>\n  </model>\n</sbml>\n";
  return s.str();
}

const char* kLinearRhs =  // k1 − k2 x
    "<apply><minus/><ci>k1</ci><apply><times/><ci>k2</ci><ci>x</ci></apply></apply>";

/// Every derivative path on one problem: the adjoint gradient with the
/// Fisher information, and the seeded forward-sensitivity gradient.
struct Derivatives {
  petab::Result adjoint, forward;
};
Derivatives derivatives(const petab::Problem& pb, const std::vector<double>& theta) {
  petab::Options adj;
  adj.gradient = true;
  adj.fim = true;
  petab::Options fwd;
  fwd.gradient = true;
  fwd.method = costate::ode::CvodesForward{};
  return {petab::evaluate(pb, theta, adj), petab::evaluate(pb, theta, fwd)};
}

/// llh, gradient and FIM of normal measurements m_i of h_i(θ) with σ fixed,
/// from h_i and dh_i/dθ.
struct Closed {
  double llh = 0.0;
  std::vector<double> grad, fim;
};
Closed normal_closed(const std::vector<double>& m, const std::vector<double>& h,
                     const std::vector<std::vector<double>>& dh, double sigma) {
  const std::size_t n = dh[0].size();
  Closed c;
  c.grad.assign(n, 0.0);
  c.fim.assign(n * n, 0.0);
  for (std::size_t k = 0; k < m.size(); ++k) {
    const double r = (m[k] - h[k]) / sigma;
    c.llh += -0.5 * std::log(2.0 * std::numbers::pi * sigma * sigma) - 0.5 * r * r;
    for (std::size_t i = 0; i < n; ++i) {
      c.grad[i] += r / sigma * dh[k][i];
      for (std::size_t j = 0; j < n; ++j) c.fim[i * n + j] += dh[k][i] * dh[k][j] / (sigma * sigma);
    }
  }
  return c;
}

void expect_matches(const Derivatives& d, const Closed& c) {
  double gscale = 0.0, fscale = 0.0;
  for (double g : c.grad) gscale = std::max(gscale, std::abs(g));
  for (double f : c.fim) fscale = std::max(fscale, std::abs(f));
  EXPECT_NEAR(d.adjoint.llh, c.llh, kClosedTol * std::max(1.0, std::abs(c.llh)));
  EXPECT_NEAR(d.forward.llh, c.llh, kClosedTol * std::max(1.0, std::abs(c.llh)));
  ASSERT_EQ(d.adjoint.gradient.size(), c.grad.size());
  ASSERT_EQ(d.forward.gradient.size(), c.grad.size());
  ASSERT_EQ(d.adjoint.fim.size(), c.fim.size());
  for (std::size_t i = 0; i < c.grad.size(); ++i) {
    EXPECT_NEAR(d.adjoint.gradient[i], c.grad[i], kClosedTol * gscale) << "adjoint, entry " << i;
    EXPECT_NEAR(d.forward.gradient[i], c.grad[i], kClosedTol * gscale) << "forward, entry " << i;
  }
  for (std::size_t i = 0; i < c.fim.size(); ++i)
    EXPECT_NEAR(d.adjoint.fim[i], c.fim[i], kClosedTol * fscale) << "FIM entry " << i;
}

/// x' = k1 − k2 x, x(0) = 0.5, measured at t = inf, 1.5, inf (table order).
costate::test::TextProblem linear_problem() {
  costate::test::TextProblem tp;
  tp.model = rate_rule_model({{"x", 0.5}, {"k1", 1.3}, {"k2", 0.7}}, {"k1", "k2"}, {{"x", kLinearRhs}});
  tp.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "k1\tlin\t0.01\t10\t1.3\t1\nk2\tlin\t0.01\t10\t0.7\t1\nsigma\tlin\t0.01\t1\t0.2\t0\n";
  tp.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_x\tx\tsigma\n";
  tp.conditions = "conditionId\nc0\n";
  tp.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_x\tc0\tinf\t1.9\nobs_x\tc0\t1.5\t1.4\nobs_x\tc0\tinf\t2.1\n";
  return tp;
}

TEST(PetabSteadyState, LinearDecayAtAFiniteTimeAndAtInfinity) {
  const double k1 = 1.3, k2 = 0.7, x0 = 0.5, sigma = 0.2, t = 1.5;
  const petab::Problem pb = linear_problem().read_text("linear/");
  ASSERT_EQ(pb.experiments.size(), 1u);
  ASSERT_EQ(pb.experiments[0].times.size(), 2u);
  EXPECT_TRUE(std::isinf(pb.experiments[0].times.back())) << "inf is the experiment's last time";

  const double xs = k1 / k2, e = std::exp(-k2 * t);
  const double xt = xs + (x0 - xs) * e;
  const std::vector<double> dxs = {1.0 / k2, -k1 / (k2 * k2)};
  const std::vector<double> dxt = {(1.0 - e) / k2, -k1 / (k2 * k2) * (1.0 - e) - (x0 - xs) * t * e};
  const Closed c = normal_closed({1.9, 1.4, 2.1}, {xs, xt, xs}, {dxs, dxt, dxs}, sigma);
  const Derivatives d = derivatives(pb, {k1, k2});
  expect_matches(d, c);
  // The simulations: h of each row, in table order.
  EXPECT_NEAR(d.adjoint.simulations[0], xs, kClosedTol * xs);
  EXPECT_NEAR(d.adjoint.simulations[1], xt, kClosedTol * xs);
  EXPECT_NEAR(d.adjoint.simulations[2], xs, kClosedTol * xs);
  // Without a gradient: the same llh.
  EXPECT_NEAR(petab::evaluate(pb, {k1, k2}).llh, c.llh, kClosedTol * std::abs(c.llh));
}

TEST(PetabSteadyState, OnlyTimeInfIsTheImplicitAdjointAndSaysSo) {
  // Every measurement at time inf: nothing is integrated for the gradient,
  // so the result names the steady-state solve's implicit adjoint, not the
  // time-course method (which said "cvodes_adjoint on cvodes_bdf" before).
  const double k1 = 1.3, k2 = 0.7, sigma = 0.2;
  costate::test::TextProblem tp = linear_problem();
  tp.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_x\tc0\tinf\t1.9\nobs_x\tc0\tinf\t2.1\n";
  const petab::Problem pb = tp.read_text("linear_inf/");
  const double xs = k1 / k2;
  const std::vector<double> dxs = {1.0 / k2, -k1 / (k2 * k2)};
  const Closed c = normal_closed({1.9, 2.1}, {xs, xs}, {dxs, dxs}, sigma);
  const Derivatives d = derivatives(pb, {k1, k2});
  expect_matches(d, c);
  EXPECT_EQ(d.adjoint.gradient_method.rfind("implicit steady-state adjoint", 0), 0u)
      << d.adjoint.gradient_method;
  // With a finite time too, the time-course method is named.
  const Derivatives mixed = derivatives(linear_problem().read_text("linear/"), {k1, k2});
  EXPECT_EQ(mixed.adjoint.gradient_method.find("steady-state"), std::string::npos)
      << mixed.adjoint.gradient_method;
}

TEST(PetabSteadyState, OutputFilesLabelTheRowsAtTimeInf) {
  const fs::path dir = costate::test::scratch_dir("costate_petab_steady_state_output");
  fs::remove_all(dir);
  const petab::Problem pb = petab::read(linear_problem().write(dir));
  const petab::Result r = petab::evaluate(pb, pb.nominal_on_scale());
  // The simulation table: the measurement table's rows, time inf kept.
  const fs::path table = dir / "simulation.tsv";
  petab::write_simulation_table(pb, r, table.string());
  std::ifstream in(table);
  std::string header, row;
  std::getline(in, header);
  EXPECT_EQ(header, "observableId\tsimulationConditionId\ttime\tsimulation");
  std::getline(in, row);
  EXPECT_EQ(row.rfind("obs_x\tc0\tinf\t", 0), 0u) << row;
  EXPECT_NEAR(std::stod(row.substr(row.rfind('\t') + 1)), 1.3 / 0.7, kClosedTol);
  // HDF5: /simulation/time holds inf, and its attribute `inf` says what it is.
  const fs::path h5 = dir / "result.h5";
  petab::write_result_hdf5(pb, r, h5.string());
  const hid_t file = H5Fopen(h5.string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t set = H5Dopen2(file, "/simulation/time", H5P_DEFAULT);
  ASSERT_GE(set, 0);
  std::vector<double> time(3);
  EXPECT_GE(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, time.data()), 0);
  EXPECT_TRUE(std::isinf(time[0]) && time[1] == 1.5 && std::isinf(time[2]));
  const hid_t attr = H5Aopen(set, "inf", H5P_DEFAULT);
  ASSERT_GE(attr, 0) << "/simulation/time has no attribute 'inf'";
  const hid_t type = H5Aget_type(attr);
  std::string text(H5Tget_size(type), '\0');
  EXPECT_GE(H5Aread(attr, type, text.data()), 0);
  EXPECT_NE(text.find("steady-state measurement"), std::string::npos) << text;
  H5Tclose(type);
  H5Aclose(attr);
  H5Dclose(set);
  H5Fclose(file);
  fs::remove_all(dir);
}

TEST(PetabSteadyState, ConservedMoietyCarriesTheInitialValue) {
  // A ⇌ B: A + B = A0 is conserved, so B_ss = A0 kf/(kf + kr) reads A0 —
  // set in the condition table from an estimated parameter.
  const double kf = 0.6, kr = 0.9, A0 = 2.5, sigma = 0.3;
  const char* a_rhs =
      "<apply><minus/><apply><times/><ci>kr</ci><ci>B</ci></apply><apply><times/><ci>kf</ci><ci>A</ci></apply></apply>";
  const char* b_rhs =
      "<apply><minus/><apply><times/><ci>kf</ci><ci>A</ci></apply><apply><times/><ci>kr</ci><ci>B</ci></apply></apply>";
  costate::test::TextProblem tp;
  tp.model = rate_rule_model({{"A", 1.0}, {"B", 0.0}, {"kf", kf}, {"kr", kr}}, {"kf", "kr"},
                             {{"A", a_rhs}, {"B", b_rhs}});
  tp.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "kf\tlog10\t0.01\t10\t0.6\t1\nkr\tlin\t0.01\t10\t0.9\t1\nA0\tlin\t0.1\t10\t2.5\t1\n"
      "sigma\tlin\t0.01\t1\t0.3\t0\n";
  tp.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_b\tB\tsigma\nobs_a\tA\tsigma\n";
  tp.conditions = "conditionId\tA\nc0\tA0\n";
  tp.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_b\tc0\tinf\t0.8\nobs_a\tc0\tinf\t1.7\n";
  const petab::Problem pb = tp.read_text("moiety/");
  const double s = kf + kr, B = A0 * kf / s, A = A0 * kr / s;
  // d/d(log10 kf) = kf ln 10 d/dkf.
  const double c10 = kf * std::numbers::ln10;
  const std::vector<double> dB = {c10 * A0 * kr / (s * s), -A0 * kf / (s * s), kf / s};
  const std::vector<double> dA = {-c10 * A0 * kr / (s * s), A0 * kf / (s * s), kr / s};
  const Closed c = normal_closed({0.8, 1.7}, {B, A}, {dB, dA}, sigma);
  expect_matches(derivatives(pb, {std::log10(kf), kr, A0}), c);
}

TEST(PetabSteadyState, NewtonFailingAtTheStartFallsBackToIntegration) {
  // x' = k1 − k2 x² from x = 0: ∂f/∂x = −2 k2 x is singular at the start, so
  // Newton fails at its first iteration; integrating reaches the stable
  // root √(k1/k2) (not −√(k1/k2)), where Newton then converges.
  const double k1 = 2.0, k2 = 0.5, sigma = 0.25;
  costate::test::TextProblem tp;
  tp.model = rate_rule_model(
      {{"x", 0.0}, {"k1", k1}, {"k2", k2}}, {"k1", "k2"},
      {{"x", "<apply><minus/><ci>k1</ci><apply><times/><ci>k2</ci><ci>x</ci><ci>x</ci></apply></apply>"}});
  tp.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "k1\tlin\t0.01\t10\t2\t1\nk2\tlin\t0.01\t10\t0.5\t1\nsigma\tlin\t0.01\t1\t0.25\t0\n";
  tp.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_x\tx\tsigma\n";
  tp.conditions = "conditionId\nc0\n";
  tp.measurements = "observableId\tsimulationConditionId\ttime\tmeasurement\nobs_x\tc0\tinf\t1.8\n";
  const petab::Problem pb = tp.read_text("fallback/");
  const double xs = std::sqrt(k1 / k2);
  const std::vector<double> dx = {0.5 / std::sqrt(k1 * k2), -0.5 * std::sqrt(k1) / std::pow(k2, 1.5)};
  const Closed c = normal_closed({1.8}, {xs}, {dx}, sigma);
  const Derivatives d = derivatives(pb, {k1, k2});
  expect_matches(d, c);
  EXPECT_NEAR(d.adjoint.simulations[0], xs, kClosedTol * xs) << "the stable root";
}

TEST(PetabSteadyState, ALawThatHoldsOnlyAtTheSteadyStateJoinsTheConservationLaws) {
  // x' = k1 − k2 x − kon x I,  c' = kon x I − koff c I,  I' = −kon x I, with
  // the inhibitor I absent (I(0) = 0): c never moves from c(0) = c0, but
  // only because I = 0 — ∂f/∂c = −koff I e_c vanishes at the steady state
  // alone (Raimundez_PCB2020's pre-equilibration has such complexes), so
  // ∂H/∂x is singular there unless that law joins the structural ones.
  // x_ss = k1/k2 and c_ss = c0, with c0 set from an estimated parameter.
  const double k1 = 1.2, k2 = 0.4, c0 = 0.7, sigma = 0.2;
  costate::test::TextProblem tp;
  tp.model = rate_rule_model(
      {{"x", 1.0}, {"c", 0.3}, {"I", 0.0}, {"k1", k1}, {"k2", k2}, {"kon", 2.0}, {"koff", 0.5}},
      {"k1", "k2", "kon", "koff"},
      {{"x", "<apply><minus/><apply><minus/><ci>k1</ci><apply><times/><ci>k2</ci><ci>x</ci></apply></apply>"
             "<apply><times/><ci>kon</ci><ci>x</ci><ci>I</ci></apply></apply>"},
       {"c", "<apply><minus/><apply><times/><ci>kon</ci><ci>x</ci><ci>I</ci></apply>"
             "<apply><times/><ci>koff</ci><ci>c</ci><ci>I</ci></apply></apply>"},
       {"I", "<apply><minus/><apply><times/><ci>kon</ci><ci>x</ci><ci>I</ci></apply></apply>"}});
  tp.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "k1\tlin\t0.01\t10\t1.2\t1\nk2\tlin\t0.01\t10\t0.4\t1\nc0\tlin\t0.01\t10\t0.7\t1\n"
      "sigma\tlin\t0.01\t1\t0.2\t0\n";
  tp.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_x\tx\tsigma\nobs_c\tc\tsigma\n";
  tp.conditions = "conditionId\tc\nc0\tc0\n";
  tp.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_x\tc0\tinf\t2.9\nobs_c\tc0\tinf\t0.9\n";
  const petab::Problem pb = tp.read_text("local_law/");
  const Closed c = normal_closed({2.9, 0.9}, {k1 / k2, c0},
                                 {{1.0 / k2, -k1 / (k2 * k2), 0.0}, {0.0, 0.0, 1.0}}, sigma);
  expect_matches(derivatives(pb, {k1, k2, c0}), c);
}

TEST(PetabSteadyState, AContinuumOfSteadyStatesIsIntegratedAndItsGradientRefused) {
  // x' = −k x y, y' = −y from (1, 1): every (x, 0) is a steady state, and
  // the dynamics reach x = e^{−k} (∫y dt = 1). Newton from the start lands
  // on (1, 0), where ∂f/∂x is singular along a direction the way changed:
  // the steady state is taken from the integration instead. Its derivative
  // is not the implicit one (∂H/∂x singular), so the gradient is refused.
  const double k = 0.8;
  costate::test::TextProblem tp;
  tp.model = rate_rule_model(
      {{"x", 1.0}, {"y", 1.0}, {"k", k}}, {"k"},
      {{"x", "<apply><minus/><apply><times/><ci>k</ci><ci>x</ci><ci>y</ci></apply></apply>"},
       {"y", "<apply><minus/><ci>y</ci></apply>"}});
  tp.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "k\tlin\t0.01\t10\t0.8\t1\nsigma\tlin\t0.01\t1\t0.2\t0\n";
  tp.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_x\tx\tsigma\n";
  tp.conditions = "conditionId\nc0\n";
  tp.measurements = "observableId\tsimulationConditionId\ttime\tmeasurement\nobs_x\tc0\tinf\t0.5\n";
  const petab::Problem pb = tp.read_text("continuum/");
  const petab::Result r = petab::evaluate(pb, {k});
  // The integration stops once ‖f‖∞ ≤ 1e-8 (1 + ‖x‖∞) and Newton keeps x
  // from there: x is then within k x y ≈ 1e-8 of e^{−k}.
  EXPECT_NEAR(r.simulations[0], std::exp(-k), 1e-7);
  petab::Options o;
  o.gradient = true;
  try {
    (void)petab::evaluate(pb, {k}, o);
    ADD_FAILURE() << "a gradient through a continuum of steady states was answered";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("its implicit derivative is not defined"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("experiment c0"), std::string::npos) << e.what();
  }
}

TEST(PetabSteadyState, RightHandSideSwitchingAfterTheLastFiniteTimeIsRefused) {
  // x' = (k1 before t = 100, 2 k1 after) − k2 x, measured at t = 1 and inf:
  // the steady state at t = 1 is not the one at t → ∞.
  costate::test::TextProblem tp;
  tp.model = rate_rule_model(
      {{"x", 0.5}, {"k1", 1.3}, {"k2", 0.7}}, {"k1", "k2"},
      {{"x", "<apply><minus/><piecewise><piece><ci>k1</ci><apply><lt/><csymbol encoding=\"text\" "
             "definitionURL=\"http://www.sbml.org/sbml/symbols/time\">t</csymbol><cn>100</cn></apply></piece>"
             "<otherwise><apply><times/><cn>2</cn><ci>k1</ci></apply></otherwise></piecewise>"
             "<apply><times/><ci>k2</ci><ci>x</ci></apply></apply>"}});
  tp.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "k1\tlin\t0.01\t10\t1.3\t1\nsigma\tlin\t0.01\t1\t0.2\t0\n";
  tp.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_x\tx\tsigma\n";
  tp.conditions = "conditionId\nc0\n";
  tp.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\nobs_x\tc0\t1\t1.1\nobs_x\tc0\tinf\t1.9\n";
  const petab::Problem pb = tp.read_text("late_switch/");
  try {
    petab::evaluate(pb, {1.3});
    ADD_FAILURE() << "a steady state after a later switch was answered";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the right-hand side still changes with time after t = 1"),
              std::string::npos)
        << e.what();
  }
}

// ---- Blasi_CellSystems2016: every measurement at time inf.

/// The collection's simulatedData: the simulated value of each observable
/// (one condition, one time: every row of an observable holds the same).
std::map<std::string, double> simulated_by_observable(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::stringstream s(line);
    for (std::string c; std::getline(s, c, '\t');) header.push_back(c);
  }
  const auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t c_obs = col("observableId"), c_sim = col("simulation"), c_t = col("time");
  std::map<std::string, double> out;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string c; std::getline(s, c, '\t');) cells.push_back(c);
    EXPECT_EQ(cells.at(c_t), "inf");
    const double v = std::stod(cells.at(c_sim));
    const auto [it, fresh] = out.emplace(cells.at(c_obs), v);
    EXPECT_TRUE(fresh || it->second == v) << "observable " << cells.at(c_obs) << " simulated twice differently";
  }
  return out;
}

// The collection's comparison (AMICI's): rtol = atol = 1e-3 on simulations.
constexpr double kSimulationTol = 1e-3;
// Central differences on the log10 scale, step 1e-4: truncation O(h²)
// ≈ 1e-8 of the second-derivative scale, the steady-state solve's 1e-12
// error over 2h ≈ 5e-9: 1e-6 of max(1, ‖g‖∞) is above both.
constexpr double kDifferenceStep = 1e-4;
constexpr double kDifferenceTol = 1e-6;
// Adjoint and forward: the same implicit steady-state derivative, one by
// (∂H/∂x)ᵀν = x̄, one by (∂H/∂x) dx = −(∂H/∂p) dp: rounding apart.
constexpr double kAdjointForwardTol = 1e-10;

TEST(PetabSteadyState, BlasiCellSystems2016MatchesSimulatedDataAndDifferences) {
  COSTATE_REQUIRE_PETAB("benchmark/Blasi_CellSystems2016");
  const fs::path dir = costate::test::petab_dir() / "benchmark/Blasi_CellSystems2016";
  const petab::Problem pb = petab::read((dir / "Blasi_CellSystems2016.yaml").string());
  const std::vector<double> theta = pb.nominal_on_scale();
  petab::Options adj;
  adj.gradient = true;
  const petab::Result a = petab::evaluate(pb, theta, adj);

  // Simulations against simulatedData, and the llh those simulations give
  // (normal noise on log-transformed data, with the density's log m term:
  // petab::Options::data_jacobian, the test suite's convention).
  const std::map<std::string, double> ref = simulated_by_observable(dir / "simulatedData_Blasi_CellSystems2016.tsv");
  double worst = 0.0, llh_ref = 0.0, first_order = 0.0;
  for (std::size_t i = 0; i < pb.measurements.size(); ++i) {
    const petab::Measurement& me = pb.measurements[i];
    const std::string& id = pb.observables[me.observable].id;
    ASSERT_TRUE(ref.count(id)) << id;
    const double h = ref.at(id);
    EXPECT_LE(std::abs(a.simulations[i] - h), kSimulationTol * (1.0 + std::abs(h))) << "row " << i + 1 << " (" << id << ")";
    worst = std::max(worst, std::abs(a.simulations[i] - h) / (1.0 + std::abs(h)));
    const double sigma = a.sigmas[i], r = (std::log(me.value) - std::log(h)) / sigma;
    llh_ref -= 0.5 * std::log(2.0 * std::numbers::pi * sigma * sigma) + 0.5 * r * r + std::log(me.value);
    first_order += std::abs(r) / sigma * std::abs(std::log(a.simulations[i]) - std::log(h));
  }
  // The llh those simulations give differs from ours by Σ |r/σ| |Δ log h|
  // to first order (the simulations' own difference, measured above); twice
  // that covers the second-order terms, 1e-12 |llh| the summation's rounding.
  EXPECT_NEAR(a.llh, llh_ref, 2.0 * first_order + 1e-12 * std::abs(llh_ref));
  std::cout << "[ petab    ] Blasi_CellSystems2016: llh " << std::setprecision(12) << a.llh
            << ", from the collection's simulatedData " << llh_ref << " (difference " << a.llh - llh_ref
            << "); simulations max |diff|/(1+|ref|) " << worst << "\n";

  // Gradient: forward sensitivities and central differences.
  petab::Options fwd = adj;
  fwd.method = costate::ode::CvodesForward{};
  const petab::Result f = petab::evaluate(pb, theta, fwd);
  double gscale = 1.0;
  for (double g : a.gradient) gscale = std::max(gscale, std::abs(g));
  double worst_fd = 0.0, worst_fwd = 0.0;
  for (std::size_t e = 0; e < theta.size(); ++e) {
    std::vector<double> up = theta, down = theta;
    up[e] += kDifferenceStep;
    down[e] -= kDifferenceStep;
    const double fd = (petab::evaluate(pb, up).llh - petab::evaluate(pb, down).llh) / (2.0 * kDifferenceStep);
    EXPECT_NEAR(a.gradient[e], fd, kDifferenceTol * gscale) << pb.estimated_ids()[e];
    EXPECT_NEAR(a.gradient[e], f.gradient[e], kAdjointForwardTol * gscale) << pb.estimated_ids()[e];
    worst_fd = std::max(worst_fd, std::abs(a.gradient[e] - fd) / gscale);
    worst_fwd = std::max(worst_fwd, std::abs(a.gradient[e] - f.gradient[e]) / gscale);
  }
  std::cout << "[ petab    ] Blasi_CellSystems2016: gradient (" << theta.size()
            << " entries, max(1, |g|inf) = " << gscale << ") vs central differences " << worst_fd
            << ", vs forward " << worst_fwd << " (of max(1, |g|inf))\n";
}

}  // namespace
