#pragma once
// The HDF5 pieces the PEtab outputs share (calibrate.cpp, output.cpp):
// handles that close themselves, double datasets and newline-joined id
// attributes, each failure a costate::Error naming the file and the object.
#include <hdf5.h>

#include <algorithm>
#include <string>
#include <vector>

#include "costate/config.hpp"
#include "costate/core/error.hpp"

namespace costate::petab::detail {

struct H5 {
  hid_t id;
  herr_t (*close)(hid_t);
  H5(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~H5() {
    if (id >= 0) close(id);
  }
  H5(const H5&) = delete;
  H5& operator=(const H5&) = delete;
};

/// Dataset `name` in `group` (called `where` in messages): a vector (cols
/// = 0) or a rows × cols row-major matrix.
inline void write_doubles(hid_t group, const std::string& where, const char* name,
                          const std::vector<double>& v, hsize_t rows, hsize_t cols,
                          const std::string& path) {
  const hsize_t dims[2] = {rows, cols};
  H5 space(H5Screate_simple(cols > 0 ? 2 : 1, dims, nullptr), H5Sclose);
  H5 set(H5Dcreate2(group, name, H5T_NATIVE_DOUBLE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
         H5Dclose);
  COSTATE_CHECK(set.id >= 0, path << ": cannot create dataset " << where << "/" << name);
  if (!v.empty())
    COSTATE_CHECK(H5Dwrite(set.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
                  path << ": cannot write dataset " << where << "/" << name);
}

/// String attribute `name` of `object`.
inline void write_text(hid_t object, const std::string& where, const char* name,
                       const std::string& text, const std::string& path) {
  H5 type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id, std::max<std::size_t>(1, text.size()));
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  H5 attr(H5Acreate2(object, name, type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  COSTATE_CHECK(attr.id >= 0 && H5Awrite(attr.id, type.id, text.c_str()) >= 0,
                path << ": cannot write attribute " << where << "/" << name);
}

/// The root attributes every costate file carries: costate_version, and
/// command and settings when given.
inline void write_provenance(hid_t file, const std::string& command, const std::string& settings,
                             const std::string& path) {
  write_text(file, "", "costate_version", COSTATE_VERSION_STRING, path);
  if (!command.empty()) write_text(file, "", "command", command, path);
  if (!settings.empty()) write_text(file, "", "settings", settings, path);
}

/// String attribute `name` of `object`: the ids, one per line.
inline void write_ids(hid_t object, const std::string& where, const char* name,
                      const std::vector<std::string>& ids, const std::string& path) {
  std::string text;
  for (const auto& id : ids) text += id + "\n";
  write_text(object, where, name, text, path);
}

}  // namespace costate::petab::detail
