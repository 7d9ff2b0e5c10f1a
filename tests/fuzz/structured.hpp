#pragma once
// Structure-aware generation for the libFuzzer targets (issue 35 item 8):
// byte mutations alone rarely build a well-formed expression or input file,
// and never one nested 10⁵ levels deep. The targets' LLVMFuzzerCustomMutator
// calls mutate(): half the time libFuzzer's own byte mutation, otherwise a
// fresh input from a small grammar (expressions over t, x, y, a, b; ODE and
// PDE input files whose expressions come from the same grammar) or the
// current input made deeper — a random part of it wrapped in up to 2·10⁵
// parentheses, unary signs, function calls or powers, or (YAML) nested flow
// sequences, flow maps and block maps, duplicate keys and a second
// document. Depths are drawn log-uniformly so that shallow, near-limit
// (the parsers' 1000 levels) and 10⁵-deep inputs are all frequent.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace costate::fuzz {

using Rng = std::mt19937_64;

inline std::size_t pick(Rng& rng, std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }

/// A depth from 1 to `most`, log-uniform.
inline std::size_t depth(Rng& rng, std::size_t most) {
  const double e = std::uniform_real_distribution<double>(0.0, std::log(static_cast<double>(most)))(rng);
  return static_cast<std::size_t>(std::exp(e)) + 1;
}

inline std::string repeat(const std::string& s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

/// A random expression over t, x, y, a, b (and w when `with_w`).
inline std::string expression(Rng& rng, int budget, bool with_w = false) {
  static const char* const kVars[] = {"t", "x", "y", "a", "b", "w"};
  static const char* const kNumbers[] = {"0", "1", "2.5", "-3", "1e-300", "1e308", "0.5", "1e3", "7"};
  static const char* const kUnary[] = {"sin", "cos", "exp", "log", "sqrt", "abs", "tanh", "tan", "atan", "floor"};
  static const char* const kBinary[] = {"pow", "min", "max", "atan2"};
  static const char* const kOps[] = {" + ", " - ", "*", "/", "^", " > ", " <= ", " == ", " && ", " || "};
  if (budget <= 0 || pick(rng, 4) == 0) {
    if (pick(rng, 3) == 0) return kNumbers[pick(rng, std::size(kNumbers))];
    return kVars[pick(rng, with_w ? 6 : 5)];
  }
  switch (pick(rng, 6)) {
    case 0: return std::string(kUnary[pick(rng, std::size(kUnary))]) + "(" + expression(rng, budget - 1, with_w) + ")";
    case 1:
      return std::string(kBinary[pick(rng, std::size(kBinary))]) + "(" + expression(rng, budget - 1, with_w) + ", " +
             expression(rng, budget - 1, with_w) + ")";
    case 2: return "-" + expression(rng, budget - 1, with_w);
    case 3: return "(" + expression(rng, budget - 1, with_w) + ")";
    case 4:
      return expression(rng, budget - 1, with_w) + " ? " + expression(rng, budget - 1, with_w) + " : " +
             expression(rng, budget - 1, with_w);
    default:
      return expression(rng, budget - 1, with_w) + kOps[pick(rng, std::size(kOps))] +
             expression(rng, budget - 1, with_w);
  }
}

/// `text` with a random part of it (or all of it) nested `depth` levels.
inline std::string deepen_expression(Rng& rng, const std::string& text, std::size_t levels) {
  std::size_t from = 0, to = text.size();
  if (!text.empty() && pick(rng, 2) == 0) {
    from = pick(rng, text.size());
    to = from + pick(rng, text.size() - from + 1);
  }
  const std::string inner = text.substr(from, to - from).empty() ? "x" : text.substr(from, to - from);
  std::string wrapped;
  switch (pick(rng, 5)) {
    case 0: wrapped = repeat("(", levels) + inner + repeat(")", levels); break;
    case 1: wrapped = repeat("-", levels) + inner; break;
    case 2: wrapped = repeat("sin(", levels) + inner + repeat(")", levels); break;
    case 3: wrapped = inner + repeat("^x", levels); break;       // right-associative powers
    default: wrapped = repeat("x^(", levels) + inner + repeat(")", levels); break;
  }
  return text.substr(0, from) + wrapped + text.substr(to);
}

/// An ODE or PDE input file with generated expressions.
inline std::string input_file(Rng& rng) {
  auto q = [&](int budget) { return "\"" + expression(rng, budget) + "\""; };
  std::string out;
  if (pick(rng, 4) == 0) {
    out = "pde:\n  grid: {n: [" + std::to_string(4 + pick(rng, 8)) + ", " + std::to_string(4 + pick(rng, 8)) +
          "]}\n  fields: [u]\n  parameters: {a: 1.5, b: 0.5}\n  initial: {u: " + q(3) +
          "}\n  equations: {u: \"0.1*lap(u) + a*u\"}\nintegrator: {method: crank_nicolson, dt: 0.01, steps: 3}\n";
    if (pick(rng, 2) == 0) out += "objective:\n  misfit: {u: " + q(2) + "}\n";
    return out;
  }
  out = "model:\n  states: [x, y]\n  equations:\n    x: " + q(4) + "\n    y: " + q(4) +
        "\nparameters: {a: 1.5, b: 0.5}\ninitial_state: {x: 1.0, y: " + q(2) + "}\ntime: {end: " +
        std::to_string(1 + pick(rng, 5)) + "}\n";
  if (pick(rng, 2) == 0) out += "objective: {terminal: " + q(3) + "}\n";
  if (pick(rng, 3) == 0) out += "events: [{trigger: \"x > 0.5\", assign: {y: " + q(2) + "}}]\n";
  if (pick(rng, 3) == 0) out += "integrator: {method: rk4, dt: 0.01}\n";
  return out;
}

/// YAML made deeper or malformed in a way a user can reach.
inline std::string deepen_yaml(Rng& rng, const std::string& text, std::size_t levels) {
  const std::size_t at = text.empty() ? 0 : text.rfind('\n', pick(rng, text.size())) + 1;
  switch (pick(rng, 6)) {
    case 0: return text + "description: " + repeat("[", levels) + repeat("]", levels) + "\n";
    case 1: return text + "description: " + repeat("{a: ", levels) + "1" + repeat("}", levels) + "\n";
    case 2: {
      std::string block = "extra:\n";
      for (std::size_t i = 1; i <= levels && block.size() < 200000; ++i) block += std::string(i, ' ') + "k:\n";
      return text + block;
    }
    case 3: return text.substr(0, at) + text.substr(at, text.find('\n', at) - at + 1) + text.substr(at);  // a key twice
    case 4: return text + "---\n" + text;                                                                 // two documents
    default: {
      // An expression in the file nested `levels` deep.
      const std::size_t quote = text.find('"', at);
      if (quote == std::string::npos) return text + "x: \"" + repeat("(", levels) + "x" + repeat(")", levels) + "\"\n";
      const std::size_t end = text.find('"', quote + 1);
      if (end == std::string::npos) return text;
      return text.substr(0, quote + 1) + deepen_expression(rng, text.substr(quote + 1, end - quote - 1), levels) +
             text.substr(end);
    }
  }
}

enum class Grammar { Expression, Input };

/// The targets' LLVMFuzzerCustomMutator (see the file comment).
inline std::size_t mutate(Grammar grammar, std::uint8_t* data, std::size_t size, std::size_t max_size,
                          unsigned int seed) {
  Rng rng(seed);
  const std::size_t choice = pick(rng, 10);
  if (choice < 5) return LLVMFuzzerMutate(data, size, max_size);
  std::string text;
  // Up to 2·10⁵ levels when the input may be that long (nesting costs one
  // or two bytes a level); -max_len=2^18 in scripts/fuzz.sh allows it.
  const std::size_t most = std::max<std::size_t>(2, std::min<std::size_t>(200000, max_size / 3));
  if (grammar == Grammar::Expression) {
    if (choice < 7) {
      text = expression(rng, 1 + static_cast<int>(pick(rng, 6)));
      for (std::size_t n = pick(rng, 3); n > 0; --n) text += ";" + expression(rng, 3, true);
    } else {
      text = deepen_expression(rng, std::string(reinterpret_cast<const char*>(data), size), depth(rng, most));
    }
  } else {
    if (choice < 7)
      text = input_file(rng);
    else
      text = deepen_yaml(rng, size > 0 ? std::string(reinterpret_cast<const char*>(data), size) : input_file(rng),
                         depth(rng, most));
  }
  if (text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

}  // namespace costate::fuzz
