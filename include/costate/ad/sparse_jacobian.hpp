#pragma once
/// \file
/// ad::sparse_jacobian — a sparse Jacobian J = ∂F/∂x by compressed forward
/// mode: the cost grows with the number of colours p of its columns, not
/// with the number of columns n.
///
/// With a column colouring (sparsity.hpp: columns of one colour share no
/// row) and the seed matrix S (n × p, S(j, c) = 1 iff colour(j) = c), one
/// forward evaluation with tangents ẋ = S(:, c) gives the compressed column
///     (J S)(:, c) = Σ_{j : colour(j) = c} J(:, j),
/// in which each row i meets at most one column of colour c among its
/// non-zeros, so the entries are recovered directly:
///     J(i, j) = (J S)(i, colour(j))   for (i, j) in the pattern.
/// Evaluations run on Dual<double, Chunk>, Chunk colours each: ⌈p / Chunk⌉
/// evaluations (at least 1). A tridiagonal J needs 3 colours whatever n:
/// one evaluation on the default Dual<double, 8>.
///
/// The pattern comes from the caller or from detect_sparsity (one extra
/// evaluation on IndexSet, at x). A given pattern must contain every
/// structural non-zero of J at x: a missing one would be silently added to
/// another entry of its row. options.check_pattern verifies that (one
/// IndexSet evaluation) and throws if not. The result's matrix has exactly
/// the pattern's structure (explicit zeros where J happens to vanish).
///
/// To reuse a pattern and colouring over many points (Newton iterations,
/// time steps), keep result.pattern and result.coloring and call the
/// overload that takes both: no detection, no colouring.

#include <Eigen/SparseCore>

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "costate/ad/detail/drivers_outputs.hpp"
#include "costate/ad/dual.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"

namespace costate::ad {

/// Colours per forward evaluation by default (the tangent count of the Dual):
/// the same as kJacobianChunk in drivers.hpp, so that a callable used by both
/// is compiled for one Dual type.
inline constexpr int kSparseJacobianChunk = 8;

struct SparseJacobianOptions {
  /// Vertex order of the greedy colouring.
  ColoringOrder order = ColoringOrder::SmallestLast;
  /// With a given pattern: detect the pattern at x (one IndexSet evaluation)
  /// and throw costate::Error if the given one misses an entry of it.
  bool check_pattern = false;
  /// Nothing can be invalid today; kept for the contract.
  void validate() const {}
};

struct SparseJacobianResult {
  Eigen::SparseMatrix<double> jacobian;  ///< m × n, structure = pattern
  std::vector<double> value;             ///< F(x)
  SparsityPattern pattern;               ///< the pattern used
  ColumnColoring coloring;               ///< the colouring used
  int colors = 0;                        ///< p = coloring.colors
  int evaluations = 0;                   ///< evaluations of F on Dual<double, Chunk>
  bool pattern_detected = false;         ///< one more evaluation, on IndexSet
  /// "m x n Jacobian, nnz non-zeros: p colours, e evaluations (...)".
  std::string summary() const {
    std::ostringstream os;
    os << pattern.rows << " x " << pattern.cols << " Jacobian, " << pattern.nnz()
       << " non-zeros: " << colors << " colours (lower bound " << coloring.lower_bound << ", "
       << to_string(coloring.order) << "), " << evaluations << " forward evaluation"
       << (evaluations == 1 ? "" : "s") << (pattern_detected ? " + 1 sparsity detection" : "");
    return os.str();
  }
};

namespace detail {

/// Throws unless every entry of `required` lies in `given`.
inline void check_pattern_contains(const SparsityPattern& given, const SparsityPattern& required) {
  COSTATE_CHECK(given.rows == required.rows && given.cols == required.cols,
                "ad::sparse_jacobian: the given sparsity pattern is "
                    << given.rows << " x " << given.cols << " but F's Jacobian at x is "
                    << required.rows << " x " << required.cols);
  for (int i = 0; i < required.rows; ++i)
    for (int j : required.row(i))
      COSTATE_CHECK(given.contains(i, j),
                    "ad::sparse_jacobian: the given sparsity pattern misses entry ("
                        << i << ", " << j
                        << ") on which F depends at x; the compressed Jacobian would add it to "
                           "another entry of row "
                        << i << ". Pass a pattern containing it, or let sparse_jacobian detect "
                                "the pattern");
}

}  // namespace detail

/// J at x with the given pattern and colouring (valid for that pattern:
/// see color_columns); no detection, no colouring.
template <int Chunk = kSparseJacobianChunk, class F>
SparseJacobianResult sparse_jacobian(F&& f, const std::vector<double>& x,
                                     const SparsityPattern& pattern, const ColumnColoring& coloring) {
  static_assert(Chunk >= 1, "sparse_jacobian: Chunk must be at least 1");
  using D = Dual<double, Chunk>;
  pattern.validate();
  COSTATE_CHECK_EQ(static_cast<std::size_t>(pattern.cols), x.size(),
                   "ad::sparse_jacobian: the pattern needs one column per input x");
  COSTATE_CHECK_EQ(coloring.color.size(), x.size(),
                   "ad::sparse_jacobian: the colouring needs one colour per input x");
  const std::size_t n = x.size();
  const std::size_t m = static_cast<std::size_t>(pattern.rows);
  const SparsityPattern columns = pattern.transpose();  // CSC of J: the rows of each column

  SparseJacobianResult r;
  r.pattern = pattern;
  r.coloring = coloring;
  r.colors = coloring.colors;
  std::vector<double> values(static_cast<std::size_t>(pattern.nnz()), 0.0);  // CSC order
  std::vector<D> xd(x.begin(), x.end());
  std::vector<D> y(m);
  const int passes = std::max(1, (coloring.colors + Chunk - 1) / Chunk);
  for (int pass = 0; pass < passes; ++pass) {
    const int first = pass * Chunk;
    const int last = std::min(coloring.colors, first + Chunk);
    for (std::size_t j = 0; j < n; ++j) {
      const int c = coloring.color[j];
      if (c >= first && c < last) xd[j].set_tangent(c - first, 1.0);
    }
    auto&& out = f(std::as_const(xd));
    ++r.evaluations;
    COSTATE_CHECK_EQ(detail::output_count(out), m,
                     "ad::sparse_jacobian: F's number of outputs differs from the pattern's rows");
    for (std::size_t i = 0; i < m; ++i) y[i] = D(detail::output_at(out, i));
    if (pass == 0) {
      r.value.resize(m);
      for (std::size_t i = 0; i < m; ++i) r.value[i] = y[i].value();
    }
    for (std::size_t j = 0; j < n; ++j) {
      const int c = coloring.color[j];
      if (c < first || c >= last) continue;
      xd[j].set_tangent(c - first, 0.0);
      const auto jj = static_cast<std::size_t>(columns.row_ptr[j]);
      const auto je = static_cast<std::size_t>(columns.row_ptr[j + 1]);
      for (std::size_t k = jj; k < je; ++k)
        values[k] = y[static_cast<std::size_t>(columns.col_idx[k])].tangent(c - first);
    }
  }
  r.jacobian = Eigen::Map<const Eigen::SparseMatrix<double>>(
      pattern.rows, pattern.cols, pattern.nnz(), columns.row_ptr.data(), columns.col_idx.data(),
      values.data());
  return r;
}

/// J at x with the given pattern, coloured by options.order.
template <int Chunk = kSparseJacobianChunk, class F>
SparseJacobianResult sparse_jacobian(F&& f, const std::vector<double>& x,
                                     const SparsityPattern& pattern,
                                     const SparseJacobianOptions& options = {}) {
  options.validate();
  pattern.validate();
  if (options.check_pattern) detail::check_pattern_contains(pattern, detect_sparsity(f, x));
  const ColumnColoring coloring = color_columns(pattern, {.order = options.order});
  return sparse_jacobian<Chunk>(std::forward<F>(f), x, pattern, coloring);
}

/// J at x with the pattern detected at x (one IndexSet evaluation), coloured
/// by options.order.
template <int Chunk = kSparseJacobianChunk, class F>
SparseJacobianResult sparse_jacobian(F&& f, const std::vector<double>& x,
                                     const SparseJacobianOptions& options = {}) {
  options.validate();
  const SparsityPattern pattern = detect_sparsity(f, x);
  const ColumnColoring coloring = color_columns(pattern, {.order = options.order});
  SparseJacobianResult r = sparse_jacobian<Chunk>(std::forward<F>(f), x, pattern, coloring);
  r.pattern_detected = true;
  return r;
}

}  // namespace costate::ad
