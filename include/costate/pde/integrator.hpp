#pragma once
/// \file
/// What the PDE time integrators share (pde::ThetaStepper, theta.hpp;
/// pde::ExplicitRkStepper, explicit_rk.hpp): their results (gradient,
/// tangent, Hessian–vector product; the θ names are the first ones) and
/// pde::TimeStepper, the small interface io::pde_run holds so that one
/// driver runs either integrator. Both are compiled once (src/pde/) over a
/// pde::OperatorView (operator_view.hpp); their reverse sweeps' snapshot
/// adapter and result packing are one piece there (src/pde/sweep.hpp).
///
/// Every member of TimeStepper is collective over the operator's grid.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/ode/checkpointing.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/objective.hpp"

namespace costate::pde {

/// What a gradient computation produced.
struct ThetaGradient {
  double objective = 0.0;
  GlobalVector wrt_fields;                ///< dJ/da, a field (field grid)
  std::vector<double> wrt_parameters;     ///< dJ/dq
  GlobalVector wrt_initial_state;         ///< dJ/dy_0 (state grid)
  ode::CheckpointStats checkpoints;
  std::int64_t forward_steps = 0;         ///< steps taken, recomputations included
  std::int64_t krylov_iterations = 0;     ///< forward solves
  std::int64_t adjoint_krylov_iterations = 0;
  double seconds = 0.0;
};

/// A direction of forward sensitivities. An empty vector is a zero
/// direction (GlobalVector() has size 0): e.g. only `parameters` set
/// differentiates with respect to the scalars.
struct ThetaDirection {
  GlobalVector fields;             ///< δa: a vector of the operator's field grid (or empty)
  std::vector<double> parameters;  ///< δq: one entry per scalar parameter (or empty)
  GlobalVector initial_state;      ///< δy_0: a vector of the state grid (or empty)
};

/// What a forward-sensitivity run produced.
struct ThetaTangent {
  double objective = 0.0;               ///< J(y_l), bitwise the value of integrate()
  double directional_derivative = 0.0;  ///< dJ·δ
  GlobalVector final_state;             ///< y_l
  GlobalVector final_tangent;           ///< δy_l
  std::int64_t krylov_iterations = 0;   ///< forward solves
  std::int64_t tangent_krylov_iterations = 0;
  double seconds = 0.0;
};

/// Which Hessian product ThetaIntegrator::hessian_vector computes.
enum class HessianProduct {
  Exact,        ///< the second-order adjoint: H v
  GaussNewton,  ///< Sᵀ ∇²J S v: the residual's second derivatives dropped
};

inline std::string to_string(HessianProduct p) {
  return p == HessianProduct::Exact ? "exact" : "gauss_newton";
}

/// "exact" or "gauss_newton"; anything else throws costate::Error listing both.
inline HessianProduct hessian_product_from_string(const std::string& s) {
  if (s == "exact") return HessianProduct::Exact;
  if (s == "gauss_newton") return HessianProduct::GaussNewton;
  throw Error("pde::HessianProduct: unknown product \"" + s + "\"; expected exact or gauss_newton");
}

/// What a Hessian–vector product produced: H v in the layout of a
/// gradient, and (Exact only) the gradient itself, a by-product of the
/// same sweep.
struct ThetaHessianVector {
  HessianProduct product = HessianProduct::Exact;
  double objective = 0.0;
  GlobalVector wrt_fields;             ///< (H v)_a, a field (field grid)
  std::vector<double> wrt_parameters;  ///< (H v)_q
  GlobalVector wrt_initial_state;      ///< (H v)_{y_0} (state grid)
  /// dJ/d(a, q, y_0) from the same sweep (Exact; empty for GaussNewton).
  GlobalVector gradient_fields;
  std::vector<double> gradient_parameters;
  GlobalVector gradient_initial_state;
  ode::CheckpointStats checkpoints;
  std::int64_t forward_steps = 0;            ///< (state, tangent) steps, recomputations included
  std::int64_t krylov_iterations = 0;        ///< forward solves
  std::int64_t tangent_krylov_iterations = 0;
  std::int64_t adjoint_krylov_iterations = 0;  ///< both transposed solves
  double seconds = 0.0;
};


/// A time integrator of a PDE operator with fixed steps t_n = t0 + n h, n =
/// 0 … steps: the interface io::pde_run holds (src/io/pde_run_model.hpp), so
/// that one driver runs the θ-method or an explicit Runge–Kutta method.
/// The members are those of ThetaStepper (theta.hpp), which documents
/// them; every one is collective. Not a template: the integrators behind it
/// are compiled once over a pde::OperatorView.
class TimeStepper {
 public:
  virtual ~TimeStepper() = default;
  /// u ← one step from t_n, in place.
  virtual void step(const GlobalVector& u, std::int64_t n) = 0;
  /// u ← all steps from t0, in place.
  virtual void integrate(const GlobalVector& u) = 0;
  /// J(y_l) and its gradient (fields, scalars, initial state), discrete adjoint.
  virtual ThetaGradient gradient(const GlobalVector& y0, const Objective& objective,
                                 const ode::Checkpointing& checkpointing) = 0;
  /// J(y_l) and dJ·δ by forward sensitivities.
  virtual ThetaTangent tangent(const GlobalVector& y0, const Objective& objective,
                               const ThetaDirection& direction) = 0;
  /// H v (or the Gauss–Newton product) by the second-order adjoint.
  virtual ThetaHessianVector hessian_vector(const GlobalVector& y0, const Objective& objective,
                                            const ThetaDirection& direction,
                                            const ode::Checkpointing& checkpointing,
                                            HessianProduct product = HessianProduct::Exact) = 0;
  /// Krylov iterations of the forward solves so far (0 for explicit methods).
  virtual std::int64_t krylov_iterations() const = 0;

  /// Keeps the point (y0, objective) for many hessian_vector_at_point
  /// products there (Newton-CG, the Laplace posterior: pde::Misfit) and
  /// returns J and ∇J at it. This default keeps y0 and the objective: the
  /// gradient by gradient() with StoreAll, each product a whole
  /// second-order sweep from y0 (StoreAll). ThetaStepper keeps its
  /// trajectory and adjoints (ThetaLinearization) instead, so that a
  /// product costs the tangent and δμ solves only. Valid while the
  /// operator's fields and parameters are those of the call. Collective.
  virtual ThetaGradient linearize_point(const GlobalVector& y0, const Objective& objective) {
    point_y0_ = y0.clone();
    deep_copy(point_y0_, y0);
    point_objective_.emplace(objective);
    return gradient(point_y0_, *point_objective_, ode::StoreAll{});
  }
  /// True when hessian_vector_at_point reuses a stored trajectory (no
  /// forward and first-order adjoint passes per product): ThetaStepper.
  virtual bool keeps_point_trajectory() const { return false; }
  /// H v (or the Gauss–Newton product) at the point of linearize_point;
  /// without one, throws costate::Error. Collective.
  virtual ThetaHessianVector hessian_vector_at_point(const ThetaDirection& direction, HessianProduct product) {
    COSTATE_CHECK(point_objective_.has_value(), "pde::TimeStepper::hessian_vector_at_point: call linearize_point first");
    return hessian_vector(point_y0_, *point_objective_, direction, ode::StoreAll{}, product);
  }

 private:
  GlobalVector point_y0_;                     ///< linearize_point's y0 (the default)
  std::optional<Objective> point_objective_;  ///< and its objective
};

/// The name io::pde_run and the tests use: the interface does not depend
/// on the model (kept as a template alias for the callers that name one).
template <class Model, int Batch = 0>
using TimeIntegrator = TimeStepper;

}  // namespace costate::pde
