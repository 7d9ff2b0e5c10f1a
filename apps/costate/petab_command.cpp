// The commands on PEtab problems (petab_command.hpp).
#include "petab_command.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

#include "costate/core/error.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/input_text.hpp"
#include "costate/optimize/fit_status.hpp"
#include "costate/petab/calibrate.hpp"
#include "costate/petab/check.hpp"
#include "costate/petab/output.hpp"
#include "costate/petab/problem.hpp"

namespace costate::cli {

bool is_petab_input(const std::string& path) { return petab::is_problem_file(path); }

namespace {

/// The evaluation options of a PEtab command: petab::Options' defaults with
/// the --set overrides of the integrator and the sensitivity method applied.
/// The keys, their values and their errors are the input files' own: the
/// overrides are applied to an input file holding PEtab's defaults
/// (integrator cvodes_bdf, rtol 1e-10, atol 1e-12; sensitivity.method
/// cvodes_adjoint) and read by io::load_run_config_text, so an unknown key
/// or a method that does not combine with the integrator is refused with the
/// same message, nearest key included. The rest of an input file (model,
/// parameters, time, objective) comes from the PEtab tables, so only
/// integrator.* and sensitivity.* are taken (sensitivity.wrt is not: the
/// gradient is over the parameter table's estimated parameters).
/// calibration.optimizer.* is a stochastic fit's (petab_optimizer_sets), so
/// skipped here — and refused without --optimizer adamw|adam|sgd.
petab::Options options_of(const CommandArgs& args) {
  petab::Options options;
  if (args.sets.empty()) return options;
  const std::vector<std::string> sections{"integrator", "sensitivity", "calibration"};
  bool sensitivity = false;
  std::vector<std::string> sets;
  for (const std::string& text : args.sets) {
    const std::string key = text.substr(0, text.find('='));
    const std::string head = key.substr(0, key.find('.'));
    if (head == "calibration") {
      if (!key.starts_with("calibration.optimizer."))
        throw Error(args.input + ": --set " + text +
                    ": a PEtab problem takes only calibration.optimizer.* (a stochastic fit's settings); its "
                    "parameters, data and noise come from the PEtab tables");
      if (args.optimizer.empty() || args.optimizer == "tao")
        throw Error(args.input + ": --set " + text +
                    ": calibration.optimizer.* sets a stochastic fit of a PEtab problem: use it with "
                    "`costate calibrate --optimizer adamw|adam|sgd`");
      continue;
    }
    sets.push_back(text);
    if (std::find(sections.begin(), sections.end(), head) == sections.end()) {
      std::string msg = args.input + ": --set " + text + ": unknown key '" + head + "' for a PEtab problem";
      const std::string near = io::nearest(head, sections);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      throw Error(msg + " Valid keys: integrator.*, sensitivity.*, calibration.optimizer.* (with --optimizer "
                        "adamw|adam|sgd; the model, parameters, data and noise come from the PEtab tables)");
    }
    if (key == "sensitivity.wrt" || key.starts_with("sensitivity.wrt."))
      throw Error(args.input + ": --set " + text +
                  ": not for a PEtab problem (the gradient is with respect to the parameter "
                  "table's estimated parameters)");
    sensitivity = sensitivity || head == "sensitivity";
  }
  if (sets.empty()) return options;
  const petab::Options defaults;
  std::ostringstream base;
  base.precision(17);
  base << "model: {states: [x], equations: {x: \"0\"}}\ninitial_state: {x: 0}\n"
       << "time: {end: 1}\n"
       << "integrator: {method: " << ode::to_string(defaults.integrator.method)
       << ", rtol: " << defaults.integrator.rtol << ", atol: " << defaults.integrator.atol << "}\n"
       << "sensitivity: {method: cvodes_adjoint}\n";
  const io::RunConfig cfg = io::load_run_config_text(base.str(), "the PEtab defaults", sets);
  if (!cfg.integrator.atol_per_state.empty())
    throw Error(args.input + ": --set integrator.atol: a number for a PEtab problem (one absolute "
                             "tolerance for every state; per-state values are for input files)");
  options.integrator = cfg.integrator;
  if (sensitivity) {
    options.method = io::sensitivity_method_of(cfg.sensitivity);
    // The PEtab default's forward pass at 1e-2 × the tolerances
    // (petab::kAdjointForwardTolerance) is kept for cvodes_adjoint: input
    // files have no key for it.
    if (auto* a = std::get_if<ode::CvodesAdjoint>(&options.method))
      a->forward_tolerance_factor = petab::kAdjointForwardTolerance;
  }
  return options;
}

/// The fields every PEtab command's JSON starts with.
nlohmann::ordered_json json_head(const std::string& path, const petab::Result& r) {
  nlohmann::ordered_json j;
  j["status"] = "ok";
  j["problem"] = path;
  j["llh"] = r.llh;
  j["chi2"] = r.chi2;
  j["log_prior"] = r.log_prior;
  j["warnings"] = nlohmann::ordered_json::array();  // none found for a PEtab evaluation
  // What was integrated (petab::Result; all ranks').
  j["steps"] = r.steps;
  j["backward_steps"] = r.backward_steps;
  j["rhs_evaluations"] = r.rhs_evaluations;
  return j;
}

/// The FIM as text: the matrix (up to 12 parameters; beyond, its diagonal),
/// then its eigenvalue range and numerical rank.
void print_fim(std::ostream& os, const std::vector<std::string>& ids, const std::vector<double>& fim) {
  const std::size_t n = ids.size();
  constexpr std::size_t kFullUpTo = 12;
  os << "Fisher information (estimated parameters on their scales";
  if (n <= kFullUpTo) {
    os << "; rows and columns in this order):\n";
    for (std::size_t a = 0; a < n; ++a) {
      os << "  " << std::left << std::setw(28) << ids[a] << std::right;
      for (std::size_t b = 0; b < n; ++b) os << std::setw(14) << std::setprecision(6) << fim[a * n + b];
      os << "\n";
    }
  } else {
    os << "; its diagonal, the whole matrix in --json and -o OUT.h5):\n";
    for (std::size_t a = 0; a < n; ++a)
      os << "  " << std::left << std::setw(28) << ids[a] << std::right << std::setprecision(6)
         << fim[a * n + a] << "\n";
  }
  if (n == 0) return;
  const Eigen::Map<const Eigen::MatrixXd> F(fim.data(), static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(F, Eigen::EigenvaluesOnly);
  const Eigen::VectorXd ev = eig.eigenvalues();  // ascending
  constexpr double kRankTol = 1e-10;  // relative eigenvalue below which a direction counts as unidentified
  std::size_t rank = 0;
  for (Eigen::Index i = 0; i < ev.size(); ++i) rank += ev(i) > kRankTol * ev(ev.size() - 1);
  os << "  eigenvalues " << std::setprecision(4) << ev(0) << " … " << ev(ev.size() - 1) << "; rank " << rank
     << " of " << n << " (eigenvalues above " << kRankTol << " of the largest)\n";
}

}  // namespace

int petab_sensitivity(const Environment& env, const CommandArgs& args) {
  const std::string& path = args.input;
  if (args.fim && args.no_fim) throw Error(path + ": --fim and --no-fim: give one of them");
  if (args.hessian)
    throw Error(path + ": --hessian is for costate input files; for a PEtab problem ask for the "
                       "Fisher information (--fim)");
  petab::Options options = options_of(args);
  const std::string& out = args.output;
  if (!out.empty() && !out.ends_with(".h5"))
    throw Error(path + ": -o " + out + ": expected an output file ending in .h5");
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const petab::Problem problem = petab::read(path);
  const auto t1 = clock::now();
  if (!args.quiet && !args.json && env.rank() == 0) std::cerr << problem.brief_report() << "\n";
  // The gradient first; the Fisher information only with --fim. With
  // cvodes_forward the gradient's forward sensitivities are the FIM's, so
  // one pass gives both (its time is the gradient's).
  options.gradient = true;
  const bool fim_asked = args.fim;
  const bool fim_with_gradient =
      fim_asked && std::holds_alternative<ode::CvodesForward>(options.method) && options.seed_initial_sensitivities;
  options.fim = fim_with_gradient;
  // Experiments over the ranks (collective; every rank gets the whole result).
  petab::Result all = petab::evaluate(problem, problem.nominal_on_scale(), options, env.comm());
  const auto t2 = clock::now();
  if (fim_asked && !fim_with_gradient) {
    petab::Options f = options;
    f.gradient = false;
    f.fim = true;
    all.fim = petab::evaluate(problem, problem.nominal_on_scale(), f, env.comm()).fim;
  }
  const auto t3 = clock::now();
  const petab::Result& r = all;
  if (!out.empty() && env.rank() == 0)
    petab::write_result_hdf5(problem, all, out, {"sensitivity", petab::settings_yaml(problem, options)});
  const std::vector<std::string> ids = problem.estimated_ids();
  if (env.rank() != 0) return 0;
  const double load = std::chrono::duration<double>(t1 - t0).count();
  const double grad = std::chrono::duration<double>(t2 - t1).count();
  const double first = std::chrono::duration<double>(t2 - t0).count();
  const double fim_seconds = fim_asked && !fim_with_gradient ? std::chrono::duration<double>(t3 - t2).count() : 0.0;
  const std::size_t n = ids.size();
  if (args.json) {
    nlohmann::ordered_json j = json_head(path, r);
    j["method"] = ode::to_string(options.method);
    j["gradient_method"] = r.gradient_method;  // differs for a model with events (petab::Result)
    j["integrator"] = {{"method", ode::to_string(options.integrator.method)},
                       {"rtol", options.integrator.rtol},
                       {"atol", options.integrator.atol}};
    nlohmann::ordered_json g = nlohmann::ordered_json::object();
    for (std::size_t e = 0; e < n; ++e) g[ids[e]] = r.gradient[e];
    j["gradient"] = g;
    j["parameter_ids"] = ids;  // the order of the fim's rows and columns
    if (fim_asked) {
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (std::size_t a = 0; a < n; ++a)
        rows.push_back(std::vector<double>(all.fim.begin() + static_cast<std::ptrdiff_t>(a * n),
                                           all.fim.begin() + static_cast<std::ptrdiff_t>((a + 1) * n)));
      j["fim"] = rows;
    } else {
      j["fim"] = nullptr;
    }
    j["output_file"] = out.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(out);
    j["load_seconds"] = load;
    j["gradient_seconds"] = grad;
    j["first_gradient_seconds"] = first;  // from the command's start: load + gradient
    j["fim_seconds"] = fim_seconds;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << std::setprecision(15) << "llh  " << r.llh << "\nchi2 " << r.chi2 << "\n";
  if (r.log_prior != 0.0) std::cout << "log prior " << r.log_prior << "\n";
  std::cout << "gradient of llh (estimated parameters, on their scales; " << r.gradient_method
            << "):\n";
  for (std::size_t e = 0; e < n; ++e)
    std::cout << "  " << std::left << std::setw(28) << ids[e] << std::right << r.gradient[e] << "\n";
  if (fim_asked) print_fim(std::cout, ids, all.fim);
  std::cout << std::setprecision(3) << "first gradient after " << first << " s (load " << load
            << " s, gradient " << grad << " s; " << r.steps << " forward and " << r.backward_steps
            << " backward steps)";
  if (fim_asked)
    std::cout << (fim_with_gradient ? "; Fisher information from the gradient's forward sensitivities"
                                    : "; Fisher information ")
              << (fim_with_gradient ? std::string() : [&] {
                   std::ostringstream t;
                   t.precision(3);
                   t << fim_seconds << " s";
                   return t.str();
                 }());
  std::cout << "\n";
  if (!out.empty()) std::cout << "wrote " << out << "\n";
  return 0;
}

int petab_run(const Environment& env, const CommandArgs& args) {
  const std::string& path = args.input;
  const petab::Options options = options_of(args);
  if (!args.resume.empty()) throw Error(path + ": --resume is for costate input files, not PEtab problems");
  std::string stem = args.output;
  if (stem.empty()) {
    stem = std::filesystem::path(path).stem().string() + "_simulations";
  } else if (stem.ends_with(".tsv") || stem.ends_with(".h5")) {
    stem = stem.substr(0, stem.rfind('.'));
  } else {
    throw Error(path + ": -o " + stem + ": expected an output file ending in .tsv or .h5 (both are written)");
  }
  const std::string tsv = stem + ".tsv", h5 = stem + ".h5";
  const auto t0 = std::chrono::steady_clock::now();
  const petab::Problem problem = petab::read(path);
  if (!args.quiet && !args.json && env.rank() == 0) std::cerr << problem.brief_report() << "\n";
  const petab::Result r = petab::evaluate(problem, problem.nominal_on_scale(), options, env.comm());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // "ok" means finite (issue 35): a NaN or infinite llh is no result — an
  // error on every rank naming the first measurement whose simulation is
  // not finite, and no file written.
  if (!std::isfinite(r.llh)) {
    std::string where;
    for (std::size_t i = 0; i < r.simulations.size() && i < problem.measurements.size(); ++i)
      if (!std::isfinite(r.simulations[i])) {
        const petab::Measurement& m = problem.measurements[i];
        std::ostringstream os;
        os.precision(16);
        os << ": the simulation of the measurement on line " << m.line << " of "
           << (m.file < problem.measurement_files.size() ? problem.measurement_files[m.file] : "the measurements")
           << " (observable " << problem.observables[m.observable].id << ", time " << m.time << ") is "
           << r.simulations[i] << " — check that observable's formula (log or sqrt of negative values, "
           << "division by zero) and the model";
        where = os.str();
        break;
      }
    throw Error(path + ": the log-likelihood at the nominal parameters is " + ::costate::detail::format_value(r.llh) +
                ", not a result" +
                (where.empty() ? std::string("; check the noise formulas and the model (nothing written)")
                               : where + " (nothing written)"));
  }
  if (env.rank() != 0) return 0;
  petab::write_simulation_table(problem, r, tsv);
  petab::write_result_hdf5(problem, r, h5, {"run", petab::settings_yaml(problem, options)});
  if (args.json) {
    nlohmann::ordered_json j = json_head(path, r);
    j["simulations"] = r.simulations;  // measurement-table order
    j["simulation_table"] = tsv;
    j["output_file"] = h5;
    j["seconds"] = seconds;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << std::setprecision(15) << "llh  " << r.llh << "\nchi2 " << r.chi2 << "\n"
            << problem.experiments.size() << " simulation(s), " << problem.measurements.size()
            << " simulated measurements in " << std::setprecision(3) << seconds << " s\nwrote " << tsv
            << " and " << h5 << "\n";
  return 0;
}

io::FileGradientCheck petab_gradient_check(const Environment& env, const CommandArgs& args) {
  const petab::Options options = options_of(args);
  const petab::Problem problem = petab::read(args.input);
  if (!args.quiet && !args.json && env.rank() == 0)
    std::cerr << problem.brief_report() << "\ngradcheck: llh at the nominal values, "
              << ode::to_string(options.method) << " gradient\n";
  const petab::GradientCheck c = petab::gradient_check(problem, problem.nominal_on_scale(), options, env.comm());
  return {c.ids, c.theta, c.gradient, c.llh, c.taylor, c.fd, c.passed, {}};
}

petab::Options petab_options(const CommandArgs& args) { return options_of(args); }

std::vector<std::string> petab_optimizer_sets(const CommandArgs& args) {
  std::vector<std::string> out;
  for (const std::string& text : args.sets)
    if (text.starts_with("calibration.")) out.push_back(text);
  return out;
}

int petab_calibrate(const Environment& env, const CommandArgs& args) {
  const std::string& path = args.input;
  if (!args.optimizer.empty() && args.optimizer != "tao") return petab_calibrate_stochastic(env, args);
  if (args.epochs != -1 || args.batch != -1 || args.physical_batch != -1 || !std::isnan(args.learning_rate) ||
      !std::isnan(args.validation_split) || args.finish != -1)
    throw Error(path + ": --epochs, --batch, --physical-batch, --learning-rate, --validation-split and --finish "
                "set a stochastic fit: add --optimizer adamw, adam or sgd");
  const petab::Options evaluation = options_of(args);
  if (args.starts == 0 || args.starts < -1)
    throw Error(path + ": --starts " + std::to_string(args.starts) +
                ": expected a number of starts ≥ 1 (omit it for one start at the nominal values)");
  if (args.seed < -1)
    throw Error(path + ": --seed " + std::to_string(args.seed) + ": expected a seed ≥ 0");
  if (args.seed >= 0 && args.starts < 0)
    throw Error(path + ": --seed needs --starts N (the seed draws the starts)");
  if (!args.sampling.empty() && args.starts < 0)
    throw Error(path + ": --sampling needs --starts N (it says how the starts are drawn)");
  const petab::Sampling sampling = args.sampling.empty() ? petab::Sampling::LatinHypercube : [&] {
    try {
      return petab::sampling_from_string(args.sampling);
    } catch (const Error& e) {
      throw Error(path + ": --" + e.what());
    }
  }();
  const std::string& out = args.output;
  const bool to_json = out.size() > 5 && out.ends_with(".json");
  if (!out.empty() && !to_json && !out.ends_with(".h5"))
    throw Error(path + ": -o " + out + ": expected an output file ending in .h5 or .json");
  const petab::Problem problem = petab::read(path);
  petab::CalibrationOptions options;
  options.evaluation.integrator = evaluation.integrator;
  options.evaluation.method = evaluation.method;
  options.starts = std::max(0, args.starts);
  options.seed = static_cast<std::uint64_t>(std::max(0LL, args.seed));
  options.sampling = sampling;
  const bool talk = env.is_root() && !args.quiet && !args.json;
  if (talk)
    std::cerr << problem.brief_report() << "\ncalibrate: "
              << (options.starts == 0 ? std::string("one start at the nominal values")
                                      : std::to_string(options.starts) + " starts (" +
                                            petab::to_string(options.sampling) + ", seed " +
                                            std::to_string(options.seed) + ") over " +
                                            std::to_string(env.size()) + " rank(s)")
              << ", TAO " << optimize::to_string(options.optimizer.method) << ", "
              << ode::to_string(options.evaluation.method) << " gradients\n";
  const petab::Calibration c = petab::calibrate(problem, options, env.comm());
  if (env.rank() != 0) return c.best().converged ? 0 : 2;  // rank 0's status (a stall) is reported there

  const petab::StartFit& best = c.best();
  // The best start's status in the calibrations' one vocabulary
  // (optimize/fit_status.hpp): a stall is judged against the gradient's
  // change with the integrator's tolerances tightened kTighter-fold.
  optimize::FitEnd end{.converged = best.converged, .reason = best.termination};
  if (!best.converged && !best.failed && optimize::is_stall_reason(best.termination)) {
    try {
      petab::Options at = options.evaluation, tight = options.evaluation;
      at.gradient = tight.gradient = true;
      at.fim = tight.fim = false;
      tight.integrator.rtol *= optimize::kTighter;
      tight.integrator.atol *= optimize::kTighter;
      for (double& a : tight.integrator.atol_per_state) a *= optimize::kTighter;
      const std::vector<double> g = petab::evaluate(problem, best.x, at).gradient;
      const std::vector<double> gt = petab::evaluate(problem, best.x, tight).gradient;
      double gn = 0.0, dn = 0.0;
      for (std::size_t e = 0; e < g.size(); ++e) {
        gn += g[e] * g[e];
        dn += (g[e] - gt[e]) * (g[e] - gt[e]);
      }
      end.gradient_norm = std::sqrt(gn);
      end.gradient_noise = std::sqrt(dn);
    } catch (const Error&) {
      // Not integrable at the tighter tolerances: the noise stays unmeasured.
    }
  }
  const optimize::FitVerdict verdict = optimize::judge_fit(end);
  nlohmann::ordered_json j;
  j["status"] = verdict.status == optimize::FitStatus::Converged ? std::string("ok")
                                                                 : optimize::to_string(verdict.status);
  j["convergence"] = {{"status", optimize::to_string(verdict.status)}, {"test", verdict.test}};
  j["warnings"] = verdict.at_optimum() ? nlohmann::ordered_json::array()
                                       : nlohmann::ordered_json::array({"the best fit is " + verdict.caveat()});
  j["problem"] = path;
  j["llh"] = best.llh;
  j["objective"] = best.objective;
  nlohmann::ordered_json x = nlohmann::ordered_json::object();
  for (std::size_t e = 0; e < c.ids.size(); ++e) x[c.ids[e]] = best.x[e];
  j["parameters"] = x;  // on their scales
  j["best_start"] = best.index;
  j["starts"] = c.starts.size();
  j["at_best"] = c.at_best;
  j["best_tolerance"] = c.best_tolerance;
  nlohmann::ordered_json w = nlohmann::ordered_json::array();
  for (std::size_t i : c.waterfall()) {
    const petab::StartFit& f = c.starts[i];
    nlohmann::ordered_json s;
    s["start"] = i;
    s["objective"] = f.failed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.objective);
    s["llh"] = f.failed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.llh);
    s["iterations"] = f.iterations;
    s["evaluations"] = f.evaluations;
    s["converged"] = f.converged;
    s["failed"] = f.failed;
    s["termination"] = f.termination;
    s["rank"] = f.rank;
    s["seconds"] = f.seconds;
    w.push_back(s);
  }
  j["waterfall"] = w;  // every start, best first
  if (to_json) {
    std::ofstream file(out);
    if (!(file << j.dump(1) << "\n")) throw Error(out + ": cannot write the JSON output");
  } else if (!out.empty()) {
    std::ostringstream settings;
    settings.precision(17);
    settings << petab::settings_yaml(problem, options.evaluation) << "calibration: {starts: " << options.starts
             << ", seed: " << options.seed << ", sampling: " << petab::to_string(options.sampling)
             << ", optimizer: " << optimize::to_string(options.optimizer.method)
             << ", gatol: " << options.optimizer.gatol << ", grtol: " << options.optimizer.grtol
             << ", gttol: " << options.optimizer.gttol << ", max_iterations: " << options.optimizer.max_iterations
             << "}\n";
    petab::write_calibration_hdf5(out, c, &verdict, {"calibrate", settings.str()});
  }
  if (args.json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << std::setprecision(12) << "best llh " << best.llh << " (start " << best.index
              << ", " << best.termination << ")\nfit: " << verdict.describe()
              << "\nestimated parameters (on their scales):\n";
    for (std::size_t e = 0; e < c.ids.size(); ++e)
      std::cout << "  " << std::left << std::setw(28) << c.ids[e] << std::right << best.x[e] << "\n";
    std::cout << "waterfall (final -llh by start, best first):\n";
    for (std::size_t i : c.waterfall()) {
      const petab::StartFit& f = c.starts[i];
      std::cout << "  start " << std::setw(4) << i << "  ";
      if (f.failed)
        std::cout << "failed: " << f.termination << "\n";
      else
        std::cout << std::setw(20) << f.objective << "  " << f.iterations << " it, " << f.termination << "\n";
    }
    std::cout << c.at_best << " of " << c.starts.size() << " starts within " << c.best_tolerance
              << " of the best\n";
    if (!out.empty()) std::cout << "wrote " << out << "\n";
  }
  return verdict.at_optimum() ? 0 : 2;
}

}  // namespace costate::cli
