#include "costate/io/resources.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <variant>

#include "costate/core/error.hpp"
#include "petsc/petsc_runtime.hpp"

namespace costate::io {
namespace {

std::string grid_text(const PdeConfig& cfg) {
  std::string s = "[";
  for (int d = 0; d < cfg.equations.dim; ++d)
    s += (d ? ", " : "") + std::to_string(cfg.domain.cells[static_cast<std::size_t>(d)]);
  return s + "]";
}

/// cells × fields without overflow (each factor ≤ 10⁸, so a double is exact
/// enough to compare with 2⁶³).
double unknowns_of(const PdeConfig& cfg) {
  double n = static_cast<double>(cfg.equations.fields.size());
  for (int d = 0; d < cfg.equations.dim; ++d)
    n *= static_cast<double>(cfg.domain.cells[static_cast<std::size_t>(d)]);
  return n;
}

double nonzeros_of(const PdeConfig& cfg) {
  return unknowns_of(cfg) * (2.0 * cfg.equations.dim + 1.0) *
         static_cast<double>(cfg.equations.fields.size());
}

}  // namespace

std::int64_t petsc_max_index() { return detail::petsc_max_index(); }

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::int64_t>(pages) * page;
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") return kb * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 6) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

std::string PdeResourceEstimate::breakdown() const {
  std::string s = "state vectors " + format_bytes(vector_bytes) + " + Jacobian " +
                  format_bytes(jacobian_bytes);
  if (snapshot_bytes > 0.0) s += " + checkpoint snapshots " + format_bytes(snapshot_bytes);
  return s + " = " + format_bytes(total_bytes());
}

PdeResourceEstimate estimate_pde_resources(const PdeConfig& cfg, bool adjoint) {
  // Vectors of the θ-step (state, right-hand side, stage, residual, adjoint
  // and work vectors) and GMRES' restart basis (PETSc's default restart 30).
  constexpr double kStepVectors = 8.0;
  constexpr double kGmresBasis = 30.0;
  constexpr double kBytesPerNonzero = 8.0 + 4.0;  // value + 32-bit column index
  const double n = unknowns_of(cfg);
  PdeResourceEstimate e;
  e.unknowns = static_cast<std::int64_t>(std::min(n, 9.0e18));
  e.jacobian_nonzeros = static_cast<std::int64_t>(std::min(nonzeros_of(cfg), 9.0e18));
  const bool gmres = cfg.integrator.ksp.ksp_type == "gmres";
  e.vector_bytes = (kStepVectors + (gmres ? kGmresBasis : 0.0)) * n * 8.0;
  e.jacobian_bytes = nonzeros_of(cfg) * kBytesPerNonzero;
  if (adjoint) {
    double frames = static_cast<double>(cfg.integrator.steps) + 1.0;  // store_all
    if (const auto* b = std::get_if<ode::Binomial>(&cfg.checkpointing))
      frames = std::min(frames, static_cast<double>(b->snapshots));
    e.snapshot_bytes = frames * n * 8.0;
  }
  return e;
}

void check_pde_index_range(const PdeConfig& cfg, const std::string& where) {
  const double max_index = static_cast<double>(petsc_max_index());
  const double n = unknowns_of(cfg);
  const std::size_t fields = cfg.equations.fields.size();
  std::ostringstream os;
  os.precision(16);
  if (n > max_index) {
    os << where << ": pde.grid.n = " << grid_text(cfg) << ": "
       << n / static_cast<double>(fields) << " cells × " << fields
       << (fields == 1 ? " field" : " fields") << " = " << n
       << " unknowns exceed PETSc's index range (PetscInt max " << petsc_max_index()
       << "); use fewer cells, or a PETSc configured --with-64-bit-indices";
    throw Error(os.str());
  }
}

void check_pde_resources(const PdeConfig& cfg, bool adjoint, int ranks, std::int64_t memory_bytes) {
  ranks = std::max(ranks, 1);
  const std::size_t fields = cfg.equations.fields.size();
  // Each process's part of the Jacobian is indexed by PetscInt.
  const double nnz = nonzeros_of(cfg) / ranks;
  if (nnz > static_cast<double>(petsc_max_index())) {
    std::ostringstream os;
    os.precision(16);
    os << cfg.input_path << ": pde.grid.n = " << grid_text(cfg) << ": the Jacobian's "
       << nonzeros_of(cfg) << " nonzeros (" << unknowns_of(cfg) << " unknowns × "
       << (2 * cfg.equations.dim + 1) << " stencil points × " << fields << " fields), " << nnz
       << " per process on " << ranks << (ranks == 1 ? " process" : " processes")
       << ", exceed PETSc's index range (PetscInt max " << petsc_max_index()
       << "); use fewer cells or more processes";
    throw Error(os.str());
  }
  if (memory_bytes < 0) memory_bytes = physical_memory_bytes();
  if (memory_bytes <= 0) return;  // unknown: nothing to compare with
  const PdeResourceEstimate e = estimate_pde_resources(cfg, adjoint);
  const double per_rank = e.total_bytes() / ranks;
  if (per_rank <= static_cast<double>(memory_bytes)) return;
  std::ostringstream os;
  os << cfg.input_path << ": pde.grid.n = " << grid_text(cfg) << " (" << e.unknowns
     << " unknowns) needs an estimated " << e.breakdown();
  if (ranks > 1) os << ", " << format_bytes(per_rank) << " per process on " << ranks << " processes";
  os << ", more than this machine's " << format_bytes(static_cast<double>(memory_bytes))
     << " of memory; use fewer cells";
  if (adjoint && e.snapshot_bytes > e.vector_bytes)
    os << ", fewer checkpoint snapshots (sensitivity.checkpointing: {schedule: binomial, "
          "snapshots: N})";
  os << " or more processes";
  throw Error(os.str());
}

}  // namespace costate::io
