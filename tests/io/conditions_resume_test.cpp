// `sensitivity --resume` over a file's conditions (io::conditions_sensitivity
// with io::ConditionsPlace, the partial file of io/resume.hpp): a hook on
// every integrator step throws io::Interrupted after a chosen number of
// steps — deterministically, anywhere in the computation (a condition's
// trajectory, its forward pass, its reverse sweep, between conditions) —
// the place reached goes through the partial file and back, and the resumed
// computation must give the uninterrupted one's bits: J, every J_c, the
// summed gradient and every condition's trajectory. The same loop with a
// file without conditions is the single-condition resume, checked the same
// way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "costate/io/conditions.hpp"
#include "costate/io/input.hpp"
#include "costate/io/resume.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/ode/step_plan.hpp"

namespace {

namespace fs = std::filesystem;
using costate::io::ConditionsPlace;
using costate::io::ConditionsSensitivity;
using costate::io::RunConfig;

const std::string kData = COSTATE_DATA_DIR "/examples/decay_conditions/";

/// Stops per case: at k/(kStops + 1) of the uninterrupted run's steps.
constexpr int kStops = 11;

class ConditionsResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_conditions_resume_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  /// The decay model of conditions_test under the discrete adjoint with
  /// binomial checkpointing (the reverse sweep recomputes), with or without
  /// conditions: every kind of replacement (a number, another parameter, an
  /// initial value as a number and as an expression).
  RunConfig load(bool conditions, bool delayed = false) {
    const std::string d = kData;
    std::string text =
        "model: {states: [x, y], equations: {x: \"-k*x\", y: \"k*x - m*y\"}}\n"
        "parameters: {k: 0.4, m: 0.25, k_i: 0.2, dose: 1.0, x0: 3.0}\n"
        "initial_state: {x: dose, y: 0.05}\n"
        "time: {start: 0.0, end: 10.0, output_every: 0.5}\n"
        "integrator: {method: rk4, dt: 0.005}\n"
        "sensitivity: {method: discrete_adjoint, checkpointing: {schedule: binomial, snapshots: 5}, "
        "wrt: [k, m, k_i, x0, initial_state]}\n";
    if (conditions)
      text += "objective: {terminal: \"0.5*y*y\"}\n"
              "conditions:\n"
              "  - {id: a, parameters: {dose: 1}, data: {file: " + d + "dose1.csv, noise: 0.02}}\n"
              "  - {id: b, parameters: {dose: 4, k: k_i}, data: {file: " + d + "inhibited.csv, noise: 0.02}}\n"
              "  - {id: c, initial_state: {x: x0, y: 0.5}, data: {file: " + d + "dose2.csv, noise: 0.02}}\n"
              "  - {id: d, parameters: {m: k}, initial_state: {x: 2*x0}, data: {file: " + d +
              "dose8.csv, noise: 0.02}}\n";
    else
      text += "objective: {terminal: \"0.5*y*y\", data: {file: " + d + "dose1.csv, noise: {x: 0.02, y: 0.02}}}\n";
    if (delayed)
      // Delayed events (events.hpp): a dose when x falls to 0.6 dose (a state
      // trigger), executed after a delay that depends on y and k, with the
      // values of the trigger time; and a time trigger whose values are the
      // execution's. The reverse sweeps stop between triggers and
      // executions: the pending adjoints go through the partial file.
      text += "events:\n"
              "  - {name: redose, trigger: \"x < 0.6*dose\", delay: \"0.7 + 0.5*y + k\", "
              "assign: {x: \"x + 0.5*dose\", y: \"0.9*y\"}}\n"
              "  - {name: clear, trigger: \"t >= 3.0\", delay: \"1 + 1.5*m\", "
              "use_values_from_trigger_time: false, assign: {y: \"0.5*y + 0.1*x\"}}\n";
    const fs::path p = dir_ / (std::string(delayed ? "delayed_" : "") + (conditions ? "conditions.yaml" : "single.yaml"));
    std::ofstream(p) << text;
    return costate::io::load_run_config(p.string());
  }
  fs::path dir_;
};

/// A step hook that throws io::Interrupted at step `stop` of this process
/// (counted over every integration and sweep; never when stop < 0), and
/// counts the steps.
struct StopAt {
  std::shared_ptr<std::int64_t> steps = std::make_shared<std::int64_t>(0);
  std::int64_t stop = -1;
  void operator()(double) const {
    if (++*steps == stop) throw costate::io::Interrupted(SIGTERM, "test stop");
  }
};

/// The computation with the hook, from `from` (none: the start).
ConditionsSensitivity compute(RunConfig cfg, const StopAt& hook, const ConditionsPlace* from,
                              ConditionsPlace* at) {
  cfg.integrator.on_step = hook;
  return costate::io::conditions_sensitivity(cfg, {.resume_from = from, .interrupted_at = at});
}

void expect_same_bits(const ConditionsSensitivity& a, const ConditionsSensitivity& ref, const std::string& where) {
  EXPECT_EQ(a.gradient.result.objective, ref.gradient.result.objective) << where;
  EXPECT_EQ(a.objectives, ref.objectives) << where;
  EXPECT_EQ(a.gradient.gradient_p, ref.gradient.gradient_p) << where;
  EXPECT_EQ(a.gradient.result.wrt_initial_state, ref.gradient.result.wrt_initial_state) << where;
  EXPECT_EQ(a.output.gradient, ref.output.gradient) << where;
  ASSERT_EQ(a.trajectories.size(), ref.trajectories.size()) << where;
  for (std::size_t c = 0; c < ref.trajectories.size(); ++c) {
    EXPECT_EQ(a.trajectories[c].t, ref.trajectories[c].t) << where << ", condition " << c;
    EXPECT_EQ(a.trajectories[c].y, ref.trajectories[c].y) << where << ", condition " << c;
  }
}

/// Runs `cfg` from the start, stopped at each of `stops` in turn (steps of
/// each process), every stop's place written to a partial file and read
/// back; the last process runs to the end. Returns the finished result and
/// counts the stops that kept a place.
ConditionsSensitivity chain(const RunConfig& cfg, const std::vector<std::int64_t>& stops, const fs::path& file,
                            int& kept, int& between) {
  ConditionsPlace from;
  bool resuming = false;
  for (std::int64_t stop : stops) {
    ConditionsPlace at;
    try {
      (void)compute(cfg, StopAt{.stop = stop}, resuming ? &from : nullptr, &at);
      ADD_FAILURE() << "the stop at step " << stop << " did not stop";
    } catch (const costate::io::Interrupted&) {
      if (!at.ahead_of(from)) continue;  // nothing beyond `from` to keep: the same start again
      costate::io::write_sensitivity_partial(file.string(), cfg, at, SIGTERM);
      from = costate::io::read_sensitivity_partial(file.string(), cfg);
      resuming = true;
      ++kept;
      if (!(from.sweep && from.sweep->step >= 0)) ++between;
      EXPECT_EQ(from.condition, at.condition);
      EXPECT_EQ(from.objectives, at.objectives);
    }
  }
  return compute(cfg, StopAt{}, resuming ? &from : nullptr, nullptr);
}

void check_resumes(const RunConfig& cfg, const fs::path& file, bool several) {
  const StopAt count;
  const ConditionsSensitivity ref = compute(cfg, count, nullptr, nullptr);
  const std::int64_t total = *count.steps;
  ASSERT_GT(total, 1000);
  int kept = 0, between = 0;
  // One stop each at k/(kStops + 1) of the run, then resumed to the end.
  for (int k = 1; k <= kStops; ++k) {
    const std::int64_t stop = total * k / (kStops + 1);
    expect_same_bits(chain(cfg, {stop}, file, kept, between), ref, "stopped at step " + std::to_string(stop));
  }
  // A chain: every process stopped after an eighth of the run's steps.
  expect_same_bits(chain(cfg, std::vector<std::int64_t>(12, total / 8), file, kept, between), ref, "chain");
  std::printf("[ resume ] %s: %lld steps uninterrupted; %d stops kept a place (%d between sweeps)\n",
              several ? "4 conditions" : "one condition", static_cast<long long>(total), kept, between);
  EXPECT_GT(kept, 1) << "the stops should land in reverse sweeps or after conditions";
  if (several) {
    EXPECT_GT(between, 0) << "no stop kept the conditions done without a sweep";
  }
}

TEST_F(ConditionsResumeTest, ConditionsResumeToTheUninterruptedBitsFromAnyStop) {
  check_resumes(load(true), dir_ / "s.h5", true);
}

TEST_F(ConditionsResumeTest, OneConditionResumesThroughTheSameLoop) {
  check_resumes(load(false), dir_ / "s.h5", false);
}

TEST_F(ConditionsResumeTest, DelayedEventsResumeThroughTheSameLoop) {
  // Stops between a delayed event's trigger and its execution keep the
  // adjoints pending there (AdjointResume::pending_events) and the plan's
  // links (EventInstant::origin, scheduled) in the partial file.
  for (const bool conditions : {false, true}) {
    SCOPED_TRACE(conditions ? "4 conditions" : "one condition");
    const RunConfig cfg = load(conditions, true);
    check_resumes(cfg, dir_ / "s.h5", conditions);
    // The partial file round-trips the links and what is pending (80
    // stops in the last third of the run, where the reverse sweeps are).
    const StopAt count;
    const ConditionsSensitivity ref = compute(cfg, count, nullptr, nullptr);
    int pending = 0;
    for (int k = 1; k <= 80; ++k) {
      ConditionsPlace at;
      try {
        (void)compute(cfg, StopAt{.stop = *count.steps * (161 + k) / 242}, nullptr, &at);
      } catch (const costate::io::Interrupted&) {
      }
      if (!at.sweep || at.sweep->step < 0) continue;
      const fs::path file = dir_ / "links.h5";
      costate::io::write_sensitivity_partial(file.string(), cfg, at, SIGTERM);
      const ConditionsPlace back = costate::io::read_sensitivity_partial(file.string(), cfg);
      ASSERT_TRUE(back.sweep);
      EXPECT_EQ(back.sweep->steps, at.sweep->steps) << "the plan with its delayed links";
      EXPECT_EQ(back.sweep->pending_events, at.sweep->pending_events);
      pending += at.sweep->pending_events.empty() ? 0 : 1;
      // Resumed from the file's place: the uninterrupted bits.
      expect_same_bits(compute(cfg, StopAt{}, &back, nullptr), ref, "resumed from stop " + std::to_string(k));
      bool links = false;
      for (const auto& e : at.sweep->steps.events()) links = links || !e.scheduled.empty();
      EXPECT_TRUE(links) << "the plan schedules delayed executions";
    }
    std::printf("[ resume ] delayed events: %d of 80 stops held pending adjoints\n", pending);
    EXPECT_GT(pending, 0) << "no stop landed between a trigger and its execution";
  }
}

TEST_F(ConditionsResumeTest, APartialFileOfOtherConditionsIsRefused) {
  const RunConfig cfg = load(true);
  ConditionsPlace at;
  const StopAt count;
  (void)compute(cfg, count, nullptr, nullptr);
  try {
    (void)compute(cfg, StopAt{.stop = *count.steps * 3 / 4}, nullptr, &at);
  } catch (const costate::io::Interrupted&) {
  }
  ASSERT_TRUE(at.ahead_of({}));
  const fs::path file = dir_ / "s.h5";
  costate::io::write_sensitivity_partial(file.string(), cfg, at, SIGTERM);
  // The file without conditions (and so other settings) does not take it.
  const RunConfig single = load(false);
  try {
    (void)costate::io::read_sensitivity_partial(file.string(), single);
    ADD_FAILURE() << "read a partial file written with other conditions";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("other settings"), std::string::npos) << e.what();
  }
  // A place that does not fit the conditions is refused by the computation.
  ConditionsPlace bad = at;
  bad.objectives.push_back(1.0);
  EXPECT_THROW((void)compute(cfg, StopAt{}, &bad, nullptr), costate::Error);
}

}  // namespace
