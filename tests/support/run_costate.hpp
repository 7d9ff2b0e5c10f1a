#pragma once
/// Runs a command-line program in a directory and captures what it did: the
/// piece the command-line tests share (exit status, stdout, stderr, wall
/// time).

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace costate::test {

struct CommandResult {
  int code = -1;  ///< exit status; -1 when the process did not exit normally
  std::string out, err;
  double seconds = 0.0;  ///< wall time of the whole command
};

/// A fresh, empty scratch folder `name.<pid>` in the system's temporary
/// directory: private to this test process, so two test runs at once (two
/// build trees' ctest) do not remove each other's files. Removed when the
/// process exits normally.
inline std::filesystem::path scratch_dir(const std::string& name) {
  struct Created {
    std::vector<std::filesystem::path> dirs;
    ~Created() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Created created;
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  created.dirs.push_back(d);
  return d;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// `cd dir && prefix 'exe' args`, stdin closed, stdout/stderr captured
/// (through dir/stdout.txt and dir/stderr.txt, removed afterwards).
/// `prefix` may set environment variables or a `timeout -s KILL N` guard.
inline CommandResult run_command(const std::filesystem::path& dir, const std::string& exe,
                                 const std::string& args, const std::string& prefix = "") {
  const std::string cmd = "cd '" + dir.string() + "' && " + prefix + " '" + exe + "' " + args +
                          " > stdout.txt 2> stderr.txt < /dev/null";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "stdout.txt");
  r.err = slurp(dir / "stderr.txt");
  std::filesystem::remove(dir / "stdout.txt");
  std::filesystem::remove(dir / "stderr.txt");
  return r;
}

}  // namespace costate::test
