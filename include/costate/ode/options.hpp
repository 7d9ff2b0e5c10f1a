#pragma once
/// \file
/// Integrator settings and results: ode::Method, ode::IntegratorOptions,
/// ode::Termination, ode::Summary, ode::Solution.
///
/// Input-file keys mirror the fields: `integrator.rtol` ↔
/// IntegratorOptions::rtol, `integrator.method` ↔ IntegratorOptions::method.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace costate::ode {

class History;

/// Time-stepping method.
enum class Method {
  ExplicitEuler,  ///< "euler": fixed step, order 1
  RK4,            ///< "rk4": classical Runge–Kutta, fixed step, order 4
  Dopri5,         ///< "dopri5": Dormand–Prince 5(4), adaptive, FSAL, 4th-order dense output
  BackwardEuler,  ///< "backward_euler": implicit θ-method, θ = 1, order 1, L-stable
  CrankNicolson,  ///< "crank_nicolson": implicit θ-method, θ = ½, order 2, A-stable
  Sdirk3,         ///< "sdirk3": L-stable SDIRK, order 3, embedded order 2, adaptive (fixed with adaptive: false)
  Bdf,            ///< "bdf": variable-order (1–5), variable-step BDF, adaptive only
  CvodesBdf,      ///< "cvodes_bdf": SUNDIALS CVODES, variable-order BDF (1–5), AD Jacobians
  CvodesAdams,    ///< "cvodes_adams": SUNDIALS CVODES, variable-order Adams–Moulton (1–12)
  Idas,           ///< "idas": SUNDIALS IDAS, variable-order BDF (1–5) on M y' = f(t, y, p);
                  ///< the integrator of DAEs (models with algebraic states, system.hpp)
};

std::string to_string(Method method);
/// Parses any name to_string returns ("euler", …, "sdirk3", "bdf"); the
/// error lists the valid names.
Method method_from_string(std::string_view name);
/// All methods, in declaration order.
std::span<const Method> all_methods();
/// Classical order of accuracy of the method's solution (bdf: its highest
/// order, 5).
int order(Method method);
/// True for the methods that adapt their step to rtol/atol.
bool is_adaptive(Method method);
/// True for implicit methods (Newton with AD Jacobians; need a model).
bool is_implicit(Method method);
/// θ of the implicit θ-methods.
double theta_of(Method method);
/// True for the SUNDIALS CVODES backends (cvodes_bdf, cvodes_adams).
bool is_cvodes(Method method);
/// True for the SUNDIALS IDAS backend (idas; idas.hpp).
bool is_idas(Method method);

/// Linear solver of CVODES' Newton iterations (integrator.method cvodes_*),
/// for the forward problem, its sensitivities and the backward (adjoint)
/// problem, whose Jacobian is −f_yᵀ. The Jacobian ∂f/∂y always comes from
/// costate's AD: dense by forward mode (⌈n/8⌉ evaluations); band and sparse
/// by the compressed (coloured) forward-mode Jacobian on the sparsity
/// pattern detected once at (t0, y0) (ad::detect_sparsity, ad::color_columns:
/// ⌈colours/8⌉ evaluations). The pattern must not change along the solution
/// (value-dependent branches that change which states an output reads);
/// a pattern that misses entries only slows Newton, the solution stays
/// within the tolerances.
enum class CvodesLinearSolver {
  Dense,      ///< "dense": SUNDenseMatrix + dense LU (O(n³) per factorisation)
  Band,       ///< "band": SUNBandMatrix, bandwidths of the detected pattern, band LU
  Sparse,     ///< "sparse": SUNSparseMatrix (CSC, the detected pattern) + SuiteSparse KLU
  Automatic,  ///< "automatic": dense below 20 states; above, band when the band holds
              ///< at most 4× the pattern's non-zeros, sparse when the pattern fills
              ///< at most 10% of the matrix or has at most 4 non-zeros per row on
              ///< average, dense otherwise
};
std::string to_string(CvodesLinearSolver solver);
/// Parses "dense" | "band" | "sparse" | "automatic"; the error lists the valid names.
CvodesLinearSolver cvodes_linear_solver_from_string(std::string_view name);
/// All values, in declaration order.
std::span<const CvodesLinearSolver> all_cvodes_linear_solvers();

/// What an integration loop does with a step it is about to accept
/// (IntegratorOptions::step_watch: the event driver's hook).
struct StepVerdict {
  enum class Kind {
    Accept,  ///< take the step and go on
    Stop,    ///< take the step and end the run there (final_time = its end)
    Retry,   ///< discard it and retake the step from the same start to end at `t`
  };
  Kind kind = Kind::Accept;
  double t = 0.0;  ///< Retry: the end of the retaken step (start < t < the discarded end)
};

/// Called with a step's start (t, x) and its end (t_new, x_new) before it is
/// accepted (x: the integrated state x = (y, z); for bdf, the current state).
using StepWatch = std::function<StepVerdict(double t, std::span<const double> x, double t_new,
                                            std::span<const double> x_new)>;

struct IntegratorOptions {
  Method method = Method::Dopri5;
  /// Relative tolerance of adaptive methods (> 0).
  double rtol = 1e-6;
  /// Scalar absolute tolerance (> 0), used when atol_per_state is empty.
  double atol = 1e-9;
  /// Per-state absolute tolerances (each > 0); overrides atol when given.
  /// On a distributed Vector: one per entry this rank owns.
  std::vector<double> atol_per_state{};
  /// Step size of fixed-step methods (> 0, required by euler/rk4; with
  /// dopri5 and adaptive = false the fixed step). For adaptive dopri5, the
  /// first step (0: chosen automatically, Hairer's initial-step heuristic).
  double dt = 0.0;
  /// Adaptive step control for dopri5 and sdirk3; false makes them fixed-step
/// methods (bdf is adaptive only).
  bool adaptive = true;
  /// Largest step an adaptive method may take (0: no limit but t1 − t0).
  double dt_max = 0.0;
  /// Steps smaller than this end the run with StepSizeUnderflow (0: only the
  /// round-off limit 16 ε |t|).
  double dt_min = 0.0;
  /// Adaptive methods shorten steps to land exactly on every output time
  /// (instead of interpolating there): what observations in an objective
  /// need, since the discrete adjoint differentiates the steps themselves.
  bool stop_at_outputs = false;
  /// Times every method's steps land on exactly besides t1 (ascending,
  /// finite; those outside (t0, t1) are ignored): an objective's
  /// observation times, and for fixed-step methods the output times, so
  /// that a run and the forward pass of its gradient take the same steps
  /// (io::integrator_options sets them for an input file). Not a setting:
  /// never written to output.
  std::vector<double> landing_times{};
  /// Newton of implicit methods: converged when the update is below this
  /// (max norm, relative to 1 + |y|); fails after newton_max_iterations.
  double newton_tol = 1e-12;
  int newton_max_iterations = 20;
  /// Accepted + rejected steps after which the run stops (MaxStepsReached).
  std::int64_t max_steps = 10'000'000;
  /// CVODES only: the Newton linear solver (see CvodesLinearSolver).
  CvodesLinearSolver cvodes_linear_solver = CvodesLinearSolver::Automatic;

  /// Called after each accepted step with the new time (progress reports).
  /// Not a setting: never written to output.
  std::function<void(double t)> on_step{};
  /// The event driver's hook (src/ode/events.cpp): every native loop (fixed
  /// steps, dopri5, sdirk3, bdf) asks it before accepting a step, and may
  /// be told to retake the step to a shorter end or to stop after it. Not a
  /// setting: never written to output.
  StepWatch step_watch{};

  /// Throws costate::Error naming the field, its value and the rule broken.
  /// `n_states` checks the length of atol_per_state.
  void validate(std::size_t n_states) const;
  /// True when the chosen method uses fixed steps.
  bool fixed_step() const;
  /// The first of landing_times after t, or t1 when none lies in (t, t1).
  double next_landing(double t, double t1) const;
};

/// Why integration ended.
enum class Termination {
  Success,            ///< reached t1
  MaxStepsReached,    ///< IntegratorOptions::max_steps exhausted
  StepSizeUnderflow,  ///< adaptive step fell below dt_min or round-off
  NonFiniteState,     ///< the state became NaN or infinite
  NonlinearSolverFailed,  ///< Newton of an implicit step did not converge
  BlowUp,  ///< fixed steps: the state grew faster than exponentially (a finite-time
           ///< blow-up, detail::BlowUpWatch); the run stops there
};
std::string to_string(Termination termination);

struct Summary {
  Termination termination = Termination::Success;
  /// Readable explanation, with time and step number when it failed.
  std::string message;
  Method method = Method::Dopri5;
  std::int64_t steps = 0;           ///< accepted steps
  std::int64_t rejected_steps = 0;  ///< steps rejected by the error control
  std::int64_t rhs_evaluations = 0;
  double final_time = 0.0;  ///< time the solution reached
  double last_step = 0.0;   ///< size of the last accepted step
  double wall_seconds = 0.0;
  /// Implicit methods: Jacobian evaluations (forward-mode AD), LU
  /// factorisations and Newton iterations.
  std::int64_t jacobian_evaluations = 0;
  std::int64_t factorizations = 0;
  std::int64_t newton_iterations = 0;
  /// Instants at which events fired (a model with events).
  std::int64_t events = 0;
  /// dopri5: the time from which Hairer's stiffness test held — the
  /// estimate h·‖k7 − k6‖/‖y7 − y6‖ of |hλ| above 3.25 on 15 consecutive
  /// tested steps (Dopri5::stiffness_estimate): the step size is held at
  /// the method's stability limit, not by its accuracy. NaN when it never held.
  double stiff_from = std::numeric_limits<double>::quiet_NaN();

  bool success() const { return termination == Termination::Success; }
  /// One-line report: "dopri5: success at t = 10 after 123 steps (4 rejected), 745 rhs evaluations".
  std::string brief_report() const;
};

/// The trajectory at the requested output times (row-major: state k of
/// output j is y[j * n_states + k]) and the summary. When integration
/// stopped early, only the outputs reached are present.
struct Solution {
  std::vector<double> t;
  std::vector<double> y;
  std::size_t n_states = 0;
  Summary summary;
  /// A delay differential equation's dense trajectory, what its delay()
  /// slots read (ode::integrate_with_delays, ode/history.hpp): the output
  /// symbols that read delays are evaluated from it. Null otherwise.
  std::shared_ptr<const History> history;

  std::size_t n_outputs() const { return t.size(); }
  std::span<const double> state(std::size_t j) const {
    return std::span<const double>(y).subspan(j * n_states, n_states);
  }
};

}  // namespace costate::ode
