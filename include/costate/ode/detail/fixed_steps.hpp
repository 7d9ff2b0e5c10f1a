#pragma once
/// \file
/// The fixed-step landing rule, shared by the integrator (`run_fixed`) and
/// the step plans of the discrete derivatives (`fixed_step_times`), so both
/// take the same steps to the last bit.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace costate::ode::detail {

/// Steps of size dt from an anchor that land exactly on each target.
/// Between landings the step times are anchor + k dt, not running sums
/// t += dt, so round-off cannot drift over many steps (a drift of n ε t
/// would leave a sliver step before the target, e.g. dt = T/N taking N + 1
/// steps).
struct FixedStepClock {
  double dt;
  double anchor;
  std::int64_t k = 0;

  struct Next {
    double t;    ///< the next step time
    bool lands;  ///< whether it is the target itself
  };

  /// The next step time towards `target`: the target itself when a full step
  /// reaches it, within a slack (relative to dt, and a few ulps of the times)
  /// so that round-off in dt = T/N never leaves a sliver of a step.
  Next next(double target) const {
    const double eps = std::numeric_limits<double>::epsilon();
    const double t_full = anchor + static_cast<double>(k + 1) * dt;
    const double slack = 1e-10 * dt + 16.0 * eps * std::max(std::abs(target), std::abs(anchor));
    const bool lands = t_full >= target - slack;
    return {lands ? target : t_full, lands};
  }

  /// Records that the step to `n` was taken.
  void take(const Next& n) {
    if (n.lands) {
      anchor = n.t;
      k = 0;
    } else {
      ++k;
    }
  }
};

}  // namespace costate::ode::detail
