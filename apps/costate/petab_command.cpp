// `costate sensitivity problem.yaml` for PEtab problems (petab_command.hpp).
#include "petab_command.hpp"

#include <chrono>
#include <iomanip>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "costate/core/error.hpp"
#include "costate/petab/calibrate.hpp"
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

int petab_calibrate(const Environment& env, const CommandArgs& args) {
  const std::string& path = args.input;
  if (!args.sets.empty())
    throw Error(path + ": --set is not supported for PEtab problems (got '" + args.sets.front() +
                "'); their settings come from the tables");
  if (args.starts == 0 || args.starts < -1)
    throw Error(path + ": --starts " + std::to_string(args.starts) +
                ": expected a number of starts ≥ 1 (omit it for one start at the nominal values)");
  if (args.seed < -1)
    throw Error(path + ": --seed " + std::to_string(args.seed) + ": expected a seed ≥ 0");
  if (args.seed >= 0 && args.starts < 0)
    throw Error(path + ": --seed needs --starts N (the seed draws the starts)");
  const std::string& out = args.output;
  const bool to_json = out.size() > 5 && out.ends_with(".json");
  if (!out.empty() && !to_json && !out.ends_with(".h5"))
    throw Error(path + ": -o " + out + ": expected an output file ending in .h5 or .json");
  const petab::Problem problem = petab::read(path);
  petab::CalibrationOptions options;
  options.starts = std::max(0, args.starts);
  options.seed = static_cast<std::uint64_t>(std::max(0LL, args.seed));
  const bool talk = env.is_root() && !args.quiet && !args.json;
  if (talk)
    std::cerr << problem.brief_report() << "\ncalibrate: "
              << (options.starts == 0 ? std::string("one start at the nominal values")
                                      : std::to_string(options.starts) + " starts (seed " +
                                            std::to_string(options.seed) + ") over " +
                                            std::to_string(env.size()) + " rank(s)")
              << ", TAO " << optimize::to_string(options.optimizer.method) << ", "
              << ode::to_string(options.evaluation.method) << " gradients\n";
  const petab::Calibration c = petab::calibrate(problem, options, env.comm());
  if (env.rank() != 0) return c.best().converged ? 0 : 2;

  const petab::StartFit& best = c.best();
  nlohmann::ordered_json j;
  j["status"] = best.converged ? "ok" : "not_converged";
  j["problem"] = path;
  j["llh"] = best.llh;
  j["objective"] = best.objective;
  nlohmann::ordered_json x = nlohmann::ordered_json::object();
  for (std::size_t e = 0; e < c.ids.size(); ++e) x[c.ids[e]] = best.x[e];
  j["parameters"] = x;  // on their scales
  j["best_start"] = best.index;
  j["starts"] = c.starts.size();
  j["at_best"] = c.at_best;
  j["best_tolerance"] = c.best_tolerance;
  nlohmann::ordered_json w = nlohmann::ordered_json::array();
  for (std::size_t i : c.waterfall()) {
    const petab::StartFit& f = c.starts[i];
    nlohmann::ordered_json s;
    s["start"] = i;
    s["objective"] = f.failed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.objective);
    s["llh"] = f.failed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.llh);
    s["iterations"] = f.iterations;
    s["evaluations"] = f.evaluations;
    s["converged"] = f.converged;
    s["failed"] = f.failed;
    s["termination"] = f.termination;
    s["rank"] = f.rank;
    s["seconds"] = f.seconds;
    w.push_back(s);
  }
  j["waterfall"] = w;  // every start, best first
  if (to_json) {
    std::ofstream file(out);
    if (!(file << j.dump(1) << "\n")) throw Error(out + ": cannot write the JSON output");
  } else if (!out.empty()) {
    petab::write_calibration_hdf5(out, c);
  }
  if (args.json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << std::setprecision(12) << "best llh " << best.llh << " (start " << best.index
              << ", " << best.termination << ")\nestimated parameters (on their scales):\n";
    for (std::size_t e = 0; e < c.ids.size(); ++e)
      std::cout << "  " << std::left << std::setw(28) << c.ids[e] << std::right << best.x[e] << "\n";
    std::cout << "waterfall (final -llh by start, best first):\n";
    for (std::size_t i : c.waterfall()) {
      const petab::StartFit& f = c.starts[i];
      std::cout << "  start " << std::setw(4) << i << "  ";
      if (f.failed)
        std::cout << "failed: " << f.termination << "\n";
      else
        std::cout << std::setw(20) << f.objective << "  " << f.iterations << " it, " << f.termination << "\n";
    }
    std::cout << c.at_best << " of " << c.starts.size() << " starts within " << c.best_tolerance
              << " of the best\n";
    if (!out.empty()) std::cout << "wrote " << out << "\n";
  }
  return best.converged ? 0 : 2;
}

}  // namespace costate::cli
