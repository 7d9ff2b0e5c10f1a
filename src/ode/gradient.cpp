#include "costate/ode/gradient.hpp"

namespace costate::ode {

std::string to_string(const SensitivityMethod& m) {
  if (std::holds_alternative<Forward>(m)) return "forward";
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
