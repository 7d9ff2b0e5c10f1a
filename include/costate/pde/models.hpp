#pragma once
/// \file
/// Built-in stencil models (the model contract is in stencil.hpp), each
/// written once on its scalar types.
///
/// Heat2D — heat equation with a spatially varying conductivity κ(x, y) (a
/// parameter field) and a source of amplitude q₀ (a scalar parameter):
///     u_t = ∇·(κ ∇u) + q₀ s(x, y),   s = exp(−|x − c|² / (2 σ²)),
/// cell-centred finite volumes: the flux through the face between cells P
/// and E is κ_{PE} (u_E − u_P)/h with κ_{PE} = (κ_P + κ_E)/2, so
///     f_P = Σ_{faces} κ_face (u_nb − u_P)/h² + q₀ s(x_P, y_P).
/// Linear in u (the Jacobian does not depend on u) and in κ.
///
/// GrayScott2D — Gray–Scott reaction–diffusion, two components (u, v),
/// scalar parameters (D_u, D_v, F, k):
///     u_t = D_u ∇²u − u v² + F (1 − u),
///     v_t = D_v ∇²v + u v² − (F + k) v,
/// with the 5-point Laplacian.

#include <Kokkos_Core.hpp>

#include "costate/ad/detail/kokkos_math.hpp"
#include "costate/pde/stencil.hpp"

namespace costate::pde {

struct Heat2D {
  static constexpr int dim = 2;
  static constexpr int components = 1;
  static constexpr int stencil_width = 1;
  static constexpr bool star = true;
  static constexpr int field_parameters = 1;   // κ
  static constexpr int scalar_parameters = 1;  // q₀
  static constexpr bool linear_in_state = true;
  static constexpr bool autonomous = true;  // f does not depend on t

  double centre_x = 0.5, centre_y = 0.5, sigma = 0.1;

  template <class T, class U, class A>
  KOKKOS_INLINE_FUNCTION void rhs(const Point& p, const Stencil<U>& u, const Stencil<A>& kappa,
                                  const T* q, T* dudt) const {
    const U& uP = u(0);
    const A& kP = kappa(0);
    // Face conductivities (arithmetic means) times the differences.
    const T flux_x = 0.5 * (kP + kappa(0, 1, 0)) * (u(0, 1, 0) - uP) -
                     0.5 * (kP + kappa(0, -1, 0)) * (uP - u(0, -1, 0));
    const T flux_y = 0.5 * (kP + kappa(0, 0, 1)) * (u(0, 0, 1) - uP) -
                     0.5 * (kP + kappa(0, 0, -1)) * (uP - u(0, 0, -1));
    const double dx = p.x - centre_x, dy = p.y - centre_y;
    const double source = ad::detail::kmath::exp(-(dx * dx + dy * dy) / (2.0 * sigma * sigma));
    dudt[0] = flux_x / (p.hx * p.hx) + flux_y / (p.hy * p.hy) + q[0] * source;
  }
};

struct GrayScott2D {
  static constexpr int dim = 2;
  static constexpr int components = 2;
  static constexpr int stencil_width = 1;
  static constexpr bool star = true;
  static constexpr int field_parameters = 0;
  static constexpr int scalar_parameters = 4;  // D_u, D_v, F, k
  static constexpr bool linear_in_state = false;
  static constexpr bool autonomous = true;

  template <class T, class U, class A>
  KOKKOS_INLINE_FUNCTION void rhs(const Point& p, const Stencil<U>& s, const Stencil<A>&,
                                  const T* q, T* dudt) const {
    const T& Du = q[0];
    const T& Dv = q[1];
    const T& F = q[2];
    const T& k = q[3];
    const U& u = s(0);
    const U& v = s(1);
    const double ihx2 = 1.0 / (p.hx * p.hx), ihy2 = 1.0 / (p.hy * p.hy);
    const U lap_u = (s(0, 1, 0) - 2.0 * u + s(0, -1, 0)) * ihx2 + (s(0, 0, 1) - 2.0 * u + s(0, 0, -1)) * ihy2;
    const U lap_v = (s(1, 1, 0) - 2.0 * v + s(1, -1, 0)) * ihx2 + (s(1, 0, 1) - 2.0 * v + s(1, 0, -1)) * ihy2;
    const U uvv = u * v * v;
    dudt[0] = Du * lap_u - uvv + F * (1.0 - u);
    dudt[1] = Dv * lap_v + uvv - (F + k) * v;
  }
};

}  // namespace costate::pde
