#pragma once
/// \file
/// pde::Objective — a terminal objective J(u(T)) of a distributed field and
/// its gradient ∂J/∂u, with distributed reductions:
///   - integral(c):  J = Σ_cells V u_c                (V = Π h_d, cell volume)
///   - probe(cell,c): J = u_c(cell)                    (owned by one rank)
///   - misfit(d):    J = ½ Σ_cells V Σ_c (u_c − d_c)²  (d a field like u)
///   - sensors(B):   J = ½ Σ_i ((B u)_i − d_i)² / σ_i²  (point sensors,
///                   pde::Observations: sparse interpolation, one owner each)
/// hessian_vector gives (∂²J/∂u²) v for the second-order adjoint.
/// Sums are per-rank partials in a fixed (cell) order added in rank order
/// (tensor/reduce.hpp): the same bits on every run with the same ranks.
/// Collective over the grid's communicator.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/observations.hpp"
#include "costate/tensor/reduce.hpp"

namespace costate::pde {

struct Objective {
  enum class Kind { Integral, Probe, Misfit, Sensors };
  Kind kind = Kind::Integral;
  int component = 0;
  std::array<std::int64_t, 3> cell{0, 0, 0};  ///< probe: global cell index
  GlobalVector data;                          ///< misfit: the data field (owned entries)
  std::shared_ptr<const Observations> observations;  ///< sensors (shared, immutable)

  static Objective integral(int component = 0) { return {Kind::Integral, component, {0, 0, 0}, {}, {}}; }
  static Objective probe(std::array<std::int64_t, 3> cell, int component = 0) {
    return {Kind::Probe, component, cell, {}, {}};
  }
  static Objective misfit(GlobalVector data) { return {Kind::Misfit, 0, {0, 0, 0}, std::move(data), {}}; }
  /// The sensor misfit of `b` (on the state grid J is evaluated on).
  static Objective sensors(std::shared_ptr<const Observations> b) {
    COSTATE_CHECK(b != nullptr, "pde::Objective::sensors: no observations");
    return {Kind::Sensors, 0, {0, 0, 0}, {}, std::move(b)};
  }

  /// J(u); when `gradient` is non-null it receives ∂J/∂u (owned entries,
  /// overwritten). Collective. Throws costate::Error on a component or
  /// probe cell outside the grid, or data of another size.
  double evaluate(const Grid& grid, const GlobalVector& u, const GlobalVector* gradient) const {
    const int dof = grid.dof();
    if (kind == Kind::Sensors) {
      COSTATE_CHECK(&observations->grid() == &grid, "pde::Objective::sensors: observations of another grid");
      return observations->misfit(u, gradient);
    }
    COSTATE_CHECK(component >= 0 && component < dof,
                  "pde::Objective::component = " << component << " is outside [0, " << dof << ")");
    COSTATE_CHECK_EQ(u.size(), grid.owned_size(), "pde::Objective: state of another grid");
    double volume = 1.0;
    for (int d = 0; d < grid.dim(); ++d) volume *= grid.spacing(d);
    if (gradient) fill(*gradient, 0.0);
    const Box& o = grid.owned();
    double local = 0.0;
    if (kind == Kind::Probe) {
      for (int d = 0; d < 3; ++d)
        COSTATE_CHECK(cell[static_cast<std::size_t>(d)] >= 0 &&
                          cell[static_cast<std::size_t>(d)] < grid.cells(d),
                      "pde::Objective::probe: cell index " << cell[static_cast<std::size_t>(d)]
                                                            << " along axis " << d
                                                            << " is outside [0, " << grid.cells(d)
                                                            << ")");
      bool mine = true;
      std::int64_t at = 0, stride = 1;
      for (int d = 0; d < 3; ++d) {
        const std::int64_t rel = cell[static_cast<std::size_t>(d)] - o.start[static_cast<std::size_t>(d)];
        mine = mine && rel >= 0 && rel < o.count[static_cast<std::size_t>(d)];
        at += rel * stride;
        stride *= o.count[static_cast<std::size_t>(d)];
      }
      if (mine) {
        const std::size_t e = static_cast<std::size_t>(at * dof + component);
        local = u[e];
        if (gradient) (*gradient)[e] = 1.0;
      }
      return global_sum(grid.comm(), local);  // x + 0 + … + 0 = x exactly
    }
    if (kind == Kind::Misfit)
      COSTATE_CHECK_EQ(data.size(), u.size(), "pde::Objective::misfit: data field of another size");
    const std::size_t n = u.size();
    for (std::size_t e = 0; e < n; ++e) {
      if (kind == Kind::Integral) {
        if (static_cast<int>(e % static_cast<std::size_t>(dof)) != component) continue;
        local += volume * u[e];
        if (gradient) (*gradient)[e] = volume;
      } else {
        const double r = u[e] - data[e];
        local += 0.5 * volume * r * r;
        if (gradient) (*gradient)[e] = volume * r;
      }
    }
    return global_sum(grid.comm(), local);
  }

  /// out = (∂²J/∂u²) v: V v for a misfit, Bᵀ Σ⁻² B v for sensors (collective:
  /// a ghost exchange), 0 for the integral and the probe (linear in u).
  /// Otherwise local; `out` is overwritten.
  void hessian_vector(const Grid& grid, const GlobalVector& v, const GlobalVector& out) const {
    if (kind == Kind::Sensors) {
      observations->hessian_vector(v, out);
      return;
    }
    COSTATE_CHECK_EQ(v.size(), grid.owned_size(), "pde::Objective::hessian_vector: direction of another grid");
    if (kind != Kind::Misfit) {
      fill(out, 0.0);
      return;
    }
    double volume = 1.0;
    for (int d = 0; d < grid.dim(); ++d) volume *= grid.spacing(d);
    scale(out, volume, v);
  }
};

}  // namespace costate::pde
