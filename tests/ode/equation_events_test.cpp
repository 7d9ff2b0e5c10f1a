// ode::EquationModel's events (events.hpp's HasEvents) and ode::Condition:
// a trigger's relations become roots with the documented sign, the trigger
// is a function of the sides passed in (not of the relations re-evaluated),
// the roots and the assigned values with their Dual derivatives equal the
// hand-computed ones, intermediates are evaluated first, and bad events and
// conditions are refused with messages naming them.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/expr/program.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/event_condition.hpp"
#include "costate/ode/system.hpp"

namespace {

using namespace costate::ode;
using costate::expr::Node;
using costate::expr::Op;
using costate::expr::Program;
using D8 = costate::ad::Dual<double, 8>;

static_assert(HasEvents<EquationModel>);

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const costate::Error& e) {
    return e.what();
  }
  return "";
}

// States x, v; parameters g, e, theta; one intermediate w2 = 2x.
//   event 0 "bounce": x <= 0 && v < 0   →  v := −e v
//   event 1 "cut":    w2 >= theta || !(t > 3)  →  x := x − theta w2, delay theta/2, priority 2e
EquationModel ball() {
  const std::vector<std::string> base{"t", "x", "v", "g", "e", "theta"};
  std::vector<std::string> all = base;
  all.push_back("w2");
  std::vector<Program> w{Program::compile("2*x", base, "w2")};
  std::vector<Program> f{Program::compile("v", all, "x"), Program::compile("-g", all, "v")};
  EquationModel m({"x", "v"}, {"g", "e", "theta"}, {"w2"}, std::move(w), std::move(f));
  std::vector<EquationModel::Event> events(2);
  events[0].attributes.name = "bounce";
  events[0].trigger = Condition::parse("x <= 0 && v < 0", all);
  events[0].targets = {1};
  events[0].values = {Program::compile("-e*v", all)};
  events[1].attributes.name = "cut";
  events[1].attributes.persistent = false;
  events[1].trigger = Condition::parse("w2 >= theta || !(t > 3)", all);
  events[1].targets = {0};
  events[1].values = {Program::compile("x - theta*w2", all)};
  events[1].delay = Program::compile("theta/2", all);
  events[1].priority = Program::compile("2*e", all);
  m.set_events(std::move(events));
  return m;
}

TEST(EquationEvents, RootsAreTheRelationsWithTheDocumentedSign) {
  const EquationModel m = ball();
  ASSERT_EQ(m.n_events(), 2u);
  ASSERT_EQ(m.n_roots(), 4u);
  EXPECT_EQ(m.root_offset(1), 2u);
  const double t = 1.5, x = 0.3, v = -2.0, g = 9.81, e = 0.8, theta = 0.4;
  const std::array<double, 2> y{x, v};
  const std::array<double, 3> p{g, e, theta};
  std::array<double, 4> r{};
  m.roots<double>(t, y, p, r);
  // x <= 0: g = 0 − x (true on side +1, g ≥ 0); v < 0: g = v − 0 (true on
  // side −1, g < 0); w2 >= theta: g = w2 − theta (side +1); t > 3: g = 3 − t
  // (side −1). The same operations as the kernel's, so the same bits.
  EXPECT_EQ(r[0], 0.0 - x);
  EXPECT_EQ(r[1], v - 0.0);
  EXPECT_EQ(r[2], 2.0 * x - theta);
  EXPECT_EQ(r[3], 3.0 - t);
}

TEST(EquationEvents, RootDerivativesOnDual) {
  const EquationModel m = ball();
  // Lanes: 0 t, 1 x, 2 v, 3 g, 4 e, 5 theta.
  const D8 t = D8::seed(1.5, 0);
  const std::array<D8, 2> y{D8::seed(0.3, 1), D8::seed(-2.0, 2)};
  const std::array<D8, 3> p{D8::seed(9.81, 3), D8::seed(0.8, 4), D8::seed(0.4, 5)};
  std::array<D8, 4> r{};
  m.roots<D8>(t, y, p, r);
  const double expected[4][6] = {
      {0, -1, 0, 0, 0, 0},  // −x
      {0, 0, 1, 0, 0, 0},   // v
      {0, 2, 0, 0, 0, -1},  // 2x − theta (through the intermediate)
      {-1, 0, 0, 0, 0, 0},  // 3 − t
  };
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 6; ++l)
      EXPECT_EQ(r[static_cast<std::size_t>(i)].tangent(l), expected[i][l]) << "root " << i << " lane " << l;
}

TEST(EquationEvents, TriggersReadTheSidesNotTheRelations) {
  const EquationModel m = ball();
  const std::array<double, 2> y{0.3, -2.0};  // x <= 0 is false here …
  const std::array<double, 3> p{9.81, 0.8, 0.4};
  using S = std::array<std::int8_t, 4>;
  // … but the sides say the crossing happened: the trigger follows them.
  EXPECT_TRUE(m.event_trigger(0, 1.5, y, p, S{+1, -1, -1, -1}));
  EXPECT_FALSE(m.event_trigger(0, 1.5, y, p, S{-1, -1, -1, -1}));
  EXPECT_FALSE(m.event_trigger(0, 1.5, y, p, S{+1, +1, -1, -1}));
  // Event 1 reads roots 2 and 3: w2 >= theta (side +1) or not t > 3 (side −1).
  EXPECT_TRUE(m.event_trigger(1, 1.5, y, p, S{-1, -1, +1, -1}));
  EXPECT_FALSE(m.event_trigger(1, 1.5, y, p, S{+1, +1, -1, -1}));
  EXPECT_TRUE(m.event_trigger(1, 1.5, y, p, S{-1, -1, -1, +1}));
}

TEST(EquationEvents, AssignmentsDelayPriorityAndAttributes) {
  const EquationModel m = ball();
  const double t = 1.5, x = 0.3, v = -2.0, e = 0.8, theta = 0.4;
  const std::array<double, 2> y{x, v};
  const std::array<double, 3> p{9.81, e, theta};
  ASSERT_EQ(m.event_targets(0).size(), 1u);
  EXPECT_EQ(m.event_targets(0)[0], 1u);
  EXPECT_EQ(m.event_targets(1)[0], 0u);
  std::array<double, 1> value{};
  m.event_assign<double>(0, t, y, p, value);
  EXPECT_EQ(value[0], -e * v);
  m.event_assign<double>(1, t, y, p, value);
  EXPECT_EQ(value[0], x - theta * (2.0 * x));
  EXPECT_EQ(m.event_delay(1, t, y, p), theta / 2.0);
  EXPECT_EQ(m.event_priority(1, t, y, p), 2.0 * e);
  EXPECT_EQ(m.event_attributes(0).name, "bounce");
  EXPECT_FALSE(m.event_attributes(0).has_delay);
  EXPECT_FALSE(m.event_attributes(0).has_priority);
  EXPECT_TRUE(m.event_attributes(1).has_delay);
  EXPECT_TRUE(m.event_attributes(1).has_priority);
  EXPECT_FALSE(m.event_attributes(1).persistent);
  EXPECT_TRUE(m.event_attributes(1).initial_value);

  // Dual derivatives: d(−e v) = (−e) dv − v de; d(x − θ·2x) = (1 − 2θ) dx − 2x dθ.
  const D8 td = D8::seed(t, 0);
  const std::array<D8, 2> yd{D8::seed(x, 1), D8::seed(v, 2)};
  const std::array<D8, 3> pd{D8::seed(9.81, 3), D8::seed(e, 4), D8::seed(theta, 5)};
  std::array<D8, 1> vd{};
  m.event_assign<D8>(0, td, yd, pd, vd);
  EXPECT_EQ(vd[0].value(), -e * v);
  EXPECT_EQ(vd[0].tangent(2), -e);
  EXPECT_EQ(vd[0].tangent(4), -v);
  EXPECT_EQ(vd[0].tangent(1), 0.0);
  m.event_assign<D8>(1, td, yd, pd, vd);
  // Dual's product rule, term by term: d(θ·w2) = θ·2 dx + w2 dθ.
  EXPECT_EQ(vd[0].tangent(1), 1.0 - theta * 2.0);
  EXPECT_EQ(vd[0].tangent(5), -(2.0 * x));
  EXPECT_EQ(vd[0].tangent(0), 0.0);
}

TEST(EquationEvents, AModelWithoutEventsHasNone) {
  const EquationModel m({"x"}, {"k"}, {"-k*x"});
  EXPECT_EQ(m.n_events(), 0u);
  EXPECT_EQ(m.n_roots(), 0u);
  struct None {};
  const None objective;
  const System s = make_system(m, objective, 1, 1);
  EXPECT_FALSE(s.has_events());
  const EquationModel b = ball();
  const System sb = make_system(b, objective, 2, 3);
  ASSERT_TRUE(sb.has_events());
  EXPECT_EQ(sb.events()->n_roots(), 4u);
  EXPECT_EQ(sb.events()->targets(1), std::vector<std::size_t>{0});
}

TEST(EquationEvents, BadEventsAreRefused) {
  EquationModel m({"x", "v"}, {"k"}, {"v", "-k"});
  const std::vector<std::string> vars = m.variables();
  const auto with = [&](std::vector<std::size_t> targets, std::size_t n_values) {
    std::vector<EquationModel::Event> ev(1);
    ev[0].attributes.name = "reset";
    ev[0].trigger = Condition::parse("x > 1", vars);
    ev[0].targets = std::move(targets);
    for (std::size_t i = 0; i < n_values; ++i) ev[0].values.push_back(Program::compile("0", vars));
    return error_of([&] { m.set_events(std::move(ev)); });
  };
  EXPECT_NE(with({0, 0}, 2).find("assigns the state 'x' twice"), std::string::npos);
  EXPECT_NE(with({5}, 1).find("assigns state 5 of only 2"), std::string::npos);
  EXPECT_NE(with({0}, 2).find("one value per assigned state"), std::string::npos);
  EXPECT_NE(with({0, 0}, 2).find("events[0] ('reset')"), std::string::npos);
}

TEST(Condition, ParsesRelationsAndParentheses) {
  const std::vector<std::string> vars{"t", "x", "a"};
  // "(x + 1) > 2": a parenthesis opening an operand, not a condition.
  const Condition c = Condition::parse("(x + 1) > 2", vars);
  ASSERT_EQ(c.roots.size(), 1u);
  const std::array<double, 3> at{0.0, 4.0, 0.0};
  EXPECT_EQ(c.roots[0].evaluate<double>(at), -3.0);  // 2 − (x + 1): true on side −1
  const Condition d = Condition::parse("((x >= a)) && !(t < 1 || false) || true", vars);
  ASSERT_EQ(d.roots.size(), 2u);
  const std::array<double, 3> at2{5.0, 2.0, 7.0};
  EXPECT_EQ(d.roots[0].evaluate<double>(at2), -5.0);  // x − a (x >= a: true on side +1)
  EXPECT_EQ(d.roots[1].evaluate<double>(at2), 4.0);   // t − 1 (t < 1: true on side −1)
  const Condition e = Condition::parse("((x >= a)) && !(t < 1 || false)", vars);
  using S = std::array<std::int8_t, 2>;
  EXPECT_TRUE(e.evaluate(S{+1, +1}));
  EXPECT_FALSE(e.evaluate(S{-1, +1}));
  EXPECT_FALSE(e.evaluate(S{+1, -1}));
  EXPECT_TRUE(d.evaluate(S{+1, +1}));  // "|| true"
}

TEST(Condition, BadConditionsAreRefusedByName) {
  const std::vector<std::string> vars{"t", "x"};
  const auto msg = [&](const char* text) {
    return error_of([&] { Condition::parse(text, vars, "events[0].trigger"); });
  };
  EXPECT_NE(msg("x == 1").find("'==' is not a trigger relation"), std::string::npos);
  EXPECT_NE(msg("x != 1").find("'!=' is not a trigger relation"), std::string::npos);
  EXPECT_NE(msg("x + 1").find("'x + 1' is not a relation"), std::string::npos);
  EXPECT_NE(msg("0 < x < 1").find("chained relation"), std::string::npos);
  EXPECT_NE(msg("(x > 1").find("'(' without its ')'"), std::string::npos);
  EXPECT_NE(msg("x > ").find("no right operand"), std::string::npos);
  EXPECT_NE(msg("").find("empty"), std::string::npos);
  EXPECT_NE(msg("y > 1").find("events[0].trigger"), std::string::npos);
  EXPECT_NE(msg("y > 1").find("'y'"), std::string::npos);
}

TEST(Condition, FromTreeAndItsRefusals) {
  // and(gt(x, 1), not(leq(t, 2))) over (t, x).
  const Node tree = Node::apply(
      Op::And, {Node::apply(Op::Gt, {Node::var(1), Node::constant(1.0)}),
                Node::apply(Op::Not, {Node::apply(Op::Le, {Node::var(0), Node::constant(2.0)})})});
  const Condition c = Condition::from_tree(tree, 2, "x > 1 && !(t <= 2)");
  ASSERT_EQ(c.roots.size(), 2u);
  const std::array<double, 2> at{5.0, 3.0};
  EXPECT_EQ(c.roots[0].evaluate<double>(at), -2.0);  // 1 − x (x > 1: true on side −1)
  EXPECT_EQ(c.roots[1].evaluate<double>(at), -3.0);  // 2 − t (t <= 2: true on side +1)
  using S = std::array<std::int8_t, 2>;
  EXPECT_TRUE(c.evaluate(S{-1, -1}));
  EXPECT_FALSE(c.evaluate(S{-1, +1}));
  const auto msg = [](const Node& n) {
    return error_of([&] { Condition::from_tree(n, 2, "cond", "event 'e'"); });
  };
  EXPECT_NE(msg(Node::apply(Op::Eq, {Node::var(1), Node::constant(1.0)})).find("equality"),
            std::string::npos);
  EXPECT_NE(msg(Node::var(1)).find("where a condition is expected"), std::string::npos);
  const Node jump = Node::apply(
      Op::Gt, {Node::apply(Op::Select, {Node::apply(Op::Gt, {Node::var(0), Node::constant(1.0)}),
                                        Node::var(1), Node::constant(0.0)}),
               Node::constant(1.0)});
  EXPECT_NE(msg(jump).find("piecewise"), std::string::npos);
}

}  // namespace
