#pragma once
// The trajectory of an input file's model, compiled once in the library
// (src/io/file_gradient.cpp; the models' kernels in src/io/model_kernels.cpp), for
// `costate run`, the Python module's run() and the tools.

#include "costate/ode/options.hpp"
#include "costate/io/input.hpp"

namespace costate::io {

/// The file's trajectory: its model from initial_state and parameters over
/// [t_start, t_end], reported at output_times, with cfg.integrator (its
/// on_step callback included). A failed integration is returned (summary),
/// not thrown.
/// An SBML model with delay() runs by the method of steps
/// (ode::integrate_with_delays; Solution::history holds what its delays
/// read).
ode::Solution integrate_file(const RunConfig& cfg);

/// Every SBML symbol (sbml::Model::symbol_names) at output k of `sol`, the
/// trajectory of cfg's SBML model (delay() read from sol.history).
std::vector<double> sbml_symbols(const RunConfig& cfg, const ode::Solution& sol, std::size_t k);

}  // namespace costate::io
