// petab::fit_stochastic: a PEtab problem's experiments as the conditions of
// optimize::fit (see include/costate/petab/stochastic.hpp).
#include "costate/petab/stochastic.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "costate/core/error.hpp"

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

}  // namespace costate::petab
