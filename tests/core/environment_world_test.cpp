// costate::Environment as created by costate_test_main (the usual way: the
// Environment initialises MPI, PETSc and Kokkos itself). Runs serially and
// under `mpiexec -n 2`.
//
// costate_test_main's Environment is a local of main, so these tests cannot
// call its rank()/size(); the rank/size-versus-MPI checks on a live
// Environment object are in environment_test.cpp (own main).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <string>

#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"

namespace {

TEST(Environment, MainEnvironmentIsActiveAndInitialisedEverything) {
  EXPECT_TRUE(costate::Environment::active());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  EXPECT_TRUE(initialized);
  EXPECT_FALSE(finalized);
  EXPECT_TRUE(Kokkos::is_initialized());
}

TEST(Environment, SecondEnvironmentThrowsAndLeavesTheFirstActive) {
  try {
    costate::Environment second;
    FAIL() << "a second live Environment was allowed";
  } catch (const costate::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("already alive"), std::string::npos) << what;
  }
  EXPECT_TRUE(costate::Environment::active());
  EXPECT_TRUE(Kokkos::is_initialized());
}

TEST(Environment, WorldIsUsableOnEveryRank) {
  // rank and size as MPI reports them; the sum of ranks proves the world
  // communicator connects every process.
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ASSERT_GE(rank, 0);
  ASSERT_LT(rank, size);
  int total = 0;
  MPI_Allreduce(&rank, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, size * (size - 1) / 2);
}

}  // namespace
