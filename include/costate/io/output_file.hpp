#pragma once
/// \file
/// io::write_output_file — the one way costate writes a result file, so that
/// no run ever destroys a file:
///
///  1. the target is checked (check_output_path): not an input of the run,
///     not a directory, a device, a FIFO or a socket. A symbolic link is
///     followed: the file it points to is replaced and the link is kept (a
///     dangling link is refused);
///  2. the data go to `TARGET.partial` in the target's own directory (so the
///     final rename never crosses file systems), which this process holds
///     under an exclusive lock for the whole write: a second costate writing
///     the same target is refused with a message naming it;
///  3. the temporary file is flushed and fsynced, then renamed over the
///     target (atomic on POSIX), and the directory is fsynced;
///  4. any failure (disk full, a quota, an I/O error, a rename refused)
///     removes the temporary file, leaves a previous target untouched and
///     throws costate::Error with the operating system's reason.
///
/// Not collective: call it on the one rank that writes.

#include <functional>
#include <string>
#include <vector>

namespace costate::io {

/// Throws costate::Error (naming `path` and what it is) when `path` cannot
/// be an output: an existing directory, device, FIFO or socket, a dangling
/// symbolic link, a missing directory, or the same file as one of `inputs`
/// (compared by device and inode, so another spelling or a link is caught).
/// Empty strings in `inputs` are ignored.
void check_output_path(const std::string& path, const std::vector<std::string>& inputs = {});

/// Writes `path` through `write(temporary_path)` (which creates and fills the
/// temporary file by name, e.g. with HDF5 or an ofstream) as described above.
void write_output_file(const std::string& path,
                       const std::function<void(const std::string& temporary_path)>& write,
                       const std::vector<std::string>& inputs = {});

/// The format an output name asks for, by its extension (case-insensitive).
enum class OutputFormat { Hdf5, Csv, Tsv };

/// The format of `path` for `command` ("run", "sensitivity", ...): .csv and
/// .tsv are tables (when `tables_allowed`, else refused); a name ending in
/// another text or image extension (.json, .txt, .yaml, .yml, .dat, .png,
/// .pdf, .svg) is refused by name — it would otherwise hold HDF5 under a
/// misleading name; every other name is HDF5.
OutputFormat output_format(const std::string& path, const std::string& command,
                           bool tables_allowed);

/// The provenance lines of a table costate writes (.csv, .tsv), each
/// starting with '#' and ending with '\n':
///
///     # costate <version>
///     # command: <command, as the HDF5 files' attribute 'command'>
///     # settings: <settings_yaml on one line: YAML flow style>
///
/// `settings_yaml` is what the HDF5 writer stores in /settings (e.g.
/// RunConfig::to_yaml(), noise models included); the one-line form loads as
/// the same YAML (Python: yaml.safe_load of the text after "# settings: ").
/// A table puts them right after its header line (docs/cli.md: so that
/// numpy.loadtxt(..., skiprows=1) and genfromtxt(..., names=True) read it).
std::string table_provenance(const std::string& command, const std::string& settings_yaml);

}  // namespace costate::io
