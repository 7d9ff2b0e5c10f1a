#pragma once
/// \file
/// Derivative drivers on a generic callable: ad::gradient, value_and_gradient,
/// jacobian (jacobian_forward, jacobian_reverse), jvp, vjp, hvp, hessian.
///
/// The callable is written once on its scalar type and takes the inputs as a
/// `const std::vector<T>&`; a scalar function returns T, a vector function
/// returns a std::vector<T> (or anything with size() and [], e.g. an Eigen
/// vector of T):
///
///     auto f = [](const auto& x) { using std::sin; return x[0] * x[1] + sin(x[0]); };
///     std::vector<double> g = ad::gradient(f, {1.0, 2.0});
///     auto F = [](const auto& x) {
///       using T = std::decay_t<decltype(x[0])>;
///       using std::exp;
///       return std::vector<T>{x[0] * x[1], exp(x[1])};
///     };
///     Eigen::MatrixXd J = ad::jacobian(F, {1.0, 2.0});
///
/// Elementary functions are called unqualified (after `using std::sin;` for
/// T = double), so that argument-dependent lookup finds the AD overloads.
///
/// What each driver computes, for F: ℝⁿ → ℝᵐ with Jacobian J = ∂F/∂x and a
/// scalar f: ℝⁿ → ℝ, and how (T is the scalar type F is called with):
///
///   gradient(f, x)        ∇f(x)            one reverse sweep (T = Real)
///   jacobian_forward(F,x) J                ⌈n / Chunk⌉ evaluations on
///                                          Dual<double, Chunk>, seeding Chunk
///                                          columns of the identity each
///   jacobian_reverse(F,x) J                one recording (T = Real), then m
///                                          sweeps, row i seeded by eᵢ
///   jacobian(F, x)        J                forward when m ≥ n, else reverse
///                                          (m from one evaluation on double)
///   jvp(F, x, v)          F(x), J v        one evaluation on Dual<double, 1>
///   vjp(F, x, w)          F(x), Jᵀ w       one recording and one sweep seeded
///                                          with the output adjoints w
///   hvp(f, x, v)          ∇²f(x) v         forward over reverse: one recording
///                                          on Reverse<Dual<double, 1>> with
///                                          inputs (xᵢ, ẋᵢ = vᵢ), one sweep
///                                          seeded (1, 0); then
///                                          x̄ᵢ = ∂f/∂xᵢ + ε (∇²f v)ᵢ
///   hessian(f, x)         ∇²f(x)           n hvp's with the unit vectors
///                                          (for small n: n recordings)
///
/// Inputs x (and directions v, w) are read-only `std::vector<double>`s owned
/// by the caller; results are returned by value.
///
/// The tape. The reverse-mode drivers (gradient, value_and_gradient,
/// jacobian_reverse, vjp, hvp, hessian, and jacobian when it chooses
/// reverse) record on this thread's active tape (Tape::active(), or
/// BasicTape<Dual<double,1>>::active() for hvp) and leave it exactly as they
/// found it: they record after the tape's current position, sweep only
/// their own statements, and remove them again with reset(position) (also
/// when the callable throws). So a driver may be called on an empty tape
/// (it stays empty), between a user's recording and its evaluate() (the
/// recording and its adjoints are untouched), and even while a recording is
/// in progress — e.g. a Jacobian for a Newton step inside a recorded model:
/// the result is plain data, a constant of the enclosing recording, and
/// recording continues afterwards. Drivers nest (a callable may call a
/// driver). One rule: the callable must not capture active Reverse values
/// of an enclosing recording — they would be constants for the driver's
/// derivative, but its sweeps would add into their adjoints. The
/// forward-mode drivers (jacobian_forward, jvp) never touch a tape.
///
/// Results of reverse-mode callables: a callable that returns an expression
/// built from its own local Reverse variables (`T t = x[0] * x[1]; return
/// t * t;` with a deduced `auto` return type) returns references to
/// destroyed locals when T = Real; declare the return type (`-> T`) or
/// return a T variable. Expressions of the inputs (`return x[0] * x[1];`)
/// are fine.
///
/// Errors (costate::Error): a direction or weight vector whose length does
/// not match; a vector function whose number of outputs changes between
/// evaluations. Threads: every thread records on its own tapes, so drivers
/// may run concurrently on different threads.

#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/ad/detail/drivers_gradient.hpp"
#include "costate/ad/detail/drivers_support.hpp"
#include "costate/ad/dual.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/core/error.hpp"

namespace costate::ad {

/// Columns of the Jacobian seeded per forward evaluation (the tangent count
/// of the Dual that jacobian_forward uses by default): 8 tangents fill two
/// AVX registers and keep the Dual's footprint small; pass a template
/// argument (jacobian_forward<16>(F, x)) to change it.
inline constexpr int kJacobianChunk = 8;

/// F(x) and the directional derivative J v.
struct JvpResult {
  std::vector<double> value;
  std::vector<double> tangent;
};

/// F(x) and the vector–Jacobian product Jᵀ w.
struct VjpResult {
  std::vector<double> value;
  std::vector<double> cotangent;
};

// ------------------------------------------------------------------ gradient
// ValueAndGradient, value_and_gradient(f, x), gradient(f, x): in
// costate/ad/detail/drivers_gradient.hpp (shared with verification.hpp,
// which must not need Eigen).

// ------------------------------------------------------------------ jacobian

/// J = ∂F/∂x (m × n) by forward mode: ⌈n / Chunk⌉ evaluations of F on
/// Dual<double, Chunk>, evaluation k seeding the tangents of inputs
/// [k·Chunk, (k+1)·Chunk) with the unit vectors; row i of its tangents is
/// J(i, k·Chunk ...). Cost ≈ ⌈n / Chunk⌉ × (1 + Chunk) primal evaluations:
/// best when m ≥ n.
template <int Chunk = kJacobianChunk, class F>
Eigen::MatrixXd jacobian_forward(F&& f, const std::vector<double>& x) {
  static_assert(Chunk >= 1, "jacobian_forward: Chunk must be at least 1");
  using D = Dual<double, Chunk>;
  const std::size_t n = x.size();
  if (n == 0) return Eigen::MatrixXd(static_cast<Eigen::Index>(detail::output_count(f(x))), 0);
  std::vector<D> xd(x.begin(), x.end());
  Eigen::MatrixXd J;
  std::size_t m = 0;
  for (std::size_t first = 0; first < n; first += Chunk) {
    const std::size_t width = std::min<std::size_t>(Chunk, n - first);
    for (std::size_t k = 0; k < width; ++k) xd[first + k].set_tangent(static_cast<int>(k), 1.0);
    auto&& out = f(std::as_const(xd));
    const std::size_t count = detail::output_count(out);
    if (first == 0) {
      m = count;
      J.resize(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(n));
    } else {
      COSTATE_CHECK_EQ(count, m, "ad::jacobian_forward: the callable returned a different "
                                 "number of outputs at another evaluation");
    }
    for (std::size_t i = 0; i < m; ++i) {
      const D yi = D(detail::output_at(out, i));
      for (std::size_t k = 0; k < width; ++k)
        J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(first + k)) =
            yi.tangent(static_cast<int>(k));
    }
    for (std::size_t k = 0; k < width; ++k) xd[first + k].set_tangent(static_cast<int>(k), 0.0);
  }
  return J;
}

/// J = ∂F/∂x (m × n) by reverse mode: F recorded once on Tape::active(),
/// then m sweeps over the recording, sweep i seeded with ȳ = eᵢ, giving row
/// i = eᵢᵀ J (input adjoints are zeroed between sweeps; the recording is
/// removed afterwards). Cost ≈ one recording + m sweeps: best when m < n.
template <class F>
Eigen::MatrixXd jacobian_reverse(F&& f, const std::vector<double>& x) {
  detail::TapeSection<double> section(Tape::active());
  Tape& tape = section.tape();
  const std::vector<Real> xr = section.register_inputs(x);
  auto&& out = f(xr);
  const std::size_t m = detail::output_count(out);
  std::vector<Real> y(m);
  for (std::size_t i = 0; i < m; ++i) {
    y[i] = Real(detail::output_at(out, i));
    tape.register_output(y[i]);
  }
  const Position end = tape.position();
  const std::size_t n = x.size();
  Eigen::MatrixXd J(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(n));
  for (std::size_t i = 0; i < m; ++i) {
    y[i].set_gradient(1.0);
    section.evaluate(end);
    for (std::size_t j = 0; j < n; ++j) {
      J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = xr[j].gradient();
      // Inputs keep their adjoints after a sweep (intermediates are consumed):
      // zero them for the next row. So is a constant output's seed.
      if (xr[j].gradient() != 0.0) section.tape().gradient_ref(xr[j].index()) = 0.0;
    }
    y[i].set_gradient(0.0);
  }
  return J;
}

/// J = ∂F/∂x, by forward mode when m ≥ n and by reverse mode when m < n
/// (the cheaper one: ⌈n/Chunk⌉ forward evaluations against m sweeps). One
/// extra evaluation of F on double finds m.
template <int Chunk = kJacobianChunk, class F>
Eigen::MatrixXd jacobian(F&& f, const std::vector<double>& x) {
  const std::size_t m = detail::output_count(f(x));
  if (m >= x.size()) return jacobian_forward<Chunk>(std::forward<F>(f), x);
  return jacobian_reverse(std::forward<F>(f), x);
}

// ------------------------------------------------------------- jvp and vjp

/// F(x) and J v by one evaluation of F on Dual<double, 1> with inputs
/// (xⱼ, ẋⱼ = vⱼ): the output tangents are J v.
template <class F>
JvpResult jvp(F&& f, const std::vector<double>& x, const std::vector<double>& v) {
  COSTATE_CHECK_EQ(v.size(), x.size(),
                   "ad::jvp: the direction v needs one entry per input x");
  using D = Dual<double, 1>;
  std::vector<D> xd;
  xd.reserve(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) xd.push_back(D(x[j], {v[j]}));
  auto&& out = f(std::as_const(xd));
  const std::size_t m = detail::output_count(out);
  JvpResult r;
  r.value.resize(m);
  r.tangent.resize(m);
  for (std::size_t i = 0; i < m; ++i) {
    const D yi = D(detail::output_at(out, i));
    r.value[i] = yi.value();
    r.tangent[i] = yi.tangent(0);
  }
  return r;
}

/// F(x) and Jᵀ w by one recording of F and one reverse sweep seeded with
/// the output adjoints ȳ = w (x̄ = Jᵀ w).
template <class F>
VjpResult vjp(F&& f, const std::vector<double>& x, const std::vector<double>& w) {
  detail::TapeSection<double> section(Tape::active());
  Tape& tape = section.tape();
  const std::vector<Real> xr = section.register_inputs(x);
  auto&& out = f(xr);
  const std::size_t m = detail::output_count(out);
  COSTATE_CHECK_EQ(w.size(), m, "ad::vjp: the weights w need one entry per output of F");
  std::vector<Real> y(m);
  for (std::size_t i = 0; i < m; ++i) {
    y[i] = Real(detail::output_at(out, i));
    tape.register_output(y[i]);
  }
  for (std::size_t i = 0; i < m; ++i) y[i].set_gradient(w[i]);
  section.evaluate();
  VjpResult r;
  r.value.resize(m);
  for (std::size_t i = 0; i < m; ++i) r.value[i] = y[i].value();
  r.cotangent.resize(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) r.cotangent[j] = xr[j].gradient();
  return r;
}

// ----------------------------------------------------------- second order

/// ∇²f(x) v, forward over reverse: f recorded once on
/// BasicTape<Dual<double,1>>::active() with inputs xⱼ + ε vⱼ, the output
/// seeded with 1 + 0ε, one sweep; the input adjoints are
/// ∂f/∂xⱼ(x + εv) = ∂f/∂xⱼ + ε (∇²f v)ⱼ, and Hv is their ε part. Cost ≈ 2-3×
/// a gradient.
template <class F>
std::vector<double> hvp(F&& f, const std::vector<double>& x, const std::vector<double>& v) {
  COSTATE_CHECK_EQ(v.size(), x.size(), "ad::hvp: the direction v needs one entry per input x");
  using D = Dual<double, 1>;
  using R = Reverse<D>;
  detail::TapeSection<D> section(BasicTape<D>::active());
  std::vector<D> xd;
  xd.reserve(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) xd.push_back(D(x[j], {v[j]}));
  const std::vector<R> xr = section.register_inputs(xd);
  auto&& out = f(xr);
  static_assert(!detail::OutputVector<std::remove_cvref_t<decltype(out)>>,
                "ad::hvp: the callable returns a vector; hvp needs a scalar function");
  R y = out;
  section.tape().register_output(y);
  y.set_gradient(D(1.0));
  section.evaluate();
  std::vector<double> hv(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) hv[j] = xr[j].gradient().tangent(0);
  return hv;
}

/// ∇²f(x) (n × n), column j = hvp(f, x, eⱼ): n recordings, for small n.
/// Symmetric up to round-off (the columns come from separate sweeps; no
/// symmetrisation is applied).
template <class F>
Eigen::MatrixXd hessian(F&& f, const std::vector<double>& x) {
  const std::size_t n = x.size();
  Eigen::MatrixXd H(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  std::vector<double> e(n, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    e[j] = 1.0;
    const std::vector<double> col = hvp(f, x, e);
    for (std::size_t i = 0; i < n; ++i)
      H(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = col[i];
    e[j] = 0.0;
  }
  return H;
}

}  // namespace costate::ad
