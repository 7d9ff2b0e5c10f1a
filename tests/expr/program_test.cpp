// Expressions from input files: values against the same formula compiled as
// C++, derivatives through the AD types, precedence rules, and one test per
// kind of error message.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cmath>
#include <string>
#include <vector>

#include "costate/ad/reverse.hpp"
#include "costate/expr/program.hpp"

namespace {

using costate::expr::Program;

const std::vector<std::string> kVars = {"t", "x", "y", "a", "b"};

double eval(const std::string& text, std::vector<double> v = {0.5, 1.25, -0.75, 1.5, 3.0}) {
  const Program p = Program::compile(text, kVars, "test");
  return p.evaluate(std::span<const double>(v));
}

std::string error_of(const std::string& text) {
  try {
    (void)Program::compile(text, kVars, "model.equations.x");
  } catch (const costate::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for '" << text << "'";
  return {};
}

TEST(Program, ValuesMatchCompiledCpp) {
  const double t = 0.5, x = 1.25, y = -0.75, a = 1.5, b = 3.0;
  EXPECT_EQ(eval("a*x - b*x*y"), a * x - b * x * y);
  EXPECT_EQ(eval("-b*y + a*x*y"), -b * y + a * x * y);
  EXPECT_DOUBLE_EQ(eval("x^2 + 2^-1"), x * x + 0.5);
  EXPECT_DOUBLE_EQ(eval("-x^2"), -(x * x));        // ^ binds tighter than unary minus
  EXPECT_DOUBLE_EQ(eval("2^3^2"), std::pow(2.0, 9.0));  // right-associative
  EXPECT_DOUBLE_EQ(eval("(x + y) * (x - y) / a"), (x + y) * (x - y) / a);
  EXPECT_DOUBLE_EQ(eval("a - b - x"), a - b - x);  // left-associative
  EXPECT_DOUBLE_EQ(eval("a / b / x"), a / b / x);
  EXPECT_DOUBLE_EQ(eval("sin(t)*exp(-x) + log(a) - sqrt(b)"),
                   std::sin(t) * std::exp(-x) + std::log(a) - std::sqrt(b));
  EXPECT_DOUBLE_EQ(eval("atan2(y, x) + hypot(x, y) + pow(a, b) + min(x, y) + max(x, y)"),
                   std::atan2(y, x) + std::hypot(x, y) + std::pow(a, b) + y + x);
  EXPECT_DOUBLE_EQ(eval("abs(y) + floor(a) + ceil(a) + round(b)"), 0.75 + 1 + 2 + 3);
  EXPECT_DOUBLE_EQ(eval("cbrt(b) + expm1(t) + log1p(t) + log2(b) + log10(b)"),
                   std::cbrt(b) + std::expm1(t) + std::log1p(t) + std::log2(b) + std::log10(b));
  EXPECT_DOUBLE_EQ(eval("tan(t) + asin(t) + acos(t) + atan(t)"),
                   std::tan(t) + std::asin(t) + std::acos(t) + std::atan(t));
  EXPECT_DOUBLE_EQ(eval("sinh(t) + cosh(t) + tanh(t) + asinh(t) + acosh(b) + atanh(t)"),
                   std::sinh(t) + std::cosh(t) + std::tanh(t) + std::asinh(t) + std::acosh(b) +
                       std::atanh(t));
  EXPECT_DOUBLE_EQ(eval("erf(t) + erfc(t)"), 1.0);
  EXPECT_DOUBLE_EQ(eval("pi + e"), M_PI + M_E);
  EXPECT_EQ(eval("1e-3 + .5 + 2.5E+2 + 3"), 1e-3 + 0.5 + 250.0 + 3.0);
  EXPECT_EQ(eval("  1 +   +x  "), 1.0 + x);
}

TEST(Program, DeepExpressionsSpillToTheHeap) {
  // 40 nested parentheses need a stack deeper than the inline 16 slots.
  std::string text;
  for (int i = 0; i < 40; ++i) text += "(x + ";
  text += "1";
  for (int i = 0; i < 40; ++i) text += ")";
  const Program p = Program::compile(text, kVars);
  EXPECT_GT(p.stack_depth(), 16u);
  EXPECT_DOUBLE_EQ(eval(text), 40 * 1.25 + 1);
}

TEST(Program, UsedVariables) {
  const Program p = Program::compile("a*x - b*x*y", kVars);
  EXPECT_EQ(p.used_variables(), (std::vector<std::uint32_t>{1, 2, 3, 4}));
  EXPECT_TRUE(p.uses(1));
  EXPECT_FALSE(p.uses(0));
}

TEST(Program, ReverseModeDerivativesMatchTheFormula) {
  // d/d(x, y, a, b) of a*x - b*x*y + sin(a*y), recorded through the program.
  using costate::ad::Real;
  using costate::ad::Tape;
  const Program p = Program::compile("a*x - b*x*y + sin(a*y)", kVars);
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> v = {Real(0.5), Real(1.25), Real(-0.75), Real(1.5), Real(3.0)};
  for (auto& vi : v) tape.register_input(vi);
  Real f = p.evaluate(std::span<const Real>(v));
  tape.register_output(f);
  tape.stop_recording();
  f.set_gradient(1.0);
  tape.evaluate();
  const double x = 1.25, y = -0.75, a = 1.5, b = 3.0;
  // Each program operation is one statement: exact to round-off.
  constexpr double kTol = 1e-15;
  EXPECT_EQ(v[0].gradient(), 0.0);
  EXPECT_NEAR(v[1].gradient(), a - b * y, kTol);
  EXPECT_NEAR(v[2].gradient(), -b * x + a * std::cos(a * y), kTol);
  EXPECT_NEAR(v[3].gradient(), x + y * std::cos(a * y), kTol);
  EXPECT_NEAR(v[4].gradient(), -x * y, kTol);
}

TEST(Program, UnknownSymbolSuggestsNearest) {
  std::string msg = error_of("a*x - b*x*yy");
  EXPECT_NE(msg.find("model.equations.x: 'a*x - b*x*yy': column 11: unknown symbol 'yy'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("did you mean 'y'?"), std::string::npos) << msg;
  EXPECT_NE(msg.find("known: t, x, y, a, b"), std::string::npos) << msg;
  msg = error_of("sine(x)");
  EXPECT_NE(msg.find("column 1: unknown function 'sine'; did you mean 'sin'?"), std::string::npos)
      << msg;
  msg = error_of("x * sin");
  EXPECT_NE(msg.find("'sin' is a function"), std::string::npos) << msg;
}

TEST(Program, SyntaxErrorsGiveTheColumn) {
  struct Case {
    const char* text;
    const char* fragment;
  } cases[] = {
      {"a*x -", "column 6: expected a number, a name or '(' but the expression ended"},
      {"(a*x", "column 1: unbalanced '(': no matching ')'"},
      {"a*x)", "column 4: unbalanced ')'"},
      {"a x", "column 3: unexpected 'x' after a complete expression"},
      {"a ** x", "'**' is not an operator here"},
      {"2x", "column 2: a number is directly followed by a name"},
      {"1e+", "exponent without digits"},
      {"", "the expression is empty"},
      {"a * # x", "column 5: expected a number, a name or '(' but found '#'"},
      {"pow(x)", "column 1: 'pow' takes 2 arguments, got 1"},
      {"sin(x, y)", "'sin' takes 1 argument, got 2"},
      {"sin()", "'sin' takes 1 argument, got 0"},
      {"sin(x", "unbalanced '(' in the call of 'sin'"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.text);
    EXPECT_NE(msg.find(c.fragment), std::string::npos) << "'" << c.text << "' gave: " << msg;
    EXPECT_EQ(msg.rfind("model.equations.x: '", 0), 0u) << msg;
  }
}

/// Runs `f` on a thread with a 1 MiB stack (an MPI rank's or a Python
/// thread's can be that small): a parser that recursed without bound would
/// overflow it long before 30 000 levels.
template <class F>
void on_small_stack(F f) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  // 1 MiB; 32 MiB under AddressSanitizer, whose redzones make every frame
  // of the recursive parser larger: under scripts/sanitize.sh (-O1) 1 MiB
  // and 4 MiB overflowed before the 1000-level limit, 32 MiB holds it.
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::size_t kStack = 32 * 1024 * 1024;
#else
  constexpr std::size_t kStack = 1024 * 1024;
#endif
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kStack), 0);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    (*static_cast<F*>(p))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, &f), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
}

TEST(Program, DeepNestingIsRefusedNamingTheLimit) {
  const std::string parens = std::string(30000, '(') + "x" + std::string(30000, ')');
  const std::string minus = std::string(100000, '-') + "x";
  std::string powers = "x";
  for (int i = 0; i < 5000; ++i) powers += "^x";
  std::string calls;
  for (int i = 0; i < 5000; ++i) calls += "sin(";
  calls += "x" + std::string(5000, ')');
  // The column where the 1001st level opens.
  const std::vector<std::pair<const std::string*, std::string>> cases = {
      {&parens, "column 1001:"}, {&minus, "column 1001:"}, {&powers, "column 2002:"},
      {&calls, "column 4004:"}};
  for (const auto& [text, column] : cases) {
    std::string message;
    on_small_stack([&] { message = error_of(*text); });
    EXPECT_NE(message.find("model.equations.x"), std::string::npos) << message;
    EXPECT_NE(message.find("nesting deeper than 1000 levels"), std::string::npos) << message;
    EXPECT_NE(message.find(column), std::string::npos) << message;
    // The expression is quoted by its start and length, not repeated whole.
    EXPECT_LT(message.size(), 600u) << message.substr(0, 600);
    EXPECT_NE(message.find(std::to_string(text->size()) + " characters"), std::string::npos)
        << message.substr(0, 600);
  }
}

TEST(Program, NestingUpToTheLimitEvaluates) {
  // 999 parentheses around one unary minus: 1000 levels, accepted.
  const std::string text = std::string(999, '(') + "-x" + std::string(999, ')') + " * a";
  double value = 0.0;
  on_small_stack([&] { value = eval(text); });
  EXPECT_EQ(value, -1.25 * 1.5);
}

}  // namespace

TEST(Program, CallHookResolvesOperatorCallsToExtraVariables) {
  // lap(a) and lap(b) become variables 2 and 3 (past the compiled a, b);
  // the caller appends their values to the frame.
  costate::expr::CallHook hook;
  hook.names = {"lap"};
  hook.resolve = [](const std::string& name, const std::vector<std::string>& args) -> std::uint32_t {
    if (args.size() != 1) throw costate::Error("'" + name + "' takes 1 argument");
    if (args[0] == "a") return 2;
    if (args[0] == "b") return 3;
    throw costate::Error("unknown field '" + args[0] + "'");
  };
  const std::vector<std::string> vars{"a", "b"};
  const auto p = costate::expr::Program::compile("2*lap(a) - lap( b ) + a", vars, "eq.u", hook);
  const std::vector<double> frame{1.0, 2.0, 10.0, 100.0};
  EXPECT_EQ(p.evaluate(std::span<const double>(frame)), 2 * 10.0 - 100.0 + 1.0);
  EXPECT_TRUE(p.uses(3));
  auto error = [&](const char* text) {
    try {
      (void)costate::expr::Program::compile(text, vars, "eq.u", hook);
    } catch (const costate::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error("1 + lap(c)").find("eq.u: '1 + lap(c)': column 5: unknown field 'c'"), std::string::npos)
      << error("1 + lap(c)");
  EXPECT_NE(error("lap(a*2)").find("column 5: 'lap' applies to names"), std::string::npos) << error("lap(a*2)");
  EXPECT_NE(error("lap(a, b)").find("takes 1 argument"), std::string::npos);
  EXPECT_NE(error("lap + 1").find("'lap' is an operator"), std::string::npos);
  EXPECT_NE(error("lapp(a)").find("did you mean 'lap'"), std::string::npos) << error("lapp(a)");
}
