// The front door (issue 36): what a user meets first. The front `costate`
// starts without loading PETSc (it hands calibrate and PDE inputs to
// costate-petsc), progress lines on a terminal only, self-describing outputs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Result = costate::test::CommandResult;
using Json = nlohmann::json;

class FrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_front_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Result run(const std::string& args, const std::string& prefix = "") {
    return costate::test::run_command(dir_, COSTATE_EXE, args, prefix + " timeout -s KILL 300");
  }
  static std::string example(const std::string& name) { return std::string(COSTATE_EXAMPLES_DIR) + "/" + name; }

  fs::path dir_;
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ------------------------------------------------ start-up

// The dynamic loader's own log (LD_DEBUG=libs) names every library it
// loads: PETSc and its ~80 dependencies cost ~23 ms at every start, so the
// commands that do not use it must not load it.
TEST_F(FrontTest, RunAndInfoDoNotLoadPetsc) {
  for (const std::string& args : std::vector<std::string>{"info", "run " + example("lotka_volterra.yaml") + " -q -o out.h5",
                                 "sensitivity " + example("lotka_volterra_equations.yaml") + " -q"}) {
    const Result r = run(args, "LD_DEBUG=libs");
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err.substr(0, 2000);
    EXPECT_TRUE(has(r.err, "libcostate.so")) << "LD_DEBUG gave no loader log for " << args;
    EXPECT_FALSE(has(r.err, "libpetsc")) << args << " loaded PETSc";
  }
}

// calibrate (TAO) is handed to costate-petsc, which loads PETSc, with the
// same arguments and the same result.
TEST_F(FrontTest, CalibrateIsHandedToCostatePetsc) {
  const Result r = run("calibrate " + example("van_der_pol_calibration.yaml") + " -q --json -o fit.h5",
                       "LD_DEBUG=libs");
  ASSERT_EQ(r.code, 0) << r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0);
  EXPECT_TRUE(has(r.err, "libcostate_petsc")) << "not handed over";
  EXPECT_TRUE(has(r.err, "libpetsc"));
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_TRUE(fs::exists(dir_ / "fit.h5"));
}

}  // namespace
