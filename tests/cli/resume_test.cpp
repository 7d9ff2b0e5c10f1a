// Interrupted `costate run`s and --resume (include/costate/io/resume.hpp): a long run is
// killed at random times — SIGTERM (stops at a step, writes the outputs
// reached marked partial, exits 143) or SIGKILL (dies, nothing written, the
// last partial file stays intact) — and resumed from whatever partial file
// exists, again and again, until it finishes; its /time and /state must be
// the uninterrupted run's, bit for bit. COSTATE_RESUME_TRIALS=N runs N chains
// instead of the default.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/run_costate.hpp"

namespace fs = std::filesystem;

namespace {

/// Fixed-step rk4: resumes bitwise. ~1 s uninterrupted on an idle core.
const char* kFixedInput = R"yaml(model:
  states: [x, y, z, w]
  equations:
    x: "a*(y - x)"
    y: "x*(b - z) - y"
    z: "x*y - c*z"
    w: "0.01*sin(w) + 0.001*x"
parameters: {a: 10.0, b: 28.0, c: 2.6666666666666665}
initial_state: {x: 1.0, y: 1.0, z: 1.0, w: 0.5}
time: {start: 0.0, end: 20.0, output_every: 0.01}
integrator: {method: rk4, dt: 2.0e-5}
)yaml";

/// Adaptive dopri5: resumes with a fresh step-size controller, within
/// tolerance. The harmonic oscillator: exact solution x = cos t, y = -sin t.
/// ~1 s uninterrupted.
const char* kAdaptiveInput = R"yaml(model:
  states: [x, y]
  equations: {x: "y", y: "-x"}
initial_state: {x: 1.0, y: 0.0}
time: {start: 0.0, end: 30000.0, output_every: 5.0}
integrator: {method: dopri5, rtol: 1.0e-10, atol: 1.0e-12}
)yaml";

struct RunFile {
  std::string status;
  std::vector<double> t, y;
};

std::string string_attribute(hid_t loc, const char* name) {
  if (H5Aexists(loc, name) <= 0) return "";
  const hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  const hid_t mem = H5Tcopy(H5T_C_S1);
  H5Tset_size(mem, H5T_VARIABLE);
  H5Tset_cset(mem, H5T_CSET_UTF8);
  char* v = nullptr;
  H5Aread(a, mem, &v);
  std::string s = v ? v : "";
  H5free_memory(v);
  H5Tclose(mem);
  H5Aclose(a);
  return s;
}

std::vector<double> doubles(hid_t file, const char* name) {
  const hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<double> v(static_cast<std::size_t>(n));
  if (n > 0) H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Sclose(space);
  H5Dclose(ds);
  return v;
}

RunFile read_run(const fs::path& p) {
  RunFile r;
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return r;
  r.status = string_attribute(f, "status");
  r.t = doubles(f, "time");
  r.y = doubles(f, "state");
  H5Fclose(f);
  return r;
}

/// Starts `costate args` in dir (stdout/stderr to files); returns the pid.
pid_t spawn(const fs::path& dir, const std::vector<std::string>& args) {
  // The previous process's stderr must not be taken for this one's.
  fs::remove(dir / "stderr.txt");
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    std::freopen("stdout.txt", "w", stdout);
    std::freopen("stderr.txt", "w", stderr);
    std::vector<char*> argv{const_cast<char*>(COSTATE_EXE)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(COSTATE_EXE, argv.data());
    _exit(127);
  }
  return pid;
}

/// Waits until the process has echoed its settings on stderr (its signal
/// handler is installed right after; start-up before it is not
/// interruptible) or has ended.
void wait_started(const fs::path& dir, pid_t pid) {
  for (int i = 0; i < 6000; ++i) {
    if (costate::test::slurp(dir / "stderr.txt").find("  integrator ") != std::string::npos) break;
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid != 0)
      break;  // ended (or not ours)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

/// Waits for pid; exit code, or -signal when killed by a signal.
int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/// The wall time of an uninterrupted run from the moment it reports its
/// integrator (where the kills' clocks start) to its end: kill times are
/// chosen within it.
double reference_run(const fs::path& dir, const std::string& input, const std::string& out) {
  const pid_t pid = spawn(dir, {"run", input, "-o", out});
  wait_started(dir, pid);
  const auto start = std::chrono::steady_clock::now();
  const int rc = wait_for(pid);
  EXPECT_EQ(rc, 0) << costate::test::slurp(dir / "stderr.txt");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct ChainStats {
  int sigterm = 0, sigkill = 0, resumes = 0, finished_before_kill = 0;
};

/// One chain: start, kill at random times (SIGTERM or SIGKILL), resume from
/// whatever partial file exists, until a run finishes. Returns the final file.
/// A resumed run has only the rest to do: its kill time is drawn within the
/// remaining fraction of `wall` (the partial file's output points of the
/// uninterrupted run's `points`), so that kills land inside resumed runs too
/// rather than after they finished.
RunFile interrupted_chain(const fs::path& dir, const std::string& input, const std::string& out,
                          double wall, std::size_t points, std::mt19937& rng, ChainStats& stats) {
  fs::remove(dir / out);
  std::uniform_real_distribution<double> when(0.05, 0.9);
  std::bernoulli_distribution use_kill(0.3);
  for (int attempt = 0; attempt < 20; ++attempt) {
    const bool resume = fs::exists(dir / out);
    std::vector<std::string> args{"run", input};
    if (resume) {
      args.insert(args.end(), {"--resume", out});
      ++stats.resumes;
    } else {
      args.insert(args.end(), {"-o", out});
    }
    const pid_t pid = spawn(dir, args);
    // The last attempts are never killed: every chain ends.
    const bool kill_it = attempt < 6;
    const bool hard = use_kill(rng);
    if (kill_it) {
      double left = 1.0;
      if (resume && points > 0) {
        const std::size_t done = read_run(dir / out).t.size();
        left = std::clamp(1.0 - static_cast<double>(done) / static_cast<double>(points), 0.05, 1.0);
      }
      wait_started(dir, pid);
      std::this_thread::sleep_for(std::chrono::duration<double>(when(rng) * left * wall));
      ::kill(pid, hard ? SIGKILL : SIGTERM);
    }
    const int rc = wait_for(pid);
    const std::string err = costate::test::slurp(dir / "stderr.txt");
    // A SIGTERM after run() returned (the file written, the handler gone,
    // the process tearing down) ends it by the default action, and a
    // SIGKILL there kills it: finished either way, the file complete.
    const bool finished = rc == 0 || ((rc == -SIGTERM || rc == -SIGKILL) &&
                                      read_run(dir / out).status == "complete");
    if (finished) {
      if (kill_it) ++stats.finished_before_kill;
      return read_run(dir / out);
    }
    if (hard) {
      EXPECT_EQ(rc, -SIGKILL) << err;
      ++stats.sigkill;
    } else {
      // Stopped at a step: 143, a message, and a partial file (or, before
      // the first output, none).
      EXPECT_EQ(rc, 143) << err;
      EXPECT_NE(err.find("interrupted by SIGTERM"), std::string::npos) << err;
      ++stats.sigterm;
    }
    if (fs::exists(dir / out)) {
      EXPECT_EQ(read_run(dir / out).status, "partial") << "attempt " << attempt << ": " << err;
    }
    if (::testing::Test::HasFailure()) return {};
  }
  ADD_FAILURE() << "no run finished";
  return {};
}

int trials() {
  const char* env = std::getenv("COSTATE_RESUME_TRIALS");
  return env ? std::atoi(env) : 6;
}

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("costate_resume_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST_F(ResumeTest, FixedStepRunsResumeToTheSameBits) {
  write("long.yaml", kFixedInput);
  const double wall = reference_run(dir_, "long.yaml", "ref.h5");
  const RunFile ref = read_run(dir_ / "ref.h5");
  ASSERT_EQ(ref.status, "complete");
  ASSERT_EQ(ref.t.size(), 2001u);
  std::mt19937 rng(18);
  ChainStats stats;
  const int n = trials();
  for (int k = 0; k < n; ++k) {
    const RunFile got = interrupted_chain(dir_, "long.yaml", "out.h5", wall, ref.t.size(), rng, stats);
    ASSERT_FALSE(HasFailure()) << "chain " << k;
    ASSERT_EQ(got.status, "complete") << "chain " << k;
    ASSERT_EQ(got.t.size(), ref.t.size()) << "chain " << k;
    // Bit for bit: == on doubles.
    for (std::size_t i = 0; i < ref.t.size(); ++i) ASSERT_EQ(got.t[i], ref.t[i]) << "chain " << k;
    for (std::size_t i = 0; i < ref.y.size(); ++i)
      ASSERT_EQ(got.y[i], ref.y[i]) << "chain " << k << ", entry " << i;
  }
  std::printf("[ resume ] %d chains: %d SIGTERM stops, %d SIGKILLs, %d resumes, %d runs finished "
              "before their kill; every final file bitwise equal (uninterrupted run %.2f s)\n",
              n, stats.sigterm, stats.sigkill, stats.resumes, stats.finished_before_kill, wall);
  // The chains must actually have been interrupted and resumed.
  EXPECT_GT(stats.sigterm, 0);
  EXPECT_GT(stats.resumes, 0);
}

TEST_F(ResumeTest, AdaptiveRunsResumeWithinTheirTolerance) {
  // A fresh step-size controller at the resume time: not the same bits, the
  // same accuracy. Measured against the exact solution, the resumed run's
  // error may be at most twice the uninterrupted run's: each part's error
  // is bounded by the same local tolerance, so a restart at most adds the
  // errors of the two parts (kRestartFactor), plus round-off of the
  // comparison (kFloor).
  constexpr double kRestartFactor = 2.0, kFloor = 1e-9;
  write("adaptive.yaml", kAdaptiveInput);
  const double wall = reference_run(dir_, "adaptive.yaml", "ref.h5");
  const RunFile ref = read_run(dir_ / "ref.h5");
  ASSERT_EQ(ref.status, "complete");
  std::mt19937 rng(1818);
  ChainStats stats;
  // Up to 5 chains until one was resumed (a kill may land before the first
  // output or after the end).
  RunFile got;
  for (int chain = 0; chain < 5 && stats.resumes == 0; ++chain)
    got = interrupted_chain(dir_, "adaptive.yaml", "out.h5", wall, ref.t.size(), rng, stats);
  ASSERT_EQ(got.status, "complete");
  ASSERT_EQ(got.t.size(), ref.t.size());
  auto error = [](const RunFile& f) {
    double e = 0.0;
    for (std::size_t i = 0; i < f.t.size(); ++i)
      e = std::max({e, std::abs(f.y[2 * i] - std::cos(f.t[i])),
                    std::abs(f.y[2 * i + 1] + std::sin(f.t[i]))});
    return e;
  };
  double worst = 0.0;
  for (std::size_t i = 0; i < ref.y.size(); ++i)
    worst = std::max(worst, std::abs(got.y[i] - ref.y[i]));
  const double e_ref = error(ref), e_got = error(got);
  EXPECT_LE(e_got, kRestartFactor * e_ref + kFloor) << "uninterrupted error " << e_ref;
  std::printf("[ resume ] adaptive dopri5: error vs exact %.3g uninterrupted, %.3g resumed\n",
              e_ref, e_got);
  std::printf("[ resume ] adaptive dopri5: %d resumes, largest difference %.3g\n", stats.resumes,
              worst);
  EXPECT_GT(stats.resumes, 0);
}

TEST_F(ResumeTest, ResumeRefusesOtherSettingsAndFinishedFiles) {
  // Ten times the steps of kFixedInput (~5 s on an idle core): the SIGINT
  // 300 ms in must land before the run ends (at dt 2e-5 it finished first).
  std::string input = kFixedInput;
  const std::string dt = "dt: 2.0e-5";
  input.replace(input.find(dt), dt.size(), "dt: 2.0e-6");
  write("long.yaml", input.c_str());
  const pid_t pid = spawn(dir_, {"run", "long.yaml", "-o", "out.h5"});
  wait_started(dir_, pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGINT);
  ASSERT_EQ(wait_for(pid), 130) << costate::test::slurp(dir_ / "stderr.txt");
  ASSERT_EQ(read_run(dir_ / "out.h5").status, "partial");
  // Other settings: refused, naming the file and what to do.
  auto r = costate::test::run_command(dir_, COSTATE_EXE,
                                      "run long.yaml -q --resume out.h5 --set integrator.dt=1e-5");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--resume out.h5: was written with other settings"), std::string::npos)
      << r.err;
  // A method that does not resume: refused by name.
  r = costate::test::run_command(
      dir_, COSTATE_EXE, "run long.yaml -q --resume out.h5 --set integrator.method=backward_euler");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("integrator.method = backward_euler does not resume"), std::string::npos)
      << r.err;
  // The same settings finish it; then there is nothing left to resume.
  r = costate::test::run_command(dir_, COSTATE_EXE, "run long.yaml -q --resume out.h5");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_run(dir_ / "out.h5").status, "complete");
  r = costate::test::run_command(dir_, COSTATE_EXE, "run long.yaml -q --resume out.h5");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("status is 'complete', not 'partial'"), std::string::npos) << r.err;
}

TEST_F(ResumeTest, ARunOverConditionsStopsOnASignalAndRefusesResume) {
  // A run over conditions writes every trajectory when all are done: a
  // signal stops it at a step with nothing kept (exit 143, the message says
  // where and that it does not resume), and --resume is refused by name.
  std::string input = kFixedInput;
  const std::string dt = "dt: 2.0e-5";
  input.replace(input.find(dt), dt.size(), "dt: 2.0e-6");
  input += "conditions:\n"
           "  - {id: ten, parameters: {a: 10.0}, data: {file: d.csv, noise: 0.1}}\n"
           "  - {id: eleven, parameters: {a: 11.0}, data: {file: d.csv, noise: 0.1}}\n";
  write("long.yaml", input.c_str());
  write("d.csv", "t,x\n1.0,1.0\n2.0,1.5\n");
  const pid_t pid = spawn(dir_, {"run", "long.yaml", "-o", "out.h5"});
  wait_started(dir_, pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  ASSERT_EQ(wait_for(pid), 143) << costate::test::slurp(dir_ / "stderr.txt");
  const std::string err = costate::test::slurp(dir_ / "stderr.txt");
  EXPECT_NE(err.find("interrupted by SIGTERM at t = "), std::string::npos) << err;
  EXPECT_NE(err.find(" of 2) (costate run); a run over conditions writes its trajectories when all are done "
                     "and does not resume: nothing written"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(dir_ / "out.h5"));
  const auto r = costate::test::run_command(dir_, COSTATE_EXE, "run long.yaml -q --resume out.h5");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--resume out.h5: long.yaml has conditions; a run over conditions does not resume"),
            std::string::npos)
      << r.err;
}

// ---- calibrate --resume ------------------------------------------------------

/// Waits until `text` appears in the process's stderr (or it has ended),
/// then 20 ms (the signal handler is installed right after the iteration
/// table's header).
void wait_for_text(const fs::path& dir, pid_t pid, const std::string& text) {
  for (int i = 0; i < 6000; ++i) {
    if (costate::test::slurp(dir / "stderr.txt").find(text) != std::string::npos) break;
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid != 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::string string_attribute_of(const fs::path& p, const char* name) {
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return "";
  std::string s = string_attribute(f, name);
  H5Fclose(f);
  return s;
}

/// The Van der Pol example (3 fitted quantities) at a finer rk4 step, so
/// that a fit lasts long enough to be interrupted (~1–3 s).
std::vector<std::string> calibration_args(const std::string& method) {
  return {"calibrate", COSTATE_EXAMPLES_DIR "/van_der_pol_calibration.yaml", "--json",
          "--set",     "integrator.dt=1e-4",
          "--set",     "calibration.optimizer.method=" + method};
}

struct CalibrationChain {
  std::string json;  ///< the finishing process's stdout
  int sigterm = 0, sigkill = 0, resumes = 0, finished_before_kill = 0, replayed_lines = 0;
};

/// Like interrupted_chain, for calibrate: start with -o out.h5, kill at a
/// random time after the first iteration line (SIGTERM or SIGKILL), resume
/// from the partial file while one exists, until a fit finishes.
CalibrationChain calibration_chain(const fs::path& dir, const std::string& method, double wall,
                                   std::mt19937& rng) {
  CalibrationChain c;
  fs::remove(dir / "out.h5");
  std::uniform_real_distribution<double> when(0.0, 0.6);
  std::bernoulli_distribution use_kill(0.3);
  for (int attempt = 0; attempt < 20; ++attempt) {
    const bool resume = fs::exists(dir / "out.h5");
    std::vector<std::string> args = calibration_args(method);
    if (resume) {
      args.insert(args.end(), {"--resume", "out.h5"});
      ++c.resumes;
    } else {
      args.insert(args.end(), {"-o", "out.h5"});
    }
    const pid_t pid = spawn(dir, args);
    const bool kill_it = attempt < 6, hard = use_kill(rng);
    if (kill_it) {
      wait_for_text(dir, pid, "     0  ");  // iteration 0 (replayed or not)
      std::this_thread::sleep_for(std::chrono::duration<double>(when(rng) * wall));
      ::kill(pid, hard ? SIGKILL : SIGTERM);
    }
    const int rc = wait_for(pid);
    const std::string err = costate::test::slurp(dir / "stderr.txt");
    for (std::size_t at = err.find("(replayed)"); at != std::string::npos;
         at = err.find("(replayed)", at + 1))
      ++c.replayed_lines;
    const bool complete = string_attribute_of(dir / "out.h5", "status") == "complete";
    if (rc == 0 || (rc == -SIGTERM && complete)) {
      if (kill_it) ++c.finished_before_kill;
      // (A SIGTERM after calibrate_command returned — report printed, the
      // handler gone — ends the process by the default action.)
      c.json = costate::test::slurp(dir / "stdout.txt");
      return c;
    }
    if (hard && rc == -SIGKILL && complete) {
      // Killed after the finished file was written but before the report
      // reached stdout (seen in CI): the file is the finished fit, which
      // --resume rightly refuses, so start the chain again for its report.
      ++c.sigkill;
      fs::remove(dir / "out.h5");
      continue;
    }
    if (hard) {
      EXPECT_EQ(rc, -SIGKILL) << err;
      ++c.sigkill;
    } else {
      EXPECT_EQ(rc, 143) << err;
      EXPECT_NE(err.find("interrupted by SIGTERM after iteration"), std::string::npos) << err;
      EXPECT_NE(err.find("marked partial; continue with: costate calibrate"), std::string::npos)
          << err;
      ++c.sigterm;
    }
    if (fs::exists(dir / "out.h5")) {
      EXPECT_EQ(string_attribute_of(dir / "out.h5", "status"), "partial") << err;
    }
    if (::testing::Test::HasFailure()) return c;
  }
  ADD_FAILURE() << "no fit finished";
  return c;
}

TEST_F(ResumeTest, CalibrationsResumeToTheSameBits) {
  // blmvm (an L-BFGS memory TAO cannot save) and bnls (Gauss–Newton
  // matrices in the journal). The finished report — fitted values, standard
  // errors, correlations, objective and gradient histories, evaluation
  // counts — is printed as JSON with round-trip doubles, so equal text is
  // equal bits.
  std::mt19937 rng(1818);
  int sigterm = 0, sigkill = 0, resumes = 0, replayed = 0, chains = 0, early = 0;
  for (const std::string method : {"blmvm", "bnls"}) {
    std::vector<std::string> args = calibration_args(method);
    args.insert(args.end(), {"-o", "out.h5"});
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(wait_for(spawn(dir_, args)), 0) << costate::test::slurp(dir_ / "stderr.txt");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string ref = costate::test::slurp(dir_ / "stdout.txt");
    ASSERT_NE(ref.find("\"status\":\"ok\""), std::string::npos) << ref;
    const int n = std::max(1, trials() / 2);
    for (int k = 0; k < n; ++k) {
      const CalibrationChain c = calibration_chain(dir_, method, wall, rng);
      ASSERT_FALSE(HasFailure()) << method << " chain " << k;
      EXPECT_EQ(c.json, ref) << method << " chain " << k << " (" << c.resumes << " resumes)";
      EXPECT_EQ(string_attribute_of(dir_ / "out.h5", "status"), "complete");
      sigterm += c.sigterm;
      sigkill += c.sigkill;
      resumes += c.resumes;
      replayed += c.replayed_lines;
      early += c.finished_before_kill;
      ++chains;
    }
  }
  std::printf("[ resume ] %d calibration chains (blmvm, bnls): %d SIGTERM stops, %d SIGKILLs, %d "
              "resumes (%d iterations replayed), %d fits finished before their kill; every final report "
              "bitwise equal\n",
              chains, sigterm, sigkill, resumes, replayed, early);
  EXPECT_GT(sigterm + sigkill, 0);
  EXPECT_GT(resumes, 0);
  EXPECT_GT(replayed, 0);  // the resumes did replay the journal
}

TEST_F(ResumeTest, CalibrationResumeRefusesOtherSettingsAndOtherFiles) {
  std::vector<std::string> args = calibration_args("blmvm");
  args.insert(args.end(), {"-o", "out.h5"});
  const pid_t pid = spawn(dir_, args);
  wait_for_text(dir_, pid, "     1  ");
  ::kill(pid, SIGINT);
  ASSERT_EQ(wait_for(pid), 130) << costate::test::slurp(dir_ / "stderr.txt");
  ASSERT_EQ(string_attribute_of(dir_ / "out.h5", "status"), "partial");
  const std::string input = COSTATE_EXAMPLES_DIR "/van_der_pol_calibration.yaml";
  const std::string same = " --set integrator.dt=1e-4 --set calibration.optimizer.method=blmvm";
  // Other settings (the optimizer): refused, naming the file.
  auto r = costate::test::run_command(dir_, COSTATE_EXE,
                                      "calibrate " + input + " -q --resume out.h5 --set integrator.dt=1e-4");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--resume out.h5: was written with other settings"), std::string::npos) << r.err;
  // `run --resume` on a calibration's file, and the reverse.
  r = costate::test::run_command(dir_, COSTATE_EXE, "run " + input + " -q --resume out.h5" + same);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("written by `costate calibrate`"), std::string::npos) << r.err;
  // The same settings finish it; then there is nothing left to resume.
  r = costate::test::run_command(dir_, COSTATE_EXE, "calibrate " + input + " -q --resume out.h5" + same);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(string_attribute_of(dir_ / "out.h5", "status"), "complete");
  r = costate::test::run_command(dir_, COSTATE_EXE, "calibrate " + input + " -q --resume out.h5" + same);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("status is 'complete', not 'partial'"), std::string::npos) << r.err;
}

/// A discrete adjoint long enough to interrupt (~0.5–2 s): kFixedInput at
/// a coarser step (2·10⁵ rk4 steps), binomial checkpointing (the reverse
/// sweep replays), an observation-free objective with a running cost.
std::string sensitivity_input(const std::string& schedule) {
  std::string input = kFixedInput;
  input.replace(input.find("dt: 2.0e-5"), 10, "dt: 1.0e-4");
  input += "objective: {terminal: \"x*x + 0.1*z\", integral: \"0.001*y*y\"}\n";
  input += "sensitivity: {method: discrete_adjoint, checkpointing: " + schedule + "}\n";
  return input;
}

/// The same model under three conditions (another parameter, a number, an
/// initial value as a number and as an expression), each with its data
/// (written by the caller as d1.csv, d2.csv): the sensitivity sums over the
/// conditions in order, ~3 × 80 000 rk4 steps with binomial checkpointing.
std::string conditions_sensitivity_input() {
  std::string input = kFixedInput;
  input.replace(input.find("dt: 2.0e-5"), 10, "dt: 1.0e-4");
  input.replace(input.find("end: 20.0"), 9, "end: 8.0");
  input.replace(input.find("c: 2.6666666666666665}"), 22, "c: 2.6666666666666665, b2: 24.0}");
  input += "objective: {terminal: \"x*x + 0.1*z\", integral: \"0.001*y*y\"}\n"
           "sensitivity: {method: discrete_adjoint, checkpointing: {schedule: binomial, snapshots: 6}}\n"
           "conditions:\n"
           "  - {id: base, data: {file: d1.csv, noise: 0.5}}\n"
           "  - {id: low, parameters: {b: b2}, initial_state: {x: 2.0}, data: {file: d2.csv, noise: 0.5}}\n"
           "  - {id: fixed, parameters: {a: 9.5}, initial_state: {w: \"0.1*c\"}, data: {file: d1.csv, noise: 2.0}}\n";
  return input;
}

/// The objective and gradients of a `sensitivity --json` report (the text
/// between "objective" and "method": round-trip doubles, so equal text is
/// equal bits).
std::string gradient_text(const std::string& json) {
  const std::size_t a = json.find("\"objective\""), b = json.find(",\"method\"");
  return a == std::string::npos || b == std::string::npos ? "" : json.substr(a, b - a);
}

// `sensitivity --resume`: SIGTERM in the reverse sweep writes its place
// (partial), SIGTERM before it keeps nothing, SIGKILL leaves the last
// partial file; resumed again and again until one finishes, the objective
// and gradient are the uninterrupted run's bits. With conditions: a SIGTERM
// after the first condition also keeps the conditions done; the objectives
// J_c and the summed gradient are the uninterrupted run's bits.
TEST_F(ResumeTest, SensitivitiesResumeToTheSameBits) {
  std::mt19937 rng(2718);
  int sigterm = 0, kept = 0, sigkill = 0, resumes = 0, chains = 0;
  write("d1.csv", "time,x,z\n2.0,1.5,20.0\n6.0,-3.0,25.0\n");
  write("d2.csv", "time,x,z\n4.0,2.5,18.0\n8.0,-1.0,22.0\n");
  for (const std::string schedule : {"{schedule: binomial, snapshots: 6}",
                                     "{schedule: multilevel, ram: 3, disk: 2, path: ckpt.h5}", "conditions"}) {
    write("sens.yaml", schedule == "conditions" ? conditions_sensitivity_input() : sensitivity_input(schedule));
    const std::vector<std::string> base{"sensitivity", "sens.yaml", "--json"};
    std::vector<std::string> args = base;
    args.insert(args.end(), {"-o", "ref.h5"});
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(wait_for(spawn(dir_, args)), 0) << costate::test::slurp(dir_ / "stderr.txt");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string ref = gradient_text(costate::test::slurp(dir_ / "stdout.txt"));
    ASSERT_FALSE(ref.empty()) << costate::test::slurp(dir_ / "stdout.txt");
    std::uniform_real_distribution<double> when(0.1, 0.95);
    std::bernoulli_distribution use_kill(0.25);
    for (int chain = 0; chain < std::max(1, trials() / 2); ++chain, ++chains) {
      fs::remove(dir_ / "s.h5");
      std::string finished;
      for (int attempt = 0; attempt < 20 && finished.empty(); ++attempt) {
        const bool resume = fs::exists(dir_ / "s.h5");
        std::vector<std::string> a = base;
        if (resume) {
          a.insert(a.end(), {"--resume", "s.h5"});
          ++resumes;
        } else {
          a.insert(a.end(), {"-o", "s.h5"});
        }
        const pid_t pid = spawn(dir_, a);
        const bool kill_it = attempt < 6, hard = use_kill(rng);
        if (kill_it) {
          wait_started(dir_, pid);
          std::this_thread::sleep_for(std::chrono::duration<double>(when(rng) * wall));
          ::kill(pid, hard ? SIGKILL : SIGTERM);
        }
        const int rc = wait_for(pid);
        const std::string err = costate::test::slurp(dir_ / "stderr.txt");
        const std::string status = string_attribute_of(dir_ / "s.h5", "status");
        if (rc == 0) {
          finished = costate::test::slurp(dir_ / "stdout.txt");
          EXPECT_EQ(status, "complete");
          if (resume) {  // resumed in a sweep, or (conditions) after the conditions done
            EXPECT_TRUE(finished.find("\"resumed_from_step\":null") == std::string::npos ||
                        finished.find("\"resumed_from_condition\":null") == std::string::npos)
                << finished;
          }
          break;
        }
        if ((rc == -SIGKILL || rc == -SIGTERM) && status == "complete") {
          // Killed after the finished file was written (before the report):
          // finished work; start the chain again for its report.
          fs::remove(dir_ / "s.h5");
          continue;
        }
        if (hard) {
          EXPECT_EQ(rc, -SIGKILL) << err;
          ++sigkill;
        } else {
          ASSERT_EQ(rc, 143) << err;
          EXPECT_NE(err.find("interrupted by SIGTERM"), std::string::npos) << err;
          ++sigterm;
          if (err.find("marked partial; continue with: costate sensitivity") != std::string::npos) {
            ++kept;
            EXPECT_EQ(status, "partial") << err;
          } else if (resume) {
            EXPECT_NE(err.find("is unchanged"), std::string::npos) << err;
          } else {
            EXPECT_NE(err.find("nothing to keep"), std::string::npos) << err;
            EXPECT_FALSE(fs::exists(dir_ / "s.h5")) << err;
          }
        }
        if (fs::exists(dir_ / "s.h5")) {
          EXPECT_EQ(status, "partial") << err;
        }
        ASSERT_FALSE(HasFailure()) << "attempt " << attempt << ": " << err;
      }
      ASSERT_FALSE(finished.empty()) << "no gradient finished";
      EXPECT_EQ(gradient_text(finished), ref) << schedule << " chain " << chain;
    }
  }
  std::printf("[ resume ] %d sensitivity chains: %d SIGTERM stops (%d kept the sweep's place), "
              "%d SIGKILLs, %d resumes; every gradient bitwise equal\n",
              chains, sigterm, kept, sigkill, resumes);
  EXPECT_GT(kept, 0) << "no stop landed in a reverse sweep";
  EXPECT_GT(resumes, 0);
}

TEST_F(ResumeTest, SensitivityResumeRefusesWhatItCannotContinue) {
  write("sens.yaml", sensitivity_input("{schedule: binomial, snapshots: 6}"));
  // Interrupt one in its reverse sweep (the later part of the run: stops
  // at 50–95 % of an uninterrupted run's wall time) to get a partial file.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_for(spawn(dir_, {"sensitivity", "sens.yaml", "-q"})), 0)
      << costate::test::slurp(dir_ / "stderr.txt");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bool got = false;
  for (int attempt = 0; attempt < 10 && !got; ++attempt) {
    const pid_t pid = spawn(dir_, {"sensitivity", "sens.yaml", "-o", "s.h5"});
    wait_started(dir_, pid);
    std::this_thread::sleep_for(std::chrono::duration<double>((0.5 + 0.05 * attempt) * wall));
    ::kill(pid, SIGTERM);
    wait_for(pid);
    got = string_attribute_of(dir_ / "s.h5", "status") == "partial";
  }
  ASSERT_TRUE(got) << "no SIGTERM landed in the reverse sweep";
  auto refused = [&](std::vector<std::string> args, const std::string& want) {
    const int rc = wait_for(spawn(dir_, args));
    const std::string err = costate::test::slurp(dir_ / "stderr.txt");
    EXPECT_NE(rc, 0) << err;
    EXPECT_NE(err.find(want), std::string::npos) << err;
    EXPECT_EQ(string_attribute_of(dir_ / "s.h5", "status"), "partial") << "the partial file changed";
  };
  refused({"sensitivity", "sens.yaml", "--resume", "s.h5", "--set", "integrator.dt=2e-4"},
          "other settings");
  refused({"sensitivity", "sens.yaml", "--resume", "s.h5", "--set", "sensitivity.method=forward"},
          "discrete adjoint of a native stepper only");
  refused({"sensitivity", "sens.yaml", "--resume", "s.h5", "--hessian"}, "--hessian");
  refused({"sensitivity", "sens.yaml", "--resume", "missing.h5"}, "no such file");
  // Delayed events resume (the partial file keeps their links and pending
  // adjoints: conditions_resume_test); another model's file is refused.
  write("delayed.yaml", sensitivity_input("{schedule: binomial, snapshots: 6}") +
                            "events:\n  - {name: kick, trigger: \"x > 5\", assign: {w: \"w + 0.1\"}, "
                            "delay: \"0.5\"}\n");
  refused({"sensitivity", "delayed.yaml", "--resume", "s.h5"}, "other settings");
  // A run's partial file is not a sensitivity's.
  ASSERT_EQ(wait_for(spawn(dir_, {"run", "sens.yaml", "-q", "-o", "run.h5"})), 0);
  refused({"sensitivity", "sens.yaml", "--resume", "run.h5"}, "written by `costate run`");
}

}  // namespace
