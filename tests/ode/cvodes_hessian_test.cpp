// Hessian–vector products through CVODES (ode::hessian_vector with
// CvodesAdjoint: the continuous second-order adjoint): against the native
// forward-over-discrete-adjoint H v at tight tolerances, against central
// differences of CVODES adjoint gradients, the gradient part against
// ode::gradient's, symmetry of the full Hessian, directions in y0 — on
// Lotka–Volterra with observations + running cost + terminal (BDF and
// Adams, Hermite and polynomial interpolation) and stiff Van der Pol μ = 1e3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"
#include "support/lotka_volterra.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;

/// CVODES at rtol 1e-10 against the discrete H v of dopri5 at rtol 1e-13
/// (Lotka–Volterra): both approximate the exact H v; CVODES' global error in
/// second derivatives is up to ~10⁴ × its rtol on [0, 5] (measured: BDF
/// 8e-8, Adams 5e-9 … 5e-7 relative; cvodes_test.cpp allows the gradient
/// 1e-6 at rtol 1e-10); 2e-6.
constexpr double kNativeRelTol = 2e-6;
/// The gradient part of hessian_vector vs ode::gradient(CvodesAdjoint):
/// the same forward steps (the sensitivity is outside the error test, with a
/// staggered corrector) and the same λ problem; only the objective terms'
/// gradients come from a Dual recording instead of a double one — at most
/// round-off (measured: bitwise equal); 1e-12 relative.
constexpr double kSameGradientRelTol = 1e-12;
/// Central differences of CVODES adjoint gradients along v, Richardson-
/// extrapolated (steps h and h/2, truncation O(h⁴): measured 1.9e-6
/// relative at h = 1e-2 on LV, so ≈ 3e-9 at h = 2e-3), plus CVODES' noise,
/// ~10² rtol |∇J| / h ≈ 5e-8 relative at rtol 1e-12; 1e-6 leaves margin for
/// the step-sequence changes between the perturbed runs.
constexpr double kFdRelTol = 1e-6;
constexpr double kFdStep = 2e-3;
/// ∇J · v from the ε-part of J (CVODES' forward sensitivity s, which is
/// outside the error test so that the state's steps stay the gradient's)
/// against the adjoint gradient dotted with v: s is only as accurate as the
/// state's steps make it, measured 1.8e-6 (BDF) and 4.9e-6 (Adams) relative
/// at rtol 1e-10; 2e-5.
constexpr double kTangentRelTol = 2e-5;
/// H_ij and H_ji from different products (columns j and i): equal up to
/// CVODES' errors in each, O(rtol · 10³) relative at rtol 1e-10.
constexpr double kSymmetryTol = 1e-6;

using costate::test::dot;
using costate::test::lv_objective;
using costate::test::lv_problem;
using costate::test::LvObjective;
using costate::test::max_abs;
using costate::test::max_rel_err;

IntegratorOptions cvodes(Method m, double rtol, double atol) {
  return {.method = m, .rtol = rtol, .atol = atol};
}

/// H v (p then y0).
std::vector<double> hv_all(const HessianVectorResult& r) {
  std::vector<double> all = r.hv_wrt_parameters;
  all.insert(all.end(), r.hv_wrt_initial_state.begin(), r.hv_wrt_initial_state.end());
  return all;
}

/// Richardson-extrapolated central differences of the CVODES adjoint
/// gradient (p then y0) along v.
template <class M, class O>
std::vector<double> fd_hv(const Problem<M>& pr, const O& obj, const HessianDirection& v,
                          const CvodesAdjoint& method, const IntegratorOptions& opt) {
  auto at = [&](double s) {
    Problem<M> q = pr;
    for (std::size_t j = 0; j < q.p.size(); ++j) q.p[j] += s * v.parameters[j];
    if (!v.initial_state.empty())
      for (std::size_t i = 0; i < q.y0.size(); ++i) q.y0[i] += s * v.initial_state[i];
    const GradientResult g = gradient(q, obj, method, opt);
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
  const std::vector<double> d1 = central(kFdStep), d2 = central(0.5 * kFdStep);
  std::vector<double> d(d1.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = (4.0 * d2[i] - d1[i]) / 3.0;
  return d;
}

TEST(CvodesHessian, LotkaVolterraAgreesWithNativeDiscreteHessian) {
  const auto pr = lv_problem();
  const LvObjective obj = lv_objective();
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.25}};
  const HessianVectorResult ref = hessian_vector(
      pr, obj, v, DiscreteAdjoint{}, {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  for (Method m : {Method::CvodesBdf, Method::CvodesAdams}) {
    const IntegratorOptions o = cvodes(m, 1e-10, 1e-12);
    for (CvodesInterpolation ip : {CvodesInterpolation::Hermite, CvodesInterpolation::Polynomial}) {
      const CvodesAdjoint method{.steps = 20, .interpolation = ip};
      const HessianVectorResult r = hessian_vector(pr, obj, v, method, o);
      SCOPED_TRACE(to_string(m) + " " + to_string(ip));
      const double e = max_rel_err(hv_all(r), hv_all(ref));
      std::printf("# %s %s: H v vs dopri5 discrete H v: %.2e relative\n", to_string(m).c_str(),
                  to_string(ip).c_str(), e);
      EXPECT_LT(e, kNativeRelTol);
      // The gradient part is ode::gradient's with the same settings.
      const GradientResult g = gradient(pr, obj, method, o);
      std::printf("#   gradient part vs ode::gradient: %.2e relative\n",
                  std::max(max_rel_err(r.gradient_wrt_parameters, g.wrt_parameters),
                           max_rel_err(r.gradient_wrt_initial_state, g.wrt_initial_state)));
      EXPECT_LT(std::abs(r.objective - g.objective) / std::abs(g.objective), kSameGradientRelTol);
      EXPECT_LT(max_rel_err(r.gradient_wrt_parameters, g.wrt_parameters), kSameGradientRelTol);
      EXPECT_LT(max_rel_err(r.gradient_wrt_initial_state, g.wrt_initial_state),
                kSameGradientRelTol);
      // ∇J · v is the ε-part of J (an independent check of the forward sensitivity).
      const double gv =
          dot(g.wrt_parameters, v.parameters) + dot(g.wrt_initial_state, v.initial_state);
      EXPECT_LT(std::abs(r.directional_derivative - gv) / std::abs(gv), kTangentRelTol);
    }
  }
}

TEST(CvodesHessian, LotkaVolterraAgreesWithDifferencesOfCvodesGradients) {
  const auto pr = lv_problem();
  const LvObjective obj = lv_objective();
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-12, 1e-14);
  const CvodesAdjoint method{};
  // A direction in p and y0, and one in y0 only.
  for (const HessianDirection& v :
       {HessianDirection{{0.3, -0.7, 0.2, 0.5}, {0.4, -0.25}},
        HessianDirection{{0.0, 0.0, 0.0, 0.0}, {1.0, 0.5}}}) {
    const HessianVectorResult r = hessian_vector(pr, obj, v, method, o);
    const double e = max_rel_err(hv_all(r), fd_hv(pr, obj, v, method, o));
    std::printf("# H v vs central differences of CVODES gradients: %.2e relative\n", e);
    EXPECT_LT(e, kFdRelTol);
  }
}

TEST(CvodesHessian, FullHessianIsSymmetricAndMatchesNative) {
  const auto pr = lv_problem();
  const LvObjective obj = lv_objective();
  const HessianResult h =
      hessian(pr, obj, CvodesAdjoint{}, cvodes(Method::CvodesBdf, 1e-10, 1e-12));
  const HessianResult ref = hessian(pr, obj, DiscreteAdjoint{},
                                    {.method = Method::Dopri5, .rtol = 1e-13, .atol = 1e-14});
  std::printf("# full 4x4 Hessian: asymmetry %.2e, vs dopri5 %.2e\n", h.asymmetry,
              (h.hessian - ref.hessian).cwiseAbs().maxCoeff() / ref.hessian.cwiseAbs().maxCoeff());
  EXPECT_EQ(h.products, 4);
  EXPECT_LT(h.asymmetry, kSymmetryTol);
  EXPECT_LT((h.hessian - ref.hessian).cwiseAbs().maxCoeff() / ref.hessian.cwiseAbs().maxCoeff(),
            kNativeRelTol);
}

/// A terminal and a running cost for Van der Pol (one parameter μ).
struct VdpObjective {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    return T(0.5 * (y[0] * y[0] + y[1] * y[1]) + 1e-3 * p[0] * y[1]);
  }
  template <class T>
  T running(double t, std::span<const T> y, std::span<const T> p) const {
    return T(y[0] * y[1] * (1.0 + 0.01 * t) + 1e-4 * p[0] * y[0]);
  }
};

TEST(CvodesHessian, StiffVanDerPolAgreesWithCrankNicolsonAndDifferences) {
  // μ = 1e3 on [0, 0.5]: through the fast transient onto the slow manifold.
  const Problem<VanDerPol> pr{VanDerPol{}, {2.0, -2.0 / 3.0}, {1e3}, {0.0, 0.5}};
  const VdpObjective obj;
  // v_p = 50: μ = 1e3 moves by 0.1 at the differences' step (a relative
  // 1e-4, above CVODES' noise).
  const HessianDirection v{{50.0}, {0.5, -1.0}};
  const IntegratorOptions o = cvodes(Method::CvodesBdf, 1e-10, 1e-12);
  const HessianVectorResult r = hessian_vector(pr, obj, v, CvodesAdjoint{}, o);
  // Crank–Nicolson's discrete H v at dt = 1e-4: its O(dt²) error (the
  // gradient's is allowed 1e-5 in cvodes_test.cpp); measured 1.9e-8.
  constexpr double kCnRelTol = 1e-6;
  const HessianVectorResult cn =
      hessian_vector(pr, obj, v, DiscreteAdjoint{}, {.method = Method::CrankNicolson, .dt = 1e-4});
  const double e_cn = max_rel_err(hv_all(r), hv_all(cn));
  // Central differences of CVODES gradients at rtol 1e-12 against H v at
  // rtol 1e-12 (at rtol 1e-10 the differences' noise was 3.7e-6; measured
  // 1.6e-7 at 1e-12, and H v at 1e-10 and 1e-12 agree to 1e-9): 1e-6.
  constexpr double kStiffFdRelTol = 1e-6;
  const IntegratorOptions tight = cvodes(Method::CvodesBdf, 1e-12, 1e-14);
  const HessianVectorResult rt = hessian_vector(pr, obj, v, CvodesAdjoint{}, tight);
  const double e_fd = max_rel_err(hv_all(rt), fd_hv(pr, obj, v, CvodesAdjoint{}, tight));
  std::printf("# stiff Van der Pol: H v vs Crank-Nicolson %.2e, vs differences %.2e\n", e_cn,
              e_fd);
  EXPECT_LT(e_cn, kCnRelTol);
  EXPECT_LT(e_fd, kStiffFdRelTol);
  const GradientResult g = gradient(pr, obj, CvodesAdjoint{}, o);
  EXPECT_LT(max_rel_err(r.gradient_wrt_parameters, g.wrt_parameters), kSameGradientRelTol);
  EXPECT_LT(max_rel_err(r.gradient_wrt_initial_state, g.wrt_initial_state), kSameGradientRelTol);
}

TEST(CvodesHessian, RejectsBadSettings) {
  const auto pr = lv_problem();
  const LvObjective obj = lv_objective();
  const HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {}};
  // CVODES' adjoint needs a CVODES integrator.
  EXPECT_THROW(
      (void)hessian_vector(pr, obj, v, CvodesAdjoint{}, {.method = Method::RK4, .dt = 0.01}),
               costate::Error);
  // CVODES chooses its own steps.
  const StepPlan times({0.0, 5.0});
  EXPECT_THROW((void)hessian_vector(pr, obj, v, CvodesAdjoint{},
                                    cvodes(Method::CvodesBdf, 1e-8, 1e-10), times),
               costate::Error);
  // Polynomial interpolation needs ≥ 6 BDF steps per checkpoint interval.
  EXPECT_THROW((void)hessian_vector(
                   pr, obj, v,
                   CvodesAdjoint{.steps = 3, .interpolation = CvodesInterpolation::Polynomial},
                   cvodes(Method::CvodesBdf, 1e-8, 1e-10)),
               costate::Error);
  // The forward-sensitivity method has no second order.
  EXPECT_THROW(
      (void)hessian_vector(pr, obj, v, CvodesForward{}, cvodes(Method::CvodesBdf, 1e-8, 1e-10)),
               costate::Error);
}

}  // namespace
