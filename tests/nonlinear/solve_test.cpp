// nonlinear::solve: Newton on steady-state problems (1-D Bratu, a
// reaction–diffusion problem with a field of parameters), the implicit
// derivatives of a functional of the solution against finite differences
// and by Taylor tests, tangents vs adjoints, one tape node whatever the
// iteration count, the three backends against each other, and failures.
#include "costate/nonlinear/solve.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <span>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/ad/verification.hpp"
#include "costate/linear/ksp.hpp"  // set_petsc_option

namespace {

using costate::ad::Dual;
using costate::ad::Real;
using costate::ad::Tape;
namespace nonlinear = costate::nonlinear;

// Converged to ‖F‖₂ ≤ 1e-11 (the round-off floor of these discretised
// residuals is ~1e-12 at n = 50: ε·|u|/h²·√n) on problems with
// ‖∂F/∂x⁻¹‖ ~ 0.1: the solutions of two backends differ by ~1e-12; their
// derivatives (same implicit code at slightly different x*) by as little.
constexpr double kBackendTolerance = 1e-10;
// Central differences with relative step 1e-5 of a functional whose third
// derivative is O(1): truncation ~1e-10, round-off ~ε/h·|J| ~ 1e-11 (the
// solves converge to 1e-13).
constexpr double kFiniteDifferenceTolerance = 1e-7;
// ⟨J v, w⟩ vs ⟨v, Jᵀ w⟩ with the same factorisation: round-off of O(n)
// sums of products.
constexpr double kDualityTolerance = 1e-12;
// Dual tangents vs the tape's tangent sweep: the same linear algebra.
constexpr double kCrossModeTolerance = 1e-12;

const nonlinear::Options kTight{.atol = 1e-11, .rtol = 1e-14};

/// −u'' = λ eᵘ + σ sin(πx) on (0, 1), u = 0 at both ends; n interior points,
/// central differences; p = (λ, σ).
struct Bratu {
  int n = 50;
  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (n + 1);
    for (int i = 0; i < n; ++i) {
      const T left = i > 0 ? u[i - 1] : T(0.0);
      const T right = i + 1 < n ? u[i + 1] : T(0.0);
      const double s = std::sin(std::numbers::pi * (i + 1) * h);
      r[i] = (2.0 * u[i] - left - right) / (h * h) - p[0] * exp(u[i]) - p[1] * s;
    }
  }
};

/// −u'' + κ u³ = f(x) with the source a parameter per grid point:
/// p = (κ, f_0, …, f_{n−1}) — more parameters than one Dual chunk.
struct ReactionDiffusion {
  int n = 30;
  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    const double h = 1.0 / (n + 1);
    for (int i = 0; i < n; ++i) {
      const T left = i > 0 ? u[i - 1] : T(0.0);
      const T right = i + 1 < n ? u[i + 1] : T(0.0);
      r[i] = (2.0 * u[i] - left - right) / (h * h) + p[0] * u[i] * u[i] * u[i] - p[1 + i];
    }
  }
};

/// J(u) = h Σ uᵢ² + u_{n/2}.
template <class T>
T functional(const std::vector<T>& u) {
  const double h = 1.0 / (static_cast<double>(u.size()) + 1);
  T j = T(0.0);
  for (const T& v : u) j += h * v * v;
  j += u[u.size() / 2];
  return j;
}

template <class Problem>
auto objective(Problem problem, nonlinear::Options options) {
  return [problem, options](const auto& p) {
    using T = std::decay_t<decltype(p[0])>;
    const std::vector<double> u0(static_cast<std::size_t>(problem.n), 0.0);
    const auto sol = nonlinear::solve(problem, u0, p, options);
    T j = functional(sol.x);
    return j;
  };
}

/// ∇J by the tape: one recording, one sweep.
template <class Problem>
std::vector<double> tape_gradient(Problem problem, const std::vector<double>& p0,
                                  nonlinear::Options options, nonlinear::Summary* summary = nullptr) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> p(p0.begin(), p0.end());
  for (auto& v : p) tape.register_input(v);
  const std::vector<double> u0(static_cast<std::size_t>(problem.n), 0.0);
  const auto sol = nonlinear::solve(problem, u0, p, options);
  if (summary) *summary = sol.summary;
  Real j = functional(sol.x);
  tape.register_output(j);
  tape.stop_recording();
  j.set_gradient(1.0);
  tape.evaluate();
  std::vector<double> g;
  for (const auto& v : p) g.push_back(v.gradient());
  tape.reset();
  return g;
}

TEST(NonlinearSolve, BratuConvergesQuadratically) {
  const Bratu bratu{.n = 50};
  const std::vector<double> u0(50, 0.0);
  const auto sol = nonlinear::solve(bratu, u0, std::vector<double>{2.0, 0.5}, kTight);
  const auto& s = sol.summary;
  ASSERT_TRUE(s.converged()) << s.full_report();
  EXPECT_LE(s.iterations, 6) << s.full_report();
  EXPECT_FALSE(s.sparse_jacobian);  // 50 ≤ dense_limit
  EXPECT_EQ(s.residual_history.size(), static_cast<std::size_t>(s.iterations) + 1);
  EXPECT_LE(s.final_residual_norm, s.tolerance);
  // Quadratic convergence: the last steps square the residual (up to a constant).
  const auto& h = s.residual_history;
  ASSERT_GE(h.size(), 4u);
  EXPECT_LT(h[h.size() - 2], 1e-3 * h[h.size() - 3]) << s.full_report();
  EXPECT_EQ(s.jacobian_evaluations, s.iterations);
  EXPECT_NE(s.brief_report().find("native Newton: converged"), std::string::npos) << s.brief_report();
  // The residual at the returned x is what the summary says.
  std::vector<double> r(50);
  bratu(std::span<const double>(sol.x), std::span<const double>(std::vector<double>{2.0, 0.5}),
        std::span<double>(r));
  EXPECT_NEAR(costate::nonlinear::detail::norm2(r), s.final_residual_norm, 1e-15);
}

TEST(NonlinearSolve, BratuGradientMatchesFiniteDifferences) {
  const Bratu bratu{.n = 50};
  const std::vector<double> p{2.0, 0.5};
  const std::vector<double> g = tape_gradient(bratu, p, kTight);
  const auto j = objective(bratu, kTight);
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double h = 1e-5 * std::max(1.0, std::abs(p[k]));
    auto pp = p, pm = p;
    pp[k] += h;
    pm[k] -= h;
    const double fd = (j(pp) - j(pm)) / (2 * h);
    EXPECT_NEAR(g[k], fd, kFiniteDifferenceTolerance * std::max(1.0, std::abs(fd))) << "p[" << k << "]";
  }
}

TEST(NonlinearSolve, BratuTaylorTest) {
  const auto j = objective(Bratu{.n = 50}, kTight);
  for (const auto& dir : {std::vector<double>{1.0, 0.0}, std::vector<double>{0.3, -0.8}}) {
    const auto r = costate::ad::taylor_test(j, {2.0, 0.5}, dir);
    EXPECT_TRUE(r.passed) << r.report();
    ASSERT_FALSE(r.orders.empty()) << r.report();
    EXPECT_GE(r.min_order, 1.9) << r.report();
  }
}

TEST(NonlinearSolve, ManyParametersUseTheReverseProductAndPassTaylorAndFiniteDifferences) {
  const ReactionDiffusion rd{.n = 30};
  std::vector<double> p(31);
  p[0] = 5.0;
  for (int i = 0; i < 30; ++i) p[1 + i] = 10.0 * std::sin(0.2 * i) + 3.0;
  const std::vector<double> g = tape_gradient(rd, p, kTight);
  const auto j = objective(rd, kTight);
  for (std::size_t k : {0u, 1u, 15u, 30u}) {
    const double h = 1e-5 * std::max(1.0, std::abs(p[k]));
    auto pp = p, pm = p;
    pp[k] += h;
    pm[k] -= h;
    const double fd = (j(pp) - j(pm)) / (2 * h);
    EXPECT_NEAR(g[k], fd, kFiniteDifferenceTolerance * std::max(1.0, std::abs(fd))) << "p[" << k << "]";
  }
  std::vector<double> dir(31);
  for (int k = 0; k < 31; ++k) dir[static_cast<std::size_t>(k)] = std::cos(1.3 * k);
  const auto r = costate::ad::taylor_test(j, p, dir, g);
  EXPECT_TRUE(r.passed) << r.report();
  ASSERT_FALSE(r.orders.empty()) << r.report();
  EXPECT_GE(r.min_order, 1.9) << r.report();
}

TEST(NonlinearSolve, DualTangentsMatchTheTapeAndTheAdjointIsTheirTranspose) {
  // Both ∂F/∂p paths: dense (Bratu, 2 parameters) and on demand (31).
  auto check = [](auto problem, const std::vector<double>& p0, const char* name) {
    const int n = problem.n;
    const std::size_t np = p0.size();
    const std::vector<double> u0(static_cast<std::size_t>(n), 0.0);
    std::vector<double> v(np), w(static_cast<std::size_t>(n));
    for (std::size_t k = 0; k < np; ++k) v[k] = std::sin(0.7 * double(k) + 0.2);
    for (int i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = std::cos(0.3 * i);
    // Forward mode: ẋ = (dx/dp) v.
    using D = Dual<double, 1>;
    std::vector<D> pd(np);
    for (std::size_t k = 0; k < np; ++k) pd[k] = D(p0[k], {v[k]});
    const auto sd = nonlinear::solve(problem, u0, pd, kTight);
    ASSERT_TRUE(sd.summary.converged()) << name;
    EXPECT_GT(sd.summary.seconds_derivative, 0.0);
    // The tape: tangent sweep and reverse sweep through the one node.
    Tape& tape = Tape::active();
    tape.reset();
    tape.start_recording();
    std::vector<Real> pr(p0.begin(), p0.end());
    for (auto& x : pr) tape.register_input(x);
    auto sr = nonlinear::solve(problem, u0, pr, kTight);
    tape.stop_recording();
    for (std::size_t k = 0; k < np; ++k) tape.set_tangent(pr[k].index(), v[k]);
    tape.evaluate_forward();
    double scale = 0.0, jv_w = 0.0;
    for (int i = 0; i < n; ++i) scale = std::max(scale, std::abs(sd.x[static_cast<std::size_t>(i)].tangent(0)));
    for (int i = 0; i < n; ++i) {
      const auto ii = static_cast<std::size_t>(i);
      EXPECT_NEAR(tape.tangent(sr.x[ii].index()), sd.x[ii].tangent(0), kCrossModeTolerance * scale)
          << name << " x[" << i << "]";
      EXPECT_EQ(sr.x[ii].value(), sd.x[ii].value());
      jv_w += sd.x[ii].tangent(0) * w[ii];
      sr.x[ii].set_gradient(w[ii]);
    }
    tape.evaluate();
    double v_jtw = 0.0;
    for (std::size_t k = 0; k < np; ++k) v_jtw += v[k] * pr[k].gradient();
    EXPECT_NEAR(jv_w, v_jtw, kDualityTolerance * std::abs(jv_w)) << name;
    tape.reset();
  };
  check(Bratu{.n = 40}, {2.0, 0.5}, "bratu");
  std::vector<double> p(31, 4.0);
  p[0] = 5.0;
  check(ReactionDiffusion{.n = 30}, p, "reaction-diffusion");
}

TEST(NonlinearSolve, TapeSizeDoesNotDependOnTheIterationCount) {
  const Bratu bratu{.n = 40};
  Tape& tape = Tape::active();
  std::vector<costate::ad::TapeStats> stats;
  std::vector<int> iterations;
  for (double guess : {0.0, 0.3, -2.0}) {
    tape.reset();
    tape.start_recording();
    std::vector<Real> p{2.0, 0.5};
    for (auto& v : p) tape.register_input(v);
    const auto sol = nonlinear::solve(bratu, std::vector<double>(40, guess), p, kTight);
    Real j = functional(sol.x);
    tape.register_output(j);
    tape.stop_recording();
    ASSERT_TRUE(sol.summary.converged()) << sol.summary.full_report();
    iterations.push_back(sol.summary.iterations);
    stats.push_back(tape.stats());
    tape.reset();
  }
  EXPECT_NE(iterations.front(), iterations.back());  // the guesses differ in cost...
  for (const auto& s : stats) {                      // ...the tapes do not
    EXPECT_EQ(s.statements, stats[0].statements);
    EXPECT_EQ(s.arguments, stats[0].arguments);
    EXPECT_EQ(s.identifiers, stats[0].identifiers);
    EXPECT_EQ(s.externals, 1u);
  }
}

TEST(NonlinearSolve, SparseAndDenseJacobiansAgree) {
  const Bratu bratu{.n = 60};
  const std::vector<double> p{1.5, -0.3};
  nonlinear::Options dense = kTight, sparse = kTight;
  dense.jacobian = nonlinear::JacobianMode::Dense;
  sparse.jacobian = nonlinear::JacobianMode::Sparse;
  nonlinear::Summary sd, ss;
  const auto gd = tape_gradient(bratu, p, dense, &sd);
  const auto gs = tape_gradient(bratu, p, sparse, &ss);
  EXPECT_FALSE(sd.sparse_jacobian);
  EXPECT_TRUE(ss.sparse_jacobian);
  EXPECT_EQ(ss.jacobian_colors, 3);  // tridiagonal
  EXPECT_EQ(ss.jacobian_nonzeros, 3 * 60 - 2);
  for (std::size_t k = 0; k < p.size(); ++k) EXPECT_NEAR(gd[k], gs[k], kBackendTolerance * std::abs(gd[k]));
  // Automatic: sparse above dense_limit.
  // (n = 200: the round-off floor of ‖F‖ is ~5e-11, so a relative tolerance.)
  const auto big = nonlinear::solve(Bratu{.n = 200}, std::vector<double>(200, 0.0), p, {.rtol = 1e-10});
  EXPECT_TRUE(big.summary.sparse_jacobian);
  EXPECT_TRUE(big.summary.converged()) << big.summary.full_report();
}

class Backends : public ::testing::TestWithParam<nonlinear::JacobianMode> {};

TEST_P(Backends, SnesAndKinsolAgreeWithNative) {
  const Bratu bratu{.n = 50};
  const std::vector<double> p{2.0, 0.5};
  nonlinear::Options native = kTight;
  native.jacobian = GetParam();
  nonlinear::Summary s_native;
  const auto g_native = tape_gradient(bratu, p, native, &s_native);
  const auto x_native = nonlinear::solve(bratu, std::vector<double>(50, 0.0), p, native).x;
  ASSERT_TRUE(s_native.converged()) << s_native.full_report();
  for (auto backend : {nonlinear::Backend::PetscSnes, nonlinear::Backend::Kinsol}) {
    nonlinear::Options o = native;
    o.backend = backend;
    nonlinear::Summary s;
    const auto g = tape_gradient(bratu, p, o, &s);
    ASSERT_TRUE(s.converged()) << s.full_report();
    EXPECT_EQ(s.backend, backend);
    EXPECT_LE(s.final_residual_norm, s.tolerance) << s.full_report();
    // KINSOL tests ‖F‖∞ ≤ tol/√n (stricter than the 2-norm test): maybe one more step.
    EXPECT_LE(std::abs(s.iterations - s_native.iterations), 1) << s.full_report() << s_native.full_report();
    EXPECT_GE(s.residual_history.size(), 2u) << s.full_report();
    const auto x = nonlinear::solve(bratu, std::vector<double>(50, 0.0), p, o).x;
    for (std::size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(x[i], x_native[i], kBackendTolerance) << to_string(backend) << " x[" << i << "]";
    for (std::size_t k = 0; k < p.size(); ++k)
      EXPECT_NEAR(g[k], g_native[k], kBackendTolerance * std::abs(g_native[k])) << to_string(backend);
  }
}

TEST(NonlinearSolve, SnesReadsThePetscOptionsDatabase) {
  costate::linear::set_petsc_option("-nlt_snes_type", "newtontr");
  nonlinear::Options o = kTight;
  o.backend = nonlinear::Backend::PetscSnes;
  o.options_prefix = "nlt_";
  const auto tr = nonlinear::solve(Bratu{.n = 20}, std::vector<double>(20, 0.0), std::vector<double>{1.0, 0.0}, o);
  o.use_options_database = false;
  const auto ls = nonlinear::solve(Bratu{.n = 20}, std::vector<double>(20, 0.0), std::vector<double>{1.0, 0.0}, o);
  costate::linear::clear_petsc_option("-nlt_snes_type");
  EXPECT_TRUE(tr.summary.converged()) << tr.summary.full_report();
  EXPECT_NE(tr.summary.message.find("type newtontr"), std::string::npos) << tr.summary.message;
  EXPECT_EQ(ls.summary.message.find("type"), std::string::npos) << ls.summary.message;
  for (std::size_t i = 0; i < tr.x.size(); ++i) EXPECT_NEAR(tr.x[i], ls.x[i], kBackendTolerance);
}

INSTANTIATE_TEST_SUITE_P(Jacobian, Backends,
                         ::testing::Values(nonlinear::JacobianMode::Dense,
                                           nonlinear::JacobianMode::Sparse),
                         [](const auto& info) { return nonlinear::to_string(info.param); });

// ------------------------------------------------------------------ failures

TEST(NonlinearSolve, NonConvergenceIsReportedAndNotDifferentiatedUnlessAllowed) {
  const Bratu bratu{.n = 30};
  nonlinear::Options one = kTight;
  one.max_iterations = 1;
  for (auto backend : {nonlinear::Backend::Native, nonlinear::Backend::PetscSnes, nonlinear::Backend::Kinsol}) {
    one.backend = backend;
    const auto sol = nonlinear::solve(bratu, std::vector<double>(30, 0.0), std::vector<double>{2.0, 0.5}, one);
    EXPECT_EQ(sol.summary.termination, nonlinear::Termination::MaxIterations)
        << sol.summary.full_report();
    EXPECT_FALSE(sol.summary.converged());
    using D = Dual<double, 1>;
    const std::vector<D> pd{D(2.0, {1.0}), D(0.5)};
    try {
      (void)nonlinear::solve(bratu, std::vector<double>(30, 0.0), pd, one);
      ADD_FAILURE() << "differentiating an unconverged solve must throw";
    } catch (const costate::Error& e) {
      EXPECT_NE(std::string(e.what()).find("differentiate_unconverged"), std::string::npos) << e.what();
    }
    Tape& tape = Tape::active();
    tape.reset();
    tape.start_recording();
    std::vector<Real> pr{2.0, 0.5};
    for (auto& v : pr) tape.register_input(v);
    EXPECT_THROW((void)nonlinear::solve(bratu, std::vector<double>(30, 0.0), pr, one), costate::Error);
    auto allowed = one;
    allowed.differentiate_unconverged = true;
    EXPECT_NO_THROW((void)nonlinear::solve(bratu, std::vector<double>(30, 0.0), pr, allowed));
    tape.stop_recording();
    tape.reset();
  }
}

TEST(NonlinearSolve, NoSolutionBeyondTheTurningPointFails) {
  // Bratu has no solution for λ > λc ≈ 3.51: Newton cannot converge.
  const auto sol = nonlinear::solve(Bratu{.n = 30}, std::vector<double>(30, 0.0),
                                    std::vector<double>{5.0, 0.0}, {.max_iterations = 40});
  EXPECT_FALSE(sol.summary.converged()) << sol.summary.full_report();
}

/// F(x) = √x − 2 per component: the full Newton step from x = 0.01 leaves the
/// domain (NaN); the line search must come back.
struct SqrtRoot {
  int n = 3;
  template <class T>
  void operator()(std::span<const T> x, std::span<const T> p, std::span<T> r) const {
    using std::sqrt;
    for (int i = 0; i < n; ++i) r[i] = sqrt(x[i]) - p[0];
  }
};

TEST(NonlinearSolve, NonFiniteResidualsAreHandled) {
  // At x0: every backend reports it.
  for (auto backend : {nonlinear::Backend::Native, nonlinear::Backend::PetscSnes, nonlinear::Backend::Kinsol}) {
    const auto bad = nonlinear::solve(SqrtRoot{}, std::vector<double>(3, -1.0), std::vector<double>{2.0},
                                      {.backend = backend});
    EXPECT_EQ(bad.summary.termination, nonlinear::Termination::NonFiniteResidual)
        << to_string(backend) << ": " << bad.summary.full_report();
  }
  // On a trial step: the native line search backs off and converges.
  const auto ok = nonlinear::solve(SqrtRoot{}, std::vector<double>(3, 9.0), std::vector<double>{2.0}, kTight);
  EXPECT_TRUE(ok.summary.converged()) << ok.summary.full_report();
  EXPECT_NEAR(ok.x[0], 4.0, 1e-10);
}

/// F(x) = (x₀ + x₁ − p, 2x₀ + 2x₁ − 2p): ∂F/∂x is singular everywhere.
struct Degenerate {
  template <class T>
  void operator()(std::span<const T> x, std::span<const T> p, std::span<T> r) const {
    r[0] = x[0] + x[1] - p[0];
    r[1] = 2.0 * x[0] + 2.0 * x[1] - 2.0 * p[0];
  }
};

TEST(NonlinearSolve, SingularJacobianIsReported) {
  for (auto backend : {nonlinear::Backend::Native, nonlinear::Backend::PetscSnes, nonlinear::Backend::Kinsol}) {
    const auto sol = nonlinear::solve(Degenerate{}, std::vector<double>{0.0, 0.0},
                                      std::vector<double>{1.0}, {.backend = backend});
    EXPECT_EQ(sol.summary.termination, nonlinear::Termination::SingularJacobian)
        << to_string(backend) << ": " << sol.summary.full_report();
  }
  // A root (x0 itself), but no derivative there: differentiating throws.
  const auto root = nonlinear::solve(Degenerate{}, std::vector<double>{1.0, 0.0}, std::vector<double>{1.0});
  EXPECT_TRUE(root.summary.converged());
  EXPECT_EQ(root.summary.iterations, 0);
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> p{1.0};
  tape.register_input(p[0]);
  try {
    (void)nonlinear::solve(Degenerate{}, std::vector<double>{1.0, 0.0}, p);
    ADD_FAILURE() << "a singular dF/dx at the solution must throw";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("singular"), std::string::npos) << e.what();
  }
  tape.stop_recording();
  tape.reset();
}

/// A residual that throws (a caller's error inside F) at some iterate.
struct Throwing {
  template <class T>
  void operator()(std::span<const T> x, std::span<const T>, std::span<T> r) const {
    if (costate::linear::detail::value_of(x[0]) > 0.5) throw costate::Error("model failure");
    r[0] = x[0] - 1.0;
  }
};

TEST(NonlinearSolve, ExceptionsFromTheResidualPropagateFromEveryBackend) {
  for (auto backend : {nonlinear::Backend::Native, nonlinear::Backend::PetscSnes, nonlinear::Backend::Kinsol}) {
    try {
      (void)nonlinear::solve(Throwing{}, std::vector<double>{0.0}, std::vector<double>{},
                             {.backend = backend});
      ADD_FAILURE() << to_string(backend) << ": the residual's exception was swallowed";
    } catch (const costate::Error& e) {
      EXPECT_STREQ(e.what(), "model failure") << to_string(backend);
    }
  }
}

TEST(NonlinearSolve, BadInputThrows) {
  EXPECT_THROW((void)nonlinear::solve(Bratu{}, std::vector<double>{}, std::vector<double>{2.0, 0.5}),
               costate::Error);
  std::vector<double> u0(50, 0.0);
  u0[3] = std::nan("");
  EXPECT_THROW((void)nonlinear::solve(Bratu{}, u0, std::vector<double>{2.0, 0.5}), costate::Error);
  EXPECT_THROW((void)nonlinear::solve(Bratu{}, std::vector<double>(50, 0.0),
                                      std::vector<double>{std::nan(""), 0.5}),
               costate::Error);
  try {
    nonlinear::Options{.rtol = 2.0}.validate();
    ADD_FAILURE();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rtol = 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nonlinear::backend_from_string("kinsol"), nonlinear::Backend::Kinsol);
  try {
    (void)nonlinear::backend_from_string("newton");
    ADD_FAILURE();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("native, petsc_snes, kinsol"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nonlinear::jacobian_mode_from_string("sparse"), nonlinear::JacobianMode::Sparse);
  EXPECT_EQ(nonlinear::termination_from_string("max_iterations"), nonlinear::Termination::MaxIterations);
}

}  // namespace

namespace {

/// −Δu + 2 ∂u/∂x = λ eᵘ + σ sin(πx) sin(πy) on the unit square, u = 0 on
/// the boundary, m × m interior points (5-point stencil): a sparse,
/// non-symmetric Jacobian.
struct Bratu2d {
  int m = 50;
  int n = 2500;  ///< m², the unknowns (tape_gradient reads it)
  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (m + 1);
    for (int j = 0; j < m; ++j)
      for (int i = 0; i < m; ++i) {
        const int k = j * m + i;
        const T zero(0.0);
        const T& w = i > 0 ? u[k - 1] : zero;
        const T& e = i + 1 < m ? u[k + 1] : zero;
        const T& s = j > 0 ? u[k - m] : zero;
        const T& nn = j + 1 < m ? u[k + m] : zero;
        const double src = std::sin(std::numbers::pi * (i + 1) * h) * std::sin(std::numbers::pi * (j + 1) * h);
        r[k] = (4.0 * u[k] - w - e - s - nn) / (h * h) + 2.0 * (e - w) / (2.0 * h) - p[0] * exp(u[k]) -
               p[1] * src;
      }
  }
};

}  // namespace

TEST(NonlinearSolve, KinsolKluAgreesWithNativeOnALargeSparseProblem) {
  // 2500 unknowns; ‖F‖'s round-off floor is ~ε·|u|/h²·√n ~ 1e-11, so
  // atol 1e-9; with ‖(∂F/∂x)⁻¹‖ ~ 0.05 the two solutions then differ by
  // ≲ 1e-10, the gradients (same implicit code) relatively by as little.
  constexpr double kLargeTolerance = 1e-9;
  const Bratu2d bratu{.m = 50, .n = 2500};
  const std::vector<double> p{5.0, 1.0};
  nonlinear::Options native{.atol = 1e-9, .rtol = 1e-14, .jacobian = nonlinear::JacobianMode::Sparse};
  nonlinear::Options klu = native;
  klu.backend = nonlinear::Backend::Kinsol;
  klu.kinsol_linear_solver = nonlinear::KinsolLinearSolver::Klu;
  const std::vector<double> u0(2500, 0.0);
  const auto xn = nonlinear::solve(bratu, u0, p, native);
  const auto xk = nonlinear::solve(bratu, u0, p, klu);
  ASSERT_TRUE(xn.summary.converged()) << xn.summary.full_report();
  ASSERT_TRUE(xk.summary.converged()) << xk.summary.full_report();
  EXPECT_NE(xk.summary.message.find("(klu)"), std::string::npos) << xk.summary.message;
  EXPECT_LE(xk.summary.iterations, xn.summary.iterations + 1) << xk.summary.full_report();
  EXPECT_EQ(xk.summary.jacobian_nonzeros, 5 * 2500 - 4 * 50);
  double worst = 0.0;
  for (std::size_t i = 0; i < xn.x.size(); ++i) worst = std::max(worst, std::abs(xk.x[i] - xn.x[i]));
  EXPECT_LE(worst, kLargeTolerance);
  // Automatic picks KLU for a sparse Jacobian.
  klu.kinsol_linear_solver = nonlinear::KinsolLinearSolver::Automatic;
  nonlinear::Summary sa;
  const auto ga = tape_gradient(bratu, p, klu, &sa);
  EXPECT_NE(sa.message.find("(klu)"), std::string::npos) << sa.message;
  const auto gn = tape_gradient(bratu, p, native);
  for (std::size_t k = 0; k < p.size(); ++k) EXPECT_NEAR(ga[k], gn[k], kLargeTolerance * std::abs(gn[k]));
}

TEST(NonlinearSolve, EveryKinsolLinearSolverAgreesWithNative) {
  const Bratu bratu{.n = 50};
  const std::vector<double> p{2.0, 0.5};
  const auto x_native = nonlinear::solve(bratu, std::vector<double>(50, 0.0), p, kTight).x;
  const auto g_native = tape_gradient(bratu, p, kTight);
  using S = nonlinear::KinsolLinearSolver;
  using M = nonlinear::JacobianMode;
  for (auto [mode, solver] : {std::pair{M::Dense, S::Dense}, std::pair{M::Dense, S::Klu}, std::pair{M::Sparse, S::Dense},
                              std::pair{M::Sparse, S::Klu}, std::pair{M::Sparse, S::Gmres}}) {
    nonlinear::Options o = kTight;
    o.backend = nonlinear::Backend::Kinsol;
    o.jacobian = mode;
    o.kinsol_linear_solver = solver;
    const std::string name = to_string(mode) + " Jacobian, " + to_string(solver);
    const auto sol = nonlinear::solve(bratu, std::vector<double>(50, 0.0), p, o);
    ASSERT_TRUE(sol.summary.converged()) << name << ": " << sol.summary.full_report();
    EXPECT_NE(sol.summary.message.find("(" + to_string(solver) + ")"), std::string::npos) << sol.summary.message;
    for (std::size_t i = 0; i < sol.x.size(); ++i) EXPECT_NEAR(sol.x[i], x_native[i], kBackendTolerance) << name;
    const auto g = tape_gradient(bratu, p, o);
    for (std::size_t k = 0; k < p.size(); ++k)
      EXPECT_NEAR(g[k], g_native[k], kBackendTolerance * std::abs(g_native[k])) << name;
  }
  // GMRES's preconditioner is a sparse LU: a dense Jacobian is refused.
  nonlinear::Options bad = kTight;
  bad.backend = nonlinear::Backend::Kinsol;
  bad.jacobian = M::Dense;
  bad.kinsol_linear_solver = S::Gmres;
  EXPECT_THROW(nonlinear::solve(bratu, std::vector<double>(50, 0.0), p, bad), costate::Error);
  // A singular Jacobian under KLU is reported, not thrown.
  const auto singular = nonlinear::solve(Degenerate{}, std::vector<double>{0.0, 0.0}, std::vector<double>{1.0},
                                         {.backend = nonlinear::Backend::Kinsol, .kinsol_linear_solver = S::Klu});
  EXPECT_EQ(singular.summary.termination, nonlinear::Termination::SingularJacobian) << singular.summary.full_report();
  // Names round-trip; a wrong one lists the valid ones.
  for (S s : {S::Automatic, S::Dense, S::Klu, S::Gmres})
    EXPECT_EQ(nonlinear::kinsol_linear_solver_from_string(to_string(s)), s);
  try {
    (void)nonlinear::kinsol_linear_solver_from_string("umfpack");
    ADD_FAILURE() << "an unknown KINSOL linear solver must throw";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("klu"), std::string::npos) << e.what();
  }
}

/// Hv by finite differences of tape gradients: (∇J(p + hv) − ∇J(p − hv)) / 2h.
template <class Problem>
std::vector<double> hvp_by_differences(Problem problem, const std::vector<double>& p0,
                                       const std::vector<double>& v, double h) {
  std::vector<double> pp = p0, pm = p0;
  for (std::size_t k = 0; k < p0.size(); ++k) {
    pp[k] += h * v[k];
    pm[k] -= h * v[k];
  }
  const auto gp = tape_gradient(problem, pp, kTight), gm = tape_gradient(problem, pm, kTight);
  std::vector<double> hv(p0.size());
  for (std::size_t k = 0; k < p0.size(); ++k) hv[k] = (gp[k] - gm[k]) / (2 * h);
  return hv;
}

TEST(NonlinearSolve, HessianVectorProductsThroughASolveMatchDifferencesOfGradients) {
  // Central differences of gradients with step 1e-4: truncation
  // h²·|∇⁴J| ~ 1e-8, round-off ε·|∇J|/h ~ 1e-11 (solves converged to 1e-13
  // relative); relative to |Hv|.
  constexpr double kHvpTolerance = 1e-6;
  // ⟨w, H v⟩ vs ⟨v, H w⟩: H is symmetric; the two products are separate
  // forward-over-reverse sweeps (round-off of the dense solves).
  constexpr double kSymmetryTolerance = 1e-10;
  auto check = [&](auto problem, const std::vector<double>& p0, const char* name) {
    const std::size_t np = p0.size();
    std::vector<double> v(np), w(np);
    for (std::size_t k = 0; k < np; ++k) {
      v[k] = std::cos(1.3 * static_cast<double>(k) + 0.2);
      w[k] = std::sin(0.7 * static_cast<double>(k) + 0.5);
    }
    const auto f = objective(problem, kTight);
    const std::vector<double> hv = costate::ad::hvp(f, p0, v);
    const std::vector<double> fd = hvp_by_differences(problem, p0, v, 1e-4);
    double scale = 0.0;
    for (double a : fd) scale = std::max(scale, std::abs(a));
    ASSERT_GT(scale, 0.0) << name;
    for (std::size_t k = 0; k < np; ++k) EXPECT_NEAR(hv[k], fd[k], kHvpTolerance * scale) << name << " (Hv)[" << k << "]";
    const std::vector<double> hw = costate::ad::hvp(f, p0, w);
    double w_hv = 0.0, v_hw = 0.0, norm = 0.0;
    for (std::size_t k = 0; k < np; ++k) {
      w_hv += w[k] * hv[k];
      v_hw += v[k] * hw[k];
      norm += std::abs(w[k] * hv[k]) + std::abs(v[k] * hw[k]);
    }
    EXPECT_NEAR(w_hv, v_hw, kSymmetryTolerance * norm) << name;
  };
  check(Bratu{.n = 40}, {2.0, 0.5}, "bratu (2 parameters)");
  std::vector<double> p0 = {3.0};
  for (int i = 0; i < 30; ++i) p0.push_back(5.0 + std::sin(0.4 * i));
  check(ReactionDiffusion{.n = 30}, p0, "reaction-diffusion (31 parameters)");
}
