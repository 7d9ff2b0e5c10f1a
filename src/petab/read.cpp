// petab::read — the YAML problem file and its TSV tables (see
// include/costate/petab/problem.hpp).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/petab/output.hpp"
#include "costate/petab/problem.hpp"
#include "costate/io/input.hpp"  // io::nearest: "did you mean" suggestions
#include "costate/io/yaml_document.hpp"

namespace costate::petab {
namespace {

namespace fs = std::filesystem;

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = io::nearest(word, candidates);
  return near.empty() ? std::string{} : "; did you mean '" + near + "'?";
}

/// A TSV table: header and rows, each cell with its line and column.
struct Table {
  std::string file;
  std::vector<std::string> header;
  struct Row {
    std::size_t line = 0;
    std::vector<std::string> cells;
  };
  std::vector<Row> rows;

  long column(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<long>(it - header.begin());
  }
  long required(const std::string& name) const {
    const long c = column(name);
    if (c < 0)
      throw Error(file + ":1: missing column '" + name + "'" + did_you_mean(name, header));
    return c;
  }
  /// The cell (empty when the column is absent).
  const std::string& cell(const Row& r, long c) const {
    static const std::string empty;
    return c < 0 ? empty : r.cells[static_cast<std::size_t>(c)];
  }
  std::string where(const Row& r, long c) const {
    std::string w = file + ":" + std::to_string(r.line);
    if (c >= 0) w += ":" + std::to_string(c + 1) + " (" + header[static_cast<std::size_t>(c)] + ")";
    return w;
  }
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\n')) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && s[b] == ' ') ++b;
  return s.substr(b);
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::stringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(trim(cell));
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

/// The tables' one parser: `text` is the table, `name` the file its
/// messages name (with the line and column).
Table parse_table(const std::string& text, const std::string& name) {
  // A UTF-8 byte-order mark (spreadsheet exports write one) is not part of
  // the first column's name.
  std::istringstream in(text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text);
  Table t;
  t.file = name;
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (trim(line).empty()) continue;
    if (t.header.empty()) {
      t.header = split(trim(line), '\t');
      for (std::size_t c = 0; c < t.header.size(); ++c) {
        if (t.header[c].empty())
          throw Error(name + ":" + std::to_string(n) + ":" + std::to_string(c + 1) +
                      ": empty column name in the header");
        for (std::size_t d = 0; d < c; ++d)
          if (t.header[d] == t.header[c])
            throw Error(name + ":" + std::to_string(n) + ":" + std::to_string(c + 1) +
                        ": column '" + t.header[c] + "' appears twice");
      }
      continue;
    }
    std::string body = line;
    while (!body.empty() && (body.back() == '\r' || body.back() == '\n')) body.pop_back();
    std::vector<std::string> cells = split(body, '\t');
    // Trailing empty cells may be left out.
    if (cells.size() > t.header.size())
      throw Error(name + ":" + std::to_string(n) + ": " + std::to_string(cells.size()) +
                  " cells, but the header has " + std::to_string(t.header.size()) +
                  " columns (the tables are tab-separated)");
    cells.resize(t.header.size());
    t.rows.push_back({n, std::move(cells)});
  }
  if (t.header.empty()) throw Error(name + ": the table is empty (no header line)");
  return t;
}

/// A file's whole text; nullopt when it cannot be opened or read.
std::optional<std::string> slurp(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(text).str();
}

/// Where read_from gets a file's text (by the path it would open): nullopt
/// for a file that cannot be opened.
using Loader = std::function<std::optional<std::string>(const std::string&)>;

std::string load(const Loader& loader, const std::string& path, const std::string& what) {
  std::optional<std::string> text = loader(path);
  if (!text) throw Error(path + ": cannot open the " + what);
  return std::move(*text);
}

Table read_table(const Loader& loader, const std::string& path) {
  return parse_table(load(loader, path, "table"), path);
}

bool is_nan_text(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  return l == "nan";
}

/// Parses a number (the whole cell); false if it is not one.
bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  if (is_nan_text(s)) {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  const char* b = s.c_str();
  char* e = nullptr;
  errno = 0;
  const double v = std::strtod(b, &e);
  if (e == b || *e != '\0') return false;
  out = v;
  return true;
}

double number(const Table& t, const Table::Row& r, long c) {
  double v = 0.0;
  const std::string& s = t.cell(r, c);
  if (!parse_number(s, v))
    throw Error(t.where(r, c) + ": expected a number, got '" + s + "'");
  return v;
}

std::string path_relative(const fs::path& base, const std::string& name) {
  const fs::path p(name);
  return (p.is_absolute() ? p : base / p).lexically_normal().string();
}

/// The files a problem lists under `key` (one or more).
std::vector<std::string> files(const YAML::Node& problem, const std::string& key,
                               const std::string& yaml, const fs::path& base) {
  const YAML::Node n = problem[key];
  if (!n || !n.IsSequence() || n.size() == 0)
    throw Error(yaml + ": problems[0]." + key + " must list at least one file");
  std::vector<std::string> out;
  for (std::size_t k = 0; k < n.size(); ++k) out.push_back(path_relative(base, n[k].as<std::string>()));
  return out;
}

std::string only_file(const YAML::Node& problem, const std::string& key, const std::string& yaml) {
  const YAML::Node n = problem[key];
  if (!n || !n.IsSequence() || n.size() == 0)
    throw Error(yaml + ": problems[0]." + key + " must list one file");
  if (n.size() != 1)
    throw Error(yaml + ": problems[0]." + key + " lists " + std::to_string(n.size()) +
                " files; several " + key + " per problem are not supported");
  return n[0].as<std::string>();
}

/// Placeholder count: the largest k in "<prefix><k>_<id>" in `formula`.
std::size_t placeholders(const std::string& formula, const std::string& prefix,
                         const std::string& id) {
  std::size_t count = 0;
  for (std::size_t pos = formula.find(prefix); pos != std::string::npos;
       pos = formula.find(prefix, pos + 1)) {
    if (pos > 0 && (std::isalnum(static_cast<unsigned char>(formula[pos - 1])) ||
                    formula[pos - 1] == '_'))
      continue;
    std::size_t q = pos + prefix.size();
    std::size_t k = 0;
    const std::size_t digits_from = q;
    while (q < formula.size() && std::isdigit(static_cast<unsigned char>(formula[q])))
      k = 10 * k + static_cast<std::size_t>(formula[q++] - '0');
    if (q == digits_from || q >= formula.size() || formula[q] != '_') continue;
    if (formula.compare(q + 1, id.size(), id) != 0) continue;
    const std::size_t end = q + 1 + id.size();
    if (end < formula.size() &&
        (std::isalnum(static_cast<unsigned char>(formula[end])) || formula[end] == '_'))
      continue;
    count = std::max(count, k);
  }
  return count;
}

}  // namespace

std::string to_string(Scale s) {
  switch (s) {
    case Scale::Lin: return "lin";
    case Scale::Log: return "log";
    case Scale::Log10: return "log10";
  }
  return "?";
}
std::string to_string(Transformation t) {
  switch (t) {
    case Transformation::Lin: return "lin";
    case Transformation::Log: return "log";
    case Transformation::Log10: return "log10";
  }
  return "?";
}
std::string to_string(Distribution d) {
  return d == Distribution::Normal ? "normal" : "laplace";
}

double to_scale(double linear, Scale scale) {
  switch (scale) {
    case Scale::Lin: return linear;
    case Scale::Log: return std::log(linear);
    case Scale::Log10: return std::log10(linear);
  }
  return linear;
}
double from_scale(double scaled, Scale scale) {
  switch (scale) {
    case Scale::Lin: return scaled;
    case Scale::Log: return std::exp(scaled);
    case Scale::Log10: return std::pow(10.0, scaled);
  }
  return scaled;
}

std::vector<std::string> Problem::estimated_ids() const {
  std::vector<std::string> ids;
  for (std::size_t k : estimated) ids.push_back(parameters[k].id);
  return ids;
}
std::vector<double> Problem::nominal_on_scale() const {
  std::vector<double> v;
  for (std::size_t k : estimated) v.push_back(to_scale(parameters[k].nominal, parameters[k].scale));
  return v;
}
std::array<std::vector<double>, 2> Problem::bounds_on_scale() const {
  std::array<std::vector<double>, 2> b;
  for (std::size_t k : estimated) {
    b[0].push_back(to_scale(parameters[k].lower, parameters[k].scale));
    b[1].push_back(to_scale(parameters[k].upper, parameters[k].scale));
  }
  return b;
}
long Problem::parameter_index(const std::string& id) const {
  for (std::size_t k = 0; k < parameters.size(); ++k)
    if (parameters[k].id == id) return static_cast<long>(k);
  return -1;
}
std::string Problem::brief_report() const {
  std::ostringstream s;
  s << file << ": " << model.state_names.size() << " states, " << parameters.size()
    << " parameters (" << estimated.size() << " estimated), " << observables.size()
    << " observables, " << conditions.size() << " conditions, " << experiments.size()
    << " experiments, " << measurements.size() << " measurements";
  return s.str();
}

bool is_problem_file(const std::string& path) {
  try {
    const YAML::Node root = YAML::LoadFile(path);
    return root.IsMap() && root["format_version"] && root["problems"];
  } catch (const YAML::Exception&) {
    return false;
  }
}

namespace {

/// The one reader: read() and read_text() differ only in where `loader`
/// finds the files' text.
Problem read_from(const std::string& yaml_path, const Loader& loader) {
  Problem pb;
  pb.file = yaml_path;
  YAML::Node root;
  {
    const std::optional<std::string> text = loader(yaml_path);
    if (!text) throw Error(yaml_path + ": cannot open the PEtab problem file");
    try {
      root = io::load_yaml_document(*text, yaml_path);  // one document, no key twice
    } catch (const YAML::Exception& e) {
      throw Error(yaml_path + ":" + std::to_string(e.mark.line + 1) + ":" +
                  std::to_string(e.mark.column + 1) + ": " + e.msg);
    }
  }
  if (!root.IsMap()) throw Error(yaml_path + ": expected a YAML map (format_version, problems…)");
  const fs::path base = fs::path(yaml_path).parent_path();
  std::string sbml;
  // A value of the wrong YAML kind (a list or map where a name belongs, a
  // scalar where a map does) makes yaml-cpp throw: report it at its place.
  try {
    const YAML::Node version = root["format_version"];
    if (!version) throw Error(yaml_path + ": missing key 'format_version'");
    const std::string v = version.as<std::string>();
    if (v != "1" && v != "1.0.0")
      throw Error(yaml_path + ": format_version " + v +
                  " is not supported (this reader reads PEtab format version 1)");
    if (!root["parameter_file"]) throw Error(yaml_path + ": missing key 'parameter_file'");
    if (root["parameter_file"].IsSequence())
      throw Error(yaml_path + ": several parameter_file entries are not supported");
    pb.parameter_file = path_relative(base, root["parameter_file"].as<std::string>());
    const YAML::Node problems = root["problems"];
    if (!problems || !problems.IsSequence() || problems.size() == 0)
      throw Error(yaml_path + ": missing key 'problems' (a list with one problem)");
    if (problems.size() != 1)
      throw Error(yaml_path + ": " + std::to_string(problems.size()) +
                  " problems; several problems in one file are not supported");
    const YAML::Node p0 = problems[0];
    for (auto it = p0.begin(); it != p0.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      const std::vector<std::string> known = {"condition_files", "measurement_files",
                                              "observable_files", "sbml_files",
                                              "visualization_files"};
      if (std::find(known.begin(), known.end(), k) == known.end())
        throw Error(yaml_path + ": problems[0]." + k + " is not supported" +
                    did_you_mean(k, known));
    }
    sbml = path_relative(base, only_file(p0, "sbml_files", yaml_path));
    pb.condition_files = files(p0, "condition_files", yaml_path, base);
    pb.measurement_files = files(p0, "measurement_files", yaml_path, base);
    pb.observable_files = files(p0, "observable_files", yaml_path, base);
    pb.condition_file = pb.condition_files[0];
    pb.measurement_file = pb.measurement_files[0];
    pb.observable_file = pb.observable_files[0];
  } catch (const YAML::Exception& e) {
    throw Error(yaml_path + ":" + std::to_string(e.mark.line + 1) + ":" +
                std::to_string(e.mark.column + 1) + ": not a PEtab problem file: " + e.msg +
                " (format_version and parameter_file are single values, problems a list "
                "of one map of file lists)");
  }

  // PEtab: a condition-table column overrides the model's value of its id,
  // an initial assignment included — ignored where every condition gives a
  // value (an empty or NaN cell keeps the model's value, assignment and all).
  sbml::ReadOptions sbml_options;
  for (const std::string& condition_file : pb.condition_files) {
    const Table t = read_table(loader, condition_file);
    for (std::size_t c = 0; c < t.header.size(); ++c) {
      const std::string& h = t.header[c];
      if (h == "conditionId" || h == "conditionName") continue;
      const bool every = std::all_of(t.rows.begin(), t.rows.end(), [&](const Table::Row& r) {
        return c < r.cells.size() && !r.cells[c].empty() && !is_nan_text(r.cells[c]);
      });
      if (every) sbml_options.ignore_initial_assignments.push_back(h);
    }
  }
  // comp external model definitions: read from files next to the SBML file.
  sbml_options.base_folder = fs::path(sbml).parent_path().string();
  pb.model = sbml::read_string(load(loader, sbml, "SBML file"), sbml, sbml_options);
  const sbml::Model& m = pb.model;
  const std::size_t ny = m.state_names.size(), np = m.parameter_names.size();
  if (ny == 0)
    throw Error(sbml + ": the model has no state (only assignments); a PEtab problem needs one");
  if (!m.delays.empty())
    throw Error(m.delays.front().text + ": delay() in a PEtab problem is not supported (the "
                "likelihood's gradient would need sensitivities through delay(), which are not "
                "supported; sbml::Model::delays, ode::integrate_with_delays simulate it)");
  const std::vector<std::string>& inter = m.intermediate_names;

  // ---- parameters
  {
    const Table t = read_table(loader, pb.parameter_file);
    const long c_id = t.required("parameterId"), c_scale = t.required("parameterScale"),
               c_lo = t.required("lowerBound"), c_hi = t.required("upperBound"),
               c_nom = t.required("nominalValue"), c_est = t.required("estimate");
    const long c_prior = t.column("objectivePriorType"),
               c_prior_par = t.column("objectivePriorParameters");
    for (const auto& r : t.rows) {
      Parameter p;
      p.line = r.line;
      p.id = t.cell(r, c_id);
      if (p.id.empty()) throw Error(t.where(r, c_id) + ": empty parameterId");
      if (pb.parameter_index(p.id) >= 0)
        throw Error(t.where(r, c_id) + ": parameter '" + p.id + "' appears twice");
      const std::string& s = t.cell(r, c_scale);
      if (s == "lin") p.scale = Scale::Lin;
      else if (s == "log") p.scale = Scale::Log;
      else if (s == "log10") p.scale = Scale::Log10;
      else
        throw Error(t.where(r, c_scale) + ": parameterScale '" + s +
                    "' is not one of lin, log, log10");
      const std::string& e = t.cell(r, c_est);
      if (e == "1") p.estimate = true;
      else if (e == "0") p.estimate = false;
      else throw Error(t.where(r, c_est) + ": estimate must be 0 or 1, got '" + e + "'");
      p.nominal = number(t, r, c_nom);
      if (p.estimate) {
        p.lower = number(t, r, c_lo);
        p.upper = number(t, r, c_hi);
        if (!(p.lower <= p.upper))
          throw Error(t.where(r, c_lo) + ": lowerBound " + t.cell(r, c_lo) + " above upperBound " +
                      t.cell(r, c_hi));
        if (p.scale != Scale::Lin && !(p.lower > 0.0))
          throw Error(t.where(r, c_lo) + ": lowerBound must be positive on scale " + s);
      }
      // Only an estimated parameter lives on its scale; a fixed one is used
      // at its nominal value as it is, whatever its scale says. An
      // estimated one at 0 (a published fit at the bound's limit, e.g.
      // Lang_PLOSComputBiol2024's kDpApc_1) is −inf on a log scale: it
      // evaluates to exactly 0, with gradient component 0.
      if (p.estimate && p.scale != Scale::Lin && !(p.nominal >= 0.0))
        throw Error(t.where(r, c_nom) + ": nominalValue must not be negative on scale " + s +
                    " for an estimated parameter");
      if (const std::string& pr = t.cell(r, c_prior); !pr.empty()) {
        const std::vector<std::pair<std::string, Prior>> kinds = {
            {"normal", Prior::Normal},
            {"laplace", Prior::Laplace},
            {"uniform", Prior::Uniform},
            {"parameterScaleNormal", Prior::ScaleNormal},
            {"parameterScaleLaplace", Prior::ScaleLaplace},
            {"parameterScaleUniform", Prior::ScaleUniform}};
        std::vector<std::string> names;
        for (const auto& [n, k] : kinds) {
          names.push_back(n);
          if (n == pr) p.prior = k;
        }
        if (p.prior == Prior::None)
          throw Error(t.where(r, c_prior) + ": objectivePriorType '" + pr +
                      "' is not supported (supported: normal, laplace, uniform, "
                      "parameterScaleNormal, parameterScaleLaplace, parameterScaleUniform)" +
                      did_you_mean(pr, names));
        const std::vector<std::string> args = split(t.cell(r, c_prior_par), ';');
        if (args.size() != 2 || !parse_number(args[0], p.prior_a) || !parse_number(args[1], p.prior_b))
          throw Error(t.where(r, c_prior_par) + ": objectivePriorParameters must be two numbers "
                      "'a;b' for the prior '" + pr + "', got '" + t.cell(r, c_prior_par) + "'");
        if (!(p.prior_b > (p.prior == Prior::Uniform || p.prior == Prior::ScaleUniform ? p.prior_a : 0.0)))
          throw Error(t.where(r, c_prior_par) + ": objectivePriorParameters '" +
                      t.cell(r, c_prior_par) + "': the second must be positive (and above the "
                      "first for a uniform prior)");
      }
      if (m.state_index(p.id) >= 0)
        throw Error(t.where(r, c_id) + ": '" + p.id +
                    "' is a state of the model; the parameter table may not name it");
      pb.parameters.push_back(p);
    }
    for (std::size_t k = 0; k < pb.parameters.size(); ++k)
      if (pb.parameters[k].estimate) pb.estimated.push_back(k);
  }
  std::vector<std::string> table_ids;
  for (const auto& p : pb.parameters) table_ids.push_back(p.id);
  pb.model_parameter_row.assign(np, -1);
  for (std::size_t j = 0; j < np; ++j) pb.model_parameter_row[j] = pb.parameter_index(m.parameter_names[j]);

  // A cell that is a number or a parameter-table id.
  auto ref = [&](const Table& t, const Table::Row& r, long c, const std::string& text) {
    Ref out;
    if (parse_number(text, out.value)) return out;
    out.parameter = pb.parameter_index(text);
    if (out.parameter < 0)
      throw Error(t.where(r, c) + ": '" + text +
                  "' is neither a number nor a parameter of the parameter table" +
                  did_you_mean(text, table_ids));
    return out;
  };

  // ---- observables (compiled below, once the placeholder counts are known)
  std::vector<Table> obs_tables;
  for (const std::string& file : pb.observable_files) obs_tables.push_back(read_table(loader, file));
  std::vector<std::size_t> obs_table_of;  // observable → its table
  for (std::size_t f = 0; f < obs_tables.size(); ++f) {
    const Table& t = obs_tables[f];
    const long c_id = t.required("observableId"), c_f = t.required("observableFormula"),
               c_n = t.required("noiseFormula"), c_tr = t.column("observableTransformation"),
               c_d = t.column("noiseDistribution");
    for (const auto& r : t.rows) {
      Observable o;
      o.line = r.line;
      o.id = t.cell(r, c_id);
      if (o.id.empty()) throw Error(t.where(r, c_id) + ": empty observableId");
      for (const auto& q : pb.observables)
        if (q.id == o.id) throw Error(t.where(r, c_id) + ": observable '" + o.id + "' appears twice");
      o.formula = t.cell(r, c_f);
      o.noise_formula = t.cell(r, c_n);
      if (o.formula.empty()) throw Error(t.where(r, c_f) + ": empty observableFormula");
      if (o.noise_formula.empty()) throw Error(t.where(r, c_n) + ": empty noiseFormula");
      const std::string& tr = t.cell(r, c_tr);
      if (tr.empty() || tr == "lin") o.transformation = Transformation::Lin;
      else if (tr == "log") o.transformation = Transformation::Log;
      else if (tr == "log10") o.transformation = Transformation::Log10;
      else
        throw Error(t.where(r, c_tr) + ": observableTransformation '" + tr +
                    "' is not supported (lin, log, log10)");
      const std::string& d = t.cell(r, c_d);
      if (d.empty() || d == "normal") o.distribution = Distribution::Normal;
      else if (d == "laplace") o.distribution = Distribution::Laplace;
      else
        throw Error(t.where(r, c_d) + ": noiseDistribution '" + d +
                    "' is not supported (normal, laplace)");
      o.n_observable_parameters =
          std::max(placeholders(o.formula, "observableParameter", o.id),
                   placeholders(o.noise_formula, "observableParameter", o.id));
      o.n_noise_parameters = placeholders(o.noise_formula, "noiseParameter", o.id);
      pb.max_observable_parameters = std::max(pb.max_observable_parameters, o.n_observable_parameters);
      pb.max_noise_parameters = std::max(pb.max_noise_parameters, o.n_noise_parameters);
      pb.observables.push_back(std::move(o));
      obs_table_of.push_back(f);
    }
  }

  // ---- conditions
  for (const std::string& condition_file : pb.condition_files) {
    const Table t = read_table(loader, condition_file);
    const long c_id = t.required("conditionId");
    std::vector<std::string> model_ids = m.parameter_names;
    model_ids.insert(model_ids.end(), m.state_names.begin(), m.state_names.end());
    struct Target {
      long parameter = -1, state = -1;
    };
    std::vector<Target> targets(t.header.size());
    for (std::size_t c = 0; c < t.header.size(); ++c) {
      const std::string& h = t.header[c];
      if (static_cast<long>(c) == c_id || h == "conditionName") continue;
      targets[c].parameter = m.parameter_index(h);
      targets[c].state = m.state_index(h);
      if (targets[c].parameter < 0 && targets[c].state < 0) {
        std::string why;
        if (std::find(inter.begin(), inter.end(), h) != inter.end())
          why = " ('" + h + "' is set by a rule or an initial assignment in the model; "
                "overriding it is not supported)";
        throw Error(t.file + ":1:" + std::to_string(c + 1) + ": condition column '" + h +
                    "' is not a parameter, species or compartment of the model " + m.file + why +
                    did_you_mean(h, model_ids));
      }
      if (pb.parameter_index(h) >= 0)
        throw Error(t.file + ":1:" + std::to_string(c + 1) + ": '" + h +
                    "' is both a condition column and in the parameter table");
    }
    for (const auto& r : t.rows) {
      Condition cond;
      cond.line = r.line;
      cond.id = t.cell(r, c_id);
      if (cond.id.empty()) throw Error(t.where(r, c_id) + ": empty conditionId");
      for (const auto& q : pb.conditions)
        if (q.id == cond.id)
          throw Error(t.where(r, c_id) + ": condition '" + cond.id + "' appears twice");
      cond.parameters.assign(np, Ref{});
      cond.states.assign(ny, Ref{});
      for (std::size_t c = 0; c < t.header.size(); ++c) {
        if (targets[c].parameter < 0 && targets[c].state < 0) continue;
        const std::string& s = r.cells[c];
        if (s.empty()) continue;  // keep
        const Ref v = ref(t, r, static_cast<long>(c), s);
        if (targets[c].parameter >= 0) cond.parameters[static_cast<std::size_t>(targets[c].parameter)] = v;
        else cond.states[static_cast<std::size_t>(targets[c].state)] = v;
      }
      pb.conditions.push_back(std::move(cond));
    }
  }
  std::vector<std::string> condition_ids, observable_ids;
  for (const auto& c : pb.conditions) condition_ids.push_back(c.id);
  for (const auto& o : pb.observables) observable_ids.push_back(o.id);
  auto find_id = [](const std::vector<std::string>& ids, const std::string& id) {
    const auto it = std::find(ids.begin(), ids.end(), id);
    return it == ids.end() ? -1L : static_cast<long>(it - ids.begin());
  };

  // ---- measurements
  for (std::size_t file = 0; file < pb.measurement_files.size(); ++file) {
    const Table t = read_table(loader, pb.measurement_files[file]);
    const long c_obs = t.required("observableId"), c_sim = t.required("simulationConditionId"),
               c_t = t.required("time"), c_m = t.required("measurement"),
               c_pre = t.column("preequilibrationConditionId"),
               c_op = t.column("observableParameters"), c_np = t.column("noiseParameters");
    auto overrides = [&](const Table::Row& r, long c, std::size_t expected,
                         const std::string& what, const Observable& o) {
      std::vector<Ref> out;
      const std::string& s = t.cell(r, c);
      if (!s.empty())
        for (const std::string& item : split(s, ';')) out.push_back(ref(t, r, c, item));
      if (out.size() != expected)
        throw Error(t.where(r, c) + ": observable '" + o.id + "' has " +
                    std::to_string(expected) + " " + what + "<k>_" + o.id + " placeholders, the row gives " +
                    std::to_string(out.size()) + " values");
      return out;
    };
    for (const auto& r : t.rows) {
      Measurement me;
      me.line = r.line;
      me.file = file;
      const long o = find_id(observable_ids, t.cell(r, c_obs));
      if (o < 0)
        throw Error(t.where(r, c_obs) + ": unknown observable '" + t.cell(r, c_obs) + "'" +
                    did_you_mean(t.cell(r, c_obs), observable_ids));
      me.observable = static_cast<std::size_t>(o);
      const long c = find_id(condition_ids, t.cell(r, c_sim));
      if (c < 0)
        throw Error(t.where(r, c_sim) + ": unknown condition '" + t.cell(r, c_sim) + "'" +
                    did_you_mean(t.cell(r, c_sim), condition_ids));
      me.condition = static_cast<std::size_t>(c);
      const std::string& pre = t.cell(r, c_pre);
      if (!pre.empty()) {
        me.preequilibration = find_id(condition_ids, pre);
        if (me.preequilibration < 0)
          throw Error(t.where(r, c_pre) + ": unknown condition '" + pre + "'" +
                      did_you_mean(pre, condition_ids));
      }
      me.time = number(t, r, c_t);
      // inf: a steady-state measurement (the simulation condition's steady
      // state; petab::evaluate).
      if (!(me.time >= 0.0))
        throw Error(t.where(r, c_t) + ": time must be >= 0, or inf for a steady-state measurement (got '" +
                    t.cell(r, c_t) + "')");
      me.value = number(t, r, c_m);
      if (!std::isfinite(me.value))
        throw Error(t.where(r, c_m) + ": the measurement must be a finite number");
      const Observable& ob = pb.observables[me.observable];
      if (ob.transformation != Transformation::Lin && !(me.value > 0.0))
        throw Error(t.where(r, c_m) + ": measurement " + t.cell(r, c_m) + " of the " +
                    to_string(ob.transformation) + "-transformed observable '" + ob.id +
                    "' must be positive");
      me.observable_parameters =
          overrides(r, c_op, ob.n_observable_parameters, "observableParameter", ob);
      me.noise_parameters = overrides(r, c_np, ob.n_noise_parameters, "noiseParameter", ob);
      pb.measurements.push_back(std::move(me));
    }
    if (pb.measurements.empty()) throw Error(t.file + ": no measurements");
  }

  // ---- formula variables and compiled observables
  {
    auto& v = pb.formula_variables;
    v.push_back("time");
    v.insert(v.end(), m.state_names.begin(), m.state_names.end());
    v.insert(v.end(), m.parameter_names.begin(), m.parameter_names.end());
    v.insert(v.end(), inter.begin(), inter.end());
    for (std::size_t k = 0; k < pb.parameters.size(); ++k)
      v.push_back(m.parameter_index(pb.parameters[k].id) >= 0 ? "#model:" + pb.parameters[k].id
                                                               : pb.parameters[k].id);
    const std::size_t fixed = v.size();
    v.resize(fixed + pb.max_observable_parameters + pb.max_noise_parameters);
    for (std::size_t i = 0; i < pb.observables.size(); ++i) {
      Observable& o = pb.observables[i];
      const Table& obs_table = obs_tables[obs_table_of[i]];
      std::vector<std::string> names = v;
      for (std::size_t k = 0; k < pb.max_observable_parameters + pb.max_noise_parameters; ++k)
        names[fixed + k] = "#slot" + std::to_string(k);
      for (std::size_t k = 0; k < o.n_observable_parameters; ++k)
        names[fixed + k] = "observableParameter" + std::to_string(k + 1) + "_" + o.id;
      for (std::size_t k = 0; k < o.n_noise_parameters; ++k)
        names[fixed + pb.max_observable_parameters + k] =
            "noiseParameter" + std::to_string(k + 1) + "_" + o.id;
      const long c_f = obs_table.column("observableFormula"), c_n = obs_table.column("noiseFormula");
      const std::string at = obs_table.file + ":" + std::to_string(o.line) + ":";
      o.program = expr::Program::compile(o.formula, names,
                                         at + std::to_string(c_f + 1) + " (observableFormula of " + o.id + ")");
      o.noise_program = expr::Program::compile(
          o.noise_formula, names, at + std::to_string(c_n + 1) + " (noiseFormula of " + o.id + ")");
    }
  }
  (void)ny;

  // ---- experiments: one per (preequilibration, simulation) pair, sorted by ids
  {
    std::map<std::pair<std::string, std::string>, std::size_t> index;
    std::vector<Experiment> ex;
    for (std::size_t i = 0; i < pb.measurements.size(); ++i) {
      const Measurement& me = pb.measurements[i];
      const std::string pre = me.preequilibration < 0
                                  ? std::string{}
                                  : pb.conditions[static_cast<std::size_t>(me.preequilibration)].id;
      const auto key = std::make_pair(pre, pb.conditions[me.condition].id);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, ex.size()).first;
        ex.push_back(Experiment{me.preequilibration, me.condition, {}, {}});
      }
      Experiment& e = ex[it->second];
      const auto t = std::lower_bound(e.times.begin(), e.times.end(), me.time);
      const auto k = static_cast<std::size_t>(t - e.times.begin());
      if (t == e.times.end() || *t != me.time) {
        e.times.insert(t, me.time);
        e.at_time.insert(e.at_time.begin() + static_cast<std::ptrdiff_t>(k), std::vector<std::size_t>{});
      }
      e.at_time[k].push_back(i);
    }
    for (const auto& [key, k] : index) pb.experiments.push_back(std::move(ex[k]));
  }
  return pb;
}

}  // namespace

Problem read(const std::string& yaml_path) { return read_from(yaml_path, slurp); }

Problem read_text(const std::string& yaml, const std::string& yaml_name,
                  const std::map<std::string, std::string>& files) {
  return read_from(yaml_name, [&](const std::string& path) -> std::optional<std::string> {
    if (path == yaml_name) return yaml;
    const auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  });
}

void write_simulation_table(const Problem& pb, const Result& result, const std::string& path) {
  // Several measurement files: one table, the first file's columns, the
  // files' rows in order (their headers must agree).
  Table t = read_table(slurp, pb.measurement_file);
  std::vector<std::size_t> file_of(t.rows.size(), 0);
  for (std::size_t f = 1; f < pb.measurement_files.size(); ++f) {
    Table more = read_table(slurp, pb.measurement_files[f]);
    COSTATE_CHECK(more.header == t.header,
                  pb.measurement_files[f] << ": its columns differ from " << pb.measurement_file
                                          << "'s; the simulation table needs one header");
    for (auto& r : more.rows) {
      t.rows.push_back(std::move(r));
      file_of.push_back(f);
    }
  }
  const long c_m = t.required("measurement");
  COSTATE_CHECK(t.rows.size() == pb.measurements.size() && result.simulations.size() == pb.measurements.size(),
                pb.measurement_file << ": " << t.rows.size() << " rows now, but the problem was read with "
                                    << pb.measurements.size() << " measurements (and the result holds "
                                    << result.simulations.size() << " simulations)");
  std::ostringstream out;
  out.precision(17);
  for (std::size_t c = 0; c < t.header.size(); ++c)
    out << (c ? "\t" : "") << (static_cast<long>(c) == c_m ? std::string("simulation") : t.header[c]);
  out << "\n";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const Table::Row& r = t.rows[i];
    COSTATE_CHECK(r.line == pb.measurements[i].line && file_of[i] == pb.measurements[i].file,
                  pb.measurement_files[file_of[i]] << ":" << r.line
                                                   << ": the table changed since the problem was read");
    for (std::size_t c = 0; c < r.cells.size(); ++c) {
      out << (c ? "\t" : "");
      if (static_cast<long>(c) == c_m)
        out << result.simulations[i];
      else
        out << r.cells[c];
    }
    out << "\n";
  }
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial);
    COSTATE_CHECK(file && (file << out.str()) && file.flush(), path << ": cannot write the simulation table");
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  COSTATE_CHECK(!ec, path << ": cannot rename " << partial << " to it: " << ec.message());
}

}  // namespace costate::petab
