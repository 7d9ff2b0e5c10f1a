#pragma once
/// \file
/// The pieces a pointwise stencil model is written with — pde::Point (where
/// the model is evaluated) and pde::Stencil (its view of a field around that
/// cell) — and the stencil colouring that compresses the Jacobian.
///
/// A model is a struct with compile-time facts and ONE residual templated on
/// the scalar types (see models.hpp for Heat2D and GrayScott2D):
///
///     struct MyModel {
///       static constexpr int dim = 2;                // 1, 2 or 3
///       static constexpr int components = 1;         // unknowns per cell
///       static constexpr int stencil_width = 1;      // ghost layers read
///       static constexpr bool star = true;           // axis neighbours only
///       static constexpr int field_parameters = 1;   // per-cell parameters (κ)
///       static constexpr int scalar_parameters = 1;  // global scalars (q)
///       static constexpr bool linear_in_state = true;// f = J u + b, J indep. of t, u
///       static constexpr bool autonomous = true;     // f does not depend on t
///       template <class T, class U, class A>
///       KOKKOS_INLINE_FUNCTION void rhs(const Point& p, const Stencil<U>& u,
///           const Stencil<A>& a, const T* q, T* dudt) const;
///     };
///
/// u(c, di, dj, dk) is component c of the state at cell (i+di, j+dj, k+dk);
/// a(f, di, ...) likewise for the parameter fields; q the scalar
/// parameters; dudt[c] the output. U, A and T are double or ad::Dual (T is
/// the common type): the same code gives the right-hand side, the coloured
/// Jacobian and the parameter vector–Jacobian products.
///
/// Colouring. Cells whose indices differ by at least 2s + 1 (s the stencil
/// width) along some axis never meet in one stencil, so colouring each axis
/// by i mod (2s + 1) and combining axes and components gives a valid
/// distance-2 colouring of the stencil Jacobian: dof · Π_d (2s + 1) colours
/// (9 for a 2-D scalar field with s = 1). A periodic axis with n mod (2s+1)
/// = r ≠ 0 gives the last r cells colours of their own (2s + 1 + r per
/// axis), so wrap-around neighbours never share a colour. The colour of a
/// cell depends only on its global index: every rank agrees.
/// Star stencils of width 1 use fewer: the stencil has 2·dim + 1 cells and
/// c = (i + 2j + 3k) mod (2·dim + 1) gives two cells within one stencil (or
/// two stencils' overlap) different colours — 5 colours in 2-D instead of 9
/// — provided every periodic axis has a multiple of 2·dim + 1 cells (else
/// the per-axis colouring above is used).

#include <Kokkos_Core.hpp>

#include <array>
#include <cstdint>

namespace costate::pde {

/// Where a model is evaluated: global cell index, cell centre, spacing, time.
struct Point {
  std::int64_t i = 0, j = 0, k = 0;
  double x = 0.0, y = 0.0, z = 0.0;
  double hx = 1.0, hy = 1.0, hz = 1.0;
  double t = 0.0;
};

/// A field around one cell of a ghosted local array (no copy, no bounds
/// check: offsets must lie within the stencil width).
template <class S>
struct Stencil {
  const S* centre = nullptr;  ///< component 0 of the centre cell
  std::int64_t sx = 1, sy = 0, sz = 0;
  KOKKOS_INLINE_FUNCTION const S& operator()(int c, int di = 0, int dj = 0, int dk = 0) const {
    return centre[c + di * sx + dj * sy + dk * sz];
  }
};

/// Colour of each index along one axis (see the file comment).
struct AxisColouring {
  std::int64_t n = 1, period = 1, wrap_start = 1;  // cells ≥ wrap_start get own colours
  std::int64_t colours = 1;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t i) const {
    if (i < 0) i += n;
    if (i >= n) i -= n;
    return i >= wrap_start ? period + (i - wrap_start) : i % period;
  }
  static AxisColouring make(std::int64_t n, int width, bool periodic) {
    AxisColouring a;
    a.n = n;
    a.period = 2 * width + 1;
    if (a.period > n) a.period = n;
    const std::int64_t r = periodic ? n % a.period : 0;
    a.wrap_start = n - r;
    a.colours = a.period + r;
    return a;
  }
};

/// The colouring of a grid's cells (per component: colour · dof + c).
struct StencilColouring {
  bool linear = false;   ///< (i + 2j + 3k) mod m  (star, width 1)
  std::int64_t m = 1;
  AxisColouring axis[3];
  std::int64_t colours = 1;  ///< per component
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t i, std::int64_t j, std::int64_t k) const {
    if (linear) return (((i + 2 * j + 3 * k) % m) + m) % m;
    return axis[0](i) + axis[0].colours * (axis[1](j) + axis[1].colours * axis[2](k));
  }
  /// Colour of the cell at offset (di, dj, dk) from a cell of colour
  /// `centre` — no division in linear mode (the kernels' inner loop).
  KOKKOS_INLINE_FUNCTION std::int64_t neighbour(std::int64_t centre, std::int64_t i, std::int64_t j,
                                                std::int64_t k, int di, int dj, int dk) const {
    if (!linear) return (*this)(i + di, j + dj, k + dk);
    std::int64_t c = centre + di + 2 * dj + 3 * dk;  // |shift| ≤ 3 < m
    if (c >= m) c -= m;
    if (c < 0) c += m;
    return c;
  }
  /// `cells`, `periodic` per axis (unused axes: 1 cell, periodic).
  static StencilColouring make(int dim, int width, bool star, const std::int64_t cells[3],
                               const bool periodic[3]) {
    StencilColouring c;
    for (int d = 0; d < 3; ++d) c.axis[d] = AxisColouring::make(cells[d], width, periodic[d]);
    c.colours = c.axis[0].colours * c.axis[1].colours * c.axis[2].colours;
    if (star && width == 1) {
      const std::int64_t m = 2 * dim + 1;
      bool ok = true;
      for (int d = 0; d < dim; ++d) ok = ok && (!periodic[d] || cells[d] % m == 0);
      if (ok && m < c.colours) {
        c.linear = true;
        c.m = m;
        c.colours = m;
      }
    }
    return c;
  }
};

/// Tangents per Dual pass of a model: its colour count for a star stencil of
/// width 1 or a box (periodic axes with leftover cells take more passes).
template <class Model>
constexpr int default_batch() {
  int box = 1;
  for (int d = 0; d < Model::dim; ++d) box *= 2 * Model::stencil_width + 1;
  const int per = (Model::star && Model::stencil_width == 1) ? 2 * Model::dim + 1 : box;
  const int all = per * Model::components;
  return all <= 16 ? all : per;
}

}  // namespace costate::pde
