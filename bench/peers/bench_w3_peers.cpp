// Workload W3 (shared/BENCHMARKS.md), costate beside its peers in ONE binary:
// the Hessian–vector product H v of the extended Rosenbrock function,
// n = 100 000, by forward over reverse — record f once with the inputs'
// tangents set to v, one reverse sweep, H v = tangents of the input
// adjoints. Every tool runs the same templated f (w3_workload.hpp), is
// timed against the same plain-double primal (that f on double: four
// vectorised partial sums) in interleaved rounds, and every H v is checked
// against the exact block Hessian (abort on mismatch).
//
//   costate   ad::Reverse<ad::Dual<double,1>> on BasicTape<Dual<double,1>>
//   Sacado    Rad::ADvar<Fad::SFad<double,1>> (Sacado_trad.hpp), Outvar_Gradcomp
//   ADOL-C    trace_on … trace_off (tape kept in memory: buffer sizes from a
//             first, untimed recording), then hess_vec (which runs its own
//             second-order forward sweep and a reverse sweep on that tape)
//
// Memory: costate — TapeStats::bytes; ADOL-C — tapestats(): operations × 1 B
// + locations × 4 B + values × 8 B + the Taylor stack hess_vec's forward
// sweep writes for its reverse sweep × 8 B; Sacado — its first recording's
// growth of the heap in use (mallinfo2).
//
// Built only when Sacado (with the Teuchos headers it needs) and/or ADOL-C
// are found (COSTATE_W3_SACADO / COSTATE_W3_ADOLC).
//
// Sample run:  build/bench/bench_w3_peers [rounds] [primal batch] [tool filter]
// (a filter keeps only the tools whose name contains it, e.g. for perf)
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "w3_workload.hpp"

#if COSTATE_W3_SACADO
#include <Sacado.hpp>
#endif
#if COSTATE_W3_ADOLC
#include <adolc/adolc.h>
#endif

namespace {

constexpr std::size_t kN = w3::kN;
using Clock = std::chrono::steady_clock;

[[maybe_unused]] double heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);
}

// ---- costate: forward over reverse, Reverse<Dual<double,1>>
void costate_hvp(const std::vector<double>& x, const std::vector<double>& v, w3::Result& r) {
  using D = costate::ad::Dual<double, 1>;
  using R = costate::ad::Reverse<D>;
  auto& tape = costate::ad::BasicTape<D>::active();
  static std::vector<R> xr(kN);
  const auto t0 = Clock::now();
  tape.reset();
  tape.start_recording();
  for (std::size_t i = 0; i < kN; ++i) {
    xr[i] = D(x[i], {v[i]});
    tape.register_input(xr[i]);
  }
  R f = w3::rosenbrock(xr.data(), kN);
  tape.register_output(f);
  tape.stop_recording();
  r.record_seconds = w3::seconds_since(t0);
  f.set_gradient(D(1.0, {0.0}));
  tape.evaluate();
  for (std::size_t i = 0; i < kN; ++i) r.hv[i] = xr[i].gradient().tangent(0);
  r.f = f.value().value();
  r.tape_bytes = static_cast<double>(tape.stats().bytes);
}

#if COSTATE_W3_SACADO
// ---- Sacado: Rad over SFad<double,1>; the inputs' tangents carry v.
using SFad1 = Sacado::Fad::SFad<double, 1>;
using SRad = Sacado::Rad::ADvar<SFad1>;
double sacado_bytes = 0.0;
void sacado_hvp(const std::vector<double>& x, const std::vector<double>& v, w3::Result& r) {
  const bool first = sacado_bytes == 0.0;
  const double heap0 = first ? heap_in_use() : 0.0;
  static std::vector<SRad> xs(kN);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < kN; ++i) {
    SFad1 a(x[i]);
    a.fastAccessDx(0) = v[i];
    xs[i] = a;
  }
  SRad f = w3::rosenbrock(xs.data(), kN);
  r.record_seconds = w3::seconds_since(t0);
  if (first) sacado_bytes = heap_in_use() - heap0;
  SRad::Outvar_Gradcomp(f);
  for (std::size_t i = 0; i < kN; ++i) r.hv[i] = xs[i].adj().dx(0);
  r.f = f.val().val();
  r.tape_bytes = sacado_bytes;
}
#endif

#if COSTATE_W3_ADOLC
// ---- ADOL-C: tape f, then hess_vec.
constexpr short kTag = 13;
struct AdolcBuffers {
  unsigned obs = OBUFSIZE, lbs = LBUFSIZE, vbs = VBUFSIZE, tbs = TBUFSIZE;
} adolc_buf;
void adolc_record(const std::vector<double>& x, double& fv) {
  trace_on(kTag, 0, adolc_buf.obs, adolc_buf.lbs, adolc_buf.vbs, adolc_buf.tbs);
  {
    // The inputs' adoubles live across recordings (allocated once, like
    // costate's and Sacado's input vectors): `<<=` makes them independents.
    static std::vector<adouble> xa(kN);
    for (std::size_t i = 0; i < kN; ++i) xa[i] <<= x[i];
    adouble f = w3::rosenbrock(xa.data(), kN);
    f >>= fv;
  }
  trace_off();
}
/// Two untimed recordings + hess_vec with generous buffers to learn the
/// sizes (the second one is the steady state: the input adoubles then exist
/// before trace_on); later recordings get buffers just large enough to stay
/// in core, Taylor buffer included (hess_vec's forward sweep fills it).
void adolc_size_buffers(const std::vector<double>& x, const std::vector<double>& v) {
  adolc_buf = {1u << 26, 1u << 26, 1u << 26, 1u << 26};
  size_t m[STAT_SIZE] = {};
  std::vector<double> hv(kN);
  for (int pass = 0; pass < 2; ++pass) {
    double fv;
    adolc_record(x, fv);
    hess_vec(kTag, static_cast<int>(kN), const_cast<double*>(x.data()),
             const_cast<double*>(v.data()), hv.data());
    size_t s[STAT_SIZE];
    tapestats(kTag, s);
    for (int k = 0; k < STAT_SIZE; ++k) m[k] = std::max(m[k], s[k]);
  }
  auto room = [](size_t n) { return static_cast<unsigned>(n + n / 64 + 4096); };
  adolc_buf = {room(m[NUM_OPERATIONS]), room(m[NUM_LOCATIONS]), room(m[NUM_VALUES]),
               room(m[TAY_STACK_SIZE])};
  std::printf("ADOL-C tape (max of 2 recordings): %zu operations, %zu locations, %zu values, "
              "Taylor stack %zu (files written: op %zu, loc %zu, val %zu)\n",
              m[NUM_OPERATIONS], m[NUM_LOCATIONS], m[NUM_VALUES], m[TAY_STACK_SIZE],
              m[OP_FILE_ACCESS], m[LOC_FILE_ACCESS], m[VAL_FILE_ACCESS]);
}
void adolc_hvp(const std::vector<double>& x, const std::vector<double>& v, w3::Result& r) {
  static const bool sized = (adolc_size_buffers(x, v), true);
  (void)sized;
  const auto t0 = Clock::now();
  adolc_record(x, r.f);
  r.record_seconds = w3::seconds_since(t0);
  // hess_vec takes non-const pointers but only reads x and v.
  hess_vec(kTag, static_cast<int>(kN), const_cast<double*>(x.data()),
           const_cast<double*>(v.data()), r.hv.data());
  size_t s[STAT_SIZE];
  tapestats(kTag, s);
  if (s[OP_FILE_ACCESS] || s[LOC_FILE_ACCESS] || s[VAL_FILE_ACCESS]) {
    std::fprintf(stderr,
                 "ADOL-C wrote its tape to files (buffers too small): %zu operations, %zu "
                 "locations, %zu values, Taylor stack %zu\n",
                 s[NUM_OPERATIONS], s[NUM_LOCATIONS], s[NUM_VALUES], s[TAY_STACK_SIZE]);
    std::abort();
  }
  r.tape_bytes = 1.0 * s[NUM_OPERATIONS] + 4.0 * s[NUM_LOCATIONS] + 8.0 * s[NUM_VALUES] +
                 8.0 * s[TAY_STACK_SIZE];
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 41;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 200;

  std::vector<double> x, v;
  w3::inputs(x, v);
  const double f_ref = w3::rosenbrock(x.data(), kN);

  std::vector<w3::Candidate> candidates;
#if COSTATE_W3_SACADO
  candidates.push_back({"Sacado Rad::ADvar<SFad<double,1>>", "heap growth", sacado_hvp});
#endif
  candidates.push_back({"costate Reverse<Dual<double,1>>", "TapeStats::bytes", costate_hvp});
#if COSTATE_W3_ADOLC
  candidates.push_back({"ADOL-C trace + hess_vec", "tapestats", adolc_hvp});
#endif

  if (argc > 3)
    std::erase_if(candidates, [&](const auto& c) { return c.name.find(argv[3]) == std::string::npos; });

  // 1. Every tool's H v against the exact one (aborts if wrong).
  for (const auto& c : candidates) {
    w3::Result r;
    c.hvp(x, v, r);
    w3::check(c.name, x, v, f_ref, r);
  }
  std::printf("costate tape: %s\n",
              costate::ad::BasicTape<costate::ad::Dual<double, 1>>::active().stats().report().c_str());

  // 2. Interleaved timing against the plain-double primal.
  const auto timings = w3::measure(candidates, rounds, batch);
  w3::print(timings, rounds, batch);
  return 0;
}
