#include "costate/pde/equation_model.hpp"

#include <algorithm>

#include "costate/io/input.hpp"  // nearest(): "did you mean" suggestions

namespace costate::pde {

namespace {

const std::vector<std::string> kOperators = {"lap",   "dx",    "dy",    "dz",      "dx_up",
                                             "dy_up", "dz_up", "div_grad"};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// Linearity classes of a value in the state u (see linear_in_state()).
enum class Kind { Constant, TimeDependent, Affine, Other };

Kind combine_add(Kind a, Kind b) {
  if (a == Kind::Other || b == Kind::Other) return Kind::Other;
  if (a == Kind::Affine || b == Kind::Affine) return Kind::Affine;
  return (a == Kind::TimeDependent || b == Kind::TimeDependent) ? Kind::TimeDependent : Kind::Constant;
}
bool is_constant(Kind k) { return k == Kind::Constant || k == Kind::TimeDependent; }

}  // namespace

std::vector<std::string> EquationSystem::pointwise_names(const EquationSpec& spec) {
  std::vector<std::string> names{"x"};
  if (spec.dim >= 2) names.emplace_back("y");
  if (spec.dim >= 3) names.emplace_back("z");
  names.emplace_back("t");
  names.insert(names.end(), spec.fields.begin(), spec.fields.end());
  names.insert(names.end(), spec.parameter_fields.begin(), spec.parameter_fields.end());
  names.insert(names.end(), spec.parameters.begin(), spec.parameters.end());
  return names;
}

EquationSystem::EquationSystem(EquationSpec spec) : spec_(std::move(spec)) {
  const std::string& ctx = spec_.context;
  COSTATE_CHECK(spec_.dim >= 1 && spec_.dim <= 3,
                ctx << ": the grid dimension is " << spec_.dim << "; it must be 1, 2 or 3");
  COSTATE_CHECK(!spec_.fields.empty() && components() <= kMaxEquationComponents,
                ctx << ": " << components() << " fields; equation models have 1 to "
                    << kMaxEquationComponents << " fields");
  COSTATE_CHECK(field_parameters() <= kMaxEquationFields,
                ctx << ": " << field_parameters() << " parameter fields; equation models have at most "
                    << kMaxEquationFields);
  COSTATE_CHECK(scalar_parameters() <= kMaxScalarParameters,
                ctx << ": " << scalar_parameters() << " scalar parameters; equation models have at most "
                    << kMaxScalarParameters);
  COSTATE_CHECK_EQ(spec_.equations.size(), spec_.fields.size(),
                   ctx + ": one equation per field");
  const std::vector<std::string> names = pointwise_names(spec_);
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j)
      COSTATE_CHECK(names[i] != names[j],
                    ctx << ": the name '" << names[i]
                        << "' is used twice (coordinates x, y, z, t, fields, parameter fields and "
                           "parameters need distinct names)");
  for (const auto& n : names)
    COSTATE_CHECK(!contains(kOperators, n), ctx << ": '" << n << "' is the name of a stencil operator");
  const std::size_t base = names.size();
  const std::vector<std::string> axes{"x", "y", "z"};

  // Operand of a stencil operator: a field or a parameter field (or, for an
  // upwind velocity, a scalar parameter).
  auto operand = [&](const std::string& op, const std::string& name, bool velocity,
                     StencilTerm::Source& src, int& index) {
    auto at = [](const std::vector<std::string>& v, const std::string& x) {
      return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
    };
    if (contains(spec_.fields, name)) {
      src = StencilTerm::Source::State;
      index = at(spec_.fields, name);
      return;
    }
    if (contains(spec_.parameter_fields, name)) {
      src = StencilTerm::Source::Field;
      index = at(spec_.parameter_fields, name);
      return;
    }
    if (velocity && contains(spec_.parameters, name)) {
      src = StencilTerm::Source::Scalar;
      index = at(spec_.parameters, name);
      return;
    }
    std::vector<std::string> valid = spec_.fields;
    valid.insert(valid.end(), spec_.parameter_fields.begin(), spec_.parameter_fields.end());
    if (velocity) valid.insert(valid.end(), spec_.parameters.begin(), spec_.parameters.end());
    std::string msg;
    if (contains(spec_.parameters, name))
      msg = "'" + name + "' is a scalar parameter, not a field: '" + op +
            "' needs a field or parameter field (write e.g. " + name + "*lap(u))";
    else if (name == "x" || name == "y" || name == "z" || name == "t")
      msg = "'" + name + "' is a coordinate, not a field: '" + op + "' needs a field or parameter field";
    else {
      msg = "unknown field '" + name + "' in '" + op + "'";
      const std::string near = io::nearest(name, valid);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
    }
    throw Error(msg + " (valid: " + join(valid) + ")");
  };

  expr::CallHook hook;
  hook.names = kOperators;
  hook.resolve = [&](const std::string& op, const std::vector<std::string>& args) -> std::uint32_t {
    StencilTerm term;
    const bool up = op.size() == 5 && op.substr(2) == "_up";
    const bool derivative = op == "dx" || op == "dy" || op == "dz" || up;
    const std::size_t arity = (up || op == "div_grad") ? 2 : 1;
    if (args.size() != arity) {
      std::string usage = op == "div_grad" ? "div_grad(k, f)" : up ? op + "(f, velocity)" : op + "(f)";
      throw Error("'" + op + "' takes " + std::to_string(arity) + " argument" + (arity == 1 ? "" : "s") +
                  ", got " + std::to_string(args.size()) + ": write " + usage);
    }
    if (derivative) {
      term.axis = op[1] - 'x';
      if (term.axis >= spec_.dim)
        throw Error("'" + op + "' differentiates along " + axes[static_cast<std::size_t>(term.axis)] +
                    ", but the grid is " + std::to_string(spec_.dim) + "-D");
    }
    term.op = op == "lap" ? StencilTerm::Op::Lap
              : op == "div_grad" ? StencilTerm::Op::DivGrad
              : up ? StencilTerm::Op::DUp
                   : StencilTerm::Op::D;
    operand(op, args[0], false, term.a_source, term.a);
    if (arity == 2) operand(op, args[1], up, term.b_source, term.b);
    auto it = std::find(terms_.begin(), terms_.end(), term);
    if (it == terms_.end()) {
      if (base + terms_.size() + 1 > static_cast<std::size_t>(kMaxVariables))
        throw Error("too many distinct stencil operator terms (at most " +
                    std::to_string(kMaxVariables - static_cast<int>(base)) + " with these names)");
      terms_.push_back(term);
      it = terms_.end() - 1;
    }
    return static_cast<std::uint32_t>(base + static_cast<std::size_t>(it - terms_.begin()));
  };
  for (std::size_t c = 0; c < spec_.fields.size(); ++c)
    programs_.push_back(
        expr::Program::compile(spec_.equations[c], names, ctx + "." + spec_.fields[c], hook));

  // Linearity: classify every value of each program (t-independent
  // constants, t-dependent constants, affine in u with t-independent
  // coefficients, other). Linear when every equation is affine or constant.
  const std::uint32_t t_index = static_cast<std::uint32_t>(spec_.dim);
  const std::uint32_t first_field = t_index + 1;
  const std::uint32_t last_field = first_field + static_cast<std::uint32_t>(components());
  std::vector<Kind> variable_kind(base + terms_.size(), Kind::Constant);
  variable_kind[t_index] = Kind::TimeDependent;
  for (std::uint32_t v = first_field; v < last_field; ++v) variable_kind[v] = Kind::Affine;
  for (std::size_t k = 0; k < terms_.size(); ++k) {
    const StencilTerm& tm = terms_[k];
    const bool a_state = tm.a_source == StencilTerm::Source::State;
    const bool b_state = tm.b_source == StencilTerm::Source::State;
    Kind kind = Kind::Constant;
    switch (tm.op) {
      case StencilTerm::Op::Lap:
      case StencilTerm::Op::D: kind = a_state ? Kind::Affine : Kind::Constant; break;
      case StencilTerm::Op::DUp: kind = b_state ? Kind::Other : a_state ? Kind::Affine : Kind::Constant; break;
      case StencilTerm::Op::DivGrad:
        kind = (a_state && b_state) ? Kind::Other : (a_state || b_state) ? Kind::Affine : Kind::Constant;
        break;
    }
    variable_kind[base + k] = kind;
  }
  linear_ = true;
  autonomous_ = true;
  for (const auto& prog : programs_) {
    if (prog.uses(t_index)) autonomous_ = false;
    std::vector<Kind> stack;
    for (const expr::Instruction& in : prog.code()) {
      using expr::Op;
      switch (in.op) {
        case Op::Constant: stack.push_back(Kind::Constant); break;
        case Op::Variable: stack.push_back(variable_kind[in.arg]); break;
        case Op::Add:
        case Op::Sub: {
          const Kind b = stack.back();
          stack.pop_back();
          stack.back() = combine_add(stack.back(), b);
          break;
        }
        case Op::Mul:
        case Op::Div: {
          const Kind b = stack.back();
          stack.pop_back();
          const Kind a = stack.back();
          Kind r = Kind::Other;
          if (is_constant(a) && is_constant(b))
            r = combine_add(a, b);
          else if (a == Kind::Affine && b == Kind::Constant)
            r = Kind::Affine;
          else if (in.op == Op::Mul && a == Kind::Constant && b == Kind::Affine)
            r = Kind::Affine;
          stack.back() = r;
          break;
        }
        case Op::Neg: break;
        case Op::Pow:
        case Op::Atan2:
        case Op::Hypot:
        case Op::Min:
        case Op::Max: {
          const Kind b = stack.back();
          stack.pop_back();
          const Kind a = stack.back();
          stack.back() = (is_constant(a) && is_constant(b)) ? combine_add(a, b) : Kind::Other;
          break;
        }
        default:  // unary functions
          if (!is_constant(stack.back())) stack.back() = Kind::Other;
          break;
      }
    }
    if (stack.empty() || stack.back() == Kind::Other) linear_ = false;
  }
}

}  // namespace costate::pde
