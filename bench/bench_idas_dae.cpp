// Issue 32: what the SUNDIALS IDAS backend costs on SUNDIALS' Robertson DAE
// (y1' = −k1 y1 + k2 y2 y3, y2' = k1 y1 − k2 y2 y3 − k3 y2², 0 = y1 + y2 +
// y3 − 1) to t = 4e10 at idasRoberts_ASAi_dns' tolerances (rtol 1e-6, atol
// (1e-8, 1e-14, 1e-6), backward atol 1e-8), G = ∫ y3 dt:
//   - the forward run (integrator.method = idas),
//   - the gradient by idas_forward (IDASensInit, 6 directions) and by
//     idas_adjoint (IDASolveF / IDASolveB), as ratios to the forward run;
//   - beside them the ODE form through CVODES (cvodes_bdf forward and
//     cvodes_adjoint) at the same tolerances.
// Median wall time of `repeats` runs (default 20).
//
// Sample run:  build/bench/bench_idas_dae [repeats]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "support/dae_models.hpp"

namespace {

namespace ode = costate::ode;
using costate::bench::median_seconds;

using costate::test::dae::IntegralOfY3;
using costate::test::dae::RobertsonDae;

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::vector<double> k{0.04, 1e4, 3e7};
  const ode::Problem<RobertsonDae> dae{RobertsonDae{}, {1.0, 0.0, 0.0}, k, {0.0, 4e10}};
  const ode::Problem<ode::Robertson> odef{ode::Robertson{}, {1.0, 0.0, 0.0}, k, {0.0, 4e10}};
  ode::IntegratorOptions o{.method = ode::Method::Idas, .rtol = 1e-6, .atol = 1e-8,
                           .atol_per_state = {1e-8, 1e-14, 1e-6}};
  const ode::IdasAdjoint adj{.atol = 1e-8};
  const IntegralOfY3 G;
  const auto gf = ode::gradient(dae, G, ode::IdasForward{}, o);
  const auto ga = ode::gradient(dae, G, adj, o);
  std::printf("Robertson DAE to 4e10, G = %.8e\n", gf.objective);
  std::printf("  dG/dp idas_forward  (%.5e, %.5e, %.5e)\n", gf.wrt_parameters[0],
              gf.wrt_parameters[1], gf.wrt_parameters[2]);
  std::printf("  dG/dp idas_adjoint  (%.5e, %.5e, %.5e)\n", ga.wrt_parameters[0],
              ga.wrt_parameters[1], ga.wrt_parameters[2]);
  std::printf("  published (IDAS)    (1.4878e+06, -5.9467e+00, 9.9112e-04)\n");
  const double t_fwd = median_seconds([&] { (void)ode::integrate(dae, o); }, repeats);
  const double t_gf = median_seconds([&] { (void)ode::gradient(dae, G, ode::IdasForward{}, o); }, repeats);
  const double t_ga = median_seconds([&] { (void)ode::gradient(dae, G, adj, o); }, repeats);
  std::printf("idas forward %.3f ms (%lld steps); idas_forward gradient %.3f ms (%.1fx); "
              "idas_adjoint gradient %.3f ms (%.1fx, backward: %s)\n",
              1e3 * t_fwd, static_cast<long long>(ode::integrate(dae, o).summary.steps), 1e3 * t_gf,
              t_gf / t_fwd, 1e3 * t_ga, t_ga / t_fwd, ga.summary.message.c_str());
  o.method = ode::Method::CvodesBdf;
  const ode::CvodesAdjoint cadj{.atol = 1e-8};
  const double c_fwd = median_seconds([&] { (void)ode::integrate(odef, o); }, repeats);
  const double c_ga = median_seconds([&] { (void)ode::gradient(odef, G, cadj, o); }, repeats);
  std::printf("ODE form, cvodes_bdf forward %.3f ms; cvodes_adjoint gradient %.3f ms (%.1fx)\n",
              1e3 * c_fwd, 1e3 * c_ga, c_ga / c_fwd);
  return 0;
}
