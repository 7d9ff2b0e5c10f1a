// The distributed nonlinear::solve on PETSc (include/costate/nonlinear/
// distributed.hpp): ghosted vectors (VecCreateGhost) for the owned +
// ghost entries the local residual reads, a parallel AIJ Jacobian
// preallocated from the local pattern with global column indices, SNES
// newtonls/bt, and the SNES's KSP reused with ∂F/∂x at the solution for the
// tangent (KSPSolve) and adjoint (KSPSolveTranspose) solves.
#include <petscsnes.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "costate/nonlinear/distributed.hpp"
#include "petsc/petsc_check.hpp"
#include "petsc/snes_reason.hpp"

namespace costate::nonlinear::detail {
namespace {

/// Collective validation of a layout: every rank throws if one rank's part
/// is malformed (instead of deadlocking in the next collective call).
void check_layout(const DistributedLayout& l) {
  std::ostringstream problem;
  if (l.global_size <= 0 || l.global_size >= std::int64_t{PETSC_MAX_INT}) {
    problem << "global_size = " << l.global_size << " must lie in [1, " << PETSC_MAX_INT << ")";
  } else if (l.owned <= 0) {
    problem << "owned = " << l.owned << ": every rank must own at least one unknown";
  } else if (l.first < 0 || l.first + l.owned > l.global_size) {
    problem << "the owned block [" << l.first << ", " << l.first + l.owned << ") lies outside [0, "
            << l.global_size << ")";
  } else {
    std::vector<std::int64_t> g = l.ghosts;
    std::sort(g.begin(), g.end());
    for (std::size_t k = 0; k < l.ghosts.size() && problem.tellp() == 0; ++k) {
      const std::int64_t j = l.ghosts[k];
      if (j < 0 || j >= l.global_size)
        problem << "ghosts[" << k << "] = " << j << " lies outside [0, " << l.global_size << ")";
      else if (j >= l.first && j < l.first + l.owned)
        problem << "ghosts[" << k << "] = " << j << " is owned by this rank (its block is [" << l.first
                << ", " << l.first + l.owned << ")); list only unknowns owned elsewhere";
    }
    for (std::size_t k = 1; k < g.size() && problem.tellp() == 0; ++k)
      if (g[k] == g[k - 1]) problem << "ghost " << g[k] << " is listed twice";
  }
  long long local = l.owned, before = 0, total = 0;
  MPI_Exscan(&local, &before, 1, MPI_LONG_LONG, MPI_SUM, l.comm);
  int rank = 0;
  MPI_Comm_rank(l.comm, &rank);
  if (rank == 0) before = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG_LONG, MPI_SUM, l.comm);
  if (problem.tellp() == 0 && before != l.first)
    problem << "first = " << l.first << " but the ranks before own " << before
            << " unknowns (blocks must be contiguous, in rank order)";
  if (problem.tellp() == 0 && total != l.global_size)
    problem << "the ranks own " << total << " unknowns in all but global_size = " << l.global_size;
  const bool bad = problem.tellp() != 0;
  int bad_local = bad ? 1 : 0, bad_any = 0;
  MPI_Allreduce(&bad_local, &bad_any, 1, MPI_INT, MPI_LOR, l.comm);
  if (bad)
    throw Error("nonlinear::solve (distributed): malformed DistributedLayout on rank " +
                std::to_string(rank) + ": " + problem.str());
  if (bad_any)
    throw Error("nonlinear::solve (distributed): another rank reported a malformed "
                "DistributedLayout (see its error); this rank's part is fine");
}

}  // namespace

struct DistributedSnes::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  PetscInt first = 0, owned = 0, global = 0;
  std::vector<PetscInt> ghosts;
  Options options;
  // Jacobian rows: for each local entry in sorted-global-column order, the
  // index of its value in the local pattern's CSR order.
  std::vector<PetscInt> row_ptr, columns;
  std::vector<std::size_t> value_of_slot;
  std::vector<PetscScalar> row_values;
  std::vector<double> values;  // scratch: the callback's values
  std::int64_t global_nnz = 0;

  Vec xg = nullptr;  // ghosted: owned + ghost entries
  Vec x = nullptr, r = nullptr, b = nullptr, y = nullptr;
  Mat j = nullptr;
  SNES snes = nullptr;
  std::string description;

  const DistributedCallbacks* callbacks = nullptr;
  std::exception_ptr error;

  ~Impl() {
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;  // a tape released after PetscFinalize: leak instead of crashing
    SNESDestroy(&snes);
    MatDestroy(&j);
    VecDestroy(&y);
    VecDestroy(&b);
    VecDestroy(&r);
    VecDestroy(&x);
    VecDestroy(&xg);
  }

  /// The extended local vector of the global vector v (ghost exchange),
  /// read in place through `use`.
  template <class Use>
  PetscErrorCode with_extended(Vec v, Use&& use) {
    PetscCall(VecCopy(v, xg));
    PetscCall(VecGhostUpdateBegin(xg, INSERT_VALUES, SCATTER_FORWARD));
    PetscCall(VecGhostUpdateEnd(xg, INSERT_VALUES, SCATTER_FORWARD));
    Vec local;
    PetscCall(VecGhostGetLocalForm(xg, &local));
    const PetscScalar* a = nullptr;
    PetscCall(VecGetArrayRead(local, &a));
    use(std::span<const double>(a, static_cast<std::size_t>(owned) + ghosts.size()));
    PetscCall(VecRestoreArrayRead(local, &a));
    PetscCall(VecGhostRestoreLocalForm(xg, &local));
    return 0;
  }

  /// Writes `values` (local pattern order) into the Jacobian and assembles it.
  PetscErrorCode assemble(std::span<const double> vals) {
    for (PetscInt i = 0; i < owned; ++i) {
      const PetscInt a = row_ptr[static_cast<std::size_t>(i)], e = row_ptr[static_cast<std::size_t>(i) + 1];
      row_values.resize(static_cast<std::size_t>(e - a));
      for (PetscInt k = a; k < e; ++k)
        row_values[static_cast<std::size_t>(k - a)] = vals[value_of_slot[static_cast<std::size_t>(k)]];
      const PetscInt row = first + i;
      PetscCall(MatSetValues(j, 1, &row, e - a, columns.data() + a, row_values.data(), INSERT_VALUES));
    }
    PetscCall(MatAssemblyBegin(j, MAT_FINAL_ASSEMBLY));
    PetscCall(MatAssemblyEnd(j, MAT_FINAL_ASSEMBLY));
    return 0;
  }
};

namespace {

PetscErrorCode form_function(SNES, Vec x, Vec f, void* ctx) {
  auto* im = static_cast<DistributedSnes::Impl*>(ctx);
  PetscScalar* fa = nullptr;
  PetscCall(VecGetArray(f, &fa));
  const std::span<double> r(fa, static_cast<std::size_t>(im->owned));
  PetscCall(im->with_extended(x, [&](std::span<const double> xe) {
    try {
      im->callbacks->residual(xe, r);
    } catch (...) {
      // NaN makes the GLOBAL norm NaN: every rank's SNES stops together
      // (a domain error would stop only this rank's); rethrown afterwards.
      if (!im->error) im->error = std::current_exception();
      std::fill(r.begin(), r.end(), std::numeric_limits<double>::quiet_NaN());
    }
  }));
  PetscCall(VecRestoreArray(f, &fa));
  return 0;
}

PetscErrorCode form_jacobian(SNES, Vec x, Mat, Mat, void* ctx) {
  auto* im = static_cast<DistributedSnes::Impl*>(ctx);
  PetscCall(im->with_extended(x, [&](std::span<const double> xe) {
    try {
      im->callbacks->jacobian(xe, im->values);
    } catch (...) {
      if (!im->error) im->error = std::current_exception();
      std::fill(im->values.begin(), im->values.end(), std::numeric_limits<double>::quiet_NaN());
    }
  }));
  PetscCall(im->assemble(im->values));
  return 0;
}

}  // namespace

DistributedSnes::DistributedSnes(const DistributedLayout& layout, const Options& options)
    : impl_(std::make_unique<Impl>()) {
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  COSTATE_CHECK(initialized, "nonlinear::solve (distributed): PETSc is not initialised; create a "
                             "costate::Environment first");
  check_layout(layout);
  Impl& im = *impl_;
  im.comm = layout.comm;
  MPI_Comm_rank(im.comm, &im.rank);
  MPI_Comm_size(im.comm, &im.size);
  im.first = static_cast<PetscInt>(layout.first);
  im.owned = static_cast<PetscInt>(layout.owned);
  im.global = static_cast<PetscInt>(layout.global_size);
  im.ghosts.assign(layout.ghosts.begin(), layout.ghosts.end());
  im.options = options;
  COSTATE_PETSC(VecCreateGhost(im.comm, im.owned, im.global, static_cast<PetscInt>(im.ghosts.size()),
                               im.ghosts.data(), &im.xg));
  COSTATE_PETSC(VecCreateMPI(im.comm, im.owned, im.global, &im.x));
  COSTATE_PETSC(VecDuplicate(im.x, &im.r));
  COSTATE_PETSC(VecDuplicate(im.x, &im.b));
  COSTATE_PETSC(VecDuplicate(im.x, &im.y));
}

DistributedSnes::~DistributedSnes() = default;

std::vector<double> DistributedSnes::extend(std::span<const double> x_local) const {
  Impl& im = *impl_;
  COSTATE_CHECK_EQ(x_local.size(), static_cast<std::size_t>(im.owned),
                   "nonlinear::solve (distributed): extend needs the owned entries");
  PetscScalar* a = nullptr;
  COSTATE_PETSC(VecGetArray(im.x, &a));
  std::copy(x_local.begin(), x_local.end(), a);
  COSTATE_PETSC(VecRestoreArray(im.x, &a));
  std::vector<double> out;
  COSTATE_PETSC(im.with_extended(im.x, [&](std::span<const double> xe) { out.assign(xe.begin(), xe.end()); }));
  return out;
}

void DistributedSnes::set_pattern(const ad::SparsityPattern& pattern) {
  Impl& im = *impl_;
  const std::size_t nl = static_cast<std::size_t>(im.owned);
  COSTATE_CHECK(pattern.rows == im.owned &&
                    static_cast<std::size_t>(pattern.cols) == nl + im.ghosts.size(),
                "nonlinear::solve (distributed): the local Jacobian pattern is "
                    << pattern.rows << " x " << pattern.cols << ", expected owned x (owned + ghosts) = "
                    << nl << " x " << nl + im.ghosts.size());
  // Global column of each extended column; each row's entries sorted by it.
  auto global_of = [&](int e) {
    return static_cast<std::size_t>(e) < nl ? im.first + e
                                           : im.ghosts[static_cast<std::size_t>(e) - nl];
  };
  im.row_ptr.assign(pattern.row_ptr.begin(), pattern.row_ptr.end());
  im.columns.resize(pattern.col_idx.size());
  im.value_of_slot.resize(pattern.col_idx.size());
  for (std::size_t i = 0; i < nl; ++i) {
    const auto a = static_cast<std::size_t>(pattern.row_ptr[i]);
    const auto e = static_cast<std::size_t>(pattern.row_ptr[i + 1]);
    std::iota(im.value_of_slot.begin() + static_cast<std::ptrdiff_t>(a),
              im.value_of_slot.begin() + static_cast<std::ptrdiff_t>(e), a);
    std::sort(im.value_of_slot.begin() + static_cast<std::ptrdiff_t>(a),
              im.value_of_slot.begin() + static_cast<std::ptrdiff_t>(e), [&](std::size_t p, std::size_t q) {
                return global_of(pattern.col_idx[p]) < global_of(pattern.col_idx[q]);
              });
    for (std::size_t k = a; k < e; ++k) im.columns[k] = global_of(pattern.col_idx[im.value_of_slot[k]]);
  }
  im.values.assign(pattern.col_idx.size(), 0.0);
  long long nnz = static_cast<long long>(pattern.col_idx.size()), total = 0;
  MPI_Allreduce(&nnz, &total, 1, MPI_LONG_LONG, MPI_SUM, im.comm);
  im.global_nnz = total;

  COSTATE_PETSC(MatCreate(im.comm, &im.j));
  COSTATE_PETSC(MatSetSizes(im.j, im.owned, im.owned, im.global, im.global));
  COSTATE_PETSC(MatSetType(im.j, MATAIJ));
  COSTATE_PETSC(MatSeqAIJSetPreallocationCSR(im.j, im.row_ptr.data(), im.columns.data(), nullptr));
  COSTATE_PETSC(MatMPIAIJSetPreallocationCSR(im.j, im.row_ptr.data(), im.columns.data(), nullptr));
  COSTATE_PETSC(MatSetOption(im.j, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));

  const Options& o = im.options;
  COSTATE_PETSC(SNESCreate(im.comm, &im.snes));
  COSTATE_PETSC(SNESSetFunction(im.snes, im.r, form_function, &im));
  COSTATE_PETSC(SNESSetJacobian(im.snes, im.j, im.j, form_jacobian, &im));
  COSTATE_PETSC(SNESSetType(im.snes, SNESNEWTONLS));
  SNESLineSearch ls;
  COSTATE_PETSC(SNESGetLineSearch(im.snes, &ls));
  COSTATE_PETSC(SNESLineSearchSetType(ls, SNESLINESEARCHBT));
  KSP ksp;
  PC pc;
  COSTATE_PETSC(SNESGetKSP(im.snes, &ksp));
  COSTATE_PETSC(KSPGetPC(ksp, &pc));
#if defined(PETSC_HAVE_MUMPS)
  const bool direct = true;
#else
  const bool direct = im.size == 1;
#endif
  if (direct) {
    COSTATE_PETSC(KSPSetType(ksp, KSPPREONLY));
    COSTATE_PETSC(PCSetType(pc, PCLU));
#if defined(PETSC_HAVE_MUMPS)
    if (im.size > 1) COSTATE_PETSC(PCFactorSetMatSolverType(pc, MATSOLVERMUMPS));
#endif
  } else {
    COSTATE_PETSC(KSPSetType(ksp, KSPGMRES));
    COSTATE_PETSC(PCSetType(pc, PCBJACOBI));
    COSTATE_PETSC(KSPSetTolerances(ksp, 1e-12, 1e-50, 1e5, 10000));
  }
  COSTATE_PETSC(SNESSetTolerances(im.snes, o.atol, o.rtol, 0.0, static_cast<PetscInt>(o.max_iterations),
                                  static_cast<PetscInt>(o.max_iterations) * 100 + 1000));
  if (!o.options_prefix.empty()) COSTATE_PETSC(SNESSetOptionsPrefix(im.snes, o.options_prefix.c_str()));
  if (o.use_options_database) COSTATE_PETSC(SNESSetFromOptions(im.snes));

  SNESType st = nullptr;
  KSPType kt = nullptr;
  PCType pt = nullptr;
  COSTATE_PETSC(SNESGetType(im.snes, &st));
  COSTATE_PETSC(KSPGetType(ksp, &kt));
  COSTATE_PETSC(PCGetType(pc, &pt));
  im.description = std::string("petsc snes ") + (st ? st : "?") + ", ksp " + (kt ? kt : "?") + "/" +
                   (pt ? pt : "none");
  if (pt && std::string(pt) == PCLU) {
    MatSolverType solver = nullptr;
    COSTATE_PETSC(PCFactorGetMatSolverType(pc, &solver));
    if (solver) im.description += std::string(" (") + solver + ")";
  }
  im.description += " on " + std::to_string(im.size) + " rank" + (im.size == 1 ? "" : "s");
}

Summary DistributedSnes::solve(const DistributedCallbacks& callbacks, std::vector<double>& x_local) {
  Impl& im = *impl_;
  COSTATE_CHECK(im.snes != nullptr, "nonlinear::solve (distributed): set_pattern before solve");
  const Options& o = im.options;
  Summary s;
  s.backend = Backend::PetscSnes;
  im.callbacks = &callbacks;
  im.error = nullptr;
  std::vector<PetscReal> history(static_cast<std::size_t>(o.max_iterations) + 1, 0.0);
  COSTATE_PETSC(SNESSetConvergenceHistory(im.snes, history.data(), nullptr,
                                          static_cast<PetscInt>(history.size()), PETSC_TRUE));
  PetscScalar* a = nullptr;
  COSTATE_PETSC(VecGetArray(im.x, &a));
  std::copy(x_local.begin(), x_local.end(), a);
  COSTATE_PETSC(VecRestoreArray(im.x, &a));
  COSTATE_PETSC(PetscPushErrorHandler(PetscReturnErrorHandler, nullptr));
  const PetscErrorCode solve_error = SNESSolve(im.snes, nullptr, im.x);
  COSTATE_PETSC(PetscPopErrorHandler());
  im.callbacks = nullptr;
  const bool failed_here = im.error != nullptr;
  int f_local = failed_here ? 1 : 0, f_any = 0;
  MPI_Allreduce(&f_local, &f_any, 1, MPI_INT, MPI_LOR, im.comm);
  if (failed_here) std::rethrow_exception(im.error);
  if (f_any)
    throw Error("nonlinear::solve (distributed): the residual or Jacobian threw on another rank "
                "(see its error)");
  const bool zero_pivot = solve_error == PETSC_ERR_MAT_LU_ZRPVT;
  if (!zero_pivot) COSTATE_PETSC(solve_error);

  const PetscScalar* xr = nullptr;
  COSTATE_PETSC(VecGetArrayRead(im.x, &xr));
  std::copy(xr, xr + im.owned, x_local.begin());
  COSTATE_PETSC(VecRestoreArrayRead(im.x, &xr));
  summarize(im.snes, zero_pivot, o.atol, o.rtol, "; " + im.description, s);
  return s;
}

void DistributedSnes::set_linearisation(std::span<const double> vals) {
  Impl& im = *impl_;
  COSTATE_CHECK_EQ(vals.size(), im.values.size(),
                   "nonlinear::solve (distributed): Jacobian values do not match the pattern");
  COSTATE_PETSC(im.assemble(vals));
  KSP ksp;
  COSTATE_PETSC(SNESGetKSP(im.snes, &ksp));
  COSTATE_PETSC(KSPSetOperators(ksp, im.j, im.j));
  COSTATE_PETSC(KSPSetUp(ksp));
}

LinearSolveReport DistributedSnes::solve_linear(std::span<const double> rhs, std::span<double> out,
                                                bool transpose) const {
  Impl& im = *impl_;
  COSTATE_CHECK(rhs.size() == static_cast<std::size_t>(im.owned) &&
                    out.size() == static_cast<std::size_t>(im.owned),
                "nonlinear::solve (distributed): derivative solves need the owned size "
                    << im.owned << "; got " << rhs.size() << " and " << out.size());
  PetscScalar* a = nullptr;
  COSTATE_PETSC(VecGetArray(im.b, &a));
  std::copy(rhs.begin(), rhs.end(), a);
  COSTATE_PETSC(VecRestoreArray(im.b, &a));
  KSP ksp;
  COSTATE_PETSC(SNESGetKSP(im.snes, &ksp));
  if (transpose)
    COSTATE_PETSC(KSPSolveTranspose(ksp, im.b, im.y));
  else
    COSTATE_PETSC(KSPSolve(ksp, im.b, im.y));
  LinearSolveReport rep;
  KSPConvergedReason reason;
  COSTATE_PETSC(KSPGetConvergedReason(ksp, &reason));
  PetscInt its = 0;
  COSTATE_PETSC(KSPGetIterationNumber(ksp, &its));
  rep.iterations = static_cast<int>(its);
  rep.converged = reason > 0;
  rep.message = KSPConvergedReasons[reason];
  const PetscScalar* q = nullptr;
  COSTATE_PETSC(VecGetArrayRead(im.y, &q));
  std::copy(q, q + im.owned, out.begin());
  COSTATE_PETSC(VecRestoreArrayRead(im.y, &q));
  bool finite = true;
  for (double v : out) finite = finite && std::isfinite(v);
  int bad = finite ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, im.comm);
  if (any) {
    rep.converged = false;
    rep.message += ", non-finite solution";
  }
  return rep;
}

std::int64_t DistributedSnes::global_nonzeros() const { return impl_->global_nnz; }
int DistributedSnes::ranks() const { return impl_->size; }
const std::string& DistributedSnes::description() const { return impl_->description; }

}  // namespace costate::nonlinear::detail
