// Second-order ODE sensitivities (issue #6 item 3): the cost of one
// Hessian–vector product of an ODE objective (ode::hessian_vector, forward
// over the discrete adjoint) against the gradient (ode::gradient,
// DiscreteAdjoint) and the primal (ode::integrate) of the same problem, on
// the same steps, in one run:
//
//   LV     Lotka–Volterra (2 states, 4 parameters), 10 observations,
//          rk4 dt = 0.01 on [0, 10] (1000 steps); also the full 4 × 4 Hessian;
//   L96    Lorenz-96 with a forcing parameter per state (N = 40 states,
//          40 parameters), x_i' = (x_{i+1} − x_{i−2}) x_{i−1} − x_i + F_i,
//          terminal ½‖x‖² plus 10 observations of every state,
//          rk4 dt = 0.005 on [0, 2] (400 steps);
//   LV bdf  the LV problem under adaptive bdf (rtol 1e-6, atol 1e-8);
//   LV euler, dopri5, backward_euler, crank_nicolson, sdirk3: the same
//          problem under every other native stepper;
//   VdP bdf Van der Pol at μ = 1e3 (stiff) on [0, 1], observations of both
//          states at 10 times, adaptive bdf (rtol 1e-6, atol 1e-8)
//          (steps and orders replayed). Every native stepper runs the
//          compiled schemes' forward over adjoint (scheme.hpp, second order).
//
// Each HVP is checked against Richardson-extrapolated central differences
// of gradients (relative 1e-6) before timing. Schedules: store-all and binomial(10).
//
// Times are process CPU seconds (see median_seconds below).
//
// Sample run:  build/bench/bench_ode_hvp [repeats] [row name, e.g. "LV sdirk3"]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"

namespace {

namespace ode = costate::ode;
/// Median process CPU seconds of one f() over `repeats` samples, each
/// sample running f often enough to last ≥ 20 ms (the shared machine these
/// figures come from runs at load 5-9 on 2 cores, where wall time counts
/// other jobs' time slices; every ratio below is of CPU seconds).
template <class F>
double median_seconds(F&& f, int repeats) {
  const double t0 = costate::bench::cpu_seconds();
  f();
  const double once = std::max(costate::bench::cpu_seconds() - t0, 1e-7);
  const int batch = std::max(1, static_cast<int>(0.02 / once));
  const double per_batch = costate::bench::median_wall_cpu(
                               [&] {
                                 for (int b = 0; b < batch; ++b) f();
                               },
                               repeats)
                               .cpu;
  return per_batch / batch;
}

/// Lorenz-96 with one forcing parameter per state.
struct Lorenz96 {
  template <class T>
  void rhs(double, std::span<const T> x, std::span<const T> F, std::span<T> dxdt) const {
    const std::size_t n = x.size();
    for (std::size_t i = 0; i < n; ++i) {
      const T& xp1 = x[(i + 1) % n];
      const T& xm1 = x[(i + n - 1) % n];
      const T& xm2 = x[(i + n - 2) % n];
      dxdt[i] = (xp1 - xm2) * xm1 - x[i] + F[i];
    }
  }
};

/// Terminal ½‖x‖² plus least squares at 10 times.
struct TerminalAndData {
  ode::LeastSquares ls;
  std::vector<double> observation_times() const { return ls.times; }
  template <class T>
  T observation(std::size_t k, std::span<const T> y, std::span<const T> p) const {
    return ls.observation<T>(k, y, p);
  }
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

template <class M, class O>
void check_against_fd(const char* name, const ode::Problem<M>& pr, const O& obj,
                      const ode::HessianDirection& v, const ode::IntegratorOptions& opt) {
  const auto r = ode::hessian_vector(pr, obj, v, ode::DiscreteAdjoint{}, opt);
  auto grad = [&](double s) {
    ode::Problem<M> q = pr;
    for (std::size_t j = 0; j < q.p.size(); ++j) q.p[j] += s * v.parameters[j];
    return ode::gradient(q, obj, ode::DiscreteAdjoint{}, opt, r.steps)
        .wrt_parameters;
  };
  // Central differences at h and h/2, Richardson-extrapolated (O(h⁴)); the
  // best of three h (a chaotic model's higher derivatives are large).
  double best = 1e300;
  for (const double h : {2e-3, 2e-4, 2e-5}) {
    const auto a = grad(h), b = grad(-h), c = grad(h / 2), d = grad(-h / 2);
    double err = 0.0;
    for (std::size_t j = 0; j < a.size(); ++j) {
      const double fd = (4.0 * (c[j] - d[j]) / h - (a[j] - b[j]) / (2 * h)) / 3.0;
      err = std::max(err, std::abs(fd - r.hv_wrt_parameters[j]));
    }
    std::printf("#   h = %.0e: max |FD - H v| = %.3e\n", h, err);
    best = std::min(best, err);
  }
  const double err = best;
  const double rel = err / max_abs(r.hv_wrt_parameters);
  std::printf("# %s: H v vs central differences of gradients: max relative error %.2e\n", name, rel);
  if (!(rel < 1e-6)) {
    std::fprintf(stderr, "%s: H v disagrees with finite differences\n", name);
    std::exit(1);
  }
}

/// Rows to run: all, or those whose name is argv[2] (e.g. "LV sdirk3").
std::string g_only;

template <class M, class O>
void run(const char* name, const ode::Problem<M>& pr, const O& obj,
         const ode::IntegratorOptions& opt, const ode::HessianDirection& v, int repeats,
         bool full_hessian) {
  if (!g_only.empty() && g_only != name) return;
  check_against_fd(name, pr, obj, v, opt);
  const double primal = median_seconds([&] { (void)ode::integrate(pr, opt); }, repeats);
  for (const ode::Checkpointing& c :
       {ode::Checkpointing(ode::StoreAll{}), ode::Checkpointing(ode::Binomial{.snapshots = 10})}) {
    const ode::DiscreteAdjoint method{.checkpointing = c};
    const double grad = median_seconds([&] { (void)ode::gradient(pr, obj, method, opt); }, repeats);
    ode::HessianVectorResult last;
    const double hvp =
        median_seconds([&] { last = ode::hessian_vector(pr, obj, v, method, opt); }, repeats);
    std::printf("| %s | %s | %zu | %zu | %.3f | %.3f | %.3f | %.2f | %.1f | %.1f |\n", name,
                ode::to_string(c).c_str(), pr.y0.size(), pr.p.size(), primal * 1e3, grad * 1e3,
                hvp * 1e3, hvp / grad, hvp / primal, grad / primal);
    if (full_hessian) {
      const double hess =
          median_seconds([&] { (void)ode::hessian(pr, obj, method, opt); }, repeats);
      std::printf("| %s, full %zux%zu Hessian | %s | | | | | %.3f | %.2f | %.1f | |\n", name,
                  pr.p.size(), pr.p.size(), ode::to_string(c).c_str(), hess * 1e3, hess / grad,
                  hess / primal);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  if (argc > 2) g_only = argv[2];
  costate::Environment env(argc, argv);
  std::printf("process CPU milliseconds per call, medians of %d samples\n", repeats);
  std::printf("| problem | schedule | states | parameters | primal (ms) | gradient (ms) | HVP (ms) "
              "| HVP / gradient | HVP / primal | gradient / primal |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");

  {  // Lotka–Volterra with 10 observations.
    const ode::Problem<ode::LotkaVolterra> pr{ode::LotkaVolterra{}, {1.0, 1.0},
                                              {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
    ode::LeastSquares ls;
    ls.n_states = 2;
    for (int k = 1; k <= 10; ++k) {
      ls.times.push_back(k);
      ls.data.push_back(1.0 + 0.5 * std::sin(1.3 * k));
      ls.data.push_back(0.8 + 0.4 * std::cos(0.9 * k));
    }
    const ode::IntegratorOptions opt{.method = ode::Method::RK4, .dt = 0.01};
    run("LV", pr, ls, opt, {{0.3, -0.7, 0.2, 0.5}, {}}, repeats, true);
    const ode::IntegratorOptions bdf{.method = ode::Method::Bdf, .rtol = 1e-6, .atol = 1e-8};
    run("LV bdf", pr, ls, bdf, {{0.3, -0.7, 0.2, 0.5}, {}}, repeats, true);
    // Every other native stepper on the same problem (issue 14: the
    // compiled schemes' second order; the target is HVP / gradient ≤ 2).
    const std::vector<std::pair<const char*, ode::IntegratorOptions>> steppers{
        {"LV euler", {.method = ode::Method::ExplicitEuler, .dt = 0.002}},
        {"LV dopri5", {.method = ode::Method::Dopri5, .rtol = 1e-8, .atol = 1e-10}},
        {"LV backward_euler", {.method = ode::Method::BackwardEuler, .dt = 0.01}},
        {"LV crank_nicolson", {.method = ode::Method::CrankNicolson, .dt = 0.01}},
        {"LV sdirk3", {.method = ode::Method::Sdirk3, .rtol = 1e-6, .atol = 1e-8}}};
    for (const auto& [name, o] : steppers) run(name, pr, ls, o, {{0.3, -0.7, 0.2, 0.5}, {}}, repeats, false);
  }
  {  // Stiff Van der Pol (μ = 1e3) under bdf, 10 observations.
    const ode::Problem<ode::VanDerPol> pr{ode::VanDerPol{}, {2.0, -0.6666}, {1000.0}, {0.0, 1.0}};
    ode::LeastSquares ls;
    ls.n_states = 2;
    for (int k = 1; k <= 10; ++k) {
      ls.times.push_back(0.1 * k);
      ls.data.push_back(2.0 - 0.1 * k);
      ls.data.push_back(-0.7);
    }
    const ode::IntegratorOptions bdf{.method = ode::Method::Bdf, .rtol = 1e-6, .atol = 1e-8};
    run("VdP bdf", pr, ls, bdf, {{100.0}, {}}, repeats, false);
  }
  {  // Lorenz-96, N = 40.
    constexpr std::size_t n = 40;
    ode::Problem<Lorenz96> pr{Lorenz96{}, std::vector<double>(n), std::vector<double>(n, 8.0),
                              {0.0, 2.0}};
    for (std::size_t i = 0; i < n; ++i) pr.y0[i] = 8.0 + 0.01 * std::sin(0.7 * static_cast<double>(i));
    TerminalAndData obj;
    obj.ls.n_states = n;
    for (int k = 1; k <= 10; ++k) {
      obj.ls.times.push_back(0.2 * k);
      for (std::size_t i = 0; i < n; ++i)
        obj.ls.data.push_back(std::cos(0.3 * k + 0.1 * static_cast<double>(i)));
    }
    ode::HessianDirection v{std::vector<double>(n), {}};
    for (std::size_t i = 0; i < n; ++i) v.parameters[i] = std::sin(1.0 + static_cast<double>(i));
    const ode::IntegratorOptions opt{.method = ode::Method::RK4, .dt = 0.005};
    run("L96", pr, obj, opt, v, repeats, false);
  }
  return 0;
}
