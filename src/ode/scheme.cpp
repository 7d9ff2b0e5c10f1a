#include "costate/ode/scheme.hpp"

#include <algorithm>

#include "costate/core/error.hpp"
#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/snapshot_store.hpp"

namespace costate::ode {

namespace {

/// Explicit RK on a System: x = (y, z), stages kept in flat buffers.
class ExplicitRk final : public Scheme {
 public:
  ExplicitRk(const System& sys, Method method, std::span<const double> p,
             std::span<const double> times)
      : sys_(sys), tab_(explicit_tableau(method)), p_(p), times_(times), nx_(sys.n_states()),
        s_(static_cast<std::size_t>(tab_.stages)), Y_(nx_), K_(s_ * nx_), Kbar_(s_ * nx_),
        ybar_(nx_) {
    COSTATE_CHECK(times.size() >= 2, "explicit RK scheme: needs at least one step");
    for (std::size_t j = 0; j < s_; ++j) lins_.emplace_back(sys);
  }

  std::size_t state_size() const override { return nx_; }
  std::size_t steps() const override { return times_.size() - 1; }

  void step(std::size_t i, std::span<const double> x, std::span<double> xn) override {
    const double t = times_[i], h = times_[i + 1] - t;
    for (std::size_t j = 0; j < s_; ++j) {
      stage(j, h, x, [&](std::size_t k) { return K_.data() + k * nx_; });
      sys_.rhs(t + tab_.c[j] * h, Y_, p_, std::span<double>(K_.data() + j * nx_, nx_));
    }
    rhs_ += static_cast<std::int64_t>(s_);
    finish(h, x, xn, [&](std::size_t k) { return K_.data() + k * nx_; });
  }

  void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
               std::span<double> mu) override {
    const double t = times_[i], h = times_[i + 1] - t;
    auto slope = [&](std::size_t k) { return lins_[k].value().data(); };
    for (std::size_t j = 0; j < s_; ++j) {
      stage(j, h, x, slope);
      lins_[j].at(t + tab_.c[j] * h, Y_, p_);
    }
    lin_ += static_cast<std::int64_t>(s_);
    for (std::size_t j = 0; j < s_; ++j) {
      const double c = h * tab_.b[j];
      double* kb = Kbar_.data() + j * nx_;
      for (std::size_t q = 0; q < nx_; ++q) kb[q] = c * lambda[q];
    }
    // λ ← λ + Σ Ȳ_j (the K̄_j above hold the incoming λ).
    for (std::size_t j = s_; j-- > 0;) {
      lins_[j].vjp(std::span<const double>(Kbar_.data() + j * nx_, nx_), ybar_, mu);
      for (std::size_t q = 0; q < nx_; ++q) lambda[q] += ybar_[q];
      for (std::size_t k = 0; k < j; ++k) {
        const double a = tab_.at(static_cast<int>(j), static_cast<int>(k));
        if (a == 0.0) continue;
        const double c = h * a;
        double* kb = Kbar_.data() + k * nx_;
        for (std::size_t q = 0; q < nx_; ++q) kb[q] += c * ybar_[q];
      }
    }
  }

  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
               std::span<const double> S, std::span<double> Sn,
               std::span<const double> P) override {
    const double t = times_[i], h = times_[i + 1] - t;
    if (tlins_.empty())
      for (std::size_t j = 0; j < s_; ++j) tlins_.emplace_back(sys_, true);
    const std::size_t w = nx_ * m;
    Ydot_.resize(w);
    Kdot_.resize(s_ * w);
    auto slope = [&](std::size_t k) { return tlins_[k].value().data(); };
    for (std::size_t j = 0; j < s_; ++j) {
      stage(j, h, x, slope);
      std::copy(S.begin(), S.begin() + static_cast<std::ptrdiff_t>(w), Ydot_.begin());
      for (std::size_t k = 0; k < j; ++k) {
        const double a = tab_.at(static_cast<int>(j), static_cast<int>(k));
        if (a == 0.0) continue;
        const double c = h * a;
        const double* kd = Kdot_.data() + k * w;
        for (std::size_t q = 0; q < w; ++q) Ydot_[q] += c * kd[q];
      }
      tlins_[j].at(t + tab_.c[j] * h, Y_, p_);
      tlins_[j].jvp_many(m, Ydot_, P, std::span<double>(Kdot_.data() + j * w, w));
    }
    lin_ += static_cast<std::int64_t>(s_);
    finish(h, x, xn, slope);
    std::copy(S.begin(), S.begin() + static_cast<std::ptrdiff_t>(w), Sn.begin());
    for (std::size_t j = 0; j < s_; ++j) {
      const double c = h * tab_.b[j];
      if (c == 0.0) continue;
      const double* kd = Kdot_.data() + j * w;
      for (std::size_t q = 0; q < w; ++q) Sn[q] += c * kd[q];
    }
  }

  std::int64_t rhs_evaluations() const override { return rhs_; }
  std::int64_t linearizations() const override { return lin_; }

 private:
  // Y_ = x + h Σ_{k<j} a_jk K_k (one fused pass over the state).
  template <class Slope>
  void stage(std::size_t j, double h, std::span<const double> x, Slope slope) {
    combine(x, Y_, j, h, [&](std::size_t k) { return tab_.at(static_cast<int>(j), static_cast<int>(k)); },
            slope);
  }
  // xn = x + h Σ_j b_j K_j.
  template <class Slope>
  void finish(double h, std::span<const double> x, std::span<double> xn, Slope slope) {
    combine(x, xn, s_, h, [&](std::size_t k) { return tab_.b[k]; }, slope);
  }
  template <class Coef, class Slope>
  void combine(std::span<const double> x, std::span<double> out, std::size_t count, double h,
               Coef coef, Slope slope) {
    double c[16];
    const double* k[16];
    std::size_t terms = 0;
    for (std::size_t j = 0; j < count; ++j) {
      const double a = coef(j);
      if (a == 0.0) continue;
      c[terms] = h * a;
      k[terms++] = slope(j);
    }
    switch (terms) {
      case 0:
        for (std::size_t q = 0; q < nx_; ++q) out[q] = x[q];
        return;
      case 1:
        for (std::size_t q = 0; q < nx_; ++q) out[q] = x[q] + c[0] * k[0][q];
        return;
      case 2:
        for (std::size_t q = 0; q < nx_; ++q) out[q] = x[q] + c[0] * k[0][q] + c[1] * k[1][q];
        return;
      default:
        for (std::size_t q = 0; q < nx_; ++q) {
          double v = x[q];
          for (std::size_t t = 0; t < terms; ++t) v += c[t] * k[t][q];
          out[q] = v;
        }
    }
  }

  const System& sys_;
  ButcherTableau tab_;
  std::span<const double> p_, times_;
  std::size_t nx_, s_;
  std::vector<double> Y_, K_, Kbar_, ybar_, Ydot_, Kdot_;
  std::vector<Linearization> lins_, tlins_;
  std::int64_t rhs_ = 0, lin_ = 0;
};

/// The reverse sweep's state and the checkpoint adapter in one: the Ops of
/// reverse_sweep (advance / save / restore / reverse_step / index).
class AdjointOps {
 public:
  AdjointOps(const System& sys, Scheme& scheme, std::span<const std::int64_t> obs_at,
             std::span<const double> x0, std::span<const double> p, SnapshotStore& store)
      : sys_(sys), scheme_(scheme), obs_at_(obs_at), p_(p), store_(store),
        nx_(scheme.state_size()), n_(sys.n_model_states()), l_(scheme.steps()),
        cur_(x0.begin(), x0.end()), next_(nx_), lambda_(nx_, 0.0), mu_(p.size(), 0.0) {}

  void advance() {
    scheme_.step(static_cast<std::size_t>(i_), cur_, next_);
    cur_.swap(next_);
    ++i_;
  }
  void save(std::size_t s) {
    store_.save(s, cur_);
    if (slot_step_.size() <= s) slot_step_.resize(s + 1);
    slot_step_[s] = i_;
  }
  void restore(std::size_t s) {
    store_.load(s, cur_);
    i_ = slot_step_[s];
  }
  std::int64_t index() const { return i_; }
  void reverse_step() {
    const auto i = static_cast<std::size_t>(i_);
    if (i + 1 == l_) {
      // Seed at x_l: λ = (∂g/∂y, 1 for z), μ = ∂g/∂p, plus an observation at t_l.
      scheme_.step(i, cur_, next_);
      std::fill(lambda_.begin(), lambda_.end(), 0.0);
      J_ += sys_.terminal_gradient(next_, p_, lambda_, mu_);
      if (sys_.has_running()) {
        J_ += next_[n_];
        lambda_[n_] = 1.0;
      }
      observe(l_, next_);
    }
    scheme_.adjoint(i, cur_, lambda_, mu_);
    observe(i, cur_);
  }

  double objective() const { return J_; }
  const std::vector<double>& lambda() const { return lambda_; }
  const std::vector<double>& mu() const { return mu_; }

 private:
  void observe(std::size_t i, std::span<const double> x) {
    const std::int64_t k = obs_at_[i];
    if (k >= 0) J_ += sys_.observation_gradient(static_cast<std::size_t>(k), x, p_, lambda_, mu_);
  }

  const System& sys_;
  Scheme& scheme_;
  std::span<const std::int64_t> obs_at_;
  std::span<const double> p_;
  SnapshotStore& store_;
  std::size_t nx_, n_, l_;
  std::vector<double> cur_, next_, lambda_, mu_;
  std::vector<std::int64_t> slot_step_;
  std::int64_t i_ = 0;
  double J_ = 0.0;
};

}  // namespace

std::unique_ptr<Scheme> make_explicit_rk_scheme(const System& system, Method method,
                                                std::span<const double> p,
                                                std::span<const double> times) {
  return std::make_unique<ExplicitRk>(system, method, p, times);
}

SweepOutcome adjoint_sweep(const System& system, Scheme& scheme, const Checkpointing& checkpointing,
                           std::span<const std::int64_t> obs_at, std::span<const double> x0,
                           std::span<const double> p) {
  const std::size_t l = scheme.steps();
  COSTATE_CHECK_EQ(obs_at.size(), l + 1, "adjoint_sweep: obs_at needs one entry per step index");
  COSTATE_CHECK_EQ(x0.size(), scheme.state_size(), "adjoint_sweep: x0 has the wrong size");
  std::size_t disk_slots = 0;
  std::string disk_path;
  if (const auto* ml = std::get_if<Multilevel>(&checkpointing)) {
    disk_slots = static_cast<std::size_t>(ml->disk);
    disk_path = ml->path;
  }
  SnapshotStore store(scheme.state_size(), disk_slots, disk_path);
  AdjointOps ops(system, scheme, obs_at, x0, p, store);
  SweepOutcome out;
  out.checkpoints = reverse_sweep(checkpointing, ops, static_cast<std::int64_t>(l));
  out.checkpoints.disk_snapshots = store.disk_writes();
  out.objective = ops.objective();
  out.wrt_parameters = ops.mu();
  out.wrt_initial_state.assign(ops.lambda().begin(),
                               ops.lambda().begin() +
                                   static_cast<std::ptrdiff_t>(system.n_model_states()));
  out.rhs_evaluations = scheme.rhs_evaluations();
  out.linearizations = scheme.linearizations();
  return out;
}

SweepOutcome tangent_sweep(const System& system, Scheme& scheme,
                           std::span<const std::int64_t> obs_at, std::span<const double> x0,
                           std::span<const double> p) {
  const std::size_t l = scheme.steps(), nx = scheme.state_size();
  const std::size_t n = system.n_model_states(), np = p.size(), m = np + n;
  COSTATE_CHECK_EQ(obs_at.size(), l + 1, "tangent_sweep: obs_at needs one entry per step index");
  COSTATE_CHECK_EQ(x0.size(), nx, "tangent_sweep: x0 has the wrong size");
  std::vector<double> grad(m, 0.0), gy(n), gp(np);
  double J = 0.0;
  std::int64_t passes = 0;
  std::vector<double> x(nx), xn(nx), S, Sn, P;
  for (std::size_t first = 0; first < std::max<std::size_t>(m, 1); first += kTangentBlock) {
    ++passes;
    const std::size_t b = std::min(kTangentBlock, m - std::min(m, first));
    const std::size_t w = std::max<std::size_t>(b, 1);
    S.assign(nx * w, 0.0);
    Sn.assign(nx * w, 0.0);
    P.assign(np * w, 0.0);
    for (std::size_t d = 0; d < b; ++d) {
      const std::size_t dir = first + d;
      if (dir < np)
        P[dir * w + d] = 1.0;
      else
        S[(dir - np) * w + d] = 1.0;
    }
    std::copy(x0.begin(), x0.end(), x.begin());
    double Jb = 0.0;
    // Adds a term's value and its derivative along the block's directions.
    auto add = [&](double value) {
      Jb += value;
      for (std::size_t d = 0; d < b; ++d) {
        double acc = 0.0;
        for (std::size_t q = 0; q < n; ++q) acc += gy[q] * S[q * w + d];
        for (std::size_t j = 0; j < np; ++j) acc += gp[j] * P[j * w + d];
        grad[first + d] += acc;
      }
    };
    auto observe = [&](std::size_t i) {
      const std::int64_t k = obs_at[i];
      if (k < 0) return;
      std::fill(gy.begin(), gy.end(), 0.0);
      std::fill(gp.begin(), gp.end(), 0.0);
      add(system.observation_gradient(static_cast<std::size_t>(k), x, p, gy, gp));
    };
    observe(0);
    for (std::size_t i = 0; i < l; ++i) {
      scheme.tangent(i, x, xn, w, S, Sn, P);
      x.swap(xn);
      S.swap(Sn);
      observe(i + 1);
    }
    if (system.has_terminal()) {
      std::fill(gy.begin(), gy.end(), 0.0);
      std::fill(gp.begin(), gp.end(), 0.0);
      add(system.terminal_gradient(x, p, gy, gp));
    }
    if (system.has_running()) {
      Jb += x[n];
      for (std::size_t d = 0; d < b; ++d) grad[first + d] += S[n * w + d];
    }
    J = Jb;
  }
  SweepOutcome out;
  out.objective = J;
  out.wrt_parameters.assign(grad.begin(), grad.begin() + static_cast<std::ptrdiff_t>(np));
  out.wrt_initial_state.assign(grad.begin() + static_cast<std::ptrdiff_t>(np), grad.end());
  out.checkpoints.steps = static_cast<std::int64_t>(l);
  out.checkpoints.forward_steps = passes * static_cast<std::int64_t>(l);
  out.rhs_evaluations = scheme.rhs_evaluations();
  out.linearizations = scheme.linearizations();
  return out;
}

}  // namespace costate::ode
