// The PETSc cut (issue 36): a program linked with libcostate alone — not
// libcostate_petsc, as the front `costate` is — starts without PETSc, and
// the first PETSc-backed call loads costate's PETSc part on demand
// (solvers/petsc/module.hpp). Checked by what the process has mapped
// (/proc/self/maps) and by answers with closed forms: a KSP solve of a
// diagonal system on a DMDA grid, a TAO minimisation of a quadratic.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/optimize/tao.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/matrix.hpp"

namespace {

/// Whether a mapped file of this process has `name` in its path.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

// KSP's default relative tolerance is 1e-5 of ‖b‖; a diagonal system with a
// Jacobi/ILU preconditioner is solved exactly in one iteration, so round-off
// of a division is all that remains.
constexpr double kSolveTol = 1e-12;
// TAO's gradient tolerance (gatol 1e-8 by default) on f = (x − 3)² + 2
// bounds |x − 3| by 5e-9.
constexpr double kMinimizeTol = 1e-7;

TEST(PetscModule, LoadedOnFirstUseByAProgramThatLinkedLibcostateAlone) {
  ASSERT_TRUE(mapped("libcostate.so")) << "this test must link libcostate";
  ASSERT_FALSE(mapped("libcostate_petsc")) << "this test must not link libcostate_petsc";
  ASSERT_FALSE(mapped("libpetsc"));

  costate::Environment env(nullptr, nullptr, {.petsc = true, .kokkos = true});
  EXPECT_TRUE(mapped("libcostate_petsc")) << "the Environment's PETSc start-up did not load it";
  EXPECT_TRUE(mapped("libpetsc"));

  // A 1-D grid of 8 cells, A = diag(1, 2, …, 8): x_i = b_i / (i + 1).
  costate::pde::GridSpec spec{.dim = 1, .cells = {8, 1, 1}};
  costate::pde::Grid grid(MPI_COMM_WORLD, spec);
  costate::pde::Matrix a(grid);
  const auto& owned = grid.owned();
  for (std::int64_t i = owned.start[0]; i < owned.start[0] + owned.count[0]; ++i) {
    const std::int64_t row = grid.local_index(0, i, 0, 0);
    const std::int64_t cols[1] = {row};
    const double values[1] = {static_cast<double>(i + 1)};
    a.set_row(row, cols, values);
  }
  a.assemble();
  costate::pde::KrylovSolver solver(grid);
  solver.set_operator(a);
  auto b = grid.create_global("b");
  auto x = grid.create_global("x");
  std::vector<double> ones(8, 1.0);
  grid.scatter(ones, b);
  solver.solve(b, x);
  const std::vector<double> all = grid.gather(x);
  ASSERT_EQ(all.size(), 8u);
  for (std::size_t i = 0; i < all.size(); ++i)
    EXPECT_NEAR(all[i], 1.0 / static_cast<double>(i + 1), kSolveTol) << "cell " << i;

  // TAO: min (x − 3)² + 2 on [−10, 10].
  costate::optimize::Objective f{
      .n = 1,
      .objective_and_gradient = [](std::span<const double> v, std::span<double> g) {
        g[0] = 2.0 * (v[0] - 3.0);
        return (v[0] - 3.0) * (v[0] - 3.0) + 2.0;
      },
      .hessian = {}};
  const std::vector<double> x0{0.0}, lower{-10.0}, upper{10.0};
  const auto r = costate::optimize::minimize(f, x0, lower, upper);
  ASSERT_EQ(r.x.size(), 1u);
  EXPECT_NEAR(r.x[0], 3.0, kMinimizeTol) << r.brief_report();
  EXPECT_TRUE(r.converged) << r.brief_report();
}

}  // namespace
