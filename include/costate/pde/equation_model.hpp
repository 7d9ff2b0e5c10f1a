#pragma once
/// \file
/// pde::EquationModel — a stencil model (stencil.hpp) built at run time from
/// equations typed in an input file, e.g. Gray–Scott:
///     fields:     [u, v]
///     parameters: {Du: 2e-5, Dv: 1e-5, F: 0.04, k: 0.06}
///     equations:  {u: "Du*lap(u) - u*v^2 + F*(1-u)",
///                  v: "Dv*lap(v) + u*v^2 - (F+k)*v"}
/// Every equation is an expr::Program over the pointwise variables
///     x y z t  <fields>  <parameter fields>  <scalar parameters>
/// (y only in 2-D and 3-D, z only in 3-D) plus the values of the stencil
/// operators it calls, computed per cell before the program runs:
///     lap(f)          Σ_d (f_{+1} − 2 f_0 + f_{−1}) / h_d²
///     dx(f) dy(f) dz(f)   central: (f_{+1} − f_{−1}) / (2 h)
///     dx_up(f, a) (dy_up, dz_up)   first-order upwind by the sign of the
///                     velocity a at the cell: a > 0: (f_0 − f_{−1})/h,
///                     else (f_{+1} − f_0)/h (a: a field, parameter field or
///                     scalar parameter; its sign is not differentiated)
///     div_grad(k, f)  ∇·(k ∇f) with face-averaged k:
///                     Σ_d [k_{+½}(f_{+1} − f_0) − k_{−½}(f_0 − f_{−1})]/h_d²,
///                     k_{±½} = (k_0 + k_{±1})/2  (Heat2D's discretisation)
/// where f (and k) name a field or a parameter field. All operators read one
/// ghost layer along the axes: stencil width 1, star. Boundaries are the
/// grid's (pde::Grid: periodic, Dirichlet, Neumann mirror ghosts).
///
/// Compile-time facts. pde::Operator needs dim, components, parameter-field
/// count and linearity at compile time; with_equation_model() dispatches a
/// runtime EquationSystem to one of a fixed set of instantiations:
/// dim 1–3 × components 1–4 × parameter fields 0–1, nonlinear; plus
/// linear (f = J u + b with J independent of t and u, detected from the
/// programs) for one component. Scalar parameters are padded to
/// kMaxScalarParameters (the unused ones are 0 and have zero derivative).
/// Linear instantiations declare autonomous = false (always valid; costs one
/// more right-hand side per step than an autonomous built-in model).
///
/// Errors (costate::Error) name the key (context + "." + field), quote the
/// expression and give the column: unknown operator (with the nearest
/// name), an operator applied to an expression or to a name that is not a
/// field, dy/dz beyond the grid's dimension, unknown names.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/expr/program.hpp"
#include "costate/pde/stencil.hpp"

namespace costate::pde {

/// Scalar parameters of every EquationModel instantiation (padded).
inline constexpr int kMaxScalarParameters = 8;
/// Components and parameter fields the instantiations cover.
inline constexpr int kMaxEquationComponents = 4;
inline constexpr int kMaxEquationFields = 1;

/// What the equations are (all runtime).
struct EquationSpec {
  int dim = 2;
  std::vector<std::string> fields;            ///< state components, in order
  std::vector<std::string> parameter_fields;  ///< per-cell parameters
  std::vector<std::string> parameters;        ///< scalar parameter names
  std::vector<std::string> equations;         ///< one right-hand side per field
  std::string context = "pde.equations";      ///< error prefix (+ "." + field)
};

/// One stencil operator application (a precomputed variable).
struct StencilTerm {
  enum class Op : std::uint8_t { Lap, D, DUp, DivGrad };
  enum class Source : std::uint8_t { State, Field, Scalar };
  Op op = Op::Lap;
  int axis = 0;  ///< D, DUp
  Source a_source = Source::State;
  int a = 0;  ///< the operand (DivGrad: k)
  Source b_source = Source::State;
  int b = 0;  ///< DUp: the velocity; DivGrad: f
  bool operator==(const StencilTerm&) const = default;
};

/// The compiled equations, shared (read-only) by every copy of a model.
class EquationSystem {
 public:
  /// Compiles and checks `spec`. Throws costate::Error (see the file comment).
  explicit EquationSystem(EquationSpec spec);

  const EquationSpec& spec() const { return spec_; }
  int dim() const { return spec_.dim; }
  int components() const { return static_cast<int>(spec_.fields.size()); }
  int field_parameters() const { return static_cast<int>(spec_.parameter_fields.size()); }
  int scalar_parameters() const { return static_cast<int>(spec_.parameters.size()); }
  /// f = J u + b with J independent of t and u (detected from the programs).
  bool linear_in_state() const { return linear_; }
  /// No equation uses t.
  bool autonomous() const { return autonomous_; }
  const std::vector<StencilTerm>& terms() const { return terms_; }
  const std::vector<expr::Program>& programs() const { return programs_; }
  /// Names of the pointwise variables (x, [y, [z,]] t, fields, parameter
  /// fields, scalar parameters): what an initial-value expression may use.
  static std::vector<std::string> pointwise_names(const EquationSpec& spec);

  /// Evaluates every equation at one cell (the model's rhs).
  template <class T, class U, class A>
  void rhs(const Point& p, const Stencil<U>& u, const Stencil<A>& a, const T* q, T* dudt) const {
    T frame[kMaxVariables];
    int n = 0;
    frame[n++] = T(p.x);
    if (spec_.dim >= 2) frame[n++] = T(p.y);
    if (spec_.dim >= 3) frame[n++] = T(p.z);
    frame[n++] = T(p.t);
    const int nc = components(), nf = field_parameters(), nq = scalar_parameters();
    for (int c = 0; c < nc; ++c) frame[n++] = T(u(c));
    for (int f = 0; f < nf; ++f) frame[n++] = T(a(f));
    for (int m = 0; m < nq; ++m) frame[n++] = q[m];
    for (const StencilTerm& term : terms_) frame[n++] = evaluate_term<T>(term, p, u, a, q);
    const std::span<const T> values(frame, static_cast<std::size_t>(n));
    for (int c = 0; c < nc; ++c) dudt[c] = programs_[static_cast<std::size_t>(c)].evaluate(values);
  }

  static constexpr int kMaxVariables = 64;

 private:
  template <class S>
  static double primal(const S& s) {
    if constexpr (std::is_arithmetic_v<S>)
      return static_cast<double>(s);
    else
      return primal(s.value());
  }
  static double h_of(const Point& p, int axis) { return axis == 0 ? p.hx : axis == 1 ? p.hy : p.hz; }
  static void shift(int axis, int s, int& di, int& dj, int& dk) {
    di = axis == 0 ? s : 0;
    dj = axis == 1 ? s : 0;
    dk = axis == 2 ? s : 0;
  }

  /// Calls f(stencil, component) on the stencil a term's operand lives in.
  template <class U, class A, class F>
  static decltype(auto) on(StencilTerm::Source src, int index, const Stencil<U>& u, const Stencil<A>& a,
                           F&& f) {
    if (src == StencilTerm::Source::State) return f(u, index);
    return f(a, index);
  }

  template <class T, class U, class A>
  T evaluate_term(const StencilTerm& term, const Point& p, const Stencil<U>& u, const Stencil<A>& a,
                  const T* q) const {
    const int dim = spec_.dim;
    switch (term.op) {
      case StencilTerm::Op::Lap:
        return on(term.a_source, term.a, u, a, [&](const auto& s, int c) {
          T r(0.0);
          for (int d = 0; d < dim; ++d) {
            int i, j, k, i2, j2, k2;
            shift(d, 1, i, j, k);
            shift(d, -1, i2, j2, k2);
            const double h = h_of(p, d);
            r = T(r + (s(c, i, j, k) - 2.0 * s(c) + s(c, i2, j2, k2)) / (h * h));
          }
          return r;
        });
      case StencilTerm::Op::D:
        return on(term.a_source, term.a, u, a, [&](const auto& s, int c) {
          int i, j, k, i2, j2, k2;
          shift(term.axis, 1, i, j, k);
          shift(term.axis, -1, i2, j2, k2);
          return T((s(c, i, j, k) - s(c, i2, j2, k2)) / (2.0 * h_of(p, term.axis)));
        });
      case StencilTerm::Op::DUp: {
        double velocity = 0.0;
        if (term.b_source == StencilTerm::Source::Scalar)
          velocity = primal(q[term.b]);
        else
          velocity = on(term.b_source, term.b, u, a, [](const auto& s, int c) { return primal(s(c)); });
        return on(term.a_source, term.a, u, a, [&](const auto& s, int c) {
          int i, j, k;
          const double h = h_of(p, term.axis);
          if (velocity > 0.0) {
            shift(term.axis, -1, i, j, k);
            return T((s(c) - s(c, i, j, k)) / h);
          }
          shift(term.axis, 1, i, j, k);
          return T((s(c, i, j, k) - s(c)) / h);
        });
      }
      case StencilTerm::Op::DivGrad:
        return on(term.a_source, term.a, u, a, [&](const auto& ks, int ck) {
          return on(term.b_source, term.b, u, a, [&](const auto& fs, int cf) {
            T r(0.0);
            for (int d = 0; d < dim; ++d) {
              int i, j, k, i2, j2, k2;
              shift(d, 1, i, j, k);
              shift(d, -1, i2, j2, k2);
              const auto& k0 = ks(ck);
              const auto& f0 = fs(cf);
              const T flux = T(0.5 * (k0 + ks(ck, i, j, k)) * (fs(cf, i, j, k) - f0) -
                               0.5 * (k0 + ks(ck, i2, j2, k2)) * (f0 - fs(cf, i2, j2, k2)));
              const double h = h_of(p, d);
              r = T(r + flux / (h * h));
            }
            return r;
          });
        });
    }
    return T(0.0);
  }

  EquationSpec spec_;
  std::vector<StencilTerm> terms_;
  std::vector<expr::Program> programs_;
  bool linear_ = false;
  bool autonomous_ = true;
};

/// The stencil model of an EquationSystem with the compile-time facts
/// pde::Operator needs (see the file comment). Cheap to copy (shares the
/// compiled system).
template <int Dim, int Components, int Fields, bool Linear>
struct EquationModel {
  static constexpr int dim = Dim;
  static constexpr int components = Components;
  static constexpr int stencil_width = 1;
  static constexpr bool star = true;
  static constexpr int field_parameters = Fields;
  static constexpr int scalar_parameters = kMaxScalarParameters;
  static constexpr bool linear_in_state = Linear;
  static constexpr bool autonomous = false;

  std::shared_ptr<const EquationSystem> system;

  template <class T, class U, class A>
  void rhs(const Point& p, const Stencil<U>& u, const Stencil<A>& a, const T* q, T* dudt) const {
    system->rhs(p, u, a, q, dudt);
  }
};

namespace dispatch {
template <int D, int C, int F, class Fn>
decltype(auto) with_equation_linear(const std::shared_ptr<const EquationSystem>& s, Fn&& fn) {
  if constexpr (C == 1) {
    if (s->linear_in_state()) return fn(EquationModel<D, C, F, true>{s});
  }
  return fn(EquationModel<D, C, F, false>{s});
}
/// The instantiations of dimension D with F parameter fields (`s` must have
/// F of them): components 1–4, plus linear for one component. A caller may
/// instantiate F = 0 and F = 1 in separate translation units (the CLI does,
/// so that they compile in parallel).
template <int D, int F, class Fn>
decltype(auto) with_equation_components_given_fields(const std::shared_ptr<const EquationSystem>& s, Fn&& fn) {
  switch (s->components()) {
    case 1: return with_equation_linear<D, 1, F>(s, fn);
    case 2: return with_equation_linear<D, 2, F>(s, fn);
    case 3: return with_equation_linear<D, 3, F>(s, fn);
    default: return with_equation_linear<D, 4, F>(s, fn);
  }
}
template <int D, class Fn>
decltype(auto) with_equation_components(const std::shared_ptr<const EquationSystem>& s, Fn&& fn) {
  if (s->field_parameters() == 1) return with_equation_components_given_fields<D, 1>(s, fn);
  return with_equation_components_given_fields<D, 0>(s, fn);
}
}  // namespace dispatch

/// Calls f(model) with the EquationModel instantiation that fits `system`
/// (its dim, components, parameter fields and linearity); every
/// instantiation's result type must be the same. Instantiate it in ONE
/// translation unit: it compiles f for every instantiation.
template <class F>
decltype(auto) with_equation_model(const std::shared_ptr<const EquationSystem>& system, F&& f) {
  COSTATE_CHECK(system != nullptr, "pde::with_equation_model: no equation system");
  switch (system->dim()) {
    case 1: return dispatch::with_equation_components<1>(system, f);
    case 2: return dispatch::with_equation_components<2>(system, f);
    default: return dispatch::with_equation_components<3>(system, f);
  }
}

}  // namespace costate::pde
