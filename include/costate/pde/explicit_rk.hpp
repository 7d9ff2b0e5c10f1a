#pragma once
/// \file
/// pde::ExplicitRkIntegrator — explicit Runge–Kutta time stepping of a
/// distributed stencil model (rk4; ssp_rk3, Shu–Osher's strong-stability-
/// preserving RK3), with the discrete adjoint, forward sensitivities and
/// the second-order adjoint under MPI: the interface of ThetaIntegrator
/// (pde::TimeIntegrator, integrator.hpp), the tableaux of the ODE steppers
/// (ode::explicit_tableau, ode::ssp_rk3_tableau: one table).
///
/// Step n → n + 1 (fixed step h, tableau (a, b, c) strictly lower
/// triangular, stages j = 1 … s):
///     Y_j = y_n + h Σ_{k<j} a_jk K_k,   K_j = f(t_n + c_j h, Y_j),
///     y_{n+1} = y_n + h Σ_j b_j K_j.
/// No linear solves: each step costs s right-hand sides.
///
/// Discrete adjoint of the step (the recurrences of ode::ExplicitRkScheme,
/// scheme.hpp), from K̄_j = h b_j λ (λ = ȳ_{n+1}), for j = s … 1:
///     Ȳ_j = J(Y_j)ᵀ K̄_j,   ā += f_a(Y_j)ᵀ K̄_j,   q̄ += f_q(Y_j)ᵀ K̄_j,
///     K̄_k += h a_jk Ȳ_j  (k < j),
/// then λ_n = λ + Σ_j Ȳ_j. J(Y_j)ᵀ K̄_j is Matrix::mult_transpose on the
/// coloured Jacobian at the stage (assembled once for a model linear in
/// the state), the parameter products one Operator::vjp_add per stage. A
/// reverse step recomputes its stages from y_n (s right-hand sides), so it
/// depends only on the snapshot it starts from: every checkpoint schedule
/// of ode::reverse_sweep gives the same bits (detail::SweepSnapshots, the
/// θ integrator's adapter: RAM, per-rank or shared parallel HDF5 disk).
///
/// Forward sensitivities (tangent) along δ = (δa, δq, δy_0), the same
/// stages differentiated:
///     Ẏ_j = δy_n + h Σ_{k<j} a_jk K̇_k,   K̇_j = J(Y_j) Ẏ_j + f_a δa + f_q δq
///     (one Dual pass, Operator::jvp_total),   δy_{n+1} = δy_n + h Σ_j b_j K̇_j.
///
/// Second-order adjoint (hessian_vector): the forward pass carries (y_n,
/// δy_n) (snapshots hold both), the reverse pass differentiates the adjoint
/// recurrence along the direction: from K̄_j = h b_j λ, δK̄_j = h b_j δλ,
/// for j = s … 1, at (t_j, Y_j) with Ẏ_j,
///     Ȳ_j  = J_jᵀ K̄_j,            δȲ_j = J_jᵀ δK̄_j + D_u(j),
///     p̄   += f_p,jᵀ K̄_j,          δp̄  += f_p,jᵀ δK̄_j + D_p(j),
///     K̄_k += h a_jk Ȳ_j,          δK̄_k += h a_jk δȲ_j          (k < j),
/// then λ_n = λ + Σ Ȳ_j, δλ_n = δλ + Σ δȲ_j, with D_x(j) = (∂²(K̄_jᵀf)/∂x∂u)
/// Ẏ_j + (∂²(K̄_jᵀf)/∂x∂p) δp — all of a stage in one
/// Operator::vjp_tangent_add (weight K̄_j, its tangent δK̄_j). Seeds λ_l =
/// ∇J(y_l), δλ_l = ∇²J(y_l) δy_l; then H v = (δā, δq̄, δλ_0). Gauss–Newton
/// drops every D term (and λ with them): δλ goes back through the
/// first-order adjoint steps above alone, Sᵀ ∇²J S v.
///
/// Stability: an explicit method is stable for the linearized problem when
/// h λ lies in its region for every eigenvalue λ of J; on the negative real
/// axis that is h ρ(J) ≤ 2.7853 (rk4) or 2.5127 (ssp_rk3; every 3-stage
/// order-3 method has the same region). stability() estimates ρ(J) at
/// (t0, y_0) by power iteration on Jacobian–vector products (a lower bound
/// for a normal J: an estimate, not a guarantee; nonlinear problems change
/// J as they run); the CLI warns when dt exceeds the limit it gives.
///
/// Compile time: pde::ExplicitRkStepper, compiled once
/// (src/pde/explicit_rk.cpp) over a pde::OperatorView, does all of the
/// above; ExplicitRkIntegrator<Model> only makes the model's view.
///
/// Collective over the grid's communicator. Determinism: no Krylov solves,
/// rank-ordered reductions: a gradient is bitwise the same on every run
/// with the same ranks; across rank counts it agrees to round-off (ghost
/// sums in another order). Limitations: fixed steps; terminal objectives;
/// no stored trajectory for many products at one point: the PDE inversion
/// (pde::Misfit) runs a whole second-order sweep per Hessian product
/// (TimeStepper::linearize_point).

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "costate/ode/tableaux.hpp"
#include "costate/pde/integrator.hpp"
#include "costate/pde/operator.hpp"
#include "costate/pde/operator_view.hpp"

namespace costate::pde {

enum class ExplicitRkMethod {
  Rk4,     ///< "rk4": classical Runge–Kutta, order 4
  SspRk3,  ///< "ssp_rk3": Shu–Osher strong-stability-preserving RK, order 3
};
std::string to_string(ExplicitRkMethod m);
/// "rk4" | "ssp_rk3"; anything else throws costate::Error listing both.
ExplicitRkMethod explicit_rk_method_from_string(const std::string& name);
/// True for the names explicit_rk_method_from_string takes.
bool is_explicit_rk_method(const std::string& name);
/// The tableau (ode::explicit_tableau(RK4), ode::ssp_rk3_tableau()).
ode::ButcherTableau tableau(ExplicitRkMethod m);
/// Classical order: 4, 3.
int order(ExplicitRkMethod m);
/// Length of the method's stability interval on the negative real axis,
/// β with |R(z)| ≤ 1 on [−β, 0]: 2.7853 (rk4), 2.5127 (ssp_rk3).
double real_stability_limit(ExplicitRkMethod m);

struct ExplicitRkOptions {
  ExplicitRkMethod method = ExplicitRkMethod::Rk4;
  double t0 = 0.0;
  double dt = 1e-3;         ///< fixed step h
  std::int64_t steps = 10;  ///< number of steps
  /// Multilevel's disk level in ONE parallel HDF5 file (as ThetaOptions).
  bool shared_disk_checkpoints = false;
  /// Called with the step index n at the start of every step() (forward
  /// steps, recomputations) and of every reverse step, on every rank
  /// (as ThetaOptions::on_step: an interrupt check; it may throw).
  std::function<void(std::int64_t)> on_step = {};
  /// Throws costate::Error naming the field, its value and the rule.
  void validate() const;
};

/// What ExplicitRkIntegrator::stability estimated.
struct ExplicitRkStability {
  double spectral_radius = 0.0;  ///< ρ(J) at (t0, y_0), power-iteration estimate
  double limit = 0.0;            ///< real_stability_limit(method)
  double max_stable_dt = std::numeric_limits<double>::infinity();  ///< limit / ρ
  int iterations = 0;            ///< Jacobian–vector products taken
};

/// Empty when options.dt ≤ s.max_stable_dt; else a warning naming `key`
/// (the step's input key or option name), the step, the estimate of ρ(J)
/// and the largest stable step.
std::string stability_warning(const ExplicitRkOptions& options, const ExplicitRkStability& s,
                              const std::string& key = "pde::ExplicitRkOptions::dt");

/// Explicit Runge–Kutta stepping over a model's OperatorView (the members
/// documented in the file comment), compiled once. Collective.
class ExplicitRkStepper : public TimeStepper {
 public:
  /// `op` must outlive the stepper. Collective.
  ExplicitRkStepper(OperatorView& op, const ExplicitRkOptions& options);
  /// Owns the view (its operator must outlive the stepper). Collective.
  ExplicitRkStepper(std::unique_ptr<OperatorView> op, const ExplicitRkOptions& options);
  ~ExplicitRkStepper() override;
  ExplicitRkStepper(const ExplicitRkStepper&) = delete;
  ExplicitRkStepper& operator=(const ExplicitRkStepper&) = delete;

  const ExplicitRkOptions& options() const;
  const ode::ButcherTableau& butcher_tableau() const;
  std::int64_t krylov_iterations() const override { return 0; }

  /// Advances u from t_n = t0 + n h to t_{n+1}, in place. Collective.
  void step(const GlobalVector& u, std::int64_t n) override;
  /// Integrates u from t0 over all steps, in place. Collective.
  void integrate(const GlobalVector& u) override;
  /// ρ(J(t0, y0)) by `iterations` power iterations on Operator::jvp, and
  /// the largest step real_stability_limit allows with it (file comment).
  /// Collective.
  ExplicitRkStability stability(const GlobalVector& y0, int iterations = 40);
  /// J(y_l) and its gradient with respect to the parameter fields, the
  /// scalar parameters and the initial state, by the discrete adjoint with
  /// checkpoint schedule `checkpointing`. `y0` is not modified. Collective.
  ThetaGradient gradient(const GlobalVector& y0, const Objective& objective,
                         const ode::Checkpointing& checkpointing) override;
  /// Forward sensitivities: J(y_l) and dJ·δ for one direction δ (file
  /// comment). `y0` is not modified. Collective; a direction of the wrong
  /// size on any rank throws costate::Error on every rank.
  ThetaTangent tangent(const GlobalVector& y0, const Objective& objective, const ThetaDirection& direction) override;
  /// H v for the direction v (δa, δq, δy_0; empty parts are zero) by the
  /// second-order adjoint (file comment), with checkpoint schedule
  /// `checkpointing` over the pairs (y_n, δy_n); GaussNewton gives
  /// Sᵀ ∇²J S v. Exact also returns the gradient. Every schedule gives the
  /// same bits. `y0` is not modified. Collective.
  ThetaHessianVector hessian_vector(const GlobalVector& y0, const Objective& objective,
                                    const ThetaDirection& direction, const ode::Checkpointing& checkpointing,
                                    HessianProduct product = HessianProduct::Exact) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// Explicit Runge–Kutta stepping for a model's Operator: ExplicitRkStepper
/// over the operator's view (the one per-model part). `op` must outlive
/// the integrator.
template <class Model, int Batch = default_batch<Model>()>
class ExplicitRkIntegrator final : public ExplicitRkStepper {
 public:
  using Op = Operator<Model, Batch>;
  ExplicitRkIntegrator(Op& op, const ExplicitRkOptions& options)
      : ExplicitRkStepper(make_operator_view(op), options) {}
};

}  // namespace costate::pde
