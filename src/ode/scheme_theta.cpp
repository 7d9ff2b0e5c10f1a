// The θ-method (backward Euler, Crank–Nicolson) as a Scheme on ode::System
// (scheme.hpp has the maths).
#include <Eigen/LU>
#include <cmath>
#include <optional>
#include <string>

#include "costate/core/error.hpp"
#include "implicit_system.hpp"

namespace costate::ode {

namespace {

class Theta final : public Scheme {
 public:
  Theta(const System& sys, double theta, std::span<const double> p, std::span<const double> times,
        const IntegratorOptions& opt)
      : sys_(sys), p_(p), times_(times), nx_(sys.n_states()), np_(p.size()), theta_(theta),
        tol_(opt.newton_tol), max_iter_(opt.newton_max_iterations), jac_({sys}, p, nx_),
        fn_(nx_), f_(nx_), g_(nx_), next_(nx_), tmp_(nx_),
        A_(static_cast<Eigen::Index>(nx_), static_cast<Eigen::Index>(nx_)),
        lu_(static_cast<Eigen::Index>(nx_)), solve_(nx_, detail::mass_mask(sys)),
        pbar_(static_cast<Eigen::Index>(np_)), pbard_(static_cast<Eigen::Index>(np_)),
        alg_(detail::mass_mask(sys)) {
    COSTATE_CHECK(times.size() >= 2, "θ scheme: needs at least one step");
  }

  std::size_t state_size() const override { return nx_; }
  std::size_t steps() const override { return times_.size() - 1; }

  // Newton on G(z) = M (z − x − h(1−θ) f(t, x)) − hθ f(t + h, z) (M = I
  // for an ODE; a DAE's algebraic rows −hθ f(t + h, z)), from the explicit
  // Euler predictor, J re-evaluated at every iterate.
  void step(std::size_t i, std::span<const double> x, std::span<double> xn) override {
    const double t = times_[i], h = times_[i + 1] - t;
    jac_.rhs(t, x, fn_);
    for (std::size_t q = 0; q < nx_; ++q) xn[q] = x[q] + h * fn_[q];
    if (theta_ == 0.0) {
      next_.stepped(i, xn);
      return;
    }
    const auto nn = static_cast<Eigen::Index>(nx_);
    for (int it = 0; it < max_iter_; ++it) {
      jac_.rhs(t + h, xn, f_);
      for (std::size_t q = 0; q < nx_; ++q)
        g_[static_cast<Eigen::Index>(q)] =
            xn[q] - x[q] - h * (1.0 - theta_) * fn_[q] - h * theta_ * f_[q];
      for (std::size_t q = 0; q < alg_.size(); ++q)
        if (alg_[q]) g_[static_cast<Eigen::Index>(q)] = -(h * theta_) * f_[q];
      detail::stage_matrix(A_, h * theta_, jac_.state(t + h, xn).leftCols(nn), alg_);
      lu_.compute(A_);
      delta_ = lu_.solve(g_);
      double change = 0.0, finite = 0.0;
      for (std::size_t q = 0; q < nx_; ++q) {
        const double d = delta_[static_cast<Eigen::Index>(q)];
        xn[q] -= d;
        change = std::max(change, std::abs(d) / (1.0 + std::abs(xn[q])));
        finite += xn[q] * 0.0;
      }
      COSTATE_CHECK(finite == 0.0, "gradient: implicit step at t = "
                                       << t << " failed: Newton produced a non-finite state");
      if (change <= tol_) {
        next_.stepped(i, xn);
        return;
      }
    }
    throw Error("gradient: implicit step at t = " + std::to_string(t) +
                " failed: Newton did not converge in " + std::to_string(max_iter_) +
                " iterations (integrator.newton_max_iterations; a smaller dt helps)");
  }

  void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
               std::span<double> mu) override {
    const double t = times_[i], h = times_[i + 1] - t;
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    // [J | f_p] at x_{i+1}: kept from the previous reverse step (where it
    // was the one at its x_i), else evaluated at x_{i+1}.
    if (jp_index_ != static_cast<std::int64_t>(i) + 1 || instants_.at(i + 1)) {
      const std::vector<double>* xn = next_.find(i);
      if (!xn) {
        step(i, x, tmp_);
        xn = next_.find(i);
      }
      jp_next_ = jac_.state_parameters(times_[i + 1], *xn);
    }
    ++lin_;
    solve_.factor(h * theta_, jp_next_);
    const Eigen::VectorXd& m = solve_.solve(Eigen::Map<const Eigen::VectorXd>(lambda.data(), nn));
    pbar_.setZero();
    detail::add_transposed_product(jp_next_, nn, npp, m.data(), h * theta_, pbar_.data());
    jp_next_ = jac_.state_parameters(t, x);
    ++lin_;
    jp_index_ = static_cast<std::int64_t>(i);
    for (std::size_t q = 0; q < nx_; ++q) lambda[q] = m[static_cast<Eigen::Index>(q)];
    // A DAE: x_i enters through M (x_i + h(1−θ) f(t, x_i)): λ ← M m + h(1−θ) J_xᵀ M m.
    detail::apply_mass(alg_, lambda.data());
    if (theta_ < 1.0) {
      const double* mm = alg_.empty() ? m.data() : lambda.data();
      if (!alg_.empty()) mass_m_.assign(mm, mm + nx_), mm = mass_m_.data();
      detail::add_transposed_product(jp_next_, 0, nn, mm, h * (1.0 - theta_), lambda.data());
      detail::add_transposed_product(jp_next_, nn, npp, mm, h * (1.0 - theta_), pbar_.data());
    }
    for (std::size_t j = 0; j < np_; ++j) mu[j] += pbar_[static_cast<Eigen::Index>(j)];
    if (!instants_.at(i)) next_.reversed(i, x);
  }

  // adjoint() for a block of lanes: [J | f_p] at x_{i+1} and its LU once,
  // [J | f_p] at x_i once; each lane's arithmetic is adjoint()'s, in its
  // order (the same bits). One lane: adjoint() itself (its hot path keeps
  // the solve's result in place instead of a per-lane copy).
  void adjoint_block(std::size_t i, std::span<const double> x,
                     std::span<const std::span<double>> lambdas,
                     std::span<const std::span<double>> mus) override {
    if (lambdas.size() == 1) {
      adjoint(i, x, lambdas[0], mus[0]);
      return;
    }
    const double t = times_[i], h = times_[i + 1] - t;
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    // [J | f_p] at x_{i+1}: kept from the previous reverse step (where it
    // was the one at its x_i), else evaluated at x_{i+1}.
    if (jp_index_ != static_cast<std::int64_t>(i) + 1 || instants_.at(i + 1)) {
      const std::vector<double>* xn = next_.find(i);
      if (!xn) {
        step(i, x, tmp_);
        xn = next_.find(i);
      }
      jp_next_ = jac_.state_parameters(times_[i + 1], *xn);
    }
    ++lin_;
    solve_.factor(h * theta_, jp_next_);
    const std::size_t k = lambdas.size();
    ms_.resize(k);
    for (std::size_t j = 0; j < k; ++j)
      ms_[j] = solve_.solve(Eigen::Map<const Eigen::VectorXd>(lambdas[j].data(), nn));
    pbars_.resize(k);
    for (std::size_t j = 0; j < k; ++j) {
      pbars_[j].resize(npp);
      pbars_[j].setZero();
      detail::add_transposed_product(jp_next_, nn, npp, ms_[j].data(), h * theta_, pbars_[j].data());
    }
    jp_next_ = jac_.state_parameters(t, x);
    ++lin_;
    jp_index_ = static_cast<std::int64_t>(i);
    for (std::size_t j = 0; j < k; ++j) {
      const Eigen::VectorXd& m = ms_[j];
      Eigen::VectorXd& pbar = pbars_[j];
      std::span<double> lambda = lambdas[j];
      for (std::size_t q = 0; q < nx_; ++q) lambda[q] = m[static_cast<Eigen::Index>(q)];
      detail::apply_mass(alg_, lambda.data());  // a DAE: as adjoint()
      if (theta_ < 1.0) {
        const double* mm = alg_.empty() ? m.data() : lambda.data();
        if (!alg_.empty()) mass_m_.assign(mm, mm + nx_), mm = mass_m_.data();
        detail::add_transposed_product(jp_next_, 0, nn, mm, h * (1.0 - theta_), lambda.data());
        detail::add_transposed_product(jp_next_, nn, npp, mm, h * (1.0 - theta_), pbar.data());
      }
      for (std::size_t q = 0; q < np_; ++q) mus[j][q] += pbar[static_cast<Eigen::Index>(q)];
    }
    if (!instants_.at(i)) next_.reversed(i, x);
  }

  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
               std::span<const double> S, std::span<double> Sn,
               std::span<const double> P) override {
    if (m == 1 && alg_.empty() && detail::TangentPass::available(sys_)) {
      tangent1(i, x, xn, S, Sn, P);
      return;
    }
    const double t = times_[i], h = times_[i + 1] - t;
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_),
               mm = static_cast<Eigen::Index>(m);
    const detail::ConstRowMap Sm(S.data(), nn, mm), Pm(P.data(), npp, mm);
    // [J | f_p] at x_i: the previous tangent step's one at its x_{i+1}.
    if (tjp_index_ != static_cast<std::int64_t>(i) || instants_.at(i))
      tjp_ = jac_.state_parameters(t, x);
    step(i, x, xn);
    const Eigen::MatrixXd& J1 = jac_.state_parameters(times_[i + 1], xn);
    lin_ += 2;
    Eigen::MatrixXd rhs;
    if (alg_.empty()) {
      rhs = Sm + (h * theta_) * (J1.rightCols(npp) * Pm);
      if (theta_ < 1.0)
        rhs += (h * (1.0 - theta_)) * (tjp_.leftCols(nn) * Sm + tjp_.rightCols(npp) * Pm);
    } else {
      // A DAE: (M − hθ J') S' = M (S + h(1−θ)(J S + f_p P)) + hθ f_p' P.
      rhs = Sm;
      if (theta_ < 1.0)
        rhs += (h * (1.0 - theta_)) * (tjp_.leftCols(nn) * Sm + tjp_.rightCols(npp) * Pm);
      for (std::size_t q = 0; q < nx_; ++q)
        if (alg_[q]) rhs.row(static_cast<Eigen::Index>(q)).setZero();
      rhs += (h * theta_) * (J1.rightCols(npp) * Pm);
    }
    detail::stage_matrix(A_, h * theta_, J1.leftCols(nn), alg_);
    lu_.compute(A_);
    detail::RowMap(Sn.data(), nn, mm) = lu_.solve(rhs);
    tjp_ = J1;
    tjp_index_ = static_cast<std::int64_t>(i) + 1;
  }

  // tangent() with one direction on a second-order System (second_order_sweep's
  // forward): S' solves (I − hθ J') S' = b₀ + hθ f_p' P, b₀ = S + h(1−θ)(J S +
  // f_p P), J' at x_{i+1}, with every product a Dual<double, 1> pass of the
  // model (no Jacobian) and, as the matrix, the LU step() left of I − hθ J_N
  // at Newton's last iterate (within newton_tol of x_{i+1}) — refined,
  //     S' ← S' + (I − hθ J_N)⁻¹ (b₀ + hθ (J' S' + f_p' P) − S'),  from S' = 0,
  // one pass at (x_{i+1} + εS', p + εP) per residual. Each correction
  // shrinks by ‖(I − hθ J_N)⁻¹ hθ (J' − J_N)‖ = O(newton_tol); stopped when
  // the next one, estimated as ‖δ_k‖²/‖δ_{k−1}‖, is below round-off of S'
  // (two passes at x_{i+1} with the default newton_tol; at most
  // kMaxRefinements). The solution of the same linear equation as tangent()'s.
  static constexpr int kMaxRefinements = 6;
  void tangent1(std::size_t i, std::span<const double> x, std::span<double> xn,
                std::span<const double> S, std::span<double> Sn, std::span<const double> P) {
    const double t = times_[i], h = times_[i + 1] - t;
    if (!pass_) pass_.emplace(sys_, p_);
    const std::int64_t passes = pass_->evaluations;
    step(i, x, xn);
    b_.resize(nx_);
    d_.resize(nx_);
    std::copy(S.begin(), S.begin() + static_cast<std::ptrdiff_t>(nx_), b_.begin());
    if (theta_ < 1.0) {
      pass_->apply(t, x, S.first(nx_), P, d_.data());
      for (std::size_t q = 0; q < nx_; ++q) b_[q] += h * (1.0 - theta_) * d_[q];
    }
    if (theta_ == 0.0) {
      std::copy(b_.begin(), b_.end(), Sn.begin());
    } else {
      std::fill(Sn.begin(), Sn.begin() + static_cast<std::ptrdiff_t>(nx_), 0.0);
      double previous = 0.0;
      for (int k = 0; k < kMaxRefinements; ++k) {
        pass_->apply(t + h, xn, k == 0 ? std::span<const double>() : Sn.first(nx_), P,
                     d_.data());
        for (std::size_t q = 0; q < nx_; ++q)
          g_[static_cast<Eigen::Index>(q)] = b_[q] + h * theta_ * d_[q] - Sn[q];
        delta_ = lu_.solve(g_);
        double change = 0.0, size = 0.0;
        for (std::size_t q = 0; q < nx_; ++q) {
          const double dq = delta_[static_cast<Eigen::Index>(q)];
          Sn[q] += dq;
          change = std::max(change, std::abs(dq));
          size = std::max(size, std::abs(Sn[q]));
        }
        if (change == 0.0 || (k > 0 && change * change <= kRoundoff * size * previous)) break;
        previous = change;
      }
    }
    lin_ += pass_->evaluations - passes;
    tjp_index_ = -1;  // tangent()'s kept [J | f_p] is not at this x_{i+1}
  }
  static constexpr double kRoundoff = 1e-16;

  // Second order: adjoint() at (x + εẋ, p + εṗ) with λ + ελ̇ (scheme.hpp):
  //   Aᵀ m = λ,  Aᵀ ṁ = λ̇ + hθ J̇'ᵀ m  (A = I − hθ J' at x_{i+1});
  //   μ̇ += hθ (f_p'ᵀ ṁ + ḟ_p'ᵀ m);  λ̇ = ṁ + h(1−θ)(J_xᵀ ṁ + J̇_xᵀ m), …
  void adjoint_tangent(std::size_t i, std::span<const double> x, std::span<const double> xdot,
                       std::span<const double> xn, std::span<const double> xndot,
                       std::span<const double> pdot, std::span<double> lambda,
                       std::span<double> lambda_dot, std::span<double> mu,
                       std::span<double> mu_dot) override {
    const double t = times_[i], h = times_[i + 1] - t;
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    if (!second_) second_.emplace(sys_, p_);
    detail::SystemJacobianTangent& jt = *second_;
    jt.at(times_[i + 1], xn, xndot, pdot);
    lin_ += 1;
    solve_.factor(h * theta_, jt.jp());
    m_ = solve_.solve(Eigen::Map<const Eigen::VectorXd>(lambda.data(), nn));
    rd_ = Eigen::Map<const Eigen::VectorXd>(lambda_dot.data(), nn);
    detail::add_transposed_product(jt.jp_dot(), 0, nn, m_.data(), h * theta_, rd_.data());
    md_ = solve_.solve(rd_);
    pbar_.setZero();
    pbard_.setZero();
    detail::add_transposed_product(jt.jp(), nn, npp, m_.data(), h * theta_, pbar_.data());
    detail::add_transposed_product(jt.jp(), nn, npp, md_.data(), h * theta_, pbard_.data());
    detail::add_transposed_product(jt.jp_dot(), nn, npp, m_.data(), h * theta_, pbard_.data());
    for (std::size_t q = 0; q < nx_; ++q) {
      lambda[q] = m_[static_cast<Eigen::Index>(q)];
      lambda_dot[q] = md_[static_cast<Eigen::Index>(q)];
    }
    if (!alg_.empty()) {  // a DAE: x_i enters through M (as adjoint()): M m, M ṁ
      detail::apply_mass(alg_, lambda.data());
      detail::apply_mass(alg_, lambda_dot.data());
      detail::apply_mass(alg_, m_.data());
      detail::apply_mass(alg_, md_.data());
    }
    if (theta_ < 1.0) {
      const double c = h * (1.0 - theta_);
      jt.at(t, x, xdot, pdot);
      lin_ += 1;
      detail::add_transposed_product(jt.jp(), 0, nn, m_.data(), c, lambda.data());
      detail::add_transposed_product(jt.jp(), nn, npp, m_.data(), c, pbar_.data());
      detail::add_transposed_product(jt.jp(), 0, nn, md_.data(), c, lambda_dot.data());
      detail::add_transposed_product(jt.jp_dot(), 0, nn, m_.data(), c, lambda_dot.data());
      detail::add_transposed_product(jt.jp(), nn, npp, md_.data(), c, pbard_.data());
      detail::add_transposed_product(jt.jp_dot(), nn, npp, m_.data(), c, pbard_.data());
    }
    for (std::size_t j = 0; j < np_; ++j) {
      mu[j] += pbar_[static_cast<Eigen::Index>(j)];
      mu_dot[j] += pbard_[static_cast<Eigen::Index>(j)];
    }
  }

  std::int64_t rhs_evaluations() const override { return jac_.rhs_evaluations; }
  std::int64_t linearizations() const override { return lin_; }

 private:
  const System& sys_;
  std::span<const double> p_, times_;
  std::size_t nx_, np_;
  double theta_, tol_;
  int max_iter_;
  detail::SystemJacobian jac_;
  std::vector<double> fn_, f_;
  Eigen::VectorXd g_, delta_;
  detail::NextState next_;

 public:
  detail::Instants instants_;  // the plan's event instants (make_theta_scheme)
  std::vector<double> tmp_;
  Eigen::MatrixXd A_, jp_next_, tjp_;
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
  detail::TransposedSolve solve_;
  Eigen::VectorXd pbar_, pbard_, m_, md_, rd_;
  std::vector<Eigen::VectorXd> ms_, pbars_;  // adjoint_block: per lane
  std::optional<detail::SystemJacobianTangent> second_;
  std::optional<detail::TangentPass> pass_;  // tangent1
  std::vector<double> b_, d_;
  std::span<const std::uint8_t> alg_;  // a DAE's mass matrix (empty: an ODE)
  std::vector<double> mass_m_;         // M m (a DAE's adjoint)
  std::int64_t jp_index_ = -1, tjp_index_ = -1, lin_ = 0;
};

}  // namespace

std::unique_ptr<Scheme> make_theta_scheme(const System& system, double theta,
                                          std::span<const double> p, const StepPlan& steps,
                                          const IntegratorOptions& options) {
  auto scheme = std::make_unique<Theta>(system, theta, p, steps.times(), options);
  scheme->instants_.set(steps);
  return scheme;
}

}  // namespace costate::ode
