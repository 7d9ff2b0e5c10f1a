// petab::gradient_check and petab::richardson_difference
// (include/costate/petab/check.hpp).
#include "costate/petab/check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "costate/core/error.hpp"

namespace costate::petab {
namespace {

/// The options of the differences' llh: the integrator's tolerances times
/// kDifferenceTolerance, no gradient, no FIM.
Options difference_options(const Options& options) {
  Options plain = options;
  plain.gradient = false;
  plain.fim = false;
  plain.integrator.rtol *= kDifferenceTolerance;
  plain.integrator.atol *= kDifferenceTolerance;
  for (double& a : plain.integrator.atol_per_state) a *= kDifferenceTolerance;
  return plain;
}

/// llh at x; a failed simulation is NaN (the checks report it) rather than
/// an exception that hides the other components.
double llh_or_nan(const Problem& pb, const std::vector<double>& x, const Options& plain, MPI_Comm comm) {
  try {
    return evaluate(pb, x, plain, comm).llh;
  } catch (const Error&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

Difference richardson(const Problem& pb, const std::vector<double>& theta, std::size_t e,
                      const Options& plain, MPI_Comm comm) {
  COSTATE_CHECK(e < theta.size(), pb.file << ": difference along component " << e << " of "
                                          << theta.size());
  const double scale = std::max(1.0, std::abs(theta[e]));
  // D(h) for h_k = kLargestStep·scale·2^−k, k = 0 … kSteps − 1.
  std::vector<double> h(kDifferenceSteps), D(kDifferenceSteps);
  std::vector<double> x = theta;
  for (int k = 0; k < kDifferenceSteps; ++k) {
    h[static_cast<std::size_t>(k)] = kLargestStep * scale * std::ldexp(1.0, -k);
    x[e] = theta[e] + h[static_cast<std::size_t>(k)];
    const double up = llh_or_nan(pb, x, plain, comm);
    x[e] = theta[e] - h[static_cast<std::size_t>(k)];
    const double down = llh_or_nan(pb, x, plain, comm);
    D[static_cast<std::size_t>(k)] = (up - down) / (2.0 * h[static_cast<std::size_t>(k)]);
  }
  // Richardson R_k = (4 D(h_k) − D(2 h_k)) / 3, k ≥ 1; the answer is the
  // R_k closest to its successor: too large a step leaves truncation
  // (R changes with h), too small a step the solver's noise over h (R
  // jumps) — the plateau between is where consecutive R agree.
  Difference best;
  best.spread = std::numeric_limits<double>::infinity();
  for (int k = 1; k + 1 < kDifferenceSteps; ++k) {
    const auto i = static_cast<std::size_t>(k);
    const double r0 = (4.0 * D[i] - D[i - 1]) / 3.0, r1 = (4.0 * D[i + 1] - D[i]) / 3.0;
    const double s = std::abs(r1 - r0);
    if (std::isfinite(s) && s < best.spread) {
      best.spread = s;
      best.value = r0;
      best.step = h[i];
    }
  }
  if (!std::isfinite(best.spread)) {
    best.value = std::numeric_limits<double>::quiet_NaN();
    best.step = h.back();
  }
  return best;
}

}  // namespace

Difference richardson_difference(const Problem& pb, const std::vector<double>& theta, std::size_t e,
                                 const Options& options, MPI_Comm comm) {
  return richardson(pb, theta, e, difference_options(options), comm);
}

GradientCheck gradient_check(const Problem& pb, const std::vector<double>& theta, const Options& options,
                             MPI_Comm comm) {
  Options with_gradient = options;
  with_gradient.gradient = true;
  with_gradient.fim = false;
  GradientCheck out;
  out.ids = pb.estimated_ids();
  out.theta = theta;
  const Result r = evaluate(pb, theta, with_gradient, comm);
  out.llh = r.llh;
  out.gradient = r.gradient;
  const Options plain = difference_options(options);
  auto llh = [&](const std::vector<double>& x) { return llh_or_nan(pb, x, plain, comm); };
  std::vector<double> dir(theta.size());
  for (std::size_t i = 0; i < theta.size(); ++i)
    dir[i] = (i % 2 == 0 ? 1.0 : -1.0) * (1.0 + 0.5 * std::sin(static_cast<double>(i) + 1.0)) *
             std::max(std::abs(theta[i]), 0.1);
  // llh is resolved only to about the integrator's tolerance: kNoise·rtol·|llh|
  // is the round-off floor of the Taylor test (in place of ε·|llh|).
  constexpr double kNoise = 10.0;
  const double noise_factor =
      std::max(1e3, kNoise * plain.integrator.rtol / std::numeric_limits<double>::epsilon());
  if (!theta.empty()) {
    // From h₀ = 1e-2 (relative) down; where llh is far from quadratic at
    // that scale (Borghans_BiophysChem1997: along some parameters llh
    // changes its slope by 30% within 1e-4 on the log10 scale) the test is
    // repeated from 1e-4 and 1e-6: a wrong gradient fails at every scale
    // (order ~1 as h → 0), a right one passes once h is small enough.
    for (double h0 : {1e-2, 1e-4, 1e-6}) {
      out.taylor = ad::taylor_test(llh, theta, dir, out.gradient,
                                   {.initial_step = h0, .floor_factor = noise_factor});
      if (out.taylor.passed) break;
    }
  } else {
    out.taylor.passed = true;
    out.taylor.message = "no estimated parameters";
  }
  // Richardson-extrapolated central differences per component, the step
  // chosen per component (richardson_difference).
  ad::GradientCheckResult& fd = out.fd;
  const std::size_t n = theta.size();
  fd.ad = out.gradient;
  fd.fd.resize(n);
  fd.abs_error.resize(n);
  fd.rel_error.resize(n);
  fd.tolerance.resize(n);
  out.steps.resize(n);
  out.spreads.resize(n);
  double worst_ratio = -1.0;
  for (std::size_t i = 0; i < n; ++i) {
    const Difference d = richardson(pb, theta, i, plain, comm);
    out.steps[i] = d.step;
    out.spreads[i] = d.spread;
    fd.fd[i] = d.value;
    fd.abs_error[i] = std::abs(fd.ad[i] - d.value);
    const double size = std::max(std::abs(fd.ad[i]), std::abs(d.value));
    fd.rel_error[i] = size > 0.0 ? fd.abs_error[i] / size : 0.0;
    fd.tolerance[i] = kDifferenceRtol * size + kSpreadFactor * d.spread;
    const bool ok = std::isfinite(fd.abs_error[i]) && fd.abs_error[i] <= fd.tolerance[i];
    if (!ok) ++fd.failures;
    fd.max_rel_error = std::max(fd.max_rel_error, std::isfinite(fd.rel_error[i]) ? fd.rel_error[i] : 1.0);
    const double ratio = std::isfinite(fd.abs_error[i]) ? fd.abs_error[i] / std::max(fd.tolerance[i], 1e-300)
                                                        : std::numeric_limits<double>::max();
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      fd.worst = static_cast<int>(i);
    }
  }
  fd.passed = fd.failures == 0;
  out.passed = out.taylor.passed && fd.passed;
  return out;
}

}  // namespace costate::petab
