#pragma once
/// \file
/// Mini-batch stochastic minimisation over a dataset of experimental
/// conditions — the training loop of a simulation model (the shape of ggml's
/// `ggml_opt_fit`, with the rules of Stapor et al., Nat. Commun. 2022, for
/// ODE models: Adam, rescue of failed simulations):
///
///     min_x  Σ_{c ∈ training} ℓ_c(x)   subject to   lower ≤ x ≤ upper.
///
/// An epoch visits the training conditions once, in an order drawn from the
/// seeded generator; it is cut into logical batches B of `batch` conditions
/// (the last one may be shorter; `batch_growth` enlarges `batch` from epoch
/// to epoch). A step evaluates ℓ_c and ∇ℓ_c for c ∈ B,
/// physical batch by physical batch, and takes the batch mean
///     g = (1/|B|) Σ_{c∈B} ∇ℓ_c(x)
/// (summed in the batch's order, whatever the physical batch size), clipped
/// to ‖g‖ ≤ clip_norm when set. With the learning rate η_t of the schedule:
///     Adam / AdamW:  m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,
///                    x ← x − η_t (m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)
///                    AdamW then x ← x − η_t λ x (decoupled weight decay);
///                    Adam adds λx to g instead (L2).
///     SGD:           b ← μb + g + λx (μ = momentum),  x ← x − η_t b
/// and the step is projected onto the bounds: x ← clamp(x, lower, upper).
/// x is whatever scale the caller optimises on (PEtab's log10 scale, say).
///
/// **Rescue** of failed simulations: when a condition of a batch cannot be
/// evaluated at the new iterate (the callback returns false, throws
/// costate::Error, or gives a non-finite loss or gradient), the last step is
/// halved back towards the previous iterate, x ← x_prev + ½(x − x_prev), and
/// the batch evaluated again — up to `max_rescues` times. When the batch
/// still fails, a **restart** (parPE's cold restart, Stapor et al. 2022):
/// x ← x_prev (the last accepted iterate), the moments m, v ← 0 and the
/// bias correction's step count t ← 1 (the schedule keeps its position),
/// the learning rate multiplied by ½ (one rescue's factor) for the rest of
/// the fit — so after r restarts η_t · 2⁻ʳ — and the failing batch
/// skipped; up to `max_restarts` times in a fit, then the fit stops with
/// termination "rescue_failed" and returns the last accepted iterate. Each
/// rescue and restart is counted in the epoch's record. A failure at the
/// starting point is an error.
///
/// **Validation**: a fraction of the conditions (drawn once from the seed) is
/// held out of training; its mean loss is evaluated after every epoch, the
/// parameters with the best validation loss are kept, and training stops
/// early after `patience` epochs without improvement (0: never).
///
/// **Full-batch finish** (optional): a few quasi-Newton iterations on the
/// whole objective from the stochastic fit's point, so that the fit ends at
/// a converged optimum (where standard errors mean something).
///
/// **Reproducibility** (what is guaranteed): for the same options, seed and
/// callbacks returning the same bits, the fit is the same bit for bit; the
/// physical batch size does not change any bit (each condition's gradient is
/// kept and the batch is summed in its logical order); a fit stopped by
/// `on_step` and resumed from its `StochasticState` equals the
/// uninterrupted fit bit for bit. The generator (SplitMix64 with unbiased
/// bounded draws) is costate's own, so orders do not depend on the standard
/// library.
///
/// Serial; `Dataset::batch` may spread a physical batch over MPI ranks (the
/// results must come back on every rank in the batch's order).

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace costate::optimize {

enum class StochasticMethod { AdamW, Adam, Sgd };
std::string to_string(StochasticMethod m);
/// Throws costate::Error listing the valid names ("adamw", "adam", "sgd").
StochasticMethod stochastic_method_from_string(const std::string& name);

/// How the learning rate moves over the steps t = 0, 1, … (after warm-up).
enum class LearningRateSchedule {
  Constant,  ///< η
  Step,      ///< η · γ^⌊epoch / step_epochs⌋
  Cosine,    ///< η_min + (η − η_min)(1 + cos(π t / T))/2, T = the fit's step count
};
std::string to_string(LearningRateSchedule s);
/// Throws costate::Error listing the valid names ("constant", "step", "cosine").
LearningRateSchedule learning_rate_schedule_from_string(const std::string& name);

/// Settings of a stochastic fit (keys of the input file's calibration.optimizer).
struct StochasticOptions {
  StochasticMethod method = StochasticMethod::AdamW;
  int epochs = 100;
  /// Conditions per optimizer step (the logical batch); 0 = every training
  /// condition (full batch).
  std::size_t batch = 0;
  /// Batch-size growth over epochs (Smith et al., ICLR 2018: "don't decay
  /// the learning rate, increase the batch size"): the logical batch of
  /// epoch e (0-based) is min(|training|, ⌈batch · batch_growth^e⌉) — small
  /// noisy steps far from the optimum, less noise near it. 1 = fixed.
  double batch_growth = 1.0;
  /// Conditions evaluated per call of Dataset::batch; 0 = the logical batch.
  /// Changes no bit of the result (see the file comment).
  std::size_t physical_batch = 0;
  double learning_rate = 1e-2;
  LearningRateSchedule schedule = LearningRateSchedule::Constant;
  int step_epochs = 10;     ///< Step: epochs between decays
  double gamma = 0.5;       ///< Step: the decay factor
  double min_learning_rate = 0.0;  ///< Cosine: η_min
  /// Linear warm-up over the first warmup_steps steps: η_t · min(1, (t+1)/warmup_steps).
  int warmup_steps = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.0;  ///< λ (decoupled for AdamW, L2 for Adam and SGD)
  double momentum = 0.0;      ///< SGD's μ
  double clip_norm = 0.0;     ///< clip ‖g‖ to this; 0 = no clipping
  double validation_split = 0.0;  ///< fraction of the conditions held out, in [0, 1)
  int patience = 0;           ///< early stopping after this many epochs without a better validation loss; 0 = off
  std::uint64_t seed = 1;
  int max_rescues = 10;       ///< halvings of one step before a restart (or the fit's stop)
  /// Cold restarts in a fit when the rescues of a batch are exhausted (see
  /// the file comment); then the fit stops with "rescue_failed". 3: each
  /// restart halves η for good, so three allow η/8 — a fit that still
  /// cannot step there is unrecoverable, and the limit bounds the wasted
  /// work at 3·(max_rescues + 1) batch evaluations. 0: parPE's rescue mode
  /// without restarts (stop at the first exhausted rescue).
  int max_restarts = 3;
  /// Tail averaging (Polyak & Juditsky 1992): when the epochs have all run,
  /// return the mean of the iterates after each step of the last
  /// `average_epochs` epochs instead of the last iterate — the batches'
  /// noise averages out at no simulation cost. 0: the last iterate. Not with
  /// a validation split (which returns the best-validation parameters).
  int average_epochs = 0;
  /// Evaluate the loss on every condition at the returned parameters
  /// (StochasticResult::objective).
  bool final_objective = true;
  /// A full-batch finish: after the epochs (or early stopping), up to this
  /// many iterations of TAO's bounded quasi-Newton method (bqnls) on
  /// Σ_c ℓ_c over every condition from the returned parameters, stopping at
  /// ‖∇‖ ≤ finish_gatol — so the fit ends at a converged optimum
  /// (StochasticResult::finish). 0: no finish. Needs PETSc initialised
  /// (costate::Environment).
  int finish_iterations = 0;
  double finish_gatol = 1e-3;
  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const;
};

/// The dataset: `n_conditions` conditions of a model with `n` parameters.
/// `condition(c, x, g)` returns ℓ_c(x) and writes ∇ℓ_c(x) into g (n
/// entries); a failed simulation returns a non-finite value or throws
/// costate::Error. `batch` (optional) evaluates several conditions in one
/// call — loss[i] and gradient row i (n entries, row-major) for
/// conditions[i] — e.g. over MPI ranks; without it `condition` is called in
/// order.
struct Dataset {
  std::size_t n_conditions = 0;
  std::size_t n = 0;
  std::function<double(std::size_t c, std::span<const double> x, std::span<double> g)> condition;
  std::function<void(std::span<const std::size_t> conditions, std::span<const double> x,
                     std::span<double> loss, std::span<double> gradient)>
      batch;
};

/// One epoch of the history.
struct EpochRecord {
  int epoch = 0;                       ///< 1-based
  double train_loss = 0.0;             ///< mean over the epoch's batches of the batch mean loss
  double train_loss_stderr = 0.0;      ///< its standard error over the batches (0 for one batch)
  /// Mean loss of the validation conditions at the epoch's end (NaN without
  /// a validation split; +∞ where a validation condition failed). train_loss
  /// is NaN when restarts skipped every batch of the epoch.
  double validation_loss = std::numeric_limits<double>::quiet_NaN();
  double learning_rate = 0.0;          ///< η_t of the epoch's last step
  std::int64_t steps = 0;              ///< optimizer steps so far
  std::int64_t simulations = 0;        ///< condition evaluations so far (rescues and validation included)
  int rescues = 0;                     ///< rescues in this epoch
  int restarts = 0;                    ///< restarts in this epoch (each skipped a batch)
};

/// Everything a fit needs to continue: pass it back as `resume_from`.
struct StochasticState {
  std::vector<double> x;       ///< the current iterate (not yet evaluated)
  std::vector<double> x_prev;  ///< the iterate before the last step (rescue goes back towards it)
  std::vector<double> m, v;    ///< Adam's moments (SGD: m is the momentum buffer)
  std::int64_t step = 0;       ///< optimizer steps taken
  int epoch = 0;               ///< epochs completed
  std::size_t position = 0;    ///< batches of the current epoch done
  std::uint64_t rng = 0;       ///< the generator's state
  std::vector<std::size_t> order;        ///< the current epoch's training order
  std::vector<double> batch_losses;      ///< the current epoch's batch mean losses so far
  int epoch_rescues = 0;
  std::vector<double> best_x;            ///< best validation parameters so far
  double best_validation = std::numeric_limits<double>::infinity();
  int epochs_since_best = 0;
  std::int64_t simulations = 0;
  std::int64_t rescues = 0;
  std::int64_t restarts = 0;   ///< restarts so far (η is scaled by 2⁻ʳᵉˢᵗᵃʳᵗˢ)
  int epoch_restarts = 0;
  /// The step at the last restart: the bias correction's t is step −
  /// moment_start + 1 (0 without restarts).
  std::int64_t moment_start = 0;
  std::vector<EpochRecord> history;
  /// Σ of the iterates after each step of the averaging window so far
  /// (average_epochs; zeros before the window, empty without averaging).
  std::vector<double> average_sum;
};

struct StochasticResult {
  /// The parameters returned: the best validation parameters with a
  /// validation split, the tail average with average_epochs (when all
  /// epochs ran), else the last iterate.
  std::vector<double> x;
  /// Σ_c ℓ_c(x) over every condition (training and validation) when
  /// options.final_objective, else NaN.
  double objective = std::numeric_limits<double>::quiet_NaN();
  /// "epochs" (all epochs run), "early_stopping", "interrupted" (on_step
  /// returned false: `state` resumes it), "rescue_failed".
  std::string termination;
  std::vector<EpochRecord> epochs;
  std::int64_t steps = 0;
  std::int64_t simulations = 0;  ///< condition evaluations, the final objective's included
  std::int64_t rescues = 0;
  std::int64_t restarts = 0;
  std::vector<std::size_t> training, validation;  ///< the split (condition indices)
  StochasticState state;         ///< where the fit stopped
  /// With options.finish_iterations: TAO's termination ("CONVERGED_GATOL",
  /// …) and whether it converged; empty / false without a finish.
  std::string finish_termination;
  bool finish_converged = false;
  int finish_iterations = 0;
  double wall_seconds = 0.0;
  std::string brief_report() const;
};

/// Callbacks: `on_step(state)` after every optimizer step (return false to
/// stop: the result's state resumes the fit); `on_epoch(record)` after every
/// epoch; `on_restart(state)` after every restart (state.restarts counts
/// them; state.x is the iterate it went back to).
struct StochasticCallbacks {
  std::function<bool(const StochasticState&)> on_step;
  std::function<void(const EpochRecord&)> on_epoch;
  std::function<void(const StochasticState&)> on_restart;
};

/// See the file comment. `x0`, `lower`, `upper` have dataset.n entries
/// (±infinity for no bound); x0 must lie within the bounds. With
/// `resume_from`, x0 is ignored and the fit continues from that state (made
/// by a fit with the same dataset and options).
StochasticResult fit(const Dataset& dataset, std::span<const double> x0,
                     std::span<const double> lower, std::span<const double> upper,
                     const StochasticOptions& options = {}, const StochasticCallbacks& callbacks = {},
                     const StochasticState* resume_from = nullptr);

/// The logical batch size of each epoch of a fit with `n_training`
/// training conditions (options.epochs entries; see batch_growth).
std::vector<std::size_t> logical_batches(std::size_t n_training, const StochasticOptions& options);

/// The split fit() uses: (training, validation) condition indices, drawn
/// from options.seed; validation has ⌈split · n⌉ conditions (at least one
/// training condition must remain).
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_conditions(
    std::size_t n_conditions, const StochasticOptions& options);

}  // namespace costate::optimize
