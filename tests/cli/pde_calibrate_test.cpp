// `costate calibrate` on PDE inputs (docs/pde_inverse.md), end to end: the
// example data/examples/heat2d_inversion.yaml reaches the noise level and
// the truth that generated its sensors; the same MAP under `mpiexec -n 2`
// and by L-BFGS; bad inputs give errors naming the file, line and key, on
// every rank, and write nothing; the Laplace posterior (calibration.posterior)
// in the table, the JSON and the HDF5 file, on 1 and 2 ranks.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

// The posterior's eigenvalues at the MAP points of 1 and 2 ranks (which
// agree to ~1e-12): ~1e-11 relative expected, 1e-8 asserted.
constexpr double kEigenRankAgreement = 1e-8;
// HDF5 holds the doubles the JSON prints (nlohmann: round-trip precision).
constexpr double kRoundTrip = 1e-15;

/// /arrays/NAME or /fields/NAME/NAME of an HDF5 file; empty if absent.
std::vector<double> read_h5(const std::string& file, const std::string& path) {
  std::vector<double> v;
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // absent datasets are expected
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f >= 0) {
    const hid_t ds = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
    if (ds >= 0) {
      const hid_t sp = H5Dget_space(ds);
      v.resize(static_cast<std::size_t>(H5Sget_simple_extent_npoints(sp)));
      if (!v.empty() && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0) v.clear();
      H5Sclose(sp);
      H5Dclose(ds);
    }
    H5Fclose(f);
  }
  H5Eset_auto2(H5E_DEFAULT, func, data);
  return v;
}

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
  // The posterior (if the example asks for one): 1 linearization and
  // 2(k + p) Hessian actions, in the totals.
  long post_incremental = 0, post_adjoint = 0;
  if (j.contains("posterior")) {
    const Json& p = j["posterior"];
    post_incremental = p["pde_solves"]["incremental_forward"].get<long>();
    post_adjoint = p["pde_solves"]["adjoint"].get<long>();
    EXPECT_EQ(post_incremental, 2 * (p["rank"].get<long>() + p["oversampling"].get<long>()));
    EXPECT_EQ(post_adjoint, 1);
    EXPECT_EQ(j["eigenvalues"].size(), p["rank"].get<std::size_t>());
  }
  EXPECT_EQ(s["incremental_forward"].get<long>(), j["cg_iterations"].get<long>() + post_incremental);
  EXPECT_EQ(s["adjoint"].get<long>(), static_cast<long>(j["iterations"].size()) + post_adjoint);
  EXPECT_TRUE(fs::exists(dir_ / "map.h5"));
  EXPECT_TRUE(fs::exists(dir_ / "map.xmf"));
  // The text report: the table's header and the summary.
  const Result t = run("calibrate '" + std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml' -q");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("objective         misfit          prior          |g|"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("newton_cg: converged"), std::string::npos) << t.out;
  // The example's posterior: the spectrum table and the totals.
  EXPECT_NE(t.out.find("Laplace posterior at the MAP point (Gauss-Newton Hessian; rank 10, oversampling 10, seed 1)"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("eigenvalue   lambda/(1+lambda)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("PDE solves in all"), std::string::npos) << t.out;
}

// `pc_type: automatic` takes PETSc's algebraic multigrid from 128² unknowns
// (src/io/input.cpp, kMultigridUnknowns). Both preconditioners solve to the
// same ksp_rtol (1e-14), so the answers may differ only by what that leaves:
// measured 1.3e-14 relative on the gradient and 4e-16 on J at 128²;
// kPreconditionerAgreement leaves room for other machines' rounding.
constexpr double kPreconditionerAgreement = 1e-10;

TEST_F(PdeCalibrateTest, MultigridAndIluGiveTheSameGradientAndMap) {
  const std::string ex = std::string(COSTATE_EXAMPLES_DIR);
  const std::string grid = " --json -q --set 'pde.grid.n=[128, 128]'";
  const Result a = run("sensitivity '" + ex + "/heat2d_kappa.yaml'" + grid);  // automatic: gamg
  const Result b = run("sensitivity '" + ex + "/heat2d_kappa.yaml'" + grid + " --set integrator.pc_type=default");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const Json ja = Json::parse(a.out), jb = Json::parse(b.out);
  const double J = jb["objective"].get<double>();
  EXPECT_NEAR(ja["objective"].get<double>(), J, kPreconditionerAgreement * std::abs(J));
  for (const auto& [name, g] : jb["gradient"].items())
    EXPECT_NEAR(ja["gradient"][name].get<double>(), g.get<double>(), kPreconditionerAgreement * std::abs(g.get<double>()))
        << name;
  for (const char* stat : {"norm", "sum_over_cells", "min", "max"}) {
    const double g = jb["gradient_fields"]["kappa"][stat].get<double>();
    EXPECT_NEAR(ja["gradient_fields"]["kappa"][stat].get<double>(), g, kPreconditionerAgreement * std::abs(g)) << stat;
  }
  // automatic did take the multigrid: ILU needs more than twice its Krylov
  // iterations at 128² (measured 1120 vs 457 forward, 640 vs 260 adjoint).
  EXPECT_LT(2 * ja["krylov_iterations"].get<long>(), jb["krylov_iterations"].get<long>());
  EXPECT_LT(2 * ja["adjoint_krylov_iterations"].get<long>(), jb["adjoint_krylov_iterations"].get<long>());
  // The inversion (prior and θ solves by gamg, named) finds the same MAP as
  // the example's default (32²: PETSc's default preconditioner).
  const std::string in = " '" + ex + "/heat2d_inversion.yaml' --json -q --set calibration.posterior=null";
  const Result c = run("calibrate" + in);
  const Result d = run("calibrate" + in + " --set integrator.pc_type=gamg --set calibration.prior.pc_type=gamg");
  ASSERT_EQ(c.code, 0) << c.err;
  ASSERT_EQ(d.code, 0) << d.err;
  const double Jc = Json::parse(c.out)["objective"].get<double>();
  EXPECT_NEAR(Json::parse(d.out)["objective"].get<double>(), Jc, kPreconditionerAgreement * Jc);
}

TEST_F(PdeCalibrateTest, MpiAndLbfgsGiveTheSameMap) {
  const std::string in = std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml";
  // The MAP point only (the posterior is tested below, on 16²).
  const Result a = run("calibrate '" + in + "' --json -q --set calibration.posterior=null");
  ASSERT_EQ(a.code, 0) << a.err;
  const Result b = run("calibrate '" + in + "' --json -q --set calibration.posterior=null",
                       std::string(COSTATE_MPIEXEC) + " -n 2 " + COSTATE_MPIEXEC_FLAGS);
  ASSERT_EQ(b.code, 0) << b.err;
  // L-BFGS (unpreconditioned) needs ~800 iterations on the example's 32²
  // grid: compare on 16² (~150), both to gradient_rtol 1e-6.
  const std::string small = " --json -q --set 'pde.grid.n=[16, 16]' --set calibration.optimizer.gradient_rtol=1e-6"
                            " --set calibration.posterior=null";
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

// `integrator.method: rk4` in costate calibrate (pde::Misfit over the
// explicit integrator): the example on 16² with dt = 0.005 (under rk4's
// limit ~0.0075 there; 40 steps, T = 0.2) against Crank–Nicolson with the
// same steps. Both MAPs fit the same data; they differ by the time
// discretization (CN's O(dt²)): J measured 2.7e-5 relative apart, the
// posterior's leading eigenvalue (2401.2) 4.2e-5; asserted 2e-4 and 4e-4.
constexpr double kExplicitObjective = 2e-4;
constexpr double kExplicitEigenvalue = 4e-4;
// The rk4 MAP's L² distance to the field that generated the sensors (on
// 32², by backward Euler): 0.038 at 32² (kDistanceToTruth = 0.08); on
// 16² measured 0.0447 (CN the same to 4 digits); asserted kDistanceToTruth.

TEST_F(PdeCalibrateTest, Rk4CalibrationMatchesCrankNicolson) {
  const std::string in = std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_inversion.yaml";
  const std::string small = " --json -q --set 'pde.grid.n=[16, 16]' --set integrator.dt=0.005"
                            " --set integrator.steps=40 --set calibration.posterior.rank=4"
                            " --set calibration.posterior.oversampling=4 --set calibration.posterior.samples=0";
  const Result rk = run("calibrate '" + in + "'" + small + " --set integrator.method=rk4 -o rk.h5");
  ASSERT_EQ(rk.code, 0) << rk.err << rk.out;
  const Result cn = run("calibrate '" + in + "'" + small + " --set integrator.method=crank_nicolson");
  ASSERT_EQ(cn.code, 0) << cn.err << cn.out;
  EXPECT_EQ(rk.err.find("warning"), std::string::npos) << rk.err;
  const Json a = Json::parse(rk.out), b = Json::parse(cn.out);
  EXPECT_EQ(a["status"], "ok");
  const double Ja = a["objective"].get<double>(), Jb = b["objective"].get<double>();
  const double ea = a["eigenvalues"][0].get<double>(), eb = b["eigenvalues"][0].get<double>();
  std::printf("rk4 J = %.10g, CN J = %.10g (rel %.2e); lambda_1 %.8g vs %.8g (rel %.2e); solves %ld vs %ld; "
              "distance %.4g vs %.4g\n",
              Ja, Jb, std::abs(Ja - Jb) / Jb, ea, eb, std::abs(ea - eb) / eb, a["pde_solves"]["total"].get<long>(),
              b["pde_solves"]["total"].get<long>(), a["distance_to_reference"].get<double>(),
              b["distance_to_reference"].get<double>());
  EXPECT_NEAR(Ja, Jb, kExplicitObjective * Jb);
  EXPECT_NEAR(ea, eb, kExplicitEigenvalue * eb);
  EXPECT_LT(a["distance_to_reference"].get<double>(), kDistanceToTruth);
  EXPECT_TRUE(fs::exists(dir_ / "rk.h5"));
}

TEST_F(PdeCalibrateTest, PosteriorInTheTableTheJsonAndTheHdf5) {
  const std::string in = example();
  const std::string set =
      " --set 'pde.grid.n=[16, 16]' --set calibration.posterior.rank=6 --set calibration.posterior.oversampling=4"
      " --set calibration.posterior.samples=2 --set calibration.posterior.seed=3";
  const Result r = run("calibrate '" + in + "' --json -q -o post.h5" + set);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const Json j = Json::parse(r.out);
  const std::vector<double> lambda = j["eigenvalues"].get<std::vector<double>>();
  ASSERT_EQ(lambda.size(), 6u);
  double effective = 0.0;
  for (std::size_t i = 0; i < lambda.size(); ++i) {
    EXPECT_GT(lambda[i], 0.0);  // Gauss–Newton: positive semi-definite
    if (i > 0) {
      EXPECT_LE(lambda[i], lambda[i - 1]);
    }
    effective += lambda[i] / (1.0 + lambda[i]);
  }
  const Json& p = j["posterior"];
  EXPECT_NEAR(p["effective_parameters"].get<double>(), effective, 1e-12 * effective);
  EXPECT_EQ(p["hessian"], "gauss_newton");
  EXPECT_EQ(p["samples"].get<int>(), 2);
  EXPECT_EQ(p["pde_solves"]["total"].get<long>(), 2 + 4 * (6 + 4));
  EXPECT_EQ(p["hessian_actions"].get<long>(), 2 * (6 + 4));
  EXPECT_EQ(j["pde_solves"]["incremental_forward"].get<long>(), j["cg_iterations"].get<long>() + 2 * (6 + 4));
  const double rmin = p["variance_ratio"]["min"].get<double>(), rmax = p["variance_ratio"]["max"].get<double>();
  EXPECT_GT(rmin, 0.0);
  EXPECT_LT(rmin, p["variance_ratio"]["mean"].get<double>());
  EXPECT_LE(rmax, 1.0);
  // The HDF5 file: the spectrum as /arrays/eigenvalues, the variance fields
  // (0 < posterior ≤ prior in every cell), k eigenvectors and the samples.
  const std::string h5 = (dir_ / "post.h5").string();
  const std::vector<double> ev = read_h5(h5, "/arrays/eigenvalues");
  ASSERT_EQ(ev.size(), lambda.size());
  for (std::size_t i = 0; i < ev.size(); ++i) EXPECT_NEAR(ev[i], lambda[i], kRoundTrip * lambda[i]);
  const std::vector<double> var = read_h5(h5, "/fields/m_variance/m_variance");
  const std::vector<double> prior = read_h5(h5, "/fields/m_prior_variance/m_prior_variance");
  ASSERT_EQ(var.size(), 256u);
  ASSERT_EQ(prior.size(), 256u);
  double lowest = 1.0;
  for (std::size_t i = 0; i < var.size(); ++i) {
    EXPECT_GT(var[i], 0.0) << i;
    EXPECT_LE(var[i], prior[i]) << i;
    lowest = std::min(lowest, var[i] / prior[i]);
  }
  EXPECT_NEAR(lowest, rmin, 1e-12);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(read_h5(h5, "/fields/eigenvector_" + std::to_string(i) + "/eigenvector_" + std::to_string(i)).size(), 256u)
        << i;
  EXPECT_TRUE(read_h5(h5, "/fields/eigenvector_6/eigenvector_6").empty());
  const std::vector<double> s0 = read_h5(h5, "/fields/sample_0/sample_0"), s1 = read_h5(h5, "/fields/sample_1/sample_1");
  ASSERT_EQ(s0.size(), 256u);
  ASSERT_EQ(s1.size(), 256u);
  EXPECT_NE(s0, s1);
  EXPECT_TRUE(read_h5(h5, "/fields/sample_2/sample_2").empty());
  const std::string xmf = slurp(dir_ / "post.xmf");
  for (const char* name : {"m_variance", "m_prior_variance", "eigenvector_5", "sample_1"})
    EXPECT_NE(xmf.find(name), std::string::npos) << name;
  // The same spectrum on 2 ranks (the table: in the example's test above).
  const Result b = run("calibrate '" + in + "' --json -q" + set,
                       std::string(COSTATE_MPIEXEC) + " -n 2 " + COSTATE_MPIEXEC_FLAGS);
  ASSERT_EQ(b.code, 0) << b.err;
  const std::vector<double> lb = Json::parse(b.out)["eigenvalues"].get<std::vector<double>>();
  ASSERT_EQ(lb.size(), lambda.size());
  for (std::size_t i = 0; i < lb.size(); ++i) EXPECT_NEAR(lb[i], lambda[i], kEigenRankAgreement * lambda[i]) << i;
  std::printf("16x16 posterior (k = 6, p = 4): lambda_1 = %.4e, lambda_6 = %.4e, posterior/prior variance min %.4f "
              "mean %.4f; %ld PDE solves (MAP + posterior), %.2f s\n",
              lambda[0], lambda[5], rmin, p["variance_ratio"]["mean"].get<double>(),
              j["pde_solves"]["total"].get<long>(), p["seconds"].get<double>());
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
      {"calibration.posterior.rnk=3", "did you mean 'rank'"},
      {"calibration.posterior.rank=2000 --set calibration.posterior.oversampling=10", "calibration.posterior.rank: rank + oversampling = 2010 exceeds the 1024 "
                                          "unknowns of the field"},
      {"calibration.posterior.rank=0", "calibration.posterior.rank: must lie in [1, 100000], got 0"},
      {"calibration.posterior.hessian=newton", "calibration.posterior.hessian: expected gauss_newton or exact"},
      {"calibration.posterior.samples=2 --set calibration.prior.kind=h1",
       "calibration.posterior.samples: posterior samples need the bilaplacian prior"},
      {"calibration.prior.pc_type=amg", "calibration.prior.pc_type: unknown preconditioner 'amg'; did you mean 'gamg'?"},
      {"integrator.pc_type=ILU", "integrator.pc_type: unknown preconditioner 'ILU'"},
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
    EXPECT_NE(f.err.find("typo.yaml:36:10: calibration.field: 'kapa' is not a parameter field"), std::string::npos)
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
  EXPECT_EQ(run("calibrate '" + in + "' -q --set calibration.sensors.sigma=0.01 --set calibration.posterior=null").code, 0);
}

}  // namespace
