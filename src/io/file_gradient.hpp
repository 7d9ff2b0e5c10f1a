#pragma once
// The derivatives of an input file's objective, shared by the command line
// (apps/costate/main.cpp: sensitivity, gradcheck) and the Python module
// (python/module.cpp): the gradient by the file's sensitivity.method, the
// Hessian over the `wrt` parameters, and the gradient check (Taylor test and
// central differences).
//
// Inline on purpose: every function visits the built-in models
// (io::visit_model), so it is instantiated in the translation unit that
// calls it — the CLI's main.cpp and the module's one TU — and not a third
// time in the library.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/integrate.hpp"
#include "io/input.hpp"
#include "io/objective.hpp"

namespace costate::io {

/// The gradient of the file's objective; the model's parameters' gradient
/// includes the initial state's dependence on them.
struct FileGradient {
  ode::GradientResult result;
  std::vector<double> gradient_p;  ///< all parameters
};

/// sensitivity.method cvodes_adjoint's settings (gradient and Hessian).
inline ode::CvodesAdjoint cvodes_adjoint_of(const SensitivityConfig& sc) {
  return {.steps = static_cast<int>(sc.checkpoint_steps),
          .interpolation = ode::cvodes_interpolation_from_string(sc.interpolation),
          .rtol = sc.adjoint_rtol,
          .atol = sc.adjoint_atol};
}

/// The method of sensitivity.method.
inline ode::SensitivityMethod sensitivity_method_of(const SensitivityConfig& sc) {
  if (sc.method == "forward") return ode::Forward{};
  if (sc.method == "continuous_adjoint")
    return ode::ContinuousAdjoint{.rtol = sc.adjoint_rtol, .atol = sc.adjoint_atol};
  if (sc.method == "cvodes_forward") return ode::CvodesForward{};
  if (sc.method == "cvodes_adjoint") return cvodes_adjoint_of(sc);
  return ode::DiscreteAdjoint{.checkpointing = sc.checkpointing};
}

/// J and ∇J at parameters p and initial state y0 (the steps replayed when
/// replay_times is given).
inline FileGradient file_gradient(const RunConfig& cfg, std::span<const double> p,
                                  std::span<const double> y0,
                                  std::span<const double> replay_times = {},
                                  std::span<const int> replay_orders = {}) {
  const ExpressionObjective objective(cfg);
  FileGradient out;
  out.result = visit_model(cfg, [&](auto model) {
    ode::Problem<decltype(model)> problem{model, std::vector<double>(y0.begin(), y0.end()),
                                          std::vector<double>(p.begin(), p.end()),
                                          {cfg.t_start, cfg.t_end}};
    return ode::gradient(problem, objective, sensitivity_method_of(cfg.sensitivity),
                         cfg.integrator, replay_times, replay_orders);
  });
  out.gradient_p = out.result.wrt_parameters;
  const auto extra = initial_state_parameter_vjp(cfg, out.result.wrt_initial_state);
  for (std::size_t j = 0; j < extra.size(); ++j) out.gradient_p[j] += extra[j];
  return out;
}

/// What the Hessian supports, checked before any work is done; `input`
/// names the file in the error.
inline void check_hessian_request(const RunConfig& cfg, const std::string& input) {
  namespace ode = costate::ode;
  COSTATE_CHECK(!cfg.sensitivity.wrt.empty(),
                input << ": costate sensitivity --hessian needs at least one parameter in "
                         "sensitivity.wrt; "
                      << (cfg.parameter_names.empty() ? "the model has no parameters"
                                                      : "sensitivity.wrt names none")
                      << " (drop --hessian)");
  ode::require(ode::supports(ode::sensitivity_kind_from_string(cfg.sensitivity.method),
                             cfg.integrator, 2),
               input + ": costate sensitivity --hessian");
}

/// ∂²J/∂p² over the `wrt` parameters (row-major), one Hessian–vector
/// product per column on the gradient's steps. Initial values given as
/// expressions of the parameters enter by the chain rule to second order.
struct FileHessian {
  std::vector<double> matrix;
  double asymmetry = 0.0;  ///< max |H − Hᵀ| / max |H|
  std::int64_t products = 0;
  double wall_seconds = 0.0;
};

inline FileHessian file_hessian(const RunConfig& cfg, const ode::GradientResult& g,
                                const std::vector<std::size_t>& wrt) {
  const auto start = std::chrono::steady_clock::now();
  const ExpressionObjective objective(cfg);
  const std::size_t np = cfg.parameters.size(), m = wrt.size();
  FileHessian out;
  out.matrix.assign(m * m, 0.0);
  visit_model(cfg, [&](auto model) {
    ode::Problem<decltype(model)> problem{model, cfg.initial_state, cfg.parameters,
                                          {cfg.t_start, cfg.t_end}};
    ode::SensitivityMethod method =
        ode::DiscreteAdjoint{.checkpointing = cfg.sensitivity.checkpointing};
    if (cfg.sensitivity.method == "cvodes_adjoint") method = cvodes_adjoint_of(cfg.sensitivity);
    ode::HessianDirection v{std::vector<double>(np, 0.0), {}};
    for (std::size_t c = 0; c < m; ++c) {
      v.parameters[wrt[c]] = 1.0;
      v.initial_state = initial_state_parameter_jvp(cfg, v.parameters);
      const ode::HessianVectorResult r = ode::hessian_vector(
          problem, objective, v, method, cfg.integrator, g.step_times, g.step_orders);
      const std::vector<double> extra = initial_state_parameter_hvp(
          cfg, v.parameters, r.gradient_wrt_initial_state, r.hv_wrt_initial_state);
      for (std::size_t i = 0; i < m; ++i)
        out.matrix[i * m + c] = r.hv_wrt_parameters[wrt[i]] + extra[wrt[i]];
      v.parameters[wrt[c]] = 0.0;
      ++out.products;
    }
  });
  double scale = 0.0, asym = 0.0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      scale = std::max(scale, std::abs(out.matrix[i * m + j]));
      asym = std::max(asym, std::abs(out.matrix[i * m + j] - out.matrix[j * m + i]));
    }
  out.asymmetry = scale > 0.0 ? asym / scale : 0.0;
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

/// Indices of sensitivity.wrt in cfg.parameter_names.
inline std::vector<std::size_t> wrt_indices(const RunConfig& cfg) {
  std::vector<std::size_t> out;
  for (const auto& name : cfg.sensitivity.wrt)
    out.push_back(static_cast<std::size_t>(
        std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), name) -
        cfg.parameter_names.begin()));
  return out;
}

/// The gradient check of `costate gradcheck` at x = (p, the initial values
/// given as numbers), with the steps frozen so that J is the same smooth
/// function of x at every evaluation (initial values given as expressions
/// follow the parameters, so they are not coordinates of x).
struct FileGradientCheck {
  std::vector<std::string> names;  ///< parameters, then "x(t0)"
  std::vector<double> x, gradient;
  double objective = 0.0;
  ad::TaylorTestResult taylor;
  ad::GradientCheckResult fd;
  bool passed = false;
};

inline FileGradientCheck file_gradient_check(const RunConfig& cfg) {
  const std::size_t np = cfg.parameters.size(), n = cfg.initial_state.size();
  COSTATE_CHECK(np > 0 || std::any_of(cfg.initial_state_expressions.begin(),
                                      cfg.initial_state_expressions.end(),
                                      [](const std::string& e) { return e.empty(); }),
                cfg.input_path << ": costate gradcheck has nothing to check: the model has no "
                                  "parameters and every initial value is an expression of t "
                                  "(give a parameter, or a number as an initial value)");
  const FileGradient base = file_gradient(cfg, cfg.parameters, cfg.initial_state);
  const std::vector<double> times = base.result.step_times;
  const std::vector<int> orders = base.result.step_orders;  // bdf's, replayed with the times
  std::vector<std::size_t> free_states;
  for (std::size_t i = 0; i < n; ++i)
    if (cfg.initial_state_expressions[i].empty()) free_states.push_back(i);
  FileGradientCheck out;
  out.objective = base.result.objective;
  out.x = cfg.parameters;
  out.gradient = base.gradient_p;
  out.names = cfg.parameter_names;
  for (std::size_t i : free_states) {
    out.x.push_back(cfg.initial_state[i]);
    out.gradient.push_back(base.result.wrt_initial_state[i]);
    out.names.push_back(cfg.state_names[i] + "(t0)");
  }
  auto J = [&](const std::vector<double>& xx) {
    RunConfig c = cfg;
    c.parameters.assign(xx.begin(), xx.begin() + static_cast<std::ptrdiff_t>(np));
    evaluate_initial_state(c);
    for (std::size_t k = 0; k < free_states.size(); ++k) c.initial_state[free_states[k]] = xx[np + k];
    return file_gradient(c, c.parameters, c.initial_state, times, orders).result.objective;
  };
  const std::vector<double>& x = out.x;
  // Direction: components scaled like x, signs from a fixed pattern.
  std::vector<double> dir(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    dir[i] = (i % 2 == 0 ? 1.0 : -0.7) * (0.5 + 0.25 * static_cast<double>(i % 3)) *
             std::max(std::abs(x[i]), 1e-2);
  // Taylor test: r(h) = |J(x + h d) − J(x) − h ⟨∇J, d⟩| = O(h²), order ≥ 1.9.
  out.taylor = ad::taylor_test(J, x, dir, out.gradient);
  // Central differences per component (h = 1e-6 relative): 1e-5 relative
  // allows the differences' own truncation and round-off on these objectives.
  constexpr double kFdTol = 1e-5;
  // Continuous methods (continuous_adjoint, cvodes_*) differentiate the
  // exact objective and re-choose their steps at every evaluation: J is
  // smooth only down to the tolerances, so the differences take a larger
  // step (1e-5 relative: round-off of the adaptive solver ~rtol·|J|/h
  // against truncation ~h²) and are compared to 1e-3. Use tight
  // integrator tolerances (rtol ≤ 1e-10) for these methods.
  const std::string& sm = cfg.sensitivity.method;
  const bool continuous = sm == "continuous_adjoint" || sm.rfind("cvodes_", 0) == 0;
  constexpr double kContinuousFdTol = 1e-3;
  out.fd = continuous ? ad::check_gradient(J, x, out.gradient,
                                           {.step = 1e-5, .rtol = kContinuousFdTol})
                      : ad::check_gradient(J, x, out.gradient, {.rtol = kFdTol});
  out.passed = out.taylor.passed && out.fd.passed;
  return out;
}

}  // namespace costate::io
