#pragma once
// The cross-method matrix's fixtures (tests/ode/cross_method_test.cpp): three
// models behind one model type and three functionals behind one objective
// type, chosen at run time, so that the test instantiates the per-model
// templates (make_system, ode::gradient, sensitivity_matrix) once for all of
// them — the compiled schemes and sweeps do the rest.
//
// Models (MatrixModel::Kind):
//   - LotkaVolterra: y' = (α x − β x y, δ x y − γ y), p = (1.5, 1, 3, 1),
//     y0 = (1, 1) on [0, 5] (non-stiff);
//   - VanDerPol: x' = y, y' = μ (1 − x²) y − x with μ = 100 from (2, 0) on
//     [0, 1] (stiff: f_y's fast eigenvalue ≈ −μ(x² − 1) ≈ −300);
//   - FisherKpp: the method of lines for u_t = D u_xx + r u (1 − u) on (0, 1),
//     u(0) = b, u(1) = 0, on 50 interior points (h = 1/51), p = (D, r, b) =
//     (0.05, 1, 0.2), u0 = 0.5 + 0.4 sin(π x) on [0, 0.5] (stiffness 4D/h²
//     ≈ 520; a tridiagonal f_y: the System's coloured sparse Jacobian).
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/models.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/sensitivity_matrix.hpp"

namespace costate::test {

struct MatrixModel {
  enum class Kind { LotkaVolterra, VanDerPol, FisherKpp };
  Kind kind = Kind::LotkaVolterra;

  static constexpr std::size_t kMolPoints = 50;

  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    switch (kind) {
      case Kind::LotkaVolterra: ode::LotkaVolterra{}.rhs<T>(t, y, p, dydt); return;
      case Kind::VanDerPol: ode::VanDerPol{}.rhs<T>(t, y, p, dydt); return;
      case Kind::FisherKpp: fisher_kpp(y, p, dydt); return;
    }
  }

 private:
  template <class T>
  static void fisher_kpp(std::span<const T> u, std::span<const T> p, std::span<T> dudt) {
    const std::size_t n = u.size();
    const double inv_h2 = static_cast<double>((n + 1) * (n + 1));
    for (std::size_t i = 0; i < n; ++i) {
      const T left = i > 0 ? u[i - 1] : p[2];
      const T right = i + 1 < n ? u[i + 1] : T(0.0);
      dudt[i] = p[0] * inv_h2 * (left - 2.0 * u[i] + right) + p[1] * u[i] * (1.0 - u[i]);
    }
  }
};

inline std::string to_string(MatrixModel::Kind k) {
  switch (k) {
    case MatrixModel::Kind::LotkaVolterra: return "lotka_volterra";
    case MatrixModel::Kind::VanDerPol: return "van_der_pol_mu100";
    case MatrixModel::Kind::FisherKpp: return "fisher_kpp_mol50";
  }
  return "?";
}

inline ode::Problem<MatrixModel> matrix_problem(MatrixModel::Kind k) {
  using K = MatrixModel::Kind;
  switch (k) {
    case K::LotkaVolterra:
      return {MatrixModel{k}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 5.0}};
    case K::VanDerPol: return {MatrixModel{k}, {2.0, 0.0}, {100.0}, {0.0, 1.0}};
    case K::FisherKpp: {
      const std::size_t n = MatrixModel::kMolPoints;
      std::vector<double> u0(n);
      for (std::size_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(i + 1) / static_cast<double>(n + 1);
        u0[i] = 0.5 + 0.4 * std::sin(3.14159265358979323846 * x);
      }
      return {MatrixModel{k}, u0, {0.05, 1.0, 0.2}, {0.0, 0.5}};
    }
  }
  return {};
}

/// Which term a MatrixFunctional has (the others are absent or zero).
enum class FunctionalKind { Terminal, Integral, Observations };

inline std::string to_string(FunctionalKind k) {
  switch (k) {
    case FunctionalKind::Terminal: return "terminal";
    case FunctionalKind::Integral: return "integral";
    case FunctionalKind::Observations: return "observations";
  }
  return "?";
}

/// One objective type for the three functionals, each depending on p so that
/// ∂g/∂p, q_p and the λ jumps all enter (m the mean over the states):
///   terminal:      g = ½ m(y(t1)²) + 0.3 p_0 y_0(t1)
///   integral:      ∫ ½ m(y²) (1 + 0.1 t) + 0.05 p_0² y_0 dt
///   observations:  Σ_k ½ Σ_i (y_i(t_k) − d_ki)²  at five times in (t0, t1]
///                  (ode::WeightedObservations, weights 1: the calibration's
///                  residuals are its r_ki).
/// The running cost is always present (so z is always in the state) and
/// zero unless `kind` is Integral; observation_times() is empty unless
/// Observations.
struct MatrixFunctional {
  FunctionalKind kind = FunctionalKind::Terminal;
  ode::WeightedObservations obs;

  std::vector<double> observation_times() const { return obs.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return obs.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    if (kind != FunctionalKind::Terminal) return T(0.0);
    return T(0.5 * mean_square(y) + 0.3 * p[0] * y[0]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    if (kind != FunctionalKind::Integral) return T(0.0);
    return T(0.5 * mean_square(y) * (1.0 + 0.1 * t) + 0.05 * p[0] * p[0] * y[0]);
  }

 private:
  template <class T>
  static T mean_square(std::span<const T> y) {
    T s = T(0.0);
    for (const T& v : y) s += v * v;
    return T(s / static_cast<double>(y.size()));
  }
};

/// The functional `kind` on `problem` (observation data: a smooth made-up
/// signal, so residuals are O(1)).
inline MatrixFunctional matrix_functional(FunctionalKind kind,
                                          const ode::Problem<MatrixModel>& problem) {
  MatrixFunctional f;
  f.kind = kind;
  if (kind != FunctionalKind::Observations) return f;
  const std::size_t n = problem.n_states();
  const double t0 = problem.t0(), t1 = problem.t1();
  f.obs.n_states = n;
  constexpr int kTimes = 5;
  for (int k = 1; k <= kTimes; ++k) {
    const double t = t0 + (t1 - t0) * k / kTimes;
    f.obs.times.push_back(t);
    for (std::size_t i = 0; i < n; ++i) {
      f.obs.data.push_back(0.5 + 0.3 * std::sin(1.7 * t + 0.1 * static_cast<double>(i)));
      f.obs.weights.push_back(1.0);
    }
  }
  return f;
}

}  // namespace costate::test
