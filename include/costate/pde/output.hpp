#pragma once
/// \file
/// pde::FieldWriter — fields of a pde::Grid in parallel HDF5 (MPI-IO) with
/// an XDMF 3 sidecar that ParaView (and VisIt) open as a time series.
///
/// File layout (PATH.h5):
///   /frames/NNNNNN/<component>  (n_z, n_y, n_x) float64   frame N of the state
///   /frames/NNNNNN              group, attribute "time"
///   /time                       (frames)                  the frame times (finish())
///   /fields/<name>/<component>  (n_z, n_y, n_x)           static fields (κ, dJ/dκ, …)
///   /arrays/<name>              (n)                       replicated values (scalars,
///                                                         a gradient wrt scalars)
///   root attributes: status ("partial" until finish(), then "complete"),
///     format = "costate-fields-1", dim, cells (n_x, n_y, n_z), origin and
///     spacing (x, y, z), components (the state's component names), frames.
/// Every field dataset is three-dimensional in natural (z, y, x) order —
/// x fastest, unused dimensions of length 1 — one dataset per component:
/// exactly the layout XDMF's 3DCoRectMesh cell attributes expect.
///
/// Sidecar (PATH with its extension replaced by .xmf, e.g. out.h5 → out.xmf,
/// next to it; written by finish()): one XDMF 3 Domain with a temporal
/// collection of uniform grids, one per frame, each a 3DCoRectMesh
/// (ORIGIN_DXDYDZ; node dimensions n + 1 per axis; dimensions, origin and
/// spacing all in (z, y, x) order — what ParaView 5.11's XDMFReader,
/// Xdmf3ReaderS and Xdmf3ReaderT read, checked by scripts/check-paraview.py
/// against known cell-centre values) carrying the frame's
/// components as cell-centred scalar attributes plus every static field
/// (so ParaView shows κ next to u at every time). Without frames the Domain
/// holds one uniform grid with the static fields. Attribute names: the
/// component name for frames; for static fields the field name when it has
/// one component, else "<name>_<component>". Dataset references are
/// relative ("out.h5:/frames/000000/u"), so the pair can be moved together.
///
/// Writes: each rank writes its owned box of cells as a hyperslab, one
/// collective MPI-IO transfer per component; the file is flushed after
/// every frame, so an interrupted run leaves a readable file whose status
/// says "partial". A file is complete only after finish().
///
/// Collective: every call, on every rank of the grid's communicator, in the
/// same order with the same names. Errors (an unwritable path, a vector of
/// the wrong size on any rank, a field on a grid of another geometry, a
/// duplicate or malformed name, replicated values that differ between
/// ranks, a call after finish()) throw costate::Error on EVERY rank before
/// any collective HDF5 call that could hang. Limitations: float64 only;
/// one writer per file; HDF5 built with MPI-IO (libhdf5-openmpi-dev) —
/// with a serial HDF5 the writer works on one rank only.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/pde/grid.hpp"

namespace costate::pde {

class FieldWriter {
 public:
  /// Creates (truncates) `path_h5` and marks it partial. `component_names`
  /// names the state's dof components (one per grid.dof(), non-empty,
  /// unique, no '/'). The grid must outlive the writer. Collective.
  FieldWriter(const Grid& grid, std::string path_h5, std::vector<std::string> component_names);
  /// Closes the file (collective); without finish() it stays "partial".
  ~FieldWriter();
  FieldWriter(const FieldWriter&) = delete;
  FieldWriter& operator=(const FieldWriter&) = delete;

  /// Appends a frame of the state at time t: `u` holds this rank's owned
  /// entries of the writer's grid, dof interleaved (as a GlobalVector of
  /// the grid). Collective.
  void write_frame(double t, const GlobalVector& u);
  /// Writes a static field: `v` on `grid` — any grid with the writer's
  /// cells, extent and decomposition (e.g. an Operator's field grid), with
  /// components.size() == grid.dof(). Collective.
  void write_field(const std::string& name, const Grid& grid, const GlobalVector& v,
                   const std::vector<std::string>& components);
  /// Writes replicated values (every rank passes the same values; checked).
  /// Collective.
  void write_array(const std::string& name, std::span<const double> values);
  /// The same with a name for each entry (`entry_names.size()` ==
  /// `values.size()`, replicated), as the dataset's attribute `names` — what
  /// an ODE file's /state and /parameters carry. Collective.
  void write_array(const std::string& name, std::span<const double> values,
                   const std::vector<std::string>& entry_names);
  /// Sets a string attribute on the file's root (replicated: every rank
  /// passes the same value), e.g. a calibration's fit_status. Collective.
  void write_attribute(const std::string& name, const std::string& value);
  /// The root attributes every costate file carries: costate_version, the
  /// command that wrote the file and its fully resolved settings (YAML).
  /// Collective.
  void write_provenance(const std::string& command, const std::string& settings);
  /// Writes /time and the XDMF sidecar, sets status = `status` ("complete";
  /// a calibration not at an optimum passes "partial": what the file
  /// claims does not hold) and closes the file. Further writes throw.
  /// Collective.
  void finish(const std::string& status = "complete");

  const std::string& path() const { return path_; }
  /// The sidecar's path (PATH with .xmf in place of its extension).
  const std::string& xdmf_path() const { return xdmf_path_; }
  std::size_t frames() const { return times_.size(); }
  bool finished() const { return finished_; }

 private:
  struct Impl;
  const Grid* grid_;
  std::string path_, xdmf_path_;
  std::vector<std::string> components_;
  std::vector<double> times_;
  struct StaticField {
    std::string name;
    std::vector<std::string> components;
  };
  std::vector<StaticField> fields_;
  std::vector<std::string> arrays_;
  bool finished_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace costate::pde
