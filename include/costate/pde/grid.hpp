#pragma once
/// \file
/// pde::Grid — a structured, cell-centred grid in 1, 2 or 3 dimensions,
/// distributed over MPI by a PETSc DMDA, with `dof` unknowns per cell.
///
/// Geometry: cell (i, j, k) has centre x_i = a_x + (i + ½) h_x, h_x =
/// (b_x − a_x)/n_x (likewise y, z). Boundaries per dimension:
///   - Periodic: ghost cells wrap around (the DMDA's exchange fills them);
///   - Dirichlet (value g on the boundary face): the ghost mirrored across
///     the face is u_{−1−m} = 2g − u_m;
///   - Neumann (zero flux): u_{−1−m} = u_m.
/// The outer (non-periodic) ghosts are filled by that affine rule in
/// templated code (fill_boundary), so forward-mode AD differentiates it.
///
/// Ghost exchange. G: owned entries of all ranks → this rank's ghosted local
/// array (owned cells, plus copies of the neighbours' cells within the
/// stencil width; outer boundary ghosts set to 0). Its adjoint Gᵀ adds every
/// local entry back to the global entry it copies (PETSc's local-to-global
/// scatter with ADD_VALUES; outer boundary ghosts are dropped):
///     ⟨G x, y⟩_local arrays = ⟨x, Gᵀ y⟩_global.
/// global_to_local applies G, local_to_global_add does g += Gᵀ l.
///
/// Storage. Global (owned) vectors are costate::Vector<double, Host> with
/// the grid's communicator; local (ghosted) arrays are Kokkos Views. PETSc
/// works on these buffers in place (VecPlaceArray): nothing is copied, and
/// the View of the local array is the array PETSc fills. Layout: component
/// fastest, then x, then y, then z (PETSc's DMDA order), i.e. a LayoutRight
/// View (z, y, x, c).
///
/// Collective: construction, the exchanges and gather() are collective over
/// the grid's communicator. Limitations: 32-bit PETSc indices; host memory
/// (Kokkos host execution space); one DMDA per Grid (dof and stencil width
/// fixed at construction); uniform spacing.

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/tensor/vector.hpp"

namespace costate::pde {

using Host = Kokkos::DefaultHostExecutionSpace;
/// A distributed global vector: this rank's owned entries.
using GlobalVector = Vector<double, Host>;
/// A flat ghosted local array (owned + ghost cells, all components).
using LocalArray = Kokkos::View<double*, Kokkos::HostSpace>;
/// The same array seen as (z, y, x, component), without copying.
template <class T>
using LocalView4 = Kokkos::View<T****, Kokkos::LayoutRight, Kokkos::HostSpace,
                                Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

enum class Boundary { Periodic, Dirichlet, Neumann };
std::string to_string(Boundary b);
/// "periodic" | "dirichlet" | "neumann"; an error lists the valid names.
Boundary boundary_from_string(std::string_view name);

/// What a grid is; every field is checked by validate().
struct GridSpec {
  int dim = 2;                                        ///< 1, 2 or 3
  std::array<std::int64_t, 3> cells{16, 16, 1};       ///< n_x, n_y, n_z (unused dims: 1)
  std::array<std::array<double, 2>, 3> extent{{{0.0, 1.0}, {0.0, 1.0}, {0.0, 1.0}}};
  std::array<Boundary, 3> boundary{Boundary::Periodic, Boundary::Periodic, Boundary::Periodic};
  double dirichlet_value = 0.0;  ///< g of Dirichlet boundaries (all components)
  int dof = 1;                   ///< unknowns per cell
  int stencil_width = 1;         ///< ghost layers (from the model)
  /// Star stencils (axis neighbours only) preallocate fewer matrix entries.
  bool star_stencil = true;
  /// Processes per dimension (0: chosen by costate); their product must be
  /// the communicator's size.
  std::array<int, 3> processes{0, 0, 0};

  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const;
};

/// The index box this rank owns or holds (ghosted), in global cell indices.
struct Box {
  std::array<std::int64_t, 3> start{0, 0, 0};
  std::array<std::int64_t, 3> count{1, 1, 1};
  std::int64_t cells() const { return count[0] * count[1] * count[2]; }
};

class Grid {
 public:
  /// Builds the DMDA. Collective over `comm`. Throws costate::Error — on
  /// every rank, before any PETSc call that could hang — when the spec is
  /// invalid, when a dimension has fewer cells than the stencil needs
  /// (2·width + 1 when periodic, width otherwise), or when a
  /// rank would own fewer cells along a dimension than the stencil width
  /// (too many ranks for the grid).
  Grid(MPI_Comm comm, const GridSpec& spec);
  ~Grid();
  Grid(Grid&&) noexcept;
  Grid& operator=(Grid&&) noexcept;

  const GridSpec& spec() const { return spec_; }
  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int dim() const { return spec_.dim; }
  int dof() const { return spec_.dof; }
  int stencil_width() const { return spec_.stencil_width; }
  std::int64_t cells(int d) const { return spec_.cells[static_cast<std::size_t>(d)]; }
  double spacing(int d) const { return h_[static_cast<std::size_t>(d)]; }
  /// Centre coordinate of global cell index i along dimension d.
  double coordinate(int d, std::int64_t i) const {
    return spec_.extent[static_cast<std::size_t>(d)][0] +
           (static_cast<double>(i) + 0.5) * h_[static_cast<std::size_t>(d)];
  }
  bool periodic(int d) const { return spec_.boundary[static_cast<std::size_t>(d)] == Boundary::Periodic; }
  std::array<int, 3> processes() const { return procs_; }

  /// Cells this rank owns, and the cells of its ghosted local array (owned +
  /// ghosts, including outer boundary ghosts; periodic ghosts keep their
  /// unwrapped index, e.g. −1).
  const Box& owned() const { return owned_; }
  const Box& ghosted() const { return ghosted_; }
  std::size_t owned_size() const { return static_cast<std::size_t>(owned_.cells() * spec_.dof); }
  std::size_t ghosted_size() const {
    return static_cast<std::size_t>(ghosted_.cells() * spec_.dof);
  }
  std::int64_t global_size() const {
    return spec_.cells[0] * spec_.cells[1] * spec_.cells[2] * spec_.dof;
  }

  /// A zeroed global vector (owned entries) / ghosted local array.
  GlobalVector create_global(const std::string& label = "pde::global") const;
  LocalArray create_local(const std::string& label = "pde::local") const;
  /// The local array as a (z, y, x, component) View — the same memory.
  template <class T>
  LocalView4<T> view(const Kokkos::View<T*, Kokkos::HostSpace>& local) const {
    COSTATE_CHECK_EQ(local.extent(0), ghosted_size(), "pde::Grid::view: not a local array of this grid");
    return LocalView4<T>(local.data(), ghosted_.count[2], ghosted_.count[1], ghosted_.count[0],
                         spec_.dof);
  }

  /// local = G global (owned cells and neighbour ghosts; outer boundary
  /// ghosts zeroed). Collective.
  void global_to_local(const GlobalVector& global, const LocalArray& local) const;
  /// global += Gᵀ local (ghost contributions added to their owners; outer
  /// boundary ghosts ignored). Collective.
  void local_to_global_add(const LocalArray& local, const GlobalVector& global) const;

  /// The whole field on every rank, in natural order (component fastest,
  /// then x, y, z). For tests and output. Collective; O(global size) memory.
  std::vector<double> gather(const GlobalVector& global) const;
  /// Sets the owned entries from a whole field in natural order (every rank
  /// passes the same field).
  void scatter(std::span<const double> natural, const GlobalVector& global) const;

  /// Position in the local array of (component c, global cell i, j, k), for
  /// cells inside the ghosted box.
  std::int64_t local_index(int c, std::int64_t i, std::int64_t j, std::int64_t k) const {
    return (((k - ghosted_.start[2]) * ghosted_.count[1] + (j - ghosted_.start[1])) *
                ghosted_.count[0] +
            (i - ghosted_.start[0])) *
               spec_.dof +
           c;
  }

  /// Opaque PETSc DM (a `DM`), for solvers/ only.
  void* petsc_dm() const;

 private:
  struct Impl;
  GridSpec spec_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::array<double, 3> h_{1.0, 1.0, 1.0};
  std::array<int, 3> procs_{1, 1, 1};
  Box owned_, ghosted_;
  std::unique_ptr<Impl> impl_;
};

/// Fills the outer (non-periodic) ghost cells of a ghosted local View by
/// the boundary rule of each dimension: Dirichlet u_{−1−m} = 2g − u_m,
/// Neumann u_{−1−m} = u_m (and mirrored at the far end). With
/// `as_parameter` every non-periodic boundary reflects evenly (parameter
/// fields such as a conductivity have no Dirichlet value). Works for any
/// scalar T (AD types differentiate the rule). Local, not collective.
template <class T>
void fill_boundary(const Grid& grid, const LocalView4<T>& u, bool as_parameter = false) {
  const Box& g = grid.ghosted();
  const int dof = grid.dof();
  const double value = grid.spec().dirichlet_value;
  for (int d = 0; d < grid.dim(); ++d) {
    if (grid.periodic(d)) continue;
    const bool dirichlet = !as_parameter && grid.spec().boundary[static_cast<std::size_t>(d)] ==
                                                Boundary::Dirichlet;
    const std::int64_t n = grid.cells(d);
    const auto D = static_cast<std::size_t>(d);
    // The two ghost slabs along d (all cells of the other axes, so corners
    // get a consistent value after the earlier axes were filled).
    const std::int64_t slabs[2][2] = {{g.start[D], 0},
                                      {n, g.start[D] + g.count[D]}};
    for (const auto& slab : slabs) {
      std::array<std::int64_t, 3> lo{g.start[0], g.start[1], g.start[2]};
      std::array<std::int64_t, 3> hi{g.start[0] + g.count[0], g.start[1] + g.count[1],
                                     g.start[2] + g.count[2]};
      lo[D] = slab[0];
      hi[D] = slab[1];
      for (std::int64_t K = lo[2]; K < hi[2]; ++K)
        for (std::int64_t J = lo[1]; J < hi[1]; ++J)
          for (std::int64_t I = lo[0]; I < hi[0]; ++I) {
            std::array<std::int64_t, 3> src{I, J, K};
            const std::int64_t m = src[D];
            src[D] = m < 0 ? -1 - m : 2 * n - 1 - m;
            const std::int64_t kk = K - g.start[2], jj = J - g.start[1], ii = I - g.start[0];
            const std::int64_t sk = src[2] - g.start[2], sj = src[1] - g.start[1],
                               si = src[0] - g.start[0];
            for (int c = 0; c < dof; ++c) {
              const T& inner = u(sk, sj, si, c);
              u(kk, jj, ii, c) = dirichlet ? T(2.0 * value - inner) : inner;
            }
          }
    }
  }
}

}  // namespace costate::pde
