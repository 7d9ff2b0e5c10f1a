#pragma once
/// \file
/// Explicit Runge–Kutta methods as Butcher tableaux, one step on a
/// costate::Vector with a given step size, and the discrete adjoint of that
/// step.
///
/// Step (stages i = 1..s, A strictly lower triangular):
///     Y_i = y + h Σ_{j<i} a_ij k_j,   k_i = f(t + c_i h, Y_i),   y' = y + h Σ_i b_i k_i.
/// Adjoint: given ȳ' = λ (and p̄ to accumulate), with k̄_i = h b_i λ initially,
/// for i = s, …, 1:
///     Ȳ_i = f_yᵀ(Y_i) k̄_i,   p̄ += f_pᵀ(Y_i) k̄_i,   k̄_j += h a_ij Ȳ_i (j < i),
/// and ȳ = λ + Σ_i Ȳ_i. This is the exact transpose of the step's Jacobian,
/// so a sweep of these gives the gradient of the discrete solution — the
/// step sizes being constants (an adaptive run's accepted steps are replayed
/// as they were).

#include <array>
#include <span>
#include <vector>

#include "costate/ode/options.hpp"
#include "costate/tensor/vector.hpp"

namespace costate::ode {

struct ButcherTableau {
  int stages = 0;
  std::vector<double> a;  ///< stages × stages, row-major, strictly lower triangular
  std::vector<double> b;
  std::vector<double> c;
  double at(int i, int j) const { return a[static_cast<std::size_t>(i * stages + j)]; }
};

/// The tableau of an explicit method (euler, rk4, dopri5's 5th-order
/// solution).
ButcherTableau explicit_tableau(Method method);

/// Stage storage and the step/adjoint of one explicit RK step on vectors of
/// type V (double entries).
template <class V>
class ExplicitRKStep {
 public:
  ExplicitRKStep(const ButcherTableau& tableau, const V& like) : tab_(tableau) {
    for (int i = 0; i < tab_.stages; ++i) {
      stages_.push_back(like.clone());
      slopes_.push_back(like.clone());
      kbar_.push_back(like.clone());
    }
    tmp_ = like.clone();
  }

  /// y_out = one step from (t, y) with step h; keeps the stages Y_i, k_i.
  /// `f(t, y, dydt)`. y_out must not alias y.
  template <class Rhs>
  void step(Rhs& f, double t, double h, const V& y, const V& y_out) {
    const int s = tab_.stages;
    for (int i = 0; i < s; ++i) {
      combine(stages_[i], y, h, i, [&](int j) { return tab_.at(i, j); });
      f(t + tab_.c[i] * h, stages_[i], slopes_[i]);
    }
    combine(y_out, y, h, s, [&](int j) { return tab_.b[j]; });
  }

  /// After step(): λ ← (∂y'/∂y)ᵀ λ and p̄ += (∂y'/∂p)ᵀ λ. `vjp(t, Y, w, Ybar,
  /// pbar)` must set Ybar = f_yᵀ(Y) w and add f_pᵀ(Y) w to pbar.
  template <class Vjp, class ParamAdjoint>
  void adjoint(Vjp& vjp, double t, double h, V& lambda, ParamAdjoint& pbar) {
    // Coefficients in the vectors' scalar type, so that the same adjoint
    // runs on vectors of ad::Dual (ode::hessian_vector: forward over adjoint).
    using S = typename V::value_type;
    const int s = tab_.stages;
    for (int i = 0; i < s; ++i) scale(kbar_[i], S(h * tab_.b[i]), lambda);
    // tmp_ accumulates ȳ = λ + Σ Ȳ_i; Ȳ_i is computed into stages_[i]'s
    // partner buffer (slopes_ is no longer needed once the step is done).
    deep_copy(tmp_, lambda);
    for (int i = s - 1; i >= 0; --i) {
      V& ybar_i = slopes_[i];
      vjp(t + tab_.c[i] * h, stages_[i], kbar_[i], ybar_i, pbar);
      axpy(S(1.0), ybar_i, tmp_);
      for (int j = 0; j < i; ++j) {
        const double aij = tab_.at(i, j);
        if (aij != 0.0) axpy(S(h * aij), ybar_i, kbar_[j]);
      }
    }
    deep_copy(lambda, tmp_);
  }

  const ButcherTableau& tableau() const { return tab_; }

 private:
  template <class Coef>
  void combine(const V& out, const V& y, double h, int count, Coef coef) {
    std::array<double, 16> c{};
    std::array<const V*, 16> x{};
    int n = 0;
    c[n] = 1.0;
    x[n++] = &y;
    for (int j = 0; j < count; ++j) {
      const double cj = coef(j);
      if (cj == 0.0) continue;
      c[n] = h * cj;
      x[n++] = &slopes_[j];
    }
    linear_combination(out, std::span<const double>(c.data(), n),
                       std::span<const V* const>(x.data(), n));
  }

  ButcherTableau tab_;
  std::vector<V> stages_, slopes_, kbar_;
  V tmp_;
};

}  // namespace costate::ode
