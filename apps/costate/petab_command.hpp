#pragma once
// The commands on a PEtab problem (docs/petab.md): `costate sensitivity`
// (llh, chi2, the gradient of llh with respect to the estimated parameters
// on their scales and the Fisher information, at the nominal values),
// `costate run` (the simulation table), `costate gradcheck` and
// `costate calibrate` (multistart).

#include <string>
#include <vector>

#include "commands.hpp"
#include "costate/core/environment.hpp"

namespace costate::io {
struct FileGradientCheck;  // costate/io/file_gradient.hpp
}

namespace costate::petab {
struct Options;  // costate/petab/problem.hpp
}

namespace costate::cli {

/// The petab::Options of a command's `--set integrator.*|sensitivity.*`
/// (the defaults without --set); other keys refused by name.
petab::Options petab_options(const CommandArgs& args);

/// The command's `--set calibration.*` overrides (a stochastic fit's
/// settings: io::stochastic_options_from_overrides reads them).
std::vector<std::string> petab_optimizer_sets(const CommandArgs& args);

/// True when `path` is a PEtab problem file (a YAML map with format_version
/// and problems) rather than a costate input file.
bool is_petab_input(const std::string& path);

/// `costate sensitivity problem.yaml [--no-fim] [-o OUT.h5] [--json]`: llh,
/// chi2, the gradient (by parameter id) and the Fisher information at the
/// nominal values — one JSON object on stdout with `json` — on rank 0; -o
/// writes petab::write_result_hdf5. `--set` is refused (PEtab problems
/// take their settings from their tables).
int petab_sensitivity(const Environment& env, const CommandArgs& args);

/// `costate run problem.yaml [-o OUT.tsv|OUT.h5] [--json]`: simulates every
/// condition at the nominal values and writes the PEtab simulation table
/// STEM.tsv and STEM.h5 (STEM: -o without its extension; default the
/// problem file's name without .yaml, plus "_simulations", in the working
/// directory).
int petab_run(const Environment& env, const CommandArgs& args);

/// `costate gradcheck problem.yaml`: petab::gradient_check at the nominal
/// values, in the form gradcheck_command.cpp prints (objective = llh).
io::FileGradientCheck petab_gradient_check(const Environment& env, const CommandArgs& args);

/// `costate calibrate problem.yaml [--starts N] [--seed S] [-o OUT.h5|OUT.json]
/// [--json]`: fits the estimated parameters (petab::calibrate; starts over
/// the ranks), prints the best fit, every start's final objective sorted
/// (the waterfall) and how many reached the best, on rank 0. Exit status 0,
/// or 2 when the best start did not pass TAO's convergence test.
int petab_calibrate(const Environment& env, const CommandArgs& args);

/// `costate calibrate problem.yaml --optimizer adamw|adam|sgd [--epochs E]
/// [--batch B] [--physical-batch P] [--learning-rate η]
/// [--validation-split f] [--seed S] [--resume STATE.h5] [-o OUT.h5|OUT.json] [--json]`: a
/// mini-batch stochastic fit over the experiments
/// (petab::fit_stochastic, petab_fit_command.cpp) from the nominal values,
/// with per-epoch progress on stderr. SIGINT/SIGTERM stop it after a step
/// and write its state (to -o's .h5, or PROBLEM_stochastic.h5) for
/// `--resume`, which continues to the uninterrupted fit's bits (exit status
/// 128 + signal). Exit status 0 when every epoch ran (or
/// early stopping ended it) and the final llh is finite; 2 otherwise
/// (a simulation that could not be rescued, a non-finite llh).
int petab_calibrate_stochastic(const Environment& env, const CommandArgs& args);

}  // namespace costate::cli
