// A block of adjoint seeds (ode::gradients, scheme.hpp's adjoint_block_sweep):
// several objectives of one problem share one reverse sweep — the plan, the
// forward steps, the snapshots and the recomputation — and each gradient has
// the bits of its own ode::gradient on the same steps (each reverse step runs
// the scheme's adjoint from the same x_i once per objective).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/sensitivity_matrix.hpp"
#include "costate/ode/support.hpp"

namespace {

using namespace costate::ode;

/// One objective type for the block (the block's objectives are one type):
///   J = Σ_i w_i y_i(t1) + c p_0 y_0(t1)² + Σ_k ½ Σ_i (y_i(t_k) − d_ki)²
/// the observations present when `obs` has times.
struct Probe {
  std::vector<double> w;
  double c = 0.0;
  WeightedObservations obs{};

  std::vector<double> observation_times() const { return obs.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return obs.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T> p) const {
    T s = T(0.0);
    for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
    return T(s + c * p[0] * y[0] * y[0]);
  }
};

/// With a running cost: refused in a block of several.
struct ProbeWithRunning : Probe {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    return T(y[0] * y[0]);
  }
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

WeightedObservations observations(std::size_t n, double t1) {
  WeightedObservations o;
  o.n_states = n;
  for (int k = 1; k <= 4; ++k) {
    o.times.push_back(t1 * k / 4.0);
    for (std::size_t i = 0; i < n; ++i) o.data.push_back(0.5 + 0.1 * k - 0.2 * static_cast<double>(i));
  }
  o.weights.assign(o.data.size(), 1.0);
  return o;
}

/// Every native integrator the support table gives discrete-adjoint
/// gradients for, on a problem: two objectives (the first with
/// observations, so its plan lands on them; the second terminal only) in one
/// sweep against each one's own gradient on the block's steps, under
/// StoreAll and a binomial schedule.
template <class M>
void expect_block_equals_separate(const Problem<M>& pr, double dt, const std::string& name) {
  const std::size_t n = pr.y0.size();
  std::vector<Probe> objectives(2);
  objectives[0].w.assign(n, 0.5);
  objectives[0].obs = observations(n, pr.t1());
  objectives[1].w.assign(n, 0.0);
  objectives[1].w[n - 1] = 1.0;
  objectives[1].c = 0.3;
  int tested = 0;
  for (Method m : all_methods()) {
    IntegratorOptions o{.method = m, .rtol = 1e-8, .atol = 1e-10};
    if (!is_adaptive(m)) o.dt = dt;
    if (!supports(SensitivityKind::DiscreteAdjoint, o, 1)) continue;
    for (const Checkpointing& c : {Checkpointing{StoreAll{}}, Checkpointing{Binomial{.snapshots = 3}}}) {
      const std::string what = name + " / " + to_string(m) + " / " + to_string(c);
      const std::vector<GradientResult> block =
          gradients(pr, std::span<const Probe>(objectives), DiscreteAdjoint{c}, o);
      ASSERT_EQ(block.size(), 2u) << what;
      // The first objective chooses the steps, as its own gradient would.
      const GradientResult first = gradient(pr, objectives[0], DiscreteAdjoint{c}, o);
      EXPECT_EQ(block[0].steps.times(), first.steps.times()) << what;
      for (std::size_t k = 0; k < 2; ++k) {
        const GradientResult own = gradient(pr, objectives[k], DiscreteAdjoint{c}, o, block[k].steps);
        EXPECT_TRUE(same_bits(block[k].objective, own.objective)) << what << " objective " << k;
        EXPECT_TRUE(same_bits(block[k].wrt_parameters, own.wrt_parameters)) << what << " p " << k;
        EXPECT_TRUE(same_bits(block[k].wrt_initial_state, own.wrt_initial_state))
            << what << " y0 " << k;
      }
      // One sweep: the forward steps (and recomputation) once for both.
      EXPECT_EQ(block[0].checkpoints.forward_steps, first.checkpoints.forward_steps) << what;
      ++tested;
    }
  }
  EXPECT_GE(tested, 2 * 7) << name << ": every native stepper, two schedules";
}

TEST(AdjointBlock, TwoObjectivesInOneSweepEqualTheirOwnGradientsBitwise) {
  expect_block_equals_separate(
      Problem<LotkaVolterra>{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 3.0}}, 1e-2,
      "lotka_volterra");
  // Stiff (μ = 100): fixed steps inside euler's and rk4's stability limits.
  expect_block_equals_separate(Problem<VanDerPol>{VanDerPol{}, {2.0, 0.0}, {100.0}, {0.0, 0.5}},
                               2e-3, "van_der_pol");
}

/// The rows of an output Jacobian: J_i = y_i(t1), i = 1 … n, in one sweep,
/// against the forward tangents of the same steps (the same derivative
/// summed in another order: round-off, 1e-10 relative to the row's size).
TEST(AdjointBlock, RowsOfTheTerminalStateJacobianMatchForwardTangents) {
  constexpr double kSameDiscreteRelTol = 1e-10;
  const Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 3.0}};
  const IntegratorOptions o{.method = Method::Dopri5, .rtol = 1e-8, .atol = 1e-10};
  std::vector<Probe> rows(2);
  for (std::size_t i = 0; i < 2; ++i) {
    rows[i].w.assign(2, 0.0);
    rows[i].w[i] = 1.0;
  }
  const std::vector<GradientResult> block =
      gradients(pr, std::span<const Probe>(rows), DiscreteAdjoint{Binomial{.snapshots = 4}}, o);
  for (std::size_t i = 0; i < 2; ++i) {
    const GradientResult fwd = gradient(pr, rows[i], Forward{}, o, block[i].steps);
    double scale = 0.0;
    for (double v : fwd.wrt_parameters) scale = std::max(scale, std::abs(v));
    for (double v : fwd.wrt_initial_state) scale = std::max(scale, std::abs(v));
    ASSERT_GT(scale, 0.0);
    for (std::size_t j = 0; j < fwd.wrt_parameters.size(); ++j)
      EXPECT_NEAR(block[i].wrt_parameters[j], fwd.wrt_parameters[j], kSameDiscreteRelTol * scale)
          << "row " << i << " p" << j;
    for (std::size_t j = 0; j < fwd.wrt_initial_state.size(); ++j)
      EXPECT_NEAR(block[i].wrt_initial_state[j], fwd.wrt_initial_state[j],
                  kSameDiscreteRelTol * scale)
          << "row " << i << " y0_" << j;
  }
}

TEST(AdjointBlock, RefusesWhatItDoesNotCover) {
  const Problem<LotkaVolterra> pr{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 1.0}};
  const IntegratorOptions o{.method = Method::RK4, .dt = 1e-2};
  std::vector<ProbeWithRunning> running(2);
  for (auto& r : running) r.w.assign(2, 1.0);
  try {
    (void)gradients(pr, std::span<const ProbeWithRunning>(running), DiscreteAdjoint{}, o);
    ADD_FAILURE() << "a block with running costs was not refused";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("running cost"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)gradients(pr, std::span<const Probe>(), DiscreteAdjoint{}, o), costate::Error);
  // The second objective's observation times must be among the steps the
  // first chose (here: the first has none, the fixed steps miss t = 0.123).
  std::vector<Probe> two(2);
  for (auto& p : two) p.w.assign(2, 1.0);
  two[1].obs = {.times = {0.1234567}, .data = {1.0, 1.0}, .weights = {1.0, 1.0}, .n_states = 2};
  try {
    (void)gradients(pr, std::span<const Probe>(two), DiscreteAdjoint{}, o);
    ADD_FAILURE() << "an observation time off the steps was not refused";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("observation time"), std::string::npos) << e.what();
  }
}

}  // namespace
