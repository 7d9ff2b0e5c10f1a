// ode::adjoint_with_delays: the discrete adjoint of the method of steps
// through the history's interpolation (include/costate/ode/delay_adjoint.hpp).

#include "costate/ode/delay_adjoint.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "costate/core/error.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"
#include "ode/method_of_steps.hpp"

namespace costate::ode {

namespace {

using detail::kSameTime;
using detail::same_time;

/// A dense [f_y | f_θ] up to this many columns; above, the tape (the
/// coloured strategy cannot be used: which nodes f reads moves with t).
constexpr std::size_t kDenseColumns = 64;

/// One segment's model: the equation model with its delayed inputs read
/// from the window of history nodes that are parameters, θ = (p, Y, F)
/// with Y, F the window's nodes (n_w × n_y each, row-major).
struct SegmentModel {
  const EquationModel* model = nullptr;
  const std::vector<DelayedInput>* inputs = nullptr;
  std::vector<expr::Program> w;      ///< the model's intermediates
  std::vector<std::size_t> read;     ///< the inputs the right-hand side reads
  std::vector<double> lag;           ///< their lags' values at p
  std::vector<std::size_t> slots;    ///< every input's slot (zeroed before a lag is read)
  std::size_t ny = 0, np = 0;
  double t0 = 0.0;
  double middle = 0.0;               ///< the segment's middle: which side of t0 a read is
  std::vector<double> nt;            ///< the window's node times (ascending; node 0 = t0 when
                                     ///< a read lies before t0)
  const History* history = nullptr;  ///< the initial history before t0 (when `initial`)
  bool initial = false;

  /// A program over (t, y, p, w) on T.
  template <class T>
  T evaluate(const expr::Program& program, const T& time, std::span<const T> y,
             std::span<const T> p) const {
    std::vector<T> v;
    v.reserve(1 + ny + np + w.size());
    v.push_back(time);
    v.insert(v.end(), y.begin(), y.end());
    v.insert(v.end(), p.begin(), p.end());
    for (const expr::Program& wk : w) v.push_back(wk.evaluate(std::span<const T>(v)));
    return program.evaluate(std::span<const T>(v));
  }

  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> theta, std::span<T> dydt) const {
    std::vector<T> p(theta.begin(), theta.begin() + static_cast<long>(np));
    // Slots hold 0 while the lags are read (their values in p are NaN for
    // SBML; the lags read none of them).
    for (std::size_t j : slots) p[j] = T(0.0);
    const std::size_t nw = nt.size();
    const std::span<const T> Y = theta.subspan(np, nw * ny), F = theta.subspan(np + nw * ny, nw * ny);
    std::vector<T> z(read.size()), y_tau(ny);
    for (std::size_t r = 0; r < read.size(); ++r) {
      const DelayedInput& in = (*inputs)[read[r]];
      const T d = evaluate(in.lag, T(t), y, std::span<const T>(p));
      const T tau = T(t - d);
      const double tau_v = t - lag[r];
      const bool before = middle - lag[r] < t0;
      if (before) {
        if (initial) {
          // The caller's history, fixed: its value and slope at τ.
          std::vector<double> v(ny), dv(ny);
          history->value(tau_v, v);
          history->derivative(tau_v, dv, true);  // at t0: the initial history's slope
          for (std::size_t i = 0; i < ny; ++i) y_tau[i] = T(v[i] + dv[i] * (tau - tau_v));
        } else {
          for (std::size_t i = 0; i < ny; ++i) y_tau[i] = Y[i];  // y(t0) = node 0
        }
      } else if (nw == 1) {
        for (std::size_t i = 0; i < ny; ++i) y_tau[i] = T(Y[i] + F[i] * (tau - tau_v));
      } else {
        // The piece [t_m, t_{m+1}] holding τ (the last one at the window's end).
        const std::size_t m1 =
            static_cast<std::size_t>(std::upper_bound(nt.begin(), nt.end(), tau_v) - nt.begin());
        const std::size_t m = std::min(std::max<std::size_t>(m1, 1), nw - 1) - 1;
        const double h = nt[m + 1] - nt[m];
        const T s = T((tau - nt[m]) / h);
        const T s2 = T(s * s), s3 = T(s2 * s);
        const T h00 = T(2.0 * s3 - 3.0 * s2 + 1.0), h10 = T(s3 - 2.0 * s2 + s),
                h01 = T(-2.0 * s3 + 3.0 * s2), h11 = T(s3 - s2);
        for (std::size_t i = 0; i < ny; ++i)
          y_tau[i] = T(h00 * Y[m * ny + i] + h * h10 * F[m * ny + i] + h01 * Y[(m + 1) * ny + i] +
                       h * h11 * F[(m + 1) * ny + i]);
      }
      const expr::Program& x =
          before && !in.quantity_before_start.empty() ? in.quantity_before_start : in.quantity;
      z[r] = evaluate(x, tau, std::span<const T>(y_tau), std::span<const T>(p));
    }
    for (std::size_t r = 0; r < read.size(); ++r) p[(*inputs)[read[r]].parameter] = z[r];
    model->rhs<T>(t, y, std::span<const T>(p), dydt);
  }
};

/// The adjoint seeds of one segment: J_s = Σ_i w_i · y(t_i) at its sample
/// times (the weights set before its reverse sweep).
struct SegmentSeeds {
  std::vector<double> times;
  std::vector<double> weights;  ///< times × n_y
  std::size_t ny = 0;
  std::vector<double> observation_times() const { return times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T>) const {
    T sum = 0.0;
    for (std::size_t i = 0; i < ny; ++i) sum = T(sum + weights[k * ny + i] * y[i]);
    return sum;
  }
};

/// What the reverse pass needs of one segment.
struct Segment {
  double a = 0.0, b = 0.0;
  std::size_t start = 0;            ///< the node at a (the previous segment's last)
  /// The node at a with f's right limit (a = t0 + d_k, where the slope of
  /// y(t − d_k) jumps at t0), formed by this segment's model; none: npos.
  std::size_t right = static_cast<std::size_t>(-1);
  std::size_t first = 0, last = 0;  ///< its samples (global indices first … last, in (a, b])
  std::size_t lo = 0, nw = 0;       ///< its window: nodes lo … start (nw of them)
  std::vector<double> theta;        ///< (p, Y, F) of the window
  SegmentModel model;
  SegmentSeeds seeds;
  std::unique_ptr<System> system;
  StepPlan plan;
  IntegratorOptions options;
};

}  // namespace

namespace {

/// adjoint_with_delays, or (objective null) its forward pass alone:
/// integrate_with_delays' run (detail::delay_forward), the same steps and
/// the same bits as the gradient's forward pass.
DelayedGradient delay_pass(const EquationModel& model, std::span<const double> y0,
                           std::span<const double> p, double t0, double t1,
                           std::span<const double> outputs, const std::vector<DelayedInput>& inputs,
                           const IntegratorOptions& options, const Checkpointing& checkpointing,
                           const DelayedObjective* objective, History::Initial initial_history) {
  const auto start_clock = std::chrono::steady_clock::now();
  const std::size_t ny = model.states().size(), np = p.size();
  COSTATE_CHECK(ny > 0, "adjoint_with_delays: the model has no states");
  const std::string first_text = detail::check_method_of_steps(
      objective ? "adjoint_with_delays" : "integrate_with_delays", model, y0, p, t0, t1, outputs,
      inputs);
  if (const Support s = supports(SensitivityKind::DiscreteAdjoint, options.method, 1); !s)
    throw Error(first_text + ": the discrete adjoint through delay(): " + s.message);

  // 1. The delayed inputs the right-hand side reads: constant positive
  // lags, no nested reads; the method of steps' segment length d_min and
  // the ends t0 + d_k (integrate_with_delays' segments).
  auto history = std::make_shared<History>(ny);
  history->set_initial(initial_history);
  const DelayedInputs slots(model, inputs, *history);
  SegmentModel base;
  base.model = &model;
  base.inputs = &inputs;
  for (std::size_t k = 0; k < model.intermediate_names().size(); ++k)
    base.w.push_back(model.intermediate(k));
  base.ny = ny;
  base.np = np;
  base.t0 = t0;
  base.history = history.get();
  base.initial = static_cast<bool>(initial_history);
  for (const DelayedInput& in : inputs) base.slots.push_back(in.parameter);
  std::vector<double> p0(p.begin(), p.end());
  for (std::size_t j : base.slots) p0[j] = 0.0;
  const detail::SegmentLags lags = detail::segment_lags(
      model, y0, p, t0, inputs, slots,
      ": the discrete adjoint through a delay whose quantity reads another delay (nested "
      "delays) is not supported");
  base.read = lags.read;
  base.lag = lags.lag;
  const double d_max = lags.read.empty() ? 0.0 : *std::max_element(lags.lag.begin(), lags.lag.end());
  const bool segmented = std::isfinite(lags.d_min);

  // The nodes: times, y, f (global, ascending; node 0 at t0).
  std::vector<double> nt{t0}, ny_(y0.begin(), y0.end()), nf(ny, 0.0);
  DelayedGradient out;
  std::vector<std::unique_ptr<Segment>> segments;
  // The System of a segment, its window set from the nodes so far.
  auto make_segment = [&](double a, double b) {
    auto seg = std::make_unique<Segment>();
    seg->a = a;
    seg->b = b;
    seg->start = nt.size() - 1;
    seg->first = nt.size();
    seg->model = base;
    seg->model.middle = 0.5 * (a + b);
    bool reads_before = false;
    for (double d : base.lag) reads_before = reads_before || seg->model.middle - d < t0;
    if (base.read.empty()) {
      seg->lo = seg->first;  // nothing read: an empty window
    } else if (reads_before) {
      seg->lo = 0;
    } else {
      const auto it = std::upper_bound(nt.begin(), nt.end(), a - d_max);
      seg->lo = it == nt.begin() ? 0 : static_cast<std::size_t>(it - nt.begin()) - 1;
    }
    const std::size_t nw = seg->first - seg->lo;
    seg->nw = nw;
    seg->model.nt.assign(nt.begin() + static_cast<long>(seg->lo), nt.end());
    seg->theta = p0;
    seg->theta.insert(seg->theta.end(), ny_.begin() + static_cast<long>(seg->lo * ny), ny_.end());
    seg->theta.insert(seg->theta.end(), nf.begin() + static_cast<long>(seg->lo * ny), nf.end());
    seg->seeds.ny = ny;
    const std::size_t n_theta = np + 2 * nw * ny;
    const SystemOptions so{.jacobian = ny + n_theta <= kDenseColumns ? JacobianStrategy::Dense
                                                                      : JacobianStrategy::Tape};
    seg->system = std::make_unique<System>(make_system(seg->model, seg->seeds, ny, n_theta, so));
    return seg;
  };

  // 2. Forward: node 0's derivative (it reads the history before t0), then
  // the segments, each planned (steps landing on its sample times) and
  // replayed; its samples become nodes.
  history->append(t0, y0, std::span<const double>(nf).first(ny));  // f_0 = 0 while it is formed
  const std::unique_ptr<Segment> node0 = make_segment(t0, std::min(t1, segmented ? t0 + lags.d_min : t1));
  node0->system->rhs(t0, y0, node0->theta, std::span<double>(nf).first(ny));
  *history = History(ny);
  history->set_initial(initial_history);
  history->append(t0, y0, std::span<const double>(nf).first(ny));
  double a = t0, last_step = 0.0;
  while (a < t1 && !same_time(a, t1)) {
    const double b = detail::segment_end(lags, a, t1);
    const std::vector<double> times = detail::segment_samples(lags, a, b, outputs);
    auto seg = make_segment(a, b);
    // At a = t0 + d_k the history gets a second node, f's right limit
    // (History::append_break): f's value is continuous there, but not its
    // derivative in the parameters (∂/∂d of y(t − d) reads ẏ(t0), 0 before
    // and f_0 after). Pieces after a read it; the pieces before, and this
    // segment (its window ends at the left node), do not.
    if (std::any_of(lags.ends.begin(), lags.ends.end(), [&](double e) { return same_time(e, a); })) {
      std::vector<double> ya(ny_.end() - static_cast<long>(ny), ny_.end()), f(ny);
      seg->system->rhs(a, ya, seg->theta, f);
      seg->right = nt.size();
      nt.push_back(a);
      ny_.insert(ny_.end(), ya.begin(), ya.end());
      nf.insert(nf.end(), f.begin(), f.end());
      history->append_break(f);
      seg->first = nt.size();
    }
    seg->seeds.times = times;
    seg->seeds.weights.assign(times.size() * ny, 0.0);
    // dopri5 restarts with the last segment's step (integrate_with_delays).
    seg->options = options;
    if (options.method == Method::Dopri5 && options.dt <= 0.0 && last_step > 0.0)
      seg->options.dt = std::min(last_step, b - a);
    const std::vector<double> ya(ny_.end() - static_cast<long>(ny), ny_.end());  // y(a)
    {
      ReplayedScheme run(*seg->system, ya, seg->theta, a, b, seg->options, {},
                         first_text + ": the method of steps (discrete adjoint)");
      Scheme& scheme = run.scheme();
      const StepPlan& plan = run.steps();
      std::vector<double> x(run.x0().begin(), run.x0().end()), xn(x.size());
      std::size_t next = 0;
      std::vector<double> f(ny);
      for (std::size_t i = 0; i < plan.steps(); ++i) {
        scheme.step(i, x, xn);
        std::swap(x, xn);
        const double ti = plan.times()[i + 1];
        if (next < times.size() && same_time(ti, times[next])) {
          const std::span<const double> yi = std::span<const double>(x).first(ny);
          seg->system->rhs(times[next], yi, seg->theta, f);
          nt.push_back(times[next]);
          ny_.insert(ny_.end(), yi.begin(), yi.end());
          nf.insert(nf.end(), f.begin(), f.end());
          history->append(times[next], yi, f);
          ++next;
        }
      }
      COSTATE_CHECK(next == times.size(), first_text << ": the method of steps' plan missed a "
                                                        "sample time of segment ["
                                                     << a << ", " << b << "]");
      out.steps += static_cast<std::int64_t>(plan.steps());
      Summary& total = out.solution.summary;
      total.rejected_steps += run.summary().rejected_steps;
      total.rhs_evaluations += run.rhs_evaluations();
      total.jacobian_evaluations += run.summary().jacobian_evaluations;
      total.factorizations += run.summary().factorizations;
      total.newton_iterations += run.summary().newton_iterations;
      last_step = run.summary().last_step > 0.0
                      ? run.summary().last_step
                      : plan.times()[plan.steps()] - plan.times()[plan.steps() - 1];
      seg->plan = run.release_steps();
    }
    seg->last = nt.size() - 1;
    segments.push_back(std::move(seg));
    a = b;
  }
  out.segments = segments.size();

  // 3. The trajectory at the outputs and the objective's seeds.
  std::vector<std::size_t> output_node;
  Solution& sol = out.solution;
  sol.n_states = ny;
  for (double t : outputs) {
    const double below = t - kSameTime * std::max(1.0, std::abs(t));
    const std::size_t k =
        static_cast<std::size_t>(std::lower_bound(nt.begin(), nt.end(), below) - nt.begin());
    COSTATE_CHECK(k < nt.size() && same_time(nt[k], t),
                  "adjoint_with_delays: output " << t << " is not a node");
    output_node.push_back(k);
    sol.t.push_back(t);
    sol.y.insert(sol.y.end(), ny_.begin() + static_cast<long>(k * ny),
                 ny_.begin() + static_cast<long>((k + 1) * ny));
  }
  sol.history = history;
  sol.summary.method = options.method;
  sol.summary.steps = out.steps;
  sol.summary.final_time = t1;
  sol.summary.termination = Termination::Success;
  sol.summary.message = "reached t1";
  sol.summary.last_step = last_step;
  sol.summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_clock).count();
  if (!objective) return out;  // the forward pass alone
  std::vector<double> ybar(nt.size() * ny, 0.0), fbar(nt.size() * ny, 0.0), pbar(np, 0.0);
  {
    std::vector<double> seeds(outputs.size() * ny, 0.0);
    out.objective = (*objective)(sol, seeds, pbar);
    for (std::size_t k = 0; k < outputs.size(); ++k)
      for (std::size_t i = 0; i < ny; ++i) ybar[output_node[k] * ny + i] += seeds[k * ny + i];
  }

  // 4. Reverse, segment by segment: the nodes' f̄ through f's vjp, the
  // sweep seeded with ȳ at the sample times, then θ̄ onto p and the window.
  std::vector<double> xbar(ny);
  auto node_vjp = [&](const Segment& seg, std::size_t i, std::span<double> theta_bar) {
    const std::span<const double> w(&fbar[i * ny], ny);
    if (std::all_of(w.begin(), w.end(), [](double v) { return v == 0.0; })) return;
    seg.system->vjp(nt[i], std::span<const double>(&ny_[i * ny], ny), seg.theta, w, xbar,
                    theta_bar);
    ++out.vjp_evaluations;
    for (std::size_t q = 0; q < ny; ++q) ybar[i * ny + q] += xbar[q];
  };
  auto scatter = [&](const Segment& seg, std::span<const double> theta_bar) {
    const std::size_t nw = seg.nw;
    for (std::size_t j = 0; j < np; ++j) pbar[j] += theta_bar[j];
    for (std::size_t m = 0; m < nw * ny; ++m) {
      ybar[seg.lo * ny + m] += theta_bar[np + m];
      fbar[seg.lo * ny + m] += theta_bar[np + nw * ny + m];
    }
  };
  for (std::size_t s = segments.size(); s-- > 0;) {
    Segment& seg = *segments[s];
    std::vector<double> theta_bar(seg.theta.size(), 0.0);
    for (std::size_t i = seg.first; i <= seg.last; ++i) node_vjp(seg, i, theta_bar);
    if (seg.right != static_cast<std::size_t>(-1)) {
      // The right-limit node: its f̄ through this segment's model, its y
      // is y(a).
      node_vjp(seg, seg.right, theta_bar);
      for (std::size_t q = 0; q < ny; ++q) ybar[seg.start * ny + q] += ybar[seg.right * ny + q];
    }
    for (std::size_t i = seg.first; i <= seg.last; ++i)
      std::copy_n(&ybar[i * ny], ny, &seg.seeds.weights[(i - seg.first) * ny]);
    const std::vector<double> ya(ny_.begin() + static_cast<long>(seg.start * ny),
                                 ny_.begin() + static_cast<long>((seg.start + 1) * ny));
    const GradientResult g = detail::native_gradient(
        *seg.system, ya, seg.theta, seg.a, seg.b, DiscreteAdjoint{.checkpointing = checkpointing},
        seg.options, seg.plan);
    out.vjp_evaluations += g.vjp_evaluations;
    for (std::size_t j = 0; j < theta_bar.size(); ++j) theta_bar[j] += g.wrt_parameters[j];
    for (std::size_t q = 0; q < ny; ++q) ybar[seg.start * ny + q] += g.wrt_initial_state[q];
    scatter(seg, theta_bar);
  }
  // Node 0's derivative read the history before t0 (node 0's own window:
  // its θ̄ goes to p and node 0).
  {
    std::vector<double> theta_bar(node0->theta.size(), 0.0);
    node_vjp(*node0, 0, theta_bar);
    scatter(*node0, theta_bar);
  }
  for (std::size_t j : base.slots) pbar[j] = 0.0;
  out.wrt_parameters = std::move(pbar);
  out.wrt_initial_state.assign(ybar.begin(), ybar.begin() + static_cast<long>(ny));
  return out;
}

}  // namespace

DelayedGradient adjoint_with_delays(const EquationModel& model, std::span<const double> y0,
                                    std::span<const double> p, double t0, double t1,
                                    std::span<const double> outputs,
                                    const std::vector<DelayedInput>& inputs,
                                    const IntegratorOptions& options,
                                    const Checkpointing& checkpointing,
                                    const DelayedObjective& objective,
                                    History::Initial initial_history) {
  return delay_pass(model, y0, p, t0, t1, outputs, inputs, options, checkpointing, &objective,
                    std::move(initial_history));
}

namespace detail {

bool delay_forward_applies(const EquationModel& model, const std::vector<DelayedInput>& inputs,
                           const IntegratorOptions& options) {
  if (model.states().empty() || !supports(SensitivityKind::DiscreteAdjoint, options.method, 1))
    return false;
  History empty(model.states().size());
  const DelayedInputs slots(model, inputs, empty);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (slots.read_by_rhs(k) && slots.reads_inputs(k)) return false;  // nested: not the adjoint's
  return true;
}

Solution delay_forward(const EquationModel& model, std::span<const double> y0,
                       std::span<const double> p, double t0, double t1,
                       std::span<const double> outputs, const std::vector<DelayedInput>& inputs,
                       const IntegratorOptions& options, History::Initial initial_history) {
  return delay_pass(model, y0, p, t0, t1, outputs, inputs, options, Checkpointing{}, nullptr,
                    std::move(initial_history))
      .solution;
}

}  // namespace detail

}  // namespace costate::ode
