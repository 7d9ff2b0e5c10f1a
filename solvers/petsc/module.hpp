#pragma once
// Private: the PETSc module — what libcostate reaches of PETSc, as one table
// that libcostate_petsc installs when it is loaded.
//
// libcostate never references a symbol of libcostate_petsc (nor of PETSc):
// every PETSc-backed operation it offers (PetscInitialize, TAO's minimize,
// SNES, the DMDA grid, its matrices and Krylov solvers) goes through
// petsc_module(). libcostate_petsc depends on libcostate, not the reverse,
// so a process without PETSc (the front `costate`) loads and binds
// libcostate completely (LD_BIND_NOW=1 included).
//
// Loading: a program linked with costate::costate has libcostate_petsc among
// its libraries, and its static initialiser installs the table. When it was
// left out (a link with --as-needed, or a program that linked libcostate
// alone), the first use loads it with dlopen — from libcostate's own
// directory, else by the dynamic loader's search path — or, failing that,
// throws costate::Error naming what needed it.
//
// No PETSc header is included here: the grid, matrix and solver objects are
// interfaces that solvers/petsc/pde_grid.cpp implements.

#include <mpi.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "costate/linear/ksp_options.hpp"
#include "costate/linear/summary.hpp"
#include "costate/nonlinear/detail/newton.hpp"
#include "costate/optimize/tao.hpp"
#include "costate/pde/grid.hpp"

namespace costate::detail {

/// The PETSc side of a pde::Grid: its DMDA, and the exchanges through it.
/// Signatures as pde::Grid's members (grid.hpp states their maths).
class PdeGridBackend {
 public:
  virtual ~PdeGridBackend() = default;
  virtual void* dm() const = 0;  ///< the DM
  /// local = G global, all ghosts (outer boundary ghosts are Grid's business).
  virtual void global_to_local(const pde::GlobalVector& global, const pde::LocalArray& local) = 0;
  virtual void local_to_global_add(const pde::LocalArray& local, const pde::GlobalVector& global) = 0;
  /// `natural` has the grid's global size.
  virtual void gather(const pde::GlobalVector& global, std::span<double> natural) = 0;
  virtual void scatter(std::span<const double> natural, const pde::GlobalVector& global) = 0;
};

/// What building a grid's DMDA gives: its backend and this rank's boxes.
struct PdeGridParts {
  std::unique_ptr<PdeGridBackend> backend;
  pde::Box owned, ghosted;  ///< as DMDAGetCorners / DMDAGetGhostCorners report them
};

/// The PETSc side of a pde::Matrix (matrix.hpp states the maths).
class PdeMatrixBackend {
 public:
  virtual ~PdeMatrixBackend() = default;
  virtual void* mat() const = 0;  ///< the Mat
  virtual void zero() = 0;
  virtual void set_row(std::int64_t row, std::span<const std::int64_t> cols,
                       std::span<const double> values) = 0;
  virtual void assemble() = 0;
  virtual void shifted_copy_of(const PdeMatrixBackend& b_matrix, double a, double b) = 0;
  virtual void mult(const pde::GlobalVector& x, const pde::GlobalVector& y) const = 0;
  virtual void mult_transpose(const pde::GlobalVector& x, const pde::GlobalVector& y) const = 0;
  virtual std::vector<std::pair<std::int64_t, double>> global_row(std::int64_t row) const = 0;
  virtual std::int64_t first_row() const = 0;
  virtual std::int64_t global_of_local(std::int64_t l) const = 0;
};

/// The PETSc side of a pde::KrylovSolver.
class PdeKrylovBackend {
 public:
  virtual ~PdeKrylovBackend() = default;
  virtual void set_operator(void* mat) = 0;  ///< a PdeMatrixBackend's mat()
  virtual linear::Summary solve(const pde::GlobalVector& b, const pde::GlobalVector& x, bool guess,
                                bool transpose) const = 0;
  virtual const std::string& description() const = 0;
};

/// The table. Every entry is set by libcostate_petsc.
struct PetscModule {
  /// PetscInitialize unless already initialised; true if it did
  /// (petsc_runtime.hpp: petsc_initialize).
  bool (*initialize)(int* argc, char*** argv) = nullptr;
  void (*finalize)() = nullptr;
  /// optimize::minimize (TAO).
  optimize::TaoResult (*minimize)(const optimize::Objective& f, std::span<const double> x0,
                                  std::span<const double> lower, std::span<const double> upper,
                                  const optimize::TaoOptions& options,
                                  const std::function<void(const optimize::Iteration&)>& monitor) =
      nullptr;
  /// nonlinear::detail::newton_snes (SNES).
  nonlinear::Summary (*newton_snes)(const nonlinear::detail::Problem& problem, std::vector<double>& x,
                                    const nonlinear::Options& options) = nullptr;
  /// The DMDA of a grid whose spec was validated and checked across ranks;
  /// `procs` and `ranges` (cells per process along each dimension) are
  /// chosen. Collective over `comm`.
  PdeGridParts (*make_grid)(MPI_Comm comm, const pde::GridSpec& spec, const std::array<int, 3>& procs,
                            const std::array<std::vector<std::int64_t>, 3>& ranges) = nullptr;
  std::unique_ptr<PdeMatrixBackend> (*make_matrix)(const pde::Grid& grid) = nullptr;
  std::unique_ptr<PdeKrylovBackend> (*make_krylov)(const pde::Grid& grid,
                                                   const linear::KspOptions& options) = nullptr;
};

/// Called once by libcostate_petsc's static initialiser.
void install_petsc_module(const PetscModule& module);
/// The installed table (loading libcostate_petsc first when needed). Throws
/// costate::Error naming `what` when it cannot be loaded.
const PetscModule& petsc_module(const char* what);
/// Whether the table is installed (nothing is loaded by asking).
bool petsc_module_loaded();

// ---- libcostate_petsc's entries of the table --------------------------------
// Defined in libcostate_petsc only, and named only by its installer
// (petsc_runtime.cpp); a call from libcostate would be an undefined reference,
// which its link (-Wl,--no-undefined) and the petsc_module_cut test refuse.
// (petsc_initialize and petsc_finalize: petsc_runtime.hpp.)
optimize::TaoResult tao_minimize(const optimize::Objective& f, std::span<const double> x0,
                                 std::span<const double> lower, std::span<const double> upper,
                                 const optimize::TaoOptions& options,
                                 const std::function<void(const optimize::Iteration&)>& monitor);
nonlinear::Summary snes_newton(const nonlinear::detail::Problem& problem, std::vector<double>& x,
                               const nonlinear::Options& options);
PdeGridParts petsc_make_grid(MPI_Comm comm, const pde::GridSpec& spec, const std::array<int, 3>& procs,
                             const std::array<std::vector<std::int64_t>, 3>& cells_per_process);
std::unique_ptr<PdeMatrixBackend> petsc_make_matrix(const pde::Grid& grid);
std::unique_ptr<PdeKrylovBackend> petsc_make_krylov(const pde::Grid& grid,
                                                    const linear::KspOptions& options);

}  // namespace costate::detail
