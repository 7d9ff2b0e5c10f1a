// Multi-condition input files: each condition's problem and the sums over
// the conditions (see include/costate/io/conditions.hpp).
#include "costate/io/conditions.hpp"

#include <algorithm>
#include <cmath>

#include "costate/core/error.hpp"

namespace costate::io {

std::size_t condition_count(const RunConfig& cfg) {
  return cfg.conditions.empty() ? 1 : cfg.conditions.size();
}

RunConfig condition_config(const RunConfig& cfg, std::size_t c) {
  if (cfg.conditions.empty()) {
    COSTATE_CHECK(c == 0, cfg.input_path << ": has no conditions; condition " << c << " asked for");
    return cfg;
  }
  COSTATE_CHECK(c < cfg.conditions.size(),
                cfg.input_path << ": condition " << c << " asked for, the file has " << cfg.conditions.size());
  const ConditionConfig& cond = cfg.conditions[c];
  RunConfig r = cfg;
  r.conditions.clear();
  r.conditions_file.clear();
  for (std::size_t k = 0; k < r.parameters.size(); ++k)
    r.parameters[k] = cond.parameter_source[k] < 0 ? cond.parameter_values[k]
                                                   : cfg.parameters[static_cast<std::size_t>(cond.parameter_source[k])];
  for (std::size_t i = 0; i < cond.initial_state.size(); ++i)
    if (!cond.initial_state[i].empty()) r.initial_state_expressions[i] = cond.initial_state[i];
  evaluate_initial_state(r);
  // The condition's data is the objective's misfit (sensitivity) and the
  // calibration's data.
  const std::size_t n = r.state_names.size();
  r.objective.present = true;
  r.objective.data_file = cond.data_file;
  r.objective.data_times = cond.times;
  r.objective.data = cond.data;
  r.objective.weights = cond.weights;
  if (r.calibration.present) {
    CalibrationConfig& cc = r.calibration;
    cc.data_files = {cond.data_file};
    cc.times = cond.times;
    cc.data = cond.data;
    cc.weights.assign(cond.data.size(), 0.0);
    for (std::size_t k = 0; k < cond.data.size(); ++k)
      if (!std::isnan(cond.data[k])) cc.weights[k] = cond.weights[k % n];
    cc.noise_given = cond.noise_given;
  }
  return r;
}

void add_condition_gradient(const RunConfig& cfg, std::size_t c, std::span<const double> gp,
                            std::span<const double> gy, std::span<double> file_gp, std::span<double> file_gy) {
  if (cfg.conditions.empty()) {
    for (std::size_t k = 0; k < gp.size(); ++k) file_gp[k] += gp[k];
    for (std::size_t i = 0; i < gy.size(); ++i) file_gy[i] += gy[i];
    return;
  }
  const ConditionConfig& cond = cfg.conditions[c];
  for (std::size_t k = 0; k < gp.size(); ++k)
    if (cond.parameter_source[k] >= 0) file_gp[static_cast<std::size_t>(cond.parameter_source[k])] += gp[k];
  for (std::size_t i = 0; i < gy.size(); ++i)
    if (cond.initial_state[i].empty()) file_gy[i] += gy[i];
}

FileGradient conditions_gradient(const RunConfig& cfg, std::vector<double>* objectives,
                                 std::vector<ode::StepPlan>* steps) {
  const std::size_t nc = condition_count(cfg);
  if (objectives) objectives->clear();
  if (steps) steps->clear();
  if (cfg.conditions.empty()) {  // the file itself: file_gradient's bits
    FileGradient g = file_gradient(cfg, cfg.parameters, cfg.initial_state);
    if (objectives) objectives->push_back(g.result.objective);
    if (steps) steps->push_back(g.result.steps);
    return g;
  }
  FileGradient sum;
  sum.gradient_p.assign(cfg.parameters.size(), 0.0);
  sum.result.wrt_initial_state.assign(cfg.state_names.size(), 0.0);
  for (std::size_t c = 0; c < nc; ++c) {
    const RunConfig rc = condition_config(cfg, c);
    const FileGradient g = file_gradient(rc, rc.parameters, rc.initial_state);
    if (c == 0) {  // the counters and the method of the first; the sums below
      const auto gp = std::move(sum.gradient_p);
      const auto gy = std::move(sum.result.wrt_initial_state);
      sum.result = g.result;
      sum.gradient_p = gp;
      sum.result.wrt_initial_state = gy;
      sum.result.objective = 0.0;
      sum.result.checkpoints = {};
      sum.result.rhs_evaluations = sum.result.vjp_evaluations = 0;
      sum.result.wall_seconds = 0.0;
      sum.result.steps = {};
    }
    sum.result.objective += g.result.objective;
    add_condition_gradient(cfg, c, g.gradient_p, g.result.wrt_initial_state, sum.gradient_p,
                           sum.result.wrt_initial_state);
    sum.result.checkpoints.steps += g.result.checkpoints.steps;
    sum.result.checkpoints.forward_steps += g.result.checkpoints.forward_steps;
    sum.result.checkpoints.recomputed_steps += g.result.checkpoints.recomputed_steps;
    sum.result.checkpoints.peak_snapshots = std::max(sum.result.checkpoints.peak_snapshots, g.result.checkpoints.peak_snapshots);
    sum.result.rhs_evaluations += g.result.rhs_evaluations;
    sum.result.vjp_evaluations += g.result.vjp_evaluations;
    sum.result.wall_seconds += g.result.wall_seconds;
    if (objectives) objectives->push_back(g.result.objective);
    if (steps) steps->push_back(g.result.steps);
  }
  sum.result.wrt_parameters = sum.gradient_p;
  return sum;
}

double conditions_objective(const RunConfig& cfg, std::span<const ode::StepPlan> steps) {
  const std::size_t nc = condition_count(cfg);
  COSTATE_CHECK(steps.size() == nc, cfg.input_path << ": conditions_objective needs one step plan per condition ("
                                                   << nc << "), got " << steps.size());
  if (cfg.conditions.empty()) return file_gradient(cfg, cfg.parameters, cfg.initial_state, steps[0]).result.objective;
  double J = 0.0;
  for (std::size_t c = 0; c < nc; ++c) {
    const RunConfig rc = condition_config(cfg, c);
    J += file_gradient(rc, rc.parameters, rc.initial_state, steps[c]).result.objective;
  }
  return J;
}

FileHessian conditions_hessian(const RunConfig& cfg, const std::vector<std::size_t>& wrt,
                               std::span<const ode::StepPlan> steps) {
  const std::size_t nc = condition_count(cfg), m = wrt.size();
  COSTATE_CHECK(steps.size() == nc, cfg.input_path << ": conditions_hessian needs one step plan per condition ("
                                                   << nc << "), got " << steps.size());
  ode::GradientResult at;  // file_hessian reads the steps only
  if (cfg.conditions.empty()) {
    at.steps = steps[0];
    return file_hessian(cfg, at, wrt);
  }
  FileHessian sum;
  sum.matrix.assign(m * m, 0.0);
  for (std::size_t c = 0; c < nc; ++c) {
    // Condition c's parameters that read a wrt parameter, and which one (its
    // row and column of H).
    const ConditionConfig& cond = cfg.conditions[c];
    std::vector<std::size_t> own, row;
    for (std::size_t k = 0; k < cond.parameter_source.size(); ++k)
      for (std::size_t a = 0; a < m; ++a)
        if (cond.parameter_source[k] == static_cast<long>(wrt[a])) {
          own.push_back(k);
          row.push_back(a);
        }
    if (own.empty()) continue;  // no wrt parameter reaches this condition
    const RunConfig rc = condition_config(cfg, c);
    at.steps = steps[c];
    const FileHessian h = file_hessian(rc, at, own);
    const std::size_t mc = own.size();
    for (std::size_t i = 0; i < mc; ++i)
      for (std::size_t j = 0; j < mc; ++j) sum.matrix[row[i] * m + row[j]] += h.matrix[i * mc + j];
    sum.products += h.products;
    sum.wall_seconds += h.wall_seconds;
  }
  sum.asymmetry = hessian_asymmetry(sum.matrix, m);
  return sum;
}

void require_single_condition(const RunConfig& cfg, const std::string& what) {
  if (cfg.conditions.empty()) return;
  throw Error(cfg.input_path + ": " + what + " does not take a file with conditions (" +
              std::to_string(cfg.conditions.size()) +
              " in its 'conditions:' section); run it on a file without 'conditions:' (one condition)");
}

}  // namespace costate::io
