// The MAP point of a PDE inversion: Newton-CG and L-BFGS (inversion.hpp).
#include "costate/pde/inversion.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/optimize/tao.hpp"

namespace costate::pde {

std::string to_string(InversionMethod m) { return m == InversionMethod::NewtonCg ? "newton_cg" : "lbfgs"; }

InversionMethod inversion_method_from_string(const std::string& name) {
  if (name == "newton_cg") return InversionMethod::NewtonCg;
  if (name == "lbfgs") return InversionMethod::Lbfgs;
  throw Error("pde::InversionMethod: unknown method \"" + name + "\"; expected newton_cg or lbfgs");
}

void InversionOptions::validate() const {
  using costate::detail::format_value;
  COSTATE_CHECK(max_iterations >= 1, "pde::InversionOptions::max_iterations = " << max_iterations << " must be >= 1");
  COSTATE_CHECK(std::isfinite(gradient_rtol) && gradient_rtol >= 0.0 && gradient_rtol < 1.0,
                "pde::InversionOptions::gradient_rtol = " << format_value(gradient_rtol) << " must lie in [0, 1)");
  COSTATE_CHECK(std::isfinite(gradient_atol) && gradient_atol >= 0.0,
                "pde::InversionOptions::gradient_atol = " << format_value(gradient_atol) << " must be >= 0");
  COSTATE_CHECK(gradient_rtol > 0.0 || gradient_atol > 0.0,
                "pde::InversionOptions: gradient_rtol and gradient_atol are both 0 (set one > 0)");
  COSTATE_CHECK(gauss_newton_iterations >= 0, "pde::InversionOptions::gauss_newton_iterations = "
                                                  << gauss_newton_iterations << " must be >= 0");
  COSTATE_CHECK(eta_max > 0.0 && eta_max < 1.0,
                "pde::InversionOptions::eta_max = " << format_value(eta_max) << " must lie in (0, 1)");
  COSTATE_CHECK(cg_max_iterations >= 1,
                "pde::InversionOptions::cg_max_iterations = " << cg_max_iterations << " must be >= 1");
  COSTATE_CHECK(armijo_c > 0.0 && armijo_c < 0.5,
                "pde::InversionOptions::armijo_c = " << format_value(armijo_c) << " must lie in (0, 0.5)");
  COSTATE_CHECK(max_backtracks >= 0, "pde::InversionOptions::max_backtracks = " << max_backtracks << " must be >= 0");
}

std::string InversionResult::brief_report() const {
  std::ostringstream s;
  s << method << ": " << termination << " after " << iterations << " iterations (" << cg_iterations
    << " CG), J = " << costate::detail::format_value(objective) << " (misfit "
    << costate::detail::format_value(misfit) << ", prior " << costate::detail::format_value(prior)
    << "), |g| = " << costate::detail::format_value(gradient_norm) << ", PDE solves " << solves.total() << " ("
    << solves.forward << " forward, " << solves.adjoint << " adjoint, " << solves.incremental_forward
    << " incremental forward, " << solves.incremental_adjoint << " incremental adjoint)";
  return s.str();
}

namespace {

PdeSolves minus(const PdeSolves& a, const PdeSolves& b) {
  return {a.forward - b.forward, a.adjoint - b.adjoint, a.incremental_forward - b.incremental_forward,
          a.incremental_adjoint - b.incremental_adjoint};
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct CgOutcome {
  int iterations = 0;
  std::string stop;
};

/// Steihaug PCG on H p = −g, preconditioner P = 𝐑⁻¹, stop at
/// ‖r‖_P ≤ η ‖g‖_P (see inversion.hpp).
CgOutcome steihaug_pcg(MisfitModel& model, const Prior& prior, HessianProduct kind, const GlobalVector& g, double eta,
                       int max_iterations, const GlobalVector& p) {
  const Grid& fg = model.field_grid();
  GlobalVector r = fg.create_global(), z = fg.create_global(), d = fg.create_global(), hd = fg.create_global(),
               tmp = fg.create_global();
  fill(p, 0.0);
  scale(r, -1.0, g);  // r = −g − H·0
  prior.apply_inverse(r, z);
  double rz = dot(r, z);
  const double target = eta * std::sqrt(std::max(rz, 0.0));
  deep_copy(d, z);
  CgOutcome out;
  Progress progress("CG iteration", static_cast<double>(max_iterations));
  for (int it = 0; it < max_iterations; ++it) {
    progress.update(static_cast<double>(it));
    model.hessian_vector(d, hd, kind);
    prior.apply(d, tmp);
    axpy(1.0, tmp, hd);
    const double dhd = dot(d, hd);
    if (!(dhd > 0.0)) {  // negative curvature: keep p (or −𝐑⁻¹g at the start)
      if (it == 0) deep_copy(p, d);
      out.iterations = it + 1;
      out.stop = "negative curvature";
      return out;
    }
    const double alpha = rz / dhd;
    axpy(alpha, d, p);
    axpy(-alpha, hd, r);
    prior.apply_inverse(r, z);
    const double rz_new = dot(r, z);
    out.iterations = it + 1;
    if (std::sqrt(std::max(rz_new, 0.0)) <= target) {
      out.stop = "tolerance";
      return out;
    }
    linear_sum(d, 1.0, z, rz_new / rz, d);
    rz = rz_new;
  }
  out.stop = "max iterations";
  return out;
}

InversionResult newton_cg(MisfitModel& model, const Prior& prior, const GlobalVector& start, const InversionOptions& o,
                          const std::function<void(const InversionIteration&)>& monitor) {
  const auto t_start = std::chrono::steady_clock::now();
  const Grid& fg = model.field_grid();
  InversionResult res;
  res.method = "newton_cg";
  GlobalVector m = fg.create_global("pde::map"), g = fg.create_global(), gp = fg.create_global(),
               p = fg.create_global(), trial = fg.create_global();
  deep_copy(m, start);
  double g0 = 0.0, g_prev = 0.0, eta_prev = o.eta_max, tolerance = 0.0;
  constexpr int kStagnantSteps = 3;
  int stagnant = 0;  // consecutive accepted steps that found no J below the best so far
  double best = std::numeric_limits<double>::infinity();
  const std::int64_t prior_solves0 = prior.solves();
  const PdeSolves solves0 = model.solves();
  Progress progress("Newton iteration", static_cast<double>(o.max_iterations));
  for (int k = 0;; ++k) {
    InversionIteration row;
    row.iteration = k;
    row.misfit = model.linearize(m, g);
    row.prior = prior.gradient(m, gp);
    axpy(1.0, gp, g);
    row.objective = row.misfit + row.prior;
    row.gradient_norm = l2_norm(g);
    row.solves = minus(model.solves(), solves0);
    if (k == 0) {
      g0 = row.gradient_norm;
      tolerance = std::max(o.gradient_atol, o.gradient_rtol * g0);
    }
    res.objective = row.objective;
    res.misfit = row.misfit;
    res.prior = row.prior;
    res.gradient_norm = row.gradient_norm;
    res.iterations = k;
    {
      std::ostringstream note;
      note.precision(6);
      note << "J = " << row.objective << ", |g| = " << row.gradient_norm;
      progress.update(static_cast<double>(k), note.str());
    }
    const auto finish = [&](const std::string& why, bool converged) {
      res.history.push_back(row);
      if (monitor) monitor(row);
      res.termination = why;
      res.converged = converged;
    };
    if (row.gradient_norm <= tolerance) {
      finish("converged: |g| <= " + costate::detail::format_value(tolerance), true);
      break;
    }
    // Steps accepted only by the round-off slack below, none reaching a J
    // below the best so far (J hops between rounding neighbours): the search
    // works at J's rounding, a stall (optimize::is_stall_reason), not
    // progress toward the iteration limit.
    if (stagnant >= kStagnantSteps) {
      finish("stopped: the line search found no decrease of J in " + std::to_string(kStagnantSteps) +
                 " steps (J at its round-off)",
             false);
      break;
    }
    if (k >= o.max_iterations) {
      finish("stopped: max_iterations = " + std::to_string(o.max_iterations), false);
      break;
    }
    // Eisenstat–Walker forcing (choice 2, γ = 0.9, α = 2), safeguarded.
    double eta = o.eta_max;
    std::string rule = "eta_max";
    if (k > 0) {
      const double ratio = row.gradient_norm / g_prev;
      eta = 0.9 * ratio * ratio;
      rule = "eisenstat_walker";
      const double safeguard = 0.9 * eta_prev * eta_prev;
      if (safeguard > 0.1 && safeguard > eta) {
        eta = safeguard;
        rule = "safeguard";
      }
      if (eta >= o.eta_max) {
        eta = o.eta_max;
        rule = "eta_max";
      }
    }
    const double floor = std::min(o.eta_max, 0.5 * tolerance / row.gradient_norm);
    if (floor > eta) {
      eta = floor;
      rule = "floor";
    }
    row.forcing = eta;
    row.forcing_rule = rule;
    row.gauss_newton = k < o.gauss_newton_iterations;
    const CgOutcome cg = steihaug_pcg(model, prior, row.gauss_newton ? HessianProduct::GaussNewton : HessianProduct::Exact,
                                      g, eta, o.cg_max_iterations, p);
    row.cg_iterations = cg.iterations;
    row.cg_stop = cg.stop;
    res.cg_iterations += cg.iterations;
    // Armijo backtracking on J.
    const double slope = dot(g, p);
    res.predicted_decrease = -0.5 * slope;
    if (!(slope < 0.0)) {
      finish("stopped: the Newton direction is not a descent direction (g.p = " +
                 costate::detail::format_value(slope) + ")",
             false);
      break;
    }
    double alpha = 1.0, j_accepted = row.objective;
    bool accepted = false;
    for (int b = 0; b <= o.max_backtracks; ++b, alpha *= 0.5) {
      linear_sum(trial, 1.0, m, alpha, p);
      const double j_trial = model.misfit(trial) + prior.value(trial);
      // Round-off slack: near the optimum the decrease c α gᵀp falls below
      // the rounding of J itself, while the gradient is still accurate.
      const double slack = 8.0 * std::numeric_limits<double>::epsilon() * std::abs(row.objective);
      if (std::isfinite(j_trial) && j_trial <= row.objective + o.armijo_c * alpha * slope + slack) {
        accepted = true;
        j_accepted = j_trial;
        break;
      }
    }
    if (!accepted) {
      row.step_length = 0.0;
      finish("stopped: the Armijo line search failed after " + std::to_string(o.max_backtracks) + " backtracks",
             false);
      break;
    }
    row.step_length = alpha;
    if (j_accepted < best) {
      best = j_accepted;
      stagnant = 0;
    } else {
      ++stagnant;
    }
    res.history.push_back(row);
    if (monitor) monitor(row);
    deep_copy(m, trial);
    g_prev = row.gradient_norm;
    eta_prev = eta;
  }
  res.m = m;
  res.solves = minus(model.solves(), solves0);
  res.prior_solves = prior.solves() - prior_solves0;
  res.seconds = seconds_since(t_start);
  return res;
}

InversionResult lbfgs(MisfitModel& model, const Prior& prior, const GlobalVector& start, const InversionOptions& o,
                      const std::function<void(const InversionIteration&)>& monitor) {
  const auto t_start = std::chrono::steady_clock::now();
  const Grid& fg = model.field_grid();
  InversionResult res;
  res.method = "lbfgs";
  GlobalVector m = fg.create_global("pde::map"), g = fg.create_global(), gp = fg.create_global();
  const std::int64_t prior_solves0 = prior.solves();
  const PdeSolves solves0 = model.solves();
  // Evaluations by their J (to attach misfit and prior to TAO's rows).
  struct Eval {
    double objective, misfit, prior;
  };
  std::vector<Eval> evals;
  const optimize::Objective f{
      .n = static_cast<std::size_t>(fg.global_size()),
      .objective_and_gradient = [&](std::span<const double> x, std::span<double> grad) {
        fg.scatter(x, m);
        const double phi = model.linearize(m, g);
        const double r = prior.gradient(m, gp);
        axpy(1.0, gp, g);
        const std::vector<double> all = fg.gather(g);
        std::copy(all.begin(), all.end(), grad.begin());
        evals.push_back({phi + r, phi, r});
        return phi + r;
      },
      .hessian = {}};
  const std::vector<double> x0 = fg.gather(start);
  const std::vector<double> lower(x0.size(), -std::numeric_limits<double>::infinity()),
      upper(x0.size(), std::numeric_limits<double>::infinity());
  double g0 = -1.0;
  const optimize::TaoOptions tao{.method = optimize::TaoMethod::Blmvm,
                                 .gatol = o.gradient_atol,
                                 .grtol = 0.0,
                                 .gttol = o.gradient_rtol,
                                 .max_iterations = o.max_iterations,
                                 .max_function_evaluations = 20 * o.max_iterations + 20,
                                 .options_prefix = "inversion_"};
  const optimize::TaoResult r = optimize::minimize(f, x0, lower, upper, tao, [&](const optimize::Iteration& it) {
    InversionIteration row;
    row.iteration = it.iteration;
    row.objective = it.objective;
    row.gradient_norm = it.gradient_norm;
    if (g0 < 0.0) g0 = it.gradient_norm;
    for (auto e = evals.rbegin(); e != evals.rend(); ++e)
      if (e->objective == it.objective) {
        row.misfit = e->misfit;
        row.prior = e->prior;
        break;
      }
    row.solves = minus(model.solves(), solves0);
    res.history.push_back(row);
    if (monitor) monitor(row);
  });
  fg.scatter(r.x, m);
  res.m = m;
  res.objective = r.objective;
  res.gradient_norm = r.gradient_norm;
  if (!res.history.empty()) {
    res.misfit = res.history.back().misfit;
    res.prior = res.history.back().prior;
  }
  res.iterations = r.iterations;
  res.converged = r.converged;
  res.termination = (r.converged ? "converged: " : "stopped: ") + r.termination;
  res.solves = minus(model.solves(), solves0);
  res.prior_solves = prior.solves() - prior_solves0;
  res.seconds = seconds_since(t_start);
  return res;
}

}  // namespace

InversionResult find_map(MisfitModel& misfit, const Prior& prior, const GlobalVector& start,
                         const InversionOptions& options,
                         const std::function<void(const InversionIteration&)>& monitor) {
  options.validate();
  COSTATE_CHECK(&prior.grid() == &misfit.field_grid() || prior.grid().owned_size() == misfit.field_grid().owned_size(),
                "pde::find_map: the prior is on another grid than the parameter field");
  COSTATE_CHECK_EQ(start.size(), misfit.field_grid().owned_size(), "pde::find_map: the start is not a field of the grid");
  return options.method == InversionMethod::NewtonCg ? newton_cg(misfit, prior, start, options, monitor)
                                                     : lbfgs(misfit, prior, start, options, monitor);
}

}  // namespace costate::pde
