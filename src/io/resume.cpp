#include "costate/io/resume.hpp"
#include "costate/ode/support.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "costate/calibrate/calibrate.hpp"
#include "costate/core/error.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/scheme.hpp"
#include "costate/sbml/model.hpp"
#include "costate/io/conditions.hpp"
#include "costate/io/file_run.hpp"
#include "costate/io/hdf5_writer.hpp"
#include "costate/io/output_file.hpp"
#include "hdf5_memory.hpp"

namespace costate::io {
namespace {

volatile std::sig_atomic_t g_signal = 0;
std::atomic<bool> g_installed{false};
struct sigaction g_old_int, g_old_term;

extern "C" void on_signal(int sig) {
  if (g_signal != 0) {
    // A second signal: the default action (ends the process now).
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

/// The settings a resumed run must share with the interrupted one: all but
/// the output file (which may be renamed between the two).
std::string resume_settings(const RunConfig& cfg) {
  RunConfig c = cfg;
  c.output_file.clear();
  return c.to_yaml();
}

bool resumable(ode::Method m) {
  return m == ode::Method::ExplicitEuler || m == ode::Method::RK4 || m == ode::Method::Dopri5;
}

/// Closes an HDF5 identifier on scope exit.
struct Id {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Id() {
    if (id >= 0) close(id);
  }
  operator hid_t() const { return id; }
};

/// Closes `id` now and throws when HDF5 reports a failure (a full disk
/// shows here, when the last buffers are written).
void close_checked(Id& id, const std::string& path) {
  const hid_t h = id.id;
  id.id = -1;
  if (h >= 0 && id.close(h) < 0)
    throw Error(path + ": HDF5 could not finish writing the file (disk full or I/O error)");
}

/// What integrate_run needs back from a partial file.
struct PartialRun {
  std::vector<double> t, y;
  std::size_t n_states = 0;
  std::int64_t steps = 0;
};

std::string read_string_attribute(hid_t loc, const char* name, const std::string& path) {
  if (H5Aexists(loc, name) <= 0) throw Error(path + ": has no '" + name + "' attribute");
  Id a{H5Aopen(loc, name, H5P_DEFAULT), H5Aclose};
  Id type{H5Aget_type(a), H5Tclose};
  if (a < 0 || type < 0 || H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) <= 0)
    throw Error(path + ": attribute '" + name + "' is not a string");
  char* value = nullptr;
  Id mem{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(mem, H5T_VARIABLE);
  H5Tset_cset(mem, H5T_CSET_UTF8);  // as hdf5_writer.cpp writes them
  if (H5Aread(a, mem, &value) < 0 || value == nullptr)
    throw Error(path + ": cannot read attribute '" + name + "'");
  std::string s(value);
  H5free_memory(value);
  return s;
}

double read_number_attribute(hid_t loc, const char* name, const std::string& path) {
  if (H5Aexists(loc, name) <= 0) throw Error(path + ": has no '" + name + "' attribute");
  Id a{H5Aopen(loc, name, H5P_DEFAULT), H5Aclose};
  double v = std::numeric_limits<double>::quiet_NaN();
  if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
    throw Error(path + ": cannot read attribute '" + name + "'");
  return v;
}

std::vector<double> read_doubles(hid_t file, const char* name, std::vector<hsize_t>& dims,
                                 const std::string& path) {
  Id ds{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  if (ds < 0) throw Error(path + ": has no dataset /" + name);
  Id space{H5Dget_space(ds), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1 || rank > 2) throw Error(path + ": /" + name + " has an unexpected shape");
  dims.assign(static_cast<std::size_t>(rank), 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  hsize_t count = 1;
  for (hsize_t d : dims) count *= d;
  std::vector<double> v(count);
  if (count > 0 && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    throw Error(path + ": cannot read /" + name);
  return v;
}

/// Reads and checks the partial `costate run` file at `path` against cfg.
PartialRun read_partial_run(const std::string& path, const RunConfig& cfg) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string what = "--resume " + path;
  if (!std::filesystem::exists(path))
    throw Error(what + ": no such file (the partial output of an interrupted `costate run`)");
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw Error(what + ": not an HDF5 file (expected the partial output of an interrupted "
                       "`costate run`)");
  Id file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  if (file < 0) throw Error(what + ": cannot open the file");
  const std::string status = read_string_attribute(file, "status", what);
  const std::string command = read_string_attribute(file, "command", what);
  if (command != "run")
    throw Error(what + ": written by `costate " + command + "`; --resume continues `costate run`");
  if (status != "partial")
    throw Error(what + ": status is '" + status +
                "', not 'partial': the run it holds finished, nothing to resume");
  if (resume_settings(cfg) != read_string_attribute(file, "resume_settings", what))
    throw Error(what + ": was written with other settings than " + cfg.input_path +
                " gives now (its /settings); resume with the same input file and --set options");
  PartialRun r;
  std::vector<hsize_t> dt, dy;
  r.t = read_doubles(file, "time", dt, what);
  r.y = read_doubles(file, "state", dy, what);
  r.n_states = dy.size() == 2 ? dy[1] : 0;
  if (dy.size() != 2 || dy[0] != r.t.size() || r.n_states != cfg.initial_state.size())
    throw Error(what + ": /state is not a (times × " + std::to_string(cfg.initial_state.size()) +
                ") matrix");
  if (r.t.empty()) throw Error(what + ": holds no output to continue from");
  const double steps = read_number_attribute(file, "resume_steps", what);
  r.steps = std::isfinite(steps) ? static_cast<std::int64_t>(steps) : 0;
  const double t_last = read_number_attribute(file, "resume_time", what);
  if (!(t_last == r.t.back()))
    throw Error(what + ": resume_time does not match the last output time");
  return r;
}

/// Thrown from on_step to leave the driver at a step boundary; caught here.
struct Stop {};

}  // namespace

InterruptHandler::InterruptHandler() {
  COSTATE_CHECK(!g_installed.exchange(true), "io::InterruptHandler: one at a time");
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptHandler::~InterruptHandler() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

int InterruptHandler::pending() { return g_signal; }
void InterruptHandler::clear() { g_signal = 0; }

Interrupted::Interrupted(int signal, std::string message)
    : signal_(signal), message_(std::move(message)) {}

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

void throw_if_interrupted(const std::string& where) {
  if (const int sig = InterruptHandler::pending())
    throw Interrupted(sig, "interrupted by " + signal_name(sig) + " " + where);
}

std::function<void(double)> interrupt_check(const std::string& command) {
  return [command](double t) {
    if (!InterruptHandler::pending()) return;
    std::ostringstream os;
    os.precision(17);
    os << "at t = " << t << " (costate " << command << ")";
    throw_if_interrupted(os.str());
  };
}

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}
}  // namespace

int report_interrupted(const Interrupted& e, int rank, int size, bool json) {
  if (rank == 0) {
    std::cerr << "costate: " << e.what() << std::endl;
    if (json)
      std::cout << "{\"status\":\"interrupted\",\"signal\":" << json_string(signal_name(e.signal()))
                << ",\"message\":" << json_string(e.what()) << "}" << std::endl;
  }
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, e.exit_code());
  return e.exit_code();
}

RunOutcome integrate_run(const RunConfig& cfg, const std::function<void(double)>& on_step,
                         const std::string& resume_path) {
  const ode::Method method = cfg.integrator.method;
  RunOutcome outcome;
  outcome.resumed_from = std::numeric_limits<double>::quiet_NaN();
  // A model with events runs through ode::integrate's event driver: the
  // recording loop below integrates the right-hand side alone.
  const bool events = !cfg.events.empty() || (cfg.sbml && cfg.sbml->equations.n_events() > 0);
  if (events && !resume_path.empty())
    throw Error("--resume " + resume_path + ": the model has events, and `costate run --resume` "
                "does not continue a run with events yet; run it again without --resume");
  // delay(): the method of steps (integrate_file) keeps the history the
  // delays read; the recording loop below does not.
  const bool delays = cfg.sbml && !cfg.sbml->delays.empty();
  if (delays && !resume_path.empty())
    throw Error("--resume " + resume_path + ": " + cfg.sbml->delays.front().text +
                ": `costate run --resume` does not continue a run with delay() (the history "
                "before the resume time is not in the file); run it again without --resume");
  // A DAE: the recording loop below integrates y' = f alone, so the table's
  // DAE column decides first (the explicit methods refuse it by name).
  ode::require(ode::supports_dae(method, cfg.algebraic_states.size()), "costate run");
  if (!resumable(method) || events || delays) {
    if (!resume_path.empty())
      throw Error("--resume " + resume_path + ": integrator.method = " + ode::to_string(method) +
                  " does not resume (its step history is internal to the integrator); --resume "
                  "continues euler, rk4 and dopri5 runs");
    // Stops at a step boundary, nothing kept: main reports it (no file).
    ode::IntegratorOptions opt = integrator_options(cfg);  // its landing times
    opt.on_step = [&](double t) {
      if (on_step) on_step(t);
      std::ostringstream os;
      os.precision(17);
      os << "at t = " << t << " (integrator.method = " << ode::to_string(method)
         << (delays ? " on a model with delay()" : "")
         << ": the outputs are not kept; euler, rk4 and dopri5 runs write them and resume)";
      throw_if_interrupted(os.str());
    };
    RunConfig c = cfg;
    c.integrator = opt;
    outcome.solution = integrate_file(c);  // compiled once per model (src/io/model_kernels.cpp)
    return outcome;
  }

  // Explicit methods: ode::integrate's own path (integrate_vector on the
  // model's right-hand side), with the outputs recorded here so that they
  // survive a stop.
  std::vector<double> default_outputs{cfg.t_start, cfg.t_end};
  std::span<const double> outputs = cfg.output_times.empty()
                                        ? std::span<const double>(default_outputs)
                                        : std::span<const double>(cfg.output_times);
  const std::size_t n = cfg.initial_state.size();
  ode::Solution& sol = outcome.solution;
  sol.n_states = n;
  std::vector<double> y0 = cfg.initial_state;
  double t_begin = cfg.t_start;
  std::int64_t base_steps = 0;
  if (!resume_path.empty()) {
    PartialRun part = read_partial_run(resume_path, cfg);
    const std::size_t k = part.t.size() - 1;  // the last output written
    if (k >= outputs.size() || outputs[k] != part.t.back())
      throw Error("--resume " + resume_path + ": its last output time does not match the "
                  "output times of " + cfg.input_path);
    t_begin = part.t.back();
    y0.assign(part.y.end() - static_cast<std::ptrdiff_t>(n), part.y.end());
    // The last row is recorded again (the driver reports t_begin itself).
    sol.t.assign(part.t.begin(), part.t.end() - 1);
    sol.y.assign(part.y.begin(), part.y.end() - static_cast<std::ptrdiff_t>(n));
    outputs = outputs.subspan(k);
    base_steps = part.steps;
    outcome.resumed_from = t_begin;
    outcome.resumed_outputs = k;
  }
  outcome.steps_to_last_output = base_steps;
  if (!(t_begin < cfg.t_end)) {
    // Interrupted after its last step: every output is there.
    sol.t.push_back(t_begin);
    sol.y.insert(sol.y.end(), y0.begin(), y0.end());
    sol.summary.method = method;
    sol.summary.final_time = t_begin;
    sol.summary.steps = base_steps;
    sol.summary.message = "reached t1";
    return outcome;
  }

  std::int64_t steps = 0;  // accepted steps of this call (on_step calls)
  sol.t.reserve(sol.t.size() + outputs.size());
  // The model's right-hand side behind one std::function, so that the
  // integrator is instantiated once here, not once per model.
  using HostVector = ode::HostVector;
  using Rhs = std::function<void(double, const HostVector&, const HostVector&)>;
  const std::span<const double> p(cfg.parameters);
  const Rhs rhs = visit_model(cfg, [&](auto model) -> Rhs {
    return [p, model = std::move(model)](double t, const HostVector& yy, const HostVector& dydt) {
      model.template rhs<double>(t, std::span<const double>(yy.data(), yy.size()), p,
                                 std::span<double>(dydt.data(), dydt.size()));
    };
  });
  HostVector y = HostVector::from(std::span<const double>(y0));
  auto record = [&](std::size_t, double t, const HostVector& state) {
    sol.t.push_back(t);
    sol.y.insert(sol.y.end(), state.data(), state.data() + n);
    // Recorded after the step's count and before its on_step (or, at
    // t_begin, before any step).
    outcome.steps_to_last_output = base_steps + (t == t_begin && steps == 0 ? 0 : steps + 1);
  };
  ode::IntegratorOptions opt = integrator_options(cfg);  // its landing times
  opt.on_step = [&](double t) {
    ++steps;
    if (on_step) on_step(t);
    if (InterruptHandler::pending()) {
      sol.summary.final_time = t;
      throw Stop{};
    }
  };
  try {
    sol.summary = ode::integrate_vector(rhs, t_begin, cfg.t_end, y, opt, outputs, record);
  } catch (const Stop&) {
    outcome.signal = InterruptHandler::pending();
    ode::Summary& s = sol.summary;
    s.method = method;
    s.steps = base_steps + steps;
    std::ostringstream os;
    os.precision(17);
    os << "interrupted by " << signal_name(outcome.signal) << " at t = " << s.final_time;
    s.message = os.str();
    return outcome;
  }
  sol.summary.steps += base_steps;
  return outcome;
}

int finish_interrupted_run(const RunConfig& cfg, const RunOutcome& outcome, bool write,
                           bool talk, bool json) {
  const ode::Solution& sol = outcome.solution;
  std::ostringstream os;
  os.precision(17);
  os << "costate run: " << sol.summary.message;
  if (!cfg.output_file.empty() && !sol.t.empty()) {
    if (write) {
      RunFileMarks marks;
      marks.status = "partial";
      marks.termination = "interrupted";
      marks.strings = {{"interrupted_by", signal_name(outcome.signal)},
                       {"resume_settings", resume_settings(cfg)}};
      marks.numbers = {{"resume_time", sol.t.back()},
                       {"resume_steps", static_cast<double>(outcome.steps_to_last_output)}};
      write_marked_run_hdf5(cfg.output_file, cfg, sol, "run", marks);
    }
    os << "; wrote the " << sol.t.size() << " outputs reached (to t = " << sol.t.back() << ") to "
       << cfg.output_file << ", marked partial; continue with: costate run " << cfg.input_path
       << " --resume " << cfg.output_file << " (and the same --set options)";
  } else {
    os << "; no output time reached yet" << (cfg.output_file.empty() ? " and no output file" : "")
       << ", nothing written";
  }
  if (talk) std::cerr << os.str() << std::endl;
  if (json && write)
    std::cout << "{\"status\":\"interrupted\",\"signal\":"
              << json_string(signal_name(outcome.signal)) << ",\"outputs\":" << sol.t.size()
              << ",\"output_file\":"
              << (cfg.output_file.empty() || sol.t.empty() ? "null" : json_string(cfg.output_file))
              << ",\"message\":" << json_string(os.str()) << "}" << std::endl;
  return 128 + outcome.signal;
}

void write_finished_run(const RunConfig& cfg, const RunOutcome& outcome) {
  const OutputFormat format = output_format(cfg.output_file, "run", true);
  if (format != OutputFormat::Hdf5)
    return write_run_table(cfg.output_file, cfg, outcome.solution,
                           format == OutputFormat::Csv ? ',' : '\t');
  RunFileMarks marks;
  if (!std::isnan(outcome.resumed_from)) marks.numbers = {{"resumed_from_time", outcome.resumed_from}};
  write_marked_run_hdf5(cfg.output_file, cfg, outcome.solution, "run", marks);
}


// ---- calibrate --resume ------------------------------------------------------

namespace {

void write_string_attribute(hid_t loc, const char* name, const std::string& value,
                            const std::string& path) {
  Id type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  Id space{H5Screate(H5S_SCALAR), H5Sclose};
  Id a{H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  const char* v = value.c_str();
  if (a < 0 || H5Awrite(a, type, &v) < 0)
    throw Error(path + ": cannot write the HDF5 attribute '" + name + "'");
}

void write_number_attribute(hid_t loc, const char* name, double value, const std::string& path) {
  Id space{H5Screate(H5S_SCALAR), H5Sclose};
  Id a{H5Acreate2(loc, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (a < 0 || H5Awrite(a, H5T_NATIVE_DOUBLE, &value) < 0)
    throw Error(path + ": cannot write the HDF5 attribute '" + name + "'");
}

template <class T>
void write_dataset(hid_t loc, const char* name, const std::vector<T>& v,
                   std::vector<hsize_t> dims, const std::string& path) {
  const hid_t mem = std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT;
  Id space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  Id ds{H5Dcreate2(loc, name, mem, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose};
  if (ds < 0 || (!v.empty() && H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0))
    throw Error(path + ": cannot write the HDF5 dataset " + name);
}

std::vector<int> read_ints(hid_t loc, const char* name, const std::string& path,
                           const std::string& group = "calibration_resume") {
  Id ds{H5Dopen2(loc, name, H5P_DEFAULT), H5Dclose};
  if (ds < 0) throw Error(path + ": has no dataset /" + group + "/" + name);
  Id space{H5Dget_space(ds), H5Sclose};
  std::vector<int> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  if (!v.empty() && H5Dread(ds, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    throw Error(path + ": cannot read /" + group + "/" + name);
  return v;
}

/// Opens `path` for `--resume` by `command`: it exists, is HDF5, was written
/// by `costate command` with cfg's settings and is partial (errors name the
/// file and what to do).
hid_t open_partial(const std::string& path, const RunConfig& cfg, const std::string& command,
                   const std::string& what) {
  if (!std::filesystem::exists(path))
    throw Error(what + ": no such file (the partial output of an interrupted `costate " + command +
                "`)");
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw Error(what + ": not an HDF5 file (expected the partial output of an interrupted "
                       "`costate " + command + "`)");
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw Error(what + ": cannot open the file");
  try {
    const std::string written_by = read_string_attribute(file, "command", what);
    if (written_by != command)
      throw Error(what + ": written by `costate " + written_by + "`; " + command +
                  " --resume continues `costate " + command + "`");
    const std::string status = read_string_attribute(file, "status", what);
    if (status != "partial")
      throw Error(what + ": status is '" + status + "', not 'partial': the `costate " + command +
                  "` it holds finished, nothing to resume");
    if (resume_settings(cfg) != read_string_attribute(file, "resume_settings", what))
      throw Error(what + ": was written with other settings than " + cfg.input_path +
                  " gives now (its /settings); resume with the same input file and --set options");
  } catch (...) {
    H5Fclose(file);
    throw;
  }
  return file;
}

constexpr char kSeparator = '\x1e';

}  // namespace

void write_calibration_partial(const std::string& path, const RunConfig& cfg,
                               const CalibrationJournal& journal, int signal) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::size_t n = journal.n, k = journal.entries.size();
  write_output_file(path, [&](const std::string& tmp) {
    Id file{detail::create_in_memory(tmp), H5Fclose};
    if (file < 0) throw Error(path + ": cannot create the partial calibration file " + tmp);
    write_string_attribute(file, "status", "partial", path);
    write_string_attribute(file, "command", "calibrate", path);
    write_string_attribute(file, "interrupted_by", signal ? signal_name(signal) : "", path);
    write_string_attribute(file, "resume_settings", resume_settings(cfg), path);
    write_number_attribute(file, "resume_iteration", journal.last_iteration, path);
    write_number_attribute(file, "resume_evaluations", static_cast<double>(k), path);
    Id group{H5Gcreate2(file, "calibration_resume", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Gclose};
    if (group < 0) throw Error(path + ": cannot write the group /calibration_resume");
    std::vector<int> kind, failed;
    std::vector<double> q, objective, out;
    std::string errors;
    for (const auto& e : journal.entries) {
      kind.push_back(e.kind);
      failed.push_back(e.error.empty() ? 0 : 1);
      q.insert(q.end(), e.q.begin(), e.q.end());
      objective.push_back(e.objective);
      out.insert(out.end(), e.out.begin(), e.out.end());
      if (!e.error.empty()) errors += (errors.empty() ? "" : std::string(1, kSeparator)) + e.error;
    }
    write_dataset(group, "kind", kind, {k}, path);
    write_dataset(group, "failed", failed, {k}, path);
    write_dataset(group, "q", q, {k, n}, path);
    write_dataset(group, "objective", objective, {k}, path);
    write_dataset(group, "out", out, {out.size()}, path);
    write_dataset(group, "last_iterate", journal.last_iterate, {journal.last_iterate.size()}, path);
    write_string_attribute(group, "errors", errors, path);
    close_checked(group, path);
    detail::save_image(file, tmp);
    close_checked(file, path);
  }, {cfg.input_path});
}

CalibrationJournal read_calibration_partial(const std::string& path, const RunConfig& cfg) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string what = "--resume " + path;
  Id file{open_partial(path, cfg, "calibrate", what), H5Fclose};
  if (H5Lexists(file, "calibration_resume", H5P_DEFAULT) <= 0)
    throw Error(what + ": holds a finished calibration whose optimizer stopped without "
                       "converging (no /calibration_resume journal), not an interrupted one: "
                       "nothing to resume (rerun it, e.g. with a larger optimizer.max_iterations)");
  Id group{H5Gopen2(file, "calibration_resume", H5P_DEFAULT), H5Gclose};
  if (group < 0) throw Error(what + ": has no group /calibration_resume");
  CalibrationJournal j;
  j.n = cfg.calibration.variables.size();
  const std::vector<int> kind = read_ints(group, "kind", what), failed = read_ints(group, "failed", what);
  std::vector<hsize_t> dq, dobj, dout, dlast;
  const std::vector<double> q = read_doubles(group, "q", dq, what);
  const std::vector<double> objective = read_doubles(group, "objective", dobj, what);
  const std::vector<double> out = read_doubles(group, "out", dout, what);
  j.last_iterate = read_doubles(group, "last_iterate", dlast, what);
  const std::size_t k = kind.size(), n = j.n;
  if (failed.size() != k || objective.size() != k || q.size() != k * n ||
      (dq.size() == 2 && dq[1] != n))
    throw Error(what + ": /calibration_resume is inconsistent (expected " + std::to_string(k) +
                " evaluations of " + std::to_string(n) + " fitted quantities)");
  std::vector<std::string> errors;
  {
    const std::string all = read_string_attribute(group, "errors", what);
    std::size_t at = 0;
    while (!all.empty() && at <= all.size()) {
      const std::size_t end = std::min(all.find(kSeparator, at), all.size());
      errors.push_back(all.substr(at, end - at));
      at = end + 1;
    }
  }
  std::size_t used = 0, used_errors = 0;
  for (std::size_t i = 0; i < k; ++i) {
    CalibrationJournal::Entry e;
    e.kind = kind[i];
    if (e.kind != CalibrationJournal::Gradient && e.kind != CalibrationJournal::GaussNewton)
      throw Error(what + ": /calibration_resume/kind holds " + std::to_string(e.kind) +
                  " (expected 0 or 1)");
    e.q.assign(q.begin() + static_cast<std::ptrdiff_t>(i * n),
               q.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
    e.objective = objective[i];
    if (failed[i]) {
      if (used_errors >= errors.size())
        throw Error(what + ": /calibration_resume has fewer error messages than failed entries");
      e.error = errors[used_errors++];
    } else {
      const std::size_t size = e.kind == CalibrationJournal::Gradient ? n : n * n;
      if (used + size > out.size())
        throw Error(what + ": /calibration_resume/out is shorter than its entries need");
      e.out.assign(out.begin() + static_cast<std::ptrdiff_t>(used),
                   out.begin() + static_cast<std::ptrdiff_t>(used + size));
      used += size;
    }
    j.entries.push_back(std::move(e));
  }
  j.recorded = k;
  j.last_iteration = static_cast<int>(read_number_attribute(file, "resume_iteration", what));
  return j;
}

bool sensitivity_resumable(const RunConfig& cfg, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (cfg.sensitivity.method != ode::SensitivityKind::DiscreteAdjoint)
    return no("sensitivity.method " + ode::to_string(cfg.sensitivity.method) +
              " (only the discrete adjoint keeps a place to resume from)");
  if (ode::is_cvodes(cfg.integrator.method))
    return no("integrator.method " + ode::to_string(cfg.integrator.method) +
              " (CVODES' sweeps are not resumable; use a native stepper)");
  // Delayed events: the partial file keeps the plan's links between
  // instants and the sweep's pending adjoints (write_sensitivity_partial).
  return true;
}

void write_sensitivity_partial(const std::string& path, const RunConfig& cfg, const ConditionsPlace& place,
                               int signal) {
  const bool sweep = place.sweep && place.sweep->step >= 0;
  COSTATE_CHECK(sweep || (!cfg.conditions.empty() && place.condition > 0),
                path << ": a partial sensitivity file needs a place ahead of the start");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  write_output_file(path, [&](const std::string& tmp) {
    Id file{detail::create_in_memory(tmp), H5Fclose};
    if (file < 0) throw Error(path + ": cannot create the partial sensitivity file " + tmp);
    write_string_attribute(file, "status", "partial", path);
    write_string_attribute(file, "command", "sensitivity", path);
    write_string_attribute(file, "interrupted_by", signal ? signal_name(signal) : "", path);
    write_string_attribute(file, "resume_settings", resume_settings(cfg), path);
    if (!cfg.conditions.empty()) {
      // The conditions done and their running sums (io/conditions.hpp).
      Id group{H5Gcreate2(file, "conditions_resume", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose};
      if (group < 0) throw Error(path + ": cannot write the group /conditions_resume");
      write_number_attribute(group, "condition", static_cast<double>(place.condition), path);
      write_dataset(group, "objectives", place.objectives, {place.objectives.size()}, path);
      write_dataset(group, "gradient_p", place.gradient_p, {place.gradient_p.size()}, path);
      write_dataset(group, "gradient_initial_state", place.gradient_initial_state,
                    {place.gradient_initial_state.size()}, path);
      close_checked(group, path);
    }
    if (sweep) {
      const ode::AdjointResume& at = *place.sweep;
      write_number_attribute(file, "resume_step", static_cast<double>(at.step), path);
      write_number_attribute(file, "resume_steps", static_cast<double>(at.steps.steps()), path);
      Id group{H5Gcreate2(file, "sensitivity_resume", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose};
      if (group < 0) throw Error(path + ": cannot write the group /sensitivity_resume");
      write_dataset(group, "lambda", at.lambda, {at.lambda.size()}, path);
      write_dataset(group, "mu", at.mu, {at.mu.size()}, path);
      write_dataset(group, "times", at.steps.times(), {at.steps.times().size()}, path);
      write_dataset(group, "orders", at.steps.orders(), {at.steps.orders().size()}, path);
      // The plan's event instants, flattened: at, root + 1, delayed, count,
      // then `count` fired events and their `count` value sources.
      std::vector<int> events;
      for (const ode::EventInstant& e : at.steps.events()) {
        events.insert(events.end(), {static_cast<int>(e.at), e.root + 1, e.delayed ? 1 : 0,
                                     static_cast<int>(e.fired.size())});
        for (std::size_t k : e.fired) events.push_back(static_cast<int>(k));
        for (std::size_t k : e.source) events.push_back(static_cast<int>(k));
      }
      write_dataset(group, "events", events, {events.size()}, path);
      // Delayed events, per instant in the same order: the origins' count
      // (0 or the fired count) and origins, the scheduled count, the
      // scheduled events and their sources; then the adjoints pending
      // between an execution and its trigger: (instant, event, size) each
      // in pending_links, the values one after the other in pending_adjoints.
      std::vector<int> links, pending_links;
      std::vector<double> pending;
      for (const ode::EventInstant& e : at.steps.events()) {
        links.push_back(static_cast<int>(e.origin.size()));
        links.insert(links.end(), e.origin.begin(), e.origin.end());
        links.push_back(static_cast<int>(e.scheduled.size()));
        for (std::size_t k : e.scheduled) links.push_back(static_cast<int>(k));
        for (std::size_t k : e.scheduled_source) links.push_back(static_cast<int>(k));
      }
      for (const ode::PendingEventAdjoint& q : at.pending_events) {
        pending_links.insert(pending_links.end(), {static_cast<int>(q.instant), static_cast<int>(q.event),
                                                   static_cast<int>(q.adjoint.size())});
        pending.insert(pending.end(), q.adjoint.begin(), q.adjoint.end());
      }
      write_dataset(group, "event_links", links, {links.size()}, path);
      write_dataset(group, "pending_links", pending_links, {pending_links.size()}, path);
      write_dataset(group, "pending_adjoints", pending, {pending.size()}, path);
      write_number_attribute(group, "objective", at.objective, path);
      close_checked(group, path);
    }
    detail::save_image(file, tmp);
    close_checked(file, path);
  }, {cfg.input_path});
}

namespace {

/// The reverse sweep's place in /sensitivity_resume (the condition's
/// problem `cfg`: its parameters' count).
ode::AdjointResume read_sweep(hid_t file, const RunConfig& cfg, const std::string& what) {
  Id group{H5Gopen2(file, "sensitivity_resume", H5P_DEFAULT), H5Gclose};
  if (group < 0) throw Error(what + ": has no group /sensitivity_resume");
  ode::AdjointResume at;
  std::vector<hsize_t> dims;
  at.lambda = read_doubles(group, "lambda", dims, what);
  at.mu = read_doubles(group, "mu", dims, what);
  std::vector<double> times = read_doubles(group, "times", dims, what);
  std::vector<int> orders = read_ints(group, "orders", what, "sensitivity_resume");
  const std::size_t n_times = times.size();
  // (A partial file written before events existed has no instants.)
  const std::vector<int> flat = H5Lexists(group, "events", H5P_DEFAULT) > 0
                                    ? read_ints(group, "events", what, "sensitivity_resume")
                                    : std::vector<int>{};
  std::vector<ode::EventInstant> events;
  for (std::size_t i = 0; i < flat.size();) {
    if (i + 4 > flat.size() || flat[i] < 0 || flat[i + 3] < 0 ||
        i + 4 + 2 * static_cast<std::size_t>(flat[i + 3]) > flat.size())
      throw Error(what + ": /sensitivity_resume/events is not a list of event instants");
    ode::EventInstant e;
    e.at = static_cast<std::size_t>(flat[i]);
    e.root = flat[i + 1] - 1;
    e.delayed = flat[i + 2] != 0;
    const auto count = static_cast<std::size_t>(flat[i + 3]);
    for (std::size_t k = 0; k < count; ++k) {
      if (flat[i + 4 + k] < 0 || flat[i + 4 + count + k] < 0)
        throw Error(what + ": /sensitivity_resume/events has a negative entry");
      e.fired.push_back(static_cast<std::size_t>(flat[i + 4 + k]));
      e.source.push_back(static_cast<std::size_t>(flat[i + 4 + count + k]));
    }
    events.push_back(std::move(e));
    i += 4 + 2 * count;
  }
  // (A file written before delayed events resumed has no links.)
  auto optional_ints = [&](const char* name) {
    return H5Lexists(group, name, H5P_DEFAULT) > 0 ? read_ints(group, name, what, "sensitivity_resume")
                                                   : std::vector<int>{};
  };
  const std::vector<int> links = optional_ints("event_links");
  const std::string bad_links = what + ": /sensitivity_resume/event_links does not match its events";
  std::size_t i = 0;
  auto next = [&]() {
    if (i >= links.size()) throw Error(bad_links);
    return links[i++];
  };
  for (std::size_t e = 0; e < events.size() && !links.empty(); ++e) {
    ode::EventInstant& inst = events[e];
    const int n_origin = next();
    if (n_origin != 0 && n_origin != static_cast<int>(inst.fired.size())) throw Error(bad_links);
    for (int k = 0; k < n_origin; ++k) inst.origin.push_back(next());
    const int n_sched = next();
    if (n_sched < 0) throw Error(bad_links);
    for (int k = 0; k < n_sched; ++k) {
      const int v = next();
      if (v < 0) throw Error(bad_links);
      inst.scheduled.push_back(static_cast<std::size_t>(v));
    }
    for (int k = 0; k < n_sched; ++k) {
      const int v = next();
      if (v < 0) throw Error(bad_links);
      inst.scheduled_source.push_back(static_cast<std::size_t>(v));
    }
  }
  if (i != links.size()) throw Error(bad_links);
  const std::vector<int> pending_links = optional_ints("pending_links");
  const std::vector<double> pending = H5Lexists(group, "pending_adjoints", H5P_DEFAULT) > 0
                                          ? read_doubles(group, "pending_adjoints", dims, what)
                                          : std::vector<double>{};
  std::size_t used = 0;
  for (std::size_t k = 0; k + 3 <= pending_links.size(); k += 3) {
    const int instant = pending_links[k], event = pending_links[k + 1], size = pending_links[k + 2];
    if (instant < 0 || event < 0 || size < 1 || used + static_cast<std::size_t>(size) > pending.size())
      throw Error(what + ": /sensitivity_resume/pending_links does not match pending_adjoints");
    at.pending_events.push_back(
        {static_cast<std::size_t>(instant), static_cast<std::size_t>(event),
         std::vector<double>(pending.begin() + static_cast<std::ptrdiff_t>(used),
                             pending.begin() + static_cast<std::ptrdiff_t>(used + static_cast<std::size_t>(size)))});
    used += static_cast<std::size_t>(size);
  }
  if (pending_links.size() % 3 != 0 || used != pending.size())
    throw Error(what + ": /sensitivity_resume/pending_links does not match pending_adjoints");
  try {
    at.steps = ode::StepPlan(std::move(times), std::move(orders), std::move(events));
  } catch (const Error& e) {
    throw Error(what + ": /sensitivity_resume/times, orders and events are not a step plan: " +
                e.what());
  }
  at.objective = read_number_attribute(group, "objective", what);
  const double step = read_number_attribute(file, "resume_step", what);
  if (!(step >= 0.0) || step > static_cast<double>(at.steps.steps()) ||
      at.mu.size() != cfg.parameters.size() || at.lambda.size() < cfg.initial_state.size())
    throw Error(what + ": /sensitivity_resume is inconsistent (step " + std::to_string(step) +
                " of " + std::to_string(n_times) + " step times, " +
                std::to_string(at.mu.size()) + " parameter adjoints for " +
                std::to_string(cfg.parameters.size()) + " parameters)");
  at.step = static_cast<std::int64_t>(step);
  return at;
}

}  // namespace

ConditionsPlace read_sensitivity_partial(const std::string& path, const RunConfig& cfg) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string what = "--resume " + path;
  Id file{open_partial(path, cfg, "sensitivity", what), H5Fclose};
  ConditionsPlace place;
  if (!cfg.conditions.empty()) {
    Id group{H5Gopen2(file, "conditions_resume", H5P_DEFAULT), H5Gclose};
    if (group < 0) throw Error(what + ": has no group /conditions_resume (the file has conditions)");
    const double c = read_number_attribute(group, "condition", what);
    std::vector<hsize_t> dims;
    place.objectives = read_doubles(group, "objectives", dims, what);
    place.gradient_p = read_doubles(group, "gradient_p", dims, what);
    place.gradient_initial_state = read_doubles(group, "gradient_initial_state", dims, what);
    const std::size_t nc = cfg.conditions.size();
    if (!(c >= 0.0) || c > static_cast<double>(nc) || place.objectives.size() != static_cast<std::size_t>(c) ||
        place.gradient_p.size() != cfg.parameters.size() ||
        place.gradient_initial_state.size() != cfg.state_names.size())
      throw Error(what + ": /conditions_resume is inconsistent (condition " + std::to_string(c) + " of " +
                  std::to_string(nc) + ", " + std::to_string(place.objectives.size()) + " objectives, " +
                  std::to_string(place.gradient_p.size()) + " parameter sums for " +
                  std::to_string(cfg.parameters.size()) + " parameters)");
    place.condition = static_cast<std::size_t>(c);
  }
  if (H5Lexists(file, "sensitivity_resume", H5P_DEFAULT) > 0 || cfg.conditions.empty()) {
    if (place.condition >= condition_count(cfg))
      throw Error(what + ": /sensitivity_resume names a reverse sweep after the last condition");
    place.sweep = std::make_shared<ode::AdjointResume>(read_sweep(file, condition_config(cfg, place.condition), what));
  }
  return place;
}

}  // namespace costate::io
