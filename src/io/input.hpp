#pragma once
// Reading and validating `costate run` input files (YAML).
//
// Every error names the file, the line and column, the key (dotted path, e.g.
// integrator.rtol) and what was expected; an unknown key suggests the nearest
// valid one. `--set key=value` overrides are applied to the parsed tree
// before validation and are reported as "--set key=value" in errors.

#include <string>
#include <vector>

#include "costate/ode/options.hpp"

namespace costate::io {

/// Everything a `costate run` needs, fully resolved (defaults filled in).
struct RunConfig {
  std::string input_path;
  std::string model;
  std::string description;
  std::vector<std::string> state_names;
  std::vector<std::string> parameter_names;
  std::vector<double> parameters;
  std::vector<double> initial_state;
  double t_start = 0.0;
  double t_end = 1.0;
  std::vector<double> output_times;
  ode::IntegratorOptions integrator;
  /// HDF5 output path; empty: no file.
  std::string output_file;

  /// The resolved settings as YAML (what the run actually used); written
  /// into the HDF5 output and printed by `costate run`.
  std::string to_yaml() const;
};

/// Reads `path`, applies `overrides` ("key.path=value"), validates and
/// resolves. Throws costate::Error with file:line:column on bad input.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// Levenshtein edit distance (for "did you mean" suggestions).
std::size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate nearest to `word`, or "" when none is close enough.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace costate::io
