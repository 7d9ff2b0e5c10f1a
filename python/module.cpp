// costate._costate — the compiled half of the Python package `costate`
// (python/costate/__init__.py wraps it; docs/python.md is the user's page).
//
// The computations are the CLI's, compiled once in libcostate (no model is
// instantiated here): io::load_run_config(_text) for input,
// io::integrate_file for run, io/file_gradient.hpp for sensitivity and
// gradcheck, io::calibrate and io::CalibrationProblem for calibration
// (objective, and hessp: CalibrationProblem::hessian_vector), petab::read,
// petab::evaluate and petab::calibrate for PEtab problems,
// io::load_pde_config(_text) and io::pde_run for PDE inputs.
//
// Results come back as dicts of float64 NumPy arrays (copies, C order) and
// Python numbers; the Python layer turns them into result objects. The GIL
// is released while costate computes; costate::Error becomes costate.Error
// (a RuntimeError) with the same message.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/calibrate/calibrate.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/hdf5_writer.hpp"
#include "costate/io/input_text.hpp"
#include "costate/io/pde_input.hpp"
#include "costate/io/pde_run.hpp"
#include "costate/petab/calibrate.hpp"
#include "costate/petab/problem.hpp"
#include "costate/petab/stochastic.hpp"
#include "costate/optimize/stochastic.hpp"

namespace py = pybind11;

namespace {

using costate::io::RunConfig;

/// MPI, PETSc (TAO) and Kokkos, initialised on the first load() unless the
/// host (mpi4py, petsc4py) has; finalised at interpreter exit.
std::unique_ptr<costate::Environment>& environment() {
  static std::unique_ptr<costate::Environment> env;
  return env;
}
void ensure_environment() {
  if (!costate::Environment::active()) environment() = std::make_unique<costate::Environment>();
}

py::array_t<double> array(const std::vector<double>& v) {
  py::array_t<double> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}
/// rows × cols, C order, from row-major v.
py::array_t<double> matrix(const std::vector<double>& v, std::size_t rows, std::size_t cols) {
  COSTATE_CHECK(v.size() == rows * cols, "internal: matrix of " << v.size() << " values is not "
                                                                 << rows << " x " << cols);
  py::array_t<double> a({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(cols)});
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

/// A float64 1-D array of length n from any sequence; ValueError otherwise.
std::vector<double> vector_of(const py::handle& x, std::size_t n, const char* what) {
  py::array a;
  try {
    a = py::array::ensure(x, py::array::forcecast);
  } catch (const py::error_already_set&) {
  }
  if (!a || a.ndim() != 1 || static_cast<std::size_t>(a.shape(0)) != n)
    throw py::value_error(std::string(what) + ": expected a 1-D array of " + std::to_string(n) +
                          " numbers");
  const auto d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!d) throw py::value_error(std::string(what) + ": expected real numbers (float64)");
  return std::vector<double>(d.data(), d.data() + n);
}

py::dict summary_dict(const costate::ode::Summary& s) {
  py::dict d;
  d["method"] = costate::ode::to_string(s.method);
  d["termination"] = costate::ode::to_string(s.termination);
  d["message"] = s.message;
  d["success"] = s.success();
  d["steps"] = s.steps;
  d["rejected_steps"] = s.rejected_steps;
  d["rhs_evaluations"] = s.rhs_evaluations;
  d["final_time"] = s.final_time;
  d["wall_seconds"] = s.wall_seconds;
  d["report"] = s.brief_report();
  return d;
}

/// Ctrl-C during run(), sensitivity() and gradcheck(): called after every
/// accepted step (IntegratorOptions::on_step), it takes the GIL at most every
/// kPollSteps steps and kPollInterval and asks Python for a pending signal;
/// a KeyboardInterrupt leaves costate as an exception (py::error_already_set)
/// through the steppers' RAII, before any file is written, and is raised in
/// Python. Installed for run(), sensitivity(), gradcheck(), objective() and
/// hessp(); not for calibrate() (TAO's callbacks keep a foreign exception
/// until its solve ends) nor PEtab problems (their CVODES runs are not
/// covered by a test of it yet).
class InterruptCheck {
 public:
  void operator()(double) {
    if (++steps_ % kPollSteps != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < kPollInterval) return;
    last_ = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }

 private:
  static constexpr std::int64_t kPollSteps = 256;
  static constexpr std::chrono::milliseconds kPollInterval{50};
  std::int64_t steps_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

/// cfg with the interrupt check installed.
RunConfig interruptible(RunConfig cfg) {
  cfg.integrator.on_step = InterruptCheck{};
  return cfg;
}

costate::ode::Solution integrate(const RunConfig& c) {
  costate::io::require_single_condition(c, "Python's run");  // conditions: the CLI's run
  return costate::io::integrate_file(c);
}

/// An input file's problem (RunConfig) and, for objective(), its
/// calibration. Calls on one Problem are serialised.
class Problem {
 public:
  explicit Problem(RunConfig cfg) : cfg_(std::move(cfg)) {}

  const RunConfig& config() const { return cfg_; }

  py::dict run(const std::string& output) {
    costate::ode::Solution sol;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      sol = integrate(interruptible(cfg_));
      if (!sol.summary.success())
        throw costate::Error("integration of " + cfg_.input_path + " failed: " +
                             sol.summary.message + (output.empty() ? "" : " (no output written)"));
      if (!output.empty()) costate::io::write_run_hdf5(output, cfg_, sol);
    }
    py::dict d;
    d["t"] = array(sol.t);
    d["y"] = matrix(sol.y, sol.n_outputs(), sol.n_states);
    d["names"] = cfg_.state_names;
    const auto* m = cfg_.sbml.get();
    if (m && sol.n_states == m->state_names.size() &&
        cfg_.parameters.size() == m->parameter_names.size()) {
      // An SBML model: every symbol (sbml::Model::symbol_values; delay()
      // read from the run's history) at every output time, as `run --json`
      // and the HDF5 output's /symbols.
      std::vector<double> rows;
      for (std::size_t k = 0; k < sol.n_outputs(); ++k) {
        const auto values = costate::io::sbml_symbols(cfg_, sol, k);
        rows.insert(rows.end(), values.begin(), values.end());
      }
      d["symbol_names"] = m->symbol_names();
      d["symbols"] = matrix(rows, sol.n_outputs(), m->symbol_names().size());
    }
    d["summary"] = summary_dict(sol.summary);
    return d;
  }

  py::dict sensitivity(bool hessian, const std::string& output) {
    namespace io = costate::io;
    need_objective("sensitivity");
    if (hessian) io::check_hessian_request(cfg_, cfg_.input_path);
    // The command line's loop (io::conditions_sensitivity): J = Σ_c J_c and
    // its gradient over a file's conditions, the file itself without them;
    // the trajectories only for the output file.
    io::ConditionsSensitivity s;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      const RunConfig cfg = interruptible(cfg_);
      const auto wrt = io::wrt_indices(cfg);
      s = io::conditions_sensitivity(cfg, {.trajectories = !output.empty(), .hessian_wrt = hessian ? &wrt : nullptr});
      if (!output.empty()) {
        if (cfg_.conditions.empty())
          io::write_run_hdf5(output, cfg_, s.trajectories[0], &s.output, "sensitivity");
        else
          io::write_conditions_hdf5(output, cfg_, s.problems, s.trajectories, &s.output, "sensitivity");
      }
    }
    const io::SensitivityOutput& out = s.output;
    const io::FileGradient& g = s.gradient;
    const io::FileHessian& h = s.hessian;
    py::dict d;
    d["objective"] = out.objective;
    d["names"] = out.parameter_names;
    d["gradient"] = array(out.gradient);
    d["state_names"] = cfg_.sensitivity.wrt_initial_state ? cfg_.state_names : std::vector<std::string>{};
    d["gradient_initial_state"] = array(out.gradient_initial_state);
    d["hessian"] = hessian ? py::object(matrix(h.matrix, out.parameter_names.size(),
                                               out.parameter_names.size()))
                           : py::object(py::none());
    d["hessian_asymmetry"] = h.asymmetry;
    d["method"] = out.method;
    d["steps"] = out.steps;
    d["forward_steps"] = out.forward_steps;
    d["recomputed_steps"] = out.recomputed_steps;
    d["checkpoints"] = out.peak_snapshots;
    d["report"] = g.result.brief_report();
    std::vector<std::string> ids;
    for (const auto& c : cfg_.conditions) ids.push_back(c.id);
    d["conditions"] = ids;  // empty without conditions
    d["condition_objectives"] = array(s.objectives);
    return d;
  }

  py::dict gradcheck() {
    need_objective("gradcheck");
    costate::io::FileGradientCheck c;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      c = costate::io::file_gradient_check(interruptible(cfg_));
    }
    py::dict taylor;
    taylor["steps"] = array(c.taylor.steps);
    taylor["residuals"] = array(c.taylor.residuals);
    taylor["orders"] = array(c.taylor.orders);
    taylor["min_order"] = c.taylor.min_order;
    taylor["passed"] = c.taylor.passed;
    taylor["report"] = c.taylor.report();
    py::dict fd;
    fd["values"] = array(c.fd.fd);
    fd["rel_error"] = array(c.fd.rel_error);
    fd["max_rel_error"] = c.fd.max_rel_error;
    fd["passed"] = c.fd.passed;
    fd["report"] = c.fd.report();
    py::dict d;
    d["passed"] = c.passed;
    d["objective"] = c.objective;
    d["names"] = c.names;
    d["x"] = array(c.x);
    d["gradient"] = array(c.gradient);
    d["taylor"] = taylor;
    d["finite_differences"] = fd;
    return d;
  }

  py::dict calibrate(const std::string& output) {
    namespace io = costate::io;
    need_calibration();
    io::CalibrationReport rep;
    bool written = false;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      rep = io::calibrate(cfg_);
      if (!output.empty()) {  // the trajectories at the fitted values and the file
        std::vector<RunConfig> problems;
        std::vector<costate::ode::Solution> sols;
        for (std::size_t c = 0; c < io::condition_count(rep.fitted); ++c) {
          problems.push_back(io::condition_config(rep.fitted, c));
          sols.push_back(io::integrate_file(problems.back()));
          if (!sols.back().summary.success())
            throw costate::Error("the model at the fitted values" +
                                 (rep.fitted.conditions.empty() ? std::string()
                                                                : ", condition '" + rep.fitted.conditions[c].id + "',") +
                                 " does not integrate (" + sols.back().summary.message + "); " + output +
                                 " not written");
        }
        if (rep.fitted.conditions.empty())
          io::write_calibration_hdf5(output, rep.fitted, sols[0], rep);
        else  // every condition's trajectory, as the command line writes them
          io::write_calibration_hdf5(output, rep.fitted, problems, sols, rep);
        written = true;
      }
    }
    const std::size_t p = rep.names.size();
    std::vector<double> fh, gh;
    for (const auto& it : rep.tao.history) {
      fh.push_back(it.objective);
      gh.push_back(it.gradient_norm);
    }
    py::dict d;
    d["names"] = rep.names;
    d["values"] = array(rep.values);
    d["initial"] = array(rep.initial);
    d["lower"] = array(rep.lower);
    d["upper"] = array(rep.upper);
    d["standard_errors"] = array(rep.standard_errors);
    d["covariance"] = matrix(rep.covariance, p, p);
    d["correlation"] = matrix(rep.correlation, p, p);
    d["singular_values"] = array(rep.singular_values);
    std::vector<bool> flagged(rep.unidentifiable.begin(), rep.unidentifiable.end());
    d["unidentifiable"] = flagged;
    d["objective"] = rep.objective;
    d["rss"] = rep.rss;
    d["sigma2"] = rep.sigma2;
    d["sigma_estimated"] = rep.sigma_estimated;
    d["n_residuals"] = rep.n_residuals;
    d["converged"] = rep.converged;
    d["termination"] = rep.tao.termination;
    d["optimizer"] = rep.tao.method;
    d["gradient_method"] = rep.gradient_method;
    d["iterations"] = rep.tao.iterations;
    d["function_evaluations"] = rep.tao.function_evaluations;
    d["gradient_norm"] = rep.tao.gradient_norm;
    d["objective_history"] = array(fh);
    d["gradient_norm_history"] = array(gh);
    d["residual_times"] = array(rep.residual_times);
    d["residual_states"] = rep.residual_states;
    d["observed"] = array(rep.observed);
    d["predicted"] = array(rep.predicted);
    d["residuals"] = array(rep.residuals);
    d["report"] = rep.tao.brief_report();
    d["output_file"] = written ? py::object(py::str(output)) : py::object(py::none());
    return d;
  }

  /// The calibration's fitted quantities: names, q of the start, bounds in q
  /// (±inf for none), and which are log-transformed.
  py::dict fit() {
    auto& c = calibration();
    std::vector<std::string> names;
    std::vector<bool> log;
    for (const auto& v : c.variables()) {
      names.push_back(v.label());
      log.push_back(v.log);
    }
    py::dict d;
    d["names"] = names;
    d["log"] = log;
    d["start"] = array(c.start());
    d["lower"] = array(c.lower());
    d["upper"] = array(c.upper());
    return d;
  }

  /// (J(q), ∇J(q)) of the calibration (io::CalibrationProblem).
  py::tuple objective(const py::handle& q_in) {
    auto& c = calibration();
    const std::vector<double> q = vector_of(q_in, c.size(), "objective(x)");
    std::vector<double> g(q.size());
    double f = 0.0;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      f = c.objective_and_gradient(q, g);
    }
    return py::make_tuple(f, array(g));
  }

  /// H(q) u, the exact Hessian of the same J(q) (CalibrationProblem::hessian_vector).
  py::array_t<double> hessp(const py::handle& q_in, const py::handle& u_in) {
    auto& c = calibration();
    const std::vector<double> q = vector_of(q_in, c.size(), "hessp(x, v): x");
    const std::vector<double> u = vector_of(u_in, c.size(), "hessp(x, v): v");
    std::vector<double> g(q.size()), Hu(q.size());
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      (void)c.hessian_vector(q, u, g, Hu);
    }
    return array(Hu);
  }

  /// Natural values v(q) (exp for log-transformed quantities).
  py::array_t<double> values(const py::handle& q_in) {
    auto& c = calibration();
    return array(c.values(vector_of(q_in, c.size(), "values(x)")));
  }

  /// io::calibrate_stochastic over the file's conditions: costate.fit(problem, …).
  py::dict fit_conditions(const py::object& callback, const py::dict& kw);

 private:
  void need_objective(const char* command) const {
    if (!cfg_.objective.present)
      throw costate::Error(cfg_.input_path + ": costate " + command +
                           " needs an 'objective:' section (terminal, integral and/or data)");
  }
  void need_calibration() const {
    if (!cfg_.calibration.present)
      throw costate::Error(cfg_.input_path + ": costate calibrate needs a 'calibration:' section "
                           "(parameters to fit, data, optional regularization and optimizer)");
  }
  costate::io::CalibrationProblem& calibration() {
    need_calibration();
    // Interruptible: objective() and hessp() are called from Python (not
    // from TAO's callbacks, as calibrate()'s evaluations are).
    if (!calibration_)
      calibration_ = std::make_unique<costate::io::CalibrationProblem>(interruptible(cfg_));
    return *calibration_;
  }

  RunConfig cfg_;
  std::unique_ptr<costate::io::CalibrationProblem> calibration_;
  std::mutex mutex_;
};

/// A PEtab problem (petab::read): evaluate (llh, χ², gradient) and
/// calibrate (multistart) — the computations of `costate sensitivity|calibrate
/// problem.yaml`, collective over MPI_COMM_WORLD as the CLI's are (under
/// mpiexec every rank calls and every rank gets the whole result).
/// optimize::StochasticOptions from the keyword arguments of costate.fit /
/// PetabProblem.fit (validated by optimize::fit itself, naming the field).
costate::optimize::StochasticOptions stochastic_options(const py::dict& kw,
                                                        const costate::optimize::StochasticOptions& base = {}) {
  namespace opt = costate::optimize;
  opt::StochasticOptions o = base;
  for (const auto& [key_h, value] : kw) {
    const std::string key = py::str(key_h);
    if (key == "optimizer") o.method = opt::stochastic_method_from_string(py::cast<std::string>(value));
    else if (key == "epochs") o.epochs = py::cast<int>(value);
    else if (key == "batch") o.batch = py::cast<std::size_t>(value);
    else if (key == "physical_batch") o.physical_batch = py::cast<std::size_t>(value);
    else if (key == "batch_growth") o.batch_growth = py::cast<double>(value);
    else if (key == "average_epochs") o.average_epochs = py::cast<int>(value);
    else if (key == "learning_rate") o.learning_rate = py::cast<double>(value);
    else if (key == "schedule") o.schedule = opt::learning_rate_schedule_from_string(py::cast<std::string>(value));
    else if (key == "step_epochs") o.step_epochs = py::cast<int>(value);
    else if (key == "gamma") o.gamma = py::cast<double>(value);
    else if (key == "min_learning_rate") o.min_learning_rate = py::cast<double>(value);
    else if (key == "warmup_steps") o.warmup_steps = py::cast<int>(value);
    else if (key == "beta1") o.beta1 = py::cast<double>(value);
    else if (key == "beta2") o.beta2 = py::cast<double>(value);
    else if (key == "epsilon") o.epsilon = py::cast<double>(value);
    else if (key == "weight_decay") o.weight_decay = py::cast<double>(value);
    else if (key == "momentum") o.momentum = py::cast<double>(value);
    else if (key == "clip_norm") o.clip_norm = py::cast<double>(value);
    else if (key == "validation_split") o.validation_split = py::cast<double>(value);
    else if (key == "patience") o.patience = py::cast<int>(value);
    else if (key == "seed") o.seed = py::cast<std::uint64_t>(value);
    else if (key == "max_rescues") o.max_rescues = py::cast<int>(value);
    else if (key == "max_restarts") o.max_restarts = py::cast<int>(value);
    else if (key == "finish_iterations") o.finish_iterations = py::cast<int>(value);
    else if (key == "finish_gatol") o.finish_gatol = py::cast<double>(value);
    else
      throw py::type_error("fit(): unknown keyword '" + key +
                           "'; valid: optimizer, epochs, batch, batch_growth, physical_batch, learning_rate, schedule, "
                           "step_epochs, gamma, min_learning_rate, warmup_steps, beta1, beta2, epsilon, "
                           "weight_decay, momentum, clip_norm, validation_split, patience, seed, "
                           "max_rescues, max_restarts, finish_iterations, finish_gatol, average_epochs");
  }
  return o;
}

/// One epoch's record as a dict (the keys of the command line's JSON).
py::dict epoch_dict(const costate::optimize::EpochRecord& e) {
  py::dict row;
  row["epoch"] = e.epoch;
  row["train_loss"] = e.train_loss;
  row["train_loss_stderr"] = e.train_loss_stderr;
  row["validation_loss"] = e.validation_loss;
  row["learning_rate"] = e.learning_rate;
  row["steps"] = e.steps;
  row["simulations"] = e.simulations;
  row["rescues"] = e.rescues;
  row["restarts"] = e.restarts;
  return row;
}

/// A StochasticResult as a dict (epochs as a list of dicts).
py::dict stochastic_result(const costate::optimize::StochasticResult& r) {
  py::dict d;
  d["x"] = array(r.x);
  d["objective"] = r.objective;
  d["termination"] = r.termination;
  d["steps"] = r.steps;
  d["simulations"] = r.simulations;
  d["rescues"] = r.rescues;
  d["restarts"] = r.restarts;
  d["training"] = r.training;
  d["validation"] = r.validation;
  d["finish_termination"] = r.finish_termination;
  d["finish_converged"] = r.finish_converged;
  py::list epochs;
  for (const auto& e : r.epochs) epochs.append(epoch_dict(e));
  d["epochs"] = epochs;
  d["seconds"] = r.wall_seconds;
  return d;
}

/// The per-epoch callback: called with the epoch's dict; exceptions it
/// raises end the fit (re-raised in Python).
costate::optimize::StochasticCallbacks epoch_callback(const py::object& callback) {
  costate::optimize::StochasticCallbacks cb;
  if (!callback.is_none())
    cb.on_epoch = [callback](const costate::optimize::EpochRecord& e) {
      py::gil_scoped_acquire locked;
      callback(epoch_dict(e));
    };
  return cb;
}

/// costate.fit: a Python loss(c, x) -> (value, gradient) over n conditions.
py::dict fit_python(const py::object& loss, std::size_t n_conditions, const py::object& x0_in,
                    const py::object& lower_in, const py::object& upper_in, const py::object& callback,
                    const py::dict& kw) {
  namespace opt = costate::optimize;
  const auto vec = [](const py::object& o, const char* what) {
    std::vector<double> v;
    for (const auto& e : py::cast<py::array_t<double, py::array::c_style | py::array::forcecast>>(o)) {
      (void)what;
      v.push_back(py::cast<double>(e));
    }
    return v;
  };
  const std::vector<double> x0 = vec(x0_in, "x0");
  const std::size_t n = x0.size();
  const std::vector<double> lower =
      lower_in.is_none() ? std::vector<double>(n, -INFINITY) : vec(lower_in, "lower");
  const std::vector<double> upper =
      upper_in.is_none() ? std::vector<double>(n, INFINITY) : vec(upper_in, "upper");
  if (lower.size() != n || upper.size() != n)
    throw py::value_error("fit(): lower and upper need " + std::to_string(n) + " values, one per x0 entry");
  opt::Dataset d;
  d.n_conditions = n_conditions;
  d.n = n;
  d.condition = [&loss, n](std::size_t c, std::span<const double> x, std::span<double> g) {
    py::tuple r = loss(c, array(std::vector<double>(x.begin(), x.end())));
    if (r.size() != 2) throw costate::Error("fit(): loss(c, x) must return (value, gradient)");
    const auto grad = py::cast<py::array_t<double, py::array::c_style | py::array::forcecast>>(r[1]);
    if (static_cast<std::size_t>(grad.size()) != n)
      throw costate::Error("fit(): loss(c, x)'s gradient has " + std::to_string(grad.size()) + " entries, x has " +
                           std::to_string(n));
    for (std::size_t j = 0; j < n; ++j) g[j] = grad.at(static_cast<py::ssize_t>(j));
    return py::cast<double>(r[0]);
  };
  return stochastic_result(opt::fit(d, x0, lower, upper, stochastic_options(kw), epoch_callback(callback)));
}

py::dict Problem::fit_conditions(const py::object& callback, const py::dict& kw) {
  namespace io = costate::io;
  need_calibration();
  // The file's calibration.optimizer settings (when it names adamw, adam or
  // sgd), the keywords over them — as the command line's flags are.
  const costate::optimize::StochasticOptions options =
      stochastic_options(kw, cfg_.calibration.stochastic ? cfg_.calibration.stochastic_options
                                                         : costate::optimize::StochasticOptions{});
  io::StochasticCalibration f;
  {
    py::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    f = io::calibrate_stochastic(cfg_, options, epoch_callback(callback), nullptr, MPI_COMM_WORLD);
  }
  py::dict d = stochastic_result(f.result);
  d["names"] = f.names;
  d["initial"] = array(f.initial);
  d["values"] = array(f.values);
  // at a converged full-batch finish (finish_iterations), else None
  d["standard_errors"] = f.standard_errors.empty() ? py::object(py::none()) : py::object(array(f.standard_errors));
  d["conditions"] = io::condition_count(cfg_);
  return d;
}

class PetabProblem {
 public:
  explicit PetabProblem(costate::petab::Problem pb) : pb_(std::move(pb)) {}
  const costate::petab::Problem& problem() const { return pb_; }

  py::dict evaluate(const py::object& theta_in, bool gradient, bool fim) {
    const std::vector<double> theta = theta_of(theta_in, "evaluate(theta)");
    const costate::petab::Result r = run(theta, gradient, fim);
    py::dict d;
    d["ids"] = pb_.estimated_ids();
    d["theta"] = array(theta);
    d["llh"] = r.llh;
    d["chi2"] = r.chi2;
    d["log_prior"] = r.log_prior;
    d["gradient"] = gradient ? py::object(array(r.gradient)) : py::object(py::none());
    d["log_prior_gradient"] =
        gradient ? py::object(array(r.log_prior_gradient)) : py::object(py::none());
    d["simulations"] = array(r.simulations);
    d["sigmas"] = array(r.sigmas);
    d["rhs_evaluations"] = r.rhs_evaluations;
    d["steps"] = r.steps;
    d["backward_steps"] = r.backward_steps;
    d["method"] = costate::ode::to_string(costate::petab::Options{}.method);
    const std::size_t n = theta.size();
    d["fim"] = fim ? py::object(py::array_t<double>({n, n}, r.fim.data())) : py::object(py::none());
    return d;
  }

  /// (−(llh + log prior), its gradient) at θ: what petab::calibrate minimises.
  py::tuple objective(const py::handle& theta_in) {
    namespace petab = costate::petab;
    const std::vector<double> theta = theta_of(py::reinterpret_borrow<py::object>(theta_in),
                                               "objective(x)");
    const petab::Result r = run(theta, true, false);
    std::vector<double> g(theta.size());
    for (std::size_t e = 0; e < g.size(); ++e)
      g[e] = -(r.gradient[e] + (r.log_prior_gradient.empty() ? 0.0 : r.log_prior_gradient[e]));
    return py::make_tuple(-(r.llh + r.log_prior), array(g));
  }

  /// petab::fit_stochastic from θ0 (default: the nominal values).
  py::dict fit(const py::object& theta_in, const py::object& callback, const py::dict& kw) {
    namespace petab = costate::petab;
    const std::vector<double> theta =
        theta_in.is_none() ? pb_.nominal_on_scale() : theta_of(theta_in, "fit(theta)");
    const costate::optimize::StochasticOptions options = stochastic_options(kw);
    petab::StochasticFit f;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      f = petab::fit_stochastic(pb_, options, {}, theta, epoch_callback(callback), nullptr, MPI_COMM_WORLD);
    }
    py::dict d = stochastic_result(f.result);
    d["ids"] = f.ids;
    d["initial"] = array(f.initial);
    d["llh"] = f.llh;
    return d;
  }

  py::dict calibrate(int starts, long long seed, const std::string& output,
                     const std::string& sampling) {
    namespace petab = costate::petab;
    // The CLI's checks (petab_command.cpp), with the keyword names.
    if (starts < 0)
      throw py::value_error("calibrate(starts=" + std::to_string(starts) +
                            "): expected a number of starts >= 1 (0: one start at the nominal "
                            "values)");
    if (seed < 0) throw py::value_error("calibrate(seed=" + std::to_string(seed) + "): expected a seed >= 0");
    if (!output.empty() && !output.ends_with(".h5"))
      throw py::value_error("calibrate(output='" + output + "'): expected a file ending in .h5");
    petab::CalibrationOptions options;
    options.starts = starts;
    options.seed = static_cast<std::uint64_t>(seed);
    options.sampling = petab::sampling_from_string(sampling);
    petab::Calibration c;
    int rank = 0;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      c = petab::calibrate(pb_, options, MPI_COMM_WORLD);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (!output.empty() && rank == 0) petab::write_calibration_hdf5(output, c);
    }
    const std::size_t m = c.starts.size(), n = c.ids.size();
    std::vector<double> objective, llh, initial, x, seconds, waterfall, waterfall_llh;
    std::vector<std::size_t> order = c.waterfall();
    std::vector<int> iterations, ranks;
    std::vector<long long> evaluations;
    std::vector<bool> converged, failed;
    std::vector<std::string> termination;
    for (const auto& f : c.starts) {
      objective.push_back(f.objective);
      llh.push_back(f.llh);
      initial.insert(initial.end(), f.initial.begin(), f.initial.end());
      x.insert(x.end(), f.x.begin(), f.x.end());
      seconds.push_back(f.seconds);
      iterations.push_back(f.iterations);
      ranks.push_back(f.rank);
      evaluations.push_back(f.evaluations);
      converged.push_back(f.converged);
      failed.push_back(f.failed);
      termination.push_back(f.termination);
    }
    for (std::size_t i : order) waterfall.push_back(c.starts[i].objective);
    py::dict d;
    d["ids"] = c.ids;
    d["best_index"] = c.best_index;
    d["best_x"] = array(c.best().x);
    d["best_llh"] = c.best().llh;
    d["best_objective"] = c.best().objective;
    d["converged"] = c.best().converged;
    d["at_best"] = c.at_best;
    d["best_tolerance"] = c.best_tolerance;
    d["waterfall"] = array(waterfall);
    d["waterfall_starts"] = order;
    d["objectives"] = array(objective);
    d["llhs"] = array(llh);
    d["initial"] = matrix(initial, m, n);
    d["x"] = matrix(x, m, n);
    d["iterations"] = iterations;
    d["evaluations"] = evaluations;
    d["start_converged"] = converged;
    d["failed"] = failed;
    d["termination"] = termination;
    d["ranks"] = ranks;
    d["seconds"] = array(seconds);
    d["report"] = c.brief_report();
    d["output_file"] = !output.empty() && rank == 0 ? py::object(py::str(output)) : py::object(py::none());
    return d;
  }

 private:
  /// petab::evaluate with the CLI's options (collective), the GIL released.
  costate::petab::Result run(const std::vector<double>& theta, bool gradient, bool fim) {
    costate::petab::Options options;
    options.gradient = gradient;
    options.fim = fim;
    py::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    return costate::petab::evaluate(pb_, theta, options, MPI_COMM_WORLD);
  }

  std::vector<double> theta_of(const py::object& theta, const char* what) const {
    if (theta.is_none()) return pb_.nominal_on_scale();
    return vector_of(theta, pb_.estimated.size(), what);
  }

  costate::petab::Problem pb_;
  std::mutex mutex_;
};

std::unique_ptr<PetabProblem> load_petab(const std::string& path) {
  ensure_environment();
  costate::petab::Problem pb;
  {
    py::gil_scoped_release unlocked;
    pb = costate::petab::read(path);
  }
  return std::make_unique<PetabProblem>(std::move(pb));
}

/// A PDE input (io::PdeConfig): run and sensitivity by io::pde_run — the
/// command line's computation — over MPI_COMM_WORLD, with the arrays
/// gathered on rank 0 (None elsewhere). Collective under mpiexec: every
/// rank calls each method.
class PdeProblem {
 public:
  explicit PdeProblem(costate::io::PdeConfig cfg) : cfg_(std::move(cfg)) {}
  const costate::io::PdeConfig& config() const { return cfg_; }

  py::dict run(const std::string& output) {
    const costate::io::PdeResult r = compute(costate::io::PdeCommand::run, output);
    py::dict d = grid(r);
    d["t"] = array(r.times);
    py::dict fields;
    const bool root = rank() == 0;
    for (std::size_t c = 0; c < r.fields.size(); ++c) {
      if (!root) {
        fields[py::str(r.fields[c])] = py::none();
        continue;
      }
      std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(r.frames.size())};
      for (auto n : grid_shape(r)) shape.push_back(n);
      py::array_t<double> a(shape);
      double* out = a.mutable_data();
      const std::size_t cells = cell_count(r), dof = r.fields.size();
      for (std::size_t f = 0; f < r.frames.size(); ++f)
        for (std::size_t e = 0; e < cells; ++e) out[f * cells + e] = r.frames[f][e * dof + c];
      fields[py::str(r.fields[c])] = a;
    }
    d["fields"] = fields;
    d["parameter_fields"] = parameter_fields(r);
    py::dict summary;
    summary["steps"] = r.steps;
    summary["final_time"] = r.final_time;
    summary["krylov_iterations"] = r.krylov_iterations;
    summary["final_integrals"] = named(r.fields, r.final_integrals);
    summary["final_min"] = named(r.fields, r.final_min);
    summary["final_max"] = named(r.fields, r.final_max);
    summary["cell_volume"] = r.cell_volume;
    summary["objective"] = r.has_objective ? py::object(py::float_(r.objective)) : py::object(py::none());
    summary["ranks"] = r.ranks;
    summary["processes"] = std::vector<int>(r.processes.begin(), r.processes.begin() + r.dim);
    summary["linear"] = r.linear;
    d["summary"] = summary;
    d["objective"] = summary["objective"];
    d["output_file"] = r.output_file.empty() ? py::object(py::none()) : py::object(py::str(r.output_file));
    return d;
  }

  py::dict sensitivity(const std::string& output) {
    const costate::io::PdeResult r = compute(costate::io::PdeCommand::sensitivity, output);
    py::dict d = grid(r);
    const bool root = rank() == 0;
    d["objective"] = r.objective;
    d["names"] = r.parameter_names;
    d["gradient"] = array(r.gradient);
    py::dict gf, norms;
    for (const auto& a : r.parameter_field_names) {
      gf[py::str(a)] = root ? py::object(component(r, r.gradient_field, 0, 1)) : py::object(py::none());
      py::dict st;
      st["norm"] = r.gradient_field_norm;
      st["sum_over_cells"] = r.gradient_field_sum;
      st["min"] = r.gradient_field_min;
      st["max"] = r.gradient_field_max;
      norms[py::str(a)] = st;
    }
    d["gradient_fields"] = gf;
    d["gradient_field_stats"] = norms;
    py::dict gu;
    for (std::size_t c = 0; c < r.fields.size(); ++c)
      gu[py::str(r.fields[c])] = root ? py::object(component(r, r.gradient_initial_state, c, r.fields.size()))
                                      : py::object(py::none());
    d["gradient_initial_state"] = gu;
    d["gradient_initial_state_norm"] = r.gradient_initial_state_norm;
    d["parameter_fields"] = parameter_fields(r);
    d["method"] = "discrete_adjoint";
    d["checkpointing"] = costate::ode::to_string(cfg_.checkpointing);
    d["steps"] = r.steps;
    d["forward_steps"] = r.forward_steps;
    d["recomputed_steps"] = r.recomputed_steps;
    d["checkpoints"] = r.checkpoints;
    d["krylov_iterations"] = r.krylov_iterations;
    d["adjoint_krylov_iterations"] = r.adjoint_krylov_iterations;
    d["seconds"] = r.seconds;
    d["ranks"] = r.ranks;
    d["output_file"] = r.output_file.empty() ? py::object(py::none()) : py::object(py::str(r.output_file));
    return d;
  }

 private:
  /// Ctrl-C: polled by io::pde_run before every forward step and around the
  /// adjoint sweep (on every rank; any rank's interrupt stops all of them).
  /// It takes the GIL at most every kPollInterval; a pending KeyboardInterrupt
  /// stays set in Python's error indicator and is raised when pde_run has
  /// unwound (its output file left "partial").
  class InterruptPoll {
   public:
    bool operator()() {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_ < kPollInterval) return false;
      last_ = now;
      py::gil_scoped_acquire gil;
      return PyErr_CheckSignals() != 0;
    }

   private:
    static constexpr std::chrono::milliseconds kPollInterval{50};
    std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  };

  costate::io::PdeResult compute(costate::io::PdeCommand command, const std::string& output) {
    namespace io = costate::io;
    io::PdeConfig cfg = cfg_;
    cfg.output_file = output;  // the file's output.file is the command line's default, not Python's
    io::PdeRunOptions options;
    options.command = command;
    options.gather = true;
    options.interrupted = InterruptPoll{};
    try {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      return io::pde_run(MPI_COMM_WORLD, cfg, options);
    } catch (const io::PdeInterrupted&) {
      // This rank's KeyboardInterrupt (PyErr_CheckSignals set it), or
      // another rank's: raise one here too.
      if (!PyErr_Occurred()) PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
  }

  static int rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  /// The grid's shape as NumPy's: (nx,), (ny, nx), (nz, ny, nx).
  static std::vector<py::ssize_t> grid_shape(const costate::io::PdeResult& r) {
    std::vector<py::ssize_t> s;
    for (int d = r.dim - 1; d >= 0; --d) s.push_back(static_cast<py::ssize_t>(r.cells[static_cast<std::size_t>(d)]));
    return s;
  }
  static std::size_t cell_count(const costate::io::PdeResult& r) {
    return static_cast<std::size_t>(r.cells[0] * r.cells[1] * r.cells[2]);
  }
  /// Component c of a natural-order array with `dof` values per cell, shaped like the grid.
  static py::array_t<double> component(const costate::io::PdeResult& r, const std::vector<double>& v, std::size_t c,
                                       std::size_t dof) {
    const std::size_t cells = cell_count(r);
    COSTATE_CHECK(v.size() == cells * dof, "internal: a field of " << v.size() << " values on " << cells
                                                                     << " cells x " << dof);
    py::array_t<double> a(grid_shape(r));
    double* out = a.mutable_data();
    for (std::size_t e = 0; e < cells; ++e) out[e] = v[e * dof + c];
    return a;
  }
  static py::dict named(const std::vector<std::string>& names, const std::vector<double>& values) {
    py::dict d;
    for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) d[py::str(names[i])] = values[i];
    return d;
  }
  /// The grid: cells (nx, ny, nz up to dim), origin, spacing, the cell
  /// centres per axis (x, y, z), the field names.
  py::dict grid(const costate::io::PdeResult& r) const {
    py::dict d;
    const auto D = static_cast<std::size_t>(r.dim);
    d["dim"] = r.dim;
    d["cells"] = std::vector<std::int64_t>(r.cells.begin(), r.cells.begin() + r.dim);
    d["origin"] = std::vector<double>(r.origin.begin(), r.origin.begin() + r.dim);
    d["spacing"] = std::vector<double>(r.spacing.begin(), r.spacing.begin() + r.dim);
    py::dict centres;
    for (std::size_t k = 0; k < D; ++k) {
      std::vector<double> c(static_cast<std::size_t>(r.cells[k]));
      for (std::size_t i = 0; i < c.size(); ++i)
        c[i] = r.origin[k] + (static_cast<double>(i) + 0.5) * r.spacing[k];
      centres[py::str(std::string(1, "xyz"[k]))] = array(c);
    }
    d["coordinates"] = centres;
    d["names"] = r.fields;
    return d;
  }
  py::dict parameter_fields(const costate::io::PdeResult& r) const {
    py::dict d;
    for (const auto& a : r.parameter_field_names)
      d[py::str(a)] = rank() == 0 ? py::object(component(r, r.parameter_field, 0, 1)) : py::object(py::none());
    return d;
  }

  costate::io::PdeConfig cfg_;
  std::mutex mutex_;
};

std::unique_ptr<PdeProblem> load_pde_file(const std::string& path, const std::vector<std::string>& sets) {
  ensure_environment();
  costate::io::PdeConfig cfg;
  {
    py::gil_scoped_release unlocked;
    cfg = costate::io::load_pde_config(path, sets);
  }
  return std::make_unique<PdeProblem>(std::move(cfg));
}

std::unique_ptr<PdeProblem> load_pde_text(const std::string& text, const std::string& name,
                                          const std::vector<std::string>& sets) {
  ensure_environment();
  costate::io::PdeConfig cfg;
  {
    py::gil_scoped_release unlocked;
    cfg = costate::io::load_pde_config_text(text, name, sets);
  }
  return std::make_unique<PdeProblem>(std::move(cfg));
}

std::unique_ptr<Problem> load_file(const std::string& path, const std::vector<std::string>& sets) {
  ensure_environment();
  RunConfig cfg;
  {
    py::gil_scoped_release unlocked;
    cfg = costate::io::load_run_config(path, sets);
  }
  return std::make_unique<Problem>(std::move(cfg));
}

std::unique_ptr<Problem> load_text(const std::string& text, const std::string& name,
                                   const std::vector<std::string>& sets) {
  ensure_environment();
  RunConfig cfg;
  {
    py::gil_scoped_release unlocked;
    cfg = costate::io::load_run_config_text(text, name, sets);
  }
  return std::make_unique<Problem>(std::move(cfg));
}

}  // namespace

PYBIND11_MODULE(_costate, m) {
  m.doc() = "costate's compiled core; use the package `costate` (docs/python.md)";
  py::register_exception<costate::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<Problem>(m, "Problem")
      .def_property_readonly("input_path", [](const Problem& p) { return p.config().input_path; })
      .def_property_readonly("model", [](const Problem& p) { return p.config().model; })
      .def_property_readonly("description", [](const Problem& p) { return p.config().description; })
      .def_property_readonly("state_names", [](const Problem& p) { return p.config().state_names; })
      // A DAE's algebraic unknowns (model.algebraic, issue 32), by name; empty for an ODE.
      .def_property_readonly("algebraic_states",
                             [](const Problem& p) {
                               std::vector<std::string> names;
                               for (const std::size_t i : p.config().algebraic_states)
                                 names.push_back(p.config().state_names.at(i));
                               return names;
                             })
      .def_property_readonly("parameter_names",
                             [](const Problem& p) { return p.config().parameter_names; })
      .def_property_readonly("parameters", [](const Problem& p) { return array(p.config().parameters); })
      .def_property_readonly("initial_state",
                             [](const Problem& p) { return array(p.config().initial_state); })
      .def_property_readonly("output_times",
                             [](const Problem& p) { return array(p.config().output_times); })
      .def_property_readonly("has_objective",
                             [](const Problem& p) { return p.config().objective.present; })
      .def_property_readonly("has_calibration",
                             [](const Problem& p) { return p.config().calibration.present; })
      .def_property_readonly("sensitivity_method",
                             [](const Problem& p) { return costate::ode::to_string(p.config().sensitivity.method); })
      .def_property_readonly("settings", [](const Problem& p) { return p.config().to_yaml(); })
      .def("run", &Problem::run, py::arg("output") = "")
      .def("sensitivity", &Problem::sensitivity, py::arg("hessian") = false, py::arg("output") = "")
      .def("gradcheck", &Problem::gradcheck)
      .def("calibrate", &Problem::calibrate, py::arg("output") = "")
      .def("fit", &Problem::fit)
      .def("fit_conditions", &Problem::fit_conditions, py::arg("callback"), py::arg("options"))
      .def("objective", &Problem::objective, py::arg("x"))
      .def("hessp", &Problem::hessp, py::arg("x"), py::arg("v"))
      .def("values", &Problem::values, py::arg("x"));

  py::class_<PetabProblem>(m, "PetabProblem")
      .def_property_readonly("file", [](const PetabProblem& p) { return p.problem().file; })
      .def_property_readonly("ids", [](const PetabProblem& p) { return p.problem().estimated_ids(); })
      .def_property_readonly("nominal",
                             [](const PetabProblem& p) { return array(p.problem().nominal_on_scale()); })
      .def_property_readonly("lower",
                             [](const PetabProblem& p) { return array(p.problem().bounds_on_scale()[0]); })
      .def_property_readonly("upper",
                             [](const PetabProblem& p) { return array(p.problem().bounds_on_scale()[1]); })
      .def_property_readonly("scales",
                             [](const PetabProblem& p) {
                               std::vector<std::string> s;
                               for (std::size_t e : p.problem().estimated)
                                 s.push_back(costate::petab::to_string(p.problem().parameters[e].scale));
                               return s;
                             })
      .def_property_readonly("n_measurements",
                             [](const PetabProblem& p) { return p.problem().measurements.size(); })
      .def_property_readonly("n_experiments",
                             [](const PetabProblem& p) { return p.problem().experiments.size(); })
      .def_property_readonly("report", [](const PetabProblem& p) { return p.problem().brief_report(); })
      .def("evaluate", &PetabProblem::evaluate, py::arg("theta") = py::none(),
           py::arg("gradient") = true, py::arg("fim") = false)
      .def("objective", &PetabProblem::objective, py::arg("x"))
      .def("fit", &PetabProblem::fit, py::arg("theta"), py::arg("callback"), py::arg("options"))
      .def("calibrate", &PetabProblem::calibrate, py::arg("starts"), py::arg("seed"),
           py::arg("output") = "", py::arg("sampling") = "lhs");

  py::class_<PdeProblem>(m, "PdeProblem")
      .def_property_readonly("input_path", [](const PdeProblem& p) { return p.config().input_path; })
      .def_property_readonly("description", [](const PdeProblem& p) { return p.config().description; })
      .def_property_readonly("dim", [](const PdeProblem& p) { return p.config().equations.dim; })
      .def_property_readonly("cells",
                             [](const PdeProblem& p) {
                               const auto& c = p.config().domain.cells;
                               return std::vector<std::int64_t>(c.begin(), c.begin() + p.config().equations.dim);
                             })
      .def_property_readonly("field_names", [](const PdeProblem& p) { return p.config().equations.fields; })
      .def_property_readonly("parameter_names",
                             [](const PdeProblem& p) { return p.config().equations.parameters; })
      .def_property_readonly("parameters", [](const PdeProblem& p) { return array(p.config().parameters); })
      .def_property_readonly("parameter_field_names",
                             [](const PdeProblem& p) { return p.config().equations.parameter_fields; })
      .def_property_readonly("has_objective", [](const PdeProblem& p) { return p.config().objective.present; })
      .def_property_readonly("settings", [](const PdeProblem& p) { return p.config().to_yaml(); })
      .def("run", &PdeProblem::run, py::arg("output") = "")
      .def("sensitivity", &PdeProblem::sensitivity, py::arg("output") = "");

  m.def("load_file", &load_file, py::arg("path"), py::arg("sets"));
  m.def("load_petab", &load_petab, py::arg("path"));
  m.def("fit", &fit_python, py::arg("loss"), py::arg("n_conditions"), py::arg("x0"), py::arg("lower"),
        py::arg("upper"), py::arg("callback"), py::arg("options"));
  m.def("is_petab", [](const std::string& path) { return costate::petab::is_problem_file(path); },
        py::arg("path"));
  m.def("mpi_rank_size", []() {
    int rank = 0, size = 1, up = 0;
    MPI_Initialized(&up);
    if (up) {
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    return py::make_tuple(rank, size);
  });
  m.def("load_text", &load_text, py::arg("text"), py::arg("name"), py::arg("sets"));
  m.def("load_pde_file", &load_pde_file, py::arg("path"), py::arg("sets"));
  m.def("load_pde_text", &load_pde_text, py::arg("text"), py::arg("name"), py::arg("sets"));
  m.def("is_pde_input", [](const std::string& path) { return costate::io::is_pde_input(path); },
        py::arg("path"));
  // Finalise what ensure_environment() initialised while the interpreter is
  // still alive (not from a static destructor after it).
  py::module_::import("atexit").attr("register")(
      py::cpp_function([]() { environment().reset(); }));
}
