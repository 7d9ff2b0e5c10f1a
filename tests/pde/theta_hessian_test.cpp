// pde::ThetaIntegrator::hessian_vector — the second-order adjoint of the θ
// method under MPI. For directions in the scalar parameters, the initial
// state and a parameter field (κ): H·v against central differences of
// adjoint gradients, (g(m + εv) − g(m − εv)) / 2ε; the second-order Taylor
// remainder |J(m + εv) − J − ε gᵀv − ½ε² vᵀHv| = O(ε³); symmetry
// uᵀ(Hv) = vᵀ(Hu); the gradient it returns against ThetaIntegrator::gradient.
// Burgers 1-D (nonlinear in u: the ∂²f/∂u² terms), Heat 2-D with κ (the
// mixed ∂²f/∂u∂κ terms), both θ = ½ and 1. Gauss–Newton: equal to the exact
// product when the residual vanishes, their difference linear in the
// residual, and equal to Sᵀ V S v from the tangent run and a first-order
// adjoint. The same H·v on 1, 2 and 4 ranks as a serial reference on
// MPI_COMM_SELF with another preconditioner (so the 1-rank run is not
// compared with itself); identical bits for every checkpoint schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"
#include "support/pde_fixtures.hpp"
#include "support/pde_hessian_checks.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {
using costate::test::natural;
using costate::test::wave;
using namespace costate::test;

pde::ThetaOptions options(double theta, double dt, std::int64_t steps) {
  return costate::test::theta_options(theta, dt, steps);
}

}  // namespace

TEST(PdeThetaHessian, BurgersScalarAndInitialStateDirections) {
  for (double theta : {0.5, 1.0}) {
    Burgers b(MPI_COMM_WORLD);
    Problem<pde::Burgers1D> P(b.op, b.u0, options(theta, 0.02, 10), b.obj);
    const std::size_t n = P.size(), ny = P.y0.size();
    const auto vq = block(n, 0, 2, 0.3, 0.05);       // δν, δA
    const auto vy = block(n, 2, ny, 4.1, 0.5);       // δu0
    const auto uq = block(n, 0, 2, 1.9, 0.05);
    const auto uy = block(n, 2, ny, 0.6, 0.5);
    const std::string t = theta == 0.5 ? "CN" : "BE";
    if (parts_too()) {
      check_hessian(P, vq, uy, ("burgers " + t + " scalars").c_str());
      check_hessian(P, vy, uq, ("burgers " + t + " initial state").c_str());
    }
    check_hessian(P, plus(vq, vy), plus(uq, uy), ("burgers " + t + " all").c_str());
  }
}

TEST(PdeThetaHessian, HeatFieldScalarAndInitialStateDirections) {
  for (double theta : {0.5, 1.0}) {
    Heat h(MPI_COMM_WORLD);
    Problem<pde::Heat2D> P(h.op, h.u0, options(theta, 2e-3, 12), h.obj);
    const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
    const auto va = block(n, 0, na, 3.3, 0.3);
    const auto vq = block(n, na, 1, 0.2, 1.0);
    const auto vy = block(n, na + 1, ny, 4.1, 0.5);
    const auto ua = block(n, 0, na, 1.7, 0.3);
    const auto uy = block(n, na + 1, ny, 2.9, 0.5);
    const std::string t = theta == 0.5 ? "CN" : "BE";
    if (parts_too()) {
      check_hessian(P, va, uy, ("heat " + t + " kappa").c_str());
      check_hessian(P, vq, ua, ("heat " + t + " q0").c_str());
      check_hessian(P, vy, ua, ("heat " + t + " initial state").c_str());
    }
    check_hessian(P, plus(plus(va, vq), vy), plus(ua, uy), ("heat " + t + " all").c_str());
  }
}

TEST(PdeThetaHessian, GaussNewtonAgainstExactAndAgainstTangentThenAdjoint) {
  Heat h(MPI_COMM_WORLD);
  const pde::Grid& g = h.op.grid();
  const auto o = options(0.5, 2e-3, 12);
  Problem<pde::Heat2D> P(h.op, h.u0, o, h.obj);
  const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
  const auto v = plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5));
  const auto exact = P.hvp(v);
  const auto gn = P.hvp(v, ode::StoreAll{}, pde::HessianProduct::GaussNewton);

  // Sᵀ V S v independently: S v = δy_l from the tangent run; a misfit with
  // data y_l − δy_l has the gradient Sᵀ V δy_l (the first-order adjoint).
  pde::ThetaIntegrator<pde::Heat2D> integ(h.op, o);
  const auto t = integ.tangent(h.u0, h.obj, P.direction(v));
  auto shifted = g.create_global();
  linear_sum(shifted, 1.0, t.final_state, -1.0, t.final_tangent);
  const auto sts = integ.gradient(h.u0, pde::Objective::misfit(shifted), ode::StoreAll{});
  const auto stsv = P.flatten(sts.wrt_fields, sts.wrt_parameters, sts.wrt_initial_state);
  EXPECT_LE(max_rel(gn, stsv), kGaussNewtonTol) << "Gauss-Newton vs tangent then adjoint";

  // The residual term: zero at zero residual (data = y_l), linear in it.
  auto at_data = [&](const pde::GlobalVector& d, pde::HessianProduct p) {
    const auto obj = pde::Objective::misfit(d);
    pde::ThetaIntegrator<pde::Heat2D> in(h.op, o);
    const auto r = in.hessian_vector(h.u0, obj, P.direction(v), ode::StoreAll{}, p);
    return P.flatten(r.wrt_fields, r.wrt_parameters, r.wrt_initial_state);
  };
  const auto exact0 = at_data(t.final_state, pde::HessianProduct::Exact);
  EXPECT_LE(max_rel(exact0, gn), kGaussNewtonTol) << "exact = Gauss-Newton at zero residual";
  auto doubled = g.create_global();  // y_l + 2 (d − y_l)
  linear_sum(doubled, 2.0, h.data, -1.0, t.final_state);
  const auto exact2 = at_data(doubled, pde::HessianProduct::Exact);
  const auto gn2 = at_data(doubled, pde::HessianProduct::GaussNewton);
  EXPECT_EQ(gn2, gn);  // Gauss-Newton does not see the data: the same bits
  std::vector<double> r1(n), r2(n);
  for (std::size_t k = 0; k < n; ++k) {
    r1[k] = 2.0 * (exact[k] - gn[k]);
    r2[k] = exact2[k] - gn2[k];
  }
  // The residual term is a real part of H v here (κ couples to u), and doubles with the residual.
  EXPECT_GT(max_rel(exact, gn), 1e-3);
  EXPECT_LE(max_rel(r2, r1), 1e-9);  // differences of products agreeing to ~1e-14 relative
  if (g.rank() == 0)
    std::printf("[ info ] Gauss-Newton vs S^T V S v %.1e; exact vs GN at zero residual %.1e; residual term %.1e of H.v, "
                "linear to %.1e\n",
                max_rel(gn, stsv), max_rel(exact0, gn), max_rel(exact, gn), max_rel(r2, r1));
}

TEST(PdeThetaHessian, SameOnEveryRankCountAsAnIndependentSerialReference) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // The reference: one process, Jacobi-preconditioned GMRES (the distributed
  // run uses PETSc's default ILU / block-Jacobi ILU), so on one rank too it
  // is another computation of the same numbers.
  auto reference_options = [](pde::ThetaOptions o) {
    o.ksp.pc_type = "jacobi";
    return o;
  };
  for (auto product : {pde::HessianProduct::Exact, pde::HessianProduct::GaussNewton}) {
    {
      Heat dist(MPI_COMM_WORLD), serial(MPI_COMM_SELF);
      const auto o = options(0.5, 2e-3, 12);
      Problem<pde::Heat2D> D(dist.op, dist.u0, o, dist.obj), S(serial.op, serial.u0, reference_options(o), serial.obj);
      const std::size_t n = D.size(), na = D.na(), ny = D.y0.size();
      const auto v =
          plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5));
      const auto hd = D.hvp(v, ode::Binomial{.snapshots = 4}, product);
      const auto hs = S.hvp(v, ode::StoreAll{}, product);
      const double e = max_rel(hd, hs);
      if (dist.op.grid().rank() == 0)
        std::printf("[ info ] heat %s H.v on %d ranks vs serial reference: %.1e (max relative)\n",
                    to_string(product).c_str(), size, e);
      EXPECT_LE(e, kRankAgreement) << size << " ranks, " << to_string(product);
    }
    {
      Burgers dist(MPI_COMM_WORLD), serial(MPI_COMM_SELF);
      const auto o = options(0.5, 0.02, 10);
      Problem<pde::Burgers1D> D(dist.op, dist.u0, o, dist.obj), S(serial.op, serial.u0, reference_options(o), serial.obj);
      const std::size_t n = D.size(), ny = D.y0.size();
      const auto v = plus(block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 4.1, 0.5));
      const auto hd = D.hvp(v, ode::Binomial{.snapshots = 3}, product);
      const auto hs = S.hvp(v, ode::StoreAll{}, product);
      const double e = max_rel(hd, hs);
      if (dist.op.grid().rank() == 0)
        std::printf("[ info ] burgers %s H.v on %d ranks vs serial reference: %.1e (max relative)\n",
                    to_string(product).c_str(), size, e);
      EXPECT_LE(e, kRankAgreement) << size << " ranks, " << to_string(product);
    }
  }
}


TEST(PdeThetaHessian, CheckpointSchedulesGiveIdenticalBits) {
  {
    Heat h(MPI_COMM_WORLD);
    Problem<pde::Heat2D> P(h.op, h.u0, options(0.5, 2e-3, 12), h.obj);
    const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
    check_schedules(P, plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5)),
                    "heat");
  }
  {
    Burgers b(MPI_COMM_WORLD);
    Problem<pde::Burgers1D> P(b.op, b.u0, options(0.5, 0.02, 10), b.obj);
    const std::size_t n = P.size(), ny = P.y0.size();
    check_schedules(P, plus(block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 4.1, 0.5)), "burgers");
  }
}

TEST(PdeThetaHessian, BadDirectionsAndNamesAreClearErrorsOnEveryRank) {
  Heat h(MPI_COMM_WORLD);
  const pde::Grid& g = h.op.grid();
  pde::ThetaIntegrator<pde::Heat2D> integ(h.op, options(0.5, 2e-3, 2));
  pde::ThetaDirection wrong_q;
  wrong_q.parameters = {1.0, 2.0};
  try {
    integ.hessian_vector(h.u0, h.obj, wrong_q, ode::StoreAll{});
    ADD_FAILURE() << "two scalars for a one-scalar model were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hessian_vector: ThetaDirection::parameters has 2 entries"),
              std::string::npos)
        << e.what();
  }
  pde::ThetaDirection wrong_u;  // wrong size on the last rank only
  wrong_u.initial_state = pde::GlobalVector(g.owned_size() + (g.rank() == g.size() - 1 ? 1 : 0), g.comm());
  EXPECT_THROW(integ.hessian_vector(h.u0, h.obj, wrong_u, ode::StoreAll{}), Error);
  EXPECT_EQ(pde::hessian_product_from_string("gauss_newton"), pde::HessianProduct::GaussNewton);
  try {
    (void)pde::hessian_product_from_string("newton");
    ADD_FAILURE() << "an unknown product was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected exact or gauss_newton"), std::string::npos) << e.what();
  }
  // A zero-step run: H v = ∇²J v on the initial state only.
  pde::ThetaIntegrator<pde::Heat2D> none(h.op, options(0.5, 2e-3, 0));
  pde::ThetaDirection d;
  d.initial_state = g.create_global();
  fill(d.initial_state, 1.0);
  const auto r = none.hessian_vector(h.u0, h.obj, d, ode::StoreAll{});
  const double volume = g.spacing(0) * g.spacing(1);
  for (std::size_t e = 0; e < r.wrt_initial_state.size(); ++e) EXPECT_EQ(r.wrt_initial_state[e], volume);
}

TEST(PdeThetaHessian, ProductsAtALinearizedPointMatchTheSweep) {
  // Autonomous linear model: the same operations, the same bits.
  {
    Heat h(MPI_COMM_WORLD);
    Problem<pde::Heat2D> P(h.op, h.u0, options(0.5, 2e-3, 12), h.obj);
    const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
    const auto v = plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5));
    pde::ThetaIntegrator<pde::Heat2D> integ(h.op, P.opt);
    const auto lin = integ.linearize(h.u0, h.obj);
    const auto g = integ.gradient(h.u0, h.obj, ode::StoreAll{});
    EXPECT_EQ(P.flatten(lin.gradient.wrt_fields, lin.gradient.wrt_parameters, lin.gradient.wrt_initial_state),
              P.flatten(g.wrt_fields, g.wrt_parameters, g.wrt_initial_state));
    for (auto product : {pde::HessianProduct::Exact, pde::HessianProduct::GaussNewton}) {
      const auto at = integ.hessian_vector(lin, P.direction(v), product);
      const auto sweep = integ.hessian_vector(h.u0, h.obj, P.direction(v), ode::StoreAll{}, product);
      EXPECT_EQ(P.flatten(at.wrt_fields, at.wrt_parameters, at.wrt_initial_state),
                P.flatten(sweep.wrt_fields, sweep.wrt_parameters, sweep.wrt_initial_state))
          << to_string(product);
      EXPECT_EQ(at.objective, sweep.objective);
      EXPECT_LT(at.krylov_iterations, 1) << "no forward solves at a linearized point";
      if (product == pde::HessianProduct::Exact) {
        EXPECT_LT(at.adjoint_krylov_iterations, sweep.adjoint_krylov_iterations);  // the μ solves are kept
      } else {
        EXPECT_EQ(at.adjoint_krylov_iterations, sweep.adjoint_krylov_iterations);  // Gauss-Newton has none
      }
    }
    // Another integrator length: refused by name.
    pde::ThetaIntegrator<pde::Heat2D> shorter(h.op, options(0.5, 2e-3, 5));
    EXPECT_THROW(shorter.hessian_vector(lin, P.direction(v)), Error);
  }
  // Newton path: λ_n of the sweep comes from the second-order pass, so
  // the stored μ_n differ from the sweep's in the last bits.
  {
    Burgers b(MPI_COMM_WORLD);
    Problem<pde::Burgers1D> P(b.op, b.u0, options(0.5, 0.02, 10), b.obj);
    const std::size_t n = P.size(), ny = P.y0.size();
    const auto v = plus(block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 4.1, 0.5));
    pde::ThetaIntegrator<pde::Burgers1D> integ(b.op, P.opt);
    const auto lin = integ.linearize(b.u0, b.obj);
    const auto at = integ.hessian_vector(lin, P.direction(v));
    const auto sweep = P.hvp(v);
    const double e = max_rel(P.flatten(at.wrt_fields, at.wrt_parameters, at.wrt_initial_state), sweep);
    EXPECT_LE(e, kGradientAgreement) << "linearized point vs sweep, Burgers";
    if (P.op.grid().rank() == 0) std::printf("[ info ] burgers: H.v at a linearized point vs the sweep %.1e\n", e);
  }
}
