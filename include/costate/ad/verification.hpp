#pragma once
/// \file
/// Verification of gradients as public API: ad::taylor_test (the
/// convergence-order test every costate derivative is held to) and
/// ad::check_gradient (componentwise against central finite differences).
/// Use them on your own models: a gradient from costate's AD, from a
/// hand-written adjoint, or from an ODE adjoint method.
///
/// Taylor test. For J: ℝⁿ → ℝ, a point p, a direction δ and a step h,
///     r(h) = | J(p + hδ) − J(p) − h ⟨∇J(p), δ⟩ | = O(h²)
/// when ∇J is the gradient (Taylor's theorem), but only O(h) when the
/// ⟨∇J, δ⟩ used is wrong. Starting from h₀ the step is halved `halvings`
/// times (default 6: seven steps); each halving gives an observed order
///     order_k = log₂( r(h_{k−1}) / r(h_k) ),
/// which tends to 2 for a correct gradient and to 1 for a wrong one. The
/// test passes when every observed order is ≥ required_order (1.9); the
/// least-squares slope of log r against log h (the fitted order) is
/// reported as well, and is never below the smallest observed order.
/// Round-off floor: r(h) cannot be resolved below the rounding error of
/// J(p + hδ) − J(p), about ε·|J|; once r(h) ≤ floor_factor·ε·max(|J(p)|,
/// |J(p + hδ)|) the halving stops and that step is not used for orders.
/// If r(h₀) is already at the floor, J is affine along δ to round-off and
/// the first-order term matched: the test passes with no orders. If the
/// floor comes after a single step above it, no order can be measured: the
/// test fails and says to increase initial_step.
/// Step scale: h₀ = initial_step · max(1, ‖p‖∞) / ‖δ‖∞, so the first
/// perturbation h₀δ is initial_step relative to p (the steps reported are
/// the h_k actually used).
///
/// Gradient check. With h_i = step · max(1, |x_i|) the central difference
///     fd_i = (J(x + h_i e_i) − J(x − h_i e_i)) / (2 h_i)
/// has truncation error h_i² J'''/6 and round-off about ε·|J| / h_i.
/// Component i passes when
///     |g_i − fd_i| ≤ rtol · max(|g_i|, |fd_i|) + atol
///                    + roundoff_factor · ε · max(|J(x ± h_i e_i)|) / h_i,
/// the last term being what a difference quotient cannot resolve (so an
/// exactly zero gradient component is not failed by finite-difference
/// noise). rel_error_i = |g_i − fd_i| / max(|g_i|, |fd_i|) (0 when both are
/// 0). 2n + 1 evaluations of J on double.
///
/// The callables: J is a scalar callable as for ad::gradient (templated on
/// its scalar type) when costate computes the gradient; with a gradient
/// given (a vector, or a callable x ↦ ∇J(x)), J is only ever called on
/// std::vector<double>, so a plain `double(const std::vector<double>&)`
/// function works. Numerical outcomes (a failed test, a non-finite J) come
/// back in the result; only caller mistakes (mismatched lengths, a zero
/// direction, invalid options) throw costate::Error.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/detail/drivers_gradient.hpp"
#include "costate/core/error.hpp"

namespace costate::ad {

// --------------------------------------------------------------- Taylor test

struct TaylorTestOptions {
  /// Relative first step: h₀ = initial_step · max(1, ‖p‖∞) / ‖δ‖∞ (> 0).
  double initial_step = 1e-2;
  /// Number of halvings of h (≥ 1): halvings + 1 residuals at most.
  int halvings = 6;
  /// Every observed order must reach this (> 0).
  double required_order = 1.9;
  /// Round-off floor, in units of ε·|J| (≥ 1): residuals at or below it are
  /// noise and end the halving.
  double floor_factor = 1e3;

  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const {
    COSTATE_CHECK(std::isfinite(initial_step) && initial_step > 0.0,
                  "TaylorTestOptions::initial_step = " << costate::detail::format_value(initial_step)
                                                       << " is invalid: it must be a positive "
                                                          "finite number");
    COSTATE_CHECK(halvings >= 1, "TaylorTestOptions::halvings = "
                                     << halvings << " is invalid: at least one halving is "
                                                    "needed to observe an order");
    COSTATE_CHECK(std::isfinite(required_order) && required_order > 0.0,
                  "TaylorTestOptions::required_order = " << costate::detail::format_value(required_order)
                                                         << " is invalid: it must be > 0");
    COSTATE_CHECK(std::isfinite(floor_factor) && floor_factor >= 1.0,
                  "TaylorTestOptions::floor_factor = " << costate::detail::format_value(floor_factor)
                                                       << " is invalid: it must be >= 1");
  }
};

struct TaylorTestResult {
  std::vector<double> steps;      ///< h_k evaluated (the last may be at the floor)
  std::vector<double> residuals;  ///< r(h_k)
  std::vector<double> orders;     ///< log₂(r_{k−1}/r_k) over the steps above the floor
  double min_order = std::numeric_limits<double>::quiet_NaN();     ///< smallest order
  double fitted_order = std::numeric_limits<double>::quiet_NaN();  ///< LS slope of log r vs log h
  double value = 0.0;                   ///< J(p)
  double directional_derivative = 0.0;  ///< ⟨∇J(p), δ⟩ used
  double roundoff_floor = 0.0;  ///< floor_factor·ε·|J(p)| (step k uses max(|J(p)|, |J(p + h_k δ)|))
  bool reached_roundoff_floor = false;  ///< the halving stopped at the floor
  double required_order = 1.9;          ///< the criterion applied
  bool passed = false;
  std::string message;  ///< why it passed or failed, with the fix when there is one

  /// Table of h, r(h), order, then the verdict.
  std::string report() const {
    std::ostringstream os;
    char line[160];
    os << "Taylor test: J(p) = " << costate::detail::format_value(value)
       << ", <grad J, dir> = " << costate::detail::format_value(directional_derivative) << "\n";
    os << "           h          r(h)   order\n";
    for (std::size_t k = 0; k < steps.size(); ++k) {
      if (k >= 1 && k - 1 < orders.size())
        std::snprintf(line, sizeof line, "  %10.3e  %12.5e  %6.3f\n", steps[k], residuals[k],
                      orders[k - 1]);
      else
        std::snprintf(line, sizeof line, "  %10.3e  %12.5e  %6s\n", steps[k], residuals[k],
                      k == 0 ? "" : "floor");
      os << line;
    }
    std::snprintf(line, sizeof line, "min order %.3f, fitted order %.3f (required >= %.2f): ",
                  min_order, fitted_order, required_order);
    os << line << (passed ? "PASSED" : "FAILED") << " - " << message << "\n";
    return os.str();
  }
};

namespace detail {

inline double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double a : v) m = std::max(m, std::abs(a));
  return m;
}

/// The Taylor test of the double callable J at p along δ, with the
/// directional derivative dJ = ⟨∇J(p), δ⟩ computed by the caller.
template <class J>
TaylorTestResult taylor_test_core(J&& eval, const std::vector<double>& p,
                                  const std::vector<double>& direction, double value, double dJ,
                                  const TaylorTestOptions& options) {
  options.validate();
  TaylorTestResult r;
  r.value = value;
  r.directional_derivative = dJ;
  r.required_order = options.required_order;
  const double eps = std::numeric_limits<double>::epsilon();
  const double dnorm = max_abs(direction);
  double h = options.initial_step * std::max(1.0, max_abs(p)) / dnorm;
  r.roundoff_floor = options.floor_factor * eps * std::abs(value);
  if (!std::isfinite(value) || !std::isfinite(dJ)) {
    r.message = "J(p) or <grad J, dir> is not finite: nothing to test";
    return r;
  }
  std::vector<double> q(p.size());
  std::size_t above = 0;  // residuals above the floor (a prefix of residuals)
  for (int k = 0; k <= options.halvings; ++k, h *= 0.5) {
    for (std::size_t i = 0; i < p.size(); ++i) q[i] = p[i] + h * direction[i];
    const double jq = static_cast<double>(eval(q));
    const double res = std::abs(jq - value - h * dJ);
    r.steps.push_back(h);
    r.residuals.push_back(res);
    if (!std::isfinite(res)) {
      std::ostringstream os;
      os << "J(p + h dir) is not finite at h = " << costate::detail::format_value(h)
         << ": reduce initial_step so that p + h dir stays in J's domain";
      r.message = os.str();
      return r;
    }
    const double floor = options.floor_factor * eps * std::max(std::abs(value), std::abs(jq));
    if (res <= floor) {
      r.reached_roundoff_floor = true;
      break;
    }
    ++above;
  }
  for (std::size_t k = 1; k < above; ++k)
    r.orders.push_back(std::log2(r.residuals[k - 1] / r.residuals[k]));
  if (above == 0) {
    r.passed = true;
    r.message =
        "r(h) is at the round-off floor from the first step: J is affine along the direction to "
        "round-off and its first-order term matches the gradient";
    return r;
  }
  if (above == 1) {
    r.message =
        "r(h) reached the round-off floor after one step, so no order could be observed: "
        "increase initial_step";
    return r;
  }
  r.min_order = *std::min_element(r.orders.begin(), r.orders.end());
  // Least-squares slope of log r against log h over the steps above the floor.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t k = 0; k < above; ++k) {
    const double lx = std::log(r.steps[k]), ly = std::log(r.residuals[k]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  const double na = static_cast<double>(above);
  r.fitted_order = (na * sxy - sx * sy) / (na * sxx - sx * sx);
  r.passed = r.min_order >= options.required_order;
  std::ostringstream os;
  os.precision(3);
  if (r.passed) {
    os << "every observed order >= " << options.required_order
       << ": the gradient is consistent with J";
  } else {
    os << "observed order " << std::fixed << r.min_order << " < " << options.required_order
       << (r.fitted_order < 1.5 ? ": the gradient is wrong along this direction (order ~1 "
                                  "means the first-order term does not match)"
                                : ": check the gradient, or reduce initial_step if J is "
                                  "strongly nonlinear at this scale");
  }
  r.message = os.str();
  return r;
}

inline void check_taylor_arguments(const std::vector<double>& x,
                                   const std::vector<double>& direction) {
  COSTATE_CHECK_EQ(direction.size(), x.size(),
                   "ad::taylor_test: the direction needs one entry per input x");
  COSTATE_CHECK(max_abs(direction) > 0.0 && std::isfinite(max_abs(direction)),
                "ad::taylor_test: the direction must be finite and non-zero");
}

/// A given gradient: a std::vector<double>, or a callable x ↦ ∇J(x).
template <class G>
concept GradientSource = std::same_as<std::remove_cvref_t<G>, std::vector<double>> ||
                         std::invocable<G&, const std::vector<double>&>;

template <class G>
std::vector<double> evaluate_gradient(G& grad, const std::vector<double>& x) {
  if constexpr (std::same_as<std::remove_cvref_t<G>, std::vector<double>>)
    return grad;
  else
    return std::vector<double>(grad(x));
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace detail

/// Taylor test of costate's reverse-mode gradient (ad::value_and_gradient)
/// of the scalar callable f at x along `direction`.
template <class F>
TaylorTestResult taylor_test(F&& f, const std::vector<double>& x,
                             const std::vector<double>& direction,
                             const TaylorTestOptions& options = {}) {
  detail::check_taylor_arguments(x, direction);
  options.validate();
  const ValueAndGradient vg = value_and_gradient(f, x);
  return detail::taylor_test_core(f, x, direction, vg.value, detail::dot(vg.gradient, direction),
                                  options);
}

/// Taylor test of a given gradient (e.g. from a hand-written adjoint):
/// `grad` is ∇J(x) as a std::vector<double>, or a callable x ↦ ∇J(x)
/// returning one (called once, at x). f is only called on
/// std::vector<double>. (A template parameter, so that a braced
/// `{.initial_step = …}` in this position always means the options.)
template <class F, class G>
  requires detail::GradientSource<G>
TaylorTestResult taylor_test(F&& f, const std::vector<double>& x,
                             const std::vector<double>& direction, G&& grad,
                             const TaylorTestOptions& options = {}) {
  detail::check_taylor_arguments(x, direction);
  const std::vector<double> g = detail::evaluate_gradient(grad, x);
  COSTATE_CHECK_EQ(g.size(), x.size(), "ad::taylor_test: the gradient needs one entry per input x");
  options.validate();
  const double value = static_cast<double>(f(x));
  return detail::taylor_test_core(f, x, direction, value, detail::dot(g, direction), options);
}

// ------------------------------------------------------------ gradient check

struct GradientCheckOptions {
  /// Relative finite-difference step: h_i = step · max(1, |x_i|) (> 0).
  double step = 1e-6;
  /// Componentwise relative tolerance (≥ 0). Central differences with the
  /// default step are accurate to ~1e-10 relative for smooth J of moderate
  /// scale, so 1e-6 leaves room and still catches real errors.
  double rtol = 1e-6;
  /// Absolute tolerance added to every component (≥ 0).
  double atol = 0.0;
  /// Finite-difference round-off allowance, in units of ε·|J|/h (≥ 0).
  double roundoff_factor = 100.0;

  /// Throws costate::Error naming the field, its value and the rule broken.
  void validate() const {
    COSTATE_CHECK(std::isfinite(step) && step > 0.0,
                  "GradientCheckOptions::step = " << costate::detail::format_value(step)
                                                  << " is invalid: it must be a positive "
                                                     "finite number");
    COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0,
                  "GradientCheckOptions::rtol = " << costate::detail::format_value(rtol)
                                                  << " is invalid: it must be >= 0");
    COSTATE_CHECK(std::isfinite(atol) && atol >= 0.0,
                  "GradientCheckOptions::atol = " << costate::detail::format_value(atol)
                                                  << " is invalid: it must be >= 0");
    COSTATE_CHECK(std::isfinite(roundoff_factor) && roundoff_factor >= 0.0,
                  "GradientCheckOptions::roundoff_factor = "
                      << costate::detail::format_value(roundoff_factor) << " is invalid: it must be >= 0");
  }
};

struct GradientCheckResult {
  std::vector<double> ad;         ///< the gradient checked (costate's, or the one given)
  std::vector<double> fd;         ///< central differences
  std::vector<double> abs_error;  ///< |ad_i − fd_i|
  std::vector<double> rel_error;  ///< |ad_i − fd_i| / max(|ad_i|, |fd_i|)
  std::vector<double> tolerance;  ///< allowed |ad_i − fd_i| (see the file comment)
  double max_rel_error = 0.0;
  int worst = -1;  ///< component with the largest abs_error / tolerance (-1 if n = 0)
  int failures = 0;
  bool passed = true;
  /// Per component, 1 when both |ad_i| and |fd_i| lie below what the check
  /// resolves (check_against_differences: the norm floor plus the
  /// differences' own noise) — its relative error means nothing there.
  /// Empty for check_gradient.
  std::vector<int> at_noise_floor;

  /// Names of the components at the noise floor ("" when none), given the
  /// components' names.
  std::string noise_floor_names(const std::vector<std::string>& names) const {
    std::string out;
    for (std::size_t i = 0; i < at_noise_floor.size() && i < names.size(); ++i)
      if (at_noise_floor[i]) out += (out.empty() ? "" : ", ") + names[i];
    return out;
  }

  /// One line per component, then the verdict.
  std::string report() const {
    std::ostringstream os;
    char line[200];
    os << "   i              ad              fd     abs error     rel error     tolerance\n";
    for (std::size_t i = 0; i < ad.size(); ++i) {
      std::snprintf(line, sizeof line, "%4zu  %14.7e  %14.7e  %12.5e  %12.5e  %12.5e%s\n", i,
                    ad[i], fd[i], abs_error[i], rel_error[i], tolerance[i],
                    abs_error[i] <= tolerance[i]
                        ? (i < at_noise_floor.size() && at_noise_floor[i] ? "  noise floor" : "")
                        : "  FAIL");
      os << line;
    }
    int floor = 0;
    for (int f : at_noise_floor) floor += f;
    if (floor > 0)
      os << floor << " component(s) at the noise floor: both values below what the differences "
            "resolve (tolerance column), so their relative error means nothing\n";
    std::snprintf(line, sizeof line, "max rel error %.3e; %d of %zu components outside tolerance: ",
                  max_rel_error, failures, ad.size());
    os << line << (passed ? "PASSED" : "FAILED") << "\n";
    return os.str();
  }
};

namespace detail {
template <class F>
GradientCheckResult check_gradient_core(F&& f, const std::vector<double>& x,
                                        std::vector<double> g,
                                        const GradientCheckOptions& options) {
  options.validate();
  const double eps = std::numeric_limits<double>::epsilon();
  const std::size_t n = x.size();
  GradientCheckResult r;
  r.ad = std::move(g);
  r.fd.resize(n);
  r.abs_error.resize(n);
  r.rel_error.resize(n);
  r.tolerance.resize(n);
  std::vector<double> q = x;
  double worst_ratio = -1.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double h = options.step * std::max(1.0, std::abs(x[i]));
    q[i] = x[i] + h;
    const double fp = static_cast<double>(f(std::as_const(q)));
    q[i] = x[i] - h;
    const double fm = static_cast<double>(f(std::as_const(q)));
    q[i] = x[i];
    // The step actually taken (x ± h rounds): (x + h) − (x − h).
    const double two_h = (x[i] + h) - (x[i] - h);
    r.fd[i] = (fp - fm) / two_h;
    const double scale = std::max(std::abs(r.ad[i]), std::abs(r.fd[i]));
    r.abs_error[i] = std::abs(r.ad[i] - r.fd[i]);
    r.rel_error[i] = scale > 0.0 ? r.abs_error[i] / scale : 0.0;
    r.tolerance[i] = options.rtol * scale + options.atol +
                     options.roundoff_factor * eps * std::max(std::abs(fp), std::abs(fm)) / h;
    // NaN anywhere fails the component.
    const bool ok = r.abs_error[i] <= r.tolerance[i];
    if (!ok) {
      ++r.failures;
      r.passed = false;
    }
    if (std::isfinite(r.rel_error[i]))
      r.max_rel_error = std::max(r.max_rel_error, r.rel_error[i]);
    else
      r.max_rel_error = std::numeric_limits<double>::infinity();
    const double ratio = r.tolerance[i] > 0.0 ? r.abs_error[i] / r.tolerance[i]
                                              : (r.abs_error[i] > 0.0 ? HUGE_VAL : 0.0);
    if (!(ratio <= worst_ratio)) {
      worst_ratio = std::isnan(ratio) ? HUGE_VAL : ratio;
      r.worst = static_cast<int>(i);
    }
  }
  return r;
}
}  // namespace detail

/// costate's reverse-mode gradient of the scalar callable f at x against
/// central finite differences (2n + 1 evaluations on double, one recording).
template <class F>
GradientCheckResult check_gradient(F&& f, const std::vector<double>& x,
                                   const GradientCheckOptions& options = {}) {
  options.validate();
  return detail::check_gradient_core(f, x, gradient(f, x), options);
}

/// A given gradient against central finite differences: `grad` is ∇J(x) as
/// a std::vector<double>, or a callable x ↦ ∇J(x) returning one (called
/// once, at x). f is only called on std::vector<double>.
template <class F, class G>
  requires detail::GradientSource<G>
GradientCheckResult check_gradient(F&& f, const std::vector<double>& x, G&& grad,
                                   const GradientCheckOptions& options = {}) {
  std::vector<double> g = detail::evaluate_gradient(grad, x);
  COSTATE_CHECK_EQ(g.size(), x.size(),
                   "ad::check_gradient: the gradient needs one entry per input x");
  return detail::check_gradient_core(f, x, std::move(g), options);
}

// ------------------------------------- differences that measure their noise

/// A Richardson-extrapolated central difference of φ'(0), the step it took
/// and its own error estimate.
struct Difference {
  double value = 0.0;
  double step = 0.0;    ///< h of the chosen R(h)
  double spread = 0.0;  ///< |R(h) − R(h/2)|: its error estimate (∞ when none is finite)
};

/// φ'(0) for a double callable φ(h) (e.g. h ↦ J(x + h d)): central
/// differences D(h) = (φ(h) − φ(−h)) / 2h at h_k = h0·2^−k, k < steps
/// (≥ 3), Richardson R_k = (4 D(h_k) − D(h_{k−1})) / 3, and the R_k closest
/// to R_{k+1}: too large a step leaves truncation (R changes with h), too
/// small a step the evaluation's noise over h (R jumps) — the plateau
/// between is where consecutive R agree, and spread = |R_k − R_{k+1}| there
/// is what the difference resolves. Non-finite φ values are skipped; when
/// no spread is finite, value is NaN. 2·steps evaluations of φ.
template <class Phi>
Difference richardson_difference(Phi&& phi, double h0, int steps) {
  COSTATE_CHECK(steps >= 3 && std::isfinite(h0) && h0 > 0.0,
                "ad::richardson_difference: needs steps >= 3 (got " << steps
                    << ") and a positive finite h0 (got " << costate::detail::format_value(h0) << ")");
  const auto n = static_cast<std::size_t>(steps);
  std::vector<double> h(n), D(n);
  for (std::size_t k = 0; k < n; ++k) {
    h[k] = h0 * std::ldexp(1.0, -static_cast<int>(k));
    D[k] = (static_cast<double>(phi(h[k])) - static_cast<double>(phi(-h[k]))) / (2.0 * h[k]);
  }
  Difference best;
  best.spread = std::numeric_limits<double>::infinity();
  for (std::size_t k = 1; k + 1 < n; ++k) {
    const double r0 = (4.0 * D[k] - D[k - 1]) / 3.0, r1 = (4.0 * D[k + 1] - D[k]) / 3.0;
    const double s = std::abs(r1 - r0);
    if (std::isfinite(s) && s < best.spread) {
      best.spread = s;
      best.value = r0;
      best.step = h[k];
    }
  }
  if (!std::isfinite(best.spread)) {
    best.value = std::numeric_limits<double>::quiet_NaN();
    best.step = h.back();
  }
  return best;
}

/// How check_against_differences judges a gradient. Component i passes when
///     |g_i − R_i| ≤ rtol·max(|g_i|, |R_i|) + norm_rtol·N + spread_factor·spread_i,
/// N = min(‖g‖₂, ‖R‖₂) over the finite entries (the smaller, so that a wrong
/// gradient cannot widen its own tolerance): a component far below the
/// gradient's norm is judged on the scale of the whole gradient, not on its
/// own (at an optimum the components are 1e-11 … 1e-4 of noise), and no
/// component is held to more than the differences resolve. A component is
/// at the noise floor when max(|g_i|, |R_i|) is below the last two terms.
struct DifferenceCheckOptions {
  double rtol = 1e-3;           ///< relative to the component (≥ 0)
  double norm_rtol = 1e-3;      ///< relative to the gradient's norm (≥ 0)
  double spread_factor = 3.0;   ///< multiples of the difference's spread (≥ 0)

  void validate() const {
    COSTATE_CHECK(std::isfinite(rtol) && rtol >= 0.0 && std::isfinite(norm_rtol) && norm_rtol >= 0.0 &&
                      std::isfinite(spread_factor) && spread_factor >= 0.0,
                  "DifferenceCheckOptions: rtol = " << costate::detail::format_value(rtol)
                      << ", norm_rtol = " << costate::detail::format_value(norm_rtol)
                      << ", spread_factor = " << costate::detail::format_value(spread_factor)
                      << " must all be finite and >= 0");
  }
};

/// The gradient g against the differences d (one per component, e.g. from
/// richardson_difference along e_i), judged as DifferenceCheckOptions says;
/// GradientCheckResult::at_noise_floor names the components below what the
/// check resolves. A non-finite difference or gradient entry fails its
/// component.
inline GradientCheckResult check_against_differences(std::vector<double> g,
                                                     const std::vector<Difference>& d,
                                                     const DifferenceCheckOptions& options = {}) {
  options.validate();
  COSTATE_CHECK_EQ(g.size(), d.size(), "ad::check_against_differences: one difference per component");
  const std::size_t n = g.size();
  double gn = 0.0, dn = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(g[i])) gn += g[i] * g[i];
    if (std::isfinite(d[i].value)) dn += d[i].value * d[i].value;
  }
  const double norm_floor = options.norm_rtol * std::sqrt(std::min(gn, dn));
  GradientCheckResult r;
  r.ad = std::move(g);
  r.fd.resize(n);
  r.abs_error.resize(n);
  r.rel_error.resize(n);
  r.tolerance.resize(n);
  r.at_noise_floor.assign(n, 0);
  double worst_ratio = -1.0;
  for (std::size_t i = 0; i < n; ++i) {
    r.fd[i] = d[i].value;
    r.abs_error[i] = std::abs(r.ad[i] - r.fd[i]);
    const double size = std::max(std::abs(r.ad[i]), std::abs(r.fd[i]));
    r.rel_error[i] = size > 0.0 ? r.abs_error[i] / size : 0.0;
    const double floor = norm_floor + options.spread_factor * d[i].spread;
    r.tolerance[i] = options.rtol * size + floor;
    const bool ok = std::isfinite(r.abs_error[i]) && r.abs_error[i] <= r.tolerance[i];
    r.at_noise_floor[i] = ok && size <= floor ? 1 : 0;
    if (!ok) ++r.failures;
    if (!r.at_noise_floor[i])
      r.max_rel_error = std::max(r.max_rel_error, std::isfinite(r.rel_error[i]) ? r.rel_error[i] : 1.0);
    const double ratio = std::isfinite(r.abs_error[i]) ? r.abs_error[i] / std::max(r.tolerance[i], 1e-300)
                                                       : std::numeric_limits<double>::max();
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      r.worst = static_cast<int>(i);
    }
  }
  r.passed = r.failures == 0;
  return r;
}

/// ∇J(x) against Richardson differences along every coordinate (steps
/// h0_i = largest_step·max(1, |x_i|), `steps` of them: 2·n·steps
/// evaluations of the double callable J), judged by check_against_differences.
template <class F>
GradientCheckResult check_gradient_with_noise(F&& f, const std::vector<double>& x,
                                              std::vector<double> g, double largest_step, int steps,
                                              const DifferenceCheckOptions& options = {},
                                              std::vector<Difference>* differences = nullptr) {
  COSTATE_CHECK_EQ(g.size(), x.size(), "ad::check_gradient_with_noise: one gradient entry per input x");
  std::vector<Difference> d(x.size());
  std::vector<double> q = x;
  for (std::size_t i = 0; i < x.size(); ++i) {
    d[i] = richardson_difference(
        [&](double h) {
          q[i] = x[i] + h;
          const double v = static_cast<double>(f(std::as_const(q)));
          q[i] = x[i];
          return v;
        },
        largest_step * std::max(1.0, std::abs(x[i])), steps);
  }
  GradientCheckResult r = check_against_differences(std::move(g), d, options);
  if (differences) *differences = std::move(d);
  return r;
}

}  // namespace costate::ad
