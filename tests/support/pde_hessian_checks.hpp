#pragma once
// The derivative checks shared by the PDE Hessian tests (θ:
// theta_hessian_test.cpp, explicit RK: explicit_rk_test.cpp): a point m =
// (a, q, y_0) of a model with its objective, gradient and H·v through an
// integrator (Problem<Model, Integ>), the checks of an exact product
// (check_hessian: differences of gradients, Taylor order 3, symmetry, the
// sweep's gradient) and of the checkpoint schedules (check_schedules:
// identical bits), and the two fixtures (Burgers 1-D, Heat 2-D with κ).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/pde/models.hpp"
#include "costate/pde/theta.hpp"
#include "support/pde_fixtures.hpp"

namespace costate::test {

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


inline double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// A point m = (a, q, y_0) of any model, in natural order (gathered), with
/// the operations the checks need: set it on the operator, flatten results.
template <class Model, class Integ = pde::ThetaIntegrator<Model>>
struct Problem {
  using Op = pde::Operator<Model>;
  using Options = std::decay_t<decltype(std::declval<const Integ&>().options())>;
  Op& op;
  pde::GlobalVector& u0;
  Options opt;
  const pde::Objective& obj;
  std::vector<double> a0, q0, y0;  // natural order

  Problem(Op& o, pde::GlobalVector& u, const Options& th, const pde::Objective& ob)
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
    Integ integ(op, opt);
    auto u = op.grid().create_global();
    deep_copy(u, u0);
    integ.integrate(u);
    restore();
    return obj.evaluate(op.grid(), u, nullptr);
  }
  std::vector<double> gradient(const std::vector<double>& m) {
    set(m);
    Integ integ(op, opt);
    const auto g = integ.gradient(u0, obj, ode::StoreAll{});
    restore();
    return flatten(g.wrt_fields, g.wrt_parameters, g.wrt_initial_state);
  }
  pde::ThetaHessianVector hvp_result(const std::vector<double>& v, const ode::Checkpointing& c = ode::StoreAll{},
                                     pde::HessianProduct product = pde::HessianProduct::Exact) {
    Integ integ(op, opt);
    return integ.hessian_vector(u0, obj, direction(v), c, product);
  }
  std::vector<double> hvp(const std::vector<double>& v, const ode::Checkpointing& c = ode::StoreAll{},
                          pde::HessianProduct product = pde::HessianProduct::Exact) {
    const auto r = hvp_result(v, c, product);
    return flatten(r.wrt_fields, r.wrt_parameters, r.wrt_initial_state);
  }
};

/// Every check of the exact product along v (and symmetry against u).
template <class Model, class Integ>
void check_hessian(Problem<Model, Integ>& P, const std::vector<double>& v, const std::vector<double>& u,
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
    d.boundary = {pde::Boundary::Dirichlet, pde::Boundary::Periodic, pde::Boundary::Periodic};
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
    d.boundary = {pde::Boundary::Dirichlet, pde::Boundary::Neumann, pde::Boundary::Periodic};
    d.dirichlet_value = 0.1;
    return d;
  }
};

/// Directions in natural order: a block of the flat vector set, the rest 0.
inline std::vector<double> block(std::size_t n, std::size_t begin, std::size_t count, double salt, double amplitude) {
  std::vector<double> v(n, 0.0);
  for (std::size_t k = 0; k < count; ++k) v[begin + k] = amplitude * wave(static_cast<std::int64_t>(k), salt);
  return v;
}

inline std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (std::size_t k = 0; k < a.size(); ++k) a[k] += b[k];
  return a;
}

/// Under MPI only the combined direction (every part at once) is checked
/// against differences of gradients and Taylor: each check costs ~10
/// distributed solves of the whole problem, slow on oversubscribed ranks.
inline bool parts_too() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size == 1;
}


/// A path prefix shared by all ranks (rank 0's pid) in the temp directory.
inline std::string shared_prefix(const std::string& name) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("costate_hvp_" + std::to_string(pid) + "_" + name)).string();
}

template <class Model, class Integ>
void check_schedules(Problem<Model, Integ>& P, const std::vector<double>& v, const char* label) {
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

}  // namespace costate::test
