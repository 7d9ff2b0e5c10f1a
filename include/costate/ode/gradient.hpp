#pragma once
/// \file
/// ode::gradient — the objective of an ODE solution and its gradient with
/// respect to the parameters p and the initial state y0, by a method the
/// caller passes as a value:
///
///     auto g = ode::gradient(problem, objective,
///                            ode::DiscreteAdjoint{.checkpointing = ode::Binomial{.snapshots = 10}},
///                            {.method = ode::Method::RK4, .dt = 1e-2});
///     g.objective; g.wrt_parameters; g.wrt_initial_state; g.checkpoints;
///
/// DiscreteAdjoint: the exact gradient of the discrete solution. The state is
/// y augmented with z (z' = q, the running cost). The reverse sweep runs the
/// explicit Runge–Kutta adjoint of every step (explicit_rk.hpp), from
///     λ_l = ∂g/∂y(y_l),  λ_z = 1,  μ = ∂g/∂p,
/// adding ∂ℓ_k/∂y to λ (and ∂ℓ_k/∂p to μ) when it passes an observation
/// time; dJ/dy0 = λ_0, dJ/dp = μ. Explicit methods run on the compiled
/// ode::System (system.hpp) and ExplicitRkScheme (scheme.hpp): each reverse
/// step linearizes f once per stage — a dense Dual Jacobian for small
/// systems, the coloured sparse one for large sparse right-hand sides, a
/// short tape of one right-hand side otherwise (a private tape: a recording
/// of the caller is not disturbed) — the time loop is never taped. States
/// are kept or recomputed by the checkpoint schedule (checkpointing.hpp).
///
/// Step sizes are constants of the adjoint: fixed-step methods use dt
/// (landing on observation times); an adaptive run (dopri5, sdirk3, bdf) is
/// made first to choose the steps — and bdf's orders, hence its
/// coefficients — landing exactly on observation times, and its accepted
/// steps (GradientResult::step_times, step_orders) are then replayed by the
/// adjoint's sweeps. The gradient is that of the replayed discrete solution:
/// it ignores how the error control would move the steps if p changed.
/// Steppers: explicit Runge–Kutta; the implicit θ-methods (backward Euler,
/// Crank–Nicolson; the adjoint of a step is its transposed linear solve —
/// steppers/theta.hpp); sdirk3 (a transposed solve with (I − hγ J(Y_i))ᵀ per
/// stage — steppers/sdirk3.hpp) and bdf, whose checkpointed state is the
/// history window (y_n … y_{n−4}): its step's adjoint solves
/// (I − hβ J)ᵀ μ = λ and hands α_j μ to the older states (steppers/bdf.hpp,
/// detail/implicit_sweep.hpp). Replayed implicit steps are converged to
/// newton_tol (and, for sdirk3/bdf, to 10⁻⁶ of the error tolerance), since
/// the adjoint assumes the implicit equations hold exactly. bdf's first run
/// already makes its steps that way (BdfStepper::set_replay: the accepted
/// states are the replayed ones, bit for bit), so a StoreAll adjoint keeps
/// them and their step Jacobians and replays nothing; the other schedules
/// replay from their snapshots and give the same bits.
/// Forward sensitivities for every stepper (the implicit methods' tangents
/// solve one linear system per step or stage for all directions).
/// Multilevel keeps its `disk` longest-lived snapshots in an HDF5 file
/// (snapshot_store.hpp).

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/detail/gradient_support.hpp"
#include "costate/ode/detail/implicit_sweep.hpp"
#include "costate/ode/continuous_adjoint.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/objective.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "costate/ode/steppers/theta.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {

/// The exact gradient of the discrete solution by a reverse sweep.
struct DiscreteAdjoint {
  Checkpointing checkpointing = StoreAll{};
  /// Explicit steppers: force the compressed coloured Jacobian
  /// (JacobianStrategy::Sparse) for each stage's f_yᵀw, f_pᵀw. Without it
  /// the System picks (dense Dual Jacobian for n + n_p ≤ 16, else the
  /// coloured one when the pattern has ≤ 16 colours, else a short tape).
  /// Only for right-hand sides whose sparsity pattern does not depend on the
  /// state (no value-dependent branches changing which inputs an output
  /// reads): the pattern is re-checked every kPatternCheckInterval
  /// linearizations and a change throws. See system.hpp.
  bool coloured_jacobian = false;
};

/// Tangent sensitivities of the same discrete solution: explicit methods
/// replay the steps once per block of kTangentBlock = 8 directions
/// (parameters, then initial states), each stage's f linearized once and
/// applied to the block (scheme.hpp); cost grows with the number of
/// parameters + states.
struct Forward {};

using SensitivityMethod =
    std::variant<DiscreteAdjoint, Forward, ContinuousAdjoint, CvodesForward, CvodesAdjoint>;

std::string to_string(const SensitivityMethod& m);

struct GradientResult {
  double objective = 0.0;
  std::vector<double> wrt_parameters;
  std::vector<double> wrt_initial_state;
  std::string method;
  CheckpointStats checkpoints;
  Summary summary;  ///< the forward integration (steps, evaluations)
  std::int64_t rhs_evaluations = 0;  ///< by the sweeps (forward and reverse)
  std::int64_t vjp_evaluations = 0;
  double wall_seconds = 0.0;
  /// The step times t_0 … t_l the gradient belongs to (replay them to
  /// evaluate the same discrete objective elsewhere, e.g. in a Taylor test).
  std::vector<double> step_times;
  /// bdf: the order of each step (replay them with step_times); empty for
  /// the other methods.
  std::vector<int> step_orders;
  std::string brief_report() const;
};


/// Objective value and gradient; see the file comment. Throws costate::Error
/// on invalid settings and when the forward integration fails (the message
/// says why: step-size underflow, non-finite state, …).
/// With `replay_times` (t_0 … t_l, from an earlier GradientResult) no
/// forward integration chooses the steps: these are replayed, so that the
/// objective is the same smooth function of p and y0 at every call (bdf also
/// needs `replay_orders`, GradientResult::step_orders).
template <Model M, class O>
GradientResult gradient(const Problem<M>& problem, const O& objective,
                        const SensitivityMethod& method, IntegratorOptions options = {},
                        std::span<const double> replay_times = {},
                        std::span<const int> replay_orders = {}) {
  require(supports(kind_of(method), options, 1), "ode::gradient");  // support.hpp's table
  // Continuous adjoint and the CVODES backend (their own headers).
  if (const auto* ca = std::get_if<ContinuousAdjoint>(&method))
    return detail::continuous_adjoint_gradient(problem, objective, *ca, options);
  if (std::holds_alternative<CvodesForward>(method))
    return detail::cvodes_gradient(problem, objective, nullptr, options);
  if (const auto* ca = std::get_if<CvodesAdjoint>(&method))
    return detail::cvodes_gradient(problem, objective, ca, options);
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = problem.n_states();
  const std::size_t np = problem.p.size();
  constexpr bool kRunning = HasRunning<O>;
  const std::size_t na = n + (kRunning ? 1 : 0);
  COSTATE_CHECK(n > 0, "gradient: the problem has no states");
  const double t0 = problem.t0(), t1 = problem.t1();

  // 1. Observation times (the steps land on them) and where they fall.
  std::vector<double> obs;
  if constexpr (HasObservations<O>) {
    const auto times = objective.observation_times();
    obs.assign(times.begin(), times.end());
  }
  detail::validate_output_times(obs, t0, t1);
  std::vector<double> stops = obs;
  if (stops.empty() || stops.back() < t1) stops.push_back(t1);

  // 2. The step sequence t_0 < t_1 < … < t_l.
  detail::Augmented<M, O> aug{problem.model, objective, n};
  std::vector<double> y0a(na, 0.0);
  std::copy(problem.y0.begin(), problem.y0.end(), y0a.begin());
  const std::span<const double> p(problem.p);
  std::vector<double> times{t0};
  options.stop_at_outputs = true;
  if (kRunning && !options.atol_per_state.empty()) options.atol_per_state.push_back(1e300);
  if (kRunning && options.atol_per_state.empty() && !options.fixed_step()) {
    options.atol_per_state.assign(na, options.atol);
    options.atol_per_state.back() = 1e300;  // z is a quadrature: not error-controlled
  }
  auto user_on_step = options.on_step;
  options.on_step = [&](double t) {
    times.push_back(t);
    if (user_on_step) user_on_step(t);
  };
  HostVector y = HostVector::from(std::span<const double>(y0a));
  auto rhs = [&](double t, const HostVector& yy, const HostVector& dydt) {
    aug.template rhs<double>(t, std::span<const double>(yy.data(), na), p,
                             std::span<double>(dydt.data(), na));
  };
  GradientResult result;
  // sdirk3 and bdf: adaptive implicit, differentiated by their schemes
  // (detail/implicit_sweep.hpp); `implicit` is the θ-methods.
  const bool adaptive_implicit =
      options.method == Method::Sdirk3 || options.method == Method::Bdf;
  const bool implicit = is_implicit(options.method) && !adaptive_implicit;
  std::vector<int> orders;
  // bdf's forward run, for a StoreAll adjoint (trimmed on every exit).
  detail::ForwardRecord& record = detail::ForwardRecord::of_this_thread();
  record.clear();
  struct Trim {
    detail::ForwardRecord& r;
    ~Trim() { r.trim(); }
  } trim_record{record};
  std::vector<double>& bdf_states = record.states;
  std::vector<double>& bdf_jacobians = record.jacobians;
  std::optional<ThetaStepper<detail::Augmented<M, O>>> theta;
  if (implicit)
    theta.emplace(aug, p, na, theta_of(options.method), options.newton_tol,
                  options.newton_max_iterations);
  if (replay_times.empty() && options.fixed_step()) {
    // Fixed steps: the step sequence is known without integrating (the same
    // landing rule as run_fixed); the adjoint's first sweep is the forward run.
    options.validate(na);
    times = detail::fixed_step_times(t0, t1, options.dt, stops);
    COSTATE_CHECK(static_cast<std::int64_t>(times.size()) - 1 <= options.max_steps,
                  "gradient: " << times.size() - 1 << " steps exceed integrator.max_steps = "
                               << options.max_steps);
    result.summary.method = options.method;
    result.summary.steps = static_cast<std::int64_t>(times.size()) - 1;
    result.summary.final_time = t1;
    result.summary.message = "fixed steps";
  } else if (replay_times.empty() && adaptive_implicit) {
    // The first run chooses the steps (options.on_step records them) and
    // bdf's orders, landing on the observation times; they are replayed by
    // the sweeps.
    options.validate(na);
    std::vector<double> ya(y0a);
    auto ignore = [](std::size_t, double, std::span<const double>) {};
    Summary& s = result.summary;
    s.method = options.method;
    s.final_time = t0;
    const std::vector<double> atol = detail::atol_vector(options, na);
    if (options.method == Method::Sdirk3) {
      Sdirk3Stepper<detail::Augmented<M, O>> st(aug, p, na, options.newton_tol,
                                                options.newton_max_iterations, options.rtol, atol);
      detail::run_sdirk3(st, t0, t1, std::span<double>(ya), options,
                         std::span<const double>(stops), ignore, s, [](double) {});
      s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
    } else {
      // Replay-identical steps (BdfStepper::set_replay): whatever the
      // schedule, the accepted states are those the sweeps' replays
      // compute, so a StoreAll adjoint keeps them (and the step Jacobians,
      // up to StepCache's bound) instead of replaying the run.
      BdfStepper<detail::Augmented<M, O>> st(aug, p, na, options.newton_tol,
                                             options.newton_max_iterations);
      st.set_replay(detail::replay_kappa(options));
      const auto* dam = std::get_if<DiscreteAdjoint>(&method);
      const bool keep = dam && std::holds_alternative<StoreAll>(dam->checkpointing);
      bool keep_jacobians = keep;
      detail::run_bdf(st, t0, t1, std::span<double>(ya), options, std::span<const double>(stops),
                      ignore, s, [&](double, int k) {
                        orders.push_back(k);
                        if (!keep) return;
                        const std::span<const double> y = st.solution();
                        bdf_states.insert(bdf_states.end(), y.begin(), y.end());
                        if (!keep_jacobians) return;
                        const Eigen::MatrixXd& jp = st.step_jacobian();
                        bdf_jacobians.insert(bdf_jacobians.end(), jp.data(), jp.data() + jp.size());
                        if (bdf_jacobians.size() * sizeof(double) > detail::StepCache::kStepCacheBytes) {
                          keep_jacobians = false;
                          std::vector<double>().swap(bdf_jacobians);
                        }
                      });
      s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
    }
    COSTATE_CHECK(s.success(), "gradient: the forward integration failed: " << s.message);
  } else if (replay_times.empty() && implicit) {
    options.validate(na);
    detail::ImplicitAdapter<ThetaStepper<detail::Augmented<M, O>>> adapter{*theta, na};
    auto ignore = [](std::size_t, double, const HostVector&) {};
    result.summary.method = options.method;
    detail::run_fixed(rhs, t0, t1, y, options, std::span<const double>(stops), ignore,
                      result.summary, &adapter);
    COSTATE_CHECK(result.summary.success(),
                  "gradient: the forward integration failed: " << result.summary.message);
  } else if (replay_times.empty()) {
    result.summary = integrate_vector(rhs, t0, t1, y, options, std::span<const double>(stops),
                                      [](std::size_t, double, const HostVector&) {});
    COSTATE_CHECK(result.summary.success(),
                  "gradient: the forward integration failed: " << result.summary.message);
  } else {
    COSTATE_CHECK(replay_times.size() >= 2 && replay_times.front() == t0 && replay_times.back() == t1,
                  "gradient: replay_times must run from t0 to t1");
    times.assign(replay_times.begin(), replay_times.end());
    if (options.method == Method::Bdf) {
      COSTATE_CHECK(replay_orders.size() + 1 == replay_times.size(),
                    "gradient: replaying bdf steps needs replay_orders (one order per step, "
                    "GradientResult::step_orders): got "
                        << replay_orders.size() << " for " << replay_times.size() - 1 << " steps");
      orders.assign(replay_orders.begin(), replay_orders.end());
    }
    result.summary.method = options.method;
    result.summary.steps = static_cast<std::int64_t>(times.size()) - 1;
    result.summary.final_time = t1;
    result.summary.message = "replayed steps";
  }
  const std::int64_t l = static_cast<std::int64_t>(times.size()) - 1;
  // Observation k sits at step index obs_step[k].
  std::vector<std::int64_t> obs_at(times.size(), -1);
  for (std::size_t k = 0, i = 0; k < obs.size(); ++k) {
    while (i < times.size() && times[i] < obs[k]) ++i;
    COSTATE_CHECK(i < times.size() && times[i] == obs[k],
                  "gradient: internal error, no step lands on observation time " << obs[k]);
    obs_at[i] = static_cast<std::int64_t>(k);
  }

  // 3. sdirk3 / bdf: forward tangents or the discrete adjoint of the scheme.
  if (adaptive_implicit) {
    const Checkpointing* cp = nullptr;
    if (const auto* dam = std::get_if<DiscreteAdjoint>(&method)) cp = &dam->checkpointing;
    detail::SchemeOutcome o;
    std::int64_t rhs_count = 0;
    if (options.method == Method::Sdirk3) {
      detail::SdirkScheme<detail::Augmented<M, O>> sc(aug, p, na, options, times);
      o = detail::scheme_gradient(sc, objective, cp, times, obs_at, y0a, p, n);
      rhs_count = sc.rhs_evaluations();
    } else {
      COSTATE_CHECK(orders.size() + 1 == times.size(), "gradient: internal error, bdf orders");
      detail::BdfScheme<detail::Augmented<M, O>> sc(aug, p, na, options, times, orders);
      sc.use_forward_run(bdf_states, bdf_jacobians);
      o = detail::scheme_gradient(sc, objective, cp, times, obs_at, y0a, p, n);
      rhs_count = sc.rhs_evaluations();
    }
    result.objective = o.objective;
    result.wrt_parameters = std::move(o.wrt_parameters);
    result.wrt_initial_state = std::move(o.wrt_initial_state);
    result.checkpoints = o.checkpoints;
    result.step_times = times;
    result.step_orders = orders;
    result.method = to_string(method);
    result.rhs_evaluations = rhs_count;
    result.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // 3. Explicit Runge–Kutta: the compiled scheme on an ode::System
  // (scheme.hpp) — the adjoint sweep under the checkpoint schedule, or the
  // forward tangents.
  if (!implicit) {
    const auto* dam = std::get_if<DiscreteAdjoint>(&method);
    SystemOptions system_options;
    if (dam && dam->coloured_jacobian) system_options.jacobian = JacobianStrategy::Sparse;
    const System system = make_system(problem.model, objective, n, np, system_options);
    const std::unique_ptr<Scheme> scheme = make_explicit_rk_scheme(system, options.method, p, times);
    SweepOutcome o =
        dam ? adjoint_sweep(system, *scheme, dam->checkpointing, obs_at, y0a, p, user_on_step, times)
            : tangent_sweep(system, *scheme, obs_at, y0a, p, user_on_step, times);
    result.objective = o.objective;
    result.wrt_parameters = std::move(o.wrt_parameters);
    result.wrt_initial_state = std::move(o.wrt_initial_state);
    result.checkpoints = o.checkpoints;
    result.step_times = times;
    result.method = to_string(method);
    result.rhs_evaluations = o.rhs_evaluations;
    result.vjp_evaluations = o.linearizations;
    result.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // 3a. Forward sensitivities of the θ-methods.
  if (std::holds_alternative<Forward>(method)) {
    if (implicit) {
      // Tangents of the θ-method, all directions at once (dense): with
      // S = ∂y/∂(p, y0) and P = ∂p/∂(p, y0) = [I 0],
      //   (I − hθ J_{n+1}) S_{n+1} = S_n + h(1−θ)(J_n S_n + f_p(n) P) + hθ f_p(n+1) P.
      const std::size_t m = np + n;
      Eigen::MatrixXd S = Eigen::MatrixXd::Zero(na, m), P = Eigen::MatrixXd::Zero(np, m);
      for (std::size_t j = 0; j < np; ++j) P(j, j) = 1.0;
      for (std::size_t i = 0; i < n; ++i) S(i, np + i) = 1.0;
      std::vector<double> yc(y0a), yn(na);
      Eigen::RowVectorXd dJ = Eigen::RowVectorXd::Zero(m);
      double Jv = 0.0;
      ad::Tape tape_fw;
      std::vector<double> gy(na), gp(np);
      // Adds a scalar term's value and derivative along all directions.
      auto add_term = [&](auto&& f, const std::vector<double>& state) {
        std::fill(gy.begin(), gy.end(), 0.0);
        std::fill(gp.begin(), gp.end(), 0.0);
        Jv += detail::value_and_gradient(f, std::span<const double>(state.data(), n), p,
                                         std::span<double>(gy.data(), n), gp, tape_fw);
        for (std::size_t i = 0; i < n; ++i) dJ += gy[i] * S.row(static_cast<Eigen::Index>(i));
        for (std::size_t j = 0; j < np; ++j) dJ += gp[j] * P.row(static_cast<Eigen::Index>(j));
      };
      auto observe = [&](std::size_t i, const std::vector<double>& state) {
        if constexpr (HasObservations<O>) {
          const std::int64_t k = obs_at[i];
          if (k >= 0)
            add_term(
                [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
                  return ad::Real(objective.template observation<ad::Real>(static_cast<std::size_t>(k), yy, pp));
                },
                state);
        } else {
          (void)i;
          (void)state;
        }
      };
      const double th = theta->theta();
      observe(0, yc);
      Eigen::MatrixXd J0 = theta->jacobian_state_parameters(times[0], yc);
      for (std::int64_t i = 0; i < l; ++i) {
        const std::size_t u = static_cast<std::size_t>(i);
        const double h = times[u + 1] - times[u];
        std::string why;
        COSTATE_CHECK(theta->step(times[u], h, yc, yn, &why),
                      "gradient: implicit step at t = " << times[u] << " failed: " << why);
        const Eigen::MatrixXd J1 = theta->jacobian_state_parameters(times[u + 1], yn);
        Eigen::MatrixXd rhs_s = S + h * th * (J1.rightCols(np) * P);
        if (th < 1.0) rhs_s += h * (1.0 - th) * (J0.leftCols(na) * S + J0.rightCols(np) * P);
        const Eigen::MatrixXd A = Eigen::MatrixXd::Identity(na, na) - h * th * J1.leftCols(na);
        S = A.partialPivLu().solve(rhs_s);
        J0 = J1;
        std::swap(yc, yn);
        observe(u + 1, yc);
      }
      if constexpr (HasTerminal<O>)
        add_term(
            [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
              return ad::Real(objective.template terminal<ad::Real>(yy, pp));
            },
            yc);
      if constexpr (kRunning) {
        Jv += yc[n];
        dJ += S.row(static_cast<Eigen::Index>(n));
      }
      result.objective = Jv;
      result.step_times = times;
      result.wrt_parameters.assign(dJ.data(), dJ.data() + np);
      result.wrt_initial_state.assign(dJ.data() + np, dJ.data() + m);
      result.method = to_string(method);
      result.checkpoints.steps = l;
      result.checkpoints.forward_steps = l;
      result.rhs_evaluations = theta->rhs_evaluations;
      result.wall_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return result;
    }
    throw Error("gradient: internal error, explicit forward sensitivities run on ode::System");
  }

  // 3b. The reverse sweep.
  const auto& dam = std::get<DiscreteAdjoint>(method);
  const ButcherTableau tab =
      implicit ? ButcherTableau{1, {0.0}, {1.0}, {0.0}} : explicit_tableau(options.method);
  HostVector cur = HostVector::from(std::span<const double>(y0a));
  ExplicitRKStep<HostVector> rk(tab, cur);
  HostVector next = cur.clone(), lambda = cur.clone(), ybar_stage = cur.clone(),
             after = cur.clone();
  Eigen::MatrixXd jac_next;          // [J | f_p] at x_{jac_next_step}
  std::int64_t jac_next_step = -1;
  // θ-method reverse steps: storage allocated once (no allocation per step).
  detail::TransposedSolve theta_solve(implicit ? na : 0);
  Eigen::VectorXd theta_pbar(static_cast<Eigen::Index>(implicit ? np : 0));
  std::vector<double> mu(np, 0.0), ybar(na), ybar_obj(n);
  ad::Tape objective_tape;
  std::int64_t rhs_count = 0;
  auto rhs_counted = [&](double t, const HostVector& yy, const HostVector& dydt) {
    ++rhs_count;
    rhs(t, yy, dydt);
  };
  double J = 0.0;

  // Adds ℓ_k at state y (step index i) to J, λ and μ.
  auto add_observation = [&](std::int64_t i, const HostVector& state) {
    if constexpr (HasObservations<O>) {
      const std::size_t k = static_cast<std::size_t>(obs_at[static_cast<std::size_t>(i)]);
      std::fill(ybar_obj.begin(), ybar_obj.end(), 0.0);
      J += detail::value_and_gradient(
          [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
            return ad::Real(objective.template observation<ad::Real>(k, yy, pp));
          },
          std::span<const double>(state.data(), n), p, ybar_obj, mu, objective_tape);
      for (std::size_t q = 0; q < n; ++q) lambda[q] += ybar_obj[q];
    } else {
      (void)i;
      (void)state;
    }
  };

  struct Ops {
    explicit Ops(HostVector* c) : current(c) {}
    HostVector* current;
    std::int64_t i = 0;
    SnapshotStore* store = nullptr;
    std::function<void()> advance_fn, reverse_fn;
    void advance() { advance_fn(); }
    void save(std::size_t s) {
      store->save(s, std::span<const double>(current->data(), current->size()));
      slot_step.resize(std::max(slot_step.size(), s + 1));
      slot_step[s] = i;
    }
    void restore(std::size_t s) {
      store->load(s, std::span<double>(current->data(), current->size()));
      i = slot_step[s];
    }
    void reverse_step() { reverse_fn(); }
    std::int64_t index() const { return i; }
    std::vector<std::int64_t> slot_step;
  } ops(&cur);
  // Snapshots: RAM, plus the Multilevel schedule's disk level (HDF5).
  std::size_t disk_slots = 0;
  std::string disk_path;
  if (const auto* ml = std::get_if<Multilevel>(&dam.checkpointing)) {
    disk_slots = static_cast<std::size_t>(ml->disk);
    disk_path = ml->path;
  }
  SnapshotStore store(na, disk_slots, disk_path);
  ops.store = &store;

  // One step cur -> next (explicit RK, or the θ-method's Newton solve).
  auto do_step = [&](std::size_t i) {
    const double h = times[i + 1] - times[i];
    if (implicit) {
      std::string why;
      const bool ok = theta->step(times[i], h, std::span<const double>(cur.data(), na),
                                  std::span<double>(next.data(), na), &why);
      COSTATE_CHECK(ok, "gradient: implicit step at t = " << times[i] << " failed: " << why);
    } else {
      rk.step(rhs_counted, times[i], h, cur, next);
    }
  };
  ops.advance_fn = [&] {
    do_step(static_cast<std::size_t>(ops.i));
    deep_copy(cur, next);
    ++ops.i;
  };
  ops.reverse_fn = [&] {
    const std::size_t i = static_cast<std::size_t>(ops.i);
    const double h = times[i + 1] - times[i];
    // x_{i+1} was the current state of the previous reverse step (kept in
    // `after`): only the first reverse step (i = l − 1) computes its step.
    // Explicit Runge–Kutta recomputes its stages anyway.
    if (!implicit || ops.i == l - 1) {
      do_step(i);
    } else {
      deep_copy(next, after);
    }
    if (implicit) deep_copy(after, cur);
    if (ops.i == l - 1) {
      // Seed at the final state: λ_l = ∂g/∂y, λ_z = 1, μ = ∂g/∂p.
      fill(lambda, 0.0);
      if constexpr (HasTerminal<O>) {
        std::fill(ybar_obj.begin(), ybar_obj.end(), 0.0);
        J += detail::value_and_gradient(
            [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
              return ad::Real(objective.template terminal<ad::Real>(yy, pp));
            },
            std::span<const double>(next.data(), n), p, ybar_obj, mu, objective_tape);
        for (std::size_t q = 0; q < n; ++q) lambda[q] = ybar_obj[q];
      }
      if constexpr (kRunning) {
        J += next[n];
        lambda[n] = 1.0;
      }
      if (obs_at[static_cast<std::size_t>(l)] >= 0) add_observation(l, next);
    }
    if (implicit) {
      // (I − hθ J_{n+1})ᵀ μ = λ;  λ_n = μ + h(1−θ) J_nᵀ μ;
      // p̄ += hθ f_p(n+1)ᵀ μ + h(1−θ) f_p(n)ᵀ μ,
      // with [J | f_p] from forward mode; the one at x_n is kept for the
      // next reverse step, where it is the one at x_{n+1}.
      const double th = theta->theta();
      const auto nna = static_cast<Eigen::Index>(na), npp = static_cast<Eigen::Index>(np);
      if (jac_next_step != ops.i + 1)
        jac_next = theta->jacobian_state_parameters(times[i + 1],
                                                    std::span<const double>(next.data(), na));
      theta_solve.factor(h * th, jac_next);
      Eigen::Map<Eigen::VectorXd> lam(lambda.data(), nna);
      const Eigen::VectorXd& m = theta_solve.solve(lam);
      theta_pbar.setZero();
      detail::add_transposed_product(jac_next, nna, npp, m.data(), h * th, theta_pbar.data());
      jac_next = theta->jacobian_state_parameters(times[i], std::span<const double>(cur.data(), na));
      jac_next_step = ops.i;
      lam = m;
      if (th < 1.0) {
        detail::add_transposed_product(jac_next, 0, nna, m.data(), h * (1.0 - th), lam.data());
        detail::add_transposed_product(jac_next, nna, npp, m.data(), h * (1.0 - th),
                                       theta_pbar.data());
      }
      for (std::size_t j = 0; j < np; ++j) mu[j] += theta_pbar[static_cast<Eigen::Index>(j)];
    } else {
      throw Error("gradient: internal error, explicit adjoints run on ode::System");
    }
    if (obs_at[i] >= 0) add_observation(ops.i, cur);
  };

  result.checkpoints = reverse_sweep(dam.checkpointing, ops, l);
  result.checkpoints.disk_snapshots = store.disk_writes();
  result.objective = J;
  result.step_times = times;
  result.wrt_parameters = mu;
  result.wrt_initial_state.assign(lambda.data(), lambda.data() + n);
  result.method = to_string(method);
  result.rhs_evaluations = rhs_count + (implicit ? theta->rhs_evaluations : 0);
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace costate::ode

#include "costate/ode/detail/continuous_adjoint.hpp"
#include "costate/ode/detail/cvodes_gradient.hpp"
