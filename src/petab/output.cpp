// The HDF5 file of a petab::Result (include/costate/petab/output.hpp); the
// simulation table is in read.cpp, next to the table reader it re-reads
// the measurement table with.
#include "costate/petab/output.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <sstream>

#include "costate/config.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/options.hpp"
#include "hdf5.hpp"

namespace costate::petab {

namespace {

/// A YAML double-quoted scalar (the JSON escapes: a formula may hold quotes).
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The shortest text that reads back as `v` (1e-12, not 9.9999999999999998e-13).
std::string number(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

}  // namespace

std::string settings_yaml(const Problem& pb, const Options& o) {
  std::ostringstream y;
  y << "problem: " << quoted(pb.file) << "\n"
    << "integrator: {method: " << ode::to_string(o.integrator.method) << ", rtol: " << number(o.integrator.rtol)
    << ", atol: " << number(o.integrator.atol) << "}\n"
    << "sensitivity: {method: " << quoted(ode::to_string(o.method)) << "}\n"
    << "steady_state_tol: " << number(o.steady_state_tol) << "\n"
    << "observables:\n";
  for (const Observable& ob : pb.observables)
    y << "  " << ob.id << ": {formula: " << quoted(ob.formula) << ", noise_formula: " << quoted(ob.noise_formula)
      << ", noise_distribution: " << to_string(ob.distribution)
      << ", transformation: " << to_string(ob.transformation) << "}\n";
  return y.str();
}

void write_result_hdf5(const Problem& pb, const Result& r, const std::string& path) {
  write_result_hdf5(pb, r, path, Provenance{});
}

void write_result_hdf5(const Problem& pb, const Result& r, const std::string& path,
                       const Provenance& provenance) {
  using detail::H5, detail::write_doubles, detail::write_ids;
  const std::string partial = path + ".partial";
  {
    H5 file(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    COSTATE_CHECK(file.id >= 0, path << ": cannot create the HDF5 file");
    const std::size_t m = pb.measurements.size(), n = pb.estimated.size();
    COSTATE_CHECK(r.simulations.size() == m && r.sigmas.size() == m,
                  path << ": the result holds " << r.simulations.size() << " simulations for "
                       << m << " measurements");
    {
      H5 group(H5Gcreate2(file.id, "simulation", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      COSTATE_CHECK(group.id >= 0, path << ": cannot create group /simulation");
      std::vector<double> time, measurement, observable, condition, pre;
      for (const Measurement& me : pb.measurements) {
        time.push_back(me.time);
        measurement.push_back(me.value);
        observable.push_back(static_cast<double>(me.observable));
        condition.push_back(static_cast<double>(me.condition));
        pre.push_back(static_cast<double>(me.preequilibration));
      }
      write_doubles(group.id, "/simulation", "time", time, m, 0, path);
      if (std::any_of(time.begin(), time.end(), [](double t) { return std::isinf(t); })) {
        // Measurements at time inf, labelled where they are read.
        H5 set(H5Dopen2(group.id, "time", H5P_DEFAULT), H5Dclose);
        detail::write_text(set.id, "/simulation/time", "inf",
                           "time inf: a steady-state measurement (the simulation condition's steady state, "
                           "f(x, p) = 0, from the condition's start)",
                           path);
      }
      write_doubles(group.id, "/simulation", "measurement", measurement, m, 0, path);
      write_doubles(group.id, "/simulation", "simulation", r.simulations, m, 0, path);
      write_doubles(group.id, "/simulation", "sigma", r.sigmas, m, 0, path);
      write_doubles(group.id, "/simulation", "observable", observable, m, 0, path);
      write_doubles(group.id, "/simulation", "condition", condition, m, 0, path);
      write_doubles(group.id, "/simulation", "preequilibration", pre, m, 0, path);
      std::vector<std::string> obs, cond;
      for (const Observable& o : pb.observables) obs.push_back(o.id);
      for (const Condition& c : pb.conditions) cond.push_back(c.id);
      write_ids(group.id, "/simulation", "observable_ids", obs, path);
      write_ids(group.id, "/simulation", "condition_ids", cond, path);
    }
    write_doubles(file.id, "", "llh", {r.llh}, 1, 0, path);
    write_doubles(file.id, "", "chi2", {r.chi2}, 1, 0, path);
    write_doubles(file.id, "", "log_prior", {r.log_prior}, 1, 0, path);
    const std::vector<std::string> ids = pb.estimated_ids();
    auto with_ids = [&](const char* name, const std::vector<double>& v, hsize_t cols) {
      write_doubles(file.id, "", name, v, n, cols, path);
      H5 set(H5Dopen2(file.id, name, H5P_DEFAULT), H5Dclose);
      write_ids(set.id, std::string("/") + name, "ids", ids, path);
    };
    if (!r.gradient.empty()) with_ids("gradient", r.gradient, 0);
    if (!r.fim.empty()) with_ids("fim", r.fim, n);
    detail::write_text(file.id, "", "problem", pb.file, path);
    detail::write_provenance(file.id, provenance.command, provenance.settings, path);
    detail::write_text(file.id, "", "status", "complete", path);
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  COSTATE_CHECK(!ec, path << ": cannot rename " << partial << " to it: " << ec.message());
}

}  // namespace costate::petab
