// W4 of shared/BENCHMARKS.md, side by side in one binary: a plain CVODES
// program with hand-written Jacobians, adjoint right-hand sides and
// quadratures (what a SUNDIALS user writes), and costate's CVODES backend
// (ode::integrate with cvodes_bdf, ode::gradient with CvodesAdjoint: every
// derivative from AD). Also costate's native continuous adjoint (dopri5) on
// Lotka–Volterra.
//
//   Robertson, G = ∫_0^{4e7} y3 dt, BDF, rtol 1e-6, atol (1e-8, 1e-14, 1e-6),
//     backward rtol 1e-6, atol 1e-8, 150 steps per checkpoint, Hermite;
//   Lotka–Volterra, L = Σ_{k=1..10} (y1(k) − 1)² + (y2(k) − 1)², BDF,
//     rtol 1e-8, atol 1e-10 (backward the same), restarting the backward
//     problem at each observation.
// Ratios: (forward with checkpoints + backward) / forward alone, each
// program against its own forward; and costate / hand-written per task.
// Median of `repeats` (default 51) interleaved rounds.
//
// Also, in the same rounds: costate's native discrete adjoints of the
// implicit steppers (bdf, sdirk3) on both tasks, store-all and
// binomial(10) checkpointing — (gradient with its own forward run + replay
// sweeps) / ode::integrate of the same method (Robertson with G as the
// fourth state, outside the error test as in the gradient; Lotka–Volterra
// landing on the observation times).
//
// Usage: bench_w4_cvodes [repeats]
#include <cvodes/cvodes.h>
#include <cvodes/cvodes_ls.h>
#include <nvector/nvector_serial.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "sundials/serial_vector.hpp"

namespace {

#define CHECK_FLAG(call)                                               \
  do {                                                                 \
    if ((call) < 0) {                                                  \
      std::fprintf(stderr, "%s failed at line %d\n", #call, __LINE__); \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

double* d(N_Vector v) { return N_VGetArrayPointer(v); }
#define IJ(A, i, j) SM_ELEMENT_D(A, i, j)

// ---------------------------------------------------------------------------
// Hand-written Robertson (p = k1, k2, k3).
struct RobData {
  double p[3] = {0.04, 1e4, 3e7};
};
int rob_f(double, N_Vector y, N_Vector yd, void* u) {
  const double* p = static_cast<RobData*>(u)->p;
  const double *Y = d(y);
  double* D = d(yd);
  D[0] = -p[0] * Y[0] + p[1] * Y[1] * Y[2];
  D[2] = p[2] * Y[1] * Y[1];
  D[1] = -D[0] - D[2];
  return 0;
}
int rob_jac(double, N_Vector y, N_Vector, SUNMatrix J, void* u, N_Vector, N_Vector, N_Vector) {
  const double* p = static_cast<RobData*>(u)->p;
  const double* Y = d(y);
  IJ(J, 0, 0) = -p[0];
  IJ(J, 0, 1) = p[1] * Y[2];
  IJ(J, 0, 2) = p[1] * Y[1];
  IJ(J, 1, 0) = p[0];
  IJ(J, 1, 1) = -p[1] * Y[2] - 2 * p[2] * Y[1];
  IJ(J, 1, 2) = -p[1] * Y[1];
  IJ(J, 2, 0) = 0.0;
  IJ(J, 2, 1) = 2 * p[2] * Y[1];
  IJ(J, 2, 2) = 0.0;
  return 0;
}
int rob_q(double, N_Vector y, N_Vector q, void*) {
  d(q)[0] = d(y)[2];
  return 0;
}
// λ' = −Jᵀ λ − q_yᵀ, q_y = (0, 0, 1).
int rob_fB(double, N_Vector y, N_Vector yB, N_Vector yBd, void* u) {
  const double* p = static_cast<RobData*>(u)->p;
  const double *Y = d(y), *L = d(yB);
  double* D = d(yBd);
  const double l21 = L[1] - L[0], l32 = L[2] - L[1];
  D[0] = -p[0] * l21;
  D[1] = p[1] * Y[2] * l21 - 2 * p[2] * Y[1] * l32;
  D[2] = p[1] * Y[1] * l21 - 1.0;
  return 0;
}
int rob_jacB(double, N_Vector y, N_Vector, N_Vector, SUNMatrix JB, void* u, N_Vector, N_Vector,
             N_Vector) {
  const double* p = static_cast<RobData*>(u)->p;
  const double* Y = d(y);
  IJ(JB, 0, 0) = p[0];
  IJ(JB, 0, 1) = -p[0];
  IJ(JB, 0, 2) = 0.0;
  IJ(JB, 1, 0) = -p[1] * Y[2];
  IJ(JB, 1, 1) = p[1] * Y[2] + 2 * p[2] * Y[1];
  IJ(JB, 1, 2) = -2 * p[2] * Y[1];
  IJ(JB, 2, 0) = -p[1] * Y[1];
  IJ(JB, 2, 1) = p[1] * Y[1];
  IJ(JB, 2, 2) = 0.0;
  return 0;
}
// μ' = −f_pᵀ λ.
int rob_fQB(double, N_Vector y, N_Vector yB, N_Vector qBd, void*) {
  const double *Y = d(y), *L = d(yB);
  double* D = d(qBd);
  const double l21 = L[1] - L[0], l32 = L[2] - L[1];
  D[0] = -Y[0] * l21;
  D[1] = Y[1] * Y[2] * l21;
  D[2] = -Y[1] * Y[1] * l32;
  return 0;
}

// ---------------------------------------------------------------------------
// Hand-written Lotka–Volterra (p = a, b, c, d).
struct LvData {
  double p[4] = {1.5, 1.0, 3.0, 1.0};
};
int lv_f(double, N_Vector y, N_Vector yd, void* u) {
  const double* p = static_cast<LvData*>(u)->p;
  const double* Y = d(y);
  d(yd)[0] = p[0] * Y[0] - p[1] * Y[0] * Y[1];
  d(yd)[1] = p[3] * Y[0] * Y[1] - p[2] * Y[1];
  return 0;
}
int lv_jac(double, N_Vector y, N_Vector, SUNMatrix J, void* u, N_Vector, N_Vector, N_Vector) {
  const double* p = static_cast<LvData*>(u)->p;
  const double* Y = d(y);
  IJ(J, 0, 0) = p[0] - p[1] * Y[1];
  IJ(J, 0, 1) = -p[1] * Y[0];
  IJ(J, 1, 0) = p[3] * Y[1];
  IJ(J, 1, 1) = p[3] * Y[0] - p[2];
  return 0;
}
int lv_fB(double, N_Vector y, N_Vector yB, N_Vector yBd, void* u) {
  const double* p = static_cast<LvData*>(u)->p;
  const double *Y = d(y), *L = d(yB);
  d(yBd)[0] = -((p[0] - p[1] * Y[1]) * L[0] + p[3] * Y[1] * L[1]);
  d(yBd)[1] = -(-p[1] * Y[0] * L[0] + (p[3] * Y[0] - p[2]) * L[1]);
  return 0;
}
int lv_jacB(double, N_Vector y, N_Vector, N_Vector, SUNMatrix JB, void* u, N_Vector, N_Vector,
            N_Vector) {
  const double* p = static_cast<LvData*>(u)->p;
  const double* Y = d(y);
  IJ(JB, 0, 0) = -(p[0] - p[1] * Y[1]);
  IJ(JB, 0, 1) = -p[3] * Y[1];
  IJ(JB, 1, 0) = p[1] * Y[0];
  IJ(JB, 1, 1) = -(p[3] * Y[0] - p[2]);
  return 0;
}
int lv_fQB(double, N_Vector y, N_Vector yB, N_Vector qBd, void*) {
  const double *Y = d(y), *L = d(yB);
  double* D = d(qBd);
  D[0] = -(Y[0] * L[0]);
  D[1] = -(-Y[0] * Y[1] * L[0]);
  D[2] = -(-Y[1] * L[1]);
  D[3] = -(Y[0] * Y[1] * L[1]);
  return 0;
}

/// One plain CVODES program: forward alone, or forward with checkpoints +
/// backward. Returns G (or L) and writes the gradient.
struct Plain {
  SUNContext ctx = nullptr;
  Plain() { CHECK_FLAG(SUNContext_Create(nullptr, &ctx)); }
  ~Plain() { SUNContext_Free(&ctx); }
  int rob_steps = 150, lv_steps = 100;  // steps between checkpoints (CVodeAdjInit)
  // The vectors' operations: SUNDIALS' serial module as Debian ships it
  // (built without optimisation), or the ones costate's backend installs
  // (solvers/sundials/serial_vector.hpp; the same bits) — the program is
  // otherwise the same.
  bool costate_vectors = false;

  N_Vector vec(sunindextype n) const {
    N_Vector v = N_VNew_Serial(n, ctx);
    if (costate_vectors) costate::detail::use_costate_operations(v);
    return v;
  }

  double robertson(bool adjoint, std::vector<double>* grad) {
    RobData data;
    N_Vector y = vec(3), atol = vec(3), q = vec(1);
    d(y)[0] = 1.0, d(y)[1] = 0.0, d(y)[2] = 0.0;
    d(atol)[0] = 1e-8, d(atol)[1] = 1e-14, d(atol)[2] = 1e-6;
    N_VConst(0.0, q);
    void* mem = CVodeCreate(CV_BDF, ctx);
    CHECK_FLAG(CVodeInit(mem, rob_f, 0.0, y));
    CHECK_FLAG(CVodeSVtolerances(mem, 1e-6, atol));
    CHECK_FLAG(CVodeSetUserData(mem, &data));
    SUNMatrix A = SUNDenseMatrix(3, 3, ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
    CHECK_FLAG(CVodeSetLinearSolver(mem, LS, A));
    CHECK_FLAG(CVodeSetJacFn(mem, rob_jac));
    CHECK_FLAG(CVodeSetMaxNumSteps(mem, 100000));
    CHECK_FLAG(CVodeQuadInit(mem, rob_q, q));
    CHECK_FLAG(CVodeQuadSStolerances(mem, 1e-6, 1e-6));
    CHECK_FLAG(CVodeSetQuadErrCon(mem, SUNTRUE));
    double t = 0.0, G = 0.0, tq = 0.0;
    const double T = 4e7;
    N_Vector yB = nullptr, qB = nullptr;
    SUNMatrix AB = nullptr;
    SUNLinearSolver LSB = nullptr;
    if (!adjoint) {
      CHECK_FLAG(CVode(mem, T, y, &t, CV_NORMAL));
      CHECK_FLAG(CVodeGetQuad(mem, &tq, q));
      G = d(q)[0];
    } else {
      CHECK_FLAG(CVodeAdjInit(mem, rob_steps, CV_HERMITE));
      int ncheck = 0;
      CHECK_FLAG(CVodeF(mem, T, y, &t, CV_NORMAL, &ncheck));
      CHECK_FLAG(CVodeGetQuad(mem, &tq, q));
      G = d(q)[0];
      yB = vec(3);
      qB = vec(3);
      N_VConst(0.0, yB);
      N_VConst(0.0, qB);
      int which = 0;
      CHECK_FLAG(CVodeCreateB(mem, CV_BDF, &which));
      CHECK_FLAG(CVodeInitB(mem, which, rob_fB, T, yB));
      CHECK_FLAG(CVodeSStolerancesB(mem, which, 1e-6, 1e-8));
      CHECK_FLAG(CVodeSetUserDataB(mem, which, &data));
      CHECK_FLAG(CVodeSetMaxNumStepsB(mem, which, 100000));
      AB = SUNDenseMatrix(3, 3, ctx);
      LSB = SUNLinSol_Dense(yB, AB, ctx);
      CHECK_FLAG(CVodeSetLinearSolverB(mem, which, LSB, AB));
      CHECK_FLAG(CVodeSetJacFnB(mem, which, rob_jacB));
      CHECK_FLAG(CVodeQuadInitB(mem, which, rob_fQB, qB));
      CHECK_FLAG(CVodeQuadSStolerancesB(mem, which, 1e-6, 1e-8));
      CHECK_FLAG(CVodeSetQuadErrConB(mem, which, SUNTRUE));
      CHECK_FLAG(CVodeB(mem, 0.0, CV_NORMAL));
      double tB = 0.0;
      CHECK_FLAG(CVodeGetB(mem, which, &tB, yB));
      CHECK_FLAG(CVodeGetQuadB(mem, which, &tB, qB));
      grad->assign(d(qB), d(qB) + 3);
    }
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    if (LSB) SUNLinSolFree(LSB);
    if (AB) SUNMatDestroy(AB);
    if (yB) N_VDestroy(yB);
    if (qB) N_VDestroy(qB);
    N_VDestroy(y);
    N_VDestroy(atol);
    N_VDestroy(q);
    return G;
  }

  double lotka_volterra(bool adjoint, std::vector<double>* grad) {
    LvData data;
    N_Vector y = vec(2);
    d(y)[0] = 1.0, d(y)[1] = 1.0;
    void* mem = CVodeCreate(CV_BDF, ctx);
    CHECK_FLAG(CVodeInit(mem, lv_f, 0.0, y));
    CHECK_FLAG(CVodeSStolerances(mem, 1e-8, 1e-10));
    CHECK_FLAG(CVodeSetUserData(mem, &data));
    SUNMatrix A = SUNDenseMatrix(2, 2, ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
    CHECK_FLAG(CVodeSetLinearSolver(mem, LS, A));
    CHECK_FLAG(CVodeSetJacFn(mem, lv_jac));
    CHECK_FLAG(CVodeSetMaxNumSteps(mem, 100000));
    if (adjoint) CHECK_FLAG(CVodeAdjInit(mem, lv_steps, CV_HERMITE));
    double t = 0.0, L = 0.0;
    double ys[10][2];
    int ncheck = 0;
    for (int k = 1; k <= 10; ++k) {
      if (adjoint)
        CHECK_FLAG(CVodeF(mem, k, y, &t, CV_NORMAL, &ncheck));
      else
        CHECK_FLAG(CVode(mem, k, y, &t, CV_NORMAL));
      ys[k - 1][0] = d(y)[0];
      ys[k - 1][1] = d(y)[1];
      L += (d(y)[0] - 1) * (d(y)[0] - 1) + (d(y)[1] - 1) * (d(y)[1] - 1);
    }
    N_Vector yB = nullptr, qB = nullptr;
    SUNMatrix AB = nullptr;
    SUNLinearSolver LSB = nullptr;
    if (adjoint) {
      yB = vec(2);
      qB = vec(4);
      d(yB)[0] = 2 * (ys[9][0] - 1);
      d(yB)[1] = 2 * (ys[9][1] - 1);
      N_VConst(0.0, qB);
      int which = 0;
      CHECK_FLAG(CVodeCreateB(mem, CV_BDF, &which));
      CHECK_FLAG(CVodeInitB(mem, which, lv_fB, 10.0, yB));
      CHECK_FLAG(CVodeSStolerancesB(mem, which, 1e-8, 1e-10));
      CHECK_FLAG(CVodeSetUserDataB(mem, which, &data));
      CHECK_FLAG(CVodeSetMaxNumStepsB(mem, which, 100000));
      AB = SUNDenseMatrix(2, 2, ctx);
      LSB = SUNLinSol_Dense(yB, AB, ctx);
      CHECK_FLAG(CVodeSetLinearSolverB(mem, which, LSB, AB));
      CHECK_FLAG(CVodeSetJacFnB(mem, which, lv_jacB));
      CHECK_FLAG(CVodeQuadInitB(mem, which, lv_fQB, qB));
      CHECK_FLAG(CVodeQuadSStolerancesB(mem, which, 1e-8, 1e-10));
      CHECK_FLAG(CVodeSetQuadErrConB(mem, which, SUNTRUE));
      double tB = 0.0;
      for (int k = 9; k >= 0; --k) {
        CHECK_FLAG(CVodeB(mem, k, CV_NORMAL));
        CHECK_FLAG(CVodeGetB(mem, which, &tB, yB));
        CHECK_FLAG(CVodeGetQuadB(mem, which, &tB, qB));
        if (k == 0) break;
        d(yB)[0] += 2 * (ys[k - 1][0] - 1);
        d(yB)[1] += 2 * (ys[k - 1][1] - 1);
        CHECK_FLAG(CVodeReInitB(mem, which, k, yB));
        CHECK_FLAG(CVodeQuadReInitB(mem, which, qB));
      }
      grad->assign(d(qB), d(qB) + 4);
    }
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    if (LSB) SUNLinSolFree(LSB);
    if (AB) SUNMatDestroy(AB);
    if (yB) N_VDestroy(yB);
    if (qB) N_VDestroy(qB);
    N_VDestroy(y);
    return L;
  }
};

// ---------------------------------------------------------------------------
// costate: the same tasks, model written once (built-in models).
using namespace costate::ode;

struct IntegralOfY3 {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[2];
  }
};
/// Robertson with G as a fourth state (z' = y3): costate's "forward alone"
/// computing G, as the plain program's forward computes its quadrature.
struct RobertsonWithG {
  template <class T>
  void rhs(double t, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    Robertson{}.rhs<T>(t, y.first(3), p, dydt.first(3));
    dydt[3] = y[2];
  }
};
LeastSquares lv_observations() {
  LeastSquares ls;
  ls.n_states = 2;
  for (int k = 1; k <= 10; ++k) {
    ls.times.push_back(k);
    ls.data.push_back(1.0);
    ls.data.push_back(1.0);
  }
  ls.weights = {2.0, 2.0};
  return ls;
}

// CPU time of the process (the machine is shared: wall time counts the
// other processes' share of the cores).
double seconds(const std::function<void()>& f) {
  const double a = costate::bench::cpu_seconds();
  f();
  return costate::bench::cpu_seconds() - a;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0, s = 0.0;
  for (double v : b) s = std::max(s, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / s);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 51;
  Plain plain;
  Plain plain_cv;  // the same program on costate's vector operations
  plain_cv.costate_vectors = true;

  // Robertson.
  const Problem<Robertson> rob{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 4e7}};
  // atol = 1e-6: the absolute tolerance of G (costate's z, the plain
  // program's quadrature).
  const IntegratorOptions rob_opt{.method = Method::CvodesBdf, .rtol = 1e-6, .atol = 1e-6,
                                  .atol_per_state = {1e-8, 1e-14, 1e-6}, .max_steps = 100000};
  const Problem<RobertsonWithG> rob_g{RobertsonWithG{}, {1.0, 0.0, 0.0, 0.0}, {0.04, 1e4, 3e7},
                                      {0.0, 4e7}};
  const IntegratorOptions rob_g_opt{.method = Method::CvodesBdf, .rtol = 1e-6,
                                    .atol_per_state = {1e-8, 1e-14, 1e-6, 1e-6},
                                    .max_steps = 100000};
  const CvodesAdjoint rob_adj{.steps = 150, .rtol = 1e-6, .atol = 1e-8};
  // Lotka–Volterra.
  Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  lv.output_times = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const IntegratorOptions lv_opt{.method = Method::CvodesBdf, .rtol = 1e-8, .atol = 1e-10};
  const LeastSquares obs = lv_observations();
  const IntegratorOptions lv_dopri{.method = Method::Dopri5, .rtol = 1e-8, .atol = 1e-10};

  // Answers first (checked against each other), then timing.
  std::vector<double> g_plain, g_plain_lv;
  const double G_plain = plain.robertson(true, &g_plain);
  const GradientResult g_rob = gradient(rob, IntegralOfY3{}, rob_adj, rob_opt);
  const double L_plain = plain.lotka_volterra(true, &g_plain_lv);
  const GradientResult g_lv = gradient(lv, obs, CvodesAdjoint{.steps = plain.lv_steps}, lv_opt);
  const GradientResult g_lv_ca = gradient(lv, obs, ContinuousAdjoint{}, lv_dopri);
  std::printf("Robertson G: plain %.10g, costate %.10g; dG/dp max rel diff %.2e\n", G_plain,
              g_rob.objective, max_rel(g_rob.wrt_parameters, g_plain));
  std::printf("Lotka-Volterra L: plain %.10g, costate %.10g; dL/dp max rel diff %.2e "
              "(continuous adjoint, dopri5: %.2e)\n",
              L_plain, g_lv.objective, max_rel(g_lv.wrt_parameters, g_plain_lv),
              max_rel(g_lv_ca.wrt_parameters, g_plain_lv));
  std::printf("Robertson: costate forward %lld steps (alone, with G: %lld; without G: %lld); %s\n",
              static_cast<long long>(g_rob.summary.steps),
              static_cast<long long>(integrate(rob_g, rob_g_opt).summary.steps),
              static_cast<long long>(integrate(rob, rob_opt).summary.steps),
              g_rob.summary.message.c_str());

  // Native implicit steppers: the same tolerances; forward = ode::integrate
  // of the same steps (z = G outside the error test, landing on the
  // observation times), gradient = ode::gradient's discrete adjoint.
  struct NativeRow {
    const char* name;
    std::function<void()> forward;
    std::function<GradientResult()> grad;
    std::vector<double> tf, tg;
    GradientResult result;
  };
  std::vector<NativeRow> native;
  const Problem<RobertsonWithG> rob_gz = rob_g;
  Problem<LotkaVolterra> lv_native = lv;
  for (Method meth : {Method::Bdf, Method::Sdirk3}) {
    const IntegratorOptions ro{.method = meth, .rtol = 1e-6,
                               .atol_per_state = {1e-8, 1e-14, 1e-6}, .max_steps = 100000};
    const IntegratorOptions roz{.method = meth, .rtol = 1e-6,
                                .atol_per_state = {1e-8, 1e-14, 1e-6, 1e300},
                                .max_steps = 100000};
    const IntegratorOptions lo{.method = meth, .rtol = 1e-8, .atol = 1e-10,
                               .stop_at_outputs = true, .max_steps = 100000};
    const bool bdf = meth == Method::Bdf;
    // Store all (cp = 0) or binomial(10), made inside each timed call: a
    // Checkpointing captured by value draws GCC 12's -Wmaybe-uninitialized
    // (a false positive on the variant's string member).
    static constexpr auto schedule = [](int cp) {
      return cp == 0 ? Checkpointing{StoreAll{}} : Checkpointing{Binomial{.snapshots = 10}};
    };
    for (int cp = 0; cp < 2; ++cp) {
      native.push_back({bdf ? (cp == 0 ? "Robertson, native bdf, store all" : "Robertson, native bdf, binomial(10)")
                            : (cp == 0 ? "Robertson, native sdirk3, store all" : "Robertson, native sdirk3, binomial(10)"),
                        [&rob_gz, roz] { (void)integrate(rob_gz, roz); },
                        [&rob, ro, cp] { return gradient(rob, IntegralOfY3{}, DiscreteAdjoint{schedule(cp)}, ro); },
                        {}, {}, {}});
    }
    for (int cp = 0; cp < 2; ++cp) {
      native.push_back({bdf ? (cp == 0 ? "Lotka-Volterra, native bdf, store all" : "Lotka-Volterra, native bdf, binomial(10)")
                            : (cp == 0 ? "Lotka-Volterra, native sdirk3, store all" : "Lotka-Volterra, native sdirk3, binomial(10)"),
                        [&lv_native, lo] { (void)integrate(lv_native, lo); },
                        [&lv, &obs, lo, cp] { return gradient(lv, obs, DiscreteAdjoint{schedule(cp)}, lo); },
                        {}, {}, {}});
    }
  }
  for (NativeRow& row : native) {
    row.result = row.grad();
    const bool rob_row = row.name[0] == 'R';
    std::printf("%s: %lld steps, %lld forward step evaluations; d/dp max rel diff to the plain "
                "CVODES program %.2e\n",
                row.name, static_cast<long long>(row.result.checkpoints.steps),
                static_cast<long long>(row.result.checkpoints.forward_steps),
                max_rel(row.result.wrt_parameters, rob_row ? g_plain : g_plain_lv));
  }

  // Checkpoint spacing: one interval holding every forward step (Hermite
  // data of each step kept, 2n doubles a step; CVodeAdjInit allocates the
  // interval's storage up front, so the spacing is the forward step count
  // plus a margin, not "infinite"), so CVodeB recomputes no forward
  // interval — for both programs.
  const int rob_one = static_cast<int>(g_rob.summary.steps) + 50;
  const int lv_one = static_cast<int>(g_lv.summary.steps) + 50;
  std::printf("one checkpoint interval: %d steps (Robertson), %d (Lotka-Volterra)\n", rob_one,
              lv_one);
  Plain plain_one;
  plain_one.rob_steps = rob_one;
  plain_one.lv_steps = lv_one;
  const CvodesAdjoint rob_adj_one{.steps = rob_one, .rtol = 1e-6, .atol = 1e-8};
  const CvodesAdjoint lv_adj_one{.steps = lv_one};
  {
    std::vector<double> g1;
    plain_one.robertson(true, &g1);
    const GradientResult r1 = gradient(rob, IntegralOfY3{}, rob_adj_one, rob_opt);
    std::printf("one checkpoint interval: Robertson dG/dp max rel diff plain %.2e, costate %.2e "
                "(to the plain program's default spacing)\n",
                max_rel(g1, g_plain), max_rel(r1.wrt_parameters, g_plain));
    plain_one.lotka_volterra(true, &g1);
    const GradientResult l1 = gradient(lv, obs, lv_adj_one, lv_opt);
    std::printf("one checkpoint interval: Lotka-Volterra dL/dp max rel diff plain %.2e, costate %.2e\n",
                max_rel(g1, g_plain_lv), max_rel(l1.wrt_parameters, g_plain_lv));
  }

  std::vector<double> t[19];
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> g;
    t[0].push_back(seconds([&] { plain.robertson(false, nullptr); }));
    t[1].push_back(seconds([&] { plain.robertson(true, &g); }));
    t[2].push_back(seconds([&] { (void)integrate(rob_g, rob_g_opt); }));
    t[3].push_back(seconds([&] { (void)gradient(rob, IntegralOfY3{}, rob_adj, rob_opt); }));
    t[4].push_back(seconds([&] { plain.lotka_volterra(false, nullptr); }));
    t[5].push_back(seconds([&] { plain.lotka_volterra(true, &g); }));
    t[6].push_back(seconds([&] { (void)integrate(lv, lv_opt); }));
    t[7].push_back(seconds([&] { (void)gradient(lv, obs, CvodesAdjoint{.steps = plain.lv_steps}, lv_opt); }));
    auto lvd = lv;
    t[8].push_back(seconds([&] { (void)integrate(lvd, lv_dopri); }));
    t[9].push_back(seconds([&] { (void)gradient(lv, obs, ContinuousAdjoint{}, lv_dopri); }));
    t[10].push_back(seconds([&] { (void)gradient(lv, obs, DiscreteAdjoint{}, lv_dopri); }));
    t[11].push_back(seconds([&] { plain_one.robertson(true, &g); }));
    t[12].push_back(seconds([&] { (void)gradient(rob, IntegralOfY3{}, rob_adj_one, rob_opt); }));
    t[13].push_back(seconds([&] { plain_one.lotka_volterra(true, &g); }));
    t[14].push_back(seconds([&] { (void)gradient(lv, obs, lv_adj_one, lv_opt); }));
    t[15].push_back(seconds([&] { plain_cv.robertson(false, nullptr); }));
    t[16].push_back(seconds([&] { plain_cv.robertson(true, &g); }));
    t[17].push_back(seconds([&] { plain_cv.lotka_volterra(false, nullptr); }));
    t[18].push_back(seconds([&] { plain_cv.lotka_volterra(true, &g); }));
    for (NativeRow& row : native) {
      row.tf.push_back(seconds(row.forward));
      row.tg.push_back(seconds([&] { (void)row.grad(); }));
    }
  }
  double m[19];
  for (int i = 0; i < 19; ++i) m[i] = median(t[i]);
  std::printf("\nmedian of %d rounds (seconds)\n", repeats);
  std::printf("%-44s %12s %12s %18s\n", "task", "forward", "gradient", "gradient/forward");
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Robertson, plain CVODES (hand-written)", m[0], m[1],
              m[1] / m[0]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Robertson, plain CVODES, costate's vectors", m[15],
              m[16], m[16] / m[15]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Robertson, costate cvodes_adjoint (AD)", m[2], m[3],
              m[3] / m[2]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, plain CVODES (hand-written)", m[4],
              m[5], m[5] / m[4]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, plain CVODES, costate's vectors",
              m[17], m[18], m[18] / m[17]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, costate cvodes_adjoint (AD)", m[6],
              m[7], m[7] / m[6]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, costate continuous (dopri5)", m[8],
              m[9], m[9] / m[8]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, costate discrete (dopri5)", m[8],
              m[10], m[10] / m[8]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Robertson, plain CVODES, one interval", m[0], m[11],
              m[11] / m[0]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Robertson, costate cvodes_adjoint, one interval",
              m[2], m[12], m[12] / m[2]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, plain CVODES, one interval", m[4],
              m[13], m[13] / m[4]);
  std::printf("%-44s %12.3e %12.3e %18.2f\n", "Lotka-Volterra, costate cvodes_adj., one interval",
              m[6], m[14], m[14] / m[6]);
  for (const NativeRow& row : native) {
    const double f = median(row.tf), g = median(row.tg);
    std::printf("%-44s %12.3e %12.3e %18.2f\n", row.name, f, g, g / f);
  }
  std::printf("\ncostate backend / hand-written: Robertson forward %.2f, gradient %.2f; "
              "Lotka-Volterra forward %.2f, gradient %.2f\n",
              m[2] / m[0], m[3] / m[1], m[6] / m[4], m[7] / m[5]);
  std::printf("costate backend / hand-written on the same (costate's) vector operations: "
              "Robertson forward %.2f, gradient %.2f; Lotka-Volterra forward %.2f, gradient %.2f\n",
              m[2] / m[15], m[3] / m[16], m[6] / m[17], m[7] / m[18]);
  return 0;
}
