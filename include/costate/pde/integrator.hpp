#pragma once
/// \file
/// What the PDE time integrators share (pde::ThetaIntegrator, theta.hpp;
/// pde::ExplicitRkIntegrator, explicit_rk.hpp): their results (gradient,
/// tangent, Hessian–vector product; the θ names are the first ones), the
/// snapshot adapter of their reverse sweeps (detail::SweepSnapshots: RAM
/// and Multilevel disk slots under MPI, for ode::reverse_sweep), and
/// pde::TimeIntegrator, the small interface io::pde_run holds so
/// that one driver runs either integrator.
///
/// Every member of TimeIntegrator is collective over the operator's grid.

#include <cstdint>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "costate/pde/objective.hpp"
#include "costate/pde/operator.hpp"
#include "costate/pde/shared_snapshots.hpp"

namespace costate::pde {

/// What a gradient computation produced.
struct ThetaGradient {
  double objective = 0.0;
  GlobalVector wrt_fields;                ///< dJ/da, a field (field grid)
  std::vector<double> wrt_parameters;     ///< dJ/dq
  GlobalVector wrt_initial_state;         ///< dJ/dy_0 (state grid)
  ode::CheckpointStats checkpoints;
  std::int64_t forward_steps = 0;         ///< steps taken, recomputations included
  std::int64_t krylov_iterations = 0;     ///< forward solves
  std::int64_t adjoint_krylov_iterations = 0;
  double seconds = 0.0;
};

/// A direction of forward sensitivities. An empty vector is a zero
/// direction (GlobalVector() has size 0): e.g. only `parameters` set
/// differentiates with respect to the scalars.
struct ThetaDirection {
  GlobalVector fields;             ///< δa: a vector of the operator's field grid (or empty)
  std::vector<double> parameters;  ///< δq: one entry per scalar parameter (or empty)
  GlobalVector initial_state;      ///< δy_0: a vector of the state grid (or empty)
};

/// What a forward-sensitivity run produced.
struct ThetaTangent {
  double objective = 0.0;               ///< J(y_l), bitwise the value of integrate()
  double directional_derivative = 0.0;  ///< dJ·δ
  GlobalVector final_state;             ///< y_l
  GlobalVector final_tangent;           ///< δy_l
  std::int64_t krylov_iterations = 0;   ///< forward solves
  std::int64_t tangent_krylov_iterations = 0;
  double seconds = 0.0;
};

/// Which Hessian product ThetaIntegrator::hessian_vector computes.
enum class HessianProduct {
  Exact,        ///< the second-order adjoint: H v
  GaussNewton,  ///< Sᵀ ∇²J S v: the residual's second derivatives dropped
};

inline std::string to_string(HessianProduct p) {
  return p == HessianProduct::Exact ? "exact" : "gauss_newton";
}

/// "exact" or "gauss_newton"; anything else throws costate::Error listing both.
inline HessianProduct hessian_product_from_string(const std::string& s) {
  if (s == "exact") return HessianProduct::Exact;
  if (s == "gauss_newton") return HessianProduct::GaussNewton;
  throw Error("pde::HessianProduct: unknown product \"" + s + "\"; expected exact or gauss_newton");
}

/// What a Hessian–vector product produced: H v in the layout of a
/// gradient, and (Exact only) the gradient itself, a by-product of the
/// same sweep.
struct ThetaHessianVector {
  HessianProduct product = HessianProduct::Exact;
  double objective = 0.0;
  GlobalVector wrt_fields;             ///< (H v)_a, a field (field grid)
  std::vector<double> wrt_parameters;  ///< (H v)_q
  GlobalVector wrt_initial_state;      ///< (H v)_{y_0} (state grid)
  /// dJ/d(a, q, y_0) from the same sweep (Exact; empty for GaussNewton).
  GlobalVector gradient_fields;
  std::vector<double> gradient_parameters;
  GlobalVector gradient_initial_state;
  ode::CheckpointStats checkpoints;
  std::int64_t forward_steps = 0;            ///< (state, tangent) steps, recomputations included
  std::int64_t krylov_iterations = 0;        ///< forward solves
  std::int64_t tangent_krylov_iterations = 0;
  std::int64_t adjoint_krylov_iterations = 0;  ///< both transposed solves
  double seconds = 0.0;
};


/// A time integrator of a PDE operator with fixed steps t_n = t0 + n h, n =
/// 0 … steps: the interface io::pde_run holds (src/io/pde_run_model.hpp), so
/// that one driver runs the θ-method or an explicit Runge–Kutta method.
/// The members are those of ThetaIntegrator (theta.hpp), which documents
/// them; every one is collective.
template <class Model, int Batch = default_batch<Model>()>
class TimeIntegrator {
 public:
  virtual ~TimeIntegrator() = default;
  /// u ← one step from t_n, in place.
  virtual void step(const GlobalVector& u, std::int64_t n) = 0;
  /// u ← all steps from t0, in place.
  virtual void integrate(const GlobalVector& u) = 0;
  /// J(y_l) and its gradient (fields, scalars, initial state), discrete adjoint.
  virtual ThetaGradient gradient(const GlobalVector& y0, const Objective& objective,
                                 const ode::Checkpointing& checkpointing) = 0;
  /// J(y_l) and dJ·δ by forward sensitivities.
  virtual ThetaTangent tangent(const GlobalVector& y0, const Objective& objective,
                               const ThetaDirection& direction) = 0;
  /// H v (or the Gauss–Newton product) by the second-order adjoint.
  virtual ThetaHessianVector hessian_vector(const GlobalVector& y0, const Objective& objective,
                                            const ThetaDirection& direction,
                                            const ode::Checkpointing& checkpointing,
                                            HessianProduct product = HessianProduct::Exact) = 0;
  /// Krylov iterations of the forward solves so far (0 for explicit methods).
  virtual std::int64_t krylov_iterations() const = 0;
};

}  // namespace costate::pde

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

/// Throws costate::Error on every rank when `direction` has a part of the
/// wrong size on any rank (`who`: the member, e.g.
/// "pde::ThetaIntegrator::tangent"). Collective.
template <class Op>
void check_direction(const Op& op, const pde::ThetaDirection& direction, const std::string& where) {
  const pde::Grid& g = op.grid();
  std::ostringstream why;
  bool ok = true;
  const std::string who = where + ": ";
  if (direction.initial_state.size() != 0 && direction.initial_state.size() != g.owned_size()) {
    ok = false;
    why << who << "ThetaDirection::initial_state has " << direction.initial_state.size() << " entries on rank "
        << g.rank() << ", the state grid owns " << g.owned_size() << " (or leave it empty)";
  } else if (!direction.parameters.empty() && direction.parameters.size() != static_cast<std::size_t>(Op::kScalars)) {
    ok = false;
    why << who << "ThetaDirection::parameters has " << direction.parameters.size() << " entries; the model has "
        << Op::kScalars << " scalar parameters (or leave it empty)";
  } else if (direction.fields.size() != 0 &&
             (Op::kFields == 0 || direction.fields.size() != op.field_grid()->owned_size())) {
    ok = false;
    why << who << "ThetaDirection::fields has " << direction.fields.size() << " entries on rank " << g.rank() << "; "
        << (Op::kFields == 0 ? std::string("the model has no parameter fields")
                             : "the field grid owns " + std::to_string(op.field_grid()->owned_size()))
        << " (or leave it empty)";
  }
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, g.comm());
  if (!ok) throw Error(why.str());
  COSTATE_CHECK(!any, who << "another rank passed a direction of the wrong size (see its error)");
}

/// The name the θ integrator used first.
using ThetaSnapshots = SweepSnapshots;

}  // namespace costate::detail
