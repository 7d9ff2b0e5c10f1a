// PEtab problems whose SBML model has events (petab::evaluate):
// - a decay A' = −k A with a state-triggered reset (A < θ → A ← A + d), two
//   conditions (two start values a0: the reset at different times), the
//   likelihood and its gradient with respect to log10 k, θ and d against
//   the closed form — where dA/dθ is the jump term alone;
// - Liu_IFACPapersOnLine2025 (the benchmark collection's problem with an
//   event; skipped when ../shared/petab is absent): the simulations against
//   the collection's simulatedData, the gradient against Richardson
//   differences;
// - what does not cross events is refused by name: pre-equilibration and
//   measurements at time inf (steady-state solves), the Fisher information
//   (forward sensitivities).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"
#include "text_problem.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;

// Simulation by CVODES (its root finding) and the gradient by the discrete
// adjoint on bdf, both at petab::Options' default 1e-10 / 1e-12: the
// likelihood to ~1e-8, the gradient to ~1e-7 of its size (bdf's global
// error at rtol 1e-10 over a few hundred steps).
constexpr double kLlhTol = 1e-7;
constexpr double kGradRelTol = 1e-6;

const char* kResetModel = R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
  <model id="reset">
    <listOfCompartments>
      <compartment id="cell" size="1" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="cell" initialConcentration="1" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters>
      <parameter id="k" value="0.5" constant="true"/>
      <parameter id="theta" value="0.3" constant="true"/>
      <parameter id="dose" value="0.5" constant="true"/>
      <parameter id="a0" value="1" constant="true"/>
    </listOfParameters>
    <listOfInitialAssignments>
      <initialAssignment symbol="A">
        <math xmlns="http://www.w3.org/1998/Math/MathML"><ci> a0 </ci></math>
      </initialAssignment>
    </listOfInitialAssignments>
    <listOfReactions>
      <reaction id="decay" reversible="false" fast="false">
        <listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>
        <kineticLaw>
          <math xmlns="http://www.w3.org/1998/Math/MathML">
            <apply><times/><ci> k </ci><ci> A </ci><ci> cell </ci></apply>
          </math>
        </kineticLaw>
      </reaction>
    </listOfReactions>
    <listOfEvents>
      <event id="reset" useValuesFromTriggerTime="true">
        <trigger initialValue="true" persistent="true">
          <math xmlns="http://www.w3.org/1998/Math/MathML">
            <apply><lt/><ci> A </ci><ci> theta </ci></apply>
          </math>
        </trigger>
        <listOfEventAssignments>
          <eventAssignment variable="A">
            <math xmlns="http://www.w3.org/1998/Math/MathML">
              <apply><plus/><ci> A </ci><ci> dose </ci></apply>
            </math>
          </eventAssignment>
        </listOfEventAssignments>
      </event>
    </listOfEvents>
  </model>
</sbml>
)";

struct ResetFiles : costate::test::TextProblem {
  ResetFiles() {
    model = kResetModel;
    parameters =
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        "k\tlog10\t0.01\t100\t0.5\t1\n"
        "theta\tlin\t0.01\t1\t0.3\t1\n"
        "dose\tlin\t0.01\t10\t0.5\t1\n"
        "sigma\tlin\t0.01\t10\t0.1\t0\n";
    observables =
        "observableId\tobservableFormula\tnoiseFormula\n"
        "obs_a\tA\tsigma\n";
    conditions =
        "conditionId\ta0\n"
        "low\t1\n"
        "high\t2\n";
    measurements =
        "observableId\tsimulationConditionId\ttime\tmeasurement\n"
        "obs_a\tlow\t1\t0.55\n"
        "obs_a\tlow\t2\t0.40\n"
        "obs_a\tlow\t3\t0.60\n"
        "obs_a\tlow\t4\t0.45\n"
        "obs_a\thigh\t1\t1.2\n"
        "obs_a\thigh\t3\t0.50\n"
        "obs_a\thigh\t4\t0.60\n"
        "obs_a\thigh\t5\t0.50\n";
  }
  petab::Problem read() const { return read_text("reset/"); }
};

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

TEST(PetabEvents, StateTriggeredResetMatchesTheClosedForm) {
  const petab::Problem pb = ResetFiles{}.read();
  ASSERT_EQ(pb.estimated_ids(), (std::vector<std::string>{"k", "theta", "dose"}));
  const double k = 0.5, theta = 0.3, dose = 0.5, sigma = 0.1;
  const std::vector<double> x = {std::log10(k), theta, dose};
  petab::Options opt;
  opt.gradient = true;
  const petab::Result r = petab::evaluate(pb, x, opt);
  // The default method, CVODES' adjoint, crosses the reset itself.
  EXPECT_HAS(r.gradient_method, "cvodes_adjoint");
  // A = a0 e^{−kt} until τ = ln(a0/θ)/k, then (θ + d) e^{−k(t−τ)}:
  // dA/dk = −t A on both sides, dA/dθ = −(d/θ) e^{−k(t−τ)} (the jump term:
  // θ moves τ), dA/dd = e^{−k(t−τ)}.
  struct Row { double a0, t, m; };
  const Row rows[] = {{1, 1, 0.55}, {1, 2, 0.40}, {1, 3, 0.60}, {1, 4, 0.45},
                      {2, 1, 1.2},  {2, 3, 0.50}, {2, 4, 0.60}, {2, 5, 0.50}};
  double llh = 0.0, dk = 0.0, dth = 0.0, dd = 0.0;
  for (const Row& w : rows) {
    const double tau = std::log(w.a0 / theta) / k;
    const bool after = w.t >= tau;
    const double decay = std::exp(-k * (w.t - tau));
    const double a = after ? (theta + dose) * decay : w.a0 * std::exp(-k * w.t);
    const double res = (w.m - a) / sigma;
    llh += -0.5 * std::log(2.0 * std::numbers::pi * sigma * sigma) - 0.5 * res * res;
    const double s = res / sigma;  // d llh / dA
    dk += s * (-w.t * a);
    if (after) {
      dth += s * (-dose / theta * decay);
      dd += s * decay;
    }
  }
  dk *= k * std::numbers::ln10;  // k on the log10 scale
  EXPECT_NEAR(r.llh, llh, kLlhTol * std::abs(llh));
  ASSERT_EQ(r.gradient.size(), 3u);
  const double norm = std::sqrt(dk * dk + dth * dth + dd * dd);
  EXPECT_NEAR(r.gradient[0], dk, kGradRelTol * norm);
  EXPECT_NEAR(r.gradient[1], dth, kGradRelTol * norm);
  EXPECT_NEAR(r.gradient[2], dd, kGradRelTol * norm);
  // Both experiments cross their reset (τ = 2.41 and 3.79): without the
  // jump term dθ would be 0.
  EXPECT_GT(std::abs(dth), 1.0);
}

TEST(PetabEvents, NativeIntegratorGivesTheSameLikelihoodAsCvodes) {
  // The simulation by CVODES' root finding and by costate's bdf event
  // driver: the same llh to the integrators' tolerances.
  const petab::Problem pb = ResetFiles{}.read();
  const std::vector<double> x = pb.nominal_on_scale();
  petab::Options native;
  native.integrator.method = costate::ode::Method::Bdf;
  EXPECT_NEAR(petab::evaluate(pb, x).llh, petab::evaluate(pb, x, native).llh,
              kLlhTol * std::abs(petab::evaluate(pb, x).llh));
}

TEST(PetabEvents, PreequilibrationWithEventsIsRefusedByName) {
  ResetFiles f;
  f.measurements =
      "observableId\tpreequilibrationConditionId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_a\tlow\thigh\t1\t0.5\n";
  const petab::Problem pb = f.read();
  try {
    (void)petab::evaluate(pb, pb.nominal_on_scale());
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_HAS(e.what(), "experiment high (pre-equilibrated in low)");
    EXPECT_HAS(e.what(), "the model has events ('reset')");
    EXPECT_HAS(e.what(), "pre-equilibration");
  }
}

TEST(PetabEvents, MeasurementsAtTimeInfWithEventsAreRefusedByName) {
  ResetFiles f;
  f.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_a\tlow\t1\t0.55\n"
      "obs_a\tlow\tinf\t0.5\n";
  const petab::Problem pb = f.read();
  try {
    (void)petab::evaluate(pb, pb.nominal_on_scale());
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_HAS(e.what(), "experiment low");
    EXPECT_HAS(e.what(), "the model has events ('reset')");
    EXPECT_HAS(e.what(), "measurements at time inf");
  }
}

TEST(PetabEvents, FisherInformationCrossesTheReset) {
  // The Fisher information from CVODES' forward sensitivities, jumped at the
  // reset (events.cpp), against the closed form's F = Σ (∂A/∂x)(∂A/∂x)ᵀ/σ²
  // with the derivatives of StateTriggeredResetMatchesTheClosedForm (∂A/∂θ
  // is all jump term). CVODES at 1e-10 with the sensitivities in its error
  // test: 1e-6 of F's largest entry.
  const petab::Problem pb = ResetFiles{}.read();
  const double k = 0.5, theta = 0.3, dose = 0.5, sigma = 0.1;
  petab::Options opt;
  opt.fim = true;
  const petab::Result r = petab::evaluate(pb, {std::log10(k), theta, dose}, opt);
  ASSERT_EQ(r.fim.size(), 9u);
  struct Row { double a0, t; };
  const Row rows[] = {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {2, 1}, {2, 3}, {2, 4}, {2, 5}};
  double F[3][3] = {};
  for (const Row& w : rows) {
    const double tau = std::log(w.a0 / theta) / k;
    const bool after = w.t >= tau;
    const double decay = std::exp(-k * (w.t - tau));
    const double a = after ? (theta + dose) * decay : w.a0 * std::exp(-k * w.t);
    const double d[3] = {-w.t * a * k * std::numbers::ln10, after ? -dose / theta * decay : 0.0,
                         after ? decay : 0.0};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) F[i][j] += d[i] * d[j] / (sigma * sigma);
  }
  double scale = 0.0;
  for (const auto& row : F)
    for (double v : row) scale = std::max(scale, std::abs(v));
  constexpr double kFimRelTol = 1e-6;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(r.fim[static_cast<std::size_t>(3 * i + j)], F[i][j], kFimRelTol * scale)
          << "F(" << i << ", " << j << ")";
  EXPECT_GT(F[1][1], 1.0) << "the jump term carries the information on θ";
}

// Events together with an input switched in time: the decay rate doubles
// at t_s (k·piecewise(1, t < t_s, 2)), t_s estimated. The model's relation on
// time is a switching function (sbml.md), so the event driver locates the
// switch with the resets in one integration. The likelihood against the
// closed form (A decays at k, then 2k, and is reset to θ + d on reaching
// θ, repeatedly), the gradient against central differences of it.
TEST(PetabEvents, EventsWithAnInputSwitchedInTime) {
  ResetFiles f;
  const std::string law = "<apply><times/><ci> k </ci><ci> A </ci><ci> cell </ci></apply>";
  f.model.replace(f.model.find(law), law.size(),
                  "<apply><times/><ci> k </ci><ci> A </ci><ci> cell </ci><piecewise><piece><cn> 1 "
                  "</cn><apply><lt/><csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/"
                  "sbml/symbols/time\"> time </csymbol><ci> ts </ci></apply></piece><otherwise><cn> 2 "
                  "</cn></otherwise></piecewise></apply>");
  f.model.replace(f.model.find("    </listOfParameters>"), 0,
                  "      <parameter id=\"ts\" value=\"1.5\" constant=\"true\"/>\n");
  f.parameters += "ts\tlin\t0.1\t4\t1.5\t1\n";
  const petab::Problem pb = f.read();
  ASSERT_EQ(pb.estimated_ids(), (std::vector<std::string>{"k", "theta", "dose", "ts"}));
  const double k = 0.5, theta = 0.3, dose = 0.5, ts = 1.5, sigma = 0.1;
  // A(t) by its pieces: exponential decay at k before ts and 2k after,
  // reset to θ + d whenever it reaches θ.
  auto A = [&](double a0, double t_end) {
    double t = 0.0, a = a0;
    while (true) {
      const double rate = t < ts ? k : 2.0 * k;
      const double reach = t + std::log(a / theta) / rate;  // A = θ
      const double stop = std::min({reach, t < ts ? ts : reach, t_end});
      a *= std::exp(-rate * (stop - t));
      t = stop;
      if (t >= t_end) return a;
      if (t == reach) a = theta + dose;
    }
  };
  struct Row { double a0, t, m; };
  const Row rows[] = {{1, 1, 0.55}, {1, 2, 0.40}, {1, 3, 0.60}, {1, 4, 0.45},
                      {2, 1, 1.2},  {2, 3, 0.50}, {2, 4, 0.60}, {2, 5, 0.50}};
  double llh = 0.0;
  for (const Row& w : rows) {
    const double res = (w.m - A(w.a0, w.t)) / sigma;
    llh += -0.5 * std::log(2.0 * std::numbers::pi * sigma * sigma) - 0.5 * res * res;
  }
  const std::vector<double> x = {std::log10(k), theta, dose, ts};
  petab::Options opt;
  opt.gradient = true;
  const petab::Result r = petab::evaluate(pb, x, opt);
  // Up to six resets per experiment, each located by CVODES at rtol 1e-10:
  // A within ~1e-8, and Σ |residual|/σ² ≈ 30 of them makes the llh's error
  // ~3e-7 (measured 2.8e-7) of an llh of only −1.3.
  constexpr double kResetsLlhTol = 1e-6;
  EXPECT_NEAR(r.llh, llh, kResetsLlhTol);
  // Central differences, h = 1e-5: truncation ~h² and the simulations'
  // error (~1e-8 in the llh's terms) over h, ~1e-3 absolute, on gradients
  // of ~10: 1e-4 of the norm.
  constexpr double kStep = 1e-5, kDifferenceRelTol = 1e-4;
  double norm = 0.0;
  for (double g : r.gradient) norm = std::max(norm, std::abs(g));
  for (std::size_t j = 0; j < x.size(); ++j) {
    std::vector<double> up = x, down = x;
    up[j] += kStep;
    down[j] -= kStep;
    const double central = (petab::evaluate(pb, up).llh - petab::evaluate(pb, down).llh) / (2 * kStep);
    EXPECT_NEAR(r.gradient[j], central, kDifferenceRelTol * norm) << pb.estimated_ids()[j];
  }
}

// ---- Liu_IFACPapersOnLine2025 ------------------------------------------------

const fs::path kLiu = fs::path(COSTATE_PETAB_DIR) / "benchmark" / "Liu_IFACPapersOnLine2025";

// The collection's simulatedData were computed by another tool at its own
// tolerances: agreement to 1e-5 of each value (measured 1.1e-7).
constexpr double kSimulatedDataRtol = 1e-5;
// The nominal values are the published optimum: the gradient (~7e-3) is
// ~1e-5 of the likelihood's terms, so its error is the integrators' — at
// rtol = atol = 1e-10 the adjoint (bdf) and the differences (CVODES)
// disagreed by 5e-4 of the norm, at 1e-12 by 6e-5: each component to 1e-4
// of itself or of the gradient's norm, at 1e-12.
constexpr double kDifferenceRtol = 1e-4;
constexpr double kLiuRtol = 1e-12, kLiuAtol = 1e-12;

TEST(PetabEvents, LiuMatchesSimulatedDataAndDifferences) {
  const fs::path yaml = kLiu / "Liu_IFACPapersOnLine2025.yaml";
  if (!fs::exists(yaml)) GTEST_SKIP() << "absent: " << yaml.string();
  const petab::Problem pb = petab::read(yaml.string());
  ASSERT_GT(pb.model.equations.n_events(), 0u);
  const std::vector<double> x = pb.nominal_on_scale();
  petab::Options opt;
  opt.integrator.rtol = kLiuRtol;
  opt.integrator.atol = kLiuAtol;
  petab::Options value_only = opt;
  opt.gradient = true;
  const petab::Result r = petab::evaluate(pb, x, opt);
  EXPECT_TRUE(std::isfinite(r.llh));
  EXPECT_HAS(r.gradient_method, "cvodes_adjoint");

  // simulatedData: one simulation per (condition, time), its rows in an
  // order of their own; the measurement table's rows give each
  // measurement's condition and time.
  auto rows = [](const fs::path& file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    std::vector<std::vector<std::string>> out;
    while (std::getline(in, line)) {
      std::stringstream cells(line);
      std::string cell;
      std::vector<std::string> row;
      while (std::getline(cells, cell, '\t')) row.push_back(cell);
      if (row.size() > 3) out.push_back(row);
    }
    return out;
  };
  std::map<std::pair<std::string, double>, double> simulated;  // (condition, time) → h
  for (const auto& row : rows(kLiu / "simulatedData_Liu_IFACPapersOnLine2025.tsv"))
    simulated[{row[1], std::stod(row[3])}] = std::stod(row[2]);
  const auto measured = rows(kLiu / "measurements.tsv");  // observable, condition, value, time
  ASSERT_EQ(measured.size(), r.simulations.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const auto it = simulated.find({measured[i][1], std::stod(measured[i][3])});
    ASSERT_NE(it, simulated.end()) << "row " << i;
    const double s = it->second;
    worst = std::max(worst, std::abs(r.simulations[i] - s) / std::abs(s));
    EXPECT_NEAR(r.simulations[i], s, kSimulatedDataRtol * std::abs(s)) << "row " << i;
  }
  std::cout << "Liu: llh " << r.llh << ", worst relative simulatedData deviation " << worst << "\n";

  std::vector<costate::ad::Difference> d;
  for (std::size_t e = 0; e < x.size(); ++e)
    d.push_back(costate::ad::richardson_difference(
        [&](double h) {
          std::vector<double> xh = x;
          xh[e] += h;
          return petab::evaluate(pb, xh, value_only).llh;
        },
        1e-3, 4));
  const costate::ad::GradientCheckResult c = costate::ad::check_against_differences(
      r.gradient, d, {.rtol = kDifferenceRtol, .norm_rtol = kDifferenceRtol, .spread_factor = 3.0});
  for (std::size_t e = 0; e < x.size(); ++e)
    std::cout << "  " << pb.estimated_ids()[e] << ": adjoint " << r.gradient[e] << ", differences "
              << d[e].value << " (spread " << d[e].spread << ")\n";
  EXPECT_TRUE(c.passed);
}

}  // namespace
