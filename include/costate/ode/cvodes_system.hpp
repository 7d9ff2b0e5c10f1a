#pragma once
/// \file
/// The dense forward-mode [∂f/∂y | ∂f/∂p] of one templated model's rhs and
/// its products f_yᵀλ, f_pᵀλ — today used only by the native continuous
/// adjoint (detail/continuous_adjoint.hpp, which keeps its own per-model
/// path until it moves onto ode::System). The CVODES backend no longer uses
/// it: it runs on the compiled ode::System (cvodes::Binding,
/// src/ode/cvodes_system.cpp).

#include <algorithm>
#include <span>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ode/problem.hpp"

namespace costate::ode::detail {

/// Forward-mode derivatives of one model's rhs at fixed parameters p.
template <Model M>
class CvodesDerivatives {
 public:
  static constexpr int kChunk = 8;
  using D = ad::Dual<double, kChunk>;

  CvodesDerivatives(const M& model, std::span<const double> p, std::size_t n)
      : model_(model), p_(p.begin(), p.end()), n_(n), np_(p.size()), yd_(n), pd_(p.size()),
        fd_(n), y_cached_(n) {}

  std::size_t n() const { return n_; }
  std::size_t np() const { return np_; }
  /// [∂f/∂y | ∂f/∂p] at (t, y), column-major n × (n + np); cached.
  const std::vector<double>& jacobian_state_parameters(double t, const double* y) {
    if (cached_ && t == t_cached_ && std::equal(y, y + n_, y_cached_.begin())) return jp_;
    ++jacobian_evaluations;
    const std::size_t m = n_ + np_;
    jp_.resize(n_ * m);  // on first use only: large systems take the tape instead
    for (std::size_t first = 0; first < m; first += kChunk) {
      for (std::size_t i = 0; i < n_; ++i) {
        yd_[i] = D(y[i]);
        if (i >= first && i < first + kChunk) yd_[i].tangent(static_cast<int>(i - first)) = 1.0;
      }
      for (std::size_t j = 0; j < np_; ++j) {
        pd_[j] = D(p_[j]);
        const std::size_t c = n_ + j;
        if (c >= first && c < first + kChunk) pd_[j].tangent(static_cast<int>(c - first)) = 1.0;
      }
      eval(t);
      const std::size_t cols = std::min<std::size_t>(kChunk, m - first);
      for (std::size_t c = 0; c < cols; ++c)
        for (std::size_t r = 0; r < n_; ++r)
          jp_[(first + c) * n_ + r] = fd_[r].tangent(static_cast<int>(c));
    }
    std::copy(y, y + n_, y_cached_.begin());
    t_cached_ = t;
    cached_ = true;
    return jp_;
  }

  /// f_yᵀ λ and f_pᵀ λ from the cached dense [f_y | f_p].
  void vjp_dense(double t, const double* y, const double* lambda, double* fy_lambda,
                 double* fp_lambda) {
    const std::vector<double>& jp = jacobian_state_parameters(t, y);
    for (std::size_t c = 0; c < n_ + np_; ++c) {
      double s = 0.0;
      const double* col = jp.data() + c * n_;
      for (std::size_t r = 0; r < n_; ++r) s += col[r] * lambda[r];
      if (c < n_)
        fy_lambda[c] = s;
      else
        fp_lambda[c - n_] = s;
    }
  }

  std::int64_t jacobian_evaluations = 0;

 private:
  void eval(double t) {
    model_.template rhs<D>(t, std::span<const D>(yd_), std::span<const D>(pd_),
                           std::span<D>(fd_));
  }

  const M& model_;
  std::vector<double> p_;
  std::size_t n_, np_;
  std::vector<D> yd_, pd_, fd_;
  std::vector<double> jp_, y_cached_;
  double t_cached_ = 0.0;
  bool cached_ = false;
};

}  // namespace costate::ode::detail
