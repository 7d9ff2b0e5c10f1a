#pragma once
// The `calibration:` section of a PDE input (pde_input.hpp): a parameter-
// field inversion for `costate calibrate` (docs/pde_inverse.md). Errors name
// the file, line, key and what was expected.
//
//   calibration:
//     field: kappa                                # the parameter field to infer
//     log: true                                   # infer m = log(kappa)
//     sensors: {file: sensors.csv, field: u, sigma: 0.01}
//     prior: {kind: bilaplacian | h1 | l2, gamma: 1, delta: 5, mean: "log(0.1)"}
//     optimizer: {method: newton_cg | lbfgs, max_iterations: 30, gradient_rtol: 1e-8,
//                 gradient_atol: 0, gauss_newton_iterations: 3, cg_max_iterations: 200,
//                 eta_max: 0.5}
//     posterior: {rank: 20, oversampling: 10, samples: 3, seed: 1,
//                 hessian: gauss_newton | exact}    # the Laplace posterior at the MAP point

#include <string>
#include <vector>

#include "costate/io/pde_input.hpp"
#include "costate/pde/laplace.hpp"

namespace costate::io {

struct PdeCalibrationConfig {
  bool present = false;
  std::string field;             ///< the parameter field to infer
  bool log_form = false;         ///< m = log(field)
  std::string sensors_file;      ///< resolved against the input's directory
  int sensors_component = 0;     ///< the observed state field
  double sigma = 0.0;            ///< default noise σ (0: the CSV's sigma column)
  pde::PriorOptions prior;
  std::string prior_mean = "0";  ///< expression of the coordinates and parameters (in m)
  pde::InversionOptions optimizer;
  bool posterior = false;  ///< a `posterior:` key: the Laplace posterior at the MAP point
  pde::LaplaceOptions posterior_options;
};

/// Reads the `calibration:` section of the PDE input at `path` (with the
/// same `overrides` as load_pde_config, whose result `cfg` names the fields
/// and parameters); `present` is false without one. Throws costate::Error
/// with file:line:column on bad input.
PdeCalibrationConfig load_pde_calibration(const std::string& path, const std::vector<std::string>& overrides,
                                          const PdeConfig& cfg);

}  // namespace costate::io
