#pragma once
// `costate sensitivity problem.yaml` on a PEtab problem (docs/petab.md): the
// log-likelihood, chi2 and the gradient of llh with respect to the
// estimated parameters on their scales, at the nominal values.

#include <string>
#include <vector>

#include "commands.hpp"
#include "costate/core/environment.hpp"

namespace costate::cli {

/// True when `path` is a PEtab problem file (a YAML map with format_version
/// and problems) rather than a costate input file.
bool is_petab_input(const std::string& path);

/// Prints llh, chi2 and the gradient (by parameter id) — one JSON object on
/// stdout with `json` — on rank 0. `sets` must be empty (PEtab problems take
/// their settings from their tables); throws costate::Error otherwise.
int petab_sensitivity(const Environment& env, const std::string& path, bool json, bool quiet,
                      const std::vector<std::string>& sets);

/// `costate calibrate problem.yaml [--starts N] [--seed S] [-o OUT.h5|OUT.json]
/// [--json]`: fits the estimated parameters (petab::calibrate; starts over
/// the ranks), prints the best fit, every start's final objective sorted
/// (the waterfall) and how many reached the best, on rank 0. Exit status 0,
/// or 2 when the best start did not pass TAO's convergence test.
int petab_calibrate(const Environment& env, const CommandArgs& args);

}  // namespace costate::cli
