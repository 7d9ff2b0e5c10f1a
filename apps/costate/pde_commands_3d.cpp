// The 3-D instantiations of the PDE command driver (pde_drive.hpp):
// pde::EquationModel<3, 1–4, 0 or 1, …>, without and with a parameter field,
// in one translation unit per dimension (the two share the driver's
// model-independent code: measured 33.2 CPU s together against 37.5 apart,
// docs/building.md); the three dimensions build in parallel.
#include "pde_drive.hpp"

namespace costate::cli::detail {
template int drive_fields<3, 0>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                  const std::shared_ptr<const pde::EquationSystem>&);
template int drive_fields<3, 1>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                  const std::shared_ptr<const pde::EquationSystem>&);
}  // namespace costate::cli::detail
