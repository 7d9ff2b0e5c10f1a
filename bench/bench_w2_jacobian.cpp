// Workload W2 (shared/BENCHMARKS.md): the dense 16×16 Jacobian of
//   F_i(x) = Σ_j sin(x_j·(i+1))·exp(−x_i·x_j/16) + x_i³
// by vector forward mode — one evaluation of F on ad::Dual<double, 16> with
// all 16 directions seeded — against the plain-double evaluation of F in
// the same binary. Prints the ratio Jacobian time / primal time (target
// ≤ 1.3; peers side by side: bench_w2_peers).
//
// The Jacobian time includes seeding the inputs and copying the tangents
// out into a row-major double[16][16].
//
// Sample run:  build/bench/bench_w2_jacobian [rounds] [batch]
#include <cstdlib>

#include "costate/ad/dual.hpp"
#include "peers/w2_workload.hpp"

namespace {

using D16 = costate::ad::Dual<double, w2::kN>;

[[gnu::noinline]] void costate_jacobian(const double* x, double* J) {
  D16 xd[w2::kN], fd[w2::kN];
  for (int j = 0; j < w2::kN; ++j) xd[j] = D16::seed(x[j], j);
  w2::residual(xd, fd);
  for (int i = 0; i < w2::kN; ++i)
    for (int j = 0; j < w2::kN; ++j) J[i * w2::kN + j] = fd[i].tangent(j);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 301;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 50;

  // 1. Check the Jacobian against the reference entries (aborts if wrong).
  double x[w2::kN], J[w2::kN * w2::kN];
  w2::inputs(x);
  costate_jacobian(x, J);
  w2::check("costate Dual<double,16>", J);

  // 2. Time primal and Jacobian, interleaved, and print the ratio.
  const auto timings =
      w2::measure({{"costate ad::Dual<double,16>", costate_jacobian}}, rounds, batch);
  w2::print(timings, rounds, batch);
  return 0;
}
