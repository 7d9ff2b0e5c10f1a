// cvodes::Binding — the callbacks of the CVODES backend (cvodes.hpp) from a
// compiled ode::System — and the cvodes_bdf / cvodes_adams branch of
// ode::integrate. Compiled once: no CVODES code is a template on the model.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "costate/ad/dual.hpp"
#include "costate/ad/sparsity.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/support.hpp"
#include "costate/ode/system.hpp"

namespace costate::ode {
namespace cvodes {
namespace {
using Dual8 = ad::Dual<double, 8>;
constexpr int kChunk = 8;
// The sparse Jacobian's cost model (ad::split_dense_rows), in Dual8 passes:
// a reverse sweep (Linearization::vjp with e_i) and the linearization the
// first one needs. From a profile of Chen_MSB2009's gradient (500 states,
// the equation kernel): a Dual8 pass ~71 µs, a sweep ~30 µs, a
// linearization ~15 µs.
constexpr double kReverseSweepCost = 0.5;
constexpr double kLinearizationCost = 0.25;
}  // namespace

struct Binding::Impl {
  Impl(const ode::System& s, std::span<const double> pp)
      : sys(s), p(pp.begin(), pp.end()), n(s.n_model_states()), nx(s.n_states()),
        np(s.n_parameters()), lin(s), tangents(s, /*tangents_only=*/true), xc(nx), xd(nx),
        pd(np), od(nx) {}

  const ode::System& sys;
  std::vector<double> p;
  std::size_t n, nx, np;
  cvodes::System cs;
  Linearization lin;       // f_xᵀλ, f_pᵀλ; kept at (tc, xc)
  Linearization tangents;  // sensitivity right-hand sides
  bool cached = false;
  double tc = 0.0;
  std::vector<double> xc;
  std::vector<Dual8> xd, pd, od;
  std::vector<double> jbuf, V, Q, out;
  // Band / KLU: the structure of ∂f/∂x (with its diagonal) and its colouring;
  // the rows too dense to colour well, taken by reverse sweeps
  // (ad::split_dense_rows), with the positions (value index, column) of
  // their entries in the CSC values.
  ad::ColumnColoring colouring;
  std::vector<int> dense_rows;
  std::vector<char> is_dense;
  std::vector<std::vector<std::pair<std::int64_t, std::size_t>>> dense_entries;
  std::vector<double> unit, row_bar, p_bar;
  std::int64_t jacobian_evaluations = 0, vjps = 0;

  std::span<const double> ps() const { return p; }

  // The linearization at (t, x), made unless it is already there.
  void linearize(double t, const double* x) {
    if (cached && t == tc && std::equal(x, x + nx, xc.begin())) return;
    lin.at(t, std::span<const double>(x, nx), ps());
    std::copy(x, x + nx, xc.begin());
    tc = t;
    cached = true;
  }

  // One Dual pass with the state seeds seed(j) ∈ [0, 8) or -1 (p constant).
  template <class Seed>
  void state_pass(double t, const double* x, Seed seed) {
    for (std::size_t i = 0; i < nx; ++i) {
      xd[i] = Dual8(x[i]);
      if (i < n) {
        const int c = seed(i);
        if (c >= 0) xd[i].set_tangent(c, 1.0);
      }
    }
    for (std::size_t j = 0; j < np; ++j) pd[j] = Dual8(p[j]);
    sys.model().rhs(t, std::span<const Dual8>(xd), std::span<const Dual8>(pd),
                    std::span<Dual8>(od));
  }

  void jacobian(double t, const double* x, double* jac) {
    ++jacobian_evaluations;
    std::fill(jac, jac + nx * nx, 0.0);  // the z column (running cost) stays zero
    const JacobianStrategy s = lin.strategy();
    if (cached && t == tc && std::equal(x, x + nx, xc.begin()) &&
        sys.model().own_vjp_workspace() == 0 &&
        (s == JacobianStrategy::Dense || s == JacobianStrategy::Sparse)) {
      // The backward problem's Jacobian at the point of its right-hand
      // side: the Linearization already holds [f_y | f_p].
      jbuf.resize(nx * (n + np));
      lin.jacobian(jbuf);
      std::copy(jbuf.begin(), jbuf.begin() + static_cast<std::ptrdiff_t>(nx * n), jac);
      return;
    }
    for (std::size_t first = 0; first < n; first += kChunk) {
      const std::size_t last = std::min(n, first + kChunk);
      state_pass(t, x, [&](std::size_t j) {
        return j >= first && j < last ? static_cast<int>(j - first) : -1;
      });
      for (std::size_t j = first; j < last; ++j)
        for (std::size_t r = 0; r < nx; ++r)
          jac[j * nx + r] = od[r].tangent(static_cast<int>(j - first));
    }
  }

  void sparse_jacobian(double t, const double* x, double* values) {
    ++jacobian_evaluations;
    const auto& starts = cs.jacobian_column_starts;
    const auto& rows = cs.jacobian_rows;
    for (int first = 0; first < std::max(1, colouring.colors); first += kChunk) {
      state_pass(t, x, [&](std::size_t j) {
        const int c = colouring.color[j] - first;
        return c >= 0 && c < kChunk ? c : -1;
      });
      for (std::size_t j = 0; j < nx; ++j) {
        const int c = colouring.color[j] - first;
        if (c < 0 || c >= kChunk) continue;
        for (auto k = starts[j]; k < starts[j + 1]; ++k) {
          const auto kk = static_cast<std::size_t>(k);
          const auto r = static_cast<std::size_t>(rows[kk]);
          if (!is_dense.empty() && is_dense[r]) continue;
          // Column z (j = n, running cost): nothing depends on z.
          values[kk] = j < n ? od[r].tangent(c) : 0.0;
        }
      }
    }
    if (dense_rows.empty()) return;
    // The dense rows: row r of ∂f/∂x = f_xᵀ e_r, one reverse sweep each.
    linearize(t, x);
    for (std::size_t d = 0; d < dense_rows.size(); ++d) {
      const auto r = static_cast<std::size_t>(dense_rows[d]);
      unit[r] = 1.0;
      lin.vjp(unit, row_bar, p_bar);
      unit[r] = 0.0;
      for (const auto& [k, j] : dense_entries[d])
        values[static_cast<std::size_t>(k)] = j < n ? row_bar[j] : 0.0;
    }
  }

  // Band/KLU: the pattern of ∂f/∂x from the System's [f_y | f_p] pattern
  // (its first n columns) plus the diagonal, in CSC, and the colouring of
  // its rows that are not dense.
  void detect_structure(double t0, std::span<const double> x0) {
    const ad::SparsityPattern& full = sys.sparsity(t0, x0, ps());
    std::vector<std::pair<int, int>> entries;
    for (int i = 0; i < full.rows; ++i) {
      entries.emplace_back(i, i);
      for (int j : full.row(i))
        if (static_cast<std::size_t>(j) < n) entries.emplace_back(i, j);
    }
    const auto m = static_cast<int>(nx);
    const ad::SparsityPattern fx = ad::SparsityPattern::from_entries(m, m, std::move(entries));
    const ad::SparsityPattern columns = fx.transpose();  // CSC of ∂f/∂x
    cs.jacobian_column_starts.assign(columns.row_ptr.begin(), columns.row_ptr.end());
    cs.jacobian_rows.assign(columns.col_idx.begin(), columns.col_idx.end());
    ad::DenseRowSplit split = ad::split_dense_rows(fx, kChunk, kReverseSweepCost, kLinearizationCost);
    colouring = std::move(split.coloring);
    dense_rows = std::move(split.dense_rows);
    if (dense_rows.empty()) return;
    is_dense.assign(nx, 0);
    std::vector<std::size_t> slot(nx, 0);
    for (std::size_t d = 0; d < dense_rows.size(); ++d) {
      is_dense[static_cast<std::size_t>(dense_rows[d])] = 1;
      slot[static_cast<std::size_t>(dense_rows[d])] = d;
    }
    dense_entries.assign(dense_rows.size(), {});
    for (std::size_t j = 0; j < nx; ++j)
      for (auto k = columns.row_ptr[j]; k < columns.row_ptr[j + 1]; ++k) {
        const auto r = static_cast<std::size_t>(columns.col_idx[static_cast<std::size_t>(k)]);
        if (is_dense[r]) dense_entries[slot[r]].emplace_back(k, j);
      }
    unit.assign(nx, 0.0);
    row_bar.assign(nx, 0.0);
    p_bar.assign(np, 0.0);
  }

  void sensitivity_rhs(double t, const double* x, std::size_t ns, const double* const* yS,
                       double* const* ySdot) {
    // Row-major direction blocks: V (n_x × ns) the states', Q (n_p × ns) the
    // unit parameter directions e_j of the first np sensitivities.
    V.resize(nx * ns);
    Q.assign(np * ns, 0.0);
    out.resize(nx * ns);
    for (std::size_t j = 0; j < ns; ++j)
      for (std::size_t i = 0; i < nx; ++i) V[i * ns + j] = yS[j][i];
    for (std::size_t j = 0; j < std::min(np, ns); ++j) Q[j * ns + j] = 1.0;
    tangents.at(t, std::span<const double>(x, nx), ps());
    tangents.jvp_many(ns, V, Q, out);
    for (std::size_t j = 0; j < ns; ++j)
      for (std::size_t i = 0; i < nx; ++i) ySdot[j][i] = out[i * ns + j];
  }

  void vjp(double t, const double* x, const double* w, double* xbar, double* pbar) {
    ++vjps;
    linearize(t, x);
    std::fill(pbar, pbar + np, 0.0);
    lin.vjp(std::span<const double>(w, nx), std::span<double>(xbar, nx),
            std::span<double>(pbar, np));
  }
};

Binding::Binding(const ode::System& system, std::span<const double> p, Method method,
                 CvodesLinearSolver solver, double t0, std::span<const double> x0)
    : impl_(std::make_unique<Impl>(system, p)) {
  Impl* m = impl_.get();
  COSTATE_CHECK_EQ(p.size(), m->np, "cvodes::Binding: parameters for the System");
  COSTATE_CHECK_EQ(x0.size(), m->nx, "cvodes::Binding: initial state for the System");
  // Every CVODES entry point binds its System here: DAEs only for IDAS.
  require(supports_dae(method, system.n_algebraic()), "integrator.method = " + to_string(method));
  cvodes::System& cs = m->cs;
  cs.n = m->nx;
  cs.np = m->np;
  cs.bdf = method != Method::CvodesAdams;
  cs.rhs = [m](double t, const double* x, double* dxdt) {
    m->sys.rhs(t, std::span<const double>(x, m->nx), m->ps(), std::span<double>(dxdt, m->nx));
  };
  cs.jacobian = [m](double t, const double* x, double* jac) { m->jacobian(t, x, jac); };
  cs.sensitivity_rhs = [m](double t, const double* x, std::size_t ns, const double* const* yS,
                           double* const* ySdot) { m->sensitivity_rhs(t, x, ns, yS, ySdot); };
  cs.vjp = [m](double t, const double* x, const double* w, double* xbar, double* pbar) {
    m->vjp(t, x, w, xbar, pbar);
  };
  if (solver == CvodesLinearSolver::Dense ||
      (solver == CvodesLinearSolver::Automatic && m->nx < kAutomaticDenseLimit))
    return;
  m->detect_structure(t0, x0);
  cs.sparse_jacobian = [m](double t, const double* x, double* values) {
    m->sparse_jacobian(t, x, values);
  };
}

Binding::~Binding() = default;
const cvodes::System& Binding::system() const { return impl_->cs; }
cvodes::System& Binding::system() { return impl_->cs; }
int Binding::colours() const { return impl_->colouring.colors; }
void Binding::jacobian(double t, const double* x, double* jac) { impl_->jacobian(t, x, jac); }
std::int64_t Binding::jacobian_evaluations() const { return impl_->jacobian_evaluations; }
std::int64_t Binding::vjp_evaluations() const { return impl_->vjps; }

}  // namespace cvodes

namespace detail {

Solution integrate_cvodes(const System& system, std::span<const double> y0,
                          std::span<const double> p, double t0, double t1,
                          const IntegratorOptions& options, std::span<const double> outputs) {
  const std::size_t n = system.n_states();
  options.validate(n);
  const auto start = std::chrono::steady_clock::now();
  cvodes::Binding binding(system, p, options.method, options.cvodes_linear_solver, t0, y0);
  Solution sol;
  sol.n_states = n;
  std::vector<double> y(y0.begin(), y0.end());
  const cvodes::Stats st = cvodes::integrate(
      binding.system(), cvodes::settings_from(options, n), t0, t1, y, outputs,
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
  s.termination = st.success                      ? Termination::Success
                  : st.flag == "CV_TOO_MUCH_WORK" ? Termination::MaxStepsReached
                  : st.flag == "CV_CONV_FAILURE"  ? Termination::NonlinearSolverFailed
                                                  : Termination::StepSizeUnderflow;
  s.message = st.success ? "reached t1" : st.message;
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sol;
}

}  // namespace detail
}  // namespace costate::ode
