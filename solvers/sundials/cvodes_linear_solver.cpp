// The Newton linear solvers of the CVODES backend: see cvodes_linear_solver.hpp.
#include "cvodes_linear_solver.hpp"

#include <sunlinsol/sunlinsol_band.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunlinsol/sunlinsol_klu.h>
#include <sunmatrix/sunmatrix_band.h>
#include <sunmatrix/sunmatrix_dense.h>
#include <sunmatrix/sunmatrix_sparse.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "costate/core/error.hpp"
#include "sundials/dense_matrix.hpp"
#include "sundials/serial_vector.hpp"

namespace costate::ode::cvodes {

namespace {
/// KLU's ordering codes (klu.h, SUNLinSol_KLUSetOrdering): 0 AMD, 1 COLAMD
/// (SUNDIALS' default), 2 natural.
constexpr int kKluOrderingAmd = 0;
}  // namespace

CvodesLinearSolver resolve_linear_solver(const System& sys, CvodesLinearSolver requested) {
  if (requested == CvodesLinearSolver::Dense) return requested;
  const bool structure = sys.has_jacobian_structure();
  if (requested == CvodesLinearSolver::Automatic) {
    if (!structure || sys.n < kAutomaticDenseLimit) return CvodesLinearSolver::Dense;
    const double n = static_cast<double>(sys.n);
    const double nnz = static_cast<double>(sys.jacobian_rows.size());
    // Band LU stores n × (2·lower + upper + 1) entries (the upper part
    // grows by `lower` with partial pivoting); KLU about the pattern's
    // non-zeros plus fill.
    const double band = n * static_cast<double>(2 * sys.lower_bandwidth() + sys.upper_bandwidth() + 1);
    constexpr double kBandOverPattern = 4.0;  // band storage at most 4× the non-zeros
    constexpr double kSparseDensity = 0.1;    // KLU while at most 10% of entries are non-zero
    if (band <= kBandOverPattern * nnz) return CvodesLinearSolver::Band;
    // ... or few entries per row (mid-sized reaction networks: Bachmann,
    // 25 states, 89 non-zeros): KLU's solves touch ~nnz(L + U), dense LU's n².
    if (nnz <= kSparseDensity * n * n || nnz <= kAutomaticSparseRowEntries * n)
      return CvodesLinearSolver::Sparse;
    return CvodesLinearSolver::Dense;
  }
  COSTATE_CHECK(structure,
                "integrator.cvodes_linear_solver = "
                    << to_string(requested)
                    << " needs the sparsity structure of df/dy, which this cvodes::System does "
                       "not provide (jacobian_column_starts, jacobian_rows, sparse_jacobian); "
                       "use dense or automatic");
  return requested;
}

void destroy(NewtonLinearSolver& ls) {
  if (ls.solver) SUNLinSolFree(ls.solver);
  if (ls.matrix) SUNMatDestroy(ls.matrix);
  ls.solver = nullptr;
  ls.matrix = nullptr;
}

NewtonLinearSolver make_newton_linear_solver(const System& sys, CvodesLinearSolver requested,
                                             JacobianSide side, N_Vector y, SUNContext ctx) {
  NewtonLinearSolver out;
  out.kind = resolve_linear_solver(sys, requested);
  out.side = side;
  const auto n = static_cast<sunindextype>(sys.n);
  switch (out.kind) {
    case CvodesLinearSolver::Band: {
      sunindextype upper = sys.upper_bandwidth(), lower = sys.lower_bandwidth();
      if (side == JacobianSide::Backward) std::swap(upper, lower);  // the transpose
      out.matrix = costate::detail::new_band_matrix(n, upper, lower, ctx);
      if (out.matrix) out.solver = costate::detail::new_band_solver(y, out.matrix, ctx);
      break;
    }
    case CvodesLinearSolver::Sparse:
      out.matrix = SUNSparseMatrix(n, n, static_cast<sunindextype>(sys.jacobian_rows.size()),
                                   side == JacobianSide::Forward ? CSC_MAT : CSR_MAT, ctx);
      if (out.matrix) out.solver = SUNLinSol_KLU(y, out.matrix, ctx);
      // AMD on the pattern of A + Aᵀ, not SUNDIALS' default COLAMD: a
      // Newton matrix I − γJ of a reaction network is structurally nearly
      // symmetric (each mass-action term couples its species both ways),
      // and COLAMD orders it for an unsymmetric pattern. Measured on
      // Chen_MSB2009 (500 states, 4 400 non-zeros in I − γJ): L + U hold
      // 33 187 entries by COLAMD, 8 246 by AMD, and KLU's refactorisations
      // took 10× less time (bench/README.md "Chen_MSB2009: where the
      // first gradient's time goes").
      if (out.solver && SUNLinSol_KLUSetOrdering(out.solver, kKluOrderingAmd) != SUNLS_SUCCESS) {
        destroy(out);
        COSTATE_CHECK(false, "CVODES backend: SUNLinSol_KLUSetOrdering(AMD) failed (n = " << n
                                                                                           << ")");
      }
      if (out.matrix) {
        // The structure, once (newton_matrix writes only the values), and
        // where each column's diagonal entry sits (the same position in the
        // CSR of the transpose).
        const std::vector<std::int64_t>& starts = sys.jacobian_column_starts;
        const std::vector<std::int64_t>& rows = sys.jacobian_rows;
        std::copy(starts.begin(), starts.end(), SUNSparseMatrix_IndexPointers(out.matrix));
        std::copy(rows.begin(), rows.end(), SUNSparseMatrix_IndexValues(out.matrix));
        out.jacobian_values.assign(rows.size(), 0.0);
        out.diagonal.assign(sys.n, rows.size());
        for (std::size_t j = 0; j < sys.n; ++j)
          for (auto k = starts[j]; k < starts[j + 1]; ++k)
            if (rows[static_cast<std::size_t>(k)] == static_cast<std::int64_t>(j))
              out.diagonal[j] = static_cast<std::size_t>(k);
        for (std::size_t j = 0; j < sys.n; ++j)
          if (out.diagonal[j] == rows.size()) {
            destroy(out);
            COSTATE_CHECK(false, "CVODES backend: the sparse structure lacks the diagonal entry of "
                                 "column "
                                     << j << " (n = " << n << ")");
          }
      }
      break;
    default:
      out.matrix = costate::detail::new_dense_matrix(n, n, ctx);
      if (out.matrix) out.solver = costate::detail::new_dense_solver(y, out.matrix, ctx);
      break;
  }
  if (!out.matrix || !out.solver) {
    destroy(out);
    COSTATE_CHECK(false, "CVODES backend: creating the " << to_string(out.kind)
                                                         << " matrix and linear solver failed (n = "
                                                         << n << ")");
  }
  return out;
}

void fill_jacobian(const NewtonLinearSolver& ls, SUNMatrix target, const System& sys, double t,
                   const double* y, std::vector<double>& scratch) {
  const std::size_t n = sys.n;
  const bool forward = ls.side == JacobianSide::Forward;
  if (ls.kind == CvodesLinearSolver::Dense) {
    double* out = SUNDenseMatrix_Data(target);  // column-major, leading dimension n
    if (forward) {
      sys.jacobian(t, y, out);
      return;
    }
    scratch.resize(n * n);
    sys.jacobian(t, y, scratch.data());
    for (std::size_t col = 0; col < n; ++col)
      for (std::size_t row = 0; row < n; ++row) out[col * n + row] = -scratch[row * n + col];
    return;
  }
  const std::vector<std::int64_t>& starts = sys.jacobian_column_starts;
  const std::vector<std::int64_t>& rows = sys.jacobian_rows;
  scratch.resize(rows.size());
  sys.sparse_jacobian(t, y, scratch.data());
  if (ls.kind == CvodesLinearSolver::Band) {
    SUNMatZero(target);
    for (std::size_t j = 0; j < n; ++j)
      for (auto k = starts[j]; k < starts[j + 1]; ++k) {
        const auto i = static_cast<sunindextype>(rows[static_cast<std::size_t>(k)]);
        const auto jj = static_cast<sunindextype>(j);
        const double v = scratch[static_cast<std::size_t>(k)];
        if (forward)
          SUNBandMatrix_Column(target, jj)[i - jj] = v;  // J(i, j)
        else
          SUNBandMatrix_Column(target, i)[jj - i] = -v;  // (−Jᵀ)(j, i)
      }
    return;
  }
  // Sparse: CSC of f_y, or the same arrays as the CSR of −f_yᵀ. SUNMatZero
  // (which CVODES calls before each evaluation) clears the index arrays too.
  std::copy(starts.begin(), starts.end(), SUNSparseMatrix_IndexPointers(target));
  std::copy(rows.begin(), rows.end(), SUNSparseMatrix_IndexValues(target));
  double* values = SUNSparseMatrix_Data(target);
  if (forward)
    std::copy(scratch.begin(), scratch.end(), values);
  else
    std::transform(scratch.begin(), scratch.end(), values, [](double v) { return -v; });
}

void newton_matrix(NewtonLinearSolver& ls, SUNMatrix target, const System& sys, double t,
                   const double* y, bool reuse_jacobian, double gamma) {
  std::vector<double>& j = ls.jacobian_values;
  if (!reuse_jacobian) {
    sys.sparse_jacobian(t, y, j.data());
    if (ls.side == JacobianSide::Backward)
      for (double& v : j) v = -v;
  }
  // A = (−γ) J + I: CVODES' SUNMatScaleAddI_Sparse scales every entry by
  // c = −γ, then adds 1 on the diagonal — the same operations, in order.
  const double c = -gamma;
  double* a = SUNSparseMatrix_Data(target);
  for (std::size_t k = 0; k < j.size(); ++k) a[k] = c * j[k];
  for (std::size_t d : ls.diagonal) a[d] += 1.0;
}

namespace {

/// assembled_jacobian (gamma null) and assembled_newton_matrix (I − γJ).
std::vector<double> assemble(const System& sys, CvodesLinearSolver solver, bool backward, double t,
                             const double* y, CvodesLinearSolver* resolved, const double* gamma) {
  const std::size_t n = sys.n;
  struct Owned {
    SUNContext ctx = nullptr;
    N_Vector v = nullptr;
    ~Owned() {
      if (v) N_VDestroy(v);
      if (ctx) SUNContext_Free(&ctx);
    }
  } o;
  COSTATE_CHECK(SUNContext_Create(nullptr, &o.ctx) >= 0, "CVODES backend: SUNContext_Create failed");
  o.v = costate::detail::new_serial_vector(std::max<std::size_t>(n, 1), o.ctx);
  struct Solver {
    NewtonLinearSolver ls;
    ~Solver() { destroy(ls); }
  } s;  // destroyed before o (its context)
  s.ls = make_newton_linear_solver(sys, solver,
                                   backward ? JacobianSide::Backward : JacobianSide::Forward, o.v,
                                   o.ctx);
  NewtonLinearSolver& ls = s.ls;
  if (resolved) *resolved = ls.kind;
  std::vector<double> scratch, a(n * n, 0.0);
  if (gamma && ls.kind == CvodesLinearSolver::Sparse) {
    newton_matrix(ls, ls.matrix, sys, t, y, false, *gamma);
  } else {
    fill_jacobian(ls, ls.matrix, sys, t, y, scratch);
    if (gamma)
      COSTATE_CHECK(SUNMatScaleAddI(-*gamma, ls.matrix) == SUNMAT_SUCCESS,
                    "CVODES backend: SUNMatScaleAddI failed");
  }
  if (ls.kind == CvodesLinearSolver::Dense) {
    const double* d = SUNDenseMatrix_Data(ls.matrix);
    std::copy(d, d + n * n, a.begin());
  } else if (ls.kind == CvodesLinearSolver::Band) {
    const auto upper = SUNBandMatrix_UpperBandwidth(ls.matrix);
    const auto lower = SUNBandMatrix_LowerBandwidth(ls.matrix);
    const auto nn = static_cast<sunindextype>(n);
    for (sunindextype j = 0; j < nn; ++j) {
      const double* col = SUNBandMatrix_Column(ls.matrix, j);
      for (sunindextype i = std::max<sunindextype>(0, j - upper);
           i <= std::min<sunindextype>(nn - 1, j + lower); ++i)
        a[static_cast<std::size_t>(j * nn + i)] = col[i - j];
    }
  } else {
    const sunindextype* ptr = SUNSparseMatrix_IndexPointers(ls.matrix);
    const sunindextype* idx = SUNSparseMatrix_IndexValues(ls.matrix);
    const double* d = SUNSparseMatrix_Data(ls.matrix);
    const bool csc = SUNSparseMatrix_SparseType(ls.matrix) == CSC_MAT;
    for (std::size_t outer = 0; outer < n; ++outer)
      for (sunindextype k = ptr[outer]; k < ptr[outer + 1]; ++k) {
        const auto inner = static_cast<std::size_t>(idx[k]);
        const std::size_t row = csc ? inner : outer, col = csc ? outer : inner;
        a[col * n + row] = d[k];
      }
  }
  return a;
}

}  // namespace

std::vector<double> assembled_jacobian(const System& sys, CvodesLinearSolver solver, bool backward,
                                       double t, const double* y, CvodesLinearSolver* resolved) {
  return assemble(sys, solver, backward, t, y, resolved, nullptr);
}

std::vector<double> assembled_newton_matrix(const System& sys, CvodesLinearSolver solver,
                                            bool backward, double gamma, double t,
                                            const double* y) {
  return assemble(sys, solver, backward, t, y, nullptr, &gamma);
}

}  // namespace costate::ode::cvodes
