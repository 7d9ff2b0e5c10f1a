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
#include <sunmatrix/sunmatrix_band.h>
#include <sunmatrix/sunmatrix_dense.h>
#include <sunmatrix/sunmatrix_sparse.h>

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
#include "sundials/dense_matrix.hpp"

namespace costate::ode {

int IdasAdjoint::resolved_steps(std::size_t n) const {
  return steps > 0 ? steps : auto_checkpoint_steps(n, 2);
}

void IdasAdjoint::validate() const {
  COSTATE_CHECK(steps >= 0, "sensitivity.checkpoint_steps = "
                                << steps
                                << " is invalid: IDAS needs >= 1 steps between checkpoints (or auto)");
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

/// CVODES' callback context plus the map between IDAS' unknowns u and the
/// System's state X (idas.hpp, Dae): semi-explicit (r = 0) u = X and
/// R = M u' − G(X); fully implicit (r = residual_n) X = (y, y', z) from
/// u = (y, z), u' = (y', z'), and R = M u' − G(X) with M = diag(0 (the
/// rows F of y), 1 (z)), row(i) = r + i of G, column col(j) of X for u_j
/// and dcol(j) = r + j for u'_j (j < r).
struct DaeContext {
  Context c;
  const std::uint8_t* algebraic = nullptr;  // IDAS' id: 1 = algebraic (nu entries)
  std::size_t nu = 0, nx = 0, r = 0;
  std::vector<double> X, G, GX, SX;  // scratch: nx, nx, nx × ns, nx × ns
  std::vector<double> lX;            // scratch: λ on the System's rows (nx)
  std::vector<double> structured;    // scratch: F_y on a band / sparse structure (jac stays n_x²)
  double mass(std::size_t i) const { return r > 0 ? (i < r ? 0.0 : 1.0) : (algebraic[i] ? 0.0 : 1.0); }
  std::size_t row(std::size_t i) const { return r + i; }
  std::size_t col(std::size_t j) const { return j < r ? j : j + r; }
  /// X from (u, u').
  void state(const double* u, const double* up, double* x) const {
    for (std::size_t j = 0; j < nu; ++j) x[col(j)] = u[j];
    for (std::size_t j = 0; j < r; ++j) x[r + j] = up[j];
  }
};

// R(t, u, u') = M u' − G(X(u, u')).
int residual(realtype t, N_Vector yy, N_Vector yp, N_Vector rr, void* user) {
  auto* x = static_cast<DaeContext*>(user);
  x->state(data(yy), data(yp), x->X.data());
  const int r = guarded(&x->c, [&] { x->c.sys->rhs(t, x->X.data(), x->G.data()); });
  if (r != 0) return r;
  double* R = data(rr);
  const double* Yp = data(yp);
  for (std::size_t i = 0; i < x->nu; ++i) {
    const double g = x->G[x->row(i)];
    if (!std::isfinite(g)) return 1;  // recoverable: IDAS retries a smaller step
    R[i] = x->mass(i) * Yp[i] - g;
  }
  return 0;
}

/// A(i, i) += d_i on a band or sparse (CSC, diagonal in the structure)
/// SUNMatrix.
void add_to_diagonal(SUNMatrix A, std::size_t n, const std::function<double(std::size_t)>& d) {
  if (SUNMatGetID(A) == SUNMATRIX_BAND) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto k = static_cast<sunindextype>(i);
      SM_ELEMENT_B(A, k, k) += d(i);
    }
    return;
  }
  COSTATE_CHECK(SUNMatGetID(A) == SUNMATRIX_SPARSE && SM_SPARSETYPE_S(A) == CSC_MAT,
                "IDAS backend: the Newton matrix is neither band nor CSC sparse");
  const sunindextype* starts = SM_INDEXPTRS_S(A);
  const sunindextype* rows = SM_INDEXVALS_S(A);
  double* values = SM_DATA_S(A);
  for (std::size_t j = 0; j < n; ++j) {
    bool found = false;
    for (sunindextype k = starts[j]; k < starts[j + 1]; ++k)
      if (rows[k] == static_cast<sunindextype>(j)) {
        values[k] += d(j);
        found = true;
      }
    COSTATE_CHECK(found, "IDAS backend: the sparse Newton matrix has no diagonal entry in column " << j);
  }
}

// ∂R/∂u + c ∂R/∂u' = c M − (G_X[:, col] + c G_X[:, dcol]), column-major.
// Band or sparse (a semi-explicit DAE, integrator.cvodes_linear_solver):
// F_y on the structure (CVODES' fill), then −F_y + I (SUNMatScaleAddI, the
// structure holds the diagonal), then c M − I on the diagonal.
int jacobian(realtype t, realtype cj, N_Vector yy, N_Vector yp, N_Vector, SUNMatrix J,
             void* user, N_Vector, N_Vector, N_Vector) {
  auto* x = static_cast<DaeContext*>(user);
  return guarded(&x->c, [&] {
    x->state(data(yy), data(yp), x->X.data());
    if (x->c.forward_ls.kind != CvodesLinearSolver::Dense) {
      cvodes::fill_jacobian(x->c.forward_ls, J, *x->c.sys, t, x->X.data(), x->structured);
      COSTATE_CHECK(SUNMatScaleAddI(-1.0, J) == SUNMAT_SUCCESS, "IDAS backend: SUNMatScaleAddI failed");
      add_to_diagonal(J, x->nu, [&](std::size_t i) { return cj * x->mass(i) - 1.0; });
      return;
    }
    const std::size_t nu = x->nu, nx = x->nx;
    std::vector<double>& g = x->c.jac;
    x->c.sys->jacobian(t, x->X.data(), g.data());
    double* a = SUNDenseMatrix_Data(J);
    for (std::size_t j = 0; j < nu; ++j)
      for (std::size_t i = 0; i < nu; ++i) {
        double v = -g[x->col(j) * nx + x->row(i)];
        if (j < x->r) v -= cj * g[(x->r + j) * nx + x->row(i)];
        a[j * nu + i] = v + (i == j ? cj * x->mass(i) : 0.0);
      }
  });
}

// R_j = M s_j' − (G_X S_X,j + G_p e_j),  S_X,j = X(s_j, s_j').
int sensitivity_residual(int ns, realtype t, N_Vector yy, N_Vector yp, N_Vector, N_Vector* yS,
                         N_Vector* ypS, N_Vector* rS, void* user, N_Vector, N_Vector, N_Vector) {
  auto* x = static_cast<DaeContext*>(user);
  Context& c = x->c;
  const std::size_t nx = x->nx;
  x->state(data(yy), data(yp), x->X.data());
  for (std::size_t j = 0; j < static_cast<std::size_t>(ns); ++j) {
    x->state(data(yS[j]), data(ypS[j]), &x->SX[j * nx]);
    c.yS[j] = &x->SX[j * nx];
    c.ySdot[j] = &x->GX[j * nx];
  }
  const int r = guarded(&c, [&] {
    c.sys->sensitivity_rhs(t, x->X.data(), static_cast<std::size_t>(ns), c.yS.data(),
                           c.ySdot.data());
  });
  if (r != 0) return r;
  for (int j = 0; j < ns; ++j) {
    double* R = data(rS[j]);
    const double* Sp = data(ypS[j]);
    const double* g = &x->GX[static_cast<std::size_t>(j) * nx];
    for (std::size_t i = 0; i < x->nu; ++i) R[i] = x->mass(i) * Sp[i] - g[x->row(i)];
  }
  return 0;
}

// The System's root functions at X(u, u') (IDARootInit: events).
int root_functions(realtype t, N_Vector yy, N_Vector yp, realtype* g, void* user) {
  auto* x = static_cast<DaeContext*>(user);
  x->state(data(yy), data(yp), x->X.data());
  return guarded(&x->c, [&] { x->c.sys->roots(t, x->X.data(), g); });
}

/// g_X = G_Xᵀ λ_X and g_p = G_pᵀ λ_X with λ_X the System rows of λ (nu).
void backward_products(DaeContext& x, double t, const double* yy, const double* yp,
                       const double* lambda, double* gp) {
  x.state(yy, yp, x.X.data());
  std::fill(x.lX.begin(), x.lX.end(), 0.0);
  for (std::size_t i = 0; i < x.nu; ++i) x.lX[x.row(i)] = lambda[i];
  x.c.sys->vjp(t, x.X.data(), x.lX.data(), x.G.data(), gp);
}

// The adjoint DAE (idas.hpp, IdasAdjoint). Semi-explicit: M λ' + F_yᵀ λ = 0
// (the running cost is the augmented state's last row, so its λ_z = 1
// carries q_yᵀ): R_B = M λ' + G_Xᵀ λ. Fully implicit: the unknowns (λ, ν),
// ν = R_{u'}ᵀ λ, so that (R_{u'}ᵀ λ)' − R_uᵀ λ = 0 needs no derivative of
// R_{u'}:  R_B = (D ν' + G_X[col]ᵀ λ;  ν − M λ + G_X[dcol]ᵀ λ),  D = the
// differential mask (ν_a = 0: F does not read y'_a).
int residual_backward(realtype t, N_Vector yy, N_Vector yp, N_Vector yB, N_Vector ypB, N_Vector rB,
                      void* user) {
  auto* x = static_cast<DaeContext*>(user);
  const int r = guarded(&x->c, [&] {
    backward_products(*x, t, data(yy), data(yp), data(yB), x->c.fp.data());
  });
  if (r != 0) return r;
  double* R = data(rB);
  const double* L = data(yB);
  const double* Lp = data(ypB);
  const std::size_t nu = x->nu;
  const std::vector<double>& g = x->G;
  if (x->r == 0) {
    for (std::size_t i = 0; i < nu; ++i) R[i] = g[i] + x->mass(i) * Lp[i];
    return 0;
  }
  for (std::size_t j = 0; j < nu; ++j) {
    R[j] = g[x->col(j)] + (x->algebraic[j] ? 0.0 : Lp[nu + j]);
    R[nu + j] = L[nu + j] - x->mass(j) * L[j] + (j < x->r ? g[x->r + j] : 0.0);
  }
  return 0;
}

// μ' = −G_pᵀ λ backward, so μ(t0) = ∫ G_pᵀ λ dt.
int quadrature_backward(realtype t, N_Vector yy, N_Vector yp, N_Vector yB, N_Vector,
                        N_Vector qdot, void* user) {
  auto* x = static_cast<DaeContext*>(user);
  const int r = guarded(&x->c, [&] {
    backward_products(*x, t, data(yy), data(yp), data(yB), data(qdot));
  });
  double* d = data(qdot);
  for (std::size_t j = 0; j < x->c.sys->np; ++j) d[j] = -d[j];
  return r;
}

// ∂R_B/∂λ + c ∂R_B/∂λ': semi-explicit G_Xᵀ + c M; fully implicit the
// 2nu × 2nu matrix [G_X[row, col]ᵀ, c D; G_X[row, dcol]ᵀ − M, I].
int jacobian_backward(realtype t, realtype cj, N_Vector yy, N_Vector yp, N_Vector, N_Vector,
                      N_Vector, SUNMatrix JB, void* user, N_Vector, N_Vector, N_Vector) {
  auto* x = static_cast<DaeContext*>(user);
  return guarded(&x->c, [&] {
    const std::size_t nu = x->nu, nx = x->nx, r = x->r;
    x->state(data(yy), data(yp), x->X.data());
    std::vector<double>& a = x->c.jac;
    x->c.sys->jacobian(t, x->X.data(), a.data());
    double* b = SUNDenseMatrix_Data(JB);
    const std::size_t m = r == 0 ? nu : 2 * nu;  // rows of JB
    std::fill(b, b + m * m, 0.0);
    // Column k (λ_k): row j of the first block is ∂(G_Xᵀλ)[col j]/∂λ_k = G_X[row k, col j].
    for (std::size_t k = 0; k < nu; ++k)
      for (std::size_t j = 0; j < nu; ++j) {
        b[k * m + j] = a[x->col(j) * nx + x->row(k)];
        if (r > 0) b[k * m + nu + j] = (j < r ? a[(r + j) * nx + x->row(k)] : 0.0) -
                                       (j == k ? x->mass(j) : 0.0);
      }
    if (r == 0) {
      for (std::size_t i = 0; i < nu; ++i) b[i * m + i] += cj * x->mass(i);
      return;
    }
    for (std::size_t j = 0; j < nu; ++j) {
      b[(nu + j) * m + j] = x->algebraic[j] ? 0.0 : cj;
      b[(nu + j) * m + nu + j] = 1.0;
    }
  });
}

/// Frees the SUNDIALS objects however the run ends.
struct Objects {
  SUNContext sunctx = nullptr;
  N_Vector y = nullptr, yp = nullptr, atol = nullptr, id = nullptr;
  N_Vector yB = nullptr, ypB = nullptr, qB = nullptr, idB = nullptr;
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
    for (N_Vector v : {idB, qB, ypB, yB, id, atol, yp, y})
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

/// IDACreate, init (u from X0; u' from G on the rows with M = 1, the given
/// y' of a fully implicit model, 0 as the algebraic rows' guess),
/// tolerances, the id vector, the dense Newton solver, limits.
void setup(Objects& o, DaeContext& x, const Dae& dae, const cvodes::Settings& st, double t0,
           const double* X0) {
  const cvodes::System& sys = *dae.system;
  const std::size_t nx = sys.n, r = dae.residual_n;
  COSTATE_CHECK(sys.rhs && sys.jacobian, "IDAS backend: the system needs rhs and jacobian");
  COSTATE_CHECK(nx > 2 * r || (r > 0 && nx == 2 * r) || r == 0,
                "IDAS backend: residual_n = " << r << " does not fit " << nx << " states");
  const std::size_t nu = nx - r;
  COSTATE_CHECK(dae.algebraic.size() == nu,
                "IDAS backend: " << dae.algebraic.size() << " mask entries for " << nu << " unknowns");
  COSTATE_CHECK(st.atol.size() == nx,
                "IDAS backend: " << st.atol.size() << " absolute tolerances for " << nx << " states");
  COSTATE_CHECK(r == 0 || st.linear_solver == CvodesLinearSolver::Dense ||
                    st.linear_solver == CvodesLinearSolver::Automatic,
                "integrator.method = idas: a fully implicit DAE takes the dense linear solver "
                "only (got integrator.cvodes_linear_solver = "
                    << to_string(st.linear_solver) << ")");
  x.c.sys = &sys;
  x.c.jac.assign(nx * nx, 0.0);
  x.c.fp.assign(std::max<std::size_t>(sys.np, 1), 0.0);
  x.algebraic = dae.algebraic.data();
  x.nu = nu;
  x.nx = nx;
  x.r = r;
  x.X.assign(nx, 0.0);
  x.G.assign(nx, 0.0);
  x.lX.assign(nx, 0.0);
  o.y = new_vector(nu, o.sunctx);
  o.yp = new_vector(nu, o.sunctx);
  o.id = new_vector(nu, o.sunctx);
  o.atol = new_vector(nu, o.sunctx);
  sys.rhs(t0, X0, x.G.data());
  for (std::size_t i = 0; i < nu; ++i) {
    data(o.y)[i] = X0[x.col(i)];
    data(o.yp)[i] = x.mass(i) != 0.0 ? x.G[x.row(i)] : i < r ? X0[r + i] : 0.0;
    data(o.id)[i] = dae.algebraic[i] ? 0.0 : 1.0;
    data(o.atol)[i] = st.atol[x.col(i)];
  }
  o.mem = IDACreate(o.sunctx);
  COSTATE_CHECK(o.mem != nullptr, "IDAS backend: IDACreate failed");
  ida_check(x.c, IDASetErrHandlerFn(o.mem, error_handler, &x.c), "IDASetErrHandlerFn");
  ida_check(x.c, IDAInit(o.mem, residual, t0, o.y, o.yp), "IDAInit");
  ida_check(x.c, IDASetUserData(o.mem, &x), "IDASetUserData");
  ida_check(x.c, IDASVtolerances(o.mem, st.rtol, o.atol), "IDASVtolerances");
  ida_check(x.c, IDASetId(o.mem, o.id), "IDASetId");
  if (dae.algebraic_unmeasured) ida_check(x.c, IDASetSuppressAlg(o.mem, SUNTRUE), "IDASetSuppressAlg");
  if (r == 0) {
    // CVODES' Newton linear solvers (dense, band, KLU on the AD structure),
    // resolved as for CVODES; the matrix c M − F_y is filled by jacobian().
    x.c.forward_ls = cvodes::make_newton_linear_solver(sys, st.linear_solver,
                                                       cvodes::JacobianSide::Forward, o.y, o.sunctx);
    o.J = x.c.forward_ls.matrix;
    o.ls = x.c.forward_ls.solver;
  } else {
    o.J = costate::detail::new_dense_matrix(static_cast<sunindextype>(nu),
                                           static_cast<sunindextype>(nu), o.sunctx);
    COSTATE_CHECK(o.J != nullptr, "IDAS backend: SUNDenseMatrix failed");
    o.ls = costate::detail::new_dense_solver(o.y, o.J, o.sunctx);
    COSTATE_CHECK(o.ls != nullptr, "IDAS backend: SUNLinSol_Dense failed");
  }
  ida_check(x.c, IDASetLinearSolver(o.mem, o.ls, o.J), "IDASetLinearSolver");
  ida_check(x.c, IDASetJacFn(o.mem, jacobian), "IDASetJacFn");
  ida_check(x.c, IDASetMaxNumSteps(o.mem, static_cast<long>(st.max_steps)), "IDASetMaxNumSteps");
  if (st.first_step > 0.0) ida_check(x.c, IDASetInitStep(o.mem, st.first_step), "IDASetInitStep");
  if (st.max_step > 0.0) ida_check(x.c, IDASetMaxStep(o.mem, st.max_step), "IDASetMaxStep");
  if (st.min_step > 0.0) ida_check(x.c, IDASetMinStep(o.mem, st.min_step), "IDASetMinStep");
}

/// The System's state X from IDAS' current (u, u').
void current_state(const Objects& o, const DaeContext& x, double* X) {
  x.state(data(o.y), data(o.yp), X);
}

/// Consistent initial values (IDA_YA_YDP_INIT: the algebraic u and the
/// differential u' from the differential u — for a fully implicit model
/// always, its y'_d are unknowns too), and the sensitivities' when they are
/// initialised. X (the System's state) receives the result. A failure
/// throws, naming the equation with the largest residual at the given
/// initial values.
void consistent_start(Objects& o, DaeContext& x, const Dae& dae, double t0, double tout1,
                      std::vector<double>& X, InitialCorrection* correction) {
  InitialCorrection c;
  c.algebraic = any_algebraic(dae) || x.r > 0;
  if (c.algebraic) {
    const int flag = IDACalcIC(o.mem, IDA_YA_YDP_INIT, tout1);
    if (x.c.error) std::rethrow_exception(x.c.error);
    if (flag < 0) {
      std::vector<double> G(x.nx);
      dae.system->rhs(t0, X.data(), G.data());
      std::size_t worst = x.nu;
      for (std::size_t i = 0; i < x.nu; ++i)
        if (x.mass(i) == 0.0 && (worst == x.nu || !(std::abs(G[x.row(i)]) <= std::abs(G[x.row(worst)]))))
          worst = i;
      std::ostringstream os;
      os.precision(16);
      os << "integrator.method = idas: the initial values could not be made consistent "
            "(IDACalcIC: "
         << ida_flag_name(flag) << (x.c.last_error.empty() ? "" : " — ") << x.c.last_error
         << "); at the given initial values the largest residual is ";
      if (x.r > 0)
        os << "residual equation " << worst << ": " << G[x.row(worst)]
           << ". Give initial values (y and y') near a solution of F(t0, y, y', p) = 0";
      else
        os << "algebraic equation " << worst << " (state " << worst << "): " << G[worst]
           << ". Give algebraic initial values near a solution of the constraints";
      throw Error(os.str());
    }
    ida_check(x.c, IDAGetConsistentIC(o.mem, o.y, o.yp), "IDAGetConsistentIC");
    const double* yc = data(o.y);
    for (std::size_t i = 0; i < x.nu; ++i) {
      const double given = X[x.col(i)];
      const double d = std::abs(yc[i] - given);
      if (d > c.max_change) {
        c.max_change = d;
        c.state = i;
      }
      if (d > 100.0 * std::numeric_limits<double>::epsilon() * (1.0 + std::abs(given))) ++c.changed;
    }
    current_state(o, x, X.data());
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

/// IDASensInit on a set-up run: ns directions from S (column-major n_x ×
/// ns, S(t0)), their derivatives from the System (guesses on the algebraic
/// rows, which consistent_start corrects), in the error test.
void init_sensitivities(Objects& o, DaeContext& x, const cvodes::System& sys, double t0,
                        const std::vector<double>& y, std::size_t ns, std::vector<double>& S) {
  const std::size_t nx = sys.n, nu = x.nu, r = x.r;
  x.c.yS.resize(ns);
  x.c.ySdot.resize(ns);
  x.SX.assign(nx * ns, 0.0);
  x.GX.assign(nx * ns, 0.0);
  o.ns = static_cast<int>(ns);
  o.yS = N_VCloneVectorArray(o.ns, o.y);
  o.ypS = N_VCloneVectorArray(o.ns, o.y);
  COSTATE_CHECK(o.yS != nullptr && o.ypS != nullptr, "IDAS backend: N_VCloneVectorArray failed");
  // s_j(t0) given (S_X's u rows); s_j'(t0): G_X S_X + G_p e_j on the rows
  // with M = 1, a fully implicit model's given y' rows (S_X's rows r … 2r)
  // and 0 on the algebraic rows — guesses IDACalcIC replaces.
  for (std::size_t d = 0; d < ns; ++d) {
    x.c.yS[d] = &S[d * nx];
    x.c.ySdot[d] = &x.GX[d * nx];
  }
  sys.sensitivity_rhs(t0, y.data(), ns, x.c.yS.data(), x.c.ySdot.data());
  for (std::size_t d = 0; d < ns; ++d)
    for (std::size_t i = 0; i < nu; ++i) {
      data(o.yS[d])[i] = S[d * nx + x.col(i)];
      data(o.ypS[d])[i] =
          x.mass(i) != 0.0 ? x.GX[d * nx + x.row(i)] : i < r ? S[d * nx + r + i] : 0.0;
    }
  // The corrector: simultaneous for a semi-explicit DAE; staggered (the
  // state's Newton converged first, then the linear sensitivity systems)
  // for a fully implicit one — the simultaneous Newton drops ∂R_s/∂(y, y')
  // = F_{y'y}[s'] + …, which for a state-dependent F_{y'} grows with c like
  // the Newton matrix itself, so its contraction does not improve as the
  // step shrinks (measured: ImplicitClosedForm failed to converge at every
  // step size down to 1e-9; staggered takes it to t1 at rtol 1e-10).
  ida_check(x.c, IDASensInit(o.mem, o.ns, r > 0 ? IDA_STAGGERED : IDA_SIMULTANEOUS,
                             sensitivity_residual, o.yS, o.ypS),
            "IDASensInit");
  ida_check(x.c, IDASensEEtolerances(o.mem), "IDASensEEtolerances");
  ida_check(x.c, IDASetSensErrCon(o.mem, SUNTRUE), "IDASetSensErrCon");
}

/// S_X = X(s, s') per direction, from IDAS' current sensitivities.
void sensitivities_to(const Objects& o, const DaeContext& x, std::vector<double>& S) {
  for (int d = 0; d < o.ns; ++d)
    x.state(data(o.yS[d]), data(o.ypS[d]), &S[static_cast<std::size_t>(d) * x.nx]);
}

}  // namespace

std::string InitialCorrection::report() const {
  if (!algebraic || changed == 0) return "";
  std::ostringstream os;
  os.precision(6);
  os << by << " made the initial values consistent: " << changed
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
    current_state(o, x, y.data());
    out(j, outputs[j], y.data());
    if (!stop_at_outputs) ida_check(x.c, IDASetStopTime(o.mem, t1), "IDASetStopTime");
  }
  current_state(o, x, y.data());
  collect(o.mem, s);
  return s;
}

cvodes::Stats integrate_to_root(
    const Dae& dae, const cvodes::Settings& settings, double t0, double t_end,
    std::vector<double>& y, std::span<const double> outputs,
    const std::function<void(std::size_t, double, const double*, const double*)>& out,
    double& root_time, std::vector<int>& directions, cvodes::RootSensitivities sensitivities) {
  const cvodes::System& sys = *dae.system;
  COSTATE_CHECK(sys.roots && sys.n_roots > 0, "IDAS backend: the system has no root functions");
  COSTATE_CHECK(t_end > t0, "IDAS backend: integrate_to_root needs t_end > t0");
  Objects o;
  DaeContext x;
  setup(o, x, dae, settings, t0, y.data());
  std::vector<double>* S = sensitivities.S;
  if (S) {
    COSTATE_CHECK(sensitivities.ns >= 1 && S->size() == sys.n * sensitivities.ns,
                  "IDAS backend: S must hold n × ns = " << sys.n * sensitivities.ns << " values");
    init_sensitivities(o, x, sys, t0, y, sensitivities.ns, *S);
  }
  // y (and S) are consistent after an instant's update (the events re-solve
  // the algebraic states, their tangent jump includes that solve):
  // IDACalcIC forms u'_d and corrects what round-off left.
  consistent_start(o, x, dae, t0, t_end, y, nullptr);
  if (S) sensitivities_to(o, x, *S);
  ida_check(x.c, IDARootInit(o.mem, static_cast<int>(sys.n_roots), root_functions), "IDARootInit");
  ida_check(x.c, IDASetStopTime(o.mem, t_end), "IDASetStopTime");
  cvodes::Stats s;
  s.final_time = t0;
  root_time = std::numeric_limits<double>::quiet_NaN();
  directions.assign(sys.n_roots, 0);
  double t = t0;
  std::size_t j = 0;
  while (j < outputs.size() && outputs[j] <= t0) ++j;
  auto fetch = [&] {
    if (S) {
      ida_check(x.c, IDAGetSens(o.mem, &t, o.yS), "IDAGetSens");
      if (x.r > 0)
        for (int d = 0; d < o.ns; ++d)
          ida_check(x.c, IDAGetSensDky1(o.mem, t, 1, d, o.ypS[d]), "IDAGetSensDky1");
      sensitivities_to(o, x, *S);
    }
    current_state(o, x, y.data());
  };
  for (;;) {
    const double target = j < outputs.size() && outputs[j] < t_end ? outputs[j] : t_end;
    const int flag = IDASolve(o.mem, target, &t, o.y, o.yp, IDA_NORMAL);
    if (x.c.error) std::rethrow_exception(x.c.error);
    s.final_time = t;
    if (flag < 0) {
      ida_fail(s, x.c, flag, t);
      break;
    }
    if (flag == IDA_ROOT_RETURN) {
      root_time = t;
      ida_check(x.c, IDAGetRootInfo(o.mem, directions.data()), "IDAGetRootInfo");
      break;
    }
    if (target < t_end) {
      fetch();
      out(j++, t, y.data(), S ? S->data() : nullptr);
      continue;
    }
    break;
  }
  if (s.success) fetch();
  current_state(o, x, y.data());
  collect(o.mem, s);
  return s;
}

cvodes::Stats forward_sensitivities(
    const Dae& dae, const cvodes::Settings& settings, double t0, std::vector<double>& y,
    std::size_t ns, std::vector<double>& S, std::span<const double> stops,
    const std::function<void(std::size_t, double, const double*, const double*)>& at_stop,
    InitialCorrection* correction) {
  const cvodes::System& sys = *dae.system;
  const std::size_t nx = sys.n;
  COSTATE_CHECK(sys.sensitivity_rhs, "IDAS backend: the system needs sensitivity_rhs");
  COSTATE_CHECK(ns >= 1 && S.size() == nx * ns,
                "IDAS backend: S must hold n × ns = " << nx * ns << " values");
  COSTATE_CHECK(!stops.empty() && stops.front() >= t0, "IDAS backend: stops must lie in [t0, t1]");
  Objects o;
  DaeContext x;
  setup(o, x, dae, settings, t0, y.data());
  const std::size_t r = x.r;
  init_sensitivities(o, x, sys, t0, y, ns, S);
  consistent_start(o, x, dae, t0, stops.back() > t0 ? stops.back() : t0 + 1.0, y, correction);
  auto to_S = [&] { sensitivities_to(o, x, S); };
  to_S();
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
      if (r > 0)
        for (std::size_t d = 0; d < ns; ++d)
          ida_check(x.c, IDAGetSensDky1(o.mem, t, 1, static_cast<int>(d), o.ypS[d]),
                    "IDAGetSensDky1");
      to_S();
      current_state(o, x, y.data());
    }
    at_stop(k, stops[k], y.data(), S.data());
  }
  current_state(o, x, y.data());
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
  const std::size_t nx = sys.n, np = sys.np, K = stops.size();
  Objects o;
  DaeContext x;
  setup(o, x, dae, settings, t0, y0.data());
  const std::size_t n = x.nu, r = x.r;
  const std::size_t nb = r > 0 ? 2 * n : n;  // backward unknowns: λ, or (λ, ν)
  const int steps = adj.resolved_steps(n);
  ida_check(x.c, IDAAdjInit(o.mem, steps, IDA_HERMITE), "IDAAdjInit");
  consistent_start(o, x, dae, t0, stops.back(), y0, correction);

  // 1. Forward to every stop (stop time t1 only: IDASolveB recomputes
  //    checkpoint intervals without stop times, so observations take IDAS'
  //    interpolant), keeping u, u' there and the jumps (on the System's
  //    state, then on u: the differential part of λ, fully implicit of ν).
  std::vector<double> jumps(K * n, 0.0), ys(K * n), yps(K * n), X(nx), dX(nx);
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
    current_state(o, x, X.data());
    std::fill(dX.begin(), dX.end(), 0.0);
    jump(k, stops[k], X.data(), dX.data());
    for (std::size_t j = 0; j < n; ++j) jumps[k * n + j] = dX[x.col(j)];
  }
  collect(o.mem, forward);
  forward.checkpoints = ncheck;

  // 2. Backward from t1: λ's differential part (fully implicit: ν's) the
  //    jump there, the rest and the derivatives made consistent by
  //    IDACalcICB; μ(t1) = 0.
  const double rtolB = adj.rtol > 0.0 ? adj.rtol : settings.rtol;
  double atolB = adj.atol;
  if (atolB <= 0.0) {
    atolB = std::numeric_limits<double>::infinity();
    for (double a : settings.atol) atolB = std::min(atolB, a);
  }
  const std::size_t carried = r > 0 ? n : 0;  // where the jumps go in the backward unknowns
  o.yB = new_vector(nb, o.sunctx);
  std::copy(&jumps[(K - 1) * n], &jumps[(K - 1) * n] + n, data(o.yB) + carried);
  o.ypB = new_vector(nb, o.sunctx);
  o.qB = new_vector(np, o.sunctx);
  o.idB = new_vector(nb, o.sunctx);
  for (std::size_t j = 0; j < n; ++j) {
    data(o.idB)[j] = r > 0 || dae.algebraic[j] ? 0.0 : 1.0;
    if (r > 0) data(o.idB)[n + j] = dae.algebraic[j] ? 0.0 : 1.0;
  }
  N_Vector yk = new_vector(n, o.sunctx), ypk = new_vector(n, o.sunctx);
  struct Free {
    N_Vector a, b;
    ~Free() {
      N_VDestroy(a);
      N_VDestroy(b);
    }
  } free_k{yk, ypk};
  const bool algebraic = any_algebraic(dae) || r > 0;
  int which = -1;
  ida_check(x.c, IDACreateB(o.mem, &which), "IDACreateB");
  ida_check(x.c, IDAInitB(o.mem, which, residual_backward, stops.back(), o.yB, o.ypB), "IDAInitB");
  ida_check(x.c, IDASStolerancesB(o.mem, which, rtolB, atolB), "IDASStolerancesB");
  ida_check(x.c, IDASetUserDataB(o.mem, which, &x), "IDASetUserDataB");
  ida_check(x.c, IDASetIdB(o.mem, which, o.idB), "IDASetIdB");
  // Fully implicit: λ and ν_a are algebraic, fixed by ν_d and the forward
  // state; out of the error test, which IDACalcICB's λ' = 0 (it solves
  // for λ, not for λ') would otherwise fail at every restart: order 1's
  // estimate h |λ'| then needs h below atol / |λ'| (measured: 10 error test
  // failures and IDA_ERR_FAIL at an observation's restart).
  // An all-algebraic model's λ too (Dae::algebraic_unmeasured).
  if (r > 0)
    ida_check(x.c, IDASetSuppressAlgB(o.mem, which, SUNTRUE), "IDASetSuppressAlgB");
  ida_check(x.c, IDASetMaxNumStepsB(o.mem, which, static_cast<long>(settings.max_steps)),
            "IDASetMaxNumStepsB");
  o.JB = costate::detail::new_dense_matrix(static_cast<sunindextype>(nb),
                                          static_cast<sunindextype>(nb), o.sunctx);
  COSTATE_CHECK(o.JB != nullptr, "IDAS backend: SUNDenseMatrix failed");
  o.lsB = costate::detail::new_dense_solver(o.yB, o.JB, o.sunctx);
  COSTATE_CHECK(o.lsB != nullptr, "IDAS backend: SUNLinSol_Dense failed");
  ida_check(x.c, IDASetLinearSolverB(o.mem, which, o.lsB, o.JB), "IDASetLinearSolverB");
  ida_check(x.c, IDASetJacFnB(o.mem, which, jacobian_backward), "IDASetJacFnB");
  if (np > 0) {
    ida_check(x.c, IDAQuadInitB(o.mem, which, quadrature_backward, o.qB), "IDAQuadInitB");
    ida_check(x.c, IDAQuadSStolerancesB(o.mem, which, rtolB, atolB),
              "IDAQuadSStolerancesB");
    ida_check(x.c, IDASetQuadErrConB(o.mem, which, SUNTRUE), "IDASetQuadErrConB");
  }
  // The derivatives' guess at (t_k, u_k) — semi-explicit: M λ' = −F_yᵀ λ
  // on the differential rows; fully implicit 0 (the unknowns of a linear
  // system: IDACalcICB's Newton solves it in one iteration) — then the
  // consistent values.
  auto consistent_backward = [&](std::size_t k, double t_next) {
    std::copy(&ys[k * n], &ys[k * n] + n, data(yk));
    std::copy(&yps[k * n], &yps[k * n] + n, data(ypk));
    if (r == 0) {
      sys.vjp(stops[k], &ys[k * n], data(o.yB), data(o.ypB), x.c.fp.data());
      for (std::size_t i = 0; i < n; ++i) data(o.ypB)[i] = dae.algebraic[i] ? 0.0 : -data(o.ypB)[i];
    } else {
      N_VConst(0.0, o.ypB);
    }
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
  // 3. Legs t1 → t_{K−2} → … → stops[0] (adding each stop's jump and
  //    restarting consistently there), then to t0.
  auto next_below = [&](std::size_t k) { return k > 0 ? stops[k - 1] : t0; };
  consistent_backward(K - 1, next_below(K - 1) < stops[K - 1] ? next_below(K - 1) : t0);
  for (std::size_t k = K - 1; k-- > 0;) {
    if (stops[k] < stops[k + 1]) run_back(stops[k]);
    if (stops[k] <= t0) break;
    double* lb = data(o.yB) + carried;
    for (std::size_t i = 0; i < n; ++i) lb[i] += jumps[k * n + i];
    consistent_backward(k, next_below(k) < stops[k] ? next_below(k) : t0);
  }
  if (stops.front() > t0) run_back(t0);
  // dJ/du(t0): λ (semi-explicit, M λ on the differential part) or ν, on
  // the System's state.
  std::vector<double> l0(data(o.yB) + carried, data(o.yB) + carried + n);
  // A stop at t0 (an observation there): its jump joins λ(t0) directly.
  if (stops.front() <= t0)
    for (std::size_t i = 0; i < n; ++i) l0[i] += jumps[i];
  lambda.assign(nx, 0.0);
  for (std::size_t j = 0; j < n; ++j) lambda[x.col(j)] = l0[j];
  mu.assign(np, 0.0);
  if (np > 0) std::copy(data(o.qB), data(o.qB) + np, mu.begin());
  backward.final_time = t0;
}

}  // namespace idas
}  // namespace costate::ode
