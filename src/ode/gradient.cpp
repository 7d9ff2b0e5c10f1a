#include "costate/ode/gradient.hpp"

namespace costate::ode {

std::string to_string(const SensitivityMethod& m) {
  if (std::holds_alternative<Forward>(m)) return "forward";
  if (std::holds_alternative<ContinuousAdjoint>(m)) return "continuous_adjoint";
  if (std::holds_alternative<CvodesForward>(m)) return "cvodes_forward";
  if (const auto* a = std::get_if<CvodesAdjoint>(&m))
    return "cvodes_adjoint(steps " + std::to_string(a->steps) + ", " +
           to_string(a->interpolation) + ")";
  return "discrete_adjoint(" + to_string(std::get<DiscreteAdjoint>(m).checkpointing) + ")";
}

std::string GradientResult::brief_report() const {
  std::ostringstream os;
  os.precision(16);
  os << method << ": J = " << objective << "; " << checkpoints.steps << " steps, "
     << checkpoints.forward_steps << " forward step evaluations (" << checkpoints.recomputed_steps
     << " recomputed), peak " << checkpoints.peak_snapshots << " snapshots, " << vjp_evaluations
     << " vector-Jacobian products";
  return os.str();
}

}  // namespace costate::ode
