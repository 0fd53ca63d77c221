#!/usr/bin/env bash
# First command: installs what is missing (Debian packages), builds Tessera in Release, and runs its main
# job on the embedded default (`tessera demo`). Extra arguments go to `tessera demo`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target tessera
exec "$root/build/tessera" demo "$@"
