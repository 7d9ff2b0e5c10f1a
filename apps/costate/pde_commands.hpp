#pragma once
// `costate run|sensitivity|gradcheck` on PDE inputs (a `pde:` section; see
// costate/io/pde_input.hpp). One process or under mpiexec; the report comes
// from rank 0 only. The computation is the library's io::pde_run
// (costate/io/pde_run.hpp); the calibration's is pde_invert.cpp.

#include <string>
#include <vector>

#include "costate/core/environment.hpp"

namespace costate::cli {

struct PdeArgs {
  std::string command;  ///< "run" | "sensitivity" | "gradcheck" | "calibrate"
  std::string input;
  std::string output;   ///< -o (overrides output.file)
  std::vector<std::string> sets;
  bool json = false;
  bool quiet = false;
};

/// True when `path` is a PDE input (a top-level `pde:` key).
bool is_pde_input(const std::string& path);

/// Runs the command; returns the exit status (gradcheck: 1 when it fails).
/// Throws costate::Error on bad input (on every rank).
int pde_command(const Environment& env, const PdeArgs& args);

}  // namespace costate::cli
