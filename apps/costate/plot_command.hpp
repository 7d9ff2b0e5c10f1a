#pragma once
// `costate plot OUT.h5 [-o FILE.png]`: runs Python's costate.plot (python/costate/plot.py,
// matplotlib) on a costate output file. See docs/python.md.

#include <string>

namespace costate::cli {

struct PlotArgs {
  std::string input;   ///< the HDF5 file
  std::string output;  ///< -o (default: the input with extension .png)
  int dpi = 100;
  bool json = false;   ///< --json: what was drawn, one JSON object on stdout
};

/// Runs COSTATE_PYTHON_EXECUTABLE -m costate.plot with the package of the build tree (when
/// this executable runs from it) or of the install prefix on PYTHONPATH; returns its exit
/// status. Throws costate::Error when the interpreter is missing or cannot be started, and
/// when matplotlib or h5py is missing (the package names to install).
int plot_command(const PlotArgs& args);

}  // namespace costate::cli
