#pragma once
// The objective of an input file: terminal and integral expressions and a
// least-squares misfit against CSV data (io::ObjectiveConfig), as an object
// with the templated members ode::gradient expects. The initial state's
// dependence on the parameters (expressions) enters through
// initial_state_parameter_vjp.

#include <span>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/io/input.hpp"

namespace costate::io {

class ExpressionObjective {
 public:
  explicit ExpressionObjective(const RunConfig& cfg);

  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    if (terminal_.empty()) return T(0.0);
    return terminal_.evaluate(expr::VariableFrame<T>(t1_, y, p).values());
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    if (integral_.empty()) return T(0.0);
    return integral_.evaluate(expr::VariableFrame<T>(t, y, p).values());
  }
  std::vector<double> observation_times() const { return times_; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T>) const {
    T sum = 0.0;
    for (std::size_t i = 0; i < n_; ++i) {
      const double d = data_[k * n_ + i];
      if (d != d) continue;  // missing
      T r = y[i] - d;
      sum = T(sum + 0.5 * weights_[i] * r * r);
    }
    return sum;
  }

 private:
  expr::Program terminal_, integral_;
  double t1_ = 0.0;
  std::size_t n_ = 0;
  std::vector<double> times_, data_, weights_;
};

/// (∂y0/∂p)ᵀ λ0 for initial values given as expressions of the parameters
/// (zero for numeric ones).
std::vector<double> initial_state_parameter_vjp(const RunConfig& cfg, std::span<const double> lambda0);

/// (∂y0/∂p) v for initial values given as expressions (zero for numeric
/// ones): the initial-state part of a Hessian–vector product's direction.
std::vector<double> initial_state_parameter_jvp(const RunConfig& cfg, std::span<const double> v);

/// The ε-part of (∂y0/∂p)(p + εv)ᵀ (λ0 + ε λ̇0), i.e.
/// (∂y0/∂p)ᵀ λ̇0 + Σ_i λ0_i ∇²y0_i(p) v: what the initial state's dependence
/// on the parameters adds to H v (forward over reverse on the expressions).
std::vector<double> initial_state_parameter_hvp(const RunConfig& cfg, std::span<const double> v,
                                                std::span<const double> lambda0,
                                                std::span<const double> lambda0_dot);

}  // namespace costate::io
