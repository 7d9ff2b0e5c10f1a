#pragma once
// Fixtures shared by the PDE derivative tests (θ tangent, θ Hessian): smooth
// deterministic fields by global index, and θ-integrator options converged
// far below every tolerance the tests name.
#include <cmath>
#include <cstdint>
#include <vector>

#include "costate/pde/theta.hpp"

namespace costate::test {

/// A smooth, rank-count-independent value for global index g (`salt`
/// makes distinct fields).
inline double wave(std::int64_t g, double salt) {
  return std::sin(0.77 * static_cast<double>(g) + salt);
}

/// offset + amplitude · wave(g, salt) for g = 0 … n − 1 (natural order).
inline std::vector<double> natural(std::int64_t n, double salt, double offset, double amplitude) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t g = 0; g < v.size(); ++g)
    v[g] = offset + amplitude * wave(static_cast<std::int64_t>(g), salt);
  return v;
}

/// θ-method options with KSP rtol 1e-14 and Newton rtol 1e-13 (the
/// derivatives then agree to ~1e-13), the options database not consulted.
inline pde::ThetaOptions theta_options(double theta, double dt, std::int64_t steps) {
  pde::ThetaOptions o;
  o.theta = theta;
  o.dt = dt;
  o.steps = steps;
  o.ksp.rtol = 1e-14;
  o.ksp.use_options_database = false;
  o.newton_rtol = 1e-13;
  return o;
}

}  // namespace costate::test
