#pragma once
// Private to src/ode/: the event driver, the jump of one instant and the
// scheme decorator (src/ode/events.cpp; events.hpp says what they do).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "costate/ode/events.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/step_plan.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode::detail {

/// "event 'name'" (or "event k" for an unnamed one), for messages.
std::string event_label(const EventModel& events, std::size_t k);

/// The events of one instant on x = (y, z): applied, and linearized for the
/// tangents and the adjoint (events.hpp's jump, with SBML's value sources:
/// D_0 = s⁻ + f⁻ dτ, each execution's targets H_y D_source + H_p ṗ + H_t dτ,
/// s⁺ = D_E − f⁺ dτ). Delayed events link two instants (events.hpp): the
/// one that schedules an execution keeps its values from the trigger time
/// and, linearized, the derivatives of its time and values; the one that
/// executes it takes them (its dτ is the execution time's). One InstantJump
/// applied to a plan's instants in order (a sweep's forward pass, then its
/// reverse) carries these links by the instants' indices.
class InstantJump {
 public:
  /// No index: a caller that applies instants out of order (refuses the
  /// delayed events' links by name).
  static constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
  explicit InstantJump(const System& system);
  /// x (n_x) ← x⁺ after `inst`'s executions at t; with `linearize` keeps
  /// what tangent() and adjoint() need. `index`: the instant's index in the
  /// plan's events() (its delayed executions' origins refer to it); its
  /// scheduling instants must have been applied before (values from the
  /// trigger time), and with kNoIndex an instant with delayed links is
  /// refused by name.
  /// A DAE (issue 32): x⁺'s algebraic states are then re-solved from the
  /// constraints (make_consistent, ode/dae.hpp), and tangent() and
  /// adjoint() include that solve's implicit derivative; derivatives need
  /// the locating root and the updates to read no algebraic state (checked,
  /// refused by name).
  void apply(const EventInstant& inst, double t, std::span<double> x, std::span<const double> p,
             bool linearize, std::size_t index = kNoIndex);
  /// S (n_x × m, row-major) ← ∂x⁺ S + ∂x⁺/∂p P, the instant's time moving.
  /// The delayed executions it schedules keep their dτ_e and value tangents
  /// for the instant that executes them (applied and tangented later).
  void tangent(std::size_t m, std::span<double> S, std::span<const double> P);
  /// λ (n_x) ← the transposed jump applied to λ; μ (n_p) += its parameter
  /// part. `seed`: which of a block of adjoints (each carries its own
  /// delayed links, from the executing instant back to the scheduling one).
  void adjoint(std::span<double> lambda, std::span<double> mu, std::size_t seed = 0);
  /// Second order (after apply with `linearize` and adjoint() of λ with
  /// seed 0 and of λ̇ with seed 1): λ̇ (n_x) and μ̇ (n_p) += (D²Ĵ[ẋ⁻, ṗ])ᵀ λ⁺,
  /// the jump's derivative along the direction applied to λ⁺ (n_x); ẋ⁻
  /// (n_x) is the tangent just before the instant. Ĵ is the jump as a map of
  /// the state at the instant's fixed time (events.cpp says how); its first
  /// derivative is tangent()'s map. Delayed links: a delayed execution's
  /// time offset and values from the trigger time are inputs of Ĵ (their
  /// tangents from tangent() of the scheduling instant, one direction), and
  /// the executions an instant schedules are outputs weighted by their
  /// adjoints; the second-order parts for the inputs go to the scheduling
  /// instant in seed 1 (the λ̇ lane).
  void second_order(std::span<const double> lambda_plus, std::span<const double> xdot,
                    std::span<const double> pdot, std::span<double> lambda_dot,
                    std::span<double> mu_dot);
  std::int64_t rhs_evaluations() const { return rhs_evaluations_; }
  /// The adjoints (of seed 0) that reversed delayed executions left for
  /// their scheduling instants, not yet consumed (a reverse sweep's place:
  /// AdjointResume::pending_events), ascending by instant and event.
  std::vector<PendingEventAdjoint> pending_adjoints() const;
  /// Puts them back (a resumed sweep, before its first reverse step).
  void restore_pending_adjoints(std::span<const PendingEventAdjoint> pending);

 private:
  /// A delayed execution: (the index of the instant that scheduled it, event).
  using Link = std::pair<std::size_t, std::size_t>;
  struct Exec {
    std::size_t event = 0;
    std::vector<std::size_t> targets;
    std::size_t source = 0;
    bool from_trigger = false;  // a delayed execution's values from the trigger time
    Link link{kNoIndex, 0};     // from_trigger or delayed: its origin
    std::vector<double> J;      // targets × (1 + n + n_p): ∂/∂t, ∂/∂y, ∂/∂p
  };
  /// A delayed execution scheduled at this instant (linearized).
  struct Scheduled {
    std::size_t event = 0, source = 0;
    bool from_trigger = false;
    double delay = 0.0;      // its value
    std::vector<double> Jd;  // 1 + n + n_p: the delay's ∂/∂t, ∂/∂y, ∂/∂p
    std::vector<double> Jh;  // targets × (1 + n + n_p): the values' (from_trigger)
  };
  /// What a scheduled execution carries forward to its instant's tangent:
  /// dτ_e (m) and the values' tangents (targets × m).
  struct Carried {
    std::size_t m = 0;
    std::vector<double> dt, dv;
  };
  void schedule(const EventInstant& inst, double t, std::span<const double> p, bool linearize,
                std::size_t index);
  /// The adjoint a delayed execution leaves for its scheduling instant, of
  /// one seed: τ̄_e, then its values' (1 + targets).
  std::vector<double>& seed_slot(const Link& link, std::size_t seed);
  /// An instant where executions of different times coincide (events.cpp:
  /// set_times): each execution's time class, the classes' links, f at
  /// the states where the class changes.
  void set_times(double t, std::span<const double> p);
  std::size_t state_class(std::size_t c) const;
  std::vector<std::vector<double>> class_times(std::size_t m, std::span<const double> S,
                                               std::span<const double> P) const;
  void tangent_multi(std::size_t m, std::span<double> S, std::span<const double> P);
  void adjoint_multi(std::span<double> lambda, std::span<double> mu, std::size_t seed);
  bool multi_ = false;
  std::vector<std::size_t> cls_;
  std::vector<Link> class_link_;
  std::vector<std::vector<double>> fb_;
  const System& sys_;
  const EventModel* ev_;
  std::size_t n_, nx_, np_;
  std::vector<EventAttributes> attrs_;
  std::vector<std::vector<double>> chain_;
  std::vector<Exec> exec_;
  std::vector<Scheduled> sched_;
  std::size_t index_ = kNoIndex;
  bool linked_ = false;       // the instant schedules or executes a delayed event
  Link carried_{kNoIndex, 0};  // the delayed execution whose time is this instant's
  std::map<Link, std::vector<double>> values_;  // values from the trigger time
  std::map<Link, Carried> tangents_;
  std::map<Link, std::vector<std::vector<double>>> adjoints_;  // per seed: τ̄_e, v̄
  std::vector<std::vector<double>> consumed_;  // per sched_: seed 0's τ̄_e, v̄ (second order)
  std::vector<double> f0_, fE_, a_, b_;
  double t_ = 0.0, gdot_ = 0.0;
  int root_ = -1;
  std::span<const double> p_;
  bool linearized_ = false;
  std::int64_t rhs_evaluations_ = 0;
};

/// `inner` replaying `steps`, crossing the plan's event instants (`inner`
/// itself when the plan has none).
std::unique_ptr<Scheme> with_events(const System& system, std::unique_ptr<Scheme> inner,
                                    std::span<const double> p, const StepPlan& steps);

/// The pending adjoints of delayed events in a reverse sweep over `scheme`
/// (made by make_scheme: with_events), empty when the plan has none.
std::vector<PendingEventAdjoint> pending_event_adjoints(const Scheme& scheme);
/// Sets them back in a fresh scheme on the same plan before a resumed sweep;
/// throws costate::Error naming the entry when the plan's instant at
/// `instant` does not schedule `event`, or its adjoint has the wrong size.
void restore_pending_event_adjoints(Scheme& scheme, std::span<const PendingEventAdjoint> pending);

/// What run_with_events did: the accepted step times (and bdf's orders;
/// the native methods' runs), the instants with the time of each and the
/// state just before it (x⁻, n_x), the state at the end and the summary.
/// An instant's `at` indexes plan_times in the native runs; the CVODES runs
/// keep no step times.
struct EventRun {
  std::vector<double> plan_times;
  std::vector<int> orders;
  std::vector<EventInstant> instants;
  std::vector<double> instant_times;
  std::vector<std::vector<double>> before_instants;
  /// The CVODES sensitivity runs: S just before each instant (as S).
  std::vector<std::vector<double>> before_tangents;
  std::vector<double> final_state;
  Summary summary;
};

/// Integrates `system` (with events) from x0 (n_x) at p over [t0, t1] with
/// the native method of `options` in segments between instants, landing on
/// `stops` (ascending, in (t0, t1]); `landed(t, x)` at t0 and after every
/// accepted step (after the instant's events where some fired). A failed
/// segment ends the run (summary says why).
EventRun run_with_events(const System& system, std::span<const double> x0,
                         std::span<const double> p, double t0, double t1,
                         const IntegratorOptions& options, std::span<const double> stops,
                         const std::function<void(double, std::span<const double>)>& landed);

/// `landed(t, x, S)` of the CVODES event runs (S nullptr without sensitivities).
using CvodesLanded = std::function<void(double, std::span<const double>, const double*)>;

/// run_with_events for the CVODES methods with their forward sensitivities:
/// S (column-major n_x × ns; direction d < n_p is parameter d, the others
/// fixed-p directions such as initial states) holds S(t0) on entry, is
/// carried by CVODES between instants and jumped at each by the
/// sensitivities' jump (events.hpp); `landed(t, x, S)` at t0, at each of
/// `stops` and after each instant (delayed events' links carried by InstantJump).
EventRun cvodes_sensitivities_with_events(const System& system, std::span<const double> x0,
                                          std::span<const double> p, double t0, double t1,
                                          const IntegratorOptions& options,
                                          std::span<const double> stops, std::size_t ns,
                                          std::vector<double>& S, const CvodesLanded& landed);

}  // namespace costate::ode::detail
