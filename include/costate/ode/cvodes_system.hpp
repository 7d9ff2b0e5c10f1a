#pragma once
/// \file
/// From a templated model to the type-erased cvodes::System (cvodes.hpp):
/// the derivatives CVODES needs, by forward-mode AD on the model's rhs.
///
///   - ∂f/∂y (dense, column-major): ⌈n/8⌉ evaluations on ad::Dual<double, 8>;
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
#include <vector>

#include "costate/ad/dual.hpp"
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
        fd_(n), jp_(n * (n + p.size())), y_cached_(n) {}

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

  std::int64_t jacobian_evaluations = 0;

 private:
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

/// The cvodes_bdf / cvodes_adams branch of ode::integrate: outputs by
/// CVODES' interpolant, never stepping past t1.
template <Model M>
Solution integrate_cvodes(const Problem<M>& problem, const IntegratorOptions& options,
                          std::span<const double> outputs) {
  const std::size_t n = problem.n_states();
  options.validate(n);
  const auto start = std::chrono::steady_clock::now();
  CvodesDerivatives<M> d(problem.model, std::span<const double>(problem.p), n);
  const cvodes::System sys = make_cvodes_system(d, options.method);
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
