// The distributed nonlinear::solve (PETSc SNES on a row-distributed
// layout with unstructured ghost lists): 2-D Bratu and a 1-D
// reaction–diffusion problem with 11 parameters, split over the ranks of
// MPI_COMM_WORLD. The solution and the parameter gradient agree with the
// serial native solve of the same residual; the gradient against finite
// differences and by a Taylor test; tangents (Dual, tape forward sweep)
// against adjoints (⟨J v, w⟩ = ⟨v, Jᵀ w⟩); options-database overrides;
// bad input on one rank throws on every rank. Runs on 1, 2 and 3 ranks.
#include "costate/nonlinear/distributed.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <span>
#include <vector>

#include "costate/ad/verification.hpp"
#include "costate/linear/ksp.hpp"  // set_petsc_option
#include "costate/nonlinear/solve.hpp"
#include "costate/tensor/reduce.hpp"

namespace {

using costate::ad::Dual;
using costate::ad::Real;
using costate::ad::Tape;
namespace nonlinear = costate::nonlinear;

// Both solves converge to ‖F‖₂ ≤ 1e-11 (round-off floor of these residuals
// ~1e-12) with ‖(∂F/∂x)⁻¹‖ ≲ 0.1: the distributed (SNES + LU/MUMPS) and the
// serial (native, Eigen SparseLU) solutions differ by ~1e-12, their
// derivatives — the same implicit rule at slightly different x* — by as
// little relative to their size.
constexpr double kBackendTolerance = 1e-10;
// Central differences with relative step 1e-5 of a smooth functional:
// truncation ~1e-10, round-off ε/h·|J| ~ 1e-11 with solves converged to
// 1e-13 relative; relative to the gradient's size.
constexpr double kFiniteDifferenceTolerance = 1e-7;
// ⟨J v, w⟩ vs ⟨v, Jᵀ w⟩: one LU used forwards and transposed; round-off
// of O(n) sums of products, relative to |J v|·|w|.
constexpr double kDualityTolerance = 1e-12;
// Two identical distributed solves need not agree to the bit: MUMPS's
// parallel factorisation and MPI reductions may sum in another order on 3
// ranks; both are converged to 1e-11 on |u| < 1.
constexpr double kRepeatTolerance = 1e-12;
// Dual tangents vs the tape's tangent sweep: the same linear solves.
constexpr double kCrossModeTolerance = 1e-12;

const nonlinear::Options kSnes{.backend = nonlinear::Backend::PetscSnes, .atol = 1e-11, .rtol = 1e-14};
const nonlinear::Options kNative{.atol = 1e-11, .rtol = 1e-14, .jacobian = nonlinear::JacobianMode::Sparse};

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// Reads global unknowns from a rank's extended vector (owned, then sorted
/// ghosts). The serial view owns everything.
struct View {
  std::int64_t first = 0, owned = 0;
  std::vector<std::int64_t> ghosts;  // sorted
  template <class T>
  const T& at(std::span<const T> xe, std::int64_t g) const {
    if (g >= first && g < first + owned) return xe[static_cast<std::size_t>(g - first)];
    const auto it = std::lower_bound(ghosts.begin(), ghosts.end(), g);
    return xe[static_cast<std::size_t>(owned + (it - ghosts.begin()))];
  }
};

/// −Δu + 3 ∂u/∂x = λ eᵘ + σ sin(πx) sin(πy) on the unit square, u = 0 on the
/// boundary, m × m interior points, unknown k = j m + i; p = (λ, σ).
struct Bratu2d {
  explicit Bratu2d(int m_) : m(m_) {}
  int m;
  View view;
  std::int64_t n() const { return std::int64_t{m} * m; }
  /// Neighbours of row k that lie on the grid.
  void neighbours(std::int64_t k, std::vector<std::int64_t>& out) const {
    const std::int64_t i = k % m, j = k / m;
    if (i > 0) out.push_back(k - 1);
    if (i + 1 < m) out.push_back(k + 1);
    if (j > 0) out.push_back(k - m);
    if (j + 1 < m) out.push_back(k + m);
  }
  template <class T>
  void operator()(std::span<const T> xe, std::span<const T> p, std::span<T> r) const {
    using std::exp;
    const double h = 1.0 / (m + 1);
    for (std::int64_t l = 0; l < view.owned; ++l) {
      const std::int64_t k = view.first + l, i = k % m, j = k / m;
      const T zero(0.0);
      const T& w = i > 0 ? view.at(xe, k - 1) : zero;
      const T& e = i + 1 < m ? view.at(xe, k + 1) : zero;
      const T& s = j > 0 ? view.at(xe, k - m) : zero;
      const T& nn = j + 1 < m ? view.at(xe, k + m) : zero;
      const T& c = xe[static_cast<std::size_t>(l)];
      const double src = std::sin(std::numbers::pi * (i + 1) * h) * std::sin(std::numbers::pi * (j + 1) * h);
      // Convection 3 ∂u/∂x makes ∂F/∂x non-symmetric (a transposition
      // mistake in the adjoint would show).
      r[static_cast<std::size_t>(l)] =
          (4.0 * c - w - e - s - nn) / (h * h) + 3.0 * (e - w) / (2.0 * h) - p[0] * exp(c) - p[1] * src;
    }
  }
};

/// −u'' + 2 u' + κ u³ = Σ_s f_s b_s(x) on (0, 1), u = 0 at both ends, n points;
/// b_s the indicator of the s-th of 10 equal segments; p = (κ, f_0..f_9):
/// 11 parameters, more than one Dual chunk (the products with ∂F/∂p go
/// through a private tape).
struct ReactionDiffusion {
  explicit ReactionDiffusion(int n) : n_points(n) {}
  int n_points;
  View view;
  std::int64_t n() const { return n_points; }
  void neighbours(std::int64_t k, std::vector<std::int64_t>& out) const {
    if (k > 0) out.push_back(k - 1);
    if (k + 1 < n_points) out.push_back(k + 1);
  }
  template <class T>
  void operator()(std::span<const T> xe, std::span<const T> p, std::span<T> r) const {
    const double h = 1.0 / (n_points + 1);
    for (std::int64_t l = 0; l < view.owned; ++l) {
      const std::int64_t k = view.first + l;
      const T zero(0.0);
      const T& left = k > 0 ? view.at(xe, k - 1) : zero;
      const T& right = k + 1 < n_points ? view.at(xe, k + 1) : zero;
      const T& c = xe[static_cast<std::size_t>(l)];
      const auto segment = static_cast<std::size_t>(10 * k / n_points);
      r[static_cast<std::size_t>(l)] = (2.0 * c - left - right) / (h * h) + 2.0 * (right - left) / (2.0 * h) +
                                       p[0] * c * c * c - p[1 + segment];
    }
  }
};

/// The problem restricted to this rank's block of a near-even split, with
/// its ghost list, and the layout.
template <class Problem>
std::pair<Problem, nonlinear::DistributedLayout> distribute(Problem problem, MPI_Comm comm) {
  auto layout = nonlinear::DistributedLayout::split(comm, problem.n());
  std::vector<std::int64_t> g;
  for (std::int64_t k = layout.first; k < layout.first + layout.owned; ++k) problem.neighbours(k, g);
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  g.erase(std::remove_if(g.begin(), g.end(),
                         [&](std::int64_t k) { return k >= layout.first && k < layout.first + layout.owned; }),
          g.end());
  layout.ghosts = g;
  problem.view = View{layout.first, layout.owned, g};
  return {problem, layout};
}

/// The same problem owning every unknown (for the serial solve).
template <class Problem>
Problem serial(Problem problem) {
  problem.view = View{0, problem.n(), {}};
  return problem;
}

/// J_r = Σ_{owned k} (h w_k u_k² + [k = n/2] u_k); J = Σ_r J_r.
template <class T>
T local_functional(const std::vector<T>& u, std::int64_t first, std::int64_t n) {
  const double h = 1.0 / (static_cast<double>(n) + 1);
  T j = T(0.0);
  for (std::size_t l = 0; l < u.size(); ++l) {
    const std::int64_t k = first + static_cast<std::int64_t>(l);
    j += h * (1.0 + 0.01 * static_cast<double>(k % 7)) * u[l] * u[l];
    if (k == n / 2) j += u[l];
  }
  return j;
}

/// The whole solution on every rank.
std::vector<double> gather(const std::vector<double>& local, std::int64_t n) {
  const int size = world_size();
  int count = static_cast<int>(local.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size), 0);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 1; r < size; ++r) displs[static_cast<std::size_t>(r)] = displs[static_cast<std::size_t>(r) - 1] + counts[static_cast<std::size_t>(r) - 1];
  std::vector<double> all(static_cast<std::size_t>(n));
  MPI_Allgatherv(local.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                 MPI_COMM_WORLD);
  return all;
}

/// J(p) by the distributed solve on double (collective).
template <class Problem>
double distributed_objective(const Problem& problem, const std::vector<double>& p) {
  auto [local, layout] = distribute(problem, MPI_COMM_WORLD);
  const std::vector<double> u0(static_cast<std::size_t>(layout.owned), 0.0);
  const auto sol = nonlinear::solve(local, layout, u0, p, kSnes);
  EXPECT_TRUE(sol.summary.converged()) << sol.summary.brief_report();
  return costate::global_sum(MPI_COMM_WORLD, local_functional(sol.x, layout.first, layout.global_size));
}

/// ∇J by the tape through one distributed node per rank, summed over ranks.
template <class Problem>
std::vector<double> distributed_gradient(const Problem& problem, const std::vector<double>& p0,
                                         nonlinear::Summary* summary = nullptr) {
  auto [local, layout] = distribute(problem, MPI_COMM_WORLD);
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> p(p0.begin(), p0.end());
  for (auto& v : p) tape.register_input(v);
  const std::vector<double> u0(static_cast<std::size_t>(layout.owned), 0.0);
  const auto sol = nonlinear::solve(local, layout, u0, p, kSnes);
  if (summary) *summary = sol.summary;
  Real j = local_functional(sol.x, layout.first, layout.global_size);
  tape.register_output(j);
  tape.stop_recording();
  EXPECT_EQ(tape.stats().externals, 1u);  // one node whatever the Newton iterations
  j.set_gradient(1.0);
  tape.evaluate();
  const std::vector<double> g = nonlinear::sum_parameter_gradient(MPI_COMM_WORLD, p);
  tape.reset();
  return g;
}

/// ∇J by the tape through the serial native solve (every rank alone).
template <class Problem>
std::vector<double> serial_gradient(const Problem& problem, const std::vector<double>& p0) {
  const Problem whole = serial(problem);
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> p(p0.begin(), p0.end());
  for (auto& v : p) tape.register_input(v);
  const std::vector<double> u0(static_cast<std::size_t>(whole.n()), 0.0);
  const auto sol = nonlinear::solve(whole, u0, p, kNative);
  Real j = local_functional(sol.x, 0, whole.n());
  tape.register_output(j);
  tape.stop_recording();
  j.set_gradient(1.0);
  tape.evaluate();
  std::vector<double> g;
  for (const auto& v : p) g.push_back(v.gradient());
  tape.reset();
  return g;
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double a : v) m = std::max(m, std::abs(a));
  return m;
}

TEST(DistributedSolve, BratuMatchesSerialNativeSolve) {
  const Bratu2d problem{20};
  const std::vector<double> p = {5.0, 1.0};
  auto [local, layout] = distribute(problem, MPI_COMM_WORLD);
  if (world_size() > 1) {
    EXPECT_FALSE(layout.ghosts.empty());
  }
  const std::vector<double> u0(static_cast<std::size_t>(layout.owned), 0.0);
  const auto sol = nonlinear::solve(local, layout, u0, p, kSnes);
  const auto& s = sol.summary;
  ASSERT_TRUE(s.converged()) << s.full_report();
  EXPECT_LE(s.iterations, 6) << s.full_report();
  EXPECT_EQ(s.residual_history.size(), static_cast<std::size_t>(s.iterations) + 1);
  EXPECT_LE(s.final_residual_norm, s.tolerance);
  EXPECT_EQ(s.unknowns, 400);
  EXPECT_EQ(s.jacobian_nonzeros, 400 * 5 - 4 * 20);  // 5-point stencil minus the boundary
  // A local colouring of a 5-point stencil block fits one Dual<double, 8>
  // chunk: one forward evaluation per Jacobian.
  EXPECT_LE(s.jacobian_colors, 8);
  EXPECT_NE(s.message.find("petsc snes newtonls"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("on " + std::to_string(world_size()) + " rank"), std::string::npos) << s.message;

  const Bratu2d whole = serial(problem);
  const auto ref = nonlinear::solve(whole, std::vector<double>(400, 0.0), p, kNative);
  ASSERT_TRUE(ref.summary.converged()) << ref.summary.brief_report();
  const std::vector<double> all = gather(sol.x, 400);
  double worst = 0.0;
  for (std::size_t k = 0; k < all.size(); ++k) worst = std::max(worst, std::abs(all[k] - ref.x[k]));
  if (world_rank() == 0)
    std::printf("  %d rank(s): max |u_distributed - u_serial| = %.2e (|u| <= %.3f), %s\n", world_size(),
                worst, max_abs(ref.x), s.brief_report().c_str());
  for (std::size_t k = 0; k < all.size(); ++k)
    EXPECT_NEAR(all[k], ref.x[k], kBackendTolerance * std::max(1.0, max_abs(ref.x))) << "u[" << k << "]";
}

TEST(DistributedSolve, BratuGradientMatchesSerialFiniteDifferencesAndTaylor) {
  const Bratu2d problem{16};
  const std::vector<double> p0 = {5.0, 1.0};
  nonlinear::Summary summary;
  const std::vector<double> g = distributed_gradient(problem, p0, &summary);
  ASSERT_TRUE(summary.converged()) << summary.brief_report();
  // Every rank holds the same summed gradient (deterministic rank-order sum).
  std::vector<double> g0 = g;
  MPI_Bcast(g0.data(), static_cast<int>(g0.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(g, g0);

  const std::vector<double> gs = serial_gradient(problem, p0);
  if (world_rank() == 0)
    std::printf("  gradient (%.15g, %.15g), serial (%.15g, %.15g)\n", g[0], g[1], gs[0], gs[1]);
  for (std::size_t k = 0; k < g.size(); ++k)
    EXPECT_NEAR(g[k], gs[k], kBackendTolerance * max_abs(gs)) << "dJ/dp[" << k << "]";

  for (std::size_t k = 0; k < p0.size(); ++k) {
    const double h = 1e-5 * std::max(1.0, std::abs(p0[k]));
    std::vector<double> pp = p0, pm = p0;
    pp[k] += h;
    pm[k] -= h;
    const double fd = (distributed_objective(problem, pp) - distributed_objective(problem, pm)) / (2 * h);
    EXPECT_NEAR(g[k], fd, kFiniteDifferenceTolerance * max_abs(g)) << "dJ/dp[" << k << "]";
  }

  const auto taylor = costate::ad::taylor_test(
      [&](const std::vector<double>& p) { return distributed_objective(problem, p); }, p0,
      std::vector<double>{0.7, -0.4}, g);
  if (world_rank() == 0) std::printf("  Taylor fitted order %.3f\n", taylor.fitted_order);
  EXPECT_TRUE(taylor.passed) << taylor.report();
  EXPECT_GE(taylor.fitted_order, 1.9) << taylor.report();
}

TEST(DistributedSolve, ManyParametersGradientMatchesSerialAndFiniteDifferences) {
  const ReactionDiffusion problem{60};
  std::vector<double> p0 = {2.0};
  for (int s = 0; s < 10; ++s) p0.push_back(1.0 + 0.3 * std::sin(1.3 * s));
  const std::vector<double> g = distributed_gradient(problem, p0);
  const std::vector<double> gs = serial_gradient(problem, p0);
  ASSERT_EQ(g.size(), 11u);
  for (std::size_t k = 0; k < g.size(); ++k)
    EXPECT_NEAR(g[k], gs[k], kBackendTolerance * max_abs(gs)) << "dJ/dp[" << k << "]";
  for (std::size_t k : {std::size_t{0}, std::size_t{3}, std::size_t{10}}) {
    const double h = 1e-5 * std::max(1.0, std::abs(p0[k]));
    std::vector<double> pp = p0, pm = p0;
    pp[k] += h;
    pm[k] -= h;
    const double fd = (distributed_objective(problem, pp) - distributed_objective(problem, pm)) / (2 * h);
    EXPECT_NEAR(g[k], fd, kFiniteDifferenceTolerance * max_abs(g)) << "dJ/dp[" << k << "]";
  }
}

/// ⟨J v, w⟩ = ⟨v, Jᵀ w⟩ for J = dx/dp of the distributed solve: J v by Dual
/// tangents and by the tape's forward sweep, Jᵀ w by the reverse sweep.
template <class Problem>
void check_duality(const Problem& problem, const std::vector<double>& p0, const char* name) {
  auto [local, layout] = distribute(problem, MPI_COMM_WORLD);
  const std::size_t np = p0.size(), nl = static_cast<std::size_t>(layout.owned);
  std::vector<double> v(np), w(nl);
  for (std::size_t k = 0; k < np; ++k) v[k] = std::cos(1.7 * static_cast<double>(k) + 0.3);
  for (std::size_t l = 0; l < nl; ++l) w[l] = std::sin(0.37 * static_cast<double>(layout.first + static_cast<std::int64_t>(l)) + 0.1);
  const std::vector<double> u0(nl, 0.0);

  using D = Dual<double, 1>;
  std::vector<D> pd(np);
  for (std::size_t k = 0; k < np; ++k) pd[k] = D(p0[k], {v[k]});
  const auto sd = nonlinear::solve(local, layout, u0, pd, kSnes);
  ASSERT_TRUE(sd.summary.converged()) << sd.summary.brief_report();

  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> pr(p0.begin(), p0.end());
  for (auto& x : pr) tape.register_input(x);
  auto sr = nonlinear::solve(local, layout, u0, pr, kSnes);
  tape.stop_recording();
  for (std::size_t k = 0; k < np; ++k) tape.set_tangent(pr[k].index(), v[k]);
  tape.evaluate_forward();
  double scale = 0.0, jv_w = 0.0, jv_norm2 = 0.0, w_norm2 = 0.0;
  for (std::size_t l = 0; l < nl; ++l) scale = std::max(scale, std::abs(sd.x[l].tangent(0)));
  scale = costate::global_max(MPI_COMM_WORLD, scale);
  for (std::size_t l = 0; l < nl; ++l) {
    EXPECT_NEAR(tape.tangent(sr.x[l].index()), sd.x[l].tangent(0), kCrossModeTolerance * scale)
        << name << " x[" << layout.first + static_cast<std::int64_t>(l) << "]";
    EXPECT_NEAR(sr.x[l].value(), sd.x[l].value(), kRepeatTolerance);
    jv_w += sd.x[l].tangent(0) * w[l];
    jv_norm2 += sd.x[l].tangent(0) * sd.x[l].tangent(0);
    w_norm2 += w[l] * w[l];
    sr.x[l].set_gradient(w[l]);
  }
  tape.evaluate();
  const std::vector<double> jtw = nonlinear::sum_parameter_gradient(MPI_COMM_WORLD, pr);
  tape.reset();
  double v_jtw = 0.0;
  for (std::size_t k = 0; k < np; ++k) v_jtw += v[k] * jtw[k];
  jv_w = costate::global_sum(MPI_COMM_WORLD, jv_w);
  const double bound = std::sqrt(costate::global_sum(MPI_COMM_WORLD, jv_norm2) *
                                 costate::global_sum(MPI_COMM_WORLD, w_norm2));
  if (world_rank() == 0)
    std::printf("  %s: <Jv,w> = %.16e, <v,J^T w> = %.16e, relative gap %.1e\n", name, jv_w, v_jtw,
                std::abs(jv_w - v_jtw) / bound);
  EXPECT_NEAR(jv_w, v_jtw, kDualityTolerance * bound) << name;
}

TEST(DistributedSolve, TangentsAndAdjointsAreDual) {
  check_duality(Bratu2d{16}, {5.0, 1.0}, "bratu (dense dF/dp)");
  std::vector<double> p0 = {2.0};
  for (int s = 0; s < 10; ++s) p0.push_back(1.0 + 0.3 * std::sin(1.3 * s));
  check_duality(ReactionDiffusion{60}, p0, "reaction-diffusion (dF/dp products)");
}

TEST(DistributedSolve, OptionsDatabaseOverridesSnes) {
  auto [local, layout] = distribute(Bratu2d{16}, MPI_COMM_WORLD);
  const std::vector<double> u0(static_cast<std::size_t>(layout.owned), 0.0);
  nonlinear::Options o = kSnes;
  o.options_prefix = "dist_";
  costate::linear::set_petsc_option("-dist_snes_max_it", "1");
  const auto s1 = nonlinear::solve(local, layout, u0, std::vector<double>{5.0, 1.0}, o);
  costate::linear::clear_petsc_option("-dist_snes_max_it");
  EXPECT_EQ(s1.summary.termination, nonlinear::Termination::MaxIterations) << s1.summary.brief_report();
  EXPECT_EQ(s1.summary.iterations, 1);
  // Differentiating it is an error on every rank ...
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  std::vector<Real> p = {5.0, 1.0};
  for (auto& v : p) tape.register_input(v);
  costate::linear::set_petsc_option("-dist_snes_max_it", "1");
  EXPECT_THROW(nonlinear::solve(local, layout, u0, p, o), costate::Error);
  costate::linear::clear_petsc_option("-dist_snes_max_it");
  tape.stop_recording();
  tape.reset();
  // ... and an iterative linear solver from the database still converges
  // to the same root.
  costate::linear::set_petsc_option("-dist_ksp_type", "gmres");
  costate::linear::set_petsc_option("-dist_pc_type", "jacobi");
  costate::linear::set_petsc_option("-dist_ksp_rtol", "1e-12");
  const auto s2 = nonlinear::solve(local, layout, u0, std::vector<double>{5.0, 1.0}, o);
  costate::linear::clear_petsc_option("-dist_ksp_type");
  costate::linear::clear_petsc_option("-dist_pc_type");
  costate::linear::clear_petsc_option("-dist_ksp_rtol");
  ASSERT_TRUE(s2.summary.converged()) << s2.summary.brief_report();
  EXPECT_NE(s2.summary.message.find("gmres/jacobi"), std::string::npos) << s2.summary.message;
  const auto s3 = nonlinear::solve(local, layout, u0, std::vector<double>{5.0, 1.0}, kSnes);
  for (std::size_t l = 0; l < s2.x.size(); ++l)
    EXPECT_NEAR(s2.x[l], s3.x[l], kBackendTolerance * std::max(1.0, max_abs(s3.x)));
}

TEST(DistributedSolve, BadInputThrowsOnEveryRank) {
  auto [local, layout] = distribute(Bratu2d{8}, MPI_COMM_WORLD);
  const std::vector<double> u0(static_cast<std::size_t>(layout.owned), 0.0);
  const std::vector<double> p = {1.0, 1.0};
  // Serial backend.
  nonlinear::Options native = kSnes;
  native.backend = nonlinear::Backend::Native;
  EXPECT_THROW(nonlinear::solve(local, layout, u0, p, native), costate::Error);
  // x0 of the wrong size on the last rank only.
  std::vector<double> bad_u0 = u0;
  if (world_rank() == world_size() - 1) bad_u0.push_back(0.0);
  EXPECT_THROW(nonlinear::solve(local, layout, bad_u0, p, kSnes), costate::Error);
  // A ghost this rank owns, on rank 0 only.
  auto bad = layout;
  if (world_rank() == 0) bad.ghosts.push_back(bad.first);
  EXPECT_THROW(nonlinear::solve(local, bad, u0, p, kSnes), costate::Error);
  // Blocks that do not tile [0, n).
  auto gap = layout;
  gap.global_size += 1;
  EXPECT_THROW(nonlinear::solve(local, gap, u0, p, kSnes), costate::Error);
  // Parameters that are not replicated.
  if (world_size() > 1) {
    std::vector<double> q = p;
    if (world_rank() == 1) q[0] = 1.5;
    EXPECT_THROW(nonlinear::solve(local, layout, u0, q, kSnes), costate::Error);
  }
  // After all of that, a good solve still works (nothing left half-collective).
  EXPECT_TRUE(nonlinear::solve(local, layout, u0, p, kSnes).summary.converged());
}

}  // namespace
