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

}  // namespace
