#pragma once
// Internals of nonlinear::solve on ad::Reverse<ad::Dual<double, 1>>
// (forward over reverse: Hessian–vector products through a solve). Not a
// public header.
//
// The parameters carry a direction ṗ (their Dual tangents). Along it the
// solution moves by ẋ = −J⁻¹ F_p ṗ (J = ∂F/∂x), and the adjoint rule
//     λ = J⁻ᵀ x̄,   p̄ −= F_pᵀ λ
// is differentiated too (x̄ arrives as a Dual: x̄ + ε x̄̇):
//     λ̇ = J⁻ᵀ (x̄̇ − J̇ᵀ λ),   p̄̇ −= Ḟ_pᵀ λ + F_pᵀ λ̇,
// with J̇ = d/dε J(x + εẋ, p + εṗ) and Ḟ_p likewise. J, J̇, F_p, Ḟ_p come
// from evaluations of F on Dual<Dual<double, 1>, 8>: outer tangents pick
// the columns (of x, then of p), the inner tangent carries the direction.

#include <Eigen/Core>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/linear/solve.hpp"
#include "costate/nonlinear/detail/jacobian.hpp"
#include "costate/nonlinear/detail/newton.hpp"

namespace costate::nonlinear::detail {

/// J, J̇ (n × n) and F_p, Ḟ_p (n × np) at (x + εẋ, p + εṗ), dense.
template <class Fref>
void nested_jacobians(const Fref& f, std::span<const double> x, std::span<const double> xdot,
                      std::span<const double> p, std::span<const double> pdot, Eigen::MatrixXd& j,
                      Eigen::MatrixXd& jdot, Eigen::MatrixXd& fp, Eigen::MatrixXd& fpdot) {
  using D1 = ad::Dual<double, 1>;
  using DD = ad::Dual<D1, kChunk>;
  const int n = static_cast<int>(x.size()), np = static_cast<int>(p.size());
  j.resize(n, n);
  jdot.resize(n, n);
  fp.resize(n, np);
  fpdot.resize(n, np);
  std::vector<DD> xd(x.size()), pd(p.size()), rd(x.size());
  for (int i = 0; i < n; ++i) xd[static_cast<std::size_t>(i)] = DD(D1(x[static_cast<std::size_t>(i)], {xdot[static_cast<std::size_t>(i)]}));
  for (int k = 0; k < np; ++k) pd[static_cast<std::size_t>(k)] = DD(D1(p[static_cast<std::size_t>(k)], {pdot[static_cast<std::size_t>(k)]}));
  auto seed = [&](int c) -> DD& {
    return c < n ? xd[static_cast<std::size_t>(c)] : pd[static_cast<std::size_t>(c - n)];
  };
  for (int c0 = 0; c0 < n + np; c0 += kChunk) {
    const int width = std::min(kChunk, n + np - c0);
    for (int k = 0; k < width; ++k) seed(c0 + k).tangent(k) = D1(1.0);
    std::fill(rd.begin(), rd.end(), DD(0.0));
    f(std::span<const DD>(xd), std::span<const DD>(pd), std::span<DD>(rd));
    for (int k = 0; k < width; ++k) {
      const int c = c0 + k;
      seed(c).tangent(k) = D1(0.0);
      for (int i = 0; i < n; ++i) {
        const D1& t = rd[static_cast<std::size_t>(i)].tangent(k);
        if (c < n) {
          j(i, c) = t.value();
          jdot(i, c) = t.tangent(0);
        } else {
          fp(i, c - n) = t.value();
          fpdot(i, c - n) = t.tangent(0);
        }
      }
    }
  }
}

/// What the forward-over-reverse node keeps: the factorised J and the
/// first and directional second derivatives at (x*, p) along (ẋ, ṗ).
class SecondOrderDerivative {
 public:
  template <class Fref>
  SecondOrderDerivative(const Fref& f, std::vector<double> x, const std::vector<double>& p,
                        const std::vector<double>& pdot) {
    const std::vector<double> zero(x.size(), 0.0);
    // J and F_p first (J̇ of this pass is discarded: ẋ is not known yet) ...
    nested_jacobians(f, x, zero, p, pdot, j_, jdot_, fp_, fpdot_);
    lu_ = std::make_shared<const linear::detail::DenseFactor>(j_);
    const double rcond = lu_->rcond();
    if (lu_->has_zero_pivot() || !(rcond >= kSingularRcond))
      throw Error("nonlinear::solve: dF/dx is singular at the solution (reciprocal condition estimate " +
                  costate::detail::format_value(rcond) +
                  "), so the solution is not a differentiable function of the parameters there");
    // ... then ẋ = −J⁻¹ F_p ṗ, and J̇, Ḟ_p along (ẋ, ṗ).
    const Eigen::VectorXd pd = Eigen::Map<const Eigen::VectorXd>(pdot.data(), static_cast<Eigen::Index>(pdot.size()));
    const Eigen::VectorXd xd = -lu_->solve(fp_ * pd);
    xdot_.assign(xd.data(), xd.data() + xd.size());
    nested_jacobians(f, x, xdot_, p, pdot, j_, jdot_, fp_, fpdot_);
  }

  const std::vector<double>& xdot() const { return xdot_; }

  /// λ = J⁻ᵀ a, λ̇ = J⁻ᵀ (ȧ − J̇ᵀ λ); g = F_pᵀ λ, ġ = Ḟ_pᵀ λ + F_pᵀ λ̇.
  void reverse(const Eigen::VectorXd& a, const Eigen::VectorXd& adot, Eigen::VectorXd& g,
               Eigen::VectorXd& gdot) const {
    const Eigen::VectorXd lambda = lu_->solve_transpose(a);
    const Eigen::VectorXd lambda_dot = lu_->solve_transpose(adot - jdot_.transpose() * lambda);
    g = fp_.transpose() * lambda;
    gdot = fpdot_.transpose() * lambda + fp_.transpose() * lambda_dot;
  }

 private:
  Eigen::MatrixXd j_, jdot_, fp_, fpdot_;
  std::shared_ptr<const linear::detail::DenseFactor> lu_;
  std::vector<double> xdot_;
};

}  // namespace costate::nonlinear::detail
