// petab::read on every problem of the benchmark collection in
// COSTATE_PETAB_DIR/benchmark (skipped when absent): each reads
// (Liu_IFACPapersOnLine2025's event since events do: events_test.cpp;
// Blasi_CellSystems2016's measurements at time inf since steady-state
// measurements do, compared with its simulatedData in steady_state_test.cpp,
// its simulatedData rows not being its measurement rows).
// The problems that only read since the reader takes the
// collection's layouts — Giordano_Nature2020 (a byte-order mark before its
// condition table's header) and Lang_PLOSComputBiol2024 (a fixed parameter
// at nominal value 0 on a log scale) — and Raimundez_PCB2020 (whose
// pre-equilibration Newton fails at its first iteration: the steady state
// by the integration fallback) are simulated at their nominal values and
// compared with the collection's simulatedData table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;
namespace ode = costate::ode;

fs::path petab_dir() {
  if (const char* env = std::getenv("COSTATE_PETAB_DIR")) return fs::path(env);
  return fs::path(COSTATE_PETAB_DIR);
}

// The collection's comparison (AMICI): rtol = atol = 1e-3 on simulations
// computed at solver tolerances 1e-8.
constexpr double kSimulationTol = 1e-3;
// Integration far tighter than that, so a difference is the model's.
const petab::Options kOptions{
    .integrator = {.method = ode::Method::CvodesBdf, .rtol = 1e-10, .atol = 1e-12}};

/// The "simulation" column of a PEtab simulation table (byte-order mark
/// tolerated), in row order.
std::vector<double> simulation_column(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line = line.substr(3);
  std::vector<std::string> header;
  std::stringstream s(line);
  for (std::string c; std::getline(s, c, '\t');) {
    while (!c.empty() && (c.back() == '\r' || c.back() == ' ')) c.pop_back();
    header.push_back(c);
  }
  const auto col = std::find(header.begin(), header.end(), "simulation") - header.begin();
  EXPECT_LT(static_cast<std::size_t>(col), header.size()) << "no simulation column in " << file;
  std::vector<double> out;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    std::stringstream r(line);
    std::string c;
    for (long k = 0; k <= col; ++k) std::getline(r, c, '\t');
    out.push_back(std::stod(c));
  }
  return out;
}

fs::path problem_yaml(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") return e.path();
  return {};
}

TEST(PetabBenchmarkRead, EveryProblemReads) {
  if (!fs::is_directory(petab_dir() / "benchmark"))
    GTEST_SKIP() << "PEtab benchmark problems not found at " << (petab_dir() / "benchmark").string()
                 << " (configure with -DCOSTATE_PETAB_DIR=<folder with benchmark/>)";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(petab_dir() / "benchmark"))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  const std::set<std::string> compare = {"Giordano_Nature2020", "Lang_PLOSComputBiol2024", "Raimundez_PCB2020"};
  int read = 0, compared = 0;
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    SCOPED_TRACE("benchmark " + name);
    petab::Problem pb;
    try {
      pb = petab::read(problem_yaml(dir).string());
    } catch (const costate::Error& e) {
      ADD_FAILURE() << name << " is refused: " << e.what();
      continue;
    }
    ++read;
    if (!compare.count(name)) continue;
    fs::path sims;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("simulatedData", 0) == 0) sims = e.path();
    ASSERT_FALSE(sims.empty());
    const std::vector<double> expected = simulation_column(sims);
    const petab::Result r = petab::evaluate(pb, pb.nominal_on_scale(), kOptions);
    ASSERT_EQ(expected.size(), r.simulations.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_LE(std::abs(r.simulations[i] - expected[i]), kSimulationTol + kSimulationTol * std::abs(expected[i]))
          << "row " << i + 1 << ": " << r.simulations[i] << " vs " << expected[i];
      worst = std::max(worst, std::abs(r.simulations[i] - expected[i]) / (1.0 + std::abs(expected[i])));
    }
    std::cout << "[ petab    ] " << name << ": llh " << r.llh << ", simulations vs simulatedData: max |diff|/(1+|ref|) "
              << worst << "\n";
    ++compared;
  }
  std::cout << "[ petab    ] " << read << " of " << dirs.size() << " benchmark problems read, "
            << compared << " compared with simulatedData\n";
  EXPECT_EQ(compared, static_cast<int>(compare.size()));
}

}  // namespace
