#!/usr/bin/env bash
# Installs exactly the Debian 12 packages costate builds, tests and runs with.
# A no-op when they are already present. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  # the quick start's generator (scripts/quickstart.sh: Ninja compiles the CLI
  # while the library's last objects build; 3 min 51 s against 4 min 12 s)
  ninja-build
  libopenmpi-dev openmpi-bin
  petsc-dev
  # the SLEPc cross-check of the Laplace posterior (tests/pde/laplace_slepc_test; skipped without it)
  slepc-dev
  libsundials-dev libsuitesparse-dev
  libtrilinos-kokkos-dev
  libeigen3-dev
  libhdf5-openmpi-dev hdf5-tools
  libyaml-cpp-dev
  libcli11-dev
  googletest libgtest-dev libgmock-dev
  libbenchmark-dev
  nlohmann-json3-dev
  libsbml5-dev
  # the libFuzzer smoke tests (tests/fuzz, label fuzz; skipped without them)
  clang-14 libclang-rt-14-dev
  # the Python module and plots (python/, docs/python.md) and their tests
  pybind11-dev python3-dev python3-numpy python3-scipy python3-matplotlib python3-h5py python3-pytest
  python3-mpi4py
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
