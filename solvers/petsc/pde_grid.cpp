// pde::Grid, pde::Matrix, pde::KrylovSolver: the PETSc side (DMDA, Mat, KSP)
// of include/costate/pde/grid.hpp and matrix.hpp, as the PETSc module's
// backends (petsc/module.hpp); libcostate's half is src/pde/grid.cpp.
#include <petscdmda.h>
#include <petscksp.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "costate/pde/grid.hpp"
#include "petsc/ksp_common.hpp"
#include "petsc/module.hpp"
#include "petsc/petsc_check.hpp"

namespace costate::detail {

namespace {

using pde::GlobalVector;
using pde::LocalArray;

DMBoundaryType petsc_boundary(pde::Boundary b) {
  return b == pde::Boundary::Periodic ? DM_BOUNDARY_PERIODIC : DM_BOUNDARY_GHOSTED;
}

class PetscGrid final : public PdeGridBackend {
 public:
  DM da = nullptr;
  Vec g = nullptr, l = nullptr;  // shells: buffers placed with VecPlaceArray
  Vec natural = nullptr, all = nullptr;
  VecScatter to_all = nullptr;

  ~PetscGrid() override {
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;
    VecScatterDestroy(&to_all);
    VecDestroy(&all);
    VecDestroy(&natural);
    VecDestroy(&l);
    VecDestroy(&g);
    DMDestroy(&da);
  }

  void* dm() const override { return da; }

  void global_to_local(const GlobalVector& global, const LocalArray& local) override {
    COSTATE_PETSC(VecPlaceArray(g, global.data()));
    COSTATE_PETSC(VecPlaceArray(l, local.data()));
    COSTATE_PETSC(DMGlobalToLocalBegin(da, g, INSERT_VALUES, l));
    COSTATE_PETSC(DMGlobalToLocalEnd(da, g, INSERT_VALUES, l));
    COSTATE_PETSC(VecResetArray(l));
    COSTATE_PETSC(VecResetArray(g));
  }

  void local_to_global_add(const LocalArray& local, const GlobalVector& global) override {
    COSTATE_PETSC(VecPlaceArray(g, global.data()));
    COSTATE_PETSC(VecPlaceArray(l, local.data()));
    COSTATE_PETSC(DMLocalToGlobalBegin(da, l, ADD_VALUES, g));
    COSTATE_PETSC(DMLocalToGlobalEnd(da, l, ADD_VALUES, g));
    COSTATE_PETSC(VecResetArray(l));
    COSTATE_PETSC(VecResetArray(g));
  }

  void gather(const GlobalVector& global, std::span<double> out) override {
    make_natural();
    COSTATE_PETSC(VecPlaceArray(g, global.data()));
    COSTATE_PETSC(DMDAGlobalToNaturalBegin(da, g, INSERT_VALUES, natural));
    COSTATE_PETSC(DMDAGlobalToNaturalEnd(da, g, INSERT_VALUES, natural));
    COSTATE_PETSC(VecResetArray(g));
    COSTATE_PETSC(VecScatterBegin(to_all, natural, all, INSERT_VALUES, SCATTER_FORWARD));
    COSTATE_PETSC(VecScatterEnd(to_all, natural, all, INSERT_VALUES, SCATTER_FORWARD));
    const PetscScalar* a = nullptr;
    COSTATE_PETSC(VecGetArrayRead(all, &a));
    std::copy(a, a + out.size(), out.begin());
    COSTATE_PETSC(VecRestoreArrayRead(all, &a));
  }

  void scatter(std::span<const double> in, const GlobalVector& global) override {
    make_natural();
    PetscInt lo = 0, hi = 0;
    COSTATE_PETSC(VecGetOwnershipRange(natural, &lo, &hi));
    PetscScalar* a = nullptr;
    COSTATE_PETSC(VecGetArray(natural, &a));
    std::copy(in.begin() + lo, in.begin() + hi, a);
    COSTATE_PETSC(VecRestoreArray(natural, &a));
    COSTATE_PETSC(VecPlaceArray(g, global.data()));
    COSTATE_PETSC(DMDANaturalToGlobalBegin(da, natural, INSERT_VALUES, g));
    COSTATE_PETSC(DMDANaturalToGlobalEnd(da, natural, INSERT_VALUES, g));
    COSTATE_PETSC(VecResetArray(g));
  }

 private:
  void make_natural() {
    if (natural != nullptr) return;
    COSTATE_PETSC(DMDACreateNaturalVector(da, &natural));
    COSTATE_PETSC(VecScatterCreateToAll(natural, &to_all, &all));
  }
};

class PetscMatrix final : public PdeMatrixBackend {
 public:
  Mat a = nullptr;
  Vec x = nullptr, y = nullptr;  // shells
  ISLocalToGlobalMapping ltog = nullptr;

  ~PetscMatrix() override {
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;
    VecDestroy(&y);
    VecDestroy(&x);
    MatDestroy(&a);
  }

  void* mat() const override { return a; }
  void zero() override { COSTATE_PETSC(MatZeroEntries(a)); }

  void set_row(std::int64_t row, std::span<const std::int64_t> cols,
               std::span<const double> values) override {
    PetscInt r = static_cast<PetscInt>(row);
    PetscInt c[64];
    const std::size_t n = cols.size();
    COSTATE_CHECK(n <= 64, "pde::Matrix::set_row: at most 64 entries per row");
    for (std::size_t e = 0; e < n; ++e) c[e] = static_cast<PetscInt>(cols[e]);
    COSTATE_PETSC(MatSetValuesLocal(a, 1, &r, static_cast<PetscInt>(n), c, values.data(), INSERT_VALUES));
  }

  void assemble() override {
    COSTATE_PETSC(MatAssemblyBegin(a, MAT_FINAL_ASSEMBLY));
    COSTATE_PETSC(MatAssemblyEnd(a, MAT_FINAL_ASSEMBLY));
  }

  void shifted_copy_of(const PdeMatrixBackend& b_matrix, double shift, double scale) override {
    COSTATE_PETSC(MatCopy(static_cast<Mat>(b_matrix.mat()), a, SAME_NONZERO_PATTERN));
    COSTATE_PETSC(MatScale(a, scale));
    COSTATE_PETSC(MatShift(a, shift));
  }

  void mult(const GlobalVector& in, const GlobalVector& out) const override { apply(in, out, false); }
  void mult_transpose(const GlobalVector& in, const GlobalVector& out) const override {
    apply(in, out, true);
  }

  std::vector<std::pair<std::int64_t, double>> global_row(std::int64_t row) const override {
    PetscInt n = 0;
    const PetscInt* cols = nullptr;
    const PetscScalar* vals = nullptr;
    COSTATE_PETSC(MatGetRow(a, static_cast<PetscInt>(row), &n, &cols, &vals));
    std::vector<std::pair<std::int64_t, double>> out;
    for (PetscInt e = 0; e < n; ++e) out.emplace_back(cols[e], vals[e]);
    COSTATE_PETSC(MatRestoreRow(a, static_cast<PetscInt>(row), &n, &cols, &vals));
    return out;
  }

  std::int64_t first_row() const override {
    PetscInt lo = 0, hi = 0;
    COSTATE_PETSC(MatGetOwnershipRange(a, &lo, &hi));
    return lo;
  }

  std::int64_t global_of_local(std::int64_t l) const override {
    PetscInt in = static_cast<PetscInt>(l), out = -1;
    COSTATE_PETSC(ISLocalToGlobalMappingApply(ltog, 1, &in, &out));
    return out;
  }

 private:
  void apply(const GlobalVector& in, const GlobalVector& out, bool transpose) const {
    COSTATE_PETSC(VecPlaceArray(x, in.data()));
    COSTATE_PETSC(VecPlaceArray(y, out.data()));
    COSTATE_PETSC(transpose ? MatMultTranspose(a, x, y) : MatMult(a, x, y));
    COSTATE_PETSC(VecResetArray(y));
    COSTATE_PETSC(VecResetArray(x));
  }
};

class PetscKrylov final : public PdeKrylovBackend {
 public:
  KSP ksp = nullptr;
  Vec b = nullptr, x = nullptr;  // shells
  const pde::Grid* grid = nullptr;
  bool symmetric = false;  // Aᵀ = A exactly: transposed solves are plain solves
  linear::KspOptions options;
  std::string description_;
  ~PetscKrylov() override {
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;
    VecDestroy(&x);
    VecDestroy(&b);
    KSPDestroy(&ksp);
  }
  linear::Summary solve(const GlobalVector& rhs, const GlobalVector& sol, bool guess,
                        bool transpose) const override {
    COSTATE_CHECK(rhs.size() == grid->owned_size() && sol.size() == grid->owned_size(),
                  "pde::KrylovSolver: vectors must have the grid's owned size " << grid->owned_size());
    COSTATE_PETSC(KSPSetInitialGuessNonzero(ksp, guess ? PETSC_TRUE : PETSC_FALSE));
    COSTATE_PETSC(VecPlaceArray(b, rhs.data()));
    COSTATE_PETSC(VecPlaceArray(x, sol.data()));
    const auto t0 = std::chrono::steady_clock::now();
    PetscErrorCode ierr =
        (transpose && !symmetric) ? KSPSolveTranspose(ksp, b, x) : KSPSolve(ksp, b, x);
    VecResetArray(x);
    VecResetArray(b);
    COSTATE_PETSC(ierr);
    linear::Summary s;
    s.seconds_solve = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.backend = description_ + (transpose ? " (transposed)" : "");
    s.rows = grid->global_size();
    s.factorization_reused = true;
    linear::detail::read_outcome(ksp, s);
    PetscReal rn = 0;
    COSTATE_PETSC(KSPGetResidualNorm(ksp, &rn));
    s.residual_norm = rn;
    return s;
  }
  void set_operator(void* mat) override {
    PetscKrylov& im = *this;
    Mat m = static_cast<Mat>(mat);
    COSTATE_PETSC(KSPSetOperators(im.ksp, m, m));
    // An exactly symmetric matrix (checked entry by entry, O(nnz)) needs no
    // transposed triangular solves: Aᵀ μ = λ is A μ = λ, with the same
    // preconditioner and the (faster) forward kernels.
    PetscBool sym = PETSC_FALSE;
    COSTATE_PETSC(MatIsSymmetric(m, 0.0, &sym));
    im.symmetric = sym == PETSC_TRUE;
    COSTATE_PETSC(KSPSetUp(im.ksp));
    im.description_ = linear::detail::describe(im.ksp, im.grid->size());
  }

  const std::string& description() const override { return description_; }
};

}  // namespace

PdeGridParts petsc_make_grid(MPI_Comm comm, const pde::GridSpec& spec, const std::array<int, 3>& procs,
                             const std::array<std::vector<std::int64_t>, 3>& cells_per_process) {
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  COSTATE_CHECK(initialized, "pde::Grid: PETSc is not initialised; create a costate::Environment first");
  std::array<std::vector<PetscInt>, 3> ranges;
  for (std::size_t d = 0; d < 3; ++d)
    for (std::int64_t n : cells_per_process[d]) ranges[d].push_back(static_cast<PetscInt>(n));
  auto grid = std::make_unique<PetscGrid>();
  const DMDAStencilType st = spec.star_stencil ? DMDA_STENCIL_STAR : DMDA_STENCIL_BOX;
  const auto pi = [](std::int64_t v) { return static_cast<PetscInt>(v); };
  if (spec.dim == 1) {
    COSTATE_PETSC(DMDACreate1d(comm, petsc_boundary(spec.boundary[0]), pi(spec.cells[0]), spec.dof,
                               spec.stencil_width, ranges[0].data(), &grid->da));
  } else if (spec.dim == 2) {
    COSTATE_PETSC(DMDACreate2d(comm, petsc_boundary(spec.boundary[0]),
                               petsc_boundary(spec.boundary[1]), st, pi(spec.cells[0]),
                               pi(spec.cells[1]), procs[0], procs[1], spec.dof,
                               spec.stencil_width, ranges[0].data(), ranges[1].data(),
                               &grid->da));
  } else {
    COSTATE_PETSC(DMDACreate3d(comm, petsc_boundary(spec.boundary[0]),
                               petsc_boundary(spec.boundary[1]), petsc_boundary(spec.boundary[2]),
                               st, pi(spec.cells[0]), pi(spec.cells[1]), pi(spec.cells[2]),
                               procs[0], procs[1], procs[2], spec.dof, spec.stencil_width,
                               ranges[0].data(), ranges[1].data(), ranges[2].data(), &grid->da));
  }
  COSTATE_PETSC(DMSetUp(grid->da));
  PdeGridParts parts;
  PetscInt xs, ys, zs, xm, ym, zm;
  COSTATE_PETSC(DMDAGetCorners(grid->da, &xs, &ys, &zs, &xm, &ym, &zm));
  parts.owned.start = {xs, ys, zs};
  parts.owned.count = {xm, ym, zm};
  COSTATE_PETSC(DMDAGetGhostCorners(grid->da, &xs, &ys, &zs, &xm, &ym, &zm));
  parts.ghosted.start = {xs, ys, zs};
  parts.ghosted.count = {xm, ym, zm};
  COSTATE_PETSC(DMCreateGlobalVector(grid->da, &grid->g));
  COSTATE_PETSC(DMCreateLocalVector(grid->da, &grid->l));
  parts.backend = std::move(grid);
  return parts;
}

std::unique_ptr<PdeMatrixBackend> petsc_make_matrix(const pde::Grid& grid) {
  auto m = std::make_unique<PetscMatrix>();
  DM da = static_cast<DM>(grid.petsc_dm());
  COSTATE_PETSC(DMSetMatType(da, MATAIJ));
  COSTATE_PETSC(DMCreateMatrix(da, &m->a));
  COSTATE_PETSC(MatSetOption(m->a, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));
  COSTATE_PETSC(MatCreateVecs(m->a, &m->x, &m->y));
  COSTATE_PETSC(DMGetLocalToGlobalMapping(da, &m->ltog));
  return m;
}

std::unique_ptr<PdeKrylovBackend> petsc_make_krylov(const pde::Grid& grid,
                                                    const linear::KspOptions& options) {
  auto k = std::make_unique<PetscKrylov>();
  k->grid = &grid;
  k->options = options;
  k->ksp = linear::detail::create_ksp(grid.comm(), options);
  DM da = static_cast<DM>(grid.petsc_dm());
  COSTATE_PETSC(DMCreateGlobalVector(da, &k->b));
  COSTATE_PETSC(DMCreateGlobalVector(da, &k->x));
  return k;
}

}  // namespace costate::detail
