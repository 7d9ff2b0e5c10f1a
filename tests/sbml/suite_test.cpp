// The SBML Test Suite's semantic cases as a conformance run: every case and
// every level/version file of it, read and simulated by the library in this
// one process, compared by the suite's own criterion
//     |expected − simulated| ≤ absolute + relative·|expected|
// at every output time and for every variable the case's settings name
// (species as amount or concentration as the settings ask).
//
// Each file ends as pass, refused (costate::Error: the element and the
// feature, by name) or fail (wrong numbers, or a solver failure); a case
// passes when all its files pass, fails when any file fails, else is refused
// (first refusal's reason). Writes the table by tag, the refusal reasons
// with their counts and every failure to the report file and to stdout.
//
// Usage: sbml_suite_test <suite folder with cases/> <report file> [case]
// (with a case id, e.g. 00205, that case alone, its gradients printed)
// Exit: 0 when no file fails, 1 when one does, 77 (ctest: skipped) when the
// folder is absent.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/delay_adjoint.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/history.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/sbml/model.hpp"

namespace {

namespace fs = std::filesystem;
namespace ode = costate::ode;

// Integration tolerances far below the suite's (absolute ~1e-7 … 1e-10 with
// relative 1e-4 … 1e-6): what a careful user sets, so that a failure means
// wrong equations, not a loose integrator.
constexpr double kRtol = 1e-10;
constexpr double kAtol = 1e-14;

// The gradient check: forward sensitivities and the discrete adjoint of the
// same replayed bdf solution (they agree to round-off), and central
// differences of a CVODES solution far tighter than the step's truncation.
constexpr double kGradientRtol = 1e-8;
constexpr double kGradientAtol = 1e-12;
constexpr double kDifferenceRtol = 1e-12;
constexpr double kDifferenceAtol = 1e-16;
// Central-difference step relative to max(|p_j|, 1e-3): O(h²) truncation
// ≈ 1e-8 plus O(tol/h) ≈ 1e-8 round-off of the solution.
constexpr double kDifferenceStep = 1e-4;
// Forward sensitivities and the discrete adjoint differentiate the same
// discrete solution: beyond this they disagree by a defect, and the test
// fails. (Central differences are reported, not asserted: a state inside
// floor/ceil makes the exact solution's derivative differ from the discrete
// one's — the events issue's switching functions.)
constexpr double kForwardVsAdjointTol = 1e-6;
// The same two as logarithmic sensitivities d ln J / d ln p_j (|Δg_j|·|p_j|/|J|):
// measured 3.3e-13 at worst; beyond the 1e-10 (AMICI's event
// adjoints reach 1e-13 … 3e-11) the test fails. (Relative to ‖g‖ the worst
// is 2.1e-9, on gradients that are ~1e-6 of J/p: round-off of an
// insensitive objective, not a disagreement — docs/sbml.md.)
constexpr double kLogarithmicTol = 1e-10;
// Through delay(): forward sensitivities integrate (y, s) under one error
// control and interpolate their dense output at the history's samples; the
// discrete adjoint's steps land on them (y alone under error control). Two
// discretizations of the same method of steps at rtol 1e-8, so they differ
// by the integrators' errors, not round-off: beyond this the test fails.
constexpr double kDelayAdjointVsForwardTol = 1e-5;
// How many parameters get central differences per case (two simulations each).
constexpr std::size_t kDifferenceParameters = 5;

enum class Outcome { Pass, Refused, Fail };

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string cell;
  while (std::getline(in, cell, sep))
    if (!trim(cell).empty()) out.push_back(trim(cell));
  return out;
}

/// "key: value" lines (settings.txt, and the tag lines of model.m).
std::map<std::string, std::string> key_values(const fs::path& file) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    out.emplace(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  return out;
}

double number(const std::string& s) {
  const std::string t = trim(s);
  if (t == "NaN" || t == "nan") return std::nan("");
  if (t == "INF" || t == "inf" || t == "Infinity") return HUGE_VAL;
  if (t == "-INF" || t == "-inf" || t == "-Infinity") return -HUGE_VAL;
  return std::stod(t);
}

struct Case {
  std::string name;
  double start = 0, duration = 0, absolute = 0, relative = 0;
  int steps = 0;
  std::vector<std::string> variables;
  std::set<std::string> amount, concentration;
  std::vector<std::string> tags;
  std::string test_type;
  std::vector<std::string> columns;          ///< results.csv header (time first)
  std::vector<std::vector<double>> expected;  ///< rows of results.csv
};

Case read_case(const fs::path& dir) {
  Case c;
  c.name = dir.filename().string();
  const auto model = key_values(dir / (c.name + "-model.m"));
  for (const char* key : {"componentTags", "testTags"})
    if (model.count(key))
      for (const auto& t : split(model.at(key), ',')) c.tags.push_back(t);
  c.test_type = model.count("testType") ? model.at("testType") : "";
  if (c.test_type != "TimeCourse") return c;  // fbc: no time course to read
  const auto settings = key_values(dir / (c.name + "-settings.txt"));
  c.start = number(settings.at("start"));
  c.duration = number(settings.at("duration"));
  c.steps = std::stoi(settings.at("steps"));
  c.absolute = number(settings.at("absolute"));
  c.relative = number(settings.at("relative"));
  c.variables = split(settings.at("variables"), ',');
  for (const auto& v : split(settings.count("amount") ? settings.at("amount") : "", ','))
    c.amount.insert(v);
  for (const auto& v :
       split(settings.count("concentration") ? settings.at("concentration") : "", ','))
    c.concentration.insert(v);
  std::ifstream in(dir / (c.name + "-results.csv"));
  std::string line;
  if (std::getline(in, line)) c.columns = split(line, ',');
  while (std::getline(in, line)) {
    if (trim(line).empty()) continue;
    std::vector<double> row;
    for (const auto& cell : split(line, ',')) row.push_back(number(cell));
    c.expected.push_back(std::move(row));
  }
  return c;
}

/// J = ½ Σ y_i(t1)²: an objective on the final state.
struct FinalSquares {
  template <class T>
  T terminal(std::span<const T> y, std::span<const T>) const {
    T sum = 0.0;
    for (const T& v : y) sum = T(sum + 0.5 * v * v);
    return sum;
  }
};

/// The simulations' integrator: CVODES BDF; for a model with events
/// (which CVODES does not cross yet) costate's bdf; for a DAE (algebraic
/// rules, fast reactions) IDAS, or bdf when it has events too — all at the
/// same tolerances.
ode::Method simulation_method(const costate::sbml::Model& m) {
  const bool dae = !m.equations.algebraic_states().empty();
  if (m.equations.n_events() > 0) return ode::Method::Bdf;
  return dae ? ode::Method::Idas : ode::Method::CvodesBdf;
}

/// Worst disagreement of the gradient of FinalSquares with respect to the
/// parameters (the initial state held) between methods, each as
/// max_j |a_j − b_j| / max(‖b‖∞, 1e-6·|J|): a gradient that is zero in
/// exact arithmetic (a compartment size that cancels) is compared at the
/// objective's scale, not at its own round-off.
struct GradientCheck {
  double forward_vs_adjoint = 0.0, adjoint_vs_central = 0.0;
  /// max_j |forward_j − adjoint_j| · |p_j| / |J|: the disagreement of the
  /// logarithmic sensitivities d ln J / d ln p_j — independent of the
  /// parameters' units and of the gradient's size relative to J (for
  /// p_j = 0: relative to ‖g‖∞). Round-off is a few ε × the steps' count.
  double forward_vs_adjoint_logarithmic = 0.0;
};

/// Set by a third argument (one case): the gradients' components printed.
bool g_verbose = false;

GradientCheck check_gradient(const costate::sbml::Model& m, double t0, double t1) {
  const std::vector<double> p = m.parameters;
  const std::vector<double> y0 = m.initial_values(p, t0);
  ode::Problem<ode::EquationModel> problem{m.equations, y0, p, {t0, t1}, {}};
  const ode::IntegratorOptions native{.method = ode::Method::Bdf, .rtol = kGradientRtol,
                                      .atol = kGradientAtol};
  const ode::GradientResult adjoint =
      ode::gradient(problem, FinalSquares{}, ode::DiscreteAdjoint{}, native);
  const ode::GradientResult forward =
      ode::gradient(problem, FinalSquares{}, ode::Forward{}, native, adjoint.steps);
  const double floor = std::max(1e-6 * std::abs(adjoint.objective), 1e-300);
  auto relative = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double norm = floor, diff = 0.0;
    for (std::size_t j = 0; j < b.size(); ++j) {
      norm = std::max(norm, std::abs(b[j]));
      diff = std::max(diff, std::abs(a[j] - b[j]));
    }
    return diff / norm;
  };
  GradientCheck out;
  out.forward_vs_adjoint = relative(forward.wrt_parameters, adjoint.wrt_parameters);
  double g_norm = 1e-300;
  for (double g : adjoint.wrt_parameters) g_norm = std::max(g_norm, std::abs(g));
  for (std::size_t j = 0; j < p.size(); ++j) {
    const double d = std::abs(forward.wrt_parameters[j] - adjoint.wrt_parameters[j]);
    out.forward_vs_adjoint_logarithmic =
        std::max(out.forward_vs_adjoint_logarithmic,
                 p[j] != 0.0 && adjoint.objective != 0.0
                     ? d * std::abs(p[j]) / std::abs(adjoint.objective)
                     : d / g_norm);
  }
  if (g_verbose) {
    std::cout << std::setprecision(17) << "J = " << adjoint.objective << ", bdf steps "
              << adjoint.steps.steps() << "\n";
    for (std::size_t j = 0; j < p.size(); ++j)
      std::cout << "  " << m.parameter_names[j] << " = " << p[j] << ": adjoint "
                << adjoint.wrt_parameters[j] << ", forward " << forward.wrt_parameters[j] << "\n";
  }
  // A DAE's differences by bdf: its consistent initialisation is Newton to
  // round-off, where IDACalcIC's line search can stall at atol 1e-16.
  const bool dae = !m.equations.algebraic_states().empty();
  const ode::IntegratorOptions tight{.method = dae ? ode::Method::Bdf : simulation_method(m),
                                     .rtol = kDifferenceRtol, .atol = kDifferenceAtol};
  auto objective = [&](const std::vector<double>& q) {
    ode::Problem<ode::EquationModel> pq{m.equations, y0, q, {t0, t1}, {t1}};
    const ode::Solution sol = ode::integrate(pq, tight);
    COSTATE_CHECK(sol.summary.success(), sol.summary.message);
    return FinalSquares{}.terminal<double>(sol.state(sol.n_outputs() - 1), q);
  };
  std::vector<double> central, from_adjoint;
  for (std::size_t j = 0; j < std::min(p.size(), kDifferenceParameters); ++j) {
    const double h = kDifferenceStep * std::max(std::abs(p[j]), 1e-3);
    std::vector<double> up = p, down = p;
    up[j] += h;
    down[j] -= h;
    central.push_back((objective(up) - objective(down)) / (2.0 * h));
    from_adjoint.push_back(adjoint.wrt_parameters[j]);
  }
  out.adjoint_vs_central = relative(from_adjoint, central);
  if (g_verbose)
    for (std::size_t j = 0; j < central.size(); ++j)
      std::cout << "  " << m.parameter_names[j] << ": central " << central[j] << "\n";
  return out;
}

/// What check_delay_gradient measured (each max_j |a_j − b_j| / max(‖b‖∞,
/// floor) over the parameters compared).
struct DelayGradientCheck {
  double forward_vs_central = 0.0;
  double adjoint_vs_forward = 0.0;
  double adjoint_vs_central = 0.0;
};

/// A model with delay(): forward sensitivities through the history
/// (ode::forward_sensitivities_with_delays) and the discrete adjoint through
/// it (ode::adjoint_with_delays), both bdf at the gradient tolerances,
/// against each other and against central differences of the method of
/// steps at the difference tolerances — the initial state and the initial
/// history held at p, as in check_gradient — over the first
/// kDifferenceParameters parameters that are not delay slots.
DelayGradientCheck check_delay_gradient(const costate::sbml::Model& m, double t0, double t1) {
  const std::vector<double> p = m.parameters;
  const std::vector<double> y0 = m.initial_values(p, t0);
  const ode::History::Initial history = m.initial_history(p);
  std::vector<bool> slot(p.size(), false);
  for (const ode::DelayedInput& d : m.delays) slot[d.parameter] = true;
  std::vector<std::size_t> wrt;
  for (std::size_t j = 0; j < p.size() && wrt.size() < kDifferenceParameters; ++j)
    if (!slot[j]) wrt.push_back(j);
  if (wrt.empty()) return {};
  std::vector<ode::SensitivityDirection> directions;
  for (std::size_t j : wrt) {
    directions.push_back({std::vector<double>(p.size(), 0.0), {}});
    directions.back().parameters[j] = 1.0;
  }
  const std::vector<double> end{t1};
  const ode::IntegratorOptions native{.method = ode::Method::Bdf, .rtol = kGradientRtol,
                                      .atol = kGradientAtol};
  const ode::DelayedSensitivities fs = ode::forward_sensitivities_with_delays(
      m.equations, y0, p, t0, t1, end, m.delays, native, directions, history);
  COSTATE_CHECK(fs.solution.summary.success() && fs.solution.n_outputs() == 1,
                fs.solution.summary.message);
  const std::span<const double> y1 = fs.solution.state(0);
  std::vector<double> forward(wrt.size(), 0.0);
  for (std::size_t d = 0; d < wrt.size(); ++d)
    for (std::size_t i = 0; i < y1.size(); ++i) forward[d] += y1[i] * fs.sensitivity(0, i, d);
  const ode::IntegratorOptions tight{.method = simulation_method(m), .rtol = kDifferenceRtol,
                                     .atol = kDifferenceAtol};
  auto objective = [&](const std::vector<double>& q) {
    const ode::Solution sol =
        ode::integrate_with_delays(m.equations, y0, q, t0, t1, end, m.delays, tight, history);
    COSTATE_CHECK(sol.summary.success(), sol.summary.message);
    return FinalSquares{}.terminal<double>(sol.state(0), q);
  };
  // The discrete adjoint through the history, J = ½ Σ y(t1)².
  const ode::DelayedObjective final_squares = [](const ode::Solution& sol, std::span<double> y_bar,
                                                 std::span<double>) {
    const std::span<const double> y = sol.state(sol.n_outputs() - 1);
    for (std::size_t i = 0; i < y.size(); ++i) y_bar[(sol.n_outputs() - 1) * y.size() + i] += y[i];
    return FinalSquares{}.terminal<double>(y, {});
  };
  const ode::DelayedGradient adjoint = ode::adjoint_with_delays(
      m.equations, y0, p, t0, t1, end, m.delays, native, ode::StoreAll{}, final_squares, history);
  double norm = 1e-6 * std::abs(objective(p)) + 1e-300, diff = 0.0, forward_norm = 0.0,
         adjoint_diff = 0.0, adjoint_forward = 0.0;
  for (std::size_t d = 0; d < wrt.size(); ++d) {
    const std::size_t j = wrt[d];
    const double h = kDifferenceStep * std::max(std::abs(p[j]), 1e-3);
    std::vector<double> up = p, down = p;
    up[j] += h;
    down[j] -= h;
    const double central = (objective(up) - objective(down)) / (2.0 * h);
    norm = std::max(norm, std::abs(central));
    forward_norm = std::max(forward_norm, std::abs(forward[d]));
    diff = std::max(diff, std::abs(forward[d] - central));
    adjoint_diff = std::max(adjoint_diff, std::abs(adjoint.wrt_parameters[j] - central));
    adjoint_forward = std::max(adjoint_forward, std::abs(adjoint.wrt_parameters[j] - forward[d]));
    if (g_verbose)
      std::cout << "  " << m.parameter_names[j] << ": forward " << forward[d] << ", adjoint "
                << adjoint.wrt_parameters[j] << ", central " << central << "\n";
  }
  return {diff / norm, adjoint_forward / std::max(forward_norm, 1e-6 * std::abs(objective(p)) + 1e-300),
          adjoint_diff / norm};
}

struct FileResult {
  Outcome outcome = Outcome::Pass;
  std::string reason;  ///< refusal class, or what failed
  std::string detail;  ///< the full message
};

/// A refusal's class for the table: the message without the file, with
/// ids, formulas and numbers elided, so that equal features count together.
std::string refusal_class(const std::string& message, const std::string& file) {
  std::string m = message.substr(0, message.find('\n'));
  if (m.rfind(file + ": ", 0) == 0) m = m.substr(file.size() + 2);
  // "file:line: …" (the line of the element refused)
  static const std::regex at_line("^[0-9]+: ");
  if (m.rfind(file + ":", 0) == 0) m = std::regex_replace(m.substr(file.size() + 1), at_line, "");
  for (std::size_t at; (at = m.find("'s ")) != std::string::npos;) m.replace(at, 1, "\u2019");
  static const std::regex quoted("'[^']*'"), digits("[0-9]+"), formula(" in '.*$");
  m = std::regex_replace(m, formula, "");
  m = std::regex_replace(m, quoted, "'…'");
  m = std::regex_replace(m, digits, "N");
  return m;
}

/// Files that do not state what their case tests (checked by hand): the
/// result is set aside with this reason instead of being compared.
const std::map<std::string, std::string> kSuiteDefects = {
    {"01399-sbml-l2v5.xml",
     "suite defect: the file lacks the fast=\"true\" its case tests (its l2v4 twin has it)"},
};

FileResult run_file(const Case& c, const fs::path& xml) {
  FileResult r;
  if (const auto d = kSuiteDefects.find(xml.filename().string()); d != kSuiteDefects.end()) {
    r.outcome = Outcome::Refused;
    r.reason = r.detail = d->second;
    return r;
  }
  costate::sbml::Model m;
  try {
    m = costate::sbml::read_file(xml.string());
  } catch (const std::exception& e) {
    r.outcome = Outcome::Refused;
    r.detail = e.what();
    r.reason = refusal_class(e.what(), xml.string());
    // A refusal names the file, the element's line (libsbml knows it for
    // every element read from a file) and the element by its id (or number).
    const std::string head = r.detail.substr(0, r.detail.find('\n'));
    static const std::regex file_line("^[0-9]+: ");
    const bool named_line = head.rfind(xml.string() + ":", 0) == 0 &&
                            std::regex_search(head.substr(xml.string().size() + 1), file_line);
    const bool read_error = head.rfind(xml.string() + ": libsbml cannot read", 0) == 0;
    if (!(named_line || read_error) || head.find('\'') == std::string::npos) {
      r.outcome = Outcome::Fail;
      r.reason = "a refusal that does not name the file, the line and the element";
    }
    return r;
  }
  std::vector<double> times;
  for (int k = 0; k <= c.steps; ++k) times.push_back(c.start + k * c.duration / c.steps);
  const std::vector<double>& p = m.parameters;
  const std::size_t ny = m.state_names.size();
  std::vector<double> y;  // row-major, one row per output time
  // A model with delay(): its slots read the trajectory's history (for a
  // model without states, one node at the start time).
  ode::History history(ny);
  try {
    const std::vector<double> y0 = m.initial_values(p, c.start);
    if (ny == 0) {
      y.clear();
      history.append(c.start, {}, {});
    } else if (!m.delays.empty()) {
      const ode::IntegratorOptions opt{.method = simulation_method(m), .rtol = kRtol,
                                       .atol = kAtol};
      ode::Solution sol = ode::integrate_with_delays(
          m.equations, y0, p, c.start, c.start + c.duration, times, m.delays, opt,
          m.initial_history(p));
      if (!sol.summary.success() || sol.t.size() != times.size()) {
        r.outcome = Outcome::Fail;
        r.reason = "solver failed";
        r.detail = sol.summary.message;
        return r;
      }
      y = sol.y;
      history = *sol.history;
    } else {
      ode::Problem<ode::EquationModel> problem{m.equations, y0, p,
                                               {c.start, c.start + c.duration}, times};
      const ode::IntegratorOptions opt{.method = simulation_method(m), .rtol = kRtol,
                                       .atol = kAtol};
      const ode::Solution sol = ode::integrate(problem, opt);
      if (!sol.summary.success() || sol.t.size() != times.size()) {
        r.outcome = Outcome::Fail;
        r.reason = "solver failed";
        r.detail = sol.summary.message;
        return r;
      }
      y = sol.y;
    }
  } catch (const costate::Error& e) {
    // The event driver refuses an ill-posed event model by name while
    // integrating it (a cascade that does not end, event times that
    // accumulate), and the DAE layer a DAE that is not of index 1 at its
    // initial point or whose initial values cannot be made consistent
    // (SBML: algebraic rules, fast reactions): a refusal, counted with its
    // reason.
    const bool dae = !m.equations.algebraic_states().empty();
    // A delay whose lag the method of steps cannot take is refused by name
    // while integrating too.
    r.outcome = m.equations.n_events() > 0 || dae || !m.delays.empty() ? Outcome::Refused
                                                                        : Outcome::Fail;
    r.reason = r.outcome == Outcome::Refused ? "while simulating: " + refusal_class(e.what(), "")
                                             : "error while simulating";
    r.detail = e.what();
    return r;
  } catch (const std::exception& e) {
    r.outcome = Outcome::Fail;
    r.reason = "error while simulating";
    r.detail = e.what();
    return r;
  }
  // Every variable's column in the symbols, and its unit conversion.
  const std::vector<std::string> names = m.symbol_names();
  auto index = [&](const std::string& id) -> long {
    const auto it = std::find(names.begin(), names.end(), id);
    return it == names.end() ? -1 : it - names.begin();
  };
  struct Column {
    long csv = -1, symbol = -1, size = -1;  ///< size: compartment to × (amount) or ÷ (conc.)
    bool multiply = false;
  };
  std::vector<Column> columns;
  for (const std::string& v : c.variables) {
    Column col;
    // Column 0 is time, whatever its header says (case 01821 has a
    // parameter "Time" too).
    col.csv = c.columns.empty() ? 0
                                : std::find(c.columns.begin() + 1, c.columns.end(), v) -
                                      c.columns.begin();
    if (col.csv >= static_cast<long>(c.columns.size())) {
      r.outcome = Outcome::Fail;
      r.reason = "the suite's results lack a column";
      r.detail = "no column '" + v + "' in the results";
      return r;
    }
    col.symbol = index(v);
    if (col.symbol < 0) {
      r.outcome = Outcome::Refused;
      r.reason = "a variable the case compares is not an output symbol";
      r.detail = "'" + v + "' is not among the model's symbols";
      return r;
    }
    for (const auto& s : m.species)
      if (s.id == v) {
        if (c.amount.count(v) && !s.amount) col.multiply = true;
        else if (c.concentration.count(v) && s.amount) col.multiply = false;
        else break;
        col.size = index(s.compartment);
      }
    columns.push_back(col);
  }
  std::vector<double> yk(ny);
  for (std::size_t k = 0; k < times.size() && k < c.expected.size(); ++k) {
    std::copy_n(y.begin() + static_cast<long>(k * ny), ny, yk.begin());
    const std::vector<double> values =
        m.delays.empty() ? m.symbol_values(times[k], yk, p) : m.symbol_values(times[k], yk, p, history);
    for (std::size_t j = 0; j < columns.size(); ++j) {
      const Column& col = columns[j];
      double v = values[static_cast<std::size_t>(col.symbol)];
      if (col.size >= 0) {
        const double size = values[static_cast<std::size_t>(col.size)];
        v = col.multiply ? v * size : v / size;
      }
      const double e = c.expected[k][static_cast<std::size_t>(col.csv)];
      const bool ok = std::isnan(e)   ? std::isnan(v)
                      : std::isinf(e) ? v == e
                                      : std::abs(e - v) <= c.absolute + c.relative * std::abs(e);
      if (!ok) {
        std::ostringstream o;
        o << std::setprecision(10) << c.variables[j] << " at t = " << times[k] << ": expected "
          << e << ", got " << v;
        r.outcome = Outcome::Fail;
        r.reason = "wrong numbers";
        r.detail = o.str();
        return r;
      }
    }
  }
  return r;
}

struct Tally {
  int pass = 0, refused = 0, fail = 0;
  void add(Outcome o) { (o == Outcome::Pass ? pass : o == Outcome::Refused ? refused : fail)++; }
  int total() const { return pass + refused + fail; }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: sbml_suite_test <sbml-test-suite folder> <report file> [case]\n"
                 "  (with a case, e.g. 00205: that case alone, its gradients' components "
                 "printed)\n";
    return 2;
  }
  costate::Environment env(argc, argv);
  const fs::path suite = argv[1];
  if (!fs::is_directory(suite / "cases")) {
    std::cout << "SKIPPED: the SBML Test Suite is not at " << (suite / "cases").string()
              << " (configure with -DCOSTATE_SBML_SUITE_DIR=<folder with cases/>)\n";
    return 77;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(suite / "cases"))
    if (e.is_directory() && (argc == 3 || e.path().filename() == argv[3])) dirs.push_back(e.path());
  g_verbose = argc == 4;
  std::sort(dirs.begin(), dirs.end());

  Tally cases, files;
  std::map<std::string, Tally> by_tag;
  std::map<std::string, int> reasons;         // refusal class → cases
  std::map<std::string, int> file_reasons;    // refusal class → files
  std::map<std::string, std::string> example;  // refusal class → one full message
  std::vector<std::string> failures;
  // Gradients of the passing cases (their newest file).
  int gradients_checked = 0;
  std::vector<std::pair<double, std::string>> worst_fa, worst_ac;  // (disagreement, case)
  std::vector<std::pair<double, std::string>> worst_fa_events, worst_fa_logarithmic;
  // DAEs (algebraic rules, fast reactions): forward vs adjoint, adjoint vs central.
  std::vector<std::pair<double, std::string>> worst_fa_dae, worst_ac_dae;
  std::vector<std::string> gradient_errors;
  // Event models whose gradient a path refuses by name (events.hpp: delayed
  // events, …): not compared, counted by reason.
  std::map<std::string, int> gradients_not_compared;
  std::map<std::string, std::string> not_compared_example;
  int event_gradients_checked = 0;
  // Models with delay(): forward sensitivities vs central differences.
  std::vector<std::pair<double, std::string>> worst_delay, worst_delay_adjoint,
      worst_delay_adjoint_central;
  int delay_in_rhs = 0;  // of them, whose right-hand side reads a delay
  for (const fs::path& dir : dirs) {
    Case c;
    try {
      c = read_case(dir);
    } catch (const std::exception& e) {
      failures.push_back(dir.filename().string() + ": the case's files cannot be read (" +
                         e.what() + ")");
      cases.fail++;
      continue;
    }
    std::vector<fs::path> xmls;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (n.find("-sbml-l") != std::string::npos && n.ends_with(".xml")) xmls.push_back(e.path());
    }
    std::sort(xmls.begin(), xmls.end());
    Outcome outcome = Outcome::Pass;
    std::string reason;
    if (c.test_type != "TimeCourse") {
      outcome = Outcome::Refused;
      reason = "testType " + c.test_type + " (fbc flux balance, not a time course)";
      files.refused += static_cast<int>(xmls.size());
      file_reasons[reason] += static_cast<int>(xmls.size());
    } else {
      for (const fs::path& xml : xmls) {
        const FileResult r = run_file(c, xml);
        files.add(r.outcome);
        if (r.outcome == Outcome::Refused) {
          file_reasons[r.reason]++;
          example.emplace(r.reason, r.detail);
        }
        if (r.outcome == Outcome::Fail) {
          failures.push_back(c.name + " " + xml.filename().string() + ": " + r.reason + ": " +
                             r.detail);
          outcome = Outcome::Fail;
        } else if (r.outcome == Outcome::Refused && outcome == Outcome::Pass) {
          outcome = Outcome::Refused;
          reason = r.reason;
        }
      }
    }
    if (outcome == Outcome::Pass && !xmls.empty()) {
      try {
        const costate::sbml::Model m = costate::sbml::read_file(xmls.back().string());
        if (!m.delays.empty() && !m.state_names.empty()) {
          // Forward sensitivities and the discrete adjoint through the
          // history.
          try {
            const DelayGradientCheck g = check_delay_gradient(m, c.start, c.start + c.duration);
            worst_delay.emplace_back(g.forward_vs_central, c.name);
            worst_delay_adjoint.emplace_back(g.adjoint_vs_forward, c.name);
            worst_delay_adjoint_central.emplace_back(g.adjoint_vs_central, c.name);
            const ode::History none(m.state_names.size());
            const ode::DelayedInputs slots(m.equations, m.delays, none);
            for (std::size_t k = 0; k < m.delays.size(); ++k)
              if (slots.read_by_rhs(k)) {
                ++delay_in_rhs;
                break;
              }
          } catch (const costate::Error& e) {
            const std::string reason = refusal_class(e.what(), xmls.back().string());
            gradients_not_compared[reason]++;
            not_compared_example.emplace(reason, c.name + ": " + e.what());
          }
        } else if (!m.state_names.empty() && !m.parameters.empty()) {
          try {
            const GradientCheck g = check_gradient(m, c.start, c.start + c.duration);
            ++gradients_checked;
            if (m.equations.n_events() > 0) ++event_gradients_checked;
            worst_fa.emplace_back(g.forward_vs_adjoint, c.name);
            worst_fa_logarithmic.emplace_back(g.forward_vs_adjoint_logarithmic, c.name);
            if (m.equations.n_events() > 0) worst_fa_events.emplace_back(g.forward_vs_adjoint, c.name);
            if (!m.equations.algebraic_states().empty()) {
              worst_fa_dae.emplace_back(g.forward_vs_adjoint, c.name);
              worst_ac_dae.emplace_back(g.adjoint_vs_central, c.name);
            }
            worst_ac.emplace_back(g.adjoint_vs_central, c.name);
          } catch (const costate::Error& e) {
            if (m.equations.n_events() == 0) throw;
            const std::string reason = refusal_class(e.what(), xmls.back().string());
            gradients_not_compared[reason]++;
            not_compared_example.emplace(reason, c.name + ": " + e.what());
          }
        }
      } catch (const std::exception& e) {
        gradient_errors.push_back(c.name + ": " + e.what());
      }
    }
    cases.add(outcome);
    if (outcome == Outcome::Refused) reasons[reason]++;
    for (const auto& t : c.tags) by_tag[t].add(outcome);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::ostringstream o;
  o << "SBML Test Suite (" << suite.string() << "), integrator cvodes_bdf (bdf for models "
    << "with events) rtol " << kRtol << " atol " << kAtol << "\n\n";
  o << "cases: " << cases.total() << "  pass " << cases.pass << "  refused " << cases.refused
    << "  fail " << cases.fail << "\n";
  o << "files: " << files.total() << "  pass " << files.pass << "  refused " << files.refused
    << "  fail " << files.fail << "\n";
  o << "time: " << std::fixed << std::setprecision(1) << seconds << " s\n\n";
  o << "| tag | cases | pass | refused | fail |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [tag, t] : by_tag)
    o << "| " << tag << " | " << t.total() << " | " << t.pass << " | " << t.refused << " | "
      << t.fail << " |\n";
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [r, n] : reasons) sorted.emplace_back(n, r);
  std::sort(sorted.rbegin(), sorted.rend());
  o << "\nRefusals (cases whose first refused file gives the reason; files with it)\n\n";
  o << "| cases | files | reason |\n|---:|---:|---|\n";
  for (const auto& [n, r] : sorted) o << "| " << n << " | " << file_reasons[r] << " | " << r << " |\n";
  o << "\nFile-level refusals not first in any case:\n";
  for (const auto& [r, n] : file_reasons)
    if (!reasons.count(r)) o << "  " << n << " files: " << r << "\n";
  o << "\nOne message of each refusal:\n";
  for (const auto& [r, e] : example) o << "  " << e << "\n";
  auto worst = [](std::vector<std::pair<double, std::string>>& v) {
    std::sort(v.rbegin(), v.rend());
    std::ostringstream w;
    w << std::scientific << std::setprecision(2);
    for (std::size_t k = 0; k < std::min<std::size_t>(5, v.size()); ++k)
      w << (k ? ", " : "") << v[k].second << " " << v[k].first;
    return w.str();
  };
  auto below = [](const std::vector<std::pair<double, std::string>>& v, double tol) {
    return std::count_if(v.begin(), v.end(), [&](const auto& x) { return x.first <= tol; });
  };
  o << "\nGradients of J = ½ Σ y(t_end)² with respect to the parameters (initial state held), "
       "the newest file of each passing case with states and parameters: "
    << gradients_checked << " cases\n";
  o << std::defaultfloat;
  o << "  forward sensitivities vs discrete adjoint (bdf rtol " << kGradientRtol << "): "
    << below(worst_fa, 1e-8) << " within 1e-8, " << below(worst_fa, 1e-10)
    << " within 1e-10; worst: " << worst(worst_fa) << "\n";
  o << "    the same, cases with events: " << below(worst_fa_events, 1e-10) << " of "
    << worst_fa_events.size() << " within 1e-10; worst: " << worst(worst_fa_events) << "\n";
  o << "    the same as logarithmic sensitivities, max_j |forward_j − adjoint_j|·|p_j|/|J|: "
    << below(worst_fa_logarithmic, 1e-12) << " within 1e-12; worst: "
    << worst(worst_fa_logarithmic) << "\n";
  o << "  discrete adjoint vs central differences (first " << kDifferenceParameters
    << " parameters, CVODES rtol " << kDifferenceRtol << "): " << below(worst_ac, 1e-4)
    << " within 1e-4, " << below(worst_ac, 1e-2) << " within 1e-2; worst: " << worst(worst_ac)
    << "\n";
  o << "  of them with events: " << event_gradients_checked << "\n";
  o << "  of them DAEs (algebraic rules, fast reactions): " << worst_fa_dae.size()
    << "; forward vs adjoint " << below(worst_fa_dae, 1e-10) << " within 1e-10, worst: "
    << worst(worst_fa_dae) << "; adjoint vs central " << below(worst_ac_dae, 1e-4)
    << " within 1e-4, worst: " << worst(worst_ac_dae) << "\n";
  o << "  models with delay() (not counted above): " << worst_delay.size() << " ("
    << delay_in_rhs << " whose right-hand side reads a delay, the others in outputs only)"
    << "; forward sensitivities through the history (bdf rtol " << kGradientRtol
    << ") vs central differences (first " << kDifferenceParameters
    << " parameters that are not delay slots, rtol " << kDifferenceRtol
    << "): " << below(worst_delay, 1e-4) << " within 1e-4, worst: " << worst(worst_delay)
    << "; the discrete adjoint through the history (bdf rtol " << kGradientRtol
    << ", its steps landing on the history's samples) vs forward: "
    << below(worst_delay_adjoint, kDelayAdjointVsForwardTol) << " within "
    << kDelayAdjointVsForwardTol << ", worst: " << worst(worst_delay_adjoint)
    << "; adjoint vs central: " << below(worst_delay_adjoint_central, 1e-4)
    << " within 1e-4, worst: " << worst(worst_delay_adjoint_central) << "\n";
  int not_compared = 0;
  for (const auto& [r, n] : gradients_not_compared) not_compared += n;
  o << "  not compared (a path refuses the model's gradient by name): " << not_compared
    << "\n";
  for (const auto& [r, n] : gradients_not_compared)
    o << "    " << n << " cases: " << r.substr(0, 200) << "\n      e.g. "
      << not_compared_example[r].substr(0, 300) << "\n";
  o << "  not checked (an error): " << gradient_errors.size() << "\n";
  for (const auto& e : gradient_errors) o << "    " << e.substr(0, 300) << "\n";
  o << "\nFailures (" << failures.size() << " files):\n";
  for (const auto& f : failures) o << "  " << f << "\n";
  std::ofstream(argv[2]) << o.str();
  std::cout << o.str();
  std::cout << "report written to " << argv[2] << "\n";
  const bool gradients_agree =
      std::all_of(worst_fa.begin(), worst_fa.end(),
                  [](const auto& x) { return x.first <= kForwardVsAdjointTol; }) &&
      std::all_of(worst_fa_logarithmic.begin(), worst_fa_logarithmic.end(),
                  [](const auto& x) { return x.first <= kLogarithmicTol; }) &&
      std::all_of(worst_delay_adjoint.begin(), worst_delay_adjoint.end(),
                  [](const auto& x) { return x.first <= kDelayAdjointVsForwardTol; }) &&
      gradient_errors.empty();
  if (!gradients_agree)
    std::cout << "FAILED: forward sensitivities and the discrete adjoint disagree beyond "
              << kForwardVsAdjointTol << " (logarithmic: " << kLogarithmicTol
              << "; through delay(): " << kDelayAdjointVsForwardTol
              << ", or a gradient failed); see above\n";
  return failures.empty() && gradients_agree ? 0 : 1;
}
