// `costate-petsc`: the command-line driver linked with the whole library,
// PETSc included (CMakeLists.txt). The front `costate` hands it the commands
// that need PETSc (commands.hpp: hand_over_to_petsc).
#include "commands.hpp"

namespace costate::cli {
bool is_front() { return false; }
}  // namespace costate::cli
