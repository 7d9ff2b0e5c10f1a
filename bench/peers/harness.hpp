#pragma once
/// \file
/// The timing harness shared by the peer benchmarks (W1 gradient, W3
/// Hessian–vector product): interleaved rounds against the plain-double
/// primal, per-round ratios, medians, and the table they print.
///
/// A tool's call is split into a recording part (timed by the tool's own
/// code, returned in `record_seconds`) and the rest (the reverse sweep for
/// W1, the Hv sweep for W3), so the table shows where each tool spends.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace peers {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Keeps the compiler from proving a buffer unused or unchanged.
template <class P>
inline void escape(P* p) {
  asm volatile("" : : "g"(p) : "memory");
}
inline double sink = 0.0;

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
inline double minimum(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
inline double maximum(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

/// One timed call of a tool: total seconds, its recording part, tape bytes.
struct Call {
  double seconds = 0.0;
  double record_seconds = 0.0;
  double tape_bytes = 0.0;
};

struct Timing {
  std::string name, memory;
  double seconds = 0.0;         // median total (record + rest)
  double record_seconds = 0.0;  // median record part
  double rest_seconds = 0.0;    // median of the rest (reverse / Hv sweep)
  double ratio = 0.0;           // median over rounds of (candidate / primal of the same round)
  double ratio_min = 0.0, ratio_max = 0.0;
  double best_ratio = 0.0;      // fastest candidate call / fastest primal round
  double record_ratio = 0.0;    // median over rounds of (record / primal)
  double rest_ratio = 0.0;      // median over rounds of (rest / primal)
  double tape_bytes = 0.0;
};

/// Interleaved rounds: each round times `batch` calls of `primal` (mean per
/// call), then one call of every tool (`run(c)`, which also checks the
/// result); the ratio of a round is tool / primal of that round, so slow
/// drifts of the machine cancel, and medians drop the rounds another process
/// disturbed. Entry 0 of the result is the primal (seconds = median,
/// best_ratio = fastest round, in seconds).
inline std::vector<Timing> interleave(const std::vector<std::string>& names,
                                      const std::vector<std::string>& memory, int rounds,
                                      int batch, const std::function<void()>& primal,
                                      const std::function<Call(std::size_t)>& run,
                                      const std::string& primal_name) {
  const std::size_t nc = names.size();
  std::vector<double> primal_t;
  std::vector<std::vector<double>> t(nc), rec(nc), rest(nc), ratio(nc), rec_ratio(nc),
      rest_ratio(nc);
  std::vector<double> bytes(nc, 0.0);
  for (int round = 0; round < rounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batch; ++b) primal();
    const double tp = seconds_since(t0) / batch;
    primal_t.push_back(tp);
    for (std::size_t c = 0; c < nc; ++c) {
      const Call r = run(c);
      t[c].push_back(r.seconds);
      rec[c].push_back(r.record_seconds);
      rest[c].push_back(r.seconds - r.record_seconds);
      ratio[c].push_back(r.seconds / tp);
      rec_ratio[c].push_back(r.record_seconds / tp);
      rest_ratio[c].push_back((r.seconds - r.record_seconds) / tp);
      bytes[c] = r.tape_bytes;
    }
  }
  std::vector<Timing> out;
  Timing p;
  p.name = primal_name;
  p.seconds = median(primal_t);
  p.best_ratio = minimum(primal_t);  // the fastest primal round (seconds)
  out.push_back(p);
  for (std::size_t c = 0; c < nc; ++c) {
    Timing x;
    x.name = names[c];
    x.memory = memory[c];
    x.seconds = median(t[c]);
    x.record_seconds = median(rec[c]);
    x.rest_seconds = median(rest[c]);
    x.ratio = median(ratio[c]);
    x.ratio_min = minimum(ratio[c]);
    x.ratio_max = maximum(ratio[c]);
    x.best_ratio = minimum(t[c]) / minimum(primal_t);
    x.record_ratio = median(rec_ratio[c]);
    x.rest_ratio = median(rest_ratio[c]);
    x.tape_bytes = bytes[c];
    out.push_back(x);
  }
  return out;
}

/// Prints the table: times in `unit` ("ms" or "us"); `rest` names the
/// second phase ("reverse", "Hv sweep"), `rest_short` its ratio column.
inline void print_table(const std::vector<Timing>& timings, const char* unit, const char* rest,
                        const char* rest_short) {
  const double scale = std::string(unit) == "us" ? 1e6 : 1e3;
  const bool micro = scale == 1e6;
  std::printf("  primal: median %.3f %s, fastest round %.3f %s\n", timings[0].seconds * scale, unit,
              timings[0].best_ratio * scale, unit);
  std::printf("%-34s %8s %8s %8s | %8s %15s %6s | %7s %7s | %8s  %s\n", "tool", "total", "record",
              rest, "ratio", "(min..max)", "best", "rec/p", rest_short, "tape MB",
              "memory counted as");
  const std::string u = std::string("(") + unit + ")";
  std::printf("%-34s %8s %8s %8s | %8s %15s %6s | %7s %7s |\n", "", u.c_str(), u.c_str(), u.c_str(),
              "median", "over rounds", "", "median", "median");
  for (std::size_t k = 1; k < timings.size(); ++k) {
    const Timing& t = timings[k];
    char range[64];
    std::snprintf(range, sizeof range, micro ? "(%.0f..%.0f)" : "(%.1f..%.1f)", t.ratio_min,
                  t.ratio_max);
    std::printf(micro ? "%-34s %8.0f %8.0f %8.0f | %8.1f %15s %6.1f | %7.1f %7.1f | %8.2f  %s\n"
                      : "%-34s %8.2f %8.2f %8.2f | %8.1f %15s %6.1f | %7.1f %7.1f | %8.1f  %s\n",
                t.name.c_str(), t.seconds * scale, t.record_seconds * scale, t.rest_seconds * scale,
                t.ratio, range, t.best_ratio, t.record_ratio, t.rest_ratio, t.tape_bytes / 1e6,
                t.memory.c_str());
  }
  std::printf("ratio = (record + %s) / primal of the same round; best = fastest call / "
              "fastest primal round\n(sink %.6g)\n", rest, sink);
}

}  // namespace peers
