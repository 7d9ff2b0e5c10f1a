// `costate sensitivity problem.yaml --json` on PEtab problems: the llh and
// chi2 of a test-suite case against its published solution, the gradient by
// parameter id against central differences of the command's own llh (the
// nominal values shifted in a copy of the parameter table), and a bad
// problem is an error that names the file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>
#include <iostream>

#include "petab/petab_data.hpp"
#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using costate::test::petab_dir;

/// A copy of test-suite case `name` in the system's temporary directory (not
/// the working directory: run from a source checkout, a copy there would be
/// committed along with the code, and the data is read from ../shared only).
fs::path copy_case(const std::string& name) {
  const fs::path to = costate::test::scratch_dir("costate_petab_cli_" + name);
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
  const Json one = run_json(dir, "_0002.yaml --fim");
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity _0002.yaml --json -q --fim",
                                            std::string(COSTATE_MPIEXEC) + " -n 2 " + COSTATE_MPIEXEC_FLAGS);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json two = Json::parse(r.out.substr(r.out.find('{')));
  auto near = [](double a, double b) { return std::abs(a - b) <= kRanksTol * std::max(1.0, std::abs(b)); };
  EXPECT_TRUE(near(two["llh"].get<double>(), one["llh"].get<double>())) << two["llh"] << " vs " << one["llh"];
  EXPECT_TRUE(near(two["chi2"].get<double>(), one["chi2"].get<double>()));
  ASSERT_EQ(two["gradient"].size(), one["gradient"].size());
  for (const auto& [id, g] : one["gradient"].items())
    EXPECT_TRUE(near(two["gradient"][id].get<double>(), g.get<double>())) << id;
  const auto f1 = one["fim"].get<std::vector<std::vector<double>>>();
  const auto f2 = two["fim"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(f2.size(), f1.size());
  for (std::size_t a = 0; a < f1.size(); ++a)
    for (std::size_t b = 0; b < f1[a].size(); ++b) EXPECT_TRUE(near(f2[a][b], f1[a][b])) << "fim " << a << ", " << b;
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
      {"calibrate _0002.yaml --set a=b", "--set a=b: unknown key 'a' for a PEtab problem"},
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
  EXPECT_NE(r.err.find("--starts and --sampling are for PEtab problems"), std::string::npos) << r.err;
}

/// A TSV table: header and rows of cells.
std::vector<std::vector<std::string>> read_tsv(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream s(line);
    std::string c;
    while (std::getline(s, c, '\t')) cells.push_back(c);
    if (line.back() == '\t') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

long column_of(const std::vector<std::string>& header, const std::string& name) {
  const auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<long>(it - header.begin());
}

fs::path scratch(const std::string& name) {
  return costate::test::scratch_dir("costate_petab_cli_" + name);
}

// `costate run problem.yaml -o sims.tsv` on every test-suite case: the
// simulation table is the measurement table with `simulation` for
// `measurement` (every other cell as read), its values within the suite's
// tol_simulations (1e-3) of the case's _simulations.tsv; the HDF5 file is
// written beside it and nothing is left as .partial.
TEST(PetabCli, RunWritesTheSimulationTableOfEverySuiteCase) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path out = scratch("run");
  int compared = 0;
  double worst = 0.0;
  for (const auto& entry : fs::directory_iterator(petab_dir() / "test-suite-v1")) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE("case " + name);
    const fs::path yaml = entry.path() / ("_" + name + ".yaml");
    const auto r = costate::test::run_command(out, COSTATE_EXE, "run '" + yaml.string() + "' -o sims_" + name + ".tsv --json -q");
    ASSERT_EQ(r.code, 0) << r.err;
    const Json j = Json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j["status"], "ok");
    EXPECT_TRUE(fs::exists(out / ("sims_" + name + ".h5")));
    EXPECT_FALSE(fs::exists(out / ("sims_" + name + ".tsv.partial")));
    const auto written = read_tsv(out / ("sims_" + name + ".tsv"));
    const auto measured = read_tsv(entry.path() / "_measurements.tsv");
    ASSERT_EQ(written.size(), measured.size());
    const long c_sim = column_of(written[0], "simulation"), c_meas = column_of(measured[0], "measurement");
    ASSERT_GE(c_sim, 0);
    EXPECT_EQ(c_sim, c_meas);
    for (std::size_t row = 0; row < written.size(); ++row)
      for (std::size_t c = 0; c < measured[row].size(); ++c)
        if (static_cast<long>(c) != c_meas) {
          EXPECT_EQ(written[row][c], measured[row][c]) << "row " << row << " column " << c;
        }
    const fs::path reference = entry.path() / "_simulations.tsv";
    if (!fs::exists(reference)) continue;
    const auto ref = read_tsv(reference);
    const long c_ref = column_of(ref[0], "simulation");
    ASSERT_GE(c_ref, 0);
    ASSERT_EQ(ref.size(), written.size());
    for (std::size_t row = 1; row < ref.size(); ++row) {
      const double a = std::stod(written[row][static_cast<std::size_t>(c_sim)]);
      const double b = std::stod(ref[row][static_cast<std::size_t>(c_ref)]);
      EXPECT_NEAR(a, b, kSuiteTol) << "row " << row;
      worst = std::max(worst, std::abs(a - b));
      EXPECT_EQ(j["simulations"][row - 1].get<double>(), a);
    }
    ++compared;
  }
  EXPECT_EQ(compared, 20);
  std::cout << "costate run: " << compared << " suite cases against _simulations.tsv, largest difference " << worst
            << "\n";
}

// `costate gradcheck problem.yaml --json`: the Taylor test and central
// differences of llh pass on every suite case (several conditions,
// pre-equilibration, overrides, log observables); each component is
// reported by parameter id.
TEST(PetabCli, GradcheckPassesOnEverySuiteCase) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  for (const auto& entry : fs::directory_iterator(petab_dir() / "test-suite-v1")) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const fs::path yaml = entry.path() / ("_" + name + ".yaml");
    const auto r = costate::test::run_command(scratch("gradcheck"), COSTATE_EXE, "gradcheck '" + yaml.string() + "' --json -q");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    const Json j = Json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j["status"], "ok") << j.dump(1);
    EXPECT_TRUE(j["taylor"]["passed"].get<bool>());
    EXPECT_GE(j["taylor"]["min_order"].get<double>(), 1.9);
    EXPECT_TRUE(j["finite_differences"]["passed"].get<bool>());
    const auto table = read_tsv(entry.path() / "_parameters.tsv");
    const long c_est = column_of(table[0], "estimate");
    std::size_t estimated = 0;
    for (std::size_t row = 1; row < table.size(); ++row) estimated += table[row][static_cast<std::size_t>(c_est)] == "1";
    EXPECT_EQ(j["finite_differences"]["components"].size(), estimated) << "one component per estimated parameter";
  }
}

// `costate sensitivity --json --fim` carries the Fisher information as an
// n × n matrix in the order of parameter_ids (the gradient's keys),
// symmetric with a positive diagonal; -o writes the HDF5 file. Without
// --fim (the default: the first gradient waits for nothing else) it is
// null. With cvodes_forward the FIM comes from the gradient's own forward
// sensitivities: the same matrix as the separate pass.
TEST(PetabCli, SensitivityReportsTheFisherInformationWhenAsked) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0015");  // an estimated noise parameter
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity _0015.yaml --json -q --fim -o out.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out.substr(r.out.find('{')));
  const auto ids = j["parameter_ids"].get<std::vector<std::string>>();
  ASSERT_EQ(ids.size(), j["gradient"].size());
  std::size_t k = 0;
  for (const auto& [id, g] : j["gradient"].items()) EXPECT_EQ(id, ids[k++]);
  const auto fim = j["fim"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(fim.size(), ids.size());
  for (std::size_t a = 0; a < fim.size(); ++a) {
    ASSERT_EQ(fim[a].size(), ids.size());
    EXPECT_GT(fim[a][a], 0.0) << ids[a];
    for (std::size_t b = 0; b < a; ++b) EXPECT_EQ(fim[a][b], fim[b][a]);
  }
  EXPECT_TRUE(fs::exists(dir / "out.h5"));
  EXPECT_GE(j["first_gradient_seconds"].get<double>(), j["gradient_seconds"].get<double>());
  const auto text = costate::test::run_command(dir, COSTATE_EXE, "sensitivity _0015.yaml -q --fim");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("Fisher information"), std::string::npos) << text.out;
  // Two measurements of A inform at most two directions of (a0, b0, k1, k2);
  // with the noise parameter the information has rank 3 of 5.
  EXPECT_NE(text.out.find("rank 3 of 5"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("first gradient after"), std::string::npos) << text.out;
  for (const char* flags : {"", " --no-fim"}) {
    const auto none = costate::test::run_command(dir, COSTATE_EXE, std::string("sensitivity _0015.yaml --json -q") + flags);
    ASSERT_EQ(none.code, 0) << none.err;
    const Json n = Json::parse(none.out.substr(none.out.find('{')));
    EXPECT_TRUE(n["fim"].is_null()) << flags;
    EXPECT_EQ(n["fim_seconds"].get<double>(), 0.0) << flags;
    const auto plain = costate::test::run_command(dir, COSTATE_EXE, std::string("sensitivity _0015.yaml -q") + flags);
    EXPECT_EQ(plain.out.find("Fisher information"), std::string::npos) << plain.out;
  }
  const auto fwd = costate::test::run_command(
      dir, COSTATE_EXE, "sensitivity _0015.yaml --json -q --fim --set sensitivity.method=cvodes_forward");
  ASSERT_EQ(fwd.code, 0) << fwd.err;
  const Json f = Json::parse(fwd.out.substr(fwd.out.find('{')));
  EXPECT_EQ(f["method"].get<std::string>().rfind("cvodes_forward", 0), 0u) << f["method"];
  EXPECT_EQ(f["fim"], j["fim"]) << "the same forward sensitivities, the same matrix";
}

// --set on a PEtab problem takes the input files' integrator.* and
// sensitivity.* keys: a looser rtol moves llh (by less than the looser
// tolerance allows), forward sensitivities give the adjoint's gradient, and
// every other key is refused as an input file refuses it.
TEST(PetabCli, SetChangesTheIntegratorAndTheMethod) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0002");
  const Json base = run_json(dir, "_0002.yaml");
  EXPECT_EQ(base["method"].get<std::string>().rfind("cvodes_adjoint", 0), 0u) << base["method"];
  EXPECT_EQ(base["integrator"]["rtol"].get<double>(), 1e-10);
  const Json loose = run_json(dir, "_0002.yaml --set integrator.rtol=1e-4 --set integrator.atol=1e-6");
  EXPECT_EQ(loose["integrator"]["rtol"].get<double>(), 1e-4);
  EXPECT_EQ(loose["integrator"]["atol"].get<double>(), 1e-6);
  const double llh = base["llh"].get<double>(), llh_loose = loose["llh"].get<double>();
  EXPECT_NE(llh_loose, llh) << "the tolerances reached the integrator";
  // rtol 1e-4 on states of size O(1) and a χ² of O(1): llh moves by ≲ 1e-2.
  constexpr double kLooseLlh = 1e-2;
  EXPECT_NEAR(llh_loose, llh, kLooseLlh);
  const Json fwd = run_json(dir, "_0002.yaml --set sensitivity.method=cvodes_forward");
  EXPECT_EQ(fwd["method"].get<std::string>().rfind("cvodes_forward", 0), 0u) << fwd["method"];
  // Adjoint and forward sensitivities at rtol 1e-10: agree to ~1e-7 of the size.
  constexpr double kMethodsAgree = 1e-6;
  for (const auto& [id, g] : base["gradient"].items())
    EXPECT_NEAR(fwd["gradient"][id].get<double>(), g.get<double>(), kMethodsAgree * (1.0 + std::abs(g.get<double>()))) << id;
  const Json adams = run_json(dir, "_0002.yaml --set integrator.method=cvodes_adams");
  EXPECT_EQ(adams["integrator"]["method"], "cvodes_adams");
  EXPECT_NEAR(adams["llh"].get<double>(), llh, 1e-6);
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"sensitivity _0002.yaml --set integrator.rtoll=1e-6", "unknown key 'integrator.rtoll'; did you mean 'rtol'?"},
      {"sensitivity _0002.yaml --set integratr.rtol=1e-6", "unknown key 'integratr' for a PEtab problem; did you mean 'integrator'?"},
      {"sensitivity _0002.yaml --set time.end=3", "unknown key 'time' for a PEtab problem"},
      {"sensitivity _0002.yaml --set integrator.rtol=-1", "--set integrator.rtol=-1: integrator.rtol: must be positive"},
      {"sensitivity _0002.yaml --set sensitivity.method=adjoint", "unknown method 'adjoint'"},
      {"sensitivity _0002.yaml --set sensitivity.wrt=[a]", "not for a PEtab problem"},
      {"sensitivity _0002.yaml --fim --no-fim", "--fim and --no-fim"},
      {"sensitivity _0002.yaml --set integrator.atol=[1e-8]", "integrator.atol: a number for a PEtab problem"},
      {"gradcheck _0002.yaml --set integrator.rtl=1e-6", "did you mean 'rtol'?"},
  };
  for (const auto& c : cases) {
    const auto r = costate::test::run_command(dir, COSTATE_EXE, c.args);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
}

TEST(PetabCli, RunSensitivityAndSamplingBadFlagsAreClearErrors) {
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const fs::path dir = copy_case("0001");
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"run _0001.yaml -o sims.txt", "-o sims.txt: expected an output file ending in .tsv or .h5"},
      {"run _0001.yaml --set a=b", "--set a=b: unknown key 'a' for a PEtab problem"},
      {"sensitivity _0001.yaml -o out.json", "-o out.json: expected an output file ending in .h5"},
      {"calibrate _0001.yaml --starts 2 --sampling sobol", "--sampling 'sobol': expected lhs (Latin hypercube) or uniform"},
      {"calibrate _0001.yaml --sampling uniform", "--sampling needs --starts N"},
  };
  for (const auto& c : cases) {
    const auto r = costate::test::run_command(dir, COSTATE_EXE, c.args);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "sims.tsv"));
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

// A time switch that moves with an estimated parameter (Beer_MolBioSystems2014:
// lag = piecewise(0, t − tau < 0, 1), tau estimated per experiment, log10
// scale): the adjoint gradient carries the jump term λᵀ(f⁻ − f⁺) dt_s/dθ —
// dllh/dtau against central differences of `costate run`'s llh with tau's
// nominal value shifted in a copy of the parameter table (it came out 0
// before). Forward sensitivities do not carry it: the FIM and cvodes_forward
// are refused by name.
TEST(PetabCli, TheGradientCarriesTheJumpOfAMovingSwitchTime) {
  const fs::path src = petab_dir() / "benchmark" / "Beer_MolBioSystems2014";
  if (!fs::exists(src)) GTEST_SKIP() << "PEtab benchmark Beer_MolBioSystems2014 not found at " << src;
  const fs::path dir = costate::test::scratch_dir("costate_petab_cli_beer");
  fs::remove_all(dir);
  fs::copy(src, dir, fs::copy_options::recursive);
  // The copy keeps ../shared's read-only modes: the directory too must take
  // the command's stdout.txt and the edited table.
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add);
  for (const auto& e : fs::directory_iterator(dir)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  const std::string yaml = "Beer_MolBioSystems2014.yaml", table = "parameters_Beer_MolBioSystems2014.tsv";
  const Json j = run_json(dir, yaml);
  std::ifstream in(dir / table);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  in.close();
  // Richardson-extrapolated central differences on the log10 scale, steps
  // 1.25e-4 and 6.25e-5: at 1e-3 the central difference on
  // tau_typeIDwt_ExpID4 is 1.4e-3 off (1113.78 against 1115.28; its llh
  // bends sharply within 1e-3 of tau), at 1.25e-4 and 6.25e-5 it gives
  // 1115.262 and 1115.273, extrapolated 1115.2766. The llh (≈ 5.9e4,
  // rtol 1e-10) leaves ~1e-2 of noise in a difference quotient at these
  // steps: 1e-4 of dllh/dtau ≈ 4e2–1e3 covers it.
  constexpr double kStepLog10 = 1.25e-4;
  constexpr double kJumpVsCentral = 1e-4;  // relative
  auto write_table = [&](const std::string& id, double shift) {
    std::ofstream out(dir / table);
    for (const std::string& line : lines) {
      if (id.empty() || line.rfind(id + "\t", 0) != 0) {
        out << line << "\n";
        continue;
      }
      std::vector<std::string> cells;
      std::stringstream ss(line);
      for (std::string c; std::getline(ss, c, '\t');) cells.push_back(c);
      std::ostringstream v;
      v.precision(17);
      v << std::stod(cells[5]) * std::pow(10.0, shift);  // nominalValue, shifted on the log10 scale
      cells[5] = v.str();
      for (std::size_t c = 0; c < cells.size(); ++c) out << (c ? "\t" : "") << cells[c];
      out << "\n";
    }
  };
  auto llh_at = [&](const std::string& id, double shift) {
    write_table(id, shift);
    const auto r = costate::test::run_command(dir, COSTATE_EXE, "run " + yaml + " --json -q -o sims.tsv");
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out.substr(r.out.find('{')))["llh"].get<double>();
  };
  for (const std::string id : {"tau_typeIDwt_ExpID4", "tau_typeIDT5_ExpID1"}) {
    auto central = [&](double h) { return (llh_at(id, h) - llh_at(id, -h)) / (2 * h); };
    const double d1 = central(kStepLog10), d2 = central(kStepLog10 / 2);
    const double richardson = (4 * d2 - d1) / 3, adjoint = j["gradient"][id].get<double>();
    EXPECT_GT(std::abs(adjoint), 100.0) << id << ": the jump term is there";
    EXPECT_NEAR(adjoint, richardson, kJumpVsCentral * std::abs(richardson))
        << id << " (central " << d1 << ", " << d2 << ")";
  }
  write_table("", 0.0);
  // The forward sensitivities carry the switch's tangent jump too: the
  // Fisher information is computed, and the cvodes_forward gradient agrees
  // with the adjoint's (to the central differences' tolerance above).
  for (const char* flags : {" --fim", " --set sensitivity.method=cvodes_forward"}) {
    const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity " + yaml + " -q --json" + flags);
    ASSERT_EQ(r.code, 0) << flags << ": " << r.err;
    const Json f = Json::parse(r.out.substr(r.out.find('{')));
    for (const std::string id : {"tau_typeIDwt_ExpID4", "tau_typeIDT5_ExpID1"}) {
      const double adjoint = j["gradient"][id].get<double>();
      EXPECT_NEAR(f["gradient"][id].get<double>(), adjoint, kJumpVsCentral * std::abs(adjoint))
          << flags << " " << id;
    }
  }
}
