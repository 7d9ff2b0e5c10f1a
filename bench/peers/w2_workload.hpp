#pragma once
// Workload W2 of shared/BENCHMARKS.md — dense 16×16 Jacobian by vector
// forward mode — and the timing harness shared by bench_w2_jacobian (costate
// alone) and bench_w2_peers (costate beside Sacado and ADOL-C, same binary).
//
//   F_i(x) = Σ_j sin(x_j·(i+1))·exp(−x_i·x_j/16) + x_i³,   i, j = 0..15,
//   at x_j = 0.5 + 0.03·j;  J[0][0] = 1.120482472417367, J[15][7] = 5.520386508754350.
//
// The function is written once, on the scalar type T, as a user would write
// it; every tool runs exactly this code.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace w2 {

inline constexpr int kN = 16;
inline constexpr double kJ00 = 1.120482472417367;
inline constexpr double kJ15_7 = 5.520386508754350;
/// Agreement asked of every tool's Jacobian entries: a few ulps of the
/// reference values (which are O(1)), more than enough to catch a wrong
/// derivative and loose enough for differently ordered sums.
inline constexpr double kCheckTol = 1e-12;

template <class T>
inline void residual(const T* x, T* f) {
  using std::exp;
  using std::sin;
  for (int i = 0; i < kN; ++i) {
    const double c = i + 1;
    T s = 0.0;
    for (int j = 0; j < kN; ++j) s += sin(x[j] * c) * exp(-x[i] * x[j] / 16.0);
    f[i] = s + x[i] * x[i] * x[i];
  }
}

inline void inputs(double* x) {
  for (int j = 0; j < kN; ++j) x[j] = 0.5 + 0.03 * j;
}

/// Keeps the compiler from proving a buffer unused or unchanged: the
/// pointed-to memory may be read and written by this empty asm.
template <class P>
inline void escape(P* p) {
  asm volatile("" : : "g"(p) : "memory");
}
/// Results also feed a sink printed at the end.
inline double sink = 0.0;

/// Aborts unless J (row-major 16×16) has the reference entries.
inline void check(const char* tool, const double* J) {
  const double e0 = std::fabs(J[0] - kJ00);
  const double e1 = std::fabs(J[15 * kN + 7] - kJ15_7);
  if (!(e0 <= kCheckTol && e1 <= kCheckTol)) {
    std::fprintf(
        stderr, "%s: wrong Jacobian: J[0][0] = %.16g (want %.16g), J[15][7] = %.16g (want %.16g)\n",
        tool, J[0], kJ00, J[15 * kN + 7], kJ15_7);
    std::abort();
  }
}

/// One candidate: a name and a function computing J (row-major) at x.
struct Candidate {
  std::string name;
  std::function<void(const double* x, double* J)> jacobian;
};

struct Timing {
  std::string name;
  double seconds;  // median time of one call
  double ratio;    // median over rounds of (candidate / primal in the same round)
};

/// Times the plain-double primal and each candidate in interleaved rounds:
/// every round runs `batch` calls of the primal, then `batch` calls of each
/// candidate. Per-round ratios cancel slow drifts of the machine; medians
/// drop the rounds another process disturbed.
inline std::vector<Timing> measure(const std::vector<Candidate>& candidates, int rounds,
                                   int batch) {
  double x[kN], f[kN], J[kN * kN];
  inputs(x);
  auto time_batch = [&](const std::function<void()>& call) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batch; ++b) call();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count() / batch;
  };
  std::vector<double> primal_t;
  std::vector<std::vector<double>> cand_t(candidates.size()), cand_r(candidates.size());
  const std::function<void()> primal = [&] {
    escape(x);
    residual(x, f);
    escape(f);
  };
  for (int r = 0; r < rounds; ++r) {
    const double tp = time_batch(primal);
    primal_t.push_back(tp);
    sink += f[0];
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const auto& jac = candidates[c].jacobian;
      const double tc = time_batch([&] {
        escape(x);
        jac(x, J);
        escape(J);
      });
      sink += J[0];
      cand_t[c].push_back(tc);
      cand_r[c].push_back(tc / tp);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<Timing> out;
  out.push_back({"plain double (primal F)", median(primal_t), 1.0});
  for (std::size_t c = 0; c < candidates.size(); ++c)
    out.push_back({candidates[c].name, median(cand_t[c]), median(cand_r[c])});
  return out;
}

inline void print(const std::vector<Timing>& timings, int rounds, int batch) {
  std::printf("W2: dense 16x16 Jacobian, median of %d interleaved rounds of %d calls\n", rounds,
              batch);
  std::printf("%-44s %12s %18s\n", "tool", "time (us)", "Jacobian / primal");
  for (const auto& t : timings)
    std::printf("%-44s %12.3f %18.3f\n", t.name.c_str(), t.seconds * 1e6, t.ratio);
  std::printf("(sink %.6g)\n", sink);
}

}  // namespace w2
