// Gradients that cannot be trusted are flagged, the verifier does not cry
// wolf, and every calibration states its convergence in one vocabulary
// (issue 35, items 2 and 3): dopri5's stiffness test, `sensitivity
// --check`, gradcheck's noise floor, and converged / stalled /
// not_converged in the text, the JSON and the file of ODE, PEtab and PDE
// calibrations.
#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/hdf5_status.hpp"
#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Result = costate::test::CommandResult;
using Json = nlohmann::json;

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_trust_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Result run(const std::string& args) {
    return costate::test::run_command(dir_, COSTATE_EXE, args, "timeout -s KILL 300");
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  /// A string attribute of group `where` ("/" for the root); "" when absent.
  std::string attribute(const std::string& file, const std::string& where, const char* name) {
    const hid_t f = H5Fopen((dir_ / file).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return "(unreadable)";
    std::string out;
    if (H5Aexists_by_name(f, where.c_str(), name, H5P_DEFAULT) > 0) {
      const hid_t a = H5Aopen_by_name(f, where.c_str(), name, H5P_DEFAULT, H5P_DEFAULT);
      const hid_t type = H5Aget_type(a);
      if (H5Tis_variable_str(type) > 0) {
        const hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, H5T_VARIABLE);
        H5Tset_cset(mem, H5Tget_cset(type));
        char* v = nullptr;
        if (H5Aread(a, mem, &v) >= 0 && v != nullptr) {
          out = v;
          H5free_memory(v);
        }
        H5Tclose(mem);
      } else {
        std::string buf(H5Tget_size(type), '\0');
        if (H5Aread(a, type, buf.data()) >= 0) out = buf.c_str();
      }
      H5Tclose(type);
      H5Aclose(a);
    }
    H5Fclose(f);
    return out;
  }

  fs::path dir_;
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string examples(const std::string& name) { return std::string(COSTATE_EXAMPLES_DIR) + "/" + name; }

bool warns_stiff(const Json& j) {
  for (const auto& w : j["warnings"]) {
    const std::string s = w.get<std::string>();
    if (has(s, "found the problem stiff") && has(s, "integrator.method: bdf") &&
        has(s, "ignores the step-size controller"))
      return true;
  }
  return false;
}

// Robertson's kinetics with a terminal objective: the explicit method's
// adjoint is wrong there (dJ/dk1 −4.21 by dopri5 against −4.25 by bdf).
std::string robertson_with_objective() {
  std::ifstream in(examples("robertson.yaml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text + "objective: {terminal: \"y1\"}\n";
}

// ----------------------------------------------------- 2a. stiffness test

TEST_F(TrustTest, Dopri5OnStiffProblemsWarnsAndNamesBdf) {
  const Result r = run("run '" + examples("robertson.yaml") + "' -q --json -o r.h5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(warns_stiff(Json::parse(r.out))) << r.out;
  // Van der Pol μ = 1000 with dopri5 (the example's bdf overridden), to t = 20.
  const Result v = run("run '" + examples("van_der_pol_mu1000.yaml") +
                       "' -q --json -o v.h5 --set integrator.method=dopri5 --set time.end=20 "
                       "--set time.output_every=10");
  ASSERT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_TRUE(warns_stiff(Json::parse(v.out))) << v.out;
  // The text output shows the same warning.
  const Result t = run("run '" + examples("robertson.yaml") + "' -q -o t.h5");
  EXPECT_TRUE(has(t.out, "warning: dopri5 found the problem stiff")) << t.out;
  // The sensitivity's forward pass is the same integration: it warns too.
  write("rs.yaml", robertson_with_objective());
  const Result s = run("sensitivity rs.yaml -q --json");
  ASSERT_EQ(s.code, 0) << s.out << s.err;
  EXPECT_TRUE(warns_stiff(Json::parse(s.out))) << s.out;
}

TEST_F(TrustTest, Dopri5OnNonStiffProblemsDoesNotWarn) {
  for (const char* name : {"lotka_volterra.yaml", "van_der_pol.yaml", "lorenz.yaml"}) {
    const Result r = run("run '" + examples(name) + "' -q --json -o r.h5 --set integrator.method=dopri5");
    ASSERT_EQ(r.code, 0) << name << r.out << r.err;
    EXPECT_TRUE(Json::parse(r.out)["warnings"].empty()) << name << r.out;
  }
}

// ------------------------------------------------- 2b. sensitivity --check

TEST_F(TrustTest, SensitivityCheckFlagsTheStiffDopri5GradientAndPassesBdf) {
  write("rs.yaml", robertson_with_objective());
  const Result d = run("sensitivity rs.yaml -q --json --check");
  EXPECT_EQ(d.code, 1) << d.out << d.err;
  const Json jd = Json::parse(d.out);
  EXPECT_EQ(jd["status"], "check_failed");
  EXPECT_FALSE(jd["check"]["passed"].get<bool>()) << d.out;
  EXPECT_FALSE(jd["check"]["within_noise"].get<bool>()) << d.out;
  // Measured: 11 % off along the seeded direction, far above the 1e-3 the
  // check allows.
  EXPECT_GT(jd["check"]["relative_error"].get<double>(), 1e-2) << d.out;
  bool named = false;
  for (const auto& w : jd["warnings"]) named = named || has(w.get<std::string>(), "sensitivity --check");
  EXPECT_TRUE(named) << d.out;

  const Result b = run("sensitivity rs.yaml -q --json --check --set integrator.method=bdf");
  EXPECT_EQ(b.code, 0) << b.out << b.err;
  const Json jb = Json::parse(b.out);
  EXPECT_EQ(jb["status"], "ok");
  EXPECT_TRUE(jb["check"]["passed"].get<bool>()) << b.out;
  // bdf's gradient agrees with the re-integrated difference to its
  // tolerance level (measured 6e-4; the check's own 1e-3 relative).
  constexpr double kCheckRtol = 1e-3;
  EXPECT_LT(jb["check"]["relative_error"].get<double>(), kCheckRtol) << b.out;
  // The direction is the seeded one: the same in both runs.
  EXPECT_EQ(jd["check"]["direction"], jb["check"]["direction"]);

  // Text output.
  const Result t = run("sensitivity rs.yaml -q --check");
  EXPECT_TRUE(has(t.out, "check along a random direction")) << t.out;
  EXPECT_TRUE(has(t.out, "DISAGREES")) << t.out;
}

TEST_F(TrustTest, SensitivityCheckPassesACorrectGradient) {
  std::ifstream in(examples("lotka_volterra.yaml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write("lv.yaml", text + "objective: {terminal: \"x^2 + y\"}\n");
  const Result r = run("sensitivity lv.yaml -q --json --check");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_TRUE(j["check"]["passed"].get<bool>()) << r.out;
  // dopri5 at rtol 1e-8 on a smooth, non-stiff problem: the discrete
  // adjoint matches J re-integrated to ~2e-7 (measured), well inside 1e-5.
  constexpr double kSmoothRtol = 1e-5;
  EXPECT_LT(j["check"]["relative_error"].get<double>(), kSmoothRtol) << r.out;
  EXPECT_EQ(j["check"]["evaluations"], 10);  // 5 step sizes, central
  // PEtab and PDE inputs are refused by name.
  const Result p = run("sensitivity '" + examples("heat2d_kappa.yaml") + "' -q --check");
  EXPECT_EQ(p.code, 1);
  EXPECT_TRUE(has(p.err + p.out, "--check is for ODE inputs")) << p.err << p.out;
}

// ------------------------------------------------ 2c. gradcheck's noise floor

TEST_F(TrustTest, GradcheckAtAnOptimumReportsTheNoiseFloorNotFailed) {
  // dJ/dk = 2 (x(1) − e^{−1}) ∂x/∂k = 0 at k = 1; CVODES' continuous
  // adjoint gives 2.5e-8 there and the differences 3.8e-8: a relative
  // test alone failed it.
  write("opt.yaml",
        "model:\n  states: [x, y]\n  equations: {x: \"-k*x\", y: \"-c*y\"}\n"
        "parameters: {k: 1.0, c: 0.5}\ninitial_state: {x: 1.0, y: 1.0}\ntime: {end: 1.0}\n"
        "integrator: {method: cvodes_bdf, rtol: 1.0e-8, atol: 1.0e-10}\n"
        "sensitivity: {method: cvodes_adjoint}\n"
        "objective: {terminal: \"(x - 0.36787944117144233)^2 + y\"}\n");
  const Result r = run("gradcheck opt.yaml -q --json");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  const auto& floor = j["finite_differences"]["at_noise_floor"];
  EXPECT_EQ(floor, Json::array({"k", "x(t0)"})) << r.out;
  EXPECT_FALSE(j["finite_differences"]["components"]["c"]["at_noise_floor"].get<bool>());
  // dJ/dc = −e^{−1/2}: the resolved component still agrees closely.
  EXPECT_NEAR(j["finite_differences"]["components"]["c"]["adjoint"].get<double>(), -std::exp(-0.5), 1e-6);
  const Result t = run("gradcheck opt.yaml -q");
  EXPECT_TRUE(has(t.out, "at the noise floor: k, x(t0)")) << t.out;
  EXPECT_TRUE(has(t.out, "gradcheck: passed")) << t.out;
}

TEST_F(TrustTest, GradcheckFailsTheStiffDopri5Gradient) {
  write("rs.yaml", robertson_with_objective());
  const Result r = run("gradcheck rs.yaml -q --json");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "failed");
  EXPECT_TRUE(warns_stiff(j)) << r.out;
}

TEST_F(TrustTest, GradcheckPassesBrunoAtItsOptimum) {
  const fs::path yaml = fs::path(COSTATE_PETAB_DIR) / "benchmark" / "Bruno_JExpBot2016" / "Bruno_JExpBot2016.yaml";
  if (!fs::exists(yaml)) GTEST_SKIP() << "PEtab benchmark not found at " << yaml;
  // At the published optimum |g| ~ 2e-3 and components of 1e-5 carry
  // absolute errors of 1e-7 … 1e-6 (CVODES adjoint against differences):
  // FAILED before, judged against the norm and the spread now.
  const Result r = run("gradcheck '" + yaml.string() + "' -q --json");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "ok") << r.out;
  EXPECT_TRUE(j["taylor"]["passed"].get<bool>());
  EXPECT_TRUE(j.contains("warnings"));
}

TEST_F(TrustTest, PdeGradcheckUsesTheSharedDifferencesAndReportsTheNoiseFloor) {
  // A heat equation with a parameter c whose effect is ~1e-9 of the rest:
  // dJ/dc = 1.07e-12 by the adjoint, below what differences of J resolve.
  // The PDE gradcheck now judges like the ODE and PEtab ones (Richardson
  // differences, the gradient's norm, their spread): c is reported at the
  // noise floor instead of carrying a 19 % "relative error" (h = 1e-6
  // central differences before).
  write("pde.yaml",
        "pde:\n  grid: {n: [16, 16], extent: [[0, 1], [0, 1]], boundary: [dirichlet, neumann]}\n"
        "  fields: [u]\n  parameters: {q0: 2.0, c: 1.0}\n"
        "  initial: {u: \"exp(-30*((x - 0.3)^2 + (y - 0.6)^2))\"}\n"
        "  equations: {u: \"0.05*lap(u) + q0*exp(-((x - 0.7)^2 + (y - 0.4)^2)/(2*0.1^2)) + 1e-9*c*u*u\"}\n"
        "integrator: {method: crank_nicolson, dt: 0.01, steps: 10}\n"
        "objective:\n  misfit: {u: \"0.2*sin(pi*x)*sin(pi*y)\"}\nsensitivity:\n  method: discrete_adjoint\n");
  const Result r = run("gradcheck pde.yaml -q --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["finite_differences"]["at_noise_floor"], Json::array({"c (relative)"})) << r.out;
  const auto& comps = j["finite_differences"]["components"];
  EXPECT_TRUE(comps["c (relative)"]["at_noise_floor"].get<bool>());
  EXPECT_FALSE(comps["q0 (relative)"]["at_noise_floor"].get<bool>());
  EXPECT_GT(comps["q0 (relative)"]["tolerance"].get<double>(), 0.0);
  // The resolved components: a linear PDE with fixed steps is smooth to
  // round-off, and Richardson differences agree to ~1e-10 (measured
  // 6.7e-11); 1e-8 leaves room, and excludes the floor's noise (0.19 with
  // plain differences counted it).
  constexpr double kResolvedRel = 1e-8;
  EXPECT_LT(j["finite_differences"]["max_rel_error"].get<double>(), kResolvedRel) << r.out;
  const Result t = run("gradcheck pde.yaml -q");
  EXPECT_TRUE(has(t.out, "at the noise floor: c (relative)")) << t.out;
  EXPECT_TRUE(has(t.out, "Richardson-extrapolated")) << t.out;
}

// ---------------------------------------- 3. convergence stated honestly

TEST_F(TrustTest, OdeCalibrationThatConvergesSaysConverged) {
  const Result r = run("calibrate '" + examples("lotka_volterra_calibration.yaml") + "' -q --json -o c.h5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["convergence"]["status"], "converged");
  EXPECT_EQ(j["convergence"]["test"], "CONVERGED_GATOL");
  EXPECT_FALSE(j.contains("standard_errors_note"));
  EXPECT_EQ(costate::test::read_status(dir_ / "c.h5"), "complete");
  EXPECT_EQ(attribute("c.h5", "/calibration", "fit_status"), "converged");
}

TEST_F(TrustTest, BdfCalibrationStalledAtTheNoiseFloorIsStalled) {
  // bdf at rtol = atol = 1e-10: TAO's line searches spend the evaluations
  // (DIVERGED_MAXFCN) at |g| = 0.05, while the gradient moves by 7e-3 when
  // the tolerances are tightened 100-fold — the integration's noise floor;
  // f = 40.46266 against dopri5's converged 40.46262.
  const Result r = run("calibrate '" + examples("lotka_volterra_calibration.yaml") +
                       "' -q --json -o s.h5 --set integrator.method=bdf --set integrator.rtol=1e-10 "
                       "--set integrator.atol=1e-10");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "stalled") << r.out;
  EXPECT_EQ(j["convergence"]["status"], "stalled");
  EXPECT_TRUE(has(j["convergence"]["test"].get<std::string>(), "its noise")) << r.out;
  // An optimum to the integration's accuracy: the converged dopri5 fit's
  // objective to 1e-5 relative.
  constexpr double kConvergedObjective = 40.4626, kNoiseRel = 1e-5;
  EXPECT_NEAR(j["objective"].get<double>(), kConvergedObjective, kNoiseRel * kConvergedObjective);
  EXPECT_EQ(costate::test::read_status(dir_ / "s.h5"), "complete");
  EXPECT_EQ(attribute("s.h5", "/calibration", "fit_status"), "stalled");
}

TEST_F(TrustTest, CalibrationStoppedEarlyIsNotConvergedEverywhere) {
  const std::string in = "calibrate '" + examples("lotka_volterra_calibration.yaml") + "' -q -tao_max_it 2";
  const Result r = run(in + " --json -o n.h5");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "not_converged");
  EXPECT_EQ(j["convergence"]["status"], "not_converged");
  EXPECT_TRUE(has(j["standard_errors_note"].get<std::string>(), "NOT at a converged optimum")) << r.out;
  EXPECT_EQ(costate::test::read_status(dir_ / "n.h5"), "partial");
  EXPECT_EQ(attribute("n.h5", "/calibration", "fit_status"), "not_converged");
  EXPECT_TRUE(has(attribute("n.h5", "/calibration", "standard_errors_note"), "NOT at a converged optimum"));
  const Result t = run(in + " -o t.h5");
  EXPECT_EQ(t.code, 2);
  EXPECT_TRUE(has(t.out, "fit: not converged (DIVERGED_MAXITS)")) << t.out;
  EXPECT_TRUE(has(t.out, "standard errors are NOT at a converged optimum")) << t.out;
}

TEST_F(TrustTest, PdeInversionNotConvergedSaysSoInItsPosterior) {
  fs::copy(examples("heat2d_inversion.yaml"), dir_ / "inv.yaml");
  fs::copy(examples("heat2d_inversion_sensors.csv"), dir_ / "heat2d_inversion_sensors.csv");
  const std::string in =
      "calibrate inv.yaml -q --set calibration.optimizer.method=lbfgs "
      "--set calibration.optimizer.max_iterations=2";
  const Result r = run(in + " --json -o p.h5");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "not_converged");
  EXPECT_EQ(j["convergence"]["status"], "not_converged");
  EXPECT_TRUE(has(j["posterior"]["note"].get<std::string>(), "NOT at a converged optimum")) << r.out;
  EXPECT_EQ(costate::test::read_status(dir_ / "p.h5"), "partial");
  EXPECT_EQ(attribute("p.h5", "/", "fit_status"), "not_converged");
  EXPECT_TRUE(has(attribute("p.h5", "/", "posterior_note"), "NOT at a converged optimum"));
  const Result t = run(in + " -o t.h5");
  EXPECT_EQ(t.code, 2);
  EXPECT_TRUE(has(t.out, "NOT at a converged optimum")) << t.out;
  EXPECT_FALSE(has(t.out, "Laplace posterior at the MAP point")) << t.out;
  // Newton–CG to convergence: converged, its file complete.
  const Result c = run("calibrate inv.yaml -q --json -o c.h5");
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_EQ(Json::parse(c.out)["convergence"]["status"], "converged");
  EXPECT_EQ(costate::test::read_status(dir_ / "c.h5"), "complete");
  EXPECT_EQ(attribute("c.h5", "/", "fit_status"), "converged");
}

TEST_F(TrustTest, PdeInversionStalledAtTheNoiseFloorIsStalledNotNotConverged) {
  // Newton-CG asked for |g| <= 1e-14 |g0|: it reaches |g| ~ 8e-11 (from
  // 631) in 8 iterations and then takes steps that J cannot tell apart
  // from round-off. It ran on to max_iterations and reported
  // not_converged (exit 2, file partial) — the same as a fit stopped early.
  // Now: three accepted steps without a J below the best end the search,
  // and the decrease Newton's last step predicted is compared with J's
  // round-off (8 eps |J|): stalled, at an optimum.
  fs::copy(examples("heat2d_inversion.yaml"), dir_ / "inv.yaml");
  fs::copy(examples("heat2d_inversion_sensors.csv"), dir_ / "heat2d_inversion_sensors.csv");
  const std::string in = "calibrate inv.yaml -q --set calibration.optimizer.gradient_rtol=1e-14";
  const Result r = run(in + " --json -o s.h5");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "stalled") << r.out;
  EXPECT_EQ(j["convergence"]["status"], "stalled");
  const std::string test = j["convergence"]["test"].get<std::string>();
  EXPECT_TRUE(has(test, "no decrease of J")) << test;
  EXPECT_TRUE(has(test, "<= the objective's round-off")) << test;
  // The same optimum as the converged run (the example's 1e-8): J to 1e-6.
  const Result c = run("calibrate inv.yaml -q --json");
  ASSERT_EQ(c.code, 0) << c.err;
  constexpr double kSameOptimumRel = 1e-6;  // both at |g| <= 1e-8 |g0|
  const double jc = Json::parse(c.out)["objective"].get<double>();
  EXPECT_NEAR(j["objective"].get<double>(), jc, kSameOptimumRel * jc);
  EXPECT_FALSE(j["posterior"].contains("note")) << r.out;
  EXPECT_EQ(costate::test::read_status(dir_ / "s.h5"), "complete");
  EXPECT_EQ(attribute("s.h5", "/", "fit_status"), "stalled");
  const Result t = run(in + " -o t.h5");
  EXPECT_EQ(t.code, 0);
  EXPECT_TRUE(has(t.out, "stalled at the integration's noise floor")) << t.out;
  EXPECT_FALSE(has(t.out, "NOT at a converged optimum")) << t.out;
}

TEST_F(TrustTest, PetabCalibrationStatesItsStatus) {
  const fs::path yaml = fs::path(COSTATE_PETAB_DIR) / "test-suite-v1" / "0001" / "_0001.yaml";
  if (!fs::exists(yaml)) GTEST_SKIP() << "PEtab test suite not found at " << yaml;
  const Result c = run("calibrate '" + yaml.string() + "' -q --json -o c.h5");
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_EQ(Json::parse(c.out)["convergence"]["status"], "converged");
  EXPECT_EQ(attribute("c.h5", "/calibration", "status"), "complete");
  const Result n = run("calibrate '" + yaml.string() + "' -q --json -o n.h5 -tao_max_it 1");
  EXPECT_EQ(n.code, 2) << n.out << n.err;
  const Json j = Json::parse(n.out);
  EXPECT_EQ(j["status"], "not_converged");
  EXPECT_EQ(j["convergence"]["status"], "not_converged");
  EXPECT_EQ(attribute("n.h5", "/calibration", "fit_status"), "not_converged");
  EXPECT_EQ(attribute("n.h5", "/calibration", "status"), "partial");
}

TEST_F(TrustTest, DeepPetabFormulasAreRefusedNamingTheTableAndLimit) {
  // 30 000 parentheses or 100 000 unary minus signs in an observable
  // formula overflowed the stack (SIGSEGV); the shared expression parser
  // now refuses them, naming the table, its row and the limit.
  const fs::path suite = fs::path(COSTATE_PETAB_DIR) / "test-suite-v1" / "0001";
  if (!fs::exists(suite / "_0001.yaml")) GTEST_SKIP() << "PEtab test suite not found at " << suite;
  for (const char* f : {"_0001.yaml", "_model.xml", "_parameters.tsv", "_measurements.tsv", "_conditions.tsv"})
    fs::copy(suite / f, dir_ / f);
  const std::string deep[] = {std::string(30000, '(') + "A" + std::string(30000, ')'), std::string(100000, '-') + "A"};
  for (const std::string& formula : deep) {
    write("_observables.tsv", "observableId\tobservableFormula\tnoiseFormula\nobs_a\t" + formula + "\t0.5\n");
    for (const char* command : {"run", "gradcheck", "calibrate"}) {
      const Result r = run(std::string(command) + " _0001.yaml -q");
      EXPECT_EQ(r.code, 1) << command << r.err.substr(0, 300);
      EXPECT_TRUE(has(r.err, "_observables.tsv:2:2 (observableFormula of obs_a)")) << r.err.substr(0, 300);
      EXPECT_TRUE(has(r.err, "nesting deeper than 1000 levels")) << r.err.substr(0, 300);
      EXPECT_LT(r.err.size(), 1000u);  // not echoed whole
    }
  }
}

TEST_F(TrustTest, PetabRunWithANonFiniteLlhIsAnErrorNamingTheMeasurement) {
  // log(A - 10) of a species below 10: `costate run` printed "llh nan" with
  // "status": "ok" and exit 0, and wrote its files.
  const fs::path suite = fs::path(COSTATE_PETAB_DIR) / "test-suite-v1" / "0001";
  if (!fs::exists(suite / "_0001.yaml")) GTEST_SKIP() << "PEtab test suite not found at " << suite;
  for (const char* f : {"_0001.yaml", "_model.xml", "_parameters.tsv", "_measurements.tsv", "_conditions.tsv"})
    fs::copy(suite / f, dir_ / f);
  write("_observables.tsv", "observableId\tobservableFormula\tnoiseFormula\nobs_a\tlog(A - 10)\t0.5\n");
  const Result r = run("run _0001.yaml -q --json -o sims.tsv");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "the log-likelihood at the nominal parameters is nan, not a result")) << r.err;
  EXPECT_TRUE(has(r.err, "line 2 of _measurements.tsv (observable obs_a, time 0)")) << r.err;
  EXPECT_EQ(Json::parse(r.out)["status"], "error");
  EXPECT_FALSE(fs::exists(dir_ / "sims.tsv"));
  EXPECT_FALSE(fs::exists(dir_ / "sims.h5"));
}

TEST_F(TrustTest, StochasticFitsStateTheirStatusInTheSameVocabulary) {
  // AdamW by epochs has no convergence test: it printed "status": "ok" and
  // exit 0 whatever its gradient. Now not_converged (exit 2) with the
  // reason and the fix (--finish N), in the JSON, the text and the file;
  // a full-batch finish that meets its test is converged.
  const std::string input = "calibrate '" + examples("decay_conditions.yaml") + "' -q";
  const std::string adam = " --optimizer adamw --epochs 40 --batch 3 --learning-rate 0.05 --seed 2";
  const Result e = run(input + adam + " --json -o e.h5");
  EXPECT_EQ(e.code, 2) << e.out << e.err;
  const Json je = Json::parse(e.out);
  EXPECT_EQ(je["status"], "not_converged");
  EXPECT_EQ(je["convergence"]["status"], "not_converged");
  EXPECT_TRUE(has(je["convergence"]["test"].get<std::string>(), "add --finish N")) << e.out;
  ASSERT_EQ(je["warnings"].size(), 1u) << e.out;
  EXPECT_TRUE(has(je["warnings"][0].get<std::string>(), "NOT at a converged optimum"));
  EXPECT_EQ(attribute("e.h5", "/stochastic", "fit_status"), "not_converged");
  EXPECT_EQ(attribute("e.h5", "/stochastic", "status"), "partial");
  const Result t = run(input + adam);
  EXPECT_EQ(t.code, 2);
  EXPECT_TRUE(has(t.out, "fit: not converged (its epochs done")) << t.out;
  // With a full-batch finish that converges (TAO's gradient test).
  const Result f = run(input + adam + " --finish 10 --json -o f.h5");
  EXPECT_EQ(f.code, 0) << f.out << f.err;
  const Json jf = Json::parse(f.out);
  EXPECT_EQ(jf["status"], "ok");
  EXPECT_EQ(jf["convergence"]["status"], "converged");
  EXPECT_EQ(jf["convergence"]["test"], "full-batch finish: CONVERGED_GATOL");
  EXPECT_TRUE(jf["warnings"].empty()) << f.out;
  EXPECT_EQ(attribute("f.h5", "/stochastic", "fit_status"), "converged");
  EXPECT_EQ(attribute("f.h5", "/stochastic", "status"), "complete");
  // A PEtab problem's stochastic fit: the same vocabulary.
  const fs::path fujita = fs::path(COSTATE_PETAB_DIR) / "benchmark" / "Fujita_SciSignal2010" / "Fujita_SciSignal2010.yaml";
  if (!fs::exists(fujita)) GTEST_SKIP() << "PEtab benchmark not found at " << fujita;
  const Result p = run("calibrate '" + fujita.string() +
                       "' -q --optimizer adamw --epochs 2 --batch 2 --learning-rate 0.02 --json -o p.h5");
  EXPECT_EQ(p.code, 2) << p.out << p.err;
  const Json jp = Json::parse(p.out);
  EXPECT_EQ(jp["status"], "not_converged");
  EXPECT_EQ(jp["convergence"]["status"], "not_converged");
  EXPECT_EQ(attribute("p.h5", "/stochastic", "fit_status"), "not_converged");
  EXPECT_EQ(attribute("p.h5", "/stochastic", "status"), "partial");
}

// ------------------- 1. the gradient's forward pass is the run's integration

/// One file through `run` and `sensitivity`: the same number of steps, and
/// with the objective x(t1) the same bits (JSON doubles are printed to 17
/// significant digits: a parsed equal double is the same double).
struct SameRun {
  std::int64_t run_steps = -1, sensitivity_steps = -2;
  double run_x = 0.0, objective = 1.0;
};

class SameStepsTest : public TrustTest {
 protected:
  SameRun both(const std::string& file, const std::string& sets) {
    SameRun out;
    const Result r = run("run " + file + " -q --json" + sets);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    const Result s = run("sensitivity " + file + " -q --json" + sets);
    EXPECT_EQ(s.code, 0) << s.out << s.err;
    if (r.code != 0 || s.code != 0) return out;
    const Json jr = Json::parse(r.out), js = Json::parse(s.out);
    out.run_steps = jr["steps"].get<std::int64_t>();
    out.run_x = jr["final_state"][0].get<double>();
    out.sensitivity_steps = js["steps"].get<std::int64_t>();
    out.objective = js["objective"].get<double>();
    return out;
  }
  std::string example_with(const std::string& name, const std::string& extra) {
    std::ifstream in(examples(name));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string file = "in_" + std::to_string(serial_++) + ".yaml";
    write(file, text + extra);
    return file;
  }
  int serial_ = 0;
};

TEST_F(SameStepsTest, RunAndSensitivityTakeTheSameStepsToTheSameBits) {
  // Van der Pol μ = 1000 with dopri5 to t = 100 (86 677 steps: the case of
  // the issue, where the forward pass took one step fewer); Lotka–Volterra
  // with rk4 at a dt that does not divide the output spacing (the run
  // shortens steps to land on every output time), with euler, and with
  // dopri5 and fixed-step dopri5.
  const std::string vdp = example_with("van_der_pol_mu1000.yaml", "objective: {terminal: \"x\"}\n");
  const std::string lv = example_with("lotka_volterra.yaml", "objective: {terminal: \"x\"}\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {vdp, " --set integrator.method=dopri5 --set time.end=100"},
      {lv, " --set integrator.method=rk4 --set integrator.dt=0.013"},
      {lv, " --set integrator.method=euler --set integrator.dt=0.013"},
      {lv, " --set integrator.method=dopri5"},
      {lv, " --set integrator.method=dopri5 --set integrator.adaptive=false --set integrator.dt=0.013"},
  };
  for (const auto& [file, sets] : cases) {
    const SameRun r = both(file, sets);
    EXPECT_EQ(r.run_steps, r.sensitivity_steps) << file << sets;
    EXPECT_EQ(r.run_x, r.objective) << file << sets;  // bitwise: x(t1) is J
  }
}

TEST_F(SameStepsTest, RunningCostsAndObservationsDoNotChangeTheSteps) {
  // An integral objective adds the quadrature z to the forward pass: it must
  // not enter the step-size control. Observations at times between the
  // output times: the run lands on them as the gradient must.
  const std::string integral = example_with("lotka_volterra.yaml", "objective: {integral: \"x*y\"}\n");
  write("obs.csv", "t,x,y\n0.33,1.2,0.7\n1.77,0.4,1.9\n4.05,2.1,0.5\n");
  const std::string observed = example_with("lotka_volterra.yaml", "objective: {data: {file: obs.csv}}\n");
  for (const std::string& file : {integral, observed})
    for (const char* sets : {" --set integrator.method=dopri5",
                             " --set integrator.method=rk4 --set integrator.dt=0.013"}) {
      const SameRun r = both(file, sets);
      EXPECT_EQ(r.run_steps, r.sensitivity_steps) << file << sets;
    }
}

TEST_F(SameStepsTest, ImplicitMethodsTakeTheRunsSteps) {
  // sdirk3 chooses its steps on the model alone, as the run does. Its
  // replay converges Newton further (replay_kappa) from its own starting
  // guesses: J = x(t1) agrees with the run's to the Newton tolerance's
  // level, not to the bit (measured 9e-11 relative). bdf: the run is the
  // plan's integration (BdfStepper::set_replay: [J | f_p] afresh at each
  // step's start, Newton to replay_kappa), so the steps and J = x(t1) are
  // the run's bit for bit — with a terminal objective and with a running
  // cost beside it (z by quadrature along the same states).
  constexpr double kReplayNewton = 1e-8;  // relative: rtol 1e-8 of the example
  const std::string vdp = example_with("van_der_pol_mu1000.yaml", "objective: {terminal: \"x\"}\n");
  const SameRun s = both(vdp, " --set time.end=100 --set integrator.method=sdirk3");
  EXPECT_EQ(s.run_steps, s.sensitivity_steps);
  EXPECT_NEAR(s.objective, s.run_x, kReplayNewton * std::abs(s.run_x));
  for (const char* stop : {"100", "1000"}) {
    const SameRun r = both(vdp, std::string(" --set integrator.method=bdf --set time.end=") + stop);
    EXPECT_EQ(r.run_steps, r.sensitivity_steps) << stop;
    EXPECT_EQ(r.objective, r.run_x) << stop;
  }
  // Robertson to 4e7 (the example's bdf, 523 steps), J = y1(t1) + ∫ 0 dt:
  // a running cost puts z beside y (quadrature), and y stays the run's —
  // under the example's online schedule and binomial's replays.
  const std::string rob = example_with("robertson_stiff.yaml", "");
  for (const char* schedule : {"", " --set sensitivity.checkpointing.schedule=binomial"}) {
    const SameRun r =
        both(rob, std::string(" --set objective.terminal=y1 --set objective.integral=0*y3") + schedule);
    EXPECT_EQ(r.run_steps, r.sensitivity_steps) << schedule;
    EXPECT_EQ(r.objective, r.run_x) << schedule;
  }
}

TEST_F(SameStepsTest, TheContinuousAdjointsForwardPassIsTheRun) {
  // sensitivity.method = continuous_adjoint: its forward pass is the run's
  // integration (the model's states alone; a running cost's quadrature
  // outside the step control) — the same steps and, with J = x(t1), the
  // same bits, for each of its steppers.
  const std::string lv = example_with("lotka_volterra.yaml", "objective: {terminal: \"x\"}\n");
  const std::string integral = example_with("lotka_volterra.yaml", "objective: {integral: \"x*y\"}\n");
  for (const char* m : {"dopri5", "sdirk3", "bdf"}) {
    const std::string sets = std::string(" --set integrator.method=") + m +
                             " --set sensitivity.method=continuous_adjoint";
    const SameRun r = both(lv, sets);
    EXPECT_EQ(r.run_steps, r.sensitivity_steps) << m;
    EXPECT_EQ(r.run_x, r.objective) << m;
    const SameRun ri = both(integral, sets);
    EXPECT_EQ(ri.run_steps, ri.sensitivity_steps) << m << " (running cost)";
  }
}

TEST_F(SameStepsTest, VanDerPolThroughItsJumpHasTheRunsFiniteObjective) {
  // The case: μ = 1000 to t = 1000 with dopri5 gave J = NaN in
  // `sensitivity` while `run` reached x(1000) = −1.8636.
  const std::string vdp = example_with("van_der_pol_mu1000.yaml", "objective: {terminal: \"x\"}\n");
  const SameRun r = both(vdp, " --set integrator.method=dopri5");
  EXPECT_EQ(r.run_steps, r.sensitivity_steps);
  EXPECT_EQ(r.run_x, r.objective);
  EXPECT_TRUE(std::isfinite(r.objective));
  EXPECT_LT(r.objective, -1.5);  // past the jump, on the branch x < −1
}

// ---------------------------------------- finite-time blow-up is not ok

TEST_F(TrustTest, AFiniteTimeBlowUpIsAnErrorNamingItsTime) {
  // y' = y², y(0) = 1: y = 1/(1 − t) has no solution past t = 1. Euler and
  // rk4 keep finite numbers far past it (Euler gave J = 3.5e173, "ok").
  write("blowup.yaml",
        "model:\n  states: [y]\n  equations: {y: \"y^2\"}\ninitial_state: {y: 1.0}\n"
        "time: {start: 0.0, end: 2.0}\nobjective: {terminal: \"y\"}\n");
  for (const char* method : {"euler", "rk4"}) {
    const std::string sets = std::string(" --set integrator.method=") + method + " --set integrator.dt=1e-3";
    for (const char* command : {"run", "sensitivity"}) {
      const Result r = run(std::string(command) + " blowup.yaml -q" + sets);
      EXPECT_EQ(r.code, 1) << command << sets << r.out << r.err;
      EXPECT_TRUE(has(r.err, "blows up: detected at t = 1.0") || has(r.err, "non-finite"))
          << command << sets << r.err;
      const Result j = run(std::string(command) + " blowup.yaml -q --json" + sets);
      EXPECT_EQ(j.code, 1);
      EXPECT_EQ(Json::parse(j.out)["status"], "error") << j.out;
    }
  }
  // Euler's blow-up is caught while the state is still finite.
  const Result e = run("run blowup.yaml -q --set integrator.method=euler --set integrator.dt=1e-3");
  EXPECT_TRUE(has(e.err, "the solution blows up: detected at t = 1.0")) << e.err;
  EXPECT_TRUE(has(e.err, "end time.end before")) << e.err;
  // dopri5 stops at the singularity by itself (its step size underflows).
  const Result d = run("sensitivity blowup.yaml -q --set integrator.method=dopri5");
  EXPECT_EQ(d.code, 1) << d.out << d.err;
  EXPECT_TRUE(has(d.err, "may blow up near this time")) << d.err;
  // Fast exponential growth is not a blow-up: y' = 50 y to t = 10 by
  // Euler doubles the state on no step (factor 1 + 50·1e-3) and reaches
  // e^{500·ln(1.05)}·… ≈ 1e211 finite; with dt = 0.05 each step multiplies
  // it by 3.5, at a constant rate: an unstable-looking but exponential run.
  write("exp.yaml",
        "model:\n  states: [y]\n  equations: {y: \"50*y\"}\ninitial_state: {y: 1.0}\n"
        "time: {start: 0.0, end: 4.0}\nobjective: {terminal: \"y\"}\n");
  for (const char* dt : {"1e-3", "0.05"}) {
    const Result x = run(std::string("run exp.yaml -q --json --set integrator.method=euler --set integrator.dt=") + dt);
    EXPECT_EQ(x.code, 0) << dt << x.out << x.err;
  }
}

// --------------------- a second SIGTERM while the partial file is written

TEST_F(TrustTest, ASecondSigtermDuringThePartialWriteNeverTearsTheFile) {
  // A long run with many outputs (a partial file of tens of MB), an older
  // complete file under the same name, SIGTERM once (it stops and writes
  // the partial), and a second SIGTERM as soon as the temporary file
  // appears. Whatever the timing, the named file is the old one (same
  // inode and bytes) or a valid partial file, never a torn one (a leftover
  // out.h5.partial is the temporary, emptied by the next writer).
  write("long.yaml",
        "model: lotka_volterra\nparameters: {alpha: 1.5, beta: 1.0, gamma: 3.0, delta: 1.0}\n"
        "initial_state: {x: 1.0, y: 1.0}\ntime: {start: 0.0, end: 100000.0, output_every: 0.05}\n"
        "integrator: {method: dopri5, rtol: 1.0e-8, atol: 1.0e-10}\n");
  write("short.yaml",
        "model: lotka_volterra\nparameters: {alpha: 1.5, beta: 1.0, gamma: 3.0, delta: 1.0}\n"
        "initial_state: {x: 1.0, y: 1.0}\ntime: {start: 0.0, end: 1.0}\n");
  int kept_old = 0, partial = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_EQ(run("run short.yaml -q -o out.h5").code, 0);
    struct stat before {};
    ASSERT_EQ(::stat((dir_ / "out.h5").c_str(), &before), 0);
    std::ifstream oldf(dir_ / "out.h5", std::ios::binary);
    const std::string old_bytes((std::istreambuf_iterator<char>(oldf)), std::istreambuf_iterator<char>());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::chdir(dir_.c_str());
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execl(COSTATE_EXE, COSTATE_EXE, "run", "long.yaml", "-q", "-o", "out.h5", (char*)nullptr);
      ::_exit(127);
    }
    // Let it integrate for a while (2·10⁶ outputs in all), then stop it.
    std::this_thread::sleep_for(std::chrono::milliseconds(700 + 300 * attempt));
    ::kill(pid, SIGTERM);
    const fs::path tmp = dir_ / "out.h5.partial";
    int status = 0;
    bool second = false;
    for (int i = 0; i < 200000 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) {
      if (!second && fs::exists(tmp)) {
        ::kill(pid, SIGTERM);
        second = true;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (::waitpid(pid, &status, WNOHANG) == 0) ::waitpid(pid, &status, 0);
    struct stat after {};
    ASSERT_EQ(::stat((dir_ / "out.h5").c_str(), &after), 0) << "the named file vanished";
    std::ifstream nowf(dir_ / "out.h5", std::ios::binary);
    const std::string now_bytes((std::istreambuf_iterator<char>(nowf)), std::istreambuf_iterator<char>());
    if (after.st_ino == before.st_ino && now_bytes == old_bytes) {
      ++kept_old;
    } else {
      // Partial (or complete, when the first SIGTERM came after the last
      // step): readable, with its status.
      const std::string st = attribute("out.h5", "/", "status");
      EXPECT_TRUE(st == "partial" || st == "complete") << "attempt " << attempt << ": '" << st << "'";
      ++partial;
    }
  }
  std::printf("[ sigterm ] kept the old file %d times, a valid partial %d times\n", kept_old, partial);
}

}  // namespace
