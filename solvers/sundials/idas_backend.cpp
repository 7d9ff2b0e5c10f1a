// The SUNDIALS IDAS backend of ode::integrate and ode::gradient
// (include/costate/ode/idas.hpp): the residual M y' − F(t, y, p), its Newton
// matrix c M − F_y, consistent initial values (IDACalcIC) and forward
// sensitivities (IDASensInit), every derivative from the type-erased
// callbacks of cvodes::System that costate's AD fills (cvodes::Binding).
// The callback context, exception guard, vector creation and error handler
// are CVODES' (cvodes_internal.hpp); the IDAS calls are here.
#include <idas/idas.h>
#include <idas/idas_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/idas.hpp"
#include "sundials/cvodes_internal.hpp"

namespace costate::ode {

void IdasAdjoint::validate() const {
  COSTATE_CHECK(steps >= 1, "sensitivity.checkpoint_steps = "
                                << steps << " is invalid: IDAS needs >= 1 steps between checkpoints");
  COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0,
                "sensitivity.adjoint_rtol = " << costate::detail::format_value(rtol)
                                              << " must be >= 0 (0: integrator.rtol)");
  COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                "sensitivity.adjoint_atol = " << costate::detail::format_value(atol)
                                              << " must be >= 0 (0: the smallest integrator.atol)");
}

namespace idas {
namespace {

using cvodes::internal::Context;
using cvodes::internal::data;
using cvodes::internal::error_handler;
using cvodes::internal::guarded;
using cvodes::internal::new_vector;

/// CVODES' callback context plus the mass matrix's mask.
struct DaeContext {
  Context c;
  const std::uint8_t* algebraic = nullptr;
  std::size_t n = 0;
  double mass(std::size_t i) const { return algebraic[i] ? 0.0 : 1.0; }
};

// R(t, y, y') = M y' − F(t, y).
int residual(realtype t, N_Vector yy, N_Vector yp, N_Vector rr, void* user) {
  auto* x = static_cast<DaeContext*>(user);
  const int r = guarded(&x->c, [&] { x->c.sys->rhs(t, data(yy), data(rr)); });
  if (r != 0) return r;
  double* R = data(rr);
  const double* Yp = data(yp);
  for (std::size_t i = 0; i < x->n; ++i) {
    if (!std::isfinite(R[i])) return 1;  // recoverable: IDAS retries a smaller step
    R[i] = x->mass(i) * Yp[i] - R[i];
  }
  return 0;
}

// ∂R/∂y + c ∂R/∂y' = c M − F_y, column-major into the dense matrix.
int jacobian(realtype t, realtype cj, N_Vector yy, N_Vector, N_Vector, SUNMatrix J, void* user,
             N_Vector, N_Vector, N_Vector) {
  auto* x = static_cast<DaeContext*>(user);
  return guarded(&x->c, [&] {
    double* a = SUNDenseMatrix_Data(J);
    const std::size_t n = x->n;
    x->c.sys->jacobian(t, data(yy), a);
    for (std::size_t k = 0; k < n * n; ++k) a[k] = -a[k];
    for (std::size_t i = 0; i < n; ++i) a[i * n + i] += cj * x->mass(i);
  });
}

// R_j = M s_j' − (F_y s_j + F_p e_j).
int sensitivity_residual(int ns, realtype t, N_Vector yy, N_Vector, N_Vector, N_Vector* yS,
                         N_Vector* ypS, N_Vector* rS, void* user, N_Vector, N_Vector, N_Vector) {
  auto* x = static_cast<DaeContext*>(user);
  Context& c = x->c;
  for (int j = 0; j < ns; ++j) {
    c.yS[static_cast<std::size_t>(j)] = data(yS[j]);
    c.ySdot[static_cast<std::size_t>(j)] = data(rS[j]);
  }
  const int r = guarded(&c, [&] {
    c.sys->sensitivity_rhs(t, data(yy), static_cast<std::size_t>(ns), c.yS.data(), c.ySdot.data());
  });
  if (r != 0) return r;
  for (int j = 0; j < ns; ++j) {
    double* R = data(rS[j]);
    const double* Sp = data(ypS[j]);
    for (std::size_t i = 0; i < x->n; ++i) R[i] = x->mass(i) * Sp[i] - R[i];
  }
  return 0;
}

// The adjoint DAE  M λ' + F_yᵀ λ = 0  (the running cost is the augmented
// state's last row, so its λ_z = 1 carries q_yᵀ): R_B = M λ' + F_yᵀ λ.
int residual_backward(realtype t, N_Vector yy, N_Vector, N_Vector yB, N_Vector ypB, N_Vector rB,
                      void* user) {
  auto* x = static_cast<DaeContext*>(user);
  const int r = guarded(&x->c, [&] {
    x->c.sys->vjp(t, data(yy), data(yB), data(rB), x->c.fp.data());
  });
  if (r != 0) return r;
  double* R = data(rB);
  const double* Lp = data(ypB);
  for (std::size_t i = 0; i < x->n; ++i) R[i] += x->mass(i) * Lp[i];
  return 0;
}

// μ' = −F_pᵀ λ backward, so μ(t0) = ∫ F_pᵀ λ dt.
int quadrature_backward(realtype t, N_Vector yy, N_Vector, N_Vector yB, N_Vector, N_Vector qdot,
                        void* user) {
  auto* x = static_cast<DaeContext*>(user);
  const int r = guarded(&x->c, [&] {
    x->c.sys->vjp(t, data(yy), data(yB), x->c.jac.data(), data(qdot));
  });
  double* d = data(qdot);
  for (std::size_t j = 0; j < x->c.sys->np; ++j) d[j] = -d[j];
  return r;
}

// ∂R_B/∂λ + c ∂R_B/∂λ' = F_yᵀ + c M.
int jacobian_backward(realtype t, realtype cj, N_Vector yy, N_Vector, N_Vector, N_Vector, N_Vector,
                      SUNMatrix JB, void* user, N_Vector, N_Vector, N_Vector) {
  auto* x = static_cast<DaeContext*>(user);
  return guarded(&x->c, [&] {
    const std::size_t n = x->n;
    std::vector<double>& a = x->c.jac;
    x->c.sys->jacobian(t, data(yy), a.data());
    double* b = SUNDenseMatrix_Data(JB);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < n; ++i) b[j * n + i] = a[i * n + j];
    for (std::size_t i = 0; i < n; ++i) b[i * n + i] += cj * x->mass(i);
  });
}

/// Frees the SUNDIALS objects however the run ends.
struct Objects {
  SUNContext sunctx = nullptr;
  N_Vector y = nullptr, yp = nullptr, atol = nullptr, id = nullptr;
  N_Vector yB = nullptr, ypB = nullptr, qB = nullptr;
  N_Vector *yS = nullptr, *ypS = nullptr;
  int ns = 0;
  SUNMatrix J = nullptr, JB = nullptr;
  SUNLinearSolver ls = nullptr, lsB = nullptr;
  void* mem = nullptr;
  Objects() {
    COSTATE_CHECK(SUNContext_Create(nullptr, &sunctx) >= 0, "IDAS backend: SUNContext_Create failed");
  }
  ~Objects() {
    if (mem) IDAFree(&mem);
    if (lsB) SUNLinSolFree(lsB);
    if (ls) SUNLinSolFree(ls);
    if (JB) SUNMatDestroy(JB);
    if (J) SUNMatDestroy(J);
    if (ypS) N_VDestroyVectorArray(ypS, ns);
    if (yS) N_VDestroyVectorArray(yS, ns);
    for (N_Vector v : {qB, ypB, yB, id, atol, yp, y})
      if (v) N_VDestroy(v);
    if (sunctx) SUNContext_Free(&sunctx);
  }
};

std::string ida_flag_name(int flag) {
  char* name = IDAGetReturnFlagName(flag);
  std::string s = name ? name : "?";
  std::free(name);
  return s;
}

void ida_check(const Context& ctx, int flag, const char* call) {
  COSTATE_CHECK(flag >= 0, "IDAS backend: " << call << " failed: " << ida_flag_name(flag)
                                            << (ctx.last_error.empty() ? "" : " — ")
                                            << ctx.last_error);
}

bool any_algebraic(const Dae& dae) {
  return std::any_of(dae.algebraic.begin(), dae.algebraic.end(), [](std::uint8_t a) { return a; });
}

/// IDACreate, init (y'(t0): f on the differential rows, 0 as the algebraic
/// rows' guess), tolerances, the id vector, the dense Newton solver, limits.
void setup(Objects& o, DaeContext& x, const Dae& dae, const cvodes::Settings& st, double t0,
           const double* y0) {
  const cvodes::System& sys = *dae.system;
  const std::size_t n = sys.n;
  COSTATE_CHECK(sys.rhs && sys.jacobian, "IDAS backend: the system needs rhs and jacobian");
  COSTATE_CHECK(dae.algebraic.size() == n,
                "IDAS backend: " << dae.algebraic.size() << " mask entries for " << n << " states");
  COSTATE_CHECK(st.atol.size() == n,
                "IDAS backend: " << st.atol.size() << " absolute tolerances for " << n << " states");
  COSTATE_CHECK(st.linear_solver == CvodesLinearSolver::Dense ||
                    st.linear_solver == CvodesLinearSolver::Automatic,
                "integrator.method = idas: only the dense linear solver is bound (got "
                "integrator.cvodes_linear_solver = "
                    << to_string(st.linear_solver) << ")");
  x.c.sys = &sys;
  x.c.jac.assign(n * n, 0.0);
  x.c.fp.assign(std::max<std::size_t>(sys.np, 1), 0.0);
  x.algebraic = dae.algebraic.data();
  x.n = n;
  o.y = new_vector(n, o.sunctx, y0);
  o.yp = new_vector(n, o.sunctx);
  sys.rhs(t0, y0, data(o.yp));
  o.id = new_vector(n, o.sunctx);
  for (std::size_t i = 0; i < n; ++i) {
    data(o.id)[i] = x.mass(i);
    if (dae.algebraic[i]) data(o.yp)[i] = 0.0;
  }
  o.atol = new_vector(n, o.sunctx, st.atol.data());
  o.mem = IDACreate(o.sunctx);
  COSTATE_CHECK(o.mem != nullptr, "IDAS backend: IDACreate failed");
  ida_check(x.c, IDASetErrHandlerFn(o.mem, error_handler, &x.c), "IDASetErrHandlerFn");
  ida_check(x.c, IDAInit(o.mem, residual, t0, o.y, o.yp), "IDAInit");
  ida_check(x.c, IDASetUserData(o.mem, &x), "IDASetUserData");
  ida_check(x.c, IDASVtolerances(o.mem, st.rtol, o.atol), "IDASVtolerances");
  ida_check(x.c, IDASetId(o.mem, o.id), "IDASetId");
  o.J = SUNDenseMatrix(static_cast<sunindextype>(n), static_cast<sunindextype>(n), o.sunctx);
  COSTATE_CHECK(o.J != nullptr, "IDAS backend: SUNDenseMatrix failed");
  o.ls = SUNLinSol_Dense(o.y, o.J, o.sunctx);
  COSTATE_CHECK(o.ls != nullptr, "IDAS backend: SUNLinSol_Dense failed");
  ida_check(x.c, IDASetLinearSolver(o.mem, o.ls, o.J), "IDASetLinearSolver");
  ida_check(x.c, IDASetJacFn(o.mem, jacobian), "IDASetJacFn");
  ida_check(x.c, IDASetMaxNumSteps(o.mem, static_cast<long>(st.max_steps)), "IDASetMaxNumSteps");
  if (st.first_step > 0.0) ida_check(x.c, IDASetInitStep(o.mem, st.first_step), "IDASetInitStep");
  if (st.max_step > 0.0) ida_check(x.c, IDASetMaxStep(o.mem, st.max_step), "IDASetMaxStep");
  if (st.min_step > 0.0) ida_check(x.c, IDASetMinStep(o.mem, st.min_step), "IDASetMinStep");
}

/// Consistent initial values (IDA_YA_YDP_INIT: the algebraic y and the
/// differential y' from the differential y), and the sensitivities' when
/// they are initialised. A failure throws, naming the constraint with the
/// largest residual at the given initial values.
void consistent_start(Objects& o, DaeContext& x, const Dae& dae, double t0, double tout1,
                      std::vector<double>& y, InitialCorrection* correction) {
  InitialCorrection c;
  c.algebraic = any_algebraic(dae);
  if (c.algebraic) {
    const int flag = IDACalcIC(o.mem, IDA_YA_YDP_INIT, tout1);
    if (x.c.error) std::rethrow_exception(x.c.error);
    if (flag < 0) {
      std::vector<double> F(x.n);
      dae.system->rhs(t0, y.data(), F.data());
      std::size_t worst = x.n;
      for (std::size_t i = 0; i < x.n; ++i)
        if (dae.algebraic[i] && (worst == x.n || !(std::abs(F[i]) <= std::abs(F[worst]))))
          worst = i;
      std::ostringstream os;
      os.precision(16);
      os << "integrator.method = idas: the initial values could not be made consistent "
            "(IDACalcIC: "
         << ida_flag_name(flag) << (x.c.last_error.empty() ? "" : " — ") << x.c.last_error
         << "); at the given initial values the largest constraint residual is algebraic "
            "equation "
         << worst << " (state " << worst << "): " << F[worst]
         << ". Give algebraic initial values near a solution of the constraints";
      throw Error(os.str());
    }
    ida_check(x.c, IDAGetConsistentIC(o.mem, o.y, o.yp), "IDAGetConsistentIC");
    const double* yc = data(o.y);
    for (std::size_t i = 0; i < x.n; ++i) {
      const double d = std::abs(yc[i] - y[i]);
      if (d > c.max_change) {
        c.max_change = d;
        c.state = i;
      }
      if (d > 100.0 * std::numeric_limits<double>::epsilon() * (1.0 + std::abs(y[i]))) ++c.changed;
    }
    std::copy(yc, yc + x.n, y.begin());
    if (o.ns > 0) ida_check(x.c, IDAGetSensConsistentIC(o.mem, o.yS, o.ypS), "IDAGetSensConsistentIC");
  }
  if (correction) *correction = c;
}

void collect(void* mem, cvodes::Stats& s) {
  long v = 0;
  if (IDAGetNumSteps(mem, &v) >= 0) s.steps = v;
  if (IDAGetNumResEvals(mem, &v) >= 0) s.rhs_evaluations = v;
  if (IDAGetNumErrTestFails(mem, &v) >= 0) s.error_test_failures = v;
  if (IDAGetNumNonlinSolvIters(mem, &v) >= 0) s.nonlinear_iterations = v;
  if (IDAGetNumLinSolvSetups(mem, &v) >= 0) s.linear_setups = v;
  if (IDAGetNumJacEvals(mem, &v) >= 0) s.jacobian_evaluations = v;
}

void ida_fail(cvodes::Stats& s, const Context& ctx, int flag, double t) {
  s.success = false;
  s.flag = ida_flag_name(flag);
  std::ostringstream os;
  os.precision(16);
  os << "IDAS stopped at t = " << t << " with " << s.flag;
  if (!ctx.last_error.empty()) os << ": " << ctx.last_error;
  if (flag == IDA_TOO_MUCH_WORK) os << "; raise integrator.max_steps";
  s.message = os.str();
}

}  // namespace

std::string InitialCorrection::report() const {
  if (!algebraic || changed == 0) return "";
  std::ostringstream os;
  os.precision(6);
  os << "IDACalcIC made the initial values consistent: " << changed
     << " algebraic value(s) changed, the most state " << state << " by " << max_change;
  return os.str();
}

cvodes::Stats integrate(const Dae& dae, const cvodes::Settings& settings, double t0, double t1,
                        std::vector<double>& y, std::span<const double> outputs,
                        bool stop_at_outputs,
                        const std::function<void(std::size_t, double, const double*)>& out,
                        InitialCorrection* correction) {
  Objects o;
  DaeContext x;
  setup(o, x, dae, settings, t0, y.data());
  const double tout1 = outputs.empty() || outputs.back() <= t0 ? t1 : outputs.back();
  consistent_start(o, x, dae, t0, std::min(tout1, t1), y, correction);
  cvodes::Stats s;
  s.final_time = t0;
  double t = t0;
  std::size_t j = 0;
  while (j < outputs.size() && outputs[j] <= t0) out(j++, t0, y.data());
  ida_check(x.c, IDASetStopTime(o.mem, t1), "IDASetStopTime");
  for (; j < outputs.size(); ++j) {
    if (stop_at_outputs) ida_check(x.c, IDASetStopTime(o.mem, outputs[j]), "IDASetStopTime");
    const int flag = IDASolve(o.mem, outputs[j], &t, o.y, o.yp, IDA_NORMAL);
    if (x.c.error) std::rethrow_exception(x.c.error);
    s.final_time = t;
    if (flag < 0) {
      ida_fail(s, x.c, flag, t);
      break;
    }
    out(j, outputs[j], data(o.y));
    if (!stop_at_outputs) ida_check(x.c, IDASetStopTime(o.mem, t1), "IDASetStopTime");
  }
  std::copy(data(o.y), data(o.y) + dae.system->n, y.begin());
  collect(o.mem, s);
  return s;
}

cvodes::Stats forward_sensitivities(
    const Dae& dae, const cvodes::Settings& settings, double t0, std::vector<double>& y,
    std::size_t ns, std::vector<double>& S, std::span<const double> stops,
    const std::function<void(std::size_t, double, const double*, const double*)>& at_stop,
    InitialCorrection* correction) {
  const cvodes::System& sys = *dae.system;
  const std::size_t n = sys.n;
  COSTATE_CHECK(sys.sensitivity_rhs, "IDAS backend: the system needs sensitivity_rhs");
  COSTATE_CHECK(ns >= 1 && S.size() == n * ns,
                "IDAS backend: S must hold n × ns = " << n * ns << " values");
  COSTATE_CHECK(!stops.empty() && stops.front() >= t0, "IDAS backend: stops must lie in [t0, t1]");
  Objects o;
  DaeContext x;
  setup(o, x, dae, settings, t0, y.data());
  x.c.yS.resize(ns);
  x.c.ySdot.resize(ns);
  o.ns = static_cast<int>(ns);
  o.yS = N_VCloneVectorArray(o.ns, o.y);
  o.ypS = N_VCloneVectorArray(o.ns, o.y);
  COSTATE_CHECK(o.yS != nullptr && o.ypS != nullptr, "IDAS backend: N_VCloneVectorArray failed");
  // s_j(t0) given; s_j'(t0) = F_y s_j + F_p e_j on the differential rows
  // (the algebraic rows' 0 a guess that IDACalcIC replaces).
  for (std::size_t d = 0; d < ns; ++d) {
    std::copy(&S[d * n], &S[d * n] + n, data(o.yS[d]));
    x.c.yS[d] = data(o.yS[d]);
    x.c.ySdot[d] = data(o.ypS[d]);
  }
  sys.sensitivity_rhs(t0, y.data(), ns, x.c.yS.data(), x.c.ySdot.data());
  for (std::size_t d = 0; d < ns; ++d)
    for (std::size_t i = 0; i < n; ++i) data(o.ypS[d])[i] *= x.mass(i);
  ida_check(x.c, IDASensInit(o.mem, o.ns, IDA_SIMULTANEOUS, sensitivity_residual, o.yS, o.ypS),
        "IDASensInit");
  ida_check(x.c, IDASensEEtolerances(o.mem), "IDASensEEtolerances");
  ida_check(x.c, IDASetSensErrCon(o.mem, SUNTRUE), "IDASetSensErrCon");
  consistent_start(o, x, dae, t0, stops.back() > t0 ? stops.back() : t0 + 1.0, y, correction);
  for (std::size_t d = 0; d < ns; ++d) std::copy(data(o.yS[d]), data(o.yS[d]) + n, &S[d * n]);
  cvodes::Stats s;
  s.final_time = t0;
  double t = t0;
  for (std::size_t k = 0; k < stops.size(); ++k) {
    if (stops[k] > t) {
      ida_check(x.c, IDASetStopTime(o.mem, stops[k]), "IDASetStopTime");
      const int flag = IDASolve(o.mem, stops[k], &t, o.y, o.yp, IDA_NORMAL);
      if (x.c.error) std::rethrow_exception(x.c.error);
      s.final_time = t;
      if (flag < 0) {
        ida_fail(s, x.c, flag, t);
        break;
      }
      ida_check(x.c, IDAGetSens(o.mem, &t, o.yS), "IDAGetSens");
      for (std::size_t d = 0; d < ns; ++d) std::copy(data(o.yS[d]), data(o.yS[d]) + n, &S[d * n]);
    }
    at_stop(k, stops[k], data(o.y), S.data());
  }
  std::copy(data(o.y), data(o.y) + n, y.begin());
  collect(o.mem, s);
  return s;
}

void adjoint(const Dae& dae, const cvodes::Settings& settings, const IdasAdjoint& adj, double t0,
             std::vector<double>& y0, std::span<const double> stops,
             const std::function<void(std::size_t, double, const double*, double*)>& jump,
             std::vector<double>& lambda, std::vector<double>& mu, cvodes::Stats& forward,
             cvodes::Stats& backward, InitialCorrection* correction) {
  const cvodes::System& sys = *dae.system;
  COSTATE_CHECK(sys.vjp, "IDAS backend: the adjoint needs the system's vjp");
  COSTATE_CHECK(!stops.empty() && stops.front() >= t0 && stops.back() > t0,
                "IDAS backend: the adjoint needs stops in [t0, t1] ending after t0");
  adj.validate();
  const std::size_t n = sys.n, np = sys.np, K = stops.size();
  Objects o;
  DaeContext x;
  setup(o, x, dae, settings, t0, y0.data());
  ida_check(x.c, IDAAdjInit(o.mem, adj.steps, IDA_HERMITE), "IDAAdjInit");
  consistent_start(o, x, dae, t0, stops.back(), y0, correction);

  // 1. Forward to every stop (stop time t1 only: IDASolveB recomputes
  //    checkpoint intervals without stop times, so observations take IDAS'
  //    interpolant), keeping y, y' there and the λ jumps.
  std::vector<double> jumps(K * n, 0.0), ys(K * n), yps(K * n);
  forward = cvodes::Stats{};
  forward.final_time = t0;
  double t = t0;
  int ncheck = 0;
  ida_check(x.c, IDASetStopTime(o.mem, stops.back()), "IDASetStopTime");
  for (std::size_t k = 0; k < K; ++k) {
    if (stops[k] > t0) {
      const int flag = IDASolveF(o.mem, stops[k], &t, o.y, o.yp, IDA_NORMAL, &ncheck);
      if (x.c.error) std::rethrow_exception(x.c.error);
      forward.final_time = t;
      if (flag < 0) {
        ida_fail(forward, x.c, flag, t);
        collect(o.mem, forward);
        COSTATE_CHECK(false, "gradient (idas_adjoint): the forward integration failed: "
                                 << forward.message);
      }
    }
    std::copy(data(o.y), data(o.y) + n, &ys[k * n]);
    std::copy(data(o.yp), data(o.yp) + n, &yps[k * n]);
    jump(k, stops[k], &ys[k * n], &jumps[k * n]);
  }
  collect(o.mem, forward);
  forward.checkpoints = ncheck;

  // 2. Backward from t1: λ's differential part the jump there, its
  //    algebraic part and λ' made consistent by IDACalcICB; μ(t1) = 0.
  const double rtolB = adj.rtol > 0.0 ? adj.rtol : settings.rtol;
  double atolB = adj.atol;
  if (atolB <= 0.0) {
    atolB = std::numeric_limits<double>::infinity();
    for (double a : settings.atol) atolB = std::min(atolB, a);
  }
  o.yB = new_vector(n, o.sunctx, &jumps[(K - 1) * n]);
  o.ypB = new_vector(n, o.sunctx);
  o.qB = new_vector(np, o.sunctx);
  N_Vector yk = new_vector(n, o.sunctx), ypk = new_vector(n, o.sunctx);
  struct Free {
    N_Vector a, b;
    ~Free() {
      N_VDestroy(a);
      N_VDestroy(b);
    }
  } free_k{yk, ypk};
  const bool algebraic = any_algebraic(dae);
  int which = -1;
  ida_check(x.c, IDACreateB(o.mem, &which), "IDACreateB");
  ida_check(x.c, IDAInitB(o.mem, which, residual_backward, stops.back(), o.yB, o.ypB), "IDAInitB");
  ida_check(x.c, IDASStolerancesB(o.mem, which, rtolB, atolB), "IDASStolerancesB");
  ida_check(x.c, IDASetUserDataB(o.mem, which, &x), "IDASetUserDataB");
  ida_check(x.c, IDASetIdB(o.mem, which, o.id), "IDASetIdB");
  ida_check(x.c, IDASetMaxNumStepsB(o.mem, which, static_cast<long>(settings.max_steps)),
            "IDASetMaxNumStepsB");
  o.JB = SUNDenseMatrix(static_cast<sunindextype>(n), static_cast<sunindextype>(n), o.sunctx);
  COSTATE_CHECK(o.JB != nullptr, "IDAS backend: SUNDenseMatrix failed");
  o.lsB = SUNLinSol_Dense(o.yB, o.JB, o.sunctx);
  COSTATE_CHECK(o.lsB != nullptr, "IDAS backend: SUNLinSol_Dense failed");
  ida_check(x.c, IDASetLinearSolverB(o.mem, which, o.lsB, o.JB), "IDASetLinearSolverB");
  ida_check(x.c, IDASetJacFnB(o.mem, which, jacobian_backward), "IDASetJacFnB");
  if (np > 0) {
    ida_check(x.c, IDAQuadInitB(o.mem, which, quadrature_backward, o.qB), "IDAQuadInitB");
    ida_check(x.c, IDAQuadSStolerancesB(o.mem, which, rtolB, atolB),
              "IDAQuadSStolerancesB");
    ida_check(x.c, IDASetQuadErrConB(o.mem, which, SUNTRUE), "IDASetQuadErrConB");
  }
  // λ' from the differential rows at (t_k, y_k): M λ' = −F_yᵀ λ there (the
  // guess IDACalcICB refines), and the consistent λ (algebraic part).
  auto consistent_backward = [&](std::size_t k, double t_next) {
    std::copy(&ys[k * n], &ys[k * n] + n, data(yk));
    std::copy(&yps[k * n], &yps[k * n] + n, data(ypk));
    sys.vjp(stops[k], &ys[k * n], data(o.yB), data(o.ypB), x.c.fp.data());
    for (std::size_t i = 0; i < n; ++i) data(o.ypB)[i] = dae.algebraic[i] ? 0.0 : -data(o.ypB)[i];
    ida_check(x.c, IDAReInitB(o.mem, which, stops[k], o.yB, o.ypB), "IDAReInitB");
    if (algebraic) {
      const int flag = IDACalcICB(o.mem, which, t_next, yk, ypk);
      if (x.c.error) std::rethrow_exception(x.c.error);
      ida_check(x.c, flag, "IDACalcICB");
      ida_check(x.c, IDAGetConsistentICB(o.mem, which, o.yB, o.ypB), "IDAGetConsistentICB");
    }
    // μ continues from its value (restarted with the backward problem).
    if (np > 0) ida_check(x.c, IDAQuadReInitB(o.mem, which, o.qB), "IDAQuadReInitB");
  };
  backward = cvodes::Stats{};
  auto add_leg = [&] {
    cvodes::Stats leg;
    collect(IDAGetAdjIDABmem(o.mem, which), leg);
    backward.steps += leg.steps;
    backward.rhs_evaluations += leg.rhs_evaluations;
    backward.jacobian_evaluations += leg.jacobian_evaluations;
    backward.error_test_failures += leg.error_test_failures;
    backward.nonlinear_iterations += leg.nonlinear_iterations;
    backward.linear_setups += leg.linear_setups;
  };
  auto run_back = [&](double t_to) {
    const int flag = IDASolveB(o.mem, t_to, IDA_NORMAL);
    if (x.c.error) std::rethrow_exception(x.c.error);
    if (flag < 0) {
      ida_fail(backward, x.c, flag, t_to);
      COSTATE_CHECK(false, "gradient (idas_adjoint): the backward integration failed: "
                               << backward.message);
    }
    double tret = 0.0;
    ida_check(x.c, IDAGetB(o.mem, which, &tret, o.yB, o.ypB), "IDAGetB");
    if (np > 0) ida_check(x.c, IDAGetQuadB(o.mem, which, &tret, o.qB), "IDAGetQuadB");
    add_leg();
  };
  // 3. Legs t1 → t_{K−2} → … → stops[0] (adding each stop's jump to λ's
  //    differential part and restarting consistently there), then to t0.
  auto next_below = [&](std::size_t k) { return k > 0 ? stops[k - 1] : t0; };
  consistent_backward(K - 1, next_below(K - 1) < stops[K - 1] ? next_below(K - 1) : t0);
  for (std::size_t k = K - 1; k-- > 0;) {
    if (stops[k] < stops[k + 1]) run_back(stops[k]);
    if (stops[k] <= t0) break;
    double* lb = data(o.yB);
    for (std::size_t i = 0; i < n; ++i) lb[i] += jumps[k * n + i];
    consistent_backward(k, next_below(k) < stops[k] ? next_below(k) : t0);
  }
  if (stops.front() > t0) run_back(t0);
  lambda.assign(data(o.yB), data(o.yB) + n);
  // A stop at t0 (an observation there): its jump joins λ(t0) directly.
  if (stops.front() <= t0)
    for (std::size_t i = 0; i < n; ++i) lambda[i] += jumps[i];
  mu.assign(np, 0.0);
  if (np > 0) std::copy(data(o.qB), data(o.qB) + np, mu.begin());
  backward.final_time = t0;
}

}  // namespace idas
}  // namespace costate::ode
