// Serial tests of costate::Vector and every operation in tensor/vector.hpp,
// each against a plain loop over std::vector<double> computing the same
// formula.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/tensor/vector.hpp"

namespace {

using Vec = costate::Vector<double>;
constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Elementwise combinations (axpy, linear_sum, linear_combination) perform
// the same roundings in the same order as the reference loops, so they agree
// exactly under GCC's ISO-mode -ffp-contract=off. The slack, relative to
// Σ|terms|, admits a compiler that contracts a*x + b into FMAs: that drops
// one rounding (≤ ε Σ|terms|) per term, and our sums have at most 17 terms.
constexpr double kCombinationTol = 17 * kEps;
// Reductions (dot, sum, norms) may add in a different order than the
// reference loop (Kokkos backends split ranges); the classical bound for
// n-term summation is n ε Σ|terms| and our vectors have n ≤ 64 entries.
constexpr double kReductionTol = 64 * kEps;

constexpr std::size_t kN = 37;  // odd, not a power of two: no lucky blocking

// Deterministic, sign-changing, non-trivial data.
std::vector<double> data_a() {
  std::vector<double> v(kN);
  for (std::size_t i = 0; i < kN; ++i) v[i] = std::sin(0.7 * double(i) + 0.3) * (1.0 + 0.1 * i);
  return v;
}
std::vector<double> data_b() {
  std::vector<double> v(kN);
  for (std::size_t i = 0; i < kN; ++i) v[i] = std::cos(1.3 * double(i)) - 0.25;
  return v;
}
// Nonzero everywhere (for divide).
std::vector<double> data_c() {
  std::vector<double> v(kN);
  for (std::size_t i = 0; i < kN; ++i) v[i] = 0.5 + 0.01 * double(i * i) - 0.3 * (i % 3 == 0);
  return v;
}

Vec make(const std::vector<double>& v) { return Vec::from(std::span<const double>(v)); }

// |a - b| <= tol * scale, reported with both values.
void expect_close(double actual, double expected, double tol, double scale, std::size_t i = 0) {
  EXPECT_LE(std::abs(actual - expected), tol * scale)
      << "entry " << i << ": actual " << actual << ", expected " << expected;
}

// ---------------------------------------------------------------- basics

TEST(Vector, ConstructionIsZeroedAndSerial) {
  Vec v(5);
  EXPECT_EQ(v.size(), 5u);
  EXPECT_EQ(v.global_size(), 5u);
  EXPECT_FALSE(v.distributed());
  EXPECT_EQ(v.comm(), MPI_COMM_NULL);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 0.0);
  Vec empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.global_size(), 0u);
}

TEST(Vector, FromCopiesValues) {
  const std::vector<double> src{1.5, -2.0, 3.25};
  Vec v = Vec::from(std::span<const double>(src));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.to_std_vector(), src);
  // A copy, not a view of src.
  EXPECT_NE(v.data(), src.data());
  Vec w = Vec::from({4.0, 5.0});
  EXPECT_EQ(w.to_std_vector(), (std::vector<double>{4.0, 5.0}));
  EXPECT_EQ(w.span().size(), 2u);
  EXPECT_EQ(w.span()[1], 5.0);
}

TEST(Vector, CopiesShareDataCloneDoesNot) {
  Vec a = Vec::from({1.0, 2.0, 3.0});
  Vec shared = a;  // View semantics
  shared[1] = 20.0;
  EXPECT_EQ(a[1], 20.0);

  Vec c = a.clone();
  EXPECT_EQ(c.size(), a.size());
  EXPECT_EQ(c.comm(), a.comm());
  EXPECT_NE(c.data(), a.data());
  EXPECT_EQ(c.view().label(), a.view().label());
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], 0.0) << "clone is zeroed";
  c[0] = 99.0;
  EXPECT_EQ(a[0], 1.0) << "writing the clone changed the original";
}

TEST(Vector, WrapsAnExistingViewWithoutCopying) {
  Vec::view_type view("wrapped", 4);
  Vec v(view);
  EXPECT_EQ(v.data(), view.data());
  v[2] = 7.0;
  EXPECT_EQ(view(2), 7.0);
}

// ---------------------------------------------------------------- elementwise

TEST(VectorOps, Fill) {
  Vec z(kN);
  costate::fill(z, -2.5);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], -2.5);
}

TEST(VectorOps, DeepCopyIsDistinctStorage) {
  const auto a = data_a();
  Vec x = make(a);
  Vec z(kN);
  costate::deep_copy(z, x);
  EXPECT_EQ(z.to_std_vector(), a);
  x[0] = 1234.0;
  EXPECT_EQ(z[0], a[0]);
}

TEST(VectorOps, Scale) {
  const auto a = data_a();
  Vec x = make(a);
  Vec z(kN);
  costate::scale(z, -3.0, x);
  // One multiplication per entry: exact.
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], -3.0 * a[i]) << i;
  costate::scale(x, 0.5, x);  // in place
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(x[i], 0.5 * a[i]) << i;
}

TEST(VectorOps, Axpy) {
  const auto a = data_a(), b = data_b();
  Vec x = make(a), y = make(b);
  costate::axpy(1.75, x, y);
  for (std::size_t i = 0; i < kN; ++i)
    expect_close(y[i], b[i] + 1.75 * a[i], kCombinationTol, std::abs(b[i]) + std::abs(1.75 * a[i]),
                 i);
  // x unchanged.
  EXPECT_EQ(x.to_std_vector(), a);
}

TEST(VectorOps, LinearSum) {
  const auto a = data_a(), b = data_b();
  Vec x = make(a), y = make(b), z(kN);
  costate::linear_sum(z, 2.0, x, -0.375, y);
  for (std::size_t i = 0; i < kN; ++i)
    expect_close(z[i], 2.0 * a[i] - 0.375 * b[i], kCombinationTol,
                 std::abs(2.0 * a[i]) + std::abs(0.375 * b[i]), i);
}

TEST(VectorOps, LinearSumAliasing) {
  const auto a = data_a(), b = data_b();
  {
    Vec x = make(a), y = make(b);
    costate::linear_sum(x, 2.0, x, -0.375, y);  // z == x
    for (std::size_t i = 0; i < kN; ++i)
      expect_close(x[i], 2.0 * a[i] - 0.375 * b[i], kCombinationTol,
                   std::abs(2.0 * a[i]) + std::abs(0.375 * b[i]), i);
  }
  {
    Vec x = make(a), y = make(b);
    costate::linear_sum(y, 2.0, x, -0.375, y);  // z == y
    for (std::size_t i = 0; i < kN; ++i)
      expect_close(y[i], 2.0 * a[i] - 0.375 * b[i], kCombinationTol,
                   std::abs(2.0 * a[i]) + std::abs(0.375 * b[i]), i);
  }
  {
    Vec x = make(a);
    costate::linear_sum(x, 1.0, x, 1.0, x);  // z == x == y: doubling is exact
    for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(x[i], 2.0 * a[i]) << i;
  }
}

// `terms` data vectors x_k,i = f(k, i) and coefficients c_k = (-1)^k (k+1)/3.
struct Combination {
  std::vector<std::vector<double>> data;
  std::vector<double> c;
  std::vector<Vec> vecs;
  explicit Combination(std::size_t terms) {
    for (std::size_t k = 0; k < terms; ++k) {
      std::vector<double> v(kN);
      for (std::size_t i = 0; i < kN; ++i)
        v[i] = std::sin(0.31 * double(k + 1) * double(i) + double(k)) + 0.05 * double(k);
      data.push_back(v);
      vecs.push_back(make(v));
      c.push_back((k % 2 == 0 ? 1.0 : -1.0) * double(k + 1) / 3.0);
    }
  }
  std::vector<const Vec*> pointers() const {
    std::vector<const Vec*> p;
    for (const auto& v : vecs) p.push_back(&v);
    return p;
  }
  // Reference Σ_k c_k x_k,i, left to right, and Σ_k |c_k x_k,i|.
  double expected(std::size_t i) const {
    double s = 0.0;
    for (std::size_t k = 0; k < c.size(); ++k) s += c[k] * data[k][i];
    return s;
  }
  double magnitude(std::size_t i) const {
    double s = 0.0;
    for (std::size_t k = 0; k < c.size(); ++k) s += std::abs(c[k] * data[k][i]);
    return s;
  }
};

void check_linear_combination(std::size_t terms) {
  SCOPED_TRACE("terms = " + std::to_string(terms));
  Combination comb(terms);
  const auto ptrs = comb.pointers();
  Vec z(kN);
  costate::fill(z, 123.0);  // must be overwritten, not accumulated into
  costate::linear_combination(z, std::span<const double>(comb.c),
                              std::span<const Vec* const>(ptrs));
  for (std::size_t i = 0; i < kN; ++i)
    expect_close(z[i], comb.expected(i), kCombinationTol, comb.magnitude(i), i);
  // The inputs are untouched.
  for (std::size_t k = 0; k < terms; ++k) EXPECT_EQ(comb.vecs[k].to_std_vector(), comb.data[k]);
}

void check_linear_combination_aliasing_first(std::size_t terms) {
  SCOPED_TRACE("terms = " + std::to_string(terms));
  Combination comb(terms);
  const auto ptrs = comb.pointers();
  // z is the first term itself.
  Vec z = comb.vecs[0];
  costate::linear_combination(z, std::span<const double>(comb.c),
                              std::span<const Vec* const>(ptrs));
  for (std::size_t i = 0; i < kN; ++i)
    expect_close(z[i], comb.expected(i), kCombinationTol, comb.magnitude(i), i);
}

TEST(VectorOps, LinearCombinationThreeVectors) { check_linear_combination(3); }

TEST(VectorOps, LinearCombinationElevenVectorsUsesSeveralPasses) {
  static_assert(11 > costate::kMaxFusedVectors, "11 terms must exceed one fused kernel");
  check_linear_combination(11);
  // Exactly one full pass, and one more than a pass.
  check_linear_combination(costate::kMaxFusedVectors);
  check_linear_combination(costate::kMaxFusedVectors + 1);
  check_linear_combination(2 * costate::kMaxFusedVectors + 1);
}

TEST(VectorOps, LinearCombinationZAliasesFirstTerm) {
  check_linear_combination_aliasing_first(3);
  check_linear_combination_aliasing_first(11);
}

TEST(VectorOps, LinearCombinationOfNothingIsZero) {
  Vec z = Vec::from({1.0, 2.0});
  costate::linear_combination(z, std::span<const double>(), std::span<const Vec* const>());
  EXPECT_EQ(z.to_std_vector(), (std::vector<double>{0.0, 0.0}));
}

TEST(VectorOps, LinearCombinationNeedsOneCoefficientPerVector) {
  Vec x(3), z(3);
  const std::array<double, 2> c{1.0, 2.0};
  const std::array<const Vec*, 1> v{&x};
  EXPECT_THROW(costate::linear_combination(z, std::span<const double>(c),
                                           std::span<const Vec* const>(v)),
               costate::Error);
}

TEST(VectorOps, ProductDivideAbsAddConstant) {
  const auto a = data_a(), b = data_b(), c = data_c();
  Vec x = make(a), y = make(b), w = make(c), z(kN);
  // Each is a single IEEE operation per entry: exact.
  costate::product(z, x, y);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], a[i] * b[i]) << i;
  costate::divide(z, x, w);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], a[i] / c[i]) << i;
  costate::abs(z, x);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], std::abs(a[i])) << i;
  bool saw_negative = false;
  for (double v : a) saw_negative |= v < 0;
  EXPECT_TRUE(saw_negative) << "test data must exercise abs of negatives";
  costate::add_constant(z, x, 0.125);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], a[i] + 0.125) << i;
  // In place.
  costate::product(x, x, x);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(x[i], a[i] * a[i]) << i;
}

TEST(VectorOps, Transform) {
  const auto a = data_a();
  Vec x = make(a), z(kN);
  costate::transform(z, x, KOKKOS_LAMBDA(double v) { return v * v; });
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], a[i] * a[i]) << i;
  const double shift = 3.0;
  costate::transform(z, x, KOKKOS_LAMBDA(double v) { return v < 0 ? shift : v; });
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(z[i], a[i] < 0 ? 3.0 : a[i]) << i;
}

// ---------------------------------------------------------------- reductions

TEST(VectorReductions, DotSumL2) {
  const auto a = data_a(), b = data_b();
  Vec x = make(a), y = make(b);
  double dot = 0.0, dot_mag = 0.0, sum = 0.0, sum_mag = 0.0, sq = 0.0;
  for (std::size_t i = 0; i < kN; ++i) {
    dot += a[i] * b[i];
    dot_mag += std::abs(a[i] * b[i]);
    sum += a[i];
    sum_mag += std::abs(a[i]);
    sq += a[i] * a[i];
  }
  expect_close(costate::dot(x, y), dot, kReductionTol, dot_mag);
  expect_close(costate::sum(x), sum, kReductionTol, sum_mag);
  // sqrt adds half an ulp; relative to the norm itself.
  expect_close(costate::l2_norm(x), std::sqrt(sq), kReductionTol, std::sqrt(sq));
  // Small exact cases.
  EXPECT_EQ(costate::l2_norm(Vec::from({3.0, 4.0})), 5.0);
  EXPECT_EQ(costate::dot(Vec::from({1.0, 2.0, 3.0}), Vec::from({4.0, -5.0, 6.0})), 12.0);
  EXPECT_EQ(costate::sum(Vec::from({0.5, 0.25, -2.0})), -1.25);
  EXPECT_EQ(costate::sum(Vec()), 0.0);
  EXPECT_EQ(costate::dot(Vec(), Vec()), 0.0);
}

TEST(VectorReductions, MaxNorm) {
  const auto a = data_a();
  double expected = 0.0;
  for (double v : a) expected = std::max(expected, std::abs(v));
  EXPECT_EQ(costate::max_norm(make(a)), expected);  // max is exact
  EXPECT_EQ(costate::max_norm(Vec::from({1.0, -7.5, 3.0})), 7.5);
  EXPECT_EQ(costate::max_norm(Vec::from({-0.0, 0.0})), 0.0);
  EXPECT_EQ(costate::max_norm(Vec()), 0.0);
  EXPECT_EQ(costate::max_norm(Vec::from({2.0, -kInf})), kInf);
}

TEST(VectorReductions, MaxNormPropagatesNaN) {
  // NaN anywhere — first, middle, last, before or after a larger value.
  for (std::size_t where : {std::size_t{0}, std::size_t{1}, kN / 2, kN - 1}) {
    auto a = data_a();
    a[where] = kNaN;
    if (where + 1 < kN) a[where + 1] = 1e300;  // a larger entry after the NaN
    EXPECT_TRUE(std::isnan(costate::max_norm(make(a)))) << "NaN at " << where;
  }
}

TEST(VectorReductions, WrmsNormMatchesHandFormula) {
  const auto a = data_a(), c = data_c();
  // sqrt( (1/N) Σ (x_i w_i)² )
  double s = 0.0;
  for (std::size_t i = 0; i < kN; ++i) s += (a[i] * c[i]) * (a[i] * c[i]);
  const double expected = std::sqrt(s / double(kN));
  expect_close(costate::wrms_norm(make(a), make(c)), expected, kReductionTol, expected);
  // sqrt((3² + 4²) / 2) with unit weights; and sqrt(((1·2)² + (2·0.5)²) / 2).
  EXPECT_EQ(costate::wrms_norm(Vec::from({3.0, 4.0}), Vec::from({1.0, 1.0})), std::sqrt(12.5));
  EXPECT_EQ(costate::wrms_norm(Vec::from({1.0, 2.0}), Vec::from({2.0, 0.5})), std::sqrt(2.5));
}

TEST(VectorReductions, WrmsNormOfEmptyVectorThrows) {
  EXPECT_THROW((void)costate::wrms_norm(Vec(), Vec()), costate::Error);
}

TEST(VectorReductions, AllFinite) {
  EXPECT_TRUE(costate::all_finite(make(data_a())));
  EXPECT_TRUE(costate::all_finite(Vec()));
  EXPECT_TRUE(costate::all_finite(Vec::from({std::numeric_limits<double>::max(), -1e-310})));
  EXPECT_FALSE(costate::all_finite(Vec::from({1.0, kNaN, 2.0})));
  EXPECT_FALSE(costate::all_finite(Vec::from({1.0, 2.0, kInf})));
  EXPECT_FALSE(costate::all_finite(Vec::from({-kInf, 2.0})));
}

// ---------------------------------------------------------------- size checks

TEST(VectorOps, SizeMismatchThrows) {
  Vec a(4), b(5), c(4);
  EXPECT_THROW(costate::deep_copy(a, b), costate::Error);
  EXPECT_THROW(costate::scale(a, 2.0, b), costate::Error);
  EXPECT_THROW(costate::axpy(2.0, a, b), costate::Error);
  EXPECT_THROW(costate::linear_sum(a, 1.0, b, 1.0, c), costate::Error);
  EXPECT_THROW(costate::linear_sum(a, 1.0, c, 1.0, b), costate::Error);
  EXPECT_THROW(costate::product(a, b, c), costate::Error);
  EXPECT_THROW(costate::divide(a, c, b), costate::Error);
  EXPECT_THROW(costate::abs(a, b), costate::Error);
  EXPECT_THROW(costate::add_constant(a, b, 1.0), costate::Error);
  EXPECT_THROW(costate::transform(a, b, KOKKOS_LAMBDA(double v) { return v; }), costate::Error);
  EXPECT_THROW((void)costate::dot(a, b), costate::Error);
  EXPECT_THROW((void)costate::wrms_norm(a, b), costate::Error);
  {
    const std::array<double, 2> coef{1.0, 1.0};
    const std::array<const Vec*, 2> v{&c, &b};
    EXPECT_THROW(costate::linear_combination(a, std::span<const double>(coef),
                                             std::span<const Vec* const>(v)),
                 costate::Error);
  }
  // The message names the operation and both sizes.
  try {
    costate::axpy(2.0, a, b);
    FAIL();
  } catch (const costate::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("axpy"), std::string::npos) << what;
    EXPECT_NE(what.find("= 4"), std::string::npos) << what;
    EXPECT_NE(what.find("= 5"), std::string::npos) << what;
  }
}

}  // namespace
