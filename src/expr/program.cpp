#include "costate/expr/program.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <optional>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/io/input.hpp"  // nearest(): "did you mean" suggestions

namespace costate::expr {

// The scalar types declared `extern template` in program.hpp.
template double Program::evaluate<double>(std::span<const double>) const;
template ad::Dual<double, 1> Program::evaluate<ad::Dual<double, 1>>(
    std::span<const ad::Dual<double, 1>>) const;
template ad::Dual<double, 8> Program::evaluate<ad::Dual<double, 8>>(
    std::span<const ad::Dual<double, 8>>) const;
template ad::IndexSet Program::evaluate<ad::IndexSet>(std::span<const ad::IndexSet>) const;
template ad::Reverse<double> Program::evaluate<ad::Reverse<double>>(
    std::span<const ad::Reverse<double>>) const;
template ad::Reverse<ad::Dual<double, 1>> Program::evaluate<ad::Reverse<ad::Dual<double, 1>>>(
    std::span<const ad::Reverse<ad::Dual<double, 1>>>) const;
template ad::Dual<ad::Dual<double, 1>, 8> Program::evaluate<ad::Dual<ad::Dual<double, 1>, 8>>(
    std::span<const ad::Dual<ad::Dual<double, 1>, 8>>) const;

namespace {

struct Function {
  const char* name;
  Op op;
  int arity;
};

constexpr Function kFunctions[] = {
    {"sqrt", Op::Sqrt, 1},   {"cbrt", Op::Cbrt, 1},   {"exp", Op::Exp, 1},
    {"expm1", Op::Expm1, 1}, {"log", Op::Log, 1},     {"log1p", Op::Log1p, 1},
    {"log2", Op::Log2, 1},   {"log10", Op::Log10, 1}, {"sin", Op::Sin, 1},
    {"cos", Op::Cos, 1},     {"tan", Op::Tan, 1},     {"asin", Op::Asin, 1},
    {"acos", Op::Acos, 1},   {"atan", Op::Atan, 1},   {"sinh", Op::Sinh, 1},
    {"cosh", Op::Cosh, 1},   {"tanh", Op::Tanh, 1},   {"asinh", Op::Asinh, 1},
    {"acosh", Op::Acosh, 1}, {"atanh", Op::Atanh, 1}, {"erf", Op::Erf, 1},
    {"erfc", Op::Erfc, 1},   {"abs", Op::Abs, 1},     {"floor", Op::Floor, 1},
    {"ceil", Op::Ceil, 1},   {"round", Op::Round, 1}, {"pow", Op::Pow, 2},
    {"atan2", Op::Atan2, 2}, {"hypot", Op::Hypot, 2}, {"min", Op::Min, 2},
    {"max", Op::Max, 2},
};

/// The deepest nesting the parser accepts: parentheses, function calls,
/// unary signs and powers each open one level. The parser descends one C++
/// call chain per level (about 0.4 KB of stack for a parenthesis), so
/// 30 000 nested parentheses or 100 000 unary minus signs would overflow the
/// stack of a thread, an MPI rank or the Python interpreter; 1000 levels stay
/// below 1 MB and far above any hand-written or generated model seen so far.
constexpr std::size_t kMaxNesting = 1000;

/// The expression as quoted in an error: whole when short, else its start
/// and its length (a 100 000-character expression is not repeated back).
std::string quoted(std::string_view text) {
  constexpr std::size_t kShown = 80;
  if (text.size() <= kShown) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kShown)) + "...' (" + std::to_string(text.size()) +
         " characters)";
}

const Function* find_function(std::string_view name) {
  for (const auto& f : kFunctions)
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace

/// Recursive-descent parser emitting postfix code.
class Parser {
 public:
  Parser(std::string_view text, const std::vector<std::string>& variables, std::string_view context,
         const CallHook* hook = nullptr)
      : text_(text), variables_(variables), context_(context), hook_(hook) {}

  Program run() {
    prog_.text_ = std::string(text_);
    prog_.n_variables_ = variables_.size();
    skip_space();
    if (pos_ >= text_.size()) fail(pos_, "the expression is empty");
    expr();
    skip_space();
    if (pos_ < text_.size()) {
      if (text_[pos_] == ')') fail(pos_, "unbalanced ')': no matching '('");
      fail(pos_, std::string("unexpected '") + text_[pos_] +
                     "' after a complete expression (missing operator?)");
    }
    std::sort(prog_.used_.begin(), prog_.used_.end());
    prog_.used_.erase(std::unique(prog_.used_.begin(), prog_.used_.end()), prog_.used_.end());
    return std::move(prog_);
  }

 private:
  [[noreturn]] void fail(std::size_t column, const std::string& message) const {
    throw Error(std::string(context_) + ": " + quoted(text_) + ": column " +
                std::to_string(column + 1) + ": " + message);
  }

  /// One level deeper for the duration of a scope (see kMaxNesting).
  class Nested {
   public:
    Nested(Parser& p, std::size_t column) : p_(p) {
      if (++p_.nesting_ > kMaxNesting)
        p_.fail(column, "nesting deeper than " + std::to_string(kMaxNesting) +
                            " levels (parentheses, function calls, unary signs and powers each "
                            "count one); write the expression with less nesting, e.g. through "
                            "intermediate quantities");
    }
    ~Nested() { --p_.nesting_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& p_;
  };

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void emit(Op op, std::uint32_t arg = 0) {
    prog_.code_.push_back({op, arg});
    depth_ = depth_ + 1 - static_cast<std::size_t>(arity(op));
    prog_.depth_ = std::max(prog_.depth_, depth_);
  }
  void constant(double v) {
    prog_.constants_.push_back(v);
    emit(Op::Constant, static_cast<std::uint32_t>(prog_.constants_.size() - 1));
  }

  void expr() {
    term();
    for (;;) {
      if (accept('+')) {
        term();
        emit(Op::Add);
      } else if (accept('-')) {
        term();
        emit(Op::Sub);
      } else {
        return;
      }
    }
  }
  void term() {
    unary();
    for (;;) {
      if (accept('*')) {
        if (pos_ < text_.size() && text_[pos_] == '*')
          fail(pos_, "'**' is not an operator here; write powers as x^y or pow(x, y)");
        unary();
        emit(Op::Mul);
      } else if (accept('/')) {
        unary();
        emit(Op::Div);
      } else {
        return;
      }
    }
  }
  void unary() {
    if (accept('-')) {
      const Nested level(*this, pos_ - 1);
      unary();
      emit(Op::Neg);
    } else if (accept('+')) {
      const Nested level(*this, pos_ - 1);
      unary();
    } else {
      power();
    }
  }
  void power() {
    primary();
    if (accept('^')) {
      const Nested level(*this, pos_ - 1);
      unary();
      emit(Op::Pow);
    }
  }
  void primary() {
    skip_space();
    if (pos_ >= text_.size()) fail(pos_, "expected a number, a name or '(' but the expression ended");
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      number();
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      name();
    } else if (c == '(') {
      const std::size_t open = pos_;
      const Nested level(*this, open);
      ++pos_;
      expr();
      if (!accept(')')) fail(open, "unbalanced '(': no matching ')'");
    } else {
      fail(pos_, std::string("expected a number, a name or '(' but found '") + c + "'");
    }
  }
  void number() {
    const std::size_t start = pos_;
    // Scan the C number syntax; strtod does the conversion.
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      std::size_t p = pos_ + 1;
      if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (p < text_.size() && std::isdigit(static_cast<unsigned char>(text_[p]))) {
        pos_ = p;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      } else {
        fail(pos_, "malformed number: exponent without digits");
      }
    }
    const std::string token(text_.substr(start, pos_ - start));
    if (token == ".") fail(start, "malformed number '.'");
    char* end = nullptr;
    const double v = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) fail(start, "malformed number '" + token + "'");
    if (pos_ < text_.size() &&
        (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      fail(pos_, "a number is directly followed by a name (missing '*'?)");
    constant(v);
  }
  void name() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    const std::string id(text_.substr(start, pos_ - start));
    skip_space();
    const bool call = pos_ < text_.size() && text_[pos_] == '(';
    const bool hooked =
        hook_ && std::find(hook_->names.begin(), hook_->names.end(), id) != hook_->names.end();
    if (call && hooked) return hook_call(id, start);
    if (!call && hooked)
      fail(start, "'" + id + "' is an operator: call it as " + id + "(name, ...)");
    if (call) {
      const Function* f = find_function(id);
      if (!f) {
        std::vector<std::string> names;
        for (const auto& fn : kFunctions) names.emplace_back(fn.name);
        if (hook_) names.insert(names.end(), hook_->names.begin(), hook_->names.end());
        std::string msg = "unknown function '" + id + "'";
        const std::string near = io::nearest(id, names);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        fail(start, msg);
      }
      const Nested level(*this, pos_);
      ++pos_;  // '('
      int args = 0;
      skip_space();
      if (!(pos_ < text_.size() && text_[pos_] == ')')) {
        do {
          expr();
          ++args;
        } while (accept(','));
      }
      if (!accept(')')) fail(start, "unbalanced '(' in the call of '" + id + "'");
      if (args != f->arity)
        fail(start, "'" + id + "' takes " + std::to_string(f->arity) + " argument" +
                        (f->arity == 1 ? "" : "s") + ", got " + std::to_string(args));
      emit(f->op);
      return;
    }
    for (std::size_t i = 0; i < variables_.size(); ++i) {
      if (variables_[i] == id) {
        emit(Op::Variable, static_cast<std::uint32_t>(i));
        prog_.used_.push_back(static_cast<std::uint32_t>(i));
        return;
      }
    }
    if (id == "pi") return constant(std::numbers::pi);
    if (id == "e") return constant(std::numbers::e);
    if (find_function(id)) fail(start, "'" + id + "' is a function: call it as " + id + "(...)");
    std::vector<std::string> names = variables_;
    names.emplace_back("pi");
    names.emplace_back("e");
    std::string msg = "unknown symbol '" + id + "'";
    const std::string near = io::nearest(id, names);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    std::string valid;
    for (const auto& v : variables_) valid += (valid.empty() ? "" : ", ") + v;
    if (!valid.empty()) msg += " (known: " + valid + ")";
    fail(start, msg);
  }

  /// `id(name, name, ...)` resolved by the hook into one variable.
  void hook_call(const std::string& id, std::size_t start) {
    ++pos_;  // '('
    std::vector<std::string> args;
    for (;;) {
      skip_space();
      const std::size_t at = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      const bool word = pos_ > at && !std::isdigit(static_cast<unsigned char>(text_[at]));
      skip_space();
      const bool ends = pos_ < text_.size() && (text_[pos_] == ',' || text_[pos_] == ')');
      if (!word || !ends)
        fail(at, "'" + id + "' applies to names (fields or parameter fields), not to an expression; "
                 "write e.g. " + id + "(u) and combine the results outside the call");
      args.emplace_back(text_.substr(at, pos_ - at));
      while (!args.back().empty() && std::isspace(static_cast<unsigned char>(args.back().back())))
        args.back().pop_back();
      if (text_[pos_] == ')') {
        ++pos_;
        break;
      }
      ++pos_;  // ','
    }
    std::uint32_t index = 0;
    try {
      index = hook_->resolve(id, args);
    } catch (const Error& e) {
      fail(start, e.what());
    }
    emit(Op::Variable, index);
    prog_.used_.push_back(index);
    prog_.n_variables_ = std::max<std::size_t>(prog_.n_variables_, index + 1);
  }

  std::string_view text_;
  const std::vector<std::string>& variables_;
  std::string_view context_;
  const CallHook* hook_ = nullptr;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
  std::size_t nesting_ = 0;
  Program prog_;
};

/// Post-order emission of a Node tree, with constant folding.
class TreeCompiler {
 public:
  TreeCompiler(std::size_t n_variables, std::string_view context)
      : n_variables_(n_variables), context_(context) {}

  Program run(const Node& root, std::string text) {
    prog_.text_ = std::move(text);
    prog_.n_variables_ = n_variables_;
    const Node folded = fold(root);
    emit_tree(folded);
    std::sort(prog_.used_.begin(), prog_.used_.end());
    prog_.used_.erase(std::unique(prog_.used_.begin(), prog_.used_.end()), prog_.used_.end());
    return std::move(prog_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error(std::string(context_) + ": " + quoted(prog_.text_) + ": " + message);
  }
  /// A copy of `n` with every all-constant operation replaced by its value.
  Node fold(const Node& n) const {
    if (n.kind == Node::Kind::Variable && n.variable >= n_variables_)
      fail("variable index " + std::to_string(n.variable) + " is out of range (" +
           std::to_string(n_variables_) + " variables)");
    if (n.kind != Node::Kind::Apply) return n;
    if (n.op == Op::Constant || n.op == Op::Variable)
      fail("an Apply node needs an operation, not a leaf opcode");
    if (static_cast<int>(n.args.size()) != arity(n.op))
      fail(std::string("'") + to_string(n.op) + "' takes " + std::to_string(arity(n.op)) +
           " operands, got " + std::to_string(n.args.size()));
    Node out = Node::apply(n.op, {});
    bool all_constant = true;
    for (const Node& a : n.args) {
      out.args.push_back(fold(a));
      all_constant = all_constant && out.args.back().is_constant();
    }
    if (!all_constant) return out;
    Program p;
    p.n_variables_ = 0;
    for (const Node& a : out.args) {
      p.constants_.push_back(a.value);
      p.code_.push_back({Op::Constant, static_cast<std::uint32_t>(p.constants_.size() - 1)});
    }
    p.code_.push_back({n.op, 0});
    p.depth_ = out.args.size();
    return Node::constant(p.evaluate(std::span<const double>()));
  }
  void emit_tree(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Constant:
        prog_.constants_.push_back(n.value);
        emit(Op::Constant, static_cast<std::uint32_t>(prog_.constants_.size() - 1));
        return;
      case Node::Kind::Variable:
        prog_.used_.push_back(n.variable);
        emit(Op::Variable, n.variable);
        return;
      case Node::Kind::Apply:
        for (const Node& a : n.args) emit_tree(a);
        emit(n.op);
        return;
    }
  }
  void emit(Op op, std::uint32_t arg = 0) {
    prog_.code_.push_back({op, arg});
    depth_ = depth_ + 1 - static_cast<std::size_t>(arity(op));
    prog_.depth_ = std::max(prog_.depth_, depth_);
  }

  std::size_t n_variables_;
  std::string_view context_;
  std::size_t depth_ = 0;
  Program prog_;
};

int arity(Op op) {
  switch (op) {
    case Op::Constant: case Op::Variable: return 0;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow:
    case Op::Atan2: case Op::Hypot: case Op::Min: case Op::Max:
    case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
    case Op::And: case Op::Or: return 2;
    case Op::Select: return 3;
    default: return 1;
  }
}

const char* to_string(Op op) {
  switch (op) {
    case Op::Constant: return "constant";
    case Op::Variable: return "variable";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Neg: return "neg";
    case Op::Lt: return "lt";
    case Op::Le: return "le";
    case Op::Gt: return "gt";
    case Op::Ge: return "ge";
    case Op::Eq: return "eq";
    case Op::Ne: return "ne";
    case Op::And: return "and";
    case Op::Or: return "or";
    case Op::Not: return "not";
    case Op::Select: return "select";
    default: break;
  }
  for (const auto& f : kFunctions)
    if (f.op == op) return f.name;
  return "?";
}

namespace {

/// `bare`: n is the left operand of an operation of its own precedence level
/// (a + b − c, a * b / c parse left to right), so its parentheses are left
/// out — a sum of n terms is then not n parentheses deep when parsed back.
void write_text(const Node& n, const std::vector<std::string>& variables, std::string& out,
                bool bare = false) {
  switch (n.kind) {
    case Node::Kind::Constant: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", n.value);
      if (!std::isfinite(n.value))
        throw Error(std::string("expression tree: the constant ") + buf +
                    " cannot be written as text");
      // Parenthesised so that a sign or an exponent never joins a neighbour.
      out += n.value < 0 ? std::string("(") + buf + ")" : std::string(buf);
      return;
    }
    case Node::Kind::Variable:
      COSTATE_CHECK(n.variable < variables.size(),
                    "expression tree: variable index " << n.variable << " has no name");
      out += variables[n.variable];
      return;
    case Node::Kind::Apply: break;
  }
  const char* infix = nullptr;
  switch (n.op) {
    case Op::Add: infix = " + "; break;
    case Op::Sub: infix = " - "; break;
    case Op::Mul: infix = " * "; break;
    case Op::Div: infix = " / "; break;
    case Op::Neg:
      out += "(-(";
      write_text(n.args.at(0), variables, out);
      out += "))";
      return;
    default: break;
  }
  if (infix) {
    const bool additive = n.op == Op::Add || n.op == Op::Sub;
    const Node& left = n.args.at(0);
    const bool left_same_level =
        left.kind == Node::Kind::Apply &&
        (additive ? (left.op == Op::Add || left.op == Op::Sub)
                  : (left.op == Op::Mul || left.op == Op::Div));
    if (!bare) out += '(';
    write_text(left, variables, out, left_same_level);
    out += infix;
    write_text(n.args.at(1), variables, out);
    if (!bare) out += ')';
    return;
  }
  const Function* f = nullptr;
  for (const auto& fn : kFunctions)
    if (fn.op == n.op) f = &fn;
  if (!f)
    throw Error(std::string("expression tree: '") + to_string(n.op) +
                "' has no text form in the expression grammar");
  out += f->name;
  out += '(';
  for (std::size_t i = 0; i < n.args.size(); ++i) {
    if (i) out += ", ";
    write_text(n.args[i], variables, out);
  }
  out += ')';
}

}  // namespace

std::string to_text(const Node& node, const std::vector<std::string>& variables) {
  std::string out;
  write_text(node, variables, out);
  return out;
}

Program Program::build(const Node& root, std::size_t n_variables, std::string text,
                       std::string_view context) {
  return TreeCompiler(n_variables, context).run(root, std::move(text));
}

Program Program::compile(std::string_view text, const std::vector<std::string>& variables,
                         std::string_view context) {
  return Parser(text, variables, context).run();
}

Program Program::compile(std::string_view text, const std::vector<std::string>& variables,
                         std::string_view context, const CallHook& hook) {
  return Parser(text, variables, context, &hook).run();
}

bool Program::uses(std::uint32_t variable) const {
  return std::binary_search(used_.begin(), used_.end(), variable);
}

}  // namespace costate::expr
