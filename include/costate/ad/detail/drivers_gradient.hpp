#pragma once
// ad::value_and_gradient and ad::gradient (documented with the other drivers
// in costate/ad/drivers.hpp). Kept apart so that verification.hpp, which
// needs only the gradient, does not pull in Eigen.

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/detail/drivers_support.hpp"
#include "costate/ad/reverse.hpp"

namespace costate::ad {

/// f(x) and ∇f(x).
struct ValueAndGradient {
  double value = 0.0;
  std::vector<double> gradient;
};

/// f(x) and ∇f(x) by one reverse sweep: inputs registered on
/// Tape::active(), f recorded once, its output seeded with 1.
template <class F>
ValueAndGradient value_and_gradient(F&& f, const std::vector<double>& x) {
  detail::TapeSection<double> section(Tape::active());
  const std::vector<Real> xr = section.register_inputs(x);
  auto&& out = f(xr);
  static_assert(!detail::OutputVector<std::remove_cvref_t<decltype(out)>>,
                "ad::gradient: the callable returns a vector; gradient needs a scalar "
                "function (use ad::jacobian or ad::vjp for vector functions)");
  Real y = out;
  section.tape().register_output(y);
  y.set_gradient(1.0);
  section.evaluate();
  ValueAndGradient r;
  r.value = y.value();
  r.gradient.resize(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) r.gradient[j] = xr[j].gradient();
  return r;
}

/// ∇f(x) (see value_and_gradient).
template <class F>
std::vector<double> gradient(F&& f, const std::vector<double>& x) {
  return value_and_gradient(std::forward<F>(f), x).gradient;
}

}  // namespace costate::ad
