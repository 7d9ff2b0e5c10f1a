// linear::solve with the PETSc KSP backend on a distributed matrix: values
// and derivatives against the Eigen direct solve of the same (global)
// system, the distributed solve against a one-rank KSP solve, tangents vs
// adjoints, options-database overrides, failures. Runs on 1 and 2 ranks.
#include "costate/linear/ksp.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "costate/linear/solve.hpp"

namespace {

using costate::ad::Dual;
using costate::ad::Real;
using costate::ad::Tape;
namespace linear = costate::linear;

// KSP solves with rtol 1e-12 on a cond ~ 1e2 system against a direct
// solve: x agrees to ~cond·rtol relative; derivatives are solutions of the
// same kind of systems.
constexpr double kKrylovTolerance = 1e-9;
// Distributed vs one-rank KSP: the same Krylov method on differently
// partitioned (block-Jacobi) preconditioners converges to the same x
// within the solve tolerance.
constexpr double kPartitionTolerance = 1e-9;
// ⟨J v, w⟩ vs ⟨v, Jᵀ w⟩: a KSPSolve against a KSPSolveTranspose, each to
// rtol 1e-12.
constexpr double kDualityTolerance = 1e-9;

const linear::KspOptions kAccurate{.rtol = 1e-12};

/// Convection–diffusion on an nx × nx grid (5-point stencil, upwind
/// convection, shift): a non-symmetric matrix. Row k = j·nx + i. Columns of
/// a row are stored in a scrambled order (centre, north, west, east,
/// south) to exercise the backend's sorting.
template <class T>
linear::DistributedCsr<T> problem_matrix(MPI_Comm comm, int nx) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::int64_t n = std::int64_t{nx} * nx;
  const std::int64_t first = n * rank / size, last = n * (rank + 1) / size;
  linear::DistributedCsr<T> a;
  a.comm = comm;
  a.global_rows = n;
  a.first_row = first;
  for (std::int64_t k = first; k < last; ++k) {
    const std::int64_t i = k % nx, j = k / nx;
    auto add = [&](std::int64_t col, double v) {
      a.columns.push_back(col);
      a.values.push_back(T(v));
    };
    add(k, 4.0 + 0.5 + 0.01 * double(k % 7));
    if (j + 1 < nx) add(k + nx, -1.0);
    if (i > 0) add(k - 1, -1.0 - 0.4);  // upwind convection in +x
    if (i + 1 < nx) add(k + 1, -1.0 + 0.1);
    if (j > 0) add(k - nx, -1.0 - 0.05 * double(i % 3));
    a.row_ptr.push_back(static_cast<std::int64_t>(a.columns.size()));
  }
  return a;
}

double rhs_value(std::int64_t k) { return std::sin(0.37 * double(k)) + 0.2; }
double weight(std::int64_t k) { return 1.0 + 0.01 * double(k % 11); }

/// The whole matrix as an Eigen sparse matrix, and the entry index map:
/// for each global row's stored entries, in DistributedCsr order.
Eigen::SparseMatrix<double> global_matrix(int nx) {
  const auto a = problem_matrix<double>(MPI_COMM_SELF, nx);
  std::vector<Eigen::Triplet<double>> t;
  for (std::int64_t k = 0; k < a.global_rows; ++k)
    for (std::int64_t e = a.row_ptr[k]; e < a.row_ptr[k + 1]; ++e)
      t.emplace_back(static_cast<int>(k), static_cast<int>(a.columns[e]), a.values[e]);
  Eigen::SparseMatrix<double> m(a.global_rows, a.global_rows);
  m.setFromTriplets(t.begin(), t.end());
  return m;
}

struct Gradients {
  std::vector<double> x;     // local x
  std::vector<double> a;     // dJ/dA at the local entries (DistributedCsr order)
  std::vector<double> b;     // dJ/db local
  double j_local = 0.0;
};

/// J = Σ_k w_k x_k² over the rows of `comm`, differentiated on the tape
/// through one distributed KSP node.
Gradients ksp_gradient(MPI_Comm comm, int nx) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  auto a = problem_matrix<Real>(comm, nx);
  for (auto& v : a.values) tape.register_input(v);
  Eigen::Matrix<Real, Eigen::Dynamic, 1> b(a.local_rows());
  for (std::int64_t i = 0; i < a.local_rows(); ++i) {
    b[i] = rhs_value(a.first_row + i);
    tape.register_input(b[i]);
  }
  auto sol = linear::solve(a, b, kAccurate);
  EXPECT_TRUE(sol.summary.success()) << sol.summary.brief_report();
  Real j = 0.0;
  for (std::int64_t i = 0; i < a.local_rows(); ++i) j += weight(a.first_row + i) * sol.x[i] * sol.x[i];
  tape.register_output(j);
  tape.stop_recording();
  EXPECT_EQ(tape.stats().externals, 1u);
  j.set_gradient(1.0);
  tape.evaluate();  // collective: every rank sweeps
  EXPECT_NE(sol.adjoint_summary, nullptr);
  if (sol.adjoint_summary) {
    EXPECT_TRUE(sol.adjoint_summary->success()) << sol.adjoint_summary->brief_report();
    EXPECT_TRUE(sol.adjoint_summary->factorization_reused);
  }
  Gradients g;
  g.j_local = j.value();
  for (std::int64_t i = 0; i < a.local_rows(); ++i) {
    g.x.push_back(sol.x[i].value());
    g.b.push_back(b[i].gradient());
  }
  for (const auto& v : a.values) g.a.push_back(v.gradient());
  tape.reset();
  return g;
}

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

TEST(KspSolve, ValuesAndGradientsMatchTheEigenDirectSolve) {
  const int nx = 12;
  const Gradients g = ksp_gradient(MPI_COMM_WORLD, nx);
  // Reference: SparseLU on the whole system, on this rank, J over all rows.
  const Eigen::SparseMatrix<double> m = global_matrix(nx);
  const std::int64_t n = m.rows();
  Eigen::VectorXd b(n);
  for (std::int64_t k = 0; k < n; ++k) b[k] = rhs_value(k);
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  auto full = problem_matrix<Real>(MPI_COMM_SELF, nx);
  for (auto& v : full.values) tape.register_input(v);
  std::vector<Eigen::Triplet<Real>> t;
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t e = full.row_ptr[k]; e < full.row_ptr[k + 1]; ++e)
      t.emplace_back(static_cast<int>(k), static_cast<int>(full.columns[e]), full.values[e]);
  // Eigen's sparse containers copy the Reals (value + identifier), so the
  // gradients are read back through the matrix's own entries.
  Eigen::SparseMatrix<Real, Eigen::RowMajor> mr(n, n);
  mr.setFromTriplets(t.begin(), t.end());
  Eigen::Matrix<Real, Eigen::Dynamic, 1> br = b.cast<Real>();
  for (std::int64_t k = 0; k < n; ++k) tape.register_input(br[k]);
  auto ref = linear::solve(mr, br);
  Real j = 0.0;
  for (std::int64_t k = 0; k < n; ++k) j += weight(k) * ref.x[k] * ref.x[k];
  tape.stop_recording();
  j.set_gradient(1.0);
  tape.evaluate();
  const auto local = problem_matrix<double>(MPI_COMM_WORLD, nx);
  const double xscale = ref.x.unaryExpr([](const Real& v) { return std::abs(v.value()); }).maxCoeff();
  double bscale = 0.0;
  for (std::int64_t k = 0; k < n; ++k) bscale = std::max(bscale, std::abs(br[k].gradient()));
  for (std::int64_t i = 0; i < local.local_rows(); ++i) {
    const std::int64_t k = local.first_row + i;
    EXPECT_NEAR(g.x[i], ref.x[k].value(), kKrylovTolerance * xscale) << "row " << k;
    EXPECT_NEAR(g.b[i], br[k].gradient(), kKrylovTolerance * bscale) << "row " << k;
    for (std::int64_t e = local.row_ptr[i]; e < local.row_ptr[i + 1]; ++e) {
      // The same entry in the row-major reference (its stored Real).
      const Real& stored = mr.coeffRef(k, local.columns[e]);
      EXPECT_NEAR(g.a[e], stored.gradient(), kKrylovTolerance * bscale * xscale)
          << "entry (" << k << ", " << local.columns[e] << ")";
    }
  }
  tape.reset();
}

TEST(KspSolve, DistributedAgreesWithOneRank) {
  // On 2 ranks: the WORLD solve against each rank's own one-rank solve of the
  // whole system (on 1 rank the two coincide).
  const int nx = 16;
  const Gradients dist = ksp_gradient(MPI_COMM_WORLD, nx);
  const Gradients self = ksp_gradient(MPI_COMM_SELF, nx);
  const auto local = problem_matrix<double>(MPI_COMM_WORLD, nx);
  double xs = 0, bs = 0, as = 0;
  for (double v : self.x) xs = std::max(xs, std::abs(v));
  for (double v : self.b) bs = std::max(bs, std::abs(v));
  for (double v : self.a) as = std::max(as, std::abs(v));
  const auto whole = problem_matrix<double>(MPI_COMM_SELF, nx);
  for (std::int64_t i = 0; i < local.local_rows(); ++i) {
    const std::int64_t k = local.first_row + i;
    EXPECT_NEAR(dist.x[i], self.x[k], kPartitionTolerance * xs);
    EXPECT_NEAR(dist.b[i], self.b[k], kPartitionTolerance * bs);
    for (std::int64_t e = 0; e < local.row_ptr[i + 1] - local.row_ptr[i]; ++e)
      EXPECT_NEAR(dist.a[local.row_ptr[i] + e], self.a[whole.row_ptr[k] + e], kPartitionTolerance * as);
  }
  double j_dist = 0.0;
  MPI_Allreduce(&dist.j_local, &j_dist, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_NEAR(j_dist, self.j_local, kPartitionTolerance * std::abs(self.j_local));
}

TEST(KspSolve, DualTangentsMatchTheTapeAndAreDualToTheAdjoint) {
  const int nx = 10;
  using D = Dual<double, 1>;
  // Direction: Ȧ = 0.1·A's values scrambled, ḃ = cos(k).
  auto ad = problem_matrix<D>(MPI_COMM_WORLD, nx);
  for (std::size_t e = 0; e < ad.values.size(); ++e)
    ad.values[e].tangent(0) = 0.1 * std::sin(double(e) + 0.3 * rank_of(MPI_COMM_WORLD));
  Eigen::Matrix<D, Eigen::Dynamic, 1> bd(ad.local_rows());
  for (std::int64_t i = 0; i < ad.local_rows(); ++i)
    bd[i] = D(rhs_value(ad.first_row + i), {std::cos(double(ad.first_row + i))});
  const auto sd = linear::solve(ad, bd, kAccurate);
  EXPECT_EQ(sd.summary.tangent_directions, 1);

  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  auto ar = problem_matrix<Real>(MPI_COMM_WORLD, nx);
  for (auto& v : ar.values) tape.register_input(v);
  Eigen::Matrix<Real, Eigen::Dynamic, 1> br(ar.local_rows());
  for (std::int64_t i = 0; i < ar.local_rows(); ++i) {
    br[i] = rhs_value(ar.first_row + i);
    tape.register_input(br[i]);
  }
  auto sr = linear::solve(ar, br, kAccurate);
  tape.stop_recording();
  for (std::size_t e = 0; e < ar.values.size(); ++e)
    tape.set_tangent(ar.values[e].index(), ad.values[e].tangent(0));
  for (std::int64_t i = 0; i < ar.local_rows(); ++i) tape.set_tangent(br[i].index(), bd[i].tangent(0));
  tape.evaluate_forward();  // collective: KSPSolve in the tangent callback
  double scale = 0.0;
  for (std::int64_t i = 0; i < ar.local_rows(); ++i) scale = std::max(scale, std::abs(sd.x[i].tangent(0)));
  double jv_w = 0.0;
  for (std::int64_t i = 0; i < ar.local_rows(); ++i) {
    EXPECT_NEAR(tape.tangent(sr.x[i].index()), sd.x[i].tangent(0), kKrylovTolerance * scale);
    const double w = weight(ar.first_row + i);
    jv_w += sd.x[i].tangent(0) * w;
    sr.x[i].set_gradient(w);
  }
  tape.evaluate();
  double v_jtw = 0.0;
  for (std::size_t e = 0; e < ar.values.size(); ++e) v_jtw += ad.values[e].tangent(0) * ar.values[e].gradient();
  for (std::int64_t i = 0; i < ar.local_rows(); ++i) v_jtw += bd[i].tangent(0) * br[i].gradient();
  double sums[2] = {jv_w, v_jtw}, global[2];
  MPI_Allreduce(sums, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_NEAR(global[0], global[1], kDualityTolerance * std::abs(global[0]));
  tape.reset();
}

TEST(KspSolve, OptionsDatabaseOverridesTheStruct) {
  const auto a = problem_matrix<double>(MPI_COMM_WORLD, 8);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(a.local_rows());
  linear::set_petsc_option("-kspt_ksp_type", "bcgs");
  linear::set_petsc_option("-kspt_pc_type", "jacobi");
  const auto s1 = linear::solve(a, b, {.ksp_type = "gmres", .options_prefix = "kspt_"}).summary;
  EXPECT_NE(s1.backend.find("bcgs/jacobi"), std::string::npos) << s1.backend;
  const auto s2 = linear::solve(a, b,
                                {.ksp_type = "gmres", .use_options_database = false,
                                 .options_prefix = "kspt_"})
                      .summary;
  EXPECT_NE(s2.backend.find("gmres"), std::string::npos) << s2.backend;
  linear::clear_petsc_option("-kspt_ksp_type");
  linear::clear_petsc_option("-kspt_pc_type");
  EXPECT_TRUE(s1.success()) << s1.brief_report();
  EXPECT_GT(s1.iterations, 0);
  EXPECT_LT(s1.backward_error, 1e-10);
}

TEST(KspSolve, NotConvergedIsReportedAndNotDifferentiated) {
  const auto a = problem_matrix<double>(MPI_COMM_WORLD, 12);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(a.local_rows());
  const linear::KspOptions two{.pc_type = "none", .max_iterations = 2, .use_options_database = false};
  const auto s = linear::solve(a, b, two).summary;
  EXPECT_EQ(s.termination, linear::Termination::NotConverged) << s.brief_report();
  EXPECT_NE(s.message.find("DIVERGED_ITS"), std::string::npos) << s.message;
  EXPECT_EQ(s.iterations, 2);

  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Eigen::Matrix<Real, Eigen::Dynamic, 1> br = b.cast<Real>();
  for (std::int64_t i = 0; i < br.size(); ++i) tape.register_input(br[i]);
  EXPECT_THROW((void)linear::solve(a, br, two), costate::Error);
  auto allowed = two;
  allowed.differentiate_failed = true;
  EXPECT_NO_THROW((void)linear::solve(a, br, allowed));
  tape.stop_recording();
  tape.reset();
}

TEST(KspSolve, MalformedInputThrowsOnEveryRank) {
  auto a = problem_matrix<double>(MPI_COMM_WORLD, 6);
  if (rank_of(MPI_COMM_WORLD) == 0) a.columns[0] = a.global_rows + 3;  // out of range on rank 0
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(a.local_rows());
  try {
    (void)linear::solve(a, b);
    ADD_FAILURE() << "a malformed matrix must throw";
  } catch (const costate::Error& e) {
    if (rank_of(MPI_COMM_WORLD) == 0) {
      EXPECT_NE(std::string(e.what()).find("lies outside"), std::string::npos) << e.what();
    }
  }
  auto dup = problem_matrix<double>(MPI_COMM_WORLD, 6);
  dup.columns[1] = dup.columns[0];
  EXPECT_THROW((void)linear::solve(dup, b), costate::Error);
  EXPECT_THROW((void)linear::solve(problem_matrix<double>(MPI_COMM_WORLD, 6),
                                   Eigen::VectorXd::Ones(a.local_rows() + 1).eval()),
               costate::Error);
}

}  // namespace
