#!/usr/bin/env bash
# Installs Tessera's dependencies from Debian 12 packages (only what is missing).
#   scripts/install-deps.sh run    what building and running `tessera` needs (scripts/run.sh)
#   scripts/install-deps.sh        that, and what the tests need (scripts/test.sh): clang for the instrumented
#                                  build, chromium for the browser tests, python3-kubernetes for the
#                                  Kubernetes client tests
set -euo pipefail
what=${1:-test}
pkgs=(build-essential cmake ninja-build pkg-config git python3 ccache
      nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev libsqlite3-dev sqlite3
      libcpp-httplib-dev libcurl4-openssl-dev libgoogle-perftools-dev libssl-dev openssl libjs-chart.js
      libgtest-dev libgmock-dev libbenchmark-dev libpq-dev postgresql)
# The web portal: built with node and npm (a newer node already installed is kept).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
if [[ $what != run ]]; then
  # Browser tests drive Debian's chromium through playwright-core; the instrumented build is clang's.
  pkgs+=(python3-kubernetes clang libclang-rt-14-dev chromium)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) != 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
