// petab::read and petab::evaluate on small problems written here:
// - a decay A → B (rate k·A) with two conditions, a log10-scaled estimated
//   k, a parametric noise override and a log-transformed observable: llh,
//   χ² and the gradient against the closed form A(t) = a0 e^{−k t};
// - bad input: each error names the file, the line (and column or id) and
//   what was expected, with a "did you mean" for misspelt ids.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"
#include "text_problem.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;

const char* kModel = R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
  <model id="decay">
    <listOfCompartments>
      <compartment id="cell" size="1" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="cell" initialConcentration="1" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
      <species id="B" compartment="cell" initialConcentration="0" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters>
      <parameter id="k" value="1" constant="true"/>
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
        <listOfProducts><speciesReference species="B" stoichiometry="1" constant="true"/></listOfProducts>
        <kineticLaw>
          <math xmlns="http://www.w3.org/1998/Math/MathML">
            <apply><times/><ci> k </ci><ci> A </ci><ci> cell </ci></apply>
          </math>
        </kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
)";

/// A problem folder in the build tree, written from the tables given.
struct Files : costate::test::TextProblem {
  fs::path dir;
  explicit Files(const std::string& name) : dir(fs::current_path() / ("petab_input_" + name)) {
    model = kModel;
    parameters =
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        "k\tlog10\t0.01\t100\t0.7\t1\n"
        "sigma\tlin\t0.01\t10\t0.2\t1\n";
    observables =
        "observableId\tobservableFormula\tnoiseFormula\tobservableTransformation\n"
        "obs_a\tA\tnoiseParameter1_obs_a\tlin\n"
        "obs_b\tB\t0.3\tlog\n";
    conditions =
        "conditionId\ta0\n"
        "c0\t1\n"
        "c1\t2.5\n";
    measurements =
        "observableId\tsimulationConditionId\ttime\tmeasurement\tnoiseParameters\n"
        "obs_a\tc0\t1\t0.45\tsigma\n"
        "obs_a\tc1\t2\t0.70\tsigma\n"
        "obs_b\tc1\t1\t1.20\t\n";
  }
  std::string write() const { return TextProblem::write(dir); }
};

/// The message of the costate::Error that reading (and evaluating) throws.
std::string error_of(const Files& f) {
  try {
    const petab::Problem pb = petab::read(f.write());
    (void)petab::evaluate(pb, pb.nominal_on_scale());
  } catch (const costate::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

// CVODES at rtol 1e-10 / atol 1e-12 on a decay: the llh to ~1e-9, its
// gradient (adjoint) to ~1e-8 of its size.
constexpr double kLlhTol = 1e-8;
constexpr double kGradTol = 1e-6;

TEST(PetabEvaluate, DecayMatchesTheClosedForm) {
  Files f("decay");
  const petab::Problem pb = petab::read(f.write());
  ASSERT_EQ(pb.experiments.size(), 2u);
  ASSERT_EQ(pb.estimated_ids(), (std::vector<std::string>{"k", "sigma"}));
  const std::vector<double> theta = {std::log10(0.7), 0.2};
  petab::Options opt;
  opt.gradient = true;
  const petab::Result r = petab::evaluate(pb, theta, opt);
  // Closed form: A = a0 e^{−kt}, B = a0 (1 − e^{−kt}).
  const double k = 0.7, s = 0.2, ln2pi = std::log(2.0 * std::numbers::pi);
  struct Row { double a0, t, m, sigma; bool log_b; };
  const Row rows[] = {{1.0, 1.0, 0.45, s, false}, {2.5, 2.0, 0.70, s, false}, {2.5, 1.0, 1.20, 0.3, true}};
  double llh = 0.0, chi2 = 0.0, dk = 0.0, ds = 0.0;
  for (const Row& w : rows) {
    const double e = std::exp(-k * w.t);
    const double h = w.log_b ? w.a0 * (1.0 - e) : w.a0 * e;
    const double dh_dk = w.log_b ? w.a0 * w.t * e : -w.a0 * w.t * e;
    const double y = w.log_b ? std::log(h) : h, m = w.log_b ? std::log(w.m) : w.m;
    const double dy_dk = w.log_b ? dh_dk / h : dh_dk;
    const double res = (m - y) / w.sigma;
    llh += -0.5 * ln2pi - std::log(w.sigma) - 0.5 * res * res - (w.log_b ? std::log(w.m) : 0.0);
    chi2 += res * res;
    dk += res / w.sigma * dy_dk;
    if (!w.log_b) ds += -1.0 / w.sigma + res * res / w.sigma;
  }
  EXPECT_NEAR(r.llh, llh, kLlhTol);
  EXPECT_NEAR(r.chi2, chi2, kLlhTol);
  ASSERT_EQ(r.gradient.size(), 2u);
  EXPECT_NEAR(r.gradient[0], dk * k * std::numbers::ln10, kGradTol);  // d/d log10 k
  EXPECT_NEAR(r.gradient[1], ds, kGradTol);
  EXPECT_NEAR(r.simulations[0], std::exp(-k), kLlhTol);
}

// A model with an algebraic rule (0 = y + A − 2: y an algebraic state) is
// a DAE in PEtab too: integrated by bdf, the observable y = 2 − a0 e^{−kt}
// gives the closed-form likelihood; CVODES (ODEs only) is refused by name.
TEST(PetabEvaluate, AlgebraicRuleModelIsADae) {
  Files f("dae");
  f.model = std::string(kModel).replace(
      std::string(kModel).find("    </listOfParameters>"), 0,
      "      <parameter id=\"y\" value=\"0\" constant=\"false\"/>\n");
  f.model.replace(f.model.find("    <listOfReactions>"), 0,
                  "    <listOfRules><algebraicRule><math xmlns=\"http://www.w3.org/1998/Math/MathML\">"
                  "<apply><minus/><apply><plus/><ci> y </ci><ci> A </ci></apply><cn> 2 </cn></apply>"
                  "</math></algebraicRule></listOfRules>\n");
  f.observables = "observableId\tobservableFormula\tnoiseFormula\nobs_y\ty\t0.1\n";
  f.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_y\tc0\t1\t1.5\n"
      "obs_y\tc1\t2\t1.8\n";
  const petab::Problem pb = petab::read(f.write());
  const double k = 0.7;
  const std::vector<double> theta = {std::log10(k), 0.2};
  petab::Options opt;
  opt.integrator.method = costate::ode::Method::Bdf;
  const petab::Result r = petab::evaluate(pb, theta, opt);
  double llh = 0.0;
  for (const auto& [a0, t, m] : {std::tuple{1.0, 1.0, 1.5}, std::tuple{2.5, 2.0, 1.8}}) {
    const double res = (m - (2.0 - a0 * std::exp(-k * t))) / 0.1;
    llh += -0.5 * std::log(2.0 * std::numbers::pi * 0.01) - 0.5 * res * res;
  }
  EXPECT_NEAR(r.llh, llh, kLlhTol * std::abs(llh));  // relative: the residuals are ~10
  try {
    (void)petab::evaluate(pb, theta);  // CVODES BDF: no DAEs
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_HAS(e.what(), "algebraic");
  }
}

TEST(PetabInput, MalformedTableNamesFileAndLine) {
  Files f("malformed");
  f.measurements += "obs_a\tc0\t3\t0.2\tsigma\textra\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "measurements.tsv:5:");
  EXPECT_HAS(e, "6 cells, but the header has 5 columns");
}

TEST(PetabInput, NotANumberNamesTheColumn) {
  Files f("nan_cell");
  f.parameters += "q\tlin\t0\t1\tabc\t0\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "parameters.tsv:4:5 (nominalValue): expected a number, got 'abc'");
}

TEST(PetabInput, UnknownObservableSuggestsTheNearest) {
  Files f("unknown_observable");
  f.measurements += "obs_aa\tc0\t3\t0.2\tsigma\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "measurements.tsv:5:1 (observableId): unknown observable 'obs_aa'");
  EXPECT_HAS(e, "did you mean 'obs_a'?");
}

TEST(PetabInput, UnknownConditionColumnSuggestsTheNearest) {
  Files f("unknown_column");
  f.conditions = "conditionId\ta00\nc0\t1\nc1\t2\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "conditions.tsv:1:2: condition column 'a00' is not a parameter, species or compartment");
  EXPECT_HAS(e, "did you mean 'a0'?");
}

TEST(PetabInput, UnknownOverrideParameterSuggestsTheNearest) {
  Files f("unknown_override");
  f.measurements += "obs_a\tc0\t3\t0.2\tsigmaa\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "measurements.tsv:5:5 (noiseParameters): 'sigmaa' is neither a number nor a parameter");
  EXPECT_HAS(e, "did you mean 'sigma'?");
}

TEST(PetabInput, FormulaThatDoesNotCompileNamesTheColumn) {
  Files f("bad_formula");
  f.observables += "obs_c\tA * (B + \t1\tlin\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "observables.tsv:4:2 (observableFormula of obs_c)");
  EXPECT_HAS(e, "A * (B +");
}

TEST(PetabInput, UnknownSymbolInAFormulaSuggestsTheNearest) {
  Files f("bad_symbol");
  f.observables += "obs_c\tAA + B\t1\tlin\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "observables.tsv:4:2 (observableFormula of obs_c)");
  EXPECT_HAS(e, "AA");
}

TEST(PetabInput, UnsupportedFeaturesAreRefusedByName) {
  {
    Files f("chi_square");
    f.observables = "observableId\tobservableFormula\tnoiseFormula\tnoiseDistribution\nobs_a\tA\t1\tstudent\n";
    f.measurements = "observableId\tsimulationConditionId\ttime\tmeasurement\nobs_a\tc0\t1\t0.4\n";
    const std::string e = error_of(f);
    EXPECT_HAS(e, "observables.tsv:2:4 (noiseDistribution): noiseDistribution 'student' is not supported");
  }
  {
    // inf is a steady-state measurement (steady_state_test.cpp); −inf is not a time.
    Files f("negative_infinite_time");
    f.measurements += "obs_a\tc0\t-inf\t0.2\tsigma\n";
    const std::string e = error_of(f);
    EXPECT_HAS(e, "measurements.tsv:5:3 (time): time must be >= 0, or inf for a steady-state measurement (got '-inf')");
  }
  {
    Files f("prior");
    f.parameters = "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\tobjectivePriorType\tobjectivePriorParameters\n"
                   "k\tlog10\t0.01\t100\t0.7\t1\tlogNormal\t0;1\n"
                   "sigma\tlin\t0.01\t10\t0.2\t1\t\t\n";
    const std::string e = error_of(f);
    EXPECT_HAS(e, "parameters.tsv:2:7 (objectivePriorType): objectivePriorType 'logNormal' is not supported");
  }
  {
    Files f("two_models");
    f.yaml = "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n"
             "- sbml_files: [model.xml, model.xml]\n  condition_files: [conditions.tsv]\n"
             "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n";
    EXPECT_HAS(error_of(f), "problem.yaml: problems[0].sbml_files lists 2 files; several sbml_files per problem are not supported");
  }
  {
    Files f("version");
    f.yaml = "format_version: 2\nparameter_file: parameters.tsv\nproblems: []\n";
    EXPECT_HAS(error_of(f), "format_version 2 is not supported");
  }
}

TEST(PetabInput, OverrideCountMustMatchThePlaceholders) {
  Files f("override_count");
  f.measurements += "obs_a\tc0\t3\t0.2\tsigma;0.1\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "measurements.tsv:5:5 (noiseParameters): observable 'obs_a' has 1 noiseParameter<k>_obs_a placeholders, the row gives 2 values");
}

TEST(PetabInput, NonPositiveSigmaNamesTheMeasurement) {
  Files f("sigma");
  f.measurements += "obs_a\tc0\t3\t0.2\t-1\n";
  const std::string e = error_of(f);
  EXPECT_HAS(e, "measurements.tsv:5: noise sigma = -1");
}

// Found by the libFuzzer target tests/fuzz/petab_fuzz.cpp: a value of the
// wrong YAML kind in the problem file (a list where a name belongs, a scalar
// where the problem's map belongs, a list as a file name) escaped as a
// yaml-cpp exception without the file's name; now a costate::Error naming
// the file, line and column.
TEST(PetabInput, WrongYamlKindsNameTheProblemFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"format_version: [1]\nparameter_file: parameters.tsv\nproblems: []\n", "problem.yaml:1:17:"},
      {"format_version: 1\nparameter_file: {a: 1}\nproblems: [x]\n", "problem.yaml:2:17:"},
      {"format_version: 1\nparameter_file: parameters.tsv\nproblems: [x]\n", "problem.yaml:3:12:"},
      {"format_version: 1\nparameter_file: parameters.tsv\nproblems: [{[a]: 1}]\n",
       "problem.yaml:3:13:"},
      {"format_version: 1\nparameter_file: parameters.tsv\nproblems: [{sbml_files: [[a]], "
       "condition_files: [c], measurement_files: [m], observable_files: [o]}]\n",
       "problem.yaml:3:26:"},
  };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    Files f("yaml_kind_" + std::to_string(k));
    f.yaml = cases[k].first;
    const std::string e = error_of(f);
    EXPECT_HAS(e, cases[k].second);
    EXPECT_HAS(e, "not a PEtab problem file");
  }
}

// petab::read_text, the in-memory entry (the fuzz target's): the same
// parser as petab::read, so the same problem from the same texts, and
// messages that name the table by its path and line as read()'s do.
std::map<std::string, std::string> texts_of(const Files& f, const std::string& dir) {
  return f.texts(dir);
}

std::string read_text_error(const Files& f, const std::map<std::string, std::string>& files) {
  try {
    (void)petab::read_text(f.yaml, "in/memory/problem.yaml", files);
  } catch (const costate::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(PetabReadText, SameProblemAsFromFiles) {
  Files f("read_text");
  const petab::Problem disk = petab::read(f.write());
  const petab::Problem mem = petab::read_text(f.yaml, "in/memory/problem.yaml", texts_of(f, "in/memory/"));
  EXPECT_EQ(mem.file, "in/memory/problem.yaml");
  EXPECT_EQ(mem.measurement_file, "in/memory/measurements.tsv");
  EXPECT_EQ(mem.brief_report().substr(mem.file.size()), disk.brief_report().substr(disk.file.size()));
  EXPECT_EQ(mem.estimated_ids(), disk.estimated_ids());
  EXPECT_EQ(mem.nominal_on_scale(), disk.nominal_on_scale());
  EXPECT_EQ(mem.formula_variables, disk.formula_variables);
  ASSERT_EQ(mem.measurements.size(), disk.measurements.size());
  for (std::size_t i = 0; i < mem.measurements.size(); ++i) {
    EXPECT_EQ(mem.measurements[i].value, disk.measurements[i].value);
    EXPECT_EQ(mem.measurements[i].line, disk.measurements[i].line);
  }
  // Bit-identical likelihoods: one parser, one model, one evaluation.
  EXPECT_EQ(petab::evaluate(mem, mem.nominal_on_scale()).llh,
            petab::evaluate(disk, disk.nominal_on_scale()).llh);
}

TEST(PetabReadText, MessagesNameTheTableAndLine) {
  Files f("read_text_errors");
  f.measurements += "obs_a\tc0\t3\t0.2\tsigma\textra\n";
  std::string e = read_text_error(f, texts_of(f, "in/memory/"));
  EXPECT_HAS(e, "in/memory/measurements.tsv:5: 6 cells, but the header has 5 columns");
  // A file the YAML names but `files` does not hold: a file that cannot be opened.
  f = Files("read_text_missing");
  std::map<std::string, std::string> files = texts_of(f, "in/memory/");
  files.erase("in/memory/observables.tsv");
  e = read_text_error(f, files);
  EXPECT_HAS(e, "in/memory/observables.tsv: cannot open the table");
  // The YAML's own errors name yaml_name and the line.
  f.yaml = "format_version: [1]\nparameter_file: parameters.tsv\nproblems: []\n";
  e = read_text_error(f, texts_of(f, "in/memory/"));
  EXPECT_HAS(e, "in/memory/problem.yaml:1:17:");
}

}  // namespace

namespace {

// Problems as the published collection writes them: the same problem read
// three ways gives the same likelihood to the last bit — one parser, one
// model, one evaluation; only the reading differs.
double llh_of(const std::string& yaml, const std::map<std::string, std::string>& files) {
  const petab::Problem pb = petab::read_text(yaml, "mem/problem.yaml", files);
  return petab::evaluate(pb, pb.nominal_on_scale()).llh;
}

TEST(PetabInput, PublishedLayouts) {
  const Files f("published");
  const std::map<std::string, std::string> plain = texts_of(f, "mem/");
  const double reference = llh_of(f.yaml, plain);
  ASSERT_TRUE(std::isfinite(reference));

  // 1. Every table starts with a UTF-8 byte-order mark.
  std::map<std::string, std::string> bom = plain;
  for (auto& [path, text] : bom)
    if (path.ends_with(".tsv")) text = "\xEF\xBB\xBF" + text;
  EXPECT_EQ(llh_of(f.yaml, bom), reference);

  // 2. A parameter that is not estimated, at nominal value 0 on a log10
  //    scale: used as it is (0), so obs_a = A + offset is A.
  std::map<std::string, std::string> fixed = plain;
  fixed["mem/parameters.tsv"] += "offset\tlog10\t1\t10\t0\t0\n";
  fixed["mem/observables.tsv"] =
      "observableId\tobservableFormula\tnoiseFormula\tobservableTransformation\n"
      "obs_a\tA + offset\tnoiseParameter1_obs_a\tlin\n"
      "obs_b\tB\t0.3\tlog\n";
  EXPECT_EQ(llh_of(f.yaml, fixed), reference);
  // …and an estimated one may be 0 (−inf on its scale, exactly 0 in the
  // model), not negative.
  fixed["mem/parameters.tsv"] = f.parameters + "offset\tlog10\t1\t10\t0\t1\n";
  EXPECT_EQ(llh_of(f.yaml, fixed), reference);
  fixed["mem/parameters.tsv"] = f.parameters + "offset\tlog10\t1\t10\t-1\t1\n";
  try {
    (void)petab::read_text(f.yaml, "mem/problem.yaml", fixed);
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_HAS(e.what(), "mem/parameters.tsv:4:5 (nominalValue): nominalValue must not be negative on scale log10");
  }

  // 3. Measurements and observables split over two files each.
  const std::string yaml =
      "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [model.xml]\n"
      "  condition_files: [conditions.tsv]\n"
      "  measurement_files: [measurements.tsv, more_measurements.tsv]\n"
      "  observable_files: [observables.tsv, more_observables.tsv]\n";
  std::map<std::string, std::string> split = plain;
  const std::string m_header =
      "observableId\tsimulationConditionId\ttime\tmeasurement\tnoiseParameters\n";
  split["mem/measurements.tsv"] = m_header + "obs_a\tc0\t1\t0.45\tsigma\nobs_a\tc1\t2\t0.70\tsigma\n";
  split["mem/more_measurements.tsv"] = m_header + "obs_b\tc1\t1\t1.20\t\n";
  const std::string o_header = "observableId\tobservableFormula\tnoiseFormula\tobservableTransformation\n";
  split["mem/observables.tsv"] = o_header + "obs_a\tA\tnoiseParameter1_obs_a\tlin\n";
  split["mem/more_observables.tsv"] = o_header + "obs_b\tB\t0.3\tlog\n";
  EXPECT_EQ(llh_of(yaml, split), reference);
  // An error in the second file names that file and its line.
  split["mem/more_measurements.tsv"] += "obs_a\tc0\t3\t0.2\t-1\n";
  try {
    (void)llh_of(yaml, split);
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_HAS(e.what(), "mem/more_measurements.tsv:3: noise sigma = -1");
  }
}

}  // namespace
