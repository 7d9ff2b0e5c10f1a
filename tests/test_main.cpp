// GoogleTest main for costate tests: one costate::Environment (MPI, PETSc,
// Kokkos) around all tests of the executable. Under mpiexec every rank runs
// every test; only rank 0 prints GoogleTest's report.
#include <gtest/gtest.h>

#include "costate/core/environment.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  costate::Environment env(argc, argv);
  if (env.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  // A failure on any rank fails the test on every rank.
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, env.comm());
  return any_failed;
}
