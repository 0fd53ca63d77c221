#!/usr/bin/env bash
# Installs Tessera's build and test dependencies from Debian 12 packages (only what is missing).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git python3
      nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev
      libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev sqlite3 libcpp-httplib-dev libjs-chart.js
      clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) != 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
