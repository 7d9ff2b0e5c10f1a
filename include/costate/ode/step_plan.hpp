#pragma once
/// \file
/// ode::StepPlan — the steps a discrete derivative replays: the step times
/// t_0 < t_1 < … < t_l and, for bdf, the order of each step (its
/// coefficients). Step sizes and orders are constants of the discrete
/// adjoint, the tangents, H·v and the calibration's residual Jacobian: all
/// of them replay one plan.
///
/// A plan is chosen once, by ode::plan_steps (scheme.hpp: fixed dt landing
/// on the stops, or the adaptive run of dopri5, sdirk3 or bdf recording its
/// accepted steps), and returned with every result
/// (GradientResult::steps, HessianVectorResult::steps, HessianResult::steps)
/// so that it can be handed back to replay the same discrete solution:
///
///     const ode::GradientResult g = ode::gradient(problem, objective, method, options);
///     const auto again = ode::gradient(moved, objective, method, options, g.steps);
///     const auto S = ode::sensitivity_matrix(problem, obs, options, g.steps);
///
/// Constructing a plan validates it (costate::Error naming what is wrong):
/// at least one step, finite strictly increasing times, no orders or one per
/// step, each in 1 … 5. check_replay then checks it against its use, once,
/// where an entry point takes a caller's plan (it runs from t0 to t1; bdf
/// has its orders, the other methods none).

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "costate/ode/options.hpp"

namespace costate::ode {

/// Where events fired on a plan's steps (events.hpp): at time t_at — after
/// step at − 1, before step at (at = 0: at t0) — the events `fired`
/// executed in that order, the instant located by root `root` (its dτ/dp;
/// −1: an instant that does not move, t0 or a delayed execution). Part of
/// the plan, so every replay (checkpoints, tangents, the adjoint, a resumed
/// run) fires the same events at the same times without locating them again.
/// source[e] is the state fired[e]'s assigned values were computed at: c
/// for the state after the instant's first c executions (0: before any —
/// SBML's values from the trigger time when several events fire at once).
/// `delayed`: the instant executes a delayed event whose time (and, with
/// values from the trigger time, values) came from an earlier instant:
/// origin[e] is the index in the plan's events() of the instant that
/// scheduled fired[e] (−1 for an undelayed execution). `scheduled` are the
/// delayed executions this instant scheduled (their trigger turned true
/// here), each with the state its delay — and its values from the trigger
/// time — were computed at (scheduled_source, as `source`); an instant may
/// schedule without executing anything (`fired` empty).
struct EventInstant {
  std::size_t at = 0;
  int root = -1;
  std::vector<std::size_t> fired;
  std::vector<std::size_t> source;
  bool delayed = false;
  std::vector<int> origin;
  std::vector<std::size_t> scheduled;
  std::vector<std::size_t> scheduled_source;
  friend bool operator==(const EventInstant&, const EventInstant&) = default;
};

class StepPlan {
 public:
  /// No steps: where a plan is optional, "choose the steps".
  StepPlan() = default;
  /// Throws costate::Error (the message names the offending entry) unless
  /// `times` has ≥ 2 finite, strictly increasing entries and `orders` is
  /// empty or has one entry per step, each in 1 … kMaxOrder.
  /// `events` (ascending `at`, each ≤ l, one instant per `at`) likewise.
  explicit StepPlan(std::vector<double> times, std::vector<int> orders = {},
                    std::vector<EventInstant> events = {});

  /// bdf's highest order (steppers/bdf.hpp's kBdfMaxOrder).
  static constexpr int kMaxOrder = 5;

  bool empty() const { return times_.empty(); }
  /// l (0 for an empty plan).
  std::size_t steps() const { return times_.empty() ? 0 : times_.size() - 1; }
  /// t_0 … t_l.
  const std::vector<double>& times() const { return times_; }
  /// bdf: the order of step i (t_i → t_{i+1}); empty for the other methods.
  const std::vector<int>& orders() const { return orders_; }
  /// The event instants, ascending (empty for a model without events).
  const std::vector<EventInstant>& events() const { return events_; }

  /// A caller's plan for a replay by `method` over [t0, t1]: throws
  /// costate::Error, prefixed by `who`, unless it runs from t0 to t1 and has
  /// one order per step for bdf and none for the other methods.
  void check_replay(Method method, double t0, double t1, std::string_view who) const;

  /// The step index at which each of `at` (ascending) lands; throws
  /// costate::Error, prefixed by `who`, naming the first time no step lands
  /// on (a replayed plan must include every observation time).
  std::vector<std::size_t> landing_steps(std::span<const double> at, std::string_view who) const;

  friend bool operator==(const StepPlan&, const StepPlan&) = default;

 private:
  std::vector<double> times_;
  std::vector<int> orders_;
  std::vector<EventInstant> events_;
};

}  // namespace costate::ode
