#include "costate/ode/options.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "costate/core/error.hpp"

namespace costate::ode {
namespace {
constexpr std::array kMethods{Method::ExplicitEuler, Method::RK4, Method::Dopri5,
                              Method::BackwardEuler, Method::CrankNicolson, Method::Sdirk3,
                              Method::Bdf, Method::CvodesBdf, Method::CvodesAdams,
                              Method::Idas};
}

std::string to_string(Method method) {
  switch (method) {
    case Method::ExplicitEuler: return "euler";
    case Method::RK4: return "rk4";
    case Method::Dopri5: return "dopri5";
    case Method::BackwardEuler: return "backward_euler";
    case Method::CrankNicolson: return "crank_nicolson";
    case Method::Sdirk3: return "sdirk3";
    case Method::Bdf: return "bdf";
    case Method::CvodesBdf: return "cvodes_bdf";
    case Method::CvodesAdams: return "cvodes_adams";
    case Method::Idas: return "idas";
  }
  return "unknown";
}

std::span<const Method> all_methods() { return kMethods; }

Method method_from_string(std::string_view name) {
  std::string valid;
  for (Method m : kMethods) {
    if (to_string(m) == name) return m;
    valid += (valid.empty() ? "" : ", ") + to_string(m);
  }
  throw Error("unknown integrator method '" + std::string(name) + "'; valid methods: " + valid);
}

int order(Method method) {
  switch (method) {
    case Method::ExplicitEuler: return 1;
    case Method::RK4: return 4;
    case Method::Dopri5: return 5;
    case Method::BackwardEuler: return 1;
    case Method::CrankNicolson: return 2;
    case Method::Sdirk3: return 3;
    case Method::Bdf: return 5;
    case Method::CvodesBdf: return 5;     // maximum order
    case Method::CvodesAdams: return 12;  // maximum order
    case Method::Idas: return 5;          // maximum order
  }
  return 0;
}

bool is_adaptive(Method method) {
  return method == Method::Dopri5 || method == Method::Sdirk3 || method == Method::Bdf ||
         is_cvodes(method) || is_idas(method);
}
bool is_idas(Method method) { return method == Method::Idas; }
bool is_cvodes(Method method) {
  return method == Method::CvodesBdf || method == Method::CvodesAdams;
}
bool is_implicit(Method method) {
  return method == Method::BackwardEuler || method == Method::CrankNicolson ||
         method == Method::Sdirk3 || method == Method::Bdf;
}
double theta_of(Method method) {
  if (method == Method::BackwardEuler) return 1.0;
  if (method == Method::CrankNicolson) return 0.5;
  return 0.0;
}

bool IntegratorOptions::fixed_step() const { return !is_adaptive(method) || !adaptive; }

double IntegratorOptions::next_landing(double t, double t1) const {
  const auto it = std::upper_bound(landing_times.begin(), landing_times.end(), t);
  return it != landing_times.end() && *it < t1 ? *it : t1;
}

void IntegratorOptions::validate(std::size_t n_states) const {
  auto positive = [](const char* field, double v) {
    COSTATE_CHECK(std::isfinite(v) && v > 0.0,
                  "integrator." << field << " = " << detail::format_value(v)
                                << " is invalid: it must be a positive finite number");
  };
  auto non_negative = [](const char* field, double v) {
    COSTATE_CHECK(std::isfinite(v) && v >= 0.0,
                  "integrator." << field << " = " << detail::format_value(v)
                                << " is invalid: it must be >= 0 and finite");
  };
  positive("rtol", rtol);
  positive("atol", atol);
  for (std::size_t k = 0; k < landing_times.size(); ++k)
    COSTATE_CHECK(std::isfinite(landing_times[k]) && (k == 0 || landing_times[k] > landing_times[k - 1]),
                  "landing times must be finite and strictly ascending: landing_times["
                      << k << "] = " << detail::format_value(landing_times[k]));
  if (!atol_per_state.empty()) {
    COSTATE_CHECK(atol_per_state.size() == n_states,
                  "integrator.atol has " << atol_per_state.size() << " entries but the model has "
                                         << n_states << " states; give one value or one per state");
    for (double a : atol_per_state) positive("atol[i]", a);
  }
  non_negative("dt", dt);
  non_negative("dt_max", dt_max);
  non_negative("dt_min", dt_min);
  COSTATE_CHECK(method != Method::Bdf || adaptive,
                "integrator.adaptive = false is not available for 'bdf' (its steps and orders "
                "are chosen by its error control); use sdirk3, backward_euler or "
                "crank_nicolson for fixed implicit steps");
  if (fixed_step()) {
    COSTATE_CHECK(dt > 0.0, "integrator.dt is required (> 0) for the fixed-step method '"
                                << to_string(method) << "'"
                                << (is_adaptive(method) ? " with adaptive: false" : ""));
  }
  COSTATE_CHECK(std::isfinite(newton_tol) && newton_tol > 0.0,
                "integrator.newton_tol = " << detail::format_value(newton_tol) << " must be positive");
  COSTATE_CHECK(newton_max_iterations > 0, "integrator.newton_max_iterations = "
                                               << newton_max_iterations << " must be positive");
  COSTATE_CHECK(max_steps > 0,
                "integrator.max_steps = " << max_steps << " is invalid: it must be positive");
}

namespace {
constexpr std::array kCvodesLinearSolvers{CvodesLinearSolver::Dense, CvodesLinearSolver::Band,
                                          CvodesLinearSolver::Sparse,
                                          CvodesLinearSolver::Automatic};
}

std::string to_string(CvodesLinearSolver solver) {
  switch (solver) {
    case CvodesLinearSolver::Dense: return "dense";
    case CvodesLinearSolver::Band: return "band";
    case CvodesLinearSolver::Sparse: return "sparse";
    case CvodesLinearSolver::Automatic: return "automatic";
  }
  return "unknown";
}

std::span<const CvodesLinearSolver> all_cvodes_linear_solvers() { return kCvodesLinearSolvers; }

CvodesLinearSolver cvodes_linear_solver_from_string(std::string_view name) {
  std::string valid;
  for (CvodesLinearSolver s : kCvodesLinearSolvers) {
    if (to_string(s) == name) return s;
    valid += (valid.empty() ? "" : ", ") + to_string(s);
  }
  throw Error("integrator.cvodes_linear_solver: unknown value '" + std::string(name) +
              "'; valid values: " + valid);
}

std::string to_string(Termination termination) {
  switch (termination) {
    case Termination::Success: return "success";
    case Termination::MaxStepsReached: return "max_steps_reached";
    case Termination::StepSizeUnderflow: return "step_size_underflow";
    case Termination::NonFiniteState: return "non_finite_state";
    case Termination::NonlinearSolverFailed: return "nonlinear_solver_failed";
    case Termination::BlowUp: return "blow_up";
  }
  return "unknown";
}

std::string Summary::brief_report() const {
  std::ostringstream os;
  os.precision(10);
  os << to_string(method) << ": " << to_string(termination) << " at t = " << final_time
     << " after " << steps << " steps (" << rejected_steps << " rejected), " << rhs_evaluations
     << " rhs evaluations";
  if (!success() && !message.empty()) os << " — " << message;
  return os.str();
}

}  // namespace costate::ode
