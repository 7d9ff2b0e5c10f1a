#pragma once
/// \file
/// PDE-constrained inversion for a parameter field m: the MAP point of
///     J(m) = Φ(m) + R(m),   Φ(m) = ½ Σ_i ((B u(m))_i − d_i)² / σ_i²,
/// u(m) the solution at the end of the run (any pde::TimeStepper: the
/// θ-method or explicit Runge–Kutta; pde::Misfit),
/// B the sensors (pde::Observations), R a pde::Prior. The field in the
/// PDE is κ = m, or κ = exp(m) in log form (positivity):
///     ∇_m Φ = κ ⊙ ∇_κ Φ,
///     ∇²_m Φ v = κ ⊙ ∇²_κ Φ (κ ⊙ v) + (κ ⊙ ∇_κ Φ) ⊙ v   (last term: exact only).
///
/// newton_cg — inexact Newton-CG with line search:
///   1. linearize at m_k: Φ, ∇Φ (one forward + one adjoint solve; the
///      trajectory and adjoints are kept), g = ∇Φ + ∇R;
///   2. solve H p = −g by CG preconditioned with 𝐑⁻¹ (the prior's
///      covariance), H v = ∇²Φ v + 𝐑 v, each ∇²Φ v one incremental forward
///      (tangent) and one incremental adjoint (second-order) solve along
///      the stored trajectory; Gauss–Newton ∇²Φ for the first
///      `gauss_newton_iterations` iterations, the exact second-order
///      adjoint after; stop when ‖r‖_{𝐑⁻¹} ≤ η_k ‖g‖_{𝐑⁻¹}, at negative
///      curvature dᵀHd ≤ 0 (Steihaug: the last iterate, or the
///      preconditioned steepest descent −𝐑⁻¹g on the first CG iteration),
///      or after cg_max_iterations;
///   3. Eisenstat–Walker forcing (their "choice 2", γ = 0.9, α = 2):
///      η_0 = eta_max, η_k = min(eta_max, 0.9 (‖g_k‖/‖g_{k−1}‖)²),
///      safeguarded by max(η_k, 0.9 η_{k−1}²) when 0.9 η_{k−1}² > 0.1,
///      and never below ½ gradient_tolerance / ‖g_k‖ (no oversolving);
///   4. Armijo backtracking: α ∈ {1, ½, ¼, …}, accept J(m + αp) ≤
///      J(m) + c α gᵀp + 8 ε_machine |J(m)| (one forward solve per trial;
///      the slack lets the last steps through at J's round-off floor);
///   stop when ‖g‖₂ ≤ max(gradient_atol, gradient_rtol ‖g_0‖₂).
/// lbfgs — the same J and ∇J by PETSc TAO blmvm (optimize::minimize; no
/// preconditioner, no bounds). TAO runs serially on every rank on the
/// gathered field (O(N) memory per rank), all ranks in lock-step.
///
/// Cost unit: one PDE solve = one whole time integration (forward,
/// adjoint, incremental forward, incremental adjoint), counted in
/// PdeSolves; each is `steps` linear solves.
///
/// Collective over the grid's communicator. Limitations: one parameter
/// field (dof 1); terminal observations (observations.hpp); the scalar
/// parameters and the initial state are held fixed.

#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "costate/pde/objective.hpp"
#include "costate/pde/prior.hpp"
#include "costate/pde/explicit_rk.hpp"
#include "costate/pde/theta.hpp"

namespace costate::pde {

/// PDE solves (whole time integrations) by kind.
struct PdeSolves {
  std::int64_t forward = 0;
  std::int64_t adjoint = 0;
  std::int64_t incremental_forward = 0;  ///< tangent-linear runs
  std::int64_t incremental_adjoint = 0;  ///< second-order (or Gauss–Newton) adjoint runs
  std::int64_t total() const { return forward + adjoint + incremental_forward + incremental_adjoint; }
};

/// The data misfit Φ(m) of a parameter field, with what Newton-CG needs.
/// Implemented by Misfit<Model>; the solvers below are compiled once.
class MisfitModel {
 public:
  virtual ~MisfitModel() = default;
  /// The grid of m (dof 1).
  virtual const Grid& field_grid() const = 0;
  /// Φ(m): one forward solve. Collective.
  virtual double misfit(const GlobalVector& m) = 0;
  /// Φ(m) and ∇Φ into `gradient`; keeps m's trajectory and adjoints for
  /// hessian_vector. One forward + one adjoint solve. Collective.
  virtual double linearize(const GlobalVector& m, const GlobalVector& gradient) = 0;
  /// out = ∇²Φ v (or Gauss–Newton) at the last linearized m. One
  /// incremental forward + one incremental adjoint solve. Collective.
  virtual void hessian_vector(const GlobalVector& v, const GlobalVector& out, HessianProduct product) = 0;
  /// The parameter field the PDE sees, κ(m) (m, or exp(m) in log form).
  virtual void parameter_field(const GlobalVector& m, const GlobalVector& kappa) const = 0;
  virtual PdeSolves solves() const = 0;
};

/// Φ(m) for a model with one parameter field through any pde::TimeStepper:
/// the θ-method (ThetaOptions: linearize keeps the trajectory and the
/// adjoints, ThetaLinearization) or explicit Runge–Kutta
/// (ExplicitRkOptions: each Hessian product is a whole second-order sweep
/// from u0, TimeStepper::linearize_point), or a caller's factory.
/// `op` (which must outlive this) holds the scalar parameters; its field is
/// set from m on every evaluation. Holds `u0`, the objective (usually
/// Objective::sensors) and the integrator options.
template <class Model>
class Misfit final : public MisfitModel {
  static_assert(Model::field_parameters == 1, "pde::Misfit: a model with one parameter field");

 public:
  /// A fresh integrator of `op` (one per evaluation: a linear model's
  /// I − hθJ depends on κ).
  using Factory = std::function<std::unique_ptr<TimeStepper>(Operator<Model>&)>;

  Misfit(Operator<Model>& op, const ThetaOptions& options, const GlobalVector& u0, Objective objective,
         bool log_form)
      : Misfit(op, theta_factory(options), u0, std::move(objective), log_form) {}
  Misfit(Operator<Model>& op, const ExplicitRkOptions& options, const GlobalVector& u0, Objective objective,
         bool log_form)
      : Misfit(op, explicit_rk_factory(options), u0, std::move(objective), log_form) {}
  Misfit(Operator<Model>& op, Factory make_integrator, const GlobalVector& u0, Objective objective, bool log_form)
      : op_(op), make_integrator_(std::move(make_integrator)), objective_(std::move(objective)),
        log_form_(log_form) {
    u0_ = op.grid().create_global("pde::inversion u0");
    deep_copy(u0_, u0);
    u_ = op.grid().create_global("pde::inversion u");
    kappa_ = op.field_grid()->create_global("pde::inversion kappa");
    gk_ = op.field_grid()->create_global("pde::inversion dPhi/dkappa");
    dir_ = op.field_grid()->create_global("pde::inversion direction");
  }
  const Grid& field_grid() const override { return *op_.field_grid(); }

  void parameter_field(const GlobalVector& m, const GlobalVector& kappa) const override {
    if (log_form_)
      transform(kappa, m, [](double x) { return std::exp(x); });
    else
      deep_copy(kappa, m);
  }

  double misfit(const GlobalVector& m) override {
    set_field(m);
    const std::unique_ptr<TimeStepper> integ = make_integrator_(op_);
    deep_copy(u_, u0_);
    integ->integrate(u_);
    ++solves_.forward;
    return objective_.evaluate(op_.grid(), u_, nullptr);
  }

  double linearize(const GlobalVector& m, const GlobalVector& gradient) override {
    set_field(m);
    integ_ = make_integrator_(op_);
    const ThetaGradient g = integ_->linearize_point(u0_, objective_);
    ++solves_.forward;
    ++solves_.adjoint;
    deep_copy(gk_, g.wrt_fields);
    if (log_form_)
      product(gradient, kappa_, gk_);
    else
      deep_copy(gradient, gk_);
    return g.objective;
  }

  void hessian_vector(const GlobalVector& v, const GlobalVector& out, HessianProduct product_kind) override {
    COSTATE_CHECK(integ_ != nullptr, "pde::Misfit::hessian_vector: call linearize first");
    if (log_form_)
      product(dir_, kappa_, v);
    else
      deep_copy(dir_, v);
    const ThetaHessianVector r = integ_->hessian_vector_at_point(
        ThetaDirection{.fields = dir_, .parameters = {}, .initial_state = {}}, product_kind);
    ++solves_.incremental_forward;
    ++solves_.incremental_adjoint;
    if (!integ_->keeps_point_trajectory()) {  // the sweep ran the state (and for Exact its adjoint) again
      ++solves_.forward;
      if (product_kind == HessianProduct::Exact) ++solves_.adjoint;
    }
    if (!log_form_) {
      deep_copy(out, r.wrt_fields);
      return;
    }
    product(out, kappa_, r.wrt_fields);
    if (product_kind == HessianProduct::Exact) {  // + (κ ⊙ ∇_κΦ) ⊙ v
      product(dir_, kappa_, gk_);
      product(dir_, dir_, v);
      axpy(1.0, dir_, out);
    }
  }

  PdeSolves solves() const override { return solves_; }
  /// The state at the end of the last misfit() run.
  const GlobalVector& final_state() const { return u_; }

 private:
  static Factory theta_factory(const ThetaOptions& options) {
    options.validate();
    return [options](Operator<Model>& op) -> std::unique_ptr<TimeStepper> {
      return std::make_unique<ThetaIntegrator<Model>>(op, options);
    };
  }
  static Factory explicit_rk_factory(const ExplicitRkOptions& options) {
    options.validate();
    return [options](Operator<Model>& op) -> std::unique_ptr<TimeStepper> {
      return std::make_unique<ExplicitRkIntegrator<Model>>(op, options);
    };
  }
  void set_field(const GlobalVector& m) {
    parameter_field(m, kappa_);
    deep_copy(op_.fields(), kappa_);
  }
  Operator<Model>& op_;
  Factory make_integrator_;
  Objective objective_;
  bool log_form_;
  GlobalVector u0_, u_, kappa_, gk_, dir_;
  std::unique_ptr<TimeStepper> integ_;
  PdeSolves solves_;
};

/// The name of the θ-only misfit (the class is integrator-generic now).
template <class Model>
using ThetaMisfit = Misfit<Model>;

enum class InversionMethod { NewtonCg, Lbfgs };
std::string to_string(InversionMethod m);
/// "newton_cg" | "lbfgs"; an error lists both.
InversionMethod inversion_method_from_string(const std::string& name);

struct InversionOptions {
  InversionMethod method = InversionMethod::NewtonCg;
  int max_iterations = 30;
  double gradient_rtol = 1e-8;  ///< stop at ‖g‖ ≤ max(atol, rtol ‖g_0‖)
  double gradient_atol = 0.0;
  int gauss_newton_iterations = 3;  ///< Newton-CG: GN Hessian in the first iterations
  double eta_max = 0.5;             ///< Newton-CG: the largest forcing term
  int cg_max_iterations = 200;
  double armijo_c = 1e-4;
  int max_backtracks = 12;
  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const;
};

/// One row of the iteration history (at the iterate m_k, before its step).
struct InversionIteration {
  int iteration = 0;
  double objective = 0.0, misfit = 0.0, prior = 0.0, gradient_norm = 0.0;
  int cg_iterations = 0;    ///< of the step taken from m_k (Newton-CG)
  std::string cg_stop;      ///< "tolerance" | "negative curvature" | "max iterations" ("" for L-BFGS)
  bool gauss_newton = false;
  double forcing = 0.0;     ///< η_k
  /// Which rule set η_k: "eta_max", "eisenstat_walker", "safeguard" (0.9 η²_{k−1})
  /// or "floor" (½ tolerance/‖g_k‖: the last step, no oversolving).
  std::string forcing_rule;
  double step_length = 0.0; ///< Armijo's α
  PdeSolves solves;         ///< cumulative at m_k
};

struct InversionResult {
  GlobalVector m;  ///< the MAP point (owned entries)
  double objective = 0.0, misfit = 0.0, prior = 0.0, gradient_norm = 0.0;
  /// Newton-CG: the decrease −½ gᵀp its last Newton direction predicted
  /// (NaN for L-BFGS): below J's round-off, the optimum is resolved as far
  /// as J can tell (optimize::FitEnd::predicted_decrease).
  double predicted_decrease = std::numeric_limits<double>::quiet_NaN();
  int iterations = 0;
  int cg_iterations = 0;  ///< total
  bool converged = false;
  std::string termination;
  std::string method;
  std::vector<InversionIteration> history;
  PdeSolves solves;
  std::int64_t prior_solves = 0;  ///< KSP solves with the prior's A
  double seconds = 0.0;
  std::string brief_report() const;
};

/// The MAP point from `start` by options.method. `monitor` (optional) is
/// called with each history row (on every rank). Collective. Numerical
/// outcomes (no convergence, a failed line search) are in the result.
InversionResult find_map(MisfitModel& misfit, const Prior& prior, const GlobalVector& start,
                         const InversionOptions& options,
                         const std::function<void(const InversionIteration&)>& monitor = {});

}  // namespace costate::pde
