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

namespace costate::ode::idas {
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

/// Frees the SUNDIALS objects however the run ends.
struct Objects {
  SUNContext sunctx = nullptr;
  N_Vector y = nullptr, yp = nullptr, atol = nullptr, id = nullptr;
  N_Vector *yS = nullptr, *ypS = nullptr;
  int ns = 0;
  SUNMatrix J = nullptr;
  SUNLinearSolver ls = nullptr;
  void* mem = nullptr;
  Objects() {
    COSTATE_CHECK(SUNContext_Create(nullptr, &sunctx) >= 0, "IDAS backend: SUNContext_Create failed");
  }
  ~Objects() {
    if (mem) IDAFree(&mem);
    if (ls) SUNLinSolFree(ls);
    if (J) SUNMatDestroy(J);
    if (ypS) N_VDestroyVectorArray(ypS, ns);
    if (yS) N_VDestroyVectorArray(yS, ns);
    for (N_Vector v : {id, atol, yp, y})
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

}  // namespace costate::ode::idas
