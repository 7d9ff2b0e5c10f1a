#pragma once
// Private: how a PETSc SNES ended, as a nonlinear::Termination (shared by
// the serial and the distributed SNES backends).
#include <petscsnes.h>

#include "costate/nonlinear/summary.hpp"

namespace costate::nonlinear::detail {

inline Termination termination_of(SNESConvergedReason reason) {
  switch (reason) {
    case SNES_DIVERGED_MAX_IT: return Termination::MaxIterations;
    case SNES_DIVERGED_LINE_SEARCH: return Termination::LineSearchFailed;
    case SNES_DIVERGED_FNORM_NAN:
    case SNES_DIVERGED_FUNCTION_DOMAIN: return Termination::NonFiniteResidual;
    case SNES_DIVERGED_LINEAR_SOLVE:
    case SNES_DIVERGED_JACOBIAN_DOMAIN: return Termination::SingularJacobian;
    default: return reason > 0 ? Termination::Converged : Termination::BackendFailure;
  }
}

}  // namespace costate::nonlinear::detail
