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
