#pragma once
/// \file
/// pde::Observations — point sensors of a distributed field at the end of
/// a run, as a sparse observation operator B, and the data misfit
///     Φ(u) = ½ Σ_i ((B u)_i − d_i)² / σ_i²,
///     ∂Φ/∂u = Bᵀ Σ⁻² (B u − d),      ∂²Φ/∂u² v = Bᵀ Σ⁻² B v,
/// which pde::Objective::sensors() makes a terminal objective of
/// pde::ThetaIntegrator (gradient, tangent, Hessian–vector products).
///
/// B: multilinear interpolation between the cell centres around the
/// sensor (2^dim cells; bilinear in 2-D). Along a non-periodic axis a
/// sensor between the boundary and the first (or last) centre takes that
/// centre's value along the axis (constant extrapolation over the half
/// cell); along a periodic axis the interpolation wraps around. Each sensor
/// is owned by the one rank whose cells contain its position (a position
/// on a face between two ranks belongs to the upper cell); its stencil
/// reaches at most one cell beyond that rank's box, i.e. the ghost layer.
///
/// Sensor files (read_sensors): CSV with a header naming the columns, in
/// this order: the coordinates (`x`, `x,y` or `x,y,z`), `t`, `value` and
/// optionally `sigma` (the noise standard deviation of that row; without
/// the column every row takes the caller's default σ). Blank lines and
/// lines starting with `#` are skipped. Every error names file:line:column.
///
/// Limitation: all sensor times must be the end of the run t0 + steps·dt
/// (the θ integrator's objectives are terminal); earlier times are refused
/// by name. Full-field data at the end of the run: pde::Objective::misfit.
///
/// Collective over the grid's communicator: construction (it checks the
/// sensors on every rank, so a bad file throws on every rank), misfit(),
/// hessian_vector(), predictions().

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costate/pde/grid.hpp"

namespace costate::pde {

/// One row of a sensor file.
struct Sensor {
  std::array<double, 3> position{0.0, 0.0, 0.0};
  double time = 0.0;
  double value = 0.0;
  double sigma = 0.0;  ///< noise standard deviation (> 0)
  std::string where;   ///< "file:line" of the row (for error messages)
};

/// Reads a sensor CSV for a `dim`-dimensional grid (file comment).
/// `default_sigma` is used when the file has no `sigma` column (it must
/// then be > 0). Throws costate::Error naming file:line:column on a
/// missing file, a wrong header, a non-numeric or non-finite entry, a
/// missing or extra column, σ ≤ 0, or no rows at all.
std::vector<Sensor> read_sensors(const std::string& path, int dim, double default_sigma = 0.0);

class Observations {
 public:
  /// B for `sensors` on component `component` of `grid` (which must
  /// outlive this object; stencil width ≥ 1). `t0`, `t_end`: the run.
  /// Throws costate::Error, on every rank, naming the sensor's row for a
  /// position outside the grid's extent, a time outside [t0, t_end], a
  /// time before t_end (unsupported, see the file comment), σ ≤ 0 or a
  /// component outside the grid's dof. Collective.
  Observations(const Grid& grid, std::vector<Sensor> sensors, double t0, double t_end, int component = 0);
  ~Observations();
  Observations(const Observations&) = delete;
  Observations& operator=(const Observations&) = delete;

  /// Φ(u); when `gradient` is non-null it receives ∂Φ/∂u (owned entries,
  /// overwritten). Collective (one ghost exchange, one more for the
  /// gradient).
  double misfit(const GlobalVector& u, const GlobalVector* gradient) const;
  /// out = Bᵀ Σ⁻² B v. Collective; `out` is overwritten.
  void hessian_vector(const GlobalVector& v, const GlobalVector& out) const;
  /// B u for every sensor in file order, on every rank. Collective.
  std::vector<double> predictions(const GlobalVector& u) const;

  const std::vector<Sensor>& sensors() const { return sensors_; }
  std::size_t size() const { return sensors_.size(); }
  /// Sensors this rank owns.
  std::size_t owned() const { return local_.size(); }
  const Grid& grid() const { return *grid_; }

 private:
  struct Local {
    std::size_t index = 0;                  ///< row in sensors_
    int terms = 0;                          ///< 2^dim
    std::array<std::int64_t, 8> at{};       ///< local (ghosted) array positions
    std::array<double, 8> weight{};
    double value = 0.0, inv_variance = 0.0;
  };
  double apply(const LocalArray& ul, const Local& s) const;

  const Grid* grid_;
  std::vector<Sensor> sensors_;
  std::vector<Local> local_;
  LocalArray ul_, gl_;  // work arrays (not thread-safe)
};

}  // namespace costate::pde
