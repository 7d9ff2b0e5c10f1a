#pragma once
// io::pde_run's model-dependent part, generic over the stencil model
// (included by the per-dimension translation units pde_run_{1,2,3}d.cpp,
// each of which instantiates run_fields<D, 0> and run_fields<D, 1>: the
// pde::EquationModels of that dimension without and with a parameter field).
//
// Compile time: every EquationModel instantiation compiles run_model<Model>,
// so it keeps only what needs the model (the operator and its
// pde::OperatorView, J as a function of x for gradcheck); the integrators
// are compiled once over the view (src/pde/theta.cpp, explicit_rk.cpp);
// the setup's expressions,
// the statistics, the gathering and the result are plain functions compiled
// once (pde_run.cpp, declared below).

#include <cstdint>
#include <functional>
#include <iostream>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/io/pde_cells.hpp"
#include "costate/io/pde_input.hpp"
#include "costate/io/pde_run.hpp"
#include "costate/pde/equation_model.hpp"
#include "costate/pde/output.hpp"
#include "costate/pde/explicit_rk.hpp"
#include "costate/pde/theta.hpp"

namespace costate::io::detail {

// ---- model-independent parts (pde_run.cpp) ---------------------------------

/// A smooth, sign-changing direction of the size of `x` (natural order).
std::vector<double> direction_like(const std::vector<double>& x, double salt);

/// The grid's description into `r`; calls options.on_setup.
void pde_setup(PdeResult& r, const PdeRunOptions& options, const PdeConfig& cfg, const pde::Grid& g, bool linear);

/// The whole of `v` on rank 0 of the grid (empty elsewhere). Collective.
std::vector<double> gather_on_root(const pde::Grid& g, const pde::GlobalVector& v);

/// Throws PdeInterrupted on every rank when options.interrupted() is true on
/// any. Collective (when options.interrupted is set).
void pde_poll(const PdeRunOptions& options, MPI_Comm comm);

/// Where the frames of a forward run go: the output file and/or (gather)
/// the result. Collective.
class PdeFrames {
 public:
  PdeFrames(pde::FieldWriter* out, PdeResult* gathered, const pde::Grid& g) : out_(out), r_(gathered), g_(g) {}
  void write(double t, const pde::GlobalVector& u);

 private:
  pde::FieldWriter* out_;
  PdeResult* r_;
  const pde::Grid& g_;
};

/// run's summary of the final fields `u` into `r` (and its arrays into
/// `out`, then finished, when not null). Collective.
void pde_finish_run(PdeResult& r, const PdeConfig& cfg, const pde::Grid& g, const pde::GlobalVector& u,
                    const pde::Objective& objective, std::int64_t krylov_iterations, pde::FieldWriter* out);

/// sensitivity's summary of the gradient `t` into `r` (`fg`: the
/// parameter-field grid, null without parameter fields). Collective.
void pde_finish_gradient(PdeResult& r, const PdeRunOptions& options, const PdeConfig& cfg, const pde::Grid& g,
                         const pde::Grid* fg, const pde::ThetaGradient& t);

// ---- the model-dependent part -----------------------------------------------

/// Integrates u over all steps, the frames at t0, every `output.every` steps
/// (0: none between) and at the end into `frames` (may be null), with the
/// progress line "PDE step n/l (t = …)" (core/progress.hpp). Collective.
template <class Integrator>
void integrate_with_frames(Integrator& integ, const pde::GlobalVector& u, const PdeConfig& cfg,
                           PdeFrames* frames) {
  const auto& o = cfg.integrator;
  if (frames) frames->write(o.t0, u);
  Progress line("PDE step", static_cast<double>(o.steps));
  for (std::int64_t n = 0; n < o.steps; ++n) {
    integ.step(u, n);  // polls options.interrupted (ThetaOptions::on_step)
    if (line.active())
      line.update(static_cast<double>(n + 1),
                  "t = " + costate::detail::format_value(o.t0 + static_cast<double>(n + 1) * o.dt));
    const bool last = n + 1 == o.steps;
    if (frames && (last || (cfg.output_every > 0 && (n + 1) % cfg.output_every == 0)))
      frames->write(o.t0 + static_cast<double>(n + 1) * o.dt, u);
  }
}

template <class Model>
PdeResult run_model(MPI_Comm comm, const PdeConfig& cfg, const PdeRunOptions& options, Model model) {
  const pde::EquationSpec& eq = cfg.equations;
  const int dim = eq.dim;
  const std::size_t nq = cfg.parameters.size();
  PdeResult res;
  // 1. The operator on the distributed grid, parameters padded.
  std::vector<double> q(cfg.parameters);
  q.resize(static_cast<std::size_t>(Model::scalar_parameters), 0.0);
  pde::Operator<Model> op(comm, cfg.domain, model, q);
  const pde::Grid& g = op.grid();
  const pde::Grid* fg = Model::field_parameters > 0 ? op.field_grid() : nullptr;
  pde_setup(res, options, cfg, g, Model::linear_in_state);
  // 2. Parameter fields, initial fields and misfit data from their expressions.
  const std::vector<std::string> coords = pde_coordinates(dim);
  std::vector<std::string> vars = coords;
  vars.insert(vars.end(), eq.parameters.begin(), eq.parameters.end());
  if constexpr (Model::field_parameters > 0)
    evaluate_cells(*fg, compile_all(cfg.parameter_fields, vars, "pde.parameter_fields", eq.parameter_fields),
                   cfg.parameters, nullptr, 0, op.fields());
  std::vector<std::string> init_vars = vars;
  init_vars.insert(init_vars.end(), eq.parameter_fields.begin(), eq.parameter_fields.end());
  auto u0 = g.create_global("pde::u0");
  evaluate_cells(g, compile_all(cfg.initial, init_vars, "pde.initial", eq.fields), cfg.parameters,
                 Model::field_parameters > 0 ? &op.fields() : nullptr, Model::field_parameters, u0);
  const pde::Objective objective = make_pde_objective(cfg, g, vars);
  const std::string command = to_string(options.command);
  if (options.command != PdeCommand::run && !cfg.objective.present)
    throw Error(cfg.input_path + ": costate " + command +
                " needs an 'objective:' section (integral, probe or misfit of the final fields)");
  if constexpr (Model::field_parameters > 0)
    if (options.gather) res.parameter_field = gather_on_root(*fg, op.fields());
  // The interrupt check at every step, forward and reverse (collective).
  pde::ThetaOptions stepping = cfg.integrator;
  if (options.interrupted) stepping.on_step = [&options, comm](std::int64_t) { pde_poll(options, comm); };
  std::optional<pde::ExplicitRkOptions> explicit_stepping = cfg.explicit_rk;
  if (explicit_stepping) explicit_stepping->on_step = stepping.on_step;
  // The integrator of integrator.method (one interface: pde::TimeStepper),
  // compiled once over the model's view (the only per-model part).
  const std::unique_ptr<pde::OperatorView> view = pde::make_operator_view(op);
  auto make_integrator = [&](bool poll) -> std::unique_ptr<pde::TimeStepper> {
    if (cfg.explicit_rk)
      return std::make_unique<pde::ExplicitRkStepper>(*view, poll ? *explicit_stepping : *cfg.explicit_rk);
    return std::make_unique<pde::ThetaStepper>(*view, poll ? stepping : cfg.integrator);
  };
  const std::unique_ptr<pde::TimeStepper> integ_owner = make_integrator(true);
  pde::TimeStepper& integ = *integ_owner;
  if (cfg.explicit_rk) {  // a step above the stability estimate: a warning naming integrator.dt (rank 0)
    const std::string w = pde::stability_warning(
        *cfg.explicit_rk, static_cast<pde::ExplicitRkStepper&>(integ).stability(u0), "integrator.dt");
    if (g.rank() == 0 && !w.empty()) std::cerr << cfg.input_path << ": warning: " << w << "\n";
    if (!w.empty()) res.warnings.push_back(w);
  }

  // 3. The command.
  if (options.command == PdeCommand::run) {
    auto u = g.create_global("pde::u");
    deep_copy(u, u0);
    std::unique_ptr<pde::FieldWriter> out;
    if (!cfg.output_file.empty()) {
      out = std::make_unique<pde::FieldWriter>(g, cfg.output_file, eq.fields);
      out->write_provenance("run", cfg.to_yaml());
      if constexpr (Model::field_parameters > 0)
        out->write_field(eq.parameter_fields[0], *fg, op.fields(), {eq.parameter_fields[0]});
    }
    PdeFrames frames(out.get(), options.gather ? &res : nullptr, g);
    integrate_with_frames(integ, u, cfg, out || options.gather ? &frames : nullptr);
    pde_finish_run(res, cfg, g, u, objective, integ.krylov_iterations(), out.get());
    return res;
  }
  const pde::ThetaGradient r = integ.gradient(u0, objective, cfg.checkpointing);
  if (options.command == PdeCommand::sensitivity) {
    if (!cfg.output_file.empty()) {
      // The trajectory (frames every output.every steps), the parameter
      // field, and the gradient: dJ/d<field> and dJ/du(t0) as fields, the
      // objective and dJ/d<scalars> as arrays.
      pde::FieldWriter out(g, cfg.output_file, eq.fields);
      out.write_provenance("sensitivity", cfg.to_yaml());
      auto u = g.create_global("pde::u");
      deep_copy(u, u0);
      PdeFrames frames(&out, options.gather ? &res : nullptr, g);
      integrate_with_frames(integ, u, cfg, &frames);
      if constexpr (Model::field_parameters > 0) {
        const std::string& a = eq.parameter_fields[0];
        out.write_field(a, *fg, op.fields(), {a});
        out.write_field("dJ_d" + a, *fg, r.wrt_fields, {"dJ_d" + a});
      }
      std::vector<std::string> du_names;
      for (const auto& f : eq.fields) du_names.push_back("dJ_d" + f + "0");
      out.write_field("dJ_du0", g, r.wrt_initial_state, du_names);
      out.write_array("objective", std::vector<double>{r.objective});
      out.write_array("gradient",
                      std::vector<double>(r.wrt_parameters.begin(),
                                          r.wrt_parameters.begin() + static_cast<std::ptrdiff_t>(nq)),
                      eq.parameters);
      out.finish();
      res.output_file = cfg.output_file;
    }
    pde_finish_gradient(res, options, cfg, g, fg, r);
    return res;
  }
  // gradcheck: x = (scalar parameters, s_a, s_u) with the parameter field
  // a0 + s_a·δa and the initial fields u0 + s_u·δu (δ smooth, scaled like
  // the field): one Taylor test along all of x, central differences for
  // each scalar and each field direction.
  COSTATE_CHECK(static_cast<bool>(options.gradcheck), "io::pde_run: gradcheck needs PdeRunOptions::gradcheck");
  pde_finish_gradient(res, options, cfg, g, fg, r);
  const std::vector<double> u0n = g.gather(u0);
  const std::vector<double> du = direction_like(u0n, 0.3);
  std::vector<double> a0n, da;
  if constexpr (Model::field_parameters > 0) {
    a0n = fg->gather(op.fields());
    da = direction_like(a0n, 1.1);
  }
  // Scalars enter as relative changes p_m = p_m0 · x_m (x_m = 1; dJ/dx_m =
  // p_m0 · dJ/dp_m), so the differences' step is relative to every
  // parameter, however small (Du = 2e-5); a parameter at 0 enters as is.
  std::vector<double> p_scale(nq, 1.0);
  PdeGradcheckInputs in;
  in.grid = &g;
  in.x.assign(nq, 1.0);
  in.gradient.resize(nq);
  for (std::size_t m = 0; m < nq; ++m) {
    if (cfg.parameters[m] != 0.0) p_scale[m] = cfg.parameters[m];
    else in.x[m] = 0.0;
    in.gradient[m] = p_scale[m] * r.wrt_parameters[m];
  }
  for (const auto& n : eq.parameters) in.names.push_back(n + " (relative)");
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  if constexpr (Model::field_parameters > 0) {
    in.x.push_back(0.0);
    in.gradient.push_back(dot(fg->gather(r.wrt_fields), da));
    in.names.push_back(eq.parameter_fields[0] + " (field, one direction)");
  }
  in.x.push_back(0.0);
  in.gradient.push_back(dot(g.gather(r.wrt_initial_state), du));
  in.names.push_back("u(t0) (fields, one direction)");
  in.objective = r.objective;
  auto u = g.create_global("pde::u");
  in.objective_of = [&](const std::vector<double>& xx) {
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
    make_integrator(false)->integrate(u);
    return objective.evaluate(g, u, nullptr);
  };
  in.warnings = res.warnings;
  res.status = options.gradcheck(in);
  return res;
}

/// Runs the command for an equation system of dimension D with F parameter
/// fields (one translation unit per dimension: pde_run_{1,2,3}d.cpp).
template <int D, int F>
PdeResult run_fields(MPI_Comm comm, const PdeConfig& cfg, const PdeRunOptions& options,
                     const std::shared_ptr<const pde::EquationSystem>& system) {
  return pde::dispatch::with_equation_components_given_fields<D, F>(
      system, [&](auto model) { return run_model(comm, cfg, options, model); });
}

#define COSTATE_PDE_RUN_FIELDS(D, F)                                                          \
  PdeResult run_fields<D, F>(MPI_Comm, const PdeConfig&, const PdeRunOptions&, \
                             const std::shared_ptr<const pde::EquationSystem>&)
extern template COSTATE_PDE_RUN_FIELDS(1, 0);
extern template COSTATE_PDE_RUN_FIELDS(1, 1);
extern template COSTATE_PDE_RUN_FIELDS(2, 0);
extern template COSTATE_PDE_RUN_FIELDS(2, 1);
extern template COSTATE_PDE_RUN_FIELDS(3, 0);
extern template COSTATE_PDE_RUN_FIELDS(3, 1);

}  // namespace costate::io::detail
