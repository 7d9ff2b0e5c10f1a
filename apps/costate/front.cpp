// `costate`: the command-line driver linked with libcostate alone, without
// its PETSc part (libcostate_petsc and PETSc's own dependencies cost ~23 ms of
// dynamic linking at every start). The commands that need PETSc (calibrate:
// TAO; PDE inputs: DMDA, KSP) are handed to `costate-petsc` before anything
// starts (main.cpp, hand_over_to_petsc); so the PDE calibration, whose model
// instantiations are only in costate-petsc, is never reached here.
#include <memory>

#include "commands.hpp"
#include "costate/core/error.hpp"
#include "costate/io/pde_input.hpp"
#include "pde_commands.hpp"

namespace costate::pde {
class EquationSystem;
}

namespace costate::cli {
bool is_front() { return true; }

namespace detail {
int calibrate_pde(const Environment&, const PdeArgs& args, const io::PdeConfig&,
                  const std::shared_ptr<const pde::EquationSystem>&) {
  throw Error(args.input + ": a PDE calibration runs in costate-petsc; the front `costate` hands it over "
                           "and never gets here");
}
}  // namespace detail
}  // namespace costate::cli
