#!/usr/bin/env bash
# One instrumented build (AddressSanitizer + UndefinedBehaviorSanitizer; with clang also libFuzzer's
# coverage and the fuzz targets, which scripts/fuzz.sh then runs from the same folder) and the test suite
# under it: every `unit` and `integration` test and the `long` test labelled `long-representative` (one
# representative statistical run; the Release stage runs every long test). Any sanitizer report aborts the
# test that triggered it, so the suite fails. SANITIZE_LABELS=. runs every test.
# Usage: scripts/sanitize.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-asan}
labels=${SANITIZE_LABELS:-unit|integration|long-representative}
cc=$(command -v clang || command -v clang-14 || true); cxx=$(command -v clang++ || command -v clang++-14 || true)
compilers=()
[[ -n $cc && -n $cxx && ! -f $build/CMakeCache.txt ]] && compilers=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON "${compilers[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# As scripts/test.sh: a test that fails is run once more.
ctest --test-dir "$build" -j"$(nproc)" -L "$labels" --output-on-failure --repeat until-pass:2 | tee "$build/ctest.log"
"$root/scripts/slowest-tests.sh" "$build/ctest.log"
