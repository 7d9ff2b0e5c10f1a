// The adaptive implicit steppers on stiff problems (issue 5):
//  1. Robertson to t = 4e7, rtol 1e-6, atol (1e-8, 1e-14, 1e-6) — the
//     cvRoberts_dns-like run for which CVODES takes 766 steps
//     (shared/BENCHMARKS.md W4): steps, rejections, rhs and Jacobian
//     evaluations, LU factorisations, Newton iterations and wall time of bdf
//     and sdirk3.
//  2. Van der Pol mu = 1e3, bdf at rtol 1e-6, gradient of x(tf) with respect
//     to (x0, v0, mu): (forward + adjoint) / forward, timed in one binary,
//     on the W5 interval [0, 0.5] from (2, -2/3) and through a relaxation
//     jump on [0, 1000] from (2, 0). The gradient's time includes its own
//     forward run choosing the steps and orders, and the replay sweeps.
//
// Sample run:  build/bench/bench_stiff [repeats]
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"

namespace {

using costate::bench::median_seconds;
using namespace costate::ode;

struct FinalX {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;

  const Problem<Robertson> rob{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 4e7}};
  std::printf("Robertson to t = 4e7, rtol 1e-6, atol (1e-8, 1e-14, 1e-6); CVODES: 766 steps\n");
  std::printf("| method | steps | rejected | rhs | Jacobians | LU | Newton its | wall (ms) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (Method m : {Method::Bdf, Method::Sdirk3}) {
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol_per_state = {1e-8, 1e-14, 1e-6}};
    Solution sol;
    const double t = median_seconds([&] { sol = integrate(rob, opt); }, repeats);
    const Summary& s = sol.summary;
    std::printf("| %s | %lld | %lld | %lld | %lld | %lld | %lld | %.3f |\n", to_string(m).c_str(),
                (long long)s.steps, (long long)s.rejected_steps, (long long)s.rhs_evaluations,
                (long long)s.jacobian_evaluations, (long long)s.factorizations,
                (long long)s.newton_iterations, t * 1e3);
  }

  std::printf("\nVan der Pol mu = 1e3, bdf rtol 1e-6 atol 1e-8, J = x(tf), gradient wrt (x0, v0, mu)\n");
  std::printf("| interval | steps | forward (ms) | store all (ms) | ratio | binomial(10) (ms) | ratio |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  const IntegratorOptions opt{.method = Method::Bdf, .rtol = 1e-6, .atol = 1e-8};
  const Problem<VanDerPol> w5{VanDerPol{}, {2.0, -0.66666666666666666667}, {1000.0}, {0.0, 0.5}};
  const Problem<VanDerPol> jump{VanDerPol{}, {2.0, 0.0}, {1000.0}, {0.0, 1000.0}};
  int status = 0;
  for (const auto* pr : {&w5, &jump}) {
    Solution sol;
    GradientResult all, bin;
    const double t_fwd = median_seconds([&] { sol = integrate(*pr, opt); }, repeats);
    const double t_all =
        median_seconds([&] { all = gradient(*pr, FinalX{}, DiscreteAdjoint{StoreAll{}}, opt); }, repeats);
    const double t_bin = median_seconds(
        [&] { bin = gradient(*pr, FinalX{}, DiscreteAdjoint{Binomial{.snapshots = 10}}, opt); },
        repeats);
    std::printf("| [0, %g] | %lld | %.3f | %.3f | %.2f | %.3f | %.2f |\n", pr->t1(),
                (long long)sol.summary.steps, t_fwd * 1e3, t_all * 1e3, t_all / t_fwd, t_bin * 1e3,
                t_bin / t_fwd);
    std::printf("  dx(tf)/d(x0, v0, mu) = %.10g, %.10g, %.10g; rhs evaluations: store all %lld, "
                "binomial %lld (%lld step evaluations)\n",
                all.wrt_initial_state[0], all.wrt_initial_state[1], all.wrt_parameters[0],
                (long long)all.rhs_evaluations, (long long)bin.rhs_evaluations,
                (long long)bin.checkpoints.forward_steps);
    if (bin.wrt_parameters != all.wrt_parameters) status = 1;  // checkpoint invariance
  }
  return status;
}
