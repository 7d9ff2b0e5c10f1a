#!/usr/bin/env bash
# Regenerates the synthetic calibration data sets in data/synthetic/ from their
# true models (data/synthetic/*_truth.yaml) with fixed seeds; the output is
# the same on every machine (see apps/synthetic_data/main.cpp).
#   bash scripts/make-synthetic-data.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${COSTATE_BUILD_DIR:-build}}
cmake --build "$build" --target costate_synthetic_data
gen="$build/bin/costate_synthetic_data"
"$gen" data/synthetic/lotka_volterra_truth.yaml --noise x=0.1 --noise y=0.1 --seed 1 \
    -o data/synthetic/lotka_volterra.csv
"$gen" data/synthetic/fitzhugh_nagumo_truth.yaml --noise v=0.05 --noise w=0.05 --seed 2 \
    -o data/synthetic/fitzhugh_nagumo.csv
"$gen" data/synthetic/van_der_pol_truth.yaml --noise x=0.05 --noise v=0.05 --seed 4 \
    -o data/synthetic/van_der_pol.csv
