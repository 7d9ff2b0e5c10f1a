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
// The primal is w1::objective<double> (the plain loop of bench_w1_burgers);
// J and dJ/du0 are checked against the published references (the ODE form
// multiplies by dt instead of dt/dx, so it agrees to round-off, 1e-10).
//
// Sample run:  build/bench/bench_w1_ode [repeats]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "peers/w1_workload.hpp"

namespace {

using costate::bench::median_seconds;

struct Burgers {
  template <class T>
  void rhs(double, std::span<const T> u, std::span<const T>, std::span<T> dudt) const {
    using std::fabs;
    using std::max;
    const int n = static_cast<int>(u.size());
    const double dx = 1.0 / n;
    const double inv_dx = 1.0 / dx, nu_dx2 = w1::kNu / (dx * dx);
    auto flux = [&](int i, int ip) -> T {
      const T& ul = u[static_cast<std::size_t>(i)];
      const T& ur = u[static_cast<std::size_t>(ip)];
      return T(0.25 * (ul * ul + ur * ur) - 0.5 * max(fabs(ul), fabs(ur)) * (ur - ul));
    };
    T left = flux(n - 1, 0);
    for (int i = 0; i < n; ++i) {
      const int ip = i + 1 < n ? i + 1 : 0, im = i > 0 ? i - 1 : n - 1;
      const T right = flux(i, ip);
      const auto k = static_cast<std::size_t>(i);
      dudt[k] = -inv_dx * (right - left) +
                nu_dx2 * (u[static_cast<std::size_t>(ip)] - 2.0 * u[k] + u[static_cast<std::size_t>(im)]);
      left = right;
    }
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
  const int n = w1::kN;
  const double dx = 1.0 / n;
  const double dt = std::min(0.2 * dx * dx / w1::kNu, 0.5 * dx / 1.5);
  std::vector<double> u0(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) u0[static_cast<std::size_t>(i)] = w1::u0(i);
  ode::Problem<Burgers> problem{Burgers{}, u0, {}, {0.0, w1::kSteps * dt}};
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
        const Burgers m;
        for (int s = 0; s < w1::kSteps; ++s) {
          m.rhs<double>(0.0, u, {}, f);
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
  std::printf("%-26s %12s %10s %12s %12s %10s\n", "schedule", "gradient ms", "/ primal",
              "fwd steps", "snapshots", "MB held");
  struct Row {
    const char* name;
    ode::Checkpointing schedule;
    bool coloured;
  };
  const Row rows[] = {{"store all, tape vJp", ode::StoreAll{}, false},
                      {"binomial(10), tape vJp", ode::Binomial{.snapshots = 10}, false},
                      {"store all, coloured vJp", ode::StoreAll{}, true},
                      {"binomial(10), coloured", ode::Binomial{.snapshots = 10}, true},
                      {"binomial(32), coloured", ode::Binomial{.snapshots = 32}, true}};
  for (const Row& row : rows) {
    ode::GradientResult g;
    const double t = median_seconds(
        [&] {
          g = ode::gradient(problem, HalfSquare{}, ode::DiscreteAdjoint{.checkpointing = row.schedule,
                                                    .coloured_jacobian = row.coloured},
                            opt);
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
    const double mb = static_cast<double>(g.checkpoints.peak_snapshots) * n * 8.0 / 1e6;
    std::printf("%-26s %12.3f %10.2f %12lld %12lld %10.2f\n", row.name, t * 1e3, t / primal,
                static_cast<long long>(g.checkpoints.forward_steps),
                static_cast<long long>(g.checkpoints.peak_snapshots), mb);
  }
  jp = w1::objective<double>(u0);
  std::printf("J = %.16g (reference %.16g); primal J = %.16g\n", jp, w1::kJ, jp);
  return 0;
}
