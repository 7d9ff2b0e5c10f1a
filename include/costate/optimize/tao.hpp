#pragma once
/// \file
/// Bound-constrained minimisation with PETSc TAO:
///     min_x f(x)   subject to   lower ≤ x ≤ upper,
/// by a bounded quasi-Newton line search (`bqnls`, the default; `blmvm`) or a
/// bounded Newton–Krylov method (`bnls` line search, `bntr` trust region)
/// whose Hessian is the caller's matrix H(x) applied through a PETSc shell
/// matrix (for least squares the Gauss–Newton matrix JᵀWJ is the usual
/// choice: it is what costate's calibration passes).
///
///     auto r = optimize::minimize(
///         {.n = 2, .objective_and_gradient = fg, .hessian = gauss_newton},
///         x0, lower, upper, {.method = optimize::TaoMethod::Bntr, .gatol = 1e-10});
///     r.x; r.objective; r.termination; r.converged; r.iterations;
///
/// The options database overrides the settings: TaoSetFromOptions runs last,
/// so `-tao_type`, `-tao_gatol`, `-tao_max_it`, `-tao_ls_type`, … on the
/// command line of the program (read by PetscInitialize) win.
///
/// Non-finite values: when `objective_and_gradient` returns a non-finite
/// value or throws costate::Error (an ODE that blows up at a trial point), the
/// point is reported to TAO as f = +∞ with a zero gradient. TAO's Armijo line
/// search halves the step on such a value; its More–Thuente search (the
/// default of bqnls, blmvm, bnls) "assumes a domain violation" but in PETSc
/// 3.18 its interpolation then yields a NaN step and the search fails. So a
/// solve that stops with a line-search failure after meeting a non-finite
/// value is continued from its last iterate with the Armijo search, then with
/// the method's own search again (up to 6 stages; `stages` in the result).
/// If no shorter step helps, the failure is returned in the result (never
/// thrown). The starting point must have a finite objective (else
/// costate::Error).
///
/// Serial: PETSC_COMM_SELF (every MPI rank may call it independently).
/// Requires PETSc to be initialised (costate::Environment does it).

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace costate::optimize {

enum class TaoMethod { Bqnls, Blmvm, Bnls, Bntr };
std::string to_string(TaoMethod m);
/// Throws costate::Error listing the valid names.
TaoMethod tao_method_from_string(const std::string& name);
std::vector<TaoMethod> all_tao_methods();
/// True for the methods that use the Hessian (bnls, bntr).
bool uses_hessian(TaoMethod m);

/// Settings of a TAO solve (keys of the input file's calibration.optimizer).
struct TaoOptions {
  TaoMethod method = TaoMethod::Bqnls;
  /// Stop when ‖g‖ ≤ gatol, ‖g‖/|f| ≤ grtol or ‖g‖/‖g0‖ ≤ gttol (projected
  /// gradient; 0 disables a test).
  double gatol = 1e-8;
  double grtol = 1e-8;
  double gttol = 0.0;
  int max_iterations = 200;
  int max_function_evaluations = 2000;
  /// Prefix of this solve's options in the database ("" = plain -tao_*).
  std::string options_prefix{};
  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const;
};

/// The function to minimise. `objective_and_gradient(x, g)` returns f(x) and
/// writes ∇f(x) into g. `hessian(x, H)` (needed by bnls/bntr) writes a
/// symmetric n × n matrix, row-major, approximating ∇²f(x).
struct Objective {
  std::size_t n = 0;
  std::function<double(std::span<const double> x, std::span<double> g)> objective_and_gradient;
  std::function<void(std::span<const double> x, std::span<double> H)> hessian;
};

/// One line of the iteration history (TAO's monitor, once per iteration
/// including iteration 0).
struct Iteration {
  int iteration = 0;
  double objective = 0.0;
  /// TAO's residual (TaoGetSolutionStatus' gnorm): for the bound-constrained
  /// methods a merit norm of the projected gradient, not ‖∇f‖ — it can be
  /// 10 where ‖∇f‖ is 5e4.
  double gradient_norm = 0.0;
  /// ‖∇f(x_k)‖₂ at the iterate, from the objective_and_gradient call that
  /// evaluated it (NaN if TAO reports an iterate it never evaluated).
  double objective_gradient_norm = std::numeric_limits<double>::quiet_NaN();
};

struct TaoResult {
  std::vector<double> x;
  double objective = 0.0;
  double gradient_norm = 0.0;
  int iterations = 0;
  std::int64_t function_evaluations = 0;  ///< calls of objective_and_gradient
  std::int64_t gradient_evaluations = 0;  ///< the same calls (f and g come together)
  std::int64_t hessian_evaluations = 0;
  std::int64_t non_finite_evaluations = 0;  ///< trial points reported as f = +∞
  int stages = 0;  ///< TaoSolve calls (> 1 after a rescue from a non-finite value)
  std::string method;
  std::string termination;  ///< TAO's reason, e.g. "CONVERGED_GATOL", "DIVERGED_MAXITS"
  bool converged = false;
  std::vector<Iteration> history;
  double wall_seconds = 0.0;
  std::string brief_report() const;
};

/// See the file comment. `x0`, `lower`, `upper` have n entries (±infinity
/// for no bound); x0 must lie within the bounds. `monitor` (optional) is
/// called once per iteration.
TaoResult minimize(const Objective& f, std::span<const double> x0, std::span<const double> lower,
                   std::span<const double> upper, const TaoOptions& options = {},
                   const std::function<void(const Iteration&)>& monitor = {});

}  // namespace costate::optimize
