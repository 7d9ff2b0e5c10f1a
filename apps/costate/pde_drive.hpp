#pragma once
// The PDE command driver, generic over the stencil model (included by the
// per-dimension translation units pde_commands_{1,2,3}d.cpp, each of
// which instantiates drive_fields<D, 0> and drive_fields<D, 1>: the
// pde::EquationModels of that dimension without and with a parameter field).
//
// Compile time: every EquationModel instantiation compiles drive<Model>, so
// drive<Model> keeps only what needs the model (the operator, the
// integrator, the gradient, the objective as a function of x); the banner,
// the reports (JSON, text), the field statistics, the Taylor test and the
// finite differences are plain functions compiled once (pde_commands.cpp).

#include "pde_commands.hpp"

#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/pde/equation_model.hpp"
#include "costate/pde/output.hpp"
#include "costate/pde/explicit_rk.hpp"
#include "costate/pde/theta.hpp"
#include "costate/io/pde_input.hpp"

namespace costate::cli::detail {

// ---- model-independent parts (defined in pde_commands.cpp) -----------------

std::vector<std::string> coordinates(int dim);

/// out(cell, c) = programs[c](x, [y, [z,]] parameters…, fields(cell)…) for
/// every owned cell of `grid`. `fields` (may be null) lives on a grid with
/// the same decomposition and `nfields` values per cell.
void evaluate_cells(const pde::Grid& grid, const std::vector<expr::Program>& programs,
                    const std::vector<double>& parameters, const pde::GlobalVector* fields, int nfields,
                    const pde::GlobalVector& out);

std::vector<expr::Program> compile_all(const std::vector<std::string>& texts, const std::vector<std::string>& vars,
                                       const std::string& context, const std::vector<std::string>& keys);

/// A smooth, sign-changing direction of the size of `x` (natural order).
std::vector<double> direction_like(const std::vector<double>& x, double salt);

/// The run's description on stderr (rank 0, unless --quiet).
void print_banner(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
                  bool linear);

/// The objective of the input's `objective:` section on grid `g` (`vars`:
/// the names the misfit data expressions may use). Collective.
pde::Objective make_objective(const io::PdeConfig& cfg, const pde::Grid& g, const std::vector<std::string>& vars);

/// `run`'s report for the final fields `u`; writes the final arrays to
/// `out` (may be null) and finishes it. Collective. Returns the exit status.
int report_run(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
               const pde::GlobalVector& u, const pde::Objective& objective, std::int64_t krylov_iterations,
               pde::FieldWriter* out);

/// `sensitivity`'s report of the gradient `r` (`fg`: the parameter-field
/// grid, null without parameter fields). Collective.
int report_sensitivity(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg, const pde::Grid& g,
                       const pde::Grid* fg, const pde::ThetaGradient& r);

/// `gradcheck`: the Taylor test and central differences of J at x against
/// `grad` (components named `names`: the input's scalar parameters, relative,
/// then field directions), and the report. Collective (J is). Returns 0 when
/// both pass, else 1.
int check_and_report_gradient(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                              const pde::Grid& g, const std::function<double(const std::vector<double>&)>& J,
                              const std::vector<double>& x, const std::vector<double>& grad,
                              const std::vector<std::string>& names, double objective);

// ---- the model-dependent part -----------------------------------------------

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
  // 1. The operator on the distributed grid, parameters padded.
  std::vector<double> q(cfg.parameters);
  q.resize(static_cast<std::size_t>(Model::scalar_parameters), 0.0);
  pde::Operator<Model> op(env.comm(), cfg.domain, model, q);
  const pde::Grid& g = op.grid();
  print_banner(env, args, cfg, g, Model::linear_in_state);
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
  const pde::Objective objective = make_objective(cfg, g, vars);
  if (args.command != "run" && !cfg.objective.present)
    throw Error(args.input + ": costate " + args.command +
                " needs an 'objective:' section (integral, probe or misfit of the final fields)");
  // The integrator of integrator.method (one interface: pde::TimeIntegrator).
  auto make_integrator = [&]() -> std::unique_ptr<pde::TimeIntegrator<Model>> {
    if (cfg.explicit_rk) return std::make_unique<pde::ExplicitRkIntegrator<Model>>(op, *cfg.explicit_rk);
    return std::make_unique<pde::ThetaIntegrator<Model>>(op, cfg.integrator);
  };
  const std::unique_ptr<pde::TimeIntegrator<Model>> integ_owner = make_integrator();
  pde::TimeIntegrator<Model>& integ = *integ_owner;
  if (cfg.explicit_rk) {  // a step above the stability estimate: a warning naming integrator.dt
    const std::string w = pde::stability_warning(
        *cfg.explicit_rk, static_cast<pde::ExplicitRkIntegrator<Model>&>(integ).stability(u0), "integrator.dt");
    if (env.is_root() && !w.empty()) std::cerr << args.input << ": warning: " << w << "\n";
  }

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
    return report_run(env, args, cfg, g, u, objective, integ.krylov_iterations(), out.get());
  }
  if (args.command == "sensitivity") {
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
    return report_sensitivity(env, args, cfg, g, Model::field_parameters > 0 ? op.field_grid() : nullptr, r);
  }
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
  const std::function<double(const std::vector<double>&)> J = [&](const std::vector<double>& xx) {
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
    make_integrator()->integrate(u);
    return objective.evaluate(g, u, nullptr);
  };
  return check_and_report_gradient(env, args, cfg, g, J, x, grad, names, r.objective);
}

/// Runs the command for an equation system of dimension D with F parameter
/// fields (one translation unit per dimension: pde_commands_{1,2,3}d.cpp).
template <int D, int F>
int drive_fields(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                 const std::shared_ptr<const pde::EquationSystem>& system) {
  return pde::dispatch::with_equation_components_given_fields<D, F>(
      system, [&](auto model) { return drive(env, args, cfg, model); });
}

extern template int drive_fields<1, 0>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                       const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_fields<1, 1>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                       const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_fields<2, 0>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                       const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_fields<2, 1>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                       const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_fields<3, 0>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                       const std::shared_ptr<const pde::EquationSystem>&);
extern template int drive_fields<3, 1>(const Environment&, const PdeArgs&, const io::PdeConfig&,
                                       const std::shared_ptr<const pde::EquationSystem>&);

}  // namespace costate::cli::detail
