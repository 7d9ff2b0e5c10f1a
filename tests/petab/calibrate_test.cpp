// petab::calibrate on PEtab test-suite case 0002 (two conditions, two
// estimated parameters): the multistart draws are deterministic per seed
// and lie in the bounds on the scales; every start's fit reaches the same
// optimum, which is at least as good as the published llh at the nominal
// values and has a vanishing gradient; the HDF5 output holds the
// waterfall. Run under mpiexec with 2 ranks as well: the starts are dealt
// over the ranks, and the gathered result matches a serial calibration
// on each rank.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/calibrate.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;

fs::path petab_dir() {
  if (const char* env = std::getenv("COSTATE_PETAB_DIR")) return fs::path(env);
  return fs::path(COSTATE_PETAB_DIR);
}

double solution_llh(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("llh:", 0) == 0) return std::stod(line.substr(4));
  ADD_FAILURE() << "no llh in " << file;
  return NAN;
}

#define COSTATE_REQUIRE_SUITE()                                       \
  if (!fs::is_directory(petab_dir() / "test-suite-v1"))               \
  GTEST_SKIP() << "PEtab data not found at " << petab_dir()           \
               << " (configure with -DCOSTATE_PETAB_DIR=...)"

const fs::path kCase = fs::path("test-suite-v1") / "0002";
constexpr int kStarts = 6;
// The suite's llh tolerance: the fit must reach the published value (at
// the nominal parameters) or better.
constexpr double kLlhTol = 1e-3;
// Starts that converged to the one optimum agree in objective to TAO's
// gradient tolerance squared over the curvature: far below this.
constexpr double kSameOptimum = 1e-6;
// The gradient at the best fit: TAO stops at ‖g‖ ≤ gatol = 1e-6 (the
// default CalibrationOptions); CVODES' gradient is accurate to ~1e-8.
constexpr double kStationary = 1e-5;

TEST(PetabCalibrate, StartsAreDeterministicPerSeedAndInTheBounds) {
  COSTATE_REQUIRE_SUITE();
  const petab::Problem pb = petab::read((petab_dir() / kCase / "_0002.yaml").string());
  const auto a = petab::calibration_starts(pb, {.starts = kStarts, .seed = 7});
  const auto b = petab::calibration_starts(pb, {.starts = kStarts, .seed = 7});
  const auto c = petab::calibration_starts(pb, {.starts = kStarts, .seed = 8});
  ASSERT_EQ(a.size(), static_cast<std::size_t>(kStarts));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto [lo, hi] = pb.bounds_on_scale();
  for (const auto& x : a)
    for (std::size_t e = 0; e < x.size(); ++e) {
      EXPECT_GE(x[e], lo[e]);
      EXPECT_LE(x[e], hi[e]);
    }
  // starts = 0: the nominal values.
  EXPECT_EQ(petab::calibration_starts(pb, {}), std::vector<std::vector<double>>{pb.nominal_on_scale()});
  EXPECT_THROW((void)petab::calibration_starts(pb, {.starts = -1}), costate::Error);
}

// The Latin hypercube property: in every dimension each of the N equal
// strata of [lower, upper] (on the scale) holds exactly one start. On a
// benchmark model (Bruno: 13 log10 parameters) and N = 1, 7, 50; uniform
// draws (--sampling uniform) generally do not have it (with 50 points in
// 13 dimensions, missing a stratum somewhere is a near-certainty).
TEST(PetabCalibrate, LatinHypercubeHitsEveryStratumOncePerDimension) {
  if (!fs::is_directory(petab_dir() / "benchmark")) GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const petab::Problem pb =
      petab::read((petab_dir() / "benchmark" / "Bruno_JExpBot2016" / "Bruno_JExpBot2016.yaml").string());
  const auto [lo, hi] = pb.bounds_on_scale();
  auto strata_hit_once = [&](const std::vector<std::vector<double>>& x) {
    const std::size_t n = x.size();
    for (std::size_t e = 0; e < lo.size(); ++e) {
      std::vector<int> hits(n, 0);
      for (const auto& p : x) {
        EXPECT_GE(p[e], lo[e]);
        EXPECT_LE(p[e], hi[e]);
        const double u = (p[e] - lo[e]) / (hi[e] - lo[e]) * static_cast<double>(n);
        ++hits[std::min(n - 1, static_cast<std::size_t>(u))];
      }
      if (std::any_of(hits.begin(), hits.end(), [](int h) { return h != 1; })) return false;
    }
    return true;
  };
  for (int n : {1, 7, 50}) {
    SCOPED_TRACE(n);
    const auto a = petab::calibration_starts(pb, {.starts = n, .seed = 3});
    ASSERT_EQ(a.size(), static_cast<std::size_t>(n));
    EXPECT_TRUE(strata_hit_once(a));
    EXPECT_EQ(a, petab::calibration_starts(pb, {.starts = n, .seed = 3}));  // reproducible
  }
  const auto u = petab::calibration_starts(pb, {.starts = 50, .seed = 3, .sampling = petab::Sampling::Uniform});
  EXPECT_FALSE(strata_hit_once(u));
  EXPECT_EQ(petab::sampling_from_string("lhs"), petab::Sampling::LatinHypercube);
  EXPECT_THROW((void)petab::sampling_from_string("sobol"), costate::Error);
}

TEST(PetabCalibrate, MultistartReachesThePublishedLlhOrBetterEverywhere) {
  COSTATE_REQUIRE_SUITE();
  const petab::Problem pb = petab::read((petab_dir() / kCase / "_0002.yaml").string());
  const double published = solution_llh(petab_dir() / kCase / "_0002_solution.yaml");
  const petab::Calibration c = petab::calibrate(pb, {.starts = kStarts, .seed = 1}, MPI_COMM_WORLD);
  ASSERT_EQ(c.starts.size(), static_cast<std::size_t>(kStarts));
  EXPECT_GE(c.best().llh, published - kLlhTol) << c.brief_report();
  EXPECT_EQ(c.at_best, static_cast<std::size_t>(kStarts)) << c.brief_report();
  const std::vector<std::size_t> order = c.waterfall();
  for (std::size_t k = 1; k < order.size(); ++k)
    EXPECT_LE(c.starts[order[k - 1]].objective, c.starts[order[k]].objective);
  for (const petab::StartFit& f : c.starts) {
    EXPECT_FALSE(f.failed) << f.termination;
    EXPECT_NEAR(f.objective, c.best().objective, kSameOptimum);
    EXPECT_NEAR(f.objective, -f.llh, 1e-12 * (1.0 + std::abs(f.llh)));  // no priors here
  }
  petab::Options opt;
  opt.gradient = true;
  const petab::Result at = petab::evaluate(pb, c.best().x, opt);
  for (double g : at.gradient) EXPECT_LE(std::abs(g), kStationary);

  // Serial on this rank: the same fits (under mpiexec the starts above ran
  // on different ranks).
  const petab::Calibration serial = petab::calibrate(pb, {.starts = kStarts, .seed = 1}, MPI_COMM_SELF);
  for (std::size_t i = 0; i < c.starts.size(); ++i) {
    EXPECT_EQ(serial.starts[i].initial, c.starts[i].initial);
    EXPECT_EQ(serial.starts[i].x, c.starts[i].x) << "start " << i;
    EXPECT_EQ(serial.starts[i].objective, c.starts[i].objective) << "start " << i;
    EXPECT_EQ(serial.starts[i].iterations, c.starts[i].iterations);
  }

  // The HDF5 output (rank 0 writes).
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    const fs::path h5 = fs::current_path() / "petab_calibrate_test.h5";
    petab::write_calibration_hdf5(h5.string(), c);
    const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t d = H5Dopen2(f, "/calibration/waterfall", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    std::vector<double> w(kStarts);
    ASSERT_GE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data()), 0);
    H5Dclose(d);
    H5Fclose(f);
    for (std::size_t k = 0; k < order.size(); ++k) EXPECT_EQ(w[k], c.starts[order[k]].objective);
  }
}

TEST(PetabCalibrate, OneStartAtTheNominalValuesOverTheRanks) {
  COSTATE_REQUIRE_SUITE();
  const petab::Problem pb = petab::read((petab_dir() / kCase / "_0002.yaml").string());
  const petab::Calibration c = petab::calibrate(pb, {}, MPI_COMM_WORLD);  // experiments over the ranks
  const petab::Calibration serial = petab::calibrate(pb, {}, MPI_COMM_SELF);
  ASSERT_EQ(c.starts.size(), 1u);
  EXPECT_EQ(c.best().initial, pb.nominal_on_scale());
  EXPECT_EQ(c.best().x, serial.best().x);
  EXPECT_EQ(c.best().objective, serial.best().objective);
  EXPECT_GE(c.best().llh, solution_llh(petab_dir() / kCase / "_0002_solution.yaml") - kLlhTol);
}

// Bruno_JExpBot2016 (13 parameters, 6 experiments) from 8 random starts:
// the best reaches the published llh (AMICI's value at the published fit)
// within AMICI's 1e-3, and so do most starts (measured: 5 of 8, seed 1;
// the others stop at a local optimum, −llh 354.87). Minutes: label slow.
constexpr int kBenchmarkStarts = 8;
constexpr double kPublishedBruno = 46.688176988431806;  // ../shared/petab/README.md
TEST(PetabCalibrateBenchmark, BrunoMultistartReachesThePublishedOptimumInMostStarts) {
  if (!fs::is_directory(petab_dir() / "benchmark"))
    GTEST_SKIP() << "PEtab data not found at " << petab_dir();
  const petab::Problem pb = petab::read(
      (petab_dir() / "benchmark" / "Bruno_JExpBot2016" / "Bruno_JExpBot2016.yaml").string());
  const petab::Calibration c =
      petab::calibrate(pb, {.starts = kBenchmarkStarts, .seed = 1}, MPI_COMM_WORLD);
  std::cout << "[ petab    ] " << c.brief_report() << std::endl;
  EXPECT_GE(c.best().llh, kPublishedBruno - kLlhTol - kLlhTol * kPublishedBruno);
  std::size_t reached = 0;
  for (const petab::StartFit& f : c.starts)
    reached += f.llh >= kPublishedBruno - kLlhTol - kLlhTol * kPublishedBruno;
  EXPECT_GT(2 * reached, c.starts.size()) << c.brief_report();
}

}  // namespace
