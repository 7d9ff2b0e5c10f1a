#pragma once
/// \file
/// Private to src/ode/: an ode::System as the `model` of the implicit
/// steppers' templates (Sdirk3Stepper, BdfStepper, ModifiedNewton in
/// steppers/), instantiated once here instead of per model. The
/// specialisation ModelJacobian<SystemRhs> takes f from System::rhs and
/// [f_x | f_p] from the System's Linearization::jacobian (dense, coloured
/// sparse or Dual passes — the System's strategy), laid out as the steppers
/// expect: n_x × (n_x + n_p), column-major, with a zero column for the
/// running cost's z (f does not depend on z).

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <Eigen/SparseLU>
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "costate/ode/scheme.hpp"
#include "costate/ode/steppers/implicit_common.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode::detail {

/// The mass matrix of `sys` as the implicit steppers take it (stage_matrix,
/// apply_mass): its algebraic-state mask, empty for an ODE (M = I).
inline std::span<const std::uint8_t> mass_mask(const System& sys) {
  return sys.n_algebraic() > 0 ? sys.algebraic() : std::span<const std::uint8_t>();
}

struct SystemRhs {
  const System& system;
  /// f(t, x, p) on doubles, for the steppers that call the model's rhs
  /// themselves (ThetaStepper).
  template <class T>
    requires std::same_as<T, double>
  void rhs(double t, std::span<const double> x, std::span<const double> p,
           std::span<double> dxdt) const {
    system.rhs(t, x, p, dxdt);
  }
};

template <>
class ModelJacobian<SystemRhs> {
 public:
  ModelJacobian(const SystemRhs& model, std::span<const double> p, std::size_t n)
      : sys_(model.system), p_(p.begin(), p.end()), n_(n), nm_(sys_.n_model_states()),
        flat_(n * (nm_ + p.size())),
        jac_(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n + p.size())) {
    COSTATE_CHECK_EQ(n, sys_.n_states(), "implicit scheme: state size and System disagree");
    jac_.setZero();
    lin_.emplace(sys_);
  }

  std::size_t n() const { return n_; }
  std::size_t n_parameters() const { return p_.size(); }
  std::span<const double> parameters() const { return p_; }
  /// The DAE's algebraic-state mask (M = diag(1 − mask); empty for an ODE).
  std::span<const std::uint8_t> algebraic() const { return mass_mask(sys_); }
  /// Left out of Newton's stopping test: a fully implicit DAE's derivatives
  /// w (ResidualForm: its algebraic states in the scheme's sense).
  std::span<const std::uint8_t> newton_unmeasured() const {
    return sys_.residual_form() ? mass_mask(sys_) : std::span<const std::uint8_t>();
  }
  /// Left out of the adaptive steppers' error test (implicit_common.hpp):
  /// the algebraic states, unless the model has no differential state (an
  /// all-algebraic model: its states are then measured, so that the steps
  /// follow them — a running cost's quadrature is outside the test, and
  /// with nothing measured the steps would grow to the whole interval).
  std::span<const std::uint8_t> error_unmeasured() const {
    if (!sys_.residual_form() && sys_.n_algebraic() == sys_.n_model_states())
      return std::span<const std::uint8_t>();
    return mass_mask(sys_);
  }

  void rhs(double t, std::span<const double> y, std::span<double> out) {
    sys_.rhs(t, y, p_, out);
    ++rhs_evaluations;
  }
  /// J = ∂f/∂x: the left n_x columns.
  const Eigen::MatrixXd& state(double t, std::span<const double> y) {
    return state_parameters(t, y);
  }
  /// [∂f/∂x | ∂f/∂p], n_x × (n_x + n_p) (the z column zero).
  const Eigen::MatrixXd& state_parameters(double t, std::span<const double> y) {
    ++jacobian_evaluations;
    lin_->at(t, y, p_);
    lin_->jacobian(flat_);
    // The tape strategy records a tape per at() that a Jacobian does not
    // use: from the second call on, a tangents-only linearization (the same
    // Dual passes, no tape).
    if (!tangents_only_ && lin_->strategy() == JacobianStrategy::Tape) {
      lin_.emplace(sys_, true);
      tangents_only_ = true;
    }
    const std::size_t np = p_.size();
    double* out = jac_.data();
    for (std::size_t c = 0; c < nm_; ++c)
      std::copy(flat_.begin() + static_cast<std::ptrdiff_t>(c * n_),
                flat_.begin() + static_cast<std::ptrdiff_t>((c + 1) * n_), out + c * n_);
    for (std::size_t j = 0; j < np; ++j)
      std::copy(flat_.begin() + static_cast<std::ptrdiff_t>((nm_ + j) * n_),
                flat_.begin() + static_cast<std::ptrdiff_t>((nm_ + j + 1) * n_),
                out + (n_ + j) * n_);
    return jac_;
  }

  /// ModifiedNewton's factorization of M − g J: a sparse LU for a System
  /// with the sparse strategy and ≥ kMinStates states (decided at the first
  /// call, after a Jacobian), else null (the dense LU).
  NewtonFactorization* newton_factorization();

  std::int64_t rhs_evaluations = 0, jacobian_evaluations = 0;

 private:
  const System& sys_;
  std::vector<double> p_;
  std::size_t n_, nm_;
  std::vector<double> flat_;
  Eigen::MatrixXd jac_;
  std::optional<Linearization> lin_;
  bool tangents_only_ = false;
  std::unique_ptr<NewtonFactorization> sparse_;  // newton_factorization()'s
  bool sparse_decided_ = false;
};

using SystemJacobian = ModelJacobian<SystemRhs>;

/// Second order: [f_x | f_p] and its ε-part at (t, x + εẋ, p + εṗ) from a
/// SecondOrderLinearization, laid out as SystemJacobian's (n_x × (n_x +
/// n_p), column-major, the z column zero) — the implicit schemes'
/// adjoint_tangent.
class SystemJacobianTangent {
 public:
  SystemJacobianTangent(const System& sys, std::span<const double> p)
      : sys_(sys), lin_(sys), p_(p), nx_(sys.n_states()), nm_(sys.n_model_states()),
        np_(p.size()), flat_(nx_ * (nm_ + np_)), flat_dot_(flat_.size()),
        jp_(Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(nx_),
                                  static_cast<Eigen::Index>(nx_ + np_))),
        jp_dot_(jp_) {}

  /// [J | f_p] and its ε-part at (x + εẋ, p + εṗ). A point bitwise equal to
  /// the last one is not evaluated again: the reverse sweeps of the
  /// two-point schemes ask for x_i at step i (its x) and at step i − 1 (its
  /// x_{i+1}), one after the other — the same J, J̇ either way.
  void at(double t, std::span<const double> x, std::span<const double> xdot,
          std::span<const double> pdot) {
    if (same_point(t, x, xdot, pdot)) return;
    lin_.at(t, x, xdot, p_, pdot);
    ++evaluations;
    if (nm_ == nx_) {  // no running cost: the layouts agree
      lin_.jacobian(std::span<double>(jp_.data(), flat_.size()),
                    std::span<double>(jp_dot_.data(), flat_.size()));
    } else {
      lin_.jacobian(flat_, flat_dot_);
      lay_out(flat_, jp_);
      lay_out(flat_dot_, jp_dot_);
    }
    last_t_ = t;
    last_.resize(x.size() + xdot.size() + pdot.size() + p_.size());
    double* l = last_.data();
    for (std::span<const double> v : {x, xdot, pdot, p_}) l = std::copy(v.begin(), v.end(), l);
    have_last_ = true;
  }
  const Eigen::MatrixXd& jp() const { return jp_; }
  const Eigen::MatrixXd& jp_dot() const { return jp_dot_; }
  std::int64_t evaluations = 0;

 private:
  bool same_point(double t, std::span<const double> x, std::span<const double> xdot,
                  std::span<const double> pdot) const {
    if (!have_last_ || std::memcmp(&t, &last_t_, sizeof t) != 0 ||
        last_.size() != x.size() + xdot.size() + pdot.size() + p_.size())
      return false;
    const double* l = last_.data();
    auto same = [&](std::span<const double> v) {
      const bool eq = v.empty() || std::memcmp(v.data(), l, v.size() * sizeof(double)) == 0;
      l += v.size();
      return eq;
    };
    return same(x) && same(xdot) && same(pdot) && same(p_);
  }
  void lay_out(const std::vector<double>& flat, Eigen::MatrixXd& out) const {
    double* o = out.data();
    for (std::size_t c = 0; c < nm_; ++c)
      std::copy(flat.begin() + static_cast<std::ptrdiff_t>(c * nx_),
                flat.begin() + static_cast<std::ptrdiff_t>((c + 1) * nx_), o + c * nx_);
    for (std::size_t j = 0; j < np_; ++j)
      std::copy(flat.begin() + static_cast<std::ptrdiff_t>((nm_ + j) * nx_),
                flat.begin() + static_cast<std::ptrdiff_t>((nm_ + j + 1) * nx_),
                o + (nx_ + j) * nx_);
  }
  const System& sys_;
  SecondOrderLinearization lin_;
  std::span<const double> p_;
  std::size_t nx_, nm_, np_;
  std::vector<double> flat_, flat_dot_;
  Eigen::MatrixXd jp_, jp_dot_;
  double last_t_ = 0.0;
  std::vector<double> last_;  // the last point: x, ẋ, ṗ, p
  bool have_last_ = false;
};

/// One tangent direction of f on a second-order System (the model on
/// Dual<double, 1>, as ExplicitRk's one-direction tangent): the ε-part of
/// f(t, x + ε ẋ, p + ε ṗ), i.e. f_x ẋ + f_p ṗ, without a Jacobian — the
/// implicit schemes' one-direction forward tangents (second_order_sweep).
class TangentPass {
 public:
  using Dual1 = SystemModel::Dual1;
  TangentPass(const System& sys, std::span<const double> p)
      : sys_(sys), n_(sys.n_model_states()), x_(sys.n_states()), out_(sys.n_states()),
        p_(p.size()) {
    for (std::size_t j = 0; j < p.size(); ++j) p_[j] = Dual1(p[j]);
  }
  /// Whether the System evaluates its model on Dual<double, 1> itself.
  static bool available(const System& sys) { return sys.model().second_order(); }
  /// dot = f_x ẋ + f_p ṗ at (t, x) (size n_x; the z entry of ẋ is not an
  /// input); an empty xdot is 0. Parameters: the constructor's p, tangent ṗ.
  void apply(double t, std::span<const double> x, std::span<const double> xdot,
             std::span<const double> pdot, double* dot) {
    for (std::size_t q = 0; q < x_.size(); ++q)
      x_[q] = q < n_ ? Dual1(x[q], {xdot.empty() ? 0.0 : xdot[q]}) : Dual1(0.0);
    for (std::size_t j = 0; j < p_.size(); ++j) p_[j].set_tangent(0, pdot[j]);
    sys_.model().rhs(t, std::span<const Dual1>(x_), std::span<const Dual1>(p_),
                     std::span<Dual1>(out_));
    for (std::size_t q = 0; q < out_.size(); ++q) dot[q] = out_[q].tangent(0);
    ++evaluations;
  }
  std::int64_t evaluations = 0;

 private:
  const System& sys_;
  std::size_t n_;
  std::vector<Dual1> x_, out_, p_;
};

/// [J | f_p] that a forward tangent of step i − 1 evaluated at its end
/// (x_i at t_i), kept for step i, whose Newton starts there: found only for
/// that step and a bitwise equal point (the same bits as evaluating it).
class StartJacobian {
 public:
  const Eigen::MatrixXd& keep(std::size_t step, std::span<const double> y,
                              const Eigen::MatrixXd& jp) {
    jp_ = jp;
    y_.assign(y.begin(), y.end());
    step_ = static_cast<std::int64_t>(step);
    return jp_;
  }
  const Eigen::MatrixXd* find(std::size_t step, std::span<const double> y) const {
    if (step_ != static_cast<std::int64_t>(step) || y.size() != y_.size() ||
        (!y.empty() && std::memcmp(y.data(), y_.data(), y.size() * sizeof(double)) != 0))
      return nullptr;
    return &jp_;
  }

 private:
  Eigen::MatrixXd jp_;
  std::vector<double> y_;
  std::int64_t step_ = -1;
};

/// (M − g J)ᵀ m = λ by a sparse LU (Eigen's SparseLU: COLAMD ordering,
/// partial pivoting) on the structure of a System's coloured Jacobian: the
/// pattern of J's state block plus the diagonal analysed once, the values
/// refactored per factor() — for the reverse steps of large sparse systems
/// (method-of-lines DAEs), where the dense TransposedSolve's O(n³) LU is
/// most of the gradient's cost. M = diag(1 − algebraic) (empty: I). The
/// result differs from the dense LU's by round-off (another elimination
/// order), so a scheme picks one or the other for a whole run.
class SparseTransposedSolve {
 public:
  /// Systems with at least this many states and the sparse strategy use it.
  static constexpr std::size_t kMinStates = 64;

  /// `pattern`: System::sparsity() (n_x rows, columns y then p); n = n_x;
  /// n_model: the model's states (columns ≥ n_model are not state columns).
  /// `transposed` false: factors M − g J itself (Newton's matrix,
  /// SparseNewtonFactorization), solve() gives (M − g J)⁻¹ b.
  SparseTransposedSolve(const ad::SparsityPattern& pattern, std::size_t n, std::size_t n_model,
                        std::span<const std::uint8_t> algebraic, bool transposed = true)
      : n_(static_cast<Eigen::Index>(n)), mass_(n, 1.0), x_(n_), transposed_(transposed) {
    for (std::size_t i = 0; i < algebraic.size(); ++i)
      if (algebraic[i]) mass_[i] = 0.0;
    std::vector<Eigen::Triplet<double>> t;
    for (std::size_t i = 0; i < n; ++i) {
      t.emplace_back(static_cast<int>(i), static_cast<int>(i), 0.0);
      if (static_cast<int>(i) >= pattern.rows) continue;
      for (const int j : pattern.row(static_cast<int>(i)))
        if (static_cast<std::size_t>(j) < n_model && static_cast<std::size_t>(j) != i) {
          if (transposed_)
            t.emplace_back(j, static_cast<int>(i), 0.0);  // Aᵀ(j, i) = A(i, j)
          else
            t.emplace_back(static_cast<int>(i), j, 0.0);
        }
    }
    At_.resize(n_, n_);
    At_.setFromTriplets(t.begin(), t.end());
    At_.makeCompressed();
    // Each stored value of Aᵀ: its (row, column) of A, read from J.
    const int* outer = At_.outerIndexPtr();
    const int* inner = At_.innerIndexPtr();
    for (Eigen::Index c = 0; c < n_; ++c)  // column c of Aᵀ = row c of A
      for (int k = outer[c]; k < outer[c + 1]; ++k) {
        const auto a = static_cast<std::size_t>(c), b = static_cast<std::size_t>(inner[k]);
        slots_.push_back(transposed_ ? Slot{a, b} : Slot{b, a});
      }
    lu_.analyzePattern(At_);
  }
  /// Factors (M − g J)ᵀ with J the left n columns of `jp` (column-major,
  /// n rows: SystemJacobian's layout).
  void factor(double g, const double* jp) {
    double* v = At_.valuePtr();
    const auto n = static_cast<std::size_t>(n_);
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      const auto [i, j] = slots_[k];  // A(i, j) = M(i, j) − g J(i, j)
      v[k] = (i == j ? mass_[i] : 0.0) - g * jp[j * n + i];
    }
    lu_.factorize(At_);
    COSTATE_CHECK(lu_.info() == Eigen::Success,
                  (transposed_ ? "reverse step: the sparse LU of (M − hγJ)ᵀ failed ("
                               : "Newton: the sparse LU of M − hγJ failed (")
                      << lu_.lastErrorMessage() << "): singular step matrix");
  }
  /// x = (M − g J)⁻ᵀ b with the last factor(); valid until the next solve.
  template <class B>
  const Eigen::VectorXd& solve(const B& b) {
    x_ = lu_.solve(b);
    return x_;
  }

 private:
  struct Slot {
    std::size_t row, col;  // of A
  };
  Eigen::Index n_;
  std::vector<double> mass_;
  Eigen::SparseMatrix<double, Eigen::ColMajor, int> At_;
  Eigen::SparseLU<Eigen::SparseMatrix<double, Eigen::ColMajor, int>, Eigen::COLAMDOrdering<int>> lu_;
  std::vector<Slot> slots_;
  Eigen::VectorXd x_;
  bool transposed_ = true;
};

/// Newton's M − g J by the sparse LU of SparseTransposedSolve (untransposed)
/// on a System's coloured pattern: what ModelJacobian<SystemRhs> offers the
/// implicit steppers' ModifiedNewton for a System with the sparse strategy
/// and at least SparseTransposedSolve::kMinStates states (the dense LU's
/// O(n³) per factorization was most of a large method-of-lines run).
class SparseNewtonFactorization final : public NewtonFactorization {
 public:
  SparseNewtonFactorization(const ad::SparsityPattern& pattern, std::size_t n, std::size_t n_model,
                            std::span<const std::uint8_t> algebraic)
      : lu_(pattern, n, n_model, algebraic, false) {}
  void factor(double g, const Eigen::MatrixXd& J) override { lu_.factor(g, J.data()); }
  void solve(const Eigen::VectorXd& b, Eigen::VectorXd& out) override { out = lu_.solve(b); }

 private:
  SparseTransposedSolve lu_;
};

inline NewtonFactorization* ModelJacobian<SystemRhs>::newton_factorization() {
  if (!sparse_decided_) {
    sparse_decided_ = true;
    if (n_ >= SparseTransposedSolve::kMinStates && sys_.strategy() == JacobianStrategy::Sparse) {
      // The pattern is the System's (detected at its first linearization;
      // the point given here is not read again).
      const std::vector<double> x0(n_, 0.0);
      sparse_ = std::make_unique<SparseNewtonFactorization>(sys_.sparsity(0.0, x0, p_), n_, nm_,
                                                            mass_mask(sys_));
    }
  }
  return sparse_.get();
}

/// Newton's weighted stopping fraction in replays: 10⁻⁶ of the error
/// tolerance, but not below newton_tol relative (round-off would stall it).
inline double replay_kappa(const IntegratorOptions& opt) {
  return std::max(1e-6, opt.newton_tol / opt.rtol);
}
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowMap = Eigen::Map<const RowMatrix>;
using RowMap = Eigen::Map<RowMatrix>;

/// Per-step data a StoreAll sweep keeps from its replayed forward steps for
/// the reverse steps: slot i holds `width` doubles. Kept only while the whole
/// cache fits kStepCacheBytes; above that the reverse steps recompute the
/// data (the same bits, more work).
class StepCache {
 public:
  static constexpr std::size_t kStepCacheBytes = kForwardRecordBytes;

  void enable(std::size_t slots, std::size_t width) {
    if (width == 0 || slots * width * sizeof(double) > kStepCacheBytes) return;
    width_ = width;
    data_.assign(slots * width, 0.0);
    have_.assign(slots, 0);
  }
  /// Read-only slots 0 … filled − 1 from `data` (filled × width doubles,
  /// not copied: it must outlive the cache).
  void borrow(std::size_t width, std::span<const double> data, std::size_t filled) {
    if (width == 0 || data.size() != filled * width) return;
    width_ = width;
    borrowed_ = data.data();
    borrowed_slots_ = filled;
  }
  bool enabled() const { return width_ > 0 && !borrowed_; }
  std::span<double> fill(std::size_t i) {
    have_[i] = 1;
    return std::span<double>(data_).subspan(i * width_, width_);
  }
  const double* get(std::size_t i) const {
    if (borrowed_) return i < borrowed_slots_ ? borrowed_ + i * width_ : nullptr;
    return width_ > 0 && i < have_.size() && have_[i] ? data_.data() + i * width_ : nullptr;
  }

 private:
  const double* borrowed_ = nullptr;
  std::size_t borrowed_slots_ = 0;
  std::size_t width_ = 0;
  std::vector<double> data_;
  std::vector<char> have_;
};

/// The time indices at which a step plan's events fire (StepPlan::events):
/// there x_i is not step i − 1's result (the events changed it), so nothing
/// a scheme computed at the end of step i − 1 stands for x_i, and bdf's
/// history restarts.
class Instants {
 public:
  void set(const StepPlan& steps) {
    at_.clear();
    for (const EventInstant& e : steps.events()) at_.push_back(e.at);  // ascending (StepPlan checks)
  }
  bool at(std::size_t i) const { return std::binary_search(at_.begin(), at_.end(), i); }
  /// The latest instant index ≤ i (0 when none). O(log instants): it is
  /// asked at every step, and a linear scan back made a sweep without
  /// events quadratic in its steps.
  std::size_t since(std::size_t i) const {
    const auto it = std::upper_bound(at_.begin(), at_.end(), i);
    return it == at_.begin() ? 0 : *(it - 1);
  }

 private:
  std::vector<std::size_t> at_;  // the instants' step indices, ascending
};

/// x_{i+1} for an adjoint step that needs it (θ, bdf): the state the
/// previous reverse step started from (the sweep runs i = l−1, …, 0), or
/// the last forward step's result; recomputed only when neither is i + 1.
class NextState {
 public:
  explicit NextState(std::size_t width) : step_(width), adj_(width) {}
  void stepped(std::size_t i, std::span<const double> xn) {
    std::copy(xn.begin(), xn.end(), step_.begin());
    step_index_ = static_cast<std::int64_t>(i) + 1;
  }
  /// Returns x_{i+1} or nullptr.
  const std::vector<double>* find(std::size_t i) const {
    const auto want = static_cast<std::int64_t>(i) + 1;
    if (adj_index_ == want) return &adj_;
    if (step_index_ == want) return &step_;
    return nullptr;
  }
  /// After the adjoint of step i: x_i is the next reverse step's x_{i+1}.
  void reversed(std::size_t i, std::span<const double> x) {
    std::copy(x.begin(), x.end(), adj_.begin());
    adj_index_ = static_cast<std::int64_t>(i);
  }

 private:
  std::vector<double> step_, adj_;
  std::int64_t step_index_ = -1, adj_index_ = -1;
};

}  // namespace costate::ode::detail
