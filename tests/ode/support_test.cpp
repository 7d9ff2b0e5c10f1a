// The support table (ode::supports) against what the library does: every
// (sensitivity method × integrator × order 1, 2) on Lotka–Volterra with
// observations, a running cost and a terminal. Where the table says yes, the
// gradient agrees with central differences of the objective and H v with
// central differences of gradients; where it says no, ode::gradient /
// ode::hessian_vector throw exactly the table's message. The seed of the
// cross-method matrix: a new method or stepper is a row or column of the
// table, and this test then runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/support.hpp"
#include "support/lotka_volterra.hpp"
#include "support/relative_error.hpp"

namespace {

using namespace costate::ode;
using costate::test::lv_objective;
using costate::test::lv_problem;
using costate::test::max_rel_err;

// Central differences are Richardson-extrapolated, (4 D(h/2) − D(h)) / 3,
// so their truncation is O(h⁴) (plain central differences at the adaptive
// steps below were measured 4.5e-5 off: LV's third derivatives are large).
/// Relative step for the discrete methods, h = kFdStep · (1 + |x|). They
/// replay the gradient's steps (and bdf orders), so the differences see one
/// smooth function: truncation ≈ 1e-18, round-off ≈ 1e-16 |J| / h ≈ 1e-11
/// of the gradient, and for the implicit steppers Newton's newton_tol
/// (measured 2e-11 … 4e-10, bdf 2.6e-9).
constexpr double kFdStep = 1e-5;
/// Gradient of the discrete solution vs differences of the same replayed
/// discrete objective: both exact up to the differences' error; 1e-7 of
/// max |∇J| leaves margin.
constexpr double kDiscreteGradientRelTol = 1e-7;
/// Continuous adjoint and CVODES (rtol 1e-10): the gradient of the exact
/// objective up to O(rtol) ≈ 1e-8 relative (cvodes_test.cpp allows 1e-6 at
/// this rtol), and the differences of adaptive runs, whose steps move with
/// p, carry the solver's noise ~10 rtol |J| / h ≈ 1e-6 at the larger step
/// kAdaptiveFdStep = 1e-3 (truncation ~1e-10); measured 5e-10
/// (continuous adjoint) … 1e-7 (cvodes_forward, BDF); 1e-5.
constexpr double kAdaptiveGradientRelTol = 1e-5;
constexpr double kAdaptiveFdStep = 1e-3;
/// H v of the discrete objective vs differences of discrete gradients on
/// the replayed steps, step kHvStep along v (|v| ~ 1): truncation ~1e-14,
/// round-off 1e-16 |∇J| / h ≈ 1e-10 of max |H v| (measured 1.5e-11 …
/// 9e-11); 1e-6.
constexpr double kDiscreteHvRelTol = 1e-6;
constexpr double kHvStep = 1e-3;
/// CVODES' continuous second-order adjoint (rtol 1e-10) vs differences of
/// CVODES gradients at step kAdaptiveHvStep: CVODES' second-derivative error
/// up to ~1e4 rtol (cvodes_hessian_test.cpp measured 8e-8 … 5e-7) plus the
/// differences' noise ~1e2 rtol |∇J| / h ≈ 5e-6 (measured 6e-7 BDF,
/// 1.6e-6 Adams); 2e-5.
constexpr double kCvodesHvRelTol = 2e-5;
constexpr double kAdaptiveHvStep = 2e-3;

/// (4 D(h/2) − D(h)) / 3 with D(h) = (f(h) − f(−h)) / 2h, entry by entry.
std::vector<double> richardson(const std::function<std::vector<double>(double)>& f, double h) {
  auto central = [&](double s) {
    const std::vector<double> a = f(s), b = f(-s);
    std::vector<double> d(a.size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = (a[i] - b[i]) / (2.0 * s);
    return d;
  };
  const std::vector<double> d1 = central(h), d2 = central(0.5 * h);
  std::vector<double> d(d1.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = (4.0 * d2[i] - d1[i]) / 3.0;
  return d;
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
  return DiscreteAdjoint{};
}

/// Fixed-step methods at dt = 0.01, adaptive ones tight (the continuous
/// adjoint and CVODES differentiate the exact solution only up to rtol).
IntegratorOptions options_for(Method m) {
  IntegratorOptions o{.method = m};
  if (is_adaptive(m)) {
    o.rtol = 1e-10;
    o.atol = 1e-12;
  } else {
    o.dt = 0.01;
  }
  return o;
}

/// The methods whose derivative is that of the discrete solution (and
/// which replay given steps).
bool is_discrete(SensitivityKind k) {
  return k == SensitivityKind::DiscreteAdjoint || k == SensitivityKind::Forward;
}

using LvProblem = decltype(lv_problem());

/// x = (p, y0) as one vector, and back.
std::vector<double> all_of(const std::vector<double>& p, const std::vector<double>& y0) {
  std::vector<double> x = p;
  x.insert(x.end(), y0.begin(), y0.end());
  return x;
}
LvProblem moved(LvProblem pr, const std::vector<double>& d, double s) {
  const std::size_t np = pr.p.size();
  for (std::size_t j = 0; j < np; ++j) pr.p[j] += s * d[j];
  for (std::size_t i = 0; i < pr.y0.size(); ++i) pr.y0[i] += s * d[np + i];
  return pr;
}

std::string thrown_by(const std::function<void()>& call) {
  try {
    call();
  } catch (const costate::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Support, KindsRoundTripThroughNamesAndValues) {
  for (SensitivityKind k : all_sensitivity_kinds()) {
    EXPECT_EQ(sensitivity_kind_from_string(to_string(k)), k);
    EXPECT_EQ(kind_of(method_of(k)), k);
  }
  const std::string msg = thrown_by([] { (void)sensitivity_kind_from_string("adjoint"); });
  EXPECT_NE(msg.find("valid methods: discrete_adjoint, forward, continuous_adjoint, "
                     "cvodes_forward, cvodes_adjoint, idas_forward or idas_adjoint"),
            std::string::npos)
      << msg;
  EXPECT_THROW((void)supports(SensitivityKind::Forward, Method::RK4, 3), costate::Error);
}

/// docs/sensitivity-support.md's table, row by row: method → (the
/// integrators it names, gradient column, Hessian column).
struct DocRow {
  std::vector<Method> integrators;
  bool gradient = false, hessian = false;
};
std::map<SensitivityKind, DocRow> documented_table(const std::filesystem::path& page) {
  std::ifstream in(page);
  std::map<SensitivityKind, DocRow> rows;
  const std::regex row(R"(^\|\s*`([a-z_]+)`\s*\|([^|]*)\|\s*(yes|—)\s*\|\s*(yes|—)\s*\|\s*$)");
  const std::regex name("`([a-z_0-9]+)`");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    DocRow r;
    const std::string ints = m[2].str();
    for (std::sregex_iterator it(ints.begin(), ints.end(), name), end; it != end; ++it)
      r.integrators.push_back(method_from_string((*it)[1].str()));
    r.gradient = m[3].str() == "yes";
    r.hessian = m[4].str() == "yes";
    rows[sensitivity_kind_from_string(m[1].str())] = r;
  }
  return rows;
}

// The page users read is the table the code asks: every (method ×
// integrator × order) cell of docs/sensitivity-support.md against
// ode::supports (with adaptive: true, the page's condition for
// continuous_adjoint). A row the code changes without the page fails here.
TEST(Support, TheDocumentedTableIsTheTable) {
  const char* src = std::getenv("COSTATE_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "COSTATE_SOURCE_DIR not set (ctest sets it)";
  const std::filesystem::path page = std::filesystem::path(src) / "docs" / "sensitivity-support.md";
  ASSERT_TRUE(std::filesystem::exists(page)) << page;
  const std::map<SensitivityKind, DocRow> rows = documented_table(page);
  ASSERT_EQ(rows.size(), all_sensitivity_kinds().size()) << "one row per method in " << page;
  for (SensitivityKind k : all_sensitivity_kinds()) {
    ASSERT_TRUE(rows.count(k)) << to_string(k) << " has no row in " << page;
    const DocRow& r = rows.at(k);
    for (Method m : all_methods()) {
      const bool listed =
          std::find(r.integrators.begin(), r.integrators.end(), m) != r.integrators.end();
      const std::string what = to_string(k) + " × " + to_string(m);
      EXPECT_EQ(static_cast<bool>(supports(k, m, 1)), listed && r.gradient) << what << " (gradient)";
      EXPECT_EQ(static_cast<bool>(supports(k, m, 2)), listed && r.hessian) << what << " (Hessian)";
    }
  }
}

TEST(Support, MessagesNameTheCombinationAndTheFix) {
  // The cases issue 14 and the old scattered checks named.
  const Support ca = supports(SensitivityKind::ContinuousAdjoint, Method::CrankNicolson, 1);
  EXPECT_FALSE(ca);
  EXPECT_NE(ca.message.find("sensitivity.method = continuous_adjoint with integrator.method = "
                            "crank_nicolson is not supported for gradients"),
            std::string::npos)
      << ca.message;
  EXPECT_NE(ca.message.find("continuous_adjoint supports integrator.method = dopri5 (adaptive), "
                            "sdirk3 (adaptive) or bdf (adaptive)"),
            std::string::npos)
      << ca.message;
  EXPECT_NE(ca.message.find("with integrator.method = crank_nicolson use sensitivity.method = "
                            "discrete_adjoint or forward"),
            std::string::npos)
      << ca.message;
  const Support fw = supports(SensitivityKind::Forward, Method::RK4, 2);
  EXPECT_NE(fw.message.find("forward has no Hessian-vector products"), std::string::npos)
      << fw.message;
  EXPECT_NE(fw.message.find("with integrator.method = rk4 use sensitivity.method = "
                            "discrete_adjoint"),
            std::string::npos)
      << fw.message;
  const Support cv = supports(SensitivityKind::DiscreteAdjoint, Method::CvodesBdf, 2);
  EXPECT_NE(cv.message.find("with integrator.method = cvodes_bdf use sensitivity.method = "
                            "cvodes_adjoint"),
            std::string::npos)
      << cv.message;
  // dopri5 with adaptive: false is a fixed-step method: no continuous adjoint.
  IntegratorOptions fixed = options_for(Method::Dopri5);
  fixed.adaptive = false;
  fixed.dt = 0.01;
  const Support fx = supports(SensitivityKind::ContinuousAdjoint, fixed, 1);
  EXPECT_FALSE(fx);
  EXPECT_NE(fx.message.find("needs integrator.adaptive = true"), std::string::npos) << fx.message;
  EXPECT_NE(fx.message.find("(adaptive: false) use sensitivity.method = discrete_adjoint or forward"),
            std::string::npos)
      << fx.message;
  EXPECT_TRUE(supports(SensitivityKind::DiscreteAdjoint, fixed, 1));
  const auto pr = lv_problem();
  const auto obj = lv_objective();
  EXPECT_EQ(thrown_by([&] { (void)gradient(pr, obj, ContinuousAdjoint{}, fixed); }),
            "ode::gradient: " + fx.message);
  // Calibration: its residual Jacobian is forward tangents of the steps
  // (native steppers) or CVODES' forward sensitivities.
  EXPECT_TRUE(supports_calibration(SensitivityKind::ContinuousAdjoint, Method::Dopri5));
  EXPECT_TRUE(supports_calibration(SensitivityKind::Forward, Method::Bdf));
  // CVODES: the residual Jacobian by its forward sensitivities.
  EXPECT_TRUE(supports_calibration(SensitivityKind::CvodesForward, Method::CvodesBdf));
  EXPECT_TRUE(supports_calibration(SensitivityKind::CvodesAdjoint, Method::CvodesAdams));
  // The integrator allows calibration, the method does not: the method's own message.
  const Support cc = supports_calibration(SensitivityKind::DiscreteAdjoint, Method::CvodesBdf);
  EXPECT_FALSE(cc);
  EXPECT_EQ(cc.message, supports(SensitivityKind::DiscreteAdjoint, Method::CvodesBdf, 1).message);
  EXPECT_EQ(supports_calibration(SensitivityKind::ContinuousAdjoint, Method::RK4).message,
            supports(SensitivityKind::ContinuousAdjoint, Method::RK4, 1).message);
}

TEST(Support, TheLibraryDoesWhatTheTableSays) {
  const auto pr = lv_problem();
  const auto obj = lv_objective();
  const std::vector<double> x0 = all_of(pr.p, pr.y0);
  // The Hessian's direction, over p and y0.
  const std::vector<double> v{0.7, -0.4, 0.3, 0.5, -0.6, 0.8};
  const HessianDirection hd{{v.begin(), v.begin() + 4}, {v.begin() + 4, v.end()}};
  int supported = 0, refused = 0;
  for (SensitivityKind k : all_sensitivity_kinds()) {
    for (Method m : all_methods()) {
      const SensitivityMethod method = method_of(k);
      const IntegratorOptions opt = options_for(m);
      const std::string name = to_string(k) + " × " + to_string(m);
      // ---------------------------------------------------------- order 1
      const Support s1 = supports(k, opt, 1);
      if (!s1) {
        ++refused;
        EXPECT_FALSE(s1.message.empty()) << name;
        EXPECT_EQ(thrown_by([&] { (void)gradient(pr, obj, method, opt); }),
                  "ode::gradient: " + s1.message)
            << name;
      } else {
        ++supported;
        const GradientResult g = gradient(pr, obj, method, opt);
        const std::vector<double> grad = all_of(g.wrt_parameters, g.wrt_initial_state);
        const bool discrete = is_discrete(k);
        auto J = [&](const LvProblem& q) {
          return discrete ? gradient(q, obj, method, opt, g.steps).objective
                          : gradient(q, obj, method, opt).objective;
        };
        std::vector<double> fd(x0.size());
        for (std::size_t c = 0; c < x0.size(); ++c) {
          std::vector<double> e(x0.size(), 0.0);
          const double h = (discrete ? kFdStep : kAdaptiveFdStep) * (1.0 + std::abs(x0[c]));
          e[c] = 1.0;
          fd[c] = richardson([&](double t) { return std::vector<double>{J(moved(pr, e, t))}; }, h)[0];
        }
        const double err = max_rel_err(grad, fd);
        std::printf("# %-40s gradient vs central differences: %.2e\n", name.c_str(), err);
        EXPECT_LT(err, discrete ? kDiscreteGradientRelTol : kAdaptiveGradientRelTol) << name;
      }
      // ---------------------------------------------------------- order 2
      const Support s2 = supports(k, opt, 2);
      if (!s2) {
        ++refused;
        EXPECT_FALSE(s2.message.empty()) << name;
        EXPECT_EQ(thrown_by([&] { (void)hessian_vector(pr, obj, hd, method, opt); }),
                  "ode::hessian_vector: " + s2.message)
            << name;
        continue;
      }
      ++supported;
      EXPECT_TRUE(s1) << name << ": second order without first";
      const HessianVectorResult r = hessian_vector(pr, obj, hd, method, opt);
      const std::vector<double> hv = all_of(r.hv_wrt_parameters, r.hv_wrt_initial_state);
      const bool discrete = is_discrete(k);
      const double h = discrete ? kHvStep : kAdaptiveHvStep;
      auto grad_at = [&](double s) {
        const GradientResult g =
            discrete ? gradient(moved(pr, v, s), obj, method, opt, r.steps)
                     : gradient(moved(pr, v, s), obj, method, opt);
        return all_of(g.wrt_parameters, g.wrt_initial_state);
      };
      const std::vector<double> fd = richardson(grad_at, h);
      const double err = max_rel_err(hv, fd);
      std::printf("# %-40s H v vs differences of gradients: %.2e\n", name.c_str(), err);
      EXPECT_LT(err, discrete ? kDiscreteHvRelTol : kCvodesHvRelTol) << name;
    }
  }
  // 23 first-order and 9 second-order combinations work today (the
  // continuous adjoint with dopri5, sdirk3 and bdf; idas_forward and
  // idas_adjoint with idas); the other 108 are refused. (A new row or
  // column changes these counts on purpose.)
  EXPECT_EQ(supported, 32);
  EXPECT_EQ(refused, 108);
}

}  // namespace
