// `costate sensitivity --check` on a file with conditions
// (data/examples/decay_conditions.yaml, five conditions): the summed
// gradient against central differences of the summed objective, each J
// from its own `costate sensitivity` run at shifted parameters, and the
// command's own directional check of the sum. (--resume over conditions:
// resume_test's SensitivitiesResumeToTheSameBits and
// tests/io/conditions_resume_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_costate.hpp"

namespace {

using Json = nlohmann::json;

const std::string kInput = COSTATE_EXAMPLES_DIR "/decay_conditions.yaml";

/// Central differences with h = kStep·max(1, |p|) on fixed rk4 steps: J is
/// a smooth function of p, the truncation error h² J'''/6 is ~1e-12 of J and
/// the round-off ε J / h ~1e-9 of the gradient's scale (J ≈ 1e5, ∇J ≈ 1e5
/// to 1e6), far below this bound on |∇J − FD| / (|∇J| + 1).
constexpr double kStep = 1e-6;
constexpr double kFiniteDifference = 1e-6;
/// The command's own check (kCheckRtol in sensitivity_command.cpp, 1e-3)
/// is the bar it reports against; on fixed steps it agrees far better.
constexpr double kDirectional = 1e-6;

Json sensitivity(const std::string& extra) {
  const auto dir = costate::test::scratch_dir("costate_conditions_sensitivity");
  const auto r = costate::test::run_command(dir, COSTATE_EXE, "sensitivity " + kInput + " --json " + extra);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  return Json::parse(r.out);
}

/// The point: k, m, k_i away from the file's values (the `--set`s of every run).
struct Point {
  double k = 0.4, m = 0.25, k_i = 0.2;
  std::string sets() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, " --set parameters.k=%.17g --set parameters.m=%.17g --set parameters.k_i=%.17g",
                  k, m, k_i);
    return buf;
  }
};

TEST(ConditionsSensitivity, CheckOfTheSummedGradientAgreesWithCentralDifferences) {
  const Point at;
  const Json j = sensitivity("--check" + at.sets());
  ASSERT_EQ(j["status"], "ok") << j.dump();
  // J = Σ_c J_c, added in the conditions' order: the same bits.
  double sum = 0.0;
  ASSERT_EQ(j["conditions"].size(), 5u);
  for (const auto& c : j["conditions"]) sum += c["objective"].get<double>();
  EXPECT_EQ(sum, j["objective"].get<double>());
  // The command's directional check of the sum.
  const Json& check = j["check"];
  EXPECT_TRUE(check["passed"].get<bool>()) << check.dump();
  const double dd = check["directional_derivative"], diff = check["difference"];
  EXPECT_LE(std::abs(dd - diff), kDirectional * std::abs(diff)) << check.dump();
  EXPECT_GT(check["evaluations"].get<int>(), 2);
  // Central differences of the summed objective, per parameter, each J from
  // a fresh run.
  const Json& gradient = j["gradient"];
  for (double Point::*p : {&Point::k, &Point::m, &Point::k_i}) {
    const std::string name = p == &Point::k ? "k" : p == &Point::m ? "m" : "k_i";
    const double h = kStep * std::max(1.0, std::abs(at.*p));
    Point plus = at, minus = at;
    plus.*p += h;
    minus.*p -= h;
    const double Jp = sensitivity(plus.sets())["objective"], Jm = sensitivity(minus.sets())["objective"];
    const double fd = (Jp - Jm) / (2.0 * h), g = gradient[name];
    EXPECT_LE(std::abs(g - fd), kFiniteDifference * (std::abs(g) + 1.0))
        << name << ": gradient " << g << ", central difference " << fd;
  }
  // dose is replaced by a number in every condition: its gradient is 0 and
  // J does not move with it.
  EXPECT_EQ(gradient["dose"].get<double>(), 0.0);
  EXPECT_EQ(sensitivity(at.sets() + " --set parameters.dose=3")["objective"].get<double>(),
            j["objective"].get<double>());
}

}  // namespace
