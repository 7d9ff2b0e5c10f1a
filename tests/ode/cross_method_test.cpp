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
// every (method × integrator) that it says gives Hessian-vector products
// (order 2, ode::hessian_vector) on the same models and functionals, checked
// against central differences of that method's gradients, for the symmetry
// ⟨H u, w⟩ = ⟨u, H w⟩ and, for CVODES' continuous second-order adjoint,
// against the other route (dopri5's forward over adjoint at rtol 1e-12);
// and the calibration residual Jacobian (ode::sensitivity_matrix) against
// central differences of the residuals, and Sᵀr against the discrete
// adjoint, for every integrator supports_calibration accepts.
//
// Events (issue 31): a second family, models that switch (a bounce, a dose at
// a parameter time, a harvest at a state threshold; EventFamilyModel below),
// runs every (method × integrator) that supports_events says crosses events
// — gradients against a reference of the exact objective and each discrete
// pair against itself; H·v against the reference's H·v and for symmetry.
//
// The loops ask the table: a new stepper (ode::all_methods) or sensitivity
// method (ode::all_sensitivity_kinds, with a case in method_of below) is
// tested here everywhere it says it works. The models and functionals are one
// type each (chosen at run time), so this file instantiates ode::gradient,
// make_system, ode::hessian_vector and make_second_order_system once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
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
/// Newton-convergence noise ~1e-12 / 1e-5 ~ 1e-7 — except on stiff Van der
/// Pol's observations by dopri5, where the difference's error moves with
/// the step sequence between 1.9e-6 and 3.8e-6 (measured when the plan's
/// steps became the run's, issue 35): 5e-6.
constexpr double kFdStep = 1e-5;
constexpr double kFdRelTol = 5e-6;
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
    case SensitivityKind::IdasForward: return IdasForward{};
    case SensitivityKind::IdasAdjoint: return IdasAdjoint{};
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
template <class Model>
std::vector<std::vector<double>> directions(const Problem<Model>& pr) {
  const std::size_t np = pr.p.size(), n = pr.y0.size();
  std::vector<double> dp(np + n, 0.0), dy(np + n, 0.0);
  for (std::size_t j = 0; j < np; ++j)
    dp[j] = (1.0 + 0.3 * static_cast<double>(j % 3)) * std::max(std::abs(pr.p[j]), 0.1);
  for (std::size_t i = 0; i < n; ++i)
    dy[np + i] = (i % 2 == 0 ? 1.0 : -1.0) * (0.5 + 0.1 * static_cast<double>(i % 5)) *
                 std::max(std::abs(pr.y0[i]), 0.1);
  return {dp, dy};
}

template <class Model>
Problem<Model> moved(const Problem<Model>& pr, const std::vector<double>& d, double h) {
  Problem<Model> q = pr;
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
    return gradient(moved(pr, d, h), f, DiscreteAdjoint{}, o, g.steps)
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
      // Order 1 here; order 2 (ode::hessian_vector): EverySupportedHessianVectorAgrees.
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
            EXPECT_EQ(g.steps.times(), it->second.steps.times()) << what;
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
    const ResidualSensitivities S = sensitivity_matrix(pr, f.obs, o, g.steps);
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
        return sensitivity_matrix(moved(pr, d, h), f.obs, o, g.steps)
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

// ------------------------------------------------------------ order 2
// Tolerances of the second-order rows, each with its reason (measured: the
// worst case over the three models, three functionals and two directions).
/// Step along the direction (scaled to the variables) of the central
/// differences of gradients that H·v is checked against. The discrete
/// methods replay the H·v's steps (and bdf orders), so their gradients are
/// one smooth function of (p, y0): truncation O(h²) dominates (measured
/// 4.0e-6 on Lotka–Volterra's parameter direction over [0, 5], ≤ 6e-7
/// elsewhere), round-off ~1e-16 |∇J| / h and sdirk3/bdf's replayed Newton
/// (replay_kappa × rtol ≈ 1e-10 of the gradient, ~1e-6 after dividing by h,
/// measured ≤ 3e-8) below it.
constexpr double kHvFdStep = 1e-4;
constexpr double kHvFdRelTol = 2e-5;
/// ⟨H u, w⟩ = ⟨u, H w⟩ and ∇J·v (the ε-part of J) = ⟨∇J, v⟩ for the
/// discrete methods: H is the exact Hessian of one discrete objective (the
/// implicit equations differentiated as if solved exactly), so each pair is
/// one derivative summed in two orders — round-off, relative to the sum of
/// the terms' magnitudes (measured ≤ 2.6e-12: dopri5 on stiff Van der Pol).
constexpr double kDiscreteRoundOffTol = 1e-10;
/// dopri5 on stiff Van der Pol (μ = 100; Hairer's test finds it stiff: the
/// steps sit at the stability limit) with observations at rtol 1e-8: since
/// the plan chooses its steps on the model's states alone, as `costate run`
/// does (issue 35), the second-order sweep's round-off on this step sequence
/// measured 6.5e-10 (symmetry; was ≤ 2.6e-12 on the previous sequence) and
/// its differences 1.2e-4. The differences' error is truncation, not a wrong
/// H·v: along the parameter direction it measured 1.24e-2, 1.12e-3, 1.24e-4,
/// 1.12e-5 at steps 1e-3, 3e-4, 1e-4, 3e-5 (exactly O(h²); round-off takes
/// over below 1e-5) — this step sequence, at the stability limit, makes the
/// discrete objective's third derivative large. Only this combination.
constexpr double kStiffExplicitRoundOffTol = 2e-9;
constexpr double kStiffExplicitHvFdRelTol = 5e-4;
/// CVODES' second order at this rtol (atol 1e-2 rtol), not kMatrixRtol: its
/// forward sensitivity along v is outside the error test (so that the
/// state's steps stay the gradient's), and on stiff Van der Pol with
/// observations at rtol 1e-8 it is off by up to 3× in ∇J·v and 6 % in H·v
/// (measured); at 1e-10 it is within 1.2e-5 and 1.5e-7.
constexpr double kCvodesHvRtol = 1e-10;
/// CVODES' continuous second-order adjoint against the other route to the
/// exact objective's H·v, dopri5's forward over adjoint at kReferenceRtol
/// (itself checked against its differences): CVODES' error in second
/// derivatives, up to ~1e4 × rtol (measured ≤ 2.1e-7); 2e-6.
constexpr double kCvodesHvRelTol = 2e-6;
/// ∇J·v from CVODES' forward sensitivity (outside the error test) against
/// its adjoint gradient dotted with v (measured ≤ 1.2e-5: stiff Van der Pol
/// with observations); 5e-5.
constexpr double kCvodesTangentRelTol = 5e-5;
/// CVODES' H u and H w come from different runs, each exact up to its error:
/// symmetric to that order (measured ≤ 1.3e-7); 2e-6.
constexpr double kCvodesSymmetryTol = 2e-6;

HessianDirection as_direction(const Problem_& pr, const std::vector<double>& d) {
  const auto np = static_cast<std::ptrdiff_t>(pr.p.size());
  return {{d.begin(), d.begin() + np}, {d.begin() + np, d.end()}};
}

std::vector<double> hv_of(const HessianVectorResult& r) {
  std::vector<double> v = r.hv_wrt_parameters;
  v.insert(v.end(), r.hv_wrt_initial_state.begin(), r.hv_wrt_initial_state.end());
  return v;
}

/// (∇J(x + h d) − ∇J(x − h d)) / 2h by `method`, replaying `r`'s steps when
/// `replay` (the discrete methods).
std::vector<double> gradient_differences(const Problem_& pr, const MatrixFunctional& f,
                                         const SensitivityMethod& method,
                                         const IntegratorOptions& o, const HessianVectorResult& r,
                                         const std::vector<double>& d, bool replay) {
  auto grad = [&](double h) {
    return all_of(replay ? gradient(moved(pr, d, h), f, method, o, r.steps)
                         : gradient(moved(pr, d, h), f, method, o));
  };
  const std::vector<double> a = grad(kHvFdStep), b = grad(-kHvFdStep);
  std::vector<double> fd(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) fd[i] = (a[i] - b[i]) / (2.0 * kHvFdStep);
  return fd;
}

/// |⟨Hu, w⟩ − ⟨u, Hw⟩| relative to Σ|(Hu)_i w_i| + Σ|u_i (Hw)_i|.
double asymmetry(const std::vector<double>& hu, const std::vector<double>& u,
                 const std::vector<double>& hw, const std::vector<double>& w) {
  double a = 0.0, b = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < u.size(); ++i) {
    a += hu[i] * w[i];
    b += u[i] * hw[i];
    scale += std::abs(hu[i] * w[i]) + std::abs(u[i] * hw[i]);
  }
  return std::abs(a - b) / std::max(scale, 1e-300);
}

/// Every (method × integrator) with order-2 support: H·v along the two
/// directions (p only, y0 only) against central differences of that
/// method's gradients, the symmetry ⟨H u, w⟩ = ⟨u, H w⟩ across the p–y0
/// block, ∇J·v (the ε-part of J) against the gradient, and — where a
/// second route to the exact objective's H·v exists (CVODES' continuous
/// second-order adjoint) — against the forward over adjoint of dopri5 at a
/// tight tolerance.
TEST_P(CrossMethod, EverySupportedHessianVectorAgrees) {
  const MatrixModel::Kind mk = GetParam();
  const Problem_ pr = costate::test::matrix_problem(mk);
  const std::vector<std::vector<double>> dirs = directions(pr);
  int tested = 0, expected = 0;
  for (Method m : all_methods())
    for (SensitivityKind k : all_sensitivity_kinds())
      expected += supports(k, options_for(m, mk), 2) ? 1 : 0;
  for (FunctionalKind fk :
       {FunctionalKind::Terminal, FunctionalKind::Integral, FunctionalKind::Observations}) {
    const MatrixFunctional f = costate::test::matrix_functional(fk, pr);
    const std::string where = to_string(mk) + " / " + to_string(fk);
    // The exact objective's H·v along each direction, checked against
    // differences of its own gradients.
    const IntegratorOptions ro = options_for(Method::Dopri5, mk, kReferenceRtol);
    std::vector<std::vector<double>> reference;
    for (const auto& d : dirs) {
      const HessianVectorResult r = hessian_vector(pr, f, as_direction(pr, d), DiscreteAdjoint{}, ro);
      reference.push_back(hv_of(r));
      const double e = max_rel_err(reference.back(),
                            gradient_differences(pr, f, DiscreteAdjoint{}, ro, r, d, true));
      std::printf("%-56s H v vs differences %.2e\n", (where + " reference").c_str(), e);
      EXPECT_LT(e, kHvFdRelTol) << where << " reference";
    }
    for (Method m : all_methods()) {
      const IntegratorOptions o = options_for(m, mk, is_cvodes(m) ? kCvodesHvRtol : kMatrixRtol);
      for (SensitivityKind k : all_sensitivity_kinds()) {
        if (!supports(k, o, 2)) continue;
        const std::string what = where + " / " + to_string(k) + " / " + to_string(m);
        if (fk == FunctionalKind::Terminal) ++tested;  // one count per combination
        const SensitivityMethod method = method_of(k);
        std::vector<std::vector<double>> hv;
        for (std::size_t j = 0; j < dirs.size(); ++j) {
          const std::vector<double>& d = dirs[j];
          const HessianVectorResult r = hessian_vector(pr, f, as_direction(pr, d), method, o);
          ASSERT_EQ(r.hv_wrt_parameters.size(), pr.p.size()) << what;
          ASSERT_EQ(r.hv_wrt_initial_state.size(), pr.y0.size()) << what;
          hv.push_back(hv_of(r));
          // ∇J·v: the ε-part of J against the gradient part dotted with v.
          std::vector<double> g = r.gradient_wrt_parameters;
          g.insert(g.end(), r.gradient_wrt_initial_state.begin(), r.gradient_wrt_initial_state.end());
          double gd = 0.0, scale = 0.0;
          for (std::size_t i = 0; i < g.size(); ++i) {
            gd += g[i] * d[i];
            scale += std::abs(g[i] * d[i]);
          }
          const double ed = std::abs(r.directional_derivative - gd) / std::max(scale, 1e-300);
          if (is_discrete(k)) {
            const double e =
                max_rel_err(hv.back(), gradient_differences(pr, f, method, o, r, d, true));
            std::printf("%-56s H v vs differences %.2e  grad.v %.2e\n", what.c_str(), e, ed);
            const bool stiff_explicit = mk == MatrixModel::Kind::VanDerPol && m == Method::Dopri5 &&
                                        fk == FunctionalKind::Observations;
            EXPECT_LT(e, stiff_explicit ? kStiffExplicitHvFdRelTol : kHvFdRelTol) << what << " dir " << j;
            EXPECT_LT(ed, stiff_explicit ? kStiffExplicitRoundOffTol : kDiscreteRoundOffTol)
                << what << " dir " << j;
          } else {
            // The second route: the exact objective's H·v by dopri5's
            // forward over adjoint.
            const double e = max_rel_err(hv.back(), reference[j]);
            std::printf("%-56s H v vs reference %.2e  grad.v %.2e\n", what.c_str(), e, ed);
            EXPECT_LT(e, kCvodesHvRelTol) << what << " dir " << j;
            EXPECT_LT(ed, kCvodesTangentRelTol) << what << " dir " << j;
          }
        }
        const double a = asymmetry(hv[0], dirs[0], hv[1], dirs[1]);
        std::printf("%-56s asymmetry %.2e\n", what.c_str(), a);
        const bool stiff_explicit = mk == MatrixModel::Kind::VanDerPol && m == Method::Dopri5 &&
                                    fk == FunctionalKind::Observations;
        EXPECT_LT(a, !is_discrete(k)   ? kCvodesSymmetryTol
                     : stiff_explicit ? kStiffExplicitRoundOffTol
                                      : kDiscreteRoundOffTol)
            << what;
      }
    }
  }
  // Every supported combination ran: discrete_adjoint with the seven native
  // steppers and cvodes_adjoint with cvodes_bdf and cvodes_adams today.
  EXPECT_EQ(tested, expected) << to_string(mk);
  EXPECT_GE(expected, 7 + 2) << to_string(mk);
}

// ------------------------------------------------------------ events
// MatrixModel is one runtime type without events (giving it events would
// make every model of the matrix "have events"); the event family is a
// second runtime type, so this section instantiates the paths once more.

/// Models that switch, one runtime type (p's meaning per kind):
///   Ball:    (h, v)' = (v, −g − k v); h falls through 0: v ← −e v.   p = (g, e, k)
///   Dose:    two compartments y' = (−k1 y0, k1 y0 − k2 y1); at t = τ
///            y0 ← y0 + D (a time trigger at a parameter).          p = (k1, k2, τ, D)
///   Harvest: Lotka–Volterra; prey x reaches θ upward: x ← (1 − c) x
///            (an update whose derivative moves with p).            p = (a, b, c', d, θ, c)
struct EventFamilyModel : EventDefaults {
  enum class Kind { Ball, Dose, Harvest };
  Kind kind = Kind::Ball;

  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    switch (kind) {
      case Kind::Ball:
        d[0] = y[1];
        d[1] = -p[0] - p[2] * y[1];
        break;
      case Kind::Dose:
        d[0] = -p[0] * y[0];
        d[1] = p[0] * y[0] - p[1] * y[1];
        break;
      case Kind::Harvest:
        d[0] = p[0] * y[0] - p[1] * y[0] * y[1];
        d[1] = p[2] * y[0] * y[1] - p[3] * y[1];
        break;
    }
  }
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T t, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    switch (kind) {
      case Kind::Ball: g[0] = -y[0]; break;
      case Kind::Dose: g[0] = t - p[2]; break;
      case Kind::Harvest: g[0] = y[0] - p[4]; break;
    }
  }
  std::size_t n_events() const { return 1; }
  EventAttributes event_attributes(std::size_t) const { return {.name = "switch"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const {
    return kind == Kind::Ball ? std::span<const std::size_t>(kSecond)
                              : std::span<const std::size_t>(kFirst);
  }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    switch (kind) {
      case Kind::Ball: v[0] = -p[1] * y[1]; break;
      case Kind::Dose: v[0] = y[0] + p[3]; break;
      case Kind::Harvest: v[0] = (1.0 - p[5]) * y[0]; break;
    }
  }
  static constexpr std::size_t kFirst[1] = {0}, kSecond[1] = {1};
};

std::string to_string(EventFamilyModel::Kind k) {
  switch (k) {
    case EventFamilyModel::Kind::Ball: return "ball";
    case EventFamilyModel::Kind::Dose: return "dose";
    case EventFamilyModel::Kind::Harvest: return "harvest";
  }
  return "?";
}

using EventProblem = Problem<EventFamilyModel>;

/// Each kind's problem: one or two instants inside (t0, t1), none near an
/// observation time (observations at (k − ½)/5 of the span).
EventProblem event_problem(EventFamilyModel::Kind k) {
  using K = EventFamilyModel::Kind;
  EventFamilyModel m;
  m.kind = k;
  switch (k) {
    case K::Ball: return {m, {1.0, 0.3}, {9.81, 0.8, 0.2}, {0.0, 0.8}};
    case K::Dose: return {m, {2.0, 0.0}, {0.7, 0.3, 1.3, 0.5}, {0.0, 3.0}};
    case K::Harvest: return {m, {1.0, 0.5}, {1.5, 1.0, 0.8, 1.0, 1.8, 0.4}, {0.0, 2.0}};
  }
  return {m, {}, {}, {0.0, 1.0}};
}

MatrixFunctional event_functional(FunctionalKind kind, const EventProblem& pr) {
  MatrixFunctional f;
  f.kind = kind;
  if (kind != FunctionalKind::Observations) return f;
  const std::size_t n = pr.n_states();
  f.obs.n_states = n;
  constexpr int kTimes = 5;
  for (int j = 1; j <= kTimes; ++j) {
    const double t = pr.t0() + (pr.t1() - pr.t0()) * (j - 0.5) / kTimes;
    f.obs.times.push_back(t);
    for (std::size_t i = 0; i < n; ++i) {
      f.obs.data.push_back(0.5 + 0.3 * std::sin(1.7 * t + 0.1 * static_cast<double>(i)));
      f.obs.weights.push_back(1.0);
    }
  }
  return f;
}

// Tolerances of the event rows, each with its reason. Across an instant the
// discrete methods' derivatives carry the continuous jump (events.hpp), so
// every method is compared with the exact objective's derivatives (the
// reference) to its own global error, not with differences of a replayed
// objective (a replay keeps the instants where they were).
/// The integrators' settings here: adaptive at this rtol (atol 1e-2 rtol);
/// fixed steps by order (first-order methods 1e-4, Crank–Nicolson and rk4 1e-3).
constexpr double kEventRtol = 1e-10;
/// The reference: dopri5's discrete adjoint (and its H·v) at this rtol.
constexpr double kEventReferenceRtol = 1e-12;
/// The reference against central differences of its objective / gradients,
/// each run locating its own instants (step kFdStep resp. kHvFdStep): the
/// adaptive steps' noise ~1e-12 / step dominates — 1e-6 and 1e-5 (H·v
/// measured ≤ 2.0e-7).
constexpr double kEventReferenceFdTol = 1e-6;
constexpr double kEventReferenceHvFdTol = 1e-5;

/// Agreement with the reference expected of integrator m (gradients and
/// H·v alike: H·v's error is the gradient's, differentiated): its global
/// error at the settings above. Measured worst over the three models, three
/// functionals and both directions: euler / backward_euler 9.8e-4 (O(dt) =
/// 1e-4 times the models' constants), crank_nicolson 1.5e-6, rk4 1.6e-11,
/// the adaptive natives 5.5e-7 (bdf), CVODES' forward sensitivities 1.5e-9.
double event_tol(Method m) {
  if (is_cvodes(m)) return 1e-7;
  if (is_adaptive(m)) return 2e-6;
  switch (m) {
    case Method::ExplicitEuler:
    case Method::BackwardEuler: return 3e-3;
    case Method::CrankNicolson: return 5e-6;
    default: return 1e-9;
  }
}

IntegratorOptions event_options(Method m, double rtol = kEventRtol) {
  IntegratorOptions o{.method = m, .rtol = rtol, .atol = 1e-2 * rtol};
  if (!is_adaptive(m))
    o.dt = m == Method::ExplicitEuler || m == Method::BackwardEuler ? 1e-4 : 1e-3;
  o.max_steps = 10'000'000;
  return o;
}


class CrossMethodEvents : public ::testing::TestWithParam<EventFamilyModel::Kind> {};

TEST_P(CrossMethodEvents, EveryMethodThatCrossesEventsAgrees) {
  const EventFamilyModel::Kind mk = GetParam();
  const EventProblem pr = event_problem(mk);
  const std::vector<std::vector<double>> dirs = directions(pr);
  int tested = 0, expected = 0, tested2 = 0, expected2 = 0;
  for (Method m : all_methods())
    for (SensitivityKind k : all_sensitivity_kinds()) {
      expected += supports_events(k, m, 1) && supports(k, event_options(m), 1) ? 1 : 0;
      expected2 += supports_events(k, m, 2) && supports(k, event_options(m), 2) ? 1 : 0;
    }
  for (FunctionalKind fk :
       {FunctionalKind::Terminal, FunctionalKind::Integral, FunctionalKind::Observations}) {
    const MatrixFunctional f = event_functional(fk, pr);
    const std::string where = to_string(mk) + " / " + costate::test::to_string(fk);
    // The reference: the exact objective's gradient and H·v along each
    // direction, against central differences of fresh runs (each locating
    // its own instants).
    const IntegratorOptions ro = event_options(Method::Dopri5, kEventReferenceRtol);
    const GradientResult ref = gradient(pr, f, DiscreteAdjoint{}, ro);
    ASSERT_GE(ref.steps.events().size(), 1u) << where << ": the model switches";
    const std::vector<double> reference = all_of(ref);
    std::vector<std::vector<double>> hv_reference;
    for (const auto& d : dirs) {
      auto run = [&](double h) { return gradient(moved(pr, d, h), f, DiscreteAdjoint{}, ro); };
      const GradientResult a = run(kFdStep), b = run(-kFdStep);
      double gd = 0.0, scale = 0.0;
      for (std::size_t j = 0; j < d.size(); ++j) {
        gd += reference[j] * d[j];
        scale += std::abs(reference[j] * d[j]);
      }
      EXPECT_LT(std::abs(gd - (a.objective - b.objective) / (2 * kFdStep)) / scale,
                kEventReferenceFdTol)
          << where << " reference gradient";
      const HessianVectorResult r =
          hessian_vector(pr, f, {{d.begin(), d.begin() + static_cast<std::ptrdiff_t>(pr.p.size())},
                                 {d.begin() + static_cast<std::ptrdiff_t>(pr.p.size()), d.end()}},
                         DiscreteAdjoint{}, ro);
      hv_reference.push_back(r.hv_wrt_parameters);
      hv_reference.back().insert(hv_reference.back().end(), r.hv_wrt_initial_state.begin(),
                                 r.hv_wrt_initial_state.end());
      const std::vector<double> ga = all_of(run(kHvFdStep)), gb = all_of(run(-kHvFdStep));
      std::vector<double> fd(ga.size());
      for (std::size_t i = 0; i < fd.size(); ++i) fd[i] = (ga[i] - gb[i]) / (2 * kHvFdStep);
      const double e = max_rel_err(hv_reference.back(), fd);
      std::printf("%-48s reference H v vs differences %.2e\n", where.c_str(), e);
      EXPECT_LT(e, kEventReferenceHvFdTol) << where << " reference H v";
    }
    for (Method m : all_methods()) {
      const IntegratorOptions o = event_options(m);
      std::map<SensitivityKind, GradientResult> got;
      for (SensitivityKind k : all_sensitivity_kinds())
        if (supports_events(k, m, 1) && supports(k, o, 1)) got.emplace(k, gradient(pr, f, method_of(k), o));
      for (const auto& [k, g] : got) {
        const std::string what = where + " / " + to_string(k) + " / " + to_string(m);
        if (fk == FunctionalKind::Terminal) ++tested;
        const double e = max_rel_err(all_of(g), reference);
        std::printf("%-48s vs reference %.2e\n", what.c_str(), e);
        EXPECT_LT(e, event_tol(m)) << what;
        // The discrete pair: transposes of one map on the same steps.
        if (k == SensitivityKind::DiscreteAdjoint)
          if (const auto it = got.find(SensitivityKind::Forward); it != got.end()) {
            EXPECT_EQ(g.steps.times(), it->second.steps.times()) << what;
            EXPECT_LT(max_rel_err(all_of(g), all_of(it->second)), kSameDiscreteRelTol) << what;
          }
      }
      for (SensitivityKind k : all_sensitivity_kinds()) {
        if (!(supports_events(k, m, 2) && supports(k, o, 2))) continue;
        const std::string what = where + " / " + to_string(k) + " / " + to_string(m) + " / H v";
        if (fk == FunctionalKind::Terminal) ++tested2;
        std::vector<std::vector<double>> hv;
        for (std::size_t j = 0; j < dirs.size(); ++j) {
          const std::vector<double>& d = dirs[j];
          const auto np = static_cast<std::ptrdiff_t>(pr.p.size());
          const HessianVectorResult r =
              hessian_vector(pr, f, {{d.begin(), d.begin() + np}, {d.begin() + np, d.end()}},
                             method_of(k), o);
          hv.push_back(r.hv_wrt_parameters);
          hv.back().insert(hv.back().end(), r.hv_wrt_initial_state.begin(),
                           r.hv_wrt_initial_state.end());
          const double e = max_rel_err(hv.back(), hv_reference[j]);
          std::printf("%-56s vs reference %.2e\n", what.c_str(), e);
          // H·v's error is the gradient's, differentiated: the same order
          // (CVODES' second order: kCvodesHvRelTol, as without events;
          // measured ≤ 1.1e-7, cvodes_adams on the dose).
          EXPECT_LT(e, is_cvodes(m) ? kCvodesHvRelTol : event_tol(m)) << what << " dir " << j;
        }
        // One discrete objective's Hessian (the jumps' included): round-off
        // (measured ≤ 7.5e-14); CVODES' (cvodes_adjoint) approximates the
        // exact Hessian to its tolerances, so its asymmetry is their order.
        const double a = asymmetry(hv[0], dirs[0], hv[1], dirs[1]);
        std::printf("%-56s asymmetry %.2e\n", what.c_str(), a);
        EXPECT_LT(a, is_cvodes(m) ? kCvodesSymmetryTol : kDiscreteRoundOffTol) << what;
      }
    }
  }
  // Every combination the table allows ran: at least the seven native
  // steppers' discrete adjoint and forward, the continuous adjoint (dopri5,
  // sdirk3, bdf) and CVODES' forward (two), and the seven H·v (nine with
  // cvodes_adjoint's).
  EXPECT_EQ(tested, expected) << to_string(mk);
  EXPECT_EQ(tested2, expected2) << to_string(mk);
  EXPECT_GE(expected, 7 * 2 + 3 + 2) << to_string(mk);
  EXPECT_GE(expected2, 7) << to_string(mk);
}

/// Checkpoint invariance across events: for every integrator whose discrete
/// adjoint crosses events (to first and second order, as the table says),
/// the gradient and H·v are the same bits under every schedule (the
/// instants are part of the replayed plan).
TEST_P(CrossMethodEvents, EveryScheduleGivesTheSameBits) {
  const EventFamilyModel::Kind mk = GetParam();
  const EventProblem pr = event_problem(mk);
  const MatrixFunctional f = event_functional(FunctionalKind::Observations, pr);
  const std::vector<double> d = directions(pr)[0];
  const auto np = static_cast<std::ptrdiff_t>(pr.p.size());
  const HessianDirection v{{d.begin(), d.begin() + np}, {d.begin() + np, d.end()}};
  int tested = 0;
  for (Method m : all_methods()) {
    // Coarser settings than above: the bits, not the accuracy, are tested.
    IntegratorOptions o = event_options(m, 1e-6);
    if (!is_adaptive(m)) o.dt = 1e-2;
    const std::string what = to_string(mk) + " / " + to_string(m);
    for (int order : {1, 2}) {
      if (!(supports_events(SensitivityKind::DiscreteAdjoint, m, order) &&
            supports(SensitivityKind::DiscreteAdjoint, o, order)))
        continue;
      ++tested;
      auto run = [&](const Checkpointing& c) {
        if (order == 1) return all_of(gradient(pr, f, DiscreteAdjoint{c}, o));
        return hv_of(hessian_vector(pr, f, v, DiscreteAdjoint{c}, o));
      };
      const std::vector<double> ref = run(StoreAll{});
      for (const Checkpointing& c : {Checkpointing{Uniform{4}}, Checkpointing{Binomial{3}},
                                     Checkpointing{Online{3}}})
        EXPECT_EQ(run(c), ref) << what << " order " << order;
    }
  }
  EXPECT_GE(tested, 7 * 2) << "every native stepper, gradient and H v";
}

INSTANTIATE_TEST_SUITE_P(EventModels, CrossMethodEvents,
                         ::testing::Values(EventFamilyModel::Kind::Ball,
                                           EventFamilyModel::Kind::Dose,
                                           EventFamilyModel::Kind::Harvest),
                         [](const auto& info) { return to_string(info.param); });

INSTANTIATE_TEST_SUITE_P(Models, CrossMethod,
                         ::testing::Values(MatrixModel::Kind::LotkaVolterra,
                                           MatrixModel::Kind::VanDerPol,
                                           MatrixModel::Kind::FisherKpp),
                         [](const auto& info) { return costate::test::to_string(info.param); });

}  // namespace
