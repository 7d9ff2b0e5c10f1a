// `model.algebraic` in input files (issue 32): algebraic unknowns with their
// residuals become the algebraic states of the equation model, integrated
// by integrator.method = idas or the native bdf (checked against the closed
// form), echoed by
// to_yaml so that the echo loads to the same model, and refused with the
// file, line and key when malformed.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "costate/core/error.hpp"
#include "costate/io/file_gradient.hpp"
#include "costate/io/input.hpp"
#include "costate/io/resume.hpp"
#include "costate/ode/integrate.hpp"

namespace {

namespace fs = std::filesystem;
using costate::io::load_run_config;
using namespace costate;

class AlgebraicInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("costate_algebraic_input_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const fs::path p = dir_ / "input.yaml";
    std::ofstream(p) << text;
    return p.string();
  }
  std::string error_of(const std::string& text) {
    try {
      load_run_config(write(text));
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for input:\n" << text;
    return {};
  }
  fs::path dir_;
};

// x' = −k x, 0 = z − c x²: x = x0 e^{−kt}, z = c x², z(0) = 0 a guess.
const char* kDae = R"(model:
  states: [x]
  equations: {x: "-k*x"}
  algebraic: {z: "z - c*x^2"}
parameters: {k: 0.7, c: 2.0}
initial_state: {x: 1.5, z: 0.0}
time: {end: 2.0, outputs: [1.0, 2.0]}
integrator: {method: idas, rtol: 1.0e-10, atol: 1.0e-12}
)";

/// IDAS at rtol 1e-10 against the closed form: global error ~1e-9.
constexpr double kClosedFormRelTol = 1e-8;

ode::Solution run(const io::RunConfig& cfg) {
  return io::visit_model(cfg, [&](const auto& model) {
    ode::Problem<std::decay_t<decltype(model)>> pr{model, cfg.initial_state, cfg.parameters,
                                                   {cfg.t_start, cfg.t_end}, cfg.output_times};
    return ode::integrate(pr, cfg.integrator);
  });
}

TEST_F(AlgebraicInputTest, AlgebraicUnknownsBecomeAlgebraicStatesIntegratedByIdas) {
  const io::RunConfig cfg = load_run_config(write(kDae));
  EXPECT_EQ(cfg.state_names, (std::vector<std::string>{"x", "z"}));
  EXPECT_EQ(cfg.algebraic_states, (std::vector<std::size_t>{1}));
  const ode::Solution s = run(cfg);
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  for (std::size_t j = 0; j < s.n_outputs(); ++j) {
    const double x = 1.5 * std::exp(-0.7 * s.t[j]);
    EXPECT_LT(std::abs(s.state(j)[0] - x) / x, kClosedFormRelTol) << s.t[j];
    EXPECT_LT(std::abs(s.state(j)[1] - 2.0 * x * x) / (2.0 * x * x), kClosedFormRelTol) << s.t[j];
  }
  // z(0) = 0 was made consistent (4.5) and that is reported.
  EXPECT_NE(s.summary.message.find("state 1 by 4.5"), std::string::npos) << s.summary.message;
}

TEST_F(AlgebraicInputTest, TheEchoLoadsToTheSameModel) {
  const io::RunConfig a = load_run_config(write(kDae));
  const std::string echo = a.to_yaml();
  EXPECT_NE(echo.find("algebraic:"), std::string::npos) << echo;
  // The echo's model section (its first key) with the rest of the input.
  // (The whole echo does not load today: it writes integrator.dt: 0, which
  // loading refuses — not a DAE matter.)
  const std::string rest = kDae;
  const io::RunConfig b = load_run_config(
      write(echo.substr(0, echo.find("\nparameters:") + 1) + rest.substr(rest.find("parameters:"))));
  EXPECT_EQ(b.state_names, a.state_names);
  EXPECT_EQ(b.equations, a.equations);
  EXPECT_EQ(b.algebraic_states, a.algebraic_states);
}

TEST_F(AlgebraicInputTest, NativeBdfIntegratesTheDaeFromTheSameFile) {
  // integrator.method = bdf (M = diag(I, 0) in its Newton matrix; z(0)
  // made consistent by its own Newton solve) at rtol 1e-10: global error
  // ~10–100 rtol, and t = 1 is interpolated between steps (bdf's
  // polynomial, off the constraint by its interpolation error): 1e-6
  // against the closed form.
  constexpr double kNativeBdfRelTol = 1e-6;
  std::string text = kDae;
  text.replace(text.find("method: idas"), 12, "method: bdf");
  const io::RunConfig cfg = load_run_config(write(text));
  const ode::Solution s = run(cfg);
  ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
  for (std::size_t j = 0; j < s.n_outputs(); ++j) {
    const double x = 1.5 * std::exp(-0.7 * s.t[j]);
    EXPECT_LT(std::abs(s.state(j)[0] - x) / x, kNativeBdfRelTol) << s.t[j];
    EXPECT_LT(std::abs(s.state(j)[1] - 2.0 * x * x) / (2.0 * x * x), kNativeBdfRelTol) << s.t[j];
  }
}

TEST_F(AlgebraicInputTest, ExplicitIntegratorsRefuseTheDaeByName) {
  std::string text = kDae;
  text.replace(text.find("method: idas"), 12, "method: dopri5");
  const io::RunConfig cfg = load_run_config(write(text));
  try {
    run(cfg);
    FAIL() << "dopri5 integrated a DAE";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has algebraic states (a DAE"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("integrator.method = dopri5"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("bdf"), std::string::npos) << e.what();
  }
}

TEST_F(AlgebraicInputTest, CostateRunsRecordingLoopRefusesTheDaeWithExplicitMethods) {
  // `costate run`'s resumable loop (euler, rk4, dopri5) integrates y' = f
  // itself: a DAE there would be a silent wrong answer, so it is refused
  // by the table's DAE column first; bdf runs the file (ode::integrate).
  std::string text = kDae;
  text.replace(text.find("method: idas"), 12, "method: dopri5");
  try {
    io::integrate_run(load_run_config(write(text)), {}, "");
    FAIL() << "costate run integrated a DAE with dopri5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("costate run: the model has algebraic states"),
              std::string::npos)
        << e.what();
  }
  text.replace(text.find("method: dopri5"), 14, "method: bdf");
  const io::RunOutcome out = io::integrate_run(load_run_config(write(text)), {}, "");
  ASSERT_TRUE(out.solution.summary.success()) << out.solution.summary.message;
  const double x = 1.5 * std::exp(-0.7 * 2.0);
  EXPECT_LT(std::abs(out.solution.state(out.solution.n_outputs() - 1)[1] - 2.0 * x * x) /
                (2.0 * x * x),
            1e-6);  // as NativeBdfIntegratesTheDaeFromTheSameFile
}

TEST_F(AlgebraicInputTest, MalformedAlgebraicSectionsNameFileLineAndKey) {
  auto with = [](const std::string& algebraic) {
    std::string text = kDae;
    text.replace(text.find("algebraic: {z: \"z - c*x^2\"}"), 27, algebraic);
    return text;
  };
  // An unknown that is already a differential state.
  std::string m = error_of(with("algebraic: {x: \"x - 1\"}"));
  EXPECT_NE(m.find("input.yaml:4"), std::string::npos) << m;
  EXPECT_NE(m.find("model.algebraic.x"), std::string::npos) << m;
  EXPECT_NE(m.find("already a state"), std::string::npos) << m;
  // Not a map.
  m = error_of(with("algebraic: [z]"));
  EXPECT_NE(m.find("model.algebraic"), std::string::npos) << m;
  // A residual that does not compile names its unknown.
  m = error_of(with("algebraic: {z: \"z - q*x\"}"));
  EXPECT_NE(m.find("model.algebraic.z"), std::string::npos) << m;
  EXPECT_NE(m.find("q"), std::string::npos) << m;
  // A residual that is not an expression.
  m = error_of(with("algebraic: {z: [1, 2]}"));
  EXPECT_NE(m.find("model.algebraic.z"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a residual expression"), std::string::npos) << m;
}

// ------------------------------------------------------- all-algebraic models
// No differential state: `model.algebraic` alone (no `states`, or an empty
// list). z1² = a (1 + t) (the positive root: z1(0) = 1 is the guess),
// z1 z2 = b, so z1 = √(a (1 + t)), z2 = b / z1, and with
//     J = ∫₀ᵀ z2 dt + z1(T)² = 2 (b/√a) (√(1 + T) − 1) + a (1 + T),
//     ∂J/∂a = −b a^{−3/2} c + (1 + T),   ∂J/∂b = 2 c / √a   (c = √(1 + T) − 1),
//     ∂²J/∂a² = (3/2) b a^{−5/2} c,   ∂²J/∂a∂b = −a^{−3/2} c,   ∂²J/∂b² = 0.
const char* kAllAlgebraic = R"yaml(model:
  algebraic: {z1: "z1^2 - a*(1 + t)", z2: "z1*z2 - b"}
parameters: {a: 2.0, b: 0.5}
initial_state: {z1: 1.0, z2: 0.0}
time: {end: 3.0, outputs: [1.0, 3.0]}
integrator: {method: bdf, rtol: 1.0e-10, atol: 1.0e-12}
objective: {integral: "z2", terminal: "z1^2"}
sensitivity: {method: discrete_adjoint, wrt: [a, b]}
)yaml";
constexpr double kA = 2.0, kB = 0.5, kT = 3.0;
const double kC = std::sqrt(1.0 + kT) - 1.0;
const double kJ = 2.0 * kB / std::sqrt(kA) * kC + kA * (1.0 + kT);
const double kDJ[2] = {-kB * std::pow(kA, -1.5) * kC + (1.0 + kT), 2.0 * kC / std::sqrt(kA)};
const double kH[2][2] = {{1.5 * kB * std::pow(kA, -2.5) * kC, -std::pow(kA, -1.5) * kC},
                         {-std::pow(kA, -1.5) * kC, 0.0}};

/// The outputs are each a consistent solve (integrate lands on them):
/// Newton's roots, 1e-10 relative; IDAS' are its Newton iterate (its
/// algebraic unknowns out of the error test for such a model), ~rtol.
constexpr double kAllAlgebraicValueRelTol = 1e-10;
constexpr double kIdasAllAlgebraicValueRelTol = 1e-9;
/// J's integral is the only quadrature: the steps follow z (bdf's error
/// test measures the algebraic states when no state is differential), its
/// global error at rtol 1e-10 ~1e-9 relative; IDAS' (the quadrature in its
/// error test) likewise.
constexpr double kAllAlgebraicGradientRelTol = 1e-8;

/// kAllAlgebraic with integrator.method `method` (idas: sensitivity.method
/// idas_forward).
std::string with_method(std::string text, const std::string& method) {
  text.replace(text.find("method: bdf"), 11, "method: " + method);
  if (method == "idas") text.replace(text.find("method: discrete_adjoint"), 24, "method: idas_forward");
  return text;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

TEST_F(AlgebraicInputTest, AModelOfAlgebraicUnknownsAloneLoadsAndRunsToTheClosedForm) {
  std::string with_empty = kAllAlgebraic;
  with_empty.replace(with_empty.find("model:\n") + 7, 0, "  states: []\n  equations: {}\n");
  for (const std::string& text : {std::string(kAllAlgebraic), with_empty, with_method(kAllAlgebraic, "idas")}) {
    SCOPED_TRACE(text);
    const io::RunConfig cfg = load_run_config(write(text));
    EXPECT_EQ(cfg.state_names, (std::vector<std::string>{"z1", "z2"}));
    EXPECT_EQ(cfg.algebraic_states, (std::vector<std::size_t>{0, 1}));
    const bool idas = cfg.integrator.method == ode::Method::Idas;
    const ode::Solution s = run(cfg);
    ASSERT_TRUE(s.summary.success()) << s.summary.brief_report();
    ASSERT_EQ(s.n_outputs(), 2u);
    for (std::size_t j = 0; j < s.n_outputs(); ++j) {
      const double z1 = std::sqrt(kA * (1.0 + s.t[j]));
      const double tol = idas ? kIdasAllAlgebraicValueRelTol : kAllAlgebraicValueRelTol;
      EXPECT_LT(rel(s.state(j)[0], z1), tol) << s.t[j];
      EXPECT_LT(rel(s.state(j)[1], kB / z1), tol) << s.t[j];
    }
    // The echo keeps it all-algebraic and loads again.
    const std::string echo = cfg.to_yaml();
    const std::string rest = text;
    const io::RunConfig back = load_run_config(
        write(echo.substr(0, echo.find("\nparameters:") + 1) + rest.substr(rest.find("parameters:"))));
    EXPECT_EQ(back.state_names, cfg.state_names);
    EXPECT_EQ(back.algebraic_states, cfg.algebraic_states);
  }
}

TEST_F(AlgebraicInputTest, AnAllAlgebraicModelsGradientMatchesTheClosedFormByEveryMethod) {
  for (const auto& [integrator, method] :
       std::vector<std::pair<std::string, std::string>>{{"bdf", "discrete_adjoint"},
                                                        {"bdf", "forward"},
                                                        {"bdf", "continuous_adjoint"},
                                                        {"idas", "idas_forward"}}) {
    SCOPED_TRACE(integrator + " " + method);
    std::string text = with_method(kAllAlgebraic, integrator);
    const std::string given = integrator == "idas" ? "method: idas_forward" : "method: discrete_adjoint";
    text.replace(text.find(given), given.size(), "method: " + method);
    const io::RunConfig cfg = load_run_config(write(text));
    const io::FileSensitivity fs = io::file_sensitivity(cfg);
    EXPECT_LT(rel(fs.gradient.result.objective, kJ), kAllAlgebraicGradientRelTol);
    for (std::size_t j = 0; j < 2; ++j)
      EXPECT_LT(rel(fs.gradient.gradient_p[j], kDJ[j]), kAllAlgebraicGradientRelTol) << "p" << j;
    // z1(0), z2(0) are guesses the initial solve replaces.
    EXPECT_EQ(fs.gradient.result.wrt_initial_state[0], 0.0);
    EXPECT_EQ(fs.gradient.result.wrt_initial_state[1], 0.0);
  }
  // `costate gradcheck`: the Taylor test and the central differences pass.
  const io::FileGradientCheck check = io::file_gradient_check(load_run_config(write(kAllAlgebraic)));
  EXPECT_TRUE(check.passed) << "Taylor orders, max rel error " << check.fd.max_rel_error;
  EXPECT_LT(rel(check.gradient[0], kDJ[0]), kAllAlgebraicGradientRelTol);
}

TEST_F(AlgebraicInputTest, HessianVectorProductsOnAnAllAlgebraicModelMatchDifferencesOfGradients) {
  const io::RunConfig cfg = load_run_config(write(kAllAlgebraic));
  const io::FileSensitivity fs = io::file_sensitivity(cfg);
  const io::FileHessian H = io::file_hessian(cfg, fs.gradient.result, io::wrt_indices(cfg));
  ASSERT_EQ(H.matrix.size(), 4u);
  // Central differences of the gradient (each with its own steps) at
  // h = 1e-4 relative: truncation ~h² |∂³J| ~1e-8 and the gradients'
  // global error 1e-9 / h ~1e-5 of the entries (the largest ~0.2): 1e-5
  // absolute; the closed form to the forward-over-adjoint's own error.
  constexpr double kHessianDifferenceAbsTol = 1e-5;
  constexpr double kHessianClosedFormAbsTol = 1e-7;
  for (std::size_t j = 0; j < 2; ++j) {
    const double h = 1e-4 * cfg.parameters[j];
    std::vector<double> pp = cfg.parameters, pm = cfg.parameters;
    pp[j] += h;
    pm[j] -= h;
    const auto gp = io::file_gradient(cfg, pp, cfg.initial_state).gradient_p;
    const auto gm = io::file_gradient(cfg, pm, cfg.initial_state).gradient_p;
    for (std::size_t i = 0; i < 2; ++i) {
      const double fd = (gp[i] - gm[i]) / (2.0 * h);
      EXPECT_NEAR(H.matrix[i * 2 + j], fd, kHessianDifferenceAbsTol) << i << "," << j;
      EXPECT_NEAR(H.matrix[i * 2 + j], kH[i][j], kHessianClosedFormAbsTol) << i << "," << j;
    }
  }
}

TEST_F(AlgebraicInputTest, AllAlgebraicModelsRefuseWhatDoesNotApplyByName) {
  // Neither states nor algebraic: the missing key is named.
  std::string m = error_of("model:\n  equations: {x: \"-x\"}\nparameters: {k: 1.0}\n");
  EXPECT_NE(m.find("missing required key 'states'"), std::string::npos) << m;
  // IDAS' adjoint with an integral objective on such a model fails (its
  // backward error test), and the error says what to use instead.
  std::string text = with_method(kAllAlgebraic, "idas");
  text.replace(text.find("method: idas_forward"), 20, "method: idas_adjoint");
  try {
    io::file_sensitivity(load_run_config(write(text)));
    FAIL() << "idas_adjoint answered on an all-algebraic model with an integral objective";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no differential state: IDAS' adjoint fails"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("idas_forward"), std::string::npos) << e.what();
  }
  // With a terminal objective alone it runs, to the closed form.
  text.replace(text.find("integral: \"z2\", "), 16, "");
  const io::FileSensitivity fs = io::file_sensitivity(load_run_config(write(text)));
  EXPECT_LT(rel(fs.gradient.gradient_p[0], 1.0 + kT), kAllAlgebraicGradientRelTol);
  EXPECT_LT(std::abs(fs.gradient.gradient_p[1]), 1e-12);  // z1(T)² does not depend on b
}

}  // namespace
