#pragma once
// Reading and validating PDE input files: a `pde:` section (instead of
// `model:`) with the grid, the fields, their equations, parameters and
// parameter fields; θ-method time stepping; a terminal objective; the
// discrete adjoint with checkpointing. Errors name the file, line, key and
// what was expected, as for ODE inputs (input.hpp).
//
//   pde:
//     grid: {n: [32, 32], extent: [[0, 1], [0, 1]], boundary: periodic,
//            dirichlet_value: 0, processes: [0, 0]}
//     fields: [u]
//     parameters: {q0: 1.0}                       # scalars
//     parameter_fields: {kappa: "1 + 0.5*sin(2*pi*x)"}
//     initial: {u: "exp(-50*((x-0.5)^2 + (y-0.5)^2))"}
//     equations: {u: "div_grad(kappa, u) + q0"}
//   integrator: {method: crank_nicolson | backward_euler | theta | rk4 | ssp_rk3,
//                theta: 0.5, dt: 1e-3, steps: 50, ksp_rtol: 1e-14}
//               (rk4, ssp_rk3: explicit Runge-Kutta, pde::ExplicitRkIntegrator;
//                no theta, ksp_rtol or newton_rtol)
//   objective: {integral: u} | {probe: {cell: [8, 8], field: u}}
//              | {misfit: {u: "expression of x, y, z"}}
//   sensitivity: {method: discrete_adjoint,
//                 checkpointing: {schedule: store_all | binomial, snapshots: 4}}
//   output: {file: out.h5, every: 10}

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costate/ode/checkpointing.hpp"
#include "costate/pde/equation_model.hpp"
#include "costate/pde/explicit_rk.hpp"
#include "costate/pde/operator.hpp"
#include "costate/pde/theta.hpp"

namespace costate::io {

struct PdeObjectiveConfig {
  bool present = false;
  std::string kind;          ///< "integral" | "probe" | "misfit"
  int component = 0;         ///< integral, probe
  std::array<std::int64_t, 3> cell{0, 0, 0};  ///< probe
  std::vector<std::string> data;  ///< misfit: one expression of x, y, z per field
};

struct PdeConfig {
  std::string input_path;
  std::string description;
  pde::EquationSpec equations;              ///< dim, names, equations
  std::vector<double> parameters;           ///< values of equations.parameters
  std::vector<std::string> parameter_fields;  ///< expressions, one per parameter field
  std::vector<std::string> initial;         ///< expressions, one per field
  pde::Domain domain;
  pde::ThetaOptions integrator;  ///< t0, dt, steps for every method; θ and KSP for the θ-method
  std::string method = "crank_nicolson";
  /// Set for method rk4 / ssp_rk3 (then the run uses pde::ExplicitRkIntegrator).
  std::optional<pde::ExplicitRkOptions> explicit_rk;
  PdeObjectiveConfig objective;
  ode::Checkpointing checkpointing = ode::StoreAll{};
  std::string output_file;
  std::int64_t output_every = 0;  ///< 0: initial and final frames only

  /// The resolved settings as YAML (written into the output).
  std::string to_yaml() const;
};

/// True when the YAML file at `path` has a top-level `pde:` key (then it is
/// read with load_pde_config, not load_run_config). Unreadable files: false
/// (load_run_config reports them).
bool is_pde_input(const std::string& path);

/// Reads `path`, applies `overrides` ("key.path=value"), validates and
/// resolves. Throws costate::Error with file:line:column on bad input.
PdeConfig load_pde_config(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace costate::io
