// optimize::fit — mini-batch stochastic minimisation over conditions
// (stochastic.hpp states the maths and what is reproducible).
#include "costate/optimize/stochastic.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numbers>
#include <numeric>
#include <sstream>
#include <utility>

#include "costate/core/error.hpp"
#include "costate/optimize/tao.hpp"

namespace costate::optimize {

namespace {

constexpr std::array kMethods{StochasticMethod::AdamW, StochasticMethod::Adam, StochasticMethod::Sgd};
constexpr std::array kSchedules{LearningRateSchedule::Constant, LearningRateSchedule::Step,
                                LearningRateSchedule::Cosine};

/// SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): one 64-bit word of state,
/// a fixed output on every platform.
std::uint64_t next_random(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Uniform in [0, n) without modulo bias: draws below 2⁶⁴ − (2⁶⁴ mod n) are
/// kept.
std::uint64_t random_below(std::uint64_t& state, std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;  // 2⁶⁴ mod n
  for (;;) {
    const std::uint64_t r = next_random(state);
    if (r >= threshold) return r % n;
  }
}

/// Fisher–Yates on the generator above.
void shuffle(std::vector<std::size_t>& v, std::uint64_t& state) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[random_below(state, i)]);
}

/// The two generator streams a seed starts: the split, and the epochs' orders.
std::uint64_t split_stream(std::uint64_t seed) { return seed ^ 0x5851f42d4c957f2dULL; }
std::uint64_t order_stream(std::uint64_t seed) { return seed ^ 0x14057b7ef767814fULL; }

/// One logical batch evaluated: losses and gradients by condition, in the
/// batch's order.
struct BatchValues {
  std::vector<double> loss;
  std::vector<double> gradient;  // |B| × n, row-major
  std::size_t failed = 0;        // the first condition (index into the batch) that failed
  bool ok = true;
};

class Evaluator {
 public:
  Evaluator(const Dataset& d, std::size_t physical) : d_(d), physical_(physical) {}

  /// ℓ_c and ∇ℓ_c for c in `conditions` at x; a throw of costate::Error or a
  /// non-finite number is a failed condition.
  BatchValues evaluate(std::span<const std::size_t> conditions, std::span<const double> x,
                       std::int64_t& simulations) const {
    const std::size_t nb = conditions.size(), n = d_.n;
    BatchValues out;
    out.loss.assign(nb, 0.0);
    out.gradient.assign(nb * n, 0.0);
    const std::size_t chunk = physical_ == 0 ? nb : physical_;
    for (std::size_t b = 0; b < nb; b += chunk) {
      const std::size_t e = std::min(nb, b + chunk);
      const auto cs = conditions.subspan(b, e - b);
      const std::span<double> loss(out.loss.data() + b, e - b);
      const std::span<double> grad(out.gradient.data() + b * n, (e - b) * n);
      if (d_.batch) {
        try {
          d_.batch(cs, x, loss, grad);
        } catch (const Error&) {
          std::fill(loss.begin(), loss.end(), std::numeric_limits<double>::quiet_NaN());
        }
      } else {
        for (std::size_t i = 0; i < cs.size(); ++i) {
          try {
            loss[i] = d_.condition(cs[i], x, grad.subspan(i * n, n));
          } catch (const Error&) {
            loss[i] = std::numeric_limits<double>::quiet_NaN();
          }
        }
      }
      simulations += static_cast<std::int64_t>(e - b);
    }
    for (std::size_t i = 0; i < nb && out.ok; ++i) {
      bool finite = std::isfinite(out.loss[i]);
      for (std::size_t j = 0; j < n && finite; ++j) finite = std::isfinite(out.gradient[i * n + j]);
      if (!finite) {
        out.ok = false;
        out.failed = i;
      }
    }
    return out;
  }

 private:
  const Dataset& d_;
  std::size_t physical_;
};

/// η_t of the schedule and warm-up, × 2⁻ʳ after r restarts (exact: a power of two).
double learning_rate(const StochasticOptions& o, std::int64_t step, int epoch, std::int64_t total,
                     std::int64_t restarts) {
  double eta = o.learning_rate;
  switch (o.schedule) {
    case LearningRateSchedule::Constant: break;
    case LearningRateSchedule::Step: eta *= std::pow(o.gamma, epoch / o.step_epochs); break;
    case LearningRateSchedule::Cosine: {
      const double f = total > 0 ? static_cast<double>(step) / static_cast<double>(total) : 0.0;
      eta = o.min_learning_rate +
            (o.learning_rate - o.min_learning_rate) * 0.5 * (1.0 + std::cos(std::numbers::pi * f));
      break;
    }
  }
  if (o.warmup_steps > 0 && step < o.warmup_steps)
    eta *= static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  return std::ldexp(eta, -static_cast<int>(restarts));
}

}  // namespace

std::string to_string(StochasticMethod m) {
  switch (m) {
    case StochasticMethod::AdamW: return "adamw";
    case StochasticMethod::Adam: return "adam";
    case StochasticMethod::Sgd: return "sgd";
  }
  return "?";
}

StochasticMethod stochastic_method_from_string(const std::string& name) {
  std::string valid;
  for (StochasticMethod m : kMethods) {
    if (to_string(m) == name) return m;
    valid += (valid.empty() ? "" : ", ") + to_string(m);
  }
  throw Error("unknown stochastic optimizer '" + name + "'; valid methods: " + valid);
}

std::string to_string(LearningRateSchedule s) {
  switch (s) {
    case LearningRateSchedule::Constant: return "constant";
    case LearningRateSchedule::Step: return "step";
    case LearningRateSchedule::Cosine: return "cosine";
  }
  return "?";
}

LearningRateSchedule learning_rate_schedule_from_string(const std::string& name) {
  std::string valid;
  for (LearningRateSchedule s : kSchedules) {
    if (to_string(s) == name) return s;
    valid += (valid.empty() ? "" : ", ") + to_string(s);
  }
  throw Error("unknown learning-rate schedule '" + name + "'; valid schedules: " + valid);
}

void StochasticOptions::validate() const {
  const auto finite_positive = [](double v) { return std::isfinite(v) && v > 0.0; };
  COSTATE_CHECK(epochs >= 1, "StochasticOptions::epochs = " << epochs << " must be >= 1");
  COSTATE_CHECK(finite_positive(learning_rate),
                "StochasticOptions::learning_rate = " << learning_rate << " must be > 0 and finite");
  COSTATE_CHECK(step_epochs >= 1, "StochasticOptions::step_epochs = " << step_epochs << " must be >= 1");
  COSTATE_CHECK(finite_positive(gamma) && gamma <= 1.0,
                "StochasticOptions::gamma = " << gamma << " must be in (0, 1]");
  COSTATE_CHECK(std::isfinite(min_learning_rate) && min_learning_rate >= 0.0 &&
                    min_learning_rate <= learning_rate,
                "StochasticOptions::min_learning_rate = " << min_learning_rate
                                                          << " must be in [0, learning_rate = "
                                                          << learning_rate << "]");
  COSTATE_CHECK(warmup_steps >= 0, "StochasticOptions::warmup_steps = " << warmup_steps << " must be >= 0");
  COSTATE_CHECK(beta1 >= 0.0 && beta1 < 1.0, "StochasticOptions::beta1 = " << beta1 << " must be in [0, 1)");
  COSTATE_CHECK(beta2 >= 0.0 && beta2 < 1.0, "StochasticOptions::beta2 = " << beta2 << " must be in [0, 1)");
  COSTATE_CHECK(finite_positive(epsilon), "StochasticOptions::epsilon = " << epsilon << " must be > 0");
  COSTATE_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0,
                "StochasticOptions::weight_decay = " << weight_decay << " must be >= 0");
  COSTATE_CHECK(momentum >= 0.0 && momentum < 1.0,
                "StochasticOptions::momentum = " << momentum << " must be in [0, 1)");
  COSTATE_CHECK(method == StochasticMethod::Sgd || momentum == 0.0,
                "StochasticOptions::momentum = " << momentum << " is SGD's; " << to_string(method)
                                                 << " has beta1 instead");
  COSTATE_CHECK(std::isfinite(clip_norm) && clip_norm >= 0.0,
                "StochasticOptions::clip_norm = " << clip_norm << " must be >= 0 (0: no clipping)");
  COSTATE_CHECK(validation_split >= 0.0 && validation_split < 1.0,
                "StochasticOptions::validation_split = " << validation_split << " must be in [0, 1)");
  COSTATE_CHECK(patience >= 0, "StochasticOptions::patience = " << patience << " must be >= 0");
  COSTATE_CHECK(patience == 0 || validation_split > 0.0,
                "StochasticOptions::patience = " << patience
                                                 << " needs a validation split (validation_split > 0)");
  COSTATE_CHECK(max_rescues >= 0, "StochasticOptions::max_rescues = " << max_rescues << " must be >= 0");
  COSTATE_CHECK(max_restarts >= 0 && max_restarts <= 1000,
                "StochasticOptions::max_restarts = " << max_restarts
                                                     << " must be in [0, 1000] (each restart halves the learning rate)");
  COSTATE_CHECK(std::isfinite(batch_growth) && batch_growth >= 1.0,
                "StochasticOptions::batch_growth = " << batch_growth << " must be >= 1 (1: a fixed batch)");
  COSTATE_CHECK(average_epochs >= 0 && average_epochs <= epochs,
                "StochasticOptions::average_epochs = " << average_epochs << " must be in [0, epochs = " << epochs
                                                       << "]");
  COSTATE_CHECK(average_epochs == 0 || validation_split == 0.0,
                "StochasticOptions::average_epochs = "
                    << average_epochs << " averages the last epochs' iterates, and validation_split = "
                    << validation_split << " returns the best-validation parameters: use one or the other");
  COSTATE_CHECK(finish_iterations >= 0,
                "StochasticOptions::finish_iterations = " << finish_iterations << " must be >= 0 (0: no finish)");
  COSTATE_CHECK(std::isfinite(finish_gatol) && finish_gatol > 0.0,
                "StochasticOptions::finish_gatol = " << finish_gatol << " must be > 0");
}

std::vector<std::size_t> logical_batches(std::size_t n_training, const StochasticOptions& options) {
  const std::size_t batch = options.batch == 0 ? n_training : std::min(options.batch, n_training);
  std::vector<std::size_t> out(static_cast<std::size_t>(std::max(options.epochs, 0)), batch);
  double grown = static_cast<double>(batch);
  for (std::size_t e = 1; e < out.size(); ++e) {
    grown *= options.batch_growth;
    out[e] = grown >= static_cast<double>(n_training) ? n_training : static_cast<std::size_t>(std::ceil(grown));
  }
  return out;
}

std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_conditions(
    std::size_t n_conditions, const StochasticOptions& options) {
  COSTATE_CHECK(n_conditions > 0, "stochastic fit: the dataset has no conditions");
  const auto n_validation =
      static_cast<std::size_t>(std::ceil(options.validation_split * static_cast<double>(n_conditions)));
  COSTATE_CHECK(n_validation < n_conditions,
                "stochastic fit: validation_split = " << options.validation_split << " holds out "
                    << n_validation << " of " << n_conditions
                    << " conditions and leaves none for training; lower it");
  std::vector<std::size_t> all(n_conditions);
  std::iota(all.begin(), all.end(), std::size_t{0});
  std::pair<std::vector<std::size_t>, std::vector<std::size_t>> out;
  if (n_validation == 0) {
    out.first = std::move(all);
    return out;
  }
  std::uint64_t s = split_stream(options.seed);
  shuffle(all, s);
  out.second.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_validation));
  out.first.assign(all.begin() + static_cast<std::ptrdiff_t>(n_validation), all.end());
  std::sort(out.first.begin(), out.first.end());
  std::sort(out.second.begin(), out.second.end());
  return out;
}

StochasticResult fit(const Dataset& dataset, std::span<const double> x0, std::span<const double> lower,
                     std::span<const double> upper, const StochasticOptions& options,
                     const StochasticCallbacks& callbacks, const StochasticState* resume_from) {
  const auto start = std::chrono::steady_clock::now();
  options.validate();
  const std::size_t n = dataset.n;
  COSTATE_CHECK(n > 0, "stochastic fit: the dataset has no parameters (Dataset::n = 0)");
  COSTATE_CHECK(dataset.condition || dataset.batch,
                "stochastic fit: the dataset has neither a condition nor a batch function");
  COSTATE_CHECK_EQ(lower.size(), n, "stochastic fit: lower bounds");
  COSTATE_CHECK_EQ(upper.size(), n, "stochastic fit: upper bounds");

  // 1. The split and the batch sizes.
  StochasticResult result;
  std::tie(result.training, result.validation) = split_conditions(dataset.n_conditions, options);
  const std::vector<std::size_t>& training = result.training;
  const std::size_t batch = options.batch == 0 ? training.size() : options.batch;
  COSTATE_CHECK(batch <= training.size(),
                "stochastic fit: batch = " << batch << " is larger than the training set ("
                    << training.size() << " conditions"
                    << (result.validation.empty() ? "" : " after the validation split") << ")");
  COSTATE_CHECK(options.physical_batch <= batch,
                "stochastic fit: physical_batch = " << options.physical_batch
                    << " is larger than the logical batch (" << batch << ")");
  // The logical batch of each epoch (batch_growth) and the fit's step count.
  const std::vector<std::size_t> epoch_batch = logical_batches(training.size(), options);
  const auto batches_in = [&](int epoch) {
    const std::size_t b = epoch_batch[static_cast<std::size_t>(epoch)];
    return (training.size() + b - 1) / b;
  };
  std::int64_t total_steps = 0, window_start = 0;  // window_start: steps before the averaged epochs
  for (int e = 0; e < options.epochs; ++e) {
    if (e == options.epochs - options.average_epochs) window_start = total_steps;
    total_steps += static_cast<std::int64_t>(batches_in(e));
  }
  const Evaluator evaluator(dataset, options.physical_batch);

  // 2. The state: new, or the resumed one.
  StochasticState st;
  if (resume_from) {
    st = *resume_from;
    COSTATE_CHECK(st.x.size() == n && st.x_prev.size() == n && st.m.size() == n && st.v.size() == n,
                  "stochastic fit: the resumed state has " << st.x.size() << " parameters, the dataset "
                                                          << n);
    COSTATE_CHECK(st.epoch <= options.epochs &&
                      (st.epoch == options.epochs ? st.position == 0 : st.position <= batches_in(st.epoch)) &&
                      (st.position == 0 || st.order.size() == training.size()),
                  "stochastic fit: the resumed state does not match this dataset and batch size");
    COSTATE_CHECK(options.average_epochs == 0 || st.average_sum.size() == n,
                  "stochastic fit: the resumed state has no sum of iterates for average_epochs = "
                      << options.average_epochs);
  } else {
    COSTATE_CHECK_EQ(x0.size(), n, "stochastic fit: x0");
    for (std::size_t j = 0; j < n; ++j)
      COSTATE_CHECK(x0[j] >= lower[j] && x0[j] <= upper[j],
                    "stochastic fit: x0[" << j << "] = " << x0[j] << " is outside its bounds ["
                                          << lower[j] << ", " << upper[j] << "]");
    st.x.assign(x0.begin(), x0.end());
    st.x_prev = st.x;
    st.m.assign(n, 0.0);
    st.v.assign(n, 0.0);
    st.rng = order_stream(options.seed);
    st.best_x = st.x;
    if (options.average_epochs > 0) st.average_sum.assign(n, 0.0);
  }

  const auto finish = [&](std::string termination) {
    result.termination = std::move(termination);
    result.x = result.validation.empty() ? st.x : st.best_x;
    if (options.average_epochs > 0 && result.termination == "epochs") {
      const auto count = static_cast<double>(st.step - window_start);
      // (clamped: the rounding of a mean of values at a bound may step past it)
      for (std::size_t j = 0; j < n; ++j) result.x[j] = std::clamp(st.average_sum[j] / count, lower[j], upper[j]);
    }
    if (result.termination == "rescue_failed") result.x = result.validation.empty() ? st.x_prev : st.best_x;
    if (options.finish_iterations > 0 && result.termination != "interrupted" &&
        result.termination != "rescue_failed") {
      // The full-batch finish: every condition in index order, one
      // objective and gradient per TAO evaluation.
      std::vector<std::size_t> all(dataset.n_conditions);
      std::iota(all.begin(), all.end(), std::size_t{0});
      const Objective whole{
          .n = n,
          .objective_and_gradient =
              [&](std::span<const double> x, std::span<double> grad) {
                const BatchValues v = evaluator.evaluate(all, x, st.simulations);
                if (!v.ok) return std::numeric_limits<double>::infinity();
                std::fill(grad.begin(), grad.end(), 0.0);
                double f = 0.0;
                for (std::size_t i = 0; i < all.size(); ++i) {
                  f += v.loss[i];
                  for (std::size_t j = 0; j < n; ++j) grad[j] += v.gradient[i * n + j];
                }
                return f;
              },
          .hessian = {}};
      const TaoResult t = minimize(whole, result.x, lower, upper,
                                   {.method = TaoMethod::Bqnls, .gatol = options.finish_gatol, .grtol = 0.0,
                                    .max_iterations = options.finish_iterations});
      result.finish_termination = t.termination;
      result.finish_converged = t.converged;
      result.finish_iterations = t.iterations;
      if (std::isfinite(t.objective)) result.x = t.x;
    }
    if (options.final_objective && result.termination != "interrupted") {
      std::vector<std::size_t> all(dataset.n_conditions);
      std::iota(all.begin(), all.end(), std::size_t{0});
      const BatchValues v = evaluator.evaluate(all, result.x, st.simulations);
      result.objective = v.ok ? std::accumulate(v.loss.begin(), v.loss.end(), 0.0)
                              : std::numeric_limits<double>::quiet_NaN();
    }
    result.epochs = st.history;
    result.steps = st.step;
    result.simulations = st.simulations;
    result.rescues = st.rescues;
    result.restarts = st.restarts;
    result.state = st;
    result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  };

  std::vector<double> g(n);
  while (st.epoch < options.epochs) {
    // 3. An epoch: a new order of the training conditions (unless resumed
    // inside one).
    if (st.position == 0 && st.order.empty()) {
      st.order = training;
      shuffle(st.order, st.rng);
      st.batch_losses.clear();
      st.epoch_rescues = 0;
      st.epoch_restarts = 0;
    }
    const std::size_t logical = epoch_batch[static_cast<std::size_t>(st.epoch)];
    const std::size_t batches_per_epoch = batches_in(st.epoch);
    while (st.position < batches_per_epoch) {
      const std::size_t b0 = st.position * logical, b1 = std::min(training.size(), b0 + logical);
      const std::span<const std::size_t> conditions(st.order.data() + b0, b1 - b0);
      // 4. The batch at x; a failure halves the last step back (rescue).
      BatchValues v = evaluator.evaluate(conditions, st.x, st.simulations);
      if (!v.ok && st.step == 0) {
        std::ostringstream os;
        os.precision(16);
        os << "stochastic fit: condition " << conditions[v.failed]
           << " cannot be evaluated at the starting point (loss " << v.loss[v.failed]
           << "); start elsewhere or fix the condition";
        throw Error(os.str());
      }
      for (int r = 0; !v.ok && r < options.max_rescues; ++r) {
        for (std::size_t j = 0; j < n; ++j) st.x[j] = st.x_prev[j] + 0.5 * (st.x[j] - st.x_prev[j]);
        ++st.rescues;
        ++st.epoch_rescues;
        v = evaluator.evaluate(conditions, st.x, st.simulations);
      }
      if (!v.ok && st.restarts < options.max_restarts) {
        // The restart: back to the last accepted iterate, the moments and
        // the bias correction anew, η halved for good, this batch skipped.
        st.x = st.x_prev;
        std::fill(st.m.begin(), st.m.end(), 0.0);
        std::fill(st.v.begin(), st.v.end(), 0.0);
        st.moment_start = st.step;
        ++st.restarts;
        ++st.epoch_restarts;
        ++st.position;
        if (callbacks.on_restart) callbacks.on_restart(st);
        continue;
      }
      if (!v.ok) return finish("rescue_failed");
      // 5. The batch mean, in the batch's order, clipped.
      const double nb = static_cast<double>(conditions.size());
      double loss = 0.0;
      std::fill(g.begin(), g.end(), 0.0);
      for (std::size_t i = 0; i < conditions.size(); ++i) {
        loss += v.loss[i];
        for (std::size_t j = 0; j < n; ++j) g[j] += v.gradient[i * n + j];
      }
      loss /= nb;
      for (double& gj : g) gj /= nb;
      st.batch_losses.push_back(loss);
      if (options.clip_norm > 0.0) {
        double norm = 0.0;
        for (double gj : g) norm += gj * gj;
        norm = std::sqrt(norm);
        if (norm > options.clip_norm)
          for (double& gj : g) gj *= options.clip_norm / norm;
      }
      // 6. The step, projected onto the bounds.
      const double eta = learning_rate(options, st.step, st.epoch, total_steps, st.restarts);
      st.x_prev = st.x;
      const double lambda = options.weight_decay;
      if (options.method == StochasticMethod::Sgd) {
        for (std::size_t j = 0; j < n; ++j) {
          st.m[j] = options.momentum * st.m[j] + g[j] + lambda * st.x[j];
          st.x[j] -= eta * st.m[j];
        }
      } else {
        const bool decoupled = options.method == StochasticMethod::AdamW;
        const double t = static_cast<double>(st.step - st.moment_start + 1);
        const double c1 = 1.0 - std::pow(options.beta1, t), c2 = 1.0 - std::pow(options.beta2, t);
        for (std::size_t j = 0; j < n; ++j) {
          const double gj = decoupled ? g[j] : g[j] + lambda * st.x[j];
          st.m[j] = options.beta1 * st.m[j] + (1.0 - options.beta1) * gj;
          st.v[j] = options.beta2 * st.v[j] + (1.0 - options.beta2) * gj * gj;
          const double xj = st.x[j];
          st.x[j] -= eta * (st.m[j] / c1) / (std::sqrt(st.v[j] / c2) + options.epsilon);
          if (decoupled) st.x[j] -= eta * lambda * xj;
        }
      }
      for (std::size_t j = 0; j < n; ++j) st.x[j] = std::clamp(st.x[j], lower[j], upper[j]);
      ++st.step;
      ++st.position;
      if (options.average_epochs > 0 && st.step > window_start)
        for (std::size_t j = 0; j < n; ++j) st.average_sum[j] += st.x[j];
      if (callbacks.on_step && !callbacks.on_step(st)) return finish("interrupted");
    }
    // 7. The epoch's record: training loss ± its standard error, validation.
    EpochRecord rec;
    rec.epoch = st.epoch + 1;
    const double nb = static_cast<double>(st.batch_losses.size());
    rec.train_loss = std::accumulate(st.batch_losses.begin(), st.batch_losses.end(), 0.0) / nb;
    if (st.batch_losses.size() > 1) {
      double ss = 0.0;
      for (double l : st.batch_losses) ss += (l - rec.train_loss) * (l - rec.train_loss);
      rec.train_loss_stderr = std::sqrt(ss / (nb - 1.0)) / std::sqrt(nb);
    }
    if (!result.validation.empty()) {
      const BatchValues v = evaluator.evaluate(result.validation, st.x, st.simulations);
      rec.validation_loss = v.ok ? std::accumulate(v.loss.begin(), v.loss.end(), 0.0) /
                                       static_cast<double>(result.validation.size())
                                 : std::numeric_limits<double>::infinity();
      if (rec.validation_loss < st.best_validation) {
        st.best_validation = rec.validation_loss;
        st.best_x = st.x;
        st.epochs_since_best = 0;
      } else {
        ++st.epochs_since_best;
      }
    }
    rec.learning_rate =
        learning_rate(options, std::max<std::int64_t>(st.step - 1, 0), st.epoch, total_steps, st.restarts);
    rec.steps = st.step;
    rec.simulations = st.simulations;
    rec.rescues = st.epoch_rescues;
    rec.restarts = st.epoch_restarts;
    st.history.push_back(rec);
    ++st.epoch;
    st.position = 0;
    st.order.clear();
    if (callbacks.on_epoch) callbacks.on_epoch(rec);
    if (options.patience > 0 && st.epochs_since_best >= options.patience) return finish("early_stopping");
  }
  return finish("epochs");
}

std::string StochasticResult::brief_report() const {
  std::ostringstream os;
  os.precision(10);
  os << termination << ": " << epochs.size() << " epochs, " << steps << " steps, " << simulations
     << " condition simulations, " << rescues << " rescues, " << restarts << " restarts";
  if (!epochs.empty()) {
    os << "; last training loss " << epochs.back().train_loss << " ± " << epochs.back().train_loss_stderr;
    if (!validation.empty()) os << ", validation " << epochs.back().validation_loss;
  }
  if (!finish_termination.empty())
    os << "; full-batch finish " << finish_iterations << " iterations, " << finish_termination;
  if (std::isfinite(objective)) os << "; objective on all conditions " << objective;
  return os.str();
}

}  // namespace costate::optimize
