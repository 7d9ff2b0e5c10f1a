// pde::Boundary's names and GridSpec::validate: the PETSc-free half of
// pde/grid.hpp (PETSC_MAX_INT is a macro of PETSc's headers; nothing of the
// PETSc library is called), compiled into libcostate so that input files
// are checked without loading PETSc (petsc/module.hpp).
#include <petscsys.h>

#include <iomanip>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/pde/grid.hpp"

namespace costate::pde {

std::string to_string(Boundary b) {
  switch (b) {
    case Boundary::Periodic: return "periodic";
    case Boundary::Dirichlet: return "dirichlet";
    case Boundary::Neumann: return "neumann";
  }
  return "unknown";
}

Boundary boundary_from_string(std::string_view name) {
  for (Boundary b : {Boundary::Periodic, Boundary::Dirichlet, Boundary::Neumann})
    if (to_string(b) == name) return b;
  throw Error("unknown pde::Boundary '" + std::string(name) +
              "'; valid values: periodic, dirichlet, neumann");
}

void GridSpec::validate() const {
  COSTATE_CHECK(dim >= 1 && dim <= 3, "pde::GridSpec::dim = " << dim << " is invalid: it must be 1, 2 or 3");
  COSTATE_CHECK(dof >= 1, "pde::GridSpec::dof = " << dof << " is invalid: it must be >= 1");
  COSTATE_CHECK(stencil_width >= 1,
                "pde::GridSpec::stencil_width = " << stencil_width << " is invalid: it must be >= 1");
  for (int d = 0; d < 3; ++d) {
    const auto D = static_cast<std::size_t>(d);
    const char axis = "xyz"[d];
    if (d >= dim) {
      COSTATE_CHECK(cells[D] == 1, "pde::GridSpec::cells[" << d << "] = " << cells[D]
                                                             << " must be 1: the grid has dim = "
                                                             << dim);
      continue;
    }
    COSTATE_CHECK(extent[D][1] > extent[D][0],
                  "pde::GridSpec::extent[" << d << "] = [" << detail::format_value(extent[D][0])
                                           << ", " << detail::format_value(extent[D][1])
                                           << "] is empty: the upper end must exceed the lower");
    const std::int64_t need = boundary[D] == Boundary::Periodic ? 2 * stencil_width + 1 : stencil_width;
    COSTATE_CHECK(cells[D] >= need,
                  "pde::GridSpec::cells[" << d << "] = " << cells[D] << " is too small for the "
                                          << to_string(boundary[D]) << " " << axis
                                          << "-boundary with stencil width " << stencil_width
                                          << ": it needs at least " << need << " cells");
    COSTATE_CHECK(cells[D] < std::int64_t{PETSC_MAX_INT},
                  "pde::GridSpec::cells[" << d << "] = " << cells[D] << " exceeds PETSc's index range");
  }
  // cells × dof must be a PetscInt too (DMDA's global size).
  double unknowns = static_cast<double>(dof);
  for (int d = 0; d < dim; ++d) unknowns *= static_cast<double>(cells[static_cast<std::size_t>(d)]);
  COSTATE_CHECK(unknowns <= static_cast<double>(PETSC_MAX_INT),
                "pde::GridSpec: cells " << cells[0] << " × " << cells[1] << " × " << cells[2]
                                        << " × dof " << dof << " = " << std::setprecision(16)
                                        << unknowns << " unknowns exceed PETSc's index range "
                                        << "(PetscInt max " << PETSC_MAX_INT << ")");
}

}  // namespace costate::pde
