#include "costate/pde/explicit_rk.hpp"

#include <cmath>
#include <sstream>

namespace costate::pde {

std::string to_string(ExplicitRkMethod m) { return m == ExplicitRkMethod::Rk4 ? "rk4" : "ssp_rk3"; }

bool is_explicit_rk_method(const std::string& name) { return name == "rk4" || name == "ssp_rk3"; }

ExplicitRkMethod explicit_rk_method_from_string(const std::string& name) {
  if (name == "rk4") return ExplicitRkMethod::Rk4;
  if (name == "ssp_rk3") return ExplicitRkMethod::SspRk3;
  throw Error("pde::ExplicitRkMethod: unknown method \"" + name + "\"; expected rk4 or ssp_rk3");
}

ode::ButcherTableau tableau(ExplicitRkMethod m) {
  return m == ExplicitRkMethod::Rk4 ? ode::explicit_tableau(ode::Method::RK4) : ode::ssp_rk3_tableau();
}

int order(ExplicitRkMethod m) { return m == ExplicitRkMethod::Rk4 ? 4 : 3; }

double real_stability_limit(ExplicitRkMethod m) {
  // β where |R(−β)| = 1 for R(z) = Σ_{k≤s} z^k/k!, the stability polynomial
  // of every s-stage order-s method (s ≤ 4: the same for rk4 and any
  // 3-stage RK3, ssp_rk3 among them), by bisection on [2, 3] (|R| ≤ 1 on
  // [−2, 0] for s = 3, 4; > 1 at −3).
  const int s = m == ExplicitRkMethod::Rk4 ? 4 : 3;
  auto R = [s](double z) {
    double term = 1.0, sum = 1.0;
    for (int k = 1; k <= s; ++k) {
      term *= z / k;
      sum += term;
    }
    return sum;
  };
  double lo = 2.0, hi = 3.0;  // |R(−β)| ≤ 1 at 2, > 1 at 3
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (std::abs(R(-mid)) <= 1.0) lo = mid;
    else hi = mid;
  }
  return lo;
}

std::string stability_warning(const ExplicitRkOptions& options, const ExplicitRkStability& s, const std::string& key) {
  if (!(options.dt > s.max_stable_dt)) return {};
  std::ostringstream m;
  m.precision(4);
  m << key << " = " << options.dt << " is above the stability limit of " << to_string(options.method)
    << ": dt * rho(J) = " << options.dt * s.spectral_radius << " > " << s.limit << " (rho(J) ~ " << s.spectral_radius
    << ", a power-iteration estimate at t0), so the fastest modes grow at every step; use dt <= "
    << s.max_stable_dt << " (steps >= "
    << static_cast<long long>(std::ceil(static_cast<double>(options.steps) * options.dt / s.max_stable_dt))
    << " for the same end time) or an implicit method (crank_nicolson, backward_euler)";
  return m.str();
}

void ExplicitRkOptions::validate() const {
  COSTATE_CHECK(std::isfinite(dt) && dt > 0.0,
                "pde::ExplicitRkOptions::dt = " << detail::format_value(dt) << " must be > 0");
  COSTATE_CHECK(std::isfinite(t0), "pde::ExplicitRkOptions::t0 = " << detail::format_value(t0) << " must be finite");
  COSTATE_CHECK(steps >= 0, "pde::ExplicitRkOptions::steps = " << steps << " must be >= 0");
}

}  // namespace costate::pde
