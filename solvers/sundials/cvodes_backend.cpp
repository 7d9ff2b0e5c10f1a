// The SUNDIALS CVODES backend of ode::integrate and ode::gradient
// (include/costate/ode/cvodes.hpp): forward integration, forward
// sensitivities (CVodeSensInit) and the adjoint (CVodeF/CVodeB with a
// backward quadrature), every derivative from the type-erased callbacks that
// costate's AD fills. The Newton linear solver of the forward and the
// backward iterations is Settings::linear_solver: dense, band or KLU
// (cvodes_linear_solver.hpp, set up in cvodes_internal.hpp).
#include <cvodes/cvodes.h>
#include <cvodes/cvodes_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "sundials/cvodes_internal.hpp"

namespace costate::ode {

std::string to_string(CvodesInterpolation i) {
  return i == CvodesInterpolation::Hermite ? "hermite" : "polynomial";
}

CvodesInterpolation cvodes_interpolation_from_string(std::string_view name) {
  if (name == "hermite") return CvodesInterpolation::Hermite;
  if (name == "polynomial") return CvodesInterpolation::Polynomial;
  throw Error("unknown CVODES interpolation '" + std::string(name) +
              "'; valid values: hermite, polynomial");
}

int auto_checkpoint_steps(std::size_t n, std::size_t vectors_per_point) {
  // Each stored vector: its n values plus ~1.9 KiB of N_Vector structure,
  // operation table and allocator overhead (measured: Bachmann_MSB2011's
  // peak memory rose 38.5 MB from 100 to 10 000 Hermite points).
  constexpr std::size_t kVectorOverhead = 2048;
  const std::size_t per_point =
      std::max<std::size_t>(vectors_per_point, 1) * (n * sizeof(double) + kVectorOverhead);
  const std::size_t steps = std::min(kAutoCheckpointBytes / per_point, kAutoCheckpointStepsPerState * n);
  return static_cast<int>(
      std::clamp<std::size_t>(steps, kAutoCheckpointMinSteps, kAutoCheckpointMaxSteps));
}

int CvodesAdjoint::resolved_steps(std::size_t n, std::size_t copies) const {
  if (steps > 0) return steps;
  return auto_checkpoint_steps(n, copies * (interpolation == CvodesInterpolation::Hermite ? 2 : 1));
}

std::string CvodesAdjoint::steps_label(std::size_t n, std::size_t copies) const {
  if (steps > 0) return std::to_string(steps);
  return n == 0 ? std::string("auto") : std::to_string(resolved_steps(n, copies)) + " auto";
}

void CvodesAdjoint::validate() const {
  COSTATE_CHECK(steps >= 0, "sensitivity.checkpoint_steps = "
                                << steps
                                << " is invalid: CVODES needs >= 1 steps between checkpoints (or auto)");
  COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0,
                "sensitivity.adjoint_rtol = " << costate::detail::format_value(rtol)
                                              << " must be >= 0 (0: integrator.rtol)");
  COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                "sensitivity.adjoint_atol = " << costate::detail::format_value(atol)
                                              << " must be >= 0 (0: integrator.atol)");
  COSTATE_CHECK(std::isfinite(forward_tolerance_factor) && forward_tolerance_factor > 0.0 &&
                    forward_tolerance_factor <= 1.0,
                "CvodesAdjoint::forward_tolerance_factor = "
                    << costate::detail::format_value(forward_tolerance_factor)
                    << " must be in (0, 1] (a multiple of integrator.rtol and atol)");
}

namespace cvodes {

using namespace internal;

Settings settings_from(const IntegratorOptions& options, std::size_t n) {
  Settings s;
  s.rtol = options.rtol;
  s.atol = options.atol_per_state.empty() ? std::vector<double>(n, options.atol)
                                          : options.atol_per_state;
  s.max_steps = options.max_steps;
  s.first_step = options.dt;
  s.max_step = options.dt_max;
  s.min_step = options.dt_min;
  s.linear_solver = options.cvodes_linear_solver;
  return s;
}

Stats integrate(const System& sys, const Settings& settings, double t0, double t1,
                std::vector<double>& y, std::span<const double> outputs, bool stop_at_outputs,
                const std::function<void(std::size_t, double, const double*)>& out) {
  Objects o;
  Context ctx;
  setup_forward(o, ctx, sys, settings, t0, y.data());
  Stats s;
  s.final_time = t0;
  double t = t0;
  std::size_t j = 0;
  while (j < outputs.size() && outputs[j] <= t0) out(j++, t0, y.data());
  check(ctx, CVodeSetStopTime(o.mem, t1), "CVodeSetStopTime");
  for (; j < outputs.size(); ++j) {
    if (stop_at_outputs) check(ctx, CVodeSetStopTime(o.mem, outputs[j]), "CVodeSetStopTime");
    const int flag = CVode(o.mem, outputs[j], o.y, &t, CV_NORMAL);
    if (ctx.error) std::rethrow_exception(ctx.error);
    s.final_time = t;
    if (flag < 0) {
      fail(s, ctx, flag, t);
      break;
    }
    out(j, outputs[j], data(o.y));
    if (!stop_at_outputs) check(ctx, CVodeSetStopTime(o.mem, t1), "CVodeSetStopTime");
  }
  std::copy(data(o.y), data(o.y) + sys.n, y.begin());
  collect(o.mem, s);
  return s;
}

namespace {
int root_functions(sunrealtype t, N_Vector y, sunrealtype* g, void* user) {
  auto* ctx = static_cast<Context*>(user);
  return guarded(ctx, [&] { ctx->sys->roots(t, data(y), g); });
}
}  // namespace

namespace {
/// CVodeSensInit with S (column-major n × ns) at t0, in the error test
/// with rtol and atol / |scales[d]| (empty: 1).
void setup_sensitivities(Objects& o, Context& ctx, const System& sys, std::size_t ns,
                         const std::vector<double>& S, std::span<const double> scales) {
  COSTATE_CHECK(sys.sensitivity_rhs, "CVODES backend: the system needs sensitivity_rhs");
  COSTATE_CHECK(ns >= 1 && S.size() == sys.n * ns,
                "CVODES backend: S must hold n × ns = " << sys.n * ns << " values");
  COSTATE_CHECK(scales.empty() || scales.size() == ns,
                "CVODES backend: " << scales.size() << " sensitivity scales for " << ns
                                   << " directions");
  const std::size_t n = sys.n;
  ctx.yS.resize(ns);
  ctx.ySdot.resize(ns);
  o.ns = static_cast<int>(ns);
  o.yS = N_VCloneVectorArray(o.ns, o.y);
  COSTATE_CHECK(o.yS != nullptr, "CVODES backend: N_VCloneVectorArray failed");
  for (std::size_t d = 0; d < ns; ++d) std::copy(&S[d * n], &S[d * n] + n, data(o.yS[d]));
  check(ctx, CVodeSensInit(o.mem, o.ns, CV_SIMULTANEOUS, sensitivity_rhs, o.yS), "CVodeSensInit");
  if (!scales.empty()) {
    std::vector<double> pbar(ns);
    for (std::size_t d = 0; d < ns; ++d) {
      COSTATE_CHECK(std::isfinite(scales[d]) && scales[d] != 0.0,
                    "CVODES backend: sensitivity scale " << d << " = " << scales[d]
                                                         << " is not a finite non-zero number");
      pbar[d] = scales[d];
    }
    // p = nullptr: CVODES only reads p for difference quotients, and the
    // sensitivity right-hand side is ours.
    check(ctx, CVodeSetSensParams(o.mem, nullptr, pbar.data(), nullptr), "CVodeSetSensParams");
  }
  check(ctx, CVodeSensEEtolerances(o.mem), "CVodeSensEEtolerances");
  check(ctx, CVodeSetSensErrCon(o.mem, SUNTRUE), "CVodeSetSensErrCon");
}

/// S (column-major n × ns) ← CVODES' sensitivities at t.
void get_sensitivities(Objects& o, Context& ctx, std::size_t n, double t,
                       std::vector<double>& S) {
  check(ctx, CVodeGetSens(o.mem, &t, o.yS), "CVodeGetSens");
  for (std::size_t d = 0; d < static_cast<std::size_t>(o.ns); ++d)
    std::copy(data(o.yS[d]), data(o.yS[d]) + n, &S[d * n]);
}
}  // namespace

Stats integrate_to_root(
    const System& sys, const Settings& settings, double t0, double t_end, std::vector<double>& y,
    std::span<const double> outputs,
    const std::function<void(std::size_t, double, const double*, const double*)>& out,
    double& root_time, std::vector<int>& directions, RootSensitivities sensitivities) {
  COSTATE_CHECK(sys.roots && sys.n_roots > 0, "CVODES backend: the system has no root functions");
  Objects o;
  Context ctx;
  setup_forward(o, ctx, sys, settings, t0, y.data());
  std::vector<double>* S = sensitivities.S;
  if (S) setup_sensitivities(o, ctx, sys, sensitivities.ns, *S, {});
  check(ctx, CVodeRootInit(o.mem, static_cast<int>(sys.n_roots), root_functions), "CVodeRootInit");
  check(ctx, CVodeSetStopTime(o.mem, t_end), "CVodeSetStopTime");
  Stats s;
  s.final_time = t0;
  root_time = std::numeric_limits<double>::quiet_NaN();
  directions.assign(sys.n_roots, 0);
  double t = t0;
  std::size_t j = 0;
  while (j < outputs.size() && outputs[j] <= t0) ++j;
  for (;;) {
    const double target = j < outputs.size() && outputs[j] < t_end ? outputs[j] : t_end;
    const int flag = CVode(o.mem, target, o.y, &t, CV_NORMAL);
    if (ctx.error) std::rethrow_exception(ctx.error);
    s.final_time = t;
    if (flag < 0) {
      fail(s, ctx, flag, t);
      break;
    }
    if (flag == CV_ROOT_RETURN) {
      root_time = t;
      check(ctx, CVodeGetRootInfo(o.mem, directions.data()), "CVodeGetRootInfo");
      break;
    }
    if (target < t_end) {
      if (S) get_sensitivities(o, ctx, sys.n, t, *S);
      out(j++, t, data(o.y), S ? S->data() : nullptr);
      continue;
    }
    break;
  }
  if (S && s.success) get_sensitivities(o, ctx, sys.n, t, *S);
  std::copy(data(o.y), data(o.y) + sys.n, y.begin());
  collect(o.mem, s);
  return s;
}

Stats forward_sensitivities(
    const System& sys, const Settings& settings, double t0, std::vector<double>& y,
    std::size_t ns, std::vector<double>& S, std::span<const double> stops,
    const std::function<void(std::size_t, double, const double*, const double*)>& at_stop,
    std::span<const double> scales) {
  const std::size_t n = sys.n;
  Objects o;
  Context ctx;
  setup_forward(o, ctx, sys, settings, t0, y.data());
  setup_sensitivities(o, ctx, sys, ns, S, scales);
  Stats s;
  s.final_time = t0;
  double t = t0;
  for (std::size_t k = 0; k < stops.size(); ++k) {
    if (stops[k] > t) {
      check(ctx, CVodeSetStopTime(o.mem, stops[k]), "CVodeSetStopTime");
      const int flag = CVode(o.mem, stops[k], o.y, &t, CV_NORMAL);
      if (ctx.error) std::rethrow_exception(ctx.error);
      s.final_time = t;
      if (flag < 0) {
        fail(s, ctx, flag, t);
        break;
      }
      get_sensitivities(o, ctx, n, t, S);
    }
    at_stop(k, stops[k], data(o.y), S.data());
  }
  std::copy(data(o.y), data(o.y) + n, y.begin());
  collect(o.mem, s);
  return s;
}

struct AdjointPass::Impl {
  const System* sys = nullptr;
  Settings settings;
  CvodesAdjoint adj;
  double t0 = 0.0;
  std::vector<double> stops, jumps, y_end;
  Objects o;
  Context ctx;
  Stats forward;
  bool done = false;
};

AdjointPass::AdjointPass(
    const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
    const std::vector<double>& y0, std::span<const double> stops,
    const std::function<void(std::size_t, double, const double*, double*)>& jump)
    : impl_(std::make_unique<Impl>()) {
  COSTATE_CHECK(sys.vjp, "CVODES backend: the adjoint needs the system's vjp");
  COSTATE_CHECK(!stops.empty() && stops.front() >= t0,
                "CVODES backend: the adjoint needs stops in [t0, t1]");
  adj.validate();
  // CVODES' polynomial interpolation fits the method's order (up to 5 for
  // BDF, 12 for Adams) through the points stored in one checkpoint interval:
  // fewer steps per interval read outside the stored data (a crash, not an
  // error, in SUNDIALS 6.4).
  const int min_steps = sys.bdf ? 6 : 13;
  const bool hermite = adj.interpolation == CvodesInterpolation::Hermite;
  const int steps = adj.resolved_steps(sys.n);
  COSTATE_CHECK(hermite || steps >= min_steps,
                "sensitivity.checkpoint_steps = "
                    << steps << " is too small for interpolation: polynomial with "
                    << (sys.bdf ? "cvodes_bdf" : "cvodes_adams") << "; use at least " << min_steps
                    << " steps between checkpoints, or interpolation: hermite");
  Impl& m = *impl_;
  m.sys = &sys;
  m.settings = settings;
  m.adj = adj;
  m.t0 = t0;
  m.stops.assign(stops.begin(), stops.end());
  const std::size_t n = sys.n;
  setup_forward(m.o, m.ctx, sys, m.settings, t0, y0.data());
  check(m.ctx, CVodeAdjInit(m.o.mem, steps, hermite ? CV_HERMITE : CV_POLYNOMIAL), "CVodeAdjInit");

  // 1. Forward to every stop; the λ jumps from the state there.
  const std::size_t K = stops.size();
  m.jumps.assign(K * n, 0.0);
  forward_to_stops(m.o, m.ctx, t0, stops, "gradient (cvodes_adjoint)", m.forward,
                   [&](std::size_t k, double) {
                     jump(k, stops[k], data(m.o.y), &m.jumps[k * n]);
                   });
  m.y_end.assign(data(m.o.y), data(m.o.y) + n);
}

AdjointPass::~AdjointPass() = default;
AdjointPass::AdjointPass(AdjointPass&&) noexcept = default;
AdjointPass& AdjointPass::operator=(AdjointPass&&) noexcept = default;

const std::vector<double>& AdjointPass::final_state() const { return impl_->y_end; }
const Stats& AdjointPass::forward() const { return impl_->forward; }

void AdjointPass::backward(std::span<const double> lambda_end, std::vector<double>& lambda,
                           std::vector<double>& mu, Stats& backward) {
  Impl& m = *impl_;
  COSTATE_CHECK(!m.done, "CVODES backend: AdjointPass::backward runs once");
  const System& sys = *m.sys;
  const std::size_t n = sys.n, np = sys.np, K = m.stops.size();
  COSTATE_CHECK(lambda_end.empty() || lambda_end.size() == n,
                "CVODES backend: λ at the end has " << lambda_end.size() << " entries for " << n
                                                    << " states");
  m.done = true;
  Objects& o = m.o;
  Context& ctx = m.ctx;
  const std::span<const double> stops = m.stops;
  std::vector<double>& jumps = m.jumps;
  for (std::size_t i = 0; i < lambda_end.size(); ++i) jumps[(K - 1) * n + i] += lambda_end[i];

  // 2. Backward from t1: λ(t1) = jump at t1 (∂g/∂y, λ_z = 1, ∂ℓ/∂y, and
  //    lambda_end), μ(t1) = 0.
  const double t1 = stops.back();
  const double rtolB = m.adj.rtol > 0.0 ? m.adj.rtol : m.settings.rtol;
  double atolB = m.adj.atol;
  if (atolB <= 0.0) {
    atolB = std::numeric_limits<double>::infinity();
    for (double a : m.settings.atol) atolB = std::min(atolB, a);
  }
  o.yB = new_vector(n, o.sunctx, &jumps[(K - 1) * n]);
  o.qB = new_vector(np, o.sunctx);
  int which = -1;
  check(ctx, CVodeCreateB(o.mem, sys.bdf ? CV_BDF : CV_ADAMS, &which), "CVodeCreateB");
  check(ctx, CVodeInitB(o.mem, which, rhs_backward, t1, o.yB), "CVodeInitB");
  check(ctx, CVodeSStolerancesB(o.mem, which, rtolB, atolB), "CVodeSStolerancesB");
  check(ctx, CVodeSetUserDataB(o.mem, which, &ctx), "CVodeSetUserDataB");
  check(ctx, CVodeSetMaxNumStepsB(o.mem, which, static_cast<long>(m.settings.max_steps)),
        "CVodeSetMaxNumStepsB");
  setup_backward_linear_solver(o, ctx, sys, m.settings, which);
  if (np > 0) {
    check(ctx, CVodeQuadInitB(o.mem, which, quadrature_backward, o.qB), "CVodeQuadInitB");
    // μ in the backward error test (relative, with atol of the backward
    // problem): on long stiff horizons (Robertson to 4e7) an uncontrolled
    // quadrature loses ~1e-4 of the gradient.
    check(ctx, CVodeQuadSStolerancesB(o.mem, which, rtolB, atolB), "CVodeQuadSStolerancesB");
    check(ctx, CVodeSetQuadErrConB(o.mem, which, SUNTRUE), "CVodeSetQuadErrConB");
  }
  backward = Stats{};
  Stats leg;
  auto add_leg = [&] {
    void* memB = CVodeGetAdjCVodeBmem(o.mem, which);
    leg = Stats{};
    collect(memB, leg);
    backward.add_counts(leg);
  };
  auto run_back = [&](double t_to) {
    const int flag = CVodeB(o.mem, t_to, CV_NORMAL);
    if (ctx.error) std::rethrow_exception(ctx.error);
    if (flag < 0) {
      fail(backward, ctx, flag, t_to);
      COSTATE_CHECK(false, "gradient (cvodes_adjoint): the backward integration failed: "
                               << backward.message);
    }
    double tret = 0.0;
    check(ctx, CVodeGetB(o.mem, which, &tret, o.yB), "CVodeGetB");
    if (np > 0) check(ctx, CVodeGetQuadB(o.mem, which, &tret, o.qB), "CVodeGetQuadB");
    add_leg();
  };
  // 3. Legs t1 → t_{K−2} → … → stops[0], adding each stop's jump and
  //    restarting there, then the last leg to t0.
  for (std::size_t k = K - 1; k-- > 0;) {
    if (stops[k] < stops[k + 1]) run_back(stops[k]);
    double* lb = data(o.yB);
    for (std::size_t i = 0; i < n; ++i) lb[i] += jumps[k * n + i];
    check(ctx, CVodeReInitB(o.mem, which, stops[k], o.yB), "CVodeReInitB");
    if (np > 0) check(ctx, CVodeQuadReInitB(o.mem, which, o.qB), "CVodeQuadReInitB");
  }
  if (stops.front() > m.t0) run_back(m.t0);
  lambda.assign(data(o.yB), data(o.yB) + n);
  mu.assign(np, 0.0);
  if (np > 0) std::copy(data(o.qB), data(o.qB) + np, mu.begin());
  backward.final_time = m.t0;
}

void adjoint(const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
             const std::vector<double>& y0, std::span<const double> stops,
             const std::function<void(std::size_t, double, const double*, double*)>& jump,
             std::vector<double>& lambda, std::vector<double>& mu, Stats& forward,
             Stats& backward) {
  AdjointPass pass(sys, settings, adj, t0, y0, stops, jump);
  forward = pass.forward();
  pass.backward({}, lambda, mu, backward);
}

}  // namespace cvodes
}  // namespace costate::ode
