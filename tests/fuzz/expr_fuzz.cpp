// libFuzzer target: the expression compiler and evaluator
// (costate::expr::Program) and the register machine built from it
// (costate::expr::Kernel). Input: expressions over t, x, y, a, b separated
// by ';'. With one expression, it is compiled and evaluated in double and in
// ad::Dual<double, 2>; where both are finite, the dual's value must agree
// with the double result to 1e-9 relative (the same function; pow and
// friends may round differently). With one or more, they are also
// flattened into one Kernel — the first expression a slot w the others may
// use (when there are two or more), the rest its outputs — and the kernel's
// fused code must reproduce its register evaluation bit for bit through
// every entry (the gathered evaluate with blocks {t}, {x, y}, {a, b}, with
// and without the caller's registers, the ODE form evaluate_rhs), and the
// fused reverse sweep (vjp, vjp_rhs) the step-by-step one (vjp_steps).
// Every outcome but costate::Error (bad expressions) must be clean.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "structured.hpp"
#include "costate/expr/kernel.hpp"
#include "costate/expr/program.hpp"

namespace {

/// Bit for bit; any NaN equals any NaN (its sign and payload are not
/// reproducible: the compiler may commute + and ×, x86 keeps the first
/// operand's NaN).
bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

/// The kernel of `parts` (see the file comment) against its register evaluation.
void check_kernel(const std::vector<std::string>& parts, const std::vector<double>& values) {
  using costate::expr::Kernel;
  using costate::expr::Program;
  const std::vector<std::string> names{"t", "x", "y", "a", "b"};
  std::vector<std::string> with_w = names;
  with_w.push_back("w");
  std::vector<Program> slots, outputs;
  try {
    if (parts.size() == 1) {
      outputs.push_back(Program::compile(parts[0], names, "fuzz"));
    } else {
      slots.push_back(Program::compile(parts[0], names, "fuzz"));
      for (std::size_t i = 1; i < parts.size(); ++i)
        outputs.push_back(Program::compile(parts[i], with_w, "fuzz"));
    }
  } catch (const costate::Error&) {
    return;
  }
  const std::size_t blocks[] = {1, 2, 2};
  Kernel k;
  try {
    k = Kernel::build(names.size(), slots, outputs, "fuzz", blocks);
  } catch (const costate::Error&) {
    return;
  }
  const std::size_t nr = k.registers(), no = k.n_outputs();
  std::vector<double> r(nr), ref(no);
  std::copy(values.begin(), values.end(), r.begin());
  k.evaluate(r.data(), std::span<double>(ref));  // the register evaluation

  const std::span<const double> in[] = {{values.data(), 1}, {values.data() + 1, 2},
                                        {values.data() + 3, 2}};
  std::vector<double> out(no, -1.0), work(2 * nr, -1.0);
  k.evaluate(in, out);
  for (std::size_t i = 0; i < no; ++i) check(same_bits(out[i], ref[i]));
  std::fill(out.begin(), out.end(), -1.0);
  Kernel::evaluate_rhs(&k, values[0], values.data() + 1, values.data() + 3, out.data(),
                       work.data());
  for (std::size_t i = 0; i < no; ++i) check(same_bits(out[i], ref[i]));
  bool reads_t = false;  // the ODE form leaves an unread t's register unset
  for (const Kernel::Step& s : k.steps()) reads_t = reads_t || s.a == 0 || s.b == 0 || s.c == 0;
  for (std::size_t i = 0; i < no; ++i) reads_t = reads_t || k.output_register(i) == 0;
  for (std::size_t i = reads_t ? 0 : 1; i < nr; ++i) check(same_bits(work[i], r[i]));

  std::vector<double> w(no);
  for (std::size_t i = 0; i < no; ++i) w[i] = i % 3 == 2 ? 0.0 : 1.0 - 0.75 * static_cast<double>(i);
  std::vector<double> adj_ref(nr), adj(nr, -1.0);
  k.vjp_steps(r.data(), w, adj_ref.data());
  k.vjp(r.data(), w, adj.data());
  for (std::size_t j = 0; j < names.size(); ++j) check(same_bits(adj[j], adj_ref[j]));
  double ybar[2] = {-1.0, -1.0}, pbar[2] = {0.0, 0.0};
  Kernel::vjp_rhs(&k, work.data(), w.data(), ybar, pbar);
  for (std::size_t i = 0; i < 2; ++i) check(same_bits(ybar[i], adj_ref[1 + i]));
  for (std::size_t j = 0; j < 2; ++j) check(same_bits(pbar[j], 0.0 + adj_ref[3 + j]));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<double> values{0.5, -1.25, 2.0, 3.0, -0.75};
  std::vector<std::string> parts;
  for (std::size_t from = 0;;) {
    const std::size_t semi = text.find(';', from);
    parts.push_back(text.substr(from, semi == std::string::npos ? std::string::npos : semi - from));
    if (semi == std::string::npos || parts.size() == 8) break;
    from = semi + 1;
  }
  check_kernel(parts, values);
  if (parts.size() > 1) return 0;

  const std::vector<std::string> names{"t", "x", "y", "a", "b"};
  costate::expr::Program program;
  try {
    program = costate::expr::Program::compile(text, names, "fuzz");
  } catch (const costate::Error&) {
    return 0;  // a clear error is a correct outcome
  }
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

// Structure-aware mutations (structured.hpp): grammar-built inputs and
// nesting to 10⁵ levels, beside libFuzzer's byte mutations.
extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                              unsigned int seed) {
  return costate::fuzz::mutate(costate::fuzz::Grammar::Expression, data, size, max_size, seed);
}
