#include "costate/calibrate/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "costate/core/error.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/support.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/objective.hpp"

namespace costate::io {
namespace {

/// Identifiability: the columns of S are scaled to unit length (Ŝ = S D,
/// D = diag(1/‖S_j‖)), so the singular values of Ŝ lie in [0, √p] whatever
/// the units, and 1/s_k is the collinearity index of direction k. A direction
/// with s_k ≤ kCollinearityLimit changes the residuals a million times less
/// than any single variable's unit column: the data cannot determine it
/// (e.g. two parameters that enter only as a product). Well above the
/// ~1e-12 relative accuracy of S from forward sensitivities.
constexpr double kCollinearityLimit = 1e-6;
/// A variable belongs to a direction when it carries at least this share of
/// the singular vector's squared length.
constexpr double kShare = 0.1;

ode::WeightedObservations observations(const RunConfig& cfg) {
  return {cfg.calibration.times, cfg.calibration.data, cfg.calibration.weights,
          cfg.state_names.size()};
}

/// The file's parameter that condition c's parameter k takes its value
/// from (-1: a number).
long parameter_source(const RunConfig& cfg, std::size_t c, std::size_t k) {
  return cfg.conditions.empty() ? static_cast<long>(k) : cfg.conditions[c].parameter_source[k];
}
/// Whether condition c replaces the initial value of state i.
bool replaces_initial_state(const RunConfig& cfg, std::size_t c, std::size_t i) {
  return !cfg.conditions.empty() && !cfg.conditions[c].initial_state[i].empty();
}

}  // namespace

CalibrationProblem::CalibrationProblem(const RunConfig& cfg)
    : cfg_(cfg), vars_(cfg.calibration.variables), weight_(cfg.calibration.regularization_weight) {
  COSTATE_CHECK(cfg.calibration.present && !vars_.empty(),
                cfg.input_path << ": needs a 'calibration:' section with the quantities to fit");
  ode::require(ode::supports_calibration(cfg.sensitivity.method,
                                         cfg.integrator.method),
               cfg.input_path + ": costate calibrate");
  n_conditions_ = condition_count(cfg);
  last_steps_.resize(n_conditions_);
}

RunConfig CalibrationProblem::condition_at(std::span<const double> q, std::size_t c) const {
  return condition_config(config_at(q), c);
}

std::vector<double> CalibrationProblem::start() const {
  std::vector<double> q;
  for (const auto& v : vars_) q.push_back(v.log ? std::log(v.initial) : v.initial);
  return q;
}
std::vector<double> CalibrationProblem::prior() const {
  std::vector<double> q;
  for (const auto& v : vars_) q.push_back(v.log ? std::log(v.prior) : v.prior);
  return q;
}
std::vector<double> CalibrationProblem::lower() const {
  std::vector<double> q;
  for (const auto& v : vars_)
    q.push_back(v.log ? (v.lower > 0.0 ? std::log(v.lower) : -std::numeric_limits<double>::infinity())
                      : v.lower);
  return q;
}
std::vector<double> CalibrationProblem::upper() const {
  std::vector<double> q;
  for (const auto& v : vars_) q.push_back(v.log ? std::log(v.upper) : v.upper);
  return q;
}

std::vector<double> CalibrationProblem::values(std::span<const double> q) const {
  std::vector<double> v(q.size());
  for (std::size_t j = 0; j < q.size(); ++j) v[j] = vars_[j].log ? std::exp(q[j]) : q[j];
  return v;
}

RunConfig CalibrationProblem::config_at(std::span<const double> q) const {
  RunConfig c = cfg_;
  const auto v = values(q);
  for (std::size_t j = 0; j < vars_.size(); ++j) {
    if (vars_[j].initial_state) {
      c.initial_state[vars_[j].index] = v[j];
      c.initial_state_expressions[vars_[j].index].clear();  // fitted: a number
    } else {
      c.parameters[vars_[j].index] = v[j];
    }
  }
  evaluate_initial_state(c);
  return c;
}

double CalibrationProblem::condition_term(std::size_t c, std::span<const double> q, std::span<double> dv,
                                          ode::StepPlan& steps) {
  const RunConfig rc = condition_at(q, c);
  const auto obs = observations(rc);
  const auto method = sensitivity_method_of(rc.sensitivity);  // the one conversion
  const ode::GradientResult res = observation_gradient(rc, obs, method);
  steps = res.steps;
  std::vector<double> gp = res.wrt_parameters;
  const auto extra = initial_state_parameter_vjp(rc, res.wrt_initial_state);
  for (std::size_t k = 0; k < gp.size(); ++k) gp[k] += extra[k];
  // Onto the file's parameters and initial state (io/conditions.hpp).
  std::vector<double> fgp(gp.size(), 0.0), fgy(res.wrt_initial_state.size(), 0.0);
  add_condition_gradient(cfg_, c, gp, res.wrt_initial_state, fgp, fgy);
  for (std::size_t j = 0; j < vars_.size(); ++j) dv[j] = vars_[j].initial_state ? fgy[vars_[j].index] : fgp[vars_[j].index];
  return res.objective;
}

double CalibrationProblem::objective_and_gradient(std::span<const double> q, std::span<double> g) {
  // 1. The data term, condition by condition in their order.
  const std::size_t p = vars_.size();
  std::vector<double> dv(p), dvc(p);
  double J = 0.0;
  for (std::size_t c = 0; c < n_conditions_; ++c) {
    const double Jc = condition_term(c, q, c == 0 ? std::span<double>(dv) : std::span<double>(dvc), last_steps_[c]);
    if (c == 0) {
      J = Jc;
      continue;
    }
    J += Jc;
    for (std::size_t j = 0; j < p; ++j) dv[j] += dvc[j];
  }
  ++gradient_evaluations_;
  last_q_.assign(q.begin(), q.end());
  // 2. On the optimizer's scale, with the regularisation.
  const auto v = values(q);
  const auto qp = prior();
  for (std::size_t j = 0; j < p; ++j) {
    const double d = q[j] - qp[j];
    g[j] = dv[j] * (vars_[j].log ? v[j] : 1.0) + weight_ * d;
    J += 0.5 * weight_ * d * d;
  }
  return J;
}

double CalibrationProblem::condition_objective_and_gradient(std::size_t c, std::span<const double> q,
                                                            std::span<double> g) {
  COSTATE_CHECK(c < n_conditions_ && q.size() == vars_.size() && g.size() == vars_.size(),
                "CalibrationProblem::condition_objective_and_gradient: condition " << c << " of " << n_conditions_
                    << ", q and g must hold " << vars_.size() << " values");
  std::vector<double> dv(vars_.size());
  ode::StepPlan steps;
  double J = condition_term(c, q, dv, steps);
  const auto v = values(q);
  const auto qp = prior();
  const double share = weight_ / static_cast<double>(n_conditions_);
  for (std::size_t j = 0; j < vars_.size(); ++j) {
    const double d = q[j] - qp[j];
    g[j] = dv[j] * (vars_[j].log ? v[j] : 1.0) + share * d;
    J += 0.5 * share * d * d;
  }
  return J;
}

double CalibrationProblem::hessian_vector(std::span<const double> q, std::span<const double> u,
                                          std::span<double> g, std::span<double> Hu) {
  COSTATE_CHECK(q.size() == vars_.size() && u.size() == vars_.size() && g.size() == vars_.size() &&
                    Hu.size() == vars_.size(),
                "CalibrationProblem::hessian_vector: q, u, g and Hu must hold "
                    << vars_.size() << " values (one per fitted quantity)");
  ode::require(ode::supports(cfg_.sensitivity.method,
                             cfg_.integrator, 2),
               cfg_.input_path + ": the calibration's Hessian-vector product");
  const RunConfig at = config_at(q);
  const auto v = values(q);
  const std::size_t np = at.parameters.size(), n = at.state_names.size();
  // The natural direction w = D u on the file's (p, y0).
  std::vector<double> wp(np, 0.0), wy(n, 0.0);
  for (std::size_t j = 0; j < vars_.size(); ++j)
    (vars_[j].initial_state ? wy : wp)[vars_[j].index] += u[j] * (vars_[j].log ? v[j] : 1.0);
  // Σ_c over the conditions in order (the file itself without them): w
  // pushed onto condition c's (p_c, y0_c) — p_c,k moves with the file's
  // parameter it reads, y0_c with the file's y0 where not replaced, and
  // initial values written as expressions with p_c — and the condition's
  // gradient and H·w pulled back onto the file's by the transpose of the
  // same (linear) map (add_condition_gradient).
  std::vector<double> gp(np, 0.0), gy(n, 0.0), hp(np, 0.0), hy(n, 0.0);
  double J = 0.0;
  for (std::size_t cond = 0; cond < n_conditions_; ++cond) {
    const RunConfig c = condition_config(at, cond);
    const auto obs = observations(c);
    ode::HessianDirection dir{std::vector<double>(np, 0.0), std::vector<double>(n, 0.0)};
    for (std::size_t k = 0; k < np; ++k) {
      const long src = parameter_source(cfg_, cond, k);
      if (src >= 0) dir.parameters[k] = wp[static_cast<std::size_t>(src)];
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!replaces_initial_state(cfg_, cond, i) && c.initial_state_expressions[i].empty()) dir.initial_state[i] = wy[i];
    const std::vector<double> dy0 = initial_state_parameter_jvp(c, dir.parameters);
    for (std::size_t i = 0; i < n; ++i) dir.initial_state[i] += dy0[i];
    const ode::HessianVectorResult r = observation_hessian_vector(c, obs, dir, sensitivity_method_of(c.sensitivity));
    std::vector<double> cgp = r.gradient_wrt_parameters, chp = r.hv_wrt_parameters;
    const auto extra = initial_state_parameter_vjp(c, r.gradient_wrt_initial_state);
    const auto extra2 = initial_state_parameter_hvp(c, dir.parameters, r.gradient_wrt_initial_state,
                                                    r.hv_wrt_initial_state);
    for (std::size_t k = 0; k < np; ++k) {
      cgp[k] += extra[k];
      chp[k] += extra2[k];
    }
    add_condition_gradient(cfg_, cond, cgp, r.gradient_wrt_initial_state, gp, gy);
    add_condition_gradient(cfg_, cond, chp, r.hv_wrt_initial_state, hp, hy);
    J = cond == 0 ? r.objective : J + r.objective;
  }
  const auto qp = prior();
  for (std::size_t j = 0; j < vars_.size(); ++j) {
    const FitVariable& f = vars_[j];
    const double gv = f.initial_state ? gy[f.index] : gp[f.index];
    const double hv = f.initial_state ? hy[f.index] : hp[f.index];
    const double d = q[j] - qp[j];
    const double dv = f.log ? v[j] : 1.0;  // dv/dq, and d²v/dq² = v (log) or 0
    g[j] = gv * dv + weight_ * d;
    Hu[j] = dv * hv + (f.log ? gv * v[j] * u[j] : 0.0) + weight_ * u[j];
    J += 0.5 * weight_ * d * d;
  }
  return J;
}

CalibrationProblem::Residuals CalibrationProblem::residuals(std::span<const double> q) {
  if (last_q_.size() != q.size() || !std::equal(q.begin(), q.end(), last_q_.begin())) {
    std::vector<double> g(q.size());
    (void)objective_and_gradient(q, g);
  }
  Residuals out;
  const std::size_t p = vars_.size();
  for (std::size_t cond = 0; cond < n_conditions_; ++cond) {
    const RunConfig c = condition_at(q, cond);
    const auto obs = observations(c);
    const ode::ResidualSensitivities rs = residual_sensitivities(c, obs, last_steps_[cond]);
    const std::size_t n = c.state_names.size(), np = c.parameters.size();
    const std::size_t m = rs.residuals.size();
    // ∂y0_i/∂p for the initial values written as expressions (not fitted).
    std::vector<std::vector<double>> dy0dp(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (c.initial_state_expressions[i].empty()) continue;
      std::vector<double> unit(n, 0.0);
      unit[i] = 1.0;
      dy0dp[i] = initial_state_parameter_vjp(c, unit);
    }
    out.r.insert(out.r.end(), rs.residuals.begin(), rs.residuals.end());
    out.predicted.insert(out.predicted.end(), rs.predicted.begin(), rs.predicted.end());
    out.time_index.insert(out.time_index.end(), rs.time_index.begin(), rs.time_index.end());
    out.state_index.insert(out.state_index.end(), rs.state_index.begin(), rs.state_index.end());
    out.condition_index.insert(out.condition_index.end(), m, cond);
    const std::size_t first = out.S.size() / std::max<std::size_t>(p, 1);
    out.S.resize((first + m) * p, 0.0);
    for (std::size_t row = 0; row < m; ++row)
      for (std::size_t j = 0; j < p; ++j) {
        const FitVariable& v = vars_[j];
        double s = 0.0;
        if (v.initial_state) {
          if (!replaces_initial_state(cfg_, cond, v.index)) s = rs.at(row, np + v.index);
        } else {
          // Every parameter of the condition that takes the fitted one's value.
          for (std::size_t k = 0; k < np; ++k) {
            if (parameter_source(cfg_, cond, k) != static_cast<long>(v.index)) continue;
            double t = rs.at(row, k);
            for (std::size_t i = 0; i < n; ++i)
              if (!dy0dp[i].empty()) t += rs.at(row, np + i) * dy0dp[i][k];
            s += t;
          }
        }
        out.S[(first + row) * p + j] = s;
      }
  }
  return out;
}

void CalibrationProblem::gauss_newton(std::span<const double> q, std::span<double> H) {
  const Residuals R = residuals(q);
  const std::size_t p = vars_.size(), m = R.r.size();
  const auto v = values(q);
  std::fill(H.begin(), H.end(), 0.0);
  for (std::size_t row = 0; row < m; ++row)
    for (std::size_t a = 0; a < p; ++a) {
      const double sa = R.S[row * p + a] * (vars_[a].log ? v[a] : 1.0);
      for (std::size_t b = 0; b < p; ++b)
        H[a * p + b] += sa * R.S[row * p + b] * (vars_[b].log ? v[b] : 1.0);
    }
  for (std::size_t a = 0; a < p; ++a) H[a * p + a] += weight_;
}

const CalibrationJournal::Entry* CalibrationJournal::find(int kind, std::span<const double> q) const {
  // Bitwise: memcmp, so that -0.0 and 0.0 (and NaN payloads) are told apart.
  for (const Entry& e : entries)
    if (e.kind == kind && e.q.size() == q.size() &&
        (q.empty() || std::memcmp(e.q.data(), q.data(), q.size() * sizeof(double)) == 0))
      return &e;
  return nullptr;
}

namespace {

/// Residuals, σ̂², covariance, correlation, standard errors and
/// identifiability of `rep` at q (the fit's point): from the unit-column
/// S D = U Σ Vᵀ of the residuals' sensitivities.
void statistics_at(CalibrationProblem& problem, const RunConfig& cfg, std::span<const double> q,
                   CalibrationReport& rep) {
  const std::size_t p = problem.size();
  const auto R = problem.residuals(q);
  const std::size_t m = R.r.size(), n = cfg.state_names.size();
  rep.n_residuals = m;
  for (std::size_t row = 0; row < m; ++row) {
    rep.rss += R.r[row] * R.r[row];
    const std::size_t k = R.time_index[row], i = R.state_index[row];
    const bool conditions = !cfg.conditions.empty();
    const ConditionConfig* cond = conditions ? &cfg.conditions[R.condition_index[row]] : nullptr;
    rep.residual_times.push_back(conditions ? cond->times[k] : cfg.calibration.times[k]);
    rep.residual_states.push_back(cfg.state_names[i]);
    if (conditions) rep.residual_conditions.push_back(cond->id);
    rep.observed.push_back(conditions ? cond->data[k * n + i] : cfg.calibration.data[k * n + i]);
    rep.predicted.push_back(R.predicted[row]);
    rep.residuals.push_back(R.r[row]);
  }
  rep.sigma_estimated = !cfg.calibration.noise_given;
  if (rep.sigma_estimated)
    rep.sigma2 = m > p ? rep.rss / static_cast<double>(m - p) : std::numeric_limits<double>::quiet_NaN();

  // 3. Covariance and identifiability from the unit-column S D = U Σ Vᵀ:
  //    (SᵀS)⁻¹ = D V Σ⁻² Vᵀ D, dropping the undetermined directions.
  const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> S(
      R.S.data(), static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(p));
  const auto P = static_cast<Eigen::Index>(p);
  Eigen::VectorXd d(P);
  rep.unidentifiable.assign(p, 0);
  std::vector<int> no_error(p, 0);
  for (Eigen::Index j = 0; j < P; ++j) {
    const double norm = S.col(j).norm();
    d[j] = norm > 0.0 ? 1.0 / norm : 1.0;
    if (!(norm > 0.0)) rep.unidentifiable[static_cast<std::size_t>(j)] = no_error[static_cast<std::size_t>(j)] = 1;
  }
  const Eigen::MatrixXd SD = S * d.asDiagonal();
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(SD, Eigen::ComputeFullV);
  const Eigen::VectorXd s = svd.singularValues();
  const Eigen::MatrixXd V = svd.matrixV();
  rep.singular_values.assign(s.data(), s.data() + s.size());
  Eigen::MatrixXd cov_scaled = Eigen::MatrixXd::Zero(P, P);
  for (Eigen::Index k = 0; k < P; ++k) {
    const double sk = k < s.size() ? s[k] : 0.0;
    const bool undetermined = !(sk > kCollinearityLimit);
    if (!undetermined) {
      cov_scaled += V.col(k) * V.col(k).transpose() / (sk * sk);
      continue;
    }
    for (Eigen::Index j = 0; j < P; ++j)
      if (V(j, k) * V(j, k) >= kShare)
        rep.unidentifiable[static_cast<std::size_t>(j)] = no_error[static_cast<std::size_t>(j)] = 1;
  }
  const Eigen::MatrixXd cov = rep.sigma2 * (d.asDiagonal() * cov_scaled * d.asDiagonal());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  rep.covariance.assign(p * p, nan);
  rep.correlation.assign(p * p, nan);
  rep.standard_errors.assign(p, nan);
  for (std::size_t a = 0; a < p; ++a) {
    if (no_error[a]) continue;
    rep.standard_errors[a] = std::sqrt(cov(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(a)));
  }
  for (std::size_t a = 0; a < p; ++a)
    for (std::size_t b = 0; b < p; ++b) {
      if (no_error[a] || no_error[b]) continue;
      const double c = cov(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b));
      rep.covariance[a * p + b] = c;
      rep.correlation[a * p + b] = c / (rep.standard_errors[a] * rep.standard_errors[b]);
    }
}

}  // namespace

CalibrationReport calibrate(const RunConfig& cfg,
                            const std::function<void(const optimize::Iteration&)>& monitor,
                            CalibrationJournal* journal) {
  CalibrationProblem problem(cfg);
  const std::size_t p = problem.size();
  CalibrationReport rep;
  for (const auto& v : problem.variables()) {
    rep.names.push_back(v.label());
    rep.initial.push_back(v.initial);
    rep.lower.push_back(v.lower);
    rep.upper.push_back(v.upper);
    rep.prior.push_back(v.prior);
    rep.log_transformed.push_back(v.log ? 1 : 0);
  }
  rep.gradient_method = ode::to_string(cfg.sensitivity.method);

  // 1. The fit.
  optimize::Objective f;
  f.n = p;
  f.objective_and_gradient = [&](std::span<const double> q, std::span<double> g) {
    return problem.objective_and_gradient(q, g);
  };
  f.hessian = [&](std::span<const double> q, std::span<double> H) { problem.gauss_newton(q, H); };
  if (journal) {
    COSTATE_CHECK(journal->n == 0 || journal->n == p,
                  cfg.input_path << ": the recorded calibration fits " << journal->n
                                 << " quantities, this one " << p);
    journal->n = p;
    // Replays a recorded evaluation (its numbers, or its error), else runs
    // `compute` and records it.
    auto through = [journal](int kind, std::span<const double> q, std::span<double> out,
                             const std::function<double()>& compute) {
      journal->last_iterate.assign(q.begin(), q.end());
      if (const CalibrationJournal::Entry* e = journal->find(kind, q)) {
        ++journal->replayed;
        if (!e->error.empty()) throw Error(e->error);
        std::copy(e->out.begin(), e->out.end(), out.begin());
        return e->objective;
      }
      CalibrationJournal::Entry e;
      e.kind = kind;
      e.q.assign(q.begin(), q.end());
      try {
        e.objective = compute();
        e.out.assign(out.begin(), out.end());
      } catch (const Error& err) {
        e.error = err.what();
        if (e.error.empty()) e.error = "(no message)";  // non-empty marks a failed entry
        journal->entries.push_back(std::move(e));
        throw;
      }
      journal->entries.push_back(std::move(e));
      return journal->entries.back().objective;
    };
    f.objective_and_gradient = [&problem, through](std::span<const double> q, std::span<double> g) {
      return through(CalibrationJournal::Gradient, q, g,
                     [&] { return problem.objective_and_gradient(q, g); });
    };
    f.hessian = [&problem, through](std::span<const double> q, std::span<double> H) {
      (void)through(CalibrationJournal::GaussNewton, q, H, [&] {
        problem.gauss_newton(q, H);
        return 0.0;
      });
    };
  }
  const auto lo = problem.lower(), hi = problem.upper(), q0 = problem.start();
  rep.tao = optimize::minimize(f, q0, lo, hi, cfg.calibration.optimizer, monitor);
  rep.converged = rep.tao.converged;
  const std::vector<double>& q = rep.tao.x;
  rep.values = problem.values(q);
  rep.fitted = problem.config_at(q);

  // 2. Residuals and the sensitivity matrix at the fit.
  std::vector<double> g(p);
  rep.objective = problem.objective_and_gradient(q, g);
  // Its status: a stop without TAO's test is "stalled" when the gradient is
  // at its noise floor — measured as its change with the integrator's
  // tolerances tightened optimize::kTighter-fold (optimize/fit_status.hpp).
  optimize::FitEnd end{.converged = rep.tao.converged,
                       .reason = rep.tao.termination,
                       .gradient_norm = rep.tao.gradient_norm};
  if (!end.converged && optimize::is_stall_reason(end.reason) && !cfg.integrator.fixed_step()) {
    RunConfig tight = cfg;
    tight.integrator.rtol *= optimize::kTighter;
    tight.integrator.atol *= optimize::kTighter;
    for (double& a : tight.integrator.atol_per_state) a *= optimize::kTighter;
    std::vector<double> gt(p);
    try {
      CalibrationProblem at_tight(tight);
      (void)at_tight.objective_and_gradient(q, gt);
      double d2 = 0.0;
      for (std::size_t a = 0; a < p; ++a) d2 += (g[a] - gt[a]) * (g[a] - gt[a]);
      end.gradient_noise = std::sqrt(d2);
    } catch (const Error&) {
      // Not integrable at the tighter tolerances: the noise stays unmeasured.
    }
  }
  rep.verdict = optimize::judge_fit(end);
  statistics_at(problem, cfg, q, rep);
  return rep;
}

optimize::Dataset condition_dataset(CalibrationProblem& problem, MPI_Comm comm) {
  optimize::Dataset d;
  d.n_conditions = problem.conditions();
  d.n = problem.size();
  d.condition = [&problem](std::size_t c, std::span<const double> q, std::span<double> g) {
    return problem.condition_objective_and_gradient(c, q, g);
  };
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return d;
  // Over the ranks: batch position i on rank i mod size; each term is one
  // rank's value and zeros elsewhere, so the all-reduced sum is that value.
  const std::size_t n = problem.size();
  d.batch = [&problem, comm, n](std::span<const std::size_t> conditions, std::span<const double> q,
                                std::span<double> loss, std::span<double> gradient) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    std::vector<double> terms(conditions.size() * (n + 1), 0.0), g(n);
    for (std::size_t i = static_cast<std::size_t>(rank); i < conditions.size(); i += static_cast<std::size_t>(ranks)) {
      double l = 0.0;
      try {
        l = problem.condition_objective_and_gradient(conditions[i], q, g);
      } catch (const Error&) {
        l = std::numeric_limits<double>::quiet_NaN();  // a failed condition, reported by every rank
      }
      terms[i * (n + 1)] = l;
      std::copy(g.begin(), g.end(), terms.begin() + static_cast<std::ptrdiff_t>(i * (n + 1) + 1));
    }
    MPI_Allreduce(MPI_IN_PLACE, terms.data(), static_cast<int>(terms.size()), MPI_DOUBLE, MPI_SUM, comm);
    for (std::size_t i = 0; i < conditions.size(); ++i) {
      loss[i] = terms[i * (n + 1)];
      std::copy_n(terms.begin() + static_cast<std::ptrdiff_t>(i * (n + 1) + 1), n,
                  gradient.begin() + static_cast<std::ptrdiff_t>(i * n));
    }
  };
  return d;
}

StochasticCalibration calibrate_stochastic(const RunConfig& cfg, const optimize::StochasticOptions& options,
                                           const optimize::StochasticCallbacks& callbacks,
                                           const optimize::StochasticState* resume_from, MPI_Comm comm) {
  CalibrationProblem problem(cfg);
  StochasticCalibration out;
  for (const auto& v : problem.variables()) out.names.push_back(v.label());
  out.initial = problem.start();
  const optimize::Dataset d = condition_dataset(problem, comm);
  // J at the returned point from one full evaluation (the full-batch
  // objective's bits), not the fit's own pass over ℓ_c.
  optimize::StochasticOptions fo = options;
  fo.final_objective = false;
  try {
    out.result = optimize::fit(d, out.initial, problem.lower(), problem.upper(), fo, callbacks, resume_from);
  } catch (const Error& e) {  // bad settings for these conditions, or a start that cannot be simulated
    const std::string what = e.what();
    if (what.rfind(cfg.input_path, 0) == 0) throw;
    throw Error(cfg.input_path + ": " + what);
  }
  out.values = problem.values(out.result.x);
  if (out.result.termination != "interrupted" && options.final_objective) {
    std::vector<double> g(problem.size());
    try {
      out.result.objective = problem.objective_and_gradient(out.result.x, g);
    } catch (const Error&) {
      out.result.objective = std::numeric_limits<double>::quiet_NaN();  // reported as not finite
    }
    out.result.simulations += static_cast<std::int64_t>(problem.conditions());
    out.result.state.simulations = out.result.simulations;
  }
  // At a converged full-batch finish: the standard errors, as the TAO
  // calibration computes them at its optimum (every rank, the same bits).
  if (out.result.finish_converged && std::isfinite(out.result.objective)) {
    CalibrationReport rep;
    try {
      statistics_at(problem, cfg, out.result.x, rep);
      out.standard_errors = rep.standard_errors;
    } catch (const Error&) {
      // the residuals' sensitivities failed at the optimum: no standard errors (reported as absent)
    }
  }
  return out;
}

}  // namespace costate::io
