#pragma once
/// \file
/// petab::calibrate — fit a PEtab problem's estimated parameters, on their
/// scales and within the table's bounds, from one or many starts:
///
///     min_θ  −(llh(θ) + log_prior(θ))   subject to  lower ≤ θ ≤ upper  (on the scales)
///
/// with the bound-constrained quasi-Newton of optimize::minimize (PETSc TAO,
/// `bqnls` by default; -tao_* options override) and the gradient of
/// petab::evaluate (CVODES adjoint by default).
///
///     const petab::Problem pb = petab::read("Bruno_JExpBot2016.yaml");
///     const petab::Calibration c = petab::calibrate(pb, {.starts = 20, .seed = 1}, MPI_COMM_WORLD);
///     c.best().llh; c.best().x;              // the best fit (θ on the scales)
///     c.waterfall();                          // start indices, best first
///     c.at_best;                              // starts within best_tolerance of the best
///
/// Starts: with `starts` = 0 one start at the nominal values (the table's
/// nominalValue column); otherwise `starts` points in the bounds on each
/// parameter's scale (log10 bounds for log10 parameters, …): a Latin
/// hypercube by default (`sampling`; each parameter's range cut into
/// `starts` equal strata, each stratum holding exactly one start), or
/// independent uniform draws — from a 64-bit generator seeded with `seed`:
/// the same points for a seed on every machine and every number of ranks
/// (every rank draws them all; start i is always the i-th point).
///
/// Collective over `comm`. With several starts they are dealt round-robin
/// over the ranks (start i on rank i mod size), each fitted serially on its
/// rank; the results are gathered so that every rank returns all of them.
/// With one start (`starts` ≤ 1) every rank runs the same fit and each
/// objective evaluation distributes the experiments over the ranks
/// (petab::evaluate, rank-count independent to the bit, so the iterates
/// are the same on every rank).
///
/// A start whose first point has no finite objective, or whose fit throws,
/// is reported (`failed`, `error`) and takes no part in the best fit; the
/// others go on. Throws costate::Error for invalid options (naming the field)
/// and when no start succeeds.
///
/// Requires PETSc to be initialised (costate::Environment with petsc).

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "costate/optimize/fit_status.hpp"
#include "costate/optimize/tao.hpp"
#include "costate/petab/output.hpp"
#include "costate/petab/problem.hpp"

namespace costate::petab {

/// How `starts` points are drawn in the bounds on the scales.
enum class Sampling {
  /// Latin hypercube: each dimension's range cut into N equal strata, every
  /// stratum holding exactly one start, the strata paired at random.
  LatinHypercube,
  /// Independent uniform draws.
  Uniform,
};
std::string to_string(Sampling s);  ///< "lhs", "uniform"
/// "lhs" or "uniform"; throws costate::Error naming the value otherwise.
Sampling sampling_from_string(const std::string& name);

struct CalibrationOptions {
  /// 0: one start at the nominal values; N ≥ 1: N random starts (`sampling`).
  int starts = 0;
  std::uint64_t seed = 0;
  Sampling sampling = Sampling::LatinHypercube;
  /// A start "reached the best" when its final −(llh + log prior) is within
  /// this of the best start's (absolute; the 1e-3 on llh).
  double best_tolerance = 1e-3;
  /// How each objective and gradient is computed (`gradient` is set).
  Options evaluation{};
  optimize::TaoOptions optimizer{.gatol = 1e-6, .grtol = 0.0, .max_iterations = 500,
                                 .max_function_evaluations = 2000};
  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const;
};

/// One start's fit.
struct StartFit {
  std::size_t index = 0;       ///< in draw order
  std::vector<double> initial;  ///< θ0, on the scales
  std::vector<double> x;        ///< the final θ, on the scales
  double objective = 0.0;      ///< −(llh + log prior) at x (+∞ when failed)
  double llh = 0.0;
  int iterations = 0;
  std::int64_t evaluations = 0;  ///< objective + gradient evaluations
  bool converged = false;        ///< TAO's convergence test
  bool failed = false;
  std::string termination;  ///< TAO's reason, or the error when failed
  double seconds = 0.0;
  int rank = 0;  ///< the rank that ran it
};

struct Calibration {
  std::vector<std::string> ids;  ///< estimated parameter ids (problem.estimated_ids())
  std::vector<StartFit> starts;  ///< in draw order
  std::size_t best_index = 0;    ///< into starts
  std::size_t at_best = 0;       ///< starts within best_tolerance of the best
  double best_tolerance = 0.0;
  const StartFit& best() const { return starts[best_index]; }
  /// Start indices sorted by final objective, best first, failures last.
  std::vector<std::size_t> waterfall() const;
  std::string brief_report() const;
};

/// The starts `options` describes (starts = 0: the nominal values), on the
/// scales: the same for a seed everywhere.
std::vector<std::vector<double>> calibration_starts(const Problem& problem,
                                                    const CalibrationOptions& options);

Calibration calibrate(const Problem& problem, const CalibrationOptions& options = {},
                      MPI_Comm comm = MPI_COMM_SELF);

/// The calibration as HDF5 (rank 0 writes): /calibration/{ids (attribute,
/// one per line), best_x, best_llh, waterfall (objectives, sorted),
/// objective, llh, converged, failed, iterations, initial (starts × n), x
/// (starts × n)}. Throws costate::Error naming the file when it cannot be
/// written.
/// With `verdict` (the best start's, optimize::judge_fit), /calibration also
/// holds fit_status and convergence, and status is "complete" only at an
/// optimum ("partial" otherwise).
/// `provenance` (petab/output.hpp): the root attributes command and settings
/// (costate_version always).
void write_calibration_hdf5(const std::string& path, const Calibration& calibration,
                            const optimize::FitVerdict* verdict = nullptr,
                            const Provenance& provenance = {});

}  // namespace costate::petab
