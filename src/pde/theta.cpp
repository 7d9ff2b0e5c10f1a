// pde::ThetaStepper: the θ-method's steps, forward sensitivities, discrete
// adjoint and second-order adjoint (theta.hpp documents them), compiled
// once over a pde::OperatorView; pde::ThetaIntegrator<Model> only makes the
// model's view.
#include "costate/pde/theta.hpp"

#include <chrono>
#include <cmath>
#include <span>
#include <string>

#include "sweep.hpp"

namespace costate::pde {

class ThetaStepper::Impl {
 public:
  Impl(OperatorView& op, const ThetaOptions& options)
      : op_(op), fields_(op.fields()), scalars_(op.scalars()), linear_(op.linear_in_state()),
        autonomous_(op.autonomous()), options_(options), J_(op.grid()), A_(op.grid()),
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
    if (options_.on_step) options_.on_step(n);
    const double h = options_.dt, th = options_.theta;
    const double tn = options_.t0 + static_cast<double>(n) * h, tn1 = tn + h;
    if (linear_) {
      ensure_linear_operator();
      // One (exact) Newton step from z = y_n:
      //   δ = A⁻¹ (h(1−θ) f(t_n, y_n) + hθ f(t_{n+1}, y_n)),  A = I − hθJ;
      // for an autonomous model the two evaluations are one: δ = A⁻¹ h f(y_n).
      op_.rhs(tn, u, f_);
      if (autonomous_) {
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
    out.checkpoints = detail::shown_reverse_sweep(checkpointing, sw, options_.steps, "PDE adjoint sweep");
    out.checkpoints.disk_snapshots = sw.snapshots.disk_writes();
    sw.into(out, objective, g, y0, options_.steps);
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
    check_direction(direction, "tangent");
    const GlobalVector* a_dot = direction.fields.size() ? &direction.fields : nullptr;
    const std::span<const double> q_dot(direction.parameters);
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
    for (std::int64_t n = 0; n < options_.steps; ++n) tangent_its += tangent_step(y, dy, n, a_dot, q_dot, rhs, tmp);
    GlobalVector dJ = g.create_global();
    out.objective = objective.evaluate(g, y, &dJ);
    out.directional_derivative = dot(dJ, dy);
    out.krylov_iterations = krylov_iterations_ - its0;
    out.tangent_krylov_iterations = tangent_its;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

  /// H v for the direction v (ThetaDirection: δa, δq, δy_0; empty parts
  /// are zero) by the second-order adjoint (file comment), with checkpoint
  /// schedule `checkpointing` over the pairs (y_n, δy_n); `product`
  /// GaussNewton gives Sᵀ ∇²J S v instead. Exact also returns the gradient
  /// (bitwise the same for every schedule, as H v is). `y0` is not
  /// modified. Collective; a direction of the wrong size on any rank
  /// throws costate::Error on every rank.
  ThetaHessianVector hessian_vector(const GlobalVector& y0, const Objective& objective,
                                    const ThetaDirection& direction, const ode::Checkpointing& checkpointing,
                                    HessianProduct product = HessianProduct::Exact) {
    const auto t_start = std::chrono::steady_clock::now();
    ode::validate(checkpointing);
    check_direction(direction, "hessian_vector");
    const Grid& g = op_.grid();
    HessianSweep sw(*this, objective, direction, checkpointing, product);
    const std::int64_t its0 = krylov_iterations_;
    ThetaHessianVector out =
        detail::run_second_order_sweep(sw, g, y0, objective, direction, checkpointing, options_.steps, product);
    out.tangent_krylov_iterations = sw.tangent_iterations;
    out.adjoint_krylov_iterations = sw.adjoint_iterations;
    out.krylov_iterations = krylov_iterations_ - its0;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

  /// The trajectory and first-order adjoints at the current point for
  /// hessian_vector(const ThetaLinearization&, …), and the gradient there
  /// (the same bits as gradient() with StoreAll). Collective.
  ThetaLinearization linearize(const GlobalVector& y0, const Objective& objective) {
    const auto t_start = std::chrono::steady_clock::now();
    const Grid& g = op_.grid();
    const std::int64_t l = options_.steps, its0 = krylov_iterations_;
    ThetaLinearization lin;
    lin.objective = objective;
    lin.states.resize(static_cast<std::size_t>(l + 1));
    lin.adjoints.resize(static_cast<std::size_t>(l));
    lin.states[0] = g.create_global();
    deep_copy(lin.states[0], y0);
    for (std::int64_t n = 0; n < l; ++n) {
      const auto N = static_cast<std::size_t>(n);
      lin.states[N + 1] = g.create_global();
      deep_copy(lin.states[N + 1], lin.states[N]);
      step(lin.states[N + 1], n);
    }
    Sweep sw(*this, lin.objective, ode::StoreAll{});
    for (std::int64_t n = l - 1; n >= 0; --n) {
      const auto N = static_cast<std::size_t>(n);
      deep_copy(sw.current, lin.states[N]);
      if (n == l - 1) {
        deep_copy(sw.cached, lin.states[N + 1]);
        sw.cached_index = l;
      }
      sw.i = n;
      sw.reverse_step();
      lin.adjoints[N] = g.create_global();
      deep_copy(lin.adjoints[N], sw.mu);
    }
    ThetaGradient& out = lin.gradient;
    sw.into(out, lin.objective, g, y0, l);
    out.checkpoints.steps = l;
    out.forward_steps = l;
    out.adjoint_krylov_iterations = sw.adjoint_iterations;
    out.krylov_iterations = krylov_iterations_ - its0;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return lin;
  }

  /// H v (or the Gauss–Newton product) at a linearized point: the tangent
  /// run along the stored trajectory, then the second-order adjoint with
  /// the stored μ_n — two solves per step, as a gradient. The same numbers
  /// as hessian_vector(y0, …) (bitwise for autonomous linear models; to
  /// round-off otherwise, where the sweep's λ_n comes from the second-order
  /// pass). Collective.
  ThetaHessianVector hessian_vector(const ThetaLinearization& lin, const ThetaDirection& direction,
                                    HessianProduct product = HessianProduct::Exact) {
    const auto t_start = std::chrono::steady_clock::now();
    check_direction(direction, "hessian_vector");
    const Grid& g = op_.grid();
    const std::int64_t l = options_.steps;
    COSTATE_CHECK(lin.states.size() == static_cast<std::size_t>(l + 1) &&
                      lin.adjoints.size() == static_cast<std::size_t>(l),
                  "pde::ThetaIntegrator::hessian_vector: the ThetaLinearization has "
                      << lin.states.size() << " states, this integrator takes " << l
                      << " steps; linearize with this integrator");
    HessianSweep sw(*this, lin.objective, direction, ode::StoreAll{}, product);
    std::vector<GlobalVector> dys(static_cast<std::size_t>(l + 1));
    dys[0] = g.create_global();
    if (direction.initial_state.size()) deep_copy(dys[0], direction.initial_state);
    GlobalVector y = g.create_global();
    const std::int64_t its0 = krylov_iterations_;
    for (std::int64_t n = 0; n < l; ++n) {
      const auto N = static_cast<std::size_t>(n);
      dys[N + 1] = g.create_global();
      deep_copy(dys[N + 1], dys[N]);
      deep_copy(y, lin.states[N]);
      sw.tangent_iterations +=
          tangent_step(y, dys[N + 1], n, sw.a_dot, sw.q_dot, sw.rhs, sw.tmp, &lin.states[N + 1]);
    }
    for (std::int64_t n = l - 1; n >= 0; --n) {
      const auto N = static_cast<std::size_t>(n);
      deep_copy(sw.current, lin.states[N]);
      deep_copy(sw.dcurrent, dys[N]);
      if (n == l - 1) {
        deep_copy(sw.cached, lin.states[N + 1]);
        deep_copy(sw.dcached, dys[N + 1]);
        sw.cached_index = l;
      }
      sw.i = n;
      sw.given_mu = &lin.adjoints[N];
      sw.reverse_step();
    }
    ThetaHessianVector out;
    sw.into(out, lin.objective, g, lin.states[0], dys[0], l, product, &lin.gradient);
    out.checkpoints.steps = l;
    out.tangent_krylov_iterations = sw.tangent_iterations;
    out.adjoint_krylov_iterations = sw.adjoint_iterations;
    out.krylov_iterations = krylov_iterations_ - its0;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
  }

 public:  // the sweeps (below) and ThetaStepper
  /// The Ops object of ode::reverse_sweep.
  struct Sweep : detail::AdjointSums {
    Impl& in;
    const Objective& objective;
    GlobalVector current, next, cached, mu, tmp, ystar;
    detail::SweepSnapshots snapshots;
    std::int64_t i = 0, cached_index = -1, adjoint_iterations = 0;

    Sweep(Impl& integrator, const Objective& obj, const ode::Checkpointing& c)
        : AdjointSums(integrator.op_), in(integrator), objective(obj),
          snapshots(integrator.op_.grid().comm(), integrator.op_.grid().rank(),
                    integrator.op_.grid().owned_size(), c, integrator.options_.shared_disk_checkpoints) {
      const Grid& g = in.op_.grid();
      current = g.create_global();
      next = g.create_global();
      cached = g.create_global();
      mu = g.create_global();
      tmp = g.create_global();
      ystar = g.create_global();
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
      if (in.linear_) {
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
      if (in.linear_ && in.autonomous_) {
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
        if (!in.linear_) in.op_.jacobian(tn, current, in.J_);
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

  /// A direction of the wrong size on any rank throws on every rank.
  void check_direction(const ThetaDirection& direction, const char* where) const {
    detail::check_direction(op_, direction, std::string("pde::ThetaIntegrator::") + where);
  }

  /// One step of the state and its tangent: (y_n, δy_n) → (y_{n+1},
  /// δy_{n+1}) in place (file comment); `rhs`, `tmp` are work vectors.
  /// Leaves the solver's operator at I − hθJ_{n+1}. Returns the tangent
  /// solve's Krylov iterations.
  std::int64_t tangent_step(const GlobalVector& y, const GlobalVector& dy, std::int64_t n, const GlobalVector* a_dot,
                            std::span<const double> q_dot, const GlobalVector& rhs, const GlobalVector& tmp,
                            const GlobalVector* y_next = nullptr) {
    const double h = options_.dt, th = options_.theta;
    const double tn = options_.t0 + static_cast<double>(n) * h, tn1 = tn + h;
    deep_copy(rhs, dy);
    if (th < 1.0) {  // h(1−θ) ḟ_n at (t_n, y_n)
      op_.jvp_total(tn, y, &dy, a_dot, q_dot, tmp);
      axpy(h * (1.0 - th), tmp, rhs);
    }
    if (y_next)
      deep_copy(y, *y_next);  // a stored y_{n+1} (ThetaLinearization): the same bits as step()
    else
      step(y, n);
    if (a_dot != nullptr || !q_dot.empty()) {  // hθ (f_a δa + f_q δq) at (t_{n+1}, y_{n+1})
      op_.jvp_total(tn1, y, nullptr, a_dot, q_dot, tmp);
      axpy(h * th, tmp, rhs);
    }
    set_step_operator(tn1, y);
    const linear::Summary s = solver_.solve(rhs, dy, false);
    COSTATE_CHECK(s.success(), "pde::ThetaIntegrator: the tangent KSP solve failed at step "
                                   << n << ": " << s.message
                                   << "; choose a stronger -pc_type or raise KspOptions::max_iterations");
    return s.iterations;
  }

  /// The solver's operator ← I − hθ J(t_{n+1}, y_{n+1}).
  void set_step_operator(double tn1, const GlobalVector& y) {
    if (linear_) {
      ensure_linear_operator();
    } else {
      op_.jacobian(tn1, y, J_);
      A_.shifted_copy_of(J_, 1.0, -options_.dt * options_.theta);
      solver_.set_operator(A_);
    }
  }

  /// The Ops object of ode::reverse_sweep for the second-order adjoint: the
  /// swept state is the pair (y_n, δy_n), a snapshot holds both.
  struct HessianSweep final : detail::SecondOrderSweep {
    Impl& in;
    const Objective& objective;
    const GlobalVector* a_dot;
    std::span<const double> q_dot;
    bool exact;
    GlobalVector next, dnext, cached, dcached;
    GlobalVector mu, dmu, rhs, tmp, tmp2, w, wd, ystar, dystar;
    std::int64_t cached_index = -1, adjoint_iterations = 0, tangent_iterations = 0;
    const GlobalVector* given_mu = nullptr;  ///< μ_n from a ThetaLinearization (no solve)

    HessianSweep(Impl& integrator, const Objective& obj, const ThetaDirection& d,
                 const ode::Checkpointing& c, HessianProduct product)
        : SecondOrderSweep(integrator.op_, c, integrator.options_.shared_disk_checkpoints, "pde::ThetaIntegrator"),
          in(integrator), objective(obj), a_dot(d.fields.size() ? &d.fields : nullptr), q_dot(d.parameters),
          exact(product == HessianProduct::Exact) {
      const Grid& g = in.op_.grid();
      for (GlobalVector* v : {&next, &dnext, &cached, &dcached, &mu, &dmu, &rhs, &tmp, &tmp2, &w, &wd, &ystar, &dystar})
        *v = g.create_global();
    }
    void advance() override {
      tangent_iterations += in.tangent_step(current, dcurrent, i, a_dot, q_dot, rhs, tmp);
      ++i;
      ++advances;
    }
    void solve_transpose(const GlobalVector& b, const GlobalVector& x, const char* what) {
      const linear::Summary s = in.solver_.solve_transpose(b, x, false);
      adjoint_iterations += s.iterations;
      COSTATE_CHECK(s.success(), "pde::ThetaIntegrator::hessian_vector: the " << what << " KSP solve failed at step "
                                                                              << i << ": " << s.message
                                                                              << "; choose a stronger -pc_type or "
                                                                                 "raise KspOptions::max_iterations");
    }
    void reverse_step() override {
      const Grid& g = in.op_.grid();
      const double h = in.options_.dt, th = in.options_.theta;
      const double tn = in.options_.t0 + static_cast<double>(i) * h, tn1 = tn + h;
      // (y_{n+1}, δy_{n+1}): from the previous reverse step, or one step.
      if (cached_index == i + 1) {
        deep_copy(next, cached);
        deep_copy(dnext, dcached);
      } else {
        deep_copy(next, current);
        deep_copy(dnext, dcurrent);
        tangent_iterations += in.tangent_step(next, dnext, i, a_dot, q_dot, rhs, tmp);
        ++advances;
      }
      if (!seeded) {
        objective_value = objective.evaluate(g, next, &lambda);
        objective.hessian_vector(g, dnext, dlambda);
        seeded = true;
      }
      in.set_step_operator(tn1, next);
      using VD = VjpDirection;
      using VS = VjpSums;
      const GlobalVector* fields_out = in.fields_ > 0 ? &a_bar : nullptr;
      const GlobalVector* dfields_out = in.fields_ > 0 ? &da_bar : nullptr;
      if (in.linear_ && in.autonomous_) {
        // f = J(p) u + b(p): f_u does not depend on u or t, so D_u(n) =
        // D_u(n+1) = D_u, and f_p, D_p are affine in (y, δy): the two
        // evaluations are one at y* = θ y_{n+1} + (1 − θ) y_n (and δy*),
        // scaled by h; J_nᵀ x is the assembled J (one pass, not two).
        linear_sum(ystar, th, next, 1.0 - th, current);
        if (exact) {
          if (given_mu)
            deep_copy(mu, *given_mu);
          else
            solve_transpose(lambda, mu, "adjoint (transposed)");
          linear_sum(dystar, th, dnext, 1.0 - th, dcurrent);
          scale(w, h, mu);
          fill(tmp2, 0.0);  // h D_u
          in.op_.vjp_tangent_add(tn, ystar, w, VD{.u_dot = &dystar, .a_dot = a_dot, .q_dot = q_dot},
                                 VS{.a = fields_out, .q = q_bar}, VS{.u = &tmp2, .a = dfields_out, .q = dq_bar});
          linear_sum(rhs, 1.0, dlambda, th, tmp2);
          solve_transpose(rhs, dmu, "second-order adjoint (transposed)");
        } else {
          solve_transpose(dlambda, dmu, "Gauss-Newton adjoint (transposed)");
        }
        scale(w, h, dmu);  // h f_p(y*)ᵀ δμ
        in.op_.vjp_add(tn, ystar, w, da_bar, dq_bar);
        if (th < 1.0) {
          if (exact) {
            in.J_.mult_transpose(mu, tmp);
            linear_sum(lambda, 1.0, mu, h * (1.0 - th), tmp);
          }
          in.J_.mult_transpose(dmu, tmp);
          linear_sum(dlambda, 1.0, dmu, h * (1.0 - th), tmp);
          if (exact) axpy(1.0 - th, tmp2, dlambda);
        } else {
          if (exact) deep_copy(lambda, mu);
          deep_copy(dlambda, dmu);
        }
        cache_current();
        return;
      }
      if (exact) {
        // Aᵀ μ = λ;  Aᵀ δμ = δλ + hθ D_u(n+1); the gradient and D_p(n+1).
        if (given_mu)
          deep_copy(mu, *given_mu);
        else
          solve_transpose(lambda, mu, "adjoint (transposed)");
        deep_copy(rhs, dlambda);
        scale(w, h * th, mu);
        in.op_.vjp_tangent_add(tn1, next, w, VD{.u_dot = &dnext, .a_dot = a_dot, .q_dot = q_dot},
                               VS{.a = fields_out, .q = q_bar}, VS{.u = &rhs, .a = dfields_out, .q = dq_bar});
        solve_transpose(rhs, dmu, "second-order adjoint (transposed)");
      } else {
        solve_transpose(dlambda, dmu, "Gauss-Newton adjoint (transposed)");
      }
      scale(w, h * th, dmu);  // hθ f_p(n+1)ᵀ δμ
      in.op_.vjp_add(tn1, next, w, da_bar, dq_bar);
      if (th < 1.0) {
        if (exact) {
          // One pass at (t_n, y_n) with the weight h(1−θ)(μ + ε δμ): J_nᵀμ,
          // J_nᵀδμ + D_u(n), f_p(n)ᵀ μ and f_p(n)ᵀ δμ + D_p(n).
          scale(w, h * (1.0 - th), mu);
          scale(wd, h * (1.0 - th), dmu);
          fill(tmp, 0.0);
          fill(tmp2, 0.0);
          in.op_.vjp_tangent_add(tn, current, w, VD{.u_dot = &dcurrent, .a_dot = a_dot, .q_dot = q_dot, .w_dot = &wd},
                                 VS{.u = &tmp, .a = fields_out, .q = q_bar},
                                 VS{.u = &tmp2, .a = dfields_out, .q = dq_bar});
          linear_sum(lambda, 1.0, mu, 1.0, tmp);
          linear_sum(dlambda, 1.0, dmu, 1.0, tmp2);
        } else {
          if (!in.linear_) in.op_.jacobian(tn, current, in.J_);
          in.J_.mult_transpose(dmu, tmp);
          linear_sum(dlambda, 1.0, dmu, h * (1.0 - th), tmp);
          scale(w, h * (1.0 - th), dmu);
          in.op_.vjp_add(tn, current, w, da_bar, dq_bar);
        }
      } else {
        if (exact) deep_copy(lambda, mu);
        deep_copy(dlambda, dmu);
      }
      cache_current();
    }

   private:
    /// (y_n, δy_n) kept as the next reverse step's (y_{n+1}, δy_{n+1}).
    void cache_current() {
      deep_copy(cached, current);
      deep_copy(dcached, dcurrent);
      cached_index = i;
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

  std::unique_ptr<OperatorView> owned_;  ///< the view, when the stepper owns it
  OperatorView& op_;
  const int fields_, scalars_;
  const bool linear_, autonomous_;
  ThetaOptions options_;
  Matrix J_, A_;
  KrylovSolver solver_;
  GlobalVector f_, r_, delta_, explicit_part_, y_start_;
  bool linear_ready_ = false;
  std::int64_t krylov_iterations_ = 0;
};


ThetaStepper::ThetaStepper(OperatorView& op, const ThetaOptions& options)
    : impl_(std::make_unique<Impl>(op, options)) {}
ThetaStepper::ThetaStepper(std::unique_ptr<OperatorView> op, const ThetaOptions& options)
    : impl_(std::make_unique<Impl>(*op, options)) {
  impl_->owned_ = std::move(op);
}
ThetaStepper::~ThetaStepper() = default;

const ThetaOptions& ThetaStepper::options() const { return impl_->options(); }
std::int64_t ThetaStepper::krylov_iterations() const { return impl_->krylov_iterations(); }
const KrylovSolver& ThetaStepper::solver() const { return impl_->solver(); }
void ThetaStepper::step(const GlobalVector& u, std::int64_t n) { impl_->step(u, n); }
void ThetaStepper::integrate(const GlobalVector& u) { impl_->integrate(u); }
ThetaGradient ThetaStepper::gradient(const GlobalVector& y0, const Objective& objective,
                                     const ode::Checkpointing& checkpointing) {
  return impl_->gradient(y0, objective, checkpointing);
}
ThetaTangent ThetaStepper::tangent(const GlobalVector& y0, const Objective& objective,
                                   const ThetaDirection& direction) {
  return impl_->tangent(y0, objective, direction);
}
ThetaHessianVector ThetaStepper::hessian_vector(const GlobalVector& y0, const Objective& objective,
                                                const ThetaDirection& direction,
                                                const ode::Checkpointing& checkpointing, HessianProduct product) {
  return impl_->hessian_vector(y0, objective, direction, checkpointing, product);
}
ThetaLinearization ThetaStepper::linearize(const GlobalVector& y0, const Objective& objective) {
  return impl_->linearize(y0, objective);
}
ThetaHessianVector ThetaStepper::hessian_vector(const ThetaLinearization& lin, const ThetaDirection& direction,
                                                HessianProduct product) {
  return impl_->hessian_vector(lin, direction, product);
}

ThetaGradient ThetaStepper::linearize_point(const GlobalVector& y0, const Objective& objective) {
  point_ = std::make_unique<ThetaLinearization>(impl_->linearize(y0, objective));
  return point_->gradient;
}
ThetaHessianVector ThetaStepper::hessian_vector_at_point(const ThetaDirection& direction, HessianProduct product) {
  COSTATE_CHECK(point_ != nullptr, "pde::ThetaIntegrator::hessian_vector_at_point: call linearize_point first");
  return impl_->hessian_vector(*point_, direction, product);
}

}  // namespace costate::pde
