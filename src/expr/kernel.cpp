#include "costate/expr/kernel.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/sparsity.hpp"

namespace costate::expr {

template void Kernel::evaluate<ad::Dual<double, 1>>(ad::Dual<double, 1>*) const;
template void Kernel::evaluate<ad::Dual<double, 8>>(ad::Dual<double, 8>*) const;
template void Kernel::evaluate<ad::IndexSet>(ad::IndexSet*) const;
template void Kernel::evaluate<ad::Reverse<double>>(ad::Reverse<double>*) const;
template void Kernel::evaluate<ad::Reverse<ad::Dual<double, 1>>>(
    ad::Reverse<ad::Dual<double, 1>>*) const;
template void Kernel::evaluate<ad::Dual<ad::Dual<double, 1>, 8>>(
    ad::Dual<ad::Dual<double, 1>, 8>*) const;
template void Kernel::evaluate<ad::SecondOrderDual<4>>(ad::SecondOrderDual<4>*) const;
template void Kernel::evaluate<ad::SecondOrderDual<6>>(ad::SecondOrderDual<6>*) const;
template void Kernel::evaluate<ad::SecondOrderDual<8>>(ad::SecondOrderDual<8>*) const;

namespace {

/// The steps on double: every opcode a case of its own (apply<double> with
/// a constant opcode folds to the one operation) and no default, so that
/// the switch is one indirect jump without a range check (a Kernel's
/// opcodes come from Programs: always valid).
[[gnu::always_inline]] inline void run_steps(const Kernel::Step* s, const Kernel::Step* end,
                                             double* r, double* o) {
  for (; s != end; ++s, ++o) {
    switch (s->op) {
#define COSTATE_KERNEL_CASE(OP) \
  case Op::OP: *o = Kernel::apply<double>(Op::OP, r[s->a], r[s->b], r[s->c]); break;
      COSTATE_KERNEL_CASE(Constant) COSTATE_KERNEL_CASE(Variable)
      COSTATE_KERNEL_CASE(Add) COSTATE_KERNEL_CASE(Sub) COSTATE_KERNEL_CASE(Mul)
      COSTATE_KERNEL_CASE(Div) COSTATE_KERNEL_CASE(Pow) COSTATE_KERNEL_CASE(Neg)
      COSTATE_KERNEL_CASE(Sqrt) COSTATE_KERNEL_CASE(Cbrt) COSTATE_KERNEL_CASE(Exp)
      COSTATE_KERNEL_CASE(Expm1) COSTATE_KERNEL_CASE(Log) COSTATE_KERNEL_CASE(Log1p)
      COSTATE_KERNEL_CASE(Log2) COSTATE_KERNEL_CASE(Log10) COSTATE_KERNEL_CASE(Sin)
      COSTATE_KERNEL_CASE(Cos) COSTATE_KERNEL_CASE(Tan) COSTATE_KERNEL_CASE(Asin)
      COSTATE_KERNEL_CASE(Acos) COSTATE_KERNEL_CASE(Atan) COSTATE_KERNEL_CASE(Sinh)
      COSTATE_KERNEL_CASE(Cosh) COSTATE_KERNEL_CASE(Tanh) COSTATE_KERNEL_CASE(Asinh)
      COSTATE_KERNEL_CASE(Acosh) COSTATE_KERNEL_CASE(Atanh) COSTATE_KERNEL_CASE(Erf)
      COSTATE_KERNEL_CASE(Erfc) COSTATE_KERNEL_CASE(Abs) COSTATE_KERNEL_CASE(Floor)
      COSTATE_KERNEL_CASE(Ceil) COSTATE_KERNEL_CASE(Round) COSTATE_KERNEL_CASE(Atan2)
      COSTATE_KERNEL_CASE(Hypot) COSTATE_KERNEL_CASE(Min) COSTATE_KERNEL_CASE(Max)
      COSTATE_KERNEL_CASE(Lt) COSTATE_KERNEL_CASE(Le) COSTATE_KERNEL_CASE(Gt)
      COSTATE_KERNEL_CASE(Ge) COSTATE_KERNEL_CASE(Eq) COSTATE_KERNEL_CASE(Ne)
      COSTATE_KERNEL_CASE(And) COSTATE_KERNEL_CASE(Or) COSTATE_KERNEL_CASE(Not)
      COSTATE_KERNEL_CASE(Select)
#undef COSTATE_KERNEL_CASE
      default: __builtin_unreachable();
    }
  }
}

/// Registers of a kernel too large for the stack: one buffer per thread.
double* thread_registers(std::size_t n) {
  thread_local std::vector<double> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// The fused code (Kernel::code_): instructions {opcode, a, b, c} over the
// registers alone (the calls copy the inputs and constants in first).
//   kArith + i          r = a ∘ b                   ∘ = + − × ÷ (i = 0 … 3)
//   kNeg                r = −a
//   kPair + 8f + 2g + s r₁ = a ∘_f b (f = 4: −a), r₂ = r₁ ∘_g c (s = 0)
//                       or c ∘_g r₁ (s = 1): two steps, both registers
//                       written
//   kGeneric + op       r = apply(op, a, b, c): every other operation
//   kOut + k            out ← a, b, c (the first k), then on
//   kEnd + k            the same, then return (k = 0 … 3)
//   kSentinel           code_[0]: the reverse sweep's end
//   kCopyT              r_0 = t                        (the ODE form)
//   kCopy + 4 src + w   r_b … = src[a …], 1, 2, 4 or 8 values (w = 0 … 3)
//                       from y, p (the ODE form) or the constants (src = 0,
//                       1, 2)
// Placed outputs (Kernel::placed_, build_rows' kernels), output k written at
// out[k] by the instruction computing it:
//   kArithAt + i, kNegAt, kPairAt + 8f + 2g + s
//                       as kArith, kNeg, kPair, and out[at] ← r (a pair:
//                       its second result)
//   kOutAt + m          out[at] ← a, then (m = 1) out[c] ← b
// (the constant outputs before code_[first_steps_], the rest after the
// steps, then kEnd: return).
// The copies come first: code_[1 …] those of the ODE form's inputs, from
// code_[consts_] the constants', then the steps' instructions (result
// registers in order: each instruction writes its step(s)' next), then the
// outputs'. The reverse sweep seeds the outputs' adjoints from their
// instructions (forward), then runs the steps' instructions from
// code_[last_] down to the first copy (or the sentinel), each step's
// updates those of reverse_one below.
constexpr unsigned kArith = 0, kNeg = 4, kPair = 5, kGeneric = kPair + 40,
                   kOut = kGeneric + 64, kEnd = kOut + 4, kSentinel = kEnd + 4,
                   kCopyT = kSentinel + 1, kCopy = kCopyT + 1, kArithAt = kCopy + 12,
                   kNegAt = kArithAt + 4, kPairAt = kNegAt + 1, kOutAt = kPairAt + 40,
                   kOpcodes = kOutAt + 2;
static_assert(static_cast<unsigned>(Op::Select) < 64 && kOpcodes <= 256);

[[gnu::noinline]] double generic_value(unsigned op, double a, double b, double c) {
  return Kernel::apply<double>(static_cast<Op>(op), a, b, c);
}

/// evaluate_prepared's tag for evaluate_rhs (its p): start at the steps.
constexpr double kPrepared = 0.0;

constexpr double kLn2 = 0.69314718055994530941723212145818;
constexpr double kLn10 = 2.30258509299404568401799145468437;
constexpr double k2OverSqrtPi = 1.12837916709551257389615890312154;

/// One step of the reverse sweep: the step r = op(a, b, c) (registers
/// A, B, C, R) adds its partials times adj[R] into adj[A], adj[B] (adj[C]),
/// unless adj[R] is 0. The partials are those of ad::Dual (kernel.hpp).
[[gnu::always_inline]] inline void reverse_one(Op op, std::uint32_t R, std::uint32_t A,
                                               std::uint32_t B, std::uint32_t C, const double* r,
                                               double* adj) {
  const double g = adj[R];
  if (g == 0.0) return;
  const double a = r[A], b = r[B], v = r[R];
  double& ga = adj[A];
  double& gb = adj[B];
  switch (op) {
    case Op::Constant:
    case Op::Variable: ga += g; break;
    case Op::Add: ga += g; gb += g; break;
    case Op::Sub: ga += g; gb -= g; break;
    case Op::Mul: ga += g * b; gb += g * a; break;
    case Op::Div: {
      const double inv = 1.0 / b;
      ga += g * inv;
      gb -= g * v * inv;
      break;
    }
    case Op::Pow: {
      // As ad::Dual: ∂/∂a = b·a^(b−1) (0 for b = 0); ∂/∂b = v·log a for a > 0, else 0.
      double da = 0.0;
      if (b != 0.0) da = a != 0.0 ? b * v / a : b * std::pow(a, b - 1.0);
      ga += g * da;
      if (a > 0.0) gb += g * v * std::log(a);
      break;
    }
    case Op::Atan2: {  // atan2(a, b): ∂/∂a = b/(a² + b²), ∂/∂b = −a/(a² + b²)
      const double r2 = b * b + a * a;
      const double inv = r2 == 0.0 ? 0.0 : 1.0 / r2;
      ga += g * (b * inv);
      gb += g * (-a * inv);
      break;
    }
    case Op::Hypot: {
      const double inv = v == 0.0 ? 0.0 : 1.0 / v;
      ga += g * (a * inv);
      gb += g * (b * inv);
      break;
    }
    case Op::Min: (b < a ? gb : ga) += g; break;  // ties: the first argument
    case Op::Max: (b > a ? gb : ga) += g; break;
    case Op::Neg: ga -= g; break;
    case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
    case Op::And: case Op::Or: case Op::Not:
    case Op::Floor: case Op::Ceil: case Op::Round: break;
    case Op::Select: (a != 0.0 ? gb : adj[C]) += g; break;
    case Op::Sqrt: ga += g * (v == 0.0 ? HUGE_VAL : 0.5 / v); break;
    case Op::Cbrt: ga += g * (v == 0.0 ? HUGE_VAL : 1.0 / (3 * v * v)); break;
    case Op::Exp: ga += g * v; break;
    case Op::Expm1: ga += g * (v + 1); break;
    case Op::Log: ga += g * (1.0 / a); break;
    case Op::Log1p: ga += g * (1.0 / (1 + a)); break;
    case Op::Log2: ga += g * (1.0 / (a * kLn2)); break;
    case Op::Log10: ga += g * (1.0 / (a * kLn10)); break;
    case Op::Sin: ga += g * std::cos(a); break;
    case Op::Cos: ga += g * -std::sin(a); break;
    case Op::Tan: ga += g * (1 + v * v); break;
    case Op::Asin: ga += g * (1.0 / std::sqrt((1 - a) * (1 + a))); break;
    case Op::Acos: ga += g * (-1.0 / std::sqrt((1 - a) * (1 + a))); break;
    case Op::Atan: ga += g * (1.0 / (1 + a * a)); break;
    case Op::Sinh: ga += g * std::cosh(a); break;
    case Op::Cosh: ga += g * std::sinh(a); break;
    case Op::Tanh: ga += g * (1 - v * v); break;
    case Op::Asinh: ga += g * (1.0 / std::sqrt(a * a + 1)); break;
    case Op::Acosh: ga += g * (1.0 / std::sqrt((a - 1) * (a + 1))); break;
    case Op::Atanh: ga += g * (1.0 / ((1 - a) * (1 + a))); break;
    case Op::Erf: ga += g * (k2OverSqrtPi * std::exp(-(a * a))); break;
    case Op::Erfc: ga += g * (-k2OverSqrtPi * std::exp(-(a * a))); break;
    case Op::Abs: ga += a > 0.0 ? g : a < 0.0 ? -g : 0.0; break;
  }
}

[[gnu::noinline]] void reverse_generic(unsigned op, std::uint32_t R, std::uint32_t a,
                                       std::uint32_t b, std::uint32_t c, const double* r,
                                       double* adj) {
  reverse_one(static_cast<Op>(op), R, a, b, c, r, adj);
}

/// z[0 … n) = 0 for the few registers of a model: four at a time in a
/// loop whose branch repeats every call (a memset call, or a jump table
/// into straight-line stores, cost more), the last four overlapping.
[[gnu::always_inline]] inline void zero_few(double* z, std::size_t n) {
#if defined(__SSE2__)
  // One register for every store (opaque, or GCC rematerializes the zero
  // before each).
  __m128d zero = _mm_setzero_pd();
  asm("" : "+x"(zero));
  auto four = [&](double* at) {
    _mm_storeu_pd(at, zero);
    _mm_storeu_pd(at + 2, zero);
  };
#else
  auto four = [](double* at) { std::memset(at, 0, 4 * sizeof(double)); };
#endif
  if (n < 4) {
    for (std::size_t i = 0; i < n; ++i) z[i] = 0.0;
    return;
  }
  double* const last = z + (n - 4);
  for (; z < last; z += 4) four(z);
  four(last);
}

/// to[0 … n) = from[0 … n) for the few values of a model's inputs: up to
/// eight in straight-line 16-byte moves (a memcpy call, or a loop's
/// overhead, cost more than such a copy), more eight at a time.
[[gnu::always_inline]] inline void copy_few(const double* from, std::size_t n, double* to) {
  auto two = [&](std::size_t i) { std::memcpy(to + i, from + i, 2 * sizeof(double)); };
  for (; n > 8; n -= 8, from += 8, to += 8) {
    two(0);
    two(2);
    two(4);
    two(6);
  }
  if (n & 1) to[n - 1] = from[n - 1];
  switch (n >> 1) {
    case 4: two(6); [[fallthrough]];
    case 3: two(4); [[fallthrough]];
    case 2: two(2); [[fallthrough]];
    case 1: two(0); [[fallthrough]];
    default: break;
  }
}

}  // namespace

/// The fused code's interpreters (friends of Kernel; hidden: called inside
/// the library without the PLT).
struct [[gnu::visibility("hidden")]] KernelCode {
  static std::vector<Kernel::Code> build(Kernel& k);
  static void reverse(const Kernel& k, const double* r, const double* w, double* adj, double* ybar,
                      double* pbar);
  /// The Kernel of a Flattener's steps with outputs `out` (its registers,
  /// tagged): dead-code elimination, the order of the steps, the fused code.
  /// `placed`: outputs written at their places by the instructions that
  /// compute them (Kernel::placed_; if there are fewer than 2^16).
  template <class Flat>
  static Kernel assemble(const Flat& f, const std::vector<std::uint32_t>& out,
                         std::string_view context, std::span<const std::size_t> input_blocks,
                         bool placed = false);
};

std::vector<Kernel::Code> KernelCode::build(Kernel& k) {
  auto arith = [](Op op) -> int {
    switch (op) {
      case Op::Add: return 0;
      case Op::Sub: return 1;
      case Op::Mul: return 2;
      case Op::Div: return 3;
      case Op::Neg: return 4;
      default: return -1;
    }
  };
  std::vector<Kernel::Code> code;
  auto emit = [&](unsigned op, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                  std::size_t at = 0) {
    code.push_back({static_cast<Op>(op), static_cast<std::uint16_t>(at), a, b, c});
  };
  emit(kSentinel, 0, 0, 0);
  // Copies of n values from source src into registers from `to` on: chunks of 8, 4, 2, 1.
  auto copies = [&](unsigned src, std::size_t n, std::size_t to) {
    for (std::size_t i = 0; i < n;) {
      const unsigned w = n - i >= 8 ? 3 : n - i >= 4 ? 2 : n - i >= 2 ? 1 : 0;
      emit(kCopy + 4 * src + w, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(to + i), 0);
      i += std::size_t{1} << w;
    }
  };
  const std::vector<std::size_t>& b = k.blocks_;
  if (b.size() == 3 && b[0] == 1) {  // the ODE form {t}, y, p
    // t only if read (an autonomous system's is not: its register stays unset).
    bool reads_t = std::find(k.outputs_.begin(), k.outputs_.end(), 0u) != k.outputs_.end();
    for (const Kernel::Step& st : k.steps_) reads_t = reads_t || st.a == 0 || st.b == 0 || st.c == 0;
    if (reads_t) emit(kCopyT, 0, 0, 0);
    copies(0, b[1], 1);
    copies(1, b[2], 1 + b[1]);
  }
  k.consts_ = code.size();
  copies(2, k.constants_.size(), k.n_inputs_);
  const std::size_t no = k.outputs_.size();
  // Placed outputs: the first place of each step's result is written by
  // its instruction (at[step] = place + 1); the others (inputs, results of
  // a pair's first step or of another operation, repeats) by kOutAt after
  // the steps; the constants' before the steps (prepare() writes those).
  std::vector<std::size_t> at;
  std::vector<std::pair<std::uint32_t, std::size_t>> rest;  // (register, place)
  auto places = [&](const std::vector<std::pair<std::uint32_t, std::size_t>>& outs) {
    for (std::size_t i = 0; i < outs.size(); i += 2) {
      if (i + 1 < outs.size())
        emit(kOutAt + 1, outs[i].first, outs[i + 1].first, static_cast<std::uint32_t>(outs[i + 1].second),
             outs[i].second);
      else
        emit(kOutAt, outs[i].first, 0, 0, outs[i].second);
    }
  };
  if (k.placed_) {
    at.assign(k.steps_.size(), 0);
    std::vector<std::pair<std::uint32_t, std::size_t>> constant;
    for (std::size_t i = 0; i < no; ++i) {
      const std::uint32_t reg = k.outputs_[i];
      if (reg >= k.n_inputs_ && reg < k.first_result_)
        constant.emplace_back(reg, i);
      else if (reg >= k.first_result_ && at[reg - k.first_result_] == 0)
        at[reg - k.first_result_] = i + 1;
      else
        rest.emplace_back(reg, i);
    }
    places(constant);
  }
  k.first_steps_ = code.size();
  // The place of step i's result if its instruction writes it (else 0), and
  // the outputs of step i left to kOutAt.
  auto take = [&](std::size_t i, bool written) -> std::size_t {
    if (!k.placed_ || at[i] == 0) return 0;
    if (written) return at[i] - 1;
    rest.emplace_back(static_cast<std::uint32_t>(k.first_result_ + i), at[i] - 1);
    return 0;
  };
  auto placed = [&](std::size_t i) { return k.placed_ && at[i] != 0; };
  const std::vector<Kernel::Step>& steps = k.steps_;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Kernel::Step& s = steps[i];
    const int f = arith(s.op);
    if (f >= 0 && i + 1 < steps.size()) {
      // Fuse with the next step if that is + − × ÷ reading this result.
      const Kernel::Step& n = steps[i + 1];
      const int g = arith(n.op);
      const auto reg = static_cast<std::uint32_t>(k.first_result_ + i);
      if (g >= 0 && g < 4 && (n.a == reg || n.b == reg)) {
        const unsigned side = n.a == reg ? 0 : 1;
        const unsigned form = 8 * static_cast<unsigned>(f) + 2 * static_cast<unsigned>(g) + side;
        take(i, false);
        const bool out = placed(i + 1);
        emit((out ? kPairAt : kPair) + form, s.a, s.b, side == 0 ? n.b : n.a, take(i + 1, true));
        ++i;
        continue;
      }
    }
    const bool out = placed(i);
    if (f >= 0 && f < 4)
      emit((out ? kArithAt : kArith) + static_cast<unsigned>(f), s.a, s.b, 0, take(i, true));
    else if (f == 4)
      emit(out ? kNegAt : kNeg, s.a, s.a, 0, take(i, true));
    else {
      take(i, false);
      emit(kGeneric + static_cast<unsigned>(s.op), s.a, s.b, s.c);
    }
  }
  k.last_ = code.size() - 1;
  if (k.placed_) {
    places(rest);
    emit(kEnd, 0, 0, 0);
    return code;
  }
  for (std::size_t i = 0; i < no || i == 0; i += 3) {
    const std::size_t m = std::min<std::size_t>(3, no - i);
    const bool end = i + 3 >= no;
    auto o = [&](std::size_t j) { return j < m ? k.outputs_[i + j] : 0u; };
    emit((end ? kEnd : kOut) + static_cast<unsigned>(m), o(0), o(1), o(2));
  }
  return code;
}

// Handlers: COSTATE_OP_<i>(x, y) is the arithmetic operation i (0 … 3: + − × ÷,
// 4: −x); the reverse bodies are reverse_one's cases for the same operations.
#define COSTATE_OP_0(x, y) ((x) + (y))
#define COSTATE_OP_1(x, y) ((x) - (y))
#define COSTATE_OP_2(x, y) ((x) * (y))
#define COSTATE_OP_3(x, y) ((x) / (y))
#define COSTATE_OP_4(x, y) (-(x))
#define COSTATE_FOR_G(F, FI)                                                    \
  F(FI, 0, 0) F(FI, 0, 1) F(FI, 1, 0) F(FI, 1, 1) F(FI, 2, 0) F(FI, 2, 1) F(FI, 3, 0) \
  F(FI, 3, 1)
#define COSTATE_FOR_PAIRS(F) \
  COSTATE_FOR_G(F, 0) COSTATE_FOR_G(F, 1) COSTATE_FOR_G(F, 2) COSTATE_FOR_G(F, 3) COSTATE_FOR_G(F, 4)
#define COSTATE_PAIR_LABEL(FI, GI, S) &&pair_##FI##_##GI##_##S,
#define COSTATE_PAIR_AT_LABEL(FI, GI, S) &&pair_at_##FI##_##GI##_##S,
#define COSTATE_REPEAT_8(L) L, L, L, L, L, L, L, L,
#define COSTATE_REPEAT_64(L)                                                               \
  COSTATE_REPEAT_8(L) COSTATE_REPEAT_8(L) COSTATE_REPEAT_8(L) COSTATE_REPEAT_8(L) COSTATE_REPEAT_8(L) \
  COSTATE_REPEAT_8(L) COSTATE_REPEAT_8(L) COSTATE_REPEAT_8(L)

#if defined(__GNUC__) && !defined(__clang__)
// Copy loops stay loops (no memcpy call), one dispatch per handler (no
// cross-jumping to a shared tail).
[[gnu::optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize", "no-crossjumping")]]
#endif
// The forward interpreter itself (what ode::System calls: no trampoline).
// y == nullptr: the inputs are already in r (the gathered evaluate copied
// them), the code starts at the constants' copies — or, with p ==
// &kPrepared (evaluate_prepared), at the steps.
void Kernel::evaluate_rhs(const void* kernel, double t, const double* y, const double* p,
                          double* out, double* r) {
  const Kernel& k = *static_cast<const Kernel*>(kernel);
  const Kernel::Code* s =
      k.code_.data() + (y != nullptr ? 1 : p == &kPrepared ? k.first_steps_ : k.consts_);
  double stack[Kernel::kStackRegisters];
  if (r == nullptr) r = k.on_stack_ ? stack : thread_registers(k.registers());
  const double* const c = k.constants_.data();
  double* o = r + k.first_result_;
  double* const placed = out;  // placed outputs: out[at]
#define COSTATE_NEXT goto* table[static_cast<unsigned>(s->op)]
  static const void* const table[] = {
      &&arith_0, &&arith_1, &&arith_2, &&arith_3, &&neg,
      COSTATE_FOR_PAIRS(COSTATE_PAIR_LABEL)
      COSTATE_REPEAT_64(&&generic)
      &&out_0, &&out_1, &&out_2, &&out_3, &&end_0, &&end_1, &&end_2, &&end_3, &&end_0,
      &&copy_t, &&copy_y1, &&copy_y2, &&copy_y4, &&copy_y8, &&copy_p1, &&copy_p2, &&copy_p4,
      &&copy_p8, &&copy_c1, &&copy_c2, &&copy_c4, &&copy_c8,
      &&arith_at_0, &&arith_at_1, &&arith_at_2, &&arith_at_3, &&neg_at,
      COSTATE_FOR_PAIRS(COSTATE_PAIR_AT_LABEL)
      &&out_at_1, &&out_at_2};
  static_assert(std::size(table) == kOpcodes);
  COSTATE_NEXT;
copy_t:
  r[0] = t;
  ++s;
  COSTATE_NEXT;
  // y in 8-byte moves: the stepper has just written it that way, and a
  // 16-byte load of two fresh 8-byte stores cannot be forwarded from them
  // (it waits for both to reach the cache: a store-forwarding stall, a third
  // of this function's time with 16-byte moves on Lotka–Volterra's
  // gradient, perf). p and the constants: 16 bytes (written long before).
#define COSTATE_TWO_8(SRC, I)              \
  r[s->b + (I)] = (SRC)[s->a + (I)];       \
  r[s->b + (I) + 1] = (SRC)[s->a + (I) + 1];
#define COSTATE_TWO_16(SRC, I) \
  std::memcpy(r + s->b + (I), (SRC) + s->a + (I), 2 * sizeof(double));
#define COSTATE_COPY(NAME, SRC, W)  \
  NAME##1 : r[s->b] = (SRC)[s->a]; \
  ++s;                           \
  COSTATE_NEXT;                  \
  NAME##2 : COSTATE_TWO_##W(SRC, 0)  \
  ++s;                           \
  COSTATE_NEXT;                  \
  NAME##4 : COSTATE_TWO_##W(SRC, 0) COSTATE_TWO_##W(SRC, 2) \
  ++s;                           \
  COSTATE_NEXT;                  \
  NAME##8 : COSTATE_TWO_##W(SRC, 0) COSTATE_TWO_##W(SRC, 2) COSTATE_TWO_##W(SRC, 4) COSTATE_TWO_##W(SRC, 6) \
  ++s;                           \
  COSTATE_NEXT;
  COSTATE_COPY(copy_y, y, 8)
  COSTATE_COPY(copy_p, p, 16)
  COSTATE_COPY(copy_c, c, 16)
#undef COSTATE_COPY
#undef COSTATE_TWO_8
#undef COSTATE_TWO_16
#define COSTATE_ARITH(I)                         \
  arith_##I : *o++ = COSTATE_OP_##I(r[s->a], r[s->b]); \
  ++s;                                           \
  COSTATE_NEXT;
  COSTATE_ARITH(0) COSTATE_ARITH(1) COSTATE_ARITH(2) COSTATE_ARITH(3)
#undef COSTATE_ARITH
neg:
  *o++ = -r[s->a];
  ++s;
  COSTATE_NEXT;
#define COSTATE_PAIR(FI, GI, S)                                              \
  pair_##FI##_##GI##_##S : {                                                 \
    const double v = COSTATE_OP_##FI(r[s->a], r[s->b]);                      \
    o[0] = v;                                                                \
    o[1] = (S) == 0 ? COSTATE_OP_##GI(v, r[s->c]) : COSTATE_OP_##GI(r[s->c], v); \
    o += 2;                                                                  \
    ++s;                                                                     \
    COSTATE_NEXT;                                                            \
  }
  COSTATE_FOR_PAIRS(COSTATE_PAIR)
#undef COSTATE_PAIR
generic:
  *o++ = generic_value(static_cast<unsigned>(s->op) - kGeneric, r[s->a], r[s->b], r[s->c]);
  ++s;
  COSTATE_NEXT;
  // Placed outputs: as above, the result also written at out[at].
#define COSTATE_ARITH_AT(I)                                  \
  arith_at_##I : {                                           \
    const double v = COSTATE_OP_##I(r[s->a], r[s->b]);       \
    *o++ = v;                                                \
    placed[s->at] = v;                                       \
    ++s;                                                     \
    COSTATE_NEXT;                                            \
  }
  COSTATE_ARITH_AT(0) COSTATE_ARITH_AT(1) COSTATE_ARITH_AT(2) COSTATE_ARITH_AT(3)
#undef COSTATE_ARITH_AT
neg_at : {
  const double v = -r[s->a];
  *o++ = v;
  placed[s->at] = v;
  ++s;
  COSTATE_NEXT;
}
#define COSTATE_PAIR_AT(FI, GI, S)                                                    \
  pair_at_##FI##_##GI##_##S : {                                                       \
    const double v = COSTATE_OP_##FI(r[s->a], r[s->b]);                               \
    o[0] = v; /* first: c may be r₁ itself (x·y + x·y) */                            \
    const double v2 = (S) == 0 ? COSTATE_OP_##GI(v, r[s->c]) : COSTATE_OP_##GI(r[s->c], v); \
    o[1] = v2;                                                                        \
    placed[s->at] = v2;                                                               \
    o += 2;                                                                           \
    ++s;                                                                              \
    COSTATE_NEXT;                                                                     \
  }
  COSTATE_FOR_PAIRS(COSTATE_PAIR_AT)
#undef COSTATE_PAIR_AT
out_at_2:
  placed[s->c] = r[s->b];
out_at_1:
  placed[s->at] = r[s->a];
  ++s;
  COSTATE_NEXT;
out_3:
  out[2] = r[s->c];
out_2:
  out[1] = r[s->b];
out_1:
  out[0] = r[s->a];
out_0:
  out += static_cast<unsigned>(s->op) - kOut;
  ++s;
  COSTATE_NEXT;
end_3:
  out[2] = r[s->c];
end_2:
  out[1] = r[s->b];
end_1:
  out[0] = r[s->a];
end_0:
  return;
#undef COSTATE_NEXT
}

void Kernel::evaluate_prepared(const void* kernel, double* r, double* out) {
  evaluate_rhs(kernel, 0.0, nullptr, &kPrepared, out, r);
}

void Kernel::prepare(double* r, double* out) const {
  for (std::size_t j = 0; j < constants_.size(); ++j) r[n_inputs_ + j] = constants_[j];
  for (std::size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i] >= n_inputs_ && outputs_[i] < first_result_) out[i] = r[outputs_[i]];
}

// The reverse bodies: step R = a ∘ b (registers A, B) as reverse_one.
#define COSTATE_REV_BEGIN(R, A, B)       \
  {                                      \
    const double g = adj[R];             \
    if (g != kZero) {                    \
      double& ga = adj[A];               \
      double& gb = adj[B];               \
      (void)gb;
#define COSTATE_REV_END \
  }                     \
  }
// + − and negation without reverse_one's test g ≠ 0: adding ±0 changes no
// adjoint (each starts at +0 and is only ever updated by x + y or x − y,
// which round to −0 only from −0, so no adjoint is −0; and x ± 0 = x for
// every other x, infinities and NaNs included) — the same bits, one branch
// fewer.
#define COSTATE_REV_ALWAYS(R, A, B) \
  {                                 \
    const double g = adj[R];        \
    double& ga = adj[A];            \
    double& gb = adj[B];            \
    (void)gb;
#define COSTATE_REV_0(R, A, B) COSTATE_REV_ALWAYS(R, A, B) ga += g; gb += g; }
#define COSTATE_REV_1(R, A, B) COSTATE_REV_ALWAYS(R, A, B) ga += g; gb -= g; }
#define COSTATE_REV_2(R, A, B)                 \
  COSTATE_REV_BEGIN(R, A, B)                   \
  const double a_ = r[A], b_ = r[B];           \
  ga += g * b_;                                \
  gb += g * a_;                                \
  COSTATE_REV_END
#define COSTATE_REV_3(R, A, B)                 \
  COSTATE_REV_BEGIN(R, A, B)                   \
  const double inv = 1.0 / r[B];               \
  const double v_ = r[R];                      \
  ga += g * inv;                               \
  gb -= g * v_ * inv;                          \
  COSTATE_REV_END
#define COSTATE_REV_4(R, A, B) COSTATE_REV_ALWAYS(R, A, B) ga -= g; }

#if defined(__GNUC__) && !defined(__clang__)
[[gnu::optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize", "no-crossjumping")]]
#endif
[[gnu::noinline]] void KernelCode::reverse(const Kernel& k, const double* r, const double* w,
                                           double* adj, double* ybar, double* pbar) {
  const std::size_t nr = k.first_result_ + k.steps_.size();
  if (adj == nullptr) adj = const_cast<double*>(r) + nr;  // vjp_rhs: work = [r | adjoints]
  zero_few(adj, nr);
  // The tests g ≠ 0 below against a zero held in a register (a literal 0.0
  // is rematerialized, one instruction more, before each).
  double kZero = 0.0;
#if defined(__GNUC__) && defined(__SSE2__)
  asm("" : "+x"(kZero));
#endif
  // The outputs' instructions first, forward (the seeds ā_out += w in the
  // order of vjp_steps' loop: the same sums when an output repeats); the
  // last of them (kEnd) starts the sweep at code_[last_].
  const Kernel::Code* s = k.code_.data() + k.last_ + 1;
  std::uint32_t R = static_cast<std::uint32_t>(nr - 1);  // the (last) register s writes
#define COSTATE_NEXT goto* table[static_cast<unsigned>(s->op)]
  static const void* const table[] = {
      &&arith_0, &&arith_1, &&arith_2, &&arith_3, &&neg,
      COSTATE_FOR_PAIRS(COSTATE_PAIR_LABEL)
      COSTATE_REPEAT_64(&&generic)
      &&seed_3, &&seed_3, &&seed_3, &&seed_3, &&last_0, &&last_1, &&last_2, &&last_3, &&done,
      &&done, &&y1, &&y2, &&y4, &&y8, &&p1, &&p2, &&p4, &&p8, &&skip, &&skip, &&skip, &&skip,
      // Placed outputs: never swept (Kernel::vjp and vjp_rhs take vjp_steps).
      COSTATE_REPEAT_8(&&done) COSTATE_REPEAT_8(&&done) COSTATE_REPEAT_8(&&done)
      COSTATE_REPEAT_8(&&done) COSTATE_REPEAT_8(&&done) &&done, &&done, &&done, &&done, &&done,
      &&done, &&done};
  static_assert(std::size(table) == kOpcodes);
  COSTATE_NEXT;
  // kOut (always three outputs: KernelCode::build), then kEnd + m.
seed_3:
  adj[s->a] += w[0];
  adj[s->b] += w[1];
  adj[s->c] += w[2];
  w += 3;
  ++s;
  COSTATE_NEXT;
last_3:
  adj[s->a] += w[0];
  adj[s->b] += w[1];
  adj[s->c] += w[2];
  s = k.code_.data() + k.last_;
  COSTATE_NEXT;
last_2:
  adj[s->a] += w[0];
  adj[s->b] += w[1];
  s = k.code_.data() + k.last_;
  COSTATE_NEXT;
last_1:
  adj[s->a] += w[0];
last_0:
  s = k.code_.data() + k.last_;
  COSTATE_NEXT;
#define COSTATE_ARITH(I)               \
  arith_##I : COSTATE_REV_##I(R, s->a, s->b) \
  --R;                                 \
  --s;                                 \
  COSTATE_NEXT;
  COSTATE_ARITH(0) COSTATE_ARITH(1) COSTATE_ARITH(2) COSTATE_ARITH(3)
#undef COSTATE_ARITH
neg:
  COSTATE_REV_4(R, s->a, s->a)
  --R;
  --s;
  COSTATE_NEXT;
  // A pair: its second step (R = r₁ ∘_g c or c ∘_g r₁, r₁ = R − 1) first.
#define COSTATE_PAIR(FI, GI, S)                                              \
  pair_##FI##_##GI##_##S : {                                                 \
    const std::uint32_t R1 = R - 1;                                          \
    COSTATE_REV_##GI(R, (S) == 0 ? R1 : s->c, (S) == 0 ? s->c : R1)          \
    COSTATE_REV_##FI(R1, s->a, (FI) == 4 ? s->a : s->b)                      \
    R -= 2;                                                                  \
    --s;                                                                     \
    COSTATE_NEXT;                                                            \
  }
  COSTATE_FOR_PAIRS(COSTATE_PAIR)
#undef COSTATE_PAIR
generic:
  reverse_generic(static_cast<unsigned>(s->op) - kGeneric, R, s->a, s->b, s->c, r, adj);
  --R;
  --s;
  COSTATE_NEXT;
  // Past the steps: the copies backward. The constants': nothing; p's:
  // pbar += its adjoints, y's: ybar = its adjoints (vjp_rhs; vjp() stops at
  // the first of them); t's (the first copy): the end.
skip:
  --s;
  COSTATE_NEXT;
#define COSTATE_EXTRACT(NAME, N, BODY)                     \
  NAME##N : {                                              \
    if (ybar == nullptr) goto done;                        \
    const double* const from = adj + s->b;                 \
    double* const to = (NAME##bar) + s->a;                 \
    for (std::uint32_t i = 0; i < (N); i += 2) BODY(i);    \
    --s;                                                   \
    COSTATE_NEXT;                                          \
  }
  // 8-byte loads of the adjoints (just updated by 8-byte stores: a 16-byte
  // load of them would stall, as y's copies above).
#define COSTATE_Y(I) (to[I] = from[I], to[(I) + 1] = from[(I) + 1])
#define COSTATE_P(I) (to[I] += from[I], to[(I) + 1] += from[(I) + 1])
y1:
  if (ybar == nullptr) goto done;
  ybar[s->a] = adj[s->b];
  --s;
  COSTATE_NEXT;
p1:
  if (ybar == nullptr) goto done;
  pbar[s->a] += adj[s->b];
  --s;
  COSTATE_NEXT;
  COSTATE_EXTRACT(y, 2, COSTATE_Y)
  COSTATE_EXTRACT(y, 4, COSTATE_Y)
  COSTATE_EXTRACT(y, 8, COSTATE_Y)
  COSTATE_EXTRACT(p, 2, COSTATE_P)
  COSTATE_EXTRACT(p, 4, COSTATE_P)
  COSTATE_EXTRACT(p, 8, COSTATE_P)
#undef COSTATE_P
#undef COSTATE_Y
#undef COSTATE_EXTRACT
done:
#undef COSTATE_NEXT
  return;
}

#undef COSTATE_REV_0
#undef COSTATE_REV_1
#undef COSTATE_REV_2
#undef COSTATE_REV_3
#undef COSTATE_REV_4
#undef COSTATE_REV_ALWAYS
#undef COSTATE_REV_BEGIN
#undef COSTATE_REV_END
#undef COSTATE_REPEAT_64
#undef COSTATE_REPEAT_8
#undef COSTATE_PAIR_LABEL
#undef COSTATE_PAIR_AT_LABEL
#undef COSTATE_FOR_PAIRS
#undef COSTATE_FOR_G
#undef COSTATE_OP_0
#undef COSTATE_OP_1
#undef COSTATE_OP_2
#undef COSTATE_OP_3
#undef COSTATE_OP_4

namespace {

/// Builds the SSA code before dead-code elimination: registers are
/// numbered inputs, then constants, then steps in emission order.
class Flattener {
 public:
  Flattener(std::size_t n_inputs, std::string_view context)
      : n_inputs_(n_inputs), context_(context) {}

  /// Emits `p` with its variables mapped by `var_reg` (size: the variables
  /// `p` may use); returns the register of its value.
  std::uint32_t emit(const Program& p, const std::vector<std::uint32_t>& var_reg) {
    std::vector<std::uint32_t> stack;
    for (const Instruction& in : p.code()) {
      if (in.op == Op::Constant) {
        stack.push_back(constant(p.constants()[in.arg]));
        continue;
      }
      if (in.op == Op::Variable) {
        COSTATE_CHECK(in.arg < var_reg.size(),
                      context_ << ": '" << p.text() << "' uses variable " << in.arg
                               << ", which is not computed before it (" << var_reg.size()
                               << " variables available)");
        stack.push_back(var_reg[in.arg]);
        continue;
      }
      const int n = arity(in.op);
      std::uint32_t ops[3] = {0, 0, 0};
      for (int k = n; k-- > 0;) {
        ops[k] = stack.back();
        stack.pop_back();
      }
      stack.push_back(operation(in.op, ops[0], ops[1], ops[2], n));
    }
    COSTATE_CHECK(stack.size() == 1, context_ << ": '" << p.text() << "' is not one expression");
    return stack.back();
  }

  // Registers: constants and steps kept apart until the end (their final
  // numbers depend on how many constants there are).
  static constexpr std::uint32_t kStepTag = 1u << 31;
  static constexpr std::uint32_t kConstTag = 1u << 30;
  static constexpr std::uint32_t kNotNegated = ~0u;

  std::size_t n_inputs_;
  std::string_view context_;
  std::vector<double> constants;
  std::vector<Kernel::Step> steps;  // operands tagged

  /// The register of constant v (shared by bits).
  std::uint32_t constant(double v) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const auto [it, fresh] = const_index_.try_emplace(bits, static_cast<std::uint32_t>(constants.size()));
    if (fresh) constants.push_back(v);
    return kConstTag | it->second;
  }
  bool is_constant(std::uint32_t reg) const {
    return (reg & kConstTag) != 0 && (reg & kStepTag) == 0;
  }
  double constant_value(std::uint32_t reg) const { return constants[reg & ~kConstTag]; }
  /// The register of op on a, b, c (n of them read): folded when every
  /// operand is a constant, shared with an identical earlier step.
  std::uint32_t operation(Op op, std::uint32_t a, std::uint32_t b, std::uint32_t c, int n) {
    bool all_constant = true;
    for (int k = 0; k < n; ++k) all_constant = all_constant && is_constant(k == 0 ? a : k == 1 ? b : c);
    if (all_constant)
      return constant(Kernel::apply<double>(op, constant_value(a),
                                            n > 1 ? constant_value(b) : 0.0,
                                            n > 2 ? constant_value(c) : 0.0));
    // Negations moved to where they cost nothing, each rewrite exact on
    // values (in round-to-nearest, x − y is x + (−y) and −x·y is −(x·y),
    // bit for bit; an AD type's derivatives are the same numbers, a zero's
    // sign aside: kernel.hpp):
    //   −(−u) → u,  (−u) + v, v + (−u) → v − u,  v − (−u) → v + u,
    //   (−u)·v, u·(−v) → −(u·v),  (−u)/v, u/(−v) → −(u/v)
    // e.g. −c·y + d·x·y becomes d·x·y − c·y: one step fewer, two fused pairs.
    auto negated = [&](std::uint32_t reg) -> std::uint32_t {  // u if reg = −u, else none
      if ((reg & kStepTag) == 0) return kNotNegated;
      const Kernel::Step& st = steps[reg & ~kStepTag];
      return st.op == Op::Neg ? st.a : kNotNegated;
    };
    switch (op) {
      case Op::Neg:
        if (const std::uint32_t u = negated(a); u != kNotNegated) return u;
        break;
      case Op::Add:
        if (const std::uint32_t u = negated(a); u != kNotNegated) return operation(Op::Sub, b, u, b, 2);
        if (const std::uint32_t u = negated(b); u != kNotNegated) return operation(Op::Sub, a, u, a, 2);
        break;
      case Op::Sub:
        if (const std::uint32_t u = negated(b); u != kNotNegated) return operation(Op::Add, a, u, a, 2);
        break;
      case Op::Mul:
      case Op::Div: {
        const std::uint32_t u = negated(a), v = negated(b);
        if ((u == kNotNegated) != (v == kNotNegated)) {
          const std::uint32_t x = u != kNotNegated ? u : a, y = v != kNotNegated ? v : b;
          return operation(Op::Neg, operation(op, x, y, x, 2), 0, 0, 1);
        }
        break;
      }
      default: break;
    }
    // Operands a step does not read point at a fixed register (input 0 or
    // constant 0 would do): use a itself, so that sharing sees equal keys.
    if (n < 2) b = a;
    if (n < 3) c = a;
    const auto key = std::make_tuple(static_cast<int>(op), a, b, c);
    const auto [it, fresh] = shared_.try_emplace(key, static_cast<std::uint32_t>(steps.size()));
    if (fresh) steps.push_back({op, a, b, c});
    return kStepTag | it->second;
  }

 private:
  std::unordered_map<std::uint64_t, std::uint32_t> const_index_;
  std::map<std::tuple<int, std::uint32_t, std::uint32_t, std::uint32_t>, std::uint32_t> shared_;
};

}  // namespace

template <>
void Kernel::evaluate<double>(double* r) const {
  for (std::size_t k = 0; k < constants_.size(); ++k) r[n_inputs_ + k] = constants_[k];
  run_steps(steps_.data(), steps_.data() + steps_.size(), r, r + first_result_);
}

#if defined(__GNUC__) && !defined(__clang__)
[[gnu::optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize")]]
#endif
void Kernel::evaluate(std::span<const std::span<const double>> inputs, std::span<double> out,
                      double* r) const {
  if (code_.empty()) return;  // a Kernel never built: no inputs, no outputs
  double stack[kStackRegisters];
  if (r == nullptr) r = on_stack_ ? stack : thread_registers(registers());
  double* v = r;
  for (const std::span<const double> b : inputs) {
    copy_few(b.data(), b.size(), v);
    v += b.size();
  }
  evaluate_rhs(this, 0.0, nullptr, nullptr, out.data(), r);
}

void Kernel::vjp_rhs(const void* kernel, double* work, const double* w, double* ybar,
                     double* pbar) {
  const Kernel& k = *static_cast<const Kernel*>(kernel);
  if (k.placed_) {  // a derivative kernel's reverse: step by step (a second derivative)
    double* adj = work + k.registers();
    k.vjp_steps(work, std::span<const double>(w, k.n_outputs()), adj);
    for (std::size_t i = 0; i < k.blocks_[1]; ++i) ybar[i] = adj[1 + i];
    for (std::size_t j = 0; j < k.blocks_[2]; ++j) pbar[j] += adj[1 + k.blocks_[1] + j];
    return;
  }
  KernelCode::reverse(k, work, w, nullptr, ybar, pbar);
}

namespace {

/// Forward-mode derivatives of a Flattener's steps along one input v_j, as
/// registers of the same Flattener (so its folding and sharing apply: a
/// partial common to several columns, or equal to a value the outputs
/// compute, is one step). Each step's tangent follows ad::Dual's formula
/// for the operation (dual.hpp), in its order of operations, with the
/// structurally zero terms left out and products by a tangent 1 reduced to
/// the other factor (Kernel::build_rows).
class Tangents {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;  // structurally zero

  Tangents(Flattener& f, std::uint32_t input)
      : f_(f), input_(input), tangent_(f.steps.size(), kNone) {
    for (std::size_t i = 0; i < tangent_.size(); ++i) tangent_[i] = step(i);
  }
  /// The tangent of register `reg` (tagged), or the constant 0.
  std::uint32_t of_or_zero(std::uint32_t reg) const {
    const std::uint32_t t = of(reg);
    return t == kNone ? f_.constant(0.0) : t;
  }

 private:
  static constexpr std::uint32_t kStep = Flattener::kStepTag, kConst = Flattener::kConstTag;

  std::uint32_t of(std::uint32_t reg) const {
    if (reg & kStep) return tangent_[reg & ~kStep];
    if (reg & kConst) return kNone;
    return reg == input_ ? f_.constant(1.0) : kNone;
  }
  std::uint32_t k(double v) const { return f_.constant(v); }
  bool is(std::uint32_t x, double v) const {
    return x != kNone && f_.is_constant(x) && f_.constant_value(x) == v;
  }
  std::uint32_t op1(Op op, std::uint32_t a) const { return f_.operation(op, a, a, a, 1); }
  std::uint32_t op2(Op op, std::uint32_t a, std::uint32_t b) const {
    return f_.operation(op, a, b, a, 2);
  }
  // On tangents (kNone for zero):
  std::uint32_t mul(std::uint32_t x, std::uint32_t y) const {
    if (x == kNone || y == kNone || is(x, 0.0) || is(y, 0.0)) return kNone;
    if (is(x, 1.0)) return y;
    if (is(y, 1.0)) return x;
    return op2(Op::Mul, x, y);
  }
  std::uint32_t add(std::uint32_t x, std::uint32_t y) const {
    if (x == kNone) return y;
    if (y == kNone) return x;
    return op2(Op::Add, x, y);
  }
  std::uint32_t sub(std::uint32_t x, std::uint32_t y) const {
    if (y == kNone) return x;
    if (x == kNone) return op1(Op::Neg, y);
    return op2(Op::Sub, x, y);
  }
  std::uint32_t neg(std::uint32_t x) const { return x == kNone ? kNone : op1(Op::Neg, x); }
  /// c ≠ 0 ? x : y (x, y tangents or partials).
  std::uint32_t select(std::uint32_t c, std::uint32_t x, std::uint32_t y) const {
    if (x == y) return x;
    if (f_.is_constant(c)) return f_.constant_value(c) != 0.0 ? x : y;
    return f_.operation(Op::Select, c, x == kNone ? k(0.0) : x, y == kNone ? k(0.0) : y, 3);
  }
  /// d · ẋ, 0 where ẋ = 0 whatever d (ad::Dual's guard for an infinite
  /// partial: sqrt, cbrt at 0, pow at a zero base).
  std::uint32_t guarded(std::uint32_t d, std::uint32_t x) const {
    if (x == kNone || f_.is_constant(x)) return mul(d, x);
    return select(op2(Op::Eq, x, k(0.0)), kNone, mul(d, x));
  }

  std::uint32_t step(std::size_t i) {
    const Kernel::Step s = f_.steps[i];  // a copy: the steps grow below
    const std::uint32_t v = kStep | static_cast<std::uint32_t>(i);
    const std::uint32_t a = s.a, b = s.b;
    const std::uint32_t da = of(a), db = of(b);
    if (da == kNone && db == kNone && (s.op != Op::Select || of(s.c) == kNone)) return kNone;
    const std::uint32_t one = k(1.0), zero = k(0.0);
    // A function of one operand: d(a) · ȧ (ad::Dual's unary: d times the tangent).
    auto unary = [&](auto partial) { return da == kNone ? kNone : mul(partial(), da); };
    auto reciprocal = [&](std::uint32_t x) { return op2(Op::Div, one, x); };
    switch (s.op) {
      case Op::Constant:
      case Op::Variable: return da;
      case Op::Add: return add(da, db);
      case Op::Sub: return sub(da, db);
      case Op::Mul: return add(mul(b, da), mul(a, db));  // b ȧ + a ḃ
      case Op::Div:  // (ȧ − v ḃ) · (1/b)
        return mul(sub(da, mul(v, db)), reciprocal(b));
      case Op::Pow: {
        // ∂/∂a = 0 for b = 0, b v / a for a ≠ 0, else b a^(b−1); ∂/∂b = v log a for a > 0, else 0.
        const std::uint32_t dx =
            da == kNone ? kNone
                        : select(op2(Op::Eq, b, zero), zero,
                                 select(op2(Op::Ne, a, zero), op2(Op::Div, op2(Op::Mul, b, v), a),
                                        op2(Op::Mul, b, op2(Op::Pow, a, op2(Op::Sub, b, one)))));
        const std::uint32_t dy =
            db == kNone ? kNone
                        : select(op2(Op::Gt, a, zero), op2(Op::Mul, v, op1(Op::Log, a)), zero);
        return add(guarded(dx, da), mul(dy, db));
      }
      case Op::Atan2: {  // atan2(a, b): (b ȧ − a ḃ) / (b² + a²), 0 at the origin
        const std::uint32_t r2 = op2(Op::Add, op2(Op::Mul, b, b), op2(Op::Mul, a, a));
        const std::uint32_t inv = select(op2(Op::Eq, r2, zero), zero, reciprocal(r2));
        return add(mul(op2(Op::Mul, b, inv), da), mul(op2(Op::Mul, op1(Op::Neg, a), inv), db));
      }
      case Op::Hypot: {  // (a ȧ + b ḃ) / v, 0 at the origin
        const std::uint32_t inv = select(op2(Op::Eq, v, zero), zero, reciprocal(v));
        return add(mul(op2(Op::Mul, a, inv), da), mul(op2(Op::Mul, b, inv), db));
      }
      case Op::Min: return select(op2(Op::Lt, b, a), db, da);  // ties: the first argument
      case Op::Max: return select(op2(Op::Gt, b, a), db, da);
      case Op::Neg: return neg(da);
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
      case Op::And: case Op::Or: case Op::Not:
      case Op::Floor: case Op::Ceil: case Op::Round: return kNone;
      case Op::Select: return select(a, db, of(s.c));
      case Op::Sqrt:
        return guarded(select(op2(Op::Eq, v, zero), k(HUGE_VAL), op2(Op::Div, k(0.5), v)), da);
      case Op::Cbrt:
        return guarded(select(op2(Op::Eq, v, zero), k(HUGE_VAL),
                              reciprocal(op2(Op::Mul, op2(Op::Mul, k(3.0), v), v))),
                       da);
      case Op::Exp: return unary([&] { return v; });
      case Op::Expm1: return unary([&] { return op2(Op::Add, v, one); });
      case Op::Log: return unary([&] { return reciprocal(a); });
      case Op::Log1p: return unary([&] { return reciprocal(op2(Op::Add, one, a)); });
      case Op::Log2: return unary([&] { return reciprocal(op2(Op::Mul, a, k(kLn2))); });
      case Op::Log10: return unary([&] { return reciprocal(op2(Op::Mul, a, k(kLn10))); });
      case Op::Sin: return unary([&] { return op1(Op::Cos, a); });
      case Op::Cos: return unary([&] { return op1(Op::Neg, op1(Op::Sin, a)); });
      case Op::Tan: return unary([&] { return op2(Op::Add, one, op2(Op::Mul, v, v)); });
      case Op::Asin:
      case Op::Acos:
        return unary([&] {
          return op2(Op::Div, k(s.op == Op::Asin ? 1.0 : -1.0),
                     op1(Op::Sqrt, op2(Op::Mul, op2(Op::Sub, one, a), op2(Op::Add, one, a))));
        });
      case Op::Atan:
        return unary([&] { return reciprocal(op2(Op::Add, one, op2(Op::Mul, a, a))); });
      case Op::Sinh: return unary([&] { return op1(Op::Cosh, a); });
      case Op::Cosh: return unary([&] { return op1(Op::Sinh, a); });
      case Op::Tanh: return unary([&] { return op2(Op::Sub, one, op2(Op::Mul, v, v)); });
      case Op::Asinh:
        return unary(
            [&] { return reciprocal(op1(Op::Sqrt, op2(Op::Add, op2(Op::Mul, a, a), one))); });
      case Op::Acosh:
        return unary([&] {
          return reciprocal(
              op1(Op::Sqrt, op2(Op::Mul, op2(Op::Sub, a, one), op2(Op::Add, a, one))));
        });
      case Op::Atanh:
        return unary([&] {
          return reciprocal(op2(Op::Mul, op2(Op::Sub, one, a), op2(Op::Add, one, a)));
        });
      case Op::Erf:
      case Op::Erfc:
        return unary([&] {
          return op2(Op::Mul, k(s.op == Op::Erf ? k2OverSqrtPi : -k2OverSqrtPi),
                     op1(Op::Exp, op1(Op::Neg, op2(Op::Mul, a, a))));
        });
      case Op::Abs:  // ȧ for a > 0, −ȧ for a < 0, 0 at 0
        return select(op2(Op::Gt, a, zero), da,
                      select(op2(Op::Lt, a, zero), neg(da), kNone));
    }
    return kNone;
  }

  Flattener& f_;
  std::uint32_t input_;
  std::vector<std::uint32_t> tangent_;  // of the steps there were before this column's
};

/// The slots' and the outputs' programs into `f`; returns the outputs'
/// registers.
std::vector<std::uint32_t> flatten(Flattener& f, std::span<const Program> slots,
                                   std::span<const Program> outputs) {
  std::vector<std::uint32_t> var_reg(f.n_inputs_);
  for (std::size_t j = 0; j < f.n_inputs_; ++j) var_reg[j] = static_cast<std::uint32_t>(j);
  for (const Program& s : slots) var_reg.push_back(f.emit(s, var_reg));
  std::vector<std::uint32_t> out;
  for (const Program& o : outputs) out.push_back(f.emit(o, var_reg));
  return out;
}

}  // namespace

Kernel Kernel::build(std::size_t n_inputs, std::span<const Program> slots,
                     std::span<const Program> outputs, std::string_view context,
                     std::span<const std::size_t> input_blocks) {
  Flattener f(n_inputs, context);
  const std::vector<std::uint32_t> out = flatten(f, slots, outputs);
  return KernelCode::assemble(f, out, context, input_blocks);
}

Kernel Kernel::build_rows(std::size_t n_inputs, std::span<const Program> slots,
                          std::span<const Program> outputs, std::size_t first_column,
                          std::size_t columns, std::size_t lanes, std::string_view context,
                          std::span<const std::size_t> input_blocks) {
  COSTATE_CHECK(first_column + columns <= n_inputs && columns <= lanes,
                context << ": derivative rows of " << columns << " columns from input "
                        << first_column << " in " << lanes << " lanes (" << n_inputs
                        << " inputs; the columns must be inputs and fit the lanes)");
  Flattener f(n_inputs, context);
  const std::vector<std::uint32_t> values = flatten(f, slots, outputs);
  std::vector<std::vector<std::uint32_t>> tangent;  // [column][output]
  for (std::size_t l = 0; l < columns; ++l) {
    const Tangents d(f, static_cast<std::uint32_t>(first_column + l));
    tangent.emplace_back();
    for (const std::uint32_t o : values) tangent.back().push_back(d.of_or_zero(o));
  }
  const std::uint32_t zero = f.constant(0.0);
  std::vector<std::uint32_t> out;
  out.reserve(values.size() * (lanes + 1));
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::size_t l = 0; l < lanes; ++l) out.push_back(l < columns ? tangent[l][i] : zero);
    out.push_back(values[i]);
  }
  return KernelCode::assemble(f, out, context, input_blocks, true);
}

template <class Flat>
Kernel KernelCode::assemble(const Flat& f, const std::vector<std::uint32_t>& out,
                            std::string_view context, std::span<const std::size_t> input_blocks,
                            bool placed) {
  using Step = Kernel::Step;
  const std::size_t n_inputs = f.n_inputs_;
  // Keep what the outputs use (steps are in dependency order: one backward pass).
  constexpr std::uint32_t kStep = Flattener::kStepTag, kConst = Flattener::kConstTag;
  std::vector<char> live(f.steps.size(), 0);
  for (const std::uint32_t o : out)
    if (o & kStep) live[o & ~kStep] = 1;
  for (std::size_t i = f.steps.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (const std::uint32_t reg : {f.steps[i].a, f.steps[i].b, f.steps[i].c})
      if (reg & kStep) live[reg & ~kStep] = 1;
  }
  Kernel k;
  k.n_inputs_ = n_inputs;
  k.constants_ = f.constants;
  k.first_result_ = n_inputs + f.constants.size();
  std::vector<std::uint32_t> renumber(f.steps.size(), 0);
  auto final_reg = [&](std::uint32_t reg) -> std::uint32_t {
    if (reg & kStep) return static_cast<std::uint32_t>(k.first_result_) + renumber[reg & ~kStep];
    if (reg & kConst) return static_cast<std::uint32_t>(n_inputs) + (reg & ~kConst);
    return reg;
  };
  // The order of the steps, for the fused code's pairs (KernelCode::build
  // fuses a step with the next one when that reads it): an arithmetic step
  // read by one arithmetic step only (and not an output) is deferred to just
  // before that step, its deferred operands before it, the larger of two
  // such operand subtrees first — so that the smaller, often one step,
  // pairs with their consumer, e.g. a*x - b*x*y runs as (b*x, ·*y), (a*x,
  // · − ·) instead of a*x, (b*x, ·*y), · − ·. Every other step keeps its
  // place. Operands still come before their uses; each step computes what
  // it did (the order changes no value).
  auto fusable = [](Op op, bool first) {
    return op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Div ||
           (first && op == Op::Neg);
  };
  const std::size_t ns = f.steps.size();
  auto operand_steps = [&](std::size_t i) {  // distinct step operands of step i
    std::uint32_t o[3];
    int m = 0;
    for (const std::uint32_t reg : {f.steps[i].a, f.steps[i].b, f.steps[i].c})
      if ((reg & kStep) && (m == 0 || o[0] != (reg & ~kStep)) && (m < 2 || o[1] != (reg & ~kStep)))
        o[m++] = reg & ~kStep;
    return std::vector<std::uint32_t>(o, o + m);
  };
  std::vector<int> readers(ns, 0);
  std::vector<std::size_t> reader(ns, 0);
  for (std::size_t j = 0; j < ns; ++j) {
    if (!live[j]) continue;
    for (const std::uint32_t o : operand_steps(j)) {
      ++readers[o];
      reader[o] = j;
    }
  }
  for (const std::uint32_t o : out)
    if (o & kStep) readers[o & ~kStep] += 2;  // an output: never deferred
  // `emit` below recurses through chains of deferred steps, so a chain is
  // cut at kMaxDeferred links (its next step keeps its place): a sum of
  // 10⁵ terms, one single-use step after another, must not recurse 10⁵ deep.
  constexpr std::size_t kMaxDeferred = 64;
  std::vector<char> deferred(ns, 0);
  std::vector<std::size_t> size(ns, 1);    // steps of a deferred subtree
  std::vector<std::size_t> height(ns, 1);  // its longest chain of deferred steps
  for (std::size_t i = 0; i < ns; ++i) {
    if (!live[i]) continue;
    for (const std::uint32_t o : operand_steps(i))
      if (deferred[o]) {
        size[i] += size[o];
        height[i] = std::max(height[i], height[o] + 1);
      }
    deferred[i] = readers[i] == 1 && height[i] < kMaxDeferred && fusable(f.steps[i].op, true) &&
                  fusable(f.steps[reader[i]].op, false);
  }
  auto emit = [&](auto&& self, std::size_t i) -> void {
    std::vector<std::uint32_t> ops = operand_steps(i);
    std::stable_sort(ops.begin(), ops.end(),
                     [&](std::uint32_t x, std::uint32_t y) { return size[x] > size[y]; });
    for (const std::uint32_t o : ops)
      if (deferred[o]) self(self, o);
    const Step& s = f.steps[i];
    renumber[i] = static_cast<std::uint32_t>(k.steps_.size());
    k.steps_.push_back({s.op, final_reg(s.a), final_reg(s.b), final_reg(s.c)});
  };
  for (std::size_t i = 0; i < ns; ++i)
    if (live[i] && !deferred[i]) emit(emit, i);
  for (const std::uint32_t o : out) k.outputs_.push_back(final_reg(o));
  if (!input_blocks.empty()) {
    std::size_t total = 0;
    for (const std::size_t b : input_blocks) total += b;
    COSTATE_CHECK(input_blocks.size() <= Kernel::kMaxBlocks && total == n_inputs,
                  context << ": " << input_blocks.size() << " input blocks of " << total
                          << " inputs for " << n_inputs << " (at most " << Kernel::kMaxBlocks
                          << " blocks, summing to the inputs)");
    k.blocks_.assign(input_blocks.begin(), input_blocks.end());
  }
  k.placed_ = placed && k.outputs_.size() <= std::numeric_limits<std::uint16_t>::max();
  k.code_ = KernelCode::build(k);
  k.on_stack_ = k.registers() <= Kernel::kStackRegisters;
  return k;
}

void Kernel::vjp(const double* r, std::span<const double> w, double* adj) const {
  if (code_.empty()) return;  // a Kernel never built: no registers
  if (placed_) return vjp_steps(r, w, adj);  // a derivative kernel: step by step
  KernelCode::reverse(*this, r, w.data(), adj, nullptr, nullptr);
}

void Kernel::vjp_steps(const double* r, std::span<const double> w, double* adj) const {
  const std::size_t nr = registers();
  for (std::size_t i = 0; i < nr; ++i) adj[i] = 0.0;
  for (std::size_t i = 0; i < outputs_.size(); ++i) adj[outputs_[i]] += w[i];
  for (std::size_t i = steps_.size(); i-- > 0;) {
    const Step& s = steps_[i];
    reverse_one(s.op, static_cast<std::uint32_t>(first_result_ + i), s.a, s.b, s.c, r, adj);
  }
}

}  // namespace costate::expr
