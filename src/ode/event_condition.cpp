#include "costate/ode/event_condition.hpp"

#include <cctype>

#include "costate/core/error.hpp"

namespace costate::ode {

namespace {

using Op = Condition::Op;

bool is_relation(expr::Op op) {
  return op == expr::Op::Lt || op == expr::Op::Le || op == expr::Op::Gt || op == expr::Op::Ge;
}

/// True when `n` holds an opcode that makes a root jump (a comparison, logic
/// or a piecewise choice).
bool jumps(const expr::Node& n) {
  if (n.kind != expr::Node::Kind::Apply) return false;
  switch (n.op) {
    case expr::Op::Lt: case expr::Op::Le: case expr::Op::Gt: case expr::Op::Ge:
    case expr::Op::Eq: case expr::Op::Ne: case expr::Op::And: case expr::Op::Or:
    case expr::Op::Not: case expr::Op::Select:
      return true;
    default:
      break;
  }
  for (const auto& a : n.args)
    if (jumps(a)) return true;
  return false;
}

/// The condition grammar of Condition::parse over a text, the relations'
/// operands handed to expr::Program::compile.
class ConditionParser {
 public:
  ConditionParser(std::string_view text, const std::vector<std::string>& variables,
                  std::string_view context)
      : text_(text), variables_(variables), context_(context) {
    out_.text = std::string(text);
  }

  Condition run() {
    skip_space();
    if (pos_ == text_.size()) fail("the condition is empty", 0);
    condition();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(text_.substr(pos_)) + "'", pos_);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& problem, std::size_t at) const {
    throw Error(std::string(context_) + ": in the condition '" + std::string(text_) +
                "' (column " + std::to_string(at + 1) + "): " + problem +
                ". Expected relations (a > b, a >= b, a < b, a <= b) combined with &&, ||, ! "
                "and parentheses");
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool starts(std::size_t at, std::string_view s) const { return text_.substr(at, s.size()) == s; }
  bool match(std::string_view s) {
    skip_space();
    if (!starts(pos_, s)) return false;
    pos_ += s.size();
    return true;
  }
  void emit(Op op, std::uint32_t root = 0) { out_.code.push_back({op, root}); }

  void condition() {
    conjunct();
    while (match("||")) {
      conjunct();
      emit(Op::Or);
    }
  }
  void conjunct() {
    negation();
    while (match("&&")) {
      negation();
      emit(Op::And);
    }
  }
  /// Whether the text from `at` (after spaces) ends a condition's operand:
  /// the end, '&&', '||' or ')'.
  bool ends_operand(std::size_t at) const {
    while (at < text_.size() && std::isspace(static_cast<unsigned char>(text_[at]))) ++at;
    return at == text_.size() || starts(at, "&&") || starts(at, "||") || text_[at] == ')';
  }
  void negation() {
    skip_space();
    if (++depth_ > kMaxNesting) fail("nested too deeply", pos_);
    if (pos_ < text_.size() && text_[pos_] == '!' && !starts(pos_, "!=")) {
      ++pos_;
      negation();
      emit(Op::Not);
    } else if (word("true")) {
      emit(Op::True);
    } else if (word("false")) {
      emit(Op::False);
    } else if (pos_ < text_.size() && text_[pos_] == '(' && ends_operand(closing(pos_) + 1)) {
      // A parenthesised condition (a parenthesis followed by a relation
      // operator opens an expression instead: "(x + 1) > 2").
      const std::size_t open = pos_++;
      condition();
      if (!match(")")) fail("'(' without its ')'", open);
    } else {
      relation();
    }
    --depth_;
  }
  bool word(std::string_view w) {
    if (!starts(pos_, w) || !ends_operand(pos_ + w.size())) return false;
    pos_ += w.size();
    return true;
  }
  /// The ')' matching the '(' at `open` (fails when there is none).
  std::size_t closing(std::size_t open) const {
    int depth = 0;
    for (std::size_t i = open; i < text_.size(); ++i) {
      if (text_[i] == '(') ++depth;
      if (text_[i] == ')' && --depth == 0) return i;
    }
    fail("'(' without its ')'", open);
  }
  void relation() {
    // The relation runs to the first '&&', '||' or unmatched ')' outside
    // parentheses; its operator is the one '<', '>', '=' or '!' there.
    const std::size_t begin = pos_;
    std::size_t end = begin, op_at = std::string_view::npos, op_len = 0;
    int depth = 0;
    for (; end < text_.size(); ++end) {
      const char c = text_[end];
      if (c == '(') ++depth;
      if (c == ')' && depth-- == 0) break;
      if (depth > 0) continue;
      if (starts(end, "&&") || starts(end, "||")) break;
      if (c == '<' || c == '>' || c == '=' || c == '!') {
        if (op_at != std::string_view::npos)
          fail("a chained relation (write a < b && b < c)", end);
        op_at = end;
        op_len = (end + 1 < text_.size() && text_[end + 1] == '=') ? 2 : 1;
        end += op_len - 1;
      }
    }
    if (op_at == std::string_view::npos)
      fail("'" + std::string(trim(text_.substr(begin, end - begin))) +
               "' is not a relation (a trigger is a condition, not a number)",
           begin);
    const std::string op(text_.substr(op_at, op_len));
    if (op == "==" || op == "!=" || op == "=" || op == "!")
      fail(quote(op) +
               " is not a trigger relation (an equality holds at an instant, not on a side "
               "of a root; write >= or <=)",
           op_at);
    const std::string lhs(trim(text_.substr(begin, op_at - begin)));
    const std::string rhs(trim(text_.substr(op_at + op_len, end - op_at - op_len)));
    if (lhs.empty()) fail("the relation '" + std::string(op) + "' has no left operand", op_at);
    if (rhs.empty()) fail("the relation '" + std::string(op) + "' has no right operand", op_at);
    const std::string where = std::string(context_) + " (in the condition '" +
                              std::string(text_) + "')";
    expr::Program::compile(lhs, variables_, where);  // the operands' own errors
    expr::Program::compile(rhs, variables_, where);
    // a >= b, a <= b: true on side +1; a > b, a < b: true on side −1.
    const bool greater = op[0] == '>', strict = op_len == 1;
    const bool a_minus_b = greater != strict;
    const std::string g = a_minus_b ? "(" + lhs + ") - (" + rhs + ")" : "(" + rhs + ") - (" + lhs + ")";
    const auto r = static_cast<std::uint32_t>(out_.roots.size());
    out_.roots.push_back(expr::Program::compile(g, variables_, where));
    emit(strict ? Op::Minus : Op::Plus, r);
    pos_ = end;
  }
  static std::string quote(const std::string& s) {
    std::string q = "'";
    q += s;
    q += "'";
    return q;
  }
  static std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
  }

  static constexpr std::size_t kMaxNesting = 1000;  // as expr::Program's parser
  std::string_view text_;
  const std::vector<std::string>& variables_;
  std::string_view context_;
  std::size_t pos_ = 0, depth_ = 0;
  Condition out_;
};

[[noreturn]] void refuse_condition(std::string_view context, const std::string& text,
                                   const std::string& problem) {
  throw Error(std::string(context) + ": the condition '" + text + "' " + problem);
}

void from_node(const expr::Node& n, std::size_t n_variables, const std::string& text,
               std::string_view context, Condition& out, std::size_t depth) {
  const auto fail = [&](const std::string& problem) { refuse_condition(context, text, problem); };
  if (depth > 1000) fail("is nested too deeply");
  if (n.is_constant()) {
    out.code.push_back({n.value != 0.0 ? Op::True : Op::False, 0});
    return;
  }
  if (n.kind != expr::Node::Kind::Apply)
    fail("uses a value where a condition is expected (a relation such as gt, geq, lt, leq)");
  if (is_relation(n.op)) {
    if (n.args.size() != 2) fail("has a relation with " + std::to_string(n.args.size()) + " operands");
    if (jumps(n.args[0]) || jumps(n.args[1]))
      fail("has a relation whose operands hold a relation or a piecewise (its root would jump, "
           "not cross zero): not supported as a trigger");
    const bool greater = n.op == expr::Op::Gt || n.op == expr::Op::Ge;
    const bool strict = n.op == expr::Op::Gt || n.op == expr::Op::Lt;
    const bool a_minus_b = greater != strict;
    expr::Node g = expr::Node::apply(expr::Op::Sub, a_minus_b ? std::vector{n.args[0], n.args[1]}
                                                              : std::vector{n.args[1], n.args[0]});
    const auto r = static_cast<std::uint32_t>(out.roots.size());
    out.roots.push_back(expr::Program::build(
        g, n_variables, text + " (relation " + std::to_string(r + 1) + ")", context));
    out.code.push_back({strict ? Op::Minus : Op::Plus, r});
    return;
  }
  switch (n.op) {
    case expr::Op::And:
    case expr::Op::Or: {
      if (n.args.empty()) fail("has an empty and/or");
      for (std::size_t i = 0; i < n.args.size(); ++i) {
        from_node(n.args[i], n_variables, text, context, out, depth + 1);
        if (i > 0) out.code.push_back({n.op == expr::Op::And ? Op::And : Op::Or, 0});
      }
      return;
    }
    case expr::Op::Not:
      if (n.args.size() != 1) fail("has a 'not' with " + std::to_string(n.args.size()) + " operands");
      from_node(n.args[0], n_variables, text, context, out, depth + 1);
      out.code.push_back({Op::Not, 0});
      return;
    case expr::Op::Eq:
    case expr::Op::Ne:
      refuse_condition(context, text, std::string("uses '") + expr::to_string(n.op) +
           "': an equality holds at an instant, not on a side of a root; not supported as a "
           "trigger");
    default:
      refuse_condition(context, text, std::string("uses '") + expr::to_string(n.op) +
           "' where a condition is expected (a relation such as gt, geq, lt, leq, combined by "
           "and, or, not)");
  }
}

}  // namespace

bool Condition::evaluate(std::span<const std::int8_t> sides, std::size_t offset) const {
  constexpr std::size_t kInline = 32;
  bool inline_stack[kInline];
  std::vector<bool> heap;  // conditions deeper than kInline (rare)
  if (code.size() > kInline) heap.resize(code.size());
  std::size_t top = 0;
  const auto set = [&](std::size_t i, bool v) {
    if (heap.empty()) inline_stack[i] = v; else heap[i] = v;
  };
  const auto get = [&](std::size_t i) -> bool { return heap.empty() ? inline_stack[i] : heap[i]; };
  for (const Instruction& in : code) {
    switch (in.op) {
      case Op::Plus: set(top++, sides[offset + in.root] > 0); break;
      case Op::Minus: set(top++, sides[offset + in.root] < 0); break;
      case Op::True: set(top++, true); break;
      case Op::False: set(top++, false); break;
      case Op::And: --top; set(top - 1, get(top - 1) && get(top)); break;
      case Op::Or: --top; set(top - 1, get(top - 1) || get(top)); break;
      case Op::Not: set(top - 1, !get(top - 1)); break;
    }
  }
  return top > 0 && get(0);
}

Condition Condition::parse(std::string_view text, const std::vector<std::string>& variables,
                           std::string_view context) {
  return ConditionParser(text, variables, context).run();
}

Condition Condition::from_tree(const expr::Node& tree, std::size_t n_variables, std::string text,
                               std::string_view context) {
  Condition out;
  out.text = std::move(text);
  from_node(tree, n_variables, out.text, context, out, 0);
  return out;
}

}  // namespace costate::ode
