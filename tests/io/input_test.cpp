// Input files for `costate run`: resolution of defaults, --set overrides, and
// one test per kind of bad input, each checking that the error names the
// file, the line (and column), the key and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "costate/core/error.hpp"
#include "costate/io/input.hpp"

namespace {

namespace fs = std::filesystem;
using costate::io::load_run_config;

class InputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("costate_input_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const fs::path p = dir_ / "input.yaml";
    std::ofstream(p) << text;
    return p.string();
  }

  /// The message of the costate::Error that loading `text` throws.
  std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
    const std::string path = write(text);
    try {
      load_run_config(path, sets);
    } catch (const costate::Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for input:\n" << text;
    return {};
  }

  fs::path dir_;
};

const char* kValid = R"(model: lotka_volterra
parameters: {alpha: 1.5, beta: 1.0}
initial_state: {x: 1.0, y: 2.0}
time: {start: 0.0, end: 10.0, output_every: 2.5}
integrator: {method: dopri5, rtol: 1.0e-8, atol: 1.0e-10}
output: {file: out.h5}
)";

TEST_F(InputTest, ResolvesDefaultsAndValues) {
  const auto cfg = load_run_config(write(kValid));
  EXPECT_EQ(cfg.model, "lotka_volterra");
  ASSERT_EQ(cfg.parameters.size(), 4u);
  EXPECT_EQ(cfg.parameters[0], 1.5);
  EXPECT_EQ(cfg.parameters[2], 3.0);  // gamma: the model's default
  EXPECT_EQ(cfg.initial_state[1], 2.0);
  EXPECT_EQ(cfg.output_times, (std::vector<double>{0.0, 2.5, 5.0, 7.5, 10.0}));
  EXPECT_EQ(cfg.integrator.rtol, 1e-8);
  EXPECT_EQ(cfg.output_file, "out.h5");
  // The resolved YAML names every setting actually used.
  const std::string y = cfg.to_yaml();
  for (const char* key : {"model", "gamma", "rtol", "atol", "max_steps", "outputs", "file"})
    EXPECT_NE(y.find(key), std::string::npos) << key;
}

TEST_F(InputTest, OutputEverySnapsTheLastTimeToEnd) {
  auto cfg = load_run_config(write("model: van_der_pol\ntime: {end: 1.0, output_every: 0.1}\n"));
  ASSERT_EQ(cfg.output_times.size(), 11u);
  EXPECT_EQ(cfg.output_times.back(), 1.0);
  cfg = load_run_config(write("model: van_der_pol\ntime: {end: 1.0, output_every: 0.3}\n"));
  EXPECT_EQ(cfg.output_times, (std::vector<double>{0.0, 0.3, 0.6, 0.8999999999999999, 1.0}));
}

TEST_F(InputTest, SetOverridesKeys) {
  const auto cfg = load_run_config(
      write(kValid), {"integrator.rtol=1e-10", "parameters.delta=2.5", "integrator.method=rk4",
                      "integrator.dt=0.01", "initial_state=[3, 4]"});
  EXPECT_EQ(cfg.integrator.rtol, 1e-10);
  EXPECT_EQ(cfg.parameters[3], 2.5);
  EXPECT_EQ(cfg.integrator.method, costate::ode::Method::RK4);
  EXPECT_EQ(cfg.initial_state, (std::vector<double>{3.0, 4.0}));
}

TEST_F(InputTest, SetCreatesMissingSections) {
  const auto cfg = load_run_config(write("model: lorenz\ntime: {end: 1}\n"),
                                   {"integrator.rtol=1e-9", "output.file=x.h5"});
  EXPECT_EQ(cfg.integrator.rtol, 1e-9);
  EXPECT_EQ(cfg.output_file, "x.h5");
}

TEST_F(InputTest, MissingFile) {
  try {
    load_run_config((dir_ / "nope.yaml").string());
    FAIL();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.yaml: input file not found"), std::string::npos);
  }
}

TEST_F(InputTest, MalformedYamlGivesLineAndColumn) {
  const std::string msg = error_of("model: lorenz\ntime: {end: 1\nintegrator: {rtol: 1}\n");
  EXPECT_NE(msg.find("input.yaml:3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
}

TEST_F(InputTest, UnknownKeySuggestsNearest) {
  std::string msg = error_of("model: lorenz\ntime: {end: 1}\nintegrater: {rtol: 1e-6}\n");
  EXPECT_NE(msg.find("input.yaml:3:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'integrater'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'integrator'"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator:\n  rtoll: 1e-6\n");
  EXPECT_NE(msg.find("input.yaml:4:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integrator.rtoll"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'rtol'"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nparameters: {sgima: 3}\n");
  EXPECT_NE(msg.find("did you mean 'sigma'"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\n", {"integrator.rtl=1e-3"});
  EXPECT_NE(msg.find("--set integrator.rtl=1e-3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'rtol'"), std::string::npos) << msg;
}

TEST_F(InputTest, WrongTypeNamesKeyLineAndExpectedType) {
  std::string msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator:\n  rtol: fast\n");
  EXPECT_NE(msg.find("input.yaml:4:9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integrator.rtol"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected a number, got 'fast'"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: [1, 2]}\n");
  EXPECT_NE(msg.find("time.end: expected a number, got a list"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {adaptive: maybe}\n");
  EXPECT_NE(msg.find("expected true or false"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {max_steps: 1.5}\n");
  EXPECT_NE(msg.find("expected an integer"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: 5\n");
  EXPECT_NE(msg.find("time: expected a map"), std::string::npos) << msg;
}

TEST_F(InputTest, CheckpointStepsAreAutoOrAPositiveInteger) {
  const std::string base =
      "model: lotka_volterra\ntime: {end: 1}\nintegrator: {method: cvodes_bdf}\n"
      "sensitivity: {method: cvodes_adjoint";
  auto cfg = load_run_config(write(base + "}\n"));
  EXPECT_EQ(cfg.sensitivity.checkpoint_steps, 0);  // auto by default
  EXPECT_NE(cfg.to_yaml().find("checkpoint_steps: auto"), std::string::npos) << cfg.to_yaml();
  cfg = load_run_config(write(base + ", checkpoint_steps: auto}\n"));
  EXPECT_EQ(cfg.sensitivity.checkpoint_steps, 0);
  cfg = load_run_config(write(base + ", checkpoint_steps: 250}\n"));
  EXPECT_EQ(cfg.sensitivity.checkpoint_steps, 250);
  EXPECT_NE(cfg.to_yaml().find("checkpoint_steps: 250"), std::string::npos) << cfg.to_yaml();
  for (const char* bad : {"0", "-3", "many", "[1]", "2.5"}) {
    const std::string msg = error_of(base + ", checkpoint_steps: " + bad + "}\n");
    EXPECT_NE(msg.find("sensitivity.checkpoint_steps"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected auto or an integer >= 1"), std::string::npos) << msg;
  }
}

TEST_F(InputTest, UnknownModelListsValidOnes) {
  const std::string msg = error_of("model: lotka_voltera\ntime: {end: 1}\n");
  EXPECT_NE(msg.find("input.yaml:1:8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown model 'lotka_voltera'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'lotka_volterra'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("van_der_pol, fitzhugh_nagumo, lorenz, robertson"), std::string::npos) << msg;
}

TEST_F(InputTest, UnknownMethodListsValidOnes) {
  const std::string msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {method: rk45}\n");
  EXPECT_NE(msg.find("unknown method 'rk45'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("euler, rk4, dopri5"), std::string::npos) << msg;
}

TEST_F(InputTest, NonPositiveTolerances) {
  std::string msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {rtol: 0}\n");
  EXPECT_NE(msg.find("integrator.rtol: must be positive, got 0"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {atol: -1e-6}\n");
  EXPECT_NE(msg.find("integrator.atol: must be positive, got -1e-06"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {atol: [1e-6, 0, 1e-6]}\n");
  EXPECT_NE(msg.find("integrator.atol[1]: must be positive"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {atol: [1e-6, 1e-6]}\n");
  EXPECT_NE(msg.find("has 2 values but the model has 3 states"), std::string::npos) << msg;
}

TEST_F(InputTest, EndNotAfterStart) {
  std::string msg = error_of("model: lorenz\ntime: {start: 2, end: 1}\n");
  EXPECT_NE(msg.find("time.end: must be greater than time.start: start = 2, end = 1"),
            std::string::npos)
      << msg;
  msg = error_of("model: lorenz\ntime: {start: 1, end: 1}\n");
  EXPECT_NE(msg.find("must be greater than time.start"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {start: 0}\n");
  EXPECT_NE(msg.find("missing required key 'end'"), std::string::npos) << msg;
}

TEST_F(InputTest, WrongNumberOfInitialValues) {
  std::string msg = error_of("model: lorenz\ninitial_state: [1, 2]\ntime: {end: 1}\n");
  EXPECT_NE(msg.find("input.yaml:2:16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 2 values but model 'lorenz' has 3 states (x, y, z)"), std::string::npos)
      << msg;
  msg = error_of("model: lorenz\ninitial_state: {x: 1, w: 2}\ntime: {end: 1}\n");
  EXPECT_NE(msg.find("unknown key 'initial_state.w'"), std::string::npos) << msg;
}

TEST_F(InputTest, FixedStepMethodNeedsDt) {
  const std::string msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {method: rk4}\n");
  EXPECT_NE(msg.find("set integrator.dt"), std::string::npos) << msg;
}

TEST_F(InputTest, OutputTimesValidated) {
  std::string msg = error_of("model: lorenz\ntime: {end: 1, outputs: [0.5, 2]}\n");
  EXPECT_NE(msg.find("time.outputs[1]: output time 2 lies outside [0, 1]"), std::string::npos)
      << msg;
  msg = error_of("model: lorenz\ntime: {end: 1, outputs: [0.5, 0.2]}\n");
  EXPECT_NE(msg.find("strictly ascending"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1, outputs: [0.5], output_every: 0.1}\n");
  EXPECT_NE(msg.find("not both"), std::string::npos) << msg;
}

TEST_F(InputTest, EmptyAndNonMapFiles) {
  EXPECT_NE(error_of("").find("the file is empty"), std::string::npos);
  EXPECT_NE(error_of("- 1\n- 2\n").find("expected a map of settings"), std::string::npos);
  EXPECT_NE(error_of("time: {end: 1}\n").find("missing required key 'model'"), std::string::npos);
}

TEST_F(InputTest, MalformedSet) {
  EXPECT_NE(error_of(kValid, {"integrator.rtol"}).find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of(kValid, {"model.name=x"}).find("'model' is not a map"), std::string::npos);
  EXPECT_NE(error_of(kValid, {"a..b=1"}).find("empty component"), std::string::npos);
}

TEST(Suggestions, EditDistance) {
  EXPECT_EQ(costate::io::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(costate::io::edit_distance("", "abc"), 3u);
  EXPECT_EQ(costate::io::nearest("rtl", {"rtol", "atol", "dt"}), "rtol");
  EXPECT_EQ(costate::io::nearest("completely_different", {"rtol", "atol"}), "");
}

}  // namespace

TEST_F(InputTest, SetNullRemovesAKey) {
  // kValid asks for output_every; removing it and giving outputs instead
  // must switch the output grid (both at once is an error).
  const auto cfg = load_run_config(write(kValid), {"time.output_every=null", "time.outputs=[1, 4]"});
  ASSERT_EQ(cfg.output_times.size(), 2u);
  EXPECT_EQ(cfg.output_times[0], 1.0);
  EXPECT_EQ(cfg.output_times[1], 4.0);
  // Removing a key that is not there is harmless; removing a required one
  // gives the usual error.
  EXPECT_NO_THROW(load_run_config(write(kValid), {"integrator.dt=~"}));
  const std::string msg = error_of(kValid, {"time.end=null"});
  EXPECT_NE(msg.find("missing required key 'end'"), std::string::npos) << msg;
}

TEST_F(InputTest, BdfWithoutAdaptiveNamesTheKeyNotDt) {
  const std::string msg =
      error_of("model: robertson\ntime: {end: 1}\nintegrator: {method: bdf, adaptive: false}\n");
  EXPECT_NE(msg.find("input.yaml:3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not available for 'bdf'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("set integrator.dt"), std::string::npos) << msg;
}

namespace {
// integrator.cvodes_linear_solver: every value parses; a bad one names the
// key, the line, suggests the nearest value and lists the valid ones.
TEST_F(InputTest, CvodesLinearSolverKey) {
  for (const char* v : {"dense", "band", "sparse", "automatic"}) {
    const auto cfg = load_run_config(
        write(std::string("model: lorenz\ntime: {end: 1}\nintegrator: {method: cvodes_bdf, "
                          "cvodes_linear_solver: ") +
              v + "}\n"),
        {});
    EXPECT_EQ(costate::ode::to_string(cfg.integrator.cvodes_linear_solver), v);
  }
  EXPECT_EQ(load_run_config(write("model: lorenz\ntime: {end: 1}\n"), {})
                .integrator.cvodes_linear_solver,
            costate::ode::CvodesLinearSolver::Automatic);
  std::string msg = error_of(
      "model: lorenz\ntime: {end: 1}\nintegrator:\n  method: cvodes_bdf\n  cvodes_linear_solver: "
      "klu\n");
  EXPECT_NE(msg.find("input.yaml:5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integrator.cvodes_linear_solver"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown linear solver 'klu'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dense, band, sparse, automatic"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nintegrator: {cvodes_linear_solver: bandd}\n");
  EXPECT_NE(msg.find("did you mean 'band'"), std::string::npos) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\n", {"integrator.cvodes_linear_solver=lu"});
  EXPECT_NE(msg.find("integrator.cvodes_linear_solver"), std::string::npos) << msg;
  EXPECT_THROW((void)costate::ode::cvodes_linear_solver_from_string("klu"), costate::Error);
}
TEST_F(InputTest, DuplicateKeysAtAnyDepthNameBothLines) {
  struct Case {
    std::string text, key, lines;
  };
  const std::vector<Case> cases = {
      {std::string(kValid) + "parameters: {alpha: 2.0}\n", "'parameters'", "lines 2 and 7"},
      {"model: lotka_volterra\ntime:\n  start: 0.0\n  end: 10.0\n  end: 20.0\n", "'time.end'",
       "lines 4 and 5"},
      {"model:\n  states: [x]\n  parameters: [k]\n  equations:\n    x: -k*x\n    x: k*x\n"
       "parameters: {k: 1.0}\ninitial_state: {x: 1.0}\ntime: {end: 1.0}\n",
       "'model.equations.x'", "lines 5 and 6"},
      {"model: lotka_volterra\ninitial_state: {x: 1.0, y: 2.0, x: 3.0}\ntime: {end: 1.0}\n",
       "'initial_state.x'", "lines 2 and 2"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.text);
    EXPECT_NE(msg.find("input.yaml:"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.key + " appears twice"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.lines), std::string::npos) << msg;
  }
}

TEST_F(InputTest, SecondYamlDocumentIsRefused) {
  const std::string msg = error_of(std::string(kValid) + "---\nparameters: {alpha: 9.0}\n");
  // The second document starts at its '---' (line 7).
  EXPECT_NE(msg.find("input.yaml:7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("second YAML document (line 7)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the first (line 1)"), std::string::npos) << msg;
  // Found by fuzzing: text on which yaml-cpp's LoadAll allocates without end (a
  // map key glued to a flow mapping after a comment block); refused at once.
  const std::string hang =
      "# comment\n#   y' = x\n,#   z' = x y\nparameters: {sigma: 10.0}\n"
      "time: {checkpointing:start: 0.0, end: 5.0}\n"
      "integrator:pde:thod: dopri5, rtol: 1.0e-10}\noutput: {file: lorenz.h5}\n";
  const std::string hang_msg = error_of(hang);
  EXPECT_NE(hang_msg.find("input.yaml:"), std::string::npos) << hang_msg;
}

TEST_F(InputTest, DeepYamlNestingIsRefusedByName) {
  const std::string flow = "model: lotka_volterra\ndescription: " + std::string(100000, '[') + "1" +
                           std::string(100000, ']') + "\n";
  std::string block = "model: lotka_volterra\ndescription:\n  ";
  for (int i = 0; i < 10000; ++i) block += "- ";
  block += "1\n";
  for (const auto& [text, where] : std::vector<std::pair<const std::string*, std::string>>{
           {&flow, "input.yaml:2:"}, {&block, "input.yaml:3:"}}) {
    const std::string msg = error_of(*text);
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find("nests deeper than"), std::string::npos) << msg;
  }
}

const char* kEquations =
    "model:\n"
    "  states: [x, y]\n"
    "  equations: {x: \"-a*x\", y: \"a*x - b*y\"}\n"
    "parameters: {a: 1.0, b: 0.5}\n"
    "initial_state: {x: 1.0, y: 0.0}\n"
    "time: {end: 2.0}\n";

TEST_F(InputTest, CsvColumnsNamedTwiceOrNoStateAreRefused) {
  std::ofstream(dir_ / "dup.csv") << "t,x,y,x\n0.5,1,2,3\n1.0,1,2,3\n";
  std::ofstream(dir_ / "only_t.csv") << "t\n0.5\n1.0\n";
  std::ofstream(dir_ / "empty_col.csv") << "t,x,y\n0.5,1,\n1.0,2,NA\n";
  const std::string base = std::string(kEquations) + "objective:\n  data: {file: ";
  std::string msg = error_of(base + "dup.csv}\n");
  EXPECT_NE(msg.find("dup.csv:1: column 'x' appears twice in the header (columns 2 and 4)"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("input.yaml:8:"), std::string::npos) << msg;  // and the key that names it
  msg = error_of(base + "only_t.csv}\n");
  EXPECT_NE(msg.find("only_t.csv:1: the header names no state"), std::string::npos) << msg;
  msg = error_of(base + "empty_col.csv}\n");
  EXPECT_NE(msg.find("empty_col.csv:1: column 'y' has no value in any row"), std::string::npos)
      << msg;
}

TEST_F(InputTest, CsvWithoutAStatesColumnWarns) {
  std::ofstream(dir_ / "x_only.csv") << "t,x\n0.5,0.6\n1.0,0.37\n";
  const auto cfg = load_run_config(
      write(std::string(kEquations) + "objective:\n  data: {file: x_only.csv}\n"));
  ASSERT_EQ(cfg.warnings.size(), 1u);
  EXPECT_NE(cfg.warnings[0].find("x_only.csv:1: no column for state y"), std::string::npos)
      << cfg.warnings[0];
}

TEST_F(InputTest, ParameterThatNothingUsesWarnsWithItsLine) {
  const auto cfg = load_run_config(write(
      "model:\n  states: [x]\n  equations: {x: \"-k*x\"}\n"
      "parameters: {k: 1.0, kk: 2.0}\ninitial_state: {x: 1.0}\ntime: {end: 1.0}\n"));
  ASSERT_EQ(cfg.warnings.size(), 1u);
  EXPECT_NE(cfg.warnings[0].find("input.yaml:4:"), std::string::npos) << cfg.warnings[0];
  EXPECT_NE(cfg.warnings[0].find("parameter 'kk' is used by no equation"), std::string::npos)
      << cfg.warnings[0];
  // A parameter used only by an initial value or by the objective is used.
  const auto used = load_run_config(write(
      "model:\n  states: [x]\n  equations: {x: \"-k*x\"}\n"
      "parameters: {k: 1.0, x0: 2.0, w: 3.0}\ninitial_state: {x: \"x0\"}\ntime: {end: 1.0}\n"
      "objective: {terminal: \"w*x^2\"}\n"));
  EXPECT_TRUE(used.warnings.empty()) << used.warnings.front();
}

TEST_F(InputTest, NonFiniteValuesAtTheInitialPointNameTheExpressionAndLine) {
  std::string msg = error_of(
      "model:\n  states: [x, y]\n  equations:\n    x: \"-x\"\n    y: \"log(x) * y\"\n"
      "parameters: {}\ninitial_state: {x: 0.0, y: 1.0}\ntime: {end: 1.0}\n");
  EXPECT_NE(msg.find("input.yaml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.equations.y: 'log(x) * y' evaluates to -inf at the initial point"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("x = 0, y = 1"), std::string::npos) << msg;
  msg = error_of(
      "model:\n  states: [x]\n  equations: {x: \"-k*x\"}\n"
      "parameters: {k: 1.0}\ninitial_state: {x: \"log(-k)\"}\ntime: {end: 1.0}\n");
  EXPECT_NE(msg.find("input.yaml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("initial_state.x: the initial value of 'x' is"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(not a finite number)"), std::string::npos) << msg;
}

}  // namespace
