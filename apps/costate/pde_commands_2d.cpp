// The 2-D instantiations of the PDE command driver (pde_drive.hpp): every
// pde::EquationModel<2, …>, compiled apart so the three dimensions build
// in parallel.
#include "pde_drive.hpp"

namespace costate::cli::detail {
template int drive_dim<2>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                           const std::shared_ptr<const pde::EquationSystem>&);
}  // namespace costate::cli::detail
