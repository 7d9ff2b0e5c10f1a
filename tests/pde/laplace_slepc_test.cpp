// Cross-check of the randomized double-pass eigensolver (pde::laplace_posterior)
// with SLEPc's Krylov–Schur (an independent iterative eigensolver) on the
// manufactured inversion of inversion_problem.hpp at its MAP point, 16 × 16
// cells (256 unknowns), 25 sensors: the eigenvalues of H v = λ Γ⁻¹ v are
// those of the operator Γ H (self-adjoint in the Γ⁻¹ inner product, not in
// ℓ²: solved as a non-Hermitian problem, EPS_NHEP, largest real part).
// Serial (MPI_COMM_SELF): a cross-check, not a scaling test. Built only
// when SLEPc is found (slepc-dev).
#include <gtest/gtest.h>

#include <slepceps.h>

#include <cmath>
#include <cstdio>

#include "costate/pde/laplace.hpp"
#include "inversion_problem.hpp"

using namespace costate;
using namespace costate::pde_test;

namespace {

// Gauss–Newton H has rank ≤ 25 (the sensors): with k + p = 25 the double
// pass is exact up to the solves (PDE rtol 1e-14, prior CG rtol 1e-12);
// SLEPc to its tolerance 1e-12. The 10 dominant eigenvalues agree to 2e-12
// relative (seen); 1e-9 asserted.
constexpr double kAgreement = 1e-9;
constexpr int kRank = 10;
// PETSc 3.18 (Debian 12) has no PETSC_SUCCESS yet.
constexpr PetscErrorCode kPetscOk = 0;

struct Shell {
  Problem* p;
  pde::GlobalVector in, hx, out;
};

PetscErrorCode gamma_h(Mat a, Vec x, Vec y) {
  Shell* s = nullptr;
  PetscCall(MatShellGetContext(a, &s));
  const PetscScalar* xa = nullptr;
  PetscCall(VecGetArrayRead(x, &xa));
  for (std::size_t e = 0; e < s->in.size(); ++e) s->in[e] = xa[e];
  PetscCall(VecRestoreArrayRead(x, &xa));
  s->p->misfit->hessian_vector(s->in, s->hx, pde::HessianProduct::GaussNewton);
  s->p->prior->apply_inverse(s->hx, s->out);
  PetscScalar* ya = nullptr;
  PetscCall(VecGetArray(y, &ya));
  for (std::size_t e = 0; e < s->out.size(); ++e) ya[e] = s->out[e];
  PetscCall(VecRestoreArray(y, &ya));
  return kPetscOk;
}

TEST(LaplaceSlepc, KrylovSchurAgreesWithTheDoublePass) {
  if (world_size() > 1) GTEST_SKIP() << "serial cross-check";
  Problem p(MPI_COMM_SELF, 5, 1e-2, "", 1.0, 5.0, 16);
  const pde::GlobalVector map = p.solve(pde::InversionMethod::NewtonCg, 1e-10).m;
  const pde::LaplacePosterior post =
      pde::laplace_posterior(*p.misfit, *p.prior, map, {.eigen = {.rank = kRank, .oversampling = 15, .seed = 7}});
  // laplace_posterior left the misfit linearized at the MAP point.
  const pde::Grid& fg = *p.op.field_grid();
  const auto n = static_cast<PetscInt>(fg.global_size());
  Shell s{&p, fg.create_global(), fg.create_global(), fg.create_global()};
  // PETSc is up (the test main's Environment); SLEPc registers itself on
  // top of it (it does not initialize PETSc again).
  PetscBool slepc_up = PETSC_FALSE;
  SlepcInitialized(&slepc_up);
  if (!slepc_up) {
    ASSERT_EQ(SlepcInitialize(nullptr, nullptr, nullptr, nullptr), kPetscOk);
  }
  Mat a = nullptr;
  ASSERT_EQ(MatCreateShell(PETSC_COMM_SELF, n, n, n, n, &s, &a), kPetscOk);
  ASSERT_EQ(MatShellSetOperation(a, MATOP_MULT, reinterpret_cast<void (*)(void)>(gamma_h)), kPetscOk);
  EPS eps = nullptr;
  ASSERT_EQ(EPSCreate(PETSC_COMM_SELF, &eps), kPetscOk);
  ASSERT_EQ(EPSSetOperators(eps, a, nullptr), kPetscOk);
  ASSERT_EQ(EPSSetProblemType(eps, EPS_NHEP), kPetscOk);
  ASSERT_EQ(EPSSetWhichEigenpairs(eps, EPS_LARGEST_REAL), kPetscOk);
  ASSERT_EQ(EPSSetDimensions(eps, kRank, PETSC_DEFAULT, PETSC_DEFAULT), kPetscOk);
  ASSERT_EQ(EPSSetTolerances(eps, 1e-12, 2000), kPetscOk);
  ASSERT_EQ(EPSSolve(eps), kPetscOk);
  PetscInt converged = 0, its = 0;
  EPSGetConverged(eps, &converged);
  EPSGetIterationNumber(eps, &its);
  ASSERT_GE(converged, kRank);
  double worst = 0.0;
  for (PetscInt i = 0; i < kRank; ++i) {
    PetscScalar re = 0.0, im = 0.0;
    EPSGetEigenvalue(eps, i, &re, &im);
    EXPECT_LT(std::abs(im), kAgreement * std::abs(re)) << i;
    const double got = post.eigenvalues[static_cast<std::size_t>(i)];
    worst = std::max(worst, std::abs(got - re) / re);
    EXPECT_NEAR(got, re, kAgreement * re) << "eigenvalue " << i;
  }
  std::printf("SLEPc Krylov-Schur (%d restarts) vs double pass, top %d eigenvalues: %.2e relative (lambda_1 = %.6g)\n",
              static_cast<int>(its), kRank, worst, post.eigenvalues[0]);
  EPSDestroy(&eps);
  MatDestroy(&a);
}

}  // namespace
