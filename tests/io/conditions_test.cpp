// Multi-condition input files (`conditions:`, io/conditions.hpp): the
// summed objective's gradient against central differences, the objective
// against single-condition files, the calibration's recovery of a known
// truth, the mini-batch fit's reproducibility, and refusals of bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "costate/calibrate/calibrate.hpp"
#include "costate/core/error.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/input.hpp"
#include "costate/io/resume.hpp"

namespace {

namespace fs = std::filesystem;
using costate::io::RunConfig;

const std::string kExample = COSTATE_DATA_DIR "/examples/decay_conditions.yaml";
const std::string kData = COSTATE_DATA_DIR "/examples/decay_conditions/";

/// Central differences with h = kStep·max(1, |x|): their truncation error
/// (h² J'''/6 ≈ 1e-12 relative) and round-off (ε J / h ≈ 1e-10 relative for
/// J up to 1e6) lie far below this bound on |∇J − FD| / (|∇J| + 1). The
/// steps are fixed (rk4, dt): J is the same smooth function of the
/// parameters at every evaluation, and the discrete adjoint its exact
/// gradient.
constexpr double kStep = 1e-6;
constexpr double kFiniteDifference = 1e-6;
/// Truth of data/examples/make_decay_conditions.py.
constexpr double kTrueK = 0.5, kTrueM = 0.2, kTrueKi = 0.15;
/// |fitted − truth| ≤ kSigmas standard errors: with a correct covariance each
/// of the three fails with probability 0.27 % (the data are fixed, so the
/// test is deterministic; this is the statistical bar it was chosen by).
constexpr double kSigmas = 3.0;

class ConditionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_conditions_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  /// The model and settings every file below shares.
  static std::string head(const std::string& parameters, const std::string& initial) {
    return "model: {states: [x, y], equations: {x: \"-k*x\", y: \"k*x - m*y\"}}\n"
           "parameters: " + parameters + "\n"
           "initial_state: " + initial + "\n"
           "time: {start: 0.0, end: 10.0, output_every: 0.5}\n"
           "integrator: {method: rk4, dt: 0.01}\n"
           "sensitivity: {method: discrete_adjoint}\n";
  }
  /// Four conditions that use every kind of replacement: a parameter set
  /// to a number (dose), to another parameter (k → k_i, m → k), an initial
  /// value set to a parameter (x0), an expression of one (2*x0) and a
  /// number (y = 0.5); a terminal term applies to every condition.
  std::string mixed() {
    const std::string d = kData;
    return write("mixed.yaml",
                 head("{k: 0.4, m: 0.25, k_i: 0.2, dose: 1.0, x0: 3.0}", "{x: dose, y: 0.05}") +
                     "objective: {terminal: \"0.5*y*y\"}\n"
                     "conditions:\n"
                     "  - {id: a, parameters: {dose: 1}, data: {file: " + d + "dose1.csv, noise: 0.02}}\n"
                     "  - {id: b, parameters: {dose: 4, k: k_i}, data: {file: " + d + "inhibited.csv, noise: 0.02}}\n"
                     "  - {id: c, initial_state: {x: x0, y: 0.5}, data: {file: " + d + "dose2.csv, noise: 0.02}}\n"
                     "  - {id: d, parameters: {m: k}, initial_state: {x: 2*x0}, data: {file: " + d +
                     "dose8.csv, noise: 0.02}}\n"
                     "calibration:\n"
                     "  parameters: {k: {}, m: {}, k_i: {}, x0: {}}\n"
                     "  initial_state: {y: {}}\n");
  }
  /// The message of the costate::Error that loading `text` throws ("" when none).
  std::string refusal(const std::string& text) {
    try {
      (void)costate::io::load_run_config(write("bad.yaml", text));
    } catch (const costate::Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(ConditionsTest, GradientOfTheSummedObjectiveMatchesCentralDifferences) {
  const RunConfig cfg = costate::io::load_run_config(mixed());
  ASSERT_EQ(cfg.conditions.size(), 4u);
  const costate::io::FileGradient g = costate::io::conditions_gradient(cfg);
  const auto J = [&](RunConfig c) { return costate::io::conditions_gradient(c).result.objective; };
  // Every parameter of the file, then the initial value of y (a number in
  // the file; x's is the expression `dose`, not a coordinate).
  for (std::size_t j = 0; j < cfg.parameters.size(); ++j) {
    const double h = kStep * std::max(1.0, std::abs(cfg.parameters[j]));
    RunConfig plus = cfg, minus = cfg;
    plus.parameters[j] += h;
    minus.parameters[j] -= h;
    const double fd = (J(plus) - J(minus)) / (2 * h);
    EXPECT_LE(std::abs(g.gradient_p[j] - fd), kFiniteDifference * (std::abs(g.gradient_p[j]) + 1.0))
        << cfg.parameter_names[j] << ": adjoint " << g.gradient_p[j] << ", differences " << fd;
  }
  // dose is replaced by a number where x's initial value reads it and unread
  // elsewhere: no gradient at all, exactly.
  EXPECT_EQ(g.gradient_p[3], 0.0);
  EXPECT_NE(g.gradient_p[2], 0.0);  // k_i: through condition b's k
  EXPECT_NE(g.gradient_p[4], 0.0);  // x0: through c's and d's initial x
  const double h = kStep;
  RunConfig plus = cfg, minus = cfg;
  plus.initial_state[1] += h;
  minus.initial_state[1] -= h;
  const double fd = (J(plus) - J(minus)) / (2 * h);
  const double gy = g.result.wrt_initial_state[1];
  EXPECT_LE(std::abs(gy - fd), kFiniteDifference * (std::abs(gy) + 1.0)) << "y(t0): adjoint " << gy << ", differences " << fd;

  // The calibration's gradient in q (parameters and y(t0), summed the same
  // way through CalibrationProblem).
  costate::io::CalibrationProblem problem(cfg);
  const auto q = problem.start();
  std::vector<double> gq(q.size()), scratch(q.size());
  (void)problem.objective_and_gradient(q, gq);
  for (std::size_t j = 0; j < q.size(); ++j) {
    const double hq = kStep * std::max(1.0, std::abs(q[j]));
    auto qp = q, qm = q;
    qp[j] += hq;
    qm[j] -= hq;
    const double fdq = (problem.objective_and_gradient(qp, scratch) - problem.objective_and_gradient(qm, scratch)) / (2 * hq);
    EXPECT_LE(std::abs(gq[j] - fdq), kFiniteDifference * (std::abs(gq[j]) + 1.0))
        << problem.variables()[j].label() << ": adjoint " << gq[j] << ", differences " << fdq;
  }
}

/// Every parameter's gradient of the summed objective against central
/// differences (kFiniteDifference).
void expect_gradient_matches_differences(const RunConfig& cfg) {
  const costate::io::FileGradient g = costate::io::conditions_gradient(cfg);
  const auto J = [&](RunConfig c) { return costate::io::conditions_gradient(c).result.objective; };
  for (std::size_t j = 0; j < cfg.parameters.size(); ++j) {
    const double h = kStep * std::max(1.0, std::abs(cfg.parameters[j]));
    RunConfig plus = cfg, minus = cfg;
    plus.parameters[j] += h;
    minus.parameters[j] -= h;
    const double fd = (J(plus) - J(minus)) / (2 * h);
    EXPECT_LE(std::abs(g.gradient_p[j] - fd), kFiniteDifference * (std::abs(g.gradient_p[j]) + 1.0))
        << cfg.input_path << ": " << cfg.parameter_names[j] << ": adjoint " << g.gradient_p[j] << ", differences " << fd;
  }
}

TEST_F(ConditionsTest, BuiltinAndSbmlModelsTakeConditions) {
  // A built-in model (lotka_volterra): alpha set per condition, one
  // condition's x(t0) replaced; the data are the synthetic counts.
  const std::string counts = COSTATE_DATA_DIR "/synthetic/lotka_volterra.csv";
  const RunConfig builtin = costate::io::load_run_config(write(
      "builtin.yaml",
      "model: lotka_volterra\nparameters: {alpha: 1.2, beta: 0.8, gamma: 2.5, delta: 1.2}\n"
      "initial_state: {x: 1.0, y: 1.0}\ntime: {start: 0.0, end: 10.0, output_every: 0.5}\n"
      "integrator: {method: rk4, dt: 0.01}\n"
      "conditions:\n  - {id: a, parameters: {alpha: 1.5}, data: {file: " + counts + ", noise: 0.1}}\n"
      "  - {id: b, initial_state: {x: 1.2}, data: {file: " + counts + ", noise: 0.1}}\n"));
  expect_gradient_matches_differences(builtin);
  const auto gb = costate::io::conditions_gradient(builtin);
  // alpha: only condition b reads the file's value.
  const RunConfig only_b = costate::io::condition_config(builtin, 1);
  EXPECT_EQ(gb.gradient_p[0], costate::io::file_gradient(only_b, only_b.parameters, only_b.initial_state).gradient_p[0]);

  // An SBML model: x → ∅ at rate k·x in a unit compartment; k per condition.
  write("decay.xml",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" level=\"3\" version=\"1\">\n"
        "<model id=\"decay\"><listOfCompartments><compartment id=\"V\" size=\"1\" constant=\"true\"/>"
        "</listOfCompartments><listOfSpecies><species id=\"x\" compartment=\"V\" initialAmount=\"2\" "
        "hasOnlySubstanceUnits=\"true\" boundaryCondition=\"false\" constant=\"false\"/></listOfSpecies>"
        "<listOfParameters><parameter id=\"k\" value=\"0.3\" constant=\"true\"/>"
        "<parameter id=\"k2\" value=\"0.7\" constant=\"true\"/></listOfParameters>"
        "<listOfReactions><reaction id=\"r\" reversible=\"false\" fast=\"false\"><listOfReactants>"
        "<speciesReference species=\"x\" stoichiometry=\"1\" constant=\"true\"/></listOfReactants>"
        "<kineticLaw><math xmlns=\"http://www.w3.org/1998/Math/MathML\"><apply><times/><ci>k</ci><ci>x</ci>"
        "</apply></math></kineticLaw></reaction></listOfReactions></model></sbml>\n");
  write("decay.csv", "t,x\n1,1.5\n2,1.1\n4,0.6\n");
  const RunConfig sbml = costate::io::load_run_config(write(
      "sbml.yaml",
      "model: {sbml: decay.xml}\ntime: {start: 0.0, end: 4.0, output_every: 1.0}\n"
      "integrator: {method: rk4, dt: 0.01}\n"
      "conditions:\n  - {id: slow, data: {file: decay.csv, noise: 0.1}}\n"
      "  - {id: fast, parameters: {k: k2}, initial_state: {x: 3}, data: {file: decay.csv, noise: 0.1}}\n"));
  ASSERT_TRUE(sbml.sbml);
  expect_gradient_matches_differences(sbml);
  const auto gs = costate::io::conditions_gradient(sbml);
  const std::size_t k2 = static_cast<std::size_t>(
      std::find(sbml.parameter_names.begin(), sbml.parameter_names.end(), "k2") - sbml.parameter_names.begin());
  ASSERT_LT(k2, sbml.parameter_names.size());
  EXPECT_NE(gs.gradient_p[k2], 0.0);  // through condition fast's k
}

TEST_F(ConditionsTest, ObjectiveIsTheSumOfSingleConditionRunsExactly) {
  const RunConfig cfg = costate::io::load_run_config(mixed());
  std::vector<double> parts;
  const double total = costate::io::conditions_gradient(cfg, &parts).result.objective;
  // The same four problems typed as four files without conditions.
  const std::string d = kData;
  const std::string single[] = {
      head("{k: 0.4, m: 0.25, k_i: 0.2, dose: 1, x0: 3.0}", "{x: 1, y: 0.05}") + "objective: {terminal: \"0.5*y*y\", data: {file: " + d + "dose1.csv, noise: {x: 0.02, y: 0.02}}}\n"
          "calibration: {parameters: {k: {}, m: {}}, data: {file: " + d + "dose1.csv, noise: 0.02}}\n",
      head("{k: 0.2, m: 0.25, k_i: 0.2, dose: 4, x0: 3.0}", "{x: 4, y: 0.05}") + "objective: {terminal: \"0.5*y*y\", data: {file: " + d + "inhibited.csv, noise: {x: 0.02, y: 0.02}}}\n"
          "calibration: {parameters: {k: {}, m: {}}, data: {file: " + d + "inhibited.csv, noise: 0.02}}\n",
      head("{k: 0.4, m: 0.25, k_i: 0.2, dose: 1.0, x0: 3.0}", "{x: 3, y: 0.5}") + "objective: {terminal: \"0.5*y*y\", data: {file: " + d + "dose2.csv, noise: {x: 0.02, y: 0.02}}}\n"
          "calibration: {parameters: {k: {}, m: {}}, data: {file: " + d + "dose2.csv, noise: 0.02}}\n",
      head("{k: 0.4, m: 0.4, k_i: 0.2, dose: 1.0, x0: 3.0}", "{x: 6, y: 0.05}") + "objective: {terminal: \"0.5*y*y\", data: {file: " + d + "dose8.csv, noise: {x: 0.02, y: 0.02}}}\n"
          "calibration: {parameters: {k: {}, m: {}}, data: {file: " + d + "dose8.csv, noise: 0.02}}\n"};
  double sum = 0.0, calibration_sum = 0.0;
  for (std::size_t c = 0; c < 4; ++c) {
    const RunConfig one = costate::io::load_run_config(write("single" + std::to_string(c) + ".yaml", single[c]));
    const double Jc = costate::io::file_gradient(one, one.parameters, one.initial_state).result.objective;
    EXPECT_EQ(Jc, parts[c]) << "condition " << cfg.conditions[c].id;
    sum += Jc;
    costate::io::CalibrationProblem p(one);
    std::vector<double> g(p.size());
    const double Jcal = p.objective_and_gradient(p.start(), g);
    calibration_sum = c == 0 ? Jcal : calibration_sum + Jcal;
  }
  EXPECT_EQ(total, sum);  // the same bits: the same terms added in the same order
  // The calibration's data term (no terminal term, no regularisation).
  costate::io::CalibrationProblem problem(cfg);
  std::vector<double> g(problem.size());
  EXPECT_EQ(problem.objective_and_gradient(problem.start(), g), calibration_sum);
}

TEST_F(ConditionsTest, CalibrationRecoversTheTruthWithinStandardErrors) {
  const RunConfig cfg = costate::io::load_run_config(kExample);
  ASSERT_EQ(cfg.conditions.size(), 5u);
  const costate::io::CalibrationReport rep = costate::io::calibrate(cfg);
  ASSERT_TRUE(rep.converged) << rep.tao.termination;
  const double truth[] = {kTrueK, kTrueM, kTrueKi};
  for (std::size_t a = 0; a < 3; ++a) {
    ASSERT_TRUE(std::isfinite(rep.standard_errors[a])) << rep.names[a];
    EXPECT_LE(std::abs(rep.values[a] - truth[a]), kSigmas * rep.standard_errors[a])
        << rep.names[a] << " = " << rep.values[a] << " ± " << rep.standard_errors[a] << ", truth " << truth[a];
  }
  // 2 states × 20 times × 5 conditions, each with its condition's id.
  EXPECT_EQ(rep.n_residuals, 200u);
  ASSERT_EQ(rep.residual_conditions.size(), 200u);
  EXPECT_EQ(rep.residual_conditions.front(), "dose1");
  EXPECT_EQ(rep.residual_conditions.back(), "inhibited");
}

TEST_F(ConditionsTest, AdamwFitIsBitwiseReproducibleWithASeed) {
  const RunConfig cfg = costate::io::load_run_config(kExample);
  costate::optimize::StochasticOptions o;
  o.method = costate::optimize::StochasticMethod::AdamW;
  o.epochs = 200;
  o.batch = 2;
  o.learning_rate = 0.05;
  o.seed = 3;
  const auto a = costate::io::calibrate_stochastic(cfg, o);
  const auto b = costate::io::calibrate_stochastic(cfg, o);
  auto o1 = o;
  o1.physical_batch = 1;  // changes no bit (optimize::fit's guarantee)
  const auto c = costate::io::calibrate_stochastic(cfg, o1);
  auto o2 = o;
  o2.seed = 4;
  const auto d = costate::io::calibrate_stochastic(cfg, o2);
  ASSERT_EQ(a.result.x.size(), 3u);
  const auto bits = [](const std::vector<double>& u, const std::vector<double>& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(double)) == 0;
  };
  EXPECT_TRUE(bits(a.result.x, b.result.x));
  EXPECT_TRUE(bits(a.result.x, c.result.x));
  EXPECT_FALSE(bits(a.result.x, d.result.x));  // another seed, another path
  ASSERT_EQ(a.result.epochs.size(), b.result.epochs.size());
  for (std::size_t e = 0; e < a.result.epochs.size(); ++e)
    EXPECT_EQ(std::memcmp(&a.result.epochs[e].train_loss, &b.result.epochs[e].train_loss, sizeof(double)), 0);
  // 5 conditions a step at a time by twos: 3 steps an epoch; the final
  // objective's full pass adds 5 simulations.
  EXPECT_EQ(a.result.steps, 600);
  EXPECT_EQ(a.result.simulations, 200 * 5 + 5);
  // Within 1 of the full-batch optimum (J is −log-likelihood up to a
  // constant: the noise σ is given), the bar bench/README.md uses.
  const costate::io::CalibrationReport full = costate::io::calibrate(cfg);
  EXPECT_LE(a.result.objective - full.objective, 1.0) << a.result.objective << " vs " << full.objective;
  EXPECT_GE(a.result.objective, full.objective - 1e-9 * full.objective);
}

TEST_F(ConditionsTest, BadConditionsAreRefusedNamingTheirPlace) {
  const std::string d = kData;
  const std::string base = head("{k: 0.4, m: 0.25, dose: 1.0}", "{x: dose, y: 0.0}");
  struct Case {
    std::string text;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {base + "conditions:\n  - {id: a, parameters: {dos: 2}, data: " + d + "dose1.csv}\n",
       {"bad.yaml:8:", "conditions[0].parameters.dos", "not a parameter", "did you mean 'dose'"}},
      {base + "conditions:\n  - {id: a, initial_state: {z: 2}, data: " + d + "dose1.csv}\n",
       {"bad.yaml:8:", "conditions[0].initial_state.z", "unknown key"}},
      {base + "conditions:\n  - {id: a, parameters: {dose: kk}, data: " + d + "dose1.csv}\n",
       {"conditions[0].parameters.dose", "a number or the name of a parameter", "'kk'"}},
      {base + "conditions:\n  - {id: a, parameters: {dose: 2}}\n",
       {"bad.yaml:8:", "conditions[0]", "condition 'a' has no data"}},
      {base + "conditions:\n  - {id: a, data: " + d + "dose1.csv}\n  - {id: a, data: " + d + "dose2.csv}\n",
       {"bad.yaml:9:", "conditions[1].id", "duplicate condition id 'a'", "first at line 8"}},
      {base + "conditions: []\n", {"conditions", "empty"}},
      {base + "objective: {data: {file: " + d + "dose1.csv}}\nconditions:\n  - {id: a, data: " + d + "dose1.csv}\n",
       {"objective.data", "each condition names its own data"}},
      {base + "conditions:\n  - {id: a, data: " + d + "dose1.csv}\n"
              "calibration: {parameters: {k: {}}, data: {file: " + d + "dose1.csv}}\n",
       {"calibration.data", "each condition names its own data"}},
      {base + "conditions:\n  - {id: a, data: " + d + "dose1.csv}\n"
              "calibration: {parameters: {k: {}}, optimizer: {method: adamw, learning_rate: 0}}\n",
       {"calibration.optimizer.learning_rate", "must be positive"}},
      {base + "conditions:\n  - {id: a, data: " + d + "dose1.csv}\n"
              "calibration: {parameters: {k: {}}, optimizer: {method: adamw, epoch: 3}}\n",
       {"calibration.optimizer.epoch", "did you mean 'epochs'"}},
      {base + "conditions:\n  - {id: a, data: " + d + "dose1.csv}\n"
              "calibration: {parameters: {k: {}}, optimizer: {method: adamw, batch_growth: 0.5}}\n",
       {"calibration.optimizer", "batch_growth = 0.5 must be >= 1"}},
      {base + "conditions:\n  - {id: a, data: " + d + "dose1.csv}\n"
              "calibration: {parameters: {k: {}}, optimizer: {method: adamw, validation_split: 0.2, "
              "average_epochs: 2}}\n",
       {"calibration.optimizer", "average_epochs = 2 averages", "use one or the other"}},
  };
  for (const Case& c : cases) {
    const std::string m = refusal(c.text);
    ASSERT_FALSE(m.empty()) << "accepted:\n" << c.text;
    for (const std::string& w : c.words) EXPECT_NE(m.find(w), std::string::npos) << "'" << w << "' not in: " << m;
  }
}

TEST_F(ConditionsTest, BadConditionTablesAreRefusedNamingFileLineAndColumn) {
  const std::string d = kData;
  const std::string base = head("{k: 0.4, m: 0.25, dose: 1.0}", "{x: dose, y: 0.0}") +
                           "conditions: {file: table.csv, noise: 0.02}\n";
  const std::string data = "," + d + "dose1.csv\n";
  struct Case {
    std::string table;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"id,dose,data\na,1" + data + "b,2,1,x.csv\n", {"table.csv:3:", "expected 3 cells", "got 4"}},
      {"id,dos,data\na,1" + data, {"table.csv:1:2:", "column 'dos'", "did you mean 'dose'"}},
      {"id,dose\na,1\n", {"table.csv:1:", "no 'data' column"}},
      {"dose,data\n1" + data, {"table.csv:1:", "no 'id' column"}},
      {"id,dose,data\na,1" + data + "a,2" + data, {"table.csv:3:1:", "duplicate condition id 'a'", "first at line 2"}},
      {"id,dose,data\na,1,\n", {"table.csv:2:3:", "column 'data'", "condition 'a' has no data file"}},
      {"id,dose,data\na,kk" + data, {"table.csv:2:2:", "column 'dose'", "'kk'"}},
      {"id,x,data\na,2*(" + data, {"table.csv:2:2:", "column 'x'", "expression"}},
      {"id,dose,data\na,1,missing.csv\n", {"table.csv:2:3:", "missing.csv", "cannot open"}},
      {"id,dose,dose,data\n", {"table.csv:1:3:", "appears twice"}},
      {"id,dose,data\n", {"table.csv", "no condition rows"}},
  };
  for (const Case& c : cases) {
    write("table.csv", c.table);
    const std::string m = refusal(base);
    ASSERT_FALSE(m.empty()) << "accepted:\n" << c.table;
    for (const std::string& w : c.words) EXPECT_NE(m.find(w), std::string::npos) << "'" << w << "' not in: " << m;
  }
}

TEST_F(ConditionsTest, ATableAndInlineRowsGiveTheSameProblem) {
  const std::string d = kData;
  write("table.csv", "id,dose,k,data\ndose1,1,," + d + "dose1.csv\ninhibited,4,k_i," + d + "inhibited.csv\n");
  const std::string h = head("{k: 0.4, m: 0.25, k_i: 0.2, dose: 1.0}", "{x: dose, y: 0.0}");
  const RunConfig table = costate::io::load_run_config(write("t.yaml", h + "conditions: {file: table.csv, noise: 0.02}\n"));
  const RunConfig rows = costate::io::load_run_config(write(
      "r.yaml", h + "conditions:\n  - {id: dose1, parameters: {dose: 1}, data: {file: " + d +
                    "dose1.csv, noise: 0.02}}\n  - {id: inhibited, parameters: {dose: 4, k: k_i}, data: {file: " + d +
                    "inhibited.csv, noise: 0.02}}\n"));
  const auto a = costate::io::conditions_gradient(table), b = costate::io::conditions_gradient(rows);
  EXPECT_EQ(a.result.objective, b.result.objective);
  EXPECT_EQ(a.gradient_p, b.gradient_p);
  EXPECT_TRUE(table.conditions[1].noise_given);
  EXPECT_EQ(table.conditions[1].parameter_source[0], 2);  // k takes k_i
}


TEST_F(ConditionsTest, HessianOfTheSummedObjectiveMatchesDifferencesOfTheGradient) {
  // Every kind of replacement (mixed()): a parameter read by another
  // condition parameter (k_i via k, k via m), one set to a number (dose),
  // initial values written as expressions of a parameter (x0, 2*x0).
  RunConfig cfg = costate::io::load_run_config(mixed());
  cfg.sensitivity.wrt = cfg.parameter_names;
  const std::vector<std::size_t> wrt = costate::io::wrt_indices(cfg);
  std::vector<costate::ode::StepPlan> steps;
  (void)costate::io::conditions_gradient(cfg, nullptr, &steps);
  ASSERT_EQ(steps.size(), 4u);
  const costate::io::FileHessian H = costate::io::conditions_hessian(cfg, wrt, steps);
  const std::size_t m = wrt.size();
  ASSERT_EQ(H.matrix.size(), m * m);
  // Column j against central differences of the summed gradient (kStep:
  // the steps are fixed, so the gradient is smooth; truncation ~1e-12 and
  // round-off ~1e-10 relative lie far below kFiniteDifference).
  for (std::size_t j = 0; j < m; ++j) {
    const double h = kStep * std::max(1.0, std::abs(cfg.parameters[wrt[j]]));
    RunConfig plus = cfg, minus = cfg;
    plus.parameters[wrt[j]] += h;
    minus.parameters[wrt[j]] -= h;
    costate::io::evaluate_initial_state(plus);
    costate::io::evaluate_initial_state(minus);
    const auto gp = costate::io::conditions_gradient(plus).gradient_p;
    const auto gm = costate::io::conditions_gradient(minus).gradient_p;
    for (std::size_t i = 0; i < m; ++i) {
      const double fd = (gp[wrt[i]] - gm[wrt[i]]) / (2 * h);
      const double hij = H.matrix[i * m + j];
      EXPECT_LE(std::abs(hij - fd), kFiniteDifference * (std::abs(hij) + 1.0))
          << "d2J/d" << cfg.parameter_names[wrt[i]] << " d" << cfg.parameter_names[wrt[j]] << ": " << hij
          << ", differences " << fd;
    }
  }
  // dose is a number in every condition: its row and column are exactly 0;
  // k_i reaches J through condition b only, x0 through c's and d's y0.
  for (std::size_t i = 0; i < m; ++i) {
    EXPECT_EQ(H.matrix[3 * m + i], 0.0);
    EXPECT_EQ(H.matrix[i * m + 3], 0.0);
  }
  EXPECT_NE(H.matrix[2 * m + 2], 0.0);
  EXPECT_NE(H.matrix[4 * m + 4], 0.0);
  EXPECT_LE(H.asymmetry, 1e-10);  // forward over adjoint of the same discrete map
}

TEST_F(ConditionsTest, CalibrationHessianVectorSumsOverConditions) {
  // H(q) u of the calibration (log-scale k, m, k_i, x0 and y(t0)) against
  // central differences of its gradient along u.
  const RunConfig cfg = costate::io::load_run_config(mixed());
  costate::io::CalibrationProblem problem(cfg);
  const auto q = problem.start();
  const std::size_t p = q.size();
  std::vector<double> u(p), g(p), Hu(p), gp(p), gm(p), g0(p);
  for (std::size_t j = 0; j < p; ++j) u[j] = (j % 2 == 0 ? 1.0 : -0.6) * (0.5 + 0.1 * static_cast<double>(j));
  const double J = problem.hessian_vector(q, u, g, Hu);
  EXPECT_EQ(J, problem.objective_and_gradient(q, g0));  // the same J: one sum in one order
  for (std::size_t j = 0; j < p; ++j) EXPECT_NEAR(g[j], g0[j], 1e-12 * (std::abs(g0[j]) + 1.0));
  auto qp = q, qm = q;
  for (std::size_t j = 0; j < p; ++j) {
    qp[j] += kStep * u[j];
    qm[j] -= kStep * u[j];
  }
  (void)problem.objective_and_gradient(qp, gp);
  (void)problem.objective_and_gradient(qm, gm);
  for (std::size_t j = 0; j < p; ++j) {
    const double fd = (gp[j] - gm[j]) / (2 * kStep);
    EXPECT_LE(std::abs(Hu[j] - fd), kFiniteDifference * (std::abs(Hu[j]) + 1.0))
        << problem.variables()[j].label() << ": H u " << Hu[j] << ", differences " << fd;
  }
}

TEST_F(ConditionsTest, GradientCheckCoversTheSummedObjective) {
  // gradcheck's Taylor test and Richardson differences (the shared
  // mechanism, ad::check_against_differences) on J = Σ_c J_c: the file's 5
  // parameters and y(t0) (x(t0) is the expression `dose`).
  const RunConfig cfg = costate::io::load_run_config(mixed());
  const costate::io::FileGradientCheck check = costate::io::file_gradient_check(cfg);
  ASSERT_EQ(check.names.size(), 6u);
  EXPECT_EQ(check.names.back(), "y(t0)");
  const costate::io::FileGradient g = costate::io::conditions_gradient(cfg);
  EXPECT_EQ(check.objective, g.result.objective);
  for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(check.gradient[j], g.gradient_p[j]) << check.names[j];
  EXPECT_EQ(check.gradient[5], g.result.wrt_initial_state[1]);
  EXPECT_TRUE(check.taylor.passed) << check.taylor.report();
  EXPECT_GE(check.taylor.min_order, 1.9);
  EXPECT_TRUE(check.fd.passed) << check.fd.report();
  for (std::size_t j = 0; j < check.x.size(); ++j)
    EXPECT_LE(std::abs(check.fd.fd[j] - check.gradient[j]), kFiniteDifference * (std::abs(check.gradient[j]) + 1.0))
        << check.names[j];
  EXPECT_TRUE(check.passed);
}

TEST_F(ConditionsTest, CalibrationResumedFromItsJournalEqualsTheUninterruptedFitBitForBit) {
  // calibrate --resume's state (io/resume.hpp): the evaluation journal,
  // written to the partial file and read back, cut after k evaluations (a
  // stop after any iteration), then replayed through a fresh TAO.
  const RunConfig cfg = costate::io::load_run_config(kExample);
  costate::io::CalibrationJournal full;
  const costate::io::CalibrationReport ref = costate::io::calibrate(cfg, {}, &full);
  ASSERT_TRUE(ref.converged);
  ASSERT_GT(full.entries.size(), 6u);
  const auto bits = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
  };
  const std::string partial = (dir_ / "partial.h5").string();
  for (const std::size_t k : {std::size_t{1}, full.entries.size() / 2, full.entries.size() - 1}) {
    costate::io::CalibrationJournal cut = full;
    cut.entries.resize(k);
    costate::io::write_calibration_partial(partial, cfg, cut, SIGTERM);
    costate::io::CalibrationJournal read = costate::io::read_calibration_partial(partial, cfg);
    ASSERT_EQ(read.entries.size(), k);
    const costate::io::CalibrationReport rep = costate::io::calibrate(cfg, {}, &read);
    EXPECT_GE(read.replayed, k) << "every recorded evaluation answered from the journal";
    EXPECT_TRUE(bits(rep.values, ref.values)) << "cut after " << k;
    EXPECT_TRUE(bits(rep.standard_errors, ref.standard_errors)) << "cut after " << k;
    EXPECT_TRUE(bits(rep.residuals, ref.residuals)) << "cut after " << k;
    EXPECT_EQ(std::memcmp(&rep.objective, &ref.objective, sizeof(double)), 0) << "cut after " << k;
    EXPECT_EQ(rep.tao.iterations, ref.tao.iterations);
    EXPECT_EQ(rep.residual_conditions, ref.residual_conditions);
  }
}


TEST_F(ConditionsTest, SavedSettingsLoadBackAndGiveTheSameFit) {
  // A calibration's saved settings (RunConfig::to_yaml, the /settings its
  // output file carries) read back as an input file: the same fit, bit for
  // bit — with conditions (their data and noise as written, x(t0) still
  // the expression `dose`), without (calibration.data with noise and
  // weights), and a stochastic fit's optimizer settings.
  const auto bits = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
  };
  const RunConfig cfg = costate::io::load_run_config(kExample);
  const costate::io::CalibrationReport ref = costate::io::calibrate(cfg);
  const RunConfig back = costate::io::load_run_config(write("saved.yaml", ref.fitted.to_yaml()));
  ASSERT_EQ(back.conditions.size(), 5u);
  EXPECT_EQ(back.initial_state_expressions[0], "dose");
  EXPECT_TRUE(back.conditions[4].noise_given);
  const costate::io::CalibrationReport again = costate::io::calibrate(back);
  EXPECT_TRUE(bits(again.values, ref.values));
  EXPECT_TRUE(bits(again.standard_errors, ref.standard_errors));
  EXPECT_EQ(std::memcmp(&again.objective, &ref.objective, sizeof(double)), 0);
  EXPECT_EQ(again.fitted.to_yaml(), ref.fitted.to_yaml());  // a fixed point

  // Without conditions: two data files, one with noise, one with weights.
  write("a.csv", "t,x,y\n1,0.61,0.25\n2,0.37,0.33\n4,0.14,0.35\n");
  write("b.csv", "t,x\n3,0.22\n6,0.05\n");
  const RunConfig single = costate::io::load_run_config(write(
      "single.yaml", head("{k: 0.4, m: 0.25}", "{x: 1.0, y: 0.0}") +
                         "calibration:\n  parameters: {k: {lower: 0.01, upper: 10, log: true}, m: {}}\n"
                         "  data:\n    - {file: a.csv, noise: {x: 0.02, y: 0.03}}\n"
                         "    - {file: b.csv, weights: {x: 2.5}}\n"));
  const costate::io::CalibrationReport r1 = costate::io::calibrate(single);
  const RunConfig single_back = costate::io::load_run_config(write("single_saved.yaml", r1.fitted.to_yaml()));
  EXPECT_EQ(single_back.calibration.weights, single.calibration.weights);
  EXPECT_EQ(single_back.calibration.noise_given, single.calibration.noise_given);
  const costate::io::CalibrationReport r2 = costate::io::calibrate(single_back);
  EXPECT_TRUE(bits(r2.values, r1.values));
  EXPECT_EQ(std::memcmp(&r2.objective, &r1.objective, sizeof(double)), 0);

  // A stochastic fit's settings (what calibrate --optimizer writes).
  RunConfig stochastic = cfg;
  stochastic.calibration.stochastic = true;
  auto& o = stochastic.calibration.stochastic_options;
  o.method = costate::optimize::StochasticMethod::AdamW;
  o.epochs = 20;
  o.batch = 2;
  o.learning_rate = 0.05;
  o.schedule = costate::optimize::LearningRateSchedule::Cosine;
  o.warmup_steps = 3;
  o.batch_growth = 1.5;
  o.validation_split = 0.2;
  o.seed = 7;
  const RunConfig stochastic_back = costate::io::load_run_config(write("stochastic_saved.yaml", stochastic.to_yaml()));
  ASSERT_TRUE(stochastic_back.calibration.stochastic);
  EXPECT_EQ(stochastic_back.calibration.stochastic_options.schedule, o.schedule);
  EXPECT_EQ(stochastic_back.calibration.stochastic_options.warmup_steps, 3);
  EXPECT_EQ(stochastic_back.calibration.stochastic_options.batch_growth, 1.5);
  {
    // Tail averaging (no validation split beside it) is read back too.
    RunConfig averaged = stochastic;
    averaged.calibration.stochastic_options.validation_split = 0.0;
    averaged.calibration.stochastic_options.average_epochs = 4;
    const RunConfig averaged_back = costate::io::load_run_config(write("averaged_saved.yaml", averaged.to_yaml()));
    EXPECT_EQ(averaged_back.calibration.stochastic_options.average_epochs, 4);
  }
  const auto f1 = costate::io::calibrate_stochastic(stochastic, o);
  const auto f2 = costate::io::calibrate_stochastic(stochastic_back, stochastic_back.calibration.stochastic_options);
  EXPECT_TRUE(bits(f1.result.x, f2.result.x));
  EXPECT_EQ(f1.result.validation, f2.result.validation);
}

}  // namespace
