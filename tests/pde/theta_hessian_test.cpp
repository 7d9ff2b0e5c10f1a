// pde::ThetaIntegrator::hessian_vector — the second-order adjoint of the θ
// method under MPI. For directions in the scalar parameters, the initial
// state and a parameter field (κ): H·v against central differences of
// adjoint gradients, (g(m + εv) − g(m − εv)) / 2ε; the second-order Taylor
// remainder |J(m + εv) − J − ε gᵀv − ½ε² vᵀHv| = O(ε³); symmetry
// uᵀ(Hv) = vᵀ(Hu); the gradient it returns against ThetaIntegrator::gradient.
// Burgers 1-D (nonlinear in u: the ∂²f/∂u² terms), Heat 2-D with κ (the
// mixed ∂²f/∂u∂κ terms), both θ = ½ and 1. Gauss–Newton: equal to the exact
// product when the residual vanishes, their difference linear in the
// residual, and equal to Sᵀ V S v from the tangent run and a first-order
// adjoint. The same H·v on 1, 2 and 4 ranks as a serial reference on
// MPI_COMM_SELF with another preconditioner (so the 1-rank run is not
// compared with itself); identical bits for every checkpoint schedule.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"
#include "support/pde_fixtures.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// Central differences of gradients with step kFdStep (directions of size
// ~1): truncation ε² |∂³g| / 6 ~ 1e-8 relative to H·v, round-off of
// gradients converged to rtol 1e-14 ≈ 1e-14 |g| / ε ≈ 1e-10.
constexpr double kFdStep = 1e-4;
constexpr double kFdRelTol = 1e-6;
// Taylor remainder of second order: every observed order (halving ε) must
// reach 2.8 (3 for a right H·v, 2 for a wrong one); steps whose remainder is
// within kTaylorFloor·ε_machine·|J| of round-off are not used.
constexpr double kTaylorOrder = 2.8;
constexpr double kTaylorFloor = 1e4;
// Symmetry: uᵀHv and vᵀHu are the same discrete second derivative computed
// along different tangent and second-order adjoint solves, each converged
// to rtol 1e-14; ~1e-14 relative seen.
constexpr double kSymmetryTol = 1e-11;
// The sweep's gradient sums J_nᵀμ from the second-order pass (another
// summation order than the assembled Jacobian's): round-off only.
constexpr double kGradientAgreement = 1e-12;
// Gauss–Newton vs exact at zero residual, and the GN product vs Sᵀ V S v:
// the same derivatives along different summation orders / KSP iterates.
constexpr double kGaussNewtonTol = 1e-11;
// Rank counts and preconditioners change the KSP iterates; solves converged
// to rtol 1e-14 agree to ~1e-13 relative. 1e-12 is the requirement.
constexpr double kRankAgreement = 1e-12;

using costate::test::natural;
using costate::test::wave;

pde::ThetaOptions options(double theta, double dt, std::int64_t steps) {
  return costate::test::theta_options(theta, dt, steps);
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// A point m = (a, q, y_0) of any model, in natural order (gathered), with
/// the operations the checks need: set it on the operator, flatten results.
template <class Model>
struct Problem {
  using Op = pde::Operator<Model>;
  Op& op;
  pde::GlobalVector& u0;
  pde::ThetaOptions opt;
  const pde::Objective& obj;
  std::vector<double> a0, q0, y0;  // natural order

  Problem(Op& o, pde::GlobalVector& u, const pde::ThetaOptions& th, const pde::Objective& ob)
      : op(o), u0(u), opt(th), obj(ob) {
    if constexpr (Op::kFields > 0) a0 = op.field_grid()->gather(op.fields());
    q0 = op.parameters();
    y0 = op.grid().gather(u0);
  }
  std::size_t na() const { return a0.size(); }
  std::size_t nq() const { return q0.size(); }
  std::size_t size() const { return a0.size() + q0.size() + y0.size(); }
  std::vector<double> flat0() const {
    std::vector<double> m = a0;
    m.insert(m.end(), q0.begin(), q0.end());
    m.insert(m.end(), y0.begin(), y0.end());
    return m;
  }
  /// Sets the operator and u0 to m; restore() puts m0 back.
  void set(const std::vector<double>& m) {
    if constexpr (Op::kFields > 0)
      op.field_grid()->scatter(std::vector<double>(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(na())),
                               op.fields());
    op.parameters().assign(m.begin() + static_cast<std::ptrdiff_t>(na()),
                           m.begin() + static_cast<std::ptrdiff_t>(na() + nq()));
    op.grid().scatter(std::vector<double>(m.begin() + static_cast<std::ptrdiff_t>(na() + nq()), m.end()), u0);
  }
  void restore() { set(flat0()); }
  /// A flat direction as a ThetaDirection (empty parts where v is zero).
  pde::ThetaDirection direction(const std::vector<double>& v) const {
    pde::ThetaDirection d;
    auto part = [&](std::size_t b, std::size_t n) {
      return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(b),
                                 v.begin() + static_cast<std::ptrdiff_t>(b + n));
    };
    auto nonzero = [](const std::vector<double>& x) {
      for (double e : x)
        if (e != 0.0) return true;
      return false;
    };
    if constexpr (Op::kFields > 0) {
      const auto a = part(0, na());
      if (nonzero(a)) {
        d.fields = op.field_grid()->create_global();
        op.field_grid()->scatter(a, d.fields);
      }
    }
    const auto q = part(na(), nq());
    if (nonzero(q)) d.parameters = q;
    const auto y = part(na() + nq(), y0.size());
    if (nonzero(y)) {
      d.initial_state = op.grid().create_global();
      op.grid().scatter(y, d.initial_state);
    }
    return d;
  }
  std::vector<double> flatten(const pde::GlobalVector& a, const std::vector<double>& q,
                              const pde::GlobalVector& y) const {
    std::vector<double> m;
    if constexpr (Op::kFields > 0) m = op.field_grid()->gather(a);
    m.insert(m.end(), q.begin(), q.end());
    const auto yy = op.grid().gather(y);
    m.insert(m.end(), yy.begin(), yy.end());
    return m;
  }
  double objective(const std::vector<double>& m) {
    set(m);
    pde::ThetaIntegrator<Model> integ(op, opt);
    auto u = op.grid().create_global();
    deep_copy(u, u0);
    integ.integrate(u);
    restore();
    return obj.evaluate(op.grid(), u, nullptr);
  }
  std::vector<double> gradient(const std::vector<double>& m) {
    set(m);
    pde::ThetaIntegrator<Model> integ(op, opt);
    const auto g = integ.gradient(u0, obj, ode::StoreAll{});
    restore();
    return flatten(g.wrt_fields, g.wrt_parameters, g.wrt_initial_state);
  }
  pde::ThetaHessianVector hvp_result(const std::vector<double>& v, const ode::Checkpointing& c = ode::StoreAll{},
                                     pde::HessianProduct product = pde::HessianProduct::Exact) {
    pde::ThetaIntegrator<Model> integ(op, opt);
    return integ.hessian_vector(u0, obj, direction(v), c, product);
  }
  std::vector<double> hvp(const std::vector<double>& v, const ode::Checkpointing& c = ode::StoreAll{},
                          pde::HessianProduct product = pde::HessianProduct::Exact) {
    const auto r = hvp_result(v, c, product);
    return flatten(r.wrt_fields, r.wrt_parameters, r.wrt_initial_state);
  }
};

/// Every check of the exact product along v (and symmetry against u).
template <class Model>
void check_hessian(Problem<Model>& P, const std::vector<double>& v, const std::vector<double>& u,
                   const char* label) {
  const int rank = P.op.grid().rank();
  const auto m0 = P.flat0();
  const auto res = P.hvp_result(v);
  const auto hv = P.flatten(res.wrt_fields, res.wrt_parameters, res.wrt_initial_state);
  const auto g0 = P.gradient(m0);

  // The gradient from the same sweep.
  const auto gs = P.flatten(res.gradient_fields, res.gradient_parameters, res.gradient_initial_state);
  EXPECT_LE(max_rel(gs, g0), kGradientAgreement) << label;
  EXPECT_EQ(res.objective, P.objective(m0)) << label;  // the same forward run, the same bits

  // Central differences of gradients.
  auto shifted = [&](double s) {
    auto m = m0;
    for (std::size_t k = 0; k < m.size(); ++k) m[k] += s * v[k];
    return m;
  };
  const auto gp = P.gradient(shifted(kFdStep)), gm = P.gradient(shifted(-kFdStep));
  std::vector<double> fd(gp.size());
  for (std::size_t k = 0; k < fd.size(); ++k) fd[k] = (gp[k] - gm[k]) / (2.0 * kFdStep);
  const double e_fd = max_rel(hv, fd);
  double hv_norm = 0.0;
  for (double x : hv) hv_norm = std::max(hv_norm, std::abs(x));
  EXPECT_GT(hv_norm, 1e-10) << label;  // a real second derivative, not 0 = 0
  EXPECT_LE(e_fd, kFdRelTol) << label << ": H·v vs differences of gradients";

  // Taylor remainder of order 3.
  const double J0 = res.objective, gv = dot(g0, v), vhv = dot(v, hv);
  double eps = 0.05;
  std::vector<double> r, orders;
  bool quadratic = false;  // J quadratic along v (a linear model along a q or y_0 direction)
  for (int k = 0; k < 6; ++k, eps *= 0.5) {
    const double J = P.objective(shifted(eps));
    const double rem = std::abs(J - J0 - eps * gv - 0.5 * eps * eps * vhv);
    if (rem <= kTaylorFloor * 2.2e-16 * std::max(std::abs(J0), std::abs(J))) {
      // At the first, largest step: the quadratic model with this vᵀHv is
      // exact to round-off (a wrong vᵀHv leaves ½ε²·error ≫ the floor).
      quadratic = r.empty();
      break;
    }
    if (!r.empty()) orders.push_back(std::log2(r.back() / rem));
    r.push_back(rem);
  }
  EXPECT_TRUE(quadratic || orders.size() >= 2u) << label << ": too few Taylor steps above round-off";
  for (double o : orders) EXPECT_GE(o, kTaylorOrder) << label << ": Taylor order";

  // Symmetry.
  const auto hu = P.hvp(u);
  const double uhv = dot(u, hv), vhu = dot(v, hu);
  EXPECT_LE(std::abs(uhv - vhu), kSymmetryTol * std::max(std::abs(uhv), std::abs(vhu))) << label;
  EXPECT_GT(std::abs(uhv), 1e-12) << label;

  if (rank == 0) {
    std::printf("[ info ] %s: H.v vs FD of gradients %.1e; Taylor orders%s", label, e_fd,
                quadratic ? " (quadratic along v: remainder at round-off)" : "");
    for (double o : orders) std::printf(" %.2f", o);
    std::printf("; symmetry %.1e; gradient %.1e\n", std::abs(uhv - vhu) / std::abs(uhv), max_rel(gs, g0));
  }
}

struct Burgers {
  pde::Operator<pde::Burgers1D> op;
  pde::GlobalVector u0, data;
  pde::Objective obj;
  explicit Burgers(MPI_Comm comm) : op(comm, domain(), {}, {0.05, 0.3}) {
    const pde::Grid& g = op.grid();
    u0 = g.create_global();
    data = g.create_global();
    g.scatter(natural(g.global_size(), 1.0, 0.3, 0.5), u0);
    g.scatter(natural(g.global_size(), 2.0, 0.2, 0.1), data);
    obj = pde::Objective::misfit(data);
  }
  static pde::Domain domain() {
    pde::Domain d;
    d.cells = {24, 1, 1};
    d.boundary = {Boundary::Dirichlet, Boundary::Periodic, Boundary::Periodic};
    d.dirichlet_value = 0.2;
    return d;
  }
};

struct Heat {
  pde::Operator<pde::Heat2D> op;
  pde::GlobalVector u0, data;
  pde::Objective obj;
  explicit Heat(MPI_Comm comm) : op(comm, domain(), {}, {1.5}) {
    const pde::Grid& g = op.grid();
    op.field_grid()->scatter(natural(g.global_size(), 0.4, 1.0, 0.5), op.fields());
    u0 = g.create_global();
    data = g.create_global();
    g.scatter(natural(g.global_size(), 1.0, 0.3, 0.2), u0);
    g.scatter(natural(g.global_size(), 2.0, 0.25, 0.1), data);
    obj = pde::Objective::misfit(data);
  }
  static pde::Domain domain() {
    pde::Domain d;
    d.cells = {12, 10, 1};
    d.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
    d.dirichlet_value = 0.1;
    return d;
  }
};

/// Directions in natural order: a block of the flat vector set, the rest 0.
std::vector<double> block(std::size_t n, std::size_t begin, std::size_t count, double salt, double amplitude) {
  std::vector<double> v(n, 0.0);
  for (std::size_t k = 0; k < count; ++k) v[begin + k] = amplitude * wave(static_cast<std::int64_t>(k), salt);
  return v;
}

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (std::size_t k = 0; k < a.size(); ++k) a[k] += b[k];
  return a;
}

/// Under MPI only the combined direction (every part at once) is checked
/// against differences of gradients and Taylor: each check costs ~10
/// distributed solves of the whole problem, slow on oversubscribed ranks.
bool parts_too() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size == 1;
}

}  // namespace

TEST(PdeThetaHessian, BurgersScalarAndInitialStateDirections) {
  for (double theta : {0.5, 1.0}) {
    Burgers b(MPI_COMM_WORLD);
    Problem<pde::Burgers1D> P(b.op, b.u0, options(theta, 0.02, 10), b.obj);
    const std::size_t n = P.size(), ny = P.y0.size();
    const auto vq = block(n, 0, 2, 0.3, 0.05);       // δν, δA
    const auto vy = block(n, 2, ny, 4.1, 0.5);       // δu0
    const auto uq = block(n, 0, 2, 1.9, 0.05);
    const auto uy = block(n, 2, ny, 0.6, 0.5);
    const std::string t = theta == 0.5 ? "CN" : "BE";
    if (parts_too()) {
      check_hessian(P, vq, uy, ("burgers " + t + " scalars").c_str());
      check_hessian(P, vy, uq, ("burgers " + t + " initial state").c_str());
    }
    check_hessian(P, plus(vq, vy), plus(uq, uy), ("burgers " + t + " all").c_str());
  }
}

TEST(PdeThetaHessian, HeatFieldScalarAndInitialStateDirections) {
  for (double theta : {0.5, 1.0}) {
    Heat h(MPI_COMM_WORLD);
    Problem<pde::Heat2D> P(h.op, h.u0, options(theta, 2e-3, 12), h.obj);
    const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
    const auto va = block(n, 0, na, 3.3, 0.3);
    const auto vq = block(n, na, 1, 0.2, 1.0);
    const auto vy = block(n, na + 1, ny, 4.1, 0.5);
    const auto ua = block(n, 0, na, 1.7, 0.3);
    const auto uy = block(n, na + 1, ny, 2.9, 0.5);
    const std::string t = theta == 0.5 ? "CN" : "BE";
    if (parts_too()) {
      check_hessian(P, va, uy, ("heat " + t + " kappa").c_str());
      check_hessian(P, vq, ua, ("heat " + t + " q0").c_str());
      check_hessian(P, vy, ua, ("heat " + t + " initial state").c_str());
    }
    check_hessian(P, plus(plus(va, vq), vy), plus(ua, uy), ("heat " + t + " all").c_str());
  }
}

TEST(PdeThetaHessian, GaussNewtonAgainstExactAndAgainstTangentThenAdjoint) {
  Heat h(MPI_COMM_WORLD);
  const pde::Grid& g = h.op.grid();
  const auto o = options(0.5, 2e-3, 12);
  Problem<pde::Heat2D> P(h.op, h.u0, o, h.obj);
  const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
  const auto v = plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5));
  const auto exact = P.hvp(v);
  const auto gn = P.hvp(v, ode::StoreAll{}, pde::HessianProduct::GaussNewton);

  // Sᵀ V S v independently: S v = δy_l from the tangent run; a misfit with
  // data y_l − δy_l has the gradient Sᵀ V δy_l (the first-order adjoint).
  pde::ThetaIntegrator<pde::Heat2D> integ(h.op, o);
  const auto t = integ.tangent(h.u0, h.obj, P.direction(v));
  auto shifted = g.create_global();
  linear_sum(shifted, 1.0, t.final_state, -1.0, t.final_tangent);
  const auto sts = integ.gradient(h.u0, pde::Objective::misfit(shifted), ode::StoreAll{});
  const auto stsv = P.flatten(sts.wrt_fields, sts.wrt_parameters, sts.wrt_initial_state);
  EXPECT_LE(max_rel(gn, stsv), kGaussNewtonTol) << "Gauss-Newton vs tangent then adjoint";

  // The residual term: zero at zero residual (data = y_l), linear in it.
  auto at_data = [&](const pde::GlobalVector& d, pde::HessianProduct p) {
    const auto obj = pde::Objective::misfit(d);
    pde::ThetaIntegrator<pde::Heat2D> in(h.op, o);
    const auto r = in.hessian_vector(h.u0, obj, P.direction(v), ode::StoreAll{}, p);
    return P.flatten(r.wrt_fields, r.wrt_parameters, r.wrt_initial_state);
  };
  const auto exact0 = at_data(t.final_state, pde::HessianProduct::Exact);
  EXPECT_LE(max_rel(exact0, gn), kGaussNewtonTol) << "exact = Gauss-Newton at zero residual";
  auto doubled = g.create_global();  // y_l + 2 (d − y_l)
  linear_sum(doubled, 2.0, h.data, -1.0, t.final_state);
  const auto exact2 = at_data(doubled, pde::HessianProduct::Exact);
  const auto gn2 = at_data(doubled, pde::HessianProduct::GaussNewton);
  EXPECT_EQ(gn2, gn);  // Gauss-Newton does not see the data: the same bits
  std::vector<double> r1(n), r2(n);
  for (std::size_t k = 0; k < n; ++k) {
    r1[k] = 2.0 * (exact[k] - gn[k]);
    r2[k] = exact2[k] - gn2[k];
  }
  // The residual term is a real part of H v here (κ couples to u), and doubles with the residual.
  EXPECT_GT(max_rel(exact, gn), 1e-3);
  EXPECT_LE(max_rel(r2, r1), 1e-9);  // differences of products agreeing to ~1e-14 relative
  if (g.rank() == 0)
    std::printf("[ info ] Gauss-Newton vs S^T V S v %.1e; exact vs GN at zero residual %.1e; residual term %.1e of H.v, "
                "linear to %.1e\n",
                max_rel(gn, stsv), max_rel(exact0, gn), max_rel(exact, gn), max_rel(r2, r1));
}

TEST(PdeThetaHessian, SameOnEveryRankCountAsAnIndependentSerialReference) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // The reference: one process, Jacobi-preconditioned GMRES (the distributed
  // run uses PETSc's default ILU / block-Jacobi ILU), so on one rank too it
  // is another computation of the same numbers.
  auto reference_options = [](pde::ThetaOptions o) {
    o.ksp.pc_type = "jacobi";
    return o;
  };
  for (auto product : {pde::HessianProduct::Exact, pde::HessianProduct::GaussNewton}) {
    {
      Heat dist(MPI_COMM_WORLD), serial(MPI_COMM_SELF);
      const auto o = options(0.5, 2e-3, 12);
      Problem<pde::Heat2D> D(dist.op, dist.u0, o, dist.obj), S(serial.op, serial.u0, reference_options(o), serial.obj);
      const std::size_t n = D.size(), na = D.na(), ny = D.y0.size();
      const auto v =
          plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5));
      const auto hd = D.hvp(v, ode::Binomial{.snapshots = 4}, product);
      const auto hs = S.hvp(v, ode::StoreAll{}, product);
      const double e = max_rel(hd, hs);
      if (dist.op.grid().rank() == 0)
        std::printf("[ info ] heat %s H.v on %d ranks vs serial reference: %.1e (max relative)\n",
                    to_string(product).c_str(), size, e);
      EXPECT_LE(e, kRankAgreement) << size << " ranks, " << to_string(product);
    }
    {
      Burgers dist(MPI_COMM_WORLD), serial(MPI_COMM_SELF);
      const auto o = options(0.5, 0.02, 10);
      Problem<pde::Burgers1D> D(dist.op, dist.u0, o, dist.obj), S(serial.op, serial.u0, reference_options(o), serial.obj);
      const std::size_t n = D.size(), ny = D.y0.size();
      const auto v = plus(block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 4.1, 0.5));
      const auto hd = D.hvp(v, ode::Binomial{.snapshots = 3}, product);
      const auto hs = S.hvp(v, ode::StoreAll{}, product);
      const double e = max_rel(hd, hs);
      if (dist.op.grid().rank() == 0)
        std::printf("[ info ] burgers %s H.v on %d ranks vs serial reference: %.1e (max relative)\n",
                    to_string(product).c_str(), size, e);
      EXPECT_LE(e, kRankAgreement) << size << " ranks, " << to_string(product);
    }
  }
}

namespace {

/// A path prefix shared by all ranks (rank 0's pid) in the temp directory.
std::string shared_prefix(const std::string& name) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("costate_hvp_" + std::to_string(pid) + "_" + name)).string();
}

template <class Model>
void check_schedules(Problem<Model>& P, const std::vector<double>& v, const char* label) {
  const std::string path = shared_prefix(label);
  for (auto product : {pde::HessianProduct::Exact, pde::HessianProduct::GaussNewton}) {
    const auto all = P.hvp_result(v, ode::StoreAll{}, product);
    const auto ref = P.flatten(all.wrt_fields, all.wrt_parameters, all.wrt_initial_state);
    const bool exact = product == pde::HessianProduct::Exact;  // Gauss-Newton returns no gradient
    const auto gref =
        exact ? P.flatten(all.gradient_fields, all.gradient_parameters, all.gradient_initial_state) : ref;
    const std::vector<ode::Checkpointing> schedules{
        ode::Uniform{.every = 4},  ode::Binomial{.snapshots = 2}, ode::Binomial{.snapshots = 3},
        ode::Binomial{.snapshots = 5}, ode::Online{.snapshots = 3},
        ode::Multilevel{.ram = 2, .disk = 2, .path = path}};
    for (const auto& c : schedules) {
      for (bool shared_disk : {false, true}) {
        if (shared_disk && !std::holds_alternative<ode::Multilevel>(c)) continue;
        P.opt.shared_disk_checkpoints = shared_disk;
        const auto r = P.hvp_result(v, c, product);
        P.opt.shared_disk_checkpoints = false;
        const std::string what = std::string(label) + " " + to_string(product) + " " + ode::to_string(c) +
                                 (shared_disk ? " (shared disk)" : "");
        EXPECT_EQ(P.flatten(r.wrt_fields, r.wrt_parameters, r.wrt_initial_state), ref) << what;
        if (exact) {
          EXPECT_EQ(P.flatten(r.gradient_fields, r.gradient_parameters, r.gradient_initial_state), gref) << what;
        } else {
          EXPECT_EQ(r.gradient_initial_state.size(), 0u) << what;
        }
        EXPECT_EQ(r.objective, all.objective) << what;
        EXPECT_GT(r.checkpoints.recomputed_steps, 0) << what;
        if (std::holds_alternative<ode::Multilevel>(c)) {
          EXPECT_GT(r.checkpoints.disk_snapshots, 0) << what;
        }
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::filesystem::remove(path + ".rank" + std::to_string(P.op.grid().rank()), ec);
}

}  // namespace

TEST(PdeThetaHessian, CheckpointSchedulesGiveIdenticalBits) {
  {
    Heat h(MPI_COMM_WORLD);
    Problem<pde::Heat2D> P(h.op, h.u0, options(0.5, 2e-3, 12), h.obj);
    const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
    check_schedules(P, plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5)),
                    "heat");
  }
  {
    Burgers b(MPI_COMM_WORLD);
    Problem<pde::Burgers1D> P(b.op, b.u0, options(0.5, 0.02, 10), b.obj);
    const std::size_t n = P.size(), ny = P.y0.size();
    check_schedules(P, plus(block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 4.1, 0.5)), "burgers");
  }
}

TEST(PdeThetaHessian, BadDirectionsAndNamesAreClearErrorsOnEveryRank) {
  Heat h(MPI_COMM_WORLD);
  const pde::Grid& g = h.op.grid();
  pde::ThetaIntegrator<pde::Heat2D> integ(h.op, options(0.5, 2e-3, 2));
  pde::ThetaDirection wrong_q;
  wrong_q.parameters = {1.0, 2.0};
  try {
    integ.hessian_vector(h.u0, h.obj, wrong_q, ode::StoreAll{});
    ADD_FAILURE() << "two scalars for a one-scalar model were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hessian_vector: ThetaDirection::parameters has 2 entries"),
              std::string::npos)
        << e.what();
  }
  pde::ThetaDirection wrong_u;  // wrong size on the last rank only
  wrong_u.initial_state = pde::GlobalVector(g.owned_size() + (g.rank() == g.size() - 1 ? 1 : 0), g.comm());
  EXPECT_THROW(integ.hessian_vector(h.u0, h.obj, wrong_u, ode::StoreAll{}), Error);
  EXPECT_EQ(pde::hessian_product_from_string("gauss_newton"), pde::HessianProduct::GaussNewton);
  try {
    (void)pde::hessian_product_from_string("newton");
    ADD_FAILURE() << "an unknown product was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected exact or gauss_newton"), std::string::npos) << e.what();
  }
  // A zero-step run: H v = ∇²J v on the initial state only.
  pde::ThetaIntegrator<pde::Heat2D> none(h.op, options(0.5, 2e-3, 0));
  pde::ThetaDirection d;
  d.initial_state = g.create_global();
  fill(d.initial_state, 1.0);
  const auto r = none.hessian_vector(h.u0, h.obj, d, ode::StoreAll{});
  const double volume = g.spacing(0) * g.spacing(1);
  for (std::size_t e = 0; e < r.wrt_initial_state.size(); ++e) EXPECT_EQ(r.wrt_initial_state[e], volume);
}

TEST(PdeThetaHessian, ProductsAtALinearizedPointMatchTheSweep) {
  // Autonomous linear model: the same operations, the same bits.
  {
    Heat h(MPI_COMM_WORLD);
    Problem<pde::Heat2D> P(h.op, h.u0, options(0.5, 2e-3, 12), h.obj);
    const std::size_t n = P.size(), na = P.na(), ny = P.y0.size();
    const auto v = plus(plus(block(n, 0, na, 3.3, 0.3), block(n, na, 1, 0.2, 1.0)), block(n, na + 1, ny, 4.1, 0.5));
    pde::ThetaIntegrator<pde::Heat2D> integ(h.op, P.opt);
    const auto lin = integ.linearize(h.u0, h.obj);
    const auto g = integ.gradient(h.u0, h.obj, ode::StoreAll{});
    EXPECT_EQ(P.flatten(lin.gradient.wrt_fields, lin.gradient.wrt_parameters, lin.gradient.wrt_initial_state),
              P.flatten(g.wrt_fields, g.wrt_parameters, g.wrt_initial_state));
    for (auto product : {pde::HessianProduct::Exact, pde::HessianProduct::GaussNewton}) {
      const auto at = integ.hessian_vector(lin, P.direction(v), product);
      const auto sweep = integ.hessian_vector(h.u0, h.obj, P.direction(v), ode::StoreAll{}, product);
      EXPECT_EQ(P.flatten(at.wrt_fields, at.wrt_parameters, at.wrt_initial_state),
                P.flatten(sweep.wrt_fields, sweep.wrt_parameters, sweep.wrt_initial_state))
          << to_string(product);
      EXPECT_EQ(at.objective, sweep.objective);
      EXPECT_LT(at.krylov_iterations, 1) << "no forward solves at a linearized point";
      if (product == pde::HessianProduct::Exact) {
        EXPECT_LT(at.adjoint_krylov_iterations, sweep.adjoint_krylov_iterations);  // the μ solves are kept
      } else {
        EXPECT_EQ(at.adjoint_krylov_iterations, sweep.adjoint_krylov_iterations);  // Gauss-Newton has none
      }
    }
    // Another integrator length: refused by name.
    pde::ThetaIntegrator<pde::Heat2D> shorter(h.op, options(0.5, 2e-3, 5));
    EXPECT_THROW(shorter.hessian_vector(lin, P.direction(v)), Error);
  }
  // Newton path: λ_n of the sweep comes from the second-order pass, so
  // the stored μ_n differ from the sweep's in the last bits.
  {
    Burgers b(MPI_COMM_WORLD);
    Problem<pde::Burgers1D> P(b.op, b.u0, options(0.5, 0.02, 10), b.obj);
    const std::size_t n = P.size(), ny = P.y0.size();
    const auto v = plus(block(n, 0, 2, 0.3, 0.05), block(n, 2, ny, 4.1, 0.5));
    pde::ThetaIntegrator<pde::Burgers1D> integ(b.op, P.opt);
    const auto lin = integ.linearize(b.u0, b.obj);
    const auto at = integ.hessian_vector(lin, P.direction(v));
    const auto sweep = P.hvp(v);
    const double e = max_rel(P.flatten(at.wrt_fields, at.wrt_parameters, at.wrt_initial_state), sweep);
    EXPECT_LE(e, kGradientAgreement) << "linearized point vs sweep, Burgers";
    if (P.op.grid().rank() == 0) std::printf("[ info ] burgers: H.v at a linearized point vs the sweep %.1e\n", e);
  }
}
