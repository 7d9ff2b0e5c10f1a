// The front door (issue 36): what a user meets first. The front `costate`
// starts without loading PETSc (it hands calibrate and PDE inputs to
// costate-petsc), progress lines on a terminal only, self-describing outputs.
#include <hdf5.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

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

/// A string attribute of a file's root ("" when absent), fixed or variable length.
std::string root_attribute(const fs::path& path, const char* name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return "";
  std::string out;
  if (H5Aexists(file, name) > 0) {
    const hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    const hid_t t = H5Aget_type(a);
    const hid_t mem = H5Tget_native_type(t, H5T_DIR_ASCEND);
    if (H5Tis_variable_str(t) > 0) {
      char* text = nullptr;
      if (H5Aread(a, mem, &text) >= 0 && text) out = text;
      H5free_memory(text);
    } else {
      out.assign(H5Tget_size(t), '\0');
      H5Aread(a, mem, out.data());
      out.resize(out.find('\0') == std::string::npos ? out.size() : out.find('\0'));
    }
    H5Tclose(mem);
    H5Tclose(t);
    H5Aclose(a);
  }
  H5Fclose(file);
  return out;
}

/// The string-array attribute `names` of dataset `dataset` ({} when absent).
std::vector<std::string> dataset_names(const fs::path& path, const char* dataset) {
  std::vector<std::string> out;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return out;
  const hid_t d = H5Dopen2(file, dataset, H5P_DEFAULT);
  if (d >= 0 && H5Aexists(d, "names") > 0) {
    const hid_t a = H5Aopen(d, "names", H5P_DEFAULT);
    const hid_t space = H5Aget_space(a);
    std::vector<char*> text(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)), nullptr);
    const hid_t type = H5Aget_type(a);  // variable-length strings (UTF-8), read as stored
    if (!text.empty() && H5Tis_variable_str(type) > 0 && H5Aread(a, type, text.data()) >= 0)
      for (char* t : text) {
        out.emplace_back(t ? t : "");
        H5free_memory(t);
      }
    H5Tclose(type);
    H5Sclose(space);
    H5Aclose(a);
  }
  if (d >= 0) H5Dclose(d);
  H5Fclose(file);
  return out;
}

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

// ------------------------------------------------ progress

// script(1) runs the command on a pseudo-terminal (its stderr a terminal)
// and copies what the terminal showed to its stdout. COSTATE_PROGRESS_DELAY=0
// draws from the first update (the default waits half a second), so no
// assertion depends on timing.
Result on_terminal(const fs::path& dir, const std::string& args) {
  return costate::test::run_command(dir, "script",
                                    "-qec \"COSTATE_PROGRESS_DELAY=0 '" + std::string(COSTATE_EXE) + "' " + args +
                                        "\" /dev/null",
                                    "timeout -s KILL 300");
}

TEST_F(FrontTest, ProgressOnATerminalOnlyAndNotWithQuiet) {
  const std::string sens = "sensitivity " + example("lotka_volterra_equations.yaml");
  const Result tty = on_terminal(dir_, sens);
  ASSERT_EQ(tty.code, 0) << tty.out;
  EXPECT_TRUE(has(tty.out, "adjoint sweep: step")) << tty.out.substr(0, 3000);
  EXPECT_TRUE(has(tty.out, "adjoint sweep, reverse: step")) << "the reverse sweep's steps";
  EXPECT_TRUE(has(tty.out, "steps recomputed")) << "checkpoint recomputation";
  EXPECT_TRUE(has(tty.out, " left")) << "an estimate of the time remaining";
  // Not on a terminal (stderr a file), and not with -q on one.
  const Result file = run(sens);
  ASSERT_EQ(file.code, 0) << file.err;
  EXPECT_FALSE(has(file.err, "adjoint sweep")) << file.err;
  const Result quiet = on_terminal(dir_, sens + " -q");
  ASSERT_EQ(quiet.code, 0) << quiet.out;
  EXPECT_FALSE(has(quiet.out, "adjoint sweep")) << quiet.out.substr(0, 3000);
}

TEST_F(FrontTest, ProgressOfTangentsCalibrationAndPetabConditions) {
  const Result fwd = on_terminal(dir_, "sensitivity " + example("lotka_volterra_equations.yaml") +
                                           " --set sensitivity.method=forward");
  ASSERT_EQ(fwd.code, 0) << fwd.out;
  EXPECT_TRUE(has(fwd.out, "tangent sweep: step")) << fwd.out.substr(0, 3000);
  const Result fit = on_terminal(dir_, "calibrate " + example("van_der_pol_calibration.yaml") + " -o fit.h5");
  ASSERT_EQ(fit.code, 0) << fit.out.substr(0, 3000);
  EXPECT_TRUE(has(fit.out, "TAO iteration ")) << fit.out.substr(0, 3000);
  const std::string problem = std::string(COSTATE_PETAB_DIR) + "/benchmark/Bruno_JExpBot2016/Bruno_JExpBot2016.yaml";
  if (!fs::exists(problem)) GTEST_SKIP() << "PEtab benchmark not found at " << problem;
  const Result pe = on_terminal(dir_, "sensitivity " + problem);
  ASSERT_EQ(pe.code, 0) << pe.out.substr(0, 3000);
  EXPECT_TRUE(has(pe.out, "PEtab condition ")) << pe.out.substr(0, 3000);
  const Result starts = on_terminal(dir_, "calibrate " + problem + " --starts 2 --seed 1");
  EXPECT_TRUE(has(starts.out, "start 1/2")) << starts.out.substr(0, 3000);
  EXPECT_TRUE(has(starts.out, "best objective")) << starts.out.substr(0, 3000);
}

// PDE time stepping (the 90 s of silence): run's steps, and the
// adjoint's forward pass, reverse steps and recomputation from the binomial
// checkpoints (heat2d_kappa: 20 steps, 5 snapshots, so steps are recomputed).
TEST_F(FrontTest, ProgressOfPdeRunsAndAdjointSweeps) {
  const Result run = on_terminal(dir_, "run " + example("heat2d_kappa.yaml") + " -o fields.h5");
  ASSERT_EQ(run.code, 0) << run.out;
  // Drawn at most ten times a second: the first update of each scope is sure.
  EXPECT_TRUE(has(run.out, "PDE step 1/20 (t = 0.01)")) << run.out.substr(0, 3000);
  const Result sens = on_terminal(dir_, "sensitivity " + example("heat2d_kappa.yaml"));
  ASSERT_EQ(sens.code, 0) << sens.out;
  EXPECT_TRUE(has(sens.out, "PDE adjoint sweep: step 1/20")) << sens.out.substr(0, 3000);
  EXPECT_TRUE(has(sens.out, "PDE adjoint sweep, reverse: step 1/20")) << sens.out.substr(0, 3000);
  EXPECT_TRUE(has(sens.out, "steps recomputed")) << "checkpoint recomputation";
  EXPECT_TRUE(has(sens.out, " left")) << "an estimate of the time remaining";
  // Not with -q.
  const Result quiet = on_terminal(dir_, "sensitivity " + example("heat2d_kappa.yaml") + " -q");
  ASSERT_EQ(quiet.code, 0) << quiet.out;
  EXPECT_FALSE(has(quiet.out, "PDE adjoint sweep")) << quiet.out.substr(0, 3000);
}

// The PDE inversion: Newton iterations with J and |g|, the CG iterations
// nested on the same line, and both passes of the Laplace eigensolve.
TEST_F(FrontTest, ProgressOfPdeNewtonCgAndEigensolve) {
  const Result inv = on_terminal(dir_, "calibrate " + example("heat2d_inversion.yaml") + " -o inv.h5");
  ASSERT_EQ(inv.code, 0) << inv.out.substr(0, 3000);
  EXPECT_TRUE(has(inv.out, "Newton iteration 0/30 (J = ")) << inv.out.substr(0, 3000);
  EXPECT_TRUE(has(inv.out, " | CG iteration ")) << inv.out.substr(0, 3000);
  EXPECT_TRUE(has(inv.out, "eigensolve pass 1 (B⁻¹A actions) 0/")) << inv.out.substr(0, 3000);
  EXPECT_TRUE(has(inv.out, "eigensolve pass 2 (A actions) 0/")) << inv.out.substr(0, 3000);
}

// ------------------------------------------------ self-describing results

// run --json --trajectory holds every output time's state, the same bits as
// the HDF5 file's /time and /state (here: the CSV of -o, written by the same run).
TEST_F(FrontTest, RunJsonTrajectoryHoldsEveryOutputTime) {
  const Result r = run("run " + example("lotka_volterra.yaml") + " -q --json --trajectory -o out.csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["t"].size(), j["outputs"].get<std::size_t>());
  ASSERT_EQ(j["states"].size(), j["t"].size());
  EXPECT_EQ(j["states"].back(), j["final_state"]);
  EXPECT_EQ(j["t"].back().get<double>(), j["final_time"].get<double>());
  // The CSV table: header t,x,y, the provenance (version, command, the
  // settings on one line), then one row per output time.
  std::ifstream csv(dir_ / "out.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "t,x,y");
  for (const char* start : {"# costate ", "# command: run", "# settings: {model: lotka_volterra, "}) {
    std::getline(csv, line);
    EXPECT_EQ(line.rfind(start, 0), 0u) << line;
  }
  std::size_t rows = 0;
  while (std::getline(csv, line)) rows += !line.empty() && line[0] != '#';
  EXPECT_EQ(rows, j["t"].size());
  // Without the flag the JSON stays small; the flag alone (no --json) is refused by name.
  const Result small = run("run " + example("lotka_volterra.yaml") + " -q --json");
  EXPECT_FALSE(Json::parse(small.out).contains("states"));
  const Result alone = run("run " + example("lotka_volterra.yaml") + " -q --trajectory");
  EXPECT_EQ(alone.code, 1);
  EXPECT_TRUE(has(alone.err, "--trajectory adds the trajectory to --json")) << alone.err;
}

// -o with a table's name on a PDE input was silently HDF5: refused by name.
TEST_F(FrontTest, PdeOutputNamedCsvIsRefused) {
  const Result r = run("run " + example("heat2d_kappa.yaml") + " -q -o fields.csv");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "fields.csv: costate run on a PDE input writes HDF5 only")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "fields.csv"));
}

// A PDE run's file carries the version, the command and the settings.
TEST_F(FrontTest, PdeFilesCarryVersionCommandAndSettings) {
  const Result r = run("run " + example("heat2d_kappa.yaml") + " -q -o fields.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(root_attribute(dir_ / "fields.h5", "costate_version").empty());
  EXPECT_EQ(root_attribute(dir_ / "fields.h5", "command"), "run");
  const YAML::Node settings = YAML::Load(root_attribute(dir_ / "fields.h5", "settings"));
  ASSERT_TRUE(settings["pde"]) << root_attribute(dir_ / "fields.h5", "settings");
}

// Every entry of a PDE file's arrays is named: the inversion's objective
// parts and solve counts, a run's integral per field, dJ/d<scalar> per
// parameter (they were bare numbers in order).
TEST_F(FrontTest, PdeArraysNameTheirEntries) {
  using Names = std::vector<std::string>;
  const Result inv = run("calibrate " + example("heat2d_inversion.yaml") + " -q -o inv.h5");
  ASSERT_EQ(inv.code, 0) << inv.err;
  EXPECT_EQ(dataset_names(dir_ / "inv.h5", "arrays/objective"), (Names{"objective", "misfit", "prior", "gradient_norm"}));
  EXPECT_EQ(dataset_names(dir_ / "inv.h5", "arrays/pde_solves"),
            (Names{"forward", "adjoint", "incremental_forward", "incremental_adjoint"}));
  const Result r = run("run " + example("heat2d_kappa.yaml") + " -q -o fields.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(dataset_names(dir_ / "fields.h5", "arrays/final_integrals"), (Names{"u"}));
  const Result s = run("sensitivity " + example("heat2d_kappa.yaml") + " -q -o grad.h5");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(dataset_names(dir_ / "grad.h5", "arrays/gradient"), (Names{"q0"}));
}

// A PDE sensitivity's table is whole, then the file it wrote (the u(t0) row
// came after "wrote …").
TEST_F(FrontTest, PdeSensitivityReportEndsWithTheFileWritten) {
  const Result r = run("sensitivity " + example("heat2d_kappa.yaml") + " -q -o s.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::size_t row = r.out.find("u(t0) (fields)"), wrote = r.out.find("wrote s.h5 (+ .xmf)");
  ASSERT_NE(row, std::string::npos) << r.out;
  ASSERT_NE(wrote, std::string::npos) << r.out;
  EXPECT_LT(row, wrote) << r.out;
}

// The ODE settings echo names the noise model: σ per state (the input's
// noise: {x: 0.1, y: 0.2}), where it held only the weights 1/σ².
TEST_F(FrontTest, OdeSettingsCarryTheNoiseSigma) {
  const Result r = run("sensitivity " + example("lotka_volterra_equations.yaml") + " -q -o s.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  const hid_t file = H5Fopen((dir_ / "s.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  const hid_t d = H5Dopen2(file, "settings", H5P_DEFAULT);
  char* text = nullptr;
  ASSERT_GE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), 0);
  const YAML::Node settings = YAML::Load(text ? text : "");
  H5free_memory(text);
  H5Dclose(d);
  H5Tclose(type);
  H5Fclose(file);
  const YAML::Node noise = settings["objective"]["data"]["noise"];
  ASSERT_TRUE(noise) << settings;
  EXPECT_DOUBLE_EQ(noise["x"].as<double>(), 0.1);  // 1/√(1/0.1²): one rounding each way
  EXPECT_DOUBLE_EQ(noise["y"].as<double>(), 0.2);
}

// PEtab files: version, command and settings with every observable's noise model.
TEST_F(FrontTest, PetabFilesCarryVersionCommandAndNoiseModels) {
  const std::string problem = std::string(COSTATE_PETAB_DIR) + "/benchmark/Bruno_JExpBot2016/Bruno_JExpBot2016.yaml";
  if (!fs::exists(problem)) GTEST_SKIP() << "PEtab benchmark not found at " << problem;
  const Result r = run("run " + problem + " -q -o sim.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(root_attribute(dir_ / "sim.h5", "costate_version").empty());
  EXPECT_EQ(root_attribute(dir_ / "sim.h5", "command"), "run");
  const YAML::Node settings = YAML::Load(root_attribute(dir_ / "sim.h5", "settings"));
  EXPECT_EQ(settings["integrator"]["method"].as<std::string>(), "cvodes_bdf");
  EXPECT_EQ(settings["integrator"]["rtol"].as<double>(), 1e-10);
  ASSERT_TRUE(settings["observables"].IsMap());
  ASSERT_GT(settings["observables"].size(), 0u);
  for (const auto& o : settings["observables"]) {
    EXPECT_TRUE(o.second["noise_formula"]) << o.first.as<std::string>();
    EXPECT_TRUE(o.second["noise_distribution"]) << o.first.as<std::string>();
  }
  // --set reaches the file's settings too.
  const Result s = run("sensitivity " + problem + " -q -o grad.h5 --set integrator.rtol=1e-8");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(root_attribute(dir_ / "grad.h5", "command"), "sensitivity");
  EXPECT_EQ(YAML::Load(root_attribute(dir_ / "grad.h5", "settings"))["integrator"]["rtol"].as<double>(), 1e-8);
}

// ------------------------------------------------ smaller

// An unknown one-letter symbol is no typo of 't' (every character replaced);
// the same name in another case is suggested.
TEST_F(FrontTest, UnknownSymbolSuggestionsAreTypos) {
  const auto model = [&](const std::string& term) {
    std::ofstream(dir_ / "m.yaml") << "model:\n  states: [x]\n  equations: {x: \"-k*x + " << term
                                   << "\"}\nparameters: {k: 1.0}\ninitial_state: {x: 1.0}\ntime: {end: 1.0}\n";
    return run("run m.yaml -q");
  };
  const Result s = model("s");
  EXPECT_EQ(s.code, 1);
  EXPECT_TRUE(has(s.err, "unknown symbol 's'")) << s.err;
  EXPECT_FALSE(has(s.err, "did you mean")) << s.err;
  const Result upper = model("K");
  EXPECT_TRUE(has(upper.err, "unknown symbol 'K'; did you mean 'k'?")) << upper.err;
  const Result typo = model("kk");
  EXPECT_TRUE(has(typo.err, "unknown symbol 'kk'; did you mean 'k'?")) << typo.err;
}

}  // namespace
