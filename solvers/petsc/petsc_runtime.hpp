#pragma once
// Private: PETSc start-up and facts, kept behind this wall so that only
// solvers/ includes petsc headers.
#include <string>

namespace costate::detail {
/// PetscInitialize unless already initialised; returns true if it did.
bool petsc_initialize(int* argc, char*** argv);
/// PetscFinalize (only call when petsc_initialize returned true).
void petsc_finalize();
/// "3.18.5" and the scalar/precision configuration.
std::string petsc_version();
std::string petsc_configuration();
}  // namespace costate::detail
