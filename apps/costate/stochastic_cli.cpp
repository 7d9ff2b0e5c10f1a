// The pieces of `costate calibrate --optimizer …` shared by PEtab problems
// and input files (stochastic_cli.hpp).
#include "stochastic_cli.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/io/output_file.hpp"
#include "costate/io/resume.hpp"
#include "costate/petab/stochastic.hpp"

namespace costate::cli {

optimize::StochasticOptions stochastic_options(const CommandArgs& args, optimize::StochasticOptions o,
                                               const std::string& unit) {
  const std::string& path = args.input;
  if (!args.optimizer.empty()) {
    try {
      o.method = optimize::stochastic_method_from_string(args.optimizer);
    } catch (const Error& e) {
      throw Error(path + ": --optimizer: " + e.what() + " (or tao, the default full-batch fit)");
    }
  }
  if (args.epochs != -1) {
    if (args.epochs < 1) throw Error(path + ": --epochs " + std::to_string(args.epochs) + ": expected ≥ 1");
    o.epochs = args.epochs;
  }
  if (args.batch != -1) {
    if (args.batch < 1) throw Error(path + ": --batch " + std::to_string(args.batch) + ": expected ≥ 1 " + unit);
    o.batch = static_cast<std::size_t>(args.batch);
  }
  if (args.physical_batch != -1) {
    if (args.physical_batch < 1)
      throw Error(path + ": --physical-batch " + std::to_string(args.physical_batch) + ": expected ≥ 1 " + unit);
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

std::function<void(const optimize::EpochRecord&)> print_epochs(const optimize::StochasticOptions& options) {
  const int epochs = options.epochs;
  return [epochs](const optimize::EpochRecord& e) {
    std::cerr << std::setprecision(8) << "epoch " << e.epoch << "/" << epochs << ": train " << e.train_loss
              << " ± " << e.train_loss_stderr;
    if (!std::isnan(e.validation_loss)) std::cerr << ", validation " << e.validation_loss;
    std::cerr << ", learning rate " << e.learning_rate << ", " << e.simulations << " simulations";
    if (e.rescues > 0) std::cerr << ", " << e.rescues << " rescues";
    if (e.restarts > 0) std::cerr << ", " << e.restarts << " restarts";
    std::cerr << std::endl;
  };
}

std::function<void(const optimize::StochasticState&)> print_restarts(const optimize::StochasticOptions& options) {
  return [options](const optimize::StochasticState& st) {
    std::cerr << "costate: warning: restart " << st.restarts << "/" << options.max_restarts << " in epoch "
              << st.epoch + 1 << " after step " << st.step << ": the batch failed after " << options.max_rescues
              << " rescues; back to the last accepted parameters, the optimizer's moments reset, the batch "
                 "skipped, the learning rate now × 2^-"
              << st.restarts << std::endl;
  };
}

std::function<bool(const optimize::StochasticState&)> stop_on_signal(
    const Environment& env, int& signal, std::function<void(const optimize::StochasticState&)> checkpoint) {
  auto last = std::chrono::steady_clock::now();
  return [&env, &signal, checkpoint = std::move(checkpoint), last](const optimize::StochasticState& st) mutable {
    signal = io::InterruptHandler::pending();
    if (env.size() > 1) MPI_Allreduce(MPI_IN_PLACE, &signal, 1, MPI_INT, MPI_MAX, env.comm());
    // (a stopped fit writes its state anyway: stop_interrupted)
    if (signal == 0 && checkpoint) {
      const auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - last).count() >= kCheckpointSeconds) {
        checkpoint(st);
        last = std::chrono::steady_clock::now();
      }
    }
    return signal == 0;
  };
}

std::function<void(const optimize::StochasticState&)> checkpoint_to(const Environment& env, const std::string& input,
                                                                    const std::string& out,
                                                                    const optimize::StochasticOptions& options) {
  if (!env.is_root() || !out.ends_with(".h5")) return {};
  return [input, out, options, warned = false](const optimize::StochasticState& st) mutable {
    try {
      petab::write_stochastic_state_hdf5(out, input, options, st);
    } catch (const Error& e) {
      if (!warned) std::cerr << "costate: warning: the fit's checkpoint was not written: " << e.what() << "\n";
      warned = true;
    }
  };
}

optimize::FitVerdict stochastic_verdict(const optimize::StochasticResult& r,
                                        const optimize::StochasticOptions& options) {
  if (options.finish_iterations > 0)
    return optimize::judge_fit({.converged = r.finish_converged, .reason = "full-batch finish: " + r.finish_termination});
  const std::string why = r.termination == "early_stopping" ? "early stopping on the validation loss" : "its epochs done";
  return optimize::judge_fit({.converged = false,
                              .reason = why + "; a stochastic optimizer has no convergence test: add --finish N "
                                              "for a full-batch finish that has one"});
}

int add_stochastic_verdict(nlohmann::ordered_json& j, const optimize::FitVerdict& v, bool completed, bool finite,
                           std::vector<std::string>& warnings) {
  j["status"] = !completed ? std::string("failed")
                : !finite  ? std::string("non_finite")
                : v.status == optimize::FitStatus::Converged ? std::string("ok")
                                                              : optimize::to_string(v.status);
  j["convergence"] = {{"status", optimize::to_string(v.status)}, {"test", v.test}};
  if (!v.at_optimum()) warnings.push_back("the fit's result is " + v.caveat());
  return completed && finite && v.at_optimum() ? 0 : 2;
}

nlohmann::ordered_json json_number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

void add_stochastic_json(nlohmann::ordered_json& j, const optimize::StochasticResult& r,
                         const optimize::StochasticOptions& options) {
  j["simulations"] = r.simulations;
  j["steps"] = r.steps;
  j["rescues"] = r.rescues;
  j["restarts"] = r.restarts;
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
    row["train_loss"] = json_number(e.train_loss);
    row["train_loss_stderr"] = json_number(e.train_loss_stderr);
    row["validation_loss"] = json_number(e.validation_loss);
    row["learning_rate"] = e.learning_rate;
    row["steps"] = e.steps;
    row["simulations"] = e.simulations;
    row["rescues"] = e.rescues;
    row["restarts"] = e.restarts;
    epochs.push_back(row);
  }
  j["epochs"] = epochs;
  j["seconds"] = r.wall_seconds;
}

void write_json_file(const std::string& out, const nlohmann::ordered_json& j, const std::vector<std::string>& keep) {
  io::write_output_file(out, [&](const std::string& temporary) {
    std::ofstream file(temporary);
    file << j.dump(1) << "\n";
    file.close();
    if (!file) throw Error(out + ": cannot write the JSON output");
  }, keep);
}

void stop_interrupted(const Environment& env, const std::string& input, const std::string& out,
                      const optimize::StochasticOptions& options, const optimize::StochasticResult& r, int signal) {
  const std::string state_file =
      out.ends_with(".h5") ? out : std::filesystem::path(input).stem().string() + "_stochastic.h5";
  if (env.is_root()) petab::write_stochastic_state_hdf5(state_file, input, options, r.state);
  throw io::Interrupted(signal, "calibrate: interrupted by " + io::signal_name(signal) + " after step " +
                                    std::to_string(r.steps) + " (epoch " + std::to_string(r.state.epoch + 1) +
                                    "); its state is in " + state_file + ": continue with --resume " + state_file +
                                    " and the same options");
}

void print_stochastic_tail(const optimize::StochasticResult& r, const optimize::StochasticOptions& options,
                           const optimize::FitVerdict& verdict, bool finite, const std::string& what,
                           const std::string& out, const std::vector<std::string>& warnings) {
  if (options.finish_iterations > 0)
    std::cout << "full-batch finish: " << r.finish_iterations << " iterations, " << r.finish_termination
              << (r.finish_converged ? "" : " (not converged)") << "\n";
  std::cout << "fit: " << verdict.describe() << "\n";
  if (!finite) std::cout << "the final " << what << " is not finite: the fit's result is not usable\n";
  if (!out.empty()) std::cout << "wrote " << out << "\n";
  std::cout << warnings_text(warnings);
}

}  // namespace costate::cli
