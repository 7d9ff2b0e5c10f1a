// Workload W2 (shared/BENCHMARKS.md), costate beside its peers in ONE binary:
// the dense 16×16 Jacobian of
//   F_i(x) = Σ_j sin(x_j·(i+1))·exp(−x_i·x_j/16) + x_i³
// by vector forward mode, each tool timed against the same plain-double
// primal in interleaved rounds (see w2_workload.hpp). Every tool runs the
// same templated function and is checked against the reference entries.
//
//   costate   ad::Dual<double,16>
//   Sacado    CacheFad::SFad<double,16>, ELRFad::SFad<double,16>, Fad::SFad<double,16>
//   ADOL-C    tapeless adtl::adouble (16 directions); jacobian() on a tape
//             recorded once beforehand (only the jacobian() call is timed)
//   (ref)     two reference rows: a hand-written Jacobian (the floor for
//             any tool calling libm's sin, cos, exp) and the one-pass tangent
//             update an ideal expression-template Dual would run
//
// Built only when Sacado (with the Teuchos headers it needs) and/or ADOL-C
// are found (COSTATE_W2_SACADO / COSTATE_W2_ADOLC).
//
// Sample run:  build/bench/bench_w2_peers [rounds] [batch]
#include <cmath>
#include <cstdlib>
#include <vector>

#include "costate/ad/dual.hpp"
#include "w2_workload.hpp"

#if COSTATE_W2_SACADO
#include <Sacado.hpp>
#endif
#if COSTATE_W2_ADOLC
#include <adolc/adolc.h>
#include <adolc/adtl.h>
#endif

namespace {

constexpr int kN = w2::kN;

// ---- costate
using D16 = costate::ad::Dual<double, kN>;
[[gnu::noinline]] void costate_jacobian(const double* x, double* J) {
  D16 xd[kN], fd[kN];
  for (int j = 0; j < kN; ++j) xd[j] = D16::seed(x[j], j);
  w2::residual(xd, fd);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) J[i * kN + j] = fd[i].tangent(j);
}

// ---- Reference rows (not tools): what forward mode could cost at best.
// (a) Hand-written Jacobian: the same libm calls a forward-mode tool must
//     make (sin, cos — merged into sincos —, exp), minimal arithmetic.
[[gnu::noinline]] void hand_jacobian(const double* x, double* J) {
  for (int i = 0; i < kN; ++i) {
    const double c = i + 1;
    double row[kN] = {};
    double dxi = 0.0;
    for (int j = 0; j < kN; ++j) {
      const double s = std::sin(x[j] * c), co = std::cos(x[j] * c);
      const double e = std::exp(-x[i] * x[j] / 16.0);
      row[j] += co * c * e - s * e * x[i] / 16.0;
      dxi -= s * e * x[j] / 16.0;
    }
    row[i] += dxi + 3 * x[i] * x[i];
    for (int j = 0; j < kN; ++j) J[i * kN + j] = row[j];
  }
}
// (b) What an ideal expression-template Dual would execute for the
//     statement s += sin(x_j c)·exp(−x_i x_j/16): values and local partials
//     as scalars, then ONE pass over the 16 tangents with the 3 leaves.
[[gnu::noinline]] void fused_jacobian(const double* x, double* J) {
  D16 xd[kN], fd[kN];
  for (int j = 0; j < kN; ++j) xd[j] = D16::seed(x[j], j);
  for (int i = 0; i < kN; ++i) {
    const double c = i + 1;
    const D16& xi = xd[i];
    D16 s = 0.0;
    for (int j = 0; j < kN; ++j) {
      const D16& xj = xd[j];
      const double sn = std::sin(xj.value() * c), cs = std::cos(xj.value() * c);
      const double e = std::exp(-xi.value() * xj.value() / 16.0);
      const double a_sin = cs * c * e;                 // through x_j in sin
      const double a_i = -sn * e * xj.value() / 16.0;  // through x_i in exp
      const double a_j = -sn * e * xi.value() / 16.0;  // through x_j in exp
      s.value() += sn * e;
      for (int k = 0; k < kN; ++k)
        s.tangent(k) += a_sin * xj.tangent(k) + a_i * xi.tangent(k) + a_j * xj.tangent(k);
    }
    fd[i] = s + xi * xi * xi;
  }
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) J[i * kN + j] = fd[i].tangent(j);
}

#if COSTATE_W2_SACADO
// ---- Sacado SFad flavours: SFad(size, index, value) seeds direction index.
template <class Fad>
[[gnu::noinline]] void sacado_jacobian(const double* x, double* J) {
  Fad xd[kN], fd[kN];
  for (int j = 0; j < kN; ++j) xd[j] = Fad(kN, j, x[j]);
  w2::residual(xd, fd);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) J[i * kN + j] = fd[i].fastAccessDx(j);
}
#endif

#if COSTATE_W2_ADOLC
// ---- ADOL-C tapeless (traceless) vector forward mode.
[[gnu::noinline]] void adtl_jacobian(const double* x, double* J) {
  adtl::adouble xd[kN], fd[kN];
  for (int j = 0; j < kN; ++j) {
    xd[j] = x[j];
    for (int k = 0; k < kN; ++k) xd[j].setADValue(k, k == j ? 1.0 : 0.0);
  }
  w2::residual(xd, fd);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) J[i * kN + j] = fd[i].getADValue(j);
}

// ---- ADOL-C taping: record once, then jacobian() per call.
constexpr short kTag = 1;
double** adolc_rows = nullptr;
void adolc_record(const double* x) {
  trace_on(kTag);
  adouble xa[kN], fa[kN];
  for (int j = 0; j < kN; ++j) xa[j] <<= x[j];
  w2::residual(xa, fa);
  double f[kN];
  for (int i = 0; i < kN; ++i) fa[i] >>= f[i];
  trace_off();
  adolc_rows = myalloc2(kN, kN);
}
[[gnu::noinline]] void adolc_jacobian(const double* x, double* J) {
  jacobian(kTag, kN, kN, x, adolc_rows);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) J[i * kN + j] = adolc_rows[i][j];
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 201;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 50;

  double x[kN], J[kN * kN];
  w2::inputs(x);
  std::vector<w2::Candidate> candidates;
  candidates.push_back({"costate ad::Dual<double,16>", costate_jacobian});
#if COSTATE_W2_SACADO
  candidates.push_back(
      {"Sacado CacheFad::SFad<double,16>", sacado_jacobian<Sacado::CacheFad::SFad<double, kN>>});
  candidates.push_back(
      {"Sacado ELRFad::SFad<double,16>", sacado_jacobian<Sacado::ELRFad::SFad<double, kN>>});
  candidates.push_back(
      {"Sacado Fad::SFad<double,16>", sacado_jacobian<Sacado::Fad::SFad<double, kN>>});
#endif
  candidates.push_back({"(ref) fused statement, ideal expr. template", fused_jacobian});
  candidates.push_back({"(ref) hand-written Jacobian", hand_jacobian});
#if COSTATE_W2_ADOLC
  adtl::setNumDir(kN);
  adolc_record(x);
  candidates.push_back({"ADOL-C tapeless adtl (16 directions)", adtl_jacobian});
  candidates.push_back({"ADOL-C jacobian() on a stored tape", adolc_jacobian});
#endif

  // 1. Every tool's Jacobian against the reference entries (aborts if wrong).
  for (const auto& c : candidates) {
    c.jacobian(x, J);
    w2::check(c.name.c_str(), J);
  }

  // 2. Interleaved timing against the plain-double primal.
  const auto timings = w2::measure(candidates, rounds, batch);
  w2::print(timings, rounds, batch);
#if COSTATE_W2_ADOLC
  myfree2(adolc_rows);
#endif
  return 0;
}
