// SUNDIALS' dense and band matrices and LU solvers with costate's operations
// (solvers/sundials/dense_matrix.hpp): each replaced operation gives the
// bits of SUNDIALS' own on the same data — the LU factors, pivots and
// solutions against SUNLinSolSetup/Solve_Dense (SUNDlsMat_denseGETRF /
// GETRS), including row swaps, ties and a singular matrix; zero, copy,
// c A + B, c A + I and A x against SUNMat*_Dense — and clones keep the
// replaced operations (CVODES saves its Jacobian in a clone).
#include <gtest/gtest.h>

#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_band.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_band.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sundials/dense_matrix.hpp"
#include "sundials/serial_vector.hpp"

namespace {

using namespace costate::detail;

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

class DenseMatrix : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_GE(SUNContext_Create(nullptr, &ctx_), 0);
    n_ = GetParam();
  }
  void TearDown() override { SUNContext_Free(&ctx_); }

  /// A matrix pair (SUNDIALS' operations, costate's) holding the same
  /// values: entries of both signs over six decades, a strong diagonal when
  /// `diagonal` (else none: pivoting swaps rows).
  struct Pair {
    SUNMatrix ref = nullptr, ours = nullptr;
    ~Pair() {
      if (ours) SUNMatDestroy(ours);
      if (ref) SUNMatDestroy(ref);
    }
  };
  void fill(Pair& p, unsigned seed, bool diagonal) const {
    const auto n = static_cast<sunindextype>(n_);
    p.ref = SUNDenseMatrix(n, n, ctx_);
    p.ours = new_dense_matrix(n, n, ctx_);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::uniform_int_distribution<int> e(-3, 3);
    for (int j = 0; j < n_; ++j)
      for (int i = 0; i < n_; ++i) {
        double v = u(rng) * std::pow(10.0, e(rng));
        if (i == j) v = diagonal ? v + 1e4 : 0.0;
        SM_ELEMENT_D(p.ref, i, j) = SM_ELEMENT_D(p.ours, i, j) = v;
      }
  }
  static void expect_same(SUNMatrix a, SUNMatrix b, const std::string& what) {
    const double* x = SM_DATA_D(a);
    const double* y = SM_DATA_D(b);
    for (sunindextype k = 0; k < SM_LDATA_D(a); ++k)
      ASSERT_EQ(bits(x[k]), bits(y[k])) << what << ", entry " << k << ": SUNDIALS " << x[k]
                                        << ", costate " << y[k];
  }
  static void expect_same(N_Vector a, N_Vector b, const std::string& what) {
    for (sunindextype k = 0; k < N_VGetLength(a); ++k)
      ASSERT_EQ(bits(N_VGetArrayPointer(a)[k]), bits(N_VGetArrayPointer(b)[k])) << what << ", entry " << k;
  }
  N_Vector vector(unsigned seed) const {
    N_Vector v = N_VNew_Serial(static_cast<sunindextype>(n_), ctx_);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int i = 0; i < n_; ++i) N_VGetArrayPointer(v)[i] = u(rng);
    return v;
  }

  SUNContext ctx_ = nullptr;
  int n_ = 0;
};

TEST_P(DenseMatrix, LuFactorsAndSolvesAsSundials) {
  for (bool diagonal : {true, false}) {
    if (!diagonal && n_ == 1) continue;  // a 1 × 1 zero: singular (the next test)
    Pair a;
    fill(a, 7 + diagonal, diagonal);
    N_Vector y = vector(1);
    SUNLinearSolver ref = SUNLinSol_Dense(y, a.ref, ctx_);
    SUNLinearSolver ours = new_dense_solver(y, a.ours, ctx_);
    ASSERT_EQ(SUNLinSolSetup(ref, a.ref), SUNLS_SUCCESS);
    ASSERT_EQ(SUNLinSolSetup(ours, a.ours), SUNLS_SUCCESS);
    const std::string what = diagonal ? "strong diagonal" : "zero diagonal (pivoting)";
    expect_same(a.ref, a.ours, "LU factors, " + what);
    const auto* pr = static_cast<SUNLinearSolverContent_Dense>(ref->content)->pivots;
    const auto* po = static_cast<SUNLinearSolverContent_Dense>(ours->content)->pivots;
    bool swapped = false;
    for (int k = 0; k < n_; ++k) {
      EXPECT_EQ(pr[k], po[k]) << "pivot " << k << ", " << what;
      swapped = swapped || po[k] != k;
    }
    if (!diagonal && n_ > 1) {
      EXPECT_TRUE(swapped) << "the test meant to pivot";
    }
    N_Vector b = vector(2), xr = vector(3), xo = vector(3);
    ASSERT_EQ(SUNLinSolSolve(ref, a.ref, xr, b, 0.0), SUNLS_SUCCESS);
    ASSERT_EQ(SUNLinSolSolve(ours, a.ours, xo, b, 0.0), SUNLS_SUCCESS);
    expect_same(xr, xo, "solution, " + what);
    for (N_Vector v : {b, xr, xo, y}) N_VDestroy(v);
    SUNLinSolFree(ours);
    SUNLinSolFree(ref);
  }
}

TEST_P(DenseMatrix, SingularMatrixFailsAtTheSameColumn) {
  Pair a;
  fill(a, 11, true);
  const int zero_col = n_ / 2;  // a zero column: no pivot there
  for (int i = 0; i < n_; ++i) SM_ELEMENT_D(a.ref, i, zero_col) = SM_ELEMENT_D(a.ours, i, zero_col) = 0.0;
  N_Vector y = vector(1);
  SUNLinearSolver ref = SUNLinSol_Dense(y, a.ref, ctx_);
  SUNLinearSolver ours = new_dense_solver(y, a.ours, ctx_);
  EXPECT_EQ(SUNLinSolSetup(ref, a.ref), SUNLS_LUFACT_FAIL);
  EXPECT_EQ(SUNLinSolSetup(ours, a.ours), SUNLS_LUFACT_FAIL);
  EXPECT_EQ(SUNLinSolLastFlag(ours), SUNLinSolLastFlag(ref));
  EXPECT_EQ(SUNLinSolLastFlag(ours), zero_col + 1);
  SUNLinSolFree(ours);
  SUNLinSolFree(ref);
  N_VDestroy(y);
}

TEST_P(DenseMatrix, MatrixOperationsAsSundials) {
  Pair a, b;
  fill(a, 21, true);
  fill(b, 22, false);
  ASSERT_EQ(SUNMatScaleAddI(-0.37, a.ref), SUNMAT_SUCCESS);
  ASSERT_EQ(SUNMatScaleAddI(-0.37, a.ours), SUNMAT_SUCCESS);
  expect_same(a.ref, a.ours, "c A + I");
  ASSERT_EQ(SUNMatScaleAdd(1.0 / 3, a.ref, b.ref), SUNMAT_SUCCESS);
  ASSERT_EQ(SUNMatScaleAdd(1.0 / 3, a.ours, b.ours), SUNMAT_SUCCESS);
  expect_same(a.ref, a.ours, "c A + B");
  N_Vector x = vector(5), yr = vector(6), yo = vector(6);
  ASSERT_EQ(SUNMatMatvec(a.ref, x, yr), SUNMAT_SUCCESS);
  ASSERT_EQ(SUNMatMatvec(a.ours, x, yo), SUNMAT_SUCCESS);
  expect_same(yr, yo, "A x");
  for (N_Vector v : {x, yr, yo}) N_VDestroy(v);
  // The clone CVODES keeps its saved Jacobian in: costate's operations.
  SUNMatrix c = SUNMatClone(a.ours);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ops->scaleaddi, a.ours->ops->scaleaddi);
  EXPECT_NE(c->ops->scaleaddi, a.ref->ops->scaleaddi);  // really replaced
  ASSERT_EQ(SUNMatCopy(a.ours, c), SUNMAT_SUCCESS);
  expect_same(a.ours, c, "copy into the clone");
  ASSERT_EQ(SUNMatZero(c), SUNMAT_SUCCESS);
  for (sunindextype k = 0; k < SM_LDATA_D(c); ++k) ASSERT_EQ(bits(SM_DATA_D(c)[k]), 0u);
  SUNMatDestroy(c);
}

// 1, 7 (odd), 40 (the size class of the DAE benchmark's dense systems).
INSTANTIATE_TEST_SUITE_P(Sizes, DenseMatrix, ::testing::Values(1, 7, 40));

/// Band matrices N × N with bandwidths (mu, ml): a pair (SUNDIALS'
/// operations, costate's) with the same random band entries, the fill
/// rows above the band holding garbage (the LU must clear them).
struct BandPair {
  SUNMatrix ref = nullptr, ours = nullptr;
  BandPair(sunindextype n, sunindextype mu, sunindextype ml, SUNContext ctx, unsigned seed,
           bool diagonal)
      : ref(SUNBandMatrix(n, mu, ml, ctx)), ours(new_band_matrix(n, mu, ml, ctx)) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (sunindextype k = 0; k < SM_LDATA_B(ref); ++k) SM_DATA_B(ref)[k] = SM_DATA_B(ours)[k] = 1e300;
    for (sunindextype j = 0; j < n; ++j)
      for (sunindextype i = std::max<sunindextype>(0, j - mu); i <= std::min(n - 1, j + ml); ++i) {
        double v = u(rng);
        if (i == j) v = diagonal ? v + 10.0 : 0.0;
        SM_ELEMENT_B(ref, i, j) = SM_ELEMENT_B(ours, i, j) = v;
      }
  }
  BandPair(const BandPair&) = delete;
  BandPair& operator=(const BandPair&) = delete;
  ~BandPair() {
    SUNMatDestroy(ours);
    SUNMatDestroy(ref);
  }
};

void expect_same_data(SUNMatrix a, SUNMatrix b, const std::string& what) {
  for (sunindextype k = 0; k < SM_LDATA_B(a); ++k)
    ASSERT_EQ(bits(SM_DATA_B(a)[k]), bits(SM_DATA_B(b)[k])) << what << ", storage entry " << k;
}

TEST(BandMatrix, LuFactorsAndSolvesAsSundials) {
  SUNContext ctx = nullptr;
  ASSERT_GE(SUNContext_Create(nullptr, &ctx), 0);
  // (n, mu, ml): tridiagonal (n even: with a zero diagonal an odd one is
  // singular), unsymmetric bands, a band wider than n.
  const sunindextype shapes[][3] = {{1, 0, 0}, {10, 1, 1}, {40, 2, 5}, {40, 6, 1}, {6, 7, 7}};
  for (const auto& sh : shapes) {
    for (bool diagonal : {true, false}) {
      if (!diagonal && (sh[0] == 1 || sh[2] == 0)) continue;  // nothing to pivot with
      const std::string what = "n " + std::to_string(sh[0]) + " mu " + std::to_string(sh[1]) +
                               " ml " + std::to_string(sh[2]) + (diagonal ? "" : ", pivoting");
      BandPair a(sh[0], sh[1], sh[2], ctx, static_cast<unsigned>(sh[0] + 3 * sh[1] + diagonal), diagonal);
      N_Vector y = N_VNew_Serial(sh[0], ctx);
      SUNLinearSolver ref = SUNLinSol_Band(y, a.ref, ctx);
      SUNLinearSolver ours = new_band_solver(y, a.ours, ctx);
      ASSERT_EQ(SUNLinSolSetup(ref, a.ref), SUNLS_SUCCESS) << what;
      ASSERT_EQ(SUNLinSolSetup(ours, a.ours), SUNLS_SUCCESS) << what;
      expect_same_data(a.ref, a.ours, "band LU factors, " + what);
      const auto* pr = static_cast<SUNLinearSolverContent_Band>(ref->content)->pivots;
      const auto* po = static_cast<SUNLinearSolverContent_Band>(ours->content)->pivots;
      for (sunindextype k = 0; k < sh[0]; ++k) EXPECT_EQ(pr[k], po[k]) << "pivot " << k << ", " << what;
      N_Vector b = N_VNew_Serial(sh[0], ctx), xr = N_VNew_Serial(sh[0], ctx), xo = N_VNew_Serial(sh[0], ctx);
      for (sunindextype i = 0; i < sh[0]; ++i) N_VGetArrayPointer(b)[i] = std::sin(1.0 + static_cast<double>(i));
      ASSERT_EQ(SUNLinSolSolve(ref, a.ref, xr, b, 0.0), SUNLS_SUCCESS);
      ASSERT_EQ(SUNLinSolSolve(ours, a.ours, xo, b, 0.0), SUNLS_SUCCESS);
      for (sunindextype i = 0; i < sh[0]; ++i)
        ASSERT_EQ(bits(N_VGetArrayPointer(xr)[i]), bits(N_VGetArrayPointer(xo)[i])) << "solution " << i << ", " << what;
      for (N_Vector v : {b, xr, xo, y}) N_VDestroy(v);
      SUNLinSolFree(ours);
      SUNLinSolFree(ref);
    }
  }
  SUNContext_Free(&ctx);
}

TEST(BandMatrix, SingularAndMatrixOperationsAsSundials) {
  SUNContext ctx = nullptr;
  ASSERT_GE(SUNContext_Create(nullptr, &ctx), 0);
  {
    BandPair a(12, 2, 3, ctx, 5, true);
    for (sunindextype i = 3; i <= 8; ++i)  // column 5's band: no pivot there
      SM_ELEMENT_B(a.ref, i, 5) = SM_ELEMENT_B(a.ours, i, 5) = 0.0;
    N_Vector y = N_VNew_Serial(12, ctx);
    SUNLinearSolver ref = SUNLinSol_Band(y, a.ref, ctx), ours = new_band_solver(y, a.ours, ctx);
    EXPECT_EQ(SUNLinSolSetup(ref, a.ref), SUNLS_LUFACT_FAIL);
    EXPECT_EQ(SUNLinSolSetup(ours, a.ours), SUNLS_LUFACT_FAIL);
    EXPECT_EQ(SUNLinSolLastFlag(ours), SUNLinSolLastFlag(ref));
    SUNLinSolFree(ours);
    SUNLinSolFree(ref);
    N_VDestroy(y);
  }
  BandPair a(30, 3, 2, ctx, 9, true);
  ASSERT_EQ(SUNMatScaleAddI(-0.37, a.ref), SUNMAT_SUCCESS);
  ASSERT_EQ(SUNMatScaleAddI(-0.37, a.ours), SUNMAT_SUCCESS);
  expect_same_data(a.ref, a.ours, "c A + I");
  SUNMatrix c = SUNMatClone(a.ours);  // CVODES' saved Jacobian
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ops->scaleaddi, a.ours->ops->scaleaddi);
  EXPECT_NE(c->ops->scaleaddi, a.ref->ops->scaleaddi);  // really replaced
  ASSERT_EQ(SUNMatCopy(a.ours, c), SUNMAT_SUCCESS);
  expect_same_data(a.ours, c, "copy into the clone");
  ASSERT_EQ(SUNMatZero(c), SUNMAT_SUCCESS);
  for (sunindextype k = 0; k < SM_LDATA_B(c); ++k) ASSERT_EQ(bits(SM_DATA_B(c)[k]), 0u);
  // Into a narrower band: SUNDIALS' copy widens it.
  SUNMatrix narrow = new_band_matrix(30, 1, 1, ctx);
  ASSERT_EQ(SUNMatCopy(a.ours, narrow), SUNMAT_SUCCESS);
  EXPECT_EQ(SM_UBAND_B(narrow), 3);
  EXPECT_EQ(bits(SM_ELEMENT_B(narrow, 4, 7)), bits(SM_ELEMENT_B(a.ours, 4, 7)));
  SUNMatDestroy(narrow);
  SUNMatDestroy(c);
  SUNContext_Free(&ctx);
}

}  // namespace
