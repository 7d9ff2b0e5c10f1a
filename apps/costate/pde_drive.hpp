#pragma once
// The PDE command driver, generic over the stencil model (included by the
// per-dimension translation units pde_commands_{1,2,3}d.cpp, each of which
// instantiates drive_dim<D>: every pde::EquationModel of that dimension).

#include "pde_commands.hpp"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "costate/ad/verification.hpp"
#include "costate/expr/program.hpp"
#include "costate/pde/equation_model.hpp"
#include "costate/pde/output.hpp"
#include "costate/pde/theta.hpp"
#include "costate/tensor/reduce.hpp"
#include "io/pde_input.hpp"

namespace costate::cli::detail {

using Json = nlohmann::ordered_json;

inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

inline std::vector<std::string> coordinates(int dim) {
  std::vector<std::string> c{"x"};
  if (dim >= 2) c.emplace_back("y");
  if (dim >= 3) c.emplace_back("z");
  return c;
}

/// out(cell, c) = programs[c](x, [y, [z,]] parameters…, fields(cell)…) for
/// every owned cell of `grid`. `fields` (may be null) lives on a grid with
/// the same decomposition and `nfields` values per cell.
inline void evaluate_cells(const pde::Grid& grid, const std::vector<expr::Program>& programs,
                    const std::vector<double>& parameters, const pde::GlobalVector* fields, int nfields,
                    const pde::GlobalVector& out) {
  const pde::Box& o = grid.owned();
  const int dim = grid.dim(), dof = static_cast<int>(programs.size());
  std::vector<double> v(static_cast<std::size_t>(dim) + parameters.size() + static_cast<std::size_t>(nfields));
  std::size_t cell = 0;
  for (std::int64_t k = o.start[2]; k < o.start[2] + o.count[2]; ++k)
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++cell) {
        const std::int64_t idx[3] = {i, j, k};
        std::size_t n = 0;
        for (int d = 0; d < dim; ++d) v[n++] = grid.coordinate(d, idx[d]);
        for (double p : parameters) v[n++] = p;
        for (int f = 0; f < nfields; ++f) v[n++] = (*fields)[cell * static_cast<std::size_t>(nfields) + static_cast<std::size_t>(f)];
        for (int c = 0; c < dof; ++c)
          out[cell * static_cast<std::size_t>(dof) + static_cast<std::size_t>(c)] =
              programs[static_cast<std::size_t>(c)].evaluate(std::span<const double>(v));
      }
}

inline std::vector<expr::Program> compile_all(const std::vector<std::string>& texts, const std::vector<std::string>& vars,
                                       const std::string& context, const std::vector<std::string>& keys) {
  std::vector<expr::Program> out;
  for (std::size_t i = 0; i < texts.size(); ++i)
    out.push_back(expr::Program::compile(texts[i], vars, context + "." + keys[i]));
  return out;
}

/// Per-component integral, minimum and maximum of a field. Collective.
struct FieldStats {
  std::vector<double> integral, min, max;
};
inline FieldStats stats(const pde::Grid& g, const pde::GlobalVector& u) {
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
inline double norm2(const pde::Grid& g, const pde::GlobalVector& v) {
  double local = 0.0;
  for (std::size_t e = 0; e < v.size(); ++e) local += v[e] * v[e];
  return std::sqrt(global_sum(g.comm(), local));
}

/// A smooth, sign-changing direction of the size of `x` (natural order).
inline std::vector<double> direction_like(const std::vector<double>& x, double salt) {
  std::vector<double> d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    d[i] = std::sin(0.37 * static_cast<double>(i) + salt) * 0.5 * std::max(std::abs(x[i]), 1e-2);
  return d;
}

/// Integrates u over all steps, writing frames at t0, every `output.every`
/// steps (0: none between) and at the end when `out` is given. Collective.
template <class Integrator>
void integrate_with_frames(Integrator& integ, const pde::GlobalVector& u, const io::PdeConfig& cfg,
                           pde::FieldWriter* out) {
  const auto& o = cfg.integrator;
  if (out) out->write_frame(o.t0, u);
  for (std::int64_t n = 0; n < o.steps; ++n) {
    integ.step(u, n);
    const bool last = n + 1 == o.steps;
    if (out && (last || (cfg.output_every > 0 && (n + 1) % cfg.output_every == 0)))
      out->write_frame(o.t0 + static_cast<double>(n + 1) * o.dt, u);
  }
}

template <class Model>
int drive(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, Model model) {
  const pde::EquationSpec& eq = cfg.equations;
  const int dim = eq.dim;
  const std::size_t nq = cfg.parameters.size();
  const bool talk = env.is_root() && !args.quiet;
  // 1. The operator on the distributed grid, parameters padded.
  std::vector<double> q(cfg.parameters);
  q.resize(static_cast<std::size_t>(Model::scalar_parameters), 0.0);
  pde::Operator<Model> op(env.comm(), cfg.domain, model, q);
  const pde::Grid& g = op.grid();
  if (talk) {
    std::cerr << "costate " << args.command << " " << args.input << "\n  pde        " << dim << "-D, cells ";
    for (int d = 0; d < dim; ++d) std::cerr << (d ? " x " : "") << g.cells(d);
    std::cerr << ", boundary ";
    for (int d = 0; d < dim; ++d) std::cerr << (d ? "/" : "") << pde::to_string(cfg.domain.boundary[static_cast<std::size_t>(d)]);
    std::cerr << "\n  fields     " << join(eq.fields) << (Model::linear_in_state ? " (linear)" : "")
              << "\n  integrator " << cfg.method << " (theta = " << cfg.integrator.theta
              << "), dt = " << cfg.integrator.dt << ", " << cfg.integrator.steps << " steps\n  ranks      "
              << g.size() << " (" << g.processes()[0];
    for (int d = 1; d < dim; ++d) std::cerr << " x " << g.processes()[static_cast<std::size_t>(d)];
    std::cerr << ")\n";
  }
  // 2. Parameter fields, initial fields and misfit data from their expressions.
  const std::vector<std::string> coords = coordinates(dim);
  std::vector<std::string> vars = coords;
  vars.insert(vars.end(), eq.parameters.begin(), eq.parameters.end());
  if constexpr (Model::field_parameters > 0)
    evaluate_cells(*op.field_grid(), compile_all(cfg.parameter_fields, vars, "pde.parameter_fields", eq.parameter_fields),
                   cfg.parameters, nullptr, 0, op.fields());
  std::vector<std::string> init_vars = vars;
  init_vars.insert(init_vars.end(), eq.parameter_fields.begin(), eq.parameter_fields.end());
  auto u0 = g.create_global("pde::u0");
  evaluate_cells(g, compile_all(cfg.initial, init_vars, "pde.initial", eq.fields), cfg.parameters,
                 Model::field_parameters > 0 ? &op.fields() : nullptr, Model::field_parameters, u0);
  pde::Objective objective;
  if (cfg.objective.kind == "integral") objective = pde::Objective::integral(cfg.objective.component);
  if (cfg.objective.kind == "probe") objective = pde::Objective::probe(cfg.objective.cell, cfg.objective.component);
  if (cfg.objective.kind == "misfit") {
    auto data = g.create_global("pde::data");
    evaluate_cells(g, compile_all(cfg.objective.data, vars, "objective.misfit", eq.fields), cfg.parameters, nullptr, 0,
                   data);
    objective = pde::Objective::misfit(data);
  }
  if (args.command != "run" && !cfg.objective.present)
    throw Error(args.input + ": costate " + args.command +
                " needs an 'objective:' section (integral, probe or misfit of the final fields)");
  pde::ThetaIntegrator<Model> integ(op, cfg.integrator);
  const double t_final = cfg.integrator.t0 + static_cast<double>(cfg.integrator.steps) * cfg.integrator.dt;
  std::ostringstream os;
  os.precision(12);
  Json j;
  j["status"] = "ok";
  j["model"] = "pde";
  j["fields"] = eq.fields;
  j["ranks"] = g.size();

  // 3. The command.
  if (args.command == "run") {
    auto u = g.create_global("pde::u");
    deep_copy(u, u0);
    std::unique_ptr<pde::FieldWriter> out;
    if (!cfg.output_file.empty()) {
      out = std::make_unique<pde::FieldWriter>(g, cfg.output_file, eq.fields);
      if constexpr (Model::field_parameters > 0)
        out->write_field(eq.parameter_fields[0], *op.field_grid(), op.fields(), {eq.parameter_fields[0]});
    }
    integrate_with_frames(integ, u, cfg, out.get());
    const FieldStats s = stats(g, u);
    j["final_time"] = t_final;
    j["steps"] = cfg.integrator.steps;
    j["krylov_iterations"] = integ.krylov_iterations();
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
       << integ.krylov_iterations() << " Krylov iterations)\n\n  field        integral            min                 max\n";
    for (std::size_t c = 0; c < eq.fields.size(); ++c)
      os << "  " << std::left << std::setw(12) << eq.fields[c] << std::setw(20) << s.integral[c] << std::setw(20)
         << s.min[c] << s.max[c] << "\n";
    if (cfg.objective.present) os << "\n  objective J = " << J << "\n";
    if (!cfg.output_file.empty()) os << "\nwrote " << cfg.output_file << " (+ .xmf)\n";
  } else if (args.command == "sensitivity") {
    const pde::ThetaGradient r = integ.gradient(u0, objective, cfg.checkpointing);
    if (!cfg.output_file.empty()) {
      // The trajectory (frames every output.every steps), the parameter
      // field, and the gradient: dJ/d<field> and dJ/du(t0) as fields, the
      // objective and dJ/d<scalars> as arrays.
      pde::FieldWriter out(g, cfg.output_file, eq.fields);
      auto u = g.create_global("pde::u");
      deep_copy(u, u0);
      integrate_with_frames(integ, u, cfg, &out);
      if constexpr (Model::field_parameters > 0) {
        const std::string& a = eq.parameter_fields[0];
        out.write_field(a, *op.field_grid(), op.fields(), {a});
        out.write_field("dJ_d" + a, *op.field_grid(), r.wrt_fields, {"dJ_d" + a});
      }
      std::vector<std::string> du_names;
      for (const auto& f : eq.fields) du_names.push_back("dJ_d" + f + "0");
      out.write_field("dJ_du0", g, r.wrt_initial_state, du_names);
      out.write_array("objective", std::vector<double>{r.objective});
      out.write_array("gradient", std::vector<double>(r.wrt_parameters.begin(), r.wrt_parameters.begin() + static_cast<std::ptrdiff_t>(nq)));
      out.finish();
    }
    j["output_file"] = cfg.output_file.empty() ? Json(nullptr) : Json(cfg.output_file);
    j["objective"] = r.objective;
    Json grad = Json::object();
    for (std::size_t m = 0; m < nq; ++m) grad[eq.parameters[m]] = r.wrt_parameters[m];
    j["gradient"] = grad;
    Json gf = Json::object();
    std::string field_line;
    if constexpr (Model::field_parameters > 0) {
      const pde::Grid& fg = *op.field_grid();
      const FieldStats s = stats(fg, r.wrt_fields);
      const double nrm = norm2(fg, r.wrt_fields);
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
  } else {
    // gradcheck: x = (scalar parameters, s_a, s_u) with the parameter field
    // a0 + s_a·δa and the initial fields u0 + s_u·δu (δ smooth, scaled like
    // the field): one Taylor test along all of x, central differences for
    // each scalar and each field direction.
    const pde::ThetaGradient r = integ.gradient(u0, objective, cfg.checkpointing);
    const std::vector<double> u0n = g.gather(u0);
    const std::vector<double> du = direction_like(u0n, 0.3);
    std::vector<double> a0n, da;
    const pde::Grid* fg = op.field_grid();
    if constexpr (Model::field_parameters > 0) {
      a0n = fg->gather(op.fields());
      da = direction_like(a0n, 1.1);
    }
    // Scalars enter as relative changes p_m = p_m0 · x_m (x_m = 1; dJ/dx_m =
    // p_m0 · dJ/dp_m), so the differences' step is relative to every
    // parameter, however small (Du = 2e-5); a parameter at 0 enters as is.
    std::vector<double> p_scale(nq, 1.0), x(nq, 1.0), grad(nq);
    for (std::size_t m = 0; m < nq; ++m) {
      if (cfg.parameters[m] != 0.0) p_scale[m] = cfg.parameters[m];
      else x[m] = 0.0;
      grad[m] = p_scale[m] * r.wrt_parameters[m];
    }
    std::vector<std::string> names;
    for (const auto& n : eq.parameters) names.push_back(n + " (relative)");
    auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
      double s = 0.0;
      for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
      return s;
    };
    if constexpr (Model::field_parameters > 0) {
      x.push_back(0.0);
      grad.push_back(dot(fg->gather(r.wrt_fields), da));
      names.push_back(eq.parameter_fields[0] + " (field, one direction)");
    }
    x.push_back(0.0);
    grad.push_back(dot(g.gather(r.wrt_initial_state), du));
    names.push_back("u(t0) (fields, one direction)");
    auto u = g.create_global("pde::u");
    auto J = [&](const std::vector<double>& xx) {
      for (std::size_t m = 0; m < nq; ++m) op.parameters()[m] = p_scale[m] * xx[m];
      std::size_t at = nq;
      if constexpr (Model::field_parameters > 0) {
        std::vector<double> a(a0n);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] += xx[at] * da[i];
        fg->scatter(a, op.fields());
        ++at;
      }
      std::vector<double> un(u0n);
      for (std::size_t i = 0; i < un.size(); ++i) un[i] += xx[at] * du[i];
      g.scatter(un, u);
      // A fresh integrator: a linear model's I − hθJ is assembled once per
      // integrator and depends on the parameters being varied.
      pde::ThetaIntegrator<Model> fresh(op, cfg.integrator);
      fresh.integrate(u);
      return objective.evaluate(g, u, nullptr);
    };
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
    j["status"] = passed ? "ok" : "failed";
    j["objective"] = r.objective;
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
    if (env.is_root()) {
      if (args.json)
        std::cout << j.dump() << std::endl;
      else
        std::cout << os.str();
    }
    return passed ? 0 : 1;
  }
  if (env.is_root()) {
    if (args.json)
      std::cout << j.dump() << std::endl;
    else
      std::cout << os.str();
  }
  return 0;
}


/// Runs the command for an equation system of dimension D.
template <int D>
int drive_dim(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
              const std::shared_ptr<const pde::EquationSystem>& system) {
  return pde::dispatch::with_equation_components<D>(system, [&](auto model) { return drive(env, args, cfg, model); });
}

extern template int drive_dim<1>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                 const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_dim<2>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                 const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_dim<3>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                 const std::shared_ptr<const pde::EquationSystem>&);

}  // namespace costate::cli::detail
