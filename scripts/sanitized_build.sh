#!/usr/bin/env bash
# Configures and builds the one sanitized build directory that the CI's sanitizer step
# (scripts/ci-steps/10-sanitizers.sh: the whole test suite under AddressSanitizer and
# UndefinedBehaviorSanitizer) and its fuzz step (30-fuzz.sh: libFuzzer on every reader) share, so the
# CI compiles the project with sanitizers once.
#
# clang, -O1 with line tables (fast to build; stack traces name lines), ASan + UBSan with UBSan
# reports fatal, libFuzzer's coverage instrumentation on every object (-fsanitize=fuzzer-no-link; the
# fuzz_* binaries link libFuzzer itself), the GoogleTest suite and the fuzz targets, no CUDA.
#
#   scripts/sanitized_build.sh [DIR]     (DIR defaults to $SERVESIM_SAN_BUILD_DIR or build-san)
# Prints nothing on success but the build's timing; on failure, the end of the build log.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${SERVESIM_SAN_BUILD_DIR:-build-san}}

if ! command -v clang++ >/dev/null; then
  echo "sanitized build: clang++ not found (scripts/bootstrap.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$dir/build.ninja" ]; then
  CXX=clang++ meson setup "$dir" -Dfuzz=true -Dtests=true -Dcalibration=disabled --buildtype=plain \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dcpp_args=['-O1','-gline-tables-only','-fsanitize=fuzzer-no-link','-fno-sanitize-recover=undefined']" \
    >"${dir}.setup.log" 2>&1 || { cat "${dir}.setup.log" >&2; exit 1; }
  rm -f "${dir}.setup.log"
fi
TIMEFORMAT="sanitized build ($dir): %R s wall, %U s user + %S s sys CPU"
time ninja -C "$dir" >"$dir/ci-build.log" 2>&1 || { tail -50 "$dir/ci-build.log" >&2; echo "sanitized build failed" >&2; exit 1; }
