#pragma once
/// \file
/// ode::EquationModel — a model whose right-hand side is typed as equations
/// (from an input file), one expression per state:
///     x' = "a*x - b*x*y",   y' = "-c*y + d*x*y"
/// The expressions may use t, the states and the parameters; they are parsed
/// once (expr::Program) and evaluated on any scalar type, so the model works
/// with every integrator and sensitivity method exactly like a compiled one.

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

  /// The variables an expression of this model may use: t, states, parameters.
  const std::vector<std::string>& variables() const { return variables_; }
  const std::vector<std::string>& states() const { return states_; }
  const std::vector<std::string>& parameters() const { return parameters_; }
  const expr::Program& equation(std::size_t i) const { return equations_[i]; }

  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const expr::VariableFrame<T> frame(t, y, p);
    const std::span<const T> v = frame.values();
    for (std::size_t i = 0; i < equations_.size(); ++i) dydt[i] = equations_[i].evaluate(v);
  }

 private:
  std::vector<std::string> states_, parameters_, variables_;
  std::vector<expr::Program> equations_;
};

}  // namespace costate::ode
