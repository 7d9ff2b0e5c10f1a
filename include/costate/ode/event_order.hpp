#pragma once
/// \file
/// The seed of the draws among simultaneous events of equal priority
/// (EventAttributes::random_order_among_equal_priorities: SBML executes them
/// in random order). The event driver seeds its std::mt19937_64 with
/// event_order_seed() at each integration's start: kEventOrderSeed (5489,
/// the generator's own default) unless a ScopedEventOrderSeed on the calling
/// thread says otherwise — `costate run --event-seed S` sets one around the
/// command and prints S, so that a run is reproduced by its seed.
///
/// Thread-local: integrations on other threads keep their own seed.

#include <cstdint>

namespace costate::ode {

/// The seed the event driver uses for integrations started on this thread.
std::uint64_t event_order_seed();

/// While it lives, integrations started on this thread draw with `seed`
/// (the previous seed is restored after; scopes nest).
class ScopedEventOrderSeed {
 public:
  explicit ScopedEventOrderSeed(std::uint64_t seed);
  ~ScopedEventOrderSeed();
  ScopedEventOrderSeed(const ScopedEventOrderSeed&) = delete;
  ScopedEventOrderSeed& operator=(const ScopedEventOrderSeed&) = delete;

 private:
  std::uint64_t previous_;
};

}  // namespace costate::ode
