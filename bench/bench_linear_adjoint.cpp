// Adjoint cost of linear solves (issue 4): the reverse sweep through ONE
// linear::solve node against the forward solve, measured in one run.
//
//  1. Dense LU, n = 500: A random + 2n·I, J = Σ cᵢ xᵢ², gradient w.r.t. all
//     of A (250 000 inputs) and b. forward = linear::solve on double
//     (factorisation + solve); adjoint = Tape::evaluate() (Aᵀ s = x̄ with the
//     kept LU, Ā −= s xᵀ, b̄ += s). Also shown: an adjoint that refactorises
//     Aᵀ (what a solver without factorisation reuse pays). Target ≤ 0.3.
//  2. Sparse 2-D Laplacian (5-point, Dirichlet), n = 317² = 100 489, PETSc
//     KSP (cg + icc, and gmres + ilu), rtol 1e-8: forward = linear::solve on
//     double (matrix assembly + preconditioner set-up + KSPSolve); adjoint =
//     Tape::evaluate() (KSPSolveTranspose with the kept preconditioner, Ā on
//     the 5n-entry pattern). Target ≤ 1.2. Runs on as many ranks as
//     mpiexec gives (rows split evenly).
//
// Medians of `reps` repetitions (default 5). Prints a markdown table.
//
// Sample runs:  build/bench/bench_linear_adjoint
//               mpiexec -n 2 build/bench/bench_linear_adjoint
#include <Eigen/LU>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/linear/ksp.hpp"
#include "costate/linear/solve.hpp"

namespace {

using costate::ad::Real;
using costate::ad::Tape;
namespace linear = costate::linear;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string workload;
  double forward = 0, record = 0, adjoint = 0;
  std::string note;
};

Row dense_lu(int n, int reps) {
  std::mt19937 gen(42);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Eigen::MatrixXd a(n, n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) a(i, j) = u(gen) + (i == j ? 2.0 * n : 0.0);
  Eigen::VectorXd b(n);
  for (int i = 0; i < n; ++i) b[i] = u(gen);

  std::vector<double> fwd, rec, adj, refactor;
  double check = 0.0;
  Tape& tape = Tape::active();
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    const auto sd = linear::solve(a, b);
    fwd.push_back(seconds(t0));
    check += sd.x[0];

    tape.reset();
    Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic> ar = a.cast<Real>();
    Eigen::Matrix<Real, Eigen::Dynamic, 1> br = b.cast<Real>();
    tape.start_recording();
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) tape.register_input(ar(i, j));
    for (int i = 0; i < n; ++i) tape.register_input(br[i]);
    t0 = Clock::now();
    auto sr = linear::solve(ar, br);
    rec.push_back(seconds(t0));
    tape.stop_recording();
    for (int i = 0; i < n; ++i) sr.x[i].set_gradient((1.0 + 0.01 * i) * 2.0 * sr.x[i].value());
    t0 = Clock::now();
    tape.evaluate();
    adj.push_back(seconds(t0));

    // Without reuse: factorise Aᵀ again for s, then the same outer product.
    t0 = Clock::now();
    Eigen::VectorXd xbar(n);
    for (int i = 0; i < n; ++i) xbar[i] = (1.0 + 0.01 * i) * 2.0 * sd.x[i];
    const Eigen::PartialPivLU<Eigen::MatrixXd> lut(a.transpose());
    const Eigen::VectorXd s = lut.solve(xbar);
    Eigen::MatrixXd abar = -s * sd.x.transpose();
    refactor.push_back(seconds(t0));
    // The two adjoints agree.
    const double diff = std::abs(ar(3, 7).gradient() - abar(3, 7)) + std::abs(br[5].gradient() - s[5]);
    if (diff > 1e-12 * (std::abs(s[5]) + 1e-30)) {
      std::fprintf(stderr, "dense adjoint mismatch: %g\n", diff);
      std::exit(1);
    }
  }
  tape.reset();
  Row row;
  row.workload = "dense LU, n = " + std::to_string(n) + " (d/dA and d/db)";
  row.forward = median(fwd);
  row.record = median(rec);
  row.adjoint = median(adj);
  char note[160];
  std::snprintf(note, sizeof note, "refactorising A^T instead: %.3f", median(refactor) / row.forward);
  row.note = note;
  (void)check;
  return row;
}

/// 2-D Laplacian on an m × m grid, rows split over the ranks.
template <class T>
linear::DistributedCsr<T> laplacian(int m) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::int64_t n = std::int64_t{m} * m;
  const std::int64_t first = n * rank / size, last = n * (rank + 1) / size;
  linear::DistributedCsr<T> a;
  a.global_rows = n;
  a.first_row = first;
  a.row_ptr.reserve(static_cast<std::size_t>(last - first) + 1);
  a.columns.reserve(static_cast<std::size_t>(last - first) * 5);
  a.values.reserve(static_cast<std::size_t>(last - first) * 5);
  for (std::int64_t k = first; k < last; ++k) {
    const std::int64_t i = k % m, j = k / m;
    auto add = [&](std::int64_t c, double v) {
      a.columns.push_back(c);
      a.values.push_back(T(v));
    };
    if (j > 0) add(k - m, -1.0);
    if (i > 0) add(k - 1, -1.0);
    add(k, 4.0);
    if (i + 1 < m) add(k + 1, -1.0);
    if (j + 1 < m) add(k + m, -1.0);
    a.row_ptr.push_back(static_cast<std::int64_t>(a.columns.size()));
  }
  return a;
}

Row sparse_ksp(int m, int reps, const std::string& ksp, const std::string& pc) {
  const linear::KspOptions options{.ksp_type = ksp, .pc_type = pc, .rtol = 1e-8};
  const auto ad = laplacian<double>(m);
  const std::int64_t nl = ad.local_rows();
  Eigen::VectorXd b(nl);
  for (std::int64_t i = 0; i < nl; ++i) b[i] = std::sin(0.001 * double(ad.first_row + i)) + 1.0;

  std::vector<double> fwd, rec, adj;
  int its_fwd = 0, its_adj = 0;
  Tape& tape = Tape::active();
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    const auto sd = linear::solve(ad, b, options);
    fwd.push_back(seconds(t0));
    its_fwd = sd.summary.iterations;
    if (!sd.summary.success()) {
      std::fprintf(stderr, "forward KSP failed: %s\n", sd.summary.brief_report().c_str());
      std::exit(1);
    }

    tape.reset();
    auto ar = laplacian<Real>(m);
    Eigen::Matrix<Real, Eigen::Dynamic, 1> br = b.cast<Real>();
    tape.start_recording();
    for (auto& v : ar.values) tape.register_input(v);
    for (std::int64_t i = 0; i < nl; ++i) tape.register_input(br[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = Clock::now();
    auto sr = linear::solve(ar, br, options);
    rec.push_back(seconds(t0));
    tape.stop_recording();
    for (std::int64_t i = 0; i < nl; ++i) sr.x[i].set_gradient(2.0 * sr.x[i].value());
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = Clock::now();
    tape.evaluate();
    adj.push_back(seconds(t0));
    its_adj = sr.adjoint_summary->iterations;
    if (!sr.adjoint_summary->success()) {
      std::fprintf(stderr, "adjoint KSP failed: %s\n", sr.adjoint_summary->brief_report().c_str());
      std::exit(1);
    }
  }
  tape.reset();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Row row;
  row.workload = "2-D Laplacian, n = " + std::to_string(std::int64_t{m} * m) + ", PETSc " + ksp + "/" + pc +
                 (size > 1 ? " on " + std::to_string(size) + " ranks" : "");
  row.forward = median(fwd);
  row.record = median(rec);
  row.adjoint = median(adj);
  row.note = std::to_string(its_fwd) + " forward / " + std::to_string(its_adj) + " adjoint iterations";
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::vector<Row> rows;
  if (env.size() == 1) rows.push_back(dense_lu(500, reps));
  rows.push_back(sparse_ksp(317, reps, "cg", env.size() == 1 ? "icc" : "bjacobi"));
  rows.push_back(sparse_ksp(317, reps, "gmres", env.size() == 1 ? "ilu" : "bjacobi"));
  if (env.is_root()) {
    std::printf("| workload | forward (s) | Real solve, recorded (s) | adjoint sweep (s) | adjoint / forward | note |\n");
    std::printf("|---|---:|---:|---:|---:|---|\n");
    for (const Row& r : rows)
      std::printf("| %s | %.4g | %.4g | %.4g | **%.3f** | %s |\n", r.workload.c_str(), r.forward, r.record,
                  r.adjoint, r.adjoint / r.forward, r.note.c_str());
  }
  return 0;
}
