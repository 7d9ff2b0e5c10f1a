#pragma once
/// \file
/// linear::KspOptions — the settings of a PETSc Krylov solver
/// (linear::KspSolver in ksp.hpp, pde::KrylovSolver in pde/matrix.hpp).
/// A light header of its own: the PDE headers need the options, not
/// ksp.hpp's templates (Eigen, the AD tapes).

#include <cmath>
#include <string>

#include "costate/core/error.hpp"

namespace costate::linear {

struct KspOptions {
  /// KSPType name ("gmres", "cg", "bcgs", "preonly", ...).
  std::string ksp_type = "gmres";
  /// PCType name ("ilu", "jacobi", "bjacobi", "lu", "gamg", ...); empty:
  /// PETSc's default (ilu on one rank, block Jacobi with ilu on several).
  std::string pc_type = "";
  /// Relative, absolute and divergence tolerances and the iteration cap of
  /// the KSP (KSPSetTolerances), for forward, tangent and adjoint solves.
  double rtol = 1e-10;
  double atol = 1e-50;
  double divtol = 1e5;
  int max_iterations = 10000;
  /// Let PETSc's options database override the fields above.
  bool use_options_database = true;
  /// Prefix of this solver's options in the database ("adj_" reads
  /// -adj_ksp_type ...).
  std::string options_prefix = "";
  /// As Options::differentiate_failed (solve.hpp): differentiating a solve
  /// that did not converge is an error unless set; with it set, an adjoint
  /// solve that does not converge does not throw either.
  bool differentiate_failed = false;

  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const {
    COSTATE_CHECK(!ksp_type.empty(), "linear::KspOptions::ksp_type is empty: name a KSP type "
                                     "such as \"gmres\" or \"cg\"");
    COSTATE_CHECK(std::isfinite(rtol) && rtol > 0.0 && rtol < 1.0,
                  "linear::KspOptions::rtol = " << costate::detail::format_value(rtol)
                                                << " is invalid: it must lie in (0, 1)");
    COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                  "linear::KspOptions::atol = " << costate::detail::format_value(atol)
                                                << " is invalid: it must be finite and >= 0");
    COSTATE_CHECK(divtol > 1.0, "linear::KspOptions::divtol = "
                                    << costate::detail::format_value(divtol)
                                    << " is invalid: it must be > 1");
    COSTATE_CHECK(max_iterations > 0, "linear::KspOptions::max_iterations = "
                                          << max_iterations << " is invalid: it must be > 0");
  }
};

}  // namespace costate::linear
