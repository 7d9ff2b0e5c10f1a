#include "costate/core/info.hpp"

#include <Eigen/Core>
#include <Kokkos_Core.hpp>
#include <hdf5.h>
#include <mpi.h>

#include "costate/config.hpp"
#include "petsc/petsc_runtime.hpp"
#include "sundials/sundials_runtime.hpp"

namespace costate {

BuildInfo build_info() {
  BuildInfo info;
  info.costate_version = COSTATE_VERSION_STRING;
  info.compiler = COSTATE_CXX_COMPILER;
  info.build_type = COSTATE_BUILD_TYPE;

  char mpi_lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi_lib, &len);
  std::string mpi(mpi_lib, static_cast<std::size_t>(len));
  if (auto pos = mpi.find(','); pos != std::string::npos) mpi.resize(pos);
  while (!mpi.empty() && (mpi.back() == '\n' || mpi.back() == ' ' || mpi.back() == '\0'))
    mpi.pop_back();
  int mpi_major = 0, mpi_minor = 0;
  MPI_Get_version(&mpi_major, &mpi_minor);
  info.dependencies.emplace_back(
      "MPI", mpi + " (MPI " + std::to_string(mpi_major) + "." + std::to_string(mpi_minor) + ")");
  info.dependencies.emplace_back("PETSc", detail::petsc_version());
  info.dependencies.emplace_back("SUNDIALS", detail::sundials_version());
  info.dependencies.emplace_back("Kokkos", std::to_string(KOKKOS_VERSION / 10000) + "." +
                                               std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                                               std::to_string(KOKKOS_VERSION % 100));
  info.dependencies.emplace_back("Eigen", std::to_string(EIGEN_WORLD_VERSION) + "." +
                                              std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                              std::to_string(EIGEN_MINOR_VERSION));
  unsigned h5_major = 0, h5_minor = 0, h5_release = 0;
  H5get_libversion(&h5_major, &h5_minor, &h5_release);
  info.dependencies.emplace_back("HDF5", std::to_string(h5_major) + "." +
                                             std::to_string(h5_minor) + "." +
                                             std::to_string(h5_release));
  info.dependencies.emplace_back("yaml-cpp", COSTATE_YAML_CPP_VERSION_STRING);
#ifdef H5_HAVE_PARALLEL
  info.hdf5_parallel = true;
#endif

  info.kokkos_default_space = Kokkos::DefaultExecutionSpace::name();
  info.kokkos_backends.push_back(info.kokkos_default_space);
  auto add = [&](const char* name) {
    if (info.kokkos_default_space != name) info.kokkos_backends.emplace_back(name);
  };
#if defined(KOKKOS_ENABLE_SERIAL)
  add("Serial");
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  add("OpenMP");
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  add("Threads");
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  add("Cuda");
#endif
#if defined(KOKKOS_ENABLE_HIP)
  add("HIP");
#endif
#if defined(KOKKOS_ENABLE_SYCL)
  add("SYCL");
#endif
  info.petsc_configuration = detail::petsc_configuration();

  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &info.mpi_size);
  return info;
}

}  // namespace costate
