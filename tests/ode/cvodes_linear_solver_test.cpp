// CVODES' Newton linear solvers (IntegratorOptions::cvodes_linear_solver):
// the band and sparse (KLU) matrices assembled from the coloured AD Jacobian
// equal the dense AD Jacobian, forward (f_y) and backward (−f_yᵀ); and
// dense, band and sparse give the same solutions and gradients (integrate,
// cvodes_forward, cvodes_adjoint) on the 1-D Brusselator with 100 states and
// on Robertson; `automatic` picks band / sparse / dense by the pattern.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/system.hpp"
#include "costate/ode/models.hpp"
#include "test_models.hpp"
#include "support/relative_error.hpp"

namespace {

using costate::test::max_rel_err;

using namespace costate::ode;
using LS = CvodesLinearSolver;

/// The assembled matrices hold the same AD derivatives as the dense
/// Jacobian (the same Dual arithmetic, only seeded per colour): equal to
/// round-off.
constexpr double kAssemblyTol = 1e-13;
/// Solutions of the three solvers at rtol 1e-8: each linear solver rounds
/// differently, which moves Newton's iterates within CVODES' nonlinear
/// tolerance and so the step sequence; the results then differ by the
/// global error's order (~10–100 × rtol), well below 1e-6 relative.
constexpr double kSolutionRelTol = 1e-6;
/// Gradients likewise (forward sensitivities and adjoints solve the
/// continuous problem to the tolerances).
constexpr double kGradientRelTol = 1e-5;

constexpr std::size_t kPoints = 50;  // 100 states: automatic takes band

Problem<Brusselator1D> brusselator(double t1) {
  return {Brusselator1D{}, Brusselator1D::initial_state(kPoints), {1.0, 3.0, 1.0 / 50.0}, {0.0, t1}};
}

TEST(CvodesLinearSolver, NamesRoundTripAndBadNamesListTheValidOnes) {
  for (LS s : all_cvodes_linear_solvers()) EXPECT_EQ(cvodes_linear_solver_from_string(to_string(s)), s);
  try {
    (void)cvodes_linear_solver_from_string("klu");
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("integrator.cvodes_linear_solver"), std::string::npos) << m;
    EXPECT_NE(m.find("dense, band, sparse, automatic"), std::string::npos) << m;
  }
}

TEST(CvodesLinearSolver, AssembledBandAndSparseEqualTheDenseJacobian) {
  const auto pr = brusselator(1.0);
  const detail::NoObjectiveTerms none;
  const System system = make_system(pr.model, none, pr.n_states(), pr.p.size());
  cvodes::Binding d(system, pr.p, Method::CvodesBdf, LS::Sparse, 0.0, pr.y0);
  const cvodes::System& sys = d.system();
  EXPECT_EQ(sys.lower_bandwidth(), 2);
  EXPECT_EQ(sys.upper_bandwidth(), 2);
  // A row has 4 non-zeros (the lower bound); a band of half-width 2 needs
  // at most 2·2 + 1 colours — whatever the number of points.
  EXPECT_GE(d.colours(), 4);
  EXPECT_LE(d.colours(), 5);
  // A state off the initial one (every entry of the Jacobian non-trivial).
  std::vector<double> y = pr.y0;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += 0.1 * std::cos(0.3 * static_cast<double>(i));
  const std::size_t n = pr.n_states();
  std::vector<double> dense(n * n);
  d.jacobian(0.5, y.data(), dense.data());
  double scale = 0.0;
  for (double v : dense) scale = std::max(scale, std::abs(v));
  for (bool backward : {false, true}) {
    for (LS s : {LS::Dense, LS::Band, LS::Sparse, LS::Automatic}) {
      LS used = LS::Automatic;
      const std::vector<double> a = cvodes::assembled_jacobian(sys, s, backward, 0.5, y.data(), &used);
      EXPECT_EQ(used, s == LS::Automatic ? LS::Band : s);
      double err = 0.0;
      for (std::size_t c = 0; c < n; ++c)
        for (std::size_t r = 0; r < n; ++r) {
          const double want = backward ? -dense[r * n + c] : dense[c * n + r];
          err = std::max(err, std::abs(a[c * n + r] - want));
        }
      EXPECT_LE(err, kAssemblyTol * scale) << to_string(s) << (backward ? " backward" : " forward");
    }
  }
}

TEST(CvodesLinearSolver, NewtonMatrixIsIdentityMinusGammaJ) {
  // The matrix each solver factorises, I − γJ: dense and band formed by
  // CVODES' SUNMatScaleAddI, sparse by the backend's linear-system function
  // (its own loop over the structure's values and the diagonal).
  const auto pr = brusselator(1.0);
  const detail::NoObjectiveTerms none;
  const System system = make_system(pr.model, none, pr.n_states(), pr.p.size());
  cvodes::Binding d(system, pr.p, Method::CvodesBdf, LS::Sparse, 0.0, pr.y0);
  const cvodes::System& sys = d.system();
  std::vector<double> y = pr.y0;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += 0.1 * std::sin(0.7 * static_cast<double>(i));
  const std::size_t n = pr.n_states();
  const double gamma = 0.037;  // a BDF step's h·β₀ of the size CVODES takes here
  for (bool backward : {false, true}) {
    const std::vector<double> dense_j = cvodes::assembled_jacobian(sys, LS::Dense, backward, 0.5, y.data());
    double scale = 1.0;
    for (double v : dense_j) scale = std::max(scale, gamma * std::abs(v));
    for (LS s : {LS::Dense, LS::Band, LS::Sparse}) {
      const std::vector<double> j = cvodes::assembled_jacobian(sys, s, backward, 0.5, y.data());
      const std::vector<double> a = cvodes::assembled_newton_matrix(sys, s, backward, gamma, 0.5, y.data());
      double err = 0.0;
      for (std::size_t c = 0; c < n; ++c)
        for (std::size_t r = 0; r < n; ++r) {
          // The same two IEEE operations per entry as the solver's own J:
          // (−γ)·J, then + 1 on the diagonal — equal to the bit.
          double want = -gamma * j[c * n + r];
          if (r == c) want += 1.0;
          EXPECT_EQ(a[c * n + r], want) << to_string(s) << (backward ? " backward" : " forward")
                                        << " (" << r << ", " << c << ")";
          // Against the dense J: the assembly's round-off (kAssemblyTol).
          const double dense_want = (r == c ? 1.0 : 0.0) - gamma * dense_j[c * n + r];
          err = std::max(err, std::abs(a[c * n + r] - dense_want));
        }
      EXPECT_LE(err, kAssemblyTol * scale) << to_string(s) << (backward ? " backward" : " forward");
    }
  }
}

TEST(CvodesLinearSolver, AutomaticFollowsThePattern) {
  // Chain: y_i' depends on y_i and y_{i+1 mod n}: a bidiagonal with one
  // corner entry, so its band is the whole matrix but it is 2/n full.
  constexpr std::size_t n = 120;
  const std::vector<double> y(n, 1.0), p(n, 0.5);
  const test::Chain chain;
  const detail::NoObjectiveTerms none;
  const System system = make_system(chain, none, n, p.size());
  cvodes::Binding d(system, p, Method::CvodesBdf, LS::Automatic, 0.0, y);
  const cvodes::System& sys = d.system();
  EXPECT_EQ(cvodes::resolve_linear_solver(sys, LS::Automatic), LS::Sparse);
  EXPECT_EQ(cvodes::resolve_linear_solver(sys, LS::Band), LS::Band);
  // Below kAutomaticDenseLimit (20) states automatic stays dense and
  // detects nothing.
  const System small_system = make_system(chain, none, 16, p.size());
  cvodes::Binding small(small_system, p, Method::CvodesBdf, LS::Automatic, 0.0,
                        std::span<const double>(y).first(16));
  const cvodes::System& s2 = small.system();
  EXPECT_FALSE(s2.has_jacobian_structure());
  EXPECT_EQ(cvodes::resolve_linear_solver(s2, LS::Automatic), LS::Dense);
  // Band or sparse without a structure: an error naming the key.
  try {
    (void)cvodes::resolve_linear_solver(s2, LS::Band);
    FAIL() << "expected an error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("integrator.cvodes_linear_solver = band"), std::string::npos)
        << e.what();
  }
}

// y_i' couples y_i to `Width` − 1 cyclic neighbours at offsets 1, 2, 5, 7,
// …: `Width` non-zeros in every row of f_y, its band the whole matrix.
template <std::size_t Width>
struct Ring {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    constexpr std::size_t offsets[] = {1, 2, 5, 7, 11};
    const std::size_t n = y.size();
    for (std::size_t i = 0; i < n; ++i) {
      T s = -p[i] * y[i];
      for (std::size_t k = 0; k + 1 < Width; ++k) {
        const T& v = y[(i + offsets[k]) % n];
        s = T(s + 0.1 * v * v);
      }
      dydt[i] = s;
    }
  }
};

/// A hub species H = y_0 binding every other species (mass action) plus
/// diffusion between neighbours: row 0 of f_y is full (any colouring needs
/// n colours), the others hold 4 entries. The sparse Jacobian takes row 0
/// by a reverse sweep (ad::split_dense_rows) and colours the rest.
struct HubNetwork {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t n = y.size();
    T hub = p[0] * (1.0 - y[0]);
    for (std::size_t i = 1; i < n; ++i) {
      const T bind = p[1] * y[0] * y[i];
      hub = T(hub - bind + 0.5 * p[2] * y[i]);
      const T left = i > 1 ? y[i - 1] : y[i], right = i + 1 < n ? y[i + 1] : y[i];
      dydt[i] = T(p[2] * (left - 2.0 * y[i] + right) - bind + 0.1 * (1.0 - y[i]));
    }
    dydt[0] = hub;
  }
};

/// J = H(t1)² + y_7(t1).
struct HubTerminal {
  template <class T>
  T terminal(std::span<const T> yy, std::span<const T>) const {
    return T(yy[0] * yy[0] + yy[7]);
  }
};

TEST(CvodesLinearSolver, DenseRowsBySweepsEqualTheDenseJacobian) {
  constexpr std::size_t n = 60;
  std::vector<double> y(n), p{0.7, 1.3, 0.4};
  for (std::size_t i = 0; i < n; ++i) y[i] = 0.5 + 0.3 * std::sin(0.7 * static_cast<double>(i));
  const HubNetwork model;
  const detail::NoObjectiveTerms none;
  const System system = make_system(model, none, n, p.size());
  cvodes::Binding d(system, p, Method::CvodesBdf, LS::Sparse, 0.0, y);
  // Row 0 (60 entries) would take 60 colours; split off, 3 or 4 remain.
  EXPECT_LE(d.colours(), 4);
  const cvodes::System& sys = d.system();
  std::vector<double> dense(n * n);
  d.jacobian(0.0, y.data(), dense.data());
  double scale = 0.0;
  for (double v : dense) scale = std::max(scale, std::abs(v));
  EXPECT_NE(dense[5 * n + 0], 0.0);  // ∂f_0/∂y_5: the hub row is there
  for (bool backward : {false, true}) {
    const std::vector<double> a = cvodes::assembled_jacobian(sys, LS::Sparse, backward, 0.0, y.data());
    double err = 0.0;
    for (std::size_t c = 0; c < n; ++c)
      for (std::size_t r = 0; r < n; ++r) {
        const double want = backward ? -dense[r * n + c] : dense[c * n + r];
        err = std::max(err, std::abs(a[c * n + r] - want));
      }
    // The sweep's row is the same partials summed in reverse order.
    EXPECT_LE(err, kAssemblyTol * scale) << (backward ? "backward" : "forward");
  }
  // And the solvers agree along a trajectory (Newton on the split Jacobian).
  Problem<HubNetwork> pr{model, y, p, {0.0, 5.0}};
  const IntegratorOptions dense_o{.method = Method::CvodesBdf, .rtol = 1e-8, .atol = 1e-10,
                                  .cvodes_linear_solver = LS::Dense};
  IntegratorOptions sparse_o = dense_o;
  sparse_o.cvodes_linear_solver = LS::Sparse;
  const GradientResult gd = gradient(pr, HubTerminal{}, CvodesAdjoint{}, dense_o);
  const GradientResult gs = gradient(pr, HubTerminal{}, CvodesAdjoint{}, sparse_o);
  EXPECT_NEAR(gs.objective, gd.objective, kSolutionRelTol * std::abs(gd.objective));
  EXPECT_LT(max_rel_err(gs.wrt_parameters, gd.wrt_parameters), kGradientRelTol);
  EXPECT_LT(max_rel_err(gs.wrt_initial_state, gd.wrt_initial_state), kGradientRelTol);
}

TEST(CvodesLinearSolver, AutomaticTakesKluForFewEntriesPerRow) {
  // 25 states (a mid-sized reaction network like the Bachmann PEtab model):
  // 4 entries per row fill 16% of f_y — over the 10% density rule, within
  // kAutomaticSparseRowEntries = 4 per row: KLU; 5 per row (20%): dense.
  constexpr std::size_t n = 25;
  const std::vector<double> y(n, 1.0), p(n, 0.5);
  const detail::NoObjectiveTerms none;
  const Ring<4> four;
  const System s4 = make_system(four, none, n, n);
  cvodes::Binding b4(s4, p, Method::CvodesBdf, LS::Automatic, 0.0, y);
  ASSERT_TRUE(b4.system().has_jacobian_structure());
  EXPECT_EQ(b4.system().jacobian_rows.size(), 4 * n);
  EXPECT_EQ(cvodes::resolve_linear_solver(b4.system(), LS::Automatic), LS::Sparse);
  const Ring<5> five;
  const System s5 = make_system(five, none, n, n);
  cvodes::Binding b5(s5, p, Method::CvodesBdf, LS::Automatic, 0.0, y);
  EXPECT_EQ(b5.system().jacobian_rows.size(), 5 * n);
  EXPECT_EQ(cvodes::resolve_linear_solver(b5.system(), LS::Automatic), LS::Dense);
  // Both solvers integrate the 4-per-row ring to the same state (CVODES'
  // Newton matrix differs, the error control does not: kSolutionRelTol).
  std::vector<double> ref;
  for (LS s : {LS::Dense, LS::Automatic}) {
    const Problem<Ring<4>> pr{four, y, p, {0.0, 2.0}};
    const Solution sol = integrate(pr, {.method = Method::CvodesBdf, .rtol = 1e-8, .atol = 1e-10,
                                        .cvodes_linear_solver = s});
    ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
    const auto last = sol.state(sol.n_outputs() - 1);
    const std::vector<double> yy(last.begin(), last.end());
    if (ref.empty()) ref = yy;
    EXPECT_LT(max_rel_err(yy, ref), kSolutionRelTol) << to_string(s);
  }
}

TEST(CvodesLinearSolver, BrusselatorSolutionsAgree) {
  const auto pr = brusselator(2.0);
  std::vector<double> ref;
  for (Method m : {Method::CvodesBdf, Method::CvodesAdams}) {
    for (LS s : {LS::Dense, LS::Band, LS::Sparse, LS::Automatic}) {
      const Solution sol =
          integrate(pr, {.method = m, .rtol = 1e-8, .atol = 1e-10, .cvodes_linear_solver = s});
      ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
      const auto last = sol.state(sol.n_outputs() - 1);
      const std::vector<double> y(last.begin(), last.end());
      if (ref.empty()) ref = y;
      EXPECT_LT(max_rel_err(y, ref), kSolutionRelTol) << to_string(m) << " " << to_string(s);
    }
  }
}

/// J = Σ_i (u_i(T) − 1)² / N + ∫ Σ_i v_i² / N dt.
struct BrusselatorObjective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 0; i < y.size(); i += 2) s = T(s + (y[i] - 1.0) * (y[i] - 1.0));
    return T(s / static_cast<double>(y.size() / 2));
  }
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (std::size_t i = 1; i < y.size(); i += 2) s = T(s + y[i] * y[i]);
    return T(s / static_cast<double>(y.size() / 2));
  }
};

TEST(CvodesLinearSolver, BrusselatorGradientsAgree) {
  const auto pr = brusselator(1.0);
  const BrusselatorObjective obj;
  GradientResult ref;
  bool have_ref = false;
  for (LS s : {LS::Dense, LS::Band, LS::Sparse}) {
    const IntegratorOptions o{.method = Method::CvodesBdf, .rtol = 1e-8, .atol = 1e-10,
                              .cvodes_linear_solver = s};
    const GradientResult fw = gradient(pr, obj, CvodesForward{}, o);
    const GradientResult adj = gradient(pr, obj, CvodesAdjoint{}, o);
    if (!have_ref) {
      ref = fw;
      have_ref = true;
    }
    for (const GradientResult* g : {&fw, &adj}) {
      EXPECT_NEAR(g->objective, ref.objective, kSolutionRelTol * std::abs(ref.objective));
      EXPECT_LT(max_rel_err(g->wrt_parameters, ref.wrt_parameters), kGradientRelTol)
          << to_string(s) << " " << g->method;
      EXPECT_LT(max_rel_err(g->wrt_initial_state, ref.wrt_initial_state), kGradientRelTol)
          << to_string(s) << " " << g->method;
    }
  }
}

/// G = ∫ y3 dt on Robertson (the tiny stiff case: a 3 × 3 pattern).
struct IntegralOfY3 {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return y[2];
  }
};

TEST(CvodesLinearSolver, RobertsonAgreesForEverySolver) {
  Problem<Robertson> pr{Robertson{}, {1.0, 0.0, 0.0}, {0.04, 1e4, 3e7}, {0.0, 40.0}};
  std::vector<double> y_ref, g_ref;
  for (LS s : {LS::Dense, LS::Band, LS::Sparse}) {
    const IntegratorOptions o{.method = Method::CvodesBdf, .rtol = 1e-9,
                              .atol_per_state = {1e-12, 1e-18, 1e-10},
                              .cvodes_linear_solver = s};
    const Solution sol = integrate(pr, o);
    ASSERT_TRUE(sol.summary.success()) << sol.summary.brief_report();
    const auto last = sol.state(sol.n_outputs() - 1);
    const std::vector<double> y(last.begin(), last.end());
    const GradientResult fw = gradient(pr, IntegralOfY3{}, CvodesForward{}, o);
    const GradientResult adj = gradient(pr, IntegralOfY3{}, CvodesAdjoint{}, o);
    if (y_ref.empty()) {
      y_ref = y;
      g_ref = fw.wrt_parameters;
    }
    // y2 ~ 1e-5 sits far below the other states: compare each state
    // relative to itself.
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(y[i], y_ref[i], kSolutionRelTol * std::abs(y_ref[i])) << to_string(s) << " " << i;
    EXPECT_LT(max_rel_err(fw.wrt_parameters, g_ref), kGradientRelTol) << to_string(s);
    EXPECT_LT(max_rel_err(adj.wrt_parameters, g_ref), kGradientRelTol) << to_string(s);
  }
}

}  // namespace
