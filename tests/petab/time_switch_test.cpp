// PEtab problems whose SBML model switches its right-hand side at a time
// that an estimated parameter sets (a piecewise input, t < τ): the
// integration is cut at τ, and every derivative carries the switch's
// movement — the adjoint's jump term λᵀ(f⁻ − f⁺) dτ/dθ and, in the forward
// sensitivities (the Fisher information, the seeded cvodes_forward
// gradient), its tangent S⁺ = S⁻ + (f⁻ − f⁺) dτ/dθ. Against the closed
// form of A' = a before τ, b after.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "costate/ode/cvodes.hpp"
#include "costate/petab/problem.hpp"
#include "text_problem.hpp"

namespace {

namespace petab = costate::petab;

const char* kSwitchModel = R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
  <model id="switch">
    <listOfCompartments>
      <compartment id="cell" size="1" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <listOfParameters>
      <parameter id="A" value="1" constant="false"/>
      <parameter id="a" value="0.8" constant="true"/>
      <parameter id="b" value="-0.3" constant="true"/>
      <parameter id="tau" value="2.5" constant="true"/>
    </listOfParameters>
    <listOfRules>
      <rateRule variable="A">
        <math xmlns="http://www.w3.org/1998/Math/MathML">
          <piecewise>
            <piece><ci> a </ci><apply><lt/><csymbol encoding="text"
              definitionURL="http://www.sbml.org/sbml/symbols/time"> t </csymbol><ci> tau </ci></apply></piece>
            <otherwise><ci> b </ci></otherwise>
          </piecewise>
        </math>
      </rateRule>
    </listOfRules>
  </model>
</sbml>
)";

petab::Problem problem() {
  costate::test::TextProblem t;
  t.model = kSwitchModel;
  t.parameters =
      "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
      "a\tlin\t-10\t10\t0.8\t1\n"
      "b\tlin\t-10\t10\t-0.3\t1\n"
      "tau\tlin\t0.5\t4.5\t2.5\t1\n"
      "sigma\tlin\t0.01\t10\t0.2\t0\n";
  t.observables =
      "observableId\tobservableFormula\tnoiseFormula\n"
      "obs_a\tA\tsigma\n";
  t.conditions = "conditionId\nc0\n";
  t.measurements =
      "observableId\tsimulationConditionId\ttime\tmeasurement\n"
      "obs_a\tc0\t1\t1.9\n"
      "obs_a\tc0\t2\t2.5\n"
      "obs_a\tc0\t3\t2.9\n"
      "obs_a\tc0\t4\t2.4\n"
      "obs_a\tc0\t5\t2.3\n";
  return t.read_text("switch/");
}

/// A(t) = 1 + a min(t, τ) + b max(t − τ, 0): its derivatives with respect
/// to (a, b, τ), the last (a − b) after τ — the switch's movement alone.
struct Closed {
  double llh = 0.0;
  double grad[3] = {};
  double F[3][3] = {};
};
Closed closed(double a, double b, double tau, double sigma) {
  const double t[5] = {1, 2, 3, 4, 5}, m[5] = {1.9, 2.5, 2.9, 2.4, 2.3};
  Closed c;
  for (int k = 0; k < 5; ++k) {
    const double A = 1.0 + a * std::min(t[k], tau) + b * std::max(t[k] - tau, 0.0);
    const double d[3] = {std::min(t[k], tau), std::max(t[k] - tau, 0.0), t[k] > tau ? a - b : 0.0};
    const double r = (m[k] - A) / sigma;
    c.llh += -0.5 * std::log(2.0 * M_PI * sigma * sigma) - 0.5 * r * r;
    for (int i = 0; i < 3; ++i) {
      c.grad[i] += r / sigma * d[i];
      for (int j = 0; j < 3; ++j) c.F[i][j] += d[i] * d[j] / (sigma * sigma);
    }
  }
  return c;
}

// The solution is piecewise linear, which CVODES and bdf integrate to
// rounding; what remains is the tolerance-level error of the integration
// (rtol 1e-10) on derivatives of size ~10–100: 1e-7 of the largest entry.
constexpr double kRelTol = 1e-7;

TEST(PetabTimeSwitch, EveryDerivativeCarriesTheMovingSwitch) {
  const petab::Problem pb = problem();
  const double a = 0.8, b = -0.3, tau = 2.5, sigma = 0.2;
  const Closed c = closed(a, b, tau, sigma);
  const std::vector<double> x = {a, b, tau};
  double gscale = 0.0, fscale = 0.0;
  for (int i = 0; i < 3; ++i) {
    gscale = std::max(gscale, std::abs(c.grad[i]));
    for (int j = 0; j < 3; ++j) fscale = std::max(fscale, std::abs(c.F[i][j]));
  }
  ASSERT_GT(std::abs(c.grad[2]), 1.0) << "the switch's movement carries dllh/dτ";
  // The adjoint gradient (the default method) and the Fisher information.
  petab::Options adj;
  adj.gradient = true;
  adj.fim = true;
  const petab::Result r = petab::evaluate(pb, x, adj);
  EXPECT_NEAR(r.llh, c.llh, kRelTol * std::abs(c.llh));
  ASSERT_EQ(r.gradient.size(), 3u);
  ASSERT_EQ(r.fim.size(), 9u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(r.gradient[static_cast<std::size_t>(i)], c.grad[i], kRelTol * gscale) << "adjoint, entry " << i;
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(r.fim[static_cast<std::size_t>(3 * i + j)], c.F[i][j], kRelTol * fscale)
          << "F(" << i << ", " << j << ")";
  }
  // The adjoint with polynomial interpolation on cvodes_adams: the first
  // segment's forward pass (a few steps against 100 points) is not held but
  // integrated again at its backward pass, with at least the 13 points that
  // interpolation needs there (evaluate.cpp, kReleaseMinPoints).
  petab::Options poly = adj;
  poly.fim = false;
  poly.integrator.method = costate::ode::Method::CvodesAdams;
  poly.method = costate::ode::CvodesAdjoint{.interpolation = costate::ode::CvodesInterpolation::Polynomial,
                                            .forward_tolerance_factor = petab::kAdjointForwardTolerance};
  const petab::Result rp = petab::evaluate(pb, x, poly);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(rp.gradient[static_cast<std::size_t>(i)], c.grad[i], kRelTol * gscale) << "polynomial, entry " << i;
  // What was integrated: a released segment's forward pass counts twice.
  // Each segment takes a few steps: with 40 points per checkpoint interval
  // every segment is held (its steps ≥ 1/16 of its points) and integrated
  // forward once; with the default 100 the first is released and
  // integrated again. One checkpoint interval either way, so the same
  // forward and backward steps.
  petab::Options held = adj;
  held.fim = false;
  held.method = costate::ode::CvodesAdjoint{.steps = 40,
                                            .forward_tolerance_factor = petab::kAdjointForwardTolerance};
  petab::Options released = held;
  released.method = costate::ode::CvodesAdjoint{.forward_tolerance_factor = petab::kAdjointForwardTolerance};
  const petab::Result rh = petab::evaluate(pb, x, held), rr = petab::evaluate(pb, x, released);
  EXPECT_GT(rh.steps, 0u);
  EXPECT_GT(rh.backward_steps, 0u);
  EXPECT_EQ(rr.backward_steps, rh.backward_steps);
  EXPECT_GT(rr.steps, rh.steps) << "the released first segment's pass, integrated again";
  EXPECT_LT(rr.steps - rh.steps, rh.steps) << "only the first segment's steps again";
  EXPECT_EQ(rr.gradient, rh.gradient);  // the same steps: the same bits
  // The gradient by seeded forward sensitivities.
  petab::Options fwd;
  fwd.gradient = true;
  fwd.method = costate::ode::CvodesForward{};
  const petab::Result f = petab::evaluate(pb, x, fwd);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(f.gradient[static_cast<std::size_t>(i)], c.grad[i], kRelTol * gscale) << "forward, entry " << i;
  EXPECT_EQ(f.backward_steps, 0u);  // forward sensitivities: no backward integration
  EXPECT_GT(f.steps, 0u);
}

}  // namespace
