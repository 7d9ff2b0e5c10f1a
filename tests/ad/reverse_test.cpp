// Reverse mode: ad::Real on the Jacobian tape — elementary functions against
// analytic derivatives and central differences, tape mechanics (accumulation,
// reset, partial sweeps, outputs), external functions, the tangent sweep, and
// every misuse that must be an error.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "costate/ad/reverse.hpp"

namespace {

using costate::ad::Real;
using costate::ad::Tape;

/// Central differences with h = 1e-6 have truncation error O(h²)·|f'''| ~ 1e-12
/// and round-off ~ eps·|f|/h ~ 1e-10: compare to 1e-7 relative.
constexpr double kFdRelTol = 1e-7;
/// Reverse mode against the closed-form derivative: only round-off of a few
/// operations separates them.
constexpr double kExactRelTol = 1e-14;

double central_difference(const std::function<double(double)>& f, double x, double h = 1e-6) {
  return (f(x + h) - f(x - h)) / (2.0 * h);
}

/// d/dx of f at x by recording f on a fresh tape.
double reverse_derivative(const std::function<Real(const Real&)>& f, double x0) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real x = x0;
  tape.register_input(x);
  Real y = f(x);
  tape.register_output(y);
  tape.stop_recording();
  y.set_gradient(1.0);
  tape.evaluate();
  return x.gradient();
}

void expect_rel(double got, double want, double rel, const std::string& what) {
  EXPECT_NEAR(got, want, rel * std::max(1.0, std::abs(want))) << what;
}

struct UnaryCase {
  const char* name;
  std::function<Real(const Real&)> f;
  std::function<double(double)> g;     // the same in double
  std::function<double(double)> dg;    // analytic derivative
  std::vector<double> points;
};

TEST(Reverse, ElementaryFunctionsAgainstAnalyticAndFd) {
  using std::sqrt;
  const std::vector<UnaryCase> cases = {
      {"sqrt", [](const Real& x) { return Real(sqrt(x)); }, [](double x) { return std::sqrt(x); },
       [](double x) { return 0.5 / std::sqrt(x); }, {0.3, 2.0, 7.5}},
      {"cbrt", [](const Real& x) { return Real(cbrt(x)); }, [](double x) { return std::cbrt(x); },
       [](double x) { return 1.0 / (3.0 * std::cbrt(x) * std::cbrt(x)); }, {-2.0, 0.4, 5.0}},
      {"exp", [](const Real& x) { return Real(exp(x)); }, [](double x) { return std::exp(x); },
       [](double x) { return std::exp(x); }, {-1.0, 0.0, 2.5}},
      {"expm1", [](const Real& x) { return Real(expm1(x)); },
       [](double x) { return std::expm1(x); }, [](double x) { return std::exp(x); },
       {-1.0, 1e-3, 2.0}},
      {"log", [](const Real& x) { return Real(log(x)); }, [](double x) { return std::log(x); },
       [](double x) { return 1.0 / x; }, {0.2, 1.0, 9.0}},
      {"log1p", [](const Real& x) { return Real(log1p(x)); },
       [](double x) { return std::log1p(x); }, [](double x) { return 1.0 / (1.0 + x); },
       {-0.5, 0.1, 3.0}},
      {"log2", [](const Real& x) { return Real(log2(x)); }, [](double x) { return std::log2(x); },
       [](double x) { return 1.0 / (x * std::log(2.0)); }, {0.5, 3.0}},
      {"log10", [](const Real& x) { return Real(log10(x)); },
       [](double x) { return std::log10(x); }, [](double x) { return 1.0 / (x * std::log(10.0)); },
       {0.5, 3.0}},
      {"sin", [](const Real& x) { return Real(sin(x)); }, [](double x) { return std::sin(x); },
       [](double x) { return std::cos(x); }, {-2.0, 0.3, 4.0}},
      {"cos", [](const Real& x) { return Real(cos(x)); }, [](double x) { return std::cos(x); },
       [](double x) { return -std::sin(x); }, {-2.0, 0.3, 4.0}},
      {"tan", [](const Real& x) { return Real(tan(x)); }, [](double x) { return std::tan(x); },
       [](double x) { return 1.0 / (std::cos(x) * std::cos(x)); }, {-1.0, 0.3, 1.2}},
      {"asin", [](const Real& x) { return Real(asin(x)); }, [](double x) { return std::asin(x); },
       [](double x) { return 1.0 / std::sqrt(1.0 - x * x); }, {-0.7, 0.2}},
      {"acos", [](const Real& x) { return Real(acos(x)); }, [](double x) { return std::acos(x); },
       [](double x) { return -1.0 / std::sqrt(1.0 - x * x); }, {-0.7, 0.2}},
      {"atan", [](const Real& x) { return Real(atan(x)); }, [](double x) { return std::atan(x); },
       [](double x) { return 1.0 / (1.0 + x * x); }, {-3.0, 0.5}},
      {"sinh", [](const Real& x) { return Real(sinh(x)); }, [](double x) { return std::sinh(x); },
       [](double x) { return std::cosh(x); }, {-1.0, 2.0}},
      {"cosh", [](const Real& x) { return Real(cosh(x)); }, [](double x) { return std::cosh(x); },
       [](double x) { return std::sinh(x); }, {-1.0, 2.0}},
      {"tanh", [](const Real& x) { return Real(tanh(x)); }, [](double x) { return std::tanh(x); },
       [](double x) { return 1.0 - std::tanh(x) * std::tanh(x); }, {-1.0, 0.5}},
      {"asinh", [](const Real& x) { return Real(asinh(x)); },
       [](double x) { return std::asinh(x); }, [](double x) { return 1.0 / std::sqrt(x * x + 1); },
       {-2.0, 0.5}},
      {"acosh", [](const Real& x) { return Real(acosh(x)); },
       [](double x) { return std::acosh(x); }, [](double x) { return 1.0 / std::sqrt(x * x - 1); },
       {1.5, 4.0}},
      {"atanh", [](const Real& x) { return Real(atanh(x)); },
       [](double x) { return std::atanh(x); }, [](double x) { return 1.0 / (1.0 - x * x); },
       {-0.5, 0.3}},
      {"erf", [](const Real& x) { return Real(erf(x)); }, [](double x) { return std::erf(x); },
       [](double x) { return 2.0 / std::sqrt(M_PI) * std::exp(-x * x); }, {-1.0, 0.4}},
      {"erfc", [](const Real& x) { return Real(erfc(x)); }, [](double x) { return std::erfc(x); },
       [](double x) { return -2.0 / std::sqrt(M_PI) * std::exp(-x * x); }, {-1.0, 0.4}},
      {"abs", [](const Real& x) { return Real(abs(x)); }, [](double x) { return std::abs(x); },
       [](double x) { return x > 0 ? 1.0 : -1.0; }, {-1.5, 2.0}},
      {"fabs", [](const Real& x) { return Real(fabs(x)); }, [](double x) { return std::fabs(x); },
       [](double x) { return x > 0 ? 1.0 : -1.0; }, {-1.5, 2.0}},
      {"pow(x,2.5)", [](const Real& x) { return Real(pow(x, 2.5)); },
       [](double x) { return std::pow(x, 2.5); }, [](double x) { return 2.5 * std::pow(x, 1.5); },
       {0.5, 2.0}},
      {"pow(x,3) negative base", [](const Real& x) { return Real(pow(x, 3)); },
       [](double x) { return std::pow(x, 3); }, [](double x) { return 3.0 * x * x; }, {-2.0, 1.5}},
      {"pow(1.7,x)", [](const Real& x) { return Real(pow(1.7, x)); },
       [](double x) { return std::pow(1.7, x); },
       [](double x) { return std::pow(1.7, x) * std::log(1.7); }, {-1.0, 2.0}},
      {"pow(x,x)", [](const Real& x) { return Real(pow(x, x)); },
       [](double x) { return std::pow(x, x); },
       [](double x) { return std::pow(x, x) * (std::log(x) + 1.0); }, {0.5, 2.0}},
      {"atan2(x,1.5)", [](const Real& x) { return Real(atan2(x, 1.5)); },
       [](double x) { return std::atan2(x, 1.5); }, [](double x) { return 1.5 / (x * x + 2.25); },
       {-1.0, 2.0}},
      {"atan2(1.5,x)", [](const Real& x) { return Real(atan2(1.5, x)); },
       [](double x) { return std::atan2(1.5, x); }, [](double x) { return -1.5 / (x * x + 2.25); },
       {-1.0, 2.0}},
      {"atan2(x,x*x)", [](const Real& x) { return Real(atan2(x, x * x)); },
       [](double x) { return std::atan2(x, x * x); }, [](double x) { return -1.0 / (1.0 + x * x); },
       {0.7, 2.0}},
      {"hypot(x,2)", [](const Real& x) { return Real(hypot(x, 2.0)); },
       [](double x) { return std::hypot(x, 2.0); }, [](double x) { return x / std::hypot(x, 2.0); },
       {-1.0, 3.0}},
      {"hypot(x,3x)", [](const Real& x) { return Real(hypot(x, 3.0 * x)); },
       [](double x) { return std::hypot(x, 3.0 * x); },
       [](double x) { return x > 0 ? std::sqrt(10.0) : -std::sqrt(10.0); }, {-1.0, 3.0}},
      {"mixed arithmetic",
       [](const Real& x) { return Real((2 * x - 1) / (x + 3) * x - 4.0 / x + 5 - x * 2.5); },
       [](double x) { return (2 * x - 1) / (x + 3) * x - 4.0 / x + 5 - x * 2.5; },
       [](double x) { return (2 * x * x + 12 * x - 3) / ((x + 3) * (x + 3)) + 4.0 / (x * x) - 2.5; },
       {0.5, 2.0}},
  };
  for (const auto& c : cases) {
    for (double x : c.points) {
      const double got = reverse_derivative(c.f, x);
      const std::string what = std::string(c.name) + " at " + std::to_string(x);
      expect_rel(got, c.dg(x), kExactRelTol * 100, what + " (analytic)");
      expect_rel(got, central_difference(c.g, x), kFdRelTol, what + " (FD)");
    }
  }
}

TEST(Reverse, BinaryOperandCombinations) {
  // f(a, b) recorded with both, one or no operand active.
  Tape& tape = Tape::active();
  for (int active_mask = 0; active_mask < 4; ++active_mask) {
    tape.reset();
    tape.start_recording();
    Real a = 1.3, b = 0.7;
    if (active_mask & 1) tape.register_input(a);
    if (active_mask & 2) tape.register_input(b);
    Real f = pow(a, b) + atan2(a, b) + hypot(a, b) + max(a, b) + min(a, b) + fmax(a, b) + fmin(a, b) +
             a * b + a / b - b;
    tape.register_output(f);
    tape.stop_recording();
    f.set_gradient(1.0);
    tape.evaluate();
    const double av = 1.3, bv = 0.7, r2 = av * av + bv * bv;
    const double da = bv * std::pow(av, bv - 1) + bv / r2 + av / std::sqrt(r2) + 1.0 + 0.0 + 1.0 +
                      0.0 + bv + 1.0 / bv;
    const double db = std::pow(av, bv) * std::log(av) - av / r2 + bv / std::sqrt(r2) + 0.0 + 1.0 +
                      0.0 + 1.0 + av - av / (bv * bv) - 1.0;
    EXPECT_NEAR(a.gradient(), (active_mask & 1) ? da : 0.0, 1e-13) << active_mask;
    EXPECT_NEAR(b.gradient(), (active_mask & 2) ? db : 0.0, 1e-13) << active_mask;
  }
}

TEST(Reverse, NonSmoothPointsFollowTheDocumentedChoices) {
  EXPECT_EQ(reverse_derivative([](const Real& x) { return Real(abs(x)); }, 0.0), 0.0);
  // max/min at ties: the first argument.
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real a = 2.0, b = 2.0;
  tape.register_input(a);
  tape.register_input(b);
  Real m = max(a, b), n = min(b, a);
  tape.register_output(m);
  tape.register_output(n);
  tape.stop_recording();
  m.set_gradient(1.0);
  tape.evaluate();
  EXPECT_EQ(a.gradient(), 1.0);
  EXPECT_EQ(b.gradient(), 0.0);
  tape.clear_adjoints();
  n.set_gradient(1.0);
  tape.evaluate();
  EXPECT_EQ(a.gradient(), 0.0);
  EXPECT_EQ(b.gradient(), 1.0);
  // pow(x, y) at x = 0: no NaN from the log term.
  tape.reset();
  tape.start_recording();
  Real x = 0.0, y = 2.0;
  tape.register_input(x);
  tape.register_input(y);
  Real p = pow(x, y);
  tape.register_output(p);
  tape.stop_recording();
  p.set_gradient(1.0);
  tape.evaluate();
  EXPECT_EQ(x.gradient(), 0.0);
  EXPECT_EQ(y.gradient(), 0.0);
  // floor/ceil/round: passive results.
  EXPECT_EQ(reverse_derivative([](const Real& v) -> Real { return floor(v) + ceil(v) + round(v); }, 1.3),
            0.0);
}

TEST(Reverse, DocumentedExampleAndStatementCounts) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real a = 3.0, b = 4.0, x = 2.0;
  tape.register_input(x);
  Real f = a * x * x + b;  // one statement; x appears twice, merged into one argument
  tape.register_output(f);
  tape.stop_recording();
  f.set_gradient(1.0);
  tape.evaluate();
  EXPECT_EQ(x.gradient(), 12.0);
  const auto s = tape.stats();
  EXPECT_EQ(s.statements, 3u);  // input, f, output copy
  EXPECT_EQ(s.arguments, 2u);   // f: (12, x); output: (1, f)
  EXPECT_GT(s.bytes, 0u);
}

TEST(Reverse, PassiveValuesRecordNothing) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real a = 1.0, b = 2.0;
  Real c = sin(a) * b + exp(b);
  EXPECT_FALSE(c.is_active());
  EXPECT_EQ(tape.stats().statements, 0u);
  tape.stop_recording();
  // And nothing is recorded while the tape is stopped.
  Real x = 1.0;
  Real y = x * x;
  EXPECT_EQ(tape.stats().statements, 0u);
  EXPECT_EQ(y.gradient(), 0.0);  // passive: zero by definition
}

TEST(Reverse, AdjointsAccumulateAcrossSweepsUntilCleared) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real x = 1.5;
  tape.register_input(x);
  Real f = x * x, g = sin(x);
  tape.register_output(f);
  tape.register_output(g);
  tape.stop_recording();
  f.set_gradient(1.0);
  tape.evaluate();
  g.set_gradient(1.0);
  tape.evaluate();
  EXPECT_NEAR(x.gradient(), 3.0 + std::cos(1.5), 1e-15);  // the two losses summed
  tape.clear_adjoints();
  EXPECT_EQ(x.gradient(), 0.0);
  g.set_gradient(2.0);
  tape.evaluate();
  EXPECT_NEAR(x.gradient(), 2.0 * std::cos(1.5), 1e-15);
}

TEST(Reverse, ResetToPositionForMiniBatches) {
  // Loss summed over batches recorded one at a time on the same inputs.
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real w = 0.5;
  tape.register_input(w);
  const auto after_inputs = tape.position();
  const std::vector<double> data = {1.0, 2.0, 3.0, 4.0};
  for (double d : data) {
    Real loss = (w * d - 1.0) * (w * d - 1.0);
    tape.register_output(loss);
    loss.set_gradient(1.0);
    tape.evaluate();
    tape.reset(after_inputs);
  }
  tape.stop_recording();
  double expected = 0.0;
  for (double d : data) expected += 2.0 * (0.5 * d - 1.0) * d;
  EXPECT_NEAR(w.gradient(), expected, 1e-14);
  EXPECT_EQ(tape.stats().statements, 1u);  // only the input remains
}

TEST(Reverse, PartialSweepBetweenPositions) {
  // evaluate(from, to) over the second half gives the adjoint of the
  // intermediate value; then the first half finishes the chain.
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real x = 0.8;
  tape.register_input(x);
  Real u = exp(x);
  const auto mid = tape.position();
  Real y = u * u + 3.0 * u;
  tape.register_output(y);
  tape.stop_recording();
  const auto end = tape.position();
  y.set_gradient(1.0);
  tape.evaluate(end, mid);
  EXPECT_NEAR(u.gradient(), 2.0 * std::exp(0.8) + 3.0, 1e-14);
  EXPECT_EQ(x.gradient(), 0.0);
  tape.evaluate(mid, costate::ad::Position{0, 0, 0, 0, 0, 1, mid.tag});
  EXPECT_NEAR(x.gradient(), (2.0 * std::exp(0.8) + 3.0) * std::exp(0.8), 1e-13);
}

// A custom adjoint: dot(a, b) as one external node instead of 2n statements.
Real dot_external(const std::vector<Real>& a, const std::vector<Real>& b) {
  Tape& tape = Tape::active();
  const std::size_t n = a.size();
  std::vector<double> av(n), bv(n);
  double s = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    av[i] = a[i].value();
    bv[i] = b[i].value();
    s += av[i] * bv[i];
  }
  std::vector<Real> inputs(a);
  inputs.insert(inputs.end(), b.begin(), b.end());
  std::vector<Real> out(1, Real(s));
  // Saved data (the input values) lives in the callbacks' captures.
  tape.push_external(
      inputs, out,
      [av, bv](std::span<const double> ybar, std::span<double> xbar) {
        const std::size_t m = av.size();
        for (std::size_t i = 0; i < m; ++i) {
          xbar[i] = bv[i] * ybar[0];       // ∂(a·b)/∂a = b
          xbar[m + i] = av[i] * ybar[0];   // ∂(a·b)/∂b = a
        }
      },
      [av, bv](std::span<const double> xdot, std::span<double> ydot) {
        const std::size_t m = av.size();
        ydot[0] = 0.0;
        for (std::size_t i = 0; i < m; ++i) ydot[0] += bv[i] * xdot[i] + av[i] * xdot[m + i];
      });
  return out[0];
}

TEST(Reverse, ExternalFunctionMatchesTheTapedOperation) {
  Tape& tape = Tape::active();
  const std::size_t n = 5;
  std::vector<double> grad_taped(2 * n), grad_external(2 * n);
  for (int mode = 0; mode < 2; ++mode) {
    tape.reset();
    tape.start_recording();
    std::vector<Real> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = 0.3 * double(i) + 0.1;
      b[i] = std::sin(double(i));
      tape.register_input(a[i]);
      tape.register_input(b[i]);
    }
    Real d;
    if (mode == 0) {
      d = 0.0;
      for (std::size_t i = 0; i < n; ++i) d += a[i] * b[i];
    } else {
      d = dot_external(a, b);
    }
    Real loss = sin(d) * a[0];  // the external node sits inside a larger program
    tape.register_output(loss);
    tape.stop_recording();
    loss.set_gradient(1.0);
    tape.evaluate();
    auto& g = mode == 0 ? grad_taped : grad_external;
    for (std::size_t i = 0; i < n; ++i) {
      g[i] = a[i].gradient();
      g[n + i] = b[i].gradient();
    }
    if (mode == 1) {
      EXPECT_EQ(tape.stats().externals, 1u);
    }
  }
  for (std::size_t i = 0; i < 2 * n; ++i) EXPECT_NEAR(grad_external[i], grad_taped[i], 1e-15) << i;
}

TEST(Reverse, TangentSweepIsTheTransposeOfTheReverseSweep) {
  // <J v, w> = <v, J^T w> for a 3 -> 2 program containing an external node.
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> x = {Real(0.4), Real(-1.1), Real(2.0)};
  for (auto& xi : x) tape.register_input(xi);
  Real d = dot_external({x[0], x[1]}, {x[2], x[0]});
  Real y0 = exp(x[0]) * d + x[2] / x[1];
  Real y1 = atan2(d, x[2]) - x[1] * x[1];
  tape.register_output(y0);
  tape.register_output(y1);
  tape.stop_recording();
  const double v[3] = {0.3, -0.7, 1.1}, w[2] = {0.9, -0.4};
  for (int i = 0; i < 3; ++i) tape.set_tangent(x[i].index(), v[i]);
  tape.evaluate_forward();
  const double jv_w = tape.tangent(y0.index()) * w[0] + tape.tangent(y1.index()) * w[1];
  y0.set_gradient(w[0]);
  y1.set_gradient(w[1]);
  tape.evaluate();
  double v_jtw = 0.0;
  for (int i = 0; i < 3; ++i) v_jtw += v[i] * x[i].gradient();
  // Two sweeps over the same partials: agreement to round-off.
  EXPECT_NEAR(jv_w, v_jtw, 1e-14 * std::abs(jv_w));
}

TEST(Reverse, MisuseIsAnError) {
  Tape& tape = Tape::active();
  tape.reset();
  // Registering while not recording.
  Real x = 1.0;
  EXPECT_THROW(tape.register_input(x), costate::Error);
  // Seeding a passive value.
  EXPECT_THROW(x.set_gradient(1.0), costate::Error);
  EXPECT_EQ(x.gradient(), 0.0);
  // A value recorded before reset() cannot be used afterwards.
  tape.start_recording();
  tape.register_input(x);
  Real y = x * 2.0;
  tape.reset();
  tape.start_recording();
  try {
    Real z = y * 3.0;
    FAIL() << "using a value from before reset() did not throw: " << z.value();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("before reset()"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)y.gradient(), costate::Error);
  // A position from an earlier recording.
  const auto old = tape.position();
  tape.reset();
  EXPECT_THROW(tape.reset(old), costate::Error);
  EXPECT_THROW(tape.evaluate(old, old), costate::Error);
  // A value recorded on another thread's tape.
  Real foreign;
  std::thread t([&] {
    Tape& other = Tape::active();
    other.start_recording();
    Real v = 2.0;
    other.register_input(v);
    foreign = v * v;
    other.stop_recording();
  });
  t.join();
  tape.start_recording();
  EXPECT_THROW({ Real z = foreign + 1.0; (void)z; }, costate::Error);
  tape.stop_recording();
}

TEST(Reverse, CheckFiniteNamesTheStatement) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.set_check_finite(true);
  tape.start_recording();
  Real x = 0.0;
  tape.register_input(x);
  Real a = x + 1.0;  // fine
  try {
    Real b = sqrt(x);  // partial +inf
    FAIL() << "no error for an infinite partial: " << b.value();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite partial derivative in statement 3"),
              std::string::npos)
        << e.what();
  }
  tape.set_check_finite(false);
  tape.stop_recording();
  (void)a;
}

}  // namespace

namespace {
TEST(Reverse, FminFmaxWithConstants) {
  // A constant operand must not leave the expression referring to a
  // temporary (the value and partial come from the active operand only).
  using costate::ad::Real;
  using costate::ad::Tape;
  Tape& tape = Tape::active();
  for (double x0 : {0.4, 2.0}) {  // away from the ties (covered elsewhere)
    tape.reset();
    tape.start_recording();
    Real x = x0;
    tape.register_input(x);
    Real y = fmax(x, 1.0) + 2.0 * fmin(3.0 * x, 1.5) + fmax(1.0, x) + fmin(1.5, 3.0 * x);
    tape.register_output(y);
    tape.stop_recording();
    y.set_gradient(1.0);
    tape.evaluate();
    const double expect_value = std::fmax(x0, 1.0) + 2.0 * std::fmin(3 * x0, 1.5) +
                                std::fmax(1.0, x0) + std::fmin(1.5, 3 * x0);
    const double expect_grad = (x0 > 1.0 ? 2.0 : 0.0) + (3 * x0 < 1.5 ? 9.0 : 0.0);
    EXPECT_EQ(y.value(), expect_value) << x0;
    EXPECT_EQ(x.gradient(), expect_grad) << x0;
  }
}
}  // namespace
