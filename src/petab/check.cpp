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
  if (!theta.empty()) {
    constexpr double kFloorInTolerances = 10.0;  // llh's smoothness: ~rtol·|llh|
    const double floor = kFloorInTolerances * options.integrator.rtol / std::numeric_limits<double>::epsilon();
    out.taylor = ad::taylor_test(llh, theta, dir, out.gradient, {.floor_factor = std::max(1e3, floor)});
  } else {
    out.taylor.passed = true;
    out.taylor.message = "no estimated parameters";
  }
  double gmax = 0.0;
  for (double g : out.gradient) gmax = std::max(gmax, std::abs(g));
  constexpr double kStep = 1e-5, kRtol = 1e-3, kAtolOfMaxNorm = 1e-6;
  out.fd = ad::check_gradient(llh, theta, out.gradient,
                              {.step = kStep, .rtol = kRtol, .atol = kAtolOfMaxNorm * std::max(1.0, gmax)});
  out.passed = out.taylor.passed && out.fd.passed;
  return out;
}

}  // namespace costate::petab
