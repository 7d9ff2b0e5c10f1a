#pragma once
/// \file
/// A PEtab problem fitted by mini-batches over its experiments
/// (optimize::fit; Stapor et al., Nat. Commun. 2022): each experiment — a
/// simulation condition with its pre-equilibration — is one condition of the
/// dataset, with the loss
///     ℓ_e(θ) = −log p_e(θ) − log prior(θ) / n_experiments,
/// so that Σ_e ℓ_e = −(llh + log prior), the objective of petab::calibrate.
/// θ are the estimated parameters on their scales, within their bounds.
///
/// Collective over `comm`: every rank runs the same fit; each physical
/// batch's experiments are simulated over the ranks (petab::evaluate with
/// Options::experiments) and every rank receives the batch's terms, so the
/// fit is the same bits on any number of ranks.

#include <mpi.h>

#include <span>
#include <string>
#include <vector>

#include "costate/optimize/stochastic.hpp"
#include "costate/petab/output.hpp"
#include "costate/petab/problem.hpp"

namespace costate::petab {

/// The dataset of `problem`'s experiments (see the file comment), each
/// evaluation by petab::evaluate with `options` (gradient on,
/// per_experiment on). A failed simulation is a failed condition (rescued
/// by optimize::fit).
optimize::Dataset experiment_dataset(const Problem& problem, const Options& options = {},
                                     MPI_Comm comm = MPI_COMM_SELF);

struct StochasticFit {
  std::vector<std::string> ids;        ///< estimated parameter ids
  std::vector<double> initial;         ///< θ0 on the scales
  optimize::StochasticResult result;   ///< result.x on the scales; result.objective = −(llh + log prior)
  /// llh at result.x over every experiment (NaN when that evaluation failed).
  double llh = 0.0;
  /// The fit's status in the calibrations' vocabulary (optimize::FitStatus's
  /// name) and its description, set by the caller that judged it; written
  /// by write_stochastic_hdf5 when not empty.
  std::string fit_status, convergence;
  /// Standard errors of the fitted values at a converged full-batch finish
  /// (an input file's: io::StochasticCalibration::standard_errors); empty
  /// when there are none. Written as /stochastic/standard_errors when set.
  std::vector<double> standard_errors;
  std::string brief_report() const;
};

/// Fits `problem` from θ0 (the nominal values on their scales when empty)
/// by optimize::fit. Throws costate::Error for bad options (naming them) and
/// when the start cannot be simulated.
StochasticFit fit_stochastic(const Problem& problem, const optimize::StochasticOptions& fit_options,
                             const Options& options = {}, std::span<const double> theta0 = {},
                             const optimize::StochasticCallbacks& callbacks = {},
                             const optimize::StochasticState* resume_from = nullptr,
                             MPI_Comm comm = MPI_COMM_SELF);

/// The fit as HDF5 (rank 0 writes): /stochastic/{ids (attribute), method,
/// termination (attributes), x, initial, objective, llh, steps,
/// simulations, rescues, training, validation (condition indices), and per
/// epoch: train_loss, train_loss_stderr, validation_loss, learning_rate,
/// epoch_steps, epoch_simulations, epoch_rescues; with fit.fit_status: the
/// attributes fit_status, convergence and status — "complete" when the fit
/// is at an optimum (converged or stalled), else "partial"}, through
/// io::write_output_file (never over `problem_file` or a special file; a
/// failed write leaves a previous file intact). Root attributes: the
/// provenance every costate file carries — costate_version, command
/// ("calibrate" when provenance.command is empty) and settings (the fully
/// resolved settings as YAML: stochastic_settings_yaml for a PEtab problem,
/// RunConfig::to_yaml for an input file, which loads back as one) — and
/// problem (`problem_file`). Throws costate::Error naming the file when it
/// cannot be written.
void write_stochastic_hdf5(const std::string& path, const StochasticFit& fit,
                           const optimize::StochasticOptions& options, const std::string& problem_file,
                           const Provenance& provenance = {});

/// A PEtab stochastic fit's resolved settings as YAML: the evaluation's
/// (settings_yaml) and `calibration: {optimizer: {method, epochs, …}}` with
/// every field of `options`.
std::string stochastic_settings_yaml(const Problem& problem, const Options& evaluation,
                                     const optimize::StochasticOptions& options);

/// The settings of a stochastic fit as one line of key=value pairs (the
/// `settings` attribute of the files above and below).
std::string stochastic_settings(const optimize::StochasticOptions& options);

/// An interrupted fit's state (optimize::StochasticState) as HDF5, so that
/// `--resume` continues it to the uninterrupted fit's bits:
/// /stochastic_state/{x, x_prev, m, v, best_x, order, batch_losses, history
/// (epochs × 8: epoch, train_loss, train_loss_stderr, validation_loss,
/// learning_rate, steps, simulations, rescues), counters (step, epoch,
/// position, rng, epoch_rescues, epochs_since_best, simulations, rescues;
/// uint64), best_validation} with attributes `problem` (the problem file),
/// `settings` (stochastic_settings) and `status` = "partial"; written as
/// write_stochastic_hdf5 is.
void write_stochastic_state_hdf5(const std::string& path, const std::string& problem_file,
                                 const optimize::StochasticOptions& options,
                                 const optimize::StochasticState& state);

/// Reads what write_stochastic_state_hdf5 wrote. Throws costate::Error
/// naming the file when it has no /stochastic_state, or when its problem
/// file or settings differ from `problem_file` and `options` (naming both).
optimize::StochasticState read_stochastic_state_hdf5(const std::string& path, const std::string& problem_file,
                                                     const optimize::StochasticOptions& options);

}  // namespace costate::petab
