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
//   /sensitivity             (costate sensitivity) group: datasets
//                            gradient (names attribute), gradient_initial_state;
//                            attributes objective, method, steps,
//                            forward_steps, recomputed_steps, peak_snapshots
//   /calibration             (costate calibrate) group: datasets names, values,
//                            initial, lower, upper, prior, log_transformed,
//                            standard_errors, covariance (p x p), correlation,
//                            singular_values, unidentifiable, objective_history,
//                            gradient_norm_history (TAO's residual),
//                            objective_gradient_norm_history (‖∇J‖₂ at each
//                            iterate, in the fitted variables), residual_times,
//                            residual_states, observed, predicted, residuals
//                            (and residual_conditions, each residual's
//                            condition id, for a file with conditions);
//                            attributes objective, rss, sigma2,
//                            sigma_estimated, n_residuals, iterations,
//                            function_evaluations, gradient_evaluations,
//                            hessian_evaluations, non_finite_evaluations,
//                            gradient_norm, converged, termination, optimizer,
//                            gradient_method, status ("complete" | "partial")
//   root attributes: costate_version, command, model, status = "complete"
//                    ("partial" for a calibration that did not converge: the
//                    file holds its last iterate, marked as such)
//
// The file is written under PATH.partial and renamed to PATH only once it is
// complete, so a failed or interrupted run never leaves a file that looks
// finished.

#include <cstdint>
#include <string>
#include <vector>

#include "costate/ode/options.hpp"
#include "costate/io/input.hpp"

namespace costate::io {

/// What `costate sensitivity` adds to the file.
struct SensitivityOutput {
  double objective = 0.0;
  std::vector<std::string> parameter_names;  ///< the `wrt` parameters
  std::vector<double> gradient;
  std::vector<double> gradient_initial_state;  ///< empty unless requested
  std::string method;
  std::int64_t steps = 0, forward_steps = 0, recomputed_steps = 0, peak_snapshots = 0;
  /// `sensitivity --hessian`: ∂²J/∂p² over parameter_names, row-major
  /// (written as /sensitivity/hessian); empty otherwise.
  std::vector<double> hessian;
};

/// Writes the run's results (and sensitivities when given). Serial (call on
/// one rank). Throws costate::Error naming the path when the file cannot be
/// written.
void write_run_hdf5(const std::string& path, const RunConfig& config, const ode::Solution& solution,
                    const SensitivityOutput* sensitivity = nullptr, const std::string& command = "run");

/// A file with conditions (`run`, `sensitivity`): the layout above with
/// /time and /state the first condition's trajectory, /parameters and
/// /initial_state the file's, and the group /conditions: dataset ids, and
/// per condition (in order) a group /conditions/<index> with attributes id,
/// termination and datasets time, state, parameters, initial_state (the
/// condition's). `conditions[c]` is condition c's
/// problem (io::condition_config), `solutions[c]` its trajectory.
void write_conditions_hdf5(const std::string& path, const RunConfig& config,
                           const std::vector<RunConfig>& conditions, const std::vector<ode::Solution>& solutions,
                           const SensitivityOutput* sensitivity = nullptr, const std::string& command = "run");

/// `costate run -o x.csv|x.tsv`: the trajectory as a table — a header
/// `t,<state>...`, the provenance lines (io::table_provenance: version,
/// `command`, the settings of /settings on one line), then one row per
/// output time, numbers with 17 significant digits (they read back to the
/// same doubles) — written like the HDF5 files (io/output_file.hpp).
void write_run_table(const std::string& path, const RunConfig& config,
                     const ode::Solution& solution, char separator,
                     const std::string& command = "run");

struct CalibrationReport;

/// Writes the fitted run (trajectory at the fitted values, `solution`) and
/// /calibration; root and /calibration status are "partial" when the fit did
/// not converge. Written under PATH.partial and renamed, like write_run_hdf5.
void write_calibration_hdf5(const std::string& path, const RunConfig& config,
                            const ode::Solution& solution, const CalibrationReport& report);

/// A calibration of a file with conditions: the layout of
/// write_conditions_hdf5 (every condition's trajectory at the fitted values
/// in /conditions/<index>, /time and /state the first one's) with
/// /calibration. `config` is the fitted file's settings, `conditions[c]`
/// condition c's problem at the fitted values, `solutions[c]` its trajectory.
void write_calibration_hdf5(const std::string& path, const RunConfig& config,
                            const std::vector<RunConfig>& conditions, const std::vector<ode::Solution>& solutions,
                            const CalibrationReport& report);

}  // namespace costate::io
