#include "sweep.hpp"

#include <sstream>

namespace costate::detail {

void check_direction(const pde::OperatorView& op, const pde::ThetaDirection& direction, const std::string& where) {
  const pde::Grid& g = op.grid();
  std::ostringstream why;
  bool ok = true;
  const std::string who = where + ": ";
  if (direction.initial_state.size() != 0 && direction.initial_state.size() != g.owned_size()) {
    ok = false;
    why << who << "ThetaDirection::initial_state has " << direction.initial_state.size() << " entries on rank "
        << g.rank() << ", the state grid owns " << g.owned_size() << " (or leave it empty)";
  } else if (!direction.parameters.empty() && direction.parameters.size() != static_cast<std::size_t>(op.scalars())) {
    ok = false;
    why << who << "ThetaDirection::parameters has " << direction.parameters.size() << " entries; the model has "
        << op.scalars() << " scalar parameters (or leave it empty)";
  } else if (direction.fields.size() != 0 &&
             (op.fields() == 0 || direction.fields.size() != op.field_grid()->owned_size())) {
    ok = false;
    why << who << "ThetaDirection::fields has " << direction.fields.size() << " entries on rank " << g.rank() << "; "
        << (op.fields() == 0 ? std::string("the model has no parameter fields")
                             : "the field grid owns " + std::to_string(op.field_grid()->owned_size()))
        << " (or leave it empty)";
  }
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, g.comm());
  if (!ok) throw Error(why.str());
  COSTATE_CHECK(!any, who << "another rank passed a direction of the wrong size (see its error)");
}

AdjointSums::AdjointSums(const pde::OperatorView& op) {
  lambda = op.grid().create_global();
  if (op.fields() > 0) a_bar = op.field_grid()->create_global();
  q_bar.assign(static_cast<std::size_t>(op.scalars()), 0.0);
}

void AdjointSums::into(pde::ThetaGradient& out, const pde::Objective& objective, const pde::Grid& g,
                       const pde::GlobalVector& y0, std::int64_t steps) {
  out.objective = steps == 0 ? objective.evaluate(g, y0, &lambda) : objective_value;
  out.wrt_initial_state = lambda;
  out.wrt_fields = a_bar;
  out.wrt_parameters = q_bar;
  out.forward_steps = advances;
}

SecondOrderSums::SecondOrderSums(const pde::OperatorView& op) : AdjointSums(op) {
  dlambda = op.grid().create_global();
  if (op.fields() > 0) da_bar = op.field_grid()->create_global();
  dq_bar.assign(static_cast<std::size_t>(op.scalars()), 0.0);
}

void SecondOrderSums::into(pde::ThetaHessianVector& out, const pde::Objective& objective, const pde::Grid& g,
                           const pde::GlobalVector& y0, const pde::GlobalVector& dy0, std::int64_t steps,
                           pde::HessianProduct product, const pde::ThetaGradient* gradient) {
  out.product = product;
  if (steps == 0) {
    out.objective = objective.evaluate(g, y0, &lambda);
    objective.hessian_vector(g, dy0, dlambda);
  } else {
    out.objective = objective_value;
  }
  out.wrt_initial_state = dlambda;
  out.wrt_fields = da_bar;
  out.wrt_parameters = dq_bar;
  if (product == pde::HessianProduct::Exact) {
    out.gradient_initial_state = gradient ? gradient->wrt_initial_state : lambda;
    out.gradient_fields = gradient ? gradient->wrt_fields : a_bar;
    out.gradient_parameters = gradient ? gradient->wrt_parameters : q_bar;
  }
  out.forward_steps = advances;
}

void pack_pair(const pde::GlobalVector& y, const pde::GlobalVector& dy, std::vector<double>& pack) {
  const std::size_t n = y.size();
  pack.resize(2 * n);
  for (std::size_t e = 0; e < n; ++e) {
    pack[e] = y[e];
    pack[n + e] = dy[e];
  }
}

void unpack_pair(const std::vector<double>& pack, const pde::GlobalVector& y, const pde::GlobalVector& dy) {
  const std::size_t n = y.size();
  for (std::size_t e = 0; e < n; ++e) {
    y[e] = pack[e];
    dy[e] = pack[n + e];
  }
}

SecondOrderSweep::SecondOrderSweep(const pde::OperatorView& op, const ode::Checkpointing& c, bool shared_disk,
                                   const char* who)
    : SecondOrderSums(op),
      snapshots(op.grid().comm(), op.grid().rank(), 2 * op.grid().owned_size(), c, shared_disk, who) {
  current = op.grid().create_global();
  dcurrent = op.grid().create_global();
  pack.resize(2 * op.grid().owned_size());
}

void SecondOrderSweep::save(std::size_t slot) {
  pack_pair(current, dcurrent, pack);
  snapshots.save(slot, pack, i);
}

void SecondOrderSweep::restore(std::size_t slot) {
  i = snapshots.restore(slot, pack);
  unpack_pair(pack, current, dcurrent);
}

pde::ThetaHessianVector run_second_order_sweep(SecondOrderSweep& sw, const pde::Grid& g, const pde::GlobalVector& y0,
                                               const pde::Objective& objective,
                                               const pde::ThetaDirection& direction, const ode::Checkpointing& c,
                                               std::int64_t steps, pde::HessianProduct product) {
  deep_copy(sw.current, y0);
  if (direction.initial_state.size()) deep_copy(sw.dcurrent, direction.initial_state);
  pde::ThetaHessianVector out;
  out.checkpoints = shown_reverse_sweep(c, sw, steps, "PDE second-order sweep");
  out.checkpoints.disk_snapshots = sw.snapshots.disk_writes();
  sw.into(out, objective, g, y0, sw.dcurrent, steps, product);
  return out;
}

}  // namespace costate::detail
