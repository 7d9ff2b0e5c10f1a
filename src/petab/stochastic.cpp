// petab::fit_stochastic: a PEtab problem's experiments as the conditions of
// optimize::fit (see include/costate/petab/stochastic.hpp).
#include "costate/petab/stochastic.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "costate/core/error.hpp"
#include "hdf5.hpp"

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
  out.result = optimize::fit(d, out.initial, bounds[0], bounds[1], fit_options, callbacks, resume_from);
  out.llh = std::numeric_limits<double>::quiet_NaN();
  if (out.result.termination != "interrupted") {
    Options o = options;
    o.gradient = false;
    o.fim = false;
    try {
      out.llh = evaluate(problem, out.result.x, o, comm).llh;
    } catch (const Error&) {
      // a failed simulation at the returned point: llh stays NaN (reported)
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

void write_stochastic_hdf5(const std::string& path, const StochasticFit& fit,
                           const optimize::StochasticOptions& options) {
  using detail::H5, detail::write_doubles, detail::write_ids, detail::write_text;
  H5 file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  COSTATE_CHECK(file.id >= 0, path << ": cannot create the HDF5 file");
  H5 group(H5Gcreate2(file.id, "stochastic", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  COSTATE_CHECK(group.id >= 0, path << ": cannot create group /stochastic");
  const std::string g = "/stochastic";
  const optimize::StochasticResult& r = fit.result;
  write_ids(group.id, g, "ids", fit.ids, path);
  write_text(group.id, g, "method", optimize::to_string(options.method), path);
  write_text(group.id, g, "termination", r.termination, path);
  std::ostringstream settings;
  settings.precision(17);
  settings << "method=" << optimize::to_string(options.method) << " epochs=" << options.epochs
           << " batch=" << options.batch << " physical_batch=" << options.physical_batch
           << " learning_rate=" << options.learning_rate << " schedule=" << optimize::to_string(options.schedule)
           << " warmup_steps=" << options.warmup_steps << " beta1=" << options.beta1 << " beta2=" << options.beta2
           << " epsilon=" << options.epsilon << " weight_decay=" << options.weight_decay
           << " momentum=" << options.momentum << " clip_norm=" << options.clip_norm
           << " validation_split=" << options.validation_split << " patience=" << options.patience
           << " seed=" << options.seed << " max_rescues=" << options.max_rescues;
  write_text(group.id, g, "settings", settings.str(), path);
  const std::size_t n = fit.ids.size(), ne = r.epochs.size();
  write_doubles(group.id, g, "x", r.x, n, 0, path);
  write_doubles(group.id, g, "initial", fit.initial, n, 0, path);
  write_doubles(group.id, g, "objective", {r.objective}, 1, 0, path);
  write_doubles(group.id, g, "llh", {fit.llh}, 1, 0, path);
  write_doubles(group.id, g, "steps", {static_cast<double>(r.steps)}, 1, 0, path);
  write_doubles(group.id, g, "simulations", {static_cast<double>(r.simulations)}, 1, 0, path);
  write_doubles(group.id, g, "rescues", {static_cast<double>(r.rescues)}, 1, 0, path);
  const auto as_doubles = [](const std::vector<std::size_t>& v) { return std::vector<double>(v.begin(), v.end()); };
  write_doubles(group.id, g, "training", as_doubles(r.training), r.training.size(), 0, path);
  write_doubles(group.id, g, "validation", as_doubles(r.validation), r.validation.size(), 0, path);
  std::vector<double> tl, tse, vl, lr, st, sim, res;
  for (const auto& e : r.epochs) {
    tl.push_back(e.train_loss);
    tse.push_back(e.train_loss_stderr);
    vl.push_back(e.validation_loss);
    lr.push_back(e.learning_rate);
    st.push_back(static_cast<double>(e.steps));
    sim.push_back(static_cast<double>(e.simulations));
    res.push_back(e.rescues);
  }
  write_doubles(group.id, g, "train_loss", tl, ne, 0, path);
  write_doubles(group.id, g, "train_loss_stderr", tse, ne, 0, path);
  write_doubles(group.id, g, "validation_loss", vl, ne, 0, path);
  write_doubles(group.id, g, "learning_rate", lr, ne, 0, path);
  write_doubles(group.id, g, "epoch_steps", st, ne, 0, path);
  write_doubles(group.id, g, "epoch_simulations", sim, ne, 0, path);
  write_doubles(group.id, g, "epoch_rescues", res, ne, 0, path);
}

}  // namespace costate::petab
