// Hessian–vector products through CVODES (ode::hessian_vector with
// CvodesAdjoint: the continuous second-order adjoint) against the CVODES
// adjoint gradient (ode::gradient, CvodesAdjoint) of the same problem with
// the same settings, in one run:
//
//   LV   Lotka–Volterra (2 states, 4 parameters), 10 observations on
//        [0, 10], cvodes_bdf and cvodes_adams at rtol 1e-8 and 1e-10; also
//        the full 4 × 4 Hessian (4 products).
//
// Before timing, each H v is checked against Richardson-extrapolated central
// differences of CVODES gradients at rtol 1e-12 (printed).
//
// Sample run:  build/bench/bench_cvodes_hvp [repeats]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/hessian.hpp"
#include "costate/ode/models.hpp"

namespace {

namespace ode = costate::ode;
using costate::bench::median_seconds;

double fd_check(const ode::Problem<ode::LotkaVolterra>& pr, const ode::LeastSquares& ls,
                const ode::HessianDirection& v) {
  const ode::IntegratorOptions o{.method = ode::Method::CvodesBdf, .rtol = 1e-12, .atol = 1e-14};
  const auto r = ode::hessian_vector(pr, ls, v, ode::CvodesAdjoint{}, o);
  auto grad = [&](double s) {
    auto q = pr;
    for (std::size_t j = 0; j < q.p.size(); ++j) q.p[j] += s * v.parameters[j];
    return ode::gradient(q, ls, ode::CvodesAdjoint{}, o).wrt_parameters;
  };
  const double h = 2e-3;  // Richardson O(h⁴) truncation ≈ 1e-8 here (1e-2: 3e-5 on [0, 10])
  const auto a = grad(h), b = grad(-h), c = grad(h / 2), d = grad(-h / 2);
  double err = 0.0, scale = 0.0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const double fd = (4.0 * (c[j] - d[j]) / h - (a[j] - b[j]) / (2 * h)) / 3.0;
    err = std::max(err, std::abs(fd - r.hv_wrt_parameters[j]));
    scale = std::max(scale, std::abs(r.hv_wrt_parameters[j]));
  }
  return err / scale;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  costate::Environment env(argc, argv);
  const ode::Problem<ode::LotkaVolterra> pr{ode::LotkaVolterra{}, {1.0, 1.0},
                                            {1.5, 1.0, 3.0, 1.0}, {0.0, 10.0}};
  ode::LeastSquares ls;
  ls.n_states = 2;
  for (int k = 1; k <= 10; ++k) {
    ls.times.push_back(k);
    ls.data.push_back(1.0 + 0.5 * std::sin(1.3 * k));
    ls.data.push_back(0.8 + 0.4 * std::cos(0.9 * k));
  }
  const ode::HessianDirection v{{0.3, -0.7, 0.2, 0.5}, {}};
  std::printf("# H v vs central differences of CVODES gradients (rtol 1e-12): %.2e relative\n",
              fd_check(pr, ls, v));
  std::printf("| problem | method | rtol | gradient (ms) | HVP (ms) | HVP / gradient | 4x4 Hessian "
              "(ms) | Hessian / gradient | rhs evaluations HVP / gradient |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  const ode::CvodesAdjoint method{};
  for (const ode::Method m : {ode::Method::CvodesBdf, ode::Method::CvodesAdams}) {
    for (const double rtol : {1e-8, 1e-10}) {
      const ode::IntegratorOptions o{.method = m, .rtol = rtol, .atol = rtol * 1e-2};
      ode::GradientResult g;
      ode::HessianVectorResult r;
      const double tg = median_seconds([&] { g = ode::gradient(pr, ls, method, o); }, repeats);
      const double th =
          median_seconds([&] { r = ode::hessian_vector(pr, ls, v, method, o); }, repeats);
      const double tH =
          median_seconds([&] { (void)ode::hessian(pr, ls, method, o); }, repeats);
      std::printf("| LV | %s | %.0e | %.3f | %.3f | %.2f | %.3f | %.2f | %.2f |\n",
                  ode::to_string(m).c_str(), rtol, tg * 1e3, th * 1e3, th / tg, tH * 1e3,
                  tH / tg,
                  static_cast<double>(r.rhs_evaluations) /
                      static_cast<double>(std::max<std::int64_t>(g.rhs_evaluations, 1)));
    }
  }
  return 0;
}
