#pragma once
/// \file
/// ode::History and delayed inputs — delay differential equations by the
/// method of steps.
///
/// A delayed input is a parameter slot of an equation model whose value at
/// time t is a quantity of the model read at an earlier time:
///     p_slot(t) = q(τ, y(τ), p(τ)),   τ = t − d(t, y, p),
/// with the state's history y(τ) = y(t0) for τ ≤ t0 while time reads τ
/// itself (SBML's `delay(x, d)` before the start: a state's initial value,
/// a formula in time at τ, as the SBML Test Suite's analytic cases
/// expect). The history is a
/// piecewise cubic Hermite interpolant of the trajectory: nodes (t_i, y_i,
/// f_i = f(t_i, y_i)), on [t_i, t_{i+1}] with s = (t − t_i)/h
///     y(t) = h00(s) y_i + h h10(s) f_i + h01(s) y_{i+1} + h h11(s) f_{i+1},
/// an O(h⁴) error per piece.
///
/// integrate_with_delays integrates an ode::EquationModel whose right-hand
/// side reads such slots by the method of steps: with d_min the smallest
/// lag the right-hand side reads (constant: an expression of the
/// parameters), it integrates [t0 + k·d_min, t0 + (k+1)·d_min] one after
/// the other — every x(t − d) read inside such a segment lies in the
/// segments already done, and the propagated discontinuities t0 + k·d of
/// the solution's derivatives are segment ends (steps end on them). Each
/// segment's trajectory is sampled at kSamplesPerSegment points that
/// become the history's nodes: with an integrator that has a discrete
/// adjoint and no nested delay in the right-hand side, the steps land on
/// them — the run is adjoint_with_delays' forward pass, the same steps and
/// bits (delay_adjoint.hpp); otherwise (CVODES, nested delays, a failed
/// integration run again for its summary) they are read from the
/// integrator's own dense output (its output times). Slots that only outputs read (an SBML assignment rule
/// that no rate reads) may have any lag, even a time- or state-dependent
/// one: they are evaluated after the integration from the whole history
/// (DelayedInputs::fill).
///
/// Limitations, refused by name (costate::Error): a lag read by the
/// right-hand side that depends on time, the state or another delay, or is
/// not positive; models with events or algebraic states (the event driver
/// and the DAE layer have no history hook). Gradients through delay():
/// forward sensitivities (forward_sensitivities_with_delays: the tangents
/// integrated with the state, their history interpolated alike) and the
/// discrete adjoint (delay_adjoint.hpp: adjoint_with_delays).

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/ode/options.hpp"  // Solution (its history)

namespace costate::ode {

class EquationModel;

/// The dense output of a trajectory y(t) on [t0, t_last] (cubic Hermite
/// between its nodes), with an initial history for t < t0: y(t0), or the
/// function set_initial gives (SBML: initial values that are formulas in
/// time, "x has been oscillating up to the start", suite case 00941).
class History {
 public:
  /// y(τ) for τ < t0 into its second argument.
  using Initial = std::function<void(double, std::span<double>)>;
  explicit History(std::size_t n_states = 0) : n_(n_states) {}
  void set_initial(Initial initial) { initial_ = std::move(initial); }
  std::size_t n_states() const { return n_; }
  bool empty() const { return t_.empty(); }
  std::size_t n_nodes() const { return t_.size(); }
  double t0() const { return t_.front(); }
  double t_last() const { return t_.back(); }
  /// Appends the node (t, y, dydt). `t` must exceed the last node's time
  /// (a node within 1e-14·|t| of it replaces nothing and is skipped).
  void append(double t, std::span<const double> y, std::span<const double> dydt);
  /// A jump of the derivative at the last node: the node just appended
  /// holds the left limit, `dydt` the right one (a second node at the same
  /// time, the same y; nothing when they are equal). A read at that time
  /// then takes the right limit, one before it the left.
  void append_break(std::span<const double> dydt);
  /// y(t) into `y` (n_states values). t < t0: the initial history; t beyond the last
  /// node by more than round-off: costate::Error (the history is not there
  /// yet — a lag shorter than the step that reads it).
  void value(double t, std::span<double> y) const;
  /// dy/dt(t) into `dy`: the interpolant's derivative (t ≥ t0); before t0
  /// that of the initial history (a central difference of set_initial's
  /// function, step 1e-6·max(1, |t|): error O(1e-12) relative to its third
  /// derivative; zero for the constant history y(t0)). `left`: the limit
  /// from the left where the derivative jumps (at t0, at a break).
  void derivative(double t, std::span<double> dy, bool left = false) const;

 private:
  /// The piece [t_i, t_{i+1}] holding t ∈ (t0, t_last] (its index i).
  std::size_t piece(double t) const;
  std::size_t n_;
  std::vector<double> t_, y_, f_;
  Initial initial_;
};

/// One delayed input: the parameter `parameter` of the model holds
/// quantity(τ) with τ = t − lag(t), both programs over the model's
/// variables (t, y, p, w: EquationModel::variables()).
struct DelayedInput {
  std::size_t parameter = 0;  ///< the slot (index among the model's parameters)
  expr::Program quantity;     ///< x: what is read at the earlier time
  expr::Program lag;          ///< d ≥ 0
  /// The quantity while τ < t0, where the history is the initial one (SBML:
  /// rateOf of a state is 0 there); empty: `quantity`.
  expr::Program quantity_before_start;
  std::string text;           ///< "file:line: delay(x, 0.2)", for messages
};

/// Fills the slots of delayed inputs from a history (not owned: it must
/// outlive this). Each slot is evaluated on demand, recursively for a
/// quantity that reads another slot (nested delays).
class DelayedInputs {
 public:
  /// The model's shape: n_states, n_parameters, its intermediates (program
  /// k over t, y, p, w_0 … w_{k−1}) and equations (over t, y, p, w; none for
  /// a model without states).
  DelayedInputs(std::size_t n_states, std::size_t n_parameters,
                std::vector<expr::Program> intermediates,
                std::span<const expr::Program> equations, std::vector<DelayedInput> inputs,
                const History& history);
  /// The same for an equation model.
  DelayedInputs(const EquationModel& model, std::vector<DelayedInput> inputs,
                const History& history);
  const std::vector<DelayedInput>& inputs() const { return inputs_; }
  /// Whether the right-hand side reads input k (directly or through
  /// intermediates).
  bool read_by_rhs(std::size_t k) const { return rhs_reads_[k]; }
  /// Whether input k's lag is a constant of the parameters (reads neither
  /// t, nor the state, nor a delayed input).
  bool constant_lag(std::size_t k) const { return constant_lag_[k]; }
  /// Overwrites p's slots with their values at (t, y): all of them, or
  /// those the right-hand side reads (`rhs_only`; y may then be empty:
  /// their lags are constants, their quantities read the history only).
  void fill(double t, std::span<const double> y, std::span<double> p, bool rhs_only = false) const;
  /// Whether input k's quantity or lag reads another delayed input.
  bool reads_inputs(std::size_t k) const {
    return !quantity_reads_[k].empty() || !lag_reads_[k].empty();
  }
  /// Input k (read by the right-hand side: a constant lag, no nested input)
  /// at t and its tangents ż_j along nd = dz.size() directions
  /// (forward_sensitivities_with_delays): `p` the parameters, `p_dot` the
  /// directions' ṗ (nd × n_parameters), `s_history` the sensitivities'
  /// history (n_states × nd per node), `s_before` s before t0; `left`: ẏ(τ)
  /// from the left where it jumps (History::derivative). Returns z.
  double tangents(std::size_t k, double t, std::span<const double> p,
                               std::span<const double> p_dot, const History& s_history,
                               std::span<const double> s_before, std::span<double> dz,
                               bool left = false) const;

 private:
  double value(std::size_t k, double t, std::span<const double> y, std::span<const double> p,
               int depth) const;
  double evaluate(const expr::Program& program, double t, std::span<const double> y,
                  std::span<double> p, const std::vector<std::size_t>& slots, int depth) const;
  std::size_t ny_ = 0, np_ = 0;
  std::vector<expr::Program> w_;
  std::vector<DelayedInput> inputs_;
  const History* history_;
  std::vector<bool> rhs_reads_, constant_lag_;
  /// For each input, the inputs its quantity and its lag read (through
  /// intermediates).
  std::vector<std::vector<std::size_t>> quantity_reads_, lag_reads_;
};

/// Samples of each method-of-steps segment taken into the history.
inline constexpr int kSamplesPerSegment = 64;

/// One direction θ of forward sensitivities: the tangents of the
/// parameters (ṗ, one per parameter; a delayed input's slot is ignored: its
/// tangent is formed from the history) and of the initial state (ẏ0, one
/// per state; empty: zero). The initial history moves with ẏ0 as a
/// constant: s(τ) = ẏ0 for τ ≤ t0.
struct SensitivityDirection {
  std::vector<double> parameters;
  std::vector<double> initial_state;
};

/// A trajectory and its forward sensitivities at the output times:
/// s[(k·n_states + i)·n_directions + j] = dy_i(t_k)/dθ_j.
struct DelayedSensitivities {
  Solution solution;
  std::size_t n_directions = 0;
  std::vector<double> s;
  double sensitivity(std::size_t k, std::size_t i, std::size_t j) const {
    return s[(k * solution.n_states + i) * n_directions + j];
  }
};

/// Integrates `model` from y0 at t0 to t1 by the method of steps (file
/// comment), the delayed inputs' slots in `p` filled from the history
/// (their values in p are ignored). Any integrator of ode::integrate.
/// Returns the trajectory at `outputs` (ascending within [t0, t1]) and, in
/// Solution::history, the history it was computed with (for outputs that
/// read delayed inputs: DelayedInputs::fill).
/// Throws costate::Error for the refused cases of the file comment;
/// numerical failures come back in the summary.
Solution integrate_with_delays(const EquationModel& model, std::span<const double> y0,
                                      std::span<const double> p, double t0, double t1,
                                      std::span<const double> outputs,
                                      const std::vector<DelayedInput>& inputs,
                                      const IntegratorOptions& options,
                                      History::Initial initial_history = {});

/// integrate_with_delays with forward sensitivities along `directions`:
/// the state and s_j = dy/dθ_j integrated together, segment by segment,
///     s_j' = f_y s_j + f_p ṗ_j + Σ_k f_{z_k} ż_k,
/// where the delayed input z_k = x_k(τ, y(τ), p), τ = t − d_k(p), has the
/// tangent
///     ż_k = x_t τ̇ + x_y (s_j(τ) + ẏ(τ) τ̇) + x_p ṗ_j,   τ̇ = −d_p ṗ_j,
/// s_j(τ) and y(τ), ẏ(τ) read from histories interpolated alike (the
/// sensitivities' history has the same nodes, with s' as its
/// derivatives); before t0, s_j(τ) = ẏ0_j and ẏ(τ) is the initial
/// history's. The integrator's error control covers y and s (implicit
/// methods take f_y for each block of the Jacobian, as CVODES'
/// simultaneous corrector does). Refused by name besides
/// integrate_with_delays' refusals: a delayed input the right-hand side
/// reads whose quantity or lag reads another delayed input (nested
/// delays). An `initial_history` function gives y(τ) and ẏ(τ) before t0,
/// but its dependence on the parameters is not known here: s_j(τ) = ẏ0_j
/// there, exact for the constant history y0 and for a history held fixed
/// (the caller refuses a history in time that moves with the parameters).
DelayedSensitivities forward_sensitivities_with_delays(
    const EquationModel& model, std::span<const double> y0, std::span<const double> p, double t0,
    double t1, std::span<const double> outputs, const std::vector<DelayedInput>& inputs,
    const IntegratorOptions& options, const std::vector<SensitivityDirection>& directions,
    History::Initial initial_history = {});

}  // namespace costate::ode
