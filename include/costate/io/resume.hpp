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
// `calibrate` keeps its evaluation journal in a partial file and resumes to
// the same bits (below).
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

namespace costate::ode {
struct AdjointResume;  // costate/ode/scheme.hpp
}  // namespace costate::ode

namespace costate::io {

struct CalibrationJournal;  // costate/calibrate/calibrate.hpp

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
/// message names `command` and the time; the caller adds what it kept).
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

// ---- calibrate --resume ------------------------------------------------------
//
// `costate calibrate -o OUT.h5` keeps OUT.h5 as a partial file while it fits:
// after every optimizer iteration (so a SIGKILL loses at most one
// iteration's evaluations) and when SIGINT/SIGTERM stops it after an
// iteration. The file holds the evaluation journal (CalibrationJournal: every
// q TAO asked for with J, ∇J or the Gauss–Newton matrix, or the error) and
// the last iterate; `calibrate FILE.yaml --resume OUT.h5` replays it through
// a fresh TAO and continues, to the same bits as the uninterrupted fit. The
// finished fit overwrites it with the complete calibration output.
//
// Layout: root attributes status = "partial", command = "calibrate",
// resume_settings (the resolved settings but the output file), interrupted_by
// ("SIGINT", "SIGTERM", or "" while running), resume_iteration (the last
// iteration reached), resume_evaluations; group /calibration_resume with
// kind (int, k: 0 gradient, 1 Gauss–Newton), q (k × n), objective (k), out
// (the ∇J and matrices one after the other), failed (int, k: 1 = threw) and
// the attribute errors (the failed entries' messages joined by U+001E), and
// last_iterate (n).

/// Writes `journal` as the partial calibration file `path` (beside and
/// renamed into place, so a kill during the write leaves the previous one).
/// `signal` 0 while the fit runs, else the signal that stopped it.
void write_calibration_partial(const std::string& path, const RunConfig& cfg,
                               const CalibrationJournal& journal, int signal);

/// Reads the journal of a partial calibration file, checking it was written
/// by `costate calibrate` with cfg's settings and is not complete (errors
/// name the file and the fix).
CalibrationJournal read_calibration_partial(const std::string& path, const RunConfig& cfg);

// ---- sensitivity --resume ----------------------------------------------------
//
// `costate sensitivity -o OUT.h5` with the discrete adjoint of a native
// stepper: when SIGINT/SIGTERM stops it during the reverse sweep, OUT.h5 is
// written as a partial file holding the sweep's place (ode::AdjointResume:
// the step reached, λ, μ, J, the step times and bdf orders);
// `sensitivity FILE.yaml --resume OUT.h5` replays the steps below that place
// only and gives the uninterrupted run's bits (objective and gradient). A
// stop before the reverse sweep began keeps nothing (there is nothing to
// continue from but the start). A SIGKILL leaves whatever partial file the
// last stop left, or none.
//
// A file with conditions (io::ConditionsPlace): the conditions are taken in
// order, so the place is the condition reached, the J_c and the running
// sums of the conditions before it (stored as computed, so the resumed sums
// go on with the same bits), and that condition's reverse sweep when it had
// begun; a stop after the first condition always keeps the conditions done.
//
// Layout: root attributes status = "partial", command = "sensitivity",
// resume_settings, interrupted_by; with a sweep resume_step, resume_steps
// (l) and group /sensitivity_resume with lambda, mu, times (doubles),
// orders (int), the plan's event instants (events, int: at, root + 1,
// delayed, count, fired…, sources…; event_links, int, per instant: the
// origins' count and origins, the scheduled count, scheduled…, their
// sources…), the adjoints pending between a delayed event's execution and
// its trigger (ode::AdjointResume::pending_events: pending_links, int,
// (instant, event, size) each; pending_adjoints, doubles, one after the
// other) and the attribute objective; with conditions the group
// /conditions_resume with the attribute condition and objectives,
// gradient_p, gradient_initial_state (doubles).

struct ConditionsPlace;  // costate/io/conditions.hpp

/// Whether `costate sensitivity` with these settings can be resumed: the
/// discrete adjoint of a native stepper (not forward sensitivities, the
/// continuous adjoint or CVODES); `why` gets the reason when not.
bool sensitivity_resumable(const RunConfig& cfg, std::string* why = nullptr);

/// Writes `place` as the partial sensitivity file `path` (beside, then
/// renamed); the place must be ahead of the start (a sweep, or a condition
/// done).
void write_sensitivity_partial(const std::string& path, const RunConfig& cfg, const ConditionsPlace& place,
                               int signal);

/// Reads the place from a partial sensitivity file, checking that it was
/// written by `costate sensitivity` with cfg's settings and is partial.
ConditionsPlace read_sensitivity_partial(const std::string& path, const RunConfig& cfg);

}  // namespace costate::io
