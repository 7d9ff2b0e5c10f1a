#pragma once
/// \file
/// ode::gradient with the CVODES backend (CvodesForward, CvodesAdjoint): the
/// only per-model part is make_system; the CVODES code behind it is
/// compiled once (src/ode/cvodes_gradient.cpp, cvodes_system.cpp). Included
/// at the end of gradient.hpp; see cvodes.hpp for the maths.

#include <memory>
#include <utility>

#include "costate/ode/cvodes.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode::detail {

/// The System the CVODES entry points run on (dense [f_y | f_p] up to
/// cvodes::kBindingDenseMax states + parameters).
template <Model M, class O>
System cvodes_system_of(const M& model, const O& objective, std::size_t n, std::size_t np) {
  return make_system(model, objective, n, np, {.dense_max = cvodes::kBindingDenseMax});
}
template <Model M, class O>
System cvodes_system_of(const Problem<M>& problem, const O& objective) {
  return cvodes_system_of(problem.model, objective, problem.n_states(), problem.p.size());
}

template <Model M, class O>
GradientResult cvodes_gradient(const Problem<M>& problem, const O& objective,
                               const CvodesAdjoint* adjoint, IntegratorOptions options) {
  const System system = cvodes_system_of(problem, objective);
  return cvodes_gradient(system, problem.y0, problem.p, problem.t0(), problem.t1(), adjoint,
                         std::move(options));
}

}  // namespace costate::ode::detail

namespace costate::ode {

template <Model M, class O>
PendingGradient begin_gradient(const Problem<M>& problem, const O& objective,
                               const CvodesAdjoint& adjoint, const IntegratorOptions& options) {
  // The System holds the model and the objective by reference: the
  // pending gradient keeps its own copies.
  auto held = std::make_shared<const std::pair<M, O>>(problem.model, objective);
  System system = detail::cvodes_system_of(held->first, held->second, problem.n_states(), problem.p.size());
  return PendingGradient(std::move(held), std::move(system), problem.y0, problem.p, problem.t0(),
                         problem.t1(), adjoint, options);
}

}  // namespace costate::ode
