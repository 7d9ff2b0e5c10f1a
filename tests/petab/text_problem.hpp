#pragma once
// A small PEtab problem written in a test (shared by input_test and
// events_test): its SBML model, the four tables and the problem YAML, read
// from memory (petab::read_text) or written to a folder and read from there
// (petab::read). A test fills the texts and changes what it checks.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "costate/petab/problem.hpp"

namespace costate::test {

struct TextProblem {
  std::string model;  ///< the SBML document (model.xml)
  std::string parameters, observables, conditions, measurements;  ///< the .tsv tables
  std::string yaml =
      "format_version: 1\n"
      "parameter_file: parameters.tsv\n"
      "problems:\n"
      "- sbml_files: [model.xml]\n"
      "  condition_files: [conditions.tsv]\n"
      "  measurement_files: [measurements.tsv]\n"
      "  observable_files: [observables.tsv]\n";

  /// The files by path, `dir` (e.g. "in/memory/") before each name.
  std::map<std::string, std::string> texts(const std::string& dir) const {
    return {{dir + "model.xml", model},
            {dir + "parameters.tsv", parameters},
            {dir + "observables.tsv", observables},
            {dir + "conditions.tsv", conditions},
            {dir + "measurements.tsv", measurements}};
  }
  /// petab::read_text of the texts as the folder `dir` (ending in '/').
  petab::Problem read_text(const std::string& dir) const {
    return petab::read_text(yaml, dir + "problem.yaml", texts(dir));
  }
  /// Writes the files into `dir` (created); returns problem.yaml's path.
  std::string write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    for (const auto& [name, text] : texts(""))
      std::ofstream(dir / name) << text;
    std::ofstream(dir / "problem.yaml") << yaml;
    return (dir / "problem.yaml").string();
  }
};

}  // namespace costate::test
