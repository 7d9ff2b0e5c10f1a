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
/// segment's trajectory is sampled at kSamplesPerSegment points from the
/// integrator's own dense output (its output times) and becomes the
/// history's nodes. Slots that only outputs read (an SBML assignment rule
/// that no rate reads) may have any lag, even a time- or state-dependent
/// one: they are evaluated after the integration from the whole history
/// (DelayedInputs::fill).
///
/// Limitations, refused by name (costate::Error): a lag read by the
/// right-hand side that depends on time, the state or another delay, or is
/// not positive; models with events or algebraic states (the event driver
/// and the DAE layer have no history hook); sensitivities (the derivative
/// through x(t − d) is not formed: gradients through delay() are not
/// supported, and integrate_with_delays is a simulation only).

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/ode/options.hpp"

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
  /// y(t) into `y` (n_states values). t < t0: the initial history; t beyond the last
  /// node by more than round-off: costate::Error (the history is not there
  /// yet — a lag shorter than the step that reads it).
  void value(double t, std::span<double> y) const;

 private:
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

/// The trajectory at `outputs` (ascending within [t0, t1]) and the history
/// it was computed with (for outputs that read delayed inputs: fill).
struct DelayedSolution {
  Solution solution;
  History history;
};

/// Integrates `model` from y0 at t0 to t1 by the method of steps (file
/// comment), the delayed inputs' slots in `p` filled from the history
/// (their values in p are ignored). Any integrator of ode::integrate.
/// Throws costate::Error for the refused cases of the file comment;
/// numerical failures come back in the summary.
DelayedSolution integrate_with_delays(const EquationModel& model, std::span<const double> y0,
                                      std::span<const double> p, double t0, double t1,
                                      std::span<const double> outputs,
                                      const std::vector<DelayedInput>& inputs,
                                      const IntegratorOptions& options,
                                      History::Initial initial_history = {});

}  // namespace costate::ode
