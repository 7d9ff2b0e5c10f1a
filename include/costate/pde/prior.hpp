#pragma once
/// \file
/// pde::Prior — a quadratic regularisation / Gaussian prior on a parameter
/// field m (one value per cell of a pde::Grid with dof 1, e.g. the field
/// grid of an Operator), with mean m₀:
///     R(m) = ½ (m − m₀)ᵀ 𝐑 (m − m₀),   ∇R = 𝐑 (m − m₀),   ∇²R v = 𝐑 v.
///
/// Discretisation (cell-centred finite volumes, V = Π h_d the cell volume):
///     M = V I                                   (the lumped mass matrix)
///     (K v)_P = Σ_faces V (v_P − v_N) / h_d²    (−Δ_h scaled by V; faces
///               on a non-periodic boundary carry no flux: natural Neumann)
///     A = γ K + δ M                             (A ≈ V(−γΔ + δ), SPD)
/// and the three kinds
///     L2          𝐑 = δ M               R = ½ δ ‖m − m₀‖²_{L²}
///     H1          𝐑 = A = γK + δM       R = ½ (γ ‖∇m‖² + δ ‖m‖²) (discrete)
///     BiLaplacian 𝐑 = A M⁻¹ A           the Gaussian N(m₀, Γ) with the
///                 covariance Γ = 𝐑⁻¹ = A⁻¹ M A⁻¹, i.e. the operator
///                 (−γΔ + δ)⁻² in the L² inner product (hIPPYlib's form);
///                 its pointwise variance ~ 1/(4π γ δ) (2-D, ν = 1 Matérn,
///                 correlation length ~ √(8γ/δ)) away from the boundary.
/// The preconditioner of Newton-CG is 𝐑⁻¹ (apply_inverse): M⁻¹/δ for L2
/// (no solve), one KSP solve with A for H1, two for BiLaplacian (CG on the
/// SPD A; options prefix "prior_": -prior_ksp_type, -prior_pc_type …).
/// sample() draws m₀ + A⁻¹ M^{1/2} ξ, ξ ~ N(0, I) (covariance A⁻¹MA⁻¹): the
/// noise is a hash of the global cell index and the seed
/// (standard_normal_field), so a sample is the same field on any number of
/// ranks (to the solver tolerance).
/// pointwise_variance() is diag(𝐑⁻¹), the prior variance of every cell,
/// exactly (no sampling): A is diagonalised by products of the 1-D
/// eigenvectors of its axes — cosines cos(πk(i+½)/n) along a no-flux axis
/// (eigenvalue c(2 − 2cos(πk/n)), c = γV/h²), Fourier modes along a
/// periodic one (c(2 − 2cos(2πk/n))) — so diag f(A)_i = Σ_k φ_k(i)² f(μ_k)
/// with f(μ) = V/μ² (BiLaplacian), 1/μ (H1), and 1/(δV) for L2. Summed
/// axis by axis, O(N Σ_d n_d) flops, in a fixed order: bitwise the same on
/// any rank count; round-off only (sums of positive terms).
///
/// Collective over the grid's communicator: every member taking a vector.
/// The grid must outlive the prior. Not thread-safe (work vectors).

#include <cstdint>
#include <memory>
#include <string>

#include "costate/linear/ksp_options.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/matrix.hpp"

namespace costate::pde {

enum class PriorKind { L2, H1, BiLaplacian };
std::string to_string(PriorKind k);
/// "l2" | "h1" | "bilaplacian"; an error lists the valid names.
PriorKind prior_kind_from_string(const std::string& name);

struct PriorOptions {
  PriorKind kind = PriorKind::BiLaplacian;
  double gamma = 1.0;  ///< γ, the weight of the gradient term (> 0; unused by L2)
  double delta = 1.0;  ///< δ, the weight of the value term (> 0)
  /// Solves with A (H1, BiLaplacian): CG, tight (the prior is part of every
  /// Hessian action of Newton-CG).
  linear::KspOptions ksp{.ksp_type = "cg", .rtol = 1e-12, .atol = 1e-50, .options_prefix = "prior_"};
  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const;
};

/// out_i = ξ(seed, global cell index of i), independent standard normal
/// numbers (splitmix64 + Box–Muller): the same field on any rank count.
/// `grid` has dof 1.
void standard_normal_field(const Grid& grid, std::uint64_t seed, const GlobalVector& out);
/// A seed for member `index` of stream `stream` derived from `seed`
/// (splitmix64 of the three): distinct noise fields for Ω's columns,
/// samples, … from one user seed.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

class Prior {
 public:
  /// A prior on fields of `grid` (dof 1) with mean `mean` (owned entries;
  /// copied). Collective (assembles A, sets up its KSP).
  Prior(const Grid& grid, const PriorOptions& options, const GlobalVector& mean);
  ~Prior();
  Prior(Prior&&) noexcept;
  Prior& operator=(Prior&&) noexcept;

  /// R(m) = ½ (m − m₀)ᵀ 𝐑 (m − m₀).
  double value(const GlobalVector& m) const;
  /// g = 𝐑 (m − m₀) (overwritten); returns R(m).
  double gradient(const GlobalVector& m, const GlobalVector& g) const;
  /// out = 𝐑 v (the Hessian action).
  void apply(const GlobalVector& v, const GlobalVector& out) const;
  /// out = 𝐑⁻¹ v (the covariance action Γ v for BiLaplacian).
  void apply_inverse(const GlobalVector& v, const GlobalVector& out) const;
  /// out = A v and out = A⁻¹ v (H1 and BiLaplacian; for tests).
  void apply_a(const GlobalVector& v, const GlobalVector& out) const;
  void solve_a(const GlobalVector& v, const GlobalVector& out) const;
  /// A sample of the BiLaplacian prior (other kinds: costate::Error).
  void sample(std::uint64_t seed, const GlobalVector& out) const;
  /// out_i = Γ_ii = (𝐑⁻¹)_ii, the prior's pointwise variance (exact; see
  /// above). No KSP solve.
  void pointwise_variance(const GlobalVector& out) const;

  const PriorOptions& options() const { return options_; }
  const GlobalVector& mean() const { return mean_; }
  const Grid& grid() const { return *grid_; }
  double cell_volume() const { return volume_; }
  /// KSP solves with A so far, and their Krylov iterations.
  std::int64_t solves() const { return solves_; }
  std::int64_t krylov_iterations() const { return krylov_iterations_; }

 private:
  const Grid* grid_;
  PriorOptions options_;
  GlobalVector mean_, work_, work2_;
  double volume_ = 1.0;
  std::unique_ptr<Matrix> a_;
  std::unique_ptr<KrylovSolver> solver_;
  mutable std::int64_t solves_ = 0, krylov_iterations_ = 0;
};

}  // namespace costate::pde
