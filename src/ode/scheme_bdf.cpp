// Variable-order bdf as a Scheme on ode::System (scheme.hpp has the maths),
// its adaptive forward run and its record; steppers/bdf.hpp instantiated
// once, on SystemRhs.
#include <Eigen/LU>
#include <array>
#include <optional>

#include "costate/core/error.hpp"
#include "costate/ode/steppers/bdf.hpp"
#include "implicit_system.hpp"

namespace costate::ode {

namespace {

constexpr int kWindow = kBdfMaxOrder;

class Bdf final : public Scheme {
 public:
  Bdf(const System& sys, std::span<const double> p, std::span<const double> times,
      std::span<const int> orders, const IntegratorOptions& opt, bool keep_step_data,
      const BdfForwardRecord* record, bool quadrature)
      : rhs_{sys}, nx_(sys.n_states()), np_(p.size()), p_(p), jac_(rhs_, p, nx_),
        newton_(newton_jacobian(sys, p, quadrature), opt.newton_tol, opt.newton_max_iterations),
        ny_(newton_jac_->n()), times_(times), orders_(orders),
        atol_(detail::atol_vector(opt, nx_)), rtol_(opt.rtol), kappa_(detail::replay_kappa(opt)),
        r_(ny_), pred_(ny_), w_(ny_), f_(ny_), next_(kWindow * nx_),
        solve_(nx_, detail::mass_mask(sys)), alg_(detail::mass_mask(sys)) {
    if (model_) ysolve_.emplace(ny_, detail::mass_mask(*model_));
    COSTATE_CHECK(times.size() >= 2, "bdf scheme: needs at least one step");
    COSTATE_CHECK(orders.size() + 1 == times.size(),
                  "bdf scheme: replaying bdf steps needs one order per step "
                  "(StepPlan::orders): got "
                      << orders.size() << " for " << times.size() - 1 << " steps");
    COSTATE_CHECK_EQ(atol_.size(), nx_, "bdf scheme: integrator.atol_per_state needs one value per state");
    // With the quadrature (a running cost) Newton, the record and the cache
    // hold the model's [J | f_p] (n rows), z's row comes from q's gradient.
    const std::size_t steps = times.size() - 1, width = ny_ * (ny_ + np_);
    // A forward run handed over: step() takes its states, the cache its
    // Jacobians (at y_0 … y_{l−1}); StoreAll without one keeps [J | f_p] at
    // each replayed step's start — the Jacobian its Newton evaluates anyway
    // and the one the adjoint of step i − 1 needs.
    if (record && record->states.size() == steps * ny_) {
      forward_states_ = record->states;
      use_forward_ = true;
      if (record->jacobians.size() == steps * width) cache_.borrow(width, record->jacobians, steps);
    } else if (keep_step_data) {
      cache_.enable(steps + 1, width);
    }
  }

  std::size_t state_size() const override { return kWindow * nx_; }
  std::size_t steps() const override { return times_.size() - 1; }

  void step(std::size_t i, std::span<const double> x, std::span<double> xn) override {
    shift(x, xn);
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    if (use_forward_) {  // the forward run's y_{i+1}
      const auto from = forward_states_.begin() + static_cast<std::ptrdiff_t>(i * ny_);
      std::copy(from, from + static_cast<std::ptrdiff_t>(ny_), xn.begin());
      if (model_) quadrature(i, k, alpha.data(), g, x, xn);
      next_.stepped(i, xn);
      return;
    }
    const double t = times_[i], tn = times_[i + 1];
    std::fill(r_.begin(), r_.end(), 0.0);
    for (int j = 1; j <= k; ++j)
      for (std::size_t q = 0; q < ny_; ++q)
        r_[q] += alpha[static_cast<std::size_t>(j - 1)] * x[static_cast<std::size_t>(j - 1) * nx_ + q];
    // Predictor from the window: the polynomial through the available points.
    // (since the last event instant: the history restarts there).
    const int valid = static_cast<int>(std::min<std::size_t>(i + 1 - instants_.since(i), kWindow));
    const int count = std::min(k + 1, valid);
    if (count == 1) {
      newton_jac_->rhs(t, x.first(ny_), f_);
      for (std::size_t q = 0; q < ny_; ++q) pred_[q] = x[q] + (tn - t) * f_[q];
    } else {
      std::array<double, kWindow> tau{}, wts{};
      for (int m = 0; m < count; ++m) tau[static_cast<std::size_t>(m)] = times_[i - static_cast<std::size_t>(m)];
      lagrange_weights(tau, count, tn, wts.data());
      std::fill(pred_.begin(), pred_.end(), 0.0);
      for (int m = 0; m < count; ++m)
        for (std::size_t q = 0; q < ny_; ++q)
          pred_[q] += wts[static_cast<std::size_t>(m)] * x[static_cast<std::size_t>(m) * nx_ + q];
    }
    for (std::size_t q = 0; q < ny_; ++q) w_[q] = 1.0 / (atol_[q] + rtol_ * std::abs(x[q]));
    std::span<double> z = xn.first(ny_);
    std::copy(pred_.begin(), pred_.end(), z.begin());
    const Eigen::MatrixXd& jp = start_jacobian(i, x.first(ny_));
    if (cache_.enabled()) std::copy(jp.data(), jp.data() + jp.size(), cache_.fill(i).begin());
    newton_.set_jacobian(jp);
    if (!newton_.solve(tn, r_, g, z, w_, kappa_)) {
      std::copy(pred_.begin(), pred_.end(), z.begin());
      newton_.evaluate_jacobian(tn, pred_);
      COSTATE_CHECK(newton_.solve(tn, r_, g, z, w_, kappa_),
                    "gradient: the replayed bdf step at t = " << t << " failed to converge");
    }
    if (model_) quadrature(i, k, alpha.data(), g, x, xn);
    next_.stepped(i, xn);
  }

  void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
               std::span<double> mu) override {
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const auto nn = static_cast<Eigen::Index>(ny_), npp = static_cast<Eigen::Index>(np_);
    // (not at an event instant: x_{i+1}'s kept Jacobian is after the events.)
    const double* kept = instants_.at(i + 1) ? nullptr : cache_.get(i + 1);
    const double* jp = kept;
    // y_{i+1}: from the forward run, the previous reverse step's state or
    // the last forward step, else replayed (read when not kept, and for q).
    auto next_state = [&]() -> const double* {
      if (use_forward_) return forward_states_.data() + i * ny_;
      const std::vector<double>* xn = next_.find(i);
      if (!xn) {
        tmp_.resize(kWindow * nx_);
        step(i, x, tmp_);
        xn = next_.find(i);
      }
      return xn->data();
    };
    if (!jp)  // [J | f_p] at y_{i+1} (the model's, with the quadrature)
      jp = newton_jac_->state_parameters(times_[i + 1], std::span<const double>(next_state(), ny_))
               .data();
    ++lin_;
    const Eigen::Map<const Eigen::MatrixXd> JP(jp, nn, nn + npp);
    // The quadrature's z row: m_z = λ_z, and (M − g J_y)ᵀ m_y = λ_y + g q_y m_z.
    double mz = 0.0;
    const double* b = lambda.data();
    if (model_) {
      mz = lambda[ny_];
      running_gradient(times_[i + 1], next_state());
      rhs_b_.resize(nn);
      for (std::size_t q = 0; q < ny_; ++q)
        rhs_b_[static_cast<Eigen::Index>(q)] = lambda[q] + g * qy_[q] * mz;
      b = rhs_b_.data();
    }
    const Eigen::VectorXd& m = transposed_solve(g, JP, b);
    if (!instants_.at(i)) next_.reversed(i, x);
    // Shift: λ_n[s] = λ[s + 1], λ_n[last] = 0, then distribute α_j m.
    for (int s = 0; s + 1 < kWindow; ++s)
      std::copy(lambda.begin() + (s + 1) * static_cast<std::ptrdiff_t>(nx_),
                lambda.begin() + (s + 2) * static_cast<std::ptrdiff_t>(nx_),
                lambda.begin() + s * static_cast<std::ptrdiff_t>(nx_));
    std::fill(lambda.begin() + (kWindow - 1) * static_cast<std::ptrdiff_t>(nx_), lambda.end(), 0.0);
    // The window enters through M Σ α_j y_j: a DAE's algebraic entries of
    // m do not reach it (M m).
    for (int j = 1; j <= k; ++j) {
      for (std::size_t q = 0; q < ny_; ++q)
        if (alg_.empty() || !alg_[q])
          lambda[static_cast<std::size_t>(j - 1) * nx_ + q] +=
              alpha[static_cast<std::size_t>(j - 1)] * m[static_cast<Eigen::Index>(q)];
      if (model_) lambda[static_cast<std::size_t>(j - 1) * nx_ + ny_] += alpha[static_cast<std::size_t>(j - 1)] * mz;
    }
    detail::add_transposed_product(JP, nn, npp, m.data(), g, mu.data());
    if (model_)
      for (std::size_t c = 0; c < np_; ++c) mu[c] += g * (qp_[c] * mz);
  }

  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
               std::span<const double> S, std::span<double> Sn,
               std::span<const double> P) override {
    if (m == 1) {
      tangent1(i, x, xn, S, Sn, P);
      return;
    }
    step(i, x, xn);
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_),
               mm = static_cast<Eigen::Index>(m);
    const detail::ConstRowMap Sm(S.data(), kWindow * nn, mm), Pm(P.data(), npp, mm);
    detail::RowMap Snm(Sn.data(), kWindow * nn, mm);
    const Eigen::MatrixXd& JP = jac_.state_parameters(times_[i + 1], xn.first(nx_));
    ++lin_;
    rhs_m_ = g * (JP.rightCols(npp) * Pm);
    if (alg_.empty()) {
      for (int j = 1; j <= k; ++j) rhs_m_ += alpha[static_cast<std::size_t>(j - 1)] * Sm.middleRows((j - 1) * nn, nn);
    } else {  // a DAE: (M − hβ J) S'[0] = M Σ_j α_j S[j−1] + hβ f_p P
      sum_m_.setZero(nn, mm);
      for (int j = 1; j <= k; ++j) sum_m_ += alpha[static_cast<std::size_t>(j - 1)] * Sm.middleRows((j - 1) * nn, nn);
      for (std::size_t q = 0; q < nx_; ++q)
        if (!alg_[q]) rhs_m_.row(static_cast<Eigen::Index>(q)) += sum_m_.row(static_cast<Eigen::Index>(q));
    }
    detail::stage_matrix(M_, g, JP.leftCols(nn), alg_);
    lu_.compute(M_);
    for (int s = kWindow - 1; s >= 1; --s) Snm.middleRows(s * nn, nn) = Sm.middleRows((s - 1) * nn, nn);
    Snm.topRows(nn) = lu_.solve(rhs_m_);
  }

  // tangent() with one direction (second_order_sweep's forward), without
  // Eigen's dynamic-size set-up: M S'[0] = Σ_j α_j S[j−1] + hβ f_p P with
  // [J | f_p] at y_{i+1} from the forward run's record (StoreAll), else
  // evaluated and kept for step i + 1's Newton (the same point: its start).
  void tangent1(std::size_t i, std::span<const double> x, std::span<double> xn,
                std::span<const double> S, std::span<double> Sn, std::span<const double> P) {
    step(i, x, xn);
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    // (not at an event instant: x_{i+1}'s kept Jacobian is after the events;
    // with the quadrature the kept ones are the model's, Newton's.)
    const double* jp = instants_.at(i + 1) || model_ ? nullptr : cache_.get(i + 1);
    if (!jp) {
      const std::span<const double> y = xn.first(nx_);
      jp = model_ ? jac_.state_parameters(times_[i + 1], y).data()
                  : start_.keep(i + 1, y, jac_.state_parameters(times_[i + 1], y)).data();
    }
    ++lin_;
    const Eigen::Map<const Eigen::MatrixXd> JP(jp, nn, nn + npp);
    solve_.factor_untransposed(g, JP);
    md_.resize(nn);
    for (std::size_t q = 0; q < nx_; ++q) {
      double r = 0.0;
      for (int j = 1; j <= k; ++j)
        r += alpha[static_cast<std::size_t>(j - 1)] * S[static_cast<std::size_t>(j - 1) * nx_ + q];
      if (!alg_.empty() && alg_[q]) r = 0.0;  // a DAE: M Σ_j α_j S[j−1]
      double fp = 0.0;
      for (std::size_t c = 0; c < np_; ++c) fp += jp[(nx_ + c) * nx_ + q] * P[c];
      md_[static_cast<Eigen::Index>(q)] = r + g * fp;
    }
    shift(S, Sn);
    const Eigen::VectorXd& s0 = solve_.solve(md_);
    for (std::size_t q = 0; q < nx_; ++q) Sn[q] = s0[static_cast<Eigen::Index>(q)];
  }

  // Second order: adjoint() at (y_{i+1} + εẏ_{i+1}, p + εṗ) with λ + ελ̇:
  //   Mᵀ ṁ = λ̇[0] + hβ J̇ᵀ m,  λ̇[j−1] += α_j ṁ,  μ̇ += hβ (f_pᵀ ṁ + ḟ_pᵀ m).
  void adjoint_tangent(std::size_t i, std::span<const double>, std::span<const double>,
                       std::span<const double> xn, std::span<const double> xndot,
                       std::span<const double> pdot, std::span<double> lambda,
                       std::span<double> lambda_dot, std::span<double> mu,
                       std::span<double> mu_dot) override {
    std::array<double, kBdfMaxOrder> alpha{};
    double g = 0.0;
    const int k = coefficients(i, alpha.data(), &g);
    const auto nn = static_cast<Eigen::Index>(nx_), npp = static_cast<Eigen::Index>(np_);
    if (!second_) second_.emplace(rhs_.system, p_);
    detail::SystemJacobianTangent& jt = *second_;
    jt.at(times_[i + 1], xn.first(nx_), xndot.first(nx_), pdot);
    ++lin_;
    solve_.factor(g, jt.jp());
    m_ = solve_.solve(Eigen::Map<const Eigen::VectorXd>(lambda.data(), nn));
    rd_ = Eigen::Map<const Eigen::VectorXd>(lambda_dot.data(), nn);
    detail::add_transposed_product(jt.jp_dot(), 0, nn, m_.data(), g, rd_.data());
    md_ = solve_.solve(rd_);
    // Shift both: λ_n[s] = λ[s + 1], λ_n[last] = 0, then distribute α_j m.
    for (std::span<double> l : {lambda, lambda_dot}) {
      for (int s = 0; s + 1 < kWindow; ++s)
        std::copy(l.begin() + (s + 1) * static_cast<std::ptrdiff_t>(nx_),
                  l.begin() + (s + 2) * static_cast<std::ptrdiff_t>(nx_),
                  l.begin() + s * static_cast<std::ptrdiff_t>(nx_));
      std::fill(l.begin() + (kWindow - 1) * static_cast<std::ptrdiff_t>(nx_), l.end(), 0.0);
    }
    for (int j = 1; j <= k; ++j)
      for (std::size_t q = 0; q < nx_; ++q) {
        if (!alg_.empty() && alg_[q]) continue;  // a DAE: M m, M ṁ (as adjoint())
        const double aj = alpha[static_cast<std::size_t>(j - 1)];
        lambda[static_cast<std::size_t>(j - 1) * nx_ + q] += aj * m_[static_cast<Eigen::Index>(q)];
        lambda_dot[static_cast<std::size_t>(j - 1) * nx_ + q] +=
            aj * md_[static_cast<Eigen::Index>(q)];
      }
    detail::add_transposed_product(jt.jp(), nn, npp, m_.data(), g, mu.data());
    detail::add_transposed_product(jt.jp(), nn, npp, md_.data(), g, mu_dot.data());
    detail::add_transposed_product(jt.jp_dot(), nn, npp, m_.data(), g, mu_dot.data());
  }

  std::int64_t rhs_evaluations() const override {
    return jac_.rhs_evaluations + (mjac_ ? mjac_->rhs_evaluations : 0);
  }
  std::int64_t linearizations() const override { return lin_; }

 private:
  /// [J | f_p] at step i's start y_i: tangent1's at the same point (its
  /// y_{i+1}, bitwise) when it evaluated one, else evaluated.
  const Eigen::MatrixXd& start_jacobian(std::size_t i, std::span<const double> y) {
    if (const Eigen::MatrixXd* kept = model_ ? nullptr : start_.find(i, y)) return *kept;
    return newton_jac_->state_parameters(times_[i], y);
  }
  /// Newton's Jacobian: the System's, or with the quadrature (a running
  /// cost) the model's alone — the plan's run (plan_bdf) on
  /// System::without_running_cost(), so that the steps' y are its bits.
  detail::SystemJacobian& newton_jacobian(const System& sys, std::span<const double> p,
                                          bool quadrature) {
    if (!quadrature) return *(newton_jac_ = &jac_);
    model_.emplace(sys.without_running_cost());
    mrhs_.emplace(detail::SystemRhs{*model_});
    mjac_.emplace(*mrhs_, p, model_->n_states());
    return *(newton_jac_ = &*mjac_);
  }
  /// z_{i+1} = Σ_j α_j z_{i+1−j} + hβ q(t_{i+1}, y_{i+1}): the running cost
  /// by the step's own BDF formula along the accepted y (z feeds nothing
  /// back), exactly the equation adjoint() differentiates.
  void quadrature(std::size_t i, int k, const double* alpha, double g, std::span<const double> x,
                  std::span<double> xn) {
    double z = 0.0;
    for (int j = 1; j <= k; ++j) z += alpha[j - 1] * x[static_cast<std::size_t>(j - 1) * nx_ + ny_];
    xn[ny_] = z;
    faug_.resize(nx_);
    jac_.rhs(times_[i + 1], xn.first(nx_), faug_);
    xn[ny_] = z + g * faug_[ny_];
  }
  /// q_y (qy_, n_x entries, z's 0) and q_p (qp_) at (t, y): one vector–
  /// Jacobian product of the System's rows with the seed on z's.
  void running_gradient(double t, const double* y) {
    xq_.assign(y, y + ny_);
    xq_.push_back(0.0);
    seed_.assign(nx_, 0.0);
    seed_[ny_] = 1.0;
    qy_.resize(nx_);
    qp_.assign(np_, 0.0);
    if (!qlin_) qlin_.emplace(rhs_.system);
    qlin_->at(t, xq_, p_);
    qlin_->vjp(seed_, qy_, qp_);
  }
  /// m = (M − g J)⁻ᵀ λ: a large System with the sparse strategy by the
  /// sparse LU on its pattern (decided at the first call, for the whole
  /// run), else the dense one.
  /// With the quadrature: the model's (M − g J_y)ᵀ, n × n.
  const Eigen::VectorXd& transposed_solve(double g, const Eigen::Map<const Eigen::MatrixXd>& JP,
                                          const double* lambda) {
    const Eigen::Map<const Eigen::VectorXd> b(lambda, static_cast<Eigen::Index>(ny_));
    if (!sparse_decided_) {
      sparse_decided_ = true;
      const System& sys = model_ ? *model_ : rhs_.system;
      if (ny_ >= detail::SparseTransposedSolve::kMinStates &&
          sys.strategy() == JacobianStrategy::Sparse) {
        // The pattern is the System's (detected at its first linearization;
        // the point given here is not read again).
        const std::vector<double> x0(sys.n_states(), 0.0);
        sparse_.emplace(sys.sparsity(times_[0], x0, p_), ny_, sys.n_model_states(),
                        detail::mass_mask(sys));
      }
    }
    if (sparse_) {
      sparse_->factor(g, JP.data());
      return sparse_->solve(b);
    }
    detail::TransposedSolve& solve = ysolve_ ? *ysolve_ : solve_;
    solve.factor(g, JP);
    return solve.solve(b);
  }
  /// Order, α_j and hβ of step i.
  int coefficients(std::size_t i, double* alpha, double* g) const {
    const int k = orders_[i];
    std::array<double, kBdfMaxOrder + 1> tau{};
    for (int m = 0; m <= k; ++m) tau[static_cast<std::size_t>(m)] = times_[i + 1 - static_cast<std::size_t>(m)];
    *g = bdf_coefficients(tau, k, alpha);
    return k;
  }
  // xn's slots 1 … 4 = x's slots 0 … 3 (xn may not alias x).
  void shift(std::span<const double> x, std::span<double> xn) const {
    for (int s = kWindow - 1; s >= 1; --s)
      std::copy(x.begin() + (s - 1) * static_cast<std::ptrdiff_t>(nx_),
                x.begin() + s * static_cast<std::ptrdiff_t>(nx_),
                xn.begin() + s * static_cast<std::ptrdiff_t>(nx_));
  }

  detail::SystemRhs rhs_;
  std::size_t nx_, np_;
  std::span<const double> p_;
  detail::SystemJacobian jac_;
  // With a running cost: the model alone (newton_jacobian), whose Newton
  // gives y and whose [J | f_p] the reverse steps take (z by quadrature).
  std::optional<System> model_;
  std::optional<detail::SystemRhs> mrhs_;
  std::optional<detail::SystemJacobian> mjac_;
  detail::SystemJacobian* newton_jac_ = nullptr;
  detail::ModifiedNewton<detail::SystemRhs> newton_;
  std::size_t ny_;  // Newton's states: n_x, or n with the quadrature
  std::span<const double> times_;
  std::span<const int> orders_;
  std::vector<double> atol_;
  double rtol_, kappa_;
  std::vector<double> r_, pred_, w_, f_, tmp_;
  detail::NextState next_;

 public:
  detail::Instants instants_;  // the plan's event instants (make_bdf_scheme)

 private:
  detail::StepCache cache_;
  detail::TransposedSolve solve_;
  std::optional<detail::TransposedSolve> ysolve_;  // the quadrature's n × n
  std::vector<double> faug_, xq_, seed_, qy_, qp_;
  std::optional<Linearization> qlin_;  // running_gradient's, on the System
  Eigen::VectorXd rhs_b_;
  std::optional<detail::SparseTransposedSolve> sparse_;  // transposed_solve's choice
  bool sparse_decided_ = false;
  std::span<const std::uint8_t> alg_;  // a DAE's mass matrix (empty: an ODE)
  std::span<const double> forward_states_;
  bool use_forward_ = false;
  Eigen::MatrixXd rhs_m_, M_, sum_m_;
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
  std::int64_t lin_ = 0;
  // Second order (adjoint_tangent; tangent1's [J | f_p] at y_{i+1}, kept
  // for step i + 1's start).
  std::optional<detail::SystemJacobianTangent> second_;
  detail::StartJacobian start_;
  Eigen::VectorXd m_, md_, rd_;
};

}  // namespace

void BdfForwardRecord::clear() {
  states.clear();
  jacobians.clear();
}
void BdfForwardRecord::trim() {
  if (states.capacity() * sizeof(double) > kKeepBytes) std::vector<double>().swap(states);
  if (jacobians.capacity() * sizeof(double) > kKeepBytes) std::vector<double>().swap(jacobians);
}
BdfForwardRecord& BdfForwardRecord::of_this_thread() {
  thread_local BdfForwardRecord r;
  return r;
}

std::unique_ptr<Scheme> make_bdf_scheme(const System& system, std::span<const double> p,
                                        const StepPlan& steps, const IntegratorOptions& options,
                                        bool keep_step_data, const BdfForwardRecord* record) {
  // A running cost without events: z by quadrature along the model's steps
  // (the plan's run; with events the driver integrates x = (y, z)).
  const bool quadrature = system.has_running() && steps.events().empty();
  auto scheme = std::make_unique<Bdf>(system, p, steps.times(), steps.orders(), options,
                                      keep_step_data, steps.events().empty() ? record : nullptr,
                                      quadrature);
  scheme->instants_.set(steps);
  return scheme;
}

namespace detail {

/// The adaptive bdf run that chooses the steps and orders
/// (plan_steps). Replay-identical steps (BdfStepper::set_replay):
/// whatever the schedule, the accepted states are those the scheme's
/// replays compute, so a StoreAll adjoint keeps them (and the step
/// Jacobians, up to kForwardRecordBytes) instead of replaying the run.
void plan_bdf(const System& system, std::span<const double> p, std::span<double> x, double t0,
              double t1, const IntegratorOptions& options, std::span<const double> stops,
              Summary& s, std::vector<int>& orders, BdfForwardRecord* record) {
  const SystemRhs rhs{system};
  const std::size_t nx = system.n_states();
  BdfStepper<SystemRhs> st(rhs, p, nx, options.newton_tol, options.newton_max_iterations);
  st.set_replay(replay_kappa(options));
  bool keep_jacobians = record != nullptr;
  auto ignore = [](std::size_t, double, std::span<const double>) {};
  run_bdf(st, t0, t1, x, options, stops, ignore, s, [&](double, int k) {
    orders.push_back(k);
    if (!record) return;
    const std::span<const double> y = st.solution();
    record->states.insert(record->states.end(), y.begin(), y.end());
    // A large System with coloured Jacobians (Newton's sparse LU): its
    // [J | f_p] is cheap to evaluate again and dense to keep (n² per step).
    if (keep_jacobians && st.model_jacobian().newton_factorization()) keep_jacobians = false;
    if (!keep_jacobians) return;
    const Eigen::MatrixXd& jp = st.step_jacobian();
    record->jacobians.insert(record->jacobians.end(), jp.data(), jp.data() + jp.size());
    if (record->jacobians.size() * sizeof(double) > kForwardRecordBytes) {
      keep_jacobians = false;
      std::vector<double>().swap(record->jacobians);
    }
  });
  s.rhs_evaluations = st.model_jacobian().rhs_evaluations;
}

}  // namespace detail

}  // namespace costate::ode
