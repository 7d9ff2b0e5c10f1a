#pragma once
/// \file
/// The cellwise setup of a PDE input (pde_input.hpp): its expressions
/// (parameter fields, initial fields, misfit data) evaluated at the cell
/// centres of a distributed grid, and its objective. Shared by io::pde_run
/// (pde_run.hpp) and the command line's PDE calibration.

#include <string>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/objective.hpp"

namespace costate::io {

struct PdeConfig;

/// "x", ["y", ["z"]]: the coordinates the expressions of a `dim`-D input use.
std::vector<std::string> pde_coordinates(int dim);

/// out(cell, c) = programs[c](x, [y, [z,]] parameters…, fields(cell)…) for
/// every owned cell of `grid`. `fields` (may be null) lives on a grid with
/// the same decomposition and `nfields` values per cell. A non-finite value
/// throws costate::Error naming the expression and the cell, on every rank.
/// Collective.
void evaluate_cells(const pde::Grid& grid, const std::vector<expr::Program>& programs,
                    const std::vector<double>& parameters, const pde::GlobalVector* fields, int nfields,
                    const pde::GlobalVector& out);

/// The programs of `texts` (of the names `vars`), named context.keys[i] in errors.
std::vector<expr::Program> compile_all(const std::vector<std::string>& texts, const std::vector<std::string>& vars,
                                       const std::string& context, const std::vector<std::string>& keys);

/// The objective of the input's `objective:` section on grid `g` (`vars`:
/// the names the misfit data expressions may use). Collective.
pde::Objective make_pde_objective(const PdeConfig& cfg, const pde::Grid& g, const std::vector<std::string>& vars);

}  // namespace costate::io
