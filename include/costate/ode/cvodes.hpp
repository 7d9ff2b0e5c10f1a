#pragma once
/// \file
/// The SUNDIALS CVODES backend: `integrator.method: cvodes_bdf | cvodes_adams`
/// for ode::integrate, and two sensitivity methods for ode::gradient,
/// CvodesForward (`sensitivity.method: cvodes_forward`) and CvodesAdjoint
/// (`cvodes_adjoint`). Every derivative CVODES needs comes from the compiled
/// ode::System of the model and objective (system.hpp; cvodes::Binding
/// below) — the user never writes one:
///   - the Newton Jacobian ∂f/∂y: forward mode (ad::Dual<double, 8>, dense,
///     ⌈n/8⌉ evaluations), handed to CVODES' dense direct solver;
///   - forward sensitivities  s_j' = f_y s_j + ∂f/∂p_j  (CVodeSensInit, all
///     directions in one Dual evaluation per 8 of them, simultaneous
///     corrector, sensitivities in the error test);
///   - the adjoint (CVodeF/CVodeB, checkpoints every `steps` steps, Hermite or
///     polynomial interpolation of the forward state):
///         λ' = −f_yᵀ λ − q_yᵀ,    λ(t1) = ∂g/∂y,
///         μ' = −f_pᵀ λ − q_pᵀ,    μ(t1) = 0   (a backward quadrature, CVodeQuadInitB),
///         λ(t_k⁻) = λ(t_k⁺) + ∂ℓ_k/∂y  at each observation time t_k,
///         dJ/dy0 = λ(t0),   dJ/dp = μ(t0) + ∂g/∂p + Σ_k ∂ℓ_k/∂p,
///     with f_yᵀλ, f_pᵀλ from one ode::Linearization of the System (kept per
///     (t, y) and shared by the backward right-hand side, its Jacobian −f_yᵀ
///     and the quadrature): the dense forward-mode [f_y | f_p] for up to
///     kBindingDenseMax states + parameters, the coloured sparse one or a
///     short tape of one right-hand side above that (the System's choice).
/// The running cost q is carried as an extra state z' = q (in the error
/// test, its absolute tolerance the scalar integrator.atol), so λ_z = 1
/// and the rules above need only the augmented f.
///
/// Observations: the forward pass stops at every observation time and
/// takes y(t_k) there (forward sensitivities: landing exactly, with
/// CVodeSetStopTime; adjoint: CVODES' interpolant at t_k — CVodeB recomputes
/// checkpoint intervals without stop times, so a step shortened to land on
/// t_k would not be retraced), and the backward pass runs from t1 to
/// t_K, to t_{K−1}, …: at each t_k it adds the jump ∂ℓ_k/∂y to λ and
/// restarts the backward problem there (CVodeReInitB; the quadrature
/// continues from its value, CVodeQuadReInitB) — BDF restarts at order 1
/// with a small step, which is the cost of observations.
///
/// Second order (ode::hessian_vector / ode::hessian with CvodesAdjoint,
/// cvodes::second_order_adjoint): the forward pass also carries CVODES'
/// sensitivity s along the direction v (CVodeSensInit with one direction,
/// outside the error test, stored with the checkpoints), and a second
/// backward problem [λ; Λ] reads it (CVodeInitBS, CVodeQuadInitBS):
///         Λ' = −f_yᵀΛ − (f_yy[s] + f_yp[v_p])ᵀλ,   Λ(t1) = g_yy s + g_yp v_p,
///         ν' = −f_pᵀΛ − (f_py[s] + f_pp[v_p])ᵀλ,   ν(t1) = 0,
///         Λ jumps ℓ_k,yy s + ℓ_k,yp v_p at the observations,
///         (H v)_y0 = Λ(t0),
///         (H v)_p = ν(t0) + g_py s + g_pp v_p + Σ_k (ℓ_k,py s + ℓ_k,pp v_p),
///     the products from the second-order System's SecondOrderLinearization
///     (src/ode/cvodes_hessian.cpp).
///
/// CVODES solves the continuous problem to its tolerances: its gradient is
/// the derivative of the exact objective up to O(rtol), not of the discrete
/// solution (ode::DiscreteAdjoint), so agreement with other methods and
/// finite differences is to the tolerances' order.
///
/// Linear solver (IntegratorOptions::cvodes_linear_solver,
/// `integrator.cvodes_linear_solver`): dense LU, band LU or SuiteSparse KLU
/// for every Newton iteration — forward, forward sensitivities (CVODES'
/// simultaneous corrector reuses the state's matrix) and backward, whose
/// matrix I − γ(−f_yᵀ) has the transposed pattern (band: the bandwidths
/// swap; sparse: the CSC arrays of f_y read as CSR). Band and sparse take
/// the pattern of f_y detected once at (t0, y0) by AD (plus the diagonal)
/// and its values from the compressed forward-mode Jacobian, ⌈colours/8⌉
/// evaluations on ad::Dual<double, 8> — 1 for a tridiagonal or a 1-D
/// two-species stencil, whatever n. `automatic` (the default) keeps dense
/// below kAutomaticDenseLimit = 20 states (no detection at all), see
/// CvodesLinearSolver.
///
/// Limitations: serial (one rank's N_Vector_Serial; under MPI every rank
/// solves the whole ODE); band/sparse assume the detected pattern holds at
/// every state (a missing entry slows Newton, never changes the tolerance
/// of the result); the Adams method also uses Newton (no fixed-point
/// iteration).
///
/// Only solvers/sundials/ includes SUNDIALS headers: this header presents a
/// type-erased interface (cvodes::System of std::function callbacks) that
/// cvodes::Binding fills from a compiled ode::System (system.hpp). No
/// CVODES code is a template on the model: ode::integrate and ode::gradient
/// build the System (make_system) and call the compiled
/// detail::integrate_cvodes / detail::cvodes_gradient below.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/options.hpp"

namespace costate::ode {

/// How CVODES interpolates the forward state between its checkpoints in
/// the backward pass (CV_HERMITE: cubic Hermite, stores y and y' at every
/// step; CV_POLYNOMIAL: the method's own polynomial, stores y only).
enum class CvodesInterpolation { Hermite, Polynomial };
std::string to_string(CvodesInterpolation i);
CvodesInterpolation cvodes_interpolation_from_string(std::string_view name);

/// Forward sensitivities through CVODES (CVodeSensInit); the gradient of J
/// with respect to all parameters and initial states (np + n directions).
/// Needs integrator.method cvodes_bdf or cvodes_adams.
struct CvodesForward {};

/// The checkpoint spacing CVODES' and IDAS' adjoints use when asked for
/// none (CvodesAdjoint::steps or IdasAdjoint::steps = 0). The backward pass
/// re-integrates every checkpoint interval but the last, and CVodeAdjInit /
/// IDAAdjInit allocate one interval's points up front (`vectors_per_point`
/// vectors of n values each: y and y' with Hermite interpolation). So the
/// spacing is kAutoCheckpointStepsPerState steps per state — a point costs
/// about 1 µs to allocate whatever n, a step of a large model far more than
/// of a small one — within kAutoCheckpointBytes of points, between
/// kAutoCheckpointMinSteps and kAutoCheckpointMaxSteps. Measured
/// (bench/README.md, "Chen_MSB2009: where the first gradient's time goes"):
/// Chen_MSB2009's first gradient (500 states, 5 548 steps) 0.86× the CPU of
/// the 100-step spacing, Fujita_SciSignal2010's (9 states) 1.15× when it
/// was given 10 000.
inline constexpr std::size_t kAutoCheckpointBytes = std::size_t{64} << 20;
inline constexpr std::size_t kAutoCheckpointStepsPerState = 20;
inline constexpr int kAutoCheckpointMinSteps = 100;    // the former fixed default
inline constexpr int kAutoCheckpointMaxSteps = 10000;  // AMICI passes its maxsteps, 10 000
int auto_checkpoint_steps(std::size_t n, std::size_t vectors_per_point);

/// The adjoint through CVodeF/CVodeB with backward quadratures.
struct CvodesAdjoint {
  /// Steps between checkpoints of the forward pass (CVodeAdjInit Nd ≥ 1;
  /// with Polynomial interpolation ≥ the method's maximum order + 1: 6 for
  /// BDF, 13 for Adams), or 0: chosen by the system's size
  /// (auto_checkpoint_steps). CVODES' forward steps depend slightly on it
  /// (the objective changes at the level of the tolerances).
  int steps = 0;
  CvodesInterpolation interpolation = CvodesInterpolation::Hermite;
  /// `steps`, or when 0 auto_checkpoint_steps for n states and this
  /// interpolation's points (Hermite: y and y'; polynomial: y), each of
  /// `copies` vectors (2 when a sensitivity is stored with y).
  int resolved_steps(std::size_t n, std::size_t copies = 1) const;
  /// The spacing as method strings print it: "100" when fixed, "5548 auto"
  /// when chosen for n states (resolved_steps), "auto" when n = 0 (not known).
  std::string steps_label(std::size_t n, std::size_t copies = 1) const;
  /// Tolerances of the backward problem (λ); 0: the integrator's rtol and
  /// (scalar) atol.
  double rtol = 0.0;
  double atol = 0.0;
  /// The forward pass (CVodeF) runs at this multiple, in (0, 1], of the
  /// integrator's rtol and atol; the backward problem keeps the
  /// integrator's (or rtol/atol above). The forward pass has only the
  /// states in its error test (CvodesForward also has the sensitivities,
  /// which takes it ~3× the steps), and the gradient's error follows the
  /// forward trajectory's: on the PEtab benchmarks at rtol = atol = 1e-8
  /// the adjoint gradient was off by 2.5e-2 (Borghans_BiophysChem1997)
  /// and 1.2e-2 (Fujita_SciSignal2010) of its size where the forward one
  /// was off by 2.8e-4 and 2.5e-5, and a 100× tighter backward problem
  /// changed nothing, a 100× tighter forward pass gained 100×
  /// (bench/README.md, "PEtab forward vs adjoint gradients").
  /// petab::Options takes 1e-2.
  double forward_tolerance_factor = 1.0;
  /// Throws costate::Error naming the field and the rule broken.
  void validate() const;
};

namespace cvodes {

/// A first-order system y' = f(t, y, p) as callbacks on raw arrays (all
/// owned by the caller of each callback, valid during the call).
struct System {
  std::size_t n = 0;   ///< states
  std::size_t np = 0;  ///< parameters
  bool bdf = true;     ///< BDF (stiff) or Adams–Moulton
  /// ydot = f(t, y).
  std::function<void(double t, const double* y, double* ydot)> rhs;
  /// jac = ∂f/∂y, column-major n × n.
  std::function<void(double t, const double* y, double* jac)> jacobian;
  /// ySdot[j] = f_y yS[j] + (j < np ? ∂f/∂p_j : 0), j < ns.
  std::function<void(double t, const double* y, std::size_t ns, const double* const* yS,
                     double* const* ySdot)>
      sensitivity_rhs;
  /// fy_lambda = f_yᵀ λ (n), fp_lambda = f_pᵀ λ (np).
  std::function<void(double t, const double* y, const double* lambda, double* fy_lambda,
                     double* fp_lambda)>
      vjp;
  /// Second order (Hessian–vector products along v = (v_p, v_y0); the
  /// parameters are p + εv_p inside these two). sdot = f_y s + f_p v_p: the
  /// right-hand side of the forward sensitivity s = ∂y/∂p v_p + ∂y/∂y0 v_y0.
  std::function<void(double t, const double* y, const double* s, double* sdot)> tangent_rhs;
  /// The ε-expansion of (f_yᵀw, f_pᵀw) at (y + εs, p + εv_p) with w = λ + εΛ:
  ///   fy_w = [f_yᵀλ;  f_yᵀΛ + (f_yy[s] + f_yp[v_p])ᵀλ]   (2n),
  ///   fp_w = [f_pᵀλ;  f_pᵀΛ + (f_py[s] + f_pp[v_p])ᵀλ]   (2np).
  std::function<void(double t, const double* y, const double* s, const double* lambda,
                     const double* Lambda, double* fy_w, double* fp_w)>
      second_order_vjp;

  /// Root functions for CVODES' root finding (CVodeRootInit; events):
  /// g (n_roots values) at (t, y). Unset / 0: none.
  std::size_t n_roots = 0;
  std::function<void(double t, const double* y, double* g)> roots;

  /// Band and sparse linear solvers: the structure of ∂f/∂y in compressed
  /// sparse columns — column j holds the rows
  /// jacobian_rows[jacobian_column_starts[j] .. jacobian_column_starts[j + 1]),
  /// increasing, every diagonal entry included — and its values at (t, y)
  /// in that order (nnz = jacobian_rows.size()). Both empty / unset: only
  /// the dense solver is available (`automatic` then means dense).
  std::vector<std::int64_t> jacobian_column_starts, jacobian_rows;
  std::function<void(double t, const double* y, double* values)> sparse_jacobian;

  /// True when the structure above is present and consistent.
  bool has_jacobian_structure() const {
    return sparse_jacobian && jacobian_column_starts.size() == n + 1 &&
           static_cast<std::size_t>(jacobian_column_starts.back()) == jacobian_rows.size();
  }
  /// Largest i − j (lower) and j − i (upper) over the structure's entries (i, j).
  std::int64_t lower_bandwidth() const { return bandwidth(true); }
  std::int64_t upper_bandwidth() const { return bandwidth(false); }

 private:
  std::int64_t bandwidth(bool lower) const {
    std::int64_t w = 0;
    for (std::size_t j = 0; j + 1 < jacobian_column_starts.size(); ++j)
      for (auto k = jacobian_column_starts[j]; k < jacobian_column_starts[j + 1]; ++k) {
        const auto d = jacobian_rows[static_cast<std::size_t>(k)] - static_cast<std::int64_t>(j);
        w = std::max(w, lower ? d : -d);
      }
    return w;
  }
};

/// The linear solver `requested` resolves to for `sys` (never Automatic):
/// Automatic gives Dense below kAutomaticDenseLimit states or without a
/// structure; otherwise Band when the band (with LU fill: n × (2·lower +
/// upper + 1)) holds at most 4× the structure's non-zeros, Sparse when the
/// structure fills at most 10% of the matrix or has at most
/// kAutomaticSparseRowEntries non-zeros per row on average, else Dense.
/// Band or Sparse without a structure throw costate::Error. (Measured,
/// bench/README.md "CVODES KLU for mid-sized sparse models": the
/// 25-state Bachmann PEtab model, 89 non-zeros = 14% of f_y, simulates
/// 1.7× and differentiates 1.6–1.7× faster by KLU than by dense LU; below
/// 20 states the two were within the machine's noise.)
inline constexpr std::size_t kAutomaticDenseLimit = 20;
inline constexpr double kAutomaticSparseRowEntries = 4.0;
/// SystemOptions::dense_max of the Systems the CVODES entry points build:
/// the dense [f_y | f_p] (one Jacobian per (t, y), then mat-vecs) up to this
/// many states + parameters.
inline constexpr int kBindingDenseMax = 64;
CvodesLinearSolver resolve_linear_solver(const System& sys, CvodesLinearSolver requested);

/// Step control shared by the forward and the backward problems.
struct Settings {
  double rtol = 1e-6;
  std::vector<double> atol;  ///< one per state
  std::int64_t max_steps = 10'000'000;
  double first_step = 0.0;  ///< 0: CVODES' choice
  double max_step = 0.0;    ///< 0: no limit
  double min_step = 0.0;
  /// Newton linear solver of the forward, sensitivity and backward problems.
  CvodesLinearSolver linear_solver = CvodesLinearSolver::Dense;
};

/// Counters of one CVODES run (forward, or backward).
struct Stats {
  std::int64_t steps = 0, rhs_evaluations = 0, jacobian_evaluations = 0,
               error_test_failures = 0, nonlinear_iterations = 0, linear_setups = 0;
  std::int64_t checkpoints = 0;  ///< adjoint: forward checkpoints stored
  double final_time = 0.0;
  bool success = true;
  std::string flag;     ///< CVODES' return flag name of a failed run (CV_TOO_MUCH_WORK, …)
  std::string message;  ///< CVODES' flag name and error text when it failed

  /// Adds another run's (or leg's) work counters: steps, evaluations,
  /// failures, iterations and setups (not checkpoints, times or flags).
  void add_counts(const Stats& o) {
    steps += o.steps;
    rhs_evaluations += o.rhs_evaluations;
    jacobian_evaluations += o.jacobian_evaluations;
    error_test_failures += o.error_test_failures;
    nonlinear_iterations += o.nonlinear_iterations;
    linear_setups += o.linear_setups;
  }
};

/// Integrates from t0 to the last output time; `out(j, t, y)` at every
/// output time (CVODES' interpolant; the integrator never steps past
/// `t1`). `y` holds y0 on entry and the final state on return. With
/// `stop_at_outputs` the integrator lands exactly on every output time.
Stats integrate(const System& sys, const Settings& settings, double t0, double t1,
                std::vector<double>& y, std::span<const double> outputs, bool stop_at_outputs,
                const std::function<void(std::size_t j, double t, const double* y)>& out);

/// Forward sensitivities carried by integrate_to_root: `S` (column-major
/// n × ns, as forward_sensitivities') holds S(t0) on entry and S at the end
/// on return, in the error test as forward_sensitivities' (scales 1).
struct RootSensitivities {
  std::size_t ns = 0;
  std::vector<double>* S = nullptr;
};

/// integrate() until the first zero of sys.roots (CVODES' root finding) or
/// t_end: outputs ≤ the end reached as integrate() reports them, with S
/// there (nullptr without `sensitivities`). Returns with y (and S) at the
/// end; `root_time` is the root's time (NaN when t_end was reached) and
/// `directions` (sys.n_roots) CVODES' rootsfound: +1 / −1 for a root
/// crossed increasing / decreasing there, 0 for the others.
Stats integrate_to_root(
    const System& sys, const Settings& settings, double t0, double t_end, std::vector<double>& y,
    std::span<const double> outputs,
    const std::function<void(std::size_t j, double t, const double* y, const double* S)>& out,
    double& root_time, std::vector<int>& directions, RootSensitivities sensitivities = {});

/// Forward sensitivities with ns directions: S (column-major n × ns,
/// S(:, j) = ∂y/∂(direction j)) holds S(t0) on entry. The integrator stops
/// exactly at each of `stops` (ascending, the last = t1) and calls
/// `at_stop(k, t, y, S)`. The sensitivities are in the error test with
/// rtol and atol / |scales[j]| (CVodeSensEEtolerances with
/// CVodeSetSensParams' p̄ = scales; empty: 1 — the tolerances of ∂y/∂p_j
/// then act on ∂y/∂(p_j / scales[j])).
Stats forward_sensitivities(
    const System& sys, const Settings& settings, double t0, std::vector<double>& y,
    std::size_t ns, std::vector<double>& S, std::span<const double> stops,
    const std::function<void(std::size_t k, double t, const double* y, const double* S)>& at_stop,
    std::span<const double> scales = {});

/// Adjoint: forward pass stopping exactly at each of `stops` (ascending, the
/// last = t1), where `jump(k, t, y, dlambda)` returns the λ increment of
/// stop k (n entries, zero-initialised: ∂ℓ_k/∂y, plus ∂g/∂y and λ_z = 1 at
/// t1); then the backward pass. Returns λ(t0) in `lambda` (n) and
/// μ(t0) = ∫ f_pᵀ λ dt in `mu` (np); `forward`/`backward` get the counters.
void adjoint(const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
             const std::vector<double>& y0, std::span<const double> stops,
             const std::function<void(std::size_t k, double t, const double* y, double* dlambda)>& jump,
             std::vector<double>& lambda, std::vector<double>& mu, Stats& forward, Stats& backward);

/// adjoint() in its two halves, for a chain of problems each starting where
/// the one before ended (a PEtab experiment cut at switches in time): the
/// constructor runs the forward pass (adjoint()'s step 1: the λ jumps at
/// every stop, from `jump`) and keeps CVODES' checkpoints, so the next
/// problem starts from final_state() without integrating this one again;
/// backward() runs the backward pass once, later, with `lambda_end` (n
/// entries, or empty) added to the jump at the last stop — the λ the later
/// problems carry back to this one's end. `sys` must outlive the pass. The
/// memory of the checkpoints (CvodesAdjoint::steps Hermite points of 2
/// vectors each) is held until the pass is destroyed. adjoint() is this
/// with an empty lambda_end — the same bits.
class AdjointPass {
 public:
  AdjointPass(const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
              const std::vector<double>& y0, std::span<const double> stops,
              const std::function<void(std::size_t k, double t, const double* y, double* dlambda)>& jump);
  ~AdjointPass();
  AdjointPass(AdjointPass&&) noexcept;
  AdjointPass& operator=(AdjointPass&&) noexcept;
  /// y at the last stop.
  const std::vector<double>& final_state() const;
  /// The forward pass's counters (checkpoints too).
  const Stats& forward() const;
  /// λ(t0) into `lambda` (n), μ(t0) into `mu` (np), counters into `backward`.
  void backward(std::span<const double> lambda_end, std::vector<double>& lambda,
                std::vector<double>& mu, Stats& backward);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The matrix the backend assembles for `solver` (resolved as
/// resolve_linear_solver does) at (t, y): f_y, or −f_yᵀ when `backward` —
/// through the same SUNMatrix and fill routine the Newton iterations use —
/// returned as a dense column-major n × n array. For tests and debugging;
/// `resolved` (optional) receives the solver actually used.
std::vector<double> assembled_jacobian(const System& sys, CvodesLinearSolver solver, bool backward,
                                       double t, const double* y,
                                       CvodesLinearSolver* resolved = nullptr);
/// The Newton matrix I − γ J the backend hands its linear solver at
/// (t, y), J as assembled_jacobian's: dense and band by CVODES' own
/// SUNMatScaleAddI on that matrix, sparse by the backend's linear-system
/// function (which CVODES calls in place of its copy and SUNMatScaleAddI).
/// Dense column-major n × n. For tests and debugging.
std::vector<double> assembled_newton_matrix(const System& sys, CvodesLinearSolver solver,
                                            bool backward, double gamma, double t,
                                            const double* y);

/// Second-order adjoint (Hessian–vector product H v; needs tangent_rhs,
/// second_order_vjp and vjp). Forward pass with the sensitivity s along v
/// (CVodeSensInit, one direction, s(t0) = `s0`; staggered corrector, s
/// outside the error test, so the forward steps are those of `adjoint`),
/// stored with the checkpoints; at each stop `jump(k, t, y, s, dlambda,
/// dLambda)` returns the increments of λ and Λ (n each, zero-initialised).
/// Backward: problem 1 is `adjoint`'s λ/μ problem (the gradient, same
/// steps); problem 2 (CVodeInitBS/CVodeQuadInitBS: it reads s) carries
/// [λ; Λ] (2n) with the quadrature ν:
///     Λ' = −f_yᵀΛ − (f_yy[s] + f_yp[v_p])ᵀλ,    ν' = −f_pᵀΛ − (f_py[s] + f_pp[v_p])ᵀλ,
/// restarted at every stop like problem 1. Returns λ(t0), μ(t0) (as
/// `adjoint`), Λ(t0) in `Lambda` (n) and ν(t0) in `nu` (np).
void second_order_adjoint(
    const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
    const std::vector<double>& y0, const std::vector<double>& s0, std::span<const double> stops,
    const std::function<void(std::size_t k, double t, const double* y, const double* s,
                             double* dlambda, double* dLambda)>& jump,
    std::vector<double>& lambda, std::vector<double>& mu, std::vector<double>& Lambda,
    std::vector<double>& nu, Stats& forward, Stats& backward);

/// Settings from IntegratorOptions (atol per state, or the scalar for all).
Settings settings_from(const IntegratorOptions& options, std::size_t n);

}  // namespace cvodes
}  // namespace costate::ode

// ---- the compiled entry points on an ode::System (src/ode/cvodes*.cpp) -------
#include "costate/ode/problem.hpp"

namespace costate::ode {
class System;
struct GradientResult;

namespace cvodes {

/// The cvodes::System of an ode::System at fixed parameters p: every
/// callback a derivative of the System (compiled once,
/// src/ode/cvodes_system.cpp; the per-model part is make_system):
///   - rhs: System::rhs;
///   - jacobian ∂f/∂x (dense, column-major n_x × n_x, the running cost's z
///     column zero): ⌈n/8⌉ passes of the System's model on ad::Dual<double, 8>;
///   - the band/KLU structure (when `solver` may need it: band, sparse, or
///     automatic with ≥ kAutomaticDenseLimit states): the pattern of ∂f/∂x
///     from System::sparsity at (t0, x0) plus the diagonal, in CSC, its
///     columns coloured; values by ⌈colours/8⌉ Dual passes;
///   - sensitivity_rhs f_x s_j + f_p e_j: a tangents-only ode::Linearization
///     (jvp_many, 8 directions per Dual pass);
///   - vjp f_xᵀλ, f_pᵀλ: an ode::Linearization (the System's strategy:
///     dense [f_y | f_p], coloured sparse, or a tape), kept while (t, x)
///     does not change — the backward right-hand side and the quadrature are
///     evaluated at the same point in turn.
/// `system` and the Binding must outlive every use of system(); the
/// callbacks refer to the Binding (not copyable, not movable).
class Binding {
 public:
  Binding(const ode::System& system, std::span<const double> p, Method method,
          CvodesLinearSolver solver, double t0, std::span<const double> x0);
  ~Binding();
  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;

  const cvodes::System& system() const;
  cvodes::System& system();
  /// Colours of the detected ∂f/∂x structure (0 without a structure).
  int colours() const;
  /// ∂f/∂x at (t, x), column-major n_x × n_x (the jacobian callback).
  void jacobian(double t, const double* x, double* jac);
  std::int64_t jacobian_evaluations() const;
  std::int64_t vjp_evaluations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cvodes

namespace detail {

/// The cvodes_bdf / cvodes_adams branch of ode::integrate on a System
/// without objective terms: outputs by CVODES' interpolant (landing on them
/// with options.stop_at_outputs), never stepping past t1.
Solution integrate_cvodes(const System& system, std::span<const double> y0,
                          std::span<const double> p, double t0, double t1,
                          const IntegratorOptions& options, std::span<const double> outputs);

/// ode::gradient with CvodesForward (`adjoint == nullptr`) or CvodesAdjoint
/// on the System of the model and the objective (see the file comment).
GradientResult cvodes_gradient(const System& system, std::span<const double> y0,
                               std::span<const double> p, double t0, double t1,
                               const CvodesAdjoint* adjoint, IntegratorOptions options);
/// The same for a model and an objective: builds their System and calls the
/// above (defined in detail/cvodes_gradient.hpp, which gradient.hpp includes
/// at its end).
template <Model M, class O>
GradientResult cvodes_gradient(const Problem<M>& problem, const O& objective,
                               const CvodesAdjoint* adjoint, IntegratorOptions options);

/// CvodesAdjoint on a System without events, in two halves: the forward
/// pass now, PendingCvodesGradient::finish the backward pass (PendingGradient
/// is the public face; cvodes_gradient without events is this, finished at
/// once). `system` must outlive the result.
struct PendingCvodesGradient;
std::unique_ptr<PendingCvodesGradient> begin_cvodes_gradient(const System& system,
                                                             std::span<const double> y0,
                                                             std::span<const double> p, double t0,
                                                             double t1, const CvodesAdjoint& adjoint,
                                                             IntegratorOptions options);
}  // namespace detail

/// A CvodesAdjoint gradient whose backward pass waits, for a chain of
/// problems each starting where the one before ended (a PEtab experiment
/// cut at switches in time): made, it runs the forward pass and keeps
/// CVODES' checkpoints; end_state() is y(t1), from which the next problem
/// starts, so no problem is integrated twice; finish(λ_end), called once,
/// later problems first, runs the backward pass for the objective
/// J + λ_endᵀ y(t1) — λ_end the later problems' dJ/dy(t1) — and returns
/// what ode::gradient returns for it, except that `objective` is J alone.
/// Models without events (their adjoint restarts at every instant and
/// takes ode::gradient). The checkpoints' memory (CvodesAdjoint::steps
/// Hermite points of 2 n-vectors) is held until finish or destruction.
/// Made by begin_gradient.
class PendingGradient {
 public:
  /// `keep` holds what `system` reads by reference (its model and
  /// objective: make_system), for as long as the pending gradient lives.
  PendingGradient(std::shared_ptr<const void> keep, System system, std::span<const double> y0,
                  std::span<const double> p, double t0, double t1, const CvodesAdjoint& adjoint,
                  const IntegratorOptions& options);
  ~PendingGradient();
  PendingGradient(PendingGradient&&) noexcept;
  PendingGradient& operator=(PendingGradient&&) noexcept;
  /// y(t1): the forward pass's state at the last stop (n entries).
  const std::vector<double>& end_state() const;
  /// The forward pass's accepted steps.
  std::int64_t forward_steps() const;
  /// The backward pass (once); `lambda_end` has n entries or none.
  GradientResult finish(std::span<const double> lambda_end = {});

 private:
  std::shared_ptr<const void> keep_;
  std::unique_ptr<System> system_;
  std::unique_ptr<detail::PendingCvodesGradient> run_;
};

/// PendingGradient for a model and an objective (as ode::gradient with
/// CvodesAdjoint; defined in detail/cvodes_gradient.hpp).
template <Model M, class O>
PendingGradient begin_gradient(const Problem<M>& problem, const O& objective,
                               const CvodesAdjoint& adjoint, const IntegratorOptions& options);

namespace detail {

/// Seeded directions for cvodes_observed_sensitivities: `ns` ≥ np
/// directions, direction j < np moving parameter j (its right-hand side
/// f_y s_j + ∂f/∂p_j) and every later one only the initial state
/// (f_y s_j); `S0` (n × ns, column-major) their initial tangents
/// ∂y0/∂(direction j). So a caller that differentiates with respect to a
/// few quantities θ on which y0 and p depend carries |θ| directions, not
/// np + n: seeding S0 = ∂y0/∂θ (AMICI's sx0) replaces the chain rule
/// through ∂y/∂y0 after the solve. `scales` (ns or empty) as in
/// cvodes::forward_sensitivities.
struct CvodesSeed {
  std::size_t ns = 0;
  std::vector<double> S0;
  std::vector<double> scales;
};

/// The states and their forward sensitivities (CVODES; without `seed`
/// np + n directions: parameters then initial states, S0 = [0; I]) at the
/// observation times `times` (ascending, in (t0, t1]; the integrator lands
/// on each): states (K × n, row-major) and tangents (K × n × ns, row-major)
/// of the model states. For the calibration's residual Jacobian with
/// cvodes_bdf / cvodes_adams (sensitivity_matrix.hpp) and petab::evaluate's
/// forward-sensitivity gradient and Fisher information (seeded).
struct CvodesObserved {
  std::vector<double> states, tangents;
  std::size_t ns = 0;  ///< directions
  Summary summary;
};
CvodesObserved cvodes_observed_sensitivities(const System& system, std::span<const double> y0,
                                             std::span<const double> p, double t0,
                                             std::span<const double> times,
                                             IntegratorOptions options,
                                             const CvodesSeed* seed = nullptr);

}  // namespace detail
}  // namespace costate::ode
