#!/usr/bin/env bash
# scripts/sanitize.sh [ctest arguments...]
#
# Builds costate with AddressSanitizer + UndefinedBehaviorSanitizer in a
# separate build directory (default build-sanitize/, SANITIZE_BUILD_DIR to
# change) and runs the ctest suite there, MPI tests included. Any ASan or
# UBSan report ends the process that made it with a non-zero exit (UBSan
# does not recover), so the test that ran it fails.
#
#   scripts/sanitize.sh                         # everything, the whole suite
#   SANITIZE_TARGETS="costate costate_cli input_test" scripts/sanitize.sh -R 'input|cli'
#
# SANITIZE_TARGETS builds only those targets (default: all); the arguments
# are passed to ctest (e.g. -R, -L unit, -E python). The Python module is
# not built: the interpreter is not instrumented, so its tests would need
# libasan preloaded into python3 (not done here). Nor are the fuzz smoke
# tests (COSTATE_FUZZ_CXX=OFF): they are clang ASan + UBSan builds of their
# own, and clang's sanitizer runtime cannot load this gcc-sanitized
# libcostate.
#
# Leaks: LeakSanitizer runs on every test; scripts/sanitize/lsan.supp lists
# the few third-party allocations it must ignore (each line says why).
#
# Cost: a sanitized TU compiles in 1.4–2.4x its Release time (the 71
# CPU-minutes measured before were an -O3 sanitized build, see below);
# docs/reliability.md has what was measured.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SANITIZE_BUILD_DIR:-$root/build-sanitize}"
jobs="${COSTATE_JOBS:-$(nproc)}"

sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# GCC 12 at -O1 with the sanitizers reports -Wmaybe-uninitialized inside
# std::variant's copy (DiscreteAdjoint::checkpointing, tests/ode/cvodes_test.cpp)
# that the Release build does not: a known false positive of that
# combination, silenced here only (the Release build keeps -Wall -Wextra).
nowarn="-Wno-maybe-uninitialized"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# -O1 -g1: line tables for the reports' stack traces at a fraction of -O2 -g's
# compile time. NDEBUG off: the library's debug-only asserts run too. The
# build type is "Sanitize", with no flags of its own: an empty one becomes
# Release (CMakeLists.txt), whose -O3 -DNDEBUG came after -O1 and won —
# the sanitized build was an -O3 one, several times slower to compile.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE= -DCMAKE_C_FLAGS_SANITIZE= \
  -DCMAKE_CXX_FLAGS="-O1 -g1 $sanitize $nowarn" -DCMAKE_C_FLAGS="-O1 -g1 $sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="$sanitize" -DCMAKE_SHARED_LINKER_FLAGS="$sanitize" \
  -DCOSTATE_BUILD_BENCHMARKS=OFF -DCOSTATE_PYTHON=OFF -DCOSTATE_FUZZ_CXX=OFF "${launcher[@]}" \
  ${COSTATE_PETAB_DIR:+-DCOSTATE_PETAB_DIR="$COSTATE_PETAB_DIR"} > /dev/null

if [[ -n ${SANITIZE_TARGETS:-} ]]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target ${SANITIZE_TARGETS}
else
  cmake --build "$build" -j "$jobs"
fi

# Every test's TIMEOUT (a hang guard, 400–900 s in the CMakeLists) times
# SANITIZE_TIMEOUT_SCALE (default 8): under ASan + UBSan with the DWARF
# unwinder below a test runs 3–10x its Release time (cross_method_test
# passed 600 s). ctest's --timeout cannot raise a test's own property, so
# the generated CTestTestfile.cmake files are edited after the configure.
scale="${SANITIZE_TIMEOUT_SCALE:-8}"
find "$build" -name CTestTestfile.cmake -print0 |
  xargs -0 perl -pi -e 's/TIMEOUT "(\d+)"/"TIMEOUT \"" . ($1 * '"$scale"') . "\""/ge'

# halt_on_error: the first report ends the process. detect_leaks: on, with
# the suppressions. abort_on_error=0: exit code, not SIGABRT (mpiexec reports
# a rank's non-zero exit either way). new_delete_type_mismatch: on (default).
# fast_unwind_on_malloc=0: allocation stacks by the DWARF unwinder, which
# walks through Debian's frame-pointer-less Open MPI plugins up to MPI_Init,
# where lsan.supp matches Open MPI's start-up state (the fast unwinder stops
# inside the plugin, and a dlclose'd plugin has no name to suppress by).
# The default depth (30 frames) is needed: a plugin's static constructors
# run under dlopen, ~20 frames below the MPI_Init that loaded it.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/scripts/sanitize/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# The docs test runs the pages' Python blocks, which need the module this
# build leaves out (above): it is excluded here (its C++ blocks are built
# and run by the Release suite). An -E of the caller's replaces this one.
ctest --test-dir "$build" --output-on-failure -j "$jobs" -E '^docs$' "$@"
