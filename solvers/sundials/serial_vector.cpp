#include "sundials/serial_vector.hpp"

#include <cmath>
#include <limits>

#include "costate/core/error.hpp"

namespace costate::detail {
namespace {

// The operations on a serial vector's contiguous data. Each loop rounds as
// the serial module's operation of the same name (see the header): one
// multiply and one add per element where it has them, reductions summed
// from the first element to the last. Outputs may alias inputs element for
// element (z = x), as SUNDIALS allows.

sunindextype size_of(N_Vector v) { return NV_LENGTH_S(v); }
double* data_of(N_Vector v) { return NV_DATA_S(v); }

void linear_sum(realtype a, N_Vector x, realtype b, N_Vector y, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  const double* yd = data_of(y);
  double* zd = data_of(z);
  // a x + b y rounds as the serial module's special cases do whenever
  // a or b is ±1 (a product by ±1 is exact). When a = b or a = −b it forms
  // a(x + y) or a(x − y) instead: kept, so the bits agree.
  const bool unit = a == 1.0 || a == -1.0 || b == 1.0 || b == -1.0;
  if (!unit && a == b) {
    for (sunindextype i = 0; i < n; ++i) zd[i] = a * (xd[i] + yd[i]);
  } else if (!unit && a == -b) {
    for (sunindextype i = 0; i < n; ++i) zd[i] = a * (xd[i] - yd[i]);
  } else {
    for (sunindextype i = 0; i < n; ++i) zd[i] = a * xd[i] + b * yd[i];
  }
}

void constant(realtype c, N_Vector z) {
  const sunindextype n = size_of(z);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = c;
}

void product(N_Vector x, N_Vector y, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  const double* yd = data_of(y);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = xd[i] * yd[i];
}

void quotient(N_Vector x, N_Vector y, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  const double* yd = data_of(y);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = xd[i] / yd[i];
}

void scale(realtype c, N_Vector x, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = c * xd[i];
}

void absolute(N_Vector x, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = std::fabs(xd[i]);
}

void inverse(N_Vector x, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = 1.0 / xd[i];
}

void add_constant(N_Vector x, realtype b, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = xd[i] + b;
}

realtype dot(N_Vector x, N_Vector y) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  const double* yd = data_of(y);
  double sum = 0.0;
  for (sunindextype i = 0; i < n; ++i) sum += xd[i] * yd[i];
  return sum;
}

// max |x_i|, starting from 0; like the serial module, a NaN never compares
// greater and so is not the maximum.
realtype max_norm(N_Vector x) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double m = 0.0;
  for (sunindextype i = 0; i < n; ++i)
    if (std::fabs(xd[i]) > m) m = std::fabs(xd[i]);
  return m;
}

realtype weighted_square_sum(N_Vector x, N_Vector w) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  const double* wd = data_of(w);
  double sum = 0.0;
  for (sunindextype i = 0; i < n; ++i) {
    const double p = xd[i] * wd[i];
    sum += p * p;
  }
  return sum;
}

realtype weighted_square_sum_masked(N_Vector x, N_Vector w, N_Vector id) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  const double* wd = data_of(w);
  const double* idd = data_of(id);
  double sum = 0.0;
  for (sunindextype i = 0; i < n; ++i) {
    if (idd[i] > 0.0) {
      const double p = xd[i] * wd[i];
      sum += p * p;
    }
  }
  return sum;
}

// SUNDIALS' square root: 0 for arguments ≤ 0.
double root(double s) { return s <= 0.0 ? 0.0 : std::sqrt(s); }

realtype wrms_norm(N_Vector x, N_Vector w) {
  return root(weighted_square_sum(x, w) / static_cast<double>(size_of(x)));
}

realtype wrms_norm_masked(N_Vector x, N_Vector w, N_Vector id) {
  return root(weighted_square_sum_masked(x, w, id) / static_cast<double>(size_of(x)));
}

realtype weighted_l2_norm(N_Vector x, N_Vector w) { return root(weighted_square_sum(x, w)); }

realtype minimum(N_Vector x) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  if (n == 0) return std::numeric_limits<double>::max();  // SUNDIALS' BIG_REAL
  double m = xd[0];
  for (sunindextype i = 1; i < n; ++i)
    if (xd[i] < m) m = xd[i];
  return m;
}

realtype l1_norm(N_Vector x) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double sum = 0.0;
  for (sunindextype i = 0; i < n; ++i) sum += std::fabs(xd[i]);
  return sum;
}

void compare(realtype c, N_Vector x, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double* zd = data_of(z);
  for (sunindextype i = 0; i < n; ++i) zd[i] = std::fabs(xd[i]) >= c ? 1.0 : 0.0;
}

// z_i = 1/x_i where x_i ≠ 0 (z_i untouched where x_i = 0); true when no
// x_i is 0.
booleantype inverse_test(N_Vector x, N_Vector z) {
  const sunindextype n = size_of(x);
  const double* xd = data_of(x);
  double* zd = data_of(z);
  bool no_zero = true;
  for (sunindextype i = 0; i < n; ++i) {
    if (xd[i] == 0.0)
      no_zero = false;
    else
      zd[i] = 1.0 / xd[i];
  }
  return no_zero ? SUNTRUE : SUNFALSE;
}

}  // namespace

void use_costate_operations(N_Vector v) {
  COSTATE_CHECK(v != nullptr && N_VGetVectorID(v) == SUNDIALS_NVEC_SERIAL,
                "use_costate_operations: not a SUNDIALS serial vector");
  N_Vector_Ops ops = v->ops;
  ops->nvlinearsum = linear_sum;
  ops->nvconst = constant;
  ops->nvprod = product;
  ops->nvdiv = quotient;
  ops->nvscale = scale;
  ops->nvabs = absolute;
  ops->nvinv = inverse;
  ops->nvaddconst = add_constant;
  ops->nvdotprod = dot;
  ops->nvmaxnorm = max_norm;
  ops->nvwrmsnorm = wrms_norm;
  ops->nvwrmsnormmask = wrms_norm_masked;
  ops->nvmin = minimum;
  ops->nvwl2norm = weighted_l2_norm;
  ops->nvl1norm = l1_norm;
  ops->nvcompare = compare;
  ops->nvinvtest = inverse_test;
  ops->nvdotprodlocal = dot;
  ops->nvmaxnormlocal = max_norm;
  ops->nvminlocal = minimum;
  ops->nvl1normlocal = l1_norm;
  ops->nvinvtestlocal = inverse_test;
  ops->nvwsqrsumlocal = weighted_square_sum;
  ops->nvwsqrsummasklocal = weighted_square_sum_masked;
}

N_Vector new_serial_vector(std::size_t n, SUNContext ctx) {
  N_Vector v = N_VNew_Serial(static_cast<sunindextype>(n), ctx);
  COSTATE_CHECK(v != nullptr, "SUNDIALS: N_VNew_Serial(" << n << ") failed");
  use_costate_operations(v);
  return v;
}

}  // namespace costate::detail
