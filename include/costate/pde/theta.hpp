#pragma once
/// \file
/// pde::ThetaIntegrator — implicit θ-method time stepping of a distributed
/// stencil model (backward Euler θ = 1, Crank–Nicolson θ = ½) with PETSc
/// KSP, and its discrete adjoint under MPI.
///
/// Forward step n → n + 1 (fixed step h):
///     G(z) = z − y_n − h (1 − θ) f(t_n, y_n) − h θ f(t_{n+1}, z) = 0,
/// Newton on G with G'(z) = I − h θ J(z), each linear system by KSP (the
/// preconditioner from KspOptions and the options database). A model with
/// `linear_in_state` (f = J u + b, J independent of t and u) takes exactly
/// one Newton step per time step and assembles I − hθJ once.
///
/// Discrete adjoint of the step (exact for the discrete solution), with
/// λ = ȳ_{n+1}:
///     (I − h θ J_{n+1})ᵀ μ = λ                        (KSPSolveTranspose)
///     λ_n = μ + h (1 − θ) J_nᵀ μ                       (MatMultTranspose)
///     ā  += h θ f_a(n+1)ᵀ μ + h (1 − θ) f_a(n)ᵀ μ     (field vJp + Gᵀ)
///     q̄  += h θ f_q(n+1)ᵀ μ + h (1 − θ) f_q(n)ᵀ μ     (rank-ordered sums)
/// For an autonomous model linear in the state, f_a and f_q are affine in u,
/// so the two vJps are one, at y* = θ y_{n+1} + (1 − θ) y_n, scaled by h.
///
/// The reverse sweep runs through ode::reverse_sweep with any schedule
/// (StoreAll, Binomial, …); snapshots are each rank's owned entries. The
/// forward run that evaluates J is the sweep's own first pass (the state
/// y_l is computed by the last step's reverse step), so StoreAll costs one
/// forward integration plus the adjoint steps. A reverse step reuses
/// y_{n+1} from the previous reverse step (the state it was given).
///
/// Determinism: KSP solves start from zero, reductions are rank-ordered,
/// so a gradient is bitwise the same on every run with the same ranks and
/// for every checkpoint schedule. Across rank counts it agrees to the KSP
/// tolerance (block preconditioners change with the decomposition).
///
/// Forward sensitivities (tangent-linear model, ThetaIntegrator::tangent):
/// a direction δ = (δa field, δq scalars, δy_0) is carried through the
/// same steps, with the same KSP, by differentiating G = 0:
///     (I − h θ J_{n+1}) δy_{n+1} = δy_n + h (1 − θ) ḟ_n + h θ (f_a δa + f_q δq)_{n+1},
///     ḟ_n = J_n δy_n + f_a(n) δa + f_q(n) δq   (one Dual pass, Operator::jvp_total),
/// J_{n+1} assembled at the converged y_{n+1}; then dJ·δ = ⟨∂J/∂y_l, δy_l⟩.
/// It equals ⟨∇J, δ⟩ of the discrete adjoint to the KSP tolerance: one
/// forward-sensitivity run per direction against one adjoint run for all.
///
/// Collective over the grid's communicator. Limitations: fixed steps;
/// terminal objectives (objective.hpp); Multilevel disk snapshots go to one
/// file per rank (path + ".rank<r>"), or with
/// ThetaOptions::shared_disk_checkpoints to one parallel HDF5 file; a disk
/// failure on any rank throws on every rank.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/linear/ksp_options.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "costate/pde/matrix.hpp"
#include "costate/pde/objective.hpp"
#include "costate/pde/operator.hpp"
#include "costate/pde/shared_snapshots.hpp"

namespace costate::pde {

struct ThetaOptions {
  double theta = 0.5;       ///< ½: Crank–Nicolson, 1: backward Euler
  double t0 = 0.0;
  double dt = 1e-3;         ///< fixed step h
  std::int64_t steps = 10;  ///< number of steps
  /// Linear solves (forward, and transposed in the adjoint): default GMRES
  /// with PETSc's default preconditioner; -ksp_type/-pc_type override.
  linear::KspOptions ksp{.rtol = 1e-12, .atol = 1e-50};
  double newton_rtol = 1e-10;  ///< ‖δ‖_∞ ≤ newton_rtol (1 + ‖z‖_∞)
  int newton_max_iterations = 25;
  /// Multilevel's disk level: false — one serial HDF5 file per rank
  /// (path + ".rank<r>"); true — ONE parallel HDF5 file at `path` for all
  /// ranks (pde::SharedDiskSnapshots, collective MPI-IO). Same gradient bits.
  bool shared_disk_checkpoints = false;

  void validate() const {
    COSTATE_CHECK(theta >= 0.5 && theta <= 1.0, "pde::ThetaOptions::theta = "
                                                    << detail::format_value(theta)
                                                    << " is invalid: it must lie in [0.5, 1]");
    COSTATE_CHECK(std::isfinite(dt) && dt > 0.0,
                  "pde::ThetaOptions::dt = " << detail::format_value(dt) << " must be > 0");
    COSTATE_CHECK(steps >= 0, "pde::ThetaOptions::steps = " << steps << " must be >= 0");
    COSTATE_CHECK(newton_rtol > 0.0 && newton_max_iterations > 0,
                  "pde::ThetaOptions: newton_rtol must be > 0 and newton_max_iterations > 0");
    ksp.validate();
  }
};

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

template <class Model, int Batch = default_batch<Model>()>
class ThetaIntegrator {
 public:
  using Op = Operator<Model, Batch>;

  /// `op` must outlive the integrator. Collective.
  ThetaIntegrator(Op& op, const ThetaOptions& options)
      : op_(op), options_(options), J_(op.grid()), A_(op.grid()),
        solver_(op.grid(), options.ksp) {
    options_.validate();
    const Grid& g = op.grid();
    f_ = g.create_global();
    r_ = g.create_global();
    delta_ = g.create_global();
    explicit_part_ = g.create_global();
    y_start_ = g.create_global();
  }

  const ThetaOptions& options() const { return options_; }
  std::int64_t krylov_iterations() const { return krylov_iterations_; }
  const KrylovSolver& solver() const { return solver_; }

  /// Advances u from t_n = t0 + n h to t_{n+1}, in place. Collective.
  /// Throws costate::Error when Newton or a KSP solve fails.
  void step(const GlobalVector& u, std::int64_t n) {
    const double h = options_.dt, th = options_.theta;
    const double tn = options_.t0 + static_cast<double>(n) * h, tn1 = tn + h;
    if constexpr (Model::linear_in_state) {
      ensure_linear_operator();
      // One (exact) Newton step from z = y_n:
      //   δ = A⁻¹ (h(1−θ) f(t_n, y_n) + hθ f(t_{n+1}, y_n)),  A = I − hθJ;
      // for an autonomous model the two evaluations are one: δ = A⁻¹ h f(y_n).
      op_.rhs(tn, u, f_);
      if constexpr (Model::autonomous) {
        scale(r_, h, f_);
      } else {
        scale(r_, h * (1.0 - th), f_);
        op_.rhs(tn1, u, f_);
        axpy(h * th, f_, r_);
      }
      solve(r_, delta_, false);
      axpy(1.0, delta_, u);
    } else {
      op_.rhs(tn, u, f_);
      scale(explicit_part_, h * (1.0 - th), f_);
      deep_copy(y_start_, u);
      for (int it = 0;; ++it) {
        COSTATE_CHECK(it < options_.newton_max_iterations,
                      "pde::ThetaIntegrator: Newton did not converge in "
                          << options_.newton_max_iterations << " iterations at step " << n
                          << " (t = " << detail::format_value(tn1)
                          << "); reduce dt or raise newton_max_iterations");
        // −G(z) = y_n − z + h(1−θ) f_n + hθ f(t_{n+1}, z)
        op_.rhs(tn1, u, f_);
        linear_sum(r_, 1.0, y_start_, -1.0, u);
        axpy(1.0, explicit_part_, r_);
        axpy(h * th, f_, r_);
        op_.jacobian(tn1, u, J_);
        A_.shifted_copy_of(J_, 1.0, -h * th);
        solver_.set_operator(A_);
        solve(r_, delta_, false);
        axpy(1.0, delta_, u);
        const double dn = max_norm(delta_), zn = max_norm(u);
        if (dn <= options_.newton_rtol * (1.0 + zn)) break;
      }
    }
  }

  /// Integrates u from t0 over all steps, in place. Collective.
  void integrate(const GlobalVector& u) {
    for (std::int64_t n = 0; n < options_.steps; ++n) step(u, n);
  }

  /// J(y_l) and its gradient with respect to the parameter fields, the
  /// scalar parameters and the initial state, by the discrete adjoint with
  /// checkpoint schedule `checkpointing`. `y0` is not modified. Collective.
  ThetaGradient gradient(const GlobalVector& y0, const Objective& objective,
                         const ode::Checkpointing& checkpointing) {
    const auto t_start = std::chrono::steady_clock::now();
    ode::validate(checkpointing);
    const Grid& g = op_.grid();
    Sweep sw(*this, objective, checkpointing);
    deep_copy(sw.current, y0);
    const std::int64_t its0 = krylov_iterations_;
    ThetaGradient out;
    out.checkpoints = ode::reverse_sweep(checkpointing, sw, options_.steps);
    out.checkpoints.disk_snapshots = sw.store.disk_writes() + (sw.shared ? sw.shared->writes() : 0);
    if (options_.steps == 0) {
      out.objective = objective.evaluate(g, y0, &sw.lambda);
    } else {
      out.objective = sw.objective_value;
    }
    out.wrt_initial_state = sw.lambda;
    out.wrt_fields = sw.a_bar;
    out.wrt_parameters = sw.q_bar;
    out.forward_steps = sw.advances;
    out.adjoint_krylov_iterations = sw.adjoint_iterations;
    out.krylov_iterations = krylov_iterations_ - its0;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

  /// Forward sensitivities: J(y_l) and dJ·δ for one direction δ, by the
  /// tangent-linear model (file comment) alongside the forward run. `y0`
  /// is not modified. Collective; a direction of the wrong size on any
  /// rank throws costate::Error on every rank.
  ThetaTangent tangent(const GlobalVector& y0, const Objective& objective, const ThetaDirection& direction) {
    const auto t_start = std::chrono::steady_clock::now();
    const Grid& g = op_.grid();
    {
      std::ostringstream why;
      bool ok = true;
      if (direction.initial_state.size() != 0 && direction.initial_state.size() != g.owned_size()) {
        ok = false;
        why << "pde::ThetaIntegrator::tangent: ThetaDirection::initial_state has "
            << direction.initial_state.size() << " entries on rank " << g.rank() << ", the state grid owns "
            << g.owned_size() << " (or leave it empty)";
      } else if (!direction.parameters.empty() &&
                 direction.parameters.size() != static_cast<std::size_t>(Op::kScalars)) {
        ok = false;
        why << "pde::ThetaIntegrator::tangent: ThetaDirection::parameters has " << direction.parameters.size()
            << " entries; the model has " << Op::kScalars << " scalar parameters (or leave it empty)";
      } else if (direction.fields.size() != 0 &&
                 (Op::kFields == 0 || direction.fields.size() != op_.field_grid()->owned_size())) {
        ok = false;
        why << "pde::ThetaIntegrator::tangent: ThetaDirection::fields has " << direction.fields.size()
            << " entries on rank " << g.rank() << "; "
            << (Op::kFields == 0 ? std::string("the model has no parameter fields")
                                 : "the field grid owns " + std::to_string(op_.field_grid()->owned_size()))
            << " (or leave it empty)";
      }
      int bad = ok ? 0 : 1, any = 0;
      MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, g.comm());
      if (!ok) throw Error(why.str());
      COSTATE_CHECK(!any, "pde::ThetaIntegrator::tangent: another rank passed a direction of the wrong size "
                          "(see its error)");
    }
    const double h = options_.dt, th = options_.theta;
    const GlobalVector* a_dot = direction.fields.size() ? &direction.fields : nullptr;
    const std::span<const double> q_dot(direction.parameters);
    const bool parameter_direction = a_dot != nullptr || !q_dot.empty();
    ThetaTangent out;
    out.final_state = g.create_global("pde::tangent y");
    out.final_tangent = g.create_global("pde::tangent dy");
    GlobalVector& y = out.final_state;
    GlobalVector& dy = out.final_tangent;
    GlobalVector rhs = g.create_global(), tmp = g.create_global();
    deep_copy(y, y0);
    if (direction.initial_state.size()) deep_copy(dy, direction.initial_state);
    const std::int64_t its0 = krylov_iterations_;
    std::int64_t tangent_its = 0;
    for (std::int64_t n = 0; n < options_.steps; ++n) {
      const double tn = options_.t0 + static_cast<double>(n) * h, tn1 = tn + h;
      deep_copy(rhs, dy);
      if (th < 1.0) {  // h(1−θ) ḟ_n at (t_n, y_n)
        op_.jvp_total(tn, y, &dy, a_dot, q_dot, tmp);
        axpy(h * (1.0 - th), tmp, rhs);
      }
      step(y, n);
      if (parameter_direction) {  // hθ (f_a δa + f_q δq) at (t_{n+1}, y_{n+1})
        op_.jvp_total(tn1, y, nullptr, a_dot, q_dot, tmp);
        axpy(h * th, tmp, rhs);
      }
      if constexpr (Model::linear_in_state) {
        ensure_linear_operator();
      } else {
        op_.jacobian(tn1, y, J_);
        A_.shifted_copy_of(J_, 1.0, -h * th);
        solver_.set_operator(A_);
      }
      const linear::Summary s = solver_.solve(rhs, dy, false);
      tangent_its += s.iterations;
      COSTATE_CHECK(s.success(), "pde::ThetaIntegrator::tangent: the tangent KSP solve failed at step "
                                     << n << ": " << s.message
                                     << "; choose a stronger -pc_type or raise KspOptions::max_iterations");
    }
    GlobalVector dJ = g.create_global();
    out.objective = objective.evaluate(g, y, &dJ);
    out.directional_derivative = dot(dJ, dy);
    out.krylov_iterations = krylov_iterations_ - its0;
    out.tangent_krylov_iterations = tangent_its;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

 private:
  /// The Ops object of ode::reverse_sweep.
  struct Sweep {
    ThetaIntegrator& in;
    const Objective& objective;
    GlobalVector current, next, cached, mu, tmp, lambda, a_bar, ystar;
    std::vector<double> q_bar;
    ode::SnapshotStore store;
    std::vector<std::int64_t> slot_index;
    std::int64_t i = 0, cached_index = -1, advances = 0, adjoint_iterations = 0;
    double objective_value = 0.0;
    bool seeded = false;
    std::size_t disk_slots_ = 0;
    std::unique_ptr<SharedDiskSnapshots> shared;  ///< the disk level when shared_disk_checkpoints

    static std::size_t disk_slots(const ode::Checkpointing& c) {
      if (const auto* m = std::get_if<ode::Multilevel>(&c)) return static_cast<std::size_t>(m->disk);
      return 0;
    }
    static std::string disk_path(const ode::Checkpointing& c, int rank) {
      if (const auto* m = std::get_if<ode::Multilevel>(&c)) return m->path + ".rank" + std::to_string(rank);
      return {};
    }
    bool shared_disk() const { return in.options_.shared_disk_checkpoints && disk_slots_ > 0; }
    Sweep(ThetaIntegrator& integrator, const Objective& obj, const ode::Checkpointing& c)
        : in(integrator), objective(obj),
          store(integrator.op_.grid().owned_size(), disk_slots(c), disk_path(c, integrator.op_.grid().rank())),
          disk_slots_(disk_slots(c)) {
      if (shared_disk())
        shared = std::make_unique<SharedDiskSnapshots>(in.op_.grid().comm(), in.op_.grid().owned_size(),
                                                       std::get<ode::Multilevel>(c).path);
      const Grid& g = in.op_.grid();
      current = g.create_global();
      next = g.create_global();
      cached = g.create_global();
      mu = g.create_global();
      tmp = g.create_global();
      lambda = g.create_global();
      ystar = g.create_global();
      if constexpr (Op::kFields > 0) a_bar = in.op_.field_grid()->create_global();
      q_bar.assign(static_cast<std::size_t>(Op::kScalars), 0.0);
    }
    std::int64_t index() const { return i; }
    void advance() {
      in.step(current, i);
      ++i;
      ++advances;
    }
    /// Disk slots are one file per rank: a failure on one rank (a full
    /// disk, an unwritable path) must stop every rank, not leave the others
    /// waiting in the next collective. The schedule is the same on every
    /// rank, so all ranks reach each disk save/load together and agree on
    /// the outcome (one MPI_Allreduce per disk access; RAM slots: none).
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
      MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, in.op_.grid().comm());
      if (bad) throw Error("pde::ThetaIntegrator: " + message);
      COSTATE_CHECK(!any, "pde::ThetaIntegrator: another rank could not " << what << " its disk checkpoint "
                                                                           "(see its error); this rank's "
                                                                           "file is fine");
    }
    void save(std::size_t slot) {
      if (shared && slot < disk_slots_)
        shared->save(slot, current.span());  // collective; throws on every rank
      else
        collective_disk(slot, "write", [&] { store.save(slot, current.span()); });
      if (slot_index.size() <= slot) slot_index.resize(slot + 1);
      slot_index[slot] = i;
    }
    void restore(std::size_t slot) {
      if (shared && slot < disk_slots_)
        shared->load(slot, current.span());
      else
        collective_disk(slot, "read", [&] { store.load(slot, current.span()); });
      i = slot_index[slot];
    }
    void reverse_step() {
      const Grid& g = in.op_.grid();
      const double h = in.options_.dt, th = in.options_.theta;
      const double tn = in.options_.t0 + static_cast<double>(i) * h, tn1 = tn + h;
      // y_{n+1}: from the previous reverse step, or one step from y_n.
      if (cached_index == i + 1) {
        deep_copy(next, cached);
      } else {
        deep_copy(next, current);
        in.step(next, i);
        ++advances;
      }
      if (!seeded) {
        objective_value = objective.evaluate(g, next, &lambda);
        seeded = true;
      }
      // (I − hθ J_{n+1})ᵀ μ = λ
      if constexpr (Model::linear_in_state) {
        in.ensure_linear_operator();
      } else {
        in.op_.jacobian(tn1, next, in.J_);
        in.A_.shifted_copy_of(in.J_, 1.0, -h * th);
        in.solver_.set_operator(in.A_);
      }
      const linear::Summary s = in.solver_.solve_transpose(lambda, mu, false);
      adjoint_iterations += s.iterations;
      check(s, "adjoint (transposed)");
      // Parameter vJps.
      if constexpr (Model::linear_in_state && Model::autonomous) {
        linear_sum(ystar, th, next, 1.0 - th, current);
        scale(tmp, h, mu);
        in.op_.vjp_add(tn, ystar, tmp, a_bar, q_bar);
      } else {
        scale(tmp, h * th, mu);
        in.op_.vjp_add(tn1, next, tmp, a_bar, q_bar);
        if (th < 1.0) {
          scale(tmp, h * (1.0 - th), mu);
          in.op_.vjp_add(tn, current, tmp, a_bar, q_bar);
        }
      }
      // λ_n = μ + h(1−θ) J_nᵀ μ
      if (th < 1.0) {
        if constexpr (!Model::linear_in_state) in.op_.jacobian(tn, current, in.J_);
        in.J_.mult_transpose(mu, tmp);
        linear_sum(lambda, 1.0, mu, h * (1.0 - th), tmp);
      } else {
        deep_copy(lambda, mu);
      }
      deep_copy(cached, current);
      cached_index = i;
    }
    void check(const linear::Summary& s, const char* what) const {
      COSTATE_CHECK(s.success(), "pde::ThetaIntegrator: the " << what << " KSP solve failed at step "
                                                              << i << ": " << s.message
                                                              << "; choose a stronger -pc_type or raise "
                                                                 "KspOptions::max_iterations");
    }
  };

  void ensure_linear_operator() {
    if (linear_ready_) return;
    op_.jacobian(options_.t0, r_, J_);  // J does not depend on u or t
    A_.shifted_copy_of(J_, 1.0, -options_.dt * options_.theta);
    solver_.set_operator(A_);
    linear_ready_ = true;
  }

  void solve(const GlobalVector& b, const GlobalVector& x, bool transpose) {
    const linear::Summary s = transpose ? solver_.solve_transpose(b, x) : solver_.solve(b, x);
    krylov_iterations_ += s.iterations;
    COSTATE_CHECK(s.success(), "pde::ThetaIntegrator: a forward KSP solve failed ("
                                   << s.message
                                   << "); choose a stronger -pc_type or raise KspOptions::max_iterations");
  }

  Op& op_;
  ThetaOptions options_;
  Matrix J_, A_;
  KrylovSolver solver_;
  GlobalVector f_, r_, delta_, explicit_part_, y_start_;
  bool linear_ready_ = false;
  std::int64_t krylov_iterations_ = 0;
};

}  // namespace costate::pde
