#pragma once
// The Newton linear solvers of the CVODES backend (cvodes.hpp,
// IntegratorOptions::cvodes_linear_solver) as one small reusable piece: the
// SUNMatrix + SUNLinearSolver for a cvodes::System, forward (∂f/∂y) or
// backward (the adjoint's −f_yᵀ), and the routine that fills that matrix
// from the system's AD callbacks. Private to solvers/sundials/ (includes
// SUNDIALS headers).
//
//   dense : SUNDenseMatrix + SUNLinSol_Dense; sys.jacobian (column-major n × n);
//   band  : SUNBandMatrix(n, upper, lower) + SUNLinSol_Band, bandwidths of
//           sys's structure (swapped for −f_yᵀ); values from sys.sparse_jacobian;
//   sparse: SUNSparseMatrix + SUNLinSol_KLU on sys's structure: CSC_MAT for
//           f_y; for −f_yᵀ the same arrays read as CSR_MAT (the CSC of f_y
//           is the CSR of f_yᵀ) with negated values — no permutation;
//           KLU orders by AMD on A + Aᵀ (cvodes_linear_solver.cpp says why).
// The structure includes the diagonal, so KLU's symbolic analysis of the
// first factorisation stays valid for every later one. For sparse matrices
// the Newton matrix I − γJ is formed by newton_matrix (CVODES' linear-system
// function), not by CVODES' default — which copies a saved J into A (zeroing
// both index arrays first) and searches each column for its diagonal in
// SUNMatScaleAddI at every setup: 8 % of Chen_MSB2009's gradient.
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sundials/sundials_linearsolver.h>
#include <sundials/sundials_matrix.h>

#include <cstddef>
#include <vector>

#include "costate/ode/cvodes.hpp"

namespace costate::ode::cvodes {

/// Which matrix: f_y (the forward problem and its sensitivities) or −f_yᵀ
/// (the backward problem λ' = −f_yᵀ λ − …).
enum class JacobianSide { Forward, Backward };

/// A matrix and its linear solver. Plain handles: free them with
/// destroy() (before the SUNContext they were created in).
struct NewtonLinearSolver {
  CvodesLinearSolver kind = CvodesLinearSolver::Dense;  ///< resolved (never Automatic)
  JacobianSide side = JacobianSide::Forward;
  SUNMatrix matrix = nullptr;
  SUNLinearSolver solver = nullptr;
  /// Sparse only: J's values on the structure as of the last evaluation
  /// (f_y in CSC, or the same array read as the CSR of −f_yᵀ: negated), and
  /// where each diagonal entry sits in them. The matrix's index arrays are
  /// set once, when it is made, and never change.
  std::vector<double> jacobian_values{};
  std::vector<std::size_t> diagonal{};
};

/// Creates the matrix and solver for `sys` with `requested` resolved by
/// resolve_linear_solver; `y` is a template vector of length sys.n. Throws
/// costate::Error if SUNDIALS fails to create them (nothing is left to free).
NewtonLinearSolver make_newton_linear_solver(const System& sys, CvodesLinearSolver requested,
                                             JacobianSide side, N_Vector y, SUNContext ctx);

/// Frees ls's solver and matrix (either may be null) and nulls them.
void destroy(NewtonLinearSolver& ls);

/// Writes f_y(t, y) (Forward) or −f_yᵀ(t, y) (Backward) into `target`, a
/// matrix of ls's kind and side (the one CVODES hands its Jacobian
/// function), from sys's callbacks; `scratch` is resized as needed (n² for
/// a backward dense matrix, nnz for band/sparse). May throw what the
/// callbacks throw.
void fill_jacobian(const NewtonLinearSolver& ls, SUNMatrix target, const System& sys, double t,
                   const double* y, std::vector<double>& scratch);

/// Sparse: forms the Newton matrix A = I − γJ in `target` (ls.matrix, whose
/// index arrays make_newton_linear_solver set), J = ls's side of f_y.
/// Unless `reuse_jacobian`, J is first evaluated at (t, y) into
/// ls.jacobian_values; otherwise the values of the last evaluation are
/// used (CVODES' jok). The same bits as CVODES' SUNMatCopy +
/// SUNMatScaleAddI(−γ) on fill_jacobian's matrix.
void newton_matrix(NewtonLinearSolver& ls, SUNMatrix target, const System& sys, double t,
                   const double* y, bool reuse_jacobian, double gamma);

}  // namespace costate::ode::cvodes
