#pragma once
/// \file
/// Jacobian sparsity: ad::SparsityPattern (compressed rows), its automatic
/// detection by one evaluation on the index-set tracing scalar ad::IndexSet,
/// and the distance-2 column colouring (ad::color_columns) that compresses a
/// sparse Jacobian for forward mode (sparse_jacobian.hpp).
///
/// Detection. F: ℝⁿ → ℝᵐ is evaluated once on IndexSet, whose inputs are
/// xⱼ ↦ (value xⱼ, set {j}); every operation returns the value the double
/// code would compute and the union of its operands' sets, so output i
/// carries { j : F_i depends on x_j through the operations executed at x }.
/// Because the value is carried too, branches (`if (x[0] > 0)`) and loop
/// bounds follow the real evaluation at x: the pattern is that of the code
/// path taken at x. It is conservative within that path: multiplying by a
/// constant zero, x − x, or a function with a zero derivative at x (cos at 0,
/// abs at 0) keeps the dependency; only floor, ceil, round and trunc drop it
/// (their derivative is 0 everywhere AD defines it); min, max, fmin and fmax
/// keep both operands (the pattern then stays valid on both sides of the
/// switch). Cost: one evaluation with a sorted index vector per value (heap
/// storage; unions are merges) — cheap for sparse rows, O(nnz(row)) per
/// operation.
///
/// Colouring. Columns j and k of J are structurally orthogonal when no row
/// has a non-zero in both; a colouring gives every column a colour such that
/// columns of one colour are structurally orthogonal (a distance-2
/// colouring of the bipartite row/column graph, equivalently a colouring of
/// the column intersection graph G: j ~ k iff they share a row). Then the
/// compressed Jacobian J S, with the seed matrix S(j, c) = 1 iff colour(j) =
/// c, holds every non-zero exactly once: J(i, j) = (J S)(i, colour(j)). p
/// colours cost p directional derivatives, however many columns there are.
/// Greedy colouring in a vertex order — each column takes the smallest
/// colour not used by its neighbours in G — with the ordering a choice:
///   - Natural: columns 0, 1, …, n−1;
///   - LargestFirst: by decreasing degree in G (Welsh–Powell);
///   - SmallestLast (default): repeatedly remove a vertex of smallest degree
///     from G, colour in the reverse order of removal (Matula–Beck); optimal
///     on banded patterns (2k + 1 colours for half-bandwidth k).
/// Every colouring needs at least max_i nnz(row i) colours (a row's columns
/// are pairwise adjacent); ColumnColoring::lower_bound reports it. Cost:
/// building G is O(Σ_i nnz(row i)²) time and memory; the orderings are
/// O(|G|). A dense row makes G complete (n colours): compressed forward mode
/// then buys nothing, use reverse mode for such rows.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/detail/drivers_outputs.hpp"
#include "costate/core/error.hpp"

namespace costate::ad {

// ------------------------------------------------------------- the pattern

/// The positions of the structural non-zeros of a rows × cols matrix, in
/// compressed sparse row form: row i holds columns
/// col_idx[row_ptr[i] .. row_ptr[i+1]), strictly increasing. Plain data; a
/// valid pattern satisfies validate().
struct SparsityPattern {
  int rows = 0;
  int cols = 0;
  std::vector<int> row_ptr{0};  ///< rows + 1 offsets into col_idx; row_ptr[0] = 0
  std::vector<int> col_idx;     ///< column indices, sorted and unique per row

  /// Number of structural non-zeros.
  int nnz() const { return static_cast<int>(col_idx.size()); }
  /// The columns of row i.
  std::span<const int> row(int i) const {
    return {col_idx.data() + row_ptr[static_cast<std::size_t>(i)],
            static_cast<std::size_t>(row_ptr[static_cast<std::size_t>(i) + 1] -
                                     row_ptr[static_cast<std::size_t>(i)])};
  }
  /// True when (i, j) is a structural non-zero (binary search in row i).
  bool contains(int i, int j) const {
    const auto r = row(i);
    return std::binary_search(r.begin(), r.end(), j);
  }
  /// Largest number of non-zeros in a row (a lower bound on the colours).
  int max_row_nnz() const {
    int m = 0;
    for (int i = 0; i < rows; ++i)
      m = std::max(m, row_ptr[static_cast<std::size_t>(i) + 1] - row_ptr[static_cast<std::size_t>(i)]);
    return m;
  }

  /// From (row, column) pairs in any order; duplicates are merged. Throws
  /// costate::Error for an index outside [0, rows) × [0, cols).
  static SparsityPattern from_entries(int rows, int cols, std::vector<std::pair<int, int>> entries) {
    COSTATE_CHECK(rows >= 0 && cols >= 0, "SparsityPattern::from_entries: rows = "
                                              << rows << ", cols = " << cols
                                              << " must both be >= 0");
    for (const auto& [i, j] : entries)
      COSTATE_CHECK(i >= 0 && i < rows && j >= 0 && j < cols,
                    "SparsityPattern::from_entries: entry (" << i << ", " << j
                                                             << ") lies outside the " << rows
                                                             << " x " << cols << " matrix");
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    SparsityPattern p;
    p.rows = rows;
    p.cols = cols;
    p.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
    p.col_idx.reserve(entries.size());
    for (const auto& [i, j] : entries) {
      ++p.row_ptr[static_cast<std::size_t>(i) + 1];
      p.col_idx.push_back(j);
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows); ++i) p.row_ptr[i + 1] += p.row_ptr[i];
    return p;
  }

  /// From one list of columns per row (any order; duplicates merged).
  static SparsityPattern from_rows(int cols, const std::vector<std::vector<int>>& rows_columns) {
    std::vector<std::pair<int, int>> entries;
    for (std::size_t i = 0; i < rows_columns.size(); ++i)
      for (int j : rows_columns[i]) entries.emplace_back(static_cast<int>(i), j);
    return from_entries(static_cast<int>(rows_columns.size()), cols, std::move(entries));
  }

  /// Every entry of a rows × cols matrix.
  static SparsityPattern dense(int rows, int cols) {
    SparsityPattern p;
    p.rows = rows;
    p.cols = cols;
    p.row_ptr.resize(static_cast<std::size_t>(rows) + 1);
    p.col_idx.reserve(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
    for (int i = 0; i < rows; ++i) {
      p.row_ptr[static_cast<std::size_t>(i)] = i * cols;
      for (int j = 0; j < cols; ++j) p.col_idx.push_back(j);
    }
    p.row_ptr[static_cast<std::size_t>(rows)] = rows * cols;
    return p;
  }

  /// The pattern of the transpose (cols × rows): the rows of each column.
  SparsityPattern transpose() const {
    SparsityPattern t;
    t.rows = cols;
    t.cols = rows;
    t.row_ptr.assign(static_cast<std::size_t>(cols) + 1, 0);
    for (int j : col_idx) ++t.row_ptr[static_cast<std::size_t>(j) + 1];
    for (std::size_t j = 0; j < static_cast<std::size_t>(cols); ++j) t.row_ptr[j + 1] += t.row_ptr[j];
    t.col_idx.resize(col_idx.size());
    std::vector<int> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
    for (int i = 0; i < rows; ++i)  // rows in increasing order: each column's list comes out sorted
      for (int j : row(i)) t.col_idx[static_cast<std::size_t>(next[static_cast<std::size_t>(j)]++)] = i;
    return t;
  }

  /// Throws costate::Error unless the arrays describe a valid pattern
  /// (sizes, offsets non-decreasing, columns in range and strictly
  /// increasing per row), naming the first violation.
  void validate() const {
    COSTATE_CHECK(rows >= 0 && cols >= 0,
                  "SparsityPattern: rows = " << rows << ", cols = " << cols << " must be >= 0");
    COSTATE_CHECK(row_ptr.size() == static_cast<std::size_t>(rows) + 1,
                  "SparsityPattern: row_ptr has " << row_ptr.size() << " entries, expected rows + 1 = "
                                                  << rows + 1);
    COSTATE_CHECK(row_ptr.front() == 0,
                  "SparsityPattern: row_ptr[0] = " << row_ptr.front() << ", expected 0");
    COSTATE_CHECK(static_cast<std::size_t>(row_ptr.back()) == col_idx.size(),
                  "SparsityPattern: row_ptr[rows] = " << row_ptr.back() << " but col_idx has "
                                                      << col_idx.size() << " entries");
    for (int i = 0; i < rows; ++i) {
      const std::size_t a = static_cast<std::size_t>(row_ptr[static_cast<std::size_t>(i)]);
      const std::size_t b = static_cast<std::size_t>(row_ptr[static_cast<std::size_t>(i) + 1]);
      COSTATE_CHECK(a <= b, "SparsityPattern: row_ptr decreases at row " << i);
      for (std::size_t k = a; k < b; ++k) {
        COSTATE_CHECK(col_idx[k] >= 0 && col_idx[k] < cols,
                      "SparsityPattern: row " << i << " has column " << col_idx[k]
                                              << " outside [0, " << cols << ")");
        COSTATE_CHECK(k == a || col_idx[k - 1] < col_idx[k],
                      "SparsityPattern: the columns of row " << i
                                                             << " are not strictly increasing ("
                                                             << col_idx[k - 1] << " then "
                                                             << col_idx[k] << ")");
      }
    }
  }

  /// "m x n, nnz non-zeros (max k per row)".
  std::string summary() const {
    std::ostringstream os;
    os << rows << " x " << cols << ", " << nnz() << " non-zeros (at most " << max_row_nnz()
       << " per row)";
    return os.str();
  }

  friend bool operator==(const SparsityPattern&, const SparsityPattern&) = default;
};

// ------------------------------------------------------ the tracing scalar

/// The scalar of sparsity detection: a double value (computed exactly as the
/// plain double code would, so that comparisons and branches follow the
/// real evaluation) and the sorted set of input indices the value depends
/// on. Arithmetic with IndexSet and arithmetic operands in either order,
/// compound assignment, comparisons (on values), and the elementary
/// functions of the AD core (found by argument-dependent lookup). See the
/// file comment for the rules.
class IndexSet {
 public:
  /// A constant 0 (no dependencies).
  IndexSet() = default;
  /// A constant (no dependencies).
  IndexSet(double v) : value_(v) {}
  template <class A>
    requires(std::is_arithmetic_v<A> && !std::is_same_v<A, double>)
  IndexSet(A v) : value_(static_cast<double>(v)) {}

  /// Input j with value v: depends on {j}.
  static IndexSet input(double v, std::int32_t j) {
    IndexSet x(v);
    x.indices_.push_back(j);
    return x;
  }
  /// A value with the given dependencies (sorted, unique).
  static IndexSet with_indices(double v, std::vector<std::int32_t> sorted_indices) {
    IndexSet x(v);
    x.indices_ = std::move(sorted_indices);
    return x;
  }

  double value() const { return value_; }
  /// Input indices this value depends on, strictly increasing.
  const std::vector<std::int32_t>& indices() const { return indices_; }
  bool depends_on(std::int32_t j) const {
    return std::binary_search(indices_.begin(), indices_.end(), j);
  }

  /// Adds b's dependencies to this value's (sorted union).
  void merge(const std::vector<std::int32_t>& b) {
    if (b.empty() || &b == &indices_) return;
    if (indices_.empty()) {
      indices_ = b;
    } else if (indices_.back() < b.front()) {  // common in loops Σⱼ over increasing j
      indices_.insert(indices_.end(), b.begin(), b.end());
    } else {
      std::vector<std::int32_t> u;
      u.reserve(indices_.size() + b.size());
      std::set_union(indices_.begin(), indices_.end(), b.begin(), b.end(), std::back_inserter(u));
      indices_.swap(u);
    }
  }
  /// Changes the value only (the dependencies stay).
  void set_value(double v) { value_ = v; }

  IndexSet& operator+=(const IndexSet& b) {
    value_ += b.value_;
    merge(b.indices_);
    return *this;
  }
  IndexSet& operator-=(const IndexSet& b) {
    value_ -= b.value_;
    merge(b.indices_);
    return *this;
  }
  IndexSet& operator*=(const IndexSet& b) {
    value_ *= b.value_;
    merge(b.indices_);
    return *this;
  }
  IndexSet& operator/=(const IndexSet& b) {
    value_ /= b.value_;
    merge(b.indices_);
    return *this;
  }
  template <class A>
    requires std::is_arithmetic_v<A>
  IndexSet& operator+=(A c) {
    value_ += static_cast<double>(c);
    return *this;
  }
  template <class A>
    requires std::is_arithmetic_v<A>
  IndexSet& operator-=(A c) {
    value_ -= static_cast<double>(c);
    return *this;
  }
  template <class A>
    requires std::is_arithmetic_v<A>
  IndexSet& operator*=(A c) {
    value_ *= static_cast<double>(c);
    return *this;
  }
  template <class A>
    requires std::is_arithmetic_v<A>
  IndexSet& operator/=(A c) {
    value_ /= static_cast<double>(c);
    return *this;
  }

 private:
  double value_ = 0.0;
  std::vector<std::int32_t> indices_;
};

namespace detail {
template <class A>
concept Arithmetic = std::is_arithmetic_v<A>;
}  // namespace detail

inline double value(const IndexSet& x) { return x.value(); }

inline IndexSet operator+(const IndexSet& a) { return a; }
inline IndexSet operator-(IndexSet a) {
  a.set_value(-a.value());
  return a;
}

inline IndexSet operator+(IndexSet a, const IndexSet& b) {
  a += b;
  return a;
}
inline IndexSet operator-(IndexSet a, const IndexSet& b) {
  a -= b;
  return a;
}
inline IndexSet operator*(IndexSet a, const IndexSet& b) {
  a *= b;
  return a;
}
inline IndexSet operator/(IndexSet a, const IndexSet& b) {
  a /= b;
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator+(IndexSet a, A c) {
  a += c;
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator-(IndexSet a, A c) {
  a -= c;
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator*(IndexSet a, A c) {
  a *= c;
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator/(IndexSet a, A c) {
  a /= c;
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator+(A c, IndexSet a) {
  a.set_value(static_cast<double>(c) + a.value());
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator-(A c, IndexSet a) {
  a.set_value(static_cast<double>(c) - a.value());
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator*(A c, IndexSet a) {
  a.set_value(static_cast<double>(c) * a.value());
  return a;
}
template <detail::Arithmetic A>
inline IndexSet operator/(A c, IndexSet a) {
  a.set_value(static_cast<double>(c) / a.value());
  return a;
}

#define COSTATE_AD_INDEXSET_COMPARE(op)                                   \
  inline bool operator op(const IndexSet& a, const IndexSet& b) {         \
    return a.value() op b.value();                                        \
  }                                                                       \
  template <detail::Arithmetic A>                                         \
  inline bool operator op(const IndexSet& a, A c) {                       \
    return a.value() op static_cast<double>(c);                           \
  }                                                                       \
  template <detail::Arithmetic A>                                         \
  inline bool operator op(A c, const IndexSet& a) {                       \
    return static_cast<double>(c) op a.value();                           \
  }
COSTATE_AD_INDEXSET_COMPARE(==)
COSTATE_AD_INDEXSET_COMPARE(!=)
COSTATE_AD_INDEXSET_COMPARE(<)
COSTATE_AD_INDEXSET_COMPARE(<=)
COSTATE_AD_INDEXSET_COMPARE(>)
COSTATE_AD_INDEXSET_COMPARE(>=)
#undef COSTATE_AD_INDEXSET_COMPARE

// Functions of one argument: the double value, the argument's dependencies.
// (By value: a temporary argument's index vector is reused, not copied.)
#define COSTATE_AD_INDEXSET_UNARY(name)    \
  inline IndexSet name(IndexSet x) {       \
    x.set_value(std::name(x.value()));     \
    return x;                              \
  }
COSTATE_AD_INDEXSET_UNARY(sqrt)
COSTATE_AD_INDEXSET_UNARY(cbrt)
COSTATE_AD_INDEXSET_UNARY(exp)
COSTATE_AD_INDEXSET_UNARY(expm1)
COSTATE_AD_INDEXSET_UNARY(log)
COSTATE_AD_INDEXSET_UNARY(log1p)
COSTATE_AD_INDEXSET_UNARY(log2)
COSTATE_AD_INDEXSET_UNARY(log10)
COSTATE_AD_INDEXSET_UNARY(sin)
COSTATE_AD_INDEXSET_UNARY(cos)
COSTATE_AD_INDEXSET_UNARY(tan)
COSTATE_AD_INDEXSET_UNARY(asin)
COSTATE_AD_INDEXSET_UNARY(acos)
COSTATE_AD_INDEXSET_UNARY(atan)
COSTATE_AD_INDEXSET_UNARY(sinh)
COSTATE_AD_INDEXSET_UNARY(cosh)
COSTATE_AD_INDEXSET_UNARY(tanh)
COSTATE_AD_INDEXSET_UNARY(asinh)
COSTATE_AD_INDEXSET_UNARY(acosh)
COSTATE_AD_INDEXSET_UNARY(atanh)
COSTATE_AD_INDEXSET_UNARY(erf)
COSTATE_AD_INDEXSET_UNARY(erfc)
COSTATE_AD_INDEXSET_UNARY(abs)
COSTATE_AD_INDEXSET_UNARY(fabs)
#undef COSTATE_AD_INDEXSET_UNARY

// Piecewise constant: no dependencies (derivative 0, as in Dual and Reverse).
#define COSTATE_AD_INDEXSET_PASSIVE(name) \
  inline IndexSet name(const IndexSet& x) { return IndexSet(std::name(x.value())); }
COSTATE_AD_INDEXSET_PASSIVE(floor)
COSTATE_AD_INDEXSET_PASSIVE(ceil)
COSTATE_AD_INDEXSET_PASSIVE(round)
COSTATE_AD_INDEXSET_PASSIVE(trunc)
#undef COSTATE_AD_INDEXSET_PASSIVE

// Functions of two arguments: the union of the operands' dependencies.
#define COSTATE_AD_INDEXSET_BINARY(name, VALUE)                 \
  inline IndexSet name(IndexSet a, const IndexSet& b) {         \
    const double x = a.value(), y = b.value();                  \
    a.merge(b.indices());                                       \
    a.set_value(VALUE);                                         \
    return a;                                                   \
  }                                                             \
  template <detail::Arithmetic A>                               \
  inline IndexSet name(IndexSet a, A c) {                       \
    const double x = a.value(), y = static_cast<double>(c);     \
    a.set_value(VALUE);                                         \
    return a;                                                   \
  }                                                             \
  template <detail::Arithmetic A>                               \
  inline IndexSet name(A c, IndexSet b) {                       \
    const double x = static_cast<double>(c), y = b.value();     \
    b.set_value(VALUE);                                         \
    return b;                                                   \
  }
COSTATE_AD_INDEXSET_BINARY(pow, std::pow(x, y))
COSTATE_AD_INDEXSET_BINARY(atan2, std::atan2(x, y))
COSTATE_AD_INDEXSET_BINARY(hypot, std::hypot(x, y))
COSTATE_AD_INDEXSET_BINARY(max, y > x ? y : x)
COSTATE_AD_INDEXSET_BINARY(min, y < x ? y : x)
COSTATE_AD_INDEXSET_BINARY(fmax, std::fmax(x, y))
COSTATE_AD_INDEXSET_BINARY(fmin, std::fmin(x, y))
#undef COSTATE_AD_INDEXSET_BINARY

inline bool isnan(const IndexSet& x) { return std::isnan(x.value()); }
inline bool isinf(const IndexSet& x) { return std::isinf(x.value()); }
inline bool isfinite(const IndexSet& x) { return std::isfinite(x.value()); }

// --------------------------------------------------------------- detection

/// The sparsity pattern of ∂F/∂x at x (m × n) by one evaluation of F on
/// IndexSet: row i holds the inputs output i depends on along the code path
/// taken at x (see the file comment). F is a vector callable as for
/// ad::jacobian (a scalar callable gives a 1 × n pattern).
template <class F>
SparsityPattern detect_sparsity(F&& f, const std::vector<double>& x) {
  COSTATE_CHECK(x.size() <= static_cast<std::size_t>(INT32_MAX),
                "ad::detect_sparsity: " << x.size() << " inputs exceed the 32-bit index range");
  std::vector<IndexSet> xs;
  xs.reserve(x.size());
  for (std::size_t j = 0; j < x.size(); ++j)
    xs.push_back(IndexSet::input(x[j], static_cast<std::int32_t>(j)));
  auto&& out = f(std::as_const(xs));
  const std::size_t m = detail::output_count(out);
  SparsityPattern p;
  p.rows = static_cast<int>(m);
  p.cols = static_cast<int>(x.size());
  p.row_ptr.assign(m + 1, 0);
  for (std::size_t i = 0; i < m; ++i) {
    const IndexSet yi = IndexSet(detail::output_at(out, i));
    p.col_idx.insert(p.col_idx.end(), yi.indices().begin(), yi.indices().end());
    p.row_ptr[i + 1] = static_cast<int>(p.col_idx.size());
  }
  return p;
}

// --------------------------------------------------------------- colouring

/// Vertex order of the greedy colouring (see the file comment).
enum class ColoringOrder {
  Natural,       ///< "natural": columns in index order
  LargestFirst,  ///< "largest_first": decreasing degree in the column intersection graph
  SmallestLast,  ///< "smallest_last": reverse order of smallest-degree removal (default)
};

inline std::string to_string(ColoringOrder order) {
  switch (order) {
    case ColoringOrder::Natural: return "natural";
    case ColoringOrder::LargestFirst: return "largest_first";
    case ColoringOrder::SmallestLast: return "smallest_last";
  }
  return "unknown";
}

/// Parses "natural" | "largest_first" | "smallest_last"; the error lists the
/// valid names.
inline ColoringOrder coloring_order_from_string(std::string_view name) {
  std::string valid;
  for (ColoringOrder o :
       {ColoringOrder::Natural, ColoringOrder::LargestFirst, ColoringOrder::SmallestLast}) {
    if (to_string(o) == name) return o;
    valid += (valid.empty() ? "" : ", ") + to_string(o);
  }
  throw Error("unknown colouring order '" + std::string(name) + "'; valid orders: " + valid);
}

struct ColoringOptions {
  ColoringOrder order = ColoringOrder::SmallestLast;
  /// Nothing to check today (every order is valid); kept for the contract.
  void validate() const {}
};

/// A distance-2 colouring of the columns of a pattern.
struct ColumnColoring {
  int colors = 0;                  ///< number of colours p
  std::vector<int> color;          ///< colour of each column, in [0, colors)
  int lower_bound = 0;             ///< max nnz of a row: no colouring has fewer colours
  ColoringOrder order = ColoringOrder::SmallestLast;
  /// "p colours for n columns (lower bound b, order o)".
  std::string summary() const {
    std::ostringstream os;
    os << colors << " colours for " << color.size() << " columns (lower bound " << lower_bound
       << ", order " << to_string(order) << ")";
    return os.str();
  }
};

namespace detail {
/// Adjacency (CSR) of the column intersection graph of p: j ~ k (j ≠ k)
/// iff some row holds both.
inline void column_graph(const SparsityPattern& p, const SparsityPattern& pt,
                         std::vector<int>& adj_ptr, std::vector<int>& adj) {
  const std::size_t n = static_cast<std::size_t>(p.cols);
  adj_ptr.assign(n + 1, 0);
  adj.clear();
  std::vector<int> stamp(n, -1);
  for (std::size_t j = 0; j < n; ++j) {
    stamp[j] = static_cast<int>(j);
    for (int i : pt.row(static_cast<int>(j)))
      for (int k : p.row(i))
        if (stamp[static_cast<std::size_t>(k)] != static_cast<int>(j)) {
          stamp[static_cast<std::size_t>(k)] = static_cast<int>(j);
          adj.push_back(k);
        }
    adj_ptr[j + 1] = static_cast<int>(adj.size());
  }
}

/// Smallest-last order (Matula–Beck) with a bucket queue of current degrees.
inline std::vector<int> smallest_last_order(const std::vector<int>& adj_ptr,
                                            const std::vector<int>& adj) {
  const std::size_t n = adj_ptr.size() - 1;
  std::vector<int> degree(n);
  int max_degree = 0;
  for (std::size_t j = 0; j < n; ++j) {
    degree[j] = adj_ptr[j + 1] - adj_ptr[j];
    max_degree = std::max(max_degree, degree[j]);
  }
  // Doubly linked buckets: head[d] -> vertices of current degree d.
  std::vector<int> head(static_cast<std::size_t>(max_degree) + 1, -1), next(n, -1), prev(n, -1);
  auto insert = [&](int v) {
    const auto d = static_cast<std::size_t>(degree[static_cast<std::size_t>(v)]);
    next[static_cast<std::size_t>(v)] = head[d];
    prev[static_cast<std::size_t>(v)] = -1;
    if (head[d] >= 0) prev[static_cast<std::size_t>(head[d])] = v;
    head[d] = v;
  };
  auto erase = [&](int v) {
    const auto d = static_cast<std::size_t>(degree[static_cast<std::size_t>(v)]);
    const int a = prev[static_cast<std::size_t>(v)], b = next[static_cast<std::size_t>(v)];
    if (a >= 0)
      next[static_cast<std::size_t>(a)] = b;
    else
      head[d] = b;
    if (b >= 0) prev[static_cast<std::size_t>(b)] = a;
  };
  // Insert in reverse so that each bucket lists vertices in increasing index.
  for (std::size_t j = n; j-- > 0;) insert(static_cast<int>(j));
  std::vector<char> removed(n, 0);
  std::vector<int> order(n);
  int low = 0;
  for (std::size_t k = n; k-- > 0;) {
    while (head[static_cast<std::size_t>(low)] < 0) ++low;
    const int v = head[static_cast<std::size_t>(low)];
    erase(v);
    removed[static_cast<std::size_t>(v)] = 1;
    order[k] = v;  // coloured in reverse order of removal
    for (int a = adj_ptr[static_cast<std::size_t>(v)]; a < adj_ptr[static_cast<std::size_t>(v) + 1];
         ++a) {
      const int u = adj[static_cast<std::size_t>(a)];
      if (removed[static_cast<std::size_t>(u)]) continue;
      erase(u);
      --degree[static_cast<std::size_t>(u)];
      insert(u);
    }
    if (low > 0) --low;  // a neighbour may now sit one bucket lower
  }
  return order;
}
}  // namespace detail

/// Greedy distance-2 colouring of the columns of `pattern`: in the chosen
/// vertex order, each column takes the smallest colour that no column
/// sharing a row with it has (see the file comment for the orders and
/// costs). Deterministic.
inline ColumnColoring color_columns(const SparsityPattern& pattern,
                                    const ColoringOptions& options = {}) {
  pattern.validate();
  options.validate();
  const std::size_t n = static_cast<std::size_t>(pattern.cols);
  const SparsityPattern pt = pattern.transpose();
  std::vector<int> adj_ptr, adj;
  detail::column_graph(pattern, pt, adj_ptr, adj);

  std::vector<int> order(n);
  for (std::size_t j = 0; j < n; ++j) order[j] = static_cast<int>(j);
  if (options.order == ColoringOrder::LargestFirst) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return adj_ptr[static_cast<std::size_t>(a) + 1] - adj_ptr[static_cast<std::size_t>(a)] >
             adj_ptr[static_cast<std::size_t>(b) + 1] - adj_ptr[static_cast<std::size_t>(b)];
    });
  } else if (options.order == ColoringOrder::SmallestLast) {
    order = detail::smallest_last_order(adj_ptr, adj);
  }

  ColumnColoring c;
  c.order = options.order;
  c.lower_bound = pattern.max_row_nnz();
  c.color.assign(n, -1);
  // forbidden[colour] == v: colour used by a neighbour of v.
  std::vector<int> forbidden(n + 1, -1);
  for (int v : order) {
    for (int a = adj_ptr[static_cast<std::size_t>(v)]; a < adj_ptr[static_cast<std::size_t>(v) + 1];
         ++a) {
      const int col = c.color[static_cast<std::size_t>(adj[static_cast<std::size_t>(a)])];
      if (col >= 0) forbidden[static_cast<std::size_t>(col)] = v;
    }
    int col = 0;
    while (forbidden[static_cast<std::size_t>(col)] == v) ++col;
    c.color[static_cast<std::size_t>(v)] = col;
    c.colors = std::max(c.colors, col + 1);
  }
  return c;
}

/// True when no two columns of one colour share a row of `pattern` (and
/// every column has a colour in [0, colors)).
inline bool is_valid_coloring(const SparsityPattern& pattern, const ColumnColoring& coloring) {
  if (coloring.color.size() != static_cast<std::size_t>(pattern.cols)) return false;
  for (int c : coloring.color)
    if (c < 0 || c >= coloring.colors) return false;
  std::vector<int> seen(static_cast<std::size_t>(coloring.colors), -1);
  for (int i = 0; i < pattern.rows; ++i)
    for (int j : pattern.row(i)) {
      int& s = seen[static_cast<std::size_t>(coloring.color[static_cast<std::size_t>(j)])];
      if (s == i) return false;
      s = i;
    }
  return true;
}

/// A Jacobian taken by forward passes over a colouring of most rows, and
/// the few densest rows by one reverse sweep each (vjp with e_i): a row
/// with k entries forces k colours on any colouring, so one hub row (a
/// species in a hundred reactions) can set the forward passes' count alone.
struct DenseRowSplit {
  std::vector<int> dense_rows;  ///< taken by reverse sweeps, densest first
  ColumnColoring coloring;      ///< of the pattern without the dense rows
  double cost = 0.0;            ///< in forward passes (the split's estimate)
};

/// The split of `pattern` cheapest by the estimate passes(d) + setup + d ×
/// sweep, for d densest rows taken by reverse sweeps: passes(d) =
/// ⌈colours of the rest / chunk⌉ forward passes of `chunk` tangents, one
/// reverse sweep costing `sweep` forward passes and the first one `setup`
/// more (its linearization). d runs over 0, 1, 2, 4, … up to a quarter of
/// the rows; d = 0 is the plain colouring. A pure function of the pattern:
/// the same rows every time.
inline DenseRowSplit split_dense_rows(const SparsityPattern& pattern, int chunk, double sweep,
                                      double setup, const ColoringOptions& options = {}) {
  COSTATE_CHECK(chunk >= 1 && sweep > 0.0 && setup >= 0.0,
                "split_dense_rows: chunk >= 1, sweep > 0 and setup >= 0");
  auto passes = [chunk](int colors) { return static_cast<double>((colors + chunk - 1) / chunk); };
  DenseRowSplit best;
  best.coloring = color_columns(pattern, options);
  best.cost = passes(std::max(best.coloring.colors, 1));
  // A row no longer than a pass's chunk never costs more than one pass.
  if (best.coloring.lower_bound <= chunk) return best;
  std::vector<int> order(static_cast<std::size_t>(pattern.rows));
  for (int i = 0; i < pattern.rows; ++i) order[static_cast<std::size_t>(i)] = i;
  auto length = [&](int i) { return pattern.row_ptr[i + 1] - pattern.row_ptr[i]; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return length(a) > length(b); });
  std::vector<char> dense(static_cast<std::size_t>(pattern.rows), 0);
  for (int d = 1; d <= pattern.rows / 4; d *= 2) {
    const double floor_cost = setup + d * sweep;
    if (floor_cost >= best.cost) break;  // more sweeps cannot pay any more
    std::fill(dense.begin(), dense.end(), 0);
    for (int k = 0; k < d; ++k) dense[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = 1;
    std::vector<std::pair<int, int>> entries;
    for (int i = 0; i < pattern.rows; ++i)
      if (!dense[static_cast<std::size_t>(i)])
        for (int j : pattern.row(i)) entries.emplace_back(i, j);
    ColumnColoring rest = color_columns(
        SparsityPattern::from_entries(pattern.rows, pattern.cols, std::move(entries)), options);
    const double cost = passes(std::max(rest.colors, 1)) + floor_cost;
    if (cost < best.cost) {
      best.dense_rows.assign(order.begin(), order.begin() + d);
      best.coloring = std::move(rest);
      best.cost = cost;
    }
  }
  return best;
}

}  // namespace costate::ad
