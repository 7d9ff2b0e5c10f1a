// `costate run|sensitivity|gradcheck` on PDE inputs: the equations of the
// `pde:` section become a pde::EquationModel, stepped by the θ-method
// (pde::ThetaIntegrator, PETSc KSP) on a distributed grid; the gradient is
// the discrete adjoint with the file's checkpoint schedule.
//
// Sample runs:
//   costate run data/examples/heat2d_kappa.yaml
//   mpiexec -n 2 costate sensitivity data/examples/heat2d_kappa.yaml --json
//   costate gradcheck data/examples/burgers.yaml
#include "pde_commands.hpp"

#include "pde_drive.hpp"

namespace costate::cli {

bool is_pde_input(const std::string& path) { return io::is_pde_input(path); }

int pde_command(const Environment& env, const PdeArgs& args) {
  io::PdeConfig cfg = io::load_pde_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  const auto system = std::make_shared<const pde::EquationSystem>(cfg.equations);
  try {
    switch (system->dim()) {
      case 1: return detail::drive_dim<1>(env, args, cfg, system);
      case 2: return detail::drive_dim<2>(env, args, cfg, system);
      default: return detail::drive_dim<3>(env, args, cfg, system);
    }
  } catch (const Error& e) {
    // Grid errors (too few cells for the stencil, a process layout or rank
    // count that does not fit) come from pde::Grid: name the input key.
    const std::string msg = e.what();
    if (msg.rfind("pde::Grid", 0) == 0) throw Error(args.input + ": pde.grid: " + msg);
    throw;
  }
}

}  // namespace costate::cli
