#pragma once
// What `costate calibrate --optimizer adamw|adam|sgd` shares between PEtab
// problems (petab_fit_command.cpp) and input files with conditions
// (calibrate_command.cpp): the settings from the command line, the
// per-epoch progress line, the SIGINT/SIGTERM stop after a step, and the
// JSON report of the fit with its "epochs" history.

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "costate/optimize/fit_status.hpp"
#include "costate/optimize/stochastic.hpp"

namespace costate::cli {

/// `base` (the defaults, or an input file's calibration.optimizer) with the
/// command line's --optimizer, --epochs, --batch, --physical-batch,
/// --learning-rate, --validation-split, --finish and --seed over it; each
/// refused with the flag's name when invalid. `unit` names what a batch
/// counts ("experiments", "conditions").
optimize::StochasticOptions stochastic_options(const CommandArgs& args, optimize::StochasticOptions base,
                                               const std::string& unit);

/// The progress line printed after every epoch (stderr).
std::function<void(const optimize::EpochRecord&)> print_epochs(const optimize::StochasticOptions& options);

/// on_restart: a warning line (stderr) for each restart of the fit.
std::function<void(const optimize::StochasticState&)> print_restarts(const optimize::StochasticOptions& options);

/// on_step: false once SIGINT/SIGTERM arrived (all-reduced over the ranks,
/// so every rank stops at the same step); the signal is kept in `signal`.
/// With `checkpoint`, also calls it (with the state after the step) when
/// kCheckpointSeconds have passed since the fit began or the last call —
/// so a SIGKILL loses at most about that much of the fit.
std::function<bool(const optimize::StochasticState&)> stop_on_signal(
    const Environment& env, int& signal,
    std::function<void(const optimize::StochasticState&)> checkpoint = {});

/// Seconds between two checkpoints of a running stochastic fit (each is an
/// HDF5 write with an fsync, too costly after every step of a cheap batch).
inline constexpr double kCheckpointSeconds = 1.0;

/// The checkpoint of a fit written to `out` (-o FILE.h5): its state as
/// stop_interrupted writes it, by rank 0, so that a fit killed without a
/// chance to stop (SIGKILL, a crash, a lost node) resumes with `--resume
/// out` to the uninterrupted fit's bits. Empty (no checkpoints) when `out`
/// is not an .h5 file or on the other ranks. A failed write is a warning
/// (stderr, once), not the fit's end.
std::function<void(const optimize::StochasticState&)> checkpoint_to(const Environment& env, const std::string& input,
                                                                    const std::string& out,
                                                                    const optimize::StochasticOptions& options);

/// The fit's counters, termination and history ("epochs": epoch,
/// train_loss, train_loss_stderr, validation_loss, learning_rate, steps,
/// simulations, rescues, restarts; non-finite numbers as null) added to `j`.
void add_stochastic_json(nlohmann::ordered_json& j, const optimize::StochasticResult& r,
                         const optimize::StochasticOptions& options);

/// `j` written to `out` (io::write_output_file, never over `keep`).
void write_json_file(const std::string& out, const nlohmann::ordered_json& j, const std::vector<std::string>& keep);

/// The fit's status in the calibrations' one vocabulary
/// (optimize/fit_status.hpp): converged only by the full-batch finish's own
/// test (--finish N); epochs or early stopping alone are not_converged (a
/// stochastic optimizer has no convergence test), and so is a finish that
/// stopped without its test (its gradient's noise is not measured here).
optimize::FitVerdict stochastic_verdict(const optimize::StochasticResult& r,
                                        const optimize::StochasticOptions& options);
/// The report's status and exit code from the verdict: "ok" (0) when
/// converged or stalled at an optimum, else the verdict's name (2);
/// "failed" / "non_finite" (2) before any verdict. Adds "convergence"
/// {status, test} to `j`, and the caveat to `warnings` when not at an
/// optimum.
int add_stochastic_verdict(nlohmann::ordered_json& j, const optimize::FitVerdict& v, bool completed, bool finite,
                           std::vector<std::string>& warnings);
/// The number or null (JSON has no NaN).
nlohmann::ordered_json json_number(double v);

/// A fit stopped by SIGINT/SIGTERM (termination "interrupted"): its state
/// written (rank 0) to `out` when it is an .h5 file, else to
/// <input stem>_stochastic.h5, for --resume; then io::Interrupted thrown
/// with the file and how to continue.
[[noreturn]] void stop_interrupted(const Environment& env, const std::string& input, const std::string& out,
                                   const optimize::StochasticOptions& options, const optimize::StochasticResult& r,
                                   int signal);

/// The text report's last lines (stdout): the full-batch finish when there
/// was one, the verdict, a non-finite result, the file written, warnings.
void print_stochastic_tail(const optimize::StochasticResult& r, const optimize::StochasticOptions& options,
                           const optimize::FitVerdict& verdict, bool finite, const std::string& what,
                           const std::string& out, const std::vector<std::string>& warnings);

}  // namespace costate::cli
