#include "costate/tensor/reduce.hpp"

#include <cstdint>

#include "costate/core/error.hpp"

namespace costate {

void global_sum(MPI_Comm comm, double* values, std::size_t n) {
  if (comm == MPI_COMM_NULL || n == 0) return;
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  COSTATE_CHECK_LE(n, static_cast<std::size_t>(INT32_MAX), "global_sum: too many values");
  std::vector<double> all(static_cast<std::size_t>(size) * n);
  const int rc = MPI_Allgather(values, static_cast<int>(n), MPI_DOUBLE, all.data(),
                               static_cast<int>(n), MPI_DOUBLE, comm);
  COSTATE_CHECK_EQ(rc, MPI_SUCCESS, "MPI_Allgather failed in global_sum");
  for (std::size_t j = 0; j < n; ++j) {
    double s = 0.0;
    for (int r = 0; r < size; ++r) s += all[static_cast<std::size_t>(r) * n + j];
    values[j] = s;
  }
}

double global_sum(MPI_Comm comm, double local) {
  global_sum(comm, &local, 1);
  return local;
}

double global_max(MPI_Comm comm, double local) {
  if (comm == MPI_COMM_NULL) return local;
  double out = local;
  MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}

double global_min(MPI_Comm comm, double local) {
  if (comm == MPI_COMM_NULL) return local;
  double out = local;
  MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MIN, comm);
  return out;
}

std::size_t global_count(MPI_Comm comm, std::size_t local) {
  if (comm == MPI_COMM_NULL) return local;
  unsigned long long in = local, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  return static_cast<std::size_t>(out);
}

}  // namespace costate
