#include "costate/expr/kernel.hpp"

#include <bit>
#include <map>
#include <tuple>
#include <unordered_map>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/sparsity.hpp"

namespace costate::expr {

template void Kernel::evaluate<double>(double*) const;
template void Kernel::evaluate<ad::Dual<double, 1>>(ad::Dual<double, 1>*) const;
template void Kernel::evaluate<ad::Dual<double, 8>>(ad::Dual<double, 8>*) const;
template void Kernel::evaluate<ad::IndexSet>(ad::IndexSet*) const;
template void Kernel::evaluate<ad::Reverse<double>>(ad::Reverse<double>*) const;
template void Kernel::evaluate<ad::Reverse<ad::Dual<double, 1>>>(
    ad::Reverse<ad::Dual<double, 1>>*) const;
template void Kernel::evaluate<ad::Dual<ad::Dual<double, 1>, 8>>(
    ad::Dual<ad::Dual<double, 1>, 8>*) const;

namespace {

/// Builds the SSA code before dead-code elimination: registers are
/// numbered inputs, then constants, then steps in emission order.
class Flattener {
 public:
  Flattener(std::size_t n_inputs, std::string_view context)
      : n_inputs_(n_inputs), context_(context) {}

  /// Emits `p` with its variables mapped by `var_reg` (size: the variables
  /// `p` may use); returns the register of its value.
  std::uint32_t emit(const Program& p, const std::vector<std::uint32_t>& var_reg) {
    std::vector<std::uint32_t> stack;
    for (const Instruction& in : p.code()) {
      if (in.op == Op::Constant) {
        stack.push_back(constant(p.constants()[in.arg]));
        continue;
      }
      if (in.op == Op::Variable) {
        COSTATE_CHECK(in.arg < var_reg.size(),
                      context_ << ": '" << p.text() << "' uses variable " << in.arg
                               << ", which is not computed before it (" << var_reg.size()
                               << " variables available)");
        stack.push_back(var_reg[in.arg]);
        continue;
      }
      const int n = arity(in.op);
      std::uint32_t ops[3] = {0, 0, 0};
      for (int k = n; k-- > 0;) {
        ops[k] = stack.back();
        stack.pop_back();
      }
      stack.push_back(operation(in.op, ops[0], ops[1], ops[2], n));
    }
    COSTATE_CHECK(stack.size() == 1, context_ << ": '" << p.text() << "' is not one expression");
    return stack.back();
  }

  // Registers: constants and steps kept apart until the end (their final
  // numbers depend on how many constants there are).
  static constexpr std::uint32_t kStepTag = 1u << 31;
  static constexpr std::uint32_t kConstTag = 1u << 30;

  std::size_t n_inputs_;
  std::string_view context_;
  std::vector<double> constants;
  std::vector<Kernel::Step> steps;  // operands tagged

 private:
  std::uint32_t constant(double v) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const auto [it, fresh] = const_index_.try_emplace(bits, static_cast<std::uint32_t>(constants.size()));
    if (fresh) constants.push_back(v);
    return kConstTag | it->second;
  }
  bool is_constant(std::uint32_t reg) const {
    return (reg & kConstTag) != 0 && (reg & kStepTag) == 0;
  }
  std::uint32_t operation(Op op, std::uint32_t a, std::uint32_t b, std::uint32_t c, int n) {
    bool all_constant = true;
    for (int k = 0; k < n; ++k) all_constant = all_constant && is_constant(k == 0 ? a : k == 1 ? b : c);
    if (all_constant) {
      auto value = [&](std::uint32_t reg) { return constants[reg & ~kConstTag]; };
      return constant(Kernel::apply<double>(op, value(a), n > 1 ? value(b) : 0.0,
                                            n > 2 ? value(c) : 0.0));
    }
    // Operands a step does not read point at a fixed register (input 0 or
    // constant 0 would do): use a itself, so that sharing sees equal keys.
    if (n < 2) b = a;
    if (n < 3) c = a;
    const auto key = std::make_tuple(static_cast<int>(op), a, b, c);
    const auto [it, fresh] = shared_.try_emplace(key, static_cast<std::uint32_t>(steps.size()));
    if (fresh) steps.push_back({op, a, b, c});
    return kStepTag | it->second;
  }

  std::unordered_map<std::uint64_t, std::uint32_t> const_index_;
  std::map<std::tuple<int, std::uint32_t, std::uint32_t, std::uint32_t>, std::uint32_t> shared_;
};

}  // namespace

Kernel Kernel::build(std::size_t n_inputs, std::span<const Program> slots,
                     std::span<const Program> outputs, std::string_view context) {
  Flattener f(n_inputs, context);
  std::vector<std::uint32_t> var_reg(n_inputs);
  for (std::size_t j = 0; j < n_inputs; ++j) var_reg[j] = static_cast<std::uint32_t>(j);
  for (const Program& s : slots) var_reg.push_back(f.emit(s, var_reg));
  std::vector<std::uint32_t> out;
  for (const Program& o : outputs) out.push_back(f.emit(o, var_reg));

  // Keep what the outputs use (steps are in dependency order: one backward pass).
  constexpr std::uint32_t kStep = Flattener::kStepTag, kConst = Flattener::kConstTag;
  std::vector<char> live(f.steps.size(), 0);
  for (const std::uint32_t o : out)
    if (o & kStep) live[o & ~kStep] = 1;
  for (std::size_t i = f.steps.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (const std::uint32_t reg : {f.steps[i].a, f.steps[i].b, f.steps[i].c})
      if (reg & kStep) live[reg & ~kStep] = 1;
  }
  Kernel k;
  k.n_inputs_ = n_inputs;
  k.constants_ = f.constants;
  k.first_result_ = n_inputs + f.constants.size();
  std::vector<std::uint32_t> renumber(f.steps.size(), 0);
  auto final_reg = [&](std::uint32_t reg) -> std::uint32_t {
    if (reg & kStep) return static_cast<std::uint32_t>(k.first_result_) + renumber[reg & ~kStep];
    if (reg & kConst) return static_cast<std::uint32_t>(n_inputs) + (reg & ~kConst);
    return reg;
  };
  for (std::size_t i = 0; i < f.steps.size(); ++i) {
    if (!live[i]) continue;
    const Step& s = f.steps[i];
    renumber[i] = static_cast<std::uint32_t>(k.steps_.size());
    k.steps_.push_back({s.op, final_reg(s.a), final_reg(s.b), final_reg(s.c)});
  }
  for (const std::uint32_t o : out) k.outputs_.push_back(final_reg(o));
  return k;
}

void Kernel::vjp(const double* r, std::span<const double> w, double* adj) const {
  const std::size_t nr = registers();
  for (std::size_t i = 0; i < nr; ++i) adj[i] = 0.0;
  for (std::size_t i = 0; i < outputs_.size(); ++i) adj[outputs_[i]] += w[i];
  constexpr double kLn2 = 0.69314718055994530941723212145818;
  constexpr double kLn10 = 2.30258509299404568401799145468437;
  constexpr double k2OverSqrtPi = 1.12837916709551257389615890312154;
  for (std::size_t i = steps_.size(); i-- > 0;) {
    const double g = adj[first_result_ + i];
    if (g == 0.0) continue;
    const Step& s = steps_[i];
    const double a = r[s.a], b = r[s.b], v = r[first_result_ + i];
    double& ga = adj[s.a];
    double& gb = adj[s.b];
    switch (s.op) {
      case Op::Constant:
      case Op::Variable: ga += g; break;
      case Op::Add: ga += g; gb += g; break;
      case Op::Sub: ga += g; gb -= g; break;
      case Op::Mul: ga += g * b; gb += g * a; break;
      case Op::Div: {
        const double inv = 1.0 / b;
        ga += g * inv;
        gb -= g * v * inv;
        break;
      }
      case Op::Pow: {
        // As ad::Dual: ∂/∂a = b·a^(b−1) (0 for b = 0); ∂/∂b = v·log a for a > 0, else 0.
        double da = 0.0;
        if (b != 0.0) da = a != 0.0 ? b * v / a : b * std::pow(a, b - 1.0);
        ga += g * da;
        if (a > 0.0) gb += g * v * std::log(a);
        break;
      }
      case Op::Atan2: {  // atan2(a, b): ∂/∂a = b/(a² + b²), ∂/∂b = −a/(a² + b²)
        const double r2 = b * b + a * a;
        const double inv = r2 == 0.0 ? 0.0 : 1.0 / r2;
        ga += g * (b * inv);
        gb += g * (-a * inv);
        break;
      }
      case Op::Hypot: {
        const double inv = v == 0.0 ? 0.0 : 1.0 / v;
        ga += g * (a * inv);
        gb += g * (b * inv);
        break;
      }
      case Op::Min: (b < a ? gb : ga) += g; break;  // ties: the first argument
      case Op::Max: (b > a ? gb : ga) += g; break;
      case Op::Neg: ga -= g; break;
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
      case Op::And: case Op::Or: case Op::Not:
      case Op::Floor: case Op::Ceil: case Op::Round: break;
      case Op::Select: (a != 0.0 ? gb : adj[s.c]) += g; break;
      case Op::Sqrt: ga += g * (v == 0.0 ? HUGE_VAL : 0.5 / v); break;
      case Op::Cbrt: ga += g * (v == 0.0 ? HUGE_VAL : 1.0 / (3 * v * v)); break;
      case Op::Exp: ga += g * v; break;
      case Op::Expm1: ga += g * (v + 1); break;
      case Op::Log: ga += g * (1.0 / a); break;
      case Op::Log1p: ga += g * (1.0 / (1 + a)); break;
      case Op::Log2: ga += g * (1.0 / (a * kLn2)); break;
      case Op::Log10: ga += g * (1.0 / (a * kLn10)); break;
      case Op::Sin: ga += g * std::cos(a); break;
      case Op::Cos: ga += g * -std::sin(a); break;
      case Op::Tan: ga += g * (1 + v * v); break;
      case Op::Asin: ga += g * (1.0 / std::sqrt((1 - a) * (1 + a))); break;
      case Op::Acos: ga += g * (-1.0 / std::sqrt((1 - a) * (1 + a))); break;
      case Op::Atan: ga += g * (1.0 / (1 + a * a)); break;
      case Op::Sinh: ga += g * std::cosh(a); break;
      case Op::Cosh: ga += g * std::sinh(a); break;
      case Op::Tanh: ga += g * (1 - v * v); break;
      case Op::Asinh: ga += g * (1.0 / std::sqrt(a * a + 1)); break;
      case Op::Acosh: ga += g * (1.0 / std::sqrt((a - 1) * (a + 1))); break;
      case Op::Atanh: ga += g * (1.0 / ((1 - a) * (1 + a))); break;
      case Op::Erf: ga += g * (k2OverSqrtPi * std::exp(-(a * a))); break;
      case Op::Erfc: ga += g * (-k2OverSqrtPi * std::exp(-(a * a))); break;
      case Op::Abs: ga += a > 0.0 ? g : a < 0.0 ? -g : 0.0; break;
    }
  }
}

}  // namespace costate::expr
