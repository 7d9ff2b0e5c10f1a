#pragma once
/// \file
/// expr::Kernel — several expr::Programs flattened into one register
/// machine, evaluated without allocation and differentiated by
/// interpreting it backward (no tape):
///
///     inputs  v_0 … v_{m−1}                     (e.g. t, y, p)
///     slots   s_k = P_k(v, s_0 … s_{k−1})        (e.g. SBML reaction rates)
///     outputs o_i = Q_i(v, s)                    (e.g. the right-hand side)
///
/// Registers: [inputs | constants | one result per instruction] (SSA: every
/// instruction writes a register of its own, so an evaluation leaves every
/// intermediate value in place for the reverse sweep). Building flattens
/// the postfix programs into three-operand instructions that read registers
/// directly (no stack, no variable loads), shares identical constants and
/// identical operations on identical operands (the same bits either way),
/// folds operations on constants, moves negations into their readers
/// (−(−u) → u, (−u) + v → v − u, v − (−u) → v + u, (−u)·v → −(u·v), the
/// same for ÷: the same values bit for bit; on AD types the same
/// derivatives, a zero's sign aside) and drops what no output uses; a step read
/// by one arithmetic step only is moved to just before it (see the fused
/// code below).
///
/// Derivatives (exact, no finite differences):
///   - forward: evaluate<T> on any scalar type, e.g. ad::Dual<double, N>;
///   - reverse: vjp() after evaluate<double>: with r̄ the registers'
///     adjoints, r̄_out += w, then for each instruction r = φ(a, b, c) in
///     reverse order ā += r̄ ∂φ/∂a, b̄ += r̄ ∂φ/∂b, c̄ += r̄ ∂φ/∂c; the inputs'
///     adjoints are (∂o/∂v)ᵀ w.
/// The partials are those of ad::Dual (dual.hpp: abs at 0, min/max ties,
/// pow at a zero or negative base, atan2/hypot at the origin, rounding and
/// comparisons with derivative 0; Select passes r̄ to the branch taken). At
/// the points where Dual guards an infinite partial against a zero tangent
/// (sqrt, cbrt at 0; pow at a zero base) the reverse sweep multiplies
/// r̄ · ∞ instead (its guard is on r̄ = 0).
///
/// On double the hot calls (the gathered evaluate, the ODE form, vjp) run
/// the *fused code*: the steps with each arithmetic step that the next
/// arithmetic step reads fused with it into one superinstruction, threaded
/// dispatch, the inputs' copies and the outputs as instructions (see
/// "The fused code" below). Its results are bit for bit those of the
/// register evaluation (evaluate<double>(r)) and of vjp_steps() — NaNs
/// compare as NaNs, their sign and payload being the compiler's to choose.
///
/// Thread safety: a Kernel is immutable after build(); every call takes the
/// caller's workspace (registers() values), so one Kernel serves any number
/// of threads.

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "costate/ad/second_order_dual.hpp"
#include "costate/expr/program.hpp"

namespace costate::expr {

class Kernel {
 public:
  /// One operation: the register it writes is first_result() + its index.
  struct Step {
    Op op = Op::Add;
    std::uint32_t a = 0, b = 0, c = 0;  ///< operand registers (unused ones 0)
  };

  Kernel() = default;

  /// Flattens `slots` and `outputs`. Programs index variables as
  /// v_0 … v_{n_inputs−1} then s_0, s_1, …: slots[k] may use the inputs and
  /// s_0 … s_{k−1}, outputs every input and slot. Throws costate::Error
  /// (with `context`) for a variable out of that range.
  ///
  /// `input_blocks` (optional: up to kMaxBlocks sizes summing to n_inputs)
  /// says how the gathered evaluate() receives the inputs; the ODE form
  /// (evaluate_rhs / vjp_rhs below) needs the three blocks {1, n_y, n_p}.
  static Kernel build(std::size_t n_inputs, std::span<const Program> slots,
                      std::span<const Program> outputs, std::string_view context = "expression",
                      std::span<const std::size_t> input_blocks = {});
  static constexpr std::size_t kMaxBlocks = 3;

  /// The outputs together with their first derivatives, as one kernel of
  /// (lanes + 1) · outputs.size() outputs in *rows*: row i holds
  ///     lane l < columns:            ∂o_i/∂v_{first_column + l}
  ///     lane l ∈ [columns, lanes):   0
  ///     lane `lanes`:                o_i
  /// — the layout of ad::Dual<double, lanes> (tangents, then the value), so
  /// that a caller evaluates straight into Dual outputs (ode::EquationModel:
  /// the dense Jacobian rows of ode::Linearization). The derivative
  /// expressions are formed once, here, by forward-mode differentiation of
  /// the steps, one column at a time, with ad::Dual's formulas in its order
  /// of operations; the outputs' expressions and theirs share the sharing,
  /// folding and fused code of build(). A derivative structurally zero
  /// along a column (no path from that input) is the constant 0, and a
  /// product with a tangent 1 is its other factor. So each entry is what a
  /// unit-seeded Dual pass (evaluate<ad::Dual<double, lanes>>) computes,
  /// except where that pass multiplies a structurally zero tangent by an
  /// infinite or NaN partial (the entry is then 0, not NaN), and except the
  /// sign of a zero; where sqrt, cbrt or pow has an infinite partial the
  /// entry is 0 for a zero tangent, as Dual's guard gives it (here at any
  /// base). Requires first_column + columns ≤ n_inputs and columns ≤ lanes.
  static Kernel build_rows(std::size_t n_inputs, std::span<const Program> slots,
                           std::span<const Program> outputs, std::size_t first_column,
                           std::size_t columns, std::size_t lanes,
                           std::string_view context = "expression",
                           std::span<const std::size_t> input_blocks = {});

  std::size_t n_inputs() const { return n_inputs_; }
  std::size_t n_outputs() const { return outputs_.size(); }
  /// Size of the workspace evaluate() and vjp() take.
  std::size_t registers() const { return first_result_ + steps_.size(); }
  std::size_t first_result() const { return first_result_; }
  const std::vector<Step>& steps() const { return steps_; }
  /// The register holding output i.
  std::uint32_t output_register(std::size_t i) const { return outputs_[i]; }

  /// Evaluates in place: `r` (≥ registers() values) holds the inputs in
  /// r[0 … n_inputs); on return every register is set and output i is
  /// r[output_register(i)]. On double this is the *register evaluation*:
  /// one step at a time through a switch — the reference the fused code
  /// below must reproduce bit for bit.
  template <class T>
  void evaluate(T* r) const;
  /// The same, the outputs copied to `out` (n_outputs() values).
  template <class T>
  void evaluate(T* r, std::span<T> out) const {
    evaluate(r);
    for (std::size_t i = 0; i < outputs_.size(); ++i) out[i] = r[outputs_[i]];
  }

  // ---- The fused code (double): what the ODE loops run.
  // Built once with the steps: each arithmetic step (+ − × ÷, negation)
  // whose result the next arithmetic step reads is fused with it into one
  // instruction (a superinstruction: r₁ = a ∘ b, r₂ = r₁ ⋆ c or c ⋆ r₁,
  // both written to their registers); the outputs are written by the code
  // itself, three per instruction; every other operation is one
  // instruction. Dispatch is threaded (one indirect jump per instruction).
  // The fused code performs the steps' operations in the steps' order on
  // the same values, so every register and output is bit for bit the
  // register evaluation's (kernel.cpp is compiled with -ffp-contract=off:
  // no fused multiply–add changes a rounding). The reverse sweep runs the
  // same instructions backward, each step's updates those of vjp_steps().

  /// evaluate<double> with the inputs gathered from consecutive blocks (e.g.
  /// {t}, y, p: sizes summing to n_inputs()) and the outputs written to
  /// `out`, by the fused code. `r` (≥ registers() values) receives every
  /// register as evaluate(r) leaves them, e.g. for vjp(); if null, the call
  /// uses a buffer of its own (on the stack for up to kStackRegisters
  /// registers, else one per thread).
  void evaluate(std::span<const std::span<const double>> inputs, std::span<double> out,
                double* r = nullptr) const;
  static constexpr std::size_t kStackRegisters = 256;
  /// Instructions the fused code runs for the steps (a fused pair counts
  /// once; the outputs' instructions not counted): steps().size() minus the
  /// number of fused pairs.
  std::size_t fused_instructions() const { return first_steps_ > last_ ? 0 : last_ + 1 - first_steps_; }

  /// The reverse sweep at the point of an evaluate<double>(r) (or of the
  /// gathered evaluate with `r`): on return adjoint[j] = Σ_i w_i ∂o_i/∂v_j
  /// for each input j < n_inputs (the other registers() − n_inputs entries
  /// are scratch). Runs the fused code backward.
  void vjp(const double* r, std::span<const double> w, double* adjoint) const;
  /// The same, one step at a time through a switch: the reference vjp()
  /// reproduces bit for bit.
  void vjp_steps(const double* r, std::span<const double> w, double* adjoint) const;

  // ---- The ODE form, as plain functions (what ode::System calls per step,
  // through a function pointer: no virtual call, no span, no size check).
  // Only for a kernel built with input_blocks {1, n_y, n_p}; `kernel` is
  // the Kernel, y and p hold n_y and n_p values.
  /// out = the outputs at inputs (t, y, p); `r` as in the gathered
  /// evaluate (null: a buffer of the call's own; else registers() doubles
  /// keeping every register, e.g. for vjp_rhs — except t's when no step
  /// and no output reads t, which is then not copied).
  static void evaluate_rhs(const void* kernel, double t, const double* y, const double* p,
                           double* out, double* r);
  /// At the point of an evaluate_rhs(…, r = work): with ā = (∂o/∂v)ᵀ w,
  /// ybar[i] = ā_{y_i} (assigned), pbar[j] += ā_{p_j}. `work`: 2·registers()
  /// doubles, the registers then the adjoints' scratch.
  static void vjp_rhs(const void* kernel, double* work, const double* w, double* ybar,
                      double* pbar);

  // ---- A caller's own registers, prepared once (what ode::Linearization
  // does with an equation model's Jacobian rows: the parameters and the
  // constants stay in place from call to call, only t and y change).
  /// Writes the constants into r (registers() doubles) and the outputs
  /// that are constants into out (n_outputs() doubles): what
  /// evaluate_prepared leaves to the caller.
  void prepare(double* r, double* out) const;
  /// evaluate_rhs with the inputs written by the caller into r[0 …
  /// n_inputs()) and r, out prepared (prepare()) — the same outputs, the
  /// same bits; only the steps and the non-constant outputs run.
  static void evaluate_prepared(const void* kernel, double* r, double* out);

  /// The operation of one step on values (double, ad::Dual, …): what
  /// evaluate() runs, as Program::evaluate computes it.
  /// Always inlined into evaluate(): a call per step (through the shared
  /// library's PLT) cost more than the operation.
  template <class T>
  [[gnu::always_inline]] static inline T apply(Op op, const T& a, const T& b, const T& c);

 private:
  std::size_t n_inputs_ = 0, first_result_ = 0;
  std::vector<double> constants_;     // registers n_inputs … first_result − 1
  std::vector<Step> steps_;
  std::vector<std::uint32_t> outputs_;
  std::vector<std::size_t> blocks_;
  // The fused code (kernel.cpp): code_[0] a sentinel (where the reverse
  // sweep stops), the copies of the inputs (ODE form) and, from
  // code_[consts_], of the constants, then one instruction per step or
  // fused pair, then the outputs' instructions; code_[last_] is the last
  // step's instruction. With placed_ outputs (build_rows' kernels), an
  // instruction whose result is an output also writes it at its place
  // (`at`), the constant outputs are written before code_[first_steps_]
  // and the others after the steps, each at its place.
  struct Code {
    Op op = Op::Add;
    std::uint16_t at = 0;  // placed_: the output written (arithmetic, pairs, outputs)
    std::uint32_t a = 0, b = 0, c = 0;
  };
  std::vector<Code> code_;
  std::size_t consts_ = 1, first_steps_ = 1, last_ = 0;
  bool placed_ = false;
  bool on_stack_ = true;  // registers() ≤ kStackRegisters
  friend struct KernelCode;  // src/expr/kernel.cpp
};

template <class T>
inline T Kernel::apply(Op op, const T& a, const T& b, const T& c) {
  using std::abs, std::acos, std::acosh, std::asin, std::asinh, std::atan, std::atan2,
      std::atanh, std::cbrt, std::ceil, std::cos, std::cosh, std::erf, std::erfc, std::exp,
      std::expm1, std::floor, std::hypot, std::log, std::log10, std::log1p, std::log2, std::max,
      std::min, std::pow, std::round, std::sin, std::sinh, std::sqrt, std::tan, std::tanh;
  switch (op) {
    case Op::Constant:
    case Op::Variable: return a;
    case Op::Add: return T(a + b);
    case Op::Sub: return T(a - b);
    case Op::Mul: return T(a * b);
    case Op::Div: return T(a / b);
    case Op::Pow: return T(pow(a, b));
    case Op::Atan2: return T(atan2(a, b));
    case Op::Hypot: return T(hypot(a, b));
    case Op::Min: return T(min(a, b));
    case Op::Max: return T(max(a, b));
    case Op::Neg: return T(-a);
    case Op::Lt: return T(a < b ? 1.0 : 0.0);
    case Op::Le: return T(a <= b ? 1.0 : 0.0);
    case Op::Gt: return T(a > b ? 1.0 : 0.0);
    case Op::Ge: return T(a >= b ? 1.0 : 0.0);
    case Op::Eq: return T(a == b ? 1.0 : 0.0);
    case Op::Ne: return T(a != b ? 1.0 : 0.0);
    case Op::And: return T(a != 0.0 && b != 0.0 ? 1.0 : 0.0);
    case Op::Or: return T(a != 0.0 || b != 0.0 ? 1.0 : 0.0);
    case Op::Not: return T(a == 0.0 ? 1.0 : 0.0);
    case Op::Select: return a != 0.0 ? b : c;
    case Op::Sqrt: return T(sqrt(a));
    case Op::Cbrt: return T(cbrt(a));
    case Op::Exp: return T(exp(a));
    case Op::Expm1: return T(expm1(a));
    case Op::Log: return T(log(a));
    case Op::Log1p: return T(log1p(a));
    case Op::Log2: return T(log2(a));
    case Op::Log10: return T(log10(a));
    case Op::Sin: return T(sin(a));
    case Op::Cos: return T(cos(a));
    case Op::Tan: return T(tan(a));
    case Op::Asin: return T(asin(a));
    case Op::Acos: return T(acos(a));
    case Op::Atan: return T(atan(a));
    case Op::Sinh: return T(sinh(a));
    case Op::Cosh: return T(cosh(a));
    case Op::Tanh: return T(tanh(a));
    case Op::Asinh: return T(asinh(a));
    case Op::Acosh: return T(acosh(a));
    case Op::Atanh: return T(atanh(a));
    case Op::Erf: return T(erf(a));
    case Op::Erfc: return T(erfc(a));
    case Op::Abs: return T(abs(a));
    case Op::Floor: return T(floor(a));
    case Op::Ceil: return T(ceil(a));
    case Op::Round: return T(round(a));
  }
  return a;
}

template <class T>
void Kernel::evaluate(T* r) const {
  for (std::size_t k = 0; k < constants_.size(); ++k) r[n_inputs_ + k] = T(constants_[k]);
  T* out = r + first_result_;
  for (const Step& s : steps_) *out++ = apply<T>(s.op, r[s.a], r[s.b], r[s.c]);
}

// On double: a specialization in src/expr/kernel.cpp (one switch over the
// opcodes without the range check, the form the hot ODE loops run).
template <>
void Kernel::evaluate<double>(double* r) const;
// Instantiated once in src/expr/kernel.cpp (program.hpp lists why these types).
extern template void Kernel::evaluate<ad::Dual<double, 1>>(ad::Dual<double, 1>*) const;
extern template void Kernel::evaluate<ad::Dual<double, 8>>(ad::Dual<double, 8>*) const;
extern template void Kernel::evaluate<ad::IndexSet>(ad::IndexSet*) const;
extern template void Kernel::evaluate<ad::Reverse<double>>(ad::Reverse<double>*) const;
extern template void Kernel::evaluate<ad::Reverse<ad::Dual<double, 1>>>(
    ad::Reverse<ad::Dual<double, 1>>*) const;
extern template void Kernel::evaluate<ad::Dual<ad::Dual<double, 1>, 8>>(
    ad::Dual<ad::Dual<double, 1>, 8>*) const;
// The second-order dense linearization's scalars (ode::SecondOrderLinearization).
extern template void Kernel::evaluate<ad::SecondOrderDual<4>>(ad::SecondOrderDual<4>*) const;
extern template void Kernel::evaluate<ad::SecondOrderDual<6>>(ad::SecondOrderDual<6>*) const;
extern template void Kernel::evaluate<ad::SecondOrderDual<8>>(ad::SecondOrderDual<8>*) const;

}  // namespace costate::expr
