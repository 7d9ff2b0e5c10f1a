#include "costate/ode/equation_model.hpp"

#include <set>
#include <utility>

#include "costate/core/error.hpp"

namespace costate::ode {

EquationModel::EquationModel(std::vector<std::string> states, std::vector<std::string> parameters,
                             const std::vector<std::string>& equations, const std::string& context)
    : states_(std::move(states)), parameters_(std::move(parameters)) {
  COSTATE_CHECK(!states_.empty(), context << ": the model has no states");
  COSTATE_CHECK_EQ(equations.size(), states_.size(),
                   context << ": one equation per state is required");
  std::set<std::string> seen{"t"};
  variables_.push_back("t");
  for (const auto& s : states_) {
    COSTATE_CHECK(seen.insert(s).second,
                  context << ": the name '" << s << "' is used twice (states, parameters and t "
                          << "must all differ)");
    variables_.push_back(s);
  }
  for (const auto& p : parameters_) {
    COSTATE_CHECK(seen.insert(p).second,
                  context << ": the name '" << p << "' is used twice (states, parameters and t "
                          << "must all differ)");
    variables_.push_back(p);
  }
  for (std::size_t i = 0; i < states_.size(); ++i)
    equations_.push_back(expr::Program::compile(equations[i], variables_, context + "." + states_[i]));
  build_kernels(context);
}

EquationModel::EquationModel(std::vector<std::string> states, std::vector<std::string> parameters,
                             std::vector<std::string> intermediate_names,
                             std::vector<expr::Program> intermediates,
                             std::vector<expr::Program> equations, const std::string& context)
    : states_(std::move(states)),
      parameters_(std::move(parameters)),
      intermediate_names_(std::move(intermediate_names)),
      intermediates_(std::move(intermediates)),
      equations_(std::move(equations)) {
  COSTATE_CHECK(!states_.empty(), context << ": the model has no states");
  COSTATE_CHECK_EQ(equations_.size(), states_.size(),
                   context << ": one equation per state is required");
  COSTATE_CHECK_EQ(intermediates_.size(), intermediate_names_.size(),
                   context << ": one name per intermediate is required");
  variables_.push_back("t");
  variables_.insert(variables_.end(), states_.begin(), states_.end());
  variables_.insert(variables_.end(), parameters_.begin(), parameters_.end());
  const std::size_t base = variables_.size();
  variables_.insert(variables_.end(), intermediate_names_.begin(), intermediate_names_.end());
  std::set<std::string> seen;
  for (const auto& v : variables_)
    COSTATE_CHECK(seen.insert(v).second,
                  context << ": the name '" << v << "' is used twice (t, states, parameters and "
                          << "intermediates must all differ)");
  for (std::size_t k = 0; k < intermediates_.size(); ++k)
    for (const std::uint32_t u : intermediates_[k].used_variables())
      COSTATE_CHECK(u < base + k, context << ": intermediate '" << intermediate_names_[k]
                                          << "' uses variable " << u << " ('"
                                          << (u < variables_.size() ? variables_[u] : "?")
                                          << "'), which is not computed before it");
  for (std::size_t i = 0; i < equations_.size(); ++i)
    for (const std::uint32_t u : equations_[i].used_variables())
      COSTATE_CHECK(u < variables_.size(), context << ": the equation of '" << states_[i]
                                                   << "' uses variable " << u << " of only "
                                                   << variables_.size());
  build_kernels(context);
}

void EquationModel::build_kernels(const std::string& context) {
  const std::size_t n = states_.size(), np = parameters_.size(), inputs = 1 + n + np;
  const std::size_t blocks[] = {1, n, np};
  kernel_ = expr::Kernel::build(inputs, intermediates_, equations_, context, blocks);
  if (n + np <= kRowLanes)
    rows_ = expr::Kernel::build_rows(inputs, intermediates_, equations_, 1, n + np, kRowLanes,
                                     context, blocks);
}

void EquationModel::set_algebraic_states(std::vector<std::size_t> indices) {
  std::vector<char> seen(states_.size(), 0);
  for (const std::size_t i : indices) {
    COSTATE_CHECK(i < states_.size(), "EquationModel: algebraic state index "
                                          << i << " is not a state (the model has "
                                          << states_.size() << ")");
    COSTATE_CHECK(!seen[i], "EquationModel: state '" << states_[i] << "' is listed as algebraic twice");
    seen[i] = 1;
  }
  algebraic_ = std::move(indices);
}

}  // namespace costate::ode
