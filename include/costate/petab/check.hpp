#pragma once
/// \file
/// petab::gradient_check — `costate gradcheck problem.yaml`: the gradient of
/// llh with respect to the estimated parameters on their scales
/// (petab::evaluate, CVODES adjoint by default) against the two checks of
/// costate/ad/verification.hpp, at a point θ (the nominal values by default):
///
/// - the Taylor test along a fixed direction d (d_i = ±(1 + ½ sin(i + 1)) ·
///   max(|θ_i|, 0.1), alternating signs): r(h) = |llh(θ + h d) − llh(θ) −
///   h ⟨∇llh, d⟩| must fall like h² (every observed order ≥ 1.9);
/// - central differences per component, h_i = 1e-4·max(1, |θ_i|): component
///   i passes when |g_i − fd_i| ≤ 1e-3·max(|g_i|, |fd_i|) + 10·rtol·max|llh(θ
///   ± h_i e_i)|/h_i.
/// llh comes from an adaptive integration and is smooth only to about the
/// integrator's tolerance: 10·rtol·|llh| (rtol of Options::integrator) is
/// the round-off floor of both checks, in place of ε·|llh| (ad::
/// TaylorTestOptions::floor_factor and GradientCheckOptions::
/// roundoff_factor = 10·rtol/ε). The step balances the differences'
/// truncation h²·llh‴/6 against that noise over h: at the benchmark
/// collection's published optima, where the gradient is ~1e-3 and llh
/// strongly curved (Bruno_JExpBot2016: ∂²llh ≈ 1e3 along one parameter),
/// a step of 1e-5 leaves differences dominated by solver noise.
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
