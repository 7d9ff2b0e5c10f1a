// The native continuous adjoint on a stiff problem (issue 14, item 6):
// Robertson's kinetics to t = 4e7, J = 1e4 y1(t1) + 1e-3 ∫ y3 dt (as
// data/examples/robertson_stiff.yaml), dJ/d(k1, k2, k3, y0) by
//   - continuous_adjoint with bdf (and sdirk3) forward and backward,
//   - discrete_adjoint of the bdf steps (store all),
//   - cvodes_adjoint with cvodes_bdf (Hermite, steps per checkpoint auto: 100 here),
// each against a reference (cvodes_adjoint at rtol 1e-12) and timed against
// ode::integrate of the same method: wall-clock medians of `repeats`
// interleaved rounds (default 11), at rtol 1e-6 and 1e-8.
//
// Usage: bench_continuous_adjoint [repeats]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"

namespace {

using namespace costate::ode;

struct RobertsonObjective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(1e4 * y[0]);
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(1e-3 * y[2]);
  }
};

std::vector<double> all_of(const GradientResult& g) {
  std::vector<double> v = g.wrt_parameters;
  v.insert(v.end(), g.wrt_initial_state.begin(), g.wrt_initial_state.end());
  return v;
}

/// max_i |a_i − b_i| / |b_i| (entry by entry: Robertson's sensitivities span
/// many decades).
double max_entry_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-300));
  return m;
}

double seconds(const std::function<void()>& f) {
  const auto a = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  const Problem<Robertson> pr{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 4e7}};
  const RobertsonObjective obj;
  const IntegratorOptions ref_o{.method = Method::CvodesBdf, .rtol = 1e-12,
                                .atol_per_state = {1e-14, 1e-18, 1e-12}};
  const std::vector<double> ref =
      all_of(gradient(pr, obj, CvodesAdjoint{.rtol = 1e-12, .atol = 1e-16}, ref_o));
  std::printf("reference dJ/d(k1,k2,k3,y0): ");
  for (double g : ref) std::printf("%.6e ", g);
  std::printf("\n\n%-36s %6s %8s %10s %12s %10s\n", "method", "rtol", "steps", "rel. err",
              "wall (s)", "/ forward");
  for (double rtol : {1e-6, 1e-8}) {
    const std::vector<double> atol{1e-2 * rtol, 1e-8 * rtol, 1e-2 * rtol};
    struct Row {
      std::string name;
      IntegratorOptions o;
      SensitivityMethod m;
      bool forward_only = false;
    };
    const IntegratorOptions bdf{.method = Method::Bdf, .rtol = rtol, .atol_per_state = atol};
    const IntegratorOptions sd{.method = Method::Sdirk3, .rtol = rtol, .atol_per_state = atol};
    const IntegratorOptions cv{.method = Method::CvodesBdf, .rtol = rtol, .atol_per_state = atol};
    const std::vector<Row> rows{
        {"integrate (bdf)", bdf, DiscreteAdjoint{}, true},
        {"continuous_adjoint (bdf)", bdf, ContinuousAdjoint{}},
        {"discrete_adjoint (bdf, store all)", bdf, DiscreteAdjoint{}},
        {"integrate (sdirk3)", sd, DiscreteAdjoint{}, true},
        {"continuous_adjoint (sdirk3)", sd, ContinuousAdjoint{}},
        {"discrete_adjoint (sdirk3, store all)", sd, DiscreteAdjoint{}},
        {"integrate (cvodes_bdf)", cv, DiscreteAdjoint{}, true},
        {"cvodes_adjoint (cvodes_bdf)", cv, CvodesAdjoint{}},
    };
    std::vector<std::vector<double>> t(rows.size());
    std::vector<GradientResult> last(rows.size());
    std::vector<std::int64_t> steps(rows.size());
    for (int r = 0; r < repeats; ++r)
      for (std::size_t i = 0; i < rows.size(); ++i)
        t[i].push_back(seconds([&] {
          if (rows[i].forward_only)
            steps[i] = integrate(pr, rows[i].o).summary.steps;
          else
            last[i] = gradient(pr, obj, rows[i].m, rows[i].o);
        }));
    double fwd = 0.0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double w = median(t[i]);
      if (rows[i].forward_only) {
        fwd = w;
        std::printf("%-36s %6.0e %8lld %10s %12.3e %10s\n", rows[i].name.c_str(), rtol,
                    static_cast<long long>(steps[i]), "-", w, "1");
      } else {
        std::printf("%-36s %6.0e %8lld %10.2e %12.3e %10.2f\n", rows[i].name.c_str(), rtol,
                    static_cast<long long>(last[i].summary.steps),
                    max_entry_rel(all_of(last[i]), ref), w, w / fwd);
      }
    }
    std::printf("continuous vs discrete (bdf): %.2e; continuous (bdf) vs cvodes_adjoint: %.2e\n\n",
                max_entry_rel(all_of(last[1]), all_of(last[2])),
                max_entry_rel(all_of(last[1]), all_of(last[7])));
  }
  return 0;
}
