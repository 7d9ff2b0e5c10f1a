#pragma once
// Private: the SUNDIALS serial vectors every costate backend hands CVODES,
// IDAS and KINSOL (only solvers/ includes SUNDIALS headers).
//
// Debian 12's SUNDIALS 6.4.1 is compiled without optimisation: its serial
// vector loops reload the index and the pointers from the stack at every
// element (objdump of N_VWSqrSumLocal_Serial in libsundials_cvodes.so.6).
// Those loops were a third of Chen_MSB2009's gradient. These vectors are
// SUNDIALS' own serial vectors (same content, same ID, N_VGetArrayPointer
// works, the KLU module accepts them) whose arithmetic operations are
// replaced by loops compiled with costate; every clone CVODES makes copies
// the operation table, so its internal vectors get them too.
//
// Each operation rounds exactly as the serial module does (same operations
// in the same order, sums accumulated left to right, the a(x ± y) forms of
// N_VLinearSum when a = ±b), so results are the same bits.
// serial_vector.cpp is compiled with -ffp-contract=off to keep that under
// -march=native. Not replaced (the serial module's stay): the fused and
// vector-array operations (NULL in serial vectors by default; SUNDIALS
// then composes them from N_VLinearSum and N_VScale, which are replaced),
// N_VConstrMask and N_VMinQuotient (constraints only), the MPI-local
// reductions other than the weighted sums of squares, and buffer packing.
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>

#include <cstddef>

namespace costate::detail {

/// N_VNew_Serial(n, ctx) with costate's operations installed;
/// throws costate::Error when SUNDIALS cannot allocate. The caller owns the
/// vector (N_VDestroy).
N_Vector new_serial_vector(std::size_t n, SUNContext ctx);

/// Replaces v's arithmetic operations by costate's (v must be a serial
/// vector; v's clones inherit them).
void use_costate_operations(N_Vector v);

}  // namespace costate::detail
