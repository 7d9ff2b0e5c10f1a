#pragma once
/// \file
/// ode::supports — the one table of which sensitivity method works with
/// which integrator for which derivative order. The library (ode::gradient,
/// ode::hessian_vector), the CLI and calibration all ask it, so a
/// combination is refused in one place with one message that says what is
/// supported instead:
///
///     const ode::Support s = ode::supports(ode::SensitivityKind::ContinuousAdjoint,
///                                          ode::Method::RK4, 1);
///     if (!s) std::cerr << s.message;   // "… continuous_adjoint supports integrator.method
///                                       //  = dopri5 (adaptive), sdirk3 (adaptive) or bdf
///                                       //  (adaptive); … with integrator.method = rk4 use
///                                       //  sensitivity.method = discrete_adjoint or forward"
///
/// The table (order 1: ode::gradient; order 2: ode::hessian_vector and
/// ode::hessian):
///
///     method              integrators                                   orders
///     discrete_adjoint    euler rk4 dopri5 backward_euler               1, 2
///                         crank_nicolson sdirk3 bdf
///     forward             the same seven                                1
///     continuous_adjoint  dopri5 sdirk3 bdf (adaptive only)             1
///     cvodes_forward      cvodes_bdf cvodes_adams                       1
///     cvodes_adjoint      cvodes_bdf cvodes_adams                       1, 2
///     idas_forward        idas                                          1
///     idas_adjoint        idas                                          1
///
/// Models with algebraic states (DAEs, system.hpp's HasAlgebraicStates,
/// semi-explicit index 1, and the fully implicit F(t, y, y', p) = 0 as
/// ode::ResidualForm, residual_dae.hpp) — the `supports_dae` column:
///
///     integrate          bdf sdirk3 backward_euler crank_nicolson idas
///     discrete_adjoint   bdf sdirk3 backward_euler crank_nicolson     1, 2
///     forward            bdf sdirk3 backward_euler crank_nicolson     1
///     continuous_adjoint bdf sdirk3                                   1
///     idas_forward, idas_adjoint   idas                               1
///
/// (continuous_adjoint: the semi-explicit form only, no events; refuses a
/// ResidualForm by name. idas takes both forms: idas.hpp.)
///
/// The native implicit schemes solve M (y − …) − hγ f = 0 with M =
/// diag(1 differential, 0 algebraic) in their one Newton matrix (steppers/
/// implicit_common.hpp), from consistent initial values (a Newton solve for
/// z0 given the differential part, differentiated implicitly:
/// dz0/dp = −g_z⁻¹ (g_x dx0/dp + g_p)). Refused by name: the explicit
/// methods (no mass matrix), CVODES (ODEs only), the continuous
/// second-order adjoint on a DAE. H·v (forward over the discrete
/// adjoint) projects ẋ0 and the final (λ, λ̇) through the second-order
/// implicit derivative of z0(x0, p) (src/ode/dae.hpp). Events on a DAE: the native integrators
/// re-solve the algebraic states after each instant (InstantJump), the
/// solve differentiated as z0's; idas refuses events.
///
/// `costate calibrate` needs the gradient of its objective by the chosen
/// method and the residuals' Jacobian by forward tangents of the same
/// discrete steps, or for cvodes_bdf / cvodes_adams by CVODES' forward
/// sensitivities (ode::sensitivity_matrix): supports_calibration.
/// tests/ode/support_test.cpp runs every (method × integrator × order) and
/// checks that the library does what this table says.
///
/// Adding a method or an integrator: add its row or column in
/// src/ode/support.cpp; the messages and the test follow.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "costate/ode/options.hpp"

namespace costate::ode {

/// The sensitivity methods by name (input key `sensitivity.method`), one per
/// alternative of ode::SensitivityMethod.
enum class SensitivityKind {
  DiscreteAdjoint,    ///< "discrete_adjoint": ode::DiscreteAdjoint
  Forward,            ///< "forward": ode::Forward
  ContinuousAdjoint,  ///< "continuous_adjoint": ode::ContinuousAdjoint
  CvodesForward,      ///< "cvodes_forward": ode::CvodesForward
  CvodesAdjoint,      ///< "cvodes_adjoint": ode::CvodesAdjoint
  IdasForward,        ///< "idas_forward": ode::IdasForward
  IdasAdjoint,        ///< "idas_adjoint": ode::IdasAdjoint
};
std::string to_string(SensitivityKind kind);
/// Parses any name to_string returns; the error lists the valid names.
SensitivityKind sensitivity_kind_from_string(std::string_view name);
/// All kinds, in declaration order.
std::span<const SensitivityKind> all_sensitivity_kinds();

struct DiscreteAdjoint;
struct Forward;
struct ContinuousAdjoint;
struct CvodesForward;
struct CvodesAdjoint;
struct IdasForward;
struct IdasAdjoint;
constexpr SensitivityKind kind_of(const DiscreteAdjoint&) { return SensitivityKind::DiscreteAdjoint; }
constexpr SensitivityKind kind_of(const Forward&) { return SensitivityKind::Forward; }
constexpr SensitivityKind kind_of(const ContinuousAdjoint&) {
  return SensitivityKind::ContinuousAdjoint;
}
constexpr SensitivityKind kind_of(const CvodesForward&) { return SensitivityKind::CvodesForward; }
constexpr SensitivityKind kind_of(const CvodesAdjoint&) { return SensitivityKind::CvodesAdjoint; }
constexpr SensitivityKind kind_of(const IdasForward&) { return SensitivityKind::IdasForward; }
constexpr SensitivityKind kind_of(const IdasAdjoint&) { return SensitivityKind::IdasAdjoint; }
/// The kind of an ode::SensitivityMethod value (a new alternative without a
/// kind_of overload above does not compile).
template <class... Ts>
SensitivityKind kind_of(const std::variant<Ts...>& method) {
  return std::visit([](const auto& m) { return kind_of(m); }, method);
}

/// The table's answer: supported, or not and why, with the fix.
struct Support {
  bool supported = false;
  /// Empty when supported; otherwise one sentence naming the combination
  /// and what is supported instead (which integrators the method takes,
  /// which methods the integrator takes).
  std::string message;
  explicit operator bool() const { return supported; }
};

/// Whether sensitivity method `method` with integrator `integrator` gives
/// derivatives of order `order` (1: gradients, 2: Hessian-vector products).
/// Throws costate::Error for an order other than 1 or 2.
Support supports(SensitivityKind method, Method integrator, int order);
/// The same with the integrator's settings: also their conditions
/// (continuous_adjoint needs dopri5, sdirk3 or bdf with adaptive: true).
Support supports(SensitivityKind method, const IntegratorOptions& integrator, int order);
/// `costate calibrate`: the objective's gradient by `method` (order 1) and
/// the residual Jacobian by forward tangents of the same steps (the
/// integrators `forward` supports) or by CVODES' forward sensitivities
/// (those `cvodes_forward` supports).
Support supports_calibration(SensitivityKind method, Method integrator);

/// A model with events (events.hpp): the combinations of the table that also
/// cross events — today the discrete adjoint and forward sensitivities of the
/// native integrators, the continuous adjoint and CVODES' forward
/// sensitivities, order 1 (every native integrator, and CVODES, runs them),
/// and the discrete adjoint's Hessian–vector products (order 2).
Support supports_events(SensitivityKind method, Method integrator, int order);
/// The same for a model with delayed events (`delayed`: some event has a
/// delay, EventAttributes::has_delay): their derivatives — the execution
/// time τ + d(τ, y_τ, p) and values from the trigger time — by the discrete
/// adjoint, forward sensitivities and cvodes_forward at order 1; the others
/// refused by name.
Support supports_events(SensitivityKind method, Method integrator, int order, bool delayed);
/// Whether `integrator` integrates a model with `n_algebraic` algebraic
/// states (n_algebraic > 0: a DAE, System::n_algebraic()): always for an
/// ODE (0); for a DAE bdf, sdirk3, backward_euler, crank_nicolson and idas.
/// The message names the integrator and the fix ("… has algebraic states
/// (a DAE): use integrator.method = bdf, …"). Every integrate entry point
/// asks it.
Support supports_dae(Method integrator, std::size_t n_algebraic);
/// The derivative column for a DAE: the table's answer (supports) and, with
/// n_algebraic > 0, the combinations that differentiate a DAE (above). Every
/// gradient / Hessian / sensitivity-matrix entry point asks it.
Support supports_dae(SensitivityKind method, Method integrator, int order,
                     std::size_t n_algebraic);

/// Throws costate::Error("<where>: <message>") unless `s` is supported.
void require(const Support& s, std::string_view where);

}  // namespace costate::ode
