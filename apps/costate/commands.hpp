#pragma once
// The subcommands of `costate` over input files, one file each
// (run_command.cpp, sensitivity_command.cpp, gradcheck_command.cpp,
// calibrate_command.cpp, info_command.cpp; PDE inputs: pde_commands.cpp;
// plot: plot_command.cpp). Each command computes through the library's
// compiled layer (costate/io/file_gradient.hpp, costate/calibrate/) and
// renders its result as text or, with --json, as one JSON object, in
// functions of their own.
//
// A new command: a file with `int NAME_command(const Environment&, const
// CommandArgs&)`, its declaration below, and one row in commands()
// (commands.cpp) — main.cpp reads the table.

#include <limits>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/io/input.hpp"
#include "costate/ode/options.hpp"

namespace CLI {
class App;
}

namespace costate::cli {

/// The options of the commands (CLI11 fills them).
struct CommandArgs {
  std::string input;   ///< FILE.yaml
  std::string output;  ///< -o (overrides output.file)
  std::vector<std::string> sets;  ///< --set key=value
  bool json = false;
  bool quiet = false;
  bool hessian = false;  ///< sensitivity --hessian
  bool check = false;    ///< sensitivity --check (a directional difference along a random direction)
  std::string resume;    ///< run --resume OUT.h5
  bool trajectory = false;  ///< run --json --trajectory: every output time in the JSON
  int starts = -1;       ///< calibrate --starts N (PEtab problems; −1: not given)
  long long seed = -1;   ///< calibrate --seed S (PEtab problems; −1: not given)
  /// run --event-seed S: the draws among simultaneous events of equal
  /// priority (ode::ScopedEventOrderSeed; −1: ode::kEventOrderSeed).
  long long event_seed = -1;
  std::string sampling;  ///< calibrate --sampling lhs|uniform (PEtab problems; empty: not given)
  bool fim = false;      ///< sensitivity --fim (PEtab problems)
  bool no_fim = false;   ///< sensitivity --no-fim (PEtab problems; the default, kept for scripts)
  /// calibrate --optimizer adamw|adam|sgd (a mini-batch stochastic fit,
  /// PEtab problems; empty: TAO) and its settings (−1 / NaN: not given).
  std::string optimizer;
  int epochs = -1;
  int finish = -1;  ///< calibrate --finish N (stochastic fit: TAO iterations after the epochs)
  long long batch = -1, physical_batch = -1;
  double learning_rate = std::numeric_limits<double>::quiet_NaN();
  double validation_split = std::numeric_limits<double>::quiet_NaN();
};

/// One subcommand: its name and help, which of the shared options it takes,
/// what the environment starts for it, and the function that runs it (its
/// exit status; costate::Error for bad input).
struct Command {
  const char* name;
  const char* help;
  int (*run)(const Environment& env, const CommandArgs& args);
  bool input = true;           ///< FILE.yaml, --json, --set, -q (false: --json only)
  bool writes_output = false;  ///< -o, --output
  bool petsc = false;          ///< PETSc (and MPI) for every input, not only PDE inputs
  bool kokkos = true;          ///< Kokkos
  bool allow_extras = false;   ///< unknown options pass through (-tao_* for PETSc)
  /// The command's own flags (nullptr: none).
  void (*add_options)(CLI::App& command, CommandArgs& args) = nullptr;
};

/// Every command, in the order of `costate --help` (commands.cpp).
const std::vector<Command>& commands();

int run_command(const Environment& env, const CommandArgs& args);
int sensitivity_command(const Environment& env, const CommandArgs& args);
int gradcheck_command(const Environment& env, const CommandArgs& args);
int calibrate_command(const Environment& env, const CommandArgs& args);
int info_command(const Environment& env, const CommandArgs& args);

// Shared by the commands (commands.cpp).

/// "a, b, c".
std::string join(const std::vector<std::string>& v);

/// The input's warnings (io::RunConfig::warnings) as text lines for a
/// command's text output ("" when none); its JSON lists them as `warnings`.
std::string warnings_text(const std::vector<std::string>& warnings);
/// Appends the warnings an integration's summary raises (once each): an
/// explicit method found the problem stiff (ode::Summary::stiff_from), so its
/// discrete adjoint may be wrong and bdf is the method to use.
void add_integration_warnings(const ode::Summary& summary, std::vector<std::string>& warnings);
/// "unknown command 'runn'; did you mean 'run'? Commands: …" when `word`
/// (where a command goes) is none of `names`; "" when it is one.
std::string unknown_command(const std::string& word, const std::vector<std::string>& names);

/// True in `costate`, the front that links libcostate without its PETSc part
/// (front.cpp); false in `costate-petsc`, which links everything (full.cpp).
bool is_front();
/// Replaces this process by `costate-petsc` beside the running executable,
/// with the same arguments (a command that needs PETSc, started in the
/// front). Called before MPI is started, so it works under mpiexec (each rank
/// execs). Returns only by throwing costate::Error when it cannot be started.
[[noreturn]] void hand_over_to_petsc(char** argv);

/// A PDE input (a `pde:` section) runs through pde_commands.cpp.
int pde(const Environment& env, const CommandArgs& args, const char* command);

/// The input file of `sensitivity` and `gradcheck`, read with the --set
/// overrides and -o, checked to have an objective, and echoed on stderr.
io::RunConfig load_with_objective(const Environment& env, const CommandArgs& args,
                                  const char* command);

}  // namespace costate::cli
