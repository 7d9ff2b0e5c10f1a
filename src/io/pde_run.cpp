// io::pde_run (pde_run.hpp): the dispatch to the per-dimension model
// instantiations (pde_run_{1,2,3}d.cpp, pde_run_model.hpp) and everything
// that does not need the model, compiled once: the cellwise setup
// (pde_cells.hpp), the statistics, gathering, the interrupt poll.
#include "costate/io/pde_run.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <span>
#include <sstream>
#include <utility>

#include "costate/io/pde_cells.hpp"
#include "costate/io/resources.hpp"
#include "costate/tensor/reduce.hpp"
#include "pde_run_model.hpp"

namespace costate::io {

std::string to_string(PdeCommand c) {
  switch (c) {
    case PdeCommand::run: return "run";
    case PdeCommand::sensitivity: return "sensitivity";
    case PdeCommand::gradcheck: return "gradcheck";
  }
  return "?";
}

void check_same_settings_on_every_rank(MPI_Comm comm, const PdeConfig& cfg) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  const std::string mine = cfg.to_yaml();
  // FNV-1a of the resolved settings: one number per rank, gathered.
  std::uint64_t hash = 1469598103934665603ull;
  for (const unsigned char c : mine) hash = (hash ^ c) * 1099511628211ull;
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(size));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm);
  int other = 0;
  for (int r = 1; r < size && other == 0; ++r)
    if (hashes[static_cast<std::size_t>(r)] != hashes[0]) other = r;
  if (other == 0) return;
  // Rank 0's text and the differing rank's, on every rank, for one message.
  auto text_of = [&](int root) {
    std::string text = rank == root ? mine : std::string();
    int length = static_cast<int>(text.size());
    MPI_Bcast(&length, 1, MPI_INT, root, comm);
    text.resize(static_cast<std::size_t>(length));
    MPI_Bcast(text.data(), length, MPI_CHAR, root, comm);
    return text;
  };
  const std::string first = text_of(0), second = text_of(other);
  std::istringstream a(first), b(second);
  std::string la, lb;
  // The keys enclosing the current line, by indentation, to name the first
  // difference by its full key (grid.n).
  std::vector<std::pair<std::size_t, std::string>> parents;
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(' '));
    return s;
  };
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a) la = "(end of settings)";
    if (!more_b) lb = "(end of settings)";
    if (la != lb || (!more_a && !more_b)) break;
    const std::size_t indent = la.find_first_not_of(' ');
    while (!parents.empty() && parents.back().first >= indent) parents.pop_back();
    const std::string key = trim(la).substr(0, trim(la).find(':'));
    if (la.find(':') != std::string::npos && trim(la).back() == ':') parents.emplace_back(indent, key);
  }
  std::string where;
  for (const auto& p : parents) where += p.second + ".";
  throw Error(cfg.input_path + ": the MPI ranks resolved different settings: rank " + std::to_string(other) +
              " has '" + where + trim(lb) + "' where rank 0 has '" + where + trim(la) +
              "'; every rank must read the same input with the same --set options");
}

PdeResult pde_run(MPI_Comm comm, const PdeConfig& cfg, const PdeRunOptions& options) {
  check_same_settings_on_every_rank(comm, cfg);
  int size = 1;
  MPI_Comm_size(comm, &size);
  // What PETSc cannot index or the machine cannot hold is refused before
  // any work (io/resources.hpp).
  check_pde_resources(cfg, options.command != PdeCommand::run, size);
  const auto system = std::make_shared<const pde::EquationSystem>(cfg.equations);
  try {
    const bool field = system->field_parameters() == 1;
    switch (system->dim()) {
      case 1: return field ? detail::run_fields<1, 1>(comm, cfg, options, system)
                           : detail::run_fields<1, 0>(comm, cfg, options, system);
      case 2: return field ? detail::run_fields<2, 1>(comm, cfg, options, system)
                           : detail::run_fields<2, 0>(comm, cfg, options, system);
      default: return field ? detail::run_fields<3, 1>(comm, cfg, options, system)
                            : detail::run_fields<3, 0>(comm, cfg, options, system);
    }
  } catch (const Error& e) {
    // Grid errors (too few cells for the stencil, a process layout or rank
    // count that does not fit) come from pde::Grid: name the input key.
    const std::string msg = e.what();
    if (msg.rfind("pde::Grid", 0) == 0) throw Error(cfg.input_path + ": pde.grid: " + msg);
    throw;
  }
}

// ---- pde_cells.hpp -----------------------------------------------------------

std::vector<std::string> pde_coordinates(int dim) {
  std::vector<std::string> c{"x"};
  if (dim >= 2) c.emplace_back("y");
  if (dim >= 3) c.emplace_back("z");
  return c;
}

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

pde::Objective make_pde_objective(const PdeConfig& cfg, const pde::Grid& g, const std::vector<std::string>& vars) {
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

}  // namespace costate::io

// ---- pde_run_model.hpp's model-independent parts -------------------------------

namespace costate::io::detail {

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

bool is_root(const pde::Grid& g) {
  int rank = 0;
  MPI_Comm_rank(g.comm(), &rank);
  return rank == 0;
}

}  // namespace

std::vector<double> gather_on_root(const pde::Grid& g, const pde::GlobalVector& v) {
  std::vector<double> all = g.gather(v);
  if (!is_root(g)) return {};
  return all;
}

std::vector<double> direction_like(const std::vector<double>& x, double salt) {
  std::vector<double> d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    d[i] = std::sin(0.37 * static_cast<double>(i) + salt) * 0.5 * std::max(std::abs(x[i]), 1e-2);
  return d;
}

void pde_setup(PdeResult& r, const PdeRunOptions& options, const PdeConfig& cfg, const pde::Grid& g, bool linear) {
  r.command = options.command;
  r.dim = g.dim();
  for (int d = 0; d < r.dim; ++d) {
    const auto D = static_cast<std::size_t>(d);
    r.cells[D] = g.cells(d);
    r.spacing[D] = g.spacing(d);
    r.origin[D] = cfg.domain.extent[D][0];
  }
  r.processes = g.processes();
  r.ranks = g.size();
  r.linear = linear;
  r.fields = cfg.equations.fields;
  r.parameter_names = cfg.equations.parameters;
  r.parameter_field_names = cfg.equations.parameter_fields;
  r.steps = cfg.integrator.steps;
  r.final_time = cfg.integrator.t0 + static_cast<double>(cfg.integrator.steps) * cfg.integrator.dt;
  double volume = 1.0;
  for (int d = 0; d < r.dim; ++d) volume *= g.spacing(d);
  r.cell_volume = volume;
  r.has_objective = cfg.objective.present;
  if (options.on_setup) options.on_setup(g, linear);
}

void pde_poll(const PdeRunOptions& options, MPI_Comm comm) {
  if (!options.interrupted) return;
  int mine = options.interrupted() ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_LOR, comm);
  if (any) throw PdeInterrupted();
}

void PdeFrames::write(double t, const pde::GlobalVector& u) {
  if (out_) out_->write_frame(t, u);
  if (r_) {
    r_->times.push_back(t);
    std::vector<double> all = gather_on_root(g_, u);
    if (!all.empty()) r_->frames.push_back(std::move(all));
  }
}

void pde_finish_run(PdeResult& r, const PdeConfig& cfg, const pde::Grid& g, const pde::GlobalVector& u,
                    const pde::Objective& objective, std::int64_t krylov_iterations, pde::FieldWriter* out) {
  const FieldStats s = stats(g, u);
  r.krylov_iterations = krylov_iterations;
  r.final_integrals = s.integral;
  r.final_min = s.min;
  r.final_max = s.max;
  r.objective = cfg.objective.present ? objective.evaluate(g, u, nullptr) : 0.0;
  if (out) {
    out->write_array("final_integrals", s.integral, cfg.equations.fields);  // one per field, in order
    if (cfg.objective.present) out->write_array("objective", std::vector<double>{r.objective});
    out->finish();
    r.output_file = cfg.output_file;
  }
}

void pde_finish_gradient(PdeResult& r, const PdeRunOptions& options, const PdeConfig& cfg, const pde::Grid& g,
                         const pde::Grid* fg, const pde::ThetaGradient& t) {
  const std::size_t nq = cfg.parameters.size();
  r.objective = t.objective;
  r.gradient.assign(t.wrt_parameters.begin(), t.wrt_parameters.begin() + static_cast<std::ptrdiff_t>(nq));
  if (fg != nullptr) {
    const FieldStats s = stats(*fg, t.wrt_fields);
    r.gradient_field_norm = norm2(*fg, t.wrt_fields);
    r.gradient_field_sum = s.integral[0];
    r.gradient_field_min = s.min[0];
    r.gradient_field_max = s.max[0];
    if (options.gather) r.gradient_field = gather_on_root(*fg, t.wrt_fields);
  }
  r.gradient_initial_state_norm = norm2(g, t.wrt_initial_state);
  if (options.gather) r.gradient_initial_state = gather_on_root(g, t.wrt_initial_state);
  r.steps = t.checkpoints.steps;
  r.forward_steps = t.forward_steps;
  r.recomputed_steps = t.checkpoints.recomputed_steps;
  r.checkpoints = t.checkpoints.peak_snapshots;
  r.krylov_iterations = t.krylov_iterations;
  r.adjoint_krylov_iterations = t.adjoint_krylov_iterations;
  r.seconds = t.seconds;
}

}  // namespace costate::io::detail
