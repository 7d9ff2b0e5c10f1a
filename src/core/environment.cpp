#include "costate/core/environment.hpp"

#include <Kokkos_Core.hpp>

#include <atomic>
#include <cstdlib>

#include "costate/core/error.hpp"
#include "petsc/module.hpp"

namespace costate {
namespace {
std::atomic<bool> g_active{false};
}

bool Environment::active() { return g_active.load(); }

bool launched_by_mpi() {
  // Open MPI, PMIx (Open MPI 4/5, Slurm's pmix), MPICH/Hydra and Intel MPI
  // (PMI), MVAPICH, Slurm's srun.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                           "MV2_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

Environment::Environment(int* argc, char*** argv, EnvironmentOptions options) {
  COSTATE_CHECK(!g_active.exchange(true),
                "a costate::Environment is already alive in this process; create one per process");
  int mpi_initialized = 0;
  MPI_Initialized(&mpi_initialized);
  if (!mpi_initialized && !options.petsc && options.mpi == MpiStart::when_launched &&
      !launched_by_mpi()) {
    // A process started alone that needs no MPI: rank 0 of 1, no singleton
    // start-up (Open MPI's orted).
    mpi_started_ = false;
  } else if (!mpi_initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      g_active = false;
      throw Error("MPI_Init_thread failed with MPI error code " + std::to_string(rc));
    }
    owns_mpi_ = true;
  }
  if (mpi_started_) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  try {
    if (options.petsc)
      owns_petsc_ = detail::petsc_module("PETSc (EnvironmentOptions::petsc)").initialize(argc, argv);
    if (options.kokkos && !Kokkos::is_initialized()) {
      if (argc != nullptr && argv != nullptr) {
        Kokkos::initialize(*argc, *argv);
      } else {
        Kokkos::initialize();
      }
      owns_kokkos_ = true;
    }
  } catch (...) {
    // Undo what was started, so that the process can report and retry.
    if (owns_petsc_) detail::petsc_module("PETSc").finalize();
    if (owns_mpi_) MPI_Finalize();
    g_active = false;
    throw;
  }
}

Environment::~Environment() {
  if (owns_kokkos_ && Kokkos::is_initialized()) Kokkos::finalize();
  if (owns_petsc_) detail::petsc_module("PETSc").finalize();
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  g_active = false;
}

}  // namespace costate
