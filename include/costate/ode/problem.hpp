#pragma once
/// \file
/// ode::Problem — an initial-value problem y' = f(t, y, p), y(t0) = y0, on
/// [t0, t1], for a model templated on its scalar type:
///
///     struct Model {
///       template <class T>
///       void rhs(double t, std::span<const T> y, std::span<const T> p,
///                std::span<T> dydt) const;
///     };
///
/// The model is written once; costate evaluates it with double for the
/// simulation and with its AD types for derivatives. `rhs` must write every
/// entry of dydt and must not keep the spans.

#include <array>
#include <concepts>
#include <span>
#include <vector>

namespace costate::ode {

/// A type with a `rhs` member template callable with double.
template <class M>
concept Model = requires(const M& m, double t, std::span<const double> y,
                         std::span<const double> p, std::span<double> dydt) {
  m.template rhs<double>(t, y, p, dydt);
};

template <Model M>
struct Problem {
  /// The right-hand side (held by value; models are small and stateless or
  /// own their data).
  M model;
  /// Initial state y(t0).
  std::vector<double> y0;
  /// Parameters p.
  std::vector<double> p;
  /// Integration interval {t0, t1}, t1 > t0.
  std::array<double, 2> tspan{0.0, 1.0};
  /// Times at which the solution is reported, ascending within [t0, t1].
  /// Empty: report t0 and t1.
  std::vector<double> output_times{};

  double t0() const { return tspan[0]; }
  double t1() const { return tspan[1]; }
  std::size_t n_states() const { return y0.size(); }
};

}  // namespace costate::ode
