#pragma once
/// \file
/// Private to src/ode/: a semi-explicit index-1 DAE's initial point and its
/// derivatives (issue 32), shared by the native schemes' sweeps
/// (scheme.cpp, scheme_factory.cpp) and the IDAS glue (idas_system.cpp).
///
/// Consistent initial values are the nonlinear solve
///     g(t0, x0, z0, p) = 0   for z0, x0 given
/// (Newton on g_z from the given z0), and its derivatives are those of the
/// implicit function z0 = z(x0, p), never of Newton's iterations:
///     tangent:  ż0 = −g_z⁻¹ (g_x ẋ0 + g_p ṗ),
///     adjoint:  g_zᵀ ν = λ_z;  λ_x −= g_xᵀ ν,  p̄ −= g_pᵀ ν,  λ_z = 0
/// (the given z0 is a guess: its own derivative is zero).
///
/// A fully implicit F(t, y, y', p) = 0 (ResidualForm, residual_dae.hpp: the
/// state (y, y'), its algebraic rows F) solves the same equations for other
/// unknowns: u = (y'_d, y_a) (System::initial_unknowns()), every other
/// state fixed. Everything below reads "z" as those unknowns and g_z as
/// [F_{y'_d} | F_{y_a}], the matrix whose nonsingularity is index 1; the
/// remaining y'_a(t0) are guesses F does not read (tangent and adjoint 0).

#include <cstdint>
#include <span>
#include <vector>

#include "costate/ode/system.hpp"

namespace costate::ode::detail {

/// Replaces the algebraic entries of x (System::n_states() entries; the
/// differential ones are kept) by the solution of the constraints at
/// (t0, x, p): first refuses a higher-index system (check_index_one), then
/// Newton to round-off. Throws costate::Error naming the constraint with the
/// largest residual (its state index and value) when Newton does not
/// converge. No-op for an ODE. Prefixed by `who`.
void make_consistent(const System& system, std::span<const double> p, double t0,
                     std::span<double> x, std::string_view who);

/// The implicit derivatives of z0 = z(x0, p) at a consistent (t0, x0, p):
/// [g_x g_z | g_p] linearized once.
class ConstraintProjection {
 public:
  ConstraintProjection(const System& system, std::span<const double> p);
  /// The tangent of the initial point: for m directions (S row-major, the
  /// first n_x rows those of x; P n_p × m), the algebraic rows of S become
  /// −g_z⁻¹ (g_x S_x + g_p P).
  void tangent(double t, std::span<const double> x, std::size_t m, std::span<double> S,
               std::span<const double> P);
  /// The adjoint: w (n_x entries) = ∂J/∂x at (t, x) on the constraint
  /// z = z(x, p): g_zᵀ ν = w_z, then dlambda = w_x − g_xᵀ ν (algebraic
  /// entries 0) and gp −= g_pᵀ ν. dlambda may alias w. For a w without
  /// algebraic entries, dlambda = w.
  void adjoint(double t, std::span<const double> x, std::span<const double> w,
               std::span<double> dlambda, std::span<double> gp);
  /// Second order (hessian_vector's forward-over-adjoint sweep): adjoint()
  /// at (x + ε ẋ, p + ε ṗ) with w + ε ẇ, ẋ consistent (tangent()), on a
  /// System from make_second_order_system:
  ///     g_zᵀ ν̇ = ẇ_z − ġ_zᵀ ν,   λ̇_x = ẇ_x − g_xᵀ ν̇ − ġ_xᵀ ν,
  ///     ṗ̄ −= g_pᵀ ν̇ + ġ_pᵀ ν   (ġ_· the ε-parts of the blocks along (ẋ, ṗ)),
  /// and adjoint() itself on (w, λ, gp). In place: lambda and lambda_dot
  /// (n_x entries) hold w and ẇ on entry.
  void adjoint_tangent(double t, std::span<const double> x, std::span<const double> xdot,
                       std::span<const double> pdot, std::span<double> lambda,
                       std::span<double> lambda_dot, std::span<double> gp,
                       std::span<double> gp_dot);

 private:
  void linearize(double t, std::span<const double> x);
  const System& system_;
  std::span<const double> p_;
  // Constraint rows, initial unknowns, and the states that are neither
  // solved nor data (a ResidualForm's y'_a(t0): tangent and adjoint 0).
  std::vector<std::size_t> z_, u_, guesses_;
  std::vector<double> J_;  // [F_y | F_p], column-major n_x × (n + n_p)
};

}  // namespace costate::ode::detail
