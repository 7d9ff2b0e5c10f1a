// W1 (../shared/BENCHMARKS.md) the second way: the same viscous Burgers
// discretisation written as an ODE model (templated right-hand side) and
// differentiated by ode::gradient's discrete adjoint of explicit Euler —
// per-step vector–Jacobian products and checkpoints instead of a tape of the
// whole loop. Issue #5 target: (forward + adjoint) / primal ≤ 4 with memory
// ≤ snapshots × state (CoDiPack's whole-loop tape: 30.7×, 195 MB).
//
//   f_i(u) = −(F_{i+½} − F_{i−½})/dx + ν (u_{i+1} − 2u_i + u_{i−1})/dx²,
//   F(uL, uR) = ¼(uL² + uR²) − ½ max(|uL|, |uR|)(uR − uL), periodic,
//   u_{n+1} = u_n + dt f(u_n), 1000 steps, J = ½ dx Σ u_i(T)².
//
// The model is ode::Burgers1D (costate/ode/burgers.hpp, p = (ν)), once with
// its own hand-written reverse rule (f_yᵀ w and f_pᵀ w in one pass over the
// faces) and once without it (the System's automatic choice: the coloured
// sparse Jacobian, one Dual<double, 8> pass per step, 4 colours); both give
// dJ/du0 and dJ/dν, compared with each other to 1e-10 in every row.
//
// The primal is w1::objective<double> (the plain loop of bench_w1_burgers);
// J and dJ/du0 are checked against the published references (the ODE form
// multiplies by dt instead of dt/dx, so it agrees to round-off, 1e-10).
//
// Sample run:  build/bench/bench_w1_ode [repeats] ["store all, own rule"]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/burgers.hpp"
#include "costate/ode/gradient.hpp"
#include "peers/w1_workload.hpp"

namespace {

// Process CPU seconds (median): on a shared machine the wall clock of a
// 30-ms call also counts other jobs' time slices, that of a 1.5-ms primal
// mostly not, which skewed the ratios.
template <class F>
double median_seconds(F&& f, int repeats) {
  return costate::bench::median_wall_cpu(f, repeats).cpu;
}
using costate::ode::Burgers1D;

// The same model without its reverse rule: the System then picks its own
// way to f_yᵀ w (automatic: the coloured sparse Jacobian, 4 colours).
struct BurgersNoRule {
  Burgers1D m;
  template <class T>
  void rhs(double t, std::span<const T> u, std::span<const T> p, std::span<T> dudt) const {
    m.rhs<T>(t, u, p, dudt);
  }
};

struct HalfSquare {
  template <class T>
  T terminal(std::span<const T> u, std::span<const T>) const {
    T s = 0.0;
    for (const T& v : u) s = s + v * v;
    return T(0.5 / static_cast<double>(u.size()) * s);
  }
};

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  namespace ode = costate::ode;
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  const char* only = argc > 2 ? argv[2] : nullptr;  // run the rows whose name contains it
  const int n = w1::kN;
  const double dx = 1.0 / n;
  const double dt = std::min(0.2 * dx * dx / w1::kNu, 0.5 * dx / 1.5);
  std::vector<double> u0(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) u0[static_cast<std::size_t>(i)] = w1::u0(i);
  const Burgers1D model{static_cast<std::size_t>(n)};
  const std::vector<double> nu{w1::kNu};
  const ode::Problem<Burgers1D> problem{model, u0, nu, {0.0, w1::kSteps * dt}};
  const ode::Problem<BurgersNoRule> problem_no_rule{BurgersNoRule{model}, u0, nu,
                                                    {0.0, w1::kSteps * dt}};
  ode::IntegratorOptions opt;
  opt.method = ode::Method::ExplicitEuler;
  opt.dt = dt;

  double jp = 0.0;
  const double primal = median_seconds([&] { jp = w1::objective<double>(u0); }, repeats);
  ode::Solution sol;
  const double forward = median_seconds([&] { sol = ode::integrate(problem, opt); }, repeats);

  // The same model's right-hand side in a plain explicit Euler loop: splits
  // ode::integrate's driver overhead from the model's formulation (a flux
  // per face recomputed in one pass, vs the primal's two loops).
  const double same_model = median_seconds(
      [&] {
        std::vector<double> u = u0, f(u0.size());
        for (int s = 0; s < w1::kSteps; ++s) {
          model.rhs<double>(0.0, u, nu, f);
          for (std::size_t i = 0; i < u.size(); ++i) u[i] += dt * f[i];
        }
        jp = u[0];
      },
      repeats);
  std::printf("W1 Burgers as an ODE: N = %d, %d explicit Euler steps (ode::integrate took %lld)\n",
              n, w1::kSteps, static_cast<long long>(sol.summary.steps));
  std::printf("primal (plain loop) %.3f ms; the model's rhs in a plain Euler loop %.3f ms (%.2f x "
              "primal); ode::integrate %.3f ms (%.2f x primal, %.2f x the model's loop)\n",
              primal * 1e3, same_model * 1e3, same_model / primal, forward * 1e3, forward / primal,
              forward / same_model);
  std::printf("%-26s %12s %10s %11s %12s %12s %10s\n", "schedule", "gradient ms", "/ primal",
              "/ integrate",
              "fwd steps", "snapshots", "MB held");
  struct Row {
    const char* name;
    ode::Checkpointing schedule;
    bool rule;
  };
  const Row rows[] = {{"store all, own rule", ode::StoreAll{}, true},
                      {"binomial(10), own rule", ode::Binomial{.snapshots = 10}, true},
                      {"binomial(32), own rule", ode::Binomial{.snapshots = 32}, true},
                      {"store all, coloured", ode::StoreAll{}, false},
                      {"binomial(10), coloured", ode::Binomial{.snapshots = 10}, false},
                      {"binomial(32), coloured", ode::Binomial{.snapshots = 32}, false}};
  double reference_nu = NAN;  // dJ/dν by the own-rule rows (they come first)
  for (const Row& row : rows) {
    if (only != nullptr && std::strstr(row.name, only) == nullptr) continue;
    ode::GradientResult g;
    const ode::DiscreteAdjoint method{.checkpointing = row.schedule};
    const double t = median_seconds(
        [&] {
          g = row.rule ? ode::gradient(problem, HalfSquare{}, method, opt)
                       : ode::gradient(problem_no_rule, HalfSquare{}, method, opt);
        },
        repeats);
    double sum = 0.0;
    for (double v : g.wrt_initial_state) sum += v;
    if (!(w1::rel(g.objective, w1::kJ) <= w1::kRelTol && w1::rel(sum, w1::kSum) <= w1::kRelTol &&
          w1::rel(g.wrt_initial_state[0], w1::kG0) <= w1::kRelTol)) {
      std::fprintf(stderr, "MISMATCH (%s): J = %.16g, sum = %.14g, g0 = %.13g\n", row.name,
                   g.objective, sum, g.wrt_initial_state[0]);
      return 1;
    }
    if (row.rule) {
      reference_nu = g.wrt_parameters.at(0);
    } else if (!std::isnan(reference_nu) &&
               !(w1::rel(g.wrt_parameters.at(0), reference_nu) <= w1::kRelTol)) {
      std::fprintf(stderr, "MISMATCH (%s): dJ/dnu = %.16g, own rule %.16g\n", row.name,
                   g.wrt_parameters.at(0), reference_nu);
      return 1;
    }
    const double mb = static_cast<double>(g.checkpoints.peak_snapshots) * n * 8.0 / 1e6;
    std::printf("%-26s %12.3f %10.2f %11.2f %12lld %12lld %10.2f\n", row.name, t * 1e3, t / primal,
                t / forward,
                static_cast<long long>(g.checkpoints.forward_steps),
                static_cast<long long>(g.checkpoints.peak_snapshots), mb);
  }
  jp = w1::objective<double>(u0);
  std::printf("J = %.16g (reference %.16g); primal J = %.16g\n", jp, w1::kJ, jp);
  return 0;
}
