#pragma once
/// \file
/// ode::EquationModel — a model whose right-hand side is typed as equations
/// (from an input file), one expression per state:
///     x' = "a*x - b*x*y",   y' = "-c*y + d*x*y"
/// The expressions may use t, the states and the parameters; they are parsed
/// once (expr::Program) and evaluated on any scalar type, so the model works
/// with every integrator and sensitivity method exactly like a compiled one.
///
/// A model may also have intermediates w_k (an imported SBML model's
/// assignment rules and reaction rates): evaluated in order before the
/// equations, each from t, y, p and w_0 … w_{k−1}; the equations may use them
/// all. Variables are then t, states, parameters, intermediates.

#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/expr/program.hpp"

namespace costate::ode {

class EquationModel {
 public:
  EquationModel() = default;
  /// `equations[i]` is the right-hand side of states[i]. `context` prefixes
  /// error messages (e.g. "model.equations"); each equation's own context is
  /// context + "." + state name.
  EquationModel(std::vector<std::string> states, std::vector<std::string> parameters,
                const std::vector<std::string>& equations, const std::string& context = "model.equations");

  /// From compiled programs (e.g. built from trees, expr::Program::build):
  /// `intermediates[k]` may use variables 0 … 1 + n_y + n_p + k − 1 (t, y, p,
  /// earlier intermediates), `equations[i]` (the right-hand side of
  /// states[i]) all of t, y, p, w.
  EquationModel(std::vector<std::string> states, std::vector<std::string> parameters,
                std::vector<std::string> intermediate_names,
                std::vector<expr::Program> intermediates, std::vector<expr::Program> equations,
                const std::string& context = "model");

  /// The variables an expression of this model may use: t, states,
  /// parameters (then the intermediates, if any).
  const std::vector<std::string>& variables() const { return variables_; }
  const std::vector<std::string>& states() const { return states_; }
  const std::vector<std::string>& parameters() const { return parameters_; }
  const expr::Program& equation(std::size_t i) const { return equations_[i]; }
  const std::vector<std::string>& intermediate_names() const { return intermediate_names_; }
  const expr::Program& intermediate(std::size_t k) const { return intermediates_[k]; }

  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    if (!intermediates_.empty()) return rhs_with_intermediates(t, y, p, dydt);
    const expr::VariableFrame<T> frame(t, y, p);
    const std::span<const T> v = frame.values();
    for (std::size_t i = 0; i < equations_.size(); ++i) dydt[i] = equations_[i].evaluate(v);
  }

 private:
  template <class T>
  void rhs_with_intermediates(double t, std::span<const T> y, std::span<const T> p,
                              std::span<T> dydt) const {
    const std::size_t base = 1 + y.size() + p.size();
    std::vector<T> v(base + intermediates_.size());
    v[0] = T(t);
    std::copy(y.begin(), y.end(), v.begin() + 1);
    std::copy(p.begin(), p.end(), v.begin() + 1 + static_cast<std::ptrdiff_t>(y.size()));
    for (std::size_t k = 0; k < intermediates_.size(); ++k)
      v[base + k] = intermediates_[k].evaluate(std::span<const T>(v.data(), base + k));
    const std::span<const T> all(v);
    for (std::size_t i = 0; i < equations_.size(); ++i) dydt[i] = equations_[i].evaluate(all);
  }

  std::vector<std::string> states_, parameters_, variables_, intermediate_names_;
  std::vector<expr::Program> intermediates_;
  std::vector<expr::Program> equations_;
};

}  // namespace costate::ode
