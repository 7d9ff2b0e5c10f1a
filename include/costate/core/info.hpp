#pragma once
/// \file
/// What this costate was built with and runs on: the versions of every
/// dependency (read from the libraries themselves where they can tell), the
/// enabled Kokkos backends and the MPI world size. `costate info` prints it.

#include <string>
#include <utility>
#include <vector>

namespace costate {

struct BuildInfo {
  std::string costate_version;
  std::string compiler;
  std::string build_type;
  /// (dependency, version) pairs in a fixed order: MPI, PETSc, SUNDIALS,
  /// Kokkos, Eigen, HDF5, yaml-cpp.
  std::vector<std::pair<std::string, std::string>> dependencies;
  /// Kokkos execution spaces compiled in, the default one first.
  std::vector<std::string> kokkos_backends;
  std::string kokkos_default_space;
  std::string petsc_configuration;
  bool hdf5_parallel = false;
  /// MPI_COMM_WORLD size (1 when MPI is not initialised).
  int mpi_size = 1;
};

/// Gathers BuildInfo; needs no Environment, but mpi_size is only meaningful
/// under one.
BuildInfo build_info();

}  // namespace costate
