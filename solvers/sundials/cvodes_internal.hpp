#pragma once
// Private to solvers/sundials/: the pieces of the CVODES backend shared by
// cvodes_backend.cpp (integrate, forward sensitivities, adjoint) and
// cvodes_second_order.cpp (Hessian-vector products): the callback context,
// exception guard, forward callbacks, the RAII holder of the SUNDIALS
// objects, flag checks, vector creation, the forward setup and the counters.
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
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "cvodes_linear_solver.hpp"
#include "sundials/serial_vector.hpp"

namespace costate::ode::cvodes::internal {

struct Context {
  const System* sys = nullptr;
  std::exception_ptr error;  // a callback's exception, rethrown after CVODES returns
  std::string last_error;
  std::vector<double> jac, fp;  // scratch: n × n Jacobian (dense; else ≥ n), f_pᵀλ
  // The kinds of the forward and backward Newton matrices (jacobian,
  // jacobian_backward fill the matrix CVODES hands them accordingly).
  NewtonLinearSolver forward_ls{CvodesLinearSolver::Dense, JacobianSide::Forward};
  NewtonLinearSolver backward_ls{CvodesLinearSolver::Dense, JacobianSide::Backward};
  std::vector<const double*> yS;
  std::vector<double*> ySdot;
};

inline double* data(N_Vector v) { return N_VGetArrayPointer(v); }

template <class F>
inline int guarded(Context* c, F&& f) {
  try {
    f();
  } catch (...) {
    c->error = std::current_exception();
    return -1;
  }
  return 0;
}

inline int rhs(realtype t, N_Vector y, N_Vector ydot, void* user) {
  auto* c = static_cast<Context*>(user);
  const int r = guarded(c, [&] { c->sys->rhs(t, data(y), data(ydot)); });
  if (r != 0) return r;
  const double* d = data(ydot);
  for (std::size_t i = 0; i < c->sys->n; ++i)
    if (!std::isfinite(d[i])) return 1;  // recoverable: CVODES retries a smaller step
  return 0;
}

inline int jacobian(realtype t, N_Vector y, N_Vector, SUNMatrix J, void* user, N_Vector,
                    N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(user);
  // Dense: sys.jacobian straight into the column-major SUNDenseMatrix;
  // band/sparse: the compressed AD Jacobian on the structure.
  return guarded(c, [&] { fill_jacobian(c->forward_ls, J, *c->sys, t, data(y), c->jac); });
}

// A sparse (KLU) solver's Newton matrix I − γ f_y (newton_matrix): CVODES'
// linear-system function in place of jacobian + its copy and ScaleAddI.
inline int linear_system(realtype t, N_Vector y, N_Vector, SUNMatrix A, booleantype jok,
                         booleantype* jcur, realtype gamma, void* user, N_Vector, N_Vector,
                         N_Vector) {
  auto* c = static_cast<Context*>(user);
  *jcur = jok ? SUNFALSE : SUNTRUE;
  return guarded(c, [&] { newton_matrix(c->forward_ls, A, *c->sys, t, data(y), jok, gamma); });
}

inline int sensitivity_rhs(int ns, realtype t, N_Vector y, N_Vector, N_Vector* yS,
                           N_Vector* ySdot, void* user, N_Vector, N_Vector) {
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

inline void error_handler(int, const char* module, const char* function, char* msg,
                          void* user) {
  auto* c = static_cast<Context*>(user);
  c->last_error = std::string(module ? module : "") + "::" + (function ? function : "") + ": " +
                  (msg ? msg : "");
}

// Backward: λ' = −f_yᵀ λ.
inline int rhs_backward(realtype t, N_Vector y, N_Vector yB, N_Vector yBdot, void* user) {
  auto* c = static_cast<Context*>(user);
  const int r = guarded(c, [&] { c->sys->vjp(t, data(y), data(yB), data(yBdot), c->fp.data()); });
  double* d = data(yBdot);
  for (std::size_t i = 0; i < c->sys->n; ++i) d[i] = -d[i];
  return r;
}

// Backward quadrature: μ' = −f_pᵀ λ.
inline int quadrature_backward(realtype t, N_Vector y, N_Vector yB, N_Vector qBdot, void* user) {
  auto* c = static_cast<Context*>(user);
  const int r = guarded(c, [&] { c->sys->vjp(t, data(y), data(yB), c->jac.data(), data(qBdot)); });
  double* d = data(qBdot);
  for (std::size_t j = 0; j < c->sys->np; ++j) d[j] = -d[j];
  return r;
}

// ∂(λ')/∂λ = −f_yᵀ.
inline int jacobian_backward(realtype t, N_Vector y, N_Vector, N_Vector, SUNMatrix JB,
                             void* user, N_Vector, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(user);
  return guarded(c, [&] { fill_jacobian(c->backward_ls, JB, *c->sys, t, data(y), c->jac); });
}

// The backward problem's Newton matrix I − γ_B (−f_yᵀ) (newton_matrix).
inline int linear_system_backward(realtype t, N_Vector y, N_Vector, N_Vector, SUNMatrix AB,
                                  booleantype jok, booleantype* jcur, realtype gamma, void* user,
                                  N_Vector, N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(user);
  *jcur = jok ? SUNFALSE : SUNTRUE;
  return guarded(c, [&] { newton_matrix(c->backward_ls, AB, *c->sys, t, data(y), jok, gamma); });
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

inline std::string flag_name(int flag) {
  char* name = CVodeGetReturnFlagName(flag);
  std::string s = name ? name : "?";
  std::free(name);
  return s;
}

inline void check(const Context& ctx, int flag, const char* call) {
  COSTATE_CHECK(flag >= 0, "CVODES backend: " << call << " failed: " << flag_name(flag)
                                              << (ctx.last_error.empty() ? "" : " — ")
                                              << ctx.last_error);
}

inline N_Vector new_vector(std::size_t n, SUNContext ctx, const double* values = nullptr) {
  N_Vector v = costate::detail::new_serial_vector(std::max<std::size_t>(n, 1), ctx);
  if (values)
    std::copy(values, values + n, data(v));
  else
    N_VConst(0.0, v);
  return v;
}

/// The forward problem: CVodeCreate, init, tolerances, the Newton linear
/// solver of st.linear_solver (make_newton_linear_solver), limits.
inline void setup_forward(Objects& o, Context& ctx, const System& sys, const Settings& st,
                          double t0, const double* y0) {
  const std::size_t n = sys.n;
  COSTATE_CHECK(sys.rhs && sys.jacobian, "CVODES backend: the system needs rhs and jacobian");
  COSTATE_CHECK(st.atol.size() == n, "CVODES backend: " << st.atol.size()
                                                        << " absolute tolerances for " << n
                                                        << " states");
  ctx.sys = &sys;
  const bool dense = resolve_linear_solver(sys, st.linear_solver) == CvodesLinearSolver::Dense;
  ctx.jac.assign(dense ? n * n : n, 0.0);
  ctx.fp.assign(std::max<std::size_t>(sys.np, 1), 0.0);
  o.y = new_vector(n, o.sunctx, y0);
  o.atol = new_vector(n, o.sunctx, st.atol.data());
  o.mem = CVodeCreate(sys.bdf ? CV_BDF : CV_ADAMS, o.sunctx);
  COSTATE_CHECK(o.mem != nullptr, "CVODES backend: CVodeCreate failed");
  check(ctx, CVodeSetErrHandlerFn(o.mem, error_handler, &ctx), "CVodeSetErrHandlerFn");
  check(ctx, CVodeInit(o.mem, rhs, t0, o.y), "CVodeInit");
  check(ctx, CVodeSetUserData(o.mem, &ctx), "CVodeSetUserData");
  check(ctx, CVodeSVtolerances(o.mem, st.rtol, o.atol), "CVodeSVtolerances");
  ctx.forward_ls =
      make_newton_linear_solver(sys, st.linear_solver, JacobianSide::Forward, o.y, o.sunctx);
  o.J = ctx.forward_ls.matrix;  // freed by o
  o.ls = ctx.forward_ls.solver;
  check(ctx, CVodeSetLinearSolver(o.mem, o.ls, o.J), "CVodeSetLinearSolver");
  if (ctx.forward_ls.kind == CvodesLinearSolver::Sparse)
    check(ctx, CVodeSetLinSysFn(o.mem, linear_system), "CVodeSetLinSysFn");
  else
    check(ctx, CVodeSetJacFn(o.mem, jacobian), "CVodeSetJacFn");
  check(ctx, CVodeSetMaxNumSteps(o.mem, static_cast<long>(st.max_steps)), "CVodeSetMaxNumSteps");
  if (st.first_step > 0.0) check(ctx, CVodeSetInitStep(o.mem, st.first_step), "CVodeSetInitStep");
  if (st.max_step > 0.0) check(ctx, CVodeSetMaxStep(o.mem, st.max_step), "CVodeSetMaxStep");
  if (st.min_step > 0.0) check(ctx, CVodeSetMinStep(o.mem, st.min_step), "CVodeSetMinStep");
}

/// The backward problem `which`'s Newton linear solver (st.linear_solver on
/// −f_yᵀ: the transposed structure) and its Jacobian function
/// jacobian_backward; o.yB must exist.
inline void setup_backward_linear_solver(Objects& o, Context& ctx, const System& sys,
                                         const Settings& st, int which) {
  ctx.backward_ls =
      make_newton_linear_solver(sys, st.linear_solver, JacobianSide::Backward, o.yB, o.sunctx);
  o.JB = ctx.backward_ls.matrix;  // freed by o
  o.lsB = ctx.backward_ls.solver;
  check(ctx, CVodeSetLinearSolverB(o.mem, which, o.lsB, o.JB), "CVodeSetLinearSolverB");
  if (ctx.backward_ls.kind == CvodesLinearSolver::Sparse)
    check(ctx, CVodeSetLinSysFnB(o.mem, which, linear_system_backward), "CVodeSetLinSysFnB");
  else
    check(ctx, CVodeSetJacFnB(o.mem, which, jacobian_backward), "CVodeSetJacFnB");
}

inline void collect(void* mem, Stats& s) {
  long v = 0;
  if (CVodeGetNumSteps(mem, &v) >= 0) s.steps = v;
  if (CVodeGetNumRhsEvals(mem, &v) >= 0) s.rhs_evaluations = v;
  if (CVodeGetNumErrTestFails(mem, &v) >= 0) s.error_test_failures = v;
  if (CVodeGetNumNonlinSolvIters(mem, &v) >= 0) s.nonlinear_iterations = v;
  if (CVodeGetNumLinSolvSetups(mem, &v) >= 0) s.linear_setups = v;
  if (CVodeGetNumJacEvals(mem, &v) >= 0) s.jacobian_evaluations = v;
}

inline void fail(Stats& s, const Context& ctx, int flag, double t) {
  s.success = false;
  s.flag = flag_name(flag);
  std::ostringstream os;
  os.precision(16);
  os << "CVODES stopped at t = " << t << " with " << s.flag;
  if (!ctx.last_error.empty()) os << ": " << ctx.last_error;
  if (flag == CV_TOO_MUCH_WORK) os << "; raise integrator.max_steps";
  s.message = os.str();
}

/// The adjoint's forward pass: CVodeF to each of `stops` in turn (stop time
/// only at t1: CVodeB recomputes checkpoint intervals without stop times, so
/// a step shortened to land on an observation would not be retraced —
/// observations take CVODES' interpolant at t_k), then `at_stop(k)` with
/// o.y at stop k (stops at t0 included). Fills `forward` (checkpoints too);
/// a failed integration throws costate::Error starting with `what`.
template <class AtStop>
void forward_to_stops(Objects& o, Context& ctx, double t0, std::span<const double> stops,
                      const char* what, Stats& forward, AtStop&& at_stop) {
  forward = Stats{};
  forward.final_time = t0;
  double t = t0;
  int ncheck = 0;
  // Never step past t1: the right-hand side beyond it may differ (a
  // piecewise input switching at t1, e.g. Fujita_SciSignal2010's EGF_end =
  // its last measurement time), and a step across that jump puts its error
  // into the interpolated y(t1) and into every state CVodeB interpolates in
  // the last step. CVodeF records this stop time and restores it when it
  // recomputes a checkpoint interval (ca_tstopCVodeF).
  check(ctx, CVodeSetStopTime(o.mem, stops.back()), "CVodeSetStopTime");
  for (std::size_t k = 0; k < stops.size(); ++k) {
    if (stops[k] > t0) {
      const int flag = CVodeF(o.mem, stops[k], o.y, &t, CV_NORMAL, &ncheck);
      if (ctx.error) std::rethrow_exception(ctx.error);
      forward.final_time = t;
      if (flag < 0) {
        fail(forward, ctx, flag, t);
        collect(o.mem, forward);
        COSTATE_CHECK(false, what << ": the forward integration failed: " << forward.message);
      }
    }
    at_stop(k, t);
  }
  collect(o.mem, forward);
  forward.checkpoints = ncheck;
}

}  // namespace costate::ode::cvodes::internal
