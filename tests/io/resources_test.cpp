// Resource checks before work (io/resources.hpp) and the arguments PETSc's
// options database gets (petsc/petsc_runtime.hpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/io/resources.hpp"
#include "petsc/petsc_runtime.hpp"

namespace {

using costate::io::PdeConfig;

PdeConfig grid(std::vector<std::int64_t> n, int fields = 1) {
  PdeConfig cfg;
  cfg.input_path = "in.yaml";
  cfg.equations.dim = static_cast<int>(n.size());
  const char* const names[] = {"u", "v", "w"};
  for (int f = 0; f < fields; ++f) cfg.equations.fields.emplace_back(names[f]);
  cfg.domain.cells = {1, 1, 1};
  for (std::size_t d = 0; d < n.size(); ++d) cfg.domain.cells[d] = n[d];
  cfg.integrator.steps = 99;
  return cfg;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const costate::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Resources, PetscIndexRangeIsTheConfiguredPetscInt) {
  // Debian's PETSc: 32-bit PetscInt.
  EXPECT_EQ(costate::io::petsc_max_index(), 2147483647);
}

TEST(Resources, GridBeyondIndexRangeIsRefusedWithTheCount) {
  EXPECT_NO_THROW(costate::io::check_pde_index_range(grid({46340, 46340}), "in.yaml:3:4"));
  // 46341² = 2147488281 > 2³¹ − 1 by 4634.
  const std::string m = message_of([] { costate::io::check_pde_index_range(grid({46341, 46341}), "in.yaml:3:4"); });
  EXPECT_NE(m.find("in.yaml:3:4: pde.grid.n = [46341, 46341]"), std::string::npos) << m;
  EXPECT_NE(m.find("2147488281 unknowns"), std::string::npos) << m;
  // Fields multiply: 30000² cells × 3 fields.
  const std::string f = message_of([] { costate::io::check_pde_index_range(grid({30000, 30000}, 3), "w"); });
  EXPECT_NE(f.find("900000000 cells × 3 fields = 2700000000 unknowns"), std::string::npos) << f;
}

TEST(Resources, EstimateCountsVectorsJacobianAndSnapshots) {
  PdeConfig cfg = grid({100, 100});  // 10⁴ unknowns, 5-point stencil
  const auto run = costate::io::estimate_pde_resources(cfg, false);
  EXPECT_EQ(run.unknowns, 10000);
  EXPECT_EQ(run.jacobian_nonzeros, 50000);
  EXPECT_DOUBLE_EQ(run.vector_bytes, 38.0 * 8 * 1e4);  // GMRES: 8 + 30 vectors
  EXPECT_DOUBLE_EQ(run.jacobian_bytes, 12.0 * 5e4);
  EXPECT_DOUBLE_EQ(run.snapshot_bytes, 0.0);
  EXPECT_DOUBLE_EQ(costate::io::estimate_pde_resources(cfg, true).snapshot_bytes, 100.0 * 8 * 1e4);
  cfg.checkpointing = costate::ode::Binomial{.snapshots = 7};
  EXPECT_DOUBLE_EQ(costate::io::estimate_pde_resources(cfg, true).snapshot_bytes, 7.0 * 8 * 1e4);
  cfg.integrator.ksp.ksp_type = "cg";
  EXPECT_DOUBLE_EQ(costate::io::estimate_pde_resources(cfg, false).vector_bytes, 8.0 * 8 * 1e4);
}

TEST(Resources, MemoryBeyondTheMachineIsRefusedWithTheEstimate) {
  const PdeConfig cfg = grid({1000, 1000});  // 10⁶ unknowns
  // run: 304 MB vectors + 60 MB Jacobian = 364 MB; sensitivity adds 100
  // snapshots of 8 MB.
  const std::int64_t gb = 1000000000;
  EXPECT_NO_THROW(costate::io::check_pde_resources(cfg, false, 1, gb));
  const std::string m = message_of([&] { costate::io::check_pde_resources(cfg, true, 1, gb); });
  EXPECT_NE(m.find("in.yaml: pde.grid.n = [1000, 1000] (1000000 unknowns) needs an estimated "
                   "state vectors 304 MB + Jacobian 60 MB + checkpoint snapshots 800 MB = 1.16 GB"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("more than this machine's 1 GB"), std::string::npos) << m;
  EXPECT_NE(m.find("fewer checkpoint snapshots"), std::string::npos) << m;
  // Spread over 2 processes, each needs 582 MB: fits.
  EXPECT_NO_THROW(costate::io::check_pde_resources(cfg, true, 2, gb));
  // The machine's own memory is known and positive.
  EXPECT_GT(costate::io::physical_memory_bytes(), 0);
}

TEST(Resources, JacobianBeyondIndexRangePerProcessIsRefused) {
  // 3·10⁸ unknowns × 5 × 2 fields = 3·10⁹ nonzeros: too many for one
  // process, fine for two.
  const PdeConfig cfg = grid({15000, 10000}, 2);
  const std::int64_t huge = std::int64_t{1} << 50;
  const std::string m = message_of([&] { costate::io::check_pde_resources(cfg, false, 1, huge); });
  EXPECT_NE(m.find("3000000000 nonzeros"), std::string::npos) << m;
  EXPECT_NE(m.find("more processes"), std::string::npos) << m;
  EXPECT_NO_THROW(costate::io::check_pde_resources(cfg, false, 2, huge));
}

TEST(Resources, FormatBytesUsesDecimalUnits) {
  EXPECT_EQ(costate::io::format_bytes(512), "512 B");
  EXPECT_EQ(costate::io::format_bytes(1.5e9), "1.5 GB");
  EXPECT_EQ(costate::io::format_bytes(2.5e13), "25 TB");
}

TEST(PetscArguments, OnlyPetscOptionsAndTheirValuesReachPetsc) {
  const char* argv[] = {"costate", "calibrate", "in.yaml", "-o", "out.h5", "--set", "a.b=1",
                        "-tao_type", "blmvm", "-q", "-tao_monitor", "--json", "-ksp_rtol",
                        "1e-8", "-tao_gatol", "-1e-3", "-options_left", "-info"};
  const auto args = costate::detail::petsc_arguments(static_cast<int>(std::size(argv)), argv);
  const std::vector<std::string> expect{"costate", "-tao_type", "blmvm", "-tao_monitor",
                                        "-ksp_rtol", "1e-8", "-tao_gatol", "-1e-3",
                                        "-options_left", "-info"};
  EXPECT_EQ(args, expect);
  // Nothing of the host's own.
  const char* own[] = {"costate", "run", "f.yaml", "-o", "x.h5", "--json"};
  EXPECT_EQ(costate::detail::petsc_arguments(6, own), std::vector<std::string>{"costate"});
  EXPECT_TRUE(costate::detail::petsc_arguments(0, nullptr).empty());
}

}  // namespace
