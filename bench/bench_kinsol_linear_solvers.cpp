// KINSOL's linear solvers on a sparse problem (issue 4): the same Newton
// solve (KINSOL, exact Jacobian from coloured AD at every iterate) with
// Options::kinsol_linear_solver = dense (the sparse Jacobian expanded into
// SUNDIALS' dense LU), klu (SuiteSparse KLU on a CSR SUNSparseMatrix) and
// gmres (SPGMR preconditioned by an Eigen sparse LU), beside the native
// Newton (Eigen SparseLU), timed in one run.
//
//   2-D Bratu  −Δu = λ eᵘ + σ sin(πx) sin(πy), m × m interior points,
//   p = (5, 1), u₀ = 0, ‖F‖ ≤ 1e-8; m = 20, 30, 40 (n = 400 … 1600).
//
// Medians of `reps` repetitions (default 3). The solutions are checked
// against the native one in the run. Prints a markdown table.
//
// Sample run:  build/bench/bench_kinsol_linear_solvers
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
#include "costate/nonlinear/solve.hpp"

namespace {

namespace nonlinear = costate::nonlinear;
using Clock = std::chrono::steady_clock;

struct Bratu2d {
  int m = 30;
  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (m + 1), ih2 = 1.0 / (h * h);
    for (int j = 0; j < m; ++j)
      for (int i = 0; i < m; ++i) {
        const int k = j * m + i;
        const T zero(0.0);
        const T& w = i > 0 ? u[k - 1] : zero;
        const T& e = i + 1 < m ? u[k + 1] : zero;
        const T& s = j > 0 ? u[k - m] : zero;
        const T& nn = j + 1 < m ? u[k + m] : zero;
        const double src = std::sin(std::numbers::pi * (i + 1) * h) * std::sin(std::numbers::pi * (j + 1) * h);
        r[k] = (4.0 * u[k] - w - e - s - nn) * ih2 - p[0] * exp(u[k]) - p[1] * src;
      }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timed {
  double seconds = 0.0;
  int iterations = 0;
  std::vector<double> x;
};

Timed run(const Bratu2d& f, const nonlinear::Options& o, int reps) {
  const std::vector<double> u0(static_cast<std::size_t>(f.m * f.m), 0.0), p = {5.0, 1.0};
  std::vector<double> t;
  Timed out;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    auto sol = nonlinear::solve(f, u0, p, o);
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!sol.summary.converged()) {
      std::fprintf(stderr, "did not converge: %s\n", sol.summary.full_report().c_str());
      std::exit(1);
    }
    out.iterations = sol.summary.iterations;
    out.x = std::move(sol.x);
  }
  out.seconds = median(t);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  using S = nonlinear::KinsolLinearSolver;
  std::printf("| 2-D Bratu | n | native SparseLU (s) | KINSOL dense (s) | KINSOL klu (s) | KINSOL gmres+LU (s) | **dense / klu** | its (native/dense/klu/gmres) | max |x - x_native| |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---|---:|\n");
  for (int m : {20, 30, 40}) {
    const Bratu2d f{.m = m};
    const nonlinear::Options base{.atol = 1e-8, .rtol = 1e-14, .jacobian = nonlinear::JacobianMode::Sparse};
    const Timed native = run(f, base, reps);
    Timed k[3];
    int idx = 0;
    double worst = 0.0;
    for (S s : {S::Dense, S::Klu, S::Gmres}) {
      nonlinear::Options o = base;
      o.backend = nonlinear::Backend::Kinsol;
      o.kinsol_linear_solver = s;
      k[idx] = run(f, o, reps);
      for (std::size_t i = 0; i < native.x.size(); ++i) worst = std::max(worst, std::abs(k[idx].x[i] - native.x[i]));
      ++idx;
    }
    std::printf("| %dx%d | %d | %.4g | %.4g | %.4g | %.4g | **%.0f** | %d/%d/%d/%d | %.1e |\n", m, m, m * m,
                native.seconds, k[0].seconds, k[1].seconds, k[2].seconds, k[0].seconds / k[1].seconds,
                native.iterations, k[0].iterations, k[1].iterations, k[2].iterations, worst);
  }
  return 0;
}
