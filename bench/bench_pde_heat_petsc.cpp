// The 2-D heat benchmark (bench_pde_heat.cpp) beside a plain PETSc TS +
// TSAdjoint program solving the same problem, in one binary and one run:
//
//   u_t = ∇·(κ ∇u) + q₀ exp(−|x − c|²/(2σ²)) on [0,1]², n × n cells,
//   cell-centred finite volumes, face κ = arithmetic mean, Dirichlet u = 0
//   by the mirrored ghost (u_ghost = −u_P, κ_ghost = κ_P),
//   κ = 1 + 0.5 sin(2πx) sin(2πy), q₀ = 1, c = (½, ½), σ = 0.1,
//   u0 = sin(πx) sin(πy), Crank–Nicolson, dt = 1e-4, `steps` steps,
//   J = ½ h² Σ u(T)²; gradients dJ/dκ (a field), dJ/dq₀, dJ/du0.
//
// Both sides use CG, rtol 1e-10, atol 1e-50, zero initial guess and PETSc's
// default preconditioner (ILU(0) on one rank, block Jacobi + ILU(0) on
// several), on the same DMDA decomposition.
//
// The PETSc side is written as a PETSc user would (only PETSc calls, no
// costate): DMDA, RHS function and hand-written RHS Jacobian
// (MatSetValuesStencil), TSCN with TS_LINEAR (SNES ksponly), the constant
// Jacobian passed through TSComputeRHSJacobianConstant, TSSetSaveTrajectory
// (memory: every step and its stages), TSSetCostGradients with
// λ(T) = h² u(T), and dG/dp for p = (κ field, q₀) assembled by hand into an
// AIJ matrix of n² + 1 columns (TSSetRHSJacobianP).
//
// Also printed, for bench/README.md's communication projection: per-step
// PETSc message counts/bytes and reductions (PETSc's logging counters
// petsc_isend_ct/len, petsc_allreduce_ct — these count PETSc's own MPI
// calls: halo exchanges, KSP dots/norms), halo bytes per ghost update from
// the DMDA, and checkpoint bytes per step from the schedule itself.
//
//   build/bench/bench_pde_heat_petsc [n=256] [steps=100] [repeats=3] [snapshots=10]
//   mpiexec -n 2 build/bench/bench_pde_heat_petsc 256
#include <petscdmda.h>
#include <petscts.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <numbers>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;

namespace {

using Timing = bench::WallCpu;

/// Median wall and CPU seconds of f() over `repeats` runs, barriers around.
template <class F>
Timing median_wall_cpu(MPI_Comm comm, F&& f, int repeats) {
  return bench::median_wall_cpu(
      [&] {
        f();
        MPI_Barrier(comm);
      },
      repeats, [&] { MPI_Barrier(comm); });
}

/// PETSc's communication counters on this rank (its own MPI calls only).
struct Comm {
  double sends = 0.0, bytes = 0.0, reductions = 0.0;
  static Comm now() {
    return {petsc_isend_ct + petsc_send_ct, petsc_isend_len + petsc_send_len, petsc_allreduce_ct};
  }
  Comm operator-(const Comm& o) const { return {sends - o.sends, bytes - o.bytes, reductions - o.reductions}; }
};

constexpr double kCentre = 0.5, kSigma = 0.1, kQ0 = 1.0, kDt = 1e-4;

double kappa_at(double x, double y) {
  return 1.0 + 0.5 * std::sin(2 * std::numbers::pi * x) * std::sin(2 * std::numbers::pi * y);
}
double u0_at(double x, double y) { return std::sin(std::numbers::pi * x) * std::sin(std::numbers::pi * y); }
double source_at(double x, double y) {
  const double dx = x - kCentre, dy = y - kCentre;
  return std::exp(-(dx * dx + dy * dy) / (2.0 * kSigma * kSigma));
}

// ---------------------------------------------------------------------------
// The plain PETSc program.
namespace peer {

struct Ctx {
  DM da = nullptr;
  PetscInt n = 0;
  PetscReal h = 0.0, q0 = kQ0;
  Vec kappa_local = nullptr;  // κ with ghosts
  Vec source = nullptr;       // s(x, y), global
  const PetscInt* l2g = nullptr;  // ghosted local index → global index
  PetscInt gxs = 0, gys = 0, gxm = 0, gym = 0;
  PetscInt jacobian_calls = 0, jacobianp_calls = 0, rhs_calls = 0;
};

PetscErrorCode rhs_function(TS, PetscReal, Vec U, Vec F, void* vctx) {
  auto* c = static_cast<Ctx*>(vctx);
  PetscFunctionBeginUser;
  ++c->rhs_calls;
  Vec Ul;
  PetscCall(DMGetLocalVector(c->da, &Ul));
  PetscCall(DMGlobalToLocalBegin(c->da, U, INSERT_VALUES, Ul));
  PetscCall(DMGlobalToLocalEnd(c->da, U, INSERT_VALUES, Ul));
  const PetscScalar **u, **k, **s;
  PetscScalar** f;
  PetscCall(DMDAVecGetArrayRead(c->da, Ul, &u));
  PetscCall(DMDAVecGetArrayRead(c->da, c->kappa_local, &k));
  PetscCall(DMDAVecGetArrayRead(c->da, c->source, &s));
  PetscCall(DMDAVecGetArray(c->da, F, &f));
  PetscInt xs, ys, xm, ym;
  PetscCall(DMDAGetCorners(c->da, &xs, &ys, nullptr, &xm, &ym, nullptr));
  const PetscReal ih2 = 1.0 / (c->h * c->h);
  const PetscInt n = c->n;
  for (PetscInt j = ys; j < ys + ym; ++j)
    for (PetscInt i = xs; i < xs + xm; ++i) {
      const PetscScalar uP = u[j][i], kP = k[j][i];
      // Interior face: ½(κ_P + κ_nb)(u_nb − u_P); boundary face: κ_P(−2 u_P).
      PetscScalar acc = 0.0;
      acc += i > 0 ? 0.5 * (kP + k[j][i - 1]) * (u[j][i - 1] - uP) : -2.0 * kP * uP;
      acc += i < n - 1 ? 0.5 * (kP + k[j][i + 1]) * (u[j][i + 1] - uP) : -2.0 * kP * uP;
      acc += j > 0 ? 0.5 * (kP + k[j - 1][i]) * (u[j - 1][i] - uP) : -2.0 * kP * uP;
      acc += j < n - 1 ? 0.5 * (kP + k[j + 1][i]) * (u[j + 1][i] - uP) : -2.0 * kP * uP;
      f[j][i] = acc * ih2 + c->q0 * s[j][i];
    }
  PetscCall(DMDAVecRestoreArray(c->da, F, &f));
  PetscCall(DMDAVecRestoreArrayRead(c->da, c->source, &s));
  PetscCall(DMDAVecRestoreArrayRead(c->da, c->kappa_local, &k));
  PetscCall(DMDAVecRestoreArrayRead(c->da, Ul, &u));
  PetscCall(DMRestoreLocalVector(c->da, &Ul));
  PetscFunctionReturn(0);
}

/// ∂f/∂u, assembled row by row with MatSetValuesStencil.
PetscErrorCode assemble_jacobian(Ctx* c, Mat J) {
  PetscFunctionBeginUser;
  ++c->jacobian_calls;
  const PetscScalar** k;
  PetscCall(DMDAVecGetArrayRead(c->da, c->kappa_local, &k));
  PetscInt xs, ys, xm, ym;
  PetscCall(DMDAGetCorners(c->da, &xs, &ys, nullptr, &xm, &ym, nullptr));
  const PetscReal ih2 = 1.0 / (c->h * c->h);
  const PetscInt n = c->n;
  for (PetscInt j = ys; j < ys + ym; ++j)
    for (PetscInt i = xs; i < xs + xm; ++i) {
      MatStencil row{}, col[5]{};
      PetscScalar v[5];
      row.i = i;
      row.j = j;
      const PetscScalar kP = k[j][i];
      PetscScalar diag = 0.0;
      int m = 1;
      const PetscInt ni[4] = {i - 1, i + 1, i, i};
      const PetscInt nj[4] = {j, j, j - 1, j + 1};
      for (int e = 0; e < 4; ++e) {
        if (ni[e] < 0 || ni[e] >= n || nj[e] < 0 || nj[e] >= n) {
          diag -= 2.0 * kP * ih2;
          continue;
        }
        const PetscScalar w = 0.5 * (kP + k[nj[e]][ni[e]]) * ih2;
        diag -= w;
        col[m].i = ni[e];
        col[m].j = nj[e];
        v[m++] = w;
      }
      col[0] = row;
      v[0] = diag;
      PetscCall(MatSetValuesStencil(J, 1, &row, m, col, v, INSERT_VALUES));
    }
  PetscCall(DMDAVecRestoreArrayRead(c->da, c->kappa_local, &k));
  PetscCall(MatAssemblyBegin(J, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(J, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

/// ∂f/∂p, p = (κ in PETSc's global ordering, then q₀): n² + 1 columns.
PetscErrorCode rhs_jacobian_p(TS, PetscReal, Vec U, Mat A, void* vctx) {
  auto* c = static_cast<Ctx*>(vctx);
  PetscFunctionBeginUser;
  ++c->jacobianp_calls;
  Vec Ul;
  PetscCall(DMGetLocalVector(c->da, &Ul));
  PetscCall(DMGlobalToLocalBegin(c->da, U, INSERT_VALUES, Ul));
  PetscCall(DMGlobalToLocalEnd(c->da, U, INSERT_VALUES, Ul));
  const PetscScalar **u, **s;
  PetscCall(DMDAVecGetArrayRead(c->da, Ul, &u));
  PetscCall(DMDAVecGetArrayRead(c->da, c->source, &s));
  PetscInt xs, ys, xm, ym;
  PetscCall(DMDAGetCorners(c->da, &xs, &ys, nullptr, &xm, &ym, nullptr));
  const PetscReal ih2 = 1.0 / (c->h * c->h);
  const PetscInt n = c->n;
  const auto global = [&](PetscInt i, PetscInt j) { return c->l2g[(j - c->gys) * c->gxm + (i - c->gxs)]; };
  for (PetscInt j = ys; j < ys + ym; ++j)
    for (PetscInt i = xs; i < xs + xm; ++i) {
      const PetscInt row = global(i, j);
      const PetscScalar uP = u[j][i];
      PetscInt cols[6];
      PetscScalar v[6];
      PetscScalar dP = 0.0;
      int m = 1;
      const PetscInt ni[4] = {i - 1, i + 1, i, i};
      const PetscInt nj[4] = {j, j, j - 1, j + 1};
      for (int e = 0; e < 4; ++e) {
        if (ni[e] < 0 || ni[e] >= n || nj[e] < 0 || nj[e] >= n) {
          dP += -2.0 * uP * ih2;
          continue;
        }
        const PetscScalar d = 0.5 * (u[nj[e]][ni[e]] - uP) * ih2;
        dP += d;
        cols[m] = global(ni[e], nj[e]);
        v[m++] = d;
      }
      cols[0] = row;
      v[0] = dP;
      cols[m] = n * n;  // q₀
      v[m++] = s[j][i];
      PetscCall(MatSetValues(A, 1, &row, m, cols, v, INSERT_VALUES));
    }
  PetscCall(DMDAVecRestoreArrayRead(c->da, c->source, &s));
  PetscCall(DMDAVecRestoreArrayRead(c->da, Ul, &u));
  PetscCall(DMRestoreLocalVector(c->da, &Ul));
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

struct Program {
  Ctx ctx;
  Mat J = nullptr, Jp = nullptr;
  Vec u0 = nullptr, u = nullptr, kappa = nullptr, lambda = nullptr, mu = nullptr;
  TS ts_forward = nullptr, ts_adjoint = nullptr;
  PetscInt steps = 0;
  PetscInt ksp_its = 0;  // forward Krylov iterations of the last TSSolve
  PetscInt adjoint_ksp_its = 0;

  PetscErrorCode create_ts(MPI_Comm comm, TS* ts, bool trajectory) {
    PetscFunctionBeginUser;
    PetscCall(TSCreate(comm, ts));
    PetscCall(TSSetProblemType(*ts, TS_LINEAR));
    PetscCall(TSSetType(*ts, TSCN));
    PetscCall(TSSetRHSFunction(*ts, nullptr, rhs_function, &ctx));
    PetscCall(TSSetRHSJacobian(*ts, J, J, TSComputeRHSJacobianConstant, nullptr));
    PetscCall(TSSetTimeStep(*ts, kDt));
    PetscCall(TSSetMaxSteps(*ts, steps));
    PetscCall(TSSetMaxTime(*ts, (static_cast<double>(steps) + 0.5) * kDt));
    PetscCall(TSSetExactFinalTime(*ts, TS_EXACTFINALTIME_STEPOVER));
    SNES snes;
    KSP ksp;
    PetscCall(TSGetSNES(*ts, &snes));
    PetscCall(SNESSetType(snes, SNESKSPONLY));
    PetscCall(SNESGetKSP(snes, &ksp));
    PetscCall(KSPSetType(ksp, KSPCG));
    PetscCall(KSPSetTolerances(ksp, 1e-10, 1e-50, 1e5, 10000));
    if (trajectory) {
      PetscCall(TSSetSaveTrajectory(*ts));
      PetscCall(TSSetRHSJacobianP(*ts, Jp, rhs_jacobian_p, &ctx));
    }
    PetscCall(TSSetFromOptions(*ts));
    PetscFunctionReturn(0);
  }

  PetscErrorCode setup(MPI_Comm comm, PetscInt n, PetscInt nsteps, PetscInt px, PetscInt py) {
    PetscFunctionBeginUser;
    steps = nsteps;
    ctx.n = n;
    ctx.h = 1.0 / static_cast<double>(n);
    PetscCall(DMDACreate2d(comm, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, n, n, px, py, 1, 1,
                           nullptr, nullptr, &ctx.da));
    PetscCall(DMSetUp(ctx.da));
    PetscCall(DMCreateGlobalVector(ctx.da, &u0));
    PetscCall(VecDuplicate(u0, &u));
    PetscCall(VecDuplicate(u0, &kappa));
    PetscCall(VecDuplicate(u0, &ctx.source));
    PetscCall(VecDuplicate(u0, &lambda));
    PetscCall(DMCreateLocalVector(ctx.da, &ctx.kappa_local));
    PetscInt xs, ys, xm, ym;
    PetscCall(DMDAGetCorners(ctx.da, &xs, &ys, nullptr, &xm, &ym, nullptr));
    PetscCall(DMDAGetGhostCorners(ctx.da, &ctx.gxs, &ctx.gys, nullptr, &ctx.gxm, &ctx.gym, nullptr));
    {
      PetscScalar **a, **k, **s;
      PetscCall(DMDAVecGetArray(ctx.da, u0, &a));
      PetscCall(DMDAVecGetArray(ctx.da, kappa, &k));
      PetscCall(DMDAVecGetArray(ctx.da, ctx.source, &s));
      for (PetscInt j = ys; j < ys + ym; ++j)
        for (PetscInt i = xs; i < xs + xm; ++i) {
          const double x = (i + 0.5) * ctx.h, y = (j + 0.5) * ctx.h;
          a[j][i] = u0_at(x, y);
          k[j][i] = kappa_at(x, y);
          s[j][i] = source_at(x, y);
        }
      PetscCall(DMDAVecRestoreArray(ctx.da, ctx.source, &s));
      PetscCall(DMDAVecRestoreArray(ctx.da, kappa, &k));
      PetscCall(DMDAVecRestoreArray(ctx.da, u0, &a));
    }
    PetscCall(DMGlobalToLocalBegin(ctx.da, kappa, INSERT_VALUES, ctx.kappa_local));
    PetscCall(DMGlobalToLocalEnd(ctx.da, kappa, INSERT_VALUES, ctx.kappa_local));
    ISLocalToGlobalMapping map;
    PetscCall(DMGetLocalToGlobalMapping(ctx.da, &map));
    PetscCall(ISLocalToGlobalMappingGetIndices(map, &ctx.l2g));
    // The RHS Jacobian, assembled once (the problem is linear, autonomous).
    PetscCall(DMCreateMatrix(ctx.da, &J));
    PetscCall(assemble_jacobian(&ctx, J));
    // dG/dp: rows like the state, columns κ (same layout) plus q₀ on the last rank.
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const PetscInt nloc = xm * ym, extra = rank == size - 1 ? 1 : 0;
    PetscCall(MatCreateAIJ(comm, nloc, nloc + extra, n * n, n * n + 1, 6, nullptr, 3, nullptr, &Jp));
    PetscCall(MatSetOption(Jp, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE));
    PetscCall(VecCreateMPI(comm, nloc + extra, n * n + 1, &mu));
    PetscCall(create_ts(comm, &ts_forward, false));
    PetscCall(create_ts(comm, &ts_adjoint, true));
    PetscFunctionReturn(0);
  }

  PetscErrorCode restart(TS ts, PetscInt nsteps) {
    PetscFunctionBeginUser;
    PetscCall(TSSetTime(ts, 0.0));
    PetscCall(TSSetStepNumber(ts, 0));
    PetscCall(TSSetTimeStep(ts, kDt));
    PetscCall(TSSetMaxSteps(ts, nsteps));
    PetscCall(VecCopy(u0, u));
    PetscFunctionReturn(0);
  }

  PetscErrorCode solve_its(TS ts, PetscInt* its) {
    PetscFunctionBeginUser;
    SNES snes;
    KSP ksp;
    PetscCall(TSGetSNES(ts, &snes));
    PetscCall(SNESGetKSP(snes, &ksp));
    PetscCall(KSPGetTotalIterations(ksp, its));  // cumulative over the KSP's life
    PetscFunctionReturn(0);
  }

  /// Set-up outside the timings (as costate's): one step of each TS builds
  /// its preconditioner.
  PetscErrorCode warm_up() {
    PetscFunctionBeginUser;
    PetscCall(restart(ts_forward, 1));
    PetscCall(TSSolve(ts_forward, u));
    PetscCall(restart(ts_adjoint, 1));
    PetscCall(TSSolve(ts_adjoint, u));
    PetscCall(TSResetTrajectory(ts_adjoint));
    PetscFunctionReturn(0);
  }

  PetscErrorCode forward() {
    PetscFunctionBeginUser;
    PetscCall(restart(ts_forward, steps));
    PetscInt its0 = 0;
    PetscCall(solve_its(ts_forward, &its0));
    PetscCall(TSSolve(ts_forward, u));
    PetscCall(solve_its(ts_forward, &ksp_its));
    ksp_its -= its0;
    PetscFunctionReturn(0);
  }

  /// J = ½ h² Σ u(T)² and its gradients: λ → dJ/du0, μ → (dJ/dκ, dJ/dq₀).
  PetscErrorCode gradient(PetscReal* J_value) {
    PetscFunctionBeginUser;
    PetscCall(TSResetTrajectory(ts_adjoint));
    PetscCall(restart(ts_adjoint, steps));
    PetscInt its0 = 0, its_forward = 0;
    PetscCall(solve_its(ts_adjoint, &its0));
    PetscCall(TSSolve(ts_adjoint, u));
    PetscCall(solve_its(ts_adjoint, &its_forward));
    PetscReal norm;
    PetscCall(VecNorm(u, NORM_2, &norm));
    *J_value = 0.5 * ctx.h * ctx.h * norm * norm;
    PetscCall(VecCopy(u, lambda));
    PetscCall(VecScale(lambda, ctx.h * ctx.h));
    PetscCall(VecZeroEntries(mu));
    PetscCall(TSSetCostGradients(ts_adjoint, 1, &lambda, &mu));
    PetscCall(TSAdjointSolve(ts_adjoint));
    PetscInt its_total = 0;
    PetscCall(solve_its(ts_adjoint, &its_total));
    adjoint_ksp_its = its_total - its_forward;
    PetscFunctionReturn(0);
  }

  PetscErrorCode destroy() {
    PetscFunctionBeginUser;
    if (ctx.da) {
      ISLocalToGlobalMapping map;
      PetscCall(DMGetLocalToGlobalMapping(ctx.da, &map));
      PetscCall(ISLocalToGlobalMappingRestoreIndices(map, &ctx.l2g));
    }
    PetscCall(TSDestroy(&ts_forward));
    PetscCall(TSDestroy(&ts_adjoint));
    PetscCall(MatDestroy(&J));
    PetscCall(MatDestroy(&Jp));
    PetscCall(VecDestroy(&u0));
    PetscCall(VecDestroy(&u));
    PetscCall(VecDestroy(&kappa));
    PetscCall(VecDestroy(&lambda));
    PetscCall(VecDestroy(&mu));
    PetscCall(VecDestroy(&ctx.source));
    PetscCall(VecDestroy(&ctx.kappa_local));
    PetscCall(DMDestroy(&ctx.da));
    PetscFunctionReturn(0);
  }
};

}  // namespace peer

// ---------------------------------------------------------------------------
// costate's side: exactly bench_pde_heat's set-up.
struct Setup {
  pde::Operator<pde::Heat2D> op;
  pde::GlobalVector u0;
  Setup(MPI_Comm comm, std::int64_t n)
      : op(comm,
           [&] {
             pde::Domain d;
             d.cells = {n, n, 1};
             d.boundary = {pde::Boundary::Dirichlet, pde::Boundary::Dirichlet, pde::Boundary::Periodic};
             return d;
           }(),
           {}, {kQ0}) {
    const pde::Grid& g = op.grid();
    u0 = g.create_global();
    const auto& o = g.owned();
    std::size_t e = 0;
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++e) {
        const double x = g.coordinate(0, i), y = g.coordinate(1, j);
        u0[e] = u0_at(x, y);
        op.fields()[e] = kappa_at(x, y);
      }
  }
};

pde::ThetaOptions options(std::int64_t steps) {
  pde::ThetaOptions o;
  o.theta = 0.5;
  o.dt = kDt;
  o.steps = steps;
  o.ksp.ksp_type = "cg";
  o.ksp.rtol = 1e-10;
  o.ksp.atol = 1e-50;
  return o;
}

/// Counts the schedule's snapshot writes (the Ops of ode::reverse_sweep with
/// no state): checkpoint bytes = saves × owned entries × 8.
struct CountingOps {
  std::int64_t i = 0, saves = 0;
  std::vector<std::int64_t> slot_index;
  std::int64_t index() const { return i; }
  void advance() { ++i; }
  void save(std::size_t slot) {
    ++saves;
    if (slot_index.size() <= slot) slot_index.resize(slot + 1);
    slot_index[slot] = i;
  }
  void restore(std::size_t slot) { i = slot_index[slot]; }
  void reverse_step() {}
};

std::int64_t snapshot_saves(const ode::Checkpointing& c, std::int64_t steps) {
  CountingOps ops;
  ode::reverse_sweep(c, ops, steps);
  return ops.saves;
}

double sum_ranks(MPI_Comm comm, double v) {
  double out = 0.0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Environment env(argc, argv);
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  const std::int64_t steps = argc > 2 ? std::atoll(argv[2]) : 100;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  // Binomial snapshots (bench_pde_heat: 10 for 100 steps; fewer steps need
  // fewer snapshots for the same recomputation, e.g. 2 for 10 steps).
  const std::int64_t snapshots = argc > 4 && argv[4][0] != '-' ? std::atoll(argv[4]) : 10;
  const MPI_Comm comm = env.comm();
  try {
    // ---- costate
    Setup s(comm, n);
    pde::ThetaIntegrator<pde::Heat2D> integ(s.op, options(steps));
    const pde::Grid& grid = s.op.grid();
    auto u = grid.create_global();
    deep_copy(u, s.u0);
    integ.step(u, 0);  // set-up: Jacobian, I − hθJ, preconditioner
    const std::int64_t its0 = integ.krylov_iterations();
    Comm c0 = Comm::now();
    const Timing c_fwd = median_wall_cpu(comm, [&] {
      deep_copy(u, s.u0);
      integ.integrate(u);
    }, repeats);
    const Comm c_fwd_comm = Comm::now() - c0;
    const double c_its = static_cast<double>(integ.krylov_iterations() - its0) / static_cast<double>(repeats * steps);
    const auto objective = pde::Objective::misfit(grid.create_global());
    pde::ThetaGradient g_all, g_bin;
    c0 = Comm::now();
    const Timing c_all = median_wall_cpu(comm, [&] { g_all = integ.gradient(s.u0, objective, ode::StoreAll{}); }, repeats);
    const Comm c_all_comm = Comm::now() - c0;
    const ode::Binomial binomial{.snapshots = snapshots};
    c0 = Comm::now();
    const Timing c_bin = median_wall_cpu(comm, [&] { g_bin = integ.gradient(s.u0, objective, binomial); }, repeats);
    const Comm c_bin_comm = Comm::now() - c0;

    // ---- plain PETSc, same decomposition
    peer::Program p;
    const auto procs = grid.processes();
    PetscCallAbort(comm, p.setup(comm, static_cast<PetscInt>(n), static_cast<PetscInt>(steps), procs[0], procs[1]));
    PetscCallAbort(comm, p.warm_up());
    const PetscInt rhs_before = p.ctx.rhs_calls;
    c0 = Comm::now();
    const Timing p_fwd = median_wall_cpu(comm, [&] { PetscCallAbort(comm, p.forward()); }, repeats);
    const Comm p_fwd_comm = Comm::now() - c0;
    const PetscInt rhs_fwd = p.ctx.rhs_calls - rhs_before;
    PetscReal p_J = 0.0;
    const PetscInt jp_before = p.ctx.jacobianp_calls, rhs_before2 = p.ctx.rhs_calls;
    c0 = Comm::now();
    const Timing p_adj = median_wall_cpu(comm, [&] { PetscCallAbort(comm, p.gradient(&p_J)); }, repeats);
    const Comm p_adj_comm = Comm::now() - c0;
    const PetscInt jp_calls = p.ctx.jacobianp_calls - jp_before, rhs_adj = p.ctx.rhs_calls - rhs_before2;

    // ---- compare the gradients (same DMDA layout on both sides)
    PetscInt xs, ys, xm, ym;
    PetscCallAbort(comm, DMDAGetCorners(p.ctx.da, &xs, &ys, nullptr, &xm, &ym, nullptr));
    const auto& o = grid.owned();
    const int same_layout_local = o.start[0] == xs && o.start[1] == ys && o.count[0] == xm && o.count[1] == ym;
    int same_layout = 0;
    MPI_Allreduce(&same_layout_local, &same_layout, 1, MPI_INT, MPI_MIN, comm);
    double kn2 = 0.0, kd2 = 0.0, ln2 = 0.0, ld2 = 0.0, q_local = 0.0, pk2 = 0.0;
    {
      const PetscScalar* m;
      const PetscScalar* l;
      PetscCallAbort(comm, VecGetArrayRead(p.mu, &m));
      PetscCallAbort(comm, VecGetArrayRead(p.lambda, &l));
      const std::size_t nloc = static_cast<std::size_t>(xm * ym);
      for (std::size_t e = 0; e < nloc; ++e) {
        pk2 += m[e] * m[e];
        if (same_layout) {
          const double a = g_all.wrt_fields[e], b = g_all.wrt_initial_state[e];
          kn2 += a * a;
          kd2 += (m[e] - a) * (m[e] - a);
          ln2 += b * b;
          ld2 += (l[e] - b) * (l[e] - b);
        }
      }
      if (env.rank() == env.size() - 1) q_local = m[nloc];
      PetscCallAbort(comm, VecRestoreArrayRead(p.lambda, &l));
      PetscCallAbort(comm, VecRestoreArrayRead(p.mu, &m));
    }
    const double p_q0 = sum_ranks(comm, q_local);
    const double p_knorm = std::sqrt(sum_ranks(comm, pk2));
    const double kappa_rel = std::sqrt(sum_ranks(comm, kd2) / sum_ranks(comm, kn2));
    const double u0_rel = std::sqrt(sum_ranks(comm, ld2) / sum_ranks(comm, ln2));
    const double c_knorm = l2_norm(g_all.wrt_fields);
    const double c_q0 = g_all.wrt_parameters[0];

    // ---- communication: DMDA halo of one ghost update (star stencil, width 1)
    // Owned box plus the face ghosts the star exchange fills (no corners; outer
    // boundary ghosts are not communicated).
    std::int64_t halo_cells = 0;
    for (int d = 0; d < 2; ++d) {
      const auto D = static_cast<std::size_t>(d);
      const std::int64_t other = o.count[1 - D];
      if (o.start[D] > 0) halo_cells += other;
      if (o.start[D] + o.count[D] < n) halo_cells += other;
    }
    const double halo_bytes_rank = 8.0 * static_cast<double>(halo_cells);
    const double halo_bytes_total = sum_ranks(comm, halo_bytes_rank);
    const std::int64_t saves_all = snapshot_saves(ode::StoreAll{}, steps);
    const std::int64_t saves_bin = snapshot_saves(binomial, steps);
    const double state_bytes = 8.0 * static_cast<double>(n * n);
    // Counters per rank, summed over ranks, per step (per repeat).
    const auto per_step = [&](const Comm& c) {
      const double k = 1.0 / static_cast<double>(repeats * steps);
      return Comm{sum_ranks(comm, c.sends) * k, sum_ranks(comm, c.bytes) * k,
                  c.reductions * k};  // reductions: collective, count once (rank 0's)
    };
    const Comm cf = per_step(c_fwd_comm), ca = per_step(c_all_comm), cb = per_step(c_bin_comm),
               pf = per_step(p_fwd_comm), pa = per_step(p_adj_comm);

    if (env.is_root()) {
      const double S = static_cast<double>(steps);
      std::printf("2-D heat, CN, %lld^2 cells, %lld steps, %d rank(s) (%d x %d), median of %d; costate %s\n",
                  static_cast<long long>(n), static_cast<long long>(steps), env.size(), procs[0], procs[1],
                  repeats, integ.solver().description().c_str());
      std::printf("%-34s %9s %9s %9s %9s %7s %7s\n", "", "fwd wall", "grad wall", "ratio", "ratio CPU",
                  "its/st", "adj/st");
      std::printf("%-34s %8.3fs %8.3fs %9.2f %9.2f %7.1f %7.1f\n", "costate StoreAll", c_fwd.wall, c_all.wall,
                  c_all.wall / c_fwd.wall, c_all.cpu / c_fwd.cpu, c_its,
                  static_cast<double>(g_all.adjoint_krylov_iterations) / S);
      char bin_name[64];
      std::snprintf(bin_name, sizeof bin_name, "costate Binomial(%lld): %lld steps", static_cast<long long>(snapshots),
                    static_cast<long long>(g_bin.forward_steps));
      std::printf("%-34s %8.3fs %8.3fs %9.2f %9.2f %7.1f %7.1f\n", bin_name, c_fwd.wall,
                  c_bin.wall, c_bin.wall / c_fwd.wall, c_bin.cpu / c_fwd.cpu, c_its,
                  static_cast<double>(g_bin.adjoint_krylov_iterations) / S);
      std::printf("%-34s %8.3fs %8.3fs %9.2f %9.2f %7.1f %7.1f\n", "PETSc TSCN + TSAdjoint (memory)", p_fwd.wall,
                  p_adj.wall, p_adj.wall / p_fwd.wall, p_adj.cpu / p_fwd.cpu, static_cast<double>(p.ksp_its) / S,
                  static_cast<double>(p.adjoint_ksp_its) / S);
      std::printf("  costate / PETSc: forward %.2f, forward+adjoint %.2f (StoreAll)\n", c_fwd.wall / p_fwd.wall,
                  c_all.wall / p_adj.wall);
      std::printf("  PETSc callbacks per repeat: rhs %.0f forward, %.0f with adjoint; RHS JacobianP %.0f\n",
                  static_cast<double>(rhs_fwd) / repeats, static_cast<double>(rhs_adj) / repeats,
                  static_cast<double>(jp_calls) / repeats);
      std::printf("  J: costate %.15e  PETSc %.15e  rel diff %.1e\n", g_all.objective, p_J,
                  std::abs(g_all.objective - p_J) / std::abs(g_all.objective));
      std::printf("  dJ/dq0: costate %.12e  PETSc %.12e  rel diff %.1e\n", c_q0, p_q0,
                  std::abs(c_q0 - p_q0) / std::abs(c_q0));
      std::printf("  |dJ/dkappa|_2: costate %.12e  PETSc %.12e  rel diff %.1e\n", c_knorm, p_knorm,
                  std::abs(c_knorm - p_knorm) / c_knorm);
      if (same_layout)
        std::printf("  fields: |dkappa_c - dkappa_p|/|dkappa_c| = %.1e, |du0_c - du0_p|/|du0_c| = %.1e\n",
                    kappa_rel, u0_rel);
      std::printf("communication per time step (all ranks; PETSc's own MPI calls):\n");
      std::printf("  halo per ghost update: %.0f bytes (rank 0: %.0f), state %.0f bytes\n", halo_bytes_total,
                  halo_bytes_rank, state_bytes);
      std::printf("  %-30s %10s %12s %11s\n", "", "messages", "bytes", "reductions");
      const auto line = [](const char* name, const Comm& c) {
        std::printf("  %-30s %10.1f %12.0f %11.1f\n", name, c.sends, c.bytes, c.reductions);
      };
      line("costate forward", cf);
      line("costate forward+adj StoreAll", ca);
      line("costate forward+adj Binomial", cb);
      line("PETSc forward", pf);
      line("PETSc forward+adjoint", pa);
      std::printf("  checkpoint bytes written per step (all ranks): StoreAll %.0f (%lld saves), Binomial %.0f "
                  "(%lld saves); PETSc memory trajectory: solution + stages per step\n",
                  static_cast<double>(saves_all) * state_bytes / S, static_cast<long long>(saves_all),
                  static_cast<double>(saves_bin) * state_bytes / S, static_cast<long long>(saves_bin));
    }
    PetscCallAbort(comm, p.destroy());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pde_heat_petsc: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
