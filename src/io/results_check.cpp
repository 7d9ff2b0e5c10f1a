#include "costate/io/results_check.hpp"

#include <cmath>

#include "costate/core/error.hpp"

namespace costate::io {
namespace {

std::string fmt(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  return detail::format_value(v);
}

constexpr const char* kTryIntegrator =
    "try an implicit method (integrator.method: bdf) if the problem is stiff, a tighter "
    "integrator.rtol or a smaller dt, or a shorter time span; check the equations for "
    "overflow (exp of large values, division by zero, log or sqrt of negative values)";

}  // namespace

void check_finite_trajectory(const RunConfig& cfg, const ode::Solution& solution,
                             const std::string& what) {
  for (std::size_t k = 0; k < solution.n_outputs(); ++k) {
    const auto y = solution.state(k);
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (std::isfinite(y[i])) continue;
      const std::string name = i < cfg.state_names.size() ? cfg.state_names[i] : std::to_string(i);
      std::string where = "at t = " + fmt(solution.t[k]) + " (output " + std::to_string(k + 1) +
                          " of " + std::to_string(solution.n_outputs()) + ")";
      if (k > 0) where += "; every state was finite at t = " + fmt(solution.t[k - 1]);
      throw Error(cfg.input_path + ": " + what + ": state '" + name + "' is " + fmt(y[i]) + " " +
                  where + " — not a result (nothing written); " + kTryIntegrator);
    }
  }
}

void check_sensitivity_results(const RunConfig& cfg, const ode::Solution& trajectory,
                               const SensitivityOutput& out) {
  check_finite_trajectory(cfg, trajectory, "the trajectory");
  const std::string head = cfg.input_path + ": ";
  if (!std::isfinite(out.objective))
    throw Error(head + "the objective J is " + fmt(out.objective) +
                " — not a result; check the objective's expressions (log or sqrt of negative "
                "values, division by zero) along the trajectory; " + kTryIntegrator);
  auto bad_gradient = [&](const std::string& wrt, double v) {
    throw Error(head + "dJ/d" + wrt + " is " + fmt(v) + " while J = " + fmt(out.objective) +
                " is finite: the adjoint overflowed, as it does when the solution is very "
                "sensitive to its inputs (chaotic or unstable over the time span). Try a shorter "
                "time span (time.end), tighter tolerances, or sensitivity.method: forward to "
                "compare");
  };
  for (std::size_t k = 0; k < out.gradient.size(); ++k)
    if (!std::isfinite(out.gradient[k]))
      bad_gradient(k < out.parameter_names.size() ? out.parameter_names[k] : std::to_string(k),
                   out.gradient[k]);
  for (std::size_t k = 0; k < out.gradient_initial_state.size(); ++k)
    if (!std::isfinite(out.gradient_initial_state[k]))
      bad_gradient((k < cfg.state_names.size() ? cfg.state_names[k] : std::to_string(k)) + "(t0)",
                   out.gradient_initial_state[k]);
  const std::size_t m = out.parameter_names.size();
  for (std::size_t a = 0; a < m && out.hessian.size() == m * m; ++a)
    for (std::size_t b = 0; b < m; ++b)
      if (!std::isfinite(out.hessian[a * m + b]))
        throw Error(head + "the Hessian entry d2J/d" + out.parameter_names[a] + "d" +
                    out.parameter_names[b] + " is " + fmt(out.hessian[a * m + b]) +
                    " — not a result; try a shorter time span or tighter tolerances");
}

}  // namespace costate::io
