#include "costate/ode/scheme.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"
#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/snapshot_store.hpp"
#include "ode/dae.hpp"

namespace costate::ode {

namespace {

/// Explicit RK on a System: x = (y, z), stages kept in flat buffers.
class ExplicitRk final : public Scheme {
 public:
  ExplicitRk(const System& sys, Method method, std::span<const double> p,
             std::span<const double> times)
      : sys_(sys), second_order_(sys.model().second_order()), tab_(explicit_tableau(method)), p_(p), times_(times), nx_(sys.n_states()),
        s_(static_cast<std::size_t>(tab_.stages)), Y_(nx_), K_(s_ * nx_), Kbar_(s_ * nx_),
        ybar_(nx_) {
    COSTATE_CHECK(times.size() >= 2, "explicit RK scheme: needs at least one step");
    COSTATE_CHECK(s_ <= kMaxStages, "explicit RK scheme: at most " << kMaxStages << " stages");
    tangent1_ = tangent1_for();
    for (std::size_t j = 0; j < s_; ++j) lins_.emplace_back(sys);
    // f at each stage: Linearization::value() of a non-tangent linearization
    // is always ready and stays at one address.
    for (std::size_t j = 0; j < s_; ++j) vals_.push_back(lins_[j].value().data());
    // The non-zero a_jk of each stage row and the non-zero b_j, once.
    a_first_.push_back(0);
    for (std::size_t j = 0; j < s_; ++j) {
      for (std::size_t k = 0; k < j; ++k) {
        const double a = tab_.at(static_cast<int>(j), static_cast<int>(k));
        if (a != 0.0) a_terms_.push_back({k, a});
      }
      a_first_.push_back(a_terms_.size());
    }
    for (std::size_t j = 0; j < s_; ++j)
      if (tab_.b[j] != 0.0) b_terms_.push_back({j, tab_.b[j]});
    // The same a_jk by columns: for stage k, the later stages j > k with
    // a_jk ≠ 0, j decreasing (the order the reverse loop meets them).
    col_first_.push_back(0);
    for (std::size_t k = 0; k < s_; ++k) {
      for (std::size_t j = s_; j-- > k + 1;) {
        const double a = tab_.at(static_cast<int>(j), static_cast<int>(k));
        if (a != 0.0) col_terms_.push_back({j, a});
      }
      col_first_.push_back(col_terms_.size());
    }
  }

  std::size_t state_size() const override { return nx_; }
  std::size_t steps() const override { return times_.size() - 1; }

  void step(std::size_t i, std::span<const double> x, std::span<double> xn) override {
    with_size([&](auto nx) { step_impl(i, x, xn, nx); });
  }

  void adjoint(std::size_t i, std::span<const double> x, std::span<double> lambda,
               std::span<double> mu) override {
    with_size([&](auto nx) { adjoint_impl(i, x, lambda, mu, nx); });
  }
  void tangent(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
               std::span<const double> S, std::span<double> Sn,
               std::span<const double> P) override {
    // One direction on a second-order System (second_order_sweep's
    // forward): the model on Dual<double, 1> directly, tangent1_impl on the
    // state size chosen once — a sibling call with this call's arguments in
    // place (the spans passed on the stack are not copied: copying them
    // read each as one 16-byte load of the caller's two 8-byte stores, a
    // store-forwarding stall that perf put at a third of a small
    // model's tangent step), and no frame here (the general case is
    // tangent_general's).
    if (m == 1 && second_order_) return (this->*tangent1_)(i, x, xn, m, S, Sn, P);
    tangent_general(i, x, xn, m, S, Sn, P);
  }
  [[gnu::noinline]] void tangent_general(std::size_t i, std::span<const double> x,
                                         std::span<double> xn, std::size_t m,
                                         std::span<const double> S, std::span<double> Sn,
                                         std::span<const double> P) {
    with_size([&](auto nx) { tangent_impl(i, x, xn, m, S, Sn, P, nx); });
  }

  void adjoint_tangent(std::size_t i, std::span<const double> x, std::span<const double> xdot,
                       std::span<const double>, std::span<const double>,
                       std::span<const double> pdot, std::span<double> lambda,
                       std::span<double> lambda_dot, std::span<double> mu,
                       std::span<double> mu_dot) override {
    if (dense_at_ != nullptr && std::equal(pdot.begin(), pdot.end(), spdot_.begin(), spdot_.end())) {
      // The one-pass dense linearizations, seeded with this ṗ (set up by
      // the first step below): dense_adjoint_tangent<N, Z, L>.
      const double t = times_[i], h = times_[i + 1] - t;
      (this->*dense_at_)(t, h, x, xdot, lambda, lambda_dot, mu, mu_dot);
      return;
    }
    with_size([&](auto nx) { adjoint_tangent_impl(i, x, xdot, pdot, lambda, lambda_dot, mu, mu_dot, nx); });
  }

  std::int64_t rhs_evaluations() const override { return rhs_; }
  std::int64_t linearizations() const override { return lin_; }

 private:
  template <class Nx>
  void tangent_impl(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t m,
                    std::span<const double> S, std::span<double> Sn, std::span<const double> P,
                    Nx nx) {
    const double t = times_[i], h = times_[i + 1] - t;
    if (tlins_.empty())
      for (std::size_t j = 0; j < s_; ++j) tlins_.emplace_back(sys_, true);
    const std::size_t w = nx_ * m;
    Ydot_.resize(w);
    Kdot_.resize(s_ * w);
    auto slope = [&](std::size_t k) { return tlins_[k].value().data(); };
    for (std::size_t j = 0; j < s_; ++j) {
      stage(j, h, x, slope, nx);
      std::copy(S.begin(), S.begin() + static_cast<std::ptrdiff_t>(w), Ydot_.begin());
      for (std::size_t e = a_first_[j]; e < a_first_[j + 1]; ++e) {
        const double c = h * a_terms_[e].a;
        const double* kd = Kdot_.data() + a_terms_[e].k * w;
        for (std::size_t q = 0; q < w; ++q) Ydot_[q] += c * kd[q];
      }
      tlins_[j].at(t + tab_.c[j] * h, Y_, p_);
      tlins_[j].jvp_many(m, Ydot_, P, std::span<double>(Kdot_.data() + j * w, w));
    }
    lin_ += static_cast<std::int64_t>(s_);
    finish(h, x, xn, slope, nx);
    std::copy(S.begin(), S.begin() + static_cast<std::ptrdiff_t>(w), Sn.begin());
    for (std::size_t j = 0; j < s_; ++j) {
      const double c = h * tab_.b[j];
      if (c == 0.0) continue;
      const double* kd = Kdot_.data() + j * w;
      for (std::size_t q = 0; q < w; ++q) Sn[q] += c * kd[q];
    }
  }

  // tangent_impl with m = 1 on a second-order System, without the
  // Linearizations: each stage one Dual<double, 1> pass of the model at
  // (Y_j + εẎ_j, p + εṗ), Y_j and Ẏ_j formed straight into the pass's
  // inputs (combine_to with the Dual<double, 1> stride; the z entry, which
  // the model does not read, holds its own combination), its value and
  // ε-part kept as K_j, K̇_j. The operations of tangent_impl in the same
  // order (the same bits: its jvp_many is this pass too, value() its value
  // part; Ṡ sums the non-zero b_j as finish() does — tangent_impl skips a
  // zero h b_j, the same terms unless h b_j underflows to 0).
  template <class Nx>
  void tangent1_impl(std::size_t i, std::span<const double> x, std::span<double> xn,
                     std::span<const double> S, std::span<double> Sn,
                     std::span<const double> P, Nx nx) {
    using Dual1 = detail::SystemModel::Dual1;
    static_assert(sizeof(Dual1) == 2 * sizeof(double));
    const double t = times_[i], h = times_[i + 1] - t;
    const std::size_t np = P.size();
    if (yd1_.size() != nx_) {
      yd1_.resize(nx_);
      pd1_.resize(np);
      od1_.resize(nx_);
      Kdot_.resize(s_ * nx_);
    }
    if (Kdot_.size() < s_ * nx_) Kdot_.resize(s_ * nx_);
    for (std::size_t j = 0; j < np; ++j) pd1_[j] = Dual1(p_[j], {P[j]});
    auto slope = [&](std::size_t k) { return K_.data() + k * nx_; };
    auto slope_dot = [&](std::size_t k) { return Kdot_.data() + k * nx_; };
    double* yv = &yd1_[0].value();
    double* yt = &yd1_[0].tangent(0);
    for (std::size_t j = 0; j < s_; ++j) {
      const Term* a = a_terms_.data() + a_first_[j];
      const std::size_t terms = a_first_[j + 1] - a_first_[j];
      combine_to<2>(x, yv, a, terms, h, slope, nx);
      combine_to<2>(S, yt, a, terms, h, slope_dot, nx);
      sys_.model().rhs(t + tab_.c[j] * h, std::span<const Dual1>(yd1_),
                       std::span<const Dual1>(pd1_), std::span<Dual1>(od1_));
      double* k = K_.data() + j * nx_;
      double* kd = Kdot_.data() + j * nx_;
      for (std::size_t q = 0; q < nx; ++q) {
        k[q] = od1_[q].value();
        kd[q] = od1_[q].tangent(0);
      }
    }
    lin_ += static_cast<std::int64_t>(s_);
    finish(h, x, xn, slope, nx);
    finish(h, S, Sn, slope_dot, nx);
  }

  // tangent1_impl for nx_ (with_size's choice, made once).
  // (tangent()'s parameters, m = 1 included: the call from there is a jump.)
  using Tangent1 = void (ExplicitRk::*)(std::size_t, std::span<const double>, std::span<double>,
                                        std::size_t, std::span<const double>, std::span<double>,
                                        std::span<const double>);
  template <std::size_t Nx>
  void tangent1_on(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t,
                   std::span<const double> S, std::span<double> Sn, std::span<const double> P) {
    tangent1_impl(i, x, xn, S, Sn, P, std::integral_constant<std::size_t, Nx>{});
  }
  void tangent1_any(std::size_t i, std::span<const double> x, std::span<double> xn, std::size_t,
                    std::span<const double> S, std::span<double> Sn, std::span<const double> P) {
    tangent1_impl(i, x, xn, S, Sn, P, nx_);
  }
  Tangent1 tangent1_for() const {
    switch (nx_) {
      case 1: return &ExplicitRk::tangent1_on<1>;
      case 2: return &ExplicitRk::tangent1_on<2>;
      case 3: return &ExplicitRk::tangent1_on<3>;
      case 4: return &ExplicitRk::tangent1_on<4>;
      default: return &ExplicitRk::tangent1_any;
    }
  }

  // Second order: adjoint() with every stage at (Y_j + εẎ_j, p + εṗ):
  // Ẏ_j = ẋ + h Σ a_jk K̇_k, K̇_j = ḟ(Y_j); the reverse loop of adjoint()
  // on (value, ε-part) pairs.
  template <class Nx>
  void adjoint_tangent_impl(std::size_t i, std::span<const double> x,
                            std::span<const double> xdot, std::span<const double> pdot,
                            std::span<double> lambda, std::span<double> lambda_dot,
                            std::span<double> mu, std::span<double> mu_dot, Nx nx) {
    const double t = times_[i], h = times_[i + 1] - t;
    if (slins_.empty()) {
      for (std::size_t j = 0; j < s_; ++j) slins_.emplace_back(sys_);
      Ydot_.resize(nx_);
      Kbard_.resize(s_ * nx_);
      ybard_.resize(nx_);
    }
    Ydot_.resize(nx_);
    auto slope = [&](std::size_t k) { return slins_[k].value().data(); };
    auto slope_dot = [&](std::size_t k) { return slins_[k].value_dot().data(); };
    for (std::size_t j = 0; j < s_; ++j) {
      stage(j, h, x, slope, nx);
      combine(xdot, Ydot_, a_terms_.data() + a_first_[j], a_first_[j + 1] - a_first_[j], h,
              slope_dot, nx);
      slins_[j].at(t + tab_.c[j] * h, Y_, Ydot_, p_, pdot);
    }
    lin_ += static_cast<std::int64_t>(s_);
    for (std::size_t j = 0; j < s_; ++j) {
      const double c = h * tab_.b[j];
      double* kb = Kbar_.data() + j * nx_;
      double* kbd = Kbard_.data() + j * nx_;
      for (std::size_t q = 0; q < nx; ++q) {
        kb[q] = c * lambda[q];
        kbd[q] = c * lambda_dot[q];
      }
    }
    for (std::size_t j = s_; j-- > 0;) {
      slins_[j].vjp(std::span<const double>(Kbar_.data() + j * nx_, nx_),
                    std::span<const double>(Kbard_.data() + j * nx_, nx_), ybar_, ybard_, mu,
                    mu_dot);
      for (std::size_t q = 0; q < nx; ++q) {
        lambda[q] += ybar_[q];
        lambda_dot[q] += ybard_[q];
      }
      for (std::size_t e = a_first_[j]; e < a_first_[j + 1]; ++e) {
        const double c = h * a_terms_[e].a;
        double* kb = Kbar_.data() + a_terms_[e].k * nx_;
        double* kbd = Kbard_.data() + a_terms_[e].k * nx_;
        for (std::size_t q = 0; q < nx; ++q) {
          kb[q] += c * ybar_[q];
          kbd[q] += c * ybard_[q];
        }
      }
    }
    if (sins_.empty() && slins_[0].dense_row(0) != nullptr) {
      // From the next step on (with the same ṗ), each stage is formed in
      // its linearization's inputs (dense_adjoint_tangent).
      srows_.resize(s_ * nx_);
      for (std::size_t j = 0; j < s_; ++j) {
        sins_.push_back({slins_[j].dense_input(0), slins_[j].dense_input_dot(0),
                         slins_[j].value().data(), slins_[j].value_dot().data()});
        for (std::size_t r = 0; r < nx_; ++r)
          srows_[j * nx_ + r] = {slins_[j].dense_row(r), slins_[j].dense_row_dot(r)};
      }
      spdot_.assign(pdot.begin(), pdot.end());
      dense_at_ = dense_adjoint_tangent();
    }
  }

  // dense_adjoint_tangent<N, Z, L> for N = 1, 2, … (the dispatch table below).
  using DenseAdjointTangent = void (ExplicitRk::*)(double, double, std::span<const double>,
                                                   std::span<const double>, std::span<double>,
                                                   std::span<double>, std::span<double>,
                                                   std::span<double>);
  template <bool Z, std::size_t L, std::size_t... I>
  static constexpr std::array<DenseAdjointTangent, sizeof...(I)> dense_adjoint_tangents(
      std::index_sequence<I...>) {
    return {&ExplicitRk::dense_adjoint_tangent<I + 1, Z, L>...};
  }

  // adjoint_tangent() with the one-pass dense second-order linearizations
  // once their inputs are seeded (from the second reverse step on), as
  // dense_adjoint() is to adjoint(): each stage (Y_j, Ẏ_j) formed straight
  // into slins_[j]'s inputs and evaluated there; then adjoint_tangent's
  // reverse loop with each (K̄_k, K̄̇_k) formed when stage k is reached from
  // the (Ȳ_j, Ȳ̇_j) kept in local arrays, and λ, λ̇, μ, μ̇ updated in their
  // lanes: the operations of the generic loop (SecondOrderLinearization::vjp
  // by rows) in the same order — the same bits. N = n, Z = a running cost,
  // L = the linearizations' row_lanes() (4, 6 or 8).
  // dense_adjoint_tangent<N, Z, L> for this System and the linearizations'
  // lanes (chosen once, when the stages' inputs are first seeded).
  DenseAdjointTangent dense_adjoint_tangent() const {
    switch (slins_[0].row_lanes()) {
      case 4: return dense_adjoint_tangent_on<4>();
      case 6: return dense_adjoint_tangent_on<6>();
      case 8: return dense_adjoint_tangent_on<8>();
      default:
        throw Error("explicit RK scheme: internal error, dense adjoint_tangent with " +
                    std::to_string(slins_[0].row_lanes()) + " lanes");
    }
  }
  template <std::size_t L>
  DenseAdjointTangent dense_adjoint_tangent_on() const {
    const std::size_t n = sys_.n_model_states();
    COSTATE_CHECK(n >= 1 && n <= L,
                  "explicit RK scheme: internal error, dense adjoint_tangent with n = " << n);
    // dense_adjoint_tangent<N, Z, L> for N = 1 … L, by [Z][N − 1].
    constexpr auto lanes = std::make_index_sequence<L>{};
    static constexpr std::array table{dense_adjoint_tangents<false, L>(lanes),
                                      dense_adjoint_tangents<true, L>(lanes)};
    return table[nx_ > n ? 1 : 0][n - 1];
  }
  template <std::size_t N, bool Z, std::size_t L>
  void dense_adjoint_tangent(double t, double h, std::span<const double> x,
                             std::span<const double> xdot, std::span<double> lambda,
                             std::span<double> lambda_dot, std::span<double> mu,
                             std::span<double> mu_dot) {
    constexpr std::size_t st = 2 * (L + 1);  // SecondOrderLinearization::input_stride()
    constexpr std::size_t NX = N + (Z ? 1 : 0);
    static_assert(N <= L);
    const std::size_t np = std::min(mu.size(), L - N);  // = mu.size(): n + n_p ≤ L
    for (std::size_t j = 0; j < s_; ++j) {
      const Term* a = a_terms_.data() + a_first_[j];
      const std::size_t terms = a_first_[j + 1] - a_first_[j];
      combine_to<st>(x, sins_[j].in, a, terms, h, [&](std::size_t k) { return sins_[k].value; },
                     std::integral_constant<std::size_t, NX>{});
      combine_to<st>(xdot, sins_[j].in_dot, a, terms, h,
                     [&](std::size_t k) { return sins_[k].value_dot; },
                     std::integral_constant<std::size_t, NX>{});
      slins_[j].evaluate(t + tab_.c[j] * h);
    }
    lin_ += static_cast<std::int64_t>(s_);
    double lm[L], lmd[L], lam_in[N], lamd_in[N], kb[N], kbd[N];
    double ybar[kMaxStages][L], ybard[kMaxStages][L];
    for (std::size_t q = 0; q < N; ++q) {
      lm[q] = lam_in[q] = lambda[q];
      lmd[q] = lamd_in[q] = lambda_dot[q];
    }
    // The parameter lanes on a compile-time bound (the loop unrolls); lanes
    // past n + n_p are never read back.
    for (std::size_t q = 0; q < L - N; ++q) {
      lm[N + q] = q < np ? mu[q] : 0.0;
      lmd[N + q] = q < np ? mu_dot[q] : 0.0;
    }
    const double lz = Z ? lambda[N] : 0.0, lzd = Z ? lambda_dot[N] : 0.0;  // unchanged by the step
    for (std::size_t j = s_; j-- > 0;) {
      const double c = h * tab_.b[j];
      for (std::size_t q = 0; q < N; ++q) {
        kb[q] = c * lam_in[q];
        kbd[q] = c * lamd_in[q];
      }
      for (std::size_t e = col_first_[j]; e < col_first_[j + 1]; ++e) {
        const double cj = h * col_terms_[e].a;
        const double* yb = ybar[col_terms_[e].k];
        const double* ybd = ybard[col_terms_[e].k];
        for (std::size_t q = 0; q < N; ++q) {
          kb[q] += cj * yb[q];
          kbd[q] += cj * ybd[q];
        }
      }
      const std::pair<const double*, const double*>* row = srows_.data() + j * nx_;
      double* acc = ybar[j];
      double* accd = ybard[j];
      for (std::size_t l = 0; l < L; ++l) acc[l] = accd[l] = 0.0;
      auto add_row = [&](double wi, double wdi, std::pair<const double*, const double*> ro) {
        for (std::size_t l = 0; l < L; ++l) {
          const double av = ro.first[l], ad = ro.second[l];
          acc[l] += wi * av;
          accd[l] += wdi * av + wi * ad;
        }
      };
      for (std::size_t r = 0; r < N; ++r) add_row(kb[r], kbd[r], row[r]);
      if constexpr (Z) add_row(c * lz, c * lzd, row[N]);
      for (std::size_t l = 0; l < L; ++l) {
        lm[l] += acc[l];
        lmd[l] += accd[l];
      }
    }
    for (std::size_t q = 0; q < N; ++q) {
      lambda[q] = lm[q];
      lambda_dot[q] = lmd[q];
    }
    for (std::size_t q = 0; q < L - N; ++q)
      if (q < np) {
        mu[q] = lm[N + q];
        mu_dot[q] = lmd[N + q];
      }
  }

  struct Term {
    std::size_t k;
    double a;
  };
  static constexpr std::size_t kMaxStages = 16;

  // The state size as a compile-time constant for the small systems (1–4
  // entries of x), where the per-stage loops are all loop overhead, else
  // nx_ itself: f(nx) with nx an std::integral_constant or a std::size_t.
  // The same operations in the same order either way (the same bits).
  template <class F>
  void with_size(F&& f) {
    switch (nx_) {
      case 1: f(std::integral_constant<std::size_t, 1>{}); return;
      case 2: f(std::integral_constant<std::size_t, 2>{}); return;
      case 3: f(std::integral_constant<std::size_t, 3>{}); return;
      case 4: f(std::integral_constant<std::size_t, 4>{}); return;
      default: f(nx_);
    }
  }

  template <class Nx>
  void step_impl(std::size_t i, std::span<const double> x, std::span<double> xn, Nx nx) {
    const double t = times_[i], h = times_[i + 1] - t;
    for (std::size_t j = 0; j < s_; ++j)
      sys_.rhs(t + tab_.c[j] * h,
               stage_point(j, h, x, [&](std::size_t k) { return K_.data() + k * nx_; }, nx),
               p_, std::span<double>(K_.data() + j * nx_, nx_));
    rhs_ += static_cast<std::int64_t>(s_);
    finish(h, x, xn, [&](std::size_t k) { return K_.data() + k * nx_; }, nx);
  }

  template <class Nx>
  void adjoint_impl(std::size_t i, std::span<const double> x, std::span<double> lambda,
                    std::span<double> mu, Nx nx) {
    const double t = times_[i], h = times_[i + 1] - t;
    if (!ins_.empty()) {
      dense_adjoint(t, h, x, lambda, mu);
      return;
    }
    auto slope = [&](std::size_t k) { return vals_[k]; };
    for (std::size_t j = 0; j < s_; ++j) {
      const std::span<const double> y = stage_point(j, h, x, slope, nx);
      // A stage no later stage reads (col_terms_ empty: the last one) needs
      // no slope here, only its vjp (at_point: a model's own rule may then
      // skip f).
      if (col_first_[j + 1] > col_first_[j])
        lins_[j].at(t + tab_.c[j] * h, y, p_);
      else
        lins_[j].at_point(t + tab_.c[j] * h, y, p_);
    }
    lin_ += static_cast<std::int64_t>(s_);
    for (std::size_t j = 0; j < s_; ++j) {
      const double c = h * tab_.b[j];
      double* kb = Kbar_.data() + j * nx_;
      for (std::size_t q = 0; q < nx; ++q) kb[q] = c * lambda[q];
    }
    if (!rows_.empty() || lins_[0].dense_row(0) != nullptr) {
      dense_reverse(h, lambda, mu, nx);
      // From the next step on, each stage is formed in its Linearization's
      // inputs (dense_adjoint).
      for (std::size_t j = 0; j < s_; ++j) ins_.push_back(lins_[j].dense_input(0));
      return;
    }
    // λ ← λ + Σ Ȳ_j (the K̄_j above hold the incoming λ).
    for (std::size_t j = s_; j-- > 0;) {
      lins_[j].vjp(std::span<const double>(Kbar_.data() + j * nx_, nx_), ybar_, mu);
      for (std::size_t q = 0; q < nx; ++q) lambda[q] += ybar_[q];
      for (std::size_t e = a_first_[j]; e < a_first_[j + 1]; ++e) {
        const double c = h * a_terms_[e].a;
        double* kb = Kbar_.data() + a_terms_[e].k * nx_;
        for (std::size_t q = 0; q < nx; ++q) kb[q] += c * ybar_[q];
      }
    }
  }

  // adjoint()'s reverse loop with the one-pass dense linearizations (n + n_p
  // ≤ Linearization::kRowLanes): each stage's vjp read from its rows and
  // fused with the λ and K̄ updates — the operations of the generic loop in
  // the same order (the same bits; the z entry of Ȳ_j, always 0, is not
  // added).
  template <class Nx>
  void dense_reverse(double h, std::span<double> lambda, std::span<double> mu, Nx nx) {
    constexpr std::size_t L = Linearization::kRowLanes;
    const std::size_t n = sys_.n_model_states(), nin = n + mu.size();
    if (rows_.empty()) {
      rows_.resize(s_ * nx_);
      for (std::size_t j = 0; j < s_; ++j)
        for (std::size_t i = 0; i < nx_; ++i) rows_[j * nx_ + i] = lins_[j].dense_row(i);
    }
    double* lam = lambda.data();
    double* m = mu.data();
    for (std::size_t j = s_; j-- > 0;) {
      const double* kb = Kbar_.data() + j * nx_;
      const double* const* row = rows_.data() + j * nx_;
      double acc[L] = {};
      for (std::size_t i = 0; i < nx; ++i) {
        const double wi = kb[i];
        const double* r = row[i];
        for (std::size_t l = 0; l < L; ++l) acc[l] += wi * r[l];
      }
      for (std::size_t q = 0; q < n; ++q) lam[q] += acc[q];
      for (std::size_t q = n; q < nin; ++q) m[q - n] += acc[q];
      for (std::size_t e = a_first_[j]; e < a_first_[j + 1]; ++e) {
        const double c = h * a_terms_[e].a;
        double* kbk = Kbar_.data() + a_terms_[e].k * nx_;
        for (std::size_t q = 0; q < n; ++q) kbk[q] += c * acc[q];
      }
    }
  }

  // adjoint() with the one-pass dense linearizations once their inputs are
  // seeded (from the second step on): each stage Y_j formed straight into
  // lins_[j]'s inputs and evaluated there; then the reverse loop of
  // dense_reverse with each K̄_k formed when stage k is reached,
  //     K̄_k = h b_k λ + Σ_{j>k, j decreasing} h a_jk Ȳ_j,
  // the sum dense_reverse accumulates into K̄_k in the same order, from the
  // Ȳ_j kept in a local array instead of updates of K̄ in memory; λ's model
  // entries and μ are updated in the lanes of Ȳ_j (λ in [0, n), μ in [n,
  // n + n_p)) as dense_reverse updates them: the same operations in the
  // same order (the same bits). The sizes as compile-time constants:
  // N = n (n + n_p ≤ kRowLanes), Z = a running cost's z entry.
  void dense_adjoint(double t, double h, std::span<const double> x, std::span<double> lambda,
                     std::span<double> mu) {
    const bool z = nx_ > sys_.n_model_states();
    auto with = [&](auto n) {
      if (z)
        dense_adjoint<decltype(n)::value, true>(t, h, x, lambda, mu);
      else
        dense_adjoint<decltype(n)::value, false>(t, h, x, lambda, mu);
    };
    switch (sys_.n_model_states()) {
      case 1: return with(std::integral_constant<std::size_t, 1>{});
      case 2: return with(std::integral_constant<std::size_t, 2>{});
      case 3: return with(std::integral_constant<std::size_t, 3>{});
      case 4: return with(std::integral_constant<std::size_t, 4>{});
      case 5: return with(std::integral_constant<std::size_t, 5>{});
      case 6: return with(std::integral_constant<std::size_t, 6>{});
      case 7: return with(std::integral_constant<std::size_t, 7>{});
      case 8: return with(std::integral_constant<std::size_t, 8>{});
      default:
        throw Error("explicit RK scheme: internal error, dense adjoint with n > kRowLanes");
    }
  }
  template <std::size_t N, bool Z>
  void dense_adjoint(double t, double h, std::span<const double> x, std::span<double> lambda,
                     std::span<double> mu) {
    constexpr std::size_t L = Linearization::kRowLanes, st = Linearization::kInputStride;
    constexpr std::size_t NX = N + (Z ? 1 : 0);
    static_assert(N <= L);
    const std::size_t np = std::min(mu.size(), L - N);  // = mu.size(): n + n_p ≤ L
    for (std::size_t j = 0; j < s_; ++j) {
      combine_to<st>(x, ins_[j], a_terms_.data() + a_first_[j], a_first_[j + 1] - a_first_[j], h,
                     [&](std::size_t k) { return vals_[k]; }, std::integral_constant<std::size_t, NX>{});
      lins_[j].evaluate(t + tab_.c[j] * h);
    }
    lin_ += static_cast<std::int64_t>(s_);
    double lm[L], lam_in[N], kb[N];
    double ybar[kMaxStages][L];
    for (std::size_t q = 0; q < N; ++q) lm[q] = lam_in[q] = lambda[q];
    // The parameter lanes on a compile-time bound, as dense_adjoint_tangent
    // (the loop unrolls and lm stays in registers; a run-time count left a
    // store loop whose 8-byte stores the lanes' 16-byte loads then read);
    // lanes past n + n_p are never read back.
    for (std::size_t q = 0; q < L - N; ++q) lm[N + q] = q < np ? mu[q] : 0.0;
    const double lz = Z ? lambda[N] : 0.0;  // λ_z: unchanged by the step
    for (std::size_t j = s_; j-- > 0;) {
      const double c = h * tab_.b[j];
      for (std::size_t q = 0; q < N; ++q) kb[q] = c * lam_in[q];
      for (std::size_t e = col_first_[j]; e < col_first_[j + 1]; ++e) {
        const double cj = h * col_terms_[e].a;
        const double* yb = ybar[col_terms_[e].k];
        for (std::size_t q = 0; q < N; ++q) kb[q] += cj * yb[q];
      }
      const double* const* row = rows_.data() + j * nx_;
      double* acc = ybar[j];
      for (std::size_t l = 0; l < L; ++l) acc[l] = 0.0;
      for (std::size_t r = 0; r < N; ++r) {
        const double wi = kb[r];
        const double* ro = row[r];
        for (std::size_t l = 0; l < L; ++l) acc[l] += wi * ro[l];
      }
      if constexpr (Z) {
        const double wi = c * lz;
        const double* ro = row[N];
        for (std::size_t l = 0; l < L; ++l) acc[l] += wi * ro[l];
      }
      for (std::size_t l = 0; l < L; ++l) lm[l] += acc[l];
    }
    for (std::size_t q = 0; q < N; ++q) lambda[q] = lm[q];
    for (std::size_t q = 0; q < L - N; ++q)
      if (q < np) mu[q] = lm[N + q];
  }

  // Stage j's point Y_j: x itself when the stage has no a_jk (the first),
  // else stage() into Y_ (the same values either way).
  template <class Slope, class Nx>
  std::span<const double> stage_point(std::size_t j, double h, std::span<const double> x,
                                      Slope slope, Nx nx) {
    if (a_first_[j + 1] == a_first_[j]) return x.first(nx_);
    stage(j, h, x, slope, nx);
    return Y_;
  }
  // Y_ = x + h Σ_{k<j} a_jk K_k (one fused pass over the state).
  template <class Slope, class Nx>
  void stage(std::size_t j, double h, std::span<const double> x, Slope slope, Nx nx) {
    combine(x, Y_, a_terms_.data() + a_first_[j], a_first_[j + 1] - a_first_[j], h, slope, nx);
  }
  template <class Slope>
  void stage(std::size_t j, double h, std::span<const double> x, Slope slope) {
    stage(j, h, x, slope, nx_);
  }
  // xn = x + h Σ_j b_j K_j.
  template <class Slope, class Nx>
  void finish(double h, std::span<const double> x, std::span<double> xn, Slope slope, Nx nx) {
    combine(x, xn, b_terms_.data(), b_terms_.size(), h, slope, nx);
  }
  template <class Slope>
  void finish(double h, std::span<const double> x, std::span<double> xn, Slope slope) {
    finish(h, x, xn, slope, nx_);
  }
  // out = x + Σ_t (h a_t) K_{k_t}, summed left to right.
  template <class Slope>
  void combine(std::span<const double> x, std::span<double> out, const Term* term,
               std::size_t terms, double h, Slope slope) {
    combine(x, out, term, terms, h, slope, nx_);
  }
  template <class Slope, class Nx>
  void combine(std::span<const double> x, std::span<double> out, const Term* term,
               std::size_t terms, double h, Slope slope, Nx nx) {
    combine_to<1>(x, out.data(), term, terms, h, slope, nx);
  }
  // combine() into out[q · Stride].
  template <std::size_t Stride, class Slope, class Nx>
  void combine_to(std::span<const double> x, double* out, const Term* term, std::size_t terms,
                  double h, Slope slope, Nx nx) {
    double c[kMaxStages];
    const double* k[kMaxStages];
    for (std::size_t t = 0; t < terms; ++t) {
      c[t] = h * term[t].a;
      k[t] = slope(term[t].k);
    }
    double* o = out;
    const double* xi = x.data();
    switch (terms) {
      case 0:
        for (std::size_t q = 0; q < nx; ++q) o[q * Stride] = xi[q];
        return;
      case 1:
        for (std::size_t q = 0; q < nx; ++q) o[q * Stride] = xi[q] + c[0] * k[0][q];
        return;
      case 2:
        for (std::size_t q = 0; q < nx; ++q)
          o[q * Stride] = xi[q] + c[0] * k[0][q] + c[1] * k[1][q];
        return;
      case 4:
        for (std::size_t q = 0; q < nx; ++q)
          o[q * Stride] =
              xi[q] + c[0] * k[0][q] + c[1] * k[1][q] + c[2] * k[2][q] + c[3] * k[3][q];
        return;
      default:
        for (std::size_t q = 0; q < nx; ++q) {
          double v = xi[q];
          for (std::size_t t = 0; t < terms; ++t) v += c[t] * k[t][q];
          o[q * Stride] = v;
        }
    }
  }

  const System& sys_;
  bool second_order_;  // sys_.model().second_order()
  Tangent1 tangent1_ = nullptr;  // tangent1_for()
  ButcherTableau tab_;
  std::span<const double> p_, times_;
  std::size_t nx_, s_;
  std::vector<double> Y_, K_, Kbar_, ybar_, Ydot_, Kdot_, Kbard_, ybard_;
  std::vector<Linearization> lins_, tlins_;
  std::vector<detail::SystemModel::Dual1> yd1_, pd1_, od1_;  // tangent1_impl
  std::vector<const double*> rows_;  // dense_reverse: lins_[j].dense_row(i) at [j nx + i]
  std::vector<const double*> vals_;  // lins_[j].value().data()
  std::vector<double*> ins_;         // dense_adjoint: lins_[j].dense_input(0)
  std::vector<SecondOrderLinearization> slins_;
  // dense_adjoint_tangent: slins_[j]'s inputs (x, ẋ) and its value() and
  // value_dot() (each stays at one address), its rows at [j nx + i], the ṗ
  // seeded.
  struct StageIo {
    double *in, *in_dot;
    const double *value, *value_dot;
  };
  std::vector<StageIo> sins_;
  DenseAdjointTangent dense_at_ = nullptr;  // set with sins_
  std::vector<std::pair<const double*, const double*>> srows_;  // (dense_row, dense_row_dot)
  std::vector<double> spdot_;
  std::vector<Term> a_terms_, b_terms_;
  std::vector<std::size_t> a_first_;  // stage j's terms: a_terms_[a_first_[j], a_first_[j+1])
  // By columns: stage k's later stages col_terms_[col_first_[k], col_first_[k+1]) (Term::k = j).
  std::vector<Term> col_terms_;
  std::vector<std::size_t> col_first_;
  std::int64_t rhs_ = 0, lin_ = 0;
};

/// Calls the sweep's hook every kSweepHookInterval steps (forward and
/// reverse), with the time of the step, and keeps the progress line
/// (core/progress.hpp): the reverse steps done of the plan's, the forward
/// steps (first sweep, then recomputation from checkpoints) in the note.
class Hook {
 public:
  Hook(const SweepHook& hook, std::span<const double> times, const char* what)
      : hook_(hook), times_(times), what_(what), steps_(times.size() > 1 ? static_cast<double>(times.size() - 1) : 0.0),
        progress_(std::in_place, std::string(what) + ": step", steps_) {}
  void forward(std::size_t i) {
    ++forward_;
    if (progress_->active() && (reverse_ == 0 || forward_ % kSweepHookInterval == 0))
      progress_->update(static_cast<double>(reverse_ == 0 ? i : reverse_), reverse_ == 0 ? "" : note());
    call(i);
  }
  void reverse(std::size_t i) {
    if (reverse_++ == 0) {  // the reverse phase: a scope of its own
      first_forward_ = forward_;
      progress_.reset();
      progress_.emplace(std::string(what_) + ", reverse: step", steps_);
    }
    if (progress_->active()) progress_->update(static_cast<double>(reverse_), note());
    call(i);
  }

 private:
  void call(std::size_t i) {
    if (!hook_ || ++count_ % kSweepHookInterval != 0) return;
    hook_(times_[std::min(i, times_.size() - 1)]);
  }
  std::string note() const { return std::to_string(forward_ - first_forward_) + " steps recomputed"; }

  const SweepHook& hook_;
  std::span<const double> times_;
  const char* what_;
  double steps_;
  std::int64_t count_ = 0;
  std::int64_t forward_ = 0, reverse_ = 0, first_forward_ = 0;
  std::optional<Progress> progress_;
};

/// Where the System's observations land on the sweep's plan: obs_at[i] = k
/// when observation k lands on step index i, −1 otherwise (l + 1 entries).
/// Checks the plan is the scheme's (its step count).
std::vector<std::int64_t> observations_on(const System& sys, const Scheme& scheme,
                                          const StepPlan& steps, std::string_view who) {
  COSTATE_CHECK_EQ(steps.steps(), scheme.steps(),
                   who << ": the step plan is not the one the scheme replays");
  std::vector<std::int64_t> obs_at(steps.steps() + 1, -1);
  if (!sys.has_observations()) return obs_at;
  const std::vector<std::size_t> at = steps.landing_steps(sys.observation_times(), who);
  for (std::size_t k = 0; k < at.size(); ++k) obs_at[at[k]] = static_cast<std::int64_t>(k);
  return obs_at;
}

/// One adjoint seed of a sweep: its objective's terms (the System's
/// terminal and observation terms, and the running cost's z), where its
/// observations land (observations_on), and its λ, μ, J.
struct AdjointLane {
  const System* sys = nullptr;
  std::vector<std::int64_t> obs_at;
  std::vector<double> lambda, mu;
  double J = 0.0;
};

/// The reverse sweep's state and the checkpoint adapter in one: the Ops of
/// reverse_sweep (advance / save / restore / reverse_step / index), over a
/// block of adjoint seeds (lanes) that share the forward steps, the
/// snapshots and the recomputation; each reverse step runs the scheme's
/// adjoint once per lane, in lane order, from the same x_i (one lane: the
/// single gradient's calls, in its order).
class AdjointOps {
 public:
  /// With `from` (an interrupted sweep, AdjointResume; one lane): λ, μ, J
  /// start from its place and the reverse steps below from->step are the
  /// ones to run (steps() of the sweep is from->step; no seed).
  AdjointOps(std::vector<AdjointLane>& lanes, Scheme& scheme, std::span<const double> x0,
             std::span<const double> p, SnapshotStore* store, Hook& hook,
             const AdjointResume* from = nullptr)
      : lanes_(lanes), scheme_(scheme), p_(p), store_(store), hook_(hook),
        nx_(scheme.state_size()),
        l_(from ? static_cast<std::size_t>(from->step) : scheme.steps()), seed_(from == nullptr),
        cur_(x0.begin(), x0.end()), next_(nx_) {
    for (AdjointLane& lane : lanes_) {
      lane.lambda.assign(nx_, 0.0);
      lane.mu.assign(p.size(), 0.0);
    }
    if (from) {
      lanes_[0].lambda = from->lambda;
      lanes_[0].mu = from->mu;
      lanes_[0].J = from->objective;
      reached_ = from->step;
    }
  }

  void advance() {
    scheme_.step(static_cast<std::size_t>(i_), cur_, next_);
    cur_.swap(next_);
    ++i_;
    hook_.forward(static_cast<std::size_t>(i_));
  }
  void save(std::size_t s) {
    store_->save(s, cur_);
    if (slot_step_.size() <= s) slot_step_.resize(s + 1);
    slot_step_[s] = i_;
  }
  void restore(std::size_t s) {
    store_->load(s, cur_);
    i_ = slot_step_[s];
  }
  std::int64_t index() const { return i_; }
  void reverse_step() { reverse_step_at(static_cast<std::size_t>(i_), cur_); }

  /// The reverse of step i from its starting state x = x_i.
  void reverse_step_at(std::size_t i, std::span<const double> x) {
    if (seed_ && i + 1 == l_) {
      // Seed at x_l: λ = (∂g/∂y, 1 for z), μ = ∂g/∂p, plus an observation at t_l.
      scheme_.step(i, x, next_);
      for (AdjointLane& lane : lanes_) {
        std::fill(lane.lambda.begin(), lane.lambda.end(), 0.0);
        lane.J += lane.sys->terminal_gradient(next_, p_, lane.lambda, lane.mu);
        if (lane.sys->has_running()) {
          const std::size_t n = lane.sys->n_model_states();
          lane.J += next_[n];
          lane.lambda[n] = 1.0;
        }
        observe(lane, l_, next_);
      }
    }
    if (lanes_.size() == 1) {
      scheme_.adjoint(i, x, lanes_[0].lambda, lanes_[0].mu);
    } else {
      // The block: the scheme linearizes (and factors) once where it can.
      if (lambdas_.empty())
        for (AdjointLane& lane : lanes_) {
          lambdas_.emplace_back(lane.lambda);
          mus_.emplace_back(lane.mu);
        }
      scheme_.adjoint_block(i, x, lambdas_, mus_);
    }
    for (AdjointLane& lane : lanes_) observe(lane, i, x);
    reached_ = static_cast<std::int64_t>(i);
    hook_.reverse(i);
  }

  /// Steps the sweep runs (the scheme's, or a resumed sweep's remainder).
  std::size_t steps() const { return l_; }
  /// The lowest step reversed so far (λ = ∂J/∂x_reached), −1 before the seed.
  std::int64_t reached() const { return reached_; }

 private:
  void observe(AdjointLane& lane, std::size_t i, std::span<const double> x) {
    const std::int64_t k = lane.obs_at[i];
    if (k >= 0)
      lane.J += lane.sys->observation_gradient(static_cast<std::size_t>(k), x, p_, lane.lambda,
                                               lane.mu);
  }

  std::vector<AdjointLane>& lanes_;
  std::vector<std::span<double>> lambdas_, mus_;  // views of the lanes (a block)
  Scheme& scheme_;
  std::span<const double> p_;
  SnapshotStore* store_;
  Hook& hook_;
  std::size_t nx_, l_;
  bool seed_;
  std::vector<double> cur_, next_;
  std::vector<std::int64_t> slot_step_;
  std::int64_t i_ = 0, reached_ = -1;
};

/// StoreAll without the schedule's slot pool and snapshot copies: the
/// states s_0 … s_{l−1} (w doubles each) in one arena, each reverse step
/// reading its state (and the next, empty for the last step) in place. The
/// same steps in the same order as reverse_sweep's StoreAll (the same bits)
/// and the same counts. forward(i, s_i, s_{i+1}); reverse(i, s_i, s_{i+1}).
template <class Forward, class Reverse>
CheckpointStats store_all_arena(std::size_t l, std::size_t w, std::span<const double> s0,
                                Hook& hook, Forward&& forward, Reverse&& reverse) {
  CheckpointStats stats;
  stats.steps = static_cast<std::int64_t>(l);
  if (l == 0) return stats;
  // Not zero-filled: each page is first touched by the step that writes it.
  const std::unique_ptr<double[]> xs = std::make_unique_for_overwrite<double[]>(l * w);
  std::copy(s0.begin(), s0.end(), xs.get());
  for (std::size_t i = 0; i + 1 < l; ++i) {
    forward(i, std::span<const double>(xs.get() + i * w, w),
            std::span<double>(xs.get() + (i + 1) * w, w));
    hook.forward(i + 1);
  }
  for (std::size_t i = l; i-- > 0;)
    reverse(i, std::span<const double>(xs.get() + i * w, w),
            i + 1 < l ? std::span<const double>(xs.get() + (i + 1) * w, w)
                      : std::span<const double>());
  stats.forward_steps = static_cast<std::int64_t>(l) - 1;
  stats.restores = static_cast<std::int64_t>(l) - 1;
  stats.peak_snapshots = static_cast<std::int64_t>(l);
  stats.recomputed_steps = 0;
  return stats;
}

/// adjoint_sweep's StoreAll: x_0 … x_{l−1} in the arena.
CheckpointStats store_all(AdjointOps& ops, Scheme& scheme, std::span<const double> x0, Hook& hook) {
  return store_all_arena(
      ops.steps(), scheme.state_size(), x0, hook,
      [&](std::size_t i, std::span<const double> x, std::span<double> xn) { scheme.step(i, x, xn); },
      [&](std::size_t i, std::span<const double> x, std::span<const double>) {
        ops.reverse_step_at(i, x);
      });
}

}  // namespace

std::unique_ptr<Scheme> make_explicit_rk_scheme(const System& system, Method method,
                                                std::span<const double> p,
                                                const StepPlan& steps) {
  return std::make_unique<ExplicitRk>(system, method, p, steps.times());
}

namespace {

/// The block sweep behind adjoint_sweep and adjoint_block_sweep: one lane
/// per System (the first's scheme), under the checkpoint schedule.
std::vector<SweepOutcome> lanes_sweep(std::span<const System* const> systems, Scheme& scheme,
                                      const StepPlan& steps, const Checkpointing& checkpointing,
                                      std::span<const double> x0, std::span<const double> p,
                                      const SweepHook& hook, const AdjointResume* resume_from,
                                      AdjointResume* interrupted_at, std::string_view who) {
  const std::size_t l = scheme.steps();
  std::vector<AdjointLane> lanes(systems.size());
  for (std::size_t j = 0; j < systems.size(); ++j) {
    lanes[j].sys = systems[j];
    lanes[j].obs_at = observations_on(*systems[j], scheme, steps, who);
  }
  COSTATE_CHECK_EQ(x0.size(), scheme.state_size(), who << ": x0 has the wrong size");
  if (resume_from) {
    COSTATE_CHECK(resume_from->step >= 0 && static_cast<std::size_t>(resume_from->step) <= l,
                  who << ": the resumed sweep's step " << resume_from->step
                      << " is not within its " << l << " steps");
    COSTATE_CHECK_EQ(resume_from->lambda.size(), scheme.state_size(),
                     who << ": the resumed sweep's adjoint state has the wrong size");
    COSTATE_CHECK_EQ(resume_from->mu.size(), p.size(),
                     who << ": the resumed sweep's parameter adjoint has the wrong size");
  }
  validate(checkpointing);  // once: reverse_sweep_valid below does not again
  std::size_t disk_slots = 0;
  std::string disk_path;
  if (const auto* ml = std::get_if<Multilevel>(&checkpointing)) {
    disk_slots = static_cast<std::size_t>(ml->disk);
    disk_path = ml->path;
  }
  Hook every(hook, steps.times(), "adjoint sweep");
  const bool store_all_states = std::holds_alternative<StoreAll>(checkpointing);
  std::optional<SnapshotStore> store;
  if (!store_all_states) store.emplace(scheme.state_size(), disk_slots, disk_path);
  AdjointOps ops(lanes, scheme, x0, p, store ? &*store : nullptr, every, resume_from);
  CheckpointStats stats;
  try {
    if (ops.steps() == 0)
      stats = CheckpointStats{};  // resumed at step 0: nothing left to reverse
    else if (store_all_states)
      stats = store_all(ops, scheme, x0, every);
    else
      stats = reverse_sweep_valid(checkpointing, ops, static_cast<std::int64_t>(ops.steps()));
  } catch (...) {
    if (interrupted_at && ops.reached() >= 0) {
      interrupted_at->step = ops.reached();
      interrupted_at->objective = lanes[0].J;
      interrupted_at->lambda = lanes[0].lambda;
      interrupted_at->mu = lanes[0].mu;
    }
    throw;
  }
  if (store) stats.disk_snapshots = store->disk_writes();
  // A DAE: x_0's algebraic states are z(x0, p) (ode/dae.hpp), so λ_0 is
  // carried onto the differential initial values and the parameters.
  for (AdjointLane& lane : lanes)
    if (lane.sys->n_algebraic() > 0) {
      const std::span<double> l0 = std::span<double>(lane.lambda).first(lane.sys->n_states());
      detail::ConstraintProjection(*lane.sys, p).adjoint(steps.times().front(), x0, l0, l0,
                                                         lane.mu);
    }
  std::vector<SweepOutcome> out(lanes.size());
  for (std::size_t j = 0; j < lanes.size(); ++j) {
    SweepOutcome& o = out[j];
    o.checkpoints = stats;
    o.objective = lanes[j].J;
    o.wrt_parameters = std::move(lanes[j].mu);
    o.wrt_initial_state.assign(
        lanes[j].lambda.begin(),
        lanes[j].lambda.begin() + static_cast<std::ptrdiff_t>(systems[j]->n_model_states()));
    o.rhs_evaluations = scheme.rhs_evaluations();
    o.linearizations = scheme.linearizations();
  }
  return out;
}

}  // namespace

SweepOutcome adjoint_sweep(const System& system, Scheme& scheme, const StepPlan& steps,
                           const Checkpointing& checkpointing, std::span<const double> x0,
                           std::span<const double> p, const SweepHook& hook,
                           const AdjointResume* resume_from, AdjointResume* interrupted_at) {
  const System* one = &system;
  return std::move(lanes_sweep(std::span<const System* const>(&one, 1), scheme, steps,
                               checkpointing, x0, p, hook, resume_from, interrupted_at,
                               "adjoint_sweep")
                       .front());
}

std::vector<SweepOutcome> adjoint_block_sweep(std::span<const System* const> systems,
                                              Scheme& scheme, const StepPlan& steps,
                                              const Checkpointing& checkpointing,
                                              std::span<const double> x0,
                                              std::span<const double> p, const SweepHook& hook) {
  COSTATE_CHECK(!systems.empty(), "adjoint_block_sweep: no objectives (a block needs at least one)");
  for (std::size_t j = 0; j < systems.size(); ++j) {
    COSTATE_CHECK(systems[j]->n_states() == systems[0]->n_states() &&
                      systems[j]->n_model_states() == systems[0]->n_model_states() &&
                      systems[j]->n_parameters() == systems[0]->n_parameters(),
                  "adjoint_block_sweep: objective " << j
                                                    << "'s System has another size than objective 0's");
    COSTATE_CHECK(!systems[j]->has_running() || systems.size() == 1,
                  "adjoint_block_sweep: objective "
                      << j << " has a running cost; a block of several objectives shares one "
                              "state x = y (a running cost adds its own quadrature z): give "
                              "it its own gradient, or make it a terminal or observation term");
  }
  return lanes_sweep(systems, scheme, steps, checkpointing, x0, p, hook, nullptr, nullptr,
                     "adjoint_block_sweep");
}

SweepOutcome tangent_sweep(const System& system, Scheme& scheme, const StepPlan& steps,
                           std::span<const double> x0, std::span<const double> p,
                           const SweepHook& hook) {
  Hook every(hook, steps.times(), "tangent sweep");
  const std::size_t l = scheme.steps(), nx = scheme.state_size();
  const std::size_t n = system.n_model_states(), np = p.size(), m = np + n;
  const std::vector<std::int64_t> obs_at = observations_on(system, scheme, steps, "tangent_sweep");
  COSTATE_CHECK_EQ(x0.size(), nx, "tangent_sweep: x0 has the wrong size");
  std::vector<double> grad(m, 0.0), gy(n), gp(np);
  double J = 0.0;
  std::int64_t passes = 0;
  std::vector<double> x(nx), xn(nx), S, Sn, P;
  detail::ConstraintProjection project(system, p);
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
    project.tangent(steps.times().front(), x0, w, S, P);  // a DAE's z0 = z(x0, p)
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
      every.forward(i + 1);
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

// ---------------------------------------------------------------- second order
// (issue 14: forward over adjoint; scheme.hpp's "Second order")

namespace costate::ode {

void Scheme::adjoint_tangent(std::size_t, std::span<const double>, std::span<const double>,
                             std::span<const double>, std::span<const double>,
                             std::span<const double>, std::span<double>, std::span<double>,
                             std::span<double>, std::span<double>) {
  throw Error("Scheme::adjoint_tangent: this scheme has no second-order adjoint");
}

namespace {

/// The checkpoint adapter of second_order_sweep (reverse_sweep's Ops): the
/// state is (x_i, ẋ_i), 2 state_size() doubles, saved whole.
class SecondOrderOps {
 public:
  SecondOrderOps(const System& sys, Scheme& scheme, std::span<const std::int64_t> obs_at,
                 std::span<const double> x0, std::span<const double> x0dot,
                 std::span<const double> p, std::span<const double> pdot, SnapshotStore* store,
                 Hook& hook)
      : sys_(sys), scheme_(scheme), obs_at_(obs_at), p_(p), pdot_(pdot), store_(store),
        hook_(hook), nx_(scheme.state_size()), n_(sys.n_model_states()), l_(scheme.steps()),
        cur_(2 * nx_), next_(2 * nx_), after_(2 * nx_), last_(2 * nx_), lambda_(nx_, 0.0),
        lambda_dot_(nx_, 0.0), mu_(p.size(), 0.0), mu_dot_(p.size(), 0.0) {
    std::copy(x0.begin(), x0.end(), cur_.begin());
    std::copy(x0dot.begin(), x0dot.end(), cur_.begin() + static_cast<std::ptrdiff_t>(nx_));
  }

  void advance() {
    forward(static_cast<std::size_t>(i_), cur_, next_);
    cur_.swap(next_);
    ++i_;
    hook_.forward(static_cast<std::size_t>(i_));
  }
  void save(std::size_t s) {
    store_->save(s, cur_);
    if (slot_step_.size() <= s) slot_step_.resize(s + 1);
    slot_step_[s] = i_;
  }
  void restore(std::size_t s) {
    store_->load(s, cur_);
    i_ = slot_step_[s];
  }
  std::int64_t index() const { return i_; }

  void reverse_step() {
    const auto i = static_cast<std::size_t>(i_);
    if (i + 1 != l_)
      COSTATE_CHECK(after_index_ == i_ + 1,
                    "second_order_sweep: internal error, the reverse steps are out of order");
    // after_ = (x_{i+1}, ẋ_{i+1}): the previous reverse step's start.
    reverse_step_at(i, cur_, after_);
    after_ = cur_;
    after_index_ = i_;
  }

  /// The reverse of step i from s = (x_i, ẋ_i), with after = (x_{i+1},
  /// ẋ_{i+1}) (ignored for the last step: computed here).
  void reverse_step_at(std::size_t i, std::span<const double> s, std::span<const double> after) {
    if (i + 1 == l_) {
      // Seed at x_l: λ = (∂g/∂y, 1 for z), μ = ∂g/∂p with their ε-parts.
      forward(i, s, last_);
      after = last_;
      std::fill(lambda_.begin(), lambda_.end(), 0.0);
      std::fill(lambda_dot_.begin(), lambda_dot_.end(), 0.0);
      double dot = 0.0;
      J_ += sys_.terminal_hessian_vector(x(after), xdot(after), p_, pdot_, lambda_, lambda_dot_,
                                         mu_, mu_dot_, dot);
      J_dot_ += dot;
      if (sys_.has_running()) {
        J_ += after[n_];
        J_dot_ += after[nx_ + n_];
        lambda_[n_] = 1.0;
      }
      observe(l_, after);
    }
    scheme_.adjoint_tangent(i, x(s), xdot(s), x(after), xdot(after), pdot_, lambda_,
                            lambda_dot_, mu_, mu_dot_);
    observe(i, s);
    hook_.reverse(i);
  }

  // (x_{i+1}, ẋ_{i+1}) into `to` from (x_i, ẋ_i): the scheme's tangent with one direction.
  void forward(std::size_t i, std::span<const double> from, std::span<double> to) {
    scheme_.tangent(i, x(from), to.first(nx_), 1, xdot(from), to.subspan(nx_, nx_), pdot_);
  }

  double objective() const { return J_; }
  double objective_dot() const { return J_dot_; }
  const std::vector<double>& lambda() const { return lambda_; }
  const std::vector<double>& lambda_dot() const { return lambda_dot_; }
  const std::vector<double>& mu() const { return mu_; }
  const std::vector<double>& mu_dot() const { return mu_dot_; }

 private:
  std::span<const double> x(std::span<const double> s) const { return s.first(nx_); }
  std::span<const double> xdot(std::span<const double> s) const { return s.subspan(nx_, nx_); }
  void observe(std::size_t i, std::span<const double> s) {
    const std::int64_t k = obs_at_[i];
    if (k < 0) return;
    double dot = 0.0;
    J_ += sys_.observation_hessian_vector(static_cast<std::size_t>(k), x(s), xdot(s), p_, pdot_,
                                          lambda_, lambda_dot_, mu_, mu_dot_, dot);
    J_dot_ += dot;
  }

  const System& sys_;
  Scheme& scheme_;
  std::span<const std::int64_t> obs_at_;
  std::span<const double> p_, pdot_;
  SnapshotStore* store_;
  Hook& hook_;
  std::size_t nx_, n_, l_;
  std::vector<double> cur_, next_, after_, last_, lambda_, lambda_dot_, mu_, mu_dot_;
  std::vector<std::int64_t> slot_step_;
  std::int64_t i_ = 0, after_index_ = -1;
  double J_ = 0.0, J_dot_ = 0.0;
};

/// second_order_sweep's StoreAll as adjoint_sweep's: (x_i, ẋ_i) for i < l
/// in the arena, each reverse step reading its state and the next in place.
CheckpointStats second_order_store_all(SecondOrderOps& ops, Scheme& scheme,
                                       std::span<const double> s0, Hook& hook) {
  return store_all_arena(
      scheme.steps(), 2 * scheme.state_size(), s0, hook,
      [&](std::size_t i, std::span<const double> s, std::span<double> sn) { ops.forward(i, s, sn); },
      [&](std::size_t i, std::span<const double> s, std::span<const double> sn) {
        ops.reverse_step_at(i, s, sn);
      });
}

}  // namespace

SecondOrderOutcome second_order_sweep(const System& system, Scheme& scheme,
                                      const StepPlan& steps, const Checkpointing& checkpointing,
                                      std::span<const double> x0, std::span<const double> x0dot,
                                      std::span<const double> p, std::span<const double> pdot,
                                      const SweepHook& hook) {
  const std::size_t l = scheme.steps(), nx = scheme.state_size(), n = system.n_model_states();
  const std::vector<std::int64_t> obs_at =
      observations_on(system, scheme, steps, "second_order_sweep");
  COSTATE_CHECK_EQ(x0.size(), nx, "second_order_sweep: x0 has the wrong size");
  COSTATE_CHECK_EQ(x0dot.size(), nx, "second_order_sweep: x0dot has the wrong size");
  COSTATE_CHECK_EQ(pdot.size(), p.size(), "second_order_sweep: pdot has the wrong size");
  validate(checkpointing);  // once: reverse_sweep_valid below does not again
  std::size_t disk_slots = 0;
  std::string disk_path;
  if (const auto* ml = std::get_if<Multilevel>(&checkpointing)) {
    disk_slots = static_cast<std::size_t>(ml->disk);
    disk_path = ml->path;
  }
  Hook every(hook, steps.times(), "second-order sweep");
  SecondOrderOutcome out;
  std::optional<SnapshotStore> store;
  std::vector<double> s0;
  if (std::holds_alternative<StoreAll>(checkpointing)) {
    s0.assign(x0.begin(), x0.end());
    s0.insert(s0.end(), x0dot.begin(), x0dot.end());
  } else {
    store.emplace(2 * nx, disk_slots, disk_path);
  }
  SecondOrderOps ops(system, scheme, obs_at, x0, x0dot, p, pdot, store ? &*store : nullptr, every);
  if (store) {
    out.checkpoints = reverse_sweep_valid(checkpointing, ops, static_cast<std::int64_t>(l));
    out.checkpoints.disk_snapshots = store->disk_writes();
  } else {
    out.checkpoints = second_order_store_all(ops, scheme, s0, every);
  }
  out.objective = ops.objective();
  out.objective_dot = ops.objective_dot();
  const auto nn = static_cast<std::ptrdiff_t>(n);
  out.wrt_parameters = ops.mu();
  out.hv_wrt_parameters = ops.mu_dot();
  out.wrt_initial_state.assign(ops.lambda().begin(), ops.lambda().begin() + nn);
  out.hv_wrt_initial_state.assign(ops.lambda_dot().begin(), ops.lambda_dot().begin() + nn);
  if (system.n_algebraic() > 0) {
    // A DAE: x_0's algebraic states are z(x0, p) (ode/dae.hpp), as adjoint_sweep's end.
    const std::size_t ns = system.n_states();
    std::vector<double> l(ops.lambda().begin(), ops.lambda().begin() + static_cast<std::ptrdiff_t>(ns));
    std::vector<double> ld(ops.lambda_dot().begin(),
                           ops.lambda_dot().begin() + static_cast<std::ptrdiff_t>(ns));
    detail::ConstraintProjection(system, p)
        .adjoint_tangent(steps.times().front(), x0.first(ns), x0dot.first(ns), pdot, l, ld,
                         out.wrt_parameters, out.hv_wrt_parameters);
    out.wrt_initial_state.assign(l.begin(), l.begin() + nn);
    out.hv_wrt_initial_state.assign(ld.begin(), ld.begin() + nn);
  }
  out.rhs_evaluations = scheme.rhs_evaluations();
  out.linearizations = scheme.linearizations();
  return out;
}

}  // namespace costate::ode
