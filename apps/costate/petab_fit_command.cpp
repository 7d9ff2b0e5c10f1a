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
#include "costate/io/output_file.hpp"
#include "costate/io/resume.hpp"
#include "costate/ode/options.hpp"
#include "costate/petab/stochastic.hpp"
#include "petab_command.hpp"

namespace costate::cli {

namespace {

/// The command line's stochastic-fit settings over the defaults, each
/// refused with the flag's name when invalid.
optimize::StochasticOptions fit_options(const CommandArgs& args) {
  const std::string& path = args.input;
  optimize::StochasticOptions o;
  try {
    o.method = optimize::stochastic_method_from_string(args.optimizer);
  } catch (const Error& e) {
    throw Error(path + ": --optimizer: " + e.what() + " (or tao, the default full-batch fit)");
  }
  if (args.epochs != -1) {
    if (args.epochs < 1) throw Error(path + ": --epochs " + std::to_string(args.epochs) + ": expected ≥ 1");
    o.epochs = args.epochs;
  }
  if (args.batch != -1) {
    if (args.batch < 1) throw Error(path + ": --batch " + std::to_string(args.batch) + ": expected ≥ 1 experiments");
    o.batch = static_cast<std::size_t>(args.batch);
  }
  if (args.physical_batch != -1) {
    if (args.physical_batch < 1)
      throw Error(path + ": --physical-batch " + std::to_string(args.physical_batch) + ": expected ≥ 1 experiments");
    o.physical_batch = static_cast<std::size_t>(args.physical_batch);
  }
  if (!std::isnan(args.learning_rate)) {
    if (!(args.learning_rate > 0.0) || !std::isfinite(args.learning_rate)) {
      std::ostringstream os;
      os << path << ": --learning-rate " << args.learning_rate << ": expected a finite value > 0";
      throw Error(os.str());
    }
    o.learning_rate = args.learning_rate;
  }
  if (!std::isnan(args.validation_split)) {
    if (!(args.validation_split >= 0.0 && args.validation_split < 1.0)) {
      std::ostringstream os;
      os << path << ": --validation-split " << args.validation_split << ": expected a fraction in [0, 1)";
      throw Error(os.str());
    }
    o.validation_split = args.validation_split;
  }
  if (args.finish != -1) {
    if (args.finish < 0) throw Error(path + ": --finish " + std::to_string(args.finish) + ": expected ≥ 0 iterations");
    o.finish_iterations = args.finish;
  }
  if (args.seed < -1) throw Error(path + ": --seed " + std::to_string(args.seed) + ": expected a seed ≥ 0");
  if (args.seed >= 0) o.seed = static_cast<std::uint64_t>(args.seed);
  return o;
}

}  // namespace

int petab_calibrate_stochastic(const Environment& env, const CommandArgs& args) {
  const std::string& path = args.input;
  if (args.starts >= 0 || !args.sampling.empty())
    throw Error(path + ": --starts and --sampling are for TAO's multistart; a stochastic fit (--optimizer " +
                args.optimizer + ") starts at the nominal values");
  const optimize::StochasticOptions options = fit_options(args);
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
  if (talk)
    callbacks.on_epoch = [&](const optimize::EpochRecord& e) {
      std::cerr << std::setprecision(8) << "epoch " << e.epoch << "/" << options.epochs << ": train "
                << e.train_loss << " ± " << e.train_loss_stderr;
      if (!std::isnan(e.validation_loss)) std::cerr << ", validation " << e.validation_loss;
      std::cerr << ", learning rate " << e.learning_rate << ", " << e.simulations << " simulations";
      if (e.rescues > 0) std::cerr << ", " << e.rescues << " rescues";
      std::cerr << std::endl;
    };
  // SIGINT/SIGTERM stop the fit after a step (every rank at the same step:
  // the flag is all-reduced); the state is written for --resume.
  io::InterruptHandler interrupts;
  int signal = 0;
  callbacks.on_step = [&](const optimize::StochasticState&) {
    signal = io::InterruptHandler::pending();
    if (env.size() > 1) MPI_Allreduce(MPI_IN_PLACE, &signal, 1, MPI_INT, MPI_MAX, env.comm());
    return signal == 0;
  };
  const petab::StochasticFit fit = petab::fit_stochastic(problem, options, evaluation, {}, callbacks,
                                                         args.resume.empty() ? nullptr : &resumed, env.comm());
  const optimize::StochasticResult& r = fit.result;
  if (r.termination == "interrupted") {
    const std::string state_file =
        out.ends_with(".h5") ? out : std::filesystem::path(path).stem().string() + "_stochastic.h5";
    if (env.is_root()) petab::write_stochastic_state_hdf5(state_file, path, options, r.state);
    throw io::Interrupted(signal, "calibrate: interrupted by " + io::signal_name(signal) + " after step " +
                                      std::to_string(r.steps) + " (epoch " + std::to_string(r.state.epoch + 1) +
                                      "); its state is in " + state_file + ": continue with --resume " +
                                      state_file + " and the same options");
  }
  const bool completed = r.termination == "epochs" || r.termination == "early_stopping";
  const bool finite = std::isfinite(fit.llh) && std::isfinite(r.objective);
  const int status = completed && finite ? 0 : 2;
  if (env.rank() != 0) return status;

  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
  nlohmann::ordered_json j;
  j["status"] = !completed ? "failed" : (finite ? "ok" : "non_finite");
  j["problem"] = path;
  j["optimizer"] = optimize::to_string(options.method);
  j["termination"] = r.termination;
  j["llh"] = number(fit.llh);
  j["objective"] = number(r.objective);
  nlohmann::ordered_json x = nlohmann::ordered_json::object();
  for (std::size_t e = 0; e < fit.ids.size(); ++e) x[fit.ids[e]] = r.x[e];
  j["parameters"] = x;  // on their scales
  j["simulations"] = r.simulations;
  j["steps"] = r.steps;
  j["rescues"] = r.rescues;
  if (options.finish_iterations > 0) {
    j["finish_termination"] = r.finish_termination;
    j["finish_converged"] = r.finish_converged;
    j["finish_iterations"] = r.finish_iterations;
  }
  j["training"] = r.training.size();
  j["validation"] = r.validation.size();
  nlohmann::ordered_json epochs = nlohmann::ordered_json::array();
  for (const auto& e : r.epochs) {
    nlohmann::ordered_json row;
    row["epoch"] = e.epoch;
    row["train_loss"] = number(e.train_loss);
    row["train_loss_stderr"] = number(e.train_loss_stderr);
    row["validation_loss"] = number(e.validation_loss);
    row["learning_rate"] = e.learning_rate;
    row["steps"] = e.steps;
    row["simulations"] = e.simulations;
    row["rescues"] = e.rescues;
    epochs.push_back(row);
  }
  j["epochs"] = epochs;
  j["seconds"] = r.wall_seconds;
  if (to_json) {
    io::write_output_file(out, [&](const std::string& temporary) {
      std::ofstream file(temporary);
      file << j.dump(1) << "\n";
      file.close();
      if (!file) throw Error(out + ": cannot write the JSON output");
    }, {path});
  } else if (!out.empty()) {
    petab::write_stochastic_hdf5(out, fit, options, path);
  }
  if (args.json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << std::setprecision(12) << "llh " << fit.llh << " (" << r.termination << ", " << r.epochs.size()
              << " epochs, " << r.steps << " steps, " << r.simulations << " condition simulations, " << r.rescues
              << " rescues)\nestimated parameters (on their scales):\n";
    for (std::size_t e = 0; e < fit.ids.size(); ++e)
      std::cout << "  " << std::left << std::setw(28) << fit.ids[e] << std::right << r.x[e] << "\n";
    if (options.finish_iterations > 0)
      std::cout << "full-batch finish: " << r.finish_iterations << " iterations, " << r.finish_termination
                << (r.finish_converged ? "" : " (not converged)") << "\n";
    if (!finite) std::cout << "the final llh is not finite: the fit's result is not usable\n";
    if (!out.empty()) std::cout << "wrote " << out << "\n";
  }
  return status;
}

}  // namespace costate::cli
