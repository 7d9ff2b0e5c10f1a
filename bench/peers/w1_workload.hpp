#pragma once
// Workload W1 of shared/BENCHMARKS.md — gradient of a time-stepped viscous
// Burgers simulation by recording the whole scalar time loop — and the
// timing harness of bench_w1_peers (costate beside ADOL-C and Sacado, same
// binary).
//
//   u_t + (u²/2)_x = ν u_xx on [0,1) periodic, N = 1000 cells, dx = 1/N,
//   ν = 0.01, dt = min(0.2 dx²/ν, 0.5 dx/1.5) = 2e-5, 1000 explicit Euler
//   steps, Rusanov flux F(uL,uR) = ¼(uL²+uR²) − ½ max(|uL|,|uR|)(uR−uL),
//   central diffusion, u0_i = 1 + 0.5 sin(2π x_i), J = ½ dx Σ u_i(T)².
//   J = 0.5614722210471649, Σ dJ/du0 = 0.99995336065823…,
//   dJ/du0_0 = 1.0000839346205e-3.
//
// The simulation is written once, on the scalar type T, as a user would
// write it (the loop of bench_w1_burgers.cpp); every tool runs exactly this
// code, and the plain-double instantiation is the primal every ratio is
// taken against.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "harness.hpp"

namespace w1 {

inline constexpr int kN = 1000;
inline constexpr int kSteps = 1000;
inline constexpr double kNu = 0.01;

inline constexpr double kJ = 0.5614722210471649;
inline constexpr double kSum = 0.99995336065823;
inline constexpr double kG0 = 1.0000839346205e-3;
/// Relative agreement asked of every tool: the references carry 13–16
/// digits and ~10^7 operations of round-off separate differently ordered
/// evaluations (costate's Σ dJ/du0 differs from the reference by 6e-14).
inline constexpr double kRelTol = 1e-10;

/// u0_i = 1 + 0.5 sin(2π i/N).
inline double u0(int i) { return 1.0 + 0.5 * std::sin(2.0 * std::numbers::pi * i / kN); }

/// J(u(T)) for the initial state `init` (N values). `fabs` resolves to
/// std::fabs for double and to the tool's overload (argument-dependent
/// lookup) for an AD type — fabs, not abs: ADOL-C 2.7 has no abs for
/// adouble. `max` is std::max for every tool (costate, ADOL-C and Sacado
/// alike: it is the best match for two results of the same fabs type and
/// compares them with the tool's operator<), so each tape records the
/// branch taken and none records a max operation.
template <class T>
T objective(const std::vector<T>& init) {
  using std::fabs;
  using std::max;
  const double dx = 1.0 / kN;
  const double dt = std::min(0.2 * dx * dx / kNu, 0.5 * dx / 1.5);
  const double c_adv = dt / dx, c_diff = kNu * dt / (dx * dx);
  std::vector<T> u = init, flux(kN), next(kN);
  auto face = [&](int i, int ip) {  // face i+1/2 between cells i and ip
    const T& ul = u[i];
    const T& ur = u[ip];
    flux[i] = 0.25 * (ul * ul + ur * ur) - 0.5 * max(fabs(ul), fabs(ur)) * (ur - ul);
  };
  auto cell = [&](int im, int i, int ip) {
    next[i] = u[i] - c_adv * (flux[i] - flux[im]) + c_diff * (u[ip] - 2.0 * u[i] + u[im]);
  };
  for (int step = 0; step < kSteps; ++step) {
    for (int i = 0; i < kN - 1; ++i) face(i, i + 1);
    face(kN - 1, 0);
    cell(kN - 1, 0, 1);
    for (int i = 1; i < kN - 1; ++i) cell(i - 1, i, i + 1);
    cell(kN - 2, kN - 1, 0);
    std::swap(u, next);
  }
  T j = 0.0;
  for (int i = 0; i < kN; ++i) j += u[i] * u[i];
  return 0.5 * dx * j;
}

/// What one gradient evaluation of a tool returns.
struct Result {
  double j = 0.0;
  std::vector<double> grad = std::vector<double>(kN);
  double record_seconds = 0.0;  ///< the recording part (taken by the tool's code)
  double tape_bytes = 0.0;      ///< the tool's tape memory (see `memory` of the candidate)
};

/// One tool: a name, how its tape memory is counted, and a function that
/// records the loop and runs the reverse sweep (inputs u0_i), filling r.
struct Candidate {
  std::string name;
  std::string memory;
  std::function<void(Result& r)> gradient;
};

inline double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

/// Aborts unless r has the reference J, Σ dJ/du0 and dJ/du0_0.
inline void check(const std::string& tool, const Result& r) {
  double sum = 0.0;
  for (double g : r.grad) sum += g;
  if (!(rel(r.j, kJ) <= kRelTol && rel(sum, kSum) <= kRelTol && rel(r.grad[0], kG0) <= kRelTol)) {
    std::fprintf(stderr,
                 "%s: MISMATCH against the reference values: J = %.16g (want %.16g), "
                 "sum dJ/du0 = %.14g (want %.14g), dJ/du0_0 = %.13g (want %.13g)\n",
                 tool.c_str(), r.j, kJ, sum, kSum, r.grad[0], kG0);
    std::abort();
  }
}

using peers::escape;
using peers::seconds_since;
using peers::sink;
using peers::Timing;

/// Interleaved rounds: each round times `batch` calls of the plain-double
/// primal (mean per call), then one gradient of every candidate; the ratio
/// of a round is candidate / primal of that round, so slow drifts of the
/// machine cancel, and medians drop the rounds another process disturbed.
/// Every gradient is checked against the reference values.
inline std::vector<Timing> measure(const std::vector<Candidate>& candidates, int rounds,
                                   int batch) {
  std::vector<double> init(kN);
  for (int i = 0; i < kN; ++i) init[i] = u0(i);
  if (const double j = objective(init); !(rel(j, kJ) <= kRelTol)) {
    std::fprintf(stderr, "plain-double primal: MISMATCH: J = %.16g (want %.16g)\n", j, kJ);
    std::abort();
  }
  std::vector<std::string> names, memory;
  for (const auto& c : candidates) {
    names.push_back(c.name);
    memory.push_back(c.memory);
  }
  Result r;
  return peers::interleave(
      names, memory, rounds, batch,
      [&] {
        escape(init.data());
        sink += objective(init);
      },
      [&](std::size_t c) {
        const auto t1 = std::chrono::steady_clock::now();
        candidates[c].gradient(r);
        const double tc = seconds_since(t1);
        check(candidates[c].name, r);
        sink += r.grad[0];
        return peers::Call{tc, r.record_seconds, r.tape_bytes};
      },
      "plain double (primal)");
}

inline void print(const std::vector<Timing>& timings, int rounds, int batch) {
  std::printf("W1: Burgers-1D gradient (N = %d, %d steps), median of %d interleaved rounds "
              "(primal: mean of %d calls per round)\n",
              kN, kSteps, rounds, batch);
  peers::print_table(timings, "ms", "reverse", "rev/p");
}

}  // namespace w1
