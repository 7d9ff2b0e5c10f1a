#pragma once
/// \file
/// costate::Environment — RAII set-up and tear-down of MPI, PETSc and Kokkos.
///
/// Construction initialises, in this order and each only if the host code has
/// not already done so: MPI (MPI_Init_thread, FUNNELED), PETSc
/// (PetscInitialize on the MPI world), Kokkos (Kokkos::initialize).
/// Destruction finalises, in reverse order, exactly what it initialised; what
/// the host initialised is left for the host to finalise.
///
/// Works as one process without mpiexec (MPI singleton) and under
/// `mpiexec -n N`. Collective over MPI_COMM_WORLD. At most one Environment
/// may be alive at a time in a process.

#include <mpi.h>

#include <string>

namespace costate {

struct EnvironmentOptions {
  /// Initialise PETSc (KSP/SNES/TS/TAO backends need it).
  bool petsc = true;
  /// Initialise Kokkos.
  bool kokkos = true;
};

class Environment {
 public:
  /// `argc`/`argv` are passed to PETSc (options database) and Kokkos
  /// (--kokkos-* arguments, which Kokkos removes). Either may be null.
  Environment(int* argc, char*** argv, EnvironmentOptions options = {});
  Environment(int& argc, char**& argv, EnvironmentOptions options = {})
      : Environment(&argc, &argv, options) {}
  Environment() : Environment(nullptr, nullptr, {}) {}
  ~Environment();

  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  /// MPI_COMM_WORLD, its rank and size.
  MPI_Comm comm() const { return MPI_COMM_WORLD; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  /// Which libraries this Environment initialised (and will finalise).
  bool owns_mpi() const { return owns_mpi_; }
  bool owns_petsc() const { return owns_petsc_; }
  bool owns_kokkos() const { return owns_kokkos_; }

  /// True while an Environment is alive in this process.
  static bool active();

 private:
  bool owns_mpi_ = false;
  bool owns_petsc_ = false;
  bool owns_kokkos_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace costate
