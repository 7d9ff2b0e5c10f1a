#include "petsc/petsc_runtime.hpp"

#include <petscsys.h>

#include "costate/core/error.hpp"

namespace costate::detail {

bool petsc_initialize(int* argc, char*** argv) {
  PetscBool initialized = PETSC_FALSE;
  PetscInitialized(&initialized);
  if (initialized) return false;
  // PETSc reads its options database from argv (-ksp_type ...) but does not
  // remove them; it must not print help text of its own.
  const PetscErrorCode ierr = PetscInitialize(argc, argv, nullptr, nullptr);
  COSTATE_CHECK(ierr == 0, "PetscInitialize failed with PETSc error code " << ierr);
  return true;
}

void petsc_finalize() { PetscFinalize(); }

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
