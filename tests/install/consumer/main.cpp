// A user's program built against an installed costate: integrate a model
// defined here (not a built-in) and check it against its exact solution,
// then minimise a quadratic with PETSc TAO (costate's PETSc part: loaded on
// demand from a shared install, linked in from a static one).
#include <costate/costate.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

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

    // f(x) = (x0 - 1)^2 + 10 (x1 + 2)^2, minimum at (1, -2) inside the bounds.
    const costate::optimize::Objective quadratic{
        .n = 2, .objective_and_gradient = [](std::span<const double> x, std::span<double> g) {
          g[0] = 2.0 * (x[0] - 1.0);
          g[1] = 20.0 * (x[1] + 2.0);
          return (x[0] - 1.0) * (x[0] - 1.0) + 10.0 * (x[1] + 2.0) * (x[1] + 2.0);
        }};
    const double inf = std::numeric_limits<double>::infinity();
    const std::array<double, 2> x0{0.0, 0.0}, lower{-inf, -inf}, upper{inf, inf};
    const auto fit = costate::optimize::minimize(quadratic, x0, lower, upper, {.gatol = 1e-10});
    // ‖g‖ <= 1e-10 with the Hessian's smallest eigenvalue 2 puts x within 5e-11.
    constexpr double kFitTol = 1e-9;
    std::printf("TAO: x = (%.12g, %.12g), %s\n", fit.x[0], fit.x[1], fit.brief_report().c_str());
    if (!fit.converged || std::abs(fit.x[0] - 1.0) > kFitTol || std::abs(fit.x[1] + 2.0) > kFitTol) return 1;
    std::printf("consumer: ok\n");
    return 0;
  } catch (const costate::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
