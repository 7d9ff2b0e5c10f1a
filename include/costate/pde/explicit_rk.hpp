#pragma once
/// \file
/// pde::ExplicitRkIntegrator — explicit Runge–Kutta time stepping of a
/// distributed stencil model (rk4; ssp_rk3, Shu–Osher's strong-stability-
/// preserving RK3), with the discrete adjoint, forward sensitivities and
/// the second-order adjoint under MPI: the interface of ThetaIntegrator
/// (pde::TimeIntegrator, integrator.hpp), the tableaux of the ODE steppers
/// (ode::explicit_tableau, ode::ssp_rk3_tableau: one table).
///
/// Step n → n + 1 (fixed step h, tableau (a, b, c) strictly lower
/// triangular, stages j = 1 … s):
///     Y_j = y_n + h Σ_{k<j} a_jk K_k,   K_j = f(t_n + c_j h, Y_j),
///     y_{n+1} = y_n + h Σ_j b_j K_j.
/// No linear solves: each step costs s right-hand sides.
///
/// Discrete adjoint of the step (the recurrences of ode::ExplicitRkScheme,
/// scheme.hpp), from K̄_j = h b_j λ (λ = ȳ_{n+1}), for j = s … 1:
///     Ȳ_j = J(Y_j)ᵀ K̄_j,   ā += f_a(Y_j)ᵀ K̄_j,   q̄ += f_q(Y_j)ᵀ K̄_j,
///     K̄_k += h a_jk Ȳ_j  (k < j),
/// then λ_n = λ + Σ_j Ȳ_j. J(Y_j)ᵀ K̄_j is Matrix::mult_transpose on the
/// coloured Jacobian at the stage (assembled once for a model linear in
/// the state), the parameter products one Operator::vjp_add per stage. A
/// reverse step recomputes its stages from y_n (s right-hand sides), so it
/// depends only on the snapshot it starts from: every checkpoint schedule
/// of ode::reverse_sweep gives the same bits (detail::SweepSnapshots, the
/// θ integrator's adapter: RAM, per-rank or shared parallel HDF5 disk).
///
/// Forward sensitivities (tangent) along δ = (δa, δq, δy_0), the same
/// stages differentiated:
///     Ẏ_j = δy_n + h Σ_{k<j} a_jk K̇_k,   K̇_j = J(Y_j) Ẏ_j + f_a δa + f_q δq
///     (one Dual pass, Operator::jvp_total),   δy_{n+1} = δy_n + h Σ_j b_j K̇_j.
///
/// Second-order adjoint (hessian_vector): the forward pass carries (y_n,
/// δy_n) (snapshots hold both), the reverse pass differentiates the adjoint
/// recurrence along the direction: from K̄_j = h b_j λ, δK̄_j = h b_j δλ,
/// for j = s … 1, at (t_j, Y_j) with Ẏ_j,
///     Ȳ_j  = J_jᵀ K̄_j,            δȲ_j = J_jᵀ δK̄_j + D_u(j),
///     p̄   += f_p,jᵀ K̄_j,          δp̄  += f_p,jᵀ δK̄_j + D_p(j),
///     K̄_k += h a_jk Ȳ_j,          δK̄_k += h a_jk δȲ_j          (k < j),
/// then λ_n = λ + Σ Ȳ_j, δλ_n = δλ + Σ δȲ_j, with D_x(j) = (∂²(K̄_jᵀf)/∂x∂u)
/// Ẏ_j + (∂²(K̄_jᵀf)/∂x∂p) δp — all of a stage in one
/// Operator::vjp_tangent_add (weight K̄_j, its tangent δK̄_j). Seeds λ_l =
/// ∇J(y_l), δλ_l = ∇²J(y_l) δy_l; then H v = (δā, δq̄, δλ_0). Gauss–Newton
/// drops every D term (and λ with them): δλ goes back through the
/// first-order adjoint steps above alone, Sᵀ ∇²J S v.
///
/// Stability: an explicit method is stable for the linearized problem when
/// h λ lies in its region for every eigenvalue λ of J; on the negative real
/// axis that is h ρ(J) ≤ 2.7853 (rk4) or 2.5127 (ssp_rk3; every 3-stage
/// order-3 method has the same region). stability() estimates ρ(J) at
/// (t0, y_0) by power iteration on Jacobian–vector products (a lower bound
/// for a normal J: an estimate, not a guarantee; nonlinear problems change
/// J as they run); the CLI warns when dt exceeds the limit it gives.
///
/// Collective over the grid's communicator. Determinism: no Krylov solves,
/// rank-ordered reductions: a gradient is bitwise the same on every run
/// with the same ranks; across rank counts it agrees to round-off (ghost
/// sums in another order). Limitations: fixed steps; terminal objectives;
/// no ThetaLinearization (the PDE inversion, `costate calibrate`, runs the
/// θ-method).

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/tableaux.hpp"
#include "costate/pde/integrator.hpp"
#include "costate/pde/matrix.hpp"

namespace costate::pde {

enum class ExplicitRkMethod {
  Rk4,     ///< "rk4": classical Runge–Kutta, order 4
  SspRk3,  ///< "ssp_rk3": Shu–Osher strong-stability-preserving RK, order 3
};
std::string to_string(ExplicitRkMethod m);
/// "rk4" | "ssp_rk3"; anything else throws costate::Error listing both.
ExplicitRkMethod explicit_rk_method_from_string(const std::string& name);
/// True for the names explicit_rk_method_from_string takes.
bool is_explicit_rk_method(const std::string& name);
/// The tableau (ode::explicit_tableau(RK4), ode::ssp_rk3_tableau()).
ode::ButcherTableau tableau(ExplicitRkMethod m);
/// Classical order: 4, 3.
int order(ExplicitRkMethod m);
/// Length of the method's stability interval on the negative real axis,
/// β with |R(z)| ≤ 1 on [−β, 0]: 2.7853 (rk4), 2.5127 (ssp_rk3).
double real_stability_limit(ExplicitRkMethod m);

struct ExplicitRkOptions {
  ExplicitRkMethod method = ExplicitRkMethod::Rk4;
  double t0 = 0.0;
  double dt = 1e-3;         ///< fixed step h
  std::int64_t steps = 10;  ///< number of steps
  /// Multilevel's disk level in ONE parallel HDF5 file (as ThetaOptions).
  bool shared_disk_checkpoints = false;
  /// Called with the step index n at the start of every step() (forward
  /// steps, recomputations) and of every reverse step, on every rank
  /// (as ThetaOptions::on_step: an interrupt check; it may throw).
  std::function<void(std::int64_t)> on_step = {};
  /// Throws costate::Error naming the field, its value and the rule.
  void validate() const;
};

/// What ExplicitRkIntegrator::stability estimated.
struct ExplicitRkStability {
  double spectral_radius = 0.0;  ///< ρ(J) at (t0, y_0), power-iteration estimate
  double limit = 0.0;            ///< real_stability_limit(method)
  double max_stable_dt = std::numeric_limits<double>::infinity();  ///< limit / ρ
  int iterations = 0;            ///< Jacobian–vector products taken
};

/// Empty when options.dt ≤ s.max_stable_dt; else a warning naming `key`
/// (the step's input key or option name), the step, the estimate of ρ(J)
/// and the largest stable step.
std::string stability_warning(const ExplicitRkOptions& options, const ExplicitRkStability& s,
                              const std::string& key = "pde::ExplicitRkOptions::dt");

template <class Model, int Batch = default_batch<Model>()>
class ExplicitRkIntegrator final : public TimeIntegrator<Model, Batch> {
 public:
  using Op = Operator<Model, Batch>;

  /// `op` must outlive the integrator. Collective.
  ExplicitRkIntegrator(Op& op, const ExplicitRkOptions& options)
      : op_(op), options_(options), tab_(tableau(options.method)) {
    options_.validate();
    const Grid& g = op.grid();
    for (int j = 0; j < tab_.stages; ++j)
      for (auto* v : {&Y_, &K_, &Yd_, &Kd_, &Kbar_, &dKbar_}) v->push_back(g.create_global());
    ybar_ = g.create_global();
    dybar_ = g.create_global();
    acc_ = g.create_global();
    dacc_ = g.create_global();
  }

  const ExplicitRkOptions& options() const { return options_; }
  const ode::ButcherTableau& butcher_tableau() const { return tab_; }
  std::int64_t krylov_iterations() const override { return 0; }

  /// Advances u from t_n = t0 + n h to t_{n+1}, in place. Collective.
  void step(const GlobalVector& u, std::int64_t n) override {
    if (options_.on_step) options_.on_step(n);
    stages(u, n);
    combine(u, u, tab_.b.data(), K_, tab_.stages);
  }

  /// Integrates u from t0 over all steps, in place. Collective.
  void integrate(const GlobalVector& u) override {
    for (std::int64_t n = 0; n < options_.steps; ++n) step(u, n);
  }

  /// ρ(J(t0, y0)) by `iterations` power iterations on Operator::jvp, and
  /// the largest step real_stability_limit allows with it (file comment).
  /// Collective.
  ExplicitRkStability stability(const GlobalVector& y0, int iterations = 40) {
    const Grid& g = op_.grid();
    ExplicitRkStability out;
    out.limit = real_stability_limit(options_.method);
    GlobalVector v = g.create_global(), w = g.create_global();
    // A rough, sign-changing start (deterministic; rank-salted).
    for (std::size_t e = 0; e < v.size(); ++e)
      v[e] = std::sin(0.77 * static_cast<double>(e) + 1.3 * g.rank() + 0.3);
    double nv = std::sqrt(dot(v, v));
    if (nv == 0.0) return out;
    scale(v, 1.0 / nv, v);
    for (int it = 0; it < iterations; ++it) {
      op_.jvp(options_.t0, y0, v, w);
      ++out.iterations;
      const double nw = std::sqrt(dot(w, w));
      if (!(nw > 0.0) || !std::isfinite(nw)) break;
      out.spectral_radius = std::max(out.spectral_radius, nw);
      scale(v, 1.0 / nw, w);
    }
    if (out.spectral_radius > 0.0) out.max_stable_dt = out.limit / out.spectral_radius;
    return out;
  }

  /// J(y_l) and its gradient with respect to the parameter fields, the
  /// scalar parameters and the initial state, by the discrete adjoint with
  /// checkpoint schedule `checkpointing`. `y0` is not modified. Collective.
  ThetaGradient gradient(const GlobalVector& y0, const Objective& objective,
                         const ode::Checkpointing& checkpointing) override {
    const auto t_start = std::chrono::steady_clock::now();
    ode::validate(checkpointing);
    const Grid& g = op_.grid();
    linear_ready_ = false;  // J at the operator's current fields and parameters
    Sweep sw(*this, objective, checkpointing);
    deep_copy(sw.current, y0);
    ThetaGradient out;
    out.checkpoints = ode::reverse_sweep(checkpointing, sw, options_.steps);
    out.checkpoints.disk_snapshots = sw.snapshots.disk_writes();
    out.objective = options_.steps == 0 ? objective.evaluate(g, y0, &sw.lambda) : sw.objective_value;
    out.wrt_initial_state = sw.lambda;
    out.wrt_fields = sw.a_bar;
    out.wrt_parameters = sw.q_bar;
    out.forward_steps = sw.advances;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

  /// Forward sensitivities: J(y_l) and dJ·δ for one direction δ (file
  /// comment). `y0` is not modified. Collective; a direction of the wrong
  /// size on any rank throws costate::Error on every rank.
  ThetaTangent tangent(const GlobalVector& y0, const Objective& objective, const ThetaDirection& direction) override {
    const auto t_start = std::chrono::steady_clock::now();
    const Grid& g = op_.grid();
    detail::check_direction(op_, direction, "pde::ExplicitRkIntegrator::tangent");
    const GlobalVector* a_dot = direction.fields.size() ? &direction.fields : nullptr;
    const std::span<const double> q_dot(direction.parameters);
    ThetaTangent out;
    out.final_state = g.create_global("pde::tangent y");
    out.final_tangent = g.create_global("pde::tangent dy");
    deep_copy(out.final_state, y0);
    if (direction.initial_state.size()) deep_copy(out.final_tangent, direction.initial_state);
    for (std::int64_t n = 0; n < options_.steps; ++n) tangent_step(out.final_state, out.final_tangent, n, a_dot, q_dot);
    GlobalVector dJ = g.create_global();
    out.objective = objective.evaluate(g, out.final_state, &dJ);
    out.directional_derivative = dot(dJ, out.final_tangent);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

  /// H v for the direction v (δa, δq, δy_0; empty parts are zero) by the
  /// second-order adjoint (file comment), with checkpoint schedule
  /// `checkpointing` over the pairs (y_n, δy_n); GaussNewton gives
  /// Sᵀ ∇²J S v. Exact also returns the gradient. Every schedule gives the
  /// same bits. `y0` is not modified. Collective.
  ThetaHessianVector hessian_vector(const GlobalVector& y0, const Objective& objective,
                                    const ThetaDirection& direction, const ode::Checkpointing& checkpointing,
                                    HessianProduct product = HessianProduct::Exact) override {
    const auto t_start = std::chrono::steady_clock::now();
    ode::validate(checkpointing);
    detail::check_direction(op_, direction, "pde::ExplicitRkIntegrator::hessian_vector");
    const Grid& g = op_.grid();
    linear_ready_ = false;
    HessianSweep sw(*this, objective, direction, checkpointing, product);
    deep_copy(sw.current, y0);
    if (direction.initial_state.size()) deep_copy(sw.dcurrent, direction.initial_state);
    ThetaHessianVector out;
    out.product = product;
    out.checkpoints = ode::reverse_sweep(checkpointing, sw, options_.steps);
    out.checkpoints.disk_snapshots = sw.snapshots.disk_writes();
    if (options_.steps == 0) {
      out.objective = objective.evaluate(g, y0, &sw.lambda);
      objective.hessian_vector(g, sw.dcurrent, sw.dlambda);
    } else {
      out.objective = sw.objective_value;
    }
    out.wrt_initial_state = sw.dlambda;
    out.wrt_fields = sw.da_bar;
    out.wrt_parameters = sw.dq_bar;
    if (product == HessianProduct::Exact) {
      out.gradient_initial_state = sw.lambda;
      out.gradient_fields = sw.a_bar;
      out.gradient_parameters = sw.q_bar;
    }
    out.forward_steps = sw.advances;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

 private:
  double stage_time(std::int64_t n, int j) const {
    return options_.t0 + static_cast<double>(n) * options_.dt + tab_.c[static_cast<std::size_t>(j)] * options_.dt;
  }

  /// out = y + h Σ_{k<count} coef[k] x[k] in one kernel (zero coefficients
  /// skipped); out may be y.
  void combine(const GlobalVector& out, const GlobalVector& y, const double* coef, const std::vector<GlobalVector>& x,
               int count) const {
    double c[16];
    const GlobalVector* v[16];
    int m = 0;
    c[m] = 1.0;
    v[m++] = &y;
    for (int k = 0; k < count; ++k) {
      if (coef[k] == 0.0) continue;
      c[m] = options_.dt * coef[k];
      v[m++] = &x[static_cast<std::size_t>(k)];
    }
    linear_combination(out, std::span<const double>(c, static_cast<std::size_t>(m)),
                       std::span<const GlobalVector* const>(v, static_cast<std::size_t>(m)));
  }
  const double* row(int j) const { return tab_.a.data() + static_cast<std::size_t>(j * tab_.stages); }

  /// The stages Y_j, K_j of step n from y (kept for the reverse step).
  void stages(const GlobalVector& y, std::int64_t n) {
    for (int j = 0; j < tab_.stages; ++j) {
      const auto J = static_cast<std::size_t>(j);
      combine(Y_[J], y, row(j), K_, j);
      op_.rhs(stage_time(n, j), Y_[J], K_[J]);
    }
  }

  /// stages() and their tangents Ẏ_j, K̇_j from δy.
  void tangent_stages(const GlobalVector& y, const GlobalVector& dy, std::int64_t n, const GlobalVector* a_dot,
                      std::span<const double> q_dot) {
    stages(y, n);
    for (int j = 0; j < tab_.stages; ++j) {
      const auto J = static_cast<std::size_t>(j);
      combine(Yd_[J], dy, row(j), Kd_, j);
      op_.jvp_total(stage_time(n, j), Y_[J], &Yd_[J], a_dot, q_dot, Kd_[J]);
    }
  }

  /// (y_n, δy_n) → (y_{n+1}, δy_{n+1}) in place; y_{n+1} the bits of step().
  void tangent_step(const GlobalVector& y, const GlobalVector& dy, std::int64_t n, const GlobalVector* a_dot,
                    std::span<const double> q_dot) {
    if (options_.on_step) options_.on_step(n);
    tangent_stages(y, dy, n, a_dot, q_dot);
    combine(y, y, tab_.b.data(), K_, tab_.stages);
    combine(dy, dy, tab_.b.data(), Kd_, tab_.stages);
  }

  /// J(t, Y) assembled into J_ (once for a model linear in the state).
  void state_jacobian(double t, const GlobalVector& y) {
    if (!J_) J_ = std::make_unique<Matrix>(op_.grid());
    if constexpr (Model::linear_in_state) {
      if (linear_ready_) return;
      linear_ready_ = true;
    }
    op_.jacobian(t, y, *J_);
  }

  /// After stages(·, n): λ ← λ_n, ā += f_aᵀ…, q̄ += f_qᵀ… (file comment).
  void adjoint_stages(std::int64_t n, const GlobalVector& lambda, const GlobalVector& a_bar, std::span<double> q_bar) {
    const int s = tab_.stages;
    const double h = options_.dt;
    for (int j = 0; j < s; ++j) scale(Kbar_[static_cast<std::size_t>(j)], h * tab_.b[static_cast<std::size_t>(j)], lambda);
    deep_copy(acc_, lambda);
    for (int j = s - 1; j >= 0; --j) {
      const auto J = static_cast<std::size_t>(j);
      const double tj = stage_time(n, j);
      state_jacobian(tj, Y_[J]);
      J_->mult_transpose(Kbar_[J], ybar_);
      if constexpr (Op::kFields > 0 || Op::kScalars > 0) op_.vjp_add(tj, Y_[J], Kbar_[J], a_bar, q_bar);
      axpy(1.0, ybar_, acc_);
      for (int k = 0; k < j; ++k)
        if (const double ajk = tab_.at(j, k); ajk != 0.0) axpy(h * ajk, ybar_, Kbar_[static_cast<std::size_t>(k)]);
    }
    deep_copy(lambda, acc_);
  }

  /// After tangent_stages(·, ·, n): (λ, δλ) ← (λ_n, δλ_n) and the parameter
  /// sums and their tangents (file comment), one vjp_tangent_add per stage.
  void second_order_stages(std::int64_t n, const GlobalVector& lambda, const GlobalVector& dlambda,
                           const GlobalVector* a_dot, std::span<const double> q_dot, const GlobalVector& a_bar,
                           std::span<double> q_bar, const GlobalVector& da_bar, std::span<double> dq_bar) {
    using VD = typename Op::VjpDirection;
    using VS = typename Op::VjpSums;
    const int s = tab_.stages;
    const double h = options_.dt;
    for (int j = 0; j < s; ++j) {
      const auto J = static_cast<std::size_t>(j);
      scale(Kbar_[J], h * tab_.b[J], lambda);
      scale(dKbar_[J], h * tab_.b[J], dlambda);
    }
    deep_copy(acc_, lambda);
    deep_copy(dacc_, dlambda);
    const GlobalVector* fields_out = Op::kFields > 0 ? &a_bar : nullptr;
    const GlobalVector* dfields_out = Op::kFields > 0 ? &da_bar : nullptr;
    for (int j = s - 1; j >= 0; --j) {
      const auto J = static_cast<std::size_t>(j);
      fill(ybar_, 0.0);
      fill(dybar_, 0.0);
      op_.vjp_tangent_add(stage_time(n, j), Y_[J], Kbar_[J],
                          VD{.u_dot = &Yd_[J], .a_dot = a_dot, .q_dot = q_dot, .w_dot = &dKbar_[J]},
                          VS{.u = &ybar_, .a = fields_out, .q = q_bar}, VS{.u = &dybar_, .a = dfields_out, .q = dq_bar});
      axpy(1.0, ybar_, acc_);
      axpy(1.0, dybar_, dacc_);
      for (int k = 0; k < j; ++k)
        if (const double ajk = tab_.at(j, k); ajk != 0.0) {
          axpy(h * ajk, ybar_, Kbar_[static_cast<std::size_t>(k)]);
          axpy(h * ajk, dybar_, dKbar_[static_cast<std::size_t>(k)]);
        }
    }
    deep_copy(lambda, acc_);
    deep_copy(dlambda, dacc_);
  }

  /// The Ops object of ode::reverse_sweep (first order).
  struct Sweep {
    ExplicitRkIntegrator& in;
    const Objective& objective;
    GlobalVector current, next, lambda, a_bar;
    std::vector<double> q_bar;
    detail::SweepSnapshots snapshots;
    std::int64_t i = 0, advances = 0;
    double objective_value = 0.0;
    bool seeded = false;

    Sweep(ExplicitRkIntegrator& integrator, const Objective& obj, const ode::Checkpointing& c)
        : in(integrator), objective(obj),
          snapshots(integrator.op_.grid().comm(), integrator.op_.grid().rank(), integrator.op_.grid().owned_size(), c,
                    integrator.options_.shared_disk_checkpoints, "pde::ExplicitRkIntegrator") {
      const Grid& g = in.op_.grid();
      current = g.create_global();
      next = g.create_global();
      lambda = g.create_global();
      if constexpr (Op::kFields > 0) a_bar = in.op_.field_grid()->create_global();
      q_bar.assign(static_cast<std::size_t>(Op::kScalars), 0.0);
    }
    std::int64_t index() const { return i; }
    void advance() {
      in.step(current, i);
      ++i;
      ++advances;
    }
    void save(std::size_t slot) { snapshots.save(slot, current.span(), i); }
    void restore(std::size_t slot) { i = snapshots.restore(slot, current.span()); }
    void reverse_step() {
      if (in.options_.on_step) in.options_.on_step(i);
      in.stages(current, i);
      if (!seeded) {  // the last step: y_l from its stages, the seed λ_l = ∇J(y_l)
        in.combine(next, current, in.tab_.b.data(), in.K_, in.tab_.stages);
        objective_value = objective.evaluate(in.op_.grid(), next, &lambda);
        seeded = true;
      }
      in.adjoint_stages(i, lambda, a_bar, q_bar);
    }
  };

  /// The Ops object of ode::reverse_sweep for the second-order adjoint: the
  /// swept state is the pair (y_n, δy_n), a snapshot holds both.
  struct HessianSweep {
    ExplicitRkIntegrator& in;
    const Objective& objective;
    const GlobalVector* a_dot;
    std::span<const double> q_dot;
    bool exact;
    GlobalVector current, dcurrent, next, dnext, lambda, dlambda, a_bar, da_bar;
    std::vector<double> q_bar, dq_bar, pack;
    detail::SweepSnapshots snapshots;
    std::int64_t i = 0, advances = 0;
    double objective_value = 0.0;
    bool seeded = false;

    HessianSweep(ExplicitRkIntegrator& integrator, const Objective& obj, const ThetaDirection& d,
                 const ode::Checkpointing& c, HessianProduct product)
        : in(integrator), objective(obj), a_dot(d.fields.size() ? &d.fields : nullptr), q_dot(d.parameters),
          exact(product == HessianProduct::Exact),
          snapshots(integrator.op_.grid().comm(), integrator.op_.grid().rank(),
                    2 * integrator.op_.grid().owned_size(), c, integrator.options_.shared_disk_checkpoints,
                    "pde::ExplicitRkIntegrator") {
      const Grid& g = in.op_.grid();
      for (GlobalVector* v : {&current, &dcurrent, &next, &dnext, &lambda, &dlambda}) *v = g.create_global();
      if constexpr (Op::kFields > 0) {
        a_bar = in.op_.field_grid()->create_global();
        da_bar = in.op_.field_grid()->create_global();
      }
      q_bar.assign(static_cast<std::size_t>(Op::kScalars), 0.0);
      dq_bar.assign(static_cast<std::size_t>(Op::kScalars), 0.0);
      pack.resize(2 * g.owned_size());
    }
    std::int64_t index() const { return i; }
    void advance() {
      in.tangent_step(current, dcurrent, i, a_dot, q_dot);
      ++i;
      ++advances;
    }
    void save(std::size_t slot) {
      const std::size_t n = current.size();
      for (std::size_t e = 0; e < n; ++e) {
        pack[e] = current[e];
        pack[n + e] = dcurrent[e];
      }
      snapshots.save(slot, pack, i);
    }
    void restore(std::size_t slot) {
      i = snapshots.restore(slot, pack);
      const std::size_t n = current.size();
      for (std::size_t e = 0; e < n; ++e) {
        current[e] = pack[e];
        dcurrent[e] = pack[n + e];
      }
    }
    void reverse_step() {
      if (in.options_.on_step) in.options_.on_step(i);
      const Grid& g = in.op_.grid();
      in.tangent_stages(current, dcurrent, i, a_dot, q_dot);
      if (!seeded) {
        in.combine(next, current, in.tab_.b.data(), in.K_, in.tab_.stages);
        in.combine(dnext, dcurrent, in.tab_.b.data(), in.Kd_, in.tab_.stages);
        objective_value = objective.evaluate(g, next, &lambda);
        objective.hessian_vector(g, dnext, dlambda);
        seeded = true;
      }
      if (exact)
        in.second_order_stages(i, lambda, dlambda, a_dot, q_dot, a_bar, q_bar, da_bar, dq_bar);
      else
        in.adjoint_stages(i, dlambda, da_bar, dq_bar);
    }
  };

  Op& op_;
  ExplicitRkOptions options_;
  ode::ButcherTableau tab_;
  /// Made at the first adjoint step (forward runs need none); for a model
  /// linear in the state assembled once per gradient / hessian_vector call.
  std::unique_ptr<Matrix> J_;
  bool linear_ready_ = false;
  std::vector<GlobalVector> Y_, K_, Yd_, Kd_, Kbar_, dKbar_;
  GlobalVector ybar_, dybar_, acc_, dacc_;
};

}  // namespace costate::pde
