// Workload W1 (shared/BENCHMARKS.md), costate beside its peers in ONE binary:
// the gradient dJ/du0 (1000 inputs) of a 1000-step explicit Burgers-1D
// simulation by recording the whole scalar time loop on a tape and running
// one reverse sweep. Every tool runs the same templated loop
// (w1_workload.hpp) and is timed against the same plain-double primal in
// interleaved rounds; every gradient is checked against the reference
// values (abort on mismatch).
//
//   costate   ad::Real on ad::Tape (Jacobian tape, expression templates)
//   ADOL-C    adouble: trace_on(keep = 1) … trace_off, then fos_reverse —
//             the tape kept in memory (buffer sizes taken from a first,
//             untimed recording, so no tape file is written)
//   Sacado    Rad::ADvar<double> (Sacado_trad.hpp): record, Outvar_Gradcomp
//
// Tape memory: costate — TapeStats::bytes (statements + arguments +
// adjoints of the recording); ADOL-C — tapestats(): operations × 1 B +
// locations × 4 B + values × 8 B + Taylor stack × 8 B; Sacado keeps no
// tape object to ask, so its first recording's growth of the heap in use
// (mallinfo2: arena + mmapped bytes) is reported, with the RSS growth of
// that recording beside it.
//
// Built only when Sacado (with the Teuchos headers it needs) and/or ADOL-C
// are found (COSTATE_W1_SACADO / COSTATE_W1_ADOLC).
//
// Sample run:  build/bench/bench_w1_peers [rounds] [primal batch] [tool filter]
// (a filter keeps only the tools whose name contains it, e.g. for perf)
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "costate/ad/reverse.hpp"
#include "w1_workload.hpp"

#if COSTATE_W1_SACADO
#include <Sacado.hpp>
#endif
#if COSTATE_W1_ADOLC
#include <adolc/adolc.h>
#endif

namespace {

constexpr int kN = w1::kN;
using Clock = std::chrono::steady_clock;

/// Heap bytes in use (arena + mmapped chunks).
[[maybe_unused]] double heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);
}
/// Resident set size, bytes.
[[maybe_unused]] double rss_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// ---- costate: ad::Real on the thread's Jacobian tape
void costate_gradient(w1::Result& r) {
  using costate::ad::Real;
  auto& tape = costate::ad::Tape::active();
  static std::vector<Real> x(kN);
  const auto t0 = Clock::now();
  tape.reset();
  tape.start_recording();
  for (int i = 0; i < kN; ++i) {
    x[i] = w1::u0(i);
    tape.register_input(x[i]);
  }
  Real j = w1::objective(x);
  tape.register_output(j);
  tape.stop_recording();
  r.record_seconds = w1::seconds_since(t0);
  j.set_gradient(1.0);
  tape.evaluate();
  r.j = j.value();
  for (int i = 0; i < kN; ++i) r.grad[i] = x[i].gradient();
  r.tape_bytes = static_cast<double>(tape.stats().bytes);
}

#if COSTATE_W1_ADOLC
// ---- ADOL-C: taping with the Taylor stack kept, then one fos_reverse.
constexpr short kTag = 11;
struct AdolcBuffers {
  unsigned obs = OBUFSIZE, lbs = LBUFSIZE, vbs = VBUFSIZE, tbs = TBUFSIZE;
} adolc_buf;

// The inputs' adoubles live across recordings (allocated once, like
// costate's and Sacado's input vectors): `<<=` makes them independents.
std::vector<adouble>& adolc_inputs() {
  static std::vector<adouble> x(kN);
  return x;
}
void adolc_record(double& jv) {
  std::vector<adouble>& adolc_x = adolc_inputs();
  trace_on(kTag, 1, adolc_buf.obs, adolc_buf.lbs, adolc_buf.vbs, adolc_buf.tbs);
  {
    for (int i = 0; i < kN; ++i) adolc_x[i] <<= w1::u0(i);
    adouble j = w1::objective(adolc_x);
    j >>= jv;
  }
  trace_off();
}
double adolc_tape_bytes(const size_t* s) {
  return 1.0 * s[NUM_OPERATIONS] + 4.0 * s[NUM_LOCATIONS] + 8.0 * s[NUM_VALUES] +
         8.0 * s[TAY_STACK_SIZE];
}
/// Two untimed recordings with generous buffers to learn the tape's size
/// (the second one is the steady state: the input adoubles then exist
/// before trace_on); later recordings get buffers just large enough to stay
/// in core.
void adolc_size_buffers() {
  adolc_buf = {1u << 27, 1u << 27, 1u << 27, 1u << 27};
  size_t m[STAT_SIZE] = {};
  for (int pass = 0; pass < 2; ++pass) {
    double jv;
    adolc_record(jv);
    size_t s[STAT_SIZE];
    tapestats(kTag, s);
    for (int k = 0; k < STAT_SIZE; ++k) m[k] = std::max(m[k], s[k]);
  }
  auto room = [](size_t n) { return static_cast<unsigned>(n + n / 64 + 4096); };
  adolc_buf = {room(m[NUM_OPERATIONS]), room(m[NUM_LOCATIONS]), room(m[NUM_VALUES]),
               room(m[TAY_STACK_SIZE])};
  std::printf("ADOL-C tape (max of 2 recordings): %zu operations, %zu locations, %zu values, "
              "%zu Taylors (files written: op %zu, loc %zu, val %zu)\n",
              m[NUM_OPERATIONS], m[NUM_LOCATIONS], m[NUM_VALUES], m[TAY_STACK_SIZE],
              m[OP_FILE_ACCESS], m[LOC_FILE_ACCESS], m[VAL_FILE_ACCESS]);
}
void adolc_gradient(w1::Result& r) {
  static const bool sized = (adolc_size_buffers(), true);
  (void)sized;
  const auto t0 = Clock::now();
  adolc_record(r.j);
  r.record_seconds = w1::seconds_since(t0);
  double w = 1.0;
  fos_reverse(kTag, 1, kN, &w, r.grad.data());
  size_t s[STAT_SIZE];
  tapestats(kTag, s);
  if (s[OP_FILE_ACCESS] || s[LOC_FILE_ACCESS] || s[VAL_FILE_ACCESS]) {
    std::fprintf(stderr,
                 "ADOL-C wrote its tape to files (buffers too small): %zu operations, %zu "
                 "locations, %zu values, Taylor stack %zu\n",
                 s[NUM_OPERATIONS], s[NUM_LOCATIONS], s[NUM_VALUES], s[TAY_STACK_SIZE]);
    std::abort();
  }
  r.tape_bytes = adolc_tape_bytes(s);
}
#endif

#if COSTATE_W1_SACADO
// ---- Sacado Rad: every operation allocates its node in Sacado's arena;
// Outvar_Gradcomp runs the reverse sweep and rewinds the arena (kept for
// the next recording).
using SRad = Sacado::Rad::ADvar<double>;
double sacado_bytes = 0.0, sacado_rss = 0.0;
void sacado_gradient(w1::Result& r) {
  const bool first = sacado_bytes == 0.0;
  const double heap0 = first ? heap_in_use() : 0.0, rss0 = first ? rss_bytes() : 0.0;
  static std::vector<SRad> x(kN);
  const auto t0 = Clock::now();
  for (int i = 0; i < kN; ++i) x[i] = w1::u0(i);
  SRad j = w1::objective(x);
  r.record_seconds = w1::seconds_since(t0);
  if (first) {
    sacado_bytes = heap_in_use() - heap0;
    sacado_rss = rss_bytes() - rss0;
  }
  SRad::Outvar_Gradcomp(j);
  r.j = j.val();
  for (int i = 0; i < kN; ++i) r.grad[i] = x[i].adj();
  r.tape_bytes = sacado_bytes;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 10;

  std::vector<w1::Candidate> candidates;
#if COSTATE_W1_SACADO
  // First, so that its RSS growth is not served by pages other tools freed
  // (its heap growth, the figure reported, does not depend on the order).
  candidates.push_back({"Sacado Rad::ADvar<double>", "heap growth", sacado_gradient});
#endif
  candidates.push_back({"costate ad::Real (Jacobian tape)", "TapeStats::bytes", costate_gradient});
#if COSTATE_W1_ADOLC
  candidates.push_back({"ADOL-C trace + fos_reverse", "tapestats", adolc_gradient});
#endif

  if (argc > 3)
    std::erase_if(candidates, [&](const auto& c) { return c.name.find(argv[3]) == std::string::npos; });

  // 1. Every tool's gradient against the reference values (aborts if wrong).
  for (const auto& c : candidates) {
    w1::Result r;
    c.gradient(r);
    w1::check(c.name, r);
  }
#if COSTATE_W1_SACADO
  if (sacado_bytes > 0.0)
    std::printf("Sacado first recording: heap in use +%.1f MB, RSS +%.1f MB\n",
                sacado_bytes / 1e6, sacado_rss / 1e6);
#endif
  {
    const auto st = costate::ad::Tape::active().stats();
    std::printf("costate tape: %s\n", st.report().c_str());
  }

  // 2. Interleaved timing against the plain-double primal.
  const auto timings = w1::measure(candidates, rounds, batch);
  w1::print(timings, rounds, batch);
  return 0;
}
