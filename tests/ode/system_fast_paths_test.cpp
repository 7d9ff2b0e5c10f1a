// The fast paths of ode::System and the explicit RK scheme (issue 14's
// adjoint and HVP cost): Linearization::dense_row against jacobian(); the
// explicit RK reverse step fused over the dense rows against the same step
// with the tape strategy's vjp (the generic loop); the second-order System's
// one-direction tangent pass (Dual<double, 1>) against the first-order
// System's (Dual<double, 8>, one lane used); the coloured strategy's vjp by
// rows against the tape's; a model's own rule linearized without f
// (linearize_point, Linearization::at_point) against the same rule with f.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/burgers.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/system.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::max_rel_err;

/// Two strategies computing the same product: the same partial derivatives
/// summed in another order — round-off only (as system_test).
constexpr double kSameProduct = 1e-13;

/// A running cost (the state z) and a terminal cost.
struct RunningAndTerminal {
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * y[0] * y[0] + 0.25 * p[1] * y[1] * std::cos(t));
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(y[0] * y[1]);
  }
};

/// u_i' = p0 (u_{i−1} − 2u_i + u_{i+1}) − p1 u_i² + p2 (periodic): banded,
/// 3 + 3 colours (each parameter reads every row), so Automatic takes the
/// coloured strategy in one pass.
struct Ring {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t n = y.size();
    for (std::size_t i = 0; i < n; ++i) {
      const T& l = y[(i + n - 1) % n];
      const T& r = y[(i + 1) % n];
      dydt[i] = T(p[0] * (l - 2.0 * y[i] + r) - p[1] * y[i] * y[i] + p[2]);
    }
  }
};
struct NoObjective {};

TEST(SystemFastPaths, DenseRowsAreTheJacobian) {
  const LotkaVolterra model;
  const RunningAndTerminal obj;
  const System dense = make_system(model, obj, 2, 4);
  const System tape = make_system(model, obj, 2, 4, {.jacobian = JacobianStrategy::Tape});
  const std::vector<double> x{1.2, 0.7, 0.0}, p{1.5, 1.0, 3.0, 1.0};
  const std::size_t nx = 3, nin = 6;
  Linearization lin(dense), lt(tape);
  lin.at(0.3, x, p);
  lt.at(0.3, x, p);
  std::vector<double> J(nx * nin);
  lin.jacobian(J);
  for (std::size_t i = 0; i < nx; ++i) {
    const double* row = lin.dense_row(i);
    ASSERT_NE(row, nullptr);
    for (std::size_t j = 0; j < nin; ++j) EXPECT_EQ(row[j], J[j * nx + i]) << i << ", " << j;
  }
  EXPECT_EQ(lin.dense_row(nx), nullptr);
  EXPECT_EQ(lt.dense_row(0), nullptr);  // only the one-pass dense strategy has rows
}

TEST(SystemFastPaths, FusedExplicitReverseMatchesTheGenericLoop) {
  const LotkaVolterra model;
  const RunningAndTerminal obj;
  const System dense = make_system(model, obj, 2, 4);
  const System tape = make_system(model, obj, 2, 4, {.jacobian = JacobianStrategy::Tape});
  const std::vector<double> p{1.5, 1.0, 3.0, 1.0};
  const StepPlan times({0.0, 0.05, 0.12});
  const std::vector<double> x{1.2, 0.7, 0.3};
  for (Method method : {Method::ExplicitEuler, Method::RK4, Method::Dopri5}) {
    SCOPED_TRACE(static_cast<int>(method));
    auto a = make_explicit_rk_scheme(dense, method, p, times);
    auto b = make_explicit_rk_scheme(tape, method, p, times);
    std::vector<double> la{0.4, -1.3, 1.0}, lb = la, ma{0.1, 0.2, -0.3, 0.4}, mb = ma;
    for (std::size_t i = 2; i-- > 0;) {  // two reverse steps: the rows are reused
      a->adjoint(i, x, la, ma);
      b->adjoint(i, x, lb, mb);
    }
    EXPECT_LE(max_rel_err(la, lb), kSameProduct);
    EXPECT_LE(max_rel_err(ma, mb), kSameProduct);
    EXPECT_EQ(la[2], 1.0);  // z does not feed back: its adjoint stays 1
  }
}

TEST(SystemFastPaths, OneDirectionTangentOfSecondOrderSystemHasTheSameBits) {
  const LotkaVolterra model;
  const RunningAndTerminal obj;
  const System first = make_system(model, obj, 2, 4);
  const System second = make_second_order_system(model, obj, 2, 4);
  const std::vector<double> p{1.5, 1.0, 3.0, 1.0};
  const StepPlan times({0.0, 0.05});
  const std::vector<double> x{1.2, 0.7, 0.3}, S{0.3, -0.2, 0.0}, P{0.1, 0.0, -0.4, 0.2};
  auto a = make_explicit_rk_scheme(first, Method::RK4, p, times);
  auto b = make_explicit_rk_scheme(second, Method::RK4, p, times);
  std::vector<double> xa(3), xb(3), Sa(3), Sb(3);
  a->tangent(0, x, xa, 1, S, Sa, P);  // Dual<double, 8>, lane 0
  b->tangent(0, x, xb, 1, S, Sb, P);  // Dual<double, 1>
  EXPECT_EQ(xa, xb);
  EXPECT_EQ(Sa, Sb);
  // And against a central difference of the step along (S, P).
  const double h = 1e-6;
  std::vector<double> xp(3), xm(3), pp = p, pm = p, yp = x, ym = x, xpn(3), xmn(3);
  for (std::size_t i = 0; i < 3; ++i) {
    yp[i] += h * S[i];
    ym[i] -= h * S[i];
  }
  for (std::size_t j = 0; j < 4; ++j) {
    pp[j] += h * P[j];
    pm[j] -= h * P[j];
  }
  auto sp = make_explicit_rk_scheme(first, Method::RK4, pp, times);
  auto sm = make_explicit_rk_scheme(first, Method::RK4, pm, times);
  sp->step(0, yp, xpn);
  sm->step(0, ym, xmn);
  std::vector<double> fd(3);
  for (std::size_t i = 0; i < 3; ++i) fd[i] = (xpn[i] - xmn[i]) / (2 * h);
  // Central differences, h = 1e-6: truncation ~h², round-off ~eps/h ≈ 1e-10.
  EXPECT_LE(max_rel_err(Sb, fd), 1e-8);
}

TEST(SystemFastPaths, ColouredVjpByRowsMatchesTheTape) {
  const Ring model;
  const NoObjective obj;
  const std::size_t n = 30;
  const System coloured = make_system(model, obj, n, 3);
  const System tape = make_system(model, obj, n, 3, {.jacobian = JacobianStrategy::Tape});
  std::vector<double> x(n), w(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = 1.0 + 0.3 * std::sin(0.7 * double(i));
    w[i] = std::cos(0.4 * double(i)) - 0.2;
  }
  const std::vector<double> p{0.8, 0.3, 0.1};
  Linearization lc(coloured), lt(tape);
  // Several linearizations (the seeds stay in place; the pattern is re-checked).
  for (int k = 0; k < 5; ++k) {
    for (std::size_t i = 0; i < n; ++i) x[i] += 0.01 * double(k);
    lc.at(0.0, x, p);
    lt.at(0.0, x, p);
    std::vector<double> xc(n), xt(n), pc(3, 0.5), pt(3, 0.5);
    lc.vjp(w, xc, pc);
    lt.vjp(w, xt, pt);
    EXPECT_LE(max_rel_err(xc, xt), kSameProduct) << k;
    EXPECT_LE(max_rel_err(pc, pt), kSameProduct) << k;
    // jvp after vjp: the CSC values are formed on demand from the same pass.
    std::vector<double> v(n, 0.25), q{0.1, -0.2, 0.3}, oc(n), ot(n);
    lc.jvp(v, q, oc);
    lt.jvp(v, q, ot);
    EXPECT_LE(max_rel_err(oc, ot), kSameProduct) << k;
  }
  EXPECT_EQ(coloured.strategy(), JacobianStrategy::Sparse);
}

/// Burgers1D's own rule without linearize_point: every linearization forms
/// f (Linearization::at_point falls back to at()).
struct BurgersWithoutPoint {
  Burgers1D m;
  template <class T>
  void rhs(double t, std::span<const T> u, std::span<const T> p, std::span<T> dudt) const {
    m.rhs<T>(t, u, p, dudt);
  }
  std::size_t vjp_workspace() const { return m.vjp_workspace(); }
  void linearize(double t, std::span<const double> u, std::span<const double> p,
                 std::span<double> f, std::span<double> work) const {
    m.linearize(t, u, p, f, work);
  }
  void vjp(std::span<double> work, std::span<const double> w, std::span<double> ubar,
           std::span<double> pbar) const {
    m.vjp(work, w, ubar, pbar);
  }
};
struct HalfSquare {
  template <class T>
  T terminal(std::span<const T> u, std::span<const T>) const {
    T s = 0.0;
    for (const T& v : u) s = T(s + v * v);
    return T(0.5 * s);
  }
};

TEST(SystemFastPaths, OwnRuleWithoutFHasTheSameBits) {
  static_assert(detail::HasOwnVjpPoint<Burgers1D>);
  static_assert(!detail::HasOwnVjpPoint<BurgersWithoutPoint>);
  constexpr std::size_t n = 16;
  const Burgers1D model{n};
  std::vector<double> u0(n);
  for (std::size_t i = 0; i < n; ++i) u0[i] = std::sin(0.4 * static_cast<double>(i)) + 0.3;
  const std::vector<double> nu{0.03};
  // The products: at_point's vjp is at()'s, bit for bit; its f is refused.
  {
    const System sys = make_system(model, HalfSquare{}, n, 1);
    Linearization a(sys), b(sys);
    a.at_point(0.0, u0, nu);
    b.at(0.0, u0, nu);
    std::vector<double> w(n), ua(n), ub(n), pa{0.5}, pb{0.5};
    for (std::size_t i = 0; i < n; ++i) w[i] = std::cos(1.7 * static_cast<double>(i));
    a.vjp(w, ua, pa);
    b.vjp(w, ub, pb);
    EXPECT_EQ(ua, ub);
    EXPECT_EQ(pa, pb);
    EXPECT_THROW((void)a.value(), costate::Error);
    a.at(0.0, u0, nu);  // at() again: f is there
    EXPECT_EQ(std::vector<double>(a.value().begin(), a.value().end()),
              std::vector<double>(b.value().begin(), b.value().end()));
  }
  // Whole gradients: the explicit RK reverse linearizes its last stage with
  // at_point (every step for Euler), under every schedule.
  const Problem<Burgers1D> with{model, u0, nu, {0.0, 0.04}};
  const Problem<BurgersWithoutPoint> without{BurgersWithoutPoint{model}, u0, nu, {0.0, 0.04}};
  for (const Method method : {Method::ExplicitEuler, Method::RK4, Method::Dopri5}) {
    for (const Checkpointing& c : {Checkpointing(StoreAll{}), Checkpointing(Binomial{.snapshots = 3})}) {
      SCOPED_TRACE(to_string(method) + ", " + to_string(c));
      const IntegratorOptions opt{.method = method, .dt = 1e-3};
      const GradientResult a = gradient(with, HalfSquare{}, DiscreteAdjoint{.checkpointing = c}, opt);
      const GradientResult b =
          gradient(without, HalfSquare{}, DiscreteAdjoint{.checkpointing = c}, opt);
      EXPECT_EQ(a.objective, b.objective);
      EXPECT_EQ(a.wrt_initial_state, b.wrt_initial_state);
      EXPECT_EQ(a.wrt_parameters, b.wrt_parameters);
      EXPECT_EQ(a.vjp_evaluations, b.vjp_evaluations);
    }
  }
}

}  // namespace
