#pragma once
// Private: turning PETSc error codes into costate::Error (only solvers/
// includes PETSc headers).

#include <petscsys.h>

#include <string>

#include "costate/core/error.hpp"

namespace costate::detail {

/// Throws costate::Error naming the failed PETSc call, PETSc's message for
/// the code, and the caller's context.
[[noreturn]] inline void throw_petsc_error(PetscErrorCode code, const char* call, const char* file,
                                           int line) {
  const char* text = nullptr;
  PetscErrorMessage(code, &text, nullptr);
  throw Error(std::string("PETSc call ") + call + " failed with error code " +
                  std::to_string(static_cast<int>(code)) + " (" + (text ? text : "no message") +
                  ") at " + file + ":" + std::to_string(line),
              call, file, line);
}

}  // namespace costate::detail

/// COSTATE_PETSC(KSPSolve(ksp, b, x)): throws costate::Error when the call
/// returns a non-zero PetscErrorCode.
#define COSTATE_PETSC(call)                                                        \
  do {                                                                             \
    const PetscErrorCode costate_petsc_ierr_ = (call);                             \
    if (costate_petsc_ierr_ != 0) [[unlikely]]                                     \
      ::costate::detail::throw_petsc_error(costate_petsc_ierr_, #call, __FILE__, __LINE__); \
  } while (false)
