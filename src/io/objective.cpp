#include "costate/io/objective.hpp"

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"

namespace costate::io {

ExpressionObjective::ExpressionObjective(const RunConfig& cfg)
    : t1_(cfg.t_end), n_(cfg.state_names.size()) {
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.state_names.begin(), cfg.state_names.end());
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  const ObjectiveConfig& oc = cfg.objective;
  if (!oc.terminal.empty()) terminal_ = expr::Program::compile(oc.terminal, vars, "objective.terminal");
  if (!oc.integral.empty()) integral_ = expr::Program::compile(oc.integral, vars, "objective.integral");
  times_ = oc.data_times;
  data_ = oc.data;
  weights_ = oc.weights;
}

std::vector<double> initial_state_parameter_vjp(const RunConfig& cfg,
                                                std::span<const double> lambda0) {
  std::vector<double> out(cfg.parameters.size(), 0.0);
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  ad::Tape tape;
  ad::Tape::Scope scope(tape);
  for (std::size_t i = 0; i < cfg.initial_state_expressions.size(); ++i) {
    const std::string& e = cfg.initial_state_expressions[i];
    if (e.empty() || lambda0[i] == 0.0) continue;
    const auto prog = expr::Program::compile(e, vars, "initial_state." + cfg.state_names[i]);
    tape.reset();
    tape.start_recording();
    std::vector<ad::Real> v{ad::Real(cfg.t_start)};
    for (double pj : cfg.parameters) v.emplace_back(pj);
    for (std::size_t j = 1; j < v.size(); ++j) tape.register_input(v[j]);
    ad::Real y0 = prog.evaluate(std::span<const ad::Real>(v));
    tape.register_output(y0);
    tape.stop_recording();
    y0.set_gradient(lambda0[i]);
    tape.evaluate();
    for (std::size_t j = 0; j < out.size(); ++j) out[j] += v[j + 1].gradient();
  }
  return out;
}

}  // namespace costate::io

// ------------------------------------------- second order (sensitivity --hessian)

namespace costate::io {

std::vector<double> initial_state_parameter_jvp(const RunConfig& cfg, std::span<const double> v) {
  using D = ad::Dual<double, 1>;
  std::vector<double> out(cfg.initial_state.size(), 0.0);
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  std::vector<D> x{D(cfg.t_start)};
  for (std::size_t j = 0; j < cfg.parameters.size(); ++j) x.push_back(D(cfg.parameters[j], {v[j]}));
  for (std::size_t i = 0; i < cfg.initial_state_expressions.size(); ++i) {
    const std::string& e = cfg.initial_state_expressions[i];
    if (e.empty()) continue;
    const auto prog = expr::Program::compile(e, vars, "initial_state." + cfg.state_names[i]);
    out[i] = prog.evaluate(std::span<const D>(x)).tangent(0);
  }
  return out;
}

std::vector<double> initial_state_parameter_hvp(const RunConfig& cfg, std::span<const double> v,
                                                std::span<const double> lambda0,
                                                std::span<const double> lambda0_dot) {
  using D = ad::Dual<double, 1>;
  using R = ad::Reverse<D>;
  std::vector<double> out(cfg.parameters.size(), 0.0);
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  ad::BasicTape<D> tape;
  ad::BasicTape<D>::Scope scope(tape);
  for (std::size_t i = 0; i < cfg.initial_state_expressions.size(); ++i) {
    const std::string& e = cfg.initial_state_expressions[i];
    if (e.empty() || (lambda0[i] == 0.0 && lambda0_dot[i] == 0.0)) continue;
    const auto prog = expr::Program::compile(e, vars, "initial_state." + cfg.state_names[i]);
    tape.reset();
    tape.start_recording();
    std::vector<R> x{R(D(cfg.t_start))};
    for (std::size_t j = 0; j < cfg.parameters.size(); ++j) x.emplace_back(D(cfg.parameters[j], {v[j]}));
    for (std::size_t j = 1; j < x.size(); ++j) tape.register_input(x[j]);
    R y0 = prog.evaluate(std::span<const R>(x));
    tape.register_output(y0);
    tape.stop_recording();
    y0.set_gradient(D(lambda0[i], {lambda0_dot[i]}));
    tape.evaluate();
    for (std::size_t j = 0; j < out.size(); ++j) out[j] += x[j + 1].gradient().tangent(0);
  }
  return out;
}

}  // namespace costate::io
