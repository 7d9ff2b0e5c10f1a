// The SUNDIALS serial vectors costate hands CVODES, IDAS and KINSOL
// (solvers/sundials/serial_vector.hpp): every operation they replace gives
// the same bits as SUNDIALS' own serial module on the same data — including
// N_VLinearSum's special cases (a, b = ±1; a = ±b; z aliasing x or y), NaN
// and zero entries — and clones carry the replaced operations, so CVODES'
// internal vectors (all cloned from the ones costate makes) use them.
#include <gtest/gtest.h>

#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sundials/serial_vector.hpp"

namespace {

using costate::detail::new_serial_vector;

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

/// A pair of vectors holding the same values: `ref` is a plain serial
/// vector (SUNDIALS' operations), `ours` a new_serial_vector.
struct Pair {
  N_Vector ref = nullptr, ours = nullptr;
  Pair(std::size_t n, SUNContext ctx, const std::vector<double>& values)
      : ref(N_VNew_Serial(static_cast<sunindextype>(n), ctx)), ours(new_serial_vector(n, ctx)) {
    for (std::size_t i = 0; i < n; ++i)
      N_VGetArrayPointer(ref)[i] = N_VGetArrayPointer(ours)[i] = values[i];
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    N_VDestroy(ours);
    N_VDestroy(ref);
  }
};

class SerialVector : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    ASSERT_GE(SUNContext_Create(nullptr, &ctx_), 0);
    n_ = GetParam();
  }
  void TearDown() override { SUNContext_Free(&ctx_); }

  /// Values of both signs and magnitudes from 1e-12 to 1e6, with exact
  /// zeros at every 5th entry when `zeros`.
  std::vector<double> values(unsigned seed, bool zeros = false) const {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> mant(-1.0, 1.0);
    std::uniform_int_distribution<int> expo(-12, 6);
    std::vector<double> v(n_);
    for (std::size_t i = 0; i < n_; ++i)
      v[i] = (zeros && i % 5 == 2) ? 0.0 : mant(rng) * std::pow(10.0, expo(rng));
    return v;
  }

  /// Element for element, the same bits in both vectors of `p`.
  static void expect_same_bits(const Pair& p, const std::string& what) {
    const double* r = N_VGetArrayPointer(p.ref);
    const double* o = N_VGetArrayPointer(p.ours);
    const auto n = static_cast<std::size_t>(N_VGetLength(p.ref));
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(bits(r[i]), bits(o[i])) << what << ", entry " << i << ": SUNDIALS " << r[i]
                                        << ", costate " << o[i];
  }

  SUNContext ctx_ = nullptr;
  std::size_t n_ = 0;
};

TEST_P(SerialVector, LinearSumRoundsAsSundialsInEveryCase) {
  // (a, b) through each of the serial module's branches: a and/or b = ±1,
  // a = b, a = −b, zero, general.
  const double pairs[][2] = {{1, 1},     {1, -1},   {-1, 1},     {-1, -1},   {0.3, 0.3},
                             {0.3, -0.3}, {-0.7, 0.7}, {2.5, 1},  {1, 2.5},   {-1, 0.4},
                             {0.4, -1},  {0.3, 0.7}, {0, 0.5},    {1.0 / 3, -2.0 / 7}};
  // z separate, z = x, z = y.
  for (int alias = 0; alias < 3; ++alias) {
    for (const auto& ab : pairs) {
      Pair x(n_, ctx_, values(1)), y(n_, ctx_, values(2)), z(n_, ctx_, values(3));
      N_Vector zr = alias == 1 ? x.ref : alias == 2 ? y.ref : z.ref;
      N_Vector zo = alias == 1 ? x.ours : alias == 2 ? y.ours : z.ours;
      N_VLinearSum(ab[0], x.ref, ab[1], y.ref, zr);
      N_VLinearSum(ab[0], x.ours, ab[1], y.ours, zo);
      const Pair& out = alias == 1 ? x : alias == 2 ? y : z;
      expect_same_bits(out, "N_VLinearSum(" + std::to_string(ab[0]) + ", x, " +
                                std::to_string(ab[1]) + ", y, z), alias " +
                                std::to_string(alias));
    }
  }
}

TEST_P(SerialVector, ElementwiseOperationsRoundAsSundials) {
  for (double c : {1.0, -1.0, 0.3, -2.5e-7}) {
    Pair x(n_, ctx_, values(4)), z(n_, ctx_, values(5));
    N_VScale(c, x.ref, z.ref);
    N_VScale(c, x.ours, z.ours);
    expect_same_bits(z, "N_VScale(" + std::to_string(c) + ")");
    N_VScale(c, x.ref, x.ref);  // in place
    N_VScale(c, x.ours, x.ours);
    expect_same_bits(x, "N_VScale in place");
    N_VAddConst(x.ref, c, z.ref);
    N_VAddConst(x.ours, c, z.ours);
    expect_same_bits(z, "N_VAddConst");
    N_VConst(c, z.ref);
    N_VConst(c, z.ours);
    expect_same_bits(z, "N_VConst");
    N_VCompare(std::fabs(c) * 1e-3, x.ref, z.ref);
    N_VCompare(std::fabs(c) * 1e-3, x.ours, z.ours);
    expect_same_bits(z, "N_VCompare");
  }
  Pair x(n_, ctx_, values(6)), y(n_, ctx_, values(7)), z(n_, ctx_, values(8));
  N_VProd(x.ref, y.ref, z.ref);
  N_VProd(x.ours, y.ours, z.ours);
  expect_same_bits(z, "N_VProd");
  N_VDiv(x.ref, y.ref, z.ref);
  N_VDiv(x.ours, y.ours, z.ours);
  expect_same_bits(z, "N_VDiv");
  N_VAbs(x.ref, z.ref);
  N_VAbs(x.ours, z.ours);
  expect_same_bits(z, "N_VAbs");
  N_VInv(x.ref, z.ref);
  N_VInv(x.ours, z.ours);
  expect_same_bits(z, "N_VInv");
  // N_VInvTest with zeros: z untouched there, false returned.
  Pair w(n_, ctx_, values(9, true)), u(n_, ctx_, values(10));
  const bool ref_ok = N_VInvTest(w.ref, u.ref) != SUNFALSE;
  const bool our_ok = N_VInvTest(w.ours, u.ours) != SUNFALSE;
  EXPECT_EQ(ref_ok, our_ok);
  EXPECT_EQ(our_ok, n_ < 3);  // a zero at entry 2 when n ≥ 3
  expect_same_bits(u, "N_VInvTest");
}

TEST_P(SerialVector, ReductionsRoundAsSundials) {
  Pair x(n_, ctx_, values(11)), y(n_, ctx_, values(12)), w(n_, ctx_, values(13));
  std::vector<double> mask(n_);
  for (std::size_t i = 0; i < n_; ++i) mask[i] = static_cast<double>(i % 3) - 1.0;  // −1, 0, 1
  Pair id(n_, ctx_, mask);
  const auto same = [](double r, double o, const char* what) {
    EXPECT_EQ(bits(r), bits(o)) << what << ": SUNDIALS " << r << ", costate " << o;
  };
  same(N_VDotProd(x.ref, y.ref), N_VDotProd(x.ours, y.ours), "N_VDotProd");
  same(N_VMaxNorm(x.ref), N_VMaxNorm(x.ours), "N_VMaxNorm");
  same(N_VWrmsNorm(x.ref, w.ref), N_VWrmsNorm(x.ours, w.ours), "N_VWrmsNorm");
  same(N_VWrmsNormMask(x.ref, w.ref, id.ref), N_VWrmsNormMask(x.ours, w.ours, id.ours),
       "N_VWrmsNormMask");
  same(N_VMin(x.ref), N_VMin(x.ours), "N_VMin");
  same(N_VWL2Norm(x.ref, w.ref), N_VWL2Norm(x.ours, w.ours), "N_VWL2Norm");
  same(N_VL1Norm(x.ref), N_VL1Norm(x.ours), "N_VL1Norm");
  same(N_VWSqrSumLocal(x.ref, w.ref), N_VWSqrSumLocal(x.ours, w.ours), "N_VWSqrSumLocal");
  same(N_VWSqrSumMaskLocal(x.ref, w.ref, id.ref), N_VWSqrSumMaskLocal(x.ours, w.ours, id.ours),
       "N_VWSqrSumMaskLocal");
  same(N_VDotProdLocal(x.ref, y.ref), N_VDotProdLocal(x.ours, y.ours), "N_VDotProdLocal");
  // A NaN entry: the max norm and the minimum skip it exactly as SUNDIALS
  // does (comparisons with NaN are false); the sums carry it.
  N_VGetArrayPointer(x.ref)[n_ / 2] = N_VGetArrayPointer(x.ours)[n_ / 2] =
      std::numeric_limits<double>::quiet_NaN();
  same(N_VMaxNorm(x.ref), N_VMaxNorm(x.ours), "N_VMaxNorm with a NaN");
  same(N_VMin(x.ref), N_VMin(x.ours), "N_VMin with a NaN");
  EXPECT_TRUE(std::isnan(N_VWrmsNorm(x.ours, w.ours)));
}

TEST_P(SerialVector, ComposedOperationsAndClonesUseTheReplacedOnes) {
  // Fused operations are left to SUNDIALS, which composes them from
  // N_VScale and N_VLinearSum — so they too agree with the serial module.
  Pair a(n_, ctx_, values(14)), b(n_, ctx_, values(15)), c(n_, ctx_, values(16)),
      z(n_, ctx_, values(17));
  double coef[3] = {0.25, -1.5, 1.0 / 3};
  N_Vector xr[3] = {a.ref, b.ref, c.ref}, xo[3] = {a.ours, b.ours, c.ours};
  ASSERT_EQ(N_VLinearCombination(3, coef, xr, z.ref), 0);
  ASSERT_EQ(N_VLinearCombination(3, coef, xo, z.ours), 0);
  expect_same_bits(z, "N_VLinearCombination");
  ASSERT_EQ(N_VScaleAddMulti(3, coef, a.ref, xr, xr), 0);
  ASSERT_EQ(N_VScaleAddMulti(3, coef, a.ours, xo, xo), 0);
  expect_same_bits(b, "N_VScaleAddMulti");
  expect_same_bits(c, "N_VScaleAddMulti");

  N_Vector clone = N_VClone(a.ours);
  ASSERT_NE(clone, nullptr);
  EXPECT_EQ(N_VGetVectorID(clone), SUNDIALS_NVEC_SERIAL);
  EXPECT_EQ(clone->ops->nvlinearsum, a.ours->ops->nvlinearsum);
  EXPECT_EQ(clone->ops->nvwrmsnorm, a.ours->ops->nvwrmsnorm);
  EXPECT_NE(clone->ops->nvlinearsum, a.ref->ops->nvlinearsum);  // really replaced
  N_VDestroy(clone);
}

// 1 (the smallest), 7 (odd, shorter than a vector register loop's unroll),
// 503 (Chen_MSB2009's size class, odd).
INSTANTIATE_TEST_SUITE_P(Sizes, SerialVector, ::testing::Values(1, 7, 503));

}  // namespace
