#!/usr/bin/env bash
# Builds Tessera's container image from the Dockerfile at the project root, with podman or docker (whichever
# is installed; podman first). TAG defaults to tessera:<short commit>, or tessera:dev outside a git checkout.
#   scripts/build-image.sh [TAG]        e.g. scripts/build-image.sh registry.example.com/tessera:0.1.0
# Extra arguments for the builder go in BUILD_ARGS (e.g. BUILD_ARGS="--build-arg NODE_IMAGE=node:22-bookworm").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-tessera:$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo dev)}
if command -v podman >/dev/null 2>&1; then
  builder=podman
elif command -v docker >/dev/null 2>&1; then
  builder=docker
else
  echo "build-image.sh: neither podman nor docker is installed. On Debian 12: sudo apt-get install podman" >&2
  echo "  (or docker.io), then run this again." >&2
  exit 1
fi
echo "building $tag with $builder (a first build compiles everything: several minutes)"
# shellcheck disable=SC2086  # BUILD_ARGS is meant to split into words
"$builder" build ${BUILD_ARGS:-} -t "$tag" -f "$root/Dockerfile" "$root"
echo "built $tag; run it with: $builder run --rm $tag --help"
