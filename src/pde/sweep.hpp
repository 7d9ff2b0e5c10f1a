#pragma once
// What the compiled PDE integrators share (src/pde/theta.cpp,
// src/pde/explicit_rk.cpp; private to the library): the snapshot adapter of
// their reverse sweeps, the direction check, and the sums a sweep carries
// back with the packing of its results — one piece for the θ method and the
// explicit Runge–Kutta methods, first and second order.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "costate/pde/integrator.hpp"
#include "costate/pde/objective.hpp"
#include "costate/pde/operator_view.hpp"
#include "costate/pde/shared_snapshots.hpp"

namespace costate::detail {

/// The snapshot levels of a PDE reverse sweep (the θ and explicit RK
/// integrators): RAM slots and Multilevel's disk slots (one file per rank,
/// or one shared parallel HDF5 file), with the step index of each slot. A
/// disk failure on one rank throws on every rank (one MPI_Allreduce per
/// disk access; RAM slots: none). `who` prefixes its error messages.
class SweepSnapshots {
 public:
  SweepSnapshots(MPI_Comm comm, int rank, std::size_t size, const ode::Checkpointing& c, bool shared_disk,
                 const char* who = "pde::ThetaIntegrator")
      : comm_(comm), who_(who), disk_slots_(disk_slots(c)), store_(size, disk_slots_, disk_path(c, rank)) {
    if (shared_disk && disk_slots_ > 0)
      shared_ = std::make_unique<pde::SharedDiskSnapshots>(comm, size, std::get<ode::Multilevel>(c).path);
  }
  void save(std::size_t slot, std::span<const double> state, std::int64_t index) {
    if (shared_ && slot < disk_slots_)
      shared_->save(slot, state);  // collective; throws on every rank
    else
      collective_disk(slot, "write", [&] { store_.save(slot, state); });
    if (slot_index_.size() <= slot) slot_index_.resize(slot + 1);
    slot_index_[slot] = index;
  }
  /// Loads `slot` into `state`; returns its step index.
  std::int64_t restore(std::size_t slot, std::span<double> state) {
    if (shared_ && slot < disk_slots_)
      shared_->load(slot, state);
    else
      collective_disk(slot, "read", [&] { store_.load(slot, state); });
    return slot_index_[slot];
  }
  std::int64_t disk_writes() const { return store_.disk_writes() + (shared_ ? shared_->writes() : 0); }

 private:
  static std::size_t disk_slots(const ode::Checkpointing& c) {
    if (const auto* m = std::get_if<ode::Multilevel>(&c)) return static_cast<std::size_t>(m->disk);
    return 0;
  }
  static std::string disk_path(const ode::Checkpointing& c, int rank) {
    if (const auto* m = std::get_if<ode::Multilevel>(&c)) return m->path + ".rank" + std::to_string(rank);
    return {};
  }
  /// The schedule is the same on every rank, so all ranks reach each disk
  /// save/load together and agree on the outcome.
  template <class F>
  void collective_disk(std::size_t slot, const char* what, F&& f) {
    if (slot >= disk_slots_) {
      f();
      return;
    }
    std::string message;
    try {
      f();
    } catch (const Error& e) {
      message = e.what();
    }
    int bad = message.empty() ? 0 : 1, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, comm_);
    if (bad) throw Error(std::string(who_) + ": " + message);
    COSTATE_CHECK(!any, who_ << ": another rank could not " << what << " its disk checkpoint "
                                                                         "(see its error); this rank's "
                                                                         "file is fine");
  }
  MPI_Comm comm_;
  const char* who_;
  std::size_t disk_slots_ = 0;
  ode::SnapshotStore store_;
  std::unique_ptr<pde::SharedDiskSnapshots> shared_;
  std::vector<std::int64_t> slot_index_;
};

/// ode::reverse_sweep over `ops` with the progress line (core/progress.hpp),
/// as the ODE sweeps show theirs: "WHAT: step i/l" through the first
/// forward pass, then "WHAT, reverse: step k/l (N steps recomputed)", the
/// forward steps taken again from checkpoints in the note. Only the line is
/// added; the sweep and its results are the plain one's. Never collective.
template <class Ops>
class ShownSweep {
 public:
  ShownSweep(Ops& ops, std::int64_t steps, const std::string& what)
      : ops_(ops), what_(what), steps_(static_cast<double>(steps)), line_(std::in_place, what + ": step", steps_) {}
  std::int64_t index() const { return ops_.index(); }
  void advance() {
    ops_.advance();
    ++forward_;
    if (!line_->active()) return;
    if (reverse_ == 0)
      line_->update(static_cast<double>(ops_.index()));
    else
      line_->update(static_cast<double>(reverse_), note());
  }
  void save(std::size_t slot) { ops_.save(slot); }
  void restore(std::size_t slot) { ops_.restore(slot); }
  void reverse_step() {
    if (reverse_ == 0) {  // the reverse phase: a scope of its own
      first_pass_ = forward_;
      line_.reset();
      line_.emplace(what_ + ", reverse: step", steps_);
    }
    ops_.reverse_step();
    ++reverse_;
    if (line_->active()) line_->update(static_cast<double>(reverse_), note());
  }

 private:
  std::string note() const { return std::to_string(forward_ - first_pass_) + " steps recomputed"; }
  Ops& ops_;
  std::string what_;
  double steps_;
  std::int64_t forward_ = 0, reverse_ = 0, first_pass_ = 0;
  std::optional<Progress> line_;
};

/// ode::reverse_sweep(c, ops, steps) drawing ShownSweep's progress line.
template <class Ops>
ode::CheckpointStats shown_reverse_sweep(const ode::Checkpointing& c, Ops& ops, std::int64_t steps,
                                         const std::string& what) {
  ShownSweep<Ops> shown(ops, steps, what);
  return ode::reverse_sweep(c, shown, steps);
}

/// Throws costate::Error on every rank when `direction` has a part of the
/// wrong size on any rank (`where`: the member, e.g.
/// "pde::ThetaIntegrator::tangent"). Collective.
void check_direction(const pde::OperatorView& op, const pde::ThetaDirection& direction, const std::string& where);

/// The adjoint a first-order reverse sweep carries back: λ (state grid), ā
/// (field grid; empty without fields), q̄, the objective J(y_l) from the
/// seed, and the sweep's forward step count.
struct AdjointSums {
  pde::GlobalVector lambda, a_bar;
  std::vector<double> q_bar;
  double objective_value = 0.0;
  bool seeded = false;
  std::int64_t advances = 0;
  explicit AdjointSums(const pde::OperatorView& op);
  /// `out`'s objective and gradient (J at y0 for a sweep of no steps: the
  /// seed then is ∇J(y_0)), and its forward steps.
  void into(pde::ThetaGradient& out, const pde::Objective& objective, const pde::Grid& g,
            const pde::GlobalVector& y0, std::int64_t steps);
};

/// The second-order sweep's sums: AdjointSums and their tangents δλ, δā, δq̄.
struct SecondOrderSums : AdjointSums {
  pde::GlobalVector dlambda, da_bar;
  std::vector<double> dq_bar;
  explicit SecondOrderSums(const pde::OperatorView& op);
  /// `out`'s objective, H v (δλ, δā, δq̄) and, for Exact, the gradient (λ,
  /// ā, q̄; or `gradient` when given: a linearized point's); a sweep of no
  /// steps seeds at (y0, dy0). Its forward steps.
  void into(pde::ThetaHessianVector& out, const pde::Objective& objective, const pde::Grid& g,
            const pde::GlobalVector& y0, const pde::GlobalVector& dy0, std::int64_t steps,
            pde::HessianProduct product, const pde::ThetaGradient* gradient = nullptr);
};

/// The pair (y, δy) of a second-order sweep as one snapshot: `pack` ← (y, δy)
/// and back.
void pack_pair(const pde::GlobalVector& y, const pde::GlobalVector& dy, std::vector<double>& pack);
void unpack_pair(const std::vector<double>& pack, const pde::GlobalVector& y, const pde::GlobalVector& dy);

/// A second-order reverse sweep (the θ and explicit RK integrators'
/// HessianSweep): the pair (y_i, δy_i) = (current, dcurrent) at step i, its
/// snapshots, and the steps ode::reverse_sweep drives — advance and
/// reverse_step by the integrator (virtual: the sweep loop is compiled once,
/// in run_second_order_sweep).
struct SecondOrderSweep : SecondOrderSums {
  pde::GlobalVector current, dcurrent;
  std::vector<double> pack;
  SweepSnapshots snapshots;
  std::int64_t i = 0;
  /// Snapshots of (y, δy) with schedule `c` (`who` prefixes their errors).
  SecondOrderSweep(const pde::OperatorView& op, const ode::Checkpointing& c, bool shared_disk, const char* who);
  virtual ~SecondOrderSweep() = default;
  SecondOrderSweep(const SecondOrderSweep&) = delete;
  SecondOrderSweep& operator=(const SecondOrderSweep&) = delete;
  std::int64_t index() const { return i; }
  /// (current, dcurrent) ← one step from i; ++i.
  virtual void advance() = 0;
  /// The reverse step i → i − 1 of the sums, from (current, dcurrent) = (y_i, δy_i).
  virtual void reverse_step() = 0;
  void save(std::size_t slot);
  void restore(std::size_t slot);
};

/// H v (or Gauss–Newton) by the whole second-order sweep `sw` over `steps`
/// steps with schedule `c` from (y0, direction.initial_state): the
/// hessian_vector of both integrators after their checks. Fills the
/// product, the checkpoint counts and the forward steps of the result.
pde::ThetaHessianVector run_second_order_sweep(SecondOrderSweep& sw, const pde::Grid& g, const pde::GlobalVector& y0,
                                               const pde::Objective& objective,
                                               const pde::ThetaDirection& direction, const ode::Checkpointing& c,
                                               std::int64_t steps, pde::HessianProduct product);

}  // namespace costate::detail
