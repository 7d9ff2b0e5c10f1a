#pragma once
/// \file
/// ode::integrate — time integration of an ode::Problem with the explicit
/// steppers, and ode::integrate_vector, the same driver on any
/// costate::Vector right-hand side (serial or distributed).
///
/// Fixed-step methods shorten a step to land exactly on each output time and
/// on t1. Adaptive Dormand–Prince reports output times by its dense output
/// (so outputs never constrain the step) and lands exactly on t1. Its step
/// controller is the PI controller of Hairer & Wanner's DOPRI5 (safety 0.9,
/// factor limits [0.2, 10], β = 0.04), with Hairer's initial-step heuristic
/// when IntegratorOptions::dt is 0.
///
/// A failed run is data, not an exception: Summary::termination tells why it
/// ended (max steps, step-size underflow, non-finite state) with the time and
/// step in Summary::message; the outputs reached so far are kept.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <span>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/detail/fixed_steps.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/steppers/dopri5.hpp"
#include "costate/ode/steppers/explicit_euler.hpp"
#include "costate/ode/steppers/rk4.hpp"
#include "costate/ode/system.hpp"
#include "costate/tensor/vector.hpp"

namespace costate::ode {

/// ODE states live on the host: models are plain C++ called on std::span.
using HostVector = Vector<double, Kokkos::DefaultHostExecutionSpace>;

namespace detail {

inline std::string at_time(double t, std::int64_t step) {
  std::ostringstream os;
  os.precision(16);
  os << "t = " << t << " (step " << step << ")";
  return os.str();
}

/// An objective without terms (ode::integrate's System of the model alone).
struct NoObjectiveTerms {};

/// Checks output times: finite, ascending, inside [t0, t1].
inline void validate_output_times(std::span<const double> outputs, double t0, double t1) {
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    COSTATE_CHECK(std::isfinite(outputs[j]) && outputs[j] >= t0 && outputs[j] <= t1,
                  "output time " << costate::detail::format_value(outputs[j]) << " (index " << j
                                 << ") lies outside the interval ["
                                 << costate::detail::format_value(t0) << ", "
                                 << costate::detail::format_value(t1) << "]");
    if (j > 0)
      COSTATE_CHECK(outputs[j] > outputs[j - 1],
                    "output times must be strictly ascending: times["
                        << j - 1 << "] = " << costate::detail::format_value(outputs[j - 1])
                        << ", times[" << j << "] = " << costate::detail::format_value(outputs[j]));
  }
}

/// The per-step check of a fixed-step run, in one pass and one collective:
/// the largest |entry| of y over the ranks, or +inf when an entry is NaN or
/// ±inf (so "finite" is extent <= DBL_MAX). On a host vector whose kernels
/// run inline, a plain loop (the compiler vectorizes it) instead of a
/// Kokkos reduction; the finiteness test and the blow-up watch's norm share
/// it (two reductions per step cost a 10⁶-step rk4 run of a 2-state model
/// 75 % more time).
template <class V>
double state_extent(const V& y) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double local = 0.0;
  if constexpr (std::is_same_v<typename V::value_type, double> &&
                costate::detail::kRunsInline<typename V::execution_space>) {
    const double* d = y.data();
    const std::size_t n = y.size();
    unsigned bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      bad |= static_cast<unsigned>(!(d[i] - d[i] == 0.0));
      local = std::max(local, std::abs(d[i]));
    }
    if (bad != 0) local = kInf;
  } else {
    local = all_finite(y) ? max_norm(y) : kInf;
  }
  return global_max(y.comm(), local);
}

/// A finite-time blow-up under fixed steps (y' = y² past t = 1/y0): the
/// steps stay finite far past the singularity (Euler gives 1e173 where no
/// solution exists), so finiteness alone does not reveal it. Its mark is
/// growth faster than exponential: the state's largest entry more than
/// doubles on each of kRun consecutive steps, at a rate ln(growth)/h that
/// rises by more than kRise on each. An exponential's rate is constant, and
/// a step that doubles the state is no accurate step of any method; an
/// unstable linear recursion (dt beyond the stability limit) grows at a
/// constant rate too and ends as a non-finite state.
struct BlowUpWatch {
  static constexpr int kRun = 5;
  static constexpr double kRise = 1.1;
  double norm = 0.0;       ///< max |y| at the start of the step
  double rate = 0.0;       ///< the last doubling step's ln(growth)/h
  double run_from = 0.0;   ///< max |y| before the run of doubling steps
  int run = 0;
  /// Records a step of size h that ends with max |y| = norm_new; true when
  /// the run of accelerating doublings reaches kRun.
  bool step(double h, double norm_new) {
    if (norm > 0.0 && norm_new > 2.0 * norm) {
      const double r = std::log(norm_new / norm) / h;
      if (run == 0 || !(r > kRise * rate)) {
        run = 0;
        run_from = norm;
      }
      ++run;
      rate = r;
    } else {
      run = 0;
    }
    norm = norm_new;
    return run >= kRun;
  }
};

/// Fixed steps with the explicit stepper of opt.method, or with `custom`
/// (an implicit stepper: `bool step(f, t, h, y, y_new, std::string* why)`).
template <class V, class Rhs, class Output, class Custom = std::nullptr_t>
void run_fixed(Rhs& f, double t0, double t1, V& y, const IntegratorOptions& opt,
               std::span<const double> outputs, Output& out, Summary& s, Custom* custom = nullptr) {
  V y_new = y.clone();
  std::size_t j = 0;
  double t = t0;
  FixedStepClock clock{opt.dt, t0};
  while (j < outputs.size() && outputs[j] == t) out(j++, t, y);
  // A retaken step's end (step_watch): the step lands there instead.
  double forced = std::numeric_limits<double>::infinity();
  BlowUpWatch blowup{.norm = state_extent(y)};
  auto advance = [&](auto& stepper) {
    while (t < t1) {
      if (s.steps >= opt.max_steps) {
        s.termination = Termination::MaxStepsReached;
        s.message = "reached integrator.max_steps = " + std::to_string(opt.max_steps) + " at " +
                    at_time(t, s.steps) + "; raise max_steps or increase dt";
        return;
      }
      const double target =
          std::min({j < outputs.size() ? outputs[j] : t1, opt.next_landing(t, t1), forced});
      const FixedStepClock::Next next = clock.next(target);
      const double t_new = next.t;
      const double h = t_new - t;
      if (!(h > 0.0)) {
        std::ostringstream os;
        os.precision(16);
        os << "integrator.dt = " << opt.dt << " is too small to advance from " << at_time(t, s.steps)
           << " in double precision";
        s.termination = Termination::StepSizeUnderflow;
        s.message = os.str();
        return;
      }
      if constexpr (requires(std::string* w) {
                      { stepper.step(f, t, h, y, y_new, w) } -> std::same_as<bool>;
                    }) {
        std::string why;
        if (!stepper.step(f, t, h, y, y_new, &why)) {
          s.termination = Termination::NonlinearSolverFailed;
          s.message = "the implicit step from " + at_time(t, s.steps) + " failed: " + why +
                      "; reduce integrator.dt";
          s.final_time = t;
          return;
        }
      } else {
        stepper.step(f, t, h, y, y_new);
      }
      const double extent = state_extent(y_new);
      const bool finite = extent <= std::numeric_limits<double>::max();
      bool stop = false;
      if (opt.step_watch && finite) {
        const StepVerdict v =
            opt.step_watch(t, std::span<const double>(y.data(), y.size()), t_new,
                           std::span<const double>(y_new.data(), y_new.size()));
        if (v.kind == StepVerdict::Kind::Retry) {
          forced = v.t;
          ++s.rejected_steps;
          continue;
        }
        stop = v.kind == StepVerdict::Kind::Stop;
      }
      clock.take(next);
      ++s.steps;
      s.last_step = h;
      if (!finite) {
        s.termination = Termination::NonFiniteState;
        s.message = "the state became non-finite (NaN or Inf) at " + at_time(t_new, s.steps) +
                    "; the step dt may be too large for stability, or the solution blows up";
        s.final_time = t;
        return;
      }
      if (blowup.step(h, extent)) {
        std::ostringstream os;
        os.precision(6);
        os << "the solution blows up: detected at " << at_time(t_new, s.steps) << ", its largest entry grew from "
           << blowup.run_from << " to " << blowup.norm << " over the last " << BlowUpWatch::kRun
           << " steps, more than doubling on each at a rising rate (faster than exponential: a "
              "finite-time singularity, or a step dt far too large); no solution exists past it — "
              "end time.end before t = "
           << t << ", or use an adaptive integrator.method (dopri5, bdf), which stops at the singularity";
        s.termination = Termination::BlowUp;
        s.message = os.str();
        s.final_time = t;
        return;
      }
      std::swap(y, y_new);
      t = t_new;
      s.final_time = t;
      while (j < outputs.size() && outputs[j] <= t) out(j++, t, y);
      if (opt.on_step) opt.on_step(t);
      if (stop) return;
    }
  };
  if constexpr (!std::is_same_v<Custom, std::nullptr_t>) {
    advance(*custom);
  } else if (opt.method == Method::ExplicitEuler) {
    ExplicitEuler<V> stepper(y);
    advance(stepper);
  } else if (opt.method == Method::RK4) {
    RK4<V> stepper(y);
    advance(stepper);
  } else {
    // Dopri5 with fixed steps: the 5th-order solution, error estimate unused.
    struct FixedDopri {
      Dopri5<V> d;
      void step(Rhs& f, double t, double h, const V& y, const V& y_new) {
        d.start(f, t, y);
        d.attempt(f, t, h, y, y_new);
      }
    } stepper{Dopri5<V>(y)};
    advance(stepper);
  }
  s.final_time = t;
}

template <class V, class Rhs, class Output>
void run_dopri5(Rhs& f, double t0, double t1, V& y, const IntegratorOptions& opt,
                std::span<const double> outputs, Output& out, Summary& s) {
  constexpr double kSafety = 0.9, kFacMin = 0.2, kFacMax = 10.0, kBeta = 0.04;
  constexpr double kExpo1 = 0.2 - kBeta * 0.75;
  const double eps = std::numeric_limits<double>::epsilon();
  const double hmax = opt.dt_max > 0.0 ? opt.dt_max : t1 - t0;

  V atol = y.clone();
  if (opt.atol_per_state.empty()) {
    fill(atol, opt.atol);
  } else {
    auto host = Kokkos::create_mirror_view(atol.view());
    for (std::size_t i = 0; i < atol.size(); ++i) host(i) = opt.atol_per_state[i];
    Kokkos::deep_copy(atol.view(), host);
  }
  V y_new = y.clone();
  V scratch = y.clone();
  Dopri5<V> stepper(y);
  std::size_t j = 0;
  double t = t0;
  while (j < outputs.size() && outputs[j] == t) out(j++, t, y);
  stepper.start(f, t, y);

  double h = opt.dt;
  if (h <= 0.0) {
    // Hairer's initial step: balance ‖y0‖ against ‖f0‖ and the 2nd derivative.
    V w = y.clone();
    {
      auto yv = y.view();
      auto av = atol.view();
      auto wv = w.view();
      const double rtol = opt.rtol;
      Kokkos::parallel_for(
          "costate::dopri5::weights",
          Kokkos::RangePolicy<typename V::execution_space>(0, y.size()),
          KOKKOS_LAMBDA(std::size_t i) {
            const double ay = yv(i) < 0 ? -yv(i) : yv(i);
            wv(i) = 1.0 / (av(i) + rtol * ay);
          });
    }
    const double dnf = wrms_norm(stepper.k1(), w);
    const double dny = wrms_norm(y, w);
    h = (dnf <= 1e-5 || dny <= 1e-5) ? 1e-6 : 0.01 * dny / dnf;
    h = std::min(h, hmax);
    linear_sum(scratch, 1.0, y, h, stepper.k1());
    V f1 = y.clone();
    f(t + h, scratch, f1);
    linear_sum(f1, 1.0, f1, -1.0, stepper.k1());
    const double der2 = wrms_norm(f1, w) / h;
    const double der12 = std::max(std::abs(der2), dnf);
    const double h1 = der12 <= 1e-15 ? std::max(1e-6, h * 1e-3) : std::pow(0.01 / der12, 0.2);
    h = std::min({100.0 * h, h1, hmax});
    // The guess is 0.01·‖y0‖/‖f0‖ at most: where y0 is near 0 and f0 is not
    // (a state crossing 0 at t0 ≠ 0, atol 1e-14) it can fall below the
    // round-off of t0, and the first step would end the run as a step-size
    // underflow. Start at the smallest step the loop accepts instead; the
    // controller grows it by up to kFacMax a step. Runs whose guess was
    // above that floor take the same steps as before.
    h = std::max(h, std::max(opt.dt_min, 16.0 * eps * std::abs(t0)));
  }

  double fac_old = 1e-4;
  bool last_rejected = false;
  double forced = std::numeric_limits<double>::infinity();  // a retaken step's end
  bool stop = false;
  // Hairer's stiffness test: every kStiffEvery accepted steps, and on each
  // step while a run of stiff estimates is counted.
  constexpr std::int64_t kStiffEvery = 10, kStiffRun = 15, kNonStiffRun = 6;
  constexpr double kStabilityLimit = 3.25;
  std::int64_t stiff_run = 0, non_stiff_run = 0;
  while (t < t1 && !stop) {
    if (s.steps + s.rejected_steps >= opt.max_steps) {
      s.termination = Termination::MaxStepsReached;
      s.message = "reached integrator.max_steps = " + std::to_string(opt.max_steps) + " at " +
                  at_time(t, s.steps) +
                  "; raise max_steps, loosen rtol/atol, or the problem may be stiff";
      break;
    }
    h = std::min(h, hmax);
    // Land exactly on t1 and the landing times — and on every output time
    // when stop_at_outputs.
    const double target = std::min({opt.stop_at_outputs && j < outputs.size() ? outputs[j] : t1,
                                    opt.next_landing(t, t1), forced});
    bool last = false;
    if (t + 1.01 * h >= target) {
      h = target - t;
      last = true;
    }
    const double h_floor = std::max(opt.dt_min, 16.0 * eps * std::max(std::abs(t), 1e-300));
    if (h < h_floor) {
      std::ostringstream os;
      os.precision(6);
      os << "step size " << h << " fell below the limit " << h_floor << " at "
         << at_time(t, s.steps)
         << "; the solution may blow up near this time, or the problem is too stiff for dopri5";
      s.termination = Termination::StepSizeUnderflow;
      s.message = os.str();
      break;
    }
    // The step as its end time holds it: h = t_end − t, the step a replay of
    // these times takes (scheme.hpp), so that the gradient's forward pass
    // recomputes this run's states bit for bit.
    const double t_end = last ? target : t + h;
    h = t_end - t;
    stepper.attempt(f, t, h, y, y_new);
    const double err = stepper.error_norm(y, y_new, opt.rtol, atol);
    if (!std::isfinite(err)) {
      // The trial state overflowed: shrink hard and retry.
      ++s.rejected_steps;
      last_rejected = true;
      h *= kFacMin;
      continue;
    }
    const double fac11 = std::pow(err, kExpo1);
    double fac = fac11 / std::pow(fac_old, kBeta);
    fac = std::clamp(fac / kSafety, 1.0 / kFacMax, 1.0 / kFacMin);
    double h_new = h / fac;
    if (err <= 1.0 && opt.step_watch) {
      const StepVerdict v =
          opt.step_watch(t, std::span<const double>(y.data(), y.size()), t_end,
                         std::span<const double>(y_new.data(), y_new.size()));
      if (v.kind == StepVerdict::Kind::Retry) {
        forced = v.t;
        ++s.rejected_steps;
        h = v.t - t;
        continue;
      }
      stop = v.kind == StepVerdict::Kind::Stop;
    }
    if (err <= 1.0) {
      fac_old = std::max(err, 1e-4);
      ++s.steps;
      if (stiff_run > 0 || s.steps % kStiffEvery == 0) {
        if (stepper.stiffness_estimate(y_new) > kStabilityLimit) {
          non_stiff_run = 0;
          if (++stiff_run == kStiffRun && std::isnan(s.stiff_from)) s.stiff_from = t;
        } else if (++non_stiff_run == kNonStiffRun) {
          stiff_run = 0;
        }
      }
      s.last_step = h;
      const double t_new = t_end;
      stepper.accept(h, y, y_new, j < outputs.size() && outputs[j] < t_new);
      // FSAL: k1 of the next step is f(t + h, y_new), which a replay
      // evaluates at t_new; where t + h rounds elsewhere, evaluate it there.
      const bool refresh_k1 = t + h != t_new;
      while (j < outputs.size() && outputs[j] <= t_new) {
        const double t_out = outputs[j];
        if (t_out == t_new) {
          out(j, t_new, y_new);
        } else {
          stepper.interpolate((t_out - t) / h, scratch);
          out(j, t_out, scratch);
        }
        ++j;
      }
      std::swap(y, y_new);
      t = t_new;
      if (refresh_k1) stepper.start(f, t, y);
      s.final_time = t;
      if (opt.on_step) opt.on_step(t);
      if (last_rejected) h_new = std::min(h_new, h);
      last_rejected = false;
    } else {
      h_new = h / std::min(1.0 / kFacMin, fac11 / kSafety);
      ++s.rejected_steps;
      last_rejected = true;
    }
    h = h_new;
  }
  s.final_time = t;
}

}  // namespace detail

/// Integrates y' = f(t, y) from t0 to t1 in place on `y` (any costate::Vector
/// type V, serial or distributed; collective when distributed). `f` is
/// `void(double t, const V& y, const V& dydt)`; `out(j, t, y)` is called once
/// per output time, in order. Returns the summary; `y` holds the state at
/// Summary::final_time.
template <class V, class Rhs, class Output>
Summary integrate_vector(Rhs&& f, double t0, double t1, V& y, const IntegratorOptions& options,
                         std::span<const double> output_times, Output&& out) {
  COSTATE_CHECK(std::isfinite(t0) && std::isfinite(t1) && t1 > t0,
                "time.end must be greater than time.start: start = "
                    << costate::detail::format_value(t0)
                    << ", end = " << costate::detail::format_value(t1));
  options.validate(y.size());
  COSTATE_CHECK(!is_implicit(options.method),
                "integrator.method = " << to_string(options.method)
                                       << " is implicit: it needs the model's Jacobian, so use "
                                          "ode::integrate with an ode::Problem");
  COSTATE_CHECK(!is_cvodes(options.method) && !is_idas(options.method),
                "integrator.method = " << to_string(options.method)
                                       << " (SUNDIALS) needs ode::integrate with an "
                                          "ode::Problem (it takes AD Jacobians of the model)");
  detail::validate_output_times(output_times, t0, t1);
  Summary s;
  s.method = options.method;
  s.final_time = t0;
  auto start = std::chrono::steady_clock::now();
  auto counted = [&](double t, const V& yy, const V& dydt) {
    ++s.rhs_evaluations;
    f(t, yy, dydt);
  };
  if (!all_finite(y)) {
    s.termination = Termination::NonFiniteState;
    s.message = "the initial state is not finite";
    return s;
  }
  if (options.fixed_step()) {
    detail::run_fixed(counted, t0, t1, y, options, output_times, out, s);
  } else {
    detail::run_dopri5(counted, t0, t1, y, options, output_times, out, s);
  }
  s.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (s.success()) s.message = "reached t1";
  return s;
}

namespace detail {
/// ode::integrate on the compiled System of a model (src/ode/integrate.cpp:
/// every stepper, compiled once): the trajectory of x = (y, z) at `outputs`
/// (validated here; ascending inside [t0, t1]).
Solution integrate_system(const System& system, std::span<const double> y0,
                          std::span<const double> p, double t0, double t1,
                          std::span<const double> outputs, const IntegratorOptions& options);
}  // namespace detail

/// Integrates an ode::Problem with the given options; returns the trajectory
/// at the problem's output times (t0 and t1 when none are given) and the
/// summary. Throws costate::Error on invalid settings (see
/// IntegratorOptions::validate), never on a numerical failure.
template <Model M>
Solution integrate(const Problem<M>& problem, const IntegratorOptions& options = {}) {
  const std::size_t n = problem.n_states();
  COSTATE_CHECK(n > 0, "the problem has no states (empty y0)");
  const std::vector<double> default_outputs{problem.t0(), problem.t1()};
  const std::span<const double> outputs =
      problem.output_times.empty() ? std::span<const double>(default_outputs)
                                   : std::span<const double>(problem.output_times);
  // The model's System (no objective terms): make_system is the only
  // per-model code; the steppers run on it compiled.
  static constexpr detail::NoObjectiveTerms kNone{};
  SystemOptions so;
  if (is_cvodes(options.method) || is_idas(options.method)) so.dense_max = cvodes::kBindingDenseMax;
  const System system = make_system(problem.model, kNone, n, problem.p.size(), so);
  return detail::integrate_system(system, problem.y0, problem.p, problem.t0(), problem.t1(),
                                  outputs, options);
}

}  // namespace costate::ode
