#pragma once
/// \file
/// Schemes on an ode::System and the one sweep that differentiates them —
/// compiled once in src/ode/ (no per-model template: the model is behind
/// the System).
///
/// A scheme is a stepper family as a map x_i → x_{i+1} on a state x of
/// fixed size (explicit RK: x = (y, z)) by step index, on the replayed
/// steps of a StepPlan (step_plan.hpp: t_0 < … < t_l and bdf's orders,
/// constants of the derivative; chosen once by plan_steps):
///   step(i, x_i, x_{i+1})                 the replayed step
///   adjoint(i, x_i, λ, μ)                 λ ← (∂x_{i+1}/∂x_i)ᵀ λ,  μ += (∂x_{i+1}/∂p)ᵀ λ
///   tangent(i, x_i, x_{i+1}, S_i, S_{i+1}, P)
///                                         x_{i+1} and S_{i+1} = ∂x_{i+1}/∂x_i S_i + ∂x_{i+1}/∂p P
/// ExplicitRkScheme (euler, rk4, dopri5's replayed 5th-order steps; the
/// tableaux of explicit_rk.hpp): with stages Y_j = x + h Σ_{k<j} a_jk K_k,
/// K_j = f(t + c_j h, Y_j), x' = x + h Σ_j b_j K_j, its adjoint linearizes
/// f once per stage (ode::Linearization: value and derivative from one
/// pass) and runs, from K̄_j = h b_j λ, for j = s … 1:
///     Ȳ_j = f_xᵀ(Y_j) K̄_j,  μ += f_pᵀ(Y_j) K̄_j,  K̄_k += h a_jk Ȳ_j (k < j),
/// then λ ← λ + Σ_j Ȳ_j; its tangent carries m directions through the same
/// linearizations: Ẏ_j = S + h Σ a_jk K̇_k, K̇_j = f_x Ẏ_j + f_p P.
///
/// adjoint_sweep runs a checkpoint schedule (checkpointing.hpp) over the
/// scheme through one checkpoint adapter (snapshots of x in a
/// SnapshotStore; Multilevel's disk level in HDF5), seeding at x_l
///     λ = (∂g/∂y, 1 for z),  μ = ∂g/∂p,
/// and adding ∂ℓ_k/∂y, ∂ℓ_k/∂p at the step where observation k lands. The
/// reverse steps depend only on the snapshot they start from, so every
/// schedule gives the same bits. tangent_sweep carries the n_p + n
/// directions (parameters, then initial states) in blocks of
/// kTangentBlock, one replay of the steps per block.
///
/// The implicit schemes (src/ode/scheme_theta.cpp, scheme_sdirk3.cpp,
/// scheme_bdf.cpp) solve their implicit equations by Newton with the
/// System's Jacobian [f_x | f_p] (Linearization::jacobian, dense LU); their
/// adjoints are the transposed solves, their tangents one solve per step or
/// stage for all m directions:
///   θ (x = (y, z); backward Euler θ = 1, Crank–Nicolson θ = ½):
///     x' = x + h[(1−θ) f(t, x) + θ f(t', x')];   with μ = (I − hθ J')⁻ᵀ λ:
///     λ ← μ + h(1−θ) J_xᵀ μ,  μ_p += hθ f_p'ᵀ μ + h(1−θ) f_pᵀ μ;
///     (I − hθ J') S' = S + h(1−θ)(J S + f_p P) + hθ f_p' P.
///   sdirk3 (x = (y, z); stages Y_s = x + h Σ_{j<s} a_sj k_j + hγ k_s):
///     k̄_s = h b_s λ;  s = 3, 2, 1: w = (I − hγ J_s)⁻ᵀ k̄_s,  Ȳ = J_sᵀ w,
///     μ += f_p,sᵀ w,  λ += Ȳ,  k̄_j += h a_sj Ȳ;
///     (I − hγ J_s) K_s = J_s (S + h Σ_{j<s} a_sj K_j) + f_p,s P,  S' = S + h Σ b_s K_s.
///   bdf (x = the window (y_i, …, y_{i−4}); order k, α_j, hβ of the step):
///     m = (I − hβ J(y_{i+1}))⁻ᵀ λ[0];  λ shifted one slot up, λ[j−1] += α_j m,
///     μ += hβ f_pᵀ m;  (I − hβ J) S'[0] = Σ_j α_j S[j−1] + hβ f_p P.
///     With a running cost (no events) Newton solves for y alone, on the
///     model's System (the plan's run: its bits), and z_{i+1} = Σ_j α_j
///     z_{i+1−j} + hβ q(t_{i+1}, y_{i+1}) exactly; the adjoint takes z's row
///     of the same equations as a rank-one term: m_z = λ_z[0],
///     (I − hβ J_y)ᵀ m_y = λ_y[0] + hβ q_y m_z,  μ += hβ (f_pᵀ m_y + q_p m_z).
/// Replayed steps are deterministic functions of (x_i, p) — Newton from a
/// predictor of x_i with a Jacobian evaluated afresh at the step's start,
/// converged to newton_tol and (sdirk3, bdf) to replay_kappa of the error
/// tolerance — so every checkpoint schedule gives the same bits.
///
/// Second order (forward over adjoint; Scheme::adjoint_tangent,
/// second_order_sweep): the discrete adjoint above, differentiated along a
/// direction (ẋ_0, ṗ) = (v_y0, v_p). The forward steps carry one tangent
/// (tangent() with m = 1); each reverse step is adjoint() at (x_i + εẋ_i,
/// p + εṗ) with λ + ελ̇, μ + εμ̇, its ε-parts formed from the System's
/// SecondOrderLinearization (f_xᵀẇ + ḟ_xᵀw, system.hpp). Implicit solves
/// are never differentiated through Newton: with A = I − g J (g = hθ, hγ or
/// hβ) and Aᵀ m = r,
///     Aᵀ ṁ = ṙ + g J̇ᵀ m,    J̇ = d/dε J(x + εẋ, p + εṗ),
/// and the products Jᵀ m, f_pᵀ m gain J̇ᵀ m, ḟ_pᵀ m. The seeds and the
/// observation terms add the terms' gradients and Hessian–vector products
/// (System::*_hessian_vector). The implicit schemes' one-direction forward
/// tangents solve the same linear equations as tangent() with small dense
/// LUs and no Eigen dynamic-size set-up: θ from Dual<double, 1> passes of
/// the model and Newton's LU, refined to round-off (no Jacobian per step);
/// sdirk3 and bdf with [J | f_p] at the stages / y_{i+1}, handed to the
/// next step's Newton (its start; StartJacobian) or read from the StoreAll
/// record, and under StoreAll sdirk3 keeps the stages' Ẏ_s for
/// adjoint_tangent. Value parts are the operations of adjoint()
/// (explicit RK with the dense strategy: the same bits as the gradient);
/// ε-parts are the exact derivative of the discrete gradient, i.e. the
/// discrete objective's Hessian applied to (v_p, v_y0).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/checkpointing.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/step_plan.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {

class Scheme {
 public:
  virtual ~Scheme() = default;
  /// Size of the scheme's state x.
  virtual std::size_t state_size() const = 0;
  virtual std::size_t steps() const = 0;
  virtual void step(std::size_t i, std::span<const double> x, std::span<double> xn) = 0;
  virtual void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
                       std::span<double> mu) = 0;
  /// adjoint() for a block of seeds from the same x_i: lane j's (λ_j, μ_j)
  /// get exactly adjoint(i, x, λ_j, μ_j)'s bits. The default calls adjoint
  /// per lane; a scheme overrides it to linearize (and factor) once for the
  /// block (adjoint_block_sweep).
  virtual void adjoint_block(std::size_t i, std::span<const double> x,
                             std::span<const std::span<double>> lambdas,
                             std::span<const std::span<double>> mus) {
    for (std::size_t j = 0; j < lambdas.size(); ++j) adjoint(i, x, lambdas[j], mus[j]);
  }
  /// m directions, row-major: S, Sn state_size() × m, P n_p × m.
  virtual void tangent(std::size_t i, std::span<const double> x, std::span<double> xn,
                       std::size_t m, std::span<const double> S, std::span<double> Sn,
                       std::span<const double> P) = 0;
  /// Second order (forward over adjoint, second_order_sweep): the adjoint
  /// of step i and its derivative along a direction. x, xdot = x_i and its
  /// tangent ẋ_i; xn, xndot = x_{i+1}, ẋ_{i+1} (tangent(i, …) with m = 1
  /// and P = pdot); pdot = ṗ. λ, μ change as adjoint() changes them, λ̇, μ̇
  /// by the ε-parts of the same operations at (x + εẋ, p + εṗ) with
  /// λ + ελ̇ (see "Second order" in the file comment). The default throws
  /// costate::Error (a scheme without second order).
  virtual void adjoint_tangent(std::size_t i, std::span<const double> x,
                               std::span<const double> xdot, std::span<const double> xn,
                               std::span<const double> xndot, std::span<const double> pdot,
                               std::span<double> lambda, std::span<double> lambda_dot,
                               std::span<double> mu, std::span<double> mu_dot);
  /// Right-hand sides evaluated in double by step().
  virtual std::int64_t rhs_evaluations() const = 0;
  /// Linearizations made by adjoint() and tangent().
  virtual std::int64_t linearizations() const = 0;
};

/// An explicit Runge–Kutta method (euler, rk4, dopri5) on `system` at
/// parameters `p`, replaying the steps t_0 … t_l of `steps`. The system, p
/// and the plan are held by reference and must outlive the scheme.
std::unique_ptr<Scheme> make_explicit_rk_scheme(const System& system, Method method,
                                                std::span<const double> p, const StepPlan& steps);

/// The θ-method (backward Euler θ = 1, Crank–Nicolson θ = ½) on `system`
/// replaying `steps` (Newton to options.newton_tol, at most
/// options.newton_max_iterations). References held: they must outlive it.
std::unique_ptr<Scheme> make_theta_scheme(const System& system, double theta,
                                          std::span<const double> p, const StepPlan& steps,
                                          const IntegratorOptions& options);

/// sdirk3 replaying `steps`; `options` are the gradient's (rtol, atol per
/// state of x, Newton settings: the replay's stopping test). With
/// `keep_step_data` (a StoreAll sweep) each replayed step's stages and its
/// start Jacobian are kept for its reverse step (up to kForwardRecordBytes).
std::unique_ptr<Scheme> make_sdirk3_scheme(const System& system, std::span<const double> p,
                                           const StepPlan& steps,
                                           const IntegratorOptions& options,
                                           bool keep_step_data = false);

/// Bytes of per-step data (states, Jacobians, stages) a StoreAll sweep of the
/// implicit schemes keeps; above, the reverse steps recompute them.
inline constexpr std::size_t kForwardRecordBytes = std::size_t{256} << 20;

/// bdf's adaptive forward run as a StoreAll sweep takes it: its accepted
/// states y_1 … y_l (l × n_x) and [J | f_p] at y_0 … y_{l−1} (l × n_x(n_x +
/// n_p), or empty when they did not fit kForwardRecordBytes). Per-thread
/// buffers keep their capacity from call to call (fresh large vectors cost a
/// page fault per 4 kB); trim() releases them when above kKeepBytes.
struct BdfForwardRecord {
  static constexpr std::size_t kKeepBytes = std::size_t{32} << 20;
  std::vector<double> states, jacobians;
  void clear();
  void trim();
  static BdfForwardRecord& of_this_thread();
  /// This thread's record, cleared now and trimmed when the guard ends (on
  /// every exit of a derivative that keeps one: ode::gradient, hessian_vector).
  class ThisThread {
   public:
    ThisThread() : record(of_this_thread()) { record.clear(); }
    ~ThisThread() { record.trim(); }
    ThisThread(const ThisThread&) = delete;
    ThisThread& operator=(const ThisThread&) = delete;
    BdfForwardRecord& record;
  };
};

/// bdf (state: the window (y_i, …, y_{i−4}), 5 n_x) replaying `steps` and
/// their orders (one per step). With `keep_step_data` (StoreAll) the step
/// Jacobians are kept; with a `record` of this run's forward integration
/// (plan_steps with a record, the same options) its states and Jacobians
/// are used instead of replaying (the same bits).
std::unique_ptr<Scheme> make_bdf_scheme(const System& system, std::span<const double> p,
                                        const StepPlan& steps, const IntegratorOptions& options,
                                        bool keep_step_data = false,
                                        const BdfForwardRecord* record = nullptr);

/// The scheme of options.method (explicit RK, θ, sdirk3, bdf) replaying
/// `steps` (held by reference). Throws costate::Error for the CVODES
/// methods (they are not schemes).
std::unique_ptr<Scheme> make_scheme(const System& system, const IntegratorOptions& options,
                                    std::span<const double> p, const StepPlan& steps,
                                    bool keep_step_data = false,
                                    const BdfForwardRecord* record = nullptr);

/// What the native derivatives replay, chosen once by plan_steps.
struct ReplaySetup {
  /// The caller's options as the schemes replay them: stop_at_outputs; with
  /// a running cost an atol per state of x = (y, z), z not error-controlled.
  IntegratorOptions options;
  std::vector<double> x0;  ///< (y0, z_0 = 0): System::n_states() entries
  StepPlan steps;
  Summary summary;  ///< the run that chose the steps (fixed or replayed: their count)
};

/// The one step chooser of the discrete derivatives (ode::gradient,
/// hessian_vector, sensitivity_matrix) on `system` from y0 (n_model_states)
/// at p over [t0, t1], the steps landing on every observation time of the
/// System (validated here) and on t1:
///   - `replay` when it is not empty (check_replay: from t0 to t1, bdf's
///     orders), the steps of an earlier result;
///   - fixed dt (options.fixed_step(): run_fixed's landing rule), checked
///     against integrator.max_steps;
///   - sdirk3's or bdf's adaptive run (bdf's orders; steps converged as
///     the schemes replay them: BdfStepper::set_replay makes bdf's
///     replay-identical, so with `record` its states, and Jacobians while
///     they fit, are kept there for a StoreAll sweep);
///   - dopri5's adaptive run, its accepted steps recorded.
/// options.on_step is called per accepted step of an adaptive run. Throws
/// costate::Error prefixed by `who` when the run fails or the plan does not
/// fit.
ReplaySetup plan_steps(const System& system, std::span<const double> y0, std::span<const double> p,
                       double t0, double t1, IntegratorOptions options, const StepPlan& replay,
                       std::string_view who, BdfForwardRecord* record = nullptr);

/// The plan → scheme set-up of every native derivative (ode::gradient's
/// adjoint and tangents, hessian_vector, sensitivity_matrix), written once:
/// plan_steps (fixed, the adaptive run, or `replay`), then make_scheme on
/// the plan, and x_0 = (y0, z_0 = 0) of the scheme's state size.
/// `store_all` (a StoreAll sweep follows): sdirk3 keeps its step data, and
/// bdf's adaptive run keeps its states and Jacobians for the scheme in this
/// thread's BdfForwardRecord (cleared here, trimmed when this ends).
///
/// rhs_evaluations() is the one count every native result reports: every
/// right-hand-side evaluation since construction — the run that chose the
/// steps (summary().rhs_evaluations: 0 for fixed or replayed steps) plus
/// the scheme's (the sweeps', forward and reverse). The continuous adjoint
/// and the CVODES methods count the same way (their forward and backward
/// runs).
class ReplayedScheme {
 public:
  ReplayedScheme(const System& system, std::span<const double> y0, std::span<const double> p,
                 double t0, double t1, const IntegratorOptions& options, const StepPlan& replay,
                 std::string_view who, bool store_all = false);
  ~ReplayedScheme();
  ReplayedScheme(const ReplayedScheme&) = delete;
  ReplayedScheme& operator=(const ReplayedScheme&) = delete;

  Scheme& scheme() const { return *scheme_; }
  const StepPlan& steps() const { return setup_.steps; }
  /// x_0 = (y0, 0 for z): scheme().state_size() entries.
  std::span<const double> x0() const { return x0_; }
  /// The options as the scheme replays them (ReplaySetup::options).
  const IntegratorOptions& options() const { return setup_.options; }
  /// The run that chose the steps (fixed or replayed: their count).
  const Summary& summary() const { return setup_.summary; }
  std::int64_t rhs_evaluations() const;
  /// The plan, moved out; the scheme (which reads it) is released first.
  StepPlan release_steps();

 private:
  struct Kept;  // bdf's forward record guard, when kept
  std::unique_ptr<Kept> kept_;
  ReplaySetup setup_;
  std::unique_ptr<Scheme> scheme_;
  std::vector<double> x0_;
};

/// Directions per tangent replay.
inline constexpr std::size_t kTangentBlock = 8;

/// Called by the sweeps every kSweepHookInterval steps, forward and reverse,
/// with the time t_i of the step: the place for
/// a cancellation check (Ctrl-C: throw to end the sweep; the sweep's state
/// is released by RAII) or a progress report. ode::gradient passes
/// IntegratorOptions::on_step here.
using SweepHook = std::function<void(double t)>;
inline constexpr std::int64_t kSweepHookInterval = 16;

/// Delayed events (events.hpp) link two instants: the one that executes a
/// delayed event (reversed first) leaves the adjoints of its time and of
/// its values from the trigger time for the one that scheduled it. A place
/// between the two keeps them (pending_events), so a resumed sweep carries
/// them on as the uninterrupted one does.
struct PendingEventAdjoint {
  std::size_t instant = 0;  ///< the scheduling instant's index in steps.events()
  std::size_t event = 0;    ///< the delayed event
  std::vector<double> adjoint;  ///< τ̄_e, then v̄ (one per target of `event`)
  friend bool operator==(const PendingEventAdjoint&, const PendingEventAdjoint&) = default;
};
/// Where an interrupted discrete adjoint stood, to continue it in another
/// process (`costate sensitivity --resume`): its reverse sweep had reversed
/// steps l−1 … `step` (λ = ∂J/∂x_step with every observation at or after
/// t_step added, μ the parameters' part so far, `objective` J complete) on
/// the plan `steps`. Resumed, the sweep reverses steps
/// step−1 … 0 from the same λ, μ, J: each reverse step depends only on its
/// replayed state x_i (the same bits under every schedule) and the sums run
/// in the same order, so the gradient has the uninterrupted run's bits.
/// (With delayed events, also the adjoints pending between two instants.)
struct AdjointResume {
  std::int64_t step = -1;  ///< −1: the reverse phase had not begun
  double objective = 0.0;
  std::vector<double> lambda;  ///< scheme state size
  std::vector<double> mu;      ///< n_p
  StepPlan steps;              ///< the steps (and bdf's orders) the sweep replays
  /// Delayed executions reversed whose scheduling instant is not yet
  /// (ascending by instant, then event; empty without delayed events).
  std::vector<PendingEventAdjoint> pending_events;
};

/// What a sweep computed: J and its gradient (p, then y0), the schedule's
/// counts, the evaluations.
struct SweepOutcome {
  double objective = 0.0;
  std::vector<double> wrt_parameters;
  std::vector<double> wrt_initial_state;
  CheckpointStats checkpoints;
  std::int64_t rhs_evaluations = 0;
  std::int64_t linearizations = 0;
};

/// The discrete adjoint of the scheme's replayed solution from x_0 = x0
/// (size state_size(); the running cost's z_0 = 0 included) at parameters
/// p, on `steps` (the plan the scheme replays: the sweep adds each
/// observation term of the System at the step that lands on its time, and
/// passes t_i to `hook`, optional, as SweepHook says). StoreAll keeps x_0 …
/// x_{l−1} in one arena and reverses each step from its state in place (no
/// slot pool, no copies); its counts are those of reverse_sweep's StoreAll.
///
/// With `resume_from` the sweep continues that interrupted sweep (its step,
/// λ, μ, J; scheme and plan as before): only steps resume_from->step − 1 …
/// 0 are run (forward from x0, then reversed). With `interrupted_at`, when
/// `hook` throws after the reverse phase began (the seed made), the place
/// reached (step, λ, μ, J; the plan is the caller's) is stored there
/// before the exception propagates; otherwise its step is left −1.
SweepOutcome adjoint_sweep(const System& system, Scheme& scheme, const StepPlan& steps,
                           const Checkpointing& checkpointing, std::span<const double> x0,
                           std::span<const double> p, const SweepHook& hook = {},
                           const AdjointResume* resume_from = nullptr,
                           AdjointResume* interrupted_at = nullptr);

/// A block of adjoint seeds in one reverse sweep: the gradients of several
/// objectives of one model (one System each, the same model and sizes,
/// none with a running cost; their observation times among `steps`'
/// times), sharing the forward steps, the snapshots and the schedule's
/// recomputation — as PETSc's TSAdjoint does with several cost functions.
/// Each reverse step runs the scheme's adjoint from the same x_i once per
/// objective, in order, so each outcome has the bits of adjoint_sweep with
/// that objective's System (and the same scheme); the counts are the block's
/// (shared). `scheme` replays `steps` on any of the Systems' model.
std::vector<SweepOutcome> adjoint_block_sweep(std::span<const System* const> systems,
                                              Scheme& scheme, const StepPlan& steps,
                                              const Checkpointing& checkpointing,
                                              std::span<const double> x0,
                                              std::span<const double> p,
                                              const SweepHook& hook = {});

/// The same gradient by forward tangents (kTangentBlock directions per
/// replay of the steps); checkpoints.forward_steps counts the replayed steps.
SweepOutcome tangent_sweep(const System& system, Scheme& scheme, const StepPlan& steps,
                           std::span<const double> x0, std::span<const double> p,
                           const SweepHook& hook = {});

/// What second_order_sweep computed: J and its gradient (as SweepOutcome)
/// with their derivatives along the direction: objective_dot = ∇J · v,
/// hv_* = H v (rows of p, then of y0).
struct SecondOrderOutcome {
  double objective = 0.0, objective_dot = 0.0;
  std::vector<double> wrt_parameters, wrt_initial_state;
  std::vector<double> hv_wrt_parameters, hv_wrt_initial_state;
  CheckpointStats checkpoints;
  std::int64_t rhs_evaluations = 0;
  std::int64_t linearizations = 0;
};

/// Forward over adjoint: the discrete adjoint sweep of adjoint_sweep along
/// the direction (x0dot, pdot) (sizes state_size() and n_p; x0dot's running
/// cost entry 0). The forward steps are tangent(i, …) with one direction,
/// the reverse steps adjoint_tangent. Snapshots hold x_i and ẋ_i (twice
/// adjoint_sweep's memory per slot, the same SnapshotStore and schedules);
/// each reverse step depends only on the snapshot it starts from and on
/// the previous reverse step's x_{i+1}, so every schedule gives the same
/// bits. Arguments otherwise as adjoint_sweep.
SecondOrderOutcome second_order_sweep(const System& system, Scheme& scheme,
                                      const StepPlan& steps, const Checkpointing& checkpointing,
                                      std::span<const double> x0, std::span<const double> x0dot,
                                      std::span<const double> p, std::span<const double> pdot,
                                      const SweepHook& hook = {});

/// Forward tangents with outputs: the model state y (n entries) and its
/// tangents ∂y/∂(p, y0) (n × (n_p + n), row-major, parameters first) at
/// every observation time of the System (the step of `steps` landing on it)
/// — the residual Jacobian of a calibration (sensitivity_matrix).
/// kTangentBlock directions per replay.
struct ObservedTangents {
  std::vector<double> states;    ///< K × n
  std::vector<double> tangents;  ///< K × n × (n_p + n)
};
ObservedTangents observed_tangents(const System& system, Scheme& scheme, const StepPlan& steps,
                                   std::span<const double> x0, std::span<const double> p);

}  // namespace costate::ode
