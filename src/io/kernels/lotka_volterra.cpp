// The input-file layer's computations for the built-in model ode::LotkaVolterra, compiled once
// (io/model_kernels.hpp).
#include "io/model_kernels_impl.hpp"

template struct costate::io::detail::ModelKernels<costate::ode::LotkaVolterra>;
