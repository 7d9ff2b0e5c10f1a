#pragma once
// Multi-condition input files (`conditions:`, io::ConditionConfig): each
// condition is the file's problem with some parameters and initial values
// replaced and its own data. The objective sums over the conditions in the
// table's order,
//     J(p, y0) = Σ_c J_c(p_c, y0_c),   p_c,k = p_src(c,k) or a number,
// and so does the gradient: condition c's gradient with respect to its own
// parameters (by the file's sensitivity.method, initial values written as
// expressions of the parameters included) flows to the file's parameter
// p_src(c,k); a parameter set to a number takes none, and a replaced initial
// value passes none to the file's initial value (its dependence on the
// parameters, when it is an expression of them, flows to those).

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/io/file_gradient.hpp"
#include "costate/io/hdf5_writer.hpp"
#include "costate/io/input.hpp"

namespace costate::io {

/// The number of conditions: cfg.conditions.size(), or 1 for a file
/// without them (the file itself).
std::size_t condition_count(const RunConfig& cfg);

/// Condition c's problem: cfg with the condition's parameters (read from
/// cfg.parameters where they name one) and initial values applied, its data
/// as the objective's and the calibration's data, and no conditions. For a
/// file without conditions, c = 0 gives cfg unchanged.
RunConfig condition_config(const RunConfig& cfg, std::size_t c);

/// Adds condition c's gradient with respect to its own parameters (gp) and
/// initial state (gy) into the file's (file_gp, file_gy), as the file
/// comment says.
void add_condition_gradient(const RunConfig& cfg, std::size_t c, std::span<const double> gp,
                            std::span<const double> gy, std::span<double> file_gp, std::span<double> file_gy);

/// Where a sensitivity over the conditions stopped (`sensitivity --resume`,
/// io/resume.hpp), the conditions taken in order: conditions 0 …
/// condition − 1 are done (their J_c and the running sums of their
/// gradients, added in order as conditions_sensitivity adds them), and
/// condition `condition`'s reverse sweep is at `sweep` (none, or step −1: it
/// had not begun, so the condition starts afresh). condition ==
/// condition_count(cfg) with no sweep: every gradient done, the trajectories
/// of the output file not. A file without conditions has condition 0 only.
struct ConditionsPlace {
  std::size_t condition = 0;
  std::vector<double> objectives;              ///< J_c, c < condition
  std::vector<double> gradient_p;              ///< Σ_{c<condition}, the file's parameters (empty: 0)
  std::vector<double> gradient_initial_state;  ///< Σ_{c<condition}, the file's initial state (empty: 0)
  std::shared_ptr<ode::AdjointResume> sweep;   ///< condition's reverse sweep, when it had begun

  /// Whether a stop here kept anything beyond `from` (the place a resumed
  /// run began at; a fresh run's is the default place): a later condition,
  /// or a reverse sweep that had begun.
  bool ahead_of(const ConditionsPlace& from) const;
};

/// What conditions_sensitivity computes and how.
struct ConditionsSensitivityOptions {
  /// The trajectories of the output file (file_sensitivity's integration at
  /// the output times, one per condition); without them file_gradient.
  bool trajectories = true;
  /// With --hessian: ∂²J/∂p² over these file parameters (the wrt ones).
  const std::vector<std::size_t>* hessian_wrt = nullptr;
  /// Resume: continue from this place (the discrete adjoint of a native
  /// stepper; file_gradient's AdjointResumeLink for the condition).
  const ConditionsPlace* resume_from = nullptr;
  /// When given, kept up to date with where the computation is, so that
  /// after an io::Interrupted it says what to write to a partial file.
  ConditionsPlace* interrupted_at = nullptr;
};

/// `costate sensitivity` (and Python's Problem.sensitivity) over a file's
/// conditions — one loop for a file with conditions and without (one
/// condition, the file itself, whose bits are file_sensitivity's /
/// file_gradient's unchanged): each condition's problem, trajectory
/// (options.trajectories), J_c, step plan, and the sums of J, ∇J (and with
/// hessian_wrt H = Σ_c P_cᵀ H_c P_c) in the conditions' order, the counters
/// and wall times summed (those of this process: a resumed run counts the
/// steps it ran). `output` is the report as the output file holds it (the
/// wrt gradient, the method and the counts).
struct ConditionsSensitivity {
  std::vector<RunConfig> problems;          ///< condition c's problem (condition_config)
  std::vector<ode::Solution> trajectories;  ///< with options.trajectories
  std::vector<double> objectives;           ///< J_c
  std::vector<ode::StepPlan> steps;         ///< condition c's step plan (empty for those resumed past)
  FileGradient gradient;                    ///< the sums
  FileHessian hessian;                      ///< with hessian_wrt
  SensitivityOutput output;
};
ConditionsSensitivity conditions_sensitivity(const RunConfig& cfg, const ConditionsSensitivityOptions& options = {});

/// J and ∇J summed over the conditions (file_gradient of each condition's
/// problem, in order): result.objective, gradient_p and
/// result.wrt_initial_state are the sums; result's counters and wall time
/// are summed too. `objectives` (when given) receives each condition's J_c,
/// `steps` each condition's step plan (replayed by conditions_objective and
/// conditions_hessian). A file without conditions gives file_gradient's
/// result unchanged.
FileGradient conditions_gradient(const RunConfig& cfg, std::vector<double>* objectives = nullptr,
                                 std::vector<ode::StepPlan>* steps = nullptr);

/// J = Σ_c J_c at cfg's parameters and initial state, condition c on the
/// steps `steps[c]` (of conditions_gradient): with the steps frozen J is the
/// same smooth function of (p, y0) at every evaluation (gradcheck's
/// differences).
double conditions_objective(const RunConfig& cfg, std::span<const ode::StepPlan> steps);

/// ∂²J/∂p² over the file's parameters `wrt` of J = Σ_c J_c: with P_c the
/// (0/1) map from the file's parameters to condition c's (p_c = P_c p +
/// numbers), H = Σ_c P_cᵀ H_c P_c, summed in the conditions' order; H_c
/// (file_hessian on condition c's problem, on its gradient's steps
/// `steps[c]`) is taken over the condition's parameters that read a `wrt`
/// parameter, its initial values written as expressions of them included.
/// A file without conditions gives file_hessian's result.
FileHessian conditions_hessian(const RunConfig& cfg, const std::vector<std::size_t>& wrt,
                               std::span<const ode::StepPlan> steps);

/// Refuses a file with conditions in a command or option that does not
/// take them: "`what` does not take a file with conditions: …".
void require_single_condition(const RunConfig& cfg, const std::string& what);

}  // namespace costate::io
