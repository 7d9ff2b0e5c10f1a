#pragma once
/// \file
/// expr::Program — an arithmetic expression from an input file
/// ("a*x - b*x*y"), parsed once into a compact postfix program that is
/// evaluated on any scalar type: double for the simulation, ad::Dual for
/// Jacobians, ad::Real for adjoints. This is how models, objectives and
/// initial states are written as equations without recompiling.
///
/// Grammar (usual precedence; ^ is right-associative and binds tighter than
/// unary minus, so -x^2 = -(x^2) and 2^-1 = 0.5):
///     expr    := term (('+' | '-') term)*
///     term    := unary (('*' | '/') unary)*
///     unary   := ('-' | '+') unary | power
///     power   := primary ('^' unary)?
///     primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
/// Numbers in any C form (3, 2.5, .5, 1e-3, 6.02E+23). Names are the
/// variables given to compile() (e.g. t, the states, the parameters), the
/// constants pi and e, and the functions of the AD core:
///     sqrt cbrt exp expm1 log log1p log2 log10 sin cos tan asin acos atan
///     sinh cosh tanh asinh acosh atanh erf erfc abs floor ceil round
///     pow(x, y) atan2(y, x) hypot(x, y) min(x, y) max(x, y)
///
/// Programs can also be built from an expression tree (Node, Program::build)
/// by code that has one already — the SBML importer hands MathML over that
/// way, with no text in between. Trees may use a few opcodes the grammar has
/// no syntax for: comparisons and logic (1 for true, 0 for false) and
/// Select(c, a, b) = c ≠ 0 ? a : b (SBML's piecewise).
///
/// Errors (costate::Error) name the expression's context (e.g. the input key
/// "model.equations.x"), quote the expression, give the column (1-based) and
/// the problem: unknown symbol (with the nearest valid name), syntax error,
/// wrong number of arguments.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::ad {
template <class T, int N>
class Dual;
template <class T>
class Reverse;
class IndexSet;
}  // namespace costate::ad

namespace costate::expr {

/// Opcodes of the postfix program.
enum class Op : std::uint8_t {
  Constant,  ///< push constants[arg]
  Variable,  ///< push variables[arg]
  Add, Sub, Mul, Div, Pow, Neg,
  Sqrt, Cbrt, Exp, Expm1, Log, Log1p, Log2, Log10, Sin, Cos, Tan, Asin, Acos, Atan,
  Sinh, Cosh, Tanh, Asinh, Acosh, Atanh, Erf, Erfc, Abs, Floor, Ceil, Round,
  Atan2, Hypot, Min, Max,
  // Only from trees (Program::build): 1 for true, 0 for false.
  Lt, Le, Gt, Ge, Eq, Ne, And, Or, Not,
  Select,  ///< c, a, b → c ≠ 0 ? a : b (pops three)
};

/// Number of operands an opcode pops (0 for Constant and Variable, which push).
int arity(Op op);
/// The opcode's name ("add", "sin", "select", …), for messages.
const char* to_string(Op op);

struct Instruction {
  Op op;
  std::uint32_t arg = 0;  ///< constant or variable index
};

/// Calls handled by the caller instead of the parser (e.g. the stencil
/// operators lap(u), div_grad(k, u) of pde::EquationModel): `name(a, b…)`
/// with `name` in `names` and every argument a bare name. `resolve` returns
/// the index of a variable that stands for the call's value (it may lie past
/// the compiled variables: the caller appends such variables to the values
/// it passes to evaluate()), or throws costate::Error with a message; the
/// parser adds the context, the quoted expression and the column.
struct CallHook {
  std::vector<std::string> names;
  std::function<std::uint32_t(const std::string& name, const std::vector<std::string>& args)> resolve;
};

/// An expression tree: what Program::build compiles. A leaf is a constant
/// or a variable (an index into the values evaluate() receives); an inner
/// node applies an opcode to arity(op) operands. Owns its children.
struct Node {
  enum class Kind : std::uint8_t { Constant, Variable, Apply };
  Kind kind = Kind::Constant;
  Op op = Op::Constant;
  double value = 0.0;           ///< Kind::Constant
  std::uint32_t variable = 0;   ///< Kind::Variable
  std::vector<Node> args;       ///< Kind::Apply

  static Node constant(double v) { return Node{Kind::Constant, Op::Constant, v, 0, {}}; }
  static Node var(std::uint32_t i) { return Node{Kind::Variable, Op::Variable, 0.0, i, {}}; }
  static Node apply(Op op, std::vector<Node> args) {
    return Node{Kind::Apply, op, 0.0, 0, std::move(args)};
  }
  bool is_constant() const { return kind == Kind::Constant; }
};

/// `node` in the compile() grammar, variables written by `variables[i]`
/// (so compile(to_text(n, v), v) computes what build(n) does). Throws
/// costate::Error for opcodes the grammar cannot write (comparisons, logic,
/// Select). Numbers are written with 17 significant digits.
std::string to_text(const Node& node, const std::vector<std::string>& variables);

class Program {
 public:
  Program() = default;

  /// Parses `text`. `variables` are the names the expression may use, in the
  /// order evaluate() receives their values. `context` names where the
  /// expression came from, for error messages (e.g. "model.equations.x").
  static Program compile(std::string_view text, const std::vector<std::string>& variables,
                         std::string_view context = "expression");
  /// The same, with calls of `hook.names` resolved by `hook` (see CallHook).
  static Program compile(std::string_view text, const std::vector<std::string>& variables,
                         std::string_view context, const CallHook& hook);

  /// Compiles a tree. `n_variables` is how many values evaluate() will
  /// receive (every Variable leaf must index below it); `text` is what
  /// text() reports and error messages quote (e.g. the formula the tree came
  /// from). Operands that are all constants are folded. Throws costate::Error
  /// (with `context`) when a node has the wrong number of operands or a
  /// variable index is out of range.
  static Program build(const Node& root, std::size_t n_variables, std::string text,
                       std::string_view context = "expression");

  /// Evaluates with `variables[i]` the value of the i-th compiled variable.
  template <class T>
  T evaluate(std::span<const T> variables) const;

  /// Indices (into the compiled variables) that the expression uses.
  const std::vector<std::uint32_t>& used_variables() const { return used_; }
  bool uses(std::uint32_t variable) const;
  const std::string& text() const { return text_; }
  const std::vector<Instruction>& code() const { return code_; }
  /// The constants Op::Constant instructions index.
  const std::vector<double>& constants() const { return constants_; }
  std::size_t stack_depth() const { return depth_; }
  bool empty() const { return code_.empty(); }

 private:
  std::string text_;
  std::vector<Instruction> code_;
  std::vector<double> constants_;
  std::vector<std::uint32_t> used_;
  std::size_t depth_ = 0;
  std::size_t n_variables_ = 0;
  friend class Parser;
  friend class TreeCompiler;
};

/// The values of the variables (t, y…, p…) in that order, in a small inline
/// buffer (no allocation for up to 32 of them): what models and objectives
/// written as expressions evaluate their programs on.
template <class T>
class VariableFrame {
 public:
  VariableFrame(double t, std::span<const T> y, std::span<const T> p)
      : size_(1 + y.size() + p.size()) {
    if (size_ > kInline) {
      heap_.resize(size_);
      data_ = heap_.data();
    }
    data_[0] = T(t);
    std::copy(y.begin(), y.end(), data_ + 1);
    std::copy(p.begin(), p.end(), data_ + 1 + y.size());
  }
  VariableFrame(const VariableFrame&) = delete;
  VariableFrame& operator=(const VariableFrame&) = delete;
  std::span<const T> values() const { return std::span<const T>(data_, size_); }

 private:
  static constexpr std::size_t kInline = 32;
  std::size_t size_;
  T inline_[kInline];
  std::vector<T> heap_;
  T* data_ = inline_;
};

template <class T>
T Program::evaluate(std::span<const T> variables) const {
  using std::abs, std::acos, std::acosh, std::asin, std::asinh, std::atan, std::atan2,
      std::atanh, std::cbrt, std::ceil, std::cos, std::cosh, std::erf, std::erfc, std::exp,
      std::expm1, std::floor, std::hypot, std::log, std::log10, std::log1p, std::log2, std::max,
      std::min, std::pow, std::round, std::sin, std::sinh, std::sqrt, std::tan, std::tanh;
  COSTATE_CHECK(variables.size() >= n_variables_,
                "expression '" << text_ << "' needs " << n_variables_ << " variables, got "
                               << variables.size());
  // A small fixed stack covers nearly every expression; deeper ones spill.
  constexpr std::size_t kInline = 16;
  T inline_stack[kInline]{};
  std::vector<T> heap_stack;
  T* s = inline_stack;
  if (depth_ > kInline) {
    heap_stack.resize(depth_);
    s = heap_stack.data();
  }
  std::size_t top = 0;  // number of values on the stack
  for (const Instruction& in : code_) {
    switch (in.op) {
      case Op::Constant: s[top++] = T(constants_[in.arg]); break;
      case Op::Variable: s[top++] = variables[in.arg]; break;
      case Op::Add: --top; s[top - 1] = T(s[top - 1] + s[top]); break;
      case Op::Sub: --top; s[top - 1] = T(s[top - 1] - s[top]); break;
      case Op::Mul: --top; s[top - 1] = T(s[top - 1] * s[top]); break;
      case Op::Div: --top; s[top - 1] = T(s[top - 1] / s[top]); break;
      case Op::Pow: --top; s[top - 1] = T(pow(s[top - 1], s[top])); break;
      case Op::Atan2: --top; s[top - 1] = T(atan2(s[top - 1], s[top])); break;
      case Op::Hypot: --top; s[top - 1] = T(hypot(s[top - 1], s[top])); break;
      case Op::Min: --top; s[top - 1] = T(min(s[top - 1], s[top])); break;
      case Op::Max: --top; s[top - 1] = T(max(s[top - 1], s[top])); break;
      case Op::Neg: s[top - 1] = T(-s[top - 1]); break;
#define COSTATE_EXPR_COMPARE(OP, cmp) \
  case Op::OP: --top; s[top - 1] = T(s[top - 1] cmp s[top] ? 1.0 : 0.0); break;
      COSTATE_EXPR_COMPARE(Lt, <)
      COSTATE_EXPR_COMPARE(Le, <=)
      COSTATE_EXPR_COMPARE(Gt, >)
      COSTATE_EXPR_COMPARE(Ge, >=)
      COSTATE_EXPR_COMPARE(Eq, ==)
      COSTATE_EXPR_COMPARE(Ne, !=)
#undef COSTATE_EXPR_COMPARE
      case Op::And: --top; s[top - 1] = T(s[top - 1] != 0.0 && s[top] != 0.0 ? 1.0 : 0.0); break;
      case Op::Or: --top; s[top - 1] = T(s[top - 1] != 0.0 || s[top] != 0.0 ? 1.0 : 0.0); break;
      case Op::Not: s[top - 1] = T(s[top - 1] == 0.0 ? 1.0 : 0.0); break;
      case Op::Select:
        top -= 2;
        if (s[top - 1] != 0.0) s[top - 1] = s[top]; else s[top - 1] = s[top + 1];
        break;
#define COSTATE_EXPR_UNARY(OP, fn) \
  case Op::OP: s[top - 1] = T(fn(s[top - 1])); break;
      COSTATE_EXPR_UNARY(Sqrt, sqrt)
      COSTATE_EXPR_UNARY(Cbrt, cbrt)
      COSTATE_EXPR_UNARY(Exp, exp)
      COSTATE_EXPR_UNARY(Expm1, expm1)
      COSTATE_EXPR_UNARY(Log, log)
      COSTATE_EXPR_UNARY(Log1p, log1p)
      COSTATE_EXPR_UNARY(Log2, log2)
      COSTATE_EXPR_UNARY(Log10, log10)
      COSTATE_EXPR_UNARY(Sin, sin)
      COSTATE_EXPR_UNARY(Cos, cos)
      COSTATE_EXPR_UNARY(Tan, tan)
      COSTATE_EXPR_UNARY(Asin, asin)
      COSTATE_EXPR_UNARY(Acos, acos)
      COSTATE_EXPR_UNARY(Atan, atan)
      COSTATE_EXPR_UNARY(Sinh, sinh)
      COSTATE_EXPR_UNARY(Cosh, cosh)
      COSTATE_EXPR_UNARY(Tanh, tanh)
      COSTATE_EXPR_UNARY(Asinh, asinh)
      COSTATE_EXPR_UNARY(Acosh, acosh)
      COSTATE_EXPR_UNARY(Atanh, atanh)
      COSTATE_EXPR_UNARY(Erf, erf)
      COSTATE_EXPR_UNARY(Erfc, erfc)
      COSTATE_EXPR_UNARY(Abs, abs)
      COSTATE_EXPR_UNARY(Floor, floor)
      COSTATE_EXPR_UNARY(Ceil, ceil)
      COSTATE_EXPR_UNARY(Round, round)
#undef COSTATE_EXPR_UNARY
    }
  }
  return s[0];
}

// The scalar types the library evaluates expressions on (ode::System's
// adapters: double, Dual<double, 8>, IndexSet, Reverse<double>; second order:
// Dual<double, 1>, Dual<Dual<double, 1>, 8>, Reverse<Dual<double, 1>>),
// instantiated once in src/expr/program.cpp; other types (the PDE layer's
// Dual<double, N>) are instantiated where they are used.
extern template double Program::evaluate<double>(std::span<const double>) const;
extern template ad::Dual<double, 1> Program::evaluate<ad::Dual<double, 1>>(
    std::span<const ad::Dual<double, 1>>) const;
extern template ad::Dual<double, 8> Program::evaluate<ad::Dual<double, 8>>(
    std::span<const ad::Dual<double, 8>>) const;
extern template ad::IndexSet Program::evaluate<ad::IndexSet>(std::span<const ad::IndexSet>) const;
extern template ad::Reverse<double> Program::evaluate<ad::Reverse<double>>(
    std::span<const ad::Reverse<double>>) const;
extern template ad::Reverse<ad::Dual<double, 1>> Program::evaluate<
    ad::Reverse<ad::Dual<double, 1>>>(std::span<const ad::Reverse<ad::Dual<double, 1>>>) const;
extern template ad::Dual<ad::Dual<double, 1>, 8> Program::evaluate<
    ad::Dual<ad::Dual<double, 1>, 8>>(std::span<const ad::Dual<ad::Dual<double, 1>, 8>>) const;

}  // namespace costate::expr
