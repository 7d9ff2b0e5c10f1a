#!/usr/bin/env bash
# Sets up costate on a fresh Debian 12 machine and runs the default example:
# installs the Debian packages, builds (Release), integrates Lotka–Volterra,
# prints the result and writes lotka_volterra.h5 in the current directory.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${COSTATE_BUILD_DIR:-$root/build}"
jobs="${COSTATE_JOBS:-$(nproc)}"

"$root/scripts/install-deps.sh"
# Ninja for a new build directory (it starts the CLI's objects before the
# library is linked); an existing one keeps the generator it was made with.
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs" --target costate_cli
"$build/bin/costate" run "$root/data/examples/lotka_volterra.yaml"
echo
echo "HDF5 output (h5ls -r lotka_volterra.h5):"
h5ls -r lotka_volterra.h5
