// pde::Grid, pde::Matrix, pde::KrylovSolver: libcostate's half. The checks,
// the process grid and the outer ghosts are here; the DMDA, Mat and KSP are
// in libcostate_petsc (solvers/petsc/pde_grid.cpp), reached through the
// PETSc module's table (petsc/module.hpp) — never by a direct reference.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/matrix.hpp"
#include "petsc/module.hpp"

namespace costate::pde {

namespace {

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

const costate::detail::PetscModule& module(const char* what) { return costate::detail::petsc_module(what); }

}  // namespace

struct Grid::Impl {
  std::unique_ptr<costate::detail::PdeGridBackend> backend;
  std::vector<std::int64_t> outer_ghosts;  // local indices of outer boundary ghosts
};

Grid::Grid(MPI_Comm comm, const GridSpec& spec) : spec_(spec), comm_(comm) {
  const auto& petsc = module("pde::Grid (a PETSc DMDA)");
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
  std::array<std::vector<std::int64_t>, 3> ranges;
  for (int d = 0; d < 3; ++d) {
    const auto D = static_cast<std::size_t>(d);
    const std::int64_t n = spec_.cells[D];
    const int p = procs_[D];
    for (int r = 0; r < p; ++r) ranges[D].push_back(n / p + (r < n % p ? 1 : 0));
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
  costate::detail::PdeGridParts parts = petsc.make_grid(comm, spec_, procs_, ranges);
  owned_ = parts.owned;
  ghosted_ = parts.ghosted;
  for (int d = spec_.dim; d < 3; ++d) {
    owned_.start[static_cast<std::size_t>(d)] = ghosted_.start[static_cast<std::size_t>(d)] = 0;
    owned_.count[static_cast<std::size_t>(d)] = ghosted_.count[static_cast<std::size_t>(d)] = 1;
  }
  impl_ = std::make_unique<Impl>();
  impl_->backend = std::move(parts.backend);
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

void* Grid::petsc_dm() const { return impl_->backend->dm(); }

GlobalVector Grid::create_global(const std::string& label) const {
  return GlobalVector(owned_size(), comm_, label);
}

LocalArray Grid::create_local(const std::string& label) const {
  return LocalArray(label, ghosted_size());
}

void Grid::global_to_local(const GlobalVector& global, const LocalArray& local) const {
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::global_to_local: global vector size");
  COSTATE_CHECK_EQ(local.extent(0), ghosted_size(), "pde::Grid::global_to_local: local array size");
  impl_->backend->global_to_local(global, local);
  double* p = local.data();
  for (std::int64_t e : impl_->outer_ghosts) p[e] = 0.0;
}

void Grid::local_to_global_add(const LocalArray& local, const GlobalVector& global) const {
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::local_to_global_add: global vector size");
  COSTATE_CHECK_EQ(local.extent(0), ghosted_size(), "pde::Grid::local_to_global_add: local array size");
  impl_->backend->local_to_global_add(local, global);
}

std::vector<double> Grid::gather(const GlobalVector& global) const {
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::gather: global vector size");
  std::vector<double> out(static_cast<std::size_t>(global_size()));
  impl_->backend->gather(global, out);
  return out;
}

void Grid::scatter(std::span<const double> natural, const GlobalVector& global) const {
  COSTATE_CHECK_EQ(natural.size(), static_cast<std::size_t>(global_size()),
                   "pde::Grid::scatter: the natural-order field must have the global size");
  COSTATE_CHECK_EQ(global.size(), owned_size(), "pde::Grid::scatter: global vector size");
  impl_->backend->scatter(natural, global);
}

// ------------------------------------------------------------------ Matrix

struct Matrix::Impl {
  std::unique_ptr<costate::detail::PdeMatrixBackend> backend;
};

Matrix::Matrix(const Grid& grid) : grid_(&grid), impl_(std::make_unique<Impl>()) {
  impl_->backend = module("pde::Matrix (a PETSc Mat)").make_matrix(grid);
}

Matrix::~Matrix() = default;
Matrix::Matrix(Matrix&&) noexcept = default;
Matrix& Matrix::operator=(Matrix&&) noexcept = default;

void* Matrix::petsc_mat() const { return impl_->backend->mat(); }
void Matrix::zero() { impl_->backend->zero(); }

void Matrix::set_row(std::int64_t row, std::span<const std::int64_t> cols,
                     std::span<const double> values) {
  COSTATE_CHECK_EQ(cols.size(), values.size(), "pde::Matrix::set_row: one value per column");
  impl_->backend->set_row(row, cols, values);
}

void Matrix::assemble() { impl_->backend->assemble(); }

void Matrix::shifted_copy_of(const Matrix& b_matrix, double a, double b) {
  impl_->backend->shifted_copy_of(*b_matrix.impl_->backend, a, b);
}

void Matrix::mult(const GlobalVector& x, const GlobalVector& y) const { impl_->backend->mult(x, y); }

void Matrix::mult_transpose(const GlobalVector& x, const GlobalVector& y) const {
  impl_->backend->mult_transpose(x, y);
}

std::vector<std::pair<std::int64_t, double>> Matrix::global_row(std::int64_t row) const {
  return impl_->backend->global_row(row);
}

std::int64_t Matrix::first_row() const { return impl_->backend->first_row(); }

std::int64_t Matrix::global_of_local(std::int64_t l) const { return impl_->backend->global_of_local(l); }

// ------------------------------------------------------------ KrylovSolver

struct KrylovSolver::Impl {
  std::unique_ptr<costate::detail::PdeKrylovBackend> backend;
};

KrylovSolver::KrylovSolver(const Grid& grid, const linear::KspOptions& options)
    : impl_(std::make_unique<Impl>()) {
  options.validate();
  impl_->backend = module("pde::KrylovSolver (a PETSc KSP)").make_krylov(grid, options);
}

KrylovSolver::~KrylovSolver() = default;
KrylovSolver::KrylovSolver(KrylovSolver&&) noexcept = default;
KrylovSolver& KrylovSolver::operator=(KrylovSolver&&) noexcept = default;

void KrylovSolver::set_operator(const Matrix& a) { impl_->backend->set_operator(a.petsc_mat()); }

linear::Summary KrylovSolver::solve(const GlobalVector& b, const GlobalVector& x, bool guess) const {
  return impl_->backend->solve(b, x, guess, false);
}

linear::Summary KrylovSolver::solve_transpose(const GlobalVector& b, const GlobalVector& x,
                                              bool guess) const {
  return impl_->backend->solve(b, x, guess, true);
}

const std::string& KrylovSolver::description() const { return impl_->backend->description(); }

}  // namespace costate::pde
