// Mini-batch AdamW against full-batch L-BFGS (TAO bqnls) on a
// many-condition ODE calibration (issue 33's benchmark; Stapor et al., Nat.
// Commun. 2022, measured the same on parPE/AMICI):
//
//   a two-compartment pharmacokinetic model with saturable elimination and
//   an effect compartment, 10 parameters (log scale), 500 conditions (doses
//   over two decades), 8 observation times and two observables each
//   (concentration c/V and the response Emax·E/(EC50 + E)), data from the
//   truth with 5 % noise;
//
//   from 20 random starts (±1 in log10 around the truth, within bounds of
//   ±1.5): the final objective (negative log-likelihood up to a constant),
//   the condition simulations (each an ODE gradient by the discrete adjoint,
//   rk4), CPU seconds, how many starts end within 1 of the best objective
//   found by either method, and the median objective reached against the
//   simulations spent.
//
// Sample run:  build/bench/bench_stochastic_fit [starts=20] [conditions=500] [epochs=30] [batch=25]
//              [learning-rate=0.05] [adamw-only]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/optimize/stochastic.hpp"
#include "costate/optimize/tao.hpp"

namespace {

using namespace costate;
namespace opt = costate::optimize;

constexpr int kParams = 10;
constexpr double kTEnd = 24.0;
const std::vector<double> kTimes{0.5, 1, 2, 4, 6, 9, 12, 24};
// ka, CL, V, k12, k21, Vmax, Km, ke0, Emax, EC50 (h⁻¹, L/h, L, mg/h, mg/L, …)
const std::vector<double> kTruth{1.2, 2.0, 10.0, 0.6, 0.3, 5.0, 2.0, 0.4, 100.0, 1.5};

/// Deterministic pseudo-random numbers in [0, 1) (SplitMix64 of an index).
double uniform(std::uint64_t i, std::uint64_t salt) {
  std::uint64_t z = i * 0x9e3779b97f4a7c15ULL + salt * 0xd1b54a32d192ed03ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}
double normal(std::uint64_t i, std::uint64_t salt) {  // Box–Muller
  return std::sqrt(-2.0 * std::log(1.0 - uniform(i, salt))) * std::cos(2.0 * M_PI * uniform(i, salt + 1));
}

/// gut a, central c, peripheral q, effect E; p = the 10 parameters (linear).
struct Pk {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dy) const {
    const T &ka = p[0], &cl = p[1], &v = p[2], &k12 = p[3], &k21 = p[4], &vmax = p[5], &km = p[6], &ke0 = p[7];
    const T conc = y[1] / v;
    dy[0] = -ka * y[0];
    dy[1] = ka * y[0] - cl * conc - k12 * y[1] + k21 * y[2] - vmax * conc / (km + conc);
    dy[2] = k12 * y[1] - k21 * y[2];
    dy[3] = ke0 * (conc - y[3]);
  }
};

/// ½ Σ_k [(c_k/V − d_c)/σ_c]² + [(R_k − d_R)/σ_R]², R = Emax E/(EC50 + E).
struct Misfit {
  const double* data;  // 2 per time
  double sigma_c, sigma_r;
  std::vector<double> observation_times() const { return kTimes; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    const T rc = (y[1] / p[2] - data[2 * k]) / sigma_c;
    const T rr = (p[8] * y[3] / (p[9] + y[3]) - data[2 * k + 1]) / sigma_r;
    return 0.5 * (rc * rc + rr * rr);
  }
};

struct Study {
  std::vector<double> dose, data, sigma_c, sigma_r;
  std::size_t n = 0;
  explicit Study(std::size_t conditions) : n(conditions) {
    for (std::size_t c = 0; c < n; ++c) {
      dose.push_back(10.0 * std::pow(10.0, 2.0 * uniform(c, 1)));  // 10 … 1000 mg
      // The truth's noise-free values, by a fine rk4 solve of the same model.
      ode::Problem problem{Pk{}, {dose.back(), 0.0, 0.0, 0.0}, kTruth, {0.0, kTEnd}, kTimes};
      const auto sol = ode::integrate(problem, {.method = ode::Method::RK4, .dt = 0.01});
      double sc = 0, sr = 0;
      std::vector<double> clean;
      for (std::size_t k = 0; k < kTimes.size(); ++k) {
        const auto y = sol.state(k);
        const double conc = y[1] / kTruth[2], r = kTruth[8] * y[3] / (kTruth[9] + y[3]);
        clean.push_back(conc);
        clean.push_back(r);
        sc = std::max(sc, conc);
        sr = std::max(sr, r);
      }
      sigma_c.push_back(0.05 * sc);
      sigma_r.push_back(0.05 * sr);
      for (std::size_t k = 0; k < kTimes.size(); ++k) {
        data.push_back(clean[2 * k] + sigma_c.back() * normal(c * 16 + k, 7));
        data.push_back(clean[2 * k + 1] + sigma_r.back() * normal(c * 16 + k, 9));
      }
    }
  }
  /// One condition's loss and gradient on the log scale (x = log p).
  double condition(std::size_t c, std::span<const double> x, std::span<double> g) const {
    std::vector<double> p(kParams);
    for (int j = 0; j < kParams; ++j) p[j] = std::exp(x[j]);
    ode::Problem problem{Pk{}, {dose[c], 0.0, 0.0, 0.0}, p, {0.0, kTEnd}};
    const auto r = ode::gradient(problem, Misfit{data.data() + c * 2 * kTimes.size(), sigma_c[c], sigma_r[c]},
                                 ode::DiscreteAdjoint{}, {.method = ode::Method::RK4, .dt = 0.1});
    for (int j = 0; j < kParams; ++j) g[j] = p[j] * r.wrt_parameters[j];
    return r.objective;
  }
  opt::Dataset dataset() const {
    return {.n_conditions = n,
            .n = kParams,
            .condition = [this](std::size_t c, std::span<const double> x, std::span<double> g) {
              return condition(c, x, g);
            },
            .batch = {}};
  }
  double full(std::span<const double> x, std::span<double> g) const {
    std::vector<double> gi(kParams);
    std::fill(g.begin(), g.end(), 0.0);
    double f = 0;
    for (std::size_t c = 0; c < n; ++c) {
      try {
        f += condition(c, x, gi);
      } catch (const Error&) {
        return std::numeric_limits<double>::infinity();
      }
      for (int j = 0; j < kParams; ++j) g[j] += gi[j];
    }
    return f;
  }
};

struct Run {
  double objective = 0, cpu = 0;
  std::int64_t simulations = 0;
  std::vector<std::pair<std::int64_t, double>> trace;  // (simulations, full objective)
};

}  // namespace

int main(int argc, char** argv) {
  Environment env(argc, argv);
  const int starts = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::size_t conditions = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 500;
  const Study study(conditions);
  const opt::Dataset ds = study.dataset();
  std::vector<double> lo(kParams), hi(kParams), truth(kParams);
  for (int j = 0; j < kParams; ++j) {
    truth[j] = std::log(kTruth[j]);
    lo[j] = truth[j] - 1.5 * std::log(10.0);
    hi[j] = truth[j] + 1.5 * std::log(10.0);
  }
  std::vector<double> g(kParams);
  std::printf("%zu conditions, %d parameters, %d starts; objective at the truth %.3f\n", conditions, kParams,
              starts, study.full(truth, g));
  const opt::StochasticOptions adam{.epochs = argc > 3 ? std::atoi(argv[3]) : 30,
                                    .batch = argc > 4 ? static_cast<std::size_t>(std::atoi(argv[4])) : 25,
                                    .learning_rate = argc > 5 ? std::atof(argv[5]) : 0.05,
                                    .schedule = opt::LearningRateSchedule::Cosine, .seed = 1};
  const bool adam_only = argc > 6 && std::string(argv[6]) == "adamw-only";
  // AdamW for a third of the epochs, then the full-batch finish (TAO bqnls
  // to the same gradient tolerance as the L-BFGS fits).
  opt::StochasticOptions hybrid_options = adam;
  hybrid_options.epochs = std::max(1, adam.epochs / 3);
  hybrid_options.finish_iterations = 300;
  hybrid_options.finish_gatol = 1e-3;
  std::vector<Run> lbfgs(static_cast<std::size_t>(starts)), adamw(static_cast<std::size_t>(starts)),
      hybrid(static_cast<std::size_t>(starts));
  for (int s = 0; s < starts; ++s) {
    std::vector<double> x0(kParams);
    for (int j = 0; j < kParams; ++j) x0[j] = truth[j] + (2.0 * uniform(static_cast<std::uint64_t>(s) * 16 + j, 3) - 1.0) * std::log(10.0);
    // Alternate which method runs first (the machine is shared).
    for (int side = 0; side < 2; ++side) {
      const bool tao_side = (side == 0) == (s % 2 == 0);
      if (tao_side && adam_only) continue;
      Run& r = tao_side ? lbfgs[static_cast<std::size_t>(s)] : adamw[static_cast<std::size_t>(s)];
      const double c0 = bench::cpu_seconds();
      if (tao_side) {
        std::int64_t sims = 0;
        double best = std::numeric_limits<double>::infinity();
        const opt::Objective f{.n = kParams,
                               .objective_and_gradient =
                                   [&](std::span<const double> x, std::span<double> gx) {
                                     const double v = study.full(x, gx);
                                     sims += static_cast<std::int64_t>(conditions);
                                     best = std::min(best, v);
                                     r.trace.emplace_back(sims, best);
                                     return v;
                                   },
                               .hessian = {}};
        const auto t = opt::minimize(f, x0, lo, hi, {.gatol = 1e-3, .grtol = 0, .max_iterations = 300});
        r.objective = t.objective;
        r.simulations = sims;
      } else {
        const auto fit = opt::fit(ds, x0, lo, hi, adam,
                                  {.on_step = [&](const opt::StochasticState& st) {
                                     // Every 10th epoch's end (the trace costs a full
                                     // evaluation, not counted as the fit's).
                                     if (st.position * adam.batch >= conditions && (st.epoch + 1) % 10 == 0) {
                                       const double c1 = bench::cpu_seconds();
                                       r.trace.emplace_back(st.simulations, study.full(st.x, g));
                                       r.cpu -= bench::cpu_seconds() - c1;  // the trace is not the fit's cost
                                     }
                                     return true;
                                   },
                                   .on_epoch = {}});
        r.objective = fit.objective;
        r.simulations = fit.simulations;
      }
      r.cpu += bench::cpu_seconds() - c0;
    }
    {
      Run& r = hybrid[static_cast<std::size_t>(s)];
      const double c0 = bench::cpu_seconds();
      const auto fit = opt::fit(ds, x0, lo, hi, hybrid_options);
      r.cpu = bench::cpu_seconds() - c0;
      r.objective = fit.objective;
      r.simulations = fit.simulations;
      r.trace.emplace_back(fit.simulations, fit.objective);
    }
    std::printf("start %2d: AdamW+finish %12.3f (%8lld simulations, %6.1f s)\n", s, hybrid[static_cast<std::size_t>(s)].objective,
                static_cast<long long>(hybrid[static_cast<std::size_t>(s)].simulations), hybrid[static_cast<std::size_t>(s)].cpu);
    std::printf("start %2d: L-BFGS %12.3f (%8lld simulations, %6.1f s)   AdamW %12.3f (%8lld simulations, %6.1f s)\n", s,
                lbfgs[static_cast<std::size_t>(s)].objective, static_cast<long long>(lbfgs[static_cast<std::size_t>(s)].simulations),
                lbfgs[static_cast<std::size_t>(s)].cpu, adamw[static_cast<std::size_t>(s)].objective,
                static_cast<long long>(adamw[static_cast<std::size_t>(s)].simulations), adamw[static_cast<std::size_t>(s)].cpu);
    std::fflush(stdout);
  }
  double best = std::numeric_limits<double>::infinity();
  for (int s = 0; s < starts; ++s)
    best = std::min({best, adam_only ? best : lbfgs[static_cast<std::size_t>(s)].objective,
                     adamw[static_cast<std::size_t>(s)].objective, hybrid[static_cast<std::size_t>(s)].objective});
  const auto summary = [&](const char* name, const std::vector<Run>& runs) {
    int within = 0;
    std::vector<double> sims, cpu;
    for (const Run& r : runs) {
      within += r.objective - best <= 1.0;
      sims.push_back(static_cast<double>(r.simulations));
      cpu.push_back(r.cpu);
    }
    std::sort(sims.begin(), sims.end());
    std::sort(cpu.begin(), cpu.end());
    double total_sims = 0, total_cpu = 0;
    for (std::size_t i = 0; i < sims.size(); ++i) total_sims += sims[i], total_cpu += cpu[i];
    std::printf("%-12s %2d of %d starts within 1 of the best (%.3f); simulations median %.0f, total %.0f; CPU median %.1f s, total %.1f s\n",
                name, within, starts, best, sims[sims.size() / 2], total_sims, cpu[cpu.size() / 2], total_cpu);
  };
  summary("L-BFGS", lbfgs);
  summary("AdamW", adamw);
  summary("AdamW+finish", hybrid);
  // The median (over starts) best objective reached by a number of simulations.
  std::printf("\nmedian best objective − best, by condition simulations spent:\n%12s %14s %14s\n", "simulations", "L-BFGS", "AdamW");
  for (double budget : {5e3, 1e4, 2e4, 5e4, 1e5, 2e5}) {
    std::vector<double> a, b;
    for (int s = 0; s < starts; ++s) {
      const auto reached = [&](const Run& r) {
        double v = std::numeric_limits<double>::infinity();
        for (const auto& [n, f] : r.trace)
          if (static_cast<double>(n) <= budget) v = std::min(v, f);
        return v - best;
      };
      a.push_back(reached(lbfgs[static_cast<std::size_t>(s)]));
      b.push_back(reached(adamw[static_cast<std::size_t>(s)]));
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::printf("%12.0f %14.4g %14.4g\n", budget, a[a.size() / 2], b[b.size() / 2]);
  }
  return 0;
}
