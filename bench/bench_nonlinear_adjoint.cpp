// Adjoint cost of a Newton solve (issue 4): nonlinear::solve on ad::Real
// records ONE node; what differentiating it adds — forming and factorising
// ∂F/∂x and ∂F/∂p at the solution when the node is recorded, then one
// transposed solve and a product with ∂F/∂p in the sweep — against one
// Newton linear solve (AD Jacobian + LU + solve) and against the whole
// forward Newton solve, measured in one run. Target: adjoint ≤ one extra
// linear solve.
//
//   2-D Bratu  −Δu = λ eᵘ + σ sin(πx) sin(πy) on the unit square, u = 0 on the
//   boundary, N × N interior points (5-point stencil, sparse Jacobian by 5
//   colours, SparseLU), p = (λ, σ) = (5, 1), J = h² Σ u²; and 1-D Bratu with
//   n = 300 unknowns, p = (2, 1) and a dense Jacobian (dense LU).
//
// Medians of `reps` repetitions (default 7). Prints a markdown table.
//
// Sample run:  build/bench/bench_nonlinear_adjoint
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/sparse_jacobian.hpp"
#include "costate/core/environment.hpp"
#include "costate/linear/solve.hpp"
#include "costate/nonlinear/solve.hpp"

namespace {

using costate::ad::Real;
using costate::ad::Tape;
namespace nonlinear = costate::nonlinear;
namespace linear = costate::linear;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Bratu2d {
  int m = 100;  // interior points per direction
  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (m + 1);
    const double ih2 = 1.0 / (h * h);
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
  int unknowns() const { return m * m; }
};

struct Bratu1d {
  int n = 300;
  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (n + 1);
    for (int i = 0; i < n; ++i) {
      const T zero(0.0);
      const T& left = i > 0 ? u[i - 1] : zero;
      const T& right = i + 1 < n ? u[i + 1] : zero;
      r[i] = (2.0 * u[i] - left - right) / (h * h) - p[0] * exp(u[i]) -
             p[1] * std::sin(std::numbers::pi * (i + 1) * h);
    }
  }
  int unknowns() const { return n; }
};

struct Row {
  std::string workload;
  int iterations = 0;
  double newton = 0, linear_solve = 0, record_extra = 0, sweep = 0;
};

template <class Problem>
Row measure(const Problem& problem, const std::vector<double>& p, nonlinear::Options options, int reps,
            const std::string& name) {
  const int n = problem.unknowns();
  const std::vector<double> u0(static_cast<std::size_t>(n), 0.0);
  std::vector<double> t_newton, t_real, t_sweep, t_lin;
  Row row;
  row.workload = name;
  Tape& tape = Tape::active();
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    const auto sd = nonlinear::solve(problem, u0, p, options);
    t_newton.push_back(seconds(t0));
    if (!sd.summary.converged()) {
      std::fprintf(stderr, "%s did not converge: %s\n", name.c_str(), sd.summary.full_report().c_str());
      std::exit(1);
    }
    row.iterations = sd.summary.iterations;

    // One Newton linear solve at x*: AD Jacobian, factorisation, solve.
    std::vector<double> res(static_cast<std::size_t>(n));
    problem(std::span<const double>(sd.x), std::span<const double>(p), std::span<double>(res));
    const Eigen::VectorXd rhs = Eigen::Map<const Eigen::VectorXd>(res.data(), n);
    auto vector_f = [&](const auto& x) {
      using T = std::decay_t<decltype(x[0])>;
      std::vector<T> pt(p.begin(), p.end()), out(static_cast<std::size_t>(n));
      problem(std::span<const T>(x.data(), x.size()), std::span<const T>(pt), std::span<T>(out));
      return out;
    };
    if (sd.summary.sparse_jacobian) {
      const auto pattern = costate::ad::detect_sparsity(vector_f, sd.x);
      const auto coloring = costate::ad::color_columns(pattern);
      t0 = Clock::now();
      const auto jac = costate::ad::sparse_jacobian(vector_f, sd.x, pattern, coloring);
      const auto step = linear::solve(jac.jacobian, rhs);
      t_lin.push_back(seconds(t0));
      if (!step.summary.success()) std::exit(1);
    } else {
      t0 = Clock::now();
      // Dense Jacobian by Dual chunks, as the solver forms it.
      using D = costate::ad::Dual<double, 8>;
      Eigen::MatrixXd jd(n, n);
      std::vector<D> xd(sd.x.begin(), sd.x.end()), pd(p.begin(), p.end()), rd(static_cast<std::size_t>(n));
      for (int c0 = 0; c0 < n; c0 += 8) {
        const int width = std::min(8, n - c0);
        for (int k = 0; k < width; ++k) xd[static_cast<std::size_t>(c0 + k)].tangent(k) = 1.0;
        problem(std::span<const D>(xd), std::span<const D>(pd), std::span<D>(rd));
        for (int k = 0; k < width; ++k) {
          xd[static_cast<std::size_t>(c0 + k)].tangent(k) = 0.0;
          for (int i = 0; i < n; ++i) jd(i, c0 + k) = rd[static_cast<std::size_t>(i)].tangent(k);
        }
      }
      const auto step = linear::solve(jd, rhs);
      t_lin.push_back(seconds(t0));
      if (!step.summary.success()) std::exit(1);
    }

    tape.reset();
    tape.start_recording();
    std::vector<Real> pr(p.begin(), p.end());
    for (auto& v : pr) tape.register_input(v);
    t0 = Clock::now();
    auto sr = nonlinear::solve(problem, u0, pr, options);
    t_real.push_back(seconds(t0));
    Real j = 0.0;
    const double h2 = 1.0 / double((n + 1));
    for (const Real& v : sr.x) j += h2 * v * v;
    tape.register_output(j);
    tape.stop_recording();
    j.set_gradient(1.0);
    t0 = Clock::now();
    tape.evaluate();
    t_sweep.push_back(seconds(t0));
    if (!(std::isfinite(pr[0].gradient()) && pr[0].gradient() != 0.0)) std::exit(1);
  }
  tape.reset();
  row.newton = median(t_newton);
  row.linear_solve = median(t_lin);
  row.record_extra = std::max(0.0, median(t_real) - row.newton);
  row.sweep = median(t_sweep);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  std::vector<Row> rows;
  const nonlinear::Options tight{.atol = 1e-8, .rtol = 1e-12};
  for (auto backend : {nonlinear::Backend::Native, nonlinear::Backend::PetscSnes, nonlinear::Backend::Kinsol}) {
    nonlinear::Options o = tight;
    o.backend = backend;
    rows.push_back(measure(Bratu2d{.m = 100}, {5.0, 1.0}, o, reps, "2-D Bratu 100x100, sparse, " + nonlinear::to_string(backend)));
  }
  nonlinear::Options dense = tight;
  dense.jacobian = nonlinear::JacobianMode::Dense;
  rows.push_back(measure(Bratu1d{.n = 300}, {2.0, 1.0}, dense, reps, "1-D Bratu n = 300, dense, native"));
  if (env.is_root()) {
    std::printf("| workload | Newton its | forward Newton (s) | one linear solve (s) | record extra (s) | sweep (s) | adjoint / linear solve | adjoint / Newton |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows) {
      const double adjoint = r.record_extra + r.sweep;
      std::printf("| %s | %d | %.4g | %.4g | %.4g | %.4g | **%.2f** | %.3f |\n", r.workload.c_str(), r.iterations,
                  r.newton, r.linear_solve, r.record_extra, r.sweep, adjoint / r.linear_solve, adjoint / r.newton);
    }
  }
  return 0;
}
