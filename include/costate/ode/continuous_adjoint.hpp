#pragma once
/// \file
/// ode::ContinuousAdjoint — the gradient of an ODE objective
///     J = g(y(t1), p) + ∫ q(t, y, p) dt + Σ_k ℓ_k(y(t_k), p)
/// from the continuous adjoint equations, integrated backward in time with
/// the forward run's own adaptive stepper (dopri5, sdirk3 or bdf) and their
/// own tolerances:
///     λ' = −f_yᵀ λ − q_yᵀ,        λ(t1) = ∂g/∂y,
///     μ' = −f_pᵀ λ − q_pᵀ,        μ(t1) = 0     (in the backward error test),
///     λ(t_k⁻) = λ(t_k⁺) + ∂ℓ_k/∂y  at each observation time,
///     dJ/dy0 = λ(t0),   dJ/dp = μ(t0) + ∂g/∂p + Σ_k ∂ℓ_k/∂p.
/// The running cost rides along as an augmented state z' = q, so λ_z ≡ 1 and
/// f_yᵀλ of the augmented system is f_yᵀλ + q_yᵀ.
///
/// Compiled once (src/ode/continuous_adjoint.cpp) on the ode::System of the
/// model and objective (make_system is the only per-model part). The
/// backward equation is itself a System: on each leg [t_a, t_b] between
/// observation times, in τ = t_b − t (τ from 0: λ's layer at t_b is resolved
/// whatever |t_b|), its state is X = (λ, μ) and its right-hand side, linear
/// in X,
///     dX/dτ = A(t)ᵀ λ,   A(t) = [f_x | f_p] at (t, y(t)),
/// comes from the forward System's Linearization at the interpolated forward
/// state (value: one vJp; its Jacobian [f_xᵀ; f_pᵀ] for the implicit
/// steppers' Newton: the dense [f_x | f_p] of that linearization, by Dual
/// passes of the linear map). dopri5 integrates it explicitly; sdirk3 and bdf
/// solve their stages by the same modified Newton as for the forward
/// problem (steppers/sdirk3.hpp, bdf.hpp on the System), so a stiff problem
/// (Robertson, Van der Pol with μ = 1e3) is stiff backward too and is
/// integrated with steps of the forward's size.
///
/// Interpolating adjoint: the forward run (adaptive, landing on every
/// observation time) keeps the state at each accepted step (memory O(steps ×
/// n)); the backward stepper needs y(t) at its stage times and gets it from
/// the interpolant of the forward stepper, of the stepper's order:
///   - dopri5: its 4th-order dense output, recomputed once per forward step
///     from that step's start (6 rhs evaluations);
///   - sdirk3: the cubic through the four nearest accepted states (order 3,
///     sdirk3's own; values only — a Hermite cubic's h·f amplifies a stiff
///     component's off-manifold residual by h |f_y|);
///   - bdf: the step's own BDF polynomial, the Lagrange polynomial of degree k
///     (the step's order) through y_{i+1}, y_i, …, y_{i+1−k} — its
///     interpolation error is what the step's error estimate measures, so it
///     is as accurate as the step (O(rtol) in the weighted norm).
/// The state is never integrated backward.
///
/// Events (events.hpp): the forward run is the event driver's; the backward
/// legs also end at each instant τ, where λ⁻ (and μ) come from λ⁺ by the
/// transposed jump of the forward sensitivities' jump at τ (evaluated at the
/// state x⁻ before the events), the continuous adjoint's jump condition; the
/// interpolant never spans an instant.
///
/// DAEs (issue 32; semi-explicit index 1, x' = f, 0 = g, sdirk3 and bdf,
/// no events): the adjoint DAE
///     λ_x' = −f_xᵀ λ_x − g_xᵀ λ_z,   0 = f_zᵀ λ_x + g_zᵀ λ_z,   μ' = −f_pᵀ λ,
/// (index 1: g_zᵀ nonsingular) integrated backward by the same stepper as a
/// DAE with algebraic λ_z, made consistent at each leg's start; each term's
/// jump is taken on z = z(x, p) (g_zᵀ ν = ℓ_z, λ_x += ℓ_x − g_xᵀ ν,
/// p̄ −= g_pᵀ ν); dJ/dx0 = λ_x(t0), dJ/dz0 = 0. A fully implicit
/// ode::ResidualForm is refused (its adjoint in (y, y') is not of index 1).
///
/// Accuracy: this is the derivative of the exact objective, up to the
/// forward tolerances, the adjoint tolerances and the interpolant — it
/// differs from DiscreteAdjoint (the exact derivative of the discrete
/// solution) and from CvodesAdjoint by O(tolerance), and they converge to
/// each other as the tolerances tighten (tested, tests/ode/
/// continuous_adjoint_test.cpp and cross_method_test.cpp).
///
/// Limitations: adaptive steppers only (dopri5, sdirk3, bdf with adaptive:
/// true; the fixed-step methods have no interpolant here — use
/// DiscreteAdjoint). The implicit backward Newton forms the backward
/// System's Jacobian densely ((n_x + n_p)² per linearization, dense LU, as
/// the implicit forward schemes do): medium-sized systems. The forward
/// states of every step are kept in memory.

#include <span>
#include <string>

#include "costate/ode/options.hpp"

namespace costate::ode {

struct ContinuousAdjoint {
  /// Tolerances of the backward (λ) integration; 0: integrator.rtol and the
  /// smallest of integrator.atol, but at least rtol × the largest λ seed
  /// (|∂g/∂y(t1)|, |∂ℓ_k/∂y|): λ's own scale.
  double rtol = 0.0;
  double atol = 0.0;
  /// Throws costate::Error naming the field and the rule broken.
  void validate() const;
};

struct GradientResult;
class System;
namespace detail {
/// ode::gradient with ContinuousAdjoint, compiled once: the model and
/// objective are `system` (make_system), y0 its n model states, p its
/// parameters, on [t0, t1]. ode::gradient calls it; `options` as there.
GradientResult continuous_adjoint_gradient(const System& system, std::span<const double> y0,
                                           std::span<const double> p, double t0, double t1,
                                           const ContinuousAdjoint& method,
                                           IntegratorOptions options);
}  // namespace detail
}  // namespace costate::ode
