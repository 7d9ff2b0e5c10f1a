#pragma once
/// \file
/// pde::SharedDiskSnapshots — the disk level of Multilevel checkpoints of a
/// distributed state in ONE parallel HDF5 file (MPI-IO), instead of one
/// file per rank: slot k is the dataset /slot_<k> of the global length
/// Σ_r n_r (n_r = rank r's owned entries), rank r's entries at offset
/// Σ_{s<r} n_s, written and read with collective hyperslab transfers. The
/// file is created at the first save and removed (by rank 0) when the store
/// is destroyed.
///
/// Collective: construction, save and load, on every rank with the same
/// slot. A failure (an unwritable path) throws costate::Error on every
/// rank. Limitations: float64; slots are overwritten in place.

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace costate::pde {

class SharedDiskSnapshots {
 public:
  SharedDiskSnapshots(MPI_Comm comm, std::size_t owned_size, std::string path);
  ~SharedDiskSnapshots();
  SharedDiskSnapshots(const SharedDiskSnapshots&) = delete;
  SharedDiskSnapshots& operator=(const SharedDiskSnapshots&) = delete;

  void save(std::size_t slot, std::span<const double> owned);
  void load(std::size_t slot, std::span<double> owned);

  std::int64_t writes() const { return writes_; }
  std::int64_t reads() const { return reads_; }
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  MPI_Comm comm_;
  std::size_t owned_;
  std::string path_;
  std::int64_t writes_ = 0, reads_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace costate::pde
