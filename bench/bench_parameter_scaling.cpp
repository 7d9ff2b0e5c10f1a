// Cost of an ODE gradient against the number of parameters (issue 5):
// y' = A(p) y with n = 10 states and P parameters, P = 1 … 1000,
//   y_i' = −y_i + (0.5 / P) Σ_{k<P} p_k y_{(i + k + 1) mod n},
// RK4, dt = 0.01, t ∈ [0, 1] (100 steps), J = ½ |y(1)|². Forward
// sensitivities carry P + n directions (cost grows with P); the discrete
// adjoint is one reverse sweep whatever P is (its per-step vector–Jacobian
// products only grow with the size of the right-hand side, which here also
// grows with P). Both are timed in one binary against the forward
// integration alone; the two gradients are checked against each other.
//
// Sample run:  build/bench/bench_parameter_scaling
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"

namespace {

using namespace costate::ode;
using costate::bench::median_seconds;

constexpr std::size_t kN = 10;

struct Coupled {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const double scale = 0.5 / static_cast<double>(p.size());
    for (std::size_t i = 0; i < kN; ++i) {
      T s = -y[i];
      for (std::size_t k = 0; k < p.size(); ++k) s = T(s + scale * p[k] * y[(i + k + 1) % kN]);
      dydt[i] = s;
    }
  }
};
struct HalfNorm {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const IntegratorOptions opt{.method = Method::RK4, .dt = 0.01};
  std::printf("| P | forward integration (ms) | adjoint gradient (ms) | forward-sensitivity gradient (ms) | adjoint / integration | forward / integration | max rel diff |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t P : {1, 10, 100, 1000}) {
    Problem<Coupled> pr{Coupled{}, {}, {}, {0.0, 1.0}};
    for (std::size_t i = 0; i < kN; ++i) pr.y0.push_back(1.0 + 0.1 * double(i));
    for (std::size_t k = 0; k < P; ++k) pr.p.push_back(std::sin(1.0 + double(k)));
    const int reps = P >= 1000 ? 1 : 5;
    GradientResult a, f;
    const double t_int = median_seconds([&] { (void)integrate(pr, opt); }, reps);
    const double t_adj = median_seconds([&] { a = gradient(pr, HalfNorm{}, DiscreteAdjoint{}, opt); }, reps);
    const double t_fwd = median_seconds([&] { f = gradient(pr, HalfNorm{}, Forward{}, opt); }, reps);
    double scale = 0.0, diff = 0.0;
    for (std::size_t k = 0; k < P; ++k) {
      scale = std::max(scale, std::abs(a.wrt_parameters[k]));
      diff = std::max(diff, std::abs(a.wrt_parameters[k] - f.wrt_parameters[k]));
    }
    std::printf("| %zu | %.3f | %.3f | %.3f | %.1f | %.1f | %.1e |\n", P, t_int * 1e3, t_adj * 1e3,
                t_fwd * 1e3, t_adj / t_int, t_fwd / t_int, diff / scale);
  }
  return 0;
}
