// Events (events.hpp), added once: the driver that integrates a model with
// events in segments and records what fired in the step plan
// (run_with_events: root location by retaking the step, SBML's firing
// rules), the jump of one instant and its linearization (InstantJump), and
// the scheme decorator that makes every sweep — adjoint, adjoint block,
// tangents, observed tangents — cross the instants of a plan (EventScheme).
#include "ode/dae.hpp"
#include "ode/events_internal.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/event_order.hpp"
#include "costate/ode/idas.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/steppers/bdf.hpp"

namespace costate::ode {
namespace detail {

void plan_sdirk3(const System& system, std::span<const double> p, std::span<double> x,
                 double t0, double t1, const IntegratorOptions& options,
                 std::span<const double> stops, Summary& s);
void plan_bdf(const System& system, std::span<const double> p, std::span<double> x, double t0,
              double t1, const IntegratorOptions& options, std::span<const double> stops,
              Summary& s, std::vector<int>& orders, BdfForwardRecord* record);

namespace {

using Dual8 = ad::Dual<double, 8>;

std::string time_text(double t) {
  std::ostringstream os;
  os.precision(16);
  os << t;
  return os.str();
}

/// f's values (m) and its dense derivative with respect to the inputs
/// u = (t, y, p) (m × (1 + n + n_p), row-major) by ⌈(1 + n + n_p)/8⌉ passes
/// on Dual<double, 8>; f(t, y, p, out) on Dual8.
template <class F>
void derivative_in_t_y_p(F&& f, double t, std::span<const double> y, std::span<const double> p,
                         std::size_t m, std::vector<double>& value, std::vector<double>& jac) {
  const std::size_t n = y.size(), np = p.size(), w = 1 + n + np;
  std::vector<Dual8> yd(n), pd(np), out(m);
  value.assign(m, 0.0);
  jac.assign(m * w, 0.0);
  for (std::size_t first = 0; first < w; first += 8) {
    Dual8 td(t);
    for (std::size_t q = 0; q < n; ++q) yd[q] = Dual8(y[q]);
    for (std::size_t j = 0; j < np; ++j) pd[j] = Dual8(p[j]);
    const std::size_t lanes = std::min<std::size_t>(8, w - first);
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::size_t u = first + l;
      const int lane = static_cast<int>(l);
      if (u == 0)
        td.set_tangent(lane, 1.0);
      else if (u <= n)
        yd[u - 1].set_tangent(lane, 1.0);
      else
        pd[u - 1 - n].set_tangent(lane, 1.0);
    }
    for (auto& o : out) o = Dual8(0.0);
    f(td, std::span<const Dual8>(yd), std::span<const Dual8>(pd), std::span<Dual8>(out));
    for (std::size_t r = 0; r < m; ++r) {
      value[r] = out[r].value();
      for (std::size_t l = 0; l < lanes; ++l) jac[r * w + first + l] = out[r].tangent(static_cast<int>(l));
    }
  }
}

}  // namespace

std::string event_label(const EventModel& events, std::size_t k) {
  const EventAttributes a = events.attributes(k);
  return a.name.empty() ? "event " + std::to_string(k) : "event '" + a.name + "'";
}

// ------------------------------------------------------------------ the jump

InstantJump::InstantJump(const System& system)
    : sys_(system), ev_(system.events()), n_(system.n_model_states()), nx_(system.n_states()),
      np_(system.n_parameters()) {
  COSTATE_CHECK(ev_ != nullptr, "events: the System has no events");
  attrs_.resize(ev_->n_events());
  for (std::size_t k = 0; k < attrs_.size(); ++k) attrs_[k] = ev_->attributes(k);
}

void InstantJump::apply(const EventInstant& inst, double t, std::span<double> x,
                        std::span<const double> p, bool linearize, std::size_t index) {
  const std::size_t E = inst.fired.size();
  linked_ = inst.delayed || !inst.scheduled.empty();
  // The delayed executions' origins (a plan without them cannot replay their
  // values from the trigger time, nor differentiate their time).
  COSTATE_CHECK(!inst.delayed || inst.origin.size() == E,
                "events: the instant at t = " << time_text(t)
                                              << " executes a delayed event but the step plan does "
                                                 "not record the instant that scheduled it");
  const std::string first_label =
      E > 0 ? event_label(*ev_, inst.fired[0])
            : (inst.scheduled.empty() ? std::string("no event") : event_label(*ev_, inst.scheduled[0]));
  // A caller that does not name the instant's index cannot carry the links.
  COSTATE_CHECK(index != kNoIndex || !linked_,
                "events: internal error, the instant at t = "
                    << time_text(t) << " (" << first_label
                    << ") schedules or executes a delayed event and was applied without its "
                       "index in the step plan");
  if (linearize && linked_) {
    // Several delayed executions at one instant share its time when they
    // were scheduled at one instant with one delay (schedule() checks that
    // their delays' derivatives agree): τ_e is then one function of the
    // inputs. Executions scheduled at different instants (different delays
    // falling at one time), or a delayed execution at a root crossing, only
    // coincide at this point: each execution then moves with its own time
    // (multi_, set_times below).
    std::size_t delayed = 0;
    int origin = -1;
    bool one_origin = true;
    for (const int o : inst.origin) {
      if (o < 0) continue;
      ++delayed;
      one_origin = one_origin && (origin < 0 || o == origin);
      origin = o;
    }
    multi_ = delayed > 0 && !(inst.root < 0 && one_origin);
  } else {
    multi_ = false;
  }
  chain_.resize(E + 1);
  chain_[0].assign(x.begin(), x.end());
  exec_.resize(E);
  linearized_ = linearize;
  index_ = index;
  carried_ = {kNoIndex, 0};
  std::vector<double> values;
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t k = inst.fired[e];
    Exec& ex = exec_[e];
    ex.event = k;
    ex.targets = ev_->targets(k);
    ex.source = inst.source[e];
    const int origin = inst.origin.empty() ? -1 : inst.origin[e];
    ex.link = {origin >= 0 ? static_cast<std::size_t>(origin) : kNoIndex, k};
    ex.from_trigger = origin >= 0 && attrs_[k].use_values_from_trigger_time;
    if (origin >= 0 && carried_.first == kNoIndex) carried_ = ex.link;  // the first's time
    chain_[e + 1] = chain_[e];
    if (ex.from_trigger) {
      // SBML: the values computed when the trigger fired, kept by the
      // instant that scheduled the execution.
      const auto it = values_.find(ex.link);
      COSTATE_CHECK(it != values_.end() && it->second.size() == ex.targets.size(),
                    "events: " << event_label(*ev_, k) << " executes at t = " << time_text(t)
                               << " with its values from the trigger time, but the instant "
                                  "that scheduled it (events["
                               << origin << "] of the plan) was not applied before it");
      ex.J.clear();
      for (std::size_t j = 0; j < ex.targets.size(); ++j)
        chain_[e + 1][ex.targets[j]] = it->second[j];
      continue;
    }
    const std::span<const double> src = std::span<const double>(chain_[ex.source]).first(n_);
    if (linearize) {
      derivative_in_t_y_p(
          [&](Dual8 td, std::span<const Dual8> yd, std::span<const Dual8> pd, std::span<Dual8> o) {
            ev_->assign(k, td, yd, pd, o);
          },
          t, src, p, ex.targets.size(), values, ex.J);
    } else {
      values.assign(ex.targets.size(), 0.0);
      ev_->assign(k, t, src, p, values);
    }
    for (std::size_t j = 0; j < ex.targets.size(); ++j) chain_[e + 1][ex.targets[j]] = values[j];
  }
  t_ = t;
  p_ = p;
  // The delayed executions this instant schedules: their values from the
  // trigger time (and, linearized, the delay's and the values' derivatives).
  schedule(inst, t, p, linearize, index);
  if (sys_.n_algebraic() > 0) {
    // A DAE: the updates assign differential states; the algebraic ones
    // follow from the constraints at x⁺ (a differentiated solve).
    for (const Exec& ex : exec_)
      for (const std::size_t j : ex.targets)
        COSTATE_CHECK(!sys_.algebraic()[j],
                      "events: " << event_label(*ev_, ex.event) << " at t = " << time_text(t)
                                 << " assigns algebraic state " << j
                                 << "; on a DAE an event assigns differential states and the "
                                    "algebraic ones are re-solved from the constraints");
    make_consistent(sys_, p, t, chain_[E], "events (after the instant at t = " + time_text(t) + ")");
    if (linearize) {
      const std::size_t w = 1 + n_ + np_;
      for (const Exec& ex : exec_)
        for (std::size_t j = 0; j < ex.targets.size() && !ex.J.empty(); ++j)
          for (std::size_t q = 0; q < n_; ++q)
            COSTATE_CHECK(!sys_.algebraic()[q] || ex.J[j * w + 1 + q] == 0.0,
                          "events: an update of the instant at t = "
                              << time_text(t) << " reads algebraic state " << q
                              << "; derivatives through events on a DAE need updates and "
                                 "triggers of differential states only (not yet supported)");
    }
  }
  std::copy(chain_[E].begin(), chain_[E].end(), x.begin());
  if (!linearize) return;
  f0_.assign(nx_, 0.0);
  fE_.assign(nx_, 0.0);
  sys_.rhs(t, chain_[0], p, f0_);
  sys_.rhs(t, chain_[E], p, fE_);
  rhs_evaluations_ += 2;
  a_.assign(n_, 0.0);
  b_.assign(np_, 0.0);
  root_ = inst.root;
  gdot_ = 0.0;
  if (multi_) set_times(t, p);
  if (inst.root < 0) return;
  // dτ = −(g_y s⁻ + g_p ṗ)/ġ,  ġ = g_t + g_y f⁻, from the root that located τ.
  const auto r = static_cast<std::size_t>(inst.root);
  std::vector<double> g, jac;
  derivative_in_t_y_p(
      [&](Dual8 td, std::span<const Dual8> yd, std::span<const Dual8> pd, std::span<Dual8> o) {
        ev_->roots(td, yd, pd, o);
      },
      t, std::span<const double>(chain_[0]).first(n_), p, ev_->n_roots(), g, jac);
  const std::size_t w = 1 + n_ + np_;
  const double* row = jac.data() + r * w;
  for (std::size_t q = 0; q < n_ && sys_.n_algebraic() > 0; ++q)
    COSTATE_CHECK(!sys_.algebraic()[q] || row[1 + q] == 0.0,
                  "events: root " << r << " (which fired " << first_label
                                  << ") reads algebraic state " << q << " at t = " << time_text(t)
                                  << "; derivatives through events on a DAE need triggers of "
                                     "differential states and time only (not yet supported)");
  double gdot = row[0];
  for (std::size_t q = 0; q < n_; ++q) gdot += row[1 + q] * f0_[q];
  COSTATE_CHECK(std::isfinite(gdot) && gdot != 0.0,
                "events: root " << r << " (which fired " << first_label
                                << ") does not cross zero transversally at t = " << time_text(t)
                                << " (its time derivative along the solution is " << gdot
                                << "): the event time is not differentiable there");
  for (std::size_t q = 0; q < n_; ++q) a_[q] = -row[1 + q] / gdot;
  for (std::size_t j = 0; j < np_; ++j) b_[j] = -row[1 + n_ + j] / gdot;
  gdot_ = gdot;
}

// An instant where executions of different times coincide (multi_): each
// execution moves with its own time — class 0 the instant's own (the
// root's dτ, or 0), one class per delayed execution (its dτ_e), and an
// undelayed execution its trigger's: the class of the state its values
// were read from (execution source − 1's, class 0 for the state before the
// instant), or, with values from the execution, the class every state it
// may have been triggered at agrees on. Between consecutive executions of
// different classes c → c′ the state is carried from one moving time to
// the other, D ← D + f(x_e)(dτ_c′ − dτ_c): the jumps of two instants an
// instant apart. The derivative is that of the branch where the
// executions keep their order: exact where they commute, one-sided where
// the order changes J (which then jumps where the times cross). The order
// is a branch only when each class's executions (and the root's crossing,
// class 0, first) are consecutive; otherwise the times would have to be
// equal on both sides — refused by name.
void InstantJump::set_times(double t, std::span<const double> p) {
  const std::size_t E = exec_.size();
  cls_.assign(E, 0);
  class_link_.assign(1, Link{kNoIndex, 0});
  for (std::size_t e = 0; e < E; ++e) {
    const Exec& ex = exec_[e];
    if (ex.link.first != kNoIndex) {
      cls_[e] = class_link_.size();
      class_link_.push_back(ex.link);
      continue;
    }
    if (ex.source < e) {
      cls_[e] = state_class(ex.source);
      continue;
    }
    for (std::size_t j = 0; j < e; ++j)
      COSTATE_CHECK(state_class(j + 1) == state_class(0),
                    "events: at t = " << time_text(t) << " " << event_label(*ev_, ex.event)
                                      << " (values from its execution) executes after "
                                      << event_label(*ev_, exec_[j].event)
                                      << ", which coincides with it only at this point: which "
                                         "time it moves with is not known (give it values from "
                                         "the trigger time)");
    cls_[e] = state_class(0);
  }
  // The classes in order (the root's first) must each be one run.
  std::vector<char> seen(class_link_.size(), 0);
  std::size_t last = root_ >= 0 ? 0 : cls_[0];
  seen[last] = 1;
  for (std::size_t e = 0; e < E; ++e) {
    if (cls_[e] == last) continue;
    COSTATE_CHECK(!seen[cls_[e]],
                  "events: at t = " << time_text(t) << " " << event_label(*ev_, exec_[e].event)
                                    << " executes after "
                                    << (e > 0 ? event_label(*ev_, exec_[e - 1].event)
                                              : std::string("the root's crossing"))
                                    << ", which coincides with it only at this point, and after "
                                       "an execution of its own time before that: no order of "
                                       "the times gives this order of executions, so the "
                                       "derivative is not defined there");
    seen[cls_[e]] = 1;
    last = cls_[e];
  }
  // f where the class changes; on a DAE at the state with its algebraic
  // entries re-solved (between two instants the flow is on the constraint).
  fb_.assign(E, {});
  std::vector<double> xc;
  for (std::size_t e = 0; e < E; ++e)
    if (cls_[e] != (e == 0 ? 0 : cls_[e - 1])) {
      fb_[e].assign(nx_, 0.0);
      xc = chain_[e];
      if (sys_.n_algebraic() > 0 && e > 0)
        make_consistent(sys_, p, t, xc, "events (between executions at t = " + time_text(t) + ")");
      sys_.rhs(t, xc, p, fb_[e]);
      ++rhs_evaluations_;
    }
}

std::size_t InstantJump::state_class(std::size_t c) const { return c == 0 ? 0 : cls_[c - 1]; }

std::vector<std::vector<double>> InstantJump::class_times(std::size_t m, std::span<const double> S,
                                                          std::span<const double> P) const {
  std::vector<std::vector<double>> dt(class_link_.size(), std::vector<double>(m, 0.0));
  if (root_ >= 0)
    for (std::size_t d = 0; d < m; ++d) {
      double s = 0.0;
      for (std::size_t q = 0; q < n_; ++q) s += a_[q] * S[q * m + d];
      for (std::size_t j = 0; j < np_; ++j) s += b_[j] * P[j * m + d];
      dt[0][d] = s;
    }
  for (std::size_t c = 1; c < class_link_.size(); ++c) {
    const auto it = tangents_.find(class_link_[c]);
    COSTATE_CHECK(it != tangents_.end() && it->second.m == m,
                  "events: the tangent of " << event_label(*ev_, class_link_[c].second)
                                            << " at t = " << time_text(t_)
                                            << " needs the tangent of the instant that scheduled "
                                               "it (events["
                                            << class_link_[c].first << "]) first");
    dt[c] = it->second.dt;
  }
  return dt;
}

void InstantJump::tangent_multi(std::size_t m, std::span<double> S, std::span<const double> P) {
  const std::size_t E = exec_.size(), w = 1 + n_ + np_;
  const std::vector<std::vector<double>> dt = class_times(m, S, P);
  // Din[e]: the state before execution e in the coordinates of the time
  // it was left at (state_class(e)); Dat[e]: in execution e's.
  std::vector<std::vector<double>> Din(E + 1, std::vector<double>(nx_ * m)), Dat(E);
  for (std::size_t q = 0; q < nx_; ++q)
    for (std::size_t d = 0; d < m; ++d) Din[0][q * m + d] = S[q * m + d] + f0_[q] * dt[0][d];
  for (std::size_t e = 0; e < E; ++e) {
    const Exec& ex = exec_[e];
    const std::size_t c = cls_[e], pc = state_class(e);
    Dat[e] = Din[e];
    if (c != pc)
      for (std::size_t q = 0; q < nx_; ++q)
        for (std::size_t d = 0; d < m; ++d) Dat[e][q * m + d] += fb_[e][q] * (dt[c][d] - dt[pc][d]);
    Din[e + 1] = Dat[e];
    if (ex.from_trigger) {
      const Carried& cr = tangents_.at(ex.link);
      for (std::size_t j = 0; j < ex.targets.size(); ++j)
        for (std::size_t d = 0; d < m; ++d) Din[e + 1][ex.targets[j] * m + d] = cr.dv[j * m + d];
      continue;
    }
    const bool now = ex.source == e;
    const std::vector<double>& src = now ? Dat[e] : Din[ex.source];
    const std::vector<double>& rt = dt[now ? c : state_class(ex.source)];
    for (std::size_t j = 0; j < ex.targets.size(); ++j) {
      const double* row = ex.J.data() + j * w;
      for (std::size_t d = 0; d < m; ++d) {
        double v = row[0] * rt[d];
        for (std::size_t q = 0; q < n_; ++q) v += row[1 + q] * src[q * m + d];
        for (std::size_t i = 0; i < np_; ++i) v += row[1 + n_ + i] * P[i * m + d];
        Din[e + 1][ex.targets[j] * m + d] = v;
      }
    }
  }
  for (const Scheduled& sc : sched_) {
    const std::vector<double>& Dc = Din[sc.source];
    const std::vector<double>& tc = dt[state_class(sc.source)];
    auto along = [&](const double* row, std::size_t d) {
      double v = row[0] * tc[d];
      for (std::size_t q = 0; q < n_; ++q) v += row[1 + q] * Dc[q * m + d];
      for (std::size_t i = 0; i < np_; ++i) v += row[1 + n_ + i] * P[i * m + d];
      return v;
    };
    Carried cr;
    cr.m = m;
    cr.dt.assign(m, 0.0);
    for (std::size_t d = 0; d < m; ++d) cr.dt[d] = tc[d] + along(sc.Jd.data(), d);
    if (sc.from_trigger) {
      const std::size_t nt = sc.Jh.size() / w;
      cr.dv.assign(nt * m, 0.0);
      for (std::size_t j = 0; j < nt; ++j)
        for (std::size_t d = 0; d < m; ++d) cr.dv[j * m + d] = along(sc.Jh.data() + j * w, d);
    }
    tangents_[{index_, sc.event}] = std::move(cr);
  }
  const std::vector<double>& last = dt[cls_[E - 1]];
  for (std::size_t q = 0; q < nx_; ++q)
    for (std::size_t d = 0; d < m; ++d) S[q * m + d] = Din[E][q * m + d] - fE_[q] * last[d];
}

void InstantJump::adjoint_multi(std::span<double> lambda, std::span<double> mu, std::size_t seed) {
  const std::size_t E = exec_.size(), w = 1 + n_ + np_;
  std::vector<double> ct(class_link_.size(), 0.0);
  std::vector<std::vector<double>> Din(E + 1, std::vector<double>(nx_, 0.0));
  std::copy(lambda.begin(), lambda.begin() + static_cast<std::ptrdiff_t>(nx_), Din[E].begin());
  for (std::size_t q = 0; q < nx_; ++q) ct[cls_[E - 1]] -= fE_[q] * Din[E][q];
  for (std::size_t si = 0; si < sched_.size(); ++si) {
    const Scheduled& sc = sched_[si];
    const auto it = adjoints_.find({index_, sc.event});
    if (it == adjoints_.end() || it->second.size() <= seed || it->second[seed].empty()) continue;
    std::vector<double> bar = std::move(it->second[seed]);
    it->second[seed].clear();
    if (seed == 0) consumed_[si] = bar;
    std::vector<double>& Dc = Din[sc.source];
    double& tc = ct[state_class(sc.source)];
    auto back = [&](const double* row, double v) {
      tc += row[0] * v;
      for (std::size_t q = 0; q < n_; ++q) Dc[q] += row[1 + q] * v;
      for (std::size_t i = 0; i < np_; ++i) mu[i] += row[1 + n_ + i] * v;
    };
    tc += bar[0];
    back(sc.Jd.data(), bar[0]);
    if (sc.from_trigger)
      for (std::size_t j = 0; j + 1 < bar.size(); ++j) back(sc.Jh.data() + j * w, bar[1 + j]);
  }
  std::vector<double> Dat, tbar;
  for (std::size_t e = E; e-- > 0;) {
    const Exec& ex = exec_[e];
    const std::size_t c = cls_[e], pc = state_class(e);
    Dat = Din[e + 1];
    tbar.assign(ex.targets.size(), 0.0);
    for (std::size_t j = 0; j < ex.targets.size(); ++j) {
      tbar[j] = Dat[ex.targets[j]];
      Dat[ex.targets[j]] = 0.0;
    }
    if (ex.from_trigger) {
      std::vector<double>& bar = seed_slot(ex.link, seed);
      for (std::size_t j = 0; j < ex.targets.size(); ++j) bar[1 + j] += tbar[j];
    } else {
      const bool now = ex.source == e;
      std::vector<double>& src = now ? Dat : Din[ex.source];
      double& rt = ct[now ? c : state_class(ex.source)];
      for (std::size_t j = 0; j < ex.targets.size(); ++j) {
        const double* row = ex.J.data() + j * w;
        rt += row[0] * tbar[j];
        for (std::size_t q = 0; q < n_; ++q) src[q] += row[1 + q] * tbar[j];
        for (std::size_t i = 0; i < np_; ++i) mu[i] += row[1 + n_ + i] * tbar[j];
      }
    }
    for (std::size_t q = 0; q < nx_; ++q) Din[e][q] += Dat[q];
    if (c != pc) {
      double g = 0.0;
      for (std::size_t q = 0; q < nx_; ++q) g += fb_[e][q] * Dat[q];
      ct[c] += g;
      ct[pc] -= g;
    }
  }
  for (std::size_t q = 0; q < nx_; ++q) ct[0] += f0_[q] * Din[0][q];
  for (std::size_t q = 0; q < nx_; ++q) lambda[q] = Din[0][q];
  if (root_ >= 0) {
    for (std::size_t q = 0; q < n_; ++q) lambda[q] += ct[0] * a_[q];
    for (std::size_t i = 0; i < np_; ++i) mu[i] += ct[0] * b_[i];
  }
  for (std::size_t c = 1; c < class_link_.size(); ++c) seed_slot(class_link_[c], seed)[0] += ct[c];
}

std::vector<double>& InstantJump::seed_slot(const Link& link, std::size_t seed) {
  std::vector<std::vector<double>>& per = adjoints_[link];
  if (per.size() <= seed) per.resize(seed + 1);
  if (per[seed].empty()) per[seed].assign(1 + ev_->targets(link.second).size(), 0.0);
  return per[seed];
}

void InstantJump::schedule(const EventInstant& inst, double t, std::span<const double> p,
                           bool linearize, std::size_t index) {
  sched_.clear();
  consumed_.assign(inst.scheduled.size(), {});
  if (inst.scheduled.empty()) return;
  std::vector<double> values, jac;
  for (std::size_t s = 0; s < inst.scheduled.size(); ++s) {
    const std::size_t k = inst.scheduled[s], c = inst.scheduled_source[s];
    COSTATE_CHECK(c < chain_.size(), "events: the step plan schedules " << event_label(*ev_, k)
                                         << " at t = " << time_text(t) << " from state " << c
                                         << " of an instant of " << chain_.size() - 1
                                         << " executions");
    const std::span<const double> src = std::span<const double>(chain_[c]).first(n_);
    Scheduled sc;
    sc.event = k;
    sc.source = c;
    sc.from_trigger = attrs_[k].use_values_from_trigger_time;
    if (sc.from_trigger) {
      const std::size_t nt = ev_->targets(k).size();
      if (linearize) {
        derivative_in_t_y_p(
            [&](Dual8 td, std::span<const Dual8> yd, std::span<const Dual8> pd, std::span<Dual8> o) {
              ev_->assign(k, td, yd, pd, o);
            },
            t, src, p, nt, values, sc.Jh);
      } else {
        values.assign(nt, 0.0);
        ev_->assign(k, t, src, p, values);
      }
      // Kept for the execution (a replay without an index cannot find it).
      if (index != kNoIndex) values_[{index, k}] = values;
    }
    if (linearize) {
      bool on_dual = true;
      derivative_in_t_y_p(
          [&](Dual8 td, std::span<const Dual8> yd, std::span<const Dual8> pd, std::span<Dual8> o) {
            on_dual = ev_->delay(k, td, yd, pd, o[0]);
          },
          t, src, p, 1, values, jac);
      COSTATE_CHECK(on_dual, "events: " << event_label(*ev_, k) << " at t = " << time_text(t)
                                        << " has a delay whose event_delay takes doubles only; "
                                           "derivatives through it need event_delay written on "
                                           "a generic scalar (template <class T> T "
                                           "event_delay(std::size_t, T t, std::span<const T> y, "
                                           "std::span<const T> p) const)");
      sc.Jd = std::move(jac);
      sc.delay = values[0];
      // A DAE: the state at the trigger is differentiated in its
      // differential rows only (the algebraic ones are re-solved after the
      // instant), so the delay and the values from the trigger time may
      // read differential states only, as the updates (apply).
      const std::size_t w = 1 + n_ + np_;
      for (std::size_t q = 0; q < n_ && sys_.n_algebraic() > 0; ++q) {
        if (!sys_.algebraic()[q]) continue;
        bool reads = sc.Jd[1 + q] != 0.0;
        for (std::size_t j = 0; j < sc.Jh.size() / w; ++j) reads = reads || sc.Jh[j * w + 1 + q] != 0.0;
        COSTATE_CHECK(!reads, "events: the delay or the values from the trigger time of "
                                  << event_label(*ev_, k) << " at t = " << time_text(t)
                                  << " read algebraic state " << q
                                  << "; derivatives through delayed events on a DAE need them to "
                                     "read differential states and time only (not yet supported)");
      }
      // Equal delays from one instant execute at one instant, whose time is
      // taken from the first of them (apply): exact when their times move
      // together — one state read, the same derivatives.
      for (const Scheduled& other : sched_)
        COSTATE_CHECK(other.delay != sc.delay || (other.source == sc.source && other.Jd == sc.Jd),
                      "events: " << event_label(*ev_, other.event) << " and "
                                 << event_label(*ev_, k) << ", scheduled at t = " << time_text(t)
                                 << " with equal delays (" << sc.delay
                                 << "), execute at one instant, but their delays move "
                                    "differently with the state or the parameters: that "
                                    "instant's time has no single derivative");
    }
    sched_.push_back(std::move(sc));
  }
}

void InstantJump::tangent(std::size_t m, std::span<double> S, std::span<const double> P) {
  COSTATE_CHECK(linearized_, "events: tangent of an instant applied without linearization");
  if (multi_) return tangent_multi(m, S, P);
  const std::size_t E = exec_.size(), w = 1 + n_ + np_;
  std::vector<double> dtau(m, 0.0);
  if (carried_.first != kNoIndex) {
    // A delayed execution: the instant's time is τ_e, its tangent carried
    // from the instant that scheduled it.
    const auto it = tangents_.find(carried_);
    COSTATE_CHECK(it != tangents_.end() && it->second.m == m,
                  "events: the tangent of " << event_label(*ev_, carried_.second) << " at t = "
                                            << time_text(t_)
                                            << " needs the tangent of the instant that scheduled "
                                               "it (events["
                                            << carried_.first << "]) first");
    dtau = it->second.dt;
  } else {
    for (std::size_t d = 0; d < m; ++d) {
      double s = 0.0;
      for (std::size_t q = 0; q < n_; ++q) s += a_[q] * S[q * m + d];
      for (std::size_t j = 0; j < np_; ++j) s += b_[j] * P[j * m + d];
      dtau[d] = s;
    }
  }
  // D_0 = s⁻ + f⁻ dτ (the state at the moving instant), D_{e+1} = D_e with
  // its targets H_y D_source + H_p ṗ + H_t dτ (or a delayed execution's
  // values from the trigger time), s⁺ = D_E − f⁺ dτ.
  std::vector<std::vector<double>> D(E + 1, std::vector<double>(nx_ * m));
  for (std::size_t q = 0; q < nx_; ++q)
    for (std::size_t d = 0; d < m; ++d) D[0][q * m + d] = S[q * m + d] + f0_[q] * dtau[d];
  for (std::size_t e = 0; e < E; ++e) {
    const Exec& ex = exec_[e];
    D[e + 1] = D[e];
    if (ex.from_trigger) {
      const Carried& c = tangents_.at(ex.link);
      for (std::size_t j = 0; j < ex.targets.size(); ++j)
        for (std::size_t d = 0; d < m; ++d) D[e + 1][ex.targets[j] * m + d] = c.dv[j * m + d];
      continue;
    }
    const std::vector<double>& src = D[ex.source];
    for (std::size_t j = 0; j < ex.targets.size(); ++j) {
      const double* row = ex.J.data() + j * w;
      for (std::size_t d = 0; d < m; ++d) {
        double v = row[0] * dtau[d];
        for (std::size_t q = 0; q < n_; ++q) v += row[1 + q] * src[q * m + d];
        for (std::size_t i = 0; i < np_; ++i) v += row[1 + n_ + i] * P[i * m + d];
        D[e + 1][ex.targets[j] * m + d] = v;
      }
    }
  }
  // The delayed executions scheduled here: dτ_e = dτ + d_t dτ + d_y D_c +
  // d_p ṗ, and values from the trigger time h_t dτ + h_y D_c + h_p ṗ.
  for (const Scheduled& sc : sched_) {
    const std::vector<double>& Dc = D[sc.source];
    auto along = [&](const double* row, std::size_t d) {
      double v = row[0] * dtau[d];
      for (std::size_t q = 0; q < n_; ++q) v += row[1 + q] * Dc[q * m + d];
      for (std::size_t i = 0; i < np_; ++i) v += row[1 + n_ + i] * P[i * m + d];
      return v;
    };
    Carried c;
    c.m = m;
    c.dt.assign(m, 0.0);
    for (std::size_t d = 0; d < m; ++d) c.dt[d] = dtau[d] + along(sc.Jd.data(), d);
    if (sc.from_trigger) {
      const std::size_t nt = sc.Jh.size() / w;
      c.dv.assign(nt * m, 0.0);
      for (std::size_t j = 0; j < nt; ++j)
        for (std::size_t d = 0; d < m; ++d) c.dv[j * m + d] = along(sc.Jh.data() + j * w, d);
    }
    tangents_[{index_, sc.event}] = std::move(c);
  }
  for (std::size_t q = 0; q < nx_; ++q)
    for (std::size_t d = 0; d < m; ++d) S[q * m + d] = D[E][q * m + d] - fE_[q] * dtau[d];
  // A DAE: z⁺ = z(x⁺, p) (no algebraic state is read above: apply checked).
  if (sys_.n_algebraic() > 0) ConstraintProjection(sys_, p_).tangent(t_, chain_[E], m, S, P);
}

void InstantJump::adjoint(std::span<double> lambda, std::span<double> mu, std::size_t seed) {
  COSTATE_CHECK(linearized_, "events: adjoint of an instant applied without linearization");
  if (multi_) return adjoint_multi(lambda, mu, seed);
  const std::size_t E = exec_.size(), w = 1 + n_ + np_;
  std::vector<std::vector<double>> Dbar(E + 1, std::vector<double>(nx_, 0.0));
  // A DAE: the transpose of z⁺ = z(x⁺, p) first.
  if (sys_.n_algebraic() > 0)
    ConstraintProjection(sys_, p_).adjoint(t_, chain_[E], lambda.first(nx_), lambda.first(nx_), mu);
  std::copy(lambda.begin(), lambda.begin() + static_cast<std::ptrdiff_t>(nx_), Dbar[E].begin());
  double ctau = 0.0;
  for (std::size_t q = 0; q < nx_; ++q) ctau -= fE_[q] * Dbar[E][q];
  // The delayed executions scheduled here: their τ̄_e and v̄, left by the
  // instants that executed them (already reversed), through the transposed
  // tangent's rows (taken once per seed).
  for (std::size_t si = 0; si < sched_.size(); ++si) {
    const Scheduled& sc = sched_[si];
    const auto it = adjoints_.find({index_, sc.event});
    if (it == adjoints_.end() || it->second.size() <= seed || it->second[seed].empty()) continue;
    std::vector<double> bar = std::move(it->second[seed]);
    it->second[seed].clear();
    if (seed == 0) consumed_[si] = bar;  // for second_order
    std::vector<double>& Dc = Dbar[sc.source];
    auto back = [&](const double* row, double v) {
      ctau += row[0] * v;
      for (std::size_t q = 0; q < n_; ++q) Dc[q] += row[1 + q] * v;
      for (std::size_t i = 0; i < np_; ++i) mu[i] += row[1 + n_ + i] * v;
    };
    ctau += bar[0];
    back(sc.Jd.data(), bar[0]);
    if (sc.from_trigger)
      for (std::size_t j = 0; j + 1 < bar.size(); ++j) back(sc.Jh.data() + j * w, bar[1 + j]);
  }
  std::vector<double> tbar;
  for (std::size_t e = E; e-- > 0;) {
    const Exec& ex = exec_[e];
    tbar.assign(ex.targets.size(), 0.0);
    for (std::size_t j = 0; j < ex.targets.size(); ++j) {
      tbar[j] = Dbar[e + 1][ex.targets[j]];
      Dbar[e + 1][ex.targets[j]] = 0.0;
    }
    for (std::size_t q = 0; q < nx_; ++q) Dbar[e][q] += Dbar[e + 1][q];
    if (ex.from_trigger) {
      std::vector<double>& bar = seed_slot(ex.link, seed);
      for (std::size_t j = 0; j < ex.targets.size(); ++j) bar[1 + j] += tbar[j];
      continue;
    }
    std::vector<double>& src = Dbar[ex.source];
    for (std::size_t j = 0; j < ex.targets.size(); ++j) {
      const double* row = ex.J.data() + j * w;
      ctau += row[0] * tbar[j];
      for (std::size_t q = 0; q < n_; ++q) src[q] += row[1 + q] * tbar[j];
      for (std::size_t i = 0; i < np_; ++i) mu[i] += row[1 + n_ + i] * tbar[j];
    }
  }
  for (std::size_t q = 0; q < nx_; ++q) ctau += f0_[q] * Dbar[0][q];
  for (std::size_t q = 0; q < nx_; ++q) lambda[q] = Dbar[0][q];
  if (carried_.first != kNoIndex) {
    // A delayed execution: τ̄ goes back to the instant that scheduled it.
    seed_slot(carried_, seed)[0] += ctau;
    return;
  }
  for (std::size_t q = 0; q < n_; ++q) lambda[q] += ctau * a_[q];
  for (std::size_t i = 0; i < np_; ++i) mu[i] += ctau * b_[i];
}

std::vector<PendingEventAdjoint> InstantJump::pending_adjoints() const {
  std::vector<PendingEventAdjoint> out;
  for (const auto& [link, per] : adjoints_)  // std::map: ascending (instant, event)
    if (!per.empty() && !per[0].empty()) out.push_back({link.first, link.second, per[0]});
  return out;
}

void InstantJump::restore_pending_adjoints(std::span<const PendingEventAdjoint> pending) {
  for (const PendingEventAdjoint& q : pending) {
    COSTATE_CHECK(q.event < attrs_.size(), "events: a pending adjoint names event "
                                               << q.event << " of a model with " << attrs_.size()
                                               << " events");
    std::vector<double>& slot = seed_slot({q.instant, q.event}, 0);
    COSTATE_CHECK_EQ(q.adjoint.size(), slot.size(),
                     "events: the pending adjoint of " << event_label(*ev_, q.event)
                                                       << " (scheduled by events[" << q.instant
                                                       << "]) has the wrong size");
    slot = q.adjoint;
  }
}

// Second order. The jump as a map of the state at the instant's fixed time
// τ₀ (the plan's): a state x just before τ₀ at (x, p) flows on by δ to the
// instant τ = τ₀ + δ where root r vanishes, is jumped there, and flows back
// by −δ with the right-hand side after the events:
//     g_r(τ₀ + δ, P⁻(δ, x), p) = 0,   z = H(τ₀ + δ, P⁻(δ, x), p),
//     Ĵ(x, p) = P⁺(−δ, z),
// P∓ the flows before and after the instant to second order in δ (at δ = 0
// their derivatives up to the second are the flows' own):
//     P⁻(δ, x) = x + δ f(τ₀, x) + ½δ² (f_t + f_x f)⁻,
//     P⁺(−δ, z) = z − δ f(τ₀, z) + ½δ² (f_x f − f_t)⁺.
// Ĵ's first derivative is tangent()'s map (f⁻ dτ and −f⁺ dτ are its flow
// terms), so the sweeps' fixed-time steps composed with Ĵ are the objective
// whose gradient the first-order sweeps compute; its second derivative
// gives their Hessian. (D²Ĵ[v])ᵀλ⁺ is formed by forward over forward on
// that map: inputs (y, p) on Dual<Dual<double, 1>, 8> — 8 lanes of first
// derivatives, each with its ε-part along v = (ẋ⁻, ṗ) — and the ε-parts of
// the lanes of λ⁺·Ĵ. δ solves its equation by chord steps δ ← δ − g_r/ġ
// from δ = 0 (ġ = g_t + g_y f⁻ at the root; the value of δ kept 0): each
// step makes one more order of δ's expansion exact, so two give δ's first
// and second derivatives exactly (the implicit function theorem to second
// order, never the root finder's iterations); a third is a margin. f enters
// Ĵ multiplied by δ (whose value is 0), so its linearization at x⁻ and x⁺
// gives its part exactly; f_t (the model's t is a double) is a one-sided
// three-point difference on the instant's own side (zero, exactly, for an
// autonomous right-hand side).
void InstantJump::second_order(std::span<const double> lambda_plus, std::span<const double> xdot,
                               std::span<const double> pdot, std::span<double> lambda_dot,
                               std::span<double> mu_dot) {
  COSTATE_CHECK(linearized_, "events: second order of an instant applied without linearization");
  COSTATE_CHECK(!multi_, "events: Hessian-vector products through an instant where delayed "
                         "executions of different times coincide (at t = "
                             << time_text(t_) << ", " << event_label(*ev_, exec_[0].event)
                             << " and " << event_label(*ev_, exec_.back().event)
                             << ") are not supported yet; gradients are");
  COSTATE_CHECK(sys_.n_algebraic() == 0,
                "events: Hessian-vector products through events on a DAE (algebraic states) are "
                "not supported yet; gradients are");
  using D1 = ad::Dual<double, 1>;
  using DD = EventModel::Dual8x1;
  const std::size_t E = exec_.size(), w = n_ + np_;
  const std::span<const double> xm(chain_[0]), xe(chain_[E]);
  // A delayed execution (delayed events, events.hpp): its time offset δ
  // and the values it takes from the trigger time are inputs of this
  // instant's map, with their tangents from the scheduling instant's
  // (tangent(), one direction) and their adjoints' tangents left for it
  // (seed 1: the λ̇ lane of the second-order sweep). After the (x, p) lanes:
  // δ (one lane, when the instant's time is a delayed execution's), then the
  // values of each execution from the trigger time.
  const bool carried = carried_.first != kNoIndex;
  auto carried_tangent = [&](const Link& link) -> const Carried& {
    const auto it = tangents_.find(link);
    COSTATE_CHECK(it != tangents_.end() && it->second.m == 1,
                  "events: the second order of " << event_label(*ev_, link.second) << " at t = "
                                                 << time_text(t_)
                                                 << " needs the tangent of the instant that "
                                                    "scheduled it (events["
                                                 << link.first << "]) along the direction first");
    return it->second;
  };
  std::vector<std::size_t> v_first(E, 0);
  std::size_t W = w + (carried ? 1 : 0);
  for (std::size_t e = 0; e < E; ++e) {
    v_first[e] = W;
    if (exec_[e].from_trigger) W += exec_[e].targets.size();
  }
  // The flows' pieces at x⁻ and x⁺ (an instant whose time moves: located by
  // a root, or a delayed execution's).
  const bool moving = root_ >= 0 || carried;
  std::vector<double> jm, jp, cm(nx_, 0.0), cp(nx_, 0.0);
  if (moving) {
    Linearization lin(sys_);
    jm.assign(nx_ * w, 0.0);
    jp.assign(nx_ * w, 0.0);
    lin.at(t_, xm, p_);
    lin.jacobian(jm);
    lin.at(t_, xe, p_);
    lin.jacobian(jp);
    // Time step of the one-sided differences for f_t: truncation O(η²)
    // ~1e-10, round-off ~1e-16/η ~1e-11 relative to f.
    const double eta = 1e-5 * std::max(1.0, std::abs(t_));
    std::vector<double> f1(nx_), f2(nx_), g1(nx_), g2(nx_);
    sys_.rhs(t_ - eta, xm, p_, f1);
    sys_.rhs(t_ - 2 * eta, xm, p_, f2);
    sys_.rhs(t_ + eta, xe, p_, g1);
    sys_.rhs(t_ + 2 * eta, xe, p_, g2);
    rhs_evaluations_ += 4;
    for (std::size_t q = 0; q < nx_; ++q) {
      const double ftm = (3.0 * (f0_[q] - f1[q]) - (f1[q] - f2[q])) / (2 * eta);
      const double ftp = (-3.0 * (fE_[q] - g1[q]) + (g1[q] - g2[q])) / (2 * eta);
      double am = 0.0, ap = 0.0;
      for (std::size_t c = 0; c < n_; ++c) {
        am += jm[c * nx_ + q] * f0_[c];
        ap += jp[c * nx_ + q] * fE_[c];
      }
      cm[q] = ftm + am;
      cp[q] = ap - ftp;
    }
  }
  // The delayed executions scheduled here, with the adjoints (seed 0) that
  // adjoint() consumed: their execution time's offset δ + d(τ, y_c, p) and
  // their values from the trigger time are outputs of this instant's map,
  // weighted by those adjoints. The delay's second derivative along the
  // direction (its Hessian times ż, ż the direction of (t, y_c, p)) is a
  // central difference of its gradient on Dual8 (EventModel's delay has no
  // second-order overload), made once per instant: (∇d(z + ηż) − ∇d(z −
  // ηż))/2η with η‖ż‖ = 1e-5 max(1, ‖z‖): truncation ~1e-10, round-off
  // ~1e-11 relative; exact (zero) for a delay affine in t, y and p.
  const std::size_t wd = 1 + n_ + np_;
  std::vector<std::vector<double>> hz(sched_.size());
  std::vector<DD> x(nx_), pd(np_), fm(nx_), y(nx_), g(ev_->n_roots()), vals;
  std::vector<std::vector<DD>> chain(E + 1);
  COSTATE_CHECK(consumed_.size() == sched_.size(),
                "events: internal error, second order of an instant before its adjoint");
  for (std::size_t first = 0; first < W; first += 8) {
    const std::size_t lanes = std::min<std::size_t>(8, W - first);
    for (std::size_t q = 0; q < nx_; ++q) x[q] = DD(D1(xm[q], {xdot[q]}));
    for (std::size_t j = 0; j < np_; ++j) pd[j] = DD(D1(p_[j], {pdot[j]}));
    DD delta(0.0);
    if (carried) delta = DD(D1(0.0, {carried_tangent(carried_).dt[0]}));
    std::vector<std::vector<DD>> vin(E);
    for (std::size_t e = 0; e < E; ++e) {
      if (!exec_[e].from_trigger) continue;
      const Carried& c = carried_tangent(exec_[e].link);
      const std::vector<double>& v = values_.at(exec_[e].link);
      for (std::size_t j = 0; j < v.size(); ++j) vin[e].push_back(DD(D1(v[j], {c.dv[j]})));
    }
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::size_t u = first + l;
      const int lane = static_cast<int>(l);
      if (u < n_) {
        x[u].set_tangent(lane, D1(1.0));
      } else if (u < w) {
        pd[u - n_].set_tangent(lane, D1(1.0));
      } else if (carried && u == w) {
        delta.set_tangent(lane, D1(1.0));
      } else {
        std::size_t e = E;
        while (e-- > 0 && !(exec_[e].from_trigger && u >= v_first[e])) {
        }
        vin[e][u - v_first[e]].set_tangent(lane, D1(1.0));
      }
    }
    // f(τ₀, ·) linearized at a point xl (n_x rows, its y and p perturbed).
    auto flow = [&](const std::vector<double>& jac, std::span<const double> f0,
                    std::span<const DD> at, std::span<const double> xl, std::vector<DD>& out) {
      out.assign(nx_, DD(0.0));
      for (std::size_t q = 0; q < nx_; ++q) {
        DD v(f0[q]);
        for (std::size_t c = 0; c < n_; ++c) v += jac[c * nx_ + q] * (at[c] - xl[c]);
        for (std::size_t j = 0; j < np_; ++j) v += jac[(n_ + j) * nx_ + q] * (pd[j] - p_[j]);
        out[q] = v;
      }
    };
    const DD t0{D1(t_)};
    chain[0] = x;
    if (moving) {
      flow(jm, f0_, x, xm, fm);
      if (root_ >= 0) {
        const auto r = static_cast<std::size_t>(root_);
        for (int it = 0; it < 3; ++it) {
          for (std::size_t q = 0; q < nx_; ++q)
            y[q] = x[q] + delta * fm[q] + 0.5 * delta * delta * cm[q];
          ev_->roots(t0 + delta, std::span<const DD>(y).first(n_), pd, g);
          delta = delta - g[r] / gdot_;
          delta.value().value() = 0.0;
        }
      }
      for (std::size_t q = 0; q < nx_; ++q)
        chain[0][q] = x[q] + delta * fm[q] + 0.5 * delta * delta * cm[q];
    }
    for (std::size_t e = 0; e < E; ++e) {
      const Exec& ex = exec_[e];
      chain[e + 1] = chain[e];
      if (ex.from_trigger) {
        for (std::size_t j = 0; j < ex.targets.size(); ++j) chain[e + 1][ex.targets[j]] = vin[e][j];
        continue;
      }
      vals.assign(ex.targets.size(), DD(0.0));
      ev_->assign(ex.event, t0 + delta, std::span<const DD>(chain[ex.source]).first(n_), pd, vals);
      for (std::size_t j = 0; j < ex.targets.size(); ++j) chain[e + 1][ex.targets[j]] = vals[j];
    }
    DD s(0.0);
    // The scheduled executions' outputs, weighted by their adjoints.
    for (std::size_t si = 0; si < sched_.size(); ++si) {
      const Scheduled& sc = sched_[si];
      const std::vector<double>& bar = consumed_[si];
      if (bar.empty()) continue;
      const std::span<const DD> yc = std::span<const DD>(chain[sc.source]).first(n_);
      if (sc.from_trigger) {
        vals.assign(bar.size() - 1, DD(0.0));
        ev_->assign(sc.event, t0 + delta, yc, pd, vals);
        for (std::size_t j = 0; j + 1 < bar.size(); ++j) s += bar[1 + j] * vals[j];
      }
      if (bar[0] == 0.0) continue;
      // z = (t, y_c, p) and its direction ż (the values' ε-parts).
      std::vector<DD> z;
      z.reserve(wd);
      z.push_back(t0 + delta);
      z.insert(z.end(), yc.begin(), yc.end());
      z.insert(z.end(), pd.begin(), pd.end());
      if (hz[si].empty()) {
        hz[si].assign(wd, 0.0);
        std::vector<double> zd(wd), z0(wd);
        double zmax = 1.0, zdmax = 0.0;
        for (std::size_t a = 0; a < wd; ++a) {
          z0[a] = a == 0 ? t_ : a <= n_ ? chain_[sc.source][a - 1] : p_[a - 1 - n_];
          zd[a] = z[a].value().tangent(0);
          zmax = std::max(zmax, std::abs(z0[a]));
          zdmax = std::max(zdmax, std::abs(zd[a]));
        }
        if (zdmax > 0.0) {
          const double eta = 1e-5 * zmax / zdmax;
          std::vector<double> gp, gm;
          auto at = [&](double sign, std::vector<double>& gr) {
            std::vector<double> yy(n_);
            for (std::size_t q = 0; q < n_; ++q) yy[q] = z0[1 + q] + sign * eta * zd[1 + q];
            std::vector<double> pp(np_);
            for (std::size_t j = 0; j < np_; ++j) pp[j] = z0[1 + n_ + j] + sign * eta * zd[1 + n_ + j];
            std::vector<double> val;
            derivative_in_t_y_p(
                [&](Dual8 td, std::span<const Dual8> yd, std::span<const Dual8> pq,
                    std::span<Dual8> o) { ev_->delay(sc.event, td, yd, pq, o[0]); },
                z0[0] + sign * eta * zd[0], yy, pp, 1, val, gr);
          };
          at(1.0, gp);
          at(-1.0, gm);
          for (std::size_t a = 0; a < wd; ++a) hz[si][a] = (gp[a] - gm[a]) / (2 * eta);
        }
      }
      // δ_e = δ + Σ_a (∇d_a + (Hż)_a ε) z_a: the lanes' derivatives of the
      // delay to second order along the direction (its value is not used).
      DD de = delta;
      for (std::size_t a = 0; a < wd; ++a) de += DD(D1(sc.Jd[a], {hz[si][a]})) * z[a];
      s += bar[0] * de;
    }
    std::vector<DD>& zplus = chain[E];
    if (moving) {
      flow(jp, fE_, zplus, xe, fm);
      for (std::size_t q = 0; q < nx_; ++q)
        zplus[q] = zplus[q] - delta * fm[q] + 0.5 * delta * delta * cp[q];
    }
    for (std::size_t q = 0; q < nx_; ++q) s += lambda_plus[q] * zplus[q];
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::size_t u = first + l;
      const double v = s.tangent(static_cast<int>(l)).tangent(0);
      if (u < n_) {
        lambda_dot[u] += v;
      } else if (u < w) {
        mu_dot[u - n_] += v;
      } else if (carried && u == w) {
        seed_slot(carried_, 1)[0] += v;
      } else {
        std::size_t e = E;
        while (e-- > 0 && !(exec_[e].from_trigger && u >= v_first[e])) {
        }
        seed_slot(exec_[e].link, 1)[1 + (u - v_first[e])] += v;
      }
    }
  }
}

// ------------------------------------------------------- the scheme decorator

namespace {

class EventScheme final : public Scheme {
 public:
  EventScheme(const System& system, std::unique_ptr<Scheme> inner, std::span<const double> p,
              const StepPlan& steps)
      : inner_(std::move(inner)), p_(p), times_(steps.times()), nx_(system.n_states()),
        jump_(system), at_(steps.steps() + 1, -1), tmp_(inner_->state_size()),
        start_(inner_->state_size()) {
    const auto& events = steps.events();
    for (std::size_t e = 0; e < events.size(); ++e) {
      at_[events[e].at] = static_cast<int>(e);
      instants_.push_back(events[e]);
    }
    if (at_[0] >= 0 && system.has_observations()) {
      const std::vector<double> obs = system.observation_times();
      COSTATE_CHECK(obs.empty() || obs.front() > times_.front(),
                    "events: an event fires at t0 = "
                        << time_text(times_.front())
                        << " and the objective observes the state there; observations at an "
                           "instant where events fire at t0 are not supported yet (move the "
                           "observation or the event)");
    }
  }

  std::size_t state_size() const override { return inner_->state_size(); }
  std::size_t steps() const override { return inner_->steps(); }

  void step(std::size_t i, std::span<const double> x, std::span<double> xn) override {
    inner_->step(i, start(i, x, false), xn);
    if (const int e = at_[i + 1]; e >= 0)
      jump_.apply(instants_[static_cast<std::size_t>(e)], times_[i + 1], xn.first(nx_), p_, false,
                  static_cast<std::size_t>(e));
  }

  void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
               std::span<double> mu) override {
    const std::span<const double> xs = start(i, x, false);
    if (const int e = at_[i + 1]; e >= 0) {
      inner_->step(i, xs, tmp_);  // x_{i+1} before the events
      jump_.apply(instants_[static_cast<std::size_t>(e)], times_[i + 1],
                  std::span<double>(tmp_).first(nx_), p_, true,
                  static_cast<std::size_t>(e));
      jump_.adjoint(lambda.first(nx_), mu);
      ++linearizations_;
    }
    inner_->adjoint(i, xs, lambda, mu);
    if (i == 0 && at_[0] >= 0) {
      start_.assign(x.begin(), x.end());
      jump_.apply(instants_[static_cast<std::size_t>(at_[0])], times_[0],
                  std::span<double>(start_).first(nx_), p_, true,
                static_cast<std::size_t>(at_[0]));
      jump_.adjoint(lambda.first(nx_), mu);
      ++linearizations_;
    }
  }

  void adjoint_block(std::size_t i, std::span<const double> x,
                     std::span<const std::span<double>> lambdas,
                     std::span<const std::span<double>> mus) override {
    const std::span<const double> xs = start(i, x, false);
    if (const int e = at_[i + 1]; e >= 0) {
      inner_->step(i, xs, tmp_);
      jump_.apply(instants_[static_cast<std::size_t>(e)], times_[i + 1],
                  std::span<double>(tmp_).first(nx_), p_, true,
                  static_cast<std::size_t>(e));
      for (std::size_t j = 0; j < lambdas.size(); ++j) jump_.adjoint(lambdas[j].first(nx_), mus[j], j);
      ++linearizations_;
    }
    inner_->adjoint_block(i, xs, lambdas, mus);
    if (i == 0 && at_[0] >= 0) {
      start_.assign(x.begin(), x.end());
      jump_.apply(instants_[static_cast<std::size_t>(at_[0])], times_[0],
                  std::span<double>(start_).first(nx_), p_, true,
                static_cast<std::size_t>(at_[0]));
      for (std::size_t j = 0; j < lambdas.size(); ++j) jump_.adjoint(lambdas[j].first(nx_), mus[j], j);
      ++linearizations_;
    }
  }

  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
               std::span<const double> S, std::span<double> Sn,
               std::span<const double> P) override {
    if (i == 0 && at_[0] >= 0) {
      const std::span<const double> xs = start(0, x, true);
      s_start_.assign(S.begin(), S.end());
      jump_.tangent(m, std::span<double>(s_start_).first(nx_ * m), P);
      inner_->tangent(0, xs, xn, m, s_start_, Sn, P);
    } else {
      inner_->tangent(i, x, xn, m, S, Sn, P);
    }
    if (const int e = at_[i + 1]; e >= 0) {
      jump_.apply(instants_[static_cast<std::size_t>(e)], times_[i + 1], xn.first(nx_), p_, true,
                  static_cast<std::size_t>(e));
      jump_.tangent(m, Sn.first(nx_ * m), P);
      ++linearizations_;
    }
  }

  // Second order: the inner step's adjoint_tangent between the jumps'
  // (their transposed first-order maps on λ and on λ̇, and λ̇ += (D²Ĵ[ẋ⁻,
  // ṗ])ᵀλ⁺: InstantJump::second_order); ẋ⁻ at an instant by the inner step's
  // tangent again.
  void adjoint_tangent(std::size_t i, std::span<const double> x, std::span<const double> xdot,
                       std::span<const double> xn, std::span<const double> xndot,
                       std::span<const double> pdot, std::span<double> lambda,
                       std::span<double> lambda_dot, std::span<double> mu,
                       std::span<double> mu_dot) override {
    std::span<const double> xs = x, xsdot = xdot;
    if (i == 0 && at_[0] >= 0) {
      start_.assign(x.begin(), x.end());
      jump_.apply(instants_[static_cast<std::size_t>(at_[0])], times_[0],
                  std::span<double>(start_).first(nx_), p_, true,
                static_cast<std::size_t>(at_[0]));
      s_start_.assign(xdot.begin(), xdot.end());
      jump_.tangent(1, std::span<double>(s_start_).first(nx_), pdot);
      xs = start_;
      xsdot = s_start_;
    }
    std::span<const double> xe = xn, xedot = xndot;
    if (const int e = at_[i + 1]; e >= 0) {
      tmp_dot_.resize(tmp_.size());
      inner_->tangent(i, xs, tmp_, 1, xsdot, tmp_dot_, pdot);  // x⁻, ẋ⁻
      after_.assign(tmp_.begin(), tmp_.end());
      jump_.apply(instants_[static_cast<std::size_t>(e)], times_[i + 1],
                  std::span<double>(after_).first(nx_), p_, true,
                  static_cast<std::size_t>(e));
      jump_back(lambda, lambda_dot, mu, mu_dot, std::span<const double>(tmp_dot_).first(nx_), pdot);
      xe = tmp_;
      xedot = tmp_dot_;
    }
    inner_->adjoint_tangent(i, xs, xsdot, xe, xedot, pdot, lambda, lambda_dot, mu, mu_dot);
    if (i == 0 && at_[0] >= 0) {
      start_.assign(x.begin(), x.end());
      jump_.apply(instants_[static_cast<std::size_t>(at_[0])], times_[0],
                  std::span<double>(start_).first(nx_), p_, true,
                static_cast<std::size_t>(at_[0]));
      jump_back(lambda, lambda_dot, mu, mu_dot, xdot.first(nx_), pdot);
    }
  }

  std::int64_t rhs_evaluations() const override {
    return inner_->rhs_evaluations() + jump_.rhs_evaluations();
  }

  std::vector<PendingEventAdjoint> pending_adjoints() const { return jump_.pending_adjoints(); }
  void restore_pending_adjoints(std::span<const PendingEventAdjoint> pending) {
    for (const PendingEventAdjoint& q : pending) {
      const bool schedules =
          q.instant < instants_.size() &&
          std::find(instants_[q.instant].scheduled.begin(), instants_[q.instant].scheduled.end(),
                    q.event) != instants_[q.instant].scheduled.end();
      COSTATE_CHECK(schedules, "events: a resumed sweep's pending adjoint names events["
                                   << q.instant << "] scheduling event " << q.event
                                   << ", which the step plan (" << instants_.size()
                                   << " instants) does not have");
    }
    jump_.restore_pending_adjoints(pending);
  }
  std::int64_t linearizations() const override {
    return inner_->linearizations() + linearizations_;
  }

 private:
  /// The applied jump's reverse step to second order: (λ, μ) by the
  /// transposed jump, (λ̇, μ̇) by the same and its derivative along (ẋ⁻, ṗ).
  void jump_back(std::span<double> lambda, std::span<double> lambda_dot, std::span<double> mu,
                 std::span<double> mu_dot, std::span<const double> xdot_before,
                 std::span<const double> pdot) {
    lambda_plus_.assign(lambda.begin(), lambda.begin() + static_cast<std::ptrdiff_t>(nx_));
    jump_.adjoint(lambda.first(nx_), mu);
    jump_.adjoint(lambda_dot.first(nx_), mu_dot, 1);  // its own delayed links
    jump_.second_order(lambda_plus_, xdot_before, pdot, lambda_dot.first(nx_), mu_dot);
    ++linearizations_;
  }

  /// x_0 with the events of t0 applied (step 0), else x itself; with
  /// `linearize` the jump keeps its linearization (for tangent()).
  std::span<const double> start(std::size_t i, std::span<const double> x, bool linearize) {
    if (i != 0 || at_[0] < 0) return x;
    start_.assign(x.begin(), x.end());
    jump_.apply(instants_[static_cast<std::size_t>(at_[0])], times_[0],
                std::span<double>(start_).first(nx_), p_, linearize,
                static_cast<std::size_t>(at_[0]));
    return start_;
  }

  std::unique_ptr<Scheme> inner_;
  std::span<const double> p_;
  const std::vector<double>& times_;
  std::size_t nx_;
  InstantJump jump_;
  std::vector<int> at_;  // instant index at each time index, −1 for none
  std::vector<EventInstant> instants_;
  std::vector<double> tmp_, start_, s_start_, tmp_dot_, after_, lambda_plus_;
  std::int64_t linearizations_ = 0;
};

}  // namespace

std::unique_ptr<Scheme> with_events(const System& system, std::unique_ptr<Scheme> inner,
                                    std::span<const double> p, const StepPlan& steps) {
  if (steps.events().empty()) return inner;
  COSTATE_CHECK(system.events() != nullptr,
                "events: the step plan fires events but the System has none");
  return std::make_unique<EventScheme>(system, std::move(inner), p, steps);
}

std::vector<PendingEventAdjoint> pending_event_adjoints(const Scheme& scheme) {
  const auto* events = dynamic_cast<const EventScheme*>(&scheme);
  return events ? events->pending_adjoints() : std::vector<PendingEventAdjoint>{};
}

void restore_pending_event_adjoints(Scheme& scheme, std::span<const PendingEventAdjoint> pending) {
  if (pending.empty()) return;
  auto* events = dynamic_cast<EventScheme*>(&scheme);
  COSTATE_CHECK(events != nullptr, "events: a resumed sweep carries "
                                       << pending.size()
                                       << " pending adjoints of delayed events, but its step "
                                          "plan fires no events");
  events->restore_pending_adjoints(pending);
}

// ------------------------------------------------------------------ the driver

namespace {

/// Whether an instant enters the step plan: it executes events or
/// schedules delayed ones (their trigger time is part of their derivative).
bool recorded(const EventInstant& inst) { return !inst.fired.empty() || !inst.scheduled.empty(); }

/// The events' state between steps and at the instants: root values and
/// sides, trigger values, pending (delayed) executions; and the instant's
/// execution by SBML's rules.
class EventState {
 public:
  EventState(const System& system, std::span<const double> p)
      : sys_(system), ev_(*system.events()), p_(p), n_(system.n_model_states()),
        g_(ev_.n_roots()), sides_(ev_.n_roots()), trig_(ev_.n_events()),
        attrs_(ev_.n_events()) {
    for (std::size_t k = 0; k < attrs_.size(); ++k) attrs_[k] = ev_.attributes(k);
  }

  struct Pending {
    double t;
    std::size_t event;
    std::vector<double> values;  // empty: computed at the execution
    int origin;                  // the index of the instant that scheduled it
  };

  std::size_t n_roots() const { return g_.size(); }
  std::span<const double> g() const { return g_; }
  std::span<const std::int8_t> sides() const { return sides_; }

  /// Roots of (t, y) into g, their sides into `sides`.
  void roots_at(double t, std::span<const double> x, std::vector<double>& g,
                std::vector<std::int8_t>& sides) const {
    g.assign(g_.size(), 0.0);
    ev_.roots(t, x.first(n_), p_, g);
    sides.resize(g.size());
    for (std::size_t r = 0; r < g.size(); ++r) sides[r] = g[r] >= 0.0 ? 1 : -1;
  }
  void triggers_at(double t, std::span<const double> x, std::span<const std::int8_t> sides,
                   std::vector<char>& trig) const {
    trig.resize(trig_.size());
    for (std::size_t k = 0; k < trig_.size(); ++k)
      trig[k] = ev_.trigger(k, t, x.first(n_), p_, sides) ? 1 : 0;
  }
  /// Commits (t, x) as the point the next step starts from.
  void commit(std::vector<double> g, std::vector<std::int8_t> sides, std::vector<char> trig) {
    g_ = std::move(g);
    sides_ = std::move(sides);
    trig_ = std::move(trig);
  }
  /// The roots' values at the committed point (their sides unchanged).
  void commit_roots(std::vector<double> g) { g_ = std::move(g); }
  /// Whether a trigger turns from false to true between the committed
  /// point and `trig`.
  bool fires(const std::vector<char>& trig) const {
    for (std::size_t k = 0; k < trig.size(); ++k)
      if (!trig_[k] && trig[k]) return true;
    return false;
  }
  /// Drops the pending executions of non-persistent events whose trigger
  /// `trig` has turned false.
  void drop_unpersistent(const std::vector<char>& trig) {
    std::erase_if(pending_, [&](const Pending& q) {
      return !attrs_[q.event].persistent && !trig[q.event];
    });
  }

  /// The first pending execution time after t, else +∞.
  double next_pending(double t) const {
    double best = std::numeric_limits<double>::infinity();
    for (const Pending& q : pending_)
      if (q.t > t) best = std::min(best, q.t);
    return best;
  }
  bool pending_at(double t) const {
    for (const Pending& q : pending_)
      if (q.t == t) return true;
    return false;
  }

  /// t0: the triggers' initial values; events whose trigger holds at t0 and
  /// whose initial value is false fire there.
  void start(double t0, std::span<const double> x, std::vector<char>& initial) {
    std::vector<double> g;
    std::vector<std::int8_t> sides;
    roots_at(t0, x, g, sides);
    std::vector<char> trig;
    triggers_at(t0, x, sides, trig);
    initial.assign(trig_.size(), 0);
    for (std::size_t k = 0; k < trig.size(); ++k) initial[k] = attrs_[k].initial_value ? 1 : 0;
    g_ = std::move(g);
    sides_ = std::move(sides);
    trig_ = initial;
    initial = std::move(trig);
  }

  /// Executes the instant at t on x (in place) given the trigger values
  /// `trig` just after the crossing: SBML's rules (see events.hpp). Returns
  /// the executions in order and their value sources; `delayed` is set when
  /// a delayed execution ran.
  EventInstant execute(double t, std::span<double> x, std::vector<char> trig, int root) {
    EventInstant inst;
    inst.root = root;
    // Ready: (event, values or empty, source index).
    struct Ready {
      std::size_t event;
      std::vector<double> values;
      std::size_t source;
      bool delayed;
      int origin;
    };
    std::vector<Ready> ready;
    std::size_t executed = 0;
    auto take_new = [&](const std::vector<char>& now) {
      for (std::size_t k = 0; k < now.size(); ++k) {
        if (trig_[k] || !now[k]) continue;
        const EventAttributes& a = attrs_[k];
        const double d = a.has_delay ? ev_.delay(k, t, x.first(n_), p_) : 0.0;
        COSTATE_CHECK(std::isfinite(d) && d >= 0.0,
                      event_label(ev_, k) << " at t = " << time_text(t) << ": its delay is "
                                          << d << " (a delay must be finite and ≥ 0)");
        std::vector<double> values;
        if (a.use_values_from_trigger_time) {
          const std::vector<std::size_t> targets = ev_.targets(k);
          values.assign(targets.size(), 0.0);
          ev_.assign(k, t, x.first(n_), p_, values);
        }
        if (d > 0.0) {
          pending_.push_back({t + d, k, std::move(values), static_cast<int>(recorded_)});
          inst.scheduled.push_back(k);
          inst.scheduled_source.push_back(executed);
        } else {
          ready.push_back({k, std::move(values), executed, false, -1});
        }
      }
      trig_ = now;
      drop_unpersistent(now);
      std::erase_if(ready, [&](const Ready& r) {
        return !attrs_[r.event].persistent && !now[r.event];
      });
    };
    // Due delayed executions first join the ready set.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->t == t) {
        ready.push_back({it->event, std::move(it->values), 0, true, it->origin});
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    take_new(trig);
    std::vector<double> g;
    std::vector<std::int8_t> sides;
    while (!ready.empty()) {
      COSTATE_CHECK(executed < kMaxEventsPerInstant,
                    "events: more than " << kMaxEventsPerInstant << " executions at t = "
                                         << time_text(t) << " (last " << event_label(ev_, ready.front().event)
                                         << "): the events trigger each other without end");
      // Highest priority first; ties in declaration order, or drawn at
      // random when every tied event asks for it (EventAttributes).
      std::size_t best = 0;
      double best_priority = -std::numeric_limits<double>::infinity();
      std::vector<double> pr(ready.size());
      for (std::size_t j = 0; j < ready.size(); ++j) {
        const std::size_t k = ready[j].event;
        pr[j] = attrs_[k].has_priority ? ev_.priority(k, t, x.first(n_), p_) : 0.0;
        if (pr[j] > best_priority || (pr[j] == best_priority && k < ready[best].event)) {
          best = j;
          best_priority = pr[j];
        }
      }
      std::vector<std::size_t> tied;
      bool random = true;
      for (std::size_t j = 0; j < ready.size(); ++j)
        if (pr[j] == best_priority) {
          tied.push_back(j);
          random = random && attrs_[ready[j].event].random_order_among_equal_priorities;
        }
      // mt19937_64's sequence is fixed by the standard; the modulo's bias is
      // below n / 2^64.
      if (random && tied.size() > 1) best = tied[order_rng_() % tied.size()];
      Ready r = std::move(ready[best]);
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
      const std::vector<std::size_t> targets = ev_.targets(r.event);
      if (r.values.empty() && !targets.empty()) {
        r.values.assign(targets.size(), 0.0);
        ev_.assign(r.event, t, x.first(n_), p_, r.values);
        r.source = executed;
      }
      for (std::size_t j = 0; j < targets.size(); ++j) {
        COSTATE_CHECK(std::isfinite(r.values[j]),
                      event_label(ev_, r.event) << " at t = " << time_text(t) << " assigns "
                                                << r.values[j] << " to state " << targets[j]
                                                << " (not finite)");
        x[targets[j]] = r.values[j];
      }
      inst.fired.push_back(r.event);
      inst.source.push_back(r.source);
      inst.origin.push_back(r.delayed ? r.origin : -1);
      inst.delayed = inst.delayed || r.delayed;
      ++executed;
      // The triggers again, after this execution (the roots' sides just
      // after t).
      roots_at(t, x, g, sides);
      settle(t, x, g, sides);
      std::vector<char> now;
      triggers_at(t, x, sides, now);
      take_new(now);
    }
    // A DAE: the algebraic states re-solved from the constraints after the
    // executions (InstantJump::apply does the same in replays).
    if (executed > 0 && sys_.n_algebraic() > 0)
      make_consistent(sys_, p_, t, x.first(sys_.n_states()),
                      "events (after the instant at t = " + time_text(t) + ")");
    roots_at(t, x, g, sides);
    if (executed > 0) settle(t, x, g, sides);
    g_ = g;
    sides_ = sides;
    if (!inst.delayed) inst.origin.clear();
    if (recorded(inst)) ++recorded_;
    return inst;
  }

  /// The sides just after t: an assignment can leave a root at zero to
  /// round-off (the ball on the floor, moving up); its side is then the one
  /// it moves to — the sign of ġ = g_t + g_y f — when it would reach it
  /// within kSettle of the time span. Otherwise the next step could end on
  /// the same side after crossing twice (up and down again) and miss the
  /// next firing.
  void settle(double t, std::span<const double> x, const std::vector<double>& g,
              std::vector<std::int8_t>& sides) const {
    if (g.empty()) return;
    std::vector<double> f(sys_.n_states()), value, jac;
    sys_.rhs(t, x, p_, f);
    derivative_in_t_y_p(
        [&](Dual8 td, std::span<const Dual8> yd, std::span<const Dual8> pd, std::span<Dual8> o) {
          ev_.roots(td, yd, pd, o);
        },
        t, x.first(n_), p_, g.size(), value, jac);
    const std::size_t w = 1 + n_ + p_.size();
    for (std::size_t r = 0; r < g.size(); ++r) {
      double gdot = jac[r * w];
      for (std::size_t q = 0; q < n_; ++q) gdot += jac[r * w + 1 + q] * f[q];
      if (!(gdot != 0.0) || !std::isfinite(gdot)) continue;
      if (g[r] == 0.0 || (g[r] * gdot < 0.0 && std::abs(g[r]) <= std::abs(gdot) * kSettle * span_))
        sides[r] = gdot > 0.0 ? 1 : -1;
    }
  }
  static constexpr double kSettle = 1e-9;
  void set_span(double span) { span_ = span; }

 private:
  const System& sys_;
  const EventModel& ev_;
  std::span<const double> p_;
  std::size_t n_;
  std::vector<double> g_;
  std::vector<std::int8_t> sides_;
  std::vector<char> trig_;
  std::vector<EventAttributes> attrs_;
  std::mt19937_64 order_rng_{event_order_seed()};  // kEventOrderSeed unless scoped (event_order.hpp)
  std::vector<Pending> pending_;
  std::size_t recorded_ = 0;  // the instants recorded so far (the step plan's events())
  double span_ = 1.0;
};

/// Locates the first crossing inside a step by retaking it (StepWatch):
/// Illinois on the roots that changed side, the bracket [lo, hi] shrinking
/// to a few ulps of t.
class Locator {
 public:
  Locator(EventState& state, double t0, double t1,
          std::function<void(double, std::span<const double>)> landed)
      : st_(state), span_(t1 - t0), landed_(std::move(landed)) {}

  /// The pending execution time the current segment must stop at.
  void set_stop(double t) { stop_at_ = t; }

  StepVerdict operator()(double t, std::span<const double>, double t_new,
                         std::span<const double> x_new) {
    std::vector<double> g;
    std::vector<std::int8_t> sides;
    st_.roots_at(t_new, x_new, g, sides);
    if (locating_ && t != lo_t_start_) locating_ = false;  // a new step start
    const std::span<const std::int8_t> old = st_.sides();
    bool crossed = false;
    for (std::size_t r = 0; r < sides.size(); ++r) crossed = crossed || sides[r] != old[r];
    if (!locating_) {
      if (crossed) {
        std::vector<char> trig;
        st_.triggers_at(t_new, x_new, sides, trig);
        if (st_.fires(trig)) {
          // Something fires inside (t, t_new]: locate the first crossing.
          locating_ = true;
          lo_t_start_ = t;
          lo_ = t;
          g_lo_.assign(st_.g().begin(), st_.g().end());
          hi_ = t_new;
          g_hi_ = g;
          retakes_ = 0;
          last_side_ = 0;
          root_ = -1;
          return next(t_new, x_new);
        }
        st_.drop_unpersistent(trig);
        st_.commit(std::move(g), std::move(sides), std::move(trig));
      } else {
        st_.commit_roots(std::move(g));
      }
      if (t_new == stop_at_) {
        end(x_new, -1);
        return {StepVerdict::Kind::Stop, t_new};
      }
      landed_(t_new, x_new);
      return {};
    }
    // A retaken step ending at t_new. Illinois: an end kept twice in a
    // row has its root value halved (persistently), so the bracket's far
    // end moves too.
    ++retakes_;
    if (crossed) {
      hi_ = t_new;
      g_hi_ = g;
      scale_hi_ = 1.0;
      if (last_side_ == 1) scale_lo_ *= 0.5;
      last_side_ = 1;
    } else {
      lo_ = t_new;
      g_lo_ = g;
      scale_lo_ = 1.0;
      if (last_side_ == -1) scale_hi_ *= 0.5;
      last_side_ = -1;
    }
    return next(t_new, x_new);
  }

  /// After a Stop: the crossing root (−1 for a pending time) and the state.
  int stopped_root() const { return stopped_root_; }
  std::span<const double> stopped_state() const { return stopped_x_; }
  bool stopped() const { return stopped_; }
  void reset() {
    stopped_ = false;
    locating_ = false;
    stop_at_ = std::numeric_limits<double>::quiet_NaN();
  }

 private:
  StepVerdict next(double t_new, std::span<const double> x_new) {
    const double tol = std::max(8.0 * std::numeric_limits<double>::epsilon() *
                                    std::max(std::abs(lo_), std::abs(hi_)),
                                1e-14 * span_);
    const bool at_hi = t_new == hi_;
    if (hi_ - lo_ <= tol || retakes_ >= kMaxRetakes) {
      if (at_hi) {
        locating_ = false;
        end(x_new, root_);
        return {StepVerdict::Kind::Stop, t_new};
      }
      return {StepVerdict::Kind::Retry, hi_};
    }
    // The root that changed side first (by secant estimates on [lo, hi]);
    // after kBisectAfter retakes, bisection (the bracket then halves each
    // time, whatever the roots' shape).
    double guess = hi_;
    int first = -1;
    const std::span<const std::int8_t> old = st_.sides();
    for (std::size_t r = 0; r < g_hi_.size(); ++r) {
      const std::int8_t side_hi = g_hi_[r] >= 0.0 ? 1 : -1;
      if (side_hi == old[r]) continue;
      const bool active = static_cast<int>(r) == root_;
      const double glo = g_lo_[r] * (active ? scale_lo_ : 1.0);
      const double ghi = g_hi_[r] * (active ? scale_hi_ : 1.0);
      const double denom = glo - ghi;
      double est = denom != 0.0 ? lo_ + (hi_ - lo_) * (glo / denom) : 0.5 * (lo_ + hi_);
      if (!std::isfinite(est)) est = 0.5 * (lo_ + hi_);
      // A root settled after an instant (on side old[r] by where it moves,
      // its value still on the other side by round-off): no secant across
      // it; bisect until a retake ends where its value has left — the ball
      // up in the air — then bracket its next crossing.
      if ((g_lo_[r] >= 0.0 ? 1 : -1) != old[r]) est = std::nextafter(lo_, hi_);
      if (first < 0 || est < guess) {
        guess = est;
        first = static_cast<int>(r);
      }
    }
    if (first != root_) {
      root_ = first;
      scale_lo_ = scale_hi_ = 1.0;
    }
    if (retakes_ >= kBisectAfter ||
        (first >= 0 && (g_lo_[static_cast<std::size_t>(first)] >= 0.0 ? 1 : -1) != old[static_cast<std::size_t>(first)]))
      guess = 0.5 * (lo_ + hi_);
    guess = std::clamp(guess, lo_ + 0.5 * tol, hi_ - 0.5 * tol);
    return {StepVerdict::Kind::Retry, guess};
  }

  void end(std::span<const double> x, int root) {
    stopped_ = true;
    stopped_root_ = root;
    stopped_x_.assign(x.begin(), x.end());
  }

  static constexpr int kBisectAfter = 24, kMaxRetakes = 200;
  EventState& st_;
  double span_;
  std::function<void(double, std::span<const double>)> landed_;
  bool locating_ = false;
  double scale_lo_ = 1.0, scale_hi_ = 1.0;
  int last_side_ = 0, retakes_ = 0, root_ = -1;
  double lo_t_start_ = 0.0, lo_ = 0.0, hi_ = 0.0;
  std::vector<double> g_lo_, g_hi_;
  double stop_at_ = std::numeric_limits<double>::quiet_NaN();
  bool stopped_ = false;
  int stopped_root_ = -1;
  std::vector<double> stopped_x_;
};

}  // namespace

namespace {

/// The CVODES methods: CVODES' own root finding (CVodeRootInit) locates the
/// roots on its interpolant; the instants execute as the native driver's
/// (EventState), and CVODES restarts from each. With `S` (column-major
/// n_x × ns, S(t0) on entry, direction d < n_p the parameter d, the others
/// fixed-p directions) also CVODES' forward sensitivities, jumped at each
/// instant by InstantJump's tangent (the continuous sensitivities' jump:
/// CVODES' solution is the continuous one to its tolerances). `landed(t, x,
/// S)` (S nullptr without). CVODES' adjoint crosses the instants stretch by
/// stretch from this run's record (cvodes_gradient.cpp).
EventRun cvodes_event_loop(const System& system, std::span<const double> x0,
                           std::span<const double> p, double t0, double t1,
                           const IntegratorOptions& options, std::span<const double> stops,
                           std::size_t ns, std::vector<double>* S,
                           const CvodesLanded& landed) {
  const std::size_t nx = system.n_states(), n = system.n_model_states(), np = p.size();
  const EventModel& ev = *system.events();
  // IDAS (a DAE's backend, idas.hpp) the same way: its root finding, a
  // consistent start (IDACalcIC) after each instant.
  const bool idas = is_idas(options.method);
  cvodes::Binding binding(system, p, options.method, options.cvodes_linear_solver, t0, x0);
  cvodes::System& cs = binding.system();
  const IdasView view(system);
  COSTATE_CHECK(!idas || view.r == 0, "integrator.method = idas does not take a fully implicit "
                                      "DAE (ResidualForm) with events");
  cs.n_roots = ev.n_roots();
  cs.roots = [&](double t, const double* y, double* g) {
    ev.roots(t, std::span<const double>(y, n), p, std::span<double>(g, cs.n_roots));
  };
  const cvodes::Settings settings = cvodes::settings_from(options, nx);
  EventRun out;
  Summary& s = out.summary;
  s.method = options.method;
  s.final_time = t0;
  std::vector<double> x(x0.begin(), x0.end());
  EventState state(system, p);
  state.set_span(t1 - t0);
  // An instant at t with its root: x ← x⁺, and S ← its tangent jump.
  std::unique_ptr<InstantJump> jump;
  if (S) jump = std::make_unique<InstantJump>(system);
  std::vector<double> before, Sr, P;
  auto execute = [&](double t, const std::vector<char>& now, int root) {
    before = x;
    EventInstant inst = state.execute(t, x, now, root);
    if (!recorded(inst)) return;
    if (!inst.fired.empty()) ++s.events;
    out.instant_times.push_back(t);
    out.before_instants.push_back(before);
    out.instants.push_back(inst);
    if (!S) return;
    out.before_tangents.push_back(*S);
    jump->apply(inst, t, before, p, true, out.instants.size() - 1);
    Sr.assign(nx * ns, 0.0);
    P.assign(np * ns, 0.0);
    for (std::size_t d = 0; d < ns; ++d)
      for (std::size_t q = 0; q < nx; ++q) Sr[q * ns + d] = (*S)[d * nx + q];
    for (std::size_t j = 0; j < np && j < ns; ++j) P[j * ns + j] = 1.0;
    jump->tangent(ns, Sr, P);
    for (std::size_t d = 0; d < ns; ++d)
      for (std::size_t q = 0; q < nx; ++q) (*S)[d * nx + q] = Sr[q * ns + d];
  };
  auto land = [&](double t) { landed(t, x, S ? S->data() : nullptr); };
  std::vector<char> trig;
  state.start(t0, x, trig);
  if (state.fires(trig)) {
    execute(t0, trig, -1);
  } else {
    state.commit(std::vector<double>(state.g().begin(), state.g().end()),
                 std::vector<std::int8_t>(state.sides().begin(), state.sides().end()), trig);
  }
  land(t0);
  double t = t0;
  std::vector<int> directions;
  while (t < t1) {
    const double pending = state.next_pending(t);
    const double t_end = std::min(t1, pending);
    std::vector<double> outs;
    for (double v : stops)
      if (v > t && v < t_end) outs.push_back(v);
    double root_time = 0.0;
    const auto at_output = [&](std::size_t, double tt, const double* y, const double* SS) {
      landed(tt, std::span<const double>(y, nx), SS);
    };
    const cvodes::Stats st =
        idas ? idas::integrate_to_root(view.dae(cs), settings, t, t_end, x, outs, at_output,
                                       root_time, directions, {.ns = ns, .S = S})
             : cvodes::integrate_to_root(cs, settings, t, t_end, x, outs, at_output, root_time,
                                         directions, {.ns = ns, .S = S});
    s.steps += st.steps;
    s.rejected_steps += st.error_test_failures;
    s.rhs_evaluations += st.rhs_evaluations;
    s.jacobian_evaluations += st.jacobian_evaluations;
    s.newton_iterations += st.nonlinear_iterations;
    s.final_time = st.final_time;
    if (!st.success) {
      s.termination = st.flag == "CV_TOO_MUCH_WORK" || st.flag == "IDA_TOO_MUCH_WORK"
                          ? Termination::MaxStepsReached
                      : st.flag == "CV_CONV_FAILURE" || st.flag == "IDA_CONV_FAIL"
                          ? Termination::NonlinearSolverFailed
                          : Termination::StepSizeUnderflow;
      s.message = st.message;
      return out;
    }
    std::vector<double> g;
    std::vector<std::int8_t> sides;
    std::vector<char> now;
    if (std::isnan(root_time)) {
      // t_end: t1, or a pending execution.
      t = t_end;
      if (t == pending) {
        state.roots_at(t, x, g, sides);
        state.triggers_at(t, x, sides, now);
        execute(t, now, -1);
      }
      land(t);
      continue;
    }
    // A root: the crossed ones on the side CVODES saw them cross to.
    t = root_time;
    state.roots_at(t, x, g, sides);
    int first = -1;
    for (std::size_t r = 0; r < directions.size(); ++r)
      if (directions[r] != 0) {
        sides[r] = directions[r] > 0 ? 1 : -1;
        if (first < 0) first = static_cast<int>(r);
      }
    state.triggers_at(t, x, sides, now);
    if (state.fires(now)) {
      execute(t, now, first);
    } else {
      state.drop_unpersistent(now);
      state.commit(std::move(g), std::move(sides), std::move(now));
    }
    land(t);
  }
  out.final_state = std::move(x);
  s.message = "reached t1";
  return out;
}

}  // namespace

EventRun cvodes_sensitivities_with_events(const System& system, std::span<const double> x0,
                                          std::span<const double> p, double t0, double t1,
                                          const IntegratorOptions& options,
                                          std::span<const double> stops, std::size_t ns,
                                          std::vector<double>& S, const CvodesLanded& landed) {
  COSTATE_CHECK(system.events() != nullptr, "events: the System has no events");
  COSTATE_CHECK(S.size() == system.n_states() * ns,
                "events: CVODES sensitivities need S of n_x × ns = " << system.n_states() * ns
                                                                     << " values");
  return cvodes_event_loop(system, x0, p, t0, t1, options, stops, ns, &S, landed);
}

EventRun run_with_events(const System& system, std::span<const double> x0,
                         std::span<const double> p, double t0, double t1,
                         const IntegratorOptions& options, std::span<const double> stops,
                         const std::function<void(double, std::span<const double>)>& landed) {
  COSTATE_CHECK(system.events() != nullptr, "events: the System has no events");
  if (is_cvodes(options.method) || is_idas(options.method))
    return cvodes_event_loop(system, x0, p, t0, t1, options, stops, 0, nullptr,
                             [&](double t, std::span<const double> x, const double*) {
                               landed(t, x);
                             });
  EventRun out;
  Summary& s = out.summary;
  s.method = options.method;
  s.final_time = t0;
  std::vector<double> times{t0};
  std::vector<int> orders;
  std::vector<EventInstant> instants;
  std::vector<std::vector<double>> before;
  std::vector<double> x(x0.begin(), x0.end());
  EventState state(system, p);
  state.set_span(t1 - t0);
  // t0: triggers' initial values; a trigger that holds at t0 with initial
  // value false fires now.
  std::vector<char> trig;
  state.start(t0, x, trig);
  if (state.fires(trig)) {
    EventInstant inst = state.execute(t0, x, trig, -1);
    if (recorded(inst)) {
      inst.at = 0;
      instants.push_back(std::move(inst));
      before.emplace_back(x0.begin(), x0.end());
    }
  } else {
    state.commit(std::vector<double>(state.g().begin(), state.g().end()),
                 std::vector<std::int8_t>(state.sides().begin(), state.sides().end()), trig);
  }
  landed(t0, x);
  Locator locate(state, t0, t1, landed);
  double t = t0;
  std::int64_t steps_left = options.max_steps;
  // Zeno guard (below).
  constexpr double kZenoGap = 1e-6;
  constexpr int kZenoCount = 20;
  int shrinking = 0;
  double last_gap = std::numeric_limits<double>::infinity();
  while (t < t1) {
    // The segment's stops: those after t, and the next pending execution.
    std::vector<double> seg_stops;
    for (double v : stops)
      if (v > t) seg_stops.push_back(v);
    const double pending = state.next_pending(t);
    locate.reset();
    if (pending <= t1) {
      seg_stops.insert(std::upper_bound(seg_stops.begin(), seg_stops.end(), pending), pending);
      seg_stops.erase(std::unique(seg_stops.begin(), seg_stops.end()), seg_stops.end());
      locate.set_stop(pending);
    }
    if (seg_stops.empty() || seg_stops.back() < t1) seg_stops.push_back(t1);
    IntegratorOptions opt = options;
    opt.stop_at_outputs = true;
    opt.max_steps = steps_left;
    // dopri5 after an instant: its first step is the step before the one
    // retaken to the instant (not Hairer's initial guess, two right-hand
    // sides more and usually far smaller); the controller takes it from there.
    if (options.method == Method::Dopri5 && !options.fixed_step() && times.size() >= 3)
      opt.dt = times[times.size() - 2] - times[times.size() - 3];
    const std::size_t first_step = times.size();
    opt.on_step = [&](double tt) {
      times.push_back(tt);
      if (options.on_step) options.on_step(tt);
    };
    opt.step_watch = std::ref(locate);
    Summary seg;
    seg.method = options.method;
    seg.final_time = t;
    if (options.method == Method::Sdirk3 && !options.fixed_step()) {
      detail::plan_sdirk3(system, p, x, t, t1, opt, seg_stops, seg);
    } else if (options.method == Method::Bdf) {
      detail::plan_bdf(system, p, x, t, t1, opt, seg_stops, seg, orders, nullptr);
    } else {
      seg = detail::integrate_system(system, x, p, t, t1, seg_stops, opt).summary;
    }
    s.steps += seg.steps;
    s.rejected_steps += seg.rejected_steps;
    s.rhs_evaluations += seg.rhs_evaluations;
    s.jacobian_evaluations += seg.jacobian_evaluations;
    s.factorizations += seg.factorizations;
    s.newton_iterations += seg.newton_iterations;
    s.last_step = seg.last_step;
    if (std::isnan(s.stiff_from)) s.stiff_from = seg.stiff_from;
    steps_left -= seg.steps + seg.rejected_steps;
    if (!seg.success()) {
      s.termination = seg.termination;
      s.message = seg.message;
      s.final_time = seg.final_time;
      out.plan_times = std::move(times);
      return out;
    }
    COSTATE_CHECK(times.size() > first_step,
                  "events: the integration from t = " << time_text(t) << " made no step");
    t = times.back();
    s.final_time = t;
    if (!locate.stopped()) {
      // Reached t1 without a stop: x is the state there.
      if (t >= t1) break;
      continue;
    }
    std::copy(locate.stopped_state().begin(), locate.stopped_state().end(), x.begin());
    const std::span<const double> x_before = locate.stopped_state();
    std::vector<double> g;
    std::vector<std::int8_t> sides;
    state.roots_at(t, x, g, sides);
    std::vector<char> now;
    state.triggers_at(t, x, sides, now);
    EventInstant inst = state.execute(t, x, now, locate.stopped_root());
    if (recorded(inst)) {
      // Zeno: instants piling up ever closer (a ball bouncing to rest) have
      // no solution past their accumulation point: kZenoCount gaps in a
      // row, each shorter than the one before, the last below kZenoGap of
      // the span (evenly spaced instants never trip it).
      if (!instants.empty()) {
        const double gap = t - times[instants.back().at];
        shrinking = gap < last_gap ? shrinking + 1 : 0;
        last_gap = gap;
        if (shrinking >= kZenoCount && gap <= kZenoGap * (t1 - t0))
          throw Error("events: " +
                      event_label(*system.events(), inst.fired.empty() ? inst.scheduled.front()
                                                                       : inst.fired.front()) +
                      " fired " + std::to_string(shrinking) +
                      " times in a row, each sooner after the last than the one before, the "
                      "last after " + time_text(gap) + ", up to t = " + time_text(t) +
                      ": the event times accumulate (Zeno behaviour) and the model has no "
                      "solution past that point; end the run before it or change the model");
      }
      inst.at = times.size() - 1;
      out.instant_times.push_back(t);
      instants.push_back(std::move(inst));
      before.emplace_back(x_before.begin(), x_before.end());
      if (!instants.back().fired.empty()) ++s.events;
    }
    landed(t, x);
  }
  out.plan_times = std::move(times);
  out.orders = std::move(orders);
  out.instants = std::move(instants);
  out.before_instants = std::move(before);
  out.final_state = std::move(x);
  s.message = "reached t1";
  return out;
}

}  // namespace detail
}  // namespace costate::ode
