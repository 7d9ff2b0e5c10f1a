// 2-D heat with a conductivity field, Crank–Nicolson, PETSc KSP: the cost of
// the distributed discrete adjoint (gradient w.r.t. the κ field, the source
// amplitude and the initial state) relative to the forward integration, with
// StoreAll and Binomial checkpoints, and strong scaling 1 → N ranks.
//
//   u_t = ∇·(κ ∇u) + q₀ exp(−|x − c|²/(2σ²)) on [0,1]², Dirichlet u = 0,
//   κ = 1 + 0.5 sin(2πx) sin(2πy), u0 = sin(πx) sin(πy), dt = 1e-4,
//   J = ½ Σ V (u(T) − d)², d = 0.
//
// Sample runs:
//   build/bench/bench_pde_heat [n=256] [steps=100] [repeats=3]
//   mpiexec -n 2 build/bench/bench_pde_heat 256      # + strong scaling
// PETSc options apply (-ksp_type, -pc_type); the default is CG with
// PETSc's default preconditioner (ILU(0) on one rank, block Jacobi/ILU on
// several), rtol 1e-10. Under mpiexec, rank 0 first times the same forward
// integration and the StoreAll gradient alone on MPI_COMM_SELF (the other
// ranks wait), so the scaling ratios are measured in one run
// (bench/scaling.sh repeats it and keeps the best).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <utility>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <numbers>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;

namespace {

using bench::median_wall_cpu;

struct Setup {
  pde::Operator<pde::Heat2D> op;
  pde::GlobalVector u0;
  Setup(MPI_Comm comm, std::int64_t n)
      : op(comm,
           [&] {
             pde::Domain d;
             d.cells = {n, n, 1};
             d.boundary = {pde::Boundary::Dirichlet, pde::Boundary::Dirichlet, pde::Boundary::Periodic};
             return d;
           }(),
           {}, {1.0}) {
    const pde::Grid& g = op.grid();
    u0 = g.create_global();
    const auto& o = g.owned();
    std::size_t e = 0;
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++e) {
        const double x = g.coordinate(0, i), y = g.coordinate(1, j);
        u0[e] = std::sin(std::numbers::pi * x) * std::sin(std::numbers::pi * y);
        op.fields()[e] = 1.0 + 0.5 * std::sin(2 * std::numbers::pi * x) * std::sin(2 * std::numbers::pi * y);
      }
  }
};

pde::ThetaOptions options(std::int64_t steps) {
  pde::ThetaOptions o;
  o.theta = 0.5;
  o.dt = 1e-4;
  o.steps = steps;
  o.ksp.ksp_type = "cg";
  o.ksp.rtol = 1e-10;
  return o;
}

bench::WallCpu time_forward(Setup& s, pde::ThetaIntegrator<pde::Heat2D>& integ, int repeats,
                                       MPI_Comm comm) {
  auto u = s.op.grid().create_global();
  return median_wall_cpu(
      [&] {
        deep_copy(u, s.u0);
        MPI_Barrier(comm);
        integ.integrate(u);
        MPI_Barrier(comm);
      },
      repeats);
}

}  // namespace

int main(int argc, char** argv) {
  Environment env(argc, argv);
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  const std::int64_t steps = argc > 2 ? std::atoll(argv[2]) : 100;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  try {
    // 1. Serial reference for the scaling (rank 0 alone, same binary, same run).
    double t_serial = 0.0, t_serial_grad = 0.0;
    if (env.size() > 1) {
      if (env.rank() == 0) {
        Setup s(MPI_COMM_SELF, n);
        pde::ThetaIntegrator<pde::Heat2D> integ(s.op, options(steps));
        auto u = s.op.grid().create_global();
        deep_copy(u, s.u0);
        integ.step(u, 0);  // set-up: Jacobian, I − hθJ, preconditioner
        t_serial = time_forward(s, integ, repeats, MPI_COMM_SELF).wall;
        // forward + adjoint (StoreAll) alone too: scaling of the gradient.
        const auto obj = pde::Objective::misfit(s.op.grid().create_global());
        t_serial_grad =
            median_wall_cpu([&] { (void)integ.gradient(s.u0, obj, ode::StoreAll{}); }, repeats).wall;
      }
      MPI_Barrier(env.comm());
    }
    // 2. Forward, then gradients, on all ranks.
    Setup s(env.comm(), n);
    pde::ThetaIntegrator<pde::Heat2D> integ(s.op, options(steps));
    auto u = s.op.grid().create_global();
    deep_copy(u, s.u0);
    const auto t0 = std::chrono::steady_clock::now();
    integ.step(u, 0);
    const double t_setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::int64_t its_before = integ.krylov_iterations();
    const auto [t_forward, c_forward] = time_forward(s, integ, repeats, env.comm());
    const double its_per_step =
        static_cast<double>(integ.krylov_iterations() - its_before) / static_cast<double>(repeats * steps);
    // Per-call costs of the adjoint's pieces (same binary, same run).
    auto w = s.op.grid().create_global(), f = s.op.grid().create_global();
    auto kbar = s.op.field_grid()->create_global();
    std::vector<double> qbar(1, 0.0);
    fill(w, 1e-3);
    const double t_rhs = bench::median_seconds([&] { s.op.rhs(0.0, s.u0, f); }, 20);
    const double t_vjp = bench::median_seconds([&] { s.op.vjp_add(0.0, s.u0, w, kbar, qbar); }, 20);
    const double t_solve = t_forward / static_cast<double>(steps) - t_rhs;
    const auto objective = pde::Objective::misfit(s.op.grid().create_global());
    pde::ThetaGradient g_all, g_bin;
    const auto [t_all, c_all] = median_wall_cpu(
        [&] {
          MPI_Barrier(env.comm());
          g_all = integ.gradient(s.u0, objective, ode::StoreAll{});
          MPI_Barrier(env.comm());
        },
        repeats);
    const auto [t_bin, c_bin] = median_wall_cpu(
        [&] {
          MPI_Barrier(env.comm());
          g_bin = integ.gradient(s.u0, objective, ode::Binomial{.snapshots = 10});
          MPI_Barrier(env.comm());
        },
        repeats);
    const double kbar_norm = l2_norm(g_all.wrt_fields);
    double diff = 0.0;
    {
      auto d = s.op.field_grid()->create_global();
      linear_sum(d, 1.0, g_all.wrt_fields, -1.0, g_bin.wrt_fields);
      diff = max_norm(d);
    }
    if (env.is_root()) {
      std::printf("2-D heat, CN, %lld^2 cells, %lld steps, %d rank(s), %s, median of %d\n",
                  static_cast<long long>(n), static_cast<long long>(steps), env.size(),
                  integ.solver().description().c_str(), repeats);
      std::printf("  set-up (Jacobian, I - h theta J, preconditioner): %.3f s\n", t_setup);
      std::printf("  forward: %.3f s (%.1f Krylov iterations per step)\n", t_forward, its_per_step);
      std::printf("  per call: rhs %.2f ms, fused kappa+q0 vJp (Dual<%d>) %.2f ms, forward step minus rhs %.2f ms\n",
                  1e3 * t_rhs, pde::default_batch<pde::Heat2D>() + 1, 1e3 * t_vjp, 1e3 * t_solve);
      std::printf("  forward CPU time (rank 0): %.3f s\n", c_forward);
      std::printf("  gradient, StoreAll:     %.3f s  ratio (forward+adjoint)/forward = %.2f wall, %.2f CPU  (adjoint its/step %.1f)\n",
                  t_all, t_all / t_forward, c_all / c_forward,
                  static_cast<double>(g_all.adjoint_krylov_iterations) / static_cast<double>(steps));
      std::printf("  gradient, Binomial(10): %.3f s  ratio = %.2f wall, %.2f CPU  (%lld forward steps, %lld recomputed)\n",
                  t_bin, t_bin / t_forward, c_bin / c_forward, static_cast<long long>(g_bin.forward_steps),
                  static_cast<long long>(g_bin.checkpoints.recomputed_steps));
      std::printf("  J = %.12e, |dJ/dkappa|_2 = %.6e, dJ/dq0 = %.6e, max |StoreAll - Binomial| = %.1e\n",
                  g_all.objective, kbar_norm, g_all.wrt_parameters[0], diff);
      if (env.size() > 1)
        std::printf("  strong scaling: forward 1 rank %.3f s, %d ranks %.3f s: speed-up %.2f, efficiency %.0f%%\n",
                    t_serial, env.size(), t_forward, t_serial / t_forward,
                    100.0 * t_serial / (t_forward * env.size()));
      if (env.size() > 1)
        std::printf("  strong scaling: forward+adjoint (StoreAll) 1 rank %.3f s, %d ranks %.3f s: speed-up %.2f, "
                    "efficiency %.0f%%\n",
                    t_serial_grad, env.size(), t_all, t_serial_grad / t_all,
                    100.0 * t_serial_grad / (t_all * env.size()));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pde_heat: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
