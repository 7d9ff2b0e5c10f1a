// The bitwise guard of the ODE derivative layer (issue 31): every gradient,
// tangent gradient, H·v and calibration residual Jacobian of the cross-method
// matrix (tests/support/cross_method.hpp; the combinations are the support
// table's, ode::supports) — the numbers a refactor of the sweeps must leave
// bit for bit as they are.
//
// Two uses:
//  - as a test, it compares paths that must give the same bits: the discrete
//    adjoint's gradient and H·v under every checkpoint schedule against
//    StoreAll's (each reverse step depends only on its replayed state), and
//    a gradient replayed on its own step plan against the first run;
//  - with COSTATE_BITWISE_DUMP=FILE it writes every number as a hex float
//    (%a), one labelled line per result, so that the output of two builds
//    (before and after a refactor) can be diffed: identical files mean
//    identical bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/support.hpp"
#include "support/cross_method.hpp"

namespace {

using namespace costate::ode;
using costate::test::FunctionalKind;
using costate::test::MatrixFunctional;
using costate::test::MatrixModel;
using Problem_ = Problem<MatrixModel>;

/// The matrix's settings (as tests/ode/cross_method_test.cpp).
constexpr double kRtol = 1e-8;
constexpr double kCvodesHvRtol = 1e-10;

double fixed_dt(MatrixModel::Kind k) {
  switch (k) {
    case MatrixModel::Kind::LotkaVolterra: return 1e-2;
    case MatrixModel::Kind::VanDerPol: return 2e-3;
    case MatrixModel::Kind::FisherKpp: return 2.5e-3;
  }
  return 0.0;
}

IntegratorOptions options_for(Method m, MatrixModel::Kind k, double rtol) {
  IntegratorOptions o{.method = m, .rtol = rtol, .atol = 1e-2 * rtol};
  if (!is_adaptive(m)) o.dt = fixed_dt(k);
  o.max_steps = 1'000'000;
  return o;
}

SensitivityMethod method_of(SensitivityKind k, Checkpointing c = StoreAll{}) {
  switch (k) {
    case SensitivityKind::DiscreteAdjoint: return DiscreteAdjoint{.checkpointing = c};
    case SensitivityKind::Forward: return Forward{};
    case SensitivityKind::ContinuousAdjoint: return ContinuousAdjoint{};
    case SensitivityKind::CvodesForward: return CvodesForward{};
    case SensitivityKind::CvodesAdjoint: return CvodesAdjoint{};
    case SensitivityKind::IdasForward: return IdasForward{};
    case SensitivityKind::IdasAdjoint: return IdasAdjoint{};
  }
  return DiscreteAdjoint{};
}

/// The schedules compared with StoreAll (budgets small enough to recompute).
std::vector<std::pair<std::string, Checkpointing>> schedules() {
  return {{"uniform4", Uniform{.every = 4}},
          {"binomial3", Binomial{.snapshots = 3}},
          {"online3", Online{.snapshots = 3}}};
}

std::vector<double> all_of(const GradientResult& g) {
  std::vector<double> v{g.objective};
  v.insert(v.end(), g.wrt_parameters.begin(), g.wrt_parameters.end());
  v.insert(v.end(), g.wrt_initial_state.begin(), g.wrt_initial_state.end());
  return v;
}

std::vector<double> all_of(const HessianVectorResult& r) {
  std::vector<double> v{r.objective, r.directional_derivative};
  for (const auto* part : {&r.gradient_wrt_parameters, &r.gradient_wrt_initial_state,
                           &r.hv_wrt_parameters, &r.hv_wrt_initial_state})
    v.insert(v.end(), part->begin(), part->end());
  return v;
}

/// One direction moving p and y0 together, scaled to the variables.
HessianDirection direction(const Problem_& pr) {
  HessianDirection d;
  for (std::size_t j = 0; j < pr.p.size(); ++j)
    d.parameters.push_back((1.0 + 0.3 * static_cast<double>(j % 3)) *
                           std::max(std::abs(pr.p[j]), 0.1));
  for (std::size_t i = 0; i < pr.y0.size(); ++i)
    d.initial_state.push_back((i % 2 == 0 ? 1.0 : -1.0) * (0.5 + 0.1 * static_cast<double>(i % 5)) *
                              std::max(std::abs(pr.y0[i]), 0.1));
  return d;
}

/// The dump (COSTATE_BITWISE_DUMP), opened once per process.
class Dump {
 public:
  Dump() {
    if (const char* path = std::getenv("COSTATE_BITWISE_DUMP")) file_ = std::fopen(path, "w");
  }
  ~Dump() {
    if (file_) std::fclose(file_);
  }
  Dump(const Dump&) = delete;
  Dump& operator=(const Dump&) = delete;
  void line(const std::string& label, const std::vector<double>& v) {
    if (!file_) return;
    std::fprintf(file_, "%s:", label.c_str());
    for (double x : v) std::fprintf(file_, " %a", x);
    std::fprintf(file_, "\n");
    std::fflush(file_);
  }

 private:
  std::FILE* file_ = nullptr;
};

Dump& dump() {
  static Dump d;
  return d;
}

/// Exact equality of two result vectors (bits: -0 vs 0 and NaNs included).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) return false;
  return true;
}

class BitwiseGuard : public ::testing::TestWithParam<MatrixModel::Kind> {};

TEST_P(BitwiseGuard, EveryGradientIsTheSameUnderEveryScheduleAndReplay) {
  const MatrixModel::Kind mk = GetParam();
  const Problem_ pr = costate::test::matrix_problem(mk);
  for (FunctionalKind fk :
       {FunctionalKind::Terminal, FunctionalKind::Integral, FunctionalKind::Observations}) {
    const MatrixFunctional f = costate::test::matrix_functional(fk, pr);
    for (Method m : all_methods()) {
      const IntegratorOptions o = options_for(m, mk, kRtol);
      for (SensitivityKind k : all_sensitivity_kinds()) {
        if (!supports(k, o, 1)) continue;
        const std::string what =
            "grad " + to_string(mk) + " " + to_string(fk) + " " + to_string(k) + " " + to_string(m);
        const GradientResult g = gradient(pr, f, method_of(k), o);
        dump().line(what, all_of(g));
        if (k != SensitivityKind::DiscreteAdjoint) continue;
        // The same steps replayed: the same bits.
        EXPECT_TRUE(same_bits(all_of(gradient(pr, f, method_of(k), o, g.steps)), all_of(g)))
            << what << " replayed";
        for (const auto& [name, c] : schedules())
          EXPECT_TRUE(same_bits(all_of(gradient(pr, f, method_of(k, c), o)), all_of(g)))
              << what << " " << name;
      }
    }
  }
}

TEST_P(BitwiseGuard, EveryHessianVectorIsTheSameUnderEverySchedule) {
  const MatrixModel::Kind mk = GetParam();
  const Problem_ pr = costate::test::matrix_problem(mk);
  const HessianDirection v = direction(pr);
  for (FunctionalKind fk :
       {FunctionalKind::Terminal, FunctionalKind::Integral, FunctionalKind::Observations}) {
    const MatrixFunctional f = costate::test::matrix_functional(fk, pr);
    for (Method m : all_methods()) {
      const IntegratorOptions o = options_for(m, mk, is_cvodes(m) ? kCvodesHvRtol : kRtol);
      for (SensitivityKind k : all_sensitivity_kinds()) {
        if (!supports(k, o, 2)) continue;
        const std::string what =
            "hv " + to_string(mk) + " " + to_string(fk) + " " + to_string(k) + " " + to_string(m);
        const HessianVectorResult r = hessian_vector(pr, f, v, method_of(k), o);
        dump().line(what, all_of(r));
        if (k != SensitivityKind::DiscreteAdjoint) continue;
        for (const auto& [name, c] : schedules())
          EXPECT_TRUE(same_bits(all_of(hessian_vector(pr, f, v, method_of(k, c), o)), all_of(r)))
              << what << " " << name;
      }
    }
  }
}

TEST_P(BitwiseGuard, EveryResidualJacobianOfFixedStepsIsTheSameWithAndWithoutItsPlan) {
  const MatrixModel::Kind mk = GetParam();
  const Problem_ pr = costate::test::matrix_problem(mk);
  const MatrixFunctional f = costate::test::matrix_functional(FunctionalKind::Observations, pr);
  for (Method m : all_methods()) {
    if (!supports_calibration(SensitivityKind::DiscreteAdjoint, m) &&
        !supports_calibration(SensitivityKind::CvodesAdjoint, m))
      continue;
    const IntegratorOptions o = options_for(m, mk, kRtol);
    const std::string what = "residual_jacobian " + to_string(mk) + " " + to_string(m);
    const StepPlan plan = is_cvodes(m) ? StepPlan{} : gradient(pr, f, DiscreteAdjoint{}, o).steps;
    const ResidualSensitivities S = sensitivity_matrix(pr, f.obs, o, plan);
    std::vector<double> all = S.residuals;
    all.insert(all.end(), S.jacobian.begin(), S.jacobian.end());
    dump().line(what, all);
    if (!o.fixed_step()) continue;
    // Fixed steps without a plan: chosen afresh by the same landing rule,
    // the same steps. (An adaptive plan depends on the objective's System:
    // the gradient's differs from the residuals'.)
    const ResidualSensitivities again = sensitivity_matrix(pr, f.obs, o, StepPlan{});
    std::vector<double> all2 = again.residuals;
    all2.insert(all2.end(), again.jacobian.begin(), again.jacobian.end());
    EXPECT_TRUE(same_bits(all2, all)) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BitwiseGuard,
                         ::testing::Values(MatrixModel::Kind::LotkaVolterra,
                                           MatrixModel::Kind::VanDerPol,
                                           MatrixModel::Kind::FisherKpp),
                         [](const auto& info) { return costate::test::to_string(info.param); });

}  // namespace
