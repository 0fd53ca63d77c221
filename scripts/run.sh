#!/usr/bin/env bash
# First command: installs what running needs (Debian packages), builds the `tessera` binary (Release, unity
# batches, ccache when a previous build left its cache) and starts the control plane on the embedded demo
# (`tessera serve --demo`, simulated clock x60, database build/demo.db). Extra arguments go to `tessera serve`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" run
echo "building tessera (Release; a first build takes a few minutes on two cores)"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target tessera
exec "$root/build/tessera" serve --demo --speed 60 --db "$root/build/demo.db" "$@"
