// End to end: the bouncing ball of data/examples/bouncing_ball.yaml read
// from its input file (events: section → ode::EquationModel events) and
// integrated by the event engine. Between impacts the motion is a parabola,
// so the closed form holds to the integrators' tolerance: impacts at
//     τ_1 = t_1 = sqrt(2 h0 / g),  τ_{k+1} = τ_k + 2 e^k t_1,
// and on [τ_k, τ_{k+1}]  h = e^k g t_1 (t − τ_k) − g/2 (t − τ_k)².
// Checked: the states at the outputs, the located impact times, and the
// gradient of J = h(t_end) by forward sensitivities and by the discrete
// adjoint against the closed form's derivatives (ad::Dual on the closed form).
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/io/input.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/integrate.hpp"

namespace {

namespace ode = costate::ode;
using D3 = costate::ad::Dual<double, 3>;

// dopri5 and bdf at rtol 1e-12/1e-13, atol 1e-14 on a piecewise quadratic:
// states, located impacts and derivatives within ~1e-10 of the closed form;
// the 1e-8 leaves room.
constexpr double kClosedFormTol = 1e-8;

/// The closed form on any scalar (double, or Dual for its derivatives).
template <class T>
struct Ball {
  T g, e, h0;
  T t1() const { return sqrt(2.0 * h0 / g); }
  std::vector<T> impacts(double t_end) const {
    std::vector<T> tau{t1()};
    for (int k = 1; value(tau.back()) < t_end; ++k)
      tau.push_back(tau.back() + 2.0 * pow(e, T(k)) * t1());
    return tau;
  }
  /// (h, v) at t.
  std::pair<T, T> at(double t) const {
    const std::vector<T> tau = impacts(t);
    if (t < value(tau[0])) return {h0 - 0.5 * g * t * t, -g * t};
    std::size_t k = 0;
    while (k + 1 < tau.size() && value(tau[k + 1]) <= t) ++k;
    const T u = pow(e, T(static_cast<double>(k + 1))) * g * t1(), s = t - tau[k];
    return {u * s - 0.5 * g * s * s, u - g * s};
  }
  static double value(double x) { return x; }
  static double value(const D3& x) { return x.value(); }
};

/// J = h(t_end).
struct HeightAtEnd {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

TEST(InputEventsRun, BouncingBallMatchesTheClosedForm) {
  using std::pow, std::sqrt;
  const std::string file = COSTATE_EXAMPLES_DIR "/bouncing_ball.yaml";
  const costate::io::RunConfig cfg = costate::io::load_run_config(file);
  ASSERT_EQ(cfg.events.size(), 1u);
  ASSERT_EQ(cfg.parameter_names, (std::vector<std::string>{"g", "e", "h0"}));
  const ode::EquationModel model = costate::io::equation_model(cfg);
  const Ball<double> ball{cfg.parameters[0], cfg.parameters[1], cfg.parameters[2]};
  const std::vector<double> impacts = ball.impacts(cfg.t_end);
  ASSERT_EQ(impacts.size(), 3u);  // 1.43, 3.71 before t_end = 5; 5.54 after
  // dJ/d(g, e, h0) of the closed form (h0 also sets h(0): both paths).
  const Ball<D3> dual{D3::seed(ball.g, 0), D3::seed(ball.e, 1), D3::seed(ball.h0, 2)};
  const D3 dJ = dual.at(cfg.t_end).first;

  for (const ode::Method method : {ode::Method::Dopri5, ode::Method::Bdf}) {
    SCOPED_TRACE(ode::to_string(method));
    ode::Problem<ode::EquationModel> problem{model, cfg.initial_state, cfg.parameters,
                                             {cfg.t_start, cfg.t_end}, cfg.output_times};
    // bdf's order ≤ 5 formulas are not exact on a quadratic: tighter.
    const ode::IntegratorOptions opt{.method = method,
                                     .rtol = method == ode::Method::Bdf ? 1e-13 : 1e-12,
                                     .atol = 1e-14};
    const ode::Solution sol = ode::integrate(problem, opt);
    ASSERT_TRUE(sol.summary.success()) << sol.summary.message;
    EXPECT_EQ(sol.summary.events, 2);
    ASSERT_EQ(sol.n_outputs(), cfg.output_times.size());
    for (std::size_t k = 0; k < sol.n_outputs(); ++k) {
      const auto [h, v] = ball.at(sol.t[k]);
      EXPECT_NEAR(sol.state(k)[0], h, kClosedFormTol) << "h at t = " << sol.t[k];
      EXPECT_NEAR(sol.state(k)[1], v, kClosedFormTol) << "v at t = " << sol.t[k];
    }

    problem.output_times.clear();
    const ode::GradientResult fw = ode::gradient(problem, HeightAtEnd{}, ode::Forward{}, opt);
    const ode::GradientResult ad =
        ode::gradient(problem, HeightAtEnd{}, ode::DiscreteAdjoint{}, opt, fw.steps);
    ASSERT_EQ(fw.steps.events().size(), 2u);
    for (std::size_t k = 0; k < 2; ++k)
      EXPECT_NEAR(fw.steps.times()[fw.steps.events()[k].at], impacts[k], kClosedFormTol)
          << "impact " << k + 1;
    EXPECT_NEAR(fw.objective, dJ.value(), kClosedFormTol);
    for (const ode::GradientResult* r : {&fw, &ad}) {
      EXPECT_NEAR(r->wrt_parameters[0], dJ.tangent(0), kClosedFormTol) << r->method << " dJ/dg";
      EXPECT_NEAR(r->wrt_parameters[1], dJ.tangent(1), kClosedFormTol) << r->method << " dJ/de";
      // h0 enters as a parameter (unused by the equations) and as h(0).
      EXPECT_NEAR(r->wrt_parameters[2] + r->wrt_initial_state[0], dJ.tangent(2),
                  kClosedFormTol)
          << r->method << " dJ/dh0";
    }
  }
}

}  // namespace
