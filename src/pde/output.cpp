// pde::FieldWriter: parallel HDF5 (MPI-IO) field output with an XDMF 3
// sidecar (include/costate/pde/output.hpp).
#include "costate/pde/output.hpp"

#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "costate/config.hpp"
#include "costate/core/error.hpp"

namespace costate::pde {
namespace {

/// Throws on every rank when any rank's check failed (a collective check:
/// every rank calls it with its own verdict, so no rank is left waiting in
/// a later collective HDF5 call).
void check_all(MPI_Comm comm, bool ok, const std::string& message) {
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, comm);
  if (!ok) throw Error(message);
  if (any)
    throw Error("pde::FieldWriter: another rank reported an error (see its message); this rank's "
                "arguments were fine");
}

/// Owns one HDF5 identifier.
class Id {
 public:
  Id() = default;
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  bool valid() const { return id_ >= 0; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

/// An HDF5 failure after the collective argument checks (a full disk, a
/// broken file system): reported on this rank; the other ranks see the
/// same failure in the same collective call.
void h5(herr_t status, const std::string& path, const std::string& what) {
  if (status < 0) throw Error("pde::FieldWriter: '" + path + "': HDF5 could not " + what);
}
Id h5id(hid_t id, herr_t (*close)(hid_t), const std::string& path, const std::string& what) {
  if (id < 0) throw Error("pde::FieldWriter: '" + path + "': HDF5 could not " + what);
  return Id(id, close);
}

std::string frame_group(std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06zu", n);
  return buf;
}

/// Empty, no '/', no '.'-only names, printable (they also become XML).
bool valid_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s)
    if (c == '/' || c == '<' || c == '>' || c == '&' || c == '"' || c == '\'' ||
        static_cast<unsigned char>(c) < 0x20)
      return false;
  return true;
}

std::string xml_number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

struct FieldWriter::Impl {
  Id file, dxpl, string_type;
  hsize_t dims[3] = {1, 1, 1};  // (n_z, n_y, n_x)

  void write_string_attribute(hid_t loc, const char* name, const std::string& value,
                              const std::string& path) {
    if (H5Aexists(loc, name) > 0) h5(H5Adelete(loc, name), path, std::string("replace attribute ") + name);
    Id space = h5id(H5Screate(H5S_SCALAR), H5Sclose, path, "create a scalar dataspace");
    Id a = h5id(H5Acreate2(loc, name, string_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path,
                std::string("create attribute ") + name);
    const char* p = value.c_str();
    h5(H5Awrite(a, string_type, &p), path, std::string("write attribute ") + name);
  }
  void write_strings_attribute(hid_t loc, const char* name, const std::vector<std::string>& values,
                               const std::string& path) {
    const hsize_t n = values.size();
    Id space = h5id(H5Screate_simple(1, &n, nullptr), H5Sclose, path, "create a dataspace");
    Id a = h5id(H5Acreate2(loc, name, string_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path,
                std::string("create attribute ") + name);
    std::vector<const char*> p;
    for (const auto& v : values) p.push_back(v.c_str());
    h5(H5Awrite(a, string_type, p.data()), path, std::string("write attribute ") + name);
  }
  template <class T>
  void write_numbers_attribute(hid_t loc, const char* name, const std::vector<T>& values,
                               const std::string& path) {
    const hsize_t n = values.size();
    Id space = n == 1 ? h5id(H5Screate(H5S_SCALAR), H5Sclose, path, "create a dataspace")
                      : h5id(H5Screate_simple(1, &n, nullptr), H5Sclose, path, "create a dataspace");
    const bool fp = std::is_floating_point_v<T>;
    if (H5Aexists(loc, name) > 0) h5(H5Adelete(loc, name), path, std::string("replace attribute ") + name);
    Id a = h5id(H5Acreate2(loc, name, fp ? H5T_IEEE_F64LE : H5T_STD_I64LE, space, H5P_DEFAULT,
                           H5P_DEFAULT),
                H5Aclose, path, std::string("create attribute ") + name);
    h5(H5Awrite(a, fp ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64, values.data()), path,
       std::string("write attribute ") + name);
  }

  /// One dataset (n_z, n_y, n_x) per component of `v` (owned entries of
  /// `grid`, dof interleaved) under group `loc`, each rank writing its
  /// owned box in one collective transfer.
  void write_components(hid_t loc, const Grid& grid, const GlobalVector& v,
                        const std::vector<std::string>& names, const std::string& path) {
    const Box& o = grid.owned();
    const hsize_t start[3] = {static_cast<hsize_t>(o.start[2]), static_cast<hsize_t>(o.start[1]),
                              static_cast<hsize_t>(o.start[0])};
    const hsize_t count[3] = {static_cast<hsize_t>(o.count[2]), static_cast<hsize_t>(o.count[1]),
                              static_cast<hsize_t>(o.count[0])};
    const std::size_t cells = static_cast<std::size_t>(o.cells());
    const std::size_t dof = static_cast<std::size_t>(grid.dof());
    std::vector<double> buffer(cells);
    Id dcpl = h5id(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, path, "create a property list");
    // Every cell is written: no fill pass over the file.
    h5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), path, "set the fill time");
    for (std::size_t c = 0; c < names.size(); ++c) {
      for (std::size_t e = 0; e < cells; ++e) buffer[e] = v[e * dof + c];
      Id fspace = h5id(H5Screate_simple(3, dims, nullptr), H5Sclose, path, "create a dataspace");
      Id ds = h5id(H5Dcreate2(loc, names[c].c_str(), H5T_IEEE_F64LE, fspace, H5P_DEFAULT, dcpl,
                              H5P_DEFAULT),
                   H5Dclose, path, "create dataset " + names[c]);
      h5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr), path,
         "select this rank's box");
      Id mspace = h5id(H5Screate_simple(3, count, nullptr), H5Sclose, path, "create a dataspace");
      h5(H5Dwrite(ds, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, buffer.data()), path,
         "write dataset " + names[c]);
    }
  }

  /// A 1-D dataset written by rank 0 (the others select nothing) in one
  /// collective transfer.
  void write_replicated(hid_t loc, const std::string& name, std::span<const double> values, int rank,
                        const std::string& path) {
    const hsize_t n = values.size();
    Id fspace = h5id(H5Screate_simple(1, &n, nullptr), H5Sclose, path, "create a dataspace");
    Id ds = h5id(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F64LE, fspace, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT),
                 H5Dclose, path, "create dataset " + name);
    if (n == 0) return;
    Id mspace = h5id(H5Screate_simple(1, &n, nullptr), H5Sclose, path, "create a dataspace");
    if (rank != 0) {
      h5(H5Sselect_none(fspace), path, "select nothing");
      h5(H5Sselect_none(mspace), path, "select nothing");
    }
    const double dummy = 0.0;
    h5(H5Dwrite(ds, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, n ? values.data() : &dummy), path,
       "write dataset " + name);
  }
};

FieldWriter::FieldWriter(const Grid& grid, std::string path_h5,
                         std::vector<std::string> component_names)
    : grid_(&grid), path_(std::move(path_h5)), components_(std::move(component_names)),
      impl_(std::make_unique<Impl>()) {
  const MPI_Comm comm = grid.comm();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures come back as costate::Error
  {
    std::ostringstream why;
    bool ok = true;
    if (path_.empty()) {
      ok = false;
      why << "pde::FieldWriter: empty output path; pass a file name such as 'fields.h5'";
    } else if (components_.size() != static_cast<std::size_t>(grid.dof())) {
      ok = false;
      why << "pde::FieldWriter('" << path_ << "'): " << components_.size()
          << " component names for a grid with dof = " << grid.dof() << "; pass one name per component";
    } else {
      for (std::size_t c = 0; c < components_.size() && ok; ++c) {
        if (!valid_name(components_[c])) {
          ok = false;
          why << "pde::FieldWriter('" << path_ << "'): component name '" << components_[c]
              << "' is invalid: names must be non-empty, without '/', quotes, '<', '>', '&'";
        }
        for (std::size_t d = 0; d < c && ok; ++d)
          if (components_[d] == components_[c]) {
            ok = false;
            why << "pde::FieldWriter('" << path_ << "'): component name '" << components_[c]
                << "' appears twice; names must be unique";
          }
      }
    }
    check_all(comm, ok, why.str());
  }
  // The sidecar: PATH with its extension replaced by .xmf.
  {
    std::filesystem::path p(path_);
    p.replace_extension(".xmf");
    xdmf_path_ = p.string();
    if (xdmf_path_ == path_) xdmf_path_ += ".xmf";
  }
  Impl& im = *impl_;
  im.dims[0] = static_cast<hsize_t>(grid.cells(2));
  im.dims[1] = static_cast<hsize_t>(grid.cells(1));
  im.dims[2] = static_cast<hsize_t>(grid.cells(0));
  {
    Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    bool ok = fapl.valid();
#ifdef H5_HAVE_PARALLEL
    ok = ok && H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0;
#else
    ok = ok && grid.size() == 1;
#endif
    hid_t f = -1;
    // H5Fcreate is collective: every rank calls it, failures included.
    if (fapl.valid()) f = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    ok = ok && f >= 0;
    if (f >= 0) im.file = Id(f, H5Fclose);
    int bad = ok ? 0 : 1, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, comm);
    if (any) {
      im.file.reset();
      throw Error("pde::FieldWriter: cannot create '" + path_ +
                  "' (HDF5 with MPI-IO could not open it for writing" +
#ifdef H5_HAVE_PARALLEL
                  std::string("") +
#else
                  std::string("; this HDF5 is serial and writes on one rank only") +
#endif
                  "): check that the directory exists and is writable");
    }
  }
  im.dxpl = h5id(H5Pcreate(H5P_DATASET_XFER), H5Pclose, path_, "create a transfer property list");
#ifdef H5_HAVE_PARALLEL
  h5(H5Pset_dxpl_mpio(im.dxpl, H5FD_MPIO_COLLECTIVE), path_, "request collective transfers");
#endif
  im.string_type = h5id(H5Tcopy(H5T_C_S1), H5Tclose, path_, "create a string type");
  h5(H5Tset_size(im.string_type, H5T_VARIABLE), path_, "set the string size");
  h5(H5Tset_cset(im.string_type, H5T_CSET_UTF8), path_, "set the string character set");

  const hid_t f = im.file;
  im.write_string_attribute(f, "status", "partial", path_);
  im.write_string_attribute(f, "format", "costate-fields-1", path_);
  im.write_numbers_attribute<std::int64_t>(f, "dim", {grid.dim()}, path_);
  im.write_numbers_attribute<std::int64_t>(f, "cells", {grid.cells(0), grid.cells(1), grid.cells(2)},
                                           path_);
  const auto& ext = grid.spec().extent;
  im.write_numbers_attribute<double>(f, "origin", {ext[0][0], ext[1][0], ext[2][0]}, path_);
  im.write_numbers_attribute<double>(f, "spacing", {grid.spacing(0), grid.spacing(1), grid.spacing(2)},
                                     path_);
  im.write_strings_attribute(f, "components", components_, path_);
  im.write_numbers_attribute<std::int64_t>(f, "frames", {0}, path_);
  for (const char* group : {"frames", "fields", "arrays"})
    h5id(H5Gcreate2(f, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, path_,
         std::string("create group /") + group);
  h5(H5Fflush(f, H5F_SCOPE_GLOBAL), path_, "flush the file");
}

FieldWriter::~FieldWriter() = default;  // closes the file (collective) if finish() did not

void FieldWriter::write_frame(double t, const GlobalVector& u) {
  const Grid& g = *grid_;
  {
    std::ostringstream why;
    bool ok = true;
    if (finished_) {
      ok = false;
      why << "pde::FieldWriter('" << path_ << "')::write_frame: the file is finished; no more writes";
    } else if (u.size() != g.owned_size()) {
      ok = false;
      why << "pde::FieldWriter('" << path_ << "')::write_frame: the state has " << u.size()
          << " entries on rank " << g.rank() << ", the grid owns " << g.owned_size()
          << " there; pass a GlobalVector of the writer's grid";
    } else if (!std::isfinite(t)) {
      ok = false;
      why << "pde::FieldWriter('" << path_ << "')::write_frame: time t = " << detail::format_value(t)
          << " is not finite";
    }
    check_all(g.comm(), ok, why.str());
  }
  Impl& im = *impl_;
  const std::string name = "frames/" + frame_group(times_.size());
  Id grp = h5id(H5Gcreate2(im.file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                path_, "create group /" + name);
  im.write_numbers_attribute<double>(grp, "time", {t}, path_);
  im.write_components(grp, g, u, components_, path_);
  times_.push_back(t);
  im.write_numbers_attribute<std::int64_t>(im.file, "frames", {static_cast<std::int64_t>(times_.size())},
                                           path_);
  h5(H5Fflush(im.file, H5F_SCOPE_GLOBAL), path_, "flush the file");
}

void FieldWriter::write_field(const std::string& name, const Grid& grid, const GlobalVector& v,
                              const std::vector<std::string>& components) {
  const Grid& g = *grid_;
  {
    std::ostringstream why;
    bool ok = true;
    const std::string where = "pde::FieldWriter('" + path_ + "')::write_field('" + name + "'): ";
    bool same_geometry = grid.dim() == g.dim();
    for (int d = 0; d < 3; ++d) {
      same_geometry = same_geometry && grid.cells(d) == g.cells(d);
      const auto D = static_cast<std::size_t>(d);
      same_geometry = same_geometry && grid.spec().extent[D] == g.spec().extent[D];
    }
    int same_comm = MPI_UNEQUAL;
    MPI_Comm_compare(grid.comm(), g.comm(), &same_comm);
    bool duplicate = false;
    for (const auto& f : fields_) duplicate = duplicate || f.name == name;
    if (finished_) {
      ok = false;
      why << where << "the file is finished; no more writes";
    } else if (!valid_name(name)) {
      ok = false;
      why << where << "invalid field name: names must be non-empty, without '/', quotes, '<', '>', '&'";
    } else if (duplicate) {
      ok = false;
      why << where << "a field of this name was already written";
    } else if (same_comm != MPI_IDENT && same_comm != MPI_CONGRUENT) {
      ok = false;
      why << where << "the field's grid lives on another communicator than the writer's";
    } else if (!same_geometry) {
      ok = false;
      why << where << "the field's grid (" << grid.cells(0) << " x " << grid.cells(1) << " x "
          << grid.cells(2) << " cells) differs from the writer's (" << g.cells(0) << " x "
          << g.cells(1) << " x " << g.cells(2)
          << " cells) or has another extent; fields share the writer's mesh";
    } else if (components.size() != static_cast<std::size_t>(grid.dof())) {
      ok = false;
      why << where << components.size() << " component names for a grid with dof = " << grid.dof();
    } else if (v.size() != grid.owned_size()) {
      ok = false;
      why << where << "the field has " << v.size() << " entries on rank " << grid.rank()
          << ", its grid owns " << grid.owned_size() << " there";
    } else {
      for (std::size_t c = 0; c < components.size() && ok; ++c) {
        if (!valid_name(components[c])) {
          ok = false;
          why << where << "component name '" << components[c] << "' is invalid";
        }
        for (std::size_t d = 0; d < c && ok; ++d)
          if (components[d] == components[c]) {
            ok = false;
            why << where << "component name '" << components[c] << "' appears twice";
          }
      }
    }
    check_all(g.comm(), ok, why.str());
  }
  Impl& im = *impl_;
  const std::string group = "fields/" + name;
  Id grp = h5id(H5Gcreate2(im.file, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                path_, "create group /" + group);
  im.write_components(grp, grid, v, components, path_);
  fields_.push_back({name, components});
  h5(H5Fflush(im.file, H5F_SCOPE_GLOBAL), path_, "flush the file");
}

void FieldWriter::write_array(const std::string& name, std::span<const double> values) {
  const Grid& g = *grid_;
  const MPI_Comm comm = g.comm();
  const std::string where = "pde::FieldWriter('" + path_ + "')::write_array('" + name + "'): ";
  {
    std::ostringstream why;
    bool ok = true;
    bool duplicate = false;
    for (const auto& a : arrays_) duplicate = duplicate || a == name;
    if (finished_) {
      ok = false;
      why << where << "the file is finished; no more writes";
    } else if (!valid_name(name)) {
      ok = false;
      why << where << "invalid array name: names must be non-empty, without '/', quotes, '<', '>', '&'";
    } else if (duplicate) {
      ok = false;
      why << where << "an array of this name was already written";
    }
    check_all(comm, ok, why.str());
  }
  // Replicated: every rank must hold rank 0's values, bit for bit.
  {
    std::int64_t n = static_cast<std::int64_t>(values.size()), n0 = n;
    MPI_Bcast(&n0, 1, MPI_INT64_T, 0, comm);
    std::vector<double> ref(values.begin(), values.end());
    bool same_size = n == n0;
    int all_same_size = 0, mine = same_size ? 1 : 0;
    MPI_Allreduce(&mine, &all_same_size, 1, MPI_INT, MPI_LAND, comm);
    if (all_same_size) {
      MPI_Bcast(ref.data(), static_cast<int>(n0), MPI_DOUBLE, 0, comm);
      const bool same = n0 == 0 || std::memcmp(ref.data(), values.data(), values.size() * sizeof(double)) == 0;
      std::ostringstream why;
      why << where << "rank " << g.rank()
          << " passed values that differ from rank 0's; arrays are replicated: pass the same values on "
             "every rank";
      check_all(comm, same, why.str());
    } else {
      std::ostringstream why;
      why << where << "rank " << g.rank() << " passed " << n << " values, rank 0 passed " << n0
          << "; arrays are replicated: pass the same values on every rank";
      check_all(comm, same_size, why.str());
    }
  }
  Impl& im = *impl_;
  Id grp = h5id(H5Gopen2(im.file, "arrays", H5P_DEFAULT), H5Gclose, path_, "open group /arrays");
  im.write_replicated(grp, name, values, g.rank(), path_);
  arrays_.push_back(name);
}

void FieldWriter::write_array(const std::string& name, std::span<const double> values,
                              const std::vector<std::string>& entry_names) {
  check_all(grid_->comm(), entry_names.size() == values.size(),
            "pde::FieldWriter('" + path_ + "')::write_array('" + name + "'): " +
                std::to_string(entry_names.size()) + " names for " + std::to_string(values.size()) +
                " values; pass one name per entry");
  write_array(name, values);
  Impl& im = *impl_;
  Id ds = h5id(H5Dopen2(im.file, ("arrays/" + name).c_str(), H5P_DEFAULT), H5Dclose, path_,
               "open dataset /arrays/" + name);
  im.write_strings_attribute(ds, "names", entry_names, path_);
}

void FieldWriter::write_attribute(const std::string& name, const std::string& value) {
  check_all(grid_->comm(), !finished_,
            "pde::FieldWriter('" + path_ + "')::write_attribute: the file is already finished");
  impl_->write_string_attribute(impl_->file, name.c_str(), value, path_);
}

void FieldWriter::write_provenance(const std::string& command, const std::string& settings) {
  write_attribute("costate_version", COSTATE_VERSION_STRING);
  write_attribute("command", command);
  write_attribute("settings", settings);
}

void FieldWriter::finish(const std::string& status) {
  const Grid& g = *grid_;
  check_all(g.comm(), !finished_,
            "pde::FieldWriter('" + path_ + "')::finish: the file is already finished");
  Impl& im = *impl_;
  im.write_replicated(im.file, "time", times_, g.rank(), path_);
  // The sidecar first, then the status: a "complete" file always has one.
  std::string xdmf_error;
  if (g.rank() == 0) {
    const std::string h5name = std::filesystem::path(path_).filename().string();
    const std::string dims = std::to_string(im.dims[0]) + " " + std::to_string(im.dims[1]) + " " +
                             std::to_string(im.dims[2]);
    const std::string nodes = std::to_string(im.dims[0] + 1) + " " + std::to_string(im.dims[1] + 1) +
                              " " + std::to_string(im.dims[2] + 1);
    const auto& ext = g.spec().extent;
    // XDMF orders CoRectMesh origin and spacing like the dimensions: z, y, x.
    const std::string origin = xml_number(ext[2][0]) + " " + xml_number(ext[1][0]) + " " +
                               xml_number(ext[0][0]);
    const std::string spacing = xml_number(g.spacing(2)) + " " + xml_number(g.spacing(1)) + " " +
                                xml_number(g.spacing(0));
    std::ostringstream x;
    const auto attribute = [&](const std::string& attr_name, const std::string& dataset) {
      x << "        <Attribute Name=\"" << attr_name << "\" AttributeType=\"Scalar\" Center=\"Cell\">\n"
        << "          <DataItem Dimensions=\"" << dims
        << "\" NumberType=\"Float\" Precision=\"8\" Format=\"HDF\">" << h5name << ":" << dataset
        << "</DataItem>\n"
        << "        </Attribute>\n";
    };
    const auto uniform_grid = [&](const std::string& grid_name, const double* time,
                                  const std::string* frame) {
      x << "      <Grid Name=\"" << grid_name << "\" GridType=\"Uniform\">\n";
      if (time) x << "        <Time Value=\"" << xml_number(*time) << "\"/>\n";
      x << "        <Topology TopologyType=\"3DCoRectMesh\" Dimensions=\"" << nodes << "\"/>\n"
        << "        <Geometry GeometryType=\"ORIGIN_DXDYDZ\">\n"
        << "          <DataItem Name=\"Origin\" Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" "
           "Format=\"XML\">"
        << origin << "</DataItem>\n"
        << "          <DataItem Name=\"Spacing\" Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" "
           "Format=\"XML\">"
        << spacing << "</DataItem>\n"
        << "        </Geometry>\n";
      if (frame)
        for (const auto& c : components_) attribute(c, "/frames/" + *frame + "/" + c);
      for (const auto& f : fields_)
        for (const auto& c : f.components)
          attribute(f.components.size() == 1 ? f.name : f.name + "_" + c, "/fields/" + f.name + "/" + c);
      x << "      </Grid>\n";
    };
    x << "<?xml version=\"1.0\" ?>\n"
      << "<!DOCTYPE Xdmf SYSTEM \"Xdmf.dtd\" []>\n"
      << "<Xdmf Version=\"3.0\" xmlns:xi=\"http://www.w3.org/2001/XInclude\">\n"
      << "  <Domain>\n";
    if (!times_.empty()) {
      x << "    <Grid Name=\"fields\" GridType=\"Collection\" CollectionType=\"Temporal\">\n";
      for (std::size_t n = 0; n < times_.size(); ++n) {
        const std::string frame = frame_group(n);
        uniform_grid("frame_" + frame, &times_[n], &frame);
      }
      x << "    </Grid>\n";
    } else {
      uniform_grid("fields", nullptr, nullptr);
    }
    x << "  </Domain>\n</Xdmf>\n";
    std::ofstream out(xdmf_path_, std::ios::trunc);
    out << x.str();
    out.flush();
    if (!out) xdmf_error = "pde::FieldWriter: cannot write the XDMF sidecar '" + xdmf_path_ + "'";
  }
  {
    int bad = xdmf_error.empty() ? 0 : 1;
    MPI_Bcast(&bad, 1, MPI_INT, 0, g.comm());
    if (bad) {
      // Leave the .h5 partial and close it (collective) before throwing.
      finished_ = true;
      im.file.reset();
      throw Error(g.rank() == 0 ? xdmf_error
                                : "pde::FieldWriter('" + path_ +
                                      "')::finish: rank 0 could not write the XDMF sidecar '" +
                                      xdmf_path_ + "'");
    }
  }
  im.write_string_attribute(im.file, "status", status, path_);
  h5(H5Fflush(im.file, H5F_SCOPE_GLOBAL), path_, "flush the file");
  im.file.reset();  // collective close
  finished_ = true;
}

}  // namespace costate::pde
