#pragma once
// What the command line (apps/costate), the Python module (python/module.cpp),
// the tools and the calibration compute with an input file's model, as plain
// functions compiled once in the library: the trajectory (`run`,
// costate/io/file_run.hpp), the objective's gradient by the file's
// sensitivity.method, the Hessian over the
// `wrt` parameters, the gradient check (Taylor test and central
// differences), and calibration's observation gradient and residual
// sensitivities.
//
// Each function picks the file's model (io::visit_model) in
// src/io/file_gradient.cpp and calls the model's compiled kernels
// (src/io/model_kernels.hpp), explicitly instantiated once per model in
// src/io/model_kernels.cpp: no caller of this header instantiates a model.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/io/file_run.hpp"
#include "costate/io/input.hpp"

namespace costate::ode {
struct HessianDirection;     // costate/ode/hessian.hpp
struct HessianVectorResult;  // (include it to call observation_hessian_vector)
}  // namespace costate::ode

namespace costate::io {

/// The gradient of the file's objective; the model's parameters' gradient
/// includes the initial state's dependence on them.
struct FileGradient {
  ode::GradientResult result;
  std::vector<double> gradient_p;  ///< all parameters
};

/// sensitivity.method cvodes_adjoint's settings (gradient and Hessian).
ode::CvodesAdjoint cvodes_adjoint_of(const SensitivityConfig& sc);

/// The method of sensitivity.method.
ode::SensitivityMethod sensitivity_method_of(const SensitivityConfig& sc);

/// `sensitivity --resume` (io/resume.hpp): the discrete adjoint's
/// ode::DiscreteAdjoint::resume_from and interrupted_at.
struct AdjointResumeLink {
  std::shared_ptr<const ode::AdjointResume> from;
  std::shared_ptr<ode::AdjointResume> interrupted_at;
};

/// J and ∇J at parameters p and initial state y0 (the steps replayed when
/// a `replay` plan is given: FileGradient::result.steps of an earlier call).
/// A non-empty `resume` needs sensitivity.method discrete_adjoint
/// (costate::Error otherwise).
FileGradient file_gradient(const RunConfig& cfg, std::span<const double> p,
                           std::span<const double> y0, const ode::StepPlan& replay = {},
                           const AdjointResumeLink& resume = {});

/// What the Hessian supports, checked before any work is done; `input`
/// names the file in the error.
void check_hessian_request(const RunConfig& cfg, const std::string& input);

/// ∂²J/∂p² over the `wrt` parameters (row-major), one Hessian–vector
/// product per column on the gradient's steps. Initial values given as
/// expressions of the parameters enter by the chain rule to second order.
struct FileHessian {
  std::vector<double> matrix;
  double asymmetry = 0.0;  ///< max |H − Hᵀ| / max |H|
  std::int64_t products = 0;
  double wall_seconds = 0.0;
};

FileHessian file_hessian(const RunConfig& cfg, const ode::GradientResult& g,
                         const std::vector<std::size_t>& wrt);

/// FileHessian::asymmetry of a row-major m × m matrix: max |H − Hᵀ| / max |H|
/// (0 for H = 0).
double hessian_asymmetry(const std::vector<double>& H, std::size_t m);

/// `costate sensitivity` on one build of the file's model and objective:
/// the trajectory at the output times (ode::integrate; a failed
/// integration throws "integration of FILE failed"), the gradient (as
/// file_gradient at cfg's parameters and initial state, with `resume`) and,
/// with `hessian_wrt`, the Hessian over those parameters (as file_hessian,
/// on the gradient's steps, one second-order System for every column).
/// The same bits as the three calls.
struct FileSensitivity {
  ode::Solution trajectory;
  FileGradient gradient;
  FileHessian hessian;  ///< with hessian_wrt
};
FileSensitivity file_sensitivity(const RunConfig& cfg, const AdjointResumeLink& resume = {},
                                 const std::vector<std::size_t>* hessian_wrt = nullptr);

/// Indices of sensitivity.wrt in cfg.parameter_names.
std::vector<std::size_t> wrt_indices(const RunConfig& cfg);

/// The gradient check of `costate gradcheck` at x = (p, the initial values
/// given as numbers), with the steps frozen so that J is the same smooth
/// function of x at every evaluation (initial values given as expressions
/// follow the parameters, so they are not coordinates of x). A file with
/// conditions checks J = Σ_c J_c (io/conditions.hpp), each condition's
/// steps frozen.
struct FileGradientCheck {
  std::vector<std::string> names;  ///< parameters, then "x(t0)"
  std::vector<double> x, gradient;
  double objective = 0.0;
  ad::TaylorTestResult taylor;
  ad::GradientCheckResult fd;
  bool passed = false;
  ode::Summary summary;  ///< the forward integration at x (e.g. dopri5 found it stiff)
};

FileGradientCheck file_gradient_check(const RunConfig& cfg);

/// Calibration: J = Σ_k ℓ_k of weighted observations and its gradient at
/// cfg's parameters and initial state, by `method`, with cfg.integrator.
ode::GradientResult observation_gradient(const RunConfig& cfg,
                                         const ode::WeightedObservations& obs,
                                         const ode::SensitivityMethod& method);

/// Calibration: J = Σ_k ℓ_k, its gradient and H v (ode::hessian_vector on
/// `obs`: forward over the discrete adjoint, or CVODES' second-order
/// adjoint for `method` = CvodesAdjoint) at cfg's parameters and initial
/// state, the steps chosen as observation_gradient chooses them. `method`
/// must support order 2 (ode::supports).
ode::HessianVectorResult observation_hessian_vector(const RunConfig& cfg,
                                                    const ode::WeightedObservations& obs,
                                                    const ode::HessianDirection& v,
                                                    const ode::SensitivityMethod& method);

/// Calibration: the residuals of `obs` and their sensitivity matrix at cfg's
/// parameters and initial state, on the gradient's step plan `steps`
/// (ode::sensitivity_matrix).
ode::ResidualSensitivities residual_sensitivities(const RunConfig& cfg,
                                                  const ode::WeightedObservations& obs,
                                                  const ode::StepPlan& steps);

}  // namespace costate::io
