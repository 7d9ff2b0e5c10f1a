#include "costate/io/input.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/ad/reverse.hpp"
#include "costate/expr/program.hpp"
#include "costate/ode/models.hpp"
#include "costate/ode/support.hpp"
#include "costate/io/input_text.hpp"
#include "costate/io/pde_calibration.hpp"
#include "costate/io/pde_input.hpp"
#include "costate/io/resources.hpp"
#include "costate/io/yaml_document.hpp"

namespace costate::io {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  // The same name in another case first ('T' for 't').
  const auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (const auto& c : candidates)
    if (c != word && lower(c) == lower(word)) return c;
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Close enough to be a typo: at most a third of the word, and at least 2;
  // and not every character replaced ('s' is no typo of 't').
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_d <= limit && best_d < std::max(word.size(), best.size()) ? best : std::string{};
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Scalar: return "'" + n.Scalar() + "'";
    default: return "an undefined value";
  }
}

std::string fmt(double v) { return detail::format_value(v); }

/// Where keys came from, for error messages.
/// Where `pc_type: automatic` switches from PETSc's default preconditioner
/// (ILU on one rank, block Jacobi with ILU on several) to its algebraic
/// multigrid (gamg): ILU's Krylov iterations grow with the grid, gamg's do
/// not. Measured on data/examples/heat2d_inversion.yaml (10 backward-Euler
/// steps, ksp_rtol 1e-14): GMRES iterations per solve 43 / 87 / 194 with ILU
/// on 64² / 128² / 256², 15 / 17 / 18 with gamg; a run's CPU time equal at
/// 64², 1.45× less at 128² and 2.7× less at 256². Below 128² unknowns the
/// default is kept (no gain, and small grids keep their rank-count
/// agreement to the last bits that the tests check).
constexpr std::int64_t kMultigridUnknowns = 128 * 128;

class Context {
 public:
  std::string path;
  std::map<std::string, std::string> overrides;  // key path -> "key=value"

  std::string where(const YAML::Node& node, const std::string& key) const {
    for (const auto& [k, text] : overrides) {
      if (key == k || key.rfind(k + ".", 0) == 0 || key.rfind(k + "[", 0) == 0)
        return "--set " + text;
    }
    if (node.IsDefined()) {
      const YAML::Mark m = node.Mark();
      if (!m.is_null())
        return path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    }
    return path;
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& key,
                         const std::string& message) const {
    throw Error(where(node, key) + ": " + key + ": " + message);
  }

  /// Unknown keys in `map` (whose dotted path is `prefix`) are errors that
  /// suggest the nearest valid key.
  void check_keys(const YAML::Node& map, const std::string& prefix,
                  const std::vector<std::string>& valid) const {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string k = it->first.Scalar();
      if (std::find(valid.begin(), valid.end(), k) != valid.end()) continue;
      const std::string full = prefix.empty() ? k : prefix + "." + k;
      std::string msg = "unknown key '" + full + "'";
      const std::string near = nearest(k, valid);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      msg += " Valid keys" + (prefix.empty() ? std::string{} : " in '" + prefix + "'") + ": " +
             join(valid);
      throw Error(where(it->first, full) + ": " + msg);
    }
  }

  void expect_map(const YAML::Node& node, const std::string& key) const {
    if (!node.IsMap()) fail(node, key, "expected a map of keys, got " + describe(node));
  }

  double number(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node, key, "expected a number, got " + describe(node));
    double v = 0.0;
    if (!YAML::convert<double>::decode(node, v))
      fail(node, key, "expected a number, got " + describe(node));
    if (!std::isfinite(v)) fail(node, key, "expected a finite number, got " + describe(node));
    return v;
  }

  double positive(const YAML::Node& node, const std::string& key) const {
    const double v = number(node, key);
    if (!(v > 0.0)) fail(node, key, "must be positive, got " + fmt(v));
    return v;
  }

  double non_negative(const YAML::Node& node, const std::string& key) const {
    const double v = number(node, key);
    if (v < 0.0) fail(node, key, "must be >= 0, got " + fmt(v));
    return v;
  }

  std::string string(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar() || node.Scalar().empty())
      fail(node, key, "expected a string, got " + describe(node));
    return node.Scalar();
  }

  bool boolean(const YAML::Node& node, const std::string& key) const {
    bool b = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, b))
      fail(node, key, "expected true or false, got " + describe(node));
    return b;
  }

  long long integer(const YAML::Node& node, const std::string& key) const {
    long long v = 0;
    if (!node.IsScalar() || !YAML::convert<long long>::decode(node, v))
      fail(node, key, "expected an integer, got " + describe(node));
    return v;
  }
};

void apply_override(YAML::Node& root, const std::string& text, Context& ctx) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set " + text + ": expected key=value, e.g. --set integrator.rtol=1e-10");
  const std::string key = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty())
      throw Error("--set " + text + ": the key '" + key + "' has an empty component");
    parts.push_back(part);
  }
  YAML::Node value_node;
  try {
    value_node = YAML::Load(value);
  } catch (const YAML::Exception&) {
    value_node = YAML::Node(value);
  }
  if (value_node.IsNull() && !value.empty() && value != "~" && value != "null")
    value_node = YAML::Node(value);
  YAML::Node cur;
  cur.reset(root);
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    if (!cur.IsMap())
      throw Error("--set " + text + ": '" + walked + "' cannot hold keys (it is not a map)");
    YAML::Node child = cur[parts[i]];
    if (!child.IsDefined() || child.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = cur[parts[i]];
    } else if (!child.IsMap()) {
      throw Error("--set " + text + ": '" + walked + "' is not a map, so it has no key '" +
                  parts[i + 1] + "'");
    }
    cur.reset(child);
  }
  if (!cur.IsMap() && !cur.IsNull())
    throw Error("--set " + text + ": cannot set '" + key + "'");
  // `key=null` (or `key=~`) removes the key: what switches, say,
  // time.output_every off so that time.outputs can be given instead.
  if (value_node.IsNull()) {
    if (cur.IsMap()) cur.remove(parts.back());
  } else {
    cur[parts.back()] = value_node;
  }
  ctx.overrides[key] = text;
}

std::vector<double> output_grid(double start, double end, double every) {
  std::vector<double> out;
  const double span = end - start;
  const auto n = static_cast<long long>(std::floor(span / every * (1.0 + 1e-12)));
  for (long long k = 0; k <= n; ++k) out.push_back(start + static_cast<double>(k) * every);
  // The last grid point may miss end by round-off: snap, or append end.
  if (end - out.back() <= 1e-9 * every)
    out.back() = end;
  else
    out.push_back(end);
  return out;
}

}  // namespace

void evaluate_initial_state(RunConfig& cfg) {
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  std::vector<double> values{cfg.t_start};
  values.insert(values.end(), cfg.parameters.begin(), cfg.parameters.end());
  for (std::size_t i = 0; i < cfg.initial_state_expressions.size(); ++i) {
    const std::string& e = cfg.initial_state_expressions[i];
    if (e.empty()) continue;
    cfg.initial_state[i] = expr::Program::compile(e, vars, "initial_state." + cfg.state_names[i])
                               .evaluate(std::span<const double>(values));
  }
}

void read_csv_data(const std::string& path, const std::vector<std::string>& states,
                   std::vector<double>& times, std::vector<double>& data,
                   std::vector<std::string>* warnings) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the data file");
  auto trim = [](std::string s) {
    const auto a = s.find_first_not_of(" \t\r");
    const auto b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? std::string{} : s.substr(a, b - a + 1);
  };
  auto split = [&](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(trim(cell));
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  std::string line;
  std::size_t lineno = 0;
  // Header (skipping blank lines and # comments).
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    header = split(t);
    break;
  }
  if (header.empty()) throw Error(path + ": the data file is empty; expected a header 't,<state>,...'");
  if (header[0] != "t" && header[0] != "time")
    throw Error(path + ":" + std::to_string(lineno) + ": the first column must be 't' (or 'time'), got '" +
                header[0] + "'");
  std::vector<std::size_t> column_state;
  for (std::size_t c = 1; c < header.size(); ++c) {
    auto it = std::find(states.begin(), states.end(), header[c]);
    if (it == states.end()) {
      std::string msg = path + ":" + std::to_string(lineno) + ": column '" + header[c] + "' is not a state";
      const std::string near = nearest(header[c], states);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      throw Error(msg);
    }
    for (std::size_t d = 1; d < c; ++d)
      if (header[d] == header[c])
        throw Error(path + ":" + std::to_string(lineno) + ": column '" + header[c] +
                    "' appears twice in the header (columns " + std::to_string(d + 1) + " and " +
                    std::to_string(c + 1) + "); each state takes one column");
    column_state.push_back(static_cast<std::size_t>(it - states.begin()));
  }
  if (column_state.empty())
    throw Error(path + ":" + std::to_string(lineno) +
                ": the header names no state, only the time; expected 't,<state>,...' with at "
                "least one of: " + join(states));
  const std::size_t header_line = lineno;
  times.clear();
  data.clear();
  while (std::getline(in, line)) {
    ++lineno;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto cells = split(t);
    if (cells.size() != header.size())
      throw Error(path + ":" + std::to_string(lineno) + ": expected " + std::to_string(header.size()) +
                  " values, got " + std::to_string(cells.size()));
    auto parse = [&](const std::string& cell, std::size_t c, bool allow_missing) {
      if (allow_missing && (cell.empty() || cell == "nan" || cell == "NaN" || cell == "NA"))
        return std::numeric_limits<double>::quiet_NaN();
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size() || !std::isfinite(v))
        throw Error(path + ":" + std::to_string(lineno) + ": column '" + header[c] +
                    "': expected a number, got '" + cell + "'");
      return v;
    };
    const double tk = parse(cells[0], 0, false);
    if (!times.empty() && tk <= times.back())
      throw Error(path + ":" + std::to_string(lineno) + ": times must be strictly ascending (" +
                  fmt(times.back()) + " then " + fmt(tk) + ")");
    times.push_back(tk);
    data.resize(times.size() * states.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t c = 1; c < cells.size(); ++c)
      data[(times.size() - 1) * states.size() + column_state[c - 1]] = parse(cells[c], c, true);
  }
  if (times.empty()) throw Error(path + ": no data rows after the header");
  for (std::size_t c = 0; c < column_state.size(); ++c) {
    bool any = false;
    for (std::size_t k = 0; k < times.size() && !any; ++k)
      any = !std::isnan(data[k * states.size() + column_state[c]]);
    if (!any)
      throw Error(path + ":" + std::to_string(header_line) + ": column '" + header[c + 1] +
                  "' has no value in any row; remove it or fill it in");
  }
  if (warnings) {
    std::vector<std::string> unobserved;
    for (std::size_t i = 0; i < states.size(); ++i)
      if (std::find(column_state.begin(), column_state.end(), i) == column_state.end())
        unobserved.push_back(states[i]);
    if (!unobserved.empty())
      warnings->push_back(path + ":" + std::to_string(header_line) + ": no column for " +
                          (unobserved.size() == 1 ? "state " : "states ") + join(unobserved) +
                          ": not observed by this data file");
  }
}

namespace {

/// calibration.optimizer with method adamw | adam | sgd: the settings of a
/// mini-batch fit over the conditions (optimize::StochasticOptions; the
/// keys are its fields, finish = finish_iterations).
void parse_stochastic_optimizer(const YAML::Node& opt, const Context& ctx, CalibrationConfig& cc) {
  const std::string k0 = "calibration.optimizer";
  ctx.check_keys(opt, k0,
                 {"method", "epochs", "batch", "physical_batch", "learning_rate", "validation_split", "seed",
                  "finish", "schedule", "warmup_steps", "weight_decay", "clip_norm", "patience", "momentum",
                  "batch_growth", "average_epochs", "step_epochs", "gamma", "min_learning_rate", "beta1", "beta2",
                  "epsilon", "max_rescues", "max_restarts"});
  optimize::StochasticOptions& o = cc.stochastic_options;
  cc.stochastic = true;
  o.method = optimize::stochastic_method_from_string(opt["method"].Scalar());
  const auto count = [&](const char* k, long long lo) {
    const long long v = ctx.integer(opt[k], k0 + "." + k);
    if (v < lo || v > 1000000000)
      ctx.fail(opt[k], k0 + "." + k, "expected an integer in [" + std::to_string(lo) + ", 1e9], got " + std::to_string(v));
    return v;
  };
  if (opt["epochs"]) o.epochs = static_cast<int>(count("epochs", 1));
  if (opt["batch"]) o.batch = static_cast<std::size_t>(count("batch", 1));
  if (opt["physical_batch"]) o.physical_batch = static_cast<std::size_t>(count("physical_batch", 1));
  if (opt["seed"]) o.seed = static_cast<std::uint64_t>(count("seed", 0));
  if (opt["finish"]) o.finish_iterations = static_cast<int>(count("finish", 0));
  if (opt["warmup_steps"]) o.warmup_steps = static_cast<int>(count("warmup_steps", 0));
  if (opt["patience"]) o.patience = static_cast<int>(count("patience", 0));
  if (opt["average_epochs"]) o.average_epochs = static_cast<int>(count("average_epochs", 0));
  if (opt["step_epochs"]) o.step_epochs = static_cast<int>(count("step_epochs", 1));
  if (opt["max_rescues"]) o.max_rescues = static_cast<int>(count("max_rescues", 0));
  if (opt["max_restarts"]) o.max_restarts = static_cast<int>(count("max_restarts", 0));
  if (opt["gamma"]) o.gamma = ctx.positive(opt["gamma"], k0 + ".gamma");
  if (opt["min_learning_rate"]) o.min_learning_rate = ctx.non_negative(opt["min_learning_rate"], k0 + ".min_learning_rate");
  if (opt["beta1"]) o.beta1 = ctx.non_negative(opt["beta1"], k0 + ".beta1");
  if (opt["beta2"]) o.beta2 = ctx.non_negative(opt["beta2"], k0 + ".beta2");
  if (opt["epsilon"]) o.epsilon = ctx.positive(opt["epsilon"], k0 + ".epsilon");
  if (opt["learning_rate"]) o.learning_rate = ctx.positive(opt["learning_rate"], k0 + ".learning_rate");
  if (opt["validation_split"]) {
    o.validation_split = ctx.non_negative(opt["validation_split"], k0 + ".validation_split");
    if (!(o.validation_split < 1.0))
      ctx.fail(opt["validation_split"], k0 + ".validation_split",
               "expected a fraction in [0, 1), got " + fmt(o.validation_split));
  }
  if (opt["weight_decay"]) o.weight_decay = ctx.non_negative(opt["weight_decay"], k0 + ".weight_decay");
  if (opt["clip_norm"]) o.clip_norm = ctx.non_negative(opt["clip_norm"], k0 + ".clip_norm");
  if (opt["momentum"]) o.momentum = ctx.non_negative(opt["momentum"], k0 + ".momentum");
  if (opt["batch_growth"]) o.batch_growth = ctx.positive(opt["batch_growth"], k0 + ".batch_growth");
  if (opt["schedule"]) {
    try {
      o.schedule = optimize::learning_rate_schedule_from_string(ctx.string(opt["schedule"], k0 + ".schedule"));
    } catch (const Error& e) {
      ctx.fail(opt["schedule"], k0 + ".schedule", e.what());
    }
  }
  try {
    o.validate();
  } catch (const Error& e) {
    ctx.fail(opt, k0, e.what());
  }
}

}  // namespace

optimize::StochasticOptions stochastic_options_from_overrides(const std::string& method,
                                                              const std::vector<std::string>& overrides,
                                                              const std::string& path) {
  Context ctx;
  ctx.path = path;
  YAML::Node root(YAML::NodeType::Map);
  root["calibration"]["optimizer"]["method"] = method;
  for (const auto& o : overrides) apply_override(root, o, ctx);
  ctx.check_keys(root, "", {"calibration"});
  ctx.expect_map(root["calibration"], "calibration");
  ctx.check_keys(root["calibration"], "calibration", {"optimizer"});
  const YAML::Node opt = root["calibration"]["optimizer"];
  ctx.expect_map(opt, "calibration.optimizer");
  CalibrationConfig cc;
  try {
    (void)optimize::stochastic_method_from_string(ctx.string(opt["method"], "calibration.optimizer.method"));
  } catch (const Error& e) {
    ctx.fail(opt["method"], "calibration.optimizer.method", e.what());
  }
  parse_stochastic_optimizer(opt, ctx, cc);
  return cc.stochastic_options;
}

namespace {

/// The `calibration:` section (see CalibrationConfig). Needs the model's
/// names, the parameters, the initial state and the time interval resolved.
void parse_calibration(const YAML::Node& cal, const Context& ctx, const std::string& path,
                       RunConfig& cfg) {
  ctx.expect_map(cal, "calibration");
  ctx.check_keys(cal, "calibration",
                 {"parameters", "initial_state", "data", "regularization", "optimizer"});
  CalibrationConfig& cc = cfg.calibration;
  cc.present = true;
  // 1. What to fit.
  auto variables = [&](const char* section, bool states) {
    const YAML::Node vars = cal[section];
    if (!vars) return;
    const std::string prefix = std::string("calibration.") + section;
    ctx.expect_map(vars, prefix);
    const std::vector<std::string>& names = states ? cfg.state_names : cfg.parameter_names;
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      const std::string name = it->first.Scalar();
      const auto pos = std::find(names.begin(), names.end(), name);
      if (pos == names.end()) {
        std::string msg = "'" + name + "' is not " + (states ? "a state" : "a parameter") + " of the model";
        const std::string near = nearest(name, names);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(it->first, prefix + "." + name, msg + " Valid: " + join(names));
      }
      FitVariable v;
      v.name = name;
      v.initial_state = states;
      v.index = static_cast<std::size_t>(pos - names.begin());
      v.initial = states ? cfg.initial_state[v.index] : cfg.parameters[v.index];
      const std::string key = prefix + "." + name;
      const YAML::Node spec = it->second;
      bool has_prior = false;
      if (spec.IsScalar()) {
        v.initial = ctx.number(spec, key);
      } else if (spec.IsMap()) {
        ctx.check_keys(spec, key, {"initial", "lower", "upper", "log", "prior"});
        if (spec["initial"]) v.initial = ctx.number(spec["initial"], key + ".initial");
        if (spec["lower"]) v.lower = ctx.number(spec["lower"], key + ".lower");
        if (spec["upper"]) v.upper = ctx.number(spec["upper"], key + ".upper");
        if (spec["log"]) v.log = ctx.boolean(spec["log"], key + ".log");
        if (v.log && !spec["lower"]) v.lower = 0.0;  // a log-scale variable is positive
        if (spec["prior"]) {
          v.prior = ctx.number(spec["prior"], key + ".prior");
          has_prior = true;
        }
      } else if (!spec.IsNull()) {
        ctx.fail(spec, key,
                 "expected a number (the initial guess) or a map with initial, lower, upper, log, "
                 "prior; got " + describe(spec));
      }
      if (!std::isfinite(v.initial))
        ctx.fail(spec, key, "no initial guess: give " + key + ".initial");
      if (v.log && !(v.initial > 0.0 && v.lower >= 0.0))
        ctx.fail(spec, key,
                 "log: true needs a positive initial guess and lower >= 0 (got initial " +
                     fmt(v.initial) + ", lower " + fmt(v.lower) + ")");
      if (!(v.lower < v.upper))
        ctx.fail(spec, key, "lower = " + fmt(v.lower) + " must be below upper = " + fmt(v.upper));
      if (v.initial < v.lower || v.initial > v.upper)
        ctx.fail(spec, key,
                 "the initial guess " + fmt(v.initial) + " lies outside the bounds [" + fmt(v.lower) +
                     ", " + fmt(v.upper) + "]; move the guess or widen the bounds");
      if (!has_prior) v.prior = v.initial;
      if (v.log && !(v.prior > 0.0))
        ctx.fail(spec, key, "log: true needs a positive prior, got " + fmt(v.prior));
      cc.variables.push_back(v);
    }
  };
  variables("parameters", false);
  variables("initial_state", true);
  if (cc.variables.empty())
    ctx.fail(cal, "calibration",
             "nothing to fit: list parameters (calibration.parameters.<name>) or initial states");

  // 2. Data: one map or a list of maps {file, noise | weights}, merged
  //    (with conditions: each condition's own data).
  const YAML::Node data = cal["data"];
  if (!cfg.conditions.empty()) {
    if (data)
      ctx.fail(data, "calibration.data",
               "with 'conditions:' each condition names its own data; remove calibration.data");
    std::size_t observed = 0;
    const std::size_t n = cfg.state_names.size();
    for (const ConditionConfig& c : cfg.conditions) {
      cc.data_files.push_back(c.data_file);
      cc.noise_given = cc.noise_given && c.noise_given;
      for (std::size_t k = 0; k < c.data.size(); ++k) observed += !std::isnan(c.data[k]) && c.weights[k % n] > 0.0;
    }
    if (observed < cc.variables.size())
      ctx.fail(cal, "calibration",
               std::to_string(observed) + " observed values in the conditions' data cannot determine " +
                   std::to_string(cc.variables.size()) + " fitted quantities");
  } else {  // (the block below kept at its indentation: unchanged)
  if (!data) ctx.fail(cal, "calibration", "missing required key 'data' (CSV file(s) of observations)");
  std::vector<YAML::Node> sets;
  if (data.IsMap()) sets.push_back(data);
  else if (data.IsSequence() && data.size() > 0)
    for (std::size_t i = 0; i < data.size(); ++i) sets.push_back(data[i]);
  else
    ctx.fail(data, "calibration.data", "expected a map {file, noise} or a list of them, got " + describe(data));
  const std::size_t n = cfg.state_names.size();
  struct Row { double t; std::vector<double> d, w; std::size_t file; };
  std::vector<Row> rows;
  for (std::size_t s = 0; s < sets.size(); ++s) {
    const YAML::Node set = sets[s];
    const std::string key = data.IsMap() ? std::string("calibration.data")
                                         : "calibration.data[" + std::to_string(s) + "]";
    ctx.expect_map(set, key);
    ctx.check_keys(set, key, {"file", "noise", "weights"});
    if (!set["file"]) ctx.fail(set, key, "missing required key 'file' (a CSV file)");
    std::string file = ctx.string(set["file"], key + ".file");
    const std::filesystem::path fp(file);
    if (fp.is_relative()) file = (std::filesystem::path(path).parent_path() / fp).string();
    cc.data_files.push_back(file);
    std::vector<double> times, values;
    try {
      read_csv_data(file, cfg.state_names, times, values, &cfg.warnings);
    } catch (const Error& e) {
      ctx.fail(set["file"], key + ".file", e.what());
    }
    if (times.empty()) ctx.fail(set["file"], key + ".file", file + ": the data file has no rows");
    for (std::size_t k = 0; k < times.size(); ++k)
      if (times[k] < cfg.t_start || times[k] > cfg.t_end)
        ctx.fail(set["file"], key + ".file",
                 file + ": data time " + fmt(times[k]) + " (row " + std::to_string(k + 1) +
                     ") lies outside the simulated interval [" + fmt(cfg.t_start) + ", " +
                     fmt(cfg.t_end) + "]; extend time.end or drop the row");
    if (set["noise"] && set["weights"])
      ctx.fail(set["noise"], key + ".noise", "give either 'noise' or 'weights', not both");
    std::vector<double> w(n, 1.0);
    std::vector<bool> has_noise(n, false);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    DataSpec as_read{file, std::vector<double>(n, nan), std::vector<double>(n, nan)};
    if (const YAML::Node nz = set["noise"]) {
      if (nz.IsScalar()) {
        const double sigma = ctx.positive(nz, key + ".noise");
        std::fill(w.begin(), w.end(), 1.0 / (sigma * sigma));
        std::fill(has_noise.begin(), has_noise.end(), true);
        std::fill(as_read.noise.begin(), as_read.noise.end(), sigma);
      } else {
        ctx.expect_map(nz, key + ".noise");
        ctx.check_keys(nz, key + ".noise", cfg.state_names);
        for (std::size_t i = 0; i < n; ++i)
          if (nz[cfg.state_names[i]]) {
            const double sigma = ctx.positive(nz[cfg.state_names[i]], key + ".noise." + cfg.state_names[i]);
            w[i] = 1.0 / (sigma * sigma);
            has_noise[i] = true;
            as_read.noise[i] = sigma;
          }
      }
    }
    if (const YAML::Node ws = set["weights"]) {
      ctx.expect_map(ws, key + ".weights");
      ctx.check_keys(ws, key + ".weights", cfg.state_names);
      for (std::size_t i = 0; i < n; ++i)
        if (ws[cfg.state_names[i]])
          as_read.weights[i] = w[i] = ctx.non_negative(ws[cfg.state_names[i]], key + ".weights." + cfg.state_names[i]);
    }
    cc.data_sets.push_back(std::move(as_read));
    for (std::size_t k = 0; k < times.size(); ++k) {
      Row r{times[k], std::vector<double>(values.begin() + static_cast<std::ptrdiff_t>(k * n),
                                          values.begin() + static_cast<std::ptrdiff_t>((k + 1) * n)),
            w, s};
      for (std::size_t i = 0; i < n; ++i)
        if (!std::isnan(r.d[i]) && w[i] > 0.0 && !has_noise[i]) cc.noise_given = false;
      rows.push_back(std::move(r));
    }
  }
  // Merge rows with equal times; one value per (time, state).
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.t < b.t; });
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Row& r : rows) {
    if (cc.times.empty() || cc.times.back() != r.t) {
      cc.times.push_back(r.t);
      cc.data.insert(cc.data.end(), n, nan);
      cc.weights.insert(cc.weights.end(), n, 0.0);
    }
    const std::size_t k = cc.times.size() - 1;
    for (std::size_t i = 0; i < n; ++i) {
      if (std::isnan(r.d[i])) continue;
      if (!std::isnan(cc.data[k * n + i]))
        ctx.fail(data, "calibration.data",
                 "two values for state '" + cfg.state_names[i] + "' at t = " + fmt(r.t) +
                     " (in " + cc.data_files[r.file] + " and an earlier file)");
      cc.data[k * n + i] = r.d[i];
      cc.weights[k * n + i] = r.w[i];
    }
  }
  std::size_t observed = 0;
  for (std::size_t c = 0; c < cc.data.size(); ++c) observed += !std::isnan(cc.data[c]) && cc.weights[c] > 0.0;
  if (observed < cc.variables.size())
    ctx.fail(data, "calibration.data",
             std::to_string(observed) + " observed values cannot determine " +
                 std::to_string(cc.variables.size()) + " fitted quantities");

  }  // data without conditions

  // 3. Regularisation and the optimizer.
  if (const YAML::Node reg = cal["regularization"]) {
    ctx.expect_map(reg, "calibration.regularization");
    ctx.check_keys(reg, "calibration.regularization", {"weight"});
    if (reg["weight"]) cc.regularization_weight = ctx.non_negative(reg["weight"], "calibration.regularization.weight");
  }
  if (const YAML::Node opt = cal["optimizer"]) {
    ctx.expect_map(opt, "calibration.optimizer");
    if (opt["method"]) {
      const std::string m = ctx.string(opt["method"], "calibration.optimizer.method");
      if (m == "adamw" || m == "adam" || m == "sgd") {
        parse_stochastic_optimizer(opt, ctx, cc);
        return;
      }
    }
    ctx.check_keys(opt, "calibration.optimizer",
                   {"method", "gatol", "grtol", "gttol", "max_iterations", "max_function_evaluations"});
    optimize::TaoOptions& o = cc.optimizer;
    if (opt["method"]) {
      const std::string m = ctx.string(opt["method"], "calibration.optimizer.method");
      std::vector<std::string> names;
      for (auto x : optimize::all_tao_methods()) names.push_back(optimize::to_string(x));
      for (const char* x : {"adamw", "adam", "sgd"}) names.push_back(x);
      if (std::find(names.begin(), names.end(), m) == names.end()) {
        std::string msg = "unknown method '" + m + "'";
        const std::string near = nearest(m, names);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(opt["method"], "calibration.optimizer.method", msg + " Valid methods: " + join(names));
      }
      o.method = optimize::tao_method_from_string(m);
    }
    if (opt["gatol"]) o.gatol = ctx.non_negative(opt["gatol"], "calibration.optimizer.gatol");
    if (opt["grtol"]) o.grtol = ctx.non_negative(opt["grtol"], "calibration.optimizer.grtol");
    if (opt["gttol"]) o.gttol = ctx.non_negative(opt["gttol"], "calibration.optimizer.gttol");
    auto count = [&](const char* k, int& out) {
      if (!opt[k]) return;
      const std::string key = std::string("calibration.optimizer.") + k;
      const long long v = ctx.integer(opt[k], key);
      if (v < 1 || v > 1000000) ctx.fail(opt[k], key, "must be an integer in [1, 1000000], got " + std::to_string(v));
      out = static_cast<int>(v);
    };
    count("max_iterations", o.max_iterations);
    count("max_function_evaluations", o.max_function_evaluations);
  }
}

}  // namespace

namespace {

/// The `conditions:` section (ConditionConfig): a list of rows
///     - {id, parameters: {name: number | parameter}, initial_state: {state: number | expression},
///        data: file | {file, noise | weights}}
/// or a CSV table {file: table.csv, noise | weights} whose header is
/// `id,<parameter or state>...,data` (one row per condition; an empty cell
/// keeps the file's value; data files relative to the table). Needs the model's names, parameters, initial
/// state and time interval resolved. Rows are kept in the order given.
void parse_conditions(const YAML::Node& node, const Context& ctx, const std::string& path, RunConfig& cfg) {
  const std::size_t n = cfg.state_names.size(), np = cfg.parameter_names.size();
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const auto resolve = [&](const std::string& file) {
    const std::filesystem::path fp(file);
    return fp.is_relative() ? (folder / fp).string() : file;
  };
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  // Reports a bad value: `where` is "file:line:column" (or the YAML key's place), `key` what it names.
  using Fail = std::function<void(const std::string& message)>;
  const auto fresh = [&](const std::string& id, std::size_t line) {
    ConditionConfig c;
    c.id = id;
    c.line = line;
    c.parameter_source.resize(np);
    for (std::size_t k = 0; k < np; ++k) c.parameter_source[k] = static_cast<long>(k);
    c.parameter_values = cfg.parameters;
    c.initial_state.assign(n, "");
    return c;
  };
  const auto set_parameter = [&](ConditionConfig& c, const std::string& name, const std::string& value,
                                 const Fail& fail) {
    const auto pos = std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), name);
    const std::size_t k = static_cast<std::size_t>(pos - cfg.parameter_names.begin());
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (!value.empty() && end == value.c_str() + value.size()) {
      if (!std::isfinite(v)) fail("expected a finite number or a parameter name, got '" + value + "'");
      c.parameter_source[k] = -1;
      c.parameter_values[k] = v;
      return;
    }
    const auto src = std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), value);
    if (src == cfg.parameter_names.end()) {
      std::string msg = "expected a number or the name of a parameter of the model, got '" + value + "'";
      const std::string near = nearest(value, cfg.parameter_names);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      fail(msg);
    }
    c.parameter_source[k] = static_cast<long>(src - cfg.parameter_names.begin());
  };
  const auto set_initial = [&](ConditionConfig& c, std::size_t i, const std::string& value, const Fail& fail) {
    try {
      (void)expr::Program::compile(value, vars, "initial_state." + cfg.state_names[i]);
    } catch (const Error& e) {
      fail(std::string("expected a number or an expression of t and the parameters: ") + e.what());
    }
    c.initial_state[i] = value;
  };
  // A data set: `file` read against the states, weights from `spec`'s
  // noise | weights (a map or null).
  const auto set_data = [&](ConditionConfig& c, const std::string& file, const YAML::Node& spec,
                            const std::string& key, const Fail& fail) {
    c.data_file = file;
    try {
      read_csv_data(c.data_file, cfg.state_names, c.times, c.data, &cfg.warnings);
    } catch (const Error& e) {
      fail(e.what());
    }
    for (std::size_t k = 0; k < c.times.size(); ++k)
      if (c.times[k] < cfg.t_start || c.times[k] > cfg.t_end)
        fail(c.data_file + ": data time " + fmt(c.times[k]) + " (row " + std::to_string(k + 1) +
             ") lies outside the simulated interval [" + fmt(cfg.t_start) + ", " + fmt(cfg.t_end) +
             "]; extend time.end or drop the row");
    c.weights.assign(n, 1.0);
    c.noise_given = false;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    c.data_spec = {c.data_file, std::vector<double>(n, nan), std::vector<double>(n, nan)};
    if (!spec || !spec.IsMap()) return;
    if (spec["noise"] && spec["weights"])
      ctx.fail(spec["noise"], key + ".noise", "give either 'noise' or 'weights', not both");
    if (const YAML::Node nz = spec["noise"]) {
      if (nz.IsScalar()) {
        const double sigma = ctx.positive(nz, key + ".noise");
        c.weights.assign(n, 1.0 / (sigma * sigma));
        c.data_spec.noise.assign(n, sigma);
        c.noise_given = true;
      } else {
        ctx.expect_map(nz, key + ".noise");
        ctx.check_keys(nz, key + ".noise", cfg.state_names);
        c.noise_given = true;
        for (std::size_t i = 0; i < n; ++i) {
          if (nz[cfg.state_names[i]]) {
            const double sigma = ctx.positive(nz[cfg.state_names[i]], key + ".noise." + cfg.state_names[i]);
            c.weights[i] = 1.0 / (sigma * sigma);
            c.data_spec.noise[i] = sigma;
            continue;
          }
          for (std::size_t k = 0; k < c.times.size(); ++k)  // observed without a noise level
            if (!std::isnan(c.data[k * n + i])) c.noise_given = false;
        }
      }
    }
    if (const YAML::Node ws = spec["weights"]) {
      ctx.expect_map(ws, key + ".weights");
      ctx.check_keys(ws, key + ".weights", cfg.state_names);
      for (std::size_t i = 0; i < n; ++i)
        if (ws[cfg.state_names[i]])
          c.data_spec.weights[i] = c.weights[i] =
              ctx.non_negative(ws[cfg.state_names[i]], key + ".weights." + cfg.state_names[i]);
    }
  };
  const auto unknown = [&](const std::string& name) {
    std::vector<std::string> valid = cfg.parameter_names;
    valid.insert(valid.end(), cfg.state_names.begin(), cfg.state_names.end());
    std::string msg = "'" + name + "' is neither a parameter nor a state of the model";
    const std::string near = nearest(name, valid);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    return msg + " Parameters: " + join(cfg.parameter_names) + "; states: " + join(cfg.state_names);
  };

  if (node.IsSequence()) {
    // 1. Inline rows.
    if (node.size() == 0) ctx.fail(node, "conditions", "the list is empty; give at least one condition");
    for (std::size_t r = 0; r < node.size(); ++r) {
      const YAML::Node row = node[r];
      const std::string key = "conditions[" + std::to_string(r) + "]";
      ctx.expect_map(row, key);
      ctx.check_keys(row, key, {"id", "parameters", "initial_state", "data"});
      if (!row["id"]) ctx.fail(row, key, "missing required key 'id' (the condition's name)");
      ConditionConfig c = fresh(ctx.string(row["id"], key + ".id"), row.Mark().line + 1);
      if (const YAML::Node ps = row["parameters"]) {
        ctx.expect_map(ps, key + ".parameters");
        for (auto it = ps.begin(); it != ps.end(); ++it) {
          const std::string name = it->first.Scalar(), k = key + ".parameters." + name;
          if (std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), name) == cfg.parameter_names.end()) {
            std::string msg = "'" + name + "' is not a parameter of the model";
            const std::string near = nearest(name, cfg.parameter_names);
            if (!near.empty()) msg += "; did you mean '" + near + "'?";
            ctx.fail(it->first, k, msg + " Valid: " + join(cfg.parameter_names));
          }
          if (!it->second.IsScalar())
            ctx.fail(it->second, k, "expected a number or a parameter name, got " + describe(it->second));
          set_parameter(c, name, it->second.Scalar(), [&](const std::string& m) { ctx.fail(it->second, k, m); });
        }
      }
      if (const YAML::Node ys = row["initial_state"]) {
        ctx.expect_map(ys, key + ".initial_state");
        ctx.check_keys(ys, key + ".initial_state", cfg.state_names);
        for (std::size_t i = 0; i < n; ++i)
          if (const YAML::Node v = ys[cfg.state_names[i]]) {
            const std::string k = key + ".initial_state." + cfg.state_names[i];
            if (!v.IsScalar()) ctx.fail(v, k, "expected a number or an expression, got " + describe(v));
            set_initial(c, i, v.Scalar(), [&](const std::string& m) { ctx.fail(v, k, m); });
          }
      }
      const YAML::Node data = row["data"];
      if (!data)
        ctx.fail(row, key, "condition '" + c.id + "' has no data: give " + key +
                               ".data (a CSV file, or {file, noise}); every condition needs observations");
      if (data.IsMap()) {
        ctx.check_keys(data, key + ".data", {"file", "noise", "weights"});
        if (!data["file"]) ctx.fail(data, key + ".data", "missing required key 'file' (a CSV file)");
        set_data(c, resolve(ctx.string(data["file"], key + ".data.file")), data, key + ".data",
                 [&](const std::string& m) { ctx.fail(data["file"], key + ".data.file", m); });
      } else {
        set_data(c, resolve(ctx.string(data, key + ".data")), YAML::Node(), key + ".data",
                 [&](const std::string& m) { ctx.fail(data, key + ".data", m); });
      }
      for (const ConditionConfig& o : cfg.conditions)
        if (o.id == c.id)
          ctx.fail(row["id"], key + ".id",
                   "duplicate condition id '" + c.id + "' (first at line " + std::to_string(o.line) +
                       "); every condition needs its own id");
      cfg.conditions.push_back(std::move(c));
    }
    return;
  }
  // 2. A CSV table: {file, noise | weights}.
  if (!node.IsMap())
    ctx.fail(node, "conditions",
             "expected a list of conditions ({id, parameters, initial_state, data}) or a map {file: table.csv, "
             "noise}, got " + describe(node));
  ctx.check_keys(node, "conditions", {"file", "noise", "weights"});
  if (!node["file"]) ctx.fail(node, "conditions", "missing required key 'file' (a CSV table of conditions)");
  const std::string table = resolve(ctx.string(node["file"], "conditions.file"));
  cfg.conditions_file = table;
  std::ifstream in(table);
  if (!in) ctx.fail(node["file"], "conditions.file", table + ": cannot open the conditions table");
  const auto trim = [](const std::string& s) {
    const auto a = s.find_first_not_of(" \t\r");
    const auto b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? std::string{} : s.substr(a, b - a + 1);
  };
  const auto split = [&](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(trim(cell));
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  std::string line;
  std::size_t lineno = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++lineno;
    const std::string t = trim(line);
    if (!t.empty() && t[0] != '#') header = split(t);
  }
  const auto at = [&](std::size_t l, std::size_t col) {
    return table + ":" + std::to_string(l) + (col ? ":" + std::to_string(col) : std::string{});
  };
  if (header.empty()) throw Error(table + ": the conditions table is empty; expected a header 'id,<parameter or state>...,data'");
  std::size_t id_col = header.size(), data_col = header.size();
  for (std::size_t c = 0; c < header.size(); ++c) {
    for (std::size_t d = 0; d < c; ++d)
      if (header[d] == header[c])
        throw Error(at(lineno, c + 1) + ": column '" + header[c] + "' appears twice in the header (columns " +
                    std::to_string(d + 1) + " and " + std::to_string(c + 1) + ")");
    if (header[c] == "id") id_col = c;
    else if (header[c] == "data") data_col = c;
    else if (std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), header[c]) == cfg.parameter_names.end() &&
             std::find(cfg.state_names.begin(), cfg.state_names.end(), header[c]) == cfg.state_names.end())
      throw Error(at(lineno, c + 1) + ": column '" + header[c] + "': " + unknown(header[c]) +
                  " (or the columns id and data)");
  }
  if (id_col == header.size())
    throw Error(at(lineno, 0) + ": the header has no 'id' column (each condition needs a name)");
  if (data_col == header.size())
    throw Error(at(lineno, 0) + ": the header has no 'data' column (each condition needs a CSV file of observations)");
  while (std::getline(in, line)) {
    ++lineno;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto cells = split(t);
    if (cells.size() != header.size())
      throw Error(at(lineno, 0) + ": expected " + std::to_string(header.size()) + " cells (" + join(header) +
                  "), got " + std::to_string(cells.size()));
    if (cells[id_col].empty()) throw Error(at(lineno, id_col + 1) + ": column 'id': the condition has no id");
    ConditionConfig c = fresh(cells[id_col], lineno);
    for (const ConditionConfig& o : cfg.conditions)
      if (o.id == c.id)
        throw Error(at(lineno, id_col + 1) + ": column 'id': duplicate condition id '" + c.id + "' (first at line " +
                    std::to_string(o.line) + "); every condition needs its own id");
    for (std::size_t col = 0; col < header.size(); ++col) {
      if (col == id_col || col == data_col || cells[col].empty()) continue;
      const Fail fail = [&](const std::string& m) {
        throw Error(at(lineno, col + 1) + ": column '" + header[col] + "' (condition '" + c.id + "'): " + m);
      };
      const auto state = std::find(cfg.state_names.begin(), cfg.state_names.end(), header[col]);
      if (state != cfg.state_names.end())
        set_initial(c, static_cast<std::size_t>(state - cfg.state_names.begin()), cells[col], fail);
      else
        set_parameter(c, header[col], cells[col], fail);
    }
    if (cells[data_col].empty())
      throw Error(at(lineno, data_col + 1) + ": column 'data': condition '" + c.id +
                  "' has no data file; every condition needs observations");
    // A data file named in the table is relative to the table.
    const std::filesystem::path df(cells[data_col]);
    const std::string data_file =
        df.is_relative() ? (std::filesystem::path(table).parent_path() / df).string() : cells[data_col];
    set_data(c, data_file, node, "conditions", [&](const std::string& m) {
      throw Error(at(lineno, data_col + 1) + ": column 'data' (condition '" + c.id + "'): " + m);
    });
    cfg.conditions.push_back(std::move(c));
  }
  if (cfg.conditions.empty()) throw Error(table + ": no condition rows after the header");
}

}  // namespace

ode::IntegratorOptions integrator_options(const RunConfig& cfg) {
  ode::IntegratorOptions opt = cfg.integrator;
  std::vector<double>& land = opt.landing_times;
  if (cfg.objective.present)
    land.insert(land.end(), cfg.objective.data_times.begin(), cfg.objective.data_times.end());
  const bool events = !cfg.events.empty() || (cfg.sbml && cfg.sbml->equations.n_events() > 0);
  if (opt.fixed_step() || events)
    land.insert(land.end(), cfg.output_times.begin(), cfg.output_times.end());
  std::sort(land.begin(), land.end());
  land.erase(std::unique(land.begin(), land.end()), land.end());
  return opt;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(path + ": input file not found");
  if (std::filesystem::is_directory(path, ec))
    throw Error(path + ": is a directory, expected a YAML input file");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open input file for reading");
  std::stringstream text;
  text << in.rdbuf();
  return load_run_config_text(text.str(), path, overrides);
}

namespace {

std::string line_of(const YAML::Mark& m) { return std::to_string(m.line + 1); }

/// A key's text for duplicate detection: scalars by their text, other keys
/// (rare: a map or list used as a key) are not compared.
void refuse_duplicate_keys(const YAML::Node& root, const std::string& path) {
  struct Item {
    YAML::Node node;
    std::string where;  // dotted key path, for the message
  };
  std::vector<Item> todo{{root, ""}};
  while (!todo.empty()) {
    Item item = std::move(todo.back());
    todo.pop_back();
    if (item.node.IsMap()) {
      std::map<std::string, YAML::Mark> seen;
      for (auto it = item.node.begin(); it != item.node.end(); ++it) {
        const std::string child_path =
            it->first.IsScalar()
                ? (item.where.empty() ? it->first.Scalar() : item.where + "." + it->first.Scalar())
                : item.where;
        if (it->first.IsScalar()) {
          const auto [pos, fresh] = seen.emplace(it->first.Scalar(), it->first.Mark());
          if (!fresh)
            throw Error(path + ":" + line_of(it->first.Mark()) + ": the key '" + child_path +
                        "' appears twice in the same map (lines " + line_of(pos->second) +
                        " and " + line_of(it->first.Mark()) +
                        "); YAML would silently keep one of them — remove the other");
        }
        todo.push_back({it->second, child_path});
      }
    } else if (item.node.IsSequence()) {
      std::size_t i = 0;
      for (auto it = item.node.begin(); it != item.node.end(); ++it, ++i)
        todo.push_back({*it, item.where + "[" + std::to_string(i) + "]"});
    }
  }
}

}  // namespace

namespace {

/// Where each document of a YAML stream starts (no nodes are built).
struct DocumentMarks : YAML::EventHandler {
  YAML::Mark start = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

YAML::Node load_yaml_document(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
    // A second document? Asked of the parser directly, one document at a
    // time: YAML::LoadAll can loop without end on malformed text (found by
    // fuzzing, yaml-cpp 0.7).
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentMarks first, second;
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second)) {
      const std::string at = second.start.is_null() ? path : path + ":" + line_of(second.start);
      throw Error(at + ": a second YAML document" +
                  (second.start.is_null() ? std::string() : " (line " + line_of(second.start) + ")") +
                  " follows the first" +
                  (first.start.is_null() ? std::string() : " (line " + line_of(first.start) + ")") +
                  "; costate reads one document per input file — remove the '---' separator "
                  "and merge the settings, or split them into two files");
    }
  } catch (const YAML::DeepRecursion& e) {
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                std::to_string(e.mark.column + 1) + ": the YAML nests deeper than " +
                std::to_string(e.depth()) +
                " levels, the most its parser (yaml-cpp) accepts; costate's inputs need a few");
  } catch (const YAML::ParserException& e) {
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                std::to_string(e.mark.column + 1) + ": malformed YAML: " + e.msg);
  }
  refuse_duplicate_keys(root, path);
  return root;
}

namespace {

/// "t = 0, x = 1, k = 2": the point an expression was evaluated at.
std::string describe_point(const std::vector<std::string>& names, const std::vector<double>& values) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i ? ", " : "") + names[i] + " = " + fmt(values[i]);
  return out;
}

/// `model.algebraic` (issue 32: DAEs): a map unknown -> residual, each
/// unknown an algebraic state without a derivative, appended after the
/// differential states (`model.states`), its residual g with 0 = g in
/// cfg.equations. The unknown's initial value (initial_state) is a guess
/// that integrator.method = idas makes consistent.
void read_algebraic(const Context& ctx, const YAML::Node& model, RunConfig& cfg) {
  const YAML::Node alg = model["algebraic"];
  if (!alg) return;
  ctx.expect_map(alg, "model.algebraic");
  if (alg.size() == 0)
    ctx.fail(alg, "model.algebraic", "expected a map (unknown -> residual expression), got an empty map");
  for (auto it = alg.begin(); it != alg.end(); ++it) {
    const std::string name = ctx.string(it->first, "model.algebraic");
    const std::string key = "model.algebraic." + name;
    if (std::find(cfg.state_names.begin(), cfg.state_names.end(), name) != cfg.state_names.end())
      ctx.fail(it->first, key,
               "'" + name + "' is already a state (model.states) or listed twice: an algebraic "
               "unknown has a residual here and no derivative in model.equations");
    if (!it->second.IsScalar())
      ctx.fail(it->second, key, "expected a residual expression (0 = residual), got " + describe(it->second));
    cfg.algebraic_states.push_back(cfg.state_names.size());
    cfg.state_names.push_back(name);
    cfg.equations.push_back(it->second.Scalar());
  }
}

/// Initial values and, for a model typed as equations, the right-hand sides
/// at the initial point must be finite: a NaN or an infinity there is an
/// error at the expression's line (before any integrator blames its step).
void check_initial_point(const YAML::Node& root, const Context& ctx, const RunConfig& cfg) {
  const YAML::Node y0 = root["initial_state"];
  for (std::size_t i = 0; i < cfg.initial_state.size(); ++i) {
    if (std::isfinite(cfg.initial_state[i])) continue;
    const std::string& name = cfg.state_names[i];
    YAML::Node at = y0;
    if (y0 && y0.IsMap() && y0[name]) at = y0[name];
    if (y0 && y0.IsSequence() && i < y0.size()) at = y0[i];
    ctx.fail(at, "initial_state." + name,
             "the initial value of '" + name + "' is " + fmt(cfg.initial_state[i]) +
                 " (not a finite number) at t = " + fmt(cfg.t_start) +
                 "; check the expression and the parameters it uses");
  }
  if (!cfg.equation_model() || cfg.sbml) return;
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.state_names.begin(), cfg.state_names.end());
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  std::vector<double> values{cfg.t_start};
  values.insert(values.end(), cfg.initial_state.begin(), cfg.initial_state.end());
  values.insert(values.end(), cfg.parameters.begin(), cfg.parameters.end());
  const YAML::Node eqs = root["model"]["equations"];
  for (std::size_t i = 0; i < cfg.equations.size(); ++i) {
    const std::string& name = cfg.state_names[i];
    const bool algebraic = std::find(cfg.algebraic_states.begin(), cfg.algebraic_states.end(), i) !=
                           cfg.algebraic_states.end();
    const std::string key = (algebraic ? "model.algebraic." : "model.equations.") + name;
    const double v = expr::Program::compile(cfg.equations[i], vars, key)
                         .evaluate(std::span<const double>(values));
    if (std::isfinite(v)) continue;
    const YAML::Node at = algebraic ? root["model"]["algebraic"] : eqs;
    ctx.fail(at && at[name] ? at[name] : at, key,
             "'" + cfg.equations[i] + "' evaluates to " + fmt(v) + " at the initial point (" +
                 describe_point(vars, values) +
                 "); every right-hand side must be finite there — check for a division by zero, "
                 "log or sqrt of a non-positive value, or an overflow");
  }
}

/// A parameter that no equation, initial value or objective of a model typed
/// as equations uses: a warning (its gradient is zero; a typo is likely).
void warn_unused_parameters(const YAML::Node& root, const Context& ctx, RunConfig& cfg) {
  if (!cfg.equation_model() || cfg.sbml || cfg.parameter_names.empty()) return;
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.state_names.begin(), cfg.state_names.end());
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  std::vector<std::string> texts = cfg.equations;
  texts.push_back(cfg.objective.terminal);
  texts.push_back(cfg.objective.integral);
  for (const auto& e : cfg.initial_state_expressions) texts.push_back(e);
  std::vector<bool> used(cfg.parameter_names.size(), false);
  // Conditions: their initial values, and the parameters they take values from.
  for (const ConditionConfig& c : cfg.conditions) {
    for (const auto& e : c.initial_state) texts.push_back(e);
    for (std::size_t k = 0; k < c.parameter_source.size(); ++k)
      if (c.parameter_source[k] >= 0 && c.parameter_source[k] != static_cast<long>(k))
        used[static_cast<std::size_t>(c.parameter_source[k])] = true;
  }
  for (const EventConfig& ev : cfg.events) {  // what the events use counts as used
    for (const auto& [state, text] : ev.assign) texts.push_back(text);
    texts.push_back(ev.delay);
    texts.push_back(ev.priority);
    for (const auto& r : ode::Condition::parse(ev.trigger, vars, "parameter use").roots)
      for (std::size_t j = 0; j < used.size(); ++j)
        if (r.uses(static_cast<std::uint32_t>(1 + cfg.state_names.size() + j))) used[j] = true;
  }
  for (const auto& text : texts) {
    if (text.empty()) continue;
    // Initial values use t and the parameters only: the same names, shifted.
    const expr::Program p = expr::Program::compile(text, vars, "parameter use");
    for (std::size_t j = 0; j < used.size(); ++j)
      if (p.uses(static_cast<std::uint32_t>(1 + cfg.state_names.size() + j))) used[j] = true;
  }
  const YAML::Node params = root["parameters"];
  for (std::size_t j = 0; j < used.size(); ++j) {
    if (used[j]) continue;
    const std::string& name = cfg.parameter_names[j];
    cfg.warnings.push_back(ctx.where(params && params.IsMap() ? params[name] : params,
                                     "parameters." + name) +
                           ": parameter '" + name +
                           "' is used by no equation, event, initial value or objective (its gradient "
                           "is zero; a misspelt name?)");
  }
}


// ---- The `events:` section (a model typed as equations).

/// The variables an event's expressions use: t, the states, the parameters.
std::vector<std::string> event_variables(const RunConfig& cfg) {
  std::vector<std::string> vars{"t"};
  vars.insert(vars.end(), cfg.state_names.begin(), cfg.state_names.end());
  vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
  return vars;
}

/// An expression key of an event (a number or an expression text).
std::string event_expression(const Context& ctx, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar() || node.Scalar().empty())
    ctx.fail(node, key, "expected an expression or a number, got " + describe(node));
  return node.Scalar();
}

/// Reads `events:` into cfg.events and compiles every expression now, so
/// that an error names the event's line and key.
void parse_events(const YAML::Node& root, const Context& ctx, RunConfig& cfg) {
  const YAML::Node events = root["events"];
  if (!events) return;
  if (cfg.sbml)
    ctx.fail(events, "events",
             "an SBML model's events come from its file (<event> elements); remove 'events'");
  if (!cfg.equation_model())
    ctx.fail(events, "events",
             "events need a model typed as equations (model: {states, equations}); the built-in "
             "model '" + cfg.model + "' has none");
  if (!events.IsSequence())
    ctx.fail(events, "events",
             "expected a list of events (each a map with 'trigger' and 'assign'), got " +
                 describe(events));
  const std::vector<std::string> vars = event_variables(cfg);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const YAML::Node ev = events[i];
    const std::string key = "events[" + std::to_string(i) + "]";
    ctx.expect_map(ev, key);
    ctx.check_keys(ev, key, {"name", "trigger", "assign", "delay", "priority", "persistent",
                             "initial_value", "use_values_from_trigger_time"});
    EventConfig e;
    if (ev["name"]) e.name = ctx.string(ev["name"], key + ".name");
    if (!ev["trigger"])
      ctx.fail(ev, key, "missing required key 'trigger' (a condition, e.g. 'x >= theta')");
    e.trigger = event_expression(ctx, ev["trigger"], key + ".trigger");
    try {
      ode::Condition::parse(e.trigger, vars, key + ".trigger");
    } catch (const Error& err) {
      ctx.fail(ev["trigger"], key + ".trigger", err.what());
    }
    const YAML::Node assign = ev["assign"];
    if (!assign) ctx.fail(ev, key, "missing required key 'assign' (state -> expression)");
    if (!assign.IsMap() || assign.size() == 0)
      ctx.fail(assign, key + ".assign",
               "expected a map state -> expression (at least one), got " + describe(assign));
    ctx.check_keys(assign, key + ".assign", cfg.state_names);
    for (auto it = assign.begin(); it != assign.end(); ++it) {
      const std::string state = it->first.Scalar();
      const std::string k = key + ".assign." + state;
      e.assign.emplace_back(state, event_expression(ctx, it->second, k));
      try {
        expr::Program::compile(e.assign.back().second, vars, k);
      } catch (const Error& err) {
        ctx.fail(it->second, k, err.what());
      }
    }
    for (const char* which : {"delay", "priority"}) {
      const YAML::Node n = ev[which];
      if (!n) continue;
      const std::string k = key + "." + which;
      std::string& text = std::string(which) == "delay" ? e.delay : e.priority;
      text = event_expression(ctx, n, k);
      try {
        expr::Program::compile(text, vars, k);
      } catch (const Error& err) {
        ctx.fail(n, k, err.what());
      }
    }
    if (ev["persistent"]) e.persistent = ctx.boolean(ev["persistent"], key + ".persistent");
    if (ev["initial_value"])
      e.initial_value = ctx.boolean(ev["initial_value"], key + ".initial_value");
    if (ev["use_values_from_trigger_time"])
      e.use_values_from_trigger_time = ctx.boolean(ev["use_values_from_trigger_time"],
                                                   key + ".use_values_from_trigger_time");
    cfg.events.push_back(std::move(e));
  }
}

}  // namespace

RunConfig load_run_config_text(const std::string& text, const std::string& path,
                               const std::vector<std::string>& overrides) {
  Context ctx;
  ctx.path = path;
  RunConfig cfg;
  cfg.input_path = path;

  // 1. Parse.
  YAML::Node root = load_yaml_document(text, path);
  if (root.IsNull())
    throw Error(path + ": the file is empty; expected a map with at least 'model' and 'time'");
  if (!root.IsMap())
    throw Error(ctx.where(root, "") + ": expected a map of settings at the top level, got " +
                describe(root));
  for (const auto& o : overrides) apply_override(root, o, ctx);

  ctx.check_keys(root, "", {"description", "model", "parameters", "initial_state", "time",
                            "integrator", "output", "objective", "sensitivity", "calibration",
                            "conditions", "events"});

  // 2. Model: a built-in name, or states with one equation each.
  if (root["description"]) cfg.description = ctx.string(root["description"], "description");
  const YAML::Node model = root["model"];
  if (!model) throw Error(path + ": missing required key 'model' (a built-in model name, or a map "
                                 "with 'states' and 'equations')");
  const YAML::Node params = root["parameters"];
  if (params) ctx.expect_map(params, "parameters");
  if (model.IsMap() && model["sbml"]) {
    // An SBML file (path relative to the input file): its ids name the
    // states and parameters; `parameters:` overrides the SBML values.
    ctx.check_keys(model, "model", {"sbml"});
    const std::filesystem::path file = std::filesystem::path(path).parent_path() /
                                       ctx.string(model["sbml"], "model.sbml");
    cfg.sbml_file = std::filesystem::absolute(file).lexically_normal().string();
    try {
      cfg.sbml = std::make_shared<const sbml::Model>(sbml::read_file(cfg.sbml_file));
    } catch (const Error& e) {
      ctx.fail(model["sbml"], "model.sbml", e.what());
    }
    if (cfg.sbml->state_names.empty())
      ctx.fail(model["sbml"], "model.sbml",
               cfg.sbml_file + ": the model has no state (its symbols are all assignments); "
               "the commands integrate states (sbml::Model::symbol_values evaluates such a model)");
    cfg.model = "sbml";
    cfg.state_names = cfg.sbml->state_names;
    cfg.parameter_names = cfg.sbml->parameter_names;
    cfg.parameters = cfg.sbml->parameters;
    cfg.initial_state.assign(cfg.state_names.size(), std::numeric_limits<double>::quiet_NaN());
    if (params) {
      ctx.check_keys(params, "parameters", cfg.parameter_names);
      for (std::size_t i = 0; i < cfg.parameter_names.size(); ++i)
        if (const YAML::Node v = params[cfg.parameter_names[i]])
          cfg.parameters[i] = ctx.number(v, "parameters." + cfg.parameter_names[i]);
    }
  } else if (model.IsMap()) {
    ctx.check_keys(model, "model", {"states", "equations", "algebraic", "sbml"});
    // An all-algebraic model (issue 32: 0 = g(t, z, p) only) has
    // `algebraic:` and no differential state: `states` and `equations` may
    // then be absent or empty.
    const YAML::Node states = model["states"];
    const bool algebraic_only = model["algebraic"] && (!states || (states.IsSequence() && states.size() == 0));
    if (!states && !algebraic_only)
      ctx.fail(model, "model", "missing required key 'states' (a list of names; or 'algebraic' "
                               "alone for a model of algebraic unknowns only)");
    if (!algebraic_only && (!states.IsSequence() || states.size() == 0))
      ctx.fail(states, "model.states", "expected a non-empty list of state names, got " + describe(states));
    for (std::size_t i = 0; states && i < states.size(); ++i) {
      const std::string name = ctx.string(states[i], "model.states[" + std::to_string(i) + "]");
      if (std::find(cfg.state_names.begin(), cfg.state_names.end(), name) != cfg.state_names.end())
        ctx.fail(states[i], "model.states[" + std::to_string(i) + "]", "duplicate state '" + name + "'");
      cfg.state_names.push_back(name);
    }
    const YAML::Node eqs = model["equations"];
    if (!eqs && !algebraic_only)
      ctx.fail(model, "model", "missing required key 'equations' (state -> expression)");
    if (eqs) {
      ctx.expect_map(eqs, "model.equations");
      ctx.check_keys(eqs, "model.equations", cfg.state_names);
    }
    for (const auto& name : cfg.state_names) {
      if (!eqs[name]) ctx.fail(eqs, "model.equations", "no equation for state '" + name + "'");
      const YAML::Node e = eqs[name];
      if (!e.IsScalar()) ctx.fail(e, "model.equations." + name, "expected an expression, got " + describe(e));
      cfg.equations.push_back(e.Scalar());
    }
    read_algebraic(ctx, model, cfg);
    cfg.model = "equations";
    // Parameters: every key of the parameters map, in file order.
    if (params) {
      for (auto it = params.begin(); it != params.end(); ++it) {
        const std::string name = it->first.Scalar();
        cfg.parameter_names.push_back(name);
        cfg.parameters.push_back(ctx.number(it->second, "parameters." + name));
      }
    }
    cfg.initial_state.assign(cfg.state_names.size(), std::numeric_limits<double>::quiet_NaN());
    // Compile now, so that expression errors carry the file's location.
    try {
      ode::EquationModel check(cfg.state_names, cfg.parameter_names, cfg.equations);
    } catch (const Error& e) {
      // An algebraic residual's error names its unknown (model.equations.<z>).
      const YAML::Node alg = model["algebraic"];
      for (std::size_t i : cfg.algebraic_states)
        if (std::string(e.what()).find("model.equations." + cfg.state_names[i] + ":") !=
            std::string::npos)
          ctx.fail(alg[cfg.state_names[i]], "model.algebraic." + cfg.state_names[i],
                   std::string("invalid residual: ") + e.what());
      ctx.fail(eqs, "model.equations", std::string("invalid equation: ") + e.what());
    }
  } else {
    cfg.model = ctx.string(model, "model");
    std::vector<std::string> model_names;
    for (const auto& m : ode::builtin_models()) model_names.push_back(m.name);
    if (std::find(model_names.begin(), model_names.end(), cfg.model) == model_names.end()) {
      std::string msg = "unknown model '" + cfg.model + "'";
      const std::string near = nearest(cfg.model, model_names);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      ctx.fail(model, "model", msg + " Built-in models: " + join(model_names) +
                                   " (or give a map with 'states' and 'equations')");
    }
    const ode::ModelInfo& info = ode::builtin_model(cfg.model);
    cfg.state_names = info.state_names;
    cfg.parameter_names = info.parameter_names;
    cfg.parameters = info.default_parameters;
    cfg.initial_state = info.default_initial_state;
    // 3. Parameters: name -> value; unnamed ones keep the model's defaults.
    if (params) {
      ctx.check_keys(params, "parameters", info.parameter_names);
      for (std::size_t i = 0; i < info.parameter_names.size(); ++i) {
        const std::string& name = info.parameter_names[i];
        if (params[name]) cfg.parameters[i] = ctx.number(params[name], "parameters." + name);
      }
    }
  }

  // 4. Initial state: a map name -> value, or a list with one value per
  // state; a value may be an expression of t and the parameters.
  cfg.initial_state_expressions.assign(cfg.state_names.size(), "");
  if (cfg.sbml) {  // the SBML initial values: numbers, or expressions of t and the parameters
    for (std::size_t i = 0; i < cfg.state_names.size(); ++i) {
      const expr::Node& y0 = cfg.sbml->initial_state[i];
      if (y0.is_constant()) cfg.initial_state[i] = y0.value;
      else cfg.initial_state_expressions[i] = cfg.sbml->initial_state_text[i];
    }
  }
  auto initial_value = [&](const YAML::Node& v, std::size_t i, const std::string& key) {
    double x = 0.0;
    if (v.IsScalar() && YAML::convert<double>::decode(v, x)) {
      cfg.initial_state[i] = ctx.number(v, key);
      cfg.initial_state_expressions[i].clear();  // a number replaces an SBML initial expression
      return;
    }
    if (!v.IsScalar()) ctx.fail(v, key, "expected a number or an expression, got " + describe(v));
    std::vector<std::string> vars{"t"};
    vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
    try {
      (void)expr::Program::compile(v.Scalar(), vars, key);
    } catch (const Error& e) {
      ctx.fail(v, key, std::string("invalid expression (it may use t and the parameters): ") + e.what());
    }
    cfg.initial_state_expressions[i] = v.Scalar();
  };
  if (const YAML::Node y0 = root["initial_state"]) {
    if (y0.IsSequence()) {
      if (y0.size() != cfg.state_names.size())
        ctx.fail(y0, "initial_state",
                 "has " + std::to_string(y0.size()) + " values but model '" + cfg.model +
                     "' has " + std::to_string(cfg.state_names.size()) + " states (" +
                     join(cfg.state_names) + ")");
      for (std::size_t i = 0; i < y0.size(); ++i)
        initial_value(y0[i], i, "initial_state[" + std::to_string(i) + "]");
    } else if (y0.IsMap()) {
      ctx.check_keys(y0, "initial_state", cfg.state_names);
      for (std::size_t i = 0; i < cfg.state_names.size(); ++i) {
        const std::string& name = cfg.state_names[i];
        if (y0[name]) initial_value(y0[name], i, "initial_state." + name);
      }
    } else {
      ctx.fail(y0, "initial_state",
               "expected a map (state name -> value) or a list of " +
                   std::to_string(cfg.state_names.size()) + " numbers, got " + describe(y0));
    }
  }
  for (std::size_t i = 0; i < cfg.state_names.size(); ++i) {
    if (std::isnan(cfg.initial_state[i]) && cfg.initial_state_expressions[i].empty())
      throw Error(ctx.where(root["initial_state"], "initial_state") + ": initial_state: no value for state '" +
                  cfg.state_names[i] + "' (an equation model needs one for every state)");
  }
  // 5. Time interval and output times.
  const YAML::Node time = root["time"];
  if (!time) throw Error(path + ": missing required key 'time' (with at least 'end')");
  ctx.expect_map(time, "time");
  ctx.check_keys(time, "time", {"start", "end", "output_every", "outputs"});
  if (time["start"]) cfg.t_start = ctx.number(time["start"], "time.start");
  if (!time["end"]) ctx.fail(time, "time", "missing required key 'end'");
  cfg.t_end = ctx.number(time["end"], "time.end");
  if (!(cfg.t_end > cfg.t_start))
    ctx.fail(time["end"], "time.end",
             "must be greater than time.start: start = " + fmt(cfg.t_start) +
                 ", end = " + fmt(cfg.t_end));
  if (time["output_every"] && time["outputs"])
    ctx.fail(time["outputs"], "time.outputs",
             "give either 'output_every' or 'outputs', not both");
  if (time["output_every"]) {
    const double every = ctx.positive(time["output_every"], "time.output_every");
    if ((cfg.t_end - cfg.t_start) / every > 1e7)
      ctx.fail(time["output_every"], "time.output_every",
               "would produce more than 1e7 outputs; choose a larger spacing");
    cfg.output_times = output_grid(cfg.t_start, cfg.t_end, every);
  } else if (const YAML::Node outs = time["outputs"]) {
    if (!outs.IsSequence() || outs.size() == 0)
      ctx.fail(outs, "time.outputs", "expected a non-empty list of times, got " + describe(outs));
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const std::string key = "time.outputs[" + std::to_string(j) + "]";
      const double tj = ctx.number(outs[j], key);
      if (tj < cfg.t_start || tj > cfg.t_end)
        ctx.fail(outs[j], key,
                 "output time " + fmt(tj) + " lies outside [" + fmt(cfg.t_start) + ", " +
                     fmt(cfg.t_end) + "]");
      if (!cfg.output_times.empty() && tj <= cfg.output_times.back())
        ctx.fail(outs[j], key,
                 "output times must be strictly ascending (" + fmt(cfg.output_times.back()) +
                     " then " + fmt(tj) + ")");
      cfg.output_times.push_back(tj);
    }
  } else {
    cfg.output_times = {cfg.t_start, cfg.t_end};
  }

  evaluate_initial_state(cfg);
  check_initial_point(root, ctx, cfg);
  parse_events(root, ctx, cfg);

  // 6. Integrator.
  ode::IntegratorOptions& opt = cfg.integrator;
  if (const YAML::Node integ = root["integrator"]) {
    ctx.expect_map(integ, "integrator");
    ctx.check_keys(integ, "integrator",
                   {"method", "rtol", "atol", "dt", "adaptive", "dt_max", "dt_min", "max_steps",
                    "newton_tol", "newton_max_iterations", "cvodes_linear_solver"});
    if (integ["method"]) {
      const std::string m = ctx.string(integ["method"], "integrator.method");
      std::vector<std::string> names;
      for (ode::Method x : ode::all_methods()) names.push_back(ode::to_string(x));
      auto it = std::find(names.begin(), names.end(), m);
      if (it == names.end()) {
        std::string msg = "unknown method '" + m + "'";
        const std::string near = nearest(m, names);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(integ["method"], "integrator.method", msg + " Valid methods: " + join(names));
      }
      opt.method = ode::method_from_string(m);
    }
    if (integ["rtol"]) opt.rtol = ctx.positive(integ["rtol"], "integrator.rtol");
    if (const YAML::Node atol = integ["atol"]) {
      if (atol.IsScalar()) {
        opt.atol = ctx.positive(atol, "integrator.atol");
      } else if (atol.IsSequence()) {
        if (atol.size() != cfg.state_names.size())
          ctx.fail(atol, "integrator.atol",
                   "has " + std::to_string(atol.size()) + " values but the model has " +
                       std::to_string(cfg.state_names.size()) + " states (" +
                       join(cfg.state_names) + "); give one number or one per state");
        for (std::size_t i = 0; i < atol.size(); ++i)
          opt.atol_per_state.push_back(
              ctx.positive(atol[i], "integrator.atol[" + std::to_string(i) + "]"));
      } else if (atol.IsMap()) {
        ctx.check_keys(atol, "integrator.atol", cfg.state_names);
        opt.atol_per_state.assign(cfg.state_names.size(), opt.atol);
        for (std::size_t i = 0; i < cfg.state_names.size(); ++i) {
          const std::string& name = cfg.state_names[i];
          if (atol[name])
            opt.atol_per_state[i] = ctx.positive(atol[name], "integrator.atol." + name);
        }
      } else {
        ctx.fail(atol, "integrator.atol",
                 "expected a number, a list with one per state, or a map state -> number, got " +
                     describe(atol));
      }
    }
    if (integ["dt"]) opt.dt = ctx.positive(integ["dt"], "integrator.dt");
    if (integ["adaptive"]) opt.adaptive = ctx.boolean(integ["adaptive"], "integrator.adaptive");
    if (integ["dt_max"]) opt.dt_max = ctx.non_negative(integ["dt_max"], "integrator.dt_max");
    if (integ["dt_min"]) opt.dt_min = ctx.non_negative(integ["dt_min"], "integrator.dt_min");
    if (integ["newton_tol"]) opt.newton_tol = ctx.positive(integ["newton_tol"], "integrator.newton_tol");
    if (integ["newton_max_iterations"]) {
      const long long n = ctx.integer(integ["newton_max_iterations"], "integrator.newton_max_iterations");
      if (n <= 0 || n > 1000)
        ctx.fail(integ["newton_max_iterations"], "integrator.newton_max_iterations",
                 "must be an integer in [1, 1000], got " + std::to_string(n));
      opt.newton_max_iterations = static_cast<int>(n);
    }
    if (integ["max_steps"]) {
      const long long n = ctx.integer(integ["max_steps"], "integrator.max_steps");
      if (n <= 0)
        ctx.fail(integ["max_steps"], "integrator.max_steps",
                 "must be a positive integer, got " + std::to_string(n));
      opt.max_steps = n;
    }
    if (integ["cvodes_linear_solver"]) {
      const std::string v = ctx.string(integ["cvodes_linear_solver"], "integrator.cvodes_linear_solver");
      std::vector<std::string> names;
      for (ode::CvodesLinearSolver x : ode::all_cvodes_linear_solvers()) names.push_back(ode::to_string(x));
      if (std::find(names.begin(), names.end(), v) == names.end()) {
        std::string msg = "unknown linear solver '" + v + "'";
        const std::string near = nearest(v, names);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(integ["cvodes_linear_solver"], "integrator.cvodes_linear_solver",
                 msg + " Valid values: " + join(names));
      }
      opt.cvodes_linear_solver = ode::cvodes_linear_solver_from_string(v);
    }
    if (opt.method == ode::Method::Bdf && !opt.adaptive)
      ctx.fail(integ["adaptive"], "integrator.adaptive",
               "adaptive: false is not available for 'bdf' (its steps and orders are chosen by "
               "its error control); use sdirk3, backward_euler or crank_nicolson for fixed "
               "implicit steps");
    if (opt.fixed_step() && opt.dt <= 0.0)
      ctx.fail(integ, "integrator",
               "method '" + ode::to_string(opt.method) +
                   (ode::is_adaptive(opt.method) ? "' with adaptive: false" : "'") +
                   " takes fixed steps: set integrator.dt (> 0)");
  } else {
    // Defaults only.
  }
  opt.validate(cfg.state_names.size());

  // 7. Objective and sensitivity settings (used by sensitivity/gradcheck).
  if (const YAML::Node obj = root["objective"]) {
    ctx.expect_map(obj, "objective");
    ctx.check_keys(obj, "objective", {"terminal", "integral", "data"});
    ObjectiveConfig& oc = cfg.objective;
    oc.present = true;
    std::vector<std::string> vars{"t"};
    vars.insert(vars.end(), cfg.state_names.begin(), cfg.state_names.end());
    vars.insert(vars.end(), cfg.parameter_names.begin(), cfg.parameter_names.end());
    auto expression = [&](const char* key, std::string& out) {
      if (!obj[key]) return;
      const YAML::Node e = obj[key];
      const std::string full = std::string("objective.") + key;
      if (!e.IsScalar()) ctx.fail(e, full, "expected an expression, got " + describe(e));
      try {
        (void)expr::Program::compile(e.Scalar(), vars, full);
      } catch (const Error& err) {
        ctx.fail(e, full, std::string("invalid expression: ") + err.what());
      }
      out = e.Scalar();
    };
    expression("terminal", oc.terminal);
    expression("integral", oc.integral);
    if (const YAML::Node data = obj["data"]) {
      ctx.expect_map(data, "objective.data");
      ctx.check_keys(data, "objective.data", {"file", "weights", "noise"});
      if (!data["file"]) ctx.fail(data, "objective.data", "missing required key 'file' (a CSV file)");
      std::string file = ctx.string(data["file"], "objective.data.file");
      // Relative data paths are relative to the input file.
      const std::filesystem::path fp(file);
      if (fp.is_relative()) file = (std::filesystem::path(path).parent_path() / fp).string();
      oc.data_file = file;
      try {
        read_csv_data(file, cfg.state_names, oc.data_times, oc.data, &cfg.warnings);
      } catch (const Error& e) {
        ctx.fail(data["file"], "objective.data.file", e.what());
      }
      for (std::size_t k = 0; k < oc.data_times.size(); ++k) {
        const double tk = oc.data_times[k];
        if (tk < cfg.t_start || tk > cfg.t_end)
          ctx.fail(data["file"], "objective.data.file",
                   file + ": data time " + fmt(tk) + " (row " + std::to_string(k + 1) +
                       ") lies outside the simulated interval [" + fmt(cfg.t_start) + ", " +
                       fmt(cfg.t_end) + "]");
      }
      oc.weights.assign(cfg.state_names.size(), 1.0);
      if (data["weights"] && data["noise"])
        ctx.fail(data["noise"], "objective.data.noise", "give either 'weights' or 'noise', not both");
      if (const YAML::Node w = data["weights"]) {
        ctx.expect_map(w, "objective.data.weights");
        ctx.check_keys(w, "objective.data.weights", cfg.state_names);
        for (std::size_t i = 0; i < cfg.state_names.size(); ++i)
          if (w[cfg.state_names[i]])
            oc.weights[i] = ctx.non_negative(w[cfg.state_names[i]], "objective.data.weights." + cfg.state_names[i]);
      }
      if (const YAML::Node nz = data["noise"]) {
        ctx.expect_map(nz, "objective.data.noise");
        ctx.check_keys(nz, "objective.data.noise", cfg.state_names);
        for (std::size_t i = 0; i < cfg.state_names.size(); ++i)
          if (nz[cfg.state_names[i]]) {
            const double sigma = ctx.positive(nz[cfg.state_names[i]], "objective.data.noise." + cfg.state_names[i]);
            oc.weights[i] = 1.0 / (sigma * sigma);
          }
      }
    }
    if (oc.terminal.empty() && oc.integral.empty() && oc.data_file.empty())
      ctx.fail(obj, "objective", "give at least one of 'terminal', 'integral' or 'data'");
  }
  if (const YAML::Node sens = root["sensitivity"]) {
    ctx.expect_map(sens, "sensitivity");
    ctx.check_keys(sens, "sensitivity", {"method", "wrt", "checkpointing", "adjoint_rtol",
                                         "adjoint_atol", "checkpoint_steps", "interpolation"});
    SensitivityConfig& sc = cfg.sensitivity;
    sc.present = true;
    if (sens["method"]) {
      std::vector<std::string> methods;
      for (ode::SensitivityKind k : ode::all_sensitivity_kinds()) methods.push_back(ode::to_string(k));
      const std::string name = ctx.string(sens["method"], "sensitivity.method");
      if (std::find(methods.begin(), methods.end(), name) == methods.end()) {
        std::string msg = "unknown method '" + name + "'";
        const std::string near = nearest(name, methods);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(sens["method"], "sensitivity.method", msg + " Valid methods: " + join(methods));
      }
      sc.method = ode::sensitivity_kind_from_string(name);  // the one parse
      // A method named in the file must combine with its integrator (ode::supports).
      if (const ode::Support s = ode::supports(sc.method, cfg.integrator, 1); !s) {
        const YAML::Node im = root["integrator"] ? root["integrator"]["method"] : YAML::Node();
        ctx.fail(sens["method"], "sensitivity.method",
                 s.message + " (integrator.method: " + ctx.where(im, "integrator.method") + ")");
      }
    }
    if (sens["adjoint_rtol"]) sc.adjoint_rtol = ctx.positive(sens["adjoint_rtol"], "sensitivity.adjoint_rtol");
    if (sens["adjoint_atol"]) sc.adjoint_atol = ctx.positive(sens["adjoint_atol"], "sensitivity.adjoint_atol");
    if (const YAML::Node cs = sens["checkpoint_steps"]; cs) {
      if (cs.IsScalar() && cs.Scalar() == "auto") {
        sc.checkpoint_steps = 0;
      } else {
        long long v = 0;
        if (!cs.IsScalar() || !YAML::convert<long long>::decode(cs, v) || v < 1 || v > 1000000000)
          ctx.fail(cs, "sensitivity.checkpoint_steps",
                   "expected auto or an integer >= 1 (steps between CVODES / IDAS checkpoints), got " +
                       describe(cs));
        sc.checkpoint_steps = v;
      }
    }
    if (sens["interpolation"]) {
      sc.interpolation = ctx.string(sens["interpolation"], "sensitivity.interpolation");
      if (sc.interpolation != "hermite" && sc.interpolation != "polynomial")
        ctx.fail(sens["interpolation"], "sensitivity.interpolation",
                 "unknown interpolation '" + sc.interpolation + "'. Valid: hermite, polynomial");
    }
    if (const YAML::Node wrt = sens["wrt"]) {
      if (!wrt.IsSequence())
        ctx.fail(wrt, "sensitivity.wrt", "expected a list of parameter names (and 'initial_state'), got " + describe(wrt));
      sc.wrt_initial_state = false;
      std::vector<std::string> valid = cfg.parameter_names;
      valid.push_back("initial_state");
      for (std::size_t i = 0; i < wrt.size(); ++i) {
        const std::string key = "sensitivity.wrt[" + std::to_string(i) + "]";
        const std::string name = ctx.string(wrt[i], key);
        if (name == "initial_state") {
          sc.wrt_initial_state = true;
          continue;
        }
        if (std::find(cfg.parameter_names.begin(), cfg.parameter_names.end(), name) == cfg.parameter_names.end()) {
          std::string msg = "'" + name + "' is not a parameter";
          const std::string near = nearest(name, valid);
          if (!near.empty()) msg += "; did you mean '" + near + "'?";
          ctx.fail(wrt[i], key, msg + " Valid: " + join(valid));
        }
        sc.wrt.push_back(name);
      }
    }
    if (const YAML::Node cp = sens["checkpointing"]) {
      ctx.expect_map(cp, "sensitivity.checkpointing");
      ctx.check_keys(cp, "sensitivity.checkpointing", {"schedule", "snapshots", "every", "ram", "disk", "path"});
      const std::vector<std::string> schedules{"store_all", "uniform", "binomial", "online", "multilevel"};
      std::string schedule = "store_all";
      if (cp["schedule"]) schedule = ctx.string(cp["schedule"], "sensitivity.checkpointing.schedule");
      if (std::find(schedules.begin(), schedules.end(), schedule) == schedules.end()) {
        std::string msg = "unknown schedule '" + schedule + "'";
        const std::string near = nearest(schedule, schedules);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(cp["schedule"], "sensitivity.checkpointing.schedule", msg + " Valid schedules: " + join(schedules));
      }
      auto count = [&](const char* key, long long fallback) -> long long {
        if (!cp[key]) return fallback;
        const long long v = ctx.integer(cp[key], std::string("sensitivity.checkpointing.") + key);
        if (v < 0) ctx.fail(cp[key], std::string("sensitivity.checkpointing.") + key, "must be >= 0");
        return v;
      };
      if (schedule == "uniform") sc.checkpointing = ode::Uniform{.every = count("every", 10)};
      else if (schedule == "binomial") sc.checkpointing = ode::Binomial{.snapshots = count("snapshots", 10)};
      else if (schedule == "online") sc.checkpointing = ode::Online{.snapshots = count("snapshots", 10)};
      else if (schedule == "multilevel") {
        ode::Multilevel m{.ram = count("ram", 10), .disk = count("disk", 10)};
        if (cp["path"]) m.path = ctx.string(cp["path"], "sensitivity.checkpointing.path");
        sc.checkpointing = m;
      } else sc.checkpointing = ode::StoreAll{};
      try {
        ode::validate(sc.checkpointing);
      } catch (const Error& e) {
        ctx.fail(cp, "sensitivity.checkpointing", e.what());
      }
    }
  }

  if (!cfg.sensitivity.present || !root["sensitivity"]["wrt"]) cfg.sensitivity.wrt = cfg.parameter_names;

  // 8. Output.
  if (const YAML::Node output = root["output"]) {
    ctx.expect_map(output, "output");
    ctx.check_keys(output, "output", {"file"});
    if (output["file"]) cfg.output_file = ctx.string(output["file"], "output.file");
  }

  // 8b. Conditions: per-condition parameters, initial values and data.
  if (const YAML::Node conditions = root["conditions"]) {
    parse_conditions(conditions, ctx, path, cfg);
    cfg.objective.present = true;  // each condition's data misfit (plus terminal and integral)
    if (root["objective"] && root["objective"]["data"])
      ctx.fail(root["objective"]["data"], "objective.data",
               "with 'conditions:' each condition names its own data; remove objective.data "
               "(terminal and integral terms still apply to every condition)");
  }

  // 9. Calibration (used by `costate calibrate`).
  if (const YAML::Node cal = root["calibration"]) parse_calibration(cal, ctx, path, cfg);
  warn_unused_parameters(root, ctx, cfg);
  return cfg;
}

ode::EquationModel equation_model(const RunConfig& cfg) {
  ode::EquationModel model(cfg.state_names, cfg.parameter_names, cfg.equations);
  model.set_algebraic_states(cfg.algebraic_states);
  if (cfg.events.empty()) return model;
  const std::vector<std::string>& vars = model.variables();
  std::vector<ode::EquationModel::Event> events;
  for (std::size_t i = 0; i < cfg.events.size(); ++i) {
    const EventConfig& c = cfg.events[i];
    const std::string key = "events[" + std::to_string(i) + "]";
    ode::EquationModel::Event e;
    e.attributes.name = c.name;
    e.attributes.persistent = c.persistent;
    e.attributes.initial_value = c.initial_value;
    e.attributes.use_values_from_trigger_time = c.use_values_from_trigger_time;
    e.trigger = ode::Condition::parse(c.trigger, vars, key + ".trigger");
    for (const auto& [state, text] : c.assign) {
      const auto at = std::find(cfg.state_names.begin(), cfg.state_names.end(), state);
      COSTATE_CHECK(at != cfg.state_names.end(), key << ".assign: unknown state '" << state << "'");
      e.targets.push_back(static_cast<std::size_t>(at - cfg.state_names.begin()));
      e.values.push_back(expr::Program::compile(text, vars, key + ".assign." + state));
    }
    if (!c.delay.empty()) e.delay = expr::Program::compile(c.delay, vars, key + ".delay");
    if (!c.priority.empty())
      e.priority = expr::Program::compile(c.priority, vars, key + ".priority");
    events.push_back(std::move(e));
  }
  model.set_events(std::move(events), "events");
  return model;
}

namespace {

/// A data file as read ({file, noise | weights}, DataSpec), in a flow map.
void write_data_spec(YAML::Emitter& e, const DataSpec& d, const std::vector<std::string>& states) {
  e << YAML::Flow << YAML::BeginMap << YAML::Key << "file" << YAML::Value << d.file;
  for (const bool noise : {true, false}) {
    const std::vector<double>& v = noise ? d.noise : d.weights;
    if (std::none_of(v.begin(), v.end(), [](double x) { return !std::isnan(x); })) continue;
    e << YAML::Key << (noise ? "noise" : "weights") << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (std::size_t i = 0; i < states.size() && i < v.size(); ++i)
      if (!std::isnan(v[i])) e << YAML::Key << states[i] << YAML::Value << v[i];
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

}  // namespace

std::string RunConfig::to_yaml() const {
  YAML::Emitter e;
  e.SetDoublePrecision(17);
  e << YAML::BeginMap;
  if (sbml) {
    e << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "sbml" << YAML::Value << sbml_file << YAML::EndMap;
  } else if (equation_model()) {
    e << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
    // DAEs: the algebraic unknowns apart (model.algebraic), as read.
    auto is_algebraic = [&](std::size_t i) {
      return std::find(algebraic_states.begin(), algebraic_states.end(), i) != algebraic_states.end();
    };
    std::vector<std::string> differential;
    for (std::size_t i = 0; i < state_names.size(); ++i)
      if (!is_algebraic(i)) differential.push_back(state_names[i]);
    e << YAML::Key << "states" << YAML::Value << YAML::Flow << differential;
    e << YAML::Key << "equations" << YAML::Value << YAML::BeginMap;
    for (std::size_t i = 0; i < state_names.size(); ++i)
      if (!is_algebraic(i))
        e << YAML::Key << state_names[i] << YAML::Value << YAML::DoubleQuoted << equations[i];
    e << YAML::EndMap;
    if (!algebraic_states.empty()) {
      e << YAML::Key << "algebraic" << YAML::Value << YAML::BeginMap;
      for (std::size_t i : algebraic_states)
        e << YAML::Key << state_names[i] << YAML::Value << YAML::DoubleQuoted << equations[i];
      e << YAML::EndMap;
    }
    e << YAML::EndMap;
    if (!events.empty()) {
      e << YAML::Key << "events" << YAML::Value << YAML::BeginSeq;
      for (const EventConfig& ev : events) {
        e << YAML::BeginMap;
        if (!ev.name.empty()) e << YAML::Key << "name" << YAML::Value << ev.name;
        e << YAML::Key << "trigger" << YAML::Value << YAML::DoubleQuoted << ev.trigger;
        e << YAML::Key << "assign" << YAML::Value << YAML::BeginMap;
        for (const auto& [state, text] : ev.assign)
          e << YAML::Key << state << YAML::Value << YAML::DoubleQuoted << text;
        e << YAML::EndMap;
        if (!ev.delay.empty()) e << YAML::Key << "delay" << YAML::Value << YAML::DoubleQuoted << ev.delay;
        if (!ev.priority.empty())
          e << YAML::Key << "priority" << YAML::Value << YAML::DoubleQuoted << ev.priority;
        e << YAML::Key << "persistent" << YAML::Value << ev.persistent;
        e << YAML::Key << "initial_value" << YAML::Value << ev.initial_value;
        e << YAML::Key << "use_values_from_trigger_time" << YAML::Value
          << ev.use_values_from_trigger_time;
        e << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
  } else {
    e << YAML::Key << "model" << YAML::Value << model;
  }
  e << YAML::Key << "parameters" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < parameter_names.size(); ++i)
    e << YAML::Key << parameter_names[i] << YAML::Value << parameters[i];
  e << YAML::EndMap;
  e << YAML::Key << "initial_state" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < state_names.size(); ++i) {
    e << YAML::Key << state_names[i] << YAML::Value;
    // An expression of the parameters stays one (conditions replace them).
    if (i < initial_state_expressions.size() && !initial_state_expressions[i].empty())
      e << YAML::DoubleQuoted << initial_state_expressions[i];
    else
      e << initial_state[i];
  }
  e << YAML::EndMap;
  e << YAML::Key << "time" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "start" << YAML::Value << t_start;
  e << YAML::Key << "end" << YAML::Value << t_end;
  e << YAML::Key << "outputs" << YAML::Value << YAML::Flow << output_times;
  e << YAML::EndMap;
  e << YAML::Key << "integrator" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "method" << YAML::Value << ode::to_string(integrator.method);
  e << YAML::Key << "rtol" << YAML::Value << integrator.rtol;
  if (integrator.atol_per_state.empty()) {
    e << YAML::Key << "atol" << YAML::Value << integrator.atol;
  } else {
    e << YAML::Key << "atol" << YAML::Value << YAML::Flow << integrator.atol_per_state;
  }
  if (integrator.dt > 0.0) e << YAML::Key << "dt" << YAML::Value << integrator.dt;  // 0: the method's choice
  e << YAML::Key << "adaptive" << YAML::Value << integrator.adaptive;
  e << YAML::Key << "dt_max" << YAML::Value << integrator.dt_max;
  e << YAML::Key << "dt_min" << YAML::Value << integrator.dt_min;
  e << YAML::Key << "max_steps" << YAML::Value << static_cast<long long>(integrator.max_steps);
  if (ode::is_cvodes(integrator.method))
    e << YAML::Key << "cvodes_linear_solver" << YAML::Value
      << ode::to_string(integrator.cvodes_linear_solver);
  if (ode::is_implicit(integrator.method)) {
    e << YAML::Key << "newton_tol" << YAML::Value << integrator.newton_tol;
    e << YAML::Key << "newton_max_iterations" << YAML::Value << integrator.newton_max_iterations;
  }
  e << YAML::EndMap;
  if (!output_file.empty()) {  // (none: no output section, as read)
    e << YAML::Key << "output" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "file" << YAML::Value << output_file;
    e << YAML::EndMap;
  }
  // (A file with conditions has an objective with no terms of its own:
  // each condition's data; nothing to write.)
  if (objective.present && (!objective.terminal.empty() || !objective.integral.empty() || !objective.data_file.empty())) {
    e << YAML::Key << "objective" << YAML::Value << YAML::BeginMap;
    if (!objective.terminal.empty())
      e << YAML::Key << "terminal" << YAML::Value << YAML::DoubleQuoted << objective.terminal;
    if (!objective.integral.empty())
      e << YAML::Key << "integral" << YAML::Value << YAML::DoubleQuoted << objective.integral;
    if (!objective.data_file.empty()) {
      e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
      e << YAML::Key << "file" << YAML::Value << objective.data_file;
      // The noise model as σ per state (weight 1/σ²) when every state has
      // one; a zero weight (a state left out) keeps the weights.
      const bool all_noise = std::all_of(objective.weights.begin(), objective.weights.end(),
                                         [](double w) { return w > 0.0 && std::isfinite(w); });
      e << YAML::Key << (all_noise ? "noise" : "weights") << YAML::Value << YAML::BeginMap;
      for (std::size_t i = 0; i < state_names.size(); ++i)
        e << YAML::Key << state_names[i] << YAML::Value
          << (all_noise ? 1.0 / std::sqrt(objective.weights[i]) : objective.weights[i]);
      e << YAML::EndMap << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  if (sensitivity.present) {
    e << YAML::Key << "sensitivity" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "method" << YAML::Value << ode::to_string(sensitivity.method);
    std::vector<std::string> wrt = sensitivity.wrt.empty() ? parameter_names : sensitivity.wrt;
    if (sensitivity.wrt_initial_state) wrt.push_back("initial_state");
    e << YAML::Key << "wrt" << YAML::Value << YAML::Flow << wrt;
    // As the reader takes it: {schedule, snapshots | every | ram, disk, path}.
    e << YAML::Key << "checkpointing" << YAML::Value << YAML::Flow << YAML::BeginMap;
    const ode::Checkpointing& cp = sensitivity.checkpointing;
    if (const auto* u = std::get_if<ode::Uniform>(&cp))
      e << YAML::Key << "schedule" << YAML::Value << "uniform" << YAML::Key << "every" << YAML::Value << u->every;
    else if (const auto* b = std::get_if<ode::Binomial>(&cp))
      e << YAML::Key << "schedule" << YAML::Value << "binomial" << YAML::Key << "snapshots" << YAML::Value
        << b->snapshots;
    else if (const auto* o = std::get_if<ode::Online>(&cp))
      e << YAML::Key << "schedule" << YAML::Value << "online" << YAML::Key << "snapshots" << YAML::Value
        << o->snapshots;
    else if (const auto* m = std::get_if<ode::Multilevel>(&cp)) {
      e << YAML::Key << "schedule" << YAML::Value << "multilevel" << YAML::Key << "ram" << YAML::Value << m->ram
        << YAML::Key << "disk" << YAML::Value << m->disk;
      if (!m->path.empty()) e << YAML::Key << "path" << YAML::Value << m->path;
    } else
      e << YAML::Key << "schedule" << YAML::Value << "store_all";
    e << YAML::EndMap;
    if (sensitivity.method == ode::SensitivityKind::ContinuousAdjoint ||
        sensitivity.method == ode::SensitivityKind::CvodesAdjoint) {
      e << YAML::Key << "adjoint_rtol" << YAML::Value << sensitivity.adjoint_rtol;
      e << YAML::Key << "adjoint_atol" << YAML::Value << sensitivity.adjoint_atol;
    }
    if (sensitivity.method == ode::SensitivityKind::CvodesAdjoint) {
      if (sensitivity.checkpoint_steps == 0)
        e << YAML::Key << "checkpoint_steps" << YAML::Value << "auto";
      else
        e << YAML::Key << "checkpoint_steps" << YAML::Value << sensitivity.checkpoint_steps;
      e << YAML::Key << "interpolation" << YAML::Value << sensitivity.interpolation;
    }
    e << YAML::EndMap;
  }
  if (calibration.present) {
    const CalibrationConfig& c = calibration;
    e << YAML::Key << "calibration" << YAML::Value << YAML::BeginMap;
    for (const bool states : {false, true}) {
      bool any = false;
      for (const auto& v : c.variables) any = any || v.initial_state == states;
      if (!any) continue;
      e << YAML::Key << (states ? "initial_state" : "parameters") << YAML::Value << YAML::BeginMap;
      for (const auto& v : c.variables) {
        if (v.initial_state != states) continue;
        e << YAML::Key << v.name << YAML::Value << YAML::Flow << YAML::BeginMap;
        e << YAML::Key << "initial" << YAML::Value << v.initial;
        if (std::isfinite(v.lower)) e << YAML::Key << "lower" << YAML::Value << v.lower;
        if (std::isfinite(v.upper)) e << YAML::Key << "upper" << YAML::Value << v.upper;
        e << YAML::Key << "log" << YAML::Value << v.log;
        e << YAML::Key << "prior" << YAML::Value << v.prior;
        e << YAML::EndMap;
      }
      e << YAML::EndMap;
    }
    // The data as the file gave them (DataSpec), so that the settings load
    // back; with conditions each condition names its own.
    if (conditions.empty()) {
      e << YAML::Key << "data" << YAML::Value << YAML::BeginSeq;
      for (const DataSpec& d : c.data_sets) write_data_spec(e, d, state_names);
      e << YAML::EndSeq;
    }
    e << YAML::Key << "regularization" << YAML::Value << YAML::Flow << YAML::BeginMap;
    e << YAML::Key << "weight" << YAML::Value << c.regularization_weight << YAML::EndMap;
    e << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap;
    if (c.stochastic) {
      const optimize::StochasticOptions& o = c.stochastic_options;
      e << YAML::Key << "method" << YAML::Value << optimize::to_string(o.method);
      e << YAML::Key << "epochs" << YAML::Value << o.epochs;
      // (0: the whole training set, the logical batch — the reader's default)
      if (o.batch > 0) e << YAML::Key << "batch" << YAML::Value << o.batch;
      if (o.physical_batch > 0) e << YAML::Key << "physical_batch" << YAML::Value << o.physical_batch;
      e << YAML::Key << "learning_rate" << YAML::Value << o.learning_rate;
      e << YAML::Key << "validation_split" << YAML::Value << o.validation_split;
      e << YAML::Key << "seed" << YAML::Value << o.seed;
      e << YAML::Key << "finish" << YAML::Value << o.finish_iterations;
      e << YAML::Key << "schedule" << YAML::Value << optimize::to_string(o.schedule);
      e << YAML::Key << "warmup_steps" << YAML::Value << o.warmup_steps;
      e << YAML::Key << "weight_decay" << YAML::Value << o.weight_decay;
      e << YAML::Key << "clip_norm" << YAML::Value << o.clip_norm;
      e << YAML::Key << "patience" << YAML::Value << o.patience;
      e << YAML::Key << "momentum" << YAML::Value << o.momentum;
      if (o.batch_growth != 1.0) e << YAML::Key << "batch_growth" << YAML::Value << o.batch_growth;
      if (o.average_epochs > 0) e << YAML::Key << "average_epochs" << YAML::Value << o.average_epochs;
      e << YAML::Key << "step_epochs" << YAML::Value << o.step_epochs;
      e << YAML::Key << "gamma" << YAML::Value << o.gamma;
      e << YAML::Key << "min_learning_rate" << YAML::Value << o.min_learning_rate;
      e << YAML::Key << "beta1" << YAML::Value << o.beta1;
      e << YAML::Key << "beta2" << YAML::Value << o.beta2;
      e << YAML::Key << "epsilon" << YAML::Value << o.epsilon;
      e << YAML::Key << "max_rescues" << YAML::Value << o.max_rescues;
      e << YAML::Key << "max_restarts" << YAML::Value << o.max_restarts;
      e << YAML::EndMap << YAML::EndMap;
    } else {
    e << YAML::Key << "method" << YAML::Value << optimize::to_string(c.optimizer.method);
    e << YAML::Key << "gatol" << YAML::Value << c.optimizer.gatol;
    e << YAML::Key << "grtol" << YAML::Value << c.optimizer.grtol;
    e << YAML::Key << "gttol" << YAML::Value << c.optimizer.gttol;
    e << YAML::Key << "max_iterations" << YAML::Value << c.optimizer.max_iterations;
    e << YAML::Key << "max_function_evaluations" << YAML::Value << c.optimizer.max_function_evaluations;
    e << YAML::EndMap << YAML::EndMap;
    }
  }
  if (!conditions.empty()) {
    // The conditions as resolved: each replaced parameter and initial value, and the data file.
    e << YAML::Key << "conditions" << YAML::Value << YAML::BeginSeq;
    for (const ConditionConfig& c : conditions) {
      e << YAML::BeginMap << YAML::Key << "id" << YAML::Value << c.id;
      e << YAML::Key << "parameters" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (std::size_t k = 0; k < c.parameter_source.size(); ++k) {
        if (c.parameter_source[k] == static_cast<long>(k)) continue;
        e << YAML::Key << parameter_names[k] << YAML::Value;
        if (c.parameter_source[k] < 0) e << c.parameter_values[k];
        else e << parameter_names[static_cast<std::size_t>(c.parameter_source[k])];
      }
      e << YAML::EndMap << YAML::Key << "initial_state" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (std::size_t i = 0; i < c.initial_state.size(); ++i)
        if (!c.initial_state[i].empty()) e << YAML::Key << state_names[i] << YAML::Value << c.initial_state[i];
      e << YAML::EndMap << YAML::Key << "data" << YAML::Value;
      write_data_spec(e, c.data_spec, state_names);
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace costate::io

// ------------------------------------------------------------ PDE inputs
// (pde_input.hpp) — the `pde:` section and the settings of a PDE run.

namespace costate::io {

bool is_pde_input(const std::string& path) {
  try {
    const YAML::Node root = YAML::LoadFile(path);
    return root.IsMap() && root["pde"];
  } catch (const YAML::Exception&) {
    return false;
  }
}

namespace {

/// Name lists of the `pde:` section: a list of distinct names.
std::vector<std::string> pde_names(const Context& ctx, const YAML::Node& node, const std::string& key) {
  if (!node.IsSequence() || node.size() == 0)
    ctx.fail(node, key, "expected a non-empty list of names, got " + describe(node));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string k = key + "[" + std::to_string(i) + "]";
    const std::string name = ctx.string(node[i], k);
    if (std::find(out.begin(), out.end(), name) != out.end()) ctx.fail(node[i], k, "duplicate name '" + name + "'");
    out.push_back(name);
  }
  return out;
}

/// An expression of the pointwise names `vars`, checked now so that its
/// errors carry the file's location.
std::string pde_expression(const Context& ctx, const YAML::Node& node, const std::string& key,
                           const std::vector<std::string>& vars, const std::string& what) {
  if (!node.IsScalar()) ctx.fail(node, key, "expected an expression, got " + describe(node));
  try {
    (void)expr::Program::compile(node.Scalar(), vars, key);
  } catch (const Error& e) {
    ctx.fail(node, key, "invalid expression (it may use " + what + "): " + e.what());
  }
  return node.Scalar();
}

/// The index of the field `node` names among `fields` (key `key`); an
/// unknown name fails with a suggestion and the list of fields.
int pde_field_index(const Context& ctx, const std::vector<std::string>& fields, const YAML::Node& node,
                    const std::string& key) {
  const std::string name = ctx.string(node, key);
  const auto it = std::find(fields.begin(), fields.end(), name);
  if (it == fields.end()) {
    std::string msg = "'" + name + "' is not a field";
    const std::string near = nearest(name, fields);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    ctx.fail(node, key, msg + " Fields: " + join(fields));
  }
  return static_cast<int>(it - fields.begin());
}

/// A PDE solve's `pc_type` key: `automatic` (the default: gamg from
/// kMultigridUnknowns unknowns, PETSc's default below), `default` (PETSc's
/// own choice) or a named PETSc preconditioner. Returns the PCType to set
/// ("" for PETSc's default).
std::string pc_type_choice(const Context& ctx, const YAML::Node& node, const std::string& key,
                           std::int64_t unknowns) {
  static const std::vector<std::string> valid{"automatic", "default", "gamg", "ilu", "bjacobi",
                                              "jacobi", "sor", "lu", "none"};
  const std::string v = node ? ctx.string(node, key) : "automatic";
  if (std::find(valid.begin(), valid.end(), v) == valid.end()) {
    std::string msg = "unknown preconditioner '" + v + "'";
    const std::string near = nearest(v, valid);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    ctx.fail(node, key, msg + " Valid: " + join(valid));
  }
  if (v == "automatic") return unknowns >= kMultigridUnknowns ? "gamg" : "";
  return v == "default" ? "" : v;
}

std::int64_t pde_cells(const PdeConfig& cfg) {
  std::int64_t cells = 1;
  for (int d = 0; d < cfg.equations.dim; ++d) cells *= cfg.domain.cells[static_cast<std::size_t>(d)];
  return cells;
}

}  // namespace

PdeConfig load_pde_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open input file for reading");
  std::stringstream text;
  text << in.rdbuf();
  return load_pde_config_text(text.str(), path, overrides);
}

PdeConfig load_pde_config_text(const std::string& text, const std::string& path,
                               const std::vector<std::string>& overrides) {
  Context ctx;
  ctx.path = path;
  PdeConfig cfg;
  cfg.input_path = path;
  YAML::Node root = load_yaml_document(text, path);
  if (!root.IsMap()) throw Error(path + ": expected a map of settings at the top level");
  for (const auto& o : overrides) apply_override(root, o, ctx);
  ctx.check_keys(root, "", {"description", "pde", "integrator", "objective", "sensitivity", "output", "calibration"});
  if (root["description"]) cfg.description = ctx.string(root["description"], "description");

  // 1. The pde section: grid, names, equations.
  const YAML::Node pde = root["pde"];
  ctx.expect_map(pde, "pde");
  ctx.check_keys(pde, "pde", {"grid", "fields", "parameters", "parameter_fields", "initial", "equations"});
  const YAML::Node grid = pde["grid"];
  if (!grid) ctx.fail(pde, "pde", "missing required key 'grid' (with at least 'n')");
  ctx.expect_map(grid, "pde.grid");
  ctx.check_keys(grid, "pde.grid", {"n", "extent", "boundary", "dirichlet_value", "processes"});
  const YAML::Node n = grid["n"];
  if (!n) ctx.fail(grid, "pde.grid", "missing required key 'n' (cells per dimension, e.g. [64, 64])");
  if (!n.IsSequence() || n.size() < 1 || n.size() > 3)
    ctx.fail(n, "pde.grid.n", "expected a list of 1 to 3 cell counts, got " + describe(n));
  const int dim = static_cast<int>(n.size());
  cfg.equations.dim = dim;
  cfg.domain.cells = {1, 1, 1};
  for (int d = 0; d < dim; ++d) {
    const std::string k = "pde.grid.n[" + std::to_string(d) + "]";
    const long long v = ctx.integer(n[d], k);
    if (v < 1 || v > 100000000) ctx.fail(n[d], k, "expected a cell count >= 1, got " + std::to_string(v));
    cfg.domain.cells[static_cast<std::size_t>(d)] = v;
  }
  if (const YAML::Node ext = grid["extent"]) {
    if (!ext.IsSequence() || static_cast<int>(ext.size()) != dim)
      ctx.fail(ext, "pde.grid.extent", "expected " + std::to_string(dim) + " intervals [a, b] (one per dimension of n), got " + describe(ext));
    for (int d = 0; d < dim; ++d) {
      const std::string k = "pde.grid.extent[" + std::to_string(d) + "]";
      const YAML::Node e = ext[d];
      if (!e.IsSequence() || e.size() != 2) ctx.fail(e, k, "expected an interval [a, b], got " + describe(e));
      const double a = ctx.number(e[0], k + "[0]"), b = ctx.number(e[1], k + "[1]");
      if (!(b > a)) ctx.fail(e, k, "expected a < b, got [" + fmt(a) + ", " + fmt(b) + "]");
      cfg.domain.extent[static_cast<std::size_t>(d)] = {a, b};
    }
  }
  if (const YAML::Node b = grid["boundary"]) {
    auto one = [&](const YAML::Node& node, const std::string& k) {
      const std::string name = ctx.string(node, k);
      try {
        return pde::boundary_from_string(name);
      } catch (const Error& e) {
        ctx.fail(node, k, e.what());
      }
    };
    if (b.IsSequence()) {
      if (static_cast<int>(b.size()) != dim)
        ctx.fail(b, "pde.grid.boundary", "expected one boundary per dimension (" + std::to_string(dim) + "), got " + describe(b));
      for (int d = 0; d < dim; ++d)
        cfg.domain.boundary[static_cast<std::size_t>(d)] = one(b[d], "pde.grid.boundary[" + std::to_string(d) + "]");
    } else {
      const pde::Boundary all = one(b, "pde.grid.boundary");
      for (int d = 0; d < dim; ++d) cfg.domain.boundary[static_cast<std::size_t>(d)] = all;
    }
  }
  if (grid["dirichlet_value"]) cfg.domain.dirichlet_value = ctx.number(grid["dirichlet_value"], "pde.grid.dirichlet_value");
  if (const YAML::Node p = grid["processes"]) {
    if (!p.IsSequence() || static_cast<int>(p.size()) != dim)
      ctx.fail(p, "pde.grid.processes", "expected " + std::to_string(dim) + " process counts (0: chosen by costate), got " + describe(p));
    for (int d = 0; d < dim; ++d) {
      const std::string k = "pde.grid.processes[" + std::to_string(d) + "]";
      const long long v = ctx.integer(p[d], k);
      if (v < 0) ctx.fail(p[d], k, "must be >= 0");
      cfg.domain.processes[static_cast<std::size_t>(d)] = static_cast<int>(v);
    }
  }
  if (!pde["fields"]) ctx.fail(pde, "pde", "missing required key 'fields' (a list of names, e.g. [u, v])");
  cfg.equations.fields = pde_names(ctx, pde["fields"], "pde.fields");
  if (const YAML::Node params = pde["parameters"]) {
    ctx.expect_map(params, "pde.parameters");
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string name = it->first.Scalar();
      cfg.equations.parameters.push_back(name);
      cfg.parameters.push_back(ctx.number(it->second, "pde.parameters." + name));
    }
  }
  // Parameter fields: name -> expression of x, y, z and the scalar parameters.
  std::vector<std::string> coords{"x"};
  if (dim >= 2) coords.emplace_back("y");
  if (dim >= 3) coords.emplace_back("z");
  std::vector<std::string> field_vars = coords;
  field_vars.insert(field_vars.end(), cfg.equations.parameters.begin(), cfg.equations.parameters.end());
  const std::string coord_text = dim == 1 ? "x" : dim == 2 ? "x, y" : "x, y, z";
  if (const YAML::Node pf = pde["parameter_fields"]) {
    ctx.expect_map(pf, "pde.parameter_fields");
    for (auto it = pf.begin(); it != pf.end(); ++it) {
      const std::string name = it->first.Scalar();
      const std::string key = "pde.parameter_fields." + name;
      double v = 0.0;
      if (it->second.IsScalar() && YAML::convert<double>::decode(it->second, v))
        cfg.parameter_fields.push_back(fmt(ctx.number(it->second, key)));
      else
        cfg.parameter_fields.push_back(pde_expression(ctx, it->second, key, field_vars,
                                                      coord_text + " and the parameters"));
      cfg.equations.parameter_fields.push_back(name);
    }
  }
  // Initial fields: expressions of x, y, z, the parameters and parameter fields.
  std::vector<std::string> init_vars = field_vars;
  init_vars.insert(init_vars.end(), cfg.equations.parameter_fields.begin(), cfg.equations.parameter_fields.end());
  const YAML::Node init = pde["initial"];
  if (!init) ctx.fail(pde, "pde", "missing required key 'initial' (field -> expression of " + coord_text + ")");
  ctx.expect_map(init, "pde.initial");
  ctx.check_keys(init, "pde.initial", cfg.equations.fields);
  for (const auto& f : cfg.equations.fields) {
    if (!init[f]) ctx.fail(init, "pde.initial", "no initial value for field '" + f + "'");
    double v = 0.0;
    if (init[f].IsScalar() && YAML::convert<double>::decode(init[f], v))
      cfg.initial.push_back(fmt(ctx.number(init[f], "pde.initial." + f)));
    else
      cfg.initial.push_back(pde_expression(ctx, init[f], "pde.initial." + f, init_vars,
                                           coord_text + ", the parameters and parameter fields"));
  }
  const YAML::Node eqs = pde["equations"];
  if (!eqs) ctx.fail(pde, "pde", "missing required key 'equations' (field -> right-hand side)");
  ctx.expect_map(eqs, "pde.equations");
  ctx.check_keys(eqs, "pde.equations", cfg.equations.fields);
  for (const auto& f : cfg.equations.fields) {
    if (!eqs[f]) ctx.fail(eqs, "pde.equations", "no equation for field '" + f + "'");
    if (!eqs[f].IsScalar()) ctx.fail(eqs[f], "pde.equations." + f, "expected an expression, got " + describe(eqs[f]));
    cfg.equations.equations.push_back(eqs[f].Scalar());
  }
  try {
    pde::EquationSystem check(cfg.equations);
  } catch (const Error& e) {
    // Point at the equation the message names, else at the section.
    YAML::Node where = eqs;
    const std::string msg = e.what();
    for (const auto& f : cfg.equations.fields)
      if (msg.rfind("pde.equations." + f + ":", 0) == 0) where = eqs[f];
    throw Error(ctx.where(where, "pde.equations") + ": " + msg);
  }

  // 2. Integrator: the θ-method with fixed steps.
  cfg.integrator.ksp.rtol = 1e-14;  // gradients agree across rank counts to ~1e-13
  cfg.integrator.ksp.atol = 1e-50;
  const YAML::Node integ = root["integrator"];
  if (!integ) throw Error(path + ": missing required key 'integrator' (with 'dt' and 'steps')");
  ctx.expect_map(integ, "integrator");
  ctx.check_keys(integ, "integrator", {"method", "theta", "dt", "steps", "ksp_rtol", "pc_type", "newton_rtol"});
  if (integ["method"]) cfg.method = ctx.string(integ["method"], "integrator.method");
  const std::vector<std::string> methods{"crank_nicolson", "backward_euler", "theta", "rk4", "ssp_rk3"};
  if (std::find(methods.begin(), methods.end(), cfg.method) == methods.end()) {
    std::string msg = "unknown method '" + cfg.method + "' for a PDE input";
    const std::string near = nearest(cfg.method, methods);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    ctx.fail(integ["method"], "integrator.method", msg + " Valid: " + join(methods));
  }
  cfg.integrator.theta = cfg.method == "backward_euler" ? 1.0 : 0.5;
  if (integ["theta"]) {
    if (cfg.method != "theta")
      ctx.fail(integ["theta"], "integrator.theta", "is only used with method: theta (method is '" + cfg.method + "')");
    cfg.integrator.theta = ctx.number(integ["theta"], "integrator.theta");
    if (cfg.integrator.theta < 0.5 || cfg.integrator.theta > 1.0)
      ctx.fail(integ["theta"], "integrator.theta", "must lie in [0.5, 1] (0.5: Crank-Nicolson, 1: backward Euler), got " + fmt(cfg.integrator.theta));
  }
  if (!integ["dt"]) ctx.fail(integ, "integrator", "missing required key 'dt' (the fixed step)");
  cfg.integrator.dt = ctx.positive(integ["dt"], "integrator.dt");
  if (!integ["steps"]) ctx.fail(integ, "integrator", "missing required key 'steps'");
  cfg.integrator.steps = ctx.integer(integ["steps"], "integrator.steps");
  if (cfg.integrator.steps < 1) ctx.fail(integ["steps"], "integrator.steps", "must be >= 1");
  if (integ["ksp_rtol"]) cfg.integrator.ksp.rtol = ctx.positive(integ["ksp_rtol"], "integrator.ksp_rtol");
  if (integ["newton_rtol"]) cfg.integrator.newton_rtol = ctx.positive(integ["newton_rtol"], "integrator.newton_rtol");
  cfg.integrator.ksp.pc_type =
      pc_type_choice(ctx, integ["pc_type"], "integrator.pc_type",
                     pde_cells(cfg) * static_cast<std::int64_t>(cfg.equations.fields.size()));
  if (pde::is_explicit_rk_method(cfg.method)) {
    // Explicit Runge-Kutta: no linear or Newton solves to configure.
    for (const char* key : {"ksp_rtol", "pc_type", "newton_rtol"})
      if (integ[key])
        ctx.fail(integ[key], std::string("integrator.") + key,
                 "is not used by the explicit method '" + cfg.method + "' (no linear or Newton solves)");
    cfg.explicit_rk = pde::ExplicitRkOptions{.method = pde::explicit_rk_method_from_string(cfg.method),
                                             .t0 = cfg.integrator.t0,
                                             .dt = cfg.integrator.dt,
                                             .steps = cfg.integrator.steps};
  }

  // 3. Objective: a terminal functional of the final fields.
  auto field_index = [&](const YAML::Node& node, const std::string& key) {
    return pde_field_index(ctx, cfg.equations.fields, node, key);
  };
  if (const YAML::Node obj = root["objective"]) {
    ctx.expect_map(obj, "objective");
    ctx.check_keys(obj, "objective", {"integral", "probe", "misfit"});
    if (obj.size() != 1)
      ctx.fail(obj, "objective", "give exactly one of 'integral', 'probe', 'misfit'");
    PdeObjectiveConfig& oc = cfg.objective;
    oc.present = true;
    if (obj["integral"]) {
      oc.kind = "integral";
      oc.component = field_index(obj["integral"], "objective.integral");
    } else if (const YAML::Node pr = obj["probe"]) {
      oc.kind = "probe";
      ctx.expect_map(pr, "objective.probe");
      ctx.check_keys(pr, "objective.probe", {"cell", "field"});
      oc.component = pr["field"] ? field_index(pr["field"], "objective.probe.field") : 0;
      const YAML::Node c = pr["cell"];
      if (!c || !c.IsSequence() || static_cast<int>(c.size()) != dim)
        ctx.fail(c ? c : pr, "objective.probe.cell", "expected " + std::to_string(dim) + " cell indices (0-based)");
      for (int d = 0; d < dim; ++d) {
        const std::string k = "objective.probe.cell[" + std::to_string(d) + "]";
        const long long v = ctx.integer(c[d], k);
        if (v < 0 || v >= cfg.domain.cells[static_cast<std::size_t>(d)])
          ctx.fail(c[d], k, "cell index " + std::to_string(v) + " is outside [0, " +
                                std::to_string(cfg.domain.cells[static_cast<std::size_t>(d)]) + ")");
        oc.cell[static_cast<std::size_t>(d)] = v;
      }
    } else {
      oc.kind = "misfit";
      const YAML::Node m = obj["misfit"];
      ctx.expect_map(m, "objective.misfit");
      ctx.check_keys(m, "objective.misfit", cfg.equations.fields);
      for (const auto& f : cfg.equations.fields) {
        if (!m[f]) ctx.fail(m, "objective.misfit", "no data for field '" + f + "' (an expression of " + coord_text + ")");
        oc.data.push_back(pde_expression(ctx, m[f], "objective.misfit." + f, field_vars,
                                         coord_text + " and the parameters"));
      }
    }
  }

  // 4. Sensitivity: the discrete adjoint with a checkpoint schedule.
  if (const YAML::Node sens = root["sensitivity"]) {
    ctx.expect_map(sens, "sensitivity");
    ctx.check_keys(sens, "sensitivity", {"method", "checkpointing"});
    if (sens["method"]) {
      const std::string m = ctx.string(sens["method"], "sensitivity.method");
      if (m != "discrete_adjoint")
        ctx.fail(sens["method"], "sensitivity.method", "'" + m + "' is not available for PDE inputs; use discrete_adjoint");
    }
    if (const YAML::Node cp = sens["checkpointing"]) {
      ctx.expect_map(cp, "sensitivity.checkpointing");
      ctx.check_keys(cp, "sensitivity.checkpointing", {"schedule", "snapshots"});
      const std::vector<std::string> schedules{"store_all", "binomial"};
      const std::string s = cp["schedule"] ? ctx.string(cp["schedule"], "sensitivity.checkpointing.schedule") : "store_all";
      if (std::find(schedules.begin(), schedules.end(), s) == schedules.end()) {
        std::string msg = "unknown schedule '" + s + "' for a PDE input";
        const std::string near = nearest(s, schedules);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(cp["schedule"], "sensitivity.checkpointing.schedule", msg + " Valid: " + join(schedules));
      }
      if (s == "binomial") {
        long long snaps = 10;
        if (cp["snapshots"]) snaps = ctx.integer(cp["snapshots"], "sensitivity.checkpointing.snapshots");
        if (snaps < 1) ctx.fail(cp["snapshots"], "sensitivity.checkpointing.snapshots", "must be >= 1");
        cfg.checkpointing = ode::Binomial{.snapshots = snaps};
      } else if (cp["snapshots"]) {
        ctx.fail(cp["snapshots"], "sensitivity.checkpointing.snapshots", "is only used with schedule: binomial");
      }
    }
  }

  // 5. Index range: a grid PETSc cannot index is refused before any work.
  check_pde_index_range(cfg, ctx.where(n, "pde.grid.n"));

  // 6. Output.
  if (const YAML::Node out = root["output"]) {
    ctx.expect_map(out, "output");
    ctx.check_keys(out, "output", {"file", "every"});
    if (out["file"]) cfg.output_file = ctx.string(out["file"], "output.file");
    if (out["every"]) {
      cfg.output_every = ctx.integer(out["every"], "output.every");
      if (cfg.output_every < 0) ctx.fail(out["every"], "output.every", "must be >= 0 (steps between frames)");
    }
  }
  return cfg;
}


PdeCalibrationConfig load_pde_calibration(const std::string& path, const std::vector<std::string>& overrides,
                                          const PdeConfig& cfg) {
  Context ctx;
  ctx.path = path;
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open input file for reading");
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::ParserException& e) {
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": malformed YAML: " + e.msg);
  }
  for (const auto& o : overrides) apply_override(root, o, ctx);
  PdeCalibrationConfig none;
  const int dim = cfg.equations.dim;
  std::vector<std::string> field_vars{"x"};
  if (dim >= 2) field_vars.emplace_back("y");
  if (dim >= 3) field_vars.emplace_back("z");
  field_vars.insert(field_vars.end(), cfg.equations.parameters.begin(), cfg.equations.parameters.end());
  const std::string coord_text = dim == 1 ? "x" : dim == 2 ? "x, y" : "x, y, z";
  auto field_index = [&](const YAML::Node& node, const std::string& key) {
    return pde_field_index(ctx, cfg.equations.fields, node, key);
  };
  const YAML::Node cal = root["calibration"];
  if (!cal) return none;
  {
    PdeCalibrationConfig cc;
    cc.present = true;
    ctx.expect_map(cal, "calibration");
    ctx.check_keys(cal, "calibration", {"field", "log", "sensors", "prior", "optimizer", "posterior"});
    const auto& pf = cfg.equations.parameter_fields;
    if (!cal["field"]) {
      if (pf.size() != 1)
        ctx.fail(cal, "calibration", "missing required key 'field' (the parameter field to infer; this input has " +
                                         std::string(pf.empty() ? "none: add one under pde.parameter_fields" : join(pf)) + ")");
      cc.field = pf[0];
    } else {
      cc.field = ctx.string(cal["field"], "calibration.field");
      if (std::find(pf.begin(), pf.end(), cc.field) == pf.end()) {
        std::string msg = "'" + cc.field + "' is not a parameter field";
        const std::string near = nearest(cc.field, pf);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        ctx.fail(cal["field"], "calibration.field",
                 msg + (pf.empty() ? std::string(" (the input has none: add it under pde.parameter_fields)")
                                   : " Parameter fields: " + join(pf)));
      }
    }
    if (cal["log"]) {
      const std::string v = ctx.string(cal["log"], "calibration.log");
      if (v != "true" && v != "false") ctx.fail(cal["log"], "calibration.log", "expected true or false, got '" + v + "'");
      cc.log_form = v == "true";
    }
    const YAML::Node sn = cal["sensors"];
    if (!sn) ctx.fail(cal, "calibration", "missing required key 'sensors' (with 'file': a CSV of x,[y,[z,]]t,value[,sigma])");
    ctx.expect_map(sn, "calibration.sensors");
    ctx.check_keys(sn, "calibration.sensors", {"file", "field", "sigma"});
    if (!sn["file"]) ctx.fail(sn, "calibration.sensors", "missing required key 'file' (the sensor CSV)");
    const std::filesystem::path fp(ctx.string(sn["file"], "calibration.sensors.file"));
    cc.sensors_file = fp.is_relative() ? (std::filesystem::path(path).parent_path() / fp).string() : fp.string();
    if (sn["field"]) cc.sensors_component = field_index(sn["field"], "calibration.sensors.field");
    if (sn["sigma"]) cc.sigma = ctx.positive(sn["sigma"], "calibration.sensors.sigma");
    if (const YAML::Node pr = cal["prior"]) {
      ctx.expect_map(pr, "calibration.prior");
      ctx.check_keys(pr, "calibration.prior", {"kind", "gamma", "delta", "mean", "pc_type"});
      if (pr["kind"]) {
        try {
          cc.prior.kind = pde::prior_kind_from_string(ctx.string(pr["kind"], "calibration.prior.kind"));
        } catch (const Error& e) {
          ctx.fail(pr["kind"], "calibration.prior.kind", e.what());
        }
      }
      if (pr["gamma"]) cc.prior.gamma = ctx.number(pr["gamma"], "calibration.prior.gamma");
      if (pr["delta"]) cc.prior.delta = ctx.number(pr["delta"], "calibration.prior.delta");
      if (cc.prior.kind != pde::PriorKind::L2 && !(cc.prior.gamma > 0.0))
        ctx.fail(pr["gamma"] ? pr["gamma"] : pr, "calibration.prior.gamma",
                 "must be > 0 for the " + pde::to_string(cc.prior.kind) + " prior, got " + fmt(cc.prior.gamma));
      if (!(cc.prior.delta > 0.0))
        ctx.fail(pr["delta"] ? pr["delta"] : pr, "calibration.prior.delta", "must be > 0, got " + fmt(cc.prior.delta));
      if (const YAML::Node mean = pr["mean"]) {
        double v = 0.0;
        if (mean.IsScalar() && YAML::convert<double>::decode(mean, v))
          cc.prior_mean = fmt(ctx.number(mean, "calibration.prior.mean"));
        else
          cc.prior_mean = pde_expression(ctx, mean, "calibration.prior.mean", field_vars,
                                         coord_text + " and the parameters");
      }
    }
    cc.prior.ksp.pc_type = pc_type_choice(ctx, cal["prior"] ? cal["prior"]["pc_type"] : YAML::Node(),
                                          "calibration.prior.pc_type", pde_cells(cfg));
    if (const YAML::Node op = cal["optimizer"]) {
      ctx.expect_map(op, "calibration.optimizer");
      ctx.check_keys(op, "calibration.optimizer", {"method", "max_iterations", "gradient_rtol", "gradient_atol",
                                                   "gauss_newton_iterations", "cg_max_iterations", "eta_max"});
      pde::InversionOptions& o = cc.optimizer;
      if (op["method"]) {
        try {
          o.method = pde::inversion_method_from_string(ctx.string(op["method"], "calibration.optimizer.method"));
        } catch (const Error& e) {
          ctx.fail(op["method"], "calibration.optimizer.method", e.what());
        }
      }
      auto integer = [&](const char* k, int& out, long long lo) {
        if (!op[k]) return;
        const long long v = ctx.integer(op[k], std::string("calibration.optimizer.") + k);
        if (v < lo || v > 1000000)
          ctx.fail(op[k], std::string("calibration.optimizer.") + k, "must lie in [" + std::to_string(lo) + ", 1000000]");
        out = static_cast<int>(v);
      };
      integer("max_iterations", o.max_iterations, 1);
      integer("gauss_newton_iterations", o.gauss_newton_iterations, 0);
      integer("cg_max_iterations", o.cg_max_iterations, 1);
      auto fraction = [&](const char* k, double& out, bool zero_ok) {
        if (!op[k]) return;
        const std::string key = std::string("calibration.optimizer.") + k;
        out = ctx.number(op[k], key);
        if (!(out >= 0.0 && out < 1.0) || (!zero_ok && out == 0.0))
          ctx.fail(op[k], key, std::string("must lie in ") + (zero_ok ? "[0, 1)" : "(0, 1)") + ", got " + fmt(out));
      };
      fraction("gradient_rtol", o.gradient_rtol, true);
      fraction("eta_max", o.eta_max, false);
      if (op["gradient_atol"]) {
        o.gradient_atol = ctx.number(op["gradient_atol"], "calibration.optimizer.gradient_atol");
        if (!(o.gradient_atol >= 0.0))
          ctx.fail(op["gradient_atol"], "calibration.optimizer.gradient_atol", "must be >= 0, got " + fmt(o.gradient_atol));
      }
      if (o.gradient_rtol == 0.0 && o.gradient_atol == 0.0)
        ctx.fail(op, "calibration.optimizer", "gradient_rtol and gradient_atol are both 0: set one > 0");
    }
    if (const YAML::Node po = cal["posterior"]) {
      cc.posterior = true;
      ctx.expect_map(po, "calibration.posterior");
      ctx.check_keys(po, "calibration.posterior", {"rank", "oversampling", "samples", "seed", "hessian"});
      pde::LaplaceOptions& o = cc.posterior_options;
      auto integer = [&](const char* k, long long lo, long long hi) -> long long {
        const std::string key = std::string("calibration.posterior.") + k;
        const long long v = ctx.integer(po[k], key);
        if (v < lo || v > hi)
          ctx.fail(po[k], key, "must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                   std::to_string(v));
        return v;
      };
      if (po["rank"]) o.eigen.rank = static_cast<int>(integer("rank", 1, 100000));
      if (po["oversampling"]) o.eigen.oversampling = static_cast<int>(integer("oversampling", 0, 100000));
      if (po["samples"]) o.samples = static_cast<int>(integer("samples", 0, 10000));
      if (po["seed"]) o.eigen.seed = static_cast<std::uint64_t>(integer("seed", 0, (1LL << 53)));
      if (po["hessian"]) {
        const std::string h = ctx.string(po["hessian"], "calibration.posterior.hessian");
        if (h != "gauss_newton" && h != "exact")
          ctx.fail(po["hessian"], "calibration.posterior.hessian", "expected gauss_newton or exact, got '" + h + "'");
        o.hessian = h == "exact" ? pde::HessianProduct::Exact : pde::HessianProduct::GaussNewton;
      }
      if (o.samples > 0 && cc.prior.kind != pde::PriorKind::BiLaplacian)
        ctx.fail(po["samples"], "calibration.posterior.samples",
                 "posterior samples need the bilaplacian prior (calibration.prior.kind is " +
                     pde::to_string(cc.prior.kind) + "); set samples: 0");
      const std::int64_t unknowns = cfg.domain.cells[0] * (cfg.equations.dim >= 2 ? cfg.domain.cells[1] : 1) *
                                    (cfg.equations.dim >= 3 ? cfg.domain.cells[2] : 1);
      if (static_cast<std::int64_t>(o.eigen.rank) + o.eigen.oversampling > unknowns)
        ctx.fail(po["rank"] ? po["rank"] : po, "calibration.posterior.rank",
                 "rank + oversampling = " + std::to_string(o.eigen.rank + o.eigen.oversampling) + " exceeds the " +
                     std::to_string(unknowns) + " unknowns of the field");
    }
    return cc;
  }
}

std::string PdeConfig::to_yaml() const {
  YAML::Emitter e;
  e << YAML::BeginMap;
  if (!description.empty()) e << YAML::Key << "description" << YAML::Value << description;
  e << YAML::Key << "pde" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "grid" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "n" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int d = 0; d < equations.dim; ++d) e << domain.cells[static_cast<std::size_t>(d)];
  e << YAML::EndSeq << YAML::Key << "extent" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int d = 0; d < equations.dim; ++d)
    e << YAML::Flow << YAML::BeginSeq << domain.extent[static_cast<std::size_t>(d)][0]
      << domain.extent[static_cast<std::size_t>(d)][1] << YAML::EndSeq;
  e << YAML::EndSeq << YAML::Key << "boundary" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int d = 0; d < equations.dim; ++d) e << pde::to_string(domain.boundary[static_cast<std::size_t>(d)]);
  e << YAML::EndSeq << YAML::Key << "dirichlet_value" << YAML::Value << domain.dirichlet_value << YAML::EndMap;
  e << YAML::Key << "fields" << YAML::Value << YAML::Flow << equations.fields;
  e << YAML::Key << "parameters" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < parameters.size(); ++i) e << YAML::Key << equations.parameters[i] << YAML::Value << parameters[i];
  e << YAML::EndMap << YAML::Key << "parameter_fields" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < parameter_fields.size(); ++i)
    e << YAML::Key << equations.parameter_fields[i] << YAML::Value << parameter_fields[i];
  e << YAML::EndMap << YAML::Key << "initial" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < initial.size(); ++i) e << YAML::Key << equations.fields[i] << YAML::Value << initial[i];
  e << YAML::EndMap << YAML::Key << "equations" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < equations.equations.size(); ++i)
    e << YAML::Key << equations.fields[i] << YAML::Value << equations.equations[i];
  e << YAML::EndMap << YAML::EndMap;
  e << YAML::Key << "integrator" << YAML::Value << YAML::BeginMap << YAML::Key << "method" << YAML::Value << method;
  if (!explicit_rk) e << YAML::Key << "theta" << YAML::Value << integrator.theta;
  e << YAML::Key << "dt" << YAML::Value << integrator.dt << YAML::Key << "steps" << YAML::Value << integrator.steps;
  if (!explicit_rk)
    e << YAML::Key << "ksp_rtol" << YAML::Value << integrator.ksp.rtol << YAML::Key << "pc_type"
      << YAML::Value << (integrator.ksp.pc_type.empty() ? "default" : integrator.ksp.pc_type);
  e << YAML::EndMap;
  if (objective.present) {
    e << YAML::Key << "objective" << YAML::Value << YAML::BeginMap << YAML::Key << objective.kind << YAML::Value;
    if (objective.kind == "integral") e << equations.fields[static_cast<std::size_t>(objective.component)];
    if (objective.kind == "probe") {
      e << YAML::BeginMap << YAML::Key << "cell" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (int d = 0; d < equations.dim; ++d) e << objective.cell[static_cast<std::size_t>(d)];
      e << YAML::EndSeq << YAML::Key << "field" << YAML::Value
        << equations.fields[static_cast<std::size_t>(objective.component)] << YAML::EndMap;
    }
    if (objective.kind == "misfit") {
      e << YAML::BeginMap;
      for (std::size_t i = 0; i < objective.data.size(); ++i) e << YAML::Key << equations.fields[i] << YAML::Value << objective.data[i];
      e << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  e << YAML::Key << "sensitivity" << YAML::Value << YAML::BeginMap << YAML::Key << "method" << YAML::Value
    << "discrete_adjoint" << YAML::Key << "checkpointing" << YAML::Value << ode::to_string(checkpointing)
    << YAML::EndMap;
  e << YAML::Key << "output" << YAML::Value << YAML::BeginMap << YAML::Key << "file" << YAML::Value << output_file
    << YAML::Key << "every" << YAML::Value << output_every << YAML::EndMap;
  e << YAML::EndMap;
  return e.c_str();
}

}  // namespace costate::io
