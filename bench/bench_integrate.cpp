// Overhead of costate's integration layer (ode::integrate on costate::Vector
// kernels) against the same Dormand–Prince 5(4) written as plain loops over
// std::vector<double> — the "plain-double primal". Both take the same steps
// (checked), so the ratio is the cost of the abstraction alone.
//
// Workloads:
//   lotka_volterra  n = 2,    t in [0, 10],  rtol 1e-8  (tiny state: per-call overhead)
//   lorenz96        n = 1000, t in [0, 2],   rtol 1e-8, F = 8 (large state: kernel throughput)
//
// Sample run:  build/bench/bench_integrate
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench_util.hpp"
#include "costate/costate.hpp"

namespace {

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

/// Dormand–Prince 5(4) with the same controller as costate's, plain loops.
template <class Model>
long plain_dopri5(const Model& model, std::vector<double> y, const std::vector<double>& p,
                  double t0, double t1, double rtol, double atol, double h,
                  std::vector<double>* out) {
  using namespace costate::ode::dopri5_tableau;
  const std::size_t n = y.size();
  std::vector<double> k1(n), k2(n), k3(n), k4(n), k5(n), k6(n), k7(n), s(n), yn(n);
  auto f = [&](double t, const std::vector<double>& yy, std::vector<double>& d) {
    model.template rhs<double>(t, yy, p, d);
  };
  f(t0, y, k1);
  double t = t0, fac_old = 1e-4;
  long steps = 0;
  bool last_rejected = false;
  while (t < t1) {
    bool last = false;
    if (t + 1.01 * h >= t1) {
      h = t1 - t;
      last = true;
    }
    for (std::size_t i = 0; i < n; ++i) s[i] = y[i] + h * a21 * k1[i];
    f(t + c2 * h, s, k2);
    for (std::size_t i = 0; i < n; ++i) s[i] = y[i] + h * (a31 * k1[i] + a32 * k2[i]);
    f(t + c3 * h, s, k3);
    for (std::size_t i = 0; i < n; ++i) s[i] = y[i] + h * (a41 * k1[i] + a42 * k2[i] + a43 * k3[i]);
    f(t + c4 * h, s, k4);
    for (std::size_t i = 0; i < n; ++i)
      s[i] = y[i] + h * (a51 * k1[i] + a52 * k2[i] + a53 * k3[i] + a54 * k4[i]);
    f(t + c5 * h, s, k5);
    for (std::size_t i = 0; i < n; ++i)
      s[i] = y[i] + h * (a61 * k1[i] + a62 * k2[i] + a63 * k3[i] + a64 * k4[i] + a65 * k5[i]);
    f(t + h, s, k6);
    for (std::size_t i = 0; i < n; ++i)
      yn[i] = y[i] + h * (b1 * k1[i] + b3 * k3[i] + b4 * k4[i] + b5 * k5[i] + b6 * k6[i]);
    f(t + h, yn, k7);
    double err = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double e = h * (e1 * k1[i] + e3 * k3[i] + e4 * k4[i] + e5 * k5[i] + e6 * k6[i] +
                            e7 * k7[i]);
      const double sk = atol + rtol * std::max(std::abs(y[i]), std::abs(yn[i]));
      err += (e / sk) * (e / sk);
    }
    err = std::sqrt(err / static_cast<double>(n));
    const double fac11 = std::pow(err, 0.2 - 0.04 * 0.75);
    double fac = std::clamp(fac11 / std::pow(fac_old, 0.04) / 0.9, 0.1, 5.0);
    double h_new = h / fac;
    if (err <= 1.0) {
      fac_old = std::max(err, 1e-4);
      ++steps;
      t = last ? t1 : t + h;
      std::swap(y, yn);
      std::swap(k1, k7);
      if (last_rejected) h_new = std::min(h_new, h);
      last_rejected = false;
    } else {
      h_new = h / std::min(5.0, fac11 / 0.9);
      last_rejected = true;
    }
    h = h_new;
  }
  *out = y;
  return steps;
}

template <class Model>
void compare(const char* name, const Model& model, std::vector<double> y0, std::vector<double> p,
             double t1, int inner, int repeats) {
  costate::ode::Problem<Model> problem{model, y0, p, {0.0, t1}};
  costate::ode::IntegratorOptions opt{.rtol = 1e-8, .atol = 1e-10};
  // Use costate's automatic first step in both, so the step sequences match.
  const auto probe = costate::ode::integrate(problem, opt);
  double h0 = 0.0;
  {
    costate::ode::IntegratorOptions o = opt;
    o.max_steps = 1;
    costate::ode::Problem<Model> pr = problem;
    auto s = costate::ode::integrate(pr, o);
    h0 = s.summary.last_step;
  }
  opt.dt = h0;
  const auto sol = costate::ode::integrate(problem, opt);
  std::vector<double> plain_y;
  const long plain_steps = plain_dopri5(model, y0, p, 0.0, t1, 1e-8, 1e-10, h0, &plain_y);
  double max_diff = 0.0;
  const auto last = sol.state(sol.n_outputs() - 1);
  for (std::size_t i = 0; i < plain_y.size(); ++i)
    max_diff = std::max(max_diff, std::abs(plain_y[i] - last[i]));

  const double t_costate = median_seconds(
      [&] {
        for (int k = 0; k < inner; ++k) (void)costate::ode::integrate(problem, opt);
      },
      repeats) / inner;
  const double t_plain = median_seconds(
      [&] {
        std::vector<double> out;
        for (int k = 0; k < inner; ++k) (void)plain_dopri5(model, y0, p, 0.0, t1, 1e-8, 1e-10, h0, &out);
      },
      repeats) / inner;
  std::printf("| %-15s | %5zu | %6ld | %6ld | %10.3e | %10.3e | %5.2f | %.1e |\n", name, y0.size(),
              static_cast<long>(sol.summary.steps), plain_steps, t_plain, t_costate,
              t_costate / t_plain, max_diff);
  (void)probe;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  std::printf("| workload        |     n | steps  | plain  | plain (s)  | costate (s)| ratio | max |diff| |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  compare("lotka_volterra", costate::ode::LotkaVolterra{}, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, 10.0,
          200, 9);
  std::vector<double> y0(1000);
  for (std::size_t i = 0; i < y0.size(); ++i) y0[i] = 8.0 + (i == 0 ? 0.01 : 0.0) + 0.1 * std::sin(0.1 * double(i));
  compare("lorenz96", Lorenz96{}, y0, {8.0}, 2.0, 3, 9);
  return 0;
}
