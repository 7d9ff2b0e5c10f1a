// costate — command-line driver.
//
//   costate run  FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [--quiet]
//   costate info [--json]
//
// `run` integrates a built-in ODE model described by a YAML input file,
// prints a readable result (or, with --json, one JSON object on stdout) and
// writes the trajectory and the fully resolved settings to HDF5. Logs and
// progress go to stderr. Errors are printed once (rank 0) and the exit code
// is non-zero.
//
// Sample runs:
//   costate run data/examples/lotka_volterra.yaml
//   costate run data/examples/lorenz.yaml --set integrator.rtol=1e-10 --json
//   mpiexec -n 2 costate run data/examples/van_der_pol.yaml
//   costate info --json

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "costate/costate.hpp"
#include "io/hdf5_writer.hpp"
#include "io/input.hpp"

namespace {

using costate::io::RunConfig;
using Json = nlohmann::ordered_json;

struct RunArgs {
  std::string input;
  std::string output;
  std::vector<std::string> sets;
  bool json = false;
  bool quiet = false;
};

/// A one-line progress bar on stderr, drawn only on a terminal, only for runs
/// longer than half a second, at most ten times a second.
class Progress {
 public:
  Progress(double t0, double t1, bool enabled)
      : t0_(t0), t1_(t1), enabled_(enabled && isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()), last_(start_) {}
  void update(double t) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::milliseconds(500) || now - last_ < std::chrono::milliseconds(100))
      return;
    last_ = now;
    drawn_ = true;
    const double frac = std::clamp((t - t0_) / (t1_ - t0_), 0.0, 1.0);
    const int width = 40;
    const int filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r[%s%s] %5.1f%%  t = %-12.6g", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), 100.0 * frac, t);
    std::fflush(stderr);
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", 80, "");
  }

 private:
  double t0_, t1_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int run(const costate::Environment& env, const RunArgs& args) {
  namespace ode = costate::ode;
  // 1. Read, override and validate the settings.
  RunConfig cfg = costate::io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  const bool talk = env.is_root() && !args.quiet;
  if (talk) {
    std::cerr << "costate run " << args.input << "\n  model      " << cfg.model << " (states "
              << join(cfg.state_names) << ")\n  integrator "
              << ode::to_string(cfg.integrator.method);
    if (cfg.integrator.fixed_step())
      std::cerr << ", dt = " << cfg.integrator.dt;
    else
      std::cerr << ", rtol = " << cfg.integrator.rtol << ", atol = "
                << (cfg.integrator.atol_per_state.empty()
                        ? costate::detail::format_value(cfg.integrator.atol)
                        : std::string("per state"));
    std::cerr << "\n  time       [" << cfg.t_start << ", " << cfg.t_end << "], "
              << cfg.output_times.size() << " output times\n";
  }

  // 2. Integrate.
  Progress progress(cfg.t_start, cfg.t_end, talk);
  cfg.integrator.on_step = [&](double t) { progress.update(t); };
  ode::Solution sol = ode::visit_builtin_model(cfg.model, [&](auto model) {
    ode::Problem<decltype(model)> problem{model, cfg.initial_state, cfg.parameters,
                                          {cfg.t_start, cfg.t_end}, cfg.output_times};
    return ode::integrate(problem, cfg.integrator);
  });
  progress.finish();
  cfg.integrator.on_step = nullptr;
  const ode::Summary& s = sol.summary;
  if (!s.success())
    throw costate::Error("integration of " + args.input + " failed: " + s.message +
                         " (no output written)");

  // 3. Write the HDF5 output (one writer: rank 0).
  if (env.is_root() && !cfg.output_file.empty())
    costate::io::write_run_hdf5(cfg.output_file, cfg, sol);

  // 4. Report.
  if (!env.is_root()) return 0;
  const auto final_state = sol.state(sol.n_outputs() - 1);
  if (args.json) {
    Json j;
    j["status"] = "ok";
    j["model"] = cfg.model;
    j["method"] = ode::to_string(s.method);
    j["final_time"] = s.final_time;
    j["state_names"] = cfg.state_names;
    j["final_state"] = std::vector<double>(final_state.begin(), final_state.end());
    j["steps"] = s.steps;
    j["rejected_steps"] = s.rejected_steps;
    j["rhs_evaluations"] = s.rhs_evaluations;
    j["outputs"] = sol.n_outputs();
    j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
    j["wall_seconds"] = s.wall_seconds;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::ostringstream os;
  os << s.brief_report() << "\n\n";
  os << std::setw(14) << "t";
  for (const auto& name : cfg.state_names) os << std::setw(20) << name;
  os << "\n";
  const std::size_t n = sol.n_outputs();
  const std::size_t rows = std::min<std::size_t>(n, 11);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t j = rows == 1 ? 0 : r * (n - 1) / (rows - 1);
    os << std::setw(14) << std::setprecision(6) << sol.t[j];
    for (double v : sol.state(j)) os << std::setw(20) << std::setprecision(12) << v;
    os << "\n";
  }
  if (rows < n) os << "  (" << n << " output times in all; every one is in the HDF5 file)\n";
  os << "\n";
  if (!cfg.output_file.empty()) os << "wrote " << cfg.output_file << "\n";
  std::cout << os.str();
  return 0;
}

int info(const costate::Environment& env, bool json) {
  costate::BuildInfo b = costate::build_info();
  b.dependencies.emplace_back("CLI11", CLI11_VERSION);
  b.dependencies.emplace_back("nlohmann_json",
                              std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_PATCH));
  if (!env.is_root()) return 0;
  if (json) {
    Json j;
    j["status"] = "ok";
    j["costate_version"] = b.costate_version;
    j["compiler"] = b.compiler;
    j["build_type"] = b.build_type;
    Json deps = Json::object();
    for (const auto& [name, version] : b.dependencies) deps[name] = version;
    j["dependencies"] = deps;
    j["kokkos_backends"] = b.kokkos_backends;
    j["kokkos_default_execution_space"] = b.kokkos_default_space;
    j["petsc_configuration"] = b.petsc_configuration;
    j["hdf5_parallel"] = b.hdf5_parallel;
    j["mpi_size"] = b.mpi_size;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << "costate " << b.costate_version << " (" << b.build_type << ", " << b.compiler
            << ")\n\n";
  for (const auto& [name, version] : b.dependencies)
    std::cout << "  " << std::left << std::setw(15) << name << version << "\n";
  std::cout << "\n  Kokkos backends  " << join(b.kokkos_backends) << " (default "
            << b.kokkos_default_space << ")\n"
            << "  PETSc            " << b.petsc_configuration << "\n"
            << "  HDF5 parallel    " << (b.hdf5_parallel ? "yes" : "no") << "\n"
            << "  MPI ranks        " << b.mpi_size << "\n";
  return 0;
}

void report_error(const costate::Environment* env, const std::string& message, bool json) {
  const int rank = env ? env->rank() : 0;
  if (rank == 0) {
    std::cerr << "costate: error: " << message << std::endl;
    if (json) std::cout << Json{{"status", "error"}, {"message", message}}.dump() << std::endl;
  }
  if (env && env->size() > 1) {
    // Give rank 0 a moment to print before the job is torn down.
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"costate: gradients of ODE and PDE simulations", "costate"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("costate ") + COSTATE_VERSION_STRING);

  RunArgs run_args;
  auto* run_cmd = app.add_subcommand("run", "integrate the model of an input file");
  run_cmd->add_option("file", run_args.input, "YAML input file")->required();
  run_cmd->add_option("-o,--output", run_args.output, "HDF5 output file (overrides output.file)");
  run_cmd->add_flag("--json", run_args.json, "print one JSON summary on stdout");
  run_cmd->add_option("--set", run_args.sets, "override a setting: --set integrator.rtol=1e-10")
      ->allow_extra_args(false);
  run_cmd->add_flag("-q,--quiet", run_args.quiet, "no settings echo or progress on stderr");

  bool info_json = false;
  auto* info_cmd = app.add_subcommand("info", "versions of costate and its dependencies");
  info_cmd->add_flag("--json", info_json, "print one JSON object on stdout");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const bool json = run_cmd->parsed() ? run_args.json : info_json;
  std::unique_ptr<costate::Environment> env;
  try {
    env = std::make_unique<costate::Environment>(argc, argv);
    int rc = 0;
    if (run_cmd->parsed()) rc = run(*env, run_args);
    if (info_cmd->parsed()) rc = info(*env, info_json);
    return rc;
  } catch (const costate::Error& e) {
    report_error(env.get(), e.what(), json);
  } catch (const std::exception& e) {
    report_error(env.get(), std::string("unexpected failure: ") + e.what(), json);
  }
  return 1;
}
