// The 2-D instantiations of the PDE command driver (pde_drive.hpp) with one
// parameter field: pde::EquationModel<2, 1–4, 1, …>, compiled apart so that
// the instantiations build in parallel (pde_commands_2d.cpp: without).
#include "pde_drive.hpp"

namespace costate::cli::detail {
template int drive_fields<2, 1>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                  const std::shared_ptr<const pde::EquationSystem>&);
}  // namespace costate::cli::detail
