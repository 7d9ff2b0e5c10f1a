#pragma once
/// \file
/// Shared machinery of the adaptive implicit steppers (sdirk3.hpp, bdf.hpp):
///
/// - detail::ModelJacobian: J = ∂f/∂y and [∂f/∂y | ∂f/∂p] of a model by
///   forward-mode AD (ad::Dual<double, 8>, ⌈columns / 8⌉ passes), into
///   buffers allocated once — no heap allocation per call, unlike
///   ad::jacobian_forward (which builds its inputs and result every time).
/// - detail::ModifiedNewton: Newton's method for the implicit equation every
///   stage/step of these methods has,
///       G(z) = M (z − r) − g f(t, z) = 0,    G'(z) = M − g J,
///   M = I for an ODE; for a semi-explicit index-1 DAE (issue 32: rows of f
///   that are constraints 0 = g(t, x, z, p), the model's algebraic states)
///   M = diag(1 differential, 0 algebraic), so those rows read f(t, z) = 0.
///   The mass matrix enters here and in TransposedSolve only (stage_matrix):
///   every implicit scheme forms its Newton matrix and its adjoint's and
///   tangents' solves through them.
///   with a Jacobian J and an LU of M = I − g_LU J that are reused across
///   stages and steps (modified Newton; up to kSmallLu states a plain
///   partial-pivoting LU, above that Eigen's). M is refactored when g has drifted
///   (|g / g_LU − 1| > 0.3, CVODE's rule) and J re-evaluated when the caller
///   asks (slow convergence, failure, age).
///
/// Newton stops when the update is below newton_tol in the max norm relative
/// to 1 + |z| (over the measured states: a fully implicit DAE's derivatives
/// w = (y − ψ)/(hγ) are left out, as IDA's Newton is on y alone — w follows
/// from y through the linear differential rows, and carries round-off
/// ε|y|/(hγ) that no iteration removes on small steps) — or when the update, extrapolated by the observed linear rate
/// ρ, ‖Δ‖ ρ/(1 − ρ), is — and fails after newton_max_iterations, when ρ > 0.9
/// (divergence; unless the update is already at round-off, 1e-13) or when
/// the iterate is not finite. Solving this tightly is
/// what makes a discrete adjoint agree with differences of the discrete
/// objective (the adjoint assumes G(z) = 0 exactly).

#include <Eigen/Core>
#include <Eigen/LU>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ode/options.hpp"

namespace costate::ode::detail {

template <class M>
class ModelJacobian {
 public:
  static constexpr int kChunk = 8;
  using D = ad::Dual<double, kChunk>;

  ModelJacobian(const M& model, std::span<const double> p, std::size_t n)
      : model_(model), p_(p.begin(), p.end()), n_(n), yd_(n), pd_(p.size()), out_(n),
        jac_(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n + p.size())) {}

  std::size_t n() const { return n_; }
  std::size_t n_parameters() const { return p_.size(); }
  std::span<const double> parameters() const { return p_; }
  /// The algebraic-state mask of a DAE (empty: an ODE, M = I). A model
  /// behind this template is an ODE; ModelJacobian<SystemRhs> reads the
  /// System's.
  std::span<const std::uint8_t> algebraic() const { return {}; }
  /// The states Newton's stopping test leaves out (ModifiedNewton): none
  /// here; a fully implicit DAE's derivatives (ModelJacobian<SystemRhs>).
  std::span<const std::uint8_t> newton_unmeasured() const { return {}; }
  /// The states the adaptive steppers' error test leaves out: a DAE's
  /// algebraic states (they follow the differential ones through the
  /// constraints) unless every model state is algebraic — then nothing else
  /// would bound the step, and they are measured (ModelJacobian<SystemRhs>).
  /// None here (an ODE).
  std::span<const std::uint8_t> error_unmeasured() const { return {}; }

  /// f(t, y) into out (counted).
  void rhs(double t, std::span<const double> y, std::span<double> out) {
    model_.template rhs<double>(t, y, std::span<const double>(p_), out);
    ++rhs_evaluations;
  }

  /// J = ∂f/∂y at (t, y): the left n columns of the returned matrix.
  const Eigen::MatrixXd& state(double t, std::span<const double> y) {
    fill(t, y, n_);
    return jac_;
  }
  /// [∂f/∂y | ∂f/∂p] at (t, y), n × (n + n_p).
  const Eigen::MatrixXd& state_parameters(double t, std::span<const double> y) {
    fill(t, y, n_ + p_.size());
    return jac_;
  }

  std::int64_t rhs_evaluations = 0, jacobian_evaluations = 0;

 private:
  void fill(double t, std::span<const double> y, std::size_t columns) {
    ++jacobian_evaluations;
    for (std::size_t i = 0; i < n_; ++i) yd_[i] = D(y[i]);
    for (std::size_t j = 0; j < p_.size(); ++j) pd_[j] = D(p_[j]);
    for (std::size_t first = 0; first < columns; first += kChunk) {
      const std::size_t width = std::min<std::size_t>(kChunk, columns - first);
      auto seed = [&](std::size_t col, double v) {
        if (col < n_)
          yd_[col].set_tangent(static_cast<int>(col - first), v);
        else
          pd_[col - n_].set_tangent(static_cast<int>(col - first), v);
      };
      for (std::size_t k = 0; k < width; ++k) seed(first + k, 1.0);
      model_.template rhs<D>(t, std::span<const D>(yd_), std::span<const D>(pd_),
                             std::span<D>(out_));
      for (std::size_t i = 0; i < n_; ++i)
        for (std::size_t k = 0; k < width; ++k)
          jac_(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(first + k)) =
              out_[i].tangent(static_cast<int>(k));
      for (std::size_t k = 0; k < width; ++k) seed(first + k, 0.0);
    }
  }

  const M& model_;
  std::vector<double> p_;
  std::size_t n_;
  std::vector<D> yd_, pd_, out_;
  Eigen::MatrixXd jac_;
};

/// A = M − g J (M = diag(1 − algebraic), I when `algebraic` is empty: an
/// ODE), J an n × n expression (J or Jᵀ): the Newton matrix of every
/// implicit stage and its transpose for the adjoints. For an ODE the same
/// operations (and bits) as I − g J always had.
template <class JE>
inline void stage_matrix(Eigen::MatrixXd& A, double g, const JE& J,
                         std::span<const std::uint8_t> algebraic) {
  A.setIdentity(J.rows(), J.cols());
  for (std::size_t i = 0; i < algebraic.size(); ++i)
    if (algebraic[i]) A(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(i)) = 0.0;
  A.noalias() -= g * J;
}

/// v ← M v (the algebraic entries zeroed; nothing for an ODE).
inline void apply_mass(std::span<const std::uint8_t> algebraic, double* v) {
  for (std::size_t i = 0; i < algebraic.size(); ++i)
    if (algebraic[i]) v[i] = 0.0;
}

/// Dense LU with partial pivoting of a small n × n matrix, factored in place
/// (column-major: a[r + c n]) as plain loops, and its solve: Eigen's
/// dynamic-size LU spends most of its time in set-up on 2×2 … 8×8 systems.
/// Used up to kSmallLu states (TransposedSolve, ModifiedNewton); above
/// that, Eigen's blocked LU.
inline constexpr std::size_t kSmallLu = 16;

inline void small_lu_factor(double* a, Eigen::Index n, Eigen::Index* piv) {
  for (Eigen::Index k = 0; k < n; ++k) {
    Eigen::Index p = k;
    for (Eigen::Index r = k + 1; r < n; ++r)
      if (std::abs(a[r + k * n]) > std::abs(a[p + k * n])) p = r;
    piv[k] = p;
    if (p != k)
      for (Eigen::Index c = 0; c < n; ++c) std::swap(a[k + c * n], a[p + c * n]);
    const double inv = 1.0 / a[k + k * n];
    for (Eigen::Index r = k + 1; r < n; ++r) a[r + k * n] *= inv;
    for (Eigen::Index c = k + 1; c < n; ++c) {
      const double akc = a[k + c * n];
      for (Eigen::Index r = k + 1; r < n; ++r) a[r + c * n] -= a[r + k * n] * akc;
    }
  }
}
/// x ← A⁻¹ x with the factors of small_lu_factor.
inline void small_lu_solve(const double* a, Eigen::Index n, const Eigen::Index* piv, double* x) {
  for (Eigen::Index k = 0; k < n; ++k) {
    const Eigen::Index p = piv[k];
    if (p != k) std::swap(x[k], x[p]);
  }
  for (Eigen::Index c = 0; c < n; ++c)  // L y = P b (unit lower)
    for (Eigen::Index r = c + 1; r < n; ++r) x[r] -= a[r + c * n] * x[c];
  for (Eigen::Index c = n - 1; c >= 0; --c) {  // U x = y
    x[c] /= a[c + c * n];
    for (Eigen::Index r = 0; r < c; ++r) x[r] -= a[r + c * n] * x[c];
  }
}

/// The transposed solves of the implicit steps' adjoints,
///     (M − g J)ᵀ x = b,   J the left n columns of a [J | f_p] buffer,
/// (M the mass matrix of `algebraic`, stage_matrix; I for an ODE)
/// with the matrix, its LU and the result allocated once: factor() builds
/// and factors (I − g J)ᵀ = I − g Jᵀ directly (no transposed view of an
/// LU), solve() then allocates nothing. Up to kSmall states the LU is a
/// plain partial-pivoting loop on the stored matrix (Eigen's dynamic-size
/// LU spends most of its time in set-up on 2×2 … 8×8 systems); above, Eigen's.
class TransposedSolve {
 public:
  static constexpr std::size_t kSmall = kSmallLu;

  explicit TransposedSolve(std::size_t n, std::span<const std::uint8_t> algebraic = {})
      : n_(static_cast<Eigen::Index>(n)), A_(n_, n_), lu_(n > kSmall ? n_ : 0), x_(n_),
        piv_(n), algebraic_(algebraic.begin(), algebraic.end()) {}

  template <class JP>
  void factor(double g, const JP& jp) {
    stage_matrix(A_, g, jp.leftCols(n_).transpose(), algebraic_);
    factor_matrix();
  }
  /// factor() of M − g J itself (not transposed): solve() then gives
  /// (M − g J)⁻¹ b — the implicit steps' forward tangents.
  template <class JP>
  void factor_untransposed(double g, const JP& jp) {
    stage_matrix(A_, g, jp.leftCols(n_), algebraic_);
    factor_matrix();
  }
  /// x = (I − g J)⁻ᵀ b with the last factor(); valid until the next solve.
  template <class B>
  const Eigen::VectorXd& solve(const B& b) {
    if (n_ > static_cast<Eigen::Index>(kSmall)) {
      x_ = lu_.solve(b);
      return x_;
    }
    for (Eigen::Index r = 0; r < n_; ++r) x_[r] = b(r);
    small_lu_solve(A_.data(), n_, piv_.data(), x_.data());
    return x_;
  }
  Eigen::Index size() const { return n_; }

 private:
  void factor_matrix() {
    if (n_ > static_cast<Eigen::Index>(kSmall))
      lu_.compute(A_);
    else
      small_lu_factor(A_.data(), n_, piv_.data());
  }
  Eigen::Index n_;
  Eigen::MatrixXd A_;
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
  Eigen::VectorXd x_;
  std::vector<Eigen::Index> piv_;
  std::vector<std::uint8_t> algebraic_;  // empty: an ODE
};

/// out[j] += s · Σ_r jp(r, first + j) x[r] for j < count: columns of a
/// column-major [J | f_p] transposed times x (f_yᵀλ, f_pᵀλ of the implicit
/// adjoints), as plain loops — small systems, no Eigen dynamic-size set-up.
template <class JP>
inline void add_transposed_product(const JP& jp, Eigen::Index first, Eigen::Index count,
                                   const double* x, double s, double* out) {
  const Eigen::Index n = jp.rows();
  for (Eigen::Index j = 0; j < count; ++j) {
    const double* col = jp.data() + (first + j) * n;
    double acc = 0.0;
    for (Eigen::Index r = 0; r < n; ++r) acc += col[r] * x[r];
    out[j] += s * acc;
  }
}

/// "t = … (step n)" for the drivers' messages.
inline std::string implicit_at(double t, std::int64_t step) {
  std::ostringstream os;
  os.precision(16);
  os << "t = " << t << " (step " << step << ")";
  return os.str();
}

/// The guard each attempt of the adaptive implicit drivers (run_sdirk3,
/// run_bdf) starts with. Returns false — with s.termination and s.message
/// set — when opt.max_steps steps (accepted + rejected) have been made or
/// when h falls below max(dt_min, 16 ε |t|). Otherwise caps h at hmax and,
/// when t + 1.01 h reaches `target`, sets h = target − t and last = true
/// (the step lands exactly on the target instead of leaving a sliver).
inline bool guard_step(double t, double& h, double hmax, double target,
                       const IntegratorOptions& opt, Summary& s, bool& last) {
  if (s.steps + s.rejected_steps >= opt.max_steps) {
    s.termination = Termination::MaxStepsReached;
    s.message = "reached integrator.max_steps = " + std::to_string(opt.max_steps) + " at " +
                implicit_at(t, s.steps) + "; raise max_steps or loosen rtol/atol";
    return false;
  }
  h = std::min(h, hmax);
  last = false;
  if (t + 1.01 * h >= target) {
    h = target - t;
    last = true;
  }
  const double eps = std::numeric_limits<double>::epsilon();
  const double h_floor = std::max(opt.dt_min, 16.0 * eps * std::max(std::abs(t), 1e-300));
  if (h < h_floor) {
    std::ostringstream os;
    os.precision(6);
    os << "step size " << h << " fell below the limit " << h_floor << " at "
       << implicit_at(t, s.steps);
    s.termination = Termination::StepSizeUnderflow;
    s.message = os.str();
    return false;
  }
  return true;
}

/// Weighted RMS norm sqrt(Σ (v_i w_i)² / n).
inline double wrms(std::span<const double> v, std::span<const double> w) {
  double s = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) s += (v[i] * w[i]) * (v[i] * w[i]);
  return std::sqrt(s / static_cast<double>(std::max<std::size_t>(v.size(), 1)));
}

/// A factorization of Newton's matrix M − g J that a ModelJacobian may
/// offer in place of the dense LU (ModelJacobian<SystemRhs>: a sparse LU for
/// a large System with coloured Jacobians, src/ode/implicit_system.hpp).
/// Owned by the ModelJacobian; J is the dense n × n column-major Jacobian.
class NewtonFactorization {
 public:
  virtual ~NewtonFactorization() = default;
  virtual void factor(double g, const Eigen::MatrixXd& J) = 0;
  /// out = (M − g J)⁻¹ b with the last factor() (out must not alias b).
  virtual void solve(const Eigen::VectorXd& b, Eigen::VectorXd& out) = 0;
};

template <class M>
class ModifiedNewton {
 public:
  /// An update this small (max norm relative to 1 + |z|) that no longer
  /// contracts is round-off: Newton has converged as far as it can.
  static constexpr double kRoundoffFloor = 1e-13;

  ModifiedNewton(ModelJacobian<M>& jac, double tol, int max_iterations)
      : jac_(jac), n_(jac.n()), tol_(tol), max_iter_(max_iterations),
        J_(static_cast<Eigen::Index>(n_), static_cast<Eigen::Index>(n_)),
        A_(static_cast<Eigen::Index>(n_), static_cast<Eigen::Index>(n_)),
        lu_(static_cast<Eigen::Index>(n_ > kSmallLu ? n_ : 0)), g_(static_cast<Eigen::Index>(n_)),
        d_(static_cast<Eigen::Index>(n_)), f_(n_), piv_(n_),
        algebraic_(jac.algebraic().begin(), jac.algebraic().end()),
        unmeasured_(jac.newton_unmeasured().begin(), jac.newton_unmeasured().end()) {
    std::size_t skipped = 0;
    for (std::uint8_t u : unmeasured_) skipped += u ? 1 : 0;
    measured_ = std::max<std::size_t>(n_ - skipped, 1);
  }

  /// Evaluates J at (t, y) (and refactors at the next solve).
  void evaluate_jacobian(double t, std::span<const double> y) {
    J_ = jac_.state(t, y).leftCols(static_cast<Eigen::Index>(n_));
    have_j_ = true;
    factored_ = false;
    ++jacobian_updates;
  }
  /// Takes J from the left n columns of a [J | f_p] the caller evaluated
  /// (the same bits as evaluate_jacobian at that point: each tangent
  /// column of the forward-mode pass is computed independently).
  void set_jacobian(const Eigen::MatrixXd& jp) {
    J_ = jp.leftCols(static_cast<Eigen::Index>(n_));
    have_j_ = true;
    factored_ = false;
    ++jacobian_updates;
  }
  bool has_jacobian() const { return have_j_; }
  /// Forces a refactorisation with the current J at the next solve.
  void invalidate_factorization() { factored_ = false; }

  /// Makes M − g J factored for this g (reusing the LU when g is within
  /// 30 % of the g it was built with; M the mass matrix, stage_matrix).
  void prepare(double g) {
    if (factored_ && std::abs(g / g_lu_ - 1.0) <= 0.3) return;
    if (!external_decided_) {  // after the first Jacobian: the model's strategy is known
      external_decided_ = true;
      if constexpr (requires { jac_.newton_factorization(); }) external_ = jac_.newton_factorization();
    }
    if (external_) {
      external_->factor(g, J_);
    } else {
      stage_matrix(A_, g, J_, algebraic_);
      if (n_ > kSmallLu)
        lu_.compute(A_);
      else
        small_lu_factor(A_.data(), static_cast<Eigen::Index>(n_), piv_.data());
    }
    g_lu_ = g;
    factored_ = true;
    ++factorizations;
  }
  double factored_g() const { return g_lu_; }
  /// x ← M⁻¹ x with the current LU.
  void solve_in_place(Eigen::Ref<Eigen::VectorXd> x) {
    lu_solve(x, d_);
    x = d_;
  }

  /// Solves M (z − r) = g f(t, z) from the guess in z (overwritten; for an
  /// ODE z = r + g f(t, z), for a DAE's algebraic rows f(t, z) = 0). Returns
  /// false when Newton failed; `rate` is the last observed contraction.
  /// With error weights w (1/(atol_i + rtol |y_i|)), the update must also be
  /// below `kappa` in the weighted RMS norm, so that the Newton error is a
  /// small fraction of the requested accuracy even for tiny atol.
  bool solve(double t, std::span<const double> r, double g, std::span<double> z,
             std::span<const double> w = {}, double kappa = 0.01) {
    prepare(g);
    double prev = 0.0;
    rate = 0.0;
    for (int it = 0; it < max_iter_; ++it) {
      jac_.rhs(t, z, f_);
      for (std::size_t i = 0; i < n_; ++i)
        g_[static_cast<Eigen::Index>(i)] = -(z[i] - r[i] - g * f_[i]);
      for (std::size_t i = 0; i < algebraic_.size(); ++i)
        if (algebraic_[i]) g_[static_cast<Eigen::Index>(i)] = g * f_[i];
      lu_solve(g_, d_);
      double change = 0.0, finite = 0.0, weighted = 0.0;
      for (std::size_t i = 0; i < n_; ++i) {
        const double di = d_[static_cast<Eigen::Index>(i)];
        z[i] += di;
        finite += z[i] * 0.0;
        if (!unmeasured_.empty() && unmeasured_[i]) continue;
        change = std::max(change, std::abs(di) / (1.0 + std::abs(z[i])));
        if (!w.empty()) weighted += (di * w[i]) * (di * w[i]);
      }
      ++iterations;
      if (!(finite == 0.0)) return false;
      // One measure: ≤ 1 when both criteria hold.
      double c = change / tol_;
      if (!w.empty()) c = std::max(c, std::sqrt(weighted / static_cast<double>(measured_)) / kappa);
      if (c <= 1.0) return true;
      if (it > 0) {
        rate = c / prev;
        // Stalled at round-off (a few hundred ulps): as converged as it gets.
        if (rate > 0.9) return change <= kRoundoffFloor;
        if (c * rate / (1.0 - rate) <= 1.0) return true;
      }
      prev = c;
    }
    return false;
  }

  std::int64_t iterations = 0, factorizations = 0, jacobian_updates = 0;
  double rate = 0.0;

 private:
  /// out = M⁻¹ b with the current LU (out must not alias b).
  template <class B>
  void lu_solve(const B& b, Eigen::VectorXd& out) {
    if (external_) {
      b_ = b;
      external_->solve(b_, out);
    } else if (n_ > kSmallLu) {
      out = lu_.solve(b);
    } else {
      out = b;
      small_lu_solve(A_.data(), static_cast<Eigen::Index>(n_), piv_.data(), out.data());
    }
  }

  ModelJacobian<M>& jac_;
  std::size_t n_;
  double tol_;
  int max_iter_;
  Eigen::MatrixXd J_, A_;
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
  Eigen::VectorXd g_, d_;
  std::vector<double> f_;
  std::vector<Eigen::Index> piv_;
  std::vector<std::uint8_t> algebraic_;  // the DAE's mask (empty: an ODE)
  std::vector<std::uint8_t> unmeasured_;  // left out of the stopping test (empty: none)
  std::size_t measured_ = 1;
  double g_lu_ = 0.0;
  bool have_j_ = false, factored_ = false;
  NewtonFactorization* external_ = nullptr;  // the model's (null: the dense LU)
  bool external_decided_ = false;
  Eigen::VectorXd b_;
};

}  // namespace costate::ode::detail
