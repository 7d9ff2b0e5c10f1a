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
    const pde::Box& o = g.owned();
    std::size_t e = 0;
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++e) {
        const double x = g.coordinate(0, i), y = g.coordinate(1, j);
        u0[e] = std::sin(M_PI * x) * std::sin(M_PI * y);
        truth[e] = m_true(x, y);
      }
    // Data: B u(κ_true) + σ ξ.
    std::vector<pde::Sensor> sensors;
    for (int b = 0; b < n; ++b)
      for (int a = 0; a < n; ++a) {
        pde::Sensor s;
        s.position = {(a + 0.5) / n, (b + 0.5) / n, 0.0};
        s.time = kDt * kSteps;
        s.sigma = sigma;
        sensors.push_back(s);
      }
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
