// ad::Dual as the value type of Kokkos Views and of parallel_for /
// parallel_reduce (Kokkos is initialised by costate_test_main's Environment).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>

#include "costate/ad/dual.hpp"

namespace {

using costate::ad::Dual;
using D3 = Dual<double, 3>;
using D4 = Dual<double, 4>;

/// Sums of 1000 terms of size O(1), possibly associated differently by a
/// parallel backend: a few hundred ulps of the total at most.
constexpr double kSumTol = 1e-12;

/// A product of ten factors O(1): ten roundings of the value, a few more
/// in each tangent.
constexpr double kProdTol = 1e-14;

constexpr int kCount = 1000;

/// Entry i: a Dual function of the seeded x = (0.001 i; 1, 0, 0) and
/// y = (1; 0, 1, 0), computed in a kernel.
KOKKOS_INLINE_FUNCTION D3 entry(int i) {
  const D3 x = D3::seed(0.001 * i, 0);
  const D3 y = D3::seed(1.0, 1);
  return sin(x) * exp(-x * y) + sqrt(1 + x * x) * 0.5 + pow(y, 2) * x;
}

TEST(DualKokkos, ViewFilledInParallelForAndSummedWithParallelReduce) {
  Kokkos::View<D3*> v("duals", kCount);
  Kokkos::parallel_for(
      "fill", Kokkos::RangePolicy<>(0, kCount), KOKKOS_LAMBDA(int i) { v(i) = entry(i); });

  D3 sum;
  Kokkos::parallel_reduce(
      "sum", Kokkos::RangePolicy<>(0, kCount), KOKKOS_LAMBDA(int i, D3& acc) { acc += v(i); }, sum);

  D3 host;
  for (int i = 0; i < kCount; ++i) host += entry(i);
  EXPECT_NEAR(sum.value(), host.value(), kSumTol * std::fabs(host.value()));
  for (int k = 0; k < 3; ++k)
    EXPECT_NEAR(sum.tangent(k), host.tangent(k),
                kSumTol * std::max(1.0, std::fabs(host.tangent(k))));
  EXPECT_EQ(host.tangent(2), 0.0);  // direction 2 was never seeded
  EXPECT_GT(std::fabs(host.tangent(0)), 1.0);

  // The same through an explicit Sum reducer.
  D3 sum2;
  Kokkos::parallel_reduce(
      "sum2", Kokkos::RangePolicy<>(0, kCount), KOKKOS_LAMBDA(int i, D3& acc) { acc += v(i); },
      Kokkos::Sum<D3>(sum2));
  EXPECT_NEAR(sum2.value(), host.value(), kSumTol * std::fabs(host.value()));
  EXPECT_NEAR(sum2.tangent(1), host.tangent(1),
              kSumTol * std::max(1.0, std::fabs(host.tangent(1))));
}

TEST(DualKokkos, MaxMinAndProdReducersUseValues) {
  Kokkos::View<D3*> v("duals", kCount);
  Kokkos::parallel_for(
      "fill", Kokkos::RangePolicy<>(0, kCount), KOKKOS_LAMBDA(int i) {
        // values peak at i = 600 and are lowest at i = 0
        v(i) = D3{-(i - 600.0) * (i - 600.0), {double(i), 1.0, 2.0}};
      });
  D3 mx, mn;
  Kokkos::parallel_reduce(
      "max", Kokkos::RangePolicy<>(0, kCount),
      KOKKOS_LAMBDA(int i, D3& m) {
        if (v(i) > m) m = v(i);
      },
      Kokkos::Max<D3>(mx));
  Kokkos::parallel_reduce(
      "min", Kokkos::RangePolicy<>(0, kCount),
      KOKKOS_LAMBDA(int i, D3& m) {
        if (v(i) < m) m = v(i);
      },
      Kokkos::Min<D3>(mn));
  EXPECT_EQ(mx.value(), 0.0);
  EXPECT_EQ(mx.tangent(0), 600.0);  // the tangents of the maximal entry
  EXPECT_EQ(mn.value(), -360000.0);
  EXPECT_EQ(mn.tangent(0), 0.0);

  // Π (1 + x_k), x_k = (0.01; 1, 0, 0): value 1.01^10, derivative 10·1.01^9.
  D3 prod;
  Kokkos::parallel_reduce(
      "prod", Kokkos::RangePolicy<>(0, 10),
      KOKKOS_LAMBDA(int, D3& p) { p *= 1 + D3::seed(0.01, 0); }, Kokkos::Prod<D3>(prod));
  EXPECT_NEAR(prod.value(), std::pow(1.01, 10), kProdTol * std::pow(1.01, 10));
  EXPECT_NEAR(prod.tangent(0), 10 * std::pow(1.01, 9), kProdTol * 10 * std::pow(1.01, 9));
}

TEST(DualKokkos, ViewsDefaultConstructToZeroAndDeepCopy) {
  Kokkos::View<D4*> v("duals", 64);
  auto host = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(host, v);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(host(i).value(), 0.0);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(host(i).tangent(k), 0.0);
  }
  for (int i = 0; i < 64; ++i) host(i) = D4{double(i), {1.0, 2.0, 3.0, double(-i)}};
  Kokkos::deep_copy(v, host);
  Kokkos::parallel_for(
      "scale", Kokkos::RangePolicy<>(0, 64), KOKKOS_LAMBDA(int i) { v(i) *= 2; });
  auto back = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace{}, v);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(back(i).value(), 2.0 * i);
    EXPECT_EQ(back(i).tangent(3), -2.0 * i);
  }
  // Filling a View with one Dual.
  Kokkos::deep_copy(v, D4{1.0, {0.0, 0.0, 0.0, 1.0}});
  Kokkos::deep_copy(host, v);
  EXPECT_EQ(host(63).tangent(3), 1.0);
}

}  // namespace
