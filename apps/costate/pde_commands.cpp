// `costate run|sensitivity|gradcheck` on PDE inputs: the equations of the
// `pde:` section become a pde::EquationModel, stepped by the θ-method
// (pde::ThetaIntegrator, PETSc KSP) on a distributed grid; the gradient is
// the discrete adjoint with the file's checkpoint schedule. The computation
// (and the HDF5 output) is the library's io::pde_run (costate/io/pde_run.hpp,
// the Python module's too); this file renders its PdeResult as text or JSON,
// and runs gradcheck's Taylor test and differences on the J it hands over.
//
// Sample runs:
//   costate run data/examples/heat2d_kappa.yaml
//   mpiexec -n 2 costate sensitivity data/examples/heat2d_kappa.yaml --json
//   costate gradcheck data/examples/burgers.yaml
#include "pde_commands.hpp"
#include "commands.hpp"

#include "pde_detail.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "costate/ad/verification.hpp"
#include "costate/io/pde_run.hpp"
#include "costate/io/resources.hpp"

namespace costate::cli {
namespace detail {
/// `calibrate` on a PDE input: the MAP point of the calibration section's
/// parameter field (pde_invert.cpp). Collective. Returns 0 when converged,
/// 2 when stopped without converging.
int calibrate_pde(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                  const std::shared_ptr<const pde::EquationSystem>& system);
int report_run(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const io::PdeResult& r);
int report_sensitivity(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                       const io::PdeResult& r);
int check_and_report_gradient(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                              const io::PdeGradcheckInputs& in);
}  // namespace detail

bool is_pde_input(const std::string& path) { return io::is_pde_input(path); }

int pde_command(const Environment& env, const PdeArgs& args) {
  io::PdeConfig cfg = io::load_pde_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  if (args.command != "calibrate") {
    // run, sensitivity, gradcheck: the library's io::pde_run, rendered here.
    io::PdeRunOptions options;
    options.command = args.command == "run"           ? io::PdeCommand::run
                      : args.command == "sensitivity" ? io::PdeCommand::sensitivity
                                                      : io::PdeCommand::gradcheck;
    options.on_setup = [&](const pde::Grid& g, bool linear) { detail::print_banner(env, args, cfg, g, linear); };
    options.gradcheck = [&](const io::PdeGradcheckInputs& in) {
      return detail::check_and_report_gradient(env, args, cfg, in);
    };
    const io::PdeResult r = io::pde_run(env.comm(), cfg, options);
    if (options.command == io::PdeCommand::run) return detail::report_run(env, args, cfg, r);
    if (options.command == io::PdeCommand::sensitivity) return detail::report_sensitivity(env, args, cfg, r);
    return r.status;
  }
  // `calibrate`: the parameter-field inversion (pde_invert.cpp). What PETSc
  // cannot index or the machine cannot hold is refused before any work
  // (io/resources.hpp).
  io::check_same_settings_on_every_rank(env.comm(), cfg);
  io::check_pde_resources(cfg, true, env.size());
  const auto system = std::make_shared<const pde::EquationSystem>(cfg.equations);
  try {
    return detail::calibrate_pde(env, args, cfg, system);
  } catch (const Error& e) {
    // Grid errors (too few cells for the stencil, a process layout or rank
    // count that does not fit) come from pde::Grid: name the input key.
    const std::string msg = e.what();
    if (msg.rfind("pde::Grid", 0) == 0) throw Error(args.input + ": pde.grid: " + msg);
    throw;
  }
}

}  // namespace costate::cli

namespace costate::cli::detail {

using Json = nlohmann::ordered_json;

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

namespace {

/// The report's first entries (every command).
Json report_head(const io::PdeConfig& cfg, int ranks) {
  Json j;
  j["status"] = "ok";
  j["model"] = "pde";
  j["fields"] = cfg.equations.fields;
  j["ranks"] = ranks;
  return j;
}

int print_report(const Environment& env, const PdeArgs& args, const Json& j, const std::ostringstream& os) {
  if (env.is_root()) {
    if (args.json)
      std::cout << j.dump() << std::endl;
    else
      std::cout << os.str();
  }
  return 0;
}

}  // namespace

void print_banner(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
                  bool linear) {
  if (!env.is_root() || args.quiet) return;
  const pde::EquationSpec& eq = cfg.equations;
  const int dim = eq.dim;
  std::cerr << "costate " << args.command << " " << args.input << "\n  pde        " << dim << "-D, cells ";
  for (int d = 0; d < dim; ++d) std::cerr << (d ? " x " : "") << g.cells(d);
  std::cerr << ", boundary ";
  for (int d = 0; d < dim; ++d) std::cerr << (d ? "/" : "") << pde::to_string(cfg.domain.boundary[static_cast<std::size_t>(d)]);
  std::cerr << "\n  fields     " << join(eq.fields) << (linear ? " (linear)" : "")
            << "\n  integrator " << cfg.method
            << (cfg.explicit_rk ? std::string(" (explicit Runge-Kutta)")
                                : " (theta = " + ::costate::detail::format_value(cfg.integrator.theta) + ")")
            << ", dt = " << cfg.integrator.dt << ", " << cfg.integrator.steps << " steps\n  ranks      "
            << g.size() << " (" << g.processes()[0];
  for (int d = 1; d < dim; ++d) std::cerr << " x " << g.processes()[static_cast<std::size_t>(d)];
  std::cerr << ")\n";
}

int report_run(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const io::PdeResult& r) {
  const pde::EquationSpec& eq = cfg.equations;
  std::ostringstream os;
  os.precision(12);
  Json j = report_head(cfg, r.ranks);
  j["final_time"] = r.final_time;
  j["steps"] = r.steps;
  j["krylov_iterations"] = r.krylov_iterations;
  j["final_integrals"] = r.final_integrals;
  j["cell_volume"] = r.cell_volume;
  j["final_min"] = r.final_min;
  j["final_max"] = r.final_max;
  if (cfg.objective.present) j["objective"] = r.objective;
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  os << "integrated " << r.steps << " steps to t = " << r.final_time << " ("
     << r.krylov_iterations << " Krylov iterations)\n\n  field        integral            min                 max\n";
  for (std::size_t c = 0; c < eq.fields.size(); ++c)
    os << "  " << std::left << std::setw(12) << eq.fields[c] << std::setw(20) << r.final_integrals[c]
       << std::setw(20) << r.final_min[c] << r.final_max[c] << "\n";
  if (cfg.objective.present) os << "\n  objective J = " << r.objective << "\n";
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << " (+ .xmf)\n";
  j["warnings"] = r.warnings;
  os << warnings_text(r.warnings);
  return print_report(env, args, j, os);
}

int report_sensitivity(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                       const io::PdeResult& r) {
  const pde::EquationSpec& eq = cfg.equations;
  const std::size_t nq = cfg.parameters.size();
  std::ostringstream os;
  os.precision(12);
  Json j = report_head(cfg, r.ranks);
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  j["objective"] = r.objective;
  Json grad = Json::object();
  for (std::size_t m = 0; m < nq; ++m) grad[eq.parameters[m]] = r.gradient[m];
  j["gradient"] = grad;
  Json gf = Json::object();
  std::string field_line;
  if (!eq.parameter_fields.empty()) {
    gf[eq.parameter_fields[0]] = {{"norm", r.gradient_field_norm},
                                  {"sum_over_cells", r.gradient_field_sum},
                                  {"min", r.gradient_field_min},
                                  {"max", r.gradient_field_max}};
    std::ostringstream line;
    line.precision(12);
    line << "  " << std::left << std::setw(22) << (eq.parameter_fields[0] + " (field)") << "norm "
         << r.gradient_field_norm << ", sum " << r.gradient_field_sum << ", range [" << r.gradient_field_min
         << ", " << r.gradient_field_max << "]\n";
    field_line = line.str();
  }
  j["gradient_fields"] = gf;
  j["gradient_initial_state_norm"] = r.gradient_initial_state_norm;
  j["method"] = "discrete_adjoint";
  j["checkpointing"] = ode::to_string(cfg.checkpointing);
  j["steps"] = r.steps;
  j["forward_steps"] = r.forward_steps;
  j["recomputed_steps"] = r.recomputed_steps;
  j["checkpoints"] = r.checkpoints;
  j["krylov_iterations"] = r.krylov_iterations;
  j["adjoint_krylov_iterations"] = r.adjoint_krylov_iterations;
  os << "discrete adjoint (" << ode::to_string(cfg.checkpointing) << "): " << r.steps << " steps, "
     << r.forward_steps << " forward steps, " << r.checkpoints << " snapshots, "
     << r.adjoint_krylov_iterations << " adjoint Krylov iterations\n\n  objective J = " << r.objective << "\n\n  "
     << std::left << std::setw(22) << "dJ/d" << "value\n";
  for (std::size_t m = 0; m < nq; ++m) os << "  " << std::setw(22) << eq.parameters[m] << r.gradient[m] << "\n";
  os << field_line;
  os << "  " << std::setw(22) << "u(t0) (fields)" << "norm " << r.gradient_initial_state_norm << "\n";
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << " (+ .xmf)\n";
  j["warnings"] = r.warnings;
  os << warnings_text(r.warnings);
  return print_report(env, args, j, os);
}

/// gradcheck: the Taylor test and central differences of J at x against
/// the adjoint gradient (components named in.names: the input's scalar
/// parameters, relative, then field directions), and the report.
/// Collective (J is). Returns 0 when both pass, else 1.
int check_and_report_gradient(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                              const io::PdeGradcheckInputs& in) {
  const std::size_t nq = cfg.parameters.size();
  const auto& J = in.objective_of;
  const std::vector<double>& x = in.x;
  const std::vector<double>& grad = in.gradient;
  std::vector<double> dir(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    dir[i] = (i % 2 == 0 ? 1.0 : -0.7) * (0.5 + 0.25 * static_cast<double>(i % 3)) * std::max(std::abs(x[i]), 1e-2);
  for (std::size_t i = nq; i < x.size(); ++i) dir[i] = (i % 2 == 0 ? 1.0 : -0.7);  // field directions: O(1)
  const auto taylor = ad::taylor_test(J, x, dir, grad);
  // Richardson differences per component, judged against the component,
  // the gradient's norm and their own spread: the gradient checks' one
  // mechanism (ad::check_gradient_with_noise, as for ODE and PEtab inputs).
  // The PDE's steps are fixed, so J is smooth down to its Newton/KSP
  // tolerances (1e-10, 1e-14): 1e-5 relative to the component or the norm,
  // from h0 = 1e-4 relative down 5 halvings (10 solves per component). A
  // point where the model cannot be solved is NaN to the differences
  // (skipped in their choice of step), not an error that hides the rest.
  constexpr double kFdTol = 1e-5, kLargestStep = 1e-4;
  constexpr int kSteps = 5;
  auto J_or_nan = [&](const std::vector<double>& xx) {
    try {
      return J(xx);
    } catch (const Error&) {
      return std::numeric_limits<double>::quiet_NaN();
    }
  };
  const auto fd = ad::check_gradient_with_noise(J_or_nan, x, grad, kLargestStep, kSteps,
                                                {.rtol = kFdTol, .norm_rtol = kFdTol, .spread_factor = 3.0});
  const bool passed = taylor.passed && fd.passed;
  std::ostringstream os;
  os.precision(12);
  Json j = report_head(cfg, in.grid->size());
  j["status"] = passed ? "ok" : "failed";
  j["objective"] = in.objective;
  j["taylor"] = {{"steps", taylor.steps},     {"residuals", taylor.residuals}, {"orders", taylor.orders},
                 {"min_order", taylor.min_order}, {"passed", taylor.passed}};
  Json comps = Json::object();
  std::vector<std::string> floor;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool at_floor = fd.at_noise_floor[i] != 0;
    comps[in.names[i]] = {{"adjoint", grad[i]}, {"fd", fd.fd[i]}, {"tolerance", fd.tolerance[i]},
                          {"at_noise_floor", at_floor}};
    if (at_floor) floor.push_back(in.names[i]);
  }
  j["finite_differences"] = {{"components", comps}, {"max_rel_error", fd.max_rel_error},
                             {"at_noise_floor", floor}, {"passed", fd.passed}};
  os << "Taylor test along a fixed direction (|J(x+hd) - J(x) - h<grad J, d>| should fall like h^2):\n"
     << taylor.report() << "\n\nCentral differences, Richardson-extrapolated, the step chosen where they "
     << "agree (fields along one smooth direction each):\n  " << std::left
     << std::setw(34) << "" << std::setw(22) << "adjoint" << "central difference\n";
  for (std::size_t i = 0; i < x.size(); ++i)
    os << "  " << std::setw(34) << in.names[i] << std::setw(22) << grad[i] << fd.fd[i] << "\n";
  os << fd.report();
  if (!floor.empty()) os << "at the noise floor: " << fd.noise_floor_names(in.names) << "\n";
  os << "\n" << (passed ? "gradcheck: passed\n" : "gradcheck: FAILED\n");
  j["warnings"] = in.warnings;
  os << warnings_text(in.warnings);
  print_report(env, args, j, os);
  return passed ? 0 : 1;
}

}  // namespace costate::cli::detail
