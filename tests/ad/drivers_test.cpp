// AD drivers: gradient, jacobian (forward, reverse, automatic), jvp, vjp,
// hvp, hessian — against closed-form derivatives, central differences, the
// W2 reference entries of shared/BENCHMARKS.md and each other; and the tape
// contract (left as found, nesting inside a recording, exceptions).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/core/error.hpp"

namespace {

namespace ad = costate::ad;
using ad::Real;
using ad::Tape;
using D1 = ad::Dual<double, 1>;

/// AD against a closed form: the same formula evaluated in a different
/// order, a few ulps per operation over at most a few dozen operations.
constexpr double kRoundoffRel = 1e-13;
/// Central differences with h = 1e-6·max(1,|x|): truncation O(h²) ~ 1e-12,
/// round-off ~ ε|f|/h ~ 1e-10 (relative to the function's scale).
constexpr double kFdRel = 1e-7;
constexpr double kFdStep = 1e-6;
/// The W2 reference entries are quoted to 16 digits; the bench's check
/// (bench/peers/w2_workload.hpp) allows 1e-12 for differently ordered sums.
constexpr double kW2RefTol = 1e-12;

void expect_close(double got, double want, double rel, const std::string& what) {
  EXPECT_NEAR(got, want, rel * std::max(1.0, std::abs(want))) << what;
}

template <class T>
using Scalar = std::decay_t<T>;

// ---------------------------------------------------------------- functions

/// f(x) = x0·x1 + sin(x0): ∇f = (x1 + cos x0, x0).
struct Simple {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::sin;
    T f = x[0] * x[1] + sin(x[0]);
    return f;
  }
};

/// Extended Rosenbrock (workload W3): Σ_{i<n/2} 100(x_{2i+1} − x_{2i}²)² + (1 − x_{2i})².
struct Rosenbrock {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    T f = 0.0;
    for (std::size_t i = 0; i + 1 < x.size(); i += 2) {
      T a = x[i + 1] - x[i] * x[i];
      T b = 1.0 - x[i];
      f += 100.0 * a * a + b * b;
    }
    return f;
  }
  static std::vector<double> gradient(const std::vector<double>& x) {
    std::vector<double> g(x.size(), 0.0);
    for (std::size_t i = 0; i + 1 < x.size(); i += 2) {
      const double a = x[i + 1] - x[i] * x[i];
      g[i] = -400.0 * x[i] * a - 2.0 * (1.0 - x[i]);
      g[i + 1] = 200.0 * a;
    }
    return g;
  }
  static Eigen::MatrixXd hessian(const std::vector<double>& x) {
    const auto n = static_cast<Eigen::Index>(x.size());
    Eigen::MatrixXd H = Eigen::MatrixXd::Zero(n, n);
    for (Eigen::Index i = 0; i + 1 < n; i += 2) {
      const double u = x[static_cast<std::size_t>(i)], w = x[static_cast<std::size_t>(i) + 1];
      H(i, i) = 1200.0 * u * u - 400.0 * w + 2.0;
      H(i, i + 1) = H(i + 1, i) = -400.0 * u;
      H(i + 1, i + 1) = 200.0;
    }
    return H;
  }
};

/// A mix of the elementary functions: exp, log, sqrt, pow, atan2, tanh.
struct Mixed {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::atan2;
    using std::exp;
    using std::log;
    using std::pow;
    using std::sqrt;
    using std::tanh;
    T f = exp(x[0] * x[1]) / (1.0 + x[2] * x[2]) + log(1.0 + x[0] * x[0]) * sqrt(x[1]);
    f += pow(x[2], 3) - atan2(x[1], x[0]) * tanh(x[2] - x[0]);
    return f;
  }
};

/// Workload W2: F_i = Σ_j sin(x_j(i+1))·exp(−x_i x_j/16) + x_i³ (16 × 16).
struct W2 {
  static constexpr int kN = 16;
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    using std::exp;
    using std::sin;
    std::vector<T> f(kN);
    for (int i = 0; i < kN; ++i) {
      const double c = i + 1;
      T s = 0.0;
      for (int j = 0; j < kN; ++j) s += sin(x[j] * c) * exp(-x[i] * x[j] / 16.0);
      f[i] = s + x[i] * x[i] * x[i];
    }
    return f;
  }
  static std::vector<double> point() {
    std::vector<double> x(kN);
    for (int j = 0; j < kN; ++j) x[static_cast<std::size_t>(j)] = 0.5 + 0.03 * j;
    return x;
  }
  /// ∂F_i/∂x_k = c cos(c x_k) e_ik − sin(c x_k) e_ik x_i/16  (k ≠ i part)
  ///           − δ_ik Σ_j sin(c x_j) e_ij x_j/16 + 3 x_i² δ_ik,   c = i+1.
  static Eigen::MatrixXd jacobian(const std::vector<double>& x) {
    Eigen::MatrixXd J(kN, kN);
    for (int i = 0; i < kN; ++i) {
      const double c = i + 1, xi = x[static_cast<std::size_t>(i)];
      double diag = 3.0 * xi * xi;
      for (int k = 0; k < kN; ++k) {
        const double xk = x[static_cast<std::size_t>(k)];
        const double e = std::exp(-xi * xk / 16.0);
        J(i, k) = c * std::cos(c * xk) * e - std::sin(c * xk) * e * xi / 16.0;
        diag -= std::sin(c * xk) * e * xk / 16.0;
      }
      J(i, i) += diag;
    }
    return J;
  }
};

/// A wide function (m = 3 < n = 7): F_i = Σ_j a_ij x_j² + x_i x_{i+1}.
struct Wide {
  template <class V>
  auto operator()(const V& x) const {
    using T = Scalar<decltype(x[0])>;
    std::vector<T> f(3);
    for (std::size_t i = 0; i < 3; ++i) {
      T s = x[i] * x[i + 1];
      for (std::size_t j = 0; j < x.size(); ++j) s += a(i, j) * x[j] * x[j];
      f[i] = s;
    }
    return f;
  }
  static double a(std::size_t i, std::size_t j) { return 0.5 + 0.1 * static_cast<double>(i) - 0.07 * static_cast<double>(j); }
  static Eigen::MatrixXd jacobian(const std::vector<double>& x) {
    Eigen::MatrixXd J(3, static_cast<Eigen::Index>(x.size()));
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < x.size(); ++j)
        J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
            2.0 * a(i, j) * x[j] + (j == i ? x[i + 1] : 0.0) + (j == i + 1 ? x[i] : 0.0);
    return J;
  }
};

double central_difference(const auto& f, std::vector<double> x, std::size_t j) {
  const double h = kFdStep * std::max(1.0, std::abs(x[j]));
  const double x0 = x[j];
  x[j] = x0 + h;
  const double fp = f(x);
  x[j] = x0 - h;
  const double fm = f(x);
  return (fp - fm) / ((x0 + h) - (x0 - h));
}

std::vector<double> random_vector(std::size_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& a : v) a = u(gen);
  return v;
}

void expect_clean_tapes() {
  EXPECT_FALSE(Tape::active().is_recording());
  EXPECT_EQ(Tape::active().stats().identifiers, 0u) << "a driver left statements on the tape";
  EXPECT_FALSE(ad::BasicTape<D1>::active().is_recording());
  EXPECT_EQ(ad::BasicTape<D1>::active().stats().identifiers, 0u);
}

// ----------------------------------------------------------------- gradient

TEST(Drivers, GradientOfAGenericLambda) {
  // The API sketch's example: ∇(x0·x1) = (x1, x0).
  const std::vector<double> x0 = {3.0, -2.5};
  const auto g = ad::gradient([](const auto& x) { return x[0] * x[1]; }, x0);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], -2.5);  // exact: one multiplication's partials
  EXPECT_EQ(g[1], 3.0);
  expect_clean_tapes();
}

TEST(Drivers, GradientAgainstAnalytic) {
  const std::vector<double> x = {0.7, -1.3};
  const auto vg = ad::value_and_gradient(Simple{}, x);
  expect_close(vg.value, 0.7 * -1.3 + std::sin(0.7), kRoundoffRel, "value");
  expect_close(vg.gradient[0], -1.3 + std::cos(0.7), kRoundoffRel, "df/dx0");
  expect_close(vg.gradient[1], 0.7, kRoundoffRel, "df/dx1");

  const std::vector<double> xr = random_vector(10, 11, -1.5, 1.5);
  const auto g = ad::gradient(Rosenbrock{}, xr);
  const auto want = Rosenbrock::gradient(xr);
  for (std::size_t j = 0; j < xr.size(); ++j)
    expect_close(g[j], want[j], kRoundoffRel, "Rosenbrock gradient " + std::to_string(j));
  expect_clean_tapes();
}

TEST(Drivers, GradientAgainstCentralDifferences) {
  const std::vector<double> x = {0.4, 1.7, -0.8};
  const auto g = ad::gradient(Mixed{}, x);
  for (std::size_t j = 0; j < x.size(); ++j)
    expect_close(g[j], central_difference(Mixed{}, x, j), kFdRel, "Mixed gradient " + std::to_string(j));
}

// ----------------------------------------------------------------- jacobian

TEST(Drivers, JacobianOfW2MatchesReferenceEntries) {
  const auto x = W2::point();
  const Eigen::MatrixXd Jf = ad::jacobian_forward(W2{}, x);
  const Eigen::MatrixXd Jr = ad::jacobian_reverse(W2{}, x);
  const Eigen::MatrixXd J16 = ad::jacobian_forward<16>(W2{}, x);
  const Eigen::MatrixXd J = ad::jacobian(W2{}, x);  // square: forward
  for (const Eigen::MatrixXd* M : {&Jf, &Jr, &J16, &J}) {
    ASSERT_EQ(M->rows(), 16);
    ASSERT_EQ(M->cols(), 16);
    EXPECT_NEAR((*M)(0, 0), 1.120482472417367, kW2RefTol);
    EXPECT_NEAR((*M)(15, 7), 5.520386508754350, kW2RefTol);
  }
  const Eigen::MatrixXd Ja = W2::jacobian(x);
  // Entries are O(1..16); the analytic formula sums in another order.
  EXPECT_LE((Jf - Ja).cwiseAbs().maxCoeff(), 1e-13 * Ja.cwiseAbs().maxCoeff());
  // Forward and reverse agree to round-off (same partials, different sums).
  EXPECT_LE((Jf - Jr).cwiseAbs().maxCoeff(), 1e-13 * Ja.cwiseAbs().maxCoeff());
  // Chunk size only changes which evaluation a column comes from: identical bits.
  EXPECT_EQ((Jf - J16).cwiseAbs().maxCoeff(), 0.0);
  expect_clean_tapes();
}

TEST(Drivers, JacobianAgainstCentralDifferences) {
  const auto x = W2::point();
  const Eigen::MatrixXd J = ad::jacobian(W2{}, x);
  for (std::size_t k = 0; k < x.size(); ++k)
    for (std::size_t i = 0; i < x.size(); ++i) {
      const auto Fi = [i](const std::vector<double>& p) { return W2{}(p)[i]; };
      expect_close(J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)),
                   central_difference(Fi, x, k), kFdRel * 16,  // |F| ~ 16 sets the FD round-off
                   "W2 J(" + std::to_string(i) + "," + std::to_string(k) + ")");
    }
}

TEST(Drivers, WideJacobianUsesReverseAndMatchesForward) {
  const std::vector<double> x = random_vector(7, 3);
  const Eigen::MatrixXd J = ad::jacobian(Wide{}, x);  // m = 3 < n = 7: reverse
  const Eigen::MatrixXd Jf = ad::jacobian_forward(Wide{}, x);
  const Eigen::MatrixXd Ja = Wide::jacobian(x);
  ASSERT_EQ(J.rows(), 3);
  ASSERT_EQ(J.cols(), 7);
  EXPECT_LE((J - Ja).cwiseAbs().maxCoeff(), kRoundoffRel);
  EXPECT_LE((J - Jf).cwiseAbs().maxCoeff(), kRoundoffRel);
  // A scalar function as a 1 × n Jacobian: its gradient.
  const Eigen::MatrixXd G = ad::jacobian(Rosenbrock{}, x);
  const auto g = Rosenbrock::gradient(x);
  ASSERT_EQ(G.rows(), 1);
  for (std::size_t j = 0; j < x.size(); ++j)
    expect_close(G(0, static_cast<Eigen::Index>(j)), g[j], kRoundoffRel, "scalar Jacobian");
  expect_clean_tapes();
}

TEST(Drivers, JacobianReverseWithAConstantOutput) {
  // Output 1 does not depend on x: its row is zero and its seed must not
  // leak into the next row.
  const auto F = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    return std::vector<T>{x[0] * x[1], T(2.0), x[1] * x[1]};
  };
  const Eigen::MatrixXd J = ad::jacobian_reverse(F, {2.0, 5.0});
  EXPECT_EQ(J(0, 0), 5.0);
  EXPECT_EQ(J(0, 1), 2.0);
  EXPECT_EQ(J(1, 0), 0.0);
  EXPECT_EQ(J(1, 1), 0.0);
  EXPECT_EQ(J(2, 0), 0.0);
  EXPECT_EQ(J(2, 1), 10.0);
}

// --------------------------------------------------------------- jvp / vjp

TEST(Drivers, JvpAndVjpAreAdjoint) {
  const auto x = W2::point();
  const Eigen::MatrixXd J = ad::jacobian(W2{}, x);
  for (unsigned seed : {1u, 2u, 3u}) {
    const auto v = random_vector(16, seed);
    const auto w = random_vector(16, 100 + seed);
    const ad::JvpResult jv = ad::jvp(W2{}, x, v);
    const ad::VjpResult wj = ad::vjp(W2{}, x, w);
    double lhs = 0.0, rhs = 0.0;  // ⟨J v, w⟩ and ⟨v, Jᵀ w⟩
    for (std::size_t i = 0; i < 16; ++i) {
      lhs += jv.tangent[i] * w[i];
      rhs += v[i] * wj.cotangent[i];
    }
    // Both are sums of 256 products of size ≤ 16: round-off ~ 1e-13.
    EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::abs(lhs)));
    const auto F = W2{}(x);
    for (std::size_t i = 0; i < 16; ++i) {
      EXPECT_EQ(jv.value[i], F[i]) << "jvp value = F(x), same operations";
      EXPECT_EQ(wj.value[i], F[i]) << "vjp value = F(x), same operations";
      double Jv = 0.0, JTw = 0.0;
      for (std::size_t k = 0; k < 16; ++k) {
        Jv += J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) * v[k];
        JTw += J(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i)) * w[k];
      }
      EXPECT_NEAR(jv.tangent[i], Jv, 1e-12 * 16);
      EXPECT_NEAR(wj.cotangent[i], JTw, 1e-12 * 16);
    }
  }
  expect_clean_tapes();
}

TEST(Drivers, JvpAndVjpCheckLengths) {
  EXPECT_THROW(ad::jvp(W2{}, W2::point(), std::vector<double>(3, 1.0)), costate::Error);
  EXPECT_THROW(ad::vjp(W2{}, W2::point(), std::vector<double>(15, 1.0)), costate::Error);
  EXPECT_THROW(ad::hvp(Rosenbrock{}, {1.0, 2.0}, {1.0}), costate::Error);
  expect_clean_tapes();
}

// ------------------------------------------------------------ second order

TEST(Drivers, HvpOfRosenbrockMatchesExactHessian) {
  // W3's point, n = 100: x_{2i} = −1.2 + 0.01 sin(2i), x_{2i+1} = 1 + 0.01 sin(2i+1).
  const std::size_t n = 100;
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = (i % 2 == 0 ? -1.2 : 1.0) + 0.01 * std::sin(static_cast<double>(i));
  const Eigen::MatrixXd H = Rosenbrock::hessian(x);
  for (unsigned seed : {5u, 6u}) {
    const auto v = random_vector(n, seed);
    const auto hv = ad::hvp(Rosenbrock{}, x, v);
    ASSERT_EQ(hv.size(), n);
    const Eigen::VectorXd want = H * Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(n));
    for (std::size_t i = 0; i < n; ++i)  // entries ~1e3: a few ulps of that
      EXPECT_NEAR(hv[i], want(static_cast<Eigen::Index>(i)), 1e-12 * 1e3) << "Hv[" << i << "]";
  }
  expect_clean_tapes();
}

TEST(Drivers, HvpAgainstDifferencesOfGradients) {
  // (∇f(x + hv) − ∇f(x − hv)) / 2h = H v + O(h²): gradients by reverse mode.
  const std::vector<double> x = {0.4, 1.7, -0.8};
  const std::vector<double> v = {0.3, -0.5, 0.9};
  const auto hv = ad::hvp(Mixed{}, x, v);
  const double h = 1e-5;
  std::vector<double> xp = x, xm = x;
  for (std::size_t j = 0; j < 3; ++j) {
    xp[j] += h * v[j];
    xm[j] -= h * v[j];
  }
  const auto gp = ad::gradient(Mixed{}, xp), gm = ad::gradient(Mixed{}, xm);
  for (std::size_t j = 0; j < 3; ++j)  // O(h²) ~ 1e-10 and round-off ε|∇f|/h ~ 1e-10
    EXPECT_NEAR(hv[j], (gp[j] - gm[j]) / (2 * h), 1e-7 * std::max(1.0, std::abs(hv[j])));
}

TEST(Drivers, HessianIsSymmetricAndExact) {
  const std::vector<double> x = random_vector(8, 21, -1.5, 1.5);
  const Eigen::MatrixXd H = ad::hessian(Rosenbrock{}, x);
  const Eigen::MatrixXd Ha = Rosenbrock::hessian(x);
  EXPECT_LE((H - Ha).cwiseAbs().maxCoeff(), 1e-12 * Ha.cwiseAbs().maxCoeff());
  const Eigen::MatrixXd Hm = ad::hessian(Mixed{}, {0.4, 1.7, -0.8});
  // Columns come from separate sweeps: symmetric to round-off, not bitwise.
  EXPECT_LE((Hm - Hm.transpose()).cwiseAbs().maxCoeff(), 1e-13 * Hm.cwiseAbs().maxCoeff());
  expect_clean_tapes();
}

// ------------------------------------------------------------------- tape

TEST(Drivers, NestInsideARecordingAndLeaveItIntact) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real a = 3.0;
  tape.register_input(a);
  Real b = a * a;  // user's statement before the drivers
  const auto before = tape.stats();
  // Drivers while the user's recording is in progress.
  const auto g = ad::gradient(Rosenbrock{}, {0.5, 0.5});
  const Eigen::MatrixXd J = ad::jacobian_reverse(Wide{}, random_vector(7, 3));
  const auto w = ad::vjp(W2{}, W2::point(), std::vector<double>(16, 1.0));
  EXPECT_TRUE(tape.is_recording()) << "the user's recording must continue";
  EXPECT_EQ(tape.stats().identifiers, before.identifiers);
  EXPECT_EQ(tape.stats().statements, before.statements);
  // The driver's result is a constant of the user's recording.
  Real c = b * g[1];
  tape.register_output(c);
  tape.stop_recording();
  c.set_gradient(1.0);
  tape.evaluate();
  expect_close(a.gradient(), 2.0 * 3.0 * g[1], kRoundoffRel, "user gradient after nesting");
  EXPECT_EQ(g[1], Rosenbrock::gradient({0.5, 0.5})[1]);
  (void)J;
  (void)w;
  // Between a stopped recording and its sweep: adjoints stay.
  const double ga = a.gradient();
  (void)ad::gradient(Simple{}, {1.0, 2.0});
  EXPECT_EQ(a.gradient(), ga);
  tape.reset();
  expect_clean_tapes();
}

TEST(Drivers, NestedRecordingAcrossTapeChunks) {
  // The user's recording fills most of the first argument chunk (2^20
  // arguments); the driver's recording starts mid-chunk and crosses into the
  // next one. Its partial sweep and reset(position) must get both sides right.
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Real a = 0.5;
  tape.register_input(a);
  Real s = a;
  const int steps = 500000;  // s ← c·s + a: 2 arguments each, ~1e6 in all
  const double c = 1.0 - 1e-6;
  for (int k = 0; k < steps; ++k) s = c * s + a;
  const std::size_t args_before = tape.stats().arguments;
  ASSERT_LT(args_before, std::size_t{1} << 20);
  std::vector<double> x(200000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 == 0 ? -1.2 : 1.0) + 0.01 * std::sin(double(i));
  const auto g = ad::gradient(Rosenbrock{}, x);  // ~6e5 arguments: crosses 2^20
  const auto want = Rosenbrock::gradient(x);
  for (std::size_t j = 0; j < x.size(); ++j)
    ASSERT_NEAR(g[j], want[j], 1e-12 * std::max(1.0, std::abs(want[j]))) << j;
  EXPECT_EQ(tape.stats().arguments, args_before);
  tape.register_output(s);
  tape.stop_recording();
  s.set_gradient(1.0);
  tape.evaluate();
  // ds/da: d ← c·d + 1 from d = 1.
  double d = 1.0;
  for (int k = 0; k < steps; ++k) d = c * d + 1.0;
  EXPECT_NEAR(a.gradient(), d, 1e-12 * d);
  tape.reset();
  expect_clean_tapes();
}

TEST(Drivers, DriversNestInsideACallable) {
  // f(x) = c·x0² with c = ∂(u0·u1)/∂u0 at (1, 4) = 4, computed by a driver
  // inside f while the outer gradient records.
  const auto f = [](const auto& x) {
    const double c = ad::gradient([](const auto& u) { return u[0] * u[1]; }, {1.0, 4.0})[0];
    using T = Scalar<decltype(x[0])>;
    T y = c * x[0] * x[0];
    return y;
  };
  const auto g = ad::gradient(f, {1.5});
  EXPECT_EQ(g[0], 4.0 * 2.0 * 1.5);
  expect_clean_tapes();
}

TEST(Drivers, TapeRestoredWhenTheCallableThrows) {
  const auto f = [](const auto& x) {
    using T = Scalar<decltype(x[0])>;
    T y = x[0] * x[1];
    if (y > 1.0) throw std::runtime_error("model failure");
    return y;
  };
  EXPECT_THROW(ad::gradient(f, {2.0, 3.0}), std::runtime_error);
  EXPECT_THROW(ad::hvp(f, {2.0, 3.0}, {1.0, 0.0}), std::runtime_error);
  expect_clean_tapes();
  EXPECT_EQ(ad::gradient(f, {0.5, 0.5})[0], 0.5);  // and the tape works afterwards
}

}  // namespace
