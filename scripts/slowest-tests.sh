#!/usr/bin/env bash
# The N (default 10) slowest tests of a ctest log (the lines "n/N Test #k: NAME ....   Passed   12.3 sec").
# Usage: scripts/slowest-tests.sh CTEST_LOG [N]
set -euo pipefail
echo "slowest tests ($(basename "$(dirname "$1")")):"
grep -E '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: ' "$1" | sed -E 's/^.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec.*$/\2 \1/' |
  sort -rn | head -n "${2:-10}" | awk '{ printf "  %8.1f s  %s\n", $1, $2 }'
