// costate::Environment with MpiStart::when_launched (what `costate run` of
// an ODE uses): in a process started alone it starts no MPI — no Open MPI
// singleton start-up — and runs as rank 0 of 1; asked for PETSc, or under
// mpiexec, it starts MPI as before.
//
// Own main: the first Environment must be created before anything starts
// MPI. Registered serially (no launcher variables: they are cleared below,
// as for a process started from a shell) and under `mpiexec -n 2`.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>

#include "costate/core/environment.hpp"

namespace {

bool g_launched = false;  // started by mpiexec (decided before any test)

bool mpi_initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

TEST(LazyEnvironment, StartsMpiOnlyWhenLaunchedOrForPetsc) {
  EXPECT_EQ(costate::launched_by_mpi(), g_launched);
  {
    costate::Environment env(nullptr, nullptr,
                             {.petsc = false, .kokkos = true, .mpi = costate::MpiStart::when_launched});
    EXPECT_EQ(env.mpi_started(), g_launched);
    EXPECT_EQ(mpi_initialized(), g_launched);
    EXPECT_TRUE(Kokkos::is_initialized());
    if (!g_launched) {
      EXPECT_EQ(env.rank(), 0);
      EXPECT_EQ(env.size(), 1);
      EXPECT_TRUE(env.is_root());
      EXPECT_FALSE(env.owns_mpi());
    } else {
      EXPECT_EQ(env.size(), 2);
      EXPECT_TRUE(env.owns_mpi());
    }
  }
  // Kokkos cannot be initialised twice in a process; MPI cannot be
  // initialised after MPI_Finalize. So the second half runs only alone:
  // PETSc asked for, MPI is started even with when_launched.
  if (g_launched) return;
  EXPECT_FALSE(mpi_initialized());
  costate::Environment env(nullptr, nullptr,
                           {.petsc = true, .kokkos = false, .mpi = costate::MpiStart::when_launched});
  EXPECT_TRUE(env.mpi_started());
  EXPECT_TRUE(mpi_initialized());
  EXPECT_TRUE(env.owns_mpi());
  EXPECT_TRUE(env.owns_petsc());
  EXPECT_EQ(env.size(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_launched = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
               std::getenv("PMI_RANK") != nullptr;
  if (!g_launched)
    for (const char* v : {"PMI_SIZE", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"}) unsetenv(v);
  return RUN_ALL_TESTS();
}
