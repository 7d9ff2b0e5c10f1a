// Equation models at compiled speed (issue 15, item 5): the same model as
// ode::EquationModel (expressions interpreted by expr) and as C++ (a
// template rhs the compiler inlines), timed in one run:
//   - ode::integrate, rk4 at a fixed step;
//   - ode::gradient, discrete adjoint (store all) of J = ½|y(t1)|²;
// for
//   - Lotka–Volterra, typed as equations ("a*x - b*x*y", "-c*y + d*x*y")
//     vs ode::LotkaVolterra: dt = 1e-4 on [0, 100] (10⁶ steps);
//   - Elowitz_Nature2000 (the repressilator: 8 states, 19 parameters, 16
//     reactions as intermediates), read from the PEtab benchmark collection
//     through costate::sbml vs ElowitzCxx below (the same equations written
//     out by hand from the imported model, one line per reaction):
//     dt = 1e-3 on [0, 100] minutes (10⁵ steps; GFP mRNA decays at
//     ln 2 / tau_mRNA_GFP ≈ 1700 per minute, so rk4 needs dt < 1.6e-3).
// The ratio equations / C++ is the figure of merit (target ≤ 1.5). The two
// forms run alternately (equations, C++, equations, C++, …) and each run is
// timed in process CPU seconds, so a change of the machine's load between
// them moves both; the table gives the medians of each form and the median
// of the ratios pair by pair (a pair ran back to back). The two
// models' right-hand sides, trajectories and gradients are checked against
// each other and the run fails if they disagree.
//
// Sample run:  build/bench/bench_equation_model [repeats (5)] [petab dir]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "costate/core/environment.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/models.hpp"
#include "costate/sbml/model.hpp"

namespace {

using namespace costate::ode;

/// Medians of `repeats` alternating runs of a and b (a, b, a, b, …) in CPU
/// seconds, and the median of the pairs' ratios a/b.
struct Alternated {
  double a = 0.0, b = 0.0, ratio = 0.0;
};
template <class A, class B>
Alternated alternate(A&& a, B&& b, int repeats) {
  std::vector<double> ta, tb, r;
  for (int k = 0; k < repeats; ++k) {
    double c0 = costate::bench::cpu_seconds();
    a();
    ta.push_back(costate::bench::cpu_seconds() - c0);
    c0 = costate::bench::cpu_seconds();
    b();
    tb.push_back(costate::bench::cpu_seconds() - c0);
    r.push_back(ta.back() / tb.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(ta), median(tb), median(r)};
}

struct HalfNorm {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T s = 0.0;
    for (const auto& v : y) s = T(s + 0.5 * v * v);
    return s;
  }
};

/// Elowitz_Nature2000 written in C++: y = (X_protein, Y_protein, Z_protein,
/// GFP, X_mRNA, Y_mRNA, Z_mRNA, GFP_mRNA), p in the importer's order (KM,
/// eff, eff_GFP, …, n_Hill = p[11], tau_mRNA = p[12], tau_mRNA_GFP = p[13],
/// tau_prot = p[14], tau_prot_GFP = p[15], tps_active = p[16], tps_repr =
/// p[17], cell = p[18]). Each w is one reaction's rate (cell × kinetic law),
/// in the importer's operation order so that both evaluate the same
/// floating-point operations.
struct ElowitzCxx {
  template <class T>
  void rhs(double, std::span<const T> y, std::span<const T> p, std::span<T> dydt) const {
    using std::pow;
    const double ln2 = 0.69314718055994529;
    const T w0 = T(p[18] * ((y[4] * ln2) / p[12]));  // mRNA decay
    const T w1 = T(p[18] * ((y[5] * ln2) / p[12]));
    const T w2 = T(p[18] * ((y[6] * ln2) / p[12]));
    const T w3 = T(p[18] * ((y[7] * ln2) / p[13]));
    const T w4 = T(p[18] * ((y[4] * p[1]) / p[12]));  // translation
    const T w5 = T(p[18] * ((y[5] * p[1]) / p[12]));
    const T w6 = T(p[18] * ((y[6] * p[1]) / p[12]));
    const T w7 = T(p[18] * ((y[7] * p[2]) / p[13]));
    const T w8 = T(p[18] * ((y[0] * ln2) / p[14]));  // protein decay
    const T w9 = T(p[18] * ((y[1] * ln2) / p[14]));
    const T w10 = T(p[18] * ((y[2] * ln2) / p[14]));
    const T w11 = T(p[18] * ((y[3] * ln2) / p[15]));
    // Repressed transcription: 60 tps_repr − KMⁿ (60 tps_repr − 60 tps_active) / (KMⁿ + Rⁿ).
    auto hill = [&](const T& r) {
      return T(p[18] * ((60.0 * p[17]) - ((pow(p[0], p[11]) * ((60.0 * p[17]) - (60.0 * p[16]))) /
                                          (pow(p[0], p[11]) + pow(r, p[11])))));
    };
    const T w12 = hill(y[2]), w13 = hill(y[0]), w14 = hill(y[1]), w15 = hill(y[0]);
    dydt[0] = T((w4 + (-w8)) / p[18]);
    dydt[1] = T((w5 + (-w9)) / p[18]);
    dydt[2] = T((w6 + (-w10)) / p[18]);
    dydt[3] = T(((w7 + (-w11)) + w15) / p[18]);
    dydt[4] = T(((-w0) + w12) / p[18]);
    dydt[5] = T(((-w1) + w13) / p[18]);
    dydt[6] = T(((-w2) + w14) / p[18]);
    dydt[7] = T((-w3) / p[18]);
  }
};

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0.0, diff = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(a[i]));
    diff = std::max(diff, std::abs(a[i] - b[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

// The two forms evaluate the same operations; only the order in which the
// AD core and the interpreter accumulate derivative terms may differ, so
// trajectories agree to round-off and gradients (10⁵–10⁶ steps of
// accumulated round-off in the adjoint) to kAgreement.
constexpr double kTrajectoryAgreement = 1e-10;
constexpr double kAgreement = 1e-8;

template <class E, class C>
bool compare(const char* name, const Problem<E>& eq, const Problem<C>& cxx,
             const IntegratorOptions& opt, int repeats) {
  bool ok = true;
  {
    std::vector<double> fe(eq.y0.size()), fc(eq.y0.size());
    eq.model.template rhs<double>(eq.t0(), eq.y0, eq.p, fe);
    cxx.model.template rhs<double>(cxx.t0(), cxx.y0, cxx.p, fc);
    const double d = max_rel_diff(fc, fe);
    if (!(d <= kTrajectoryAgreement)) {
      std::fprintf(stderr, "MISMATCH %s: right-hand sides differ by %.3e\n", name, d);
      ok = false;
    }
  }
  Solution se, sc;
  const Alternated ti = alternate([&] { se = integrate(eq, opt); }, [&] { sc = integrate(cxx, opt); }, repeats);
  const double dy = max_rel_diff(sc.y, se.y);
  if (!se.summary.success() || !sc.summary.success()) {
    std::fprintf(stderr, "FAILED %s: %s / %s\n", name, se.summary.brief_report().c_str(),
                 sc.summary.brief_report().c_str());
    ok = false;
  }
  if (!(dy <= kTrajectoryAgreement)) {
    std::fprintf(stderr, "MISMATCH %s: trajectories differ by %.3e\n", name, dy);
    ok = false;
  }
  GradientResult ge, gc;
  const Alternated tg = alternate([&] { ge = gradient(eq, HalfNorm{}, DiscreteAdjoint{}, opt); },
                                   [&] { gc = gradient(cxx, HalfNorm{}, DiscreteAdjoint{}, opt); }, repeats);
  const double dg = std::max(max_rel_diff(gc.wrt_parameters, ge.wrt_parameters),
                             max_rel_diff(gc.wrt_initial_state, ge.wrt_initial_state));
  if (!(dg <= kAgreement)) {
    std::fprintf(stderr, "MISMATCH %s: gradients differ by %.3e\n", name, dg);
    ok = false;
  }
  const auto steps = static_cast<long>(std::llround((eq.t1() - eq.t0()) / opt.dt));
  std::printf("| %s, rk4 %ld steps, integrate | %.4f | %.4f | **%.2f** |\n", name, steps, ti.a,
              ti.b, ti.ratio);
  std::printf("| %s, discrete adjoint gradient | %.4f | %.4f | **%.2f** |\n", name, tg.a, tg.b,
              tg.ratio);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  costate::Environment env(argc, argv);
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::filesystem::path petab = argc > 2 ? argv[2] : COSTATE_BENCH_PETAB_DIR;
  std::printf("load average before: %s\n", load_average().c_str());
  std::printf("| model, workload | equations (CPU s) | C++ (CPU s) | equations / C++ (median of pairs) |\n");
  std::printf("|---|---:|---:|---:|\n");
  bool ok = true;
  {
    const EquationModel lv({"x", "y"}, {"a", "b", "c", "d"}, {"a*x - b*x*y", "d*x*y - c*y"});
    const Problem<EquationModel> eq{lv, {1.0, 1.0}, {1.5, 1.0, 3.0, 1.0}, {0.0, 100.0}};
    const Problem<LotkaVolterra> cxx{LotkaVolterra{}, eq.y0, eq.p, eq.tspan};
    ok = compare("Lotka-Volterra", eq, cxx, {.method = Method::RK4, .dt = 1e-4}, repeats) && ok;
  }
  const auto file = petab / "benchmark/Elowitz_Nature2000/model_Elowitz_Nature2000.xml";
  if (std::filesystem::exists(file)) {
    const costate::sbml::Model m = costate::sbml::read_file(file.string());
    const Problem<EquationModel> eq{m.equations, m.initial_values(m.parameters), m.parameters,
                                    {0.0, 100.0}};
    const Problem<ElowitzCxx> cxx{ElowitzCxx{}, eq.y0, eq.p, eq.tspan};
    ok = compare("Elowitz (SBML)", eq, cxx, {.method = Method::RK4, .dt = 1e-3}, repeats) && ok;
  } else {
    std::printf("(Elowitz_Nature2000 skipped: %s not found; pass the PEtab folder as argument 2)\n",
                file.string().c_str());
  }
  std::printf("\nload average after: %s\n", load_average().c_str());
  return ok ? 0 : 1;
}
