// The 3-D instantiations of the PDE command driver (pde_drive.hpp) without
// parameter fields: pde::EquationModel<3, 1–4, 0, …>, compiled apart so that
// the instantiations build in parallel (pde_commands_3d_field.cpp: with one).
#include "pde_drive.hpp"

namespace costate::cli::detail {
template int drive_fields<3, 0>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                  const std::shared_ptr<const pde::EquationSystem>&);
}  // namespace costate::cli::detail
