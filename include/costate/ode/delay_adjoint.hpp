#pragma once
/// \file
/// ode::adjoint_with_delays — the discrete adjoint of the method of steps
/// (history.hpp) through the history's interpolation.
///
/// The forward computation, segment by segment [a, b] (b − a ≤ d_min, the
/// ends t0 + k·d_min, t0 + d_k and t1): the right-hand side at (t, y) reads
/// each delayed input
///     z_k(t) = x_k(τ, H(τ), p),   τ = t − d_k(p),
/// from the history H, the cubic Hermite interpolant of the nodes
/// (t_i, y_i, f_i) of the earlier segments (y_i sampled from each
/// segment's steps, f_i = f(t_i, y_i, p, z(t_i))); before t0, H is the
/// constant y(t0) = y_0 (or the caller's initial history, held fixed).
/// Within a segment the nodes it can read — those of [a − d_max, a] — are
/// extra parameters of the segment's System, θ_s = (p, Y, F), so that the
/// one discrete adjoint sweep of the engine (gradient.hpp's native
/// gradient on a StepPlan landing on the segment's sample times) returns,
/// with λ(a), the transpose of every read:
///     θ̄_s = Σ_stages (∂f/∂θ_s)ᵀ K̄,   ∂f/∂Y_i, ∂f/∂F_i = f_z x_y ∂H/∂(y_i, f_i),
///     ∂f/∂p ∋ f_z (x_t + x_y H'(τ)) ∂τ/∂p (the lag), f_z x_p (the quantity).
/// At a = t0 + d_k the history holds the node at a twice (History::
/// append_break): the left one (f formed by the segment ending there,
/// reading y(t0⁻) = y_0, flat in d) for the pieces before a, the right one
/// (f formed by the segment starting there, reading the first piece, whose
/// slope f_0 moves with d) for the pieces after — f's value is continuous
/// there, its derivative in the lag is not (without the right node dJ/dd
/// was 8e-6 off on a three-segment case).
/// The reverse pass runs the segments last to first; segment s's sweep is
/// seeded at its sample times t_i with
///     ȳ_i = ∂J/∂y(t_i) + (∂f/∂y)ᵀ f̄_i + (the deposits of later reads on Y_i),
/// f̄_i the later reads' deposits on F_i (whose own reads of the history,
/// at t_i − d, go further back through the same vjp), and λ(a) is added to
/// the node at a (the previous segment's last). The node at t0 takes what
/// is left: dJ/dy0 = ȳ_0. The result is the derivative of what this
/// computation computes (its steps fixed), to round-off. Its forward pass
/// is integrate_with_delays' run (the same steps landing on the sample
/// times, the same bits) for every integrator it supports;
/// forward_sensitivities_with_delays integrates (y, s) with its own steps
/// and agrees within the tolerances.
///
/// Supported: any native scheme of the discrete adjoint (euler, rk4,
/// dopri5, the θ-methods, sdirk3, bdf; support.hpp's table) and any
/// checkpoint schedule; objectives of the state at the output times and
/// of the parameters (DelayedObjective). Refused by name (costate::Error):
/// CVODES integrators (no discrete adjoint), integrate_with_delays'
/// refusals (lags that move in time or with the state, events, DAEs), and
/// delays whose quantity reads another delay (nested delays). An
/// `initial_history` function is held fixed (its values and its τ-derivative
/// enter, not a dependence on p or y0: the caller refuses a history that
/// moves with them).

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "costate/ode/checkpointing.hpp"
#include "costate/ode/history.hpp"

namespace costate::ode {

/// The objective of a trajectory at the output times: returns J and adds
/// ∂J/∂y(t_k) into y_bar (outputs × n_states, row-major) and ∂J/∂p into
/// p_bar (n_parameters). `at_outputs` is the trajectory at the outputs.
using DelayedObjective = std::function<double(const Solution& at_outputs, std::span<double> y_bar,
                                              std::span<double> p_bar)>;

/// J and its gradient through the method of steps.
struct DelayedGradient {
  Solution solution;  ///< at the outputs, with its history (Solution::history)
  double objective = 0.0;
  std::vector<double> wrt_parameters;     ///< dJ/dp (a delayed input's slot: 0)
  std::vector<double> wrt_initial_state;  ///< dJ/dy0
  std::size_t segments = 0;               ///< method-of-steps segments reversed
  std::int64_t steps = 0;                 ///< the segments' steps
  std::int64_t vjp_evaluations = 0;       ///< the sweeps' and the nodes' products
};

/// The discrete adjoint through delay() (file comment): `model` from y0 at
/// t0 to t1 with the delayed inputs `inputs` (their slots in p ignored),
/// the trajectory at `outputs` (ascending in [t0, t1]) handed to
/// `objective`, the sweeps under `checkpointing`.
DelayedGradient adjoint_with_delays(const EquationModel& model, std::span<const double> y0,
                                    std::span<const double> p, double t0, double t1,
                                    std::span<const double> outputs,
                                    const std::vector<DelayedInput>& inputs,
                                    const IntegratorOptions& options,
                                    const Checkpointing& checkpointing,
                                    const DelayedObjective& objective,
                                    History::Initial initial_history = {});

}  // namespace costate::ode
