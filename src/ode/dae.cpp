// A DAE's consistent initial values and their implicit derivatives
// (src/ode/dae.hpp has the maths).
#include "ode/dae.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "costate/core/error.hpp"
#include "costate/ode/idas.hpp"

namespace costate::ode::detail {

namespace {
std::vector<std::size_t> indices_of(std::span<const std::uint8_t> mask, std::size_t n) {
  std::vector<std::size_t> z;
  for (std::size_t i = 0; i < n && i < mask.size(); ++i)
    if (mask[i]) z.push_back(i);
  return z;
}
/// The constraint rows (the algebraic states' rhs rows) and the unknowns
/// they determine at t0 (the algebraic states themselves for a
/// semi-explicit DAE; ResidualForm: y'_d and y_a).
std::vector<std::size_t> algebraic_indices(const System& system) {
  return indices_of(system.algebraic(), system.n_model_states());
}
std::vector<std::size_t> unknown_indices(const System& system) {
  return indices_of(system.initial_unknowns(), system.n_model_states());
}
}  // namespace

void make_consistent(const System& system, std::span<const double> p, double t0,
                     std::span<double> x, std::string_view who) {
  const std::size_t m = system.n_algebraic();
  if (m == 0) return;
  check_index_one(system, p, t0, x);
  // Newton's update is ≤ this relative to 1 + |z|, or stalls there: the
  // constraints hold to round-off (the sweeps' implicit derivatives assume
  // g = 0 exactly, as the steps' Newton does).
  constexpr double kConverged = 1e-15;
  constexpr int kMaxIterations = 50;
  const std::size_t nx = system.n_states(), n = system.n_model_states();
  const std::size_t np = system.n_parameters();
  const std::vector<std::size_t> z = algebraic_indices(system), u = unknown_indices(system);
  std::vector<double> f(nx), J(nx * (n + np));
  Eigen::MatrixXd gz(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(m));
  Eigen::VectorXd r(static_cast<Eigen::Index>(m));
  const std::vector<double> given(x.begin(), x.end());
  auto residual = [&] {
    system.rhs(t0, x, p, f);
    double worst = 0.0;
    for (std::size_t a = 0; a < m; ++a) {
      r(static_cast<Eigen::Index>(a)) = f[z[a]];
      worst = std::max(worst, std::abs(f[z[a]]));
    }
    return worst;
  };
  double prev = 0.0;
  bool ok = false;
  for (int it = 0; it < kMaxIterations && !ok; ++it) {
    if (!(residual() < std::numeric_limits<double>::infinity())) break;
    system.jacobian(t0, x, p, J);
    for (std::size_t a = 0; a < m; ++a)
      for (std::size_t b = 0; b < m; ++b)
        gz(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) = J[u[b] * nx + z[a]];
    const Eigen::VectorXd d = gz.partialPivLu().solve(r);
    double change = 0.0;
    bool finite = true;
    for (std::size_t a = 0; a < m; ++a) {
      x[u[a]] -= d(static_cast<Eigen::Index>(a));
      finite = finite && std::isfinite(x[u[a]]);
      change = std::max(change, std::abs(d(static_cast<Eigen::Index>(a))) / (1.0 + std::abs(x[u[a]])));
    }
    if (!finite) break;
    // Converged, or no longer contracting at round-off.
    ok = change <= kConverged || (it > 0 && change <= 1e-12 && change >= 0.5 * prev);
    prev = change;
  }
  if (ok && residual() < std::numeric_limits<double>::infinity()) return;
  // Name the constraint with the largest residual at the given values.
  std::copy(given.begin(), given.end(), x.begin());
  system.rhs(t0, x, p, f);
  std::size_t worst = z[0];
  for (std::size_t i : z)
    if (!(std::abs(f[i]) <= std::abs(f[worst]))) worst = i;
  std::ostringstream os;
  os.precision(16);
  if (system.residual_form())  // ResidualForm: row n + i is F_i (residual_dae.hpp)
    os << who << ": the initial values could not be made consistent (Newton on y'_d and the "
       << "algebraic y_a with the differential y_d fixed did not converge in " << kMaxIterations
       << " iterations); the largest residual at the given values is residual equation "
       << worst - n / 2 << ": " << f[worst]
       << ". Give initial values (y and y') near a solution of F(t0, y, y', p) = 0";
  else
    os << who << ": the initial values could not be made consistent (Newton on the algebraic "
       << "states with the differential ones fixed did not converge in " << kMaxIterations
       << " iterations); the largest residual at the given values is algebraic equation "
       << worst << " (state " << worst << "): " << f[worst]
       << ". Give initial values near a solution of the constraints";
  throw Error(os.str());
}

ConstraintProjection::ConstraintProjection(const System& system, std::span<const double> p)
    : system_(system), p_(p), z_(algebraic_indices(system)), u_(unknown_indices(system)) {
  // A ResidualForm's y'_a: algebraic in the scheme's sense, not solved for.
  for (std::size_t i : z_)
    if (!system.initial_unknowns()[i]) guesses_.push_back(i);
}

void ConstraintProjection::linearize(double t, std::span<const double> x) {
  const std::size_t nx = system_.n_states(), n = system_.n_model_states();
  J_.resize(nx * (n + system_.n_parameters()));
  system_.jacobian(t, x.first(nx), p_, J_);
}

void ConstraintProjection::tangent(double t, std::span<const double> x, std::size_t m,
                                   std::span<double> S, std::span<const double> P) {
  const std::size_t k = z_.size();
  if (k == 0 || m == 0) return;
  linearize(t, x);
  for (std::size_t j : guesses_)
    for (std::size_t d = 0; d < m; ++d) S[j * m + d] = 0.0;
  const std::size_t nx = system_.n_states(), n = system_.n_model_states();
  const std::size_t np = system_.n_parameters();
  const auto kk = static_cast<Eigen::Index>(k), mm = static_cast<Eigen::Index>(m);
  Eigen::MatrixXd gz(kk, kk), rhs = Eigen::MatrixXd::Zero(kk, mm);
  for (std::size_t a = 0; a < k; ++a) {
    const std::size_t row = z_[a];
    for (std::size_t b = 0; b < k; ++b)
      gz(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) = J_[u_[b] * nx + row];
    for (std::size_t d = 0; d < m; ++d) {
      double s = 0.0;
      for (std::size_t j = 0; j < n; ++j)
        if (!system_.initial_unknowns()[j]) s += J_[j * nx + row] * S[j * m + d];
      for (std::size_t j = 0; j < np; ++j) s += J_[(n + j) * nx + row] * P[j * m + d];
      rhs(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(d)) = -s;
    }
  }
  const Eigen::MatrixXd sz = gz.partialPivLu().solve(rhs);
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t d = 0; d < m; ++d)
      S[u_[a] * m + d] = sz(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(d));
}

void ConstraintProjection::adjoint(double t, std::span<const double> x,
                                   std::span<const double> w, std::span<double> dlambda,
                                   std::span<double> gp) {
  const std::size_t nx = system_.n_states(), n = system_.n_model_states();
  const std::size_t np = system_.n_parameters(), m = z_.size();
  bool on_z = false;
  for (std::size_t r : u_) on_z |= w[r] != 0.0;
  if (!on_z) {
    if (dlambda.data() != w.data()) std::copy(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(nx), dlambda.begin());
    for (std::size_t j : guesses_) dlambda[j] = 0.0;
    return;
  }
  linearize(t, x);
  const std::vector<double> wc(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(nx));
  Eigen::MatrixXd gzT(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(m));
  Eigen::VectorXd wz(static_cast<Eigen::Index>(m));
  for (std::size_t a = 0; a < m; ++a) {
    wz(static_cast<Eigen::Index>(a)) = wc[u_[a]];
    for (std::size_t b = 0; b < m; ++b)  // (g_uᵀ)(a, b) = g_u(b, a) = F_y(z_b, u_a)
      gzT(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) = J_[u_[a] * nx + z_[b]];
  }
  const Eigen::VectorXd nu = gzT.partialPivLu().solve(wz);
  std::copy(wc.begin(), wc.end(), dlambda.begin());
  for (std::size_t j = 0; j < n + np; ++j) {
    double s = 0.0;
    for (std::size_t b = 0; b < m; ++b) s += J_[j * nx + z_[b]] * nu(static_cast<Eigen::Index>(b));
    if (j < n)
      dlambda[j] = system_.initial_unknowns()[j] ? 0.0 : wc[j] - s;
    else
      gp[j - n] -= s;
  }
  for (std::size_t j : guesses_) dlambda[j] = 0.0;
}

void ConstraintProjection::adjoint_tangent(double t, std::span<const double> x,
                                           std::span<const double> xdot,
                                           std::span<const double> pdot, std::span<double> lambda,
                                           std::span<double> lambda_dot, std::span<double> gp,
                                           std::span<double> gp_dot) {
  const std::size_t nx = system_.n_states(), n = system_.n_model_states();
  const std::size_t np = system_.n_parameters(), m = z_.size();
  if (m == 0) return;
  SecondOrderLinearization lin(system_);
  lin.at(t, x.first(nx), xdot.first(nx), p_, pdot);
  std::vector<double> J(nx * (n + np)), Jd(J.size());
  lin.jacobian(J, Jd);
  const auto mm = static_cast<Eigen::Index>(m);
  Eigen::MatrixXd gzT(mm, mm);
  Eigen::VectorXd wz(mm), wzd(mm);
  for (std::size_t a = 0; a < m; ++a) {
    wz(static_cast<Eigen::Index>(a)) = lambda[u_[a]];
    wzd(static_cast<Eigen::Index>(a)) = lambda_dot[u_[a]];
    for (std::size_t b = 0; b < m; ++b)
      gzT(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) = J[u_[a] * nx + z_[b]];
  }
  const Eigen::PartialPivLU<Eigen::MatrixXd> lu(gzT);
  const Eigen::VectorXd nu = lu.solve(wz);
  // ẇ_z − ġ_zᵀ ν, then ν̇.
  for (std::size_t a = 0; a < m; ++a) {
    double s = 0.0;
    for (std::size_t b = 0; b < m; ++b) s += Jd[u_[a] * nx + z_[b]] * nu(static_cast<Eigen::Index>(b));
    wzd(static_cast<Eigen::Index>(a)) -= s;
  }
  const Eigen::VectorXd nud = lu.solve(wzd);
  for (std::size_t j = 0; j < n + np; ++j) {
    double s = 0.0, sd = 0.0;
    for (std::size_t b = 0; b < m; ++b) {
      const auto bb = static_cast<Eigen::Index>(b);
      s += J[j * nx + z_[b]] * nu(bb);
      sd += J[j * nx + z_[b]] * nud(bb) + Jd[j * nx + z_[b]] * nu(bb);
    }
    if (j < n) {
      const bool u = system_.initial_unknowns()[j] != 0;
      lambda[j] = u ? 0.0 : lambda[j] - s;
      lambda_dot[j] = u ? 0.0 : lambda_dot[j] - sd;
    } else {
      gp[j - n] -= s;
      gp_dot[j - n] -= sd;
    }
  }
  for (std::size_t j : guesses_) lambda[j] = lambda_dot[j] = 0.0;
}

}  // namespace costate::ode::detail
