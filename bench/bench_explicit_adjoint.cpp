// Explicit Runge–Kutta gradients against the forward integration (issue 14):
// the discrete adjoint (store all, and binomial checkpoints) and forward
// sensitivities of
//   Lotka–Volterra, rk4, dt = 1e-4 on [0, 100] (10⁶ steps), p = (1.5, 1, 3, 1),
//     J = ½|y(100)|² (terminal) and J = ∫ ½|y|² dt (running cost);
//   Lorenz-96, n = 1000, F = 8, rk4, dt = 1e-3 on [0, 1] (1000 steps),
//     J = ½|y(1)|²;
// each timed in this binary against ode::integrate of the same problem and a
// plain double loop of the same rk4 steps (the floor), in process CPU
// seconds (medians). Ratios are measured in one run; the gradients are checked against each other (adjoint vs
// forward sensitivities) and the run fails if they disagree.
//
// The peer (issue 14): the same Lotka–Volterra gradients by a hand-written
// CVODES adjoint in this binary — Adams–Moulton, dense Newton with the
// hand-written Jacobian, rtol = atol = 1e-10 forward and backward,
// CVodeAdjInit every 100 steps with Hermite interpolation; λ' = −f_yᵀλ
// (− g_y for the integral), dJ/dp = ∫ λᵀ f_p dt as a backward quadrature —
// timed against its own forward solve (CVode alone, same tolerances), as
// costate's rows are against ode::integrate. Its gradient is checked against
// costate's (two discretisations: kPeerAgreement).
//
// Sample run:  build/bench/bench_explicit_adjoint [repeats] [lv]
#include <cvodes/cvodes.h>
#include <cvodes/cvodes_ls.h>
#include <nvector/nvector_serial.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"

namespace {

using namespace costate::ode;
/// Median process CPU seconds of f() over `repeats` runs: the machine these
/// figures come from is shared and oversubscribed, where wall time counts
/// other jobs' time slices (every ratio below is of CPU seconds).
template <class F>
double median_seconds(F&& f, int repeats) {
  return costate::bench::median_wall_cpu(f, repeats).cpu;
}

struct Lorenz96 {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t n = y.size();
    for (std::size_t i = 0; i < n; ++i) {
      const T& ym2 = y[(i + n - 2) % n];
      const T& ym1 = y[(i + n - 1) % n];
      const T& yp1 = y[(i + 1) % n];
      dydt[i] = (yp1 - ym2) * ym1 - y[i] + p[0];
    }
  }
};

struct HalfNorm {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};
struct HalfNormIntegral {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};

/// Lotka–Volterra with the integral objective's running cost as a third
/// state, z' = ½|y|²: the forward solve that computes J = z(T), the
/// integral rows' second denominator (ode::integrate of the plain problem
/// does not evaluate the running cost).
struct LotkaVolterraWithCost {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    LotkaVolterra{}.rhs<T>(t, y.first(2), p, dydt.first(2));
    dydt[2] = T(0.5 * (y[0] * y[0] + y[1] * y[1]));
  }
};

/// The same rk4 steps as plain loops over std::vector<double> (the floor).
template <class M>
double plain_rk4(const M& model, std::vector<double> y, const std::vector<double>& p, double t0,
                 double t1, double dt) {
  const std::size_t n = y.size();
  std::vector<double> k1(n), k2(n), k3(n), k4(n), tmp(n);
  const auto steps = static_cast<long>(std::llround((t1 - t0) / dt));
  const std::span<const double> ps(p);
  for (long s = 0; s < steps; ++s) {
    const double t = t0 + static_cast<double>(s) * dt;
    model.template rhs<double>(t, y, ps, k1);
    for (std::size_t i = 0; i < n; ++i) tmp[i] = y[i] + 0.5 * dt * k1[i];
    model.template rhs<double>(t + 0.5 * dt, tmp, ps, k2);
    for (std::size_t i = 0; i < n; ++i) tmp[i] = y[i] + 0.5 * dt * k2[i];
    model.template rhs<double>(t + 0.5 * dt, tmp, ps, k3);
    for (std::size_t i = 0; i < n; ++i) tmp[i] = y[i] + dt * k3[i];
    model.template rhs<double>(t + dt, tmp, ps, k4);
    for (std::size_t i = 0; i < n; ++i)
      y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
  }
  return y[0];
}

double max_rel_diff(const GradientResult& a, const GradientResult& b) {
  double scale = 0.0, diff = 0.0;
  auto acc = [&](const std::vector<double>& x, const std::vector<double>& y) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, std::abs(x[i]));
      diff = std::max(diff, std::abs(x[i] - y[i]));
    }
  };
  acc(a.wrt_parameters, b.wrt_parameters);
  acc(a.wrt_initial_state, b.wrt_initial_state);
  return diff / scale;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Agreement of the adjoint and forward-sensitivity gradients (both exact for
// the same discrete solution: round-off over 10⁶ steps only).
constexpr double kAgreement = 1e-8;

// ---------------------------------------------------------------- the peer
// Lotka–Volterra as a SUNDIALS user writes it: p = (a, b, c, d),
//   y1' = a y1 − b y1 y2,   y2' = d y1 y2 − c y2.
namespace peer {

#define PEER_CHECK(call)                                                 \
  do {                                                                   \
    if ((call) < 0) {                                                    \
      std::fprintf(stderr, "CVODES: %s failed (line %d)\n", #call, __LINE__); \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

struct Lv {
  double a, b, c, d;
  bool integral;  // J = ∫ ½|y|² dt (else ½|y(T)|²)
};
const double* in(N_Vector v) { return N_VGetArrayPointer(v); }
double* out(N_Vector v) { return N_VGetArrayPointer(v); }

int rhs(double, N_Vector yv, N_Vector dv, void* user) {
  const Lv& m = *static_cast<const Lv*>(user);
  const double* y = in(yv);
  double* f = out(dv);
  f[0] = m.a * y[0] - m.b * y[0] * y[1];
  f[1] = m.d * y[0] * y[1] - m.c * y[1];
  return 0;
}
int jac(double, N_Vector yv, N_Vector, SUNMatrix J, void* user, N_Vector, N_Vector, N_Vector) {
  const Lv& m = *static_cast<const Lv*>(user);
  const double* y = in(yv);
  SM_ELEMENT_D(J, 0, 0) = m.a - m.b * y[1];
  SM_ELEMENT_D(J, 0, 1) = -m.b * y[0];
  SM_ELEMENT_D(J, 1, 0) = m.d * y[1];
  SM_ELEMENT_D(J, 1, 1) = m.d * y[0] - m.c;
  return 0;
}
int running(double, N_Vector yv, N_Vector qv, void*) {
  const double* y = in(yv);
  out(qv)[0] = 0.5 * (y[0] * y[0] + y[1] * y[1]);
  return 0;
}
// λ' = −f_yᵀ λ (− g_y for the running cost).
int rhs_b(double, N_Vector yv, N_Vector lv, N_Vector dv, void* user) {
  const Lv& m = *static_cast<const Lv*>(user);
  const double *y = in(yv), *l = in(lv);
  double* f = out(dv);
  f[0] = -((m.a - m.b * y[1]) * l[0] + m.d * y[1] * l[1]);
  f[1] = -(-m.b * y[0] * l[0] + (m.d * y[0] - m.c) * l[1]);
  if (m.integral) {
    f[0] -= y[0];
    f[1] -= y[1];
  }
  return 0;
}
int jac_b(double, N_Vector yv, N_Vector, N_Vector, SUNMatrix J, void* user, N_Vector, N_Vector,
          N_Vector) {
  const Lv& m = *static_cast<const Lv*>(user);
  const double* y = in(yv);
  SM_ELEMENT_D(J, 0, 0) = -(m.a - m.b * y[1]);
  SM_ELEMENT_D(J, 0, 1) = -m.d * y[1];
  SM_ELEMENT_D(J, 1, 0) = m.b * y[0];
  SM_ELEMENT_D(J, 1, 1) = -(m.d * y[0] - m.c);
  return 0;
}
// Integrated from T back to 0, so −λᵀ f_p accumulates +∫_0^T λᵀ f_p dt.
int quad_b(double, N_Vector yv, N_Vector lv, N_Vector qv, void*) {
  const double *y = in(yv), *l = in(lv);
  double* q = out(qv);
  q[0] = -(y[0] * l[0]);
  q[1] = -(-y[0] * y[1] * l[0]);
  q[2] = -(-y[1] * l[1]);
  q[3] = -(y[0] * y[1] * l[1]);
  return 0;
}

constexpr double kTol = 1e-10;        // rtol = atol, forward and backward
constexpr long kStepsPerCheckpoint = 100;

struct Result {
  double J = 0.0;
  std::vector<double> grad_p, grad_y0;
};

/// Forward alone (adjoint = false) or forward with checkpoints + backward.
Result solve(SUNContext ctx, Lv m, double T, bool adjoint) {
  Result r;
  N_Vector y = N_VNew_Serial(2, ctx), q = N_VNew_Serial(1, ctx);
  out(y)[0] = 1.0;
  out(y)[1] = 1.0;
  N_VConst(0.0, q);
  void* mem = CVodeCreate(CV_ADAMS, ctx);
  PEER_CHECK(CVodeInit(mem, rhs, 0.0, y));
  PEER_CHECK(CVodeSStolerances(mem, kTol, kTol));
  PEER_CHECK(CVodeSetUserData(mem, &m));
  PEER_CHECK(CVodeSetMaxNumSteps(mem, 10000000));
  SUNMatrix A = SUNDenseMatrix(2, 2, ctx);
  SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
  PEER_CHECK(CVodeSetLinearSolver(mem, LS, A));
  PEER_CHECK(CVodeSetJacFn(mem, jac));
  if (m.integral) {
    PEER_CHECK(CVodeQuadInit(mem, running, q));
    PEER_CHECK(CVodeQuadSStolerances(mem, kTol, kTol));
    PEER_CHECK(CVodeSetQuadErrCon(mem, SUNTRUE));
  }
  double t = 0.0;
  if (adjoint) {
    PEER_CHECK(CVodeAdjInit(mem, kStepsPerCheckpoint, CV_HERMITE));
    int ncheck = 0;
    PEER_CHECK(CVodeF(mem, T, y, &t, CV_NORMAL, &ncheck));
  } else {
    PEER_CHECK(CVode(mem, T, y, &t, CV_NORMAL));
  }
  const double* yT = in(y);
  if (m.integral) {
    PEER_CHECK(CVodeGetQuad(mem, &t, q));
    r.J = in(q)[0];
  } else {
    r.J = 0.5 * (yT[0] * yT[0] + yT[1] * yT[1]);
  }
  N_Vector yB = nullptr, qB = nullptr;
  SUNMatrix AB = nullptr;
  SUNLinearSolver LSB = nullptr;
  if (adjoint) {
    yB = N_VNew_Serial(2, ctx);
    qB = N_VNew_Serial(4, ctx);
    out(yB)[0] = m.integral ? 0.0 : yT[0];  // λ(T) = ∂g/∂y(T)
    out(yB)[1] = m.integral ? 0.0 : yT[1];
    N_VConst(0.0, qB);
    int which = 0;
    PEER_CHECK(CVodeCreateB(mem, CV_ADAMS, &which));
    PEER_CHECK(CVodeInitB(mem, which, rhs_b, T, yB));
    PEER_CHECK(CVodeSStolerancesB(mem, which, kTol, kTol));
    PEER_CHECK(CVodeSetUserDataB(mem, which, &m));
    PEER_CHECK(CVodeSetMaxNumStepsB(mem, which, 10000000));
    AB = SUNDenseMatrix(2, 2, ctx);
    LSB = SUNLinSol_Dense(yB, AB, ctx);
    PEER_CHECK(CVodeSetLinearSolverB(mem, which, LSB, AB));
    PEER_CHECK(CVodeSetJacFnB(mem, which, jac_b));
    PEER_CHECK(CVodeQuadInitB(mem, which, quad_b, qB));
    PEER_CHECK(CVodeQuadSStolerancesB(mem, which, kTol, kTol));
    PEER_CHECK(CVodeSetQuadErrConB(mem, which, SUNTRUE));
    PEER_CHECK(CVodeB(mem, 0.0, CV_NORMAL));
    double tB = 0.0;
    PEER_CHECK(CVodeGetB(mem, which, &tB, yB));
    PEER_CHECK(CVodeGetQuadB(mem, which, &tB, qB));
    r.grad_p.assign(in(qB), in(qB) + 4);
    r.grad_y0.assign(in(yB), in(yB) + 2);
  }
  CVodeFree(&mem);
  SUNLinSolFree(LS);
  SUNMatDestroy(A);
  if (LSB) SUNLinSolFree(LSB);
  if (AB) SUNMatDestroy(AB);
  if (yB) N_VDestroy(yB);
  if (qB) N_VDestroy(qB);
  N_VDestroy(y);
  N_VDestroy(q);
  return r;
}

}  // namespace peer

// The peer's gradient against costate's: CVODES at rtol = atol = 1e-10
// (its backward solve reads the forward trajectory by Hermite
// interpolation between checkpoints) against rk4 at h = 1e-4 (global error
// ~1e-12), over 100 time units of an oscillation whose error grows along the
// orbit: measured 1.2e-5 (integral) and 2.0e-5 (terminal).
constexpr double kPeerAgreement = 1e-4;

/// The CVODES peer's row beside costate's; `ref` is costate's adjoint.
bool run_peer(bool integral, const GradientResult& ref, double costate_ratio, int repeats) {
  SUNContext ctx = nullptr;
  PEER_CHECK(SUNContext_Create(nullptr, &ctx));
  const peer::Lv m{1.5, 1.0, 3.0, 1.0, integral};
  const double T = 100.0;
  peer::Result g;
  const double t_fwd = median_seconds([&] { (void)peer::solve(ctx, m, T, false); }, repeats);
  const double t_adj = median_seconds([&] { g = peer::solve(ctx, m, T, true); }, repeats);
  SUNContext_Free(&ctx);
  double scale = 0.0, diff = 0.0;
  for (std::size_t j = 0; j < 4; ++j) {
    scale = std::max(scale, std::abs(ref.wrt_parameters[j]));
    diff = std::max(diff, std::abs(ref.wrt_parameters[j] - g.grad_p[j]));
  }
  for (std::size_t i = 0; i < 2; ++i) {
    scale = std::max(scale, std::abs(ref.wrt_initial_state[i]));
    diff = std::max(diff, std::abs(ref.wrt_initial_state[i] - g.grad_y0[i]));
  }
  const double d = diff / scale;
  std::printf("| peer: hand-written CVODES adjoint (Adams, tol 1e-10) | %.4f | **%.2f** (/ its own "
              "forward %.4f s) | | | agrees with costate to %.1e |\n",
              t_adj, t_adj / t_fwd, t_fwd, d);
  std::printf("| costate store all / CVODES peer (each over its own forward) | | %.2f | | |\n",
              costate_ratio / (t_adj / t_fwd));
  if (!(d <= kPeerAgreement)) {
    std::fprintf(stderr, "MISMATCH CVODES peer (%s): max rel diff %.3e\n",
                 integral ? "integral" : "terminal", d);
    return false;
  }
  return true;
}

template <class M, class O>
bool run(const char* name, const Problem<M>& pr, const O& objective, const IntegratorOptions& opt,
         int repeats, bool coloured_row, bool forward_row, int peer = -1,
         double t_forward_with_j = 0.0) {
  const double t_plain =
      median_seconds([&] { (void)plain_rk4(pr.model, pr.y0, pr.p, pr.t0(), pr.t1(), opt.dt); },
                     repeats);
  const double t_int = median_seconds([&] { (void)integrate(pr, opt); }, repeats);
  const std::size_t m = pr.p.size() + pr.y0.size();
  std::printf("\n%s: %zu states, %zu parameters; plain rk4 loop %.4f s, ode::integrate %.4f s "
              "(%.2f x plain)\n",
              name, pr.y0.size(), pr.p.size(), t_plain, t_int, t_int / t_plain);
  std::printf("| method | gradient (s) | / ode::integrate | / plain loop | per direction |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  GradientResult ref;
  struct Row {
    const char* label;
    SensitivityMethod method;
  };
  std::vector<Row> rows{{"discrete adjoint, store all", DiscreteAdjoint{}},
                        {"discrete adjoint, binomial(20)",
                         DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 20}}}};
  if (coloured_row)
    rows.push_back({"discrete adjoint, store all, coloured", DiscreteAdjoint{.coloured_jacobian = true}});
  if (forward_row) rows.push_back({"forward sensitivities", Forward{}});
  bool ok = true;
  double store_all_ratio = 0.0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    GradientResult g;
    const bool fwd = std::holds_alternative<Forward>(rows[r].method);
    const double t = median_seconds([&] { g = gradient(pr, objective, rows[r].method, opt); },
                                    fwd && m > 100 ? 1 : repeats);
    if (r == 0) {
      ref = g;
      store_all_ratio = t / t_int;
    }
    const double d = r == 0 ? 0.0 : max_rel_diff(ref, g);
    if (!(d <= kAgreement)) {
      std::fprintf(stderr, "MISMATCH %s / %s: max rel diff %.3e\n", name, rows[r].label, d);
      ok = false;
    }
    if (fwd)
      std::printf("| %s | %.4f | %.2f | %.2f | %.3f (%zu directions) |\n", rows[r].label, t,
                  t / t_int, t / t_plain, t / t_int / static_cast<double>(m), m);
    else
      std::printf("| %s | %.4f | **%.2f** | %.2f | |\n", rows[r].label, t, t / t_int, t / t_plain);
  }
  if (t_forward_with_j > 0.0)
    std::printf("| (forward computing J: ode::integrate with z' = q as a 3rd state %.4f s) | | "
                "store all / it **%.2f** | | |\n",
                t_forward_with_j, store_all_ratio * t_int / t_forward_with_j);
  if (peer >= 0) ok = run_peer(peer == 1, ref, store_all_ratio, repeats) && ok;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  // "lv": only the Lotka–Volterra terminal rows (for profiling).
  const std::string only = argc > 2 ? argv[2] : "";
  std::printf("load average before: %s\n", load_average().c_str());
  bool ok = true;
  // "profile-lv", "profile-lv-integral", "profile-l96": one gradient row
  // only (store all), `repeats` times, for perf record or callgrind;
  // "profile-integrate-…" the forward integration instead.
  if (only.rfind("profile", 0) == 0) {
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-4};
    Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 100.0}};
    const std::size_t n = 1000;
    Problem<Lorenz96> l96{Lorenz96{}, std::vector<double>(n, 8.0), {8.0}, {0.0, 1.0}};
    const SensitivityMethod method =
        only.find("forward") != std::string::npos ? SensitivityMethod(Forward{})
                                                   : SensitivityMethod(DiscreteAdjoint{});
    double sum = 0.0;
    if (only.find("integrate") != std::string::npos) {
      // "profile-integrate-lv", "…-l96", "…-lv-integral" (z' = q as a 3rd
      // state): the forward integrations the gradient rows are divided by.
      const Problem<LotkaVolterraWithCost> lvq{LotkaVolterraWithCost{}, {1.0, 1.0, 0.0}, lv.p,
                                               {0.0, 100.0}};
      for (int r = 0; r < repeats; ++r) {
        if (only.find("l96") != std::string::npos)
          sum += integrate(l96, IntegratorOptions{.method = Method::RK4, .dt = 1e-3}).y.back();
        else if (only.find("integral") != std::string::npos)
          sum += integrate(lvq, opt).y.back();
        else
          sum += integrate(lv, opt).y.back();
      }
      std::printf("%s: sum %.16g\n", only.c_str(), sum);
      return 0;
    }
    for (int r = 0; r < repeats; ++r) {
      GradientResult g;
      if (only.find("l96") != std::string::npos)
        g = gradient(l96, HalfNorm{}, method, IntegratorOptions{.method = Method::RK4, .dt = 1e-3});
      else if (only.find("integral") != std::string::npos)
        g = gradient(lv, HalfNormIntegral{}, method, opt);
      else
        g = gradient(lv, HalfNorm{}, method, opt);
      sum += g.wrt_parameters[0];
    }
    std::printf("%s: sum of dJ/dp0 %.16g\n", only.c_str(), sum);
    return 0;
  }
  if (only == "lv") {
    Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 100.0}};
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-4};
    return run("Lotka-Volterra rk4, 1e6 steps, terminal", lv, HalfNorm{}, opt, repeats, false, false, 0)
               ? 0
               : 1;
  }
  {
    Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 100.0}};
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-4};
    ok = run("Lotka-Volterra rk4, 1e6 steps, terminal", lv, HalfNorm{}, opt, repeats, false, true, 0) &&
         ok;
    const Problem<LotkaVolterraWithCost> lvq{LotkaVolterraWithCost{}, {1.0, 1.0, 0.0}, lv.p, {0.0, 100.0}};
    const double t_fwd_j = median_seconds([&] { (void)integrate(lvq, opt); }, repeats);
    ok = run("Lotka-Volterra rk4, 1e6 steps, integral", lv, HalfNormIntegral{}, opt, repeats, false,
             true, 1, t_fwd_j) && ok;
  }
  {
    const std::size_t n = 1000;
    Problem<Lorenz96> l96{Lorenz96{}, std::vector<double>(n, 8.0), {8.0}, {0.0, 1.0}};
    for (std::size_t i = 0; i < n; ++i) l96.y0[i] += 0.01 * std::sin(0.1 * static_cast<double>(i));
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-3};
    ok = run("Lorenz-96 n = 1000 rk4, 1000 steps, terminal", l96, HalfNorm{}, opt, repeats, true,
             true) && ok;
  }
  std::printf("\nload average after: %s\n", load_average().c_str());
  return ok ? 0 : 1;
}
