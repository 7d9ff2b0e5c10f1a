// io::CalibrationProblem::hessian_vector (what the Python module's
// hessp(x, v) calls): H(q) u is the derivative of the gradient that
// objective_and_gradient returns — against central differences of that
// gradient, for fitted parameters on a log scale (Lotka–Volterra) and fitted
// initial values with a regularisation (Van der Pol) — symmetric, linear in
// u, with the same J and ∇J; first-order methods are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "costate/calibrate/calibrate.hpp"
#include "costate/core/error.hpp"
#include "costate/io/input.hpp"

namespace {

using costate::io::CalibrationProblem;

const std::string kExamples = COSTATE_DATA_DIR "/examples/";

// Central differences of ∇J along u with step h: truncation ~h²|∇³J| and
// round-off ~eps|∇J|/h ≈ 1e-16·1e3/1e-5 = 1e-8, relative to max |H u|.
constexpr double kStep = 1e-5, kFdTol = 1e-6;
// Forward over the discrete adjoint: the same second derivatives summed in
// other orders, so H is symmetric to rounding.
constexpr double kSymmetryTol = 1e-10;

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

/// Checks H(q) against differences and returns it (row-major).
std::vector<double> check_against_differences(CalibrationProblem& p, const std::vector<double>& q) {
  const std::size_t n = p.size();
  std::vector<double> H(n * n), g(n), Hu(n), gp(n), gm(n);
  std::vector<double> g0(n);
  const double J0 = p.objective_and_gradient(q, g0);
  for (std::size_t c = 0; c < n; ++c) {
    std::vector<double> u(n, 0.0);
    u[c] = 1.0;
    const double J = p.hessian_vector(q, u, g, Hu);
    // The same objective and gradient as objective_and_gradient (the sweep's
    // gradient part is ode::gradient's to rounding).
    EXPECT_NEAR(J, J0, 1e-12 * std::abs(J0));
    for (std::size_t k = 0; k < n; ++k) EXPECT_NEAR(g[k], g0[k], 1e-10 * max_abs(g0)) << k;
    std::vector<double> qp = q, qm = q;
    qp[c] += kStep;
    qm[c] -= kStep;
    (void)p.objective_and_gradient(qp, gp);
    (void)p.objective_and_gradient(qm, gm);
    for (std::size_t k = 0; k < n; ++k) {
      const double fd = (gp[k] - gm[k]) / (2 * kStep);
      EXPECT_LE(std::abs(fd - Hu[k]), kFdTol * max_abs(Hu)) << "row " << k << " column " << c;
      H[k * n + c] = Hu[k];
    }
  }
  double asym = 0.0;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) asym = std::max(asym, std::abs(H[a * n + b] - H[b * n + a]));
  EXPECT_LE(asym, kSymmetryTol * max_abs(H));
  // Linear in u: H (1, 2, …) = Σ_c (c + 1) H e_c.
  std::vector<double> u(n);
  for (std::size_t c = 0; c < n; ++c) u[c] = static_cast<double>(c + 1);
  (void)p.hessian_vector(q, u, g, Hu);
  for (std::size_t k = 0; k < n; ++k) {
    double want = 0.0;
    for (std::size_t c = 0; c < n; ++c) want += H[k * n + c] * u[c];
    EXPECT_NEAR(Hu[k], want, 1e-10 * max_abs(H) * static_cast<double>(n * n));
  }
  return H;
}

TEST(CalibrationHessian, LogScaledRatesMatchDifferencesOfTheGradient) {
  const auto cfg = costate::io::load_run_config(kExamples + "lotka_volterra_calibration.yaml");
  CalibrationProblem p(cfg);
  (void)check_against_differences(p, p.start());
}

TEST(CalibrationHessian, FittedInitialValuesAndRegularisation) {
  // Van der Pol: mu and both initial values (linear), with a prior term.
  const auto cfg = costate::io::load_run_config(
      kExamples + "van_der_pol_calibration.yaml",
      {"sensitivity.method=discrete_adjoint", "calibration.regularization.weight=0.5"});
  CalibrationProblem p(cfg);
  ASSERT_EQ(p.size(), 3u);
  std::vector<double> q = p.start();
  for (double& x : q) x += 0.1;  // away from the prior: the λ (q − q_prior) term is not zero
  const std::vector<double> H = check_against_differences(p, q);
  // The regularisation's λ I is in it: with weight 0 the diagonal is 0.5 less.
  const auto cfg0 = costate::io::load_run_config(kExamples + "van_der_pol_calibration.yaml",
                                                 {"sensitivity.method=discrete_adjoint"});
  CalibrationProblem p0(cfg0);
  std::vector<double> g(3), Hu(3), u{1.0, 0.0, 0.0};
  (void)p0.hessian_vector(q, u, g, Hu);
  EXPECT_NEAR(H[0] - Hu[0], 0.5, 1e-9 * std::abs(H[0]));
}

TEST(CalibrationHessian, FirstOrderMethodsAndWrongSizesAreRefused) {
  const auto cfg = costate::io::load_run_config(kExamples + "van_der_pol_calibration.yaml");
  CalibrationProblem p(cfg);  // sensitivity.method: forward
  std::vector<double> q = p.start(), u(3, 1.0), g(3), Hu(3);
  try {
    (void)p.hessian_vector(q, u, g, Hu);
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("van_der_pol_calibration.yaml"), std::string::npos) << m;
    EXPECT_NE(m.find("Hessian-vector product"), std::string::npos) << m;
    EXPECT_NE(m.find("forward"), std::string::npos) << m;
  }
  std::vector<double> short_u(2, 1.0);
  EXPECT_THROW((void)p.hessian_vector(q, short_u, g, Hu), costate::Error);
}

}  // namespace
