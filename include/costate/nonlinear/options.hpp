#pragma once
/// \file
/// nonlinear::Options — settings of nonlinear::solve: the backend (a value,
/// not a flag soup), the convergence test, the Jacobian, the native line
/// search and the differentiation policy.
///
/// Convergence (every backend): ‖F(x)‖₂ ≤ max(atol, rtol · ‖F(x₀)‖₂).
/// KINSOL tests a max norm: it is asked for ‖F‖∞ ≤ tol/√n, which implies
/// the test above (so near round-off it may take an extra iteration). A
/// tolerance below the round-off floor of F (about ε·|terms of F|·√n) cannot
/// be met: the native line search then ends with LineSearchFailed at that
/// floor — loosen atol/rtol.

#include <cmath>
#include <string>
#include <string_view>

#include "costate/core/error.hpp"

namespace costate::nonlinear {

/// Who runs the Newton iteration. All use the Jacobian from costate's AD.
enum class Backend {
  Native,     ///< "native": Newton + backtracking line search, Eigen LU / SparseLU
  PetscSnes,  ///< "petsc_snes": PETSc SNES (newtonls, bt line search), serial (PETSC_COMM_SELF)
  Kinsol,     ///< "kinsol": SUNDIALS KINSOL, Newton with line search
};

inline std::string to_string(Backend b) {
  switch (b) {
    case Backend::Native: return "native";
    case Backend::PetscSnes: return "petsc_snes";
    case Backend::Kinsol: return "kinsol";
  }
  return "unknown";
}

/// Parses "native" | "petsc_snes" | "kinsol"; the error lists the valid names.
inline Backend backend_from_string(std::string_view name) {
  std::string valid;
  for (Backend b : {Backend::Native, Backend::PetscSnes, Backend::Kinsol}) {
    if (to_string(b) == name) return b;
    valid += (valid.empty() ? "" : ", ") + to_string(b);
  }
  throw Error("unknown nonlinear backend '" + std::string(name) + "'; valid backends: " + valid);
}

/// How ∂F/∂x is formed.
enum class JacobianMode {
  Automatic,  ///< "automatic": Dense up to Options::dense_limit unknowns, Sparse above
  Dense,      ///< "dense": ⌈n/8⌉ evaluations of F on ad::Dual<double, 8>; dense LU
  Sparse,     ///< "sparse": pattern detected once at x₀, coloured columns (ad::sparse_jacobian); sparse LU
};

inline std::string to_string(JacobianMode m) {
  switch (m) {
    case JacobianMode::Automatic: return "automatic";
    case JacobianMode::Dense: return "dense";
    case JacobianMode::Sparse: return "sparse";
  }
  return "unknown";
}

/// Parses "automatic" | "dense" | "sparse"; the error lists the valid names.
inline JacobianMode jacobian_mode_from_string(std::string_view name) {
  std::string valid;
  for (JacobianMode m : {JacobianMode::Automatic, JacobianMode::Dense, JacobianMode::Sparse}) {
    if (to_string(m) == name) return m;
    valid += (valid.empty() ? "" : ", ") + to_string(m);
  }
  throw Error("unknown nonlinear Jacobian mode '" + std::string(name) + "'; valid modes: " + valid);
}

/// The linear solver inside KINSOL's Newton steps.
enum class KinsolLinearSolver {
  Automatic,  ///< "automatic": Dense for a dense Jacobian, Klu for a sparse one
  Dense,      ///< "dense": SUNDIALS dense LU (a sparse Jacobian is expanded: O(n²) memory, O(n³) time)
  Klu,        ///< "klu": SuiteSparse KLU sparse direct LU on a SUNSparseMatrix (CSR) of the AD Jacobian
  Gmres,      ///< "gmres": SPGMR right-preconditioned by an Eigen sparse LU of the same Jacobian (sparse only)
};

inline std::string to_string(KinsolLinearSolver s) {
  switch (s) {
    case KinsolLinearSolver::Automatic: return "automatic";
    case KinsolLinearSolver::Dense: return "dense";
    case KinsolLinearSolver::Klu: return "klu";
    case KinsolLinearSolver::Gmres: return "gmres";
  }
  return "unknown";
}

/// Parses "automatic" | "dense" | "klu" | "gmres"; the error lists the valid names.
inline KinsolLinearSolver kinsol_linear_solver_from_string(std::string_view name) {
  std::string valid;
  for (KinsolLinearSolver s : {KinsolLinearSolver::Automatic, KinsolLinearSolver::Dense,
                               KinsolLinearSolver::Klu, KinsolLinearSolver::Gmres}) {
    if (to_string(s) == name) return s;
    valid += (valid.empty() ? "" : ", ") + to_string(s);
  }
  throw Error("unknown KINSOL linear solver '" + std::string(name) + "'; valid solvers: " + valid);
}

struct Options {
  Backend backend = Backend::Native;
  /// Absolute and relative residual tolerances: converged when
  /// ‖F(x)‖₂ ≤ max(atol, rtol·‖F(x₀)‖₂) (atol ≥ 0, rtol ≥ 0, not both 0).
  double atol = 1e-10;
  double rtol = 1e-12;
  /// Newton iterations at most (> 0).
  int max_iterations = 50;

  JacobianMode jacobian = JacobianMode::Automatic;
  /// Automatic mode: dense Jacobians up to this many unknowns (≥ 0).
  int dense_limit = 100;

  /// Native backend: backtracking line search on φ = ½‖F‖² with the
  /// sufficient-decrease (Armijo) condition φ(x + αδ) ≤ (1 − 2cα) φ(x);
  /// α is reduced by safeguarded quadratic interpolation (factor in
  /// [0.1, 0.5]); a trial with a non-finite residual halves α.
  bool line_search = true;
  /// c of the Armijo condition, in (0, 0.5).
  double sufficient_decrease = 1e-4;
  /// Reductions of α per iteration before LineSearchFailed (> 0).
  int max_backtracks = 30;

  /// Differentiating a solve that did not converge (Dual tangents, or a
  /// tape node for Real) is an error unless this is true.
  bool differentiate_unconverged = false;

  /// PETSc SNES backend: prefix of its entries in PETSc's options database
  /// ("bratu_" reads -bratu_snes_type ...), and whether the database may
  /// override these options.
  std::string options_prefix = "";
  bool use_options_database = true;

  /// KINSOL backend: the linear solver of the Newton steps. Gmres needs a
  /// sparse Jacobian (JacobianMode::Sparse, or Automatic above dense_limit).
  KinsolLinearSolver kinsol_linear_solver = KinsolLinearSolver::Automatic;

  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const {
    COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                  "nonlinear::Options::atol = " << costate::detail::format_value(atol)
                                                << " is invalid: it must be finite and >= 0");
    COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0 && rtol < 1.0,
                  "nonlinear::Options::rtol = " << costate::detail::format_value(rtol)
                                                << " is invalid: it must lie in [0, 1)");
    COSTATE_CHECK(atol > 0.0 || rtol > 0.0,
                  "nonlinear::Options: atol and rtol are both 0, so only an exact root would "
                  "converge; set atol > 0 or rtol > 0");
    COSTATE_CHECK(max_iterations > 0, "nonlinear::Options::max_iterations = "
                                          << max_iterations << " is invalid: it must be > 0");
    COSTATE_CHECK(dense_limit >= 0, "nonlinear::Options::dense_limit = "
                                        << dense_limit << " is invalid: it must be >= 0");
    COSTATE_CHECK(sufficient_decrease > 0.0 && sufficient_decrease < 0.5,
                  "nonlinear::Options::sufficient_decrease = "
                      << costate::detail::format_value(sufficient_decrease)
                      << " is invalid: it must lie in (0, 0.5)");
    COSTATE_CHECK(max_backtracks > 0, "nonlinear::Options::max_backtracks = "
                                          << max_backtracks << " is invalid: it must be > 0");
  }
};

}  // namespace costate::nonlinear
