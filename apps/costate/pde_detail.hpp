#pragma once
// What the PDE commands share (pde_commands.cpp, pde_invert.cpp): the
// banner, and the input's cellwise setup from the library
// (costate/io/pde_cells.hpp). The model-dependent work of run,
// sensitivity and gradcheck is the library's io::pde_run (pde_run.hpp);
// the calibration's inversion instantiates its own models (pde_invert.cpp).

#include <string>
#include <vector>

#include "pde_commands.hpp"

#include "costate/expr/program.hpp"
#include "costate/io/pde_cells.hpp"
#include "costate/io/pde_input.hpp"
#include "costate/pde/equation_model.hpp"
#include "costate/pde/output.hpp"
#include "costate/pde/theta.hpp"

namespace costate::cli::detail {

using io::compile_all;
using io::evaluate_cells;
inline std::vector<std::string> coordinates(int dim) { return io::pde_coordinates(dim); }

/// The run's description on stderr (rank 0, unless --quiet).
void print_banner(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
                  bool linear);

}  // namespace costate::cli::detail
