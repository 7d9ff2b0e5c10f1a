// The κ-field inversion through explicit Runge–Kutta (pde::Misfit over
// pde::ExplicitRkIntegrator, rk4): the problem of inversion_problem.hpp
// (Heat2D u_t = ∇·(κ∇u) + q₀ s, Dirichlet, u₀ = sin πx sin πy, κ = exp(m),
// T = 0.2) on a small 8 × 8 grid with dt under the stability limit
// (ρ(J) ≈ 8 κ_max / h² ≈ 95 at the truth, rk4's limit 2.785 / ρ ≈ 0.029).
//   - ∇Φ against central differences of Φ, ∇²Φ v (exact, log form)
//     against differences of gradients, Gauss–Newton positive;
//   - the MAP point by Newton-CG is the θ (Crank–Nicolson) MAP of the same
//     problem up to the time discretization: the difference falls ~4× when
//     dt halves (Crank–Nicolson's O(dt²) dominates rk4's O(dt⁴));
//   - L-BFGS reaches the same rk4 MAP; the Laplace posterior's spectrum
//     is the Crank–Nicolson one up to the discretization;
//   - bad input: a non-positive step, a product before linearize.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "costate/pde/laplace.hpp"
#include "inversion_problem.hpp"

using namespace costate;
using namespace costate::pde_test;

namespace {

constexpr int kSmall = 8;
constexpr double kEnd = kDt * kSteps;  // T = 0.2, as inversion_problem.hpp
// Central differences with step 1e-4 along a direction of size ~1:
// truncation ε²|∂³| ~ 1e-8 relative; no Krylov solves in rk4, so round-off
// is ~1e-16 / ε ~ 1e-12. Same bound as the θ test (inversion_test.cpp).
constexpr double kFdStep = 1e-4;
constexpr double kFdTol = 1e-6;
// MAP(rk4) − MAP(CN) in L²(Ω) is Crank–Nicolson's O(dt²) time error carried
// into m (rk4's O(dt⁴) is ~1e-4 of it): halving dt divides it by ~4.
// Measured: 5.8e-5 at dt = 0.01 and 1.45e-5 at dt = 0.005 (ratio 4.00),
// against a MAP 0.33 from the prior mean; asserted: below 2e-4 at dt = 0.01
// (3.4× the measurement) and a ratio in [3.5, 4.5] (second order).
constexpr double kMapDiscretization = 2e-4;
constexpr double kRatioLow = 3.5, kRatioHigh = 4.5;
// L-BFGS to ‖g‖ ≤ 1e-7 ‖g0‖ vs Newton-CG to 1e-10 (as inversion_test.cpp).
constexpr double kLbfgsAgreement = 1e-4;
// The posterior's 4 dominant eigenvalues (Gauss–Newton) of rk4 and CN at
// dt = 0.01 differ by the time discretization too: measured 1.7e-4
// relative (max norm; λ₁ = 188.57 vs 188.60), asserted 1e-3.
constexpr double kEigenDiscretization = 1e-3;

pde::ExplicitRkOptions rk4(double dt) {
  pde::ExplicitRkOptions o;
  o.method = pde::ExplicitRkMethod::Rk4;
  o.dt = dt;
  o.steps = static_cast<std::int64_t>(std::llround(kEnd / dt));
  return o;
}

pde::ThetaOptions crank_nicolson(double dt) {
  pde::ThetaOptions o = theta_options();
  o.theta = 0.5;
  o.dt = dt;
  o.steps = static_cast<std::int64_t>(std::llround(kEnd / dt));
  return o;
}

/// The inversion of inversion_problem.hpp on kSmall² cells, the data from
/// rk4 at dt = 0.005 (4 × 4 sensors, σ = 1e-2).
struct Small {
  pde::Operator<pde::Heat2D> op;
  pde::GlobalVector u0, truth;
  std::shared_ptr<pde::Observations> obs;
  std::unique_ptr<pde::Prior> prior;

  explicit Small(MPI_Comm comm) : op(comm, Problem::domain(kSmall), {}, {5.0}) {
    const pde::Grid& g = op.grid();
    const pde::Grid& fg = *op.field_grid();
    u0 = g.create_global();
    truth = fg.create_global();
    initial_and_truth(g, u0, truth);
    const double sigma = 1e-2;
    std::vector<pde::Sensor> sensors = sensor_lattice(4, sigma, kEnd);
    pde::Observations clean(g, sensors, 0.0, kEnd);
    pde::Misfit<pde::Heat2D> forward(op, rk4(0.005), u0, pde::Objective::integral(), true);
    forward.misfit(truth);
    const std::vector<double> bu = clean.predictions(forward.final_state());
    for (std::size_t i = 0; i < sensors.size(); ++i) sensors[i].value = bu[i] + sigma * noise(i);
    obs = std::make_shared<pde::Observations>(g, sensors, 0.0, kEnd);
    pde::GlobalVector mean = fg.create_global();
    fill(mean, std::log(0.1));
    pde::PriorOptions po{.kind = pde::PriorKind::BiLaplacian, .gamma = 1.0, .delta = 5.0};
    po.ksp.use_options_database = false;
    prior = std::make_unique<pde::Prior>(fg, po, mean);
  }
  template <class Options>
  pde::Misfit<pde::Heat2D> misfit(const Options& o) {
    return pde::Misfit<pde::Heat2D>(op, o, u0, pde::Objective::sensors(obs), true);
  }
  /// ‖a − b‖ in L²(Ω).
  double distance(const pde::GlobalVector& a, const pde::GlobalVector& b) const {
    auto d = op.field_grid()->create_global();
    linear_sum(d, 1.0, a, -1.0, b);
    return std::sqrt(dot(d, d) / (static_cast<double>(kSmall) * kSmall));
  }
};

TEST(ExplicitRkMisfit, GradientAndHessianMatchDifferences) {
  Small p(MPI_COMM_WORLD);
  pde::Misfit<pde::Heat2D> misfit = p.misfit(rk4(0.01));
  const pde::Grid& fg = *p.op.field_grid();
  std::vector<double> m = fg.gather(p.prior->mean()), dir = smooth(fg, 0.7);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] += 0.2 * smooth(fg, 1.9)[i];
  const auto [dv, hv, gn] = check_misfit_derivatives(misfit, m, dir, kFdStep, kFdTol);
  EXPECT_GT(dot(gn, dv), 0.0);  // Gauss–Newton: positive semidefinite
  // Each rk4 product is a whole second-order sweep from u0: it runs the
  // state again (and, exact, its adjoint). linearize ×3, misfit ×1, 2 products.
  const pde::PdeSolves s = misfit.solves();
  EXPECT_EQ(s.forward, 3 + 1 + 2);
  EXPECT_EQ(s.adjoint, 3 + 1);
  EXPECT_EQ(s.incremental_forward, 2);
  EXPECT_EQ(s.incremental_adjoint, 2);
}

TEST(ExplicitRkMisfit, MapIsTheCrankNicolsonMapUpToTheTimeDiscretization) {
  if (world_size() > 1) GTEST_SKIP() << "serial only (2 shared cores); the gradient test runs on every rank count";
  Small p(MPI_COMM_WORLD);
  const pde::InversionOptions newton{.method = pde::InversionMethod::NewtonCg, .max_iterations = 40,
                                     .gradient_rtol = 1e-10};
  double diff[2] = {0.0, 0.0};
  pde::InversionResult rk_map;
  for (int k = 0; k < 2; ++k) {
    const double dt = k == 0 ? 0.01 : 0.005;
    pde::Misfit<pde::Heat2D> rk = p.misfit(rk4(dt));
    pde::Misfit<pde::Heat2D> cn = p.misfit(crank_nicolson(dt));
    const pde::InversionResult a = pde::find_map(rk, *p.prior, p.prior->mean(), newton);
    const pde::InversionResult b = pde::find_map(cn, *p.prior, p.prior->mean(), newton);
    ASSERT_TRUE(a.converged) << a.brief_report();
    ASSERT_TRUE(b.converged) << b.brief_report();
    diff[k] = p.distance(a.m, b.m);
    std::printf("dt = %g: |m_rk4 - m_cn| = %.3e, |m_rk4 - mean| = %.3e; rk4 %s\n", dt, diff[k],
                p.distance(a.m, p.prior->mean()), a.brief_report().c_str());
    if (k == 0) rk_map = a;
  }
  EXPECT_LT(diff[0], kMapDiscretization);
  EXPECT_GT(diff[0] / diff[1], kRatioLow);
  EXPECT_LT(diff[0] / diff[1], kRatioHigh);

  // L-BFGS through rk4 reaches the Newton-CG MAP point.
  pde::Misfit<pde::Heat2D> rk = p.misfit(rk4(0.01));
  const pde::InversionResult l = pde::find_map(
      rk, *p.prior, p.prior->mean(), {.method = pde::InversionMethod::Lbfgs, .max_iterations = 200, .gradient_rtol = 1e-7});
  ASSERT_TRUE(l.converged) << l.brief_report();
  EXPECT_LT(p.distance(l.m, rk_map.m) / p.distance(rk_map.m, p.prior->mean()), kLbfgsAgreement);

  // The Laplace posterior at the MAP through rk4 and through CN.
  pde::Misfit<pde::Heat2D> cn = p.misfit(crank_nicolson(0.01));
  const pde::InversionResult cn_map = pde::find_map(cn, *p.prior, p.prior->mean(), newton);
  pde::LaplaceOptions lo;
  lo.eigen.rank = 4;
  lo.eigen.oversampling = 4;
  const pde::LaplacePosterior pr = pde::laplace_posterior(rk, *p.prior, rk_map.m, lo);
  const pde::LaplacePosterior pc = pde::laplace_posterior(cn, *p.prior, cn_map.m, lo);
  ASSERT_EQ(pr.eigenvalues.size(), pc.eigenvalues.size());
  std::printf("eigenvalues rk4 %.6g %.6g, cn %.6g %.6g\n", pr.eigenvalues[0], pr.eigenvalues[1], pc.eigenvalues[0],
              pc.eigenvalues[1]);
  EXPECT_GT(pr.eigenvalues[0], 1.0);  // the data inform at least one direction
  EXPECT_LT(max_rel(pr.eigenvalues, pc.eigenvalues), kEigenDiscretization);
}

TEST(ExplicitRkMisfit, BadInputs) {
  Small p(MPI_COMM_WORLD);
  pde::ExplicitRkOptions bad = rk4(0.01);
  bad.dt = 0.0;
  expect_error([&] { (void)p.misfit(bad); }, "pde::ExplicitRkOptions::dt = 0 must be > 0");
  pde::Misfit<pde::Heat2D> fresh = p.misfit(rk4(0.01));
  auto v = p.op.field_grid()->create_global(), out = p.op.field_grid()->create_global();
  expect_error([&] { fresh.hessian_vector(v, out, pde::HessianProduct::Exact); },
               "pde::Misfit::hessian_vector: call linearize first");
}

}  // namespace
