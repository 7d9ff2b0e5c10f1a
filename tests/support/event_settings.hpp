#pragma once
/// The native steppers at the settings the event tests check closed forms
/// at (events_test, delayed_events_test), each with the agreement its
/// global error allows.
#include <vector>

#include "costate/ode/options.hpp"

namespace costate::test {

struct EventSetting {
  const char* name;
  ode::IntegratorOptions options;
  /// Closed-form agreement reachable at these settings (relative to the
  /// largest gradient entry): the method's global error at this step size
  /// or tolerance, with room for the event time's location (to ulps).
  double closed_tol;
};

inline ode::IntegratorOptions adaptive_options(ode::Method m, double rtol) {
  ode::IntegratorOptions o;
  o.method = m;
  o.rtol = rtol;
  o.atol = rtol * 1e-2;
  return o;
}

inline ode::IntegratorOptions fixed_options(ode::Method m, double dt) {
  ode::IntegratorOptions o;
  o.method = m;
  o.dt = dt;
  o.adaptive = false;
  return o;
}

/// Every native stepper once.
inline std::vector<EventSetting> event_settings() {
  return {
      // dopri5 at rtol 1e-12: global error ~1e-11.
      {"dopri5", adaptive_options(ode::Method::Dopri5, 1e-12), 1e-8},
      // rk4, dt 1e-3: O(dt⁴) = 1e-12 per unit time.
      {"rk4", fixed_options(ode::Method::RK4, 1e-3), 1e-8},
      // sdirk3 (order 3) and bdf (orders 1–5) at rtol 1e-10.
      {"sdirk3", adaptive_options(ode::Method::Sdirk3, 1e-10), 1e-6},
      {"bdf", adaptive_options(ode::Method::Bdf, 1e-10), 1e-6},
      // Crank–Nicolson, dt 1e-4: O(dt²) = 1e-8.
      {"crank_nicolson", fixed_options(ode::Method::CrankNicolson, 1e-4), 1e-6},
      // First-order methods at dt 1e-4: O(dt) = 1e-4.
      {"backward_euler", fixed_options(ode::Method::BackwardEuler, 1e-4), 1e-3},
      {"euler", fixed_options(ode::Method::ExplicitEuler, 1e-4), 1e-3},
  };
}

}  // namespace costate::test
