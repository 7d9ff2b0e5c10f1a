// expr::Program::build: programs from expression trees (the SBML importer's
// path) compute what the parser's programs compute, fold constants, write
// themselves back as text, and evaluate the tree-only opcodes (relations,
// logic, select) on double and on the AD types.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/expr/program.hpp"

namespace {

using costate::expr::Node;
using costate::expr::Op;
using costate::expr::Program;

const std::vector<std::string> kVars = {"t", "x", "y", "a"};
const std::vector<double> kValues = {0.5, 1.25, -0.75, 1.5};

Node v(std::uint32_t i) { return Node::var(i); }
Node c(double x) { return Node::constant(x); }
Node ap(Op op, std::vector<Node> args) { return Node::apply(op, std::move(args)); }

/// a*x - sin(y)/a + pow(x, 2) + exp(-t)
Node sample() {
  return ap(Op::Add, {ap(Op::Add, {ap(Op::Sub, {ap(Op::Mul, {v(3), v(1)}),
                                                ap(Op::Div, {ap(Op::Sin, {v(2)}), v(3)})}),
                                   ap(Op::Pow, {v(1), c(2.0)})}),
                      ap(Op::Exp, {ap(Op::Neg, {v(0)})})});
}

TEST(ProgramBuild, AgreesWithTheParser) {
  const Program built = Program::build(sample(), kVars.size(), "sample");
  const Program parsed = Program::compile("a*x - sin(y)/a + pow(x, 2) + exp(-t)", kVars);
  const std::span<const double> values(kValues);
  // Same operations in the same order: bit-identical.
  EXPECT_EQ(built.evaluate(values), parsed.evaluate(values));
  EXPECT_EQ(built.used_variables(), parsed.used_variables());
  using D = costate::ad::Dual<double, 1>;
  std::vector<D> dv;
  for (std::size_t i = 0; i < kValues.size(); ++i) dv.push_back(D(kValues[i], {i == 1 ? 1.0 : 0.0}));
  EXPECT_EQ(built.evaluate(std::span<const D>(dv)).tangent(0),
            parsed.evaluate(std::span<const D>(dv)).tangent(0));
  // The text form parses back into the same function.
  const std::string text = costate::expr::to_text(sample(), kVars);
  EXPECT_EQ(Program::compile(text, kVars).evaluate(values), built.evaluate(values)) << text;
}

TEST(ProgramBuild, FoldsConstantOperands) {
  // (2 + 3) * x → 5 * x: three instructions, not five.
  const Program p = Program::build(ap(Op::Mul, {ap(Op::Add, {c(2), c(3)}), v(1)}), kVars.size(), "f");
  EXPECT_EQ(p.code().size(), 3u);
  EXPECT_EQ(p.evaluate(std::span<const double>(kValues)), 5.0 * 1.25);
}

TEST(ProgramBuild, RelationsLogicAndSelect) {
  const std::span<const double> values(kValues);
  auto eval = [&](const Node& n) { return Program::build(n, kVars.size(), "f").evaluate(values); };
  EXPECT_EQ(eval(ap(Op::Lt, {v(2), v(1)})), 1.0);
  EXPECT_EQ(eval(ap(Op::Ge, {v(2), v(1)})), 0.0);
  EXPECT_EQ(eval(ap(Op::Le, {v(1), c(1.25)})), 1.0);
  EXPECT_EQ(eval(ap(Op::Gt, {v(1), c(1.25)})), 0.0);
  EXPECT_EQ(eval(ap(Op::Eq, {v(1), c(1.25)})), 1.0);
  EXPECT_EQ(eval(ap(Op::Ne, {v(1), c(1.25)})), 0.0);
  EXPECT_EQ(eval(ap(Op::And, {c(1), c(0)})), 0.0);
  EXPECT_EQ(eval(ap(Op::Or, {c(1), c(0)})), 1.0);
  EXPECT_EQ(eval(ap(Op::Not, {c(0)})), 1.0);
  // select(t >= 0.25, x, y) then select(t >= 1, x, y).
  EXPECT_EQ(eval(ap(Op::Select, {ap(Op::Ge, {v(0), c(0.25)}), v(1), v(2)})), 1.25);
  EXPECT_EQ(eval(ap(Op::Select, {ap(Op::Ge, {v(0), c(1.0)}), v(1), v(2)})), -0.75);
  // The chosen branch carries the derivative.
  using D = costate::ad::Dual<double, 1>;
  std::vector<D> dv;
  for (std::size_t i = 0; i < kValues.size(); ++i) dv.push_back(D(kValues[i], {i == 2 ? 1.0 : 0.0}));
  const Program s = Program::build(
      ap(Op::Select, {ap(Op::Ge, {v(0), c(1.0)}), v(1), ap(Op::Mul, {c(3), v(2)})}), kVars.size(), "f");
  EXPECT_EQ(s.evaluate(std::span<const D>(dv)).tangent(0), 3.0);
  // No text form for the tree-only opcodes.
  EXPECT_THROW((void)costate::expr::to_text(ap(Op::Lt, {v(0), v(1)}), kVars), costate::Error);
}

TEST(ProgramBuild, BadTreesAreErrors) {
  try {
    (void)Program::build(ap(Op::Add, {v(1)}), kVars.size(), "x +", "tree.context");
    ADD_FAILURE() << "no error for a wrong operand count";
  } catch (const costate::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tree.context"), std::string::npos) << m;
    EXPECT_NE(m.find("'add' takes 2 operands, got 1"), std::string::npos) << m;
  }
  try {
    (void)Program::build(v(7), kVars.size(), "v7", "tree.context");
    ADD_FAILURE() << "no error for an out-of-range variable";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("variable index 7 is out of range (4 variables)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ProgramBuild, LongSumsWrittenAsTextParseBackWithoutDeepNesting) {
  // A left-deep sum of 1500 terms (SBML's n-ary plus as a binary tree): its
  // text must parse back (at most 1000 levels of nesting) to the same value.
  Node sum = v(1);
  for (int i = 0; i < 1500; ++i)
    sum = ap(i % 3 == 2 ? Op::Sub : Op::Add, {std::move(sum), ap(Op::Mul, {v(i % 2), v(2)})});
  const std::string text = costate::expr::to_text(sum, kVars);
  const Program from_text = Program::compile(text, kVars);
  const Program from_tree = Program::build(sum, kVars.size(), text);
  const std::span<const double> values(kValues);
  EXPECT_EQ(from_text.evaluate(values), from_tree.evaluate(values));
}

}  // namespace
