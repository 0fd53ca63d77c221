#!/usr/bin/env bash
# Runs the libFuzzer targets for FUZZ_SECONDS each (default 60), FUZZ_JOBS at a time (default: the number of
# cores), from their seed corpora fuzz/corpus/<target>. The targets come from the instrumented clang build
# that scripts/sanitize.sh makes (-DTESSERA_SANITIZE=ON with clang, default folder build-asan): run that
# first and the build here is a no-op. New inputs go to BUILD_DIR/corpus (the checkout's seeds stay as
# they are); a crash, leak or timeout stops that target, leaves its input in BUILD_DIR/artifacts and fails
# the script (after the other targets ran). Usage: scripts/fuzz.sh [BUILD_DIR] [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-asan}
shift $(( $# > 0 ? 1 : 0 ))
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-$(nproc)}
cc=$(command -v clang || command -v clang-14); cxx=$(command -v clang++ || command -v clang++-14)
compilers=()
[[ ! -f $build/CMakeCache.txt ]] && compilers=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON "${compilers[@]}" >/dev/null
grep -q "CMAKE_CXX_COMPILER_ID:.*Clang\|CMAKE_CXX_COMPILER:.*clang" "$build/CMakeCache.txt" ||
  { echo "$build was configured with another compiler than clang: libFuzzer needs clang"; exit 1; }
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cd "$root/fuzz" && ls fuzz_*.cc | sed 's/\.cc$//')
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p "$build/artifacts"

# One target: its verdict line on stdout, exit status 1 on a finding.
run_one() {
  local t=$1 log=$build/$1.log
  mkdir -p "$build/corpus/$t"
  if ! "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "$t: FAILED (reproducer in $build/artifacts; log $log)"
    return 1
  fi
  echo "$t: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)s, no crash"
}

failed=0 running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=$((failed + 1))
  running=$((running - 1))
done
(( failed == 0 )) || { echo "$failed fuzz target(s) failed"; exit 1; }
