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
// Then fully implicit DAEs F(t, y, y', p) = 0 (ode::ResidualForm) through
// IDAS (its residual F itself) beside the native bdf on the same residual,
// CPU-time medians over `repeats` rounds with the four runs (native forward
// and discrete-adjoint gradient, IDAS forward and adjoint gradient)
// alternated within each round:
//   - Robertson written as F = (y1' + k1 y1 − k2 y2 y3, y2' − k1 y1 + k2 y2 y3
//     + k3 y2², y1 + y2 + y3 − 1), y3 algebraic, to 4e10 at the tolerances
//     above, G = ∫ y3 dt;
//   - ImplicitCoupled (tests/support/dae_models.hpp: a state-dependent
//     F_{y'}) with observations, a terminal and a running cost, rtol 1e-8.
//
// Sample run:  build/bench/bench_idas_dae [repeats]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "bench_util.hpp"
#include "native_vs_idas.hpp"
#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/residual_dae.hpp"
#include "support/dae_models.hpp"

namespace {

namespace ode = costate::ode;
using costate::bench::median_seconds;

using costate::test::dae::IntegralOfY3;
using costate::test::dae::RobertsonDae;
using costate::test::dae::RobertsonResidual;
namespace bench = costate::bench;

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0.0, m = 0.0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m / std::max(scale, 1e-300);
}

/// Native bdf (discrete adjoint) vs IDAS (adjoint) on one fully implicit
/// problem, the four runs alternated per round; one table row (CPU ms).
template <class M, class O>
void implicit_row(const char* name, const ode::Problem<M>& pr, const O& G, ode::IntegratorOptions o,
                  double atol_backward, int repeats) {
  ode::IntegratorOptions on = o, oi = o;
  on.method = ode::Method::Bdf;
  oi.method = ode::Method::Idas;
  const ode::IdasAdjoint adj{.atol = atol_backward};
  ode::GradientResult gn;
  try {
    gn = ode::gradient(pr, G, ode::DiscreteAdjoint{}, on);
  } catch (const costate::Error& e) {
    const auto gi = ode::gradient(pr, G, adj, oi);
    const double tfi = bench::median_wall_cpu([&] { (void)ode::integrate(pr, oi); }, repeats).cpu;
    const double tai = bench::median_wall_cpu([&] { (void)ode::gradient(pr, G, adj, oi); }, repeats).cpu;
    const auto gf = ode::gradient(pr, G, ode::IdasForward{}, oi);
    std::printf("| %s | fails | fails | %.3f | %.3f | — | %.2f | — | — | %.1e |\n    native bdf: %s\n",
                name, 1e3 * tfi, 1e3 * tai, tai / tfi, max_rel(gf.wrt_parameters, gi.wrt_parameters),
                e.what());
    std::printf("    dG/dp idas_adjoint (%.5e, %.5e, %.5e), idas_forward (%.5e, %.5e, %.5e)\n",
                gi.wrt_parameters[0], gi.wrt_parameters[1], gi.wrt_parameters[2],
                gf.wrt_parameters[0], gf.wrt_parameters[1], gf.wrt_parameters[2]);
    return;
  }
  const auto gi = ode::gradient(pr, G, adj, oi);
  const auto gf = ode::gradient(pr, G, ode::IdasForward{}, oi);
  const bench::NativeIdasTimes t = bench::time_native_and_idas(pr, G, on, oi, adj, repeats);
  const double tfn = t.native_forward, tfi = t.idas_forward, tan = t.native_gradient,
               tai = t.idas_gradient;
  std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f | %.1e | %.1e |\n", name,
              1e3 * tfn, 1e3 * tan, 1e3 * tfi, 1e3 * tai, tan / tfn, tai / tfi, tai / tan,
              max_rel(gi.wrt_parameters, gn.wrt_parameters),
              max_rel(gf.wrt_parameters, gi.wrt_parameters));
  std::printf("    steps: native %lld, dG/dp native (", static_cast<long long>(gn.steps.steps()));
  for (double v : gn.wrt_parameters) std::printf(" %.6e", v);
  std::printf(" ), idas_adjoint (");
  for (double v : gi.wrt_parameters) std::printf(" %.6e", v);
  std::printf(" ), idas_forward (");
  for (double v : gf.wrt_parameters) std::printf(" %.6e", v);
  std::printf(" )\n");
}

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

  // Fully implicit: native bdf vs IDAS on the residual.
  std::printf("\n| fully implicit | bdf fwd ms | bdf grad ms | idas fwd ms | idas_adjoint ms | "
              "bdf grad/fwd | idas grad/fwd | idas/bdf grad | dG/dp idas vs bdf | idas fwd vs adj |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  const ode::Problem<ode::ResidualForm<RobertsonResidual>> rr{
      {RobertsonResidual{}, 3}, {1.0, 0.0, 0.0, 0.0, 0.0, 0.0}, k, {0.0, 4e10}};
  implicit_row("Robertson residual, 4e10", rr, G,
               {.rtol = 1e-6, .atol = 1e-8, .atol_per_state = {1e-8, 1e-14, 1e-6, 1e-8, 1e-8, 1e-8}},
               1e-8, repeats);
  const ode::Problem<ode::ResidualForm<costate::test::dae::ImplicitCoupled>> ic{
      {costate::test::dae::ImplicitCoupled{}, 3}, {0.8, 1.2, 0.0, 0.0, 0.0, 0.0}, {0.9, 0.6, 0.5},
      {0.0, 3.0}};
  implicit_row("ImplicitCoupled, every term", ic, costate::test::dae::coupled_terms(),
               {.rtol = 1e-8, .atol = 1e-10}, 1e-10, repeats);
  return 0;
}
