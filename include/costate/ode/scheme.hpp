#pragma once
/// \file
/// Schemes on an ode::System and the one sweep that differentiates them —
/// compiled once in src/ode/ (no per-model template: the model is behind
/// the System).
///
/// A scheme is a stepper family as a map x_i → x_{i+1} on a state x of
/// fixed size (explicit RK: x = (y, z)) by step index, on replayed step
/// times t_0 < … < t_l (constants of the derivative):
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
/// Later (issue 14): θ, sdirk3 and bdf schemes behind the same interface
/// (today detail/implicit_sweep.hpp's templates), Dual<double, 1> states
/// for second order, the StepPlan value in place of `times`.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/checkpointing.hpp"
#include "costate/ode/options.hpp"
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
  /// m directions, row-major: S, Sn state_size() × m, P n_p × m.
  virtual void tangent(std::size_t i, std::span<const double> x, std::span<double> xn,
                       std::size_t m, std::span<const double> S, std::span<double> Sn,
                       std::span<const double> P) = 0;
  /// Right-hand sides evaluated in double by step().
  virtual std::int64_t rhs_evaluations() const = 0;
  /// Linearizations made by adjoint() and tangent().
  virtual std::int64_t linearizations() const = 0;
};

/// An explicit Runge–Kutta method (euler, rk4, dopri5) on `system` at
/// parameters `p`, replaying the steps t_0 … t_l of `times`. The system, p
/// and times are held by reference and must outlive the scheme.
std::unique_ptr<Scheme> make_explicit_rk_scheme(const System& system, Method method,
                                                std::span<const double> p,
                                                std::span<const double> times);

/// Directions per tangent replay.
inline constexpr std::size_t kTangentBlock = 8;

/// Called by the sweeps every kSweepHookInterval steps, forward and reverse,
/// with the time t_i of the step (0 when no times were given): the place for
/// a cancellation check (Ctrl-C: throw to end the sweep; the sweep's state
/// is released by RAII) or a progress report. ode::gradient passes
/// IntegratorOptions::on_step here.
using SweepHook = std::function<void(double t)>;
inline constexpr std::int64_t kSweepHookInterval = 16;

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
/// p. obs_at[i] = k ≥ 0 when observation k lands on step index i (−1
/// otherwise; size l + 1). `hook` (optional) as SweepHook says, with
/// `times` (t_0 … t_l, optional) for its argument. StoreAll keeps x_0 …
/// x_{l−1} in one arena and reverses each step from its state in place (no
/// slot pool, no copies); its counts are those of reverse_sweep's StoreAll.
SweepOutcome adjoint_sweep(const System& system, Scheme& scheme, const Checkpointing& checkpointing,
                           std::span<const std::int64_t> obs_at, std::span<const double> x0,
                           std::span<const double> p, const SweepHook& hook = {},
                           std::span<const double> times = {});

/// The same gradient by forward tangents (kTangentBlock directions per
/// replay of the steps); checkpoints.forward_steps counts the replayed steps.
SweepOutcome tangent_sweep(const System& system, Scheme& scheme,
                           std::span<const std::int64_t> obs_at, std::span<const double> x0,
                           std::span<const double> p, const SweepHook& hook = {},
                           std::span<const double> times = {});

}  // namespace costate::ode
