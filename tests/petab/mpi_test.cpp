// petab::evaluate over MPI ranks (run under mpiexec, 2 and 3 ranks): the
// llh, χ², gradient and every simulated value of problems with several
// experiments, distributed over MPI_COMM_WORLD, against an independent
// serial evaluation on each rank (MPI_COMM_SELF: every experiment on one
// process) — by the adjoint and by forward sensitivities, and for a
// pre-equilibrated problem; a failing experiment on one rank throws on
// every rank.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"
#include "support/relative_error.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;
namespace ode = costate::ode;
using costate::test::floored_err;

fs::path petab_dir() {
  if (const char* env = std::getenv("COSTATE_PETAB_DIR")) return fs::path(env);
  return fs::path(COSTATE_PETAB_DIR);
}

// Rank-count independence: each experiment's terms are computed by the same
// code on whichever rank owns it and summed in experiment order on every
// rank, so the results are the serial ones to the bit; the bound leaves
// room only for the last bit of a value printed and re-read nowhere (there
// is none): a relative 1e-15 fails on any real difference.
constexpr double kRankTol = 1e-15;

void expect_same(const petab::Result& dist, const petab::Result& serial) {
  EXPECT_LE(floored_err(dist.llh, serial.llh), kRankTol) << dist.llh << " vs " << serial.llh;
  EXPECT_LE(floored_err(dist.chi2, serial.chi2), kRankTol);
  ASSERT_EQ(dist.gradient.size(), serial.gradient.size());
  for (std::size_t e = 0; e < serial.gradient.size(); ++e)
    EXPECT_LE(floored_err(dist.gradient[e], serial.gradient[e]), kRankTol) << "gradient entry " << e;
  ASSERT_EQ(dist.simulations.size(), serial.simulations.size());
  for (std::size_t i = 0; i < serial.simulations.size(); ++i) {
    EXPECT_LE(floored_err(dist.simulations[i], serial.simulations[i]), kRankTol) << "measurement " << i;
    EXPECT_LE(floored_err(dist.sigmas[i], serial.sigmas[i]), kRankTol) << "measurement " << i;
  }
  EXPECT_EQ(dist.rhs_evaluations, serial.rhs_evaluations);
  EXPECT_EQ(dist.steps, serial.steps);  // every rank's integrations, summed
  EXPECT_EQ(dist.backward_steps, serial.backward_steps);
  ASSERT_EQ(dist.fim.size(), serial.fim.size());
  for (std::size_t c = 0; c < serial.fim.size(); ++c)
    EXPECT_LE(floored_err(dist.fim[c], serial.fim[c]), kRankTol) << "fim entry " << c;
}

void check(const fs::path& yaml, const ode::SensitivityMethod& method) {
  const petab::Problem pb = petab::read(yaml.string());
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_GE(pb.experiments.size(), 2u) << yaml << ": needs several experiments";
  // Away from the nominal values (a gradient that is not ~0).
  std::vector<double> theta = pb.nominal_on_scale();
  for (std::size_t e = 0; e < theta.size(); ++e) theta[e] += 0.01 * static_cast<double>(e % 3);
  petab::Options opt;
  opt.gradient = true;
  opt.method = method;
  const petab::Result dist = petab::evaluate(pb, theta, opt, MPI_COMM_WORLD);
  const petab::Result serial = petab::evaluate(pb, theta, opt, MPI_COMM_SELF);
  expect_same(dist, serial);
  EXPECT_GT(serial.steps, 0u);
  // Only an adjoint integrates backward.
  EXPECT_EQ(serial.backward_steps > 0, std::holds_alternative<ode::CvodesAdjoint>(method));
  petab::Options plain;
  expect_same(petab::evaluate(pb, theta, plain, MPI_COMM_WORLD), petab::evaluate(pb, theta, plain));
  petab::Options fim;
  fim.fim = true;
  const petab::Result f = petab::evaluate(pb, theta, fim, MPI_COMM_WORLD);
  EXPECT_EQ(f.fim.size(), pb.estimated.size() * pb.estimated.size());
  expect_same(f, petab::evaluate(pb, theta, fim));
}

#define COSTATE_REQUIRE_PETAB(sub)                                  \
  if (!fs::is_directory(petab_dir() / (sub)))                       \
  GTEST_SKIP() << "PEtab data not found at " << (petab_dir() / (sub)) \
               << " (configure with -DCOSTATE_PETAB_DIR=...)"

TEST(PetabMpi, SuiteCaseWithTwoConditionsMatchesSerial) {
  COSTATE_REQUIRE_PETAB("test-suite-v1");
  check(petab_dir() / "test-suite-v1" / "0002" / "_0002.yaml", ode::CvodesAdjoint{});
  check(petab_dir() / "test-suite-v1" / "0002" / "_0002.yaml", ode::CvodesForward{});
}

TEST(PetabMpi, PreequilibratedBenchmarkMatchesSerial) {
  COSTATE_REQUIRE_PETAB("benchmark");
  // Weber_BMC2015: 3 experiments, pre-equilibration, a piecewise input.
  check(petab_dir() / "benchmark" / "Weber_BMC2015" / "Weber_BMC2015.yaml", ode::CvodesAdjoint{});
}

TEST(PetabMpi, AFailingSimulationThrowsOnEveryRankWithoutHanging) {
  COSTATE_REQUIRE_PETAB("test-suite-v1");
  const petab::Problem pb = petab::read((petab_dir() / "test-suite-v1" / "0002" / "_0002.yaml").string());
  petab::Options opt;
  opt.integrator.max_steps = 1;  // every simulation fails
  try {
    (void)petab::evaluate(pb, pb.nominal_on_scale(), opt, MPI_COMM_WORLD);
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("experiment"), std::string::npos) << e.what();
  }
}

}  // namespace
