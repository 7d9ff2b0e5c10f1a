// The input-file layer's computations for equation models (typed in the
// file or imported from SBML), compiled once (io/model_kernels.hpp).
#include "io/model_kernels_impl.hpp"

template struct costate::io::detail::ModelKernels<costate::ode::EquationModel>;
