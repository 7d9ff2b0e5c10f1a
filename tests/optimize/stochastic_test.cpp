// optimize::fit — mini-batch stochastic fits over conditions: the update
// rules against their formulas, reproducibility (seed, physical batch,
// resume), rescue of failed conditions, validation and early stopping, a
// many-condition ODE problem against the full-batch optimum, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <span>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/optimize/stochastic.hpp"
#include "costate/optimize/tao.hpp"

namespace {

namespace opt = costate::optimize;
namespace ode = costate::ode;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Bits of a vector, so that "the same result" is checked bit for bit.
std::vector<std::uint64_t> bits(const std::vector<double>& v) {
  std::vector<std::uint64_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) std::memcpy(&out[i], &v[i], sizeof(double));
  return out;
}

/// Deterministic pseudo-data: a hash of (i, salt) mapped to [-1, 1).
double pseudo(std::uint64_t i, std::uint64_t salt) {
  std::uint64_t z = i * 0x9e3779b97f4a7c15ULL + salt;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

/// A straight line through noisy points, one point per condition:
/// ℓ_c = ½ (x₀ + x₁ a_c − b_c)², b_c = 2 + 3 a_c + 0.1·noise.
struct Line {
  std::vector<double> a, b;
  explicit Line(std::size_t n) : a(n), b(n) {
    for (std::size_t c = 0; c < n; ++c) {
      a[c] = 2.0 * pseudo(c, 1);
      b[c] = 2.0 + 3.0 * a[c] + 0.1 * pseudo(c, 2);
    }
  }
  opt::Dataset dataset() const {
    return {.n_conditions = a.size(),
            .n = 2,
            .condition = [this](std::size_t c, std::span<const double> x, std::span<double> g) {
              const double r = x[0] + x[1] * a[c] - b[c];
              g[0] = r;
              g[1] = r * a[c];
              return 0.5 * r * r;
            },
            .batch = {}};
  }
  /// The least-squares line over all points (the full-batch optimum).
  std::pair<double, double> optimum() const {
    double n = 0, sa = 0, sb = 0, saa = 0, sab = 0;
    for (std::size_t c = 0; c < a.size(); ++c) {
      n += 1; sa += a[c]; sb += b[c]; saa += a[c] * a[c]; sab += a[c] * b[c];
    }
    const double x1 = (n * sab - sa * sb) / (n * saa - sa * sa);
    return {(sb - x1 * sa) / n, x1};
  }
  double objective(double x0, double x1) const {
    double f = 0;
    for (std::size_t c = 0; c < a.size(); ++c) f += 0.5 * std::pow(x0 + x1 * a[c] - b[c], 2);
    return f;
  }
};

const std::vector<double> kFree2{-kInf, -kInf}, kFree2Up{kInf, kInf};

TEST(StochasticFit, TheFirstAdamStepMovesEachParameterByTheLearningRate) {
  // After one step m̂ = g and v̂ = g², so x₁ = x₀ − η g/(|g| + ε): each
  // coordinate moves by η (to ε/|g| ~ 1e-8 relative).
  const Line line(8);
  for (auto method : {opt::StochasticMethod::Adam, opt::StochasticMethod::AdamW}) {
    const auto r = opt::fit(line.dataset(), std::vector<double>{0.0, 0.0}, kFree2, kFree2Up,
                            {.method = method, .epochs = 1, .learning_rate = 0.25, .final_objective = false});
    std::vector<double> g(2), gi(2);
    for (std::size_t c = 0; c < 8; ++c) {
      line.dataset().condition(c, std::vector<double>{0.0, 0.0}, gi);
      g[0] += gi[0] / 8;
      g[1] += gi[1] / 8;
    }
    for (int j = 0; j < 2; ++j) {
      const double expect = -0.25 * g[j] / (std::abs(g[j]) + 1e-8);
      EXPECT_DOUBLE_EQ(r.x[j], expect) << "parameter " << j;
    }
    EXPECT_EQ(r.steps, 1);
    EXPECT_EQ(r.termination, "epochs");
  }
}

TEST(StochasticFit, SgdWithMomentumFollowsItsRecurrence) {
  // Full batch, two steps: b₁ = g(x₀), x₁ = x₀ − η b₁; b₂ = μ b₁ + g(x₁),
  // x₂ = x₁ − η b₂ (the batch mean gradient, by hand).
  const Line line(5);
  const double eta = 0.1, mu = 0.5;
  const auto mean_grad = [&](std::vector<double> x) {
    std::vector<double> g(2), gi(2);
    for (std::size_t c = 0; c < 5; ++c) {
      line.dataset().condition(c, x, gi);
      g[0] += gi[0];
      g[1] += gi[1];
    }
    return std::vector<double>{g[0] / 5, g[1] / 5};
  };
  std::vector<double> x{1.0, -1.0};
  const auto b1 = mean_grad(x);
  std::vector<double> x1{x[0] - eta * b1[0], x[1] - eta * b1[1]};
  const auto g1 = mean_grad(x1);
  const std::vector<double> b2{mu * b1[0] + g1[0], mu * b1[1] + g1[1]};
  const std::vector<double> x2{x1[0] - eta * b2[0], x1[1] - eta * b2[1]};
  const auto r = opt::fit(line.dataset(), x, kFree2, kFree2Up,
                          {.method = opt::StochasticMethod::Sgd, .epochs = 2, .learning_rate = eta,
                           .momentum = mu, .final_objective = false});
  // The same operations in the same order, but the batch mean is summed
  // before dividing there and here: equal to rounding (1e-15 relative).
  EXPECT_NEAR(r.x[0], x2[0], 1e-14);
  EXPECT_NEAR(r.x[1], x2[1], 1e-14);
}

TEST(StochasticFit, WeightDecayAndClippingFollowTheirFormulas) {
  // One full-batch step from x₀ with the batch mean gradient g (by hand):
  //   AdamW: x₁ = x₀ − η g/(|g| + ε) − η λ x₀    (decoupled)
  //   Adam:  g' = g + λ x₀, x₁ = x₀ − η g'/(|g'| + ε)   (L2)
  //   SGD:   x₁ = x₀ − η (g + λ x₀);  clipped: g ← g · c/‖g‖ when ‖g‖ > c.
  // Tolerance 1e-15 absolute: the same operations, the mean's sum rounded
  // in another order (|x| ≤ 2).
  const Line line(6);
  const std::vector<double> x0{1.5, -0.5};
  std::vector<double> g(2), gi(2);
  for (std::size_t c = 0; c < 6; ++c) {
    line.dataset().condition(c, x0, gi);
    g[0] += gi[0] / 6;
    g[1] += gi[1] / 6;
  }
  const double eta = 0.1, lambda = 0.3, eps = 1e-8;
  const auto step = [&](opt::StochasticOptions o) {
    o.epochs = 1;
    o.learning_rate = eta;
    o.final_objective = false;
    return opt::fit(line.dataset(), x0, kFree2, kFree2Up, o).x;
  };
  const auto adamw = step({.method = opt::StochasticMethod::AdamW, .weight_decay = lambda});
  const auto adam = step({.method = opt::StochasticMethod::Adam, .weight_decay = lambda});
  const auto sgd = step({.method = opt::StochasticMethod::Sgd, .weight_decay = lambda});
  const double norm = std::hypot(g[0], g[1]), clip = 0.25 * norm;
  const auto clipped = step({.method = opt::StochasticMethod::Sgd, .clip_norm = clip});
  for (int j = 0; j < 2; ++j) {
    SCOPED_TRACE(j);
    EXPECT_NEAR(adamw[j], x0[j] - eta * g[j] / (std::abs(g[j]) + eps) - eta * lambda * x0[j], 1e-15);
    const double gl = g[j] + lambda * x0[j];
    EXPECT_NEAR(adam[j], x0[j] - eta * gl / (std::abs(gl) + eps), 1e-15);
    EXPECT_NEAR(sgd[j], x0[j] - eta * (g[j] + lambda * x0[j]), 1e-15);
    EXPECT_NEAR(clipped[j], x0[j] - eta * g[j] * clip / norm, 1e-15);
  }
  // The decoupled and the L2 decay are different updates here.
  EXPECT_GT(std::abs(adamw[0] - adam[0]), 1e-3);
}

TEST(StochasticFit, StepScheduleAndWarmUpSetEachStepsLearningRate) {
  // Full batch: one step per epoch, so epoch e's record holds step e's rate.
  //   step:    η γ^⌊e / step_epochs⌋
  //   warm-up: η min(1, (t+1)/warmup_steps) on top of the schedule.
  const Line line(4);
  const double eta = 0.2;
  const auto rates = [&](opt::StochasticOptions o) {
    o.epochs = 7;
    o.learning_rate = eta;
    std::vector<double> r;
    for (const auto& e : opt::fit(line.dataset(), std::vector<double>{0.0, 0.0}, kFree2, kFree2Up, o).epochs)
      r.push_back(e.learning_rate);
    return r;
  };
  EXPECT_EQ(rates({.schedule = opt::LearningRateSchedule::Step, .step_epochs = 2, .gamma = 0.5}),
            (std::vector<double>{eta, eta, eta * 0.5, eta * 0.5, eta * 0.25, eta * 0.25, eta * 0.125}));
  EXPECT_EQ(rates({.warmup_steps = 4}),
            (std::vector<double>{eta * 1.0 / 4.0, eta * 2.0 / 4.0, eta * 3.0 / 4.0, eta, eta, eta, eta}));
  // Cosine over the fit's 7 steps to η_min, warmed up over the first 2.
  const auto cosine = rates({.schedule = opt::LearningRateSchedule::Cosine, .min_learning_rate = 0.02,
                             .warmup_steps = 2});
  for (int t = 0; t < 7; ++t) {
    const double c = 0.02 + (eta - 0.02) * 0.5 * (1.0 + std::cos(std::numbers::pi * t / 7.0));
    EXPECT_DOUBLE_EQ(cosine[static_cast<std::size_t>(t)], c * std::min(1.0, (t + 1) / 2.0)) << "step " << t;
  }
}

TEST(StochasticFit, ReachesTheLeastSquaresLineWithMiniBatches) {
  const Line line(200);
  const auto [x0, x1] = line.optimum();
  const auto r = opt::fit(line.dataset(), std::vector<double>{0.0, 0.0}, kFree2, kFree2Up,
                          {.epochs = 60, .batch = 20, .learning_rate = 0.05,
                           .schedule = opt::LearningRateSchedule::Cosine, .seed = 7});
  // The cosine schedule anneals η to 0, so the mini-batch noise dies out:
  // the objective comes within 1e-5 relative of the optimum's (what is left
  // of the mini-batch noise as η → 0 over 600 steps; measured 6.0e-7).
  const double f_opt = line.objective(x0, x1);
  EXPECT_LT(r.objective - f_opt, 1e-5 * f_opt) << r.brief_report();
  EXPECT_GE(r.objective, f_opt * (1 - 1e-12));
  EXPECT_NEAR(r.x[0], x0, 1e-3);
  EXPECT_NEAR(r.x[1], x1, 1e-3);
  ASSERT_EQ(r.epochs.size(), 60u);
  EXPECT_EQ(r.steps, 600);
  EXPECT_EQ(r.simulations, 600 * 20 + 200);  // the steps and the final objective
  // Training loss falls and its standard error is over 10 batches.
  EXPECT_LT(r.epochs.back().train_loss, 0.1 * r.epochs.front().train_loss);
  EXPECT_GT(r.epochs.front().train_loss_stderr, 0.0);
}

TEST(StochasticFit, AFullBatchFinishEndsAtTheConvergedOptimum) {
  const Line line(200);
  const auto [x0, x1] = line.optimum();
  const auto r = opt::fit(line.dataset(), std::vector<double>{0.0, 0.0}, kFree2, kFree2Up,
                          {.epochs = 3, .batch = 20, .learning_rate = 0.05, .finish_iterations = 100,
                           .finish_gatol = 1e-10});
  EXPECT_TRUE(r.finish_converged) << r.finish_termination;
  EXPECT_GT(r.finish_iterations, 0);
  // ‖∇‖ ≤ 1e-10 on a quadratic with curvatures ~1 and ~270: within 1e-9 of
  // the least-squares line.
  EXPECT_NEAR(r.x[0], x0, 1e-9);
  EXPECT_NEAR(r.x[1], x1, 1e-9);
  EXPECT_NEAR(r.objective, line.objective(x0, x1), 1e-12 * line.objective(x0, x1));
  // The finish's evaluations are counted: 3 epochs × 200, the finish's
  // full batches, and the final objective.
  EXPECT_GT(r.simulations, 3 * 200 + 200);
  EXPECT_EQ((r.simulations - 3 * 200 - 200) % 200, 0);
}

TEST(StochasticFit, IsReproducibleBitForBitAndIndependentOfThePhysicalBatch) {
  const Line line(50);
  opt::StochasticOptions o{.epochs = 5, .batch = 10, .learning_rate = 0.1, .validation_split = 0.2, .seed = 3};
  const auto a = opt::fit(line.dataset(), std::vector<double>{0.5, 0.5}, kFree2, kFree2Up, o);
  const auto b = opt::fit(line.dataset(), std::vector<double>{0.5, 0.5}, kFree2, kFree2Up, o);
  EXPECT_EQ(bits(a.x), bits(b.x));
  EXPECT_EQ(a.objective, b.objective);
  for (std::size_t physical : {1u, 3u, 10u}) {
    o.physical_batch = physical;
    const auto c = opt::fit(line.dataset(), std::vector<double>{0.5, 0.5}, kFree2, kFree2Up, o);
    EXPECT_EQ(bits(a.x), bits(c.x)) << "physical batch " << physical;
    EXPECT_EQ(bits(a.state.m), bits(c.state.m)) << "physical batch " << physical;
    ASSERT_EQ(c.epochs.size(), a.epochs.size());
    for (std::size_t e = 0; e < a.epochs.size(); ++e)
      EXPECT_EQ(a.epochs[e].train_loss, c.epochs[e].train_loss);
  }
  o.physical_batch = 0;
  o.seed = 4;
  const auto d = opt::fit(line.dataset(), std::vector<double>{0.5, 0.5}, kFree2, kFree2Up, o);
  EXPECT_NE(bits(a.x), bits(d.x)) << "another seed draws other batches";
  EXPECT_NE(a.validation, d.validation) << "and another validation split";
}

TEST(StochasticFit, AResumedFitEqualsTheUninterruptedOneBitForBit) {
  const Line line(30);
  const opt::StochasticOptions o{.method = opt::StochasticMethod::AdamW, .epochs = 6, .batch = 7,
                                 .learning_rate = 0.05, .schedule = opt::LearningRateSchedule::Cosine,
                                 .warmup_steps = 5, .weight_decay = 0.01, .clip_norm = 2.0,
                                 .validation_split = 0.1, .seed = 11};
  const auto whole = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o);
  // Stop after every possible step count, in the middle of epochs and at
  // their ends, and resume (twice for one of them).
  for (std::int64_t stop_at : {1, 4, 5, 9, 13, 20}) {
    SCOPED_TRACE(stop_at);
    const auto part = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o,
                               {.on_step = [&](const opt::StochasticState& s) { return s.step < stop_at; }, .on_epoch = {}, .on_restart = {}});
    ASSERT_EQ(part.termination, "interrupted");
    EXPECT_EQ(part.steps, stop_at);
    auto rest = opt::fit(line.dataset(), {}, kFree2, kFree2Up, o, {}, &part.state);
    if (stop_at == 9) {
      const auto again = opt::fit(line.dataset(), {}, kFree2, kFree2Up, o,
                                  {.on_step = [](const opt::StochasticState& s) { return s.step < 15; }, .on_epoch = {}, .on_restart = {}},
                                  &part.state);
      rest = opt::fit(line.dataset(), {}, kFree2, kFree2Up, o, {}, &again.state);
    }
    EXPECT_EQ(rest.termination, whole.termination);
    EXPECT_EQ(bits(rest.x), bits(whole.x));
    EXPECT_EQ(rest.objective, whole.objective);
    EXPECT_EQ(rest.simulations, whole.simulations);
    ASSERT_EQ(rest.epochs.size(), whole.epochs.size());
    for (std::size_t e = 0; e < whole.epochs.size(); ++e) {
      EXPECT_EQ(rest.epochs[e].train_loss, whole.epochs[e].train_loss);
      EXPECT_EQ(rest.epochs[e].train_loss_stderr, whole.epochs[e].train_loss_stderr);
      EXPECT_EQ(rest.epochs[e].validation_loss, whole.epochs[e].validation_loss);
      EXPECT_EQ(rest.epochs[e].learning_rate, whole.epochs[e].learning_rate);
    }
  }
}

TEST(StochasticFit, GrowsTheBatchFromEpochToEpochAndResumesInsideAGrownEpoch) {
  // Epoch e's logical batch is min(|training|, ⌈batch · growth^e⌉): 4·1.5^e
  // = 4, 6, 9, 13.5, 20.25, 30.4 → 4, 6, 9, 14, 21, 31 → capped at 24.
  EXPECT_EQ(opt::logical_batches(24, {.epochs = 7, .batch = 4, .batch_growth = 1.5}),
            (std::vector<std::size_t>{4, 6, 9, 14, 21, 24, 24}));
  EXPECT_EQ(opt::logical_batches(24, {.epochs = 3, .batch = 0, .batch_growth = 2.0}),
            (std::vector<std::size_t>{24, 24, 24}));
  const Line line(30);
  opt::StochasticOptions o{.epochs = 7, .batch = 4, .batch_growth = 1.5, .learning_rate = 0.05,
                           .schedule = opt::LearningRateSchedule::Cosine, .validation_split = 0.2, .seed = 5};
  const auto whole = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o);
  // 24 training conditions: ⌈24/b⌉ = 6, 4, 3, 2, 2, 1, 1 steps per epoch.
  const std::vector<std::int64_t> steps{6, 10, 13, 15, 17, 18, 19};
  ASSERT_EQ(whole.epochs.size(), steps.size());
  for (std::size_t e = 0; e < steps.size(); ++e) EXPECT_EQ(whole.epochs[e].steps, steps[e]) << "epoch " << e;
  // The cosine schedule spans the 19 steps: its last step's rate is
  // η(1 + cos(18π/19))/2.
  EXPECT_DOUBLE_EQ(whole.epochs.back().learning_rate, 0.05 * 0.5 * (1.0 + std::cos(std::numbers::pi * 18.0 / 19.0)));
  // The physical batch changes no bit; a stop inside a grown epoch resumes
  // to the same bits.
  o.physical_batch = 3;
  const auto physical = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o);
  EXPECT_EQ(bits(physical.x), bits(whole.x));
  o.physical_batch = 0;
  for (std::int64_t stop_at : {3, 11, 14, 18}) {
    SCOPED_TRACE(stop_at);
    const auto part = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o,
                               {.on_step = [&](const opt::StochasticState& s) { return s.step < stop_at; }, .on_epoch = {}, .on_restart = {}});
    ASSERT_EQ(part.termination, "interrupted");
    const auto rest = opt::fit(line.dataset(), {}, kFree2, kFree2Up, o, {}, &part.state);
    EXPECT_EQ(bits(rest.x), bits(whole.x));
    EXPECT_EQ(rest.objective, whole.objective);
    EXPECT_EQ(rest.simulations, whole.simulations);
  }
  // Growth 1 is the fixed batch, bit for bit.
  o.batch_growth = 1.0;
  const auto fixed = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o);
  const opt::StochasticOptions plain{.epochs = 7, .batch = 4, .learning_rate = 0.05,
                                     .schedule = opt::LearningRateSchedule::Cosine, .validation_split = 0.2,
                                     .seed = 5};
  const auto reference = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, plain);
  EXPECT_EQ(bits(fixed.x), bits(reference.x));
  EXPECT_EQ(fixed.steps, 42);  // 7 epochs × 6 batches
}

TEST(StochasticFit, AveragesTheIteratesOfTheLastEpochsAndResumesInsideTheWindow) {
  const Line line(40);
  const opt::StochasticOptions o{.epochs = 6, .batch = 8, .learning_rate = 0.05,
                                 .schedule = opt::LearningRateSchedule::Cosine, .seed = 9, .average_epochs = 2};
  // The iterates after each step of epochs 5 and 6 (10 steps), summed in
  // step order as fit() sums them.
  std::vector<double> sum{0.0, 0.0};
  std::int64_t count = 0;
  const auto whole = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o,
                              {.on_step = [&](const opt::StochasticState& s) {
                                 if (s.epoch >= 4) {
                                   sum[0] += s.x[0];
                                   sum[1] += s.x[1];
                                   ++count;
                                 }
                                 return true;
                               },
                               .on_epoch = {}, .on_restart = {}});
  ASSERT_EQ(count, 10);
  EXPECT_EQ(bits(whole.x), bits({sum[0] / 10.0, sum[1] / 10.0}));
  EXPECT_NE(bits(whole.x), bits(whole.state.x)) << "the average is not the last iterate";
  EXPECT_EQ(whole.objective, line.objective(whole.x[0], whole.x[1]));
  // A stop before and inside the window resumes to the same bits.
  for (std::int64_t stop_at : {7, 21, 25}) {
    SCOPED_TRACE(stop_at);
    const auto part = opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, o,
                               {.on_step = [&](const opt::StochasticState& s) { return s.step < stop_at; }, .on_epoch = {}, .on_restart = {}});
    const auto rest = opt::fit(line.dataset(), {}, kFree2, kFree2Up, o, {}, &part.state);
    EXPECT_EQ(bits(rest.x), bits(whole.x));
  }
  // The last K epochs of the run, and no validation split beside it.
  const auto fails = [&](const opt::StochasticOptions& bad, const char* words) {
    try {
      opt::fit(line.dataset(), std::vector<double>{0.0, 1.0}, kFree2, kFree2Up, bad);
      ADD_FAILURE() << "no error; expected: " << words;
    } catch (const costate::Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  fails({.epochs = 3, .average_epochs = 4}, "average_epochs = 4 must be in [0, epochs = 3]");
  fails({.epochs = 3, .validation_split = 0.1, .average_epochs = 1}, "use one or the other");
}

TEST(StochasticFit, RescuesAFailedConditionByHalvingTheStep) {
  // Condition 0 "blows up" (NaN, or a thrown costate::Error as a failed ODE
  // solve would) where x₀ > 2.2; the line's optimum has x₀ ≈ 2, and the
  // first full-batch step at η = 0.9 lands at x₀ ≈ 2.6.
  const Line line(20);
  opt::Dataset d = line.dataset();
  const auto plain = d.condition;
  int thrown = 0;
  d.condition = [&](std::size_t c, std::span<const double> x, std::span<double> g) {
    if (c == 0 && x[0] > 2.2) {
      if (++thrown % 2) throw costate::Error("simulated CVODES failure");
      return std::numeric_limits<double>::quiet_NaN();
    }
    return plain(c, x, g);
  };
  const opt::StochasticOptions o{.method = opt::StochasticMethod::Sgd, .epochs = 30, .learning_rate = 0.9};
  const auto r = opt::fit(d, std::vector<double>{0.0, 0.0}, kFree2, kFree2Up, o);
  EXPECT_EQ(r.termination, "epochs");
  EXPECT_GT(r.rescues, 0);
  int per_epoch = 0;
  for (const auto& e : r.epochs) per_epoch += e.rescues;
  EXPECT_EQ(per_epoch, r.rescues);
  EXPECT_TRUE(std::isfinite(r.objective));
  EXPECT_LE(r.x[0], 2.2);
  // Without rescues the fit stops at the first failure, returning the last
  // iterate that could be evaluated.
  const auto s = opt::fit(d, std::vector<double>{0.0, 0.0}, kFree2, kFree2Up,
                          {.method = opt::StochasticMethod::Sgd, .epochs = 30, .learning_rate = 0.9,
                           .max_rescues = 0, .max_restarts = 0});
  EXPECT_EQ(s.termination, "rescue_failed");
  EXPECT_LE(s.x[0], 2.2);
  EXPECT_TRUE(std::isfinite(s.objective));
}

/// y' = k y² from y(0) = y0_c, observed at T = 1: y = y0/(1 − k y0), which
/// blows up at k = 1/y0. Twenty conditions y0_c = 0.2 … 1.6 with exact data
/// from k* = 0.5, fitted on x = log k: ℓ_c = ½ (y − d_c)², dℓ_c/dx =
/// (y − d_c) y² k. A condition "fails" (NaN, as a solver whose step
/// collapses) where 1 − k y0 ≤ 0.05: for y0 = 1.6 that is k ≥ 0.59375, not
/// far above the truth.
struct BlowUp {
  static constexpr double kTruth = 0.5;
  static double y0(std::size_t c) { return 0.2 + 1.4 * static_cast<double>(c) / 19.0; }
  static double y(double k, double y0) { return y0 / (1.0 - k * y0); }
  opt::Dataset dataset() const {
    return {.n_conditions = 20,
            .n = 1,
            .condition = [](std::size_t c, std::span<const double> x, std::span<double> g) {
              const double a = y0(c), k = std::exp(x[0]);
              if (1.0 - k * a <= 0.05) return std::numeric_limits<double>::quiet_NaN();
              const double yc = y(k, a), r = yc - y(kTruth, a);
              g[0] = r * yc * yc * k;
              return 0.5 * r * r;
            },
            .batch = {}};
  }
};

TEST(StochasticFit, RestartsWhenTheRescuesAreExhaustedAndStillReachesTheTruth) {
  // Adam at η = 0.5 on log k from k = 0.05 in batches of 10 (2 steps an
  // epoch, 120 in all; gradients clipped to norm 1 so that the huge ones
  // near the blow-up do not stall the second moment; cosine decay): its
  // momentum carries k past 0.59, where the batches holding the large-y0
  // conditions fail, and one halving (max_rescues = 1) does not bring the
  // step back.
  const BlowUp model;
  const std::vector<double> x0{std::log(0.05)}, lo{-kInf}, up{kInf};
  opt::StochasticOptions o{.method = opt::StochasticMethod::Adam, .epochs = 60, .batch = 10, .learning_rate = 0.5,
                           .schedule = opt::LearningRateSchedule::Cosine, .clip_norm = 1.0, .seed = 4,
                           .max_rescues = 1, .max_restarts = 0};
  constexpr double kSteps = 120.0;
  const auto cosine = [&](std::int64_t t) {
    return 0.5 * 0.5 * (1.0 + std::cos(std::numbers::pi * (static_cast<double>(t) / kSteps)));
  };
  // Rescue alone: the fit stops at the last accepted point.
  const auto stuck = opt::fit(model.dataset(), x0, lo, up, o);
  EXPECT_EQ(stuck.termination, "rescue_failed");
  EXPECT_EQ(stuck.restarts, 0);
  // With restarts it recovers. Each restart goes back to the last accepted
  // iterate (on_restart sees it: the iterate before the failed step) with
  // the moments zero, and the next step is Adam's first again at the
  // halved learning rate: it moves x by η_t · 2⁻ʳ (to ε/|g| ~ 1e-8
  // relative, as the first step of a fit does; clipping scales g, not that).
  o.max_restarts = 3;
  std::vector<double> before_step = x0, restart_x;
  std::vector<std::int64_t> restart_step;
  bool check_next = false;
  int checked = 0;
  const auto whole = opt::fit(
      model.dataset(), x0, lo, up, o,
      {.on_step =
           [&](const opt::StochasticState& s) {
             if (check_next) {
               const double eta = cosine(s.step - 1);
               EXPECT_NEAR(std::abs(s.x[0] - s.x_prev[0]), std::ldexp(eta, -static_cast<int>(s.restarts)),
                           1e-7 * eta)
                   << "the first step after restart " << s.restarts;
               EXPECT_EQ(s.moment_start, s.step - 1);
               ++checked;
               check_next = false;
             }
             before_step = s.x_prev;
             return true;
           },
       .on_epoch = {},
       .on_restart =
           [&](const opt::StochasticState& s) {
             restart_x.push_back(s.x[0]);
             restart_step.push_back(s.step);
             EXPECT_EQ(s.x, before_step) << "back to the last accepted iterate";
             EXPECT_EQ(s.m, std::vector<double>{0.0});
             EXPECT_EQ(s.v, std::vector<double>{0.0});
             check_next = true;
           }});
  EXPECT_EQ(whole.termination, "epochs");
  EXPECT_EQ(whole.restarts, 2);  // measured
  EXPECT_EQ(static_cast<std::int64_t>(restart_x.size()), whole.restarts);
  // (two restarts may follow each other: a batch that fails at the
  // accepted iterate itself; then one step follows both)
  std::vector<std::int64_t> distinct = restart_step;
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  EXPECT_EQ(checked, static_cast<int>(distinct.size()));
  int per_epoch = 0;
  for (const auto& e : whole.epochs) per_epoch += e.restarts;
  EXPECT_EQ(per_epoch, whole.restarts);
  // A skipped batch is not a step.
  EXPECT_EQ(whole.steps, 120 - whole.restarts);
  // The data are exact, so every condition's optimum is k* = 0.5 and the
  // batches' noise vanishes there; the cosine schedule's end leaves
  // measured |k − k*| = 2.3e-5; 1e-4 allows it a factor 4.
  constexpr double kTruthTolerance = 1e-4;
  EXPECT_NEAR(std::exp(whole.x[0]), BlowUp::kTruth, kTruthTolerance);
  // The last epoch reports η of its last step, halved per restart.
  EXPECT_DOUBLE_EQ(whole.epochs.back().learning_rate,
                   std::ldexp(cosine(whole.steps - 1), -static_cast<int>(whole.restarts)));
  // A fit stopped just before a restart, just after it and later resumes
  // to the same bits.
  ASSERT_FALSE(restart_step.empty());
  for (std::int64_t stop_at : {restart_step[0], restart_step[0] + 1, restart_step.back() + 5}) {
    SCOPED_TRACE(stop_at);
    const auto part = opt::fit(model.dataset(), x0, lo, up, o,
                               {.on_step = [&](const opt::StochasticState& s) { return s.step < stop_at; },
                                .on_epoch = {}, .on_restart = {}});
    ASSERT_EQ(part.termination, "interrupted");
    const auto rest = opt::fit(model.dataset(), {}, lo, up, o, {}, &part.state);
    EXPECT_EQ(rest.termination, whole.termination);
    EXPECT_EQ(bits(rest.x), bits(whole.x));
    EXPECT_EQ(rest.restarts, whole.restarts);
    EXPECT_EQ(rest.simulations, whole.simulations);
    EXPECT_EQ(rest.epochs.back().learning_rate, whole.epochs.back().learning_rate);
  }
  // Restarts exhausted (η = 1 without rescues: measured 3 restarts, then a
  // fourth failure): rescue_failed, returning the last accepted iterate.
  o.learning_rate = 1.0;
  o.max_rescues = 0;
  const auto hopeless = opt::fit(model.dataset(), x0, lo, up, o);
  EXPECT_EQ(hopeless.termination, "rescue_failed");
  EXPECT_EQ(hopeless.restarts, 3);
  EXPECT_EQ(bits(hopeless.x), bits(hopeless.state.x_prev));
}

TEST(StochasticFit, KeepsTheBestValidationParametersAndStopsEarly) {
  // A model that overfits nothing but wanders: SGD at a learning rate that
  // makes the validation loss go up after it first comes down.
  const Line line(40);
  const opt::StochasticOptions o{.method = opt::StochasticMethod::Adam, .epochs = 200, .batch = 4,
                                 .learning_rate = 0.3, .validation_split = 0.25, .patience = 3, .seed = 5};
  const auto r = opt::fit(line.dataset(), std::vector<double>{0.0, 0.0}, kFree2, kFree2Up, o);
  ASSERT_EQ(r.validation.size(), 10u);
  ASSERT_EQ(r.training.size(), 30u);
  EXPECT_EQ(r.termination, "early_stopping");
  EXPECT_LT(r.epochs.size(), 200u);
  // The returned parameters are the best validation epoch's: their
  // validation loss, recomputed here, is the smallest in the history.
  double best = kInf;
  for (const auto& e : r.epochs) best = std::min(best, e.validation_loss);
  double recomputed = 0;
  std::vector<double> g(2);
  for (std::size_t c : r.validation) recomputed += line.dataset().condition(c, r.x, g);
  recomputed /= 10.0;
  EXPECT_EQ(recomputed, best);
  // The last `patience` epochs did not improve on it.
  for (std::size_t e = r.epochs.size() - 3; e < r.epochs.size(); ++e) EXPECT_GE(r.epochs[e].validation_loss, best);
}

TEST(StochasticFit, ProjectsStepsOntoTheBounds) {
  const Line line(10);
  const std::vector<double> lo{-1.0, -1.0}, hi{1.0, 2.0};  // the optimum (≈2, ≈3) is outside
  const auto r = opt::fit(line.dataset(), std::vector<double>{0.0, 0.0}, lo, hi,
                          {.epochs = 200, .learning_rate = 0.05});
  EXPECT_EQ(r.x[0], 1.0);
  EXPECT_EQ(r.x[1], 2.0);
}

TEST(StochasticFit, RefusesBadInputWithTheFieldAndTheRule) {
  const Line line(10);
  const auto fails_with = [&](const opt::StochasticOptions& o, const char* words,
                              std::vector<double> x0 = {0.0, 0.0}) {
    try {
      opt::fit(line.dataset(), x0, kFree2, kFree2Up, o);
      ADD_FAILURE() << "no error; expected: " << words;
    } catch (const costate::Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  fails_with({.batch = 11}, "batch = 11 is larger than the training set (10 conditions)");
  fails_with({.batch = 9, .validation_split = 0.2}, "batch = 9 is larger than the training set (8 conditions");
  fails_with({.validation_split = 0.95}, "leaves none for training");
  fails_with({.learning_rate = 0.0}, "learning_rate = 0 must be > 0");
  fails_with({.learning_rate = -1e-3}, "learning_rate = -0.001 must be > 0");
  fails_with({.epochs = 0}, "epochs = 0 must be >= 1");
  fails_with({.batch = 2, .physical_batch = 3}, "physical_batch = 3 is larger than the logical batch (2)");
  fails_with({.method = opt::StochasticMethod::Adam, .momentum = 0.9}, "momentum = 0.9 is SGD's");
  fails_with({.patience = 2}, "patience = 2 needs a validation split");
  fails_with({.batch = 2, .batch_growth = 0.5}, "batch_growth = 0.5 must be >= 1");
  const std::vector<double> lo{-1.0, -1.0}, hi{1.0, 1.0};
  EXPECT_THROW(opt::fit(line.dataset(), std::vector<double>{2.0, 0.0}, lo, hi), costate::Error);
  EXPECT_THROW(opt::stochastic_method_from_string("adagrad"), costate::Error);
  EXPECT_EQ(opt::stochastic_method_from_string("adamw"), opt::StochasticMethod::AdamW);
  // A condition that fails at the start is named.
  opt::Dataset d = line.dataset();
  d.condition = [](std::size_t, std::span<const double>, std::span<double>) { return std::nan(""); };
  try {
    opt::fit(d, std::vector<double>{0.0, 0.0}, kFree2, kFree2Up, {.batch = 10, .seed = 1});
    ADD_FAILURE() << "no error";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be evaluated at the starting point"), std::string::npos);
  }
}

// ---- a many-condition ODE problem ------------------------------------------
// y' = −k y + s on [0, T_c], y(0) = a_c: each condition a different initial
// amount and end time, one noisy observation d_c of y(T_c) with σ = 0.05.
// Parameters on log scale, x = (log k, log s); truth k = 0.8, s = 0.3.

struct Production {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    dydt[0] = -p[0] * y[0] + p[1];
  }
};
struct Misfit {
  double d, sigma;
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    const T r = (y[0] - d) / sigma;
    return 0.5 * r * r;
  }
};

struct ProductionData {
  static constexpr double kSigma = 0.05;
  std::vector<double> a, t_end, d;
  explicit ProductionData(std::size_t n) {
    for (std::size_t c = 0; c < n; ++c) {
      a.push_back(1.0 + pseudo(c, 3));
      t_end.push_back(1.5 + pseudo(c, 4));
      const double k = 0.8, s = 0.3;
      const double y = s / k + (a.back() - s / k) * std::exp(-k * t_end.back());
      d.push_back(y + kSigma * pseudo(c, 5));
    }
  }
  opt::Dataset dataset() const {
    return {.n_conditions = a.size(),
            .n = 2,
            .condition = [this](std::size_t c, std::span<const double> x, std::span<double> g) {
              const double k = std::exp(x[0]), s = std::exp(x[1]);
              ode::Problem problem{Production{}, {a[c]}, {k, s}, {0.0, t_end[c]}};
              const auto r = ode::gradient(problem, Misfit{d[c], kSigma}, ode::DiscreteAdjoint{},
                                           {.method = ode::Method::RK4, .dt = t_end[c] / 50});
              g[0] = k * r.wrt_parameters[0];  // d/dlog k
              g[1] = s * r.wrt_parameters[1];
              return r.objective;
            },
            .batch = {}};
  }
};

TEST(StochasticFit, FitsAManyConditionOdeProblemToTheFullBatchOptimum) {
  const ProductionData data(120);
  const opt::Dataset ds = data.dataset();
  const std::vector<double> start{std::log(2.0), std::log(0.05)};
  // The full-batch optimum by TAO's bounded quasi-Newton method.
  opt::Objective full{.n = 2, .objective_and_gradient = [&](std::span<const double> x, std::span<double> g) {
    std::vector<double> gi(2);
    g[0] = g[1] = 0;
    double f = 0;
    for (std::size_t c = 0; c < ds.n_conditions; ++c) {
      f += ds.condition(c, x, gi);
      g[0] += gi[0];
      g[1] += gi[1];
    }
    return f;
  }, .hessian = {}};
  const auto tao = opt::minimize(full, start, kFree2, kFree2Up, {.gatol = 1e-9, .grtol = 0});
  ASSERT_TRUE(tao.converged) << tao.termination;
  const auto r = opt::fit(ds, start, kFree2, kFree2Up,
                          {.epochs = 40, .batch = 12, .learning_rate = 0.05,
                           .schedule = opt::LearningRateSchedule::Cosine, .validation_split = 0.1, .seed = 2});
  // Within 1 of the full-batch negative log-likelihood (the usual bar for
  // "reached the optimum" in multistart fits; measured 0.20 of 21.3).
  EXPECT_LT(r.objective - tao.objective, 1.0) << r.brief_report();
  // The parameters within 3 standard errors of the truth: the standard
  // errors from the Gauss–Newton curvature at TAO's optimum, by central
  // differences of the exact gradient (h = 1e-5: error ~h² ≪ the 3σ used;
  // measured deviations 0.18σ and 0.11σ).
  std::vector<double> gp(2), gm(2), H(4);
  for (int j = 0; j < 2; ++j) {
    std::vector<double> xp = tao.x, xm = tao.x;
    xp[j] += 1e-5;
    xm[j] -= 1e-5;
    full.objective_and_gradient(xp, gp);
    full.objective_and_gradient(xm, gm);
    for (int i = 0; i < 2; ++i) H[i * 2 + j] = (gp[i] - gm[i]) / 2e-5;
  }
  const double det = H[0] * H[3] - H[1] * H[2];
  const double se0 = std::sqrt(H[3] / det), se1 = std::sqrt(H[0] / det);
  EXPECT_LT(std::abs(r.x[0] - std::log(0.8)), 3 * se0) << "se " << se0;
  EXPECT_LT(std::abs(r.x[1] - std::log(0.3)), 3 * se1) << "se " << se1;
  // The mini-batch fit ran fewer condition simulations per epoch than a
  // full-batch objective evaluation counts (each step is 12 of 108).
  EXPECT_EQ(r.epochs.front().steps, 9);
}

}  // namespace
