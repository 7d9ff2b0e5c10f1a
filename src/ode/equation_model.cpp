#include "costate/ode/equation_model.hpp"

#include <set>

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
}

}  // namespace costate::ode
