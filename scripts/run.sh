#!/usr/bin/env bash
# First command: installs what is missing (Debian packages), builds Tessera in Release, and starts the
# control plane on the embedded demo (`tessera serve --demo`, simulated clock x60, database build/demo.db).
# Extra arguments go to `tessera serve`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target tessera
exec "$root/build/tessera" serve --demo --speed 60 --db "$root/build/demo.db" "$@"
