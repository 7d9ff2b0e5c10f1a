#include "costate/ode/models.hpp"

namespace costate::ode {

const std::vector<ModelInfo>& builtin_models() {
  static const std::vector<ModelInfo> models{
      {"lotka_volterra", "predator-prey: x' = alpha x - beta x y, y' = delta x y - gamma y",
       {"x", "y"}, {"alpha", "beta", "gamma", "delta"}, {1.5, 1.0, 3.0, 1.0}, {1.0, 1.0}},
      {"van_der_pol", "relaxation oscillator: x' = v, v' = mu (1 - x^2) v - x",
       {"x", "v"}, {"mu"}, {1.0}, {2.0, 0.0}},
      {"fitzhugh_nagumo", "neuron: v' = v - v^3/3 - w + I, w' = (v + a - b w)/tau",
       {"v", "w"}, {"a", "b", "tau", "I"}, {0.7, 0.8, 12.5, 0.5}, {-1.0, 1.0}},
      {"lorenz", "chaotic convection: x' = sigma (y - x), y' = x (rho - z) - y, z' = x y - beta z",
       {"x", "y", "z"}, {"sigma", "rho", "beta"}, {10.0, 28.0, 8.0 / 3.0}, {1.0, 1.0, 1.0}},
      {"robertson",
       "stiff kinetics: y1' = -k1 y1 + k2 y2 y3, y2' = k1 y1 - k2 y2 y3 - k3 y2^2, y3' = k3 y2^2",
       {"y1", "y2", "y3"}, {"k1", "k2", "k3"}, {0.04, 1.0e4, 3.0e7}, {1.0, 0.0, 0.0}},
  };
  return models;
}

const ModelInfo& builtin_model(std::string_view name) {
  std::string valid;
  for (const auto& m : builtin_models()) {
    if (m.name == name) return m;
    valid += (valid.empty() ? "" : ", ") + m.name;
  }
  throw Error("unknown model '" + std::string(name) + "'; built-in models: " + valid);
}

}  // namespace costate::ode
