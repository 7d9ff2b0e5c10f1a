#pragma once
/// \file
/// costate — adjoint sensitivities of ODE and PDE simulations.
/// `#include <costate/costate.hpp>` gives the whole public API.

#include "costate/config.hpp"
#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/core/info.hpp"
#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/ad/drivers.hpp"
#include "costate/ad/sparse_jacobian.hpp"
#include "costate/ad/verification.hpp"
#include "costate/expr/program.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/objective.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/problem.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/optimize/tao.hpp"
#include "costate/optimize/stochastic.hpp"
#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"
#include "costate/tensor/reduce.hpp"
#include "costate/tensor/vector.hpp"
