// `costate sensitivity FILE.yaml [-o OUT.h5] [--json] [--set key=value]...
// [--hessian] [--check] [-q]`: the objective of the file's `objective:` section and
// its gradient by sensitivity.method (with --hessian also ∂²J/∂p² over
// sensitivity.wrt), the trajectory and /sensitivity written to HDF5.
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "costate/ad/verification.hpp"
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

/// sensitivity --check: ⟨∇J, v⟩ along one random direction v against a
/// Richardson central difference of J re-integrated at p + h v (the
/// objective as `run` computes it, the steps chosen anew — so a gradient
/// that ignores the step-size controller shows).
struct DirectionalCheck {
  std::uint64_t seed = 0;
  std::vector<double> direction;  ///< v over sensitivity.wrt: ±(0.5…1)·max(|p_i|, 1e-3)
  double directional_derivative = 0.0;  ///< ⟨∇J, v⟩
  ad::Difference difference;            ///< d/dh J(p + h v) at 0, its step and spread
  double relative_error = 0.0;
  bool within_noise = false;  ///< |⟨∇J, v⟩ − difference| ≤ kSpread·spread
  bool passed = false;        ///< within kCheckRtol relative, or within the noise
  int evaluations = 0;
};

/// The check's seed, its ladder (h₀ relative to the direction, halvings),
/// and its tolerance: the difference of an adaptively integrated J is
/// resolved only to about the tolerances, so 1e-3 relative plus kSpread
/// times the difference's own spread.
constexpr std::uint64_t kCheckSeed = 20261206;
constexpr double kCheckStep = 1e-2;
constexpr int kCheckSteps = 5;
constexpr double kCheckRtol = 1e-3, kSpread = 3.0;

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
  std::optional<DirectionalCheck> check;  ///< with --check
};

DirectionalCheck directional_check(const io::RunConfig& cfg, const std::vector<std::size_t>& wrt,
                                   const std::vector<double>& gradient) {
  DirectionalCheck c;
  c.seed = kCheckSeed;
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<double> size(0.5, 1.0);
  const std::size_t m = wrt.size();
  c.direction.resize(m);
  for (std::size_t k = 0; k < m; ++k) {
    const double sign = (rng() & 1U) ? 1.0 : -1.0;
    c.direction[k] = sign * size(rng) * std::max(std::abs(cfg.parameters[wrt[k]]), 1e-3);
    c.directional_derivative += gradient[k] * c.direction[k];
  }
  // J(p + h v), integrated afresh (initial values given as expressions
  // follow the parameters).
  auto J = [&](double h) {
    io::RunConfig at = cfg;
    for (std::size_t k = 0; k < m; ++k) at.parameters[wrt[k]] += h * c.direction[k];
    io::evaluate_initial_state(at);
    ++c.evaluations;
    try {
      return io::file_gradient(at, at.parameters, at.initial_state).result.objective;
    } catch (const io::Interrupted&) {
      throw;
    } catch (const Error&) {
      return std::numeric_limits<double>::quiet_NaN();  // skipped by the difference
    }
  };
  double pmax = 0.0;
  for (std::size_t k = 0; k < m; ++k) pmax = std::max(pmax, std::abs(c.direction[k]));
  c.difference = ad::richardson_difference(J, kCheckStep * std::max(1.0, pmax) / pmax, kCheckSteps);
  // One component: no norm floor, the spread is the noise.
  const ad::GradientCheckResult r = ad::check_against_differences(
      {c.directional_derivative}, {c.difference},
      {.rtol = kCheckRtol, .norm_rtol = 0.0, .spread_factor = kSpread});
  c.relative_error = r.rel_error[0];
  c.within_noise = r.abs_error[0] <= kSpread * c.difference.spread;
  c.passed = r.passed;
  return c;
}

std::string check_text(const DirectionalCheck& c) {
  std::ostringstream os;
  os.precision(6);
  os << "check along a random direction v (seed " << c.seed << ", " << c.evaluations
     << " integrations): <grad J, v> = " << c.directional_derivative
     << ", central difference of J = " << c.difference.value << " +- " << c.difference.spread
     << " (h = " << c.difference.step << "); relative error " << std::setprecision(3)
     << c.relative_error << (c.within_noise ? ", within the difference's noise" : "") << ": "
     << (c.passed ? "agrees" : "DISAGREES");
  return os.str();
}

std::string check_warning(const DirectionalCheck& c) {
  std::ostringstream os;
  os.precision(3);
  os << "sensitivity --check: the gradient disagrees with a central difference of the objective "
        "along a random direction (relative error "
     << c.relative_error << ", beyond the difference's noise): it is not the derivative of J as "
        "integrated; with an explicit adaptive method on a stiff problem use integrator.method: "
        "bdf, otherwise tighten integrator.rtol/atol and compare sensitivity.method forward";
  return os.str();
}

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
/// with --hessian Σ_c P_cᵀ H_c P_c over the wrt parameters, and every
/// condition's trajectory.
SensitivityResult compute_conditions(const io::RunConfig& cfg, bool hessian) {
  SensitivityResult res;
  std::vector<ode::StepPlan> steps;
  res.gradient = io::conditions_gradient(cfg, &res.objectives, &steps);
  const std::vector<std::size_t> wrt = io::wrt_indices(cfg);
  if (hessian) res.hessian = io::conditions_hessian(cfg, wrt, steps);
  for (std::size_t c = 0; c < cfg.conditions.size(); ++c) {
    res.problems.push_back(io::condition_config(cfg, c));
    res.trajectories.push_back(io::integrate_file(res.problems.back()));
    if (!res.trajectories.back().summary.success())
      throw Error("integration of " + cfg.input_path + ", condition '" + cfg.conditions[c].id +
                  "', failed: " + res.trajectories.back().summary.message);
  }
  res.trajectory = res.trajectories.front();
  fill_output(cfg, res, wrt, hessian);
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
  if (args.check) res.check = directional_check(cfg, wrt_index, res.output.gradient);
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
  if (res.check) {
    const DirectionalCheck& c = *res.check;
    Json dir = Json::object();
    for (std::size_t k = 0; k < c.direction.size(); ++k) dir[out.parameter_names[k]] = c.direction[k];
    j["check"] = {{"seed", c.seed},
                  {"direction", dir},
                  {"directional_derivative", c.directional_derivative},
                  {"difference", c.difference.value},
                  {"spread", c.difference.spread},
                  {"step", c.difference.step},
                  {"relative_error", c.relative_error},
                  {"within_noise", c.within_noise},
                  {"evaluations", c.evaluations},
                  {"passed", c.passed}};
    if (!c.passed) j["status"] = "check_failed";
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
  if (res.check) os << "\n  " << check_text(*res.check) << "\n";
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
  if (args.check && (is_petab_input(args.input) || is_pde_input(args.input)))
    throw Error(args.input + ": costate sensitivity --check is for ODE inputs (a 'model:' "
                "section) in this version; use costate gradcheck " + args.input);
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
    // A file with conditions: the summed gradient (and Hessian); no resume.
    if (!args.resume.empty()) io::require_single_condition(cfg, "costate sensitivity --resume");
    if (args.check) io::require_single_condition(cfg, "costate sensitivity --check");
    if (args.hessian) io::check_hessian_request(cfg, args.input);
    SensitivityResult res = compute_conditions(cfg, args.hessian);
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
  // The gradient's forward pass is the run's integration: its summary says
  // whether dopri5 found the problem stiff.
  add_integration_warnings(res.gradient.result.summary, cfg.warnings);
  if (res.check && !res.check->passed) cfg.warnings.push_back(check_warning(*res.check));
  if (env.is_root() && !cfg.output_file.empty())
    io::write_run_hdf5(cfg.output_file, cfg, res.trajectory, &res.output, "sensitivity");
  if (!env.is_root()) return res.check && !res.check->passed ? 1 : 0;
  if (args.json)
    print_json(cfg, args, res);
  else
    print_text(cfg, args, res);
  return res.check && !res.check->passed ? 1 : 0;
}

}  // namespace costate::cli
