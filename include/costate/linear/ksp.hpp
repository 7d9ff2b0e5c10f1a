#pragma once
/// \file
/// The PETSc backend of linear solves: a distributed sparse matrix
/// (linear::DistributedCsr), a reusable Krylov solver on it
/// (linear::KspSolver: PETSc KSP with its preconditioner), and
/// linear::solve over double, ad::Dual<double, N> and ad::Real with the same
/// implicit rule as solve.hpp:
///
///     tangent:  A ẋ = ḃ − Ȧ x                      (KSPSolve, preconditioner reused)
///     adjoint:  Aᵀ s = x̄;  b̄ += s;  Ā −= s xᵀ       (KSPSolveTranspose, preconditioner reused)
///
/// Ā lives on A's stored entries; x at the columns of a rank's entries comes
/// from one ghost exchange after the forward solve (kept by the tape node).
///
/// Settings: KspOptions fields first (KSP type, PC type, tolerances), then
/// PETSc's options database overrides them when use_options_database is set
/// (-ksp_type cg -pc_type gamg ..., with options_prefix prepended:
/// -{prefix}ksp_type). The summary names what was actually used.
///
/// Collective: every call here is collective over A.comm — construction,
/// solves, and, for ad::Real, the reverse and forward sweeps of the tape
/// (every rank must record the same sequence of distributed solves and call
/// Tape::evaluate() together; a rank whose entries are all passive still
/// takes part). Whether a Real solve records a node is decided collectively
/// (any rank with an active entry). Releasing such a node (Tape::reset())
/// destroys PETSc objects, which is collective too: reset on every rank.
/// PETSc must be initialised (costate::Environment); a node released after
/// PetscFinalize (a thread's tape at exit) leaks its PETSc objects instead
/// of touching a finalised library.
///
/// Requirements: A square, rows distributed contiguously (rank r owns rows
/// [first_row, first_row + local_rows), ranks in order), each row's column
/// indices unique (any order). 32-bit PETSc indices: global size < 2³¹.
/// This header includes no PETSc header; the solver is an opaque handle.

#include <Eigen/Core>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/core/error.hpp"
#include "costate/linear/detail/ad_scalar.hpp"
#include "costate/linear/ksp_options.hpp"
#include "costate/linear/solve.hpp"
#include "costate/linear/summary.hpp"

namespace costate::linear {

/// The rows one rank owns of a square distributed sparse matrix, in
/// compressed sparse rows with GLOBAL column indices. Plain data, owned by
/// the caller; solves read it and keep nothing of it.
template <class T>
struct DistributedCsr {
  MPI_Comm comm = MPI_COMM_WORLD;
  std::int64_t global_rows = 0;          ///< n (= columns)
  std::int64_t first_row = 0;            ///< global index of this rank's first row
  std::vector<std::int64_t> row_ptr{0};  ///< local_rows + 1 offsets into columns/values
  std::vector<std::int64_t> columns;     ///< global column of each stored entry
  std::vector<T> values;                 ///< value of each stored entry

  std::int64_t local_rows() const { return static_cast<std::int64_t>(row_ptr.size()) - 1; }
  std::int64_t local_nonzeros() const { return static_cast<std::int64_t>(columns.size()); }
};

/// A PETSc KSP on a distributed matrix: the preconditioner is set up once
/// (construction) and reused by every solve with A or Aᵀ. Collective over
/// A.comm in every member. Move-only; owns its PETSc objects; its solves
/// share work vectors, so one KspSolver must not be used by two threads at
/// once.
class KspSolver {
 public:
  /// Builds the PETSc matrix from `a` (values copied) and sets up the KSP
  /// and its preconditioner. Throws costate::Error on malformed input
  /// (sizes, indices out of range, duplicate columns in a row) or a PETSc
  /// error. A singular preconditioner is reported by the first solve.
  KspSolver(const DistributedCsr<double>& a, const KspOptions& options = {});
  ~KspSolver();
  KspSolver(KspSolver&&) noexcept;
  KspSolver& operator=(KspSolver&&) noexcept;

  /// Solves A x = b (local parts, local_rows() each).
  Summary solve(std::span<const double> b, std::span<double> x) const;
  /// Solves Aᵀ x = b (local parts).
  Summary solve_transpose(std::span<const double> b, std::span<double> x) const;
  /// x at the column of each of this rank's stored entries, in the order
  /// of DistributedCsr::columns (one ghost exchange).
  std::vector<double> gather_at_entries(std::span<const double> x) const;

  std::int64_t local_rows() const;
  std::int64_t global_rows() const;
  /// "petsc ksp gmres/ilu": the KSP and PC types in use.
  const std::string& description() const;
  /// Seconds spent in the preconditioner set-up (construction).
  double seconds_setup() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sets an entry of PETSc's options database, as `-name value` on the
/// command line would ("-adj_ksp_type", "cg"); an empty value sets a flag.
/// Read by solvers constructed afterwards with use_options_database. Not
/// collective (each rank's database is its own; set it on every rank).
void set_petsc_option(const std::string& name, const std::string& value = "");
/// Removes an entry set by set_petsc_option (or given on the command line).
void clear_petsc_option(const std::string& name);

namespace detail {

/// Collective OR of a flag.
inline bool any_rank(MPI_Comm comm, bool flag) {
  int local = flag ? 1 : 0, global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_LOR, comm);
  return global != 0;
}

/// y_i −= Σ_{e in row i} ȧ[e] x_e   (x_e: x at entry e's column).
inline void subtract_local_product(const std::vector<std::int64_t>& row_ptr, const double* a_dot,
                                   const std::vector<double>& x_at_entries, double* y) {
  for (std::size_t i = 0; i + 1 < row_ptr.size(); ++i)
    for (std::int64_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e)
      y[i] -= a_dot[e] * x_at_entries[static_cast<std::size_t>(e)];
}

[[noreturn]] inline void throw_ksp_differentiate_failed(const Summary& s, const char* what) {
  throw Error(std::string("linear::solve (PETSc KSP): ") + what +
              " a solve that did not converge (" + s.brief_report() +
              "); its derivative is meaningless. Raise KspOptions::max_iterations, choose a "
              "stronger preconditioner (-pc_type ...), or set "
              "KspOptions::differentiate_failed = true to differentiate anyway");
}

}  // namespace detail

/// x = A⁻¹ b with PETSc KSP, for A distributed by rows and b the local part
/// (A.local_rows() entries); returns the local part of x. Scalars: double,
/// ad::Dual<double, N>, ad::Real, with double allowed for either operand.
/// Collective over A.comm (see the file comment, also for the tape).
/// Throws costate::Error on malformed input, on a PETSc error, and when
/// differentiating a solve that did not converge.
template <class TA, class DB>
Solution<detail::common_scalar_t<TA, typename DB::Scalar>> solve(const DistributedCsr<TA>& A,
                                                                 const Eigen::MatrixBase<DB>& b,
                                                                 const KspOptions& options = {}) {
  using TB = typename DB::Scalar;
  using T = detail::common_scalar_t<TA, TB>;
  options.validate();
  const std::int64_t m = A.local_rows();
  COSTATE_CHECK(b.cols() == 1 && b.rows() == m,
                "linear::solve (PETSc KSP): b must be this rank's local part, "
                    << m << " entries; it is " << b.rows() << " x " << b.cols());
  COSTATE_CHECK_EQ(A.values.size(), A.columns.size(),
                   "linear::solve (PETSc KSP): DistributedCsr needs one value per column index");
  const auto& bv = b.derived().eval();

  DistributedCsr<double> ad;
  ad.comm = A.comm;
  ad.global_rows = A.global_rows;
  ad.first_row = A.first_row;
  ad.row_ptr = A.row_ptr;
  ad.columns = A.columns;
  ad.values.resize(A.values.size());
  for (std::size_t e = 0; e < A.values.size(); ++e) ad.values[e] = detail::value_of(A.values[e]);
  Eigen::VectorXd bd(m);
  for (std::int64_t i = 0; i < m; ++i) bd[i] = detail::value_of(bv[i]);

  auto solver = std::make_shared<const KspSolver>(ad, options);
  Eigen::VectorXd x(m);
  Summary summary = solver->solve(std::span<const double>(bd.data(), static_cast<std::size_t>(m)),
                                  std::span<double>(x.data(), static_cast<std::size_t>(m)));
  summary.seconds_setup = solver->seconds_setup();

  Solution<T> out;
  if constexpr (detail::is_plain_v<T>) {
    out.x = x;
  } else if constexpr (detail::is_dual_double_v<T>) {
    constexpr int N = detail::tangent_count<T>();
    if (!summary.success() && !options.differentiate_failed)
      detail::throw_ksp_differentiate_failed(summary, "differentiating (ad::Dual)");
    std::vector<double> x_at;
    if constexpr (!detail::is_plain_v<TA>)
      x_at = solver->gather_at_entries(std::span<const double>(x.data(), static_cast<std::size_t>(m)));
    out.x.resize(m);
    for (std::int64_t i = 0; i < m; ++i) out.x[i] = T(x[i]);
    std::vector<double> rhs(static_cast<std::size_t>(m)), xd(static_cast<std::size_t>(m)),
        a_dot(A.values.size());
    for (int k = 0; k < N; ++k) {
      for (std::int64_t i = 0; i < m; ++i)
        rhs[static_cast<std::size_t>(i)] = detail::tangent_of(bv[i], k);
      if constexpr (!detail::is_plain_v<TA>) {
        for (std::size_t e = 0; e < a_dot.size(); ++e) a_dot[e] = detail::tangent_of(A.values[e], k);
        detail::subtract_local_product(A.row_ptr, a_dot.data(), x_at, rhs.data());
      }
      const Summary ts = solver->solve(rhs, xd);
      if (!ts.success() && !options.differentiate_failed)
        detail::throw_ksp_differentiate_failed(ts, "the tangent solve of");
      for (std::int64_t i = 0; i < m; ++i) out.x[i].tangent(k) = xd[static_cast<std::size_t>(i)];
    }
    summary.tangent_directions = N;
  } else {
    static_assert(detail::is_real_v<T>);
    out.x.resize(m);
    for (std::int64_t i = 0; i < m; ++i) out.x[i] = ad::Real(x[i]);
    ad::Tape& tape = ad::Tape::active();
    bool a_active = false, b_active = false;
    if constexpr (detail::is_real_v<TA>)
      for (const auto& v : A.values) a_active = a_active || v.is_active();
    if constexpr (detail::is_real_v<TB>)
      for (std::int64_t i = 0; i < m; ++i) b_active = b_active || bv[i].is_active();
    a_active = detail::any_rank(A.comm, a_active);
    b_active = detail::any_rank(A.comm, b_active);
    if (tape.is_recording() && (a_active || b_active)) {
      if (!summary.success() && !options.differentiate_failed)
        detail::throw_ksp_differentiate_failed(summary, "recording a tape node for");
      std::vector<const ad::Real*> inputs;
      if constexpr (detail::is_real_v<TA>)
        if (a_active)
          for (const auto& v : A.values) inputs.push_back(&v);
      if constexpr (detail::is_real_v<TB>)
        if (b_active)
          for (std::int64_t i = 0; i < m; ++i) inputs.push_back(&bv(i));
      std::vector<ad::Real*> outputs(static_cast<std::size_t>(m));
      for (std::int64_t i = 0; i < m; ++i) outputs[static_cast<std::size_t>(i)] = &out.x[i];
      const std::size_t a_count = a_active ? A.values.size() : 0;
      auto x_at = std::make_shared<const std::vector<double>>(
          a_active ? solver->gather_at_entries(
                         std::span<const double>(x.data(), static_cast<std::size_t>(m)))
                   : std::vector<double>{});
      auto row_ptr = std::make_shared<const std::vector<std::int64_t>>(A.row_ptr);
      auto adjoint_summary = std::make_shared<Summary>();
      out.adjoint_summary = adjoint_summary;
      const bool allow_failed = options.differentiate_failed;
      // Aᵀ s = x̄;  Ā −= s xᵀ;  b̄ += s.
      auto reverse = [solver, x_at, row_ptr, a_count, b_active, m, adjoint_summary, allow_failed](
                         std::span<const double> xbar, std::span<double> in_bar) {
        std::vector<double> s(static_cast<std::size_t>(m));
        *adjoint_summary = solver->solve_transpose(xbar, s);
        adjoint_summary->factorization_reused = true;
        if (!adjoint_summary->success() && !allow_failed)
          detail::throw_ksp_differentiate_failed(*adjoint_summary, "the adjoint (transposed) solve of");
        if (a_count > 0)
          for (std::size_t i = 0; i + 1 < row_ptr->size(); ++i)
            for (std::int64_t e = (*row_ptr)[i]; e < (*row_ptr)[i + 1]; ++e)
              in_bar[static_cast<std::size_t>(e)] -= s[i] * (*x_at)[static_cast<std::size_t>(e)];
        if (b_active)
          for (std::int64_t i = 0; i < m; ++i)
            in_bar[a_count + static_cast<std::size_t>(i)] += s[static_cast<std::size_t>(i)];
      };
      // A ẋ = ḃ − Ȧ x.
      auto tangent = [solver, x_at, row_ptr, a_count, b_active, m, allow_failed](
                         std::span<const double> in_dot, std::span<double> x_dot) {
        std::vector<double> rhs(static_cast<std::size_t>(m), 0.0);
        if (b_active)
          for (std::int64_t i = 0; i < m; ++i)
            rhs[static_cast<std::size_t>(i)] = in_dot[a_count + static_cast<std::size_t>(i)];
        if (a_count > 0) detail::subtract_local_product(*row_ptr, in_dot.data(), *x_at, rhs.data());
        const Summary ts = solver->solve(rhs, x_dot);
        if (!ts.success() && !allow_failed)
          detail::throw_ksp_differentiate_failed(ts, "the tangent solve of");
      };
      tape.push_external(std::span<const ad::Real* const>(inputs),
                         std::span<ad::Real* const>(outputs), std::move(reverse),
                         std::move(tangent));
    }
  }
  out.summary = std::move(summary);
  return out;
}

}  // namespace costate::linear
