// ODE gradients by discrete adjoint: against a tape of the whole time loop
// (the same discrete solution, so agreement to round-off), against central
// differences of the discrete objective, bitwise invariance under every
// checkpoint schedule, and the optimal recomputation count.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "costate/ad/reverse.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"

namespace {

using namespace costate::ode;
using costate::ad::Real;
using costate::ad::Tape;

/// Discrete adjoint vs the taped loop: the same arithmetic in another order;
/// round-off over ~10^3 steps stays below 1e-12 relative.
constexpr double kTapeRelTol = 1e-12;
/// Central differences of the discrete objective, h = 1e-6 relative:
/// truncation ~h² and round-off ~eps/h give ~1e-9; 1e-7 leaves margin.
constexpr double kFdRelTol = 1e-7;

struct TerminalAndRunning {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * ((1.0 - y[0]) * (1.0 - y[0]) + (1.0 - y[1]) * (1.0 - y[1])) + 0.1 * p[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.1 * t) + 0.01 * p[2] * y[0]);
  }
};

struct TerminalOnly {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(y[0] * y[0] + 3.0 * y[1]);
  }
};

Problem<LotkaVolterra> lv_problem(double t1) {
  return Problem<LotkaVolterra>{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, t1}};
}

/// The same objective by taping the whole fixed-step RK4 loop (y and z).
template <class O>
std::vector<double> taped_rk4_gradient(const Problem<LotkaVolterra>& pr, const O& obj, double dt,
                                       int steps, double* J) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> p(pr.p.begin(), pr.p.end()), y(pr.y0.begin(), pr.y0.end());
  for (auto& v : p) tape.register_input(v);
  for (auto& v : y) tape.register_input(v);
  std::vector<Real> y0 = y;
  const bool running = HasRunning<O>;
  y.push_back(Real(0.0));  // z
  auto f = [&](double t, const std::vector<Real>& u, std::vector<Real>& d) {
    LotkaVolterra{}.rhs<Real>(t, std::span<const Real>(u).first(2), p, std::span<Real>(d).first(2));
    if constexpr (HasRunning<O>) d[2] = obj.template running<Real>(t, std::span<const Real>(u).first(2), p);
    else d[2] = 0.0;
  };
  std::vector<Real> k1(3), k2(3), k3(3), k4(3), s(3);
  for (int n = 0; n < steps; ++n) {
    const double t = n * dt;
    f(t, y, k1);
    for (int i = 0; i < 3; ++i) s[i] = y[i] + 0.5 * dt * k1[i];
    f(t + 0.5 * dt, s, k2);
    for (int i = 0; i < 3; ++i) s[i] = y[i] + 0.5 * dt * k2[i];
    f(t + 0.5 * dt, s, k3);
    for (int i = 0; i < 3; ++i) s[i] = y[i] + dt * k3[i];
    f(t + dt, s, k4);
    for (int i = 0; i < 3; ++i) y[i] = y[i] + (dt / 6.0) * k1[i] + (dt / 3.0) * k2[i] + (dt / 3.0) * k3[i] + (dt / 6.0) * k4[i];
  }
  Real Jr = obj.template terminal<Real>(std::span<const Real>(y).first(2), p);
  if (running) Jr = Jr + y[2];
  tape.register_output(Jr);
  tape.stop_recording();
  Jr.set_gradient(1.0);
  tape.evaluate();
  *J = Jr.value();
  std::vector<double> g;
  for (auto& v : p) g.push_back(v.gradient());
  for (auto& v : y0) g.push_back(v.gradient());
  return g;
}

void expect_rel(const std::vector<double>& got, const std::vector<double>& want, double rel,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * scale) << what << " [" << i << "]";
}

TEST(DiscreteAdjoint, MatchesTheTapedTimeLoop) {
  const auto pr = lv_problem(2.0);
  const TerminalAndRunning obj;
  const auto r = gradient(pr, obj, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 0.01});
  double J = 0.0;
  const auto g = taped_rk4_gradient(pr, obj, 0.01, 200, &J);
  EXPECT_NEAR(r.objective, J, kTapeRelTol * std::abs(J));
  std::vector<double> ours = r.wrt_parameters;
  ours.insert(ours.end(), r.wrt_initial_state.begin(), r.wrt_initial_state.end());
  expect_rel(ours, g, kTapeRelTol, "adjoint vs tape");
  EXPECT_EQ(r.checkpoints.steps, 200);
}

TEST(DiscreteAdjoint, MatchesCentralDifferencesOfTheDiscreteObjective) {
  const auto pr = lv_problem(3.0);
  const TerminalOnly obj;
  const IntegratorOptions opt{.method = Method::RK4, .dt = 0.01};
  const auto r = gradient(pr, obj, DiscreteAdjoint{}, opt);
  auto J = [&](const Problem<LotkaVolterra>& q) {
    return gradient(q, obj, DiscreteAdjoint{}, opt).objective;
  };
  for (std::size_t j = 0; j < 4; ++j) {
    auto a = pr, b = pr;
    const double h = 1e-6 * std::abs(pr.p[j]);
    a.p[j] += h;
    b.p[j] -= h;
    const double fd = (J(a) - J(b)) / (2 * h);
    EXPECT_NEAR(r.wrt_parameters[j], fd, kFdRelTol * std::max(1.0, std::abs(fd))) << "p" << j;
  }
  for (std::size_t i = 0; i < 2; ++i) {
    auto a = pr, b = pr;
    const double h = 1e-6;
    a.y0[i] += h;
    b.y0[i] -= h;
    const double fd = (J(a) - J(b)) / (2 * h);
    EXPECT_NEAR(r.wrt_initial_state[i], fd, kFdRelTol * std::max(1.0, std::abs(fd))) << "y0_" << i;
  }
}

TEST(DiscreteAdjoint, CheckpointInvarianceIsBitwise) {
  const auto pr = lv_problem(2.0);
  const TerminalAndRunning obj;
  const IntegratorOptions opt{.method = Method::RK4, .dt = 0.01};
  const auto ref = gradient(pr, obj, DiscreteAdjoint{StoreAll{}}, opt);
  const std::vector<Checkpointing> schedules = {
      Uniform{.every = 7},       Binomial{.snapshots = 2},  Binomial{.snapshots = 5},
      Binomial{.snapshots = 30}, Online{.snapshots = 4},
      Multilevel{.ram = 3, .disk = 2, .path = "costate_gradient_test_checkpoints.h5"}};
  for (const auto& c : schedules) {
    const auto r = gradient(pr, obj, DiscreteAdjoint{c}, opt);
    SCOPED_TRACE(to_string(c));
    EXPECT_EQ(r.objective, ref.objective);
    EXPECT_EQ(r.wrt_parameters, ref.wrt_parameters);        // same bits
    EXPECT_EQ(r.wrt_initial_state, ref.wrt_initial_state);  // same bits
    if (std::holds_alternative<Multilevel>(c)) {
      EXPECT_GT(r.checkpoints.disk_snapshots, 0);  // the disk level was used
      EXPECT_FALSE(std::filesystem::exists("costate_gradient_test_checkpoints.h5"));  // and removed
    }
    if (const auto* b = std::get_if<Binomial>(&c)) {
      EXPECT_EQ(r.checkpoints.forward_steps, binomial_forward_steps(200, b->snapshots));
      EXPECT_LE(r.checkpoints.peak_snapshots, b->snapshots);
    }
  }
  EXPECT_EQ(ref.checkpoints.recomputed_steps, 0);
}

TEST(DiscreteAdjoint, ObservationsWithLeastSquares) {
  // Data from a run with other parameters; the gradient against the taped
  // loop (observations at every 0.5, one missing value).
  const auto pr = lv_problem(2.0);
  LeastSquares ls;
  ls.n_states = 2;
  ls.times = {0.5, 1.0, 1.5, 2.0};
  ls.data = {1.9, 0.6, 2.5, 0.4, NAN, 0.9, 1.2, 1.6};
  ls.weights = {1.0, 2.0};
  const auto r = gradient(pr, ls, DiscreteAdjoint{Binomial{.snapshots = 4}},
                          {.method = Method::RK4, .dt = 0.01});
  // Central differences of the discrete objective.
  auto J = [&](const Problem<LotkaVolterra>& q) {
    return gradient(q, ls, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 0.01}).objective;
  };
  for (std::size_t j = 0; j < 4; ++j) {
    auto a = pr, b = pr;
    const double h = 1e-6;
    a.p[j] += h;
    b.p[j] -= h;
    const double fd = (J(a) - J(b)) / (2 * h);
    EXPECT_NEAR(r.wrt_parameters[j], fd, kFdRelTol * std::max(1.0, std::abs(fd))) << j;
  }
  EXPECT_GT(r.objective, 0.0);
}

TEST(DiscreteAdjoint, AdaptiveDopri5ConvergesToTheFineFixedStepGradient) {
  const auto pr = lv_problem(3.0);
  const TerminalAndRunning obj;
  const auto fine = gradient(pr, obj, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 1e-3});
  const auto adaptive = gradient(pr, obj, DiscreteAdjoint{Binomial{.snapshots = 6}},
                                 {.method = Method::Dopri5, .rtol = 1e-10, .atol = 1e-12});
  // Both discretisations converge to the exact gradient; at rtol 1e-10 and
  // RK4 with dt = 1e-3 (error ~1e-12) they agree to ~1e-8.
  constexpr double kDiscretisationTol = 1e-7;
  expect_rel(adaptive.wrt_parameters, fine.wrt_parameters, kDiscretisationTol, "p");
  expect_rel(adaptive.wrt_initial_state, fine.wrt_initial_state, kDiscretisationTol, "y0");
  EXPECT_NEAR(adaptive.objective, fine.objective, kDiscretisationTol * std::abs(fine.objective));
}

// rhs_evaluations counts every right-hand-side evaluation of the call (the
// one rule of ReplayedScheme, gradient.hpp): the adaptive run that chose the
// steps plus the sweeps. The sweeps of a replay of the same steps are the
// same work, and a replay chooses nothing: so the first call's count is its
// forward run's plus the replay's, for the adjoint, the tangents and H·v.
TEST(RhsEvaluations, CountTheRunThatChoseTheStepsAndTheSweeps) {
  const auto pr = lv_problem(3.0);
  const TerminalAndRunning obj;
  const IntegratorOptions o{.method = Method::Dopri5, .rtol = 1e-8, .atol = 1e-10};
  for (const SensitivityMethod& m :
       {SensitivityMethod{DiscreteAdjoint{}}, SensitivityMethod{DiscreteAdjoint{Binomial{.snapshots = 5}}},
        SensitivityMethod{Forward{}}}) {
    SCOPED_TRACE(to_string(m));
    const GradientResult first = gradient(pr, obj, m, o);
    const GradientResult replayed = gradient(pr, obj, m, o, first.steps);
    ASSERT_GT(first.summary.rhs_evaluations, 0);
    EXPECT_EQ(replayed.summary.rhs_evaluations, 0);
    // (The explicit RK scheme's tangent steps are Dual evaluations, counted
    // as linearizations: the tangents' sweeps count no right-hand side.)
    if (std::holds_alternative<DiscreteAdjoint>(m)) {
      EXPECT_GT(replayed.rhs_evaluations, 0);
    }
    EXPECT_EQ(first.rhs_evaluations, first.summary.rhs_evaluations + replayed.rhs_evaluations);
  }
  const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, o);
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {}};
  const HessianVectorResult first = hessian_vector(pr, obj, v, DiscreteAdjoint{}, o);
  const HessianVectorResult replayed = hessian_vector(pr, obj, v, DiscreteAdjoint{}, o, g.steps);
  EXPECT_EQ(first.rhs_evaluations, g.summary.rhs_evaluations + replayed.rhs_evaluations);
  // Fixed steps: no run chooses them; the sweeps alone.
  const GradientResult fixed = gradient(pr, obj, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 1e-2});
  EXPECT_EQ(fixed.summary.rhs_evaluations, 0);
  EXPECT_GT(fixed.rhs_evaluations, 0);
}

TEST(ForwardSensitivities, AgreeWithTheDiscreteAdjoint) {
  // Same discrete solution, two directions of differentiation: agreement to
  // round-off (1e-10 relative, the bar for forward vs adjoint).
  constexpr double kForwardVsAdjointTol = 1e-10;
  const auto pr = lv_problem(2.0);
  const TerminalAndRunning obj;
  for (Method m : {Method::RK4, Method::Dopri5}) {
    IntegratorOptions opt{.method = m, .rtol = 1e-8, .atol = 1e-10, .dt = 0.01};
    const auto adj = gradient(pr, obj, DiscreteAdjoint{Binomial{.snapshots = 5}}, opt);
    const auto fwd = gradient(pr, obj, Forward{}, opt);
    SCOPED_TRACE(to_string(m));
    EXPECT_EQ(fwd.steps.times(), adj.steps.times());
    EXPECT_NEAR(fwd.objective, adj.objective, 1e-14 * std::abs(adj.objective));
    expect_rel(fwd.wrt_parameters, adj.wrt_parameters, kForwardVsAdjointTol, "p");
    expect_rel(fwd.wrt_initial_state, adj.wrt_initial_state, kForwardVsAdjointTol, "y0");
  }
  // With observations, and more directions than one Dual chunk (8) holds is
  // not reachable with 6 here; the chunking is exercised by a 9-direction
  // problem below.
  LeastSquares ls{.times = {0.5, 1.5, 2.0}, .data = {2, 1, 1, NAN, 1, 1}, .n_states = 2};
  const auto a = gradient(pr, ls, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 0.01});
  const auto f = gradient(pr, ls, Forward{}, {.method = Method::RK4, .dt = 0.01});
  expect_rel(f.wrt_parameters, a.wrt_parameters, kForwardVsAdjointTol, "p (data)");
}

struct Decay9 {
  // y_i' = -p_i y_i + 0.1 y_{i+1}: 9 parameters + 9 states = 18 directions.
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    for (std::size_t i = 0; i < 9; ++i) dydt[i] = -p[i] * y[i] + 0.1 * y[(i + 1) % 9];
  }
};
struct SumOfSquares {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + v * v);
    return s;
  }
};

TEST(ForwardSensitivities, ChunksOfDirections) {
  Problem<Decay9> pr{Decay9{}, {}, {}, {0.0, 1.0}};
  for (int i = 0; i < 9; ++i) {
    pr.y0.push_back(1.0 + 0.1 * i);
    pr.p.push_back(0.5 + 0.05 * i);
  }
  const IntegratorOptions opt{.method = Method::RK4, .dt = 0.05};
  const auto adj = gradient(pr, SumOfSquares{}, DiscreteAdjoint{}, opt);
  const auto fwd = gradient(pr, SumOfSquares{}, Forward{}, opt);
  expect_rel(fwd.wrt_parameters, adj.wrt_parameters, 1e-12, "p");
  expect_rel(fwd.wrt_initial_state, adj.wrt_initial_state, 1e-12, "y0");
  EXPECT_EQ(fwd.checkpoints.forward_steps, 3 * 20);  // 18 directions: 3 passes of 8
}

struct Final {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return T(y[0] + 1000.0 * y[1]);
  }
};

TEST(DiscreteAdjoint, ImplicitThetaMethods) {
  // Van der Pol, stiff (mu = 1000): the discrete adjoint of backward Euler and
  // Crank–Nicolson against central differences of the same discrete
  // objective (Newton converged to 1e-12: differences agree to ~1e-7).
  Problem<VanDerPol> pr{VanDerPol{}, {2.0, 0.0}, {1000.0}, {0.0, 0.5}};
  for (Method m : {Method::BackwardEuler, Method::CrankNicolson}) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .dt = 1e-3};
    const auto r = gradient(pr, Final{}, DiscreteAdjoint{Binomial{.snapshots = 8}}, opt);
    const auto all = gradient(pr, Final{}, DiscreteAdjoint{}, opt);
    EXPECT_EQ(r.wrt_parameters, all.wrt_parameters);  // checkpoint invariance, bitwise
    auto J = [&](Problem<VanDerPol> q) { return gradient(q, Final{}, DiscreteAdjoint{}, opt).objective; };
    auto a = pr, b = pr;
    a.p[0] += 1e-3;
    b.p[0] -= 1e-3;
    const double fd = (J(a) - J(b)) / 2e-3;
    EXPECT_NEAR(r.wrt_parameters[0], fd, 1e-6 * std::max(1.0, std::abs(fd)));
    for (int i = 0; i < 2; ++i) {
      auto c = pr, d = pr;
      c.y0[i] += 1e-7;
      d.y0[i] -= 1e-7;
      const double fdy = (J(c) - J(d)) / 2e-7;
      EXPECT_NEAR(r.wrt_initial_state[i], fdy, 1e-6 * std::max(1.0, std::abs(fdy))) << i;
    }
    EXPECT_EQ(r.checkpoints.steps, 500);
    // Forward sensitivities of the same discrete solution agree to 1e-10.
    const auto fw = gradient(pr, Final{}, Forward{}, opt);
    expect_rel(fw.wrt_parameters, r.wrt_parameters, 1e-10, "forward vs adjoint, mu");
    expect_rel(fw.wrt_initial_state, r.wrt_initial_state, 1e-10, "forward vs adjoint, y0");
    EXPECT_NEAR(fw.objective, r.objective, 1e-14 * std::abs(r.objective));
  }
  // With a running cost and observations (the quadrature state and the
  // observation jumps) on the implicit methods.
  const auto lv = lv_problem(1.0);
  LeastSquares ls{.times = {0.25, 0.5, 1.0}, .data = {2, 1, 1, NAN, 1, 1}, .n_states = 2};
  for (Method m : {Method::BackwardEuler, Method::CrankNicolson}) {
    const IntegratorOptions opt{.method = m, .dt = 0.01};
    const auto a = gradient(lv, TerminalAndRunning{}, DiscreteAdjoint{}, opt);
    const auto f = gradient(lv, TerminalAndRunning{}, Forward{}, opt);
    expect_rel(f.wrt_parameters, a.wrt_parameters, 1e-10, "running cost, p");
    expect_rel(f.wrt_initial_state, a.wrt_initial_state, 1e-10, "running cost, y0");
    const auto ao = gradient(lv, ls, DiscreteAdjoint{Binomial{.snapshots = 3}}, opt);
    const auto fo = gradient(lv, ls, Forward{}, opt);
    expect_rel(fo.wrt_parameters, ao.wrt_parameters, 1e-10, "observations, p");
    expect_rel(fo.wrt_initial_state, ao.wrt_initial_state, 1e-10, "observations, y0");
  }
}

TEST(DiscreteAdjoint, EveryExplicitMethod) {
  const auto pr = lv_problem(1.0);
  const TerminalOnly obj;
  for (Method m : {Method::ExplicitEuler, Method::RK4, Method::Dopri5}) {
    IntegratorOptions opt{.method = m, .dt = 0.01, .adaptive = false};
    const auto r = gradient(pr, obj, DiscreteAdjoint{Binomial{.snapshots = 3}}, opt);
    auto J = [&](const Problem<LotkaVolterra>& q) { return gradient(q, obj, DiscreteAdjoint{}, opt).objective; };
    auto a = pr, b = pr;
    a.p[1] += 1e-6;
    b.p[1] -= 1e-6;
    const double fd = (J(a) - J(b)) / 2e-6;
    EXPECT_NEAR(r.wrt_parameters[1], fd, kFdRelTol * std::max(1.0, std::abs(fd))) << to_string(m);
  }
}

}  // namespace

namespace {

/// A periodic 1-D reaction–diffusion–advection right-hand side with a
/// Rusanov-type |u| switch and two parameters: a sparse Jacobian (three
/// colours for y when n is divisible by 3) with dense parameter columns.
struct SparseRhs {
  template <class T>
  void rhs(double, std::span<const T> u, std::span<const T> p, std::span<T> dudt) const {
    using std::fabs;
    using std::max;
    const std::size_t n = u.size();
    for (std::size_t i = 0; i < n; ++i) {
      const T& l = u[(i + n - 1) % n];
      const T& r = u[(i + 1) % n];
      dudt[i] = p[0] * (l - 2.0 * u[i] + r) - 0.5 * max(fabs(l), fabs(r)) * (r - l) +
                p[1] * u[i] * (1.0 - u[i]);
    }
  }
};

struct SquareSum {
  template <class T>
  T terminal(std::span<const T> u, std::span<const T> p) const {
    T s = 0.0;
    for (const T& v : u) s = s + v * v;
    return T(0.5 * s + 0.1 * p[1]);
  }
};

}  // namespace

TEST(GradientTest, ColouredJacobianVjpEqualsTheTapeVjp) {
  // The coloured vJp is exact (no truncation): the same products as the
  // tape up to the order of the sums, 1e-13 relative.
  constexpr double kSameProductTol = 1e-13;
  const std::size_t n = 30;
  SparseRhs model;
  const std::vector<double> p{0.7, 1.3};
  std::vector<double> y(n), w(n);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = 0.5 + 0.4 * std::sin(0.7 * static_cast<double>(i));
    w[i] = std::cos(1.1 * static_cast<double>(i));
  }
  detail::RhsVjp<SparseRhs> tape(model, p, n), coloured(model, p, n, /*coloured=*/true);
  std::vector<double> yb_t(n), yb_c(n), pb_t(2, 0.0), pb_c(2, 0.0);
  tape(0.0, y, w, yb_t, pb_t);
  coloured(0.0, y, w, yb_c, pb_c);
  EXPECT_EQ(tape.colours(), 0);
  // 3 colours for the periodic tridiagonal part (n = 30), one each for the
  // two parameter columns (they touch every row).
  EXPECT_EQ(coloured.colours(), 5);
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_NEAR(yb_c[i], yb_t[i], kSameProductTol * (1.0 + std::abs(yb_t[i]))) << i;
  for (std::size_t j = 0; j < 2; ++j)
    EXPECT_NEAR(pb_c[j], pb_t[j], kSameProductTol * (1.0 + std::abs(pb_t[j]))) << j;

  // Through ode::gradient (RK4, binomial checkpoints): the same gradient;
  // 10x the product tolerance for the round-off of 50 steps × 4 stages.
  Problem<SparseRhs> problem{model, y, p, {0.0, 0.5}};
  IntegratorOptions opt;
  opt.method = Method::RK4;
  opt.dt = 0.01;
  const auto a = gradient(problem, SquareSum{},
                          DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 5}}, opt);
  const auto b = gradient(problem, SquareSum{},
                          DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 5},
                                          .coloured_jacobian = true},
                          opt);
  EXPECT_EQ(a.objective, b.objective);
  for (std::size_t j = 0; j < 2; ++j)
    EXPECT_NEAR(b.wrt_parameters[j], a.wrt_parameters[j],
                kSameProductTol * 10 * (1.0 + std::abs(a.wrt_parameters[j])));
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_NEAR(b.wrt_initial_state[i], a.wrt_initial_state[i],
                kSameProductTol * 10 * (1.0 + std::abs(a.wrt_initial_state[i])));
}
