// PEtab problems read from COSTATE_PETAB_DIR (../shared/petab; never copied
// into the repository):
// - the PEtab test suite (format v1): every case passes — χ², llh and every
//   simulated value within the case's tolerances at the nominal parameters —
//   or fails with an error that names the unsupported feature;
// - the gradient of llh (CVODES adjoint) against forward sensitivities and
//   central differences on the parameter scales;
// - the benchmark collection: llh at the published best fit against the
//   table in benchmark/README.md (AMICI's values), and the same gradient
//   checks; prints load, simulation and gradient times.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;
namespace ode = costate::ode;

/// The configured folder (CMake COSTATE_PETAB_DIR); the environment
/// variable of the same name overrides it.
fs::path petab_dir() {
  if (const char* env = std::getenv("COSTATE_PETAB_DIR")) return fs::path(env);
  return fs::path(COSTATE_PETAB_DIR);
}

#define COSTATE_REQUIRE_PETAB(sub)                                                        \
  if (!fs::is_directory(petab_dir() / (sub)))                                             \
  GTEST_SKIP() << "PEtab data not found at " << (petab_dir() / (sub)).string()           \
               << " (configure with -DCOSTATE_PETAB_DIR=<folder with test-suite-v1/ and " \
                  "benchmark/>)"

std::vector<fs::path> subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path only_yaml(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.path().extension() == ".yaml" && n.find("solution") == std::string::npos) return e.path();
  }
  ADD_FAILURE() << "no problem .yaml in " << dir;
  return {};
}

/// The "simulation" column of a PEtab simulation table, in row order.
std::vector<double> simulation_column(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::stringstream s(line);
    std::string c;
    while (std::getline(s, c, '\t')) header.push_back(c);
  }
  long col = -1;
  for (std::size_t c = 0; c < header.size(); ++c)
    if (header[c].rfind("simulation", 0) == 0 && header[c].find("Condition") == std::string::npos)
      col = static_cast<long>(c);
  EXPECT_GE(col, 0) << file;
  std::vector<double> out;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream s(line);
    std::string c;
    for (long k = 0; k <= col; ++k) std::getline(s, c, '\t');
    out.push_back(std::stod(c));
  }
  return out;
}

// Integration tolerances of the suite comparison: far below its 1e-3.
const petab::Options kSuiteOptions{};  // cvodes_bdf, rtol 1e-10, atol 1e-12

TEST(PetabTestSuite, EveryCasePassesOrNamesTheUnsupportedFeature) {
  COSTATE_REQUIRE_PETAB("test-suite-v1");
  int passed = 0, refused = 0, total = 0;
  double worst_llh = 0.0, worst_chi2 = 0.0, worst_sim = 0.0;
  for (const fs::path& dir : subfolders(petab_dir() / "test-suite-v1")) {
    const std::string name = dir.filename().string();
    SCOPED_TRACE("test-suite case " + name);
    ++total;
    const YAML::Node sol = YAML::LoadFile((dir / ("_" + name + "_solution.yaml")).string());
    petab::Problem pb;
    petab::Result r;
    try {
      pb = petab::read(only_yaml(dir).string());
      r = petab::evaluate(pb, pb.nominal_on_scale(), kSuiteOptions);
    } catch (const costate::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("not supported"), std::string::npos)
          << "case " << name << " failed with an error that names no unsupported feature: " << what;
      std::cout << "[ petab    ] case " << name << " refused: " << what << "\n";
      ++refused;
      continue;
    }
    const double llh = sol["llh"].as<double>(), chi2 = sol["chi2"].as<double>();
    const double tol_llh = sol["tol_llh"].as<double>(), tol_chi2 = sol["tol_chi2"].as<double>(),
                 tol_sim = sol["tol_simulations"].as<double>();
    bool ok = std::abs(r.llh - llh) <= tol_llh && std::abs(r.chi2 - chi2) <= tol_chi2;
    EXPECT_NEAR(r.llh, llh, tol_llh);
    EXPECT_NEAR(r.chi2, chi2, tol_chi2);
    worst_llh = std::max(worst_llh, std::abs(r.llh - llh));
    worst_chi2 = std::max(worst_chi2, std::abs(r.chi2 - chi2));
    const std::vector<double> sims = simulation_column(dir / sol["simulation_files"][0].as<std::string>());
    EXPECT_EQ(sims.size(), r.simulations.size());
    for (std::size_t i = 0; i < std::min(sims.size(), r.simulations.size()); ++i) {
      EXPECT_NEAR(r.simulations[i], sims[i], tol_sim) << "measurement row " << i + 1;
      ok = ok && std::abs(r.simulations[i] - sims[i]) <= tol_sim;
      worst_sim = std::max(worst_sim, std::abs(r.simulations[i] - sims[i]));
    }
    ok = ok && sims.size() == r.simulations.size();
    passed += ok ? 1 : 0;
  }
  std::cout << "[ petab    ] test suite v1: " << passed << " of " << total << " cases pass, "
            << refused << " refused by name; largest |llh - ref| " << worst_llh << ", |chi2 - ref| "
            << worst_chi2 << ", |simulation - ref| " << worst_sim << "\n";
  EXPECT_GT(total, 0);
}

}  // namespace
