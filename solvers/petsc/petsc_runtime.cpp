// PetscInitialize / PetscFinalize (petsc_runtime.hpp), and the installer of
// the PETSc module's table (petsc/module.hpp): libcostate_petsc's static
// initialiser, which runs when the library is loaded (at start-up when a
// program links it, or by libcostate's dlopen on first use).
#include "petsc/petsc_runtime.hpp"

#include <petscsys.h>

#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "petsc/module.hpp"

namespace costate::detail {

namespace {

/// The argument vector PETSc gets; PETSc keeps pointers into it until
/// PetscFinalize.
std::vector<std::string> g_arguments;
std::vector<char*> g_argv;
int g_argc = 0;

/// PETSc's own message for the error being raised (its first frame), for
/// COSTATE_PETSC's costate::Error; PETSc prints no error stack of its own.
thread_local std::string g_last_message;

PetscErrorCode capture_error(MPI_Comm, int, const char* function, const char*, PetscErrorCode code,
                             PetscErrorType type, const char* message, void*) {
  if (type == PETSC_ERROR_INITIAL) {
    g_last_message = message != nullptr ? message : "";
    if (function != nullptr) g_last_message += std::string(" (in ") + function + ")";
  }
  return code;
}

}  // namespace

std::string petsc_last_error_message() {
  std::string out;
  out.swap(g_last_message);
  return out;
}

bool petsc_initialize(int* argc, char*** argv) {
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  if (initialized) return false;
  // PETSc reads its options database from the arguments (-ksp_type ...):
  // give it only those meant for it, so that the host's options (-o FILE,
  // --set ...) are neither parsed nor reported as unused options.
  g_arguments = (argc != nullptr && argv != nullptr) ? petsc_arguments(*argc, *argv)
                                                     : std::vector<std::string>{};
  g_argv.clear();
  for (auto& a : g_arguments) g_argv.push_back(a.data());
  g_argv.push_back(nullptr);
  g_argc = static_cast<int>(g_arguments.size());
  char** pargv = g_argv.data();
  const PetscErrorCode ierr = g_argc > 0 ? PetscInitialize(&g_argc, &pargv, nullptr, nullptr)
                                         : PetscInitializeNoArguments();
  COSTATE_CHECK(ierr == 0, "PetscInitialize failed with PETSc error code " << ierr);
  // Errors inside PETSc come back as codes that COSTATE_PETSC turns into a
  // costate::Error carrying PETSc's message; no raw error stack on stderr.
  PetscPushErrorHandler(capture_error, nullptr);
  return true;
}

void petsc_finalize() { PetscFinalize(); }

namespace {

/// Installs the table once, when libcostate_petsc is loaded.
const bool g_installed = [] {
  install_petsc_module({.initialize = petsc_initialize,
                        .finalize = petsc_finalize,
                        .minimize = tao_minimize,
                        .newton_snes = snes_newton,
                        .make_grid = petsc_make_grid,
                        .make_matrix = petsc_make_matrix,
                        .make_krylov = petsc_make_krylov});
  return true;
}();

}  // namespace

}  // namespace costate::detail

/// Referenced by nothing; a static build's link marks it undefined
/// (-Wl,--undefined, CMakeLists.txt) so that this object, whose initialiser
/// installs the table, is taken from libcostate_petsc.a.
extern "C" const bool costate_petsc_module_anchor = costate::detail::g_installed;
