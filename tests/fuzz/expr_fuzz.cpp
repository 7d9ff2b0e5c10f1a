// libFuzzer target: the expression compiler and evaluator
// (costate::expr::Program). Input: an expression over t, x, y, a, b. A
// compiled program is evaluated in double and in ad::Dual<double, 2>; where
// both are finite, the dual's value must agree with the double result to
// 1e-9 relative (the same function; pow and friends may round differently).
// Every outcome but costate::Error (bad expressions) must be clean.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/expr/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> names{"t", "x", "y", "a", "b"};
  costate::expr::Program program;
  try {
    program = costate::expr::Program::compile(text, names, "fuzz");
  } catch (const costate::Error&) {
    return 0;  // a clear error is a correct outcome
  }
  const std::vector<double> values{0.5, -1.25, 2.0, 3.0, -0.75};
  double v = 0.0;
  try {
    v = program.evaluate<double>(values);
  } catch (const costate::Error&) {
    return 0;
  }
  using D = costate::ad::Dual<double, 2>;
  std::vector<D> dual;
  for (std::size_t i = 0; i < values.size(); ++i) {
    D d(values[i]);
    if (i == 1) d.set_tangent(0, 1.0);
    if (i == 3) d.set_tangent(1, 1.0);
    dual.push_back(d);
  }
  D w;
  try {
    w = program.evaluate<D>(dual);
  } catch (const costate::Error&) {
    __builtin_trap();  // double evaluated, so must the dual
  }
  constexpr double kSameFunctionTol = 1e-9;
  if (std::isfinite(v) && std::isfinite(w.value()) &&
      std::abs(v - w.value()) > kSameFunctionTol * std::max(1.0, std::abs(v)))
    __builtin_trap();
  return 0;
}
