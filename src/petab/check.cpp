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
  // ad::richardson_difference over llh along θ_e, from
  // h_0 = kLargestStep·max(1, |θ_e|) down kDifferenceSteps halvings.
  std::vector<double> x = theta;
  return ad::richardson_difference(
      [&](double h) {
        x[e] = theta[e] + h;
        return llh_or_nan(pb, x, plain, comm);
      },
      kLargestStep * std::max(1.0, std::abs(theta[e])), kDifferenceSteps);
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
  // chosen per component (richardson_difference), judged by
  // ad::check_against_differences: against the component, the gradient's
  // norm and the differences' own spread.
  const std::size_t n = theta.size();
  std::vector<Difference> d(n);
  out.steps.resize(n);
  out.spreads.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    d[i] = richardson(pb, theta, i, plain, comm);
    out.steps[i] = d[i].step;
    out.spreads[i] = d[i].spread;
  }
  out.fd = ad::check_against_differences(out.gradient, d,
                                         {.rtol = kDifferenceRtol,
                                          .norm_rtol = kDifferenceRtol,
                                          .spread_factor = kSpreadFactor});
  out.passed = out.taylor.passed && out.fd.passed;
  return out;
}

}  // namespace costate::petab
