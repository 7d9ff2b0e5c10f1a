#pragma once
/// \file
/// The Laplace approximation of the posterior of a PDE inversion at its
/// MAP point m̂ (inversion.hpp): the Gaussian N(m̂, Γ_post),
///     Γ_post = (H + Γ⁻¹)⁻¹,   H = ∇²Φ(m̂) (the data misfit's Hessian),
///     Γ = 𝐑⁻¹ the prior covariance (prior.hpp), Γ⁻¹ = 𝐑,
/// through the dominant eigenpairs of the generalized eigenproblem
///     H v = λ Γ⁻¹ v,   vᵢᵀ Γ⁻¹ vⱼ = δᵢⱼ,   λ₁ ≥ λ₂ ≥ … ,
/// as Γ_post = Γ − V D Vᵀ, D = diag(λᵢ/(1 + λᵢ)) (Sherman–Morrison–
/// Woodbury; exact when the rank r covers every λᵢ ≠ 0 — for Gauss–Newton
/// H, rank H ≤ the number of observations).
///
/// double_pass_eigensolve — the randomized double-pass algorithm for a
/// generalized eigenproblem A v = λ B v, A symmetric, B SPD (Saibaba, Lee
/// and Kitanidis 2016, Algorithm "double pass"; hIPPYlib's doublePassG),
/// with l = k + p columns (p the oversampling):
///   1. Ω: l standard normal fields (a hash of the global cell index and
///      the seed: the same Ω on any rank count);
///   2. Y = B⁻¹ A Ω                     (l actions of A, l of B⁻¹);
///   3. Q = Y made B-orthonormal by classical Gram–Schmidt in the B inner
///      product, twice ("twice is enough": QᵀBQ = I to round-off); a column
///      numerically inside span(Q) (Y rank deficient: rank A < l) is
///      replaced by a random direction (counted in random_directions);
///   4. T = Qᵀ A Q                       (l more actions of A);
///   5. T = U Λ Uᵀ (Eigen's dense symmetric eigensolver), the k largest
///      λ, V = Q U_k.
/// Accuracy: Rayleigh–Ritz on range(Q), λⱼ from below; the error of λⱼ
/// falls with the ratio λ_{l+1}/λⱼ (Halko, Martinsson and Tropp 2011;
/// Saibaba et al.), so the oversampling buys accuracy where the spectrum
/// decays; with l ≥ rank A (or l = n) exact to round-off. Reductions (the l² inner products) add
/// per-rank partials in rank order: the same bits on every run with the
/// same decomposition, round-off-level differences between rank counts.
///
/// laplace_posterior — at m̂: one linearization (1 forward + 1 adjoint PDE
/// solve), 2(k + p) Hessian actions of Φ (each 1 incremental forward + 1
/// incremental adjoint solve: 4(k + p) PDE solves), k + p covariance
/// actions Γ (two KSP solves with A each for the BiLaplacian prior), then
///   - the pointwise posterior variance diag Γ_post = diag Γ − Σᵢ dᵢ vᵢ²,
///     diag Γ exact (Prior::pointwise_variance: no sampling); the rank-r
///     truncation leaves out Σ_{i>r} dᵢ vᵢ² ≤ d_{r+1} diag Γ (because
///     Σ_all vᵢ vᵢᵀ = Γ), so the variance is high by at most
///     λ_{r+1}/(1+λ_{r+1}) · prior variance, pointwise (truncation_bound);
///   - samples m̂ + Γ_post^{1/2} ξ: a prior fluctuation s = Lξ (LLᵀ = Γ,
///     Prior::sample), then s − V P Vᵀ Γ⁻¹ s, P = diag(1 − 1/√(1 + λᵢ)):
///     covariance Γ − V(2P − P²)Vᵀ = Γ − V D Vᵀ (BiLaplacian prior only:
///     it is the one with a sampler);
///   - the effective number of parameters the data determine, Σ dᵢ.
/// Collective over the field grid's communicator.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costate/pde/inversion.hpp"

namespace costate::pde {

/// out = Op(in) on fields of one grid. Collective.
using FieldOperator = std::function<void(const GlobalVector& in, const GlobalVector& out)>;

struct EigensolveOptions {
  int rank = 20;         ///< k, the eigenpairs returned
  int oversampling = 10; ///< p, extra columns of Ω
  std::uint64_t seed = 1;
  /// Throws costate::Error naming the field, its value and the rule broken
  /// (k ≥ 1, p ≥ 0, k + p ≤ unknowns).
  void validate(std::int64_t unknowns) const;
};

struct GeneralizedEigenpairs {
  std::vector<double> values;         ///< k, descending
  std::vector<GlobalVector> vectors;  ///< B-orthonormal, vᵢ with values[i]
  /// max |VᵀBV − I| (round-off when all is well).
  double orthonormality_error = 0.0;
  int a_actions = 0, b_actions = 0, b_inverse_actions = 0;
  int random_directions = 0;  ///< columns of Y replaced (numerically dependent)
};

/// The k dominant eigenpairs of A v = λ B v by the randomized double pass
/// (see above) on fields of `grid`. Collective.
GeneralizedEigenpairs double_pass_eigensolve(const Grid& grid, const FieldOperator& a, const FieldOperator& b,
                                             const FieldOperator& b_inverse, const EigensolveOptions& options);

struct LaplaceOptions {
  EigensolveOptions eigen;
  int samples = 0;  ///< posterior samples to draw (BiLaplacian prior)
  /// Gauss–Newton (default: PSD, so λ ≥ 0 and Γ_post SPD) or the exact
  /// second-order-adjoint Hessian of Φ.
  HessianProduct hessian = HessianProduct::GaussNewton;
  void validate(std::int64_t unknowns) const;
};

struct LaplacePosterior {
  std::vector<double> eigenvalues;    ///< λ₁ ≥ … ≥ λ_k
  std::vector<GlobalVector> eigenvectors;  ///< Γ⁻¹-orthonormal
  GlobalVector variance;        ///< diag Γ_post, per cell
  GlobalVector prior_variance;  ///< diag Γ, per cell (exact)
  std::vector<GlobalVector> samples;  ///< m̂ + Γ_post^{1/2} ξ
  double effective_parameters = 0.0;  ///< Σ λ/(1+λ)
  /// λ_k/(1+λ_k): bounds the relative over-estimate of the variance by the
  /// truncation, pointwise (λ_{k+1} ≤ λ_k).
  double truncation_bound = 0.0;
  double orthonormality_error = 0.0;  ///< max |VᵀΓ⁻¹V − I|
  int hessian_actions = 0;
  PdeSolves solves;               ///< of this computation (with the linearization)
  std::int64_t prior_solves = 0;  ///< KSP solves with A
  double seconds = 0.0;
  std::string brief_report() const;
};

/// The Laplace approximation at `map` (linearizes there first). Collective.
LaplacePosterior laplace_posterior(MisfitModel& misfit, const Prior& prior, const GlobalVector& map,
                                   const LaplaceOptions& options);

}  // namespace costate::pde
