#pragma once
// The per-model computations behind costate/io/file_gradient.hpp: the only code of
// the input-file layer that is a template on the model. Declared here,
// defined and explicitly instantiated for every model in io/model_kernels.cpp
// (one translation unit: the model-independent half of the kernels compiles
// once), so that no caller instantiates ode::integrate, ode::gradient,
// ode::hessian_vector or ode::sensitivity_matrix again. A new built-in model
// adds one line to ode::visit_builtin_model, one `extern template` below and
// one explicit instantiation in io/model_kernels.cpp.

#include <span>

#include "costate/ode/equation_model.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/io/objective.hpp"

namespace costate::io::detail {

template <class M>
struct ModelKernels {
  using Problem = ode::Problem<M>;
  static ode::Solution integrate(const Problem& problem, const ode::IntegratorOptions& options);
  static ode::GradientResult gradient(const Problem& problem, const ExpressionObjective& objective,
                                      const ode::SensitivityMethod& method,
                                      const ode::IntegratorOptions& options,
                                      const ode::StepPlan& replay);
  /// ode::hessian_vectors: one second-order System for every direction.
  static std::vector<ode::HessianVectorResult> hessian_vectors(
      const Problem& problem, const ExpressionObjective& objective,
      std::span<const ode::HessianDirection> v, const ode::SensitivityMethod& method,
      const ode::IntegratorOptions& options, const ode::StepPlan& replay);
  static ode::GradientResult observation_gradient(const Problem& problem,
                                                  const ode::WeightedObservations& obs,
                                                  const ode::SensitivityMethod& method,
                                                  const ode::IntegratorOptions& options);
  /// Calibration's H v (io::observation_hessian_vector): the steps chosen
  /// as observation_gradient chooses them.
  static ode::HessianVectorResult observation_hessian_vector(const Problem& problem,
                                                             const ode::WeightedObservations& obs,
                                                             const ode::HessianDirection& v,
                                                             const ode::SensitivityMethod& method,
                                                             const ode::IntegratorOptions& options);
  static ode::ResidualSensitivities residual_sensitivities(const Problem& problem,
                                                           const ode::WeightedObservations& obs,
                                                           const ode::IntegratorOptions& options,
                                                           const ode::StepPlan& steps);
};

extern template struct ModelKernels<ode::LotkaVolterra>;
extern template struct ModelKernels<ode::VanDerPol>;
extern template struct ModelKernels<ode::FitzHughNagumo>;
extern template struct ModelKernels<ode::Lorenz>;
extern template struct ModelKernels<ode::Robertson>;
extern template struct ModelKernels<ode::EquationModel>;

}  // namespace costate::io::detail
