#pragma once
/// \file
/// petab::gradient_check — `costate gradcheck problem.yaml`: the gradient of
/// llh with respect to the estimated parameters on their scales
/// (petab::evaluate, CVODES adjoint by default) against the two checks of
/// costate/ad/verification.hpp, at a point θ (the nominal values by default):
///
/// - the Taylor test along a fixed direction d (d_i = ±(1 + ½ sin(i + 1)) ·
///   max(|θ_i|, 0.1), alternating signs): r(h) = |llh(θ + h d) − llh(θ) −
///   h ⟨∇llh, d⟩| must fall like h² (every observed order ≥ 1.9). The
///   round-off floor is the integrator's: llh is smooth only to about
///   rtol·|llh|, so residuals below 10·rtol·|llh| end the halving
///   (ad::TaylorTestOptions::floor_factor = 10·rtol/ε).
/// - central differences per component, h_i = 1e-5·max(1, |θ_i|): component
///   i passes when |g_i − fd_i| ≤ 1e-3·max(|g_i|, |fd_i|) + 1e-6·max(1,
///   ‖g‖∞) — the step and the relative bound of costate gradcheck for the
///   other continuous (CVODES) methods; the absolute term lets a component
///   a million times below the gradient's size sit in the differences'
///   noise (an error there does not move llh).
///
/// Collective over `comm` like petab::evaluate (every rank gets the result).

#include <mpi.h>

#include <string>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/petab/problem.hpp"

namespace costate::petab {

struct GradientCheck {
  std::vector<std::string> ids;  ///< Problem::estimated_ids()
  std::vector<double> theta, gradient;
  double llh = 0.0;
  ad::TaylorTestResult taylor;
  ad::GradientCheckResult fd;
  bool passed = false;  ///< both
};

/// See the file comment; `options.gradient` is set. Throws costate::Error
/// when θ has the wrong length or an evaluation at θ fails (a failure at a
/// perturbed point is reported by the checks as a non-finite value).
GradientCheck gradient_check(const Problem& problem, const std::vector<double>& theta,
                             const Options& options = {}, MPI_Comm comm = MPI_COMM_SELF);

}  // namespace costate::petab
