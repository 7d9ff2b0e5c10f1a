// W5 (../shared/BENCHMARKS.md): discrete adjoint of Van der Pol, mu = 1e3,
// Crank–Nicolson, dt = 1e-3, t in [0, 0.5] (500 steps), gradient of the final
// state with respect to the initial state and mu — the workload of PETSc's
// TSAdjoint example (ex20adj), whose (forward with trajectory + adjoint) /
// forward is 2.04 storing every step, 2.87 storing solutions only, 3.81 with
// stride 50 to disk (revolve unavailable in Debian's PETSc).
//
// Timed in one binary: the forward integration alone (ode::integrate), and
// ode::gradient with StoreAll and Binomial{10} (its sweeps include the
// forward run). J = x(tf) is one cost function; PETSc's example carries two
// (x(tf) and v(tf)) through one backward sweep: timed here as two sweeps
// (two ode::gradient calls) and as one sweep with a block of two adjoint
// seeds (ode::gradients), whose gradients must have the two calls' bits.
//
// Sample run:  build/bench/bench_vdp_adjoint
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"

namespace {

/// CPU medians: on a shared machine the wall clock swings with the load.
template <class F>
double median_cpu(F&& f, int repeats) {
  return costate::bench::median_wall_cpu(f, repeats).cpu;
}

using namespace costate::ode;

struct FinalX {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};
/// x(tf) (component 0) or v(tf) (1): the block's objectives are one type.
struct FinalComponent {
  std::size_t i = 0;
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[i];
  }
};
struct FinalV {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[1];
  }
};

/// PETSc's form (ex20adj): x' = v, v' = μ((1 − x²) v − x) — the equations
/// W5 compares against. costate's built-in ode::VanDerPol is
/// v' = μ(1 − x²) v − x (the −x not scaled by μ): a different, milder
/// problem at μ = 1e3, kept below as a labelled second table.
struct VanDerPolPetsc {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = y[1];
    dydt[1] = p[0] * ((1.0 - y[0] * y[0]) * y[1] - y[0]);
  }
};

/// One model's rows; false when the checkpoint schedules disagree.
template <class M>
bool measure(const char* form, const M& model, int repeats) {
  const Problem<M> pr{model, {2.0, -0.66666666666666666667}, {1000.0}, {0.0, 0.5}};
  const IntegratorOptions opt{.method = Method::CrankNicolson, .dt = 1e-3};
  Solution sol;
  const double t_fwd = median_cpu([&] { sol = integrate(pr, opt); }, repeats);
  GradientResult all, bin, v_all;
  const double t_all = median_cpu([&] { all = gradient(pr, FinalX{}, DiscreteAdjoint{StoreAll{}}, opt); }, repeats);
  const double t_bin = median_cpu(
      [&] { bin = gradient(pr, FinalX{}, DiscreteAdjoint{Binomial{.snapshots = 10}}, opt); }, repeats);
  const double t_two = median_cpu(
      [&] {
        all = gradient(pr, FinalX{}, DiscreteAdjoint{StoreAll{}}, opt);
        v_all = gradient(pr, FinalV{}, DiscreteAdjoint{StoreAll{}}, opt);
      },
      repeats);
  const std::vector<FinalComponent> both{{0}, {1}};
  std::vector<GradientResult> block, block_bin;
  const double t_block = median_cpu(
      [&] {
        block = gradients(pr, std::span<const FinalComponent>(both), DiscreteAdjoint{StoreAll{}}, opt);
      },
      repeats);
  GradientResult v_bin;
  const double t_two_bin = median_cpu(
      [&] {
        bin = gradient(pr, FinalX{}, DiscreteAdjoint{Binomial{.snapshots = 10}}, opt);
        v_bin = gradient(pr, FinalV{}, DiscreteAdjoint{Binomial{.snapshots = 10}}, opt);
      },
      repeats);
  const double t_block_bin = median_cpu(
      [&] {
        block_bin = gradients(pr, std::span<const FinalComponent>(both),
                              DiscreteAdjoint{Binomial{.snapshots = 10}}, opt);
      },
      repeats);
  std::printf("W5 Van der Pol mu = 1e3, %s, Crank-Nicolson, dt = 1e-3, %lld steps (%s)\n", form,
              static_cast<long long>(all.checkpoints.steps), sol.summary.brief_report().c_str());
  std::printf("  x(tf) = %.15g; dx(tf)/d(x0, v0, mu) = %.10g, %.10g, %.10g\n", all.objective,
              all.wrt_initial_state[0], all.wrt_initial_state[1], all.wrt_parameters[0]);
  std::printf("  dv(tf)/d(x0, v0, mu) = %.10g, %.10g, %.10g\n", v_all.wrt_initial_state[0],
              v_all.wrt_initial_state[1], v_all.wrt_parameters[0]);
  std::printf("  binomial(10): %lld forward step evaluations (%lld recomputed), peak %lld snapshots\n",
              static_cast<long long>(bin.checkpoints.forward_steps),
              static_cast<long long>(bin.checkpoints.recomputed_steps),
              static_cast<long long>(bin.checkpoints.peak_snapshots));
  std::printf("| schedule (%s) | forward (ms) | forward + adjoint (ms) | ratio |\n|---|---:|---:|---:|\n", form);
  std::printf("| store all, J = x(tf) | %.3f | %.3f | %.2f |\n", t_fwd * 1e3, t_all * 1e3, t_all / t_fwd);
  std::printf("| binomial(10), J = x(tf) | %.3f | %.3f | %.2f |\n", t_fwd * 1e3, t_bin * 1e3, t_bin / t_fwd);
  std::printf("| store all, x(tf) and v(tf) (two sweeps) | %.3f | %.3f | %.2f |\n", t_fwd * 1e3,
              t_two * 1e3, t_two / t_fwd);
  std::printf("| store all, x(tf) and v(tf) (one sweep, two seeds) | %.3f | %.3f | %.2f |\n",
              t_fwd * 1e3, t_block * 1e3, t_block / t_fwd);
  std::printf("| binomial(10), x(tf) and v(tf) (two sweeps) | %.3f | %.3f | %.2f |\n", t_fwd * 1e3,
              t_two_bin * 1e3, t_two_bin / t_fwd);
  std::printf("| binomial(10), x(tf) and v(tf) (one sweep, two seeds) | %.3f | %.3f | %.2f |\n\n",
              t_fwd * 1e3, t_block_bin * 1e3, t_block_bin / t_fwd);
  // Checkpoint invariance holds bitwise, and the block has the separate
  // sweeps' bits.
  const bool same = bin.wrt_parameters == all.wrt_parameters &&
                    block[0].wrt_parameters == all.wrt_parameters &&
                    block[0].wrt_initial_state == all.wrt_initial_state &&
                    block[1].wrt_parameters == v_all.wrt_parameters &&
                    block[1].wrt_initial_state == v_all.wrt_initial_state &&
                    block_bin[1].wrt_parameters == v_bin.wrt_parameters &&
                    block_bin[1].wrt_initial_state == v_bin.wrt_initial_state;
  if (!same) std::printf("  the block's gradients differ from the separate sweeps'\n");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  const bool petsc = measure("PETSc's v' = mu((1-x^2)v - x)", VanDerPolPetsc{}, repeats);
  const bool builtin = measure("built-in v' = mu(1-x^2)v - x", VanDerPol{}, repeats);
  return petsc && builtin ? 0 : 1;
}
