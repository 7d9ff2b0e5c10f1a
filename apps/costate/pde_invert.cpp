// `costate calibrate` on a PDE input with a `calibration:` section: the MAP
// point of a parameter field from point sensors (pde::find_map: Newton-CG
// or L-BFGS), its iteration table, the MAP field and the history in HDF5,
// and with `calibration.posterior` the Laplace posterior there
// (pde::laplace_posterior: spectrum, variance field, eigenvectors, samples)
// (docs/pde_inverse.md). One process or under mpiexec; reports from rank 0.
//
// Compile time: the inversion instantiates pde::Misfit (over the θ or the
// explicit Runge–Kutta integrator, pde::TimeStepper) for one-component
// equation models with one parameter field in 1-D and 2-D, linear and
// nonlinear: four instantiations in this translation unit.
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <iostream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/io/pde_calibration.hpp"
#include "costate/optimize/fit_status.hpp"
#include "costate/pde/inversion.hpp"
#include "costate/pde/laplace.hpp"
#include "costate/pde/output.hpp"
#include "pde_detail.hpp"

namespace costate::cli::detail {
namespace {

using Json = nlohmann::ordered_json;

pde::PdeSolves plus(const pde::PdeSolves& a, const pde::PdeSolves& b) {
  return {a.forward + b.forward, a.adjoint + b.adjoint, a.incremental_forward + b.incremental_forward,
          a.incremental_adjoint + b.incremental_adjoint};
}

/// min, mean and max over the field of a / b (cellwise). Collective.
std::array<double, 3> ratio_stats(const pde::Grid& fg, const pde::GlobalVector& a, const pde::GlobalVector& b) {
  double lo = INFINITY, hi = -INFINITY, sum = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double r = a[e] / b[e];
    lo = std::min(lo, r);
    hi = std::max(hi, r);
    sum += r;
  }
  return {global_min(fg.comm(), lo), global_sum(fg.comm(), sum) / static_cast<double>(fg.global_size()),
          global_max(fg.comm(), hi)};
}

Json solves_json(const pde::PdeSolves& s) {
  return Json{{"forward", s.forward},
              {"adjoint", s.adjoint},
              {"incremental_forward", s.incremental_forward},
              {"incremental_adjoint", s.incremental_adjoint},
              {"total", s.total()}};
}

void print_row(const pde::InversionIteration& r) {
  clear_progress_line();
  std::printf("  %3d  %15.8e  %13.6e  %13.6e  %11.4e  %5d  %-18s %3s  %7lld\n", r.iteration, r.objective, r.misfit,
              r.prior, r.gradient_norm, r.cg_iterations, r.cg_stop.c_str(), r.gauss_newton ? "GN" : "",
              static_cast<long long>(r.solves.total()));
  std::fflush(stdout);
}

template <class Model>
int invert(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
           const io::PdeCalibrationConfig& cc, Model model) {
  const pde::EquationSpec& eq = cfg.equations;
  const bool talk = env.is_root() && !args.quiet;
  // 1. The operator, the input's parameter field (the reference), u0.
  std::vector<double> q(cfg.parameters);
  q.resize(static_cast<std::size_t>(Model::scalar_parameters), 0.0);
  pde::Operator<Model> op(env.comm(), cfg.domain, model, q);
  const pde::Grid& g = op.grid();
  const pde::Grid& fg = *op.field_grid();
  print_banner(env, args, cfg, g, Model::linear_in_state);
  const std::vector<std::string> coords = coordinates(eq.dim);
  std::vector<std::string> vars = coords;
  vars.insert(vars.end(), eq.parameters.begin(), eq.parameters.end());
  evaluate_cells(fg, compile_all(cfg.parameter_fields, vars, "pde.parameter_fields", eq.parameter_fields),
                 cfg.parameters, nullptr, 0, op.fields());
  auto reference = fg.create_global("pde::reference field");
  deep_copy(reference, op.fields());
  std::vector<std::string> init_vars = vars;
  init_vars.insert(init_vars.end(), eq.parameter_fields.begin(), eq.parameter_fields.end());
  auto u0 = g.create_global("pde::u0");
  evaluate_cells(g, compile_all(cfg.initial, init_vars, "pde.initial", eq.fields), cfg.parameters, &op.fields(), 1,
                 u0);
  // 2. Sensors, prior, the reduced misfit.
  const double t_end = cfg.integrator.t0 + static_cast<double>(cfg.integrator.steps) * cfg.integrator.dt;
  auto obs = std::make_shared<const pde::Observations>(g, pde::read_sensors(cc.sensors_file, eq.dim, cc.sigma),
                                                       cfg.integrator.t0, t_end, cc.sensors_component);
  auto mean = fg.create_global("pde::prior mean");
  evaluate_cells(fg, compile_all({cc.prior_mean}, vars, "calibration.prior", {"mean"}), cfg.parameters, nullptr, 0,
                 mean);
  const pde::Prior prior(fg, cc.prior, mean);
  // The integrator of integrator.method: the θ-method or explicit Runge–Kutta (one pde::Misfit).
  pde::Misfit<Model> misfit = cfg.explicit_rk
                                  ? pde::Misfit<Model>(op, *cfg.explicit_rk, u0, pde::Objective::sensors(obs), cc.log_form)
                                  : pde::Misfit<Model>(op, cfg.integrator, u0, pde::Objective::sensors(obs), cc.log_form);
  if (cfg.explicit_rk) {
    // A step above the stability estimate (ρ(J) at the input's field and u0;
    // the same on every rank): refused, since an inversion of a run that
    // blows up has no meaning (`costate run` only warns).
    pde::ExplicitRkIntegrator<Model> probe(op, *cfg.explicit_rk);
    const std::string why = pde::stability_warning(*cfg.explicit_rk, probe.stability(u0), "integrator.dt");
    if (!why.empty())
      throw Error(args.input + ": " + why + "; costate calibrate with an explicit method needs a step under the limit");
  }
  if (talk) {
    std::cerr << "  infer      " << (cc.log_form ? "m = log(" + cc.field + ")" : cc.field) << ", " << fg.global_size()
              << " unknowns\n  sensors    " << obs->size() << " of " << eq.fields[static_cast<std::size_t>(cc.sensors_component)]
              << " at t = " << t_end << " from " << cc.sensors_file << "\n  prior      " << pde::to_string(cc.prior.kind)
              << " (gamma " << cc.prior.gamma << ", delta " << cc.prior.delta << ", mean " << cc.prior_mean
              << ")\n  optimizer  " << pde::to_string(cc.optimizer.method) << " (gradient_rtol "
              << cc.optimizer.gradient_rtol << ", max_iterations " << cc.optimizer.max_iterations << ")\n";
  }
  if (env.is_root() && !args.json)
    std::printf("\n   it        objective         misfit          prior          |g|     cg  cg stop             "
                "     PDE solves\n");
  // 3. The MAP point, starting at the prior mean.
  const pde::InversionResult r = pde::find_map(misfit, prior, mean, cc.optimizer, [&](const pde::InversionIteration& row) {
    if (env.is_root() && !args.json) print_row(row);
  });
  // Its status in the calibrations' one vocabulary (optimize/fit_status.hpp):
  // a stop without the optimizer's test, because no step decreased J, is
  // "stalled" when the gradient is at its noise floor — measured, as for
  // ODE calibrations, as the change of the misfit's gradient at the final
  // point when the solves' tolerances (KSP, Newton) are tightened
  // optimize::kTighter-fold (the prior's part is the same in both) — or
  // when Newton's last predicted decrease is below J's round-off. An
  // explicit method has no solver tolerance: its gradient noise stays
  // unmeasured.
  optimize::FitEnd end{.converged = r.converged,
                       .reason = r.termination,
                       .gradient_norm = r.gradient_norm,
                       .objective = r.objective,
                       .predicted_decrease = r.predicted_decrease};
  if (!r.converged && optimize::is_stall_reason(r.termination) && !cfg.explicit_rk) {
    pde::ThetaOptions tight = cfg.integrator;
    tight.ksp.rtol *= optimize::kTighter;
    tight.newton_rtol *= optimize::kTighter;
    try {
      pde::Misfit<Model> at_tight(op, tight, u0, pde::Objective::sensors(obs), cc.log_form);
      auto g_loose = fg.create_global(), g_tight = fg.create_global();
      (void)misfit.linearize(r.m, g_loose);
      (void)at_tight.linearize(r.m, g_tight);
      linear_sum(g_loose, 1.0, g_loose, -1.0, g_tight);
      end.gradient_noise = l2_norm(g_loose);
    } catch (const Error&) {
      // Not solvable at the tighter tolerances: the noise stays unmeasured.
    }
  }
  const optimize::FitVerdict verdict = optimize::judge_fit(end);
  // 4. The state at the MAP point, predictions, the distance to the reference.
  const double phi = misfit.misfit(r.m);
  const std::vector<double> predicted = obs->predictions(misfit.final_state());
  auto kappa = fg.create_global("pde::map field");
  misfit.parameter_field(r.m, kappa);
  auto ref_m = fg.create_global();
  if (cc.log_form) {
    double local_min = INFINITY;
    for (std::size_t e = 0; e < reference.size(); ++e) local_min = std::min(local_min, reference[e]);
    if (global_min(g.comm(), local_min) > 0.0)
      transform(ref_m, reference, [](double x) { return std::log(x); });
    else
      fill(ref_m, std::numeric_limits<double>::quiet_NaN());
  } else {
    deep_copy(ref_m, reference);
  }
  auto diff = fg.create_global();
  linear_sum(diff, 1.0, r.m, -1.0, ref_m);
  const double volume = prior.cell_volume();
  const double distance = std::sqrt(volume * dot(diff, diff));
  const double chi2 = 2.0 * phi;
  // 5. The Laplace posterior at the MAP point.
  std::optional<pde::LaplacePosterior> post;
  std::array<double, 3> var_ratio{}, prior_var{};
  if (cc.posterior) {
    post = pde::laplace_posterior(misfit, prior, r.m, cc.posterior_options);
    var_ratio = ratio_stats(fg, post->variance, post->prior_variance);
    double lo = INFINITY, hi = -INFINITY;
    for (std::size_t e = 0; e < post->prior_variance.size(); ++e) {
      lo = std::min(lo, post->prior_variance[e]);
      hi = std::max(hi, post->prior_variance[e]);
    }
    prior_var = {global_min(g.comm(), lo), sum(post->prior_variance) / static_cast<double>(fg.global_size()),
                 global_max(g.comm(), hi)};
  }
  const pde::PdeSolves all_solves = post ? plus(r.solves, post->solves) : r.solves;
  if (!cfg.output_file.empty()) {
    pde::FieldWriter out(g, cfg.output_file, eq.fields);
    {
      // The PDE's settings, then the calibration's (the sensors' noise model included).
      std::ostringstream cal;
      cal.precision(17);
      cal << "calibration: {field: " << cc.field << ", log: " << (cc.log_form ? "true" : "false")
          << ", sensors: \"" << cc.sensors_file << "\", sensors_component: " << cc.sensors_component
          << ", noise_sigma: " << (cc.sigma > 0.0 ? std::to_string(cc.sigma) : std::string("\"the sensors' sigma column\""))
          << ", prior: {gamma: " << cc.prior.gamma << ", delta: " << cc.prior.delta << ", mean: \""
          << cc.prior_mean << "\"}, optimizer: {max_iterations: " << cc.optimizer.max_iterations
          << ", gradient_rtol: " << cc.optimizer.gradient_rtol << ", gradient_atol: " << cc.optimizer.gradient_atol
          << ", cg_max_iterations: " << cc.optimizer.cg_max_iterations << "}, posterior: "
          << (cc.posterior ? "true" : "false") << "}\n";
      out.write_provenance("calibrate", cfg.to_yaml() + cal.str());
    }
    out.write_frame(t_end, misfit.final_state());
    out.write_field(cc.field + "_map", fg, kappa, {cc.field + "_map"});
    out.write_field("m_map", fg, r.m, {"m_map"});
    out.write_field(cc.field + "_reference", fg, reference, {cc.field + "_reference"});
    out.write_field("m_prior_mean", fg, mean, {"m_prior_mean"});
    std::vector<double> it, obj, mis, pri, gn, cgs, solves;
    for (const auto& row : r.history) {
      it.push_back(row.iteration);
      obj.push_back(row.objective);
      mis.push_back(row.misfit);
      pri.push_back(row.prior);
      gn.push_back(row.gradient_norm);
      cgs.push_back(row.cg_iterations);
      solves.push_back(static_cast<double>(row.solves.total()));
    }
    out.write_array("history_iteration", it);
    out.write_array("history_objective", obj);
    out.write_array("history_misfit", mis);
    out.write_array("history_prior", pri);
    out.write_array("history_gradient_norm", gn);
    out.write_array("history_cg_iterations", cgs);
    out.write_array("history_pde_solves", solves);
    std::vector<double> data, sigma;
    for (const auto& s : obs->sensors()) {
      data.push_back(s.value);
      sigma.push_back(s.sigma);
    }
    out.write_array("sensor_data", data);
    out.write_array("sensor_sigma", sigma);
    out.write_array("sensor_predictions", predicted);
    if (post) {
      out.write_field("m_variance", fg, post->variance, {"m_variance"});
      out.write_field("m_prior_variance", fg, post->prior_variance, {"m_prior_variance"});
      for (std::size_t i = 0; i < post->eigenvectors.size(); ++i) {
        const std::string name = "eigenvector_" + std::to_string(i);
        out.write_field(name, fg, post->eigenvectors[i], {name});
      }
      for (std::size_t i = 0; i < post->samples.size(); ++i) {
        const std::string name = "sample_" + std::to_string(i);
        out.write_field(name, fg, post->samples[i], {name});
      }
      out.write_array("eigenvalues", post->eigenvalues);
    }
    const pde::PdeSolves& s = all_solves;
    out.write_array("pde_solves",
                    std::vector<double>{static_cast<double>(s.forward), static_cast<double>(s.adjoint),
                                        static_cast<double>(s.incremental_forward),
                                        static_cast<double>(s.incremental_adjoint)},
                    {"forward", "adjoint", "incremental_forward", "incremental_adjoint"});
    out.write_array("objective", std::vector<double>{r.objective, r.misfit, r.prior, r.gradient_norm},
                    {"objective", "misfit", "prior", "gradient_norm"});
    out.write_attribute("fit_status", optimize::to_string(verdict.status));
    out.write_attribute("convergence", verdict.describe());
    if (post && !verdict.at_optimum()) out.write_attribute("posterior_note", "Laplace posterior " + verdict.caveat());
    out.finish(verdict.file_status());
  }
  if (env.is_root()) {
    if (args.json) {
      Json j;
      j["status"] = verdict.status == optimize::FitStatus::Converged ? std::string("ok")
                                                                     : optimize::to_string(verdict.status);
      j["convergence"] = {{"status", optimize::to_string(verdict.status)}, {"test", verdict.test}};
      j["warnings"] = verdict.at_optimum() ? Json::array() : Json::array({"the result is " + verdict.caveat()});
      j["method"] = r.method;
      j["termination"] = r.termination;
      j["objective"] = r.objective;
      j["misfit"] = r.misfit;
      j["prior"] = r.prior;
      j["gradient_norm"] = r.gradient_norm;
      j["chi2"] = chi2;
      j["observations"] = obs->size();
      j["unknowns"] = fg.global_size();
      j["distance_to_reference"] = std::isfinite(distance) ? Json(distance) : Json(nullptr);
      j["cg_iterations"] = r.cg_iterations;
      j["pde_solves"] = solves_json(all_solves);
      j["prior_solves"] = r.prior_solves + (post ? post->prior_solves : 0);
      if (post) {
        j["eigenvalues"] = post->eigenvalues;
        const pde::LaplaceOptions& lo = cc.posterior_options;
        j["posterior"] = Json{{"rank", lo.eigen.rank},
                              {"oversampling", lo.eigen.oversampling},
                              {"hessian", lo.hessian == pde::HessianProduct::Exact ? "exact" : "gauss_newton"},
                              {"seed", lo.eigen.seed},
                              {"samples", post->samples.size()},
                              {"effective_parameters", post->effective_parameters},
                              {"truncation_bound", post->truncation_bound},
                              {"orthonormality_error", post->orthonormality_error},
                              {"prior_variance", {{"min", prior_var[0]}, {"mean", prior_var[1]}, {"max", prior_var[2]}}},
                              {"variance_ratio", {{"min", var_ratio[0]}, {"mean", var_ratio[1]}, {"max", var_ratio[2]}}},
                              {"hessian_actions", post->hessian_actions},
                              {"pde_solves", solves_json(post->solves)},
                              {"prior_solves", post->prior_solves},
                              {"seconds", post->seconds}};
        if (!verdict.at_optimum()) j["posterior"]["note"] = "Laplace posterior " + verdict.caveat();
      }
      j["seconds"] = r.seconds;
      Json its = Json::array();
      for (const auto& row : r.history)
        its.push_back(Json{{"iteration", row.iteration},
                           {"objective", row.objective},
                           {"misfit", row.misfit},
                           {"prior", row.prior},
                           {"gradient_norm", row.gradient_norm},
                           {"cg_iterations", row.cg_iterations},
                           {"cg_stop", row.cg_stop},
                           {"gauss_newton", row.gauss_newton},
                           {"pde_solves", solves_json(row.solves)}});
      j["iterations"] = its;
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf("\n%s\n  chi2 = 2*misfit = %.6g for %zu observations; L2 distance of m to the input's %s: %.6g\n"
                  "  %.3f s, %lld KSP solves with the prior's A\n",
                  r.brief_report().c_str(), chi2, obs->size(), cc.field.c_str(), distance, r.seconds,
                  static_cast<long long>(r.prior_solves));
      std::printf("  fit: %s\n", verdict.describe().c_str());
      if (post) {
        const pde::LaplaceOptions& lo = cc.posterior_options;
        if (!verdict.at_optimum())
          std::printf("\nWARNING: the Laplace posterior below is %s\n", verdict.caveat().c_str());
        std::printf(verdict.at_optimum()
                        ? "\nLaplace posterior at the MAP point (%s Hessian; rank %d, oversampling %d, seed %llu):\n"
                          "    i       eigenvalue   lambda/(1+lambda)\n"
                        : "\nLaplace posterior at the optimizer's last point, NOT at a converged optimum (%s Hessian; "
                          "rank %d, oversampling %d, seed %llu):\n"
                    "    i       eigenvalue   lambda/(1+lambda)\n",
                    lo.hessian == pde::HessianProduct::Exact ? "exact" : "Gauss-Newton", lo.eigen.rank,
                    lo.eigen.oversampling, static_cast<unsigned long long>(lo.eigen.seed));
        for (std::size_t i = 0; i < post->eigenvalues.size(); ++i)
          std::printf("  %3zu  %15.8e  %17.6e\n", i, post->eigenvalues[i],
                      post->eigenvalues[i] / (1.0 + post->eigenvalues[i]));
        std::printf("  effective parameters sum lambda/(1+lambda) = %.6g; truncation: variance high by <= %.3g x prior "
                    "variance\n  pointwise variance of m: prior %.6g (min %.6g, max %.6g); posterior/prior min %.4g, "
                    "mean %.4g, max %.4g\n  %zu samples; %s; %.3f s\n",
                    post->effective_parameters, post->truncation_bound, prior_var[1], prior_var[0], prior_var[2],
                    var_ratio[0], var_ratio[1], var_ratio[2], post->samples.size(), post->brief_report().c_str(),
                    post->seconds);
        std::printf("  PDE solves in all: %lld (MAP %lld + posterior %lld)\n", static_cast<long long>(all_solves.total()),
                    static_cast<long long>(r.solves.total()), static_cast<long long>(post->solves.total()));
      }
      if (!cfg.output_file.empty()) std::printf("  wrote %s\n", cfg.output_file.c_str());
    }
  }
  return verdict.at_optimum() ? 0 : 2;
}

}  // namespace

int calibrate_pde(const Environment& env, const PdeArgs& args, const io::PdeConfig& cfg,
                  const std::shared_ptr<const pde::EquationSystem>& system) {
  const io::PdeCalibrationConfig cc = io::load_pde_calibration(args.input, args.sets, cfg);
  if (!cc.present)
    throw Error(args.input + ": costate calibrate on a PDE input needs a 'calibration:' section (the parameter "
                             "field, the sensors, the prior and the optimizer; docs/pde_inverse.md)");
  if (system->field_parameters() != 1)
    throw Error(args.input + ": costate calibrate infers one parameter field; this input has " +
                std::to_string(system->field_parameters()) + " (add one under pde.parameter_fields)");
  if (system->components() != 1)
    throw Error(args.input + ": costate calibrate supports PDEs with one field; this input has " +
                std::to_string(system->components()) + " (pde.fields)");
  switch (system->dim()) {
    case 1:
      return pde::dispatch::with_equation_linear<1, 1, 1>(system, [&](auto m) { return invert(env, args, cfg, cc, m); });
    case 2:
      return pde::dispatch::with_equation_linear<2, 1, 1>(system, [&](auto m) { return invert(env, args, cfg, cc, m); });
    default:
      throw Error(args.input + ": costate calibrate supports 1-D and 2-D PDE inputs; this one is 3-D");
  }
}

}  // namespace costate::cli::detail
