#include "costate/ode/snapshot_store.hpp"

#include <hdf5.h>

#include <filesystem>

#include "costate/core/error.hpp"

namespace costate::ode {

struct SnapshotStore::Disk {
  hid_t file = -1;
  std::vector<bool> created;
  ~Disk() {
    if (file >= 0) H5Fclose(file);
  }
};

SnapshotStore::SnapshotStore(std::size_t state_size, std::size_t disk_slots, std::string path)
    : n_(state_size), disk_slots_(disk_slots), path_(std::move(path)) {
  COSTATE_CHECK(disk_slots_ == 0 || !path_.empty(),
                "checkpointing: disk snapshots need a file path (checkpointing.path)");
}

SnapshotStore::~SnapshotStore() {
  const bool had_file = disk_ && disk_->file >= 0;
  disk_.reset();
  if (had_file) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
}

void SnapshotStore::save(std::size_t slot, std::span<const double> state) {
  COSTATE_CHECK_EQ(state.size(), n_, "SnapshotStore::save: wrong state size");
  if (slot >= disk_slots_) {
    const std::size_t k = slot - disk_slots_;
    if (ram_.size() < (k + 1) * n_) ram_.resize((k + 1) * n_);
    std::copy(state.begin(), state.end(), ram_.begin() + static_cast<std::ptrdiff_t>(k * n_));
    return;
  }
  if (!disk_) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    disk_ = std::make_unique<Disk>();
    disk_->file = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    COSTATE_CHECK(disk_->file >= 0,
                  "checkpointing: cannot create the disk checkpoint file '" << path_ << "'");
    disk_->created.assign(disk_slots_, false);
  }
  const std::string name = "slot_" + std::to_string(slot);
  hid_t ds;
  if (!disk_->created[slot]) {
    const hsize_t dims = n_;
    const hid_t space = H5Screate_simple(1, &dims, nullptr);
    ds = H5Dcreate2(disk_->file, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                    H5P_DEFAULT);
    H5Sclose(space);
    disk_->created[slot] = true;
  } else {
    ds = H5Dopen2(disk_->file, name.c_str(), H5P_DEFAULT);
  }
  COSTATE_CHECK(ds >= 0, "checkpointing: cannot write snapshot " << slot << " to '" << path_ << "'");
  const herr_t rc = H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, state.data());
  H5Dclose(ds);
  COSTATE_CHECK(rc >= 0, "checkpointing: writing snapshot " << slot << " to '" << path_ << "' failed");
  ++disk_writes_;
}

void SnapshotStore::load(std::size_t slot, std::span<double> state) const {
  COSTATE_CHECK_EQ(state.size(), n_, "SnapshotStore::load: wrong state size");
  if (slot >= disk_slots_) {
    const std::size_t k = slot - disk_slots_;
    COSTATE_CHECK((k + 1) * n_ <= ram_.size(), "SnapshotStore::load: slot " << slot << " was never saved");
    std::copy(ram_.begin() + static_cast<std::ptrdiff_t>(k * n_),
              ram_.begin() + static_cast<std::ptrdiff_t>((k + 1) * n_), state.begin());
    return;
  }
  COSTATE_CHECK(disk_ && disk_->created[slot], "SnapshotStore::load: slot " << slot << " was never saved");
  const std::string name = "slot_" + std::to_string(slot);
  const hid_t ds = H5Dopen2(disk_->file, name.c_str(), H5P_DEFAULT);
  COSTATE_CHECK(ds >= 0, "checkpointing: cannot read snapshot " << slot << " from '" << path_ << "'");
  const herr_t rc = H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, state.data());
  H5Dclose(ds);
  COSTATE_CHECK(rc >= 0, "checkpointing: reading snapshot " << slot << " from '" << path_ << "' failed");
  ++disk_reads_;
}

}  // namespace costate::ode
