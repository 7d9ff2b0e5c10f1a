#pragma once
/// \file
/// The Dual<double, 1> helpers of CVODES' second order
/// (detail/cvodes_hessian.hpp): a vector–Jacobian product of the model on
/// ad::Reverse<ad::Dual<double, 1>> (DualRhsVjp) and a scalar term's value
/// and gradient one order up (dual_value_and_gradient). The native steppers'
/// Hessians no longer use this header: they run on the compiled ode::System
/// (SecondOrderLinearization, Scheme::adjoint_tangent, second_order_sweep in
/// scheme.hpp). Delete it when CVODES' second order moves onto System too.
///
/// Each vector–Jacobian product w ↦ (f_yᵀ w, f_pᵀ w) at (Y + εẎ, p + εv)
/// with w + εẇ comes from a short recording of one right-hand side on
/// ad::Reverse<ad::Dual<double, 1>> (as ad::hvp does): seeded with the
/// Dual w, the input adjoints are
///     f_yᵀ w + ε (f_yᵀ ẇ + (∂/∂ε f_y(Y + εẎ, p + εv))ᵀ w),
/// and likewise for p.

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

}  // namespace costate::ode::detail
