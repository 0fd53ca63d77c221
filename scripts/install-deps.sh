#!/usr/bin/env bash
# Installs Tessera's build and test dependencies from Debian 12 packages (only what is missing).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git python3
      nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev
      libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev sqlite3 libcpp-httplib-dev libcurl4-openssl-dev libgoogle-perftools-dev libssl-dev openssl libjs-chart.js python3-kubernetes
      clang libclang-rt-14-dev)
# The web portal: built with node and npm (a newer node already installed is kept); browser tests drive
# Debian's chromium through playwright-core.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
pkgs+=(chromium)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) != 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
