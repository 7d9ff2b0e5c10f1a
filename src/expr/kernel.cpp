#include "costate/expr/kernel.hpp"

#include <bit>
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

// The direct code (Kernel::direct_): the steps on double with each operand
// read where it lies, in one of five places ("kinds"): 0 the registers (the
// steps' results), 1 the constants, 2 + j input block j of the gathered
// evaluate() — the inputs are not copied, the constants not loaded into
// registers. Add, Sub, Mul, Div and Neg have an opcode per combination of
// their operands' kinds (code = 25 op + 5 kind(a) + kind(b), Neg kNeg +
// kind(a)), so that each operand is one load; any other operation is two
// entries, {kGeneric, a, b, c} with the kind in each operand's top three
// bits, then {op}. After the steps, one {kOutput + kind, index} per output
// writes it to `out`; kHalt ends the code. Dispatch is threaded (labels as
// values, a GNU extension GCC and Clang have): one indirect jump per step,
// at the end of the step before, and no range check.
constexpr unsigned kKinds = 5;
constexpr std::uint32_t kKindShift = 29, kIndexMask = (1u << kKindShift) - 1;
constexpr unsigned kNeg = 4 * kKinds * kKinds, kGeneric = kNeg + kKinds, kOutput = kGeneric + 1,
                   kHalt = kOutput + kKinds;

[[gnu::noinline]] double generic_step(const Kernel::Step* s, const double* const* base) {
  auto value = [&](std::uint32_t x) { return base[x >> kKindShift][x & kIndexMask]; };
  return Kernel::apply<double>(s[1].op, value(s->a), value(s->b), value(s->c));
}

/// Runs the direct code `s`: `r` the registers (null: a buffer of this
/// call's own), `constants`, the input blocks, the outputs to `out`.
#if defined(__GNUC__) && !defined(__clang__)
// Keep one dispatch per handler (no cross-jumping to a shared tail).
[[gnu::optimize("no-crossjumping")]]
#endif
[[gnu::noinline]] void run_direct(const Kernel::Step* s, double* r, std::size_t n_registers,
                                  std::size_t first_result, const double* constants,
                                  std::span<const std::span<const double>> inputs, double* out);

}  // namespace

namespace {

void run_direct(const Kernel::Step* s, double* r, std::size_t n_registers,
                std::size_t first_result, const double* constants,
                std::span<const std::span<const double>> inputs, double* out) {
  double stack[Kernel::kStackRegisters];
  if (r == nullptr) r = n_registers <= Kernel::kStackRegisters ? stack : thread_registers(n_registers);
  const std::size_t nb = inputs.size();
  const double* const base[kKinds] = {r, constants, inputs[0].data(),
                                      nb > 1 ? inputs[1].data() : nullptr,
                                      nb > 2 ? inputs[2].data() : nullptr};
  const double* const b0 = base[0];
  const double* const b1 = base[1];
  const double* const b2 = base[2];
  const double* const b3 = base[3];
  const double* const b4 = base[4];
  double* o = r + first_result;
#define COSTATE_VALUE(K, i) \
  ((K) == 0 ? b0[i] : (K) == 1 ? b1[i] : (K) == 2 ? b2[i] : (K) == 3 ? b3[i] : b4[i])
#define COSTATE_FOR_B(F, OPI, SYM, KA) \
  F(OPI, SYM, KA, 0) F(OPI, SYM, KA, 1) F(OPI, SYM, KA, 2) F(OPI, SYM, KA, 3) F(OPI, SYM, KA, 4)
#define COSTATE_FOR_AB(F, OPI, SYM)                                                \
  COSTATE_FOR_B(F, OPI, SYM, 0) COSTATE_FOR_B(F, OPI, SYM, 1) COSTATE_FOR_B(F, OPI, SYM, 2) \
  COSTATE_FOR_B(F, OPI, SYM, 3) COSTATE_FOR_B(F, OPI, SYM, 4)
#define COSTATE_FOR_ALL(F) \
  COSTATE_FOR_AB(F, 0, +) COSTATE_FOR_AB(F, 1, -) COSTATE_FOR_AB(F, 2, *) COSTATE_FOR_AB(F, 3, /)
#define COSTATE_LABEL(OPI, SYM, KA, KB) &&op_##OPI##_##KA##_##KB,
#define COSTATE_NEXT goto* table[static_cast<unsigned>(s->op)]
#define COSTATE_HANDLER(OPI, SYM, KA, KB)                     \
  op_##OPI##_##KA##_##KB:                                     \
  *o++ = COSTATE_VALUE(KA, s->a) SYM COSTATE_VALUE(KB, s->b); \
  ++s;                                                        \
  COSTATE_NEXT;
#define COSTATE_UNARY(NAME, K, EXPR) \
  NAME##_##K : EXPR;                 \
  ++s;                               \
  COSTATE_NEXT;
  static const void* const table[] = {COSTATE_FOR_ALL(COSTATE_LABEL) && neg_0,
                                      &&neg_1,
                                      &&neg_2,
                                      &&neg_3,
                                      &&neg_4,
                                      &&generic,
                                      &&output_0,
                                      &&output_1,
                                      &&output_2,
                                      &&output_3,
                                      &&output_4,
                                      &&halt};
  static_assert(sizeof table / sizeof table[0] == kHalt + 1);
  COSTATE_NEXT;
  COSTATE_FOR_ALL(COSTATE_HANDLER)
  COSTATE_UNARY(neg, 0, *o++ = -b0[s->a])
  COSTATE_UNARY(neg, 1, *o++ = -b1[s->a])
  COSTATE_UNARY(neg, 2, *o++ = -b2[s->a])
  COSTATE_UNARY(neg, 3, *o++ = -b3[s->a])
  COSTATE_UNARY(neg, 4, *o++ = -b4[s->a])
  COSTATE_UNARY(output, 0, *out++ = b0[s->a])
  COSTATE_UNARY(output, 1, *out++ = b1[s->a])
  COSTATE_UNARY(output, 2, *out++ = b2[s->a])
  COSTATE_UNARY(output, 3, *out++ = b3[s->a])
  COSTATE_UNARY(output, 4, *out++ = b4[s->a])
generic:
  *o++ = generic_step(s, base);
  s += 2;
  COSTATE_NEXT;
halt:
  return;
#undef COSTATE_UNARY
#undef COSTATE_HANDLER
#undef COSTATE_NEXT
#undef COSTATE_LABEL
#undef COSTATE_FOR_ALL
#undef COSTATE_FOR_AB
#undef COSTATE_FOR_B
#undef COSTATE_VALUE
}

/// Register `reg`'s place in the direct code: kind << kKindShift | index.
std::uint32_t locate(std::uint32_t reg, std::size_t first_result,
                     std::span<const std::size_t> block_size) {
  std::size_t offset = 0;
  for (std::size_t j = 0; j < block_size.size(); ++j) {
    if (reg < offset + block_size[j])
      return static_cast<std::uint32_t>((2 + j) << kKindShift | (reg - offset));
    offset += block_size[j];
  }
  if (reg < first_result) return static_cast<std::uint32_t>(1u << kKindShift | (reg - offset));
  return reg;  // a step's result: kind 0, its register
}

int arithmetic_index(Op op) {
  switch (op) {
    case Op::Add: return 0;
    case Op::Sub: return 1;
    case Op::Mul: return 2;
    case Op::Div: return 3;
    default: return -1;
  }
}

std::vector<Kernel::Step> direct_code(const std::vector<Kernel::Step>& steps,
                                      std::span<const std::uint32_t> outputs,
                                      std::size_t first_result,
                                      std::span<const std::size_t> block_size) {
  std::vector<Kernel::Step> code;
  auto at = [&](std::uint32_t reg) { return locate(reg, first_result, block_size); };
  auto op = [](unsigned code) { return static_cast<Op>(code); };
  for (const Kernel::Step& s : steps) {
    const std::uint32_t a = at(s.a), b = at(s.b), c = at(s.c);
    const std::uint32_t ka = a >> kKindShift, kb = b >> kKindShift;
    const int i = arithmetic_index(s.op);
    if (i >= 0)
      code.push_back({op(kKinds * kKinds * i + kKinds * ka + kb), a & kIndexMask, b & kIndexMask, 0});
    else if (s.op == Op::Neg)
      code.push_back({op(kNeg + ka), a & kIndexMask, 0, 0});
    else {
      code.push_back({op(kGeneric), a, b, c});
      code.push_back({s.op, 0, 0, 0});
    }
  }
  for (const std::uint32_t o : outputs) {
    const std::uint32_t x = at(o);
    code.push_back({op(kOutput + (x >> kKindShift)), x & kIndexMask, 0, 0});
  }
  code.push_back({op(kHalt), 0, 0, 0});
  return code;
}

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

  std::size_t n_inputs_;
  std::string_view context_;
  std::vector<double> constants;
  std::vector<Kernel::Step> steps;  // operands tagged

 private:
  std::uint32_t constant(double v) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const auto [it, fresh] = const_index_.try_emplace(bits, static_cast<std::uint32_t>(constants.size()));
    if (fresh) constants.push_back(v);
    return kConstTag | it->second;
  }
  bool is_constant(std::uint32_t reg) const {
    return (reg & kConstTag) != 0 && (reg & kStepTag) == 0;
  }
  std::uint32_t operation(Op op, std::uint32_t a, std::uint32_t b, std::uint32_t c, int n) {
    bool all_constant = true;
    for (int k = 0; k < n; ++k) all_constant = all_constant && is_constant(k == 0 ? a : k == 1 ? b : c);
    if (all_constant) {
      auto value = [&](std::uint32_t reg) { return constants[reg & ~kConstTag]; };
      return constant(Kernel::apply<double>(op, value(a), n > 1 ? value(b) : 0.0,
                                            n > 2 ? value(c) : 0.0));
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

  std::unordered_map<std::uint64_t, std::uint32_t> const_index_;
  std::map<std::tuple<int, std::uint32_t, std::uint32_t, std::uint32_t>, std::uint32_t> shared_;
};

}  // namespace

template <>
void Kernel::evaluate<double>(double* r) const {
  for (std::size_t k = 0; k < constants_.size(); ++k) r[n_inputs_ + k] = constants_[k];
  run_steps(steps_.data(), steps_.data() + steps_.size(), r, r + first_result_);
}

namespace {

/// to[0 … n) = from[0 … n) for the few values of a model's inputs: the
/// first four unrolled, the rest a plain loop (a memcpy call, or the
/// vectorizer's checks, cost more than such a copy).
[[gnu::always_inline]] inline double* copy_few(const double* from, std::size_t n, double* to) {
  switch (n < 4 ? n : 4) {
    case 4: to[3] = from[3]; [[fallthrough]];
    case 3: to[2] = from[2]; [[fallthrough]];
    case 2: to[1] = from[1]; [[fallthrough]];
    case 1: to[0] = from[0]; [[fallthrough]];
    default: break;
  }
  for (std::size_t i = 4; i < n; ++i) to[i] = from[i];
  return to + n;
}

}  // namespace

void Kernel::evaluate(std::span<const std::span<const double>> inputs, std::span<double> out,
                      double* r) const {
  static_assert(kMaxBlocks == 3, "run_direct reads three input blocks");
  const std::size_t nb = blocks_.size();
  const bool direct = nb != 0 && inputs.size() == nb && inputs[0].size() == blocks_[0] &&
                      (nb < 2 || inputs[1].size() == blocks_[1]) &&
                      (nb < 3 || inputs[2].size() == blocks_[2]);
  // The right-hand side's call: straight into the direct code (a tail call).
  if (direct && r == nullptr)
    return run_direct(direct_.data(), nullptr, registers(), first_result_, constants_.data(), inputs,
                      out.data());
  evaluate_into(inputs, out, r, direct);
}

#if defined(__GNUC__) && !defined(__clang__)
[[gnu::optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize")]]
#endif
void Kernel::evaluate_into(std::span<const std::span<const double>> inputs, std::span<double> out,
                           double* r, bool direct) const {
  double stack[kStackRegisters];
  if (r == nullptr) r = registers() <= kStackRegisters ? stack : thread_registers(registers());
  double* v = r;  // the inputs' registers: the caller's (e.g. for vjp) or the steps' operands
  for (const std::span<const double> block : inputs) v = copy_few(block.data(), block.size(), v);
  for (std::size_t k = 0; k < constants_.size(); ++k) r[n_inputs_ + k] = constants_[k];
  if (direct)
    return run_direct(direct_.data(), r, registers(), first_result_, constants_.data(), inputs,
                      out.data());
  run_steps(steps_.data(), steps_.data() + steps_.size(), r, r + first_result_);
  for (std::size_t i = 0; i < outputs_.size(); ++i) out[i] = r[outputs_[i]];
}

Kernel Kernel::build(std::size_t n_inputs, std::span<const Program> slots,
                     std::span<const Program> outputs, std::string_view context,
                     std::span<const std::size_t> input_blocks) {
  Flattener f(n_inputs, context);
  std::vector<std::uint32_t> var_reg(n_inputs);
  for (std::size_t j = 0; j < n_inputs; ++j) var_reg[j] = static_cast<std::uint32_t>(j);
  for (const Program& s : slots) var_reg.push_back(f.emit(s, var_reg));
  std::vector<std::uint32_t> out;
  for (const Program& o : outputs) out.push_back(f.emit(o, var_reg));

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
  for (std::size_t i = 0; i < f.steps.size(); ++i) {
    if (!live[i]) continue;
    const Step& s = f.steps[i];
    renumber[i] = static_cast<std::uint32_t>(k.steps_.size());
    k.steps_.push_back({s.op, final_reg(s.a), final_reg(s.b), final_reg(s.c)});
  }
  for (const std::uint32_t o : out) k.outputs_.push_back(final_reg(o));
  if (!input_blocks.empty()) {
    std::size_t total = 0;
    for (const std::size_t b : input_blocks) total += b;
    COSTATE_CHECK(input_blocks.size() <= kMaxBlocks && total == n_inputs,
                  context << ": " << input_blocks.size() << " input blocks of " << total
                          << " inputs for " << n_inputs << " (at most " << kMaxBlocks
                          << " blocks, summing to the inputs)");
    k.blocks_.assign(input_blocks.begin(), input_blocks.end());
    k.direct_ = direct_code(k.steps_, k.outputs_, k.first_result_, input_blocks);
  }
  return k;
}

void Kernel::vjp(const double* r, std::span<const double> w, double* adj) const {
  const std::size_t nr = registers();
  for (std::size_t i = 0; i < nr; ++i) adj[i] = 0.0;
  for (std::size_t i = 0; i < outputs_.size(); ++i) adj[outputs_[i]] += w[i];
  constexpr double kLn2 = 0.69314718055994530941723212145818;
  constexpr double kLn10 = 2.30258509299404568401799145468437;
  constexpr double k2OverSqrtPi = 1.12837916709551257389615890312154;
  for (std::size_t i = steps_.size(); i-- > 0;) {
    const double g = adj[first_result_ + i];
    if (g == 0.0) continue;
    const Step& s = steps_[i];
    const double a = r[s.a], b = r[s.b], v = r[first_result_ + i];
    double& ga = adj[s.a];
    double& gb = adj[s.b];
    switch (s.op) {
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
      case Op::Select: (a != 0.0 ? gb : adj[s.c]) += g; break;
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
}

}  // namespace costate::expr
