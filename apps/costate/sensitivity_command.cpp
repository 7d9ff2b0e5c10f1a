// `costate sensitivity FILE.yaml [-o OUT.h5] [--json] [--set key=value]...
// [--hessian] [-q]`: the objective of the file's `objective:` section and
// its gradient by sensitivity.method (with --hessian also ∂²J/∂p² over
// sensitivity.wrt), the trajectory and /sensitivity written to HDF5.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "costate/core/error.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/resume.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/hdf5_writer.hpp"
#include "costate/io/results_check.hpp"
#include "costate/ode/scheme.hpp"
#include "pde_commands.hpp"
#include "petab_command.hpp"

namespace costate::cli {
namespace {

using Json = nlohmann::ordered_json;

/// What the command computed.
struct SensitivityResult {
  ode::Solution trajectory;       ///< at the output times (for the file)
  io::FileGradient gradient;
  io::FileHessian hessian;        ///< with --hessian
  io::SensitivityOutput output;   ///< the reported (wrt) gradient, as written
  std::int64_t resumed_from_step = -1;  ///< --resume: the sweep's place, else −1
  /// A file with conditions: each condition's problem, trajectory and J_c
  /// (trajectory above: the first one's; gradient: the sum).
  std::vector<io::RunConfig> problems;
  std::vector<ode::Solution> trajectories;
  std::vector<double> objectives;
};

/// The report of the (wrt) gradient from res.gradient.
void fill_output(const io::RunConfig& cfg, SensitivityResult& res, const std::vector<std::size_t>& wrt_index,
                 bool hessian) {
  const ode::GradientResult& r = res.gradient.result;
  io::SensitivityOutput& out = res.output;
  out.objective = r.objective;
  for (std::size_t k = 0; k < wrt_index.size(); ++k) {
    out.parameter_names.push_back(cfg.sensitivity.wrt[k]);
    out.gradient.push_back(res.gradient.gradient_p[wrt_index[k]]);
  }
  if (hessian) out.hessian = res.hessian.matrix;
  if (cfg.sensitivity.wrt_initial_state) out.gradient_initial_state = r.wrt_initial_state;
  out.method = r.method;
  out.steps = r.checkpoints.steps;
  out.forward_steps = r.checkpoints.forward_steps;
  out.recomputed_steps = r.checkpoints.recomputed_steps;
  out.peak_snapshots = r.checkpoints.peak_snapshots;
}

/// A file with conditions: J = Σ_c J_c and its gradient (io/conditions.hpp),
/// and every condition's trajectory.
SensitivityResult compute_conditions(const io::RunConfig& cfg) {
  SensitivityResult res;
  res.gradient = io::conditions_gradient(cfg, &res.objectives);
  for (std::size_t c = 0; c < cfg.conditions.size(); ++c) {
    res.problems.push_back(io::condition_config(cfg, c));
    res.trajectories.push_back(io::integrate_file(res.problems.back()));
    if (!res.trajectories.back().summary.success())
      throw Error("integration of " + cfg.input_path + ", condition '" + cfg.conditions[c].id +
                  "', failed: " + res.trajectories.back().summary.message);
  }
  res.trajectory = res.trajectories.front();
  fill_output(cfg, res, io::wrt_indices(cfg), false);
  return res;
}

SensitivityResult compute(const io::RunConfig& cfg, const CommandArgs& args,
                          const io::AdjointResumeLink& resume) {
  SensitivityResult res;
  // 1. Trajectory (for the output file), 2. the gradient and 3. with
  // --hessian the Hessian: one build of the model.
  const std::vector<std::size_t> wrt_index = io::wrt_indices(cfg);
  io::FileSensitivity s = io::file_sensitivity(cfg, resume, args.hessian ? &wrt_index : nullptr);
  res.trajectory = std::move(s.trajectory);
  res.gradient = std::move(s.gradient);
  res.hessian = std::move(s.hessian);
  fill_output(cfg, res, wrt_index, args.hessian);
  return res;
}

void print_json(const io::RunConfig& cfg, const CommandArgs& args, const SensitivityResult& res) {
  const ode::GradientResult& r = res.gradient.result;
  const io::SensitivityOutput& out = res.output;
  Json j;
  j["status"] = "ok";
  j["objective"] = r.objective;
  Json grad = Json::object();
  for (std::size_t k = 0; k < out.parameter_names.size(); ++k)
    grad[out.parameter_names[k]] = out.gradient[k];
  j["gradient"] = grad;
  Json gy = Json::object();
  for (std::size_t k = 0; k < out.gradient_initial_state.size(); ++k)
    gy[cfg.state_names[k]] = out.gradient_initial_state[k];
  j["gradient_initial_state"] = gy;
  if (!res.objectives.empty()) {  // a file with conditions: J = Σ_c J_c
    Json rows = Json::array();
    for (std::size_t c = 0; c < res.objectives.size(); ++c)
      rows.push_back({{"id", cfg.conditions[c].id}, {"objective", res.objectives[c]}});
    j["conditions"] = rows;
  }
  j["method"] = r.method;
  // --resume: the step the reverse sweep was continued from (the counts
  // below are this process's: the steps below it).
  j["resumed_from_step"] = res.resumed_from_step >= 0 ? Json(res.resumed_from_step) : Json(nullptr);
  j["steps"] = out.steps;
  j["forward_steps"] = out.forward_steps;
  j["recomputed_steps"] = out.recomputed_steps;
  j["checkpoints"] = out.peak_snapshots;
  // As `run`: wall_seconds of the whole gradient (its own forward pass and
  // the sweeps), and of the forward integration alone (ode::integrate of
  // the same problem and integrator, the trajectory written to the file).
  j["wall_seconds"] = r.wall_seconds;
  j["forward_wall_seconds"] = res.trajectory.summary.wall_seconds;
  if (args.hessian) {
    const std::size_t m = out.parameter_names.size();
    Json rows = Json::array();
    for (std::size_t a = 0; a < m; ++a)
      rows.push_back(std::vector<double>(out.hessian.begin() + static_cast<std::ptrdiff_t>(a * m),
                                         out.hessian.begin() + static_cast<std::ptrdiff_t>((a + 1) * m)));
    j["hessian"] = {{"names", out.parameter_names},
                    {"matrix", rows},
                    {"asymmetry", res.hessian.asymmetry},
                    {"products", res.hessian.products},
                    {"wall_seconds", res.hessian.wall_seconds}};
  }
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  j["warnings"] = cfg.warnings;
  std::cout << j.dump() << std::endl;
}

void print_text(const io::RunConfig& cfg, const CommandArgs& args, const SensitivityResult& res) {
  const ode::GradientResult& r = res.gradient.result;
  const io::SensitivityOutput& out = res.output;
  std::ostringstream os;
  os.precision(12);
  os << r.brief_report() << "\n\n  objective J = " << r.objective << "\n\n";
  if (!res.objectives.empty()) {
    os << "  over " << res.objectives.size() << " conditions:\n";
    for (std::size_t c = 0; c < res.objectives.size(); ++c)
      os << "    J(" << cfg.conditions[c].id << ") = " << res.objectives[c] << "\n";
    os << "\n";
  }
  os << std::left << std::setw(22) << "  dJ/d" << "value\n";
  for (std::size_t k = 0; k < out.parameter_names.size(); ++k)
    os << "  " << std::setw(20) << out.parameter_names[k] << out.gradient[k] << "\n";
  for (std::size_t k = 0; k < out.gradient_initial_state.size(); ++k)
    os << "  " << std::setw(20) << (cfg.state_names[k] + "(t0)") << out.gradient_initial_state[k] << "\n";
  if (args.hessian) {
    const std::size_t m = out.parameter_names.size();
    os << "\n  Hessian d2J/dp2 (" << res.hessian.products << " Hessian-vector products, "
       << (cfg.sensitivity.method == ode::SensitivityKind::CvodesAdjoint ? "CVODES second-order adjoint"
                                                      : "forward over adjoint")
       << "; asymmetry " << std::setprecision(2) << res.hessian.asymmetry << ")\n"
       << std::setprecision(8) << "  " << std::setw(12) << "";
    for (const auto& name : out.parameter_names) os << std::right << std::setw(16) << name;
    os << "\n";
    for (std::size_t a = 0; a < m; ++a) {
      os << "  " << std::left << std::setw(12) << out.parameter_names[a] << std::right;
      for (std::size_t b = 0; b < m; ++b) os << std::setw(16) << out.hessian[a * m + b];
      os << "\n";
    }
    os << std::left << std::setprecision(12);
  }
  os << "\n  wall time: gradient " << std::setprecision(3) << r.wall_seconds
     << " s, forward integration " << res.trajectory.summary.wall_seconds << " s\n";
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << "\n";
  os << warnings_text(cfg.warnings);
  std::cout << os.str();
}

}  // namespace

int sensitivity_command(const Environment& env, const CommandArgs& args) {
  if (!args.resume.empty() && (is_petab_input(args.input) || is_pde_input(args.input)))
    throw Error("--resume " + args.resume + ": costate sensitivity resumes ODE inputs (a "
                "'model:' section) only; " + args.input + " is a " +
                (is_petab_input(args.input) ? "PEtab problem" : "PDE input") +
                ", whose gradient does not resume — rerun it without --resume");
  if (is_petab_input(args.input))  // a PEtab problem file (docs/petab.md)
    return petab_sensitivity(env, args);
  if (is_pde_input(args.input)) {
    if (args.hessian)
      throw Error(args.input + ": costate sensitivity --hessian is for ODE inputs (a "
                  "'model:' section); this input has a 'pde:' section, whose Hessian "
                  "is not available — drop --hessian");
    return pde(env, args, "sensitivity");
  }
  io::RunConfig cfg = load_with_objective(env, args, "sensitivity");
  if (!cfg.conditions.empty()) {
    // A file with conditions: the summed gradient; no Hessian, no resume.
    if (args.hessian) io::require_single_condition(cfg, "costate sensitivity --hessian");
    if (!args.resume.empty()) io::require_single_condition(cfg, "costate sensitivity --resume");
    SensitivityResult res = compute_conditions(cfg);
    for (std::size_t c = 0; c < res.problems.size(); ++c)
      io::check_finite_trajectory(res.problems[c], res.trajectories[c],
                                  "sensitivity, condition '" + cfg.conditions[c].id + "'");
    io::check_sensitivity_results(cfg, res.trajectory, res.output);
    if (env.is_root() && !cfg.output_file.empty())
      io::write_conditions_hdf5(cfg.output_file, cfg, res.problems, res.trajectories, &res.output, "sensitivity");
    if (!env.is_root()) return 0;
    if (args.json)
      print_json(cfg, args, res);
    else
      print_text(cfg, args, res);
    return 0;
  }
  if (args.hessian) io::check_hessian_request(cfg, args.input);
  // SIGINT/SIGTERM stop at a step. The discrete adjoint of a native stepper
  // stopped in its reverse sweep keeps its place in the -o file (marked
  // partial), and --resume continues it to the same bits (io/resume.hpp);
  // a stop anywhere else keeps nothing.
  std::string why_not;
  const bool resumable = io::sensitivity_resumable(cfg, &why_not) && !args.hessian;
  if (args.hessian) why_not = "--hessian (the Hessian's products are not resumable)";
  io::AdjointResumeLink resume;
  if (!args.resume.empty()) {
    if (!resumable)
      throw Error("--resume " + args.resume + ": costate sensitivity resumes the discrete adjoint "
                  "of a native stepper only, not " + why_not);
    resume.from = std::make_shared<const ode::AdjointResume>(
        io::read_sensitivity_partial(args.resume, cfg));
    if (args.output.empty()) cfg.output_file = args.resume;
    if (env.is_root() && !args.quiet)
      std::cerr << "  (resuming " << args.resume << ": the reverse sweep at step "
                << resume.from->step << " of " << resume.from->steps.steps()
                << "; the steps below it replayed and reversed)\n";
  }
  const bool keep = resumable && env.is_root() && !cfg.output_file.empty();
  if (keep) resume.interrupted_at = std::make_shared<ode::AdjointResume>();
  io::InterruptHandler interrupts;
  cfg.integrator.on_step = io::interrupt_check("sensitivity");
  SensitivityResult res;
  try {
    res = compute(cfg, args, resume);
    if (resume.from) res.resumed_from_step = resume.from->step;
  } catch (const io::Interrupted& e) {
    std::string message = e.what();
    if (keep && resume.interrupted_at->step >= 0) {
      io::write_sensitivity_partial(cfg.output_file, cfg, *resume.interrupted_at, e.signal());
      message += "; wrote the adjoint's place (reverse sweep at step " +
                 std::to_string(resume.interrupted_at->step) + " of " +
                 std::to_string(resume.interrupted_at->steps.steps()) + ") to " +
                 cfg.output_file + ", marked partial; continue with: costate sensitivity " +
                 args.input + " --resume " + cfg.output_file + " (and the same --set options)";
    } else if (keep && resume.from) {
      message += "; stopped before the reverse sweep went on: " + args.resume +
                 " is unchanged; continue with: costate sensitivity " + args.input +
                 " --resume " + args.resume + " (and the same --set options)";
    } else if (keep) {
      message += "; stopped before the reverse sweep began: nothing to keep, rerun it";
    } else if (!cfg.output_file.empty() && !resumable) {
      message += "; nothing kept (not resumable: " + why_not + ")";
    }
    throw io::Interrupted(e.signal(), message);
  }
  io::check_sensitivity_results(cfg, res.trajectory, res.output);  // "ok" means finite
  if (env.is_root() && !cfg.output_file.empty())
    io::write_run_hdf5(cfg.output_file, cfg, res.trajectory, &res.output, "sensitivity");
  if (!env.is_root()) return 0;
  if (args.json)
    print_json(cfg, args, res);
  else
    print_text(cfg, args, res);
  return 0;
}

}  // namespace costate::cli
