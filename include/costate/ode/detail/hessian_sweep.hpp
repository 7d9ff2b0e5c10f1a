#pragma once
/// \file
/// Internals of ode::hessian_vector: the discrete adjoint of an explicit
/// Runge–Kutta or θ-method solution run on ad::Dual<double, 1> (forward
/// over adjoint).
///
/// Every quantity of the sweep of ode::gradient — states x_i, stages, the
/// adjoint λ and the parameter adjoint μ — becomes a value plus an
/// ε-part: the parameters are p + ε v_p, the initial state y0 + ε v_y0, so
///     x_i(ε)  = x_i + ε ẋ_i               (tangents of the replayed steps),
///     λ_0(ε)  = ∂J/∂y0 + ε [H v]_{y0},     μ(ε) = ∂J/∂p + ε [H v]_p,
/// because the sweep computes the gradient of the discrete J exactly and
/// its ε-part is the derivative of that gradient along v. Each stage's
/// vector–Jacobian product w ↦ (f_yᵀ w, f_pᵀ w) at (Y + εẎ, p + εv) with
/// w + εẇ comes from a short recording of one right-hand side on
/// ad::Reverse<ad::Dual<double, 1>> (as ad::hvp does): seeded with the
/// Dual w, the input adjoints are
///     f_yᵀ w + ε (f_yᵀ ẇ + (∂/∂ε f_y(Y + εẎ, p + εv))ᵀ w),
/// and likewise for p. The objective's terms are differentiated the same
/// way. For explicit Runge–Kutta the value parts are the operations of
/// ode::gradient's sweep in the same order, so they reproduce its gradient
/// bit for bit (the θ-methods: to rounding, see DualThetaScheme).

#include <Eigen/Core>
#include <Eigen/LU>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/objective.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "costate/ode/steppers/theta.hpp"

namespace costate::ode::detail {

using HvpDual = ad::Dual<double, 1>;
using HvpReverse = ad::Reverse<HvpDual>;
using HvpVector = Vector<HvpDual, Kokkos::DefaultHostExecutionSpace>;

/// The tape of the sweep's short recordings: private (not the thread's
/// active tape, so a caller's recording is not disturbed), one per thread and
/// kept between calls — a fresh BasicTape<Dual> pays for zero-initialising
/// its first argument chunk, which dominated small problems. The recordings
/// never nest: each resets it first.
inline ad::BasicTape<HvpDual>& hvp_tape() {
  thread_local ad::BasicTape<HvpDual> tape;
  return tape;
}

/// Ybar = f_yᵀ w and pbar += f_pᵀ w at (Y, p), every quantity a Dual: one
/// recording of the model on Reverse<Dual<double, 1>> (hvp_tape()).
template <class M>
class DualRhsVjp {
 public:
  DualRhsVjp(const M& model, std::span<const HvpDual> p, std::size_t n)
      : model_(model), p_(p.begin(), p.end()), y_(n), pr_(p.size()), dydt_(n) {}

  void operator()(double t, const HvpVector& Y, const HvpVector& w, HvpVector& Ybar,
                  std::vector<HvpDual>& pbar) {
    ++count;
    typename ad::BasicTape<HvpDual>::Scope scope(tape_);
    tape_.reset();
    tape_.start_recording();
    for (std::size_t i = 0; i < y_.size(); ++i) {
      y_[i] = Y[i];
      tape_.register_input(y_[i]);
    }
    for (std::size_t j = 0; j < pr_.size(); ++j) {
      pr_[j] = p_[j];
      tape_.register_input(pr_[j]);
    }
    model_.template rhs<HvpReverse>(t, std::span<const HvpReverse>(y_),
                                    std::span<const HvpReverse>(pr_), std::span<HvpReverse>(dydt_));
    for (auto& d : dydt_) tape_.register_output(d);
    tape_.stop_recording();
    for (std::size_t i = 0; i < dydt_.size(); ++i) dydt_[i].set_gradient(w[i]);
    tape_.evaluate();
    for (std::size_t i = 0; i < y_.size(); ++i) Ybar[i] = y_[i].gradient();
    for (std::size_t j = 0; j < pr_.size(); ++j) pbar[j] += pr_[j].gradient();
  }
  std::int64_t count = 0;

 private:
  const M& model_;
  std::vector<HvpDual> p_;
  std::vector<HvpReverse> y_, pr_, dydt_;
  ad::BasicTape<HvpDual>& tape_ = hvp_tape();
};

/// Value and (y, p)-gradient of a scalar term f(y, p) in Dual arithmetic
/// (value_and_gradient of gradient_support.hpp, one order up): ybar and
/// pbar are added to. `f` is called with spans of Reverse<Dual<double, 1>>.
template <class F>
HvpDual dual_value_and_gradient(F&& f, std::span<const HvpDual> y, std::span<const HvpDual> p,
                                std::span<HvpDual> ybar, std::span<HvpDual> pbar,
                                ad::BasicTape<HvpDual>& tape) {
  typename ad::BasicTape<HvpDual>::Scope scope(tape);
  tape.reset();
  tape.start_recording();
  std::vector<HvpReverse> yr(y.begin(), y.end()), pr(p.begin(), p.end());
  for (auto& v : yr) tape.register_input(v);
  for (auto& v : pr) tape.register_input(v);
  HvpReverse J = f(std::span<const HvpReverse>(yr), std::span<const HvpReverse>(pr));
  tape.register_output(J);
  tape.stop_recording();
  J.set_gradient(HvpDual(1.0));
  tape.evaluate();
  for (std::size_t i = 0; i < yr.size(); ++i) ybar[i] += yr[i].gradient();
  for (std::size_t j = 0; j < pr.size(); ++j) pbar[j] += pr[j].gradient();
  return J.value();
}

/// What dual_sweep computed: every entry's value is the gradient's,
/// its tangent the Hessian–vector product's.
struct HvpOutcome {
  HvpDual objective{0.0};
  std::vector<HvpDual> wrt_parameters, wrt_initial_state;
  CheckpointStats checkpoints;
  std::int64_t rhs_evaluations = 0, vjp_evaluations = 0;
};

/// An explicit Runge–Kutta step and its adjoint on Duals (explicit_rk.hpp's
/// ExplicitRKStep on vectors of HvpDual): the adjoint recomputes the stages.
template <class A>
class DualRkScheme {
 public:
  DualRkScheme(const A& aug, const ButcherTableau& tab, std::span<const HvpDual> pd,
               const HvpVector& like)
      : aug_(aug), pd_(pd), na_(like.size()), rk_(tab, like), vjp_(aug, pd, like.size()),
        tmp_(like.clone()) {}
  void step(double t, double h, const HvpVector& x, const HvpVector& xn) {
    auto rhs = [this](double tt, const HvpVector& yy, const HvpVector& dydt) {
      ++rhs_evaluations;
      aug_.template rhs<HvpDual>(tt, std::span<const HvpDual>(yy.data(), na_), pd_,
                                 std::span<HvpDual>(dydt.data(), na_));
    };
    rk_.step(rhs, t, h, x, xn);
  }
  void adjoint(double t, double h, const HvpVector& x, const HvpVector&, HvpVector& lambda,
               std::vector<HvpDual>& mu) {
    step(t, h, x, tmp_);  // the stages
    rk_.adjoint(vjp_, t, h, lambda, mu);
  }
  std::int64_t vjp_evaluations() const { return vjp_.count; }
  std::int64_t rhs_evaluations = 0;

 private:
  const A& aug_;
  std::span<const HvpDual> pd_;
  std::size_t na_;
  ExplicitRKStep<HvpVector> rk_;
  DualRhsVjp<A> vjp_;
  HvpVector tmp_;
};

/// The θ-method (steppers/theta.hpp) on Duals. Step: the value by the
/// stepper's Newton solve (as ode::gradient), the tangent by one linear
/// solve at the converged z = y_{n+1}:
///     (I − hθ J_{n+1}) ż = ẏ_n + h(1−θ) ḟ_n + hθ f_p(n+1) v,
/// ḟ_n, f_p v the ε-parts of f on Duals. Adjoint, differentiating
/// (I − hθ J_{n+1})ᵀ m = λ along ε:
///     m₀ = A⁻ᵀ λ₀,   ṁ = A⁻ᵀ (λ̇ + hθ J̇_{n+1}ᵀ m₀)      (A = I − hθ J_{n+1}),
///     p̄ += hθ f_p(n+1)ᵀ m,   λ_n = m + h(1−θ) J_nᵀ m,   p̄ += h(1−θ) f_p(n)ᵀ m,
/// all products of Duals from DualRhsVjp (J̇ᵀ m₀ is the ε-part of the
/// vector–Jacobian product at y_{n+1} + εẏ_{n+1} seeded with m₀ + 0ε).
/// The value parts agree with ode::gradient's θ adjoint to rounding (it
/// forms the same products from dense Jacobians), not bit for bit.
template <class A>
class DualThetaScheme {
 public:
  DualThetaScheme(const A& aug, std::span<const HvpDual> pd, std::span<const double> p,
                  std::size_t na, double theta, double newton_tol, int newton_max_iterations)
      : aug_(aug), pd_(pd), na_(na), theta_(theta),
        stepper_(aug, p, na, theta, newton_tol, newton_max_iterations), jac_(aug, p, na),
        vjp_(aug, pd, na), xv_(na), zv_(na), fd_(na), zd_(na),
        w_(HvpVector::from(std::span<const HvpDual>(zd_))), ybar_(w_.clone()) {}

  void step(double t, double h, const HvpVector& x, const HvpVector& xn) {
    const auto nn = static_cast<Eigen::Index>(na_);
    for (std::size_t q = 0; q < na_; ++q) xv_[q] = x[q].value();
    std::string why;
    COSTATE_CHECK(stepper_.step(t, h, xv_, zv_, &why),
                  "hessian_vector: implicit step at t = " << t << " failed: " << why);
    Eigen::VectorXd b(nn);
    for (std::size_t q = 0; q < na_; ++q) b[static_cast<Eigen::Index>(q)] = x[q].tangent(0);
    if (theta_ < 1.0) {
      f(t, std::span<const HvpDual>(x.data(), na_));
      for (std::size_t q = 0; q < na_; ++q)
        b[static_cast<Eigen::Index>(q)] += h * (1.0 - theta_) * fd_[q].tangent(0);
    }
    for (std::size_t q = 0; q < na_; ++q) zd_[q] = HvpDual(zv_[q]);
    f(t + h, std::span<const HvpDual>(zd_));
    for (std::size_t q = 0; q < na_; ++q)
      b[static_cast<Eigen::Index>(q)] += h * theta_ * fd_[q].tangent(0);
    const Eigen::MatrixXd M = Eigen::MatrixXd::Identity(nn, nn) -
                              h * theta_ * jac_.state(t + h, zv_).leftCols(nn);
    const Eigen::VectorXd zdot = M.partialPivLu().solve(b);
    for (std::size_t q = 0; q < na_; ++q)
      xn[q] = HvpDual(zv_[q], {zdot[static_cast<Eigen::Index>(q)]});
  }

  void adjoint(double t, double h, const HvpVector& x, const HvpVector& xn, HvpVector& lambda,
               std::vector<HvpDual>& mu) {
    const auto nn = static_cast<Eigen::Index>(na_);
    for (std::size_t q = 0; q < na_; ++q) zv_[q] = xn[q].value();
    const Eigen::MatrixXd M = Eigen::MatrixXd::Identity(nn, nn) -
                              h * theta_ * jac_.state(t + h, zv_).leftCols(nn);
    const Eigen::PartialPivLU<Eigen::MatrixXd> lu(M.transpose());
    Eigen::VectorXd r(nn);
    for (std::size_t q = 0; q < na_; ++q) r[static_cast<Eigen::Index>(q)] = lambda[q].value();
    const Eigen::VectorXd m0 = lu.solve(r);
    // J̇ᵀ m₀: the ε-part of the product at y_{n+1} + εẏ_{n+1} seeded with m₀.
    for (std::size_t q = 0; q < na_; ++q) w_[q] = HvpDual(m0[static_cast<Eigen::Index>(q)]);
    std::vector<HvpDual> discard(mu.size(), HvpDual(0.0));
    vjp_(t + h, xn, w_, ybar_, discard);
    for (std::size_t q = 0; q < na_; ++q)
      r[static_cast<Eigen::Index>(q)] = lambda[q].tangent(0) + h * theta_ * ybar_[q].tangent(0);
    const Eigen::VectorXd mdot = lu.solve(r);
    // p̄ += hθ f_p(n+1)ᵀ m.
    for (std::size_t q = 0; q < na_; ++q) {
      const auto k = static_cast<Eigen::Index>(q);
      w_[q] = HvpDual(h * theta_ * m0[k], {h * theta_ * mdot[k]});
    }
    vjp_(t + h, xn, w_, ybar_, mu);
    for (std::size_t q = 0; q < na_; ++q) {
      const auto k = static_cast<Eigen::Index>(q);
      lambda[q] = HvpDual(m0[k], {mdot[k]});
    }
    if (theta_ < 1.0) {
      // λ_n = m + h(1−θ) J_nᵀ m;  p̄ += h(1−θ) f_p(n)ᵀ m.
      for (std::size_t q = 0; q < na_; ++q) w_[q] = HvpDual(h * (1.0 - theta_)) * lambda[q];
      vjp_(t, x, w_, ybar_, mu);
      for (std::size_t q = 0; q < na_; ++q) lambda[q] += ybar_[q];
    }
  }
  std::int64_t vjp_evaluations() const { return vjp_.count; }
  std::int64_t rhs_evaluations = 0;

 private:
  void f(double t, std::span<const HvpDual> y) {
    ++rhs_evaluations;
    aug_.template rhs<HvpDual>(t, y, pd_, std::span<HvpDual>(fd_));
  }
  const A& aug_;
  std::span<const HvpDual> pd_;
  std::size_t na_;
  double theta_;
  ThetaStepper<A> stepper_;
  ModelJacobian<A> jac_;
  DualRhsVjp<A> vjp_;
  std::vector<double> xv_, zv_;
  std::vector<HvpDual> fd_, zd_;
  HvpVector w_, ybar_;
};

/// The sweep of ode::gradient on Duals for a scheme (DualRkScheme,
/// DualThetaScheme): pd = p + ε v_p, y0d the augmented initial state
/// + ε v_y0, `times` the replayed steps, obs_at[i] the observation index at
/// step i (or −1), n the model's state count.
template <class Scheme, class O>
HvpOutcome dual_sweep(Scheme& sc, const O& objective, std::span<const HvpDual> pd,
                      std::span<const HvpDual> y0d, const std::vector<double>& times,
                      const std::vector<std::int64_t>& obs_at,
                      const Checkpointing& checkpointing, std::size_t n) {
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = y0d.size(), np = pd.size();
  const std::int64_t l = static_cast<std::int64_t>(times.size()) - 1;
  HvpVector cur = HvpVector::from(y0d);
  HvpVector next = cur.clone(), after = cur.clone(), lambda = cur.clone();
  std::vector<HvpDual> mu(np, HvpDual(0.0)), ybar_obj(n);
  ad::BasicTape<HvpDual>& objective_tape = hvp_tape();
  HvpOutcome out;
  HvpDual J(0.0);
  // Adds a term's value to J and its gradient to λ (state part) and μ.
  auto add_term = [&](auto&& f, const HvpVector& state) {
    std::fill(ybar_obj.begin(), ybar_obj.end(), HvpDual(0.0));
    J += dual_value_and_gradient(f, std::span<const HvpDual>(state.data(), n), pd,
                                 std::span<HvpDual>(ybar_obj), std::span<HvpDual>(mu),
                                 objective_tape);
    for (std::size_t q = 0; q < n; ++q) lambda[q] += ybar_obj[q];
  };
  auto add_observation = [&](std::int64_t i, const HvpVector& state) {
    if constexpr (HasObservations<O>) {
      const std::int64_t k = obs_at[static_cast<std::size_t>(i)];
      if (k < 0) return;
      add_term(
          [&](std::span<const HvpReverse> yy, std::span<const HvpReverse> pp) {
            return HvpReverse(
                objective.template observation<HvpReverse>(static_cast<std::size_t>(k), yy, pp));
          },
          state);
    } else {
      (void)i;
      (void)state;
    }
  };

  struct Ops {
    HvpVector* current = nullptr;
    std::int64_t i = 0;
    SnapshotStore* store = nullptr;
    std::vector<double> buffer;  // (value, tangent) pairs
    std::function<void()> advance_fn, reverse_fn;
    std::vector<std::int64_t> slot_step;
    void advance() { advance_fn(); }
    void save(std::size_t s) {
      for (std::size_t q = 0; q < current->size(); ++q) {
        buffer[2 * q] = (*current)[q].value();
        buffer[2 * q + 1] = (*current)[q].tangent(0);
      }
      store->save(s, buffer);
      slot_step.resize(std::max(slot_step.size(), s + 1));
      slot_step[s] = i;
    }
    void restore(std::size_t s) {
      store->load(s, buffer);
      for (std::size_t q = 0; q < current->size(); ++q)
        (*current)[q] = HvpDual(buffer[2 * q], {buffer[2 * q + 1]});
      i = slot_step[s];
    }
    void reverse_step() { reverse_fn(); }
    std::int64_t index() const { return i; }
  } ops;
  ops.current = &cur;
  ops.buffer.resize(2 * na);
  std::size_t disk_slots = 0;
  std::string disk_path;
  if (const auto* ml = std::get_if<Multilevel>(&checkpointing)) {
    disk_slots = static_cast<std::size_t>(ml->disk);
    disk_path = ml->path;
  }
  SnapshotStore store(2 * na, disk_slots, disk_path);
  ops.store = &store;
  ops.advance_fn = [&] {
    const auto i = static_cast<std::size_t>(ops.i);
    sc.step(times[i], times[i + 1] - times[i], cur, next);
    deep_copy(cur, next);
    ++ops.i;
  };
  ops.reverse_fn = [&] {
    const auto i = static_cast<std::size_t>(ops.i);
    const double h = times[i + 1] - times[i];
    // x_{i+1} was the previous reverse step's state; only the last step is
    // computed here.
    if (ops.i == l - 1)
      sc.step(times[i], h, cur, next);
    else
      deep_copy(next, after);
    deep_copy(after, cur);
    if (ops.i == l - 1) {
      // Seed at the final state: λ_l = ∂g/∂y, λ_z = 1, μ = ∂g/∂p (ode::gradient's order).
      fill(lambda, HvpDual(0.0));
      if constexpr (HasTerminal<O>)
        add_term(
            [&](std::span<const HvpReverse> yy, std::span<const HvpReverse> pp) {
              return HvpReverse(objective.template terminal<HvpReverse>(yy, pp));
            },
            next);
      if constexpr (kRunning) {
        J += next[n];
        lambda[n] = HvpDual(1.0);
      }
      add_observation(l, next);
    }
    sc.adjoint(times[i], h, cur, next, lambda, mu);
    add_observation(ops.i, cur);
  };
  out.checkpoints = reverse_sweep(checkpointing, ops, l);
  out.checkpoints.disk_snapshots = store.disk_writes();
  out.objective = J;
  out.wrt_parameters = mu;
  out.wrt_initial_state.assign(lambda.data(), lambda.data() + n);
  out.vjp_evaluations = sc.vjp_evaluations();
  out.rhs_evaluations = sc.rhs_evaluations;
  return out;
}

}  // namespace costate::ode::detail
