// CVODES' Newton linear solvers side by side (IntegratorOptions::
// cvodes_linear_solver): dense LU of the dense AD Jacobian, band LU and
// SuiteSparse KLU of the coloured (compressed) AD Jacobian, on the 1-D
// Brusselator by the method of lines (ode::Brusselator1D: n = 2N states,
// half-bandwidth 2, p = (1, 3, 1/50), u = 1 + sin 2πx, v = 3), BDF,
// rtol 1e-6, atol 1e-8, t in [0, t_end]:
//   forward : ode::integrate (cvodes_bdf);
//   adjoint : ode::gradient with CvodesAdjoint (forward with checkpoints +
//             backward λ with −f_yᵀ in the backward Newton matrix) of
//             J = Σ (u_i(T) − 1)²/N + ∫ Σ v_i²/N dt ("adj+run"), and of
//             the terminal term alone ("adj term"). The running cost is an
//             extra state z' = q(y) whose Jacobian row is dense: it makes
//             the augmented system's band as wide as the system.
// Median wall seconds of `repeats` rounds, the three solvers interleaved in
// every round (one run, one machine load); ratios dense / band and
// dense / sparse. automatic is also timed (it must match its choice).
//
// Usage: bench_cvodes_linear_solvers [t_end = 1] [repeats = 3] [N values...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"

namespace {

using namespace costate::ode;
using LS = CvodesLinearSolver;

struct Terminal {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 0; i < y.size(); i += 2) s = T(s + (y[i] - 1.0) * (y[i] - 1.0));
    return T(s / static_cast<double>(y.size() / 2));
  }
};

struct Objective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 0; i < y.size(); i += 2) s = T(s + (y[i] - 1.0) * (y[i] - 1.0));
    return T(s / static_cast<double>(y.size() / 2));
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 1; i < y.size(); i += 2) s = T(s + y[i] * y[i]);
    return T(s / static_cast<double>(y.size() / 2));
  }
};

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const double t_end = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  std::vector<std::size_t> points;
  for (int a = 3; a < argc; ++a) points.push_back(static_cast<std::size_t>(std::atol(argv[a])));
  if (points.empty()) points = {250, 1000};  // 500 and 2000 states
  const LS solvers[] = {LS::Dense, LS::Band, LS::Sparse, LS::Automatic};
  std::printf("CVODES BDF, 1-D Brusselator, t in [0, %g], rtol 1e-6, atol 1e-8, median of %d\n",
              t_end, repeats);
  std::printf("%7s %-9s %6s %10s %10s %10s %16s %10s\n", "states", "solver", "steps",
              "forward s", "adj+run s", "adj term s", "dense/this", "objective");
  for (std::size_t n_points : points) {
    const Problem<Brusselator1D> pr{Brusselator1D{}, Brusselator1D::initial_state(n_points),
                                    {1.0, 3.0, 1.0 / 50.0}, {0.0, t_end}};
    std::vector<std::vector<double>> fwd(4), adj(4), term(4);
    std::vector<std::int64_t> steps(4);
    std::vector<double> objective(4);
    for (int r = 0; r < repeats; ++r) {
      for (std::size_t k = 0; k < 4; ++k) {
        const IntegratorOptions o{.method = Method::CvodesBdf, .rtol = 1e-6, .atol = 1e-8,
                                  .cvodes_linear_solver = solvers[k]};
        fwd[k].push_back(costate::bench::median_seconds(
            [&] {
              const Solution s = integrate(pr, o);
              steps[k] = s.summary.steps;
              if (!s.summary.success()) std::fprintf(stderr, "%s\n", s.summary.brief_report().c_str());
            },
            1));
        adj[k].push_back(costate::bench::median_seconds(
            [&] { objective[k] = gradient(pr, Objective{}, CvodesAdjoint{}, o).objective; }, 1));
        term[k].push_back(costate::bench::median_seconds(
            [&] { (void)gradient(pr, Terminal{}, CvodesAdjoint{}, o); }, 1));
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double fd = median(fwd[0]), ad = median(adj[0]), td = median(term[0]);
    for (std::size_t k = 0; k < 4; ++k) {
      const double f = median(fwd[k]), a = median(adj[k]), tt = median(term[k]);
      char ratio[64];
      std::snprintf(ratio, sizeof ratio, "%.1f/%.1f/%.1f", fd / f, ad / a, td / tt);
      std::printf("%7zu %-9s %6lld %10.3f %10.3f %10.3f %16s %10.6f\n", 2 * n_points,
                  to_string(solvers[k]).c_str(), static_cast<long long>(steps[k]), f, a, tt,
                  ratio, objective[k]);
    }
    std::fflush(stdout);
  }
  return 0;
}
