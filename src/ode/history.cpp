// ode::History, ode::DelayedInputs and integrate_with_delays: delay
// differential equations by the method of steps (include/costate/ode/history.hpp).

#include "costate/ode/history.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <type_traits>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/integrate.hpp"
#include "ode/method_of_steps.hpp"

namespace costate::ode {

namespace {

using detail::same_time;

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

void History::append_break(std::span<const double> dydt) {
  COSTATE_CHECK(!t_.empty(), "History::append_break: the history is empty");
  COSTATE_CHECK_EQ(dydt.size(), n_, "History::append_break: one derivative per state");
  if (std::equal(dydt.begin(), dydt.end(), f_.end() - static_cast<long>(n_))) return;
  t_.push_back(t_.back());
  const std::vector<double> y(y_.end() - static_cast<long>(n_), y_.end());
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
  if (t >= t_.back()) {
    if (!same_time(t, t_.back()))
      throw Error("ode::History: y(" + std::to_string(t) + ") asked beyond the history's end (t = " +
                  std::to_string(t_.back()) + "): a delay read before its time was integrated");
    std::copy_n(y_.end() - static_cast<long>(n_), n_, y.begin());
    return;
  }
  const std::size_t i = piece(t);
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

std::size_t History::piece(double t) const {
  const std::size_t i1 = static_cast<std::size_t>(
      std::upper_bound(t_.begin(), t_.end(), t) - t_.begin());
  return std::min(i1, t_.size() - 1) - 1;
}

void History::derivative(double t, std::span<double> dy, bool left) const {
  COSTATE_CHECK(!t_.empty(), "History::derivative: the history is empty");
  COSTATE_CHECK_EQ(dy.size(), n_, "History::derivative: one value per state");
  if (n_ == 0) return;
  // The piece [t_i, t_{i+1}] holding t: from the left, the one ending at t
  // when t is a node (a break's left node).
  const std::size_t i1 = static_cast<std::size_t>(
      (left ? std::lower_bound(t_.begin(), t_.end(), t) : std::upper_bound(t_.begin(), t_.end(), t)) -
      t_.begin());
  if (t < t_.front() || (left && i1 == 0)) {
    std::fill(dy.begin(), dy.end(), 0.0);
    if (!initial_) return;  // the constant history y(t0)
    const double h = 1e-6 * std::max(1.0, std::abs(t));
    std::vector<double> up(n_), down(n_);
    initial_(t + h, up);  // the formula of the initial history, also just past t0
    initial_(t - h, down);
    for (std::size_t k = 0; k < n_; ++k) dy[k] = (up[k] - down[k]) / (2.0 * h);
    return;
  }
  if (t_.size() == 1 || (!left && t >= t_.back())) {
    if (!same_time(t, t_.back()))
      throw Error("ode::History: dy/dt(" + std::to_string(t) + ") asked beyond the history's "
                  "end (t = " + std::to_string(t_.back()) + ")");
    std::copy_n(f_.end() - static_cast<long>(n_), n_, dy.begin());
    return;
  }
  if (i1 >= t_.size()) {  // left of a time beyond the last node
    if (!same_time(t, t_.back()))
      throw Error("ode::History: dy/dt(" + std::to_string(t) + ") asked beyond the history's "
                  "end (t = " + std::to_string(t_.back()) + ")");
    std::copy_n(f_.end() - static_cast<long>(n_), n_, dy.begin());
    return;
  }
  const std::size_t i = i1 - 1;
  const double h = t_[i + 1] - t_[i], s = (t - t_[i]) / h;
  const double s2 = s * s;
  // d/dt of the Hermite basis (d/ds ÷ h for h00 and h01).
  const double d00 = (6 * s2 - 6 * s) / h, d10 = 3 * s2 - 4 * s + 1, d01 = (-6 * s2 + 6 * s) / h,
               d11 = 3 * s2 - 2 * s;
  const double* ya = &y_[i * n_];
  const double* yb = &y_[(i + 1) * n_];
  const double* fa = &f_[i * n_];
  const double* fb = &f_[(i + 1) * n_];
  for (std::size_t k = 0; k < n_; ++k)
    dy[k] = d00 * ya[k] + d10 * fa[k] + d01 * yb[k] + d11 * fb[k];
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

double DelayedInputs::tangents(std::size_t k, double t, std::span<const double> p,
                                            std::span<const double> p_dot,
                                            const History& s_history,
                                            std::span<const double> s_before,
                                            std::span<double> dz, bool left) const {
  using D = ad::Dual<double, 1>;
  const DelayedInput& in = inputs_[k];
  const std::size_t nd = dz.size();
  COSTATE_CHECK(constant_lag_[k] && quantity_reads_[k].empty(),
                in.text << ": sensitivities through a delay whose quantity or lag reads another "
                           "delay (nested delays) are not supported");
  COSTATE_CHECK_EQ(p_dot.size(), nd * np_, "DelayedInputs::tangents: ṗ is directions × parameters");
  // The programs over (t, y, p, w) on Dual: ṫ, ẏ, ṗ given, w's tangents formed.
  std::vector<D> v;
  auto eval = [&](const expr::Program& prog, double time, double time_dot,
                  std::span<const double> y, std::span<const double> y_dot,
                  std::span<const double> pd) {
    v.clear();
    v.push_back(D(time, {time_dot}));
    for (std::size_t i = 0; i < ny_; ++i) v.push_back(D(y[i], {y_dot[i]}));
    for (std::size_t m = 0; m < np_; ++m) v.push_back(D(p[m], {pd[m]}));
    for (const expr::Program& w : w_) v.push_back(w.evaluate(std::span<const D>(v)));
    return prog.evaluate(std::span<const D>(v));
  };
  const std::vector<double> zeros(ny_, 0.0);
  std::vector<double> y_tau(ny_), ydot_tau(ny_), s_tau(ny_ * nd), y_dot(ny_);
  double value = 0.0;
  bool first = true;
  for (std::size_t j = 0; j < nd; ++j) {
    const std::span<const double> pd = p_dot.subspan(j * np_, np_);
    // The lag d(p) (a constant: it reads neither t nor the state) and ḋ.
    const D d = eval(in.lag, t, 0.0, zeros, zeros, pd);
    const double tau = t - d.value(), tau_dot = -d.tangent(0);
    if (first) {
      history_->value(tau, y_tau);
      history_->derivative(tau, ydot_tau, left);
      if (tau < history_->t0()) std::copy(s_before.begin(), s_before.end(), s_tau.begin());
      else s_history.value(tau, s_tau);
      first = false;
    }
    // d/dθ y(τ(θ)) = s(τ) + ẏ(τ) τ̇
    for (std::size_t i = 0; i < ny_; ++i) y_dot[i] = s_tau[i * nd + j] + ydot_tau[i] * tau_dot;
    const bool before = tau < history_->t0() && !in.quantity_before_start.empty();
    const D z = eval(before ? in.quantity_before_start : in.quantity, tau, tau_dot, y_tau, y_dot, pd);
    value = z.value();
    dz[j] = z.tangent(0);
  }
  return value;
}

namespace {

/// ad::Dual<double, N>: the Jacobians' scalar type, whose value the
/// sensitivity blocks set.
template <class T>
struct is_first_order_dual : std::false_type {};
template <int N>
struct is_first_order_dual<ad::Dual<double, N>> : std::true_type {};

/// The model with its slots filled from the history at each evaluation
/// (the slots the right-hand side reads: constant lags, quantities from the
/// history alone, so they do not depend on y(t) and the Jacobian is the
/// model's own) — and, with nd directions, the state z = (y, s) with
/// s[i·nd + j] = dy_i/dθ_j and z' = (f, s') (history.hpp's tangent
/// equations). On scalar types other than double (the implicit methods'
/// Jacobians, sparsity) each block s_j gets f_y at y: the block-diagonal
/// Jacobian.
struct DelayedModel {
  const EquationModel* model;
  const DelayedInputs* slots;
  std::vector<double> p;  ///< the parameters the slots' quantities read
  std::size_t ny = 0, nd = 0;
  std::vector<double> p_dot;           ///< nd × n_p: the directions' ṗ
  const History* s_history = nullptr;  ///< s's history (nd > 0)
  std::vector<double> s_before;        ///< s before t0: the directions' ẏ0

  template <class T>
  void rhs(double t, std::span<const T> z, std::span<const T> pt, std::span<T> dz) const {
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
    const std::span<const T> y = z.first(ny);
    model->rhs<T>(t, y, std::span<const T>(with), dz.first(ny));
    if (nd == 0) return;
    if constexpr (std::is_same_v<T, double>) {
      sensitivities(t, z, q, dz.subspan(ny), false);
    } else {
      std::vector<T> sj(ny), out(ny);
      for (std::size_t j = 0; j < nd; ++j) {
        for (std::size_t i = 0; i < ny; ++i) {
          sj[i] = z[ny + i * nd + j];
          if constexpr (is_first_order_dual<T>::value) sj[i].value() = z[i].value();
        }
        model->rhs<T>(t, std::span<const T>(sj), std::span<const T>(with), std::span<T>(out));
        for (std::size_t i = 0; i < ny; ++i) dz[ny + i * nd + j] = out[i];
      }
      if constexpr (is_first_order_dual<T>::value) {
        std::vector<double> zv(z.size()), dzv(z.size()), pv(pt.size());
        for (std::size_t i = 0; i < z.size(); ++i) zv[i] = z[i].value();
        for (std::size_t m = 0; m < pt.size(); ++m) pv[m] = pt[m].value();
        rhs<double>(t, zv, pv, dzv);
        for (std::size_t i = ny; i < z.size(); ++i) dz[i].value() = dzv[i];
      }
    }
  }

  /// z' at a node of the histories: at the end of a segment the limit from
  /// the left (`left`: ẏ(t − d) jumps at t − d = t0, so s' jumps at t0 + d).
  void node(double t, std::span<const double> z, std::span<double> dz, bool left) const {
    rhs<double>(t, z, p, dz);
    if (nd == 0 || !left) return;
    std::vector<double> q = p;
    slots->fill(t, {}, q, true);
    sensitivities(t, z, q, dz.subspan(ny), true);
  }

  /// s' = f_y s_j + f_p ṗ_j + Σ_k f_{z_k} ż_k, one Dual pass per direction
  /// (q: the parameters with the slots' values).
  void sensitivities(double t, std::span<const double> z, const std::vector<double>& q,
                     std::span<double> ds, bool left) const {
    using D = ad::Dual<double, 1>;
    const std::size_t np = q.size();
    std::vector<double> slot_dot(slots->inputs().size() * nd, 0.0);
    for (std::size_t k = 0; k < slots->inputs().size(); ++k)
      if (slots->read_by_rhs(k))
        slots->tangents(k, t, p, p_dot, *s_history, s_before,
                        std::span<double>(slot_dot).subspan(k * nd, nd), left);
    std::vector<D> yd(ny), pd(np), out(ny);
    for (std::size_t j = 0; j < nd; ++j) {
      for (std::size_t i = 0; i < ny; ++i) yd[i] = D(z[i], {z[ny + i * nd + j]});
      for (std::size_t m = 0; m < np; ++m) pd[m] = D(q[m], {p_dot[j * np + m]});
      for (std::size_t k = 0; k < slots->inputs().size(); ++k)
        if (slots->read_by_rhs(k)) pd[slots->inputs()[k].parameter].tangent(0) = slot_dot[k * nd + j];
      model->rhs<D>(t, std::span<const D>(yd), std::span<const D>(pd), std::span<D>(out));
      for (std::size_t i = 0; i < ny; ++i) ds[i * nd + j] = out[i].tangent(0);
    }
  }
};

/// integrate_with_delays (no directions) and
/// forward_sensitivities_with_delays: the method of steps on z = (y, s).
DelayedSensitivities method_of_steps(const EquationModel& model, std::span<const double> y0,
                                     std::span<const double> p, double t0, double t1,
                                     std::span<const double> outputs,
                                     const std::vector<DelayedInput>& inputs,
                                     const IntegratorOptions& options,
                                     const std::vector<SensitivityDirection>& directions,
                                     History::Initial initial_history) {
  const std::size_t ny = model.states().size(), np = p.size(), nd = directions.size();
  detail::check_method_of_steps("integrate_with_delays", model, y0, p, t0, t1, outputs, inputs);
  DelayedSensitivities out;
  out.n_directions = nd;
  // The histories the slots read while they grow (the state's is shared by
  // the solution).
  auto history = std::make_shared<History>(ny);
  History s_history(ny * nd);
  out.solution.n_states = ny;
  out.solution.history = history;
  const DelayedInputs slots(model, inputs, *history);

  // The method of steps' segment: the shortest lag the right-hand side
  // reads; segments also end at t0 + d for every lag d (where s' jumps,
  // and y's second derivative).
  const detail::SegmentLags lags = detail::segment_lags(
      model, y0, p, t0, inputs, slots,
      nd > 0 ? ": sensitivities through a delay whose quantity reads another delay (nested "
               "delays) are not supported"
             : "");

  // The directions: ṗ (nd × np) and ẏ0 as s(t0) (and before it).
  DelayedModel dm{&model, &slots, std::vector<double>(p.begin(), p.end()), ny, nd, {}, &s_history, {}};
  dm.p_dot.assign(nd * np, 0.0);
  dm.s_before.assign(ny * nd, 0.0);
  for (std::size_t j = 0; j < nd; ++j) {
    const SensitivityDirection& dir = directions[j];
    COSTATE_CHECK_EQ(dir.parameters.size(), np,
                     "forward_sensitivities_with_delays: direction " << j << ": one ṗ per parameter");
    COSTATE_CHECK(dir.initial_state.empty() || dir.initial_state.size() == ny,
                  "forward_sensitivities_with_delays: direction "
                      << j << ": one ẏ0 per state (or none), got " << dir.initial_state.size());
    std::copy(dir.parameters.begin(), dir.parameters.end(), dm.p_dot.begin() + static_cast<long>(j * np));
    for (std::size_t i = 0; i < dir.initial_state.size(); ++i)
      dm.s_before[i * nd + j] = dir.initial_state[i];
  }
  for (const DelayedInput& in : inputs)  // a slot's tangent is formed, not given
    for (std::size_t j = 0; j < nd; ++j) dm.p_dot[j * np + in.parameter] = 0.0;

  const std::size_t nz = ny * (1 + nd);
  std::vector<double> fz(nz), z(y0.begin(), y0.end());
  z.insert(z.end(), dm.s_before.begin(), dm.s_before.end());
  auto append = [&](double t, std::span<const double> zt) {
    history->append(t, zt.first(ny), std::span<const double>(fz).first(ny));
    if (nd > 0) s_history.append(t, zt.subspan(ny), std::span<const double>(fz).subspan(ny));
  };
  // The node at t0: its derivative reads the slots at t0 (the initial
  // history), which read the node's y.
  history->set_initial(initial_history);
  append(t0, z);  // fz = 0 for now: the slots at t0 read the history alone
  dm.rhs<double>(t0, z, p, fz);
  *history = History(ny);
  s_history = History(ny * nd);
  append(t0, z);
  history->set_initial(initial_history);
  Summary& total = out.solution.summary;
  total.method = options.method;
  std::size_t next = 0;
  auto record = [&](double t, std::span<const double> zt) {
    while (next < outputs.size() && (outputs[next] < t || same_time(outputs[next], t))) {
      if (same_time(outputs[next], t)) {
        out.solution.t.push_back(outputs[next]);
        out.solution.y.insert(out.solution.y.end(), zt.begin(), zt.begin() + static_cast<long>(ny));
        out.s.insert(out.s.end(), zt.begin() + static_cast<long>(ny), zt.end());
      }
      ++next;
    }
  };
  record(t0, z);
  double a = t0;
  while (a < t1 && !same_time(a, t1)) {
    const double b = detail::segment_end(lags, a, t1);
    const std::vector<double> times = detail::segment_samples(lags, a, b, outputs);
    Problem<DelayedModel> problem{dm, z, dm.p, {a, b}, times};
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
      const std::span<const double> zj = seg.state(j);
      const bool end = j + 1 == seg.n_outputs() && seg.summary.success();
      dm.node(seg.t[j], zj, fz, end);
      append(seg.t[j], zj);
      if (end && nd > 0) {  // the right limit starts the next segment
        dm.node(seg.t[j], zj, fz, false);
        history->append_break(std::span<const double>(fz).first(ny));
        s_history.append_break(std::span<const double>(fz).subspan(ny));
      }
      record(seg.t[j], zj);
      total.final_time = seg.t[j];
    }
    if (!seg.summary.success()) {
      total.termination = seg.summary.termination;
      total.message = seg.summary.message + " (method-of-steps segment [" + std::to_string(a) +
                      ", " + std::to_string(b) + "])";
      return out;
    }
    z.assign(seg.y.end() - static_cast<long>(nz), seg.y.end());
    a = b;
  }
  total.termination = Termination::Success;
  total.message = "reached t1";
  return out;
}

}  // namespace

Solution integrate_with_delays(const EquationModel& model, std::span<const double> y0,
                               std::span<const double> p, double t0, double t1,
                               std::span<const double> outputs,
                               const std::vector<DelayedInput>& inputs,
                               const IntegratorOptions& options, History::Initial initial_history) {
  // The run is the discrete adjoint's forward pass (issue 35: the same
  // steps, the same numbers as `costate sensitivity`'s J): steps landing on
  // the history's samples. A failed integration there is run again below,
  // whose summary says where it stopped (termination, final time).
  if (detail::delay_forward_applies(model, inputs, options)) {
    try {
      return detail::delay_forward(model, y0, p, t0, t1, outputs, inputs, options,
                                   initial_history);
    } catch (const Error&) {
    }
  }
  return method_of_steps(model, y0, p, t0, t1, outputs, inputs, options, {},
                         std::move(initial_history))
      .solution;
}

DelayedSensitivities forward_sensitivities_with_delays(
    const EquationModel& model, std::span<const double> y0, std::span<const double> p, double t0,
    double t1, std::span<const double> outputs, const std::vector<DelayedInput>& inputs,
    const IntegratorOptions& options, const std::vector<SensitivityDirection>& directions,
    History::Initial initial_history) {
  COSTATE_CHECK(!directions.empty(), "forward_sensitivities_with_delays: no direction given "
                                     "(integrate_with_delays simulates without sensitivities)");
  return method_of_steps(model, y0, p, t0, t1, outputs, inputs, options, directions,
                         std::move(initial_history));
}

}  // namespace costate::ode
