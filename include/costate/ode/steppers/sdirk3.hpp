#pragma once
/// \file
/// sdirk3: a 3-stage, order-3, L-stable, stiffly accurate singly diagonally
/// implicit Runge–Kutta method with an embedded order-2 error estimate and
/// adaptive steps.
///
/// Tableau (R. Alexander, "Diagonally implicit Runge–Kutta methods for stiff
/// ODEs", SIAM J. Numer. Anal. 14 (1977) 1006–1021; also Hairer & Wanner,
/// Solving ODEs II, §IV.6), γ the root of γ³ − 3γ² + 3γ/2 − 1/6 = 0 in
/// (1/6, 1/2), γ = 0.43586652150845899942:
///
///     γ        | γ
///     (1+γ)/2  | (1−γ)/2                γ
///     1        | −(6γ²−16γ+1)/4   (6γ²−20γ+5)/4   γ
///     ---------+------------------------------------------
///     b        | −(6γ²−16γ+1)/4   (6γ²−20γ+5)/4   γ      (order 3, b = last row)
///     b̂        | 1 − b̂₂           (1−2γ)/(1−γ)    0      (order 2)
///
/// The embedded weights b̂ use stages 1 and 2 only; they are the unique
/// solution of Σb̂ = 1, Σb̂c = ½ on those stages (derived here). As in
/// Hairer & Wanner's stiff codes, the error estimate is filtered through the
/// Newton matrix so it stays bounded on stiff components:
///     err = ‖(I − hγJ)⁻¹ h Σ (b_i − b̂_i) k_i‖,
/// a weighted RMS norm with weights 1/(atol_i + rtol max(|y_i|, |y'_i|)); a
/// step is accepted when err ≤ 1, and the next step is
///     h ← h · min(5, max(0.2, 0.9 err^(−1/3)))   (no growth after a rejection).
///
/// Stage i solves Y_i = y + h Σ_{j<i} a_ij k_j + hγ f(t + c_i h, Y_i) by
/// modified Newton (implicit_common.hpp): one Jacobian and one LU of
/// I − hγJ serve every stage and are kept across steps; J is re-evaluated
/// when Newton converges slowly or fails, and a step whose Newton fails with
/// a fresh Jacobian is retried with h/4. The slopes are k_i = (Y_i − r_i)/(hγ)
/// (r_i the explicit part), so that y_{n+1} = Y_3 exactly. Output times are
/// reported by cubic Hermite interpolation (order 3) unless
/// stop_at_outputs lands the steps on them.
///
/// DAEs (M = diag(1 differential, 0 algebraic), implicit_common.hpp): each
/// stage solves M (Y_i − r_i) = hγ f(Y_i), the constraints at the stage;
/// the method is stiffly accurate (b = the last row of A), so y_{n+1} = Y_3
/// satisfies them. The slopes k_i = (Y_i − r_i)/(hγ) are then the stage
/// derivatives of every state, and the error estimate is
/// (M − hγJ)⁻¹ M h Σ (b_i − b̂_i) k_i with the algebraic states left out
/// of its norm; with no differential state (an all-algebraic model) it is
/// h Σ (b_i − b̂_i) k_i on every state.
///
/// Discrete adjoint of one step (ode::gradient; the step sizes are constants
/// of the adjoint): with k̄_i = h b_i λ, for i = 3, 2, 1:
///     (I − hγ J(Y_i))ᵀ w_i = k̄_i,   Ȳ_i = J(Y_i)ᵀ w_i,   p̄ += f_p(Y_i)ᵀ w_i,
///     k̄_j += h a_ij Ȳ_i (j < i),
/// and λ_n = λ + Σ_i Ȳ_i. A replayed step (`replay = true`) evaluates J
/// afresh at the step's start, so its result is a function of (t, h, y)
/// alone — identical bits whichever checkpoint schedule recomputes it.

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/options.hpp"
#include "costate/ode/steppers/implicit_common.hpp"

namespace costate::ode {

namespace sdirk3_tableau {
inline constexpr double gamma = 0.43586652150845899941601945;
inline constexpr double c[3] = {gamma, (1.0 + gamma) / 2.0, 1.0};
inline constexpr double b1 = -(6.0 * gamma * gamma - 16.0 * gamma + 1.0) / 4.0;
inline constexpr double b2 = (6.0 * gamma * gamma - 20.0 * gamma + 5.0) / 4.0;
/// a[i][j], lower triangular with γ on the diagonal.
inline constexpr double a[3][3] = {
    {gamma, 0.0, 0.0}, {(1.0 - gamma) / 2.0, gamma, 0.0}, {b1, b2, gamma}};
inline constexpr double b[3] = {b1, b2, gamma};
inline constexpr double bhat2 = (1.0 - 2.0 * gamma) / (1.0 - gamma);
inline constexpr double bhat[3] = {1.0 - bhat2, bhat2, 0.0};
}  // namespace sdirk3_tableau

template <class M>
class Sdirk3Stepper {
 public:
  static constexpr int kStages = 3;

  /// `rtol`, `atol` (one per state) and `kappa` set Newton's weighted
  /// stopping test (implicit_common.hpp).
  Sdirk3Stepper(const M& model, std::span<const double> p, std::size_t n, double newton_tol,
                int newton_max_iterations, double rtol, std::vector<double> atol,
                double kappa = 0.01)
      : jac_(model, p, n), newton_(jac_, newton_tol, newton_max_iterations), n_(n),
        Z_(kStages * n), K_(kStages * n), r_(n), e_(n), w_(n), nw_(n), rtol_(rtol),
        atol_(std::move(atol)), kappa_(kappa) {}

  std::size_t n() const { return n_; }
  detail::ModelJacobian<M>& model_jacobian() { return jac_; }
  /// Stage value Y_i and slope k_i of the last attempt.
  std::span<const double> stage(int i) const {
    return std::span<const double>(Z_).subspan(static_cast<std::size_t>(i) * n_, n_);
  }
  std::span<const double> slope(int i) const {
    return std::span<const double>(K_).subspan(static_cast<std::size_t>(i) * n_, n_);
  }

  /// One attempt from (t, y) with step h into y_new (may not alias y).
  /// Returns false when Newton failed (y_new undefined). A replay may pass
  /// `start_jacobian`, [J | f_p] at (t, y) evaluated by the caller, instead
  /// of evaluating J here (same bits).
  bool attempt(double t, double h, std::span<const double> y, std::span<double> y_new,
               bool replay, const Eigen::MatrixXd* start_jacobian = nullptr) {
    using namespace sdirk3_tableau;
    bool fresh = false;
    if (replay && start_jacobian) {
      newton_.set_jacobian(*start_jacobian);
      fresh = true;
    } else if (replay || !newton_.has_jacobian()) {
      newton_.evaluate_jacobian(t, y);
      fresh = true;
    }
    const double g = h * gamma;
    for (std::size_t q = 0; q < n_; ++q) nw_[q] = 1.0 / (atol_[q] + rtol_ * std::abs(y[q]));
    for (int i = 0; i < kStages; ++i) {
      const std::size_t off = static_cast<std::size_t>(i) * n_;
      for (std::size_t q = 0; q < n_; ++q) {
        double s = y[q];
        for (int j = 0; j < i; ++j) s += h * a[i][j] * K_[static_cast<std::size_t>(j) * n_ + q];
        r_[q] = s;
      }
      guess(i, h, y);
      std::span<double> z(Z_.data() + off, n_);
      const double ti = t + c[i] * h;
      bool ok = newton_.solve(ti, r_, g, z, nw_, kappa_);
      if (!ok) {
        // Failed: with this step's own Jacobian the step fails (the driver
        // shortens it); with an older one (or in a replay, once) a new
        // Jacobian at the stage's guess, and retry.
        if (fresh && !replay) return false;
        guess(i, h, y);
        newton_.evaluate_jacobian(ti, std::span<const double>(Z_.data() + off, n_));
        fresh = true;
        if (!newton_.solve(ti, r_, g, z, nw_, kappa_)) return false;
      } else if (newton_.rate > 0.5 && !replay) {
        stale_ = true;  // converged slowly: a new Jacobian before the next step
      }
      for (std::size_t q = 0; q < n_; ++q) K_[off + q] = (Z_[off + q] - r_[q]) / g;
    }
    for (std::size_t q = 0; q < n_; ++q) y_new[q] = Z_[2 * n_ + q];
    h_ = h;
    return true;
  }

  /// A fixed step (adaptive: false): as attempt(), retried once with a fresh
  /// Jacobian; false with a reason when Newton fails.
  bool step(double t, double h, std::span<const double> y, std::span<double> y_out,
            std::string* why = nullptr) {
    if (attempt(t, h, y, y_out, false) || attempt(t, h, y, y_out, true)) return true;
    if (why) *why = "Newton did not converge in the SDIRK stages";
    return false;
  }

  /// The filtered error norm of the last attempt (see the file comment).
  double error_norm(std::span<const double> y, std::span<const double> y_new, double rtol,
                    std::span<const double> atol) {
    using namespace sdirk3_tableau;
    Eigen::Map<Eigen::VectorXd> e(e_.data(), static_cast<Eigen::Index>(n_));
    for (std::size_t q = 0; q < n_; ++q) {
      double s = 0.0;
      for (int i = 0; i < kStages; ++i) s += (b[i] - bhat[i]) * K_[static_cast<std::size_t>(i) * n_ + q];
      e_[q] = h_ * s;
    }
    // An all-algebraic model (M = 0 on its states, error_unmeasured()
    // empty): the filter would zero the estimate; h Σ (b_i − b̂_i) k_i of
    // the stage derivatives measures its states instead.
    const std::span<const std::uint8_t> alg = jac_.algebraic();
    if (alg.empty() || !jac_.error_unmeasured().empty()) {
      detail::apply_mass(alg, e_.data());
      newton_.solve_in_place(e);
      detail::apply_mass(jac_.error_unmeasured(), e_.data());
    }
    for (std::size_t q = 0; q < n_; ++q)
      w_[q] = 1.0 / (atol[q] + rtol * std::max(std::abs(y[q]), std::abs(y_new[q])));
    return detail::wrms(e_, w_);
  }

  /// Called by the driver after each step: refresh J before the next one
  /// when Newton was slow.
  void after_step(double t, std::span<const double> y) {
    if (stale_) {
      newton_.evaluate_jacobian(t, y);
      stale_ = false;
    }
  }
  void refresh_jacobian(double t, std::span<const double> y) { newton_.evaluate_jacobian(t, y); }

  detail::ModifiedNewton<M>& newton() { return newton_; }

 private:
  // Newton's start for stage i: y for stage 1, y + c2 h k1 for stage 2, the
  // embedded order-2 solution for stage 3.
  void guess(int i, double h, std::span<const double> y) {
    using namespace sdirk3_tableau;
    const std::size_t off = static_cast<std::size_t>(i) * n_;
    for (std::size_t q = 0; q < n_; ++q) {
      double z = y[q];
      if (i == 1) z += h * c[1] * K_[q];
      if (i == 2) z += h * (bhat[0] * K_[q] + bhat[1] * K_[n_ + q]);
      Z_[off + q] = z;
    }
  }

  detail::ModelJacobian<M> jac_;
  detail::ModifiedNewton<M> newton_;
  std::size_t n_;
  std::vector<double> Z_, K_, r_, e_, w_, nw_;
  double rtol_;
  std::vector<double> atol_;
  double kappa_;
  double h_ = 0.0;
  bool stale_ = false;
};

namespace detail {

/// Hairer's initial step for a method of order `order` (as run_dopri5 uses).
template <class M>
double implicit_initial_step(ModelJacobian<M>& jac, double t, std::span<const double> y,
                             std::span<const double> f0, std::span<const double> w, int order,
                             double hmax) {
  const std::size_t n = y.size();
  const double dny = wrms(y, w), dnf = wrms(f0, w);
  double h = (dnf <= 1e-5 || dny <= 1e-5) ? 1e-6 : 0.01 * dny / dnf;
  h = std::min(h, hmax);
  std::vector<double> y1(n), f1(n);
  for (std::size_t i = 0; i < n; ++i) y1[i] = y[i] + h * f0[i];
  jac.rhs(t + h, y1, f1);
  for (std::size_t i = 0; i < n; ++i) f1[i] -= f0[i];
  const double der2 = wrms(f1, w) / h;
  const double der12 = std::max(std::abs(der2), dnf);
  const double h1 = der12 <= 1e-15 ? std::max(1e-6, h * 1e-3)
                                   : std::pow(0.01 / der12, 1.0 / (order + 1.0));
  return std::min({100.0 * h, h1, hmax});
}

/// The absolute tolerances as one value per state.
inline std::vector<double> atol_vector(const IntegratorOptions& opt, std::size_t n) {
  if (!opt.atol_per_state.empty()) return opt.atol_per_state;
  return std::vector<double>(n, opt.atol);
}

/// Adaptive sdirk3 from t0 to t1 in place on y. `out(j, t, y)` per output
/// time (Hermite interpolation, or landing when opt.stop_at_outputs);
/// `accepted(t_new)` after every accepted step.
template <class M, class Out, class Accepted>
void run_sdirk3(Sdirk3Stepper<M>& st, double t0, double t1, std::span<double> y,
                const IntegratorOptions& opt, std::span<const double> outputs, Out&& out,
                Summary& s, Accepted&& accepted) {
  const std::size_t n = y.size();
  const double hmax = opt.dt_max > 0.0 ? opt.dt_max : t1 - t0;
  const std::vector<double> atol = atol_vector(opt, n);
  std::vector<double> y_new(n), f0(n), f1(n), w(n), tmp(n);
  auto& jac = st.model_jacobian();
  std::size_t j = 0;
  double t = t0;
  while (j < outputs.size() && outputs[j] == t) out(j++, t, std::span<const double>(y));
  jac.rhs(t, y, f0);
  double h = opt.dt;
  if (h <= 0.0) {
    for (std::size_t i = 0; i < n; ++i) w[i] = 1.0 / (atol[i] + opt.rtol * std::abs(y[i]));
    h = implicit_initial_step(jac, t, y, f0, w, 3, hmax);
  }
  bool last_rejected = false;
  double forced = std::numeric_limits<double>::infinity();  // a retaken step's end
  bool stop = false;
  while (t < t1 && !stop) {
    const double target =
        std::min({opt.stop_at_outputs && j < outputs.size() ? outputs[j] : t1,
                  opt.next_landing(t, t1), forced});
    bool last = false;
    if (!guard_step(t, h, hmax, target, opt, s, last)) break;
    if (!st.attempt(t, h, y, y_new, false)) {
      ++s.rejected_steps;
      last_rejected = true;
      h *= 0.25;
      continue;
    }
    const double err = st.error_norm(y, y_new, opt.rtol, atol);
    if (!std::isfinite(err)) {
      ++s.rejected_steps;
      last_rejected = true;
      h *= 0.2;
      st.refresh_jacobian(t, y);
      continue;
    }
    double fac = std::clamp(0.9 * std::pow(std::max(err, 1e-10), -1.0 / 3.0), 0.2, 5.0);
    if (err <= 1.0 && opt.step_watch) {
      const StepVerdict v = opt.step_watch(t, std::span<const double>(y), last ? target : t + h,
                                           std::span<const double>(y_new));
      if (v.kind == StepVerdict::Kind::Retry) {
        forced = v.t;
        ++s.rejected_steps;
        h = v.t - t;
        continue;
      }
      stop = v.kind == StepVerdict::Kind::Stop;
    }
    if (err <= 1.0) {
      ++s.steps;
      s.last_step = h;
      const double t_new = last ? target : t + h;
      const auto k3 = st.slope(2);
      for (std::size_t i = 0; i < n; ++i) f1[i] = k3[i];
      while (j < outputs.size() && outputs[j] <= t_new) {
        const double to = outputs[j];
        if (to == t_new) {
          out(j, t_new, std::span<const double>(y_new));
        } else {
          // Cubic Hermite on [t, t_new] from y, y_new, f(t, y), f(t_new, y_new).
          const double th = (to - t) / h, th2 = th * th, th3 = th2 * th;
          const double h00 = 2 * th3 - 3 * th2 + 1, h10 = th3 - 2 * th2 + th,
                       h01 = -2 * th3 + 3 * th2, h11 = th3 - th2;
          for (std::size_t i = 0; i < n; ++i)
            tmp[i] = h00 * y[i] + h10 * h * f0[i] + h01 * y_new[i] + h11 * h * f1[i];
          out(j, to, std::span<const double>(tmp));
        }
        ++j;
      }
      std::copy(y_new.begin(), y_new.end(), y.begin());
      std::swap(f0, f1);
      t = t_new;
      s.final_time = t;
      accepted(t);
      if (opt.on_step) opt.on_step(t);
      if (last_rejected) fac = std::min(fac, 1.0);
      last_rejected = false;
      st.after_step(t, y);
    } else {
      ++s.rejected_steps;
      last_rejected = true;
      fac = std::min(fac, 0.9);
    }
    h *= fac;
  }
  s.final_time = t;
}

}  // namespace detail
}  // namespace costate::ode
