// The seed of the draws among events of equal priority
// (include/costate/ode/event_order.hpp).

#include "costate/ode/event_order.hpp"

#include "costate/ode/events.hpp"

namespace costate::ode {

namespace {
thread_local std::uint64_t g_seed = kEventOrderSeed;
}  // namespace

std::uint64_t event_order_seed() { return g_seed; }

ScopedEventOrderSeed::ScopedEventOrderSeed(std::uint64_t seed) : previous_(g_seed) {
  g_seed = seed;
}

ScopedEventOrderSeed::~ScopedEventOrderSeed() { g_seed = previous_; }

}  // namespace costate::ode
