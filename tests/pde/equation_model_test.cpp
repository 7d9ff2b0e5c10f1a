// pde::EquationModel: equations typed as text reproduce the built-in Heat2D
// (div_grad with a κ field, a source in x, y) and GrayScott2D (lap, scalar
// parameters) — right-hand sides, coloured Jacobians and discrete-adjoint
// gradients — to round-off; a Taylor test of a nonlinear equation model with
// upwind and central derivatives; linearity detection; and clear errors for
// bad equations and grids, on every rank. Runs on 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "costate/ad/verification.hpp"
#include "costate/pde/equation_model.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// The same arithmetic up to the order of a few operations (pow(d, 2) vs d·d
// in the source term, a + 0 sums): relative round-off of O(1e2) values.
constexpr double kRoundoff = 1e-13;
// Gradients through 12 implicit steps whose KSP solves stop at rtol 1e-14:
// the two models give different (equally converged) Krylov iterates.
constexpr double kGradientRoundoff = 1e-11;

double wave(std::int64_t g, double salt) { return std::sin(0.77 * static_cast<double>(g) + salt); }
std::vector<double> natural(std::int64_t n, double salt, double offset, double amplitude) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t g = 0; g < v.size(); ++g) v[g] = offset + amplitude * wave(static_cast<std::int64_t>(g), salt);
  return v;
}

std::shared_ptr<const pde::EquationSystem> system(pde::EquationSpec s) {
  return std::make_shared<const pde::EquationSystem>(std::move(s));
}

pde::ThetaOptions options() {
  pde::ThetaOptions o;
  o.dt = 2e-3;
  o.steps = 12;
  o.ksp.rtol = 1e-14;
  o.ksp.use_options_database = false;
  return o;
}

double max_rel_diff(const pde::Grid& g, const pde::GlobalVector& a, const pde::GlobalVector& b) {
  const auto x = g.gather(a), y = g.gather(b);
  double scale = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  return worst / scale;
}

/// Compares two operators (same grid) on rhs, J v and the gradient of a
/// misfit after 12 Crank–Nicolson steps.
template <class M1, class M2>
void compare(pde::Operator<M1>& a, pde::Operator<M2>& b, std::size_t scalars) {
  const pde::Grid& g = a.grid();
  auto u = g.create_global(), v = g.create_global(), fa = g.create_global(), fb = g.create_global(),
       data = g.create_global();
  g.scatter(natural(g.global_size(), 1.0, 0.4, 0.2), u);
  g.scatter(natural(g.global_size(), 2.0, 0.0, 1.0), v);
  g.scatter(natural(g.global_size(), 3.0, 0.3, 0.1), data);
  a.rhs(0.1, u, fa);
  b.rhs(0.1, u, fb);
  EXPECT_LT(max_rel_diff(g, fa, fb), kRoundoff) << "rhs";
  pde::Matrix Ja(g), Jb(a.grid());
  a.jacobian(0.1, u, Ja);
  b.jacobian(0.1, u, Jb);
  Ja.mult(v, fa);
  Jb.mult(v, fb);
  EXPECT_LT(max_rel_diff(g, fa, fb), kRoundoff) << "coloured Jacobian";

  pde::ThetaIntegrator<M1> ia(a, options());
  pde::ThetaIntegrator<M2> ib(b, options());
  const auto obj = pde::Objective::misfit(data);
  const auto ga = ia.gradient(u, obj, ode::Binomial{.snapshots = 3});
  const auto gb = ib.gradient(u, obj, ode::StoreAll{});
  EXPECT_NEAR(ga.objective, gb.objective, kGradientRoundoff * std::abs(gb.objective));
  EXPECT_LT(max_rel_diff(g, ga.wrt_initial_state, gb.wrt_initial_state), kGradientRoundoff);
  if constexpr (M1::field_parameters > 0) {
    EXPECT_LT(max_rel_diff(*a.field_grid(), ga.wrt_fields, gb.wrt_fields), kGradientRoundoff);
  }
  for (std::size_t m = 0; m < scalars; ++m)
    EXPECT_NEAR(ga.wrt_parameters[m], gb.wrt_parameters[m], kGradientRoundoff * std::abs(gb.wrt_parameters[m]))
        << "scalar " << m;
  EXPECT_GT(std::abs(gb.objective), 0.0);
}

pde::EquationSpec heat_spec() {
  pde::EquationSpec s;
  s.dim = 2;
  s.fields = {"u"};
  s.parameter_fields = {"kappa"};
  s.parameters = {"q0"};
  s.equations = {"div_grad(kappa, u) + q0*exp(-((x - 0.5)^2 + (y - 0.5)^2)/(2*0.1^2))"};
  return s;
}

std::string error_of(const pde::EquationSpec& s) {
  try {
    pde::EquationSystem sys(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(PdeEquationModel, ReproducesHeat2D) {
  auto sys = system(heat_spec());
  ASSERT_TRUE(sys->linear_in_state());
  ASSERT_TRUE(sys->autonomous());
  pde::Domain d;
  d.cells = {12, 10, 1};
  d.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
  d.dirichlet_value = 0.1;
  using Model = pde::EquationModel<2, 1, 1, true>;
  pde::Operator<pde::Heat2D> heat(MPI_COMM_WORLD, d, {}, {1.5});
  std::vector<double> q(pde::kMaxScalarParameters, 0.0);
  q[0] = 1.5;
  pde::Operator<Model> eq(MPI_COMM_WORLD, d, Model{sys}, q);
  const auto kappa = natural(heat.field_grid()->global_size(), 0.4, 1.0, 0.5);
  heat.field_grid()->scatter(kappa, heat.fields());
  eq.field_grid()->scatter(kappa, eq.fields());
  compare(eq, heat, 1);
}

TEST(PdeEquationModel, ReproducesGrayScott2D) {
  pde::EquationSpec s;
  s.fields = {"u", "v"};
  s.parameters = {"Du", "Dv", "F", "k"};
  s.equations = {"Du*lap(u) - u*v^2 + F*(1 - u)", "Dv*lap(v) + u*v^2 - (F + k)*v"};
  auto sys = system(s);
  EXPECT_FALSE(sys->linear_in_state());
  pde::Domain d;
  d.cells = {10, 15, 1};
  const std::vector<double> q{2e-3, 1e-3, 0.04, 0.06};
  std::vector<double> qe(q);
  qe.resize(pde::kMaxScalarParameters, 0.0);
  using Model = pde::EquationModel<2, 2, 0, false>;
  pde::Operator<pde::GrayScott2D> gs(MPI_COMM_WORLD, d, {}, q);
  pde::Operator<Model> eq(MPI_COMM_WORLD, d, Model{sys}, qe);
  compare(eq, gs, 4);
}

TEST(PdeEquationModel, TaylorTestOfANonlinearModelWithUpwindAndCentralDerivatives) {
  // Viscous Burgers-like transport in 2-D with a non-autonomous forcing:
  // upwind by u along x, central along y, diffusion with a κ field.
  pde::EquationSpec s;
  s.fields = {"u"};
  s.parameter_fields = {"kappa"};
  s.parameters = {"nu", "c"};
  s.equations = {"nu*div_grad(kappa, u) - u*dx_up(u, u) - c*dy(u) + 0.1*sin(2*pi*x)*cos(t)"};
  auto sys = system(s);
  EXPECT_FALSE(sys->linear_in_state());
  EXPECT_FALSE(sys->autonomous());
  pde::Domain d;
  d.cells = {10, 10, 1};
  d.boundary = {Boundary::Periodic, Boundary::Neumann, Boundary::Periodic};
  using Model = pde::EquationModel<2, 1, 1, false>;
  std::vector<double> q(pde::kMaxScalarParameters, 0.0);
  q[0] = 0.02;
  q[1] = 0.3;
  pde::Operator<Model> op(MPI_COMM_WORLD, d, Model{sys}, q);
  const pde::Grid& g = op.grid();
  const pde::Grid& fg = *op.field_grid();
  const auto kappa = natural(fg.global_size(), 0.4, 1.0, 0.5);
  fg.scatter(kappa, op.fields());
  auto u0 = g.create_global();
  // u > 0.2 everywhere: the upwind direction stays fixed under perturbation.
  g.scatter(natural(g.global_size(), 1.0, 0.6, 0.3), u0);
  pde::ThetaIntegrator<Model> integ(op, options());
  const auto obj = pde::Objective::probe({3, 4, 0});
  const auto grad = integ.gradient(u0, obj, ode::Binomial{.snapshots = 4});
  auto J = [&]() {
    auto u = g.create_global();
    deep_copy(u, u0);
    integ.integrate(u);
    return obj.evaluate(g, u, nullptr);
  };
  // κ field.
  const auto dk = natural(fg.global_size(), 3.3, 0.0, 1.0);
  const auto rk = ad::taylor_test(
      [&](const std::vector<double>& k) {
        fg.scatter(k, op.fields());
        const double v = J();
        fg.scatter(kappa, op.fields());
        return v;
      },
      kappa, dk, fg.gather(grad.wrt_fields));
  EXPECT_TRUE(rk.passed) << rk.report();
  EXPECT_FALSE(rk.orders.empty()) << rk.report();
  // Scalars nu, c (the padded ones have zero gradient).
  const std::vector<double> q2{q[0], q[1]};
  const auto rq = ad::taylor_test(
      [&](const std::vector<double>& x) {
        op.parameters()[0] = x[0];
        op.parameters()[1] = x[1];
        const double v = J();
        op.parameters()[0] = q[0];
        op.parameters()[1] = q[1];
        return v;
      },
      q2, std::vector<double>{0.01, -0.2}, std::vector<double>{grad.wrt_parameters[0], grad.wrt_parameters[1]});
  EXPECT_TRUE(rq.passed) << rq.report();
  for (int m = 2; m < pde::kMaxScalarParameters; ++m) EXPECT_EQ(grad.wrt_parameters[static_cast<std::size_t>(m)], 0.0);
}

TEST(PdeEquationModel, LinearityDetection) {
  auto linear = [](std::vector<std::string> eqs, int fields = 1) {
    pde::EquationSpec s;
    s.fields = fields == 1 ? std::vector<std::string>{"u"} : std::vector<std::string>{"u", "v"};
    s.parameter_fields = {"kappa"};
    s.parameters = {"D"};
    s.equations = std::move(eqs);
    return pde::EquationSystem(s).linear_in_state();
  };
  EXPECT_TRUE(linear({"D*lap(u) + sin(t)*exp(x) - 2*u/D"}));
  EXPECT_TRUE(linear({"div_grad(kappa, u) + kappa*dx(u) + dx_up(u, kappa)"}));
  EXPECT_FALSE(linear({"u*u"}));
  EXPECT_FALSE(linear({"sin(t)*u"}));  // J depends on t
  EXPECT_FALSE(linear({"exp(u)"}));
  EXPECT_FALSE(linear({"D/u"}));
  EXPECT_FALSE(linear({"dx_up(u, u)"}));
  EXPECT_FALSE(linear({"lap(u) - u*v", "lap(v)"}, 2));
}

TEST(PdeEquationModel, BadEquationsAreClearErrors) {
  pde::EquationSpec s = heat_spec();
  auto with = [&](const std::string& eq) {
    pde::EquationSpec t = s;
    t.equations = {eq};
    return error_of(t);
  };
  auto expect_has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  };
  expect_has(with("lapl(u)"), {"pde.equations.u", "'lapl(u)'", "column 1", "unknown function 'lapl'",
                               "did you mean 'lap'"});
  expect_has(with("2*lap(u + 1)"), {"pde.equations.u", "column 7", "applies to names"});
  expect_has(with("lap(w)"), {"column 1", "unknown field 'w'"});
  expect_has(with("lap(q0)"), {"'q0' is a scalar parameter"});
  expect_has(with("dz(u)"), {"'dz' differentiates along z", "2-D"});
  expect_has(with("u + foo"), {"column 5", "unknown symbol 'foo'"});
  expect_has(with("lap"), {"'lap' is an operator"});
  expect_has(with("div_grad(u)"), {"'div_grad' takes 2 arguments", "div_grad(k, f)"});
  pde::EquationSpec dup = s;
  dup.parameters = {"x"};
  expect_has(error_of(dup), {"'x' is used twice"});
}

TEST(PdeEquationModel, BadGridsAreClearErrorsOnEveryRank) {
  auto sys = system(heat_spec());
  using Model = pde::EquationModel<2, 1, 1, true>;
  std::vector<double> q(pde::kMaxScalarParameters, 0.0);
  pde::Domain small;
  small.cells = {2, 10, 1};  // periodic x needs 2·1 + 1 = 3 cells
  try {
    pde::Operator<Model> op(MPI_COMM_WORLD, small, Model{sys}, q);
    ADD_FAILURE() << "a grid too small for the stencil was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2"), std::string::npos) << e.what();
  }
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  pde::Domain misfit;
  misfit.cells = {10, 10, 1};
  misfit.processes = {size + 1, 1, 1};  // a layout that does not fit the ranks
  EXPECT_THROW(pde::Operator<Model>(MPI_COMM_WORLD, misfit, Model{sys}, q), Error);
  // The communicator still works: every rank came through.
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, size);
}

TEST(PdeEquationModel, VisitorPicksTheInstantiation) {
  pde::EquationSpec s;
  s.dim = 3;
  s.fields = {"a", "b", "c"};
  s.equations = {"lap(a) + dz(b)", "b*c", "dx_up(c, a)"};
  auto sys = system(s);
  const int got = pde::with_equation_model(sys, [](auto m) {
    using M = decltype(m);
    return M::dim * 100 + M::components * 10 + M::field_parameters + (M::linear_in_state ? 1000 : 0);
  });
  EXPECT_EQ(got, 330);
  const int heat = pde::with_equation_model(system(heat_spec()), [](auto m) {
    using M = decltype(m);
    return M::dim * 100 + M::components * 10 + M::field_parameters + (M::linear_in_state ? 1000 : 0);
  });
  EXPECT_EQ(heat, 1211);
}
