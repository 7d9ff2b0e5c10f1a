#pragma once
/// \file
/// linear::Termination and linear::Summary — how a linear solve ended, as
/// data (a singular matrix or an iterative solver that stopped early is a
/// numerical outcome, not an exception; see solve.hpp for when
/// differentiating such a solve becomes an error).

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "costate/core/error.hpp"

namespace costate::linear {

/// Why a linear solve ended.
enum class Termination {
  Success,         ///< "success": x solves A x = b to the backend's accuracy
  Singular,        ///< "singular": zero pivot, or reciprocal condition below Options::min_rcond
  Inaccurate,      ///< "inaccurate": backward error above Options::max_backward_error
  NonFinite,       ///< "non_finite": NaN or Inf in A, b or the computed x
  NotConverged,    ///< "not_converged": an iterative solver stopped before its tolerance
};

inline std::string to_string(Termination t) {
  switch (t) {
    case Termination::Success: return "success";
    case Termination::Singular: return "singular";
    case Termination::Inaccurate: return "inaccurate";
    case Termination::NonFinite: return "non_finite";
    case Termination::NotConverged: return "not_converged";
  }
  return "unknown";
}

/// Parses the names above; the error lists the valid ones.
inline Termination termination_from_string(std::string_view name) {
  std::string valid;
  for (Termination t : {Termination::Success, Termination::Singular, Termination::Inaccurate,
                        Termination::NonFinite, Termination::NotConverged}) {
    if (to_string(t) == name) return t;
    valid += (valid.empty() ? "" : ", ") + to_string(t);
  }
  throw Error("unknown linear::Termination '" + std::string(name) + "'; valid values: " + valid);
}

/// The outcome of one linear solve (forward, or the transposed solve of an
/// adjoint sweep).
struct Summary {
  std::string backend;  ///< "eigen dense LU", "eigen SparseLU", "petsc ksp gmres/ilu", ...
  Termination termination = Termination::Success;
  std::int64_t rows = 0;      ///< global size n of A
  std::int64_t nonzeros = 0;  ///< stored entries of A (n² when dense)
  int iterations = 0;         ///< Krylov iterations (0 for a direct factorisation)
  double residual_norm = 0.0;      ///< ‖b − A x‖₂ (computed in double)
  double rhs_norm = 0.0;           ///< ‖b‖₂
  /// Normwise backward error ‖b − A x‖₂ / (‖A‖_F ‖x‖₂ + ‖b‖₂): ~ε for a
  /// stable direct solve, whatever the conditioning.
  double backward_error = 0.0;
  /// Reciprocal condition number estimate in the 1-norm (dense LU only; −1
  /// when the backend does not estimate it).
  double rcond = -1.0;
  bool factorization_reused = false;  ///< no new factorisation/preconditioner set-up
  int tangent_directions = 0;         ///< right-hand sides of the tangent solve (Dual)
  double seconds_setup = 0.0;         ///< factorisation / preconditioner set-up
  double seconds_solve = 0.0;         ///< triangular solves / Krylov iterations
  std::string message;                ///< backend detail (PETSc converged reason, pivot, ...)

  bool success() const { return termination == Termination::Success; }

  /// One line: "eigen dense LU: success, n = 500, residual 1.2e-13 (backward
  /// error 3.1e-17), rcond 2.0e-03, 0.011 s".
  std::string brief_report() const {
    std::ostringstream os;
    os.precision(3);
    os << backend << ": " << to_string(termination) << ", n = " << rows;
    if (iterations > 0) os << ", " << iterations << " iterations";
    os << std::scientific << ", residual " << residual_norm << " (backward error "
       << backward_error << ")";
    if (rcond >= 0.0) os << ", rcond " << rcond;
    os << std::fixed << ", " << seconds_setup + seconds_solve << " s";
    if (!message.empty()) os << " [" << message << "]";
    return os.str();
  }
};

}  // namespace costate::linear
