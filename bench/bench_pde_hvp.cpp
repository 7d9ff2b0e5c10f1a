// The cost of one PDE Hessian–vector product (pde::ThetaIntegrator::
// hessian_vector: tangent-linear run + second-order adjoint) relative to one
// gradient (the first-order discrete adjoint), measured in one run with
// interleaved repeats, for both θ steppers (Crank–Nicolson, backward Euler),
// StoreAll and Binomial checkpoints, the exact and the Gauss–Newton product,
// and the exact product at a linearized point (ThetaIntegrator::linearize:
// trajectory and first-order adjoints kept, as Newton-CG uses it):
//
//   heat:    u_t = ∇·(κ ∇u) + q₀ s(x, y) on [0,1]², Dirichlet, κ a field
//            (linear in u: one KSP solve per step), direction (δκ, δq₀, δu0);
//   burgers: u_t + (½u²)_x + (½u²)_y = ν ∇²u + A sin(2πx) sin(2πy), periodic
//            (Newton per step), direction (δν, δA, δu0);
//   J = ½ Σ V (u(T) − d)².
//
// Sample runs:
//   build/bench/bench_pde_hvp [n=128] [steps=40] [repeats=3] [heat|burgers|all|explicit]
// `explicit`: heat through pde::ExplicitRkIntegrator (rk4, ssp_rk3) at half
// the stability estimate's step: forward run, gradient, H·v and
// Gauss–Newton, as ratios to the forward run and to the gradient.
//   mpiexec -n 2 build/bench/bench_pde_hvp 128
// PETSc options apply (-ksp_type, -pc_type): default GMRES with PETSc's
// default preconditioner, rtol 1e-10.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/explicit_rk.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

pde::Domain domain(std::int64_t n, pde::Boundary b) {
  pde::Domain d;
  d.cells = {n, n, 1};
  d.boundary = {b, b, pde::Boundary::Periodic};
  return d;
}

pde::ThetaOptions options(double theta, double dt, std::int64_t steps) {
  pde::ThetaOptions o;
  o.theta = theta;
  o.dt = dt;
  o.steps = steps;
  o.ksp.rtol = 1e-10;
  o.newton_rtol = 1e-9;
  return o;
}

/// Gradient, exact H·v and Gauss–Newton H·v, interleaved `repeats` times;
/// prints the medians and the ratios to the gradient.
template <class Model>
void measure(const char* name, pde::Operator<Model>& op, const pde::GlobalVector& u0, const pde::ThetaOptions& o,
             const pde::ThetaDirection& v, int repeats, MPI_Comm comm) {
  const pde::Grid& g = op.grid();
  const auto obj = pde::Objective::misfit(g.create_global());
  pde::ThetaIntegrator<Model> integ(op, o);
  for (int schedule = 0; schedule < 2; ++schedule) {
    const ode::Checkpointing c =
        schedule == 0 ? ode::Checkpointing{ode::StoreAll{}} : ode::Checkpointing{ode::Binomial{.snapshots = 8}};
    (void)integ.gradient(u0, obj, c);  // warm-up: operators, preconditioner, work arrays
    // At a linearized point (the trajectory and μ_n kept): many products, one linearization.
    const auto lin = integ.linearize(u0, obj);
    std::vector<double> tg, th, tn, tl;
    pde::ThetaHessianVector last;
    for (int r = 0; r < repeats; ++r) {
      MPI_Barrier(comm);
      tl.push_back(integ.hessian_vector(lin, v).seconds);
      MPI_Barrier(comm);
      tg.push_back(integ.gradient(u0, obj, c).seconds);
      MPI_Barrier(comm);
      last = integ.hessian_vector(u0, obj, v, c);
      th.push_back(last.seconds);
      MPI_Barrier(comm);
      tn.push_back(integ.hessian_vector(u0, obj, v, c, pde::HessianProduct::GaussNewton).seconds);
    }
    const double ml = median(tl);
    const double mg = median(tg), mh = median(th), mn = median(tn);
    if (g.rank() == 0)
      std::printf("%-8s theta=%.1f %-12s gradient %8.3f s  H.v %8.3f s (%.2fx)  Gauss-Newton %8.3f s (%.2fx)  "
                  "H.v at a linearized point %8.3f s (%.2fx; linearize %.3f s)  krylov fwd/tangent/adjoint %lld/%lld/%lld\n",
                  name, o.theta, ode::to_string(c).c_str(), mg, mh, mh / mg, mn, mn / mg, ml, ml / mg,
                  lin.gradient.seconds,
                  static_cast<long long>(last.krylov_iterations),
                  static_cast<long long>(last.tangent_krylov_iterations),
                  static_cast<long long>(last.adjoint_krylov_iterations));
    std::fflush(stdout);
  }
}

/// Explicit RK: forward, gradient, exact and Gauss–Newton H·v, interleaved.
template <class Model>
void measure_explicit(pde::Operator<Model>& op, const pde::GlobalVector& u0, pde::ExplicitRkMethod m, std::int64_t steps,
                      const pde::ThetaDirection& v, int repeats, MPI_Comm comm) {
  const pde::Grid& g = op.grid();
  const auto obj = pde::Objective::misfit(g.create_global());
  pde::ExplicitRkOptions o{.method = m, .dt = 1.0, .steps = steps};
  o.dt = 0.5 * pde::ExplicitRkIntegrator<Model>(op, o).stability(u0).max_stable_dt;
  pde::ExplicitRkIntegrator<Model> integ(op, o);
  auto u = g.create_global();
  for (int schedule = 0; schedule < 2; ++schedule) {
    const ode::Checkpointing c =
        schedule == 0 ? ode::Checkpointing{ode::StoreAll{}} : ode::Checkpointing{ode::Binomial{.snapshots = 8}};
    (void)integ.gradient(u0, obj, c);  // warm-up
    std::vector<double> tf, tg, th, tn;
    for (int r = 0; r < repeats; ++r) {
      MPI_Barrier(comm);
      const auto t0 = std::chrono::steady_clock::now();
      deep_copy(u, u0);
      integ.integrate(u);
      tf.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      MPI_Barrier(comm);
      tg.push_back(integ.gradient(u0, obj, c).seconds);
      MPI_Barrier(comm);
      th.push_back(integ.hessian_vector(u0, obj, v, c).seconds);
      MPI_Barrier(comm);
      tn.push_back(integ.hessian_vector(u0, obj, v, c, pde::HessianProduct::GaussNewton).seconds);
    }
    const double mf = median(tf), mg = median(tg), mh = median(th), mn = median(tn);
    if (g.rank() == 0)
      std::printf("heat     %-8s dt=%.2e %-12s forward %8.3f s  gradient %8.3f s (%.2fx forward)  H.v %8.3f s (%.2fx "
                  "gradient)  Gauss-Newton %8.3f s (%.2fx gradient)\n",
                  to_string(m).c_str(), o.dt, ode::to_string(c).c_str(), mf, mg, mg / mf, mh, mh / mg, mn, mn / mg);
    std::fflush(stdout);
  }
}

std::vector<double> natural(std::int64_t n, double salt) {
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = std::sin(0.77 * static_cast<double>(k) + salt);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  Environment env(argc, argv);
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 128;
  const std::int64_t steps = argc > 2 ? std::atoll(argv[2]) : 40;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::string which = argc > 4 ? argv[4] : "all";  // heat, burgers or all
  try {
    if (env.rank() == 0) {
      double load[3] = {0, 0, 0};
      if (getloadavg(load, 3) < 0) load[0] = -1;
      std::printf("bench_pde_hvp: %lld^2 cells, %lld steps, %d ranks, %d repeats (medians); load %.2f\n",
                  static_cast<long long>(n), static_cast<long long>(steps), env.size(), repeats, load[0]);
    }
    if (which == "explicit") {
      pde::Operator<pde::Heat2D> op(env.comm(), domain(n, pde::Boundary::Dirichlet), {}, {1.0});
      const pde::Grid& g = op.grid();
      auto u0 = g.create_global();
      const auto& ow = g.owned();
      std::size_t e = 0;
      for (std::int64_t j = ow.start[1]; j < ow.start[1] + ow.count[1]; ++j)
        for (std::int64_t i = ow.start[0]; i < ow.start[0] + ow.count[0]; ++i, ++e) {
          const double x = g.coordinate(0, i), y = g.coordinate(1, j);
          u0[e] = std::sin(std::numbers::pi * x) * std::sin(std::numbers::pi * y);
          op.fields()[e] = 1.0 + 0.5 * std::sin(2 * std::numbers::pi * x) * std::sin(2 * std::numbers::pi * y);
        }
      pde::ThetaDirection v;
      v.fields = op.field_grid()->create_global();
      op.field_grid()->scatter(natural(g.global_size(), 0.3), v.fields);
      v.parameters = {1.0};
      v.initial_state = g.create_global();
      g.scatter(natural(g.global_size(), 1.1), v.initial_state);
      for (auto m : {pde::ExplicitRkMethod::Rk4, pde::ExplicitRkMethod::SspRk3})
        measure_explicit(op, u0, m, steps, v, repeats, env.comm());
      return 0;
    }
    for (double theta : {0.5, 1.0}) {
      if (which == "burgers") break;
      pde::Operator<pde::Heat2D> op(env.comm(), domain(n, pde::Boundary::Dirichlet), {}, {1.0});
      const pde::Grid& g = op.grid();
      auto u0 = g.create_global();
      const auto& ow = g.owned();
      std::size_t e = 0;
      for (std::int64_t j = ow.start[1]; j < ow.start[1] + ow.count[1]; ++j)
        for (std::int64_t i = ow.start[0]; i < ow.start[0] + ow.count[0]; ++i, ++e) {
          const double x = g.coordinate(0, i), y = g.coordinate(1, j);
          u0[e] = std::sin(std::numbers::pi * x) * std::sin(std::numbers::pi * y);
          op.fields()[e] = 1.0 + 0.5 * std::sin(2 * std::numbers::pi * x) * std::sin(2 * std::numbers::pi * y);
        }
      pde::ThetaDirection v;
      v.fields = op.field_grid()->create_global();
      op.field_grid()->scatter(natural(g.global_size(), 0.3), v.fields);
      v.parameters = {1.0};
      v.initial_state = g.create_global();
      g.scatter(natural(g.global_size(), 1.1), v.initial_state);
      measure("heat", op, u0, options(theta, 1e-4, steps), v, repeats, env.comm());
    }
    for (double theta : {0.5, 1.0}) {
      if (which == "heat") break;
      pde::Operator<pde::Burgers2D> op(env.comm(), domain(n, pde::Boundary::Periodic), {}, {0.01, 0.5});
      const pde::Grid& g = op.grid();
      auto u0 = g.create_global();
      const auto& ow = g.owned();
      std::size_t e = 0;
      for (std::int64_t j = ow.start[1]; j < ow.start[1] + ow.count[1]; ++j)
        for (std::int64_t i = ow.start[0]; i < ow.start[0] + ow.count[0]; ++i, ++e)
          u0[e] = 0.5 * std::sin(2 * std::numbers::pi * g.coordinate(0, i)) *
                  std::cos(2 * std::numbers::pi * g.coordinate(1, j));
      pde::ThetaDirection v;
      v.parameters = {1e-3, 0.1};
      v.initial_state = g.create_global();
      g.scatter(natural(g.global_size(), 1.1), v.initial_state);
      measure("burgers", op, u0, options(theta, 2e-3, steps), v, repeats, env.comm());
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_pde_hvp: %s\n", ex.what());
    return 1;
  }
  return 0;
}
