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
/// holding the simulated observable h of the row (17 significant digits).
/// Throws costate::Error naming the file when the measurement table cannot be
/// read again or no longer matches the problem, or `path` cannot be written.
void write_simulation_table(const Problem& problem, const Result& result, const std::string& path);

/// HDF5: /simulation/{time, measurement, simulation, sigma, observable,
/// condition, preequilibration (indices; −1: none)} with the attributes
/// observable_ids and condition_ids (one id per line); /llh, /chi2,
/// /log_prior; with a gradient /gradient and with the Fisher information
/// /fim (n × n), both with the attribute ids (Problem::estimated_ids());
/// root attributes problem (the YAML file) and status = "complete".
void write_result_hdf5(const Problem& problem, const Result& result, const std::string& path);

}  // namespace costate::petab
