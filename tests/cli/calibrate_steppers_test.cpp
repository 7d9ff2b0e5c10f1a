// `costate calibrate` of the Lotka–Volterra example (data/examples/
// lotka_volterra_calibration.yaml) through every stepper calibration takes
// (the native ones and CVODES' BDF),
// each at tight tolerances: the fit is a property of the data, not of the
// stepper, so the fitted values and their Gauss–Newton standard errors must
// agree (issue 14: before the residual Jacobian ran on the steppers' own
// tangents, bdf's standard errors were up to 7 % off dopri5's and its fit
// ended not_converged; sdirk3's 0.6 %).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/relative_error.hpp"
#include "../support/run_costate.hpp"

namespace {

using Json = nlohmann::json;
using costate::test::rel_err;

// The criteria. The steppers' discretisation errors at these settings
// (rk4 dt = 1e-3; the adaptive ones at rtol 1e-10, atol 1e-12) move the fit
// by ~1e-11 (rk4, sdirk3) to ~2e-7 (bdf, whose global error is the largest)
// relative, measured; the optimizer's gatol 1e-7 leaves ~1e-11.
constexpr double kValueTol = 1e-6;  // fitted values
constexpr double kErrorTol = 1e-4;  // standard errors

struct Fit {
  int code = -1;
  std::map<std::string, double> values, errors;
  std::string status, termination;
};

Fit calibrate(const std::string& settings, const std::filesystem::path& dir) {
  const std::string input = COSTATE_EXAMPLES_DIR "/lotka_volterra_calibration.yaml";
  const auto r = costate::test::run_command(
      dir, COSTATE_EXE,
      "calibrate '" + input + "' --json -q -o fit.h5 " + settings);
  Fit f;
  f.code = r.code;
  // 0: converged; 2: stopped without converging (the fit is still reported).
  EXPECT_TRUE(r.code == 0 || r.code == 2) << settings << "\n" << r.err << r.out;
  if (r.code != 0 && r.code != 2) return f;
  const Json j = Json::parse(r.out);
  f.status = j["status"];
  f.termination = j["termination"];
  for (const auto& [k, v] : j["parameters"].items()) f.values[k] = v.get<double>();
  for (const auto& [k, v] : j["standard_errors"].items()) f.errors[k] = v.get<double>();
  return f;
}

TEST(CalibrateSteppers, EveryStepperFitsTheSameValuesAndStandardErrors) {
  // Private to this process: two ctest runs at once (two build trees) wrote
  // one fixed folder's fit.h5 together, and one calibrate was refused
  // (concurrent writers to one -o) with empty JSON.
  const auto dir = costate::test::scratch_dir("costate_calibrate_steppers");
  const std::string tight =
      "--set integrator.rtol=1e-10 --set integrator.atol=1e-12 --set integrator.dt=null";
  const Fit ref = calibrate("--set integrator.method=dopri5 " + tight, dir);
  ASSERT_EQ(ref.values.size(), 4u);
  ASSERT_EQ(ref.errors.size(), 4u);
  EXPECT_EQ(ref.status, "ok");
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"rk4", "--set integrator.method=rk4 --set integrator.dt=1e-3"},
      {"sdirk3", "--set integrator.method=sdirk3 " + tight},
      {"bdf", "--set integrator.method=bdf " + tight},
      // CVODES: the gradient by its adjoint or its forward sensitivities,
      // the residual Jacobian by its forward sensitivities at the
      // observation times.
      {"cvodes_bdf/cvodes_adjoint",
       "--set integrator.method=cvodes_bdf --set sensitivity.method=cvodes_adjoint " + tight},
      {"cvodes_bdf/cvodes_forward",
       "--set integrator.method=cvodes_bdf --set sensitivity.method=cvodes_forward " + tight},
  };
  for (const auto& [name, settings] : runs) {
    const Fit f = calibrate(settings, dir);
    // bdf's optimizer ends in a line-search failure near the optimum (as on
    // main, before the residual Jacobian was fixed): its objective is not
    // smooth in p at the level of its global error (its J differs from
    // dopri5's by 2e-8 relative here) — a change of p changes its adaptive
    // steps and orders, which the exact gradient of the replayed steps does
    // not see. The fit it reports is still the optimum to the stepper's
    // accuracy, which is what the values and standard errors below check.
    // cvodes_forward ends the same way (DIVERGED_LS_FAILURE, measured: its
    // fit within 1.7e-7 relative of dopri5's): CVODES' gradient is that of
    // the continuous objective to its tolerances, not of the objective
    // CVODES computes, whose adaptive steps move with p. cvodes_adjoint
    // converges here (its fit within 1e-8 relative of dopri5's).
    if (name != "bdf" && name != "cvodes_bdf/cvodes_forward") {
      EXPECT_EQ(f.status, "ok") << name << ": " << f.termination;
    }
    ASSERT_EQ(f.values.size(), ref.values.size()) << name;
    ASSERT_EQ(f.errors.size(), ref.errors.size()) << name;
    double worst_value = 0.0, worst_error = 0.0;
    for (const auto& [k, v] : ref.values) {
      ASSERT_TRUE(f.values.count(k) && f.errors.count(k)) << name << " " << k;
      worst_value = std::max(worst_value, rel_err(f.values.at(k), v));
      worst_error = std::max(worst_error, rel_err(f.errors.at(k), ref.errors.at(k)));
      EXPECT_LE(rel_err(f.values.at(k), v), kValueTol)
          << name << " " << k << " = " << f.values.at(k) << " vs dopri5 " << v;
      EXPECT_LE(rel_err(f.errors.at(k), ref.errors.at(k)), kErrorTol)
          << name << " se(" << k << ") = " << f.errors.at(k) << " vs dopri5 " << ref.errors.at(k);
    }
    // The measured agreement (for the record: the criteria are above).
    std::printf("# %-26s vs dopri5: values %.1e, standard errors %.1e (relative, worst), %s\n",
                name.c_str(), worst_value, worst_error, f.termination.c_str());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
