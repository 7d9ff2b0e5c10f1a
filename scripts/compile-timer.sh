#!/usr/bin/env bash
# A compiler/linker launcher that logs the CPU time (user + sys), the wall
# time and the output of every compile and link, one line each, to
# $COSTATE_TIMING_LOG: "<unix time> <cpu s> <wall s> <output> <exit status>".
# Needs /usr/bin/time (Debian package `time`). CPU time is the measure to compare on a shared machine (wall depends on
# the load). Usage (a fresh build directory):
#   export COSTATE_TIMING_LOG=$PWD/timing.log
#   cmake -S . -B build-timing -DCMAKE_BUILD_TYPE=Release \
#     -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/scripts/compile-timer.sh \
#     -DCMAKE_C_COMPILER_LAUNCHER=$PWD/scripts/compile-timer.sh \
#     -DCMAKE_CXX_LINKER_LAUNCHER=$PWD/scripts/compile-timer.sh
#   cmake --build build-timing -j2
#   sort -k2 -g -r timing.log | head -20                  # the longest steps
#   awk '{s += $2} END {print s / 60 " CPU min"}' timing.log
set -u
log="${COSTATE_TIMING_LOG:?compile-timer.sh: set COSTATE_TIMING_LOG to a log file}"
out="" prev=""
for a in "$@"; do
  [[ "$prev" == "-o" ]] && out="$a"
  prev="$a"
done
times=$(mktemp)
/usr/bin/time -f "%U %S %e" -o "$times" "$@"
rc=$?
read -r user sys wall < "$times"
rm -f "$times"
printf '%s %s %s %s %s\n' "$(date +%s.%N)" "$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')" \
  "$wall" "$out" "$rc" >> "$log"
exit "$rc"
