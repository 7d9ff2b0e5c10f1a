// `costate sensitivity problem.yaml` for PEtab problems (petab_command.hpp).
#include "petab_command.hpp"

#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "costate/core/error.hpp"
#include "costate/petab/problem.hpp"

namespace costate::cli {

bool is_petab_input(const std::string& path) { return petab::is_problem_file(path); }

int petab_sensitivity(const Environment& env, const std::string& path, bool json, bool quiet,
                      const std::vector<std::string>& sets) {
  if (!sets.empty())
    throw Error(path + ": --set is not supported for PEtab problems (got '" + sets.front() +
                "'); their settings come from the tables");
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const petab::Problem problem = petab::read(path);
  const auto t1 = clock::now();
  if (!quiet && !json && env.rank() == 0) std::cerr << problem.brief_report() << "\n";
  petab::Options options;
  options.gradient = true;
  // Experiments over the ranks (collective; every rank gets the whole result).
  const petab::Result r = petab::evaluate(problem, problem.nominal_on_scale(), options, env.comm());
  const auto t2 = clock::now();
  const std::vector<std::string> ids = problem.estimated_ids();
  if (env.rank() != 0) return 0;
  const double load = std::chrono::duration<double>(t1 - t0).count();
  const double grad = std::chrono::duration<double>(t2 - t1).count();
  if (json) {
    nlohmann::ordered_json j;
    j["status"] = "ok";
    j["problem"] = path;
    j["llh"] = r.llh;
    j["chi2"] = r.chi2;
    j["log_prior"] = r.log_prior;
    j["method"] = ode::to_string(options.method);
    nlohmann::ordered_json g = nlohmann::ordered_json::object();
    for (std::size_t e = 0; e < ids.size(); ++e) g[ids[e]] = r.gradient[e];
    j["gradient"] = g;
    j["load_seconds"] = load;
    j["gradient_seconds"] = grad;
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << std::setprecision(15) << "llh  " << r.llh << "\nchi2 " << r.chi2 << "\n";
  if (r.log_prior != 0.0) std::cout << "log prior " << r.log_prior << "\n";
  std::cout << "gradient of llh (estimated parameters, on their scales; "
            << ode::to_string(options.method) << "):\n";
  for (std::size_t e = 0; e < ids.size(); ++e)
    std::cout << "  " << std::left << std::setw(28) << ids[e] << std::right << r.gradient[e] << "\n";
  std::cout << std::setprecision(3) << "load " << load << " s, gradient " << grad << " s\n";
  return 0;
}

}  // namespace costate::cli
