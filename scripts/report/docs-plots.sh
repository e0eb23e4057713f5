#!/usr/bin/env bash
# Regenerates the example experiments' plots and tables in docs/experiments/ (see docs/experiments.md).
# Needs the public traces in ../shared/traces and gnuplot; takes about a minute on two cores.
#
#   scripts/report/docs-plots.sh            (SERVESIM_BIN=path/to/servesim to use another build)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
bin=$(realpath "${SERVESIM_BIN:-build/servesim}")
jobs=$(nproc)
out="$root/docs/experiments"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
cd "$tmp"

# Goodput vs arrival rate: continuous vs chunked vs PD on the Azure conversation trace.
"$bin" sweep "$root/experiments/sweeps/azure_conv_schedulers.toml" --db azure.db --jobs "$jobs" --quiet \
  > "$out/azure_conv_schedulers.txt"
"$bin" report azure.db --out azure
for plot in goodput slo_attainment ttft_cdf tpot_cdf; do
  cp "azure/$plot.png" "$out/azure_conv_schedulers_$plot.png"
  cp "azure/$plot.svg" "$out/azure_conv_schedulers_$plot.svg"
done
cp azure/timeline_0.png "$out/azure_conv_schedulers_timeline_continuous.png"
cp azure/timeline_2.png "$out/azure_conv_schedulers_timeline_pd.png"

"$bin" capacity "$root/experiments/sweeps/azure_conv_capacity.toml" --jobs "$jobs" --quiet \
  > "$out/azure_conv_capacity.txt"

# Capacity per router on the Mooncake conversation trace.
"$bin" capacity "$root/experiments/sweeps/mooncake_router_capacity.toml" --db mooncake.db --jobs "$jobs" --quiet \
  > "$out/mooncake_router_capacity.txt"
"$bin" report mooncake.db --out mooncake
for plot in goodput slo_attainment ttft_cdf; do
  cp "mooncake/$plot.png" "$out/mooncake_router_capacity_$plot.png"
  cp "mooncake/$plot.svg" "$out/mooncake_router_capacity_$plot.svg"
done

# The cheapest way to serve Llama-3-70B for the Azure trace at twice its rate.
"$bin" capacity "$root/experiments/sweeps/azure_conv_cheapest.toml" --jobs "$jobs" --quiet \
  > "$out/azure_conv_cheapest.txt"
echo "docs-plots: $(ls "$out" | wc -l) files in docs/experiments"
