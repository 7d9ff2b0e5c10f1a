#pragma once
// Private: SUNDIALS' dense and band matrices and LU solvers with
// costate-compiled arithmetic (only solvers/ includes SUNDIALS headers) —
// for the reason of serial_vector.hpp: Debian 12's SUNDIALS 6.4.1 is
// compiled without optimisation, and its dense LU (SUNDlsMat_denseGETRF /
// GETRS) was 30 % of the IDAS DAE benchmark at 100 unknowns, its band LU
// and band matrix operations half of bench_cvodes_linear_solvers.
//
// The objects stay SUNDIALS' own (SUNDenseMatrix, SUNLinSol_Dense: the
// same content, IDs and pivots); only their operation tables change:
//   matrix: zero, copy, scale-add, c A + I, matrix-vector product, clone
//           (a clone gets these operations too: CVODES keeps its saved
//           Jacobian in one);
//   solver: setup (LU with partial pivoting, in place) and solve (the
//           permuted triangular solves).
// Band (SUNBandMatrix, SUNLinSol_Band): zero, copy (between matrices of
// one layout; otherwise SUNDIALS' own, which may widen the target), c A + I
// on the band, clone; the LU's setup and solve (LINPACK's band form: row
// swaps right of the pivot only, each swap applied in the solve before its
// column's elimination).
// Each operation performs SUNDIALS' floating-point operations in SUNDIALS'
// order — the dense LU: pivot on the first largest |a_ik|, the column
// below it scaled by the pivot's reciprocal, the trailing columns updated
// a_ij −= a_kj a_ik column by column — so results are the same bits
// (dense_matrix_test checks each against SUNDIALS' functions).
// dense_matrix.cpp is compiled with -ffp-contract=off.
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sundials/sundials_linearsolver.h>
#include <sundials/sundials_matrix.h>

namespace costate::detail {

/// SUNDenseMatrix(m, n, ctx) with costate's operations; null when SUNDIALS
/// cannot allocate (as SUNDenseMatrix). The caller owns it (SUNMatDestroy).
SUNMatrix new_dense_matrix(sunindextype m, sunindextype n, SUNContext ctx);

/// SUNLinSol_Dense(y, A, ctx) with costate's setup and solve; null when
/// SUNDIALS refuses (as SUNLinSol_Dense). The caller owns it (SUNLinSolFree).
SUNLinearSolver new_dense_solver(N_Vector y, SUNMatrix A, SUNContext ctx);

/// SUNBandMatrix(n, mu, ml, ctx) and SUNLinSol_Band(y, A, ctx) likewise.
SUNMatrix new_band_matrix(sunindextype n, sunindextype mu, sunindextype ml, SUNContext ctx);
SUNLinearSolver new_band_solver(N_Vector y, SUNMatrix A, SUNContext ctx);

/// Replaces A's operations by costate's (A must be a SUNDenseMatrix or a
/// SUNBandMatrix).
void use_costate_operations(SUNMatrix A);

/// Replaces the LU solver's setup and solve by costate's (S must be a
/// SUNLinSol_Dense or a SUNLinSol_Band).
void use_costate_operations(SUNLinearSolver S);

}  // namespace costate::detail
