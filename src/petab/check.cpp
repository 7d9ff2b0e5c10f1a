// petab::gradient_check (include/costate/petab/check.hpp).
#include "costate/petab/check.hpp"

#include <cmath>
#include <limits>

#include "costate/core/error.hpp"

namespace costate::petab {

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
  Options plain = with_gradient;
  plain.gradient = false;
  // llh at a perturbed point; a failed simulation there is NaN (the checks
  // report it) rather than an exception that hides the other components.
  auto llh = [&](const std::vector<double>& x) {
    try {
      return evaluate(pb, x, plain, comm).llh;
    } catch (const Error&) {
      return std::numeric_limits<double>::quiet_NaN();
    }
  };
  std::vector<double> dir(theta.size());
  for (std::size_t i = 0; i < theta.size(); ++i)
    dir[i] = (i % 2 == 0 ? 1.0 : -1.0) * (1.0 + 0.5 * std::sin(static_cast<double>(i) + 1.0)) *
             std::max(std::abs(theta[i]), 0.1);
  // llh is resolved only to about the integrator's tolerance: kNoise·rtol·|llh|
  // is the round-off floor of both checks (in place of ε·|llh|).
  constexpr double kNoise = 10.0;
  const double noise_factor =
      std::max(1e3, kNoise * options.integrator.rtol / std::numeric_limits<double>::epsilon());
  if (!theta.empty()) {
    out.taylor = ad::taylor_test(llh, theta, dir, out.gradient, {.floor_factor = noise_factor});
  } else {
    out.taylor.passed = true;
    out.taylor.message = "no estimated parameters";
  }
  // Richardson-extrapolated central differences through ad::check_gradient:
  // G(x) = (4/3) llh(x) − (1/6) llh(θ + 2(x − θ)) has ∇G(θ) = ∇llh(θ), and
  // its central difference at step h is (4 D(h) − D(2h))/3 for llh's D — the
  // h² truncation cancels, so the step can be large against the noise.
  auto richardson = [&](const std::vector<double>& x) {
    std::vector<double> far(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) far[i] = theta[i] + 2.0 * (x[i] - theta[i]);
    return 4.0 / 3.0 * llh(x) - llh(far) / 6.0;
  };
  // Step 1e-4·max(1, |θ_i|), each component within 1e-3 of its size plus
  // the noise (ad::GradientCheckOptions::roundoff_factor).
  constexpr double kStep = 1e-4, kRtol = 1e-3;
  out.fd = ad::check_gradient(richardson, theta, out.gradient,
                              {.step = kStep, .rtol = kRtol, .roundoff_factor = noise_factor});
  out.passed = out.taylor.passed && out.fd.passed;
  return out;
}

}  // namespace costate::petab
