// W3 (../shared/BENCHMARKS.md): Hessian–vector product of the extended
// Rosenbrock function, n = 100 000, by forward over reverse:
// Reverse<Dual<double,1>> — record f with the inputs' tangents set to v,
// one reverse sweep; the tangents of the input adjoints are H v.
//
//   f = Σ_{i<n/2} 100 (x_{2i+1} − x_{2i}²)² + (1 − x_{2i})²,
//   x_{2i} = −1.2 + 0.01 sin(2i),  x_{2i+1} = 1 + 0.01 sin(2i+1),
//   v uniform in (−1, 1) (fixed seed).
// Checked against the exact (block-diagonal) Hessian; compared with the
// plain-double primal in the same binary. CoDiPack RealReverseGen<RealForward>:
// 175 (record + Hv) / primal.
//
// Sample run:  build/bench/bench_w3_hvp
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_util.hpp"
#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"

namespace {

using costate::bench::median_seconds;

constexpr std::size_t kN = 100000;

template <class T>
T rosenbrock(const std::vector<T>& x) {
  T f = 0.0;
  for (std::size_t i = 0; i + 1 < x.size(); i += 2) {
    const T& a = x[i];
    const T& b = x[i + 1];
    f += 100.0 * (b - a * a) * (b - a * a) + (1.0 - a) * (1.0 - a);
  }
  return f;
}

/// The plain-double primal, written to vectorise (four partial sums: a
/// single running sum is a serial dependency the compiler may not reorder).
double primal(const std::vector<double>& x) {
  double f[4] = {0.0, 0.0, 0.0, 0.0};
  const std::size_t pairs = x.size() / 2;
  const double* a = x.data();
  const std::size_t blocks = pairs - pairs % 4;
  std::size_t i = 0;
  for (; i < blocks; i += 4) {
    for (std::size_t k = 0; k < 4; ++k) {
      const double xa = a[2 * (i + k)], xb = a[2 * (i + k) + 1];
      const double t = xb - xa * xa;
      const double u = 1.0 - xa;
      f[k] += 100.0 * t * t + u * u;
    }
  }
  for (; i < pairs; ++i) {
    const double t = a[2 * i + 1] - a[2 * i] * a[2 * i];
    const double u = 1.0 - a[2 * i];
    f[0] += 100.0 * t * t + u * u;
  }
  return (f[0] + f[1]) + (f[2] + f[3]);
}

}  // namespace

int main() {
  using D = costate::ad::Dual<double, 1>;
  using R = costate::ad::Reverse<D>;
  using Tape = costate::ad::BasicTape<D>;

  std::vector<double> x(kN), v(kN);
  std::mt19937_64 rng(20261129);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (std::size_t i = 0; i < kN; ++i) {
    x[i] = (i % 2 == 0 ? -1.2 : 1.0) + 0.01 * std::sin(double(i));
    v[i] = uni(rng);
  }

  double sink = 0.0;
  const double t_primal = median_seconds([&] { sink += primal(x); }, 101);

  Tape& tape = Tape::active();
  std::vector<R> xr(kN);
  std::vector<double> hv(kN);
  double t_record = 0.0;
  const double t_total = median_seconds(
      [&] {
        const auto start = std::chrono::steady_clock::now();
        tape.reset();
        tape.start_recording();
        for (std::size_t i = 0; i < kN; ++i) {
          xr[i] = D(x[i], {v[i]});
          tape.register_input(xr[i]);
        }
        R f = rosenbrock(xr);
        tape.register_output(f);
        tape.stop_recording();
        t_record = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        f.set_gradient(D(1.0, {0.0}));
        tape.evaluate();
        for (std::size_t i = 0; i < kN; ++i) hv[i] = xr[i].gradient().tangent(0);
      },
      11);

  // Exact H v, pair by pair.
  double max_err = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i + 1 < kN; i += 2) {
    const double a = x[i], b = x[i + 1];
    const double ha = (1200.0 * a * a - 400.0 * b + 2.0) * v[i] - 400.0 * a * v[i + 1];
    const double hb = -400.0 * a * v[i] + 200.0 * v[i + 1];
    max_err = std::max({max_err, std::abs(hv[i] - ha), std::abs(hv[i + 1] - hb)});
    max_ref = std::max({max_ref, std::abs(ha), std::abs(hb)});
  }
  const auto stats = tape.stats();
  std::printf("W3 extended Rosenbrock HVP, n = %zu (f = %.12g)\n", kN, sink / 101.0);
  std::printf("  max |Hv - exact| = %.3e (max |Hv| = %.3e)\n", max_err, max_ref);
  std::printf("  tape: %s\n", stats.report().c_str());
  std::printf("| tool | primal (us) | record + Hv (us) | (record + Hv) / primal | Hv sweep / primal |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  std::printf("| costate Reverse<Dual<double,1>> | %.1f | %.0f | %.1f | %.1f |\n", t_primal * 1e6,
              t_total * 1e6, t_total / t_primal, (t_total - t_record) / t_primal);
  // Round-off of a few operations on values ~1e3: 1e-12 relative.
  return max_err <= 1e-12 * max_ref ? 0 : 1;
}
