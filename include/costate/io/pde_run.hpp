#pragma once
/// \file
/// io::pde_run — `costate run|sensitivity|gradcheck` on a PDE input
/// (pde_input.hpp) as a library call that returns data: the command line
/// renders its reports from the PdeResult, the Python module turns it into
/// NumPy arrays. One mechanism for both; the pde::EquationModel
/// instantiations compile once, in src/io/pde_run_{1d,2d,3d}.cpp.
///
///   run          u(t0) from the `initial:` expressions, θ-steps to
///                t0 + steps·dt; frames at t0, every `output.every` steps
///                and at the end; the final fields' integrals, minima and
///                maxima; J(u(T)) when there is an objective.
///   sensitivity  J and its discrete-adjoint gradient with the file's
///                checkpoint schedule: dJ/d<scalar parameters>, dJ/d<field>
///                (one value per cell), dJ/du(t0) (one per cell and field).
///   gradcheck    the gradient as for sensitivity, then the caller's check
///                (PdeRunOptions::gradcheck) of it against J as a function
///                of x = (scalar parameters, relative; a field direction;
///                an initial-state direction).
///
/// Arrays of cells ("natural order") hold the whole grid on rank 0 (empty
/// on the other ranks, and unless PdeRunOptions::gather): component
/// fastest, then x, then y, then z — entry ((k·ny + j)·nx + i)·dof + c is
/// component c at the cell centred at (x_i, y_j, z_k), x_i = a_x + (i + ½)h_x.
/// The same order as pde::FieldWriter's (z, y, x) datasets.
///
/// Collective over `comm` (every rank calls with the same configuration);
/// costate::Error on bad input or a failed solve is thrown on every rank.

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <mpi.h>

namespace costate::pde {
class Grid;
}

namespace costate::io {

struct PdeConfig;

enum class PdeCommand { run, sensitivity, gradcheck };
/// "run" | "sensitivity" | "gradcheck".
std::string to_string(PdeCommand c);

/// What a gradcheck is handed, while the model is alive: J(x) (collective:
/// every rank calls it with the same x), the point, the adjoint gradient
/// there and the components' names.
struct PdeGradcheckInputs {
  const pde::Grid* grid = nullptr;
  std::function<double(const std::vector<double>&)> objective_of;  ///< J(x)
  std::vector<double> x, gradient;
  std::vector<std::string> names;
  double objective = 0.0;  ///< J at x (by the adjoint's forward sweep)
  std::vector<std::string> warnings;  ///< PdeResult::warnings found so far
};

/// Thrown on every rank when PdeRunOptions::interrupted returned true on
/// any rank: nothing is finished (an output file stays "partial").
class PdeInterrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "costate: PDE computation interrupted"; }
};

struct PdeRunOptions {
  PdeCommand command = PdeCommand::run;
  /// Gather the arrays (frames, parameter field, gradient fields) on rank 0
  /// into the result. Without it only the summary (integrals, norms, …).
  bool gather = false;
  /// Called on every rank once the distributed grid exists, before any
  /// integration (the command line's banner). `linear`: the model is linear
  /// in the state (one KSP solve per step).
  std::function<void(const pde::Grid& grid, bool linear)> on_setup;
  /// Polled on every rank at the start of every θ-step — forward,
  /// recomputed and reverse (pde::ThetaOptions::on_step); when it returns
  /// true on any rank, PdeInterrupted is thrown on every rank (one
  /// MPI_Allreduce per step).
  std::function<bool()> interrupted;
  /// gradcheck: the check (Taylor test, differences, report); its return
  /// value is PdeResult::status. Required for PdeCommand::gradcheck.
  std::function<int(const PdeGradcheckInputs&)> gradcheck;
};

/// What pde_run computed. Arrays of cells: natural order (file comment), on
/// rank 0 only, filled only with PdeRunOptions::gather. Scalars and
/// summaries: on every rank.
struct PdeResult {
  PdeCommand command = PdeCommand::run;
  /// Warnings for the command's text and JSON (e.g. an explicit step above
  /// the stability estimate; also printed on stderr as it is found).
  std::vector<std::string> warnings;
  // The grid.
  int dim = 1;
  std::array<std::int64_t, 3> cells{1, 1, 1};  ///< (n_x, n_y, n_z), 1 beyond dim
  std::array<double, 3> origin{0, 0, 0}, spacing{1, 1, 1};
  std::array<int, 3> processes{1, 1, 1};
  int ranks = 1;
  bool linear = false;
  std::vector<std::string> fields, parameter_names, parameter_field_names;

  // run (and sensitivity with an output file): the trajectory.
  std::vector<double> times;                ///< frame times (gather or output file)
  std::vector<std::vector<double>> frames;  ///< per frame, all fields (dof interleaved)
  std::vector<double> parameter_field;      ///< the parameter field (one per cell), if any
  std::int64_t steps = 0;
  double final_time = 0.0;
  std::int64_t krylov_iterations = 0;  ///< forward KSP iterations (run: all steps)
  std::vector<double> final_integrals, final_min, final_max;  ///< run: per field at T
  double cell_volume = 1.0;

  bool has_objective = false;
  double objective = 0.0;  ///< J (run: of the final fields; sensitivity: by the sweep)

  // sensitivity and gradcheck: the gradient.
  std::vector<double> gradient;                ///< dJ/d<scalar parameters>
  std::vector<double> gradient_field;          ///< dJ/d<parameter field>, one per cell
  std::vector<double> gradient_initial_state;  ///< dJ/du(t0), dof interleaved
  double gradient_field_norm = 0.0, gradient_field_sum = 0.0;
  double gradient_field_min = 0.0, gradient_field_max = 0.0;
  double gradient_initial_state_norm = 0.0;
  std::int64_t forward_steps = 0, recomputed_steps = 0, checkpoints = 0;
  std::int64_t adjoint_krylov_iterations = 0;
  double seconds = 0.0;  ///< the gradient's wall time

  std::string output_file;  ///< the HDF5 file written (empty: none)
  int status = 0;           ///< gradcheck: PdeRunOptions::gradcheck's value
};

/// Runs `options.command` on `cfg` over `comm` (MPI_COMM_WORLD under the
/// command line and Python). Writes cfg.output_file (when not empty) through
/// pde::FieldWriter: run — the parameter field, the frames, the final
/// integrals and J; sensitivity — the frames (a second forward sweep), the
/// parameter field, dJ/d<field>, dJ/du0, the objective and the gradient.
/// Refuses a grid PETSc cannot index or the machine cannot hold
/// (io::check_pde_resources) before any work. Collective.
PdeResult pde_run(MPI_Comm comm, const PdeConfig& cfg, const PdeRunOptions& options);

/// Throws costate::Error on every rank when the ranks of `comm` resolved
/// different settings (`cfg.to_yaml()`): different grids, equations or
/// options on two ranks would otherwise hang or fail inside PETSc's
/// collective set-up. The message names the lowest rank that differs from
/// rank 0 and its first differing line beside rank 0's. pde_run calls it
/// first; callers that build grids themselves (calibrate) call it too.
/// Collective.
void check_same_settings_on_every_rank(MPI_Comm comm, const PdeConfig& cfg);

}  // namespace costate::io
