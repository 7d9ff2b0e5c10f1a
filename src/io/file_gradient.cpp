// costate/io/file_gradient.hpp: each function picks the file's model
// (io::visit_model) and calls its compiled kernels (io/model_kernels.hpp);
// nothing here instantiates an integrator or a sweep.
#include "costate/io/file_gradient.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/delay_adjoint.hpp"
#include "costate/ode/history.hpp"
#include "costate/ode/support.hpp"
#include "costate/sbml/model.hpp"
#include "costate/io/conditions.hpp"
#include "io/model_kernels.hpp"
#include "costate/io/objective.hpp"

namespace costate::io {
namespace {

/// Calls f(problem, kernels) with the file's model in an ode::Problem at
/// parameters p and initial state y0 (reported at the file's output times
/// when `outputs`), and the model's ModelKernels type.
template <class F>
decltype(auto) with_model(const RunConfig& cfg, std::span<const double> p,
                          std::span<const double> y0, bool outputs, F&& f) {
  // delay(): its slots are filled from the trajectory's history, which only
  // the method of steps keeps (integrate_file, file_gradient).
  if (cfg.sbml && !cfg.sbml->delays.empty())
    throw Error(cfg.sbml->delays.front().text + ": this command does not support delay() "
                "(costate run simulates it, and sensitivity.method forward differentiates it)");
  return visit_model(cfg, [&](auto model) {
    using M = decltype(model);
    ode::Problem<M> problem{std::move(model), std::vector<double>(y0.begin(), y0.end()),
                            std::vector<double>(p.begin(), p.end()),
                            {cfg.t_start, cfg.t_end},
                            outputs ? cfg.output_times : std::vector<double>{}};
    return f(problem, detail::ModelKernels<M>{});
  });
}

}  // namespace

namespace {
ode::History::Initial delay_initial_history(const RunConfig& cfg, std::span<const double> p);
}  // namespace

ode::Solution integrate_file(const RunConfig& cfg) {
  if (cfg.sbml && !cfg.sbml->delays.empty())
    return ode::integrate_with_delays(cfg.sbml->equations, cfg.initial_state, cfg.parameters,
                                      cfg.t_start, cfg.t_end, cfg.output_times,
                                      cfg.sbml->delays, integrator_options(cfg),
                                      delay_initial_history(cfg, cfg.parameters));
  return with_model(cfg, cfg.parameters, cfg.initial_state, true,
                    [&](const auto& problem, auto kernels) {
                      return kernels.integrate(problem, integrator_options(cfg));
                    });
}

std::vector<double> sbml_symbols(const RunConfig& cfg, const ode::Solution& sol, std::size_t k) {
  COSTATE_CHECK(cfg.sbml, "sbml_symbols: " << cfg.input_path << " has no SBML model");
  if (cfg.sbml->delays.empty()) return cfg.sbml->symbol_values(sol.t[k], sol.state(k), cfg.parameters);
  COSTATE_CHECK(sol.history, "sbml_symbols: the trajectory of " << cfg.input_path
                                 << " has delay() but no history (ode::integrate_with_delays)");
  return cfg.sbml->symbol_values(sol.t[k], sol.state(k), cfg.parameters, *sol.history);
}

ode::CvodesAdjoint cvodes_adjoint_of(const SensitivityConfig& sc) {
  return {.steps = static_cast<int>(sc.checkpoint_steps),
          .interpolation = ode::cvodes_interpolation_from_string(sc.interpolation),
          .rtol = sc.adjoint_rtol,
          .atol = sc.adjoint_atol};
}

ode::SensitivityMethod sensitivity_method_of(const SensitivityConfig& sc) {
  switch (sc.method) {
    case ode::SensitivityKind::DiscreteAdjoint: break;
    case ode::SensitivityKind::Forward: return ode::Forward{};
    case ode::SensitivityKind::ContinuousAdjoint:
      return ode::ContinuousAdjoint{.rtol = sc.adjoint_rtol, .atol = sc.adjoint_atol};
    case ode::SensitivityKind::CvodesForward: return ode::CvodesForward{};
    case ode::SensitivityKind::CvodesAdjoint: return cvodes_adjoint_of(sc);
    case ode::SensitivityKind::IdasForward: return ode::IdasForward{};
    case ode::SensitivityKind::IdasAdjoint:
      return ode::IdasAdjoint{.steps = static_cast<int>(sc.checkpoint_steps),
                              .rtol = sc.adjoint_rtol,
                              .atol = sc.adjoint_atol};
  }
  return ode::DiscreteAdjoint{.checkpointing = sc.checkpointing};
}

namespace {

/// The method of cfg with the resume link set (a resumable gradient needs
/// the discrete adjoint).
ode::SensitivityMethod gradient_method(const RunConfig& cfg, const AdjointResumeLink& resume) {
  ode::SensitivityMethod method = sensitivity_method_of(cfg.sensitivity);
  if (resume.from || resume.interrupted_at) {
    auto* dam = std::get_if<ode::DiscreteAdjoint>(&method);
    COSTATE_CHECK(dam, cfg.input_path << ": a resumable gradient needs sensitivity.method "
                                         "discrete_adjoint, not "
                                      << ode::to_string(cfg.sensitivity.method));
    dam->resume_from = resume.from;
    dam->interrupted_at = resume.interrupted_at;
  }
  return method;
}

/// file_gradient on a model and objective already built.
template <class Problem, class Kernels>
FileGradient gradient_of(const RunConfig& cfg, const Problem& problem, Kernels kernels,
                         const ExpressionObjective& objective, const ode::SensitivityMethod& method,
                         const ode::StepPlan& replay) {
  FileGradient out;
  // The run's options (its landing times): the forward pass is the run's.
  out.result = kernels.gradient(problem, objective, method, integrator_options(cfg), replay);
  out.gradient_p = out.result.wrt_parameters;
  const auto extra = initial_state_parameter_vjp(cfg, out.result.wrt_initial_state);
  for (std::size_t j = 0; j < extra.size(); ++j) out.gradient_p[j] += extra[j];
  return out;
}

/// file_hessian on a model and objective already built: the columns' H·v on
/// the gradient's steps, one second-order System for all of them.
template <class Problem, class Kernels>
FileHessian hessian_of(const RunConfig& cfg, const Problem& problem, Kernels kernels,
                       const ExpressionObjective& objective, const ode::GradientResult& g,
                       const std::vector<std::size_t>& wrt) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t np = cfg.parameters.size(), m = wrt.size();
  FileHessian out;
  out.matrix.assign(m * m, 0.0);
  ode::SensitivityMethod method =
      ode::DiscreteAdjoint{.checkpointing = cfg.sensitivity.checkpointing};
  if (cfg.sensitivity.method == ode::SensitivityKind::CvodesAdjoint)
    method = cvodes_adjoint_of(cfg.sensitivity);
  std::vector<ode::HessianDirection> v(m, ode::HessianDirection{std::vector<double>(np, 0.0), {}});
  for (std::size_t c = 0; c < m; ++c) {
    v[c].parameters[wrt[c]] = 1.0;
    v[c].initial_state = initial_state_parameter_jvp(cfg, v[c].parameters);
  }
  const std::vector<ode::HessianVectorResult> hv =
      kernels.hessian_vectors(problem, objective, v, method, integrator_options(cfg), g.steps);
  for (std::size_t c = 0; c < m; ++c) {
    const ode::HessianVectorResult& r = hv[c];
    const std::vector<double> extra = initial_state_parameter_hvp(
        cfg, v[c].parameters, r.gradient_wrt_initial_state, r.hv_wrt_initial_state);
    for (std::size_t i = 0; i < m; ++i)
      out.matrix[i * m + c] = r.hv_wrt_parameters[wrt[i]] + extra[wrt[i]];
    ++out.products;
  }
  out.asymmetry = hessian_asymmetry(out.matrix, m);
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

/// Whether an SBML initial value reads time (its history before t0 is then
/// that formula: Model::initial_history).
bool initial_history_in_time(const sbml::Model& m) {
  for (std::size_t i = 0; i < m.initial_state.size(); ++i) {
    const auto used = expr::Program::build(m.initial_state[i], 1 + m.parameter_names.size(),
                                           m.initial_state_text[i])
                          .used_variables();
    if (std::find(used.begin(), used.end(), 0u) != used.end()) return true;
  }
  return false;
}

/// The history before t0 of cfg's SBML model with delay(): its initial
/// values' formulas in time, or (none) the constant initial state.
ode::History::Initial delay_initial_history(const RunConfig& cfg, std::span<const double> p) {
  if (!initial_history_in_time(*cfg.sbml)) return {};
  return cfg.sbml->initial_history(std::vector<double>(p.begin(), p.end()));
}

/// The end of both delay gradients: the wall time, the gradient in the
/// file's parameters (initial values that are formulas of them), and with
/// `trajectory` the run's `sol` at the output times (sol holds them among
/// its outputs).
void finish_delay_gradient(const RunConfig& cfg, FileGradient& out, const ode::Solution& sol,
                           ode::Solution* trajectory,
                           std::chrono::steady_clock::time_point start) {
  out.result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.gradient_p = out.result.wrt_parameters;
  const auto extra = initial_state_parameter_vjp(cfg, out.result.wrt_initial_state);
  for (std::size_t j = 0; j < extra.size(); ++j) out.gradient_p[j] += extra[j];
  if (!trajectory) return;
  *trajectory = sol;
  trajectory->t.clear();
  trajectory->y.clear();
  for (double t : cfg.output_times) {
    const auto k =
        static_cast<std::size_t>(std::lower_bound(sol.t.begin(), sol.t.end(), t) - sol.t.begin());
    const std::span<const double> y = sol.state(k);
    trajectory->t.push_back(t);
    trajectory->y.insert(trajectory->y.end(), y.begin(), y.end());
  }
}

/// delay_gradient by the discrete adjoint through the history
/// (ode::adjoint_with_delays) at `times` (the observations', t1 and, with
/// `trajectory`, the outputs): the objective's partials by one ad::Dual
/// pass per state and parameter of each term.
FileGradient delay_adjoint(const RunConfig& cfg, const ExpressionObjective& objective,
                           const std::vector<double>& times, std::span<const double> p,
                           std::span<const double> y0, ode::Solution* trajectory,
                           std::chrono::steady_clock::time_point start) {
  const sbml::Model& m = *cfg.sbml;
  const std::size_t np = p.size(), ny = y0.size();
  const std::vector<double> obs_times = objective.observation_times();
  auto seeds = [&](const ode::Solution& sol, std::span<double> y_bar, std::span<double> p_bar) {
    using D = ad::Dual<double, 1>;
    auto row = [&](double t) {
      return static_cast<std::size_t>(std::lower_bound(sol.t.begin(), sol.t.end(), t) -
                                      sol.t.begin());
    };
    double J = 0.0;
    std::vector<D> yd(ny), pd(np);
    for (std::size_t term = 0; term <= obs_times.size(); ++term) {
      const bool terminal = term == obs_times.size();
      const std::size_t k = row(terminal ? cfg.t_end : obs_times[term]);
      const std::span<const double> y = sol.state(k);
      for (std::size_t j = 0; j < ny + np; ++j) {
        for (std::size_t i = 0; i < ny; ++i) yd[i] = D(y[i], {i == j ? 1.0 : 0.0});
        for (std::size_t q = 0; q < np; ++q) pd[q] = D(p[q], {ny + q == j ? 1.0 : 0.0});
        const D v = terminal ? objective.terminal<D>(yd, pd) : objective.observation<D>(term, yd, pd);
        if (j < ny) y_bar[k * ny + j] += v.tangent(0);
        else p_bar[j - ny] += v.tangent(0);
        if (j == 0) J += v.value();
      }
    }
    return J;
  };
  const ode::DelayedGradient g =
      ode::adjoint_with_delays(m.equations, y0, p, cfg.t_start, cfg.t_end, times, m.delays,
                               integrator_options(cfg), cfg.sensitivity.checkpointing, seeds, {});
  FileGradient out;
  out.result.objective = g.objective;
  out.result.wrt_parameters = g.wrt_parameters;
  out.result.wrt_initial_state = g.wrt_initial_state;
  out.result.method = "discrete_adjoint(" + ode::to_string(cfg.sensitivity.checkpointing) +
                      "; through delay(): the method of steps, " + std::to_string(g.segments) +
                      " segments)";
  out.result.summary = g.solution.summary;
  out.result.vjp_evaluations = g.vjp_evaluations;
  finish_delay_gradient(cfg, out, g.solution, trajectory, start);
  return out;
}

/// The gradient of cfg's objective on an SBML model with delay(): forward
/// sensitivities through the history (ode::forward_sensitivities_with_delays)
/// along each parameter and each initial value (sensitivity.method forward
/// or cvodes_forward: the integrator is the file's either way), at the observation times
/// and t1; J and dJ/dθ_j by one ad::Dual pass of the objective per
/// direction. A delay slot's entry is 0 (not a parameter: its value is
/// read from the history). `trajectory`: also the run at the output times.
FileGradient delay_gradient(const RunConfig& cfg, std::span<const double> p,
                            std::span<const double> y0, ode::Solution* trajectory) {
  const sbml::Model& m = *cfg.sbml;
  const std::string& what = m.delays.front().text;
  const bool adjoint = cfg.sensitivity.method == ode::SensitivityKind::DiscreteAdjoint;
  if (!adjoint && cfg.sensitivity.method != ode::SensitivityKind::Forward &&
      cfg.sensitivity.method != ode::SensitivityKind::CvodesForward)
    throw Error(what + ": sensitivity.method = " + ode::to_string(cfg.sensitivity.method) +
                " through delay() is not implemented (its backward integration has no history "
                "of the state to interpolate); use sensitivity.method: discrete_adjoint (with a "
                "native integrator), forward (or cvodes_forward with a CVODES integrator)");
  if (!cfg.objective.integral.empty())
    throw Error(what + ": objective.integral through delay() is not supported (the gradients "
                "through the history take terminal and data objectives)");
  if (initial_history_in_time(m))
    throw Error(what + ": sensitivities through delay() of a model whose initial values read time "
                "(its history before t0 moves with the parameters) are not supported");
  const auto start = std::chrono::steady_clock::now();
  const ExpressionObjective objective(cfg);
  const std::size_t np = p.size(), ny = y0.size();
  // The times: the observations', t1 (and the run's outputs).
  std::vector<double> times = objective.observation_times();
  times.push_back(cfg.t_end);
  if (trajectory) times.insert(times.end(), cfg.output_times.begin(), cfg.output_times.end());
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  if (adjoint) return delay_adjoint(cfg, objective, times, p, y0, trajectory, start);
  std::vector<ode::SensitivityDirection> directions(np + ny);
  for (std::size_t j = 0; j < np + ny; ++j) {
    directions[j].parameters.assign(np, 0.0);
    directions[j].initial_state.assign(ny, 0.0);
    if (j < np) directions[j].parameters[j] = 1.0;
    else directions[j].initial_state[j - np] = 1.0;
  }
  const ode::DelayedSensitivities fs = ode::forward_sensitivities_with_delays(
      m.equations, y0, p, cfg.t_start, cfg.t_end, times, m.delays, integrator_options(cfg),
      directions, {});
  if (!fs.solution.summary.success())
    throw Error("integration of " + cfg.input_path + " failed: " + fs.solution.summary.message +
                " (no output written)");
  auto row = [&](double t) {
    return static_cast<std::size_t>(std::lower_bound(fs.solution.t.begin(), fs.solution.t.end(), t) -
                                    fs.solution.t.begin());
  };
  // J and its tangents: terminal at t1, observation k at its time.
  using D = ad::Dual<double, 1>;
  std::vector<double> gradient(np + ny, 0.0);
  double J = 0.0;
  std::vector<D> yd(ny), pd(np);
  const std::vector<double> obs_times = objective.observation_times();
  for (std::size_t term = 0; term <= obs_times.size(); ++term) {
    const bool terminal = term == obs_times.size();
    const std::size_t k = row(terminal ? cfg.t_end : obs_times[term]);
    const std::span<const double> y = fs.solution.state(k);
    for (std::size_t j = 0; j < np + ny; ++j) {
      for (std::size_t i = 0; i < ny; ++i) yd[i] = D(y[i], {fs.sensitivity(k, i, j)});
      for (std::size_t q = 0; q < np; ++q) pd[q] = D(p[q], {q == j ? 1.0 : 0.0});
      const D v = terminal ? objective.terminal<D>(yd, pd) : objective.observation<D>(term, yd, pd);
      gradient[j] += v.tangent(0);
      if (j == 0) J += v.value();
    }
  }
  for (const ode::DelayedInput& d : m.delays) gradient[d.parameter] = 0.0;
  FileGradient out;
  out.result.objective = J;
  out.result.wrt_parameters.assign(gradient.begin(), gradient.begin() + static_cast<long>(np));
  out.result.wrt_initial_state.assign(gradient.begin() + static_cast<long>(np), gradient.end());
  out.result.method = "forward (through delay(): the method of steps)";
  out.result.summary = fs.solution.summary;
  out.result.rhs_evaluations = fs.solution.summary.rhs_evaluations;
  finish_delay_gradient(cfg, out, fs.solution, trajectory, start);
  return out;
}

bool has_delays(const RunConfig& cfg) { return cfg.sbml && !cfg.sbml->delays.empty(); }

}  // namespace

FileGradient file_gradient(const RunConfig& cfg, std::span<const double> p,
                           std::span<const double> y0, const ode::StepPlan& replay,
                           const AdjointResumeLink& resume) {
  if (has_delays(cfg)) return delay_gradient(cfg, p, y0, nullptr);
  const ExpressionObjective objective(cfg);
  const ode::SensitivityMethod method = gradient_method(cfg, resume);
  return with_model(cfg, p, y0, false, [&](const auto& problem, auto kernels) {
    return gradient_of(cfg, problem, kernels, objective, method, replay);
  });
}

FileSensitivity file_sensitivity(const RunConfig& cfg, const AdjointResumeLink& resume,
                                 const std::vector<std::size_t>* hessian_wrt) {
  FileSensitivity out;
  if (has_delays(cfg)) {
    if (hessian_wrt)
      throw Error(cfg.sbml->delays.front().text + ": --hessian through delay() is not supported "
                  "(forward sensitivities and the discrete adjoint through the history are "
                  "first order: no second-order sweep reads the history)");
    out.gradient = delay_gradient(cfg, cfg.parameters, cfg.initial_state, &out.trajectory);
    return out;
  }
  const ExpressionObjective objective(cfg);
  const ode::SensitivityMethod method = gradient_method(cfg, resume);
  // One build of the model (and of the objective) for the three parts.
  with_model(cfg, cfg.parameters, cfg.initial_state, true, [&](const auto& problem, auto kernels) {
    // 1. The trajectory at the output times (for the output file).
    out.trajectory = kernels.integrate(problem, integrator_options(cfg));
    if (!out.trajectory.summary.success())
      throw Error("integration of " + cfg.input_path + " failed: " +
                  out.trajectory.summary.message + " (no output written)");
    // 2. The gradient, and 3. the Hessian on the gradient's steps.
    out.gradient = gradient_of(cfg, problem, kernels, objective, method, {});
    if (hessian_wrt)
      out.hessian = hessian_of(cfg, problem, kernels, objective, out.gradient.result, *hessian_wrt);
  });
  return out;
}

void check_hessian_request(const RunConfig& cfg, const std::string& input) {
  COSTATE_CHECK(!cfg.sensitivity.wrt.empty(),
                input << ": costate sensitivity --hessian needs at least one parameter in "
                         "sensitivity.wrt; "
                      << (cfg.parameter_names.empty() ? "the model has no parameters"
                                                      : "sensitivity.wrt names none")
                      << " (drop --hessian)");
  ode::require(ode::supports(cfg.sensitivity.method, cfg.integrator, 2),
               input + ": costate sensitivity --hessian");
}

double hessian_asymmetry(const std::vector<double>& H, std::size_t m) {
  double scale = 0.0, asym = 0.0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      scale = std::max(scale, std::abs(H[i * m + j]));
      asym = std::max(asym, std::abs(H[i * m + j] - H[j * m + i]));
    }
  return scale > 0.0 ? asym / scale : 0.0;
}

FileHessian file_hessian(const RunConfig& cfg, const ode::GradientResult& g,
                         const std::vector<std::size_t>& wrt) {
  const ExpressionObjective objective(cfg);
  return with_model(cfg, cfg.parameters, cfg.initial_state, false,
                    [&](const auto& problem, auto kernels) {
                      return hessian_of(cfg, problem, kernels, objective, g, wrt);
                    });
}

std::vector<std::size_t> wrt_indices(const RunConfig& cfg) {
  std::vector<std::size_t> out;
  for (const auto& name : cfg.sensitivity.wrt)
    out.push_back(static_cast<std::size_t>(
        std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), name) -
        cfg.parameter_names.begin()));
  return out;
}

FileGradientCheck file_gradient_check(const RunConfig& cfg) {
  const std::size_t np = cfg.parameters.size(), n = cfg.initial_state.size();
  COSTATE_CHECK(np > 0 || std::any_of(cfg.initial_state_expressions.begin(),
                                      cfg.initial_state_expressions.end(),
                                      [](const std::string& e) { return e.empty(); }),
                cfg.input_path << ": costate gradcheck has nothing to check: the model has no "
                                  "parameters and every initial value is an expression of t "
                                  "(give a parameter, or a number as an initial value)");
  // J = Σ_c J_c over a file's conditions (io/conditions.hpp; the file
  // itself without them), each condition's steps replayed by every evaluation.
  std::vector<ode::StepPlan> steps;
  const FileGradient base = conditions_gradient(cfg, nullptr, &steps);
  std::vector<std::size_t> free_states;
  for (std::size_t i = 0; i < n; ++i)
    if (cfg.initial_state_expressions[i].empty()) free_states.push_back(i);
  FileGradientCheck out;
  out.objective = base.result.objective;
  out.x = cfg.parameters;
  out.gradient = base.gradient_p;
  out.names = cfg.parameter_names;
  for (std::size_t i : free_states) {
    out.x.push_back(cfg.initial_state[i]);
    out.gradient.push_back(base.result.wrt_initial_state[i]);
    out.names.push_back(cfg.state_names[i] + "(t0)");
  }
  auto J = [&](const std::vector<double>& xx) {
    RunConfig c = cfg;
    c.parameters.assign(xx.begin(), xx.begin() + static_cast<std::ptrdiff_t>(np));
    evaluate_initial_state(c);
    for (std::size_t k = 0; k < free_states.size(); ++k) c.initial_state[free_states[k]] = xx[np + k];
    return conditions_objective(c, steps);
  };
  const std::vector<double>& x = out.x;
  // Direction: components scaled like x, signs from a fixed pattern.
  std::vector<double> dir(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    dir[i] = (i % 2 == 0 ? 1.0 : -0.7) * (0.5 + 0.25 * static_cast<double>(i % 3)) *
             std::max(std::abs(x[i]), 1e-2);
  // Taylor test: r(h) = |J(x + h d) − J(x) − h ⟨∇J, d⟩| = O(h²), order ≥ 1.9.
  out.taylor = ad::taylor_test(J, x, dir, out.gradient);
  // Richardson differences per component (ad::richardson_difference, the
  // gradient checks' one mechanism), judged against the component, the
  // gradient's norm and their own spread (ad::check_against_differences).
  // Steps frozen (discrete adjoint, forward): J is smooth to round-off, so
  // 1e-5 relative to the component or the norm, from h₀ = 1e-5 relative
  // down 7 halvings (a replayed implicit step may not converge far from x:
  // Robertson's y2(t0) = 0 has scale 1e-5). Continuous methods (continuous_adjoint, cvodes_*)
  // differentiate the exact objective and re-choose their steps at every
  // evaluation: J is smooth only down to the tolerances, so 1e-3 from
  // h₀ = 1e-2 down 10 halvings (the spread measures the rest; use tight
  // integrator tolerances, rtol ≤ 1e-10, for these methods).
  const ode::SensitivityKind sm = cfg.sensitivity.method;
  const bool continuous = sm != ode::SensitivityKind::DiscreteAdjoint &&
                          sm != ode::SensitivityKind::Forward;
  constexpr double kFdTol = 1e-5, kContinuousFdTol = 1e-3;
  const double tol = continuous ? kContinuousFdTol : kFdTol;
  // A point where the model cannot be integrated is NaN to the differences
  // (skipped in their choice of step), not an error that hides the rest.
  auto J_or_nan = [&](const std::vector<double>& xx) {
    try {
      return J(xx);
    } catch (const Error&) {
      return std::numeric_limits<double>::quiet_NaN();
    }
  };
  out.fd = ad::check_gradient_with_noise(J_or_nan, x, out.gradient, continuous ? 1e-2 : 1e-5,
                                         continuous ? 11 : 8,
                                         {.rtol = tol, .norm_rtol = tol, .spread_factor = 3.0});
  out.summary = base.result.summary;
  out.passed = out.taylor.passed && out.fd.passed;
  return out;
}

ode::GradientResult observation_gradient(const RunConfig& cfg,
                                         const ode::WeightedObservations& obs,
                                         const ode::SensitivityMethod& method) {
  return with_model(cfg, cfg.parameters, cfg.initial_state, false,
                    [&](const auto& problem, auto kernels) {
                      return kernels.observation_gradient(problem, obs, method, cfg.integrator);
                    });
}

ode::HessianVectorResult observation_hessian_vector(const RunConfig& cfg,
                                                    const ode::WeightedObservations& obs,
                                                    const ode::HessianDirection& v,
                                                    const ode::SensitivityMethod& method) {
  return with_model(cfg, cfg.parameters, cfg.initial_state, false,
                    [&](const auto& problem, auto kernels) {
                      return kernels.observation_hessian_vector(problem, obs, v, method,
                                                                cfg.integrator);
                    });
}

ode::ResidualSensitivities residual_sensitivities(const RunConfig& cfg,
                                                  const ode::WeightedObservations& obs,
                                                  const ode::StepPlan& steps) {
  return with_model(cfg, cfg.parameters, cfg.initial_state, false,
                    [&](const auto& problem, auto kernels) {
                      return kernels.residual_sensitivities(problem, obs, cfg.integrator, steps);
                    });
}

}  // namespace costate::io
