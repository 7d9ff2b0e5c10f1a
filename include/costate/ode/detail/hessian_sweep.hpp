#pragma once
/// \file
/// Internals of ode::hessian_vector: the discrete adjoint of an explicit
/// Runge–Kutta solution run on ad::Dual<double, 1> (forward over adjoint).
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
/// way. The value parts are the operations of ode::gradient's sweep in the
/// same order, so they reproduce its gradient bit for bit.

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

namespace costate::ode::detail {

using HvpDual = ad::Dual<double, 1>;
using HvpReverse = ad::Reverse<HvpDual>;
using HvpVector = Vector<HvpDual, Kokkos::DefaultHostExecutionSpace>;

/// Ybar = f_yᵀ w and pbar += f_pᵀ w at (Y, p), every quantity a Dual: one
/// recording of the model on Reverse<Dual<double, 1>> (a private tape).
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
  ad::BasicTape<HvpDual> tape_;
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

/// What explicit_rk_hvp computed: every entry's value is the gradient's,
/// its tangent the Hessian–vector product's.
struct HvpOutcome {
  HvpDual objective{0.0};
  std::vector<HvpDual> wrt_parameters, wrt_initial_state;
  CheckpointStats checkpoints;
  std::int64_t rhs_evaluations = 0, vjp_evaluations = 0;
};

/// The sweep of ode::gradient for an explicit tableau, on Duals: `aug` the
/// augmented model (detail::Augmented), pd = p + ε v_p, y0d the augmented
/// initial state + ε v_y0, `times` the replayed steps, obs_at[i] the
/// observation index at step i (or −1), n the model's state count.
template <class A, class O>
HvpOutcome explicit_rk_hvp(const A& aug, const O& objective, const ButcherTableau& tab,
                           std::span<const HvpDual> pd, std::span<const HvpDual> y0d,
                           const std::vector<double>& times,
                           const std::vector<std::int64_t>& obs_at,
                           const Checkpointing& checkpointing, std::size_t n) {
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = y0d.size(), np = pd.size();
  const std::int64_t l = static_cast<std::int64_t>(times.size()) - 1;
  HvpVector cur = HvpVector::from(y0d);
  HvpVector next = cur.clone(), lambda = cur.clone();
  ExplicitRKStep<HvpVector> rk(tab, cur);
  std::vector<HvpDual> mu(np, HvpDual(0.0)), ybar_obj(n);
  DualRhsVjp<A> vjp(aug, pd, na);
  ad::BasicTape<HvpDual> objective_tape;
  HvpOutcome out;
  HvpDual J(0.0);
  auto rhs = [&](double t, const HvpVector& yy, const HvpVector& dydt) {
    ++out.rhs_evaluations;
    aug.template rhs<HvpDual>(t, std::span<const HvpDual>(yy.data(), na), pd,
                              std::span<HvpDual>(dydt.data(), na));
  };
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
    rk.step(rhs, times[i], times[i + 1] - times[i], cur, next);
    deep_copy(cur, next);
    ++ops.i;
  };
  ops.reverse_fn = [&] {
    const auto i = static_cast<std::size_t>(ops.i);
    const double h = times[i + 1] - times[i];
    rk.step(rhs, times[i], h, cur, next);  // the stages (and x_{i+1} on the last step)
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
    rk.adjoint(vjp, times[i], h, lambda, mu);
    add_observation(ops.i, cur);
  };
  out.checkpoints = reverse_sweep(checkpointing, ops, l);
  out.checkpoints.disk_snapshots = store.disk_writes();
  out.objective = J;
  out.wrt_parameters = mu;
  out.wrt_initial_state.assign(lambda.data(), lambda.data() + n);
  out.vjp_evaluations = vjp.count;
  return out;
}

}  // namespace costate::ode::detail
