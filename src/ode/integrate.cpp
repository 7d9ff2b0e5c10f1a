// ode::integrate's steppers on the compiled ode::System of a model
// (integrate.hpp's detail::integrate_system): explicit Euler, rk4, dopri5
// (integrate_vector on System::rhs), the θ-methods, sdirk3 and bdf (their
// steppers on SystemRhs, whose Jacobian is the System's) and CVODES —
// compiled once here instead of once per model in every caller of
// ode::integrate (issue 14: make_system is the only per-model template).
#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/idas.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/steppers/bdf.hpp"
#include "costate/ode/steppers/sdirk3.hpp"
#include "costate/ode/steppers/theta.hpp"
#include "ode/events_internal.hpp"
#include "costate/ode/support.hpp"
#include "ode/dae.hpp"
#include "ode/implicit_system.hpp"

namespace costate::ode::detail {
namespace {

/// Presents an implicit stepper on spans to run_fixed.
template <class S>
struct ImplicitAdapter {
  S& stepper;
  std::size_t n;
  template <class F, class V>
  bool step(F&, double t, double h, const V& a, const V& b, std::string* why) {
    return stepper.step(t, h, std::span<const double>(a.data(), n), std::span<double>(b.data(), n),
                        why);
  }
};

}  // namespace

Solution integrate_system(const System& system, std::span<const double> y0,
                          std::span<const double> p, double t0, double t1,
                          std::span<const double> outputs, const IntegratorOptions& given) {
  const std::size_t n = system.n_states();
  // An all-algebraic model (no differential state): every output time is a
  // step's end, its consistent solve (an interpolant of the step ends does
  // not satisfy the constraints, and with nothing to error-control the
  // steps grow to the whole interval).
  IntegratorOptions options = given;
  if (n > 0 && system.n_algebraic() == n) options.stop_at_outputs = true;
  COSTATE_CHECK(n > 0, "the problem has no states (empty y0)");
  COSTATE_CHECK_EQ(y0.size(), n, "integrate: initial state and System disagree");
  COSTATE_CHECK_EQ(p.size(), system.n_parameters(), "integrate: parameters and System disagree");
  // DAEs (algebraic states) only by IDAS (support.hpp's table).
  require(supports_dae(options.method, system.n_algebraic()), "ode::integrate");
  // IDAS with events: the event driver below (IDAS' root finding, a
  // consistent restart after each instant).
  if (is_idas(options.method) && !system.has_events()) {
    COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
    validate_output_times(outputs, t0, t1);
    return integrate_idas(system, y0, p, t0, t1, options, outputs);
  }
  if (system.has_events() && !options.step_watch) {
    // A model with events: the event driver (events.cpp) integrates it in
    // segments, landing on every output time (reported after the events
    // of an instant there).
    COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
    options.validate(n);
    validate_output_times(outputs, t0, t1);
    const auto start = std::chrono::steady_clock::now();
    Solution sol;
    sol.n_states = n;
    std::vector<double> stops;
    for (double t : outputs)
      if (t > t0) stops.push_back(t);
    std::size_t j = 0;
    // A DAE: from consistent initial values (the events re-solve them after
    // each instant).
    std::vector<double> x0(y0.begin(), y0.end());
    make_consistent(system, p, t0, x0, "ode::integrate");
    EventRun run = run_with_events(
        system, x0, p, t0, t1, options, stops, [&](double t, std::span<const double> x) {
          while (j < outputs.size() && outputs[j] < t) ++j;
          if (j < outputs.size() && outputs[j] == t) {
            sol.t.push_back(t);
            sol.y.insert(sol.y.end(), x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
            ++j;
          }
        });
    sol.summary = std::move(run.summary);
    sol.summary.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return sol;
  }
  HostVector y = HostVector::from(y0);
  // A DAE (bdf, sdirk3, θ: M = diag(I, 0) in their Newton matrix): the
  // algebraic initial values made consistent with the differential ones.
  make_consistent(system, p, t0, std::span<double>(y.data(), n), "ode::integrate");
  auto rhs = [&](double t, const HostVector& yy, const HostVector& dydt) {
    system.rhs(t, std::span<const double>(yy.data(), yy.size()), p,
               std::span<double>(dydt.data(), dydt.size()));
  };
  Solution sol;
  sol.n_states = n;
  sol.t.reserve(outputs.size());
  sol.y.reserve(outputs.size() * n);
  auto record = [&](std::size_t, double t, const HostVector& state) {
    sol.t.push_back(t);
    sol.y.insert(sol.y.end(), state.data(), state.data() + n);
  };
  const SystemRhs model{system};
  if (options.method == Method::Sdirk3 || options.method == Method::Bdf) {
    // Adaptive implicit methods (steppers/sdirk3.hpp, steppers/bdf.hpp).
    options.validate(n);
    validate_output_times(outputs, t0, t1);
    Summary& s = sol.summary;
    s.method = options.method;
    s.final_time = t0;
    const auto start = std::chrono::steady_clock::now();
    auto record_span = [&](std::size_t, double t, std::span<const double> state) {
      sol.t.push_back(t);
      sol.y.insert(sol.y.end(), state.begin(), state.end());
    };
    std::span<double> ys(y.data(), n);
    auto finish = [&](auto& st) {
      s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
      s.jacobian_evaluations = st.model_jacobian().jacobian_evaluations;
      s.factorizations = st.newton().factorizations;
      s.newton_iterations = st.newton().iterations;
    };
    if (options.method == Method::Sdirk3) {
      Sdirk3Stepper<SystemRhs> st(model, p, n, options.newton_tol, options.newton_max_iterations,
                                  options.rtol, atol_vector(options, n));
      if (options.fixed_step()) {
        ImplicitAdapter<Sdirk3Stepper<SystemRhs>> adapter{st, n};
        run_fixed(rhs, t0, t1, y, options, outputs, record, s, &adapter);
      } else {
        run_sdirk3(st, t0, t1, ys, options, outputs, record_span, s, [](double) {});
      }
      finish(st);
    } else {
      BdfStepper<SystemRhs> st(model, p, n, options.newton_tol, options.newton_max_iterations);
      // The gradient's plan's steps (plan_bdf, issue 35: the sensitivity's
      // forward pass is the run's integration, bit for bit): [J | f_p]
      // afresh at each step's start, Newton to replay_kappa of the error
      // tolerance. With the modified Newton's reused Jacobians and LUs the
      // roots differed from the plan's by round-off (2.5e-9 relative on
      // Robertson to 4e7), compounded over the steps.
      st.set_replay(replay_kappa(options));
      run_bdf(st, t0, t1, ys, options, outputs, record_span, s, [](double, int) {});
      finish(st);
    }
    s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.success()) s.message = "reached t1";
    return sol;
  }
  if (is_cvodes(options.method)) {
    COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
    validate_output_times(outputs, t0, t1);
    return integrate_cvodes(system, y0, p, t0, t1, options, outputs);
  }
  if (is_implicit(options.method)) {
    // Implicit θ-method: Newton with the System's Jacobians; fixed steps.
    COSTATE_CHECK(t1 > t0, "time.end must be greater than time.start");
    options.validate(n);
    validate_output_times(outputs, t0, t1);
    ThetaStepper<SystemRhs> theta(model, p, n, theta_of(options.method), options.newton_tol,
                                  options.newton_max_iterations);
    ImplicitAdapter<ThetaStepper<SystemRhs>> adapter{theta, n};
    Summary& s = sol.summary;
    s.method = options.method;
    s.final_time = t0;
    const auto start = std::chrono::steady_clock::now();
    run_fixed(rhs, t0, t1, y, options, outputs, record, s, &adapter);
    s.rhs_evaluations = theta.rhs_evaluations;
    s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.success()) s.message = "reached t1";
    return sol;
  }
  sol.summary = integrate_vector(rhs, t0, t1, y, options, outputs, record);
  return sol;
}

}  // namespace costate::ode::detail
