// `costate calibrate problem.yaml --optimizer adamw …` on a PEtab benchmark
// problem: the JSON's epochs, simulation count and status, the HDF5 file,
// the same numbers for any --physical-batch, a fit stopped by SIGTERM or
// killed by SIGKILL resumed to the same bits, and bad flags refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numbers>
#include <nlohmann/json.hpp>
#include <string>

#include "petab/petab_data.hpp"
#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kFujita = fs::path("benchmark") / "Fujita_SciSignal2010";

fs::path work_dir() {
  static const fs::path d = costate::test::scratch_dir("costate_petab_stochastic_cli");
  return d;
}

costate::test::CommandResult calibrate(const std::string& flags) {
  const fs::path yaml = costate::test::petab_problem_yaml(costate::test::petab_dir() / kFujita);
  return costate::test::run_command(work_dir(), COSTATE_EXE, "calibrate '" + yaml.string() + "' " + flags);
}

Json json_of(const costate::test::CommandResult& r) { return Json::parse(r.out.substr(r.out.find('{'))); }

/// The command fails and its stderr holds `words`.
void refused(const std::string& flags, const std::string& words) {
  const auto r = calibrate(flags);
  EXPECT_NE(r.code, 0) << flags;
  EXPECT_NE(r.err.find(words), std::string::npos) << flags << ": " << r.err;
}

TEST(PetabStochasticCli, FitsByEpochsAndReportsThem) {
  COSTATE_REQUIRE_PETAB(kFujita);
  const auto r = calibrate("--optimizer adamw --epochs 3 --batch 2 --learning-rate 0.02 --json -q -o fit.h5");
  // Three epochs with no convergence test: not converged (exit 2), said in
  // the calibrations' one vocabulary (issue 35).
  ASSERT_EQ(r.code, 2) << r.err;
  const Json j = json_of(r);
  EXPECT_EQ(j["status"], "not_converged");
  EXPECT_EQ(j["convergence"]["status"], "not_converged");
  EXPECT_EQ(j["optimizer"], "adamw");
  EXPECT_EQ(j["termination"], "epochs");
  ASSERT_EQ(j["epochs"].size(), 3u);
  for (const auto& e : j["epochs"]) {
    EXPECT_TRUE(e["train_loss"].is_number());
    EXPECT_TRUE(e["train_loss_stderr"].is_number());
    EXPECT_TRUE(e["validation_loss"].is_null());  // no validation split
  }
  // Fujita has 6 experiments: 3 epochs of 3 steps × 2, then the final
  // objective over all 6.
  EXPECT_EQ(j["steps"], 9);
  EXPECT_EQ(j["simulations"], 3 * 6 + 6);
  EXPECT_EQ(j["parameters"].size(), 19u);
  EXPECT_TRUE(j["llh"].is_number());
  EXPECT_TRUE(fs::exists(work_dir() / "fit.h5"));
  // The physical batch changes no bit (17 significant digits in the JSON).
  const auto p = calibrate("--optimizer adamw --epochs 3 --batch 2 --learning-rate 0.02 --physical-batch 1 --json -q");
  ASSERT_EQ(p.code, 2) << p.err;
  const Json k = json_of(p);
  EXPECT_EQ(k["llh"], j["llh"]);
  EXPECT_EQ(k["parameters"], j["parameters"]);
}

TEST(PetabStochasticCli, AFitStoppedBySigtermResumesToTheSameBits) {
  COSTATE_REQUIRE_PETAB(kFujita);
  const std::string flags = "--optimizer adam --epochs 6 --batch 1 --learning-rate 0.01 --validation-split 0.2 --json -q";
  const auto whole = calibrate(flags + " -o whole.h5");
  ASSERT_EQ(whole.code, 2) << whole.err;  // epochs only: not converged
  const Json j = json_of(whole);
  // SIGTERM after a delay (shorter each try, until it lands inside the fit,
  // after the problem is read): exit 143 and the state in the file; then
  // --resume.
  const fs::path yaml = costate::test::petab_problem_yaml(costate::test::petab_dir() / kFujita);
  const auto interrupt = [&](const std::string& file) {
    for (double delay : {1.5, 1.0, 0.7, 0.4}) {
      fs::remove(work_dir() / file);
      {
        std::ofstream script(work_dir() / "interrupt.sh");
        script << "'" << COSTATE_EXE << "' calibrate '" << yaml.string() << "' " << flags << " -o " << file
               << " > /dev/null 2> interrupt.err &\npid=$!\nsleep " << delay << "\nkill -TERM $pid\nwait $pid\necho $?\n";
      }
      const auto r = costate::test::run_command(work_dir(), "/bin/sh", "interrupt.sh");
      // Landed inside the fit: exit 143 and the message that the state was
      // kept (a SIGTERM after the fit's last step, while its result is
      // written, also exits 143 but keeps no state to resume).
      std::ifstream err(work_dir() / "interrupt.err");
      const std::string said((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
      if (r.out.find("143") != std::string::npos && said.find("its state is in") != std::string::npos &&
          fs::exists(work_dir() / file))
        return true;
    }
    return false;
  };
  if (!interrupt("part.h5")) GTEST_SKIP() << "no SIGTERM landed inside the fit (a very fast or very slow machine)";
  const auto resumed = calibrate(flags + " --resume part.h5");
  ASSERT_EQ(resumed.code, 2) << resumed.err;
  const Json k = json_of(resumed);
  EXPECT_EQ(k["llh"], j["llh"]);
  EXPECT_EQ(k["parameters"], j["parameters"]);
  EXPECT_EQ(k["simulations"], j["simulations"]);
  EXPECT_EQ(k["epochs"], j["epochs"]);
  // Another learning rate is another fit: refused, naming both settings.
  ASSERT_TRUE(interrupt("part2.h5"));
  const auto other = calibrate("--optimizer adam --epochs 6 --batch 1 --learning-rate 0.02 "
                               "--validation-split 0.2 --json -q --resume part2.h5");
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.err.find("settings differ"), std::string::npos) << other.err;
}

TEST(PetabStochasticCli, AFitKilledBySigkillResumesFromItsCheckpointToTheSameBits) {
  // A SIGKILL gives no chance to stop: what resumes is the checkpoint the
  // running fit writes to -o's .h5 file about once a second
  // (docs/stochastic_fit.md). Before checkpoints, the killed fit left no
  // file. ~10 s uninterrupted here, killed after its first checkpoint.
  COSTATE_REQUIRE_PETAB(kFujita);
  const std::string flags = "--optimizer adam --epochs 30 --batch 1 --learning-rate 0.01 --validation-split 0.2 --json -q";
  const auto whole = calibrate(flags);
  ASSERT_EQ(whole.code, 2) << whole.err;  // epochs only: not converged
  const fs::path yaml = costate::test::petab_problem_yaml(costate::test::petab_dir() / kFujita);
  fs::remove(work_dir() / "killed.h5");
  {
    std::ofstream script(work_dir() / "kill.sh");
    script << "'" << COSTATE_EXE << "' calibrate '" << yaml.string() << "' " << flags
           << " -o killed.h5 > /dev/null 2> kill.err &\npid=$!\n"
              "i=0; while [ ! -e killed.h5 ] && kill -0 $pid 2> /dev/null && [ $i -lt 6000 ]; do sleep 0.1; i=$((i+1)); done\n"
              "kill -KILL $pid\nwait $pid\necho $?\n";
  }
  const auto r = costate::test::run_command(work_dir(), "/bin/sh", "kill.sh");
  ASSERT_NE(r.out.find("137"), std::string::npos) << "not killed inside the fit (" << whole.seconds << " s uninterrupted): "
                                                  << r.out << costate::test::slurp(work_dir() / "kill.err");
  ASSERT_TRUE(fs::exists(work_dir() / "killed.h5"));
  const auto resumed = calibrate(flags + " --resume killed.h5");
  ASSERT_EQ(resumed.code, 2) << resumed.err;
  const Json j = json_of(whole), k = json_of(resumed);
  for (const char* key : {"llh", "objective", "parameters", "simulations", "steps", "epochs"}) EXPECT_EQ(k[key], j[key]) << key;
}

TEST(PetabStochasticCli, TakesTheInputFilesOptimizerKeysThroughSet) {
  COSTATE_REQUIRE_PETAB(kFujita);
  // A cosine schedule from --set: 4 epochs × 3 steps (batch 2 of 6
  // experiments), T = 12 steps; epoch e reports η of its last step t = 3e − 1:
  //   η_t = η_min + (η − η_min)(1 + cos(π t / T))/2.
  constexpr double kEta = 0.02, kEtaMin = 0.001;
  const std::string flags = "--optimizer adam --epochs 4 --batch 2 --learning-rate 0.02 --seed 1 --json -q";
  const auto r = calibrate(flags + " --set calibration.optimizer.schedule=cosine"
                                   " --set calibration.optimizer.min_learning_rate=0.001 -o cosine.h5");
  ASSERT_EQ(r.code, 2) << r.err;  // epochs only: not converged
  const Json j = json_of(r);
  ASSERT_EQ(j["epochs"].size(), 4u);
  for (int e = 1; e <= 4; ++e) {
    const double f = (3.0 * e - 1.0) / 12.0;
    const double expect = kEtaMin + (kEta - kEtaMin) * 0.5 * (1.0 + std::cos(std::numbers::pi * f));
    // (the formula as written; the JSON's 17 digits give the double back,
    // so within 4 ulp: only the order of the operations may differ)
    EXPECT_DOUBLE_EQ(j["epochs"][e - 1]["learning_rate"].get<double>(), expect) << "epoch " << e;
  }
  // Without the --set the rate stays constant: the keys did change the fit.
  const auto plain = calibrate(flags);
  ASSERT_EQ(plain.code, 2) << plain.err;
  EXPECT_EQ(json_of(plain)["epochs"][3]["learning_rate"].get<double>(), kEta);
  EXPECT_NE(json_of(plain)["llh"], j["llh"]);
  // The settings run are in the output file's provenance.
  std::ifstream file(work_dir() / "cosine.h5", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("schedule: cosine"), std::string::npos);
  EXPECT_NE(bytes.find("min_learning_rate: 0.001"), std::string::npos);
  // The rescue and restart limits are keys too: read, validated, and a bad
  // key refused by name with the nearest valid one, as for input files.
  const auto limits = calibrate(flags + " --set calibration.optimizer.max_rescues=2"
                                        " --set calibration.optimizer.max_restarts=0");
  EXPECT_EQ(limits.code, 2) << limits.err;
  refused("--optimizer adam --set calibration.optimizer.schedul=cosine", "schedul");
  refused("--optimizer adam --set calibration.optimizer.schedul=cosine", "did you mean 'schedule'");
  refused("--optimizer adam --set calibration.optimizer.schedule=linear", "valid schedules: constant, step, cosine");
  refused("--optimizer adam --set calibration.optimizer.max_restarts=-1", "max_restarts");
  refused("--set calibration.optimizer.schedule=cosine", "use it with `costate calibrate --optimizer adamw|adam|sgd`");
  refused("--optimizer adam --set calibration.parameters.k=1", "unknown key 'calibration.parameters'");
}

TEST(PetabStochasticCli, RefusesBadFlagsByName) {
  COSTATE_REQUIRE_PETAB(kFujita);
  refused("--epochs 3", "add --optimizer adamw, adam or sgd");
  refused("--finish 5", "add --optimizer adamw, adam or sgd");
  refused("--optimizer adam --finish -2", "--finish -2: expected ≥ 0 iterations");
  refused("--optimizer adagrad", "valid methods: adamw, adam, sgd");
  refused("--optimizer adamw --batch 7", "batch = 7 is larger than the training set (6 conditions)");
  refused("--optimizer adamw --learning-rate 0", "--learning-rate 0: expected a finite value > 0");
  refused("--optimizer adamw --validation-split 1", "--validation-split 1: expected a fraction in [0, 1)");
  refused("--optimizer adamw --validation-split 0.99", "leaves none for training");
  refused("--optimizer sgd --starts 4", "--starts and --sampling are for TAO's multistart");
}

}  // namespace
