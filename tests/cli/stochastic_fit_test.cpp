// `costate calibrate FILE --optimizer adamw -o FIT.h5` over an input file's
// conditions (docs/stochastic_fit.md, issue 33): a fit stopped by SIGTERM,
// or killed by SIGKILL with no chance to stop (resumed from the checkpoint
// the running fit writes about once a second), continues with --resume to
// the uninterrupted fit's bits; a condition whose simulation blows up at
// some parameters is rescued, not fatal, and counted; a converged
// full-batch finish reports standard errors; bad settings are refused by
// name.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/run_costate.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

/// The example's five conditions at a finer step (dt 0.001: ~10× the
/// work per condition), so that the fit below runs for several seconds and
/// is killed inside it.
const std::string kFlags = "--optimizer adamw --epochs 300 --batch 1 --learning-rate 0.02 --seed 3 "
                           "--set integrator.dt=0.001 --json -q";

class StochasticFitCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = costate::test::scratch_dir("costate_stochastic_fit_cli"); }
  costate::test::CommandResult calibrate(const std::string& flags) const {
    return costate::test::run_command(dir_, COSTATE_EXE, "calibrate '" + input_ + "' " + flags, "timeout -s KILL 600");
  }
  /// Starts `costate calibrate input flags` (stdout, stderr to files); the pid.
  pid_t spawn(const std::string& flags) const {
    const std::string cmd = "cd '" + dir_.string() + "' && exec '" + std::string(COSTATE_EXE) + "' calibrate '" +
                            input_ + "' " + flags + " > spawned.out 2> spawned.err < /dev/null";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  /// Waits until `file` exists (the running fit's first checkpoint) or the
  /// process ended; true when the file is there and the process still runs.
  bool wait_for_checkpoint(pid_t pid, const std::string& file) const {
    for (int i = 0; i < 12000; ++i) {  // up to 10 min under load
      if (fs::exists(dir_ / file)) return true;
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  static int wait_for(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  std::string spawned_err() const { return costate::test::slurp(dir_ / "spawned.err"); }

  fs::path dir_;
  std::string input_ = std::string(COSTATE_EXAMPLES_DIR) + "/decay_conditions.yaml";
};

/// The numbers a resumed fit must reproduce bit for bit (the JSON holds
/// each double to the last bit).
void expect_same_fit(const Json& a, const Json& b) {
  for (const char* key : {"objective", "parameters", "optimizer_variables", "epochs", "simulations", "steps",
                          "rescues", "termination", "status"})
    EXPECT_EQ(a[key], b[key]) << key;
}

TEST_F(StochasticFitCli, AFitKilledBySigkillResumesFromItsCheckpointToTheSameBits) {
  const auto whole = calibrate(kFlags + " -o whole.h5");
  ASSERT_EQ(whole.code, 2) << whole.err;  // epochs only: not converged
  const Json w = Json::parse(whole.out);
  ASSERT_EQ(w["epochs"].size(), 300u);
  // Killed twice — the first run after its first checkpoint, then the run
  // resumed from that checkpoint after the first one it writes itself —
  // then resumed to the end. Each checkpoint is moved to kept.h5, which the
  // next run resumes from while it writes its own to part.h5.
  for (const std::string& flags : {kFlags + " -o part.h5", kFlags + " --resume kept.h5 -o part.h5"}) {
    const pid_t pid = spawn(flags);
    ASSERT_TRUE(wait_for_checkpoint(pid, "part.h5"))
        << "the fit ended before its first checkpoint (" << whole.seconds << " s uninterrupted)\n"
        << spawned_err();
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_for(pid), -SIGKILL) << spawned_err();
    fs::rename(dir_ / "part.h5", dir_ / "kept.h5");
  }
  const auto resumed = calibrate(kFlags + " --resume kept.h5 -o done.h5");
  ASSERT_EQ(resumed.code, 2) << resumed.err;
  expect_same_fit(Json::parse(resumed.out), w);
}

TEST_F(StochasticFitCli, AFitStoppedBySigtermResumesToTheSameBits) {
  const auto whole = calibrate(kFlags);
  ASSERT_EQ(whole.code, 2) << whole.err;
  // SIGTERM once the fit is under way (its first checkpoint written): it
  // stops after a step, exits 143 and writes its state.
  const pid_t pid = spawn(kFlags + " -o part.h5");
  ASSERT_TRUE(wait_for_checkpoint(pid, "part.h5")) << spawned_err();
  ::kill(pid, SIGTERM);
  ASSERT_EQ(wait_for(pid), 143) << spawned_err();
  EXPECT_NE(spawned_err().find("its state is in part.h5"), std::string::npos) << spawned_err();
  const auto resumed = calibrate(kFlags + " --resume part.h5");
  ASSERT_EQ(resumed.code, 2) << resumed.err;
  expect_same_fit(Json::parse(resumed.out), Json::parse(whole.out));
  // The finished fit replaced the state with its result: nothing to resume.
  const auto again = calibrate(kFlags + " --resume part.h5");
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.err.find("holds no interrupted stochastic fit"), std::string::npos) << again.err;
}

/// y' = k y² from y(0) = y0 blows up at t = 1/(k y0): four conditions
/// y0 = 0.5, 1, 1.5, 2 observed on [0, 1], data from the truth k = 0.3
/// (exact: y = y0 / (1 − k y0 t)), so condition y0 = 2 cannot be simulated
/// for k ≥ 0.5 — dopri5's step collapses before the singularity ("step
/// size … fell below the limit …; the solution may blow up").
std::string write_blow_up(const fs::path& dir) {
  std::string conditions;
  for (const double y0 : {0.5, 1.0, 1.5, 2.0}) {
    const std::string name = "y" + std::to_string(static_cast<int>(y0 * 10)) + ".csv";
    std::ofstream csv(dir / name);
    csv.precision(17);
    csv << "t,y\n";
    for (const double t : {0.25, 0.5, 0.75, 1.0}) csv << t << "," << y0 / (1.0 - 0.3 * y0 * t) << "\n";
    conditions += "  - {id: " + name.substr(0, name.size() - 4) + ", parameters: {y0: " + std::to_string(y0) + "}, data: {file: " + name + ", noise: 0.05}}\n";
  }
  std::ofstream(dir / "blow_up.yaml") << "model:\n  states: [y]\n  equations: {y: \"k*y*y\"}\n"
                                         "parameters: {k: 0.05, y0: 1.0}\ninitial_state: {y: y0}\n"
                                         "time: {start: 0.0, end: 1.0, output_every: 0.25}\n"
                                         "integrator: {method: dopri5, rtol: 1.0e-8, atol: 1.0e-10}\n"
                                         "sensitivity: {method: discrete_adjoint}\n"
                                      << "conditions:\n" << conditions
                                      << "calibration:\n  parameters:\n    k: {lower: 0.01, upper: 10, log: true}\n";
  return (dir / "blow_up.yaml").string();
}

TEST_F(StochasticFitCli, AConditionThatBlowsUpIsRescuedAndCounted) {
  input_ = write_blow_up(dir_);
  // Full batches at η = 1.5 on log k (gradients clipped to norm 1, so that
  // the huge ones near the singularity do not stall Adam's second moment;
  // cosine decay), then a full-batch finish: Adam's steps of ~1.5 from
  // log 0.05 overshoot to k ≥ 0.5 in epochs 3 and 4, where condition y0 = 2
  // (and, further out, y0 = 1.5) cannot be simulated.
  std::ofstream(dir_ / "blow_up.yaml", std::ios::app) << "  optimizer: {method: adam, clip_norm: 1, schedule: cosine}\n";
  const std::string flags = "--epochs 60 --learning-rate 1.5 --seed 1 --finish 20";
  const auto r = calibrate(flags + " --json -q");
  ASSERT_EQ(r.code, 0) << r.err << r.out;  // rescued, finished, converged
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["termination"], "epochs");
  EXPECT_EQ(j["status"], "ok");
  const int rescues = j["rescues"].get<int>();
  EXPECT_GT(rescues, 0);  // measured 4 (1 in epoch 3, 3 in epoch 4)
  int per_epoch = 0;
  for (const auto& e : j["epochs"]) per_epoch += e["rescues"].get<int>();
  EXPECT_EQ(per_epoch, rescues);
  // The data are exact (no noise), so the misfit's optimum is the truth
  // k = 0.3 up to dopri5's error at rtol 1e-8 (measured 0.30000000005);
  // 1e-6 relative leaves that error a factor 100.
  EXPECT_NEAR(j["parameters"]["k"].get<double>(), 0.3, 1e-6 * 0.3) << r.out;
  // The progress names each epoch's rescues, the report their count.
  const auto text = calibrate(flags);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.err.find("epoch 4/60: "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find(" rescues\n"), std::string::npos) << text.err;
  EXPECT_NE(text.out.find(", " + std::to_string(rescues) + " rescues, 0 restarts)"), std::string::npos) << text.out;
}

TEST_F(StochasticFitCli, WhenTheRescuesAreExhaustedTheFitRestartsAndRecovers) {
  input_ = write_blow_up(dir_);
  // The fit above with one halving per failed step (max_rescues = 1): in
  // epoch 4 a step to k ≥ 0.5 fails and so does its half; without restarts
  // the fit stops there (rescue_failed, exit 2).
  std::ofstream(dir_ / "blow_up.yaml", std::ios::app) << "  optimizer: {method: adam, clip_norm: 1, schedule: cosine}\n";
  const std::string flags = "--epochs 60 --learning-rate 1.5 --seed 1 --finish 20 --set calibration.optimizer.max_rescues=1";
  const auto stuck = calibrate(flags + " --set calibration.optimizer.max_restarts=0 --json -q");
  EXPECT_EQ(stuck.code, 2) << stuck.err;
  const Json s = Json::parse(stuck.out);
  EXPECT_EQ(s["termination"], "rescue_failed");
  EXPECT_EQ(s["restarts"], 0);
  // With the default max_restarts (3) the fit goes back to the last
  // accepted point with fresh moments and half the learning rate, skips the
  // batch, and finishes at the truth (measured: 1 restart, k =
  // 0.29999999995; 1e-6 relative as above).
  const auto r = calibrate(flags + " --json -q -o restarted.h5");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["termination"], "epochs");
  EXPECT_EQ(j["restarts"], 1);
  int per_epoch = 0;
  for (const auto& e : j["epochs"]) per_epoch += e["restarts"].get<int>();
  EXPECT_EQ(per_epoch, 1);
  EXPECT_NEAR(j["parameters"]["k"].get<double>(), 0.3, 1e-6 * 0.3) << r.out;
  {
    const hid_t f = H5Fopen((dir_ / "restarted.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t d = H5Dopen2(f, "/stochastic/restarts", H5P_DEFAULT);
    ASSERT_GE(d, 0) << "no /stochastic/restarts";
    double written = -1.0;
    EXPECT_GE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &written), 0);
    EXPECT_EQ(written, 1.0);
    H5Dclose(d);
    H5Fclose(f);
  }
  // Each restart is reported as it happens, and counted in the report.
  const auto text = calibrate(flags);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.err.find("warning: restart 1/3 in epoch "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find(", 1 restarts\n"), std::string::npos) << text.err;
  EXPECT_NE(text.out.find(", 1 restarts)"), std::string::npos) << text.out;
}

TEST_F(StochasticFitCli, AConvergedFullBatchFinishReportsTheStandardErrors) {
  // The finish ends at the full-batch optimum, so its standard errors are
  // the TAO calibration's (same formula, same point up to the two fits'
  // gradient tolerances: finish_gatol 1e-3, the file's gatol 1e-8; measured
  // 1e-11 relative apart; 1e-6 allows the finish a looser stop).
  const auto tao = calibrate("--json -q");
  ASSERT_EQ(tao.code, 0) << tao.err;
  const Json t = Json::parse(tao.out);
  const std::string flags = "--optimizer adamw --epochs 40 --batch 2 --learning-rate 0.05 --seed 3";
  const auto r = calibrate(flags + " --finish 50 --json -q -o fit.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_TRUE(j.contains("standard_errors")) << r.out;
  std::vector<double> written(3);
  {
    const hid_t f = H5Fopen((dir_ / "fit.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t d = H5Dopen2(f, "/stochastic/standard_errors", H5P_DEFAULT);
    ASSERT_GE(d, 0) << "no /stochastic/standard_errors";
    EXPECT_GE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, written.data()), 0);
    H5Dclose(d);
    H5Fclose(f);
  }
  std::size_t a = 0;
  for (const char* name : {"k", "m", "k_i"}) {
    const double se = j["standard_errors"][name].get<double>(), expected = t["standard_errors"][name].get<double>();
    EXPECT_NEAR(se, expected, 1e-6 * expected) << name;
    EXPECT_EQ(written[a++], se) << name;  // the file holds the JSON's numbers
    EXPECT_NEAR(j["parameters"][name].get<double>(), t["parameters"][name].get<double>(),
                1e-6 * t["parameters"][name].get<double>())
        << name;
  }
  // Text: value ± standard error.
  const auto text = calibrate(flags + " --finish 50");
  EXPECT_NE(text.out.find(" ± "), std::string::npos) << text.out;
  // Epochs alone end at no converged optimum: no standard errors.
  const auto epochs = calibrate(flags + " --json -q");
  ASSERT_EQ(epochs.code, 2) << epochs.err;
  EXPECT_FALSE(Json::parse(epochs.out).contains("standard_errors")) << epochs.out;
}

TEST_F(StochasticFitCli, BadSettingsAreRefusedByName) {
  // The example's five conditions.
  const auto refused = [&](const std::string& flags, const std::string& words) {
    const auto r = calibrate(flags + " -q");
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.err.find(words), std::string::npos) << flags << ": " << r.err;
  };
  refused("--optimizer adamw --batch 6", "batch = 6 is larger than the training set (5 conditions)");
  refused("--optimizer adamw --batch 5 --validation-split 0.2",
          "batch = 5 is larger than the training set (4 conditions after the validation split)");
  refused("--optimizer adamw --validation-split 0.9", "leaves none for training");
  refused("--optimizer adamw --learning-rate 0", "--learning-rate 0: expected a finite value > 0");
  refused("--optimizer adamw --learning-rate -0.1", "--learning-rate -0.1: expected a finite value > 0");
  refused("--optimizer adagrad", "valid methods: adamw, adam, sgd");
  // A condition naming a parameter the model does not have.
  std::ofstream(dir_ / "d.csv") << "t,x\n1,0.5\n";
  std::ofstream(dir_ / "unknown.yaml") << "model:\n  states: [x]\n  equations: {x: \"-k*x\"}\n"
                                          "parameters: {k: 0.5}\ninitial_state: {x: 1.0}\n"
                                          "time: {start: 0.0, end: 1.0, output_every: 0.5}\n"
                                          "conditions:\n  - {id: a, parameters: {kk: 2}, data: d.csv}\n"
                                          "calibration:\n  parameters:\n    k: {lower: 0.01, upper: 10}\n";
  input_ = (dir_ / "unknown.yaml").string();
  refused("--optimizer adamw", "kk");
}

}  // namespace
