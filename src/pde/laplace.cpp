// The Laplace posterior of a PDE inversion: randomized double-pass
// eigensolver of H v = λ Γ⁻¹ v, pointwise variance, samples (laplace.hpp).
#include "costate/pde/laplace.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/core/progress.hpp"

namespace costate::pde {

void EigensolveOptions::validate(std::int64_t unknowns) const {
  COSTATE_CHECK(rank >= 1, "pde::EigensolveOptions::rank = " << rank << " must be >= 1");
  COSTATE_CHECK(oversampling >= 0, "pde::EigensolveOptions::oversampling = " << oversampling << " must be >= 0");
  COSTATE_CHECK(static_cast<std::int64_t>(rank) + oversampling <= unknowns,
                "pde::EigensolveOptions: rank + oversampling = " << rank + oversampling << " exceeds the " << unknowns
                                                                 << " unknowns of the field");
}

void LaplaceOptions::validate(std::int64_t unknowns) const {
  eigen.validate(unknowns);
  COSTATE_CHECK(samples >= 0, "pde::LaplaceOptions::samples = " << samples << " must be >= 0");
}

std::string LaplacePosterior::brief_report() const {
  std::ostringstream s;
  s << "Laplace posterior: " << eigenvalues.size() << " eigenvalues";
  if (!eigenvalues.empty())
    s << " (" << costate::detail::format_value(eigenvalues.front()) << " … "
      << costate::detail::format_value(eigenvalues.back()) << ")";
  s << ", effective parameters " << costate::detail::format_value(effective_parameters) << ", " << hessian_actions
    << " Hessian actions, PDE solves " << solves.total() << " (" << solves.forward << " forward, " << solves.adjoint
    << " adjoint, " << solves.incremental_forward << " incremental forward, " << solves.incremental_adjoint
    << " incremental adjoint), " << prior_solves << " KSP solves with the prior's A";
  return s.str();
}

namespace {

/// c_i = ⟨x, y_i⟩ for all i, one reduction (local partials in index order,
/// then the ranks' partials in rank order).
std::vector<double> dots(const GlobalVector& x, const std::vector<GlobalVector>& y, std::size_t count) {
  std::vector<double> c(count, 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    double s = 0.0;
    for (std::size_t e = 0; e < x.size(); ++e) s += x[e] * y[i][e];
    c[i] = s;
  }
  if (count > 0) global_sum(x.comm(), c.data(), count);
  return c;
}

/// G_ij = ⟨x_i, y_j⟩ (m × m), one reduction.
Eigen::MatrixXd gram(const std::vector<GlobalVector>& x, const std::vector<GlobalVector>& y, MPI_Comm comm) {
  const std::size_t m = x.size();
  std::vector<double> g(m * m, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      double s = 0.0;
      for (std::size_t e = 0; e < x[i].size(); ++e) s += x[i][e] * y[j][e];
      g[i * m + j] = s;
    }
  if (m > 0) global_sum(comm, g.data(), m * m);
  Eigen::MatrixXd out(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(m));
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) out(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = g[i * m + j];
  return out;
}

/// z = Σ_i c_i x_i.
void combine(const GlobalVector& z, const std::vector<double>& c, const std::vector<GlobalVector>& x) {
  std::vector<const GlobalVector*> p;
  for (std::size_t i = 0; i < c.size(); ++i) p.push_back(&x[i]);
  linear_combination(z, std::span<const double>(c), std::span<const GlobalVector* const>(p));
}

}  // namespace

GeneralizedEigenpairs double_pass_eigensolve(const Grid& grid, const FieldOperator& a, const FieldOperator& b,
                                             const FieldOperator& b_inverse, const EigensolveOptions& options) {
  options.validate(grid.global_size());
  const int l = options.rank + options.oversampling;
  GeneralizedEigenpairs out;
  // Pass 1: Y = B⁻¹ A Ω, made B-orthonormal column by column (classical
  // Gram–Schmidt in the B inner product, twice).
  std::vector<GlobalVector> q, bq;
  GlobalVector omega = grid.create_global("pde::laplace omega"), tmp = grid.create_global("pde::laplace work"),
               y = grid.create_global("pde::laplace y"), by = grid.create_global("pde::laplace By");
  Progress pass1("eigensolve pass 1 (B⁻¹A actions)", static_cast<double>(l));
  for (int j = 0; j < l; ++j) {
    pass1.update(static_cast<double>(j));
    // Column j of Y; if it is numerically inside span(Q) (the second
    // Gram–Schmidt pass removed more than half of what the first left:
    // Kahan–Parlett's criterion), a random direction instead (Rayleigh–
    // Ritz holds on any subspace; with l = n, Q spans everything).
    for (int attempt = 0; attempt < 4; ++attempt) {
      const auto seed = derive_seed(options.seed, attempt == 0 ? 0 : 1 + static_cast<std::uint64_t>(attempt),
                                     static_cast<std::uint64_t>(j));
      if (attempt == 0) {
        standard_normal_field(grid, seed, omega);
        a(omega, tmp);
        ++out.a_actions;
        b_inverse(tmp, y);
        ++out.b_inverse_actions;
      } else {
        standard_normal_field(grid, seed, y);
        ++out.random_directions;
      }
      double before = 0.0;
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<double> c = dots(y, bq, q.size());
        if (pass == 1) {
          b(y, by);
          ++out.b_actions;
          before = std::sqrt(std::max(dot(y, by), 0.0));
        }
        for (std::size_t i = 0; i < q.size(); ++i) axpy(-c[i], q[i], y);
      }
      b(y, by);
      ++out.b_actions;
      const double after = std::sqrt(std::max(dot(y, by), 0.0));
      if (!(after > 0.5 * before) || !std::isfinite(after) || after == 0.0) continue;
      GlobalVector qj = grid.create_global("pde::laplace Q"), bqj = grid.create_global("pde::laplace BQ");
      scale(qj, 1.0 / after, y);
      scale(bqj, 1.0 / after, by);
      q.push_back(qj);
      bq.push_back(bqj);
      break;
    }
  }
  // Pass 2: T = Qᵀ A Q, its eigenpairs, V = Q U.
  pass1.finish();
  std::vector<GlobalVector> aq;
  Progress pass2("eigensolve pass 2 (A actions)", static_cast<double>(q.size()));
  for (std::size_t j = 0; j < q.size(); ++j) {
    pass2.update(static_cast<double>(j));
    GlobalVector v = grid.create_global("pde::laplace AQ");
    a(q[j], v);
    ++out.a_actions;
    aq.push_back(v);
  }
  Eigen::MatrixXd t = gram(q, aq, grid.comm());
  t = 0.5 * (t + t.transpose()).eval();
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(t);
  COSTATE_CHECK(eig.info() == Eigen::Success, "pde::double_pass_eigensolve: the dense symmetric eigensolve failed");
  const Eigen::Index m = t.rows();
  const int k = std::min<int>(options.rank, static_cast<int>(m));
  const Eigen::MatrixXd qbq = gram(q, bq, grid.comm());
  Eigen::MatrixXd u(m, k);
  for (int i = 0; i < k; ++i) {
    const Eigen::Index col = m - 1 - i;  // ascending → descending
    out.values.push_back(eig.eigenvalues()(col));
    u.col(i) = eig.eigenvectors().col(col);
    std::vector<double> c(static_cast<std::size_t>(m));
    for (Eigen::Index r = 0; r < m; ++r) c[static_cast<std::size_t>(r)] = u(r, i);
    GlobalVector v = grid.create_global("pde::laplace eigenvector");
    combine(v, c, q);
    out.vectors.push_back(v);
  }
  const Eigen::MatrixXd e = u.transpose() * qbq * u - Eigen::MatrixXd::Identity(k, k);
  out.orthonormality_error = k > 0 ? e.cwiseAbs().maxCoeff() : 0.0;
  return out;
}

LaplacePosterior laplace_posterior(MisfitModel& misfit, const Prior& prior, const GlobalVector& map,
                                   const LaplaceOptions& options) {
  const auto t_start = std::chrono::steady_clock::now();
  const Grid& fg = misfit.field_grid();
  options.validate(fg.global_size());
  COSTATE_CHECK(prior.grid().owned_size() == fg.owned_size(),
                "pde::laplace_posterior: the prior is on another grid than the parameter field");
  COSTATE_CHECK_EQ(map.size(), fg.owned_size(), "pde::laplace_posterior: the MAP point is not a field of the grid");
  COSTATE_CHECK(options.samples == 0 || prior.options().kind == PriorKind::BiLaplacian,
                "pde::laplace_posterior: posterior samples need the bilaplacian prior (this one is "
                    << to_string(prior.options().kind) << ": it has no sampler)");
  LaplacePosterior res;
  const PdeSolves solves0 = misfit.solves();
  const std::int64_t prior_solves0 = prior.solves();
  GlobalVector g = fg.create_global("pde::laplace gradient");
  misfit.linearize(map, g);
  const FieldOperator h = [&](const GlobalVector& in, const GlobalVector& out) {
    misfit.hessian_vector(in, out, options.hessian);
    ++res.hessian_actions;
  };
  const FieldOperator b = [&](const GlobalVector& in, const GlobalVector& out) { prior.apply(in, out); };
  const FieldOperator b_inverse = [&](const GlobalVector& in, const GlobalVector& out) {
    prior.apply_inverse(in, out);
  };
  GeneralizedEigenpairs ep = double_pass_eigensolve(fg, h, b, b_inverse, options.eigen);
  for (std::size_t i = 0; i < ep.values.size(); ++i)
    COSTATE_CHECK(ep.values[i] > -1.0,
                  "pde::laplace_posterior: eigenvalue " << i << " of the prior-preconditioned Hessian is "
                                                        << costate::detail::format_value(ep.values[i])
                                                        << " <= -1: H + prior^-1 is not positive definite here (not a "
                                                           "minimum; the Gauss-Newton Hessian is)");
  res.eigenvalues = ep.values;
  res.eigenvectors = std::move(ep.vectors);
  res.orthonormality_error = ep.orthonormality_error;
  // Pointwise variance: diag Γ − Σ dᵢ vᵢ².
  res.prior_variance = fg.create_global("pde::prior variance");
  prior.pointwise_variance(res.prior_variance);
  res.variance = fg.create_global("pde::posterior variance");
  deep_copy(res.variance, res.prior_variance);
  std::vector<double> d, p;
  for (std::size_t i = 0; i < res.eigenvalues.size(); ++i) {
    const double lambda = res.eigenvalues[i];
    d.push_back(lambda / (1.0 + lambda));
    p.push_back(1.0 - 1.0 / std::sqrt(1.0 + lambda));
    res.effective_parameters += d.back();
    const GlobalVector& v = res.eigenvectors[i];
    for (std::size_t e = 0; e < v.size(); ++e) res.variance[e] -= d.back() * v[e] * v[e];
  }
  res.truncation_bound = d.empty() ? 1.0 : std::max(d.back(), 0.0);
  // Samples: m̂ + s − V P Vᵀ Γ⁻¹ s, s a prior fluctuation.
  GlobalVector bs = fg.create_global("pde::laplace B s"), corr = fg.create_global("pde::laplace correction");
  for (int s = 0; s < options.samples; ++s) {
    GlobalVector x = fg.create_global("pde::posterior sample");
    prior.sample(derive_seed(options.eigen.seed, 1, static_cast<std::uint64_t>(s)), x);
    axpy(-1.0, prior.mean(), x);
    prior.apply(x, bs);
    std::vector<double> c = dots(bs, res.eigenvectors, res.eigenvectors.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] *= p[i];
    combine(corr, c, res.eigenvectors);
    axpy(-1.0, corr, x);
    axpy(1.0, map, x);
    res.samples.push_back(x);
  }
  const PdeSolves s1 = misfit.solves();
  res.solves = {s1.forward - solves0.forward, s1.adjoint - solves0.adjoint,
                s1.incremental_forward - solves0.incremental_forward,
                s1.incremental_adjoint - solves0.incremental_adjoint};
  res.prior_solves = prior.solves() - prior_solves0;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return res;
}

}  // namespace costate::pde
