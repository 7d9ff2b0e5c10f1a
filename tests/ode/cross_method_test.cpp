// The cross-method matrix (issue 14): every (sensitivity method × integrator)
// that the support table (ode::supports) says gives gradients, on three
// functionals (terminal, integral, observations) of three models (Lotka–
// Volterra, stiff Van der Pol, a 50-state method-of-lines Fisher–KPP:
// tests/support/cross_method.hpp), checked against
//   - the discrete methods' own forward tangents and central differences of
//     the same discrete objective (the steps replayed): tightly;
//   - a reference gradient of the exact objective (dopri5's discrete adjoint
//     at rtol 1e-12, itself checked against its differences) for the
//     continuous methods (continuous_adjoint, cvodes_*): to the order of
//     their tolerances;
// and the calibration residual Jacobian (ode::sensitivity_matrix) against
// central differences of the residuals, and Sᵀr against the discrete
// adjoint, for every integrator supports_calibration accepts.
//
// The loops ask the table: a new stepper (ode::all_methods) or sensitivity
// method (ode::all_sensitivity_kinds, with a case in method_of below) is
// tested here everywhere it says it works. The models and functionals are one
// type each (chosen at run time), so this file instantiates ode::gradient and
// make_system once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/support.hpp"
#include "support/cross_method.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::FunctionalKind;
using costate::test::MatrixFunctional;
using costate::test::MatrixModel;
using costate::test::max_abs;
using costate::test::max_rel_err;

// Tolerances, each with its reason.
/// Discrete adjoint vs forward tangents of the same discrete solution: the
/// same derivative summed in another order (round-off, amplified by the
/// implicit methods' linear solves).
constexpr double kSameDiscreteRelTol = 1e-9;
/// A discrete method vs central differences of its replayed objective along
/// a direction: relative step kFdStep gives truncation ~1e-10 and round-off /
/// Newton-convergence noise ~1e-12 / 1e-5 ~ 1e-7.
constexpr double kFdStep = 1e-5;
constexpr double kFdRelTol = 2e-6;
/// sdirk3 and bdf replay Newton to replay_kappa (0.01) of the error
/// tolerance (kMatrixRtol): the replayed objective carries ~1e-10 relative
/// noise, ~1e-5 after dividing by kFdStep (measured up to 1e-5 on stiff Van
/// der Pol's observations).
constexpr double kImplicitFdRelTol = 3e-5;
/// The adaptive integrators' tolerances in the matrix, and the continuous
/// methods' agreement with the exact-objective reference: their forward and
/// backward global errors, a few hundred steps of rtol each (and the
/// interpolant), i.e. ~1e3 × rtol.
constexpr double kMatrixRtol = 1e-8;
constexpr double kContinuousRelTol = 1e3 * kMatrixRtol;
/// The reference (dopri5 discrete adjoint at this rtol) is within ~1e-10 of
/// the exact objective's gradient: far inside kContinuousRelTol.
constexpr double kReferenceRtol = 1e-12;
/// sensitivity_matrix vs differences of residuals (the same replayed steps):
/// as kFdRelTol; Sᵀr vs the discrete adjoint of ½|r|²: the same derivative.
constexpr double kResidualFdRelTol = 2e-6;
constexpr double kGaussNewtonRelTol = 1e-8;

using Problem_ = Problem<MatrixModel>;

/// Fixed steps stable for each model's stiffness (euler's and rk4's
/// stability limits: ≈ 2/|λ| and 2.8/|λ|, |λ| ≈ 0.4 (LV), 300 (VdP), 520 (MOL)).
double fixed_dt(MatrixModel::Kind k) {
  switch (k) {
    case MatrixModel::Kind::LotkaVolterra: return 1e-2;
    case MatrixModel::Kind::VanDerPol: return 2e-3;
    case MatrixModel::Kind::FisherKpp: return 2.5e-3;
  }
  return 0.0;
}

IntegratorOptions options_for(Method m, MatrixModel::Kind k, double rtol = kMatrixRtol) {
  IntegratorOptions o{.method = m, .rtol = rtol, .atol = 1e-2 * rtol};
  if (!is_adaptive(m)) o.dt = fixed_dt(k);
  o.max_steps = 1'000'000;
  return o;
}

SensitivityMethod method_of(SensitivityKind k) {
  switch (k) {
    case SensitivityKind::DiscreteAdjoint: return DiscreteAdjoint{};
    case SensitivityKind::Forward: return Forward{};
    case SensitivityKind::ContinuousAdjoint: return ContinuousAdjoint{};
    case SensitivityKind::CvodesForward: return CvodesForward{};
    case SensitivityKind::CvodesAdjoint: return CvodesAdjoint{};
  }
  ADD_FAILURE() << "no SensitivityMethod for " << to_string(k);
  return DiscreteAdjoint{};
}

/// Differentiates the discrete solution of its steps (or the exact
/// objective: the continuous methods).
bool is_discrete(SensitivityKind k) {
  return k == SensitivityKind::DiscreteAdjoint || k == SensitivityKind::Forward;
}

std::vector<double> all_of(const GradientResult& g) {
  std::vector<double> v = g.wrt_parameters;
  v.insert(v.end(), g.wrt_initial_state.begin(), g.wrt_initial_state.end());
  return v;
}

/// Two directions in (p, y0), scaled to the variables: one moving the
/// parameters only, one the initial state only (so each half of the
/// gradient is tested on its own).
std::vector<std::vector<double>> directions(const Problem_& pr) {
  const std::size_t np = pr.p.size(), n = pr.y0.size();
  std::vector<double> dp(np + n, 0.0), dy(np + n, 0.0);
  for (std::size_t j = 0; j < np; ++j)
    dp[j] = (1.0 + 0.3 * static_cast<double>(j % 3)) * std::max(std::abs(pr.p[j]), 0.1);
  for (std::size_t i = 0; i < n; ++i)
    dy[np + i] = (i % 2 == 0 ? 1.0 : -1.0) * (0.5 + 0.1 * static_cast<double>(i % 5)) *
                 std::max(std::abs(pr.y0[i]), 0.1);
  return {dp, dy};
}

Problem_ moved(const Problem_& pr, const std::vector<double>& d, double h) {
  Problem_ q = pr;
  const std::size_t np = pr.p.size();
  for (std::size_t j = 0; j < np; ++j) q.p[j] += h * d[j];
  for (std::size_t i = 0; i < pr.y0.size(); ++i) q.y0[i] += h * d[np + i];
  return q;
}

/// ⟨g, d⟩ against (J(x + h d) − J(x − h d)) / 2h of the objective of `g`'s
/// steps replayed (`replay` false: integrated afresh, the exact objective up
/// to the tolerance). Returns the error relative to |g|·|d|.
double directional_error(const Problem_& pr, const MatrixFunctional& f,
                         const IntegratorOptions& o, const GradientResult& g,
                         const std::vector<double>& d) {
  const std::vector<double> grad = all_of(g);
  auto J = [&](double h) {
    return gradient(moved(pr, d, h), f, DiscreteAdjoint{}, o, g.step_times, g.step_orders)
        .objective;
  };
  const double fd = (J(kFdStep) - J(-kFdStep)) / (2.0 * kFdStep);
  double ad = 0.0, scale = 0.0;
  for (std::size_t j = 0; j < grad.size(); ++j) {
    ad += grad[j] * d[j];
    scale += std::abs(grad[j] * d[j]);
  }
  return std::abs(ad - fd) / std::max(scale, 1e-300);
}

class CrossMethod : public ::testing::TestWithParam<MatrixModel::Kind> {};

TEST_P(CrossMethod, EverySupportedGradientAgrees) {
  const MatrixModel::Kind mk = GetParam();
  const Problem_ pr = costate::test::matrix_problem(mk);
  int tested = 0, expected = 0;
  for (Method m : all_methods())
    for (SensitivityKind k : all_sensitivity_kinds())
      expected += supports(k, options_for(m, mk), 1) ? 1 : 0;
  for (FunctionalKind fk :
       {FunctionalKind::Terminal, FunctionalKind::Integral, FunctionalKind::Observations}) {
    const MatrixFunctional f = costate::test::matrix_functional(fk, pr);
    const std::string where = to_string(mk) + " / " + to_string(fk);
    // The exact objective's gradient, checked against its own differences.
    const IntegratorOptions ro = options_for(Method::Dopri5, mk, kReferenceRtol);
    const GradientResult ref = gradient(pr, f, DiscreteAdjoint{}, ro);
    const std::vector<double> reference = all_of(ref);
    ASSERT_GT(max_abs(reference), 0.0) << where;
    for (const auto& d : directions(pr))
      EXPECT_LT(directional_error(pr, f, ro, ref, d), kFdRelTol) << where << " reference";

    for (Method m : all_methods()) {
      const IntegratorOptions o = options_for(m, mk);
      // Order 1 only. Order 2 (H·v vs differences of gradients, through
      // ode::hessian_vector) — rows from the second-order work (hess) go
      // here, driven by supports(k, o, 2) the same way.
      std::map<SensitivityKind, GradientResult> got;
      for (SensitivityKind k : all_sensitivity_kinds()) {
        if (!supports(k, o, 1)) continue;
        got.emplace(k, gradient(pr, f, method_of(k), o));
      }
      for (const auto& [k, g] : got) {
        const std::string what = where + " / " + to_string(k) + " / " + to_string(m);
        ASSERT_EQ(g.wrt_parameters.size(), pr.p.size()) << what;
        ASSERT_EQ(g.wrt_initial_state.size(), pr.y0.size()) << what;
        if (fk == FunctionalKind::Terminal) ++tested;  // one count per combination
        if (is_discrete(k)) {
          // Its own forward tangents (or adjoint) on the same steps.
          const SensitivityKind other = k == SensitivityKind::DiscreteAdjoint
                                            ? SensitivityKind::Forward
                                            : SensitivityKind::DiscreteAdjoint;
          const auto it = got.find(other);
          if (it != got.end()) {
            EXPECT_EQ(g.step_times, it->second.step_times) << what;
            EXPECT_LT(max_rel_err(all_of(g), all_of(it->second)), kSameDiscreteRelTol) << what;
          }
          // Central differences of the same discrete objective (once per pair).
          if (k == SensitivityKind::DiscreteAdjoint || it == got.end()) {
            for (const auto& d : directions(pr)) {
              const double e = directional_error(pr, f, o, g, d);
              const bool newton_adaptive = m == Method::Sdirk3 || m == Method::Bdf;
              EXPECT_LT(e, newton_adaptive ? kImplicitFdRelTol : kFdRelTol) << what;
            }
          }
        } else {
          const double e = max_rel_err(all_of(g), reference);
          std::printf("%-48s vs reference %.2e\n", what.c_str(), e);
          EXPECT_LT(e, kContinuousRelTol) << what;
        }
      }
    }
  }
  // Every supported combination ran (at least the native steppers' two
  // discrete methods and the continuous adjoint with dopri5, sdirk3, bdf).
  EXPECT_EQ(tested, expected) << to_string(mk);
  EXPECT_GE(expected, 7 * 2 + 3) << to_string(mk);
}

TEST_P(CrossMethod, CalibrationResidualJacobianMatchesDifferences) {
  const MatrixModel::Kind mk = GetParam();
  const Problem_ pr = costate::test::matrix_problem(mk);
  const MatrixFunctional f = costate::test::matrix_functional(FunctionalKind::Observations, pr);
  int tested = 0;
  for (Method m : all_methods()) {
    if (!supports_calibration(SensitivityKind::DiscreteAdjoint, m)) continue;
    ++tested;
    const std::string what = to_string(mk) + " / " + to_string(m);
    const IntegratorOptions o = options_for(m, mk);
    const GradientResult g = gradient(pr, f, DiscreteAdjoint{}, o);
    const ResidualSensitivities S = sensitivity_matrix(pr, f.obs, o, g.step_times, g.step_orders);
    const std::size_t rows = S.residuals.size(), cols = S.n_columns;
    ASSERT_EQ(rows, f.obs.n_residuals()) << what;
    ASSERT_EQ(cols, pr.p.size() + pr.y0.size()) << what;
    // Sᵀr is the gradient of ½|r|² = the observation functional.
    std::vector<double> str(cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) str[c] += S.at(r, c) * S.residuals[r];
    EXPECT_LT(max_rel_err(str, all_of(g)), kGaussNewtonRelTol) << what;
    // S d against central differences of the residuals on the same steps,
    // along one direction moving p and y0 together (each difference is a
    // full tangent replay: on the 50-state MOL that dominates the test).
    const std::vector<std::vector<double>> dirs = directions(pr);
    std::vector<double> both(dirs[0].size());
    for (std::size_t c = 0; c < both.size(); ++c) both[c] = dirs[0][c] + dirs[1][c];
    for (const auto& d : {both}) {
      auto r_at = [&](double h) {
        return sensitivity_matrix(moved(pr, d, h), f.obs, o, g.step_times, g.step_orders)
            .residuals;
      };
      const std::vector<double> rp = r_at(kFdStep), rm = r_at(-kFdStep);
      std::vector<double> fd(rows), sd(rows, 0.0);
      for (std::size_t r = 0; r < rows; ++r) {
        fd[r] = (rp[r] - rm[r]) / (2.0 * kFdStep);
        for (std::size_t c = 0; c < cols; ++c) sd[r] += S.at(r, c) * d[c];
      }
      EXPECT_LT(max_rel_err(sd, fd), kResidualFdRelTol) << what;
    }
  }
  EXPECT_GE(tested, 7) << "every native stepper calibrates";
}

INSTANTIATE_TEST_SUITE_P(Models, CrossMethod,
                         ::testing::Values(MatrixModel::Kind::LotkaVolterra,
                                           MatrixModel::Kind::VanDerPol,
                                           MatrixModel::Kind::FisherKpp),
                         [](const auto& info) { return costate::test::to_string(info.param); });

}  // namespace
