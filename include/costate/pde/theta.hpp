#pragma once
/// \file
/// pde::ThetaIntegrator — implicit θ-method time stepping of a distributed
/// stencil model (backward Euler θ = 1, Crank–Nicolson θ = ½) with PETSc
/// KSP, and its discrete adjoint under MPI.
///
/// Forward step n → n + 1 (fixed step h):
///     G(z) = z − y_n − h (1 − θ) f(t_n, y_n) − h θ f(t_{n+1}, z) = 0,
/// Newton on G with G'(z) = I − h θ J(z), each linear system by KSP (the
/// preconditioner from KspOptions and the options database). A model with
/// `linear_in_state` (f = J u + b, J independent of t and u) takes exactly
/// one Newton step per time step and assembles I − hθJ once.
///
/// Discrete adjoint of the step (exact for the discrete solution), with
/// λ = ȳ_{n+1}:
///     (I − h θ J_{n+1})ᵀ μ = λ                        (KSPSolveTranspose)
///     λ_n = μ + h (1 − θ) J_nᵀ μ                       (MatMultTranspose)
///     ā  += h θ f_a(n+1)ᵀ μ + h (1 − θ) f_a(n)ᵀ μ     (field vJp + Gᵀ)
///     q̄  += h θ f_q(n+1)ᵀ μ + h (1 − θ) f_q(n)ᵀ μ     (rank-ordered sums)
/// For an autonomous model linear in the state, f_a and f_q are affine in u,
/// so the two vJps are one, at y* = θ y_{n+1} + (1 − θ) y_n, scaled by h.
///
/// The reverse sweep runs through ode::reverse_sweep with any schedule
/// (StoreAll, Binomial, …); snapshots are each rank's owned entries. The
/// forward run that evaluates J is the sweep's own first pass (the state
/// y_l is computed by the last step's reverse step), so StoreAll costs one
/// forward integration plus the adjoint steps. A reverse step reuses
/// y_{n+1} from the previous reverse step (the state it was given).
///
/// Determinism: KSP solves start from zero, reductions are rank-ordered,
/// so a gradient is bitwise the same on every run with the same ranks and
/// for every checkpoint schedule. Across rank counts it agrees to the KSP
/// tolerance (block preconditioners change with the decomposition).
///
/// Forward sensitivities (tangent-linear model, ThetaIntegrator::tangent):
/// a direction δ = (δa field, δq scalars, δy_0) is carried through the
/// same steps, with the same KSP, by differentiating G = 0:
///     (I − h θ J_{n+1}) δy_{n+1} = δy_n + h (1 − θ) ḟ_n + h θ (f_a δa + f_q δq)_{n+1},
///     ḟ_n = J_n δy_n + f_a(n) δa + f_q(n) δq   (one Dual pass, Operator::jvp_total),
/// J_{n+1} assembled at the converged y_{n+1}; then dJ·δ = ⟨∂J/∂y_l, δy_l⟩.
/// It equals ⟨∇J, δ⟩ of the discrete adjoint to the KSP tolerance: one
/// forward-sensitivity run per direction against one adjoint run for all.
///
/// Second-order adjoint (ThetaIntegrator::hessian_vector): H·v of J for a
/// direction v = (δa, δq, δy_0), p = (a, q). The forward pass carries
/// (y_n, δy_n) by the tangent-linear model above (snapshots hold both);
/// the reverse pass, with A = I − hθJ_{n+1}, λ_l = ∇J(y_l) and
/// δλ_l = ∇²J(y_l) δy_l, runs per step
///     Aᵀ μ  = λ_{n+1}
///     Aᵀ δμ = δλ_{n+1} + hθ D_u(n+1)
///     λ_n  = μ + h(1 − θ) J_nᵀ μ
///     δλ_n = δμ + h(1 − θ) (J_nᵀ δμ + D_u(n))
///     p̄   += hθ f_p(n+1)ᵀ μ + h(1 − θ) f_p(n)ᵀ μ                    (the gradient)
///     δp̄  += hθ (f_p(n+1)ᵀ δμ + D_p(n+1)) + h(1 − θ) (f_p(n)ᵀ δμ + D_p(n))
/// with D_x(m) = (∂²(μᵀf)/∂x∂y) δy_m + (∂²(μᵀf)/∂x∂p) δp at (t_m, y_m): the
/// derivative of the first-order vJps along the direction
/// (Operator::vjp_tangent_add, one Dual<Dual<double,1>, N> pass). Then
/// H v = (δā, δq̄, δλ_0). The Gauss–Newton product drops every D term
/// (the residual's second derivatives) and μ with them: δλ_l = ∇²J δy_l
/// carried back by the transposed steps alone, i.e. Sᵀ ∇²J S v with S the
/// tangent map; it is symmetric positive semidefinite for a misfit.
/// ThetaIntegrator::linearize keeps y_0 … y_l and μ_n (the gradient's
/// adjoints) for many products at one point: each product then costs the
/// tangent and δμ solves only (docs/pde_hessian.md).
/// Cost per step: the forward and tangent solves, two transposed solves
/// (one for Gauss–Newton), two second-order vJp passes — one for an
/// autonomous model linear in the state, whose D_u does not depend on
/// (y, δy) and whose D_p, f_p are affine in them (evaluated once at
/// y* = θ y_{n+1} + (1 − θ) y_n, as the first-order adjoint does).
///
/// Compile time: the stepping, the sweeps and the result packing are
/// pde::ThetaStepper, compiled once (src/pde/theta.cpp) over a
/// pde::OperatorView; ThetaIntegrator<Model> only makes the model's view.
///
/// Collective over the grid's communicator. Limitations: fixed steps;
/// terminal objectives (objective.hpp); Multilevel disk snapshots go to one
/// file per rank (path + ".rank<r>"), or with
/// ThetaOptions::shared_disk_checkpoints to one parallel HDF5 file; a disk
/// failure on any rank throws on every rank.

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/linear/ksp_options.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/pde/integrator.hpp"
#include "costate/pde/matrix.hpp"
#include "costate/pde/objective.hpp"
#include "costate/pde/operator.hpp"
#include "costate/pde/operator_view.hpp"

namespace costate::pde {

struct ThetaOptions {
  double theta = 0.5;       ///< ½: Crank–Nicolson, 1: backward Euler
  double t0 = 0.0;
  double dt = 1e-3;         ///< fixed step h
  std::int64_t steps = 10;  ///< number of steps
  /// Linear solves (forward, and transposed in the adjoint): default GMRES
  /// with PETSc's default preconditioner; -ksp_type/-pc_type override.
  linear::KspOptions ksp{.rtol = 1e-12, .atol = 1e-50};
  double newton_rtol = 1e-10;  ///< ‖δ‖_∞ ≤ newton_rtol (1 + ‖z‖_∞)
  int newton_max_iterations = 25;
  /// Multilevel's disk level: false — one serial HDF5 file per rank
  /// (path + ".rank<r>"); true — ONE parallel HDF5 file at `path` for all
  /// ranks (pde::SharedDiskSnapshots, collective MPI-IO). Same gradient bits.
  bool shared_disk_checkpoints = false;
  /// Called with the step index n at the start of every step() (forward
  /// steps, the sweeps' recomputations) and of every reverse step of
  /// gradient(), on every rank; empty: not called. For a caller's interrupt
  /// check (io::pde_run's): it may throw, and the computation unwinds. The
  /// calls are the same on every rank, so it may be collective.
  std::function<void(std::int64_t)> on_step;

  void validate() const {
    COSTATE_CHECK(theta >= 0.5 && theta <= 1.0, "pde::ThetaOptions::theta = "
                                                    << detail::format_value(theta)
                                                    << " is invalid: it must lie in [0.5, 1]");
    COSTATE_CHECK(std::isfinite(dt) && dt > 0.0,
                  "pde::ThetaOptions::dt = " << detail::format_value(dt) << " must be > 0");
    COSTATE_CHECK(steps >= 0, "pde::ThetaOptions::steps = " << steps << " must be >= 0");
    COSTATE_CHECK(newton_rtol > 0.0 && newton_max_iterations > 0,
                  "pde::ThetaOptions: newton_rtol must be > 0 and newton_max_iterations > 0");
    ksp.validate();
  }
};

/// A point kept for many Hessian–vector products there (Newton-CG): the
/// forward trajectory y_0 … y_l and the first-order adjoints μ_n, from
/// ThetaIntegrator::linearize. A product at a ThetaLinearization skips
/// the forward solves and the μ solves (per step: the tangent solve and
/// the δμ solve). Memory: 2l + 1 state vectors per rank (no checkpoints).
/// Valid while the operator's fields and parameters, the integrator's
/// options and the objective's data are those it was made with.
struct ThetaLinearization {
  Objective objective;
  std::vector<GlobalVector> states;    ///< y_0 … y_l
  std::vector<GlobalVector> adjoints;  ///< μ_n of step n → n + 1, n = 0 … l − 1
  ThetaGradient gradient;              ///< J and ∇J at the point (StoreAll)
};

}  // namespace costate::pde


namespace costate::pde {

/// The θ-method over a model's OperatorView (the members documented in
/// the file comment), compiled once. Collective.
class ThetaStepper : public TimeStepper {
 public:
  /// `op` must outlive the stepper. Collective.
  ThetaStepper(OperatorView& op, const ThetaOptions& options);
  /// Owns the view (its operator must outlive the stepper). Collective.
  ThetaStepper(std::unique_ptr<OperatorView> op, const ThetaOptions& options);
  ~ThetaStepper() override;
  ThetaStepper(const ThetaStepper&) = delete;
  ThetaStepper& operator=(const ThetaStepper&) = delete;

  const ThetaOptions& options() const;
  std::int64_t krylov_iterations() const override;
  const KrylovSolver& solver() const;

  /// Advances u from t_n = t0 + n h to t_{n+1}, in place. Collective.
  /// Throws costate::Error when Newton or a KSP solve fails.
  void step(const GlobalVector& u, std::int64_t n) override;
  /// Integrates u from t0 over all steps, in place. Collective.
  void integrate(const GlobalVector& u) override;
  /// J(y_l) and its gradient with respect to the parameter fields, the
  /// scalar parameters and the initial state, by the discrete adjoint with
  /// checkpoint schedule `checkpointing`. `y0` is not modified. Collective.
  ThetaGradient gradient(const GlobalVector& y0, const Objective& objective,
                         const ode::Checkpointing& checkpointing) override;
  /// Forward sensitivities: J(y_l) and dJ·δ for one direction δ, by the
  /// tangent-linear model (file comment) alongside the forward run. `y0`
  /// is not modified. Collective; a direction of the wrong size on any
  /// rank throws costate::Error on every rank.
  ThetaTangent tangent(const GlobalVector& y0, const Objective& objective, const ThetaDirection& direction) override;
  /// H v for the direction v (ThetaDirection: δa, δq, δy_0; empty parts
  /// are zero) by the second-order adjoint (file comment), with checkpoint
  /// schedule `checkpointing` over the pairs (y_n, δy_n); `product`
  /// GaussNewton gives Sᵀ ∇²J S v instead. Exact also returns the gradient
  /// (bitwise the same for every schedule, as H v is). `y0` is not
  /// modified. Collective; a direction of the wrong size on any rank
  /// throws costate::Error on every rank.
  ThetaHessianVector hessian_vector(const GlobalVector& y0, const Objective& objective,
                                    const ThetaDirection& direction, const ode::Checkpointing& checkpointing,
                                    HessianProduct product = HessianProduct::Exact) override;
  /// The trajectory and first-order adjoints at the current point for
  /// hessian_vector(const ThetaLinearization&, …), and the gradient there
  /// (the same bits as gradient() with StoreAll). Collective.
  ThetaLinearization linearize(const GlobalVector& y0, const Objective& objective);
  /// H v (or the Gauss–Newton product) at a linearized point: the tangent
  /// run along the stored trajectory, then the second-order adjoint with
  /// the stored μ_n — two solves per step, as a gradient. The same numbers
  /// as hessian_vector(y0, …) (bitwise for autonomous linear models; to
  /// round-off otherwise, where the sweep's λ_n comes from the second-order
  /// pass). Collective.
  ThetaHessianVector hessian_vector(const ThetaLinearization& lin, const ThetaDirection& direction,
                                    HessianProduct product = HessianProduct::Exact);
  /// linearize() kept for hessian_vector_at_point (TimeStepper): a product
  /// there is hessian_vector(lin, …). Collective.
  ThetaGradient linearize_point(const GlobalVector& y0, const Objective& objective) override;
  ThetaHessianVector hessian_vector_at_point(const ThetaDirection& direction, HessianProduct product) override;
  bool keeps_point_trajectory() const override { return true; }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<ThetaLinearization> point_;  ///< linearize_point's
};

/// The θ-method for a model's Operator: ThetaStepper over the operator's
/// view (the one per-model part). `op` must outlive the integrator.
template <class Model, int Batch = default_batch<Model>()>
class ThetaIntegrator final : public ThetaStepper {
 public:
  using Op = Operator<Model, Batch>;
  ThetaIntegrator(Op& op, const ThetaOptions& options) : ThetaStepper(make_operator_view(op), options) {}
};

}  // namespace costate::pde
