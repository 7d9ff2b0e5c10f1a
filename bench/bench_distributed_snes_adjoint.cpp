// Adjoint cost of the DISTRIBUTED Newton solve (issue 4): nonlinear::solve
// on a DistributedLayout (PETSc SNES, MPIAIJ Jacobian from coloured local
// AD, LU: PETSc's on 1 rank, MUMPS on more) against its forward solve, in
// one run, on however many ranks mpiexec starts.
//
//   2-D Bratu  −Δu = λ eᵘ + σ sin(πx) sin(πy) on the unit square, u = 0 on the
//   boundary, m × m interior points (5-point stencil), unknowns split in
//   contiguous blocks of k = j m + i with the off-rank stencil neighbours
//   as ghosts; p = (λ, σ) = (5, 1); J = Σ_r h² Σ_{owned} u².
//
// forward = the solve on double (layout check, sparsity detection and
// colouring, SNES with its Jacobians and factorisations); record extra =
// the same solve on ad::Real minus forward (∂F/∂x assembled again at x* and
// factorised, ∂F/∂p); sweep = Tape::evaluate() (KSPSolveTranspose with
// that factorisation, (∂F_r/∂p)ᵀ λ_r) + the rank-order sum of p̄. Medians
// of `reps` repetitions (default 5); barriers around every timed region;
// rank 0 prints a markdown table.
//
// Sample runs:  build/bench/bench_distributed_snes_adjoint
//               mpiexec -n 2 build/bench/bench_distributed_snes_adjoint
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/nonlinear/distributed.hpp"
#include "costate/tensor/reduce.hpp"

namespace {

using costate::ad::Real;
using costate::ad::Tape;
namespace nonlinear = costate::nonlinear;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The rows [first, first + owned) of 2-D Bratu over (owned, sorted ghosts).
struct LocalBratu2d {
  int m = 100;
  std::int64_t first = 0, owned = 0;
  std::vector<std::int64_t> ghosts;
  template <class T>
  const T& at(std::span<const T> xe, std::int64_t g) const {
    if (g >= first && g < first + owned) return xe[static_cast<std::size_t>(g - first)];
    const auto it = std::lower_bound(ghosts.begin(), ghosts.end(), g);
    return xe[static_cast<std::size_t>(owned + (it - ghosts.begin()))];
  }
  template <class T>
  void operator()(std::span<const T> xe, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (m + 1), ih2 = 1.0 / (h * h);
    for (std::int64_t l = 0; l < owned; ++l) {
      const std::int64_t k = first + l, i = k % m, j = k / m;
      const T zero(0.0);
      const T& w = i > 0 ? at(xe, k - 1) : zero;
      const T& e = i + 1 < m ? at(xe, k + 1) : zero;
      const T& s = j > 0 ? at(xe, k - m) : zero;
      const T& nn = j + 1 < m ? at(xe, k + m) : zero;
      const T& c = xe[static_cast<std::size_t>(l)];
      const double src = std::sin(std::numbers::pi * (i + 1) * h) * std::sin(std::numbers::pi * (j + 1) * h);
      r[static_cast<std::size_t>(l)] = (4.0 * c - w - e - s - nn) * ih2 - p[0] * exp(c) - p[1] * src;
    }
  }
};

struct Row {
  int m = 0, iterations = 0;
  std::string description;
  double forward = 0, record_extra = 0, sweep = 0;
};

Row measure(int m, int reps) {
  auto layout = nonlinear::DistributedLayout::split(MPI_COMM_WORLD, std::int64_t{m} * m);
  LocalBratu2d f{.m = m, .first = layout.first, .owned = layout.owned, .ghosts = {}};
  for (std::int64_t k = layout.first; k < layout.first + layout.owned; ++k)
    for (std::int64_t g : {k - m, k - 1, k + 1, k + m}) {
      const bool on_grid = g >= 0 && g < std::int64_t{m} * m && !((g == k - 1 && k % m == 0) || (g == k + 1 && g % m == 0));
      if (on_grid && (g < layout.first || g >= layout.first + layout.owned)) f.ghosts.push_back(g);
    }
  std::sort(f.ghosts.begin(), f.ghosts.end());
  f.ghosts.erase(std::unique(f.ghosts.begin(), f.ghosts.end()), f.ghosts.end());
  layout.ghosts = f.ghosts;
  const nonlinear::Options options{.backend = nonlinear::Backend::PetscSnes, .atol = 1e-8, .rtol = 1e-12};
  const std::vector<double> p = {5.0, 1.0}, u0(static_cast<std::size_t>(layout.owned), 0.0);
  const double h2 = 1.0 / double((m + 1) * (m + 1));
  std::vector<double> t_forward, t_real, t_sweep;
  Row row;
  row.m = m;
  Tape& tape = Tape::active();
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    const auto sd = nonlinear::solve(f, layout, u0, p, options);
    MPI_Barrier(MPI_COMM_WORLD);
    t_forward.push_back(seconds(t0));
    if (!sd.summary.converged()) {
      std::fprintf(stderr, "m = %d did not converge: %s\n", m, sd.summary.full_report().c_str());
      std::exit(1);
    }
    row.iterations = sd.summary.iterations;
    row.description = sd.summary.message;

    tape.reset();
    tape.start_recording();
    std::vector<Real> pr(p.begin(), p.end());
    for (auto& v : pr) tape.register_input(v);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = Clock::now();
    auto sr = nonlinear::solve(f, layout, u0, pr, options);
    MPI_Barrier(MPI_COMM_WORLD);
    t_real.push_back(seconds(t0));
    Real j = 0.0;
    for (const Real& v : sr.x) j += h2 * v * v;
    tape.register_output(j);
    tape.stop_recording();
    j.set_gradient(1.0);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = Clock::now();
    tape.evaluate();
    const std::vector<double> g = nonlinear::sum_parameter_gradient(MPI_COMM_WORLD, pr);
    MPI_Barrier(MPI_COMM_WORLD);
    t_sweep.push_back(seconds(t0));
    if (!(std::isfinite(g[0]) && g[0] != 0.0)) std::exit(1);
    tape.reset();
  }
  row.forward = median(t_forward);
  row.record_extra = std::max(0.0, median(t_real) - row.forward);
  row.sweep = median(t_sweep);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<Row> rows;
  for (int m : {100, 200}) rows.push_back(measure(m, reps));
  if (env.is_root()) {
    std::printf("| 2-D Bratu, ranks | n | Newton its | forward (s) | record extra (s) | sweep (s) | **adjoint / forward** | sweep / forward |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows) {
      const double adjoint = r.record_extra + r.sweep;
      std::printf("| %dx%d, %d rank%s | %d | %d | %.4g | %.4g | %.4g | **%.2f** | %.3f |\n", r.m, r.m, size,
                  size == 1 ? "" : "s", r.m * r.m, r.iterations, r.forward, r.record_extra, r.sweep,
                  adjoint / r.forward, r.sweep / r.forward);
    }
    std::printf("(%s)\n", rows.front().description.c_str());
  }
  return 0;
}
