// costate — command-line driver.
//
//   costate run         FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
//   costate sensitivity FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
//   costate gradcheck   FILE.yaml [--json] [--set key=value]... [-q]
//   costate calibrate   FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]
//   costate info        [--json]
//   costate plot        OUT.h5 [-o FILE.png]
//
// `run` integrates the ODE model of a YAML input file (a built-in model or
// equations typed in the file), prints a readable result (or, with --json,
// one JSON object on stdout) and writes the trajectory and the fully resolved
// settings to HDF5. `sensitivity` also computes the objective of the file's
// `objective:` section and its gradient (discrete adjoint) with respect to
// the parameters and the initial state, and writes /sensitivity.
// `gradcheck` verifies that gradient: a Taylor test (observed order >= 1.9)
// and central differences; it exits non-zero when either fails. Logs and
// progress go to stderr. `calibrate` fits the calibration section's
// parameters (and initial states) to data with PETSc TAO (-tao_* options
// override) and reports the fit, standard errors, correlations and
// identifiability; it exits 2 when TAO stops without converging. Errors are
// printed once (rank 0) and the exit code is non-zero.
//
// This file parses the command line and starts the environment; each
// command is a file of its own (commands.hpp lists them and says how a new
// one registers), computing through the library's compiled layer.
//
// Sample runs:
//   costate run data/examples/lotka_volterra.yaml
//   costate run data/examples/lorenz.yaml --set integrator.rtol=1e-10 --json
//   mpiexec -n 2 costate run data/examples/van_der_pol.yaml
//   costate sensitivity data/examples/lotka_volterra_equations.yaml --json
//   costate gradcheck data/examples/lotka_volterra_equations.yaml
//   costate calibrate data/examples/van_der_pol_calibration.yaml
//   costate info --json

#include <mpi.h>

#include <limits.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.hpp"
#include "costate/config.hpp"
#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/io/output_file.hpp"
#include "costate/io/resume.hpp"
#include "pde_commands.hpp"
#include "petab_command.hpp"
#include "plot_command.hpp"

namespace {

using Json = nlohmann::ordered_json;

/// Set by --debug: errors keep the internal check reports (condition,
/// source file and line) that users otherwise never see.
bool g_debug = false;

void report_error(const costate::Environment* env, const std::string& full_message, bool json) {
  const int rank = env ? env->rank() : 0;
  const std::string message =
      g_debug ? full_message : costate::detail::user_message(full_message);
  if (rank == 0) {
    std::cerr << "costate: error: " << message << std::endl;
    if (json) std::cout << Json{{"status", "error"}, {"message", message}}.dump() << std::endl;
  }
  if (env && env->size() > 1) {
    // Give rank 0 a moment to print before the job is torn down; a rank
    // still alive after it failed alone (rank 0 did not abort the job), so
    // it says what happened itself.
    if (rank != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::cerr << "costate: error on rank " << rank << " of " << env->size() << ": " << message
                << std::endl;
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/// Throws when anything written to stdout was lost (a full disk, /dev/full):
/// the result of a command that printed it is gone, so it cannot exit 0.
void check_stdout() {
  std::cout.flush();
  if (std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  // The stream does not keep the reason: write one byte to learn it.
  errno = 0;
  const int err = ::write(STDOUT_FILENO, "\n", 1) < 0 ? errno : 0;
  std::cout.clear();
  std::clearerr(stdout);
  throw costate::Error(std::string("cannot write the result to standard output: ") +
                       (err ? std::strerror(err) : "write error") +
                       " (the result was computed but is lost; check the disk or the pipe)");
}

}  // namespace

namespace costate::cli {

void hand_over_to_petsc(char** argv) {
  // The directory of the running executable (not argv[0]: it may be a bare
  // name found on PATH).
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    throw Error(std::string("cannot find the running executable (/proc/self/exe: ") + std::strerror(errno) +
                ") to start costate-petsc, which runs the commands that need PETSc");
  std::string path(self, static_cast<std::size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "costate-petsc";
  std::cout.flush();
  std::cerr.flush();
  ::execv(path.c_str(), argv);
  throw Error("cannot start " + path + ": " + std::strerror(errno) +
              " (calibrate and PDE inputs run in costate-petsc, installed beside costate)");
}

}  // namespace costate::cli

int main(int argc, char** argv) {
  namespace cli = costate::cli;
  CLI::App app{"costate: gradients of ODE and PDE simulations", "costate"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("costate ") + COSTATE_VERSION_STRING);

  // 1. The commands of the table (commands.cpp), each with the options it takes.
  const std::vector<cli::Command>& commands = cli::commands();
  std::vector<cli::CommandArgs> args(commands.size());
  std::vector<CLI::App*> parsed(commands.size());
  for (std::size_t c = 0; c < commands.size(); ++c) {
    const cli::Command& command = commands[c];
    cli::CommandArgs& a = args[c];
    auto* cmd = app.add_subcommand(command.name, command.help);
    if (command.input) {
      cmd->add_option("file", a.input, "YAML input file")->required();
      if (command.writes_output)
        cmd->add_option("-o,--output", a.output, "HDF5 output file (overrides output.file)");
      cmd->add_flag("--json", a.json, "print one JSON summary on stdout");
      cmd->add_option("--set", a.sets, "override a setting: --set integrator.rtol=1e-10")
          ->allow_extra_args(false);
      cmd->add_flag("-q,--quiet", a.quiet, "no settings echo or progress on stderr");
      cmd->add_flag("--debug", g_debug,
                    "errors also show the internal check that failed (condition, source line)");
    } else {
      cmd->add_flag("--json", a.json, "print one JSON object on stdout");
    }
    if (command.add_options) command.add_options(*cmd, a);
    if (command.allow_extras) cmd->allow_extras();
    parsed[c] = cmd;
  }

  cli::PlotArgs plot_args;
  auto* plot_cmd = app.add_subcommand("plot", "draw an HDF5 output file (Python, matplotlib)");
  plot_cmd->add_option("file", plot_args.input, "output file of costate (HDF5, or a .csv/.tsv table)")->required();
  plot_cmd->add_option("-o,--output", plot_args.output, "image file (default: FILE.png)");
  plot_cmd->add_option("--dpi", plot_args.dpi, "resolution (default 100)");
  plot_cmd->add_flag("--json", plot_args.json, "print what was drawn as one JSON object on stdout");

  // `costate runn`: CLI11 would say only that a command is required.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names{"plot"};
    for (const cli::Command& c : commands) names.insert(names.end() - 1, c.name);
    if (const std::string m = cli::unknown_command(argv[1], names); !m.empty()) {
      report_error(nullptr, m, false);
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (plot_cmd->parsed()) {  // no MPI, PETSc or Kokkos: a child Python process draws
    try {
      return cli::plot_command(plot_args);
    } catch (const costate::Error& e) {
      report_error(nullptr, e.what(), plot_args.json);
      return 1;
    }
  }

  std::size_t c = 0;
  while (!parsed[c]->parsed()) ++c;  // require_subcommand(1): one was given
  const cli::Command& command = commands[c];
  const cli::CommandArgs& a = args[c];
  std::unique_ptr<costate::Environment> env;
  try {
    // 2. Start only what the command needs: PETSc (and so MPI) for calibrate
    // (TAO) and PDE inputs; MPI otherwise only under mpiexec — a process
    // started alone skips Open MPI's singleton start-up (~0.4 s); Kokkos for
    // the commands that integrate.
    const bool pde_input = command.input && cli::is_pde_input(a.input);
    // The front `costate` has no PETSc (front.cpp): hand such a command over.
    if ((command.petsc || pde_input) && cli::is_front()) cli::hand_over_to_petsc(argv);
    env = std::make_unique<costate::Environment>(
        argc, argv,
        costate::EnvironmentOptions{.petsc = command.petsc || pde_input,
                                    .kokkos = command.kokkos,
                                    .mpi = costate::MpiStart::when_launched});
    // Progress lines (core/progress.hpp): rank 0, on a terminal, without -q.
    costate::set_progress_enabled(env->is_root() && !a.quiet && ::isatty(STDERR_FILENO));
    // 3. Refuse an -o that would destroy a file or hide its format, before
    // any work (io/output_file.hpp; the writers check again when writing).
    if (command.writes_output && !a.output.empty()) {
      costate::io::check_output_path(a.output, {a.input});
      // ODE inputs: HDF5, or a table for `run`; PDE inputs: HDF5 (+ .xmf)
      // only; PEtab problems name their own formats.
      if (pde_input)
        (void)costate::io::output_format(a.output, std::string(command.name) + " on a PDE input", false);
      else if (!cli::is_petab_input(a.input))
        (void)costate::io::output_format(a.output, command.name,
                                         std::string(command.name) == "run");
    }
    // 4. Run it; a result that could not be written to stdout is an error.
    const int status = command.run(*env, a);
    check_stdout();
    return status;
  } catch (const costate::io::Interrupted& e) {
    return costate::io::report_interrupted(e, env ? env->rank() : 0, env ? env->size() : 1, a.json);
  } catch (const costate::Error& e) {
    report_error(env.get(), e.what(), a.json);
  } catch (const std::exception& e) {
    report_error(env.get(), std::string("unexpected failure: ") + e.what(), a.json);
  }
  return 1;
}
