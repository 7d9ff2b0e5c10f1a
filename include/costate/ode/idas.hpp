#pragma once
/// \file
/// The SUNDIALS IDAS backend (issue 32): `integrator.method: idas` for
/// ode::integrate and `sensitivity.method: idas_forward | idas_adjoint` (ode::IdasForward,
/// ode::IdasAdjoint) for ode::gradient — the integrator of differential-algebraic models.
///
/// A model with algebraic states (system.hpp, HasAlgebraicStates) is the
/// semi-explicit index-1 DAE
///     x' = f(t, x, z, p),   0 = g(t, x, z, p),   g_z nonsingular,
/// one rhs F = (f; g) with the mass matrix M = diag(1 differential,
/// 0 algebraic). IDAS solves it in residual form
///     R(t, y, y') = M y' − F(t, y, p) = 0,
/// with the Newton matrix  ∂R/∂y + c ∂R/∂y' = c M − F_y  (F_y: the
/// System's Jacobian, the same AD as CVODES', cvodes::Binding — dense LU).
/// An ODE model (no algebraic states) is the case M = I.
///
/// Consistent initial values: before the first step IDACalcIC
/// (IDA_YA_YDP_INIT) solves 0 = g(t0, x0, z0, p) for the algebraic z0 with
/// the differential x0 fixed (the given z0 is the Newton guess) and forms
/// x0' = f; the correction is reported (InitialCorrection, in the Summary's
/// message). With sensitivities, IDACalcIC corrects them too:
///     s_z(t0) = −g_z⁻¹ (g_x s_x(t0) + g_p e_j),
/// so dz0/dp is exact and a direction that moves only an algebraic initial
/// value has zero sensitivity (that value is a guess, not data).
///
/// Forward sensitivities (IdasForward, IDASensInit, simultaneous corrector,
/// sensitivities in the error test): for the directions (p_j; y0_i)
///     M s_j' = F_y s_j + F_p e_j,
/// whose algebraic rows are the differentiated constraint
///     g_x s_x + g_z s_z + g_p e_j = 0,
/// held by IDAS to its Newton tolerance at every step. The gradient of
///     J = g(y(t1), p) + z(t1) + Σ_k ℓ_k(y(t_k), p)
/// (objective.hpp; z' = q a differential state) is assembled at the stops
/// (observation times, then t1) as cvodes_forward does.
///
/// Index check: before integrating, g_z is formed at (t0, y0) and reduced
/// with full pivoting; if it is singular (a DAE of index > 1, or dependent
/// constraints) the run is refused with the algebraic equations that have
/// no pivot named (costate integrates index-1 DAEs only).
///
/// The adjoint (IdasAdjoint, `sensitivity.method: idas_adjoint`): see
/// IdasAdjoint below.
///
/// Fully implicit DAEs (ode::ResidualForm, residual_dae.hpp: the System's
/// state X = (y, y'[, z]), its rows n … 2n the residual F(t, y, y', p)):
/// IDAS integrates F itself on the unknowns u = (y[, z]) — one mechanism
/// with the semi-explicit case, R(t, u, u') = M u' − G(X(u, u')) with G
/// the System's rhs and M = diag(0 on the rows F, 1 on z), so
///     Newton matrix   ∂R/∂u + c ∂R/∂u' = −(F_y + c F_{y'})   (n × n, dense),
///     sensitivities   F_y s + F_{y'} s' + F_p e_j = 0   (IDASensInit,
///                     staggered corrector: see idas_backend.cpp),
///     start           (y'_d, y_a) from y_d by dae.hpp's Newton, then IDACalcIC
///                     (IDAS' id: algebraic_states(), y' unread by F),
/// the derivatives from the same AD (G_X's y and y' columns). The
/// directions of the forward sensitivities are the parameters and the
/// differential y_d(t0); y'(t0) and y_a(t0) are guesses (derivative 0).
/// The adjoint: see IdasAdjoint.
///
/// Events (a semi-explicit DAE or an ODE): IDAS' root finding
/// (integrate_to_root: IDARootInit, IDAGetRootInfo) locates the instants in
/// the events' driver (events.cpp, as for CVODES); after each update the
/// algebraic states are re-solved and IDAS restarts from them (IDACalcIC).
/// idas_forward's sensitivities take each instant's tangent jump, and
/// idas_adjoint takes the stretches between instants last first with λ
/// carried through the transposed jump — CVODES' mechanism
/// (adjoint_across_instants); the jump includes the re-solve's implicit
/// derivative (InstantJump, ode/dae.hpp).
///
/// Newton linear solver (a semi-explicit DAE): IntegratorOptions::
/// cvodes_linear_solver as for CVODES — dense, band or KLU on the AD
/// structure of F_y (the Newton matrix c M − F_y filled on it), automatic
/// by the same rule (resolve_linear_solver); the backward problem of the
/// adjoint stays dense. A fully implicit DAE's Newton matrix (F_y and
/// F_{y'} columns) is dense only.
///
/// Limitations: serial; dense backward linear algebra; the
/// algebraic states are in the error test (IDAS' default, IDASetSuppressAlg
/// off) unless every state is algebraic (Dae::algebraic_unmeasured); no
/// second order; no events on a fully implicit DAE; the adjoint
/// interpolates the forward state (and, fully implicit, y') at the
/// observation times (as cvodes_adjoint).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/cvodes.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/problem.hpp"

namespace costate::ode {

/// Forward sensitivities through IDAS (IDASensInit); the gradient of J with
/// respect to all parameters and initial states (np + n directions). Needs
/// integrator.method = idas.
struct IdasForward {};

/// The adjoint through IDAS (IDAAdjInit, IDASolveF / IDASolveB, Hermite
/// checkpoints, IDACalcICB at every backward start). With F = (f; g):
///     M λ' = −F_yᵀ λ      (its algebraic rows: f_zᵀ λ_x + g_zᵀ λ_z = 0 —
///                          the running cost's λ = 1 row carries q_yᵀ),
///     μ' = −F_pᵀ λ,  μ(t1) = 0,
///     dJ/dx0 = λ_x(t0),  dJ/dz0 = 0,  dJ/dp = μ(t0) + Σ (term's p-part),
/// started at t1 and restarted at each observation time t_k with the jump
/// of a term ℓ(x, z, p) projected onto the differential part (z = z(x, p)
/// on the constraint):
///     g_zᵀ ν = ℓ_zᵀ,   λ_x += ℓ_xᵀ − g_xᵀ ν,   dJ/dp += ℓ_pᵀ − g_pᵀ ν,
/// and λ_z, λ' made consistent by IDACalcICB from λ_x.
///
/// Fully implicit F(t, y, y', p) = 0 (ResidualForm; with the running cost
/// z' = q one more row): the adjoint DAE (F_{y'}ᵀλ)' = F_yᵀλ needs the time
/// derivative of F_{y'}(t, y, y') unless it is carried as an unknown, so
/// the backward problem is on (λ, ν), 2n unknowns:
///     ν_d' = (R_uᵀλ)_d,   0 = (R_uᵀλ)_a,   0 = ν − R_{u'}ᵀλ
/// (R = −F: R_u = −F_y, R_{u'} = −F_{y'}; ν_a = 0 as F does not read y'_a),
/// λ and ν_a algebraic and out of the backward error test (their values
/// follow from ν_d and the forward state), ν_d differential; the jumps of
/// the terms (projected on y_d through F = 0, as above) go to ν_d, and
///     dJ/dy_d(t0) = ν_d(t0),   dJ/dp = ∫ F_pᵀλ dt + Σ (term's p-part)
/// (the boundary term ν ∂y/∂p at t0 vanishes: y_d(t0) is data, ν_a = 0).
/// Its Newton matrix [−R_uᵀ, c D; −R_{u'}ᵀ, I] reduces to (c R_{u'} −
/// R_u)ᵀ, the transpose of the forward one: nonsingular at index 1.
struct IdasAdjoint {
  /// Steps between checkpoints of the forward pass (IDAAdjInit Nd ≥ 1), or
  /// 0: chosen by the system's size (auto_checkpoint_steps).
  int steps = 0;
  /// `steps`, or when 0 auto_checkpoint_steps for n unknowns (Hermite
  /// points: y and y').
  int resolved_steps(std::size_t n) const;
  /// Tolerances of the backward problem (λ and μ); 0: the integrator's
  /// rtol and its smallest atol.
  double rtol = 0.0;
  double atol = 0.0;
  void validate() const;
};

namespace idas {

/// What IDACalcIC changed at t0: the largest |change| of an algebraic
/// initial value, which state, and the number of states changed by more
/// than 100 ε (1 + |value|).
struct InitialCorrection {
  bool algebraic = false;  ///< the system had algebraic states (IDACalcIC ran)
  double max_change = 0.0;
  std::size_t state = 0;
  std::size_t changed = 0;
  /// Who made them consistent (the report's subject).
  std::string by = "IDACalcIC";
  /// "" when nothing changed; else one sentence for the Summary's message.
  std::string report() const;
};

/// The callbacks of one run (cvodes::System on the System's state X,
/// n_x entries: rhs = G, jacobian = G_X dense, sensitivity_rhs = G_X s +
/// G_p e_j, vjp = G_Xᵀ λ, G_pᵀ λ) and how IDAS' unknowns u map onto X:
///   - residual_n = 0 (semi-explicit): u = X, R = M u' − G(u), `algebraic`
///     (n_x entries, 1 = algebraic) the mask of M;
///   - residual_n = r > 0 (fully implicit, a ResidualForm: X = (y, y', z)
///     with y of r entries and z the running cost's quadrature if any):
///     u = (y, z), R = (F(t, y, y', p); z' − q) from G's rows r … n_x,
///     `algebraic` (n_x − r entries) the model's algebraic components of y
///     (IDAS' id; F does not read their y').
/// Every state, sensitivity and adjoint below is on X (n_x entries).
struct Dae {
  const cvodes::System* system = nullptr;
  std::span<const std::uint8_t> algebraic;
  std::size_t residual_n = 0;
  /// The algebraic unknowns out of the error tests, forward and backward
  /// (IDASetSuppressAlg, IDASetSuppressAlgB): an all-algebraic model's
  /// (each step is its consistent solve; a running cost's quadrature, in
  /// the test, bounds the steps). Measured, their derivative guess u'_a = 0
  /// at a start where they move (z = p sin t from z(0) = 0) asks order 1
  /// for h |z'| below atol: IDA_ERR_FAIL at t0.
  bool algebraic_unmeasured = false;
};

/// Integrates from t0 to the last output time (never past t1); `out(j, t,
/// y)` at every output time (IDAS' interpolant; landing on each with
/// `stop_at_outputs`). `y` holds y0 on entry (its algebraic part a guess)
/// and the final state on return; `correction` receives IDACalcIC's
/// change. Settings::linear_solver: any for a semi-explicit DAE (band and
/// sparse need the System's structure), Dense or Automatic for a fully
/// implicit one.
cvodes::Stats integrate(const Dae& dae, const cvodes::Settings& settings, double t0, double t1,
                        std::vector<double>& y, std::span<const double> outputs,
                        bool stop_at_outputs,
                        const std::function<void(std::size_t j, double t, const double* y)>& out,
                        InitialCorrection* correction = nullptr);

/// integrate() until the first zero of the system's roots (IDARootInit,
/// IDAGetRootInfo) or t_end, as cvodes::integrate_to_root: outputs before
/// the end interpolated, S (with `sensitivities`) carried by IDAS' forward
/// sensitivities; `root_time` NaN when t_end was reached, `directions`
/// IDAS' rootsfound. Each call is a fresh start: y (and S) from an event's
/// update, made consistent by IDACalcIC first (the events' update already
/// re-solved the algebraic states; IDACalcIC forms y'_d).
cvodes::Stats integrate_to_root(
    const Dae& dae, const cvodes::Settings& settings, double t0, double t_end,
    std::vector<double>& y, std::span<const double> outputs,
    const std::function<void(std::size_t j, double t, const double* y, const double* S)>& out,
    double& root_time, std::vector<int>& directions, cvodes::RootSensitivities sensitivities = {});

/// Forward sensitivities with ns directions (as cvodes::forward_
/// sensitivities: S column-major n × ns holds S(t0) on entry, direction
/// j < np moves parameter j); IDAS stops exactly at each of `stops` and
/// calls at_stop(k, t, y, S). S(t0) is made consistent by IDACalcIC.
cvodes::Stats forward_sensitivities(
    const Dae& dae, const cvodes::Settings& settings, double t0, std::vector<double>& y,
    std::size_t ns, std::vector<double>& S, std::span<const double> stops,
    const std::function<void(std::size_t k, double t, const double* y, const double* S)>& at_stop,
    InitialCorrection* correction = nullptr);

/// Adjoint (IdasAdjoint above): forward pass to each of `stops`
/// (ascending, the last = t1, interpolated there), where `jump(k, t, y,
/// dlambda)` returns stop k's λ increment (n entries, zero-initialised; only
/// differential entries: project a term on z first); then the backward
/// passes. `y0` holds the initial state on entry and its consistent version
/// on return. Returns λ(t0) (n) and μ(t0) = ∫ F_pᵀ λ dt (np).
void adjoint(const Dae& dae, const cvodes::Settings& settings, const IdasAdjoint& adj, double t0,
             std::vector<double>& y0, std::span<const double> stops,
             const std::function<void(std::size_t k, double t, const double* y, double* dlambda)>& jump,
             std::vector<double>& lambda, std::vector<double>& mu, cvodes::Stats& forward,
             cvodes::Stats& backward, InitialCorrection* correction = nullptr);

}  // namespace idas

class System;
struct GradientResult;

namespace detail {

/// IDAS' view of a System (idas::Dae): a semi-explicit DAE as it is (its
/// algebraic states IDAS' id); a fully implicit one (ResidualForm, state
/// (y, y'[, z])) by its residual F on the unknowns (y[, z]), the model's
/// algebraic components of y IDAS' id. Holds the mask the Dae points to.
struct IdasView {
  std::vector<std::uint8_t> mask;
  std::size_t r = 0;
  bool all_algebraic = false;
  explicit IdasView(const System& system);
  idas::Dae dae(const cvodes::System& s) const {
    return {.system = &s, .algebraic = mask, .residual_n = r, .algebraic_unmeasured = all_algebraic};
  }
};

/// Refuses a System whose g_z is singular at (t0, x0) (index > 1), naming
/// the algebraic equations (state indices) without a pivot. No-op for an
/// ODE.
void check_index_one(const System& system, std::span<const double> p, double t0,
                     std::span<const double> x0);

/// The idas branch of ode::integrate on a System without objective terms.
Solution integrate_idas(const System& system, std::span<const double> y0,
                        std::span<const double> p, double t0, double t1,
                        const IntegratorOptions& options, std::span<const double> outputs);

/// ode::gradient with IdasForward (`adjoint == nullptr`) or IdasAdjoint on
/// the System of the model and objective.
GradientResult idas_gradient(const System& system, std::span<const double> y0,
                             std::span<const double> p, double t0, double t1,
                             const IdasAdjoint* adjoint, IntegratorOptions options);

}  // namespace detail
}  // namespace costate::ode
