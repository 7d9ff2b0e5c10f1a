// Explicit Runge–Kutta gradients against the forward integration (issue 14):
// the discrete adjoint (store all, and binomial checkpoints) and forward
// sensitivities of
//   Lotka–Volterra, rk4, dt = 1e-4 on [0, 100] (10⁶ steps), p = (1.5, 1, 3, 1),
//     J = ½|y(100)|² (terminal) and J = ∫ ½|y|² dt (running cost);
//   Lorenz-96, n = 1000, F = 8, rk4, dt = 1e-3 on [0, 1] (1000 steps),
//     J = ½|y(1)|²;
// each timed in this binary against ode::integrate of the same problem and a
// plain double loop of the same rk4 steps (the floor). Ratios are measured
// in one run; the gradients are checked against each other (adjoint vs
// forward sensitivities) and the run fails if they disagree.
//
// Sample run:  build/bench/bench_explicit_adjoint [repeats] [lv]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"

namespace {

using namespace costate::ode;
using costate::bench::median_seconds;

struct Lorenz96 {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    const std::size_t n = y.size();
    for (std::size_t i = 0; i < n; ++i) {
      const T& ym2 = y[(i + n - 2) % n];
      const T& ym1 = y[(i + n - 1) % n];
      const T& yp1 = y[(i + 1) % n];
      dydt[i] = (yp1 - ym2) * ym1 - y[i] + p[0];
    }
  }
};

struct HalfNorm {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};
struct HalfNormIntegral {
  template <class T>
  T running(double, std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};

/// The same rk4 steps as plain loops over std::vector<double> (the floor).
template <class M>
double plain_rk4(const M& model, std::vector<double> y, const std::vector<double>& p, double t0,
                 double t1, double dt) {
  const std::size_t n = y.size();
  std::vector<double> k1(n), k2(n), k3(n), k4(n), tmp(n);
  const auto steps = static_cast<long>(std::llround((t1 - t0) / dt));
  const std::span<const double> ps(p);
  for (long s = 0; s < steps; ++s) {
    const double t = t0 + static_cast<double>(s) * dt;
    model.template rhs<double>(t, y, ps, k1);
    for (std::size_t i = 0; i < n; ++i) tmp[i] = y[i] + 0.5 * dt * k1[i];
    model.template rhs<double>(t + 0.5 * dt, tmp, ps, k2);
    for (std::size_t i = 0; i < n; ++i) tmp[i] = y[i] + 0.5 * dt * k2[i];
    model.template rhs<double>(t + 0.5 * dt, tmp, ps, k3);
    for (std::size_t i = 0; i < n; ++i) tmp[i] = y[i] + dt * k3[i];
    model.template rhs<double>(t + dt, tmp, ps, k4);
    for (std::size_t i = 0; i < n; ++i)
      y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
  }
  return y[0];
}

double max_rel_diff(const GradientResult& a, const GradientResult& b) {
  double scale = 0.0, diff = 0.0;
  auto acc = [&](const std::vector<double>& x, const std::vector<double>& y) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, std::abs(x[i]));
      diff = std::max(diff, std::abs(x[i] - y[i]));
    }
  };
  acc(a.wrt_parameters, b.wrt_parameters);
  acc(a.wrt_initial_state, b.wrt_initial_state);
  return diff / scale;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Agreement of the adjoint and forward-sensitivity gradients (both exact for
// the same discrete solution: round-off over 10⁶ steps only).
constexpr double kAgreement = 1e-8;

template <class M, class O>
bool run(const char* name, const Problem<M>& pr, const O& objective, const IntegratorOptions& opt,
         int repeats, bool coloured_row, bool forward_row) {
  const double t_plain =
      median_seconds([&] { (void)plain_rk4(pr.model, pr.y0, pr.p, pr.t0(), pr.t1(), opt.dt); },
                     repeats);
  const double t_int = median_seconds([&] { (void)integrate(pr, opt); }, repeats);
  const std::size_t m = pr.p.size() + pr.y0.size();
  std::printf("\n%s: %zu states, %zu parameters; plain rk4 loop %.4f s, ode::integrate %.4f s "
              "(%.2f x plain)\n",
              name, pr.y0.size(), pr.p.size(), t_plain, t_int, t_int / t_plain);
  std::printf("| method | gradient (s) | / ode::integrate | / plain loop | per direction |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  GradientResult ref;
  struct Row {
    const char* label;
    SensitivityMethod method;
  };
  std::vector<Row> rows{{"discrete adjoint, store all", DiscreteAdjoint{}},
                        {"discrete adjoint, binomial(20)",
                         DiscreteAdjoint{.checkpointing = Binomial{.snapshots = 20}}}};
  if (coloured_row)
    rows.push_back({"discrete adjoint, store all, coloured", DiscreteAdjoint{.coloured_jacobian = true}});
  if (forward_row) rows.push_back({"forward sensitivities", Forward{}});
  bool ok = true;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    GradientResult g;
    const bool fwd = std::holds_alternative<Forward>(rows[r].method);
    const double t = median_seconds([&] { g = gradient(pr, objective, rows[r].method, opt); },
                                    fwd && m > 100 ? 1 : repeats);
    if (r == 0) ref = g;
    const double d = r == 0 ? 0.0 : max_rel_diff(ref, g);
    if (!(d <= kAgreement)) {
      std::fprintf(stderr, "MISMATCH %s / %s: max rel diff %.3e\n", name, rows[r].label, d);
      ok = false;
    }
    if (fwd)
      std::printf("| %s | %.4f | %.2f | %.2f | %.3f (%zu directions) |\n", rows[r].label, t,
                  t / t_int, t / t_plain, t / t_int / static_cast<double>(m), m);
    else
      std::printf("| %s | %.4f | **%.2f** | %.2f | |\n", rows[r].label, t, t / t_int, t / t_plain);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  // "lv": only the Lotka–Volterra terminal rows (for profiling).
  const std::string only = argc > 2 ? argv[2] : "";
  std::printf("load average before: %s\n", load_average().c_str());
  bool ok = true;
  if (only == "lv") {
    Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 100.0}};
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-4};
    return run("Lotka-Volterra rk4, 1e6 steps, terminal", lv, HalfNorm{}, opt, repeats, false, false)
               ? 0
               : 1;
  }
  {
    Problem<LotkaVolterra> lv{LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 100.0}};
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-4};
    ok = run("Lotka-Volterra rk4, 1e6 steps, terminal", lv, HalfNorm{}, opt, repeats, false, true) && ok;
    ok = run("Lotka-Volterra rk4, 1e6 steps, integral", lv, HalfNormIntegral{}, opt, repeats, false,
             true) && ok;
  }
  {
    const std::size_t n = 1000;
    Problem<Lorenz96> l96{Lorenz96{}, std::vector<double>(n, 8.0), {8.0}, {0.0, 1.0}};
    for (std::size_t i = 0; i < n; ++i) l96.y0[i] += 0.01 * std::sin(0.1 * static_cast<double>(i));
    const IntegratorOptions opt{.method = Method::RK4, .dt = 1e-3};
    ok = run("Lorenz-96 n = 1000 rk4, 1000 steps, terminal", l96, HalfNorm{}, opt, repeats, true,
             true) && ok;
  }
  std::printf("\nload average after: %s\n", load_average().c_str());
  return ok ? 0 : 1;
}
