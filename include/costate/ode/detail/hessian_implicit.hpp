#pragma once
/// \file
/// Internals of ode::hessian_vector for the adaptive implicit steppers
/// (sdirk3, bdf): their discrete-adjoint schemes (detail/implicit_sweep.hpp)
/// on ad::Dual<double, 1>, run by the sweep of detail/hessian_sweep.hpp.
///
/// The step sequence (times and bdf's orders) is replayed as constants, as
/// ode::gradient does. A step's value part is the replayed Newton solve of
/// the gradient's scheme (the same bits); Newton is never differentiated:
/// its ε-part comes from the implicit equation it solved, by the implicit
/// function theorem — one linear solve with the iteration matrix
/// M = I − g J (J = ∂f/∂y at the solution, g = hγ or hβ) per implicit
/// solve:
///     z = r + g f(t, z, p)   ⇒   M ż = ṙ + g ḟ,
/// ḟ = f_p v the ε-part of f at (z, p + εv) (rhs of f on Duals with
/// z + 0ε). The adjoint of that solve, Mᵀ w = w̄ with w̄ = w̄₀ + ε w̄̇, is
/// differentiated along ε as for the θ-methods (DualThetaScheme):
///     w₀ = M⁻ᵀ w̄₀,   ẇ = M⁻ᵀ (w̄̇ + g J̇ᵀ w₀),
/// J̇ᵀ w₀ the ε-part of the vector–Jacobian product at (z + εż, p + εv)
/// seeded with w₀ + 0ε; the products Jᵀ w, f_pᵀ w with the Dual w then
/// come from one more vector–Jacobian product (DualRhsVjp).
///
/// sdirk3 (stage s: Y_s = y + h Σ_{j<s} a_sj k_j + hγ k_s, k_s = f(Y_s),
/// y_{n+1} = Y_3):
///     step:    (I − hγJ_s) k̇_s = ḟ(Y_s; ẏ + h Σ_{j<s} a_sj k̇_j, v),
///              Ẏ_s = ẏ + h Σ_{j<s} a_sj k̇_j + hγ k̇_s,   ẏ_{n+1} = Ẏ_3;
///     adjoint: k̄_s = h b_s λ;  for s = 3, 2, 1: w_s = M_s⁻ᵀ k̄_s (Dual, as
///              above), Ȳ_s = J_sᵀ w_s, p̄ += f_p(Y_s)ᵀ w_s, λ += Ȳ_s,
///              k̄_j += h a_sj Ȳ_s (j < s) — all in Duals.
/// bdf (state = history window (y_i, …, y_{i−4}); step i of order k:
/// y_{i+1} = Σ_j α_j y_{i+1−j} + hβ f(t_{i+1}, y_{i+1})):
///     step:    (I − hβJ) ẏ_{i+1} = Σ_j α_j ẏ_{i+1−j} + hβ f_p v;
///     adjoint: m = M⁻ᵀ λ_0 (Dual, as above), shift the window's λ,
///              λ_{j−1} += α_j m, p̄ += hβ f_pᵀ m.
/// The value parts agree with ode::gradient's sdirk3/bdf adjoint to
/// rounding (it forms Jᵀ w from dense Jacobians), not bit for bit. Every
/// checkpoint schedule gives the same bits: a step is a function of the
/// replayed (t_i, x_i) alone.

#include <Eigen/Core>
#include <Eigen/LU>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "costate/ode/detail/hessian_sweep.hpp"
#include "costate/ode/detail/implicit_sweep.hpp"
#include "costate/ode/problem.hpp"

namespace costate::ode::detail {

/// True for the steppers differentiated by implicit_sweep.hpp's schemes.
inline bool is_adaptive_implicit(Method m) { return m == Method::Sdirk3 || m == Method::Bdf; }

/// The options ode::gradient replays sdirk3/bdf steps with: landing on the
/// stop times, and the running cost's quadrature state z (when O has one)
/// not error-controlled — Newton's weighted stopping test of the replay
/// uses these atol, so they must be the gradient's for the same bits.
template <class O>
IntegratorOptions implicit_replay_options(IntegratorOptions options, std::size_t na) {
  options.stop_at_outputs = true;
  if (HasRunning<O> && !options.atol_per_state.empty()) options.atol_per_state.push_back(1e300);
  if (HasRunning<O> && options.atol_per_state.empty() && !options.fixed_step()) {
    options.atol_per_state.assign(na, options.atol);
    options.atol_per_state.back() = 1e300;
  }
  return options;
}

/// The steps (and bdf's orders) of the adaptive sdirk3/bdf run ode::gradient
/// makes to choose them, landing on `stops`. `options` from
/// implicit_replay_options.
template <Model M, class O>
std::vector<double> implicit_step_times(const Problem<M>& problem, const O& objective,
                                        IntegratorOptions options,
                                        const std::vector<double>& stops, Summary& s,
                                        std::vector<int>& orders) {
  const std::size_t n = problem.n_states();
  const std::size_t na = n + (HasRunning<O> ? 1 : 0);
  const double t0 = problem.t0(), t1 = problem.t1();
  options.validate(na);
  std::vector<double> times{t0};
  auto user_on_step = options.on_step;
  options.on_step = [&](double t) {
    times.push_back(t);
    if (user_on_step) user_on_step(t);
  };
  const Augmented<M, O> aug{problem.model, objective, n};
  std::vector<double> ya(na, 0.0);
  std::copy(problem.y0.begin(), problem.y0.end(), ya.begin());
  const std::span<const double> p(problem.p);
  auto ignore = [](std::size_t, double, std::span<const double>) {};
  s.method = options.method;
  s.final_time = t0;
  orders.clear();
  if (options.method == Method::Sdirk3) {
    Sdirk3Stepper<Augmented<M, O>> st(aug, p, na, options.newton_tol,
                                      options.newton_max_iterations, options.rtol,
                                      atol_vector(options, na));
    run_sdirk3(st, t0, t1, std::span<double>(ya), options, std::span<const double>(stops),
               ignore, s, [](double) {});
    s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
  } else {
    BdfStepper<Augmented<M, O>> st(aug, p, na, options.newton_tol, options.newton_max_iterations);
    st.set_replay(replay_kappa(options));  // as ode::gradient: replay-identical steps
    run_bdf(st, t0, t1, std::span<double>(ya), options, std::span<const double>(stops), ignore,
            s, [&](double, int k) { orders.push_back(k); });
    s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
  }
  COSTATE_CHECK(s.success(), "hessian_vector: the forward integration failed: " << s.message);
  return times;
}

/// An HvpVector of n zeros.
inline HvpVector hvp_zeros(std::size_t n) {
  const std::vector<HvpDual> z(n, HvpDual(0.0));
  return HvpVector::from(std::span<const HvpDual>(z));
}

/// The Dual adjoint of one implicit solve (see the file comment): given
/// the factored Mᵀ (solve), the solution point Z (a Dual vector whose first
/// na entries are z + εż), the seed w̄ (Dual, na entries) and g, returns in
/// w the Dual w = M(ε)⁻ᵀ w̄, then adds J(ε)ᵀ (s w) to ybar (overwritten)
/// and f_p(ε)ᵀ (s w) to pbar.
template <class A>
void dual_transposed_solve(DualRhsVjp<A>& vjp, TransposedSolve& solve, double t,
                           const HvpVector& Z, std::span<const HvpDual> wbar, double g, double s,
                           HvpVector& w, HvpVector& ybar, std::vector<HvpDual>& pbar,
                           std::vector<HvpDual>& discard, Eigen::VectorXd& r,
                           Eigen::VectorXd& w0) {
  const std::size_t na = wbar.size();
  for (std::size_t q = 0; q < na; ++q) r[static_cast<Eigen::Index>(q)] = wbar[q].value();
  w0 = solve.solve(r);
  // J̇ᵀ w₀: the ε-part of the product at Z seeded with w₀ + 0ε.
  for (std::size_t q = 0; q < na; ++q) w[q] = HvpDual(w0[static_cast<Eigen::Index>(q)]);
  std::fill(discard.begin(), discard.end(), HvpDual(0.0));
  vjp(t, Z, w, ybar, discard);
  for (std::size_t q = 0; q < na; ++q)
    r[static_cast<Eigen::Index>(q)] = wbar[q].tangent(0) + g * ybar[q].tangent(0);
  const Eigen::VectorXd& wdot = solve.solve(r);
  for (std::size_t q = 0; q < na; ++q) {
    const auto k = static_cast<Eigen::Index>(q);
    w[q] = HvpDual(s * w0[k], {s * wdot[k]});
  }
  vjp(t, Z, w, ybar, pbar);
  if (s != 1.0)
    for (std::size_t q = 0; q < na; ++q) {
      const auto k = static_cast<Eigen::Index>(q);
      w[q] = HvpDual(w0[k], {wdot[k]});
    }
}

/// sdirk3 (SdirkScheme) on Duals; see the file comment. The value step is
/// Sdirk3Stepper's replayed attempt with SdirkScheme's settings.
template <class A>
class DualSdirkScheme {
 public:
  DualSdirkScheme(const A& aug, std::span<const HvpDual> pd, std::span<const double> p,
                  std::size_t na, const IntegratorOptions& opt)
      : aug_(aug), pd_(pd), na_(na),
        st_(aug, p, na, opt.newton_tol, opt.newton_max_iterations, opt.rtol,
            atol_vector(opt, na), replay_kappa(opt)),
        jac_(aug, p, na), vjp_(aug, pd, na), solve_(na), xv_(na), zv_(na), yd_(na), fd_(na),
        discard_(p.size()), kbar_{std::vector<HvpDual>(na), std::vector<HvpDual>(na),
                                  std::vector<HvpDual>(na)},
        Ys_{hvp_zeros(na), hvp_zeros(na), hvp_zeros(na)}, tmp_(hvp_zeros(na)),
        w_(hvp_zeros(na)), ybar_(hvp_zeros(na)), r_(static_cast<Eigen::Index>(na)),
        w0_(static_cast<Eigen::Index>(na)) {}

  void step(double t, double h, const HvpVector& x, const HvpVector& xn) {
    using namespace sdirk3_tableau;
    const auto nn = static_cast<Eigen::Index>(na_);
    for (std::size_t q = 0; q < na_; ++q) xv_[q] = x[q].value();
    COSTATE_CHECK(st_.attempt(t, h, xv_, zv_, true),
                  "hessian_vector: the replayed sdirk3 step at t = " << t
                                                                     << " failed to converge");
    Eigen::MatrixXd kdot(nn, 3);
    Eigen::VectorXd arg(nn), b(nn);
    for (int s = 0; s < 3; ++s) {
      const double ts = t + c[s] * h;
      const std::span<const double> Y = st_.stage(s);
      for (std::size_t q = 0; q < na_; ++q) {
        const auto k = static_cast<Eigen::Index>(q);
        double v = x[q].tangent(0);
        for (int j = 0; j < s; ++j) v += h * a[s][j] * kdot(k, j);
        arg[k] = v;
        yd_[q] = HvpDual(Y[q], {v});
      }
      f(ts, yd_);  // ε-part: J arg + f_p v
      for (std::size_t q = 0; q < na_; ++q) b[static_cast<Eigen::Index>(q)] = fd_[q].tangent(0);
      Js_[s] = jac_.state(ts, Y).leftCols(nn);
      const Eigen::MatrixXd Ms = Eigen::MatrixXd::Identity(nn, nn) - h * gamma * Js_[s];
      kdot.col(s) = Ms.partialPivLu().solve(b);
      for (std::size_t q = 0; q < na_; ++q) {
        const auto k = static_cast<Eigen::Index>(q);
        Ys_[static_cast<std::size_t>(s)][q] = HvpDual(Y[q], {arg[k] + h * gamma * kdot(k, s)});
      }
    }
    // y_{n+1} = Y_3 (stiffly accurate): the attempt's result and Ẏ_3.
    for (std::size_t q = 0; q < na_; ++q) xn[q] = HvpDual(zv_[q], {Ys_[2][q].tangent(0)});
    rhs_evaluations = dual_rhs_ + st_.model_jacobian().rhs_evaluations + jac_.rhs_evaluations;
  }

  void adjoint(double t, double h, const HvpVector& x, const HvpVector&, HvpVector& lambda,
               std::vector<HvpDual>& mu) {
    using namespace sdirk3_tableau;
    step(t, h, x, tmp_);  // the stages Y_s + εẎ_s and J_s
    for (int s = 0; s < 3; ++s)
      for (std::size_t q = 0; q < na_; ++q)
        kbar_[static_cast<std::size_t>(s)][q] = HvpDual(h * b[s]) * lambda[q];
    for (int s = 2; s >= 0; --s) {
      const auto su = static_cast<std::size_t>(s);
      solve_.factor(h * gamma, Js_[s]);
      dual_transposed_solve(vjp_, solve_, t + c[s] * h, Ys_[su],
                            std::span<const HvpDual>(kbar_[su]), h * gamma, 1.0, w_, ybar_, mu,
                            discard_, r_, w0_);
      for (std::size_t q = 0; q < na_; ++q) {
        lambda[q] += ybar_[q];
        for (int j = 0; j < s; ++j)
          kbar_[static_cast<std::size_t>(j)][q] += HvpDual(h * a[s][j]) * ybar_[q];
      }
    }
  }
  std::int64_t vjp_evaluations() const { return vjp_.count; }
  std::int64_t rhs_evaluations = 0;

 private:
  void f(double t, std::span<const HvpDual> y) {
    ++dual_rhs_;
    aug_.template rhs<HvpDual>(t, y, pd_, std::span<HvpDual>(fd_));
  }
  const A& aug_;
  std::span<const HvpDual> pd_;
  std::size_t na_;
  Sdirk3Stepper<A> st_;
  ModelJacobian<A> jac_;
  DualRhsVjp<A> vjp_;
  TransposedSolve solve_;
  std::vector<double> xv_, zv_;
  std::vector<HvpDual> yd_, fd_, discard_;
  std::array<std::vector<HvpDual>, 3> kbar_;
  std::array<HvpVector, 3> Ys_;
  std::array<Eigen::MatrixXd, 3> Js_;
  HvpVector tmp_, w_, ybar_;
  Eigen::VectorXd r_, w0_;
  std::int64_t dual_rhs_ = 0;
};

/// bdf (BdfScheme) on Duals; the state is the window (y_i, …, y_{i−4}) of
/// Duals. See the file comment. The value step is BdfScheme's.
template <class A>
class DualBdfScheme {
 public:
  static constexpr int kWindow = BdfScheme<A>::kWindow;

  DualBdfScheme(const A& aug, std::span<const HvpDual> pd, std::span<const double> p,
                std::size_t na, const IntegratorOptions& opt, const std::vector<double>& times,
                const std::vector<int>& orders)
      : aug_(aug), pd_(pd), na_(na), times_(times), value_(aug, p, na, opt, times, orders),
        jac_(aug, p, na), vjp_(aug, pd, na), solve_(na), xv_(kWindow * na), zv_(kWindow * na),
        yd_(na), fd_(na), m_(na), discard_(p.size()), w_(hvp_zeros(na)), ybar_(hvp_zeros(na)),
        r_(static_cast<Eigen::Index>(na)), w0_(static_cast<Eigen::Index>(na)) {}

  /// The window x_0 from the augmented initial state (older slots: zero
  /// constants, unused by the first steps' orders).
  static std::vector<HvpDual> initial(std::span<const HvpDual> y0) {
    std::vector<HvpDual> x(kWindow * y0.size(), HvpDual(0.0));
    std::copy(y0.begin(), y0.end(), x.begin());
    return x;
  }

  void step(double t, double, const HvpVector& x, const HvpVector& xn) {
    const std::size_t i = index(t);
    const auto nn = static_cast<Eigen::Index>(na_);
    for (std::size_t q = 0; q < xv_.size(); ++q) xv_[q] = x[q].value();
    value_.step(i, xv_, zv_);
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = value_.coefficients(i, alpha.data(), &g);
    const double tn = times_[i + 1];
    // ṙ + hβ f_p v.
    Eigen::VectorXd b = Eigen::VectorXd::Zero(nn);
    for (int j = 1; j <= k; ++j)
      for (std::size_t q = 0; q < na_; ++q)
        b[static_cast<Eigen::Index>(q)] +=
            alpha[j - 1] * x[static_cast<std::size_t>(j - 1) * na_ + q].tangent(0);
    for (std::size_t q = 0; q < na_; ++q) yd_[q] = HvpDual(zv_[q]);
    f(tn, yd_);
    for (std::size_t q = 0; q < na_; ++q) b[static_cast<Eigen::Index>(q)] += g * fd_[q].tangent(0);
    const Eigen::MatrixXd Mi =
        Eigen::MatrixXd::Identity(nn, nn) -
        g * jac_.state(tn, std::span<const double>(zv_).first(na_)).leftCols(nn);
    const Eigen::VectorXd zdot = Mi.partialPivLu().solve(b);
    for (std::size_t s = kWindow - 1; s >= 1; --s)
      for (std::size_t q = 0; q < na_; ++q) xn[s * na_ + q] = x[(s - 1) * na_ + q];
    for (std::size_t q = 0; q < na_; ++q)
      xn[q] = HvpDual(zv_[q], {zdot[static_cast<Eigen::Index>(q)]});
    rhs_evaluations = dual_rhs_ + value_.rhs_evaluations() + jac_.rhs_evaluations;
  }

  void adjoint(double t, double, const HvpVector&, const HvpVector& xn, HvpVector& lambda,
               std::vector<HvpDual>& mu) {
    const std::size_t i = index(t);
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = value_.coefficients(i, alpha.data(), &g);
    const double tn = times_[i + 1];
    for (std::size_t q = 0; q < na_; ++q) zv_[q] = xn[q].value();
    solve_.factor(g, jac_.state(tn, std::span<const double>(zv_).first(na_)));
    for (std::size_t q = 0; q < na_; ++q) m_[q] = lambda[q];
    // m = M⁻ᵀ λ_0 (w_), p̄ += f_pᵀ (hβ m).
    dual_transposed_solve(vjp_, solve_, tn, xn, std::span<const HvpDual>(m_), g, g, w_, ybar_,
                          mu, discard_, r_, w0_);
    const std::size_t W = kWindow * na_;
    for (std::size_t q = 0; q + na_ < W; ++q) lambda[q] = lambda[q + na_];
    for (std::size_t q = W - na_; q < W; ++q) lambda[q] = HvpDual(0.0);
    for (int j = 1; j <= k; ++j)
      for (std::size_t q = 0; q < na_; ++q)
        lambda[static_cast<std::size_t>(j - 1) * na_ + q] += HvpDual(alpha[j - 1]) * w_[q];
  }
  std::int64_t vjp_evaluations() const { return vjp_.count; }
  std::int64_t rhs_evaluations = 0;

 private:
  /// The step index of t (t is one of the replayed times).
  std::size_t index(double t) const {
    const auto it = std::lower_bound(times_.begin(), times_.end(), t);
    COSTATE_CHECK(it != times_.end() && *it == t,
                  "hessian_vector: internal error, t = " << t << " is not a replayed step time");
    return static_cast<std::size_t>(it - times_.begin());
  }
  void f(double t, std::span<const HvpDual> y) {
    ++dual_rhs_;
    aug_.template rhs<HvpDual>(t, y, pd_, std::span<HvpDual>(fd_));
  }
  const A& aug_;
  std::span<const HvpDual> pd_;
  std::size_t na_;
  const std::vector<double>& times_;
  BdfScheme<A> value_;
  ModelJacobian<A> jac_;
  DualRhsVjp<A> vjp_;
  TransposedSolve solve_;
  std::vector<double> xv_, zv_;
  std::vector<HvpDual> yd_, fd_, m_, discard_;
  HvpVector w_, ybar_;
  Eigen::VectorXd r_, w0_;
  std::int64_t dual_rhs_ = 0;
};

/// dual_sweep over the sdirk3/bdf scheme of options.method (options from
/// implicit_replay_options): pd = p + ε v_p, y0d the augmented y0 + ε v_y0,
/// p the parameter values, `orders` bdf's (one per step).
template <class A, class O>
HvpOutcome implicit_dual_sweep(const A& aug, const O& objective, std::span<const HvpDual> pd,
                               std::span<const HvpDual> y0d, std::span<const double> p,
                               const IntegratorOptions& options, const std::vector<double>& times,
                               const std::vector<int>& orders,
                               const std::vector<std::int64_t>& obs_at,
                               const Checkpointing& checkpointing, std::size_t n) {
  const std::size_t na = y0d.size();
  if (options.method == Method::Sdirk3) {
    DualSdirkScheme<A> sc(aug, pd, p, na, options);
    return dual_sweep(sc, objective, pd, y0d, times, obs_at, checkpointing, n);
  }
  COSTATE_CHECK(orders.size() + 1 == times.size(),
                "hessian_vector: bdf needs one order per step (replay_orders, "
                "GradientResult::step_orders): got "
                    << orders.size() << " for " << times.size() - 1 << " steps");
  DualBdfScheme<A> sc(aug, pd, p, na, options, times, orders);
  const std::vector<HvpDual> x0 = DualBdfScheme<A>::initial(y0d);
  return dual_sweep(sc, objective, pd, std::span<const HvpDual>(x0), times, obs_at, checkpointing,
                    n);
}

}  // namespace costate::ode::detail
