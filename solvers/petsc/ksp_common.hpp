#pragma once
// Private: the PETSc KSP set-up from linear::KspOptions and the reading of a
// finished solve into a linear::Summary, shared by linear::KspSolver
// (assembled CSR matrices) and pde::KrylovSolver (DMDA grids).
#include <petscksp.h>

#include <string>

#include "costate/linear/ksp.hpp"
#include "petsc/petsc_check.hpp"

namespace costate::linear::detail {

/// A KSP on `comm` with the options' method, preconditioner, tolerances and
/// prefix (then the options database, when asked). Operators are set by the
/// caller.
inline KSP create_ksp(MPI_Comm comm, const KspOptions& options) {
  KSP ksp = nullptr;
  COSTATE_PETSC(KSPCreate(comm, &ksp));
  COSTATE_PETSC(KSPSetType(ksp, options.ksp_type.c_str()));
  if (!options.pc_type.empty()) {
    PC pc;
    COSTATE_PETSC(KSPGetPC(ksp, &pc));
    COSTATE_PETSC(PCSetType(pc, options.pc_type.c_str()));
  }
  COSTATE_PETSC(KSPSetTolerances(ksp, options.rtol, options.atol, options.divtol,
                                 static_cast<PetscInt>(options.max_iterations)));
  if (!options.options_prefix.empty())
    COSTATE_PETSC(KSPSetOptionsPrefix(ksp, options.options_prefix.c_str()));
  if (options.use_options_database) COSTATE_PETSC(KSPSetFromOptions(ksp));
  return ksp;
}

/// "petsc ksp TYPE/PC", with " on N ranks" when `ranks` > 1: what a solver
/// built on `ksp` reports as its description (after KSPSetUp, so the options
/// database's choices show).
inline std::string describe(KSP ksp, int ranks) {
  KSPType kt = nullptr;
  PCType pt = nullptr;
  PC pc;
  COSTATE_PETSC(KSPGetType(ksp, &kt));
  COSTATE_PETSC(KSPGetPC(ksp, &pc));
  COSTATE_PETSC(PCGetType(pc, &pt));
  return std::string("petsc ksp ") + (kt ? kt : "?") + "/" + (pt ? pt : "none") +
         (ranks > 1 ? " on " + std::to_string(ranks) + " ranks" : "");
}

inline Termination termination_of(KSPConvergedReason reason) {
  if (reason > 0) return Termination::Success;
  if (reason == KSP_DIVERGED_NANORINF) return Termination::NonFinite;
  if (reason == KSP_DIVERGED_PC_FAILED) return Termination::Singular;
  return Termination::NotConverged;
}

/// Iterations, termination and message (PETSc's reason, and the
/// preconditioner's when it failed) of the last solve of `ksp`.
inline void read_outcome(KSP ksp, Summary& s) {
  PetscInt its = 0;
  COSTATE_PETSC(KSPGetIterationNumber(ksp, &its));
  s.iterations = static_cast<int>(its);
  KSPConvergedReason reason;
  COSTATE_PETSC(KSPGetConvergedReason(ksp, &reason));
  s.termination = termination_of(reason);
  s.message = KSPConvergedReasons[reason];
  if (reason == KSP_DIVERGED_PC_FAILED) {
    PC pc;
    COSTATE_PETSC(KSPGetPC(ksp, &pc));
    PCFailedReason pc_reason;
    COSTATE_PETSC(PCGetFailedReasonRank(pc, &pc_reason));
    if (pc_reason >= PC_SETUP_ERROR)  // PCFailedReasons is shifted to start there
      s.message += std::string(", preconditioner: ") + PCFailedReasons[pc_reason];
  }
}

}  // namespace costate::linear::detail
