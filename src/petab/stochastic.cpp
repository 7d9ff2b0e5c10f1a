// petab::fit_stochastic: a PEtab problem's experiments as the conditions of
// optimize::fit (see include/costate/petab/stochastic.hpp).
#include "costate/petab/stochastic.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <cmath>
#include <numeric>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/io/output_file.hpp"
#include "hdf5.hpp"
#include "io/hdf5_memory.hpp"

namespace costate::petab {

optimize::Dataset experiment_dataset(const Problem& problem, const Options& options, MPI_Comm comm) {
  Options o = options;
  o.gradient = true;
  o.per_experiment = true;
  o.fim = false;
  const std::size_t n = problem.estimated.size();
  const double n_ex = static_cast<double>(problem.experiments.size());
  optimize::Dataset d;
  d.n_conditions = problem.experiments.size();
  d.n = n;
  d.batch = [&problem, o, n, n_ex, comm](std::span<const std::size_t> conditions, std::span<const double> x,
                                          std::span<double> loss, std::span<double> gradient) mutable {
    // petab::evaluate takes the experiments ascending: sort, evaluate, and
    // put each experiment's terms back in the batch's order.
    std::vector<std::size_t> at(conditions.size());
    std::iota(at.begin(), at.end(), std::size_t{0});
    std::sort(at.begin(), at.end(), [&](std::size_t a, std::size_t b) { return conditions[a] < conditions[b]; });
    o.experiments.resize(conditions.size());
    for (std::size_t i = 0; i < at.size(); ++i) o.experiments[i] = conditions[at[i]];
    COSTATE_CHECK(std::adjacent_find(o.experiments.begin(), o.experiments.end()) == o.experiments.end(),
                  "petab stochastic fit: an experiment appears twice in one batch");
    const Result r = evaluate(problem, std::vector<double>(x.begin(), x.end()), o, comm);
    for (std::size_t i = 0; i < at.size(); ++i) {
      const std::size_t k = at[i];  // batch position of the i-th ascending experiment
      loss[k] = r.experiment_nll[i] - r.log_prior / n_ex;
      for (std::size_t j = 0; j < n; ++j)
        gradient[k * n + j] = r.experiment_gradient[i * n + j] - r.log_prior_gradient[j] / n_ex;
    }
  };
  return d;
}

StochasticFit fit_stochastic(const Problem& problem, const optimize::StochasticOptions& fit_options,
                             const Options& options, std::span<const double> theta0,
                             const optimize::StochasticCallbacks& callbacks,
                             const optimize::StochasticState* resume_from, MPI_Comm comm) {
  COSTATE_CHECK(!problem.estimated.empty(), problem.file << ": no parameter is estimated (estimate = 1)");
  StochasticFit out;
  out.ids = problem.estimated_ids();
  out.initial = theta0.empty() ? problem.nominal_on_scale() : std::vector<double>(theta0.begin(), theta0.end());
  COSTATE_CHECK(out.initial.size() == problem.estimated.size(),
                "petab stochastic fit: theta0 has " << out.initial.size() << " values for "
                                                    << problem.estimated.size() << " estimated parameters");
  const auto bounds = problem.bounds_on_scale();
  const optimize::Dataset d = experiment_dataset(problem, options, comm);
  // The objective over every experiment and the llh come from one plain
  // evaluation at the returned point (not the fit's own final pass and a
  // second simulation): objective = −(llh + log prior), counted as
  // n_experiments simulations as optimize::fit counts its final pass.
  optimize::StochasticOptions fo = fit_options;
  fo.final_objective = false;
  out.result = optimize::fit(d, out.initial, bounds[0], bounds[1], fo, callbacks, resume_from);
  out.llh = std::numeric_limits<double>::quiet_NaN();
  if (out.result.termination != "interrupted") {
    Options o = options;
    o.gradient = false;
    o.fim = false;
    try {
      const Result r = evaluate(problem, out.result.x, o, comm);
      out.llh = r.llh;
      if (fit_options.final_objective) out.result.objective = -(r.llh + r.log_prior);
    } catch (const Error&) {
      // a failed simulation at the returned point: llh and objective stay NaN (reported)
    }
    if (fit_options.final_objective) {
      out.result.simulations += static_cast<std::int64_t>(problem.experiments.size());
      out.result.state.simulations = out.result.simulations;
    }
  }
  return out;
}

std::string StochasticFit::brief_report() const {
  std::ostringstream os;
  os.precision(10);
  os << "stochastic fit: " << result.brief_report() << "; llh " << llh;
  return os.str();
}

std::string stochastic_settings(const optimize::StochasticOptions& options) {
  std::ostringstream settings;
  settings.precision(17);
  settings << "method=" << optimize::to_string(options.method) << " epochs=" << options.epochs
           << " batch=" << options.batch << " batch_growth=" << options.batch_growth
           << " physical_batch=" << options.physical_batch
           << " learning_rate=" << options.learning_rate << " schedule=" << optimize::to_string(options.schedule)
           << " step_epochs=" << options.step_epochs << " gamma=" << options.gamma
           << " min_learning_rate=" << options.min_learning_rate << " warmup_steps=" << options.warmup_steps
           << " beta1=" << options.beta1 << " beta2=" << options.beta2 << " epsilon=" << options.epsilon
           << " weight_decay=" << options.weight_decay << " momentum=" << options.momentum
           << " clip_norm=" << options.clip_norm << " validation_split=" << options.validation_split
           << " patience=" << options.patience << " seed=" << options.seed << " max_rescues=" << options.max_rescues
           << " max_restarts=" << options.max_restarts
           << " finish_iterations=" << options.finish_iterations << " finish_gatol=" << options.finish_gatol
           << " average_epochs=" << options.average_epochs;
  return settings.str();
}

namespace {

void write_u64(hid_t group, const std::string& where, const char* name, const std::vector<std::uint64_t>& v,
               const std::string& path) {
  using detail::H5;
  const hsize_t dims[1] = {v.size()};
  H5 space(H5Screate_simple(1, dims, nullptr), H5Sclose);
  H5 set(H5Dcreate2(group, name, H5T_NATIVE_UINT64, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  COSTATE_CHECK(set.id >= 0, path << ": cannot create dataset " << where << "/" << name);
  if (!v.empty())
    COSTATE_CHECK(H5Dwrite(set.id, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
                  path << ": cannot write dataset " << where << "/" << name);
}

template <class T>
std::vector<T> read_vector(hid_t group, const char* name, hid_t type, const std::string& path) {
  using detail::H5;
  H5 set(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  COSTATE_CHECK(set.id >= 0, path << ": no dataset /stochastic_state/" << name);
  H5 space(H5Dget_space(set.id), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  COSTATE_CHECK(n >= 0, path << ": unreadable dataset /stochastic_state/" << name);
  std::vector<T> v(static_cast<std::size_t>(n));
  if (n > 0)
    COSTATE_CHECK(H5Dread(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
                  path << ": cannot read dataset /stochastic_state/" << name);
  return v;
}

std::string read_text(hid_t object, const char* name, const std::string& path) {
  using detail::H5;
  H5 attr(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
  COSTATE_CHECK(attr.id >= 0, path << ": no attribute /stochastic_state/" << name);
  H5 type(H5Aget_type(attr.id), H5Tclose);
  std::string text(H5Tget_size(type.id), '\0');
  H5 mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.id, text.size());
  COSTATE_CHECK(H5Aread(attr.id, mem.id, text.data()) >= 0, path << ": cannot read attribute " << name);
  text.resize(std::strlen(text.c_str()));
  return text;
}

}  // namespace

namespace {

void write_state(const std::string& path, const std::string& problem_file,
                 const optimize::StochasticOptions& options, const optimize::StochasticState& st) {
  using detail::H5, detail::write_doubles, detail::write_text;
  H5 file(io::detail::create_in_memory(path), H5Fclose);
  COSTATE_CHECK(file.id >= 0, path << ": cannot create the HDF5 file");
  detail::write_provenance(file.id, "calibrate", "", path);  // the settings: /stochastic_state's
  {
  H5 group(H5Gcreate2(file.id, "stochastic_state", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  COSTATE_CHECK(group.id >= 0, path << ": cannot create group /stochastic_state");
  const std::string g = "/stochastic_state";
  write_text(group.id, g, "problem", problem_file, path);
  // The physical batch changes no bit: a fit may resume with another.
  optimize::StochasticOptions canonical = options;
  canonical.physical_batch = 0;
  write_text(group.id, g, "settings", stochastic_settings(canonical), path);
  write_text(group.id, g, "status", "partial", path);
  const auto vec = [&](const char* name, const std::vector<double>& v) {
    write_doubles(group.id, g, name, v, v.size(), 0, path);
  };
  vec("x", st.x);
  vec("x_prev", st.x_prev);
  vec("m", st.m);
  vec("v", st.v);
  vec("best_x", st.best_x);
  vec("batch_losses", st.batch_losses);
  vec("average_sum", st.average_sum);
  vec("best_validation", {st.best_validation});
  std::vector<double> history;
  for (const auto& e : st.history)
    history.insert(history.end(), {static_cast<double>(e.epoch), e.train_loss, e.train_loss_stderr, e.validation_loss,
                                   e.learning_rate, static_cast<double>(e.steps), static_cast<double>(e.simulations),
                                   static_cast<double>(e.rescues)});
  write_doubles(group.id, g, "history", history, st.history.size(), 8, path);
  write_u64(group.id, g, "order", std::vector<std::uint64_t>(st.order.begin(), st.order.end()), path);
  write_u64(group.id, g, "counters",
            {static_cast<std::uint64_t>(st.step), static_cast<std::uint64_t>(st.epoch), st.position, st.rng,
             static_cast<std::uint64_t>(st.epoch_rescues), static_cast<std::uint64_t>(st.epochs_since_best),
             static_cast<std::uint64_t>(st.simulations), static_cast<std::uint64_t>(st.rescues)},
            path);
  // The restarts (after the 8 counters above, in their own dataset so that
  // a state written before restarts existed still reads): restarts, this
  // epoch's, the step of the last restart; and each epoch's restarts.
  write_u64(group.id, g, "restart_counters",
            {static_cast<std::uint64_t>(st.restarts), static_cast<std::uint64_t>(st.epoch_restarts),
             static_cast<std::uint64_t>(st.moment_start)},
            path);
  std::vector<std::uint64_t> epoch_restarts;
  for (const auto& e : st.history) epoch_restarts.push_back(static_cast<std::uint64_t>(e.restarts));
  write_u64(group.id, g, "history_restarts", epoch_restarts, path);
  }
  io::detail::save_image(file.id, path);
}

}  // namespace

void write_stochastic_state_hdf5(const std::string& path, const std::string& problem_file,
                                 const optimize::StochasticOptions& options,
                                 const optimize::StochasticState& st) {
  io::write_output_file(path, [&](const std::string& temporary) {
    write_state(temporary, problem_file, options, st);
  }, {problem_file});
}


optimize::StochasticState read_stochastic_state_hdf5(const std::string& path, const std::string& problem_file,
                                                     const optimize::StochasticOptions& options) {
  using detail::H5;
  COSTATE_CHECK(std::filesystem::is_regular_file(path) && H5Fis_hdf5(path.c_str()) > 0, path << ": not an HDF5 file (--resume)");
  H5 file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  COSTATE_CHECK(file.id >= 0, path << ": cannot open the HDF5 file (--resume)");
  COSTATE_CHECK(H5Lexists(file.id, "stochastic_state", H5P_DEFAULT) > 0,
                path << ": holds no interrupted stochastic fit (/stochastic_state); --resume takes the file an "
                        "interrupted `costate calibrate --optimizer …` wrote");
  H5 group(H5Gopen2(file.id, "stochastic_state", H5P_DEFAULT), H5Gclose);
  const std::string problem = read_text(group.id, "problem", path);
  COSTATE_CHECK(problem == problem_file,
                path << ": the interrupted fit is of " << problem << ", not " << problem_file);
  optimize::StochasticOptions canonical = options;
  canonical.physical_batch = 0;
  const std::string settings = read_text(group.id, "settings", path), now = stochastic_settings(canonical);
  COSTATE_CHECK(settings == now, path << ": the interrupted fit's settings differ from this command's;\n  then: "
                                      << settings << "\n  now:  " << now);
  optimize::StochasticState st;
  st.x = read_vector<double>(group.id, "x", H5T_NATIVE_DOUBLE, path);
  st.x_prev = read_vector<double>(group.id, "x_prev", H5T_NATIVE_DOUBLE, path);
  st.m = read_vector<double>(group.id, "m", H5T_NATIVE_DOUBLE, path);
  st.v = read_vector<double>(group.id, "v", H5T_NATIVE_DOUBLE, path);
  st.best_x = read_vector<double>(group.id, "best_x", H5T_NATIVE_DOUBLE, path);
  st.batch_losses = read_vector<double>(group.id, "batch_losses", H5T_NATIVE_DOUBLE, path);
  // (a file written before tail averaging has none: fit() refuses it when averaging)
  if (H5Lexists(group.id, "average_sum", H5P_DEFAULT) > 0)
    st.average_sum = read_vector<double>(group.id, "average_sum", H5T_NATIVE_DOUBLE, path);
  const auto bv = read_vector<double>(group.id, "best_validation", H5T_NATIVE_DOUBLE, path);
  COSTATE_CHECK(bv.size() == 1, path << ": /stochastic_state/best_validation must hold one value");
  st.best_validation = bv[0];
  const auto history = read_vector<double>(group.id, "history", H5T_NATIVE_DOUBLE, path);
  COSTATE_CHECK(history.size() % 8 == 0, path << ": /stochastic_state/history must have 8 columns");
  for (std::size_t i = 0; i < history.size(); i += 8) {
    optimize::EpochRecord e;
    e.epoch = static_cast<int>(history[i]);
    e.train_loss = history[i + 1];
    e.train_loss_stderr = history[i + 2];
    e.validation_loss = history[i + 3];
    e.learning_rate = history[i + 4];
    e.steps = static_cast<std::int64_t>(history[i + 5]);
    e.simulations = static_cast<std::int64_t>(history[i + 6]);
    e.rescues = static_cast<int>(history[i + 7]);
    st.history.push_back(e);
  }
  const auto order = read_vector<std::uint64_t>(group.id, "order", H5T_NATIVE_UINT64, path);
  st.order.assign(order.begin(), order.end());
  const auto c = read_vector<std::uint64_t>(group.id, "counters", H5T_NATIVE_UINT64, path);
  COSTATE_CHECK(c.size() == 8, path << ": /stochastic_state/counters must hold 8 values");
  st.step = static_cast<std::int64_t>(c[0]);
  st.epoch = static_cast<int>(c[1]);
  st.position = static_cast<std::size_t>(c[2]);
  st.rng = c[3];
  st.epoch_rescues = static_cast<int>(c[4]);
  st.epochs_since_best = static_cast<int>(c[5]);
  st.simulations = static_cast<std::int64_t>(c[6]);
  st.rescues = static_cast<std::int64_t>(c[7]);
  if (H5Lexists(group.id, "restart_counters", H5P_DEFAULT) > 0) {
    const auto rc = read_vector<std::uint64_t>(group.id, "restart_counters", H5T_NATIVE_UINT64, path);
    const auto hr = read_vector<std::uint64_t>(group.id, "history_restarts", H5T_NATIVE_UINT64, path);
    COSTATE_CHECK(rc.size() == 3 && hr.size() == st.history.size(),
                  path << ": /stochastic_state/restart_counters must hold 3 values and history_restarts one per epoch");
    st.restarts = static_cast<std::int64_t>(rc[0]);
    st.epoch_restarts = static_cast<int>(rc[1]);
    st.moment_start = static_cast<std::int64_t>(rc[2]);
    for (std::size_t e = 0; e < hr.size(); ++e) st.history[e].restarts = static_cast<int>(hr[e]);
  }
  return st;
}

namespace {

void write_result(hid_t file_id, const std::string& path, const StochasticFit& fit,
                  const optimize::StochasticOptions& options) {
  using detail::H5, detail::write_doubles, detail::write_ids, detail::write_text;
  H5 group(H5Gcreate2(file_id, "stochastic", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  COSTATE_CHECK(group.id >= 0, path << ": cannot create group /stochastic");
  const std::string g = "/stochastic";
  const optimize::StochasticResult& r = fit.result;
  write_ids(group.id, g, "ids", fit.ids, path);
  write_text(group.id, g, "method", optimize::to_string(options.method), path);
  write_text(group.id, g, "termination", r.termination, path);
  write_text(group.id, g, "settings", stochastic_settings(options), path);
  if (!fit.fit_status.empty()) {
    write_text(group.id, g, "fit_status", fit.fit_status, path);
    write_text(group.id, g, "convergence", fit.convergence, path);
    write_text(group.id, g, "status", fit.fit_status == "not_converged" ? "partial" : "complete", path);
  }
  const std::size_t n = fit.ids.size(), ne = r.epochs.size();
  write_doubles(group.id, g, "x", r.x, n, 0, path);
  write_doubles(group.id, g, "initial", fit.initial, n, 0, path);
  if (!fit.standard_errors.empty()) write_doubles(group.id, g, "standard_errors", fit.standard_errors, n, 0, path);
  write_doubles(group.id, g, "objective", {r.objective}, 1, 0, path);
  write_doubles(group.id, g, "llh", {fit.llh}, 1, 0, path);
  write_doubles(group.id, g, "steps", {static_cast<double>(r.steps)}, 1, 0, path);
  write_doubles(group.id, g, "simulations", {static_cast<double>(r.simulations)}, 1, 0, path);
  write_doubles(group.id, g, "rescues", {static_cast<double>(r.rescues)}, 1, 0, path);
  write_doubles(group.id, g, "restarts", {static_cast<double>(r.restarts)}, 1, 0, path);
  const auto as_doubles = [](const std::vector<std::size_t>& v) { return std::vector<double>(v.begin(), v.end()); };
  write_doubles(group.id, g, "training", as_doubles(r.training), r.training.size(), 0, path);
  write_doubles(group.id, g, "validation", as_doubles(r.validation), r.validation.size(), 0, path);
  std::vector<double> tl, tse, vl, lr, st, sim, res, rst;
  for (const auto& e : r.epochs) {
    tl.push_back(e.train_loss);
    tse.push_back(e.train_loss_stderr);
    vl.push_back(e.validation_loss);
    lr.push_back(e.learning_rate);
    st.push_back(static_cast<double>(e.steps));
    sim.push_back(static_cast<double>(e.simulations));
    res.push_back(e.rescues);
    rst.push_back(e.restarts);
  }
  write_doubles(group.id, g, "train_loss", tl, ne, 0, path);
  write_doubles(group.id, g, "train_loss_stderr", tse, ne, 0, path);
  write_doubles(group.id, g, "validation_loss", vl, ne, 0, path);
  write_doubles(group.id, g, "learning_rate", lr, ne, 0, path);
  write_doubles(group.id, g, "epoch_steps", st, ne, 0, path);
  write_doubles(group.id, g, "epoch_simulations", sim, ne, 0, path);
  write_doubles(group.id, g, "epoch_rescues", res, ne, 0, path);
  write_doubles(group.id, g, "epoch_restarts", rst, ne, 0, path);
}

}  // namespace

std::string stochastic_settings_yaml(const Problem& problem, const Options& evaluation,
                                     const optimize::StochasticOptions& o) {
  std::ostringstream s;
  s.precision(17);
  s << settings_yaml(problem, evaluation) << "calibration:\n  optimizer: {method: " << optimize::to_string(o.method)
    << ", epochs: " << o.epochs << ", batch: " << o.batch << ", batch_growth: " << o.batch_growth
    << ", physical_batch: " << o.physical_batch
    << ", learning_rate: " << o.learning_rate << ", schedule: " << optimize::to_string(o.schedule)
    << ", step_epochs: " << o.step_epochs << ", gamma: " << o.gamma << ", min_learning_rate: " << o.min_learning_rate
    << ", warmup_steps: " << o.warmup_steps << ", beta1: " << o.beta1 << ", beta2: " << o.beta2
    << ", epsilon: " << o.epsilon << ", weight_decay: " << o.weight_decay << ", momentum: " << o.momentum
    << ", clip_norm: " << o.clip_norm << ", validation_split: " << o.validation_split << ", patience: " << o.patience
    << ", seed: " << o.seed << ", max_rescues: " << o.max_rescues << ", max_restarts: " << o.max_restarts
    << ", finish: " << o.finish_iterations
    << ", finish_gatol: " << o.finish_gatol << ", average_epochs: " << o.average_epochs << "}\n";
  return s.str();
}

void write_stochastic_hdf5(const std::string& path, const StochasticFit& fit,
                           const optimize::StochasticOptions& options, const std::string& problem_file,
                           const Provenance& provenance) {
  io::write_output_file(path, [&](const std::string& temporary) {
    using detail::H5;
    H5 file(io::detail::create_in_memory(temporary), H5Fclose);
    COSTATE_CHECK(file.id >= 0, temporary << ": cannot create the HDF5 file");
    detail::write_provenance(file.id, provenance.command.empty() ? "calibrate" : provenance.command,
                             provenance.settings, temporary);
    detail::write_text(file.id, "", "problem", problem_file, temporary);
    write_result(file.id, temporary, fit, options);
    io::detail::save_image(file.id, temporary);
  }, {problem_file});
}

}  // namespace costate::petab
