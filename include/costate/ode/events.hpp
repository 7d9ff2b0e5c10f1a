#pragma once
/// \file
/// Events — a model that switches: roots g_r(t, y, p) whose sign changes
/// are located during integration, and events whose trigger (a condition on
/// the roots' signs) turns from false to true there and then assign new
/// values to some states:  y_j⁺ = h_kj(τ, y⁻, p)  for the targets j of event k.
///
/// A model has events when it has the members of ode::HasEvents (below);
/// make_system picks them up (System::events()), and every native integrator
/// and sensitivity path then honours them — added once, in the event driver
/// (src/ode/events.cpp: root location, SBML's firing rules, the step plan's
/// record of what fired) and in one scheme decorator (the jumps of the
/// tangents and of the adjoint), never per sweep.
///
///     struct Ball : ode::EventDefaults {  // y = (height, velocity), p = (g, e)
///       template <class T>
///       void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
///         d[0] = y[1];  d[1] = -p[0];
///       }
///       std::size_t n_roots() const { return 1; }
///       template <class T>                 // g_0 = −height: positive once it hits the floor
///       void roots(T, std::span<const T> y, std::span<const T>, std::span<T> g) const {
///         g[0] = -y[0];
///       }
///       std::size_t n_events() const { return 1; }
///       ode::EventAttributes event_attributes(std::size_t) const { return {.name = "bounce"}; }
///       bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
///                          std::span<const std::int8_t> sides) const { return sides[0] > 0; }
///       std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
///       template <class T>                 // velocity ← −e · velocity
///       void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
///                         std::span<T> values) const { values[0] = -p[1] * y[1]; }
///       static constexpr std::size_t kTargets[1] = {1};
///     };
///
/// Semantics (SBML Level 3's, which the others are special cases of):
///   - sides: root r is on side +1 when g_r ≥ 0, else −1. A trigger is a
///     function of the sides (and of t, y, p); an event fires when its
///     trigger turns from false to true. Before t0 a trigger has the value
///     EventAttributes::initial_value (false: a trigger true at t0 fires at t0).
///   - the instant τ of a firing is the located crossing of the root whose
///     side changed first: the step is retaken to end there (every native
///     stepper, fixed or adaptive), to within a few ulps of τ in time; the
///     CVODES methods' runs use CVODES' own root finding. A trigger that
///     turns true and false again inside one step is not seen (keep
///     integrator.dt_max below such windows).
///   - at one instant, the events that fire execute in order of priority
///     (event_priority, highest first; ties in declaration order, or drawn
///     at random, reproducibly, among events that ask for it: SBML's
///     random_order_among_equal_priorities); after
///     each execution every trigger is evaluated again, so an assignment may
///     fire further events at the same instant (a cascade, bounded by
///     kMaxEventsPerInstant); a pending event whose trigger turned false is
///     dropped unless persistent.
///   - a delay d = event_delay(…) ≥ 0 (has_delay) schedules the execution at
///     τ + d, the assigned values computed at τ (use_values_from_trigger_time)
///     or at the execution.
///   - observations and outputs at an instant see the state after its events.
///
/// Sensitivities across an event at τ located by root g (the jump, for
/// x = (y, z), h the identity on the states it does not assign; f⁻, f⁺ the
/// right-hand side before and after):
///     dτ = −(g_y s⁻ + g_p ṗ)/ġ,  ġ = g_t + g_y f⁻,
///     s⁺ = h_y s⁻ + h_p ṗ + (h_y f⁻ + h_t − f⁺) dτ,
/// and its transpose for the adjoint. An instant whose time does not move
/// with y or p (t0, a root of t alone whose derivative vanishes) has dτ from
/// the same formula (0 when g_y, g_p vanish). Several events at one instant
/// share its dτ. The continuous adjoint integrates backward in legs between
/// the instants and applies the same transposed jump at each (at x⁻): the
/// continuous adjoint's jump condition. CVODES' forward sensitivities are
/// jumped by the same map at the instants its root finding locates.
/// Hessian–vector products (the discrete adjoint's forward over adjoint)
/// differentiate the jump once more: the jump as a map of the state at the
/// instant's fixed time, whose first derivative is the map above and whose
/// second adds the instant's movement to second order (the flows beside it,
/// f_t + f_y f, and dτ's own second derivative by the implicit function
/// theorem; src/ode/events.cpp, InstantJump::second_order).
///
/// A delayed event (its trigger turns true at τ, located as above) executes
/// at τ_e = τ + d(τ, y_τ, p), with values h(τ, y_τ, p) from the trigger time
/// or h(τ_e, y⁻(τ_e), p) from the execution (y_τ the state the trigger saw):
///     dτ_e = dτ + d_t dτ + d_y D_τ + d_p ṗ,   (D_τ = s⁻(τ) + f⁻(τ) dτ)
///     dv   = h_t dτ + h_y D_τ + h_p ṗ          (values from the trigger time),
/// and the instant at τ_e jumps with dτ_e in place of a root's dτ (the
/// adjoint carries the transposes back from τ_e to τ). The delay's
/// derivative needs event_delay on a generic scalar T (it is called on
/// ad::Dual<double, 8>); one whose event_delay takes doubles only runs, and
/// its derivatives are refused by name. Differentiated by every path that
/// crosses events (support.hpp: supports_events), on a DAE too (the
/// algebraic states re-solved after the execution). Executions of
/// different times falling at one instant execute in SBML's order, each
/// moving with its own time (docs/events.md: the derivative of the branch
/// that keeps the order).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"

namespace costate::ode {

/// What an event is beyond its trigger and assignments (SBML's attributes).
struct EventAttributes {
  std::string name;
  /// The trigger's value before t0 (false: a trigger that holds at t0 fires at t0).
  bool initial_value = true;
  /// false: a pending (delayed) execution is dropped when the trigger turns
  /// false before it.
  bool persistent = true;
  /// With a delay: assigned values computed at the trigger (true) or at the
  /// execution (false).
  bool use_values_from_trigger_time = true;
  /// event_delay is called (else the delay is 0).
  bool has_delay = false;
  /// event_priority is called (else the priority is 0).
  bool has_priority = false;
  /// SBML: simultaneous events of equal priority execute in random order.
  /// When every event tied for the highest priority at an execution has
  /// this set, the one to execute is drawn uniformly among them from a
  /// std::mt19937_64 seeded with kEventOrderSeed at each integration's
  /// start (runs are reproducible); otherwise ties go in declaration order.
  bool random_order_among_equal_priorities = false;
};

/// The seed of the draws among events of equal priority
/// (EventAttributes::random_order_among_equal_priorities): the generator's
/// own default seed, not chosen for any model.
inline constexpr std::uint64_t kEventOrderSeed = 5489u;

/// The members of HasEvents that a model without delays or priorities need
/// not write: derive from it (`struct Ball : ode::EventDefaults { … }`) and
/// leave EventAttributes::has_delay and has_priority false. A model with a
/// delay writes its own, on a generic scalar for derivatives through it:
///     template <class T>
///     T event_delay(std::size_t k, T t, std::span<const T> y, std::span<const T> p) const;
struct EventDefaults {
  double event_delay(std::size_t, double, std::span<const double>, std::span<const double>) const {
    return 0.0;
  }
  double event_priority(std::size_t, double, std::span<const double>,
                        std::span<const double>) const {
    return 0.0;
  }
};

/// More events than this at one instant (a cascade that does not end) is an
/// error naming the events.
inline constexpr std::size_t kMaxEventsPerInstant = 1000;

/// A model with events (see the file comment): roots on double and on
/// ad::Dual<double, 8> (for g_t, g_y, g_p), triggers on the roots' sides,
/// the assigned states (indices into y) and their new values (on double and
/// Dual<double, 8>), delay and priority. Roots and assignments are also
/// evaluated on ad::Dual<ad::Dual<double, 1>, 8> (Hessian–vector products
/// through an instant): write them on a generic T.
template <class M>
concept HasEvents = requires(const M& m, double t, std::span<const double> y,
                             std::span<const double> p, std::span<double> out,
                             std::span<const std::int8_t> sides, std::size_t k) {
  { m.n_roots() } -> std::convertible_to<std::size_t>;
  { m.n_events() } -> std::convertible_to<std::size_t>;
  m.template roots<double>(t, y, p, out);
  { m.event_attributes(k) } -> std::convertible_to<EventAttributes>;
  { m.event_trigger(k, t, y, p, sides) } -> std::convertible_to<bool>;
  { m.event_targets(k) } -> std::convertible_to<std::span<const std::size_t>>;
  m.template event_assign<double>(k, t, y, p, out);
  { m.event_delay(k, t, y, p) } -> std::convertible_to<double>;
  { m.event_priority(k, t, y, p) } -> std::convertible_to<double>;
};

namespace detail {

/// The events of one model, type-erased (System::events()): implemented by
/// EventAdapter<M> for every HasEvents model.
class EventModel {
 public:
  using Dual8 = ad::Dual<double, 8>;
  /// Second order (Hessian–vector products through an instant): 8 lanes of
  /// first derivatives, each with its derivative along one direction ε.
  using Dual8x1 = ad::Dual<ad::Dual<double, 1>, 8>;
  virtual ~EventModel() = default;
  virtual std::size_t n_roots() const = 0;
  virtual std::size_t n_events() const = 0;
  virtual void roots(double t, std::span<const double> y, std::span<const double> p,
                     std::span<double> g) const = 0;
  virtual void roots(Dual8 t, std::span<const Dual8> y, std::span<const Dual8> p,
                     std::span<Dual8> g) const = 0;
  virtual void roots(Dual8x1 t, std::span<const Dual8x1> y, std::span<const Dual8x1> p,
                     std::span<Dual8x1> g) const = 0;
  virtual EventAttributes attributes(std::size_t k) const = 0;
  virtual bool trigger(std::size_t k, double t, std::span<const double> y,
                       std::span<const double> p, std::span<const std::int8_t> sides) const = 0;
  virtual std::vector<std::size_t> targets(std::size_t k) const = 0;
  virtual void assign(std::size_t k, double t, std::span<const double> y,
                      std::span<const double> p, std::span<double> values) const = 0;
  virtual void assign(std::size_t k, Dual8 t, std::span<const Dual8> y, std::span<const Dual8> p,
                      std::span<Dual8> values) const = 0;
  virtual void assign(std::size_t k, Dual8x1 t, std::span<const Dual8x1> y,
                      std::span<const Dual8x1> p, std::span<Dual8x1> values) const = 0;
  virtual double delay(std::size_t k, double t, std::span<const double> y,
                       std::span<const double> p) const = 0;
  /// d ← the delay on Dual8 (its derivative in t, y, p), for derivatives
  /// through a delayed event; false when the model's event_delay takes
  /// doubles only (those derivatives are then refused by name).
  virtual bool delay(std::size_t k, Dual8 t, std::span<const Dual8> y, std::span<const Dual8> p,
                     Dual8& d) const = 0;
  virtual double priority(std::size_t k, double t, std::span<const double> y,
                          std::span<const double> p) const = 0;
};

template <HasEvents M>
class EventAdapter final : public EventModel {
 public:
  explicit EventAdapter(const M& model) : m_(model) {}
  std::size_t n_roots() const override { return m_.n_roots(); }
  std::size_t n_events() const override { return m_.n_events(); }
  void roots(double t, std::span<const double> y, std::span<const double> p,
             std::span<double> g) const override {
    m_.template roots<double>(t, y, p, g);
  }
  void roots(Dual8 t, std::span<const Dual8> y, std::span<const Dual8> p,
             std::span<Dual8> g) const override {
    m_.template roots<Dual8>(t, y, p, g);
  }
  void roots(Dual8x1 t, std::span<const Dual8x1> y, std::span<const Dual8x1> p,
             std::span<Dual8x1> g) const override {
    m_.template roots<Dual8x1>(t, y, p, g);
  }
  EventAttributes attributes(std::size_t k) const override { return m_.event_attributes(k); }
  bool trigger(std::size_t k, double t, std::span<const double> y, std::span<const double> p,
               std::span<const std::int8_t> sides) const override {
    return m_.event_trigger(k, t, y, p, sides);
  }
  std::vector<std::size_t> targets(std::size_t k) const override {
    const std::span<const std::size_t> s = m_.event_targets(k);
    return std::vector<std::size_t>(s.begin(), s.end());
  }
  void assign(std::size_t k, double t, std::span<const double> y, std::span<const double> p,
              std::span<double> values) const override {
    m_.template event_assign<double>(k, t, y, p, values);
  }
  void assign(std::size_t k, Dual8 t, std::span<const Dual8> y, std::span<const Dual8> p,
              std::span<Dual8> values) const override {
    m_.template event_assign<Dual8>(k, t, y, p, values);
  }
  void assign(std::size_t k, Dual8x1 t, std::span<const Dual8x1> y, std::span<const Dual8x1> p,
              std::span<Dual8x1> values) const override {
    m_.template event_assign<Dual8x1>(k, t, y, p, values);
  }
  double delay(std::size_t k, double t, std::span<const double> y,
               std::span<const double> p) const override {
    return m_.event_delay(k, t, y, p);
  }
  bool delay(std::size_t k, Dual8 t, std::span<const Dual8> y, std::span<const Dual8> p,
             Dual8& d) const override {
    if constexpr (requires {
                    { m_.event_delay(k, t, y, p) } -> std::convertible_to<Dual8>;
                  }) {
      d = m_.event_delay(k, t, y, p);
      return true;
    } else {
      return false;
    }
  }
  double priority(std::size_t k, double t, std::span<const double> y,
                  std::span<const double> p) const override {
    return m_.event_priority(k, t, y, p);
  }

 private:
  const M& m_;
};

}  // namespace detail

}  // namespace costate::ode
