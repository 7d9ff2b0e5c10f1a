#pragma once
/// \file
/// Viscous Burgers' equation by the method of lines, with its own reverse
/// rule: a library model for large explicit ODEs (workload W1 of
/// BENCHMARKS.md written as an ODE) and the worked example of a C++ model
/// that differentiates itself.
///
/// u_t + (u²/2)_x = ν u_xx on the periodic unit interval, N cells of width
/// h = 1/N, the local Lax–Friedrichs (Rusanov) flux at the faces and central
/// diffusion; p = (ν):
///
///   F(a, b) = (a² + b²)/4 − max(|a|, |b|) (b − a)/2,
///   u_i' = −(F(u_i, u_{i+1}) − F(u_{i−1}, u_i))/h + ν (u_{i−1} − 2u_i + u_{i+1})/h².
///
/// ## A model's own reverse rule
///
/// Besides the templated `rhs` (used for forward sensitivities, Newton
/// Jacobians and sparsity detection), a model may provide
///
///   std::size_t vjp_workspace() const;          // doubles one linearization keeps
///   void linearize(double t, std::span<const double> y, std::span<const double> p,
///                  std::span<double> f, std::span<double> work) const;  // f = f(t, y, p)
///   void vjp(std::span<double> work, std::span<const double> w,
///            std::span<double> ybar, std::span<double> pbar) const;
///            // ybar = f_yᵀ w (assigned), pbar += f_pᵀ w, at the point `work` holds
///
/// (ode::detail::HasOwnVjp), and optionally
///
///   void linearize_point(double t, std::span<const double> y, std::span<const double> p,
///                        std::span<double> work) const;  // linearize without f
///
/// (ode::detail::HasOwnVjpPoint: the reverse sweep of an explicit RK step
/// does not use the last stage's slope, so it linearizes there without
/// one — for explicit Euler, every reverse step). ode::System then forms every f_yᵀ w and f_pᵀ w
/// of a discrete adjoint with these — no Dual Jacobian, colouring or tape —
/// whenever SystemOptions::jacobian is Automatic and the objective has no
/// running cost (a running cost's integrand joins f, which the model's rule
/// does not cover). A wrong rule gives a wrong gradient: check it with
/// `ode::gradient(…, Forward{})` or central differences, as
/// tests/ode/equation_model_test.cpp does for this model.
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::ode {

struct Burgers1D {
  std::size_t cells = 0;  ///< N (the state size)

  template <class T>
  void rhs(double, std::span<const T> u, std::span<const T> p, std::span<T> dudt) const {
    const std::size_t n = u.size();
    const double inv_h = static_cast<double>(n);
    const T c = p[0] * (inv_h * inv_h);
    // Each interior face's flux is formed twice (as cell i's right face
    // and cell i+1's left one): no value carried from one cell to the next,
    // so the loop vectorises on double; the periodic ends are peeled off.
    dudt[0] = -inv_h * (flux(u[0], u[1]) - flux(u[n - 1], u[0])) +
              c * (u[1] - 2.0 * u[0] + u[n - 1]);
    for (std::size_t i = 1; i + 1 < n; ++i)
      dudt[i] = -inv_h * (flux(u[i], u[i + 1]) - flux(u[i - 1], u[i])) +
                c * (u[i + 1] - 2.0 * u[i] + u[i - 1]);
    dudt[n - 1] = -inv_h * (flux(u[n - 1], u[0]) - flux(u[n - 2], u[n - 1])) +
                  c * (u[0] - 2.0 * u[n - 1] + u[n - 2]);
  }

  template <class T>
  static T flux(const T& a, const T& b) {
    using std::fabs;
    using std::max;
    return T(0.25 * (a * a + b * b) - 0.5 * max(fabs(a), fabs(b)) * (b - a));
  }

  // The reverse rule (see the file comment): `work` keeps u and ν, and n
  // doubles of scratch for vjp.
  std::size_t vjp_workspace() const { return 2 * cells + 1; }
  void linearize(double t, std::span<const double> u, std::span<const double> p,
                 std::span<double> f, std::span<double> work) const;
  void linearize_point(double t, std::span<const double> u, std::span<const double> p,
                       std::span<double> work) const;
  void vjp(std::span<double> work, std::span<const double> w, std::span<double> ubar,
           std::span<double> pbar) const;

};


// Inline, like the templated rhs: the rule is compiled with the caller's
// flags (vectorised for its target), as a user's own model would be.
namespace detail {
// F̄ ∂F/∂a and F̄ ∂F/∂b of the Rusanov flux at one face, with max and |·|
// differentiated as ad::Dual does (max(x, y) = y > x ? y : x, so a tie
// takes the first argument; |x|' = sign(x), 0 at 0): the rule's products
// equal the Dual Jacobian's to round-off. Branch-free, so that the loops
// over the faces vectorise: copysign(1, x) differs from sign(x) only at
// x = 0, where its factor (b − a)/2 is 0 — a = 0 with |a| winning means
// b = 0; b winning means |b| > |a| ≥ 0.
inline void burgers_flux_adjoint(double a, double b, double fbar, double& abar, double& bbar) {
  const double fa = std::fabs(a), fb = std::fabs(b);
  const double r = fb > fa ? 1.0 : 0.0;  // 1 where |b| is the max
  const double m = fb > fa ? fb : fa;
  const double jump = 0.5 * (b - a);
  abar = fbar * (0.5 * a + 0.5 * m - jump * ((1.0 - r) * std::copysign(1.0, a)));
  bbar = fbar * (0.5 * b - 0.5 * m - jump * (r * std::copysign(1.0, b)));
}

}  // namespace detail

inline void Burgers1D::linearize(double t, std::span<const double> u, std::span<const double> p,
                          std::span<double> f, std::span<double> work) const {
  linearize_point(t, u, p, work);
  rhs<double>(t, u, p, f);
}

inline void Burgers1D::linearize_point(double, std::span<const double> u,
                                       std::span<const double> p, std::span<double> work) const {
  COSTATE_CHECK(u.size() == cells && cells >= 3 && p.size() == 1 && work.size() == 2 * cells + 1,
                "Burgers1D: " << u.size() << " states for " << cells
                              << " cells (at least 3) and " << p.size() << " parameters (1: nu)");
  for (std::size_t i = 0; i < cells; ++i) work[i] = u[i];
  work[cells] = p[0];
}

inline void Burgers1D::vjp(std::span<double> work, std::span<const double> wspan,
                          std::span<double> ubar_span, std::span<double> pbar) const {
  const std::size_t n = cells;
  // Distinct arrays (work, w and ūbar never overlap): restrict lets the
  // face loops vectorise without run-time overlap checks.
  const double* __restrict u = work.data();
  const double* __restrict w = wspan.data();
  double* __restrict ubar = ubar_span.data();
  double* __restrict right_bar = work.data() + n + 1;  // scratch: F̄_k ∂F_k/∂b per face
  const double nu = work[n];
  const double inv_h = static_cast<double>(n), inv_h2 = inv_h * inv_h;
  // Face k lies between cells k and k+1 (mod n): F_k enters f_k with −1/h
  // and f_{k+1} with +1/h, so F̄_k = (w_{k+1} − w_k)/h, and
  //   ū_i = F̄_i ∂F_i/∂a + F̄_{i−1} ∂F_{i−1}/∂b + ν/h² (w_{i−1} − 2w_i + w_{i+1}),
  //   ν̄  += Σ_i w_i (u_{i−1} − 2u_i + u_{i+1})/h².
  // First pass: ū_i = F̄_i ∂F_i/∂a, and F̄_i ∂F_i/∂b kept per face.
  for (std::size_t k = 0; k + 1 < n; ++k)
    detail::burgers_flux_adjoint(u[k], u[k + 1], inv_h * (w[k + 1] - w[k]), ubar[k],
                                 right_bar[k]);
  detail::burgers_flux_adjoint(u[n - 1], u[0], inv_h * (w[0] - w[n - 1]), ubar[n - 1],
                               right_bar[n - 1]);
  // Second pass: the left faces' parts, diffusion and ν̄ (ends peeled).
  const double c = nu * inv_h2;
  double nubar = w[0] * (u[n - 1] - 2.0 * u[0] + u[1]);
  ubar[0] += right_bar[n - 1] + c * (w[n - 1] - 2.0 * w[0] + w[1]);
  for (std::size_t i = 1; i + 1 < n; ++i) {
    ubar[i] += right_bar[i - 1] + c * (w[i - 1] - 2.0 * w[i] + w[i + 1]);
    nubar += w[i] * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
  }
  ubar[n - 1] += right_bar[n - 2] + c * (w[n - 2] - 2.0 * w[n - 1] + w[0]);
  nubar += w[n - 1] * (u[n - 2] - 2.0 * u[n - 1] + u[0]);
  pbar[0] += inv_h2 * nubar;
}

}  // namespace costate::ode
