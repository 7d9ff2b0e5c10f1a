#pragma once
// Reading and validating `costate run` input files (YAML).
//
// Every error names the file, the line and column, the key (dotted path, e.g.
// integrator.rtol) and what was expected; an unknown key suggests the nearest
// valid one. `--set key=value` overrides are applied to the parsed tree
// before validation and are reported as "--set key=value" in errors.

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "costate/ode/checkpointing.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/support.hpp"
#include "costate/optimize/stochastic.hpp"
#include "costate/optimize/tao.hpp"
#include "costate/sbml/model.hpp"

namespace costate::io {

/// The `objective:` section: J = terminal + ∫ integral dt + ½ Σ w (y − data)².
struct ObjectiveConfig {
  bool present = false;
  std::string terminal;  ///< expression in t, states, parameters ("" = none)
  std::string integral;  ///< expression in t, states, parameters ("" = none)
  std::string data_file;  ///< CSV with header t,<state>... ("" = no data)
  std::vector<double> data_times;
  std::vector<double> data;     ///< times × states, NaN = missing
  std::vector<double> weights;  ///< one per state (1/noise² when noise is given)
};

/// The `sensitivity:` section.
struct SensitivityConfig {
  bool present = false;
  /// Parsed once, from the file's name (ode::sensitivity_kind_from_string).
  ode::SensitivityKind method = ode::SensitivityKind::DiscreteAdjoint;
  /// Parameters to report the gradient for (all when empty and not given).
  std::vector<std::string> wrt;
  bool wrt_initial_state = true;
  ode::Checkpointing checkpointing = ode::StoreAll{};
  /// continuous_adjoint / cvodes_adjoint: backward tolerances (0: the
  /// integrator's); cvodes_adjoint / idas_adjoint: steps between
  /// checkpoints (0: `auto`, by the system's size: ode::auto_checkpoint_steps)
  /// and the interpolation of the forward state ("hermite" | "polynomial").
  double adjoint_rtol = 0.0;
  double adjoint_atol = 0.0;
  long long checkpoint_steps = 0;
  std::string interpolation = "hermite";
};

/// One fitted quantity of the `calibration:` section (a parameter, or the
/// initial value of a state). Keys: calibration.parameters.<name>.{initial,
/// lower, upper, log, prior} and calibration.initial_state.<state>.{…}.
struct FitVariable {
  std::string name;            ///< parameter or state name
  bool initial_state = false;  ///< fits y(t0) of state `name`
  std::size_t index = 0;       ///< into RunConfig::parameters or ::initial_state
  double initial = 0.0;        ///< starting guess (default: the value in the file)
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
  /// Optimise q = log(value) instead of the value (value and bounds > 0).
  bool log = false;
  /// Regularisation target (default: the initial guess).
  double prior = 0.0;
  /// "alpha" or "x(t0)" — the name in reports.
  std::string label() const { return initial_state ? name + "(t0)" : name; }
};

/// A data file as the input file named it (calibration.data[i], a
/// condition's data), kept so that the settings echo (RunConfig::to_yaml)
/// writes it back as read: σ per state where `noise` gave one, the weight
/// per state where `weights` did (NaN: not given).
struct DataSpec {
  std::string file;
  std::vector<double> noise, weights;
};

/// The `calibration:` section: fit parameters (and initial states) to data
/// by weighted least squares with optional Tikhonov regularisation,
///     J(q) = ½ Σ_ki w_ki (y_i(t_k) − d_ki)² + ½ weight Σ_j (q_j − q_j,prior)²,
/// q_j = log(value) for log-transformed variables, else the value.
struct CalibrationConfig {
  bool present = false;
  std::vector<FitVariable> variables;  ///< parameters first, then initial states
  std::vector<std::string> data_files;
  std::vector<DataSpec> data_sets;  ///< the data as written in the file (one per file)
  /// All data files merged: times (ascending), values and weights (times ×
  /// states, NaN = not observed).
  std::vector<double> times, data, weights;
  /// Every observed value has a noise level σ (weight 1/σ²): the covariance
  /// is (SᵀS)⁻¹; otherwise it is scaled by σ̂² = RSS/(m − p).
  bool noise_given = true;
  double regularization_weight = 0.0;
  optimize::TaoOptions optimizer;
  /// calibration.optimizer.method adamw | adam | sgd: a mini-batch fit over
  /// the conditions (optimize::fit) with these settings instead of TAO.
  bool stochastic = false;
  optimize::StochasticOptions stochastic_options;
};

/// One experimental condition of the `conditions:` section (inline rows
/// or a CSV table): the same model with some parameters and initial values
/// replaced, and its own observations. The objective of a file with
/// conditions is Σ_c J_c in the table's order (PEtab's sum over
/// experiments); a condition's parameter taken from another parameter of
/// the file passes its gradient to that one, a parameter set to a number
/// passes none.
struct ConditionConfig {
  std::string id;
  /// Per model parameter: the index into RunConfig::parameters it takes its
  /// value from (its own index when not replaced), or -1 for the number in
  /// parameter_values.
  std::vector<long> parameter_source;
  std::vector<double> parameter_values;
  /// Per state: "" (the file's initial value), or an expression of t and
  /// the (condition's) parameters replacing it: a number, a parameter name.
  std::vector<std::string> initial_state;
  /// The observations: one CSV file (header t,<state>...), its weights per
  /// state (1/noise² when noise is given).
  std::string data_file;
  DataSpec data_spec;  ///< the data as written in the file
  std::vector<double> times, data;  ///< times × states, NaN = missing
  std::vector<double> weights;      ///< one per state
  bool noise_given = false;
  std::size_t line = 0;  ///< where it was declared (for messages)
};

/// One entry of the `events:` section of a model typed as equations, as
/// written (ode::EquationModel::Event once compiled; events.hpp gives the
/// semantics): when `trigger` (a condition, ode::Condition's grammar) turns
/// true, each state of `assign` takes its expression's value.
struct EventConfig {
  std::string name;
  std::string trigger;
  std::vector<std::pair<std::string, std::string>> assign;  ///< state -> expression, file order
  std::string delay, priority;  ///< expressions ("" = none)
  bool persistent = true, initial_value = true, use_values_from_trigger_time = true;
};

/// Everything a `costate run|sensitivity|gradcheck` needs, fully resolved
/// (defaults filled in).
struct RunConfig {
  std::string input_path;
  /// A built-in model's name, or "equations" for a model typed in the file.
  std::string model;
  /// One right-hand-side expression per state for an equation model.
  std::vector<std::string> equations;
  bool equation_model() const { return !equations.empty(); }
  /// DAEs (issue 32, `model.algebraic: {unknown: residual}`): the indices
  /// of the algebraic unknowns among state_names (after the differential
  /// states); their `equations` entries are residuals 0 = g. Only
  /// integrator.method = idas integrates them.
  std::vector<std::size_t> algebraic_states;
  /// The `events:` of a model typed as equations.
  std::vector<EventConfig> events;
  /// `model: {sbml: file}`: the imported model (model = "sbml"); its
  /// equations are an ode::EquationModel like the typed ones.
  std::string sbml_file;  ///< as resolved (relative to the input file's folder)
  std::shared_ptr<const sbml::Model> sbml;
  std::string description;
  std::vector<std::string> state_names;
  std::vector<std::string> parameter_names;
  std::vector<double> parameters;
  std::vector<double> initial_state;
  /// Initial values given as expressions of t and the parameters ("" where
  /// the value is a number); evaluated into initial_state.
  std::vector<std::string> initial_state_expressions;
  double t_start = 0.0;
  double t_end = 1.0;
  std::vector<double> output_times;
  ode::IntegratorOptions integrator;
  /// HDF5 output path; empty: no file.
  std::string output_file;
  ObjectiveConfig objective;
  SensitivityConfig sensitivity;
  CalibrationConfig calibration;
  /// The `conditions:` section (empty: one condition, the file itself);
  /// costate/io/conditions.hpp builds each condition's problem.
  std::vector<ConditionConfig> conditions;
  std::string conditions_file;  ///< the CSV table, when the section names one
  /// What loading found suspicious but not wrong (a parameter nothing uses,
  /// a state without data): every command prints these and lists them in
  /// its JSON `warnings`.
  std::vector<std::string> warnings;

  /// The resolved settings as YAML (what the run actually used); written
  /// into the HDF5 output and printed by `costate run`.
  std::string to_yaml() const;
};

/// cfg.integrator with the times every integration of the file lands on
/// (ode::IntegratorOptions::landing_times): the objective's observation
/// times, and the output times where the run lands on them (fixed steps, a
/// model with events). `costate run` and the gradient's forward pass take
/// these options, so that they take the same steps.
ode::IntegratorOptions integrator_options(const RunConfig& cfg);

/// Reads `path`, applies `overrides` ("key.path=value"), validates and
/// resolves. Throws costate::Error with file:line:column on bad input.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// A stochastic fit's settings from `overrides` alone ("calibration.optimizer.
/// <key>=value", as --set gives them): what a PEtab problem takes, whose
/// tables have no calibration section. Read by the input files' own reader
/// of calibration.optimizer (method adamw | adam | sgd), so the keys, the
/// values' checks and the errors are the same — an unknown key is refused by
/// name with the nearest valid key, and so is any key outside
/// calibration.optimizer. `method` is the method when no override names
/// one; errors name `path`.
optimize::StochasticOptions stochastic_options_from_overrides(const std::string& method,
                                                              const std::vector<std::string>& overrides,
                                                              const std::string& path);

/// Sets the initial values given as expressions of t and the parameters
/// (initial_state_expressions) from cfg.parameters.
void evaluate_initial_state(RunConfig& cfg);

/// The model typed as equations in the file, with its events (requires
/// cfg.equation_model()).
ode::EquationModel equation_model(const RunConfig& cfg);

/// Calls f(model) with the configured model: a built-in model type, or an
/// ode::EquationModel built from the file's equations.
template <class F>
decltype(auto) visit_model(const RunConfig& cfg, F&& f) {
  if (cfg.sbml) return f(ode::EquationModel(cfg.sbml->equations));
  if (cfg.equation_model()) return f(equation_model(cfg));
  return ode::visit_builtin_model(cfg.model, std::forward<F>(f));
}

/// Reads observations from a CSV file: a header `t,<state>,...` naming a
/// subset of `states` in any order, then one row per time (ascending);
/// empty cells, "nan" and "NA" are missing values. Errors name the file and
/// line. Returns times and a times × states matrix (NaN where missing).
/// Refused: a column named twice, a header with no state column, a state
/// column with no value in any row. A state without a column is observed
/// nowhere: a warning appended to `warnings` (when given).
void read_csv_data(const std::string& path, const std::vector<std::string>& states,
                   std::vector<double>& times, std::vector<double>& data,
                   std::vector<std::string>* warnings = nullptr);

/// Levenshtein edit distance (for "did you mean" suggestions).
std::size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate nearest to `word`, or "" when none is close enough: the
/// same name in another case first, else within an edit distance of a third
/// of the word (at least 2) that keeps one of its characters.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace costate::io
