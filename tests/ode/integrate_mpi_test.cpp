// ode::integrate_vector on a distributed costate::Vector (run on 2 ranks).
//
// The decoupled system y_i' = −λ_i y_i + sin t, i = 0..n−1, is split
// contiguously and unevenly over the ranks; each rank integrates its part
// with the unchanged steppers, the vector's reductions (error norm, initial
// step heuristic, finiteness check) being collective. Every rank also
// integrates the full system serially. The distributed run must take the
// same steps and give the same values as the serial one, and both must
// match the closed-form solution
//   y_i(t) = (λ_i sin t − cos t)/(λ_i² + 1) + (y_i(0) + 1/(λ_i² + 1)) e^{−λ_i t}.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "costate/ode/integrate.hpp"

namespace {

namespace ode = costate::ode;
using V = ode::HostVector;

constexpr std::size_t kN = 101;
constexpr double kT1 = 5.0;
const std::vector<double> kOutputTimes{1.0, 2.0, 3.0, 4.0, 5.0};

// The distributed error norm adds the per-rank partial sums in rank order,
// the serial one in index order: the norms differ in the last bit or so,
// which shifts each step size by ~1e-16 relative; over the run this moves
// the solution by a few ε times the problem's (contractive) sensitivity.
// 1e-13 relative is ~500 ε.
constexpr double kDistributedVsSerialRelTol = 1e-13;
// dopri5 at rtol = 1e-9 on this smooth, contractive system: the global error
// stays within a small multiple of the local tolerance (observed ≈ 0.1 rtol).
constexpr double kRtol = 1e-9;
constexpr double kExactErrorPerRtol = 10.0;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

double lambda(std::size_t i) { return 0.5 + 4.5 * double(i) / double(kN - 1); }
double initial(std::size_t i) { return 1.0 + 0.01 * double(i); }
double exact(std::size_t i, double t) {
  const double l = lambda(i), d = l * l + 1.0;
  return (l * std::sin(t) - std::cos(t)) / d + (initial(i) + 1.0 / d) * std::exp(-l * t);
}

/// Rank r owns [begin(r), begin(r + 1)), shares proportional to r + 1.
std::size_t begin(int r) {
  const int s = world_size();
  return kN * std::size_t(r * (r + 1) / 2) / std::size_t(s * (s + 1) / 2);
}

/// The rhs of entries [offset, offset + y.size()).
struct Rhs {
  std::size_t offset;
  void operator()(double t, const V& y, const V& dydt) const {
    const double forcing = std::sin(t);
    for (std::size_t i = 0; i < y.size(); ++i) dydt[i] = -lambda(offset + i) * y[i] + forcing;
  }
};

struct RunResult {
  ode::Summary summary;
  std::vector<double> t;
  std::vector<std::vector<double>> y;  // one local state per output
};

/// Integrates entries [first, first + count) on `comm` (MPI_COMM_NULL: serial).
RunResult run(std::size_t first, std::size_t count, MPI_Comm comm, const ode::IntegratorOptions& opt) {
  std::vector<double> y0(count);
  for (std::size_t i = 0; i < count; ++i) y0[i] = initial(first + i);
  V y = V::from(std::span<const double>(y0), comm);
  RunResult r;
  auto record = [&](std::size_t, double t, const V& state) {
    r.t.push_back(t);
    r.y.push_back(state.to_std_vector());
  };
  r.summary = ode::integrate_vector(Rhs{first}, 0.0, kT1, y, opt,
                                    std::span<const double>(kOutputTimes), record);
  return r;
}

std::vector<double> gather(double x) {
  std::vector<double> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  return all;
}

TEST(DistributedIntegration, SplitIsUneven) {
  ASSERT_GE(world_size(), 2) << "run under mpiexec with 2 or more ranks";
  EXPECT_NE(begin(1) - begin(0), kN - begin(world_size() - 1));
}

TEST(DistributedIntegration, AdaptiveDopri5MatchesSerialRun) {
  const int rank = world_rank();
  const std::size_t first = begin(rank), count = begin(rank + 1) - first;
  const ode::IntegratorOptions opt{.rtol = kRtol, .atol = 1e-12};

  const RunResult dist = run(first, count, MPI_COMM_WORLD, opt);
  const RunResult ser = run(0, kN, MPI_COMM_NULL, opt);
  ASSERT_TRUE(dist.summary.success()) << dist.summary.brief_report();
  ASSERT_TRUE(ser.summary.success()) << ser.summary.brief_report();

  // Same steps: the error norm is a global reduction.
  EXPECT_EQ(dist.summary.steps, ser.summary.steps);
  EXPECT_EQ(dist.summary.rejected_steps, ser.summary.rejected_steps);
  EXPECT_EQ(dist.summary.rhs_evaluations, ser.summary.rhs_evaluations);
  EXPECT_EQ(dist.summary.final_time, kT1);
  EXPECT_GT(dist.summary.steps, 10);

  ASSERT_EQ(dist.t, kOutputTimes);
  ASSERT_EQ(ser.t, kOutputTimes);
  double max_exact_err = 0.0;
  for (std::size_t j = 0; j < kOutputTimes.size(); ++j) {
    ASSERT_EQ(dist.y[j].size(), count);
    // Relative to the state's size (entries near a zero crossing have no
    // meaningful relative error of their own).
    double scale = 0.0;
    for (double v : ser.y[j]) scale = std::max(scale, std::abs(v));
    for (std::size_t i = 0; i < count; ++i) {
      const double s = ser.y[j][first + i];
      EXPECT_NEAR(dist.y[j][i], s, kDistributedVsSerialRelTol * scale)
          << "t = " << kOutputTimes[j] << ", global index " << first + i;
      max_exact_err = std::max(max_exact_err,
                               std::abs(dist.y[j][i] - exact(first + i, kOutputTimes[j])));
    }
  }
  // And it is the right answer, not just the same one (|y| ≤ 2 here).
  EXPECT_LE(max_exact_err, kExactErrorPerRtol * kRtol * 2.0);

  // Every rank agrees on the step count and the last step, bit for bit.
  for (double other : gather(double(dist.summary.steps)))
    EXPECT_EQ(other, double(dist.summary.steps));
  for (double other : gather(dist.summary.last_step))
    EXPECT_EQ(std::bit_cast<std::uint64_t>(other),
              std::bit_cast<std::uint64_t>(dist.summary.last_step));
}

TEST(DistributedIntegration, FixedStepRK4IsBitwiseTheSerialRun) {
  // Without an error norm, every operation is elementwise: the distributed
  // run is the serial one, entry for entry, to the bit.
  const int rank = world_rank();
  const std::size_t first = begin(rank), count = begin(rank + 1) - first;
  const ode::IntegratorOptions opt{.method = ode::Method::RK4, .dt = 0.01};
  const RunResult dist = run(first, count, MPI_COMM_WORLD, opt);
  const RunResult ser = run(0, kN, MPI_COMM_NULL, opt);
  ASSERT_TRUE(dist.summary.success());
  EXPECT_EQ(dist.summary.steps, 500);
  EXPECT_EQ(dist.summary.steps, ser.summary.steps);
  for (std::size_t j = 0; j < kOutputTimes.size(); ++j)
    for (std::size_t i = 0; i < count; ++i)
      EXPECT_EQ(dist.y[j][i], ser.y[j][first + i])
          << "t = " << kOutputTimes[j] << ", global index " << first + i;
}

}  // namespace
