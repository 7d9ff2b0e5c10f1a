// The calibrations' status vocabulary (include/costate/optimize/fit_status.hpp).
#include "costate/optimize/fit_status.hpp"

#include <array>
#include <limits>
#include <sstream>

#include "costate/core/error.hpp"

namespace costate::optimize {

std::string to_string(FitStatus s) {
  switch (s) {
    case FitStatus::Converged: return "converged";
    case FitStatus::Stalled: return "stalled";
    case FitStatus::NotConverged: return "not_converged";
  }
  return "not_converged";
}

FitStatus fit_status_from_string(std::string_view name) {
  for (FitStatus s : {FitStatus::Converged, FitStatus::Stalled, FitStatus::NotConverged})
    if (to_string(s) == name) return s;
  throw Error("unknown fit status '" + std::string(name) +
              "'; expected one of: converged, stalled, not_converged");
}

bool is_stall_reason(std::string_view reason) {
  // TAO: the line search found no decrease, the step or the trust region
  // fell below its tolerance, or the function evaluations ran out inside
  // line searches (DIVERGED_MAXFCN before DIVERGED_MAXITS).
  constexpr std::array kStalls{"LS_FAILURE", "STEPTOL", "TR_REDUCTION", "MAXFCN", "line search"};
  for (const char* s : kStalls)
    if (reason.find(s) != std::string_view::npos) return true;
  return false;
}

FitVerdict judge_fit(const FitEnd& end) {
  FitVerdict v;
  if (end.converged) {
    v.status = FitStatus::Converged;
    v.test = end.reason;
    return v;
  }
  const bool floor = std::isfinite(end.gradient_norm) && std::isfinite(end.gradient_noise) &&
                     end.gradient_norm <= kNoiseFloorFactor * end.gradient_noise;
  if (is_stall_reason(end.reason) && floor) {
    std::ostringstream os;
    os.precision(3);
    os << end.reason << ", |g| = " << end.gradient_norm << " <= " << kNoiseFloorFactor
       << " x its noise " << end.gradient_noise << " (its change with the tolerances tightened "
       << 1.0 / kTighter << "-fold)";
    v.status = FitStatus::Stalled;
    v.test = os.str();
    return v;
  }
  // J's own round-off: a few ulps of |J| (the line searches' slack).
  const double j_noise = 8.0 * std::numeric_limits<double>::epsilon() * std::abs(end.objective);
  if (is_stall_reason(end.reason) && std::isfinite(end.predicted_decrease) && std::isfinite(j_noise) &&
      end.predicted_decrease <= j_noise) {
    std::ostringstream os;
    os.precision(3);
    os << end.reason << ", |g| = " << end.gradient_norm << ", the decrease its last step predicted "
       << end.predicted_decrease << " <= the objective's round-off " << j_noise << " (8 eps |J|)";
    v.status = FitStatus::Stalled;
    v.test = os.str();
    return v;
  }
  std::ostringstream os;
  os.precision(3);
  os << end.reason;
  if (std::isfinite(end.gradient_noise) && std::isfinite(end.gradient_norm))
    os << "; |g| = " << end.gradient_norm << ", above " << kNoiseFloorFactor << " x its noise "
       << end.gradient_noise;
  v.test = os.str();
  return v;
}

std::string FitVerdict::describe() const {
  switch (status) {
    case FitStatus::Converged: return "converged (" + test + ")";
    case FitStatus::Stalled: return "stalled at the integration's noise floor (" + test + ")";
    case FitStatus::NotConverged: return "not converged (" + test + ")";
  }
  return test;
}

std::string FitVerdict::caveat() const {
  if (at_optimum()) return "";
  return "NOT at a converged optimum (" + test +
         "): computed at the optimizer's last point, it describes no optimum; rerun with more "
         "iterations or a better start";
}

}  // namespace costate::optimize
