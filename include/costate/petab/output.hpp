#pragma once
/// \file
/// Files of `costate run` and `costate sensitivity` on a PEtab problem
/// (docs/petab.md): the PEtab simulation table and the HDF5 file of a
/// petab::Result. Each is written under PATH.partial and renamed to PATH
/// only once complete, so a failure never leaves a file that looks finished.

#include <string>

#include "costate/petab/problem.hpp"

namespace costate::petab {

/// The PEtab simulation table: the measurement table as read (every column,
/// every row, in order), its `measurement` column renamed `simulation` and
/// holding the simulated observable h of the row (17 significant digits);
/// a steady-state row keeps its time `inf`, PEtab's label for it.
/// Throws costate::Error naming the file when the measurement table cannot be
/// read again or no longer matches the problem, or `path` cannot be written.
void write_simulation_table(const Problem& problem, const Result& result, const std::string& path);

/// What a PEtab output file records beside its results, as root attributes:
/// the command that wrote it and its fully resolved settings (YAML text,
/// settings_yaml); costate_version is added by the writers.
struct Provenance {
  std::string command;   ///< "run", "sensitivity", "calibrate"
  std::string settings;  ///< YAML
};

/// The settings of an evaluation as YAML: the integrator (method, rtol,
/// atol), the sensitivity method, the steady-state tolerance, and every
/// observable's formula and noise model (distribution, transformation,
/// noise formula), in the observable table's order.
std::string settings_yaml(const Problem& problem, const Options& options);

/// HDF5: /simulation/{time, measurement, simulation, sigma, observable,
/// condition, preequilibration (indices; −1: none)} with the attributes
/// observable_ids and condition_ids (one id per line); a time of inf is a
/// steady-state measurement, and /simulation/time then carries the
/// attribute `inf` saying so; /llh, /chi2,
/// /log_prior; with a gradient /gradient and with the Fisher information
/// /fim (n × n), both with the attribute ids (Problem::estimated_ids());
/// root attributes problem (the YAML file) and status = "complete", and
/// the provenance every costate file carries: costate_version, command and
/// settings (Provenance).
void write_result_hdf5(const Problem& problem, const Result& result, const std::string& path,
                       const Provenance& provenance);
void write_result_hdf5(const Problem& problem, const Result& result, const std::string& path);



}  // namespace costate::petab
