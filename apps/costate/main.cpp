// costate — command-line driver.
//
//   costate run         FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
//   costate sensitivity FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
//   costate gradcheck   FILE.yaml [--json] [--set key=value]... [-q]
//   costate calibrate   FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
//   costate info        [--json]
//   costate plot        OUT.h5 [-o FILE.png]
//
// `run` integrates the ODE model of a YAML input file (a built-in model or
// equations typed in the file), prints a readable result (or, with --json,
// one JSON object on stdout) and writes the trajectory and the fully resolved
// settings to HDF5. `sensitivity` also computes the objective of the file's
// `objective:` section and its gradient (discrete adjoint) with respect to
// the parameters and the initial state, and writes /sensitivity.
// `gradcheck` verifies that gradient: a Taylor test (observed order >= 1.9)
// and central differences; it exits non-zero when either fails. Logs and
// progress go to stderr. `calibrate` fits the calibration section's
// parameters (and initial states) to data with PETSc TAO (-tao_* options
// override) and reports the fit, standard errors, correlations and
// identifiability; it exits 2 when TAO stops without converging. Errors are printed once (rank 0) and the exit code
// is non-zero.
//
// Sample runs:
//   costate run data/examples/lotka_volterra.yaml
//   costate run data/examples/lorenz.yaml --set integrator.rtol=1e-10 --json
//   mpiexec -n 2 costate run data/examples/van_der_pol.yaml
//   costate sensitivity data/examples/lotka_volterra_equations.yaml --json
//   costate gradcheck data/examples/lotka_volterra_equations.yaml
//   costate calibrate data/examples/van_der_pol_calibration.yaml
//   costate info --json

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "costate/costate.hpp"
#include "costate/ad/verification.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/support.hpp"
#include "io/calibrate.hpp"
#include "io/file_gradient.hpp"
#include "io/hdf5_writer.hpp"
#include "io/input.hpp"
#include "io/objective.hpp"
#include "io/resume.hpp"
#include "pde_commands.hpp"
#include "plot_command.hpp"

namespace {

using costate::io::RunConfig;
using Json = nlohmann::ordered_json;

struct RunArgs {
  std::string input;
  std::string output;
  std::vector<std::string> sets;
  bool json = false;
  bool quiet = false;
  bool hessian = false;  ///< sensitivity --hessian
  std::string resume;    ///< run --resume OUT.h5
};

/// A one-line progress bar on stderr, drawn only on a terminal, only for runs
/// longer than half a second, at most ten times a second.
class Progress {
 public:
  Progress(double t0, double t1, bool enabled)
      : t0_(t0), t1_(t1), enabled_(enabled && isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()), last_(start_) {}
  void update(double t) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::milliseconds(500) || now - last_ < std::chrono::milliseconds(100))
      return;
    last_ = now;
    drawn_ = true;
    const double frac = std::clamp((t - t0_) / (t1_ - t0_), 0.0, 1.0);
    const int width = 40;
    const int filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r[%s%s] %5.1f%%  t = %-12.6g", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), 100.0 * frac, t);
    std::fflush(stderr);
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", 80, "");
  }

 private:
  double t0_, t1_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

/// PDE inputs (a `pde:` section) go to pde_commands.cpp.
int pde(const costate::Environment& env, const RunArgs& args, const char* command) {
  return costate::cli::pde_command(
      env, {.command = command, .input = args.input, .output = args.output, .sets = args.sets,
            .json = args.json, .quiet = args.quiet});
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int run(const costate::Environment& env, const RunArgs& args) {
  namespace ode = costate::ode;
  if (costate::cli::is_pde_input(args.input)) return pde(env, args, "run");
  // 1. Read, override and validate the settings.
  RunConfig cfg = costate::io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  const bool talk = env.is_root() && !args.quiet;
  if (talk) {
    std::cerr << "costate run " << args.input << "\n  model      " << cfg.model << " (states "
              << join(cfg.state_names) << ")\n  integrator "
              << ode::to_string(cfg.integrator.method);
    if (cfg.integrator.fixed_step())
      std::cerr << ", dt = " << cfg.integrator.dt;
    else
      std::cerr << ", rtol = " << cfg.integrator.rtol << ", atol = "
                << (cfg.integrator.atol_per_state.empty()
                        ? costate::detail::format_value(cfg.integrator.atol)
                        : std::string("per state"));
    std::cerr << "\n  time       [" << cfg.t_start << ", " << cfg.t_end << "], "
              << cfg.output_times.size() << " output times\n";
  }

  // 2. Integrate.
  // SIGINT/SIGTERM stop at a step boundary; the outputs reached are written
  // marked partial, and --resume continues them (io/resume.hpp).
  if (!args.resume.empty() && args.output.empty()) cfg.output_file = args.resume;
  costate::io::InterruptHandler interrupts;
  Progress progress(cfg.t_start, cfg.t_end, talk);
  costate::io::RunOutcome outcome =
      costate::io::integrate_run(cfg, [&](double t) { progress.update(t); }, args.resume);
  progress.finish();
  if (outcome.signal)
    return costate::io::finish_interrupted_run(cfg, outcome, env.is_root(), env.is_root(),
                                               args.json);
  const ode::Solution& sol = outcome.solution;
  const ode::Summary& s = sol.summary;
  if (!s.success())
    throw costate::Error("integration of " + args.input + " failed: " + s.message +
                         " (no output written)");

  // 3. Write the HDF5 output (one writer: rank 0).
  if (env.is_root() && !cfg.output_file.empty()) costate::io::write_finished_run(cfg, outcome);

  // 4. Report.
  if (!env.is_root()) return 0;
  const auto final_state = sol.state(sol.n_outputs() - 1);
  if (args.json) {
    Json j;
    j["status"] = "ok";
    j["model"] = cfg.model;
    j["method"] = ode::to_string(s.method);
    j["final_time"] = s.final_time;
    j["state_names"] = cfg.state_names;
    j["final_state"] = std::vector<double>(final_state.begin(), final_state.end());
    j["steps"] = s.steps;
    j["rejected_steps"] = s.rejected_steps;
    j["rhs_evaluations"] = s.rhs_evaluations;
    j["outputs"] = sol.n_outputs();
    j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
    j["wall_seconds"] = s.wall_seconds;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::ostringstream os;
  os << s.brief_report() << "\n\n";
  os << std::setw(14) << "t";
  for (const auto& name : cfg.state_names) os << std::setw(20) << name;
  os << "\n";
  const std::size_t n = sol.n_outputs();
  const std::size_t rows = std::min<std::size_t>(n, 11);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t j = rows == 1 ? 0 : r * (n - 1) / (rows - 1);
    os << std::setw(14) << std::setprecision(6) << sol.t[j];
    for (double v : sol.state(j)) os << std::setw(20) << std::setprecision(12) << v;
    os << "\n";
  }
  if (rows < n) os << "  (" << n << " output times in all; every one is in the HDF5 file)\n";
  os << "\n";
  if (!cfg.output_file.empty()) os << "wrote " << cfg.output_file << "\n";
  std::cout << os.str();
  return 0;
}

// The file's gradient, Hessian and gradient check: io/file_gradient.hpp (shared
// with the Python module).
using costate::io::check_hessian_request;

RunConfig prepare(const costate::Environment& env, const RunArgs& args, const char* command) {
  RunConfig cfg = costate::io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  if (!cfg.objective.present)
    throw costate::Error(args.input + ": costate " + command +
                         " needs an 'objective:' section (terminal, integral and/or data)");
  if (env.is_root() && !args.quiet) {
    std::cerr << "costate " << command << " " << args.input << "\n  model      " << cfg.model
              << " (states " << join(cfg.state_names) << "; parameters "
              << (cfg.parameter_names.empty() ? "none" : join(cfg.parameter_names))
              << ")\n  integrator "
              << costate::ode::to_string(cfg.integrator.method)
              << "\n  gradient   " << cfg.sensitivity.method << ", "
              << costate::ode::to_string(cfg.sensitivity.checkpointing) << "\n";
  }
  return cfg;
}

int sensitivity(const costate::Environment& env, const RunArgs& args) {
  namespace ode = costate::ode;
  if (costate::cli::is_pde_input(args.input)) {
    if (args.hessian)
      throw costate::Error(args.input + ": costate sensitivity --hessian is for ODE inputs (a "
                           "'model:' section); this input has a 'pde:' section, whose Hessian "
                           "is not available — drop --hessian");
    return pde(env, args, "sensitivity");
  }
  RunConfig cfg = prepare(env, args, "sensitivity");
  if (args.hessian) check_hessian_request(cfg, args.input);
  costate::io::InterruptHandler interrupts;  // SIGINT/SIGTERM: stop at a step, keep nothing
  cfg.integrator.on_step = costate::io::interrupt_check("sensitivity");
  // 1. Trajectory (for the output file) and 2. the gradient.
  ode::Solution sol = costate::io::visit_model(cfg, [&](auto model) {
    ode::Problem<decltype(model)> problem{model, cfg.initial_state, cfg.parameters,
                                          {cfg.t_start, cfg.t_end}, cfg.output_times};
    return ode::integrate(problem, cfg.integrator);
  });
  if (!sol.summary.success())
    throw costate::Error("integration of " + args.input + " failed: " + sol.summary.message +
                         " (no output written)");
  const costate::io::FileGradient g =
      costate::io::file_gradient(cfg, cfg.parameters, cfg.initial_state);
  const ode::GradientResult& r = g.result;

  costate::io::SensitivityOutput out;
  out.objective = r.objective;
  const std::vector<std::size_t> wrt_index = costate::io::wrt_indices(cfg);
  for (std::size_t k = 0; k < wrt_index.size(); ++k) {
    out.parameter_names.push_back(cfg.sensitivity.wrt[k]);
    out.gradient.push_back(g.gradient_p[wrt_index[k]]);
  }
  costate::io::FileHessian hess;
  if (args.hessian) {
    hess = costate::io::file_hessian(cfg, r, wrt_index);
    out.hessian = hess.matrix;
  }
  if (cfg.sensitivity.wrt_initial_state) out.gradient_initial_state = r.wrt_initial_state;
  out.method = r.method;
  out.steps = r.checkpoints.steps;
  out.forward_steps = r.checkpoints.forward_steps;
  out.recomputed_steps = r.checkpoints.recomputed_steps;
  out.peak_snapshots = r.checkpoints.peak_snapshots;
  if (env.is_root() && !cfg.output_file.empty())
    costate::io::write_run_hdf5(cfg.output_file, cfg, sol, &out, "sensitivity");
  if (!env.is_root()) return 0;
  if (args.json) {
    Json j;
    j["status"] = "ok";
    j["objective"] = r.objective;
    Json grad = Json::object();
    for (std::size_t k = 0; k < out.parameter_names.size(); ++k) grad[out.parameter_names[k]] = out.gradient[k];
    j["gradient"] = grad;
    Json gy = Json::object();
    for (std::size_t k = 0; k < out.gradient_initial_state.size(); ++k)
      gy[cfg.state_names[k]] = out.gradient_initial_state[k];
    j["gradient_initial_state"] = gy;
    j["method"] = r.method;
    j["steps"] = out.steps;
    j["forward_steps"] = out.forward_steps;
    j["recomputed_steps"] = out.recomputed_steps;
    j["checkpoints"] = out.peak_snapshots;
    // As `run`: wall_seconds of the whole gradient (its own forward pass and
    // the sweeps), and of the forward integration alone (ode::integrate of
    // the same problem and integrator, the trajectory written to the file).
    j["wall_seconds"] = r.wall_seconds;
    j["forward_wall_seconds"] = sol.summary.wall_seconds;
    if (args.hessian) {
      const std::size_t m = out.parameter_names.size();
      Json rows = Json::array();
      for (std::size_t a = 0; a < m; ++a)
        rows.push_back(std::vector<double>(out.hessian.begin() + static_cast<std::ptrdiff_t>(a * m),
                                           out.hessian.begin() + static_cast<std::ptrdiff_t>((a + 1) * m)));
      j["hessian"] = {{"names", out.parameter_names},
                      {"matrix", rows},
                      {"asymmetry", hess.asymmetry},
                      {"products", hess.products},
                      {"wall_seconds", hess.wall_seconds}};
    }
    j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::ostringstream os;
  os.precision(12);
  os << r.brief_report() << "\n\n  objective J = " << r.objective << "\n\n";
  os << std::left << std::setw(22) << "  dJ/d" << "value\n";
  for (std::size_t k = 0; k < out.parameter_names.size(); ++k)
    os << "  " << std::setw(20) << out.parameter_names[k] << out.gradient[k] << "\n";
  for (std::size_t k = 0; k < out.gradient_initial_state.size(); ++k)
    os << "  " << std::setw(20) << (cfg.state_names[k] + "(t0)") << out.gradient_initial_state[k] << "\n";
  if (args.hessian) {
    const std::size_t m = out.parameter_names.size();
    os << "\n  Hessian d2J/dp2 (" << hess.products << " Hessian-vector products, "
       << (cfg.sensitivity.method == "cvodes_adjoint" ? "CVODES second-order adjoint"
                                                      : "forward over adjoint")
       << "; asymmetry " << std::setprecision(2) << hess.asymmetry << ")\n"
       << std::setprecision(8) << "  " << std::setw(12) << "";
    for (const auto& name : out.parameter_names) os << std::right << std::setw(16) << name;
    os << "\n";
    for (std::size_t a = 0; a < m; ++a) {
      os << "  " << std::left << std::setw(12) << out.parameter_names[a] << std::right;
      for (std::size_t b = 0; b < m; ++b) os << std::setw(16) << out.hessian[a * m + b];
      os << "\n";
    }
    os << std::left << std::setprecision(12);
  }
  os << "\n  wall time: gradient " << std::setprecision(3) << r.wall_seconds
     << " s, forward integration " << sol.summary.wall_seconds << " s\n";
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << "\n";
  std::cout << os.str();
  return 0;
}

int gradcheck(const costate::Environment& env, const RunArgs& args) {
  if (costate::cli::is_pde_input(args.input)) return pde(env, args, "gradcheck");
  RunConfig cfg = prepare(env, args, "gradcheck");
  // The Taylor test and central differences at x = (p, free y0), steps frozen.
  const costate::io::FileGradientCheck check = costate::io::file_gradient_check(cfg);
  const auto& [names, x, grad, J0, taylor, fd, passed] = check;
  if (!env.is_root()) return passed ? 0 : 1;
  if (args.json) {
    Json j;
    j["status"] = passed ? "ok" : "failed";
    j["objective"] = J0;
    j["taylor"] = {{"steps", taylor.steps},         {"residuals", taylor.residuals},
                   {"orders", taylor.orders},       {"min_order", taylor.min_order},
                   {"passed", taylor.passed}};
    Json comps = Json::object();
    for (std::size_t i = 0; i < x.size(); ++i) comps[names[i]] = {{"adjoint", grad[i]}, {"fd", fd.fd[i]}};
    j["finite_differences"] = {{"components", comps}, {"max_rel_error", fd.max_rel_error}, {"passed", fd.passed}};
    std::cout << j.dump() << std::endl;
  } else {
    std::ostringstream os;
    os << "Taylor test along a fixed direction (|J(x+hd) - J(x) - h<grad J, d>| should fall like h^2):\n"
       << taylor.report() << "\n\nCentral differences (initial values given as expressions of the "
       << "parameters are checked through them):\n";
    os.precision(12);
    os << "  " << std::left << std::setw(14) << "" << std::setw(22) << "adjoint" << "central difference\n";
    for (std::size_t i = 0; i < x.size(); ++i)
      os << "  " << std::left << std::setw(14) << names[i] << std::setw(22) << grad[i] << fd.fd[i] << "\n";
    os << fd.report() << "\n" << (passed ? "gradcheck: passed\n" : "gradcheck: FAILED\n");
    std::cout << os.str();
  }
  return passed ? 0 : 1;
}

/// `costate calibrate`: fit the calibration section's quantities with TAO,
/// report the fit, its uncertainty and identifiability. Exit status 0 when
/// TAO converged, 2 when it stopped without converging (results are still
/// reported and written, marked "partial"), 1 on errors.
int calibrate(const costate::Environment& env, const RunArgs& args) {
  namespace ode = costate::ode;
  RunConfig cfg = costate::io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  if (!cfg.calibration.present)
    throw costate::Error(args.input + ": costate calibrate needs a 'calibration:' section "
                         "(parameters to fit, data, optional regularization and optimizer)");
  const auto& cc = cfg.calibration;
  const bool talk = env.is_root() && !args.quiet;
  std::size_t observed = 0;
  for (std::size_t c = 0; c < cc.data.size(); ++c) observed += !std::isnan(cc.data[c]) && cc.weights[c] > 0.0;
  if (talk) {
    std::vector<std::string> names;
    for (const auto& v : cc.variables) names.push_back(v.label() + (v.log ? " (log)" : ""));
    std::cerr << "costate calibrate " << args.input << "\n  model      " << cfg.model << " (states "
              << join(cfg.state_names) << ")\n  fit        " << join(names) << "\n  data       "
              << observed << " values at " << cc.times.size() << " times from " << join(cc.data_files)
              << "\n  optimizer  TAO " << costate::optimize::to_string(cc.optimizer.method)
              << " (gatol " << cc.optimizer.gatol << ", grtol " << cc.optimizer.grtol
              << ", max_iterations " << cc.optimizer.max_iterations << ")\n  gradient   "
              << cfg.sensitivity.method << ", integrator " << ode::to_string(cfg.integrator.method)
              << "\n";
    if (cc.regularization_weight > 0) std::cerr << "  prior      weight " << cc.regularization_weight << "\n";
    std::cerr << "\n    it        objective        |gradient|\n";
  }
  // 1. The fit, with one progress line per iteration.
  costate::io::InterruptHandler interrupts;  // SIGINT/SIGTERM: stop after an iteration
  auto monitor = [&](const costate::optimize::Iteration& it) {
    if (talk)
      std::fprintf(stderr, "  %4d  %15.8e  %15.8e\n", it.iteration, it.objective, it.gradient_norm);
    costate::io::throw_if_interrupted("after iteration " + std::to_string(it.iteration) +
                                      " of the calibration (nothing written: rerun it)");
  };
  const costate::io::CalibrationReport rep = costate::io::calibrate(cfg, monitor);

  // 2. The trajectory at the fitted values, and the HDF5 output.
  const RunConfig& fit = rep.fitted;
  ode::Solution sol = costate::io::visit_model(fit, [&](auto model) {
    ode::Problem<decltype(model)> problem{model, fit.initial_state, fit.parameters,
                                          {fit.t_start, fit.t_end}, fit.output_times};
    return ode::integrate(problem, fit.integrator);
  });
  // The file's /parameters, /initial_state and /settings are the fitted ones.
  if (env.is_root() && !cfg.output_file.empty()) {
    if (sol.summary.success())
      costate::io::write_calibration_hdf5(cfg.output_file, fit, sol, rep);
    else
      std::cerr << "costate calibrate: warning: the model at the fitted values does not integrate ("
                << sol.summary.message << "); " << cfg.output_file << " not written\n";
  }
  if (!env.is_root()) return rep.converged ? 0 : 2;

  // 3. Report.
  const std::size_t p = rep.names.size();
  auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  if (args.json) {
    Json j;
    j["status"] = rep.converged ? "ok" : "not_converged";
    Json values = Json::object(), errors = Json::object(), corr = Json::object();
    for (std::size_t a = 0; a < p; ++a) {
      values[rep.names[a]] = rep.values[a];
      errors[rep.names[a]] = number(rep.standard_errors[a]);
      Json row = Json::object();
      for (std::size_t b = 0; b < p; ++b) row[rep.names[b]] = number(rep.correlation[a * p + b]);
      corr[rep.names[a]] = row;
    }
    j["parameters"] = values;
    j["standard_errors"] = errors;
    j["objective"] = rep.objective;
    j["iterations"] = rep.tao.iterations;
    j["termination"] = rep.tao.termination;
    j["converged"] = rep.converged;
    j["optimizer"] = rep.tao.method;
    j["gradient_method"] = rep.gradient_method;
    j["function_evaluations"] = rep.tao.function_evaluations;
    j["gradient_evaluations"] = rep.tao.gradient_evaluations;
    j["hessian_evaluations"] = rep.tao.hessian_evaluations;
    j["non_finite_evaluations"] = rep.tao.non_finite_evaluations;
    j["gradient_norm"] = rep.tao.gradient_norm;
    std::vector<double> fh, gh;
    for (const auto& it : rep.tao.history) {
      fh.push_back(it.objective);
      gh.push_back(it.gradient_norm);
    }
    j["objective_history"] = fh;
    j["gradient_norm_history"] = gh;
    j["initial"] = rep.initial;
    j["names"] = rep.names;
    j["correlation"] = corr;
    j["singular_values"] = rep.singular_values;
    std::vector<std::string> flagged;
    for (std::size_t a = 0; a < p; ++a)
      if (rep.unidentifiable[a]) flagged.push_back(rep.names[a]);
    j["unidentifiable"] = flagged;
    j["n_residuals"] = rep.n_residuals;
    j["rss"] = rep.rss;
    j["sigma2"] = number(rep.sigma2);
    j["sigma_estimated"] = rep.sigma_estimated;
    j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
    std::cout << j.dump() << std::endl;
    return rep.converged ? 0 : 2;
  }
  std::ostringstream os;
  os << "\n" << rep.tao.brief_report() << "\n"
     << (rep.converged ? "" : "WARNING: the optimizer stopped without converging; the values below "
                              "are its last iterate (the output file is marked partial)\n")
     << "\n  " << std::left << std::setw(14) << "quantity" << std::right << std::setw(16) << "initial"
     << std::setw(18) << "fitted" << std::setw(16) << "std. error" << std::setw(10) << "rel."
     << "\n";
  for (std::size_t a = 0; a < p; ++a) {
    char line[200];
    const double se = rep.standard_errors[a];
    std::snprintf(line, sizeof line, "  %-14s%16.8g%18.10g%16.4g%9.3g%%%s\n", rep.names[a].c_str(),
                  rep.initial[a], rep.values[a], se,
                  std::isfinite(se) ? 100.0 * se / std::abs(rep.values[a]) : se,
                  rep.unidentifiable[a] ? "  NOT DETERMINED by the data" : "");
    os << line;
  }
  os << "\n  objective " << std::setprecision(10) << rep.objective << ", weighted RSS " << rep.rss
     << " over " << rep.n_residuals << " values";
  if (rep.sigma_estimated) os << ", sigma^2 estimated as RSS/(m-p) = " << rep.sigma2;
  os << "\n  singular values of the scaled sensitivity matrix:";
  for (double s : rep.singular_values) os << " " << std::setprecision(4) << s;
  if (p > 1) {
    os << "\n  correlation:\n";
    for (std::size_t a = 0; a < p; ++a) {
      os << "    " << std::left << std::setw(12) << rep.names[a] << std::right;
      for (std::size_t b = 0; b < p; ++b) {
        char c[32];
        std::snprintf(c, sizeof c, "%8.3f", rep.correlation[a * p + b]);
        os << c;
      }
      os << "\n";
    }
  } else {
    os << "\n";
  }
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << " (/calibration: residuals per observation, histories)\n";
  std::cout << os.str();
  return rep.converged ? 0 : 2;
}

int info(const costate::Environment& env, bool json) {
  costate::BuildInfo b = costate::build_info();
  b.dependencies.emplace_back("CLI11", CLI11_VERSION);
  b.dependencies.emplace_back("nlohmann_json",
                              std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_PATCH));
  if (!env.is_root()) return 0;
  if (json) {
    Json j;
    j["status"] = "ok";
    j["costate_version"] = b.costate_version;
    j["compiler"] = b.compiler;
    j["build_type"] = b.build_type;
    Json deps = Json::object();
    for (const auto& [name, version] : b.dependencies) deps[name] = version;
    j["dependencies"] = deps;
    j["kokkos_backends"] = b.kokkos_backends;
    j["kokkos_default_execution_space"] = b.kokkos_default_space;
    j["petsc_configuration"] = b.petsc_configuration;
    j["hdf5_parallel"] = b.hdf5_parallel;
    j["mpi_size"] = b.mpi_size;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << "costate " << b.costate_version << " (" << b.build_type << ", " << b.compiler
            << ")\n\n";
  for (const auto& [name, version] : b.dependencies)
    std::cout << "  " << std::left << std::setw(15) << name << version << "\n";
  std::cout << "\n  Kokkos backends  " << join(b.kokkos_backends) << " (default "
            << b.kokkos_default_space << ")\n"
            << "  PETSc            " << b.petsc_configuration << "\n"
            << "  HDF5 parallel    " << (b.hdf5_parallel ? "yes" : "no") << "\n"
            << "  MPI ranks        " << b.mpi_size << "\n";
  return 0;
}

void report_error(const costate::Environment* env, const std::string& message, bool json) {
  const int rank = env ? env->rank() : 0;
  if (rank == 0) {
    std::cerr << "costate: error: " << message << std::endl;
    if (json) std::cout << Json{{"status", "error"}, {"message", message}}.dump() << std::endl;
  }
  if (env && env->size() > 1) {
    // Give rank 0 a moment to print before the job is torn down.
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"costate: gradients of ODE and PDE simulations", "costate"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("costate ") + COSTATE_VERSION_STRING);

  // The options every input-file subcommand shares.
  auto input_command = [&app](const char* name, const char* help, RunArgs& a, bool writes_output) {
    auto* cmd = app.add_subcommand(name, help);
    cmd->add_option("file", a.input, "YAML input file")->required();
    if (writes_output)
      cmd->add_option("-o,--output", a.output, "HDF5 output file (overrides output.file)");
    cmd->add_flag("--json", a.json, "print one JSON summary on stdout");
    cmd->add_option("--set", a.sets, "override a setting: --set integrator.rtol=1e-10")
        ->allow_extra_args(false);
    cmd->add_flag("-q,--quiet", a.quiet, "no settings echo or progress on stderr");
    return cmd;
  };
  RunArgs run_args, sens_args, check_args;
  auto* run_cmd = input_command("run", "integrate the model of an input file", run_args, true);
  run_cmd->add_option("--resume", run_args.resume,
                      "continue the interrupted run in this partial HDF5 output (same input and "
                      "--set options)");
  auto* sens_cmd = input_command(
      "sensitivity", "objective and its gradient (discrete adjoint or forward sensitivities)",
      sens_args, true);
  sens_cmd->add_flag("--hessian", sens_args.hessian,
                     "also the Hessian of the objective w.r.t. the parameters (forward over the "
                     "discrete adjoint; euler, rk4, dopri5, backward_euler, crank_nicolson)");
  auto* check_cmd = input_command(
      "gradcheck", "verify the gradient: Taylor test and finite differences", check_args, false);

  RunArgs cal_args;
  auto* cal_cmd = input_command(
      "calibrate", "fit parameters to data with PETSc TAO (-tao_* options override)", cal_args, true);
  cal_cmd->allow_extras();  // -tao_* options are PETSc's (read by PetscInitialize)

  bool info_json = false;
  auto* info_cmd = app.add_subcommand("info", "versions of costate and its dependencies");
  info_cmd->add_flag("--json", info_json, "print one JSON object on stdout");

  costate::cli::PlotArgs plot_args;
  auto* plot_cmd = app.add_subcommand("plot", "draw an HDF5 output file (Python, matplotlib)");
  plot_cmd->add_option("file", plot_args.input, "HDF5 output of costate")->required();
  plot_cmd->add_option("-o,--output", plot_args.output, "image file (default: FILE.png)");
  plot_cmd->add_option("--dpi", plot_args.dpi, "resolution (default 100)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (plot_cmd->parsed()) {  // no MPI, PETSc or Kokkos: a child Python process draws
    try {
      return costate::cli::plot_command(plot_args);
    } catch (const costate::Error& e) {
      report_error(nullptr, e.what(), false);
      return 1;
    }
  }

  const bool json = run_cmd->parsed()     ? run_args.json
                    : sens_cmd->parsed()  ? sens_args.json
                    : check_cmd->parsed() ? check_args.json
                    : cal_cmd->parsed()   ? cal_args.json
                                          : info_json;
  std::unique_ptr<costate::Environment> env;
  try {
    // Start only what the command needs: PETSc (and so MPI) for calibrate
    // (TAO) and PDE inputs; MPI otherwise only under mpiexec — a process
    // started alone skips Open MPI's singleton start-up (~0.4 s); Kokkos for
    // the commands that integrate.
    const std::string& input = run_cmd->parsed()    ? run_args.input
                               : sens_cmd->parsed()  ? sens_args.input
                               : check_cmd->parsed() ? check_args.input
                                                     : cal_args.input;
    const bool pde_input = !info_cmd->parsed() && costate::cli::is_pde_input(input);
    env = std::make_unique<costate::Environment>(
        argc, argv,
        costate::EnvironmentOptions{.petsc = cal_cmd->parsed() || pde_input,
                                    .kokkos = !info_cmd->parsed(),
                                    .mpi = costate::MpiStart::when_launched});
    int rc = 0;
    if (run_cmd->parsed()) rc = run(*env, run_args);
    if (sens_cmd->parsed()) rc = sensitivity(*env, sens_args);
    if (check_cmd->parsed()) rc = gradcheck(*env, check_args);
    if (cal_cmd->parsed()) rc = calibrate(*env, cal_args);
    if (info_cmd->parsed()) rc = info(*env, info_json);
    return rc;
  } catch (const costate::io::Interrupted& e) {
    return costate::io::report_interrupted(e, env ? env->rank() : 0, env ? env->size() : 1, json);
  } catch (const costate::Error& e) {
    report_error(env.get(), e.what(), json);
  } catch (const std::exception& e) {
    report_error(env.get(), std::string("unexpected failure: ") + e.what(), json);
  }
  return 1;
}
