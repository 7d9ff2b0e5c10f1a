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
///
/// Start-up cost: an MPI singleton (a process not started by mpiexec) makes
/// Open MPI spawn and wait for its `orted` daemon, ~0.4 s. A code that needs
/// neither PETSc nor MPI in a process started alone can skip that with
/// `.mpi = MpiStart::when_launched, .petsc = false`: it then runs as rank 0
/// of 1 without MPI (mpi_started() is false; comm() must not be used).

#include <mpi.h>

#include <string>

namespace costate {

/// When the Environment starts MPI.
enum class MpiStart {
  always,         ///< MPI_Init_thread in every case (the default)
  when_launched,  ///< only when started by an MPI launcher (mpiexec, srun, …) or for PETSc
};

/// True when this process was started by an MPI launcher: one of the
/// variables Open MPI, PMIx, MPICH/Hydra, Intel MPI, MVAPICH or Slurm set
/// for their ranks is in the environment.
bool launched_by_mpi();

struct EnvironmentOptions {
  /// Initialise PETSc (KSP/SNES/TS/TAO backends need it).
  bool petsc = true;
  /// Initialise Kokkos.
  bool kokkos = true;
  /// MPI: always, or only when launched by mpiexec (PETSc always needs it).
  MpiStart mpi = MpiStart::always;
};

class Environment {
 public:
  /// `argc`/`argv` go to MPI and Kokkos (--kokkos-* arguments, which Kokkos
  /// removes); PETSc's options database gets only the arguments meant for
  /// PETSc (detail::petsc_arguments: -tao_*, -ksp_*, -pc_*, …, each with
  /// its value), so that a host's own options (`-o out.h5`) are neither
  /// parsed by PETSc nor reported as unused. Either may be null.
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

  /// False when MPI was not started (MpiStart::when_launched in a process
  /// started alone, and no PETSc): rank 0 of 1, no MPI calls allowed.
  bool mpi_started() const { return mpi_started_; }

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
  bool mpi_started_ = true;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace costate
