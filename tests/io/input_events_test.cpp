// The `events:` section of input files: what it resolves to (the model's
// events, the resolved YAML that records them), and one test per kind
// of bad input, each checking that the error names the file, the line, the
// key and what was expected.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "costate/core/error.hpp"
#include "costate/io/input.hpp"

namespace {

namespace fs = std::filesystem;
using costate::io::load_run_config;

class InputEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("costate_input_events_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const fs::path p = dir_ / "input.yaml";
    std::ofstream(p) << text;
    return p.string();
  }
  std::string error_of(const std::string& text) {
    const std::string path = write(text);
    try {
      load_run_config(path);
    } catch (const costate::Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for input:\n" << text;
    return {};
  }
  fs::path dir_;
};

// A ball dropped from h0: h' = v, v' = −g; at impact v := −e v. Line 6 is
// the first event's first line.
const char* kBall = R"(model:
  states: [h, v]
  equations: {h: v, v: -g}
parameters: {g: 9.81, e: 0.8, h0: 10}
initial_state: {h: h0, v: 0}
events:
  - name: bounce
    trigger: h <= 0 && v < 0
    assign: {v: -e*v}
  - trigger: t >= 2*h0
    assign: {h: h0, v: 0}
    delay: 0.5
    priority: e
    persistent: false
    initial_value: false
    use_values_from_trigger_time: false
time: {start: 0, end: 5}
)";

TEST_F(InputEventsTest, ResolvesToTheModelsEvents) {
  const auto cfg = load_run_config(write(kBall));
  ASSERT_EQ(cfg.events.size(), 2u);
  EXPECT_EQ(cfg.events[0].name, "bounce");
  EXPECT_EQ(cfg.events[0].trigger, "h <= 0 && v < 0");
  ASSERT_EQ(cfg.events[1].assign.size(), 2u);
  EXPECT_EQ(cfg.events[1].assign[0].first, "h");
  EXPECT_EQ(cfg.events[1].delay, "0.5");
  EXPECT_FALSE(cfg.events[1].persistent);
  EXPECT_FALSE(cfg.events[1].initial_value);
  EXPECT_FALSE(cfg.events[1].use_values_from_trigger_time);
  EXPECT_TRUE(cfg.events[0].persistent);

  const costate::ode::EquationModel m = costate::io::equation_model(cfg);
  ASSERT_EQ(m.n_events(), 2u);
  ASSERT_EQ(m.n_roots(), 3u);
  const std::array<double, 2> y{0.5, -3.0};
  const std::array<double, 3> p{9.81, 0.8, 10.0};
  std::array<double, 3> g{};
  m.roots<double>(1.0, y, p, g);
  EXPECT_EQ(g[0], -0.5);         // 0 − h: h <= 0 true on side +1 (g ≥ 0)
  EXPECT_EQ(g[1], -3.0);         // v − 0: v < 0 true on side −1 (g < 0)
  EXPECT_EQ(g[2], 1.0 - 20.0);   // t − 2 h0: t >= 2 h0 true on side +1
  std::array<double, 1> v{};
  m.event_assign<double>(0, 1.0, y, p, v);
  EXPECT_EQ(v[0], -0.8 * -3.0);
  EXPECT_EQ(m.event_delay(1, 1.0, y, p), 0.5);
  EXPECT_EQ(m.event_priority(1, 1.0, y, p), 0.8);
  EXPECT_TRUE(m.event_attributes(1).has_delay);
  EXPECT_FALSE(m.event_attributes(0).has_delay);
  EXPECT_EQ(m.event_attributes(0).name, "bounce");
  EXPECT_FALSE(m.event_attributes(1).initial_value);

  // The resolved settings (the HDF5 file's record, what --resume compares)
  // hold the events.
  const std::string yaml = cfg.to_yaml();
  for (const char* part : {"events:", "name: bounce", "trigger: \"h <= 0 && v < 0\"",
                           "v: \"-e*v\"", "trigger: \"t >= 2*h0\"", "delay: \"0.5\"",
                           "priority: \"e\"", "persistent: false", "initial_value: false",
                           "use_values_from_trigger_time: false"})
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " not in\n" << yaml;
  EXPECT_TRUE(cfg.warnings.empty()) << cfg.warnings[0];  // h0, e used by events only
}

std::string ball_with(const std::string& events) {
  return "model:\n  states: [h, v]\n  equations: {h: v, v: -g}\nparameters: {g: 9.81, e: 0.8}\n"
         "initial_state: {h: 1, v: 0}\ntime: {start: 0, end: 1}\nevents:\n" + events;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST_F(InputEventsTest, UnknownStateInAssign) {
  const std::string msg = error_of(ball_with("  - trigger: h <= 0\n    assign: {vv: -e*v}\n"));
  EXPECT_TRUE(has(msg, "input.yaml:9:")) << msg;
  EXPECT_TRUE(has(msg, "unknown key 'events[0].assign.vv'")) << msg;
  EXPECT_TRUE(has(msg, "did you mean 'v'?")) << msg;
}

TEST_F(InputEventsTest, TriggerThatIsNotACondition) {
  std::string msg = error_of(ball_with("  - trigger: h - 1\n    assign: {v: 0}\n"));
  EXPECT_TRUE(has(msg, "input.yaml:8:")) << msg;
  EXPECT_TRUE(has(msg, "events[0].trigger")) << msg;
  EXPECT_TRUE(has(msg, "'h - 1' is not a relation")) << msg;
  msg = error_of(ball_with("  - trigger: h == 1\n    assign: {v: 0}\n"));
  EXPECT_TRUE(has(msg, "'==' is not a trigger relation")) << msg;
  msg = error_of(ball_with("  - trigger: h > hh\n    assign: {v: 0}\n"));
  EXPECT_TRUE(has(msg, "events[0].trigger")) << msg;
  EXPECT_TRUE(has(msg, "hh")) << msg;
}

TEST_F(InputEventsTest, AttributesOfTheWrongType) {
  std::string msg = error_of(ball_with("  - trigger: h < 0\n    assign: {v: 0}\n    persistent: maybe\n"));
  EXPECT_TRUE(has(msg, "input.yaml:10:")) << msg;
  EXPECT_TRUE(has(msg, "events[0].persistent: expected true or false")) << msg;
  msg = error_of(ball_with("  - trigger: h < 0\n    assign: {v: 0}\n    delay: [1, 2]\n"));
  EXPECT_TRUE(has(msg, "events[0].delay: expected an expression or a number")) << msg;
  msg = error_of(ball_with("  - trigger: h < 0\n    assign: {v: 0}\n    priority: 2*\n"));
  EXPECT_TRUE(has(msg, "events[0].priority")) << msg;
  msg = error_of(ball_with("  - trigger: h < 0\n    assign: {v: e*}\n"));
  EXPECT_TRUE(has(msg, "events[0].assign.v")) << msg;
}

TEST_F(InputEventsTest, MissingKeysUnknownKeysAndShape) {
  std::string msg = error_of(ball_with("  - assign: {v: 0}\n"));
  EXPECT_TRUE(has(msg, "events[0]: missing required key 'trigger'")) << msg;
  msg = error_of(ball_with("  - trigger: h < 0\n"));
  EXPECT_TRUE(has(msg, "missing required key 'assign'")) << msg;
  msg = error_of(ball_with("  - trigger: h < 0\n    assign: {v: 0}\n    priorty: 1\n"));
  EXPECT_TRUE(has(msg, "unknown key 'events[0].priorty'; did you mean 'priority'?")) << msg;
  msg = error_of(ball_with("  trigger: h < 0\n"));
  EXPECT_TRUE(has(msg, "events: expected a list of events")) << msg;
  msg = error_of("model: lorenz\ntime: {end: 1}\nevents:\n  - {trigger: x > 1, assign: {x: 0}}\n");
  EXPECT_TRUE(has(msg, "events need a model typed as equations")) << msg;
}

}  // namespace
