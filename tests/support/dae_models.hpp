#pragma once
// DAE models and objectives shared by tests/ode/dae_test.cpp, idas_test.cpp
// and bench/bench_dae.cpp, bench_idas_dae.cpp (issue 32; the benches have
// tests/ on their include path): semi-explicit
// index-1 models (rhs rows f, then g for the algebraic states), fully
// implicit ones (residual F(t, y, y', p), ode::ResidualForm), the bad
// inputs the refusals are tested on, and the objectives.

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "costate/ode/models.hpp"
#include "costate/ode/objective.hpp"
#include "costate/ode/problem.hpp"

namespace costate::test::dae {

// ---------------------------------------------------------------- semi-explicit

/// x' = −p0 x,  0 = z − p1 x²: x = x0 e^{−p0 t}, z = p1 x0² e^{−2 p0 t}.
struct ClosedFormDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0];
    f[1] = y[1] - p[1] * y[0] * y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// AlgebraicCost's J = z(T) + ∫₀^T z dt on ClosedFormDae from (x0, ·) and
/// its exact gradient:
///   J = p1 x0² e^{−2p0T} + p1 x0² (1 − e^{−2p0T}) / (2p0).
struct ClosedFormGradient {
  double J, dJ_dp0, dJ_dp1, dJ_dx0;
};
inline ClosedFormGradient closed_form_gradient(double x0, double p0, double p1, double T) {
  const double e = std::exp(-2.0 * p0 * T);
  return {.J = p1 * x0 * x0 * (e + (1.0 - e) / (2.0 * p0)),
          .dJ_dp0 = p1 * x0 * x0 *
                    (-2.0 * T * e + (2.0 * T * e) / (2.0 * p0) - (1.0 - e) / (2.0 * p0 * p0)),
          .dJ_dp1 = x0 * x0 * (e + (1.0 - e) / (2.0 * p0)),
          .dJ_dx0 = 2.0 * p1 * x0 * (e + (1.0 - e) / (2.0 * p0))};
}

/// A nonlinear, coupled index-1 DAE (z enters f and g_z depends on z):
///   x0' = −p0 x0 + 0.3 z,  x1' = x0 − p1 x1 z,  0 = z³ + z − p2 x0 x1 − 1.
struct CoupledDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0] + 0.3 * y[2];
    f[1] = y[0] - p[1] * y[1] * y[2];
    f[2] = y[2] * y[2] * y[2] + y[2] - p[2] * y[0] * y[1] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {2}; }
};

/// Robertson as a semi-explicit DAE (SUNDIALS' idasRoberts): y1, y2
/// differential, y3 algebraic,
///   y1' = −k1 y1 + k2 y2 y3,  y2' = k1 y1 − k2 y2 y3 − k3 y2²,  0 = y1 + y2 + y3 − 1.
struct RobertsonDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = -p[0] * y[0] + p[1] * y[1] * y[2];
    f[1] = p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1];
    f[2] = y[0] + y[1] + y[2] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {2}; }
};

/// Robertson's rate constants (idasRoberts).
inline constexpr double kRobertsonK[3] = {0.04, 1e4, 3e7};

/// The Akzo Nobel problem (Test Set for IVP solvers, "chemakzo";
/// idasAkzoNob_ASAi_dns): 5 differential concentrations and y6 = Ks y1 y4.
struct AkzoNobel {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T>, std::span<T> f) const {
    using std::sqrt;
    const double k1 = 18.7, k2 = 0.58, k3 = 0.09, k4 = 0.42, K = 34.4, klA = 3.3, Ks = 115.83,
                 pCO2 = 0.9, H = 737.0;
    const T r1 = k1 * y[0] * y[0] * y[0] * y[0] * sqrt(y[1]);
    const T r2 = k2 * y[2] * y[3];
    const T r3 = (k2 / K) * y[0] * y[4];
    const T r4 = k3 * y[0] * y[3] * y[3];
    const T r5 = k4 * y[5] * y[5] * sqrt(y[1]);
    const T Fin = klA * (pCO2 / H - y[1]);
    f[0] = -2.0 * r1 + r2 - r3 - r4;
    f[1] = -0.5 * r1 - r4 - 0.5 * r5 + Fin;
    f[2] = r1 - r2 + r3;
    f[3] = -r2 + r3 - 2.0 * r4;
    f[4] = r2 - r3 + r5;
    f[5] = Ks * y[0] * y[3] - y[5];
  }
  std::vector<std::size_t> algebraic_states() const { return {5}; }
};

/// idasAkzoNob_ASAi_dns' problem: y0 = (0.444, 0.00123, 0, 0.007, 0,
/// Ks y1 y4) on [0, 180], and its published G = ∫ y1 dt and dG/dy0.
inline ode::Problem<AkzoNobel> akzo_nobel() {
  const double y1 = 0.444, y4 = 0.007;
  return {AkzoNobel{}, {y1, 0.00123, 0.0, y4, 0.0, 115.83 * y1 * y4}, {}, {0.0, 180.0}};
}
inline constexpr double kAkzoNobelObjective = 31.2642162580310945;
inline constexpr double kAkzoNobelGradient[5] = {22.207, -62.695, -2.5114, 91.837, 3.5176};

/// Index 2: x' = p0 z, 0 = x − 1 (g does not depend on z: g_z = 0).
struct IndexTwoDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    f[0] = p[0] * y[1];
    f[1] = y[0] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// x' = −x, 0 = e^z + x: no real z for x > 0 (g_z = e^z is nonsingular, so
/// the index check passes and the consistent initialisation must fail).
struct UnsolvableDae {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T>, std::span<T> f) const {
    using std::exp;
    f[0] = -y[0];
    f[1] = exp(y[1]) + y[0];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// The method-of-lines DAE of bench_dae: y = (u_0 … u_{N−1}, v_0 … v_{N−1}),
/// p = (D, k, s), u_t = D u_xx − k u v (Neumann ends), 0 = v (1 + u) − s.
struct QuasiSteadyDiffusion {
  std::size_t n = 50;
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> f) const {
    const double dx = 1.0 / static_cast<double>(n), c = 1.0 / (dx * dx);
    for (std::size_t i = 0; i < n; ++i) {
      const T& ul = y[i == 0 ? 1 : i - 1];
      const T& ur = y[i + 1 == n ? n - 2 : i + 1];
      f[i] = p[0] * c * (ul - 2.0 * y[i] + ur) - p[1] * y[i] * y[n + i];
      f[n + i] = y[n + i] * (1.0 + y[i]) - p[2];
    }
  }
  std::vector<std::size_t> algebraic_states() const {
    std::vector<std::size_t> z(n);
    for (std::size_t i = 0; i < n; ++i) z[i] = n + i;
    return z;
  }
};

// ---------------------------------------------------------------- fully implicit
// (ode::ResidualForm: state (y, y'), residual_dae.hpp)

/// ClosedFormDae written fully implicitly with a state-dependent mass-like
/// coupling: with r = x' + p0 x and c = z − p1 x²,
///   F0 = (1 + z²) r + c,   F1 = x r − 2 c.
/// Both rows read x' (no row is the constraint: not reducible by row
/// selection), F_{y'} = [[1 + z², 0], [x, 0]] has rank 1 and z is
/// algebraic; the mixing matrix [[1 + z², 1], [x, −2]] is nonsingular for
/// x > 0, so F = 0 ⟺ r = c = 0: the same closed form.
struct ImplicitClosedForm {
  template <class T>
  void residual(double, std::span<const T> y, std::span<const T> yp, std::span<const T> p,
                std::span<T> F) const {
    const T r = yp[0] + p[0] * y[0], c = y[1] - p[1] * y[0] * y[0];
    F[0] = (1.0 + y[1] * y[1]) * r + c;
    F[1] = y[0] * r - 2.0 * c;
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// CoupledDae's residuals r = (x0' − f0, x1' − f1, g) mixed by the
/// state-dependent T(y) = I + 0.2 [[0, z, 1], [1, 0, x0], [x1, 1, 0]]
/// (diagonally dominant on the trajectory, x and z of order 1):
/// F = T(y) r. Every row reads some derivative and the constraint g is in
/// all of them; F = 0 ⟺ r = 0, so on one step plan every scheme's discrete
/// solution is CoupledDae's (to Newton's tolerance).
struct ImplicitCoupled {
  template <class T>
  void residual(double t, std::span<const T> y, std::span<const T> yp, std::span<const T> p,
                std::span<T> F) const {
    T f[3];
    CoupledDae{}.rhs<T>(t, y, p, std::span<T>(f, 3));
    const T r0 = yp[0] - f[0], r1 = yp[1] - f[1], r2 = f[2];
    F[0] = r0 + 0.2 * (y[2] * r1 + r2);
    F[1] = r1 + 0.2 * (r0 + y[0] * r2);
    F[2] = r2 + 0.2 * (y[1] * r0 + r1);
  }
  std::vector<std::size_t> algebraic_states() const { return {2}; }
};

/// Robertson written fully implicitly, as a user would for IDA:
///   F = (y1' + k1 y1 − k2 y2 y3, y2' − k1 y1 + k2 y2 y3 + k3 y2², y1 + y2 + y3 − 1),
/// y3 algebraic (F does not read y3').
struct RobertsonResidual {
  template <class T>
  void residual(double, std::span<const T> y, std::span<const T> yp, std::span<const T> p,
                std::span<T> F) const {
    F[0] = yp[0] + p[0] * y[0] - p[1] * y[1] * y[2];
    F[1] = yp[1] - p[0] * y[0] + p[1] * y[1] * y[2] + p[2] * y[1] * y[1];
    F[2] = y[0] + y[1] + y[2] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {2}; }
};

/// Index 2 in residual form: F = (x' − p0 z, x − 1), z algebraic:
/// [F_{x'} | F_z] = [[1, −p0], [0, 0]] is singular.
struct ImplicitIndexTwo {
  template <class T>
  void residual(double, std::span<const T> y, std::span<const T> yp, std::span<const T> p,
                std::span<T> F) const {
    F[0] = yp[0] - p[0] * y[1];
    F[1] = y[0] - 1.0;
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

/// A wrong declaration: F reads z' although z is listed as algebraic.
struct ImplicitReadsAlgebraicDerivative {
  template <class T>
  void residual(double, std::span<const T> y, std::span<const T> yp, std::span<const T> p,
                std::span<T> F) const {
    F[0] = yp[0] + p[0] * y[0];
    F[1] = y[1] - y[0] + 0.5 * yp[1];
  }
  std::vector<std::size_t> algebraic_states() const { return {1}; }
};

// ---------------------------------------------------------------- objectives

/// J = z(t1) + ∫ z dt (terminal and running cost on state 1).
struct AlgebraicCost {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[1];
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[1];
  }
};

/// Every kind of term on a DAE: least-squares observations of the first
/// ls.n_states states (one at t0, where z0 = z(x0, p) is differentiated
/// through the constraint), z(t1) and ∫ x0 z dt, z = state `z`. The
/// defaults: ClosedFormDae's two states.
struct MixedTerms {
  ode::LeastSquares ls{.times = {0.0, 1.0, 2.5},
                       .data = {1.0, 4.0, 0.6, 0.9, 0.3, 0.2},
                       .n_states = 2};
  std::size_t z = 1;
  std::vector<double> observation_times() const { return ls.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return ls.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[z];
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[0] * y[z];
  }
};

/// MixedTerms on CoupledDae's three states (z = state 2).
inline MixedTerms coupled_terms() {
  return {.ls = {.times = {0.0, 0.5, 2.0},
                 .data = {1.0, 0.5, 1.0, 0.9, 0.7, 0.8, 0.4, 1.1, 0.9},
                 .n_states = 3},
          .z = 2};
}

/// G = ∫ y1 dt (idasAkzoNob_ASAi_dns).
struct IntegralOfY1 {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

/// G = ∫ y3 dt (idasRoberts_ASAi_dns).
struct IntegralOfY3 {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[2];
  }
};

/// bench_dae's MOL objective with a terminal term only: mean(u v)(t1). (A
/// running cost adds a quadrature row that reads every state, which no
/// colouring compresses: the System then forms Jacobians on its tape.)
struct MolTerminalCost {
  std::size_t n = 50;
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s = T(s + y[i] * y[n + i]);
    return T(s / static_cast<double>(n));
  }
};

/// bench_dae's MOL objective: ∫ mean(u v) dt.
struct MolCost {
  std::size_t n = 50;
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s = T(s + y[i] * y[n + i]);
    return T(s / static_cast<double>(n));
  }
};

}  // namespace costate::test::dae
