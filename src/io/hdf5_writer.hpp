#pragma once
// HDF5 output of `costate run`.
//
// Layout of the file:
//   /time            (n)      output times
//   /state           (n x m)  state at each output time; attribute "names"
//   /state_names     (m)      state names
//   /parameters      (p)      parameter values; attribute "names"
//   /parameter_names (p)
//   /initial_state   (m)
//   /settings        string   the fully resolved settings (YAML) of the run
//   /summary                  group; attributes method, termination, message,
//                             steps, rejected_steps, rhs_evaluations,
//                             final_time, wall_seconds
//   root attributes: costate_version, command, model, status = "complete"
//
// The file is written under PATH.partial and renamed to PATH only once it is
// complete, so a failed or interrupted run never leaves a file that looks
// finished.

#include <string>

#include "costate/ode/options.hpp"
#include "io/input.hpp"

namespace costate::io {

/// Writes the run's results. Serial (call on one rank). Throws costate::Error
/// naming the path when the file cannot be written.
void write_run_hdf5(const std::string& path, const RunConfig& config, const ode::Solution& solution);

}  // namespace costate::io
