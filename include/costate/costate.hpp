#pragma once
/// \file
/// costate — adjoint sensitivities of ODE and PDE simulations.
/// `#include <costate/costate.hpp>` gives the whole public API.

#include "costate/config.hpp"
#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/core/info.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/problem.hpp"
#include "costate/tensor/reduce.hpp"
#include "costate/tensor/vector.hpp"
