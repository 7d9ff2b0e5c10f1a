// expr::Kernel: random expressions using every opcode, flattened into one
// register machine with slots (intermediates) and several outputs, compute
// exactly what the programs' own stack evaluation computes — on double and
// on ad::Dual — and the kernel's reverse sweep (vjp) gives the Jacobian
// products the Dual evaluation gives.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/expr/kernel.hpp"
#include "costate/expr/program.hpp"

namespace {

using costate::expr::Kernel;
using costate::expr::Node;
using costate::expr::Op;
using costate::expr::Program;
constexpr int kN = 6;  // inputs: t and five more
using D = costate::ad::Dual<double, kN>;

// The reverse sweep sums the chain rule's products in another order than
// the forward Dual pass (and divides by b once instead of multiplying
// tangents by 1/b): each entry agrees to a few ulps of the largest term it
// sums. Relative to Σ_i |w_i| |J_ij| (that sum's scale), 1e-13 leaves room
// for the ~30 operations deep expressions here (observed 3e-15 to 1.1e-14,
// depending on the compiler's contractions).
constexpr double kReverseVsForward = 1e-13;

Node v(std::uint32_t i) { return Node::var(i); }
Node c(double x) { return Node::constant(x); }
Node ap(Op op, std::vector<Node> args) { return Node::apply(op, std::move(args)); }

/// Random trees over `n_vars` variables, each opcode's operands kept inside
/// its domain (and away from its kinks) by construction.
class Generator {
 public:
  Generator(unsigned seed, std::uint32_t n_vars) : rng_(seed), n_vars_(n_vars) {}

  Node tree(int depth) {
    if (depth == 0 || uniform(0, 5) == 0) return leaf();
    const auto pick = static_cast<Op>(uniform(static_cast<int>(Op::Add), static_cast<int>(Op::Select)));
    return node(pick, depth - 1);
  }
  /// A tree whose root is `op` (so that each opcode can be forced).
  Node node(Op op, int depth) {
    auto sub = [&] { return tree(depth); };
    auto square_plus = [&](double k) {
      Node e = sub();
      return ap(Op::Add, {c(k), ap(Op::Mul, {e, e})});
    };
    auto unit = [&] { return ap(Op::Mul, {c(0.9), ap(Op::Tanh, {sub()})}); };  // in (−0.9, 0.9)
    switch (op) {
      case Op::Constant: case Op::Variable: return leaf();
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Min: case Op::Max: case Op::Atan2:
      case Op::Hypot: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq:
      case Op::Ne: case Op::And: case Op::Or:
        return ap(op, {sub(), sub()});
      case Op::Div: return ap(op, {sub(), square_plus(0.5)});
      case Op::Pow: return ap(op, {square_plus(0.5), unit()});
      case Op::Neg: case Op::Cbrt: case Op::Sin: case Op::Cos: case Op::Atan: case Op::Sinh:
      case Op::Cosh: case Op::Tanh: case Op::Asinh: case Op::Erf: case Op::Erfc: case Op::Abs:
      case Op::Floor: case Op::Ceil: case Op::Round: case Op::Not:
        return ap(op, {ap(Op::Mul, {c(0.7), sub()})});
      case Op::Exp: case Op::Expm1: return ap(op, {unit()});
      case Op::Sqrt: case Op::Log: case Op::Log2: case Op::Log10: return ap(op, {square_plus(0.5)});
      case Op::Log1p: return ap(op, {square_plus(0.0)});
      case Op::Tan: case Op::Asin: case Op::Acos: case Op::Atanh: return ap(op, {unit()});
      case Op::Acosh: return ap(op, {square_plus(1.5)});
      case Op::Select: return ap(op, {ap(Op::Gt, {sub(), sub()}), sub(), sub()});
    }
    return leaf();
  }
  double value() { return std::uniform_real_distribution<double>(-1.5, 1.5)(rng_); }

 private:
  int uniform(int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng_); }
  Node leaf() {
    if (uniform(0, 3) == 0) return c(std::round(8.0 * value()) / 4.0);
    return v(static_cast<std::uint32_t>(uniform(0, static_cast<int>(n_vars_) - 1)));
  }
  std::mt19937 rng_;
  std::uint32_t n_vars_;
};

/// The programs' own evaluation (Program::evaluate, one after the other,
/// slots appended to the values): the reference the kernel must reproduce.
template <class T>
std::vector<T> reference(const std::vector<Program>& slots, const std::vector<Program>& outputs,
                         std::vector<T> values) {
  for (const Program& s : slots) values.push_back(s.evaluate(std::span<const T>(values)));
  std::vector<T> out;
  for (const Program& o : outputs) out.push_back(o.evaluate(std::span<const T>(values)));
  return out;
}

struct Case {
  std::vector<Program> slots, outputs;
};

Case random_case(unsigned seed, Op forced) {
  Case k;
  Generator g(seed, kN);
  for (std::uint32_t s = 0; s < 3; ++s) {
    // Slot s may use the inputs and the slots before it.
    Generator gs(seed * 7 + s, kN + s);
    k.slots.push_back(Program::build(gs.node(forced, 3), kN + s, "slot"));
  }
  Generator go(seed * 13 + 5, kN + 3);
  for (int o = 0; o < 4; ++o) {
    const Node shared = go.tree(3);  // used twice: the kernel shares it
    k.outputs.push_back(Program::build(
        ap(Op::Add, {go.node(o == 0 ? forced : Op::Mul, 3), ap(Op::Mul, {shared, shared})}), kN + 3,
        "output"));
  }
  return k;
}

TEST(Kernel, EveryOpcodeMatchesTheProgramsOnDoubleAndDual) {
  int cases = 0;
  double worst = 0.0;
  for (int op = static_cast<int>(Op::Add); op <= static_cast<int>(Op::Select); ++op) {
    for (unsigned seed = 1; seed <= 12; ++seed) {
      const Case k = random_case(seed * 101 + static_cast<unsigned>(op), static_cast<Op>(op));
      const Kernel kernel = Kernel::build(kN, k.slots, k.outputs, "case");
      Generator g(seed, kN);
      std::vector<double> x(kN);
      for (double& xi : x) xi = g.value();

      // double: the same operations on the same values, bit for bit.
      std::vector<double> r(kernel.registers()), out(kernel.n_outputs());
      std::copy(x.begin(), x.end(), r.begin());
      kernel.evaluate(r.data(), std::span<double>(out));
      const std::vector<double> ref = reference(k.slots, k.outputs, x);
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], ref[i]) << costate::expr::to_string(static_cast<Op>(op)) << " seed " << seed;

      // Dual: identical values and tangents (the Jacobian, one column per input).
      std::vector<D> xd(kN), rd(kernel.registers()), outd(kernel.n_outputs());
      for (int j = 0; j < kN; ++j) {
        xd[j] = D(x[j]);
        xd[j].set_tangent(j, 1.0);
      }
      std::copy(xd.begin(), xd.end(), rd.begin());
      kernel.evaluate(rd.data(), std::span<D>(outd));
      const std::vector<D> refd = reference(k.slots, k.outputs, xd);
      for (std::size_t i = 0; i < outd.size(); ++i) {
        ASSERT_EQ(outd[i].value(), refd[i].value());
        for (int j = 0; j < kN; ++j) ASSERT_EQ(outd[i].tangent(j), refd[i].tangent(j));
      }

      // Reverse: in_bar = Jᵀ w against the Dual Jacobian.
      std::vector<double> w(kernel.n_outputs());
      for (double& wi : w) wi = g.value();
      std::vector<double> adj(kernel.registers());
      kernel.vjp(r.data(), w, adj.data());
      const std::span<const double> in_bar(adj.data(), kN);
      for (int j = 0; j < kN; ++j) {
        double expect = 0.0, scale = 0.0;
        for (std::size_t i = 0; i < w.size(); ++i) {
          expect += w[i] * refd[i].tangent(j);
          scale += std::abs(w[i] * refd[i].tangent(j));
        }
        ASSERT_TRUE(std::isfinite(expect));
        const double err = std::abs(in_bar[j] - expect) / std::max(scale, 1e-300);
        if (scale > 0.0) worst = std::max(worst, err);
        EXPECT_LE(std::abs(in_bar[j] - expect), kReverseVsForward * scale)
            << costate::expr::to_string(static_cast<Op>(op)) << " seed " << seed << " input " << j;
      }
      ++cases;
    }
  }
  EXPECT_GT(cases, 500);
  std::printf("reverse vs Dual: worst relative difference %.3e over %d cases\n", worst, cases);
}

TEST(Kernel, SharesOperationsFoldsConstantsAndDropsUnusedSlots) {
  // slot 0 = x*y (used), slot 1 = sin(x) (unused); outputs x*y + x*y and 2*3*slot0.
  const std::vector<Program> slots{Program::build(ap(Op::Mul, {v(1), v(2)}), 3, "s0"),
                                   Program::build(ap(Op::Sin, {v(1)}), 4, "s1")};
  const std::vector<Program> outputs{
      Program::build(ap(Op::Add, {ap(Op::Mul, {v(1), v(2)}), ap(Op::Mul, {v(1), v(2)})}), 5, "o0"),
      Program::build(ap(Op::Mul, {ap(Op::Mul, {c(2.0), c(3.0)}), v(3)}), 5, "o1")};
  const Kernel k = Kernel::build(3, slots, outputs);
  // x*y once, the sum, 6*slot0: three steps (sin dropped, 2*3 folded).
  EXPECT_EQ(k.steps().size(), 3u);
  std::vector<double> r(k.registers()), out(2);
  r[0] = 0.0;
  r[1] = 1.5;
  r[2] = -2.0;
  k.evaluate(r.data(), std::span<double>(out));
  EXPECT_EQ(out[0], 2 * (1.5 * -2.0));
  EXPECT_EQ(out[1], 6.0 * (1.5 * -2.0));
  // Jᵀ w by hand: ∂o0/∂x = 2y, ∂o1/∂x = 6y; ∂o0/∂y = 2x, ∂o1/∂y = 6x.
  std::vector<double> adj(k.registers());
  const std::vector<double> w{1.0, 0.5};
  k.vjp(r.data(), w, adj.data());
  const std::span<const double> bar(adj.data(), 3);
  EXPECT_EQ(bar[0], 0.0);
  EXPECT_DOUBLE_EQ(bar[1], 2 * -2.0 + 0.5 * 6 * -2.0);
  EXPECT_DOUBLE_EQ(bar[2], 2 * 1.5 + 0.5 * 6 * 1.5);
}

// The gathered evaluate (inputs in blocks {t}, {x1, x2}, {x3, x4, x5}, as
// an ODE right-hand side passes t, y, p) runs the direct code: operands read
// in place from the blocks and the constants, outputs written by the code.
// It must give the register evaluation's outputs bit for bit (the same
// operations on the same values) for every opcode, in each of its three
// forms: registers of its own, the caller's registers (then every register
// equals the register evaluation's, as vjp needs), and blocks of other sizes
// than those built for (the copying path).
TEST(Kernel, GatheredEvaluationMatchesTheRegistersBitForBit) {
  const std::size_t blocks[] = {1, 2, 3};
  int cases = 0;
  for (int op = static_cast<int>(Op::Add); op <= static_cast<int>(Op::Select); ++op) {
    for (unsigned seed = 1; seed <= 12; ++seed) {
      const Case k = random_case(seed * 101 + static_cast<unsigned>(op), static_cast<Op>(op));
      const Kernel plain = Kernel::build(kN, k.slots, k.outputs, "case");
      const Kernel kernel = Kernel::build(kN, k.slots, k.outputs, "case", blocks);
      Generator g(seed, kN);
      std::vector<double> x(kN);
      for (double& xi : x) xi = g.value();
      std::vector<double> r(plain.registers()), ref(plain.n_outputs());
      std::copy(x.begin(), x.end(), r.begin());
      plain.evaluate(r.data(), std::span<double>(ref));

      const std::span<const double> in[] = {{x.data(), 1}, {x.data() + 1, 2}, {x.data() + 3, 3}};
      std::vector<double> out(kernel.n_outputs(), -1.0);
      kernel.evaluate(in, out);
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], ref[i]) << costate::expr::to_string(static_cast<Op>(op)) << " seed " << seed;

      std::vector<double> mine(kernel.registers(), -1.0);
      std::fill(out.begin(), out.end(), -1.0);
      kernel.evaluate(in, out, mine.data());
      for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], ref[i]);
      ASSERT_EQ(mine.size(), r.size());
      for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(mine[i], r[i]) << "register " << i;

      const std::span<const double> other[] = {{x.data(), 3}, {x.data() + 3, 3}};
      std::fill(out.begin(), out.end(), -1.0);
      kernel.evaluate(other, out);
      for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], ref[i]);
      ++cases;
    }
  }
  EXPECT_GT(cases, 500);
}

TEST(Kernel, RefusesInputBlocksThatDoNotSumToTheInputs) {
  const std::vector<Program> outputs{Program::build(ap(Op::Mul, {v(1), v(2)}), 3, "o0")};
  const std::size_t blocks[] = {1, 1};
  try {
    (void)Kernel::build(3, {}, outputs, "model", blocks);
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("input blocks"), std::string::npos) << e.what();
  }
}

TEST(Kernel, RefusesAVariableNotComputedBeforeIt) {
  // Slot 0 reading slot 0 (variable 3 of 3 inputs) is an error naming the expression.
  const std::vector<Program> slots{Program::build(ap(Op::Sin, {v(3)}), 4, "sin(s0)")};
  try {
    (void)Kernel::build(3, slots, {}, "model");
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not computed before it"), std::string::npos) << e.what();
  }
}

}  // namespace
