// Built-in ODE models (ode/models.hpp): each right-hand side against its
// formula evaluated by hand, the registry, dispatch by name, and Robertson's
// stiff kinetics integrated to t = 40 against the published reference.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"

namespace {

namespace ode = costate::ode;

// The hand-computed values below are written out as decimal arithmetic on
// the inputs; the model evaluates the same products in a possibly different
// association, so they agree to a few ulps of the largest term (≤ 1e3 here).
constexpr double kRhsTol = 1e-12;

template <class M, std::size_t N, std::size_t P>
std::array<double, N> eval(const M& model, double t, const std::array<double, N>& y,
                           const std::array<double, P>& p) {
  std::array<double, N> dydt{};
  dydt.fill(std::nan(""));  // the model must write every entry
  model.template rhs<double>(t, std::span<const double>(y), std::span<const double>(p),
                             std::span<double>(dydt));
  return dydt;
}

TEST(ModelRhs, LotkaVolterra) {
  // x' = α x − β x y,  y' = δ x y − γ y  at x = 2, y = 0.5; α, β, γ, δ = 1.5, 1.2, 3, 0.7.
  const auto d = eval(ode::LotkaVolterra{}, 0.0, std::array{2.0, 0.5},
                      std::array{1.5, 1.2, 3.0, 0.7});
  EXPECT_NEAR(d[0], 1.5 * 2.0 - 1.2 * 2.0 * 0.5, kRhsTol);  // 3 − 1.2 = 1.8
  EXPECT_NEAR(d[0], 1.8, kRhsTol);
  EXPECT_NEAR(d[1], 0.7 * 2.0 * 0.5 - 3.0 * 0.5, kRhsTol);  // 0.7 − 1.5 = −0.8
  EXPECT_NEAR(d[1], -0.8, kRhsTol);
}

TEST(ModelRhs, VanDerPol) {
  // x' = v,  v' = μ (1 − x²) v − x  at x = 1.5, v = −2, μ = 3:
  // v' = 3 (1 − 2.25)(−2) − 1.5 = 7.5 − 1.5 = 6.
  const auto d = eval(ode::VanDerPol{}, 0.0, std::array{1.5, -2.0}, std::array{3.0});
  EXPECT_NEAR(d[0], -2.0, kRhsTol);
  EXPECT_NEAR(d[1], 6.0, kRhsTol);
}

TEST(ModelRhs, FitzHughNagumo) {
  // v' = v − v³/3 − w + I,  w' = (v + a − b w)/τ  at v = 1.5, w = −0.4,
  // a = 0.7, b = 0.8, τ = 12.5, I = 0.5:
  // v' = 1.5 − 3.375/3 + 0.4 + 0.5 = 1.275;  w' = (1.5 + 0.7 + 0.32)/12.5 = 0.2016.
  const auto d = eval(ode::FitzHughNagumo{}, 0.0, std::array{1.5, -0.4},
                      std::array{0.7, 0.8, 12.5, 0.5});
  EXPECT_NEAR(d[0], 1.275, kRhsTol);
  EXPECT_NEAR(d[1], 0.2016, kRhsTol);
}

TEST(ModelRhs, Lorenz) {
  // x' = σ (y − x),  y' = x (ρ − z) − y,  z' = x y − β z  at (1, 2, 3),
  // σ = 10, ρ = 28, β = 8/3:  (10, 1·25 − 2 = 23, 2 − 8 = −6).
  const auto d = eval(ode::Lorenz{}, 0.0, std::array{1.0, 2.0, 3.0},
                      std::array{10.0, 28.0, 8.0 / 3.0});
  EXPECT_NEAR(d[0], 10.0, kRhsTol);
  EXPECT_NEAR(d[1], 23.0, kRhsTol);
  EXPECT_NEAR(d[2], -6.0, kRhsTol);
}

TEST(ModelRhs, Robertson) {
  // y1' = −k1 y1 + k2 y2 y3,  y2' = k1 y1 − k2 y2 y3 − k3 y2²,  y3' = k3 y2²
  // at y = (0.9, 2e-5, 0.1), k = (0.04, 1e4, 3e7):
  // k1 y1 = 0.036, k2 y2 y3 = 0.02, k3 y2² = 0.012.
  const auto d = eval(ode::Robertson{}, 0.0, std::array{0.9, 2e-5, 0.1},
                      std::array{0.04, 1e4, 3e7});
  EXPECT_NEAR(d[0], -0.036 + 0.02, kRhsTol);
  EXPECT_NEAR(d[1], 0.036 - 0.02 - 0.012, kRhsTol);
  EXPECT_NEAR(d[2], 0.012, kRhsTol);
  // The rates conserve y1 + y2 + y3.
  EXPECT_NEAR(d[0] + d[1] + d[2], 0.0, kRhsTol);
}

TEST(ModelRhs, AutonomousModelsIgnoreTime) {
  const auto a = eval(ode::Lorenz{}, 0.0, std::array{1.0, 2.0, 3.0}, std::array{10.0, 28.0, 2.5});
  const auto b = eval(ode::Lorenz{}, 17.5, std::array{1.0, 2.0, 3.0}, std::array{10.0, 28.0, 2.5});
  EXPECT_EQ(a, b);
}

// ------------------------------------------------------------ registry

TEST(ModelRegistry, InfoIsConsistent) {
  const auto& models = ode::builtin_models();
  ASSERT_EQ(models.size(), 5u);
  const std::vector<std::string> expected_names{"lotka_volterra", "van_der_pol",
                                                "fitzhugh_nagumo", "lorenz", "robertson"};
  std::set<std::string> seen;
  for (std::size_t k = 0; k < models.size(); ++k) {
    const auto& m = models[k];
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.name, expected_names[k]);
    EXPECT_TRUE(seen.insert(m.name).second) << "duplicate name";
    EXPECT_FALSE(m.description.empty());
    EXPECT_EQ(m.default_parameters.size(), m.parameter_names.size());
    EXPECT_EQ(m.default_initial_state.size(), m.state_names.size());
    EXPECT_FALSE(m.state_names.empty());
    EXPECT_EQ(&ode::builtin_model(m.name), &m);
  }
  // Spot checks against the table in models.hpp.
  EXPECT_EQ(ode::builtin_model("lotka_volterra").default_parameters,
            (std::vector<double>{1.5, 1.0, 3.0, 1.0}));
  EXPECT_EQ(ode::builtin_model("lorenz").default_parameters[2], 8.0 / 3.0);
  EXPECT_EQ(ode::builtin_model("robertson").default_initial_state,
            (std::vector<double>{1.0, 0.0, 0.0}));
  EXPECT_EQ(ode::builtin_model("fitzhugh_nagumo").parameter_names,
            (std::vector<std::string>{"a", "b", "tau", "I"}));
}

TEST(ModelRegistry, UnknownNameListsValidNames) {
  try {
    (void)ode::builtin_model("nope");
    FAIL() << "no error for an unknown model";
  } catch (const costate::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'nope'"), std::string::npos) << what;
    for (const auto& m : ode::builtin_models())
      EXPECT_NE(what.find(m.name), std::string::npos) << what;
  }
  EXPECT_THROW(ode::visit_builtin_model("nope", [](auto) { return 0; }), costate::Error);
}

template <class M>
std::string type_name() {
  if constexpr (std::is_same_v<M, ode::LotkaVolterra>) return "lotka_volterra";
  if constexpr (std::is_same_v<M, ode::VanDerPol>) return "van_der_pol";
  if constexpr (std::is_same_v<M, ode::FitzHughNagumo>) return "fitzhugh_nagumo";
  if constexpr (std::is_same_v<M, ode::Lorenz>) return "lorenz";
  if constexpr (std::is_same_v<M, ode::Robertson>) return "robertson";
  return "?";
}

TEST(ModelRegistry, VisitDispatchesToTheNamedType) {
  for (const auto& info : ode::builtin_models()) {
    const std::string got =
        ode::visit_builtin_model(info.name, [](auto model) { return type_name<decltype(model)>(); });
    EXPECT_EQ(got, info.name);
    // The visited model, run with the registry's defaults, is the model the
    // registry describes: its rhs accepts exactly that many states/parameters.
    ode::visit_builtin_model(info.name, [&](auto model) {
      std::vector<double> dydt(info.default_initial_state.size(), std::nan(""));
      model.template rhs<double>(0.0, std::span<const double>(info.default_initial_state),
                                 std::span<const double>(info.default_parameters),
                                 std::span<double>(dydt));
      for (double v : dydt) EXPECT_TRUE(std::isfinite(v)) << info.name;
      return 0;
    });
  }
}

// ------------------------------------------------------------ Robertson

// Hairer & Wanner, Solving ODEs II, §IV.1 (and the Test Set for IVP
// Solvers): Robertson's problem from y(0) = (1, 0, 0) with k = (0.04, 1e4,
// 3e7) has y1(40) = 0.7158270687 (10 digits).
constexpr double kRobertsonY1At40 = 0.7158270687;
// rtol = 1e-6 asks for ~6 digits locally; global error over the run is a
// modest multiple, so 1e-4 relative leaves two orders of slack while still
// catching a wrong rate constant (which changes y1(40) by percent).
constexpr double kRobertsonRelTol = 1e-4;
// Every Runge–Kutta method conserves linear invariants exactly in exact
// arithmetic: Σ dydt_i = 0 at every stage, so y1 + y2 + y3 changes only by
// round-off: a few ε per step, accumulated over the ~3.5·10^4
// stability-limited steps this stiff problem costs dopri5 (worst case
// ~N · 3ε ≈ 2e-11; observed ~1e-14).
constexpr double kMassConservationTol = 1e-10;

TEST(Robertson, Dopri5ReachesT40WithPublishedValueAndConservesMass) {
  ode::Problem<ode::Robertson> problem{.model = {},
                                       .y0 = {1.0, 0.0, 0.0},
                                       .p = {0.04, 1e4, 3e7},
                                       .tspan = {0.0, 40.0}};
  for (int j = 1; j <= 40; ++j) problem.output_times.push_back(double(j));
  const auto sol = ode::integrate(problem, {.rtol = 1e-6, .atol = 1e-10});
  ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
  ASSERT_EQ(sol.n_outputs(), 40u);
  for (std::size_t j = 0; j < sol.n_outputs(); ++j) {
    const auto y = sol.state(j);
    EXPECT_NEAR(y[0] + y[1] + y[2], 1.0, kMassConservationTol) << "t = " << sol.t[j];
    EXPECT_GE(y[1], 0.0);
  }
  const double y1 = sol.state(39)[0];
  EXPECT_NEAR(y1, kRobertsonY1At40, kRobertsonRelTol * kRobertsonY1At40)
      << sol.summary.brief_report();
  // Stiff: dopri5 is stability-limited, far more steps than accuracy needs.
  EXPECT_GT(sol.summary.steps, 10000);
}

}  // namespace
