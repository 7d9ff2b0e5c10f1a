// expr::Kernel: random expressions using every opcode, flattened into one
// register machine with slots (intermediates) and several outputs, compute
// exactly what the programs' own stack evaluation computes — on double and
// on ad::Dual — and the kernel's reverse sweep (vjp) gives the Jacobian
// products the Dual evaluation gives.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
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

/// Bit for bit (signed zeros and infinities included); any NaN equals any
/// NaN: a NaN's sign and payload are not reproducible between two compiled
/// paths (the compiler may commute the operands of + and ×, and x86 keeps
/// the first operand's NaN; IEEE 754 leaves the payload open).
bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// Equal as numbers: a zero's sign may differ (the rows kernel's lanes
/// where Dual adds a −0 product of a zero tangent, tangents through the
/// build's negation rewrites); any NaN equals any NaN.
bool same_number(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

/// The fused code against the register evaluation (evaluate<double>(r))
/// and its reverse sweep against vjp_steps, bit for bit, through every
/// entry: the gathered evaluate with and without registers of the caller's,
/// the ODE form evaluate_rhs / vjp_rhs (blocks {t}, {x1, x2}, {x3, x4, x5}).
void expect_fused_matches_steps(const Kernel& kernel, const std::vector<double>& x,
                                const std::vector<double>& w, const std::string& what) {
  const std::size_t nr = kernel.registers(), no = kernel.n_outputs();
  std::vector<double> r(nr), ref(no);
  std::copy(x.begin(), x.end(), r.begin());
  kernel.evaluate(r.data(), std::span<double>(ref));

  const std::span<const double> in[] = {{x.data(), 1}, {x.data() + 1, 2}, {x.data() + 3, 3}};
  std::vector<double> out(no, -1.0);
  kernel.evaluate(in, out);
  for (std::size_t i = 0; i < no; ++i)
    ASSERT_TRUE(same_bits(out[i], ref[i])) << what << ": output " << i << " " << out[i] << " vs " << ref[i];
  std::vector<double> work(2 * nr, -1.0);
  std::fill(out.begin(), out.end(), -1.0);
  Kernel::evaluate_rhs(&kernel, x[0], x.data() + 1, x.data() + 3, out.data(), work.data());
  for (std::size_t i = 0; i < no; ++i) ASSERT_TRUE(same_bits(out[i], ref[i])) << what;
  // Every register (t's only if read: the ODE form leaves an unread t unset).
  bool reads_t = false;
  for (const Kernel::Step& s : kernel.steps()) reads_t = reads_t || s.a == 0 || s.b == 0 || s.c == 0;
  for (std::size_t i = 0; i < no; ++i) reads_t = reads_t || kernel.output_register(i) == 0;
  for (std::size_t i = reads_t ? 0 : 1; i < nr; ++i)
    ASSERT_TRUE(same_bits(work[i], r[i])) << what << ": register " << i;
  std::fill(out.begin(), out.end(), -1.0);
  Kernel::evaluate_rhs(&kernel, x[0], x.data() + 1, x.data() + 3, out.data(), nullptr);
  for (std::size_t i = 0; i < no; ++i) ASSERT_TRUE(same_bits(out[i], ref[i])) << what;

  std::vector<double> adj_ref(nr), adj(nr, -1.0);
  kernel.vjp_steps(r.data(), w, adj_ref.data());
  kernel.vjp(r.data(), w, adj.data());
  for (std::size_t j = 0; j < kN; ++j)
    ASSERT_TRUE(same_bits(adj[j], adj_ref[j])) << what << ": input adjoint " << j;
  std::vector<double> ybar(2, -1.0), pbar{0.25, -0.5, 1.0};
  Kernel::vjp_rhs(&kernel, work.data(), w.data(), ybar.data(), pbar.data());
  for (std::size_t i = 0; i < 2; ++i) ASSERT_TRUE(same_bits(ybar[i], adj_ref[1 + i])) << what;
  const double p0[] = {0.25, -0.5, 1.0};
  for (std::size_t j = 0; j < 3; ++j) ASSERT_TRUE(same_bits(pbar[j], p0[j] + adj_ref[3 + j])) << what;
}

// The gathered evaluate (inputs in blocks {t}, {x1, x2}, {x3, x4, x5}, as
// an ODE right-hand side passes t, y, p) runs the fused code: the inputs
// copied in, fused pairs of steps, outputs written by the code.
// It must give the register evaluation's outputs bit for bit (the same
// operations on the same values) for every opcode, in each of its forms:
// registers of its own, the caller's registers (then every register
// equals the register evaluation's, as vjp needs), other blocks than those
// built for, the ODE form; and the fused reverse sweep vjp_steps' adjoints.
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

      // The ODE form and the reverse sweep (fused) against the steps'.
      std::vector<double> w(kernel.n_outputs());
      for (double& wi : w) wi = g.value();
      expect_fused_matches_steps(kernel, x, w, costate::expr::to_string(static_cast<Op>(op)));
      ++cases;
    }
  }
  EXPECT_GT(cases, 500);
}

// Every superinstruction, forced: the tree g(f(u, v), c) or g(c, f(u, v))
// for each arithmetic f (+ − × ÷ and negation), g (+ − × ÷) and side, with
// c a variable, a constant, the intermediate f(u, v) itself or another
// subtree; 1 … 7 outputs (the output instructions write three at a time).
TEST(Kernel, EverySuperinstructionMatchesTheRegistersBitForBit) {
  const std::size_t blocks[] = {1, 2, 3};
  const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Neg};
  int pairs = 0;
  for (unsigned seed = 1; seed <= 6; ++seed) {
    Generator g(seed, kN);
    std::vector<Program> outputs;
    std::size_t steps_fused = 0;
    for (const Op f : ops) {
      for (int gi = 0; gi < 4; ++gi) {
        for (int side = 0; side < 2; ++side) {
          for (int kind = 0; kind < 4; ++kind) {
            const Node u = g.tree(seed % 3), v = g.tree(1);
            const Node inner = f == Op::Neg ? ap(Op::Neg, {u}) : ap(f, {u, v});
            const Node other = kind == 0 ? Node::var(seed % kN)
                               : kind == 1 ? c(0.75)
                               : kind == 2 ? inner
                                           : ap(Op::Sin, {g.tree(2)});
            const Op go = ops[gi];
            // Divisors kept away from 0: c ÷ (1.5 + (f(u, v))²) and f(u, v) ÷ c' with c' = 2 + c².
            Node e = ap(go, {inner, other});
            if (go == Op::Div && side == 0)
              e = ap(go, {inner, ap(Op::Add, {c(2.0), ap(Op::Mul, {other, other})})});
            if (side == 1)
              e = go == Op::Div ? ap(go, {other, ap(Op::Add, {c(1.5), ap(Op::Mul, {inner, inner})})})
                                : ap(go, {other, inner});
            outputs.push_back(Program::build(e, kN, "pair"));
          }
        }
      }
    }
    // Kernels of 1 … 7 of these outputs, and of all of them.
    for (std::size_t m = 1; m <= 7; ++m) {
      const std::vector<Program> some(outputs.begin(), outputs.begin() + static_cast<std::ptrdiff_t>(m));
      const Kernel k = Kernel::build(kN, {}, some, "pairs", blocks);
      std::vector<double> x(kN), w(m);
      for (double& xi : x) xi = g.value();
      for (double& wi : w) wi = g.value();
      expect_fused_matches_steps(k, x, w, "outputs " + std::to_string(m) + " seed " + std::to_string(seed));
    }
    const Kernel k = Kernel::build(kN, {}, outputs, "pairs", blocks);
    steps_fused = k.steps().size() - k.fused_instructions();
    pairs += static_cast<int>(steps_fused);
    EXPECT_GE(steps_fused, 40u) << "seed " << seed;  // at least one per (f, g, side)
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<double> x(kN), w(outputs.size());
      for (double& xi : x) xi = g.value();
      for (double& wi : w) wi = g.value();
      // Some adjoints exactly 0 (the sweep skips those steps).
      for (std::size_t i = 0; i < w.size(); i += 3 + static_cast<std::size_t>(trial)) w[i] = 0.0;
      expect_fused_matches_steps(k, x, w, "all, seed " + std::to_string(seed));
    }
    // Non-finite values take the same path bit for bit (inf − inf, 0 · inf).
    std::vector<double> x(kN, 0.0), w(outputs.size(), 1.0);
    x[1] = HUGE_VAL;
    x[2] = -HUGE_VAL;
    x[4] = std::nan("");
    expect_fused_matches_steps(k, x, w, "non-finite, seed " + std::to_string(seed));
  }
  std::printf("fused pairs: %d over 6 seeds\n", pairs);

  // Each (f, g, side) alone over leaves: two steps, one fused instruction
  // (f = negation: the build moves a negation into its reader, see
  // NegationsMoveIntoTheirReadersExactly; the random trees above still
  // form such pairs, e.g. (−u) − v).
  int alone = 0;
  for (const Op f : ops) {
    if (f == Op::Neg) continue;
    for (int gi = 0; gi < 4; ++gi) {
      for (int side = 0; side < 2; ++side) {
        for (int kind = 0; kind < 3; ++kind) {
          const Node inner = f == Op::Neg ? ap(Op::Neg, {v(1)}) : ap(f, {v(1), v(4)});
          const Node other = kind == 0 ? v(3) : kind == 1 ? c(0.75) : inner;
          const Node e = side == 0 ? ap(ops[gi], {inner, other}) : ap(ops[gi], {other, inner});
          const std::vector<Program> one{Program::build(e, kN, "pair")};
          const Kernel k = Kernel::build(kN, {}, one, "pair", blocks);
          ASSERT_EQ(k.steps().size(), 2u);
          ASSERT_EQ(k.fused_instructions(), 1u) << to_string(f) << " " << gi << " " << side;
          for (unsigned seed = 1; seed <= 4; ++seed) {
            Generator g(seed, kN);
            std::vector<double> x(kN), w{g.value()};
            for (double& xi : x) xi = g.value();
            expect_fused_matches_steps(k, x, w, "alone, seed " + std::to_string(seed));
          }
          ++alone;
        }
      }
    }
  }
  EXPECT_EQ(alone, 4 * 4 * 2 * 3);
}

// The build's rewrites of negations are exact: the kernel's outputs equal
// the programs' own evaluation bit for bit (signed zeros, infinities and
// NaN operands included; any NaN equals any NaN), on double and on Dual's
// values, its tangents as numbers (a zero's sign may differ), with the
// steps each rewrite leaves.
TEST(Kernel, NegationsMoveIntoTheirReadersExactly) {
  using D2 = costate::ad::Dual<double, 2>;
  const Node x = v(1), y = v(2);
  auto neg = [](Node n) { return ap(Op::Neg, {std::move(n)}); };
  struct Rewrite {
    Node e;
    std::size_t steps;
    const char* what;
  };
  const std::vector<Rewrite> cases{
      {neg(neg(x)), 0, "-(-x) = x"},
      {ap(Op::Add, {neg(x), y}), 1, "(-x) + y = y - x"},
      {ap(Op::Add, {y, neg(x)}), 1, "y + (-x) = y - x"},
      {ap(Op::Sub, {y, neg(x)}), 1, "y - (-x) = y + x"},
      {ap(Op::Mul, {neg(x), y}), 2, "(-x) y = -(x y)"},
      {ap(Op::Mul, {y, neg(x)}), 2, "y (-x) = -(y x)"},
      {ap(Op::Div, {neg(x), y}), 2, "(-x) / y = -(x / y)"},
      {ap(Op::Div, {y, neg(x)}), 2, "y / (-x) = -(y / x)"},
      {ap(Op::Mul, {neg(x), neg(y)}), 3, "(-x)(-y) kept"},
      // (−u) − v is not −(u + v) for u = +0, v = −0: kept as it comes.
      {ap(Op::Sub, {ap(Op::Mul, {neg(v(3)), y}), ap(Op::Mul, {v(4), x})}), 4,
       "(-a) y - b x = -(a y) - b x"}};
  const std::vector<double> values{0.0, -0.0, 1.5, -2.25, 1e-310, HUGE_VAL, -HUGE_VAL,
                                   std::nan("")};
  for (const Rewrite& c : cases) {
    const std::vector<Program> out{Program::build(c.e, 5, c.what)};
    const Kernel k = Kernel::build(5, {}, out, c.what);
    EXPECT_EQ(k.steps().size(), c.steps) << c.what;
    for (const double a : values) {
      for (const double b : values) {
        const std::vector<double> in{0.0, a, b, 0.75, -1.25};
        std::vector<double> r(k.registers()), o(1);
        std::copy(in.begin(), in.end(), r.begin());
        k.evaluate(r.data(), std::span<double>(o));
        const double ref = out[0].evaluate(std::span<const double>(in));
        ASSERT_TRUE(same_bits(o[0], ref)) << c.what << " at " << a << ", " << b;
        std::vector<D2> ind(5), rd(k.registers()), od(1);
        for (int j = 0; j < 5; ++j) ind[j] = D2(in[j]);
        ind[1].set_tangent(0, 1.0);
        ind[2].set_tangent(1, -0.5);
        std::copy(ind.begin(), ind.end(), rd.begin());
        k.evaluate(rd.data(), std::span<D2>(od));
        const D2 refd = out[0].evaluate(std::span<const D2>(ind));
        ASSERT_TRUE(same_bits(od[0].value(), refd.value())) << c.what;
        // Tangents as numbers: −(ẋ y + x ẏ) and (−ẋ) y + (−x) ẏ differ in
        // the sign of a zero sum (−(+0 + −0) = −0, (−0) + (+0) = +0).
        for (int l = 0; l < 2; ++l)
          ASSERT_TRUE(same_number(od[0].tangent(l), refd.tangent(l)))
              << c.what << " at " << a << ", " << b << " lane " << l;
      }
    }
  }
}

// The ODE form with blocks of every copy width (y: 13 = 8 + 4 + 1 values,
// p: 22 = 8 + 8 + 4 + 2) and 11 constants (8 + 2 + 1): each output reads
// inputs from every chunk, so a value copied to a wrong register shows.
TEST(Kernel, TheOdeFormCopiesBlocksOfEveryWidth) {
  constexpr std::size_t ny = 13, np = 22, n = 1 + ny + np;
  const std::size_t blocks[] = {1, ny, np};
  std::vector<Program> outputs;
  for (std::uint32_t i = 0; i < ny; ++i) {
    Node e = ap(Op::Mul, {c(1.0 + 0.125 * i), v(0)});
    for (std::uint32_t j = i % 3; j < n; j += 3)
      e = ap(j % 2 ? Op::Sub : Op::Add, {e, ap(Op::Mul, {c(0.5 + 0.25 * (j % 11)), v(j)})});
    outputs.push_back(Program::build(e, n, "out"));
  }
  const Kernel k = Kernel::build(n, {}, outputs, "wide", blocks);
  std::vector<double> x(n);
  for (std::size_t j = 0; j < n; ++j) x[j] = 0.3 + 0.7 * std::sin(static_cast<double>(j));
  std::vector<double> r(k.registers()), ref(ny), out(ny), work(2 * k.registers());
  std::copy(x.begin(), x.end(), r.begin());
  k.evaluate(r.data(), std::span<double>(ref));
  Kernel::evaluate_rhs(&k, x[0], x.data() + 1, x.data() + 1 + ny, out.data(), work.data());
  for (std::size_t i = 0; i < ny; ++i) ASSERT_TRUE(same_bits(out[i], ref[i])) << i;
  for (std::size_t i = 0; i < r.size(); ++i) ASSERT_TRUE(same_bits(work[i], r[i])) << i;  // t read
  std::vector<double> w(ny), adj(k.registers()), ybar(ny), pbar(np, 0.0);
  for (std::size_t i = 0; i < ny; ++i) w[i] = 1.0 - 0.1 * static_cast<double>(i);
  k.vjp_steps(r.data(), w, adj.data());
  Kernel::vjp_rhs(&k, work.data(), w.data(), ybar.data(), pbar.data());
  for (std::size_t i = 0; i < ny; ++i) ASSERT_TRUE(same_bits(ybar[i], adj[1 + i])) << i;
  for (std::size_t j = 0; j < np; ++j) ASSERT_TRUE(same_bits(pbar[j], 0.0 + adj[1 + ny + j])) << j;
}

// A sum of 200 000 terms is a chain of single-use steps, each read only by
// the next: the fused code's ordering must not recurse once per link (it
// overflowed the stack at ~10⁵ links before the chain was cut), and the
// result is still the register evaluation's, bit for bit. Parsed from text
// as an input file's equation is (the parser builds no deep recursion).
TEST(Kernel, ALongChainOfSingleUseStepsBuildsAndMatches) {
  constexpr std::size_t kTerms = 200000;
  std::string text = "x1*x3";
  for (std::size_t i = 1; i < kTerms; ++i) text += i % 2 ? " + x2*x4" : " - x1*x5";
  const std::vector<std::string> names{"t", "x1", "x2", "x3", "x4", "x5"};
  const std::vector<Program> outputs{Program::compile(text, names, "long")};
  const std::size_t blocks[] = {1, 2, 3};
  const Kernel k = Kernel::build(kN, {}, outputs, "long", blocks);
  const std::vector<double> x{0.0, 0.5, -1.25, 2.0, 0.75, -3.0}, w{1.5};
  expect_fused_matches_steps(k, x, w, "long chain");
  // x1*x3 + (N/2)·x2*x4 − (N/2 − 1)·x1*x5, exact here (every product and
  // partial sum is a multiple of 1/16 below 2^53).
  std::vector<double> r(k.registers()), out(1);
  std::copy(x.begin(), x.end(), r.begin());
  k.evaluate(r.data(), std::span<double>(out));
  const double half = kTerms / 2;
  EXPECT_EQ(out[0], 0.5 * 2.0 + half * (-1.25 * 0.75) - (half - 1) * (0.5 * -3.0));
}

using D8 = costate::ad::Dual<double, 8>;

/// Kernel::build_rows (columns x1 … x5 in lanes 0 … 4 of 8; t not a column)
/// by the fused code against evaluate<Dual<double, 8>> with unit seeds, for
/// random expressions forcing every opcode: the same formulas in the same
/// order, so the same numbers; lanes 5 … 7 are 0 and the last is the value.
TEST(Kernel, DerivativeRowsMatchAUnitSeededDualPass) {
  constexpr std::size_t kLanes = 8, kColumns = kN - 1;
  const std::size_t blocks[] = {1, 2, 3};
  int cases = 0;
  for (int op = static_cast<int>(Op::Add); op <= static_cast<int>(Op::Select); ++op) {
    for (unsigned seed = 1; seed <= 12; ++seed) {
      const Case k = random_case(seed * 101 + static_cast<unsigned>(op), static_cast<Op>(op));
      const Kernel plain = Kernel::build(kN, k.slots, k.outputs, "case", blocks);
      const Kernel rows = Kernel::build_rows(kN, k.slots, k.outputs, 1, kColumns, kLanes, "case", blocks);
      ASSERT_EQ(rows.n_outputs(), (kLanes + 1) * plain.n_outputs());
      Generator g(seed, kN);
      std::vector<double> x(kN);
      for (double& xi : x) xi = g.value();
      std::vector<D8> rd(plain.registers()), outd(plain.n_outputs());
      for (int j = 0; j < kN; ++j) {
        rd[j] = D8(x[j]);
        if (j > 0) rd[j].set_tangent(j - 1, 1.0);
      }
      plain.evaluate(rd.data(), std::span<D8>(outd));
      std::vector<double> out(rows.n_outputs(), -1.0);
      Kernel::evaluate_rhs(&rows, x[0], x.data() + 1, x.data() + 3, out.data(), nullptr);
      const std::string what = std::string(costate::expr::to_string(static_cast<Op>(op))) +
                               " seed " + std::to_string(seed);
      // The register evaluation, the gathered one and a prepared caller's
      // registers give the same outputs, bit for bit (each output is written
      // by the instruction computing it: check every place is written).
      std::vector<double> r(rows.registers()), ref(rows.n_outputs());
      std::copy(x.begin(), x.end(), r.begin());
      rows.evaluate(r.data(), std::span<double>(ref));
      std::vector<double> rp(rows.registers(), -1.0), outp(rows.n_outputs(), -1.0);
      rows.prepare(rp.data(), outp.data());
      std::copy(x.begin(), x.end(), rp.begin());
      Kernel::evaluate_prepared(&rows, rp.data(), outp.data());
      const std::span<const double> in[] = {{x.data(), 1}, {x.data() + 1, 2}, {x.data() + 3, 3}};
      std::vector<double> outg(rows.n_outputs(), -1.0);
      rows.evaluate(in, outg);
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ASSERT_TRUE(same_bits(out[i], ref[i])) << what << ": place " << i;
        ASSERT_TRUE(same_bits(outp[i], ref[i])) << what << ": prepared, place " << i;
        ASSERT_TRUE(same_bits(outg[i], ref[i])) << what << ": gathered, place " << i;
      }
      // Its reverse sweep (a second derivative; step by step) is vjp_steps'.
      std::vector<double> w(rows.n_outputs()), adj(rows.registers()), adj_ref(rows.registers());
      for (double& wi : w) wi = g.value();
      rows.vjp_steps(r.data(), w, adj_ref.data());
      rows.vjp(r.data(), w, adj.data());
      for (int j = 0; j < kN; ++j) ASSERT_TRUE(same_bits(adj[j], adj_ref[j])) << what;
      for (std::size_t i = 0; i < outd.size(); ++i) {
        const double* row = out.data() + i * (kLanes + 1);
        ASSERT_TRUE(same_bits(row[kLanes], outd[i].value())) << what << ": output " << i;
        for (std::size_t l = 0; l < kLanes; ++l)
          ASSERT_TRUE(same_number(row[l], l < kColumns ? outd[i].tangent(static_cast<int>(l)) : 0.0))
              << what << ": output " << i << " lane " << l << ": " << row[l] << " vs "
              << outd[i].tangent(static_cast<int>(l));
      }
      ++cases;
    }
  }
  EXPECT_GT(cases, 500);
}

// Where a partial is infinite (sqrt at 0) a zero tangent gives 0, as Dual's
// guard: sqrt(a·y) at a = 0, y = 2 has ∂/∂a = +∞ and ∂/∂y = 0; pow(a, 0.5)
// the same at a = 0. And a derivative no path reaches is the constant 0
// (here ∂/∂t: t is not a column; ∂/∂z: z unused).
TEST(Kernel, DerivativeRowsGuardInfinitePartialsAsDualDoes) {
  // Inputs t, a, y, z; columns a, y, z.
  const std::vector<Program> outputs{
      Program::build(ap(Op::Sqrt, {ap(Op::Mul, {v(1), v(2)})}), 4, "sqrt(a*y)"),
      Program::build(ap(Op::Add, {ap(Op::Pow, {v(1), c(0.5)}), ap(Op::Mul, {v(0), v(2)})}), 4,
                     "a^0.5 + t*y")};
  const Kernel rows = Kernel::build_rows(4, {}, outputs, 1, 3, 4, "corner");
  std::vector<double> r(rows.registers());
  const double x[] = {3.0, 0.0, 2.0, 5.0};
  std::copy(std::begin(x), std::end(x), r.begin());
  std::vector<double> out(rows.n_outputs());
  rows.evaluate(r.data(), std::span<double>(out));
  const double inf = HUGE_VAL;
  const std::vector<double> expect{inf, 0.0, 0.0, 0.0, 0.0,  // sqrt(a y): lanes a, y, z, pad, value
                                   inf, 3.0, 0.0, 0.0, 6.0};  // a^0.5 + t y: value 0 + 3·2
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(out[i], expect[i]) << i;
  // The same through a Dual pass (lanes a, y, z).
  using D4 = costate::ad::Dual<double, 4>;
  const Kernel plain = Kernel::build(4, {}, outputs, "corner");
  std::vector<D4> rd(plain.registers()), outd(2);
  for (int j = 0; j < 4; ++j) {
    rd[j] = D4(x[j]);
    if (j > 0) rd[j].set_tangent(j - 1, 1.0);
  }
  plain.evaluate(rd.data(), std::span<D4>(outd));
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < 3; ++l) EXPECT_EQ(out[i * 5 + l], outd[i].tangent(l)) << i << " " << l;
}

TEST(Kernel, RefusesDerivativeRowsOutsideTheInputsOrLanes) {
  const std::vector<Program> outputs{Program::build(ap(Op::Mul, {v(1), v(2)}), 3, "o0")};
  EXPECT_THROW((void)Kernel::build_rows(3, {}, outputs, 1, 3, 8, "model"), costate::Error);
  EXPECT_THROW((void)Kernel::build_rows(3, {}, outputs, 1, 2, 1, "model"), costate::Error);
}

TEST(Kernel, ANeverBuiltKernelEvaluatesNothing) {
  const Kernel k;
  EXPECT_EQ(k.registers(), 0u);
  EXPECT_EQ(k.n_outputs(), 0u);
  k.evaluate(std::span<const std::span<const double>>{}, std::span<double>{});
  k.vjp(nullptr, std::span<const double>{}, nullptr);
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
