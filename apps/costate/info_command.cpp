// `costate info [--json]`: the versions of costate and its dependencies, the
// Kokkos backends, PETSc's configuration, HDF5 and the MPI size.
#include <CLI/Version.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "costate/core/info.hpp"

namespace costate::cli {
namespace {

using Json = nlohmann::ordered_json;

void print_json(const BuildInfo& b) {
  Json j;
  j["status"] = "ok";
  j["costate_version"] = b.costate_version;
  j["compiler"] = b.compiler;
  j["build_type"] = b.build_type;
  Json deps = Json::object();
  for (const auto& [name, version] : b.dependencies) deps[name] = version;
  j["dependencies"] = deps;
  j["kokkos_backends"] = b.kokkos_backends;
  j["kokkos_default_execution_space"] = b.kokkos_default_space;
  j["petsc_configuration"] = b.petsc_configuration;
  j["hdf5_parallel"] = b.hdf5_parallel;
  j["mpi_size"] = b.mpi_size;
  std::cout << j.dump() << std::endl;
}

void print_text(const BuildInfo& b) {
  std::cout << "costate " << b.costate_version << " (" << b.build_type << ", " << b.compiler
            << ")\n\n";
  for (const auto& [name, version] : b.dependencies)
    std::cout << "  " << std::left << std::setw(15) << name << version << "\n";
  std::cout << "\n  Kokkos backends  " << join(b.kokkos_backends) << " (default "
            << b.kokkos_default_space << ")\n"
            << "  PETSc            " << b.petsc_configuration << "\n"
            << "  HDF5 parallel    " << (b.hdf5_parallel ? "yes" : "no") << "\n"
            << "  MPI ranks        " << b.mpi_size << "\n";
}

}  // namespace

int info_command(const Environment& env, const CommandArgs& args) {
  BuildInfo b = build_info();
  b.dependencies.emplace_back("CLI11", CLI11_VERSION);
  b.dependencies.emplace_back("nlohmann_json",
                              std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_PATCH));
  if (!env.is_root()) return 0;
  if (args.json)
    print_json(b);
  else
    print_text(b);
  return 0;
}

}  // namespace costate::cli
