#pragma once
/// \file
/// costate::Progress — one progress line on stderr for long computations.
///
/// A Progress is a scope: construct it with what it counts and how many
/// units there are, call update(done) as work is done, and it draws
///
///     [##########..............................]  25.0%  reverse sweep 250/1000  3.2 s, ~9.6 s left
///
/// Nested scopes (a multistart's start, its optimizer's iteration, the
/// gradient's sweeps) share the line, outermost first, separated by " | ".
/// The remaining time of each level is its elapsed time × (1 − f)/f for the
/// fraction f done (a linear estimate; "?" before the first unit).
///
/// Drawn only when progress is enabled for the process
/// (set_progress_enabled: the command line enables it on rank 0 when stderr
/// is a terminal and -q is not given; a library user may do the same), only
/// for computations longer than half a second (COSTATE_PROGRESS_DELAY
/// seconds in the environment overrides it; tests set 0), at most ten times a
/// second but at once for a scope's first update (a new phase); the line is cleared when the outermost scope ends. Not thread-safe:
/// update from the thread that created the scope. Never collective.

#include <string>

namespace costate {

/// Turns the progress line on or off for this process (default off).
void set_progress_enabled(bool enabled);
bool progress_enabled();
/// Erases the progress line, if one is drawn, before other text goes to
/// stderr (an iteration row); the next update draws it again below.
void clear_progress_line();

class Progress {
 public:
  /// `what` names the work ("reverse sweep", "start", "PEtab conditions");
  /// `total` is the number of units (> 0; ≤ 0: no fraction, no estimate).
  /// Off when progress is not enabled for the process or `enabled` is false.
  Progress(std::string what, double total, bool enabled = true);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// `done` units of `total`; `note` follows the count ("best −llh 123.4").
  void update(double done, const std::string& note = "");
  /// False when nothing is drawn (progress off): a hot loop skips building
  /// its note.
  bool active() const { return active_; }
  /// Ends this scope now (the destructor does it otherwise).
  void finish();

 private:
  std::string what_, note_;
  double total_ = 0.0, done_ = 0.0;
  double start_ = 0.0;  ///< steady-clock seconds
  bool active_ = false;
  bool updated_ = false;
  friend struct ProgressLine;
};

}  // namespace costate
