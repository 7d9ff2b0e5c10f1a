// Sparse Jacobians: sparsity detection on ad::IndexSet, distance-2 column
// colouring (every order valid; banded patterns take exactly their row width
// in colours, whatever n), and compressed forward mode equal to the dense
// Jacobian on stencils and on random patterns (fixed seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <type_traits>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/ad/sparse_jacobian.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"

namespace {

namespace ad = costate::ad;

template <class T>
using Scalar = std::decay_t<T>;

/// Compressed and dense forward mode compute every entry from the same
/// partials; only the order of tangent sums differs (one column per colour
/// has a non-zero in a row, the others add exact zeros): equal to round-off.
constexpr double kSameModeTol = 1e-14;

const ad::ColoringOrder kOrders[] = {ad::ColoringOrder::Natural, ad::ColoringOrder::LargestFirst,
                                     ad::ColoringOrder::SmallestLast};

/// Banded stencil with half-bandwidth k: F_i = Σ_{|d|≤k} w_d x_{i+d}·(1 + 0.1 x_i)
/// + exp(x_i)  (a Bratu-like residual for k = 1).
struct Banded {
  int k = 1;
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::exp;
    const int n = static_cast<int>(x.size());
    std::vector<T> f(x.size());
    for (int i = 0; i < n; ++i) {
      T s = exp(x[static_cast<std::size_t>(i)]);
      for (int d = -k; d <= k; ++d) {
        const int j = i + d;
        if (j < 0 || j >= n) continue;
        const double w = d == 0 ? -2.0 * k : 1.0 / (1 + std::abs(d));
        s += w * x[static_cast<std::size_t>(j)] * (1.0 + 0.1 * x[static_cast<std::size_t>(i)]);
      }
      f[static_cast<std::size_t>(i)] = s;
    }
    return f;
  }
  ad::SparsityPattern pattern(int n) const {
    std::vector<std::pair<int, int>> e;
    for (int i = 0; i < n; ++i)
      for (int j = std::max(0, i - k); j <= std::min(n - 1, i + k); ++j) e.emplace_back(i, j);
    return ad::SparsityPattern::from_entries(n, n, e);
  }
};

/// Random structure: F_i = Σ_{j ∈ S_i} sin(x_j)·x_{i mod n} + x_{i mod n}², with
/// S_i a random set of `per_row` columns (m × n, fixed seed).
struct RandomSparse {
  int m = 0, n = 0;
  std::vector<std::vector<int>> sets;
  RandomSparse(int m_, int n_, int per_row, unsigned seed) : m(m_), n(n_), sets(static_cast<std::size_t>(m_)) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> col(0, n - 1);
    for (auto& s : sets)
      for (int r = 0; r < per_row; ++r) s.push_back(col(gen));  // repeats allowed
  }
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::sin;
    std::vector<T> f(static_cast<std::size_t>(m));
    for (int i = 0; i < m; ++i) {
      const auto d = static_cast<std::size_t>(i % n);
      T s = x[d] * x[d];
      for (int j : sets[static_cast<std::size_t>(i)]) s += sin(x[static_cast<std::size_t>(j)]) * x[d];
      f[static_cast<std::size_t>(i)] = s;
    }
    return f;
  }
  ad::SparsityPattern pattern() const {
    std::vector<std::vector<int>> rows = sets;
    for (int i = 0; i < m; ++i) rows[static_cast<std::size_t>(i)].push_back(i % n);
    return ad::SparsityPattern::from_rows(n, rows);
  }
};

std::vector<double> random_point(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> x(n);
  for (double& a : x) a = u(gen);
  return x;
}

/// max |S − D| over all entries.
double max_difference(const Eigen::SparseMatrix<double>& S, const Eigen::MatrixXd& D) {
  const Eigen::MatrixXd Sd = Eigen::MatrixXd(S);
  return (Sd - D).cwiseAbs().maxCoeff();
}

/// The structure of an Eigen sparse matrix as a pattern.
ad::SparsityPattern structure(const Eigen::SparseMatrix<double>& S) {
  std::vector<std::pair<int, int>> e;
  for (int j = 0; j < S.outerSize(); ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(S, j); it; ++it)
      e.emplace_back(static_cast<int>(it.row()), static_cast<int>(it.col()));
  return ad::SparsityPattern::from_entries(static_cast<int>(S.rows()), static_cast<int>(S.cols()), e);
}

// ------------------------------------------------------------------ pattern

TEST(SparsityPattern, BuildTransposeAndValidate) {
  const auto p = ad::SparsityPattern::from_entries(3, 4, {{2, 1}, {0, 3}, {0, 0}, {2, 1}, {1, 2}});
  EXPECT_EQ(p.nnz(), 4);  // the duplicate (2,1) merged
  EXPECT_EQ(p.row_ptr, (std::vector<int>{0, 2, 3, 4}));
  EXPECT_EQ(p.col_idx, (std::vector<int>{0, 3, 2, 1}));
  EXPECT_TRUE(p.contains(0, 3));
  EXPECT_FALSE(p.contains(1, 3));
  EXPECT_EQ(p.max_row_nnz(), 2);
  const auto t = p.transpose();
  EXPECT_EQ(t.rows, 4);
  EXPECT_EQ(t.cols, 3);
  EXPECT_EQ(t.row_ptr, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.col_idx, (std::vector<int>{0, 2, 1, 0}));
  EXPECT_EQ(t.transpose(), p);
  EXPECT_NO_THROW(p.validate());
  EXPECT_THROW(ad::SparsityPattern::from_entries(3, 4, {{3, 0}}), costate::Error);
  auto bad = p;
  bad.col_idx = {3, 0, 2, 1};  // row 0 not increasing
  EXPECT_THROW(bad.validate(), costate::Error);
  bad = p;
  bad.row_ptr.pop_back();
  EXPECT_THROW(bad.validate(), costate::Error);
  EXPECT_EQ(ad::SparsityPattern::dense(2, 3).nnz(), 6);
}

TEST(SparsityPattern, ColoringOrderNames) {
  for (auto o : kOrders) EXPECT_EQ(ad::coloring_order_from_string(ad::to_string(o)), o);
  try {
    (void)ad::coloring_order_from_string("largest");
    FAIL() << "expected costate::Error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("natural, largest_first, smallest_last"), std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------- detection

TEST(SparsityDetection, StencilAndRandomPatternsAreDetectedExactly) {
  for (int k : {1, 2}) {
    const Banded F{k};
    for (int n : {10, 1000}) {
      const auto x = random_point(static_cast<std::size_t>(n), 7);
      EXPECT_EQ(ad::detect_sparsity(F, x), F.pattern(n)) << "k = " << k << ", n = " << n;
    }
  }
  for (unsigned seed : {1u, 2u, 3u}) {
    const RandomSparse F(40, 25, 3, seed);
    EXPECT_EQ(ad::detect_sparsity(F, random_point(25, seed)), F.pattern()) << "seed " << seed;
  }
}

TEST(SparsityDetection, FollowsTheBranchTakenAtX) {
  const auto F = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    using std::floor;
    using std::max;
    std::vector<T> f(4);
    if (x[0] > 0.0)
      f[0] = x[1] * 2.0;
    else
      f[0] = x[2] + 1.0;
    f[1] = floor(x[1]) + x[0];  // floor has derivative 0: no dependency on x1
    f[2] = max(x[1], x[2]);     // both operands kept
    f[3] = 3.0;                 // constant row
    return f;
  };
  const auto pos = ad::detect_sparsity(F, {1.0, 0.5, -0.5});
  EXPECT_EQ(pos, ad::SparsityPattern::from_rows(3, {{1}, {0}, {1, 2}, {}}));
  const auto neg = ad::detect_sparsity(F, {-1.0, 0.5, -0.5});
  EXPECT_EQ(neg, ad::SparsityPattern::from_rows(3, {{2}, {0}, {1, 2}, {}}));
}

TEST(SparsityDetection, IndexSetCarriesTheDoubleValue) {
  const auto a = ad::IndexSet::input(0.3, 4), b = ad::IndexSet::input(-1.2, 1);
  using std::exp;
  using std::pow;
  using std::sin;
  const ad::IndexSet y = pow(a, 2) * sin(b) / (1.0 + exp(a - b)) - 2 * b;
  EXPECT_EQ(y.value(), std::pow(0.3, 2) * std::sin(-1.2) / (1.0 + std::exp(0.3 - -1.2)) - 2 * -1.2);
  EXPECT_EQ(y.indices(), (std::vector<std::int32_t>{1, 4}));
  ad::IndexSet s = 0.0;
  for (int j = 9; j >= 0; --j) s += ad::IndexSet::input(1.0, j);  // unions out of order
  EXPECT_EQ(s.indices().size(), 10u);
  EXPECT_TRUE(std::is_sorted(s.indices().begin(), s.indices().end()));
  EXPECT_EQ(s.value(), 10.0);
}

// ---------------------------------------------------------------- colouring

/// A hub: row 0 and column 0 full, a tridiagonal elsewhere. Row 0 forces n
/// colours on any colouring; without it the rest needs 3 or 4.
ad::SparsityPattern hub_pattern(int n) {
  std::vector<std::pair<int, int>> e;
  for (int j = 0; j < n; ++j) e.emplace_back(0, j);
  for (int i = 1; i < n; ++i) {
    e.emplace_back(i, 0);
    for (int j = std::max(1, i - 1); j <= std::min(n - 1, i + 1); ++j) e.emplace_back(i, j);
  }
  return ad::SparsityPattern::from_entries(n, n, e);
}

TEST(Coloring, DenseRowSplitTakesTheHubRowByOneSweep) {
  constexpr int n = 100, chunk = 8;
  const ad::SparsityPattern p = hub_pattern(n);
  EXPECT_EQ(ad::color_columns(p).colors, n);  // the hub row's length
  // One sweep at half a pass: 1 dense row, ≤ 4 colours (1 pass) + 0.75
  // against 13 passes.
  const ad::DenseRowSplit s = ad::split_dense_rows(p, chunk, 0.5, 0.25);
  ASSERT_EQ(s.dense_rows, std::vector<int>{0});
  EXPECT_LE(s.coloring.colors, 4);
  EXPECT_DOUBLE_EQ(s.cost, 1.0 + 0.25 + 0.5);
  // The colouring is valid for every row but the dense one (and not for
  // the whole pattern).
  std::vector<std::pair<int, int>> rest;
  for (int i = 1; i < n; ++i)
    for (int j : p.row(i)) rest.emplace_back(i, j);
  EXPECT_TRUE(ad::is_valid_coloring(ad::SparsityPattern::from_entries(n, n, rest), s.coloring));
  EXPECT_FALSE(ad::is_valid_coloring(p, s.coloring));
  // Sweeps dearer than the passes they save: no split, the plain colouring.
  const ad::DenseRowSplit none = ad::split_dense_rows(p, chunk, 20.0, 0.0);
  EXPECT_TRUE(none.dense_rows.empty());
  EXPECT_EQ(none.coloring.colors, n);
  EXPECT_DOUBLE_EQ(none.cost, 13.0);
  // Rows no longer than a chunk: nothing to split.
  const ad::DenseRowSplit band = ad::split_dense_rows(Banded{2}.pattern(n), chunk, 0.5, 0.25);
  EXPECT_TRUE(band.dense_rows.empty());
  EXPECT_EQ(band.coloring.colors, 5);
}

TEST(Coloring, BandedPatternsNeedTheirRowWidthWhateverN) {
  // Half-bandwidth k: rows hold 2k+1 columns, so ≥ 2k+1 colours; natural and
  // smallest-last orders reach it (j mod (2k+1) is a colouring).
  for (int k : {1, 2, 3}) {
    for (int n : {10, 1000}) {
      const auto p = Banded{k}.pattern(n);
      for (auto o : {ad::ColoringOrder::Natural, ad::ColoringOrder::SmallestLast}) {
        const auto c = ad::color_columns(p, {.order = o});
        EXPECT_EQ(c.colors, 2 * k + 1) << "k = " << k << ", n = " << n << ", " << ad::to_string(o);
        EXPECT_EQ(c.lower_bound, 2 * k + 1);
        EXPECT_TRUE(ad::is_valid_coloring(p, c));
      }
      const auto lf = ad::color_columns(p, {.order = ad::ColoringOrder::LargestFirst});
      EXPECT_TRUE(ad::is_valid_coloring(p, lf));
      EXPECT_GE(lf.colors, 2 * k + 1);
    }
  }
}

TEST(Coloring, EveryOrderGivesAValidColoringOfRandomPatterns) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const auto p = RandomSparse(60, 45, 4, seed).pattern();
    for (auto o : kOrders) {
      const auto c = ad::color_columns(p, {.order = o});
      EXPECT_TRUE(ad::is_valid_coloring(p, c)) << ad::to_string(o) << ", seed " << seed;
      EXPECT_GE(c.colors, c.lower_bound);
      EXPECT_LE(c.colors, 45);
    }
  }
  // A deliberately broken colouring is recognised as such.
  const auto p = Banded{1}.pattern(10);
  auto c = ad::color_columns(p);
  c.color[1] = c.color[0];
  EXPECT_FALSE(ad::is_valid_coloring(p, c));
}

TEST(Coloring, DenseAndEmptyPatterns) {
  const auto dense = ad::color_columns(ad::SparsityPattern::dense(3, 7));
  EXPECT_EQ(dense.colors, 7);
  const auto diagonal = ad::color_columns(ad::SparsityPattern::from_rows(4, {{0}, {1}, {2}, {3}}));
  EXPECT_EQ(diagonal.colors, 1);
  const auto empty = ad::color_columns(ad::SparsityPattern::from_rows(3, {{}, {}}));
  EXPECT_EQ(empty.colors, 1);  // every column gets colour 0; no row conflicts
}

// --------------------------------------------------------- sparse Jacobian

TEST(SparseJacobian, StencilCostIsSetByColoursNotColumns) {
  for (int k : {1, 2}) {
    const Banded F{k};
    for (int n : {10, 1000}) {
      const auto x = random_point(static_cast<std::size_t>(n), 11);
      const ad::SparseJacobianResult r = ad::sparse_jacobian(F, x);
      EXPECT_EQ(r.colors, 2 * k + 1) << r.summary();
      EXPECT_EQ(r.evaluations, 1) << "2k+1 ≤ 8 colours: one Dual<double, 8> evaluation";
      EXPECT_TRUE(r.pattern_detected);
      EXPECT_EQ(structure(r.jacobian), F.pattern(n));
      const Eigen::MatrixXd D = ad::jacobian_forward(F, x);
      EXPECT_LE(max_difference(r.jacobian, D), kSameModeTol * D.cwiseAbs().maxCoeff())
          << "k = " << k << ", n = " << n;
      const auto Fx = F(x);
      for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(r.value[i], Fx[i]);
    }
  }
}

TEST(SparseJacobian, TridiagonalAgainstAnalytic) {
  // k = 1: F_i = exp(x_i) + (x_{i−1}/2 − 2x_i + x_{i+1}/2)(1 + 0.1 x_i), so
  // ∂F_i/∂x_{i±1} = (1 + 0.1 x_i)/2 and
  // ∂F_i/∂x_i = exp(x_i) − 2(1 + 0.1 x_i) + 0.1 (x_{i−1}/2 − 2x_i + x_{i+1}/2).
  const int n = 10;
  const auto x = random_point(n, 4);
  const auto r = ad::sparse_jacobian(Banded{1}, x);
  for (int i = 0; i < n; ++i) {
    const double xi = x[static_cast<std::size_t>(i)];
    double diag = std::exp(xi) - 2.0 * (1.0 + 0.1 * xi) - 2.0 * xi * 0.1;
    for (int d : {-1, 1}) {
      const int j = i + d;
      if (j < 0 || j >= n) continue;
      const double xj = x[static_cast<std::size_t>(j)];
      EXPECT_NEAR(r.jacobian.coeff(i, j), 0.5 * (1.0 + 0.1 * xi), 1e-15);
      diag += 0.5 * xj * 0.1;
    }
    EXPECT_NEAR(r.jacobian.coeff(i, i), diag, 1e-14 * std::max(1.0, std::abs(diag)));
  }
}

TEST(SparseJacobian, RandomPatternsEqualTheDenseJacobian) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    const int m = 30 + static_cast<int>(seed) * 7, n = 50;
    const RandomSparse F(m, n, 3, seed);
    const auto x = random_point(static_cast<std::size_t>(n), 100 + seed);
    const Eigen::MatrixXd D = ad::jacobian_forward(F, x);
    for (auto o : kOrders) {
      const auto r = ad::sparse_jacobian(F, x, {.order = o});
      EXPECT_EQ(r.pattern, F.pattern());
      EXPECT_TRUE(ad::is_valid_coloring(r.pattern, r.coloring));
      EXPECT_EQ(r.evaluations, (r.colors + ad::kSparseJacobianChunk - 1) / ad::kSparseJacobianChunk);
      EXPECT_LT(r.colors, n) << "compression must pay off on these patterns";
      EXPECT_LE(max_difference(r.jacobian, D), kSameModeTol * D.cwiseAbs().maxCoeff())
          << "seed " << seed << ", " << ad::to_string(o) << ": " << r.summary();
    }
  }
}

TEST(SparseJacobian, DenseW2NeedsOneColourPerColumn) {
  // W2 (shared/BENCHMARKS.md) is dense: 16 colours, 2 evaluations of
  // Dual<double, 8>, and the reference entries.
  const auto W2 = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    using std::exp;
    using std::sin;
    std::vector<T> f(16);
    for (std::size_t i = 0; i < 16; ++i) {
      const double c = static_cast<double>(i) + 1;
      T s = 0.0;
      for (std::size_t j = 0; j < 16; ++j) s += sin(x[j] * c) * exp(-x[i] * x[j] / 16.0);
      f[i] = s + x[i] * x[i] * x[i];
    }
    return f;
  };
  std::vector<double> x(16);
  for (std::size_t j = 0; j < 16; ++j) x[j] = 0.5 + 0.03 * static_cast<double>(j);
  const auto r = ad::sparse_jacobian(W2, x);
  EXPECT_EQ(r.pattern, ad::SparsityPattern::dense(16, 16));
  EXPECT_EQ(r.colors, 16);
  EXPECT_EQ(r.evaluations, 2);
  // The bench's tolerance for the 16-digit reference values.
  EXPECT_NEAR(r.jacobian.coeff(0, 0), 1.120482472417367, 1e-12);
  EXPECT_NEAR(r.jacobian.coeff(15, 7), 5.520386508754350, 1e-12);
}

TEST(SparseJacobian, GivenPatternsAndColourings) {
  const RandomSparse F(35, 20, 2, 9);
  const auto x = random_point(20, 8);
  const Eigen::MatrixXd D = ad::jacobian_forward(F, x);
  // The exact pattern.
  const auto exact = ad::sparse_jacobian(F, x, F.pattern());
  EXPECT_FALSE(exact.pattern_detected);
  EXPECT_LE(max_difference(exact.jacobian, D), kSameModeTol * D.cwiseAbs().maxCoeff());
  // A superset: the extra entries come out as explicit zeros.
  const auto pattern = F.pattern();
  auto rows = std::vector<std::vector<int>>(35);
  for (int i = 0; i < 35; ++i) {
    for (int j : pattern.row(i)) rows[static_cast<std::size_t>(i)].push_back(j);
    rows[static_cast<std::size_t>(i)].push_back((i * 7) % 20);
  }
  const auto super = ad::SparsityPattern::from_rows(20, rows);
  const auto rs = ad::sparse_jacobian(F, x, super, {.check_pattern = true});
  EXPECT_EQ(rs.jacobian.nonZeros(), super.nnz());
  EXPECT_LE(max_difference(rs.jacobian, D), kSameModeTol * D.cwiseAbs().maxCoeff());
  // Reusing a pattern and colouring at another point: no detection, same
  // colouring, the Jacobian of the new point.
  const auto x2 = random_point(20, 99);
  const auto again = ad::sparse_jacobian(F, x2, exact.pattern, exact.coloring);
  const Eigen::MatrixXd D2 = ad::jacobian_forward(F, x2);
  EXPECT_LE(max_difference(again.jacobian, D2), kSameModeTol * D2.cwiseAbs().maxCoeff());
  // A smaller chunk only means more evaluations.
  const auto small = ad::sparse_jacobian<2>(F, x, exact.pattern, exact.coloring);
  EXPECT_EQ(small.evaluations, (exact.colors + 1) / 2);
  EXPECT_LE(max_difference(small.jacobian, D), kSameModeTol * D.cwiseAbs().maxCoeff());
}

TEST(SparseJacobian, ConstantFunctionHasAnEmptyJacobian) {
  const auto F = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    using std::floor;
    return std::vector<T>{T(1.5), floor(x[1]) * 2.0};  // floor: derivative 0
  };
  const auto r = ad::sparse_jacobian(F, {0.3, 2.7, -1.0});
  EXPECT_EQ(r.pattern.nnz(), 0);
  EXPECT_EQ(r.jacobian.rows(), 2);
  EXPECT_EQ(r.jacobian.cols(), 3);
  EXPECT_EQ(r.jacobian.nonZeros(), 0);
  EXPECT_EQ(r.evaluations, 1);  // still one evaluation, for F(x)
  EXPECT_EQ(r.value, (std::vector<double>{1.5, 4.0}));
}

TEST(SparseJacobian, MissingEntriesAndMismatchesAreErrors) {
  const Banded F{1};
  const auto x = random_point(10, 3);
  auto diag = ad::SparsityPattern::from_rows(10, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}});
  try {
    (void)ad::sparse_jacobian(F, x, diag, {.check_pattern = true});
    FAIL() << "expected costate::Error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("misses entry (0, 1)"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)ad::sparse_jacobian(F, random_point(9, 3), F.pattern(10)), costate::Error);
  EXPECT_THROW((void)ad::sparse_jacobian(F, x, ad::SparsityPattern::dense(9, 10)), costate::Error);
}

}  // namespace
