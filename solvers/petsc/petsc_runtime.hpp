#pragma once
// Private: PETSc start-up and facts, kept behind this wall so that only
// solvers/ includes petsc headers.
#include <cstdint>
#include <string>
#include <vector>

namespace costate::detail {
/// PetscInitialize unless already initialised; returns true if it did.
/// PETSc's options database gets petsc_arguments(*argc, *argv) only.
bool petsc_initialize(int* argc, char*** argv);
/// argv[0] and the arguments meant for PETSc: each `-name` whose name starts
/// with a PETSc prefix (tao_, ksp_, pc_, snes_, ts_, mat_, vec_, dm_, log,
/// malloc, options_, info, help, …), with the next argument when it is a
/// value (does not start with '-', or is a negative number). Everything
/// else (the host's `-o FILE`, `--set k=v`, positional files) is left out.
std::vector<std::string> petsc_arguments(int argc, const char* const* argv);
/// PETSc's message for the last error raised on this thread (and the PETSc
/// function raising it), then cleared; empty when none was captured.
std::string petsc_last_error_message();
/// PetscFinalize (only call when petsc_initialize returned true).
void petsc_finalize();
/// PETSC_MAX_INT: the largest PetscInt (2³¹ − 1 with 32-bit indices).
std::int64_t petsc_max_index();
/// "3.18.5" and the scalar/precision configuration.
std::string petsc_version();
std::string petsc_configuration();
}  // namespace costate::detail
