// pde::Operator on the built-in models: the coloured Jacobian assembled into
// a PETSc matrix equals the dense one (column by column, from one-direction
// Dual passes) and the directional derivative matches central differences;
// the vector–Jacobian products satisfy ⟨J v, w⟩ = ⟨v, Jᵀ w⟩ for the state,
// the parameter field κ and the scalar parameters. Runs on 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <cmath>

#include "costate/pde/models.hpp"
#include "costate/pde/operator.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// Entries of the coloured and the dense Jacobian come from the same
// arithmetic on different seeds: equal to round-off of the entry size
// (1/h² ~ 1e2 here).
constexpr double kJacobianTol = 1e-11;
// Central differences with step 1e-6 on functions with O(1) third
// derivatives and O(1e2) values: truncation 1e-12·1e2, round-off 1e-16·1e2/1e-6.
constexpr double kFiniteDifferenceTol = 1e-6;
// Duality identities: the same sum in different orders.
constexpr double kAdjointTol = 1e-12;

double wave(std::int64_t g, double salt) { return std::sin(0.77 * static_cast<double>(g) + salt); }

void set_natural(const pde::Grid& grid, const pde::GlobalVector& v, double salt, double offset = 0.0,
                 double amplitude = 1.0) {
  std::vector<double> n(static_cast<std::size_t>(grid.global_size()));
  for (std::size_t g = 0; g < n.size(); ++g) n[g] = offset + amplitude * wave(static_cast<std::int64_t>(g), salt);
  grid.scatter(n, v);
}

template <class Model>
void check_dense_equals_coloured(pde::Operator<Model>& op, const pde::GlobalVector& u) {
  const pde::Grid& grid = op.grid();
  pde::Matrix J(grid);
  op.jacobian(0.3, u, J);
  auto e = grid.create_global(), col = grid.create_global(), dense = grid.create_global();
  std::vector<double> unit(static_cast<std::size_t>(grid.global_size()), 0.0);
  double worst = 0.0;
  for (std::size_t j = 0; j < unit.size(); ++j) {
    unit[j] = 1.0;
    grid.scatter(unit, e);
    unit[j] = 0.0;
    J.mult(e, col);
    op.jvp(0.3, u, e, dense);
    for (std::size_t i = 0; i < col.size(); ++i) worst = std::max(worst, std::abs(col[i] - dense[i]));
  }
  worst = global_max(grid.comm(), worst);
  EXPECT_LT(worst, kJacobianTol) << "largest |J_coloured − J_dense| entry";

  // The Dual directional derivative is the derivative: central differences.
  auto v = grid.create_global(), jv = grid.create_global(), up = grid.create_global(),
       um = grid.create_global(), fp = grid.create_global(), fm = grid.create_global();
  set_natural(grid, v, 2.0);
  op.jvp(0.3, u, v, jv);
  const double eps = 1e-6;
  linear_sum(up, 1.0, u, eps, v);
  linear_sum(um, 1.0, u, -eps, v);
  op.rhs(0.3, up, fp);
  op.rhs(0.3, um, fm);
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < jv.size(); ++i) {
    err = std::max(err, std::abs((fp[i] - fm[i]) / (2 * eps) - jv[i]));
    scale = std::max(scale, std::abs(jv[i]));
  }
  err = global_max(grid.comm(), err);
  scale = global_max(grid.comm(), scale);
  EXPECT_LT(err, kFiniteDifferenceTol * (1.0 + scale));
  EXPECT_GT(scale, 1.0);  // J v is not trivially zero (entries ~ 1/h²)

  // ⟨J v, w⟩ = ⟨v, Jᵀ w⟩ with Jᵀ from MatMultTranspose.
  auto w = grid.create_global(), jtw = grid.create_global();
  set_natural(grid, w, 5.0);
  J.mult_transpose(w, jtw);
  const double lhs = dot(jv, w), rhs = dot(v, jtw);
  EXPECT_NEAR(lhs, rhs, kAdjointTol * (std::abs(lhs) + 1.0));
}

pde::Domain domain(std::int64_t nx, std::int64_t ny, Boundary bx, Boundary by) {
  pde::Domain d;
  d.cells = {nx, ny, 1};
  d.boundary = {bx, by, Boundary::Periodic};
  d.dirichlet_value = 0.25;
  return d;
}

}  // namespace

TEST(PdeOperator, HeatColouredJacobianEqualsDense) {
  // 7 periodic cells: 7 mod 3 ≠ 0 exercises the wrap-around colours.
  for (auto [bx, by] : {std::pair{Boundary::Dirichlet, Boundary::Neumann},
                        std::pair{Boundary::Periodic, Boundary::Periodic}}) {
    pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, domain(8, 7, bx, by), {}, {1.5});
    // Star colouring (i + 2j) mod 5; periodic 8 × 7 falls back to the
    // per-axis colouring with wrap colours: (3 + 2) · (3 + 1).
    EXPECT_EQ(op.state_colours(), bx == Boundary::Periodic ? 20 : 5);
    set_natural(*op.field_grid(), op.fields(), 0.4, 1.0, 0.5);  // κ in [0.5, 1.5]
    auto u = op.grid().create_global();
    set_natural(op.grid(), u, 1.0);
    check_dense_equals_coloured(op, u);
  }
}

TEST(PdeOperator, GrayScottColouredJacobianEqualsDense) {
  for (auto [bx, by] : {std::pair{Boundary::Periodic, Boundary::Periodic},
                        std::pair{Boundary::Neumann, Boundary::Dirichlet}}) {
    pde::Operator<pde::GrayScott2D> op(MPI_COMM_WORLD, domain(7, 8, bx, by), {},
                                       {2e-3, 1e-3, 0.04, 0.06});
    auto u = op.grid().create_global();
    set_natural(op.grid(), u, 1.0, 0.5, 0.4);
    check_dense_equals_coloured(op, u);
  }
}

TEST(PdeOperator, FieldAndScalarVectorJacobianProducts) {
  pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, domain(9, 6, Boundary::Dirichlet, Boundary::Periodic), {},
                                {1.5});
  const pde::Grid& fg = *op.field_grid();
  set_natural(fg, op.fields(), 0.4, 1.0, 0.5);
  auto u = op.grid().create_global(), w = op.grid().create_global(), jv = op.grid().create_global();
  set_natural(op.grid(), u, 1.0);
  set_natural(op.grid(), w, 3.0);
  // κ: ⟨(∂f/∂κ) κ̇, w⟩ = ⟨κ̇, (∂f/∂κ)ᵀ w⟩.
  auto kdot = fg.create_global(), kbar = fg.create_global();
  set_natural(fg, kdot, 7.0);
  op.jvp_fields(0.0, u, kdot, jv);
  fill(kbar, 0.0);
  op.vjp_fields_add(0.0, u, w, kbar);
  const double lhs = dot(jv, w), rhs = dot(kdot, kbar);
  EXPECT_NEAR(lhs, rhs, kAdjointTol * (std::abs(lhs) + 1.0));
  // Accumulates: a second call doubles it.
  op.vjp_fields_add(0.0, u, w, kbar);
  EXPECT_NEAR(dot(kdot, kbar), 2 * rhs, kAdjointTol * (std::abs(lhs) + 1.0));
  // (∂f/∂κ)ᵀ w against central differences in κ along κ̇.
  const double eps = 1e-6;
  auto f1 = op.grid().create_global(), f2 = op.grid().create_global();
  auto saved = fg.create_global();
  deep_copy(saved, op.fields());
  axpy(eps, kdot, op.fields());
  op.rhs(0.0, u, f1);
  axpy(-2 * eps, kdot, op.fields());
  op.rhs(0.0, u, f2);
  deep_copy(op.fields(), saved);
  const double fd = (dot(f1, w) - dot(f2, w)) / (2 * eps);
  EXPECT_NEAR(fd, rhs, kFiniteDifferenceTol * (1.0 + std::abs(rhs)));
  // Scalar q₀: q̄ = ⟨∂f/∂q₀, w⟩ against central differences.
  std::vector<double> qbar(1, 0.0);
  op.vjp_parameters_add(0.0, u, w, qbar);
  op.parameters()[0] = 1.5 + eps;
  op.rhs(0.0, u, f1);
  op.parameters()[0] = 1.5 - eps;
  op.rhs(0.0, u, f2);
  op.parameters()[0] = 1.5;
  const double fdq = (dot(f1, w) - dot(f2, w)) / (2 * eps);
  EXPECT_NEAR(fdq, qbar[0], kFiniteDifferenceTol * (1.0 + std::abs(fdq)));
  EXPECT_GT(std::abs(qbar[0]), 1e-3);  // not trivially zero

  // The fused vJp (one Dual pass for κ and q₀) agrees with the separate ones.
  auto kbar1 = fg.create_global(), kbar2 = fg.create_global();
  fill(kbar1, 0.0);
  fill(kbar2, 0.0);
  std::vector<double> q1(1, 0.0), q2(1, 0.0);
  op.vjp_fields_add(0.0, u, w, kbar1);
  op.vjp_parameters_add(0.0, u, w, q1);
  op.vjp_add(0.0, u, w, kbar2, q2);
  auto diff = fg.create_global();
  linear_sum(diff, 1.0, kbar1, -1.0, kbar2);
  EXPECT_LE(max_norm(diff), kAdjointTol * max_norm(kbar1));
  EXPECT_NEAR(q1[0], q2[0], kAdjointTol * std::abs(q1[0]));
}
