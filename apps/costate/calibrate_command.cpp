// `costate calibrate FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
// [-tao_*]`: fit the calibration section's parameters (and initial states)
// to data with PETSc TAO and report the fit, standard errors, correlations
// and identifiability. Exit status 0 when TAO converged, 2 when it stopped
// without converging (results are still reported and written, marked
// "partial"), 1 on errors.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "costate/io/results_check.hpp"
#include "pde_commands.hpp"
#include "petab_command.hpp"
#include "costate/calibrate/calibrate.hpp"
#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/io/resume.hpp"
#include "costate/io/file_run.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/hdf5_writer.hpp"
#include "costate/io/output_file.hpp"
#include "costate/petab/stochastic.hpp"
#include "stochastic_cli.hpp"

namespace costate::cli {
namespace {

using Json = nlohmann::ordered_json;

/// The model, the fitted quantities and the data (stderr).
void echo_data(const io::RunConfig& cfg, const std::string& input) {
  const auto& cc = cfg.calibration;
  std::size_t observed = 0, times = cc.times.size();
  for (std::size_t c = 0; c < cc.data.size(); ++c) observed += !std::isnan(cc.data[c]) && cc.weights[c] > 0.0;
  for (const io::ConditionConfig& c : cfg.conditions) {
    times += c.times.size();
    for (double d : c.data) observed += !std::isnan(d);
  }
  std::vector<std::string> names;
  for (const auto& v : cc.variables) names.push_back(v.label() + (v.log ? " (log)" : ""));
  std::cerr << "costate calibrate " << input << "\n  model      " << cfg.model << " (states "
            << join(cfg.state_names) << ")\n  fit        " << join(names) << "\n  data       "
            << observed << " values at " << times << " times from " << join(cc.data_files);
  if (!cfg.conditions.empty()) std::cerr << " (" << cfg.conditions.size() << " conditions)";
}

/// The settings echo and the iteration table's header on stderr.
void echo(const io::RunConfig& cfg, const std::string& input) {
  const auto& cc = cfg.calibration;
  echo_data(cfg, input);
  std::cerr << "\n  optimizer  TAO " << optimize::to_string(cc.optimizer.method)
            << " (gatol " << cc.optimizer.gatol << ", grtol " << cc.optimizer.grtol
            << ", max_iterations " << cc.optimizer.max_iterations << ")\n  gradient   "
            << ode::to_string(cfg.sensitivity.method) << ", integrator " << ode::to_string(cfg.integrator.method)
            << "\n";
  if (cc.regularization_weight > 0) std::cerr << "  prior      weight " << cc.regularization_weight << "\n";
  std::cerr << "\n    it        objective        |gradient|\n";
}

void print_json(const io::RunConfig& cfg, const io::CalibrationReport& rep) {
  const std::size_t p = rep.names.size();
  auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  Json j;
  // "ok" at a converged optimum; else the fit status (optimize/fit_status.hpp).
  j["status"] = rep.verdict.status == optimize::FitStatus::Converged
                    ? std::string("ok")
                    : optimize::to_string(rep.verdict.status);
  j["convergence"] = {{"status", optimize::to_string(rep.verdict.status)}, {"test", rep.verdict.test}};
  if (!rep.verdict.at_optimum()) j["standard_errors_note"] = "standard errors " + rep.verdict.caveat();
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
  Json jh = Json::array();
  for (const auto& it : rep.tao.history) {
    fh.push_back(it.objective);
    gh.push_back(it.gradient_norm);
    jh.push_back(number(it.objective_gradient_norm));
  }
  j["objective_history"] = fh;
  j["gradient_norm_history"] = gh;  // TAO's residual
  j["objective_gradient_norm_history"] = jh;  // ‖∇J‖₂ at each iterate
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
  if (!cfg.conditions.empty()) {  // the residuals above run over the conditions in order
    j["conditions"] = cfg.conditions.size();
    j["residual_conditions"] = rep.residual_conditions;
  }
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  j["warnings"] = cfg.warnings;
  std::cout << j.dump() << std::endl;
}

void print_text(const io::RunConfig& cfg, const io::CalibrationReport& rep) {
  const std::size_t p = rep.names.size();
  std::ostringstream os;
  os << "\n" << rep.tao.brief_report() << "\n  fit: " << rep.verdict.describe() << "\n"
     << (rep.verdict.at_optimum()
             ? ""
             : "WARNING: the optimizer stopped without converging; the values below are its last "
               "iterate and their standard errors are " + rep.verdict.caveat() +
                   " (the output file is marked partial)\n")
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
  os << warnings_text(cfg.warnings);
  std::cout << os.str();
}

/// calibration.optimizer.method adamw | adam | sgd, or --optimizer: the
/// fit by mini-batches over the file's conditions (io::calibrate_stochastic),
/// shaped as the PEtab one (petab_fit_command.cpp): the same flags, progress,
/// --resume state file and report ("epochs"); the output is /stochastic of
/// petab::write_stochastic_hdf5 (llh NaN: an input file's objective is a
/// least-squares misfit, reported as "objective"); --json prints the report.
int calibrate_stochastic(const Environment& env, const CommandArgs& args, const io::RunConfig& cfg) {
  const std::string& path = args.input;
  const optimize::StochasticOptions options =
      stochastic_options(args, cfg.calibration.stochastic_options, "conditions");
  const std::string out = !args.output.empty() ? args.output : !args.resume.empty() ? args.resume : cfg.output_file;
  if (!out.empty() && !out.ends_with(".h5"))  // (main refuses -o of another kind first)
    throw Error(path + ": output " + out + ": a stochastic fit writes a file ending in .h5");
  if (!out.empty() && env.is_root()) io::check_output_path(out, {path});
  optimize::StochasticState resumed;
  if (!args.resume.empty()) resumed = petab::read_stochastic_state_hdf5(args.resume, path, options);
  const bool talk = env.is_root() && !args.quiet && !args.json;
  if (talk) {
    echo_data(cfg, path);
    std::cerr << "\n  optimizer  " << optimize::to_string(options.method) << ", " << options.epochs
              << " epochs over " << io::condition_count(cfg) << " conditions, batch "
              << (options.batch == 0 ? std::string("all") : std::to_string(options.batch)) << ", learning rate "
              << options.learning_rate << ", seed " << options.seed << ", over " << env.size() << " rank(s)\n  gradient   "
              << ode::to_string(cfg.sensitivity.method) << ", integrator " << ode::to_string(cfg.integrator.method)
              << "\n";
  }
  optimize::StochasticCallbacks callbacks;
  if (talk) callbacks.on_epoch = print_epochs(options);
  if (env.is_root() && !args.quiet) callbacks.on_restart = print_restarts(options);
  io::InterruptHandler interrupts;  // SIGINT/SIGTERM: stop after a step, keep the state
  int signal = 0;
  callbacks.on_step = stop_on_signal(env, signal, checkpoint_to(env, path, out, options));
  const io::StochasticCalibration fit =
      io::calibrate_stochastic(cfg, options, callbacks, args.resume.empty() ? nullptr : &resumed, env.comm());
  const optimize::StochasticResult& r = fit.result;
  if (r.termination == "interrupted") stop_interrupted(env, path, out, options, r, signal);
  const bool completed = r.termination == "epochs" || r.termination == "early_stopping";
  const bool finite = std::isfinite(r.objective);
  const optimize::FitVerdict verdict = stochastic_verdict(r, options);
  Json j;
  std::vector<std::string> warnings = cfg.warnings;
  const int status = add_stochastic_verdict(j, verdict, completed, finite, warnings);
  if (env.rank() != 0) return status;
  j["input"] = path;
  j["optimizer"] = optimize::to_string(options.method);
  j["termination"] = r.termination;
  j["objective"] = json_number(r.objective);
  Json values = Json::object(), scaled = Json::object();
  for (std::size_t a = 0; a < fit.names.size(); ++a) {
    values[fit.names[a]] = fit.values[a];
    scaled[fit.names[a]] = r.x[a];
  }
  j["parameters"] = values;        // natural values
  j["optimizer_variables"] = scaled;  // q: log for log-scale quantities
  if (!fit.standard_errors.empty()) {  // at a converged full-batch finish
    Json errors = Json::object();
    for (std::size_t a = 0; a < fit.names.size(); ++a) errors[fit.names[a]] = json_number(fit.standard_errors[a]);
    j["standard_errors"] = errors;
  }
  j["conditions"] = io::condition_count(cfg);
  add_stochastic_json(j, r, options);
  j["warnings"] = warnings;
  if (!out.empty()) {
    petab::StochasticFit as_written;
    as_written.fit_status = optimize::to_string(verdict.status);
    as_written.convergence = verdict.describe();
    as_written.ids = fit.names;
    as_written.initial = fit.initial;
    as_written.result = r;
    as_written.llh = std::numeric_limits<double>::quiet_NaN();
    as_written.standard_errors = fit.standard_errors;
    // The settings as run (the command line's options in the file's
    // calibration.optimizer): they load back as an input file.
    io::RunConfig as_run = cfg;
    as_run.calibration.stochastic = true;
    as_run.calibration.stochastic_options = options;
    as_run.output_file = out;
    petab::write_stochastic_hdf5(out, as_written, options, path, {"calibrate", as_run.to_yaml()});
  }
  if (args.json) {
    std::cout << j.dump() << std::endl;
    return status;
  }
  std::cout << std::setprecision(12) << "objective " << r.objective << " (" << r.termination << ", "
            << r.epochs.size() << " epochs, " << r.steps << " steps, " << r.simulations
            << " condition simulations, " << r.rescues << " rescues, " << r.restarts
              << " restarts)\nfitted:\n";
  for (std::size_t a = 0; a < fit.names.size(); ++a) {
    std::cout << "  " << std::left << std::setw(20) << fit.names[a] << std::right << fit.values[a];
    if (!fit.standard_errors.empty()) std::cout << " ± " << fit.standard_errors[a];
    std::cout << "\n";
  }
  print_stochastic_tail(r, options, verdict, finite, "objective", out, warnings);
  return status;
}

}  // namespace

int calibrate_command(const Environment& env, const CommandArgs& args) {
  if (is_petab_input(args.input)) return petab_calibrate(env, args);  // docs/petab.md
  // A missing file is reported as one by the reader below, not as a flag
  // meant for another kind of input.
  const bool readable = std::filesystem::is_regular_file(args.input);
  const bool stochastic_flags = !args.optimizer.empty() || args.epochs != -1 || args.batch != -1 ||
                                args.physical_batch != -1 || !std::isnan(args.learning_rate) ||
                                !std::isnan(args.validation_split) || args.finish != -1 || args.seed >= 0;
  if (readable && (args.starts >= 0 || !args.sampling.empty()))
    throw Error(args.input + ": --starts and --sampling are for PEtab problems (a YAML file with "
                "format_version and problems); a costate input file starts from its "
                "calibration section's initial values");
  // A PDE input: the parameter-field inversion (docs/pde_inverse.md).
  if (readable && is_pde_input(args.input) && stochastic_flags)
    throw Error(args.input + ": --optimizer, --seed and the stochastic-fit options are for PEtab problems and "
                "ODE input files (with conditions); a PDE input is fitted by its calibration section");
  if (is_pde_input(args.input)) {
    if (!args.resume.empty())
      throw Error(args.input + ": --resume continues an ODE calibration (a costate input file "
                  "without pde:); a PDE calibration does not resume");
    return pde(env, args, "calibrate");
  }
  io::RunConfig cfg = io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  if (!cfg.calibration.present)
    throw Error(args.input + ": costate calibrate needs a 'calibration:' section "
                "(parameters to fit, data, optional regularization and optimizer)");
  // A stochastic fit: calibration.optimizer.method adamw | adam | sgd, or
  // --optimizer (tao: the full-batch fit whatever the file says).
  const bool stochastic = args.optimizer.empty() ? cfg.calibration.stochastic : args.optimizer != "tao";
  if (stochastic) return calibrate_stochastic(env, args, cfg);
  if (stochastic_flags && args.optimizer != "tao")
    throw Error(args.input + ": --epochs, --batch, --physical-batch, --learning-rate, --validation-split, "
                "--finish and --seed set a stochastic fit: add --optimizer adamw, adam or sgd (or "
                "calibration.optimizer.method in the file)");
  const bool talk = env.is_root() && !args.quiet;
  // --resume: the journal of the interrupted fit; the finished one is
  // written there (unless -o names another file), as `run --resume` does.
  io::CalibrationJournal journal;
  if (!args.resume.empty()) {
    journal = io::read_calibration_partial(args.resume, cfg);
    if (args.output.empty()) cfg.output_file = args.resume;
  }
  if (talk) echo(cfg, args.input);
  if (talk && !args.resume.empty())
    std::cerr << "  (resuming " << args.resume << ": " << journal.entries.size()
              << " recorded evaluations, to iteration " << journal.last_iteration
              << ", replayed through TAO, then new ones)\n";
  // 1. The fit, with one progress line per iteration. With an output file,
  //    the evaluation journal is kept there (marked partial) after every
  //    iteration, so that a stopped or killed fit resumes (io/resume.hpp).
  const bool keep = env.is_root() && !cfg.output_file.empty();
  std::size_t kept = journal.entries.size();
  auto keep_journal = [&](int signal) {
    io::write_calibration_partial(cfg.output_file, cfg, journal, signal);
    kept = journal.entries.size();
  };
  io::InterruptHandler interrupts;  // SIGINT/SIGTERM: stop after an iteration
  auto monitor = [&](const optimize::Iteration& it) {
    if (talk) {
      clear_progress_line();
      std::fprintf(stderr, "  %4d  %15.8e  %15.8e%s\n", it.iteration, it.objective,
                   it.gradient_norm, journal.entries.size() <= journal.recorded ? "  (replayed)" : "");
    }
    journal.last_iteration = it.iteration;
    if (keep && journal.entries.size() > kept) keep_journal(0);
    io::throw_if_interrupted("after iteration " + std::to_string(it.iteration) +
                             " of the calibration");
  };
  io::CalibrationReport rep;
  try {
    rep = io::calibrate(cfg, monitor, &journal);
  } catch (const io::Interrupted& e) {
    std::string message = e.what();
    if (keep) {
      keep_journal(e.signal());
      message += "; wrote its " + std::to_string(journal.entries.size()) +
                 " evaluations to " + cfg.output_file + ", marked partial; continue with: "
                 "costate calibrate " + args.input + " --resume " + cfg.output_file +
                 " (and the same --set and -tao_* options)";
    } else {
      message += cfg.output_file.empty()
                     ? "; no output file (-o), nothing kept: rerun it (with -o to be able to resume)"
                     : "";
    }
    throw io::Interrupted(e.signal(), message);
  }

  // 2. The trajectory at the fitted values, and the HDF5 output. With
  //    conditions, every condition's (in /conditions, as `run` writes
  //    them); the fitted parameters are the file's.
  const io::RunConfig& fit = rep.fitted;
  std::vector<io::RunConfig> problems;
  std::vector<ode::Solution> trajectories;
  for (std::size_t c = 0; c < io::condition_count(fit); ++c) {
    problems.push_back(io::condition_config(fit, c));
    trajectories.push_back(io::integrate_file(problems.back()));
    if (!trajectories.back().summary.success()) break;  // reported below
  }
  const ode::Solution& sol = trajectories.back();
  // "ok" means finite: a fit whose objective or trajectory is not is no result.
  if (!std::isfinite(rep.objective))
    throw Error(cfg.input_path + ": the calibration's objective at its last point is " +
                costate::detail::format_value(rep.objective) +
                " — not a result; check the bounds of the fitted parameters and the model "
                "(try an implicit method, integrator.method: bdf, if it is stiff)");
  const std::string which =
      fit.conditions.empty() ? "" : ", condition '" + fit.conditions[problems.size() - 1].id + "'";
  if (sol.summary.success())
    for (std::size_t c = 0; c < problems.size(); ++c)
      io::check_finite_trajectory(problems[c], trajectories[c],
                                  "the model at the fitted values" +
                                      (fit.conditions.empty() ? "" : ", condition '" + fit.conditions[c].id + "'"));
  for (const ode::Solution& s : trajectories)
    add_integration_warnings(s.summary, cfg.warnings);  // stiff at the fitted values
  // The file's /parameters, /initial_state and /settings are the fitted ones.
  if (env.is_root() && !cfg.output_file.empty()) {
    if (sol.summary.success() && fit.conditions.empty())
      io::write_calibration_hdf5(cfg.output_file, fit, sol, rep);
    else if (sol.summary.success())
      io::write_calibration_hdf5(cfg.output_file, fit, problems, trajectories, rep);
    else {
      // The fit's journal (kept there while it ran) would only replay to
      // the same end: removed, so that no stale partial file is left.
      std::error_code ec;
      std::filesystem::remove(cfg.output_file, ec);
      std::cerr << "costate calibrate: warning: the model at the fitted values" << which
                << " does not integrate (" << sol.summary.message << "); " << cfg.output_file
                << " not written\n";
    }
  }
  if (!env.is_root()) return rep.verdict.at_optimum() ? 0 : 2;

  // 3. Report.
  if (args.json)
    print_json(cfg, rep);
  else
    print_text(cfg, rep);
  return rep.verdict.at_optimum() ? 0 : 2;
}

}  // namespace costate::cli
