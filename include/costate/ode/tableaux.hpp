#pragma once
/// \file
/// Explicit Runge–Kutta tableaux beyond ode::Method's (explicit_rk.hpp):
/// the same table (src/ode/explicit_rk.cpp), for steppers that name a
/// method the ODE options do not list yet.

#include "costate/ode/explicit_rk.hpp"

namespace costate::ode {

/// The strong-stability-preserving 3-stage, 3rd-order method of Shu and
/// Osher (1988), SSP coefficient 1 (forward Euler's strong stability, in
/// any convex functional, for steps up to forward Euler's limit):
///     Y_2 = y + h K_1,  Y_3 = y + h/4 (K_1 + K_2),  y' = y + h/6 (K_1 + K_2 + 4 K_3),
/// i.e. c = (0, 1, ½), a_21 = 1, a_31 = a_32 = ¼, b = (⅙, ⅙, ⅔). Used by
/// pde::ExplicitRkIntegrator (method ssp_rk3). Not yet an ode::Method: the
/// ODE steppers and ExplicitRkScheme take any tableau, so adding the enum
/// value is all the ODE side needs.
ButcherTableau ssp_rk3_tableau();

}  // namespace costate::ode
