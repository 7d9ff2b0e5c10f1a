// libFuzzer target: the SBML importer (costate::sbml::read_string). Input:
// the document's text. An imported model must be self-consistent (one kind,
// compartment, initial value and equation per state; one value per
// parameter) and its initial values and right-hand side must evaluate; only
// costate::Error may come out.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/sbml/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string xml(reinterpret_cast<const char*>(data), size);
  try {
    const costate::sbml::Model m = costate::sbml::read_string(xml, "fuzz.xml");
    const std::size_t ny = m.state_names.size(), np = m.parameter_names.size();
    if (m.state_kinds.size() != ny || m.state_compartments.size() != ny ||
        m.initial_state.size() != ny || m.initial_state_text.size() != ny ||
        m.equations.states().size() != ny || m.parameters.size() != np ||
        m.equations.parameters().size() != np)
      __builtin_trap();
    for (std::size_t i = 0; i < ny; ++i)
      if (m.state_index(m.state_names[i]) != static_cast<long>(i)) __builtin_trap();
    (void)m.brief_report();
    const std::vector<double> y0 = m.initial_values(m.parameters);
    if (y0.size() != ny) __builtin_trap();
    std::vector<double> f(ny);
    m.equations.rhs<double>(0.0, std::span<const double>(y0), std::span<const double>(m.parameters),
                            std::span<double>(f));
  } catch (const costate::Error&) {
  }
  return 0;
}
