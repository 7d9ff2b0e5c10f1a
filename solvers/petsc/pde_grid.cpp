// pde::Grid, pde::Matrix, pde::KrylovSolver: the PETSc side (DMDA, Mat, KSP)
// of include/costate/pde/grid.hpp and matrix.hpp.
#include <petscdmda.h>
#include <petscksp.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "costate/pde/grid.hpp"
#include "costate/pde/matrix.hpp"
#include "petsc/ksp_common.hpp"
#include "petsc/petsc_check.hpp"

namespace costate::pde {

namespace {

DMBoundaryType petsc_boundary(Boundary b) {
  return b == Boundary::Periodic ? DM_BOUNDARY_PERIODIC : DM_BOUNDARY_GHOSTED;
}

/// Process grid: the factorisation of `size` into dim factors with the
/// least communication surface (ties: more processes along x).
std::array<int, 3> choose_processes(const GridSpec& s, int size) {
  std::array<int, 3> best{size, 1, 1};
  double best_cost = std::numeric_limits<double>::infinity();
  for (int px = 1; px <= size; ++px) {
    if (size % px) continue;
    for (int py = 1; py <= size / px; ++py) {
      if ((size / px) % py) continue;
      const int pz = size / px / py;
      std::array<int, 3> p{px, py, pz};
      bool ok = true;
      for (int d = s.dim; d < 3; ++d) ok = ok && p[static_cast<std::size_t>(d)] == 1;
      if (!ok) continue;
      double cost = 0.0;
      for (int d = 0; d < s.dim; ++d) {
        double face = 1.0;
        for (int e = 0; e < s.dim; ++e)
          if (e != d)
            face *= static_cast<double>(s.cells[static_cast<std::size_t>(e)]) /
                    p[static_cast<std::size_t>(e)];
        cost += face * (p[static_cast<std::size_t>(d)] > 1 ? 1.0 : 0.0);
      }
      // Prefer splits that keep every rank's share >= 1 cell.
      for (int d = 0; d < s.dim; ++d)
        if (p[static_cast<std::size_t>(d)] > s.cells[static_cast<std::size_t>(d)]) cost += 1e300;
      if (cost < best_cost) {
        best_cost = cost;
        best = p;
      }
    }
  }
  return best;
}

}  // namespace

struct Grid::Impl {
  DM da = nullptr;
  Vec g = nullptr, l = nullptr;  // shells: buffers placed with VecPlaceArray
  Vec natural = nullptr, all = nullptr;
  VecScatter to_all = nullptr;
  std::vector<std::int64_t> outer_ghosts;  // local indices of outer boundary ghosts
  ~Impl() {
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
};

Grid::Grid(MPI_Comm comm, const GridSpec& spec) : spec_(spec), comm_(comm) {
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  COSTATE_CHECK(initialized, "pde::Grid: PETSc is not initialised; create a costate::Environment first");
  spec_.validate();
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  // Every rank must pass the same grid: PETSc's DMDA set-up does not check
  // that and waits for ever (or fails inside) when two ranks differ.
  {
    std::vector<double> mine{static_cast<double>(spec_.dim), static_cast<double>(spec_.dof),
                             static_cast<double>(spec_.stencil_width), spec_.star_stencil ? 1.0 : 0.0,
                             spec_.dirichlet_value};
    for (int d = 0; d < 3; ++d) {
      const auto D = static_cast<std::size_t>(d);
      mine.insert(mine.end(), {static_cast<double>(spec_.cells[D]), spec_.extent[D][0], spec_.extent[D][1],
                               static_cast<double>(static_cast<int>(spec_.boundary[D])),
                               static_cast<double>(spec_.processes[D])});
    }
    std::vector<double> low(mine.size()), high(mine.size());
    MPI_Allreduce(mine.data(), low.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MIN, comm);
    MPI_Allreduce(mine.data(), high.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, comm);
    static const char* const kNames[] = {"dim", "dof", "stencil_width", "star_stencil", "dirichlet_value"};
    static const char* const kPerDim[] = {"cells", "extent (low)", "extent (high)", "boundary", "processes"};
    for (std::size_t i = 0; i < mine.size(); ++i)
      if (!(low[i] == high[i])) {
        const std::string what = i < 5 ? kNames[i]
                                       : std::string(kPerDim[(i - 5) % 5]) + " in the " +
                                             "xyz"[(i - 5) / 5] + "-direction";
        throw Error("pde::Grid: the ranks pass different grids: " + what + " ranges from " +
                    detail::format_value(low[i]) + " to " + detail::format_value(high[i]) +
                    " across the " + std::to_string(size_) +
                    " ranks; every rank must build the same grid (collective)");
      }
  }
  // Every check below uses only data every rank has, so a bad grid throws
  // on every rank before the first collective PETSc call.
  if (spec_.processes[0] > 0) {
    procs_ = spec_.processes;
    for (int d = spec_.dim; d < 3; ++d) procs_[static_cast<std::size_t>(d)] = std::max(1, procs_[static_cast<std::size_t>(d)]);
    COSTATE_CHECK(procs_[0] * procs_[1] * procs_[2] == size_,
                  "pde::GridSpec::processes = [" << procs_[0] << ", " << procs_[1] << ", "
                                                 << procs_[2] << "] multiplies to "
                                                 << procs_[0] * procs_[1] * procs_[2]
                                                 << " but the communicator has " << size_
                                                 << " ranks");
  } else {
    procs_ = choose_processes(spec_, size_);
  }
  std::array<std::vector<PetscInt>, 3> ranges;
  for (int d = 0; d < 3; ++d) {
    const auto D = static_cast<std::size_t>(d);
    const std::int64_t n = spec_.cells[D];
    const int p = procs_[D];
    for (int r = 0; r < p; ++r) ranges[D].push_back(static_cast<PetscInt>(n / p + (r < n % p ? 1 : 0)));
    if (d < spec_.dim) {
      const std::int64_t smallest = n / p;
      COSTATE_CHECK(smallest >= spec_.stencil_width,
                    "pde::Grid: " << size_ << " ranks split the " << "xyz"[d] << "-direction ("
                                  << n << " cells) over " << p << " processes, leaving "
                                  << smallest << " cells on some rank, fewer than the stencil width "
                                  << spec_.stencil_width
                                  << ": use fewer ranks or a finer grid (each rank needs at least "
                                  << spec_.stencil_width << " cells per direction)");
    }
    h_[D] = (spec_.extent[D][1] - spec_.extent[D][0]) / static_cast<double>(n);
  }
  impl_ = std::make_unique<Impl>();
  const DMDAStencilType st = spec_.star_stencil ? DMDA_STENCIL_STAR : DMDA_STENCIL_BOX;
  const auto pi = [](std::int64_t v) { return static_cast<PetscInt>(v); };
  if (spec_.dim == 1) {
    COSTATE_PETSC(DMDACreate1d(comm, petsc_boundary(spec_.boundary[0]), pi(spec_.cells[0]), spec_.dof,
                               spec_.stencil_width, ranges[0].data(), &impl_->da));
  } else if (spec_.dim == 2) {
    COSTATE_PETSC(DMDACreate2d(comm, petsc_boundary(spec_.boundary[0]),
                               petsc_boundary(spec_.boundary[1]), st, pi(spec_.cells[0]),
                               pi(spec_.cells[1]), procs_[0], procs_[1], spec_.dof,
                               spec_.stencil_width, ranges[0].data(), ranges[1].data(),
                               &impl_->da));
  } else {
    COSTATE_PETSC(DMDACreate3d(comm, petsc_boundary(spec_.boundary[0]),
                               petsc_boundary(spec_.boundary[1]), petsc_boundary(spec_.boundary[2]),
                               st, pi(spec_.cells[0]), pi(spec_.cells[1]), pi(spec_.cells[2]),
                               procs_[0], procs_[1], procs_[2], spec_.dof, spec_.stencil_width,
                               ranges[0].data(), ranges[1].data(), ranges[2].data(), &impl_->da));
  }
  COSTATE_PETSC(DMSetUp(impl_->da));
  PetscInt xs, ys, zs, xm, ym, zm;
  COSTATE_PETSC(DMDAGetCorners(impl_->da, &xs, &ys, &zs, &xm, &ym, &zm));
  owned_.start = {xs, ys, zs};
  owned_.count = {xm, ym, zm};
  COSTATE_PETSC(DMDAGetGhostCorners(impl_->da, &xs, &ys, &zs, &xm, &ym, &zm));
  ghosted_.start = {xs, ys, zs};
  ghosted_.count = {xm, ym, zm};
  for (int d = spec_.dim; d < 3; ++d) {
    owned_.start[static_cast<std::size_t>(d)] = ghosted_.start[static_cast<std::size_t>(d)] = 0;
    owned_.count[static_cast<std::size_t>(d)] = ghosted_.count[static_cast<std::size_t>(d)] = 1;
  }
  COSTATE_PETSC(DMCreateGlobalVector(impl_->da, &impl_->g));
  COSTATE_PETSC(DMCreateLocalVector(impl_->da, &impl_->l));
  for (std::int64_t k = ghosted_.start[2]; k < ghosted_.start[2] + ghosted_.count[2]; ++k)
    for (std::int64_t j = ghosted_.start[1]; j < ghosted_.start[1] + ghosted_.count[1]; ++j)
      for (std::int64_t i = ghosted_.start[0]; i < ghosted_.start[0] + ghosted_.count[0]; ++i) {
        const std::array<std::int64_t, 3> idx{i, j, k};
        bool outer = false;
        for (int d = 0; d < spec_.dim; ++d)
          outer = outer || (!periodic(d) && (idx[static_cast<std::size_t>(d)] < 0 ||
                                             idx[static_cast<std::size_t>(d)] >= cells(d)));
        if (outer)
          for (int c = 0; c < spec_.dof; ++c) impl_->outer_ghosts.push_back(local_index(c, i, j, k));
      }
}

Grid::~Grid() = default;
Grid::Grid(Grid&&) noexcept = default;
Grid& Grid::operator=(Grid&&) noexcept = default;

void* Grid::petsc_dm() const { return impl_->da; }

GlobalVector Grid::create_global(const std::string& label) const {
  return GlobalVector(owned_size(), comm_, label);
}

LocalArray Grid::create_local(const std::string& label) const {
  return LocalArray(label, ghosted_size());
}

void Grid::global_to_local(const GlobalVector& global, const LocalArray& local) const {
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::global_to_local: global vector size");
  COSTATE_CHECK_EQ(local.extent(0), ghosted_size(), "pde::Grid::global_to_local: local array size");
  Impl& im = *impl_;
  COSTATE_PETSC(VecPlaceArray(im.g, global.data()));
  COSTATE_PETSC(VecPlaceArray(im.l, local.data()));
  COSTATE_PETSC(DMGlobalToLocalBegin(im.da, im.g, INSERT_VALUES, im.l));
  COSTATE_PETSC(DMGlobalToLocalEnd(im.da, im.g, INSERT_VALUES, im.l));
  COSTATE_PETSC(VecResetArray(im.l));
  COSTATE_PETSC(VecResetArray(im.g));
  double* p = local.data();
  for (std::int64_t e : im.outer_ghosts) p[e] = 0.0;
}

void Grid::local_to_global_add(const LocalArray& local, const GlobalVector& global) const {
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::local_to_global_add: global vector size");
  COSTATE_CHECK_EQ(local.extent(0), ghosted_size(), "pde::Grid::local_to_global_add: local array size");
  Impl& im = *impl_;
  COSTATE_PETSC(VecPlaceArray(im.g, global.data()));
  COSTATE_PETSC(VecPlaceArray(im.l, local.data()));
  COSTATE_PETSC(DMLocalToGlobalBegin(im.da, im.l, ADD_VALUES, im.g));
  COSTATE_PETSC(DMLocalToGlobalEnd(im.da, im.l, ADD_VALUES, im.g));
  COSTATE_PETSC(VecResetArray(im.l));
  COSTATE_PETSC(VecResetArray(im.g));
}

std::vector<double> Grid::gather(const GlobalVector& global) const {
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::gather: global vector size");
  Impl& im = *impl_;
  if (im.natural == nullptr) {
    COSTATE_PETSC(DMDACreateNaturalVector(im.da, &im.natural));
    COSTATE_PETSC(VecScatterCreateToAll(im.natural, &im.to_all, &im.all));
  }
  COSTATE_PETSC(VecPlaceArray(im.g, global.data()));
  COSTATE_PETSC(DMDAGlobalToNaturalBegin(im.da, im.g, INSERT_VALUES, im.natural));
  COSTATE_PETSC(DMDAGlobalToNaturalEnd(im.da, im.g, INSERT_VALUES, im.natural));
  COSTATE_PETSC(VecResetArray(im.g));
  COSTATE_PETSC(VecScatterBegin(im.to_all, im.natural, im.all, INSERT_VALUES, SCATTER_FORWARD));
  COSTATE_PETSC(VecScatterEnd(im.to_all, im.natural, im.all, INSERT_VALUES, SCATTER_FORWARD));
  const PetscScalar* a = nullptr;
  COSTATE_PETSC(VecGetArrayRead(im.all, &a));
  std::vector<double> out(a, a + global_size());
  COSTATE_PETSC(VecRestoreArrayRead(im.all, &a));
  return out;
}

void Grid::scatter(std::span<const double> natural, const GlobalVector& global) const {
  COSTATE_CHECK_EQ(natural.size(), static_cast<std::size_t>(global_size()),
                   "pde::Grid::scatter: the natural-order field must have the global size");
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::scatter: global vector size");
  Impl& im = *impl_;
  if (im.natural == nullptr) {
    COSTATE_PETSC(DMDACreateNaturalVector(im.da, &im.natural));
    COSTATE_PETSC(VecScatterCreateToAll(im.natural, &im.to_all, &im.all));
  }
  PetscInt lo = 0, hi = 0;
  COSTATE_PETSC(VecGetOwnershipRange(im.natural, &lo, &hi));
  PetscScalar* a = nullptr;
  COSTATE_PETSC(VecGetArray(im.natural, &a));
  std::copy(natural.begin() + lo, natural.begin() + hi, a);
  COSTATE_PETSC(VecRestoreArray(im.natural, &a));
  COSTATE_PETSC(VecPlaceArray(im.g, global.data()));
  COSTATE_PETSC(DMDANaturalToGlobalBegin(im.da, im.natural, INSERT_VALUES, im.g));
  COSTATE_PETSC(DMDANaturalToGlobalEnd(im.da, im.natural, INSERT_VALUES, im.g));
  COSTATE_PETSC(VecResetArray(im.g));
}

// ------------------------------------------------------------------ Matrix

struct Matrix::Impl {
  Mat a = nullptr;
  Vec x = nullptr, y = nullptr;  // shells
  ISLocalToGlobalMapping ltog = nullptr;
  ~Impl() {
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;
    VecDestroy(&y);
    VecDestroy(&x);
    MatDestroy(&a);
  }
};

Matrix::Matrix(const Grid& grid) : grid_(&grid), impl_(std::make_unique<Impl>()) {
  DM da = static_cast<DM>(grid.petsc_dm());
  COSTATE_PETSC(DMSetMatType(da, MATAIJ));
  COSTATE_PETSC(DMCreateMatrix(da, &impl_->a));
  COSTATE_PETSC(MatSetOption(impl_->a, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));
  COSTATE_PETSC(MatCreateVecs(impl_->a, &impl_->x, &impl_->y));
  COSTATE_PETSC(DMGetLocalToGlobalMapping(da, &impl_->ltog));
}

Matrix::~Matrix() = default;
Matrix::Matrix(Matrix&&) noexcept = default;
Matrix& Matrix::operator=(Matrix&&) noexcept = default;

void* Matrix::petsc_mat() const { return impl_->a; }

void Matrix::zero() { COSTATE_PETSC(MatZeroEntries(impl_->a)); }

void Matrix::set_row(std::int64_t row, std::span<const std::int64_t> cols,
                     std::span<const double> values) {
  COSTATE_CHECK_EQ(cols.size(), values.size(), "pde::Matrix::set_row: one value per column");
  PetscInt r = static_cast<PetscInt>(row);
  PetscInt c[64];
  const std::size_t n = cols.size();
  COSTATE_CHECK(n <= 64, "pde::Matrix::set_row: at most 64 entries per row");
  for (std::size_t e = 0; e < n; ++e) c[e] = static_cast<PetscInt>(cols[e]);
  COSTATE_PETSC(MatSetValuesLocal(impl_->a, 1, &r, static_cast<PetscInt>(n), c, values.data(),
                                  INSERT_VALUES));
}

void Matrix::assemble() {
  COSTATE_PETSC(MatAssemblyBegin(impl_->a, MAT_FINAL_ASSEMBLY));
  COSTATE_PETSC(MatAssemblyEnd(impl_->a, MAT_FINAL_ASSEMBLY));
}

void Matrix::shifted_copy_of(const Matrix& b_matrix, double a, double b) {
  COSTATE_PETSC(MatCopy(b_matrix.impl_->a, impl_->a, SAME_NONZERO_PATTERN));
  COSTATE_PETSC(MatScale(impl_->a, b));
  COSTATE_PETSC(MatShift(impl_->a, a));
}

void Matrix::mult(const GlobalVector& x, const GlobalVector& y) const {
  Impl& im = *impl_;
  COSTATE_PETSC(VecPlaceArray(im.x, x.data()));
  COSTATE_PETSC(VecPlaceArray(im.y, y.data()));
  COSTATE_PETSC(MatMult(im.a, im.x, im.y));
  COSTATE_PETSC(VecResetArray(im.y));
  COSTATE_PETSC(VecResetArray(im.x));
}

void Matrix::mult_transpose(const GlobalVector& x, const GlobalVector& y) const {
  Impl& im = *impl_;
  COSTATE_PETSC(VecPlaceArray(im.x, x.data()));
  COSTATE_PETSC(VecPlaceArray(im.y, y.data()));
  COSTATE_PETSC(MatMultTranspose(im.a, im.x, im.y));
  COSTATE_PETSC(VecResetArray(im.y));
  COSTATE_PETSC(VecResetArray(im.x));
}

std::vector<std::pair<std::int64_t, double>> Matrix::global_row(std::int64_t row) const {
  PetscInt n = 0;
  const PetscInt* cols = nullptr;
  const PetscScalar* vals = nullptr;
  COSTATE_PETSC(MatGetRow(impl_->a, static_cast<PetscInt>(row), &n, &cols, &vals));
  std::vector<std::pair<std::int64_t, double>> out;
  for (PetscInt e = 0; e < n; ++e) out.emplace_back(cols[e], vals[e]);
  COSTATE_PETSC(MatRestoreRow(impl_->a, static_cast<PetscInt>(row), &n, &cols, &vals));
  return out;
}

std::int64_t Matrix::first_row() const {
  PetscInt lo = 0, hi = 0;
  COSTATE_PETSC(MatGetOwnershipRange(impl_->a, &lo, &hi));
  return lo;
}

std::int64_t Matrix::global_of_local(std::int64_t l) const {
  PetscInt in = static_cast<PetscInt>(l), out = -1;
  COSTATE_PETSC(ISLocalToGlobalMappingApply(impl_->ltog, 1, &in, &out));
  return out;
}

// ------------------------------------------------------------ KrylovSolver

struct KrylovSolver::Impl {
  KSP ksp = nullptr;
  Vec b = nullptr, x = nullptr;  // shells
  const Grid* grid = nullptr;
  bool symmetric = false;  // Aᵀ = A exactly: transposed solves are plain solves
  linear::KspOptions options;
  std::string description;
  ~Impl() {
    PetscBool finalized = PETSC_TRUE;
    PetscFinalized(&finalized);
    if (finalized) return;
    VecDestroy(&x);
    VecDestroy(&b);
    KSPDestroy(&ksp);
  }
  linear::Summary run(const GlobalVector& rhs, const GlobalVector& sol, bool guess,
                      bool transpose) const {
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
    s.backend = description + (transpose ? " (transposed)" : "");
    s.rows = grid->global_size();
    s.factorization_reused = true;
    linear::detail::read_outcome(ksp, s);
    PetscReal rn = 0;
    COSTATE_PETSC(KSPGetResidualNorm(ksp, &rn));
    s.residual_norm = rn;
    return s;
  }
};

KrylovSolver::KrylovSolver(const Grid& grid, const linear::KspOptions& options)
    : impl_(std::make_unique<Impl>()) {
  options.validate();
  Impl& im = *impl_;
  im.grid = &grid;
  im.options = options;
  im.ksp = linear::detail::create_ksp(grid.comm(), options);
  DM da = static_cast<DM>(grid.petsc_dm());
  COSTATE_PETSC(DMCreateGlobalVector(da, &im.b));
  COSTATE_PETSC(DMCreateGlobalVector(da, &im.x));
}

KrylovSolver::~KrylovSolver() = default;
KrylovSolver::KrylovSolver(KrylovSolver&&) noexcept = default;
KrylovSolver& KrylovSolver::operator=(KrylovSolver&&) noexcept = default;

void KrylovSolver::set_operator(const Matrix& a) {
  Impl& im = *impl_;
  Mat m = static_cast<Mat>(a.petsc_mat());
  COSTATE_PETSC(KSPSetOperators(im.ksp, m, m));
  // An exactly symmetric matrix (checked entry by entry, O(nnz)) needs no
  // transposed triangular solves: Aᵀ μ = λ is A μ = λ, with the same
  // preconditioner and the (faster) forward kernels.
  PetscBool sym = PETSC_FALSE;
  COSTATE_PETSC(MatIsSymmetric(m, 0.0, &sym));
  im.symmetric = sym == PETSC_TRUE;
  COSTATE_PETSC(KSPSetUp(im.ksp));
  KSPType kt = nullptr;
  PCType pt = nullptr;
  PC pc;
  COSTATE_PETSC(KSPGetType(im.ksp, &kt));
  COSTATE_PETSC(KSPGetPC(im.ksp, &pc));
  COSTATE_PETSC(PCGetType(pc, &pt));
  im.description = std::string("petsc ksp ") + (kt ? kt : "?") + "/" + (pt ? pt : "none") +
                   (im.grid->size() > 1 ? " on " + std::to_string(im.grid->size()) + " ranks" : "");
}

linear::Summary KrylovSolver::solve(const GlobalVector& b, const GlobalVector& x, bool guess) const {
  return impl_->run(b, x, guess, false);
}

linear::Summary KrylovSolver::solve_transpose(const GlobalVector& b, const GlobalVector& x,
                                              bool guess) const {
  return impl_->run(b, x, guess, true);
}

const std::string& KrylovSolver::description() const { return impl_->description; }

}  // namespace costate::pde
