#!/usr/bin/env bash
# Sets up costate on a fresh Debian 12 machine and runs the whole test suite:
# installs the Debian packages, builds the library, the command line and the
# tests (Release, -Wall -Wextra; benchmarks only with COSTATE_BUILD_BENCHMARKS=ON),
# and runs ctest (unit, mpi and regression tests; MPI tests use mpiexec).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${COSTATE_BUILD_DIR:-$root/build}"
jobs="${COSTATE_JOBS:-$(nproc)}"

"$root/scripts/install-deps.sh"
# Benchmarks are not part of the test run (they add minutes of compile time
# on 2 cores); COSTATE_BUILD_BENCHMARKS=ON builds them too.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCOSTATE_BUILD_BENCHMARKS="${COSTATE_BUILD_BENCHMARKS:-OFF}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
