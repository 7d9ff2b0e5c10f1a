#include "costate/ode/continuous_adjoint.hpp"

#include <cmath>

#include "costate/core/error.hpp"

namespace costate::ode {

void ContinuousAdjoint::validate() const {
  COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0,
                "sensitivity.adjoint_rtol = " << costate::detail::format_value(rtol)
                                              << " must be >= 0 (0: integrator.rtol)");
  COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                "sensitivity.adjoint_atol = " << costate::detail::format_value(atol)
                                              << " must be >= 0 (0: integrator.atol)");
}

}  // namespace costate::ode
