// W1 (../shared/BENCHMARKS.md): gradient of a time-stepped viscous Burgers
// simulation by recording the whole scalar time loop on costate's Jacobian
// tape — the AD-core race against CoDiPack (30.7x primal, 195 MB), ADOL-C
// and Sacado (~480x).
//
//   u_t + (u²/2)_x = ν u_xx on [0,1) periodic, N = 1000, ν = 0.01,
//   dt = min(0.2 dx²/ν, 0.5 dx/1.5), 1000 explicit Euler steps,
//   Rusanov flux F(uL,uR) = ¼(uL²+uR²) − ½ max(|uL|,|uR|)(uR−uL),
//   u0_i = 1 + 0.5 sin(2π x_i),  J = ½ dx Σ u_i(T)².
//
// Prints: primal time, (record + reverse) time, their ratio, tape bytes, and
// checks J and dJ/du0 against the published reference values.
//
// Sample run:  build/bench/bench_w1_burgers
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <vector>

#include "bench_util.hpp"
#include "peers/w1_workload.hpp"
#include "costate/ad/reverse.hpp"

namespace {

using costate::bench::median_seconds;

using w1::kN;
using w1::kSteps;
using w1::u0;


}  // namespace

int main() {
  using costate::ad::Real;
  using costate::ad::Tape;
  // Reference values (BENCHMARKS.md W1); relative agreement expected to
  // round-off of 10^6 operations (~1e-12).
  constexpr double kJ = 0.5614722210471649, kSum = 0.99995336065823, kG0 = 1.0000839346205e-3;
  constexpr double kRel = 1e-10;

  double j_primal = 0.0;
  const double t_primal = median_seconds(
      [&] {
        std::vector<double> u(kN);
        for (int i = 0; i < kN; ++i) u[i] = u0(i);
        j_primal = w1::objective(u);
      },
      11);

  Tape& tape = Tape::active();
  std::vector<Real> x(kN);
  double j_tape = 0.0, sum = 0.0, g0 = 0.0;
  costate::ad::TapeStats stats;
  double t_record = 0.0;
  const double t_tape = median_seconds(
      [&] {
        const auto start = std::chrono::steady_clock::now();
        tape.reset();
        tape.start_recording();
        for (int i = 0; i < kN; ++i) {
          x[i] = u0(i);
          tape.register_input(x[i]);
        }
        std::vector<Real> u = x;
        Real j = w1::objective(u);
        tape.register_output(j);
        tape.stop_recording();
        t_record = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        j.set_gradient(1.0);
        tape.evaluate();
        j_tape = j.value();
        sum = 0.0;
        for (int i = 0; i < kN; ++i) sum += x[i].gradient();
        g0 = x[0].gradient();
        stats = tape.stats();
      },
      5);

  auto rel = [](double a, double b) { return std::abs(a - b) / std::abs(b); };
  std::printf("W1 Burgers-1D, N = %d, %d steps\n", kN, kSteps);
  std::printf("  J primal = %.16g, J tape = %.16g (reference %.16g)\n", j_primal, j_tape, kJ);
  std::printf("  sum dJ/du0 = %.14g (reference %.14g), dJ/du0_0 = %.13g (reference %.13g)\n", sum,
              kSum, g0, kG0);
  std::printf("  tape: %s\n", stats.report().c_str());
  std::printf("  last repetition: record %.2f ms, reverse %.2f ms\n", t_record * 1e3,
              (t_tape - t_record) * 1e3);
  std::printf("| tool | primal (ms) | record + reverse (ms) | ratio | tape MB |\n|---|---:|---:|---:|---:|\n");
  std::printf("| costate ad::Real (Jacobian tape) | %.3f | %.2f | %.1f | %.0f |\n", t_primal * 1e3,
              t_tape * 1e3, t_tape / t_primal, stats.bytes / 1e6);
  if (rel(j_primal, kJ) > kRel || rel(j_tape, kJ) > kRel || rel(sum, kSum) > kRel ||
      rel(g0, kG0) > 1e-10) {
    std::printf("MISMATCH against the reference values\n");
    return 1;
  }
  return 0;
}
