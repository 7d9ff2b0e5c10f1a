#pragma once
/// \file
/// ode::System — a compiled, type-erased view of one model and one objective:
/// the right-hand side of the augmented state x = (y, z),
///     y' = f(t, y, p),   z' = q(t, y, p)   (z only when the objective has a
///                                           running cost q),
/// its derivatives, and the objective's terms
///     J = g(y(t1), p) + z(t1) + Σ_k ℓ_k(y(t_k), p)
/// with their gradients. `make_system(model, objective)` is the only
/// per-model template (one adapter evaluating the model on the few scalar
/// types the library needs: double, ad::Dual<double, 8>, ad::IndexSet and
/// the tape's ad::Real; make_second_order_system adds ad::Dual<double, 1>,
/// ad::SecondOrderDual<4, 6, 8> and ad::Reverse<ad::Dual<double, 1>>);
/// everything behind it — the
/// Jacobian strategies, the schemes and the sweeps — is compiled in src/ode/.
///
///     const ode::System sys = ode::make_system(problem.model, objective, problem.n_states(),
///                                              problem.p.size());
///     ode::Linearization lin(sys);
///     lin.at(t, x, p);              // f(t, x) and its derivative, once
///     lin.value();                  // f(t, x)
///     lin.vjp(w, xbar, pbar);       // xbar = f_xᵀ w,  pbar += f_pᵀ w
///     lin.jvp(v, q, out);           // out = f_x v + f_p q
///
/// Jacobian strategies (JacobianStrategy, chosen per model, same calls):
///   - Dense: one forward pass on Dual<double, 8> per 8 columns of
///     [f_y | f_p] gives f and the dense Jacobian together (⌈(n + n_p)/8⌉
///     passes; z is never an input, so its column is zero and not formed);
///     products are dense mat-vecs. Picked when n + n_p ≤ dense_max.
///   - Sparse: the pattern of [f_y | f_p] detected once (ad::detect_sparsity
///     on IndexSet at the first linearization), its columns coloured
///     (ad::color_columns); then ⌈colours/8⌉ passes on Dual<double, 8> per
///     linearization give f and every non-zero:
///         J(i, j) = (J S)(i, colour(j)),  S(j, c) = 1 iff colour(j) = c;
///     products run over the non-zeros (CSC). Picked for larger systems
///     whose pattern has ≤ max_colours colours. Valid only for right-hand
///     sides whose pattern does not change with the state: the pattern is
///     re-detected at linearizations 1, 2, 4, …, kPatternCheckInterval and
///     every kPatternCheckInterval-th after (the System's linearizations,
///     all its Linearization objects counted together), and a new entry throws
///     costate::Error (use JacobianStrategy::Tape for such models; a change
///     between two checks goes unnoticed).
///   - Tape: a short tape of one right-hand side per linearization
///     (record, then one reverse sweep per vjp); jvp by a Dual pass. The
///     fallback for large dense right-hand sides.
/// Automatic picks in that order. The Jacobian itself (dense, column-major
/// n_x × (n + n_p) of [f_y | f_p] restricted to the model states) is
/// available from every strategy (`jacobian()`), for Newton and CVODES.
///
/// Ownership: the System holds references to the model and the objective
/// (they must outlive it) — make_system copies neither. A System and its
/// copies share the lazily detected pattern and a tape for the objective's
/// terms: use one System (and one Linearization) per thread. Not
/// collective: a System is serial.
///
/// Second order (the last section; issue 14): SecondOrderLinearization —
/// f and its derivative with their ε-parts along (ẋ, ṗ), for
/// hessian_vector's forward-over-adjoint on the compiled schemes (rhs on
/// ad::SecondOrderDual<K>, Reverse<Dual<double,1>>: make_second_order_system)
/// — and the objective terms' Hessian–vector pieces (*_hessian_vector).
/// Built on this header: the implicit schemes' Newton (Linearization::
/// jacobian, dense LU; src/ode/scheme_*.cpp), the second-order products of
/// Hessians (make_second_order_system, SecondOrderLinearization), CVODES'
/// binding (cvodes::Binding in src/ode/cvodes_system.cpp, whose band/KLU
/// Jacobian is assembled from sparsity() with its own colouring), the
/// continuous adjoint's backward System, and equation models from input
/// files (ode::EquationModel, with their own vjp). Not yet: one CSC/CSR
/// Jacobian accessor shared by the implicit schemes and CVODES.
/// Limitations today: the parameters p are an argument of each call (not
/// stored); f may not depend on z.

#include <concepts>
#include <iterator>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/second_order_dual.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/events.hpp"
#include "costate/ode/objective.hpp"

namespace costate::expr {
class Kernel;  // expr/kernel.hpp: an equation model's compiled Jacobian rows (DirectCalls)
}  // namespace costate::expr

namespace costate::ode {

/// How a System forms f's derivatives (see the file comment).
enum class JacobianStrategy { Automatic, Dense, Sparse, Tape };
std::string to_string(JacobianStrategy s);
/// "automatic", "dense", "sparse", "tape"; the error lists them.
JacobianStrategy jacobian_strategy_from_string(std::string_view name);

struct SystemOptions {
  JacobianStrategy jacobian = JacobianStrategy::Automatic;
  /// Automatic: dense when n + n_p ≤ dense_max.
  int dense_max = 16;
  /// Automatic / Sparse: the coloured Jacobian only with ≤ max_colours
  /// colours (else the tape; an explicit Sparse falls back to the tape too).
  int max_colours = 16;
  void validate() const;
};

/// Re-detection interval of the sparse strategy's pattern (linearizations).
inline constexpr std::int64_t kPatternCheckInterval = 1024;

namespace detail {

/// A model with its own reverse derivatives (ode::EquationModel, which
/// interprets its compiled expressions backward): see
/// SystemModel::own_vjp_workspace.
template <class M>
concept HasOwnVjp = requires(const M& m, double t, std::span<const double> c,
                             std::span<double> d) {
  { m.vjp_workspace() } -> std::convertible_to<std::size_t>;
  m.linearize(t, c, c, d, d);
  m.vjp(d, c, d, d);
};

/// A model's double right-hand side and reverse rule as plain functions
/// (optional; ode::EquationModel's compiled kernel): System::rhs and the
/// own-vjp path of Linearization call them through these pointers — one
/// indirect call per evaluation, no virtual adapter and no span in between.
///   rhs(self, t, y, p, f, work): f = f(t, y, p); `work` null, or
///       own_vjp_workspace() doubles that then hold what vjp needs, and
///       begin with y and p from work[1] on (work[1 … 1 + n + n_p));
///   vjp(self, work, w, ybar, pbar): ybar = f_yᵀ w (assigned), pbar += f_pᵀ w
///       at the point of the rhs call that filled `work`.
/// y, p, f, ybar, pbar hold n and n_p values (the System's sizes).
///   rows (optional: null for none; only for n + n_p ≤
///       Linearization::kRowLanes): a kernel of f and [f_y | f_p] on the
///       inputs (t, y, p) (expr::Kernel::build_rows: n rows of
///       Linearization::kInputStride outputs, row i's Jacobian entries in
///       its first n + n_p lanes, zeros up to kRowLanes, then f_i — the
///       layout of ad::Dual<double, 8> outputs). Linearization's one-pass
///       dense strategy then evaluates it, in registers of its own
///       (Kernel::evaluate_prepared), instead of a Dual pass of the model,
///       and prefers it to the model's own vjp: its products are then the
///       dense ones, fused into the explicit RK adjoint's loops.
struct DirectCalls {
  const void* self = nullptr;
  void (*rhs)(const void*, double, const double*, const double*, double*, double*) = nullptr;
  void (*vjp)(const void*, double*, const double*, double*, double*) = nullptr;
  const expr::Kernel* rows = nullptr;
};

/// A model offering DirectCalls: `direct_calls()` returns a value with the
/// members self, rhs, vjp and rows of DirectCalls' types.
template <class M>
concept HasDirectCalls = HasOwnVjp<M> && requires(const M& m) {
  DirectCalls{m.direct_calls().self, m.direct_calls().rhs, m.direct_calls().vjp,
              m.direct_calls().rows};
};

/// Optional with HasOwnVjp: `linearize_point(t, y, p, work)` keeps in work
/// what vjp needs without forming f (burgers.hpp) — for callers that ask
/// for no f at that point (Linearization::at_point: the stages of an
/// explicit RK step whose slope the reverse step does not use).
template <class M>
concept HasOwnVjpPoint =
    HasOwnVjp<M> && requires(const M& m, double t, std::span<const double> c,
                             std::span<double> d) { m.linearize_point(t, c, c, d); };

/// A differential-algebraic model (issue 32): semi-explicit index 1,
///     x' = f(t, x, z, p),   0 = g(t, x, z, p),   g_z nonsingular,
/// written as one rhs whose rows are f for the differential states and g
/// for the algebraic ones; `algebraic_states()` returns the indices of the
/// algebraic states z (any range of integers: std::vector<std::size_t>, …).
/// The mass matrix is then M = diag(1 differential, 0 algebraic), and the
/// Jacobian blocks [f_x f_z; g_x g_z] are the System's ordinary ones.
template <class M>
concept HasAlgebraicStates = requires(const M& m) {
  { *std::begin(m.algebraic_states()) } -> std::convertible_to<std::size_t>;
};

/// A DAE whose consistent initial values solve for other unknowns than its
/// algebraic states (issue 32: the fully implicit form, ResidualForm in
/// residual_dae.hpp): `initial_unknowns()` lists the states solved from the
/// algebraic rows at t0 with every other state fixed (as many as there are
/// algebraic rows). Without it, the algebraic states themselves.
template <class M>
concept HasInitialUnknowns = HasAlgebraicStates<M> && requires(const M& m) {
  { *std::begin(m.initial_unknowns()) } -> std::convertible_to<std::size_t>;
};

/// The per-model part: evaluations on the scalar types the library uses.
/// Implemented by SystemAdapter<M, O> (below); everything else is compiled.
class SystemModel {
 public:
  using Dual8 = ad::Dual<double, 8>;
  virtual ~SystemModel() = default;
  /// dxdt = (f, q) at x = (y, z) (z ignored); sizes n_x, n_p, n_x.
  virtual void rhs(double t, std::span<const double> y, std::span<const double> p,
                   std::span<double> dxdt) const = 0;
  virtual void rhs(double t, std::span<const Dual8> y, std::span<const Dual8> p,
                   std::span<Dual8> dxdt) const = 0;
  virtual void rhs(double t, std::span<const ad::IndexSet> y, std::span<const ad::IndexSet> p,
                   std::span<ad::IndexSet> dxdt) const = 0;
  virtual void rhs(double t, std::span<const ad::Real> y, std::span<const ad::Real> p,
                   std::span<ad::Real> dxdt) const = 0;
  virtual ad::Real terminal(std::span<const ad::Real> y, std::span<const ad::Real> p) const = 0;
  virtual ad::Real observation(std::size_t k, std::span<const ad::Real> y,
                               std::span<const ad::Real> p) const = 0;
  virtual std::vector<double> observation_times() const = 0;
  // Second order (SecondOrderLinearization, the *_hessian_vector terms;
  // only from make_second_order_system, SecondOrderAdapter): f on
  // ad::SecondOrderDual<K> (the numbers of Dual<Dual<double, 1>, K>, bit for
  // bit, stored by component) for K = 4, 6, 8 (dense: the narrowest K ≥
  // n + n_p, else 8 per pass) and Reverse<Dual<double, 1>> (tape), the
  // objective's terms on Reverse<Dual<double, 1>>. The defaults throw
  // costate::Error (a System made by make_system).
  using Dual1 = ad::Dual<double, 1>;
  using SecondOrder4 = ad::SecondOrderDual<4>;
  using SecondOrder6 = ad::SecondOrderDual<6>;
  using SecondOrder8 = ad::SecondOrderDual<8>;
  using Reverse1 = ad::Reverse<Dual1>;
  virtual bool second_order() const { return false; }
  /// f on Dual<double, 1>: one tangent direction (second-order sweeps carry
  /// one). The default evaluates it on Dual<double, 8> (7 lanes idle);
  /// SecondOrderAdapter evaluates the model on Dual<double, 1> itself.
  virtual void rhs(double t, std::span<const Dual1> y, std::span<const Dual1> p,
                   std::span<Dual1> dxdt) const;
  virtual void rhs(double t, std::span<const SecondOrder4> y, std::span<const SecondOrder4> p,
                   std::span<SecondOrder4> dxdt) const;
  virtual void rhs(double t, std::span<const SecondOrder6> y, std::span<const SecondOrder6> p,
                   std::span<SecondOrder6> dxdt) const;
  virtual void rhs(double t, std::span<const SecondOrder8> y, std::span<const SecondOrder8> p,
                   std::span<SecondOrder8> dxdt) const;
  virtual void rhs(double t, std::span<const Reverse1> y, std::span<const Reverse1> p,
                   std::span<Reverse1> dxdt) const;
  virtual Reverse1 terminal(std::span<const Reverse1> y, std::span<const Reverse1> p) const;
  virtual Reverse1 observation(std::size_t k, std::span<const Reverse1> y,
                               std::span<const Reverse1> p) const;
  /// A model's own reverse derivatives (optional, HasOwnVjp): the doubles
  /// one linearization keeps, 0 for none. When non-zero and
  /// SystemOptions::jacobian is Automatic, Linearization::at and vjp call
  /// own_linearize and own_vjp instead of forming the Jacobian (jvp and
  /// jacobian() stay Dual passes; strategy() is then not resolved). Only
  /// without a running cost (f is then the model's right-hand side alone).
  virtual std::size_t own_vjp_workspace() const { return 0; }
  /// f(t, y, p) into f; keeps in `work` what own_vjp needs.
  virtual void own_linearize(double, std::span<const double>, std::span<const double>,
                             std::span<double>, std::span<double>) const {}
  /// own_linearize without f (HasOwnVjpPoint); false when the model has no
  /// such member (the caller then calls own_linearize).
  virtual bool own_linearize_point(double, std::span<const double>, std::span<const double>,
                                   std::span<double>) const {
    return false;
  }
  /// ybar = f_yᵀ w (assigned), pbar += f_pᵀ w at the point `work` holds.
  virtual void own_vjp(std::span<double>, std::span<const double>, std::span<double>,
                       std::span<double>) const {}
  /// The model's DirectCalls (HasDirectCalls, without a running cost), else
  /// null pointers.
  virtual DirectCalls direct_calls() const { return {}; }
  /// DAEs (HasAlgebraicStates): the indices of the algebraic states, whose
  /// rhs rows are constraints 0 = g; empty for an ODE.
  virtual std::vector<std::size_t> algebraic_states() const { return {}; }
  /// HasInitialUnknowns: the states solved at t0 (empty: the algebraic ones).
  virtual std::vector<std::size_t> initial_unknowns() const { return {}; }
};

template <class M, class O>
class SystemAdapter : public SystemModel {
 public:
  SystemAdapter(const M& model, const O& objective, std::size_t n)
      : model_(model), objective_(objective), n_(n) {}
  void rhs(double t, std::span<const double> y, std::span<const double> p,
           std::span<double> dxdt) const override {
    eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const Dual8> y, std::span<const Dual8> p,
           std::span<Dual8> dxdt) const override {
    eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const ad::IndexSet> y, std::span<const ad::IndexSet> p,
           std::span<ad::IndexSet> dxdt) const override {
    eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const ad::Real> y, std::span<const ad::Real> p,
           std::span<ad::Real> dxdt) const override {
    eval(t, y, p, dxdt);
  }
  ad::Real terminal(std::span<const ad::Real> y, std::span<const ad::Real> p) const override {
    if constexpr (HasTerminal<O>)
      return ad::Real(objective_.template terminal<ad::Real>(y.first(n_), p));
    else
      return ad::Real(0.0);
  }
  ad::Real observation(std::size_t k, std::span<const ad::Real> y,
                       std::span<const ad::Real> p) const override {
    if constexpr (HasObservations<O>)
      return ad::Real(objective_.template observation<ad::Real>(k, y.first(n_), p));
    else
      return ad::Real(0.0 * static_cast<double>(k));
  }
  std::size_t own_vjp_workspace() const override {
    if constexpr (kOwnVjp)
      return model_.vjp_workspace();
    else
      return 0;
  }
  void own_linearize([[maybe_unused]] double t, [[maybe_unused]] std::span<const double> y,
                     [[maybe_unused]] std::span<const double> p,
                     [[maybe_unused]] std::span<double> f,
                     [[maybe_unused]] std::span<double> work) const override {
    if constexpr (kOwnVjp) model_.linearize(t, y, p, f, work);
  }
  bool own_linearize_point([[maybe_unused]] double t, [[maybe_unused]] std::span<const double> y,
                           [[maybe_unused]] std::span<const double> p,
                           [[maybe_unused]] std::span<double> work) const override {
    if constexpr (kOwnVjp && HasOwnVjpPoint<M>) {
      model_.linearize_point(t, y, p, work);
      return true;
    } else {
      return false;
    }
  }
  void own_vjp([[maybe_unused]] std::span<double> work, [[maybe_unused]] std::span<const double> w,
               [[maybe_unused]] std::span<double> ybar,
               [[maybe_unused]] std::span<double> pbar) const override {
    if constexpr (kOwnVjp) model_.vjp(work, w, ybar, pbar);
  }
  DirectCalls direct_calls() const override {
    if constexpr (HasDirectCalls<M> && !HasRunning<O>) {
      const auto c = model_.direct_calls();
      return DirectCalls{c.self, c.rhs, c.vjp, c.rows};
    } else {
      return {};
    }
  }
  std::vector<std::size_t> algebraic_states() const override {
    if constexpr (HasAlgebraicStates<M>) {
      std::vector<std::size_t> z;
      for (const auto i : model_.algebraic_states()) z.push_back(static_cast<std::size_t>(i));
      return z;
    } else {
      return {};
    }
  }
  std::vector<std::size_t> initial_unknowns() const override {
    if constexpr (HasInitialUnknowns<M>) {
      std::vector<std::size_t> u;
      for (const auto i : model_.initial_unknowns()) u.push_back(static_cast<std::size_t>(i));
      return u;
    } else {
      return {};
    }
  }
  std::vector<double> observation_times() const override {
    if constexpr (HasObservations<O>) {
      const auto t = objective_.observation_times();
      return std::vector<double>(t.begin(), t.end());
    } else {
      return {};
    }
  }

 protected:
  template <class T>
  void eval(double t, std::span<const T> y, std::span<const T> p, std::span<T> dxdt) const {
    model_.template rhs<T>(t, y.first(n_), p, dxdt.first(n_));
    // The running cost's z' = q: only on a System that integrates z
    // (System::without_running_cost() evaluates the model alone).
    if constexpr (HasRunning<O>)
      if (dxdt.size() > n_) dxdt[n_] = T(objective_.template running<T>(t, y.first(n_), p));
  }
  static constexpr bool kOwnVjp = HasOwnVjp<M> && !HasRunning<O>;
  const M& model_;
  const O& objective_;
  std::size_t n_;
};

/// SystemAdapter plus the second-order evaluations (make_second_order_system):
/// the first-order members are SystemAdapter's (instantiated once per model
/// and objective whichever maker is called).
template <class M, class O>
class SecondOrderAdapter final : public SystemAdapter<M, O> {
 public:
  using SystemAdapter<M, O>::SystemAdapter;
  using Dual1 = SystemModel::Dual1;
  using SecondOrder4 = SystemModel::SecondOrder4;
  using SecondOrder6 = SystemModel::SecondOrder6;
  using SecondOrder8 = SystemModel::SecondOrder8;
  using Reverse1 = SystemModel::Reverse1;
  using SystemAdapter<M, O>::rhs;
  bool second_order() const override { return true; }
  void rhs(double t, std::span<const Dual1> y, std::span<const Dual1> p,
           std::span<Dual1> dxdt) const override {
    this->eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const SecondOrder4> y, std::span<const SecondOrder4> p,
           std::span<SecondOrder4> dxdt) const override {
    this->eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const SecondOrder6> y, std::span<const SecondOrder6> p,
           std::span<SecondOrder6> dxdt) const override {
    this->eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const SecondOrder8> y, std::span<const SecondOrder8> p,
           std::span<SecondOrder8> dxdt) const override {
    this->eval(t, y, p, dxdt);
  }
  void rhs(double t, std::span<const Reverse1> y, std::span<const Reverse1> p,
           std::span<Reverse1> dxdt) const override {
    this->eval(t, y, p, dxdt);
  }
  Reverse1 terminal(std::span<const Reverse1> y, std::span<const Reverse1> p) const override {
    if constexpr (HasTerminal<O>)
      return Reverse1(this->objective_.template terminal<Reverse1>(y.first(this->n_), p));
    else
      return Reverse1(0.0);
  }
  Reverse1 observation(std::size_t k, std::span<const Reverse1> y,
                       std::span<const Reverse1> p) const override {
    if constexpr (HasObservations<O>)
      return Reverse1(this->objective_.template observation<Reverse1>(k, y.first(this->n_), p));
    else
      return Reverse1(0.0 * static_cast<double>(k));
  }
  using SystemAdapter<M, O>::terminal;
  using SystemAdapter<M, O>::observation;
};

}  // namespace detail

class Linearization;

class System {
 public:
  /// Prefer make_system. `model` is owned (shared by copies of the System).
  System(std::shared_ptr<const detail::SystemModel> model, std::size_t n_model_states,
         std::size_t n_parameters, bool has_terminal, bool has_running, bool has_observations,
         SystemOptions options = {});

  /// n_x = n (+ 1 with a running cost): the size of the integrated state.
  std::size_t n_states() const { return nx_; }
  std::size_t n_model_states() const { return n_; }
  std::size_t n_parameters() const { return np_; }
  bool has_terminal() const { return has_terminal_; }
  bool has_running() const { return has_running_; }
  /// The same model without the running cost's quadrature z (n_x = n): what
  /// `costate run` integrates. A step plan chooses its steps on it, so that
  /// z (which feeds nothing back) never changes them. Shares the model.
  System without_running_cost() const;
  bool has_observations() const { return has_observations_; }
  /// The strategy products use (Automatic resolved; Sparse may have fallen
  /// back to Tape after the first linearization detected too many colours).
  JacobianStrategy strategy() const;
  const SystemOptions& options() const { return options_; }

  // DAEs (issue 32; HasAlgebraicStates): which of the n_x states are
  // algebraic (1) or differential (0) — M = diag(1 − algebraic()) in
  // M x' = F(t, x, p). The running cost's z is differential. The implicit
  // schemes and IDAS integrate n_algebraic() > 0 (support.hpp: supports_dae).
  std::span<const std::uint8_t> algebraic() const { return algebraic_; }
  std::size_t n_algebraic() const { return n_algebraic_; }
  /// The states solved from the algebraic rows at t0 (consistent initial
  /// values, dae.hpp): algebraic() for a semi-explicit DAE; for a fully
  /// implicit one (ResidualForm, residual_dae.hpp) the derivatives of its
  /// differential components and its algebraic components. Empty for an ODE.
  std::span<const std::uint8_t> initial_unknowns() const { return unknowns_; }
  /// Whether the model declared its own initial unknowns (a ResidualForm).
  bool residual_form() const { return residual_form_; }

  /// dxdt = (f, q)(t, x, p). Inline: the model's DirectCalls::rhs when it
  /// has one (one indirect call from the stepper into the model).
  void rhs(double t, std::span<const double> x, std::span<const double> p,
           std::span<double> dxdt) const {
    if (direct_.rhs != nullptr)
      return direct_.rhs(direct_.self, t, x.data(), p.data(), dxdt.data(), nullptr);
    model_->rhs(t, x, p, dxdt);
  }
  /// The dense [f_y | f_p] (n_x × (n + n_p), column-major) at (t, x).
  void jacobian(double t, std::span<const double> x, std::span<const double> p,
                std::span<double> out) const;
  /// xbar = f_xᵀ w, pbar += f_pᵀ w at (t, x) (one linearization).
  void vjp(double t, std::span<const double> x, std::span<const double> p,
           std::span<const double> w, std::span<double> xbar, std::span<double> pbar) const;
  /// out = f_x v + f_p q at (t, x) (one linearization).
  void jvp(double t, std::span<const double> x, std::span<const double> p,
           std::span<const double> v, std::span<const double> q, std::span<double> out) const;
  /// The sparsity pattern of [f_y | f_p] (n_x × (n + n_p)), detected at (t, x)
  /// on the first call.
  const ad::SparsityPattern& sparsity(double t, std::span<const double> x,
                                      std::span<const double> p) const;

  // The objective's terms (0 and no gradient when absent). The gradients add
  // ∂/∂y into gy (size n) and ∂/∂p into gp; they return the term's value.
  std::vector<double> observation_times() const { return model_->observation_times(); }
  double terminal_gradient(std::span<const double> y, std::span<const double> p,
                           std::span<double> gy, std::span<double> gp) const;
  double observation_gradient(std::size_t k, std::span<const double> y, std::span<const double> p,
                              std::span<double> gy, std::span<double> gp) const;

  // Second order (the section at the end of this header): the terms'
  // gradients at (y + ε ẏ, p + ε ṗ) and their ε-parts. gy, gp += ∇ℓ;
  // gy_dot, gp_dot += ∇²ℓ (ẏ, ṗ); value_dot = ∇ℓ · (ẏ, ṗ). Returns ℓ.
  double terminal_hessian_vector(std::span<const double> y, std::span<const double> ydot,
                                 std::span<const double> p, std::span<const double> pdot,
                                 std::span<double> gy, std::span<double> gy_dot,
                                 std::span<double> gp, std::span<double> gp_dot,
                                 double& value_dot) const;
  double observation_hessian_vector(std::size_t k, std::span<const double> y,
                                    std::span<const double> ydot, std::span<const double> p,
                                    std::span<const double> pdot, std::span<double> gy,
                                    std::span<double> gy_dot, std::span<double> gp,
                                    std::span<double> gp_dot, double& value_dot) const;

  const detail::SystemModel& model() const { return *model_; }

  /// The model's events (events.hpp; a HasEvents model), else null.
  const detail::EventModel* events() const { return events_.get(); }
  bool has_events() const { return events_ != nullptr && events_->n_events() > 0; }
  /// This System with `events` (shared; a model's EventAdapter).
  System with_events(std::shared_ptr<const detail::EventModel> events) const {
    System s = *this;
    s.events_ = std::move(events);
    return s;
  }

 private:
  friend class Linearization;
  friend class SecondOrderLinearization;
  struct Shared;  // the resolved strategy, pattern and colouring (src/ode/system.cpp)
  // The coloured strategy's pieces, for Linearization and
  // SecondOrderLinearization alike (src/ode/system.cpp): the strategy
  // resolved at the first linearization (pattern detected and coloured:
  // Sparse, or Tape beyond max_colours), whether this sparse linearization
  // re-detects the pattern (kPatternCheckInterval's schedule, on the clock
  // all of them share), and that re-detection (throws on a new entry).
  JacobianStrategy resolve_strategy(double t, std::span<const double> x,
                                    std::span<const double> p) const;
  bool pattern_check_due() const;
  void check_sparsity_pattern(double t, std::span<const double> x,
                              std::span<const double> p) const;
  std::shared_ptr<const detail::SystemModel> model_;
  std::size_t n_ = 0, nx_ = 0, np_ = 0;
  bool has_terminal_ = false, has_running_ = false, has_observations_ = false;
  SystemOptions options_;
  detail::DirectCalls direct_;  // the model's (null pointers for none)
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<const detail::EventModel> events_;  // null: no events
  // DAEs: the mask of algebraic states (n_x entries) and their count, from
  // the model's algebraic_states() (checked in set_algebraic()).
  void set_algebraic();
  std::vector<std::uint8_t> algebraic_, unknowns_;
  std::size_t n_algebraic_ = 0;
  bool residual_form_ = false;
};

namespace detail {
/// The EventModel of a model with events, else null (make_system).
template <class M>
std::shared_ptr<const EventModel> events_of(const M& model) {
  if constexpr (HasEvents<M>)
    return std::make_shared<EventAdapter<M>>(model);
  else
    return nullptr;
}
}  // namespace detail

/// A System linearized at one (t, x, p): f there and its derivative, reused
/// by any number of products until the next at(). Owns its workspace (no
/// allocation per call after the first); one per concurrent caller.
class Linearization {
 public:
  /// `tangents_only`: only value(), jvp and jvp_many will be asked for (the
  /// tape strategy then records no tape: its jvp are Dual passes anyway).
  explicit Linearization(const System& system, bool tangents_only = false);
  ~Linearization();
  Linearization(Linearization&&) noexcept;
  Linearization& operator=(Linearization&&) noexcept;

  /// Evaluates f and its derivative at (t, x, p); the spans are read now.
  void at(double t, std::span<const double> x, std::span<const double> p);
  /// at(t, x, p) for a caller that asks only for vjp before the next at():
  /// a model's own rule with linearize_point (HasOwnVjpPoint) then skips f
  /// and keeps no copy of the point (value(), jvp and jacobian() throw
  /// costate::Error until the next at()); every other strategy is at()
  /// itself. The same vjp, the same bits.
  void at_point(double t, std::span<const double> x, std::span<const double> p);
  /// f(t, x, p) of the last at().
  std::span<const double> value() const;
  /// xbar = f_xᵀ w (size n_x; the z entry is 0), pbar += f_pᵀ w.
  void vjp(std::span<const double> w, std::span<double> xbar, std::span<double> pbar);
  /// out = f_x v + f_p q.
  void jvp(std::span<const double> v, std::span<const double> q, std::span<double> out);
  /// Many directions at once: V (n_x × m), Q (n_p × m), Out (n_x × m), all
  /// row-major with m columns: Out = f_x V + f_p Q.
  void jvp_many(std::size_t m, std::span<const double> V, std::span<const double> Q,
                std::span<double> out);
  /// The dense [f_y | f_p], column-major n_x × (n + n_p).
  void jacobian(std::span<double> out);
  JacobianStrategy strategy() const;
  /// Lanes of a dense_row.
  static constexpr std::size_t kRowLanes = 8;
  /// After at() with the one-pass dense strategy (n + n_p ≤ kRowLanes): row
  /// i < n_x of [f_y | f_p] as kRowLanes doubles (lanes ≥ n + n_p unused),
  /// valid (and at the same address) until the Linearization is destroyed —
  /// for callers that fuse vjp into their own loops (the explicit RK
  /// adjoint). nullptr for every other strategy.
  const double* dense_row(std::size_t i) const;
  /// Doubles between consecutive dense_input() entries.
  static constexpr std::size_t kInputStride = kRowLanes + 1;
  /// After a first at() with the one-pass dense strategy (dense_row() not
  /// nullptr): where the next evaluate() reads x_i (i < n_x; entry i + 1 is
  /// kInputStride doubles further on; the running cost's z entry is written
  /// and ignored, as at() ignores it). For callers that form the point in
  /// place (the explicit RK adjoint: each stage straight into its
  /// Linearization). nullptr for every other strategy and before the first
  /// at().
  double* dense_input(std::size_t i);
  /// at(t, x, p) with x already written through dense_input() and p the
  /// parameters of the last at() (z, the running cost's entry, is never an
  /// input): the same pass, the same bits. Only after dense_input()
  /// returned non-null (a debug assert).
  void evaluate(double t);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The System of `model` (n states, n_p parameters) and `objective`. Both
/// are held by reference: they must outlive the System.
template <class M, class O>
System make_system(const M& model, const O& objective, std::size_t n_states,
                   std::size_t n_parameters, SystemOptions options = {}) {
  return System(std::make_shared<detail::SystemAdapter<M, O>>(model, objective, n_states),
                n_states, n_parameters, HasTerminal<O>, HasRunning<O>, HasObservations<O>,
                options)
      .with_events(detail::events_of(model));
}

/// make_system with the second-order evaluations (SecondOrderLinearization,
/// System::*_hessian_vector; the last section of this header): the model and
/// objective must accept ad::Dual<double, 1> and ad::SecondOrderDual<K>
/// (the model only; it has dual.hpp's operations and functions) and
/// ad::Reverse<ad::Dual<double, 1>>. A System from make_system refuses them
/// (costate::Error), so gradient-only callers do not instantiate them.
template <class M, class O>
System make_second_order_system(const M& model, const O& objective, std::size_t n_states,
                                std::size_t n_parameters, SystemOptions options = {}) {
  return System(std::make_shared<detail::SecondOrderAdapter<M, O>>(model, objective, n_states),
                n_states, n_parameters, HasTerminal<O>, HasRunning<O>, HasObservations<O>,
                options)
      .with_events(detail::events_of(model));
}

// ---------------------------------------------------------------- second order
// (issue 14: Hessian–vector products on the compiled schemes)

/// A System linearized to second order at (t, x + ε ẋ, p + ε ṗ): f and its
/// derivative with their ε-parts (the directional derivative along (ẋ, ṗ)),
/// for the forward-over-adjoint sweep (scheme.hpp, second_order_sweep):
///     value()      = f,                value_dot() = ḟ = f_x ẋ + f_p ṗ,
///     vjp:  xbar     = f_xᵀ w,             pbar     += f_pᵀ w,
///           xbar_dot = f_xᵀ ẇ + ḟ_xᵀ w,    pbar_dot += f_pᵀ ẇ + ḟ_pᵀ w,
/// with ḟ_x = f_xx[ẋ] + f_xp[ṗ], ḟ_p = f_px[ẋ] + f_pp[ṗ] (i.e.
/// (w·f)''[ẋ, ṗ] read by rows). Strategies (SystemOptions, as first order):
///   - dense (n + n_p ≤ dense_max, or JacobianStrategy::Dense): one pass on
///     ad::SecondOrderDual<K> (Dual<Dual<double, 1>, K>'s numbers and bits,
///     stored by component) with K the narrowest of 4, 6, 8 that holds
///     n + n_p (each lane costs its share of every operation, so lanes past
///     n + n_p would be pure cost), else ⌈(n + n_p)/8⌉ passes on K = 8,
///     give f, ḟ, [f_y | f_p] and its ε-part; products are dense mat-vecs
///     (the value parts sum in the first-order dense order: the same bits as
///     Linearization::vjp; every lane's arithmetic is its own, so K changes
///     no bit);
///   - sparse (beyond dense_max, when the System resolves to its coloured
///     strategy at the first at(): the same pattern, colouring and pattern
///     re-checks as Linearization's, shared): ⌈colours/K⌉ passes on
///     SecondOrderDual<K>, input j seeded in lane colour(j), K the narrowest
///     of 4, 6, 8 that holds the colours; the non-zeros of [f_y | f_p] and
///     J̇ kept by columns, vjp by columns (each value entry summed over its
///     rows in increasing order, as Linearization's coloured vjp: the same
///     bits);
///   - tape otherwise (JacobianStrategy::Tape, or too many colours): one
///     recording of f on Reverse<Dual<double, 1>> (inputs x + εẋ, p + εṗ)
///     per at(); each vjp is one reverse sweep seeded with w + εẇ.
/// jacobian(J, J_dot) (dense [f_y | f_p] and its ε-part, column-major
/// n_x × (n + n_p); for the implicit schemes' solves) is formed by Dual
/// passes with every strategy. The z entry of xbar (running cost) is 0.
class SecondOrderLinearization {
 public:
  explicit SecondOrderLinearization(const System& system);
  ~SecondOrderLinearization();
  SecondOrderLinearization(SecondOrderLinearization&&) noexcept;
  SecondOrderLinearization& operator=(SecondOrderLinearization&&) noexcept;

  /// Evaluates at (t, x + ε xdot, p + ε pdot); the spans are read now.
  void at(double t, std::span<const double> x, std::span<const double> xdot,
          std::span<const double> p, std::span<const double> pdot);
  std::span<const double> value() const;
  std::span<const double> value_dot() const;
  void vjp(std::span<const double> w, std::span<const double> wdot, std::span<double> xbar,
           std::span<double> xbar_dot, std::span<double> pbar, std::span<double> pbar_dot);
  void jacobian(std::span<double> out, std::span<double> out_dot);
  /// True for the dense strategy, false for the sparse one and the tape.
  bool dense() const;

  // The one-pass dense strategy (n + n_p ≤ kRowLanes) in place, as
  // Linearization's dense_row / dense_input / evaluate: for callers that
  // fuse the vjp into their own loops (the explicit RK adjoint_tangent).
  /// Lanes of a pass at most (one pass when n + n_p ≤ kRowLanes).
  static constexpr std::size_t kRowLanes = 8;
  /// Lanes of this linearization's passes: 4, 6 or 8 (fixed at
  /// construction; see the class comment).
  std::size_t row_lanes() const;
  /// After at() with the one-pass dense strategy: row i < n_x of [f_y | f_p]
  /// (dense_row) and of its ε-part J̇ (dense_row_dot) as row_lanes() doubles
  /// each (lanes ≥ n + n_p unused), valid (and at the same address) until
  /// the linearization is destroyed. nullptr for the tape, for more than one
  /// pass and before the first at().
  const double* dense_row(std::size_t i) const;
  const double* dense_row_dot(std::size_t i) const;
  /// Doubles between consecutive dense_input() (and dense_input_dot())
  /// entries: 2 (row_lanes() + 1).
  std::size_t input_stride() const { return 2 * (row_lanes() + 1); }
  /// After a first at() (dense_row() not nullptr): where the next evaluate()
  /// reads x_i and ẋ_i (i < n_x; entry i + 1 is input_stride() doubles
  /// further on; a running cost's z entry is written and ignored). nullptr
  /// otherwise.
  double* dense_input(std::size_t i);
  double* dense_input_dot(std::size_t i);
  /// at(t, x + ε ẋ, p + ε ṗ) with x, ẋ written through dense_input() /
  /// dense_input_dot() and p, ṗ those of the last at(): the same pass, the
  /// same bits. Only after dense_input() returned non-null (a debug assert).
  void evaluate(double t);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace costate::ode
