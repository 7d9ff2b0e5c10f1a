#pragma once
/// \file
/// From a templated model to the type-erased cvodes::System (cvodes.hpp):
/// the derivatives CVODES needs, by forward-mode AD on the model's rhs.
///
///   - ∂f/∂y (dense, column-major): ⌈n/8⌉ evaluations on ad::Dual<double, 8>;
///   - ∂f/∂y on its detected pattern (band/sparse linear solvers): the
///     compressed Jacobian, ⌈colours/8⌉ evaluations (ad::sparse_jacobian);
///   - [∂f/∂y | ∂f/∂p] at (t, y), cached while (t, y) does not change (the
///     backward right-hand side, its Jacobian and the quadrature of an
///     adjoint are evaluated at the same point in turn);
///   - sensitivity right-hand sides f_y s_j + ∂f/∂p_j: the directions s_j
///     (and e_j for the parameters) seeded as tangents, 8 per evaluation.
///
/// Also ode::detail::integrate_cvodes, the cvodes_bdf / cvodes_adams branch of
/// ode::integrate.

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/ad/sparse_jacobian.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/options.hpp"
#include "costate/ode/problem.hpp"

namespace costate::ode::detail {

/// Forward-mode derivatives of one model's rhs at fixed parameters p.
template <Model M>
class CvodesDerivatives {
 public:
  static constexpr int kChunk = 8;
  using D = ad::Dual<double, kChunk>;

  CvodesDerivatives(const M& model, std::span<const double> p, std::size_t n)
      : model_(model), p_(p.begin(), p.end()), n_(n), np_(p.size()), yd_(n), pd_(p.size()),
        fd_(n), y_cached_(n) {}

  std::size_t n() const { return n_; }
  std::size_t np() const { return np_; }

  void rhs(double t, const double* y, double* ydot) const {
    model_.template rhs<double>(t, std::span<const double>(y, n_), std::span<const double>(p_),
                               std::span<double>(ydot, n_));
  }

  /// J = ∂f/∂y into jac (column-major n × n).
  void jacobian(double t, const double* y, double* jac) {
    ++jacobian_evaluations;
    for (std::size_t j = 0; j < np_; ++j) pd_[j] = D(p_[j]);
    for (std::size_t first = 0; first < n_; first += kChunk) {
      for (std::size_t i = 0; i < n_; ++i) {
        yd_[i] = D(y[i]);
        if (i >= first && i < first + kChunk) yd_[i].tangent(static_cast<int>(i - first)) = 1.0;
      }
      eval(t);
      const std::size_t cols = std::min<std::size_t>(kChunk, n_ - first);
      for (std::size_t c = 0; c < cols; ++c)
        for (std::size_t r = 0; r < n_; ++r)
          jac[(first + c) * n_ + r] = fd_[r].tangent(static_cast<int>(c));
    }
  }

  /// [∂f/∂y | ∂f/∂p] at (t, y), column-major n × (n + np); cached.
  const std::vector<double>& jacobian_state_parameters(double t, const double* y) {
    if (cached_ && t == t_cached_ && std::equal(y, y + n_, y_cached_.begin())) return jp_;
    ++jacobian_evaluations;
    const std::size_t m = n_ + np_;
    jp_.resize(n_ * m);  // on first use only: large systems take the tape instead
    for (std::size_t first = 0; first < m; first += kChunk) {
      for (std::size_t i = 0; i < n_; ++i) {
        yd_[i] = D(y[i]);
        if (i >= first && i < first + kChunk) yd_[i].tangent(static_cast<int>(i - first)) = 1.0;
      }
      for (std::size_t j = 0; j < np_; ++j) {
        pd_[j] = D(p_[j]);
        const std::size_t c = n_ + j;
        if (c >= first && c < first + kChunk) pd_[j].tangent(static_cast<int>(c - first)) = 1.0;
      }
      eval(t);
      const std::size_t cols = std::min<std::size_t>(kChunk, m - first);
      for (std::size_t c = 0; c < cols; ++c)
        for (std::size_t r = 0; r < n_; ++r)
          jp_[(first + c) * n_ + r] = fd_[r].tangent(static_cast<int>(c));
    }
    std::copy(y, y + n_, y_cached_.begin());
    t_cached_ = t;
    cached_ = true;
    return jp_;
  }

  /// f_yᵀ λ and f_pᵀ λ from the cached dense [f_y | f_p].
  void vjp_dense(double t, const double* y, const double* lambda, double* fy_lambda,
                 double* fp_lambda) {
    const std::vector<double>& jp = jacobian_state_parameters(t, y);
    for (std::size_t c = 0; c < n_ + np_; ++c) {
      double s = 0.0;
      const double* col = jp.data() + c * n_;
      for (std::size_t r = 0; r < n_; ++r) s += col[r] * lambda[r];
      if (c < n_)
        fy_lambda[c] = s;
      else
        fp_lambda[c - n_] = s;
    }
  }

  /// ySdot[j] = f_y yS[j] + ∂f/∂p_j (j < np), all ns directions.
  void sensitivity_rhs(double t, const double* y, std::size_t ns, const double* const* yS,
                       double* const* ySdot) {
    for (std::size_t first = 0; first < ns; first += kChunk) {
      const std::size_t cols = std::min<std::size_t>(kChunk, ns - first);
      for (std::size_t i = 0; i < n_; ++i) {
        yd_[i] = D(y[i]);
        for (std::size_t c = 0; c < cols; ++c)
          yd_[i].tangent(static_cast<int>(c)) = yS[first + c][i];
      }
      for (std::size_t j = 0; j < np_; ++j) {
        pd_[j] = D(p_[j]);
        if (j >= first && j < first + cols) pd_[j].tangent(static_cast<int>(j - first)) = 1.0;
      }
      eval(t);
      for (std::size_t c = 0; c < cols; ++c)
        for (std::size_t r = 0; r < n_; ++r)
          ySdot[first + c][r] = fd_[r].tangent(static_cast<int>(c));
    }
  }

  /// Band/sparse solvers: detects the pattern of ∂f/∂y at (t, y) (one
  /// evaluation on ad::IndexSet), adds the diagonal (CVODES factors
  /// I − γ f_y) and colours its columns (ad::color_columns). Afterwards
  /// column_starts()/rows() hold the structure in compressed sparse columns.
  void detect_structure(double t, const double* y) {
    const std::vector<double> x(y, y + n_);
    ad::SparsityPattern pattern = ad::detect_sparsity(vector_callable(t), x);
    std::vector<std::pair<int, int>> entries;
    entries.reserve(static_cast<std::size_t>(pattern.nnz()) + n_);
    for (int i = 0; i < pattern.rows; ++i) {
      entries.emplace_back(i, i);
      for (int j : pattern.row(i)) entries.emplace_back(i, j);
    }
    pattern_ = ad::SparsityPattern::from_entries(pattern.rows, pattern.cols, std::move(entries));
    coloring_ = ad::color_columns(pattern_);
    const ad::SparsityPattern columns = pattern_.transpose();  // CSC of ∂f/∂y
    column_starts_.assign(columns.row_ptr.begin(), columns.row_ptr.end());
    rows_.assign(columns.col_idx.begin(), columns.col_idx.end());
  }
  const std::vector<std::int64_t>& column_starts() const { return column_starts_; }
  const std::vector<std::int64_t>& rows() const { return rows_; }
  /// Colours of the detected pattern (0 before detect_structure).
  int colours() const { return coloring_.colors; }

  /// The non-zeros of ∂f/∂y at (t, y) in the order of column_starts()/rows():
  /// the compressed forward-mode Jacobian (ad::sparse_jacobian with the
  /// detected pattern and colouring), ⌈colours / 8⌉ evaluations.
  void sparse_jacobian(double t, const double* y, double* values) {
    ++jacobian_evaluations;
    const std::vector<double> x(y, y + n_);
    const ad::SparseJacobianResult r =
        ad::sparse_jacobian<kChunk>(vector_callable(t), x, pattern_, coloring_);
    // Eigen's compressed columns, rows increasing: the order of rows_.
    std::copy(r.jacobian.valuePtr(), r.jacobian.valuePtr() + r.jacobian.nonZeros(), values);
  }

  std::int64_t jacobian_evaluations = 0;

 private:
  /// f(t, ·, p) on a vector of any scalar (p constants): the shape
  /// ad::detect_sparsity and ad::sparse_jacobian take.
  auto vector_callable(double t) const {
    return [this, t](const auto& xv) {
      using T = std::decay_t<decltype(xv[0])>;
      std::vector<T> pt(p_.begin(), p_.end()), out(n_);
      model_.template rhs<T>(t, std::span<const T>(xv.data(), xv.size()), std::span<const T>(pt),
                             std::span<T>(out));
      return out;
    };
  }

  void eval(double t) {
    model_.template rhs<D>(t, std::span<const D>(yd_), std::span<const D>(pd_),
                           std::span<D>(fd_));
  }

  const M& model_;
  std::vector<double> p_;
  std::size_t n_, np_;
  std::vector<D> yd_, pd_, fd_;
  std::vector<double> jp_, y_cached_;
  double t_cached_ = 0.0;
  bool cached_ = false;
  ad::SparsityPattern pattern_;
  ad::ColumnColoring coloring_;
  std::vector<std::int64_t> column_starts_, rows_;
};

/// A cvodes::System whose rhs, Jacobian and sensitivity rhs call `d`
/// (which must outlive the system).
template <Model M>
cvodes::System make_cvodes_system(CvodesDerivatives<M>& d, Method method) {
  cvodes::System sys;
  sys.n = d.n();
  sys.np = d.np();
  sys.bdf = method != Method::CvodesAdams;
  sys.rhs = [&d](double t, const double* y, double* ydot) { d.rhs(t, y, ydot); };
  sys.jacobian = [&d](double t, const double* y, double* jac) { d.jacobian(t, y, jac); };
  sys.sensitivity_rhs = [&d](double t, const double* y, std::size_t ns, const double* const* yS,
                             double* const* ySdot) { d.sensitivity_rhs(t, y, ns, yS, ySdot); };
  return sys;
}

/// Band/sparse linear solvers: when `solver` may need it (band, sparse, or
/// automatic with at least cvodes::kAutomaticDenseLimit states), detects the
/// structure of ∂f/∂y at (t0, y0) and gives `sys` its structure and the
/// compressed Jacobian callback (calling `d`, which must outlive `sys`).
template <Model M>
void add_jacobian_structure(cvodes::System& sys, CvodesDerivatives<M>& d, CvodesLinearSolver solver,
                            double t0, const double* y0) {
  if (solver == CvodesLinearSolver::Dense ||
      (solver == CvodesLinearSolver::Automatic && d.n() < cvodes::kAutomaticDenseLimit))
    return;
  d.detect_structure(t0, y0);
  sys.jacobian_column_starts = d.column_starts();
  sys.jacobian_rows = d.rows();
  sys.sparse_jacobian = [&d](double t, const double* y, double* values) {
    d.sparse_jacobian(t, y, values);
  };
}

/// The cvodes_bdf / cvodes_adams branch of ode::integrate: outputs by
/// CVODES' interpolant, never stepping past t1.
template <Model M>
Solution integrate_cvodes(const Problem<M>& problem, const IntegratorOptions& options,
                          std::span<const double> outputs) {
  const std::size_t n = problem.n_states();
  options.validate(n);
  const auto start = std::chrono::steady_clock::now();
  CvodesDerivatives<M> d(problem.model, std::span<const double>(problem.p), n);
  cvodes::System sys = make_cvodes_system(d, options.method);
  add_jacobian_structure(sys, d, options.cvodes_linear_solver, problem.t0(), problem.y0.data());
  Solution sol;
  sol.n_states = n;
  std::vector<double> y = problem.y0;
  const cvodes::Stats st = cvodes::integrate(
      sys, cvodes::settings_from(options, n), problem.t0(), problem.t1(), y, outputs,
      options.stop_at_outputs, [&](std::size_t, double t, const double* yy) {
        sol.t.push_back(t);
        sol.y.insert(sol.y.end(), yy, yy + n);
        if (options.on_step) options.on_step(t);
      });
  Summary& s = sol.summary;
  s.method = options.method;
  s.steps = st.steps;
  s.rejected_steps = st.error_test_failures;
  s.rhs_evaluations = st.rhs_evaluations;
  s.final_time = st.final_time;
  s.termination = st.success                        ? Termination::Success
                  : st.flag == "CV_TOO_MUCH_WORK"   ? Termination::MaxStepsReached
                  : st.flag == "CV_CONV_FAILURE"    ? Termination::NonlinearSolverFailed
                                                    : Termination::StepSizeUnderflow;
  s.message = st.success ? "reached t1" : st.message;
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sol;
}

}  // namespace costate::ode::detail
