// The SUNDIALS KINSOL backend of nonlinear::solve: Newton with KINSOL's
// line search, the Jacobian from the problem's callbacks (costate's AD)
// re-evaluated at every iterate (exact Newton). Dense Jacobians go to
// KINSOL's dense direct solver; sparse ones to GMRES right-preconditioned
// by an exact sparse LU of the same Jacobian (so GMRES converges in one
// iteration: Newton's step, without a sparse direct solver in KINSOL).
#include <kinsol/kinsol.h>
#include <kinsol/kinsol_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunlinsol/sunlinsol_spgmr.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <Eigen/SparseLU>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/nonlinear/detail/newton.hpp"

namespace costate::nonlinear::detail {
namespace {

struct Context {
  const Problem* problem = nullptr;
  std::exception_ptr error;  // a callback's exception, rethrown after KINSol
  std::vector<double> history;
  std::string last_error;
  Eigen::MatrixXd dense;
  Eigen::SparseMatrix<double> sparse;
  Eigen::SparseLU<Eigen::SparseMatrix<double>, Eigen::COLAMDOrdering<int>> lu;
  bool factored = false;
};

std::span<const double> view(N_Vector v) {
  return {N_VGetArrayPointer(v), static_cast<std::size_t>(N_VGetLength(v))};
}
std::span<double> view_mut(N_Vector v) {
  return {N_VGetArrayPointer(v), static_cast<std::size_t>(N_VGetLength(v))};
}

/// F; a non-finite value is a recoverable failure (KINSOL shortens the step).
int residual(N_Vector u, N_Vector f, void* data) {
  auto* c = static_cast<Context*>(data);
  try {
    c->problem->residual(view(u), view_mut(f));
  } catch (...) {
    c->error = std::current_exception();
    return -1;
  }
  for (double v : view(f))
    if (!std::isfinite(v)) return 1;
  return 0;
}

int dense_jacobian(N_Vector u, N_Vector fu, SUNMatrix j, void* data, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(data);
  c->history.push_back(norm2(view(fu)));
  try {
    c->problem->dense_jacobian(view(u), c->dense);
  } catch (...) {
    c->error = std::current_exception();
    return -1;
  }
  // SUNDenseMatrix stores column-major with leading dimension n, as Eigen.
  std::copy(c->dense.data(), c->dense.data() + c->dense.size(), SUNDenseMatrix_Data(j));
  return 0;
}

int preconditioner_setup(N_Vector u, N_Vector, N_Vector fu, N_Vector, void* data) {
  auto* c = static_cast<Context*>(data);
  c->history.push_back(norm2(view(fu)));
  try {
    c->problem->sparse_jacobian(view(u), c->sparse);
  } catch (...) {
    c->error = std::current_exception();
    return -1;
  }
  c->sparse.makeCompressed();
  if (!c->factored) c->lu.analyzePattern(c->sparse);  // the pattern never changes
  c->lu.factorize(c->sparse);
  c->factored = c->lu.info() == Eigen::Success;
  if (!c->factored) {
    c->last_error = "sparse LU of the Jacobian failed: " + c->lu.lastErrorMessage();
    return -1;
  }
  return 0;
}

int preconditioner_solve(N_Vector, N_Vector, N_Vector, N_Vector, N_Vector v, void* data) {
  auto* c = static_cast<Context*>(data);
  const auto n = static_cast<Eigen::Index>(N_VGetLength(v));
  Eigen::Map<Eigen::VectorXd> vv(N_VGetArrayPointer(v), n);
  vv = c->lu.solve(Eigen::VectorXd(vv)).eval();
  return 0;
}

int jacobian_times(N_Vector v, N_Vector jv, N_Vector, sunbooleantype* new_u, void* data) {
  auto* c = static_cast<Context*>(data);
  const auto n = static_cast<Eigen::Index>(N_VGetLength(v));
  // The Jacobian of the current iterate was formed by preconditioner_setup.
  Eigen::Map<Eigen::VectorXd>(N_VGetArrayPointer(jv), n) =
      c->sparse * Eigen::Map<const Eigen::VectorXd>(N_VGetArrayPointer(v), n);
  *new_u = SUNFALSE;
  return 0;
}

void error_handler(int, const char* module, const char* function, char* msg, void* data) {
  auto* c = static_cast<Context*>(data);
  c->last_error = std::string(module ? module : "") + "::" + (function ? function : "") + ": " +
                  (msg ? msg : "");
}

Termination termination_of(int flag) {
  switch (flag) {
    case KIN_SUCCESS:
    case KIN_INITIAL_GUESS_OK: return Termination::Converged;
    case KIN_MAXITER_REACHED: return Termination::MaxIterations;
    case KIN_LINESEARCH_NONCONV:
    case KIN_LINESEARCH_BCFAIL: return Termination::LineSearchFailed;
    case KIN_FIRST_SYSFUNC_ERR:
    case KIN_REPTD_SYSFUNC_ERR: return Termination::NonFiniteResidual;
    case KIN_LINSOLV_NO_RECOVERY:
    case KIN_LSETUP_FAIL:
    case KIN_LSOLVE_FAIL: return Termination::SingularJacobian;
    default: return Termination::BackendFailure;
  }
}

/// Frees the SUNDIALS objects however the solve ends.
struct Objects {
  SUNContext sunctx = nullptr;
  N_Vector u = nullptr, scale = nullptr;
  SUNMatrix j = nullptr;
  SUNLinearSolver ls = nullptr;
  void* kin = nullptr;
  ~Objects() {
    if (kin) KINFree(&kin);
    if (ls) SUNLinSolFree(ls);
    if (j) SUNMatDestroy(j);
    if (scale) N_VDestroy(scale);
    if (u) N_VDestroy(u);
    if (sunctx) SUNContext_Free(&sunctx);
  }
};

void check(int flag, const char* call) {
  COSTATE_CHECK(flag >= 0, "nonlinear::solve (kinsol backend): " << call << " failed with flag "
                                                                 << flag);
}

}  // namespace

Summary newton_kinsol(const Problem& problem, std::vector<double>& x, const Options& options) {
  const auto n = static_cast<sunindextype>(problem.n);
  Summary s;
  s.backend = Backend::Kinsol;
  Context ctx;
  ctx.problem = &problem;

  // The tolerance from ‖F(x0)‖₂ (KINSOL's own test is on the max norm: ask
  // for ‖F‖∞ ≤ tol/√n, which implies ‖F‖₂ ≤ tol).
  std::vector<double> r0(x.size());
  problem.residual(x, r0);
  const double f0 = norm2(r0);
  s.initial_residual_norm = f0;
  s.final_residual_norm = f0;
  if (!std::isfinite(f0)) {
    s.termination = Termination::NonFiniteResidual;
    s.message = "F(x0) is not finite";
    s.residual_history.push_back(f0);
    return s;
  }
  s.tolerance = std::max(options.atol, options.rtol * f0);

  Objects o;
  check(SUNContext_Create(nullptr, &o.sunctx), "SUNContext_Create");
  o.u = N_VNew_Serial(n, o.sunctx);
  o.scale = N_VNew_Serial(n, o.sunctx);
  COSTATE_CHECK(o.u && o.scale, "nonlinear::solve (kinsol backend): N_VNew_Serial failed");
  N_VConst(1.0, o.scale);
  std::copy(x.begin(), x.end(), N_VGetArrayPointer(o.u));
  o.kin = KINCreate(o.sunctx);
  COSTATE_CHECK(o.kin != nullptr, "nonlinear::solve (kinsol backend): KINCreate failed");
  check(KINInit(o.kin, residual, o.u), "KINInit");
  check(KINSetUserData(o.kin, &ctx), "KINSetUserData");
  check(KINSetErrHandlerFn(o.kin, error_handler, &ctx), "KINSetErrHandlerFn");
  check(KINSetFuncNormTol(o.kin, s.tolerance / std::sqrt(static_cast<double>(n))), "KINSetFuncNormTol");
  check(KINSetScaledStepTol(o.kin, std::numeric_limits<double>::min()), "KINSetScaledStepTol");
  check(KINSetNumMaxIters(o.kin, options.max_iterations), "KINSetNumMaxIters");
  check(KINSetMaxSetupCalls(o.kin, 1), "KINSetMaxSetupCalls");  // Jacobian at every iterate
  check(KINSetMaxNewtonStep(o.kin, 1e30), "KINSetMaxNewtonStep");  // no step-length cap
  if (problem.sparse) {
    o.ls = SUNLinSol_SPGMR(o.u, SUN_PREC_RIGHT, 5, o.sunctx);
    COSTATE_CHECK(o.ls != nullptr, "nonlinear::solve (kinsol backend): SUNLinSol_SPGMR failed");
    check(KINSetLinearSolver(o.kin, o.ls, nullptr), "KINSetLinearSolver");
    check(KINSetPreconditioner(o.kin, preconditioner_setup, preconditioner_solve), "KINSetPreconditioner");
    check(KINSetJacTimesVecFn(o.kin, jacobian_times), "KINSetJacTimesVecFn");
  } else {
    o.j = SUNDenseMatrix(n, n, o.sunctx);
    o.ls = SUNLinSol_Dense(o.u, o.j, o.sunctx);
    COSTATE_CHECK(o.j && o.ls, "nonlinear::solve (kinsol backend): dense matrix/solver creation failed");
    check(KINSetLinearSolver(o.kin, o.ls, o.j), "KINSetLinearSolver");
    check(KINSetJacFn(o.kin, dense_jacobian), "KINSetJacFn");
  }

  const int flag = KINSol(o.kin, o.u, KIN_LINESEARCH, o.scale, o.scale);
  if (ctx.error) std::rethrow_exception(ctx.error);
  const double* ua = N_VGetArrayPointer(o.u);
  std::copy(ua, ua + n, x.begin());
  long iterations = 0;
  KINGetNumNonlinSolvIters(o.kin, &iterations);
  s.iterations = static_cast<int>(iterations);
  long backtracks = 0;
  KINGetNumBacktrackOps(o.kin, &backtracks);
  s.backtracks = static_cast<int>(backtracks);
  double fnorm = 0.0;
  KINGetFuncNorm(o.kin, &fnorm);  // ‖F‖₂ at the returned iterate (unit scaling)
  s.final_residual_norm = flag == KIN_INITIAL_GUESS_OK ? f0 : fnorm;
  s.residual_history = std::move(ctx.history);
  if (s.residual_history.empty() || s.residual_history.front() != f0)
    s.residual_history.insert(s.residual_history.begin(), f0);
  if (s.residual_history.back() != s.final_residual_norm) s.residual_history.push_back(s.final_residual_norm);
  s.termination = termination_of(flag);
  if (s.termination == Termination::Converged && !(s.final_residual_norm <= s.tolerance))
    s.termination = Termination::BackendFailure;
  char* name = KINGetReturnFlagName(flag);
  s.message = std::string("KINSOL ") + (name ? name : "?");
  std::free(name);
  if (flag < 0 && !ctx.last_error.empty()) s.message += ": " + ctx.last_error;
  return s;
}

}  // namespace costate::nonlinear::detail
