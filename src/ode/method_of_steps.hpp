#pragma once
// The method of steps' set-up, shared by integrate_with_delays /
// forward_sensitivities_with_delays (history.cpp) and adjoint_with_delays
// (delay_adjoint.cpp): the checks of its arguments, the lags the
// right-hand side reads, each segment's end and its sample times.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/history.hpp"

namespace costate::ode::detail {

/// Times closer than this (relative) are one node / one output.
inline constexpr double kSameTime = 1e-13;

inline bool same_time(double a, double b) {
  return std::abs(a - b) <= kSameTime * std::max({1.0, std::abs(a), std::abs(b)});
}

/// The arguments' checks (`who` names the caller in the messages) and the
/// refusals of the method of steps: events, DAEs. Returns the text naming
/// the first delay, for messages.
inline std::string check_method_of_steps(const char* who, const EquationModel& model,
                                         std::span<const double> y0, std::span<const double> p,
                                         double t0, double t1, std::span<const double> outputs,
                                         const std::vector<DelayedInput>& inputs) {
  COSTATE_CHECK_EQ(y0.size(), model.states().size(), who << ": one initial value per state");
  COSTATE_CHECK_EQ(p.size(), model.parameters().size(), who << ": one value per parameter");
  COSTATE_CHECK(t1 > t0, who << ": t1 = " << t1 << " must exceed t0 = " << t0);
  for (std::size_t j = 0; j < outputs.size(); ++j)
    COSTATE_CHECK(outputs[j] >= t0 && outputs[j] <= t1 && (j == 0 || outputs[j] > outputs[j - 1]),
                  who << ": output time " << j << " (" << outputs[j]
                      << ") must be ascending within [" << t0 << ", " << t1 << "]");
  const std::string first = inputs.empty() ? std::string("delay") : inputs.front().text;
  if (model.n_events() > 0)
    throw Error(first + ": delay() in a model with events is not supported (the event driver "
                        "has no history hook for the method of steps)");
  if (!model.algebraic_states().empty())
    throw Error(first + ": delay() in a DAE (algebraic rules, fast reactions) is not supported "
                        "(the DAE integrators have no history hook for the method of steps)");
  return first;
}

/// The lags the right-hand side reads (constant, positive: refused by name
/// otherwise; `nested`: the message's end refusing a quantity or lag that
/// reads another delay, none when empty).
struct SegmentLags {
  std::vector<std::size_t> read;  ///< the inputs the right-hand side reads
  std::vector<double> lag;        ///< their lags at p
  double d_min = std::numeric_limits<double>::infinity();  ///< the segments' length
  std::vector<double> ends;       ///< t0 + d for each lag: segment ends
};

inline SegmentLags segment_lags(const EquationModel& model, std::span<const double> y0,
                                std::span<const double> p, double t0,
                                const std::vector<DelayedInput>& inputs,
                                const DelayedInputs& slots, const std::string& nested) {
  SegmentLags out;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!slots.read_by_rhs(k)) continue;
    if (!slots.constant_lag(k))
      throw Error(inputs[k].text + ": a delay whose lag changes in time (it reads time, the state "
                                   "or another delay) in the right-hand side is not supported "
                                   "(the method of steps needs a constant lag)");
    if (!nested.empty() && slots.reads_inputs(k)) throw Error(inputs[k].text + nested);
    std::vector<double> v{t0};
    v.insert(v.end(), y0.begin(), y0.end());
    v.insert(v.end(), p.begin(), p.end());
    for (std::size_t j = 0; j < model.intermediate_names().size(); ++j)
      v.push_back(model.intermediate(j).evaluate(std::span<const double>(v)));
    const double d = inputs[k].lag.evaluate(std::span<const double>(v));
    if (!(d > 0.0)) {
      std::ostringstream o;
      o << inputs[k].text << ": a lag of " << d
        << " in the right-hand side is not supported (the method of steps needs a positive "
           "constant lag)";
      throw Error(o.str());
    }
    out.read.push_back(k);
    out.lag.push_back(d);
    out.d_min = std::min(out.d_min, d);
    out.ends.push_back(t0 + d);
  }
  return out;
}

/// The end of the segment starting at a: a + d_min, the next t0 + d, t1.
inline double segment_end(const SegmentLags& lags, double a, double t1) {
  double b = std::isfinite(lags.d_min) ? std::min(a + lags.d_min, t1) : t1;
  for (double e : lags.ends)
    if (e > a && !same_time(e, a)) b = std::min(b, e);
  if (same_time(b, t1)) b = t1;
  return b;
}

/// The sample times of [a, b] that become history nodes (kSamplesPerSegment
/// of them; 8× for a single segment) and the outputs inside, ending at b.
inline std::vector<double> segment_samples(const SegmentLags& lags, double a, double b,
                                           std::span<const double> outputs) {
  const int samples = std::isfinite(lags.d_min) ? kSamplesPerSegment : 8 * kSamplesPerSegment;
  std::vector<double> times;
  for (int j = 1; j < samples; ++j) times.push_back(a + (b - a) * j / samples);
  for (double t : outputs)
    if (t > a && t < b && !same_time(t, a) && !same_time(t, b)) times.push_back(t);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end(), same_time), times.end());
  while (!times.empty() && same_time(times.back(), b)) times.pop_back();
  times.push_back(b);
  return times;
}

/// Whether integrate_with_delays runs adjoint_with_delays' forward pass
/// (delay_forward): a model with states, an integrator with a discrete
/// adjoint (support.hpp: not the CVODES methods), no delay the right-hand
/// side reads whose quantity reads another (nested delays, which the
/// adjoint refuses).
bool delay_forward_applies(const EquationModel& model, const std::vector<DelayedInput>& inputs,
                           const IntegratorOptions& options);

/// adjoint_with_delays' forward pass alone (delay_adjoint.cpp): each
/// segment's steps planned to land on its sample times and replayed by the
/// discrete adjoint's scheme, the samples the history's nodes, the outputs
/// nodes. Throws costate::Error where adjoint_with_delays does (a failed
/// integration among them).
Solution delay_forward(const EquationModel& model, std::span<const double> y0,
                       std::span<const double> p, double t0, double t1,
                       std::span<const double> outputs, const std::vector<DelayedInput>& inputs,
                       const IntegratorOptions& options, History::Initial initial_history);

}  // namespace costate::ode::detail
