#!/usr/bin/env bash
# Sets up costate on a fresh Debian 12 machine and runs the whole test suite:
# installs the Debian packages, builds the library, the command line and the
# tests (Release, -Wall -Wextra; benchmarks only with COSTATE_BUILD_BENCHMARKS=ON),
# and runs ctest (unit, mpi, regression and python tests; MPI tests use
# mpiexec). Tests labelled `slow` (minutes each: the PEtab benchmark models'
# gradient checks) are left out unless COSTATE_SLOW_TESTS=1.
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
exclude=(-LE slow)
[[ "${COSTATE_SLOW_TESTS:-0}" == 1 ]] && exclude=()
ctest --test-dir "$build" --output-on-failure -j "$jobs" "${exclude[@]}"
