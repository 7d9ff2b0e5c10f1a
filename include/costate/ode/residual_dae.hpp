#pragma once
/// \file
/// Fully implicit index-1 DAEs (issue 32):
///     F(t, y, y', p) = 0,   y ∈ ℝⁿ,
/// a model supplying the residual F, integrated by the native implicit
/// schemes (bdf, sdirk3, backward_euler, crank_nicolson) with forward
/// sensitivities and the discrete adjoint, through the same ode::System as
/// every other model (make_system is still the only per-model template).
///
///     struct Pendulumish {        // any type with a templated residual
///       template <class T>
///       void residual(double t, std::span<const T> y, std::span<const T> yp,
///                     std::span<const T> p, std::span<T> F) const;
///       // optional: the components whose derivative F does not read
///       std::vector<std::size_t> algebraic_states() const { return {2}; }
///     };
///     ode::Problem<ode::ResidualForm<Pendulumish>> pr{{Pendulumish{}, 3}, y0_and_yp0, p, {t0, t1}};
///     ode::gradient(pr, objective, ode::DiscreteAdjoint{}, {.method = ode::Method::Bdf});
///
/// How: ResidualForm<M> is the semi-explicit DAE on the state x = (y, w),
///     y' = w             (n differential rows),
///     0  = F(t, y, w, p) (n algebraic rows, the algebraic states w),
/// so the schemes' one Newton matrix M − hγJ with M = diag(I, 0) and
/// J = [0 I; F_y F_{y'}] is, after eliminating w, the familiar
/// F_y + (1/hγ) F_{y'} (nonsingular for small h exactly when the DAE has
/// index ≤ 1), and each step's equations are those of the scheme applied
/// to F directly: bdf's w_{n+1} = (y_{n+1} − ψ)/(hβ) in F = 0 is the BDF
/// formula (IDA's discretization), sdirk3's stage derivatives solve F = 0
/// at the stages. The Jacobians ∂F/∂y and ∂F/∂y' are blocks of the System's
/// one Jacobian (the same AD: dense, coloured or taped).
///
/// Consistent initial values (dae.hpp): with y_d (components not listed in
/// algebraic_states()) fixed, Newton on F(t0, y, y', p) = 0 for the
/// unknowns u = (y'_d, y_a) — index 1 means [F_{y'_d} | F_{y_a}] is
/// nonsingular, checked at t0 with the residual equations that have no
/// pivot named — and differentiated implicitly:
///     u̇0 = −[F_{y'_d} | F_{y_a}]⁻¹ (F_{y_d} ẏ_d + F_p ṗ)
/// (adjoint: its transpose). y'_a(t0) is left at the given value and its
/// tangent and adjoint are 0: F does not read it (checked at t0); bdf's
/// and sdirk3's steps do not depend on it (bdf's first predictor does,
/// Newton's converged result does not); the θ-methods with θ < 1 carry it
/// into later y'_a only (y'_a oscillates under Crank–Nicolson, y does not).
///
/// Newton: the derivatives w = (y − ψ)/(hβ) carry round-off ε|y|/(hβ), so
/// integrator.newton_tol much below 1e-13 may stall on small steps.
///
/// The differentiated constraint F_y s + F_{y'} s' + F_p e_j = 0 holds for
/// the forward sensitivities at every step (the algebraic rows of the
/// tangent step), as for the semi-explicit form.
///
/// Sizes and results: the Problem's state is (y, y'), 2n values (y0 then a
/// guess of y'(t0)); Solutions report both; an objective sees both (its
/// terms may read y'); wrt_initial_state has 2n entries, those of y'_0
/// and of the algebraic y_a zero (guesses, not data).
///
/// Error control: every component of y is in the error test (IDA's
/// default; a component without derivative still has a well-defined error),
/// the derivatives w are not (they are the scheme's algebraic states).
///
/// IDAS (integrator.method = idas, IdasForward, IdasAdjoint; idas.hpp)
/// takes F itself on the n unknowns y: its Newton matrix F_y + c F_{y'}
/// from the blocks above, IDACalcIC for (y'_d, y_a) with y_d fixed, the
/// sensitivity residual F_y s + F_{y'} s' + F_p e_j, and the adjoint on
/// (λ, ν = F_{y'}ᵀλ). The Problem, Solutions and gradients keep the (y, y')
/// layout above.
///
/// Limitations: no events (a ResidualForm forwards none of the model's);
/// the continuous adjoint refuses it by name; dense or coloured Jacobians
/// of the 2n-state system (twice the unknowns of a residual-form solver's
/// Newton matrix; IDAS' own matrix is n × n, dense).

#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

#include "costate/ode/system.hpp"

namespace costate::ode {

/// A model with a residual F(t, y, y', p) (n equations in n unknowns).
template <class M>
concept ResidualModel = requires(const M& m, double t, std::span<const double> y,
                                 std::span<const double> yp, std::span<const double> p,
                                 std::span<double> F) {
  m.template residual<double>(t, y, yp, p, F);
};

/// The fully implicit model `model` with n unknowns, as the semi-explicit
/// system of the file comment (state (y, y'), 2n entries).
template <ResidualModel M>
struct ResidualForm {
  M model;
  /// The number of unknowns y (the state has 2n entries).
  std::size_t n = 0;

  /// x = (y, w): dxdt = (w, F(t, y, w, p)).
  template <class T>
  void rhs(double t, std::span<const T> x, std::span<const T> p, std::span<T> dxdt) const {
    const std::span<const T> y = x.first(n), w = x.subspan(n, n);
    for (std::size_t i = 0; i < n; ++i) dxdt[i] = w[i];
    model.template residual<T>(t, y, w, p, dxdt.subspan(n, n));
  }
  /// The scheme's algebraic states: the derivatives w (rows F).
  std::vector<std::size_t> algebraic_states() const {
    COSTATE_CHECK(n > 0, "ResidualForm: n (the number of unknowns y) is 0: set it");
    std::vector<std::size_t> a(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = n + i;
    return a;
  }
  /// Solved at t0: y'_d of each differential component, y_a of each
  /// algebraic one (the model's algebraic_states(), if it has them).
  std::vector<std::size_t> initial_unknowns() const {
    std::vector<std::size_t> u(n);
    for (std::size_t i = 0; i < n; ++i) u[i] = n + i;
    if constexpr (detail::HasAlgebraicStates<M>)
      for (const auto i : model.algebraic_states()) {
        COSTATE_CHECK(static_cast<std::size_t>(i) < n,
                      "ResidualForm: algebraic component " << i << " is not one of the model's "
                                                           << n << " unknowns");
        u[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i);
      }
    return u;
  }
};

}  // namespace costate::ode
