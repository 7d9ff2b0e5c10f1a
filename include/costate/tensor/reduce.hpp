#pragma once
/// \file
/// Deterministic reductions over an MPI communicator.
///
/// MPI_Allreduce(MPI_SUM) does not promise an order of summation, so the
/// same run could give different bits. costate instead gathers every rank's
/// partial sum and adds them in rank order on every rank: the result is
/// bitwise the same on every rank and on every repetition with the same
/// decomposition. Collective over `comm`; with MPI_COMM_NULL (a serial
/// vector) no MPI call is made.

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace costate {

/// Sum of one partial per rank, added in rank order. Collective.
double global_sum(MPI_Comm comm, double local);
/// Elementwise sum of `n` partials per rank, added in rank order. Collective.
void global_sum(MPI_Comm comm, double* values, std::size_t n);
/// Largest value over the ranks (order-independent). Collective.
double global_max(MPI_Comm comm, double local);
/// Smallest value over the ranks. Collective.
double global_min(MPI_Comm comm, double local);
/// Sum of sizes over the ranks. Collective.
std::size_t global_count(MPI_Comm comm, std::size_t local);

}  // namespace costate
