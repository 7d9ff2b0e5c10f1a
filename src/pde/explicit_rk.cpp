// pde::ExplicitRkStepper: explicit Runge–Kutta steps, forward
// sensitivities, discrete adjoint and second-order adjoint (explicit_rk.hpp
// documents them), compiled once over a pde::OperatorView; and the
// methods' names, tableaux and stability limits.
#include "costate/pde/explicit_rk.hpp"

#include <chrono>
#include <cmath>
#include <span>
#include <sstream>

#include "sweep.hpp"

namespace costate::pde {

std::string to_string(ExplicitRkMethod m) { return m == ExplicitRkMethod::Rk4 ? "rk4" : "ssp_rk3"; }

bool is_explicit_rk_method(const std::string& name) { return name == "rk4" || name == "ssp_rk3"; }

ExplicitRkMethod explicit_rk_method_from_string(const std::string& name) {
  if (name == "rk4") return ExplicitRkMethod::Rk4;
  if (name == "ssp_rk3") return ExplicitRkMethod::SspRk3;
  throw Error("pde::ExplicitRkMethod: unknown method \"" + name + "\"; expected rk4 or ssp_rk3");
}

ode::ButcherTableau tableau(ExplicitRkMethod m) {
  return m == ExplicitRkMethod::Rk4 ? ode::explicit_tableau(ode::Method::RK4) : ode::ssp_rk3_tableau();
}

int order(ExplicitRkMethod m) { return m == ExplicitRkMethod::Rk4 ? 4 : 3; }

double real_stability_limit(ExplicitRkMethod m) {
  // β where |R(−β)| = 1 for R(z) = Σ_{k≤s} z^k/k!, the stability polynomial
  // of every s-stage order-s method (s ≤ 4: the same for rk4 and any
  // 3-stage RK3, ssp_rk3 among them), by bisection on [2, 3] (|R| ≤ 1 on
  // [−2, 0] for s = 3, 4; > 1 at −3).
  const int s = m == ExplicitRkMethod::Rk4 ? 4 : 3;
  auto R = [s](double z) {
    double term = 1.0, sum = 1.0;
    for (int k = 1; k <= s; ++k) {
      term *= z / k;
      sum += term;
    }
    return sum;
  };
  double lo = 2.0, hi = 3.0;  // |R(−β)| ≤ 1 at 2, > 1 at 3
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (std::abs(R(-mid)) <= 1.0) lo = mid;
    else hi = mid;
  }
  return lo;
}

std::string stability_warning(const ExplicitRkOptions& options, const ExplicitRkStability& s, const std::string& key) {
  if (!(options.dt > s.max_stable_dt)) return {};
  std::ostringstream m;
  m.precision(4);
  m << key << " = " << options.dt << " is above the stability limit of " << to_string(options.method)
    << ": dt * rho(J) = " << options.dt * s.spectral_radius << " > " << s.limit << " (rho(J) ~ " << s.spectral_radius
    << ", a power-iteration estimate at t0), so the fastest modes grow at every step; use dt <= "
    << s.max_stable_dt << " (steps >= "
    << static_cast<long long>(std::ceil(static_cast<double>(options.steps) * options.dt / s.max_stable_dt))
    << " for the same end time) or an implicit method (crank_nicolson, backward_euler)";
  return m.str();
}

void ExplicitRkOptions::validate() const {
  COSTATE_CHECK(std::isfinite(dt) && dt > 0.0,
                "pde::ExplicitRkOptions::dt = " << detail::format_value(dt) << " must be > 0");
  COSTATE_CHECK(std::isfinite(t0), "pde::ExplicitRkOptions::t0 = " << detail::format_value(t0) << " must be finite");
  COSTATE_CHECK(steps >= 0, "pde::ExplicitRkOptions::steps = " << steps << " must be >= 0");
}

class ExplicitRkStepper::Impl {
 public:
  Impl(OperatorView& op, const ExplicitRkOptions& options)
      : op_(op), fields_(op.fields()), scalars_(op.scalars()), linear_(op.linear_in_state()), options_(options),
        tab_(tableau(options.method)) {
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
  std::int64_t krylov_iterations() const { return 0; }

  /// Advances u from t_n = t0 + n h to t_{n+1}, in place. Collective.
  void step(const GlobalVector& u, std::int64_t n) {
    if (options_.on_step) options_.on_step(n);
    stages(u, n);
    combine(u, u, tab_.b.data(), K_, tab_.stages);
  }

  /// Integrates u from t0 over all steps, in place. Collective.
  void integrate(const GlobalVector& u) {
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
                         const ode::Checkpointing& checkpointing) {
    const auto t_start = std::chrono::steady_clock::now();
    ode::validate(checkpointing);
    const Grid& g = op_.grid();
    linear_ready_ = false;  // J at the operator's current fields and parameters
    Sweep sw(*this, objective, checkpointing);
    deep_copy(sw.current, y0);
    ThetaGradient out;
    out.checkpoints = detail::shown_reverse_sweep(checkpointing, sw, options_.steps, "PDE adjoint sweep");
    out.checkpoints.disk_snapshots = sw.snapshots.disk_writes();
    sw.into(out, objective, g, y0, options_.steps);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

  /// Forward sensitivities: J(y_l) and dJ·δ for one direction δ (file
  /// comment). `y0` is not modified. Collective; a direction of the wrong
  /// size on any rank throws costate::Error on every rank.
  ThetaTangent tangent(const GlobalVector& y0, const Objective& objective, const ThetaDirection& direction) {
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
                                    HessianProduct product = HessianProduct::Exact) {
    const auto t_start = std::chrono::steady_clock::now();
    ode::validate(checkpointing);
    detail::check_direction(op_, direction, "pde::ExplicitRkIntegrator::hessian_vector");
    const Grid& g = op_.grid();
    linear_ready_ = false;
    HessianSweep sw(*this, objective, direction, checkpointing, product);
    ThetaHessianVector out =
        detail::run_second_order_sweep(sw, g, y0, objective, direction, checkpointing, options_.steps, product);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

 public:  // the sweeps (below) and ExplicitRkStepper
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
    if (linear_) {
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
      if (fields_ > 0 || scalars_ > 0) op_.vjp_add(tj, Y_[J], Kbar_[J], a_bar, q_bar);
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
    using VD = VjpDirection;
    using VS = VjpSums;
    const int s = tab_.stages;
    const double h = options_.dt;
    for (int j = 0; j < s; ++j) {
      const auto J = static_cast<std::size_t>(j);
      scale(Kbar_[J], h * tab_.b[J], lambda);
      scale(dKbar_[J], h * tab_.b[J], dlambda);
    }
    deep_copy(acc_, lambda);
    deep_copy(dacc_, dlambda);
    const GlobalVector* fields_out = fields_ > 0 ? &a_bar : nullptr;
    const GlobalVector* dfields_out = fields_ > 0 ? &da_bar : nullptr;
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
  struct Sweep : detail::AdjointSums {
    Impl& in;
    const Objective& objective;
    GlobalVector current, next;
    detail::SweepSnapshots snapshots;
    std::int64_t i = 0;

    Sweep(Impl& integrator, const Objective& obj, const ode::Checkpointing& c)
        : AdjointSums(integrator.op_), in(integrator), objective(obj),
          snapshots(integrator.op_.grid().comm(), integrator.op_.grid().rank(), integrator.op_.grid().owned_size(), c,
                    integrator.options_.shared_disk_checkpoints, "pde::ExplicitRkIntegrator") {
      const Grid& g = in.op_.grid();
      current = g.create_global();
      next = g.create_global();
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
  struct HessianSweep final : detail::SecondOrderSweep {
    Impl& in;
    const Objective& objective;
    const GlobalVector* a_dot;
    std::span<const double> q_dot;
    bool exact;
    GlobalVector next, dnext;

    HessianSweep(Impl& integrator, const Objective& obj, const ThetaDirection& d,
                 const ode::Checkpointing& c, HessianProduct product)
        : SecondOrderSweep(integrator.op_, c, integrator.options_.shared_disk_checkpoints,
                           "pde::ExplicitRkIntegrator"),
          in(integrator), objective(obj), a_dot(d.fields.size() ? &d.fields : nullptr), q_dot(d.parameters),
          exact(product == HessianProduct::Exact) {
      const Grid& g = in.op_.grid();
      for (GlobalVector* v : {&next, &dnext}) *v = g.create_global();
    }
    void advance() override {
      in.tangent_step(current, dcurrent, i, a_dot, q_dot);
      ++i;
      ++advances;
    }
    void reverse_step() override {
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

  std::unique_ptr<OperatorView> owned_;  ///< the view, when the stepper owns it
  OperatorView& op_;
  const int fields_, scalars_;
  const bool linear_;
  ExplicitRkOptions options_;
  ode::ButcherTableau tab_;
  /// Made at the first adjoint step (forward runs need none); for a model
  /// linear in the state assembled once per gradient / hessian_vector call.
  std::unique_ptr<Matrix> J_;
  bool linear_ready_ = false;
  std::vector<GlobalVector> Y_, K_, Yd_, Kd_, Kbar_, dKbar_;
  GlobalVector ybar_, dybar_, acc_, dacc_;
};

ExplicitRkStepper::ExplicitRkStepper(OperatorView& op, const ExplicitRkOptions& options)
    : impl_(std::make_unique<Impl>(op, options)) {}
ExplicitRkStepper::ExplicitRkStepper(std::unique_ptr<OperatorView> op, const ExplicitRkOptions& options)
    : impl_(std::make_unique<Impl>(*op, options)) {
  impl_->owned_ = std::move(op);
}
ExplicitRkStepper::~ExplicitRkStepper() = default;

const ExplicitRkOptions& ExplicitRkStepper::options() const { return impl_->options(); }
const ode::ButcherTableau& ExplicitRkStepper::butcher_tableau() const { return impl_->butcher_tableau(); }
void ExplicitRkStepper::step(const GlobalVector& u, std::int64_t n) { impl_->step(u, n); }
void ExplicitRkStepper::integrate(const GlobalVector& u) { impl_->integrate(u); }
ExplicitRkStability ExplicitRkStepper::stability(const GlobalVector& y0, int iterations) {
  return impl_->stability(y0, iterations);
}
ThetaGradient ExplicitRkStepper::gradient(const GlobalVector& y0, const Objective& objective,
                                          const ode::Checkpointing& checkpointing) {
  return impl_->gradient(y0, objective, checkpointing);
}
ThetaTangent ExplicitRkStepper::tangent(const GlobalVector& y0, const Objective& objective,
                                        const ThetaDirection& direction) {
  return impl_->tangent(y0, objective, direction);
}
ThetaHessianVector ExplicitRkStepper::hessian_vector(const GlobalVector& y0, const Objective& objective,
                                                     const ThetaDirection& direction,
                                                     const ode::Checkpointing& checkpointing, HessianProduct product) {
  return impl_->hessian_vector(y0, objective, direction, checkpointing, product);
}

}  // namespace costate::pde
