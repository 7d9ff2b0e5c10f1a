#pragma once
/// \file
/// Built-in ODE models, each templated on the scalar type, and the registry
/// the command line uses to find them by name.
///
/// | name             | states        | parameters (defaults)                       |
/// |------------------|---------------|---------------------------------------------|
/// | lotka_volterra   | x, y          | alpha 1.5, beta 1, gamma 3, delta 1         |
/// | van_der_pol      | x, v          | mu 1                                        |
/// | fitzhugh_nagumo  | v, w          | a 0.7, b 0.8, tau 12.5, I 0.5               |
/// | lorenz           | x, y, z       | sigma 10, rho 28, beta 8/3                  |
/// | robertson        | y1, y2, y3    | k1 0.04, k2 1e4, k3 3e7                     |

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::ode {

/// Predator–prey:  x' = α x − β x y,   y' = δ x y − γ y.
struct LotkaVolterra {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = p[0] * y[0] - p[1] * y[0] * y[1];
    dydt[1] = p[3] * y[0] * y[1] - p[2] * y[1];
  }
};

/// Van der Pol oscillator:  x' = v,   v' = μ (1 − x²) v − x  (stiff for large μ).
struct VanDerPol {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = y[1];
    dydt[1] = p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0];
  }
};

/// FitzHugh–Nagumo neuron:  v' = v − v³/3 − w + I,   w' = (v + a − b w)/τ.
struct FitzHughNagumo {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = y[0] - y[0] * y[0] * y[0] / 3.0 - y[1] + p[3];
    dydt[1] = (y[0] + p[0] - p[1] * y[1]) / p[2];
  }
};

/// Lorenz system:  x' = σ (y − x),  y' = x (ρ − z) − y,  z' = x y − β z.
struct Lorenz {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = p[0] * (y[1] - y[0]);
    dydt[1] = y[0] * (p[1] - y[2]) - y[1];
    dydt[2] = y[0] * y[1] - p[2] * y[2];
  }
};

/// Robertson's stiff chemical kinetics:
///   y1' = −k1 y1 + k2 y2 y3,  y2' = k1 y1 − k2 y2 y3 − k3 y2²,  y3' = k3 y2².
struct Robertson {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = -p[0] * y[0] + p[1] * y[1] * y[2];
    dydt[1] = p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1];
    dydt[2] = p[2] * y[1] * y[1];
  }
};

/// The 1-D Brusselator by the method of lines (Hairer & Wanner, Solving ODEs
/// II, §IV.1): N interior points x_i = i/(N+1) of [0, 1], states
/// interleaved y = (u_1, v_1, …, u_N, v_N), p = (A, B, α) (classically
/// 1, 3, 1/50), Dirichlet u = 1, v = 3 at both ends:
///   u_i' = A + u_i² v_i − (B + 1) u_i + α (N+1)² (u_{i−1} − 2u_i + u_{i+1}),
///   v_i' = B u_i − u_i² v_i            + α (N+1)² (v_{i−1} − 2v_i + v_{i+1}).
/// Its Jacobian is banded (2 sub- and 2 super-diagonals) and stiffer as N
/// grows. A library model for large sparse systems (the CVODES band/sparse
/// linear solvers, benchmarks); not in the command-line registry (its
/// state count is the caller's N).
struct Brusselator1D {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t n = y.size() / 2;
    const double h1 = static_cast<double>(n + 1);
    const T c = p[2] * (h1 * h1);
    for (std::size_t i = 0; i < n; ++i) {
      const T& u = y[2 * i];
      const T& v = y[2 * i + 1];
      const T ul = i > 0 ? y[2 * i - 2] : T(1.0), ur = i + 1 < n ? y[2 * i + 2] : T(1.0);
      const T vl = i > 0 ? y[2 * i - 1] : T(3.0), vr = i + 1 < n ? y[2 * i + 3] : T(3.0);
      const T uuv = u * u * v;
      dydt[2 * i] = p[0] + uuv - (p[1] + 1.0) * u + c * (ul - 2.0 * u + ur);
      dydt[2 * i + 1] = p[1] * u - uuv + c * (vl - 2.0 * v + vr);
    }
  }
  /// The classical initial state u = 1 + sin(2π x_i), v = 3 (2N values).
  static std::vector<double> initial_state(std::size_t points) {
    std::vector<double> y(2 * points);
    for (std::size_t i = 0; i < points; ++i) {
      const double x = static_cast<double>(i + 1) / static_cast<double>(points + 1);
      y[2 * i] = 1.0 + std::sin(2.0 * 3.14159265358979323846 * x);
      y[2 * i + 1] = 3.0;
    }
    return y;
  }
};

/// What the command line needs to know about a built-in model.
struct ModelInfo {
  std::string name;
  std::string description;
  std::vector<std::string> state_names;
  std::vector<std::string> parameter_names;
  std::vector<double> default_parameters;
  std::vector<double> default_initial_state;
};

/// Every built-in model, in a fixed order.
const std::vector<ModelInfo>& builtin_models();
/// The named model's info; the error lists the valid names.
const ModelInfo& builtin_model(std::string_view name);

/// Calls `f(Model{})` with the built-in model type named `name`, keeping the
/// model's templated rhs available to f (so AD types work through it).
template <class F>
decltype(auto) visit_builtin_model(std::string_view name, F&& f) {
  if (name == "lotka_volterra") return f(LotkaVolterra{});
  if (name == "van_der_pol") return f(VanDerPol{});
  if (name == "fitzhugh_nagumo") return f(FitzHughNagumo{});
  if (name == "lorenz") return f(Lorenz{});
  if (name == "robertson") return f(Robertson{});
  (void)builtin_model(name);  // throws with the list of valid names
  throw Error("unreachable: model registry out of sync for '" + std::string(name) + "'");
}

}  // namespace costate::ode
