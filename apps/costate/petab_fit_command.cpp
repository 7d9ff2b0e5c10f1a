// `costate calibrate problem.yaml --optimizer adamw|adam|sgd`: a PEtab
// problem fitted by mini-batches over its experiments (petab_command.hpp).
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "costate/core/error.hpp"
#include "costate/io/input.hpp"
#include "costate/io/output_file.hpp"
#include "costate/io/resume.hpp"
#include "costate/ode/options.hpp"
#include "costate/petab/stochastic.hpp"
#include "petab_command.hpp"
#include "stochastic_cli.hpp"

namespace costate::cli {

int petab_calibrate_stochastic(const Environment& env, const CommandArgs& args) {
  const std::string& path = args.input;
  if (args.starts >= 0 || !args.sampling.empty())
    throw Error(path + ": --starts and --sampling are for TAO's multistart; a stochastic fit (--optimizer " +
                args.optimizer + ") starts at the nominal values");
  // --set calibration.optimizer.<key>=value, read as an input file's
  // calibration.optimizer is; the command line's flags over them.
  const optimize::StochasticOptions options = stochastic_options(
      args, io::stochastic_options_from_overrides("adamw", petab_optimizer_sets(args), path), "experiments");
  // -o, or the file resumed from: where the result (or, when interrupted,
  // the state) goes.
  const std::string out = !args.output.empty() ? args.output : args.resume;
  const bool to_json = out.size() > 5 && out.ends_with(".json");
  if (!out.empty() && !to_json && !out.ends_with(".h5"))
    throw Error(path + ": -o " + out + ": expected an output file ending in .h5 or .json");
  // The output is checked before any work (never the problem file, a
  // directory or a special file).
  if (!out.empty() && env.is_root()) io::check_output_path(out, {path});
  const petab::Problem problem = petab::read(path);
  // --resume: the interrupted fit's state, checked against this problem and
  // these settings.
  optimize::StochasticState resumed;
  if (!args.resume.empty()) resumed = petab::read_stochastic_state_hdf5(args.resume, path, options);
  const petab::Options evaluation = petab_options(args);  // --set integrator.*, sensitivity.*
  const bool talk = env.is_root() && !args.quiet && !args.json;
  if (talk)
    std::cerr << problem.brief_report() << "\ncalibrate: " << optimize::to_string(options.method) << ", "
              << options.epochs << " epochs over " << problem.experiments.size() << " experiments, batch "
              << (options.batch == 0 ? std::string("all") : std::to_string(options.batch)) << ", learning rate "
              << options.learning_rate << ", seed " << options.seed << ", " << ode::to_string(evaluation.method)
              << " gradients over " << env.size() << " rank(s)\n";
  optimize::StochasticCallbacks callbacks;
  if (talk) callbacks.on_epoch = print_epochs(options);
  if (env.is_root() && !args.quiet) callbacks.on_restart = print_restarts(options);
  // SIGINT/SIGTERM stop the fit after a step (every rank at the same step:
  // the flag is all-reduced); the state is written for --resume.
  io::InterruptHandler interrupts;
  int signal = 0;
  callbacks.on_step = stop_on_signal(env, signal, checkpoint_to(env, path, out, options));
  const petab::StochasticFit fit = petab::fit_stochastic(problem, options, evaluation, {}, callbacks,
                                                         args.resume.empty() ? nullptr : &resumed, env.comm());
  const optimize::StochasticResult& r = fit.result;
  if (r.termination == "interrupted") stop_interrupted(env, path, out, options, r, signal);
  const bool completed = r.termination == "epochs" || r.termination == "early_stopping";
  const bool finite = std::isfinite(fit.llh) && std::isfinite(r.objective);
  // Its status in the calibrations' one vocabulary (stochastic_verdict).
  const optimize::FitVerdict verdict = stochastic_verdict(r, options);
  nlohmann::ordered_json j;
  std::vector<std::string> warnings;
  const int status = add_stochastic_verdict(j, verdict, completed, finite, warnings);
  if (env.rank() != 0) return status;
  j["problem"] = path;
  j["optimizer"] = optimize::to_string(options.method);
  j["termination"] = r.termination;
  j["llh"] = json_number(fit.llh);
  j["objective"] = json_number(r.objective);
  nlohmann::ordered_json x = nlohmann::ordered_json::object();
  for (std::size_t e = 0; e < fit.ids.size(); ++e) x[fit.ids[e]] = r.x[e];
  j["parameters"] = x;  // on their scales
  add_stochastic_json(j, r, options);
  j["warnings"] = warnings;
  if (to_json) {
    write_json_file(out, j, {path});
  } else if (!out.empty()) {
    petab::StochasticFit as_written = fit;
    as_written.fit_status = optimize::to_string(verdict.status);
    as_written.convergence = verdict.describe();
    petab::write_stochastic_hdf5(out, as_written, options, path,
                                 {"calibrate", petab::stochastic_settings_yaml(problem, evaluation, options)});
  }
  if (args.json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << std::setprecision(12) << "llh " << fit.llh << " (" << r.termination << ", " << r.epochs.size()
              << " epochs, " << r.steps << " steps, " << r.simulations << " condition simulations, " << r.rescues
              << " rescues, " << r.restarts
              << " restarts)\nestimated parameters (on their scales):\n";
    for (std::size_t e = 0; e < fit.ids.size(); ++e)
      std::cout << "  " << std::left << std::setw(28) << fit.ids[e] << std::right << r.x[e] << "\n";
    print_stochastic_tail(r, options, verdict, finite, "llh", out, warnings);
  }
  return status;
}

}  // namespace costate::cli
