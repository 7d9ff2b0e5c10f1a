#!/usr/bin/env bash
# Prints costate and its peers side by side: installs the peer AD tools
# (Debian: ADOL-C, Sacado with the Teuchos headers it needs, Boost for
# ADOL-C's tapeless header; a no-op when present), builds the benchmarks
# (Release, -O3 -march=native) and runs, one after the other:
#   bench_w1_peers   W1 Burgers-1D gradient: costate tape vs ADOL-C, Sacado
#   bench_w2_peers   W2 16x16 Jacobian, forward vector mode: costate vs Sacado, ADOL-C
#   bench_w3_peers   W3 Rosenbrock Hessian-vector product: costate vs Sacado, ADOL-C
#   bench_integrate  cost of the ODE integration layer vs plain loops
# Each binary checks every tool against the reference values of
# shared/BENCHMARKS.md (and aborts on a mismatch) and prints ratios to the
# plain-double primal measured in the same run. The machine's load is printed
# before each: compare ratios, never absolute times across runs.
#
#   scripts/bench-peers.sh                 (build dir: build/, or $COSTATE_BUILD_DIR)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${COSTATE_BUILD_DIR:-$root/build}"
jobs="${COSTATE_JOBS:-$(nproc)}"

"$root/scripts/install-deps.sh"

peers=(libadolc-dev libtrilinos-sacado-dev libtrilinos-teuchos-dev libboost-dev)
missing=()
for p in "${peers[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "bench-peers: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCOSTATE_BUILD_PEER_BENCHMARKS=ON >/dev/null
targets=(bench_w1_peers bench_w2_peers bench_w3_peers bench_integrate)
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# Run from a scratch directory: ADOL-C reads .adolcrc from (and may write
# tape files to) the working directory.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "$(uname -m), $(nproc) CPUs, $(c++ --version | head -n 1)"
for t in "${targets[@]}"; do
  echo
  echo "== $t   (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$build/bench/$t"
done
