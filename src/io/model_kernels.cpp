// The definitions of io::detail::ModelKernels (io/model_kernels.hpp) and
// their explicit instantiations for every built-in model, in one
// translation unit: about half of a model's kernels is code that does not
// depend on the model (the expression objective's programs on every scalar
// type, Kokkos views, Eigen, the tapes), compiled once here instead of once
// per model (measured 2026-12-01: 64.5 CPU s for this translation unit
// against 139.9 for the six it replaces, at the same load; docs/building.md).

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
                                              const ode::StepPlan& replay) {
  return ode::gradient(problem, objective, method, options, replay);
}

template <class M>
std::vector<ode::HessianVectorResult> ModelKernels<M>::hessian_vectors(
    const Problem& problem, const ExpressionObjective& objective,
    std::span<const ode::HessianDirection> v, const ode::SensitivityMethod& method,
    const ode::IntegratorOptions& options, const ode::StepPlan& replay) {
  return ode::hessian_vectors(problem, objective, v, method, options, replay);
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
    const ode::IntegratorOptions& options, const ode::StepPlan& steps) {
  return ode::sensitivity_matrix(problem, obs, options, steps);
}

template struct ModelKernels<ode::LotkaVolterra>;
template struct ModelKernels<ode::VanDerPol>;
template struct ModelKernels<ode::FitzHughNagumo>;
template struct ModelKernels<ode::Lorenz>;
template struct ModelKernels<ode::Robertson>;
template struct ModelKernels<ode::EquationModel>;

}  // namespace costate::io::detail
