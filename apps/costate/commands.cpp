// The table of `costate`'s commands and what they share (commands.hpp).
#include "commands.hpp"

#include "costate/io/conditions.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "costate/core/error.hpp"
#include "costate/io/input.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/options.hpp"
#include "pde_commands.hpp"

namespace costate::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table{
      {.name = "run", .help = "integrate the model of an input file", .run = run_command,
       .writes_output = true,
       .add_options =
           [](CLI::App& cmd, CommandArgs& a) {
             cmd.add_option("--resume", a.resume,
                            "continue the interrupted run in this partial HDF5 output (same "
                            "input and --set options)");
             cmd.add_flag("--trajectory", a.trajectory,
                          "with --json: also every output time's state (`t`, `states`: one row "
                          "per output time, columns in the order of `state_names`)");
             cmd.add_option("--event-seed", a.event_seed,
                            "seed of the random order among simultaneous events of equal "
                            "priority (SBML; default 5489), printed with the results")
                 ->check(CLI::NonNegativeNumber);
           }},
      {.name = "sensitivity",
       .help = "objective and its gradient (discrete adjoint or forward sensitivities)",
       .run = sensitivity_command,
       .writes_output = true,
       .add_options =
           [](CLI::App& cmd, CommandArgs& a) {
             cmd.add_flag("--hessian", a.hessian,
                          "also the Hessian of the objective w.r.t. the parameters (forward over "
                          "the discrete adjoint; euler, rk4, dopri5, backward_euler, "
                          "crank_nicolson)");
             cmd.add_flag("--check", a.check,
                          "also check the gradient against a central difference of the "
                          "objective (re-integrated) along one random direction (seeded): "
                          "exit status 1 when they disagree beyond the difference's noise");
             cmd.add_flag("--fim", a.fim,
                          "PEtab problems: also the Fisher information (forward "
                          "sensitivities; after the gradient)");
             cmd.add_flag("--no-fim", a.no_fim,
                          "PEtab problems: no Fisher information (the default; kept for "
                          "scripts)");
             cmd.add_option("--resume", a.resume,
                            "continue the interrupted discrete adjoint in this partial HDF5 "
                            "output (same input and --set options): the same bits as an "
                            "uninterrupted gradient");
           }},
      {.name = "gradcheck",
       .help = "verify the gradient: Taylor test and finite differences",
       .run = gradcheck_command},
      {.name = "calibrate",
       .help = "fit parameters to data with PETSc TAO (-tao_* options override)",
       .run = calibrate_command,
       .writes_output = true,
       .petsc = true,  // TAO
       .allow_extras = true,  // -tao_* options are PETSc's (read by PetscInitialize)
       .add_options =
           [](CLI::App& cmd, CommandArgs& a) {
             cmd.add_option("--starts", a.starts,
                            "PEtab problems: multistart from N points in the bounds on the "
                            "parameter scales, a Latin hypercube by default (default: one start "
                            "at the nominal values)");
             cmd.add_option("--seed", a.seed, "PEtab problems: seed of the --starts draws (default 0); stochastic fit: seed of the shuffles and the split (default 1)");
             cmd.add_option("--resume", a.resume,
                            "continue the interrupted calibration in this partial HDF5 output "
                            "(same input, --set and -tao_* options): the same bits as an "
                            "uninterrupted fit");
             cmd.add_option("--sampling", a.sampling,
                            "PEtab problems: how --starts are drawn, lhs (Latin hypercube, the "
                            "default) or uniform");
             cmd.add_option("--optimizer", a.optimizer,
                            "adamw, adam or sgd for a mini-batch stochastic fit over a PEtab problem's "
                            "experiments or an input file's conditions; tao for the full-batch fit "
                            "(default: TAO's quasi-Newton, or the input file's calibration.optimizer.method)");
             cmd.add_option("--epochs", a.epochs, "stochastic fit: passes over the experiments or conditions (default 100)");
             cmd.add_option("--batch", a.batch,
                            "stochastic fit: experiments (conditions) per optimizer step (default: all)");
             cmd.add_option("--physical-batch", a.physical_batch,
                            "stochastic fit: experiments simulated together, over the MPI ranks "
                            "(default: the batch; changes no bit of the result)");
             cmd.add_option("--learning-rate", a.learning_rate, "stochastic fit: the step size η (default 0.01)");
             cmd.add_option("--finish", a.finish,
                            "stochastic fit: up to N full-batch quasi-Newton (TAO bqnls) iterations "
                            "after the epochs, to end at a converged optimum (default 0)");
             cmd.add_option("--validation-split", a.validation_split,
                            "stochastic fit: fraction of the experiments (conditions) held out for validation "
                            "(default 0)");
           }},
      {.name = "info",
       .help = "versions of costate and its dependencies",
       .run = info_command,
       .input = false,
       .kokkos = false},
  };
  return table;
}

std::string unknown_command(const std::string& word, const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), word) != names.end()) return "";
  std::string msg = "unknown command '" + word + "'";
  const std::string near = io::nearest(word, names);
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  return msg + " Commands: " + join(names);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string warnings_text(const std::vector<std::string>& warnings) {
  std::string out;
  for (const auto& w : warnings) out += "warning: " + w + "\n";
  return out.empty() ? out : "\n" + out;
}

void add_integration_warnings(const ode::Summary& s, std::vector<std::string>& warnings) {
  if (std::isnan(s.stiff_from)) return;
  std::string w = ode::to_string(s.method) + " found the problem stiff from t = " +
                  costate::detail::format_value(s.stiff_from) +
                  " (Hairer's test: its step size is held at the method's stability limit, not by "
                  "accuracy); an explicit method's gradient, the discrete adjoint of the steps "
                  "taken, ignores the step-size controller and may be wrong here; use the implicit "
                  "integrator.method: bdf (check a gradient with costate sensitivity --check)";
  if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(std::move(w));
}

int pde(const Environment& env, const CommandArgs& args, const char* command) {
  return pde_command(env, {.command = command, .input = args.input, .output = args.output,
                           .sets = args.sets, .json = args.json, .quiet = args.quiet});
}

io::RunConfig load_with_objective(const Environment& env, const CommandArgs& args,
                                  const char* command) {
  io::RunConfig cfg = io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  if (!cfg.objective.present)
    throw Error(args.input + ": costate " + command +
                " needs an 'objective:' section (terminal, integral and/or data)");
  if (env.is_root() && !args.quiet) {
    std::cerr << "costate " << command << " " << args.input << "\n  model      " << cfg.model
              << " (states " << join(cfg.state_names) << "; parameters "
              << (cfg.parameter_names.empty() ? "none" : join(cfg.parameter_names))
              << ")\n  integrator " << ode::to_string(cfg.integrator.method)
              << "\n  gradient   " << ode::to_string(cfg.sensitivity.method) << ", "
              << ode::to_string(cfg.sensitivity.checkpointing) << "\n";
  }
  return cfg;
}

}  // namespace costate::cli
