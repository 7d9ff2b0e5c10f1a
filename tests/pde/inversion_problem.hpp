#pragma once
// The manufactured inverse problem of tests/pde/inversion_test.cpp and
// laplace_test.cpp: Heat2D u_t = ∇·(κ∇u) + q₀ s on [0,1]², Dirichlet,
// u₀ = sin πx sin πy, backward Euler (10 steps of 0.02), κ = exp(m), m_true
// smooth; an n × n lattice of sensors at the end of the run with Gaussian
// noise (a hash of the sensor index: the same data on every rank count);
// a BiLaplacian prior about log 0.1; expect_error for the bad-input tests.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "costate/pde/inversion.hpp"
#include "costate/pde/models.hpp"

namespace costate::pde_test {

using namespace costate;
using costate::pde::Boundary;

constexpr int kCells = 16;  // the default grid: kCells × kCells
constexpr double kDt = 0.02;
constexpr std::int64_t kSteps = 10;

inline double m_true(double x, double y) { return std::log(0.1) + 0.6 * std::sin(3.0 * x) * std::cos(2.0 * y - 0.5); }

inline double noise(std::size_t i) {
  auto mix = [](std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const double u1 = (static_cast<double>(mix(2 * i + 11) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(mix(2 * i + 12) >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

inline pde::ThetaOptions theta_options(const std::string& pc = "") {
  pde::ThetaOptions o;
  o.theta = 1.0;
  o.dt = kDt;
  o.steps = kSteps;
  o.ksp.rtol = 1e-14;
  o.ksp.pc_type = pc;
  o.ksp.use_options_database = false;
  return o;
}

/// u0 = sin πx sin πy and the true field m_true on the owned cells of `g`.
inline void initial_and_truth(const pde::Grid& g, const pde::GlobalVector& u0, const pde::GlobalVector& truth) {
  const pde::Box& o = g.owned();
  std::size_t e = 0;
  for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
    for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++e) {
      const double x = g.coordinate(0, i), y = g.coordinate(1, j);
      u0[e] = std::sin(M_PI * x) * std::sin(M_PI * y);
      truth[e] = m_true(x, y);
    }
}

/// Sensors on an n × n lattice at time `t`, noise σ (values unset).
inline std::vector<pde::Sensor> sensor_lattice(int n, double sigma, double t) {
  std::vector<pde::Sensor> sensors;
  for (int b = 0; b < n; ++b)
    for (int a = 0; a < n; ++a) {
      pde::Sensor s;
      s.position = {(a + 0.5) / n, (b + 0.5) / n, 0.0};
      s.time = t;
      s.sigma = sigma;
      sensors.push_back(s);
    }
  return sensors;
}

/// The inverse problem on `comm`: operator, u0, sensors, prior.
struct Problem {
  pde::Operator<pde::Heat2D> op;
  pde::GlobalVector u0, truth;
  std::shared_ptr<pde::Observations> obs;
  std::unique_ptr<pde::Prior> prior;
  std::unique_ptr<pde::ThetaMisfit<pde::Heat2D>> misfit;
  int cells;

  static pde::Domain domain(int cells) {
    pde::Domain d;
    d.cells = {cells, cells, 1};
    d.boundary = {Boundary::Dirichlet, Boundary::Dirichlet, Boundary::Periodic};
    return d;
  }
  /// Sensors on an n × n lattice, noise σ; `pc` the preconditioner of
  /// every KSP ("" PETSc's default).
  Problem(MPI_Comm comm, int n, double sigma, const std::string& pc = "", double gamma = 1.0, double delta = 5.0,
          int cells_ = kCells)
      : op(comm, domain(cells_), {}, {5.0}), cells(cells_) {
    const pde::Grid& g = op.grid();
    const pde::Grid& fg = *op.field_grid();
    u0 = g.create_global();
    truth = fg.create_global();
    initial_and_truth(g, u0, truth);
    // Data: B u(κ_true) + σ ξ.
    std::vector<pde::Sensor> sensors = sensor_lattice(n, sigma, kDt * kSteps);
    pde::Observations clean(g, sensors, 0.0, kDt * kSteps);
    pde::ThetaMisfit<pde::Heat2D> forward(op, theta_options(pc), u0, pde::Objective::integral(), true);
    forward.misfit(truth);
    const std::vector<double> bu = clean.predictions(forward.final_state());
    for (std::size_t i = 0; i < sensors.size(); ++i) sensors[i].value = bu[i] + sigma * noise(i);
    obs = std::make_shared<pde::Observations>(g, sensors, 0.0, kDt * kSteps);
    pde::GlobalVector mean = fg.create_global();
    fill(mean, std::log(0.1));
    pde::PriorOptions po{.kind = pde::PriorKind::BiLaplacian, .gamma = gamma, .delta = delta};
    po.ksp.pc_type = pc;
    po.ksp.use_options_database = false;
    prior = std::make_unique<pde::Prior>(fg, po, mean);
    misfit = std::make_unique<pde::ThetaMisfit<pde::Heat2D>>(op, theta_options(pc), u0,
                                                             pde::Objective::sensors(obs), true);
  }
  pde::InversionResult solve(pde::InversionMethod method, double rtol, int max_iterations = 40) {
    return pde::find_map(*misfit, *prior, prior->mean(),
                         {.method = method, .max_iterations = max_iterations, .gradient_rtol = rtol});
  }
  /// ‖m − m_true‖ in L²(Ω).
  double error(const pde::GlobalVector& m) const {
    auto d = op.field_grid()->create_global();
    linear_sum(d, 1.0, m, -1.0, truth);
    return std::sqrt(dot(d, d) / (static_cast<double>(cells) * cells));
  }
};

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0, s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}

inline std::vector<double> smooth(const pde::Grid& g, double salt) {
  std::vector<double> v(static_cast<std::size_t>(g.global_size()));
  for (std::int64_t j = 0; j < g.cells(1); ++j)
    for (std::int64_t i = 0; i < g.cells(0); ++i)
      v[static_cast<std::size_t>(j * g.cells(0) + i)] =
          std::sin(salt + 2.0 * g.coordinate(0, i)) * std::cos(1.5 * g.coordinate(1, j) - salt);
  return v;
}

/// ∇Φ of `misfit` at m against central differences of Φ along `dir`, and
/// the exact ∇²Φ v against central differences of ∇Φ (step `step`, relative
/// tolerance `tol`); Φ from linearize and misfit agree bitwise. Calls, in
/// order: linearize, misfit, the exact and the Gauss–Newton product,
/// linearize twice. Returns (v, H v, GN v).
struct MisfitProducts {
  pde::GlobalVector v, hv, gn;
};
inline MisfitProducts check_misfit_derivatives(pde::MisfitModel& misfit, const std::vector<double>& m,
                                               const std::vector<double>& dir, double step, double tol) {
  const pde::Grid& fg = misfit.field_grid();
  auto mv = fg.create_global(), dv = fg.create_global(), grad = fg.create_global();
  fg.scatter(m, mv);
  fg.scatter(dir, dv);
  const double phi = misfit.linearize(mv, grad);
  EXPECT_EQ(phi, misfit.misfit(mv));
  auto hv = fg.create_global(), gn = fg.create_global();
  misfit.hessian_vector(dv, hv, pde::HessianProduct::Exact);
  misfit.hessian_vector(dv, gn, pde::HessianProduct::GaussNewton);
  auto at = [&](double eps, const pde::GlobalVector& g) {
    std::vector<double> x(m);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += eps * dir[i];
    auto xv = fg.create_global();
    fg.scatter(x, xv);
    return misfit.linearize(xv, g);
  };
  auto gp = fg.create_global(), gm = fg.create_global();
  const double fp = at(step, gp), fm = at(-step, gm);
  const double gd = dot(grad, dv);
  EXPECT_NEAR((fp - fm) / (2.0 * step), gd, tol * std::abs(gd));
  const std::vector<double> gpn = fg.gather(gp), gmn = fg.gather(gm);
  std::vector<double> hfd(gpn.size());
  for (std::size_t i = 0; i < hfd.size(); ++i) hfd[i] = (gpn[i] - gmn[i]) / (2.0 * step);
  EXPECT_LT(max_rel(fg.gather(hv), hfd), tol);
  return {dv, hv, gn};
}

/// Expects f() to throw a costate::Error whose message contains `fragment`.
inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace costate::pde_test
