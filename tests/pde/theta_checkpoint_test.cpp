// pde::ThetaIntegrator with Multilevel (RAM + disk) checkpoints under MPI:
// each rank's disk level (its own HDF5 file, path + ".rank<r>") is used,
// the gradient has the same bits as StoreAll (Heat2D with a κ field, and
// the nonlinear Burgers2D), the files are removed afterwards, and a disk
// failure on ONE rank stops every rank with an error instead of a hang.
// The same with the disk level in ONE parallel HDF5 file
// (ThetaOptions::shared_disk_checkpoints). ThetaOptions::on_step sees every
// forward, recomputed and reverse step. Runs on 1, 2 and 4 ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

double wave(std::int64_t g, double salt) { return std::sin(0.77 * static_cast<double>(g) + salt); }

std::vector<double> natural(std::int64_t n, double salt, double offset, double amplitude) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t g = 0; g < v.size(); ++g) v[g] = offset + amplitude * wave(static_cast<std::int64_t>(g), salt);
  return v;
}

/// A path prefix shared by all ranks (rank 0's pid) in the temp directory.
std::string shared_prefix(const std::string& name) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("costate_ckpt_" + std::to_string(pid) + "_" + name)).string();
}

pde::ThetaOptions options(double dt, std::int64_t steps) {
  pde::ThetaOptions o;
  o.dt = dt;
  o.steps = steps;
  o.ksp.rtol = 1e-14;
  o.ksp.use_options_database = false;
  o.newton_rtol = 1e-13;
  return o;
}

template <class Model>
void expect_same_bits(pde::Operator<Model>& op, const pde::GlobalVector& u0, pde::ThetaOptions o,
                      const pde::Objective& obj, const std::string& path) {
  const pde::Grid& g = op.grid();
  pde::ThetaIntegrator<Model> reference(op, o);
  const auto all = reference.gradient(u0, obj, ode::StoreAll{});
  for (int variant = 0; variant < 4; ++variant) {
    const bool shared = variant >= 2;
    const std::int64_t disk = variant % 2 == 0 ? 1 : 3;
    o.shared_disk_checkpoints = shared;
    pde::ThetaIntegrator<Model> integ(op, o);
    const auto ml = integ.gradient(u0, obj, ode::Multilevel{.ram = 2, .disk = disk, .path = path});
    EXPECT_GT(ml.checkpoints.disk_snapshots, 0) << "the disk level was not used";
    EXPECT_GT(ml.checkpoints.recomputed_steps, 0);
    EXPECT_LE(ml.checkpoints.peak_snapshots, 2 + disk);
    EXPECT_EQ(ml.objective, all.objective);
    EXPECT_EQ(g.gather(ml.wrt_initial_state), g.gather(all.wrt_initial_state)) << disk << " disk slots, shared file " << shared;
    EXPECT_EQ(ml.wrt_parameters, all.wrt_parameters);
    if constexpr (Model::field_parameters > 0) {
      EXPECT_EQ(op.field_grid()->gather(ml.wrt_fields), op.field_grid()->gather(all.wrt_fields));
    }
    // The files (each rank's, or the shared one) are gone once the
    // gradient returned.
    EXPECT_FALSE(std::filesystem::exists(path + ".rank" + std::to_string(g.rank())));
    MPI_Barrier(g.comm());
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

}  // namespace

TEST(PdeThetaCheckpoints, MultilevelDiskPerRankGivesStoreAllBitsHeat) {
  pde::Domain d;
  d.cells = {12, 10, 1};
  d.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
  d.dirichlet_value = 0.1;
  pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, d, {}, {1.5});
  const pde::Grid& g = op.grid();
  op.field_grid()->scatter(natural(op.field_grid()->global_size(), 0.4, 1.0, 0.5), op.fields());
  auto u0 = g.create_global(), data = g.create_global();
  g.scatter(natural(g.global_size(), 1.0, 0.3, 0.2), u0);
  g.scatter(natural(g.global_size(), 2.0, 0.25, 0.1), data);
  expect_same_bits(op, u0, options(2e-3, 17), pde::Objective::misfit(data), shared_prefix("heat.h5"));
}

TEST(PdeThetaCheckpoints, MultilevelDiskPerRankGivesStoreAllBitsBurgers) {
  pde::Domain d;
  d.cells = {10, 8, 1};
  pde::Operator<pde::Burgers2D> op(MPI_COMM_WORLD, d, {}, {0.05, 0.3});
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  g.scatter(natural(g.global_size(), 1.0, 0.3, 0.5), u0);
  expect_same_bits(op, u0, options(0.02, 13), pde::Objective::probe({4, 5, 0}), shared_prefix("burgers.h5"));
}

TEST(PdeThetaCheckpoints, DiskFailureOnOneRankThrowsOnEveryRank) {
  pde::Domain d;
  d.cells = {10, 8, 1};
  pde::Operator<pde::Burgers2D> op(MPI_COMM_WORLD, d, {}, {0.05, 0.3});
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  g.scatter(natural(g.global_size(), 1.0, 0.3, 0.5), u0);
  const std::string path = shared_prefix("blocked.h5");
  // The last rank's checkpoint file cannot be created: a directory is in
  // its place. The other ranks' files are fine.
  const bool last = g.rank() == g.size() - 1;
  const std::string mine = path + ".rank" + std::to_string(g.rank());
  if (last) std::filesystem::create_directories(mine);
  MPI_Barrier(g.comm());
  pde::ThetaIntegrator<pde::Burgers2D> integ(op, options(0.02, 9));
  try {
    integ.gradient(u0, pde::Objective::integral(), ode::Multilevel{.ram = 2, .disk = 2, .path = path});
    ADD_FAILURE() << "a disk checkpoint failure was not reported";
  } catch (const Error& e) {
    const std::string what = e.what();
    if (last)
      EXPECT_NE(what.find(mine), std::string::npos) << what;
    else
      EXPECT_NE(what.find("another rank"), std::string::npos) << what;
  }
  if (last) std::filesystem::remove_all(mine);
  EXPECT_FALSE(std::filesystem::exists(mine));
}

TEST(PdeThetaCheckpoints, SharedDiskFileUnwritableThrowsOnEveryRank) {
  pde::Domain d;
  d.cells = {10, 8, 1};
  pde::Operator<pde::Burgers2D> op(MPI_COMM_WORLD, d, {}, {0.05, 0.3});
  auto u0 = op.grid().create_global();
  op.grid().scatter(natural(op.grid().global_size(), 1.0, 0.3, 0.5), u0);
  auto o = options(0.02, 9);
  o.shared_disk_checkpoints = true;
  pde::ThetaIntegrator<pde::Burgers2D> integ(op, o);
  try {
    integ.gradient(u0, pde::Objective::integral(),
                   ode::Multilevel{.ram = 2, .disk = 2, .path = "/nonexistent-costate-dir/ckpt.h5"});
    ADD_FAILURE() << "an unwritable shared checkpoint file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-costate-dir/ckpt.h5"), std::string::npos) << e.what();
  }
}

TEST(PdeThetaCheckpoints, OnStepSeesEveryStepAndMayStopTheSweep) {
  // ThetaOptions::on_step (io::pde_run's interrupt check) is called at every
  // step() — forward and recomputed — and every reverse step: binomial
  // checkpointing with 3 snapshots over 13 steps recomputes, so the count
  // is forward_steps + 13. The gradient is the same bits with the hook, and
  // an exception from it leaves the sweep on every rank.
  pde::Domain d;
  d.cells = {10, 8, 1};
  pde::Operator<pde::Burgers2D> op(MPI_COMM_WORLD, d, {}, {0.05, 0.3});
  const pde::Grid& g = op.grid();
  auto u0 = g.create_global();
  g.scatter(natural(g.global_size(), 1.0, 0.3, 0.5), u0);
  const auto obj = pde::Objective::probe({4, 5, 0});
  const ode::Checkpointing schedule = ode::Binomial{.snapshots = 3};
  pde::ThetaIntegrator<pde::Burgers2D> plain(op, options(0.02, 13));
  const auto reference = plain.gradient(u0, obj, schedule);
  auto o = options(0.02, 13);
  std::int64_t calls = 0;
  o.on_step = [&](std::int64_t n) {
    EXPECT_GE(n, 0);
    EXPECT_LT(n, 13);
    ++calls;
  };
  pde::ThetaIntegrator<pde::Burgers2D> hooked(op, o);
  const auto r = hooked.gradient(u0, obj, schedule);
  EXPECT_GT(r.checkpoints.recomputed_steps, 0);
  EXPECT_EQ(calls, r.forward_steps + 13);
  EXPECT_EQ(r.objective, reference.objective);
  EXPECT_EQ(g.gather(r.wrt_initial_state), g.gather(reference.wrt_initial_state));
  EXPECT_EQ(r.wrt_parameters, reference.wrt_parameters);
  // Stop in the middle of the sweep (the 14th call: past the first forward pass).
  struct Stop {};
  calls = 0;
  o.on_step = [&](std::int64_t) {
    if (++calls == 14) throw Stop{};
  };
  pde::ThetaIntegrator<pde::Burgers2D> stopped(op, o);
  EXPECT_THROW(stopped.gradient(u0, obj, schedule), Stop);
  EXPECT_EQ(calls, 14);
}
