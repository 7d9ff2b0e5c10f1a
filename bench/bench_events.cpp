// Events (issue 31): the cost of locating them and of differentiating
// through them, on models with 1 000 instants.
//
//   dose   y' = −k y (a 4-state decay chain), a dose y_0 += D every Δ: one
//          root t − τ_0 − cΔ with a counter c (c' = 0, c += 1 at each dose),
//          so the dose times are found by root location on t;
//   reset  x' = a(1 + x), x ← 0 when x reaches θ (a state trigger): the
//          relaxation oscillator, 1 000 resets.
//
// For each: the forward run with events (the event driver: each instant's
// step retaken to the located root, a new segment after it) against the same
// run with the instants given as step boundaries (ode::integrate segment by
// segment to the known times, the update applied between segments: no root
// location); and the gradient of the final state (discrete adjoint, StoreAll)
// against the forward run with events; and the Hessian-vector product of the
// same objective (forward over the discrete adjoint, StoreAll; v = e_0 in p,
// every instant's jump reversed to second order) against the gradient. CPU
// medians, the sides alternated within each repeat.
//
// Sample run:  build/bench/bench_events [repeats]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/cvodes.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/integrate.hpp"

namespace {

using namespace costate;

constexpr int kInstants = 1000;

/// The decay chain y' = A y; p = (k, τ_0, Δ, D).
struct Chain : ode::EventDefaults {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = -p[0] * y[0];
    d[1] = p[0] * y[0] - 0.5 * p[0] * y[1];
    d[2] = 0.5 * p[0] * y[1] - 0.25 * p[0] * y[2];
    d[3] = 0.25 * p[0] * y[2];
    if (d.size() > 4) d[4] = T(0.0);  // the counter
  }
};

struct Dose : Chain {
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T t, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    g[0] = t - p[1] - y[4] * p[2];
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const { return {.name = "dose"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T> y, std::span<const T> p,
                    std::span<T> v) const {
    v[0] = y[0] + p[3];
    v[1] = y[4] + 1.0;
  }
  static constexpr std::size_t kTargets[2] = {0, 4};
};

/// x' = a(1 + x); p = (a, θ).
struct Oscillator : ode::EventDefaults {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> d) const {
    d[0] = p[0] * (1.0 + y[0]);
  }
};
struct Reset : Oscillator {
  std::size_t n_roots() const { return 1; }
  template <class T>
  void roots(T, std::span<const T> y, std::span<const T> p, std::span<T> g) const {
    g[0] = y[0] - p[1];
  }
  std::size_t n_events() const { return 1; }
  ode::EventAttributes event_attributes(std::size_t) const { return {.name = "reset"}; }
  bool event_trigger(std::size_t, double, std::span<const double>, std::span<const double>,
                     std::span<const std::int8_t> sides) const {
    return sides[0] > 0;
  }
  std::span<const std::size_t> event_targets(std::size_t) const { return kTargets; }
  template <class T>
  void event_assign(std::size_t, T, std::span<const T>, std::span<const T>,
                    std::span<T> v) const {
    v[0] = T(0.0);
  }
  static constexpr std::size_t kTargets[1] = {0};
};

struct Final0 {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    return y[0];
  }
};

ode::IntegratorOptions options() {
  ode::IntegratorOptions o;
  o.method = ode::Method::Dopri5;
  o.rtol = 1e-8;
  o.atol = 1e-10;
  return o;
}

/// The run with the instants as step boundaries: ode::integrate from one
/// known instant to the next, `update` applied between.
template <class M, class U>
double segments(const M& model, std::vector<double> y, const std::vector<double>& p,
                const std::vector<double>& instants, double t1, U update) {
  double t = 0.0;
  for (std::size_t j = 0; j <= instants.size(); ++j) {
    const double end = j < instants.size() ? instants[j] : t1;
    ode::Problem<M> seg{model, y, p, {t, end}};
    const ode::Solution s = ode::integrate(seg, options());
    const auto last = s.state(s.n_outputs() - 1);
    y.assign(last.begin(), last.end());
    if (j < instants.size()) update(y);
    t = end;
  }
  return y[0];
}

struct Row {
  const char* name;
  double events, boundaries, gradient, hv;
};

template <class MEv, class MPlain, class U>
Row measure(const char* name, const MEv& with_events, const MPlain& plain, std::vector<double> y0,
            std::vector<double> p, std::vector<double> instants, double t1, U update,
            int repeats) {
  ode::Problem<MEv> problem{with_events, y0, p, {0.0, t1}};
  // Check once: the same number of instants, the same final state.
  const ode::Solution ev = ode::integrate(problem, options());
  const double ref = segments(plain, y0, p, instants, t1, update);
  const ode::GradientResult g =
      ode::gradient(problem, Final0{}, ode::DiscreteAdjoint{ode::StoreAll{}}, options());
  std::printf("%s: %lld instants located (%d given); y_0(t1) = %.10g with events, %.10g by "
              "segments; dJ/dp_0 = %.6g\n",
              name, static_cast<long long>(ev.summary.events), static_cast<int>(instants.size()),
              ev.state(ev.n_outputs() - 1)[0], ref, g.wrt_parameters[0]);
  ode::HessianDirection v{.parameters = std::vector<double>(p.size(), 0.0)};
  v.parameters[0] = 1.0;
  const ode::HessianVectorResult h = ode::hessian_vector(
      problem, Final0{}, v, ode::DiscreteAdjoint{ode::StoreAll{}}, options());
  std::printf("%s: H v (v = e_0): gradient part %.6g (the gradient's: %.6g), d2J/dp_0^2 = %.6g\n",
              name, h.gradient_wrt_parameters[0], g.wrt_parameters[0], h.hv_wrt_parameters[0]);
  std::vector<double> a, b, c, d;
  for (int r = 0; r < repeats; ++r) {
    a.push_back(bench::median_wall_cpu([&] { (void)ode::integrate(problem, options()); }, 1).cpu);
    b.push_back(bench::median_wall_cpu(
                    [&] { (void)segments(plain, y0, p, instants, t1, update); }, 1)
                    .cpu);
    c.push_back(bench::median_wall_cpu(
                    [&] {
                      (void)ode::gradient(problem, Final0{},
                                          ode::DiscreteAdjoint{ode::StoreAll{}}, options());
                    },
                    1)
                    .cpu);
    d.push_back(bench::median_wall_cpu(
                    [&] {
                      (void)ode::hessian_vector(problem, Final0{}, v,
                                                ode::DiscreteAdjoint{ode::StoreAll{}}, options());
                    },
                    1)
                    .cpu);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {name, median(a), median(b), median(c), median(d)};
}

/// CVODES across the same instants (cvodes_bdf, the same tolerances): its
/// run (root finding), the gradient by its forward sensitivities and by its
/// adjoint (the event run, then CVodeF/CVodeB per stretch), CPU seconds,
/// the three alternated within each repeat.
struct CvodesRow {
  const char* name;
  double run, forward, adjoint;
};

template <class MEv>
CvodesRow measure_cvodes(const char* name, const MEv& with_events, std::vector<double> y0,
                         std::vector<double> p, double t1, int repeats) {
  ode::Problem<MEv> problem{with_events, y0, p, {0.0, t1}};
  ode::IntegratorOptions o = options();
  o.method = ode::Method::CvodesBdf;
  const ode::GradientResult f = ode::gradient(problem, Final0{}, ode::CvodesForward{}, o);
  const ode::GradientResult g = ode::gradient(problem, Final0{}, ode::CvodesAdjoint{}, o);
  std::printf("%s (cvodes_bdf): %lld instants; dJ/dp_0 = %.8g forward, %.8g adjoint\n", name,
              static_cast<long long>(g.summary.events), f.wrt_parameters[0], g.wrt_parameters[0]);
  std::vector<double> a, b, c;
  for (int r = 0; r < repeats; ++r) {
    a.push_back(bench::median_wall_cpu([&] { (void)ode::integrate(problem, o); }, 1).cpu);
    b.push_back(bench::median_wall_cpu(
                    [&] { (void)ode::gradient(problem, Final0{}, ode::CvodesForward{}, o); }, 1)
                    .cpu);
    c.push_back(bench::median_wall_cpu(
                    [&] { (void)ode::gradient(problem, Final0{}, ode::CvodesAdjoint{}, o); }, 1)
                    .cpu);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {name, median(a), median(b), median(c)};
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  // Doses every Δ = 0.1 from τ_0 = 0.05: 1 000 by t1 = 100.
  const double k = 0.3, tau0 = 0.05, delta = 0.1, D = 1.0, t1_dose = 100.0;
  std::vector<double> dose_times;
  for (int j = 0; j < kInstants; ++j) dose_times.push_back(tau0 + j * delta);
  const Row dose = measure(
      "dose", Dose{}, Chain{}, {0.0, 0.0, 0.0, 0.0, 0.0}, {k, tau0, delta, D}, dose_times,
      t1_dose,
      [&](std::vector<double>& y) {
        y[0] += D;
        y[4] += 1.0;
      },
      repeats);
  // Resets: x reaches θ after ln(1 + θ)/a; 1 000 of them by t1.
  const double a = 2.0, theta = 1.0, period = std::log(1.0 + theta) / a;
  std::vector<double> reset_times;
  for (int j = 1; j <= kInstants; ++j) reset_times.push_back(j * period);
  const Row reset = measure(
      "reset", Reset{}, Oscillator{}, {0.0}, {a, theta}, reset_times,
      (kInstants + 0.5) * period, [](std::vector<double>& y) { y[0] = 0.0; }, repeats);
  std::printf("\n| model | with events (ms CPU) | instants as boundaries (ms CPU) | ratio "
              "(target ≤ 1.3) | gradient (ms CPU) | gradient / forward (target ≤ 3) | H·v (ms CPU) | "
              "H·v / gradient |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : {dose, reset})
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.name,
                1e3 * r.events, 1e3 * r.boundaries, r.events / r.boundaries, 1e3 * r.gradient,
                r.gradient / r.events, 1e3 * r.hv, r.hv / r.gradient);
  const CvodesRow cdose =
      measure_cvodes("dose", Dose{}, {0.0, 0.0, 0.0, 0.0, 0.0}, {k, tau0, delta, D}, t1_dose, repeats);
  const CvodesRow creset =
      measure_cvodes("reset", Reset{}, {0.0}, {a, theta}, (kInstants + 0.5) * period, repeats);
  std::printf("\n| model (cvodes_bdf) | run (ms CPU) | cvodes_forward gradient (ms CPU) | / run "
              "| cvodes_adjoint gradient (ms CPU) | / run |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const CvodesRow& r : {cdose, creset})
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.name, 1e3 * r.run,
                1e3 * r.forward, r.forward / r.run, 1e3 * r.adjoint, r.adjoint / r.run);
  return 0;
}
