#pragma once
/// \file
/// Checkpoint schedules for reverse sweeps over time steps — each its own
/// small, swappable type (StoreAll, Uniform, Binomial, Online, Multilevel),
/// passed by value as ode::Checkpointing.
///
/// A reverse sweep over l steps x_{i+1} = Φ_i(x_i) needs, in the order
/// i = l−1, …, 0, the state x_i at which to evaluate the step's
/// vector–Jacobian product. A schedule decides which states to keep
/// (snapshots) and which to recompute from the nearest snapshot. Counting
/// convention (Griewank & Walther): forward step evaluations are the steps
/// advanced by the sweep, starting from x_0 — the first sweep advances l − 1
/// steps — but not the evaluation each reverse step makes of its own step.
///
/// Binomial (Revolve) is optimal when l is known: with s snapshots, the
/// initial state x_0 being one of them, it advances exactly
///     t(l, s) = r·l − C(s + r, s + 1),   r the least integer with C(s + r, s) ≥ l,
/// e.g. l = 15, s = 5: t = 23 (9 recomputed); l = 1000, s = 10: t = 3636.
/// It splits recursively: from a snapshot of x_a with s slots and l steps to
/// reverse, advance m steps, keep x_{a+m}, reverse the right part with s − 1
/// slots, free the slot, reverse the left part with s slots (with s = 1:
/// recompute every step from x_a). A split is optimal when the left part
/// needs exactly r − 1 repetitions and the right part r, i.e.
///   C(s+r−2, s) ≤ m ≤ C(s+r−1, s)  and  C(s+r−2, s−1) ≤ l − m ≤ C(s+r−1, s−1),
/// for then the cost m + t(l−m, s−1) + t(m, s) telescopes to t(l, s) through
/// C(s+r−1, s) + C(s+r−1, s+1) = C(s+r, s+1); the largest such m is used.
///
/// The schedules drive an `Ops` object that owns the states:
///   ops.advance()        current state x_i → x_{i+1} (one forward step)
///   ops.save(slot)       copy the current state into snapshot `slot`
///   ops.restore(slot)    make the snapshot in `slot` the current state
///   ops.reverse_step()   with the current state x_i, reverse step i
///                        (the adjoint moves from λ_{i+1} to λ_i)
///   ops.index()          i of the current state
/// Slot numbers are dense from 0; slot 0 holds x_0. Multilevel keeps the
/// lowest-numbered slots (the longest-lived ones) on disk.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <variant>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::ode {

/// Keep every state: no recomputation, l snapshots.
struct StoreAll {};
/// Keep every `every`-th state; reverse each segment from its snapshot,
/// keeping the segment's states (peak ≈ l/every + every snapshots).
struct Uniform {
  std::int64_t every = 10;
};
/// Optimal binomial checkpointing (Revolve) with `snapshots` slots, x_0
/// included. Needs the step count in advance.
struct Binomial {
  std::int64_t snapshots = 10;
};
/// Step count unknown while stepping (adaptive steps): keep at most
/// `snapshots` states, thinning them to every 2nd, 4th, … as the run grows;
/// then reverse each interval between kept states binomially.
struct Online {
  std::int64_t snapshots = 10;
};
/// Binomial with `ram` snapshots in memory plus `disk` snapshots in an HDF5
/// file at `path` (the rarely used, long-lived ones go to disk).
struct Multilevel {
  std::int64_t ram = 10;
  std::int64_t disk = 10;
  std::string path = "costate_checkpoints.h5";
};

using Checkpointing = std::variant<StoreAll, Uniform, Binomial, Online, Multilevel>;

std::string to_string(const Checkpointing& c);
/// Throws costate::Error naming the field and the rule broken.
void validate(const Checkpointing& c);

/// What a sweep did.
struct CheckpointStats {
  std::int64_t steps = 0;             ///< l
  std::int64_t forward_steps = 0;     ///< advances (the counting convention above)
  std::int64_t recomputed_steps = 0;  ///< forward_steps − (l − 1)
  std::int64_t peak_snapshots = 0;    ///< most snapshots held at once (x_0 included)
  std::int64_t disk_snapshots = 0;    ///< snapshots written to disk (Multilevel)
  std::int64_t restores = 0;
};

/// Griewank's minimum t(l, s) of forward step evaluations (see above).
std::int64_t binomial_forward_steps(std::int64_t steps, std::int64_t snapshots);
/// r: the least integer with C(s + r, s) ≥ l.
std::int64_t binomial_repetitions(std::int64_t steps, std::int64_t snapshots);
/// C(n, k) with saturation at INT64_MAX.
std::int64_t binomial_coefficient(std::int64_t n, std::int64_t k);

namespace detail {

/// Hands out the lowest free snapshot slot (O(log n)); tracks the peak in use.
class SlotPool {
 public:
  std::int64_t acquire() {
    std::int64_t slot;
    if (!free_.empty()) {
      slot = free_.top();
      free_.pop();
    } else {
      slot = static_cast<std::int64_t>(used_.size());
      used_.push_back(false);
    }
    used_[static_cast<std::size_t>(slot)] = true;
    ++held_;
    if (held_ > peak_) peak_ = held_;
    return slot;
  }
  void release(std::int64_t slot) {
    COSTATE_CHECK(slot >= 0 && slot < static_cast<std::int64_t>(used_.size()) &&
                      used_[static_cast<std::size_t>(slot)],
                  "checkpointing: releasing a slot that is not held");
    used_[static_cast<std::size_t>(slot)] = false;
    free_.push(slot);
    --held_;
  }
  std::int64_t held() const { return held_; }
  std::int64_t peak() const { return peak_; }

 private:
  std::vector<bool> used_;
  std::priority_queue<std::int64_t, std::vector<std::int64_t>, std::greater<>> free_;
  std::int64_t held_ = 0, peak_ = 0;
};

template <class Ops>
class SweepRunner {
 public:
  SweepRunner(Ops& ops, CheckpointStats& stats) : ops_(ops), stats_(stats) {}

  void advance_to(std::int64_t target) {
    while (ops_.index() < target) {
      ops_.advance();
      ++stats_.forward_steps;
    }
  }
  void restore(std::int64_t slot) {
    ops_.restore(static_cast<std::size_t>(slot));
    ++stats_.restores;
  }
  std::int64_t save() {
    const std::int64_t slot = pool_.acquire();
    ops_.save(static_cast<std::size_t>(slot));
    return slot;
  }
  void release(std::int64_t slot) { pool_.release(slot); }
  const SlotPool& pool() const { return pool_; }

  /// Reverses steps [a, a + l) with x_a in `slot`, using at most s slots
  /// (that one included).
  ///
  /// Written as a loop over an explicit stack, not as recursion: the right
  /// part of a split is reversed first (with s − 1 slots), then its snapshot
  /// is released and the left part continues with s slots. Nesting is up to
  /// s deep (50 000 snapshots would be 50 000 stack frames), so the pending
  /// left parts live on the heap; the order of every advance, save, restore,
  /// release and reverse step is that of the recursive formulation.
  void binomial(std::int64_t a, std::int64_t l, std::int64_t s, std::int64_t slot) {
    struct Part {
      std::int64_t a, l, s, slot;
      std::int64_t release_first;  // the right part's snapshot, or −1
    };
    std::vector<Part> pending;
    Part cur{a, l, s, slot, -1};
    for (;;) {
      if (cur.release_first >= 0) release(cur.release_first);
      while (cur.l > 0) {
        if (cur.l == 1) {
          if (ops_.index() != cur.a) restore(cur.slot);
          ops_.reverse_step();
          break;
        }
        if (cur.s <= 1) {
          for (std::int64_t i = cur.a + cur.l - 1; i >= cur.a; --i) {
            if (ops_.index() != cur.a) restore(cur.slot);
            advance_to(i);
            ops_.reverse_step();
          }
          break;
        }
        // Optimal split: the left part [a, a+m) must need exactly r − 1
        // repetitions with s slots and the right part exactly r with s − 1:
        //   C(s+r−2, s) ≤ m ≤ C(s+r−1, s),  C(s+r−2, s−1) ≤ l − m ≤ C(s+r−1, s−1).
        // Take the largest such m.
        const std::int64_t r = binomial_repetitions(cur.l, cur.s);
        std::int64_t m = std::min(binomial_coefficient(cur.s + r - 1, cur.s),
                                  cur.l - binomial_coefficient(cur.s + r - 2, cur.s - 1));
        if (m >= cur.l) m = cur.l - 1;
        if (m < 1) m = 1;
        if (ops_.index() != cur.a) restore(cur.slot);
        advance_to(cur.a + m);
        const std::int64_t right = save();
        // The left part [a, a + m) with the same s slots, after the right one.
        pending.push_back({cur.a, m, cur.s, cur.slot, right});
        cur = {cur.a + m, cur.l - m, cur.s - 1, right, -1};
      }
      if (pending.empty()) return;
      cur = pending.back();
      pending.pop_back();
    }
  }

 private:
  Ops& ops_;
  CheckpointStats& stats_;
  SlotPool pool_;
};

}  // namespace detail

/// Runs the whole reverse sweep over `steps` steps with schedule `c`,
/// starting from the current state x_0 of `ops` (index 0); returns what it
/// did. The step count is known here; Online still decides its snapshots
/// during the first sweep as if it were not (thinning), which is what an
/// adaptive run does. Validates `c` (validate) first; reverse_sweep_valid
/// is the same sweep for a schedule its caller has validated.
template <class Ops>
CheckpointStats reverse_sweep_valid(const Checkpointing& c, Ops& ops, std::int64_t steps);
template <class Ops>
CheckpointStats reverse_sweep(const Checkpointing& c, Ops& ops, std::int64_t steps) {
  validate(c);
  return reverse_sweep_valid(c, ops, steps);
}

template <class Ops>
CheckpointStats reverse_sweep_valid(const Checkpointing& c, Ops& ops, std::int64_t steps) {
  COSTATE_CHECK_GE(steps, 0, "reverse_sweep: negative step count");
  COSTATE_CHECK_EQ(ops.index(), 0, "reverse_sweep: the current state must be x_0");
  CheckpointStats stats;
  stats.steps = steps;
  if (steps == 0) return stats;
  detail::SweepRunner<Ops> run(ops, stats);
  const std::int64_t first = run.save();  // x_0 (slot 0)
  if (std::holds_alternative<StoreAll>(c)) {
    std::vector<std::int64_t> slot(static_cast<std::size_t>(steps));
    slot[0] = first;
    for (std::int64_t i = 1; i < steps; ++i) {
      run.advance_to(i);
      slot[i] = run.save();
    }
    for (std::int64_t i = steps - 1; i >= 0; --i) {
      if (ops.index() != i) run.restore(slot[i]);
      ops.reverse_step();
      run.release(slot[i]);
    }
  } else if (const auto* u = std::get_if<Uniform>(&c)) {
    const std::int64_t k = u->every;
    const std::int64_t segments = (steps + k - 1) / k;
    std::vector<std::int64_t> seg(static_cast<std::size_t>(segments));
    seg[0] = first;
    for (std::int64_t j = 1; j < segments; ++j) {
      run.advance_to(j * k);
      seg[j] = run.save();
    }
    std::vector<std::int64_t> inner(static_cast<std::size_t>(k));
    for (std::int64_t j = segments - 1; j >= 0; --j) {
      const std::int64_t a = j * k, b = std::min(steps, a + k);
      if (ops.index() != a) run.restore(seg[j]);
      inner[0] = seg[j];
      for (std::int64_t i = a + 1; i < b; ++i) {
        run.advance_to(i);
        inner[i - a] = run.save();
      }
      for (std::int64_t i = b - 1; i >= a; --i) {
        if (ops.index() != i) run.restore(inner[i - a]);
        ops.reverse_step();
        run.release(inner[i - a]);
      }
    }
  } else if (const auto* bi = std::get_if<Binomial>(&c)) {
    run.binomial(0, steps, bi->snapshots, first);
    run.release(first);
  } else if (const auto* ml = std::get_if<Multilevel>(&c)) {
    run.binomial(0, steps, ml->ram + ml->disk, first);
    run.release(first);
  } else if (const auto* on = std::get_if<Online>(&c)) {
    // First sweep without knowing l: keep states at multiples of a stride
    // that doubles (dropping every other kept state) when the slots run out.
    const std::int64_t s = on->snapshots;
    struct Kept {
      std::int64_t step, slot;
    };
    std::vector<Kept> kept{{0, first}};
    std::int64_t stride = 1;
    for (std::int64_t i = 1; i < steps; ++i) {
      run.advance_to(i);
      if (i % stride != 0) continue;
      if (static_cast<std::int64_t>(kept.size()) == s) {
        std::vector<Kept> thin;
        for (std::size_t j = 0; j < kept.size(); ++j) {
          if (kept[j].step % (2 * stride) == 0)
            thin.push_back(kept[j]);
          else
            run.release(kept[j].slot);
        }
        kept.swap(thin);
        stride *= 2;
        if (i % stride != 0) continue;
      }
      kept.push_back({i, run.save()});
    }
    // Reverse the intervals between kept states, last first; interval j
    // may use the slots not held by kept states 0..j−1.
    for (std::int64_t j = static_cast<std::int64_t>(kept.size()) - 1; j >= 0; --j) {
      const std::int64_t a = kept[j].step;
      const std::int64_t b = j + 1 < static_cast<std::int64_t>(kept.size()) ? kept[j + 1].step : steps;
      run.binomial(a, b - a, s - j, kept[j].slot);
      run.release(kept[j].slot);
    }
  }
  stats.peak_snapshots = run.pool().peak();
  stats.recomputed_steps = stats.forward_steps - (steps - 1);
  return stats;
}

}  // namespace costate::ode
