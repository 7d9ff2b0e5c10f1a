#include "costate/io/hdf5_writer.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <vector>

#include "costate/config.hpp"
#include "costate/core/error.hpp"
#include "costate/calibrate/calibrate.hpp"
#include "costate/io/file_run.hpp"
#include "costate/io/output_file.hpp"
#include "hdf5_memory.hpp"
#include "costate/io/resume.hpp"

namespace costate::io {

namespace detail {

hid_t create_in_memory(const std::string& name) {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return -1;
  // Grows in 1 MiB increments; backing_store = false: nothing is written.
  hid_t file = -1;
  if (H5Pset_fapl_core(fapl, std::size_t{1} << 20, false) >= 0)
    file = H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  return file;
}

void save_image(hid_t file, const std::string& path) {
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) throw Error(path + ": HDF5 could not finish the file");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  if (size < 0) throw Error(path + ": HDF5 could not give the file's image");
  std::vector<char> image(static_cast<std::size_t>(size));
  if (H5Fget_file_image(file, image.data(), image.size()) != size)
    throw Error(path + ": HDF5 could not give the file's image");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  std::size_t done = 0;
  while (done < image.size()) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw Error(path + ": cannot write " + std::to_string(image.size()) + " bytes: " +
                  std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) throw Error(path + ": cannot write: " + std::strerror(errno));
}

}  // namespace detail

namespace {

/// Owns one HDF5 identifier; closes it with the matching H5?close.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
    if (id_ < 0) throw Error("HDF5: could not " + what);
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  operator hid_t() const { return id_; }
  /// Closes now; throws when HDF5 reports a failure (a full disk shows
  /// here, when the last buffers are written).
  void close(const std::string& what) {
    const hid_t id = id_;
    id_ = -1;
    if (close_(id) < 0) throw Error("HDF5: could not " + what);
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check(herr_t status, const std::string& what) {
  if (status < 0) throw Error("HDF5: could not " + what);
}

Handle string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "create a string type");
  check(H5Tset_size(t, H5T_VARIABLE), "set string size");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "set string charset");
  return t;
}

void write_doubles(hid_t loc, const std::string& name, const std::vector<double>& data,
                   std::vector<hsize_t> dims) {
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
               "create dataspace for " + name);
  Handle ds(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT),
            H5Dclose, "create dataset " + name);
  if (!data.empty())
    check(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
          "write dataset " + name);
}

void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& values,
                   bool as_attribute) {
  Handle type = string_type();
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "create dataspace for " + name);
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  // An empty list (a model without parameters) is a zero-length attribute or
  // dataset: created, nothing to write (H5Awrite refuses a null buffer).
  if (as_attribute) {
    Handle a(H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
             "create attribute " + name);
    if (!values.empty()) check(H5Awrite(a, type, ptrs.data()), "write attribute " + name);
  } else {
    Handle d(H5Dcreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose, "create dataset " + name);
    if (!values.empty())
      check(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "write dataset " + name);
  }
}

void write_string_scalar(hid_t loc, const std::string& name, const std::string& value,
                         bool as_attribute) {
  Handle type = string_type();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar dataspace");
  const char* ptr = value.c_str();
  if (as_attribute) {
    Handle a(H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
             "create attribute " + name);
    check(H5Awrite(a, type, &ptr), "write attribute " + name);
  } else {
    Handle d(H5Dcreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose, "create dataset " + name);
    check(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &ptr), "write dataset " + name);
  }
}

template <class T>
void write_scalar_attribute(hid_t loc, const std::string& name, T value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar dataspace");
  const hid_t file_type = std::is_floating_point_v<T> ? H5T_IEEE_F64LE : H5T_STD_I64LE;
  const hid_t mem_type = std::is_floating_point_v<T> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
  Handle a(H5Acreate2(loc, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           "create attribute " + name);
  if constexpr (std::is_floating_point_v<T>) {
    const double v = value;
    check(H5Awrite(a, mem_type, &v), "write attribute " + name);
  } else {
    const std::int64_t v = value;
    check(H5Awrite(a, mem_type, &v), "write attribute " + name);
  }
}

void write_file(const std::string& path, const RunConfig& cfg, const ode::Solution& sol,
                const SensitivityOutput* sens, const std::string& command,
                const std::function<void(hid_t)>& extra = {}, const std::string& status = "complete") {
  Handle file(detail::create_in_memory(path), H5Fclose, "create file '" + path + "'");
  const hsize_t n = sol.t.size();
  const hsize_t m = sol.n_states;
  write_doubles(file, "time", sol.t, {n});
  write_doubles(file, "state", sol.y, {n, m});
  {
    Handle ds(H5Dopen2(file, "state", H5P_DEFAULT), H5Dclose, "open dataset state");
    write_strings(ds, "names", cfg.state_names, true);
  }
  write_strings(file, "state_names", cfg.state_names, false);
  if (cfg.sbml && !cfg.sbml->state_names.empty() && m == cfg.sbml->state_names.size() &&
      cfg.parameters.size() == cfg.sbml->parameter_names.size()) {
    // An SBML model: every symbol (states, parameters, assignment-rule
    // targets, reaction fluxes, compartment sizes, species references) at
    // each output time (sbml::Model::symbol_values).
    const std::vector<std::string> names = cfg.sbml->symbol_names();
    std::vector<double> values;
    values.reserve(n * names.size());
    for (hsize_t k = 0; k < n; ++k) {
      const std::vector<double> v = sbml_symbols(cfg, sol, k);
      values.insert(values.end(), v.begin(), v.end());
    }
    write_doubles(file, "symbols", values, {n, names.size()});
    Handle ds(H5Dopen2(file, "symbols", H5P_DEFAULT), H5Dclose, "open dataset symbols");
    write_strings(ds, "names", names, true);
    write_strings(file, "symbol_names", names, false);
  }
  write_doubles(file, "parameters", cfg.parameters, {cfg.parameters.size()});
  {
    Handle ds(H5Dopen2(file, "parameters", H5P_DEFAULT), H5Dclose, "open dataset parameters");
    write_strings(ds, "names", cfg.parameter_names, true);
  }
  write_strings(file, "parameter_names", cfg.parameter_names, false);
  write_doubles(file, "initial_state", cfg.initial_state, {cfg.initial_state.size()});
  write_string_scalar(file, "settings", cfg.to_yaml(), false);

  Handle summary(H5Gcreate2(file, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                 "create group summary");
  const ode::Summary& s = sol.summary;
  write_string_scalar(summary, "method", ode::to_string(s.method), true);
  write_string_scalar(summary, "termination", ode::to_string(s.termination), true);
  write_string_scalar(summary, "message", s.message, true);
  write_scalar_attribute(summary, "steps", s.steps);
  write_scalar_attribute(summary, "rejected_steps", s.rejected_steps);
  write_scalar_attribute(summary, "rhs_evaluations", s.rhs_evaluations);
  write_scalar_attribute(summary, "final_time", s.final_time);
  write_scalar_attribute(summary, "wall_seconds", s.wall_seconds);

  if (sens) {
    Handle g(H5Gcreate2(file, "sensitivity", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
             "create group sensitivity");
    write_doubles(g, "gradient", sens->gradient, {sens->gradient.size()});
    {
      Handle ds(H5Dopen2(g, "gradient", H5P_DEFAULT), H5Dclose, "open dataset gradient");
      write_strings(ds, "names", sens->parameter_names, true);
    }
    if (!sens->gradient_initial_state.empty()) {
      write_doubles(g, "gradient_initial_state", sens->gradient_initial_state,
                    {sens->gradient_initial_state.size()});
      Handle ds(H5Dopen2(g, "gradient_initial_state", H5P_DEFAULT), H5Dclose,
                "open dataset gradient_initial_state");
      write_strings(ds, "names", cfg.state_names, true);
    }
    write_scalar_attribute(g, "objective", sens->objective);
    write_string_scalar(g, "method", sens->method, true);
    write_scalar_attribute(g, "steps", sens->steps);
    write_scalar_attribute(g, "forward_steps", sens->forward_steps);
    write_scalar_attribute(g, "recomputed_steps", sens->recomputed_steps);
    write_scalar_attribute(g, "peak_snapshots", sens->peak_snapshots);
    if (!sens->hessian.empty()) {
      const hsize_t m = sens->parameter_names.size();
      write_doubles(g, "hessian", sens->hessian, {m, m});
      Handle ds(H5Dopen2(g, "hessian", H5P_DEFAULT), H5Dclose, "open dataset hessian");
      write_strings(ds, "names", sens->parameter_names, true);
    }
  }
  write_string_scalar(file, "costate_version", COSTATE_VERSION_STRING, true);
  write_string_scalar(file, "command", command, true);
  write_string_scalar(file, "model", cfg.model, true);
  write_string_scalar(file, "input_file", cfg.input_path, true);
  if (extra) extra(file);
  write_string_scalar(file, "status", status, true);
  detail::save_image(file, path);
  file.close("close '" + path + "'");
}

/// The files a run reads: an output must not be one of them.
std::vector<std::string> input_files(const RunConfig& cfg) {
  std::vector<std::string> files{cfg.input_path, cfg.sbml_file, cfg.objective.data_file};
  files.insert(files.end(), cfg.calibration.data_files.begin(), cfg.calibration.data_files.end());
  files.push_back(cfg.conditions_file);
  for (const ConditionConfig& c : cfg.conditions) files.push_back(c.data_file);
  return files;
}

/// Writes `path` by `write(temporary)` through io::write_output_file (a
/// locked temporary file, fsynced and renamed into place: a file at `path`
/// is always complete, a previous one survives any failure).
template <class Write>
void write_atomically(const std::string& path, const RunConfig& cfg, const std::string& command,
                      Write&& write) {
  (void)output_format(path, command, false);  // no HDF5 under a .csv or .json name
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as costate::Error
  write_output_file(path, write, input_files(cfg));
}

}  // namespace

void write_run_hdf5(const std::string& path, const RunConfig& config,
                    const ode::Solution& solution, const SensitivityOutput* sensitivity,
                    const std::string& command) {
  write_atomically(path, config, command, [&](const std::string& partial) {
    write_file(partial, config, solution, sensitivity, command);
  });
}

namespace {

/// The group /conditions (hdf5_writer.hpp): ids, and per condition its
/// problem's parameters and initial state and its trajectory.
void write_conditions_group(hid_t file, const RunConfig& config, const std::vector<RunConfig>& conditions,
                            const std::vector<ode::Solution>& solutions) {
  Handle group(H5Gcreate2(file, "conditions", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
               "create group conditions");
  std::vector<std::string> ids;
  for (const ConditionConfig& c : config.conditions) ids.push_back(c.id);
  write_strings(group, "ids", ids, false);
  for (std::size_t c = 0; c < conditions.size(); ++c) {
    const std::string name = std::to_string(c);
    Handle g(H5Gcreate2(group, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
             "create group conditions/" + name);
    write_string_scalar(g, "id", ids[c], true);
    const ode::Solution& sol = solutions[c];
    write_doubles(g, "time", sol.t, {sol.t.size()});
    write_doubles(g, "state", sol.y, {sol.t.size(), sol.n_states});
    write_doubles(g, "parameters", conditions[c].parameters, {conditions[c].parameters.size()});
    write_doubles(g, "initial_state", conditions[c].initial_state, {conditions[c].initial_state.size()});
    write_string_scalar(g, "termination", ode::to_string(sol.summary.termination), true);
  }
}

void check_conditions(const std::string& path, const RunConfig& config, const std::vector<RunConfig>& conditions,
                      const std::vector<ode::Solution>& solutions) {
  COSTATE_CHECK(!conditions.empty() && conditions.size() == solutions.size() &&
                    conditions.size() == config.conditions.size(),
                path << ": writing a file with conditions needs one problem and one trajectory per condition");
}

}  // namespace

void write_conditions_hdf5(const std::string& path, const RunConfig& config,
                           const std::vector<RunConfig>& conditions, const std::vector<ode::Solution>& solutions,
                           const SensitivityOutput* sensitivity, const std::string& command) {
  check_conditions(path, config, conditions, solutions);
  write_atomically(path, config, command, [&](const std::string& partial) {
    write_file(partial, config, solutions[0], sensitivity, command,
               [&](hid_t file) { write_conditions_group(file, config, conditions, solutions); });
  });
}

void write_run_table(const std::string& path, const RunConfig& config,
                     const ode::Solution& solution, char separator, const std::string& command) {
  write_output_file(path, [&](const std::string& temporary) {
    std::FILE* f = std::fopen(temporary.c_str(), "w");
    if (!f) throw Error("cannot open " + temporary + " for writing");
    std::string text = "t";
    for (const auto& name : config.state_names) text += separator + name;
    text += '\n';
    // After the header, not before: numpy.loadtxt(skiprows=1) and
    // genfromtxt(names=True) take the first line as the names and skip '#'.
    text += table_provenance(command, config.to_yaml());
    char buf[32];
    for (std::size_t k = 0; k < solution.n_outputs(); ++k) {
      std::snprintf(buf, sizeof buf, "%.17g", solution.t[k]);
      text += buf;
      for (double v : solution.state(k)) {
        std::snprintf(buf, sizeof buf, "%.17g", v);
        text += separator;
        text += buf;
      }
      text += '\n';
    }
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const bool closed = std::fclose(f) == 0;
    if (!written || !closed) throw Error("cannot write " + temporary + " (disk full or I/O error)");
  }, input_files(config));
}

void write_marked_run_hdf5(const std::string& path, const RunConfig& config,
                           const ode::Solution& solution, const std::string& command,
                           const RunFileMarks& marks) {
  auto extra = [&](hid_t file) {
    for (const auto& [name, value] : marks.strings) write_string_scalar(file, name, value, true);
    for (const auto& [name, value] : marks.numbers) write_scalar_attribute(file, name, value);
    if (!marks.termination.empty()) {
      Handle summary(H5Gopen2(file, "summary", H5P_DEFAULT), H5Gclose, "open group summary");
      check(H5Adelete(summary, "termination"), "replace attribute termination");
      write_string_scalar(summary, "termination", marks.termination, true);
    }
  };
  write_atomically(path, config, command, [&](const std::string& partial) {
    write_file(partial, config, solution, nullptr, command, extra, marks.status);
  });
}

namespace {

void write_ints(hid_t loc, const std::string& name, const std::vector<int>& data) {
  const hsize_t n = data.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "create dataspace for " + name);
  Handle ds(H5Dcreate2(loc, name.c_str(), H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose, "create dataset " + name);
  if (!data.empty())
    check(H5Dwrite(ds, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
          "write dataset " + name);
}

void write_calibration_group(hid_t file, const CalibrationReport& r) {
  Handle g(H5Gcreate2(file, "calibration", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
           "create group calibration");
  const hsize_t p = r.names.size(), m = r.residuals.size();
  write_strings(g, "names", r.names, false);
  write_doubles(g, "values", r.values, {p});
  write_doubles(g, "initial", r.initial, {p});
  write_doubles(g, "lower", r.lower, {p});
  write_doubles(g, "upper", r.upper, {p});
  write_doubles(g, "prior", r.prior, {p});
  write_ints(g, "log_transformed", r.log_transformed);
  write_doubles(g, "standard_errors", r.standard_errors, {p});
  write_doubles(g, "covariance", r.covariance, {p, p});
  write_doubles(g, "correlation", r.correlation, {p, p});
  write_doubles(g, "singular_values", r.singular_values, {r.singular_values.size()});
  write_ints(g, "unidentifiable", r.unidentifiable);
  std::vector<double> fh, gh, jh;
  for (const auto& it : r.tao.history) {
    fh.push_back(it.objective);
    gh.push_back(it.gradient_norm);
    jh.push_back(it.objective_gradient_norm);
  }
  write_doubles(g, "objective_history", fh, {fh.size()});
  write_doubles(g, "gradient_norm_history", gh, {gh.size()});  // TAO's residual
  write_doubles(g, "objective_gradient_norm_history", jh, {jh.size()});  // ‖∇J‖₂
  write_doubles(g, "residual_times", r.residual_times, {m});
  write_strings(g, "residual_states", r.residual_states, false);
  if (!r.residual_conditions.empty()) write_strings(g, "residual_conditions", r.residual_conditions, false);
  write_doubles(g, "observed", r.observed, {m});
  write_doubles(g, "predicted", r.predicted, {m});
  write_doubles(g, "residuals", r.residuals, {m});
  write_scalar_attribute(g, "objective", r.objective);
  write_scalar_attribute(g, "rss", r.rss);
  write_scalar_attribute(g, "sigma2", r.sigma2);
  write_scalar_attribute(g, "sigma_estimated", static_cast<std::int64_t>(r.sigma_estimated));
  write_scalar_attribute(g, "n_residuals", static_cast<std::int64_t>(r.n_residuals));
  write_scalar_attribute(g, "iterations", static_cast<std::int64_t>(r.tao.iterations));
  write_scalar_attribute(g, "function_evaluations", r.tao.function_evaluations);
  write_scalar_attribute(g, "gradient_evaluations", r.tao.gradient_evaluations);
  write_scalar_attribute(g, "hessian_evaluations", r.tao.hessian_evaluations);
  write_scalar_attribute(g, "non_finite_evaluations", r.tao.non_finite_evaluations);
  write_scalar_attribute(g, "gradient_norm", r.tao.gradient_norm);
  write_scalar_attribute(g, "converged", static_cast<std::int64_t>(r.converged));
  write_string_scalar(g, "termination", r.tao.termination, true);
  write_string_scalar(g, "optimizer", r.tao.method, true);
  write_string_scalar(g, "gradient_method", r.gradient_method, true);
  write_string_scalar(g, "fit_status", optimize::to_string(r.verdict.status), true);
  write_string_scalar(g, "convergence", r.verdict.describe(), true);
  if (!r.verdict.at_optimum())
    write_string_scalar(g, "standard_errors_note", "standard errors " + r.verdict.caveat(), true);
  write_string_scalar(g, "status", r.verdict.file_status(), true);
}

}  // namespace

void write_calibration_hdf5(const std::string& path, const RunConfig& config,
                            const ode::Solution& solution, const CalibrationReport& report) {
  write_atomically(path, config, "calibrate", [&](const std::string& partial) {
    write_file(partial, config, solution, nullptr, "calibrate",
               [&](hid_t file) { write_calibration_group(file, report); },
               report.verdict.file_status());
  });
}

void write_calibration_hdf5(const std::string& path, const RunConfig& config,
                            const std::vector<RunConfig>& conditions, const std::vector<ode::Solution>& solutions,
                            const CalibrationReport& report) {
  check_conditions(path, config, conditions, solutions);
  write_atomically(path, config, "calibrate", [&](const std::string& partial) {
    write_file(partial, config, solutions[0], nullptr, "calibrate",
               [&](hid_t file) {
                 write_calibration_group(file, report);
                 write_conditions_group(file, config, conditions, solutions);
               },
               report.verdict.file_status());
  });
}

}  // namespace costate::io
