// Multi-condition input files: each condition's problem and the sums over
// the conditions (see include/costate/io/conditions.hpp).
#include "costate/io/conditions.hpp"

#include <algorithm>
#include <cmath>

#include "costate/core/error.hpp"
#include "costate/ode/scheme.hpp"

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

bool ConditionsPlace::ahead_of(const ConditionsPlace& from) const {
  return condition > from.condition || (sweep && sweep->step >= 0);
}

namespace {

/// Condition c's parameters that read a `wrt` parameter (own) and which one
/// (row: its row and column of H). A file without conditions: wrt itself.
void hessian_rows(const RunConfig& cfg, std::size_t c, const std::vector<std::size_t>& wrt,
                  std::vector<std::size_t>& own, std::vector<std::size_t>& row) {
  own.clear();
  row.clear();
  if (cfg.conditions.empty()) {
    own = wrt;
    for (std::size_t a = 0; a < wrt.size(); ++a) row.push_back(a);
    return;
  }
  const ConditionConfig& cond = cfg.conditions[c];
  for (std::size_t k = 0; k < cond.parameter_source.size(); ++k)
    for (std::size_t a = 0; a < wrt.size(); ++a)
      if (cond.parameter_source[k] == static_cast<long>(wrt[a])) {
        own.push_back(k);
        row.push_back(a);
      }
}

/// The report of the wrt gradient (and Hessian), as the output file holds it.
SensitivityOutput report_of(const RunConfig& cfg, const FileGradient& g, const FileHessian* h) {
  const std::vector<std::size_t> wrt = wrt_indices(cfg);
  SensitivityOutput out;
  out.objective = g.result.objective;
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    out.parameter_names.push_back(cfg.sensitivity.wrt[k]);
    out.gradient.push_back(g.gradient_p[wrt[k]]);
  }
  if (h) out.hessian = h->matrix;
  if (cfg.sensitivity.wrt_initial_state) out.gradient_initial_state = g.result.wrt_initial_state;
  out.method = g.result.method;
  out.steps = g.result.checkpoints.steps;
  out.forward_steps = g.result.checkpoints.forward_steps;
  out.recomputed_steps = g.result.checkpoints.recomputed_steps;
  out.peak_snapshots = g.result.checkpoints.peak_snapshots;
  return out;
}

/// Adds one condition's counters and wall time into the sums' (the first
/// computed condition also gives its method and forward summary).
void add_counters(const ode::GradientResult& g, bool first, ode::GradientResult& sum) {
  if (first) {
    sum.method = g.method;
    sum.summary = g.summary;
  }
  sum.checkpoints.steps += g.checkpoints.steps;
  sum.checkpoints.forward_steps += g.checkpoints.forward_steps;
  sum.checkpoints.recomputed_steps += g.checkpoints.recomputed_steps;
  sum.checkpoints.peak_snapshots = std::max(sum.checkpoints.peak_snapshots, g.checkpoints.peak_snapshots);
  sum.rhs_evaluations += g.rhs_evaluations;
  sum.vjp_evaluations += g.vjp_evaluations;
  sum.backward_steps += g.backward_steps;
  sum.wall_seconds += g.wall_seconds;
}

}  // namespace

ConditionsSensitivity conditions_sensitivity(const RunConfig& cfg, const ConditionsSensitivityOptions& options) {
  const std::size_t nc = condition_count(cfg), np = cfg.parameters.size(), n = cfg.state_names.size();
  const bool several = !cfg.conditions.empty();
  const ConditionsPlace start = options.resume_from ? *options.resume_from : ConditionsPlace{};
  COSTATE_CHECK(start.condition <= nc && start.objectives.size() == start.condition &&
                    (!start.sweep || start.condition < nc) && (several || start.condition == 0),
                cfg.input_path << ": a sensitivity place at condition " << start.condition << " with "
                               << start.objectives.size() << " objectives does not fit " << nc << " condition(s)");
  ConditionsSensitivity out;
  out.problems.resize(nc);
  out.trajectories.resize(options.trajectories ? nc : 0);
  out.steps.resize(nc);
  out.objectives = start.objectives;
  // The sums: a file without conditions takes its one gradient as it is
  // (file_gradient's bits); with conditions they start at 0 (or the place's
  // running sums) and add condition after condition.
  FileGradient& sum = out.gradient;
  sum.gradient_p = start.gradient_p.empty() ? std::vector<double>(np, 0.0) : start.gradient_p;
  sum.result.wrt_initial_state =
      start.gradient_initial_state.empty() ? std::vector<double>(n, 0.0) : start.gradient_initial_state;
  COSTATE_CHECK(sum.gradient_p.size() == np && sum.result.wrt_initial_state.size() == n,
                cfg.input_path << ": a sensitivity place's sums have " << sum.gradient_p.size() << " + "
                               << sum.result.wrt_initial_state.size() << " entries, the file " << np << " + " << n);
  for (double J : start.objectives) sum.result.objective += J;  // Σ in order, as below
  const std::vector<std::size_t>* wrt = options.hessian_wrt;
  if (wrt) out.hessian.matrix.assign(wrt->size() * wrt->size(), 0.0);
  ConditionsPlace* at = options.interrupted_at;
  std::vector<std::size_t> own, row;
  bool first = true;
  for (std::size_t c = start.condition; c < nc; ++c) {
    RunConfig& rc = out.problems[c] = condition_config(cfg, c);
    // Where a stop in this condition leaves the computation.
    AdjointResumeLink link;
    if (c == start.condition && start.sweep && start.sweep->step >= 0) link.from = start.sweep;
    if (at) {
      at->condition = c;
      at->objectives = out.objectives;
      at->gradient_p = sum.gradient_p;
      at->gradient_initial_state = sum.result.wrt_initial_state;
      at->sweep = link.interrupted_at = std::make_shared<ode::AdjointResume>();
    }
    if (wrt) hessian_rows(cfg, c, *wrt, own, row);
    const std::vector<std::size_t>* own_wrt = wrt && !own.empty() ? &own : nullptr;
    FileGradient g;
    FileHessian h;
    try {
      if (options.trajectories) {
        FileSensitivity s = file_sensitivity(rc, link, own_wrt);
        out.trajectories[c] = std::move(s.trajectory);
        g = std::move(s.gradient);
        h = std::move(s.hessian);
      } else {
        g = file_gradient(rc, rc.parameters, rc.initial_state, {}, link);
        if (own_wrt) h = file_hessian(rc, g.result, *own_wrt);
      }
    } catch (const Error& e) {
      if (!several) throw;
      throw Error("condition '" + cfg.conditions[c].id + "' (" + std::to_string(c + 1) + " of " +
                  std::to_string(nc) + "): " + e.what());
    }
    out.objectives.push_back(g.result.objective);
    out.steps[c] = g.result.steps;
    if (!several) {
      sum = std::move(g);
      out.hessian = std::move(h);
      break;
    }
    sum.result.objective += g.result.objective;
    add_condition_gradient(cfg, c, g.gradient_p, g.result.wrt_initial_state, sum.gradient_p,
                           sum.result.wrt_initial_state);
    add_counters(g.result, first, sum.result);
    first = false;
    if (own_wrt) {
      const std::size_t m = wrt->size(), mc = own.size();
      for (std::size_t i = 0; i < mc; ++i)
        for (std::size_t j = 0; j < mc; ++j) out.hessian.matrix[row[i] * m + row[j]] += h.matrix[i * mc + j];
      out.hessian.products += h.products;
      out.hessian.wall_seconds += h.wall_seconds;
    }
  }
  if (several) {
    sum.result.wrt_parameters = sum.gradient_p;
    if (first) sum.result.method = ode::to_string(cfg.sensitivity.method);  // every gradient resumed past
    if (wrt) out.hessian.asymmetry = hessian_asymmetry(out.hessian.matrix, wrt->size());
  }
  // The trajectories of the conditions a resumed run took as done (their
  // gradients summed in the place): integrated for the output file.
  if (at && several) {
    at->condition = nc;
    at->objectives = out.objectives;
    at->gradient_p = sum.gradient_p;
    at->gradient_initial_state = sum.result.wrt_initial_state;
    at->sweep.reset();
  }
  for (std::size_t c = 0; c < start.condition; ++c) {
    out.problems[c] = condition_config(cfg, c);
    if (!options.trajectories) continue;
    out.trajectories[c] = integrate_file(out.problems[c]);
    if (!out.trajectories[c].summary.success())
      throw Error("integration of " + cfg.input_path + ", condition '" + cfg.conditions[c].id +
                  "', failed: " + out.trajectories[c].summary.message + " (no output written)");
  }
  out.output = report_of(cfg, sum, wrt ? &out.hessian : nullptr);
  return out;
}

FileGradient conditions_gradient(const RunConfig& cfg, std::vector<double>* objectives,
                                 std::vector<ode::StepPlan>* steps) {
  ConditionsSensitivity s = conditions_sensitivity(cfg, {.trajectories = false});
  if (objectives) *objectives = std::move(s.objectives);
  if (steps) *steps = std::move(s.steps);
  return std::move(s.gradient);
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
    std::vector<std::size_t> own, row;
    hessian_rows(cfg, c, wrt, own, row);
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
