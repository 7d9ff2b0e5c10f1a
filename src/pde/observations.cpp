// pde::Observations and the sensor-file reader (observations.hpp).
#include "costate/pde/observations.hpp"

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/tensor/reduce.hpp"

namespace costate::pde {

namespace {

std::string fmt(double v) { return costate::detail::format_value(v); }

struct Cell {
  std::string text;
  std::size_t column = 1;  // 1-based
};

std::vector<Cell> split(const std::string& line) {
  std::vector<Cell> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    std::string t = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t lead = 0;
    while (lead < t.size() && (t[lead] == ' ' || t[lead] == '\t')) ++lead;
    std::size_t end = t.size();
    while (end > lead && (t[end - 1] == ' ' || t[end - 1] == '\t' || t[end - 1] == '\r')) --end;
    out.push_back({t.substr(lead, end - lead), start + lead + 1});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<Sensor> read_sensors(const std::string& path, int dim, double default_sigma) {
  COSTATE_CHECK(dim >= 1 && dim <= 3, "pde::read_sensors: dim = " << dim << " must be 1, 2 or 3");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the sensor file for reading");
  std::vector<std::string> expected{"x", "y", "z"};
  expected.resize(static_cast<std::size_t>(dim));
  expected.insert(expected.end(), {"t", "value"});
  std::string want;
  for (const auto& e : expected) want += (want.empty() ? "" : ",") + e;
  std::vector<Sensor> out;
  std::string line;
  std::size_t number = 0;
  bool header = false, with_sigma = false;
  while (std::getline(in, line)) {
    ++number;
    const std::string at = path + ":" + std::to_string(number);
    std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::vector<Cell> cells = split(line);
    if (!header) {
      header = true;
      std::size_t k = 0;
      for (; k < expected.size(); ++k)
        if (k >= cells.size() || cells[k].text != expected[k])
          throw Error(at + ":" + std::to_string(k < cells.size() ? cells[k].column : line.size() + 1) +
                      ": expected the header '" + want + "[,sigma]' (column " + std::to_string(k + 1) + " is '" +
                      expected[k] + "'), got '" + line + "'");
      if (cells.size() == k + 1 && cells[k].text == "sigma") {
        with_sigma = true;
      } else if (cells.size() != k) {
        throw Error(at + ":" + std::to_string(cells[k].column) + ": unexpected column '" + cells[k].text +
                    "' after '" + want + "'; the only optional column is 'sigma'");
      }
      if (!with_sigma && !(default_sigma > 0.0))
        throw Error(at + ": the sensor file has no 'sigma' column and no default noise sigma was given "
                         "(add a sigma column or set the noise standard deviation, e.g. sensors.sigma)");
      continue;
    }
    const std::size_t columns = expected.size() + (with_sigma ? 1 : 0);
    if (cells.size() != columns)
      throw Error(at + ":" + std::to_string(cells.size() > columns ? cells[columns].column : line.size() + 1) +
                  ": expected " + std::to_string(columns) + " comma-separated values (" + want +
                  (with_sigma ? ",sigma" : "") + "), got " + std::to_string(cells.size()));
    double v[5] = {};
    for (std::size_t k = 0; k < columns; ++k) {
      const Cell& c = cells[k];
      const std::string name = k < expected.size() ? expected[k] : "sigma";
      char* end = nullptr;
      errno = 0;
      const double x = c.text.empty() ? 0.0 : std::strtod(c.text.c_str(), &end);
      if (c.text.empty() || end != c.text.c_str() + c.text.size() || errno == ERANGE || !std::isfinite(x))
        throw Error(at + ":" + std::to_string(c.column) + ": column '" + name + "': expected a finite number, got '" +
                    c.text + "'");
      v[k] = x;
    }
    Sensor s;
    for (int d = 0; d < dim; ++d) s.position[static_cast<std::size_t>(d)] = v[d];
    s.time = v[dim];
    s.value = v[dim + 1];
    s.sigma = with_sigma ? v[dim + 2] : default_sigma;
    if (!(s.sigma > 0.0))
      throw Error(at + ":" + std::to_string(cells[static_cast<std::size_t>(dim + 2)].column) +
                  ": column 'sigma': the noise standard deviation must be > 0, got " + fmt(s.sigma));
    s.where = at;
    out.push_back(std::move(s));
  }
  if (!header) throw Error(path + ": the sensor file is empty (expected the header '" + want + "[,sigma]' and rows)");
  if (out.empty()) throw Error(path + ": the sensor file has a header but no sensor rows");
  return out;
}

Observations::Observations(const Grid& grid, std::vector<Sensor> sensors, double t0, double t_end, int component)
    : grid_(&grid), sensors_(std::move(sensors)) {
  // Every rank checks every sensor (the same list): errors on every rank.
  COSTATE_CHECK(component >= 0 && component < grid.dof(),
                "pde::Observations: component " << component << " is outside [0, " << grid.dof() << ")");
  COSTATE_CHECK(grid.stencil_width() >= 1, "pde::Observations: the grid needs a ghost layer (stencil width >= 1)");
  COSTATE_CHECK(!sensors_.empty(), "pde::Observations: no sensors");
  const double time_tol = 1e-9 * std::max({1.0, std::abs(t0), std::abs(t_end)});
  const char* axis = "xyz";
  const Box& own = grid.owned();
  const Box& gh = grid.ghosted();
  for (std::size_t r = 0; r < sensors_.size(); ++r) {
    const Sensor& s = sensors_[r];
    const std::string who = s.where.empty() ? "sensor " + std::to_string(r) : s.where;
    COSTATE_CHECK(s.sigma > 0.0 && std::isfinite(s.sigma), who << ": sigma = " << fmt(s.sigma) << " must be > 0");
    COSTATE_CHECK(std::isfinite(s.value), who << ": the value is not finite");
    COSTATE_CHECK(s.time >= t0 - time_tol && s.time <= t_end + time_tol,
                  who << ": time t = " << fmt(s.time) << " is outside the run [" << fmt(t0) << ", " << fmt(t_end)
                      << "]");
    COSTATE_CHECK(std::abs(s.time - t_end) <= time_tol,
                  who << ": time t = " << fmt(s.time) << " is before the end of the run (t = " << fmt(t_end)
                      << "); observations at earlier times are not supported (the objective is terminal): "
                         "give sensors at the final time only");
    Local loc;
    loc.index = r;
    loc.value = s.value;
    loc.inv_variance = 1.0 / (s.sigma * s.sigma);
    bool mine = true;
    std::array<std::array<std::int64_t, 2>, 3> idx{};
    std::array<std::array<double, 2>, 3> w{};
    for (int d = 0; d < 3; ++d) {
      const auto D = static_cast<std::size_t>(d);
      idx[D] = {0, 0};
      w[D] = {1.0, 0.0};
      if (d >= grid.dim()) continue;
      const auto& ext = grid.spec().extent[D];
      const double x = s.position[D];
      COSTATE_CHECK(std::isfinite(x) && x >= ext[0] && x <= ext[1],
                    who << ": sensor " << axis[d] << " = " << fmt(x) << " is outside the domain [" << fmt(ext[0])
                        << ", " << fmt(ext[1]) << "]");
      const std::int64_t n = grid.cells(d);
      const double h = grid.spacing(d);
      const std::int64_t cell = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor((x - ext[0]) / h)), n - 1);
      mine = mine && cell >= own.start[D] && cell < own.start[D] + own.count[D];
      const double sx = (x - ext[0]) / h - 0.5;
      std::int64_t i0 = static_cast<std::int64_t>(std::floor(sx));
      double f = sx - static_cast<double>(i0);
      i0 = std::clamp<std::int64_t>(i0, cell - 1, cell);  // round-off at a centre
      if (!grid.periodic(d)) {
        if (i0 < 0) {
          i0 = 0;
          f = 0.0;
        } else if (i0 + 1 > n - 1) {
          i0 = n - 1;
          f = 0.0;
        }
      }
      idx[D] = {i0, f == 0.0 ? i0 : i0 + 1};
      w[D] = {1.0 - f, f};
    }
    if (!mine) continue;
    int t = 0;
    for (int c = 0; c < (grid.dim() >= 3 ? 2 : 1); ++c)
      for (int b = 0; b < (grid.dim() >= 2 ? 2 : 1); ++b)
        for (int a = 0; a < 2; ++a, ++t) {
          const std::int64_t i = idx[0][static_cast<std::size_t>(a)], j = idx[1][static_cast<std::size_t>(b)],
                             k = idx[2][static_cast<std::size_t>(c)];
          COSTATE_CHECK(i >= gh.start[0] && i < gh.start[0] + gh.count[0] && j >= gh.start[1] &&
                            j < gh.start[1] + gh.count[1] && k >= gh.start[2] && k < gh.start[2] + gh.count[2],
                        "pde::Observations: internal error: the stencil of " << who << " leaves the ghost layer");
          loc.at[static_cast<std::size_t>(t)] = grid.local_index(component, i, j, k);
          loc.weight[static_cast<std::size_t>(t)] =
              w[0][static_cast<std::size_t>(a)] * w[1][static_cast<std::size_t>(b)] * w[2][static_cast<std::size_t>(c)];
        }
    loc.terms = t;
    local_.push_back(loc);
  }
  // Ownership is a partition: every sensor on exactly one rank.
  const double owned = global_sum(grid.comm(), static_cast<double>(local_.size()));
  COSTATE_CHECK(owned == static_cast<double>(sensors_.size()),
                "pde::Observations: internal error: " << owned << " sensors owned, " << sensors_.size() << " given");
  ul_ = grid.create_local("pde::observations u");
  gl_ = grid.create_local("pde::observations gradient");
}

Observations::~Observations() = default;

double Observations::apply(const LocalArray& ul, const Local& s) const {
  double v = 0.0;
  for (int t = 0; t < s.terms; ++t)
    v += s.weight[static_cast<std::size_t>(t)] * ul(static_cast<std::size_t>(s.at[static_cast<std::size_t>(t)]));
  return v;
}

double Observations::misfit(const GlobalVector& u, const GlobalVector* gradient) const {
  COSTATE_CHECK_EQ(u.size(), grid_->owned_size(), "pde::Observations::misfit: a state of another grid");
  grid_->global_to_local(u, ul_);
  double local = 0.0;
  if (gradient) Kokkos::deep_copy(gl_, 0.0);
  for (const Local& s : local_) {
    const double r = apply(ul_, s) - s.value;
    local += 0.5 * r * r * s.inv_variance;
    if (gradient)
      for (int t = 0; t < s.terms; ++t)
        gl_(static_cast<std::size_t>(s.at[static_cast<std::size_t>(t)])) +=
            s.weight[static_cast<std::size_t>(t)] * r * s.inv_variance;
  }
  if (gradient) {
    fill(*gradient, 0.0);
    grid_->local_to_global_add(gl_, *gradient);
  }
  return global_sum(grid_->comm(), local);
}

void Observations::hessian_vector(const GlobalVector& v, const GlobalVector& out) const {
  COSTATE_CHECK_EQ(v.size(), grid_->owned_size(), "pde::Observations::hessian_vector: a direction of another grid");
  grid_->global_to_local(v, ul_);
  Kokkos::deep_copy(gl_, 0.0);
  for (const Local& s : local_) {
    const double bv = apply(ul_, s) * s.inv_variance;
    for (int t = 0; t < s.terms; ++t)
      gl_(static_cast<std::size_t>(s.at[static_cast<std::size_t>(t)])) += s.weight[static_cast<std::size_t>(t)] * bv;
  }
  fill(out, 0.0);
  grid_->local_to_global_add(gl_, out);
}

std::vector<double> Observations::predictions(const GlobalVector& u) const {
  COSTATE_CHECK_EQ(u.size(), grid_->owned_size(), "pde::Observations::predictions: a state of another grid");
  grid_->global_to_local(u, ul_);
  std::vector<double> all(sensors_.size(), 0.0);
  for (const Local& s : local_) all[s.index] = apply(ul_, s);
  // One owner per sensor: the sum is the owner's value exactly.
  global_sum(grid_->comm(), all.data(), all.size());
  return all;
}

}  // namespace costate::pde
