#pragma once
/// \file
/// ad::Reverse<T> — reverse-mode AD by operator overloading on a Jacobian
/// tape (ad::Real = Reverse<double>; Reverse<Dual<double,1>> gives
/// Hessian–vector products, forward over reverse).
///
/// A Reverse holds a value and an identifier on this thread's
/// BasicTape<T>::active(); identifier 0 means passive (a constant: it records
/// nothing). While the tape records, every assignment of an expression makes
/// ONE statement: the expression templates below compute the value and the
/// local partials of the whole right-hand side at once, e.g.
///     w = sin(u) * v + 2 * u     records   ∂w/∂u = cos(u) v + 2,  ∂w/∂v = sin(u)
/// as a statement with two arguments (u appears twice; both entries are kept
/// and summed by the sweep).
///
///     ad::Tape& tape = ad::Tape::active();
///     tape.start_recording();
///     ad::Real x = 2.0;  tape.register_input(x);
///     ad::Real f = 3.0 * x * x + 4.0;  tape.register_output(f);
///     tape.stop_recording();
///     f.set_gradient(1.0);  tape.evaluate();  x.gradient();   // 12
///
/// Do not store an expression in `auto` (`auto e = a * b;` keeps references
/// to its operands); assign it to a Reverse.
///
/// Non-smooth and singular points (the same choices as ad::Dual):
///   abs/fabs at 0: partial 0;  min/max/fmin/fmax at ties: the first
///   argument's partial (1, the other 0);  sqrt at 0: partial +inf (the
///   sweep skips zero adjoints, so it only matters when the adjoint is
///   non-zero; set_check_finite(true) reports it);  pow(x, y): ∂/∂y =
///   pow(x,y)·log(x) for x > 0 and 0 for x ≤ 0 (pow of a negative base is only
///   real for integer y, where y is then a constant of the statement);
///   atan2 and hypot at the origin: partials 0;
///   floor/ceil/round/trunc: passive results (zero derivative).
///
/// Misuse is an error, not garbage: using as an argument a value recorded on
/// another thread's tape or before reset(); seeding or reading the adjoint of
/// a passive value with set_gradient (gradient() of a passive value is 0 by
/// definition).

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "costate/ad/tape.hpp"

namespace costate::ad {

/// Marker base of every reverse-mode expression (CRTP).
template <class E>
struct Expr {
  const E& self() const { return static_cast<const E&>(*this); }
};

template <class X>
inline constexpr bool is_expr_v = std::is_base_of_v<Expr<X>, X>;

namespace detail {

/// Elementary functions of the scalar type T (double, or an AD type found by
/// argument-dependent lookup, such as Dual).
namespace scalar {
using std::abs;
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::cbrt;
using std::ceil;
using std::cos;
using std::cosh;
using std::erf;
using std::erfc;
using std::exp;
using std::expm1;
using std::floor;
using std::hypot;
using std::log;
using std::log10;
using std::log1p;
using std::log2;
using std::pow;
using std::round;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;
using std::trunc;
#define COSTATE_AD_SCALAR_FN(name) \
  template <class X>               \
  inline X name##_(const X& x) {   \
    return name(x);                \
  }
COSTATE_AD_SCALAR_FN(abs)
COSTATE_AD_SCALAR_FN(acos)
COSTATE_AD_SCALAR_FN(acosh)
COSTATE_AD_SCALAR_FN(asin)
COSTATE_AD_SCALAR_FN(asinh)
COSTATE_AD_SCALAR_FN(atan)
COSTATE_AD_SCALAR_FN(atanh)
COSTATE_AD_SCALAR_FN(cbrt)
COSTATE_AD_SCALAR_FN(ceil)
COSTATE_AD_SCALAR_FN(cos)
COSTATE_AD_SCALAR_FN(cosh)
COSTATE_AD_SCALAR_FN(erf)
COSTATE_AD_SCALAR_FN(erfc)
COSTATE_AD_SCALAR_FN(exp)
COSTATE_AD_SCALAR_FN(expm1)
COSTATE_AD_SCALAR_FN(floor)
COSTATE_AD_SCALAR_FN(log)
COSTATE_AD_SCALAR_FN(log10)
COSTATE_AD_SCALAR_FN(log1p)
COSTATE_AD_SCALAR_FN(log2)
COSTATE_AD_SCALAR_FN(round)
COSTATE_AD_SCALAR_FN(sin)
COSTATE_AD_SCALAR_FN(sinh)
COSTATE_AD_SCALAR_FN(sqrt)
COSTATE_AD_SCALAR_FN(tan)
COSTATE_AD_SCALAR_FN(tanh)
COSTATE_AD_SCALAR_FN(trunc)
#undef COSTATE_AD_SCALAR_FN
template <class X, class Y>
inline auto pow_(const X& x, const Y& y) {
  return pow(x, y);
}
template <class X, class Y>
inline auto atan2_(const X& y, const Y& x) {
  return atan2(y, x);
}
template <class X, class Y>
inline auto hypot_(const X& x, const Y& y) {
  return hypot(x, y);
}
}  // namespace scalar

/// True when an adjoint is exactly zero and its statement can be skipped.
/// Only for plain arithmetic types: an AD adjoint (Dual) may carry non-zero
/// tangents behind a zero value.
template <class T>
inline bool is_zero(const T& x) {
  if constexpr (std::is_arithmetic_v<T>)
    return x == T(0);
  else
    return false;
}

/// Sums the partials of repeated arguments (x*x records x once, with 2x):
/// fewer arguments to store and to sweep. Returns the new count.
/// Streams the n gathered arguments of a statement with K leaves to `out_p`/
/// `out_i`, summing the partials of repeated identifiers (x*x records x once,
/// with 2x): fewer arguments to store and to sweep. Returns the count
/// written. K is a compile-time bound, so the loops unroll and the local
/// arrays stay in registers; only the final stores touch tape memory.
template <std::size_t K, class T>
inline std::size_t merge_into(T* partials, std::int32_t* indices, std::size_t n, T* out_p,
                              std::int32_t* out_i) {
#ifdef COSTATE_AD_NO_MERGE
  for (std::size_t k = 0; k < n; ++k) {
    out_p[k] = partials[k];
    out_i[k] = indices[k];
  }
  return n;
#else
  // Each argument is compared with the distinct ones kept so far (early
  // exit). The code is inlined per expression type, so its branches follow
  // the statement's shape and predict well when a statement is recorded
  // repeatedly; the arguments sit in a local buffer, so the comparisons never
  // wait on tape memory. Only the final arguments are stored to the tape.
  std::size_t m = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int32_t id = indices[k];
    std::size_t j = 0;
    while (j < m && indices[j] != id) ++j;
    if (j < m) {
      partials[j] += partials[k];
    } else {
      partials[m] = partials[k];
      indices[m] = id;
      ++m;
    }
  }
  for (std::size_t k = 0; k < m; ++k) {
    out_p[k] = partials[k];
    out_i[k] = indices[k];
  }
  return m;
#endif
  (void)K;
}

/// Operands: Reverse leaves by reference, sub-expressions by value.
template <class E>
struct stored {
  using type = E;
};
template <class T>
struct stored<Reverse<T>> {
  using type = const Reverse<T>&;
};
template <class E>
using stored_t = typename stored<E>::type;

/// Where a statement's arguments are written.
template <class T>
struct ArgumentWriter {
  T* partials;
  std::int32_t* indices;
  std::size_t count;
  std::uint32_t tag;
  const BasicTape<T>* tape;
  void add(const T& partial, std::int32_t index, std::uint32_t value_tag) {
    if (value_tag != tag) [[unlikely]]
      tape->throw_foreign(index);
    partials[count] = partial;
    indices[count] = index;
    ++count;
  }
};

}  // namespace detail

// -------------------------------------------------------------------- Reverse

template <class T>
class Reverse : public Expr<Reverse<T>> {
 public:
  using value_type = T;
  using tape_type = BasicTape<T>;
  static constexpr std::size_t kLeaves = 1;

  /// Passive zero.
  Reverse() = default;
  /// Passive constant.
  Reverse(const T& v) : value_(v) {}
  template <class A>
    requires(std::is_arithmetic_v<A> && !std::is_same_v<A, T>)
  Reverse(A v) : value_(T(v)) {}
  Reverse(const Reverse&) = default;
  /// Records `e` as one statement (while the tape records).
  template <class E>
    requires(is_expr_v<E> && !std::is_same_v<E, Reverse>)
  Reverse(const Expr<E>& e) {
    assign(e.self());
  }

  Reverse& operator=(const Reverse&) = default;
  template <class E>
    requires(is_expr_v<E> && !std::is_same_v<E, Reverse>)
  Reverse& operator=(const Expr<E>& e) {
    assign(e.self());
    return *this;
  }
  /// Becomes a passive constant.
  Reverse& operator=(const T& v) {
    value_ = v;
    index_ = 0;
    return *this;
  }
  template <class A>
    requires(std::is_arithmetic_v<A> && !std::is_same_v<A, T>)
  Reverse& operator=(A v) {
    return *this = T(v);
  }

  template <class E>
  Reverse& operator+=(const Expr<E>& e);
  template <class E>
  Reverse& operator-=(const Expr<E>& e);
  template <class E>
  Reverse& operator*=(const Expr<E>& e);
  template <class E>
  Reverse& operator/=(const Expr<E>& e);
  Reverse& operator+=(const T& c);
  Reverse& operator-=(const T& c);
  Reverse& operator*=(const T& c);
  Reverse& operator/=(const T& c);

  const T& value() const { return value_; }
  /// Changes the value only (the identifier stays): for inputs between
  /// recordings.
  void set_value(const T& v) { value_ = v; }
  std::int32_t index() const { return index_; }
  std::uint32_t tag() const { return tag_; }
  bool is_active() const { return index_ != 0; }

  /// Adjoint of this value after a sweep; 0 for a passive value.
  T gradient() const {
    if (index_ == 0) return T(0);
    const tape_type& tape = tape_type::active();
    if (tag_ != tape.tag()) tape.throw_foreign(index_);
    return tape.gradient(index_);
  }
  /// Seeds this value's adjoint (before evaluate()). Error when passive.
  void set_gradient(const T& g) {
    tape_type& tape = tape_type::active();
    if (index_ != 0 && tag_ != tape.tag()) tape.throw_foreign(index_);
    tape.gradient_ref(index_) = g;
  }

  // ---- expression interface ----
  void push(detail::ArgumentWriter<T>& w, const T& seed) const {
    if (index_ != 0) w.add(seed, index_, tag_);
  }

  // ---- for BasicTape ----
  void set_identity(std::int32_t index, std::uint32_t tag) {
    index_ = index;
    tag_ = tag;
  }

 private:
  template <class E>
  void assign(const E& e) {
    tape_type& tape = tape_type::active();
    if (tape.is_recording()) {
      static_assert(E::kLeaves <= tape_type::kMaxArguments,
                    "expression has more than 254 active leaves: split it");
      // Arguments are gathered and merged in a small local buffer, then
      // streamed to the tape: reading back freshly written tape memory would
      // stall on its cache misses.
      T partials[E::kLeaves];
      std::int32_t indices[E::kLeaves];
      detail::ArgumentWriter<T> w{partials, indices, 0, tape.tag(), &tape};
      e.push(w, T(1));
      const T v = e.value();
      if (w.count > 0) {
        T* out_p = nullptr;
        std::int32_t* out_i = nullptr;
        tape.argument_cursor(E::kLeaves, out_p, out_i);
        const std::size_t n =
            detail::merge_into<E::kLeaves>(partials, indices, w.count, out_p, out_i);
        index_ = tape.commit_statement(n);
        tag_ = tape.tag();
      } else {
        index_ = 0;
      }
      value_ = v;
    } else {
      value_ = e.value();
      index_ = 0;
    }
  }

  T value_{};
  std::int32_t index_ = 0;
  std::uint32_t tag_ = 0;
};

/// Reverse mode over double.
using Real = Reverse<double>;
static_assert(sizeof(Real) == 16, "ad::Real is meant to be 16 bytes: value, identifier, tag");

template <class X>
struct is_reverse : std::false_type {};
template <class T>
struct is_reverse<Reverse<T>> : std::true_type {};
template <class X>
inline constexpr bool is_reverse_v = is_reverse<X>::value;

// ------------------------------------------------------------ expression nodes

namespace detail {
template <class E>
struct scalar_of {
  using type = typename E::scalar_type;
};
template <class T>
struct scalar_of<Reverse<T>> {
  using type = T;
};
template <class E>
using scalar_of_t = typename scalar_of<E>::type;
}  // namespace detail

/// One operand: value v = f(a), partial d = f'(a).
template <class A>
struct UnaryNode : Expr<UnaryNode<A>> {
  using scalar_type = detail::scalar_of_t<A>;
  using T = scalar_type;
  static constexpr std::size_t kLeaves = A::kLeaves;
  detail::stored_t<A> a;
  T v, d;
  UnaryNode(const A& a_, const T& v_, const T& d_) : a(a_), v(v_), d(d_) {}
  const T& value() const { return v; }
  void push(detail::ArgumentWriter<T>& w, const T& seed) const { a.push(w, seed * d); }
};

/// Two operands: v = f(a, b), partials da, db.
template <class A, class B>
struct BinaryNode : Expr<BinaryNode<A, B>> {
  using scalar_type = detail::scalar_of_t<A>;
  using T = scalar_type;
  static constexpr std::size_t kLeaves = A::kLeaves + B::kLeaves;
  detail::stored_t<A> a;
  detail::stored_t<B> b;
  T v, da, db;
  BinaryNode(const A& a_, const B& b_, const T& v_, const T& da_, const T& db_)
      : a(a_), b(b_), v(v_), da(da_), db(db_) {}
  const T& value() const { return v; }
  void push(detail::ArgumentWriter<T>& w, const T& seed) const {
    a.push(w, seed * da);
    b.push(w, seed * db);
  }
};

/// a + b and a − b: partials ±1 need no multiplication.
template <class A, class B, bool kMinus>
struct SumNode : Expr<SumNode<A, B, kMinus>> {
  using scalar_type = detail::scalar_of_t<A>;
  using T = scalar_type;
  static constexpr std::size_t kLeaves = A::kLeaves + B::kLeaves;
  detail::stored_t<A> a;
  detail::stored_t<B> b;
  T v;
  SumNode(const A& a_, const B& b_)
      : a(a_), b(b_), v(kMinus ? a_.value() - b_.value() : a_.value() + b_.value()) {}
  const T& value() const { return v; }
  void push(detail::ArgumentWriter<T>& w, const T& seed) const {
    a.push(w, seed);
    if constexpr (kMinus)
      b.push(w, -seed);
    else
      b.push(w, seed);
  }
};

/// A choice between two operands (min, max): only the chosen one is an
/// argument of the statement.
template <class A, class B>
struct SelectNode : Expr<SelectNode<A, B>> {
  using scalar_type = detail::scalar_of_t<A>;
  using T = scalar_type;
  static constexpr std::size_t kLeaves = A::kLeaves + B::kLeaves;
  detail::stored_t<A> a;
  detail::stored_t<B> b;
  bool first;
  SelectNode(const A& a_, const B& b_, bool first_) : a(a_), b(b_), first(first_) {}
  const T& value() const { return first ? a.value() : b.value(); }
  void push(detail::ArgumentWriter<T>& w, const T& seed) const {
    if (first)
      a.push(w, seed);
    else
      b.push(w, seed);
  }
};

/// A sub-expression held by reference — for compound assignments
/// (x += e), where e outlives the statement, so its tree is not copied.
template <class E>
struct RefNode : Expr<RefNode<E>> {
  using scalar_type = detail::scalar_of_t<E>;
  using T = scalar_type;
  static constexpr std::size_t kLeaves = E::kLeaves;
  const E& e;
  explicit RefNode(const E& e_) : e(e_) {}
  const T& value() const { return e.value(); }
  void push(detail::ArgumentWriter<T>& w, const T& seed) const { e.push(w, seed); }
};

/// a ± c with a constant c: partial 1.
template <class A>
struct ShiftNode : Expr<ShiftNode<A>> {
  using scalar_type = detail::scalar_of_t<A>;
  using T = scalar_type;
  static constexpr std::size_t kLeaves = A::kLeaves;
  detail::stored_t<A> a;
  T v;
  ShiftNode(const A& a_, const T& v_) : a(a_), v(v_) {}
  const T& value() const { return v; }
  void push(detail::ArgumentWriter<T>& w, const T& seed) const { a.push(w, seed); }
};

namespace detail {
template <class E>
using S = scalar_of_t<E>;
template <class E>
inline UnaryNode<E> unary(const E& a, const S<E>& v, const S<E>& d) {
  return UnaryNode<E>(a, v, d);
}
template <class A, class B>
inline BinaryNode<A, B> binary(const A& a, const B& b, const S<A>& v, const S<A>& da,
                               const S<A>& db) {
  static_assert(std::is_same_v<S<A>, S<B>>, "mixing Reverse types of different scalars");
  return BinaryNode<A, B>(a, b, v, da, db);
}
/// A scalar operand (constant) converted to the expression's scalar type.
template <class E, class C>
concept Constant = std::is_arithmetic_v<C> || std::is_same_v<C, S<E>>;
}  // namespace detail

// ------------------------------------------------------------------ arithmetic

template <class A, class B>
inline SumNode<A, B, false> operator+(const Expr<A>& a, const Expr<B>& b) {
  return SumNode<A, B, false>(a.self(), b.self());
}
template <class A, class B>
inline SumNode<A, B, true> operator-(const Expr<A>& a, const Expr<B>& b) {
  return SumNode<A, B, true>(a.self(), b.self());
}
template <class A, class B>
inline auto operator*(const Expr<A>& a, const Expr<B>& b) {
  const auto& x = a.self();
  const auto& y = b.self();
  return detail::binary(x, y, x.value() * y.value(), y.value(), x.value());
}
template <class A, class B>
inline auto operator/(const Expr<A>& a, const Expr<B>& b) {
  const auto& x = a.self();
  const auto& y = b.self();
  using T = detail::S<A>;
  const T inv = T(1) / y.value();
  const T v = x.value() * inv;
  return detail::binary(x, y, v, inv, -v * inv);
}
template <class A>
inline auto operator-(const Expr<A>& a) {
  using T = detail::S<A>;
  return detail::unary(a.self(), -a.self().value(), T(-1));
}
template <class A>
inline const A& operator+(const Expr<A>& a) {
  return a.self();
}

#define COSTATE_AD_SCALAR_OPS(C, REQ)                                                 \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline ShiftNode<A> operator+(const Expr<A>& a, const C& c) {                    \
    return ShiftNode<A>(a.self(), a.self().value() + detail::S<A>(c));             \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline ShiftNode<A> operator+(const C& c, const Expr<A>& a) {                    \
    return ShiftNode<A>(a.self(), detail::S<A>(c) + a.self().value());             \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline ShiftNode<A> operator-(const Expr<A>& a, const C& c) {                    \
    return ShiftNode<A>(a.self(), a.self().value() - detail::S<A>(c));             \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline auto operator-(const C& c, const Expr<A>& a) {                            \
    using T = detail::S<A>;                                                        \
    return detail::unary(a.self(), T(c) - a.self().value(), T(-1));                \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline auto operator*(const Expr<A>& a, const C& c) {                            \
    using T = detail::S<A>;                                                        \
    return detail::unary(a.self(), a.self().value() * T(c), T(c));                 \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline auto operator*(const C& c, const Expr<A>& a) {                            \
    using T = detail::S<A>;                                                        \
    return detail::unary(a.self(), T(c) * a.self().value(), T(c));                 \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline auto operator/(const Expr<A>& a, const C& c) {                            \
    using T = detail::S<A>;                                                        \
    const T inv = T(1) / T(c);                                                     \
    return detail::unary(a.self(), a.self().value() * inv, inv);                   \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline auto operator/(const C& c, const Expr<A>& a) {                            \
    using T = detail::S<A>;                                                        \
    const T inv = T(1) / a.self().value();                                         \
    const T v = T(c) * inv;                                                        \
    return detail::unary(a.self(), v, -v * inv);                                   \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator==(const Expr<A>& a, const C& c) {                           \
    return a.self().value() == detail::S<A>(c);                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator!=(const Expr<A>& a, const C& c) {                           \
    return a.self().value() != detail::S<A>(c);                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator<(const Expr<A>& a, const C& c) {                            \
    return a.self().value() < detail::S<A>(c);                                     \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator<=(const Expr<A>& a, const C& c) {                           \
    return a.self().value() <= detail::S<A>(c);                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator>(const Expr<A>& a, const C& c) {                            \
    return a.self().value() > detail::S<A>(c);                                     \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator>=(const Expr<A>& a, const C& c) {                           \
    return a.self().value() >= detail::S<A>(c);                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator==(const C& c, const Expr<A>& a) {                           \
    return detail::S<A>(c) == a.self().value();                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator!=(const C& c, const Expr<A>& a) {                           \
    return detail::S<A>(c) != a.self().value();                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator<(const C& c, const Expr<A>& a) {                            \
    return detail::S<A>(c) < a.self().value();                                     \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator<=(const C& c, const Expr<A>& a) {                           \
    return detail::S<A>(c) <= a.self().value();                                    \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator>(const C& c, const Expr<A>& a) {                            \
    return detail::S<A>(c) > a.self().value();                                     \
  }                                                                                \
  template <class A>                                                               \
    requires(REQ)                                                                  \
  inline bool operator>=(const C& c, const Expr<A>& a) {                           \
    return detail::S<A>(c) >= a.self().value();                                    \
  }

COSTATE_AD_SCALAR_OPS(double, true)
COSTATE_AD_SCALAR_OPS(float, true)
COSTATE_AD_SCALAR_OPS(int, true)
COSTATE_AD_SCALAR_OPS(long, true)
COSTATE_AD_SCALAR_OPS(long long, true)
COSTATE_AD_SCALAR_OPS(unsigned, true)
COSTATE_AD_SCALAR_OPS(unsigned long, true)
// Constants of the scalar type itself when it is not a plain number (T = Dual).
COSTATE_AD_SCALAR_OPS(detail::S<A>, !std::is_arithmetic_v<detail::S<A>>)
#undef COSTATE_AD_SCALAR_OPS

template <class A, class B>
inline bool operator==(const Expr<A>& a, const Expr<B>& b) {
  return a.self().value() == b.self().value();
}
template <class A, class B>
inline bool operator!=(const Expr<A>& a, const Expr<B>& b) {
  return a.self().value() != b.self().value();
}
template <class A, class B>
inline bool operator<(const Expr<A>& a, const Expr<B>& b) {
  return a.self().value() < b.self().value();
}
template <class A, class B>
inline bool operator<=(const Expr<A>& a, const Expr<B>& b) {
  return a.self().value() <= b.self().value();
}
template <class A, class B>
inline bool operator>(const Expr<A>& a, const Expr<B>& b) {
  return a.self().value() > b.self().value();
}
template <class A, class B>
inline bool operator>=(const Expr<A>& a, const Expr<B>& b) {
  return a.self().value() >= b.self().value();
}

// -------------------------------------------------------------- math library

namespace detail {
template <class T>
inline T infinity() {
  return T(std::numeric_limits<double>::infinity());
}
}  // namespace detail

#define COSTATE_AD_UNARY(name, VALUE, DERIV)          \
  template <class A>                                  \
  inline auto name(const Expr<A>& arg) {              \
    using T = detail::S<A>;                           \
    namespace m = detail::scalar;                     \
    const T& x = arg.self().value();                  \
    const T v = VALUE;                                \
    return detail::unary(arg.self(), v, T(DERIV));    \
  }

COSTATE_AD_UNARY(sqrt, m::sqrt_(x), x == T(0) ? detail::infinity<T>() : T(0.5) / v)
COSTATE_AD_UNARY(cbrt, m::cbrt_(x), x == T(0) ? detail::infinity<T>() : v / (T(3) * x))
COSTATE_AD_UNARY(exp, m::exp_(x), v)
COSTATE_AD_UNARY(expm1, m::expm1_(x), v + T(1))
COSTATE_AD_UNARY(log, m::log_(x), T(1) / x)
COSTATE_AD_UNARY(log1p, m::log1p_(x), T(1) / (T(1) + x))
COSTATE_AD_UNARY(log2, m::log2_(x), T(1) / (x * T(0.69314718055994530941723212145818)))
COSTATE_AD_UNARY(log10, m::log10_(x), T(1) / (x * T(2.30258509299404568401799145468437)))
COSTATE_AD_UNARY(sin, m::sin_(x), m::cos_(x))
COSTATE_AD_UNARY(cos, m::cos_(x), -m::sin_(x))
COSTATE_AD_UNARY(tan, m::tan_(x), T(1) + v * v)
COSTATE_AD_UNARY(asin, m::asin_(x), T(1) / m::sqrt_(T(1) - x * x))
COSTATE_AD_UNARY(acos, m::acos_(x), T(-1) / m::sqrt_(T(1) - x * x))
COSTATE_AD_UNARY(atan, m::atan_(x), T(1) / (T(1) + x * x))
COSTATE_AD_UNARY(sinh, m::sinh_(x), m::cosh_(x))
COSTATE_AD_UNARY(cosh, m::cosh_(x), m::sinh_(x))
COSTATE_AD_UNARY(tanh, m::tanh_(x), T(1) - v * v)
COSTATE_AD_UNARY(asinh, m::asinh_(x), T(1) / m::sqrt_(x * x + T(1)))
COSTATE_AD_UNARY(acosh, m::acosh_(x), T(1) / m::sqrt_(x * x - T(1)))
COSTATE_AD_UNARY(atanh, m::atanh_(x), T(1) / (T(1) - x * x))
COSTATE_AD_UNARY(erf, m::erf_(x), T(1.12837916709551257389615890312154) * m::exp_(-x * x))
COSTATE_AD_UNARY(erfc, m::erfc_(x), T(-1.12837916709551257389615890312154) * m::exp_(-x * x))
COSTATE_AD_UNARY(abs, x < T(0) ? -x : x, x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)))
COSTATE_AD_UNARY(fabs, x < T(0) ? -x : x, x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)))
#undef COSTATE_AD_UNARY

/// floor, ceil, round, trunc: piecewise constant, so passive results.
template <class A>
inline Reverse<detail::S<A>> floor(const Expr<A>& a) {
  return Reverse<detail::S<A>>(detail::scalar::floor_(a.self().value()));
}
template <class A>
inline Reverse<detail::S<A>> ceil(const Expr<A>& a) {
  return Reverse<detail::S<A>>(detail::scalar::ceil_(a.self().value()));
}
template <class A>
inline Reverse<detail::S<A>> round(const Expr<A>& a) {
  return Reverse<detail::S<A>>(detail::scalar::round_(a.self().value()));
}
template <class A>
inline Reverse<detail::S<A>> trunc(const Expr<A>& a) {
  return Reverse<detail::S<A>>(detail::scalar::trunc_(a.self().value()));
}

// pow
template <class A, class B>
inline auto pow(const Expr<A>& a, const Expr<B>& b) {
  using T = detail::S<A>;
  namespace m = detail::scalar;
  const T& x = a.self().value();
  const T& y = b.self().value();
  const T v = m::pow_(x, y);
  const T dx = y == T(0) ? T(0) : y * m::pow_(x, y - T(1));
  const T dy = x > T(0) ? v * m::log_(x) : T(0);
  return detail::binary(a.self(), b.self(), v, dx, dy);
}
template <class A, class C>
  requires detail::Constant<A, C>
inline auto pow(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  namespace m = detail::scalar;
  const T& x = a.self().value();
  const T y = T(c);
  const T v = m::pow_(x, y);
  const T dx = y == T(0) ? T(0) : y * m::pow_(x, y - T(1));
  return detail::unary(a.self(), v, dx);
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto pow(const C& c, const Expr<B>& b) {
  using T = detail::S<B>;
  namespace m = detail::scalar;
  const T x = T(c);
  const T v = m::pow_(x, b.self().value());
  const T dy = x > T(0) ? v * m::log_(x) : T(0);
  return detail::unary(b.self(), v, dy);
}

// atan2(y, x): ∂/∂y = x/(x²+y²), ∂/∂x = −y/(x²+y²)
template <class A, class B>
inline auto atan2(const Expr<A>& a, const Expr<B>& b) {
  using T = detail::S<A>;
  const T& y = a.self().value();
  const T& x = b.self().value();
  const T r2 = x * x + y * y;
  // At the origin: derivative 0 (as ad::Dual), not NaN.
  const T inv = r2 == T(0) ? T(0) : T(1) / r2;
  return detail::binary(a.self(), b.self(), detail::scalar::atan2_(y, x), x * inv, -y * inv);
}
template <class A, class C>
  requires detail::Constant<A, C>
inline auto atan2(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  const T& y = a.self().value();
  const T x = T(c);
  const T r2 = x * x + y * y;
  return detail::unary(a.self(), detail::scalar::atan2_(y, x), r2 == T(0) ? T(0) : x / r2);
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto atan2(const C& c, const Expr<B>& b) {
  using T = detail::S<B>;
  const T y = T(c);
  const T& x = b.self().value();
  const T r2 = x * x + y * y;
  return detail::unary(b.self(), detail::scalar::atan2_(y, x), r2 == T(0) ? T(0) : -y / r2);
}

// hypot(x, y) = sqrt(x² + y²): ∂/∂x = x/h (0 at the origin)
template <class A, class B>
inline auto hypot(const Expr<A>& a, const Expr<B>& b) {
  using T = detail::S<A>;
  const T& x = a.self().value();
  const T& y = b.self().value();
  const T h = detail::scalar::hypot_(x, y);
  const T inv = h == T(0) ? T(0) : T(1) / h;
  return detail::binary(a.self(), b.self(), h, x * inv, y * inv);
}
template <class A, class C>
  requires detail::Constant<A, C>
inline auto hypot(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  const T& x = a.self().value();
  const T h = detail::scalar::hypot_(x, T(c));
  return detail::unary(a.self(), h, h == T(0) ? T(0) : x / h);
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto hypot(const C& c, const Expr<B>& b) {
  return hypot(b, c);
}

// min/max: ties take the first argument.
template <class A, class B>
inline SelectNode<A, B> max(const Expr<A>& a, const Expr<B>& b) {
  return SelectNode<A, B>(a.self(), b.self(), !(a.self().value() < b.self().value()));
}
template <class A, class B>
inline SelectNode<A, B> min(const Expr<A>& a, const Expr<B>& b) {
  return SelectNode<A, B>(a.self(), b.self(), !(b.self().value() < a.self().value()));
}
template <class A, class C>
  requires detail::Constant<A, C>
inline auto max(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  const bool first = !(a.self().value() < T(c));
  return detail::unary(a.self(), first ? a.self().value() : T(c), first ? T(1) : T(0));
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto max(const C& c, const Expr<B>& b) {
  using T = detail::S<B>;
  const bool first = !(T(c) < b.self().value());
  return detail::unary(b.self(), first ? T(c) : b.self().value(), first ? T(0) : T(1));
}
template <class A, class C>
  requires detail::Constant<A, C>
inline auto min(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  const bool first = !(T(c) < a.self().value());
  return detail::unary(a.self(), first ? a.self().value() : T(c), first ? T(1) : T(0));
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto min(const C& c, const Expr<B>& b) {
  using T = detail::S<B>;
  const bool first = !(b.self().value() < T(c));
  return detail::unary(b.self(), first ? T(c) : b.self().value(), first ? T(0) : T(1));
}
/// fmax/fmin: like max/min, but a NaN operand yields the other one (C99).
template <class A, class B>
inline auto fmax(const Expr<A>& a, const Expr<B>& b) {
  using T = detail::S<A>;
  const T& x = a.self().value();
  const T& y = b.self().value();
  const bool first = (y != y) || (x == x && !(x < y));
  return SelectNode<A, B>(a.self(), b.self(), first);
}
template <class A, class B>
inline auto fmin(const Expr<A>& a, const Expr<B>& b) {
  using T = detail::S<A>;
  const T& x = a.self().value();
  const T& y = b.self().value();
  const bool first = (y != y) || (x == x && !(y < x));
  return SelectNode<A, B>(a.self(), b.self(), first);
}
// With a constant operand: one-operand nodes (no temporary leaf to refer to).
template <class A, class C>
  requires detail::Constant<A, C>
inline auto fmax(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  const T& x = a.self().value();
  const T y = T(c);
  const bool first = (y != y) || (x == x && !(x < y));
  return detail::unary(a.self(), first ? x : y, first ? T(1) : T(0));
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto fmax(const C& c, const Expr<B>& b) {
  using T = detail::S<B>;
  const T x = T(c);
  const T& y = b.self().value();
  const bool first = (y != y) || (x == x && !(x < y));
  return detail::unary(b.self(), first ? x : y, first ? T(0) : T(1));
}
template <class A, class C>
  requires detail::Constant<A, C>
inline auto fmin(const Expr<A>& a, const C& c) {
  using T = detail::S<A>;
  const T& x = a.self().value();
  const T y = T(c);
  const bool first = (y != y) || (x == x && !(y < x));
  return detail::unary(a.self(), first ? x : y, first ? T(1) : T(0));
}
template <class C, class B>
  requires detail::Constant<B, C>
inline auto fmin(const C& c, const Expr<B>& b) {
  using T = detail::S<B>;
  const T x = T(c);
  const T& y = b.self().value();
  const bool first = (y != y) || (x == x && !(y < x));
  return detail::unary(b.self(), first ? x : y, first ? T(0) : T(1));
}

/// Value of a Reverse or of a plain number.
template <class T>
inline const T& value(const Reverse<T>& x) {
  return x.value();
}

// ----------------------------------------------------- compound assignments

template <class T>
template <class E>
Reverse<T>& Reverse<T>::operator+=(const Expr<E>& e) {
  return *this = *this + RefNode<E>(e.self());
}
template <class T>
template <class E>
Reverse<T>& Reverse<T>::operator-=(const Expr<E>& e) {
  return *this = *this - RefNode<E>(e.self());
}
template <class T>
template <class E>
Reverse<T>& Reverse<T>::operator*=(const Expr<E>& e) {
  return *this = *this * RefNode<E>(e.self());
}
template <class T>
template <class E>
Reverse<T>& Reverse<T>::operator/=(const Expr<E>& e) {
  return *this = *this / RefNode<E>(e.self());
}
template <class T>
Reverse<T>& Reverse<T>::operator+=(const T& c) {
  return *this = *this + c;
}
template <class T>
Reverse<T>& Reverse<T>::operator-=(const T& c) {
  return *this = *this - c;
}
template <class T>
Reverse<T>& Reverse<T>::operator*=(const T& c) {
  return *this = *this * c;
}
template <class T>
Reverse<T>& Reverse<T>::operator/=(const T& c) {
  return *this = *this / c;
}

}  // namespace costate::ad

#include "costate/ad/tape_impl.hpp"
