#!/usr/bin/env bash
# Strong scaling 1 -> 2 ranks of the 2-D heat benchmark (issue #8 item 10):
# forward and forward+adjoint (StoreAll), 256^2 and 1024^2, 100 steps.
# Each run of `mpiexec -n 2 bench_pde_heat` times rank 0 alone first and then
# both ranks, in one process group, so every efficiency is a ratio from ONE
# run. The machine is shared: the script repeats each size RUNS times,
# records `uptime` before each run and prints the best efficiency with the
# load it was measured at.
#
#   bench/scaling.sh [build-dir] [runs=3] [sizes="256 1024"] [steps=100] [repeats=3]
set -euo pipefail
build=${1:-build}
runs=${2:-3}
sizes=${3:-"256 1024"}
steps=${4:-100}
repeats=${5:-3}
bin="$build/bench/bench_pde_heat"
[[ -x "$bin" ]] || { echo "scaling.sh: $bin not found: build the bench_pde_heat target" >&2; exit 1; }
mpi=(mpiexec -n 2)
if [[ $(id -u) == 0 ]]; then mpi+=(--allow-run-as-root); fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for n in $sizes; do
  best_f=0 best_g=0 load_f="" load_g=""
  for ((r = 1; r <= runs; ++r)); do
    load=$(uptime | sed 's/.*load average: //')
    "${mpi[@]}" "$bin" "$n" "$steps" "$repeats" >"$log" 2>&1 || { cat "$log"; exit 1; }
    f=$(sed -n 's/.*strong scaling: forward 1 rank.*efficiency \([0-9]*\)%.*/\1/p' "$log")
    g=$(sed -n 's/.*strong scaling: forward+adjoint.*efficiency \([0-9]*\)%.*/\1/p' "$log")
    echo "n=$n run $r (load $load): forward efficiency ${f}%, forward+adjoint ${g}%"
    grep -E "strong scaling|forward:|StoreAll" "$log" | sed 's/^/    /'
    if ((f > best_f)); then best_f=$f load_f=$load; fi
    if ((g > best_g)); then best_g=$g load_g=$load; fi
  done
  echo "BEST n=$n: forward ${best_f}% (load $load_f), forward+adjoint ${best_g}% (load $load_g)"
done
