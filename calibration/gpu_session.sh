#!/usr/bin/env bash
# The one script a session with a GPU runs to calibrate that GPU type (the device tool runs it in
# a copy of this tree; $OUT comes back):
#
#   OUT=/some/dir calibration/gpu_session.sh h200          # or any [gpu] preset name
#
# 1. builds the CUDA microbenchmarks with nvcc alone (calibration/microbench/build_and_run.sh),
# 2. runs them (about 3-6 minutes on one GPU, stopped after 7; every raw file is written row by row, so a run cut
#    short still leaves complete rows), writing $OUT/<gpu>/raw/*.csv and the logs,
# 3. fits $OUT/<gpu>/<gpu>.toml when a working servesim binary is at hand (SERVESIM=path, or
#    build/servesim), which GPU machines with only the CUDA toolkit usually lack. Otherwise, back
#    on the development machine:
#      servesim fit --from-microbench OUT/<gpu>/raw --gpu <gpu> --db OUT/<gpu>/samples.db \
#        --out calibration/profiles/<gpu>.toml
#
# Exit code: 0 when the benchmarks ran (some may have failed: see raw/checks.csv), 1 when the
# build failed, 3 when no GPU is visible.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gpu=${1:?usage: OUT=DIR calibration/gpu_session.sh GPU_NAME [--quick]}
shift
out=${OUT:?set OUT to the directory whose files come back}/$gpu
limit=${SERVESIM_MICROBENCH_TIMEOUT:-420}
mkdir -p "$out/raw"
trap 'rm -rf "$out/build"' EXIT  # the binary need not come back

{
  echo "gpu_session.sh $gpu $*  ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi failed"
  "${NVCC:-nvcc}" --version 2>&1 | tail -2 || true
} > "$out/environment.txt"

if ! BUILD_DIR="$out/build" bash "$here/microbench/build_and_run.sh" --build-only --bin "$out/build/servesim-microbench" \
     > "$out/build.log" 2>&1; then
  echo "gpu_session.sh: building the microbenchmarks failed; see $out/build.log" >&2
  tail -20 "$out/build.log" >&2
  exit 1
fi

status=0
timeout "$limit" "$out/build/servesim-microbench" --out "$out/raw" --gpu "$gpu" "$@" 2> "$out/run.log" || status=$?
cat "$out/run.log" >&2
case $status in
  0) echo "gpu_session.sh: all benchmarks ran" >&2 ;;
  3) echo "gpu_session.sh: no CUDA GPU is visible here" >&2; exit 3 ;;
  4) echo "gpu_session.sh: some benchmarks failed (raw/checks.csv); the others' samples are complete" >&2 ;;
  124) echo "gpu_session.sh: stopped after ${limit}s; the rows written so far are complete" >&2 ;;
  *) echo "gpu_session.sh: the microbenchmarks exited with $status" >&2 ;;
esac
servesim=${SERVESIM:-$here/../build/servesim}
if [ -x "$servesim" ] && "$servesim" --version > /dev/null 2>&1; then
  "$servesim" fit --from-microbench "$out/raw" --gpu "$gpu" --db "$out/samples.db" --out "$out/$gpu.toml" \
    > "$out/fit.log" 2>&1 && echo "gpu_session.sh: wrote $out/$gpu.toml" >&2 \
    || { echo "gpu_session.sh: the fit failed; see $out/fit.log" >&2; tail -5 "$out/fit.log" >&2; }
else
  echo "gpu_session.sh: no runnable servesim here; fit later with:" >&2
  echo "  servesim fit --from-microbench $out/raw --gpu $gpu --db $out/samples.db --out calibration/profiles/$gpu.toml" >&2
fi
exit 0
