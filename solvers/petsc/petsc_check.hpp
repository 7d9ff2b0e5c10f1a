#pragma once
// Private: turning PETSc error codes into costate::Error (only solvers/
// includes PETSc headers).

#include <petscsys.h>

#include <string>

#include "costate/core/error.hpp"
#include "petsc/petsc_runtime.hpp"

namespace costate::detail {

/// Throws costate::Error naming the failed PETSc function, PETSc's own
/// message (captured by the error handler petsc_initialize installs) and its
/// text for the code. The call and its source location follow as a check
/// report, which the command line shows only under --debug.
[[noreturn]] inline void throw_petsc_error(PetscErrorCode code, const char* call, const char* file,
                                           int line) {
  const char* text = nullptr;
  PetscErrorMessage(code, &text, nullptr);
  std::string function(call);
  function = function.substr(0, function.find('('));
  const std::string detail = petsc_last_error_message();
  throw Error("PETSc's " + function + " failed: " + (detail.empty() ? "" : detail + "; ") +
                  (text ? text : "no message") + " (PETSc error code " +
                  std::to_string(static_cast<int>(code)) + ") [check failed: " + call + " at " + file +
                  ":" + std::to_string(line) + "]",
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
