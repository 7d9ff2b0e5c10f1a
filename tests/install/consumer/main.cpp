// A user's program built against an installed costate: integrate a model
// defined here (not a built-in) and check it against its exact solution.
#include <costate/costate.hpp>

#include <cmath>
#include <cstdio>

// y' = -k y, y(0) = 1: y(t) = exp(-k t).
struct Decay {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = -p[0] * y[0];
  }
};

int main(int argc, char** argv) {
  try {
    costate::Environment env(argc, argv);
    costate::ode::Problem problem{Decay{}, {1.0}, {0.5}, {0.0, 2.0}};
    const auto sol = costate::ode::integrate(problem, {.rtol = 1e-10, .atol = 1e-12});
    const double exact = std::exp(-1.0);
    // rtol 1e-10 on a smooth decay: the global error stays within ~1e-9.
    constexpr double kTol = 1e-8;
    const double got = sol.state(sol.n_outputs() - 1)[0];
    std::printf("y(2) = %.15g (exact %.15g), %s\n", got, exact, sol.summary.brief_report().c_str());
    if (!sol.summary.success() || std::abs(got - exact) > kTol * exact) return 1;
    std::printf("consumer: ok\n");
    return 0;
  } catch (const costate::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
