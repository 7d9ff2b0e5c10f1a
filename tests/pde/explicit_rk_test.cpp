// pde::ExplicitRkIntegrator (rk4, ssp_rk3) under MPI: the tableaux and
// their order conditions; the order of the primal in time (dt halved, a
// smooth problem: 4 and 3); the discrete-adjoint gradient against central
// differences and a Taylor test of order 2, and against the tangent; H·v
// against differences of gradients, Taylor order 3, symmetry (the checks
// of the θ Hessian test, support/pde_hessian_checks.hpp); Gauss–Newton as
// Sᵀ V S v; identical bits for every checkpoint schedule (gradient and
// H·v); the same numbers on 1, 2 and 4 ranks as a serial run; the stability
// estimate against the exact spectral radius and against a blow-up.
// Models: Burgers 1-D (nonlinear in u), Heat 2-D with κ (linear in u, the
// mixed u–κ terms).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "costate/pde/explicit_rk.hpp"
#include "costate/pde/models.hpp"
#include "support/pde_fixtures.hpp"
#include "support/pde_hessian_checks.hpp"

using namespace costate;
using namespace costate::test;

namespace {

constexpr pde::ExplicitRkMethod kMethods[] = {pde::ExplicitRkMethod::Rk4, pde::ExplicitRkMethod::SspRk3};

// Gradient: central differences with step 1e-4 along a direction of size ~1
// (truncation ε² |J'''| / (6 |J'|): 2e-9 measured for Heat, 1.2e-8 for
// Burgers, whose gᵀv is small; no solves, so round-off ~1e-16 |J| / ε ~
// 1e-12); a Taylor remainder of first order must shrink with order >= 1.9
// (2 for a right gradient, 1 for a wrong one).
constexpr double kGradFdStep = 1e-4;
constexpr double kGradFdTol = 1e-7;
constexpr double kGradTaylorOrder = 1.9;
// Tangent vs adjoint: the same derivative along other summation orders.
constexpr double kTangentTol = 1e-12;
// Rank counts change only the order of the ghost sums (no Krylov solves):
// round-off, ~1e-15 seen; 1e-12 is the requirement.
constexpr double kRkRankAgreement = 1e-12;

pde::ExplicitRkOptions rk(pde::ExplicitRkMethod m, double dt, std::int64_t steps) {
  return {.method = m, .t0 = 0.0, .dt = dt, .steps = steps};
}

// The fixtures' explicit steps: below the stability limits (Heat: ρ ≈ 1.5e3,
// dt ρ ≈ 0.7; Burgers: ρ ≈ 1.4e2, dt ρ ≈ 1.4).
constexpr double kHeatDt = 5e-4;
constexpr std::int64_t kHeatSteps = 24;
constexpr double kBurgersDt = 0.01;
constexpr std::int64_t kBurgersSteps = 20;

template <class Model>
using RkProblem = Problem<Model, pde::ExplicitRkIntegrator<Model>>;

std::vector<double> heat_direction(const RkProblem<pde::Heat2D>& P, double salt) {
  const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
  return plus(plus(block(n, 0, na, 3.3 + salt, 0.3), block(n, na, 1, 0.2 + salt, 1.0)),
              block(n, na + 1, ny, 4.1 + salt, 0.5));
}
std::vector<double> burgers_direction(const RkProblem<pde::Burgers1D>& P, double salt) {
  const std::size_t n = P.size(), ny = P.y0.size();
  return plus(block(n, 0, 2, 0.3 + salt, 0.05), block(n, 2, ny, 4.1 + salt, 0.5));
}

/// The gradient along v against central differences and a Taylor test, and
/// against the tangent run.
template <class Model>
void check_gradient(RkProblem<Model>& P, const std::vector<double>& v, const std::string& label) {
  const auto m0 = P.flat0();
  const auto g = P.gradient(m0);
  const double J0 = P.objective(m0), gv = dot(g, v);
  auto shifted = [&](double s) {
    auto m = m0;
    for (std::size_t k = 0; k < m.size(); ++k) m[k] += s * v[k];
    return m;
  };
  const double fd = (P.objective(shifted(kGradFdStep)) - P.objective(shifted(-kGradFdStep))) / (2.0 * kGradFdStep);
  EXPECT_GT(std::abs(gv), 1e-8) << label;  // a real derivative
  EXPECT_LE(std::abs(fd - gv), kGradFdTol * std::abs(gv)) << label << ": gradient vs central differences";
  std::vector<double> orders;
  double eps = 0.05, prev = 0.0;
  for (int k = 0; k < 6; ++k, eps *= 0.5) {
    const double rem = std::abs(P.objective(shifted(eps)) - J0 - eps * gv);
    if (rem <= 1e4 * 2.2e-16 * std::abs(J0)) break;  // at round-off
    if (k > 0) orders.push_back(std::log2(prev / rem));
    prev = rem;
  }
  EXPECT_GE(orders.size(), 2u) << label;
  for (double o : orders) EXPECT_GE(o, kGradTaylorOrder) << label << ": Taylor order";
  pde::ExplicitRkIntegrator<Model> integ(P.op, P.opt);
  const auto t = integ.tangent(P.u0, P.obj, P.direction(v));
  EXPECT_LE(std::abs(t.directional_derivative - gv), kTangentTol * std::abs(gv)) << label << ": tangent";
  EXPECT_EQ(t.objective, J0) << label;  // the same forward steps, the same bits
  if (P.op.grid().rank() == 0) {
    std::printf("[ info ] %s: gradient vs FD %.1e, vs tangent %.1e; Taylor orders", label.c_str(),
                std::abs(fd - gv) / std::abs(gv), std::abs(t.directional_derivative - gv) / std::abs(gv));
    for (double o : orders) std::printf(" %.2f", o);
    std::printf("\n");
  }
}

}  // namespace

TEST(PdeExplicitRk, TableauxOrderConditionsNamesAndStabilityLimits) {
  // The order conditions up to the method's order (rows of a sum to c).
  for (auto m : kMethods) {
    const ode::ButcherTableau t = pde::tableau(m);
    const int s = t.stages, p = pde::order(m);
    double sb = 0, sbc = 0, sbc2 = 0, sbac = 0, sbc3 = 0, sbcac = 0, sbac2 = 0, sbaac = 0;
    for (int i = 0; i < s; ++i) {
      double row = 0.0;
      for (int j = 0; j < s; ++j) row += t.at(i, j);
      EXPECT_NEAR(row, t.c[i], 1e-15) << to_string(m);
      const double bi = t.b[i], ci = t.c[i];
      sb += bi;
      sbc += bi * ci;
      sbc2 += bi * ci * ci;
      sbc3 += bi * ci * ci * ci;
      for (int j = 0; j < s; ++j) {
        sbac += bi * t.at(i, j) * t.c[j];
        sbcac += bi * ci * t.at(i, j) * t.c[j];
        sbac2 += bi * t.at(i, j) * t.c[j] * t.c[j];
        for (int k = 0; k < s; ++k) sbaac += bi * t.at(i, j) * t.at(j, k) * t.c[k];
      }
    }
    EXPECT_NEAR(sb, 1.0, 1e-15);
    EXPECT_NEAR(sbc, 0.5, 1e-15);
    EXPECT_NEAR(sbc2, 1.0 / 3, 1e-15);
    EXPECT_NEAR(sbac, 1.0 / 6, 1e-15);
    if (p == 4) {
      EXPECT_NEAR(sbc3, 0.25, 1e-15);
      EXPECT_NEAR(sbcac, 1.0 / 8, 1e-15);
      EXPECT_NEAR(sbac2, 1.0 / 12, 1e-15);
      EXPECT_NEAR(sbaac, 1.0 / 24, 1e-15);
    } else {  // order 3, not 4
      EXPECT_GT(std::abs(sbaac - 1.0 / 24) + std::abs(sbc3 - 0.25), 1e-3);
    }
    EXPECT_EQ(pde::explicit_rk_method_from_string(to_string(m)), m);
  }
  // The published real stability intervals (4 digits): 2.7853, 2.5127.
  EXPECT_NEAR(pde::real_stability_limit(pde::ExplicitRkMethod::Rk4), 2.7853, 1e-4);
  EXPECT_NEAR(pde::real_stability_limit(pde::ExplicitRkMethod::SspRk3), 2.5127, 1e-4);
  try {
    (void)pde::explicit_rk_method_from_string("rk3");
    ADD_FAILURE() << "an unknown method was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected rk4 or ssp_rk3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pde::ExplicitRkOptions{.dt = -1.0}.validate(), Error);
  EXPECT_THROW(pde::ExplicitRkOptions{.steps = -1}.validate(), Error);
}

TEST(PdeExplicitRk, PrimalConvergesWithTheMethodsOrderInTime) {
  // Smooth problems (the fixtures' rough fields would put stiff modes in
  // the error, outside the asymptotic regime): Heat 2-D periodic 16², κ =
  // 1 + 0.3 sin 2πx, u0 = sin 2πx sin 2πy, a Gaussian source, to t = 0.02;
  // Burgers 1-D, u0 = 0.2 + 0.3 sin πx, to t = 0.2. Steps dt, dt/2, dt/4,
  // dt/8 against rk4 at dt/256 (its error ~1e-10 of the coarsest's). The
  // observed orders log2(e(dt)/e(dt/2)) must lie within kOrderSlack of 4
  // (rk4) and 3 (ssp_rk3): a method of another order is off by >= 1.
  constexpr double kOrderSlack = 0.25;
  const double pi = std::acos(-1.0);
  pde::Domain hd;
  hd.cells = {16, 16, 1};
  pde::Operator<pde::Heat2D> heat(MPI_COMM_WORLD, hd, {}, {1.0});
  auto heat_u0 = heat.grid().create_global();
  {
    const int n = 16;  // natural order: x fastest
    std::vector<double> kappa(n * n), u(n * n);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        const double x = (i + 0.5) / n, y = (j + 0.5) / n;
        kappa[static_cast<std::size_t>(j * n + i)] = 1.0 + 0.3 * std::sin(2 * pi * x);
        u[static_cast<std::size_t>(j * n + i)] = std::sin(2 * pi * x) * std::sin(2 * pi * y);
      }
    heat.field_grid()->scatter(kappa, heat.fields());
    heat.grid().scatter(u, heat_u0);
  }
  Burgers b(MPI_COMM_WORLD);
  {
    const std::int64_t n = b.op.grid().global_size();
    std::vector<double> u(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      u[static_cast<std::size_t>(i)] = 0.2 + 0.3 * std::sin(pi * (static_cast<double>(i) + 0.5) / static_cast<double>(n));
    b.op.grid().scatter(u, b.u0);
  }
  auto errors = [](auto& op, const pde::GlobalVector& u0, double dt0, std::int64_t steps0, pde::ExplicitRkMethod m) {
    using Model = std::decay_t<decltype(op.model())>;
    const pde::Grid& g = op.grid();
    auto final_state = [&](pde::ExplicitRkMethod mm, double dt, std::int64_t steps) {
      pde::ExplicitRkIntegrator<Model> integ(op, rk(mm, dt, steps));
      auto u = g.create_global();
      deep_copy(u, u0);
      integ.integrate(u);
      return g.gather(u);
    };
    const auto ref = final_state(pde::ExplicitRkMethod::Rk4, dt0 / 256, steps0 * 256);
    std::vector<double> e;
    for (int r = 1; r <= 8; r *= 2) {
      const auto u = final_state(m, dt0 / r, steps0 * r);
      double err = 0.0;
      for (std::size_t k = 0; k < u.size(); ++k) err = std::max(err, std::abs(u[k] - ref[k]));
      e.push_back(err);
    }
    return e;
  };
  const int rank = heat.grid().rank();
  for (auto m : kMethods) {
    const int p = pde::order(m);
    const auto eh = errors(heat, heat_u0, 5e-4, 40, m);
    const auto eb = errors(b.op, b.u0, 0.01, 20, m);
    for (const auto* e : {&eh, &eb}) {
      const char* what = e == &eh ? "heat" : "burgers";
      if (rank == 0) std::printf("[ info ] %s %s: errors", to_string(m).c_str(), what);
      for (std::size_t k = 0; k + 1 < e->size(); ++k) {
        const double o = std::log2((*e)[k] / (*e)[k + 1]);
        if (rank == 0) std::printf(" %.2e (order %.2f)", (*e)[k], o);
        EXPECT_NEAR(o, p, kOrderSlack) << to_string(m) << " " << what << " refinement " << k;
      }
      if (rank == 0) std::printf(" %.2e\n", e->back());
    }
  }
}

TEST(PdeExplicitRk, GradientMatchesDifferencesTaylorAndTangent) {
  for (auto m : kMethods) {
    const std::string name = to_string(m);
    {
      Heat h(MPI_COMM_WORLD);
      RkProblem<pde::Heat2D> P(h.op, h.u0, rk(m, kHeatDt, kHeatSteps), h.obj);
      check_gradient(P, heat_direction(P, 0.0), "heat " + name);
    }
    {
      Burgers b(MPI_COMM_WORLD);
      RkProblem<pde::Burgers1D> P(b.op, b.u0, rk(m, kBurgersDt, kBurgersSteps), b.obj);
      check_gradient(P, burgers_direction(P, 0.0), "burgers " + name);
    }
  }
}

TEST(PdeExplicitRk, HessianVectorMatchesDifferencesOfGradientsTaylorAndSymmetry) {
  for (auto m : kMethods) {
    const std::string name = to_string(m);
    {
      Heat h(MPI_COMM_WORLD);
      RkProblem<pde::Heat2D> P(h.op, h.u0, rk(m, kHeatDt, kHeatSteps), h.obj);
      const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
      if (parts_too()) {
        check_hessian(P, block(n, 0, na, 3.3, 0.3), block(n, na + 1, ny, 2.9, 0.5), ("heat " + name + " kappa").c_str());
        check_hessian(P, block(n, na + 1, ny, 4.1, 0.5), block(n, 0, na, 1.7, 0.3),
                      ("heat " + name + " initial state").c_str());
      }
      check_hessian(P, heat_direction(P, 0.0), heat_direction(P, 1.4), ("heat " + name + " all").c_str());
    }
    {
      Burgers b(MPI_COMM_WORLD);
      RkProblem<pde::Burgers1D> P(b.op, b.u0, rk(m, kBurgersDt, kBurgersSteps), b.obj);
      const std::size_t n = P.size(), ny = P.y0.size();
      if (parts_too())
        check_hessian(P, block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 0.6, 0.5), ("burgers " + name + " scalars").c_str());
      check_hessian(P, burgers_direction(P, 0.0), burgers_direction(P, 1.4), ("burgers " + name + " all").c_str());
    }
  }
}

TEST(PdeExplicitRk, GaussNewtonIsTangentThenAdjoint) {
  // Sᵀ V S v independently: S v = δy_l from the tangent run; a misfit with
  // data y_l − δy_l has the gradient Sᵀ V δy_l. The same derivatives along
  // other summation orders: round-off (1e-12).
  constexpr double kGaussNewtonTol = 1e-12;
  for (auto m : kMethods) {
    Heat h(MPI_COMM_WORLD);
    const pde::Grid& g = h.op.grid();
    RkProblem<pde::Heat2D> P(h.op, h.u0, rk(m, kHeatDt, kHeatSteps), h.obj);
    const auto v = heat_direction(P, 0.0);
    const auto gn = P.hvp(v, ode::StoreAll{}, pde::HessianProduct::GaussNewton);
    const auto exact = P.hvp(v);
    pde::ExplicitRkIntegrator<pde::Heat2D> integ(h.op, P.opt);
    const auto t = integ.tangent(h.u0, h.obj, P.direction(v));
    auto shifted = g.create_global();
    linear_sum(shifted, 1.0, t.final_state, -1.0, t.final_tangent);
    const auto sts = integ.gradient(h.u0, pde::Objective::misfit(shifted), ode::StoreAll{});
    const double e = max_rel(gn, P.flatten(sts.wrt_fields, sts.wrt_parameters, sts.wrt_initial_state));
    EXPECT_LE(e, kGaussNewtonTol) << to_string(m);
    EXPECT_GT(max_rel(exact, gn), 1e-3) << to_string(m);  // the residual term is a real part of H v
    if (g.rank() == 0)
      std::printf("[ info ] %s: Gauss-Newton vs S^T V S v %.1e; exact - GN %.1e of H.v\n", to_string(m).c_str(), e,
                  max_rel(exact, gn));
  }
}

TEST(PdeExplicitRk, CheckpointSchedulesGiveIdenticalBits) {
  for (auto m : kMethods) {
    const std::string name = to_string(m);
    Heat h(MPI_COMM_WORLD);
    RkProblem<pde::Heat2D> P(h.op, h.u0, rk(m, kHeatDt, kHeatSteps), h.obj);
    // The gradient for every schedule (and the shared parallel disk file).
    const std::string path = shared_prefix("rk_gradient_" + name);
    const auto ref = P.gradient(P.flat0());
    for (const ode::Checkpointing& c :
         std::vector<ode::Checkpointing>{ode::Uniform{.every = 5}, ode::Binomial{.snapshots = 3}, ode::Online{.snapshots = 4},
                                         ode::Multilevel{.ram = 2, .disk = 2, .path = path}}) {
      for (bool shared_disk : {false, true}) {
        if (shared_disk && !std::holds_alternative<ode::Multilevel>(c)) continue;
        auto o = P.opt;
        o.shared_disk_checkpoints = shared_disk;
        pde::ExplicitRkIntegrator<pde::Heat2D> integ(h.op, o);
        const auto r = integ.gradient(h.u0, h.obj, c);
        EXPECT_EQ(P.flatten(r.wrt_fields, r.wrt_parameters, r.wrt_initial_state), ref) << name << " " << ode::to_string(c);
        EXPECT_GT(r.checkpoints.recomputed_steps, 0) << ode::to_string(c);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::filesystem::remove(path + ".rank" + std::to_string(h.op.grid().rank()), ec);
    // H·v (exact and Gauss–Newton) for every schedule.
    check_schedules(P, heat_direction(P, 0.0), ("rk heat " + name).c_str());
    Burgers b(MPI_COMM_WORLD);
    RkProblem<pde::Burgers1D> B(b.op, b.u0, rk(m, kBurgersDt, kBurgersSteps), b.obj);
    check_schedules(B, burgers_direction(B, 0.0), ("rk burgers " + name).c_str());
  }
}

TEST(PdeExplicitRk, SameGradientAndHessianOnEveryRankCountAsASerialRun) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (auto m : kMethods) {
    const std::string name = to_string(m);
    Heat dist(MPI_COMM_WORLD), serial(MPI_COMM_SELF);
    RkProblem<pde::Heat2D> D(dist.op, dist.u0, rk(m, kHeatDt, kHeatSteps), dist.obj),
        S(serial.op, serial.u0, rk(m, kHeatDt, kHeatSteps), serial.obj);
    const auto v = heat_direction(D, 0.0);
    const double eg = max_rel(D.gradient(D.flat0()), S.gradient(S.flat0()));
    const double eh = max_rel(D.hvp(v, ode::Binomial{.snapshots = 4}), S.hvp(v));
    Burgers bd(MPI_COMM_WORLD), bs(MPI_COMM_SELF);
    RkProblem<pde::Burgers1D> BD(bd.op, bd.u0, rk(m, kBurgersDt, kBurgersSteps), bd.obj),
        BS(bs.op, bs.u0, rk(m, kBurgersDt, kBurgersSteps), bs.obj);
    const auto w = burgers_direction(BD, 0.0);
    const double bg = max_rel(BD.gradient(BD.flat0()), BS.gradient(BS.flat0()));
    const double bh = max_rel(BD.hvp(w, ode::Binomial{.snapshots = 3}), BS.hvp(w));
    if (dist.op.grid().rank() == 0)
      std::printf("[ info ] %s on %d ranks vs serial: heat gradient %.1e, H.v %.1e; burgers gradient %.1e, H.v %.1e\n",
                  name.c_str(), size, eg, eh, bg, bh);
    EXPECT_LE(eg, kRkRankAgreement) << name;
    EXPECT_LE(eh, kRkRankAgreement) << name;
    EXPECT_LE(bg, kRkRankAgreement) << name;
    EXPECT_LE(bh, kRkRankAgreement) << name;
  }
}

TEST(PdeExplicitRk, StabilityEstimateAndWarning) {
  // Heat with κ = 1 on a periodic 16² grid, no source: J = the 5-point
  // Laplacian, ρ(J) = 8/h² exactly. The estimate (a lower bound) within 5%.
  constexpr double kEstimateTol = 0.05;
  pde::Domain d;
  d.cells = {16, 16, 1};
  pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, d, {}, {0.0});
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  g.scatter(natural(g.global_size(), 0.7, 0.0, 1.0), u0);
  const double h = 1.0 / 16, rho = 8.0 / (h * h);
  for (auto m : kMethods) {
    pde::ExplicitRkIntegrator<pde::Heat2D> probe(op, rk(m, 1e-4, 1));
    const auto s = probe.stability(u0);
    EXPECT_LE(s.spectral_radius, rho * (1 + 1e-12)) << to_string(m);
    EXPECT_GE(s.spectral_radius, rho * (1 - kEstimateTol)) << to_string(m);
    EXPECT_NEAR(s.max_stable_dt, s.limit / s.spectral_radius, 1e-15);
    if (g.rank() == 0)
      std::printf("[ info ] %s: rho(J) estimate %.6g of the exact %.6g after %d products\n", to_string(m).c_str(),
                  s.spectral_radius, rho, s.iterations);
    // The exact limit: 0.95 of it stays bounded, 1.05 of it blows up
    // (the checkerboard mode, present in u0, grows by |R(−1.05 β)|^steps).
    // J is symmetric, so |R(dt λ)| <= 1 for every λ keeps the 2-norm from growing.
    auto norm = [](const pde::GlobalVector& x) { return std::sqrt(dot(x, x)); };
    auto run = [&](double factor) {
      pde::ExplicitRkIntegrator<pde::Heat2D> integ(op, rk(m, factor * s.limit / rho, 400));
      auto u = g.create_global();
      deep_copy(u, u0);
      integ.integrate(u);
      return norm(u);
    };
    EXPECT_LE(run(0.95), norm(u0)) << to_string(m);
    EXPECT_GT(run(1.05), 1e3 * norm(u0)) << to_string(m);
    // The warning names the key, the estimate and the largest stable step.
    EXPECT_TRUE(pde::stability_warning(rk(m, 0.9 * s.max_stable_dt, 10), s, "integrator.dt").empty());
    const std::string w = pde::stability_warning(rk(m, 2.0 * s.max_stable_dt, 10), s, "integrator.dt");
    EXPECT_NE(w.find("integrator.dt = "), std::string::npos) << w;
    EXPECT_NE(w.find("rho(J) ~ "), std::string::npos) << w;
    EXPECT_NE(w.find("steps >= 20"), std::string::npos) << w;
    EXPECT_NE(w.find(to_string(m)), std::string::npos) << w;
  }
}

TEST(PdeExplicitRk, BadDirectionsAreClearErrorsOnEveryRank) {
  Heat h(MPI_COMM_WORLD);
  pde::ExplicitRkIntegrator<pde::Heat2D> integ(h.op, rk(pde::ExplicitRkMethod::Rk4, kHeatDt, 2));
  pde::ThetaDirection wrong_q;
  wrong_q.parameters = {1.0, 2.0};
  try {
    integ.hessian_vector(h.u0, h.obj, wrong_q, ode::StoreAll{});
    ADD_FAILURE() << "two scalars for a one-scalar model were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ExplicitRkIntegrator::hessian_vector: ThetaDirection::parameters has 2"),
              std::string::npos)
        << e.what();
  }
  const pde::Grid& g = h.op.grid();
  pde::ThetaDirection wrong_u;  // wrong size on the last rank only
  wrong_u.initial_state = pde::GlobalVector(g.owned_size() + (g.rank() == g.size() - 1 ? 1 : 0), g.comm());
  EXPECT_THROW(integ.tangent(h.u0, h.obj, wrong_u), Error);
  // Zero steps: the gradient is ∇J(y_0), H v = ∇²J v.
  pde::ExplicitRkIntegrator<pde::Heat2D> none(h.op, rk(pde::ExplicitRkMethod::Rk4, kHeatDt, 0));
  pde::ThetaDirection d;
  d.initial_state = g.create_global();
  fill(d.initial_state, 1.0);
  const auto r = none.hessian_vector(h.u0, h.obj, d, ode::StoreAll{});
  const double volume = g.spacing(0) * g.spacing(1);
  for (std::size_t e = 0; e < r.wrt_initial_state.size(); ++e) EXPECT_EQ(r.wrt_initial_state[e], volume);
}

TEST(PdeExplicitRk, OneIntegratorFollowsTheOperatorsFieldsBetweenCalls) {
  // A model linear in u assembles J once per gradient call, at the fields
  // of that call: after κ changes, the same integrator gives a fresh
  // integrator's bits (and not its earlier gradient).
  Heat h(MPI_COMM_WORLD);
  const auto o = rk(pde::ExplicitRkMethod::Rk4, kHeatDt, kHeatSteps);
  pde::ExplicitRkIntegrator<pde::Heat2D> integ(h.op, o);
  const pde::Grid& g = h.op.grid();
  auto flat = [&](const pde::ThetaGradient& r) {
    auto v = h.op.field_grid()->gather(r.wrt_fields);
    const auto y = g.gather(r.wrt_initial_state);
    v.insert(v.end(), y.begin(), y.end());
    v.insert(v.end(), r.wrt_parameters.begin(), r.wrt_parameters.end());
    return v;
  };
  const auto before = flat(integ.gradient(h.u0, h.obj, ode::StoreAll{}));
  scale(h.op.fields(), 1.1, h.op.fields());
  const auto after = flat(integ.gradient(h.u0, h.obj, ode::StoreAll{}));
  pde::ExplicitRkIntegrator<pde::Heat2D> fresh(h.op, o);
  EXPECT_EQ(after, flat(fresh.gradient(h.u0, h.obj, ode::StoreAll{})));
  EXPECT_GT(max_rel(after, before), 1e-3);
}
