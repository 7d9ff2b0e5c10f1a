// Events on the IDAS backend (issue 32): IDAS' root finding locates a
// time-triggered and a state-triggered event of an index-1 DAE, each update
// is followed by a consistent restart (the algebraic state re-solved, then
// IDACalcIC), and idas_forward / idas_adjoint carry the events' exact jumps
// (the CVODES backend's: InstantJump, and adjoint_across_instants' stretch
// by stretch sweep). Checked against the closed form, its central
// differences, and the native bdf's discrete adjoint.
//
//   x' = −k x,   0 = z − c x,   x(0) = 2 (z(0) = 0 a guess: z = c x),
//   "kick":  t ≥ 1      →  x := x + a   (x(1⁺) = x₀e^{−k} + a =: x₁),
//   "floor": x < θ      →  x := x + a   at t* = 1 + ln(x₁/θ)/k,
//   J = ∫₀ᵀ z dt + z(T)²,  T = 2.5 (one crossing of θ before T).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/input.hpp"
#include "costate/ode/integrate.hpp"

namespace {

namespace fs = std::filesystem;
using namespace costate;

const char* kDaeWithEvents = R"yaml(model:
  states: [x]
  equations: {x: "-k*x"}
  algebraic: {z: "z - c*x"}
parameters: {k: 0.8, c: 1.5, a: 0.5, theta: 0.6}
initial_state: {x: 2.0, z: 0.0}
events:
  - {name: kick, trigger: "t >= 1", assign: {x: "x + a"}}
  - {name: floor, trigger: "x < theta", assign: {x: "x + a"}}
time: {end: 2.5, outputs: [0.5, 1.5, 2.5]}
integrator: {method: idas, rtol: 1.0e-10, atol: 1.0e-12}
objective: {integral: "z", terminal: "z^2"}
sensitivity: {method: idas_forward}
)yaml";

constexpr double kT = 2.5;

/// x(t) in closed form at parameters q = (k, c, a, θ) and x(0) = x0.
double x_exact(double t, const std::vector<double>& q, double x0) {
  const double k = q[0], a = q[2], th = q[3];
  if (t < 1.0) return x0 * std::exp(-k * t);
  const double x1 = x0 * std::exp(-k) + a, ts = 1.0 + std::log(x1 / th) / k;
  if (t < ts) return x1 * std::exp(-k * (t - 1.0));
  return (th + a) * std::exp(-k * (t - ts));
}

/// J in closed form (the three stretches' integrals of z = c x, and z(T)²).
double J_exact(const std::vector<double>& q, double x0) {
  const double k = q[0], c = q[1], a = q[2], th = q[3];
  const double x1 = x0 * std::exp(-k) + a, ts = 1.0 + std::log(x1 / th) / k, xs = th + a;
  const double integral = c * x0 * (1.0 - std::exp(-k)) / k +
                          c * x1 * (1.0 - std::exp(-k * (ts - 1.0))) / k +
                          c * xs * (1.0 - std::exp(-k * (kT - ts))) / k;
  const double zT = c * xs * std::exp(-k * (kT - ts));
  return integral + zT * zT;
}

/// dJ/d(k, c, a, θ, x0) by central differences of the closed form: step
/// 1e-6 relative, truncation ~1e-12 and round-off ~1e-10 relative.
std::vector<double> dJ_exact(const std::vector<double>& q, double x0) {
  std::vector<double> g;
  for (std::size_t i = 0; i <= q.size(); ++i) {
    std::vector<double> qp = q, qm = q;
    double xp = x0, xm = x0;
    const double h = 1e-6 * (i < q.size() ? q[i] : x0);
    if (i < q.size()) {
      qp[i] += h;
      qm[i] -= h;
    } else {
      xp += h;
      xm -= h;
    }
    g.push_back((J_exact(qp, xp) - J_exact(qm, xm)) / (2.0 * h));
  }
  return g;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

/// IDAS at rtol 1e-10: global error ~100 rtol, the roots located to IDAS'
/// root tolerance (~100 ε (|t| + |h|)): states and gradients 1e-8 relative.
constexpr double kIdasClosedFormRelTol = 1e-8;
/// IDAS against the native bdf (its discrete adjoint, rtol 1e-10): two
/// solutions, each within ~100 rtol of the exact one, differ by up to the
/// sum: 1e-8 relative (measured: 3e-10 at most).
constexpr double kIdasVsBdfRelTol = 1e-8;

class IdasEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("costate_idas_events_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  io::RunConfig load(const std::vector<std::string>& overrides = {}) {
    const fs::path p = dir_ / "input.yaml";
    std::ofstream(p) << kDaeWithEvents;
    return io::load_run_config(p.string(), overrides);
  }
  fs::path dir_;
};

TEST_F(IdasEvents, RootFindingAndConsistentRestartsGiveTheClosedFormTrajectory) {
  const io::RunConfig cfg = load();
  const ode::Solution s = io::visit_model(cfg, [&](const auto& model) {
    ode::Problem<std::decay_t<decltype(model)>> pr{model, cfg.initial_state, cfg.parameters,
                                                   {cfg.t_start, cfg.t_end}, cfg.output_times};
    return ode::integrate(pr, cfg.integrator);
  });
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  EXPECT_EQ(s.summary.events, 2);
  ASSERT_EQ(s.n_outputs(), 3u);
  for (std::size_t j = 0; j < s.n_outputs(); ++j) {
    const double x = x_exact(s.t[j], cfg.parameters, 2.0);
    EXPECT_LT(rel(s.state(j)[0], x), kIdasClosedFormRelTol) << "t = " << s.t[j];
    // The constraint after each update: z re-solved, not left at c x⁻.
    EXPECT_LT(rel(s.state(j)[1], cfg.parameters[1] * x), kIdasClosedFormRelTol) << "t = " << s.t[j];
  }
}

TEST_F(IdasEvents, ForwardAndAdjointCarryTheEventJumpsToTheClosedFormGradient) {
  const std::vector<double> q{0.8, 1.5, 0.5, 0.6};
  const std::vector<double> exact = dJ_exact(q, 2.0);
  std::vector<std::vector<double>> by_method;
  for (const std::string method : {"idas_forward", "idas_adjoint"}) {
    SCOPED_TRACE(method);
    const io::RunConfig cfg = load({"sensitivity.method=" + method});
    const io::FileGradient g = io::file_gradient(cfg, cfg.parameters, cfg.initial_state);
    EXPECT_EQ(g.result.summary.events, 2);
    EXPECT_LT(rel(g.result.objective, J_exact(q, 2.0)), kIdasClosedFormRelTol);
    for (std::size_t j = 0; j < q.size(); ++j)
      EXPECT_LT(rel(g.gradient_p[j], exact[j]), kIdasClosedFormRelTol) << cfg.parameter_names[j];
    EXPECT_LT(rel(g.result.wrt_initial_state[0], exact[4]), kIdasClosedFormRelTol) << "x(t0)";
    // z(0) is a guess the consistent initialisation replaces.
    EXPECT_EQ(g.result.wrt_initial_state[1], 0.0);
    std::vector<double> all = g.gradient_p;
    all.push_back(g.result.wrt_initial_state[0]);
    by_method.push_back(all);
  }
  // The native bdf's discrete adjoint of the same file.
  const io::RunConfig bdf =
      load({"integrator.method=bdf", "sensitivity.method=discrete_adjoint"});
  const io::FileGradient gb = io::file_gradient(bdf, bdf.parameters, bdf.initial_state);
  EXPECT_EQ(gb.result.summary.events, 2);
  for (const auto& g : by_method)
    for (std::size_t j = 0; j < q.size(); ++j)
      EXPECT_LT(rel(g[j], gb.gradient_p[j]), kIdasVsBdfRelTol) << bdf.parameter_names[j];
  EXPECT_LT(rel(by_method[0][4], gb.result.wrt_initial_state[0]), kIdasVsBdfRelTol);
}

}  // namespace
