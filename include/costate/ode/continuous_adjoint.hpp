#pragma once
/// \file
/// ode::ContinuousAdjoint — the gradient of an ODE objective
///     J = g(y(t1), p) + ∫ q(t, y, p) dt + Σ_k ℓ_k(y(t_k), p)
/// from the continuous adjoint equations, integrated backward in time with
/// their own adaptive Dormand–Prince 5(4) and their own tolerances:
///     λ' = −f_yᵀ λ − q_yᵀ,        λ(t1) = ∂g/∂y,
///     μ' = −f_pᵀ λ − q_pᵀ,        μ(t1) = 0     (a quadrature: outside the error test),
///     λ(t_k⁻) = λ(t_k⁺) + ∂ℓ_k/∂y  at each observation time,
///     dJ/dy0 = λ(t0),   dJ/dp = μ(t0) + ∂g/∂p + Σ_k ∂ℓ_k/∂p.
/// The running cost rides along as an augmented state z' = q, so λ_z ≡ 1 and
/// f_yᵀλ of the augmented system is f_yᵀλ + q_yᵀ.
///
/// Interpolating adjoint: the forward run (adaptive dopri5, landing on every
/// observation time) keeps the state at each accepted step (a checkpoint per
/// step: memory O(steps × n)); the backward stepper needs y(t) at its
/// stage times, and gets it from the 4th-order dense output of the forward
/// step containing t, recomputed once per forward step from its checkpoint
/// (6 rhs evaluations). The state is never integrated backward.
/// f_yᵀλ and f_pᵀλ come from costate's AD: a dense forward-mode [f_y | f_p]
/// (ad::Dual<double, 8>) when states + parameters ≤ 64, a short tape of one
/// right-hand side (as the discrete adjoint's) above.
///
/// Accuracy: this is the derivative of the exact objective, up to the
/// forward and the adjoint tolerances — it differs from DiscreteAdjoint (the
/// exact derivative of the discrete solution) by O(tolerance), and the two
/// converge to each other as the tolerances tighten (tested).
///
/// Limitations: explicit only — the forward and the backward stepper are
/// dopri5. λ' = −f_yᵀλ is exactly as stiff as the forward problem, so on a
/// stiff problem (Robertson, Van der Pol with μ = 1e3) the backward dopri5
/// needs step sizes at its stability limit (and may hit max_steps). For
/// stiff problems use CvodesAdjoint (BDF backward with the AD Jacobian
/// −f_yᵀ) or DiscreteAdjoint with an implicit stepper.

#include <string>

#include "costate/ode/options.hpp"
#include "costate/ode/problem.hpp"

namespace costate::ode {

struct ContinuousAdjoint {
  /// Tolerances of the backward (λ) integration; 0: integrator.rtol and the
  /// smallest of integrator.atol.
  double rtol = 0.0;
  double atol = 0.0;
  /// Throws costate::Error naming the field and the rule broken.
  void validate() const;
};

struct GradientResult;
namespace detail {
/// ode::gradient with ContinuousAdjoint (defined in
/// detail/continuous_adjoint.hpp, included at the end of gradient.hpp).
template <Model M, class O>
GradientResult continuous_adjoint_gradient(const Problem<M>& problem, const O& objective,
                                           const ContinuousAdjoint& method,
                                           IntegratorOptions options);
}  // namespace detail
}  // namespace costate::ode
