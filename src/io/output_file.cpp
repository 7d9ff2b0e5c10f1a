#include "costate/io/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "costate/config.hpp"
#include "costate/core/error.hpp"

namespace costate::io {
namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

/// The file a write to `path` replaces: `path` itself, or the end of its
/// chain of symbolic links. Refuses a dangling link.
std::string resolve_target(const std::string& path) {
  struct stat ls{};
  if (::lstat(path.c_str(), &ls) != 0 || !S_ISLNK(ls.st_mode)) return path;
  std::error_code ec;
  const fs::path target = fs::canonical(path, ec);
  if (ec)
    throw Error(path + ": the output is a symbolic link whose target cannot be resolved (" +
                ec.message() + "); costate follows links to a file, so point it at one or remove it");
  return target.string();
}

/// The parent directory of `file` ("." when it has none).
std::string directory_of(const std::string& file) {
  const fs::path parent = fs::path(file).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

/// Holds an open file descriptor and the lock on it; removes the temporary
/// file unless released.
class Temporary {
 public:
  Temporary(std::string path, const std::string& target) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0)
      throw Error(target + ": cannot create the temporary output file " + path_ + ": " +
                  reason(errno));
    // An open-file-description lock: independent of HDF5's own flock() on
    // the file and not dropped when HDF5 closes its descriptor.
    struct flock lock{};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd_, F_OFD_SETLK, &lock) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EAGAIN || err == EACCES)
        throw Error(target + ": another process is writing this output right now (its temporary "
                    "file " + path_ + " is locked); wait for it to finish or choose another "
                    "output name");
      throw Error(target + ": cannot lock the temporary output file " + path_ + ": " + reason(err));
    }
    owned_ = true;  // ours now: the destructor removes it
    if (::ftruncate(fd_, 0) != 0) {
      const int err = errno;
      ::unlink(path_.c_str());
      ::close(fd_);
      throw Error(target + ": cannot empty the temporary output file " + path_ + ": " + reason(err));
    }
  }
  ~Temporary() {
    if (owned_) ::unlink(path_.c_str());
    if (fd_ >= 0) ::close(fd_);
  }
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  /// The file was renamed into place: nothing to remove.
  void keep() { owned_ = false; }

 private:
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
};

}  // namespace

void check_output_path(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty()) throw Error("the output file name is empty");
  const std::string target = resolve_target(path);
  struct stat st{};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw Error(path + ": the output is " + kind_of(st.st_mode) +
                  ", not a regular file; costate writes results only to regular files "
                  "(name a new or existing file)");
    for (const std::string& input : inputs) {
      struct stat in{};
      if (input.empty() || ::stat(input.c_str(), &in) != 0) continue;
      if (in.st_dev == st.st_dev && in.st_ino == st.st_ino)
        throw Error(path + ": the output is the same file as the run's input " + input +
                    "; writing it would destroy the input — choose another output name");
    }
  } else if (errno != ENOENT) {
    throw Error(path + ": cannot inspect the output file: " + reason(errno));
  }
  const std::string dir = directory_of(target);
  struct stat ds{};
  if (::stat(dir.c_str(), &ds) != 0)
    throw Error(path + ": the output's directory " + dir + " cannot be used: " + reason(errno));
  if (!S_ISDIR(ds.st_mode)) throw Error(path + ": " + dir + " is not a directory");
}

void write_output_file(const std::string& path,
                       const std::function<void(const std::string&)>& write,
                       const std::vector<std::string>& inputs) {
  // 1. What is replaced.
  check_output_path(path, inputs);
  const std::string target = resolve_target(path);

  // 2. The locked temporary file beside it, filled by the caller.
  Temporary tmp(target + ".partial", target);
  try {
    write(tmp.path());
  } catch (const Error& e) {
    throw Error(path + ": cannot write the output (" + e.what() + "); " +
                (fs::exists(target) ? "the previous file is left as it was"
                                    : "no file was written"));
  }

  // 3. On disk before it takes the name.
  if (::fsync(tmp.fd()) != 0)
    throw Error(path + ": cannot write the output to disk (fsync: " + reason(errno) + "); " +
                (fs::exists(target) ? "the previous file is left as it was" : "no file was written"));
  check_output_path(path, inputs);  // still a regular file (or absent) and not an input
  if (::rename(tmp.path().c_str(), target.c_str()) != 0)
    throw Error(path + ": cannot move the finished output " + tmp.path() + " into place: " +
                reason(errno));
  tmp.keep();
  const int dir = ::open(directory_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);  // the rename itself on disk; best effort (some file systems refuse)
    ::close(dir);
  }
}

OutputFormat output_format(const std::string& path, const std::string& command,
                           bool tables_allowed) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string what = tables_allowed
                               ? "HDF5 (name the file .h5) or a table (.csv, .tsv)"
                               : "HDF5 only (name the file .h5)";
  if (ext == ".csv" || ext == ".tsv") {
    if (!tables_allowed)
      throw Error(path + ": costate " + command + " writes " + what + "; its results do not fit " +
                  "one table (`costate run -o x.csv` on an ODE input file writes its trajectory as CSV)");
    return ext == ".csv" ? OutputFormat::Csv : OutputFormat::Tsv;
  }
  for (const char* text : {".json", ".txt", ".yaml", ".yml", ".dat", ".png", ".pdf", ".svg"})
    if (ext == text)
      throw Error(path + ": costate " + command + " writes " + what + ", not " + ext +
                  (ext == ".json" ? "; for JSON use --json (on standard output)" : ""));
  return OutputFormat::Hdf5;
}

namespace {

/// Every map and sequence under `node` in flow style ({...}, [...]): a
/// document on one line (strings with a line break are double-quoted with
/// the escape \n).
void to_flow(YAML::Node node) {
  if (!node.IsMap() && !node.IsSequence()) return;
  node.SetStyle(YAML::EmitterStyle::Flow);
  for (auto it = node.begin(); it != node.end(); ++it) to_flow(node.IsMap() ? it->second : *it);
}

}  // namespace

std::string table_provenance(const std::string& command, const std::string& settings_yaml) {
  YAML::Node settings = YAML::Load(settings_yaml);
  to_flow(settings);
  YAML::Emitter e;
  e.SetDoublePrecision(17);
  e << settings;
  std::string line = e.c_str();
  COSTATE_CHECK(line.find('\n') == std::string::npos && line.find('\r') == std::string::npos,
                "the settings do not fit on one line of a table's header: " << line);
  return std::string("# costate ") + COSTATE_VERSION_STRING + "\n# command: " + command +
         "\n# settings: " + line + "\n";
}

}  // namespace costate::io
