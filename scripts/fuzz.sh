#!/usr/bin/env bash
# scripts/fuzz.sh TARGET SECONDS [libFuzzer options...]
#
# Builds (when missing or stale) and runs one libFuzzer target for SECONDS:
#   expr   the expression compiler and evaluator and the kernels built from
#          them (src/expr/program.cpp, src/expr/kernel.cpp)
#   csv    the CSV data reader (io::read_csv_data, src/io/input.cpp)
#   input  the YAML input loader, ODE and PDE inputs with --set overrides
#          (src/io/input.cpp)
#   sbml   the SBML importer, a document's text to sbml::read_string
#          (src/sbml/model.cpp)
#   petab  the PEtab reader, problem files as "%%"-separated sections to
#          petab::read (src/petab/read.cpp, src/sbml/model.cpp)
# The fuzzed sources are compiled with clang++ -fsanitize=fuzzer,address,
# undefined (coverage-guided, with sanitizers); everything else comes from an
# existing build's libcostate.so (BUILD, default ./build, configured and
# built as usual). Nothing here is part of the default build.
#
# Corpus: build-fuzz/corpus/TARGET (seeded from data/examples/ and the
# tests on first use; sbml and petab from the PEtab test suite in
# PETAB_DIR, default the build's COSTATE_PETAB_DIR, read there, never
# copied into the repository); crashes land in build-fuzz/crashes/TARGET/.
# Each crash becomes a regression test: a gtest (tests/expr, tests/io,
# tests/sbml, tests/petab) or an input under tests/fuzz/regressions/TARGET/,
# which every run replays first (FUZZ_REPLAY=0 skips that).
#
#   scripts/fuzz.sh expr 60
#   BUILD=build scripts/fuzz.sh input 600 -jobs=2
#   FUZZ_CHUNK=240 scripts/fuzz.sh petab 3600   # in fresh 240-s processes
set -euo pipefail

target=${1:?usage: scripts/fuzz.sh expr|csv|input|sbml|petab SECONDS [libFuzzer options]}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
out=${FUZZ_DIR:-$root/build-fuzz}
cxx=${CXX_FUZZ:-clang++-14}
command -v "$cxx" > /dev/null || cxx=clang++
mkdir -p "$out/obj" "$out/corpus/$target" "$out/crashes/$target"

case $target in
  expr) sources=(src/expr/program.cpp src/expr/kernel.cpp src/io/input.cpp) ;;
  csv | input) sources=(src/io/input.cpp src/expr/program.cpp) ;;
  sbml) sources=(src/sbml/model.cpp src/expr/program.cpp) ;;
  petab) sources=(src/petab/read.cpp src/sbml/model.cpp src/expr/program.cpp) ;;
  *) echo "fuzz.sh: unknown target '$target' (expr, csv, input, sbml, petab)" >&2; exit 2 ;;
esac

# The library's include directories, from the CMake build: flags.make
# (Makefiles generator) or the first library object's edge in build.ninja
# (Ninja).
flags_make=$build/CMakeFiles/costate.dir/flags.make
if [[ -f $flags_make ]]; then
  includes=$(sed -n 's/^CXX_INCLUDES = //p' "$flags_make")
elif [[ -f $build/build.ninja ]]; then
  includes=$(awk '/^build CMakeFiles\/costate\.dir\/src\/.*\.o:/ {f = 1}
                  f && /^  INCLUDES = / {sub(/^  INCLUDES = /, ""); print; exit}' "$build/build.ninja")
else
  echo "fuzz.sh: neither $flags_make nor $build/build.ninja found: configure and build $build first" >&2
  exit 2
fi
[[ -n $includes ]] || { echo "fuzz.sh: no include directories found for the library in $build" >&2; exit 2; }
[[ -f $build/libcostate.so ]] || { echo "fuzz.sh: build $build/libcostate.so first" >&2; exit 2; }

sanitize="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# -ffp-contract=off: as the library builds src/expr/kernel.cpp (its fused
# code rounds step by step, like its register evaluation).
cflags="-std=c++20 -O1 -g -fno-omit-frame-pointer -ffp-contract=off $sanitize"
launcher=$(command -v ccache || true)
objects=()
for src in "${sources[@]}" "tests/fuzz/${target}_fuzz.cpp"; do
  obj=$out/obj/$(echo "$src" | tr '/' '_').o
  # Stale when the source or any of the library's headers is newer (a
  # header change alters what the fuzzed sources compile to: an object
  # built against an old class layout crashes against the new library).
  if [[ ! -f $obj || $root/$src -nt $obj ||
        -n $(find "$root/include" "$root/tests/fuzz" -name '*.hpp' -newer "$obj" -print -quit) ]]; then
    echo "fuzz.sh: compiling $src" >&2
    # shellcheck disable=SC2086
    $launcher "$cxx" $cflags $includes -c "$root/$src" -o "$obj"
  fi
  objects+=("$obj")
done
exe=$out/${target}_fuzz
stale=0
[[ ! -x $exe || $build/libcostate.so -nt $exe ]] && stale=1
for o in "${objects[@]}"; do [[ $o -nt $exe ]] && stale=1; done
if ((stale)); then
  echo "fuzz.sh: linking $exe" >&2
  # shellcheck disable=SC2086
  "$cxx" $sanitize "${objects[@]}" -o "$exe" -L"$build" -Wl,-rpath,"$build" -lcostate -lcostate_petsc \
    $(pkg-config --libs yaml-cpp 2>/dev/null || echo -lyaml-cpp) \
    $(pkg-config --libs libsbml 2>/dev/null || echo -lsbml)
fi

# Seeds: data/examples and test inputs on first use.
corpus=$out/corpus/$target
if [[ -z $(ls -A "$corpus") ]]; then
  case $target in
    input)
      cp "$root"/data/examples/*.yaml "$corpus"/
      ;;
    csv)
      cp "$root"/data/examples/*.csv "$root"/data/synthetic/*.csv "$corpus"/ 2> /dev/null || true
      printf 't,x,y\n0.5,1,nan\n1,,2\n' > "$corpus/missing.csv"
      ;;
    expr)
      # Every expression of the examples' equations, objectives and fields.
      grep -ho '"[^"]*"' "$root"/data/examples/*.yaml | tr -d '"' | sort -u |
        while read -r e; do printf '%s' "$e" > "$corpus/$(printf '%s' "$e" | md5sum | cut -c1-16)"; done
      for e in "sin(x)^2 + cos(y)*a" "exp(-t/b)*x" "x > 0 ? sqrt(x) : -y" "pow(abs(x), 1.5)" \
               "min(x, max(y, a))" "-(-(-x))" "1e308*10" "log(0)" "tanh(x*a) / (1 + y^2)" \
               "a*x - b*x*y;b*x*y - a*y" "x*y;w*a - w/b;-w + t;w*w;(x - y)/(a + w);w" \
               "a*x;-(x*y) + a;t/(b*b);x - (a - y)"; do
        printf '%s' "$e" > "$corpus/$(printf '%s' "$e" | md5sum | cut -c1-16)"
      done
      ;;
    sbml | petab)
      petab=${PETAB_DIR:-$(sed -n 's/^COSTATE_PETAB_DIR:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)}
      suite=$petab/test-suite-v1
      [[ -d $suite ]] || echo "fuzz.sh: no PEtab test suite at '$suite' (PETAB_DIR): $target starts from the regressions only" >&2
      for case_dir in "$suite"/[0-9]*; do
        [[ -d $case_dir ]] || continue
        n=$(basename "$case_dir")
        if [[ $target == sbml ]]; then
          cp "$case_dir/_model.xml" "$corpus/suite_$n.xml"
        else
          # model, parameters, observables, measurements, conditions (see petab_fuzz.cpp)
          for f in _model.xml _parameters.tsv _observables.tsv _measurements.tsv _conditions.tsv; do
            sed -e '$a\' "$case_dir/$f"
            [[ $f == _conditions.tsv ]] || printf '%%%%\n'
          done > "$corpus/suite_$n"
          # A few with the problem file as a sixth section, for its keys.
          if [[ $n == 000[1-3] ]]; then
            { cat "$corpus/suite_$n"
              printf '%%%%\nformat_version: 1\nparameter_file: parameters.tsv\nproblems:\n'
              printf -- '- condition_files: [conditions.tsv]\n  measurement_files: [measurements.tsv]\n'
              printf '  observable_files: [observables.tsv]\n  sbml_files: [model.xml]\n'
            } > "$corpus/suite_${n}_yaml"
          fi
        fi
      done
      if [[ $target == sbml ]]; then
        # Benchmark models of moderate size (rules, compartments, functions).
        for x in "$petab"/benchmark/*/model_*.xml; do
          if [[ -f $x && $(stat -c %s "$x") -lt 10000 ]]; then cp "$x" "$corpus/"; fi
        done
      fi
      ;;
  esac
fi

# Seeds at the nesting bounds (issue 35): 30 000 parentheses, 100 000 unary
# minus signs, YAML and MathML nested 10 000 deep. Reaching 10⁵ levels needs
# inputs of 10⁵+ bytes, so -max_len is 2^18 unless the caller gives one.
repeat() { printf "%${2}s" '' | sed "s/ /$1/g"; }
deep=$corpus/deep_nesting
case $target in
  expr)
    [[ -f ${deep}_parens ]] || { repeat '(' 30000; printf 'x'; repeat ')' 30000; } > "${deep}_parens"
    [[ -f ${deep}_minus ]] || { repeat '-' 100000; printf 'x'; } > "${deep}_minus"
    ;;
  input)
    [[ -f ${deep}_equation ]] || {
      printf 'model:\n  states: [x]\n  equations: {x: "'; repeat '(' 30000; printf -- '-x'
      repeat ')' 30000; printf '"}\ninitial_state: {x: 1}\ntime: {end: 1}\n'; } > "${deep}_equation"
    [[ -f ${deep}_yaml ]] || { printf 'model: lotka_volterra\ndescription: '; repeat '[' 10000
      repeat ']' 10000; printf '\n'; } > "${deep}_yaml"
    ;;
  sbml)
    [[ -f ${deep}_mathml ]] || { printf '<sbml><model><listOfRules><assignmentRule variable="x"><math>'
      repeat '<apply><minus\/>' 10000; printf '<ci>x</ci>'; repeat '<\/apply>' 10000
      printf '</math></assignmentRule></listOfRules></model></sbml>\n'; } > "${deep}_mathml"
    ;;
esac
[[ " $* " == *" -max_len="* ]] || set -- "$@" -max_len=262144

# Leak detection stays on; Open MPI's start-up allocations (from
# libcostate's dependencies, before the first input) are not inputs' leaks.
# malloc_context_size=10 (default 30): allocation stacks 10 frames deep.
# ASan records every allocation's stack in its stack depot; as a run finds
# new paths the depot fills with unique 30-frame stacks and looking them up
# took 48 % of the petab target's time (perf), its rate falling from 1 100
# to 210 per second in 10 minutes. Reports still carry the full stack of
# the bad access; rerun a crash with ASAN_OPTIONS unset for deeper
# allocation stacks.
# quarantine_size_mb=64 (default 256): freed memory is held back that long
# for use-after-free reports, and ASan keeps it resident: the input target's
# RSS after loading its corpus was 626 MB with the default, 191 MB with 16;
# 64 MB is still far above what one execution frees (a 10⁵-deep input peaks
# at ~24 MB without ASan). The rest of a long run's growth (~8 MB per 1 000
# executions of `input`, with any quarantine) is ASan's allocator keeping
# what it freed, not the target's: the same target without ASan stays near
# 100 MB, a replay of the corpus in a loop keeps a constant heap
# (mallinfo2), and LeakSanitizer reports nothing (docs/reliability.md,
# "memory of a long fuzzing run"). -rss_limit_mb=2048 below bounds it; long
# runs go in FUZZ_CHUNK pieces.
# The sbml target keeps 30 frames: libsbml's MathML reader recurses once per
# element, and a leak of its own on malformed MathML (tests/fuzz/lsan.supp)
# is matched by name only when readMathML is within the recorded stack (a
# 10-frame stack of 11 nested <apply>s held only libsbml's unnamed inner
# frames: session 20's finding).
context=10
[[ $target == sbml ]] && context=30
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:malloc_context_size=$context:quarantine_size_mb=64}
# Leaks inside libsbml itself (tests/fuzz/lsan.supp says how each was confirmed).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/fuzz/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
dict=$root/tests/fuzz/${target}.dict
extra=()
[[ -f $dict ]] && extra+=("-dict=$dict")
# Regression inputs (tests/fuzz/regressions/TARGET/): each once, first.
regressions=$root/tests/fuzz/regressions/$target
if [[ ${FUZZ_REPLAY:-1} != 0 && -d $regressions && -n $(ls -A "$regressions") ]]; then
  echo "fuzz.sh: replaying $(ls "$regressions" | wc -l) regression input(s) of $target" >&2
  "$exe" -runs=1 -timeout=10 -rss_limit_mb=2048 "$regressions"/*
fi
# FUZZ_CHUNK=S: the SECONDS in fresh processes of S seconds each, on one
# corpus (ASan's stack depot, and with it the time per allocation, grows
# through a long process; see malloc_context_size above).
chunk=${FUZZ_CHUNK:-$seconds}
while ((seconds > chunk)); do
  "$exe" "$corpus" -max_total_time="$chunk" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/crashes/$target/" -print_final_stats=1 "${extra[@]}" "$@"
  seconds=$((seconds - chunk))
done
exec "$exe" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/crashes/$target/" -print_final_stats=1 "${extra[@]}" "$@"
