#!/usr/bin/env bash
# Builds the libFuzzer targets (-DTESSERA_FUZZ=ON, clang) in their own build folder and runs each target
# for FUZZ_SECONDS (default 60) from its seed corpus fuzz/corpus/<target>. New inputs go to BUILD_DIR/corpus
# (the checkout's seeds stay as they are); a crash, leak or timeout stops that target, leaves its input in
# BUILD_DIR/artifacts and fails the script (after the other targets ran). Usage: scripts/fuzz.sh [BUILD_DIR] [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-fuzz}
shift $(( $# > 0 ? 1 : 0 ))
secs=${FUZZ_SECONDS:-60}
cc=$(command -v clang || command -v clang-14); cxx=$(command -v clang++ || command -v clang++-14)
CC=$cc CXX=$cxx cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_FUZZ=ON >/dev/null
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cd "$root/fuzz" && ls fuzz_*.cc | sed 's/\.cc$//')
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p "$build/artifacts"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  log=$build/$t.log
  if ! "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "$t: FAILED (reproducer in $build/artifacts; log $log)"
    failed=$((failed + 1))
    continue
  fi
  echo "$t: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)s, no crash"
done
(( failed == 0 )) || { echo "$failed fuzz target(s) failed"; exit 1; }
