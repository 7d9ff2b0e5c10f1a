#!/usr/bin/env bash
# Sets up costate on a fresh Debian 12 machine and runs the whole test suite:
# installs the Debian packages, builds everything (Release, -Wall -Wextra),
# and runs ctest (unit, mpi and regression tests; MPI tests use mpiexec).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${COSTATE_BUILD_DIR:-$root/build}"
jobs="${COSTATE_JOBS:-$(nproc)}"

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
