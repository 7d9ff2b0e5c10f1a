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
/// - Richardson-extrapolated central differences per component:
///   R(h) = (4 D(h) − D(2h)) / 3 for the central difference D, at steps
///   h_k = kLargestStep·max(1, |θ_i|)·2^−k, k < kDifferenceSteps, taking
///   the R_k closest to R_{k+1} (richardson_difference): one fixed step
///   cannot serve every model — Borghans_BiophysChem1997 needs h ≤ 3e-5
///   on the log10 scale (its llh bends within 1e-4 along K_par, Kz, v0),
///   Fujita_SciSignal2010 h ≈ 3e-3 (below, the solver's noise over h
///   dominates). Judged by ad::check_against_differences: component i
///   passes when |g_i − R_i| ≤ kDifferenceRtol · (max(|g_i|, |R_i|) +
///   min(‖g‖, ‖R‖)) + kSpreadFactor·spread_i, spread_i = |R_k − R_{k+1}| at
///   the chosen step (the reference's own error estimate); components below
///   the last two terms are reported at the noise floor (at an optimum they
///   are 1e-11 … 1e-4 and a relative test alone fails them).
/// The differences' llh is computed at kDifferenceTolerance × the
/// integrator's rtol and atol of `options` (a reference tighter than the
/// gradient it checks); 10·rtol·|llh| of those is the Taylor test's
/// round-off floor (ad::TaylorTestOptions::floor_factor = 10·rtol/ε).
///
/// Collective over `comm` like petab::evaluate (every rank gets the result).

#include <mpi.h>

#include <string>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/petab/problem.hpp"

namespace costate::petab {

/// The differences' llh at this multiple of the integrator's tolerances.
inline constexpr double kDifferenceTolerance = 1e-2;
/// Step ladder of richardson_difference: kLargestStep·max(1, |θ_i|)·2^−k.
inline constexpr double kLargestStep = 1e-2;
inline constexpr int kDifferenceSteps = 14;  ///< down to ~1.2e-6 relative
/// Component tolerance: kDifferenceRtol relative plus kSpreadFactor × the
/// reference's spread.
inline constexpr double kDifferenceRtol = 1e-3;
inline constexpr double kSpreadFactor = 3.0;

/// A Richardson-extrapolated central difference and the step it took
/// (ad::richardson_difference, the one mechanism of every gradient check).
using Difference = ad::Difference;

/// d llh / d θ_e by Richardson-extrapolated central differences with the
/// step chosen as described above, llh at kDifferenceTolerance × the
/// tolerances of `options` (2·kDifferenceSteps evaluations of llh). A
/// failed simulation makes its differences NaN (skipped in the choice).
Difference richardson_difference(const Problem& problem, const std::vector<double>& theta,
                                 std::size_t e, const Options& options = {},
                                 MPI_Comm comm = MPI_COMM_SELF);

struct GradientCheck {
  std::vector<std::string> ids;  ///< Problem::estimated_ids()
  std::vector<double> theta, gradient;
  std::vector<double> steps, spreads;  ///< per component: Difference::step, ::spread
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
