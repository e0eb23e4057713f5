#!/usr/bin/env bash
# Builds the servesim CUDA microbenchmarks with nvcc alone (the CUDA toolkit: nvcc, cuBLASLt, and
# NCCL when present; no meson, Boost or package manager needed) and runs them, writing raw samples
# to OUT_DIR for `servesim fit --from-microbench OUT_DIR`.
#
#   calibration/microbench/build_and_run.sh OUT_DIR [--gpu NAME] [--quick] [--only LIST] [--device N]
#                                           [--decode-layouts H:KV:D[:B],...]
#   calibration/microbench/build_and_run.sh --build-only --bin PATH [--arch 80,90]
#
# --arch: compute capabilities to build for (default: the visible GPU's, else 80,90). The binary
# goes to $BUILD_DIR (default OUT_DIR/build). Exit code: the benchmark's (0 ok, 3 no GPU, 4 some
# benchmark failed), or 1 when the build fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
cuda_home=${CUDA_HOME:-$(cd "$(dirname "$nvcc")/.." && pwd)}

out=""; bin=""; arch=""; build_only=0; run_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) build_only=1 ;;
    --bin) bin=$2; shift ;;
    --arch) arch=$2; shift ;;
    --gpu|--only|--device|--reps|--decode-layouts) run_args+=("$1" "$2"); shift ;;
    --quick) run_args+=("$1") ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "build_and_run.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
if [ "$build_only" = 0 ] && [ -z "$out" ]; then echo "build_and_run.sh: OUT_DIR is required" >&2; exit 2; fi
if [ ! -x "$nvcc" ]; then echo "build_and_run.sh: nvcc not found (set NVCC or CUDA_HOME)" >&2; exit 1; fi
if [ -z "$bin" ]; then bin="${BUILD_DIR:-$out/build}/servesim-microbench"; fi
mkdir -p "$(dirname "$bin")"

if [ -z "$arch" ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.' || true)
  [ -n "$arch" ] || arch=80,90
fi
gencode=()
for a in ${arch//,/ }; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done

nccl=(-lnccl)
if [ ! -f "$cuda_home/include/nccl.h" ] && [ ! -f /usr/include/nccl.h ]; then
  echo "build_and_run.sh: nccl.h not found, building without collectives" >&2
  nccl=(-DMB_NO_NCCL)
fi

sources=("$here"/main.cu "$here"/gemm.cu "$here"/memory.cu "$here"/attention.cu "$here"/launch.cu "$here"/collectives.cu)
echo "building $bin for sm_${arch//,/, sm_} with $nvcc" >&2
"$nvcc" -O3 -std=c++17 -lineinfo "${gencode[@]}" -I"$here" "${sources[@]}" -o "$bin" -lcublasLt -lcublas "${nccl[@]}"

[ "$build_only" = 1 ] && exit 0
mkdir -p "$out"
status=0
"$bin" --out "$out" "${run_args[@]}" || status=$?
exit $status
