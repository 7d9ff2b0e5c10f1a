// Checkpoint schedules: every schedule reverses the steps in order l−1 … 0
// with the right state each time, within its snapshot budget; Binomial
// advances exactly Griewank's minimum t(l, s), which is also checked against
// a brute-force dynamic program over all split points.
#include <gtest/gtest.h>

#include <pthread.h>

#include <map>
#include <vector>

#include "costate/ode/checkpointing.hpp"

namespace {

using namespace costate::ode;

/// States are represented by their step index: a restore that hands back the
/// wrong state is caught by the reverse-order check.
struct IndexOps {
  std::int64_t current = 0;
  std::map<std::size_t, std::int64_t> slots;
  std::vector<std::int64_t> reversed;
  std::int64_t held_max = 0;
  void advance() { ++current; }
  void save(std::size_t slot) {
    slots[slot] = current;
    held_max = std::max<std::int64_t>(held_max, static_cast<std::int64_t>(slots.size()));
  }
  void restore(std::size_t slot) { current = slots.at(slot); }
  void reverse_step() { reversed.push_back(current); }
  std::int64_t index() const { return current; }
};

void expect_reversed_in_order(const IndexOps& ops, std::int64_t steps, const std::string& what) {
  ASSERT_EQ(static_cast<std::int64_t>(ops.reversed.size()), steps) << what;
  for (std::int64_t k = 0; k < steps; ++k)
    ASSERT_EQ(ops.reversed[k], steps - 1 - k) << what << ": reverse step " << k;
}

/// Minimal advances by brute force: T(1, s) = 0; T(l, 1) = l(l−1)/2;
/// T(l, s) = min_m m + T(l − m, s − 1) + T(m, s).
std::int64_t optimum(std::int64_t l, std::int64_t s, std::map<std::pair<int, int>, std::int64_t>& memo) {
  if (l <= 1) return 0;
  if (s == 1) return l * (l - 1) / 2;
  auto key = std::make_pair(static_cast<int>(l), static_cast<int>(s));
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  std::int64_t best = INT64_MAX;
  for (std::int64_t m = 1; m < l; ++m)
    best = std::min(best, m + optimum(l - m, s - 1, memo) + optimum(m, s, memo));
  memo[key] = best;
  return best;
}

TEST(Checkpointing, BinomialFormulaIsTheOptimum) {
  std::map<std::pair<int, int>, std::int64_t> memo;
  for (std::int64_t s = 1; s <= 6; ++s)
    for (std::int64_t l = 1; l <= 60; ++l)
      ASSERT_EQ(binomial_forward_steps(l, s), optimum(l, s, memo)) << "l = " << l << ", s = " << s;
}

TEST(Checkpointing, BinomialReachesTheOptimumAndStaysInBudget) {
  for (std::int64_t s = 1; s <= 8; ++s) {
    for (std::int64_t l = 1; l <= 80; ++l) {
      IndexOps ops;
      const auto st = reverse_sweep(Binomial{.snapshots = s}, ops, l);
      const std::string what = "l = " + std::to_string(l) + ", s = " + std::to_string(s);
      expect_reversed_in_order(ops, l, what);
      EXPECT_EQ(st.forward_steps, binomial_forward_steps(l, s)) << what;
      EXPECT_EQ(st.recomputed_steps, st.forward_steps - (l - 1)) << what;
      EXPECT_LE(st.peak_snapshots, s) << what;
    }
  }
}

TEST(Checkpointing, PublishedCases) {
  IndexOps a;
  const auto s15 = reverse_sweep(Binomial{.snapshots = 5}, a, 15);
  EXPECT_EQ(s15.forward_steps, 23);
  EXPECT_EQ(s15.recomputed_steps, 9);
  IndexOps b;
  const auto s1000 = reverse_sweep(Binomial{.snapshots = 10}, b, 1000);
  EXPECT_EQ(s1000.forward_steps, 3636);
  EXPECT_EQ(s1000.recomputed_steps, 2637);
  EXPECT_EQ(s1000.peak_snapshots, 10);
  expect_reversed_in_order(b, 1000, "l = 1000");
}

TEST(Checkpointing, StoreAllRecomputesNothing) {
  IndexOps ops;
  const auto st = reverse_sweep(StoreAll{}, ops, 37);
  expect_reversed_in_order(ops, 37, "store all");
  EXPECT_EQ(st.forward_steps, 36);
  EXPECT_EQ(st.recomputed_steps, 0);
  EXPECT_EQ(st.peak_snapshots, 37);
}

TEST(Checkpointing, UniformSegments) {
  for (std::int64_t k : {1, 3, 10, 50}) {
    for (std::int64_t l : {1, 9, 10, 11, 100}) {
      IndexOps ops;
      const auto st = reverse_sweep(Uniform{.every = k}, ops, l);
      const std::string what = "every " + std::to_string(k) + ", l = " + std::to_string(l);
      expect_reversed_in_order(ops, l, what);
      // Each segment but the first is advanced twice.
      EXPECT_LE(st.forward_steps, 2 * l) << what;
      EXPECT_LE(st.peak_snapshots, (l + k - 1) / k + k) << what;
    }
  }
}

TEST(Checkpointing, OnlineWorksWithoutKnowingTheCount) {
  for (std::int64_t s : {2, 3, 5, 10}) {
    for (std::int64_t l : {1, 2, 7, 64, 100, 1000}) {
      IndexOps ops;
      const auto st = reverse_sweep(Online{.snapshots = s}, ops, l);
      const std::string what = "s = " + std::to_string(s) + ", l = " + std::to_string(l);
      expect_reversed_in_order(ops, l, what);
      EXPECT_LE(st.peak_snapshots, s) << what;
      EXPECT_GE(st.forward_steps, binomial_forward_steps(l, s)) << what;
    }
  }
}

TEST(Checkpointing, MultilevelUsesRamPlusDiskSlots) {
  IndexOps ops;
  const auto st = reverse_sweep(Multilevel{.ram = 3, .disk = 2, .path = "x.h5"}, ops, 200);
  expect_reversed_in_order(ops, 200, "multilevel");
  EXPECT_EQ(st.forward_steps, binomial_forward_steps(200, 5));
  EXPECT_LE(st.peak_snapshots, 5);
}

TEST(Checkpointing, InvalidSettings) {
  IndexOps ops;
  EXPECT_THROW(reverse_sweep(Binomial{.snapshots = 0}, ops, 10), costate::Error);
  EXPECT_THROW(reverse_sweep(Uniform{.every = 0}, ops, 10), costate::Error);
  EXPECT_THROW(reverse_sweep(Online{.snapshots = 1}, ops, 10), costate::Error);
  EXPECT_THROW(validate(Multilevel{.ram = 0, .disk = 1, .path = "a"}), costate::Error);
  EXPECT_EQ(to_string(Binomial{.snapshots = 4}), "binomial(snapshots=4)");
}

TEST(Checkpointing, BinomialCoefficients) {
  EXPECT_EQ(binomial_coefficient(7, 5), 21);
  EXPECT_EQ(binomial_coefficient(20, 10), 184756);
  EXPECT_EQ(binomial_coefficient(5, 7), 0);
  EXPECT_EQ(binomial_repetitions(15, 5), 2);
  EXPECT_EQ(binomial_coefficient(200, 100), INT64_MAX);  // saturates
}

/// Every call a schedule makes, in order: what a replay depends on.
struct LoggingOps {
  std::int64_t current = 0;
  std::map<std::size_t, std::int64_t> slots;
  std::vector<std::int64_t> log;  // kind * 2^40 + argument
  static constexpr std::int64_t kShift = std::int64_t{1} << 40;
  void advance() { log.push_back(0 * kShift + ++current); }
  void save(std::size_t slot) {
    slots[slot] = current;
    log.push_back(1 * kShift + static_cast<std::int64_t>(slot));
  }
  void restore(std::size_t slot) {
    current = slots.at(slot);
    log.push_back(2 * kShift + static_cast<std::int64_t>(slot));
  }
  void reverse_step() { log.push_back(3 * kShift + current); }
  std::int64_t index() const { return current; }
};

/// The recursive formulation the schedule had before it became a loop: the
/// reference its decisions are compared against.
struct RecursiveBinomial {
  LoggingOps& ops;
  costate::ode::detail::SlotPool pool;
  void advance_to(std::int64_t target) {
    while (ops.index() < target) ops.advance();
  }
  void run(std::int64_t a, std::int64_t l, std::int64_t s, std::int64_t slot) {
    while (l > 0) {
      if (l == 1) {
        if (ops.index() != a) ops.restore(static_cast<std::size_t>(slot));
        ops.reverse_step();
        return;
      }
      if (s <= 1) {
        for (std::int64_t i = a + l - 1; i >= a; --i) {
          if (ops.index() != a) ops.restore(static_cast<std::size_t>(slot));
          advance_to(i);
          ops.reverse_step();
        }
        return;
      }
      const std::int64_t r = binomial_repetitions(l, s);
      std::int64_t m = std::min(binomial_coefficient(s + r - 1, s),
                                l - binomial_coefficient(s + r - 2, s - 1));
      if (m >= l) m = l - 1;
      if (m < 1) m = 1;
      if (ops.index() != a) ops.restore(static_cast<std::size_t>(slot));
      advance_to(a + m);
      const std::int64_t right = pool.acquire();
      ops.save(static_cast<std::size_t>(right));
      run(a + m, l - m, s - 1, right);
      pool.release(right);
      l = m;
    }
  }
};

TEST(Checkpointing, BinomialMakesTheRecursiveFormulationsDecisions) {
  for (std::int64_t s = 1; s <= 12; ++s) {
    for (std::int64_t l = 1; l <= 300; l += (l < 60 ? 1 : 7)) {
      LoggingOps ref_ops;
      RecursiveBinomial ref{ref_ops, {}};
      const std::int64_t first = ref.pool.acquire();
      ref_ops.save(static_cast<std::size_t>(first));
      ref.run(0, l, s, first);
      LoggingOps ops;
      reverse_sweep(Binomial{.snapshots = s}, ops, l);
      ASSERT_EQ(ops.log, ref_ops.log) << "l = " << l << ", s = " << s;
    }
  }
}

/// 50 000 snapshots over 200 000 steps nest the split 50 000 deep; on a
/// 256 KiB stack (a recursion of that depth needs megabytes) the sweep must
/// still reverse every step in order, at the optimal cost.
TEST(Checkpointing, BinomialWithFiftyThousandSnapshotsRunsOnASmallStack) {
  struct Job {
    IndexOps ops;
    CheckpointStats stats;
  } job;
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    j->stats = reverse_sweep(Binomial{.snapshots = 50000}, j->ops, 200000);
    return nullptr;
  };
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, body, &job), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
  expect_reversed_in_order(job.ops, 200000, "l = 200000, s = 50000");
  EXPECT_EQ(job.stats.forward_steps, binomial_forward_steps(200000, 50000));
  EXPECT_LE(job.stats.peak_snapshots, 50000);
}

}  // namespace
