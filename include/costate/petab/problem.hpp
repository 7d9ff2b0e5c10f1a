#pragma once
/// \file
/// petab::Problem — a PEtab (format version 1) parameter-estimation problem:
/// a YAML file naming an SBML model and four TSV tables (parameters,
/// observables, measurements, conditions), read into an sbml::Model and
/// compiled observable/noise formulas; and petab::evaluate, its
/// log-likelihood, χ² and gradient with respect to the estimated parameters
/// on their scales.
///
///     const petab::Problem problem = petab::read("Bruno_JExpBot2016.yaml");
///     const std::vector<double> theta = problem.nominal_on_scale();
///     const petab::Result r = petab::evaluate(problem, theta, {.gradient = true});
///     r.llh; r.chi2; r.gradient;   // d llh / d theta, one per estimated parameter
///
/// Likelihood (one term per measurement m, simulated observable h, noise σ,
/// both from the formulas with the row's overrides; tr the observable's
/// transformation, lin / ln / log10):
///     r = (tr(m) − tr(h)) / σ,        χ² = Σ r²,
///     normal:  −log p = ½ log(2π σ²) + ½ r² + J,
///     laplace: −log p = log(2σ) + |tr(m) − tr(h)| / σ + J,
/// with J = 0 (lin), log m (log), log(m ln 10) (log10) — the density of the
/// untransformed measurement, as the PEtab test suite defines it;
/// Options::data_jacobian = false drops J (the density of tr(m), which is
/// what AMICI reports). llh = −Σ(−log p), summed over the experiments in a
/// fixed order (sorted by condition ids), measurements in table order.
///
/// Each experiment — a (preequilibrationConditionId, simulationConditionId)
/// pair — is one simulation from t = 0 to its last measurement time. Its
/// model parameters are the SBML values, replaced by the parameter table's
/// values (nominal or estimated) for ids in the table, then by the
/// condition's column for that id (a number, or a parameter-table id; empty
/// or NaN keeps). Its initial state is the SBML initial values at those
/// parameters (so a compartment size override moves the initial
/// concentrations computed from amounts), then the condition's species
/// columns. With a preequilibration condition the model is first brought to
/// its steady state under that condition (nonlinear::solve on f = 0, with
/// one conservation law Lᵀx = Lᵀx₀ replacing a dependent equation for each
/// linear conserved moiety of the right-hand side), and the simulation
/// starts there, with the simulation condition's species columns applied on
/// top. When Newton fails from the start, the model is integrated towards
/// the steady state (windows ending at t = 1, 10, …, 10¹²) and Newton tried
/// again from each nearly settled state, as AMICI falls back to simulation.
/// However found, the steady state's derivative is implicit: (∂H/∂x)ᵀν = x̄
/// for the square system H, never through the iterations or the
/// integration (a law lᵀ∂f/∂x = 0 that holds only at the steady state, and
/// that the way there kept, joins the conservation laws; otherwise the
/// derivative is refused by name).
///
/// Measurements at time inf (steady-state measurements): the steady state
/// of the simulation condition, f(x, p) = 0 at its parameters from its
/// start state (after its pre-equilibration), by the same solve and the
/// same implicit derivative; the right-hand side read at the last finite
/// measurement time (0 without one), and refused by name when it still
/// changes after it.
///
/// Piecewise inputs in time (sbml::Model::time_switches): the switch times
/// of the experiment's parameters where lhs − rhs is affine in t cut
/// [0, t_end] into segments, each integrated on its own (the right-hand
/// side read on the segment's side of each switch); the gradient runs the
/// segments backward, each ode::gradient carrying the later segments'
/// dJ/dy at its end as the terminal term λᵀy.
///
/// Gradients: by the adjoint, ode::gradient of the summed −log p over the
/// experiment's observation times with respect to the initial state and
/// the ODE's parameters q — only the estimated parameter-table entries that
/// the condition's model parameters read (Options::reduce_parameters);
/// by forward sensitivities (ode::CvodesForward), one CVODES pass per
/// experiment carrying one direction per estimated entry the experiment
/// depends on — q, then the entries only y0 reads — seeded with S0 =
/// dy0/dθ (Options::seed_initial_sensitivities; the FIM comes from the
/// same pass), not |q| + n_states directions and the chain rule through
/// dy/dy0 after the solve; the formulas' direct dependence on model parameters and
/// table values (observable, noise and override parameters) comes from one
/// reverse sweep over the observations at the recorded states; then the
/// chain rule through the initial values (ad::vjp on the SBML initial-value
/// expressions), the condition and measurement overrides, and the scales
/// (d θ_lin / d θ = θ_lin for log, θ_lin ln 10 for log10).
///
/// Objective priors (objectivePriorType: normal, laplace, uniform and their
/// parameterScale… forms, on estimated parameters) are reported apart, as
/// Result::log_prior and its gradient: llh is the likelihood alone.
///
/// Refused by name (costate::Error naming file, line, column or id):
/// negative times, measurements at time inf in a model with events, other
/// prior types (logNormal…),
/// noise distributions other than normal and laplace, transformations other
/// than lin/log/log10, several models or problems in one YAML file,
/// format versions other than 1, visualization files are ignored (they do
/// not change the likelihood).

#include <mpi.h>

#include <array>
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/options.hpp"
#include "costate/sbml/model.hpp"

namespace costate::petab {

enum class Scale { Lin, Log, Log10 };
enum class Transformation { Lin, Log, Log10 };
enum class Distribution { Normal, Laplace };
std::string to_string(Scale s);
std::string to_string(Transformation t);
std::string to_string(Distribution d);

/// `value` on `scale` (log: ln value, log10: log10 value) and back.
double to_scale(double linear, Scale scale);
double from_scale(double scaled, Scale scale);

/// A table cell that is a number or a parameter-table id.
struct Ref {
  double value = std::numeric_limits<double>::quiet_NaN();
  long parameter = -1;  ///< index into Problem::parameters; −1: the number `value`
  bool is_parameter() const { return parameter >= 0; }
};

/// objectivePriorType (None: no prior; the parameterScale… forms are
/// densities of the value on its scale, the others of the linear value).
enum class Prior { None, Normal, Laplace, Uniform, ScaleNormal, ScaleLaplace, ScaleUniform };

struct Parameter {
  std::string id;
  Scale scale = Scale::Lin;
  double lower = 0.0, upper = 0.0;  ///< bounds, linear scale (as in the table)
  double nominal = 0.0;             ///< linear scale
  bool estimate = false;
  Prior prior = Prior::None;
  double prior_a = 0.0, prior_b = 0.0;  ///< objectivePriorParameters (μ;σ, μ;b or lower;upper)
  std::size_t line = 0;             ///< line in the parameter table
};

struct Observable {
  std::string id;
  std::string formula, noise_formula;
  Transformation transformation = Transformation::Lin;
  Distribution distribution = Distribution::Normal;
  std::size_t n_observable_parameters = 0;  ///< placeholders observableParameter<k>_<id>
  std::size_t n_noise_parameters = 0;      ///< placeholders noiseParameter<k>_<id>
  expr::Program program, noise_program;    ///< over Problem::formula_variables
  std::size_t line = 0;
};

struct Condition {
  std::string id;
  /// One per model parameter: the override (value NaN and parameter −1: keep).
  std::vector<Ref> parameters;
  /// One per state: the initial-value override (NaN: keep).
  std::vector<Ref> states;
  std::size_t line = 0;
};

struct Measurement {
  std::size_t observable = 0;
  std::size_t condition = 0;
  long preequilibration = -1;  ///< condition index, −1: none
  double time = 0.0;
  double value = 0.0;
  std::vector<Ref> observable_parameters, noise_parameters;
  std::size_t line = 0;
  std::size_t file = 0;  ///< index into Problem::measurement_files
};

/// Measurements simulated together: one (pre-equilibration, simulation)
/// condition pair.
struct Experiment {
  long preequilibration = -1;
  std::size_t condition = 0;
  std::vector<double> times;                      ///< distinct, ascending; the last may be inf (a steady state)
  std::vector<std::vector<std::size_t>> at_time;  ///< measurement indices per time
};

struct Problem {
  std::string file;  ///< the YAML file
  std::string parameter_file, observable_file, measurement_file, condition_file;  ///< the first of each
  /// Every file of each table (a problem may list several; their rows add
  /// up in this order).
  std::vector<std::string> observable_files, measurement_files, condition_files;
  sbml::Model model;
  std::vector<Parameter> parameters;
  std::vector<Observable> observables;
  std::vector<Condition> conditions;
  std::vector<Measurement> measurements;
  std::vector<Experiment> experiments;  ///< sorted by (preequilibration, condition) id
  /// The parameter-table row of each model parameter (−1: not in the table).
  std::vector<long> model_parameter_row;
  /// Formula variables: time, states, model parameters, intermediates,
  /// parameter-table values (ids not in the model; model ids are hidden
  /// here since the model's — condition-specific — value takes that name),
  /// then the observable placeholders and the noise placeholders (the
  /// largest count over all observables of each).
  std::vector<std::string> formula_variables;
  std::size_t max_observable_parameters = 0, max_noise_parameters = 0;

  /// Indices into `parameters` of the estimated ones, in table order.
  std::vector<std::size_t> estimated;
  std::vector<std::string> estimated_ids() const;
  /// The nominal values of the estimated parameters on their scales.
  std::vector<double> nominal_on_scale() const;
  /// Lower and upper bounds of the estimated parameters on their scales.
  std::array<std::vector<double>, 2> bounds_on_scale() const;
  long parameter_index(const std::string& id) const;  ///< −1 when absent
  std::string brief_report() const;
};

/// Reads the YAML problem file and everything it names (paths relative to
/// it). Throws costate::Error naming the file and line (and column or id)
/// for malformed tables, unknown ids (with a "did you mean"), formulas that
/// do not compile (with the column) and unsupported features (by name).
Problem read(const std::string& yaml_path);
/// read() from memory: `yaml` is the problem file's text, `yaml_name` the
/// name its messages give it (and the base of the relative names it
/// lists), `files` the text of each file it names, keyed by the path read()
/// would open: yaml_name's directory joined with the name, lexically
/// normal ("dir/model.xml"; the bare name when yaml_name has no directory).
/// A name missing from `files` is a file that cannot be opened. The same
/// parser as read() — read() is this with the texts from disk — and the
/// same messages, naming each table by its path and line.
Problem read_text(const std::string& yaml, const std::string& yaml_name,
                  const std::map<std::string, std::string>& files);
/// True when `path` is a YAML map with the keys format_version and problems
/// (a PEtab problem file); false for anything else, unreadable files too.
bool is_problem_file(const std::string& path);

/// Options::method's default ode::CvodesAdjoint::forward_tolerance_factor.
inline constexpr double kAdjointForwardTolerance = 1e-2;

struct Options {
  ode::IntegratorOptions integrator{.method = ode::Method::CvodesBdf, .rtol = 1e-10,
                                    .atol = 1e-12};
  bool gradient = false;
  /// How the gradient is computed (ode::gradient's methods). The adjoint's
  /// forward pass at 1e-2 × the integrator's tolerances
  /// (ode::CvodesAdjoint::forward_tolerance_factor): at the defaults its
  /// gradient then agrees with forward sensitivities and with Richardson
  /// differences to ≤ 1e-5 of its size on Borghans_BiophysChem1997 and
  /// Fujita_SciSignal2010, where it was off by 1.5e-4 and 4.4e-5
  /// (tests/petab/gradient_accuracy_test.cpp, bench/README.md).
  ode::SensitivityMethod method = ode::CvodesAdjoint{.forward_tolerance_factor = kAdjointForwardTolerance};
  /// Include J (see the file comment) in the likelihood of log/log10 data.
  bool data_jacobian = true;
  /// Pre-equilibration and measurements at time inf: ‖f‖ tolerance of the
  /// steady-state solve (relative to 1 + ‖x‖).
  double steady_state_tol = 1e-12;
  /// Differentiate each simulation only with respect to the estimated
  /// table entries its model parameters read (see the file comment).
  /// false: with respect to every model parameter and every table value,
  /// as earlier versions did — the same gradient, slower; kept to measure
  /// and check the reduction (bench/bench_petab.cpp, tests/petab).
  bool reduce_parameters = true;
  /// Also the Fisher information (Result::fim; see below). Needs a CVODES
  /// integrator (its forward sensitivities).
  bool fim = false;
  /// Forward sensitivities (the FIM, and the gradient with
  /// ode::CvodesForward): one CVODES pass per experiment carrying one
  /// direction per estimated parameter the experiment depends on, seeded
  /// with S0 = dy0/dθ (initial values, condition overrides and
  /// pre-equilibration differentiated before the solve, as AMICI's sx0),
  /// and the gradient and the FIM from the same pass. false: the gradient
  /// by ode::gradient per segment — |q| + n_states directions and the
  /// chain rule through dy/dy0 afterwards, as earlier versions did; the
  /// same gradient to the tolerances, slower; kept to measure and check
  /// the seeding (bench/bench_petab.cpp, tests/petab).
  bool seed_initial_sensitivities = true;
  /// With the seeded forward sensitivities: CVODES' error test on dy/dθ
  /// with θ on each parameter's scale (p̄ = dlin/dθ in
  /// CVodeSetSensParams, so atol_S = atol / p̄), as AMICI's sensitivities
  /// with respect to scaled parameters are; false (the default): on
  /// dy/dlin. Measured at rtol = atol = 1e-8 against a 1e-12 / 1e-14
  /// reference (bench/README.md, "PEtab forward sensitivities seeded with
  /// dy0/dθ"):
  /// 1.1–1.3× faster but the gradient less accurate (Fujita_SciSignal2010
  /// 4.2e-3 of its size instead of 5.4e-5; Elowitz, Zheng 3.5–3.8×).
  bool scale_sensitivity_tolerances = false;
  /// Simulate only these experiments (indices into Problem::experiments,
  /// ascending, no repeats); empty: all. llh, χ², the gradient and the FIM
  /// are then sums over those experiments' measurements (the priors are
  /// still included whole); the other measurements' h and σ are NaN. This is
  /// a mini-batch of a stochastic fit (petab::fit_stochastic).
  std::vector<std::size_t> experiments{};
  /// Also each simulated experiment's −log p and its gradient on the
  /// estimated parameters' scales (Result::experiment_nll,
  /// Result::experiment_gradient; priors not included).
  bool per_experiment = false;
};

struct Result {
  double llh = 0.0;   ///< log-likelihood
  double chi2 = 0.0;
  std::vector<double> gradient;     ///< d llh / d θ (estimated, on their scales)
  /// With Options::gradient: how it was computed, "<method> on <integrator>"
  /// — Options::method on Options::integrator, or for a model with events
  /// that they do not cross (ode::supports_events) the discrete adjoint on
  /// bdf at the integrator's tolerances, with the reason.
  std::string gradient_method;
  double log_prior = 0.0;           ///< Σ log prior density (0 without priors)
  std::vector<double> log_prior_gradient;  ///< d log_prior / d θ (with `gradient`)
  std::vector<double> simulations;  ///< h per measurement (untransformed)
  std::vector<double> sigmas;       ///< σ per measurement
  /// With Options::fim: the Fisher information of −llh with respect to the
  /// estimated parameters on their scales, n × n row-major in the order of
  /// Problem::estimated_ids() (symmetric positive semidefinite):
  ///     F = Σ_i (1/σ_i²) (∂μ_i/∂θ)(∂μ_i/∂θ)ᵀ + c (1/σ_i²) (∂σ_i/∂θ)(∂σ_i/∂θ)ᵀ,
  /// μ_i = tr(h_i), c = 2 for normal, 1 for laplace noise — the expected
  /// information E[s sᵀ] of the score s = ∂(−log p)/∂θ when the data follow
  /// the model (docs/petab.md derives it). Independent of the measured values.
  std::vector<double> fim;
  /// What the evaluation integrated, summed over the experiments (and the
  /// ranks): accepted steps of the time courses' forward integrations
  /// (simulations, forward sensitivities, the adjoints' forward passes — a
  /// pass run again, like a released segment's, counted again; not a
  /// pre-equilibration's integration towards steady state) and of the
  /// adjoints' backward integrations (ode::GradientResult::backward_steps),
  /// and right-hand-side evaluations.
  std::size_t steps = 0;
  std::size_t backward_steps = 0;
  std::size_t rhs_evaluations = 0;
  /// Forward-sensitivity directions integrated, summed over the
  /// experiments (0 without forward sensitivities): seeded, one per
  /// estimated parameter an experiment depends on; unseeded
  /// (seed_initial_sensitivities = false), |q| + n_states per experiment.
  std::size_t sensitivity_directions = 0;
  /// With Options::per_experiment: −log p of each simulated experiment (in
  /// the order of Options::experiments, or of Problem::experiments), and
  /// its gradient d(−log p)/dθ, one row of estimated_ids().size() entries
  /// per experiment (with Options::gradient). Their sums are −llh and
  /// −gradient without the priors, to rounding (the totals are summed from
  /// the table values' adjoints).
  std::vector<double> experiment_nll;
  std::vector<double> experiment_gradient;
};

/// The log-likelihood etc. at `theta` (one value per estimated parameter,
/// on its scale). Throws costate::Error when a simulation fails (naming the
/// experiment) or a σ is not positive (naming the measurement's line).
///
/// Collective over `comm`: the experiments are dealt round-robin over its
/// ranks (experiment e on rank e mod size), each rank simulates its own,
/// and every rank returns the whole Result — llh, χ², gradient, h and σ of
/// every measurement. The result does not depend on the number of ranks,
/// to the bit: each experiment's terms (−log p and its gradient) are
/// gathered and every rank sums them in experiment order. A failure on
/// any rank throws on every rank. Without MPI initialised (or with
/// MPI_COMM_SELF) it runs serially.
Result evaluate(const Problem& problem, const std::vector<double>& theta,
                const Options& options = {}, MPI_Comm comm = MPI_COMM_SELF);

}  // namespace costate::petab
