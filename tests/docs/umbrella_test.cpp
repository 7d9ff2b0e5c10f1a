// What a user reaches from <costate/costate.hpp> alone, as the README's C++
// example includes it: ode::hessian (full Hessians, not only H·v), the
// support table and the integral-cost objective (docs/ode_system.md),
// checked against closed forms; and the other modules' entry points
// (PEtab, SBML, PDE inversion, TAO), declared.
#include <gtest/gtest.h>

#include <cmath>

#include <costate/costate.hpp>

namespace {

using namespace costate;

// Integration to rtol 1e-10 with a discrete adjoint of fixed-step RK4 at
// dt = 1e-3 (error O(dt⁴) ≈ 1e-12 on these smooth decays).
constexpr double kClosedForm = 1e-8;

struct Decay {  // y' = -k y
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = -p[0] * y[0];
  }
};
struct Terminal {  // J = y(T)²
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const { return y[0] * y[0]; }
};
struct Running {  // J = ∫ y² dt (the integral cost: `running`)
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const { return y[0] * y[0]; }
};

TEST(Umbrella, HessianOfATerminalCostMatchesItsClosedForm) {
  // J = e^{-2kT}: dJ/dk = -2T e^{-2kT}, d²J/dk² = 4T² e^{-2kT}.
  const double k = 0.5, T = 2.0;
  ode::Problem problem{Decay{}, {1.0}, {k}, {0.0, T}};
  const ode::HessianResult h = ode::hessian(problem, Terminal{}, ode::DiscreteAdjoint{},
                                            {.method = ode::Method::RK4, .dt = 1e-3});
  const double e = std::exp(-2 * k * T);
  EXPECT_NEAR(h.objective, e, kClosedForm);
  EXPECT_NEAR(h.gradient[0], -2 * T * e, kClosedForm);
  EXPECT_NEAR(h.hessian(0, 0), 4 * T * T * e, kClosedForm);
}

TEST(Umbrella, IntegralCostMatchesItsClosedForm) {
  // J = ∫₀ᵀ e^{-2kt} dt = (1 − e^{-2kT}) / (2k); dJ/dk = (2kT e^{-2kT} − 1 + e^{-2kT}) / (2k²).
  const double k = 0.5, T = 2.0, e = std::exp(-2 * k * T);
  ode::Problem problem{Decay{}, {1.0}, {k}, {0.0, T}};
  const auto g = ode::gradient(problem, Running{}, ode::DiscreteAdjoint{},
                               {.method = ode::Method::RK4, .dt = 1e-3});
  EXPECT_NEAR(g.objective, (1 - e) / (2 * k), kClosedForm);
  EXPECT_NEAR(g.wrt_parameters[0], (2 * k * T * e - 1 + e) / (2 * k * k), kClosedForm);
  EXPECT_NEAR(g.wrt_initial_state[0], 2 * (1 - e) / (2 * k), kClosedForm);  // J scales as y0²
}

TEST(Umbrella, TheSupportTableIsReachable) {
  EXPECT_FALSE(ode::supports(ode::SensitivityKind::Forward, {.method = ode::Method::RK4}, 2));
  EXPECT_TRUE(ode::supports(ode::SensitivityKind::DiscreteAdjoint, {.method = ode::Method::RK4}, 2));
}

}  // namespace

namespace {

// The entry points of the other modules, reached through the umbrella alone
// (a declaration missing from it fails to compile here).
TEST(Umbrella, EveryModulesEntryPointIsDeclared) {
  EXPECT_NE(&costate::petab::read, nullptr);
  EXPECT_NE(&costate::petab::evaluate, nullptr);
  EXPECT_NE(&costate::sbml::read_file, nullptr);
  EXPECT_NE(&costate::pde::find_map, nullptr);
  EXPECT_EQ(costate::pde::inversion_method_from_string("lbfgs"), costate::pde::InversionMethod::Lbfgs);
  EXPECT_EQ(costate::optimize::to_string(costate::optimize::TaoOptions{}.method).empty(), false);
}

}  // namespace
