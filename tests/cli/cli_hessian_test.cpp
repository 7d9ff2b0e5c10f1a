// `costate sensitivity --hessian` end to end: the Hessian it writes to the
// HDF5 file (/sensitivity/hessian, names attribute) and prints with --json
// equals the library's ode::hessian_vector on the same problem, including
// the second-order chain rule through an initial value given as an
// expression of a parameter; `wrt` selects a sub-block; unsupported settings
// are rejected before anything is written. The test process initialises
// only Kokkos (it spawns `costate`, which initialises MPI itself).
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace costate::ode;

/// CLI (expression objective) vs library (compiled objective): the same
/// discrete objective and the same sweep; only the order of operations in
/// the objective's expression programs differs (e.g. (1-x)^2 by pow):
/// round-off ≈ 1e-14 relative; 1e-10 of max |H| leaves margin.
constexpr double kCliLibraryRelTol = 1e-10;

/// The objective of the input file below, written in C++:
///   ½((1−x)² + (1−y)²) at t = 5,  ∫ 0.01 x y dt,  data with noise 0.1, 0.2.
struct Objective {
  LeastSquares ls;
  std::vector<double> observation_times() const { return ls.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return ls.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(0.5 * ((1.0 - y[0]) * (1.0 - y[0]) + (1.0 - y[1]) * (1.0 - y[1])));
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(0.01 * y[0] * y[1]);
  }
};

const char* kCsv = "t,x,y\n1,1.2,0.9\n2,0.8,\n3,1.5,1.1\n4,0.7,0.6\n";
const char* kYaml =
    "model: lotka_volterra\n"
    "parameters: {alpha: 1.5, beta: 1.0, gamma: 3.0, delta: 1.0}\n"
    "initial_state: {x: \"0.5 + 0.25*alpha*alpha\", y: 1.0}\n"
    "time: {start: 0, end: 5}\n"
    "integrator: {method: rk4, dt: 0.01}\n"
    "objective:\n"
    "  terminal: \"0.5*((1-x)^2 + (1-y)^2)\"\n"
    "  integral: \"0.01*x*y\"\n"
    "  data: {file: obs.csv, noise: {x: 0.1, y: 0.2}}\n";

class CliHessianTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_cli_hessian_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "obs.csv") << kCsv;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  struct Result {
    int code = -1;
    std::string out, err;
  };
  Result run(const std::string& args) {
    const std::string cmd = "cd '" + dir_.string() + "' && '" COSTATE_EXE "' " + args +
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
  fs::path dir_;
};

/// The library's Hessian of the file's objective over all four parameters
/// (integrator options `opt`),
/// with y0_x = 0.5 + 0.25 α² by the chain rule:
///   H = H_pp + (∂y0/∂p)ᵀ H_{y0,p} … (through the direction (e_j, ∂y0/∂p e_j))
///       + λ0_x ∂²y0_x/∂α² e_α e_αᵀ.
Eigen::MatrixXd library_hessian(std::vector<double>* gradient,
                                const IntegratorOptions& opt = {.method = Method::RK4,
                                                                .dt = 0.01}) {
  const double alpha = 1.5;
  const Problem<LotkaVolterra> pr{LotkaVolterra{}, {0.5 + 0.25 * alpha * alpha, 1.0},
                                  {alpha, 1.0, 3.0, 1.0}, {0.0, 5.0}};
  Objective obj;
  obj.ls = LeastSquares{.times = {1, 2, 3, 4},
                        .data = {1.2, 0.9, 0.8, NAN, 1.5, 1.1, 0.7, 0.6},
                        .n_states = 2,
                        .weights = {100.0, 25.0}};
  const DiscreteAdjoint method{.checkpointing = Binomial{.snapshots = 6}};
  Eigen::MatrixXd H(4, 4);
  for (int j = 0; j < 4; ++j) {
    HessianDirection v{std::vector<double>(4, 0.0), {0.0, 0.0}};
    v.parameters[static_cast<std::size_t>(j)] = 1.0;
    if (j == 0) v.initial_state[0] = 0.5 * alpha;  // ∂y0_x/∂α
    const HessianVectorResult r = hessian_vector(pr, obj, v, method, opt);
    for (int i = 0; i < 4; ++i) H(i, j) = r.hv_wrt_parameters[static_cast<std::size_t>(i)];
    H(0, j) += 0.5 * alpha * r.hv_wrt_initial_state[0];
    if (j == 0) {
      H(0, 0) += 0.5 * r.gradient_wrt_initial_state[0];  // λ0_x ∂²y0_x/∂α²
      *gradient = r.gradient_wrt_parameters;
      (*gradient)[0] += 0.5 * alpha * r.gradient_wrt_initial_state[0];
    }
  }
  return H;
}

std::vector<double> read_hessian(const fs::path& file, std::vector<hsize_t>* dims,
                                 std::vector<std::string>* names) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << file;
  if (f < 0) return {};
  hid_t ds = H5Dopen2(f, "/sensitivity/hessian", H5P_DEFAULT);
  EXPECT_GE(ds, 0) << "no /sensitivity/hessian in " << file;
  std::vector<double> v;
  if (ds >= 0) {
    hid_t space = H5Dget_space(ds);
    dims->assign(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space)), 0);
    H5Sget_simple_extent_dims(space, dims->data(), nullptr);
    std::size_t n = 1;
    for (auto d : *dims) n *= d;
    v.resize(n);
    H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Sclose(space);
    hid_t a = H5Aopen(ds, "names", H5P_DEFAULT);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    std::vector<char*> s((*dims)[0], nullptr);
    H5Aread(a, type, s.data());
    for (char* c : s) {
      names->emplace_back(c ? c : "");
      H5free_memory(c);
    }
    H5Tclose(type);
    H5Aclose(a);
    H5Dclose(ds);
  }
  H5Fclose(f);
  return v;
}

TEST_F(CliHessianTest, FileAndJsonMatchTheLibrary) {
  const std::string in = write("lv.yaml", kYaml);
  const Result r = run("sensitivity '" + in + "' --hessian --json -q -o out.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::vector<double> grad;
  const Eigen::MatrixXd ref = library_hessian(&grad);
  const double scale = ref.cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 0.0);
  const std::vector<std::string> names{"alpha", "beta", "gamma", "delta"};
  EXPECT_EQ(j["hessian"]["names"].get<std::vector<std::string>>(), names);
  EXPECT_EQ(j["hessian"]["products"].get<int>(), 4);
  // The columns come from separate sweeps: symmetric to round-off.
  EXPECT_LE(j["hessian"]["asymmetry"].get<double>(), 1e-12);
  const auto M = j["hessian"]["matrix"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(M.size(), 4u);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      EXPECT_NEAR(M[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)], ref(a, b),
                  kCliLibraryRelTol * scale)
          << names[static_cast<std::size_t>(a)] << ", " << names[static_cast<std::size_t>(b)];
  for (std::size_t k = 0; k < 4; ++k)
    EXPECT_NEAR(j["gradient"][names[k]].get<double>(), grad[k],
                kCliLibraryRelTol * std::max(1.0, std::abs(grad[k])))
        << names[k];
  // The file holds the same numbers, bit for bit (JSON round-trips doubles).
  std::vector<hsize_t> dims;
  std::vector<std::string> file_names;
  const std::vector<double> h5 = read_hessian(dir_ / "out.h5", &dims, &file_names);
  ASSERT_EQ(dims, (std::vector<hsize_t>{4, 4}));
  EXPECT_EQ(file_names, names);
  for (std::size_t a = 0; a < 4; ++a)
    for (std::size_t b = 0; b < 4; ++b) EXPECT_EQ(h5[a * 4 + b], M[a][b]);
  // The terminal table shows it too.
  const Result t = run("sensitivity '" + in + "' --hessian -q");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("Hessian d2J/dp2 (4 Hessian-vector products"), std::string::npos) << t.out;
}

TEST_F(CliHessianTest, WrtSelectsASubBlock) {
  const std::string in =
      write("lv.yaml", std::string(kYaml) + "sensitivity: {wrt: [gamma, alpha]}\n");
  const Result r = run("sensitivity '" + in + "' --hessian --json -q -o sub.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::vector<double> grad;
  const Eigen::MatrixXd ref = library_hessian(&grad);
  const double scale = ref.cwiseAbs().maxCoeff();
  EXPECT_EQ(j["hessian"]["names"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"gamma", "alpha"}));
  const auto M = j["hessian"]["matrix"].get<std::vector<std::vector<double>>>();
  const int idx[2] = {2, 0};
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      EXPECT_NEAR(M[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)], ref(idx[a], idx[b]),
                  kCliLibraryRelTol * scale);
  EXPECT_EQ(j["hessian"]["products"].get<int>(), 2);
}

TEST_F(CliHessianTest, BdfAndSdirk3MatchTheLibrary) {
  // The adaptive implicit steppers: the CLI replays its gradient's steps
  // (and bdf's orders); the library chooses them by the same adaptive run.
  // The library's sdirk3/bdf Hessian–vector products are checked against
  // differences of gradients and the Taylor test in tests/ode/hessian_test.
  for (const std::string m : {"bdf", "sdirk3"}) {
    SCOPED_TRACE(m);
    std::string yaml = kYaml;
    const std::string rk4 = "integrator: {method: rk4, dt: 0.01}";
    yaml.replace(yaml.find(rk4), rk4.size(),
                 "integrator: {method: " + m + ", rtol: 1.0e-7, atol: 1.0e-9}");
    const std::string in = write("lv_" + m + ".yaml", yaml);
    const Result r = run("sensitivity '" + in + "' --hessian --json -q -o " + m + ".h5");
    ASSERT_EQ(r.code, 0) << r.err;
    const Json j = Json::parse(r.out);
    std::vector<double> grad;
    const Eigen::MatrixXd ref = library_hessian(
        &grad, {.method = m == "bdf" ? Method::Bdf : Method::Sdirk3, .rtol = 1e-7, .atol = 1e-9});
    const double scale = ref.cwiseAbs().maxCoeff();
    ASSERT_GT(scale, 0.0);
    EXPECT_EQ(j["hessian"]["products"].get<int>(), 4);
    // Columns from separate sweeps: symmetric to round-off (the library on
    // LV measured 4e-15 sdirk3, 7e-14 bdf); 1e-11 as in tests/ode.
    EXPECT_LE(j["hessian"]["asymmetry"].get<double>(), 1e-11);
    const auto M = j["hessian"]["matrix"].get<std::vector<std::vector<double>>>();
    ASSERT_EQ(M.size(), 4u);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        EXPECT_NEAR(M[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)], ref(a, b),
                    kCliLibraryRelTol * scale)
            << a << ", " << b;
  }
}

TEST_F(CliHessianTest, UnsupportedSettingsAreRejectedBeforeWriting) {
  const std::string in = write("lv.yaml", kYaml);
  struct Case {
    std::string set, message;
  };
  // The messages are the support table's (ode::supports): second order for
  // --hessian; a method that does not even give gradients with the file's
  // integrator is refused when the file is read.
  const std::vector<Case> cases{
      {"sensitivity.method=forward",
       "costate sensitivity --hessian: " +
           supports(SensitivityKind::Forward, Method::RK4, 2).message},
      {"sensitivity.method=continuous_adjoint",
       supports(SensitivityKind::ContinuousAdjoint, Method::RK4, 1).message},
      {"integrator.method=cvodes_bdf",
       "costate sensitivity --hessian: " +
           supports(SensitivityKind::DiscreteAdjoint, Method::CvodesBdf, 2).message},
  };
  for (const Case& c : cases) ASSERT_FALSE(c.message.empty()) << c.set;
  EXPECT_NE(cases[0].message.find("with integrator.method = rk4 use sensitivity.method = "
                                  "discrete_adjoint"),
            std::string::npos)
      << cases[0].message;
  EXPECT_NE(cases[2].message.find("discrete_adjoint supports integrator.method = euler, rk4, "
                                  "dopri5, backward_euler, crank_nicolson, sdirk3 or bdf"),
            std::string::npos)
      << cases[2].message;
  for (const Case& c : cases) {
    const Result r = run("sensitivity '" + in + "' --hessian -q -o no.h5 --set " + c.set);
    EXPECT_NE(r.code, 0) << c.set;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.set << ": " << r.err;
    EXPECT_NE(r.err.find("lv.yaml"), std::string::npos) << "the message names the file: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "no.h5")) << c.set;
  }
}

TEST_F(CliHessianTest, PdeInputsAreRejectedBeforeWriting) {
  const std::string in = std::string(COSTATE_EXAMPLES_DIR) + "/heat2d_kappa.yaml";
  const Result r = run("sensitivity '" + in + "' --hessian -q -o '" + (dir_ / "no.h5").string() + "'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--hessian is for ODE inputs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("heat2d_kappa.yaml"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "no.h5"));
}

TEST_F(CliHessianTest, CvodesAdjointAgreesWithTheDiscreteHessian) {
  // CVODES' continuous second-order adjoint (rtol 1e-10) against the
  // library's discrete Hessian of rk4 at dt = 0.01 (O(dt⁴) ≈ 1e-8 of the
  // exact one): both approximate the exact Hessian — measured 4.5e-8
  // relative (of max |H|); 1e-6 leaves margin. The initial value
  // 0.5 + 0.25 α² makes the CLI's directions reach y0 (v_y0 ≠ 0).
  constexpr double kCvodesVsRk4RelTol = 1e-6;
  // Columns from separate CVODES runs: symmetric to CVODES' error in each
  // (≈ 1e3 × rtol).
  constexpr double kCvodesSymmetryTol = 1e-6;
  const std::string in = write("lv.yaml", kYaml);
  const std::string cvodes =
      " --set integrator.method=cvodes_bdf --set integrator.rtol=1e-10"
      " --set integrator.atol=1e-12 --set sensitivity.method=cvodes_adjoint";
  const Result r = run("sensitivity '" + in + "' --hessian --json -q -o cv.h5" + cvodes);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::vector<double> grad;
  const Eigen::MatrixXd ref = library_hessian(&grad);
  const double scale = ref.cwiseAbs().maxCoeff();
  EXPECT_EQ(j["hessian"]["products"].get<int>(), 4);
  EXPECT_LE(j["hessian"]["asymmetry"].get<double>(), kCvodesSymmetryTol);
  const auto M = j["hessian"]["matrix"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(M.size(), 4u);
  double worst = 0.0;
  for (std::size_t a = 0; a < 4; ++a)
    for (std::size_t b = 0; b < 4; ++b)
      worst = std::max(worst, std::abs(M[a][b] - ref(static_cast<Eigen::Index>(a),
                                                      static_cast<Eigen::Index>(b))) / scale);
  std::printf("# CLI CVODES Hessian vs rk4 discrete Hessian: %.2e relative\n", worst);
  EXPECT_LT(worst, kCvodesVsRk4RelTol);
  // The terminal table names the method.
  const Result t = run("sensitivity '" + in + "' --hessian -q" + cvodes);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("CVODES second-order adjoint"), std::string::npos) << t.out;
  // cvodes_adjoint without a CVODES integrator: rejected before writing,
  // naming the file.
  const Result bad = run("sensitivity '" + in +
                         "' --hessian -q -o no.h5 --set sensitivity.method=cvodes_adjoint");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find(supports(SensitivityKind::CvodesAdjoint, Method::RK4, 1).message),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("cvodes_adjoint supports integrator.method = cvodes_bdf or cvodes_adams"),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("lv.yaml"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir_ / "no.h5"));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  return RUN_ALL_TESTS();
}
