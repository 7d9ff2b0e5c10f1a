// `costate plot`: a thin launcher of `python3 -m costate.plot` (plot_command.hpp).
#include "plot_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::cli {
namespace {

/// What plot.py exits with when matplotlib or h5py cannot be imported
/// (MISSING_PACKAGE_EXIT there); it has printed which one.
constexpr int kMissingPackage = 3;

/// The directory holding the costate package: the build tree's when this
/// executable is the build tree's, else the install prefix's.
std::string package_dir() {
  std::error_code ec;
  const auto self = std::filesystem::canonical("/proc/self/exe", ec);
  const auto build_bin = std::filesystem::weakly_canonical(COSTATE_PYTHON_BUILD_BIN, ec);
  if (!self.empty() && self.parent_path() == build_bin) return COSTATE_PYTHON_BUILD_DIR;
  return COSTATE_PYTHON_INSTALL_DIR;
}

}  // namespace

int plot_command(const PlotArgs& args) {
  const std::string python = COSTATE_PYTHON_EXECUTABLE;
  if (access(python.c_str(), X_OK) != 0)
    throw Error("costate plot needs Python 3 with matplotlib and h5py: " + python +
                " not found (apt-get install python3-matplotlib python3-h5py)");
  const std::string dir = package_dir();
  if (!std::filesystem::exists(dir + "/costate/plot.py"))
    throw Error("costate plot: the costate Python package is not in " + dir +
                " (build the target costate_python_files, or cmake --install)");
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = old && *old ? dir + ":" + old : dir;

  std::vector<std::string> argv{python, "-m", "costate.plot", args.input, "--dpi",
                                std::to_string(args.dpi)};
  if (!args.output.empty()) {
    argv.emplace_back("-o");
    argv.push_back(args.output);
  }
  if (args.json) argv.emplace_back("--json");
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("costate plot: cannot start ") + python + ": " + std::strerror(errno));
  if (pid == 0) {
    setenv("PYTHONPATH", path.c_str(), 1);
    execv(python.c_str(), cargv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error(std::string("costate plot: waitpid: ") + std::strerror(errno));
  if (!WIFEXITED(status))
    throw Error("costate plot: " + python + " -m costate.plot was killed by signal " +
                std::to_string(WTERMSIG(status)));
  const int rc = WEXITSTATUS(status);
  if (rc == 127) throw Error("costate plot: cannot run " + python);
  if (rc == kMissingPackage)
    throw Error("costate plot: Python packages missing (see the message above): apt-get install "
                "python3-matplotlib python3-h5py");
  return rc;
}

}  // namespace costate::cli
