#pragma once
/// \file
/// linear::solve — x = A⁻¹ b for a dense or a sparse (Eigen) matrix A, over
/// double, ad::Dual<double, N> and ad::Real, differentiated implicitly (the
/// solver's steps are never differentiated):
///
///     tangent:  A ẋ = ḃ − Ȧ x                       (Dual, and the tape's forward sweep)
///     adjoint:  Aᵀ s = x̄;   b̄ += s;   Ā −= s xᵀ      (Real: ONE node on the tape)
///
/// For a sparse A the adjoint is accumulated on A's stored entries only:
/// Ā_e −= s_i x_j for the stored entry e = (i, j) — the derivative with
/// respect to those entries (entries outside the pattern are not inputs).
///
/// Factorisation. Dense: LU with partial pivoting (Eigen::PartialPivLU);
/// sparse: Eigen::SparseLU with COLAMD ordering. A is factorised ONCE, in the
/// forward solve; the N tangent right-hand sides of a Dual solve are one
/// multi-column solve with that factorisation, and the tape node keeps it (and
/// x) to solve with Aᵀ in every reverse sweep — no refactorisation.
///
///     Eigen::MatrixX<ad::Real> A = ...;  Eigen::VectorX<ad::Real> b = ...;  // recorded
///     auto sol = linear::solve(A, b);          // one external node: inputs A, b; outputs x
///     sol.summary.brief_report();              // "eigen dense LU: success, n = 3, ..."
///
/// Operands. A and b may have different scalar types when one of them is
/// double (a constant matrix with an active right-hand side is the common
/// case); the result has the AD type. Dense A: any Eigen dense expression
/// (evaluated once). Sparse A: Eigen::SparseMatrix of either storage order
/// (compressed or not); its stored entries are enumerated in storage order
/// (outer index, then inner), which is also the order of the tape inputs.
/// Arguments are read, never kept: the node copies the values it needs.
///
/// Outcomes are data: a singular or near-singular A (rcond below
/// Options::min_rcond; a zero pivot in SparseLU), NaN/Inf in A, b or x, or an
/// inaccurate solve come back in Solution::summary with x as computed (NaN
/// or garbage). Differentiating such a solve — any Dual solve, or a Real
/// solve that records a node — throws costate::Error unless
/// Options::differentiate_failed is set. Dimension mismatches (A not square,
/// b of the wrong length) throw costate::Error.
///
/// The tape: a Real solve records a node only while the active tape
/// (ad::Tape::active()) records and some entry of A or b is active; inputs
/// are then all entries of A (when any is active) followed by those of b
/// (when any is active). Memory kept by the node: the factorisation (n²
/// doubles dense; the LU fill sparse), x, and the sparse pattern.
/// Not collective (serial, in the calling thread); for distributed matrices
/// see ksp.hpp (PETSc).
///
/// Building: this header uses Eigen, which libcostate links privately; link
/// Eigen3::Eigen to the target that includes it.

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/core/error.hpp"
#include "costate/linear/detail/ad_scalar.hpp"
#include "costate/linear/options.hpp"
#include "costate/linear/summary.hpp"

namespace costate::linear {

/// x (by value, the AD type of the operands) and how the solve went.
template <class T>
struct Solution {
  Eigen::Matrix<T, Eigen::Dynamic, 1> x;
  Summary summary;
  /// Real solves that recorded a node: the summary of the latest transposed
  /// (adjoint) solve, updated by every reverse sweep; null otherwise.
  std::shared_ptr<const Summary> adjoint_summary;
};

namespace detail {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Dense LU with partial pivoting, kept for the tangent and adjoint solves.
/// Compiled once (src/linear/factor.cpp): this header does not include
/// Eigen's LU modules, so that its includers do not instantiate them.
class DenseFactor {
 public:
  explicit DenseFactor(const Eigen::MatrixXd& a);
  ~DenseFactor();
  DenseFactor(const DenseFactor&) = delete;
  DenseFactor& operator=(const DenseFactor&) = delete;
  Eigen::MatrixXd solve(const Eigen::MatrixXd& rhs) const;
  Eigen::VectorXd solve_transpose(const Eigen::VectorXd& rhs) const;
  /// LAPACK-style estimate of the reciprocal condition number (1-norm).
  double rcond() const;
  /// The exactly-zero pivot an LU of a singular matrix may end with.
  bool has_zero_pivot() const;
  static const char* name() { return "eigen dense LU"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sparse LU (SuperLU-style supernodal, COLAMD column ordering); compiled
/// once (src/linear/factor.cpp).
class SparseFactor {
 public:
  explicit SparseFactor(const Eigen::SparseMatrix<double>& a);
  ~SparseFactor();
  SparseFactor(const SparseFactor&) = delete;
  SparseFactor& operator=(const SparseFactor&) = delete;
  bool ok() const;
  const std::string& message() const;
  Eigen::MatrixXd solve(const Eigen::MatrixXd& rhs) const;
  Eigen::VectorXd solve_transpose(const Eigen::VectorXd& rhs) const;
  static const char* name() { return "eigen SparseLU"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The entries of A as inputs of the derivative: all n² entries
/// column-major (dense), or the stored entries (row[e], col[e]) (sparse).
struct Entries {
  int n = 0;
  bool dense = true;
  std::vector<int> row, col;
  std::size_t size() const {
    return dense ? static_cast<std::size_t>(n) * static_cast<std::size_t>(n) : row.size();
  }
  /// y −= Ȧ x, for entry tangents ad[e].
  void subtract_product(const double* ad, const double* x, double* y) const {
    if (dense) {
      for (int j = 0; j < n; ++j) {
        const double xj = x[j];
        const double* column = ad + static_cast<std::size_t>(j) * static_cast<std::size_t>(n);
        for (int i = 0; i < n; ++i) y[i] -= column[i] * xj;
      }
    } else {
      for (std::size_t e = 0; e < row.size(); ++e) y[row[e]] -= ad[e] * x[col[e]];
    }
  }
  /// ā[e] −= s_i x_j for entry e = (i, j).
  void subtract_outer(const double* s, const double* x, double* abar) const {
    if (dense) {
      for (int j = 0; j < n; ++j) {
        const double xj = x[j];
        double* column = abar + static_cast<std::size_t>(j) * static_cast<std::size_t>(n);
        for (int i = 0; i < n; ++i) column[i] -= s[i] * xj;
      }
    } else {
      for (std::size_t e = 0; e < row.size(); ++e) abar[e] -= s[row[e]] * x[col[e]];
    }
  }
};

inline bool all_finite(const double* v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

/// Residual, backward error and the Inaccurate/NonFinite verdicts.
template <class MatD>
void assess(Summary& s, const MatD& a, const Eigen::VectorXd& b, const Eigen::VectorXd& x,
            const Options& options) {
  s.rhs_norm = b.norm();
  if (!all_finite(x.data(), static_cast<std::size_t>(x.size()))) {
    if (s.termination == Termination::Success) s.termination = Termination::NonFinite;
    s.residual_norm = std::numeric_limits<double>::quiet_NaN();
    s.backward_error = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  const Eigen::VectorXd r = b - a * x;
  s.residual_norm = r.norm();
  const double scale = a.norm() * x.norm() + s.rhs_norm;
  s.backward_error = scale > 0.0 ? s.residual_norm / scale : 0.0;
  if (s.termination == Termination::Success && !(s.backward_error <= options.max_backward_error)) {
    s.termination = Termination::Inaccurate;
    std::ostringstream os;
    os.precision(16);
    os << "backward error " << s.backward_error << " > max_backward_error "
       << options.max_backward_error;
    s.message = os.str();
  }
}

/// The error for differentiating a failed solve, with the fix.
[[noreturn]] inline void throw_differentiate_failed(const Summary& s, const char* what) {
  throw Error(std::string("linear::solve: ") + what +
              " a solve that did not succeed (" + s.brief_report() +
              "); its derivative is meaningless. Fix A (singular or ill-conditioned?) or b, or "
              "set Options::differentiate_failed = true to differentiate anyway");
}

/// Turns the double solution into a Solution<T>: tangents (Dual) or a tape
/// node (Real). a_ptr/b_ptr point at A's entries (in Entries order) and b's
/// entries when their scalar type is an AD type (empty when double).
template <class T, class TA, class TB, class Factor>
Solution<T> differentiate(std::shared_ptr<const Factor> factor, std::shared_ptr<const Entries> entries,
                          const Eigen::VectorXd& x, Summary summary,
                          const std::vector<const TA*>& a_ptr, const std::vector<const TB*>& b_ptr,
                          const Options& options) {
  const int n = entries->n;
  Solution<T> out;
  if constexpr (is_plain_v<T>) {
    out.x = x;
  } else if constexpr (is_dual_double_v<T>) {
    constexpr int N = tangent_count<T>();
    if (!summary.success() && !options.differentiate_failed)
      throw_differentiate_failed(summary, "differentiating (ad::Dual)");
    const auto t0 = Clock::now();
    // R(:, k) = ḃ_k − Ȧ_k x, then Ẋ = A⁻¹ R with the factorisation at hand.
    Eigen::MatrixXd rhs = Eigen::MatrixXd::Zero(n, N);
    if (!b_ptr.empty())
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < N; ++k) rhs(i, k) = tangent_of(*b_ptr[static_cast<std::size_t>(i)], k);
    if (!a_ptr.empty()) {
      std::vector<double> ad(entries->size());
      std::vector<double> y(static_cast<std::size_t>(n));
      for (int k = 0; k < N; ++k) {
        for (std::size_t e = 0; e < ad.size(); ++e) ad[e] = tangent_of(*a_ptr[e], k);
        std::fill(y.begin(), y.end(), 0.0);
        entries->subtract_product(ad.data(), x.data(), y.data());
        for (int i = 0; i < n; ++i) rhs(i, k) += y[static_cast<std::size_t>(i)];
      }
    }
    const Eigen::MatrixXd xd = factor->solve(rhs);
    out.x.resize(n);
    for (int i = 0; i < n; ++i) {
      T v(x[i]);
      for (int k = 0; k < N; ++k) v.tangent(k) = xd(i, k);
      out.x[i] = v;
    }
    summary.tangent_directions = N;
    summary.seconds_solve += seconds_since(t0);
  } else {
    static_assert(is_real_v<T>);
    out.x.resize(n);
    for (int i = 0; i < n; ++i) out.x[i] = ad::Real(x[i]);
    ad::Tape& tape = ad::Tape::active();
    bool a_active = false, b_active = false;
    for (const TA* p : a_ptr) a_active = a_active || is_active(*p);
    for (const TB* p : b_ptr) b_active = b_active || is_active(*p);
    if (tape.is_recording() && (a_active || b_active)) {
      if (!summary.success() && !options.differentiate_failed)
        throw_differentiate_failed(summary, "recording a tape node for");
      std::vector<const ad::Real*> inputs;
      inputs.reserve((a_active ? a_ptr.size() : 0) + (b_active ? b_ptr.size() : 0));
      if constexpr (is_real_v<TA>)
        if (a_active) inputs.insert(inputs.end(), a_ptr.begin(), a_ptr.end());
      if constexpr (is_real_v<TB>)
        if (b_active) inputs.insert(inputs.end(), b_ptr.begin(), b_ptr.end());
      std::vector<ad::Real*> outputs(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) outputs[static_cast<std::size_t>(i)] = &out.x[i];
      auto adjoint_summary = std::make_shared<Summary>();
      adjoint_summary->backend = std::string(Factor::name()) + " (transposed, reused)";
      adjoint_summary->rows = n;
      adjoint_summary->nonzeros = summary.nonzeros;
      adjoint_summary->factorization_reused = true;
      out.adjoint_summary = adjoint_summary;
      const std::size_t a_count = a_active ? entries->size() : 0;
      auto xs = std::make_shared<const Eigen::VectorXd>(x);
      // Aᵀ s = x̄;  Ā −= s xᵀ;  b̄ += s.
      auto reverse = [factor, entries, xs, a_count, b_active, n, adjoint_summary](
                         std::span<const double> xbar, std::span<double> in_bar) {
        const auto t0 = Clock::now();
        const Eigen::VectorXd s =
            factor->solve_transpose(Eigen::Map<const Eigen::VectorXd>(xbar.data(), n));
        if (a_count > 0) entries->subtract_outer(s.data(), xs->data(), in_bar.data());
        if (b_active)
          for (int i = 0; i < n; ++i) in_bar[a_count + static_cast<std::size_t>(i)] += s[i];
        adjoint_summary->seconds_solve = seconds_since(t0);
        adjoint_summary->rhs_norm = Eigen::Map<const Eigen::VectorXd>(xbar.data(), n).norm();
        adjoint_summary->termination = all_finite(s.data(), static_cast<std::size_t>(n))
                                           ? Termination::Success
                                           : Termination::NonFinite;
      };
      // A ẋ = ḃ − Ȧ x.
      auto tangent = [factor, entries, xs, a_count, b_active, n](std::span<const double> in_dot,
                                                                std::span<double> x_dot) {
        Eigen::VectorXd rhs = Eigen::VectorXd::Zero(n);
        if (b_active)
          for (int i = 0; i < n; ++i) rhs[i] = in_dot[a_count + static_cast<std::size_t>(i)];
        if (a_count > 0) entries->subtract_product(in_dot.data(), xs->data(), rhs.data());
        const Eigen::VectorXd xd = factor->solve(rhs);
        for (int i = 0; i < n; ++i) x_dot[static_cast<std::size_t>(i)] = xd[i];
      };
      tape.push_external(std::span<const ad::Real* const>(inputs),
                         std::span<ad::Real* const>(outputs), std::move(reverse),
                         std::move(tangent));
    }
  }
  out.summary = std::move(summary);
  return out;
}

template <class TB, class DB>
void check_rhs(const Eigen::MatrixBase<DB>& b, Eigen::Index n) {
  COSTATE_CHECK(b.cols() == 1, "linear::solve: b must be a column vector; it has "
                                   << b.cols() << " columns");
  COSTATE_CHECK(b.rows() == n, "linear::solve: b has " << b.rows() << " entries but A is " << n
                                                       << " x " << n);
}

}  // namespace detail

/// x = A⁻¹ b for a dense A (any Eigen dense expression of double,
/// Dual<double, N> or Real; evaluated once). See the file comment for the
/// derivative rules, outcomes and the tape. Throws costate::Error if A is not
/// square or b does not match, or when differentiating a failed solve.
template <class DA, class DB>
Solution<detail::common_scalar_t<typename DA::Scalar, typename DB::Scalar>> solve(
    const Eigen::MatrixBase<DA>& A, const Eigen::MatrixBase<DB>& b, const Options& options = {}) {
  using TA = typename DA::Scalar;
  using TB = typename DB::Scalar;
  using T = detail::common_scalar_t<TA, TB>;
  options.validate();
  COSTATE_CHECK(A.rows() == A.cols(), "linear::solve: A must be square; it is "
                                          << A.rows() << " x " << A.cols());
  detail::check_rhs<TB>(b, A.rows());
  // Plain matrices are used in place; expressions are evaluated once.
  const auto& a = A.derived().eval();
  const auto& bv = b.derived().eval();
  const int n = static_cast<int>(a.rows());

  Summary s;
  s.backend = detail::DenseFactor::name();
  s.rows = n;
  s.nonzeros = static_cast<std::int64_t>(n) * n;
  const Eigen::MatrixXd ad = a.unaryExpr([](const TA& v) { return detail::value_of(v); });
  const Eigen::VectorXd bd = bv.unaryExpr([](const TB& v) { return detail::value_of(v); });

  auto t0 = detail::Clock::now();
  auto factor = std::make_shared<const detail::DenseFactor>(ad);
  s.seconds_setup = detail::seconds_since(t0);
  t0 = detail::Clock::now();
  Eigen::VectorXd x = factor->solve(bd);
  s.seconds_solve = detail::seconds_since(t0);
  if (!detail::all_finite(ad.data(), static_cast<std::size_t>(ad.size())) ||
      !detail::all_finite(bd.data(), static_cast<std::size_t>(bd.size()))) {
    s.termination = Termination::NonFinite;
    s.message = "A or b has NaN or Inf entries";
  } else {
    s.rcond = n > 0 ? factor->rcond() : 1.0;
    if (factor->has_zero_pivot() || !(s.rcond >= options.min_rcond)) {
      s.termination = Termination::Singular;
      std::ostringstream os;
      os.precision(16);
      os << "rcond " << s.rcond << " < min_rcond " << options.min_rcond;
      s.message = os.str();
    }
  }
  detail::assess(s, ad, bd, x, options);

  auto entries = std::make_shared<detail::Entries>();
  entries->n = n;
  entries->dense = true;
  std::vector<const TA*> a_ptr;
  std::vector<const TB*> b_ptr;
  if constexpr (!detail::is_plain_v<TA>) {
    a_ptr.reserve(entries->size());
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) a_ptr.push_back(&a(i, j));
  }
  if constexpr (!detail::is_plain_v<TB>) {
    b_ptr.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) b_ptr.push_back(&bv(i));
  }
  return detail::differentiate<T, TA, TB, detail::DenseFactor>(
      std::move(factor), std::move(entries), x, std::move(s), a_ptr, b_ptr, options);
}

/// x = A⁻¹ b for a sparse A (Eigen::SparseMatrix of double, Dual<double, N>
/// or Real, either storage order); Ā lives on A's stored entries. See the
/// file comment. Throws costate::Error if A is not square or b does not
/// match, or when differentiating a failed solve.
template <class TA, int StorageOrder, class StorageIndex, class DB>
Solution<detail::common_scalar_t<TA, typename DB::Scalar>> solve(
    const Eigen::SparseMatrix<TA, StorageOrder, StorageIndex>& A, const Eigen::MatrixBase<DB>& b,
    const Options& options = {}) {
  using TB = typename DB::Scalar;
  using T = detail::common_scalar_t<TA, TB>;
  using Sparse = Eigen::SparseMatrix<TA, StorageOrder, StorageIndex>;
  options.validate();
  COSTATE_CHECK(A.rows() == A.cols(), "linear::solve: A must be square; it is "
                                          << A.rows() << " x " << A.cols());
  detail::check_rhs<TB>(b, A.rows());
  const auto& bv = b.derived().eval();
  const int n = static_cast<int>(A.rows());

  // The stored entries in storage order: the pattern and the tape inputs.
  auto entries = std::make_shared<detail::Entries>();
  entries->n = n;
  entries->dense = false;
  std::vector<const TA*> a_ptr;
  std::vector<Eigen::Triplet<double>> triplets;
  const std::size_t nnz = static_cast<std::size_t>(A.nonZeros());
  entries->row.reserve(nnz);
  entries->col.reserve(nnz);
  triplets.reserve(nnz);
  if constexpr (!detail::is_plain_v<TA>) a_ptr.reserve(nnz);
  bool finite = true;
  for (Eigen::Index outer = 0; outer < A.outerSize(); ++outer) {
    for (typename Sparse::InnerIterator it(A, outer); it; ++it) {
      const int i = static_cast<int>(it.row()), j = static_cast<int>(it.col());
      const double v = detail::value_of(it.value());
      finite = finite && std::isfinite(v);
      entries->row.push_back(i);
      entries->col.push_back(j);
      triplets.emplace_back(i, j, v);
      if constexpr (!detail::is_plain_v<TA>) a_ptr.push_back(&it.value());
    }
  }
  Eigen::SparseMatrix<double> ad(n, n);
  ad.setFromTriplets(triplets.begin(), triplets.end());
  ad.makeCompressed();
  const Eigen::VectorXd bd = bv.unaryExpr([](const TB& v) { return detail::value_of(v); });

  Summary s;
  s.backend = detail::SparseFactor::name();
  s.rows = n;
  s.nonzeros = static_cast<std::int64_t>(nnz);
  auto t0 = detail::Clock::now();
  auto factor = std::make_shared<const detail::SparseFactor>(ad);
  s.seconds_setup = detail::seconds_since(t0);
  Eigen::VectorXd x;
  if (factor->ok()) {
    t0 = detail::Clock::now();
    x = factor->solve(bd);
    s.seconds_solve = detail::seconds_since(t0);
  } else {
    x = Eigen::VectorXd::Constant(n, std::numeric_limits<double>::quiet_NaN());
  }
  if (!finite || !detail::all_finite(bd.data(), static_cast<std::size_t>(bd.size()))) {
    s.termination = Termination::NonFinite;
    s.message = "A or b has NaN or Inf entries";
  } else if (!factor->ok()) {
    s.termination = Termination::Singular;
    s.message = factor->message();
  }
  detail::assess(s, ad, bd, x, options);

  std::vector<const TB*> b_ptr;
  if constexpr (!detail::is_plain_v<TB>) {
    b_ptr.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) b_ptr.push_back(&bv(i));
  }
  return detail::differentiate<T, TA, TB, detail::SparseFactor>(
      std::move(factor), std::move(entries), x, std::move(s), a_ptr, b_ptr, options);
}

}  // namespace costate::linear
