// Issue 32: the native DAE path against SUNDIALS IDAS, in one binary.
// Gradients of G by the native bdf's discrete adjoint (M = diag(I, 0) in
// its Newton matrix, consistent initial values differentiated implicitly)
// beside IDAS' adjoint (IDASolveF / IDASolveB), and each side's forward
// run, at the same tolerances, on
//   1. Robertson's DAE (y1 + y2 + y3 = 1) to t = 4e10 at idasRoberts_ASAi_dns'
//      tolerances (rtol 1e-6, atol (1e-8, 1e-14, 1e-6)), G = ∫ y3 dt;
//   2. a method-of-lines DAE: N cells of a diffusing species u with a
//      quasi-steady partner v (algebraic),
//          u_i' = D (u_{i−1} − 2u_i + u_{i+1})/Δx² − k u_i v_i,
//          0    = v_i (1 + u_i) − s,                 (no-flux ends)
//      2N unknowns, G = ∫ Σ_i u_i v_i Δx dt over [0, 1], rtol 1e-6, and
//      G = Σ_i u_i v_i Δx at t = 1 (no quadrature row: coloured Jacobians).
// CPU-time medians over `repeats` rounds, the native and IDAS runs
// alternated within each round (a shared machine's load hits both alike).
// The gradients' agreement is printed beside the times.
//
// Sample run:  build/bench/bench_dae [repeats] [cells]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.hpp"
#include "native_vs_idas.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "support/dae_models.hpp"

namespace {

namespace ode = costate::ode;
namespace bench = costate::bench;

using namespace costate::test::dae;

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0.0, m = 0.0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m / std::max(scale, 1e-300);
}

/// Native bdf vs IDAS on one problem: forward runs and adjoint gradients,
/// alternated, CPU medians; prints one table row.
template <class M, class O>
void compare(const char* name, const ode::Problem<M>& pr, const O& G, ode::IntegratorOptions o,
             int repeats) {
  ode::IntegratorOptions on = o, oi = o;
  on.method = ode::Method::Bdf;
  oi.method = ode::Method::Idas;
  const ode::IdasAdjoint adj{.atol = o.atol};
  const auto gn = ode::gradient(pr, G, ode::DiscreteAdjoint{}, on);
  const auto gi = ode::gradient(pr, G, adj, oi);
  const bench::NativeIdasTimes t = bench::time_native_and_idas(pr, G, on, oi, adj, repeats);
  const double tfn = t.native_forward, tfi = t.idas_forward, tan = t.native_gradient,
               tai = t.idas_gradient;
  std::printf("| %s | %zu | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f | %.1e |\n", name,
              pr.y0.size(), 1e3 * tfn, 1e3 * tan, 1e3 * tfi, 1e3 * tai, tan / tfn, tai / tfi,
              tai / tan, max_rel(gn.wrt_parameters, gi.wrt_parameters));
  std::printf("    steps: native %lld, dG/dp native (", static_cast<long long>(gn.steps.steps()));
  for (double v : gn.wrt_parameters) std::printf(" %.6e", v);
  std::printf(" ), IDAS (");
  for (double v : gi.wrt_parameters) std::printf(" %.6e", v);
  std::printf(" )\n");
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 11;
  const std::size_t cells = argc > 2 ? static_cast<std::size_t>(std::atoll(argv[2])) : 50;
  std::printf("| problem | unknowns | bdf forward (ms CPU) | bdf gradient (ms CPU) | IDAS "
              "forward | IDAS adjoint gradient | bdf gradient / forward | IDAS gradient / "
              "forward | IDAS / bdf gradient | dG/dp agreement |\n|---|---|---|---|---|---|---|"
              "---|---|---|\n");
  const ode::Problem<RobertsonDae> rob{RobertsonDae{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7},
                                       {0.0, 4e10}};
  compare("Robertson DAE to 4e10", rob, IntegralOfY3{},
          {.rtol = 1e-6, .atol = 1e-8, .atol_per_state = {1e-8, 1e-14, 1e-6}}, repeats);
  QuasiSteadyDiffusion mol{.n = cells};
  std::vector<double> y0(2 * cells, 0.0);
  for (std::size_t i = 0; i < cells; ++i)
    y0[i] = 1.0 + 0.5 * std::cos(M_PI * (static_cast<double>(i) + 0.5) / static_cast<double>(cells));
  const ode::Problem<QuasiSteadyDiffusion> pr{mol, y0, {0.05, 2.0, 1.0}, {0.0, 1.0}};
  compare("MOL DAE (quasi-steady partner)", pr, MolCost{.n = cells},
          {.rtol = 1e-6, .atol = 1e-8}, repeats);
  // The same with a terminal objective: no quadrature row, so the System's
  // Jacobians are coloured and bdf's reverse steps use the sparse LU.
  compare("MOL DAE, terminal G", pr, MolTerminalCost{.n = cells}, {.rtol = 1e-6, .atol = 1e-8},
          repeats);
  return 0;
}
