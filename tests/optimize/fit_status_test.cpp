// optimize::FitStatus and judge_fit: the calibrations' one status
// vocabulary and the rule that tells a stall at the noise floor from a fit
// that did not converge.
#include "costate/optimize/fit_status.hpp"

#include <gtest/gtest.h>

#include "costate/core/error.hpp"

namespace {

namespace opt = costate::optimize;

TEST(FitStatus, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (opt::FitStatus s : {opt::FitStatus::Converged, opt::FitStatus::Stalled, opt::FitStatus::NotConverged})
    EXPECT_EQ(opt::fit_status_from_string(opt::to_string(s)), s);
  try {
    (void)opt::fit_status_from_string("ok");
    FAIL() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("converged, stalled, not_converged"), std::string::npos) << e.what();
  }
}

TEST(FitStatus, TheNoiseFloorRule) {
  // Converged by the optimizer's test: named.
  const opt::FitVerdict c = opt::judge_fit({.converged = true, .reason = "CONVERGED_GATOL"});
  EXPECT_EQ(c.status, opt::FitStatus::Converged);
  EXPECT_EQ(c.describe(), "converged (CONVERGED_GATOL)");
  EXPECT_EQ(c.caveat(), "");
  EXPECT_STREQ(c.file_status(), "complete");
  // A line-search failure with |g| within 10× its measured noise: stalled.
  const opt::FitVerdict s = opt::judge_fit(
      {.reason = "DIVERGED_LS_FAILURE", .gradient_norm = 0.05, .gradient_noise = 0.007});
  EXPECT_EQ(s.status, opt::FitStatus::Stalled);
  EXPECT_TRUE(s.at_optimum());
  EXPECT_STREQ(s.file_status(), "complete");
  // The same stop with |g| above 10× its noise: not converged.
  const opt::FitVerdict far = opt::judge_fit(
      {.reason = "DIVERGED_LS_FAILURE", .gradient_norm = 0.5, .gradient_noise = 0.007});
  EXPECT_EQ(far.status, opt::FitStatus::NotConverged);
  EXPECT_NE(far.caveat().find("NOT at a converged optimum"), std::string::npos);
  EXPECT_STREQ(far.file_status(), "partial");
  // An iteration limit is no stall, however small the gradient; nor is a
  // stall whose noise nobody measured.
  EXPECT_EQ(opt::judge_fit({.reason = "DIVERGED_MAXITS", .gradient_norm = 1e-9, .gradient_noise = 1.0}).status,
            opt::FitStatus::NotConverged);
  EXPECT_EQ(opt::judge_fit({.reason = "DIVERGED_LS_FAILURE", .gradient_norm = 1e-9}).status,
            opt::FitStatus::NotConverged);
}

TEST(FitStatus, AStepPredictingLessThanTheObjectivesRoundOffIsAStall) {
  // Newton's last step predicted a decrease of 1e-18 on J = 45.67, whose
  // round-off is 8 eps |J| = 8.1e-14: J cannot tell a better point.
  const opt::FitVerdict s = opt::judge_fit({.reason = "stopped: the line search found no decrease of J",
                                            .gradient_norm = 8e-11,
                                            .objective = 45.67,
                                            .predicted_decrease = 1e-18});
  EXPECT_EQ(s.status, opt::FitStatus::Stalled);
  EXPECT_NE(s.test.find("round-off"), std::string::npos) << s.test;
  // A predicted decrease J resolves (1e-6): not converged.
  EXPECT_EQ(opt::judge_fit({.reason = "stopped: the line search found no decrease of J",
                            .objective = 45.67,
                            .predicted_decrease = 1e-6})
                .status,
            opt::FitStatus::NotConverged);
  // An iteration limit stays not converged, whatever the prediction.
  EXPECT_EQ(opt::judge_fit({.reason = "stopped: max_iterations = 30", .objective = 45.67, .predicted_decrease = 0.0})
                .status,
            opt::FitStatus::NotConverged);
}

}  // namespace
