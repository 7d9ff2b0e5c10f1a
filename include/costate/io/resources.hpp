#pragma once
// Resource checks made before any work: a PDE grid whose index count
// overflows PETSc's indices, or whose estimated memory exceeds the
// machine's, is refused with an error naming the input key and the figures
// (instead of PETSc's error stack, or the kernel's OOM killer, later).

#include <cstdint>
#include <string>

#include "costate/io/pde_input.hpp"

namespace costate::io {

/// Largest index PETSc can address (PETSC_MAX_INT: 2³¹ − 1 for 32-bit
/// PetscInt).
std::int64_t petsc_max_index();

/// Physical memory of this machine in bytes (sysconf; /proc/meminfo
/// MemTotal when sysconf cannot tell); 0 when unknown.
std::int64_t physical_memory_bytes();

/// A lower bound on what a PDE run needs, per piece. With N = cells × fields
/// unknowns and s = 2·dim + 1 stencil points:
///   vectors   (8 + 30 when the KSP is GMRES: its restart basis) · N · 8 B
///   Jacobian  N · s · fields nonzeros · 12 B (value + 32-bit column)
///   snapshots (sensitivity) store_all: (steps + 1) · N · 8 B;
///             binomial: snapshots · N · 8 B
struct PdeResourceEstimate {
  std::int64_t unknowns = 0;
  std::int64_t jacobian_nonzeros = 0;
  double vector_bytes = 0.0;
  double jacobian_bytes = 0.0;
  double snapshot_bytes = 0.0;
  double total_bytes() const { return vector_bytes + jacobian_bytes + snapshot_bytes; }
  /// "state vectors 1.2 GB + Jacobian 3.4 GB + snapshots 5.6 GB = 10.2 GB"
  std::string breakdown() const;
};

/// The estimate for `cfg`; `adjoint` adds the checkpoint snapshots.
PdeResourceEstimate estimate_pde_resources(const PdeConfig& cfg, bool adjoint);

/// Throws costate::Error, at `where` (file:line:column of pde.grid.n, or
/// the --set override), when cells × fields (the grid's global index
/// count) exceeds petsc_max_index(). Called by load_pde_config.
void check_pde_index_range(const PdeConfig& cfg, const std::string& where);

/// Throws costate::Error naming the figures when, spread evenly over
/// `ranks` processes, one process would hold more Jacobian nonzeros than
/// petsc_max_index(), or need more than this machine's physical memory
/// (`memory_bytes`; physical_memory_bytes() when < 0). `adjoint`: the run
/// keeps checkpoint snapshots (sensitivity, gradcheck).
void check_pde_resources(const PdeConfig& cfg, bool adjoint, int ranks,
                         std::int64_t memory_bytes = -1);

/// "1.5 GB", "512 MB", "3 kB" (decimal units).
std::string format_bytes(double bytes);

}  // namespace costate::io
