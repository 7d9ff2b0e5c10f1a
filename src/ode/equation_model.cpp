#include "costate/ode/equation_model.hpp"

#include <set>
#include <utility>

#include "costate/core/error.hpp"
#include <string>

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

void EquationModel::set_events(std::vector<Event> events, const std::string& context) {
  const std::size_t n = states_.size(), inputs = 1 + n + parameters_.size();
  const auto label = [&](std::size_t k) {
    return context + "[" + std::to_string(k) + "]" +
           (events[k].attributes.name.empty() ? "" : " ('" + events[k].attributes.name + "')");
  };
  const auto check_program = [&](const expr::Program& prog, const std::string& where) {
    for (const std::uint32_t u : prog.used_variables())
      COSTATE_CHECK(u < variables_.size(), where << " uses variable " << u << " of only "
                                                 << variables_.size());
  };
  std::vector<expr::Program> roots;
  std::vector<std::size_t> offsets{0};
  std::vector<EventKernels> kernels;
  for (std::size_t k = 0; k < events.size(); ++k) {
    Event& e = events[k];
    COSTATE_CHECK_EQ(e.values.size(), e.targets.size(),
                     label(k) << ": one value per assigned state is required");
    std::set<std::size_t> seen;
    for (const std::size_t j : e.targets) {
      COSTATE_CHECK(j < n, label(k) << ": assigns state " << j << " of only " << n);
      COSTATE_CHECK(seen.insert(j).second,
                    label(k) << ": assigns the state '" << states_[j] << "' twice");
    }
    for (const auto& r : e.trigger.roots) check_program(r, label(k) + ": the trigger");
    for (std::size_t j = 0; j < e.values.size(); ++j)
      check_program(e.values[j], label(k) + ": the value of '" + states_[e.targets[j]] + "'");
    if (!e.delay.empty()) check_program(e.delay, label(k) + ": the delay");
    if (!e.priority.empty()) check_program(e.priority, label(k) + ": the priority");
    e.attributes.has_delay = !e.delay.empty();
    e.attributes.has_priority = !e.priority.empty();
    roots.insert(roots.end(), e.trigger.roots.begin(), e.trigger.roots.end());
    offsets.push_back(roots.size());
    EventKernels ek;
    ek.values = expr::Kernel::build(inputs, intermediates_, e.values, label(k));
    if (!e.delay.empty())
      ek.delay = expr::Kernel::build(inputs, intermediates_, std::span(&e.delay, 1), label(k));
    if (!e.priority.empty())
      ek.priority =
          expr::Kernel::build(inputs, intermediates_, std::span(&e.priority, 1), label(k));
    kernels.push_back(std::move(ek));
  }
  roots_kernel_ = expr::Kernel::build(inputs, intermediates_, roots, context + " (triggers)");
  event_kernels_ = std::move(kernels);
  root_offset_ = events.empty() ? std::vector<std::size_t>{} : std::move(offsets);
  events_ = std::move(events);
}

}  // namespace costate::ode
