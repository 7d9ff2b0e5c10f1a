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

  /// Serial vector holding a copy of `values`.
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
void check_same_size(const V& a, const V& b, const char* op) {
  COSTATE_CHECK_EQ(a.size(), b.size(), op << ": operands have different local sizes");
}
template <class V>
auto policy(const V& v) {
  return Kokkos::RangePolicy<typename V::execution_space>(0, v.size());
}
}  // namespace detail

// ---------------------------------------------------------------- elementwise

/// z_i = c
template <class T, class E>
void fill(const Vector<T, E>& z, T c) {
  Kokkos::deep_copy(z.view(), c);
}

/// z_i = x_i (deep copy)
template <class T, class E>
void deep_copy(const Vector<T, E>& z, const Vector<T, E>& x) {
  detail::check_same_size(z, x, "deep_copy");
  Kokkos::deep_copy(z.view(), x.view());
}

/// z_i = c x_i
template <class T, class E>
void scale(const Vector<T, E>& z, T c, const Vector<T, E>& x) {
  detail::check_same_size(z, x, "scale");
  auto zv = z.view();
  auto xv = x.view();
  Kokkos::parallel_for("costate::scale", detail::policy(z),
                       KOKKOS_LAMBDA(std::size_t i) { zv(i) = c * xv(i); });
}

/// y_i += a x_i
template <class T, class E>
void axpy(T a, const Vector<T, E>& x, const Vector<T, E>& y) {
  detail::check_same_size(x, y, "axpy");
  auto xv = x.view();
  auto yv = y.view();
  Kokkos::parallel_for("costate::axpy", detail::policy(y),
                       KOKKOS_LAMBDA(std::size_t i) { yv(i) += a * xv(i); });
}

/// z_i = a x_i + b y_i   (z may alias x or y)
template <class T, class E>
void linear_sum(const Vector<T, E>& z, T a, const Vector<T, E>& x, T b, const Vector<T, E>& y) {
  detail::check_same_size(z, x, "linear_sum");
  detail::check_same_size(z, y, "linear_sum");
  auto zv = z.view();
  auto xv = x.view();
  auto yv = y.view();
  Kokkos::parallel_for("costate::linear_sum", detail::policy(z),
                       KOKKOS_LAMBDA(std::size_t i) { zv(i) = a * xv(i) + b * yv(i); });
}

/// Most vectors one linear_combination kernel reads; longer combinations are
/// done in several passes.
inline constexpr std::size_t kMaxFusedVectors = 8;

namespace detail {
template <class T, class E>
struct LinearCombination {
  typename Vector<T, E>::view_type z;
  typename Vector<T, E>::view_type x[kMaxFusedVectors];
  T c[kMaxFusedVectors];
  int count;
  bool accumulate;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    T s = accumulate ? z(i) : T(0);
    for (int k = 0; k < count; ++k) s += c[k] * x[k](i);
    z(i) = s;
  }
};
}  // namespace detail

/// z_i = Σ_k c_k x_k,i  — one fused kernel for up to kMaxFusedVectors terms
/// (the stage sums of Runge–Kutta methods). z may alias one of the x_k only
/// if that x_k is the first term.
template <class T, class E>
void linear_combination(const Vector<T, E>& z, std::span<const T> c,
                        std::span<const Vector<T, E>* const> x) {
  COSTATE_CHECK_EQ(c.size(), x.size(), "linear_combination: one coefficient per vector");
  bool accumulate = false;
  if (c.empty()) {
    fill(z, T(0));
    return;
  }
  for (std::size_t start = 0; start < c.size(); start += kMaxFusedVectors) {
    detail::LinearCombination<T, E> op{};
    op.z = z.view();
    op.count = 0;
    op.accumulate = accumulate;
    for (std::size_t k = start; k < c.size() && k < start + kMaxFusedVectors; ++k) {
      detail::check_same_size(z, *x[k], "linear_combination");
      op.x[op.count] = x[k]->view();
      op.c[op.count] = c[k];
      ++op.count;
    }
    Kokkos::parallel_for("costate::linear_combination", detail::policy(z), op);
    accumulate = true;
  }
}

/// z_i = x_i y_i
template <class T, class E>
void product(const Vector<T, E>& z, const Vector<T, E>& x, const Vector<T, E>& y) {
  detail::check_same_size(z, x, "product");
  detail::check_same_size(z, y, "product");
  auto zv = z.view();
  auto xv = x.view();
  auto yv = y.view();
  Kokkos::parallel_for("costate::product", detail::policy(z),
                       KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) * yv(i); });
}

/// z_i = x_i / y_i
template <class T, class E>
void divide(const Vector<T, E>& z, const Vector<T, E>& x, const Vector<T, E>& y) {
  detail::check_same_size(z, x, "divide");
  detail::check_same_size(z, y, "divide");
  auto zv = z.view();
  auto xv = x.view();
  auto yv = y.view();
  Kokkos::parallel_for("costate::divide", detail::policy(z),
                       KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) / yv(i); });
}

/// z_i = |x_i|
template <class T, class E>
void abs(const Vector<T, E>& z, const Vector<T, E>& x) {
  detail::check_same_size(z, x, "abs");
  auto zv = z.view();
  auto xv = x.view();
  Kokkos::parallel_for(
      "costate::abs", detail::policy(z), KOKKOS_LAMBDA(std::size_t i) {
        zv(i) = xv(i) < T(0) ? -xv(i) : xv(i);
      });
}

/// z_i = x_i + c
template <class T, class E>
void add_constant(const Vector<T, E>& z, const Vector<T, E>& x, T c) {
  detail::check_same_size(z, x, "add_constant");
  auto zv = z.view();
  auto xv = x.view();
  Kokkos::parallel_for("costate::add_constant", detail::policy(z),
                       KOKKOS_LAMBDA(std::size_t i) { zv(i) = xv(i) + c; });
}

/// z_i = f(x_i) for a device-callable functor f.
template <class T, class E, class F>
void transform(const Vector<T, E>& z, const Vector<T, E>& x, F f) {
  detail::check_same_size(z, x, "transform");
  auto zv = z.view();
  auto xv = x.view();
  Kokkos::parallel_for("costate::transform", detail::policy(z),
                       KOKKOS_LAMBDA(std::size_t i) { zv(i) = f(xv(i)); });
}

// ----------------------------------------------------------------- reductions
// All collective over the vectors' communicator.

/// Σ_i x_i y_i
template <class T, class E>
double dot(const Vector<T, E>& x, const Vector<T, E>& y) {
  static_assert(std::is_arithmetic_v<T>, "dot needs an arithmetic value type");
  detail::check_same_size(x, y, "dot");
  auto xv = x.view();
  auto yv = y.view();
  double local = 0.0;
  Kokkos::parallel_reduce(
      "costate::dot", detail::policy(x),
      KOKKOS_LAMBDA(std::size_t i, double& s) { s += double(xv(i)) * double(yv(i)); }, local);
  return global_sum(x.comm(), local);
}

/// Σ_i x_i
template <class T, class E>
double sum(const Vector<T, E>& x) {
  static_assert(std::is_arithmetic_v<T>, "sum needs an arithmetic value type");
  auto xv = x.view();
  double local = 0.0;
  Kokkos::parallel_reduce(
      "costate::sum", detail::policy(x), KOKKOS_LAMBDA(std::size_t i, double& s) { s += xv(i); },
      local);
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
  auto xv = x.view();
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
  auto xv = x.view();
  auto wv = w.view();
  double local[2] = {0.0, static_cast<double>(x.size())};
  Kokkos::parallel_reduce(
      "costate::wrms_norm", detail::policy(x),
      KOKKOS_LAMBDA(std::size_t i, double& s) {
        const double v = double(xv(i)) * double(wv(i));
        s += v * v;
      },
      local[0]);
  global_sum(x.comm(), local, 2);
  COSTATE_CHECK_GT(local[1], 0.0, "wrms_norm of an empty vector");
  return std::sqrt(local[0] / local[1]);
}

/// True when every entry on every rank is finite.
template <class T, class E>
bool all_finite(const Vector<T, E>& x) {
  static_assert(std::is_arithmetic_v<T>, "all_finite needs an arithmetic value type");
  auto xv = x.view();
  int bad = 0;
  Kokkos::parallel_reduce(
      "costate::all_finite", detail::policy(x),
      KOKKOS_LAMBDA(std::size_t i, int& b) {
        const double v = xv(i);
        if (!(v - v == 0.0)) b += 1;  // inf - inf and NaN - NaN are NaN
      },
      bad);
  return global_sum(x.comm(), static_cast<double>(bad)) == 0.0;
}

}  // namespace costate
