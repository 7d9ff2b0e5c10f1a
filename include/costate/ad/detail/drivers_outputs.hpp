#pragma once
// Internals shared by the derivative drivers (drivers.hpp, sparsity.hpp,
// sparse_jacobian.hpp, verification.hpp): the shape of a callable's result.
// Not a public header of its own; no dependencies.

#include <concepts>
#include <cstddef>

namespace costate::ad::detail {

/// A callable's result is a vector of outputs when it has size() and [] —
/// std::vector<T>, std::array, an Eigen vector; anything else (T, or a
/// reverse-mode expression of T) is one scalar output.
template <class R>
concept OutputVector = requires(const R& r, std::size_t i) {
  { r.size() } -> std::convertible_to<std::size_t>;
  r[i];
};

/// Number of outputs of a result: its size, or 1 for a scalar.
template <class R>
std::size_t output_count(const R& r) {
  if constexpr (OutputVector<R>)
    return static_cast<std::size_t>(r.size());
  else
    return 1;
}

/// Output i of a result (the result itself for a scalar).
template <class R>
decltype(auto) output_at(const R& r, std::size_t i) {
  if constexpr (OutputVector<R>) {
    return r[i];
  } else {
    (void)i;
    return (r);
  }
}

}  // namespace costate::ad::detail
