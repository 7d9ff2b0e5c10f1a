// `costate run FILE.yaml [-o OUT.h5] [--json] [--set key=value]... [-q]`:
// integrate the file's model, write the trajectory and the resolved settings
// to HDF5, report the result (text or JSON).
#include <iomanip>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/file_run.hpp"
#include "costate/io/hdf5_writer.hpp"
#include "costate/io/results_check.hpp"
#include "costate/io/resume.hpp"
#include "costate/ode/event_order.hpp"
#include "pde_commands.hpp"
#include "petab_command.hpp"

namespace costate::cli {
namespace {

using Json = nlohmann::ordered_json;

/// The settings echo on stderr.
void echo(const io::RunConfig& cfg, const std::string& input) {
  std::cerr << "costate run " << input << "\n  model      " << cfg.model << " (states "
            << join(cfg.state_names) << ")\n  integrator " << ode::to_string(cfg.integrator.method);
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

/// `t` and `states` (one row per output time) of a run's JSON, with
/// --trajectory: the whole trajectory, as the HDF5 file holds it.
void add_trajectory(Json& j, const ode::Solution& sol) {
  j["t"] = sol.t;
  Json rows = Json::array();
  for (std::size_t k = 0; k < sol.n_outputs(); ++k) {
    const auto y = sol.state(k);
    rows.push_back(std::vector<double>(y.begin(), y.end()));
  }
  j["states"] = rows;
}

void print_json(const io::RunConfig& cfg, const ode::Solution& sol, bool trajectory) {
  const ode::Summary& s = sol.summary;
  const auto final_state = sol.state(sol.n_outputs() - 1);
  Json j;
  j["status"] = "ok";
  j["model"] = cfg.model;
  j["method"] = ode::to_string(s.method);
  j["final_time"] = s.final_time;
  j["state_names"] = cfg.state_names;
  j["final_state"] = std::vector<double>(final_state.begin(), final_state.end());
  if (cfg.sbml && final_state.size() == cfg.sbml->state_names.size() &&
      cfg.parameters.size() == cfg.sbml->parameter_names.size()) {
    // An SBML model: every symbol at the final time (sbml::Model::symbol_values;
    // the HDF5 output's /symbols holds them at every output time).
    j["symbol_names"] = cfg.sbml->symbol_names();
    j["final_symbols"] = io::sbml_symbols(cfg, sol, sol.n_outputs() - 1);
  }
  j["event_order_seed"] = ode::event_order_seed();
  j["steps"] = s.steps;
  j["rejected_steps"] = s.rejected_steps;
  j["rhs_evaluations"] = s.rhs_evaluations;
  j["outputs"] = sol.n_outputs();
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  j["wall_seconds"] = s.wall_seconds;
  j["warnings"] = cfg.warnings;
  if (trajectory) add_trajectory(j, sol);
  std::cout << j.dump() << std::endl;
}

/// The trajectory as a table of at most 11 rows.
void print_table(std::ostringstream& os, const io::RunConfig& cfg, const ode::Solution& sol) {
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
}

void print_text(const io::RunConfig& cfg, const ode::Solution& sol) {
  std::ostringstream os;
  os << sol.summary.brief_report() << "\n";
  if (cfg.sbml && !cfg.sbml->random_event_order.empty())
    os << "events of equal priority executed in random order: seed " << ode::event_order_seed()
       << " (--event-seed)\n";
  os << "\n";
  print_table(os, cfg, sol);
  os << "\n";
  if (!cfg.output_file.empty()) os << "wrote " << cfg.output_file << "\n";
  os << warnings_text(cfg.warnings);
  std::cout << os.str();
}

/// A file with conditions: one trajectory per condition (io/conditions.hpp),
/// in the table's order; -o writes them all (io::write_conditions_hdf5).
int run_conditions(const Environment& env, const CommandArgs& args, const io::RunConfig& cfg) {
  if (!args.resume.empty())
    throw Error("--resume " + args.resume + ": " + args.input + " has conditions; a run over conditions "
                "does not resume — rerun it without --resume");
  // SIGINT/SIGTERM stop at the next step (main exits 128 + signal): the
  // trajectories are written together at the end, so nothing is kept, and
  // the message says so (the run does not resume).
  io::InterruptHandler interrupts;
  std::vector<io::RunConfig> problems;
  std::vector<ode::Solution> solutions;
  const std::size_t n_conditions = cfg.conditions.size();
  for (std::size_t c = 0; c < n_conditions; ++c) {
    const std::string id = cfg.conditions[c].id;
    problems.push_back(io::condition_config(cfg, c));
    const auto stop = [&args, id, c, n_conditions](double t) {
      if (!io::InterruptHandler::pending()) return;
      std::ostringstream os;
      os.precision(17);
      os << "at t = " << t << " in condition '" << id << "' (" << c + 1 << " of " << n_conditions
         << ") (costate run); a run over conditions writes its trajectories when all are done and does not "
            "resume: nothing written, rerun "
         << args.input;
      io::throw_if_interrupted(os.str());
    };
    stop(cfg.t_start);  // a signal between two conditions
    problems.back().integrator.on_step = stop;
    solutions.push_back(io::integrate_file(problems.back()));
    const ode::Solution& sol = solutions.back();
    if (!sol.summary.success())
      throw Error("integration of " + args.input + ", condition '" + id + "', failed: " + sol.summary.message +
                  " (no output written)");
    io::check_finite_trajectory(problems.back(), sol, "run, condition '" + id + "'");
  }
  if (env.is_root() && !cfg.output_file.empty())
    io::write_conditions_hdf5(cfg.output_file, cfg, problems, solutions, nullptr, "run");
  if (!env.is_root()) return 0;
  if (args.json) {
    Json j;
    j["status"] = "ok";
    j["model"] = cfg.model;
    j["state_names"] = cfg.state_names;
    Json rows = Json::array();
    for (std::size_t c = 0; c < problems.size(); ++c) {
      const ode::Solution& sol = solutions[c];
      const auto final_state = sol.state(sol.n_outputs() - 1);
      rows.push_back({{"id", cfg.conditions[c].id},
                      {"method", ode::to_string(sol.summary.method)},
                      {"final_time", sol.summary.final_time},
                      {"final_state", std::vector<double>(final_state.begin(), final_state.end())},
                      {"steps", sol.summary.steps},
                      {"rejected_steps", sol.summary.rejected_steps},
                      {"rhs_evaluations", sol.summary.rhs_evaluations},
                      {"outputs", sol.n_outputs()},
                      {"wall_seconds", sol.summary.wall_seconds}});
      if (args.trajectory) add_trajectory(rows.back(), sol);
    }
    j["conditions"] = rows;
    j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
    j["warnings"] = cfg.warnings;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::ostringstream os;
  for (std::size_t c = 0; c < problems.size(); ++c) {
    os << "condition '" << cfg.conditions[c].id << "' (" << c + 1 << " of " << problems.size()
       << "): " << solutions[c].summary.brief_report() << "\n";
    print_table(os, problems[c], solutions[c]);
    os << "\n";
  }
  if (!cfg.output_file.empty()) os << "wrote " << cfg.output_file << " (/conditions: every condition's trajectory)\n";
  os << warnings_text(cfg.warnings);
  std::cout << os.str();
  return 0;
}

}  // namespace

int run_command(const Environment& env, const CommandArgs& args) {
  if (args.trajectory && !args.json)
    throw Error(args.input + ": --trajectory adds the trajectory to --json's output: give --json too "
                             "(the text output shows a table of it; -o writes all of it)");
  if (args.trajectory && is_petab_input(args.input))
    throw Error(args.input + ": --trajectory is for input files; a PEtab run's --json already holds its "
                             "simulations (one per measurement) and -o writes the simulation table");
  if (args.trajectory && is_pde_input(args.input))
    throw Error(args.input + ": --trajectory is for ODE input files; a PDE run's fields are in its HDF5 "
                             "output (-o OUT.h5, with an .xmf for ParaView)");
  // The draws among simultaneous events of equal priority (SBML): reported
  // with the results, so that a run is reproduced by its seed.
  std::optional<ode::ScopedEventOrderSeed> event_seed;
  if (args.event_seed >= 0) event_seed.emplace(static_cast<std::uint64_t>(args.event_seed));
  if (is_petab_input(args.input)) return petab_run(env, args);  // docs/petab.md
  if (is_pde_input(args.input)) return pde(env, args, "run");
  // 1. Read, override and validate the settings.
  io::RunConfig cfg = io::load_run_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  const bool talk = env.is_root() && !args.quiet;
  if (talk) echo(cfg, args.input);
  if (!cfg.conditions.empty()) return run_conditions(env, args, cfg);

  // 2. Integrate. SIGINT/SIGTERM stop at a step boundary; the outputs
  // reached are written marked partial, and --resume continues them
  // (costate/io/resume.hpp).
  if (!args.resume.empty() && args.output.empty()) cfg.output_file = args.resume;
  io::InterruptHandler interrupts;
  Progress progress("integrate", cfg.t_end - cfg.t_start);
  const io::RunOutcome outcome = io::integrate_run(
      cfg, [&](double t) { progress.update(t - cfg.t_start, "t = " + costate::detail::format_value(t)); },
      args.resume);
  progress.finish();
  if (outcome.signal)
    return io::finish_interrupted_run(cfg, outcome, env.is_root(), env.is_root(), args.json);
  const ode::Solution& sol = outcome.solution;
  if (!sol.summary.success())
    throw Error("integration of " + args.input + " failed: " + sol.summary.message +
                " (no output written)");
  io::check_finite_trajectory(cfg, sol, "run");  // "ok" means finite
  add_integration_warnings(sol.summary, cfg.warnings);

  // 3. Write the HDF5 output (one writer: rank 0).
  if (env.is_root() && !cfg.output_file.empty()) io::write_finished_run(cfg, outcome);

  // 4. Report.
  if (!env.is_root()) return 0;
  if (args.json)
    print_json(cfg, sol, args.trajectory);
  else
    print_text(cfg, sol);
  return 0;
}

}  // namespace costate::cli
