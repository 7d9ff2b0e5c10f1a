#include "sundials/dense_matrix.hpp"

#include <nvector/nvector_serial.h>
#include <sunlinsol/sunlinsol_band.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_band.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>

#include <cmath>
#include <cstring>

#include "costate/core/error.hpp"

namespace costate::detail {
namespace {

// ---- the matrix: column-major M × N, column j at cols[j] -------------------

bool same_shape(SUNMatrix A, SUNMatrix B) {
  return SUNMatGetID(B) == SUNMATRIX_DENSE && SM_ROWS_D(A) == SM_ROWS_D(B) &&
         SM_COLUMNS_D(A) == SM_COLUMNS_D(B);
}

int zero(SUNMatrix A) {
  std::memset(SM_DATA_D(A), 0, sizeof(double) * static_cast<std::size_t>(SM_LDATA_D(A)));
  return SUNMAT_SUCCESS;
}

/// B = A.
int copy(SUNMatrix A, SUNMatrix B) {
  if (!same_shape(A, B)) return SUNMAT_ILL_INPUT;
  std::memcpy(SM_DATA_D(B), SM_DATA_D(A), sizeof(double) * static_cast<std::size_t>(SM_LDATA_D(A)));
  return SUNMAT_SUCCESS;
}

/// A = c A + B.
int scale_add(realtype c, SUNMatrix A, SUNMatrix B) {
  if (!same_shape(A, B)) return SUNMAT_ILL_INPUT;
  double* a = SM_DATA_D(A);
  const double* b = SM_DATA_D(B);
  const sunindextype n = SM_LDATA_D(A);
  for (sunindextype i = 0; i < n; ++i) a[i] = c * a[i] + b[i];
  return SUNMAT_SUCCESS;
}

/// A = c A + I: every entry scaled, then 1 added on the diagonal.
int scale_add_identity(realtype c, SUNMatrix A) {
  const sunindextype m = SM_ROWS_D(A), n = SM_COLUMNS_D(A);
  for (sunindextype j = 0; j < n; ++j) {
    double* col = SM_COLUMN_D(A, j);
    for (sunindextype i = 0; i < m; ++i) col[i] = c * col[i];
    if (j < m) col[j] += 1.0;
  }
  return SUNMAT_SUCCESS;
}

/// y = A x, accumulated column by column.
int matvec(SUNMatrix A, N_Vector x, N_Vector y) {
  const sunindextype m = SM_ROWS_D(A), n = SM_COLUMNS_D(A);
  if (N_VGetLength(x) != n || N_VGetLength(y) != m) return SUNMAT_ILL_INPUT;
  const double* xd = N_VGetArrayPointer(x);
  double* yd = N_VGetArrayPointer(y);
  if (xd == nullptr || yd == nullptr || xd == yd) return SUNMAT_MEM_FAIL;
  for (sunindextype i = 0; i < m; ++i) yd[i] = 0.0;
  for (sunindextype j = 0; j < n; ++j) {
    const double* col = SM_COLUMN_D(A, j);
    const double xj = xd[j];
    for (sunindextype i = 0; i < m; ++i) yd[i] += col[i] * xj;
  }
  return SUNMAT_SUCCESS;
}

SUNMatrix clone(SUNMatrix A) {
  SUNMatrix B = SUNMatClone_Dense(A);
  if (B != nullptr) use_costate_operations(B);
  return B;
}

// ---- the LU: P A = L U in place (L unit lower, below the diagonal) ---------

/// Factors the m × n (m ≥ n) matrix whose columns are a[0 … n): pivots
/// p[k] = the row swapped with k. Returns 0, or k + 1 when column k has no
/// non-zero pivot (the factorization stops there).
sunindextype factor(double** a, sunindextype m, sunindextype n, sunindextype* p) {
  for (sunindextype k = 0; k < n; ++k) {
    double* col_k = a[k];
    sunindextype l = k;  // the first row of largest |a_ik|, i ≥ k
    for (sunindextype i = k + 1; i < m; ++i)
      if (std::fabs(col_k[i]) > std::fabs(col_k[l])) l = i;
    p[k] = l;
    if (col_k[l] == 0.0) return k + 1;
    if (l != k)
      for (sunindextype j = 0; j < n; ++j) {
        const double t = a[j][l];
        a[j][l] = a[j][k];
        a[j][k] = t;
      }
    const double r = 1.0 / col_k[k];
    for (sunindextype i = k + 1; i < m; ++i) col_k[i] *= r;
    for (sunindextype j = k + 1; j < n; ++j) {
      double* col_j = a[j];
      const double a_kj = col_j[k];
      if (a_kj != 0.0)
        for (sunindextype i = k + 1; i < m; ++i) col_j[i] -= a_kj * col_k[i];
    }
  }
  return 0;
}

/// b ← A⁻¹ b from factor's L, U and pivots (n × n).
void solve_in_place(double* const* a, sunindextype n, const sunindextype* p, double* b) {
  for (sunindextype k = 0; k < n; ++k) {
    const sunindextype pk = p[k];
    if (pk != k) {
      const double t = b[k];
      b[k] = b[pk];
      b[pk] = t;
    }
  }
  for (sunindextype k = 0; k + 1 < n; ++k) {
    const double* col_k = a[k];
    const double bk = b[k];
    for (sunindextype i = k + 1; i < n; ++i) b[i] -= col_k[i] * bk;
  }
  for (sunindextype k = n - 1; k > 0; --k) {
    const double* col_k = a[k];
    b[k] /= col_k[k];
    const double bk = b[k];
    for (sunindextype i = 0; i < k; ++i) b[i] -= col_k[i] * bk;
  }
  if (n > 0) b[0] /= a[0][0];
}

SUNLinearSolverContent_Dense content_of(SUNLinearSolver S) {
  return static_cast<SUNLinearSolverContent_Dense>(S->content);
}

int setup(SUNLinearSolver S, SUNMatrix A) {
  SUNLinearSolverContent_Dense c = content_of(S);
  if (A == nullptr || SUNMatGetID(A) != SUNMATRIX_DENSE) {
    c->last_flag = SUNLS_ILL_INPUT;
    return SUNLS_ILL_INPUT;
  }
  c->last_flag = factor(SM_COLS_D(A), SM_ROWS_D(A), SM_COLUMNS_D(A), c->pivots);
  return c->last_flag > 0 ? SUNLS_LUFACT_FAIL : SUNLS_SUCCESS;
}

/// An LU solver's solve, as SUNDIALS' dense and band ones: x = b, then
/// `in_place(x's data)`; the outcome also in the content's last_flag.
template <class Content, class InPlace>
int lu_solve(Content c, SUNMatrix A, N_Vector x, N_Vector b, InPlace in_place) {
  if (A == nullptr || x == nullptr || b == nullptr) {
    c->last_flag = SUNLS_MEM_NULL;
    return SUNLS_MEM_NULL;
  }
  N_VScale(1.0, b, x);
  double* xd = N_VGetArrayPointer(x);
  if (xd == nullptr) {
    c->last_flag = SUNLS_MEM_FAIL;
    return SUNLS_MEM_FAIL;
  }
  in_place(xd);
  c->last_flag = SUNLS_SUCCESS;
  return SUNLS_SUCCESS;
}

int solve(SUNLinearSolver S, SUNMatrix A, N_Vector x, N_Vector b, realtype) {
  SUNLinearSolverContent_Dense c = content_of(S);
  return lu_solve(c, A, x, b,
                  [&](double* xd) { solve_in_place(SM_COLS_D(A), SM_ROWS_D(A), c->pivots, xd); });
}

// ---- band: N × N, bandwidths mu (upper), ml (lower), storage upper
// bandwidth smu = min(N − 1, mu + ml) (room for the LU's fill); entry
// (i, j) at cols[j][smu + i − j] -------------------------------------------

bool same_band_layout(SUNMatrix A, SUNMatrix B) {
  return SUNMatGetID(B) == SUNMATRIX_BAND && SM_COLUMNS_B(A) == SM_COLUMNS_B(B) &&
         SM_UBAND_B(A) == SM_UBAND_B(B) && SM_LBAND_B(A) == SM_LBAND_B(B) &&
         SM_SUBAND_B(A) == SM_SUBAND_B(B) && SM_LDATA_B(A) == SM_LDATA_B(B);
}

int band_zero(SUNMatrix A) {
  std::memset(SM_DATA_B(A), 0, sizeof(double) * static_cast<std::size_t>(SM_LDATA_B(A)));
  return SUNMAT_SUCCESS;
}

/// B = A: the same layout copied whole; otherwise SUNDIALS' own copy
/// (which may enlarge B's bandwidths).
int band_copy(SUNMatrix A, SUNMatrix B) {
  if (!same_band_layout(A, B)) return SUNMatCopy_Band(A, B);
  std::memcpy(SM_DATA_B(B), SM_DATA_B(A), sizeof(double) * static_cast<std::size_t>(SM_LDATA_B(A)));
  return SUNMAT_SUCCESS;
}

/// A = c A + I on the band's storage rows j − mu … j + ml of every column j
/// (as SUNDIALS: also the slots outside the matrix near its corners, which
/// nothing reads).
int band_scale_add_identity(realtype c, SUNMatrix A) {
  const sunindextype n = SM_COLUMNS_B(A);
  const sunindextype mu = SM_UBAND_B(A), ml = SM_LBAND_B(A);
  for (sunindextype j = 0; j < n; ++j) {
    double* col = SM_COLUMN_B(A, j);  // col[i − j] = (i, j)
    for (sunindextype d = -mu; d <= ml; ++d) col[d] = c * col[d];
    col[0] += 1.0;
  }
  return SUNMAT_SUCCESS;
}

SUNMatrix band_clone(SUNMatrix A) {
  SUNMatrix B = SUNMatClone_Band(A);
  if (B != nullptr) use_costate_operations(B);
  return B;
}

/// P A = L U of the band matrix in place (LINPACK's band form): row swaps
/// applied to the columns right of the pivot only, the multipliers stored
/// negated below the diagonal. Returns 0 or the 1-based column without a
/// non-zero pivot.
sunindextype band_factor(double** a, sunindextype n, sunindextype ml, sunindextype smu,
                         sunindextype mu, sunindextype* p) {
  // The fill rows above the upper band start at zero.
  for (sunindextype j = 0; j < n; ++j)
    for (sunindextype r = 0; r < smu - mu; ++r) a[j][r] = 0.0;
  for (sunindextype k = 0; k < n; ++k) {
    double* diag = a[k] + smu;  // diag[i − k] = (i, k)
    const sunindextype last_row = std::min(n - 1, k + ml);
    sunindextype l = k;
    double largest = std::fabs(diag[0]);
    for (sunindextype i = k + 1; i <= last_row; ++i)
      if (std::fabs(diag[i - k]) > largest) {
        l = i;
        largest = std::fabs(diag[i - k]);
      }
    p[k] = l;
    if (diag[l - k] == 0.0) return k + 1;
    const bool swap = l != k;
    if (swap) std::swap(diag[l - k], diag[0]);
    const double r = -1.0 / diag[0];
    for (sunindextype i = k + 1; i <= last_row; ++i) diag[i - k] *= r;
    const sunindextype last_col = std::min(k + smu, n - 1);
    for (sunindextype j = k + 1; j <= last_col; ++j) {
      double* col_j = a[j] + smu;  // col_j[i − j] = (i, j)
      double a_kj = col_j[l - j];
      if (swap) {
        col_j[l - j] = col_j[k - j];
        col_j[k - j] = a_kj;
      }
      if (a_kj != 0.0)
        for (sunindextype i = k + 1; i <= last_row; ++i) col_j[i - j] += a_kj * diag[i - k];
    }
  }
  return 0;
}

/// b ← A⁻¹ b from band_factor's result: each swap then its column's
/// elimination, then the back substitution.
void band_solve_in_place(double* const* a, sunindextype n, sunindextype smu, sunindextype ml,
                         const sunindextype* p, double* b) {
  for (sunindextype k = 0; k + 1 < n; ++k) {
    const sunindextype l = p[k];
    const double t = b[l];
    if (l != k) {
      b[l] = b[k];
      b[k] = t;
    }
    const double* diag = a[k] + smu;
    const sunindextype last_row = std::min(n - 1, k + ml);
    for (sunindextype i = k + 1; i <= last_row; ++i) b[i] += t * diag[i - k];
  }
  for (sunindextype k = n - 1; k >= 0; --k) {
    const double* diag = a[k] + smu;
    const sunindextype first_row = std::max<sunindextype>(0, k - smu);
    b[k] /= diag[0];
    const double t = -b[k];
    for (sunindextype i = first_row; i < k; ++i) b[i] += t * diag[i - k];
  }
}

SUNLinearSolverContent_Band band_content_of(SUNLinearSolver S) {
  return static_cast<SUNLinearSolverContent_Band>(S->content);
}

int band_setup(SUNLinearSolver S, SUNMatrix A) {
  SUNLinearSolverContent_Band c = band_content_of(S);
  if (A == nullptr || SUNMatGetID(A) != SUNMATRIX_BAND ||
      SM_SUBAND_B(A) < std::min(SM_COLUMNS_B(A) - 1, SM_UBAND_B(A) + SM_LBAND_B(A))) {
    c->last_flag = SUNLS_ILL_INPUT;
    return SUNLS_ILL_INPUT;
  }
  c->last_flag = band_factor(SM_COLS_B(A), SM_COLUMNS_B(A), SM_LBAND_B(A), SM_SUBAND_B(A),
                             SM_UBAND_B(A), c->pivots);
  return c->last_flag > 0 ? SUNLS_LUFACT_FAIL : SUNLS_SUCCESS;
}

int band_solve(SUNLinearSolver S, SUNMatrix A, N_Vector x, N_Vector b, realtype) {
  SUNLinearSolverContent_Band c = band_content_of(S);
  return lu_solve(c, A, x, b, [&](double* xd) {
    band_solve_in_place(SM_COLS_B(A), SM_COLUMNS_B(A), SM_SUBAND_B(A), SM_LBAND_B(A), c->pivots, xd);
  });
}

}  // namespace

void use_costate_operations(SUNMatrix A) {
  COSTATE_CHECK(A != nullptr && (SUNMatGetID(A) == SUNMATRIX_DENSE || SUNMatGetID(A) == SUNMATRIX_BAND),
                "use_costate_operations: not a SUNDIALS dense or band matrix");
  if (SUNMatGetID(A) == SUNMATRIX_BAND) {
    SUNMatrix_Ops ops = A->ops;
    ops->clone = band_clone;
    ops->zero = band_zero;
    ops->copy = band_copy;
    ops->scaleaddi = band_scale_add_identity;
    return;
  }
  SUNMatrix_Ops ops = A->ops;
  ops->clone = clone;
  ops->zero = zero;
  ops->copy = copy;
  ops->scaleadd = scale_add;
  ops->scaleaddi = scale_add_identity;
  ops->matvec = matvec;
}

SUNMatrix new_dense_matrix(sunindextype m, sunindextype n, SUNContext ctx) {
  SUNMatrix A = SUNDenseMatrix(m, n, ctx);
  if (A != nullptr) use_costate_operations(A);
  return A;
}

SUNLinearSolver new_dense_solver(N_Vector y, SUNMatrix A, SUNContext ctx) {
  SUNLinearSolver S = SUNLinSol_Dense(y, A, ctx);
  if (S != nullptr) use_costate_operations(S);
  return S;
}

SUNMatrix new_band_matrix(sunindextype n, sunindextype mu, sunindextype ml, SUNContext ctx) {
  SUNMatrix A = SUNBandMatrix(n, mu, ml, ctx);
  if (A != nullptr) use_costate_operations(A);
  return A;
}

SUNLinearSolver new_band_solver(N_Vector y, SUNMatrix A, SUNContext ctx) {
  SUNLinearSolver S = SUNLinSol_Band(y, A, ctx);
  if (S != nullptr) use_costate_operations(S);
  return S;
}

void use_costate_operations(SUNLinearSolver S) {
  COSTATE_CHECK(S != nullptr && (SUNLinSolGetID(S) == SUNLINEARSOLVER_DENSE ||
                                 SUNLinSolGetID(S) == SUNLINEARSOLVER_BAND),
                "use_costate_operations: not a SUNDIALS dense or band linear solver");
  const bool band = SUNLinSolGetID(S) == SUNLINEARSOLVER_BAND;
  S->ops->setup = band ? band_setup : setup;
  S->ops->solve = band ? band_solve : solve;
}

}  // namespace costate::detail
