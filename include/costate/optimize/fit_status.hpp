#pragma once
/// \file
/// The one status vocabulary of every calibration (ODE `calibrate`, PEtab,
/// PDE inversion) and the rule that tells a stalled fit from one that did
/// not converge.
///
///   converged      the optimizer's own convergence test held (FitVerdict::test
///                  names it, e.g. "CONVERGED_GATOL" or "|g| <= 1e-06");
///   stalled        it stopped because no step decreased the objective (a
///                  line-search failure, a step or trust region below its
///                  tolerance, or the evaluations spent in line searches) at a
///                  point where the gradient is at the integration's noise
///                  floor: ‖g‖ ≤ kNoiseFloorFactor · ‖g(tol) − g(tol·kTighter)‖,
///                  the change of the gradient when the solver tolerances are
///                  tightened kTighter-fold (measured by the caller at the
///                  final point) — or where the decrease the last step
///                  predicted is below the objective's own round-off,
///                  predicted_decrease ≤ 8 ε |J| (J cannot tell a better
///                  point from this one). The point is an optimum to the
///                  accuracy the integration allows: tighten the tolerances
///                  to go further;
///   not_converged  anything else (iteration limit, a gradient well above its
///                  noise, a non-finite objective, an interrupted fit, or a
///                  noise level nobody measured).
///
/// A result at a point that is not an optimum (not_converged) says so
/// wherever it is shown: its posterior or standard errors carry caveat(),
/// and its output file is not "complete" (file_status()).

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace costate::optimize {

enum class FitStatus { Converged, Stalled, NotConverged };

/// "converged", "stalled", "not_converged".
std::string to_string(FitStatus s);
/// The inverse; costate::Error listing the valid values otherwise.
FitStatus fit_status_from_string(std::string_view name);

/// ‖g‖ up to this many times its measured noise is "at the noise floor":
/// with ‖g‖ ≤ 10 × its error the direction the optimizer follows is no
/// longer resolved well enough for a line search to make progress.
inline constexpr double kNoiseFloorFactor = 10.0;
/// The noise of the gradient is measured at tolerances this much tighter.
inline constexpr double kTighter = 1e-2;

/// How a fit ended, as the optimizer reports it.
struct FitEnd {
  bool converged = false;    ///< the optimizer's convergence test held
  std::string reason;        ///< its termination reason (TAO's, or the inversion's text)
  double gradient_norm = std::numeric_limits<double>::quiet_NaN();
  /// ‖g(tol) − g(tol·kTighter)‖ at the final point; NaN when not measured.
  double gradient_noise = std::numeric_limits<double>::quiet_NaN();
  /// The objective at the final point and the decrease the optimizer's last
  /// step predicted (Newton: −½ gᵀp); NaN when not known.
  double objective = std::numeric_limits<double>::quiet_NaN();
  double predicted_decrease = std::numeric_limits<double>::quiet_NaN();
};

struct FitVerdict {
  FitStatus status = FitStatus::NotConverged;
  /// converged: the test that held; stalled: "noise floor (…)" with the
  /// figures; not_converged: why it stopped.
  std::string test;

  bool at_optimum() const { return status != FitStatus::NotConverged; }
  /// "converged (CONVERGED_GATOL)", "stalled at the integration's noise
  /// floor (…)", "not converged (DIVERGED_MAXITS)".
  std::string describe() const;
  /// The output file's status: "complete" at an optimum (converged or
  /// stalled), "partial" otherwise.
  const char* file_status() const { return at_optimum() ? "complete" : "partial"; }
  /// For the heading of a posterior or of standard errors: "" at an
  /// optimum, else "NOT at a converged optimum (…): …".
  std::string caveat() const;
};

/// The rule of the file comment.
FitVerdict judge_fit(const FitEnd& end);

/// TAO's reasons that mean "no step decreased the objective" (a stall, as
/// opposed to a limit on iterations or a non-finite value).
bool is_stall_reason(std::string_view reason);

}  // namespace costate::optimize
