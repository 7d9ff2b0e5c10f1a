// The SUNDIALS CVODES backend of ode::integrate and ode::gradient
// (include/costate/ode/cvodes.hpp): forward integration, forward
// sensitivities (CVodeSensInit) and the adjoint (CVodeF/CVodeB with a
// backward quadrature), every derivative from the type-erased callbacks that
// costate's AD fills. Dense direct linear solver (SUNDenseMatrix +
// SUNLinSol_Dense) for the forward and the backward Newton iterations.
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
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"

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

void CvodesAdjoint::validate() const {
  COSTATE_CHECK(steps >= 1, "sensitivity.checkpoint_steps = " << steps
                                                              << " is invalid: CVODES needs >= 1 "
                                                                 "steps between checkpoints");
  COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0,
                "sensitivity.adjoint_rtol = " << costate::detail::format_value(rtol)
                                              << " must be >= 0 (0: integrator.rtol)");
  COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                "sensitivity.adjoint_atol = " << costate::detail::format_value(atol)
                                              << " must be >= 0 (0: integrator.atol)");
}

namespace cvodes {
namespace {

struct Context {
  const System* sys = nullptr;
  std::exception_ptr error;  // a callback's exception, rethrown after CVODES returns
  std::string last_error;
  std::vector<double> jac, fp;  // scratch: n × n Jacobian, f_pᵀλ
  std::vector<const double*> yS;
  std::vector<double*> ySdot;
};

double* data(N_Vector v) { return N_VGetArrayPointer(v); }

template <class F>
int guarded(Context* c, F&& f) {
  try {
    f();
  } catch (...) {
    c->error = std::current_exception();
    return -1;
  }
  return 0;
}

int rhs(realtype t, N_Vector y, N_Vector ydot, void* user) {
  auto* c = static_cast<Context*>(user);
  const int r = guarded(c, [&] { c->sys->rhs(t, data(y), data(ydot)); });
  if (r != 0) return r;
  const double* d = data(ydot);
  for (std::size_t i = 0; i < c->sys->n; ++i)
    if (!std::isfinite(d[i])) return 1;  // recoverable: CVODES retries a smaller step
  return 0;
}

int jacobian(realtype t, N_Vector y, N_Vector, SUNMatrix J, void* user, N_Vector, N_Vector,
             N_Vector) {
  auto* c = static_cast<Context*>(user);
  // SUNDenseMatrix is column-major with leading dimension n, as promised.
  return guarded(c, [&] { c->sys->jacobian(t, data(y), SUNDenseMatrix_Data(J)); });
}

int sensitivity_rhs(int ns, realtype t, N_Vector y, N_Vector, N_Vector* yS, N_Vector* ySdot,
                    void* user, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(user);
  for (int j = 0; j < ns; ++j) {
    c->yS[static_cast<std::size_t>(j)] = data(yS[j]);
    c->ySdot[static_cast<std::size_t>(j)] = data(ySdot[j]);
  }
  return guarded(c, [&] {
    c->sys->sensitivity_rhs(t, data(y), static_cast<std::size_t>(ns), c->yS.data(),
                            c->ySdot.data());
  });
}

// Backward: λ' = −f_yᵀ λ.
int rhs_backward(realtype t, N_Vector y, N_Vector yB, N_Vector yBdot, void* user) {
  auto* c = static_cast<Context*>(user);
  const int r = guarded(c, [&] { c->sys->vjp(t, data(y), data(yB), data(yBdot), c->fp.data()); });
  double* d = data(yBdot);
  for (std::size_t i = 0; i < c->sys->n; ++i) d[i] = -d[i];
  return r;
}

// Backward quadrature: μ' = −f_pᵀ λ.
int quadrature_backward(realtype t, N_Vector y, N_Vector yB, N_Vector qBdot, void* user) {
  auto* c = static_cast<Context*>(user);
  const int r = guarded(c, [&] { c->sys->vjp(t, data(y), data(yB), c->jac.data(), data(qBdot)); });
  double* d = data(qBdot);
  for (std::size_t j = 0; j < c->sys->np; ++j) d[j] = -d[j];
  return r;
}

// ∂(λ')/∂λ = −f_yᵀ.
int jacobian_backward(realtype t, N_Vector y, N_Vector, N_Vector, SUNMatrix JB, void* user,
                      N_Vector, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(user);
  const std::size_t n = c->sys->n;
  const int r = guarded(c, [&] { c->sys->jacobian(t, data(y), c->jac.data()); });
  double* out = SUNDenseMatrix_Data(JB);
  for (std::size_t col = 0; col < n; ++col)
    for (std::size_t row = 0; row < n; ++row) out[col * n + row] = -c->jac[row * n + col];
  return r;
}

void error_handler(int, const char* module, const char* function, char* msg, void* user) {
  auto* c = static_cast<Context*>(user);
  c->last_error = std::string(module ? module : "") + "::" + (function ? function : "") + ": " +
                  (msg ? msg : "");
}

/// Frees the SUNDIALS objects however the run ends.
struct Objects {
  SUNContext sunctx = nullptr;
  N_Vector y = nullptr, atol = nullptr, yB = nullptr, qB = nullptr;
  N_Vector* yS = nullptr;
  int ns = 0;
  SUNMatrix J = nullptr, JB = nullptr;
  SUNLinearSolver ls = nullptr, lsB = nullptr;
  void* mem = nullptr;
  Objects() { check_flag(SUNContext_Create(nullptr, &sunctx), "SUNContext_Create"); }
  ~Objects() {
    if (mem) CVodeFree(&mem);
    if (lsB) SUNLinSolFree(lsB);
    if (ls) SUNLinSolFree(ls);
    if (JB) SUNMatDestroy(JB);
    if (J) SUNMatDestroy(J);
    if (yS) N_VDestroyVectorArray(yS, ns);
    if (qB) N_VDestroy(qB);
    if (yB) N_VDestroy(yB);
    if (atol) N_VDestroy(atol);
    if (y) N_VDestroy(y);
    if (sunctx) SUNContext_Free(&sunctx);
  }
  static void check_flag(int flag, const char* call) {
    COSTATE_CHECK(flag >= 0, "CVODES backend: " << call << " failed with flag " << flag);
  }
};

std::string flag_name(int flag) {
  char* name = CVodeGetReturnFlagName(flag);
  std::string s = name ? name : "?";
  std::free(name);
  return s;
}

void check(const Context& ctx, int flag, const char* call) {
  COSTATE_CHECK(flag >= 0, "CVODES backend: " << call << " failed: " << flag_name(flag)
                                              << (ctx.last_error.empty() ? "" : " — ")
                                              << ctx.last_error);
}

N_Vector new_vector(std::size_t n, SUNContext ctx, const double* values = nullptr) {
  N_Vector v = N_VNew_Serial(static_cast<sunindextype>(std::max<std::size_t>(n, 1)), ctx);
  COSTATE_CHECK(v != nullptr, "CVODES backend: N_VNew_Serial failed");
  if (values)
    std::copy(values, values + n, data(v));
  else
    N_VConst(0.0, v);
  return v;
}

/// The forward problem: CVodeCreate, init, tolerances, dense solver, limits.
void setup_forward(Objects& o, Context& ctx, const System& sys, const Settings& st, double t0,
                   const double* y0) {
  const std::size_t n = sys.n;
  COSTATE_CHECK(sys.rhs && sys.jacobian, "CVODES backend: the system needs rhs and jacobian");
  COSTATE_CHECK(st.atol.size() == n, "CVODES backend: " << st.atol.size()
                                                        << " absolute tolerances for " << n
                                                        << " states");
  ctx.sys = &sys;
  ctx.jac.assign(n * n, 0.0);
  ctx.fp.assign(std::max<std::size_t>(sys.np, 1), 0.0);
  o.y = new_vector(n, o.sunctx, y0);
  o.atol = new_vector(n, o.sunctx, st.atol.data());
  o.mem = CVodeCreate(sys.bdf ? CV_BDF : CV_ADAMS, o.sunctx);
  COSTATE_CHECK(o.mem != nullptr, "CVODES backend: CVodeCreate failed");
  check(ctx, CVodeSetErrHandlerFn(o.mem, error_handler, &ctx), "CVodeSetErrHandlerFn");
  check(ctx, CVodeInit(o.mem, rhs, t0, o.y), "CVodeInit");
  check(ctx, CVodeSetUserData(o.mem, &ctx), "CVodeSetUserData");
  check(ctx, CVodeSVtolerances(o.mem, st.rtol, o.atol), "CVodeSVtolerances");
  o.J = SUNDenseMatrix(static_cast<sunindextype>(n), static_cast<sunindextype>(n), o.sunctx);
  o.ls = SUNLinSol_Dense(o.y, o.J, o.sunctx);
  COSTATE_CHECK(o.J && o.ls, "CVODES backend: dense matrix/solver creation failed");
  check(ctx, CVodeSetLinearSolver(o.mem, o.ls, o.J), "CVodeSetLinearSolver");
  check(ctx, CVodeSetJacFn(o.mem, jacobian), "CVodeSetJacFn");
  check(ctx, CVodeSetMaxNumSteps(o.mem, static_cast<long>(st.max_steps)), "CVodeSetMaxNumSteps");
  if (st.first_step > 0.0) check(ctx, CVodeSetInitStep(o.mem, st.first_step), "CVodeSetInitStep");
  if (st.max_step > 0.0) check(ctx, CVodeSetMaxStep(o.mem, st.max_step), "CVodeSetMaxStep");
  if (st.min_step > 0.0) check(ctx, CVodeSetMinStep(o.mem, st.min_step), "CVodeSetMinStep");
}

void collect(void* mem, Stats& s) {
  long v = 0;
  if (CVodeGetNumSteps(mem, &v) >= 0) s.steps = v;
  if (CVodeGetNumRhsEvals(mem, &v) >= 0) s.rhs_evaluations = v;
  if (CVodeGetNumErrTestFails(mem, &v) >= 0) s.error_test_failures = v;
  if (CVodeGetNumNonlinSolvIters(mem, &v) >= 0) s.nonlinear_iterations = v;
  if (CVodeGetNumLinSolvSetups(mem, &v) >= 0) s.linear_setups = v;
  if (CVodeGetNumJacEvals(mem, &v) >= 0) s.jacobian_evaluations = v;
}

void fail(Stats& s, const Context& ctx, int flag, double t) {
  s.success = false;
  s.flag = flag_name(flag);
  std::ostringstream os;
  os.precision(16);
  os << "CVODES stopped at t = " << t << " with " << s.flag;
  if (!ctx.last_error.empty()) os << ": " << ctx.last_error;
  if (flag == CV_TOO_MUCH_WORK) os << "; raise integrator.max_steps";
  s.message = os.str();
}

}  // namespace

Settings settings_from(const IntegratorOptions& options, std::size_t n) {
  Settings s;
  s.rtol = options.rtol;
  s.atol = options.atol_per_state.empty() ? std::vector<double>(n, options.atol)
                                          : options.atol_per_state;
  s.max_steps = options.max_steps;
  s.first_step = options.dt;
  s.max_step = options.dt_max;
  s.min_step = options.dt_min;
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

Stats forward_sensitivities(
    const System& sys, const Settings& settings, double t0, std::vector<double>& y,
    std::size_t ns, std::vector<double>& S, std::span<const double> stops,
    const std::function<void(std::size_t, double, const double*, const double*)>& at_stop) {
  COSTATE_CHECK(sys.sensitivity_rhs, "CVODES backend: the system needs sensitivity_rhs");
  COSTATE_CHECK(ns >= 1 && S.size() == sys.n * ns,
                "CVODES backend: S must hold n × ns = " << sys.n * ns << " values");
  const std::size_t n = sys.n;
  Objects o;
  Context ctx;
  setup_forward(o, ctx, sys, settings, t0, y.data());
  ctx.yS.resize(ns);
  ctx.ySdot.resize(ns);
  o.ns = static_cast<int>(ns);
  o.yS = N_VCloneVectorArray(o.ns, o.y);
  COSTATE_CHECK(o.yS != nullptr, "CVODES backend: N_VCloneVectorArray failed");
  for (std::size_t d = 0; d < ns; ++d) std::copy(&S[d * n], &S[d * n] + n, data(o.yS[d]));
  check(ctx, CVodeSensInit(o.mem, o.ns, CV_SIMULTANEOUS, sensitivity_rhs, o.yS), "CVodeSensInit");
  check(ctx, CVodeSensEEtolerances(o.mem), "CVodeSensEEtolerances");
  check(ctx, CVodeSetSensErrCon(o.mem, SUNTRUE), "CVodeSetSensErrCon");
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
      check(ctx, CVodeGetSens(o.mem, &t, o.yS), "CVodeGetSens");
      for (std::size_t d = 0; d < ns; ++d) std::copy(data(o.yS[d]), data(o.yS[d]) + n, &S[d * n]);
    }
    at_stop(k, stops[k], data(o.y), S.data());
  }
  std::copy(data(o.y), data(o.y) + n, y.begin());
  collect(o.mem, s);
  return s;
}

void adjoint(const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
             const std::vector<double>& y0, std::span<const double> stops,
             const std::function<void(std::size_t, double, const double*, double*)>& jump,
             std::vector<double>& lambda, std::vector<double>& mu, Stats& forward,
             Stats& backward) {
  COSTATE_CHECK(sys.vjp, "CVODES backend: the adjoint needs the system's vjp");
  COSTATE_CHECK(!stops.empty() && stops.front() >= t0,
                "CVODES backend: the adjoint needs stops in [t0, t1]");
  adj.validate();
  // CVODES' polynomial interpolation fits the method's order (up to 5 for
  // BDF, 12 for Adams) through the points stored in one checkpoint interval:
  // fewer steps per interval read outside the stored data (a crash, not an
  // error, in SUNDIALS 6.4).
  const int min_steps = sys.bdf ? 6 : 13;
  COSTATE_CHECK(adj.interpolation == CvodesInterpolation::Hermite || adj.steps >= min_steps,
                "sensitivity.checkpoint_steps = "
                    << adj.steps << " is too small for interpolation: polynomial with "
                    << (sys.bdf ? "cvodes_bdf" : "cvodes_adams") << "; use at least " << min_steps
                    << " steps between checkpoints, or interpolation: hermite");
  const std::size_t n = sys.n, np = sys.np;
  Objects o;
  Context ctx;
  setup_forward(o, ctx, sys, settings, t0, y0.data());
  check(ctx,
        CVodeAdjInit(o.mem, adj.steps,
                     adj.interpolation == CvodesInterpolation::Hermite ? CV_HERMITE : CV_POLYNOMIAL),
        "CVodeAdjInit");

  // 1. Forward, landing on every stop; the λ jumps from the state there.
  const std::size_t K = stops.size();
  std::vector<double> jumps(K * n, 0.0);
  forward = Stats{};
  forward.final_time = t0;
  double t = t0;
  int ncheck = 0;
  // Stop time only at t1: CVodeB recomputes checkpoint intervals without
  // stop times, so a step shortened to land on an observation would not be
  // retraced (CVODES then reads past its stored data). Observations take
  // CVODES' interpolant at t_k; the last interval's data is kept by CVodeF.
  for (std::size_t k = 0; k < K; ++k) {
    if (stops[k] > t0) {
      const int flag = CVodeF(o.mem, stops[k], o.y, &t, CV_NORMAL, &ncheck);
      if (ctx.error) std::rethrow_exception(ctx.error);
      forward.final_time = t;
      if (flag < 0) {
        fail(forward, ctx, flag, t);
        collect(o.mem, forward);
        COSTATE_CHECK(false, "gradient (cvodes_adjoint): the forward integration failed: "
                                 << forward.message);
      }
    }
    jump(k, stops[k], data(o.y), &jumps[k * n]);
  }
  collect(o.mem, forward);
  forward.checkpoints = ncheck;

  // 2. Backward from t1: λ(t1) = jump at t1 (∂g/∂y, λ_z = 1, ∂ℓ/∂y), μ(t1) = 0.
  const double t1 = stops.back();
  const double rtolB = adj.rtol > 0.0 ? adj.rtol : settings.rtol;
  double atolB = adj.atol;
  if (atolB <= 0.0) {
    atolB = std::numeric_limits<double>::infinity();
    for (double a : settings.atol) atolB = std::min(atolB, a);
  }
  o.yB = new_vector(n, o.sunctx, &jumps[(K - 1) * n]);
  o.qB = new_vector(np, o.sunctx);
  int which = -1;
  check(ctx, CVodeCreateB(o.mem, sys.bdf ? CV_BDF : CV_ADAMS, &which), "CVodeCreateB");
  check(ctx, CVodeInitB(o.mem, which, rhs_backward, t1, o.yB), "CVodeInitB");
  check(ctx, CVodeSStolerancesB(o.mem, which, rtolB, atolB), "CVodeSStolerancesB");
  check(ctx, CVodeSetUserDataB(o.mem, which, &ctx), "CVodeSetUserDataB");
  check(ctx, CVodeSetMaxNumStepsB(o.mem, which, static_cast<long>(settings.max_steps)),
        "CVodeSetMaxNumStepsB");
  o.JB = SUNDenseMatrix(static_cast<sunindextype>(n), static_cast<sunindextype>(n), o.sunctx);
  o.lsB = SUNLinSol_Dense(o.yB, o.JB, o.sunctx);
  COSTATE_CHECK(o.JB && o.lsB, "CVODES backend: dense matrix/solver creation failed");
  check(ctx, CVodeSetLinearSolverB(o.mem, which, o.lsB, o.JB), "CVodeSetLinearSolverB");
  check(ctx, CVodeSetJacFnB(o.mem, which, jacobian_backward), "CVodeSetJacFnB");
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
    backward.steps += leg.steps;
    backward.rhs_evaluations += leg.rhs_evaluations;
    backward.jacobian_evaluations += leg.jacobian_evaluations;
    backward.error_test_failures += leg.error_test_failures;
    backward.nonlinear_iterations += leg.nonlinear_iterations;
    backward.linear_setups += leg.linear_setups;
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
  if (stops.front() > t0) run_back(t0);
  lambda.assign(data(o.yB), data(o.yB) + n);
  mu.assign(np, 0.0);
  if (np > 0) std::copy(data(o.qB), data(o.qB) + np, mu.begin());
  backward.final_time = t0;
}

}  // namespace cvodes
}  // namespace costate::ode
