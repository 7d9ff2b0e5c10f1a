#pragma once
/// \file
/// linear::Options — settings of the direct (Eigen) linear solves of
/// solve.hpp. The PETSc KSP backend has its own settings (ksp.hpp).

#include <cmath>

#include "costate/core/error.hpp"

namespace costate::linear {

struct Options {
  /// Dense A: the solve is Singular when LAPACK-style 1-norm reciprocal
  /// condition estimate rcond(A) is below this (≥ 0). At rcond ≈ 1e-14 a
  /// solution keeps about two correct digits in double precision; 0 turns
  /// the check off (only exact zero pivots and non-finite results fail).
  double min_rcond = 1e-14;
  /// The solve is Inaccurate when its normwise backward error
  /// ‖b − A x‖₂ / (‖A‖_F ‖x‖₂ + ‖b‖₂) exceeds this (> 0). LU with pivoting
  /// is backward stable (backward error ~ n·ε), so only a breakdown trips it.
  double max_backward_error = 1e-10;
  /// Differentiating a solve that did not succeed (Dual tangents, or a tape
  /// node for Real) is an error unless this is true: its derivative is
  /// meaningless. Set it only to inspect such derivatives deliberately.
  bool differentiate_failed = false;

  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const {
    COSTATE_CHECK(std::isfinite(min_rcond) && min_rcond >= 0.0,
                  "linear::Options::min_rcond = " << costate::detail::format_value(min_rcond)
                                                  << " is invalid: it must be finite and >= 0");
    COSTATE_CHECK(std::isfinite(max_backward_error) && max_backward_error > 0.0,
                  "linear::Options::max_backward_error = "
                      << costate::detail::format_value(max_backward_error)
                      << " is invalid: it must be a positive finite number");
  }
};

}  // namespace costate::linear
