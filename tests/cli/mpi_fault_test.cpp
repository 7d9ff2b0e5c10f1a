// MPI faults on one rank only (issue 18): bad data, a non-finite value or an
// unwritable output file on a single rank must end every rank, non-zero,
// with a message naming the problem, within a bounded time — never a hang.
// Each job runs as an MPMD launch (`mpiexec -n 1 costate A : -n 1 costate B`,
// so the two ranks read different inputs) under `timeout -s KILL`, and must
// finish well inside it; ctest's TIMEOUT is the outer guard.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_costate.hpp"

namespace fs = std::filesystem;

namespace {

/// A job that takes longer than this has hung: the healthy 2-rank runs below
/// take 1–3 s on a loaded 2-core machine; a fault must end the job about as
/// fast (MPI_Abort), so 60 s is a hang, not slowness.
constexpr int kHangSeconds = 60;

const char* kOde = R"yaml(model:
  states: [x, y]
  equations: {x: "a*x - x*y", y: "-y + x*y"}
parameters: {a: 1.5}
initial_state: {x: 1.0, y: 1.0}
time: {start: 0.0, end: 5.0, output_every: 0.5}
integrator: {method: rk4, dt: 0.001}
objective:
  terminal: "x*x"
  data: {file: obs.csv, noise: {x: 0.1}}
)yaml";

const char* kPde = R"yaml(pde:
  grid: {n: [16, 16]}
  fields: [u]
  initial: {u: "exp(-20*((x - 0.5)^2 + (y - 0.5)^2))"}
  equations: {u: "0.1*lap(u)"}
integrator: {method: crank_nicolson, dt: 0.01, steps: 20}
objective:
  misfit: {u: "0"}
sensitivity:
  method: discrete_adjoint
)yaml";

class MpiFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("costate_mpi_fault_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write("good.yaml", kOde);
    write("obs.csv", "t,x\n1,1.2\n2,0.8\n");
    write("pde.yaml", kPde);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  /// Rank 0 runs `a`, rank 1 runs `b` (costate arguments), under timeout.
  costate::test::CommandResult mpmd(const std::string& a, const std::string& b) {
    const std::string exe = std::string("'") + COSTATE_EXE + "' ";
    return costate::test::run_command(
        dir_, COSTATE_MPIEXEC,
        std::string(COSTATE_MPIEXEC_FLAGS) + " -n 1 " + exe + a + " : -n 1 " + exe + b,
        "timeout -s KILL " + std::to_string(kHangSeconds));
  }

  /// The job failed (not killed by the timeout), fast, naming `what` — on
  /// stderr from whichever rank failed: rank 0 reports its own errors, and a
  /// rank that fails alone reports its own after giving rank 0 500 ms
  /// (main's report_error). Open MPI's "MPI_ABORT was invoked on rank 1"
  /// notice is not relied on (its show_help fails under load).
  void expect_fault(const costate::test::CommandResult& r, const std::string& what,
                    int failing_rank = 0) {
    EXPECT_NE(r.code, 0) << r.err;
    EXPECT_NE(r.code, -1) << "killed: the job hung for " << kHangSeconds << " s\n" << r.err;
    EXPECT_LT(r.seconds, kHangSeconds) << r.err;
    const bool named = r.err.find(what) != std::string::npos;
    EXPECT_TRUE(named) << "rank " << failing_rank << "'s error does not name " << what << ":\n"
                       << r.err;
    if (failing_rank != 0) {
      EXPECT_NE(r.err.find("costate: error"), std::string::npos) << r.err;
    }
    std::printf("[ fault ] %.2f s, exit %d, rank %d, %s: %s\n", r.seconds, r.code, failing_rank,
                named ? "message names it" : "no message from the failing rank", what.c_str());
  }

  fs::path dir_;
};

TEST_F(MpiFaultTest, HealthyRunsOfBothRanksSucceed) {
  // The control: the same launches without a fault exit 0.
  auto r = mpmd("sensitivity good.yaml -q -o a.h5", "sensitivity good.yaml -q -o b.h5");
  EXPECT_EQ(r.code, 0) << r.err;
  r = mpmd("run pde.yaml -q -o p.h5", "run pde.yaml -q -o p.h5");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(MpiFaultTest, BadDataOnOneRank) {
  // Rank 1's data file has a malformed row; rank 0's is fine.
  write("bad_obs.csv", "t,x\n1,1.2\n2,zebra\n");
  std::string bad = kOde;
  bad.replace(bad.find("obs.csv"), 7, "bad_obs.csv");
  write("bad.yaml", bad);
  expect_fault(mpmd("sensitivity good.yaml -q -o a.h5", "sensitivity bad.yaml -q -o b.h5"),
               "bad_obs.csv", 1);
  // The same on rank 0 only.
  expect_fault(mpmd("sensitivity bad.yaml -q -o a.h5", "sensitivity good.yaml -q -o b.h5"),
               "bad_obs.csv");
}

TEST_F(MpiFaultTest, BadPdeInputOnOneRankWhileTheOtherWaitsInPetsc) {
  // Rank 1 cannot read its input; rank 0 goes on into PETSc's collective
  // grid set-up and would wait there for ever without the abort.
  expect_fault(mpmd("run pde.yaml -q -o p.h5", "run pde.yaml -q -o p.h5 --set pde.grid.n=[16,x]"),
               "pde.grid.n", 1);
}

TEST_F(MpiFaultTest, NonFiniteValueOnOneRank) {
  // ODE: rank 1's parameter makes its solution blow up (x' = a x - x y with
  // a huge a overflows in a few steps); rank 0's is fine.
  expect_fault(mpmd("run good.yaml -q -o a.h5", "run good.yaml -q -o b.h5 --set parameters.a=1e300"),
               "non-finite", 1);
  // PDE: a NaN in the part of the initial field that rank 1 owns (x > 0.5
  // with the grid split along x) — the other rank's part is finite.
  std::string nan_pde = kPde;
  const std::string initial = "\"exp(-20*((x - 0.5)^2 + (y - 0.5)^2))\"";
  nan_pde.replace(nan_pde.find(initial), initial.size(), "\"sqrt(0.75 - x)\"");
  write("nan.yaml", nan_pde);
  // Refused when the field is evaluated, on every rank, with the expression
  // and the first cell where it is not finite (not as a solver divergence).
  expect_fault(mpmd("run nan.yaml -q -o p.h5", "run nan.yaml -q -o p.h5"),
               "'sqrt(0.75 - x)' is nan at the cell centred at x = 0.7", 1);
}

TEST_F(MpiFaultTest, DifferentGridsOnTwoRanksAreACostateErrorNotAPetscHang) {
  // Issue 35: rank 1 resolves another grid. PETSc's DMDA set-up does not
  // compare the ranks' sizes: the job waited in it until killed (or printed
  // PETSc's raw error stack). Now every rank refuses it, naming the key and
  // both values, before any PETSc call.
  for (const char* command : {"run", "sensitivity", "calibrate"}) {
    const std::string a = std::string(command) + " pde.yaml -q";
    const auto r = mpmd(a, a + " --set pde.grid.n=[16,20]");
    expect_fault(r, "the MPI ranks resolved different settings: rank 1 has 'pde.grid.n: [16, 20]' "
                    "where rank 0 has 'pde.grid.n: [16, 16]'");
    EXPECT_EQ(r.err.find("PETSC ERROR"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << r.err;
  }
  // An error inside PETSc on both ranks: one costate message, no PETSc
  // error stack from either rank.
  std::string lv = kOde;
  lv = lv.substr(0, lv.find("objective:")) +
       "calibration:\n  parameters: {a: {lower: 0.1, upper: 5}}\n  data: {file: obs.csv, noise: {x: 0.1}}\n";
  write("lv.yaml", lv);
  const auto p = mpmd("calibrate lv.yaml -q -tao_type nonsense", "calibrate lv.yaml -q -tao_type nonsense");
  expect_fault(p, "PETSc's TaoSetFromOptions failed: Unable to find requested Tao type nonsense");
  EXPECT_EQ(p.err.find("PETSC ERROR"), std::string::npos) << p.err;
  // Any other resolved setting, too (here the time step).
  expect_fault(mpmd("run pde.yaml -q", "run pde.yaml -q --set integrator.dt=0.02"),
               "rank 1 has 'integrator.dt: 0.02' where rank 0 has 'integrator.dt: 0.01'");
}

TEST_F(MpiFaultTest, DeeplyNestedExpressionOnOneRank) {
  // 30 000 parentheses in rank 1's equation overflowed that rank's stack
  // (SIGSEGV, the job killed by Open MPI); now its parser refuses the
  // nesting by name and the job ends with that message.
  std::string deep = kOde;
  const std::string eq = "\"a*x - x*y\"";
  deep.replace(deep.find(eq), eq.size(), "\"" + std::string(30000, '(') + "a*x - x*y" + std::string(30000, ')') + "\"");
  write("deep.yaml", deep);
  const auto r = mpmd("sensitivity good.yaml -q -o a.h5", "sensitivity deep.yaml -q -o b.h5");
  expect_fault(r, "nesting deeper than 1000 levels", 1);
  EXPECT_EQ(r.err.find("Segmentation fault"), std::string::npos) << r.err.substr(0, 2000);
}

TEST_F(MpiFaultTest, UnwritableOutputOnOneRank) {
  // ODE runs write on rank 0: an unwritable path there, a fine one on rank 1.
  expect_fault(mpmd("run good.yaml -q -o no/such/dir/a.h5", "run good.yaml -q -o b.h5"),
               "no/such/dir/a.h5");
  // A PDE output is one parallel file: unwritable for the job.
  expect_fault(mpmd("run pde.yaml -q -o no/such/dir/p.h5", "run pde.yaml -q -o no/such/dir/p.h5"),
               "no/such/dir/p.h5");
}

}  // namespace
