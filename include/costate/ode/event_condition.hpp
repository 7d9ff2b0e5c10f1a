#pragma once
/// \file
/// ode::Condition — an event's trigger written as a boolean expression
/// ("x >= theta && t < tau", SBML's MathML), compiled into what the event
/// driver needs (events.hpp): roots g_r(t, y, p) whose sides it locates, and
/// the trigger as a function of those sides only. Each relation becomes one
/// root, chosen so that the relation is true exactly on one side (the event
/// driver's sides, src/ode/events.cpp: +1 when g ≥ 0, else −1 — so that a
/// relation holding with equality, e.g. t >= 0 at t = 0, is true there):
///     a >= b :  g = a − b,  true on side +1        a <= b :  g = b − a,  true on side +1
///     a >  b :  g = b − a,  true on side −1        a <  b :  g = a − b,  true on side −1
/// and &&, ||, ! combine those truth values. The trigger is evaluated from
/// the sides the driver passes, never by evaluating the relations again, so
/// that at a located crossing (where a − b is zero to rounding) it is the
/// side the driver decided on that counts.
///
/// Refused (costate::Error naming the context): == and != (an equality holds
/// at an instant only, not on a side), a bare expression where a relation is
/// expected, and a relation whose operands hold a relation or a piecewise
/// (its root would jump instead of crossing zero).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "costate/expr/program.hpp"

namespace costate::ode {

struct Condition {
  enum class Op : std::uint8_t {
    Plus,   ///< push: root `root` is on side +1
    Minus,  ///< push: root `root` is on side −1
    True,
    False,
    And,  ///< pops two
    Or,   ///< pops two
    Not,  ///< pops one
  };
  struct Instruction {
    Op op = Op::True;
    std::uint32_t root = 0;  ///< Plus, Minus: the root's index into `roots`
  };
  /// The condition as written (for messages).
  std::string text;
  /// Postfix code over the roots' sides.
  std::vector<Instruction> code;
  /// One root per relation, over the variables the condition was compiled with.
  std::vector<expr::Program> roots;

  /// The condition's value with root r on side sides[r + offset] (+1 or −1).
  bool evaluate(std::span<const std::int8_t> sides, std::size_t offset = 0) const;

  /// Parses `text`:
  ///     condition := conjunct ('||' conjunct)*
  ///     conjunct  := negation ('&&' negation)*
  ///     negation  := '!' negation | 'true' | 'false' | '(' condition ')' | relation
  ///     relation  := expression ('>' | '>=' | '<' | '<=') expression
  /// with the expressions in expr::Program's grammar over `variables`.
  /// Errors name `context` and quote the condition.
  static Condition parse(std::string_view text, const std::vector<std::string>& variables,
                         std::string_view context = "trigger");
  /// From a tree whose comparisons (Lt, Le, Gt, Ge), And, Or, Not and
  /// constants (nonzero: true) form the condition; the operands of a
  /// comparison are expressions over `n_variables` variables. `text` is what
  /// messages quote.
  static Condition from_tree(const expr::Node& tree, std::size_t n_variables, std::string text,
                             std::string_view context = "trigger");
};

}  // namespace costate::ode
