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

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class P>
inline void escape(P* p) {
  asm volatile("" : : "g"(p) : "memory");
}
inline double sink = 0.0;

struct Timing {
  std::string name, memory;
  double seconds = 0.0;         // median (record + Hv)
  double record_seconds = 0.0;  // median record part
  double sweep_seconds = 0.0;   // median Hv-sweep part
  double ratio = 0.0;           // median over rounds of (candidate / primal of the same round)
  double ratio_min = 0.0, ratio_max = 0.0;
  double best_ratio = 0.0;      // fastest candidate call / fastest primal round
  double record_ratio = 0.0;    // median over rounds of (record / primal)
  double sweep_ratio = 0.0;     // median over rounds of (Hv sweep / primal)
  double tape_bytes = 0.0;
};

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
inline double minimum(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
inline double maximum(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

/// Interleaved rounds: `batch` calls of the plain-double primal (mean per
/// call), then one H v of every candidate; per-round ratios, medians over
/// rounds. Every H v is checked against the exact one.
inline std::vector<Timing> measure(const std::vector<Candidate>& candidates, int rounds,
                                   int batch) {
  std::vector<double> x, v;
  inputs(x, v);
  const double f_ref = rosenbrock(x.data(), kN);
  const std::size_t nc = candidates.size();
  std::vector<double> primal_t;
  std::vector<std::vector<double>> t(nc), rec(nc), sw(nc), ratio(nc), rec_ratio(nc),
      sw_ratio(nc);
  std::vector<double> bytes(nc, 0.0);
  Result r;
  for (int round = 0; round < rounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batch; ++b) {
      escape(x.data());
      sink += rosenbrock(x.data(), kN);
    }
    const double tp = seconds_since(t0) / batch;
    primal_t.push_back(tp);
    for (std::size_t c = 0; c < nc; ++c) {
      const auto t1 = std::chrono::steady_clock::now();
      candidates[c].hvp(x, v, r);
      const double tc = seconds_since(t1);
      check(candidates[c].name, x, v, f_ref, r);
      sink += r.hv[0];
      t[c].push_back(tc);
      rec[c].push_back(r.record_seconds);
      sw[c].push_back(tc - r.record_seconds);
      ratio[c].push_back(tc / tp);
      rec_ratio[c].push_back(r.record_seconds / tp);
      sw_ratio[c].push_back((tc - r.record_seconds) / tp);
      bytes[c] = r.tape_bytes;
    }
  }
  std::vector<Timing> out;
  Timing p;
  p.name = "plain double (primal f)";
  p.seconds = median(primal_t);
  p.best_ratio = minimum(primal_t);  // the fastest primal round (seconds)
  out.push_back(p);
  for (std::size_t c = 0; c < nc; ++c) {
    Timing y;
    y.name = candidates[c].name;
    y.memory = candidates[c].memory;
    y.seconds = median(t[c]);
    y.record_seconds = median(rec[c]);
    y.sweep_seconds = median(sw[c]);
    y.ratio = median(ratio[c]);
    y.ratio_min = minimum(ratio[c]);
    y.ratio_max = maximum(ratio[c]);
    y.best_ratio = minimum(t[c]) / minimum(primal_t);
    y.record_ratio = median(rec_ratio[c]);
    y.sweep_ratio = median(sw_ratio[c]);
    y.tape_bytes = bytes[c];
    out.push_back(y);
  }
  return out;
}

inline void print(const std::vector<Timing>& timings, int rounds, int batch) {
  std::printf("W3: extended Rosenbrock H v (n = %zu), median of %d interleaved rounds "
              "(primal: mean of %d calls per round)\n",
              kN, rounds, batch);
  std::printf("  primal: median %.2f us, fastest round %.2f us\n", timings[0].seconds * 1e6,
              timings[0].best_ratio * 1e6);
  std::printf("%-34s %8s %8s %8s | %8s %15s %6s | %7s %7s | %8s  %s\n", "tool", "total", "record",
              "Hv sweep", "ratio", "(min..max)", "best", "rec/p", "Hv/p", "tape MB",
              "memory counted as");
  std::printf("%-34s %8s %8s %8s | %8s %15s %6s | %7s %7s |\n", "", "(us)", "(us)", "(us)",
              "median", "over rounds", "", "median", "median");
  for (std::size_t k = 1; k < timings.size(); ++k) {
    const Timing& t = timings[k];
    char range[64];
    std::snprintf(range, sizeof range, "(%.0f..%.0f)", t.ratio_min, t.ratio_max);
    std::printf("%-34s %8.0f %8.0f %8.0f | %8.1f %15s %6.1f | %7.1f %7.1f | %8.2f  %s\n",
                t.name.c_str(), t.seconds * 1e6, t.record_seconds * 1e6, t.sweep_seconds * 1e6,
                t.ratio, range, t.best_ratio, t.record_ratio, t.sweep_ratio, t.tape_bytes / 1e6,
                t.memory.c_str());
  }
  std::printf("ratio = (record + Hv) / primal of the same round; best = fastest call / "
              "fastest primal round\n(sink %.6g)\n", sink);
}

}  // namespace w3
