#pragma once
/// \file
/// pde::OperatorView — a type-erased view of one stencil model's discrete
/// operator (pde::Operator<Model, Batch>, operator.hpp): the right-hand
/// side f(t, u), its state Jacobian into a Matrix, the Jacobian–vector
/// products (state; state, fields and scalars at once), the parameter
/// vector–Jacobian products and the second-order products H·v needs
/// (Operator::vjp_tangent_add) — the calls the PDE time integrators make,
/// and nothing else. The same idea as ode::System for ODEs
/// (docs/ode_system.md): make_operator_view(op) is the only per-model
/// template; the integrators' loops (pde::ThetaStepper, theta.hpp;
/// pde::ExplicitRkStepper, explicit_rk.hpp), their reverse sweeps,
/// snapshots and result packing are compiled once in src/pde/ against it.
///
/// Every product is the Operator's own member: a view changes no bits. The
/// operator must outlive its views. Collective as the Operator's members.

#include <cstdint>
#include <memory>
#include <span>

#include "costate/pde/grid.hpp"
#include "costate/pde/matrix.hpp"

namespace costate::pde {

/// The direction of a second-order vJp (vjp_tangent_add): null / empty
/// members are zero.
struct VjpDirection {
  const GlobalVector* u_dot = nullptr;  ///< u̇, a vector of grid()
  const GlobalVector* a_dot = nullptr;  ///< ȧ, a vector of field_grid()
  std::span<const double> q_dot;        ///< q̇, one entry per scalar parameter
  const GlobalVector* w_dot = nullptr;  ///< ẇ, a vector of grid()
};

/// Where vjp_tangent_add adds: null / empty members are not computed.
struct VjpSums {
  const GlobalVector* u = nullptr;  ///< a vector of grid()
  const GlobalVector* a = nullptr;  ///< a vector of field_grid()
  std::span<double> q;              ///< one entry per scalar parameter
};

/// What the integrators ask of a model's operator (the members of
/// pde::Operator of the same names document them).
class OperatorView {
 public:
  /// The model's static facts, fixed at construction.
  struct Traits {
    int fields = 0;                ///< parameter fields per cell (Model::field_parameters)
    int scalars = 0;               ///< scalar parameters (Model::scalar_parameters)
    bool linear_in_state = false;  ///< f = J u + b, J independent of t and u
    bool autonomous = false;       ///< f independent of t
  };
  explicit OperatorView(const Traits& traits) : traits_(traits) {}
  virtual ~OperatorView() = default;
  OperatorView(const OperatorView&) = delete;
  OperatorView& operator=(const OperatorView&) = delete;

  int fields() const { return traits_.fields; }
  int scalars() const { return traits_.scalars; }
  bool linear_in_state() const { return traits_.linear_in_state; }
  bool autonomous() const { return traits_.autonomous; }

  virtual const Grid& grid() const = 0;
  /// Null without parameter fields.
  virtual const Grid* field_grid() const = 0;
  /// f = f(t, u).
  virtual void rhs(double t, const GlobalVector& u, const GlobalVector& f) = 0;
  /// J = ∂f/∂u at (t, u) into `J`.
  virtual void jacobian(double t, const GlobalVector& u, Matrix& J) = 0;
  /// out = J v.
  virtual void jvp(double t, const GlobalVector& u, const GlobalVector& v, const GlobalVector& out) = 0;
  /// out = J u̇ + f_a ȧ + f_q q̇ (null / empty: zero).
  virtual void jvp_total(double t, const GlobalVector& u, const GlobalVector* u_dot, const GlobalVector* a_dot,
                         std::span<const double> q_dot, const GlobalVector& out) = 0;
  /// a_bar += f_aᵀ w, q_bar += f_qᵀ w.
  virtual void vjp_add(double t, const GlobalVector& u, const GlobalVector& w, const GlobalVector& a_bar,
                       std::span<double> q_bar) = 0;
  /// The first-order vJps and their derivatives along `d` (Operator::vjp_tangent_add).
  virtual void vjp_tangent_add(double t, const GlobalVector& u, const GlobalVector& w, const VjpDirection& d,
                               const VjpSums& value, const VjpSums& tangent) = 0;

 private:
  Traits traits_;
};

/// The view of an Operator<Model, Batch> (operator.hpp, which defines it):
/// the one per-model template of the PDE integrators.
template <class Op>
class OperatorViewOf;

/// A view of `op` (which must outlive it).
template <class Op>
std::unique_ptr<OperatorView> make_operator_view(Op& op) {
  return std::make_unique<OperatorViewOf<Op>>(op);
}

}  // namespace costate::pde
