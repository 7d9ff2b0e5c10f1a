#pragma once
// Relative errors for tests: one definition, used by every test that compares
// vectors of derivatives.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace costate::test {

/// max_i |v_i| (0 for an empty vector).
inline double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

/// max_i |a_i − b_i| / max_j |b_j|: the error of `a` relative to the size of
/// the reference `b` (not entry by entry, so that a tiny entry of b does not
/// turn round-off into a large relative error). Sizes must agree.
inline double max_rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  const double scale = std::max(max_abs(b), 1e-300);
  double m = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / scale);
  return a.size() == b.size() ? m : INFINITY;
}

/// max_i |a_i − b_i| / max(1, max_j |scale_j|): the error relative to the
/// size of `scale` (the reference, usually b), but absolute when that size is
/// below 1 — for quantities that may be near zero (log-likelihood gradients,
/// values compared across ranks). Sizes of a and b must agree.
inline double max_floored_err(const std::vector<double>& a, const std::vector<double>& b,
                              const std::vector<double>& scale) {
  const double s = std::max(1.0, max_abs(scale));
  double m = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return a.size() == b.size() ? m / s : INFINITY;
}
inline double max_floored_err(const std::vector<double>& a, const std::vector<double>& b) {
  return max_floored_err(a, b, b);
}

/// |a − b| / max(1, |b|) for scalars (max_floored_err's floor).
inline double floored_err(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

/// |a − b| / |b| for scalars.
inline double rel_err(double a, double b) { return std::abs(a - b) / std::max(1e-300, std::abs(b)); }

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace costate::test
