#pragma once
// Shared by the plain benchmark drivers: a median wall-clock timer.
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

}  // namespace costate::bench
