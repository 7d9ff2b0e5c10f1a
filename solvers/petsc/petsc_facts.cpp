// The PETSc facts (version, configuration, PETSC_MAX_INT: macros of its headers)
// and the selection of its arguments: compiled into libcostate, nothing of the
// PETSc library is called, so that `costate info` and input files do not load
// it. PetscInitialize/PetscFinalize are in the PETSc module (petsc_runtime.cpp).
#include "petsc/petsc_runtime.hpp"

#include <petscsys.h>

#include <cctype>
#include <string_view>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::detail {

namespace {

/// The option-name prefixes of PETSc's options database (solvers, objects,
/// logging and debugging), each matched after the leading '-'.
constexpr std::string_view kPetscPrefixes[] = {
    "tao_", "ksp_", "pc_", "snes_", "ts_", "mat_", "vec_", "dm_", "da_", "is_", "sf_",
    "mg_", "sub_", "fieldsplit_", "log", "malloc", "memory_", "options_", "info",
    "help", "version", "on_error_", "mpi_", "viewer_", "draw_", "petsc", "history",
    "start_in_debugger", "debugger", "stop_for_debugger", "fp_trap", "check_pointer",
    "no_signal_handler", "objects_dump", "use_gpu", "device_", "blas_", "matmatmult_",
    "matproduct_", "time_", "threadcomm_"};

bool is_petsc_option(std::string_view arg) {
  // A single dash and a letter: "--set" and "-1e-3" are not PETSc options.
  if (arg.size() < 2 || arg[0] != '-' || !std::isalpha(static_cast<unsigned char>(arg[1])))
    return false;
  const std::string_view name = arg.substr(1);
  for (std::string_view prefix : kPetscPrefixes)
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

bool is_option_value(std::string_view arg) {
  if (arg.empty() || arg[0] != '-') return true;
  // A negative number is a value, not an option.
  return arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');
}

}  // namespace

std::vector<std::string> petsc_arguments(int argc, const char* const* argv) {
  std::vector<std::string> out;
  if (argv == nullptr || argc < 1) return out;
  out.emplace_back(argv[0] != nullptr ? argv[0] : "costate");
  for (int i = 1; i < argc; ++i) {
    if (argv[i] == nullptr || !is_petsc_option(argv[i])) continue;
    out.emplace_back(argv[i]);
    if (i + 1 < argc && argv[i + 1] != nullptr && is_option_value(argv[i + 1]))
      out.emplace_back(argv[++i]);
  }
  return out;
}

std::int64_t petsc_max_index() { return static_cast<std::int64_t>(PETSC_MAX_INT); }

std::string petsc_version() {
  return std::to_string(PETSC_VERSION_MAJOR) + "." + std::to_string(PETSC_VERSION_MINOR) + "." +
         std::to_string(PETSC_VERSION_SUBMINOR);
}

std::string petsc_configuration() {
#if defined(PETSC_USE_COMPLEX)
  std::string scalar = "complex";
#else
  std::string scalar = "real";
#endif
  return scalar + ", " + std::to_string(sizeof(PetscReal) * 8) + "-bit reals, " +
         std::to_string(sizeof(PetscInt) * 8) + "-bit indices";
}

}  // namespace costate::detail
