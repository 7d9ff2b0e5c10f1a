// pde::ThetaIntegrator: the distributed discrete adjoint of Crank–Nicolson /
// backward Euler on the 2-D heat equation with a conductivity field κ and
// on Gray–Scott. Taylor tests for a field gradient (dJ/dκ), a scalar
// gradient (dJ/dq₀, dJ/dF) and the initial-state gradient; agreement of
// the gradients on 1, 2, 3, 4 ranks with a serial reference computed in the
// same process on MPI_COMM_SELF and, on every rank count (one included),
// with central differences; bitwise-identical repeated runs; identical
// gradients for StoreAll and Binomial checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "costate/ad/verification.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// Rank counts change the block preconditioner, hence the KSP iterates; the
// solves are converged to rtol 1e-14, so gradients agree to ~1e-13
// relative. 1e-12 is the requirement.
constexpr double kRankAgreement = 1e-12;
// The rank-agreement test's own reference on every rank count: central
// differences of the distributed objective along κ, q₀ and u0 (directions of
// size ~1, step kFdStep). Truncation ~h² |J‴|/|J′| ≈ 1e-8, round-off of
// solves converged to 1e-14 ≈ 1e-14 |J| / h ≈ 1e-10 (measured 5e-11 …
// 3e-8 on one rank); 1e-6 relative.
constexpr double kFdRelTol = 1e-6;
constexpr double kFdStep = 1e-4;

double wave(std::int64_t g, double salt) { return std::sin(0.77 * static_cast<double>(g) + salt); }

std::vector<double> natural(std::int64_t n, double salt, double offset, double amplitude) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t g = 0; g < v.size(); ++g) v[g] = offset + amplitude * wave(static_cast<std::int64_t>(g), salt);
  return v;
}

pde::Domain heat_domain() {
  pde::Domain d;
  d.cells = {12, 10, 1};
  d.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
  d.dirichlet_value = 0.1;
  return d;
}

pde::ThetaOptions heat_options(double theta = 0.5) {
  pde::ThetaOptions o;
  o.theta = theta;
  o.dt = 2e-3;
  o.steps = 12;
  o.ksp.rtol = 1e-14;
  o.ksp.use_options_database = false;
  return o;
}

/// Heat problem on `comm`: κ, q₀, u0 and misfit data from natural-order
/// fields (so every decomposition sees the same problem).
struct HeatProblem {
  pde::Operator<pde::Heat2D> op;
  pde::GlobalVector u0, data;
  explicit HeatProblem(MPI_Comm comm) : op(comm, heat_domain(), {}, {1.5}) {
    const pde::Grid& g = op.grid();
    op.field_grid()->scatter(natural(g.global_size(), 0.4, 1.0, 0.5), op.fields());
    u0 = g.create_global();
    data = g.create_global();
    g.scatter(natural(g.global_size(), 1.0, 0.3, 0.2), u0);
    g.scatter(natural(g.global_size(), 2.0, 0.25, 0.1), data);
  }
};

pde::ThetaGradient heat_gradient(HeatProblem& p, const pde::Objective& obj, const ode::Checkpointing& c,
                                 double theta = 0.5) {
  pde::ThetaIntegrator<pde::Heat2D> integ(p.op, heat_options(theta));
  return integ.gradient(p.u0, obj, c);
}

double heat_objective(HeatProblem& p, const pde::Objective& obj, double theta = 0.5) {
  pde::ThetaIntegrator<pde::Heat2D> integ(p.op, heat_options(theta));
  auto u = p.op.grid().create_global();
  deep_copy(u, p.u0);
  integ.integrate(u);
  return obj.evaluate(p.op.grid(), u, nullptr);
}

}  // namespace

TEST(PdeTheta, TaylorTestFieldScalarAndInitialStateGradients) {
  for (double theta : {0.5, 1.0}) {
    HeatProblem p(MPI_COMM_WORLD);
    const pde::Grid& g = p.op.grid();
    const pde::Grid& fg = *p.op.field_grid();
    const auto obj = pde::Objective::misfit(p.data);
    const auto grad = heat_gradient(p, obj, ode::StoreAll{}, theta);
    EXPECT_NEAR(grad.objective, heat_objective(p, obj, theta), 1e-15 * std::abs(grad.objective));

    // dJ/dκ, a field: perturb the whole κ field along a direction.
    const std::vector<double> kappa = fg.gather(p.op.fields());
    const auto dk = natural(fg.global_size(), 3.3, 0.0, 1.0);
    auto jk = [&](const std::vector<double>& k) {
      fg.scatter(k, p.op.fields());
      const double v = heat_objective(p, obj, theta);
      fg.scatter(kappa, p.op.fields());
      return v;
    };
    const auto rk = ad::taylor_test(jk, kappa, dk, fg.gather(grad.wrt_fields));
    EXPECT_TRUE(rk.passed) << rk.report();
    EXPECT_FALSE(rk.orders.empty()) << rk.report();  // orders measured, not a floor pass
    EXPECT_GT(std::abs(rk.directional_derivative), 1e-8);

    // dJ/dq₀, a scalar.
    auto jq = [&](const std::vector<double>& q) {
      p.op.parameters()[0] = q[0];
      const double v = heat_objective(p, obj, theta);
      p.op.parameters()[0] = 1.5;
      return v;
    };
    const auto rq = ad::taylor_test(jq, std::vector<double>{1.5}, std::vector<double>{1.0},
                                    grad.wrt_parameters);
    EXPECT_TRUE(rq.passed) << rq.report();

    // dJ/du0.
    const std::vector<double> u0 = g.gather(p.u0);
    const auto du = natural(g.global_size(), 4.1, 0.0, 1.0);
    auto ju = [&](const std::vector<double>& u) {
      g.scatter(u, p.u0);
      const double v = heat_objective(p, obj, theta);
      g.scatter(u0, p.u0);
      return v;
    };
    const auto ru = ad::taylor_test(ju, u0, du, g.gather(grad.wrt_initial_state));
    EXPECT_TRUE(ru.passed) << ru.report();
    EXPECT_FALSE(ru.orders.empty()) << ru.report();
    if (g.rank() == 0 && theta == 0.5)
      std::printf("[ info ] Taylor min orders: kappa %.3f, q0 %.3f, u0 %.3f\n", rk.min_order, rq.min_order, ru.min_order);
  }
}

TEST(PdeTheta, GrayScottScalarGradientTaylorTest) {
  pde::Domain d;
  d.cells = {10, 9, 1};
  d.boundary = {Boundary::Periodic, Boundary::Periodic, Boundary::Periodic};
  const std::vector<double> q0{2e-3, 1e-3, 0.04, 0.06};
  pde::Operator<pde::GrayScott2D> op(MPI_COMM_WORLD, d, {}, q0);
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  std::vector<double> init(static_cast<std::size_t>(g.global_size()));
  for (std::size_t e = 0; e < init.size(); ++e)
    init[e] = (e % 2 == 0) ? 0.8 + 0.1 * wave(static_cast<std::int64_t>(e), 0.1)
                           : 0.25 + 0.1 * wave(static_cast<std::int64_t>(e), 0.7);
  g.scatter(init, u0);
  pde::ThetaOptions o;
  o.dt = 2.0;
  o.steps = 8;
  o.ksp.rtol = 1e-13;
  o.ksp.use_options_database = false;
  o.newton_rtol = 1e-13;
  const auto obj = pde::Objective::probe({3, 4, 0}, 1);
  pde::ThetaIntegrator<pde::GrayScott2D> integ(op, o);
  const auto grad = integ.gradient(u0, obj, ode::Binomial{.snapshots = 3});
  auto J = [&](const std::vector<double>& q) {
    op.parameters() = q;
    auto u = g.create_global();
    deep_copy(u, u0);
    integ.integrate(u);
    op.parameters() = q0;
    return obj.evaluate(g, u, nullptr);
  };
  EXPECT_NEAR(J(q0), grad.objective, 1e-12);
  const auto r = ad::taylor_test(J, q0, std::vector<double>{1e-3, 1e-3, 0.01, -0.01}, grad.wrt_parameters,
                                  {.initial_step = 1e-4});  // δF = 1e-4: J is strongly nonlinear in F, k
  EXPECT_TRUE(r.passed) << r.report();
  EXPECT_GT(grad.checkpoints.recomputed_steps, 0);
}

TEST(PdeTheta, GradientsAgreeAcrossRankCountsAndRepeatBitwise) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int which = 0; which < 3; ++which) {
    HeatProblem dist(MPI_COMM_WORLD), serial(MPI_COMM_SELF);
    auto objective_on = [&](HeatProblem& p) {
      if (which == 0) return pde::Objective::integral();
      if (which == 1) return pde::Objective::probe({7, 2, 0});
      return pde::Objective::misfit(p.data);
    };
    const auto gd = heat_gradient(dist, objective_on(dist), ode::Binomial{.snapshots = 4});
    const auto gs = heat_gradient(serial, objective_on(serial), ode::Binomial{.snapshots = 4});
    const auto kd = dist.op.field_grid()->gather(gd.wrt_fields);
    const auto ks = serial.op.field_grid()->gather(gs.wrt_fields);
    const auto ud = dist.op.grid().gather(gd.wrt_initial_state);
    const auto us = serial.op.grid().gather(gs.wrt_initial_state);
    auto max_rel = [](const std::vector<double>& a, const std::vector<double>& b) {
      double diff = 0.0, scale = 0.0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(a[i] - b[i]));
        scale = std::max(scale, std::abs(b[i]));
      }
      return diff / scale;
    };
    if (dist.op.grid().rank() == 0)
      std::printf("[ info ] objective %d on %d ranks vs serial: dJ/dkappa %.2e, dJ/du0 %.2e, dJ/dq0 %.2e (max relative)\n",
                  which, size, max_rel(kd, ks), max_rel(ud, us),
                  std::abs(gd.wrt_parameters[0] - gs.wrt_parameters[0]) / std::abs(gs.wrt_parameters[0]));
    EXPECT_LE(max_rel(kd, ks), kRankAgreement) << "dJ/dκ, objective " << which << ", " << size << " ranks";
    EXPECT_LE(max_rel(ud, us), kRankAgreement) << "dJ/du0, objective " << which;
    EXPECT_LE(std::abs(gd.wrt_parameters[0] - gs.wrt_parameters[0]),
              kRankAgreement * std::abs(gs.wrt_parameters[0]));
    EXPECT_LE(std::abs(gd.objective - gs.objective), kRankAgreement * std::abs(gs.objective));

    // On one rank `dist` and `serial` are the same computation, so the
    // comparison above cannot fail there; central differences of the
    // distributed objective are an independent reference on every rank
    // count (the distributed gradient against its own objective).
    {
      const pde::Grid& g = dist.op.grid();
      const pde::Grid& fg = *dist.op.field_grid();
      const auto obj = objective_on(dist);
      const std::vector<double> kappa = fg.gather(dist.op.fields()), u0 = g.gather(dist.u0);
      const double q0 = dist.op.parameters()[0];
      const auto dk = natural(fg.global_size(), 3.3, 0.0, 1.0);
      const auto du = natural(g.global_size(), 4.1, 0.0, 1.0);
      auto objective_at = [&](int direction, double s) {
        std::vector<double> k = kappa, u = u0;
        double q = q0;
        if (direction == 0)
          for (std::size_t i = 0; i < k.size(); ++i) k[i] += s * dk[i];
        if (direction == 1) q += s;
        if (direction == 2)
          for (std::size_t i = 0; i < u.size(); ++i) u[i] += s * du[i];
        fg.scatter(k, dist.op.fields());
        g.scatter(u, dist.u0);
        dist.op.parameters()[0] = q;
        const double v = heat_objective(dist, obj);
        fg.scatter(kappa, dist.op.fields());
        g.scatter(u0, dist.u0);
        dist.op.parameters()[0] = q0;
        return v;
      };
      auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
        double sum = 0.0;
        for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
        return sum;
      };
      const double exact[3] = {dot(kd, dk), gd.wrt_parameters[0], dot(ud, du)};
      const char* names[3] = {"dJ/dkappa.dkappa", "dJ/dq0", "dJ/du0.du0"};
      for (int d = 0; d < 3; ++d) {
        const double fd = (objective_at(d, kFdStep) - objective_at(d, -kFdStep)) / (2.0 * kFdStep);
        if (g.rank() == 0)
          std::printf("[ info ] objective %d on %d ranks, %s vs central differences: %.2e relative\n",
                      which, size, names[d], std::abs(fd - exact[d]) / std::abs(exact[d]));
        EXPECT_NEAR(fd, exact[d], kFdRelTol * std::abs(exact[d]))
            << names[d] << ", objective " << which << ", " << size << " ranks";
      }
    }

    // The same ranks again: the same bits.
    const auto again = heat_gradient(dist, objective_on(dist), ode::Binomial{.snapshots = 4});
    EXPECT_EQ(dist.op.field_grid()->gather(again.wrt_fields), kd);
    EXPECT_EQ(again.wrt_parameters, gd.wrt_parameters);
    EXPECT_EQ(again.objective, gd.objective);
  }
}

TEST(PdeTheta, CheckpointSchedulesGiveIdenticalGradients) {
  HeatProblem p(MPI_COMM_WORLD);
  const auto obj = pde::Objective::misfit(p.data);
  const auto all = heat_gradient(p, obj, ode::StoreAll{});
  const pde::Grid& fg = *p.op.field_grid();
  for (std::int64_t s : {2, 3, 5}) {
    const auto bin = heat_gradient(p, obj, ode::Binomial{.snapshots = s});
    EXPECT_GT(bin.checkpoints.recomputed_steps, 0);
    EXPECT_LE(bin.checkpoints.peak_snapshots, s);
    EXPECT_EQ(fg.gather(bin.wrt_fields), fg.gather(all.wrt_fields)) << s << " snapshots";
    EXPECT_EQ(p.op.grid().gather(bin.wrt_initial_state), p.op.grid().gather(all.wrt_initial_state));
    EXPECT_EQ(bin.wrt_parameters, all.wrt_parameters);
    EXPECT_EQ(bin.objective, all.objective);
  }
}

TEST(PdeTheta, BadSettingsAreClearErrorsOnEveryRank) {
  HeatProblem p(MPI_COMM_WORLD);
  pde::ThetaOptions o = heat_options();
  o.theta = 0.3;  // explicit-leaning θ is not supported
  try {
    pde::ThetaIntegrator<pde::Heat2D> integ(p.op, o);
    ADD_FAILURE() << "theta = 0.3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("theta"), std::string::npos) << e.what();
  }
  const auto probe = pde::Objective::probe({12, 0, 0});  // x has cells 0..11
  try {
    probe.evaluate(p.op.grid(), p.u0, nullptr);
    ADD_FAILURE() << "a probe outside the grid was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside [0, 12)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pde::Objective::integral(1).evaluate(p.op.grid(), p.u0, nullptr), Error);
}
