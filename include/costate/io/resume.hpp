#pragma once
// Interrupted runs: SIGINT/SIGTERM stop `costate run`, `sensitivity` and
// `calibrate` at the next step (or optimizer iteration) boundary; `run`
// writes the outputs it reached to an HDF5 file marked partial, and
// `run --resume OUT.h5` continues from the last output time written.
//
// What is bitwise: a resumed fixed-step explicit run (euler, rk4, dopri5 with
// adaptive: false) gives exactly the /time and /state of the uninterrupted
// run — the fixed-step driver re-anchors its step grid at every output time,
// and these steppers carry nothing from one step to the next, so restarting
// at an output time replays the same arithmetic. An adaptive dopri5 run
// resumes with a fresh step-size controller (Hairer's initial step at the
// resume time): the same tolerances, not the same bits (the controller's
// state — last step, error history — is internal to ode::integrate). The
// implicit and CVODES methods stop cleanly on a signal (exit 128 + signal,
// no file) but do not resume: --resume refuses them by name.
//
// The partial file is the `run` layout (hdf5_writer.hpp) with root status
// "partial", /summary termination "interrupted", and root attributes
// interrupted_by ("SIGINT" | "SIGTERM"), resume_time (the last output time
// written) and resume_steps (accepted steps up to it).

#include <csignal>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "costate/ode/options.hpp"
#include "costate/io/input.hpp"

namespace costate::io {

/// While alive, SIGINT and SIGTERM set a flag instead of ending the process
/// (a second signal of either kind ends it at once, the default action);
/// the previous handlers come back on destruction. One at a time.
class InterruptHandler {
 public:
  InterruptHandler();
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;
  /// The signal received (SIGINT, SIGTERM), or 0.
  static int pending();
  /// Clears the flag (tests).
  static void clear();
};

/// Thrown at a step or iteration boundary after a signal. Not a
/// costate::Error: TAO's callbacks take those for a bad trial point.
class Interrupted : public std::exception {
 public:
  Interrupted(int signal, std::string message);
  int signal() const { return signal_; }
  /// 128 + signal: 130 for SIGINT, 143 for SIGTERM (the shell's convention).
  int exit_code() const { return 128 + signal_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int signal_;
  std::string message_;
};

/// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

/// Throws Interrupted ("interrupted by SIGTERM " + where) when a signal is
/// pending.
void throw_if_interrupted(const std::string& where);

/// An IntegratorOptions::on_step that calls throw_if_interrupted (the
/// message names `command` and the time; nothing is kept).
std::function<void(double)> interrupt_check(const std::string& command);

/// main's handler: prints the message once (rank 0; with `json` also
/// {"status": "interrupted", ...} on stdout) and returns exit_code(); with
/// more than one rank it ends the job with MPI_Abort(exit_code()) instead,
/// since the other ranks may not have seen the signal.
int report_interrupted(const Interrupted& e, int rank, int size, bool json);

/// The outcome of integrate_run.
struct RunOutcome {
  /// The whole trajectory; when interrupted, the outputs reached.
  ode::Solution solution;
  int signal = 0;                  ///< 0: ran to the end (or failed: see summary)
  double resumed_from = 0.0;       ///< resume time when resumed (else NaN)
  std::size_t resumed_outputs = 0;  ///< outputs taken from the partial file
  std::int64_t steps_to_last_output = 0;  ///< accepted steps up to the last output
};

/// Integrates cfg's problem as `costate run` does (the same driver and
/// arithmetic as ode::integrate), checking for a signal after every accepted
/// step. `on_step` (progress) is called after each step. With `resume_path`,
/// continues the partial run in that file (see read checks below) instead of
/// starting at t0. Errors (costate::Error): the file is not a partial
/// `costate run` output, was written with other settings, or the method does
/// not resume.
RunOutcome integrate_run(const RunConfig& cfg, const std::function<void(double)>& on_step,
                         const std::string& resume_path = "");

/// After an interrupted integrate_run: writes the partial file (rank 0 when
/// `write`, and only when cfg.output_file is set), prints one message on
/// stderr when `talk` (and, with `json`, {"status": "interrupted", ...} on
/// stdout), and returns the exit code (128 + signal).
int finish_interrupted_run(const RunConfig& cfg, const RunOutcome& outcome, bool write, bool talk,
                           bool json = false);

/// Writes the finished (resumed or not) run; adds resumed_from_time when the
/// run was resumed. Equivalent to write_run_hdf5 otherwise.
void write_finished_run(const RunConfig& cfg, const RunOutcome& outcome);

/// How a run file is marked (defined in hdf5_writer.cpp, which owns the
/// layout): root status, /summary termination when not empty, and extra
/// root attributes.
struct RunFileMarks {
  std::string status = "complete";
  std::string termination;
  std::vector<std::pair<std::string, std::string>> strings;
  std::vector<std::pair<std::string, double>> numbers;
};
/// write_run_hdf5 with marks (also under PATH.partial, then renamed).
void write_marked_run_hdf5(const std::string& path, const RunConfig& config,
                           const ode::Solution& solution, const std::string& command,
                           const RunFileMarks& marks);

}  // namespace costate::io
