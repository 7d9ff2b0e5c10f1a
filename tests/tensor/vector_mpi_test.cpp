// Distributed costate::Vector reductions (run on 2 and on 3 ranks).
//
// One deterministic global vector of n = 1001 entries is split contiguously
// and unevenly over the ranks (rank r owns a share proportional to r + 1).
// Every rank also holds the whole array as a serial Vector. The distributed
// reductions must
//   * agree with the serial ones to round-off (only the summation order
//     differs),
//   * equal, bit for bit, the per-rank partials added in rank order (the
//     determinism promised by tensor/reduce.hpp),
//   * give identical bits on every rank and on every repetition.
#include <gtest/gtest.h>

#include <mpi.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "costate/tensor/vector.hpp"

namespace {

using Vec = costate::Vector<double>;
constexpr std::size_t kGlobalN = 1001;

// The distributed and serial results differ only in the order the terms are
// added (per-rank partials, then the partials in rank order). Reordering a
// sum of n = 1001 terms moves it by at most ~n ε Σ|terms| in the worst case;
// for these smooth data the observed change is a few ε Σ|terms|, and 1e-14
// (≈ 45 ε) leaves room without hiding a lost or doubled entry, which would
// change the result by ~1e-3 relative.
constexpr double kSummationOrderTol = 1e-14;

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

// x_i = sin(0.37 i) + 1e-3 i;  y_i = cos(0.11 i) - 0.4;  w_i = 1/(1 + 0.01 i).
std::vector<double> global_x() {
  std::vector<double> v(kGlobalN);
  for (std::size_t i = 0; i < kGlobalN; ++i) v[i] = std::sin(0.37 * double(i)) + 1e-3 * double(i);
  return v;
}
std::vector<double> global_y() {
  std::vector<double> v(kGlobalN);
  for (std::size_t i = 0; i < kGlobalN; ++i) v[i] = std::cos(0.11 * double(i)) - 0.4;
  return v;
}
std::vector<double> global_w() {
  std::vector<double> v(kGlobalN);
  for (std::size_t i = 0; i < kGlobalN; ++i) v[i] = 1.0 / (1.0 + 0.01 * double(i));
  return v;
}

/// Contiguous split of [0, n): rank r owns [offset(r), offset(r+1)), shares
/// proportional to `weight(r)`.
struct Split {
  std::vector<std::size_t> offset;  // size + 1 entries
  std::size_t begin(int r) const { return offset[std::size_t(r)]; }
  std::size_t count(int r) const { return offset[std::size_t(r) + 1] - offset[std::size_t(r)]; }
};

template <class Weight>
Split make_split(std::size_t n, int size, Weight weight) {
  std::vector<std::size_t> cum(std::size_t(size) + 1, 0);
  for (int r = 0; r < size; ++r) cum[std::size_t(r) + 1] = cum[std::size_t(r)] + weight(r);
  Split s;
  for (int r = 0; r <= size; ++r) s.offset.push_back(n * cum[std::size_t(r)] / cum.back());
  return s;
}

Split uneven_split() {
  return make_split(kGlobalN, world_size(), [](int r) { return std::size_t(r) + 1; });
}
// Rank 0 owns nothing; the others share evenly.
Split split_with_empty_rank0() {
  return make_split(kGlobalN, world_size(), [](int r) { return std::size_t(r == 0 ? 0 : 1); });
}

/// This rank's part of `global`, as a distributed (MPI_COMM_WORLD) vector.
Vec local_part(const std::vector<double>& global, const Split& split,
               MPI_Comm comm = MPI_COMM_WORLD) {
  const int r = world_rank();
  return Vec::from(std::span<const double>(global).subspan(split.begin(r), split.count(r)), comm);
}

Vec serial(const std::vector<double>& global) { return Vec::from(std::span<const double>(global)); }

/// Every rank's value of `x`, in rank order.
std::vector<double> gather(double x) {
  std::vector<double> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  return all;
}

/// Σ_r partial_r, added in rank order from 0.0 (what reduce.hpp promises).
double rank_order_sum(double partial) {
  double s = 0.0;
  for (double p : gather(partial)) s += p;
  return s;
}

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

void expect_same_bits_on_every_rank(double x, const char* what) {
  for (double other : gather(x))
    EXPECT_EQ(bits(other), bits(x)) << what << ": rank " << world_rank() << " has " << x
                                    << ", another rank " << other;
}

double abs_sum(const std::vector<double>& a) {
  double s = 0.0;
  for (double v : a) s += std::abs(v);
  return s;
}

struct Reductions {
  double dot, sum, l2, wrms, max;
  std::size_t global_size;
};

Reductions reduce_all(const Vec& x, const Vec& y, const Vec& w) {
  return {costate::dot(x, y), costate::sum(x), costate::l2_norm(x), costate::wrms_norm(x, w),
          costate::max_norm(x), x.global_size()};
}

void check_against_serial(const Split& split) {
  const auto gx = global_x(), gy = global_y(), gw = global_w();
  const Vec x = local_part(gx, split), y = local_part(gy, split), w = local_part(gw, split);
  ASSERT_TRUE(x.distributed());
  ASSERT_EQ(x.size(), split.count(world_rank()));

  const Reductions dist = reduce_all(x, y, w);
  const Reductions ser = reduce_all(serial(gx), serial(gy), serial(gw));

  std::vector<double> xy(kGlobalN), xw2(kGlobalN);
  for (std::size_t i = 0; i < kGlobalN; ++i) {
    xy[i] = gx[i] * gy[i];
    xw2[i] = (gx[i] * gw[i]) * (gx[i] * gw[i]);
  }
  EXPECT_EQ(dist.global_size, kGlobalN);
  EXPECT_NEAR(dist.dot, ser.dot, kSummationOrderTol * abs_sum(xy));
  EXPECT_NEAR(dist.sum, ser.sum, kSummationOrderTol * abs_sum(gx));
  EXPECT_NEAR(dist.l2, ser.l2, kSummationOrderTol * ser.l2);
  EXPECT_NEAR(dist.wrms, ser.wrms, kSummationOrderTol * ser.wrms);
  // The maximum does not depend on the order: exact.
  EXPECT_EQ(dist.max, ser.max);
  // Sanity of the reference itself against the hand formulas.
  double max_abs = 0.0;
  for (double v : gx) max_abs = std::max(max_abs, std::abs(v));
  EXPECT_EQ(ser.max, max_abs);
  double sq = 0.0;
  for (double v : xw2) sq += v;
  EXPECT_NEAR(ser.wrms, std::sqrt(sq / double(kGlobalN)), kSummationOrderTol * ser.wrms);

  // Deterministic: the distributed dot and sum are exactly this rank's serial
  // partial, gathered, and added in rank order.
  const Vec x_local = local_part(gx, split, MPI_COMM_NULL);
  const Vec y_local = local_part(gy, split, MPI_COMM_NULL);
  EXPECT_EQ(bits(dist.dot), bits(rank_order_sum(costate::dot(x_local, y_local))));
  EXPECT_EQ(bits(dist.sum), bits(rank_order_sum(costate::sum(x_local))));

  // Identical bits on every rank.
  expect_same_bits_on_every_rank(dist.dot, "dot");
  expect_same_bits_on_every_rank(dist.sum, "sum");
  expect_same_bits_on_every_rank(dist.l2, "l2_norm");
  expect_same_bits_on_every_rank(dist.wrms, "wrms_norm");
  expect_same_bits_on_every_rank(dist.max, "max_norm");

  // Identical bits on every repetition.
  for (int rep = 0; rep < 5; ++rep) {
    const Reductions again = reduce_all(x, y, w);
    EXPECT_EQ(bits(again.dot), bits(dist.dot));
    EXPECT_EQ(bits(again.sum), bits(dist.sum));
    EXPECT_EQ(bits(again.l2), bits(dist.l2));
    EXPECT_EQ(bits(again.wrms), bits(dist.wrms));
    EXPECT_EQ(bits(again.max), bits(dist.max));
  }
}

TEST(DistributedVector, RunsOnSeveralRanks) {
  ASSERT_GE(world_size(), 2) << "run this test under mpiexec with 2 or more ranks";
  const Split s = uneven_split();
  EXPECT_EQ(s.offset.back(), kGlobalN);
  // The split really is uneven.
  EXPECT_NE(s.count(0), s.count(world_size() - 1));
}

TEST(DistributedVector, ReductionsMatchSerialUnevenSplit) { check_against_serial(uneven_split()); }

TEST(DistributedVector, ReductionsMatchSerialWithAnEmptyRank) {
  const Split s = split_with_empty_rank0();
  ASSERT_EQ(s.count(0), 0u);
  check_against_serial(s);
}

TEST(DistributedVector, ElementwiseOpsStayLocal) {
  // z = 2x - 3y on the distributed parts, then reduce: same as serially.
  const Split split = uneven_split();
  const auto gx = global_x(), gy = global_y();
  const Vec x = local_part(gx, split), y = local_part(gy, split);
  Vec z = x.clone();
  EXPECT_EQ(z.comm(), MPI_COMM_WORLD);
  costate::linear_sum(z, 2.0, x, -3.0, y);
  const int r = world_rank();
  for (std::size_t i = 0; i < z.size(); ++i) {
    const std::size_t g = split.begin(r) + i;
    EXPECT_EQ(z[i], 2.0 * gx[g] - 3.0 * gy[g]) << "global index " << g;
  }
  Vec zs = serial(gx).clone();
  costate::linear_sum(zs, 2.0, serial(gx), -3.0, serial(gy));
  std::vector<double> terms(kGlobalN);
  for (std::size_t i = 0; i < kGlobalN; ++i) terms[i] = std::abs(zs[i]);
  EXPECT_NEAR(costate::sum(z), costate::sum(zs), kSummationOrderTol * abs_sum(terms));
}

TEST(DistributedVector, NonFiniteOnOneRankIsSeenByAll) {
  const Split split = uneven_split();
  const int last = world_size() - 1;
  {
    Vec x = local_part(global_x(), split);
    if (world_rank() == last) x[x.size() / 2] = std::numeric_limits<double>::quiet_NaN();
    EXPECT_TRUE(std::isnan(costate::max_norm(x))) << "rank " << world_rank();
    EXPECT_FALSE(costate::all_finite(x)) << "rank " << world_rank();
  }
  {
    Vec x = local_part(global_x(), split);
    if (world_rank() == 0) x[0] = -std::numeric_limits<double>::infinity();
    EXPECT_EQ(costate::max_norm(x), std::numeric_limits<double>::infinity());
    EXPECT_FALSE(costate::all_finite(x)) << "rank " << world_rank();
  }
  {
    Vec x = local_part(global_x(), split);
    EXPECT_TRUE(costate::all_finite(x));
  }
}

}  // namespace
