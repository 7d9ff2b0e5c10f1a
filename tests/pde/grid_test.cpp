// pde::Grid: the ghost exchange G and its adjoint Gᵀ (⟨G x, y⟩ = ⟨x, Gᵀ y⟩),
// the values G puts in the ghosts (periodic wrap, neighbours' cells), the
// boundary rule, and bad grids failing on every rank. The executable runs on
// 1, 2 and 4 ranks (tests/pde/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>

#include "costate/pde/grid.hpp"
#include "costate/tensor/reduce.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// ⟨G x, y⟩ and ⟨x, Gᵀ y⟩ are the same sum in a different order: they agree
// to a few ulps of the sum's magnitude.
constexpr double kAdjointTol = 1e-13;

pde::GridSpec spec_of(int dim, Boundary b, int width, int dof) {
  pde::GridSpec s;
  s.dim = dim;
  const std::int64_t n[3] = {dim == 1 ? 23 : 13, dim >= 2 ? 11 : 1, dim == 3 ? 9 : 1};
  s.cells = {n[0], n[1], n[2]};
  s.boundary = {b, b == Boundary::Periodic ? Boundary::Periodic : Boundary::Neumann, b};
  s.stencil_width = width;
  s.dof = dof;
  s.star_stencil = false;
  return s;
}

double pseudo_random(std::int64_t g, double salt) { return std::sin(1.37 * static_cast<double>(g) + salt); }

// Natural index of (c, i, j, k) with periodic wrap.
std::int64_t natural_of(const pde::Grid& grid, int c, std::int64_t i, std::int64_t j, std::int64_t k) {
  auto wrap = [](std::int64_t v, std::int64_t n) { return ((v % n) + n) % n; };
  i = wrap(i, grid.cells(0));
  j = wrap(j, grid.cells(1));
  k = wrap(k, grid.cells(2));
  return ((k * grid.cells(1) + j) * grid.cells(0) + i) * grid.dof() + c;
}

void check_exchange(const pde::GridSpec& spec) {
  pde::Grid grid(MPI_COMM_WORLD, spec);
  // x: a field known in natural order on every rank.
  std::vector<double> xn(static_cast<std::size_t>(grid.global_size()));
  for (std::size_t g = 0; g < xn.size(); ++g) xn[g] = pseudo_random(static_cast<std::int64_t>(g), 0.3);
  auto x = grid.create_global();
  grid.scatter(xn, x);
  EXPECT_EQ(grid.gather(x), xn);

  auto gx = grid.create_local();
  grid.global_to_local(x, gx);
  auto v = grid.view(gx);
  const auto& gb = grid.ghosted();
  // G copies the right cells (wrapped when periodic); outer ghosts are 0.
  for (std::int64_t k = 0; k < gb.count[2]; ++k)
    for (std::int64_t j = 0; j < gb.count[1]; ++j)
      for (std::int64_t i = 0; i < gb.count[0]; ++i) {
        const std::int64_t I = gb.start[0] + i, J = gb.start[1] + j, K = gb.start[2] + k;
        bool outer = false;
        const std::int64_t idx[3] = {I, J, K};
        for (int d = 0; d < grid.dim(); ++d)
          outer = outer || (!grid.periodic(d) && (idx[d] < 0 || idx[d] >= grid.cells(d)));
        for (int c = 0; c < grid.dof(); ++c) {
          const double expect = outer ? 0.0 : xn[static_cast<std::size_t>(natural_of(grid, c, I, J, K))];
          ASSERT_EQ(v(k, j, i, c), expect) << "cell " << I << "," << J << "," << K;
          ASSERT_EQ(gx(static_cast<std::size_t>(grid.local_index(c, I, J, K))), expect);
        }
      }

  // Adjoint identity with y arbitrary on every local entry (outer ghosts too).
  auto y = grid.create_local();
  for (std::size_t l = 0; l < y.extent(0); ++l)
    y(l) = pseudo_random(static_cast<std::int64_t>(l) + 1000 * grid.rank(), 1.1);
  double local = 0.0;
  for (std::size_t l = 0; l < y.extent(0); ++l) local += gx(l) * y(l);
  const double lhs = global_sum(grid.comm(), local);
  auto gty = grid.create_global();
  fill(gty, 0.0);
  grid.local_to_global_add(y, gty);
  const double rhs = dot(x, gty);
  EXPECT_NEAR(lhs, rhs, kAdjointTol * (std::abs(lhs) + 1.0))
      << "dim " << spec.dim << " boundary " << pde::to_string(spec.boundary[0]) << " width "
      << spec.stencil_width << " dof " << spec.dof;
}

}  // namespace

TEST(PdeGrid, GhostExchangeAndItsAdjoint) {
  for (int dim = 1; dim <= 3; ++dim)
    for (Boundary b : {Boundary::Periodic, Boundary::Dirichlet, Boundary::Neumann})
      for (int width : {1, 2})
        for (int dof : {1, 2}) check_exchange(spec_of(dim, b, width, dof));
}

TEST(PdeGrid, BoundaryRuleMirrorsAcrossTheFace) {
  pde::GridSpec s = spec_of(2, Boundary::Dirichlet, 2, 1);
  s.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
  s.dirichlet_value = 0.75;
  pde::Grid grid(MPI_COMM_WORLD, s);
  auto x = grid.create_global();
  std::vector<double> xn(static_cast<std::size_t>(grid.global_size()));
  for (std::size_t g = 0; g < xn.size(); ++g) xn[g] = pseudo_random(static_cast<std::int64_t>(g), 0.9);
  grid.scatter(xn, x);
  auto l = grid.create_local();
  grid.global_to_local(x, l);
  auto v = grid.view(l);
  pde::fill_boundary(grid, v);
  const auto& gb = grid.ghosted();
  const std::int64_t nx = grid.cells(0), ny = grid.cells(1);
  auto at = [&](std::int64_t i, std::int64_t j) { return v(0, j - gb.start[1], i - gb.start[0], 0); };
  auto nat = [&](std::int64_t i, std::int64_t j) { return xn[static_cast<std::size_t>(j * nx + i)]; };
  for (std::int64_t j = std::max<std::int64_t>(gb.start[1], 0); j < std::min(gb.start[1] + gb.count[1], ny); ++j) {
    if (gb.start[0] < 0) {  // left x-boundary: Dirichlet, u_{-1-m} = 2g - u_m
      EXPECT_DOUBLE_EQ(at(-1, j), 1.5 - nat(0, j));
      EXPECT_DOUBLE_EQ(at(-2, j), 1.5 - nat(1, j));
    }
    if (gb.start[0] + gb.count[0] > nx) {
      EXPECT_DOUBLE_EQ(at(nx + 1, j), 1.5 - nat(nx - 2, j));
    }
  }
  for (std::int64_t i = std::max<std::int64_t>(gb.start[0], 0); i < std::min(gb.start[0] + gb.count[0], nx); ++i) {
    if (gb.start[1] < 0) {
      EXPECT_EQ(at(i, -2), nat(i, 1));  // Neumann: even mirror
    }
    if (gb.start[1] + gb.count[1] > ny) {
      EXPECT_EQ(at(i, ny), nat(i, ny - 1));
    }
  }
}

TEST(PdeGrid, BadGridsFailOnEveryRank) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  pde::GridSpec s;
  s.dim = 1;
  s.cells = {4, 1, 1};
  s.boundary[0] = Boundary::Periodic;
  s.stencil_width = 2;  // periodic needs 2·2 + 1 = 5 cells
  try {
    pde::Grid g(MPI_COMM_WORLD, s);
    ADD_FAILURE() << "a 4-cell periodic grid with stencil width 2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least 5 cells"), std::string::npos) << e.what();
  }
  // Too many ranks for the grid: each rank would own < width cells.
  s.boundary[0] = Boundary::Dirichlet;
  s.cells = {2 * static_cast<std::int64_t>(size) + (size > 1 ? -1 : 1), 1, 1};
  s.stencil_width = 2;
  if (size > 1) {
    try {
      pde::Grid g(MPI_COMM_WORLD, s);
      ADD_FAILURE() << "a grid too small for " << size << " ranks was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fewer than the stencil width"), std::string::npos) << e.what();
    }
  }
  s.dim = 4;
  EXPECT_THROW(pde::Grid(MPI_COMM_WORLD, s), Error);
  // The communicator is still usable on every rank (nobody is stuck).
  EXPECT_EQ(global_sum(MPI_COMM_WORLD, 1.0), static_cast<double>(size));
}
