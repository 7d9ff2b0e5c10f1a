// `costate calibrate` on PDE inputs (docs/pde_inverse.md), end to end: the
// example data/examples/heat2d_inversion.yaml reaches the noise level and
// the truth that generated its sensors; the same MAP under `mpiexec -n 2`
// and by L-BFGS; bad inputs give errors naming the file, line and key, on
// every rank, and write nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// χ² = 2Φ at the MAP point of N = 49 sensors: E[χ²] = N − p (p: the
// directions the data determine, ≤ N/2 here), standard deviation √(2N).
constexpr double kChi2Lower = 0.5;
constexpr double kChi2Sigmas = 4.0;
// The L² distance of the MAP log κ to the log κ that generated the data:
// 0.038 seen; the prior alone (its mean) is 0.29 away.
constexpr double kDistanceToTruth = 0.08;
// The same Newton-CG on 2 ranks (block-Jacobi instead of ILU in the PDE
// and prior solves, converged to rtol 1e-14 / 1e-12): J agrees to ~1e-14.
constexpr double kRankAgreement = 1e-9;
// L-BFGS and Newton-CG both to ‖g‖ ≤ 1e-6 ‖g0‖: J agrees to ~6e-11
// relative (J is flat at the minimum: quadratic in the error of m).
constexpr double kLbfgsAgreement = 1e-7;

struct Result {
  int code = -1;
  std::string out, err;
};

class PdeCalibrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_pde_calibrate_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Result run(const std::string& args, const std::string& prefix = "") {
    const std::string cmd = "cd '" + dir_.string() + "' && " + prefix + " '" COSTATE_EXE "' " + args +
                            " > stdout.txt 2> stderr.txt < /dev/null";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "stdout.txt");
    r.err = slurp(dir_ / "stderr.txt");
    return r;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  /// The example with its sensor file copied next to it (so that edits
  /// resolve the sensors the same way).
  std::string example(const std::string& extra = "") {
    const std::string ex = COSTATE_EXAMPLES_DIR;
    fs::copy_file(ex + "/heat2d_inversion_sensors.csv", dir_ / "heat2d_inversion_sensors.csv",
                  fs::copy_options::overwrite_existing);
    return write("inv.yaml", slurp(ex + "/heat2d_inversion.yaml") + extra);
  }
  fs::path dir_;
};

TEST_F(PdeCalibrateTest, ExampleReachesTheNoiseLevelAndTheTruth) {
  const Result r = run("calibrate '" + std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml' --json -q -o map.h5");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  const double n = j["observations"].get<double>(), chi2 = j["chi2"].get<double>();
  EXPECT_EQ(n, 49.0);
  EXPECT_GT(chi2, kChi2Lower * n);
  EXPECT_LT(chi2, n + kChi2Sigmas * std::sqrt(2.0 * n));
  EXPECT_LT(j["distance_to_reference"].get<double>(), kDistanceToTruth);
  const Json& s = j["pde_solves"];
  EXPECT_EQ(s["total"].get<long>(), s["forward"].get<long>() + s["adjoint"].get<long>() +
                                        s["incremental_forward"].get<long>() + s["incremental_adjoint"].get<long>());
  EXPECT_EQ(s["incremental_forward"].get<long>(), j["cg_iterations"].get<long>());
  EXPECT_EQ(s["adjoint"].get<long>(), static_cast<long>(j["iterations"].size()));
  EXPECT_TRUE(fs::exists(dir_ / "map.h5"));
  EXPECT_TRUE(fs::exists(dir_ / "map.xmf"));
  // The text report: the table's header and the summary.
  const Result t = run("calibrate '" + std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml' -q");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("objective         misfit          prior          |g|"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("newton_cg: converged"), std::string::npos) << t.out;
}

TEST_F(PdeCalibrateTest, MpiAndLbfgsGiveTheSameMap) {
  const std::string in = std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml";
  const Result a = run("calibrate '" + in + "' --json -q");
  ASSERT_EQ(a.code, 0) << a.err;
  const Result b = run("calibrate '" + in + "' --json -q",
                       std::string(COSTATE_MPIEXEC) + " -n 2 " + COSTATE_MPIEXEC_FLAGS);
  ASSERT_EQ(b.code, 0) << b.err;
  // L-BFGS (unpreconditioned) needs ~800 iterations on the example's 32²
  // grid: compare on 16² (~150), both to gradient_rtol 1e-6.
  const std::string small = " --json -q --set 'pde.grid.n=[16, 16]' --set calibration.optimizer.gradient_rtol=1e-6";
  const Result c = run("calibrate '" + in + "'" + small +
                       " --set calibration.optimizer.method=lbfgs --set calibration.optimizer.max_iterations=1000");
  ASSERT_EQ(c.code, 0) << c.err;
  const Result d = run("calibrate '" + in + "'" + small);
  ASSERT_EQ(d.code, 0) << d.err;
  const Json ja = Json::parse(a.out), jb = Json::parse(b.out), jc = Json::parse(c.out), jd = Json::parse(d.out);
  const double J = ja["objective"].get<double>(), Js = jd["objective"].get<double>();
  EXPECT_NEAR(jb["objective"].get<double>(), J, kRankAgreement * J);
  EXPECT_NEAR(jc["objective"].get<double>(), Js, kLbfgsAgreement * Js);
  EXPECT_EQ(jc["method"], "lbfgs");
  std::printf("32x32 Newton-CG: %ld PDE solves, %.2f s (2 ranks: %.2f s); 16x16 Newton-CG %ld, L-BFGS %ld PDE solves\n",
              ja["pde_solves"]["total"].get<long>(), ja["seconds"].get<double>(), jb["seconds"].get<double>(),
              jd["pde_solves"]["total"].get<long>(), jc["pde_solves"]["total"].get<long>());
}

TEST_F(PdeCalibrateTest, BadInputsNameTheFileLineAndKey) {
  struct Case {
    std::string set, fragment;
  };
  const Case cases[] = {
      {"calibration.field=kapa", "--set calibration.field=kapa: calibration.field: 'kapa' is not a parameter "
                                 "field; did you mean 'kappa'?"},
      {"calibration.prior.gamma=0", "calibration.prior.gamma: must be > 0 for the bilaplacian prior, got 0"},
      {"calibration.prior.kind=matern", "expected l2, h1 or bilaplacian"},
      {"calibration.optimizer.method=bfgs", "expected newton_cg or lbfgs"},
      {"calibration.sensors.field=v", "'v' is not a field"},
      {"calibration.sensors.file=missing.csv", "missing.csv: cannot open the sensor file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.set);
    const Result r = run("calibrate '" + example() + "' -q -o no.h5 --set " + c.set);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "no.h5"));
  }
  // An unknown key, with the nearest valid one.
  const std::string typo = write("typo.yaml", slurp(example()) + "");
  {
    std::string text = slurp(typo);
    text.replace(text.find("  log: true"), 11, "  logg: true");
    write("typo.yaml", text);
    const Result r = run("calibrate typo.yaml -q");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("typo.yaml:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("logg"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'log'"), std::string::npos) << r.err;
    // A field name in the file: file:line:column.
    text = slurp(typo);
    text.replace(text.find("  logg: true"), 12, "  log: true");
    text.replace(text.find("  field: kappa"), 14, "  field: kapa");
    write("typo.yaml", text);
    const Result f = run("calibrate typo.yaml -q");
    EXPECT_EQ(f.code, 1);
    EXPECT_NE(f.err.find("typo.yaml:32:10: calibration.field: 'kapa' is not a parameter field"), std::string::npos)
        << f.err;
  }
  // A sensor outside the domain and one before the end of the run, under
  // mpiexec: the error names the CSV row, every rank ends (no hang).
  write("heat2d_inversion_sensors.csv", "x,y,t,value,sigma\n0.5,0.5,0.2,0.1,0.01\n0.5,1.5,0.2,0.1,0.01\n");
  const std::string in = write("inv.yaml", slurp(std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml"));
  const Result out = run("calibrate '" + in + "' -q", std::string(COSTATE_MPIEXEC) + " -n 2 " + COSTATE_MPIEXEC_FLAGS);
  EXPECT_NE(out.code, 0);
  EXPECT_NE(out.err.find("heat2d_inversion_sensors.csv:3: sensor y = 1.5 is outside the domain [0, 1]"),
            std::string::npos)
      << out.err;
  write("heat2d_inversion_sensors.csv", "x,y,t,value,sigma\n0.5,0.5,0.1,0.1,0.01\n");
  const Result early = run("calibrate '" + in + "' -q");
  EXPECT_EQ(early.code, 1);
  EXPECT_NE(early.err.find("heat2d_inversion_sensors.csv:2: time t = 0.1 is before the end of the run"),
            std::string::npos)
      << early.err;
  write("heat2d_inversion_sensors.csv", "x,y,t,value\n0.5,0.5,0.2,0.1\n");
  const Result nosigma = run("calibrate '" + in + "' -q");
  EXPECT_EQ(nosigma.code, 1);
  EXPECT_NE(nosigma.err.find("no 'sigma' column"), std::string::npos) << nosigma.err;
  EXPECT_EQ(run("calibrate '" + in + "' -q --set calibration.sensors.sigma=0.01").code, 0);
}

}  // namespace
