#pragma once
// Shared by the plain benchmark drivers: median wall-clock (and CPU) timers.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace costate::bench {

/// Median over `repeats` runs of f(), in seconds (noise on a shared machine
/// is mostly one-sided, so the median beats the mean).
template <class F>
double median_seconds(F&& f, int repeats) {
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(repeats));
  for (int r = 0; r < repeats; ++r) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Process CPU seconds: on a shared, oversubscribed machine the wall clock
/// also counts other jobs' time slices; CPU time counts this process's work
/// (cache contention still shows). Reported beside wall-clock ratios.
inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct WallCpu {
  double wall = 0.0, cpu = 0.0;
};

/// Median wall and CPU seconds of f() over `repeats` runs; `before()` runs
/// before each timed run, outside the timers (e.g. an MPI barrier).
template <class F, class Before>
WallCpu median_wall_cpu(F&& f, int repeats, Before&& before) {
  std::vector<double> wall, cpu;
  for (int r = 0; r < repeats; ++r) {
    before();
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    f();
    cpu.push_back(cpu_seconds() - c0);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}
template <class F>
WallCpu median_wall_cpu(F&& f, int repeats) {
  return median_wall_cpu(f, repeats, [] {});
}

}  // namespace costate::bench
