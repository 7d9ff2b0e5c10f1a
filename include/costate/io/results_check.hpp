#pragma once
/// \file
/// "ok" means finite: the one check every command makes before it reports
/// success or writes a file marked complete. A non-finite state, objective,
/// gradient entry or Hessian entry is a costate::Error naming what (the
/// state, the parameter), where (the output time) and what to try.

#include <string>

#include "costate/io/hdf5_writer.hpp"
#include "costate/io/input.hpp"
#include "costate/ode/options.hpp"

namespace costate::io {

/// Throws when a state of `solution` is NaN or infinite at an output time:
/// names the first such state and time, the last time all were finite, and
/// what to try. `what` names the computation ("run", "the gradient's forward
/// pass").
void check_finite_trajectory(const RunConfig& cfg, const ode::Solution& solution,
                             const std::string& what);

/// `costate sensitivity`'s results: the trajectory written to the file, the
/// objective, every gradient entry (parameters, initial state) and, with
/// --hessian, every Hessian entry.
void check_sensitivity_results(const RunConfig& cfg, const ode::Solution& trajectory,
                               const SensitivityOutput& output);

}  // namespace costate::io
