#pragma once
/// \file
/// ode::EquationModel — a model whose right-hand side is typed as equations
/// (from an input file), one expression per state:
///     x' = "a*x - b*x*y",   y' = "-c*y + d*x*y"
/// The expressions may use t, the states and the parameters; they are parsed
/// once (expr::Program) and evaluated on any scalar type, so the model works
/// with every integrator and sensitivity method exactly like a compiled one.
///
/// A model may also have intermediates w_k (an imported SBML model's
/// assignment rules and reaction rates): evaluated in order before the
/// equations, each from t, y, p and w_0 … w_{k−1}; the equations may use them
/// all. Variables are then t, states, parameters, intermediates.
///
/// Events (events.hpp; set_events): triggers as ode::Condition (their
/// relations become the model's roots), assigned values, delays and
/// priorities as programs over the same variables, the intermediates
/// evaluated first. A model without events has n_events() == 0 and behaves
/// and costs exactly as before (make_system's EventAdapter is a pointer).

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/second_order_dual.hpp"
#include "costate/core/error.hpp"
#include "costate/expr/kernel.hpp"
#include "costate/expr/program.hpp"
#include "costate/ode/event_condition.hpp"
#include "costate/ode/events.hpp"

namespace costate::ode {

class EquationModel {
 public:
  EquationModel() = default;
  /// `equations[i]` is the right-hand side of states[i]. `context` prefixes
  /// error messages (e.g. "model.equations"); each equation's own context is
  /// context + "." + state name.
  EquationModel(std::vector<std::string> states, std::vector<std::string> parameters,
                const std::vector<std::string>& equations, const std::string& context = "model.equations");

  /// From compiled programs (e.g. built from trees, expr::Program::build):
  /// `intermediates[k]` may use variables 0 … 1 + n_y + n_p + k − 1 (t, y, p,
  /// earlier intermediates), `equations[i]` (the right-hand side of
  /// states[i]) all of t, y, p, w.
  EquationModel(std::vector<std::string> states, std::vector<std::string> parameters,
                std::vector<std::string> intermediate_names,
                std::vector<expr::Program> intermediates, std::vector<expr::Program> equations,
                const std::string& context = "model");

  /// The variables an expression of this model may use: t, states,
  /// parameters (then the intermediates, if any).
  const std::vector<std::string>& variables() const { return variables_; }
  const std::vector<std::string>& states() const { return states_; }
  const std::vector<std::string>& parameters() const { return parameters_; }
  const expr::Program& equation(std::size_t i) const { return equations_[i]; }
  const std::vector<std::string>& intermediate_names() const { return intermediate_names_; }
  const expr::Program& intermediate(std::size_t k) const { return intermediates_[k]; }

  /// DAEs (issue 32): the indices of the algebraic states, whose equations
  /// are residuals 0 = g(t, y, p) (input files: `model.algebraic`); empty
  /// for an ODE. ode::System reads them (system.hpp, HasAlgebraicStates).
  const std::vector<std::size_t>& algebraic_states() const { return algebraic_; }
  /// Throws costate::Error for an index that is not a state or repeats.
  void set_algebraic_states(std::vector<std::size_t> indices);

  /// dydt = f(t, y, p): one pass of the flattened register machine
  /// (expr::Kernel) over the intermediates and the equations. On double one
  /// out-of-line call of the kernel's fused code (Kernel::evaluate_rhs:
  /// registers on its stack; ode::System calls it directly through
  /// direct_calls()); on ad::Dual and ad::SecondOrderDual the registers live
  /// in a per-thread buffer (no allocation after the first call); on other
  /// scalar types (ad::IndexSet, ad::Real) in a local vector.
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t nr = kernel_.registers();
    if constexpr (std::is_same_v<T, double>) {
      expr::Kernel::evaluate_rhs(&kernel_, t, y.data(), p.data(), dydt.data(), nullptr);
    } else if constexpr (std::is_floating_point_v<T> || ad::is_dual_v<T> ||
                         ad::is_second_order_dual_v<T>) {
      thread_local std::vector<T> registers;
      if (registers.size() < nr) registers.resize(nr);
      run(t, y, p, dydt, registers.data());
    } else {
      std::vector<T> registers(nr);
      run(t, y, p, dydt, registers.data());
    }
  }

  /// The compiled right-hand side: inputs (t, y, p), slots the
  /// intermediates, outputs the equations.
  const expr::Kernel& kernel() const { return kernel_; }

  // Reverse derivatives by interpreting the kernel backward (no tape, no
  // Dual pass): ode::System uses them for its products when the objective
  // has no running cost (detail::SystemModel::own_vjp_workspace).
  /// Doubles one linearization keeps: every register and its adjoint.
  std::size_t vjp_workspace() const { return 2 * kernel_.registers(); }
  /// f = f(t, y, p), every register kept in `work` (vjp_workspace() doubles).
  void linearize(double t, std::span<const double> y, std::span<const double> p,
                 std::span<double> f, std::span<double> work) const {
    expr::Kernel::evaluate_rhs(&kernel_, t, y.data(), p.data(), f.data(), work.data());
  }
  /// ybar = f_yᵀ w (assigned), pbar += f_pᵀ w at the point of the last
  /// linearize(…, work).
  void vjp(std::span<double> work, std::span<const double> w, std::span<double> ybar,
           std::span<double> pbar) const {
    expr::Kernel::vjp_rhs(&kernel_, work.data(), w.data(), ybar.data(), pbar.data());
  }
  /// Lanes of jacobian_rows()' rows: ode::Linearization::kRowLanes.
  static constexpr std::size_t kRowLanes = 8;
  /// f and its Jacobian [f_y | f_p] in one kernel (expr::Kernel::build_rows:
  /// the derivative expressions formed once, at construction): output row i
  /// is ∂f_i/∂y_0 … ∂f_i/∂y_{n−1}, ∂f_i/∂p_0 …, zeros up to kRowLanes lanes,
  /// then f_i — the layout of ad::Dual<double, kRowLanes> outputs, what a
  /// unit-seeded Dual pass computes (kernel.hpp says where they differ).
  /// Built when n + n_p ≤ kRowLanes, else nullptr.
  const expr::Kernel* jacobian_rows() const { return rows_.n_outputs() > 0 ? &rows_ : nullptr; }

  /// rhs<double>, linearize and vjp as plain functions of the kernel, and
  /// the Jacobian rows' kernel (ode::detail::DirectCalls: what ode::System
  /// calls per step; rows null without jacobian_rows()).
  struct DirectCalls {
    const void* self;
    decltype(&expr::Kernel::evaluate_rhs) rhs;
    decltype(&expr::Kernel::vjp_rhs) vjp;
    const expr::Kernel* rows;
  };
  DirectCalls direct_calls() const {
    return {&kernel_, &expr::Kernel::evaluate_rhs, &expr::Kernel::vjp_rhs, jacobian_rows()};
  }

  // ---- Events (events.hpp's HasEvents).
  /// One event, as expressions over variables() (t, states, parameters,
  /// intermediates): y_{targets[j]}⁺ = values[j](t, y⁻, p, w).
  struct Event {
    /// name, initial_value, persistent, use_values_from_trigger_time;
    /// has_delay and has_priority are set by set_events from delay/priority.
    EventAttributes attributes;
    Condition trigger;
    std::vector<std::size_t> targets;   ///< state indices, each at most once
    std::vector<expr::Program> values;  ///< one per target
    expr::Program delay, priority;      ///< empty(): none
  };
  /// Replaces the model's events. Throws costate::Error (with `context`
  /// and the event's name or number) for a target out of range or given
  /// twice, a values/targets size mismatch, or a program that uses a
  /// variable the model does not have.
  void set_events(std::vector<Event> events, const std::string& context = "events");
  const std::vector<Event>& events() const { return events_; }

  /// Roots of every event's trigger, in event order (event k's relations
  /// from root_offset(k)).
  std::size_t n_roots() const { return root_offset_.empty() ? 0 : root_offset_.back(); }
  std::size_t n_events() const { return events_.size(); }
  std::size_t root_offset(std::size_t k) const { return root_offset_[k]; }
  /// g = the roots at (t, y, p) (T: double, ad::Dual<double, 8>).
  template <class T>
  void roots(T t, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    run_kernel(roots_kernel_, t, y, p, g);
  }
  EventAttributes event_attributes(std::size_t k) const { return events_[k].attributes; }
  /// Event k's trigger from the roots' sides alone (t, y, p unused).
  bool event_trigger(std::size_t k, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return events_[k].trigger.evaluate(sides, root_offset_[k]);
  }
  std::span<const std::size_t> event_targets(std::size_t k) const { return events_[k].targets; }
  /// The values event k assigns to its targets at (t, y, p).
  template <class T>
  void event_assign(std::size_t k, T t, std::span<const T> y, std::span<const T> p,
                    std::span<T> values) const {
    run_kernel(event_kernels_[k].values, t, y, p, values);
  }
  double event_delay(std::size_t k, double t, std::span<const double> y,
                     std::span<const double> p) const {
    return scalar(event_kernels_[k].delay, t, y, p);
  }
  /// The delay on Dual<double, 8> (derivatives through a delayed event).
  ad::Dual<double, 8> event_delay(std::size_t k, ad::Dual<double, 8> t,
                                  std::span<const ad::Dual<double, 8>> y,
                                  std::span<const ad::Dual<double, 8>> p) const {
    ad::Dual<double, 8> v(0.0);
    run_kernel(event_kernels_[k].delay, t, y, p,
               std::span<ad::Dual<double, 8>>(&v, event_kernels_[k].delay.n_outputs()));
    return v;
  }
  double event_priority(std::size_t k, double t, std::span<const double> y,
                        std::span<const double> p) const {
    return scalar(event_kernels_[k].priority, t, y, p);
  }

 private:
  template <class T>
  void run(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt, T* r) const {
    r[0] = T(t);
    for (std::size_t i = 0; i < y.size(); ++i) r[1 + i] = y[i];
    for (std::size_t j = 0; j < p.size(); ++j) r[1 + y.size() + j] = p[j];
    kernel_.evaluate(r, dydt);
  }

  /// kernel's outputs at inputs (t, y, p), on T = double or a Dual.
  template <class T>
  static void run_kernel(const expr::Kernel& kernel, T t, std::span<const T> y,
                         std::span<const T> p, std::span<T> out) {
    if (kernel.n_outputs() == 0) return;
    thread_local std::vector<T> registers;
    if (registers.size() < kernel.registers()) registers.resize(kernel.registers());
    T* r = registers.data();
    r[0] = t;
    for (std::size_t i = 0; i < y.size(); ++i) r[1 + i] = y[i];
    for (std::size_t j = 0; j < p.size(); ++j) r[1 + y.size() + j] = p[j];
    kernel.evaluate(r, out);
  }
  static double scalar(const expr::Kernel& kernel, double t, std::span<const double> y,
                       std::span<const double> p) {
    double v = 0.0;
    run_kernel(kernel, t, y, p, std::span<double>(&v, kernel.n_outputs()));
    return v;
  }

  struct EventKernels {
    expr::Kernel values, delay, priority;  // delay, priority: no output when absent
  };
  std::vector<Event> events_;
  std::vector<std::size_t> root_offset_;  // n_events() + 1 entries (empty: no events)
  expr::Kernel roots_kernel_;
  std::vector<EventKernels> event_kernels_;

  std::vector<std::string> states_, parameters_, variables_, intermediate_names_;
  std::vector<expr::Program> intermediates_;
  std::vector<expr::Program> equations_;
  expr::Kernel kernel_;
  expr::Kernel rows_;  // jacobian_rows(): never built for n + n_p > kRowLanes
  std::vector<std::size_t> algebraic_;  // DAEs: the algebraic states' indices
  void build_kernels(const std::string& context);
};

}  // namespace costate::ode
