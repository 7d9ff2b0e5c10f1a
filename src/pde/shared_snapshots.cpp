// pde::SharedDiskSnapshots: Multilevel disk checkpoints of a distributed
// state in one parallel HDF5 file (include/costate/pde/shared_snapshots.hpp).
#include "costate/pde/shared_snapshots.hpp"

#include <hdf5.h>

#include <filesystem>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::pde {
namespace {

/// Every rank learns whether any rank failed; throws on all of them.
void agree(MPI_Comm comm, bool ok, const std::string& message) {
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, comm);
  if (!ok) throw Error(message);
  if (any) throw Error(message + " (reported by another rank)");
}

}  // namespace

struct SharedDiskSnapshots::Impl {
  hid_t file = -1, dxpl = -1;
  hsize_t global = 0, offset = 0;
  std::vector<bool> created;
  ~Impl() {
    if (dxpl >= 0) H5Pclose(dxpl);
    if (file >= 0) H5Fclose(file);
  }
};

SharedDiskSnapshots::SharedDiskSnapshots(MPI_Comm comm, std::size_t owned_size, std::string path)
    : comm_(comm), owned_(owned_size), path_(std::move(path)), impl_(std::make_unique<Impl>()) {
  agree(comm_, !path_.empty(), "checkpointing: disk snapshots need a file path (checkpointing.path)");
  unsigned long long mine = owned_size, before = 0, total = 0;
  MPI_Exscan(&mine, &before, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_);
  MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_);
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  impl_->offset = rank == 0 ? 0 : before;  // MPI_Exscan leaves rank 0's result undefined
  impl_->global = total;
}

SharedDiskSnapshots::~SharedDiskSnapshots() {
  const bool had_file = impl_->file >= 0;
  impl_.reset();  // collective close
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  if (had_file && rank == 0) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
}

void SharedDiskSnapshots::save(std::size_t slot, std::span<const double> owned) {
  Impl& im = *impl_;
  agree(comm_, owned.size() == owned_, "pde::SharedDiskSnapshots::save: wrong state size");
  if (im.file < 0) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef H5_HAVE_PARALLEL
    H5Pset_fapl_mpio(fapl, comm_, MPI_INFO_NULL);
#endif
    im.file = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    bool ok = im.file >= 0;
#ifndef H5_HAVE_PARALLEL
    int size = 1;
    MPI_Comm_size(comm_, &size);
    ok = ok && size == 1;
#endif
    int bad = ok ? 0 : 1, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, comm_);
    if (any) {
      if (im.file >= 0) H5Fclose(im.file);
      im.file = -1;
      throw Error("checkpointing: cannot create the shared disk checkpoint file '" + path_ +
                  "' (parallel HDF5): check that the directory exists and is writable");
    }
    im.dxpl = H5Pcreate(H5P_DATASET_XFER);
#ifdef H5_HAVE_PARALLEL
    H5Pset_dxpl_mpio(im.dxpl, H5FD_MPIO_COLLECTIVE);
#endif
  }
  if (im.created.size() <= slot) im.created.resize(slot + 1, false);
  const std::string name = "slot_" + std::to_string(slot);
  hid_t fspace = H5Screate_simple(1, &im.global, nullptr);
  hid_t ds = im.created[slot] ? H5Dopen2(im.file, name.c_str(), H5P_DEFAULT)
                              : H5Dcreate2(im.file, name.c_str(), H5T_IEEE_F64LE, fspace, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT);
  herr_t rc = ds >= 0 ? 0 : -1;
  const hsize_t count = owned_;
  hid_t mspace = H5Screate_simple(1, &count, nullptr);
  if (rc >= 0) rc = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &im.offset, nullptr, &count, nullptr);
  if (rc >= 0) rc = H5Dwrite(ds, H5T_NATIVE_DOUBLE, mspace, fspace, im.dxpl, owned.data());
  H5Sclose(mspace);
  H5Sclose(fspace);
  if (ds >= 0) H5Dclose(ds);
  im.created[slot] = true;
  agree(comm_, rc >= 0, "checkpointing: writing snapshot " + std::to_string(slot) + " to '" + path_ + "' failed");
  ++writes_;
}

void SharedDiskSnapshots::load(std::size_t slot, std::span<double> owned) {
  Impl& im = *impl_;
  const bool known = im.file >= 0 && slot < im.created.size() && im.created[slot];
  agree(comm_, owned.size() == owned_ && known,
        "pde::SharedDiskSnapshots::load: slot " + std::to_string(slot) + " was never saved, or wrong state size");
  const std::string name = "slot_" + std::to_string(slot);
  hid_t ds = H5Dopen2(im.file, name.c_str(), H5P_DEFAULT);
  herr_t rc = ds >= 0 ? 0 : -1;
  hid_t fspace = H5Screate_simple(1, &im.global, nullptr);
  const hsize_t count = owned_;
  hid_t mspace = H5Screate_simple(1, &count, nullptr);
  if (rc >= 0) rc = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &im.offset, nullptr, &count, nullptr);
  if (rc >= 0) rc = H5Dread(ds, H5T_NATIVE_DOUBLE, mspace, fspace, im.dxpl, owned.data());
  H5Sclose(mspace);
  H5Sclose(fspace);
  if (ds >= 0) H5Dclose(ds);
  agree(comm_, rc >= 0, "checkpointing: reading snapshot " + std::to_string(slot) + " from '" + path_ + "' failed");
  ++reads_;
}

}  // namespace costate::pde
