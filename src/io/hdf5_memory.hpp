#pragma once
// HDF5 files built in memory and saved with checked POSIX writes: HDF5 never
// touches the disk, so a full disk or a file-size limit is an errno costate
// reports (and HDF5 is left with no half-flushed file to trip over when the
// library shuts down at exit — the crash a disk-full write used to end in).
// Private to the library (src/io's writers, src/petab/stochastic.cpp).

#include <hdf5.h>

#include <string>

namespace costate::io::detail {

/// H5Fcreate on the core (memory) driver without a backing store; `name`
/// only labels the file. Returns a negative id on failure, like H5Fcreate.
hid_t create_in_memory(const std::string& name);

/// Flushes `file` (from create_in_memory) and writes its image over `path`
/// with POSIX writes, every one checked; throws costate::Error naming
/// `path` and the system's reason. Does not close `file`.
void save_image(hid_t file, const std::string& path);

}  // namespace costate::io::detail
