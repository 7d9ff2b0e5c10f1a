#pragma once
/// \file
/// ode::SnapshotStore — where a checkpoint schedule's snapshots live: a flat
/// RAM arena, plus (for Multilevel) an HDF5 file holding the snapshots of the
/// lowest-numbered slots, which the schedules keep longest. Each disk slot is
/// a dataset /slot_<k> of the state's length, overwritten in place; the file
/// is created when the first disk snapshot is saved and removed when the
/// store is destroyed. Serial (one rank's states).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace costate::ode {

class SnapshotStore {
 public:
  /// `disk_slots` slots (0 … disk_slots − 1) go to `path`; the rest to RAM.
  SnapshotStore(std::size_t state_size, std::size_t disk_slots = 0, std::string path = {});
  ~SnapshotStore();
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  void save(std::size_t slot, std::span<const double> state);
  void load(std::size_t slot, std::span<double> state) const;

  std::int64_t disk_writes() const { return disk_writes_; }
  std::int64_t disk_reads() const { return disk_reads_; }
  const std::string& path() const { return path_; }

 private:
  struct Disk;
  std::size_t n_, disk_slots_;
  std::string path_;
  std::vector<double> ram_;
  std::unique_ptr<Disk> disk_;
  std::int64_t disk_writes_ = 0;
  mutable std::int64_t disk_reads_ = 0;
};

}  // namespace costate::ode
