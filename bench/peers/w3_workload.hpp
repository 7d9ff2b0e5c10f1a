#pragma once
// Workload W3 of shared/BENCHMARKS.md — Hessian–vector product of the
// extended Rosenbrock function, n = 100 000 — and the timing harness of
// bench_w3_peers (costate beside Sacado and ADOL-C, same binary).
//
//   f = Σ_{i<n/2} 100 (x_{2i+1} − x_{2i}²)² + (1 − x_{2i})²,
//   x_{2i} = −1.2 + 0.01 sin(2i),  x_{2i+1} = 1 + 0.01 sin(2i+1),
//   v uniform in (−1, 1) (fixed seed); H v checked against the exact
//   (2×2 block-diagonal) Hessian.
//
// f is written once, on the scalar type T, as the formula reads (one
// expression per pair, like bench_w3_hvp.cpp's AD function); every tool runs
// exactly this code. It keeps four partial sums (as bench_w3_hvp.cpp's
// primal does): a single running sum is a serial dependency the compiler may
// not reorder, with four the plain-double instantiation vectorises (AVX2,
// 4 pairs an iteration). For a tape it is the same number of statements as
// one sum (one `+=` per pair).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"

namespace w3 {

inline constexpr std::size_t kN = 100000;

template <class T>
T rosenbrock(const T* x, std::size_t n) {
  T f[4] = {T(0.0), T(0.0), T(0.0), T(0.0)};
  const std::size_t pairs = n / 2, blocks = pairs - pairs % 4;
  std::size_t i = 0;
  for (; i < blocks; i += 4) {
    for (std::size_t k = 0; k < 4; ++k) {
      const T& a = x[2 * (i + k)];
      const T& b = x[2 * (i + k) + 1];
      f[k] += 100.0 * (b - a * a) * (b - a * a) + (1.0 - a) * (1.0 - a);
    }
  }
  for (; i < pairs; ++i) {
    const T& a = x[2 * i];
    const T& b = x[2 * i + 1];
    f[0] += 100.0 * (b - a * a) * (b - a * a) + (1.0 - a) * (1.0 - a);
  }
  return (f[0] + f[1]) + (f[2] + f[3]);
}

/// The point x and the direction v.
inline void inputs(std::vector<double>& x, std::vector<double>& v) {
  x.resize(kN);
  v.resize(kN);
  std::mt19937_64 rng(20261129);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (std::size_t i = 0; i < kN; ++i) {
    x[i] = (i % 2 == 0 ? -1.2 : 1.0) + 0.01 * std::sin(double(i));
    v[i] = uni(rng);
  }
}

/// What one Hessian–vector product of a tool returns.
struct Result {
  double f = 0.0;
  std::vector<double> hv = std::vector<double>(kN);
  double record_seconds = 0.0;  ///< the recording part (taken by the tool's code)
  double tape_bytes = 0.0;
};

/// One tool: name, how its memory is counted, and a function that records f
/// at x and returns H v.
struct Candidate {
  std::string name;
  std::string memory;
  std::function<void(const std::vector<double>& x, const std::vector<double>& v, Result& r)> hvp;
};

/// Aborts unless r.hv is the exact H v (to 1e-12 of max |Hv|: round-off of
/// a few operations on values ~1e3) and r.f the plain-double f.
inline void check(const std::string& tool, const std::vector<double>& x,
                  const std::vector<double>& v, double f_ref, const Result& r) {
  double max_err = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i + 1 < kN; i += 2) {
    const double a = x[i], b = x[i + 1];
    const double ha = (1200.0 * a * a - 400.0 * b + 2.0) * v[i] - 400.0 * a * v[i + 1];
    const double hb = -400.0 * a * v[i] + 200.0 * v[i + 1];
    max_err = std::max({max_err, std::fabs(r.hv[i] - ha), std::fabs(r.hv[i + 1] - hb)});
    max_ref = std::max({max_ref, std::fabs(ha), std::fabs(hb)});
  }
  if (!(max_err <= 1e-12 * max_ref && std::fabs(r.f - f_ref) <= 1e-12 * std::fabs(f_ref))) {
    std::fprintf(stderr,
                 "%s: MISMATCH: max |Hv - exact| = %.3e (max |Hv| %.3e), f = %.16g (want %.16g)\n",
                 tool.c_str(), max_err, max_ref, r.f, f_ref);
    std::abort();
  }
}

using peers::escape;
using peers::seconds_since;
using peers::sink;
using peers::Timing;

/// Interleaved rounds: `batch` calls of the plain-double primal (mean per
/// call), then one H v of every candidate; per-round ratios, medians over
/// rounds. Every H v is checked against the exact one.
inline std::vector<Timing> measure(const std::vector<Candidate>& candidates, int rounds,
                                   int batch) {
  std::vector<double> x, v;
  inputs(x, v);
  const double f_ref = rosenbrock(x.data(), kN);
  std::vector<std::string> names, memory;
  for (const auto& c : candidates) {
    names.push_back(c.name);
    memory.push_back(c.memory);
  }
  Result r;
  return peers::interleave(
      names, memory, rounds, batch,
      [&] {
        escape(x.data());
        sink += rosenbrock(x.data(), kN);
      },
      [&](std::size_t c) {
        const auto t1 = std::chrono::steady_clock::now();
        candidates[c].hvp(x, v, r);
        const double tc = seconds_since(t1);
        check(candidates[c].name, x, v, f_ref, r);
        sink += r.hv[0];
        return peers::Call{tc, r.record_seconds, r.tape_bytes};
      },
      "plain double (primal f)");
}

inline void print(const std::vector<Timing>& timings, int rounds, int batch) {
  std::printf("W3: extended Rosenbrock H v (n = %zu), median of %d interleaved rounds "
              "(primal: mean of %d calls per round)\n",
              kN, rounds, batch);
  peers::print_table(timings, "us", "Hv sweep", "Hv/p");
}

}  // namespace w3
