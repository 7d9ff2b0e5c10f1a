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
ode::Solution integrate_file(const RunConfig& cfg);

}  // namespace costate::io
