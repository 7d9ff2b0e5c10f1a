// costate_synthetic_data — synthetic observations for calibration examples.
//
//   costate_synthetic_data FILE.yaml --noise STATE=SIGMA... [--seed N] -o OUT.csv
//
// Integrates the model of FILE.yaml (its parameters, initial state,
// integrator and time.outputs / time.output_every) and writes the states at
// the output times (t = time.start excluded) to a CSV file
// (`t,<state>,...`), each value plus Gaussian noise N(0, SIGMA²) for the
// states given with --noise (states without --noise are left out of the
// file). The noise is reproducible everywhere: draws come from
// std::mt19937_64 (whose sequence the C++ standard fixes) through the
// Box–Muller transform written here — std::normal_distribution is not used,
// because its algorithm differs between standard libraries. The file's
// header comments record the command, the seed and the true values.
//
// Sample run (how data/synthetic/lotka_volterra.csv was made; all three data
// sets: scripts/make-synthetic-data.sh):
//   costate_synthetic_data data/synthetic/lotka_volterra_truth.yaml
//       --noise x=0.1 --noise y=0.1 --seed 1 -o data/synthetic/lotka_volterra.csv
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numbers>
#include <random>

#include "costate/costate.hpp"
#include "costate/io/file_run.hpp"
#include "costate/io/input.hpp"

namespace {

/// Standard normal draws from mt19937_64 by Box–Muller (both values used).
class Normal {
 public:
  explicit Normal(std::uint64_t seed) : gen_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1]: 53 random bits, never 0 (log(0) would be -inf).
    const double u1 = (static_cast<double>(gen_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(gen_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"costate_synthetic_data: noisy observations of a model's trajectory (CSV)"};
  std::string input, output;
  std::vector<std::string> noise_args;
  std::uint64_t seed = 1;
  app.add_option("file", input, "YAML input file (model, parameters, time.outputs)")->required();
  app.add_option("--noise", noise_args, "STATE=SIGMA: observe STATE with Gaussian noise SIGMA (0 = exact)")
      ->required();
  app.add_option("--seed", seed, "seed of std::mt19937_64");
  app.add_option("-o,--output", output, "CSV file to write")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    costate::Environment env(argc, argv);
    const costate::io::RunConfig cfg = costate::io::load_run_config(input);
    std::vector<double> sigma(cfg.state_names.size(), -1.0);
    for (const auto& a : noise_args) {
      const auto eq = a.find('=');
      const std::string name = a.substr(0, eq);
      const auto it = std::find(cfg.state_names.begin(), cfg.state_names.end(), name);
      COSTATE_CHECK(eq != std::string::npos && it != cfg.state_names.end(),
                    "--noise " << a << ": expected STATE=SIGMA with STATE one of the model's states");
      const double s = std::stod(a.substr(eq + 1));
      COSTATE_CHECK(s >= 0.0 && std::isfinite(s), "--noise " << a << ": SIGMA must be >= 0");
      sigma[static_cast<std::size_t>(it - cfg.state_names.begin())] = s;
    }
    namespace ode = costate::ode;
    const ode::Solution sol = costate::io::integrate_file(cfg);
    COSTATE_CHECK(sol.summary.success(), "integration failed: " << sol.summary.message);
    std::ofstream out(output);
    COSTATE_CHECK(out.good(), output << ": cannot open for writing");
    out << "# Synthetic observations: " << (cfg.description.empty() ? cfg.model : cfg.description) << "\n";
    out << "# Made by: costate_synthetic_data " << input;
    for (const auto& a : noise_args) out << " --noise " << a;
    out << " --seed " << seed << " -o " << output << "\n# True parameters:";
    out.precision(17);
    for (std::size_t j = 0; j < cfg.parameters.size(); ++j)
      out << " " << cfg.parameter_names[j] << " = " << cfg.parameters[j] << (j + 1 < cfg.parameters.size() ? "," : "");
    out << "\n# True initial state:";
    for (std::size_t i = 0; i < cfg.initial_state.size(); ++i)
      out << " " << cfg.state_names[i] << " = " << cfg.initial_state[i] << (i + 1 < cfg.initial_state.size() ? "," : "");
    out.precision(6);
    out << "\n# Integrator: " << ode::to_string(cfg.integrator.method) << " (rtol " << cfg.integrator.rtol
        << "); noise: independent Gaussian, standard deviation";
    for (std::size_t i = 0; i < sigma.size(); ++i)
      if (sigma[i] >= 0) out << " " << cfg.state_names[i] << " " << sigma[i];
    out << " (std::mt19937_64 + Box-Muller)\nt";
    out.precision(17);
    for (std::size_t i = 0; i < sigma.size(); ++i)
      if (sigma[i] >= 0) out << "," << cfg.state_names[i];
    out << "\n";
    Normal normal(seed);
    for (std::size_t k = 0; k < sol.n_outputs(); ++k) {
      if (sol.t[k] == cfg.t_start) continue;
      out << sol.t[k];
      const auto y = sol.state(k);
      for (std::size_t i = 0; i < sigma.size(); ++i)
        if (sigma[i] >= 0) out << "," << y[i] + sigma[i] * normal();
      out << "\n";
    }
    std::cerr << "wrote " << output << " (" << sol.n_outputs() - 1 << " times)\n";
  } catch (const std::exception& e) {
    std::cerr << "costate_synthetic_data: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
