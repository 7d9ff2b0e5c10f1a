// pde::Burgers1D / Burgers2D: the coloured Jacobian equals the dense one;
// Taylor tests of the θ integrator's discrete-adjoint gradient with
// respect to ν, the forcing amplitude A and the initial state (the Newton
// path: the models are nonlinear); gradients on 1, 2, 4 ranks agree with a
// serial reference and, on every rank count (one included), with central
// differences; and the discrete solution converges to the Cole–Hopf
// solution at second order (1-D Dirichlet, 2-D periodic along the diagonal).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>

#include "costate/ad/verification.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// Coloured and dense Jacobian entries come from the same arithmetic on
// different seeds: equal to round-off of the entry size (ν/h² ~ 1e1 here).
constexpr double kJacobianTol = 1e-11;
// Gradients on several ranks vs one: KSP (rtol 1e-14) and Newton (1e-13)
// converged far below it; 1e-12 is the requirement.
constexpr double kRankAgreement = 1e-12;
// The rank-agreement test's own reference on every rank count: central
// differences of the distributed objective in ν and A (relative step
// kFdStep) and along a u0 direction of size ~1 (step kFdStep). Truncation
// ~h² |J‴|/|J′| ≈ 1e-8, round-off of Newton converged to 1e-13 ≈
// 1e-13 |J| / h ≈ 1e-9 (measured 1e-11 … 2.3e-8 on one rank); 1e-6
// relative.
constexpr double kFdRelTol = 1e-6;
constexpr double kFdStep = 1e-4;
// Cole–Hopf convergence: the scheme is second order in space and time
// (dt ∝ h); "order ≥ p − 0.1" as for the ODE steppers.
constexpr double kMinOrder = 1.9;

double wave(std::int64_t g, double salt) { return std::sin(0.77 * static_cast<double>(g) + salt); }

std::vector<double> natural(std::int64_t n, double salt, double offset, double amplitude) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t g = 0; g < v.size(); ++g) v[g] = offset + amplitude * wave(static_cast<std::int64_t>(g), salt);
  return v;
}

template <class Model>
pde::Domain domain(Boundary b) {
  pde::Domain d;
  d.cells = {Model::dim == 1 ? 24 : 10, Model::dim == 2 ? 8 : 1, 1};
  d.boundary = {b, b, Boundary::Periodic};
  d.dirichlet_value = b == Boundary::Dirichlet ? 0.2 : 0.0;
  return d;
}

pde::ThetaOptions options(double theta, std::int64_t steps, double dt) {
  pde::ThetaOptions o;
  o.theta = theta;
  o.dt = dt;
  o.steps = steps;
  o.ksp.rtol = 1e-14;
  o.ksp.use_options_database = false;
  o.newton_rtol = 1e-13;
  return o;
}

template <class Model>
void check_dense_equals_coloured(pde::Operator<Model>& op, const pde::GlobalVector& u) {
  const pde::Grid& grid = op.grid();
  pde::Matrix J(grid);
  op.jacobian(0.0, u, J);
  auto e = grid.create_global(), col = grid.create_global(), dense = grid.create_global();
  std::vector<double> unit(static_cast<std::size_t>(grid.global_size()), 0.0);
  double worst = 0.0, largest = 0.0;
  for (std::size_t j = 0; j < unit.size(); ++j) {
    unit[j] = 1.0;
    grid.scatter(unit, e);
    unit[j] = 0.0;
    J.mult(e, col);
    op.jvp(0.0, u, e, dense);
    for (std::size_t i = 0; i < col.size(); ++i) {
      worst = std::max(worst, std::abs(col[i] - dense[i]));
      largest = std::max(largest, std::abs(dense[i]));
    }
  }
  worst = global_max(grid.comm(), worst);
  largest = global_max(grid.comm(), largest);
  EXPECT_LT(worst, kJacobianTol) << "largest |J_coloured − J_dense| entry";
  EXPECT_GT(largest, 1.0);  // the comparison saw real entries
}

/// A Burgers problem on `comm` (state and data from natural-order fields).
template <class Model>
struct Problem {
  pde::Operator<Model> op;
  pde::GlobalVector u0, data;
  std::vector<double> q0;
  Problem(MPI_Comm comm, Boundary b, std::vector<double> q)
      : op(comm, domain<Model>(b), {}, q), q0(q) {
    const pde::Grid& g = op.grid();
    u0 = g.create_global();
    data = g.create_global();
    g.scatter(natural(g.global_size(), 1.0, 0.3, 0.5), u0);
    g.scatter(natural(g.global_size(), 2.0, 0.2, 0.1), data);
  }
  double objective(const pde::ThetaOptions& o, const pde::Objective& obj) {
    pde::ThetaIntegrator<Model> integ(op, o);
    auto u = op.grid().create_global();
    deep_copy(u, u0);
    integ.integrate(u);
    return obj.evaluate(op.grid(), u, nullptr);
  }
};

template <class Model>
void taylor_tests(Boundary b, double theta) {
  Problem<Model> p(MPI_COMM_WORLD, b, {0.05, 0.3});
  const pde::Grid& g = p.op.grid();
  const auto o = options(theta, 10, 0.02);
  const auto obj = pde::Objective::misfit(p.data);
  pde::ThetaIntegrator<Model> integ(p.op, o);
  const auto grad = integ.gradient(p.u0, obj, ode::Binomial{.snapshots = 3});
  EXPECT_EQ(grad.objective, p.objective(o, obj));  // the sweep's forward pass is the forward run
  EXPECT_GT(grad.checkpoints.recomputed_steps, 0);

  auto jq = [&](const std::vector<double>& q) {
    p.op.parameters() = q;
    const double v = p.objective(o, obj);
    p.op.parameters() = p.q0;
    return v;
  };
  const auto rq = ad::taylor_test(jq, p.q0, std::vector<double>{0.01, 0.2}, grad.wrt_parameters);
  EXPECT_TRUE(rq.passed) << rq.report();
  EXPECT_FALSE(rq.orders.empty()) << rq.report();

  const std::vector<double> u0 = g.gather(p.u0);
  auto ju = [&](const std::vector<double>& u) {
    g.scatter(u, p.u0);
    const double v = p.objective(o, obj);
    g.scatter(u0, p.u0);
    return v;
  };
  const auto ru = ad::taylor_test(ju, u0, natural(g.global_size(), 4.1, 0.0, 1.0),
                                  g.gather(grad.wrt_initial_state));
  EXPECT_TRUE(ru.passed) << ru.report();
  EXPECT_FALSE(ru.orders.empty()) << ru.report();
  if (g.rank() == 0)
    std::printf("[ info ] Burgers %dD %s theta %.1f: Taylor min orders (nu, A) %.3f, u0 %.3f\n", Model::dim,
                pde::to_string(b).c_str(), theta, rq.min_order, ru.min_order);
}

template <class Model>
void rank_agreement(Boundary b) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Problem<Model> dist(MPI_COMM_WORLD, b, {0.05, 0.3}), serial(MPI_COMM_SELF, b, {0.05, 0.3});
  const auto o = options(0.5, 10, 0.02);
  pde::ThetaIntegrator<Model> id(dist.op, o), is(serial.op, o);
  const auto gd = id.gradient(dist.u0, pde::Objective::misfit(dist.data), ode::StoreAll{});
  const auto gs = is.gradient(serial.u0, pde::Objective::misfit(serial.data), ode::StoreAll{});
  const auto ud = dist.op.grid().gather(gd.wrt_initial_state);
  const auto us = serial.op.grid().gather(gs.wrt_initial_state);
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < ud.size(); ++i) {
    diff = std::max(diff, std::abs(ud[i] - us[i]));
    scale = std::max(scale, std::abs(us[i]));
  }
  double qrel = 0.0;
  for (std::size_t m = 0; m < 2; ++m)
    qrel = std::max(qrel, std::abs(gd.wrt_parameters[m] - gs.wrt_parameters[m]) / std::abs(gs.wrt_parameters[m]));
  if (dist.op.grid().rank() == 0)
    std::printf("[ info ] Burgers %dD on %d ranks vs serial: dJ/du0 %.2e, dJ/d(nu, A) %.2e (max relative)\n",
                Model::dim, size, diff / scale, qrel);
  EXPECT_LE(diff, kRankAgreement * scale);
  EXPECT_LE(qrel, kRankAgreement);
  EXPECT_LE(std::abs(gd.objective - gs.objective), kRankAgreement * std::abs(gs.objective));

  // On one rank `dist` and `serial` are the same computation, so the
  // comparisons above cannot fail there; central differences of the
  // distributed objective are an independent reference on every rank count.
  const pde::Grid& g = dist.op.grid();
  const auto obj = pde::Objective::misfit(dist.data);
  const std::vector<double> u0 = g.gather(dist.u0);
  const auto du = natural(g.global_size(), 5.3, 0.0, 1.0);
  auto objective_at = [&](int direction, double s) {
    std::vector<double> u = u0;
    std::vector<double> q = dist.q0;
    if (direction < 2) q[static_cast<std::size_t>(direction)] += s;
    if (direction == 2)
      for (std::size_t i = 0; i < u.size(); ++i) u[i] += s * du[i];
    g.scatter(u, dist.u0);
    dist.op.parameters() = q;
    const double v = dist.objective(o, obj);
    g.scatter(u0, dist.u0);
    dist.op.parameters() = dist.q0;
    return v;
  };
  double along_u = 0.0;
  for (std::size_t i = 0; i < ud.size(); ++i) along_u += ud[i] * du[i];
  const double exact[3] = {gd.wrt_parameters[0], gd.wrt_parameters[1], along_u};
  const double step[3] = {kFdStep * dist.q0[0], kFdStep * dist.q0[1], kFdStep};
  const char* names[3] = {"dJ/dnu", "dJ/dA", "dJ/du0.du0"};
  for (int d = 0; d < 3; ++d) {
    const double fd = (objective_at(d, step[d]) - objective_at(d, -step[d])) / (2.0 * step[d]);
    if (g.rank() == 0)
      std::printf("[ info ] Burgers %dD on %d ranks, %s vs central differences: %.2e relative\n",
                  Model::dim, size, names[d], std::abs(fd - exact[d]) / std::abs(exact[d]));
    EXPECT_NEAR(fd, exact[d], kFdRelTol * std::abs(exact[d])) << names[d] << ", " << size << " ranks";
  }
}

/// Cole–Hopf: φ = a + e^{−μ κ² t} cos(κ s) solves φ_t = μ φ_ss, so
/// w = −2μ φ_s / φ = 2μκ e^{−μκ²t} sin(κ s) / φ solves w_t + w w_s = μ w_ss.
double cole_hopf(double s, double t, double mu, double kappa, double a) {
  const double e = std::exp(-mu * kappa * kappa * t);
  return 2.0 * mu * kappa * e * std::sin(kappa * s) / (a + e * std::cos(kappa * s));
}

/// Max-norm error at T of the θ = ½ solution against Cole–Hopf on n cells
/// per axis (dt = h/4).
template <class Model>
double cole_hopf_error(std::int64_t n) {
  constexpr double nu = 0.05, a = 2.0, T = 0.1;
  constexpr double pi = std::numbers::pi;
  pde::Domain d;
  d.cells = {n, Model::dim == 2 ? n : 1, 1};
  // 1-D: [0, 1] with u = 0 at both ends (κ = π). 2-D: periodic unit
  // square, u(x, y, t) = w(x + y, t)/2 with w Cole–Hopf for μ = 2ν, κ = 2π
  // (u_t + u u_x + u u_y = ν∇²u becomes w_t + w w_s = 2ν w_ss).
  d.boundary = Model::dim == 1 ? std::array<Boundary, 3>{Boundary::Dirichlet, Boundary::Periodic, Boundary::Periodic}
                               : std::array<Boundary, 3>{Boundary::Periodic, Boundary::Periodic, Boundary::Periodic};
  const double mu = Model::dim == 1 ? nu : 2.0 * nu, kappa = Model::dim == 1 ? pi : 2.0 * pi,
               scale = Model::dim == 1 ? 1.0 : 0.5;
  pde::Operator<Model> op(MPI_COMM_WORLD, d, {}, {nu, 0.0});
  const pde::Grid& g = op.grid();
  auto exact = [&](double t) {
    std::vector<double> v(static_cast<std::size_t>(g.global_size()));
    for (std::int64_t j = 0; j < g.cells(1); ++j)
      for (std::int64_t i = 0; i < g.cells(0); ++i) {
        const double s = g.coordinate(0, i) + (Model::dim == 2 ? g.coordinate(1, j) : 0.0);
        v[static_cast<std::size_t>(j * g.cells(0) + i)] = scale * cole_hopf(s, t, mu, kappa, a);
      }
    return v;
  };
  const double h = 1.0 / static_cast<double>(n);
  const auto steps = static_cast<std::int64_t>(std::llround(T / (h / 4.0)));
  pde::ThetaIntegrator<Model> integ(op, options(0.5, steps, T / static_cast<double>(steps)));
  auto u = g.create_global();
  g.scatter(exact(0.0), u);
  integ.integrate(u);
  const auto un = g.gather(u), ue = exact(T);
  double err = 0.0;
  for (std::size_t e = 0; e < un.size(); ++e) err = std::max(err, std::abs(un[e] - ue[e]));
  return err;
}

template <class Model>
void cole_hopf_convergence(std::vector<std::int64_t> ns) {
  std::vector<double> errors;
  for (std::int64_t n : ns) errors.push_back(cole_hopf_error<Model>(n));
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (std::size_t m = 1; m < ns.size(); ++m) {
    const double order = std::log(errors[m - 1] / errors[m]) /
                         std::log(static_cast<double>(ns[m]) / static_cast<double>(ns[m - 1]));
    if (rank == 0)
      std::printf("[ info ] Burgers %dD Cole-Hopf: n %lld error %.3e -> n %lld error %.3e, order %.3f\n",
                  Model::dim, static_cast<long long>(ns[m - 1]), errors[m - 1],
                  static_cast<long long>(ns[m]), errors[m], order);
    EXPECT_GE(order, kMinOrder) << "n = " << ns[m];
  }
}

}  // namespace

TEST(PdeBurgers, ColouredJacobianEqualsDense) {
  for (Boundary b : {Boundary::Periodic, Boundary::Dirichlet}) {
    {
      pde::Operator<pde::Burgers1D> op(MPI_COMM_WORLD, domain<pde::Burgers1D>(b), {}, {0.05, 0.3});
      auto u = op.grid().create_global();
      op.grid().scatter(natural(op.grid().global_size(), 0.3, 0.2, 1.0), u);
      check_dense_equals_coloured(op, u);
    }
    {
      pde::Operator<pde::Burgers2D> op(MPI_COMM_WORLD, domain<pde::Burgers2D>(b), {}, {0.05, 0.3});
      auto u = op.grid().create_global();
      op.grid().scatter(natural(op.grid().global_size(), 0.3, 0.2, 1.0), u);
      check_dense_equals_coloured(op, u);
    }
  }
}

TEST(PdeBurgers, TaylorTests1D) {
  taylor_tests<pde::Burgers1D>(Boundary::Dirichlet, 0.5);
  taylor_tests<pde::Burgers1D>(Boundary::Periodic, 1.0);
}

TEST(PdeBurgers, TaylorTests2D) {
  taylor_tests<pde::Burgers2D>(Boundary::Periodic, 0.5);
  taylor_tests<pde::Burgers2D>(Boundary::Dirichlet, 1.0);
}

TEST(PdeBurgers, GradientsAgreeAcrossRankCounts) {
  rank_agreement<pde::Burgers1D>(Boundary::Dirichlet);
  rank_agreement<pde::Burgers2D>(Boundary::Periodic);
}

TEST(PdeBurgers, ConvergesToColeHopfAtSecondOrder1D) { cole_hopf_convergence<pde::Burgers1D>({16, 32, 64}); }

TEST(PdeBurgers, ConvergesToColeHopfAtSecondOrder2D) { cole_hopf_convergence<pde::Burgers2D>({10, 20, 40}); }
