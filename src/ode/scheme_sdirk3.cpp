// sdirk3 as a Scheme on ode::System (scheme.hpp has the maths), and its
// adaptive forward run; steppers/sdirk3.hpp instantiated once, on SystemRhs.
#include <Eigen/LU>
#include <array>
#include <optional>

#include "costate/core/error.hpp"
#include "costate/ode/steppers/sdirk3.hpp"
#include "implicit_system.hpp"

namespace costate::ode {

namespace {

class Sdirk3 final : public Scheme {
 public:
  Sdirk3(const System& sys, std::span<const double> p, std::span<const double> times,
         const IntegratorOptions& opt, bool keep_step_data)
      : rhs_{sys}, nx_(sys.n_states()), np_(p.size()), p_(p),
        st_(rhs_, p, nx_, opt.newton_tol, opt.newton_max_iterations, opt.rtol,
            detail::atol_vector(opt, nx_), detail::replay_kappa(opt)),
        jac_(rhs_, p, nx_), times_(times), tmp_(nx_), solve_(nx_, detail::mass_mask(sys)),
        kbar_(static_cast<Eigen::Index>(nx_), 3), ybar_(static_cast<Eigen::Index>(nx_)),
        pbar_(static_cast<Eigen::Index>(np_)) {
    COSTATE_CHECK(times.size() >= 2, "sdirk3 scheme: needs at least one step");
    COSTATE_CHECK_EQ(detail::atol_vector(opt, nx_).size(), nx_,
                     "sdirk3 scheme: integrator.atol_per_state needs one value per state");
    // StoreAll: each replayed step's stages and its [J | f_p] at the step's
    // start (which Newton evaluates anyway), so the reverse step neither
    // re-solves the stages nor evaluates the last stage's Jacobian (Y_3 =
    // x_{i+1} at t_{i+1}: the next step's start).
    if (keep_step_data) cache_.enable(times.size(), 3 * nx_ + nx_ * (nx_ + np_));
  }

  std::size_t state_size() const override { return nx_; }
  std::size_t steps() const override { return times_.size() - 1; }

  void step(std::size_t i, std::span<const double> x, std::span<double> xn) override {
    const double h = times_[i + 1] - times_[i];
    bool ok = false;
    // [J | f_p] at x_i: a forward tangent's at the last stage of step i − 1.
    const Eigen::MatrixXd* start = start_.find(i, x);
    if (cache_.enabled()) {
      const Eigen::MatrixXd& jp = start ? *start : jac_.state_parameters(times_[i], x);
      ok = st_.attempt(times_[i], h, x, xn, true, &jp);
      if (ok) {
        const std::span<double> slot = cache_.fill(i);
        for (int s = 0; s < 3; ++s)
          std::copy(st_.stage(s).begin(), st_.stage(s).end(),
                    slot.begin() + static_cast<std::ptrdiff_t>(s * nx_));
        std::copy(jp.data(), jp.data() + jp.size(),
                  slot.begin() + static_cast<std::ptrdiff_t>(3 * nx_));
      }
    } else {
      ok = st_.attempt(times_[i], h, x, xn, true, start);
    }
    COSTATE_CHECK(ok, "gradient: the replayed sdirk3 step at t = " << times_[i]
                                                                   << " failed to converge");
  }

  void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
               std::span<double> mu) override {
    using namespace sdirk3_tableau;
    const double t = times_[i], h = times_[i + 1] - t;
    const double* kept = cache_.get(i);
    if (!kept) step(i, x, tmp_);  // the stages
    const double* kept_next = instants_.at(i + 1) ? nullptr : cache_.get(i + 1);
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    Eigen::Map<Eigen::VectorXd> lam(lambda.data(), nn);
    for (int s = 0; s < 3; ++s) kbar_.col(s) = h * b[s] * lam;
    pbar_.setZero();
    for (int s = 2; s >= 0; --s) {
      const double ts = t + c[s] * h;
      const std::span<const double> Y =
          kept ? std::span<const double>(kept + s * nx_, nx_) : st_.stage(s);
      // The last stage is x_{i+1} at t_{i+1}: the next step's start.
      const double* jp_data = s == 2 && kept_next && ts == times_[i + 1]
                                  ? kept_next + 3 * nx_
                                  : jac_.state_parameters(ts, Y).data();
      ++lin_;
      const Eigen::Map<const Eigen::MatrixXd> JP(jp_data, nn, nn + npp);
      solve_.factor(h * gamma, JP);
      const Eigen::VectorXd& w = solve_.solve(kbar_.col(s));
      ybar_.setZero();
      detail::add_transposed_product(JP, 0, nn, w.data(), 1.0, ybar_.data());
      detail::add_transposed_product(JP, nn, npp, w.data(), 1.0, pbar_.data());
      lam += ybar_;
      for (int j = 0; j < s; ++j) kbar_.col(j) += h * a[s][j] * ybar_;
    }
    for (std::size_t j = 0; j < np_; ++j) mu[j] += pbar_[static_cast<Eigen::Index>(j)];
  }

  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
               std::span<const double> S, std::span<double> Sn,
               std::span<const double> P) override {
    using namespace sdirk3_tableau;
    const double t = times_[i], h = times_[i + 1] - t;
    if (m == 1) {
      tangent1(i, x, xn, S, Sn, P);
      return;
    }
    step(i, x, xn);
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_),
               mm = static_cast<Eigen::Index>(m);
    const detail::ConstRowMap Sm(S.data(), nn, mm), Pm(P.data(), npp, mm);
    detail::RowMap Snm(Sn.data(), nn, mm);
    Snm = Sm;
    for (int s = 0; s < 3; ++s) {
      const Eigen::MatrixXd& JP = jac_.state_parameters(t + c[s] * h, st_.stage(s));
      ++lin_;
      arg_ = Sm;
      for (int j = 0; j < s; ++j) arg_ += h * a[s][j] * K_[static_cast<std::size_t>(j)];
      rhs_m_ = JP.leftCols(nn) * arg_ + JP.rightCols(npp) * Pm;
      detail::stage_matrix(M_, h * gamma, JP.leftCols(nn), jac_.algebraic());
      lu_.compute(M_);
      K_[static_cast<std::size_t>(s)] = lu_.solve(rhs_m_);
      Snm += h * b[s] * K_[static_cast<std::size_t>(s)];
    }
  }

  // The stages' tangents of step i along (ẋ, ṗ), for one direction:
  //     (I − hγ J_s) K̇_s = J_s Ẏ⁰_s + f_p,s ṗ,   Ẏ⁰_s = ẋ + h Σ_{j<s} a_sj K̇_j,
  // J_s at the stage Y_s (`stages`: 3 n_x, the last step(i)'s or kept),
  // small dense LU and plain loops; into kd (K̇_s) and yd (Ẏ_s = Ẏ⁰_s + hγ
  // K̇_s), 3 n_x each. The last stage's [J | f_p] is x_{i+1}'s: kept by
  // the next step (StoreAll), else evaluated and kept for step i + 1's
  // Newton (StartJacobian). tangent1 and adjoint_tangent both form the
  // stage tangents here (the same bits whichever runs them).
  void stage_tangents(std::size_t i, const double* stages, std::span<const double> xdot,
                      std::span<const double> pdot, double* kd, double* yd) {
    using namespace sdirk3_tableau;
    const double t = times_[i], h = times_[i + 1] - t;
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    r1_.resize(nn);
    for (int s = 0; s < 3; ++s) {
      const double ts = t + c[s] * h;
      const std::span<const double> Y(stages + s * nx_, nx_);
      const double* jp = nullptr;
      if (s == 2 && ts == times_[i + 1]) {
        const double* kept_next = instants_.at(i + 1) ? nullptr : cache_.get(i + 1);
        jp = kept_next ? kept_next + 3 * nx_
                       : start_.keep(i + 1, Y, jac_.state_parameters(ts, Y)).data();
      } else {
        jp = jac_.state_parameters(ts, Y).data();
      }
      ++lin_;
      double* ys = yd + s * nx_;
      for (std::size_t q = 0; q < nx_; ++q) {
        double v = xdot[q];
        for (int j = 0; j < s; ++j) v += h * a[s][j] * kd[static_cast<std::size_t>(j) * nx_ + q];
        ys[q] = v;  // Ẏ⁰_s for now
      }
      for (std::size_t q = 0; q < nx_; ++q) {
        double v = 0.0;
        for (std::size_t col = 0; col < nx_; ++col) v += jp[col * nx_ + q] * ys[col];
        for (std::size_t col = 0; col < np_; ++col) v += jp[(nx_ + col) * nx_ + q] * pdot[col];
        r1_[static_cast<Eigen::Index>(q)] = v;
      }
      solve_.factor_untransposed(h * gamma, Eigen::Map<const Eigen::MatrixXd>(jp, nn, nn + npp));
      const Eigen::VectorXd& k = solve_.solve(r1_);
      for (std::size_t q = 0; q < nx_; ++q) {
        kd[s * nx_ + q] = k[static_cast<Eigen::Index>(q)];
        ys[q] += h * gamma * kd[s * nx_ + q];
      }
    }
  }

  // tangent() with one direction (second_order_sweep's forward): the stage
  // tangents of stage_tangents, S' = S + h Σ b_s K̇_s. Under StoreAll the
  // stages' Ẏ_s are kept for adjoint_tangent.
  void tangent1(std::size_t i, std::span<const double> x, std::span<double> xn,
                std::span<const double> S, std::span<double> Sn, std::span<const double> P) {
    using namespace sdirk3_tableau;
    const double h = times_[i + 1] - times_[i];
    step(i, x, xn);
    if (cache_.enabled() && !tcache_.enabled()) tcache_.enable(times_.size(), 3 * nx_);
    kd1_.resize(3 * nx_);
    yd1_.resize(3 * nx_);
    const double* kept = cache_.get(i);
    stage_tangents(i, kept ? kept : st_.stage(0).data(), S, P, kd1_.data(),
                   tcache_.enabled() ? tcache_.fill(i).data() : yd1_.data());
    for (std::size_t q = 0; q < nx_; ++q) {
      double v = S[q];
      for (int s = 0; s < 3; ++s) v += h * b[s] * kd1_[static_cast<std::size_t>(s) * nx_ + q];
      Sn[q] = v;
    }
  }

  // Second order: the stages' tangents as tangent() forms them, then
  // adjoint()'s loop at (Y_s + εẎ_s, p + εṗ) on (value, ε-part) pairs:
  //   w = M_s⁻ᵀ k̄_s,  ẇ = M_s⁻ᵀ (k̄̇_s + hγ J̇_sᵀ w),
  //   Ȳ̇ = J_sᵀ ẇ + J̇_sᵀ w,  μ̇ += f_p,sᵀ ẇ + ḟ_p,sᵀ w.
  void adjoint_tangent(std::size_t i, std::span<const double> x, std::span<const double> xdot,
                       std::span<const double>, std::span<const double>,
                       std::span<const double> pdot, std::span<double> lambda,
                       std::span<double> lambda_dot, std::span<double> mu,
                       std::span<double> mu_dot) override {
    using namespace sdirk3_tableau;
    const double t = times_[i], h = times_[i + 1] - t;
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    if (!second_ready_) {
      for (int s = 0; s < 3; ++s) second_[static_cast<std::size_t>(s)].emplace(rhs_.system, p_);
      second_ready_ = true;
    }
    // The stages: kept by the forward's step() (StoreAll, as adjoint()), else re-solved.
    const double* kept = cache_.get(i);
    if (!kept) step(i, x, tmp_);
    const double* stages = kept ? kept : st_.stage(0).data();
    // The stages' Ẏ_s: kept by the forward's tangent1 (StoreAll), else formed again.
    const double* yd = tcache_.get(i);
    if (!yd) {
      kd1_.resize(3 * nx_);
      yd1_.resize(3 * nx_);
      stage_tangents(i, stages, xdot, pdot, kd1_.data(), yd1_.data());
      yd = yd1_.data();
    }
    for (int s = 0; s < 3; ++s) {
      const std::size_t off = static_cast<std::size_t>(s) * nx_;
      second_[static_cast<std::size_t>(s)]->at(t + c[s] * h,
                                                std::span<const double>(stages + off, nx_),
                                                std::span<const double>(yd + off, nx_), pdot);
      ++lin_;
    }
    // The reverse loop on plain buffers (Eigen's dynamic-size set-up per
    // operation dominated it on small systems): the same operations as with
    // Eigen vectors, in the same order.
    const std::size_t n = nx_;
    kb_.resize(3 * n);
    kbd_.resize(3 * n);
    w1_.resize(n);
    ybar1_.resize(2 * n);
    pbar1_.assign(2 * np_, 0.0);
    double* lam = lambda.data();
    double* lamd = lambda_dot.data();
    for (int s = 0; s < 3; ++s) {
      const double cb = h * b[s];
      for (std::size_t q = 0; q < n; ++q) {
        kb_[static_cast<std::size_t>(s) * n + q] = cb * lam[q];
        kbd_[static_cast<std::size_t>(s) * n + q] = cb * lamd[q];
      }
    }
    double* yb = ybar1_.data();
    double* ybd = yb + n;
    double* pb = pbar1_.data();
    double* pbd = pb + np_;
    for (int s = 2; s >= 0; --s) {
      const detail::SystemJacobianTangent& jt = *second_[static_cast<std::size_t>(s)];
      const Eigen::MatrixXd& JP = jt.jp();
      const Eigen::MatrixXd& JPd = jt.jp_dot();
      double* kbs = kb_.data() + static_cast<std::size_t>(s) * n;
      double* kbds = kbd_.data() + static_cast<std::size_t>(s) * n;
      solve_.factor(h * gamma, JP);
      const Eigen::VectorXd& w = solve_.solve(Eigen::Map<const Eigen::VectorXd>(kbs, nn));
      std::copy(w.data(), w.data() + n, w1_.begin());
      detail::add_transposed_product(JPd, 0, nn, w1_.data(), h * gamma, kbds);  // k̄̇_s is done with
      const Eigen::VectorXd& wd = solve_.solve(Eigen::Map<const Eigen::VectorXd>(kbds, nn));
      std::fill(yb, yb + 2 * n, 0.0);
      detail::add_transposed_product(JP, 0, nn, w1_.data(), 1.0, yb);
      detail::add_transposed_product(JP, nn, npp, w1_.data(), 1.0, pb);
      detail::add_transposed_product(JP, 0, nn, wd.data(), 1.0, ybd);
      detail::add_transposed_product(JPd, 0, nn, w1_.data(), 1.0, ybd);
      detail::add_transposed_product(JP, nn, npp, wd.data(), 1.0, pbd);
      detail::add_transposed_product(JPd, nn, npp, w1_.data(), 1.0, pbd);
      for (std::size_t q = 0; q < n; ++q) {
        lam[q] += yb[q];
        lamd[q] += ybd[q];
      }
      for (int j = 0; j < s; ++j) {
        const double ca = h * a[s][j];
        double* kbj = kb_.data() + static_cast<std::size_t>(j) * n;
        double* kbdj = kbd_.data() + static_cast<std::size_t>(j) * n;
        for (std::size_t q = 0; q < n; ++q) {
          kbj[q] += ca * yb[q];
          kbdj[q] += ca * ybd[q];
        }
      }
    }
    for (std::size_t j = 0; j < np_; ++j) {
      mu[j] += pb[j];
      mu_dot[j] += pbd[j];
    }
  }

  std::int64_t rhs_evaluations() const override {
    return st_jac_->rhs_evaluations + jac_.rhs_evaluations;
  }
  std::int64_t linearizations() const override { return lin_; }

 private:

  detail::SystemRhs rhs_;
  std::size_t nx_, np_;
  std::span<const double> p_;
  Sdirk3Stepper<detail::SystemRhs> st_;
  const detail::SystemJacobian* st_jac_ = &st_.model_jacobian();
  detail::SystemJacobian jac_;
  std::span<const double> times_;
  std::vector<double> tmp_;
  detail::StepCache cache_;
  detail::TransposedSolve solve_;
  Eigen::MatrixXd kbar_;
  Eigen::VectorXd ybar_, pbar_;
  std::array<Eigen::MatrixXd, 3> K_;
  Eigen::MatrixXd arg_, rhs_m_, M_;
  // Second order (adjoint_tangent).
  std::vector<double> kb_, kbd_, w1_, ybar1_, pbar1_;
  // One direction's stage tangents (stage_tangents): K̇_s, Ẏ_s; Ẏ_s kept
  // per step under StoreAll; x_{i+1}'s [J | f_p] for step i + 1.
  std::vector<double> kd1_, yd1_;
  Eigen::VectorXd r1_;
  detail::StepCache tcache_;
  detail::StartJacobian start_;

 public:
  detail::Instants instants_;  // the plan's event instants (make_sdirk3_scheme)

 private:
  std::array<std::optional<detail::SystemJacobianTangent>, 3> second_;
  bool second_ready_ = false;
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
  std::int64_t lin_ = 0;
};

}  // namespace

std::unique_ptr<Scheme> make_sdirk3_scheme(const System& system, std::span<const double> p,
                                           const StepPlan& steps,
                                           const IntegratorOptions& options,
                                           bool keep_step_data) {
  auto scheme = std::make_unique<Sdirk3>(system, p, steps.times(), options, keep_step_data);
  scheme->instants_.set(steps);
  return scheme;
}

namespace detail {

/// The adaptive sdirk3 run that chooses the steps (plan_steps).
void plan_sdirk3(const System& system, std::span<const double> p, std::span<double> x,
                 double t0, double t1, const IntegratorOptions& options,
                 std::span<const double> stops, Summary& s) {
  const SystemRhs rhs{system};
  const std::size_t nx = system.n_states();
  Sdirk3Stepper<SystemRhs> st(rhs, p, nx, options.newton_tol, options.newton_max_iterations,
                              options.rtol, atol_vector(options, nx));
  auto ignore = [](std::size_t, double, std::span<const double>) {};
  run_sdirk3(st, t0, t1, x, options, stops, ignore, s, [](double) {});
  s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
}

}  // namespace detail

}  // namespace costate::ode
