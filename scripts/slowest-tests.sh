#!/usr/bin/env bash
# The N (default 10) slowest tests of a ctest log (the lines "n/N Test #k: NAME ....   Passed   12.3 sec").
# Usage: scripts/slowest-tests.sh CTEST_LOG [N]
# (No `head` in the pipeline: with pipefail, a reader that stops early would fail the script with SIGPIPE.)
set -euo pipefail
echo "slowest tests ($(basename "$(dirname "$1")")):"
sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec.*$/\2 \1/p' "$1" |
  sort -rn | awk -v n="${2:-10}" 'NR <= n { printf "  %8.1f s  %s\n", $1, $2 }'
