// pde::ThetaIntegrator::tangent — forward sensitivities (tangent-linear
// model) of the θ method under MPI: for a direction δ = (δκ, δq, δu0),
// dJ·δ from the tangent run equals ⟨adjoint gradient, δ⟩ (Heat2D with a κ
// field, linear; Gray–Scott and Burgers, Newton path), for θ = ½ and 1;
// the tangent run's objective is the forward run's, bit for bit; a
// central difference confirms the tangent independently; bad directions
// throw on every rank. Runs on 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"
#include "support/pde_fixtures.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// Tangent and adjoint are both exact derivatives of the same discrete
// solution; they differ by the KSP/Newton residuals (rtol 1e-14 / 1e-13)
// and the summation order of the inner products: ~1e-13 relative seen.
constexpr double kTangentAdjointAgreement = 1e-11;
// Central difference with step 1e-4 on a smooth objective: truncation
// O(h²·J''') ~ 1e-8 relative, round-off 1e-16/1e-4 = 1e-12.
constexpr double kCentralDifferenceTol = 1e-6;

using costate::test::natural;
using costate::test::wave;

pde::ThetaOptions options(double theta, double dt, std::int64_t steps) {
  return costate::test::theta_options(theta, dt, steps);
}

/// ⟨adjoint gradient, δ⟩ with rank-ordered reductions.
template <class Model>
double adjoint_dot(pde::Operator<Model>& op, const pde::ThetaGradient& g, const pde::ThetaDirection& d) {
  double s = 0.0;
  if (d.initial_state.size()) s += dot(g.wrt_initial_state, d.initial_state);
  if (d.fields.size()) s += dot(g.wrt_fields, d.fields);
  for (std::size_t m = 0; m < d.parameters.size(); ++m) s += g.wrt_parameters[m] * d.parameters[m];
  (void)op;
  return s;
}

/// dJ·δ by tangent vs adjoint for each part of δ alone and all together.
template <class Model>
void check_tangent_equals_adjoint(pde::Operator<Model>& op, const pde::GlobalVector& u0,
                                  const pde::ThetaOptions& o, const pde::Objective& obj,
                                  const pde::ThetaDirection& full, const char* label) {
  pde::ThetaIntegrator<Model> integ(op, o);
  const auto grad = integ.gradient(u0, obj, ode::Binomial{.snapshots = 3});
  std::vector<pde::ThetaDirection> parts(3);
  parts[0].initial_state = full.initial_state;
  parts[1].parameters = full.parameters;
  parts[2].fields = full.fields;
  parts.push_back(full);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const auto& d = parts[k];
    if (!d.initial_state.size() && d.parameters.empty() && !d.fields.size()) continue;
    const auto t = integ.tangent(u0, obj, d);
    EXPECT_EQ(t.objective, grad.objective) << label;  // same forward run, same bits
    const double a = adjoint_dot(op, grad, d);
    const double rel = std::abs(t.directional_derivative - a) / std::abs(a);
    if (op.grid().rank() == 0)
      std::printf("[ info ] %s part %zu: tangent %.15e adjoint %.15e relative %.1e\n", label, k,
                  t.directional_derivative, a, rel);
    EXPECT_GT(std::abs(a), 1e-8) << label << " part " << k;  // a real derivative, not 0 = 0
    EXPECT_LE(rel, kTangentAdjointAgreement) << label << " part " << k;
  }
}

pde::Domain heat_domain() {
  pde::Domain d;
  d.cells = {12, 10, 1};
  d.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
  d.dirichlet_value = 0.1;
  return d;
}

}  // namespace

TEST(PdeThetaTangent, HeatFieldScalarAndInitialStateDirectionsMatchAdjoint) {
  for (double theta : {0.5, 1.0}) {
    pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, heat_domain(), {}, {1.5});
    const pde::Grid& g = op.grid();
    const pde::Grid& fg = *op.field_grid();
    fg.scatter(natural(fg.global_size(), 0.4, 1.0, 0.5), op.fields());
    auto u0 = g.create_global(), data = g.create_global();
    g.scatter(natural(g.global_size(), 1.0, 0.3, 0.2), u0);
    g.scatter(natural(g.global_size(), 2.0, 0.25, 0.1), data);
    pde::ThetaDirection d;
    d.initial_state = g.create_global();
    g.scatter(natural(g.global_size(), 4.1, 0.0, 1.0), d.initial_state);
    d.fields = fg.create_global();
    fg.scatter(natural(fg.global_size(), 3.3, 0.0, 1.0), d.fields);
    d.parameters = {0.7};
    check_tangent_equals_adjoint(op, u0, options(theta, 2e-3, 12), pde::Objective::misfit(data), d,
                                 theta == 0.5 ? "heat CN" : "heat BE");
  }
}

TEST(PdeThetaTangent, GrayScottNewtonPathMatchesAdjoint) {
  pde::Domain dom;
  dom.cells = {10, 9, 1};
  const std::vector<double> q0{2e-3, 1e-3, 0.04, 0.06};
  pde::Operator<pde::GrayScott2D> op(MPI_COMM_WORLD, dom, {}, q0);
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  std::vector<double> init(static_cast<std::size_t>(g.global_size()));
  for (std::size_t e = 0; e < init.size(); ++e)
    init[e] = (e % 2 == 0) ? 0.8 + 0.1 * wave(static_cast<std::int64_t>(e), 0.1)
                           : 0.25 + 0.1 * wave(static_cast<std::int64_t>(e), 0.7);
  g.scatter(init, u0);
  pde::ThetaDirection d;
  d.initial_state = g.create_global();
  g.scatter(natural(g.global_size(), 4.1, 0.0, 0.1), d.initial_state);
  d.parameters = {1e-3, -1e-3, 0.01, 0.02};
  for (double theta : {0.5, 1.0})
    check_tangent_equals_adjoint(op, u0, options(theta, 2.0, 8), pde::Objective::probe({3, 4, 0}, 1), d,
                                 theta == 0.5 ? "gray-scott CN" : "gray-scott BE");
}

TEST(PdeThetaTangent, BurgersMatchesAdjointAndCentralDifference) {
  pde::Domain dom;
  dom.cells = {24, 1, 1};
  dom.boundary = {Boundary::Dirichlet, Boundary::Periodic, Boundary::Periodic};
  dom.dirichlet_value = 0.2;
  const std::vector<double> q0{0.05, 0.3};
  pde::Operator<pde::Burgers1D> op(MPI_COMM_WORLD, dom, {}, q0);
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global(), data = g.create_global();
  g.scatter(natural(g.global_size(), 1.0, 0.3, 0.5), u0);
  g.scatter(natural(g.global_size(), 2.0, 0.2, 0.1), data);
  pde::ThetaDirection d;
  d.initial_state = g.create_global();
  g.scatter(natural(g.global_size(), 4.1, 0.0, 1.0), d.initial_state);
  d.parameters = {0.01, 0.2};
  const auto o = options(0.5, 0.02, 10);
  const auto obj = pde::Objective::misfit(data);
  check_tangent_equals_adjoint(op, u0, o, obj, d, "burgers CN");

  // Independent of the adjoint: J(p + εδ) − J(p − εδ) over 2ε.
  pde::ThetaIntegrator<pde::Burgers1D> integ(op, o);
  const auto t = integ.tangent(u0, obj, d);
  constexpr double eps = 1e-4;
  auto J = [&](double s) {
    auto u = g.create_global();
    linear_sum(u, 1.0, u0, s, d.initial_state);
    op.parameters() = {q0[0] + s * d.parameters[0], q0[1] + s * d.parameters[1]};
    integ.integrate(u);
    op.parameters() = q0;
    return obj.evaluate(g, u, nullptr);
  };
  const double cd = (J(eps) - J(-eps)) / (2.0 * eps);
  EXPECT_NEAR(t.directional_derivative, cd, kCentralDifferenceTol * std::abs(cd));
}

TEST(PdeThetaTangent, BadDirectionsThrowOnEveryRank) {
  pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, heat_domain(), {}, {1.5});
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  pde::ThetaIntegrator<pde::Heat2D> integ(op, options(0.5, 2e-3, 2));
  const auto obj = pde::Objective::integral();
  pde::ThetaDirection wrong_q;
  wrong_q.parameters = {1.0, 2.0};
  EXPECT_THROW(integ.tangent(u0, obj, wrong_q), Error);
  // A state direction of the wrong size on the last rank only.
  pde::ThetaDirection wrong_u;
  wrong_u.initial_state = pde::GlobalVector(g.owned_size() + (g.rank() == g.size() - 1 ? 1 : 0), g.comm());
  EXPECT_THROW(integ.tangent(u0, obj, wrong_u), Error);
  // The integrator still works afterwards.
  pde::ThetaDirection ok;
  ok.parameters = {1.0};
  const auto t = integ.tangent(u0, obj, ok);
  EXPECT_GT(std::abs(t.directional_derivative), 0.0);
}
