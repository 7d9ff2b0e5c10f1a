// ode::History, ode::DelayedInputs and integrate_with_delays: delay
// differential equations by the method of steps (include/costate/ode/history.hpp).

#include "costate/ode/history.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "costate/core/error.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/integrate.hpp"

namespace costate::ode {

namespace {

/// Times closer than this (relative) are one node / one output.
constexpr double kSameTime = 1e-13;

bool same_time(double a, double b) {
  return std::abs(a - b) <= kSameTime * std::max({1.0, std::abs(a), std::abs(b)});
}

/// Nested delays deeper than this are a cycle (a delay reading itself at
/// the start time, where the lag no longer moves back).
constexpr int kMaxDepth = 10000;

}  // namespace

// ---- History ------------------------------------------------------------

void History::append(double t, std::span<const double> y, std::span<const double> dydt) {
  COSTATE_CHECK_EQ(y.size(), n_, "History::append: one value per state");
  COSTATE_CHECK_EQ(dydt.size(), n_, "History::append: one derivative per state");
  if (!t_.empty()) {
    if (same_time(t, t_.back())) return;
    COSTATE_CHECK(t > t_.back(), "History::append: time " << t << " before the last node "
                                                           << t_.back());
  }
  t_.push_back(t);
  y_.insert(y_.end(), y.begin(), y.end());
  f_.insert(f_.end(), dydt.begin(), dydt.end());
}

void History::value(double t, std::span<double> y) const {
  COSTATE_CHECK(!t_.empty(), "History::value: the history is empty");
  COSTATE_CHECK_EQ(y.size(), n_, "History::value: one value per state");
  if (n_ == 0) return;
  if (t < t_.front() && initial_) {
    initial_(t, y);
    return;
  }
  if (t <= t_.front() || t_.size() == 1) {
    std::copy_n(y_.begin(), n_, y.begin());
    return;
  }
  if (t > t_.back()) {
    if (!same_time(t, t_.back()))
      throw Error("ode::History: y(" + std::to_string(t) + ") asked beyond the history's end (t = " +
                  std::to_string(t_.back()) + "): a delay read before its time was integrated");
    std::copy_n(y_.end() - static_cast<long>(n_), n_, y.begin());
    return;
  }
  // The piece [t_i, t_{i+1}] holding t.
  const std::size_t i1 = static_cast<std::size_t>(
      std::upper_bound(t_.begin(), t_.end(), t) - t_.begin());
  const std::size_t i = std::min(i1, t_.size() - 1) - 1;
  const double h = t_[i + 1] - t_[i], s = (t - t_[i]) / h;
  const double s2 = s * s, s3 = s2 * s;
  const double h00 = 2 * s3 - 3 * s2 + 1, h10 = s3 - 2 * s2 + s, h01 = -2 * s3 + 3 * s2,
               h11 = s3 - s2;
  const double* ya = &y_[i * n_];
  const double* yb = &y_[(i + 1) * n_];
  const double* fa = &f_[i * n_];
  const double* fb = &f_[(i + 1) * n_];
  for (std::size_t k = 0; k < n_; ++k)
    y[k] = h00 * ya[k] + h * h10 * fa[k] + h01 * yb[k] + h * h11 * fb[k];
}

// ---- DelayedInputs ------------------------------------------------------

namespace {
std::vector<expr::Program> intermediates_of(const EquationModel& model) {
  std::vector<expr::Program> w;
  for (std::size_t k = 0; k < model.intermediate_names().size(); ++k)
    w.push_back(model.intermediate(k));
  return w;
}
std::vector<expr::Program> equations_of(const EquationModel& model) {
  std::vector<expr::Program> f;
  for (std::size_t i = 0; i < model.states().size(); ++i) f.push_back(model.equation(i));
  return f;
}
}  // namespace

DelayedInputs::DelayedInputs(const EquationModel& model, std::vector<DelayedInput> inputs,
                             const History& history)
    : DelayedInputs(model.states().size(), model.parameters().size(), intermediates_of(model),
                    equations_of(model), std::move(inputs), history) {}

DelayedInputs::DelayedInputs(std::size_t n_states, std::size_t n_parameters,
                             std::vector<expr::Program> intermediates,
                             std::span<const expr::Program> equations,
                             std::vector<DelayedInput> inputs, const History& history)
    : ny_(n_states), np_(n_parameters), w_(std::move(intermediates)),
      inputs_(std::move(inputs)), history_(&history) {
  const std::size_t ny = ny_, np = np_, nw = w_.size(), n_in = inputs_.size();
  // What each variable depends on: t, the state, which inputs (through
  // intermediates, in their evaluation order).
  struct Deps {
    bool time = false, state = false;
    std::vector<bool> input;
  };
  std::vector<long> slot_input(np, -1);
  for (std::size_t k = 0; k < n_in; ++k) {
    COSTATE_CHECK(inputs_[k].parameter < np, inputs_[k].text << ": delayed input's slot "
                                                             << inputs_[k].parameter
                                                             << " is not a parameter");
    slot_input[inputs_[k].parameter] = static_cast<long>(k);
  }
  std::vector<Deps> w(nw, Deps{false, false, std::vector<bool>(n_in, false)});
  auto deps_of = [&](const expr::Program& prog) {
    Deps d{false, false, std::vector<bool>(n_in, false)};
    for (std::uint32_t v : prog.used_variables()) {
      if (v == 0) d.time = true;
      else if (v <= ny) d.state = true;
      else if (v <= ny + np) {
        if (slot_input[v - 1 - ny] >= 0) d.input[static_cast<std::size_t>(slot_input[v - 1 - ny])] = true;
      } else {
        const Deps& o = w[v - 1 - ny - np];
        d.time |= o.time;
        d.state |= o.state;
        for (std::size_t k = 0; k < n_in; ++k) d.input[k] = d.input[k] || o.input[k];
      }
    }
    return d;
  };
  for (std::size_t k = 0; k < nw; ++k) w[k] = deps_of(w_[k]);
  rhs_reads_.assign(n_in, false);
  for (const expr::Program& equation : equations) {
    const Deps d = deps_of(equation);
    for (std::size_t k = 0; k < n_in; ++k) rhs_reads_[k] = rhs_reads_[k] || d.input[k];
  }
  auto listed = [&](const std::vector<bool>& b) {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < b.size(); ++k)
      if (b[k]) out.push_back(k);
    return out;
  };
  for (const DelayedInput& in : inputs_) {
    Deps q = deps_of(in.quantity);
    if (!in.quantity_before_start.empty()) {
      const Deps b = deps_of(in.quantity_before_start);
      for (std::size_t k = 0; k < n_in; ++k) q.input[k] = q.input[k] || b.input[k];
    }
    const Deps l = deps_of(in.lag);
    quantity_reads_.push_back(listed(q.input));
    lag_reads_.push_back(listed(l.input));
    constant_lag_.push_back(!l.time && !l.state && lag_reads_.back().empty());
  }
}

double DelayedInputs::evaluate(const expr::Program& program, double t, std::span<const double> y,
                               std::span<double> p, const std::vector<std::size_t>& slots,
                               int depth) const {
  for (std::size_t j : slots) p[inputs_[j].parameter] = value(j, t, y, p, depth + 1);
  std::vector<double> v{t};
  if (y.empty()) v.resize(1 + ny_, 0.0);
  else v.insert(v.end(), y.begin(), y.end());
  v.insert(v.end(), p.begin(), p.end());
  // The programs are over (t, y, p, w): every intermediate, in order.
  for (const expr::Program& w : w_) v.push_back(w.evaluate(std::span<const double>(v)));
  return program.evaluate(std::span<const double>(v));
}

double DelayedInputs::value(std::size_t k, double t, std::span<const double> y,
                            std::span<const double> p, int depth) const {
  const DelayedInput& in = inputs_[k];
  if (depth > kMaxDepth)
    throw Error(in.text + ": delays read one another in a cycle (more than " +
                std::to_string(kMaxDepth) + " nested reads at t = " + std::to_string(t) + ")");
  std::vector<double> q(p.begin(), p.end());
  const double d = evaluate(in.lag, t, y, q, lag_reads_[k], depth);
  if (!(d >= 0.0)) {
    std::ostringstream o;
    o << in.text << ": the lag is " << d << " at t = " << t
      << " (SBML requires a delay that is not negative)";
    throw Error(o.str());
  }
  if (d == 0.0) return evaluate(in.quantity, t, y, q, quantity_reads_[k], depth);
  double tau = t - d;
  std::vector<double> y_tau(ny_);
  if (history_->empty()) throw Error(in.text + ": no history to read a delay from");
  // Before t0 the state's history is y(t0) (History::value), while time
  // itself reads τ: an x given by a formula in time is that formula at τ
  // (the suite's analytic cases, e.g. 00937's sin(10·(t − 0.2)) at t < 0.2).
  history_->value(tau, y_tau);
  q.assign(p.begin(), p.end());
  const bool before = tau < history_->t0() && !in.quantity_before_start.empty();
  return evaluate(before ? in.quantity_before_start : in.quantity, tau, y_tau, q,
                  quantity_reads_[k], depth);
}

void DelayedInputs::fill(double t, std::span<const double> y, std::span<double> p,
                         bool rhs_only) const {
  for (std::size_t k = 0; k < inputs_.size(); ++k)
    if (!rhs_only || rhs_reads_[k]) p[inputs_[k].parameter] = value(k, t, y, p, 0);
}

// ---- integrate_with_delays ----------------------------------------------

namespace {

/// The model with its slots filled from the history at each evaluation
/// (the slots the right-hand side reads: constant lags, quantities from the
/// history alone, so they do not depend on y(t) and the Jacobian is the
/// model's own).
struct DelayedModel {
  const EquationModel* model;
  const DelayedInputs* slots;
  std::vector<double> p;  ///< the parameters the slots' quantities read

  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> pt, std::span<T> dydt) const {
    std::vector<double> q = p;
    slots->fill(t, {}, q, true);
    std::vector<T> with(pt.begin(), pt.end());
    if constexpr (std::is_constructible_v<T, double>) {
      for (std::size_t k = 0; k < slots->inputs().size(); ++k)
        if (slots->read_by_rhs(k)) {
          const std::size_t j = slots->inputs()[k].parameter;
          with[j] = T(q[j]);
        }
    }
    model->rhs<T>(t, y, std::span<const T>(with), dydt);
  }
};

}  // namespace

DelayedSolution integrate_with_delays(const EquationModel& model, std::span<const double> y0,
                                      std::span<const double> p, double t0, double t1,
                                      std::span<const double> outputs,
                                      const std::vector<DelayedInput>& inputs,
                                      const IntegratorOptions& options,
                                      History::Initial initial_history) {
  const std::size_t ny = model.states().size();
  COSTATE_CHECK_EQ(y0.size(), ny, "integrate_with_delays: one initial value per state");
  COSTATE_CHECK_EQ(p.size(), model.parameters().size(),
                   "integrate_with_delays: one value per parameter");
  COSTATE_CHECK(t1 > t0, "integrate_with_delays: t1 = " << t1 << " must exceed t0 = " << t0);
  for (std::size_t j = 0; j < outputs.size(); ++j)
    COSTATE_CHECK(outputs[j] >= t0 && outputs[j] <= t1 && (j == 0 || outputs[j] > outputs[j - 1]),
                  "integrate_with_delays: output time " << j << " (" << outputs[j]
                                                        << ") must be ascending within [" << t0
                                                        << ", " << t1 << "]");
  const std::string first = inputs.empty() ? std::string("delay") : inputs.front().text;
  if (model.n_events() > 0)
    throw Error(first + ": delay() in a model with events is not supported (the event driver "
                        "has no history hook for the method of steps)");
  if (!model.algebraic_states().empty())
    throw Error(first + ": delay() in a DAE (algebraic rules, fast reactions) is not supported "
                        "(the DAE integrators have no history hook for the method of steps)");
  DelayedSolution out{Solution{}, History(ny)};
  out.solution.n_states = ny;
  const DelayedInputs slots(model, inputs, out.history);

  // The method of steps' segment: the shortest lag the right-hand side reads.
  double d_min = std::numeric_limits<double>::infinity();
  std::vector<double> q(p.begin(), p.end());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!slots.read_by_rhs(k)) continue;
    if (!slots.constant_lag(k))
      throw Error(inputs[k].text + ": a delay whose lag changes in time (it reads time, the state "
                                   "or another delay) in the right-hand side is not supported "
                                   "(the method of steps needs a constant lag)");
    std::vector<double> v{t0};
    v.insert(v.end(), y0.begin(), y0.end());
    v.insert(v.end(), q.begin(), q.end());
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
    d_min = std::min(d_min, d);
  }

  const DelayedModel dm{&model, &slots, std::vector<double>(p.begin(), p.end())};
  std::vector<double> f(ny), y(y0.begin(), y0.end());
  // The node at t0: its derivative reads the slots at t0 (the initial
  // history), which read the node's y.
  out.history.set_initial(initial_history);
  out.history.append(t0, y, f);  // f = 0 for now: the slots at t0 read the history alone
  dm.rhs<double>(t0, y, p, f);
  out.history = History(ny);
  out.history.append(t0, y, f);
  out.history.set_initial(initial_history);
  Summary& total = out.solution.summary;
  total.method = options.method;
  std::size_t next = 0;
  auto record = [&](double t, std::span<const double> yt) {
    while (next < outputs.size() && (outputs[next] < t || same_time(outputs[next], t))) {
      if (same_time(outputs[next], t)) {
        out.solution.t.push_back(outputs[next]);
        out.solution.y.insert(out.solution.y.end(), yt.begin(), yt.end());
      }
      ++next;
    }
  };
  record(t0, y);
  const bool segmented = std::isfinite(d_min);
  const int samples = segmented ? kSamplesPerSegment : 8 * kSamplesPerSegment;
  double a = t0;
  while (a < t1 && !same_time(a, t1)) {
    double b = segmented ? std::min(a + d_min, t1) : t1;
    if (same_time(b, t1)) b = t1;
    std::vector<double> times;
    for (int j = 1; j < samples; ++j) times.push_back(a + (b - a) * j / samples);
    for (double t : outputs)
      if (t > a && t < b && !same_time(t, a) && !same_time(t, b)) times.push_back(t);
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end(), same_time), times.end());
    while (!times.empty() && same_time(times.back(), b)) times.pop_back();
    times.push_back(b);
    Problem<DelayedModel> problem{dm, y, dm.p, {a, b}, times};
    // dopri5 restarts with the last segment's step: its own first-step
    // guess 0.01·‖y‖/‖f‖ falls below round-off where y crosses 0 at a
    // segment's start (dx/dt = −x(t − 1) at t = 1).
    IntegratorOptions segment_options = options;
    if (options.method == Method::Dopri5 && options.dt <= 0.0 && total.last_step > 0.0)
      segment_options.dt = std::min(total.last_step, b - a);
    const Solution seg = integrate(problem, segment_options);
    total.steps += seg.summary.steps;
    total.rejected_steps += seg.summary.rejected_steps;
    total.rhs_evaluations += seg.summary.rhs_evaluations;
    total.jacobian_evaluations += seg.summary.jacobian_evaluations;
    total.factorizations += seg.summary.factorizations;
    total.newton_iterations += seg.summary.newton_iterations;
    total.wall_seconds += seg.summary.wall_seconds;
    total.last_step = seg.summary.last_step;
    for (std::size_t j = 0; j < seg.n_outputs(); ++j) {
      const std::span<const double> yj = seg.state(j);
      dm.rhs<double>(seg.t[j], yj, p, f);
      out.history.append(seg.t[j], yj, f);
      record(seg.t[j], yj);
      total.final_time = seg.t[j];
    }
    if (!seg.summary.success()) {
      total.termination = seg.summary.termination;
      total.message = seg.summary.message + " (method-of-steps segment [" + std::to_string(a) +
                      ", " + std::to_string(b) + "])";
      return out;
    }
    y.assign(seg.y.end() - static_cast<long>(ny), seg.y.end());
    a = b;
  }
  total.termination = Termination::Success;
  total.message = "reached t1";
  return out;
}

}  // namespace costate::ode
