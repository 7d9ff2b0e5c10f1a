#pragma once
/// \file
/// nonlinear::Termination and nonlinear::Summary — how a Newton solve ended,
/// as data: a solve that did not converge is reported, never thrown (see
/// solve.hpp for when differentiating it becomes an error).

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/nonlinear/options.hpp"

namespace costate::nonlinear {

/// Why a nonlinear solve ended.
enum class Termination {
  Converged,          ///< "converged": ‖F‖₂ ≤ max(atol, rtol‖F(x₀)‖₂)
  MaxIterations,      ///< "max_iterations": Options::max_iterations reached
  LineSearchFailed,   ///< "line_search_failed": no sufficient decrease along the Newton step
  NonFiniteResidual,  ///< "non_finite_residual": F returned NaN/Inf (at x₀, or on every trial)
  SingularJacobian,   ///< "singular_jacobian": ∂F/∂x could not be factorised
  BackendFailure,     ///< "backend_failure": SNES/KINSOL stopped for another reason (see message)
};

inline std::string to_string(Termination t) {
  switch (t) {
    case Termination::Converged: return "converged";
    case Termination::MaxIterations: return "max_iterations";
    case Termination::LineSearchFailed: return "line_search_failed";
    case Termination::NonFiniteResidual: return "non_finite_residual";
    case Termination::SingularJacobian: return "singular_jacobian";
    case Termination::BackendFailure: return "backend_failure";
  }
  return "unknown";
}

/// Parses the names above; the error lists the valid ones.
inline Termination termination_from_string(std::string_view name) {
  std::string valid;
  for (Termination t : {Termination::Converged, Termination::MaxIterations,
                        Termination::LineSearchFailed, Termination::NonFiniteResidual,
                        Termination::SingularJacobian, Termination::BackendFailure}) {
    if (to_string(t) == name) return t;
    valid += (valid.empty() ? "" : ", ") + to_string(t);
  }
  throw Error("unknown nonlinear::Termination '" + std::string(name) + "'; valid values: " + valid);
}

struct Summary {
  Backend backend = Backend::Native;
  Termination termination = Termination::Converged;
  int unknowns = 0;
  int iterations = 0;            ///< Newton steps taken
  int residual_evaluations = 0;  ///< F on double (line-search trials included)
  int jacobian_evaluations = 0;  ///< ∂F/∂x assemblies (AD)
  int backtracks = 0;            ///< step reductions of the line search (native)
  /// ‖F‖₂ at x₀ and after each Newton step (native and SNES: every step;
  /// KINSOL: at every Jacobian evaluation and at the end).
  std::vector<double> residual_history;
  double initial_residual_norm = 0.0;
  double final_residual_norm = 0.0;
  double tolerance = 0.0;  ///< max(atol, rtol · ‖F(x₀)‖₂)
  bool sparse_jacobian = false;
  int jacobian_colors = 0;              ///< sparse: colours of the compressed Jacobian
  std::int64_t jacobian_nonzeros = 0;   ///< sparse: structural non-zeros (dense: n²)
  double seconds_total = 0.0;
  double seconds_jacobian = 0.0;  ///< AD Jacobian assembly (inside the total)
  /// Forming and factorising ∂F/∂x at the solution (and ∂F/∂p when small)
  /// for the derivatives: Dual solves and Real solves that record a node.
  double seconds_derivative = 0.0;
  std::string message;            ///< backend detail (SNES/KINSOL reason, the failing step, ...)

  bool converged() const { return termination == Termination::Converged; }

  /// "native Newton: converged in 4 iterations, |F| 2.3e+00 -> 4.1e-14
  /// (tolerance 1.0e-10), 5 F + 4 J evaluations, dense Jacobian, 0.001 s".
  std::string brief_report() const {
    std::ostringstream os;
    os.precision(2);
    os << to_string(backend) << " Newton: " << to_string(termination) << " in " << iterations
       << " iteration" << (iterations == 1 ? "" : "s") << std::scientific << ", |F| "
       << initial_residual_norm << " -> " << final_residual_norm << " (tolerance " << tolerance
       << "), " << residual_evaluations << " F + " << jacobian_evaluations << " J evaluations, "
       << (sparse_jacobian ? "sparse" : "dense") << " Jacobian";
    if (sparse_jacobian) os << " (" << jacobian_nonzeros << " non-zeros, " << jacobian_colors << " colours)";
    os.precision(3);
    os << std::fixed << ", " << seconds_total << " s";
    if (!message.empty()) os << " [" << message << "]";
    return os.str();
  }

  /// brief_report() and the residual history, one line per iterate.
  std::string full_report() const {
    std::ostringstream os;
    os << brief_report() << "\n";
    os.precision(6);
    os << std::scientific;
    for (std::size_t k = 0; k < residual_history.size(); ++k)
      os << "  " << k << "  |F| = " << residual_history[k] << "\n";
    return os.str();
  }
};

}  // namespace costate::nonlinear
