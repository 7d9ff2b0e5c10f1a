// ode::System: its products (vJp, JvP, the Jacobian) under each Jacobian
// strategy — dense Dual, coloured sparse, tape — against central
// differences of the right-hand side and against each other; the
// objective's term gradients; gradients through the compiled explicit RK
// scheme (ode::gradient) against central differences of the discrete
// objective and against forward sensitivities for terminal, integral and
// observation objectives; bitwise checkpoint invariance per strategy; the
// sparse strategy's pattern check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/system.hpp"
#include "support/relative_error.hpp"

namespace {

using costate::test::dot;
using costate::test::max_floored_err;
using costate::test::max_rel_err;

using namespace costate::ode;

/// Two strategies computing the same product: the same partial derivatives
/// summed in another order — round-off only.
constexpr double kSameProduct = 1e-13;
/// Central differences of f with step 1e-6 (relative): truncation ~h²,
/// round-off ~eps/h: ~1e-9; 1e-7 leaves margin.
constexpr double kRhsDifference = 1e-7;
/// Central differences of the discrete objective, h = 1e-6 relative, over a
/// few hundred steps: ~1e-8; 1e-6 leaves margin.
constexpr double kObjectiveDifference = 1e-6;
/// Adjoint vs forward sensitivities of the same discrete solution: both
/// exact, the same products in another order over ≤ 10³ steps.
constexpr double kAdjointVsTangent = 1e-11;

struct NoObjective {};

/// Every output reads every state and parameter: dense rows (n + n_p = 22 >
/// dense_max, 22 colours > max_colours), so Automatic takes the tape.
struct AllToAll {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    using std::sin;
    const std::size_t n = y.size();
    T sp = 0.0;
    for (std::size_t k = 0; k < p.size(); ++k) sp = T(sp + p[k] * std::cos(0.1 * double(k) * t));
    for (std::size_t i = 0; i < n; ++i) {
      T s = -y[i];
      for (std::size_t j = 0; j < n; ++j) s = T(s + 0.05 * sin(y[j] + 0.1 * double(i)));
      dydt[i] = T(s + 0.01 * sp * y[(i + 1) % n]);
    }
  }
};

double val(double x) { return x; }
template <class T, int N>
double val(const costate::ad::Dual<T, N>& x) {
  return costate::ad::primal(x);
}
double val(const costate::ad::IndexSet& x) { return x.value(); }
double val(const costate::ad::Real& x) { return x.value(); }

/// A value-dependent branch: output 0 reads y1 or y2 by the sign of y0.
struct Switching {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    if (val(y[0]) > 0.0)
      dydt[0] = T(p[0] * y[1]);
    else
      dydt[0] = T(p[0] * y[2]);
    for (std::size_t i = 1; i < y.size(); ++i) dydt[i] = T(-y[i] + 0.1 * y[i - 1]);
  }
};

struct Mixed {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    T s = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) s = T(s + 0.5 * (y[i] - 0.5) * (y[i] - 0.5));
    return T(s + 0.1 * p[0] * y[0]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.1 * t) + 0.01 * p[1] * y[0]);
  }
};

struct HalfNorm {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};

struct Integral {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[0] + 0.1 * p[0] * y[1]);
  }
};

std::vector<double> wave(std::size_t n, double a, double b) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = a + b * std::sin(1.0 + 0.7 * double(i));
  return v;
}

/// Checks one System's products at (t, x, p) against central differences of
/// its rhs and against the same products by `other` (another strategy).
void check_products(const System& sys, const System& other, double t, const std::vector<double>& x,
                    const std::vector<double>& p) {
  const std::size_t nx = sys.n_states(), n = sys.n_model_states(), np = sys.n_parameters();
  const std::vector<double> v = wave(nx, 0.3, 1.0), q = wave(np, -0.2, 0.5), w = wave(nx, 0.1, 2.0);
  Linearization lin(sys), lo(other);
  lin.at(t, x, p);
  lo.at(t, x, p);
  // f itself.
  std::vector<double> f(nx);
  sys.rhs(t, x, p, f);
  for (std::size_t i = 0; i < nx; ++i) EXPECT_EQ(lin.value()[i], f[i]) << "value " << i;
  // JvP against central differences along (v, q).
  std::vector<double> jv(nx), jv_other(nx);
  lin.jvp(v, q, jv);
  lo.jvp(v, q, jv_other);
  const double h = 1e-6;
  std::vector<double> xp(x), xm(x), pp(p), pm(p), fp(nx), fm(nx), fd(nx);
  for (std::size_t i = 0; i < n; ++i) {
    xp[i] += h * v[i];
    xm[i] -= h * v[i];
  }
  for (std::size_t j = 0; j < np; ++j) {
    pp[j] += h * q[j];
    pm[j] -= h * q[j];
  }
  sys.rhs(t, xp, pp, fp);
  sys.rhs(t, xm, pm, fm);
  for (std::size_t i = 0; i < nx; ++i) fd[i] = (fp[i] - fm[i]) / (2 * h);
  EXPECT_LE(max_rel_err(jv, fd), kRhsDifference) << to_string(lin.strategy());
  EXPECT_LE(max_rel_err(jv, jv_other), kSameProduct);
  // VJP against the other strategy and the duality wᵀ(J v) = (Jᵀ w)ᵀ v.
  std::vector<double> xb(nx), xb_other(nx), pb(np, 0.0), pb_other(np, 0.0);
  lin.vjp(w, xb, pb);
  lo.vjp(w, xb_other, pb_other);
  EXPECT_LE(max_rel_err(xb, xb_other), kSameProduct);
  EXPECT_LE(max_rel_err(pb, pb_other), kSameProduct);
  double lhs = 0.0, rhs = 0.0;
  for (std::size_t i = 0; i < nx; ++i) lhs += w[i] * jv[i];
  for (std::size_t i = 0; i < n; ++i) rhs += xb[i] * v[i];
  for (std::size_t j = 0; j < np; ++j) rhs += pb[j] * q[j];
  EXPECT_NEAR(lhs, rhs, kSameProduct * (std::abs(lhs) + 1.0));
  for (std::size_t i = n; i < nx; ++i) EXPECT_EQ(xb[i], 0.0);  // z is never an input
  // vjp twice at one linearization gives the same (the tape clears its adjoints).
  std::vector<double> xb2(nx), pb2(np, 0.0);
  lin.vjp(w, xb2, pb2);
  EXPECT_EQ(xb2, xb);
  EXPECT_EQ(pb2, pb);
  // The dense Jacobian against the other strategy's, and jvp_many's columns.
  std::vector<double> J(nx * (n + np)), Jo(nx * (n + np));
  lin.jacobian(J);
  lo.jacobian(Jo);
  EXPECT_LE(max_rel_err(J, Jo), kSameProduct);
  const std::size_t m = 3;
  std::vector<double> V(nx * m), Q(np * m), out(nx * m), one(nx);
  for (std::size_t i = 0; i < nx; ++i)
    for (std::size_t k = 0; k < m; ++k) V[i * m + k] = v[i] * double(k + 1) - 0.1 * double(k);
  for (std::size_t j = 0; j < np; ++j)
    for (std::size_t k = 0; k < m; ++k) Q[j * m + k] = q[j] * double(k) + 0.2;
  lin.jvp_many(m, V, Q, out);
  for (std::size_t k = 0; k < m; ++k) {
    std::vector<double> vk(nx), qk(np), ok(nx);
    for (std::size_t i = 0; i < nx; ++i) vk[i] = V[i * m + k];
    for (std::size_t j = 0; j < np; ++j) qk[j] = Q[j * m + k];
    lin.jvp(vk, qk, one);
    for (std::size_t i = 0; i < nx; ++i) ok[i] = out[i * m + k];
    EXPECT_LE(max_rel_err(ok, one), kSameProduct) << "direction " << k;
  }
}

TEST(System, DenseProductsLotkaVolterra) {
  const LotkaVolterra model;
  const Mixed obj;
  const System dense = make_system(model, obj, 2, 4);
  const System tape = make_system(model, obj, 2, 4, {.jacobian = JacobianStrategy::Tape});
  EXPECT_EQ(dense.n_states(), 3u);  // y and z
  EXPECT_EQ(dense.strategy(), JacobianStrategy::Dense);
  check_products(dense, tape, 0.3, {1.2, 0.7, 0.0}, {1.5, 1.0, 3.0, 1.0});
}

TEST(System, SparseProductsBrusselator) {
  const Brusselator1D model;
  const NoObjective obj;
  const std::size_t points = 20;
  const System automatic = make_system(model, obj, 2 * points, 3);
  const System tape = make_system(model, obj, 2 * points, 3, {.jacobian = JacobianStrategy::Tape});
  const std::vector<double> p{1.0, 3.0, 0.02};
  const std::vector<double> x = Brusselator1D::initial_state(points);
  check_products(automatic, tape, 0.0, x, p);
  EXPECT_EQ(automatic.strategy(), JacobianStrategy::Sparse);  // resolved at the first linearization
  // Banded: u_i, v_i read their neighbours' u, v (5 columns) and the parameters.
  const auto& pattern = automatic.sparsity(0.0, x, p);
  EXPECT_EQ(pattern.rows, int(2 * points));
  EXPECT_EQ(pattern.cols, int(2 * points + 3));
  // Dense forced on the same model agrees too.
  const System dense = make_system(model, obj, 2 * points, 3, {.jacobian = JacobianStrategy::Dense});
  check_products(dense, automatic, 0.0, x, p);
}

TEST(System, TapeProductsDenseRows) {
  const AllToAll model;
  const Integral obj;
  const std::size_t n = 10, np = 12;
  const System automatic = make_system(model, obj, n, np);
  const System dense = make_system(model, obj, n, np, {.jacobian = JacobianStrategy::Dense});
  std::vector<double> x = wave(n + 1, 0.5, 0.3);
  check_products(automatic, dense, 0.4, x, wave(np, 0.2, 0.4));
  EXPECT_EQ(automatic.strategy(), JacobianStrategy::Tape);
}

TEST(System, TermGradientsMatchCentralDifferences) {
  const LotkaVolterra model;
  const LeastSquares obj{.times = {0.5, 1.0}, .data = {1.0, 2.0, 0.5, std::nan("")}, .n_states = 2};
  const System sys = make_system(model, obj, 2, 4);
  const std::vector<double> y{1.3, 0.4}, p{1.5, 1.0, 3.0, 1.0};
  for (std::size_t k = 0; k < 2; ++k) {
    std::vector<double> gy(2, 0.0), gp(4, 0.0);
    const double v = sys.observation_gradient(k, y, p, gy, gp);
    EXPECT_EQ(v, obj.observation<double>(k, y, p));
    const double h = 1e-6;
    for (std::size_t i = 0; i < 2; ++i) {
      std::vector<double> yp(y), ym(y);
      yp[i] += h;
      ym[i] -= h;
      const double fd = (obj.observation<double>(k, yp, p) - obj.observation<double>(k, ym, p)) / (2 * h);
      EXPECT_NEAR(gy[i], fd, kRhsDifference * (1.0 + std::abs(fd)));
    }
  }
  EXPECT_FALSE(sys.has_terminal());
  EXPECT_EQ(sys.observation_times(), obj.times);
}

// dense_input / evaluate (the explicit RK adjoint's in-place stages) are
// at() by another door: the same Dual pass, so f and every row are equal
// bit for bit (exact comparison), and the null cases are null.
TEST(System, DenseInputEvaluateIsAt) {
  const LotkaVolterra model;
  const HalfNorm obj;
  const System sys = make_system(model, obj, 2, 4);
  const std::vector<double> p{1.5, 1.0, 3.0, 1.0}, x0{1.0, 0.5}, x1{0.7, 1.3};
  Linearization in_place(sys), fresh(sys);
  EXPECT_EQ(in_place.dense_input(0), nullptr);  // before the first at()
  in_place.at(0.0, x0, p);
  ASSERT_NE(in_place.dense_input(0), nullptr);
  EXPECT_EQ(in_place.dense_input(2), nullptr);  // past n_x
  for (std::size_t i = 0; i < 2; ++i) in_place.dense_input(0)[i * Linearization::kInputStride] = x1[i];
  in_place.evaluate(0.25);
  fresh.at(0.25, x1, p);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(in_place.value()[i], fresh.value()[i]);
    for (std::size_t l = 0; l < 6; ++l) EXPECT_EQ(in_place.dense_row(i)[l], fresh.dense_row(i)[l]);
  }
  Linearization tangents(sys, true);
  tangents.at(0.0, x0, p);
  EXPECT_EQ(tangents.dense_input(0), nullptr);
}

TEST(System, SparsePatternChangeIsDetected) {
  const Switching model;
  const NoObjective obj;
  const std::size_t n = 20;
  const System sys = make_system(model, obj, n, 1, {.jacobian = JacobianStrategy::Sparse});
  Linearization lin(sys);
  std::vector<double> x = wave(n, 0.5, 0.1);
  const std::vector<double> p{2.0};
  lin.at(0.0, x, p);  // y0 > 0: output 0 reads y1
  EXPECT_EQ(lin.strategy(), JacobianStrategy::Sparse);
  x[0] = -1.0;  // now it reads y2, which is not in the pattern
  EXPECT_THROW(
      {
        for (std::int64_t k = 0; k <= kPatternCheckInterval; ++k) lin.at(0.0, x, p);
      },
      costate::Error);
}

TEST(System, StrategyNames) {
  for (auto s : {JacobianStrategy::Automatic, JacobianStrategy::Dense, JacobianStrategy::Sparse,
                 JacobianStrategy::Tape})
    EXPECT_EQ(jacobian_strategy_from_string(to_string(s)), s);
  EXPECT_THROW((void)jacobian_strategy_from_string("coloured"), costate::Error);
  EXPECT_THROW((SystemOptions{.max_colours = 0}.validate()), costate::Error);
}

/// J(p, y0) of the replayed discrete solution (the plan `steps`).
template <class M, class O>
double objective_at(const Problem<M>& pr, const O& obj, const IntegratorOptions& opt,
                    const StepPlan& steps) {
  return gradient(pr, obj, Forward{}, opt, steps).objective;
}

/// The adjoint against forward sensitivities and central differences of
/// the discrete objective in every parameter and initial state.
template <class M, class O>
void check_gradient(const Problem<M>& pr, const O& obj, const IntegratorOptions& opt,
                    const SensitivityMethod& adjoint) {
  const GradientResult a = gradient(pr, obj, adjoint, opt);
  const GradientResult f = gradient(pr, obj, Forward{}, opt, a.steps);
  EXPECT_NEAR(f.objective, a.objective, 1e-12 * std::abs(a.objective));
  EXPECT_LE(max_rel_err(f.wrt_parameters, a.wrt_parameters), kAdjointVsTangent);
  EXPECT_LE(max_rel_err(f.wrt_initial_state, a.wrt_initial_state), kAdjointVsTangent);
  std::vector<double> fd, ad = a.wrt_parameters;
  ad.insert(ad.end(), a.wrt_initial_state.begin(), a.wrt_initial_state.end());
  for (std::size_t d = 0; d < pr.p.size() + pr.y0.size(); ++d) {
    Problem<M> plus = pr, minus = pr;
    double& vp = d < pr.p.size() ? plus.p[d] : plus.y0[d - pr.p.size()];
    double& vm = d < pr.p.size() ? minus.p[d] : minus.y0[d - pr.p.size()];
    const double h = 1e-6 * std::max(1.0, std::abs(vp));
    vp += h;
    vm -= h;
    fd.push_back((objective_at(plus, obj, opt, a.steps) -
                  objective_at(minus, obj, opt, a.steps)) /
                 (2 * h));
  }
  EXPECT_LE(max_rel_err(ad, fd), kObjectiveDifference);
}

TEST(SystemGradient, LotkaVolterraTerminalIntegralObservations) {
  const Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 3.0}};
  const LeastSquares obs{.times = {0.5, 1.25, 3.0}, .data = {1.0, 2.0, 0.5, std::nan(""), 2.0, 1.0},
                         .n_states = 2};
  for (Method m : {Method::ExplicitEuler, Method::RK4}) {
    const IntegratorOptions opt{.method = m, .dt = 0.01};
    SCOPED_TRACE(to_string(m));
    check_gradient(pr, HalfNorm{}, opt, DiscreteAdjoint{});
    check_gradient(pr, Mixed{}, opt, DiscreteAdjoint{});
    check_gradient(pr, obs, opt, DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 4}});
  }
  // dopri5's replayed adaptive steps.
  const IntegratorOptions dp{.method = Method::Dopri5, .rtol = 1e-8, .atol = 1e-10};
  check_gradient(pr, Mixed{}, dp, DiscreteAdjoint{});
  check_gradient(pr, obs, dp, DiscreteAdjoint{});
}

TEST(SystemGradient, BrusselatorSparseAndTapeAgree) {
  const std::size_t points = 12;
  const Problem<Brusselator1D> pr{Brusselator1D{}, Brusselator1D::initial_state(points),
                                  {1.0, 3.0, 0.02}, {0.0, 0.2}};
  const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-3};
  check_gradient(pr, Integral{}, opt, DiscreteAdjoint{});
  check_gradient(pr, HalfNorm{}, opt, DiscreteAdjoint{.coloured_jacobian = true});
  // The tape strategy (a System forced to it) gives the same gradient.
  const HalfNorm obj;
  const System sparse = make_system(pr.model, obj, pr.n_states(), 3);
  const System tape = make_system(pr.model, obj, pr.n_states(), 3, {.jacobian = JacobianStrategy::Tape});
  std::vector<double> times;
  for (int i = 0; i <= 200; ++i) times.push_back(i * 1e-3);
  times.back() = 0.2;
  const StepPlan steps(std::move(times));
  auto run = [&](const System& sys) {
    auto scheme = make_explicit_rk_scheme(sys, Method::RK4, pr.p, steps);
    return adjoint_sweep(sys, *scheme, steps, StoreAll{}, pr.y0, pr.p);
  };
  const SweepOutcome a = run(sparse), b = run(tape);
  EXPECT_EQ(sparse.strategy(), JacobianStrategy::Sparse);
  EXPECT_EQ(tape.strategy(), JacobianStrategy::Tape);
  EXPECT_EQ(a.objective, b.objective);
  EXPECT_LE(max_rel_err(a.wrt_parameters, b.wrt_parameters), kSameProduct * 10);
  EXPECT_LE(max_rel_err(a.wrt_initial_state, b.wrt_initial_state), kSameProduct * 10);
}

TEST(SystemGradient, TapeStrategyGradient) {
  const std::size_t n = 10;
  Problem<AllToAll> pr{AllToAll{}, wave(n, 0.5, 0.3), wave(12, 0.2, 0.4), {0.0, 0.5}};
  check_gradient(pr, Integral{}, {.method = Method::RK4, .dt = 0.01}, DiscreteAdjoint{});
}

TEST(SystemGradient, CheckpointInvarianceIsBitwisePerStrategy) {
  const std::vector<Checkpointing> schedules = {
      Uniform{.every = 7}, Binomial{.snapshots = 3}, Online{.snapshots = 4},
      Multilevel{.ram = 2, .disk = 2, .path = "costate_system_test_checkpoints.h5"}};
  auto check = [&](const auto& pr, const auto& obj, const IntegratorOptions& opt) {
    const auto ref = gradient(pr, obj, DiscreteAdjoint{}, opt);
    ASSERT_GT(ref.checkpoints.steps, 12);  // more steps than any schedule's snapshots
    for (const auto& c : schedules) {
      SCOPED_TRACE(to_string(c));
      const auto r = gradient(pr, obj, DiscreteAdjoint{.checkpointing = c}, opt);
      EXPECT_EQ(r.objective, ref.objective);
      EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters);
      EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state);
      EXPECT_GT(r.checkpoints.recomputed_steps, 0);
    }
  };
  check(Problem<LotkaVolterra>{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 1.0}},
        Mixed{}, {.method = Method::RK4, .dt = 0.02});
  check(Problem<Brusselator1D>{Brusselator1D{}, Brusselator1D::initial_state(10), {1.0, 3.0, 0.02},
                               {0.0, 2.0}},
        HalfNorm{}, {.method = Method::Dopri5, .rtol = 1e-8, .atol = 1e-10});
  check(Problem<AllToAll>{AllToAll{}, wave(10, 0.5, 0.3), wave(12, 0.2, 0.4), {0.0, 0.3}},
        Integral{}, {.method = Method::ExplicitEuler, .dt = 0.01});
}

}  // namespace

namespace {

/// Thrown by the hook below (a Ctrl-C stand-in).
struct Interrupted {};

TEST(SystemGradient, SweepHookSeesForwardAndReverseSteps) {
  // The sweeps call IntegratorOptions::on_step every kSweepHookInterval
  // steps, forward and reverse: the reverse sweep of the explicit adjoint is
  // where Ctrl-C had no check.
  const Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 3.0}};
  const std::int64_t l = 300;  // dt = 0.01 on [0, 3]
  for (const SensitivityMethod& method :
       {SensitivityMethod(DiscreteAdjoint{}),
        SensitivityMethod(DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 4}}),
        SensitivityMethod(Forward{})}) {
    SCOPED_TRACE(to_string(method));
    std::vector<double> seen;
    IntegratorOptions opt{.method = Method::RK4, .dt = 0.01};
    opt.on_step = [&](double t) { seen.push_back(t); };
    const GradientResult g = gradient(pr, HalfNorm{}, method, opt);
    ASSERT_EQ(g.checkpoints.steps, l);
    // One call per kSweepHookInterval steps the sweep took (forward steps,
    // recomputations, reverse steps; the tangent sweep only goes forward).
    const bool forward = std::holds_alternative<Forward>(method);
    const std::int64_t hooked = forward ? l : g.checkpoints.forward_steps + l;
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), hooked / kSweepHookInterval);
    for (double t : seen) EXPECT_TRUE(t >= 0.0 && t <= 3.0) << t;
    if (forward) continue;
    // The reverse sweep reports: the last calls come down to the start.
    EXPECT_LT(seen.back(), 0.5);
    // A throw from the hook in the reverse sweep ends the gradient.
    double highest = 0.0;
    opt.on_step = [&](double t) {
      if (t < highest - 1.0) throw Interrupted{};
      highest = std::max(highest, t);
    };
    EXPECT_THROW((void)gradient(pr, HalfNorm{}, method, opt), Interrupted);
  }
  // StoreAll's counts are those of reverse_sweep's StoreAll schedule.
  const GradientResult s = gradient(pr, HalfNorm{}, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 0.01});
  EXPECT_EQ(s.checkpoints.forward_steps, l - 1);
  EXPECT_EQ(s.checkpoints.restores, l - 1);
  EXPECT_EQ(s.checkpoints.peak_snapshots, l);
  EXPECT_EQ(s.checkpoints.recomputed_steps, 0);
}

}  // namespace

// ---------------------------------------------------------------- second order
// SecondOrderLinearization (dense and coloured SecondOrderDual<K> passes and the
// Reverse<Dual<double,1>> tape) against central differences of the
// first-order products along (ẋ, ṗ), against each other, and the objective
// terms' Hessian–vector pieces against differences of their gradients.
namespace {

/// Central differences of first-order vJps (exact products at x ± hẋ, p ±
/// hṗ), h = 1e-5: truncation ~h² |f'''| ≈ 1e-10, round-off ~eps/h ≈ 1e-11
/// relative; 1e-7 leaves margin.
constexpr double kSecondOrderDifference = 1e-7;

void check_second_order(const System& sys, const System& other, double t,
                        const std::vector<double>& x, const std::vector<double>& p,
                        bool one_dense = true) {
  const std::size_t nx = sys.n_states(), n = sys.n_model_states(), np = sys.n_parameters();
  const std::vector<double> xd = wave(nx, 0.2, 0.8), pd = wave(np, -0.3, 0.6),
                            w = wave(nx, 0.1, 2.0), wd = wave(nx, -0.4, 1.1);
  SecondOrderLinearization a(sys), b(other);
  a.at(t, x, xd, p, pd);
  b.at(t, x, xd, p, pd);
  if (one_dense) {
    EXPECT_NE(a.dense(), b.dense());
  }
  // f, and ḟ = f_x ẋ + f_p ṗ by the first-order jvp.
  Linearization lin(sys);
  lin.at(t, x, p);
  std::vector<double> jv(nx);
  lin.jvp(xd, pd, jv);
  for (std::size_t i = 0; i < nx; ++i) EXPECT_EQ(a.value()[i], lin.value()[i]) << i;
  EXPECT_LE(max_rel_err({a.value_dot().begin(), a.value_dot().end()}, jv), kSameProduct);
  EXPECT_LE(max_rel_err({b.value_dot().begin(), b.value_dot().end()}, jv), kSameProduct);
  // The vJp and its ε-part.
  std::vector<double> xb(nx), xbd(nx), pb(np, 0.0), pbd(np, 0.0);
  std::vector<double> xb2(nx), xbd2(nx), pb2(np, 0.0), pbd2(np, 0.0);
  a.vjp(w, wd, xb, xbd, pb, pbd);
  b.vjp(w, wd, xb2, xbd2, pb2, pbd2);
  EXPECT_LE(max_rel_err(xbd, xbd2), kSameProduct);
  EXPECT_LE(max_rel_err(pbd, pbd2), kSameProduct);
  std::vector<double> x1(nx), p1(np, 0.0);
  lin.vjp(w, x1, p1);
  EXPECT_LE(max_rel_err(xb, x1), kSameProduct);
  EXPECT_LE(max_rel_err(pb, p1), kSameProduct);
  // d/dε [f_x(x + εẋ, p + εṗ)ᵀ (w + εẇ)] by central differences.
  const double h = 1e-5;
  auto first = [&](double s, std::vector<double>& gx, std::vector<double>& gp) {
    std::vector<double> xs(x), ps(p), ws(nx);
    for (std::size_t i = 0; i < n; ++i) xs[i] += s * xd[i];
    for (std::size_t j = 0; j < np; ++j) ps[j] += s * pd[j];
    for (std::size_t i = 0; i < nx; ++i) ws[i] = w[i] + s * wd[i];
    Linearization l(sys);
    l.at(t, xs, ps);
    gx.assign(nx, 0.0);
    gp.assign(np, 0.0);
    l.vjp(ws, gx, gp);
  };
  std::vector<double> gxp, gpp, gxm, gpm, fdx(nx), fdp(np);
  first(h, gxp, gpp);
  first(-h, gxm, gpm);
  for (std::size_t i = 0; i < nx; ++i) fdx[i] = (gxp[i] - gxm[i]) / (2 * h);
  for (std::size_t j = 0; j < np; ++j) fdp[j] = (gpp[j] - gpm[j]) / (2 * h);
  EXPECT_LE(max_rel_err(xbd, fdx), kSecondOrderDifference);
  EXPECT_LE(max_rel_err(pbd, fdp), kSecondOrderDifference);
  for (std::size_t i = n; i < nx; ++i) EXPECT_EQ(xbd[i], 0.0);  // z is never an input
  // The Jacobian's ε-part: both strategies form it by Dual passes, against
  // differences of the first-order Jacobian.
  const std::size_t cols = n + np;
  std::vector<double> J(nx * cols), Jd(nx * cols), J2(nx * cols), Jd2(nx * cols);
  a.jacobian(J, Jd);
  b.jacobian(J2, Jd2);
  EXPECT_EQ(Jd, Jd2);
  std::vector<double> Jp(nx * cols), Jm(nx * cols), fdJ(nx * cols);
  std::vector<double> xp(x), xm(x), pp(p), pm(p);
  for (std::size_t i = 0; i < n; ++i) {
    xp[i] += h * xd[i];
    xm[i] -= h * xd[i];
  }
  for (std::size_t j = 0; j < np; ++j) {
    pp[j] += h * pd[j];
    pm[j] -= h * pd[j];
  }
  sys.jacobian(t, xp, pp, Jp);
  sys.jacobian(t, xm, pm, Jm);
  for (std::size_t k = 0; k < Jp.size(); ++k) fdJ[k] = (Jp[k] - Jm[k]) / (2 * h);
  EXPECT_LE(max_rel_err(Jd, fdJ), kSecondOrderDifference);
}

TEST(SystemSecondOrder, DenseAndTapeAgainstDifferencesLotkaVolterra) {
  const LotkaVolterra model;
  const Mixed obj;  // a running cost: x = (y, z)
  const System dense = make_second_order_system(model, obj, 2, 4);
  const System tape =
      make_second_order_system(model, obj, 2, 4, {.jacobian = JacobianStrategy::Tape});
  check_second_order(dense, tape, 0.3, {1.2, 0.7, 0.0}, {1.5, 1.0, 3.0, 1.0});
}

TEST(SystemSecondOrder, TapeAndDenseAgainstDifferencesDenseRows) {
  const AllToAll model;
  const Integral obj;
  const std::size_t n = 10, np = 12;  // n + n_p = 22 > dense_max: the tape
  const System automatic = make_second_order_system(model, obj, n, np);
  const System dense =
      make_second_order_system(model, obj, n, np, {.jacobian = JacobianStrategy::Dense});
  check_second_order(automatic, dense, 0.4, wave(n + 1, 0.5, 0.3), wave(np, 0.2, 0.4));
}

TEST(SystemSecondOrder, SparseAndTapeAgainstDifferencesBrusselator) {
  const Brusselator1D model;
  const Integral obj;
  const std::size_t points = 12, n = 2 * points, np = 3;  // 27 inputs: coloured
  const System sparse = make_second_order_system(model, obj, n, np);
  const System tape =
      make_second_order_system(model, obj, n, np, {.jacobian = JacobianStrategy::Tape});
  std::vector<double> x = Brusselator1D::initial_state(points);
  x.push_back(0.0);  // z
  check_second_order(sparse, tape, 0.1, x, {1.0, 3.0, 0.02}, false);
  EXPECT_EQ(sparse.strategy(), JacobianStrategy::Sparse);
}

TEST(SystemSecondOrder, SparseHessianVectorKeepsTheGradientsBits) {
  // The coloured second-order vjp sums each value entry as the first-order
  // coloured vjp does: the HVP's gradient is ode::gradient's, bit for bit.
  const std::size_t points = 12;
  const Problem<Brusselator1D> pr{Brusselator1D{}, Brusselator1D::initial_state(points),
                                  {1.0, 3.0, 0.02}, {0.0, 0.2}};
  const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-3};
  const HessianDirection v{{0.3, -0.7, 0.2}, {}};
  for (const Checkpointing& c :
       {Checkpointing(StoreAll{}), Checkpointing(Binomial{.snapshots = 5})}) {
    const DiscreteAdjoint method{.checkpointing = c};
    const auto h = hessian_vector(pr, Integral{}, v, method, opt);
    const auto g = gradient(pr, Integral{}, method, opt);
    EXPECT_EQ(h.objective, g.objective);
    EXPECT_EQ(h.gradient_wrt_parameters, g.wrt_parameters);
    EXPECT_EQ(h.gradient_wrt_initial_state, g.wrt_initial_state);
  }
}

TEST(SystemSecondOrder, FirstOrderSystemRefusesSecondOrder) {
  const LotkaVolterra model;
  const Mixed obj;
  const System first = make_system(model, obj, 2, 4);
  EXPECT_THROW(SecondOrderLinearization{first}, costate::Error);
  std::vector<double> y{1.0, 1.0}, p{1.5, 1.0, 3.0, 1.0}, g(2), gp(4);
  double d = 0.0;
  EXPECT_THROW((void)first.terminal_hessian_vector(y, y, p, p, g, g, gp, gp, d), costate::Error);
}

TEST(SystemSecondOrder, TermHessianVectorAgainstDifferencesOfGradients) {
  const LotkaVolterra model;
  const LeastSquares ls{.times = {0.5, 1.0}, .data = {1.0, 2.0, 0.5, std::nan("")}, .n_states = 2};
  const Mixed mixed;
  const System obs = make_second_order_system(model, ls, 2, 4),
               term = make_second_order_system(model, mixed, 2, 4);
  const std::vector<double> y{1.3, 0.4, 0.0}, p{1.5, 1.0, 3.0, 1.0};
  const std::vector<double> yd{0.3, -0.5, 0.0}, pd{0.2, 0.1, -0.4, 0.7};
  const double h = 1e-5;
  // Relative to max(1, max |want|): the observation terms do not read p (zero rows).
  auto check = [&](auto&& grad, auto&& hv, const char* what) {
    std::vector<double> gy(2, 0.0), gyd(2, 0.0), gp(4, 0.0), gpd(4, 0.0);
    double vd = 0.0;
    const double v = hv(y, yd, p, pd, gy, gyd, gp, gpd, vd);
    std::vector<double> gy1(2, 0.0), gp1(4, 0.0);
    EXPECT_EQ(v, grad(y, p, gy1, gp1)) << what;
    EXPECT_LE(max_floored_err(gy, gy1), kSameProduct) << what;
    EXPECT_LE(max_floored_err(gp, gp1), kSameProduct) << what;
    EXPECT_NEAR(vd, dot(gy1, yd) + dot(gp1, pd), kSameProduct * (1.0 + std::abs(vd))) << what;
    auto at = [&](double s, std::vector<double>& a, std::vector<double>& b) {
      std::vector<double> ys(y), ps(p);
      for (std::size_t i = 0; i < 2; ++i) ys[i] += s * yd[i];
      for (std::size_t j = 0; j < 4; ++j) ps[j] += s * pd[j];
      a.assign(2, 0.0);
      b.assign(4, 0.0);
      grad(ys, ps, a, b);
    };
    std::vector<double> ap, bp, am, bm, fy(2), fp(4);
    at(h, ap, bp);
    at(-h, am, bm);
    for (std::size_t i = 0; i < 2; ++i) fy[i] = (ap[i] - am[i]) / (2 * h);
    for (std::size_t j = 0; j < 4; ++j) fp[j] = (bp[j] - bm[j]) / (2 * h);
    EXPECT_LE(max_floored_err(gyd, fy), kSecondOrderDifference) << what;
    EXPECT_LE(max_floored_err(gpd, fp), kSecondOrderDifference) << what;
  };
  for (std::size_t k = 0; k < 2; ++k)
    check([&](auto&&... a) { return obs.observation_gradient(k, a...); },
          [&](auto&&... a) { return obs.observation_hessian_vector(k, a...); }, "observation");
  check([&](auto&&... a) { return term.terminal_gradient(a...); },
        [&](auto&&... a) { return term.terminal_hessian_vector(a...); }, "terminal");
}

}  // namespace
