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
// A second problem, shaped like Stapor et al.'s (`cells`): cell lines
// sharing a core of 13 kinetic parameters (log scale), 1 000 conditions
// (100 cell lines × 5 pathway branches × 2 ligand doses), each condition
// informative about 5 of the 13 (the receptor's 3 and its branch's 2); the
// cell lines differ by known expression levels of the branch kinases:
//
//   R' = k_on u (1 − R) − k_off R,   A' = k_a,b e_ℓb R (1 − A) − k_d,b A,
//   observed R and s·A at 8 times (5 % noise), R(0) = A(0) = 0.
//
// Sample runs:  build/bench/bench_stochastic_fit [starts=20] [conditions=500] [epochs=30] [batch=25]
//               [learning-rate=0.05] [adamw-only]
//               build/bench/bench_stochastic_fit cells [starts=20] [conditions=1000] [epochs=10]
//               [batch=50] [learning-rate=0.1] [warm-up steps=20] [adamw-only]
//               and, anywhere after them, settings by name: first=N (the first start's index,
//               for starts not looked at while choosing settings), best=F (the best objective
//               known, instead of the best of this run), beta2=F, schedule=cosine|step|constant,
//               finish=N (AdamW ends with N full-batch bqnls iterations, counted in its cost),
//               gatol=F (that finish's ‖∇‖ tolerance), growth=F (batch growth per epoch),
//               history=1 (each AdamW fit's training loss per epoch), restart=E:F:R (at the end of
//               epoch E, restart an AdamW fit whose objective estimate exceeds F × data/2 from a new
//               random point, at most R times per start; see Settings), hybrid=0 (no
//               AdamW-then-full-batch arm), average=K (AdamW returns the mean iterate of its last K
//               epochs), seed=start (each start's AdamW seeded by its index; default: seed 1)
#include <algorithm>
#include <array>
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
  static constexpr int kParams = ::kParams;
  static constexpr std::size_t kDataPerCondition = 2 * 8;
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
  const std::vector<double>& truth_values() const { return kTruth; }
};


// ---- the cell-line problem (`cells`) -------------------------------------------

constexpr int kCellParams = 13;
constexpr int kBranches = 5;
constexpr double kCellTEnd = 16.0;
const std::vector<double> kCellTimes{0.5, 1, 2, 4, 6, 8, 12, 16};
// k_on, k_off, s, then (k_a, k_d) of the 5 branches
const std::vector<double> kCellTruth{0.5, 0.3, 2.0, 1.0, 0.2, 0.4, 0.5, 2.0, 0.1, 0.7, 0.3, 1.5, 0.8};

/// One condition's receptor R and branch activity A; p = (k_on, k_off, s,
/// k_a, k_d) of its branch; the dose u and expression e are the condition's.
struct Cascade {
  double u = 1.0, e = 1.0;
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dy) const {
    dy[0] = p[0] * u * (1.0 - y[0]) - p[1] * y[0];
    dy[1] = p[3] * e * y[0] * (1.0 - y[1]) - p[4] * y[1];
  }
};

/// ½ Σ_k [(R_k − d_R)/σ_R]² + [(s A_k − d_A)/σ_A]².
struct CascadeMisfit {
  const double* data;  // 2 per time
  double sigma_r, sigma_a;
  std::vector<double> observation_times() const { return kCellTimes; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    const T rr = (y[0] - data[2 * k]) / sigma_r;
    const T ra = (p[2] * y[1] - data[2 * k + 1]) / sigma_a;
    return 0.5 * (rr * rr + ra * ra);
  }
};

struct CellLines {
  static constexpr int kParams = kCellParams;
  static constexpr std::size_t kDataPerCondition = 2 * 8;
  std::vector<double> dose, expression, data, sigma_r, sigma_a;
  std::vector<int> branch;
  std::size_t n = 0;
  /// Condition c: cell line c / 10, branch (c / 2) mod 5, dose 0.3 or 3.
  static std::array<int, 5> used(int b) { return {0, 1, 2, 3 + 2 * b, 4 + 2 * b}; }
  explicit CellLines(std::size_t conditions) : n(conditions) {
    for (std::size_t c = 0; c < n; ++c) {
      const std::size_t line = c / 10;
      const int b = static_cast<int>((c / 2) % kBranches);
      branch.push_back(b);
      dose.push_back(c % 2 == 0 ? 0.3 : 3.0);
      // The cell line's (known) expression of branch b's kinase: log-normal.
      expression.push_back(std::exp(0.5 * normal(line * 8 + static_cast<std::uint64_t>(b), 21)));
      std::vector<double> p;
      for (int j : used(b)) p.push_back(kCellTruth[static_cast<std::size_t>(j)]);
      ode::Problem problem{Cascade{dose.back(), expression.back()}, {0.0, 0.0}, p, {0.0, kCellTEnd}, kCellTimes};
      const auto sol = ode::integrate(problem, {.method = ode::Method::RK4, .dt = 0.01});
      double sr = 0, sa = 0;
      for (std::size_t k = 0; k < kCellTimes.size(); ++k) {
        sr = std::max(sr, sol.state(k)[0]);
        sa = std::max(sa, p[2] * sol.state(k)[1]);
      }
      sigma_r.push_back(0.05 * sr);
      sigma_a.push_back(0.05 * sa);
      for (std::size_t k = 0; k < kCellTimes.size(); ++k) {
        data.push_back(sol.state(k)[0] + sigma_r.back() * normal(c * 16 + k, 27));
        data.push_back(p[2] * sol.state(k)[1] + sigma_a.back() * normal(c * 16 + k, 29));
      }
    }
  }
  double condition(std::size_t c, std::span<const double> x, std::span<double> g) const {
    const auto idx = used(branch[c]);
    std::vector<double> p;
    for (int j : idx) p.push_back(std::exp(x[static_cast<std::size_t>(j)]));
    ode::Problem problem{Cascade{dose[c], expression[c]}, {0.0, 0.0}, p, {0.0, kCellTEnd}};
    // dopri5: the bounds allow rates 30× the truth's, beyond a fixed rk4
    // step's stability; rtol 1e-8 keeps the objective's step-choice noise
    // (~1e-8 relative) far below the fits' tolerances.
    const auto r = ode::gradient(problem, CascadeMisfit{data.data() + c * 2 * kCellTimes.size(), sigma_r[c], sigma_a[c]},
                                 ode::DiscreteAdjoint{}, {.method = ode::Method::Dopri5, .rtol = 1e-8, .atol = 1e-10});
    std::fill(g.begin(), g.end(), 0.0);
    for (std::size_t i = 0; i < idx.size(); ++i) g[static_cast<std::size_t>(idx[i])] = p[i] * r.wrt_parameters[i];
    return r.objective;
  }
  const std::vector<double>& truth_values() const { return kCellTruth; }
};

/// The dataset of a study (its conditions' ℓ_c) and the full objective.
template <class S>
opt::Dataset dataset_of(const S& study) {
  return {.n_conditions = study.n,
          .n = S::kParams,
          .condition = [&study](std::size_t c, std::span<const double> x, std::span<double> g) {
            return study.condition(c, x, g);
          },
          .batch = {}};
}
template <class S>
double full_objective(const S& study, std::span<const double> x, std::span<double> g) {
  std::vector<double> gi(S::kParams);
  std::fill(g.begin(), g.end(), 0.0);
  double f = 0;
  for (std::size_t c = 0; c < study.n; ++c) {
    try {
      f += study.condition(c, x, gi);
    } catch (const Error&) {
      return std::numeric_limits<double>::infinity();
    }
    for (int j = 0; j < S::kParams; ++j) g[static_cast<std::size_t>(j)] += gi[static_cast<std::size_t>(j)];
  }
  return f;
}

struct Run {
  double objective = 0, cpu = 0;
  std::int64_t simulations = 0;
  std::vector<std::pair<std::int64_t, double>> trace;  // (simulations, full objective)
};

/// The settings of one benchmark run (the command line's arguments).
struct Settings {
  int starts = 20;
  int first = 0;  ///< the first start's index
  double best = std::numeric_limits<double>::quiet_NaN();  ///< the best objective known (NaN: this run's)
  std::size_t conditions = 500;
  opt::StochasticOptions adam;
  bool adam_only = false;
  bool hybrid = true;  ///< run the AdamW-then-full-batch arm (off: hybrid=0)
  bool history = false;  ///< print each AdamW fit's training loss per epoch
  /// Restart of a stalled AdamW fit: at the end of epoch `restart_epoch`
  /// (0: never), a fit whose training loss (× the conditions: the full
  /// objective's estimate) exceeds `restart_factor` × (number of data)/2 —
  /// the expected ½χ² of a fit consistent with the noise model, a
  /// goodness-of-fit test that needs no known optimum — is abandoned and
  /// started again from a new random point, at most `restart_limit` times
  /// per start; every attempt's simulations count in the start's cost.
  int restart_epoch = 0;
  double restart_factor = 2.0;
  int restart_limit = 3;
  /// Tail averaging (StochasticOptions::average_epochs): the AdamW arm
  /// returns the mean of the iterates of its last `average` epochs.
  int average = 0;
  /// Each start's AdamW draws its batches from seed 1 + its index (else
  /// every start shares seed 1: the same batch sequence, so the last
  /// iterates' noise is common to all starts).
  bool seed_per_start = false;
};

template <class S>
int benchmark(const S& study, const Settings& set) {
  constexpr int np = S::kParams;
  const std::size_t conditions = study.n;
  const int starts = set.starts;
  const opt::StochasticOptions& adam = set.adam;
  const bool adam_only = set.adam_only;
  const opt::Dataset ds = dataset_of(study);
  std::vector<double> lo(np), hi(np), truth(np);
  for (int j = 0; j < np; ++j) {
    truth[j] = std::log(study.truth_values()[static_cast<std::size_t>(j)]);
    lo[j] = truth[j] - 1.5 * std::log(10.0);
    hi[j] = truth[j] + 1.5 * std::log(10.0);
  }
  std::vector<double> g(np);
  std::printf("%zu conditions, %d parameters, %d starts; objective at the truth %.3f\n", conditions, np, starts,
              full_objective(study, truth, g));
  std::printf("AdamW: %d epochs, batch %zu (growth %g per epoch), learning rate %g, %s, warm-up %d steps, beta2 %g, finish %d iterations "
              "(gatol %g); starts %d to %d\n",
              adam.epochs, adam.batch, adam.batch_growth, adam.learning_rate, opt::to_string(adam.schedule).c_str(), adam.warmup_steps,
              adam.beta2, adam.finish_iterations, adam.finish_gatol, set.first, set.first + starts - 1);
  std::printf("AdamW: average of the last %d epochs; restart at epoch %d above %g x data/2 (at most %d times); "
              "seed %s\n",
              set.average, set.restart_epoch, set.restart_factor, set.restart_limit,
              set.seed_per_start ? "1 + the start's index" : "1 for every start");
  // AdamW for a third of the epochs, then the full-batch finish (TAO bqnls
  // to the same gradient tolerance as the L-BFGS fits).
  opt::StochasticOptions hybrid_options = adam;
  hybrid_options.epochs = std::max(1, adam.epochs / 3);
  hybrid_options.finish_iterations = 300;  // (whatever finish= gave the AdamW arm)
  hybrid_options.finish_gatol = 1e-3;
  // The AdamW trace: a full evaluation (not counted as the fit's cost) at
  // about ten epoch ends.
  const int trace_every = std::max(1, adam.epochs / 10);
  const std::vector<std::size_t> epoch_batch = opt::logical_batches(conditions, adam);
  std::vector<Run> lbfgs(static_cast<std::size_t>(starts)), adamw(static_cast<std::size_t>(starts)),
      hybrid(static_cast<std::size_t>(starts));
  for (int s = 0; s < starts; ++s) {
    const auto us = static_cast<std::size_t>(s);
    const auto start = static_cast<std::uint64_t>(set.first + s);  // the start's index: its point
    // The start's point (attempt 0) and its restarts' points (attempt ≥ 1).
    const auto start_point = [&](int attempt) {
      std::vector<double> p(np);
      for (int j = 0; j < np; ++j)
        p[j] = truth[j] + (2.0 * uniform(start * 16 + static_cast<std::uint64_t>(j),
                                         3 + 1000 * static_cast<std::uint64_t>(attempt)) -
                           1.0) * std::log(10.0);
      return p;
    };
    const std::vector<double> x0 = start_point(0);
    // Alternate which method runs first (the machine is shared).
    for (int side = 0; side < 2; ++side) {
      const bool tao_side = (side == 0) == (s % 2 == 0);
      if (tao_side && adam_only) continue;
      Run& r = tao_side ? lbfgs[us] : adamw[us];
      const double c0 = bench::cpu_seconds();
      if (tao_side) {
        std::int64_t sims = 0;
        double best = std::numeric_limits<double>::infinity();
        const opt::Objective f{.n = np,
                               .objective_and_gradient =
                                   [&](std::span<const double> x, std::span<double> gx) {
                                     const double v = full_objective(study, x, gx);
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
        // AdamW, restarted from a new point while the restart test rejects it.
        opt::StochasticResult fit;
        std::int64_t spent = 0;  // the abandoned attempts' simulations
        int attempt = 0;
        opt::StochasticOptions options = adam;
        options.average_epochs = set.average;
        if (set.seed_per_start) options.seed = 1 + start;
        for (;; ++attempt) {
          bool abandon = false;
          fit = opt::fit(
              ds, start_point(attempt), lo, hi, options,
              {.on_step = [&](const opt::StochasticState& st) {
                 const std::size_t b = epoch_batch[static_cast<std::size_t>(st.epoch)];
                 if (st.position != (conditions + b - 1) / b) return true;  // not an epoch's end
                 if ((st.epoch + 1) % trace_every == 0) {
                   const double c1 = bench::cpu_seconds();
                   r.trace.emplace_back(spent + st.simulations, full_objective(study, st.x, g));
                   r.cpu -= bench::cpu_seconds() - c1;  // the trace is not the fit's cost
                 }
                 if (set.restart_epoch == st.epoch + 1 && attempt < set.restart_limit) {
                   double loss = 0;
                   for (double l : st.batch_losses) loss += l;
                   loss *= static_cast<double>(conditions) / static_cast<double>(st.batch_losses.size());
                   abandon = loss > set.restart_factor * 0.5 *
                                        static_cast<double>(conditions * S::kDataPerCondition);
                 }
                 return !abandon;
               },
               .on_epoch = {},
               .on_restart = {}});
          if (!abandon) break;
          spent += fit.simulations;
        }
        fit.simulations += spent;
        if (attempt > 0) std::printf("start %2d: AdamW restarted %d times\n", set.first + s, attempt);
        r.objective = fit.objective;
        r.simulations = fit.simulations;
        r.trace.emplace_back(fit.simulations, fit.objective);
        if (set.history) {
          std::printf("start %2d: AdamW training loss × conditions per epoch:", set.first + s);
          for (const auto& e : fit.epochs) std::printf(" %.4g", e.train_loss * static_cast<double>(conditions));
          std::printf("\n");
        }
        // Where AdamW ended: log10(x / truth) per parameter, '|' at a bound.
        std::string where;
        for (int j = 0; j < np; ++j) {
          char cell[24];
          const bool bound = fit.x[j] <= lo[j] + 1e-9 || fit.x[j] >= hi[j] - 1e-9;
          std::snprintf(cell, sizeof cell, " %+.2f%s", (fit.x[j] - truth[j]) / std::log(10.0), bound ? "|" : "");
          where += cell;
        }
        std::printf("start %2d: AdamW ended at log10(x/truth) =%s (termination %s%s%s)\n", set.first + s,
                    where.c_str(), fit.termination.c_str(), fit.finish_termination.empty() ? "" : ", finish ",
                    fit.finish_termination.c_str());
      }
      r.cpu += bench::cpu_seconds() - c0;
    }
    if (!adam_only && set.hybrid) {
      Run& r = hybrid[us];
      const double c0 = bench::cpu_seconds();
      const auto fit = opt::fit(ds, x0, lo, hi, hybrid_options);
      r.cpu = bench::cpu_seconds() - c0;
      r.objective = fit.objective;
      r.simulations = fit.simulations;
      r.trace.emplace_back(fit.simulations, fit.objective);
    }
    std::printf("start %2d: L-BFGS %12.3f (%8lld simulations, %6.1f s)   AdamW %12.3f (%8lld simulations, %6.1f s)   "
                "AdamW+finish %12.3f (%8lld simulations, %6.1f s)\n",
                set.first + s, lbfgs[us].objective, static_cast<long long>(lbfgs[us].simulations), lbfgs[us].cpu,
                adamw[us].objective, static_cast<long long>(adamw[us].simulations), adamw[us].cpu,
                hybrid[us].objective, static_cast<long long>(hybrid[us].simulations), hybrid[us].cpu);
    std::fflush(stdout);
  }
  double best = std::isnan(set.best) ? std::numeric_limits<double>::infinity() : set.best;
  for (int s = 0; s < starts && std::isnan(set.best); ++s) {
    const auto us = static_cast<std::size_t>(s);
    best = std::min({best, adam_only ? best : lbfgs[us].objective, adamw[us].objective,
                     adam_only || !set.hybrid ? best : hybrid[us].objective});
  }
  const auto summary = [&](const char* name, const std::vector<Run>& runs) {
    int within = 0;
    std::vector<double> sims, cpu, hit;
    for (const Run& r : runs) {
      within += r.objective - best <= 1.0;
      sims.push_back(static_cast<double>(r.simulations));
      cpu.push_back(r.cpu);
      // The simulations after which the run was first within 1 of the best.
      for (const auto& [n, f] : r.trace)
        if (f - best <= 1.0) {
          hit.push_back(static_cast<double>(n));
          break;
        }
    }
    std::sort(sims.begin(), sims.end());
    std::sort(cpu.begin(), cpu.end());
    std::sort(hit.begin(), hit.end());
    double total_sims = 0, total_cpu = 0;
    for (std::size_t i = 0; i < sims.size(); ++i) total_sims += sims[i], total_cpu += cpu[i];
    // Stapor et al.'s measure of a multi-start: the simulations of all the
    // starts per start that got within 1.
    std::printf("%-12s %2d of %d starts within 1 of the best (%.3f); simulations median %.0f, total %.0f "
                "(%.0f per start within 1); CPU median %.1f s, total %.1f s; first within 1 after (median of those "
                "that got there) %.0f simulations\n",
                name, within, starts, best, sims[sims.size() / 2], total_sims,
                within > 0 ? total_sims / within : std::numeric_limits<double>::infinity(), cpu[cpu.size() / 2],
                total_cpu, hit.empty() ? std::numeric_limits<double>::quiet_NaN() : hit[hit.size() / 2]);
  };
  if (!adam_only) summary("L-BFGS", lbfgs);
  summary("AdamW", adamw);
  if (!adam_only && set.hybrid) summary("AdamW+finish", hybrid);
  // The median (over starts) best objective reached by a number of simulations.
  std::printf("\nmedian best objective − best, by condition simulations spent:\n%12s %14s %14s\n", "simulations",
              "L-BFGS", "AdamW");
  for (double budget : {5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5}) {
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

}  // namespace

int main(int argc, char** argv) {
  Environment env(argc, argv);
  // `cells` selects the cell-line problem; its defaults differ. Arguments
  // with '=' are settings by name; the others are positional.
  const bool cells = argc > 1 && std::string(argv[1]) == "cells";
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> named;
  for (int i = cells ? 2 : 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq == std::string::npos)
      positional.push_back(a);
    else
      named.emplace_back(a.substr(0, eq), a.substr(eq + 1));
  }
  auto arg = [&](int i) -> const char* {
    return static_cast<std::size_t>(i) <= positional.size() ? positional[static_cast<std::size_t>(i - 1)].c_str()
                                                            : nullptr;
  };
  Settings set;
  set.starts = arg(1) ? std::atoi(arg(1)) : 20;
  set.conditions = arg(2) ? static_cast<std::size_t>(std::atoi(arg(2))) : cells ? 1000 : 500;
  set.adam = {.epochs = arg(3) ? std::atoi(arg(3)) : cells ? 10 : 30,
              .batch = arg(4) ? static_cast<std::size_t>(std::atoi(arg(4))) : cells ? 50 : 25,
              .learning_rate = arg(5) ? std::atof(arg(5)) : cells ? 0.1 : 0.05,
              .schedule = opt::LearningRateSchedule::Cosine,
              .seed = 1};
  int next = 6;
  if (cells) set.adam.warmup_steps = arg(6) ? std::atoi(arg(next++)) : 20;
  set.adam_only = arg(next) && std::string(arg(next)) == "adamw-only";
  for (const auto& [key, value] : named) {
    if (key == "first")
      set.first = std::atoi(value.c_str());
    else if (key == "best")
      set.best = std::atof(value.c_str());
    else if (key == "beta2")
      set.adam.beta2 = std::atof(value.c_str());
    else if (key == "schedule")
      set.adam.schedule = opt::learning_rate_schedule_from_string(value);
    else if (key == "finish")
      set.adam.finish_iterations = std::atoi(value.c_str());
    else if (key == "growth")
      set.adam.batch_growth = std::atof(value.c_str());
    else if (key == "restart") {  // E:F:R
      set.restart_epoch = std::atoi(value.c_str());
      const auto c1 = value.find(':');
      if (c1 != std::string::npos) {
        set.restart_factor = std::atof(value.c_str() + c1 + 1);
        const auto c2 = value.find(':', c1 + 1);
        if (c2 != std::string::npos) set.restart_limit = std::atoi(value.c_str() + c2 + 1);
      }
    } else if (key == "seed")
      set.seed_per_start = value == "start";
    else if (key == "average")
      set.average = std::atoi(value.c_str());
    else if (key == "hybrid")
      set.hybrid = value != "0";
    else if (key == "history")
      set.history = value == "1";
    else if (key == "gatol")
      set.adam.finish_gatol = std::atof(value.c_str());
    else
      throw Error("bench_stochastic_fit: unknown setting '" + key +
                  "' (first, best, beta2, schedule, finish, gatol, growth, history, restart, hybrid, average, seed)");
  }
  set.adam.validate();
  if (cells) return benchmark(CellLines(set.conditions), set);
  return benchmark(Study(set.conditions), set);
}
