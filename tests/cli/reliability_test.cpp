// Reliability of the `costate` command line (issue 18): a model without
// parameters through every command.
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Result {
  int code = -1;
  std::string out, err;
  double seconds = 0.0;
};

class ReliabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_reliability_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  Result run(const std::string& args, const std::string& env = "") {
    const std::string cmd = "cd '" + dir_.string() + "' && " + env + " timeout -s KILL 120 '" COSTATE_EXE "' " +
                            args + " > stdout.txt 2> stderr.txt < /dev/null";
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "stdout.txt");
    r.err = slurp(dir_ / "stderr.txt");
    fs::remove(dir_ / "stdout.txt");
    fs::remove(dir_ / "stderr.txt");
    return r;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  fs::path dir_;
};

std::string read_status(const fs::path& path) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return "(unreadable)";
  std::string out;
  if (H5Aexists(f, "status") > 0) {
    const hid_t a = H5Aopen(f, "status", H5P_DEFAULT);
    const hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5T_CSET_UTF8);
    char* v = nullptr;
    if (H5Aread(a, mem, &v) >= 0 && v != nullptr) {
      out = v;
      H5free_memory(v);
    }
    H5Tclose(mem);
    H5Aclose(a);
  }
  H5Fclose(f);
  return out;
}

/// Number of elements of a dataset (or of an attribute of it when `attr`).
long long element_count(const fs::path& path, const char* dataset, const char* attr = nullptr) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  long long n = -1;
  if (H5Lexists(f, dataset, H5P_DEFAULT) > 0) {
    const hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    hid_t s = -1, a = -1;
    if (attr == nullptr) {
      s = H5Dget_space(d);
    } else if (H5Aexists(d, attr) > 0) {
      a = H5Aopen(d, attr, H5P_DEFAULT);
      s = H5Aget_space(a);
    }
    if (s >= 0) {
      n = H5Sget_simple_extent_npoints(s);
      H5Sclose(s);
    }
    if (a >= 0) H5Aclose(a);
    H5Dclose(d);
  }
  H5Fclose(f);
  return n;
}

const char* const kNoParameters =
    "model: {states: [x], equations: {x: \"-x\"}}\n"
    "initial_state: {x: 1}\n"
    "time: {start: 0, end: 1}\n";

// ------------------------------------------------------ no parameters

TEST_F(ReliabilityTest, ModelWithoutParametersWritesCompleteOutputs) {
  write("np.yaml", std::string(kNoParameters) + "objective: {terminal: \"x^2\"}\n");
  const Result run_r = run("run np.yaml -q -o run.h5 --json");
  ASSERT_EQ(run_r.code, 0) << run_r.out << run_r.err;
  // x(1) = e^{-1}; dopri5 at its default rtol 1e-6.
  constexpr double kDopri5DefaultTol = 1e-6;
  EXPECT_NEAR(Json::parse(run_r.out)["final_state"][0].get<double>(), std::exp(-1.0), kDopri5DefaultTol);
  EXPECT_EQ(read_status(dir_ / "run.h5"), "complete");
  EXPECT_EQ(element_count(dir_ / "run.h5", "/parameters"), 0);
  EXPECT_EQ(element_count(dir_ / "run.h5", "/parameters", "names"), 0);
  EXPECT_EQ(element_count(dir_ / "run.h5", "/parameter_names"), 0);
  EXPECT_EQ(element_count(dir_ / "run.h5", "/state"), 2);  // t = 0 and 1, one state

  // J = x(1)² = e^{-2}; dJ/dx(0) = 2 e^{-2} (x(1) = x(0) e^{-1}).
  for (const char* method : {"discrete_adjoint", "forward", "continuous_adjoint"}) {
    SCOPED_TRACE(method);
    const Result s = run(std::string("sensitivity np.yaml -q -o s.h5 --json --set sensitivity.method=") + method);
    ASSERT_EQ(s.code, 0) << s.out << s.err;
    const Json j = Json::parse(s.out);
    EXPECT_TRUE(j["gradient"].empty());
    EXPECT_NEAR(j["gradient_initial_state"]["x"].get<double>(), 2.0 * std::exp(-2.0), 10 * kDopri5DefaultTol);
    EXPECT_EQ(read_status(dir_ / "s.h5"), "complete");
    EXPECT_EQ(element_count(dir_ / "s.h5", "/sensitivity/gradient"), 0);
    EXPECT_EQ(element_count(dir_ / "s.h5", "/sensitivity/gradient_initial_state"), 1);
  }
  const Result g = run("gradcheck np.yaml -q --json");
  EXPECT_EQ(g.code, 0) << g.out << g.err;

  // Text output names the empty list instead of printing "parameters )".
  const Result banner = run("sensitivity np.yaml -o s2.h5");
  EXPECT_NE(banner.err.find("parameters none"), std::string::npos) << banner.err;

  // Calibrating the initial state alone.
  write("d.csv", "t,x\n0.5,0.6\n1,0.37\n");
  write("cal.yaml", std::string(kNoParameters) +
                        "calibration:\n  initial_state: {x: {lower: 0, upper: 5}}\n"
                        "  data: {file: d.csv, noise: 0.1}\n");
  const Result c = run("calibrate cal.yaml -q --json -o c.h5");
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_EQ(read_status(dir_ / "c.h5"), "complete");
}

TEST_F(ReliabilityTest, NothingToDifferentiateIsRefusedClearly) {
  // Every initial value an expression and no parameters: gradcheck has no
  // coordinate; --hessian without parameters has no matrix.
  write("e.yaml", "model: {states: [x], equations: {x: \"-x\"}}\n"
                  "initial_state: {x: \"1 + 0*t\"}\ntime: {end: 1}\nobjective: {terminal: \"x^2\"}\n");
  const Result g = run("gradcheck e.yaml -q --json");
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(Json::parse(g.out)["message"].get<std::string>().find("nothing to check"), std::string::npos) << g.out;
  write("h.yaml", std::string(kNoParameters) + "objective: {terminal: \"x^2\"}\n");
  const Result h = run("sensitivity h.yaml -q --json --hessian -o h.h5");
  EXPECT_EQ(h.code, 1);
  EXPECT_NE(h.out.find("sensitivity.wrt"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("no parameters"), std::string::npos) << h.out;
  EXPECT_FALSE(fs::exists(dir_ / "h.h5"));
}

}  // namespace
