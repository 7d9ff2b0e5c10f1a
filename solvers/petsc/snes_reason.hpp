#pragma once
// Private: how a PETSc SNES ended, as a nonlinear::Termination and a
// Summary (shared by the serial and the distributed SNES backends).
#include <petscsnes.h>

#include <algorithm>
#include <string>

#include "costate/nonlinear/summary.hpp"
#include "petsc/petsc_check.hpp"

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

/// Fills `s` from a finished SNES: iterations, residual history, the
/// residual norm at the returned iterate (SNES keeps F there), the tolerance
/// max(atol, rtol ‖F₀‖), the termination (a "converged" SNES whose final
/// norm misses the tolerance stopped on a test of its own: BackendFailure;
/// a zero LU pivot: SingularJacobian) and the message (`context` appended).
inline void summarize(SNES snes, bool zero_pivot, double atol, double rtol,
                      const std::string& context, Summary& s) {
  SNESConvergedReason reason;
  COSTATE_PETSC(SNESGetConvergedReason(snes, &reason));
  PetscInt its = 0;
  COSTATE_PETSC(SNESGetIterationNumber(snes, &its));
  s.iterations = static_cast<int>(its);
  PetscReal* h = nullptr;
  PetscInt nh = 0;
  COSTATE_PETSC(SNESGetConvergenceHistory(snes, &h, nullptr, &nh));
  s.residual_history.assign(h, h + nh);
  Vec f;
  COSTATE_PETSC(SNESGetFunction(snes, &f, nullptr, nullptr));
  PetscReal fn = 0;
  COSTATE_PETSC(VecNorm(f, NORM_2, &fn));
  s.final_residual_norm = fn;
  s.initial_residual_norm = s.residual_history.empty() ? fn : s.residual_history.front();
  s.tolerance = std::max(atol, rtol * s.initial_residual_norm);
  s.termination = termination_of(reason);
  if (s.termination == Termination::Converged && !(fn <= s.tolerance))
    s.termination = Termination::BackendFailure;  // SNES stopped on a test of its own
  s.message = std::string("SNES ") + SNESConvergedReasons[reason] + context;
  if (zero_pivot) {
    s.termination = Termination::SingularJacobian;
    s.message = "SNES: zero pivot in the LU factorisation of the Jacobian" + context;
  }
}

}  // namespace costate::nonlinear::detail
