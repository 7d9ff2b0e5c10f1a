#pragma once
// `costate calibrate`: the fit of an input file's calibration section.
//
// Coordinates: the optimizer works on q, q_j = log(v_j) for log-transformed
// variables and q_j = v_j otherwise (v = the fitted parameter or initial
// value). The objective
//     J(q) = ½ Σ_ki w_ki (y_i(t_k; v) − d_ki)² + ½ λ Σ_j (q_j − q_j,prior)²
// and its gradient
//     ∂J/∂q_j = (∂J_data/∂v_j) · (dv_j/dq_j) + λ (q_j − q_j,prior),
//     dv_j/dq_j = v_j (log) or 1,
// with ∂J_data/∂v from ode::gradient (the file's sensitivity.method: discrete
// adjoint by default, or forward); a parameter that also enters an initial
// value written as an expression gets that dependence through the initial
// state's adjoint ((∂y0/∂p)ᵀ λ0). The Hessian offered to bnls/bntr is the
// Gauss–Newton matrix  H = S_qᵀ S_q + λ I  with S_q = ∂r/∂q from
// ode::sensitivity_matrix (forward sensitivities) — not the exact Hessian:
// the term Σ r ∇²r is dropped, which is what makes it positive semidefinite.
//
// Report (at the fitted point): with S = ∂r/∂v (natural variables) and
// m residuals, p fitted quantities,
//     σ̂² = RSS/(m − p)  (1 when every value's noise σ is given),
//     Cov = σ̂² (SᵀS)⁻¹,  standard errors √diag(Cov),  correlation.
// Identifiability: singular values s_k of S D, D = diag(1/‖S_j‖) (unit
// columns: scale-free, s_k ∈ [0, √p], 1/s_k the collinearity index). A
// direction with s_k ≤ 1e-6 is not determined by the data (e.g. parameters
// that enter only as a product); every variable with |V_jk|² ≥ 0.1 in it —
// and every variable with no effect on the residuals (zero column) — is
// flagged and gets no standard error (NaN); the covariance is the
// pseudo-inverse over the other directions. The regularisation is not part of the
// covariance (it is the data's uncertainty).

#include <mpi.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "costate/ode/step_plan.hpp"
#include "costate/optimize/stochastic.hpp"
#include "costate/optimize/fit_status.hpp"
#include "costate/optimize/tao.hpp"
#include "costate/io/input.hpp"

namespace costate::io {

/// The objective of a calibration as a function of q (see above).
class CalibrationProblem {
 public:
  /// Throws costate::Error when cfg has no calibration section.
  explicit CalibrationProblem(const RunConfig& cfg);

  std::size_t size() const { return vars_.size(); }
  const std::vector<FitVariable>& variables() const { return vars_; }
  /// q of the initial guesses, of the priors, and the bounds in q.
  std::vector<double> start() const;
  std::vector<double> prior() const;
  std::vector<double> lower() const;
  std::vector<double> upper() const;
  /// v(q) (natural values) and the run settings with them applied.
  std::vector<double> values(std::span<const double> q) const;
  RunConfig config_at(std::span<const double> q) const;

  /// Conditions (io/conditions.hpp): J_data = Σ_c J_c summed in the
  /// conditions' order; 1 for a file without conditions.
  std::size_t conditions() const { return n_conditions_; }
  /// Condition c's problem at q (condition_config of config_at(q)).
  RunConfig condition_at(std::span<const double> q, std::size_t c) const;
  /// The term of condition c in a mini-batch fit (optimize::Dataset):
  ///     ℓ_c(q) = J_c(q) + ½ λ Σ_j (q_j − q_j,prior)² / conditions(),
  /// so that Σ_c ℓ_c = J (up to rounding); writes ∇ℓ_c(q) into g.
  double condition_objective_and_gradient(std::size_t c, std::span<const double> q, std::span<double> g);

  /// J(q); writes ∇J(q) into g (J_data and its gradient summed over the
  /// conditions in their order, then the regularisation). Throws
  /// costate::Error when the model cannot be integrated at q.
  double objective_and_gradient(std::span<const double> q, std::span<double> g);
  /// The exact Hessian of J(q) applied to u, written into Hu; ∇J(q) into g;
  /// returns J(q). With v(q), d_j = dv_j/dq_j and H_v the Hessian of J_data
  /// in the natural variables (the initial values written as expressions of
  /// the parameters included, to second order):
  ///     H(q) u = D H_v D u + diag(∂J_data/∂v_j · d²v_j/dq_j²) u + λ u.
  /// H_v D u is one ode::hessian_vector of the observations (forward over
  /// the discrete adjoint on the steps the gradient takes: the derivative
  /// of the discrete gradient objective_and_gradient computes; for
  /// cvodes_adjoint CVODES' continuous second-order adjoint, exact to
  /// O(rtol)). Throws costate::Error, before any work, for a
  /// sensitivity.method without second order (forward, continuous_adjoint,
  /// cvodes_forward: ode::supports(…, 2)), and when the model cannot be
  /// integrated at q. A file with conditions sums H_c·w_c over them in
  /// their order, w_c the direction pushed onto condition c's parameters
  /// and initial state and the product pulled back by the same map's
  /// transpose (io/conditions.hpp).
  double hessian_vector(std::span<const double> q, std::span<const double> u, std::span<double> g,
                        std::span<double> Hu);
  /// The Gauss–Newton matrix at q (row-major, size() × size()).
  void gauss_newton(std::span<const double> q, std::span<double> H);

  /// Residuals and S = ∂r/∂v (natural variables; m × size(), row-major) at q.
  struct Residuals {
    std::vector<double> r, S, predicted;
    std::vector<std::size_t> time_index, state_index;
    std::vector<std::size_t> condition_index;  ///< the condition of each row (0 without conditions)
  };
  Residuals residuals(std::span<const double> q);

  std::int64_t gradient_evaluations() const { return gradient_evaluations_; }

 private:
  RunConfig cfg_;
  std::vector<FitVariable> vars_;
  double weight_ = 0.0;
  std::int64_t gradient_evaluations_ = 0;
  // The step times of the last evaluation (replayed by the sensitivity
  // matrix at the same point).
  std::vector<double> last_q_;
  /// The last gradient's steps per condition, replayed by the residual Jacobian.
  std::vector<ode::StepPlan> last_steps_;
  std::size_t n_conditions_ = 1;
  /// J_c at q; ∂J_c/∂v (natural values of the fitted quantities) into dv;
  /// the condition's steps into `steps`.
  double condition_term(std::size_t c, std::span<const double> q, std::span<double> dv, ode::StepPlan& steps);
};

struct CalibrationReport {
  std::vector<std::string> names;  ///< "alpha", "x(t0)"
  std::vector<double> initial, values, lower, upper, prior, standard_errors;
  std::vector<int> log_transformed;
  std::vector<double> covariance, correlation;  ///< p × p, row-major
  std::vector<double> singular_values;          ///< of the column-scaled S
  std::vector<int> unidentifiable;              ///< 1 = flagged
  double objective = 0.0;       ///< J at the fit (data + regularisation)
  double rss = 0.0;             ///< Σ r² (weighted)
  double sigma2 = 1.0;          ///< σ̂² (1 when the noise is given)
  bool sigma_estimated = false;
  std::size_t n_residuals = 0;
  std::vector<double> residual_times, observed, predicted, residuals;
  std::vector<std::string> residual_states;
  std::vector<std::string> residual_conditions;  ///< each residual's condition id (with conditions)
  optimize::TaoResult tao;
  std::string gradient_method;
  bool converged = false;  ///< TAO's convergence test
  /// converged / stalled at the integration's noise floor / not_converged
  /// (optimize::judge_fit; the noise of the gradient measured at the fit).
  /// The standard errors and the file's "complete" hold only at_optimum().
  optimize::FitVerdict verdict;
  RunConfig fitted;  ///< the settings with the fitted values applied
};

/// Every evaluation the optimizer asked of a calibration, in order: the
/// state an interrupted calibration keeps so that `calibrate --resume`
/// continues it to the same bits (io/resume.hpp writes and reads it).
///
/// Why a journal and not TAO's internals: TAO offers no way to save or
/// restore a solver's state (L-BFGS memory, line-search bracket, trust
/// radius, the stage logic of optimize::minimize), so restarting TAO at the
/// last iterate cannot reproduce the uninterrupted run's bits. But TAO is
/// deterministic given its inputs and the values it is told: a resumed fit
/// runs TAO again from the start and answers every evaluation at a point it
/// has recorded (bitwise equal q, same kind) with the recorded numbers, so
/// TAO retraces the interrupted run exactly — rebuilding its memory at the
/// cost of its own arithmetic, no ODE solve — and computes only from the
/// first point not in the journal on. Evaluations that threw a costate::Error
/// (a trial point where the model cannot be integrated) are replayed as the
/// same throw.
struct CalibrationJournal {
  enum Kind : int { Gradient = 0, GaussNewton = 1 };
  struct Entry {
    int kind = Gradient;
    std::vector<double> q;
    double objective = 0.0;   ///< Gradient: J(q)
    std::vector<double> out;  ///< ∇J(q) (n values) or the Gauss–Newton matrix (n × n)
    std::string error;        ///< the costate::Error message it threw ("" = none)
  };
  std::size_t n = 0;  ///< fitted quantities
  std::vector<Entry> entries;
  std::size_t replayed = 0;      ///< evaluations answered from entries in this process
  std::size_t recorded = 0;      ///< entries loaded from a partial file (the rest are new)
  int last_iteration = -1;       ///< the last iteration the monitor saw
  std::vector<double> last_iterate;  ///< the optimizer's x at the last evaluation
  /// The recorded entry of `kind` at q (bitwise), or nullptr.
  const Entry* find(int kind, std::span<const double> q) const;
};

/// Runs the fit (TAO) and computes the report. `monitor` sees every
/// iteration. A fit that stops without converging is returned with
/// converged = false (not thrown). With `journal`, every evaluation is
/// recorded there and the ones it already holds are replayed (see
/// CalibrationJournal); its n must be 0 (set here) or the fit's size.
CalibrationReport calibrate(const RunConfig& cfg,
                            const std::function<void(const optimize::Iteration&)>& monitor = {},
                            CalibrationJournal* journal = nullptr);

/// calibration.optimizer.method adamw | adam | sgd: the calibration fitted
/// by mini-batches over the file's conditions (optimize::fit; each condition
/// ℓ_c of CalibrationProblem::condition_objective_and_gradient, q on the
/// variables' scales — log for `log: true` — within their bounds). The
/// returned objective is J at result.x from one full evaluation (the bits
/// CalibrationProblem::objective_and_gradient gives there; NaN when it
/// fails), counted as conditions() simulations. Collective over `comm`:
/// every rank runs the same fit, each physical batch's conditions spread
/// round-robin over the ranks and every rank receiving the batch's terms
/// (one rank's value per term, so the sum is exact: the same bits on any
/// number of ranks); a condition that fails on its rank is a failed
/// condition (rescued), never a hang.
struct StochasticCalibration {
  std::vector<std::string> names;  ///< the fitted quantities' labels
  std::vector<double> initial;     ///< q0
  std::vector<double> values;      ///< v(result.x): natural values
  /// The standard errors of `values` when the full-batch finish converged
  /// (result.finish_converged, a finite objective): computed at result.x as
  /// calibrate() computes CalibrationReport::standard_errors (NaN for an
  /// unidentifiable quantity). Empty otherwise — no standard errors away
  /// from a converged optimum.
  std::vector<double> standard_errors;
  optimize::StochasticResult result;
};
optimize::Dataset condition_dataset(CalibrationProblem& problem, MPI_Comm comm = MPI_COMM_SELF);
StochasticCalibration calibrate_stochastic(const RunConfig& cfg, const optimize::StochasticOptions& options,
                                           const optimize::StochasticCallbacks& callbacks = {},
                                           const optimize::StochasticState* resume_from = nullptr,
                                           MPI_Comm comm = MPI_COMM_SELF);

}  // namespace costate::io
