// One entry to the schemes (make_scheme), the adaptive implicit runs that
// choose the steps (plan_implicit_steps), and forward tangents with
// observation outputs (observed_tangents) — compiled once.
#include <algorithm>

#include "costate/core/error.hpp"
#include "costate/ode/scheme.hpp"

namespace costate::ode {

namespace detail {
void plan_sdirk3(const System& system, std::span<const double> p, std::span<double> x,
                 double t0, double t1, const IntegratorOptions& options,
                 std::span<const double> stops, Summary& s);
void plan_bdf(const System& system, std::span<const double> p, std::span<double> x, double t0,
              double t1, const IntegratorOptions& options, std::span<const double> stops,
              Summary& s, std::vector<int>& orders, BdfForwardRecord* record);
}  // namespace detail

std::unique_ptr<Scheme> make_scheme(const System& system, const IntegratorOptions& options,
                                    std::span<const double> p, std::span<const double> times,
                                    std::span<const int> orders, bool keep_step_data,
                                    const BdfForwardRecord* record) {
  switch (options.method) {
    case Method::ExplicitEuler:
    case Method::RK4:
    case Method::Dopri5: return make_explicit_rk_scheme(system, options.method, p, times);
    case Method::BackwardEuler:
    case Method::CrankNicolson:
      return make_theta_scheme(system, theta_of(options.method), p, times, options);
    case Method::Sdirk3: return make_sdirk3_scheme(system, p, times, options, keep_step_data);
    case Method::Bdf:
      return make_bdf_scheme(system, p, times, orders, options, keep_step_data, record);
    case Method::CvodesBdf:
    case Method::CvodesAdams: break;
  }
  throw Error("make_scheme: integrator.method = " + to_string(options.method) +
              " is not a replayable scheme (the CVODES backends differentiate themselves)");
}

ImplicitStepPlan plan_implicit_steps(const System& system, std::span<const double> p,
                                     std::span<const double> x0, double t0, double t1,
                                     const IntegratorOptions& options,
                                     std::span<const double> stops, BdfForwardRecord* record) {
  const std::size_t nx = system.n_states();
  COSTATE_CHECK_EQ(x0.size(), nx, "plan_implicit_steps: x0 has the wrong size");
  options.validate(nx);
  ImplicitStepPlan plan;
  plan.times.push_back(t0);
  IntegratorOptions opt = options;
  opt.on_step = [&](double t) {
    plan.times.push_back(t);
    if (options.on_step) options.on_step(t);
  };
  std::vector<double> x(x0.begin(), x0.end());
  Summary& s = plan.summary;
  s.method = options.method;
  s.final_time = t0;
  if (options.method == Method::Sdirk3)
    detail::plan_sdirk3(system, p, x, t0, t1, opt, stops, s);
  else if (options.method == Method::Bdf)
    detail::plan_bdf(system, p, x, t0, t1, opt, stops, s, plan.orders, record);
  else
    throw Error("plan_implicit_steps: integrator.method = " + to_string(options.method) +
                " is not sdirk3 or bdf");
  return plan;
}

ObservedTangents observed_tangents(const System& system, Scheme& scheme,
                                   std::span<const std::size_t> obs_step,
                                   std::span<const double> x0, std::span<const double> p) {
  const std::size_t l = scheme.steps(), nx = scheme.state_size();
  const std::size_t n = system.n_model_states(), np = p.size(), m = np + n;
  const std::size_t K = obs_step.size();
  COSTATE_CHECK_EQ(x0.size(), nx, "observed_tangents: x0 has the wrong size");
  for (std::size_t k = 0; k < K; ++k)
    COSTATE_CHECK(obs_step[k] <= l && (k == 0 || obs_step[k] >= obs_step[k - 1]),
                  "observed_tangents: output " << k << " at step index " << obs_step[k]
                                               << " (ascending, at most " << l << ")");
  ObservedTangents out;
  out.states.assign(K * n, 0.0);
  out.tangents.assign(K * n * m, 0.0);
  std::vector<double> x(nx), xn(nx), S, Sn, P;
  for (std::size_t first = 0; first < m; first += kTangentBlock) {
    const std::size_t b = std::min(kTangentBlock, m - first);
    S.assign(nx * b, 0.0);
    Sn.assign(nx * b, 0.0);
    P.assign(np * b, 0.0);
    for (std::size_t d = 0; d < b; ++d) {
      const std::size_t dir = first + d;
      if (dir < np)
        P[dir * b + d] = 1.0;
      else
        S[(dir - np) * b + d] = 1.0;
    }
    std::copy(x0.begin(), x0.end(), x.begin());
    std::size_t k = 0;
    auto record = [&](std::size_t i) {
      for (; k < K && obs_step[k] == i; ++k)
        for (std::size_t q = 0; q < n; ++q) {
          out.states[k * n + q] = x[q];
          for (std::size_t d = 0; d < b; ++d) out.tangents[(k * n + q) * m + first + d] = S[q * b + d];
        }
    };
    record(0);
    // Steps past the last output are not needed.
    const std::size_t last = K > 0 ? obs_step[K - 1] : 0;
    for (std::size_t i = 0; i < last; ++i) {
      scheme.tangent(i, x, xn, b, S, Sn, P);
      x.swap(xn);
      S.swap(Sn);
      record(i + 1);
    }
  }
  return out;
}

}  // namespace costate::ode
