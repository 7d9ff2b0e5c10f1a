// optimize::minimize on PETSc TAO (serial, PETSC_COMM_SELF): objective and
// gradient from the caller, bounds, an optional Hessian applied through a
// shell matrix, a monitor that records the history; TaoSetFromOptions last so
// that -tao_* options override the settings.
#include <petsctao.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/optimize/tao.hpp"
#include "petsc/module.hpp"
#include "petsc/petsc_check.hpp"

namespace costate::optimize {


namespace {

struct Context {
  const Objective* f = nullptr;
  std::size_t n = 0;
  std::vector<double> hessian;  // n × n at the last Hessian evaluation
  TaoResult* result = nullptr;
  const std::function<void(const Iteration&)>* monitor = nullptr;
  std::exception_ptr error;  // a non-costate exception (a bug): rethrown after TaoSolve
  Progress* progress = nullptr;  // the optimizer's iterations on the progress line
  int iteration_offset = 0;  // iterations of earlier stages
  // The last few evaluated points and ‖∇f‖₂ there: the monitor looks its
  // iterate up (line searches and trust regions evaluate trial points the
  // iterate may or may not be).
  static constexpr std::size_t kRecent = 8;
  std::vector<std::pair<std::vector<double>, double>> recent;
  void remember(std::span<const double> x, std::span<const double> g) {
    double s = 0.0;
    for (double v : g) s += v * v;
    if (recent.size() == kRecent) recent.erase(recent.begin());
    recent.emplace_back(std::vector<double>(x.begin(), x.end()), std::sqrt(s));
  }
  double gradient_norm_at(std::span<const double> x) const {
    for (auto it = recent.rbegin(); it != recent.rend(); ++it)
      if (std::equal(x.begin(), x.end(), it->first.begin(), it->first.end())) return it->second;
    return std::numeric_limits<double>::quiet_NaN();
  }
};

PetscErrorCode objective_and_gradient(Tao, Vec x, PetscReal* f, Vec g, void* ctx) {
  auto* c = static_cast<Context*>(ctx);
  const PetscScalar* xa = nullptr;
  PetscScalar* ga = nullptr;
  PetscCall(VecGetArrayRead(x, &xa));
  PetscCall(VecGetArray(g, &ga));
  double value = std::numeric_limits<double>::infinity();
  ++c->result->function_evaluations;
  ++c->result->gradient_evaluations;
  try {
    value = c->f->objective_and_gradient(std::span<const double>(xa, c->n), std::span<double>(ga, c->n));
  } catch (const Error&) {
    // A trial point where the model cannot be evaluated (e.g. the ODE blows
    // up): not an error of the solve, a point TAO must step back from.
    value = std::numeric_limits<double>::infinity();
  } catch (...) {
    c->error = std::current_exception();
    value = std::numeric_limits<double>::infinity();
  }
  bool finite = std::isfinite(value);
  for (std::size_t i = 0; finite && i < c->n; ++i) finite = std::isfinite(ga[i]);
  if (!finite) {
    // +∞ with a zero gradient: the line search sees an infinite trial value
    // and shortens the step.
    ++c->result->non_finite_evaluations;
    value = PETSC_INFINITY;
    std::fill(ga, ga + c->n, 0.0);
  } else {
    c->remember(std::span<const double>(xa, c->n), std::span<const double>(ga, c->n));
  }
  PetscCall(VecRestoreArray(g, &ga));
  PetscCall(VecRestoreArrayRead(x, &xa));
  *f = value;
  return 0;
}

PetscErrorCode hessian(Tao, Vec x, Mat, Mat, void* ctx) {
  auto* c = static_cast<Context*>(ctx);
  const PetscScalar* xa = nullptr;
  PetscCall(VecGetArrayRead(x, &xa));
  ++c->result->hessian_evaluations;
  try {
    c->f->hessian(std::span<const double>(xa, c->n), std::span<double>(c->hessian));
  } catch (...) {
    // Without a Hessian at this point, fall back to the identity (a gradient
    // step); the line search or trust region then decides.
    std::fill(c->hessian.begin(), c->hessian.end(), 0.0);
    for (std::size_t i = 0; i < c->n; ++i) c->hessian[i * c->n + i] = 1.0;
  }
  PetscCall(VecRestoreArrayRead(x, &xa));
  return 0;
}

PetscErrorCode hessian_mult(Mat H, Vec v, Vec out) {
  Context* c = nullptr;
  PetscCall(MatShellGetContext(H, &c));
  const PetscScalar* va = nullptr;
  PetscScalar* oa = nullptr;
  PetscCall(VecGetArrayRead(v, &va));
  PetscCall(VecGetArray(out, &oa));
  for (std::size_t i = 0; i < c->n; ++i) {
    double s = 0.0;
    for (std::size_t j = 0; j < c->n; ++j) s += c->hessian[i * c->n + j] * va[j];
    oa[i] = s;
  }
  PetscCall(VecRestoreArray(out, &oa));
  PetscCall(VecRestoreArrayRead(v, &va));
  return 0;
}

PetscErrorCode monitor(Tao tao, void* ctx) {
  auto* c = static_cast<Context*>(ctx);
  PetscInt its = 0;
  PetscReal f = 0, gnorm = 0, cnorm = 0, xdiff = 0;
  TaoConvergedReason reason;
  PetscCall(TaoGetSolutionStatus(tao, &its, &f, &gnorm, &cnorm, &xdiff, &reason));
  Iteration it{c->iteration_offset + static_cast<int>(its), f, gnorm};
  Vec x = nullptr;
  PetscCall(TaoGetSolution(tao, &x));
  const PetscScalar* xa = nullptr;
  PetscCall(VecGetArrayRead(x, &xa));
  it.objective_gradient_norm = c->gradient_norm_at(std::span<const double>(xa, c->n));
  PetscCall(VecRestoreArrayRead(x, &xa));
  if (c->progress) {
    std::ostringstream note;
    note.precision(8);
    note << "f = " << f << ", |grad J| = "
         << (std::isfinite(it.objective_gradient_norm) ? it.objective_gradient_norm : gnorm);
    c->progress->update(static_cast<double>(it.iteration), note.str());
  }
  // bntr reports iteration 0 twice (before and after choosing its initial
  // trust radius): the history keeps the last report of each iteration.
  auto& h = c->result->history;
  if (!h.empty() && h.back().iteration == it.iteration) h.back() = it;
  else h.push_back(it);
  if (c->monitor && *c->monitor) {
    try {
      (*c->monitor)(it);
    } catch (...) {
      // Stop at this iteration (e.g. an interrupt); rethrown after TaoSolve.
      c->error = std::current_exception();
      PetscCall(TaoSetConvergedReason(tao, TAO_DIVERGED_USER));
    }
  }
  return 0;
}

/// Owns the PETSc objects of one solve.
struct Objects {
  Tao tao = nullptr;
  Vec x = nullptr, lo = nullptr, hi = nullptr;
  Mat H = nullptr;
  ~Objects() {
    if (H) MatDestroy(&H);
    if (hi) VecDestroy(&hi);
    if (lo) VecDestroy(&lo);
    if (x) VecDestroy(&x);
    if (tao) TaoDestroy(&tao);
  }
};

void fill(Vec v, std::span<const double> values) {
  PetscScalar* a = nullptr;
  COSTATE_PETSC(VecGetArray(v, &a));
  std::copy(values.begin(), values.end(), a);
  COSTATE_PETSC(VecRestoreArray(v, &a));
}

}  // namespace

namespace {

/// One TaoSolve from x (updated in place). `rescue`: the Armijo line search
/// (it halves the step on a non-finite value) instead of the method's own.
/// Returns TAO's reason; adds iterations and history to `result`.
TaoConvergedReason solve_stage(const Objective& f, std::vector<double>& x,
                               std::span<const double> lower, std::span<const double> upper,
                               const TaoOptions& options, int max_iterations, bool rescue,
                               Context& ctx, TaoResult& result) {
  const std::size_t n = f.n;
  const auto N = static_cast<PetscInt>(n);
  Objects o;
  COSTATE_PETSC(TaoCreate(PETSC_COMM_SELF, &o.tao));
  COSTATE_PETSC(TaoSetType(o.tao, to_string(options.method).c_str()));
  if (!options.options_prefix.empty())
    COSTATE_PETSC(TaoSetOptionsPrefix(o.tao, options.options_prefix.c_str()));
  COSTATE_PETSC(VecCreateSeq(PETSC_COMM_SELF, N, &o.x));
  COSTATE_PETSC(VecDuplicate(o.x, &o.lo));
  COSTATE_PETSC(VecDuplicate(o.x, &o.hi));
  fill(o.x, x);
  // TAO's "no bound" is ±PETSC_INFINITY.
  std::vector<double> lo(lower.begin(), lower.end()), hi(upper.begin(), upper.end());
  for (double& v : lo) v = std::isfinite(v) ? v : PETSC_NINFINITY;
  for (double& v : hi) v = std::isfinite(v) ? v : PETSC_INFINITY;
  fill(o.lo, lo);
  fill(o.hi, hi);
  COSTATE_PETSC(TaoSetSolution(o.tao, o.x));
  COSTATE_PETSC(TaoSetVariableBounds(o.tao, o.lo, o.hi));
  COSTATE_PETSC(TaoSetObjectiveAndGradient(o.tao, nullptr, objective_and_gradient, &ctx));
  if (f.hessian) {
    COSTATE_PETSC(MatCreateShell(PETSC_COMM_SELF, N, N, N, N, &ctx, &o.H));
    COSTATE_PETSC(MatShellSetOperation(o.H, MATOP_MULT, reinterpret_cast<void (*)(void)>(hessian_mult)));
    COSTATE_PETSC(MatSetOption(o.H, MAT_SYMMETRIC, PETSC_TRUE));
    COSTATE_PETSC(TaoSetHessian(o.tao, o.H, o.H, hessian, &ctx));
  }
  COSTATE_PETSC(TaoSetTolerances(o.tao, options.gatol, options.grtol, options.gttol));
  COSTATE_PETSC(TaoSetMaximumIterations(o.tao, max_iterations));
  COSTATE_PETSC(TaoSetMaximumFunctionEvaluations(
      o.tao, std::max<PetscInt>(1, options.max_function_evaluations -
                                       static_cast<PetscInt>(result.function_evaluations))));
  COSTATE_PETSC(TaoSetMonitor(o.tao, monitor, &ctx, nullptr));
  COSTATE_PETSC(TaoSetFromOptions(o.tao));
  if (rescue) {
    TaoLineSearch ls = nullptr;
    COSTATE_PETSC(TaoGetLineSearch(o.tao, &ls));
    if (ls) COSTATE_PETSC(TaoLineSearchSetType(ls, TAOLINESEARCHARMIJO));
  }
  COSTATE_PETSC(TaoSolve(o.tao));
  if (ctx.error) std::rethrow_exception(ctx.error);

  TaoConvergedReason reason;
  PetscInt its = 0;
  PetscReal fval = 0, gnorm = 0, cnorm = 0, xdiff = 0;
  COSTATE_PETSC(TaoGetSolutionStatus(o.tao, &its, &fval, &gnorm, &cnorm, &xdiff, &reason));
  Vec xs = nullptr;
  COSTATE_PETSC(TaoGetSolution(o.tao, &xs));
  const PetscScalar* xa = nullptr;
  COSTATE_PETSC(VecGetArrayRead(xs, &xa));
  x.assign(xa, xa + n);
  COSTATE_PETSC(VecRestoreArrayRead(xs, &xa));
  TaoType type = nullptr;
  COSTATE_PETSC(TaoGetType(o.tao, &type));
  if (type) result.method = type;
  result.iterations += static_cast<int>(its);
  result.objective = fval;
  result.gradient_norm = gnorm;
  return reason;
}

}  // namespace

namespace {

TaoResult minimize_with_tao(const Objective& f, std::span<const double> x0,
                            std::span<const double> lower, std::span<const double> upper,
                            const TaoOptions& options,
                            const std::function<void(const Iteration&)>& monitor_fn) {
  const auto start = std::chrono::steady_clock::now();
  options.validate();
  const std::size_t n = f.n;
  COSTATE_CHECK(n > 0, "optimize::minimize: no variables");
  COSTATE_CHECK(f.objective_and_gradient, "optimize::minimize: no objective_and_gradient");
  COSTATE_CHECK(x0.size() == n && lower.size() == n && upper.size() == n,
                "optimize::minimize: x0, lower and upper need " << n << " entries");
  COSTATE_CHECK(!uses_hessian(options.method) || f.hessian,
                "optimize::minimize: method " << to_string(options.method) << " needs a Hessian");
  for (std::size_t i = 0; i < n; ++i)
    COSTATE_CHECK(lower[i] <= x0[i] && x0[i] <= upper[i],
                  "optimize::minimize: x0[" << i << "] = " << x0[i] << " lies outside its bounds ["
                                            << lower[i] << ", " << upper[i] << "]");
  // The starting point must be a point where the model can be evaluated.
  {
    std::vector<double> g(n);
    const double f0 = f.objective_and_gradient(x0, g);
    COSTATE_CHECK(std::isfinite(f0), "optimize::minimize: the objective at the starting point is "
                                         << f0 << " (not finite)");
  }
  TaoResult result;
  result.method = to_string(options.method);
  Context ctx;
  ctx.f = &f;
  ctx.n = n;
  ctx.result = &result;
  ctx.monitor = &monitor_fn;
  Progress progress("TAO iteration", static_cast<double>(options.max_iterations));
  ctx.progress = &progress;
  ctx.hessian.assign(n * n, 0.0);

  // Stages: the method's own line search (More–Thuente for the line-search
  // methods). PETSc 3.18's More–Thuente turns an infinite trial value into a
  // NaN step and fails; when a stage ends in a line-search failure after
  // meeting a non-finite value, the next stage continues from the last
  // iterate with the Armijo line search, which halves the step on a
  // non-finite value — then the method's own search again (it finishes
  // better: Armijo alone stalls near a minimum).
  constexpr int kMaxStages = 6;
  std::vector<double> x(x0.begin(), x0.end());
  TaoConvergedReason reason = TAO_CONTINUE_ITERATING;
  bool rescue = false;
  for (int stage = 0; stage < kMaxStages; ++stage) {
    const std::int64_t non_finite_before = result.non_finite_evaluations;
    const int remaining = options.max_iterations - result.iterations;
    ctx.iteration_offset = result.iterations;
    reason = solve_stage(f, x, lower, upper, options, std::max(remaining, 0), rescue, ctx, result);
    ++result.stages;
    const bool ls_failed = reason == TAO_DIVERGED_LS_FAILURE || reason == TAO_DIVERGED_NAN;
    const bool met_wall = result.non_finite_evaluations > non_finite_before;
    if (reason > 0 || !ls_failed || result.iterations >= options.max_iterations) break;
    if (!rescue && !met_wall) break;  // an ordinary line-search failure
    rescue = !rescue;
  }
  result.x = x;
  result.converged = reason > 0;
  std::string text = TaoConvergedReasons[reason];
  if (text.rfind("TAO_", 0) == 0) text = text.substr(4);
  result.termination = text;
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

}  // namespace costate::optimize

namespace costate::detail {

// optimize::minimize (libcostate, petsc/module.cpp) calls this through the
// PETSc module's table.
optimize::TaoResult tao_minimize(const optimize::Objective& f, std::span<const double> x0,
                                 std::span<const double> lower, std::span<const double> upper,
                                 const optimize::TaoOptions& options,
                                 const std::function<void(const optimize::Iteration&)>& monitor) {
  return optimize::minimize_with_tao(f, x0, lower, upper, options, monitor);
}

}  // namespace costate::detail
