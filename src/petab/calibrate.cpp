// petab::calibrate — single and multistart fits of a PEtab problem with
// optimize::minimize (include/costate/petab/calibrate.hpp).
#include "costate/petab/calibrate.hpp"

#include "costate/core/progress.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "costate/core/error.hpp"
#include "hdf5.hpp"

namespace costate::petab {

std::string to_string(Sampling s) { return s == Sampling::Uniform ? "uniform" : "lhs"; }

Sampling sampling_from_string(const std::string& name) {
  if (name == "lhs") return Sampling::LatinHypercube;
  if (name == "uniform") return Sampling::Uniform;
  throw Error("sampling '" + name + "': expected lhs (Latin hypercube) or uniform");
}

void CalibrationOptions::validate() const {
  COSTATE_CHECK(sampling == Sampling::LatinHypercube || sampling == Sampling::Uniform,
                "calibration.sampling = " << static_cast<int>(sampling) << ": not a sampling scheme");
  COSTATE_CHECK(starts >= 0, "calibration.starts = " << starts << ": must be ≥ 0 (0: the nominal values)");
  COSTATE_CHECK(std::isfinite(best_tolerance) && best_tolerance >= 0.0,
                "calibration.best_tolerance = " << best_tolerance << ": must be finite and ≥ 0");
  optimizer.validate();
}

std::vector<std::size_t> Calibration::waterfall() const {
  std::vector<std::size_t> order(starts.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (starts[a].failed != starts[b].failed) return !starts[a].failed;
    return starts[a].objective < starts[b].objective;
  });
  return order;
}

std::string Calibration::brief_report() const {
  std::ostringstream s;
  s.precision(10);
  std::size_t failed = 0, converged = 0;
  for (const StartFit& f : starts) {
    failed += f.failed;
    converged += f.converged;
  }
  s << "calibration: " << starts.size() << " start(s), best llh " << best().llh << " (start "
    << best().index << "), " << at_best << " within " << best_tolerance << " of the best, "
    << converged << " converged by TAO's test, " << failed << " failed";
  return s.str();
}

std::vector<std::vector<double>> calibration_starts(const Problem& pb, const CalibrationOptions& o) {
  o.validate();
  if (o.starts == 0) return {pb.nominal_on_scale()};
  const auto [lo, hi] = pb.bounds_on_scale();
  for (std::size_t e = 0; e < lo.size(); ++e)
    COSTATE_CHECK(std::isfinite(lo[e]) && std::isfinite(hi[e]) && lo[e] <= hi[e],
                  pb.parameter_file << ":" << pb.parameters[pb.estimated[e]].line << ": parameter '"
                                    << pb.parameters[pb.estimated[e]].id
                                    << "' needs finite bounds lower ≤ upper on its scale for random "
                                       "starts (got "
                                    << lo[e] << ", " << hi[e] << ")");
  // std::mt19937_64 is specified to the bit; the uniform numbers and the
  // permutations are made here (53-bit doubles, rejection-sampled integers)
  // rather than by std::uniform_*_distribution or std::shuffle, whose
  // algorithms differ between standard libraries.
  std::mt19937_64 rng(o.seed);
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };  // [0, 1)
  auto below = [&](std::uint64_t k) {  // uniform in [0, k)
    const std::uint64_t reject = (0 - k) % k;  // 2⁶⁴ mod k: the incomplete last block
    for (;;)
      if (const std::uint64_t r = rng(); r >= reject) return r % k;
  };
  const auto n = static_cast<std::size_t>(o.starts), dim = lo.size();
  std::vector<std::vector<double>> out(n, std::vector<double>(dim));
  if (o.sampling == Sampling::Uniform) {
    for (auto& x : out)
      for (std::size_t e = 0; e < dim; ++e) x[e] = lo[e] + uniform() * (hi[e] - lo[e]);
    return out;
  }
  // Latin hypercube: per dimension a random permutation π of the n strata
  // (Fisher–Yates), start i in stratum π(i), uniformly within it.
  std::vector<std::size_t> perm(n);
  for (std::size_t e = 0; e < dim; ++e) {
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[below(i)]);
    for (std::size_t i = 0; i < n; ++i) {
      const double u = (static_cast<double>(perm[i]) + uniform()) / static_cast<double>(n);
      out[i][e] = std::min(hi[e], lo[e] + u * (hi[e] - lo[e]));
    }
  }
  return out;
}

namespace {

StartFit fit_one(const Problem& pb, const std::vector<double>& x0, std::size_t index,
                 const CalibrationOptions& o, MPI_Comm comm) {
  const auto start = std::chrono::steady_clock::now();
  StartFit fit;
  fit.index = index;
  fit.initial = x0;
  Options ev = o.evaluation;
  ev.gradient = true;
  const auto [lo, hi] = pb.bounds_on_scale();
  optimize::Objective f;
  f.n = x0.size();
  f.objective_and_gradient = [&](std::span<const double> x, std::span<double> g) {
    const Result r = evaluate(pb, std::vector<double>(x.begin(), x.end()), ev, comm);
    for (std::size_t e = 0; e < g.size(); ++e) g[e] = -(r.gradient[e] + r.log_prior_gradient[e]);
    return -(r.llh + r.log_prior);
  };
  try {
    const optimize::TaoResult t = optimize::minimize(f, x0, lo, hi, o.optimizer);
    fit.x = t.x;
    fit.objective = t.objective;
    fit.iterations = t.iterations;
    fit.evaluations = t.function_evaluations;
    fit.converged = t.converged;
    fit.termination = t.termination;
    // llh alone at the final point (the objective also holds the prior).
    Options plain = o.evaluation;
    plain.gradient = false;
    fit.llh = evaluate(pb, fit.x, plain, comm).llh;
    fit.failed = !std::isfinite(fit.objective);
  } catch (const Error& e) {
    fit.failed = true;
    fit.termination = e.what();
  }
  if (fit.failed) {
    fit.objective = std::numeric_limits<double>::infinity();
    fit.llh = -std::numeric_limits<double>::infinity();
    if (fit.x.empty()) fit.x = x0;
  }
  fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return fit;
}

/// Every rank gets every start's fit: the owner's numbers in a row that is
/// zero elsewhere, summed (x + 0 = x: exact), the termination text likewise.
void gather(std::vector<StartFit>& fits, std::size_t n, int rank, int size, MPI_Comm comm) {
  constexpr std::size_t kText = 240;  // bytes of the termination / error text kept
  const std::size_t width = 8 + 2 * n, m = fits.size();
  std::vector<double> rows(m * width, 0.0);
  std::vector<unsigned char> text(m * kText, 0);
  for (std::size_t i = 0; i < m; ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(size)) != rank) continue;
    const StartFit& f = fits[i];
    double* r = rows.data() + i * width;
    r[0] = f.failed ? 0.0 : f.objective;  // finite in the sum; failures are flagged in r[5]
    r[1] = f.failed ? 0.0 : f.llh;
    r[2] = f.iterations;
    r[3] = static_cast<double>(f.evaluations);
    r[4] = f.converged;
    r[5] = f.failed;
    r[6] = f.seconds;
    r[7] = rank;
    std::copy(f.initial.begin(), f.initial.end(), r + 8);
    std::copy(f.x.begin(), f.x.end(), r + 8 + n);
    std::memcpy(text.data() + i * kText, f.termination.data(), std::min(kText - 1, f.termination.size()));
  }
  MPI_Allreduce(MPI_IN_PLACE, rows.data(), static_cast<int>(rows.size()), MPI_DOUBLE, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, text.data(), static_cast<int>(text.size()), MPI_UNSIGNED_CHAR, MPI_SUM, comm);
  for (std::size_t i = 0; i < m; ++i) {
    const double* r = rows.data() + i * width;
    StartFit& f = fits[i];
    f.index = i;
    f.failed = r[5] != 0.0;
    f.objective = f.failed ? std::numeric_limits<double>::infinity() : r[0];
    f.llh = f.failed ? -std::numeric_limits<double>::infinity() : r[1];
    f.iterations = static_cast<int>(r[2]);
    f.evaluations = static_cast<std::int64_t>(r[3]);
    f.converged = r[4] != 0.0;
    f.seconds = r[6];
    f.rank = static_cast<int>(r[7]);
    f.initial.assign(r + 8, r + 8 + n);
    f.x.assign(r + 8 + n, r + 8 + 2 * n);
    f.termination.assign(reinterpret_cast<const char*>(text.data() + i * kText));
  }
}

}  // namespace

Calibration calibrate(const Problem& pb, const CalibrationOptions& options, MPI_Comm comm) {
  options.validate();
  int mpi_up = 0, rank = 0, size = 1;
  MPI_Initialized(&mpi_up);
  if (mpi_up) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }
  const std::vector<std::vector<double>> x0 = calibration_starts(pb, options);
  Calibration c;
  c.ids = pb.estimated_ids();
  c.best_tolerance = options.best_tolerance;
  c.starts.resize(x0.size());
  if (x0.size() == 1) {
    // One fit on every rank, each evaluation's experiments over the ranks.
    c.starts[0] = fit_one(pb, x0[0], 0, options, comm);
  } else {
    // Progress (rank 0's starts): start k of n and the best −llh so far.
    Progress progress("start", static_cast<double>(x0.size()));
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < x0.size(); ++i)
      if (static_cast<int>(i % static_cast<std::size_t>(size)) == rank) {
        c.starts[i] = fit_one(pb, x0[i], i, options, MPI_COMM_SELF);
        c.starts[i].rank = rank;
        if (!c.starts[i].failed) best = std::min(best, c.starts[i].objective);
        std::ostringstream note;
        note.precision(8);
        note << "best objective " << best;
        progress.update(static_cast<double>(i + 1), note.str());
      }
    if (size > 1) gather(c.starts, pb.estimated.size(), rank, size, comm);
  }
  const std::vector<std::size_t> order = c.waterfall();
  c.best_index = order.front();
  if (c.best().failed)
    throw Error(pb.file + ": no start of the calibration succeeded; the first error: " +
                c.starts.front().termination);
  for (const StartFit& f : c.starts)
    c.at_best += !f.failed && f.objective <= c.best().objective + options.best_tolerance;
  return c;
}

void write_calibration_hdf5(const std::string& path, const Calibration& c, const optimize::FitVerdict* verdict,
                            const Provenance& provenance) {
  using detail::H5, detail::write_doubles, detail::write_ids;
  H5 file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  COSTATE_CHECK(file.id >= 0, path << ": cannot create the HDF5 file");
  H5 group(H5Gcreate2(file.id, "calibration", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  COSTATE_CHECK(group.id >= 0, path << ": cannot create group /calibration");
  write_ids(group.id, "/calibration", "ids", c.ids, path);
  const std::size_t m = c.starts.size(), n = c.ids.size();
  std::vector<double> objective, llh, converged, failed, iterations, initial, x, waterfall;
  for (const StartFit& f : c.starts) {
    objective.push_back(f.objective);
    llh.push_back(f.llh);
    converged.push_back(f.converged);
    failed.push_back(f.failed);
    iterations.push_back(f.iterations);
    initial.insert(initial.end(), f.initial.begin(), f.initial.end());
    x.insert(x.end(), f.x.begin(), f.x.end());
  }
  for (std::size_t i : c.waterfall()) waterfall.push_back(c.starts[i].objective);
  write_doubles(group.id, "/calibration", "best_x", c.best().x, n, 0, path);
  write_doubles(group.id, "/calibration", "best_llh", {c.best().llh}, 1, 0, path);
  write_doubles(group.id, "/calibration", "waterfall", waterfall, m, 0, path);
  write_doubles(group.id, "/calibration", "objective", objective, m, 0, path);
  write_doubles(group.id, "/calibration", "llh", llh, m, 0, path);
  write_doubles(group.id, "/calibration", "converged", converged, m, 0, path);
  write_doubles(group.id, "/calibration", "failed", failed, m, 0, path);
  write_doubles(group.id, "/calibration", "iterations", iterations, m, 0, path);
  write_doubles(group.id, "/calibration", "initial", initial, m, n, path);
  write_doubles(group.id, "/calibration", "x", x, m, n, path);
  if (verdict) {
    detail::write_text(group.id, "/calibration", "fit_status", optimize::to_string(verdict->status), path);
    detail::write_text(group.id, "/calibration", "convergence", verdict->describe(), path);
    detail::write_text(group.id, "/calibration", "status", verdict->file_status(), path);
  }
  detail::write_provenance(file.id, provenance.command, provenance.settings, path);
}

}  // namespace costate::petab
