// The second-order adjoint of the CVODES backend (cvodes::second_order_adjoint,
// include/costate/ode/cvodes.hpp): CVODES' forward sensitivity along one
// direction v stored with the checkpoints (CVodeSensInit + CVodeAdjInit),
// and two backward problems integrated together by CVodeB — the first-order
// λ/μ problem exactly as cvodes::adjoint sets it up (so the gradient is
// ode::gradient's), and [λ; Λ] with the quadrature ν, whose right-hand sides
// read the forward sensitivity (CVodeInitBS, CVodeQuadInitBS). Dense direct
// linear solvers throughout.
#include <algorithm>
#include <limits>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "sundials/cvodes_internal.hpp"
#include "sundials/dense_matrix.hpp"

namespace costate::ode::cvodes {
namespace {

using namespace internal;

/// User data of the second backward problem: the shared context (error
/// capture, the System) and scratch for the ε-expanded products.
struct SecondOrderContext {
  Context* base = nullptr;
  std::vector<double> fy_w, fp_w;  // 2n, 2np
  std::vector<double> jac;         // n × n: f_y for the dense [λ; Λ] Newton matrix
};

int tangent_rhs(int, realtype t, N_Vector y, N_Vector, N_Vector* yS, N_Vector* ySdot, void* user,
                N_Vector, N_Vector) {
  auto* c = static_cast<Context*>(user);
  return guarded(c, [&] { c->sys->tangent_rhs(t, data(y), data(yS[0]), data(ySdot[0])); });
}

// [λ; Λ]' = −[f_yᵀλ;  f_yᵀΛ + (f_yy[s] + f_yp[v_p])ᵀλ].
int rhs_second(realtype t, N_Vector y, N_Vector* yS, N_Vector yB, N_Vector yBdot, void* user) {
  auto* c = static_cast<SecondOrderContext*>(user);
  const std::size_t n = c->base->sys->n;
  const double* lb = data(yB);
  const int r = guarded(c->base, [&] {
    c->base->sys->second_order_vjp(t, data(y), data(yS[0]), lb, lb + n, c->fy_w.data(),
                                   c->fp_w.data());
  });
  double* d = data(yBdot);
  for (std::size_t i = 0; i < 2 * n; ++i) d[i] = -c->fy_w[i];
  return r;
}

// ν' = −(f_pᵀΛ + (f_py[s] + f_pp[v_p])ᵀλ).
int quadrature_second(realtype t, N_Vector y, N_Vector* yS, N_Vector yB, N_Vector qBdot,
                      void* user) {
  auto* c = static_cast<SecondOrderContext*>(user);
  const std::size_t n = c->base->sys->n, np = c->base->sys->np;
  const double* lb = data(yB);
  const int r = guarded(c->base, [&] {
    c->base->sys->second_order_vjp(t, data(y), data(yS[0]), lb, lb + n, c->fy_w.data(),
                                   c->fp_w.data());
  });
  double* d = data(qBdot);
  for (std::size_t j = 0; j < np; ++j) d[j] = -c->fp_w[np + j];
  return r;
}

// The Newton matrix of [λ; Λ]: the diagonal blocks −f_yᵀ. The coupling
// block ∂Λ'/∂λ = −(f_yy[s] + f_yp[v_p])ᵀ is left out: the system is block
// lower triangular, so the modified Newton iteration still converges (λ in
// the first iteration, Λ in the next) — an approximate Jacobian costs
// iterations, not accuracy.
int jacobian_second(realtype t, N_Vector y, N_Vector, N_Vector, SUNMatrix JB, void* user, N_Vector,
                    N_Vector, N_Vector) {
  auto* c = static_cast<SecondOrderContext*>(user);
  Context* b = c->base;
  const std::size_t n = b->sys->n, m = 2 * n;
  const int r = guarded(b, [&] { b->sys->jacobian(t, data(y), c->jac.data()); });
  double* out = SUNDenseMatrix_Data(JB);
  std::fill(out, out + m * m, 0.0);
  for (std::size_t col = 0; col < n; ++col)
    for (std::size_t row = 0; row < n; ++row) {
      const double v = -c->jac[row * n + col];
      out[col * m + row] = v;
      out[(col + n) * m + row + n] = v;
    }
  return r;
}

/// The second backward problem's SUNDIALS objects (Objects holds the first's).
struct SecondObjects {
  N_Vector yB = nullptr, qB = nullptr;
  SUNMatrix JB = nullptr;
  SUNLinearSolver lsB = nullptr;
  SecondObjects() = default;
  SecondObjects(const SecondObjects&) = delete;
  SecondObjects& operator=(const SecondObjects&) = delete;
  ~SecondObjects() {
    if (lsB) SUNLinSolFree(lsB);
    if (JB) SUNMatDestroy(JB);
    if (qB) N_VDestroy(qB);
    if (yB) N_VDestroy(yB);
  }
};

void add_counters(void* memB, Stats& total) {
  Stats leg;
  collect(memB, leg);
  total.add_counts(leg);
}

}  // namespace

void second_order_adjoint(
    const System& sys, const Settings& settings, const CvodesAdjoint& adj, double t0,
    const std::vector<double>& y0, const std::vector<double>& s0, std::span<const double> stops,
    const std::function<void(std::size_t, double, const double*, const double*, double*,
                             double*)>& jump,
    std::vector<double>& lambda, std::vector<double>& mu, std::vector<double>& Lambda,
    std::vector<double>& nu, Stats& forward, Stats& backward) {
  COSTATE_CHECK(sys.vjp && sys.tangent_rhs && sys.second_order_vjp,
                "CVODES backend: the second-order adjoint needs the system's vjp, tangent_rhs "
                "and second_order_vjp");
  COSTATE_CHECK(!stops.empty() && stops.front() >= t0,
                "CVODES backend: the second-order adjoint needs stops in [t0, t1]");
  COSTATE_CHECK(s0.size() == sys.n, "CVODES backend: s(t0) has " << s0.size() << " entries for "
                                                                  << sys.n << " states");
  adj.validate();
  // As cvodes::adjoint: polynomial interpolation needs the method's order + 1
  // steps per checkpoint interval.
  const int min_steps = sys.bdf ? 6 : 13;
  const bool hermite = adj.interpolation == CvodesInterpolation::Hermite;
  const int steps = adj.resolved_steps(sys.n, 2);  // a point holds y and s
  COSTATE_CHECK(hermite || steps >= min_steps,
                "sensitivity.checkpoint_steps = "
                    << steps << " is too small for interpolation: polynomial with "
                    << (sys.bdf ? "cvodes_bdf" : "cvodes_adams") << "; use at least " << min_steps
                    << " steps between checkpoints, or interpolation: hermite");
  const std::size_t n = sys.n, np = sys.np;
  Objects o;
  Context ctx;
  setup_forward(o, ctx, sys, settings, t0, y0.data());
  // The sensitivity along v: staggered corrector and outside the error test,
  // so the state's steps are the plain forward run's (ode::gradient's).
  o.ns = 1;
  o.yS = N_VCloneVectorArray(1, o.y);
  COSTATE_CHECK(o.yS != nullptr, "CVODES backend: N_VCloneVectorArray failed");
  std::copy(s0.begin(), s0.end(), data(o.yS[0]));
  check(ctx, CVodeSensInit(o.mem, 1, CV_STAGGERED, tangent_rhs, o.yS), "CVodeSensInit");
  check(ctx, CVodeSensEEtolerances(o.mem), "CVodeSensEEtolerances");
  check(ctx, CVodeSetSensErrCon(o.mem, SUNFALSE), "CVodeSetSensErrCon");
  check(ctx, CVodeAdjInit(o.mem, steps, hermite ? CV_HERMITE : CV_POLYNOMIAL), "CVodeAdjInit");

  // 1. Forward (as cvodes::adjoint), the jumps from (y, s) at each stop.
  const std::size_t K = stops.size();
  std::vector<double> jumps(K * n, 0.0), jumps2(K * n, 0.0);
  forward_to_stops(o, ctx, t0, stops, "hessian_vector (cvodes_adjoint)", forward,
                   [&](std::size_t k, double t) {
                     if (stops[k] > t0) check(ctx, CVodeGetSens(o.mem, &t, o.yS), "CVodeGetSens");
                     jump(k, stops[k], data(o.y), data(o.yS[0]), &jumps[k * n], &jumps2[k * n]);
                   });

  // 2. Backward problems from t1, both with the backward tolerances.
  const double t1 = stops.back();
  const double rtolB = adj.rtol > 0.0 ? adj.rtol : settings.rtol;
  double atolB = adj.atol;
  if (atolB <= 0.0) {
    atolB = std::numeric_limits<double>::infinity();
    for (double a : settings.atol) atolB = std::min(atolB, a);
  }
  const auto maxB = static_cast<long>(settings.max_steps);
  // Problem 1: λ, μ (cvodes::adjoint's).
  o.yB = new_vector(n, o.sunctx, &jumps[(K - 1) * n]);
  o.qB = new_vector(np, o.sunctx);
  int which = -1;
  check(ctx, CVodeCreateB(o.mem, sys.bdf ? CV_BDF : CV_ADAMS, &which), "CVodeCreateB");
  check(ctx, CVodeInitB(o.mem, which, rhs_backward, t1, o.yB), "CVodeInitB");
  check(ctx, CVodeSStolerancesB(o.mem, which, rtolB, atolB), "CVodeSStolerancesB");
  check(ctx, CVodeSetUserDataB(o.mem, which, &ctx), "CVodeSetUserDataB");
  check(ctx, CVodeSetMaxNumStepsB(o.mem, which, maxB), "CVodeSetMaxNumStepsB");
  // The gradient's own linear solver (dense, band or KLU), so problem 1
  // takes exactly cvodes::adjoint's steps.
  setup_backward_linear_solver(o, ctx, sys, settings, which);
  if (np > 0) {
    check(ctx, CVodeQuadInitB(o.mem, which, quadrature_backward, o.qB), "CVodeQuadInitB");
    check(ctx, CVodeQuadSStolerancesB(o.mem, which, rtolB, atolB), "CVodeQuadSStolerancesB");
    check(ctx, CVodeSetQuadErrConB(o.mem, which, SUNTRUE), "CVodeSetQuadErrConB");
  }
  // Problem 2: [λ; Λ] and ν, reading s.
  SecondOrderContext ctx2;
  ctx2.base = &ctx;
  ctx2.fy_w.assign(2 * n, 0.0);
  ctx2.fp_w.assign(std::max<std::size_t>(2 * np, 1), 0.0);
  ctx2.jac.assign(n * n, 0.0);
  SecondObjects o2;
  {
    std::vector<double> init(2 * n);
    std::copy(&jumps[(K - 1) * n], &jumps[K * n], init.begin());
    std::copy(&jumps2[(K - 1) * n], &jumps2[K * n], init.begin() + static_cast<std::ptrdiff_t>(n));
    o2.yB = new_vector(2 * n, o.sunctx, init.data());
  }
  o2.qB = new_vector(np, o.sunctx);
  int which2 = -1;
  check(ctx, CVodeCreateB(o.mem, sys.bdf ? CV_BDF : CV_ADAMS, &which2), "CVodeCreateB");
  check(ctx, CVodeInitBS(o.mem, which2, rhs_second, t1, o2.yB), "CVodeInitBS");
  check(ctx, CVodeSStolerancesB(o.mem, which2, rtolB, atolB), "CVodeSStolerancesB");
  check(ctx, CVodeSetUserDataB(o.mem, which2, &ctx2), "CVodeSetUserDataB");
  check(ctx, CVodeSetMaxNumStepsB(o.mem, which2, maxB), "CVodeSetMaxNumStepsB");
  const auto m2 = static_cast<sunindextype>(2 * n);
  o2.JB = costate::detail::new_dense_matrix(m2, m2, o.sunctx);
  o2.lsB = costate::detail::new_dense_solver(o2.yB, o2.JB, o.sunctx);
  COSTATE_CHECK(o2.JB && o2.lsB, "CVODES backend: dense matrix/solver creation failed");
  check(ctx, CVodeSetLinearSolverB(o.mem, which2, o2.lsB, o2.JB), "CVodeSetLinearSolverB");
  check(ctx, CVodeSetJacFnB(o.mem, which2, jacobian_second), "CVodeSetJacFnB");
  if (np > 0) {
    check(ctx, CVodeQuadInitBS(o.mem, which2, quadrature_second, o2.qB), "CVodeQuadInitBS");
    check(ctx, CVodeQuadSStolerancesB(o.mem, which2, rtolB, atolB), "CVodeQuadSStolerancesB");
    check(ctx, CVodeSetQuadErrConB(o.mem, which2, SUNTRUE), "CVodeSetQuadErrConB");
  }

  backward = Stats{};
  auto run_back = [&](double t_to) {
    const int flag = CVodeB(o.mem, t_to, CV_NORMAL);
    if (ctx.error) std::rethrow_exception(ctx.error);
    if (flag < 0) {
      fail(backward, ctx, flag, t_to);
      COSTATE_CHECK(false, "hessian_vector (cvodes_adjoint): the backward integration failed: "
                               << backward.message);
    }
    double tret = 0.0;
    check(ctx, CVodeGetB(o.mem, which, &tret, o.yB), "CVodeGetB");
    check(ctx, CVodeGetB(o.mem, which2, &tret, o2.yB), "CVodeGetB");
    if (np > 0) {
      check(ctx, CVodeGetQuadB(o.mem, which, &tret, o.qB), "CVodeGetQuadB");
      check(ctx, CVodeGetQuadB(o.mem, which2, &tret, o2.qB), "CVodeGetQuadB");
    }
    add_counters(CVodeGetAdjCVodeBmem(o.mem, which), backward);
    add_counters(CVodeGetAdjCVodeBmem(o.mem, which2), backward);
  };
  // 3. Legs t1 → t_{K−2} → … → stops[0], each stop's jumps added and both
  //    problems restarted there, then the last leg to t0.
  for (std::size_t k = K - 1; k-- > 0;) {
    if (stops[k] < stops[k + 1]) run_back(stops[k]);
    double* lb = data(o.yB);
    double* lb2 = data(o2.yB);
    for (std::size_t i = 0; i < n; ++i) {
      lb[i] += jumps[k * n + i];
      lb2[i] += jumps[k * n + i];
      lb2[n + i] += jumps2[k * n + i];
    }
    check(ctx, CVodeReInitB(o.mem, which, stops[k], o.yB), "CVodeReInitB");
    check(ctx, CVodeReInitB(o.mem, which2, stops[k], o2.yB), "CVodeReInitB");
    if (np > 0) {
      check(ctx, CVodeQuadReInitB(o.mem, which, o.qB), "CVodeQuadReInitB");
      check(ctx, CVodeQuadReInitB(o.mem, which2, o2.qB), "CVodeQuadReInitB");
    }
  }
  if (stops.front() > t0) run_back(t0);
  lambda.assign(data(o.yB), data(o.yB) + n);
  Lambda.assign(data(o2.yB) + n, data(o2.yB) + 2 * n);
  mu.assign(np, 0.0);
  nu.assign(np, 0.0);
  if (np > 0) {
    std::copy(data(o.qB), data(o.qB) + np, mu.begin());
    std::copy(data(o2.qB), data(o2.qB) + np, nu.begin());
  }
  backward.final_time = t0;
}

}  // namespace costate::ode::cvodes
