#pragma once
// Shared by bench_dae and bench_idas_dae: the native bdf and IDAS, each's
// forward run and adjoint gradient on one problem, alternated within every
// round (a shared machine's load hits both alike); CPU-time medians.
#include <algorithm>
#include <vector>

#include "bench_util.hpp"
#include "costate/ode/gradient.hpp"

namespace costate::bench {

struct NativeIdasTimes {
  double native_forward, native_gradient, idas_forward, idas_gradient;  // seconds
};

template <class Problem, class Objective>
NativeIdasTimes time_native_and_idas(const Problem& pr, const Objective& G,
                                     const ode::IntegratorOptions& native,
                                     const ode::IntegratorOptions& idas,
                                     const ode::IdasAdjoint& adj, int repeats) {
  std::vector<double> fn, fi, an, ai;
  for (int r = 0; r < repeats; ++r) {
    fn.push_back(median_wall_cpu([&] { (void)ode::integrate(pr, native); }, 1).cpu);
    fi.push_back(median_wall_cpu([&] { (void)ode::integrate(pr, idas); }, 1).cpu);
    an.push_back(
        median_wall_cpu([&] { (void)ode::gradient(pr, G, ode::DiscreteAdjoint{}, native); }, 1).cpu);
    ai.push_back(median_wall_cpu([&] { (void)ode::gradient(pr, G, adj, idas); }, 1).cpu);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(fn), median(an), median(fi), median(ai)};
}

}  // namespace costate::bench
