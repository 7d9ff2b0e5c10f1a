#pragma once
/// \file
/// costate::Vector<T> — the state vector every stepper, solver and adjoint
/// works on (the role of SUNDIALS' N_Vector).
///
/// A Vector is a Kokkos::View<T*> (the entries this rank owns) plus an
/// optional MPI communicator. Without a communicator (MPI_COMM_NULL, the
/// default) it is a serial vector and never calls MPI. With one, the entries
/// are this rank's part of a distributed vector: elementwise operations stay
/// local, reductions (dot, norms, sums) are collective over the communicator
/// and add the per-rank partials in rank order (see tensor/reduce.hpp), so a
/// given decomposition gives the same bits on every run.
///
/// Every operation runs as a Kokkos kernel on the vector's execution space.
/// Copies share data (View semantics); use `clone()` or `deep_copy()` for a
/// distinct vector. Operands of one operation must have the same local size
/// (checked, always on).
///
/// Limitations: reductions need an arithmetic T (double); elementwise
/// operations work for any T with the arithmetic used. `span()`/`operator[]`
/// need memory the host can read (HostSpace, or UVM).

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/tensor/reduce.hpp"

namespace costate {

template <class T, class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class Vector {
 public:
  using value_type = T;
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using view_type = Kokkos::View<T*, memory_space>;
  using const_view_type = Kokkos::View<const T*, memory_space>;
  static constexpr bool kHostAccessible =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;

  Vector() = default;

  /// `local_size` entries, zero-initialised, owned by this rank.
  explicit Vector(std::size_t local_size, MPI_Comm comm = MPI_COMM_NULL,
                  const std::string& label = "costate::Vector")
      : view_(label, local_size), comm_(comm) {}

  /// Wraps an existing View without copying (shares its data).
  explicit Vector(view_type view, MPI_Comm comm = MPI_COMM_NULL) : view_(view), comm_(comm) {}

  /// A vector holding a copy of `values` as this rank's entries.
  static Vector from(std::span<const T> values, MPI_Comm comm = MPI_COMM_NULL) {
    Vector v(values.size(), comm);
    auto host = Kokkos::create_mirror_view(v.view_);
    for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
    Kokkos::deep_copy(v.view_, host);
    return v;
  }
  static Vector from(std::initializer_list<T> values, MPI_Comm comm = MPI_COMM_NULL) {
    return from(std::span<const T>(values.begin(), values.size()), comm);
  }

  /// A new zeroed vector with the same local size and communicator.
  Vector clone() const { return Vector(size(), comm_, view_.label()); }

  /// Number of entries on this rank.
  std::size_t size() const { return view_.extent(0); }
  /// Number of entries over all ranks (collective when distributed).
  std::size_t global_size() const { return global_count(comm_, size()); }
  MPI_Comm comm() const { return comm_; }
  bool distributed() const { return comm_ != MPI_COMM_NULL; }

  const view_type& view() const { return view_; }
  T* data() const { return view_.data(); }

  /// Host view of the local entries (host-accessible memory only).
  std::span<T> span() const {
    static_assert(kHostAccessible, "Vector::span() needs host-accessible memory");
    return std::span<T>(view_.data(), size());
  }
  T& operator[](std::size_t i) const {
    static_assert(kHostAccessible, "Vector::operator[] needs host-accessible memory");
    return view_(i);
  }

  /// Copies the local entries to a std::vector (any memory space).
  std::vector<T> to_std_vector() const {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace{}, view_);
    return std::vector<T>(host.data(), host.data() + size());
  }

 private:
  view_type view_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

namespace detail {
template <class V>
[[gnu::cold, gnu::noinline]] void size_mismatch(const V& a, const V& b, const char* op) {
  COSTATE_CHECK_EQ(a.size(), b.size(), op << ": operands have different local sizes");
}
template <class V>
inline void check_same_size(const V& a, const V& b, const char* op) {
  if (a.size() != b.size()) [[unlikely]]
    size_mismatch(a, b, op);
}
template <class V>
auto policy(const V& v) {
  return Kokkos::RangePolicy<typename V::execution_space>(0, v.size());
}

/// Kernels on Kokkos::Serial run as plain inline loops: the same arithmetic
/// in the same order, without the per-launch cost of Kokkos' dispatch and
/// profiling hooks (which dominates for the small states of ODEs).
template <class E>
inline constexpr bool kRunsInline =
#if defined(KOKKOS_ENABLE_SERIAL)
    std::is_same_v<E, Kokkos::Serial>;
#else
    false;
#endif

/// A non-owning handle on a vector's entries — a pointer in the vector's
/// memory space, free to capture in kernels (no reference counting, no
/// View construction). Valid while the vector lives.
template <class T>
struct RawEntries {
  T* p;
  KOKKOS_INLINE_FUNCTION T& operator()(std::size_t i) const { return p[i]; }
};
template <class V>
RawEntries<typename V::value_type> raw(const V& v) {
  return {v.data()};
}

/// for i in [0, n): f(i), as a Kokkos kernel on V's execution space.
template <class V, class F>
void for_each(const char* label, const V& v, const F& f) {
  if constexpr (kRunsInline<typename V::execution_space>) {
    const std::size_t n = v.size();
    for (std::size_t i = 0; i < n; ++i) f(i);
  } else {
    Kokkos::parallel_for(label, policy(v), f);
  }
}

/// Σ_i f(i, acc) over V's index range, as a Kokkos reduction (local only).
template <class V, class F>
double sum_each(const char* label, const V& v, const F& f) {
  double s = 0.0;
  if constexpr (kRunsInline<typename V::execution_space>) {
    const std::size_t n = v.size();
    for (std::size_t i = 0; i < n; ++i) f(i, s);
  } else {
    Kokkos::parallel_reduce(label, policy(v), f, s);
  }
  return s;
}
}  // namespace detail

// ---------------------------------------------------------------- elementwise

/// z_i = c
template <class T, class E>
void fill(const Vector<T, E>& z, T c) {
  auto zv = detail::raw(z);
  detail::for_each("costate::fill", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = c; });
}

/// z_i = x_i (deep copy)
template <class T, class E>
void deep_copy(const Vector<T, E>& z, const Vector<T, E>& x) {
  detail::check_same_size(z, x, "deep_copy");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  detail::for_each("costate::deep_copy", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i); });
}

/// z_i = c x_i
template <class T, class E>
void scale(const Vector<T, E>& z, T c, const Vector<T, E>& x) {
  detail::check_same_size(z, x, "scale");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  detail::for_each("costate::scale", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = c * xv(i); });
}

/// y_i += a x_i
template <class T, class E>
void axpy(T a, const Vector<T, E>& x, const Vector<T, E>& y) {
  detail::check_same_size(x, y, "axpy");
  auto xv = detail::raw(x);
  auto yv = detail::raw(y);
  detail::for_each("costate::axpy", y, KOKKOS_LAMBDA(std::size_t i) { yv(i) += a * xv(i); });
}

/// z_i = a x_i + b y_i   (z may alias x or y)
template <class T, class E>
void linear_sum(const Vector<T, E>& z, T a, const Vector<T, E>& x, T b, const Vector<T, E>& y) {
  detail::check_same_size(z, x, "linear_sum");
  detail::check_same_size(z, y, "linear_sum");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  auto yv = detail::raw(y);
  detail::for_each("costate::linear_sum", z,
                   KOKKOS_LAMBDA(std::size_t i) { zv(i) = a * xv(i) + b * yv(i); });
}

/// Most vectors one linear_combination kernel reads; longer combinations are
/// done in several passes.
inline constexpr std::size_t kMaxFusedVectors = 8;

namespace detail {
template <class T, class E, class C, int N>
struct LinearCombination {
  RawEntries<T> z;
  RawEntries<T> x[N];
  C c[N];
  bool accumulate;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    T s = accumulate ? z(i) : T(0);
    for (int k = 0; k < N; ++k) s += c[k] * x[k](i);
    z(i) = s;
  }
};

template <int N, class T, class E, class C>
void linear_combination_fixed(const Vector<T, E>& z, const C* c, const Vector<T, E>* const* x,
                              bool accumulate) {
  LinearCombination<T, E, C, N> op{};
  op.z = raw(z);
  op.accumulate = accumulate;
  for (int k = 0; k < N; ++k) {
    check_same_size(z, *x[k], "linear_combination");
    op.x[k] = raw(*x[k]);
    op.c[k] = c[k];
  }
  for_each("costate::linear_combination", z, op);
}
}  // namespace detail

/// z_i = Σ_k c_k x_k,i  — one fused kernel for up to kMaxFusedVectors terms
/// (the stage sums of Runge–Kutta methods), unrolled for each term count.
/// The coefficients are of the vector's type T or of any type that
/// multiplies it (double coefficients for a vector of AD values).
/// z may alias one of the x_k only if that x_k is the first term.
template <class T, class E, class C>
void linear_combination(const Vector<T, E>& z, std::span<const C> c,
                        std::span<const Vector<T, E>* const> x) {
  COSTATE_CHECK_EQ(c.size(), x.size(), "linear_combination: one coefficient per vector");
  if (c.empty()) {
    fill(z, T(0));
    return;
  }
  bool accumulate = false;
  for (std::size_t start = 0; start < c.size(); start += kMaxFusedVectors) {
    const std::size_t count = std::min(kMaxFusedVectors, c.size() - start);
    const C* cc = c.data() + start;
    const Vector<T, E>* const* xx = x.data() + start;
    switch (count) {
      case 1: detail::linear_combination_fixed<1>(z, cc, xx, accumulate); break;
      case 2: detail::linear_combination_fixed<2>(z, cc, xx, accumulate); break;
      case 3: detail::linear_combination_fixed<3>(z, cc, xx, accumulate); break;
      case 4: detail::linear_combination_fixed<4>(z, cc, xx, accumulate); break;
      case 5: detail::linear_combination_fixed<5>(z, cc, xx, accumulate); break;
      case 6: detail::linear_combination_fixed<6>(z, cc, xx, accumulate); break;
      case 7: detail::linear_combination_fixed<7>(z, cc, xx, accumulate); break;
      default: detail::linear_combination_fixed<8>(z, cc, xx, accumulate); break;
    }
    accumulate = true;
  }
}

/// z_i = x_i y_i
template <class T, class E>
void product(const Vector<T, E>& z, const Vector<T, E>& x, const Vector<T, E>& y) {
  detail::check_same_size(z, x, "product");
  detail::check_same_size(z, y, "product");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  auto yv = detail::raw(y);
  detail::for_each("costate::product", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) * yv(i); });
}

/// z_i = x_i / y_i
template <class T, class E>
void divide(const Vector<T, E>& z, const Vector<T, E>& x, const Vector<T, E>& y) {
  detail::check_same_size(z, x, "divide");
  detail::check_same_size(z, y, "divide");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  auto yv = detail::raw(y);
  detail::for_each("costate::divide", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) / yv(i); });
}

/// z_i = |x_i|
template <class T, class E>
void abs(const Vector<T, E>& z, const Vector<T, E>& x) {
  detail::check_same_size(z, x, "abs");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  detail::for_each(
      "costate::abs", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) < T(0) ? -xv(i) : xv(i); });
}

/// z_i = x_i + c
template <class T, class E>
void add_constant(const Vector<T, E>& z, const Vector<T, E>& x, T c) {
  detail::check_same_size(z, x, "add_constant");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  detail::for_each("costate::add_constant", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) + c; });
}

/// z_i = f(x_i) for a device-callable functor f.
template <class T, class E, class F>
void transform(const Vector<T, E>& z, const Vector<T, E>& x, F f) {
  detail::check_same_size(z, x, "transform");
  auto zv = detail::raw(z);
  auto xv = detail::raw(x);
  detail::for_each("costate::transform", z, KOKKOS_LAMBDA(std::size_t i) { zv(i) = f(xv(i)); });
}

// ----------------------------------------------------------------- reductions
// All collective over the vectors' communicator.

/// Σ_i x_i y_i
template <class T, class E>
double dot(const Vector<T, E>& x, const Vector<T, E>& y) {
  static_assert(std::is_arithmetic_v<T>, "dot needs an arithmetic value type");
  detail::check_same_size(x, y, "dot");
  auto xv = detail::raw(x);
  auto yv = detail::raw(y);
  const double local = detail::sum_each(
      "costate::dot", x,
      KOKKOS_LAMBDA(std::size_t i, double& s) { s += double(xv(i)) * double(yv(i)); });
  return global_sum(x.comm(), local);
}

/// Σ_i x_i
template <class T, class E>
double sum(const Vector<T, E>& x) {
  static_assert(std::is_arithmetic_v<T>, "sum needs an arithmetic value type");
  auto xv = detail::raw(x);
  const double local = detail::sum_each("costate::sum", x,
                                        KOKKOS_LAMBDA(std::size_t i, double& s) { s += xv(i); });
  return global_sum(x.comm(), local);
}

/// ‖x‖₂
template <class T, class E>
double l2_norm(const Vector<T, E>& x) {
  return std::sqrt(dot(x, x));
}

/// max_i |x_i| (NaN entries make the result NaN)
template <class T, class E>
double max_norm(const Vector<T, E>& x) {
  static_assert(std::is_arithmetic_v<T>, "max_norm needs an arithmetic value type");
  auto xv = detail::raw(x);
  double local = 0.0;
  Kokkos::parallel_reduce(
      "costate::max_norm", detail::policy(x),
      KOKKOS_LAMBDA(std::size_t i, double& m) {
        const double a = xv(i) < 0 ? -double(xv(i)) : double(xv(i));
        if (a > m || a != a) m = a;
      },
      Kokkos::Max<double>(local));
  if (x.size() == 0) local = 0.0;
  // NaN propagates: any rank's NaN makes the sum NaN.
  const double nan_probe = global_sum(x.comm(), local != local ? local : 0.0);
  if (nan_probe != nan_probe) return nan_probe;
  return global_max(x.comm(), local);
}

/// Weighted root-mean-square norm sqrt( (1/N) Σ_i (x_i w_i)² ), N the global
/// size — SUNDIALS' N_VWrmsNorm.
template <class T, class E>
double wrms_norm(const Vector<T, E>& x, const Vector<T, E>& w) {
  static_assert(std::is_arithmetic_v<T>, "wrms_norm needs an arithmetic value type");
  detail::check_same_size(x, w, "wrms_norm");
  auto xv = detail::raw(x);
  auto wv = detail::raw(w);
  double local[2] = {0.0, static_cast<double>(x.size())};
  local[0] = detail::sum_each(
      "costate::wrms_norm", x, KOKKOS_LAMBDA(std::size_t i, double& s) {
        const double v = double(xv(i)) * double(wv(i));
        s += v * v;
      });
  global_sum(x.comm(), local, 2);
  COSTATE_CHECK_GT(local[1], 0.0, "wrms_norm of an empty vector");
  return std::sqrt(local[0] / local[1]);
}

/// True when every entry on every rank is finite.
template <class T, class E>
bool all_finite(const Vector<T, E>& x) {
  static_assert(std::is_arithmetic_v<T>, "all_finite needs an arithmetic value type");
  auto xv = detail::raw(x);
  const double bad = detail::sum_each(
      "costate::all_finite", x, KOKKOS_LAMBDA(std::size_t i, double& b) {
        const double v = xv(i);
        if (!(v - v == 0.0)) b += 1.0;  // inf - inf and NaN - NaN are NaN
      });
  return global_sum(x.comm(), bad) == 0.0;
}

}  // namespace costate
