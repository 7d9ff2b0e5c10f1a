// Second-order ODE sensitivities (ode::hessian_vector, ode::hessian):
// H v against central differences of adjoint gradients on the same replayed
// steps, the gradient part equal to ode::gradient's bits, the Hessian against
// ad::hessian of the whole taped RK4 loop, symmetry, the second-order Taylor
// test (remainder order ≥ 2.9), and bitwise checkpoint invariance — on
// Lotka–Volterra with observations, Van der Pol and FitzHugh–Nagumo; and
// through the adaptive implicit sdirk3 and bdf (replayed steps and orders)
// on stiff Van der Pol (μ = 1e3) and Lotka–Volterra with observations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "costate/ad/drivers.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"
#include "support/lotka_volterra.hpp"
#include "support/relative_error.hpp"
#include "support/run_costate.hpp"  // scratch_dir

namespace {

using namespace costate::ode;

/// H v vs differences of the adjoint gradient along v: central differences
/// with steps h and h/2 combined by Richardson extrapolation,
/// (4 D(h/2) − D(h)) / 3, whose truncation error is O(h⁴) (plain central
/// differences were measured 1e-6 … 5e-5 off on these oscillating problems:
/// their fourth derivatives are large). With h = 2e-3 (v of size ~1) the
/// truncation is ~1e-10 and the round-off of the gradients ~1e-13 |∇J| / h
/// ≈ 1e-10 relative; 1e-7 (of max |H v|) leaves margin.
constexpr double kFdRelTol = 1e-7;
constexpr double kFdStep = 2e-3;
/// The Hessian from forward over adjoint vs ad::hessian of the taped loop:
/// the same discrete objective in a different order of operations; round-off
/// over 10³ steps stays below 1e-11 relative.
constexpr double kTapeRelTol = 1e-11;
/// H_ij and H_ji come from different sweeps (columns j and i): they agree to
/// the round-off of a sweep, measured ≈ 1e-14; 1e-11 relative leaves margin.
constexpr double kSymmetryTol = 1e-11;
/// Second-order Taylor test: the remainder J(p+hv) − J − h∇J·v − ½h²vᵀHv
/// is O(h³) when H is right (O(h²) when it is not).
constexpr double kRequiredOrder = 2.9;

using costate::test::dot;
using costate::test::lv_problem;
using costate::test::max_abs;

/// Least squares against noisy-looking data at 10 times (one value missing).
LeastSquares lv_data() {
  LeastSquares ls;
  ls.n_states = 2;
  for (int k = 1; k <= 10; ++k) {
    const double t = 0.5 * k;
    ls.times.push_back(t);
    ls.data.push_back(1.0 + 0.5 * std::sin(1.3 * t));
    ls.data.push_back(k == 4 ? NAN : 0.8 + 0.4 * std::cos(0.9 * t));
  }
  return ls;
}

/// A terminal and a running cost that depend on the parameters (so the
/// objective's own second derivatives in p and the mixed ones enter).
struct MixedObjective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * (y[0] - 1.0) * (y[0] - 1.0) + 0.3 * p[0] * y[1] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[0] * (1.0 + 0.1 * t) + 0.05 * p[0] * p[0] * y[1]);
  }
};

/// Observations plus a running cost (FitzHugh–Nagumo's v and w).
struct ObservedAndRunning {
  LeastSquares ls;
  std::vector<double> observation_times() const { return ls.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return ls.observation<T>(k, y, p);
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T> p) const {
    return T(0.01 * p[3] * y[0] * y[0] + 0.02 * y[1] * y[1]);
  }
};

/// J on the plan `steps` (plain evaluation through ode::gradient's replay).
template <class M, class O>
double objective_at(const Problem<M>& pr, const O& obj, const std::vector<double>& p,
                    const std::vector<double>& y0, const IntegratorOptions& opt,
                    const StepPlan& steps) {
  Problem<M> q = pr;
  q.p = p;
  q.y0 = y0;
  return gradient(q, obj, DiscreteAdjoint{}, opt, steps).objective;
}

/// Richardson-extrapolated central differences of the adjoint gradient
/// (p then y0) along v, on the plan `steps` (times and bdf's orders).
template <class M, class O>
std::vector<double> fd_hv(const Problem<M>& pr, const O& obj, const HessianDirection& v,
                          const IntegratorOptions& opt, const StepPlan& steps,
                          double step = kFdStep) {
  auto at = [&](double s) {
    Problem<M> q = pr;
    for (std::size_t j = 0; j < q.p.size(); ++j) q.p[j] += s * v.parameters[j];
    if (!v.initial_state.empty())
      for (std::size_t i = 0; i < q.y0.size(); ++i) q.y0[i] += s * v.initial_state[i];
    const GradientResult g = gradient(q, obj, DiscreteAdjoint{}, opt, steps);
    std::vector<double> all = g.wrt_parameters;
    all.insert(all.end(), g.wrt_initial_state.begin(), g.wrt_initial_state.end());
    return all;
  };
  auto central = [&](double h) {
    const std::vector<double> a = at(h), b = at(-h);
    std::vector<double> d(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) d[i] = (a[i] - b[i]) / (2.0 * h);
    return d;
  };
  const std::vector<double> d1 = central(step), d2 = central(0.5 * step);
  std::vector<double> d(d1.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = (4.0 * d2[i] - d1[i]) / 3.0;
  return d;
}

/// H v (p then y0) from a result.
std::vector<double> hv_all(const HessianVectorResult& r) {
  std::vector<double> all = r.hv_wrt_parameters;
  all.insert(all.end(), r.hv_wrt_initial_state.begin(), r.hv_wrt_initial_state.end());
  return all;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double scale = std::max(max_abs(want), 1e-300);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::abs(got[i] - want[i]), rtol * scale)
        << what << " [" << i << "]: " << got[i] << " vs " << want[i];
}

/// Second-order Taylor test along v in (p, y0): residuals of
/// J(x + hv) − J − h ∇J·v − ½ h² vᵀHv for h = h0 / 2^k, stopping at the
/// round-off floor (floor_rel |J|, default 64 ε). Returns the least-squares slope of
/// log r against log h and the smallest observed order.
template <class M, class O>
std::pair<double, double> taylor2(const Problem<M>& pr, const O& obj, const HessianDirection& v,
                                  const IntegratorOptions& opt, const HessianVectorResult& r,
                                  double h0, double floor_rel = 64.0 * 2.2e-16) {
  const double J0 = r.objective;
  double dJ = dot(r.gradient_wrt_parameters, v.parameters);
  double vHv = dot(r.hv_wrt_parameters, v.parameters);
  if (!v.initial_state.empty()) {
    dJ += dot(r.gradient_wrt_initial_state, v.initial_state);
    vHv += dot(r.hv_wrt_initial_state, v.initial_state);
  }
  std::vector<double> hs, res;
  for (int k = 0; k < 7; ++k) {
    const double h = h0 / std::pow(2.0, k);
    std::vector<double> p = pr.p, y0 = pr.y0;
    for (std::size_t j = 0; j < p.size(); ++j) p[j] += h * v.parameters[j];
    if (!v.initial_state.empty())
      for (std::size_t i = 0; i < y0.size(); ++i) y0[i] += h * v.initial_state[i];
    const double Jh = objective_at(pr, obj, p, y0, opt, r.steps);
    const double rem = std::abs(Jh - J0 - h * dJ - 0.5 * h * h * vHv);
    if (rem <= floor_rel * std::abs(J0)) break;
    hs.push_back(h);
    res.push_back(rem);
  }
  EXPECT_GE(hs.size(), 4u) << "the remainder reached round-off too early: raise h0";
  double sx = 0, sy = 0, sxx = 0, sxy = 0, min_order = 1e300;
  for (std::size_t k = 0; k < hs.size(); ++k) {
    const double lx = std::log(hs[k]), ly = std::log(res[k]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
    if (k > 0) min_order = std::min(min_order, std::log2(res[k - 1] / res[k]));
  }
  const double m = static_cast<double>(hs.size());
  return {(m * sxy - sx * sy) / (m * sxx - sx * sx), min_order};
}

/// A terminal cost for the comparison with the taped loop.
struct Terminal {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[0] * y[1] + 0.1 * p[1] * y[0]);
  }
};

// ------------------------------------------------------------------ tests

TEST(HessianVector, LotkaVolterraObservationsAgainstFiniteDifferences) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  const IntegratorOptions opt{.method = Method::RK4, .dt = 0.01};
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.1}};
  const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, opt);
  EXPECT_EQ(r.steps.times().size(), 501u);
  expect_close(hv_all(r), fd_hv(pr, obj, v, opt, r.steps), kFdRelTol, "LV H v");

  // The value parts are ode::gradient's computation: the same bits.
  const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, opt);
  EXPECT_EQ(r.objective, g.objective);
  EXPECT_EQ(r.gradient_wrt_parameters, g.wrt_parameters);
  EXPECT_EQ(r.gradient_wrt_initial_state, g.wrt_initial_state);
  // ε-part of J = ∇J · v (the same sweep; round-off of a 6-term dot product).
  const double dJ = dot(g.wrt_parameters, v.parameters) + dot(g.wrt_initial_state, v.initial_state);
  EXPECT_NEAR(r.directional_derivative, dJ, 1e-12 * std::abs(dJ));
}

TEST(HessianVector, LotkaVolterraTaylorOrderThree) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  const IntegratorOptions opt{.method = Method::RK4, .dt = 0.01};
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.1}};
  const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, opt);
  const auto [fitted, min_order] = taylor2(pr, obj, v, opt, r, 0.02);
  EXPECT_GE(fitted, kRequiredOrder);
  EXPECT_GE(min_order, kRequiredOrder - 0.2);  // single halvings are noisier than the fit
}

TEST(Hessian, LotkaVolterraMatchesTapedLoopAndIsSymmetric) {
  // J = terminal cost after 200 RK4 steps; the reference records the whole
  // loop on Reverse<Dual<double,1>> (ad::hessian) — the same discrete J.
  const auto pr = Problem<LotkaVolterra>{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 2.0}};
  const double dt = 0.01;
  const int steps = 200;
  auto loop = [&](const auto& p) {
    using T = std::decay_t<decltype(p[0])>;
    std::vector<T> y{T(1.0), T(1.0)}, k1(2), k2(2), k3(2), k4(2), s(2);
    auto f = [&](const std::vector<T>& u, std::vector<T>& d) {
      LotkaVolterra{}.rhs<T>(0.0, std::span<const T>(u), std::span<const T>(p.data(), 4),
                             std::span<T>(d));
    };
    for (int n = 0; n < steps; ++n) {
      f(y, k1);
      for (int i = 0; i < 2; ++i) s[i] = y[i] + 0.5 * dt * k1[i];
      f(s, k2);
      for (int i = 0; i < 2; ++i) s[i] = y[i] + 0.5 * dt * k2[i];
      f(s, k3);
      for (int i = 0; i < 2; ++i) s[i] = y[i] + dt * k3[i];
      f(s, k4);
      for (int i = 0; i < 2; ++i)
        y[i] = y[i] + (dt / 6.0) * k1[i] + (dt / 3.0) * k2[i] + (dt / 3.0) * k3[i] +
               (dt / 6.0) * k4[i];
    }
    T J = Terminal{}.template terminal<T>(std::span<const T>(y), std::span<const T>(p.data(), 4));
    return J;
  };
  const Eigen::MatrixXd ref = costate::ad::hessian(loop, pr.p);
  const HessianResult H =
      hessian(pr, Terminal{}, DiscreteAdjoint{}, {.method = Method::RK4, .dt = dt});
  ASSERT_EQ(H.hessian.rows(), 4);
  EXPECT_EQ(H.products, 4);
  const double scale = ref.cwiseAbs().maxCoeff();
  EXPECT_LE((H.hessian - ref).cwiseAbs().maxCoeff(), kTapeRelTol * scale)
      << "forward over adjoint\n" << H.hessian << "\ntaped loop\n" << ref;
  EXPECT_LE(H.asymmetry, kSymmetryTol);
  EXPECT_GT(scale, 0.0);
}

TEST(HessianVector, VanDerPolDopri5WithInitialState) {
  // Adaptive dopri5: its steps are chosen once and replayed by the HVP and
  // by the finite differences.
  const Problem<VanDerPol> pr{VanDerPol{}, {2.0, 0.0}, {1.0}, {0.0, 4.0}};
  const MixedObjective obj;
  const IntegratorOptions opt{.method = Method::Dopri5, .rtol = 1e-8, .atol = 1e-10};
  const HessianDirection v{{1.0}, {0.3, -0.6}};
  const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, opt);
  EXPECT_GT(r.steps.times().size(), 20u);
  expect_close(hv_all(r), fd_hv(pr, obj, v, opt, r.steps), kFdRelTol, "VdP H v");
  const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, opt);
  EXPECT_EQ(g.steps.times(), r.steps.times());
  // The HVP's gradient (its Dual sweep) and ode::gradient's (the compiled
  // explicit scheme on ode::System, issue 14) are the same discrete
  // gradient summed in another order: round-off only.
  constexpr double kSameGradientTol = 1e-13;
  expect_close(r.gradient_wrt_parameters, g.wrt_parameters, kSameGradientTol, "VdP gradient");
  const auto [fitted, min_order] = taylor2(pr, obj, v, opt, r, 0.05);
  EXPECT_GE(fitted, kRequiredOrder);
  (void)min_order;
}

TEST(Hessian, FitzHughNagumoEulerSymmetricAndTaylor) {
  const Problem<FitzHughNagumo> pr{FitzHughNagumo{}, {-1.0, 1.0}, {0.7, 0.8, 12.5, 0.5}, {0.0, 20.0}};
  ObservedAndRunning obj;
  obj.ls.n_states = 2;
  for (int k = 1; k <= 8; ++k) {
    obj.ls.times.push_back(2.5 * k);
    obj.ls.data.push_back(1.5 * std::sin(0.3 * k));
    obj.ls.data.push_back(0.5 + 0.2 * k);
  }
  const IntegratorOptions opt{.method = Method::ExplicitEuler, .dt = 0.005};
  const HessianResult H = hessian(pr, obj, DiscreteAdjoint{}, opt);
  EXPECT_LE(H.asymmetry, kSymmetryTol);
  // Each column against differences of gradients.
  for (std::size_t j = 0; j < 4; ++j) {
    HessianDirection e{std::vector<double>(4, 0.0), {}};
    e.parameters[j] = 1.0;
    std::vector<double> fd = fd_hv(pr, obj, e, opt, H.steps);
    fd.resize(4);
    std::vector<double> col(4);
    for (Eigen::Index i = 0; i < 4; ++i) col[static_cast<std::size_t>(i)] = H.hessian(i, static_cast<Eigen::Index>(j));
    expect_close(col, fd, kFdRelTol, "FHN column");
  }
  // vᵀHv from the matrix in the Taylor test along a mixed direction.
  const HessianDirection v{{0.1, -0.2, 1.0, 0.3}, {}};
  const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, opt, H.steps);
  Eigen::VectorXd vv = Eigen::Map<const Eigen::VectorXd>(v.parameters.data(), 4);
  const Eigen::VectorXd Hv = H.hessian * vv;
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(r.hv_wrt_parameters[static_cast<std::size_t>(i)], Hv[i], 1e-12 * Hv.cwiseAbs().maxCoeff());
  const auto [fitted, min_order] = taylor2(pr, obj, v, opt, r, 0.1);
  EXPECT_GE(fitted, kRequiredOrder);
  (void)min_order;
}

TEST(HessianVector, CheckpointSchedulesGiveTheSameBits) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  const IntegratorOptions opt{.method = Method::Dopri5, .rtol = 1e-7, .atol = 1e-9};
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.1}};
  const HessianVectorResult all = hessian_vector(pr, obj, v, DiscreteAdjoint{StoreAll{}}, opt);
  const std::string disk =
      (costate::test::scratch_dir("costate_hessian_test_ml") / "disk.h5").string();
  const std::vector<Checkpointing> schedules{Binomial{.snapshots = 4}, Uniform{.every = 7},
                                             Online{.snapshots = 5},
                                             Multilevel{.ram = 2, .disk = 2, .path = disk}};
  for (const Checkpointing& c : schedules) {
    const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{c}, opt);
    EXPECT_EQ(r.objective, all.objective) << to_string(c);
    EXPECT_EQ(r.gradient_wrt_parameters, all.gradient_wrt_parameters) << to_string(c);
    EXPECT_EQ(r.hv_wrt_parameters, all.hv_wrt_parameters) << to_string(c);
    EXPECT_EQ(r.hv_wrt_initial_state, all.hv_wrt_initial_state) << to_string(c);
    EXPECT_GT(r.checkpoints.recomputed_steps, 0) << to_string(c);
    EXPECT_LT(r.checkpoints.peak_snapshots, all.checkpoints.peak_snapshots) << to_string(c);
  }
}

TEST(HessianVector, ThetaMethodsAgainstFiniteDifferencesAndTaylor) {
  // The implicit θ-methods: the tangent and the adjoint's derivative are
  // linear solves with I − hθ J (DualThetaScheme). Lotka–Volterra with
  // observations under Crank–Nicolson; Van der Pol with a mixed objective
  // under backward Euler; each with an initial-state direction.
  const IntegratorOptions cn{.method = Method::CrankNicolson, .dt = 0.01, .newton_tol = 1e-13};
  const IntegratorOptions be{.method = Method::BackwardEuler, .dt = 0.01, .newton_tol = 1e-13};
  /// The value parts form the same products as ode::gradient's θ adjoint
  /// from vector–Jacobian products instead of dense Jacobians: round-off
  /// over 500 steps, 1e-11 relative.
  constexpr double kThetaGradientTol = 1e-11;
  {
    const auto pr = lv_problem();
    const LeastSquares obj = lv_data();
    const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.1}};
    const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, cn);
    expect_close(hv_all(r), fd_hv(pr, obj, v, cn, r.steps), kFdRelTol, "LV CN H v");
    const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, cn);
    expect_close(r.gradient_wrt_parameters, g.wrt_parameters, kThetaGradientTol, "LV CN gradient");
    const auto [fitted, min_order] = taylor2(pr, obj, v, cn, r, 0.02);
    EXPECT_GE(fitted, kRequiredOrder) << "LV CN";
    (void)min_order;
    // Checkpoint invariance.
    const HessianVectorResult b =
        hessian_vector(pr, obj, v, DiscreteAdjoint{Binomial{.snapshots = 5}}, cn);
    EXPECT_EQ(b.hv_wrt_parameters, r.hv_wrt_parameters);
    EXPECT_EQ(b.hv_wrt_initial_state, r.hv_wrt_initial_state);
    EXPECT_GT(b.checkpoints.recomputed_steps, 0);
  }
  {
    const Problem<VanDerPol> pr{VanDerPol{}, {2.0, 0.0}, {1.0}, {0.0, 3.0}};
    const MixedObjective obj;
    const HessianDirection v{{1.0}, {0.3, -0.6}};
    const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, be);
    expect_close(hv_all(r), fd_hv(pr, obj, v, be, r.steps), kFdRelTol, "VdP BE H v");
    const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, be);
    expect_close(r.gradient_wrt_parameters, g.wrt_parameters, kThetaGradientTol, "VdP BE gradient");
    const auto [fitted, min_order] = taylor2(pr, obj, v, be, r, 0.05);
    EXPECT_GE(fitted, kRequiredOrder) << "VdP BE";
    (void)min_order;
  }
}

TEST(HessianVector, RejectsWhatItDoesNotSupport) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  const HessianDirection v{{1.0, 0.0, 0.0, 0.0}, {}};
  auto message = [&](auto&& call) {
    try {
      call();
    } catch (const costate::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (Method m : {Method::CvodesBdf, Method::CvodesAdams}) {
    const std::string msg = message([&] {
      hessian_vector(pr, obj, v, DiscreteAdjoint{}, {.method = m, .dt = 0.01});
    });
    EXPECT_NE(msg.find("integrator.method = " + to_string(m) + " is not supported"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(supports(SensitivityKind::DiscreteAdjoint, m, 2).message), std::string::npos)
        << msg;
  }
  // Replayed bdf steps need their orders.
  const StepPlan times(std::vector<double>{0.0, 2.0, 5.0});
  const std::string orders = message([&] {
    hessian_vector(pr, obj, v, DiscreteAdjoint{}, {.method = Method::Bdf}, times);
  });
  EXPECT_NE(orders.find("replaying bdf steps needs their orders"), std::string::npos) << orders;
  const std::string fwd = message([&] {
    hessian_vector(pr, obj, v, Forward{}, {.method = Method::RK4, .dt = 0.01});
  });
  EXPECT_NE(fwd.find("sensitivity.method = forward with integrator.method = rk4 is not supported"),
            std::string::npos)
      << fwd;
  EXPECT_NE(fwd.find(supports(SensitivityKind::Forward, Method::RK4, 2).message), std::string::npos)
      << fwd;
  const std::string size = message([&] {
    hessian_vector(pr, obj, {{1.0, 2.0}, {}}, DiscreteAdjoint{}, {.method = Method::RK4, .dt = 0.01});
  });
  EXPECT_NE(size.find("2 parameter entries; the problem has 4"), std::string::npos) << size;
}

// ------------------------------------------- adaptive implicit: sdirk3, bdf

/// sdirk3/bdf: the value parts form ode::gradient's products from
/// vector–Jacobian products instead of dense Jacobians (and bdf's f_pᵀ(hβm)
/// instead of hβ f_pᵀm): round-off over a few hundred steps, measured
/// ≤ 2e-15 relative here; 1e-11 leaves margin for other compilers/BLAS.
constexpr double kImplicitGradientTol = 1e-11;
/// H v vs Richardson differences of gradients on the replayed steps and
/// orders: the replayed objective is smooth only up to its Newton solves'
/// stopping test (newton_tol 1e-13 and 1e-6 of the weighted error
/// tolerance), so the gradients carry noise of ~2e-11 relative that the
/// differences divide by the step. Measured max relative errors: stiff
/// Van der Pol 2e-11 (both); Lotka–Volterra bdf 9e-10, sdirk3 9e-9 (growing
/// as 1/h when h is reduced: noise, not truncation). 1e-7 as for the
/// explicit methods leaves 10×.
constexpr double kImplicitFdRelTol = kFdRelTol;
/// The Taylor remainder of the replayed implicit objective stops falling at
/// the noise of its replayed Newton solves: measured 1.5e-13 on J ≈ 4
/// (stiff Van der Pol, newton_tol 1e-13), ~4e-14 |J|; the fit stops at
/// 1e-12 |J|, 25× above it.
constexpr double kImplicitTaylorFloor = 1e-12;

/// Van der Pol at μ = 1e3 over the initial fast transient and part of the
/// slow phase (stiffness ratio ~1e3·h): the last state and an integral.
struct VdpStiffObjective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[0] + 1e-3 * p[0] * y[1]);
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(0.5 * y[0] * y[1]);
  }
};

const Problem<VanDerPol> kStiffVdp{VanDerPol{}, {2.0, -0.6666}, {1000.0}, {0.0, 0.5}};

TEST(HessianVector, AdaptiveImplicitStiffVanDerPol) {
  for (Method m : {Method::Sdirk3, Method::Bdf}) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13};
    // μ moves by 50 per unit of v, the initial state by O(1).
    const HessianDirection v{{50.0}, {0.3, -0.6}};
    const HessianVectorResult r =
        hessian_vector(kStiffVdp, VdpStiffObjective{}, v, DiscreteAdjoint{}, opt);
    const GradientResult g = gradient(kStiffVdp, VdpStiffObjective{}, DiscreteAdjoint{}, opt);
    // The same adaptive run chose the same steps (and orders).
    EXPECT_EQ(r.steps.times(), g.steps.times());
    EXPECT_EQ(r.steps.orders(), g.steps.orders());
    EXPECT_GT(r.steps.times().size(), 20u);
    EXPECT_EQ(r.steps.orders().empty(), m == Method::Sdirk3);
    EXPECT_NEAR(r.objective, g.objective, kImplicitGradientTol * std::abs(g.objective));
    expect_close(r.gradient_wrt_parameters, g.wrt_parameters, kImplicitGradientTol, "VdP grad p");
    expect_close(r.gradient_wrt_initial_state, g.wrt_initial_state, kImplicitGradientTol,
                 "VdP grad y0");
    expect_close(hv_all(r),
                 fd_hv(kStiffVdp, VdpStiffObjective{}, v, opt, r.steps),
                 kImplicitFdRelTol, "stiff VdP H v");
    const auto [fitted, min_order] =
        taylor2(kStiffVdp, VdpStiffObjective{}, v, opt, r, 0.2, kImplicitTaylorFloor);
    EXPECT_GE(fitted, kRequiredOrder);
    (void)min_order;
  }
}

TEST(HessianVector, AdaptiveImplicitLotkaVolterraObservations) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  for (Method m : {Method::Sdirk3, Method::Bdf}) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13};
    const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.1}};
    const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{}, opt);
    const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, opt);
    EXPECT_EQ(r.steps.times(), g.steps.times());
    EXPECT_NEAR(r.objective, g.objective, kImplicitGradientTol * std::abs(g.objective));
    expect_close(r.gradient_wrt_parameters, g.wrt_parameters, kImplicitGradientTol, "LV grad p");
    expect_close(r.gradient_wrt_initial_state, g.wrt_initial_state, kImplicitGradientTol,
                 "LV grad y0");
    // ε-part of J = ∇J · v (round-off of the sweep, as above).
    const double dJ =
        dot(g.wrt_parameters, v.parameters) + dot(g.wrt_initial_state, v.initial_state);
    EXPECT_NEAR(r.directional_derivative, dJ, kImplicitGradientTol * std::abs(dJ));
    expect_close(hv_all(r), fd_hv(pr, obj, v, opt, r.steps),
                 kImplicitFdRelTol, "LV H v");
    const auto [fitted, min_order] = taylor2(pr, obj, v, opt, r, 0.02);
    EXPECT_GE(fitted, kRequiredOrder);
    (void)min_order;
    // Replaying the gradient's steps (and orders) gives the same bits.
    const HessianVectorResult rep =
        hessian_vector(pr, obj, v, DiscreteAdjoint{}, opt, g.steps);
    EXPECT_EQ(rep.hv_wrt_parameters, r.hv_wrt_parameters);
    EXPECT_EQ(rep.hv_wrt_initial_state, r.hv_wrt_initial_state);
  }
}

TEST(Hessian, AdaptiveImplicitSymmetricAndColumnsAgainstDifferences) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  for (Method m : {Method::Sdirk3, Method::Bdf}) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13};
    const HessianResult H = hessian(pr, obj, DiscreteAdjoint{}, opt);
    ASSERT_EQ(H.hessian.rows(), 4);
    EXPECT_GT(H.hessian.cwiseAbs().maxCoeff(), 0.0);
    EXPECT_LE(H.asymmetry, kSymmetryTol);
    EXPECT_EQ(H.steps.orders().empty(), m == Method::Sdirk3);
    // Column 2 against differences of gradients on the same steps.
    HessianDirection e{std::vector<double>(4, 0.0), {}};
    e.parameters[2] = 1.0;
    std::vector<double> fd = fd_hv(pr, obj, e, opt, H.steps);
    fd.resize(4);
    std::vector<double> col(4);
    for (Eigen::Index i = 0; i < 4; ++i) col[static_cast<std::size_t>(i)] = H.hessian(i, 2);
    expect_close(col, fd, kImplicitFdRelTol, "LV column 2");
  }
}

TEST(HessianVector, AdaptiveImplicitCheckpointSchedulesGiveTheSameBits) {
  const std::string disk =
      (costate::test::scratch_dir("costate_hessian_implicit_ml") / "disk.h5").string();
  const std::vector<Checkpointing> schedules{Binomial{.snapshots = 4}, Online{.snapshots = 5},
                                             Multilevel{.ram = 2, .disk = 2, .path = disk}};
  for (Method m : {Method::Sdirk3, Method::Bdf}) {
    SCOPED_TRACE(to_string(m));
    const IntegratorOptions opt{.method = m, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13};
    const HessianDirection v{{50.0}, {0.3, -0.6}};
    const HessianVectorResult all =
        hessian_vector(kStiffVdp, VdpStiffObjective{}, v, DiscreteAdjoint{StoreAll{}}, opt);
    for (const Checkpointing& c : schedules) {
      const HessianVectorResult r =
          hessian_vector(kStiffVdp, VdpStiffObjective{}, v, DiscreteAdjoint{c}, opt);
      EXPECT_EQ(r.objective, all.objective) << to_string(c);
      EXPECT_EQ(r.gradient_wrt_parameters, all.gradient_wrt_parameters) << to_string(c);
      EXPECT_EQ(r.gradient_wrt_initial_state, all.gradient_wrt_initial_state) << to_string(c);
      EXPECT_EQ(r.hv_wrt_parameters, all.hv_wrt_parameters) << to_string(c);
      EXPECT_EQ(r.hv_wrt_initial_state, all.hv_wrt_initial_state) << to_string(c);
      EXPECT_GT(r.checkpoints.recomputed_steps, 0) << to_string(c);
      EXPECT_LT(r.checkpoints.peak_snapshots, all.checkpoints.peak_snapshots) << to_string(c);
    }
  }
}


// ------------------------------------------------- every native stepper
// (the compiled schemes' forward over adjoint, scheme.hpp's second order)

/// Every native stepper, fixed or adaptive, on Lotka–Volterra with
/// observations: H v against differences of gradients, the second-order
/// Taylor test, the gradient part against ode::gradient, and every
/// checkpoint schedule giving StoreAll's bits.
TEST(HessianVector, EveryNativeStepperLotkaVolterra) {
  const auto pr = lv_problem();
  const LeastSquares obj = lv_data();
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.1}};
  /// The value parts of the implicit schemes' second-order steps form the
  /// gradient's products in the gradient's order from the same Jacobians;
  /// measured equal or within a few ulps: 1e-12 relative.
  constexpr double kGradientPartTol = 1e-12;
  const std::string disk =
      (costate::test::scratch_dir("costate_hessian_every_ml") / "disk.h5").string();
  const std::vector<Checkpointing> schedules{Binomial{.snapshots = 3}, Uniform{.every = 9},
                                             Online{.snapshots = 4},
                                             Multilevel{.ram = 2, .disk = 2, .path = disk}};
  const std::vector<IntegratorOptions> steppers{
      {.method = Method::ExplicitEuler, .dt = 0.005},
      {.method = Method::RK4, .dt = 0.02},
      {.method = Method::Dopri5, .rtol = 1e-7, .atol = 1e-9},
      {.method = Method::BackwardEuler, .dt = 0.01, .newton_tol = 1e-13},
      {.method = Method::CrankNicolson, .dt = 0.01, .newton_tol = 1e-13},
      {.method = Method::Sdirk3, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13},
      {.method = Method::Bdf, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13}};
  for (const IntegratorOptions& opt : steppers) {
    SCOPED_TRACE(to_string(opt.method));
    const HessianVectorResult r = hessian_vector(pr, obj, v, DiscreteAdjoint{StoreAll{}}, opt);
    expect_close(hv_all(r), fd_hv(pr, obj, v, opt, r.steps), kFdRelTol,
                 "H v");
    const auto [fitted, min_order] = taylor2(pr, obj, v, opt, r, 0.02);
    EXPECT_GE(fitted, kRequiredOrder);
    (void)min_order;
    const GradientResult g = gradient(pr, obj, DiscreteAdjoint{}, opt);
    EXPECT_EQ(r.steps.times(), g.steps.times());
    EXPECT_NEAR(r.objective, g.objective, kGradientPartTol * std::abs(g.objective));
    expect_close(r.gradient_wrt_parameters, g.wrt_parameters, kGradientPartTol, "grad p");
    expect_close(r.gradient_wrt_initial_state, g.wrt_initial_state, kGradientPartTol, "grad y0");
    for (const Checkpointing& c : schedules) {
      const HessianVectorResult b = hessian_vector(pr, obj, v, DiscreteAdjoint{c}, opt);
      EXPECT_EQ(b.objective, r.objective) << to_string(c);
      EXPECT_EQ(b.gradient_wrt_parameters, r.gradient_wrt_parameters) << to_string(c);
      EXPECT_EQ(b.gradient_wrt_initial_state, r.gradient_wrt_initial_state) << to_string(c);
      EXPECT_EQ(b.hv_wrt_parameters, r.hv_wrt_parameters) << to_string(c);
      EXPECT_EQ(b.hv_wrt_initial_state, r.hv_wrt_initial_state) << to_string(c);
      EXPECT_EQ(b.directional_derivative, r.directional_derivative) << to_string(c);
      EXPECT_GT(b.checkpoints.recomputed_steps, 0) << to_string(c);
    }
  }
}

/// The implicit steppers on stiff Van der Pol (μ = 1e3): the fixed-step θ
/// methods (h μ = 2.5: far outside any explicit method's stability region)
/// and the adaptive ones, against differences of gradients, Taylor, and
/// two schedules' bits.
TEST(HessianVector, EveryImplicitStepperStiffVanDerPol) {
  const HessianDirection v{{50.0}, {0.3, -0.6}};
  const std::vector<IntegratorOptions> steppers{
      {.method = Method::BackwardEuler, .dt = 2.5e-3, .newton_tol = 1e-13},
      {.method = Method::CrankNicolson, .dt = 2.5e-3, .newton_tol = 1e-13},
      {.method = Method::Sdirk3, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13},
      {.method = Method::Bdf, .rtol = 1e-6, .atol = 1e-8, .newton_tol = 1e-13}};
  for (const IntegratorOptions& opt : steppers) {
    SCOPED_TRACE(to_string(opt.method));
    const HessianVectorResult r =
        hessian_vector(kStiffVdp, VdpStiffObjective{}, v, DiscreteAdjoint{}, opt);
    expect_close(hv_all(r),
                 fd_hv(kStiffVdp, VdpStiffObjective{}, v, opt, r.steps),
                 kImplicitFdRelTol, "stiff VdP H v");
    const auto [fitted, min_order] =
        taylor2(kStiffVdp, VdpStiffObjective{}, v, opt, r, 0.2, kImplicitTaylorFloor);
    EXPECT_GE(fitted, kRequiredOrder);
    (void)min_order;
    for (const Checkpointing& c : {Checkpointing{Binomial{.snapshots = 3}},
                                   Checkpointing{Uniform{.every = 11}}}) {
      const HessianVectorResult b =
          hessian_vector(kStiffVdp, VdpStiffObjective{}, v, DiscreteAdjoint{c}, opt);
      EXPECT_EQ(b.hv_wrt_parameters, r.hv_wrt_parameters) << to_string(c);
      EXPECT_EQ(b.hv_wrt_initial_state, r.hv_wrt_initial_state) << to_string(c);
      EXPECT_EQ(b.gradient_wrt_parameters, r.gradient_wrt_parameters) << to_string(c);
    }
  }
}

/// A weighted terminal ½‖y‖² with a parameter term (the Brusselator test).
struct WeightedFinal {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    T s = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i)
      s = T(s + 0.5 * y[i] * y[i] * (1.0 + 0.01 * double(i)));
    return T(s + 0.1 * p[0] * y[0] * y[1]);
  }
};

/// A model past dense_max (Brusselator, 2 × 10 states, 3 parameters: the
/// tape strategy of SecondOrderLinearization) under rk4 and
/// backward Euler: H v against differences of gradients.
TEST(HessianVector, TapeStrategyBrusselator) {
  const std::size_t points = 10;
  const Problem<Brusselator1D> pr{Brusselator1D{}, Brusselator1D::initial_state(points),
                                  {1.0, 3.0, 0.02}, {0.0, 0.5}};
  std::vector<double> vy(2 * points);
  for (std::size_t i = 0; i < vy.size(); ++i) vy[i] = 0.1 * std::sin(1.0 + double(i));
  const HessianDirection v{{0.4, -0.3, 0.5}, vy};
  for (const IntegratorOptions& opt :
       {IntegratorOptions{.method = Method::RK4, .dt = 0.005},
        IntegratorOptions{.method = Method::BackwardEuler, .dt = 0.01, .newton_tol = 1e-13}}) {
    SCOPED_TRACE(to_string(opt.method));
    const HessianVectorResult r = hessian_vector(pr, WeightedFinal{}, v, DiscreteAdjoint{}, opt);
    expect_close(hv_all(r), fd_hv(pr, WeightedFinal{}, v, opt, r.steps), kFdRelTol, "Brusselator H v");
  }
}

}  // namespace
