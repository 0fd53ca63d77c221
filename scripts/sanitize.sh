#!/usr/bin/env bash
# Builds everything (libraries, tests, tessera) with -DTESSERA_SANITIZE=ON (AddressSanitizer +
# UndefinedBehaviorSanitizer) in its own build folder and runs the whole test suite under it. Any sanitizer
# report aborts the test that triggered it, so the suite fails. Usage: scripts/sanitize.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-asan}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --repeat until-pass:2  # as scripts/test.sh
