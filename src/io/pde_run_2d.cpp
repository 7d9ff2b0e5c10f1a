// The 2-D instantiations of io::pde_run's model-dependent part
// (pde_run_model.hpp): pde::EquationModel<2, 1–4, 0 or 1, …>, without and
// with a parameter field, in one translation unit per dimension (the two
// share the model-independent code; docs/building.md); the three
// dimensions build in parallel.
#include "pde_run_model.hpp"

namespace costate::io::detail {
template COSTATE_PDE_RUN_FIELDS(2, 0);
template COSTATE_PDE_RUN_FIELDS(2, 1);
}  // namespace costate::io::detail
