// pde::Prior — L2, H1 and BiLaplacian priors on a distributed cell field,
// on 1, 2 and 4 ranks. Against an independent dense reference built here
// from the finite-volume formulas (natural order, serial): A x, A⁻¹ x and
// the covariance action 𝐑⁻¹ x = A⁻¹ M A⁻¹ x; value and gradient against
// central differences, the Hessian action against differences of
// gradients; the H1 value against the explicit face sum ½(γ‖∇m‖² + δ‖m‖²);
// the BiLaplacian samples' variance against the dense covariance's
// diagonal within sampling error, and the same sample on every rank count;
// the pointwise variance on a periodic square against its Fourier value and
// the continuum Matérn value 1/(4πγδ).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "costate/pde/prior.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

// Products with A: the same sums in another order: round-off.
constexpr double kProductTol = 1e-13;
// Solves with A by CG to rtol 1e-12 vs Gaussian elimination (κ(A) ~ 1e3):
// ~1e-10 relative seen.
constexpr double kSolveTol = 1e-8;
// Central differences of a quadratic are exact up to round-off
// (ε_machine |R| / ε with ε = 1e-3, |R| ~ 10): ~1e-11.
constexpr double kFdStep = 1e-3;
constexpr double kFdTol = 1e-8;
// The sample variance of N normal draws has relative standard error
// √(2/N) = 0.071; the mean ratio over kVarianceCells correlated cells is
// allowed 4 of them (no reduction by √cells assumed). A wrong scaling
// (a missing M, V = 1e-2) is off by orders of magnitude.
constexpr int kSamples = 400;
constexpr int kVarianceCells = 6;
constexpr double kVarianceTol = 4.0 * 0.070710678118654752;

pde::GridSpec spec(std::array<Boundary, 3> b) {
  pde::GridSpec s;
  s.dim = 2;
  s.cells = {12, 10, 1};
  s.extent = {{{0.0, 1.2}, {0.0, 1.0}, {0.0, 1.0}}};
  s.boundary = b;
  s.dof = 1;
  return s;
}

/// Dense A = γK + δM in natural order (x fastest), from the formula.
std::vector<double> dense_a(const pde::GridSpec& s, double gamma, double delta) {
  const std::int64_t nx = s.cells[0], ny = s.cells[1], n = nx * ny;
  const double hx = (s.extent[0][1] - s.extent[0][0]) / static_cast<double>(nx);
  const double hy = (s.extent[1][1] - s.extent[1][0]) / static_cast<double>(ny);
  const double v = hx * hy;
  std::vector<double> a(static_cast<std::size_t>(n * n), 0.0);
  auto at = [&](std::int64_t r, std::int64_t c) -> double& { return a[static_cast<std::size_t>(r * n + c)]; };
  for (std::int64_t j = 0; j < ny; ++j)
    for (std::int64_t i = 0; i < nx; ++i) {
      const std::int64_t p = j * nx + i;
      at(p, p) += delta * v;
      const std::int64_t d[4][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}};
      for (const auto& o : d) {
        std::int64_t ii = i + o[0], jj = j + o[1];
        const bool xaxis = o[0] != 0;
        const Boundary b = s.boundary[xaxis ? 0 : 1];
        const std::int64_t len = xaxis ? nx : ny;
        std::int64_t& idx = xaxis ? ii : jj;
        if (idx < 0 || idx >= len) {
          if (b != Boundary::Periodic) continue;
          idx = (idx + len) % len;
        }
        const double c = gamma * v / (xaxis ? hx * hx : hy * hy);
        at(p, p) += c;
        at(p, jj * nx + ii) -= c;
      }
    }
  return a;
}

std::vector<double> mult(const std::vector<double>& a, const std::vector<double>& x) {
  const std::size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t c = 0; c < n; ++c) y[r] += a[r * n + c] * x[c];
  return y;
}

/// x = A⁻¹ b by Gaussian elimination with partial pivoting.
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t piv = k;
    for (std::size_t r = k + 1; r < n; ++r)
      if (std::abs(a[r * n + k]) > std::abs(a[piv * n + k])) piv = r;
    for (std::size_t c = 0; c < n; ++c) std::swap(a[k * n + c], a[piv * n + c]);
    std::swap(b[k], b[piv]);
    for (std::size_t r = k + 1; r < n; ++r) {
      const double f = a[r * n + k] / a[k * n + k];
      for (std::size_t c = k; c < n; ++c) a[r * n + c] -= f * a[k * n + c];
      b[r] -= f * b[k];
    }
  }
  std::vector<double> x(n);
  for (std::size_t k = n; k-- > 0;) {
    double s = b[k];
    for (std::size_t c = k + 1; c < n; ++c) s -= a[k * n + c] * x[c];
    x[k] = s / a[k * n + k];
  }
  return x;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0, s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}

std::vector<double> wave(std::size_t n, double salt) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37 * static_cast<double>(i) + salt) + 0.3 * salt;
  return v;
}

double ndot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

constexpr double kGamma = 0.03, kDelta = 2.0;

class PriorTest : public ::testing::TestWithParam<std::array<Boundary, 3>> {};

TEST_P(PriorTest, DenseReferenceAndDerivatives) {
  const pde::GridSpec s = spec(GetParam());
  pde::Grid g(MPI_COMM_WORLD, s);
  const std::size_t n = static_cast<std::size_t>(g.global_size());
  const double v = g.spacing(0) * g.spacing(1);
  const std::vector<double> A = dense_a(s, kGamma, kDelta);
  auto to = [&](const std::vector<double>& x) {
    auto y = g.create_global();
    g.scatter(x, y);
    return y;
  };
  const std::vector<double> mean = wave(n, 0.4);
  const std::vector<double> m = wave(n, 1.3), dir = wave(n, 2.1);
  for (pde::PriorKind kind : {pde::PriorKind::L2, pde::PriorKind::H1, pde::PriorKind::BiLaplacian}) {
    SCOPED_TRACE(pde::to_string(kind));
    pde::Prior prior(g, {.kind = kind, .gamma = kGamma, .delta = kDelta}, to(mean));
    // Dense 𝐑 x and 𝐑⁻¹ x.
    std::vector<double> rx, rinv_x;
    if (kind == pde::PriorKind::L2) {
      rx = dir;
      rinv_x = dir;
      for (std::size_t i = 0; i < n; ++i) {
        rx[i] *= kDelta * v;
        rinv_x[i] /= kDelta * v;
      }
    } else if (kind == pde::PriorKind::H1) {
      rx = mult(A, dir);
      rinv_x = solve(A, dir);
    } else {
      std::vector<double> ax = mult(A, dir);
      for (double& e : ax) e /= v;
      rx = mult(A, ax);
      std::vector<double> y = solve(A, dir);
      for (double& e : y) e *= v;
      rinv_x = solve(A, y);
    }
    auto out = g.create_global();
    prior.apply(to(dir), out);
    EXPECT_LT(max_rel(g.gather(out), rx), kProductTol);
    prior.apply_inverse(to(dir), out);
    EXPECT_LT(max_rel(g.gather(out), rinv_x), kSolveTol);
    if (kind != pde::PriorKind::L2) {
      prior.apply_a(to(dir), out);
      EXPECT_LT(max_rel(g.gather(out), mult(A, dir)), kProductTol);
      prior.solve_a(to(dir), out);
      EXPECT_LT(max_rel(g.gather(out), solve(A, dir)), kSolveTol);
    }
    // Value: ½ dᵀ𝐑d with the dense 𝐑 (d = m − m₀).
    std::vector<double> d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = m[i] - mean[i];
    std::vector<double> rd;
    if (kind == pde::PriorKind::L2) {
      rd = d;
      for (double& e : rd) e *= kDelta * v;
    } else if (kind == pde::PriorKind::H1) {
      rd = mult(A, d);
    } else {
      std::vector<double> ad = mult(A, d);
      for (double& e : ad) e /= v;
      rd = mult(A, ad);
    }
    const double value = prior.value(to(m));
    EXPECT_NEAR(value, 0.5 * ndot(d, rd), kProductTol * 10.0 * std::abs(value));
    // Gradient vs central differences; Hessian vs differences of gradients.
    auto grad = g.create_global();
    EXPECT_NEAR(prior.gradient(to(m), grad), value, kProductTol * 10.0 * std::abs(value));
    std::vector<double> mp(m), mm(m);
    for (std::size_t i = 0; i < n; ++i) {
      mp[i] += kFdStep * dir[i];
      mm[i] -= kFdStep * dir[i];
    }
    const double fd = (prior.value(to(mp)) - prior.value(to(mm))) / (2.0 * kFdStep);
    const double gv = ndot(g.gather(grad), dir);
    EXPECT_NEAR(fd, gv, kFdTol * std::abs(gv));
    auto gp = g.create_global(), gm = g.create_global();
    prior.gradient(to(mp), gp);
    prior.gradient(to(mm), gm);
    const std::vector<double> gpn = g.gather(gp), gmn = g.gather(gm);
    std::vector<double> hfd(n);
    for (std::size_t i = 0; i < n; ++i) hfd[i] = (gpn[i] - gmn[i]) / (2.0 * kFdStep);
    prior.apply(to(dir), out);
    EXPECT_LT(max_rel(hfd, g.gather(out)), kFdTol);
    if (kind == pde::PriorKind::H1) {
      // ½(γ Σ_faces V (Δd/h)² + δ Σ V d²): the discrete H1 norm itself.
      double faces = 0.0, cells = 0.0;
      const std::int64_t nx = s.cells[0], ny = s.cells[1];
      for (std::int64_t j = 0; j < ny; ++j)
        for (std::int64_t i = 0; i < nx; ++i) {
          const double dp = d[static_cast<std::size_t>(j * nx + i)];
          cells += v * dp * dp;
          const bool px = s.boundary[0] == Boundary::Periodic, py = s.boundary[1] == Boundary::Periodic;
          if (i + 1 < nx || px) {
            const double de = d[static_cast<std::size_t>(j * nx + (i + 1) % nx)] - dp;
            faces += v * de * de / (g.spacing(0) * g.spacing(0));
          }
          if (j + 1 < ny || py) {
            const double dn = d[static_cast<std::size_t>(((j + 1) % ny) * nx + i)] - dp;
            faces += v * dn * dn / (g.spacing(1) * g.spacing(1));
          }
        }
      EXPECT_NEAR(value, 0.5 * (kGamma * faces + kDelta * cells), kProductTol * 10.0 * std::abs(value));
    }
  }
}

TEST_P(PriorTest, BiLaplacianSamplesHaveTheDenseCovariance) {
  const pde::GridSpec s = spec(GetParam());
  pde::Grid g(MPI_COMM_WORLD, s);
  const std::size_t n = static_cast<std::size_t>(g.global_size());
  const double v = g.spacing(0) * g.spacing(1);
  const std::vector<double> A = dense_a(s, kGamma, kDelta);
  auto zero = g.create_global();
  pde::Prior prior(g, {.kind = pde::PriorKind::BiLaplacian, .gamma = kGamma, .delta = kDelta}, zero);
  // Γ_pp = e_pᵀ A⁻¹ M A⁻¹ e_p = V ‖A⁻¹ e_p‖² (A symmetric).
  const std::int64_t cells[kVarianceCells] = {13, 27, 40, 58, 75, 101};
  std::vector<double> sum2(kVarianceCells, 0.0), var(kVarianceCells);
  for (int c = 0; c < kVarianceCells; ++c) {
    std::vector<double> e(n, 0.0);
    e[static_cast<std::size_t>(cells[c])] = 1.0;
    const std::vector<double> col = solve(A, e);
    var[static_cast<std::size_t>(c)] = v * ndot(col, col);
  }
  auto x = g.create_global();
  for (int k = 0; k < kSamples; ++k) {
    prior.sample(static_cast<std::uint64_t>(k) + 1, x);
    const std::vector<double> xn = g.gather(x);
    for (int c = 0; c < kVarianceCells; ++c) {
      const double e = xn[static_cast<std::size_t>(cells[c])];
      sum2[static_cast<std::size_t>(c)] += e * e;
    }
  }
  double rel = 0.0;
  for (int c = 0; c < kVarianceCells; ++c)
    rel += (sum2[static_cast<std::size_t>(c)] / kSamples) / var[static_cast<std::size_t>(c)];
  rel /= kVarianceCells;
  EXPECT_NEAR(rel, 1.0, kVarianceTol);
  // The same sample on any rank count: a serial prior on MPI_COMM_SELF.
  pde::Grid serial(MPI_COMM_SELF, s);
  auto zs = serial.create_global();
  pde::Prior ps(serial, {.kind = pde::PriorKind::BiLaplacian, .gamma = kGamma, .delta = kDelta}, zs);
  auto xs = serial.create_global();
  ps.sample(7, xs);
  prior.sample(7, x);
  EXPECT_LT(max_rel(g.gather(x), serial.gather(xs)), kSolveTol);
}

// Prior::pointwise_variance (the spectral formula, no solves) against the
// diagonal of the dense 𝐑⁻¹ from Gaussian elimination (every column of
// A⁻¹; Γ_pp = V ‖A⁻¹e_p‖² for BiLaplacian, (A⁻¹)_pp for H1, 1/(δV) for
// L2): both round-off (~1e-14 seen), 1e-10 asserted.
constexpr double kSpectralTol = 1e-10;

TEST_P(PriorTest, PointwiseVarianceIsTheDenseDiagonal) {
  const pde::GridSpec s = spec(GetParam());
  pde::Grid g(MPI_COMM_WORLD, s);
  const std::size_t n = static_cast<std::size_t>(g.global_size());
  const double v = g.spacing(0) * g.spacing(1);
  const std::vector<double> A = dense_a(s, kGamma, kDelta);
  std::vector<double> h1(n), bilap(n);
  for (std::size_t p = 0; p < n; ++p) {
    std::vector<double> e(n, 0.0);
    e[p] = 1.0;
    const std::vector<double> col = solve(A, e);
    h1[p] = col[p];
    bilap[p] = v * ndot(col, col);
  }
  auto zero = g.create_global(), var = g.create_global();
  for (pde::PriorKind kind : {pde::PriorKind::L2, pde::PriorKind::H1, pde::PriorKind::BiLaplacian}) {
    SCOPED_TRACE(pde::to_string(kind));
    pde::Prior prior(g, {.kind = kind, .gamma = kGamma, .delta = kDelta}, zero);
    prior.pointwise_variance(var);
    const std::vector<double> ref = kind == pde::PriorKind::L2   ? std::vector<double>(n, 1.0 / (kDelta * v))
                                    : kind == pde::PriorKind::H1 ? h1
                                                                 : bilap;
    const double err = max_rel(g.gather(var), ref);
    if (g.rank() == 0) std::printf("%s pointwise variance vs dense: %.2e\n", pde::to_string(kind).c_str(), err);
    EXPECT_LT(err, kSpectralTol);
  }
}

// The same in 1-D and 3-D (mixed boundaries) against CG solves, at a few
// cells: Γ_pp = e_pᵀ 𝐑⁻¹ e_p (CG to rtol 1e-12 on two solves with A).
TEST(Prior, PointwiseVarianceIn1dAnd3dIsTheSolvedDiagonal) {
  for (int dim : {1, 3}) {
    SCOPED_TRACE(dim);
    pde::GridSpec s;
    s.dim = dim;
    s.cells = dim == 1 ? std::array<std::int64_t, 3>{40, 1, 1} : std::array<std::int64_t, 3>{6, 5, 7};
    s.extent = {{{0.0, 1.0}, {-0.5, 0.5}, {0.0, 1.4}}};
    s.boundary = {Boundary::Neumann, Boundary::Periodic, Boundary::Dirichlet};
    pde::Grid g(MPI_COMM_WORLD, s);
    const std::size_t n = static_cast<std::size_t>(g.global_size());
    auto zero = g.create_global(), var = g.create_global(), e = g.create_global(), col = g.create_global();
    for (pde::PriorKind kind : {pde::PriorKind::H1, pde::PriorKind::BiLaplacian}) {
      pde::Prior prior(g, {.kind = kind, .gamma = kGamma, .delta = kDelta}, zero);
      prior.pointwise_variance(var);
      const std::vector<double> got = g.gather(var);
      for (std::size_t p : {std::size_t{0}, n / 3, n / 2 + 1, n - 1}) {
        std::vector<double> unit(n, 0.0);
        unit[p] = 1.0;
        g.scatter(unit, e);
        prior.apply_inverse(e, col);
        const double want = g.gather(col)[p];
        EXPECT_NEAR(got[p], want, kSolveTol * want) << pde::to_string(kind) << " cell " << p;
      }
    }
  }
}

// The pointwise variance of the BiLaplacian prior away from boundaries (a
// periodic square, so there are none), against two references:
//   - the exact discrete value by Fourier analysis of the periodic A:
//     Γ_pp = (1/(n² V)) Σ_k (γ λ_k + δ)⁻²,  λ_k = Σ_d (4/h²) sin²(π k_d / n);
//   - the continuum Matérn (ν = 1) value 1/(4πγδ) of (−γΔ + δ)⁻² in 2-D.
// Discrete vs Fourier: CG to rtol 1e-12 on one column. Discrete vs
// continuum: the lattice resolves the length √(γ/δ) = 0.2 with h = 1/32
// (second order: ~(h/ℓ)² ~ 2 %) and the torus of side 2 = 10 lengths
// adds e^{-10}-small images: 5 %.
constexpr double kFourierTol = 1e-8;
constexpr double kContinuumTol = 0.05;

TEST(BiLaplacianPrior, PointwiseVarianceIsTheMaternValue) {
  constexpr double gamma = 0.04, delta = 1.0;
  pde::GridSpec s;
  s.cells = {64, 64, 1};
  s.extent = {{{0.0, 2.0}, {0.0, 2.0}, {0.0, 1.0}}};
  s.boundary = {Boundary::Periodic, Boundary::Periodic, Boundary::Periodic};
  pde::Grid g(MPI_COMM_WORLD, s);
  auto zero = g.create_global();
  pde::Prior prior(g, {.kind = pde::PriorKind::BiLaplacian, .gamma = gamma, .delta = delta}, zero);
  const std::size_t n = static_cast<std::size_t>(g.global_size());
  const std::size_t p = 17 * 64 + 40;
  std::vector<double> e(n, 0.0);
  e[p] = 1.0;
  auto ev = g.create_global(), col = g.create_global();
  g.scatter(e, ev);
  prior.apply_inverse(ev, col);
  const double discrete = g.gather(col)[p];
  const double h = g.spacing(0), v = h * h;
  double fourier = 0.0;
  for (int kx = 0; kx < 64; ++kx)
    for (int ky = 0; ky < 64; ++ky) {
      const double sx = std::sin(M_PI * kx / 64.0), sy = std::sin(M_PI * ky / 64.0);
      const double lambda = 4.0 / (h * h) * (sx * sx + sy * sy);
      fourier += 1.0 / ((gamma * lambda + delta) * (gamma * lambda + delta));
    }
  fourier /= 64.0 * 64.0 * v;
  const double continuum = 1.0 / (4.0 * M_PI * gamma * delta);
  if (g.rank() == 0) std::printf("variance: discrete %.10g, Fourier %.10g, continuum %.10g\n", discrete, fourier, continuum);
  EXPECT_NEAR(discrete, fourier, kFourierTol * fourier);
  auto var = g.create_global();
  prior.pointwise_variance(var);
  EXPECT_NEAR(g.gather(var)[p], fourier, kSpectralTol * fourier);
  EXPECT_NEAR(discrete, continuum, kContinuumTol * continuum);
}

INSTANTIATE_TEST_SUITE_P(Boundaries, PriorTest,
                         ::testing::Values(std::array<Boundary, 3>{Boundary::Neumann, Boundary::Dirichlet,
                                                                   Boundary::Periodic},
                                           std::array<Boundary, 3>{Boundary::Periodic, Boundary::Neumann,
                                                                   Boundary::Periodic}));

TEST(PriorOptions, RefusesBadSettings) {
  pde::PriorOptions o{.kind = pde::PriorKind::BiLaplacian, .gamma = 0.0, .delta = 1.0};
  try {
    o.validate();
    ADD_FAILURE() << "gamma = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gamma = 0 must be > 0 for the bilaplacian prior"), std::string::npos)
        << e.what();
  }
  o.gamma = 1.0;
  o.delta = -1.0;
  EXPECT_THROW(o.validate(), Error);
  o = {.kind = pde::PriorKind::L2, .gamma = 0.0, .delta = 1.0};
  EXPECT_NO_THROW(o.validate());  // L2 has no gradient term
  EXPECT_THROW(pde::prior_kind_from_string("matern"), Error);
  pde::Grid g(MPI_COMM_WORLD, spec({Boundary::Neumann, Boundary::Neumann, Boundary::Periodic}));
  auto zero = g.create_global();
  pde::Prior l2(g, o, zero);
  EXPECT_THROW(l2.sample(1, zero), Error);
}

}  // namespace
