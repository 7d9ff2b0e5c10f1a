#!/usr/bin/env bash
# Dimension independence and strong scaling of the PDE inversion (issue 16
# benchmarks): data/examples/heat2d_inversion.yaml (kappa from 49 point
# sensors, BiLaplacian prior, m = log kappa, Newton-CG + Laplace posterior)
# refined by `--set 'pde.grid.n=[n, n]'`, grids in increasing order.
#
# The sensors are points (x, y, t) in a CSV, so the one file
# data/examples/heat2d_inversion_sensors.csv (made on 32^2 by
# data/examples/make_heat2d_inversion_sensors.py) serves every grid: the
# observation operator interpolates each grid's cells at the same points.
#
# Writes, under OUT (default bench/data):
#   pde_inversion_scaling.csv  one row per run: grid, ranks, method, Newton
#                              iterations, CG iterations, PDE solves (MAP and
#                              posterior, by kind), eigenvalues > 1, chi2,
#                              distance to the truth, seconds, load before
#   pde_inversion_spectra.csv  i, lambda_i on each grid (plot-ready, wide)
# and the JSON of each run (costate calibrate --json) next to them.
#
#   bench/pde_inversion_scaling.sh [build-dir] [grids="32 64 128 256"]
# Environment:
#   OUT=bench/data          where the CSVs and JSONs go
#   RANK=20 OVERSAMPLING=10 the posterior's eigenpairs (k + p Hessian actions)
#   CAP_256=                Newton iteration cap on 256^2 (empty: the example's)
#   LBFGS_GRIDS="32"        grids also inverted by L-BFGS (MAP only; "" for none)
#   CAP_LBFGS=2000          L-BFGS iteration cap (the example's 30 is for Newton)
#   SCALING_N=256           grid of the 1 -> 2 rank MAP-only runs ("" for none)
#   CAP_SCALING=            Newton iteration cap of the scaling runs
# Every run is under nice -n 10; mpiexec gets --allow-run-as-root as root.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
grids=${2-"32 64 128 256"}
out=${OUT:-bench/data}
rank=${RANK-20}
over=${OVERSAMPLING-10}
cap256=${CAP_256:-}
lbfgs_grids=${LBFGS_GRIDS-32}
cap_lbfgs=${CAP_LBFGS-2000}
scaling_n=${SCALING_N-256}
cap_scaling=${CAP_SCALING:-}
bin="$build/bin/costate"
[[ -x "$bin" ]] || { echo "pde_inversion_scaling.sh: $bin not found: build the costate target" >&2; exit 1; }
example=data/examples/heat2d_inversion.yaml
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpiexec --oversubscribe)
if [[ $(id -u) == 0 ]]; then mpi+=(--allow-run-as-root); fi

table="$out/pde_inversion_scaling.csv"
echo "grid,unknowns,ranks,method,iterations,cg_iterations,map_pde_solves,map_forward,map_adjoint,map_incremental_forward,map_incremental_adjoint,posterior_pde_solves,hessian_actions,eigenvalues_above_1,lambda_1,effective_parameters,chi2,distance_to_truth,converged,map_seconds,posterior_seconds,wall_seconds,load_before,iteration_cap" >"$table"

# run NAME N RANKS METHOD POSTERIOR(yes|no) CAP
run() {
  local name=$1 n=$2 ranks=$3 method=$4 posterior=$5 cap=$6
  local sets=(--set "pde.grid.n=[$n, $n]" --set "calibration.optimizer.method=$method" --set "output.file=$tmp/$name.h5")
  if [[ $posterior == yes ]]; then
    sets+=(--set "calibration.posterior.rank=$rank" --set "calibration.posterior.oversampling=$over")
  else
    sets+=(--set "calibration.posterior=null")
  fi
  [[ -n $cap ]] && sets+=(--set "calibration.optimizer.max_iterations=$cap")
  local load t0 t1 rc=0
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  if ((ranks == 1)); then
    nice -n 10 "$bin" calibrate "$example" "${sets[@]}" --json >"$out/$name.json" 2>"$tmp/$name.err" || rc=$?
  else
    nice -n 10 "${mpi[@]}" -n "$ranks" "$bin" calibrate "$example" "${sets[@]}" --json >"$out/$name.json" \
      2>"$tmp/$name.err" || rc=$?
  fi
  t1=$(date +%s.%N)
  # exit 2: not converged (an iteration cap); anything else is a failure
  if ((rc != 0 && rc != 2)); then cat "$tmp/$name.err" >&2; exit 1; fi
  local wall
  wall=$(echo "$t1 - $t0" | bc)
  jq -r --arg n "$n" --arg r "$ranks" --arg wall "$wall" --arg load "$load" --arg cap "${cap:-example}" '
    [ ($n + "^2"), .unknowns, ($r | tonumber), .method, (.iterations | length - 1), .cg_iterations,
      ((.pde_solves.total) - (.posterior.pde_solves.total // 0)),
      (.pde_solves.forward - (.posterior.pde_solves.forward // 0)),
      (.pde_solves.adjoint - (.posterior.pde_solves.adjoint // 0)),
      (.pde_solves.incremental_forward - (.posterior.pde_solves.incremental_forward // 0)),
      (.pde_solves.incremental_adjoint - (.posterior.pde_solves.incremental_adjoint // 0)),
      (.posterior.pde_solves.total // ""), (.posterior.hessian_actions // ""),
      (if .eigenvalues then ([.eigenvalues[] | select(. > 1)] | length) else "" end),
      (if .eigenvalues then .eigenvalues[0] else "" end),
      (.posterior.effective_parameters // ""), .chi2, .distance_to_reference, (.status == "ok"),
      .seconds, (.posterior.seconds // ""), ($wall | tonumber), ($load | tonumber), $cap ] | @csv' \
    "$out/$name.json" | tr -d '"' >>"$table"
  echo "$name: $(tail -1 "$table")"
}

for n in $grids; do
  cap=""
  ((n == 256)) && cap=$cap256
  run "newton_${n}" "$n" 1 newton_cg yes "$cap"
done
for n in $lbfgs_grids; do
  run "lbfgs_${n}" "$n" 1 lbfgs no "$cap_lbfgs"
done
if [[ -n $scaling_n ]]; then
  run "scaling_${scaling_n}_np1" "$scaling_n" 1 newton_cg no "$cap_scaling"
  run "scaling_${scaling_n}_np2" "$scaling_n" 2 newton_cg no "$cap_scaling"
fi

# The spectra side by side: i, lambda_i on each grid run with a posterior.
spectra="$out/pde_inversion_spectra.csv"
cols=()
header="i"
for n in $grids; do
  if jq -e '.eigenvalues' "$out/newton_${n}.json" >/dev/null 2>&1; then
    jq -r '.eigenvalues[]' "$out/newton_${n}.json" >"$tmp/spec_$n"
    cols+=("$tmp/spec_$n")
    header+=",lambda_${n}x${n}"
  fi
done
if ((${#cols[@]} > 0)); then
  { echo "$header"; paste -d, <(seq 1 "$(wc -l <"${cols[0]}")") "${cols[@]}"; } >"$spectra"
  echo "wrote $spectra"
fi
echo "wrote $table"
