// The SUNDIALS KINSOL backend of nonlinear::solve: Newton with KINSOL's
// line search, the Jacobian from the problem's callbacks (costate's AD)
// re-evaluated at every iterate (exact Newton). The linear solver is
// Options::kinsol_linear_solver: KINSOL's dense LU; SuiteSparse KLU on a
// SUNSparseMatrix in CSR form holding the AD Jacobian's pattern (the sparse
// default); or GMRES right-preconditioned by an exact Eigen sparse LU of the
// same Jacobian (GMRES then converges in one iteration: Newton's step).
#include <kinsol/kinsol.h>
#include <kinsol/kinsol_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunlinsol/sunlinsol_klu.h>
#include <sunlinsol/sunlinsol_spgmr.h>
#include <sunmatrix/sunmatrix_dense.h>
#include <sunmatrix/sunmatrix_sparse.h>

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
#include "sundials/dense_matrix.hpp"
#include "sundials/serial_vector.hpp"

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
  // KLU: the CSR structure of the SUNSparseMatrix (the AD pattern, or every
  // entry for a dense Jacobian); SUNMatZero clears it, so it is written at
  // every Jacobian evaluation.
  std::vector<sunindextype> csr_ptr, csr_idx;
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

/// The AD Jacobian at u, into c->dense or c->sparse (as the problem is).
bool evaluate_jacobian(Context* c, N_Vector u) {
  try {
    if (c->problem->sparse)
      c->problem->sparse_jacobian(view(u), c->sparse);
    else
      c->problem->dense_jacobian(view(u), c->dense);
  } catch (...) {
    c->error = std::current_exception();
    return false;
  }
  return true;
}

int dense_jacobian(N_Vector u, N_Vector fu, SUNMatrix j, void* data, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(data);
  c->history.push_back(norm2(view(fu)));
  if (!evaluate_jacobian(c, u)) return -1;
  // SUNDenseMatrix stores column-major with leading dimension n, as Eigen.
  if (c->problem->sparse) c->dense = Eigen::MatrixXd(c->sparse);
  std::copy(c->dense.data(), c->dense.data() + c->dense.size(), SUNDenseMatrix_Data(j));
  return 0;
}

int klu_jacobian(N_Vector u, N_Vector fu, SUNMatrix j, void* data, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(data);
  c->history.push_back(norm2(view(fu)));
  if (!evaluate_jacobian(c, u)) return -1;
  std::copy(c->csr_ptr.begin(), c->csr_ptr.end(), SUNSparseMatrix_IndexPointers(j));
  std::copy(c->csr_idx.begin(), c->csr_idx.end(), SUNSparseMatrix_IndexValues(j));
  double* values = SUNSparseMatrix_Data(j);
  if (c->problem->sparse) {
    // Row-major copy of a matrix with exactly the pattern's structure: its
    // values come in the pattern's CSR order.
    const Eigen::SparseMatrix<double, Eigen::RowMajor> rows = c->sparse;
    if (static_cast<std::size_t>(rows.nonZeros()) != c->csr_idx.size()) {
      c->last_error = "the Jacobian's structure differs from its sparsity pattern";
      return -1;
    }
    std::copy(rows.valuePtr(), rows.valuePtr() + rows.nonZeros(), values);
  } else {
    const auto n = c->dense.rows();
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index k = 0; k < n; ++k) values[i * n + k] = c->dense(i, k);
  }
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
  o.u = costate::detail::new_serial_vector(static_cast<std::size_t>(n), o.sunctx);
  o.scale = costate::detail::new_serial_vector(static_cast<std::size_t>(n), o.sunctx);
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
  KinsolLinearSolver solver = options.kinsol_linear_solver;
  if (solver == KinsolLinearSolver::Automatic)
    solver = problem.sparse ? KinsolLinearSolver::Klu : KinsolLinearSolver::Dense;
  COSTATE_CHECK(solver != KinsolLinearSolver::Gmres || problem.sparse,
                "nonlinear::solve (kinsol backend): Options::kinsol_linear_solver = gmres needs a "
                "sparse Jacobian (its preconditioner is a sparse LU); set Options::jacobian = "
                "sparse, or choose kinsol_linear_solver = dense or klu");
  if (solver == KinsolLinearSolver::Klu) {
    if (problem.sparse) {
      COSTATE_CHECK(problem.pattern != nullptr, "nonlinear: sparse KINSOL solve without a pattern");
      ctx.csr_ptr.assign(problem.pattern->row_ptr.begin(), problem.pattern->row_ptr.end());
      ctx.csr_idx.assign(problem.pattern->col_idx.begin(), problem.pattern->col_idx.end());
    } else {
      ctx.csr_ptr.resize(static_cast<std::size_t>(n) + 1);
      ctx.csr_idx.resize(static_cast<std::size_t>(n * n));
      for (sunindextype i = 0; i <= n; ++i) ctx.csr_ptr[static_cast<std::size_t>(i)] = i * n;
      for (sunindextype e = 0; e < n * n; ++e) ctx.csr_idx[static_cast<std::size_t>(e)] = e % n;
    }
    o.j = SUNSparseMatrix(n, n, static_cast<sunindextype>(ctx.csr_idx.size()), CSR_MAT, o.sunctx);
    COSTATE_CHECK(o.j != nullptr, "nonlinear::solve (kinsol backend): SUNSparseMatrix failed");
    o.ls = SUNLinSol_KLU(o.u, o.j, o.sunctx);
    COSTATE_CHECK(o.ls != nullptr, "nonlinear::solve (kinsol backend): SUNLinSol_KLU failed");
    check(KINSetLinearSolver(o.kin, o.ls, o.j), "KINSetLinearSolver");
    check(KINSetJacFn(o.kin, klu_jacobian), "KINSetJacFn");
  } else if (solver == KinsolLinearSolver::Gmres) {
    o.ls = SUNLinSol_SPGMR(o.u, SUN_PREC_RIGHT, 5, o.sunctx);
    COSTATE_CHECK(o.ls != nullptr, "nonlinear::solve (kinsol backend): SUNLinSol_SPGMR failed");
    check(KINSetLinearSolver(o.kin, o.ls, nullptr), "KINSetLinearSolver");
    check(KINSetPreconditioner(o.kin, preconditioner_setup, preconditioner_solve), "KINSetPreconditioner");
    check(KINSetJacTimesVecFn(o.kin, jacobian_times), "KINSetJacTimesVecFn");
  } else {
    o.j = costate::detail::new_dense_matrix(n, n, o.sunctx);
    o.ls = costate::detail::new_dense_solver(o.u, o.j, o.sunctx);
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
  s.message = std::string("KINSOL ") + (name ? name : "?") + " (" + to_string(solver) + ")";
  std::free(name);
  if (flag < 0 && !ctx.last_error.empty()) s.message += ": " + ctx.last_error;
  return s;
}

}  // namespace costate::nonlinear::detail
