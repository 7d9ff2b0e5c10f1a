// petab::evaluate — log-likelihood, χ² and gradient of a PEtab problem over
// all its experiments (see include/costate/petab/problem.hpp).
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <optional>
#include <sstream>
#include <type_traits>
#include <variant>

#include "costate/ad/drivers.hpp"
#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/nonlinear/solve.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/support.hpp"
#include "costate/petab/problem.hpp"

namespace costate::petab {
namespace {

/// The SBML right-hand side on the parameters an experiment is
/// differentiated with respect to: q. Model parameter j is `base[j]`, or
/// q[i] for each (j, i) in `from_q` (a parameter-table entry that is
/// estimated — several model parameters may read the same entry). Also the
/// EquationModel's own reverse derivatives (ode::detail::HasOwnVjp), with
/// p̄ folded back onto q.
struct ReducedModel {
  std::shared_ptr<const ode::EquationModel> equations;
  std::vector<double> base;
  std::vector<std::pair<std::size_t, std::size_t>> from_q;
  /// Times outside [t_lo, t_hi] are read at the nearer end (a segment
  /// between switch times sees its own side of each switch).
  double t_lo = -std::numeric_limits<double>::infinity();
  double t_hi = std::numeric_limits<double>::infinity();

  template <class T>
  void model_parameters(std::span<const T> q, std::vector<T>& p) const {
    p.assign(base.begin(), base.end());
    for (const auto& [j, i] : from_q) p[j] = q[i];
  }
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> q, std::span<T> dydt) const {
    if constexpr (std::is_floating_point_v<T> || ad::is_dual_v<T>) {
      thread_local std::vector<T> p;
      model_parameters(q, p);
      equations->rhs(std::clamp(t, t_lo, t_hi), y, std::span<const T>(p), dydt);
    } else {
      std::vector<T> p;
      model_parameters(q, p);
      equations->rhs(std::clamp(t, t_lo, t_hi), y, std::span<const T>(p), dydt);
    }
  }
  std::size_t vjp_workspace() const { return equations->vjp_workspace(); }
  void linearize(double t, std::span<const double> y, std::span<const double> q,
                 std::span<double> f, std::span<double> work) const {
    thread_local std::vector<double> p;
    model_parameters(q, p);
    equations->linearize(std::clamp(t, t_lo, t_hi), y, std::span<const double>(p), f, work);
  }
  void vjp(std::span<double> work, std::span<const double> w, std::span<double> ybar,
           std::span<double> qbar) const {
    thread_local std::vector<double> pbar;
    pbar.assign(base.size(), 0.0);
    equations->vjp(work, w, ybar, std::span<double>(pbar));
    for (const auto& [j, i] : from_q) qbar[i] += pbar[j];
  }

  /// A DAE's algebraic states (ode::HasAlgebraicStates: SBML algebraic
  /// rules, fast reactions): their rows of rhs are constraints 0 = g, which
  /// only the DAE integrators take (the support table refuses the others).
  const std::vector<std::size_t>& algebraic_states() const { return equations->algebraic_states(); }

  // The SBML model's events (ode::HasEvents) on q: the same roots, triggers
  // and assignments with model parameter j read from q where from_q says.
  // A model without events has n_events() == 0, and make_system then gives
  // a System without events (ode::System::has_events()).
  std::size_t n_roots() const { return equations->n_roots(); }
  std::size_t n_events() const { return equations->n_events(); }
  template <class T>
  void roots(T t, std::span<const T> y, std::span<const T> q, std::span<T> g) const {
    std::vector<T> p;
    model_parameters(q, p);
    equations->roots<T>(t, y, std::span<const T>(p), g);
  }
  ode::EventAttributes event_attributes(std::size_t k) const { return equations->event_attributes(k); }
  bool event_trigger(std::size_t k, double t, std::span<const double> y, std::span<const double> q,
                     std::span<const std::int8_t> sides) const {
    return equations->event_trigger(k, t, y, q, sides);  // reads the sides alone
  }
  std::span<const std::size_t> event_targets(std::size_t k) const {
    return equations->event_targets(k);
  }
  template <class T>
  void event_assign(std::size_t k, T t, std::span<const T> y, std::span<const T> q,
                    std::span<T> values) const {
    std::vector<T> p;
    model_parameters(q, p);
    equations->event_assign<T>(k, t, y, std::span<const T>(p), values);
  }
  double event_delay(std::size_t k, double t, std::span<const double> y,
                     std::span<const double> q) const {
    std::vector<double> p;
    model_parameters(q, p);
    return equations->event_delay(k, t, y, std::span<const double>(p));
  }
  double event_priority(std::size_t k, double t, std::span<const double> y,
                        std::span<const double> q) const {
    std::vector<double> p;
    model_parameters(q, p);
    return equations->event_priority(k, t, y, std::span<const double>(p));
  }
};
static_assert(ode::HasEvents<ReducedModel>);

/// The double value of any of the AD scalar types.
template <class T>
double plain_value(const T& v) {
  if constexpr (std::is_arithmetic_v<T>)
    return static_cast<double>(v);
  else
    return petab::plain_value(v.value());
}

/// −log p of the measurements at each observation time of one experiment,
/// as a function of the state and of pext = [model parameters | table
/// values] (the formulas read both).
struct Likelihood {
  const Problem* pb = nullptr;
  const Experiment* ex = nullptr;
  bool data_jacobian = true;
  /// Filled by the double evaluations: per measurement h and σ.
  Result* record = nullptr;

  /// Calls each(i, h, σ) for every measurement i at observation time k,
  /// with the observable h and the noise σ from the formulas (the row's
  /// overrides in place), at state y and pext = p.
  template <class T, class Each>
  void observe(std::size_t k, std::span<const T> y, std::span<const T> p, Each&& each) const {
    const sbml::Model& m = pb->model;
    const std::size_t ny = y.size(), np = m.parameter_names.size(), ntab = pb->parameters.size();
    const std::size_t nw = m.equations.intermediate_names().size();
    const std::size_t base = 1 + ny + np;
    const std::size_t fixed = base + nw + ntab;
    std::vector<T> v(pb->formula_variables.size(), T(0.0));
    v[0] = T(ex->times[k]);
    std::copy(y.begin(), y.end(), v.begin() + 1);
    std::copy(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(np),
              v.begin() + static_cast<std::ptrdiff_t>(1 + ny));
    for (std::size_t w = 0; w < nw; ++w)
      v[base + w] = m.equations.intermediate(w).evaluate(std::span<const T>(v.data(), base + w));
    std::copy(p.begin() + static_cast<std::ptrdiff_t>(np), p.begin() + static_cast<std::ptrdiff_t>(np + ntab),
              v.begin() + static_cast<std::ptrdiff_t>(base + nw));
    auto slot = [&](const Ref& r) {
      return r.is_parameter() ? p[np + static_cast<std::size_t>(r.parameter)] : T(r.value);
    };
    for (std::size_t i : ex->at_time[k]) {
      const Measurement& me = pb->measurements[i];
      const Observable& o = pb->observables[me.observable];
      for (std::size_t s = 0; s < me.observable_parameters.size(); ++s)
        v[fixed + s] = slot(me.observable_parameters[s]);
      for (std::size_t s = 0; s < me.noise_parameters.size(); ++s)
        v[fixed + pb->max_observable_parameters + s] = slot(me.noise_parameters[s]);
      const std::span<const T> all(v);
      each(i, o.program.evaluate(all), o.noise_program.evaluate(all));
    }
  }

  template <class T>
  T at(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    using std::abs, std::log, std::log10;
    T sum = T(0.0);
    observe<T>(k, y, p, [&](std::size_t i, const T& h, const T& sigma) {
      const Measurement& me = pb->measurements[i];
      const Observable& o = pb->observables[me.observable];
      T sim = h;
      double data = me.value, jac = 0.0;
      if (o.transformation == Transformation::Log) {
        sim = T(log(h));
        data = std::log(me.value);
        jac = std::log(me.value);
      } else if (o.transformation == Transformation::Log10) {
        sim = T(log10(h));
        data = std::log10(me.value);
        jac = std::log(me.value * std::numbers::ln10);
      }
      if (!data_jacobian) jac = 0.0;
      const T diff = T(data - sim);
      const T r = T(diff / sigma);
      T nll;
      if (o.distribution == Distribution::Normal)
        nll = T(0.5 * log(2.0 * std::numbers::pi * sigma * sigma) + 0.5 * r * r + jac);
      else
        nll = T(log(2.0 * sigma) + abs(diff) / sigma + jac);
      sum = T(sum + nll);
      if (record) {
        record->simulations[i] = petab::plain_value(h);
        record->sigmas[i] = petab::plain_value(sigma);
      }
    });
    return sum;
  }
};

/// The objective ode::gradient sees on one segment: the likelihood of
/// observations [k0, k1) as a function of the state alone (pext held
/// constant: its direct derivatives are taken after the solve, from the
/// recorded states), plus λᵀy at the segment's end (λ: the later
/// segments' gradient with respect to this state; empty for the last).
/// Records y(t_k), and y(end) when y_end is given, of the last evaluation
/// (all evaluations of one call lie on the same solution).
struct SegmentLikelihood {
  const Likelihood* like = nullptr;
  const std::vector<double>* pext = nullptr;
  std::vector<std::vector<double>>* states = nullptr;
  std::size_t k0 = 0, k1 = 0;
  const std::vector<double>* lambda = nullptr;
  std::vector<double>* y_end = nullptr;

  std::vector<double> observation_times() const {
    return std::vector<double>(like->ex->times.begin() + static_cast<std::ptrdiff_t>(k0),
                               like->ex->times.begin() + static_cast<std::ptrdiff_t>(k1));
  }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> /*q*/) const {
    std::vector<double>& s = (*states)[k0 + k];
    s.resize(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) s[i] = petab::plain_value(y[i]);
    std::vector<T> p(pext->begin(), pext->end());
    return like->at<T>(k0 + k, y, std::span<const T>(p));
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> /*q*/) const {
    if (y_end != nullptr) {
      y_end->resize(y.size());
      for (std::size_t i = 0; i < y.size(); ++i) (*y_end)[i] = petab::plain_value(y[i]);
    }
    T sum = T(0.0);
    for (std::size_t i = 0; i < lambda->size(); ++i) sum = T(sum + (*lambda)[i] * y[i]);
    return sum;
  }
};

/// Relative distance from a switch time at which a segment reads the
/// right-hand side when asked exactly at the switch (so a condition like
/// t < t_s takes the segment's side despite the rounding of t_s).
constexpr double kSwitchMargin = 1e-13;

/// A segment's pending adjoint (ode::PendingGradient) holds its checkpoint
/// points — CvodesAdjoint::resolved_steps of them, allocated by CVODES up
/// front whatever the segment needs — until its backward pass. A segment
/// whose forward pass took fewer steps than 1/kReleaseFraction of them is
/// not held: when its backward pass comes, its forward pass is integrated
/// again from the same start state with as many points as it took steps
/// (kReleaseMargin more, and at least kReleaseMinPoints: polynomial
/// interpolation needs 13 on cvodes_adams) — one checkpoint interval either
/// way, so the same steps and the same bits, at most that fraction of the
/// points' worth of steps. Chen_MSB2009's 0.01-wide ramp segments (68–155
/// steps against 5 548 points, 45 MB each).
constexpr std::int64_t kReleaseFraction = 16;
constexpr std::int64_t kReleaseMargin = 8;
constexpr std::int64_t kReleaseMinPoints = 16;

/// The switch times of the SBML piecewise inputs (sbml::Model::
/// time_switches): each g(t) = lhs − rhs of a time comparison that is
/// affine in t (checked at t = 0, 1, 2 and t1) has its zero at −g(0)/g′;
/// a condition that is not affine in t is not located (the integrator
/// then steps over its switch, as before).
struct Switches {
  std::vector<expr::Program> g;
  explicit Switches(const sbml::Model& m) {
    for (std::size_t i = 0; i < m.time_switches.size(); ++i)
      g.push_back(expr::Program::build(m.time_switches[i], 1 + m.parameter_names.size(),
                                       "time switch", "time switch " + std::to_string(i)));
  }
  /// The switch time of program `i` at parameters p, or NaN when it is not
  /// located (not affine in t, or outside (0, t1)).
  double time(std::size_t i, const std::vector<double>& p, double t1) const {
    std::vector<double> v(1 + p.size());
    std::copy(p.begin(), p.end(), v.begin() + 1);
    auto at = [&](double t) {
      v[0] = t;
      return g[i].evaluate(std::span<const double>(v));
    };
    const double a = at(0.0), b = at(1.0) - a;
    const double scale = std::abs(a) + std::abs(b) * std::max(2.0, t1);
    constexpr double kAffine = 1e-12;  // relative deviation from a + b t still called affine
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (!(b != 0.0) || !std::isfinite(a) || !std::isfinite(b) ||
        std::abs(at(2.0) - (a + 2.0 * b)) > kAffine * scale ||
        std::abs(at(t1) - (a + t1 * b)) > kAffine * scale)
      return nan;
    const double ts = -a / b;
    return ts > 0.0 && ts < t1 ? ts : nan;
  }
  std::vector<double> times(const std::vector<double>& p, double t1) const {
    std::vector<double> out;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (const double ts = time(i, p, t1); !std::isnan(ts)) out.push_back(ts);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  /// d t_s / d p_j of the switch at time `ts` (the first program located
  /// there), by central differences of t_s(p) = −g(0, p)/g_t: exact for a
  /// switch time linear in p_j (t − tau, t − t_on), O(h²) ≈ 1e-12 of the
  /// size otherwise. 0 when p_j does not move it.
  double derivative(double ts, const std::vector<double>& p, std::size_t j, double t1) const {
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (time(i, p, t1) != ts) continue;
      const double h = 1e-6 * std::max(1.0, std::abs(p[j]));
      std::vector<double> up = p, down = p;
      up[j] += h;
      down[j] -= h;
      const double a = time(i, up, t1), b = time(i, down, t1);
      if (std::isnan(a) || std::isnan(b)) return 0.0;  // moved out of (0, t1)
      return (a - b) / (2.0 * h);
    }
    return 0.0;
  }
};

/// Where each model parameter of a condition comes from: a number, or a
/// parameter-table entry.
std::vector<Ref> model_parameter_sources(const Problem& pb, const Condition& c) {
  const std::size_t np = pb.model.parameter_names.size();
  std::vector<Ref> src(np);
  for (std::size_t j = 0; j < np; ++j) {
    if (c.parameters[j].is_parameter() || !std::isnan(c.parameters[j].value)) src[j] = c.parameters[j];
    else if (pb.model_parameter_row[j] >= 0) src[j].parameter = pb.model_parameter_row[j];
    else src[j].value = pb.model.parameters[j];
  }
  return src;
}

double value_of(const Ref& r, const std::vector<double>& lin) {
  return r.is_parameter() ? lin[static_cast<std::size_t>(r.parameter)] : r.value;
}
bool overrides(const Ref& r) { return r.is_parameter() || !std::isnan(r.value); }

/// The SBML initial values as programs over (t, model parameters).
struct InitialValues {
  std::vector<expr::Program> programs;
  explicit InitialValues(const sbml::Model& m) {
    for (std::size_t i = 0; i < m.initial_state.size(); ++i)
      programs.push_back(expr::Program::build(m.initial_state[i], 1 + m.parameter_names.size(),
                                              m.initial_state_text[i],
                                              "initial value of " + m.state_names[i]));
  }
  template <class T>
  std::vector<T> operator()(const std::vector<T>& p) const {
    std::vector<T> v(1 + p.size(), T(0.0));
    std::copy(p.begin(), p.end(), v.begin() + 1);
    std::vector<T> y;
    for (const auto& prog : programs) y.push_back(prog.evaluate(std::span<const T>(v)));
    return y;
  }
};

/// The initial state of a condition: SBML values at p, then the
/// condition's species columns.
std::vector<double> start_state(const Problem& pb, const InitialValues& iv, const Condition& c,
                                const std::vector<double>& p, const std::vector<double>& lin) {
  std::vector<double> y = iv(p);
  for (std::size_t i = 0; i < y.size(); ++i)
    if (overrides(c.states[i])) y[i] = value_of(c.states[i], lin);
  (void)pb;
  return y;
}

/// The chain rule back through start_state: adds the adjoint of y0 to p̄
/// (model parameters) and lin̄ (table values).
void start_state_adjoint(const InitialValues& iv, const Condition& c, const std::vector<double>& p,
                         const std::vector<double>& y0_bar, std::vector<double>& p_bar,
                         std::span<double> lin_bar) {
  std::vector<double> w = y0_bar;
  bool any = false;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (overrides(c.states[i])) {
      if (c.states[i].is_parameter()) lin_bar[static_cast<std::size_t>(c.states[i].parameter)] += w[i];
      w[i] = 0.0;
    }
    any = any || w[i] != 0.0;
  }
  if (!any || p.empty()) return;
  const ad::VjpResult r = ad::vjp([&](const auto& q) { return iv(q); }, p, w);
  for (std::size_t j = 0; j < p.size(); ++j) p_bar[j] += r.cotangent[j];
}

/// The steady state of f(x, p) = 0 with the conserved moieties of the
/// right-hand side fixed at their initial values: for each left null vector
/// l of ∂f/∂x (l ᵀ f ≡ 0), one equation of f (the pivot of Lᵀ) is replaced by
/// lᵀ(x − x0). The right-hand side is read at the fixed time `t` (0 for a
/// pre-equilibration; the end of the time course for measurements at time
/// inf). Differentiated implicitly by steady_state_adjoint and
/// steady_state_tangent — never through the iterations that found it.
struct SteadyState {
  const ode::EquationModel* f = nullptr;
  double t = 0.0;                    ///< the time the right-hand side is read at
  Eigen::MatrixXd L;                 ///< n × k conservation laws
  std::vector<std::size_t> pivots;   ///< the equations they replace
  std::vector<double> conserved;     ///< Lᵀ x0
  std::vector<double> x;             ///< the steady state
  /// How it was found: "Newton", or "integration to t = …, then Newton".
  std::string how;
  /// Empty, or why the implicit derivative is not defined here (∂H/∂x
  /// singular at x); the derivatives then throw it, the values stand.
  std::string singular;
  std::string where;  ///< the experiment and the solve, for messages

  template <class T>
  void operator()(std::span<const T> u, std::span<const T> p, std::span<T> r) const {
    f->rhs(t, u, p, r);
    for (std::size_t j = 0; j < pivots.size(); ++j) {
      T s = T(-conserved[j]);
      for (std::size_t i = 0; i < u.size(); ++i)
        if (L(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) != 0.0)
          s = T(s + L(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) * u[i]);
      r[pivots[j]] = s;
    }
  }
};

/// ∂f/∂[x, p] at (t, x, p).
Eigen::MatrixXd rhs_jacobian(const ode::EquationModel& f, double t, const std::vector<double>& x,
                             const std::vector<double>& p) {
  std::vector<double> z = x;
  z.insert(z.end(), p.begin(), p.end());
  const std::size_t n = x.size();
  return ad::jacobian_forward(
      [&](const auto& zz) {
        using T = std::decay_t<decltype(zz[0])>;
        std::vector<T> out(n);
        f.rhs(t, std::span<const T>(zz.data(), n), std::span<const T>(zz.data() + n, zz.size() - n),
              std::span<T>(out));
        return out;
      },
      z);
}

/// What steady_state needs beyond the model: the ‖H‖ tolerance of Newton
/// (relative to 1 + ‖x‖), the integrator of the fallback, and the name of
/// the solve in messages ("the pre-equilibration", "the steady state of the
/// measurements at time inf").
struct SteadyStateSettings {
  double tol = 1e-12;
  ode::IntegratorOptions integrator{};
  std::string purpose;
};

/// Ends of the fallback's integration windows: 10^k, k = 0, 1, …, 12 (in
/// model time after the start); after each, Newton is tried from the state
/// reached once ‖f‖∞ ≤ kSettled (1 + ‖x‖∞).
constexpr int kFallbackWindows = 13;
constexpr double kSettled = 1e-8;  // near enough for Newton's quadratic phase on the models tried

/// Conservation laws that hold only near the steady state: left null
/// vectors l of ∂f/∂x at x (lᵀ ∂f/∂x = 0 there) outside span(L), which make
/// ∂H/∂x singular — Raimundez_PCB2020's pre-equilibration, where the
/// complexes of an absent inhibitor neither form nor decay, so each
/// (EGFR:MMET:Inhibitor, …) column of ∂f/∂x vanishes. Near x the
/// dynamics keep lᵀx to first order; each law is added to L (with its
/// pivot) and fixed at lᵀx0 when the state reached keeps it,
/// |lᵀ(x − x0)| ≤ kKept (1 + ‖x‖∞) — as a species that never leaves 0
/// does. A law the state reached does not keep (x' = −x³ from x0 = 1
/// reaches 0) leaves the derivative undefined: recorded in ss.singular.
void local_conservation_laws(SteadyState& ss, const std::vector<double>& x0, const std::vector<double>& p,
                             const std::string& what) {
  const auto n = static_cast<Eigen::Index>(ss.x.size());
  if (n == 0) return;
  const Eigen::MatrixXd Jx = rhs_jacobian(*ss.f, ss.t, ss.x, p).leftCols(n);
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(Jx, Eigen::ComputeFullU);
  const Eigen::VectorXd sv = svd.singularValues();
  constexpr double kNullTol = 1e-10;  // relative singular value below which a direction is conserved
  const double floor = kNullTol * std::max(sv(0), 1e-300);
  Eigen::Index rank = 0;
  for (Eigen::Index i = 0; i < sv.size(); ++i)
    if (sv(i) > floor) ++rank;
  if (n - rank <= ss.L.cols()) return;  // the structural laws explain every null direction
  // The left null space of ∂f/∂x at x, less span(L): its projection off L.
  Eigen::MatrixXd N = svd.matrixU().rightCols(n - rank);
  if (ss.L.cols() > 0) N -= ss.L * (ss.L.transpose() * N);
  Eigen::JacobiSVD<Eigen::MatrixXd> extra(N, Eigen::ComputeThinU);
  Eigen::Index k = 0;
  for (Eigen::Index i = 0; i < extra.singularValues().size(); ++i)
    if (extra.singularValues()(i) > 1e-6) ++k;
  if (k == 0) return;
  const Eigen::MatrixXd added = extra.matrixU().leftCols(k);
  double xnorm = 0.0;
  for (double v : ss.x) xnorm = std::max(xnorm, std::abs(v));
  constexpr double kKept = 1e-8;  // |lᵀ(x − x0)| relative to 1 + ‖x‖∞: the law held on the way
  const Eigen::VectorXd dx = Eigen::Map<const Eigen::VectorXd>(ss.x.data(), n) -
                             Eigen::Map<const Eigen::VectorXd>(x0.data(), n);
  for (Eigen::Index j = 0; j < k; ++j) {
    const double moved = added.col(j).dot(dx);
    if (!(std::abs(moved) <= kKept * (1.0 + xnorm))) {
      std::ostringstream msg;
      msg << what << ": ∂f/∂x is singular at the steady state (a direction l with lᵀ∂f/∂x = 0 there, "
          << "which the way from the start changed by lᵀ(x − x0) = " << moved
          << "): its implicit derivative is not defined, so neither is the gradient";
      ss.singular = msg.str();
      return;
    }
  }
  Eigen::MatrixXd L(n, ss.L.cols() + k);
  L << ss.L, added;
  ss.L = L;
  ss.pivots.clear();
  ss.conserved.clear();
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(ss.L.transpose());
  for (Eigen::Index j = 0; j < ss.L.cols(); ++j) {
    ss.pivots.push_back(static_cast<std::size_t>(qr.colsPermutation().indices()(j)));
    ss.conserved.push_back(ss.L.col(j).dot(Eigen::Map<const Eigen::VectorXd>(x0.data(), n)));
  }
}

/// The steady state from x0 at parameters p: Newton on H = 0 from x0; when
/// that fails (a singular Jacobian at x0, or no decrease), integrating
/// ẋ = f(x, p) — the right-hand side read at the fixed time ss.t — over
/// windows ending at t + 10^k and trying Newton again from each state that
/// has nearly settled (as AMICI falls back to simulation). Integration keeps
/// the conserved moieties, so the result is the same steady state of the
/// same conservation class. Throws costate::Error naming `what`, the solve
/// and both attempts when neither finds it.
SteadyState steady_state(const std::shared_ptr<const ode::EquationModel>& equations,
                         const std::vector<double>& x0, const std::vector<double>& p, double t,
                         const SteadyStateSettings& settings, const std::string& what) {
  const ode::EquationModel& f = *equations;
  const std::size_t n = x0.size();
  SteadyState ss;
  ss.f = &f;
  ss.t = t;
  ss.where = what + ": " + settings.purpose;
  // Conservation laws: left null vectors of ∂f/∂x at two states near x0
  // (a structural law holds at every state; two points rule out a null
  // vector that happens at one of them).
  Eigen::MatrixXd stacked(static_cast<Eigen::Index>(2 * n), static_cast<Eigen::Index>(n));
  for (int pt = 0; pt < 2; ++pt) {
    std::vector<double> x = x0;
    for (std::size_t i = 0; i < n; ++i)
      x[i] = (std::abs(x0[i]) + 0.1) * (pt == 0 ? 1.0 + 0.37 * std::sin(1.0 + static_cast<double>(i))
                                                 : 0.8 + 0.29 * std::cos(2.0 + 3.0 * static_cast<double>(i)));
    const Eigen::MatrixXd J = rhs_jacobian(f, t, x, p).leftCols(static_cast<Eigen::Index>(n));
    stacked.middleRows(static_cast<Eigen::Index>(pt * n), static_cast<Eigen::Index>(n)) = J.transpose();
  }
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(stacked, Eigen::ComputeFullV);
  const Eigen::VectorXd sv = svd.singularValues();
  const double smax = sv.size() > 0 ? sv(0) : 0.0;
  constexpr double kNullTol = 1e-10;  // relative singular value below which a direction is conserved
  std::size_t rank = 0;
  for (Eigen::Index i = 0; i < sv.size(); ++i)
    if (sv(i) > kNullTol * std::max(smax, 1e-300)) ++rank;
  const std::size_t k = n - rank;
  ss.L = svd.matrixV().rightCols(static_cast<Eigen::Index>(k));
  if (k > 0) {
    // Pivots: rows of L (states) by column-pivoted QR of Lᵀ.
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(ss.L.transpose());
    for (std::size_t j = 0; j < k; ++j)
      ss.pivots.push_back(static_cast<std::size_t>(qr.colsPermutation().indices()(static_cast<Eigen::Index>(j))));
  }
  for (std::size_t j = 0; j < k; ++j) {
    double c = 0.0;
    for (std::size_t i = 0; i < n; ++i) c += ss.L(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) * x0[i];
    ss.conserved.push_back(c);
  }
  nonlinear::Options opt;
  opt.atol = settings.tol;
  opt.rtol = 0.0;
  opt.max_iterations = 200;
  // Newton from `start`: the root, or the summary of the failure.
  auto newton = [&](const std::vector<double>& start, std::string& report) {
    const nonlinear::Solution<double> sol = nonlinear::solve(ss, start, p, opt);
    // Newton may stall at round-off above `tol` (line search without
    // decrease): accepted when ‖H‖ is within kStall of the scale of x.
    constexpr double kStall = 1e-8;
    double xnorm = 0.0;
    for (double v : sol.x) xnorm = std::max(xnorm, std::abs(v));
    const bool stalled_at_roundoff =
        sol.summary.termination == nonlinear::Termination::LineSearchFailed &&
        sol.summary.final_residual_norm <= kStall * (1.0 + xnorm);
    report = sol.summary.brief_report();
    bool finite = true;
    for (double v : sol.x) finite = finite && std::isfinite(v);
    return (sol.summary.converged() || stalled_at_roundoff) && finite ? sol.x : std::vector<double>{};
  };
  std::string first_report, report;
  ss.x = newton(x0, first_report);
  if (!ss.x.empty()) {
    ss.how = "Newton";
    local_conservation_laws(ss, x0, p, what);
    if (ss.singular.empty()) return ss;
    // Newton's root is one of a continuum of steady states (∂f/∂x singular
    // there along a direction the way from x0 changes): which one the
    // dynamics reach depends on the way, so integrate.
    first_report = "a root on a continuum of steady states, not necessarily the one the dynamics reach";
    ss.singular.clear();
    ss.x.clear();
  }
  // Fallback: integrate towards the steady state, the right-hand side read
  // at ss.t throughout (ReducedModel clamps every time to [t, t]).
  ReducedModel model{equations, p, {}};
  model.t_lo = model.t_hi = t;
  std::vector<double> y = x0, r(n);
  double t_now = 0.0, residual = 0.0;
  std::string fallback = "no state settled";
  for (int w = 0; w < kFallbackWindows; ++w) {
    const double t_end = std::pow(10.0, w);
    ode::Solution sol = ode::integrate(ode::Problem<ReducedModel>{model, y, {}, {t_now, t_end}, {}},
                                       settings.integrator);
    if (!sol.summary.success()) {
      fallback = "the integration failed at t = " + std::to_string(sol.summary.final_time) + ": " +
                 sol.summary.message;
      break;
    }
    const auto last = sol.state(sol.t.size() - 1);
    y.assign(last.begin(), last.end());
    t_now = t_end;
    f.rhs(t, std::span<const double>(y), std::span<const double>(p), std::span<double>(r));
    double ynorm = 0.0;
    residual = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      ynorm = std::max(ynorm, std::abs(y[i]));
      residual = std::max(residual, std::abs(r[i]));
    }
    if (!(residual <= kSettled * (1.0 + ynorm))) continue;
    ss.x = newton(y, report);
    if (!ss.x.empty()) {
      std::ostringstream how;
      how << "integration to t = " << t_end << " (Newton from the start: " << first_report << "), then Newton";
      ss.how = how.str();
      local_conservation_laws(ss, x0, p, what);
      return ss;
    }
    fallback = "Newton after integrating to t = " + std::to_string(t_end) + ": " + report;
  }
  std::ostringstream msg;
  msg << what << ": " << settings.purpose << ": the steady state was not found (Newton from the start: "
      << first_report << "; the fallback, integrating to t = 1e12 with Newton from each settled state: "
      << fallback << "; last ‖f‖∞ = " << residual << ")";
  throw Error(msg.str());
}

/// The square Jacobians of H at the steady state: ∂H/∂x (pivot rows: Lᵀ)
/// and ∂H/∂p (pivot rows: 0).
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> steady_state_jacobians(const SteadyState& ss,
                                                                   const std::vector<double>& p) {
  const auto n = static_cast<Eigen::Index>(ss.x.size());
  const Eigen::MatrixXd J = rhs_jacobian(*ss.f, ss.t, ss.x, p);
  Eigen::MatrixXd Hx = J.leftCols(n);
  Eigen::MatrixXd Hp = J.rightCols(J.cols() - n);
  for (std::size_t j = 0; j < ss.pivots.size(); ++j) {
    const auto r = static_cast<Eigen::Index>(ss.pivots[j]);
    Hx.row(r) = ss.L.col(static_cast<Eigen::Index>(j)).transpose();
    Hp.row(r).setZero();
  }
  return {Hx, Hp};
}

/// Implicit adjoint of the steady state: (∂H/∂x)ᵀ ν = x̄, then
/// p̄ −= (∂H/∂p)ᵀ ν and x̄0 += L ν_pivots.
void steady_state_adjoint(const SteadyState& ss, const std::vector<double>& p,
                          const std::vector<double>& x_bar, std::vector<double>& p_bar,
                          std::vector<double>& x0_bar) {
  if (!ss.singular.empty()) throw Error(ss.singular);
  const auto n = static_cast<Eigen::Index>(ss.x.size());
  const auto [Hx, Hp] = steady_state_jacobians(ss, p);
  const Eigen::VectorXd xb = Eigen::Map<const Eigen::VectorXd>(x_bar.data(), n);
  const Eigen::PartialPivLU<Eigen::MatrixXd> lu(Hx.transpose());
  const Eigen::VectorXd nu = lu.solve(xb);
  COSTATE_CHECK(nu.allFinite(), ss.where << ": ∂H/∂x is singular at the steady state (found by "
                                          << ss.how << "); its implicit derivative is not defined");
  const Eigen::VectorXd pb = -Hp.transpose() * nu;
  for (Eigen::Index j = 0; j < pb.size(); ++j) p_bar[static_cast<std::size_t>(j)] += pb(j);
  for (std::size_t j = 0; j < ss.pivots.size(); ++j)
    for (Eigen::Index i = 0; i < n; ++i)
      x0_bar[static_cast<std::size_t>(i)] +=
          ss.L(i, static_cast<Eigen::Index>(j)) * nu(static_cast<Eigen::Index>(ss.pivots[j]));
}

/// Its tangent form: dx = (∂H/∂x)⁻¹ (−(∂H/∂p) dp + r), r_pivot_j = l_jᵀ dx0
/// (0 elsewhere), for ns directions at once (dp: np × ns, dx0: n × ns,
/// column-major; returns n × ns, column-major).
std::vector<double> steady_state_tangent(const SteadyState& ss, const std::vector<double>& p,
                                         const std::vector<double>& dp, const std::vector<double>& dx0,
                                         std::size_t ns) {
  const auto n = static_cast<Eigen::Index>(ss.x.size()), np = static_cast<Eigen::Index>(p.size());
  const auto m = static_cast<Eigen::Index>(ns);
  const auto [Hx, Hp] = steady_state_jacobians(ss, p);
  Eigen::MatrixXd rhs = -Hp * Eigen::Map<const Eigen::MatrixXd>(dp.data(), np, m);
  const Eigen::Map<const Eigen::MatrixXd> X0(dx0.data(), n, m);
  for (std::size_t j = 0; j < ss.pivots.size(); ++j)
    rhs.row(static_cast<Eigen::Index>(ss.pivots[j])) = ss.L.col(static_cast<Eigen::Index>(j)).transpose() * X0;
  if (!ss.singular.empty()) throw Error(ss.singular);
  const Eigen::MatrixXd dx = Eigen::PartialPivLU<Eigen::MatrixXd>(Hx).solve(rhs);
  COSTATE_CHECK(dx.allFinite(), ss.where << ": ∂H/∂x is singular at the steady state (found by "
                                          << ss.how << "); its implicit derivative is not defined");
  return std::vector<double>(dx.data(), dx.data() + dx.size());
}

/// Collective: when any rank's `failure` is non-empty, every rank throws
/// the message of the lowest such rank.
void detail_raise_on_any_rank(MPI_Comm comm, int rank, const std::string& failure) {
  int first = failure.empty() ? std::numeric_limits<int>::max() : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == std::numeric_limits<int>::max()) return;
  int length = static_cast<int>(failure.size());
  MPI_Bcast(&length, 1, MPI_INT, first, comm);
  std::string message = failure;
  message.resize(static_cast<std::size_t>(length));
  MPI_Bcast(message.data(), length, MPI_CHAR, first, comm);
  throw Error(message + (rank == first ? "" : " (on rank " + std::to_string(first) + ")"));
}

}  // namespace

Result evaluate(const Problem& pb, const std::vector<double>& theta, const Options& options,
                MPI_Comm comm) {
  int mpi_up = 0, rank = 0, size = 1;
  MPI_Initialized(&mpi_up);
  if (mpi_up) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MPI_Comm_rank(comm, &rank);
      MPI_Comm_size(comm, &size);
    }
  }
  const std::size_t ntab = pb.parameters.size(), np = pb.model.parameter_names.size();
  const std::size_t ny = pb.model.state_names.size();
  COSTATE_CHECK(!options.fim || ode::is_cvodes(options.integrator.method),
                pb.file << ": the Fisher information takes CVODES' forward sensitivities: "
                           "Options::integrator.method must be cvodes_bdf or cvodes_adams (got "
                        << ode::to_string(options.integrator.method) << ")");
  COSTATE_CHECK(!(options.gradient && options.seed_initial_sensitivities &&
                  std::holds_alternative<ode::CvodesForward>(options.method)) ||
                    ode::is_cvodes(options.integrator.method),
                pb.file << ": the gradient by CVODES forward sensitivities (cvodes_forward) needs "
                           "Options::integrator.method cvodes_bdf or cvodes_adams (got "
                        << ode::to_string(options.integrator.method) << ")");
  COSTATE_CHECK(theta.size() == pb.estimated.size(),
                pb.file << ": " << pb.estimated.size() << " estimated parameters, got "
                        << theta.size() << " values");
  // Table values on the linear scale, and d lin / d theta.
  std::vector<double> lin(ntab);
  for (std::size_t k = 0; k < ntab; ++k) lin[k] = pb.parameters[k].nominal;
  for (std::size_t e = 0; e < pb.estimated.size(); ++e)
    lin[pb.estimated[e]] = from_scale(theta[e], pb.parameters[pb.estimated[e]].scale);

  Result result;
  result.simulations.assign(pb.measurements.size(), std::numeric_limits<double>::quiet_NaN());
  result.sigmas = result.simulations;
  std::vector<double> lin_bar(ntab, 0.0);
  // The model's equations, not copied (aliasing a Problem that outlives this call).
  const std::shared_ptr<const ode::EquationModel> equations(std::shared_ptr<const void>(),
                                                            &pb.model.equations);
  const InitialValues iv(pb.model);
  const Switches switches(pb.model);
  // The gradient's method: Options::method on Options::integrator, or — for
  // a model with events that they do not cross (the support table,
  // ode::supports_events) — the discrete adjoint on costate's bdf at the
  // same tolerances (Result::gradient_method says which).
  ode::SensitivityMethod gradient_method = options.method;
  ode::IntegratorOptions gradient_integrator = options.integrator;
  if (options.gradient) {
    result.gradient_method =
        ode::to_string(options.method) + " on " + ode::to_string(options.integrator.method);
    // Every measurement at time inf: no time course is integrated, the
    // gradient is the steady-state solve's implicit adjoint alone (the
    // label said "cvodes_adjoint on cvodes_bdf" for Blasi's problem).
    const bool steady_only = !pb.measurements.empty() &&
                             std::all_of(pb.measurements.begin(), pb.measurements.end(),
                                         [](const Measurement& m) { return std::isinf(m.time); });
    if (steady_only)
      result.gradient_method =
          "implicit steady-state adjoint (every measurement is at time inf: no time course)";
    else if (pb.model.equations.n_events() > 0 &&
        !ode::supports_events(ode::kind_of(options.method), options.integrator.method, 1)) {
      gradient_method = ode::DiscreteAdjoint{};
      gradient_integrator.method = ode::Method::Bdf;
      result.gradient_method = "discrete_adjoint on bdf (the model has events, which " +
                               result.gradient_method + " does not cross)";
    }
  }
  std::vector<char> estimated(ntab, 0);
  for (std::size_t e : pb.estimated) estimated[e] = 1;
  // One experiment: its −log p into nll, its d(−log p)/d(table values)
  // into lin_bar (zeroed by the caller), h and σ into `result`.
  std::size_t directions = 0;  // forward-sensitivity directions of this rank's experiments
  auto run = [&](const Experiment& ex, double& nll, std::span<double> lin_bar, std::span<double> fim_lin) {
    const Condition& cond = pb.conditions[ex.condition];
    std::string what = pb.file + ": experiment " + cond.id;
    if (ex.preequilibration >= 0)
      what += " (pre-equilibrated in " +
              pb.conditions[static_cast<std::size_t>(ex.preequilibration)].id + ")";
    // Steady states and events: refused by name, before any solve. A
    // steady state (pre-equilibration, measurements at time inf) is a
    // Newton solve, or an integration without the event driver when Newton
    // fails: no trigger fires in either, and an event on the way would also
    // change the conserved moieties the solve keeps — what SBML would
    // answer (the state after every event the approach crosses) is not what
    // the solve computes, so it is not answered.
    if (pb.model.equations.n_events() > 0 && (ex.preequilibration >= 0 || std::isinf(ex.times.back()))) {
      const std::string events = "the model has events ('" + pb.model.equations.event_attributes(0).name +
                                 "'" + (pb.model.equations.n_events() > 1 ? ", …" : "") + ")";
      const std::string solve = ex.preequilibration >= 0 ? "pre-equilibration" : "measurements at time inf";
      throw Error(what + ": " + events + ", and " + solve +
                  " (a steady-state solve, in which no event trigger fires and which keeps the "
                  "conserved moieties an event would change) with events is not supported; give the "
                  "steady state as initial values in the condition table, or measure at a finite time "
                  "(the simulation then crosses the events)");
    }
    const std::vector<Ref> src = model_parameter_sources(pb, cond);
    std::vector<double> p(np);
    for (std::size_t j = 0; j < np; ++j) p[j] = value_of(src[j], lin);

    // Initial state: SBML values + condition, or the pre-equilibrated state.
    std::vector<double> y0;
    std::vector<Ref> pre_src;
    std::vector<double> pre_p;
    SteadyState ss;
    if (ex.preequilibration >= 0) {
      const Condition& pre = pb.conditions[static_cast<std::size_t>(ex.preequilibration)];
      pre_src = model_parameter_sources(pb, pre);
      pre_p.resize(np);
      for (std::size_t j = 0; j < np; ++j) pre_p[j] = value_of(pre_src[j], lin);
      const std::vector<double> x0 = start_state(pb, iv, pre, pre_p, lin);
      ss = steady_state(equations, x0, pre_p, 0.0,
                        {options.steady_state_tol, options.integrator, "the pre-equilibration"}, what);
      y0 = ss.x;
      for (std::size_t i = 0; i < ny; ++i)
        if (overrides(cond.states[i])) y0[i] = value_of(cond.states[i], lin);
    } else {
      y0 = start_state(pb, iv, cond, p, lin);
    }
    // The chain rule back through the initial state: adds (dy0/dlin)ᵀ y0_bar
    // to lin_bar (the gradient's last step; the FIM's dy0/dlin, row by row).
    auto initial_adjoint = [&](const std::vector<double>& y0_bar, std::span<double> lin_bar) {
      std::vector<double> x_bar = y0_bar;
      if (ex.preequilibration >= 0) {
        const Condition& pre = pb.conditions[static_cast<std::size_t>(ex.preequilibration)];
        for (std::size_t i = 0; i < ny; ++i)
          if (overrides(cond.states[i])) {
            if (cond.states[i].is_parameter())
              lin_bar[static_cast<std::size_t>(cond.states[i].parameter)] += x_bar[i];
            x_bar[i] = 0.0;
          }
        std::vector<double> pre_p_bar(np, 0.0), x0_bar(ny, 0.0);
        steady_state_adjoint(ss, pre_p, x_bar, pre_p_bar, x0_bar);
        start_state_adjoint(iv, pre, pre_p, x0_bar, pre_p_bar, lin_bar);
        for (std::size_t j = 0; j < np; ++j)
          if (pre_src[j].is_parameter()) lin_bar[static_cast<std::size_t>(pre_src[j].parameter)] += pre_p_bar[j];
      } else {
        std::vector<double> p_bar(np, 0.0);
        start_state_adjoint(iv, cond, p, x_bar, p_bar, lin_bar);
        for (std::size_t j = 0; j < np; ++j)
          if (src[j].is_parameter()) lin_bar[static_cast<std::size_t>(src[j].parameter)] += p_bar[j];
      }
    };

    // The ODE's parameters q: the estimated table entries the model's
    // parameters read in this condition (reduced), or — the unreduced form
    // of earlier versions, for comparison — every model parameter and then
    // every table value (the latter read by no right-hand side).
    ReducedModel model{equations, p, {}};
    std::vector<double> q;
    std::vector<long> q_row;  // table row of each q (−1: q is a model parameter, unreduced)
    if (options.reduce_parameters) {
      std::vector<long> index_of_row(ntab, -1);
      for (std::size_t j = 0; j < np; ++j) {
        if (!(options.gradient || options.fim) || !src[j].is_parameter()) continue;
        const auto row = static_cast<std::size_t>(src[j].parameter);
        if (!estimated[row]) continue;
        if (index_of_row[row] < 0) {
          index_of_row[row] = static_cast<long>(q.size());
          q.push_back(lin[row]);
          q_row.push_back(static_cast<long>(row));
        }
        model.from_q.emplace_back(j, static_cast<std::size_t>(index_of_row[row]));
      }
    } else {
      for (std::size_t j = 0; j < np; ++j) {
        model.from_q.emplace_back(j, j);
        q.push_back(p[j]);
        q_row.push_back(-1);
      }
      for (std::size_t k = 0; k < ntab; ++k) {
        q.push_back(lin[k]);
        q_row.push_back(static_cast<long>(k));
      }
    }
    std::vector<double> pext = p;
    pext.insert(pext.end(), lin.begin(), lin.end());
    // Measurements at time inf (the last of ex.times): the steady state of
    // the simulation condition, f(x, p) = 0 from the condition's start y0
    // (its conserved moieties; the time course keeps them), found and
    // differentiated as the pre-equilibration is. The time course covers
    // the finite times [0, n_finite) alone.
    const bool at_steady_state = std::isinf(ex.times.back());
    const std::size_t n_finite = ex.times.size() - (at_steady_state ? 1 : 0);
    const bool time_course = n_finite > 0;
    const double t1 = std::max(time_course ? ex.times[n_finite - 1] : 0.0, 1e-6);
    Likelihood like{&pb, &ex, options.data_jacobian, &result};
    // Segments between the switch times of the piecewise inputs: each is
    // integrated on its own, so no step crosses a jump of the right-hand
    // side; observations at a switch time belong to the segment ending there.
    std::vector<double> cuts{0.0};
    for (double ts : switches.times(p, t1)) cuts.push_back(ts);
    // A switch time that moves with an estimated parameter (Beer's
    // t − tau < 0) adds a jump term to the derivatives: moving t_s by dt_s
    // runs [t_s, t_s + dt_s] on f⁻ instead of f⁺, so
    //     dJ/dθ += λ(t_s)ᵀ (f⁻ − f⁺)(t_s, y(t_s)) · dt_s/dθ,
    // λ(t_s) = dJ/dy(t_s) (the later segments' wrt_initial_state). The
    // segmented adjoint below adds it; the forward sensitivities (the FIM,
    // seeded cvodes_forward) carry its tangent form, S(t_s⁺) = S(t_s⁻) +
    // (f⁻ − f⁺) dt_s/dθ, between their segments (without it dllh/dtau came
    // out 0 where central differences give up to 1e3).
    std::vector<std::size_t> moving;  // model parameters (estimated) that move a switch
    if (options.gradient || options.fim)
      for (std::size_t j = 0; j < np; ++j) {
        if (!src[j].is_parameter() || !estimated[static_cast<std::size_t>(src[j].parameter)]) continue;
        std::vector<double> moved = p;
        moved[j] += 1e-6 * std::max(1.0, std::abs(p[j]));  // any change: the switch times read p_j or not
        if (switches.times(moved, t1) != switches.times(p, t1)) moving.push_back(j);
      }
    const bool forward_sensitivities =
        options.fim || (options.gradient && options.seed_initial_sensitivities &&
                        std::holds_alternative<ode::CvodesForward>(options.method));
    cuts.push_back(t1);
    const std::size_t n_seg = cuts.size() - 1;
    // A model with events (SBML <event>): one integration from t = 0, the
    // event driver (ode::integrate; CVODES' root finding for the CVODES
    // methods) locating and firing them. What does not cross events yet is
    // refused by name: the steady-state solves (above), the segments
    // between time switches (each would restart the events' history), and
    // a derivative path the support table refuses (forward sensitivities:
    // the Fisher information, seeded cvodes_forward).
    if (pb.model.equations.n_events() > 0) {
      const std::string events = "the model has events ('" +
                                 pb.model.equations.event_attributes(0).name + "'" +
                                 (pb.model.equations.n_events() > 1 ? ", …" : "") + ")";
      if (n_seg > 1) {
        std::ostringstream at;
        at << cuts[1];
        throw Error(what + ": " + events + " and piecewise inputs switched in time (at t = " +
                    at.str() + "): integrating between switch times would restart the events "
                    "at each; not supported");
      }
      if (forward_sensitivities)
        ode::require(ode::supports_events(ode::SensitivityKind::CvodesForward,
                                          options.integrator.method, 1),
                     what + " (the Fisher information or the seeded cvodes_forward gradient)");
    }
    std::vector<std::size_t> first(n_seg + 1, 0);  // observations [first[s], first[s + 1]) in segment s
    for (std::size_t sg = 1; sg <= n_seg; ++sg) {
      first[sg] = first[sg - 1];
      while (first[sg] < n_finite && (sg == n_seg || ex.times[first[sg]] <= cuts[sg])) ++first[sg];
    }
    // The steady state of the measurements at time inf, the right-hand side
    // read at the end of the time course (after every switch located in it);
    // checked at a far later time, so that a right-hand side still changing
    // with time is refused rather than answered wrongly.
    SteadyState post;
    if (at_steady_state) {
      const double t_ss = time_course ? ex.times[n_finite - 1] : 0.0;
      post = steady_state(equations, y0, p, t_ss,
                          {options.steady_state_tol, options.integrator,
                           "the steady state of the measurements at time inf"},
                          what);
      const double t_far = 1e6 * std::max(1.0, t_ss);
      std::vector<double> r(ny);
      pb.model.equations.rhs(t_far, std::span<const double>(post.x), std::span<const double>(p),
                             std::span<double>(r));
      double rnorm = 0.0, xnorm = 0.0;
      for (std::size_t i = 0; i < ny; ++i) {
        rnorm = std::max(rnorm, std::abs(r[i]));
        xnorm = std::max(xnorm, std::abs(post.x[i]));
      }
      constexpr double kStillSteady = 1e-8;  // ‖f‖∞ at t_far, relative to 1 + ‖x‖∞
      if (!(rnorm <= kStillSteady * (1.0 + xnorm))) {
        std::ostringstream msg;
        msg << what << ": measurements at time inf: the right-hand side still changes with time after t = "
            << t_ss << " (at the steady state found there, ‖f‖∞ = " << rnorm << " at t = " << t_far
            << "): a piecewise input switching after the last finite measurement time, or a "
               "right-hand side that reads time; a steady state is not defined";
        throw Error(msg.str());
      }
    }
    // −log p of the measurements at time inf, at the steady state x and pext.
    auto steady_likelihood = [&](const Likelihood& l, const auto& xx) {
      using T = std::decay_t<decltype(xx[0])>;
      const std::vector<T> ext(pext.begin(), pext.end());
      return std::vector<T>{l.at<T>(n_finite, std::span<const T>(xx.data(), ny), std::span<const T>(ext))};
    };
    auto segment = [&](std::size_t sg, const std::vector<double>& y_start, bool with_end) {
      ReducedModel m = model;
      // The right-hand side on the segment's own side of each switch: a
      // time at a switch is read just inside the segment.
      if (sg > 0) m.t_lo = cuts[sg] + kSwitchMargin * std::max(1.0, std::abs(cuts[sg]));
      if (sg + 1 < n_seg) m.t_hi = cuts[sg + 1] - kSwitchMargin * std::max(1.0, std::abs(cuts[sg + 1]));
      std::vector<double> out(ex.times.begin() + static_cast<std::ptrdiff_t>(first[sg]),
                              ex.times.begin() + static_cast<std::ptrdiff_t>(first[sg + 1]));
      if (with_end && (out.empty() || out.back() < cuts[sg + 1])) out.push_back(cuts[sg + 1]);
      return ode::Problem<ReducedModel>{m, y_start, q, {cuts[sg], cuts[sg + 1]}, out};
    };
    // The state at the end of a segment (and the observations on the way).
    auto simulate = [&](std::size_t sg, const std::vector<double>& y_start, bool observe) {
      const ode::Problem<ReducedModel> problem = segment(sg, y_start, true);
      ode::Solution sol = ode::integrate(problem, options.integrator);
      if (!sol.summary.success())
        throw Error(what + ": the simulation failed: " + sol.summary.message);
      result.rhs_evaluations += static_cast<std::size_t>(sol.summary.rhs_evaluations);
      result.steps += static_cast<std::size_t>(sol.summary.steps);
      if (observe)
        for (std::size_t k = first[sg]; k < first[sg + 1]; ++k) {
          const auto j = static_cast<std::size_t>(
              std::find(sol.t.begin(), sol.t.end(), ex.times[k]) - sol.t.begin());
          COSTATE_CHECK(j < sol.t.size(), what << ": no output at t = " << ex.times[k]);
          nll += like.at<double>(k, sol.state(j), std::span<const double>(pext));
        }
      const auto last = sol.state(sol.t.size() - 1);
      return std::vector<double>(last.begin(), last.end());
    };

    // Forward sensitivities — the Fisher information, and the gradient by
    // CvodesForward (Options::seed_initial_sensitivities): one CVODES pass
    // over the segments with one direction per estimated table entry the
    // experiment depends on (AMICI's sensitivities with respect to its
    // parameters, seeded with sx0 = dy0/dθ): each q_i (the estimated
    // entries its model parameters read) with S0 = dy0/dlin of its entry,
    // then each other estimated entry that y0 depends on (initial values,
    // condition overrides, the pre-equilibration) with S0 = dy0/dlin alone.
    // Not np + n directions with the chain rule through dy/dy0 after the
    // solve. The states and dy/d(direction) at every observation time feed
    // the FIM terms and Σ_k (∂ℓ_k/∂y) dy_k/d(direction).
    const bool forward_gradient = options.gradient && options.seed_initial_sensitivities &&
                                  std::holds_alternative<ode::CvodesForward>(options.method);
    if ((options.fim || forward_gradient) && ny > 0) {
      const std::size_t ne = pb.estimated.size(), nq = q.size();
      std::vector<long> column(ntab, -1);  // the estimated index of each table row
      for (std::size_t e = 0; e < ne; ++e) column[pb.estimated[e]] = static_cast<long>(e);
      // D = dy0/dlin_est (ny × ne, column-major), row i by the initial-state adjoint of e_i.
      std::vector<double> D(ny * ne, 0.0);
      for (std::size_t i = 0; i < ny; ++i) {
        std::vector<double> seed(ny, 0.0), bar(ntab, 0.0);
        seed[i] = 1.0;
        initial_adjoint(seed, bar);
        for (std::size_t e = 0; e < ne; ++e) D[e * ny + i] = bar[pb.estimated[e]];
      }
      // The directions: q (CVODES' parameter directions, in order), then the
      // entries only y0 reads; dir_col = the estimated index each adds to
      // (−1: none — an unreduced q that is not estimated).
      std::vector<long> dir_col;
      std::vector<char> seeded(ne, 0);
      std::vector<double> S0;  // ny × ns, column-major
      auto add_direction = [&](long col) {
        dir_col.push_back(col);
        S0.resize(S0.size() + ny, 0.0);
        if (col >= 0 && !seeded[static_cast<std::size_t>(col)]) {
          seeded[static_cast<std::size_t>(col)] = 1;
          std::copy_n(&D[static_cast<std::size_t>(col) * ny], ny, S0.end() - static_cast<std::ptrdiff_t>(ny));
        }
      };
      for (std::size_t i = 0; i < nq; ++i) {
        const long row = q_row[i] >= 0 ? q_row[i] : (src[i].is_parameter() ? src[i].parameter : -1);
        add_direction(row >= 0 ? column[static_cast<std::size_t>(row)] : -1);
      }
      for (std::size_t e = 0; e < ne; ++e)
        if (!seeded[e] && std::any_of(&D[e * ny], &D[e * ny] + ny, [](double v) { return v != 0.0; }))
          add_direction(static_cast<long>(e));
      if (dir_col.empty()) add_direction(-1);  // CVODES needs one: nothing here depends on θ
      const std::size_t ns = dir_col.size();
      directions += ns;
      // Error control on dy/dθ (θ on the parameter's scale), as AMICI's
      // sensitivities are: p̄ = dlin/dθ (cvodes::forward_sensitivities).
      std::vector<double> scales;
      if (options.scale_sensitivity_tolerances) {
        scales.assign(ns, 1.0);
        for (std::size_t d = 0; d < ns; ++d) {
          if (dir_col[d] < 0) continue;
          const std::size_t row = pb.estimated[static_cast<std::size_t>(dir_col[d])];
          if (pb.parameters[row].scale == Scale::Log) scales[d] = lin[row];
          if (pb.parameters[row].scale == Scale::Log10) scales[d] = lin[row] * std::numbers::ln10;
        }
      }
      // The pass: states and S = dy/d(direction) (ny × ns, row-major) at
      // every observation time of the experiment.
      std::vector<std::vector<double>> ys(ex.times.size()), Ss(ex.times.size());
      std::vector<double> y = y0, S(ny * ns);
      for (std::size_t i = 0; i < ny; ++i)
        for (std::size_t d = 0; d < ns; ++d) S[i * ns + d] = S0[d * ny + i];
      for (std::size_t sg = 0; sg < n_seg && time_course; ++sg) {
        if (sg > 0 && !moving.empty()) {
          // The switch at c = cuts[sg] moves: S ← S + (f⁻ − f⁺) dt_s/d(direction),
          // f⁻ on segment sg − 1's side, f⁺ on segment sg's (as the adjoint's
          // jump below). Direction d < nq is q_d, which the model parameters
          // j with from_q (j, d) read.
          const double c = cuts[sg];
          std::vector<double> f_minus(ny), f_plus(ny), dts(ns, 0.0);
          segment(sg - 1, y, false).model.rhs<double>(c, y, q, f_minus);
          segment(sg, y, false).model.rhs<double>(c, y, q, f_plus);
          for (std::size_t j : moving)
            for (const auto& [pj, qi] : model.from_q)
              if (pj == j && qi < ns) dts[qi] += switches.derivative(c, p, j, t1);
          for (std::size_t i = 0; i < ny; ++i)
            for (std::size_t d = 0; d < ns; ++d) S[i * ns + d] += (f_minus[i] - f_plus[i]) * dts[d];
        }
        std::size_t k = first[sg];
        // Observations at t = 0 (CVODES reports only later times): y0 itself.
        for (; k < first[sg + 1] && ex.times[k] <= cuts[sg]; ++k) {
          ys[k] = y;
          Ss[k] = S;
        }
        std::vector<double> times(ex.times.begin() + static_cast<std::ptrdiff_t>(k),
                                  ex.times.begin() + static_cast<std::ptrdiff_t>(first[sg + 1]));
        if (times.empty() || times.back() < cuts[sg + 1]) times.push_back(cuts[sg + 1]);
        const ode::WeightedObservations every_state{times, std::vector<double>(times.size() * ny, 0.0),
                                                    std::vector<double>(times.size() * ny, 1.0), ny};
        const ode::Problem<ReducedModel> problem = segment(sg, y, true);
        const ode::System system = ode::make_system(problem.model, every_state, ny, nq,
                                                    {.dense_max = ode::cvodes::kBindingDenseMax});
        ode::detail::CvodesSeed seed{ns, std::vector<double>(ny * ns), scales};
        for (std::size_t i = 0; i < ny; ++i)
          for (std::size_t d = 0; d < ns; ++d) seed.S0[d * ny + i] = S[i * ns + d];
        ode::detail::CvodesObserved o;
        try {
          o = ode::detail::cvodes_observed_sensitivities(system, y, q, cuts[sg], times,
                                                         options.integrator, &seed);
        } catch (const Error& e) {
          throw Error(what + ": the forward sensitivities: " + e.what());
        }
        result.rhs_evaluations += static_cast<std::size_t>(o.summary.rhs_evaluations);
        result.steps += static_cast<std::size_t>(o.summary.steps);
        for (std::size_t j = 0; j < times.size(); ++j) {
          const std::vector<double> yj(o.states.begin() + static_cast<std::ptrdiff_t>(j * ny),
                                       o.states.begin() + static_cast<std::ptrdiff_t>((j + 1) * ny));
          std::vector<double> Sj(o.tangents.begin() + static_cast<std::ptrdiff_t>(j * ny * ns),
                                 o.tangents.begin() + static_cast<std::ptrdiff_t>((j + 1) * ny * ns));
          if (k < first[sg + 1] && ex.times[k] == times[j]) {
            ys[k] = yj;
            Ss[k++] = Sj;
          }
          if (j + 1 == times.size()) {
            y = yj;
            S = std::move(Sj);
          }
        }
      }
      if (at_steady_state) {
        // The steady state and its tangent: dx = (∂H/∂x)⁻¹(−(∂H/∂p) dp + r(dx0)),
        // dp/d(direction q_i) = 1 for the model parameters that read q_i, dx0 = S0.
        std::vector<double> dp(np * ns, 0.0);
        for (const auto& [j, i] : model.from_q)
          if (i < ns) dp[i * np + j] = 1.0;
        const std::vector<double> dx = steady_state_tangent(post, p, dp, S0, ns);
        ys[n_finite] = post.x;
        Ss[n_finite].resize(ny * ns);
        for (std::size_t i = 0; i < ny; ++i)
          for (std::size_t d = 0; d < ns; ++d) Ss[n_finite][i * ns + d] = dx[d * ny + i];
      }
      for (std::size_t k = 0; k < ex.times.size(); ++k)
        COSTATE_CHECK(ys[k].size() == ny, what << ": no state at t = " << ex.times[k]);

      if (options.fim) {
        // F += Σ_i (1/σ²) (∂μ/∂θ)(∂μ/∂θ)ᵀ + c (1/σ²) (∂σ/∂θ)(∂σ/∂θ)ᵀ on the
        // linear scale: ∂(h, σ)/∂[y, pext] (forward AD) times d[y, pext]/dlin_est.
        const auto nye = static_cast<Eigen::Index>(ny), nee = static_cast<Eigen::Index>(ne);
        const auto next = static_cast<Eigen::Index>(np + ntab);
        Eigen::MatrixXd dz = Eigen::MatrixXd::Zero(nye + next, nee);  // d[y, pext]/dlin_est
        for (std::size_t j = 0; j < np; ++j)
          if (src[j].is_parameter() && column[static_cast<std::size_t>(src[j].parameter)] >= 0)
            dz(nye + static_cast<Eigen::Index>(j), column[static_cast<std::size_t>(src[j].parameter)]) = 1.0;
        for (std::size_t k = 0; k < ntab; ++k)
          if (column[k] >= 0) dz(nye + static_cast<Eigen::Index>(np + k), column[k]) = 1.0;
        Eigen::Map<Eigen::MatrixXd> F(fim_lin.data(), nee, nee);
        const Likelihood like_fim{&pb, &ex, options.data_jacobian, nullptr};
        for (std::size_t k = 0; k < ex.times.size(); ++k) {
          if (ex.at_time[k].empty()) continue;
          std::vector<double> z = ys[k];
          z.insert(z.end(), pext.begin(), pext.end());
          auto outputs = [&](const auto& zz) {
            using T = std::decay_t<decltype(zz[0])>;
            std::vector<T> out;
            like_fim.observe<T>(k, std::span<const T>(zz.data(), ny), std::span<const T>(zz.data() + ny, np + ntab),
                                [&](std::size_t, const T& h, const T& sigma) {
                                  out.push_back(h);
                                  out.push_back(sigma);
                                });
            return out;
          };
          const std::vector<double> hs = outputs(z);
          dz.topRows(nye).setZero();
          for (std::size_t i = 0; i < ny; ++i)
            for (std::size_t d = 0; d < ns; ++d)
              if (dir_col[d] >= 0) dz(static_cast<Eigen::Index>(i), dir_col[d]) += Ss[k][i * ns + d];
          const Eigen::MatrixXd G = ad::jacobian(outputs, z) * dz;  // rows h_0, σ_0, h_1, σ_1, …
          std::size_t r = 0;
          for (std::size_t i : ex.at_time[k]) {
            const Observable& o = pb.observables[pb.measurements[i].observable];
            const double h = hs[2 * r], sigma = hs[2 * r + 1];
            double dmu_dh = 1.0;  // μ = tr(h)
            if (o.transformation == Transformation::Log) dmu_dh = 1.0 / h;
            if (o.transformation == Transformation::Log10) dmu_dh = 1.0 / (h * std::numbers::ln10);
            const Eigen::RowVectorXd dmu = dmu_dh * G.row(static_cast<Eigen::Index>(2 * r));
            const Eigen::RowVectorXd dsigma = G.row(static_cast<Eigen::Index>(2 * r + 1));
            const double c = o.distribution == Distribution::Normal ? 2.0 : 1.0;  // E[(∂σ score)²] σ²
            F.noalias() += (dmu.transpose() * dmu + c * dsigma.transpose() * dsigma) / (sigma * sigma);
            ++r;
          }
        }
      }
      if (forward_gradient || !options.gradient) {
        // −log p at the recorded states (records h, σ), and with the
        // gradient its derivative with respect to pext and to every y(t_k)
        // in one reverse sweep: the direct terms, and (∂ℓ_k/∂y) S_k.
        const std::size_t K = ex.times.size(), nx = np + ntab;
        std::vector<double> x = pext;
        for (std::size_t k = 0; k < K; ++k) x.insert(x.end(), ys[k].begin(), ys[k].end());
        auto total = [&](const auto& xx) {
          using T = std::decay_t<decltype(xx[0])>;
          T sum = T(0.0);
          const std::span<const T> ext(xx.data(), nx);
          for (std::size_t k = 0; k < K; ++k)
            sum = T(sum + like.at<T>(k, std::span<const T>(xx.data() + nx + k * ny, ny), ext));
          return std::vector<T>{sum};
        };
        if (!options.gradient) {
          nll += total(x)[0];
          return;
        }
        const ad::VjpResult r = ad::vjp(total, x, {1.0});
        nll += r.value[0];
        std::vector<double> p_bar(r.cotangent.begin(), r.cotangent.begin() + static_cast<std::ptrdiff_t>(np));
        for (std::size_t k = 0; k < ntab; ++k) lin_bar[k] += r.cotangent[np + k];
        for (std::size_t j = 0; j < np; ++j)
          if (src[j].is_parameter()) lin_bar[static_cast<std::size_t>(src[j].parameter)] += p_bar[j];
        for (std::size_t k = 0; k < K; ++k) {
          const double* gy = r.cotangent.data() + nx + k * ny;
          for (std::size_t d = 0; d < ns; ++d) {
            if (dir_col[d] < 0) continue;
            double s = 0.0;
            for (std::size_t i = 0; i < ny; ++i) s += gy[i] * Ss[k][i * ns + d];
            lin_bar[pb.estimated[static_cast<std::size_t>(dir_col[d])]] += s;
          }
        }
        return;
      }
    }
    if (!options.gradient) {
      std::vector<double> y = y0;
      for (std::size_t sg = 0; sg < n_seg && time_course; ++sg) y = simulate(sg, y, true);
      if (at_steady_state) nll += steady_likelihood(like, post.x)[0];
      return;
    }
    // Gradient: the segments' start states forward, then each segment's
    // gradient backward, λ = the next segment's wrt_initial_state carrying
    // the later segments' dJ/dy(end). With CvodesAdjoint on a model
    // without events each segment's forward pass is integrated once
    // (ode::PendingGradient: its end state starts the next segment, its
    // checkpoints wait for the backward pass, which adds λ at its end);
    // otherwise the start states are simulated first and each segment's
    // ode::gradient has the terminal term λᵀy(end).
    std::vector<std::vector<double>> starts(n_seg);
    starts[0] = y0;
    std::vector<std::vector<double>> states(ex.times.size());
    Likelihood like_quiet{&pb, &ex, options.data_jacobian, nullptr};
    const auto* chain_adjoint = std::get_if<ode::CvodesAdjoint>(&gradient_method);
    const bool chained = chain_adjoint && pb.model.equations.n_events() == 0 && time_course;
    std::vector<std::optional<ode::PendingGradient>> pending(chained ? n_seg : 0);
    const std::vector<double> no_lambda;
    std::vector<double> lambda, y_end, q_bar(q.size(), 0.0);
    std::vector<std::int64_t> released_steps(pending.size(), 0);
    auto begin_segment = [&](std::size_t sg, const ode::CvodesAdjoint& adjoint) {
      // No λᵀy(end) term (finish adds λ), so no y(end) to record.
      const SegmentLikelihood objective{&like_quiet, &pext, &states, first[sg], first[sg + 1], &no_lambda, nullptr};
      return ode::begin_gradient(segment(sg, starts[sg], false), objective, adjoint, gradient_integrator);
    };
    if (chained) {
      const std::int64_t points = chain_adjoint->resolved_steps(ny);
      for (std::size_t sg = 0; sg < n_seg; ++sg) {
        std::optional<ode::PendingGradient> g;
        try {
          g.emplace(begin_segment(sg, *chain_adjoint));
        } catch (const Error& e) {
          throw Error(what + ": " + e.what());
        }
        if (sg + 1 < n_seg) starts[sg + 1] = g->end_state();
        if (sg + 1 == n_seg || g->forward_steps() * kReleaseFraction >= points)
          pending[sg] = std::move(g);
        else
          released_steps[sg] = g->forward_steps();
      }
    } else {
      for (std::size_t sg = 0; sg + 1 < n_seg; ++sg) starts[sg + 1] = simulate(sg, starts[sg], false);
    }
    if (std::holds_alternative<ode::CvodesForward>(gradient_method) && time_course)
      directions += q.size() + ny;
    std::vector<double> switch_p_bar(np, 0.0);  // the jump terms, by model parameter
    if (!time_course) lambda.assign(ny, 0.0);  // only measurements at time inf: nothing to integrate
    for (std::size_t sg = n_seg; time_course && sg-- > 0;) {
      if (sg + 1 < n_seg && !moving.empty()) {
        // The jump at c = cuts[sg + 1]: λ(c)ᵀ (f⁻ − f⁺) dt_s/dp_j, f⁻ read
        // on segment sg's side, f⁺ on segment sg + 1's (see above).
        const double c = cuts[sg + 1];
        const std::vector<double>& yc = starts[sg + 1];
        std::vector<double> f_minus(ny), f_plus(ny);
        segment(sg, yc, false).model.rhs<double>(c, yc, q, f_minus);
        segment(sg + 1, yc, false).model.rhs<double>(c, yc, q, f_plus);
        double jump = 0.0;
        for (std::size_t i = 0; i < ny; ++i) jump += lambda[i] * (f_minus[i] - f_plus[i]);
        for (std::size_t j : moving) switch_p_bar[j] += jump * switches.derivative(c, p, j, t1);
      }
      const SegmentLikelihood objective{&like_quiet, &pext, &states, first[sg], first[sg + 1], &lambda, &y_end};
      ode::GradientResult g;
      try {
        if (chained) {
          if (!pending[sg]) {  // released: its forward pass again, with points for its steps
            ode::CvodesAdjoint again = *chain_adjoint;
            again.steps = static_cast<int>(std::max(released_steps[sg] + kReleaseMargin, kReleaseMinPoints));
            pending[sg].emplace(begin_segment(sg, again));
          }
          g = pending[sg]->finish(lambda);  // J alone: no λᵀy(end) term
          pending[sg].reset();              // its checkpoints' memory
        } else {
          g = ode::gradient(segment(sg, starts[sg], false), objective, gradient_method,
                            gradient_integrator);
        }
      } catch (const Error& e) {
        throw Error(what + ": " + e.what());
      }
      result.rhs_evaluations += static_cast<std::size_t>(g.rhs_evaluations);
      result.steps += static_cast<std::size_t>(g.summary.steps);
      if (chained)  // a released segment's first forward pass (0 for a held one)
        result.steps += static_cast<std::size_t>(released_steps[sg]);
      result.backward_steps += static_cast<std::size_t>(g.backward_steps);
      double carried = 0.0;  // λᵀ y(end): not part of −log p
      if (!chained)
        for (std::size_t i = 0; i < lambda.size(); ++i) carried += lambda[i] * y_end[i];
      nll += g.objective - carried;
      for (std::size_t i = 0; i < q.size(); ++i) q_bar[i] += g.wrt_parameters[i];
      lambda = g.wrt_initial_state;
    }
    ode::GradientResult g;
    g.wrt_parameters = q_bar;
    g.wrt_initial_state = lambda;
    // The measurements at time inf: −log p at the steady state, its x̄, and
    // the implicit adjoint (∂H/∂x)ᵀν = x̄ onto the condition's model
    // parameters and (through the conserved moieties) onto y0. The direct
    // terms (pext) come with the others below.
    std::vector<double> post_p_bar(np, 0.0);
    if (at_steady_state) {
      states[n_finite] = post.x;
      const ad::VjpResult v = ad::vjp([&](const auto& xx) { return steady_likelihood(like_quiet, xx); },
                                      post.x, {1.0});
      nll += v.value[0];
      std::vector<double> y0_bar(ny, 0.0);
      steady_state_adjoint(post, p, v.cotangent, post_p_bar, y0_bar);
      for (std::size_t i = 0; i < ny; ++i) g.wrt_initial_state[i] += y0_bar[i];
    }
    // The formulas' direct dependence on pext, at the recorded states (one
    // reverse sweep over every observation of the experiment); records h, σ.
    const ad::VjpResult direct = ad::vjp(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x[0])>;
          T sum = T(0.0);
          for (std::size_t k = 0; k < ex.times.size(); ++k) {
            COSTATE_CHECK(states[k].size() == ny, what << ": no state at t = " << ex.times[k]);
            const std::vector<T> yk(states[k].begin(), states[k].end());
            sum = T(sum + like.at<T>(k, std::span<const T>(yk), std::span<const T>(x)));
          }
          return std::vector<T>{sum};
        },
        pext, {1.0});
    // Chain rule: q, the direct terms, then the initial state.
    std::vector<double> p_bar(direct.cotangent.begin(), direct.cotangent.begin() + static_cast<std::ptrdiff_t>(np));
    for (std::size_t k = 0; k < ntab; ++k) lin_bar[k] += direct.cotangent[np + k];
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (q_row[i] >= 0) lin_bar[static_cast<std::size_t>(q_row[i])] += g.wrt_parameters[i];
      else p_bar[i] += g.wrt_parameters[i];
    }
    for (std::size_t j = 0; j < np; ++j) p_bar[j] += switch_p_bar[j] + post_p_bar[j];
    initial_adjoint(g.wrt_initial_state, lin_bar);
    for (std::size_t j = 0; j < np; ++j)
      if (src[j].is_parameter()) lin_bar[static_cast<std::size_t>(src[j].parameter)] += p_bar[j];
   };

  // Experiments are dealt round-robin over the ranks of `comm`; each
  // experiment's terms are one row of `terms` (−log p, then the table
  // values' adjoints), zero on the other ranks, so that a summing
  // all-reduce reproduces every row exactly (x + 0 = x, in any order) and
  // every rank sums the rows in experiment order: the same bits on any
  // number of ranks.
  const std::size_t ne = pb.estimated.size(), n_fim = options.fim ? ne * ne : 0;
  const std::size_t n_ex = pb.experiments.size(), width = 1 + ntab + n_fim;
  std::vector<double> terms(n_ex * width, 0.0);
  // The experiments simulated (Options::experiments; all by default).
  std::vector<char> selected(n_ex, options.experiments.empty() ? 1 : 0);
  for (std::size_t i = 0; i < options.experiments.size(); ++i) {
    const std::size_t e = options.experiments[i];
    COSTATE_CHECK(e < n_ex && (i == 0 || options.experiments[i - 1] < e),
                  "petab::evaluate: Options::experiments must be ascending indices below the "
                      << n_ex << " experiments; entry " << i << " is " << e);
    selected[e] = 1;
  }
  std::string failure;
  // Progress: this rank's experiments (simulation conditions), in order.
  std::size_t mine = 0, done = 0;
  for (std::size_t e = 0; e < n_ex; ++e)
    mine += selected[e] && static_cast<int>(e % static_cast<std::size_t>(size)) == rank;
  Progress progress("PEtab condition", static_cast<double>(mine));
  for (std::size_t e = 0; e < n_ex; ++e) {
    if (!selected[e]) continue;
    if (static_cast<int>(e % static_cast<std::size_t>(size)) != rank) continue;
    try {
      run(pb.experiments[e], terms[e * width], std::span<double>(terms).subspan(e * width + 1, ntab),
          std::span<double>(terms).subspan(e * width + 1 + ntab, n_fim));
    } catch (const Error& err) {
      failure = err.what();
      break;
    }
    progress.update(static_cast<double>(++done));
  }
  if (size > 1) {
    detail_raise_on_any_rank(comm, rank, failure);
    MPI_Allreduce(MPI_IN_PLACE, terms.data(), static_cast<int>(terms.size()), MPI_DOUBLE, MPI_SUM, comm);
    // h and σ: each measurement's owner has them, every other rank zero.
    std::vector<double> hs(2 * pb.measurements.size(), 0.0);
    for (std::size_t e = 0; e < n_ex; ++e) {
      if (!selected[e] || static_cast<int>(e % static_cast<std::size_t>(size)) != rank) continue;
      for (const auto& at : pb.experiments[e].at_time)
        for (std::size_t i : at) {
          hs[2 * i] = result.simulations[i];
          hs[2 * i + 1] = result.sigmas[i];
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, hs.data(), static_cast<int>(hs.size()), MPI_DOUBLE, MPI_SUM, comm);
    for (std::size_t e = 0; e < n_ex; ++e) {
      if (!selected[e]) continue;
      for (const auto& at : pb.experiments[e].at_time)
        for (std::size_t i : at) {
          result.simulations[i] = hs[2 * i];
          result.sigmas[i] = hs[2 * i + 1];
        }
    }
    long long count[4] = {static_cast<long long>(result.rhs_evaluations), static_cast<long long>(directions),
                          static_cast<long long>(result.steps), static_cast<long long>(result.backward_steps)};
    MPI_Allreduce(MPI_IN_PLACE, count, 4, MPI_LONG_LONG, MPI_SUM, comm);
    result.rhs_evaluations = static_cast<std::size_t>(count[0]);
    directions = static_cast<std::size_t>(count[1]);
    result.steps = static_cast<std::size_t>(count[2]);
    result.backward_steps = static_cast<std::size_t>(count[3]);
  } else if (!failure.empty()) {
    throw Error(failure);
  }
  result.sensitivity_directions = directions;
  double nll = 0.0;
  for (std::size_t e = 0; e < n_ex; ++e) {
    nll += terms[e * width];
    for (std::size_t k = 0; k < ntab; ++k) lin_bar[k] += terms[e * width + 1 + k];
  }
  if (options.fim) {
    // On the scales: F_θ = diag(dlin/dθ) F_lin diag(dlin/dθ).
    std::vector<double> d(ne, 1.0);
    for (std::size_t e = 0; e < ne; ++e) {
      const Parameter& par = pb.parameters[pb.estimated[e]];
      if (par.scale == Scale::Log) d[e] = lin[pb.estimated[e]];
      if (par.scale == Scale::Log10) d[e] = lin[pb.estimated[e]] * std::numbers::ln10;
    }
    result.fim.assign(n_fim, 0.0);
    for (std::size_t ex = 0; ex < n_ex; ++ex)
      for (std::size_t c = 0; c < n_fim; ++c) result.fim[c] += terms[ex * width + 1 + ntab + c];
    for (std::size_t a = 0; a < ne; ++a)
      for (std::size_t b = 0; b < ne; ++b) result.fim[a * ne + b] *= d[a] * d[b];
  }

  result.llh = -nll;
  std::vector<char> measured(pb.measurements.size(), options.experiments.empty() ? 1 : 0);
  for (std::size_t e = 0; e < n_ex && !options.experiments.empty(); ++e)
    if (selected[e])
      for (const auto& at : pb.experiments[e].at_time)
        for (std::size_t i : at) measured[i] = 1;
  for (std::size_t i = 0; i < pb.measurements.size(); ++i) {
    if (!measured[i]) continue;
    const Measurement& me = pb.measurements[i];
    const Observable& o = pb.observables[me.observable];
    const double h = result.simulations[i], s = result.sigmas[i];
    if (!(s > 0.0))
      throw Error(pb.measurement_files[me.file] + ":" + std::to_string(me.line) + ": noise sigma = " +
                  std::to_string(s) + " (from '" + o.noise_formula + "') is not positive");
    double r = me.value - h;
    if (o.transformation == Transformation::Log) r = std::log(me.value) - std::log(h);
    if (o.transformation == Transformation::Log10) r = std::log10(me.value) - std::log10(h);
    result.chi2 += (r / s) * (r / s);
  }
  // Objective priors, on the estimated parameters.
  result.log_prior_gradient.assign(options.gradient ? pb.estimated.size() : 0, 0.0);
  for (std::size_t e = 0; e < pb.estimated.size(); ++e) {
    const Parameter& par = pb.parameters[pb.estimated[e]];
    if (par.prior == Prior::None) continue;
    const bool on_scale = par.prior == Prior::ScaleNormal || par.prior == Prior::ScaleLaplace ||
                          par.prior == Prior::ScaleUniform;
    const double x = on_scale ? theta[e] : lin[pb.estimated[e]];
    double dx_dtheta = 1.0;  // d x / d θ
    if (!on_scale && par.scale == Scale::Log) dx_dtheta = lin[pb.estimated[e]];
    if (!on_scale && par.scale == Scale::Log10) dx_dtheta = lin[pb.estimated[e]] * std::numbers::ln10;
    const double a = par.prior_a, b = par.prior_b;
    double lp = 0.0, dlp = 0.0;
    switch (par.prior) {
      case Prior::Normal:
      case Prior::ScaleNormal:
        lp = -0.5 * std::log(2.0 * std::numbers::pi * b * b) - 0.5 * (x - a) * (x - a) / (b * b);
        dlp = -(x - a) / (b * b);
        break;
      case Prior::Laplace:
      case Prior::ScaleLaplace:
        lp = -std::log(2.0 * b) - std::abs(x - a) / b;
        dlp = x > a ? -1.0 / b : (x < a ? 1.0 / b : 0.0);
        break;
      case Prior::Uniform:
      case Prior::ScaleUniform:
        lp = (x >= a && x <= b) ? -std::log(b - a) : -std::numeric_limits<double>::infinity();
        break;
      case Prior::None: break;
    }
    result.log_prior += lp;
    if (options.gradient) result.log_prior_gradient[e] = dlp * dx_dtheta;
  }
  // d lin / d θ of each estimated parameter (its scale's chain factor).
  std::vector<double> dlin(pb.estimated.size(), 1.0);
  for (std::size_t e = 0; e < pb.estimated.size(); ++e) {
    const Parameter& par = pb.parameters[pb.estimated[e]];
    if (par.scale == Scale::Log) dlin[e] = lin[pb.estimated[e]];
    if (par.scale == Scale::Log10) dlin[e] = lin[pb.estimated[e]] * std::numbers::ln10;
  }
  if (options.gradient) {
    result.gradient.resize(pb.estimated.size());
    for (std::size_t e = 0; e < pb.estimated.size(); ++e) result.gradient[e] = -lin_bar[pb.estimated[e]] * dlin[e];
  }
  if (options.per_experiment) {
    const std::size_t ne_est = pb.estimated.size();
    for (std::size_t ex = 0; ex < n_ex; ++ex) {
      if (!selected[ex]) continue;
      result.experiment_nll.push_back(terms[ex * width]);
      if (!options.gradient) continue;
      for (std::size_t e = 0; e < ne_est; ++e)
        result.experiment_gradient.push_back(terms[ex * width + 1 + pb.estimated[e]] * dlin[e]);
    }
  }
  return result;
}

}  // namespace costate::petab
