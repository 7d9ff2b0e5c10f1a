#pragma once
// The `status` attribute of an HDF5 output file ("complete", "partial", …),
// shared by the command-line tests that check what a run left on disk.
#include <hdf5.h>

#include <filesystem>
#include <string>

namespace costate::test {

/// The file's root `status` attribute; "" when it has none, "(unreadable)"
/// when the file cannot be opened as HDF5.
inline std::string read_status(const std::filesystem::path& path) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return "(unreadable)";
  std::string out;
  if (H5Aexists(f, "status") > 0) {
    const hid_t a = H5Aopen(f, "status", H5P_DEFAULT);
    const hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5T_CSET_UTF8);
    char* v = nullptr;
    if (H5Aread(a, mem, &v) >= 0 && v != nullptr) {
      out = v;
      H5free_memory(v);
    }
    H5Tclose(mem);
    H5Aclose(a);
  }
  H5Fclose(f);
  return out;
}

}  // namespace costate::test
