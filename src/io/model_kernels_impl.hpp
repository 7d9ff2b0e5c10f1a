#pragma once
// The definitions of io::detail::ModelKernels (io/model_kernels.hpp), for
// the explicit instantiations in src/io/kernels/*.cpp only.

#include "costate/ode/integrate.hpp"
#include "io/model_kernels.hpp"

namespace costate::io::detail {

template <class M>
ode::Solution ModelKernels<M>::integrate(const Problem& problem,
                                         const ode::IntegratorOptions& options) {
  return ode::integrate(problem, options);
}

template <class M>
ode::GradientResult ModelKernels<M>::gradient(const Problem& problem,
                                              const ExpressionObjective& objective,
                                              const ode::SensitivityMethod& method,
                                              const ode::IntegratorOptions& options,
                                              std::span<const double> replay_times,
                                              std::span<const int> replay_orders) {
  return ode::gradient(problem, objective, method, options, replay_times, replay_orders);
}

template <class M>
ode::HessianVectorResult ModelKernels<M>::hessian_vector(const Problem& problem,
                                                         const ExpressionObjective& objective,
                                                         const ode::HessianDirection& v,
                                                         const ode::SensitivityMethod& method,
                                                         const ode::IntegratorOptions& options,
                                                         std::span<const double> replay_times,
                                                         std::span<const int> replay_orders) {
  return ode::hessian_vector(problem, objective, v, method, options, replay_times, replay_orders);
}

template <class M>
ode::GradientResult ModelKernels<M>::observation_gradient(const Problem& problem,
                                                          const ode::WeightedObservations& obs,
                                                          const ode::SensitivityMethod& method,
                                                          const ode::IntegratorOptions& options) {
  return ode::gradient(problem, obs, method, options);
}

template <class M>
ode::HessianVectorResult ModelKernels<M>::observation_hessian_vector(
    const Problem& problem, const ode::WeightedObservations& obs, const ode::HessianDirection& v,
    const ode::SensitivityMethod& method, const ode::IntegratorOptions& options) {
  return ode::hessian_vector(problem, obs, v, method, options);
}

template <class M>
ode::ResidualSensitivities ModelKernels<M>::residual_sensitivities(
    const Problem& problem, const ode::WeightedObservations& obs,
    const ode::IntegratorOptions& options, std::span<const double> step_times) {
  return ode::sensitivity_matrix(problem, obs, options, step_times);
}

}  // namespace costate::io::detail
