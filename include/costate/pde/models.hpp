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
///
/// Burgers1D / Burgers2D — viscous Burgers equation (scalar), scalar
/// parameters (ν, A): viscosity and forcing amplitude,
///     1-D: u_t + (½u²)_x             = ν u_xx     + A sin(k x),
///     2-D: u_t + (½u²)_x + (½u²)_y   = ν ∇²u      + A sin(k x) sin(k y),
/// k = `wavenumber` (2π: one period on [0, 1]). Convection is CONSERVATIVE
/// and central: the flux through the face between P and its neighbour N is
/// ½ ū², ū = (u_P + u_N)/2 the face average, so
///     f_P = −(F_e − F_w)/h_x [− (F_n − F_s)/h_y] + ν Δ_h u + forcing,
/// second-order, smooth in u (no limiter, no upwind switch: the coloured
/// Jacobian, Newton and the Taylor tests see a C^∞ residual), and Σ_P f_P
/// telescopes (mass is conserved up to boundary fluxes and forcing). A
/// Dirichlet ghost u_{−1} = 2g − u_0 makes the boundary face average g.
/// Limitation: central convection needs the cell Péclet number
/// |u| h / ν ≤ 2 for non-oscillatory solutions — resolve the viscous
/// scale. Nonlinear in u (the θ integrator runs Newton); linear in ν, A.
/// The 2-D model is the scalar equation with the convection velocity
/// (u, u) — along the diagonal; it is not the two-component Burgers system.

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

struct Burgers1D {
  static constexpr int dim = 1;
  static constexpr int components = 1;
  static constexpr int stencil_width = 1;
  static constexpr bool star = true;
  static constexpr int field_parameters = 0;
  static constexpr int scalar_parameters = 2;  // ν, A
  static constexpr bool linear_in_state = false;
  static constexpr bool autonomous = true;

  double wavenumber = 6.283185307179586;  ///< k of the forcing A sin(k x)

  template <class T, class U, class A>
  KOKKOS_INLINE_FUNCTION void rhs(const Point& p, const Stencil<U>& u, const Stencil<A>&,
                                  const T* q, T* dudt) const {
    const T& nu = q[0];
    const T& amplitude = q[1];
    const U& uP = u(0);
    const U& uE = u(0, 1);
    const U& uW = u(0, -1);
    const U ue = 0.5 * (uP + uE), uw = 0.5 * (uP + uW);
    const U convection = 0.5 * (ue * ue - uw * uw) / p.hx;
    const U diffusion = (uE - 2.0 * uP + uW) / (p.hx * p.hx);
    dudt[0] = nu * diffusion - convection + amplitude * ad::detail::kmath::sin(wavenumber * p.x);
  }
};

struct Burgers2D {
  static constexpr int dim = 2;
  static constexpr int components = 1;
  static constexpr int stencil_width = 1;
  static constexpr bool star = true;
  static constexpr int field_parameters = 0;
  static constexpr int scalar_parameters = 2;  // ν, A
  static constexpr bool linear_in_state = false;
  static constexpr bool autonomous = true;

  double wavenumber = 6.283185307179586;  ///< k of the forcing A sin(k x) sin(k y)

  template <class T, class U, class A>
  KOKKOS_INLINE_FUNCTION void rhs(const Point& p, const Stencil<U>& u, const Stencil<A>&,
                                  const T* q, T* dudt) const {
    const T& nu = q[0];
    const T& amplitude = q[1];
    const U& uP = u(0);
    const U ue = 0.5 * (uP + u(0, 1, 0)), uw = 0.5 * (uP + u(0, -1, 0));
    const U un = 0.5 * (uP + u(0, 0, 1)), us = 0.5 * (uP + u(0, 0, -1));
    const U convection = 0.5 * (ue * ue - uw * uw) / p.hx + 0.5 * (un * un - us * us) / p.hy;
    const U diffusion = (u(0, 1, 0) - 2.0 * uP + u(0, -1, 0)) / (p.hx * p.hx) +
                        (u(0, 0, 1) - 2.0 * uP + u(0, 0, -1)) / (p.hy * p.hy);
    const double forcing =
        ad::detail::kmath::sin(wavenumber * p.x) * ad::detail::kmath::sin(wavenumber * p.y);
    dudt[0] = nu * diffusion - convection + amplitude * forcing;
  }
};

}  // namespace costate::pde
