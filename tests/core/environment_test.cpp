// costate::Environment inside a host code that owns MPI and Kokkos.
//
// This executable has its own main (not costate_test_main): like a host
// application, it calls MPI_Init and Kokkos::initialize itself, then runs the
// tests, which create and destroy costate::Environment objects. The
// Environment must take ownership of neither MPI nor Kokkos (it owns only
// PETSc, which the host did not initialise), and must leave both usable when
// it is destroyed. main then checks once more, after every Environment is
// gone, and finalises MPI and Kokkos itself.
//
// Registered as a serial test and under `mpiexec -n 2`.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdio>

#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"

namespace {

using costate::Environment;
using costate::EnvironmentOptions;

bool mpi_initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

bool mpi_finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

// A collective that only works while MPI is initialised and not finalised:
// the sum of (rank + 1) over the world is size (size + 1) / 2.
void expect_mpi_usable() {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int local = rank + 1, total = 0;
  ASSERT_EQ(MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(total, size * (size + 1) / 2);
}

// A Kokkos kernel that only runs while Kokkos is initialised: Σ_{i<100} i.
void expect_kokkos_usable() {
  long total = 0;
  Kokkos::parallel_reduce(
      "environment_test::sum", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, 100),
      KOKKOS_LAMBDA(int i, long& s) { s += i; }, total);
  EXPECT_EQ(total, 4950);
}

TEST(HostOwnedEnvironment, TakesOwnershipOfNeitherMpiNorKokkos) {
  ASSERT_TRUE(mpi_initialized());
  ASSERT_TRUE(Kokkos::is_initialized());
  ASSERT_FALSE(Environment::active());
  {
    Environment env;
    EXPECT_TRUE(Environment::active());
    EXPECT_FALSE(env.owns_mpi());
    EXPECT_FALSE(env.owns_kokkos());
    // PETSc was not initialised by the host, so the Environment did it.
    EXPECT_TRUE(env.owns_petsc());

    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ(env.rank(), rank);
    EXPECT_EQ(env.size(), size);
    EXPECT_EQ(env.is_root(), rank == 0);
    int same = MPI_UNEQUAL;
    MPI_Comm_compare(env.comm(), MPI_COMM_WORLD, &same);
    EXPECT_EQ(same, MPI_IDENT);
  }
  EXPECT_FALSE(Environment::active());
  // What the host initialised is still there and still works.
  EXPECT_TRUE(Kokkos::is_initialized());
  EXPECT_TRUE(mpi_initialized());
  EXPECT_FALSE(mpi_finalized());
  expect_mpi_usable();
  expect_kokkos_usable();
}

TEST(HostOwnedEnvironment, SecondEnvironmentWhileOneIsAliveThrows) {
  // Only the first test initialises (and finalises) PETSc: re-initialising
  // PETSc after PetscFinalize is not what these tests are about.
  const EnvironmentOptions no_petsc{.petsc = false, .kokkos = true};
  Environment first(nullptr, nullptr, no_petsc);
  EXPECT_TRUE(Environment::active());
  EXPECT_FALSE(first.owns_petsc());
  EXPECT_FALSE(first.owns_kokkos());
  EXPECT_FALSE(first.owns_mpi());
  try {
    Environment second(nullptr, nullptr, no_petsc);
    FAIL() << "a second live Environment was allowed";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already alive"), std::string::npos) << e.what();
  }
  // The failed construction must not have cleared the first one's flag.
  EXPECT_TRUE(Environment::active());
}

TEST(HostOwnedEnvironment, CanBeCreatedAgainAfterTheFirstIsDestroyed) {
  const EnvironmentOptions no_petsc{.petsc = false, .kokkos = true};
  for (int round = 0; round < 3; ++round) {
    EXPECT_FALSE(Environment::active());
    {
      Environment env(nullptr, nullptr, no_petsc);
      EXPECT_TRUE(Environment::active());
      EXPECT_FALSE(env.owns_kokkos());
      expect_kokkos_usable();
    }
    EXPECT_FALSE(Environment::active());
    EXPECT_TRUE(Kokkos::is_initialized());
    expect_mpi_usable();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // 1. The host initialises MPI and Kokkos itself.
  MPI_Init(&argc, &argv);
  Kokkos::initialize(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }

  // 2. The tests create and destroy Environments.
  int failed = RUN_ALL_TESTS();

  // 3. After every Environment is gone, MPI and Kokkos are still the host's.
  if (costate::Environment::active() || !Kokkos::is_initialized() || !mpi_initialized() ||
      mpi_finalized()) {
    std::fprintf(stderr, "rank %d: the Environment finalised what the host initialised\n", rank);
    failed = 1;
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

  // 4. The host finalises what it initialised.
  Kokkos::finalize();
  MPI_Finalize();
  return any_failed;
}
