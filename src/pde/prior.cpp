// pde::Prior (prior.hpp): L2, H1 and BiLaplacian priors on a cell field.
#include "costate/pde/prior.hpp"

#include <array>
#include <cmath>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::pde {

std::string to_string(PriorKind k) {
  switch (k) {
    case PriorKind::L2: return "l2";
    case PriorKind::H1: return "h1";
    default: return "bilaplacian";
  }
}

PriorKind prior_kind_from_string(const std::string& name) {
  if (name == "l2") return PriorKind::L2;
  if (name == "h1") return PriorKind::H1;
  if (name == "bilaplacian") return PriorKind::BiLaplacian;
  throw Error("pde::PriorKind: unknown prior \"" + name + "\"; expected l2, h1 or bilaplacian");
}

void PriorOptions::validate() const {
  COSTATE_CHECK(std::isfinite(delta) && delta > 0.0,
                "pde::PriorOptions::delta = " << costate::detail::format_value(delta) << " must be > 0");
  if (kind != PriorKind::L2)
    COSTATE_CHECK(std::isfinite(gamma) && gamma > 0.0, "pde::PriorOptions::gamma = "
                                                           << costate::detail::format_value(gamma)
                                                           << " must be > 0 for the " << to_string(kind)
                                                           << " prior");
  ksp.validate();
}

namespace {

std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A standard normal number from (seed, global index): splitmix64 twice,
/// then Box–Muller. The same on every rank count.
double hashed_normal(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t a = splitmix64(seed * 0x100000001b3ULL ^ splitmix64(2 * index));
  const std::uint64_t b = splitmix64(a ^ splitmix64(2 * index + 1));
  const double u1 = (static_cast<double>(a >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(b >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

Prior::Prior(const Grid& grid, const PriorOptions& options, const GlobalVector& mean)
    : grid_(&grid), options_(options) {
  options_.validate();
  COSTATE_CHECK(grid.dof() == 1, "pde::Prior: a prior is on a field with one value per cell; the grid has dof "
                                     << grid.dof());
  COSTATE_CHECK_EQ(mean.size(), grid.owned_size(), "pde::Prior: the mean is not a field of this grid");
  mean_ = grid.create_global("pde::prior mean");
  deep_copy(mean_, mean);
  work_ = grid.create_global("pde::prior work");
  work2_ = grid.create_global("pde::prior work 2");
  for (int d = 0; d < grid.dim(); ++d) volume_ *= grid.spacing(d);
  if (options_.kind == PriorKind::L2) return;
  // A = γK + δM, row by row in local numbering.
  a_ = std::make_unique<Matrix>(grid);
  const Box& o = grid.owned();
  std::vector<std::int64_t> cols;
  std::vector<double> vals;
  for (std::int64_t k = o.start[2]; k < o.start[2] + o.count[2]; ++k)
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i) {
        cols.clear();
        vals.clear();
        double diagonal = options_.delta * volume_;
        const std::int64_t at[3] = {i, j, k};
        for (int d = 0; d < grid.dim(); ++d) {
          const double c = options_.gamma * volume_ / (grid.spacing(d) * grid.spacing(d));
          for (int side : {-1, 1}) {
            std::int64_t nb[3] = {i, j, k};
            nb[d] += side;
            if (!grid.periodic(d) && (nb[d] < 0 || nb[d] >= grid.cells(d))) continue;  // no flux
            if (grid.periodic(d) && grid.cells(d) == 1) continue;
            diagonal += c;
            cols.push_back(grid.local_index(0, nb[0], nb[1], nb[2]));
            vals.push_back(-c);
          }
        }
        cols.push_back(grid.local_index(0, at[0], at[1], at[2]));
        vals.push_back(diagonal);
        a_->set_row(grid.local_index(0, i, j, k), cols, vals);
      }
  a_->assemble();
  solver_ = std::make_unique<KrylovSolver>(grid, options_.ksp);
  solver_->set_operator(*a_);
}

Prior::~Prior() = default;
Prior::Prior(Prior&&) noexcept = default;
Prior& Prior::operator=(Prior&&) noexcept = default;

void Prior::apply_a(const GlobalVector& v, const GlobalVector& out) const {
  COSTATE_CHECK(a_ != nullptr, "pde::Prior::apply_a: the l2 prior has no elliptic operator");
  a_->mult(v, out);
}

void Prior::solve_a(const GlobalVector& v, const GlobalVector& out) const {
  COSTATE_CHECK(solver_ != nullptr, "pde::Prior::solve_a: the l2 prior has no elliptic operator");
  const linear::Summary s = solver_->solve(v, out, false);
  ++solves_;
  krylov_iterations_ += s.iterations;
  COSTATE_CHECK(s.success(), "pde::Prior: the KSP solve with A = gamma K + delta M failed ("
                                 << s.message << "); raise -prior_ksp_max_it or choose -prior_pc_type");
}

void Prior::apply(const GlobalVector& v, const GlobalVector& out) const {
  COSTATE_CHECK_EQ(v.size(), grid_->owned_size(), "pde::Prior::apply: not a field of the prior's grid");
  switch (options_.kind) {
    case PriorKind::L2: scale(out, options_.delta * volume_, v); return;
    case PriorKind::H1: a_->mult(v, out); return;
    case PriorKind::BiLaplacian:
      a_->mult(v, work2_);
      scale(work2_, 1.0 / volume_, work2_);
      a_->mult(work2_, out);
      return;
  }
}

void Prior::apply_inverse(const GlobalVector& v, const GlobalVector& out) const {
  COSTATE_CHECK_EQ(v.size(), grid_->owned_size(), "pde::Prior::apply_inverse: not a field of the prior's grid");
  switch (options_.kind) {
    case PriorKind::L2: scale(out, 1.0 / (options_.delta * volume_), v); return;
    case PriorKind::H1: solve_a(v, out); return;
    case PriorKind::BiLaplacian:
      solve_a(v, work2_);
      scale(work2_, volume_, work2_);
      solve_a(work2_, out);
      return;
  }
}

double Prior::value(const GlobalVector& m) const {
  COSTATE_CHECK_EQ(m.size(), grid_->owned_size(), "pde::Prior::value: not a field of the prior's grid");
  linear_sum(work_, 1.0, m, -1.0, mean_);
  if (options_.kind == PriorKind::BiLaplacian) {  // ½ ‖A d‖²_{M⁻¹}
    a_->mult(work_, work2_);
    return 0.5 * dot(work2_, work2_) / volume_;
  }
  GlobalVector r = work2_;
  apply(work_, r);
  return 0.5 * dot(work_, r);
}

double Prior::gradient(const GlobalVector& m, const GlobalVector& g) const {
  COSTATE_CHECK_EQ(m.size(), grid_->owned_size(), "pde::Prior::gradient: not a field of the prior's grid");
  linear_sum(work_, 1.0, m, -1.0, mean_);
  apply(work_, g);
  return 0.5 * dot(work_, g);
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ (stream + 1)) ^ (index + 0x51ed2701ULL));
}

void standard_normal_field(const Grid& g, std::uint64_t seed, const GlobalVector& out) {
  COSTATE_CHECK(g.dof() == 1, "pde::standard_normal_field: a field with one value per cell; the grid has dof "
                                  << g.dof());
  COSTATE_CHECK_EQ(out.size(), g.owned_size(), "pde::standard_normal_field: not a field of the grid");
  const Box& o = g.owned();
  std::size_t e = 0;
  for (std::int64_t k = o.start[2]; k < o.start[2] + o.count[2]; ++k)
    for (std::int64_t j = o.start[1]; j < o.start[1] + o.count[1]; ++j)
      for (std::int64_t i = o.start[0]; i < o.start[0] + o.count[0]; ++i, ++e) {
        const auto global = static_cast<std::uint64_t>((k * g.cells(1) + j) * g.cells(0) + i);
        out[e] = hashed_normal(seed, global);
      }
}

void Prior::sample(std::uint64_t seed, const GlobalVector& out) const {
  COSTATE_CHECK(options_.kind == PriorKind::BiLaplacian,
                "pde::Prior::sample: samples are drawn from the bilaplacian prior only (this one is "
                    << to_string(options_.kind) << ")");
  standard_normal_field(*grid_, seed, work_);
  scale(work_, std::sqrt(volume_), work_);
  solve_a(work_, out);
  axpy(1.0, mean_, out);
}

void Prior::pointwise_variance(const GlobalVector& out) const {
  const Grid& g = *grid_;
  COSTATE_CHECK_EQ(out.size(), g.owned_size(), "pde::Prior::pointwise_variance: not a field of the prior's grid");
  const double dv = options_.delta * volume_;
  if (options_.kind == PriorKind::L2) {
    fill(out, 1.0 / dv);
    return;
  }
  // The 1-D eigenvalues mu[d][k] of axis d's share of γK and the squared
  // eigenvector entries w[d][k n_d + i] = φ_k(i)².
  std::array<std::vector<double>, 3> mu, w;
  std::array<std::int64_t, 3> n{};
  for (int d = 0; d < 3; ++d) {
    const std::int64_t nd = d < g.dim() ? g.cells(d) : 1;
    n[static_cast<std::size_t>(d)] = nd;
    auto& m = mu[static_cast<std::size_t>(d)];
    auto& ww = w[static_cast<std::size_t>(d)];
    m.assign(static_cast<std::size_t>(nd), 0.0);
    ww.assign(static_cast<std::size_t>(nd * nd), 1.0 / static_cast<double>(nd));
    if (nd == 1) continue;  // no coupling along this axis
    const double c = options_.gamma * volume_ / (g.spacing(d) * g.spacing(d));
    const double pi = 3.141592653589793238462643383279502884;
    const double fn = static_cast<double>(nd);
    for (std::int64_t k = 0; k < nd; ++k) {
      const auto ks = static_cast<std::size_t>(k);
      if (g.periodic(d)) {  // Fourier modes: |φ_k(i)|² = 1/n
        m[ks] = c * (2.0 - 2.0 * std::cos(2.0 * pi * static_cast<double>(k) / fn));
        continue;
      }
      m[ks] = c * (2.0 - 2.0 * std::cos(pi * static_cast<double>(k) / fn));
      if (k == 0) continue;
      for (std::int64_t i = 0; i < nd; ++i) {
        const double cs = std::cos(pi * static_cast<double>(k) * (static_cast<double>(i) + 0.5) / fn);
        ww[static_cast<std::size_t>(k * nd + i)] = 2.0 / fn * cs * cs;
      }
    }
  }
  const bool bilaplacian = options_.kind == PriorKind::BiLaplacian;
  const double volume = volume_;
  auto f = [&](double m) { return bilaplacian ? volume / (m * m) : 1.0 / m; };
  const Box& o = g.owned();
  const std::int64_t nx = n[0], ny = n[1], nz = n[2];
  const std::int64_t ox = o.count[0], oy = g.dim() >= 2 ? o.count[1] : 1, oz = g.dim() >= 3 ? o.count[2] : 1;
  const std::int64_t sx = o.start[0], sy = g.dim() >= 2 ? o.start[1] : 0, sz = g.dim() >= 3 ? o.start[2] : 0;
  // Axis by axis: z (all modes kx, ky; owned iz), then y, then x. The same
  // order of summation on any decomposition.
  std::vector<double> g3(static_cast<std::size_t>(nx * ny * oz), 0.0);
  for (std::int64_t kx = 0; kx < nx; ++kx)
    for (std::int64_t ky = 0; ky < ny; ++ky)
      for (std::int64_t iz = 0; iz < oz; ++iz) {
        double s = 0.0;
        for (std::int64_t kz = 0; kz < nz; ++kz)
          s += w[2][static_cast<std::size_t>(kz * nz + sz + iz)] *
               f(mu[0][static_cast<std::size_t>(kx)] + mu[1][static_cast<std::size_t>(ky)] +
                 mu[2][static_cast<std::size_t>(kz)] + dv);
        g3[static_cast<std::size_t>((kx * ny + ky) * oz + iz)] = s;
      }
  std::vector<double> g2(static_cast<std::size_t>(nx * oy * oz), 0.0);
  for (std::int64_t kx = 0; kx < nx; ++kx)
    for (std::int64_t iy = 0; iy < oy; ++iy)
      for (std::int64_t iz = 0; iz < oz; ++iz) {
        double s = 0.0;
        for (std::int64_t ky = 0; ky < ny; ++ky)
          s += w[1][static_cast<std::size_t>(ky * ny + sy + iy)] * g3[static_cast<std::size_t>((kx * ny + ky) * oz + iz)];
        g2[static_cast<std::size_t>((kx * oy + iy) * oz + iz)] = s;
      }
  std::size_t e = 0;
  for (std::int64_t iz = 0; iz < oz; ++iz)
    for (std::int64_t iy = 0; iy < oy; ++iy)
      for (std::int64_t ix = 0; ix < ox; ++ix, ++e) {
        double s = 0.0;
        for (std::int64_t kx = 0; kx < nx; ++kx)
          s += w[0][static_cast<std::size_t>(kx * nx + sx + ix)] * g2[static_cast<std::size_t>((kx * oy + iy) * oz + iz)];
        out[e] = s;
      }
}

}  // namespace costate::pde
