#pragma once
// Internals of nonlinear::solve: the derivatives of the residual F(x, p)
// from costate's AD — ∂F/∂x dense (Dual chunks) or sparse (detected
// pattern, coloured columns), ∂F/∂p dense, and the products (∂F/∂p) ṗ and
// (∂F/∂p)ᵀ λ. Not a public header of its own.

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/sparse_jacobian.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"

namespace costate::nonlinear::detail {

/// Columns per forward evaluation (the tangent count of the Dual): the same
/// as ad::kJacobianChunk / ad::kSparseJacobianChunk, so that a residual
/// used by several drivers is compiled for one Dual type.
inline constexpr int kChunk = 8;
/// Parameters up to this count get a dense ∂F/∂p (one Dual evaluation per
/// kChunk parameters) kept by the tape node; above it, products with ∂F/∂p
/// are formed on demand (forward: one Dual<double, 1> evaluation; reverse:
/// one recording of F on a private tape and one sweep).
inline constexpr int kDenseParameterLimit = kChunk;

/// A private tape per nesting depth for vector–Jacobian products inside a
/// reverse sweep (a residual may itself contain a taped solve).
inline ad::Tape& scratch_tape(int depth) {
  thread_local std::vector<std::unique_ptr<ad::Tape>> pool;
  while (static_cast<int>(pool.size()) <= depth) pool.push_back(std::make_unique<ad::Tape>());
  return *pool[static_cast<std::size_t>(depth)];
}
inline int& scratch_depth() {
  thread_local int depth = 0;
  return depth;
}

/// The residual F(x, p) of a nonlinear::solve and its AD derivatives. Holds
/// the callable by reference (Fref = const F&) or by value (Fref = F, for
/// tape nodes that outlive the call).
template <class Fref>
class Residual {
 public:
  Residual(Fref f, std::vector<double> p, int n) : f_(f), p_(std::move(p)), n_(n) {}

  int unknowns() const { return n_; }
  int parameters() const { return static_cast<int>(p_.size()); }
  const std::vector<double>& p() const { return p_; }

  /// F(x, p) on double.
  void residual(std::span<const double> x, std::span<double> r) const {
    std::fill(r.begin(), r.end(), 0.0);
    f_(x, std::span<const double>(p_), r);
  }

  /// F evaluated on scalar T with x and p converted to T (constants).
  template <class T>
  std::vector<T> evaluate_on(std::span<const double> x, std::vector<T> p) const {
    std::vector<T> xt(x.begin(), x.end()), r(static_cast<std::size_t>(n_));
    f_(std::span<const T>(xt), std::span<const T>(p), std::span<T>(r));
    return r;
  }

  /// ∂F/∂x at x, dense: ⌈n / kChunk⌉ evaluations on Dual<double, kChunk>.
  void dense_jacobian(std::span<const double> x, Eigen::MatrixXd& j) const {
    using D = ad::Dual<double, kChunk>;
    j.resize(n_, n_);
    std::vector<D> xd(x.begin(), x.end()), pd(p_.begin(), p_.end()), rd(static_cast<std::size_t>(n_));
    for (int c0 = 0; c0 < n_; c0 += kChunk) {
      const int width = std::min(kChunk, n_ - c0);
      for (int k = 0; k < width; ++k) xd[static_cast<std::size_t>(c0 + k)].tangent(k) = 1.0;
      std::fill(rd.begin(), rd.end(), D(0.0));
      f_(std::span<const D>(xd), std::span<const D>(pd), std::span<D>(rd));
      for (int k = 0; k < width; ++k) {
        xd[static_cast<std::size_t>(c0 + k)].tangent(k) = 0.0;
        for (int i = 0; i < n_; ++i) j(i, c0 + k) = rd[static_cast<std::size_t>(i)].tangent(k);
      }
    }
  }

  /// Detects the sparsity of ∂F/∂x at x (one evaluation on ad::IndexSet)
  /// and colours its columns; sparse_jacobian then reuses both. `square`:
  /// x has n entries (a serial system); otherwise x is a rank's extended
  /// vector (owned entries and ghosts) and the pattern is n × x.size().
  void detect_sparsity(std::span<const double> x, bool square = true) {
    const std::vector<double> xv(x.begin(), x.end());
    auto pattern = std::make_shared<ad::SparsityPattern>(ad::detect_sparsity(vector_callable(), xv));
    COSTATE_CHECK(pattern->rows == n_ && (!square || pattern->cols == n_),
                  "nonlinear::solve: F has " << pattern->rows << " outputs for " << pattern->cols
                                             << " unknowns; the system must be square");
    coloring_ = std::make_shared<const ad::ColumnColoring>(ad::color_columns(*pattern));
    pattern_ = std::move(pattern);
  }
  /// Shares the pattern and colouring of another Residual of the same F.
  template <class G>
  void share_sparsity(const Residual<G>& other) {
    pattern_ = other.pattern();
    coloring_ = other.coloring();
  }
  bool has_sparsity() const { return pattern_ != nullptr; }
  const std::shared_ptr<const ad::SparsityPattern>& pattern() const { return pattern_; }
  const std::shared_ptr<const ad::ColumnColoring>& coloring() const { return coloring_; }
  int colors() const { return coloring_ ? coloring_->colors : 0; }
  std::int64_t nonzeros() const { return pattern_ ? pattern_->nnz() : std::int64_t{n_} * n_; }

  /// ∂F/∂x at x on the detected pattern: ⌈colours / kChunk⌉ evaluations.
  void sparse_jacobian(std::span<const double> x, Eigen::SparseMatrix<double>& j) const {
    COSTATE_CHECK(pattern_ != nullptr, "nonlinear: sparse Jacobian requested before detection");
    const std::vector<double> xv(x.begin(), x.end());
    j = ad::sparse_jacobian<kChunk>(vector_callable(), xv, *pattern_, *coloring_).jacobian;
  }

  /// ∂F/∂p at x, dense n × np: ⌈np / kChunk⌉ evaluations.
  Eigen::MatrixXd parameter_jacobian(std::span<const double> x) const {
    using D = ad::Dual<double, kChunk>;
    const int np = parameters();
    Eigen::MatrixXd fp(n_, np);
    std::vector<D> xd(x.begin(), x.end()), pd(p_.begin(), p_.end()), rd(static_cast<std::size_t>(n_));
    for (int c0 = 0; c0 < np; c0 += kChunk) {
      const int width = std::min(kChunk, np - c0);
      for (int k = 0; k < width; ++k) pd[static_cast<std::size_t>(c0 + k)].tangent(k) = 1.0;
      std::fill(rd.begin(), rd.end(), D(0.0));
      f_(std::span<const D>(xd), std::span<const D>(pd), std::span<D>(rd));
      for (int k = 0; k < width; ++k) {
        pd[static_cast<std::size_t>(c0 + k)].tangent(k) = 0.0;
        for (int i = 0; i < n_; ++i) fp(i, c0 + k) = rd[static_cast<std::size_t>(i)].tangent(k);
      }
    }
    return fp;
  }

  /// (∂F/∂p) ṗ at x: one evaluation on Dual<double, 1>.
  Eigen::VectorXd parameter_jvp(std::span<const double> x, std::span<const double> pdot) const {
    using D = ad::Dual<double, 1>;
    std::vector<D> pd(p_.size());
    for (std::size_t k = 0; k < p_.size(); ++k) pd[k] = D(p_[k], {pdot[k]});
    const std::vector<D> r = evaluate_on<D>(x, std::move(pd));
    Eigen::VectorXd out(n_);
    for (int i = 0; i < n_; ++i) out[i] = r[static_cast<std::size_t>(i)].tangent(0);
    return out;
  }

  /// (∂F/∂p)ᵀ λ at x: F recorded on a private tape (x constant, p inputs),
  /// one sweep seeded with λ. The caller's tape is untouched.
  std::vector<double> parameter_vjp(std::span<const double> x, std::span<const double> lambda) const {
    int& depth = scratch_depth();
    ad::Tape& tape = scratch_tape(depth);
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{++depth};
    ad::Tape::Scope scope(tape);
    tape.reset();
    tape.start_recording();
    std::vector<ad::Real> pr(p_.begin(), p_.end());
    for (auto& v : pr) tape.register_input(v);
    std::vector<ad::Real> xr(x.begin(), x.end()), r(static_cast<std::size_t>(n_));
    try {
      f_(std::span<const ad::Real>(xr), std::span<const ad::Real>(pr), std::span<ad::Real>(r));
    } catch (...) {
      tape.stop_recording();
      tape.reset();
      throw;
    }
    for (auto& v : r) tape.register_output(v);  // one identifier each, even if repeated
    tape.stop_recording();
    for (int i = 0; i < n_; ++i) r[static_cast<std::size_t>(i)].set_gradient(lambda[static_cast<std::size_t>(i)]);
    tape.evaluate();
    std::vector<double> out(p_.size());
    for (std::size_t k = 0; k < p_.size(); ++k) out[k] = pr[k].gradient();
    tape.reset();
    return out;
  }

 private:
  /// F as a callable on std::vector<T> (x) returning std::vector<T>, with p
  /// as constants: the shape ad::detect_sparsity and ad::sparse_jacobian take.
  auto vector_callable() const {
    return [this](const auto& xv) {
      using T = std::decay_t<decltype(xv[0])>;
      std::vector<T> pt(p_.begin(), p_.end()), r(static_cast<std::size_t>(n_));
      f_(std::span<const T>(xv.data(), xv.size()), std::span<const T>(pt), std::span<T>(r));
      return r;
    };
  }

  Fref f_;
  std::vector<double> p_;
  int n_;
  std::shared_ptr<const ad::SparsityPattern> pattern_;
  std::shared_ptr<const ad::ColumnColoring> coloring_;
};

}  // namespace costate::nonlinear::detail
