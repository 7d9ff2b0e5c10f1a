#include "costate/ode/checkpointing.hpp"

#include <limits>

namespace costate::ode {

std::int64_t binomial_coefficient(std::int64_t n, std::int64_t k) {
  if (k < 0 || n < 0 || k > n) return 0;
  if (k > n - k) k = n - k;
  // C(n, k) = Π_{i=1..k} (n − k + i) / i, exact at every step; saturate.
  __int128 c = 1;
  for (std::int64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > std::numeric_limits<std::int64_t>::max()) return std::numeric_limits<std::int64_t>::max();
  }
  return static_cast<std::int64_t>(c);
}

std::int64_t binomial_repetitions(std::int64_t steps, std::int64_t snapshots) {
  COSTATE_CHECK_GE(snapshots, 1, "binomial checkpointing needs at least one snapshot");
  std::int64_t r = 0;
  while (binomial_coefficient(snapshots + r, snapshots) < steps) ++r;
  return r;
}

std::int64_t binomial_forward_steps(std::int64_t steps, std::int64_t snapshots) {
  if (steps <= 1) return 0;
  const std::int64_t r = binomial_repetitions(steps, snapshots);
  return r * steps - binomial_coefficient(snapshots + r, snapshots + 1);
}

std::string to_string(const Checkpointing& c) {
  if (std::holds_alternative<StoreAll>(c)) return "store_all";
  if (const auto* u = std::get_if<Uniform>(&c)) return "uniform(every=" + std::to_string(u->every) + ")";
  if (const auto* b = std::get_if<Binomial>(&c))
    return "binomial(snapshots=" + std::to_string(b->snapshots) + ")";
  if (const auto* o = std::get_if<Online>(&c))
    return "online(snapshots=" + std::to_string(o->snapshots) + ")";
  const auto& m = std::get<Multilevel>(c);
  return "multilevel(ram=" + std::to_string(m.ram) + ", disk=" + std::to_string(m.disk) +
         ", path=" + m.path + ")";
}

void validate(const Checkpointing& c) {
  if (const auto* u = std::get_if<Uniform>(&c))
    COSTATE_CHECK(u->every >= 1, "checkpointing.every = " << u->every << " must be >= 1");
  if (const auto* b = std::get_if<Binomial>(&c))
    COSTATE_CHECK(b->snapshots >= 1, "checkpointing.snapshots = " << b->snapshots
                                         << " must be >= 1 (the initial state is one of them)");
  if (const auto* o = std::get_if<Online>(&c))
    COSTATE_CHECK(o->snapshots >= 2, "checkpointing.snapshots = " << o->snapshots
                                         << " must be >= 2 for online checkpointing");
  if (const auto* m = std::get_if<Multilevel>(&c)) {
    COSTATE_CHECK(m->ram >= 1, "checkpointing.ram = " << m->ram << " must be >= 1");
    COSTATE_CHECK(m->disk >= 0, "checkpointing.disk = " << m->disk << " must be >= 0");
    COSTATE_CHECK(!m->path.empty() || m->disk == 0, "checkpointing.path is required with disk > 0");
  }
}

}  // namespace costate::ode
