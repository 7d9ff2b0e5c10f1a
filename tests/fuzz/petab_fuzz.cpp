// libFuzzer target: the PEtab reader (costate::petab::read_text, the
// in-memory entry of petab::read: the same parser, no files written).
// Input: the problem's files as sections separated by lines "%%", in this
// order:
//   model.xml, parameters.tsv, observables.tsv, measurements.tsv,
//   conditions.tsv [, problem.yaml]
// A missing section is a missing file; without the sixth section the
// problem file is the standard one naming the other five. A problem read
// must be self-consistent (indices within range, one override per model
// parameter and state); only costate::Error may come out.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"

namespace {

bool ref_ok(const costate::petab::Ref& r, std::size_t n_parameters) {
  return r.parameter < static_cast<long>(n_parameters);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const char* const names[] = {"model.xml",        "parameters.tsv", "observables.tsv",
                                      "measurements.tsv", "conditions.tsv", "problem.yaml"};
  static const std::string standard_yaml =
      "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n"
      "- condition_files: [conditions.tsv]\n  measurement_files: [measurements.tsv]\n"
      "  observable_files: [observables.tsv]\n  sbml_files: [model.xml]\n";

  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> sections(1);
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line == "%%" && sections.size() < 6)
      sections.emplace_back();
    else
      sections.back() += line + (end == std::string::npos ? "" : "\n");
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  std::map<std::string, std::string> files;
  for (std::size_t k = 0; k < 5 && k < sections.size(); ++k) files[names[k]] = sections[k];

  try {
    const costate::petab::Problem pb = costate::petab::read_text(
        sections.size() == 6 ? sections[5] : standard_yaml, names[5], files);
    const std::size_t np = pb.parameters.size(), ny = pb.model.state_names.size(),
                      nq = pb.model.parameter_names.size();
    if (pb.model_parameter_row.size() != nq) __builtin_trap();
    for (long r : pb.model_parameter_row)
      if (r >= static_cast<long>(np)) __builtin_trap();
    for (const auto& c : pb.conditions) {
      if (c.parameters.size() != nq || c.states.size() != ny) __builtin_trap();
      for (const auto& r : c.parameters)
        if (!ref_ok(r, np)) __builtin_trap();
      for (const auto& r : c.states)
        if (!ref_ok(r, np)) __builtin_trap();
    }
    for (const auto& m : pb.measurements) {
      if (m.observable >= pb.observables.size() || m.condition >= pb.conditions.size() ||
          m.preequilibration >= static_cast<long>(pb.conditions.size()))
        __builtin_trap();
      for (const auto& r : m.observable_parameters)
        if (!ref_ok(r, np)) __builtin_trap();
      for (const auto& r : m.noise_parameters)
        if (!ref_ok(r, np)) __builtin_trap();
    }
    std::size_t counted = 0;
    for (const auto& e : pb.experiments) {
      if (e.at_time.size() != e.times.size()) __builtin_trap();
      for (std::size_t k = 0; k < e.times.size(); ++k) {
        if (k > 0 && !(e.times[k] > e.times[k - 1])) __builtin_trap();
        for (std::size_t m : e.at_time[k]) {
          if (m >= pb.measurements.size()) __builtin_trap();
          ++counted;
        }
      }
    }
    if (counted != pb.measurements.size()) __builtin_trap();
    for (std::size_t k : pb.estimated)
      if (k >= np) __builtin_trap();
    (void)pb.brief_report();
    (void)pb.nominal_on_scale();
    (void)pb.bounds_on_scale();
  } catch (const costate::Error&) {
  }
  return 0;
}
