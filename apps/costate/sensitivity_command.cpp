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
/// that ignores the step-size controller shows). A file with conditions:
/// J = Σ_c J_c and its summed gradient, every condition re-integrated.
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

/// What the command computed (io::conditions_sensitivity: a file without
/// conditions is its one condition).
struct SensitivityResult {
  ode::Solution trajectory;       ///< the first condition's (for the file)
  io::FileGradient gradient;      ///< J and ∇J (summed over the conditions)
  io::FileHessian hessian;        ///< with --hessian
  io::SensitivityOutput output;   ///< the reported (wrt) gradient, as written
  std::int64_t resumed_from_step = -1;  ///< --resume: the sweep's place, else −1
  std::int64_t resumed_from_condition = -1;  ///< --resume of a file with conditions, else −1
  /// Each condition's problem, trajectory and J_c.
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
    try {  // J = Σ_c J_c over a file's conditions (the file itself without them)
      return io::conditions_gradient(at).result.objective;
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

/// 1. Each condition's trajectory, gradient (from `from` when resuming;
/// `at` kept at the place reached) and with --hessian the Hessian, summed
/// over the conditions; 2. with --check the directional check of the sum.
SensitivityResult compute(const io::RunConfig& cfg, const CommandArgs& args, const io::ConditionsPlace* from,
                          io::ConditionsPlace* at) {
  const std::vector<std::size_t> wrt = io::wrt_indices(cfg);
  io::ConditionsSensitivity s = io::conditions_sensitivity(
      cfg, {.trajectories = true, .hessian_wrt = args.hessian ? &wrt : nullptr, .resume_from = from,
            .interrupted_at = at});
  SensitivityResult res;
  res.problems = std::move(s.problems);
  res.trajectories = std::move(s.trajectories);
  res.objectives = std::move(s.objectives);
  res.gradient = std::move(s.gradient);
  res.hessian = std::move(s.hessian);
  res.output = std::move(s.output);
  res.trajectory = res.trajectories.front();
  if (args.check) res.check = directional_check(cfg, wrt, res.output.gradient);
  return res;
}

/// Where a place is, in words: "reverse sweep at step s of l" or, for a file
/// with conditions, "condition 'b' (2 of 4), …".
std::string place_text(const io::RunConfig& cfg, const io::ConditionsPlace& p) {
  const bool sweep = p.sweep && p.sweep->step >= 0;
  const std::string at_sweep = sweep ? "reverse sweep at step " + std::to_string(p.sweep->step) + " of " +
                                           std::to_string(p.sweep->steps.steps())
                                     : "";
  if (cfg.conditions.empty()) return at_sweep;
  const std::size_t nc = cfg.conditions.size();
  if (p.condition >= nc) return "every condition's gradient done, the trajectories not written";
  return std::to_string(p.condition) + " of " + std::to_string(nc) + " conditions done, condition '" +
         cfg.conditions[p.condition].id + "' " + (sweep ? "at its " + at_sweep : "not begun");
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
  if (!cfg.conditions.empty()) {  // a file with conditions: J = Σ_c J_c
    Json rows = Json::array();
    for (std::size_t c = 0; c < res.objectives.size(); ++c)
      rows.push_back({{"id", cfg.conditions[c].id}, {"objective", res.objectives[c]}});
    j["conditions"] = rows;
  }
  j["method"] = r.method;
  // --resume: the step the reverse sweep was continued from (the counts
  // below are this process's: the steps below it).
  j["resumed_from_step"] = res.resumed_from_step >= 0 ? Json(res.resumed_from_step) : Json(nullptr);
  if (!cfg.conditions.empty())  // the first condition this process computed (its index)
    j["resumed_from_condition"] =
        res.resumed_from_condition >= 0 ? Json(res.resumed_from_condition) : Json(nullptr);
  j["steps"] = out.steps;
  j["forward_steps"] = out.forward_steps;
  j["recomputed_steps"] = out.recomputed_steps;
  // The adjoint's own backward integration (continuous, CVODES, IDAS;
  // 0 for a discrete adjoint's sweep and forward sensitivities).
  j["backward_steps"] = r.backward_steps;
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
  if (!cfg.conditions.empty()) {
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
  if (args.hessian) io::check_hessian_request(cfg, args.input);
  // SIGINT/SIGTERM stop at a step. The discrete adjoint of a native stepper
  // stopped in its reverse sweep keeps its place in the -o file (marked
  // partial) — with conditions also the conditions done and their sums —
  // and --resume continues it to the same bits (io/resume.hpp); a stop
  // anywhere else keeps nothing beyond the conditions done.
  std::string why_not;
  const bool resumable = io::sensitivity_resumable(cfg, &why_not) && !args.hessian;
  if (args.hessian) why_not = "--hessian (the Hessian's products are not resumable)";
  io::ConditionsPlace from;  // a fresh run's: the start
  const bool resuming = !args.resume.empty();
  if (resuming) {
    if (!resumable)
      throw Error("--resume " + args.resume + ": costate sensitivity resumes the discrete adjoint "
                  "of a native stepper only, not " + why_not);
    from = io::read_sensitivity_partial(args.resume, cfg);
    if (args.output.empty()) cfg.output_file = args.resume;
    if (env.is_root() && !args.quiet)
      std::cerr << "  (resuming " << args.resume << ": " << place_text(cfg, from)
                << (from.sweep ? "; the steps below it replayed and reversed" : "") << ")\n";
  }
  const bool keep = resumable && env.is_root() && !cfg.output_file.empty();
  io::ConditionsPlace at;
  io::InterruptHandler interrupts;
  cfg.integrator.on_step = io::interrupt_check("sensitivity");
  SensitivityResult res;
  try {
    res = compute(cfg, args, resuming ? &from : nullptr, keep ? &at : nullptr);
    if (from.sweep) res.resumed_from_step = from.sweep->step;
    if (resuming && !cfg.conditions.empty()) res.resumed_from_condition = static_cast<std::int64_t>(from.condition);
  } catch (const io::Interrupted& e) {
    std::string message = e.what();
    const std::string again = "costate sensitivity " + args.input + " --resume ";
    if (keep && at.ahead_of(from)) {
      io::write_sensitivity_partial(cfg.output_file, cfg, at, e.signal());
      message += "; wrote " + std::string(cfg.conditions.empty() ? "the adjoint's place (" : "its place (") +
                 place_text(cfg, at) + ") to " + cfg.output_file + ", marked partial; continue with: " + again +
                 cfg.output_file + " (and the same --set options)";
    } else if (keep && resuming) {
      message += "; stopped before the reverse sweep went on: " + args.resume + " is unchanged; continue with: " +
                 again + args.resume + " (and the same --set options)";
    } else if (keep) {
      message += "; stopped before the reverse sweep began: nothing to keep, rerun it";
    } else if (!cfg.output_file.empty() && !resumable) {
      message += "; nothing kept (not resumable: " + why_not + ")";
    } else {
      message += "; nothing kept (no -o file to keep the adjoint's place in): rerun it";
    }
    throw io::Interrupted(e.signal(), message);
  }
  if (!cfg.conditions.empty())
    for (std::size_t c = 0; c < res.problems.size(); ++c)
      io::check_finite_trajectory(res.problems[c], res.trajectories[c],
                                  "sensitivity, condition '" + cfg.conditions[c].id + "'");
  io::check_sensitivity_results(cfg, res.trajectory, res.output);  // "ok" means finite
  // The gradient's forward pass is the run's integration: its summary says
  // whether dopri5 found the problem stiff (the first condition's).
  add_integration_warnings(res.gradient.result.summary, cfg.warnings);
  if (res.check && !res.check->passed) cfg.warnings.push_back(check_warning(*res.check));
  if (env.is_root() && !cfg.output_file.empty()) {
    if (cfg.conditions.empty())
      io::write_run_hdf5(cfg.output_file, cfg, res.trajectory, &res.output, "sensitivity");
    else
      io::write_conditions_hdf5(cfg.output_file, cfg, res.problems, res.trajectories, &res.output, "sensitivity");
  }
  if (!env.is_root()) return res.check && !res.check->passed ? 1 : 0;
  if (args.json)
    print_json(cfg, args, res);
  else
    print_text(cfg, args, res);
  return res.check && !res.check->passed ? 1 : 0;
}

}  // namespace costate::cli
