// ode::EquationModel on ode::System: its compiled Jacobian rows (n + n_p ≤
// 8) give the numbers of the System's Dual Jacobian, its own reverse
// derivatives (the expression kernel interpreted backward,
// SystemModel::own_vjp) the same products to round-off, and the discrete-adjoint
// gradient of an equation model equals the one of the same model in C++;
// a C++ model with its own reverse rule (ode::Burgers1D) likewise.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/ode/burgers.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/system.hpp"
#include "support/relative_error.hpp"

namespace {

using costate::test::max_rel_err;

using namespace costate::ode;
using costate::expr::Node;
using costate::expr::Op;
using costate::expr::Program;

// Reverse and forward mode sum the same chain-rule products in different
// orders: a few ulps of the largest term.
constexpr double kSameProduct = 1e-13;
// Gradients over 10⁴ rk4 steps: the per-step round-off differences above,
// accumulated.
constexpr double kSameGradient = 1e-10;

struct HalfNorm {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};
struct Running {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(y[0] * y[1]);
  }
};

/// A reaction network written the SBML importer's way: rates as
/// intermediates (w0 = k1·A·B, w1 = k2·C/(K + C), w2 = exp(−t)·k3),
/// equations as their stoichiometric sums. Variables: t, A, B, C, k1, k2,
/// K, k3, w0, w1, w2.
EquationModel network() {
  auto v = [](std::uint32_t i) { return Node::var(i); };
  auto ap = [](Op op, std::vector<Node> a) { return Node::apply(op, std::move(a)); };
  std::vector<Program> w{
      Program::build(ap(Op::Mul, {ap(Op::Mul, {v(4), v(1)}), v(2)}), 8, "w0"),
      Program::build(ap(Op::Div, {ap(Op::Mul, {v(5), v(3)}), ap(Op::Add, {v(6), v(3)})}), 9, "w1"),
      Program::build(ap(Op::Mul, {ap(Op::Exp, {ap(Op::Neg, {v(0)})}), v(7)}), 10, "w2")};
  std::vector<Program> eq{
      Program::build(ap(Op::Add, {ap(Op::Neg, {v(8)}), v(9)}), 11, "A"),
      Program::build(ap(Op::Sub, {ap(Op::Add, {ap(Op::Neg, {v(8)}), v(9)}), v(10)}), 11, "B"),
      Program::build(ap(Op::Sub, {v(8), v(9)}), 11, "C")};
  return EquationModel({"A", "B", "C"}, {"k1", "k2", "K", "k3"}, {"w0", "w1", "w2"}, std::move(w),
                       std::move(eq));
}

/// Two linearizations of the network at their last point: f, f_xᵀ w (twice:
/// the record is reused), f_x v + f_p q and the Jacobian agree to `tol`
/// relative (0: equal).
void expect_same_products(Linearization& a, Linearization& b, double tol) {
  const std::vector<double> w{0.9, -1.1, 0.4}, v{0.3, -0.2, 0.5}, q{0.1, 0.2, -0.4, 0.7};
  EXPECT_LE(max_rel_err({a.value().begin(), a.value().end()}, {b.value().begin(), b.value().end()}),
            tol);
  std::vector<double> xa(3), xb(3), pa(4, 0.5), pb(4, 0.5);
  a.vjp(w, xa, pa);
  b.vjp(w, xb, pb);
  EXPECT_LE(max_rel_err(xa, xb), tol);
  EXPECT_LE(max_rel_err(pa, pb), tol);
  std::vector<double> xa2(3), pa2(4, 0.5);
  a.vjp(w, xa2, pa2);
  EXPECT_EQ(xa2, xa);
  EXPECT_EQ(pa2, pa);
  std::vector<double> ja(3), jb(3), Ja(3 * 7), Jb(3 * 7);
  a.jvp(v, q, ja);
  b.jvp(v, q, jb);
  EXPECT_LE(max_rel_err(ja, jb), tol);
  a.jacobian(Ja);
  b.jacobian(Jb);
  EXPECT_LE(max_rel_err(Ja, Jb), tol);
}

// n + n_p ≤ 8: the System's default linearization evaluates the model's
// compiled Jacobian rows (EquationModel::jacobian_rows), the same formulas
// as the Dual pass of JacobianStrategy::Dense in the same order: every
// value, product and Jacobian entry equal.
TEST(EquationModelSystem, JacobianRowsGiveTheDualPassNumbers) {
  const EquationModel model = network();
  ASSERT_NE(model.jacobian_rows(), nullptr);
  const HalfNorm obj;
  const System rows = make_system(model, obj, 3, 4);
  const System dense = make_system(model, obj, 3, 4, {.jacobian = JacobianStrategy::Dense});
  const std::vector<double> x{1.2, 0.7, 0.4}, p{1.5, 0.8, 0.3, 0.6};
  Linearization a(rows), b(dense);
  for (const double t : {0.25, 1.5}) {  // twice: the prepared registers are reused
    a.at(t, x, p);
    b.at(t, x, p);
    ASSERT_NE(a.dense_row(0), nullptr);  // the explicit RK adjoint's fused rows
    expect_same_products(a, b, 0.0);
  }
  // More than 8 inputs: no rows kernel (the model's own reverse below).
  const EquationModel wide({"x", "y"}, {"a", "b", "c", "d", "e", "f", "g"},
                           {"a*x + b*y + c + d", "e*x*y - f + g"});
  EXPECT_EQ(wide.jacobian_rows(), nullptr);
}

// The model's own reverse derivatives (the kernel interpreted backward):
// what the System uses when the rows are not (here: dense_max = 0 asks for
// the coloured strategy, under which the model's own vjp serves).
TEST(EquationModelSystem, OwnReverseProductsMatchTheDualJacobian) {
  const EquationModel model = network();
  const HalfNorm obj;
  const System own = make_system(model, obj, 3, 4, {.dense_max = 0});
  const System dense = make_system(model, obj, 3, 4, {.jacobian = JacobianStrategy::Dense});
  ASSERT_GT(own.model().own_vjp_workspace(), 0u);
  const std::vector<double> x{1.2, 0.7, 0.4}, p{1.5, 0.8, 0.3, 0.6};
  Linearization a(own), b(dense);
  a.at(0.25, x, p);
  b.at(0.25, x, p);
  EXPECT_EQ(a.dense_row(0), nullptr);  // the model's own record, not rows
  expect_same_products(a, b, kSameProduct);
  // With a running cost the System's own strategies handle f and q together.
  const Running run;
  EXPECT_EQ(make_system(model, run, 3, 4).model().own_vjp_workspace(), 0u);
}

TEST(EquationModelSystem, AdjointGradientEqualsTheCxxModel) {
  const EquationModel lv({"x", "y"}, {"a", "b", "c", "d"}, {"a*x - b*x*y", "d*x*y - c*y"});
  const Problem<EquationModel> eq{lv, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  const Problem<LotkaVolterra> cxx{LotkaVolterra{}, eq.y0, eq.p, eq.tspan};
  const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-3};
  const GradientResult ge = gradient(eq, HalfNorm{}, DiscreteAdjoint{}, opt);
  const GradientResult gc = gradient(cxx, HalfNorm{}, DiscreteAdjoint{}, opt);
  EXPECT_LE(std::abs(ge.objective - gc.objective), kSameGradient * std::abs(gc.objective));
  EXPECT_LE(max_rel_err(ge.wrt_parameters, gc.wrt_parameters), kSameGradient);
  EXPECT_LE(max_rel_err(ge.wrt_initial_state, gc.wrt_initial_state), kSameGradient);
  // And against forward sensitivities of the equation model (Dual passes).
  const GradientResult gf = gradient(eq, HalfNorm{}, Forward{}, opt);
  EXPECT_LE(max_rel_err(ge.wrt_parameters, gf.wrt_parameters), kSameGradient);
  EXPECT_LE(max_rel_err(ge.wrt_initial_state, gf.wrt_initial_state), kSameGradient);
}

}  // namespace

// A C++ model's own reverse rule (ode::Burgers1D: f_yᵀ w, f_pᵀ w written by
// hand) against the Dual Jacobian of its templated right-hand side, and the
// gradients it gives against forward sensitivities and differences.
namespace burgers {

using costate::ode::Burgers1D;

// A state with both signs and no ties |u_i| = |u_{i+1}|, so that every
// branch of the flux's max and |·| is taken somewhere.
std::vector<double> mixed_state(std::size_t n) {
  std::vector<double> u(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) / static_cast<double>(n);
    u[i] = 0.9 * std::sin(2.0 * 3.14159265358979323846 * x + 0.3) + 0.15 * std::cos(7.0 * x);
  }
  return u;
}

TEST(OwnReverseRule, Burgers1DProductsMatchTheDualJacobian) {
  constexpr std::size_t n = 12;
  const Burgers1D model{n};
  const HalfNorm obj;
  const System own = make_system(model, obj, n, 1);
  const System dense = make_system(model, obj, n, 1, {.jacobian = JacobianStrategy::Dense});
  ASSERT_EQ(own.model().own_vjp_workspace(), 2 * n + 1);
  const std::vector<double> u = mixed_state(n), p{0.02};
  std::vector<double> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = std::cos(1.3 * static_cast<double>(i)) - 0.2;
  Linearization a(own), b(dense);
  a.at(0.0, u, p);
  b.at(0.0, u, p);
  EXPECT_LE(max_rel_err({a.value().begin(), a.value().end()}, {b.value().begin(), b.value().end()}),
            kSameProduct);
  std::vector<double> ua(n), ub(n), pa{0.5}, pb{0.5};
  a.vjp(w, ua, pa);
  b.vjp(w, ub, pb);
  EXPECT_LE(max_rel_err(ua, ub), kSameProduct);
  EXPECT_LE(max_rel_err(pa, pb), kSameProduct);
}

TEST(OwnReverseRule, Burgers1DGradientsAgreeAcrossSteppers) {
  constexpr std::size_t n = 24;
  const Burgers1D model{n};
  const Problem<Burgers1D> problem{model, mixed_state(n), {0.05}, {0.0, 0.05}};
  for (const Method method : {Method::ExplicitEuler, Method::RK4, Method::BackwardEuler,
                              Method::CrankNicolson}) {
    SCOPED_TRACE(to_string(method));
    const IntegratorOptions opt{.method = method, .dt = 1e-3};
    const GradientResult ga = gradient(problem, HalfNorm{}, DiscreteAdjoint{}, opt);
    const GradientResult gf = gradient(problem, HalfNorm{}, Forward{}, opt);
    EXPECT_LE(max_rel_err(ga.wrt_initial_state, gf.wrt_initial_state), kSameGradient);
    EXPECT_LE(max_rel_err(ga.wrt_parameters, gf.wrt_parameters), kSameGradient);
    // dJ/dν by central differences: step 1e-5 ν, truncation ~(1e-5)² and
    // round-off ~1e-16/1e-5 relative, so 1e-8 has a margin of 100.
    constexpr double kCentral = 1e-8;
    const double h = 1e-5 * problem.p[0];
    auto J = [&](double nu) {  // the objective of one integration
      Problem<Burgers1D> q = problem;
      q.p[0] = nu;
      const Solution sol = integrate(q, opt);
      return HalfNorm{}.terminal<double>(sol.state(sol.n_outputs() - 1), q.p);
    };
    const double fd = (J(problem.p[0] + h) - J(problem.p[0] - h)) / (2.0 * h);
    EXPECT_LE(std::abs(ga.wrt_parameters[0] - fd), kCentral * std::abs(fd));
  }
}

}  // namespace burgers
