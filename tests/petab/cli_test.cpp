// `costate sensitivity problem.yaml --json` on PEtab problems: the llh and
// chi2 of a test-suite case against its published solution, the gradient by
// parameter id against central differences of the command's own llh (the
// nominal values shifted in a copy of the parameter table), and a bad
// problem is an error that names the file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path petab_dir() {
  if (const char* env = std::getenv("COSTATE_PETAB_DIR")) return fs::path(env);
  return fs::path(COSTATE_PETAB_DIR);
}

/// A copy of test-suite case `name` in the system's temporary directory (not
/// the working directory: run from a source checkout, a copy there would be
/// committed along with the code, and the data is read from ../shared only).
fs::path copy_case(const std::string& name) {
  const fs::path to = fs::temp_directory_path() / ("costate_petab_cli_" + name);
  fs::remove_all(to);
  fs::copy(petab_dir() / "test-suite-v1" / name, to, fs::copy_options::recursive);
  return to;
}

Json run_json(const fs::path& dir, const std::string& yaml) {
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity " + yaml + " --json -q");
  EXPECT_EQ(r.code, 0) << r.err;
  return Json::parse(r.out.substr(r.out.find('{')));
}

// The suite's tolerance for llh and chi2.
constexpr double kSuiteTol = 1e-3;
// Central differences of llh (CVODES at 1e-10; the JSON has 17 digits):
// step 1e-4 on a linear-scale parameter, error O(h²) + O(1e-10/h).
constexpr double kStep = 1e-4;
constexpr double kCentralTol = 1e-5;

TEST(PetabCli, SensitivityMatchesTheSolutionAndCentralDifferences) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir()
                 << " (configure with -DCOSTATE_PETAB_DIR=<folder with test-suite-v1/>)";
  const fs::path dir = copy_case("0002");  // two conditions, NaN-keep overrides
  const Json j = run_json(dir, "_0002.yaml");
  EXPECT_EQ(j["status"], "ok");
  std::ifstream sol(dir / "_0002_solution.yaml");
  std::string line;
  double llh = NAN, chi2 = NAN;
  while (std::getline(sol, line)) {
    if (line.rfind("llh:", 0) == 0) llh = std::stod(line.substr(4));
    if (line.rfind("chi2:", 0) == 0) chi2 = std::stod(line.substr(5));
  }
  EXPECT_NEAR(j["llh"].get<double>(), llh, kSuiteTol);
  EXPECT_NEAR(j["chi2"].get<double>(), chi2, kSuiteTol);
  ASSERT_TRUE(j["gradient"].contains("k1"));
  // d llh / d k1 by central differences: k1's nominal value ± h in the table.
  std::ifstream in(dir / "_parameters.tsv");
  std::stringstream all;
  all << in.rdbuf();
  const std::string table = all.str();
  const std::string row = "k1\tlin\t0\t10\t0.8\t1";
  ASSERT_NE(table.find(row), std::string::npos) << table;
  auto llh_at = [&](double k1) {
    std::string t = table;
    std::ostringstream v;
    v.precision(17);
    v << "k1\tlin\t0\t10\t" << k1 << "\t1";
    t.replace(t.find(row), row.size(), v.str());
    std::ofstream(dir / "_parameters.tsv") << t;
    return run_json(dir, "_0002.yaml")["llh"].get<double>();
  };
  const double fd = (llh_at(0.8 + kStep) - llh_at(0.8 - kStep)) / (2.0 * kStep);
  EXPECT_NEAR(j["gradient"]["k1"].get<double>(), fd, kCentralTol * (1.0 + std::abs(fd)));
}

// `mpiexec -n 2 costate sensitivity` against the same command on one
// process: the experiments' terms are summed in one order on any number of
// ranks, and the JSON carries 17 significant digits, so the numbers agree
// to the bit; the bound is the round trip through JSON text.
constexpr double kRanksTol = 1e-15;

TEST(PetabCli, SensitivityOnTwoRanksMatchesOneRank) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0002");  // two conditions: one per rank
  const Json one = run_json(dir, "_0002.yaml");
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity _0002.yaml --json -q",
                                            std::string(COSTATE_MPIEXEC) + " -n 2 " + COSTATE_MPIEXEC_FLAGS);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json two = Json::parse(r.out.substr(r.out.find('{')));
  auto near = [](double a, double b) { return std::abs(a - b) <= kRanksTol * std::max(1.0, std::abs(b)); };
  EXPECT_TRUE(near(two["llh"].get<double>(), one["llh"].get<double>())) << two["llh"] << " vs " << one["llh"];
  EXPECT_TRUE(near(two["chi2"].get<double>(), one["chi2"].get<double>()));
  ASSERT_EQ(two["gradient"].size(), one["gradient"].size());
  for (const auto& [id, g] : one["gradient"].items())
    EXPECT_TRUE(near(two["gradient"][id].get<double>(), g.get<double>())) << id;
}

TEST(PetabCli, CalibrateMultistartWritesTheWaterfall) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0002");
  const auto r = costate::test::run_command(
      dir, COSTATE_EXE, "calibrate _0002.yaml --starts 3 --seed 4 --json -q -o fit.json");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out.substr(r.out.find('{')));
  std::ifstream sol(dir / "_0002_solution.yaml");
  std::string line;
  double llh = NAN;
  while (std::getline(sol, line))
    if (line.rfind("llh:", 0) == 0) llh = std::stod(line.substr(4));
  EXPECT_GE(j["llh"].get<double>(), llh - kSuiteTol);  // the published llh at the nominal values, or better
  ASSERT_EQ(j["waterfall"].size(), 3u);
  EXPECT_LE(j["waterfall"][0]["objective"].get<double>(), j["waterfall"][2]["objective"].get<double>());
  EXPECT_EQ(j["at_best"], 3);
  std::ifstream file(dir / "fit.json");
  ASSERT_TRUE(file.good());
  EXPECT_EQ(Json::parse(file)["waterfall"].size(), 3u);
}

TEST(PetabCli, CalibrateBadFlagsAreClearErrors) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0002");
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"calibrate _0002.yaml --starts 0", "--starts 0: expected a number of starts"},
      {"calibrate _0002.yaml --seed 3", "--seed needs --starts N"},
      {"calibrate _0002.yaml --starts 2 --seed -4", "--seed -4: expected a seed"},
      {"calibrate _0002.yaml --starts 2 -o fit.txt", "expected an output file ending in .h5 or .json"},
      {"calibrate _0002.yaml --set a=b", "--set is not supported for PEtab problems"},
  };
  for (const auto& c : cases) {
    const auto r = costate::test::run_command(dir, COSTATE_EXE, c.args);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
  // --starts on a costate input file (not a PEtab problem).
  std::ofstream(dir / "plain.yaml") << "model: lotka_volterra\n";
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "calibrate plain.yaml --starts 3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--starts and --seed are for PEtab problems"), std::string::npos) << r.err;
}

TEST(PetabCli, BadProblemNamesFileAndLine) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0001");
  std::ofstream(dir / "_measurements.tsv", std::ios::app) << "obs_b\tc0\t1\t0.3\n";
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity _0001.yaml --json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("_measurements.tsv:4:1 (observableId): unknown observable 'obs_b'; did you mean 'obs_a'?"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("\"status\":\"error\""), std::string::npos) << r.out;
}

}  // namespace
