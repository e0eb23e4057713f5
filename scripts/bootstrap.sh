#!/usr/bin/env bash
# Installs the Debian packages servesim needs (only those missing; needs root for that), then
# configures and builds servesim in build/ (release). Safe to run again: it rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ meson ninja-build pkg-config cmake
          libboost-graph-dev libboost-program-options-dev libtomlplusplus-dev
          libsqlitecpp-dev libsqlite3-dev libtbb-dev libgtest-dev nlohmann-json3-dev
          # servesim report draws its PNG and SVG plots with gnuplot (no X11; cairo terminals),
          # labelled in DejaVu Sans
          gnuplot-nox fonts-dejavu-core
          # the CI's fuzz step (scripts/ci-steps/30-fuzz.sh): libFuzzer comes with clang's runtime
          clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: installing packages needs root (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
ninja -C build
