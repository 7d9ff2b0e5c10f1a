// PEtab problems fitted by mini-batches over their experiments
// (petab::fit_stochastic on optimize::fit): each experiment's terms add up
// to the whole evaluation, the dataset's losses to the calibration
// objective, a fit lowers the objective bit-reproducibly whatever the
// physical batch — and, under mpiexec, gives the serial fit's bits on any
// number of ranks.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/stochastic.hpp"
#include "petab/petab_data.hpp"

namespace {

namespace petab = costate::petab;
namespace opt = costate::optimize;
using costate::test::petab_dir;

/// Each experiment's −log p is computed once and the totals are sums of the
/// same numbers in another grouping (the table values' adjoints): equal to
/// rounding, 1e-12 relative to the total's size.
constexpr double kRegroupTol = 1e-12;

const std::filesystem::path kFujita = std::filesystem::path("benchmark") / "Fujita_SciSignal2010";
const std::filesystem::path kCase2 = std::filesystem::path("test-suite-v1") / "0002";

petab::Problem read(const std::filesystem::path& sub) {
  return petab::read(costate::test::petab_problem_yaml(petab_dir() / sub).string());
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

TEST(PetabStochastic, EachExperimentsTermsAddUpToTheWholeEvaluation) {
  if (world_size() > 1) GTEST_SKIP() << "serial test";
  COSTATE_REQUIRE_PETAB(kFujita);
  const petab::Problem pb = read(kFujita);
  ASSERT_GE(pb.experiments.size(), 3u);
  const std::vector<double> theta = pb.nominal_on_scale();
  petab::Options o{.gradient = true};
  const petab::Result whole = petab::evaluate(pb, theta, o);
  o.per_experiment = true;
  const petab::Result parts = petab::evaluate(pb, theta, o);
  const std::size_t ne = pb.experiments.size(), n = pb.estimated.size();
  ASSERT_EQ(parts.experiment_nll.size(), ne);
  ASSERT_EQ(parts.experiment_gradient.size(), ne * n);
  EXPECT_EQ(parts.llh, whole.llh);  // per_experiment changes nothing else
  const double nll = std::accumulate(parts.experiment_nll.begin(), parts.experiment_nll.end(), 0.0);
  EXPECT_NEAR(nll, -whole.llh, kRegroupTol * std::abs(whole.llh));
  double norm = 0;
  for (double g : whole.gradient) norm = std::max(norm, std::abs(g));
  for (std::size_t j = 0; j < n; ++j) {
    double g = 0;
    for (std::size_t e = 0; e < ne; ++e) g += parts.experiment_gradient[e * n + j];
    EXPECT_NEAR(g, -whole.gradient[j], kRegroupTol * norm) << pb.estimated_ids()[j];
  }
  // A subset: its llh is the sum of those experiments' terms (the same
  // numbers summed in the same order: exactly), the others' h are NaN.
  o.experiments = {0, 2};
  const petab::Result sub = petab::evaluate(pb, theta, o);
  ASSERT_EQ(sub.experiment_nll.size(), 2u);
  EXPECT_EQ(sub.experiment_nll[0], parts.experiment_nll[0]);
  EXPECT_EQ(sub.experiment_nll[1], parts.experiment_nll[2]);
  EXPECT_EQ(-sub.llh, parts.experiment_nll[0] + parts.experiment_nll[2]);
  std::size_t simulated = 0;
  for (double h : sub.simulations) simulated += !std::isnan(h);
  std::size_t expected = 0;
  for (std::size_t e : {0u, 2u})
    for (const auto& at : pb.experiments[e].at_time) expected += at.size();
  EXPECT_EQ(simulated, expected);
  // Bad subsets are refused.
  o.experiments = {2, 0};
  EXPECT_THROW(petab::evaluate(pb, theta, o), costate::Error);
  o.experiments = {0, ne};
  EXPECT_THROW(petab::evaluate(pb, theta, o), costate::Error);
}

TEST(PetabStochastic, TheDatasetLossesAddUpToTheCalibrationObjective) {
  if (world_size() > 1) GTEST_SKIP() << "serial test";
  COSTATE_REQUIRE_PETAB(kFujita);
  const petab::Problem pb = read(kFujita);
  const opt::Dataset d = petab::experiment_dataset(pb);
  std::vector<std::size_t> all(d.n_conditions);
  std::iota(all.rbegin(), all.rend(), std::size_t{0});  // descending: the batch's order is kept
  std::vector<double> loss(all.size()), grad(all.size() * d.n);
  const std::vector<double> theta = pb.nominal_on_scale();
  d.batch(all, theta, loss, grad);
  const petab::Result r = petab::evaluate(pb, theta, {.gradient = true});
  const double sum = std::accumulate(loss.begin(), loss.end(), 0.0);
  EXPECT_NEAR(sum, -(r.llh + r.log_prior), kRegroupTol * std::abs(r.llh));
  // Row i is experiment all[i]: evaluate that one alone.
  std::vector<double> one_loss(1), one_grad(d.n);
  const std::vector<std::size_t> one{all[1]};
  d.batch(one, theta, one_loss, one_grad);
  EXPECT_EQ(one_loss[0], loss[1]);
  for (std::size_t j = 0; j < d.n; ++j) EXPECT_EQ(one_grad[j], grad[d.n + j]);
}

TEST(PetabStochastic, AFitLowersTheObjectiveWithTheSameBitsForAnyPhysicalBatch) {
  if (world_size() > 1) GTEST_SKIP() << "serial test";
  COSTATE_REQUIRE_PETAB(kFujita);
  const petab::Problem pb = read(kFujita);
  std::vector<double> start = pb.nominal_on_scale();
  const auto bounds = pb.bounds_on_scale();
  for (std::size_t j = 0; j < start.size(); ++j) start[j] = std::min(bounds[1][j], start[j] + 0.2);
  const petab::Options o{.integrator = {.method = costate::ode::Method::CvodesBdf, .rtol = 1e-8, .atol = 1e-10}};
  opt::StochasticOptions fo{.epochs = 4, .batch = 2, .learning_rate = 0.05, .seed = 3};
  const petab::StochasticFit a = petab::fit_stochastic(pb, fo, o, start);
  fo.physical_batch = 1;
  const petab::StochasticFit b = petab::fit_stochastic(pb, fo, o, start);
  EXPECT_TRUE(same_bits(a.result.x, b.result.x));
  EXPECT_EQ(a.result.objective, b.result.objective);
  const petab::Result r0 = petab::evaluate(pb, start, o);
  // 12 AdamW steps of 0.05 on the log10 scale from 0.2 above the published
  // optimum: the objective falls.
  EXPECT_LT(a.result.objective, -(r0.llh + r0.log_prior)) << a.brief_report();
  ASSERT_EQ(r0.log_prior, 0.0) << "Fujita has no priors";
  // llh and the objective come from one plain simulation at the fit's
  // point (objective = −(llh + log prior)); the bound is the integration
  // error they could differ by if they came from two (1e-6 relative; 2.0e-7
  // measured when the objective was the adjoint's forward pass).
  constexpr double kIntegrationTol = 1e-6;
  EXPECT_NEAR(a.llh, -a.result.objective, kIntegrationTol * std::abs(a.llh));
  EXPECT_EQ(a.result.steps, 4 * 3);
  EXPECT_EQ(a.result.epochs.size(), 4u);
}

TEST(PetabStochastic, GivesTheSerialFitsBitsOnAnyNumberOfRanks) {
  COSTATE_REQUIRE_PETAB(kCase2);
  const petab::Problem pb = read(kCase2);
  const opt::StochasticOptions fo{.epochs = 6, .batch = 1, .learning_rate = 0.1, .seed = 9};
  const petab::StochasticFit serial = petab::fit_stochastic(pb, fo, {}, {}, {}, nullptr, MPI_COMM_SELF);
  const petab::StochasticFit dist = petab::fit_stochastic(pb, fo, {}, {}, {}, nullptr, MPI_COMM_WORLD);
  EXPECT_TRUE(same_bits(serial.result.x, dist.result.x)) << world_size() << " ranks";
  EXPECT_EQ(serial.result.objective, dist.result.objective);
  EXPECT_EQ(serial.llh, dist.llh);
  // 0002's two conditions fitted by 12 single-condition steps: the
  // objective falls from the nominal point's.
  const petab::Result r0 = petab::evaluate(pb, pb.nominal_on_scale(), {});
  EXPECT_LT(serial.result.objective, -r0.llh);
}

}  // namespace
