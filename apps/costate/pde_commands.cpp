// `costate run|sensitivity|gradcheck` on PDE inputs: the equations of the
// `pde:` section become a pde::EquationModel, stepped by the θ-method
// (pde::ThetaIntegrator, PETSc KSP) on a distributed grid; the gradient is
// the discrete adjoint with the file's checkpoint schedule.
//
// Sample runs:
//   costate run data/examples/heat2d_kappa.yaml
//   mpiexec -n 2 costate sensitivity data/examples/heat2d_kappa.yaml --json
//   costate gradcheck data/examples/burgers.yaml
#include "pde_commands.hpp"

#include "pde_drive.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "costate/ad/verification.hpp"
#include "costate/tensor/reduce.hpp"
#include "costate/io/resources.hpp"

namespace costate::cli {
namespace detail {
/// `calibrate` on a PDE input: the MAP point of the calibration section's
/// parameter field (pde_invert.cpp). Collective. Returns 0 when converged,
/// 2 when stopped without converging.
int calibrate_pde(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                  const std::shared_ptr<const pde::EquationSystem>& system);
}  // namespace detail

bool is_pde_input(const std::string& path) { return io::is_pde_input(path); }

int pde_command(const Environment& env, const PdeArgs& args) {
  io::PdeConfig cfg = io::load_pde_config(args.input, args.sets);
  if (!args.output.empty()) cfg.output_file = args.output;
  // What PETSc cannot index or the machine cannot hold is refused before
  // any work (io/resources.hpp).
  io::check_pde_resources(cfg, args.command != "run", env.size());
  const auto system = std::make_shared<const pde::EquationSystem>(cfg.equations);
  try {
    // `calibrate`: the parameter-field inversion (pde_invert.cpp).
    if (args.command == "calibrate") return detail::calibrate_pde(env, args, cfg, system);
    // One translation unit per dimension (pde_commands_{1,2,3}d.cpp;
    // pde::dispatch::with_equation_components).
    const bool field = system->field_parameters() == 1;
    switch (system->dim()) {
      case 1: return field ? detail::drive_fields<1, 1>(env, args, cfg, system)
                           : detail::drive_fields<1, 0>(env, args, cfg, system);
      case 2: return field ? detail::drive_fields<2, 1>(env, args, cfg, system)
                           : detail::drive_fields<2, 0>(env, args, cfg, system);
      default: return field ? detail::drive_fields<3, 1>(env, args, cfg, system)
                            : detail::drive_fields<3, 0>(env, args, cfg, system);
    }
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

std::vector<std::string> coordinates(int dim) {
  std::vector<std::string> c{"x"};
  if (dim >= 2) c.emplace_back("y");
  if (dim >= 3) c.emplace_back("z");
  return c;
}

/// out(cell, c) = programs[c](x, [y, [z,]] parameters…, fields(cell)…) for
/// every owned cell of `grid`. `fields` (may be null) lives on a grid with
/// the same decomposition and `nfields` values per cell.
void evaluate_cells(const pde::Grid& grid, const std::vector<expr::Program>& programs,
                    const std::vector<double>& parameters, const pde::GlobalVector* fields, int nfields,
                    const pde::GlobalVector& out) {
  const pde::Box& o = grid.owned();
  const int dim = grid.dim(), dof = static_cast<int>(programs.size());
  std::vector<double> v(static_cast<std::size_t>(dim) + parameters.size() + static_cast<std::size_t>(nfields));
  std::size_t cell = 0;
  std::string bad;  // the first non-finite value on this rank
  for (std::int64_t k = o.start[2]; k < o.start[2] + o.count[2]; ++k)
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++cell) {
        const std::int64_t idx[3] = {i, j, k};
        std::size_t n = 0;
        for (int d = 0; d < dim; ++d) v[n++] = grid.coordinate(d, idx[d]);
        for (double p : parameters) v[n++] = p;
        for (int f = 0; f < nfields; ++f) v[n++] = (*fields)[cell * static_cast<std::size_t>(nfields) + static_cast<std::size_t>(f)];
        for (int c = 0; c < dof; ++c) {
          const double value = programs[static_cast<std::size_t>(c)].evaluate(std::span<const double>(v));
          out[cell * static_cast<std::size_t>(dof) + static_cast<std::size_t>(c)] = value;
          if (!std::isfinite(value) && bad.empty()) {
            std::ostringstream os;
            os.precision(6);
            os << "the expression '" << programs[static_cast<std::size_t>(c)].text() << "' is "
               << (std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf") << " at the cell centred at ";
            for (int d = 0; d < dim; ++d) os << (d ? ", " : "") << "xyz"[d] << " = " << v[static_cast<std::size_t>(d)];
            os << ": every initial value, parameter field and misfit datum on the grid must be finite";
            bad = os.str();
          }
        }
      }
  // Collective, so that every rank stops with the same message (the lowest
  // rank with a non-finite value reports it) instead of one rank failing
  // alone while the others wait in the solver.
  int rank = 0, size = 1;
  MPI_Comm_rank(grid.comm(), &rank);
  MPI_Comm_size(grid.comm(), &size);
  const int mine = bad.empty() ? size : rank;
  int first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, grid.comm());
  if (first == size) return;
  int length = static_cast<int>(bad.size());
  MPI_Bcast(&length, 1, MPI_INT, first, grid.comm());
  bad.resize(static_cast<std::size_t>(length));
  MPI_Bcast(bad.data(), length, MPI_CHAR, first, grid.comm());
  throw Error(bad);
}

std::vector<expr::Program> compile_all(const std::vector<std::string>& texts, const std::vector<std::string>& vars,
                                       const std::string& context, const std::vector<std::string>& keys) {
  std::vector<expr::Program> out;
  for (std::size_t i = 0; i < texts.size(); ++i)
    out.push_back(expr::Program::compile(texts[i], vars, context + "." + keys[i]));
  return out;
}

namespace {

/// Per-component integral, minimum and maximum of a field. Collective.
struct FieldStats {
  std::vector<double> integral, min, max;
};
FieldStats stats(const pde::Grid& g, const pde::GlobalVector& u) {
  FieldStats s;
  const int dof = g.dof();
  for (int c = 0; c < dof; ++c) {
    s.integral.push_back(pde::Objective::integral(c).evaluate(g, u, nullptr));
    double lo = INFINITY, hi = -INFINITY;
    for (std::size_t e = static_cast<std::size_t>(c); e < u.size(); e += static_cast<std::size_t>(dof)) {
      lo = std::min(lo, u[e]);
      hi = std::max(hi, u[e]);
    }
    s.min.push_back(global_min(g.comm(), lo));
    s.max.push_back(global_max(g.comm(), hi));
  }
  return s;
}

/// ‖v‖₂ (rank-ordered sum). Collective.
double norm2(const pde::Grid& g, const pde::GlobalVector& v) {
  double local = 0.0;
  for (std::size_t e = 0; e < v.size(); ++e) local += v[e] * v[e];
  return std::sqrt(global_sum(g.comm(), local));
}

/// The report's first entries (every command).
Json report_head(const io::PdeConfig& cfg, const pde::Grid& g) {
  Json j;
  j["status"] = "ok";
  j["model"] = "pde";
  j["fields"] = cfg.equations.fields;
  j["ranks"] = g.size();
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

/// A smooth, sign-changing direction of the size of `x` (natural order).
std::vector<double> direction_like(const std::vector<double>& x, double salt) {
  std::vector<double> d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    d[i] = std::sin(0.37 * static_cast<double>(i) + salt) * 0.5 * std::max(std::abs(x[i]), 1e-2);
  return d;
}

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

pde::Objective make_objective(const io::PdeConfig& cfg, const pde::Grid& g, const std::vector<std::string>& vars) {
  const pde::EquationSpec& eq = cfg.equations;
  pde::Objective objective;
  if (cfg.objective.kind == "integral") objective = pde::Objective::integral(cfg.objective.component);
  if (cfg.objective.kind == "probe") objective = pde::Objective::probe(cfg.objective.cell, cfg.objective.component);
  if (cfg.objective.kind == "misfit") {
    auto data = g.create_global("pde::data");
    evaluate_cells(g, compile_all(cfg.objective.data, vars, "objective.misfit", eq.fields), cfg.parameters, nullptr, 0,
                   data);
    objective = pde::Objective::misfit(data);
  }
  return objective;
}

int report_run(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
               const pde::GlobalVector& u, const pde::Objective& objective, std::int64_t krylov_iterations,
               pde::FieldWriter* out) {
  const pde::EquationSpec& eq = cfg.equations;
  const int dim = eq.dim;
  const double t_final = cfg.integrator.t0 + static_cast<double>(cfg.integrator.steps) * cfg.integrator.dt;
  std::ostringstream os;
  os.precision(12);
  Json j = report_head(cfg, g);
  const FieldStats s = stats(g, u);
  j["final_time"] = t_final;
  j["steps"] = cfg.integrator.steps;
  j["krylov_iterations"] = krylov_iterations;
  j["final_integrals"] = s.integral;
  double volume = 1.0;
  for (int d = 0; d < dim; ++d) volume *= g.spacing(d);
  j["cell_volume"] = volume;
  j["final_min"] = s.min;
  j["final_max"] = s.max;
  const double J = cfg.objective.present ? objective.evaluate(g, u, nullptr) : 0.0;
  if (cfg.objective.present) j["objective"] = J;
  if (out) {
    out->write_array("final_integrals", s.integral);
    if (cfg.objective.present) out->write_array("objective", std::vector<double>{J});
    out->finish();
  }
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  os << "integrated " << cfg.integrator.steps << " steps to t = " << t_final << " ("
     << krylov_iterations << " Krylov iterations)\n\n  field        integral            min                 max\n";
  for (std::size_t c = 0; c < eq.fields.size(); ++c)
    os << "  " << std::left << std::setw(12) << eq.fields[c] << std::setw(20) << s.integral[c] << std::setw(20)
       << s.min[c] << s.max[c] << "\n";
  if (cfg.objective.present) os << "\n  objective J = " << J << "\n";
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << " (+ .xmf)\n";
  return print_report(env, args, j, os);
}

int report_sensitivity(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
                       const pde::Grid* fg, const pde::ThetaGradient& r) {
  const pde::EquationSpec& eq = cfg.equations;
  const std::size_t nq = cfg.parameters.size();
  std::ostringstream os;
  os.precision(12);
  Json j = report_head(cfg, g);
  j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
  j["objective"] = r.objective;
  Json grad = Json::object();
  for (std::size_t m = 0; m < nq; ++m) grad[eq.parameters[m]] = r.wrt_parameters[m];
  j["gradient"] = grad;
  Json gf = Json::object();
  std::string field_line;
  if (fg != nullptr) {
    const FieldStats s = stats(*fg, r.wrt_fields);
    const double nrm = norm2(*fg, r.wrt_fields);
    gf[eq.parameter_fields[0]] = {{"norm", nrm}, {"sum_over_cells", s.integral[0]}, {"min", s.min[0]}, {"max", s.max[0]}};
    std::ostringstream line;
    line.precision(12);
    line << "  " << std::left << std::setw(22) << (eq.parameter_fields[0] + " (field)") << "norm " << nrm
         << ", sum " << s.integral[0] << ", range [" << s.min[0] << ", " << s.max[0] << "]\n";
    field_line = line.str();
  }
  j["gradient_fields"] = gf;
  j["gradient_initial_state_norm"] = norm2(g, r.wrt_initial_state);
  j["method"] = "discrete_adjoint";
  j["checkpointing"] = ode::to_string(cfg.checkpointing);
  j["steps"] = r.checkpoints.steps;
  j["forward_steps"] = r.forward_steps;
  j["recomputed_steps"] = r.checkpoints.recomputed_steps;
  j["checkpoints"] = r.checkpoints.peak_snapshots;
  j["krylov_iterations"] = r.krylov_iterations;
  j["adjoint_krylov_iterations"] = r.adjoint_krylov_iterations;
  os << "discrete adjoint (" << ode::to_string(cfg.checkpointing) << "): " << r.checkpoints.steps << " steps, "
     << r.forward_steps << " forward steps, " << r.checkpoints.peak_snapshots << " snapshots, "
     << r.adjoint_krylov_iterations << " adjoint Krylov iterations\n\n  objective J = " << r.objective << "\n\n  "
     << std::left << std::setw(22) << "dJ/d" << "value\n";
  for (std::size_t m = 0; m < nq; ++m) os << "  " << std::setw(22) << eq.parameters[m] << r.wrt_parameters[m] << "\n";
  os << field_line;
  if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << " (+ .xmf)\n";
  os << "  " << std::setw(22) << "u(t0) (fields)" << "norm " << norm2(g, r.wrt_initial_state) << "\n";
  return print_report(env, args, j, os);
}

int check_and_report_gradient(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                              const pde::Grid& g, const std::function<double(const std::vector<double>&)>& J,
                              const std::vector<double>& x, const std::vector<double>& grad,
                              const std::vector<std::string>& names, double objective) {
  const std::size_t nq = cfg.parameters.size();
  std::vector<double> dir(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    dir[i] = (i % 2 == 0 ? 1.0 : -0.7) * (0.5 + 0.25 * static_cast<double>(i % 3)) * std::max(std::abs(x[i]), 1e-2);
  for (std::size_t i = nq; i < x.size(); ++i) dir[i] = (i % 2 == 0 ? 1.0 : -0.7);  // field directions: O(1)
  const auto taylor = ad::taylor_test(J, x, dir, grad);
  // Central differences (h = 1e-6 relative): 1e-5 relative allows their
  // truncation and round-off, and the Newton/KSP tolerances (1e-10, 1e-14)
  // of the solves they difference.
  constexpr double kFdTol = 1e-5;
  const auto fd = ad::check_gradient(J, x, grad, {.rtol = kFdTol});
  const bool passed = taylor.passed && fd.passed;
  std::ostringstream os;
  os.precision(12);
  Json j = report_head(cfg, g);
  j["status"] = passed ? "ok" : "failed";
  j["objective"] = objective;
  j["taylor"] = {{"steps", taylor.steps},     {"residuals", taylor.residuals}, {"orders", taylor.orders},
                 {"min_order", taylor.min_order}, {"passed", taylor.passed}};
  Json comps = Json::object();
  for (std::size_t i = 0; i < x.size(); ++i) comps[names[i]] = {{"adjoint", grad[i]}, {"fd", fd.fd[i]}};
  j["finite_differences"] = {{"components", comps}, {"max_rel_error", fd.max_rel_error}, {"passed", fd.passed}};
  os << "Taylor test along a fixed direction (|J(x+hd) - J(x) - h<grad J, d>| should fall like h^2):\n"
     << taylor.report() << "\n\nCentral differences (fields along one smooth direction each):\n  " << std::left
     << std::setw(34) << "" << std::setw(22) << "adjoint" << "central difference\n";
  for (std::size_t i = 0; i < x.size(); ++i)
    os << "  " << std::setw(34) << names[i] << std::setw(22) << grad[i] << fd.fd[i] << "\n";
  os << fd.report() << "\n" << (passed ? "gradcheck: passed\n" : "gradcheck: FAILED\n");
  print_report(env, args, j, os);
  return passed ? 0 : 1;
}

}  // namespace costate::cli::detail
