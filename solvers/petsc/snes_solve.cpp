// The PETSc SNES backend of nonlinear::solve: Newton with line search
// (newtonls + bt), a direct linear solve (preonly + lu) by default, all
// overridable from the options database; residual and Jacobian from the
// problem's callbacks (costate's AD). Serial: PETSC_COMM_SELF.
#include <petscsnes.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <vector>

#include "costate/nonlinear/detail/newton.hpp"
#include "petsc/module.hpp"
#include "petsc/petsc_check.hpp"
#include "petsc/snes_reason.hpp"

namespace costate::nonlinear::detail {
namespace {

struct Context {
  const Problem* problem = nullptr;
  std::exception_ptr error;  // a callback's exception, rethrown after SNESSolve
  Eigen::MatrixXd dense;
  Eigen::SparseMatrix<double> sparse;
  std::vector<PetscInt> columns;  // scratch for MatSetValues
};

PetscErrorCode form_function(SNES snes, Vec x, Vec f, void* ctx) {
  auto* c = static_cast<Context*>(ctx);
  const PetscInt n = c->problem->n;
  const PetscScalar* xa = nullptr;
  PetscScalar* fa = nullptr;
  PetscCall(VecGetArrayRead(x, &xa));
  PetscCall(VecGetArray(f, &fa));
  bool failed = false;
  try {
    c->problem->residual(std::span<const double>(xa, static_cast<std::size_t>(n)),
                         std::span<double>(fa, static_cast<std::size_t>(n)));
  } catch (...) {
    c->error = std::current_exception();
    failed = true;
  }
  PetscCall(VecRestoreArray(f, &fa));
  PetscCall(VecRestoreArrayRead(x, &xa));
  // An exception stops SNES through a domain error (not a PETSc error, which
  // would print a traceback); it is rethrown after SNESSolve.
  if (failed) PetscCall(SNESSetFunctionDomainError(snes));
  return 0;
}

PetscErrorCode form_jacobian(SNES snes, Vec x, Mat j, Mat p, void* ctx) {
  (void)j;
  auto* c = static_cast<Context*>(ctx);
  const PetscInt n = c->problem->n;
  const PetscScalar* xa = nullptr;
  PetscCall(VecGetArrayRead(x, &xa));
  bool failed = false;
  try {
    const std::span<const double> xs(xa, static_cast<std::size_t>(n));
    if (c->problem->sparse)
      c->problem->sparse_jacobian(xs, c->sparse);
    else
      c->problem->dense_jacobian(xs, c->dense);
  } catch (...) {
    c->error = std::current_exception();
    failed = true;
  }
  PetscCall(VecRestoreArrayRead(x, &xa));
  if (failed) {
    PetscCall(SNESSetJacobianDomainError(snes));
    return 0;
  }
  if (c->problem->sparse) {
    const Eigen::SparseMatrix<double, Eigen::RowMajor> rows = c->sparse;
    PetscCall(MatZeroEntries(p));
    for (PetscInt i = 0; i < n; ++i) {
      const auto first = rows.outerIndexPtr()[i], last = rows.outerIndexPtr()[i + 1];
      c->columns.assign(rows.innerIndexPtr() + first, rows.innerIndexPtr() + last);
      PetscCall(MatSetValues(p, 1, &i, static_cast<PetscInt>(last - first), c->columns.data(),
                             rows.valuePtr() + first, INSERT_VALUES));
    }
  } else {
    PetscScalar* a = nullptr;  // column-major, leading dimension n (MATSEQDENSE)
    PetscCall(MatDenseGetArray(p, &a));
    std::copy(c->dense.data(), c->dense.data() + c->dense.size(), a);
    PetscCall(MatDenseRestoreArray(p, &a));
  }
  PetscCall(MatAssemblyBegin(p, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(p, MAT_FINAL_ASSEMBLY));
  return 0;
}

/// Destroys the PETSc objects however the solve ends.
struct Objects {
  SNES snes = nullptr;
  Vec x = nullptr, r = nullptr;
  Mat j = nullptr;
  ~Objects() {
    SNESDestroy(&snes);
    MatDestroy(&j);
    VecDestroy(&r);
    VecDestroy(&x);
  }
};

}  // namespace

namespace {

Summary newton_with_snes(const Problem& problem, std::vector<double>& x, const Options& options) {
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  COSTATE_CHECK(initialized, "nonlinear::solve (petsc_snes backend): PETSc is not initialised; "
                             "create a costate::Environment first");
  const PetscInt n = problem.n;
  Summary s;
  s.backend = Backend::PetscSnes;
  Context ctx;
  ctx.problem = &problem;
  Objects o;
  COSTATE_PETSC(VecCreateSeq(PETSC_COMM_SELF, n, &o.x));
  COSTATE_PETSC(VecDuplicate(o.x, &o.r));
  if (problem.sparse) {
    COSTATE_CHECK(problem.pattern != nullptr, "nonlinear: sparse SNES solve without a pattern");
    const auto& pat = *problem.pattern;
    const std::vector<PetscInt> ia(pat.row_ptr.begin(), pat.row_ptr.end());
    const std::vector<PetscInt> ja(pat.col_idx.begin(), pat.col_idx.end());
    COSTATE_PETSC(MatCreate(PETSC_COMM_SELF, &o.j));
    COSTATE_PETSC(MatSetSizes(o.j, n, n, n, n));
    COSTATE_PETSC(MatSetType(o.j, MATSEQAIJ));
    COSTATE_PETSC(MatSeqAIJSetPreallocationCSR(o.j, ia.data(), ja.data(), nullptr));
  } else {
    COSTATE_PETSC(MatCreateSeqDense(PETSC_COMM_SELF, n, n, nullptr, &o.j));
  }
  COSTATE_PETSC(SNESCreate(PETSC_COMM_SELF, &o.snes));
  COSTATE_PETSC(SNESSetFunction(o.snes, o.r, form_function, &ctx));
  COSTATE_PETSC(SNESSetJacobian(o.snes, o.j, o.j, form_jacobian, &ctx));
  COSTATE_PETSC(SNESSetType(o.snes, SNESNEWTONLS));
  SNESLineSearch ls;
  COSTATE_PETSC(SNESGetLineSearch(o.snes, &ls));
  COSTATE_PETSC(SNESLineSearchSetType(ls, SNESLINESEARCHBT));
  KSP ksp;
  PC pc;
  COSTATE_PETSC(SNESGetKSP(o.snes, &ksp));
  COSTATE_PETSC(KSPSetType(ksp, KSPPREONLY));
  COSTATE_PETSC(KSPGetPC(ksp, &pc));
  COSTATE_PETSC(PCSetType(pc, PCLU));
  // Same test as the native backend: |F| < atol or |F| < rtol |F(x0)|; no
  // step-length test.
  COSTATE_PETSC(SNESSetTolerances(o.snes, options.atol, options.rtol, 0.0,
                                  static_cast<PetscInt>(options.max_iterations),
                                  static_cast<PetscInt>(options.max_iterations) * 100 + 1000));
  std::vector<PetscReal> history(static_cast<std::size_t>(options.max_iterations) + 1, 0.0);
  COSTATE_PETSC(SNESSetConvergenceHistory(o.snes, history.data(), nullptr,
                                          static_cast<PetscInt>(history.size()), PETSC_TRUE));
  if (!options.options_prefix.empty())
    COSTATE_PETSC(SNESSetOptionsPrefix(o.snes, options.options_prefix.c_str()));
  if (options.use_options_database) COSTATE_PETSC(SNESSetFromOptions(o.snes));

  PetscScalar* xa = nullptr;
  COSTATE_PETSC(VecGetArray(o.x, &xa));
  std::copy(x.begin(), x.end(), xa);
  COSTATE_PETSC(VecRestoreArray(o.x, &xa));
  // A zero pivot in a dense LU is a PETSc error (not a PC failure as for
  // AIJ): catch it quietly (no traceback) and report a singular Jacobian.
  COSTATE_PETSC(PetscPushErrorHandler(PetscReturnErrorHandler, nullptr));
  const PetscErrorCode solve_error = SNESSolve(o.snes, nullptr, o.x);
  COSTATE_PETSC(PetscPopErrorHandler());
  if (ctx.error) std::rethrow_exception(ctx.error);
  const bool zero_pivot = solve_error == PETSC_ERR_MAT_LU_ZRPVT;
  if (!zero_pivot) COSTATE_PETSC(solve_error);

  const PetscScalar* xr = nullptr;
  COSTATE_PETSC(VecGetArrayRead(o.x, &xr));
  std::copy(xr, xr + n, x.begin());
  COSTATE_PETSC(VecRestoreArrayRead(o.x, &xr));
  summarize(o.snes, zero_pivot, options.atol, options.rtol, "", s);
  SNESType type = nullptr;
  COSTATE_PETSC(SNESGetType(o.snes, &type));
  if (type && std::string(type) != SNESNEWTONLS) s.message += std::string(" (type ") + type + ")";
  return s;
}

}  // namespace

}  // namespace costate::nonlinear::detail

namespace costate::detail {

// nonlinear::detail::newton_snes (libcostate, petsc/module.cpp) calls this
// through the PETSc module's table.
nonlinear::Summary snes_newton(const nonlinear::detail::Problem& problem, std::vector<double>& x,
                               const nonlinear::Options& options) {
  return nonlinear::detail::newton_with_snes(problem, x, options);
}

}  // namespace costate::detail
