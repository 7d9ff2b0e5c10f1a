// What costate refuses or flags on inputs a user can reach (issue 35): deep
// expressions in a real input file, messages without internals (--debug
// shows them), and malformed data.
#include <hdf5.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Result = costate::test::CommandResult;
using Json = nlohmann::json;

class RefusalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_refusals_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Result run(const std::string& args) {
    return costate::test::run_command(dir_, COSTATE_EXE, args, "timeout -s KILL 120");
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  fs::path dir_;
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(RefusalsTest, DeeplyNestedEquationIsAnErrorWithFileLineAndLimit) {
  write("deep.yaml", "model:\n  states: [x]\n  equations:\n    x: \"" +
                         std::string(30000, '(') + "-k*x" + std::string(30000, ')') +
                         "\"\nparameters: {k: 1.0}\ninitial_state: {x: 1.0}\ntime: {end: 1.0}\n");
  const Result r = run("run deep.yaml -q");
  EXPECT_EQ(r.code, 1) << r.err.substr(0, 500);
  EXPECT_TRUE(has(r.err, "deep.yaml:4:")) << r.err.substr(0, 500);
  EXPECT_TRUE(has(r.err, "model.equations.x")) << r.err.substr(0, 500);
  EXPECT_TRUE(has(r.err, "nesting deeper than 1000 levels")) << r.err.substr(0, 500);
  EXPECT_LT(r.err.size(), 2000u);  // the 60 000 parentheses are not echoed
}

TEST_F(RefusalsTest, MessagesCarryNoCheckReportsUnlessDebug) {
  // A parameter named like a state trips a check inside the equation model.
  write("twice.yaml",
        "model:\n  states: [x]\n  equations: {x: \"-x\"}\n"
        "parameters: {x: 1.0}\ninitial_state: [1.0]\ntime: {end: 1.0}\n");
  const Result r = run("run twice.yaml -q --json");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "twice.yaml:3:14: model.equations")) << r.err;
  EXPECT_TRUE(has(r.err, "the name 'x' is used twice")) << r.err;
  EXPECT_FALSE(has(r.err, "check failed")) << r.err;
  EXPECT_FALSE(has(r.err, ".cpp:")) << r.err;
  EXPECT_FALSE(has(r.out, "check failed")) << r.out;
  const Result d = run("run twice.yaml -q --debug");
  EXPECT_EQ(d.code, 1);
  EXPECT_TRUE(has(d.err, "[check failed: ")) << d.err;
  EXPECT_TRUE(has(d.err, ".cpp:")) << d.err;
}

TEST_F(RefusalsTest, PetscErrorsAreCostateErrorsWithoutPetscsStackOrSourcePaths) {
  // An unknown TAO type: PETSc printed its raw error stack (configure line,
  // its source paths) and costate's message ended in "at
  // ../solvers/petsc/tao_minimize.cpp:233".
  const std::string in = "calibrate '" COSTATE_EXAMPLES_DIR "/lotka_volterra_calibration.yaml' -q -tao_type nonsense";
  const Result r = run(in);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "costate: error: PETSc's TaoSetFromOptions failed: Unable to find requested Tao type nonsense"))
      << r.err;
  EXPECT_FALSE(has(r.err, "PETSC ERROR")) << r.err;
  EXPECT_FALSE(has(r.err, ".cpp:")) << r.err;
  EXPECT_FALSE(has(r.err, "check failed")) << r.err;
  // --debug keeps the call and where it was made.
  const Result d = run(in + " --debug");
  EXPECT_EQ(d.code, 1);
  EXPECT_TRUE(has(d.err, "[check failed: TaoSetFromOptions(")) << d.err;
  EXPECT_TRUE(has(d.err, "tao_minimize.cpp:")) << d.err;
}

TEST_F(RefusalsTest, NoRefusalCarriesInternals) {
  // One bad input per reader and stage (YAML, expressions, events, CSV,
  // calibration bounds, PDE grid/fields/equations, SBML, output path, a
  // PETSc option): every message is costate's, with no assert text,
  // source path or third-party error stack — the PETSc case printed
  // PETSc's stack and "at ../solvers/petsc/tao_minimize.cpp:233".
  write("twice.yaml", "model:\n  states: [x]\n  equations: {x: \"-x\"}\nparameters: {x: 1.0}\n"
                      "initial_state: [1.0]\ntime: {end: 1.0}\n");
  write("badexpr.yaml", "model:\n  states: [x]\n  equations: {x: \"-x +* 2\"}\ninitial_state: [1.0]\ntime: {end: 1.0}\n");
  write("event.yaml", "model:\n  states: [x]\n  equations: {x: \"-x\"}\ninitial_state: [1.0]\ntime: {end: 1.0}\n"
                      "events: [{trigger: \"x <\", assign: {x: 1}}]\n");
  write("data.csv", "t,x,x\n1,2,3\n");
  write("csv.yaml", "model:\n  states: [x]\n  equations: {x: \"-k*x\"}\nparameters: {k: 1}\ninitial_state: [1.0]\n"
                    "time: {end: 2.0}\nobjective: {data: {file: data.csv}}\n");
  write("bounds.yaml", "model:\n  states: [x]\n  equations: {x: \"-k*x\"}\nparameters: {k: 1}\ninitial_state: [1.0]\n"
                       "time: {end: 1.0}\ncalibration:\n  parameters: {k: {lower: 2, upper: 1}}\n  data: {file: data.csv}\n");
  write("grid.yaml", "pde:\n  grid: {n: [2, 2]}\n  fields: [u]\n  initial: {u: \"1\"}\n  equations: {u: \"lap(u)\"}\n"
                     "integrator: {method: crank_nicolson, dt: 0.01, steps: 2}\n");
  write("field.yaml", "pde:\n  grid: {n: [8, 8]}\n  fields: [u]\n  initial: {u: \"1\"}\n  equations: {u: \"lap(v)\"}\n"
                      "integrator: {method: crank_nicolson, dt: 0.01, steps: 2}\n");
  write("m.xml", "not xml at all");
  write("sbml.yaml", "model: {sbml: m.xml}\ntime: {end: 1}\n");
  const std::string lv = "'" COSTATE_EXAMPLES_DIR "/lotka_volterra.yaml'";
  const std::string lv_cal = "'" COSTATE_EXAMPLES_DIR "/lotka_volterra_calibration.yaml'";
  const char* const kCases[][2] = {
      {"run twice.yaml", "the name 'x' is used twice"},
      {"run badexpr.yaml", "badexpr.yaml:3:"},
      {"run event.yaml", "events[0].trigger"},
      {"sensitivity csv.yaml", "data.csv"},
      {"calibrate bounds.yaml", "lower = 2 must be below upper = 1"},
      {"run grid.yaml", "pde.grid"},
      {"run field.yaml", "pde.equations"},
      {"run sbml.yaml", "m.xml"},
      {"run twice.yaml -o twice.yaml", "twice.yaml"},
      {"run LV -o /dev/null", "/dev/null"},
      {"calibrate LVCAL -tao_type nonsense", "Unable to find requested Tao type nonsense"},
  };
  for (const auto& c : kCases) {
    std::string args = c[0];
    if (const auto at = args.find("LVCAL"); at != std::string::npos) args.replace(at, 5, lv_cal);
    if (const auto at = args.find("LV "); at != std::string::npos) args.replace(at, 2, lv);
    const Result r = run(args + " -q");
    SCOPED_TRACE(args);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_TRUE(has(r.err, "costate: error: ")) << r.err;
    EXPECT_TRUE(has(r.err, c[1])) << r.err;
    for (const char* internal : {".cpp:", ".hpp:", "check failed", "Assertion", "PETSC ERROR", "terminate called"})
      EXPECT_FALSE(has(r.err + r.out, internal)) << internal << " in: " << r.err;
  }
}

// ------------------------------------------------ "ok" means finite

TEST_F(RefusalsTest, NonFiniteGradientIsAnErrorAndNoFileIsWritten) {
  // Lorenz to t = 1000 with rk4: J is finite, the adjoint overflows.
  write("lorenz.yaml",
        "model: lorenz\nparameters: {sigma: 10.0, rho: 28.0, beta: 2.6666666666666667}\n"
        "initial_state: [1.0, 1.0, 1.0]\ntime: {start: 0.0, end: 1000.0}\n"
        "integrator: {method: rk4, dt: 0.01}\nobjective: {terminal: \"x^2\"}\n");
  const Result r = run("sensitivity lorenz.yaml -q --json -o lorenz.h5");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "dJ/dsigma is NaN while J = ")) << r.err;
  EXPECT_TRUE(has(r.err, "the adjoint overflowed")) << r.err;
  EXPECT_TRUE(has(r.err, "shorter time span")) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "error");
  EXPECT_FALSE(fs::exists(dir_ / "lorenz.h5"));  // nothing marked complete
}

TEST_F(RefusalsTest, NonFiniteObjectiveIsAnError) {
  write("log.yaml",
        "model:\n  states: [y]\n  equations: {y: \"-k*y\"}\nparameters: {k: 1.0}\n"
        "initial_state: {y: 1.0}\ntime: {end: 2.0}\nobjective: {terminal: \"log(y - 1)\"}\n");
  const Result r = run("sensitivity log.yaml -q");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "the objective J is NaN")) << r.err;
}

TEST_F(RefusalsTest, WarningsAreListedInJsonAndShownInText) {
  write("unused.yaml",
        "model:\n  states: [y]\n  equations: {y: \"-k*y\"}\nparameters: {k: 1.0, kk: 2.0}\n"
        "initial_state: {y: 1.0}\ntime: {end: 1.0}\nobjective: {terminal: \"y\"}\n");
  for (const char* command : {"run", "sensitivity"}) {
    const Result j = run(std::string(command) + " unused.yaml -q --json");
    ASSERT_EQ(j.code, 0) << j.err;
    const Json out = Json::parse(j.out);
    ASSERT_EQ(out["warnings"].size(), 1u) << j.out;
    EXPECT_TRUE(has(out["warnings"][0].get<std::string>(), "parameter 'kk' is used by no equation"))
        << j.out;
    const Result t = run(std::string(command) + " unused.yaml -q");
    ASSERT_EQ(t.code, 0) << t.err;
    EXPECT_TRUE(has(t.out, "warning: ")) << t.out;
    EXPECT_TRUE(has(t.out, "parameter 'kk' is used by no equation")) << t.out;
  }
  // calibrate lists them too (none for the example): an empty list.
  const Result cal = run("calibrate '" COSTATE_EXAMPLES_DIR "/van_der_pol_calibration.yaml' -q --json");
  ASSERT_EQ(cal.code, 0) << cal.err;
  const Json cal_json = Json::parse(cal.out);
  ASSERT_TRUE(cal_json.contains("warnings")) << cal.out;
  EXPECT_TRUE(cal_json["warnings"].is_array() && cal_json["warnings"].empty()) << cal.out;
  // No warnings: an empty list, not a missing key.
  write("clean.yaml",
        "model:\n  states: [y]\n  equations: {y: \"-k*y\"}\nparameters: {k: 1.0}\n"
        "initial_state: {y: 1.0}\ntime: {end: 1.0}\n");
  const Result c = run("run clean.yaml -q --json");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(Json::parse(c.out)["warnings"].empty()) << c.out;
}

}  // namespace
