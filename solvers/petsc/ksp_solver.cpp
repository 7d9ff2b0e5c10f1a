// linear::KspSolver: PETSc KSP on a matrix assembled from a DistributedCsr
// (the PETSc side of include/costate/linear/ksp.hpp).
#include <petscksp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <utility>

#include "costate/linear/ksp.hpp"
#include "petsc/ksp_common.hpp"
#include "petsc/petsc_check.hpp"

namespace costate::linear {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Validates the local part of a DistributedCsr; collective, so that a
/// mistake on one rank makes every rank throw instead of deadlocking in the
/// next collective call.
void check_collectively(const DistributedCsr<double>& a) {
  std::ostringstream problem;
  const std::int64_t m = a.local_rows();
  if (a.row_ptr.empty() || a.row_ptr.front() != 0) {
    problem << "row_ptr must start with 0 (it has " << a.row_ptr.size() << " entries)";
  } else if (static_cast<std::size_t>(a.row_ptr.back()) != a.columns.size()) {
    problem << "row_ptr ends at " << a.row_ptr.back() << " but there are " << a.columns.size()
            << " column indices";
  } else if (a.values.size() != a.columns.size()) {
    problem << a.values.size() << " values for " << a.columns.size() << " column indices";
  } else if (a.global_rows <= 0 || a.global_rows >= std::int64_t{PETSC_MAX_INT}) {
    problem << "global_rows = " << a.global_rows << " must lie in [1, " << PETSC_MAX_INT << ")";
  } else {
    for (std::int64_t i = 0; i < m && problem.tellp() == 0; ++i) {
      if (a.row_ptr[static_cast<std::size_t>(i) + 1] < a.row_ptr[static_cast<std::size_t>(i)])
        problem << "row_ptr decreases at local row " << i;
    }
    for (std::size_t e = 0; e < a.columns.size() && problem.tellp() == 0; ++e)
      if (a.columns[e] < 0 || a.columns[e] >= a.global_rows)
        problem << "column index " << a.columns[e] << " of entry " << e << " lies outside [0, "
                << a.global_rows << ")";
  }
  // Rows must tile [0, n) in rank order.
  long long local = m, before = 0, total = 0;
  MPI_Exscan(&local, &before, 1, MPI_LONG_LONG, MPI_SUM, a.comm);
  int rank = 0;
  MPI_Comm_rank(a.comm, &rank);
  if (rank == 0) before = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG_LONG, MPI_SUM, a.comm);
  if (problem.tellp() == 0 && before != a.first_row)
    problem << "first_row = " << a.first_row << " but the ranks before own " << before
            << " rows (rows must be distributed contiguously, in rank order)";
  if (problem.tellp() == 0 && total != a.global_rows)
    problem << "the ranks own " << total << " rows in all but global_rows = " << a.global_rows;
  const bool bad = problem.tellp() != 0;
  int bad_local = bad ? 1 : 0, bad_any = 0;
  MPI_Allreduce(&bad_local, &bad_any, 1, MPI_INT, MPI_LOR, a.comm);
  if (bad)
    throw Error("linear::KspSolver: malformed DistributedCsr on rank " + std::to_string(rank) +
                ": " + problem.str());
  if (bad_any)
    throw Error("linear::KspSolver: another rank reported a malformed DistributedCsr (see its "
                "error); this rank's part is fine");
}

}  // namespace

struct KspSolver::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  Mat a = nullptr;
  KSP ksp = nullptr;
  Vec x = nullptr, b = nullptr, r = nullptr;
  // Ghost exchange of x to the columns of the local entries (built lazily).
  Vec ghost = nullptr;
  VecScatter scatter = nullptr;
  std::vector<PetscInt> entry_columns;  // global column of each entry, user order
  std::vector<PetscInt> entry_slots;    // its position in the ghost vector
  std::int64_t local_rows = 0, global_rows = 0;
  double a_norm = 0.0;
  double seconds_setup = 0.0;
  std::string description;

  ~Impl() {
    // A tape may keep a solver alive until its thread ends, after
    // PetscFinalize: then the objects are gone with PETSc and must not be
    // touched.
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;
    VecScatterDestroy(&scatter);
    VecDestroy(&ghost);
    VecDestroy(&r);
    VecDestroy(&b);
    VecDestroy(&x);
    KSPDestroy(&ksp);
    MatDestroy(&a);
  }

  Summary run(std::span<const double> rhs, std::span<double> sol, bool transpose) const {
    COSTATE_CHECK(rhs.size() == static_cast<std::size_t>(local_rows) &&
                      sol.size() == static_cast<std::size_t>(local_rows),
                  "linear::KspSolver::solve: right-hand side and solution must have the "
                  "local size "
                      << local_rows << "; they have " << rhs.size() << " and " << sol.size());
    PetscScalar* p = nullptr;
    COSTATE_PETSC(VecGetArray(b, &p));
    std::copy(rhs.begin(), rhs.end(), p);
    COSTATE_PETSC(VecRestoreArray(b, &p));
    const auto t0 = Clock::now();
    if (transpose)
      COSTATE_PETSC(KSPSolveTranspose(ksp, b, x));
    else
      COSTATE_PETSC(KSPSolve(ksp, b, x));
    Summary s;
    s.seconds_solve = since(t0);
    s.backend = description + (transpose ? " (transposed)" : "");
    s.rows = global_rows;
    MatInfo info;
    COSTATE_PETSC(MatGetInfo(a, MAT_GLOBAL_SUM, &info));
    s.nonzeros = static_cast<std::int64_t>(info.nz_used);
    s.factorization_reused = true;
    detail::read_outcome(ksp, s);
    // True residual r = b − A x (or b − Aᵀ x), in double.
    if (transpose)
      COSTATE_PETSC(MatMultTranspose(a, x, r));
    else
      COSTATE_PETSC(MatMult(a, x, r));
    COSTATE_PETSC(VecAYPX(r, -1.0, b));
    PetscReal rn = 0, bn = 0, xn = 0;
    COSTATE_PETSC(VecNorm(r, NORM_2, &rn));
    COSTATE_PETSC(VecNorm(b, NORM_2, &bn));
    COSTATE_PETSC(VecNorm(x, NORM_2, &xn));
    s.residual_norm = rn;
    s.rhs_norm = bn;
    const double scale = a_norm * xn + bn;
    s.backward_error = scale > 0 ? rn / scale : 0.0;
    if (s.termination == Termination::Success && !std::isfinite(rn)) {
      s.termination = Termination::NonFinite;
      s.message += ", non-finite solution";
    }
    const PetscScalar* q = nullptr;
    COSTATE_PETSC(VecGetArrayRead(x, &q));
    std::copy(q, q + local_rows, sol.begin());
    COSTATE_PETSC(VecRestoreArrayRead(x, &q));
    return s;
  }
};

KspSolver::KspSolver(const DistributedCsr<double>& a, const KspOptions& options)
    : impl_(std::make_unique<Impl>()) {
  options.validate();
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  COSTATE_CHECK(initialized, "linear::KspSolver: PETSc is not initialised; create a "
                             "costate::Environment first");
  check_collectively(a);
  Impl& im = *impl_;
  im.comm = a.comm;
  im.local_rows = a.local_rows();
  im.global_rows = a.global_rows;
  const std::size_t m = static_cast<std::size_t>(im.local_rows);

  // CSR with the columns of each row sorted (PETSc's requirement); a
  // repeated column is the caller's mistake.
  std::vector<PetscInt> ia(m + 1), ja(a.columns.size());
  std::vector<PetscScalar> va(a.values.size());
  std::vector<std::size_t> order;
  std::string duplicate;
  for (std::size_t i = 0; i < m; ++i) {
    const auto first = static_cast<std::size_t>(a.row_ptr[i]);
    const auto last = static_cast<std::size_t>(a.row_ptr[i + 1]);
    ia[i] = static_cast<PetscInt>(first);
    order.resize(last - first);
    std::iota(order.begin(), order.end(), first);
    std::sort(order.begin(), order.end(),
              [&](std::size_t p, std::size_t q) { return a.columns[p] < a.columns[q]; });
    for (std::size_t k = 0; k < order.size(); ++k) {
      ja[first + k] = static_cast<PetscInt>(a.columns[order[k]]);
      va[first + k] = a.values[order[k]];
      if (k > 0 && ja[first + k] == ja[first + k - 1] && duplicate.empty())
        duplicate = "global row " + std::to_string(a.first_row + static_cast<std::int64_t>(i)) +
                    " stores column " + std::to_string(ja[first + k]) + " twice";
    }
  }
  ia[m] = static_cast<PetscInt>(a.columns.size());
  const bool dup_any = detail::any_rank(a.comm, !duplicate.empty());
  if (!duplicate.empty())
    throw Error("linear::KspSolver: malformed DistributedCsr: " + duplicate +
                "; sum the duplicates into one entry");
  if (dup_any) throw Error("linear::KspSolver: another rank reported a malformed DistributedCsr");
  im.entry_columns.assign(a.columns.begin(), a.columns.end());

  const auto lm = static_cast<PetscInt>(m), gn = static_cast<PetscInt>(a.global_rows);
  COSTATE_PETSC(MatCreate(a.comm, &im.a));
  COSTATE_PETSC(MatSetSizes(im.a, lm, lm, gn, gn));
  COSTATE_PETSC(MatSetType(im.a, MATAIJ));
  COSTATE_PETSC(MatSeqAIJSetPreallocationCSR(im.a, ia.data(), ja.data(), va.data()));
  COSTATE_PETSC(MatMPIAIJSetPreallocationCSR(im.a, ia.data(), ja.data(), va.data()));
  COSTATE_PETSC(MatAssemblyBegin(im.a, MAT_FINAL_ASSEMBLY));
  COSTATE_PETSC(MatAssemblyEnd(im.a, MAT_FINAL_ASSEMBLY));
  PetscReal norm = 0;
  COSTATE_PETSC(MatNorm(im.a, NORM_FROBENIUS, &norm));
  im.a_norm = norm;
  COSTATE_PETSC(MatCreateVecs(im.a, &im.x, &im.b));
  COSTATE_PETSC(VecDuplicate(im.b, &im.r));

  im.ksp = detail::create_ksp(a.comm, options);
  COSTATE_PETSC(KSPSetOperators(im.ksp, im.a, im.a));
  const auto t0 = Clock::now();
  COSTATE_PETSC(KSPSetUp(im.ksp));
  im.seconds_setup = since(t0);
  int size = 1;
  MPI_Comm_size(a.comm, &size);
  im.description = detail::describe(im.ksp, size);
}

KspSolver::~KspSolver() = default;
KspSolver::KspSolver(KspSolver&&) noexcept = default;
KspSolver& KspSolver::operator=(KspSolver&&) noexcept = default;

Summary KspSolver::solve(std::span<const double> b, std::span<double> x) const {
  Summary s = impl_->run(b, x, false);
  s.seconds_setup = 0.0;
  return s;
}

Summary KspSolver::solve_transpose(std::span<const double> b, std::span<double> x) const {
  return impl_->run(b, x, true);
}

std::vector<double> KspSolver::gather_at_entries(std::span<const double> x) const {
  Impl& im = *impl_;
  COSTATE_CHECK(x.size() == static_cast<std::size_t>(im.local_rows),
                "linear::KspSolver::gather_at_entries: x must have the local size "
                    << im.local_rows << "; it has " << x.size());
  if (im.scatter == nullptr) {
    // Unique columns of the local entries, and each entry's slot among them.
    std::vector<PetscInt> unique = im.entry_columns;
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    im.entry_slots.resize(im.entry_columns.size());
    for (std::size_t e = 0; e < im.entry_columns.size(); ++e)
      im.entry_slots[e] = static_cast<PetscInt>(
          std::lower_bound(unique.begin(), unique.end(), im.entry_columns[e]) - unique.begin());
    IS is;
    COSTATE_PETSC(ISCreateGeneral(PETSC_COMM_SELF, static_cast<PetscInt>(unique.size()),
                                  unique.data(), PETSC_COPY_VALUES, &is));
    COSTATE_PETSC(VecCreateSeq(PETSC_COMM_SELF, static_cast<PetscInt>(unique.size()), &im.ghost));
    const PetscErrorCode ierr = VecScatterCreate(im.x, is, im.ghost, nullptr, &im.scatter);
    ISDestroy(&is);
    COSTATE_PETSC(ierr);
  }
  PetscScalar* p = nullptr;
  COSTATE_PETSC(VecGetArray(im.x, &p));
  std::copy(x.begin(), x.end(), p);
  COSTATE_PETSC(VecRestoreArray(im.x, &p));
  COSTATE_PETSC(VecScatterBegin(im.scatter, im.x, im.ghost, INSERT_VALUES, SCATTER_FORWARD));
  COSTATE_PETSC(VecScatterEnd(im.scatter, im.x, im.ghost, INSERT_VALUES, SCATTER_FORWARD));
  const PetscScalar* g = nullptr;
  COSTATE_PETSC(VecGetArrayRead(im.ghost, &g));
  std::vector<double> out(im.entry_columns.size());
  for (std::size_t e = 0; e < out.size(); ++e) out[e] = g[im.entry_slots[e]];
  COSTATE_PETSC(VecRestoreArrayRead(im.ghost, &g));
  return out;
}

void set_petsc_option(const std::string& name, const std::string& value) {
  COSTATE_CHECK(!name.empty() && name[0] == '-',
                "linear::set_petsc_option: option name '" << name << "' must start with '-'");
  COSTATE_PETSC(PetscOptionsSetValue(nullptr, name.c_str(), value.empty() ? nullptr : value.c_str()));
}

void clear_petsc_option(const std::string& name) {
  COSTATE_CHECK(!name.empty() && name[0] == '-',
                "linear::clear_petsc_option: option name '" << name << "' must start with '-'");
  COSTATE_PETSC(PetscOptionsClearValue(nullptr, name.c_str()));
}

std::int64_t KspSolver::local_rows() const { return impl_->local_rows; }
std::int64_t KspSolver::global_rows() const { return impl_->global_rows; }
const std::string& KspSolver::description() const { return impl_->description; }
double KspSolver::seconds_setup() const { return impl_->seconds_setup; }

}  // namespace costate::linear
